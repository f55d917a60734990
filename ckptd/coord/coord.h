/*
 * coord.h — the coordinator's commit engine of ckptd (ckptd/coord/README.md).
 *
 * A library over one LMDB environment of its own (a directory given at open)
 * that keeps the cluster's view: jobs, versions, the shards of each rank and
 * every copy of a shard that some agent holds (tier, node). It decides when a
 * version becomes COMMITTED at a tier, what is restorable, where a rank reads
 * its shard from, and what retention deletes. No sockets, no threads: the
 * daemon calls it and sends the notices it returns.
 *
 * Commit rule: a version is COMMITTED at tier t while every rank has a live
 * copy at t. It is restorable while every rank has a live copy at some tier
 * and it was committed at some tier once. Both derive from the copies, which
 * agents can report again at any time (ckptd_coord_inventory): that is what
 * makes a coordinator whose database is gone rebuild the same committed set.
 *
 * Caveats
 *  - Every call that changes state is one LMDB write transaction: a crash
 *    (kill -9) leaves the state before or after the call, never between.
 *  - A handle may be used by one thread at a time (MDB_NOTLS is set, so
 *    several handles in several threads or processes on one directory are
 *    fine; LMDB serializes their writers).
 *  - Job calls see one job only. The node-scoped calls (agent_hello,
 *    agent_lost, inventory) are for the agent role; their change reports
 *    name jobs so that the daemon can notify each job's ranks.
 *  - Errors are 0 or a negative code: -errno or -CKPT_E* (ckpt.h).
 */
#ifndef CKPTD_COORD_H
#define CKPTD_COORD_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "wire/proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPTD_COORD_SCHEMA 1         /* on-disk schema of the global index */
#define CKPTD_COORD_TIERS 4          /* LOCAL_MEM, PEER_MEM, LOCAL_DISK, SHARED */
#define CKPTD_COORD_ALL_TIERS 0xfu
#define CKPTD_COORD_MAX_COPIES 32    /* copies of one shard a restore plan lists */

typedef struct ckptd_coord ckptd_coord;

/* Opens (creating) the index in dir. map_size: LMDB map bytes, 0 for the
 * default (16 GiB, sparse). Returns 0; -errno; -CKPT_EFORMAT if the schema
 * is newer than this build; -CKPT_EINDEX. [out] out: free with
 * ckptd_coord_close. */
int ckptd_coord_open(const char *dir, uint64_t map_size, ckptd_coord **out);
/* Closes; NULL accepted. */
void ckptd_coord_close(ckptd_coord *c);

/* ---------------------------------------------------------------- commit */

/* One durable copy reported by SHARD_DONE. Strings are borrowed for the call. */
typedef struct ckptd_coord_shard {
	const char *job;
	uint64_t version;
	uint32_t rank;
	uint32_t world_size; /* 0: unknown, the version must exist already */
	uint32_t tier;       /* one ckpt_tier bit */
	const char *node;    /* the agent holding the copy */
	uint64_t bytes;
	uint64_t checksum;   /* the shard's footer checksum */
	uint64_t lineage;    /* the run that wrote it */
} ckptd_coord_shard;

/* Records a durable copy. When it completes a tier (every rank has a copy
 * there) the version becomes COMMITTED at that tier in the same transaction.
 * A different lineage on a version never committed drops the shards of the
 * earlier run first. Idempotent: a duplicate changes nothing.
 * [out] committed: tiers that became committed by this call (send a
 * COMMIT_NOTICE for each bit), may be NULL.
 * Returns 0; -CKPT_ENAME (job or node); -EINVAL (tier, rank >= world size);
 * -CKPT_ENOVERSION (world_size 0 and no such version); -CKPT_EMISMATCH
 * (other world size, or a committed version of another lineage, or another
 * checksum for the same rank); -CKPT_EINDEX / -errno from LMDB. */
int ckptd_coord_shard_done(ckptd_coord *c, const char *job, uint64_t version, uint32_t rank,
                           uint32_t world_size, uint32_t tier, const char *node, uint64_t bytes,
                           uint64_t checksum, uint64_t lineage, uint32_t *committed);

