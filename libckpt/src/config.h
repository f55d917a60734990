#ifndef CKPT_CONFIG_H
#define CKPT_CONFIG_H
#include <stdint.h>
#include <stdio.h>
#include "ckpt.h"
/* "64M", "1GiB", "4096" -> bytes. Returns 0 or -1. */
int ckpt__parse_size(const char *s, uint64_t *out);
/* Prints the settings table (name, variable, default, meaning). */
void ckpt__config_help(FILE *out);
#endif
