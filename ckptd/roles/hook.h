/* --on-failure (hook.c): the operator's command for each failure decision,
 * and the names both roles give failures. Internal to ckptd/roles. */
#ifndef CKPTD_ROLES_HOOK_H
#define CKPTD_ROLES_HOOK_H

#include "roles_int.h"

typedef struct ckptd_hook ckptd_hook;

/* cmd: the setting (borrowed: it outlives the hook); NULL or "": *out NULL,
 * and the calls below do nothing with it. Returns 0 or -ENOMEM. */
int ckptd_hook_new(const char *cmd, const ckptd_log *log, ckptd_hook **out);
/* Starts `/bin/sh -c CMD` for e (its values in CKPT_JOB, CKPT_NODE,
 * CKPT_RANKS, CKPT_EPOCH, CKPT_FAILURE, CKPT_FAILURE_TIME_NS); returns at once. */
void ckptd_hook_run(ckptd_hook *h, const ckptd_event *e);
/* Reaps children that exited, logging how (call from a timer). */
void ckptd_hook_reap(ckptd_hook *h);
void ckptd_hook_free(ckptd_hook *h);

/* "rank-died", "node-lost", "rank-hung"; then (1.6) "spare-chosen",
 * "spare-ready", "no-spare", "recovered". */
const char *ckptd_fail_name(uint32_t kind);
/* Ranks (sorted) as "0,2-5"; cut with ",..." when cap is short. */
void ckptd_ranks_text(const ckptd_member *m, uint32_t n, char *out, size_t cap);

#endif