typedef struct ckptd_coord_result {
	int status;         /* 0 or the error ckptd_coord_shard_done would return */
	uint32_t committed; /* tiers this item committed */
} ckptd_coord_result;

/* Many SHARD_DONEs in one transaction (one fsync): what an agent batching
 * its ranks' reports, or a coordinator draining its socket, should call.
 * An item that is refused gets its error in res[i].status and changes
 * nothing; an LMDB failure aborts the whole batch and is returned.
 * [out] res: n entries, may be NULL. Returns 0 or an LMDB error. */
int ckptd_coord_shard_done_batch(ckptd_coord *c, const ckptd_coord_shard *s, size_t n,
                                 ckptd_coord_result *res);

/* ---------------------------------------------------------------- queries */

typedef struct ckptd_coord_version {
	uint64_t version;
	uint32_t state;       /* CKPT_STATE_COMMITTED if restorable, DELETING if no
	                         live copy is left but some are being deleted,
	                         else PENDING */
	uint32_t world_size;
	uint32_t committed;   /* tier mask: every rank has a live copy there */
	uint32_t held;        /* tier mask: some rank has a live copy there */
	uint32_t restorable;  /* 1 or 0 */
	uint32_t ranks_any;   /* ranks with a live copy somewhere */
	uint32_t ranks_at[CKPTD_COORD_TIERS]; /* per tier bit index */
	uint32_t deleting;    /* copies marked DELETING */
	uint64_t bytes;       /* sum over the ranks' shards */
	uint64_t lineage;
	uint64_t created_ns;
	uint64_t committed_ns; /* first commit, 0 if never */
} ckptd_coord_version;

/* Calls fn for each version of job with version >= start, ascending; fn
 * returns non-zero to stop (passed back). The record is valid during the
 * call. Returns 0, fn's value, -CKPT_ENAME or an LMDB error. */
typedef int (*ckptd_coord_version_fn)(void *arg, const ckptd_coord_version *v);
int ckptd_coord_list(ckptd_coord *c, const char *job, uint64_t start, ckptd_coord_version_fn fn,
                     void *arg);
/* One version. Returns 0 or -CKPT_ENOVERSION. */
int ckptd_coord_get(ckptd_coord *c, const char *job, uint64_t version, ckptd_coord_version *out);

typedef struct ckptd_coord_copy_info {
	uint32_t rank;
	uint32_t tier;      /* one ckpt_tier bit */
	uint32_t deleting;  /* 1: marked DELETING, no longer counted */
	char node[CKPTD_NAME_MAX + 1];
	uint64_t bytes;     /* the rank's shard */
	uint64_t checksum;
} ckptd_coord_copy_info;
/* Calls fn for every copy of version (live and DELETING) of ranks >=
 * start_rank, by rank ascending; fn returns non-zero to stop (passed back).
 * Returns 0, fn's value, -CKPT_ENOVERSION or an error. */
typedef int (*ckptd_coord_copy_fn)(void *arg, const ckptd_coord_copy_info *ci);
int ckptd_coord_copies(ckptd_coord *c, const char *job, uint64_t version, uint32_t start_rank,
                       ckptd_coord_copy_fn fn, void *arg);

typedef struct ckptd_coord_copy {
	uint32_t tier;                   /* one ckpt_tier bit */
	char node[CKPTD_NAME_MAX + 1];
} ckptd_coord_copy;

typedef struct ckptd_coord_plan {
	uint64_t version;
	uint32_t world_size;
	uint32_t count;     /* copies[0..count), fastest first */
	uint64_t bytes;     /* this rank's shard */
	uint64_t checksum;
	uint64_t lineage;
	ckptd_coord_copy copies[CKPTD_COORD_MAX_COPIES];
} ckptd_coord_plan;

/* Where rank reads version (CKPT_LATEST: the newest restorable one) from.
 * Copies come fastest first: LOCAL_MEM on the rank's node, LOCAL_DISK on its
 * node, PEER_MEM, LOCAL_MEM of another node, SHARED, LOCAL_DISK of another
 * node. node: where the rank runs now; NULL if unknown (then LOCAL_* copies
 * count as the rank's own). Returns 0; -CKPT_ENOVERSION if the version is not
 * restorable (or none is); -EINVAL for a rank outside the world. */
