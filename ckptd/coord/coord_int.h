/* Internals of ckptd_coord: the handle, keys, record codecs and the copy
 * bookkeeping every write path shares. Not installed. */
#ifndef CKPTD_COORD_INT_H
#define CKPTD_COORD_INT_H

#include <lmdb.h>
#include <stdint.h>

#include "base/common.h"
#include "format/index.h"
#include "coord.h"

#define CKPTD_REC_VERSION 1u

/* Tables (README.md, "Schema"). */
struct ckptd_coord {
	MDB_env *env;
	MDB_dbi meta, jobs, versions, shards, copies, bynode, agents;
	MDB_dbi ec; /* the rs:K+M groups and finished encode plans (opaque records, coord_ec.c's) */
	ckpt_logger lg;
};

/* version flags */
#define CKPTD_VF_SEALED 1u /* committed at some tier once */

typedef struct ckptd_vrec {
	uint32_t world_size;
	uint32_t flags;
	uint32_t nshards;   /* shard records (ranks with any copy, live or deleting) */
	uint32_t ranks_any; /* ranks with a live copy */
	uint32_t ranks_at[CKPTD_COORD_TIERS];
	uint32_t deleting;  /* copies marked DELETING */
	uint64_t bytes;
	uint64_t lineage;
	uint64_t created_ns;
	uint64_t committed_ns;
} ckptd_vrec;
#define CKPTD_VREC_LEN 72u

typedef struct ckptd_srec {
	uint32_t live[CKPTD_COORD_TIERS]; /* live copies per tier */
	uint32_t ncopies;                 /* live + deleting */
	uint64_t bytes;
	uint64_t checksum;
	uint64_t lineage;
} ckptd_srec;
#define CKPTD_SREC_LEN 48u

enum { CKPTD_COPY_LIVE = 1, CKPTD_COPY_DELETING = 2 };
typedef struct ckptd_crec {
	uint32_t state; /* CKPTD_COPY_* */
	uint32_t gen;   /* inventory round of its node that last confirmed it */
	uint64_t since_ns;
} ckptd_crec;
#define CKPTD_CREC_LEN 24u

enum { CKPTD_AGENT_REC_UP = 1, CKPTD_AGENT_REC_DOWN = 2 };
typedef struct ckptd_arec {
	uint32_t state;
	uint32_t gen;      /* current inventory round */
	uint32_t in_round; /* a round has begun and not ended */
	uint64_t last_seen_ns;
	char address[CKPTD_ADDR_MAX + 1];
	char domain[CKPTD_NAME_MAX + 1];
} ckptd_arec;
#define CKPTD_AREC_MIN 28u

typedef struct ckptd_jrec {
	uint32_t world_size;
	ckptd_coord_policy policy;
	uint64_t created_ns;
	uint64_t epoch;      /* appended: its membership epoch (failure decisions); 0: none yet */
} ckptd_jrec;
#define CKPTD_JREC_LEN 40u
#define CKPTD_JREC_MIN 32u /* a record written before the epoch was appended */

/* codecs: decoders return 0, -CKPT_ECORRUPT or -CKPT_EFORMAT */
void ckptd__vrec_encode(uint8_t out[CKPTD_VREC_LEN], const ckptd_vrec *v);
int ckptd__vrec_decode(const uint8_t *b, size_t len, ckptd_vrec *v);
void ckptd__srec_encode(uint8_t out[CKPTD_SREC_LEN], const ckptd_srec *s);
int ckptd__srec_decode(const uint8_t *b, size_t len, ckptd_srec *s);
void ckptd__crec_encode(uint8_t out[CKPTD_CREC_LEN], const ckptd_crec *c);
int ckptd__crec_decode(const uint8_t *b, size_t len, ckptd_crec *c);
size_t ckptd__arec_encode(uint8_t *out, size_t cap, const ckptd_arec *a);
int ckptd__arec_decode(const uint8_t *b, size_t len, ckptd_arec *a);
void ckptd__jrec_encode(uint8_t out[CKPTD_JREC_LEN], const ckptd_jrec *j);
int ckptd__jrec_decode(const uint8_t *b, size_t len, ckptd_jrec *j);

/* Keys. Job and version (and rank) as libckpt's index lays them out
 * (len-prefixed job, big-endian numbers); a copy adds the tier bit and the
 * len-prefixed node; bynode puts the node first. */
