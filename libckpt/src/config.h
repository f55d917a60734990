#ifndef CKPT_CONFIG_H
#define CKPT_CONFIG_H
#include <stdint.h>
#include <stdio.h>
#include "ckpt.h"
/* "64M", "1GiB", "4096" -> bytes. Returns 0 or -1. */
int ckpt__parse_size(const char *s, uint64_t *out);
/* A restore order ("local_mem,local_disk,peer_mem"): tier bits in order,
 * the rest 0. Returns how many, or -1 (empty, unknown or repeated tier). */
int ckpt__parse_order(const char *s, uint32_t order[4]);
/* Prints the settings table (name, variable, default, meaning). */
void ckpt__config_help(FILE *out);
#endif