int ckptd_coord_restore_plan(ckptd_coord *c, const char *job, uint64_t version, uint32_t rank,
                             const char *node, ckptd_coord_plan *out);

/* ---------------------------------------------------------------- agents */

/* A version whose committed tiers or restorability changed. */
typedef struct ckptd_coord_change {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t committed_before, committed_after;
	uint32_t restorable_before, restorable_after;
} ckptd_coord_change;
/* Called once per change, after the transaction committed. */
typedef void (*ckptd_coord_change_fn)(void *arg, const ckptd_coord_change *ch);

/* AGENT_HELLO: records (or updates) the agent and marks it up. domain may be
 * NULL or "". now_ns: the caller's clock. */
int ckptd_coord_agent_hello(ckptd_coord *c, const char *node, const char *address,
                            const char *domain, uint64_t now_ns);

/* The agent on node is gone: every copy it held (DRAM and its local disk) is
 * dropped and commit state recomputed; its SHARED copies stay (they are on
 * shared storage, which outlives the node). fn (may be NULL) hears each version
 * that changed. Returns the number of copies dropped, or an error. */
int ckptd_coord_agent_lost(ckptd_coord *c, const char *node, ckptd_coord_change_fn fn, void *arg);

/* AGENT_INVENTORY: what node holds, in batches; the batch with final set
 * ends a round, and copies of node that the round did not report are then
 * dropped (the agent is the source of truth). Each batch is one transaction
 * and applying it twice changes nothing. Entries of a version committed under
 * another lineage, or with no world size for an unknown version, are
 * skipped. fn (may be NULL) hears each version that changed.
 * Returns the number of entries skipped, or an error. */
int ckptd_coord_inventory(ckptd_coord *c, const char *node, const ckptd_held_shard *e, size_t n,
                          int final, ckptd_coord_change_fn fn, void *arg);

/* ---------------------------------------------------------------- rs:K+M */

/* The records the coordinator keeps for its rs:K+M groups across restarts
 * (table "ec"): opaque values under keys of the caller's (ckptd/roles/
 * coord_ec.c says what they hold), each written in a transaction of its
 * own. The values are the caller's to check when read back. */
#define CKPTD_COORD_EC_KEY_MAX 256
/* Stores val (vlen > 0) under key, or deletes key (vlen 0; absent: 0).
 * Returns 0, -EINVAL (no key, key over CKPTD_COORD_EC_KEY_MAX), or a store
 * error. */
int ckptd_coord_ec_put(ckptd_coord *c, const void *key, size_t klen, const void *val, size_t vlen);
/* Every record in key order, until fn returns nonzero; what fn is given
 * lives until it returns. Returns 0 or a store error. */
typedef int (*ckptd_coord_ec_fn)(void *arg, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen);
int ckptd_coord_ec_each(ckptd_coord *c, ckptd_coord_ec_fn fn, void *arg);

/* ---------------------------------------------------------------- retention */

typedef struct ckptd_coord_policy {
	uint32_t keep_dram;  /* DRAM copies (LOCAL_MEM, PEER_MEM) of the newest K restorable versions */
	uint32_t keep_disk;  /* disk copies (LOCAL_DISK, SHARED) of the newest M restorable versions */
	uint64_t keep_every; /* versions divisible by N keep their disk copies forever; 0: none */
} ckptd_coord_policy;

/* Stores job's world size (0: leave) and retention policy. */
int ckptd_coord_job_set(ckptd_coord *c, const char *job, uint32_t world_size,
                        const ckptd_coord_policy *p);
/* Returns 0 or -CKPT_ENOVERSION if the job is unknown. */
int ckptd_coord_job_get(ckptd_coord *c, const char *job, uint32_t *world_size,
                        ckptd_coord_policy *p);
/* The job's next membership epoch (one more than the last stored, 1 for a
 * job never decided about), stored in its record in one transaction, so
 * that epochs keep increasing across restarts. A job unknown so far gets a
 * record (retention off). Returns 0 or a negative code. */
