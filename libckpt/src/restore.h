/* Restore helpers shared by restore.c and restore_lost.c. Internal. */
#ifndef CKPT_RESTORE_H
#define CKPT_RESTORE_H

#include <stddef.h>
#include <stdint.h>

#include "format/format.h"

struct ckpt_ctx;

/* Where a restore's verified bytes go: the context's regions, by the
 * shard's region index (map: -1 where not wanted). */
struct restore_arg {
	struct ckpt_ctx *ctx;
	int32_t *map;
};
/* The reader's sink and place callbacks over a restore_arg (reader.h). */
int ckpt__restore_sink(void *arg, uint32_t ri, uint64_t off, const void *data, size_t len);
uint8_t *ckpt__restore_place(void *arg, uint32_t ri, uint64_t off, size_t len);
/* Fills map / want (region_count entries each) for the context's regions;
 * -CKPT_EMISMATCH (logged) where a region is not in s or has another layout. */
int ckpt__restore_map(struct ckpt_ctx *ctx, uint64_t version, const ckpt_shard *s, int32_t *map, uint8_t *want);

/* restore_s3.c: the SHARED tier on an object store (CKPT_SHARED_DIR=s3://...). */
/* This rank's shard of version from the object store, as restore_shared
 * reads the directory tree's: committed by the coordinator's word (listed,
 * or noted in the root) or by the marker. */
int ckpt__restore_s3(struct ckpt_ctx *ctx, uint64_t version, int listed);
/* 1 if the object store's marker says version committed. */
int ckpt__restore_s3_marked(struct ckpt_ctx *ctx, uint64_t version);
/* Adds the job's versions in the object store to the ascending list *v (a
 * LIST: only when nobody could say which versions are committed), with
 * tree_only flags as ckpt__shared_merge. Returns how many it found, or
 * -ENOMEM (v unchanged); a store that cannot be read adds nothing. */
int ckpt__restore_s3_merge(struct ckpt_ctx *ctx, uint64_t **v, size_t *n, uint8_t **tree_only);
void ckpt__restore_s3_close(struct ckpt_ctx *ctx);
/* The context's object store client (opened at the first call; NULL when
 * it cannot be, said once). */
struct ckpt_s3tree *ckpt__restore_s3_tree(struct ckpt_ctx *ctx);

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
