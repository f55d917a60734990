#ifndef CKPT_CONFIG_H
#define CKPT_CONFIG_H
/* The settings table lives in config.c: ckpt_config_init, ckpt_config_load_file,
 * ckpt_config_help (ckpt.h). Value parsers: base/parse.h. */
#include "ckpt.h"
#include "base/parse.h"
#endif