int ckptd_coord_epoch_next(ckptd_coord *c, const char *job, uint64_t *epoch);

typedef struct ckptd_coord_delete {
	uint64_t version;
	uint32_t rank;
	uint32_t tier;
	char node[CKPTD_NAME_MAX + 1];
} ckptd_coord_delete;

/* Applies policy p (NULL: the job's stored one) to job: in one transaction,
 * marks DELETING every copy the policy drops, and returns every copy of the
 * job marked DELETING (new or left from before a crash). The newest
 * restorable version is never touched. Versions older than it that are not
 * restorable lose all their copies. The caller deletes each copy, then calls
 * ckptd_coord_delete_done. [out] out, n: malloc'd array, free() it.
 * Returns 0 or an error. */
int ckptd_coord_retention(ckptd_coord *c, const char *job, const ckptd_coord_policy *p,
                          ckptd_coord_delete **out, size_t *n);
/* Marks DELETING every live copy of one version at tiers (0: all tiers),
 * whatever the policy (an operator's explicit request), and returns every
 * DELETING copy of that version, for the caller to have deleted. Returns 0,
 * -CKPT_ENOVERSION if the job has no such version, or an error. */
int ckptd_coord_delete_version(ckptd_coord *c, const char *job, uint64_t version, uint32_t tiers,
                               ckptd_coord_delete **out, size_t *n);
/* node deleted every copy it held of version at tiers (COPIES_GONE):
 * forgets them, live or DELETING, in one transaction; a version left with
 * no copy is removed. fn (may be NULL) hears the change. Returns the number
 * of copies forgotten, or an error. Idempotent. */
int ckptd_coord_copies_gone(ckptd_coord *c, const char *job, uint64_t version, uint32_t tiers,
                            const char *node, ckptd_coord_change_fn fn, void *arg);
/* The copy is deleted: forgets it. Idempotent (0 if already gone). */
int ckptd_coord_delete_done(ckptd_coord *c, const char *job, uint64_t version, uint32_t rank,
                            uint32_t tier, const char *node);

/* ---------------------------------------------------------------- placement */

/* One node of the ring (place.c). */
typedef struct ckptd_place_node {
	const char *node;
	const char *domain; /* failure domain (rack); NULL or "": none */
	int eligible;       /* up, with a peer pool: may hold partner copies */
} ckptd_place_node;

/* Every node's partners, best first (place.c): for nodes[i], count[i]
 * indices into nodes at out[i * replicas ...]. The ring deals the failure
 * domains out in turn (name order within each); a node's partners are the
 * next eligible nodes along it, those of another domain before those of its
 * own. Never the node itself; fewer than replicas when the cluster is small.
 * Returns 0 or -ENOMEM. */
int ckptd_coord_place(const ckptd_place_node *nodes, size_t n, uint32_t replicas, size_t *out, size_t *count);

/* The failure domains a node names for rs:K+M groups (groups.c): the
 * labels its agent carries (--domain-host: the physical host; --domain:
 * the rack; --domain-switch, --domain-power). NULL or "": none of that
 * kind. */
enum { CKPTD_GDOM_HOST, CKPTD_GDOM_RACK, CKPTD_GDOM_SWITCH, CKPTD_GDOM_POWER, CKPTD_GROUP_DOMAINS };
typedef struct ckptd_group_node {
	const char *node;
	const char *dom[CKPTD_GROUP_DOMAINS];
	int eligible; /* up, with a peer pool */
} ckptd_group_node;

/* Forms groups of width (K + M) eligible nodes, no two members of a
 * group sharing a domain of any kind. [out] group[i], member[i]: node i's
 * group and its place in it (members in name order), UINT32_MAX for a
 * node in none; *ngroups. Nodes the domains leave over stay in none.
 * Returns 0 or -ENOMEM. */
int ckptd_coord_groups(const ckptd_group_node *nodes, size_t n, unsigned width, uint32_t *group, uint32_t *member,
                       size_t *ngroups);
/* Whether a and b share a failure domain of some kind (then no group may
 * hold both). */
int ckptd_coord_group_clash(const ckptd_group_node *a, const ckptd_group_node *b);

#ifdef __cplusplus
}
#endif

#endif
