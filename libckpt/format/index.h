/* The embedded LMDB index in <root>/index: versions and shards of every job
 * saved into the root. Keys are big-endian so range scans list versions in
 * order; values are explicit little-endian records (docs/format.md). LMDB
 * serializes write transactions across processes, which is what makes the
 * commit of a version from several rank processes one atomic step. */
#ifndef CKPT_INDEX_H
#define CKPT_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include "base/common.h"

#define CKPT_IDX_VERSION_REC_LEN 56u
#define CKPT_IDX_SHARD_REC_LEN 48u
#define CKPT_IDX_KEY_MAX (1 + 64 + 8 + 4)

typedef struct ckpt_idx_version {
	uint32_t state;        /* ckpt_version_state */
	uint32_t world_size;
	uint32_t shards_done;
	uint64_t bytes;
	uint64_t stored_bytes;
	uint64_t created_ns;
	uint64_t committed_ns;
	uint64_t lineage;      /* the run whose shards this version holds */
} ckpt_idx_version;

typedef struct ckpt_idx_shard {
	uint32_t tiers;        /* ckpt_tier mask where this shard is durable */
	uint64_t bytes;
	uint64_t stored_bytes;
	uint64_t footer_checksum;
	uint64_t durable_ns;
	uint64_t lineage;      /* the run that wrote it */
} ckpt_idx_shard;

typedef struct ckpt_index ckpt_index;

/* Opens (creating) the index in <root>/index. Returns 0, -errno,
 * -CKPT_EFORMAT for a newer schema, -CKPT_EINDEX. */
int ckpt__index_open(const char *root, const ckpt_logger *lg, ckpt_index **out);
void ckpt__index_close(ckpt_index *ix);

/* Creates the version as PENDING if it is not there. -CKPT_EMISMATCH if it
 * exists with another world size; -EEXIST if already COMMITTED and this rank's
 * shard is recorded; -CKPT_ESTATE if DELETING. */
int ckpt__index_begin(ckpt_index *ix, const char *job, uint64_t version, uint32_t world_size,
                      uint32_t rank, uint64_t created_ns, uint64_t lineage);
/* Records rank's durable shard and, in the same transaction, marks the
 * version COMMITTED when every rank is in. *committed tells which.
 * Shards of one version must come from one run of the job: a shard whose
 * lineage differs from the PENDING version's drops the shards recorded so
 * far (left by a run that crashed) and starts the version afresh. */
int ckpt__index_shard_done(ckpt_index *ix, const char *job, uint64_t version, uint32_t world_size,
                           uint32_t rank, const ckpt_idx_shard *s, int *committed);
/* The versions of job in `state` from version `from` up, ascending, in a
 * malloc'd array (*out, free it; NULL when *n is 0). */
int ckpt__index_select(ckpt_index *ix, const char *job, uint32_t state, uint64_t from,
                       uint64_t **out, size_t *n);
/* Versions a ckptd coordinator announced COMMITTED (COMMIT_NOTICE): with a
 * daemon, a job's ranks spread over nodes, each node's root holds its own
 * ranks' shards only, and this is how a root knows that a version it holds
 * part of is complete elsewhere. tiers accumulate. */
int ckpt__index_note_global(ckpt_index *ix, const char *job, uint64_t version, uint32_t tiers);
/* 0 and *tiers, or -ENOENT when the version was not announced. */
int ckpt__index_global(ckpt_index *ix, const char *job, uint64_t version, uint32_t *tiers);
/* Versions announced at a tier in mask, ascending. [out] out: free() it. */
int ckpt__index_global_list(ckpt_index *ix, const char *job, uint32_t mask, uint64_t **out, size_t *n);
/* Removes rank's shard records from PENDING versions >= from: a restarted
 * rank's shards of versions after the one it resumed from belong to its
 * previous run. Returns the number removed or a negative error; fn, if not
 * NULL, is called (outside any transaction) for each version touched first. */
typedef void (*ckpt_idx_drop_fn)(void *arg, uint64_t version);
int ckpt__index_drop_stale(ckpt_index *ix, const char *job, uint32_t rank, uint64_t from,
                           ckpt_idx_drop_fn before, void *arg);
int ckpt__index_get(ckpt_index *ix, const char *job, uint64_t version, ckpt_idx_version *v);
int ckpt__index_get_shard(ckpt_index *ix, const char *job, uint64_t version, uint32_t rank,
                          ckpt_idx_shard *s);
int ckpt__index_set_state(ckpt_index *ix, const char *job, uint64_t version, uint32_t state);
/* Removes the version and its shard records. */
int ckpt__index_remove(ckpt_index *ix, const char *job, uint64_t version);

/* Calls fn for each version of job in ascending order (stop early by
 * returning non-zero, which is passed back). */
typedef int (*ckpt_idx_version_fn)(void *arg, uint64_t version, const ckpt_idx_version *v);
int ckpt__index_each_version(ckpt_index *ix, const char *job, ckpt_idx_version_fn fn, void *arg);
/* Calls fn for each job that has versions. */
typedef int (*ckpt_idx_job_fn)(void *arg, const char *job);
int ckpt__index_each_job(ckpt_index *ix, ckpt_idx_job_fn fn, void *arg);

/* Reindex: replaces everything known about job by the given records in one
 * transaction. */
typedef struct ckpt_idx_rebuild_shard {
	uint64_t version;
	uint32_t rank;
	uint32_t world_size;
	uint64_t created_ns;
	ckpt_idx_shard rec;
} ckpt_idx_rebuild_shard;
int ckpt__index_rebuild_job(ckpt_index *ix, const char *job, const ckpt_idx_rebuild_shard *s,
                            size_t n);

/* Record codecs, exposed for the fuzz target. Decoders return 0 or
 * -CKPT_ECORRUPT / -CKPT_EFORMAT. */
void ckpt__idx_version_encode(uint8_t out[CKPT_IDX_VERSION_REC_LEN], const ckpt_idx_version *v);
int ckpt__idx_version_decode(const uint8_t *buf, size_t len, ckpt_idx_version *v);
void ckpt__idx_shard_encode(uint8_t out[CKPT_IDX_SHARD_REC_LEN], const ckpt_idx_shard *s);
int ckpt__idx_shard_decode(const uint8_t *buf, size_t len, ckpt_idx_shard *s);
/* Key codec: returns key length; decode returns 0 or -CKPT_ECORRUPT. */
size_t ckpt__idx_key(uint8_t *out, const char *job, uint64_t version, int with_rank, uint32_t rank);
int ckpt__idx_key_decode(const uint8_t *k, size_t len, char job[65], uint64_t *version,
                         uint32_t *rank, int *has_rank);

#endif
