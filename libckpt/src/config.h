#ifndef CKPT_CONFIG_H
#define CKPT_CONFIG_H
/* The settings table lives in config.c: ckpt_config_init, ckpt_config_load_file,
 * ckpt_config_help (ckpt.h). Value parsers: base/parse.h. */
#include "ckpt.h"
#include "base/common.h"
#include "base/parse.h"

/* Whether cfg can open a context; logs what is wrong. Returns 0,
 * -CKPT_ECONFIG or -CKPT_ENAME. */
int ckpt__config_check(const ckpt_config *cfg, const ckpt_logger *lg);
/* cfg->interval: NULL or "off" gives mode 0, "N" mode 1 (every N steps),
 * "auto" mode 2. Returns 0 or -CKPT_ECONFIG. */
int ckpt__config_interval(const ckpt_config *cfg, int *mode, uint64_t *steps);
#endif
