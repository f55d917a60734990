/* Maintenance on a checkpoint root: crash-safe deletion, retention, rebuild
 * of the index from shard files. Used by ckpt_ctx_open (to finish deletions
 * a crashed process left) and by the ckpt tool. */
#ifndef CKPT_ADMIN_H
#define CKPT_ADMIN_H

#include "base/common.h"
#include "base/faults.h"
#include "index.h"

/* Deletes a version: mark DELETING (one transaction), remove its files,
 * fsync the directory, drop the records. A crash at any step leaves a
 * DELETING version that ckpt__admin_finish_deletes completes; a DELETING
 * version is never offered for restore. */
int ckpt__admin_delete(const char *root, ckpt_index *ix, const char *job, uint64_t version,
                       ckpt_faults *fs, const ckpt_logger *lg);
/* Completes every deletion of job (or of all jobs when job is NULL). */
int ckpt__admin_finish_deletes(const char *root, ckpt_index *ix, const char *job, ckpt_faults *fs,
                               const ckpt_logger *lg);
/* Keeps the newest `keep` committed versions; deletes older committed ones
 * and PENDING ones older than the newest committed (left by crashed saves).
 * *deleted receives how many versions went. */
int ckpt__admin_gc(const char *root, ckpt_index *ix, const char *job, uint32_t keep,
                   ckpt_faults *fs, const ckpt_logger *lg, uint32_t *deleted);
/* Retention after a commit: deletes the committed versions of job older
 * than the newest `keep` (PENDING ones are left alone: another rank may
 * still be writing them). *deleted receives how many went. */
int ckpt__admin_retain(const char *root, ckpt_index *ix, const char *job, uint32_t keep, ckpt_faults *fs,
                       const ckpt_logger *lg, uint32_t *deleted);
/* Rebuilds the index of job (all jobs when NULL) from the shard files:
 * each file's header, tail and footer are checked (and all chunk checksums
 * when verify_data); a version is COMMITTED when every rank's shard is there
 * and valid. *shards / *bad count files taken and refused. */
int ckpt__admin_reindex(const char *root, ckpt_index *ix, const char *job, int verify_data,
                        const ckpt_logger *lg, uint32_t *shards, uint32_t *bad);

#endif
