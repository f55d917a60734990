/* Elastic restore (reshard.c): a version saved by another number of ranks
 * or with another layout, restored into this rank's registered regions
 * from the pieces every saved rank holds. Internal. */
#ifndef CKPT_RESHARD_H
#define CKPT_RESHARD_H

#include <stdint.h>

#include "format/format.h"

struct ckpt_ctx;
struct ckpt_region;

/* The world size version was saved with: this root's index, else the
 * SHARED tree's commit marker (then *lineage is the marker's). Returns 0 or
 * -CKPT_ENOVERSION. */
int ckpt__reshard_world(struct ckpt_ctx *ctx, uint64_t version, uint32_t *world, uint64_t *lineage);

/* Fills every registered region from version's saved pieces: each saved
 * rank's shard from the first tier of the restore order that holds an
 * intact copy, only the chunks a region needs, each verified; a chunk that
 * fails moves that rank to its next tier. Blobs (ndim 0) come from this
 * rank's copy when the saved job had this rank, else from the lowest
 * saved rank's. Returns 0; -CKPT_EMISMATCH (a region missing, of another
 * dtype or shape, or not fully covered by saved pieces: the log names it);
 * -CKPT_ECORRUPT (pieces overlap or disagree, or no intact copy of a rank);
 * -ENOMEM. On error the regions' contents are unspecified. */
int ckpt__reshard_restore(struct ckpt_ctx *ctx, uint64_t version);

/* 1 if the saved region s has the registered region r's size and layout
 * (dtype, global shape, offsets, extents): the fast path may copy it. */
int ckpt__reshard_same_layout(const struct ckpt_region *r, const ckpt_fmt_region *s);

#endif
