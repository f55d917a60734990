/* Restore helpers shared by restore.c and restore_lost.c. Internal. */
#ifndef CKPT_RESTORE_H
#define CKPT_RESTORE_H

#include <stdint.h>

struct ckpt_ctx;

/* 1 if err says only that no copy was reached (none found, the tier not
 * available, a node or link down), as opposed to a copy that was read and
 * found wrong, a mismatch of the regions, or a local failure. */
int ckpt__restore_missed(int err);

/* A committed version (known_by: who said so, "the coordinator" or "this
 * root's index") none of whose copies of this rank's shard was reached:
 * logs one error naming the version, the rank and every copy the
 * coordinator knows of (tier, node, whether the node is up), and returns
 * -CKPT_EUNREACHABLE. A rank must stop on it: starting from scratch would
 * save new versions over a job whose checkpoint exists. */
int ckpt__restore_lost(struct ckpt_ctx *ctx, uint64_t version, const char *known_by);

#endif