#define CKPTD_KEY_MAX (CKPT_IDX_KEY_MAX + 2 + CKPTD_NAME_MAX)
size_t ckptd__job_key(uint8_t *out, const char *job);
size_t ckptd__copy_key(uint8_t *out, const char *job, uint64_t version, uint32_t rank,
                       uint32_t tier, const char *node);
size_t ckptd__node_key(uint8_t *out, const char *node, const char *job, uint64_t version,
                       uint32_t rank, uint32_t tier);
/* Splits a copy key (or the part of a node key after the node). */
int ckptd__copy_key_decode(const uint8_t *k, size_t len, char job[CKPTD_JOB_MAX + 1],
                           uint64_t *version, uint32_t *rank, uint32_t *tier,
                           char node[CKPTD_NAME_MAX + 1]);

int ckptd__tier_index(uint32_t tier); /* 0..3, or -1 unless exactly one bit */
int ckptd__node_valid(const char *node);

/* One write (or read) transaction and the changes it collected. */
typedef struct ckptd_tx {
	ckptd_coord *c;
	MDB_txn *txn;
	uint64_t now_ns;
	ckptd_coord_change *ch; /* versions touched, reported after commit */
	size_t nch, cap;
} ckptd_tx;

int ckptd__lmdb_err(ckptd_coord *c, const char *what, int rc);
int ckptd__begin(ckptd_coord *c, int rdonly, ckptd_tx *t);
/* Commits if err >= 0, aborts otherwise; calls fn for the changes that
 * were made. Returns err, or the commit's error. */
int ckptd__end(ckptd_tx *t, int err, ckptd_coord_change_fn fn, void *arg);

int ckptd__get_version(ckptd_tx *t, const char *job, uint64_t version, ckptd_vrec *v);
int ckptd__put_version(ckptd_tx *t, const char *job, uint64_t version, const ckptd_vrec *v);
int ckptd__get_shard(ckptd_tx *t, const char *job, uint64_t version, uint32_t rank, ckptd_srec *s);
int ckptd__get_agent(ckptd_tx *t, const char *node, ckptd_arec *a);
int ckptd__put_agent(ckptd_tx *t, const char *node, const ckptd_arec *a);

/* Derived state of a version record. */
uint32_t ckptd__committed_mask(const ckptd_vrec *v);
int ckptd__restorable(const ckptd_vrec *v);
void ckptd__version_view(const ckptd_vrec *v, uint64_t version, ckptd_coord_version *out);

/* Adds (or confirms) the copy. The version must exist (the caller created it
 * with its world size and lineage). gen: the node's inventory round.
 * *added: 1 if the copy is new. Returns 0, -CKPT_EMISMATCH (checksum differs
 * from the rank's other copies), or an LMDB error. */
int ckptd__add_copy(ckptd_tx *t, const char *job, uint64_t version, ckptd_vrec *v, uint32_t rank,
                    uint32_t tier, const char *node, uint64_t bytes, uint64_t checksum,
                    uint32_t gen, int *added);
/* Changes a live copy to DELETING (deleting = 1) or removes it (deleting =
 * 0), keeping counts; a version with no shards left is removed. v is
 * updated and written back (or removed). 0 if the copy is not there. */
int ckptd__drop_copy(ckptd_tx *t, const char *job, uint64_t version, ckptd_vrec *v, uint32_t rank,
                     uint32_t tier, const char *node, int deleting);
/* Drops every shard and copy of the version (lineage reset) and zeroes the
 * counts in v. */
int ckptd__reset_version(ckptd_tx *t, const char *job, uint64_t version, ckptd_vrec *v);
/* Seals v if a tier became complete; returns the tiers committed now that
 * were not before (given the mask before the change). */
uint32_t ckptd__settle(ckptd_tx *t, ckptd_vrec *v, uint32_t before);
/* Notes a change of the version for the report (before: state before). */
int ckptd__note(ckptd_tx *t, const char *job, uint64_t version, uint32_t committed_before,
                int restorable_before, const ckptd_vrec *after);

/* Creates the job record (retention off) if it is missing. */
int ckptd__ensure_job(ckptd_tx *t, const char *job, uint32_t world_size);

/* Gets the node's inventory round, creating the agent record if missing. */
int ckptd__agent_gen(ckptd_tx *t, const char *node, uint32_t *gen);

#endif
