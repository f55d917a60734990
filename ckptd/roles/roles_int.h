/* Internals shared by the role files: the coordinator and agent objects,
 * the agent's index, and the in-process link used by --role both. */
#ifndef CKPTD_ROLES_INT_H
#define CKPTD_ROLES_INT_H

#include <stdint.h>

#include "base/common.h"
#include "base/faults.h"
#include "coord/coord.h"
#include "mem/pool.h"
#include "roles.h"

typedef struct ckptd_coordinator ckptd_coordinator;
typedef struct ckptd_agent ckptd_agent;


/* ---------------------------------------------------------------- coordinator */

int ckptd_coordinator_new(ckptd_server *srv, const ckptd_config *cfg, const ckptd_log *log,
                          ckptd_coordinator **out, char *err, size_t errcap);
void ckptd_coordinator_free(ckptd_coordinator *c);
/* Handlers (roles.c routes by session role). */
int ckptd_coordinator_handle(ckptd_coordinator *c, ckptd_session *s, const ckptd_msg *m);
/* Fills the coordinator part of STATUS_REPLY (entries are the caller's to free). */
int ckptd_coordinator_status(ckptd_coordinator *c, const char *job, ckptd_status_reply *out);
/* Frees what ckptd_coordinator_status added of the peer tier's groups. */
void ckptd__coord_groups_status_free(ckptd_status_reply *out);
/* Answers LIST_VERSIONS into out (entries malloc'd: free(out->entries)). */
int ckptd_coordinator_list(ckptd_coordinator *c, const ckptd_list_versions *req, ckptd_versions *out);

/* In-process agent (--role both): messages to it go through fn. */
typedef void (*ckptd_local_agent_fn)(void *arg, const ckptd_msg *m);
int ckptd_coordinator_local_attach(ckptd_coordinator *c, const char *node, ckptd_local_agent_fn fn, void *arg);
/* A message from the in-process agent (AGENT_HELLO, AGENT_INVENTORY, SHARD_DONE). */
/* SEG_WHERE: the up nodes holding a live PEER_MEM copy of (job, version,
 * rank). out->entries malloc'd: free it. */
int ckptd_coordinator_where(ckptd_coordinator *c, const ckptd_segment_request *m, ckptd_partners *out);
/* A PREEMPT notice (from an agent, the tool, or the in-process agent). */
int ckptd_coordinator_preempt(ckptd_coordinator *c, const ckptd_preempt *p);
int ckptd_coordinator_local_msg(ckptd_coordinator *c, const char *node, const ckptd_msg *m);

/* ---------------------------------------------------------------- agent */

int ckptd_agent_new(ckptd_server *srv, const ckptd_config *cfg, const ckptd_secret *cluster,
                    const ckptd_log *log, ckptd_coordinator *local, ckptd_agent **out, char *err,
                    size_t errcap);
void ckptd_agent_free(ckptd_agent *a);
int ckptd_agent_handle(ckptd_agent *a, ckptd_session *s, const ckptd_msg *m);
void ckptd_agent_pool_stats(ckptd_agent *a, uint64_t *bytes, uint64_t *used);

/* ---------------------------------------------------------------- job pools */

/* The agent's DRAM pools, one per job (agent_pools.c). */
typedef struct ckptd_jpools ckptd_jpools;
/* A job's pool became ready (err 0) or could not be made (err < 0). */
typedef void (*ckptd_jpools_ready_fn)(void *arg, const char *job, int err);
/* faults: the agent's (agent.pool_prepare), borrowed for the pools' life. */
int ckptd_jpools_new(ckptd_server *srv, const ckptd_config *cfg, const ckptd_log *log, ckpt_faults *faults,
                     ckptd_pool_evict_fn on_evict, void *evict_arg, ckptd_jpools_ready_fn on_ready, void *ready_arg,
                     ckptd_jpools **out);
/* Waits for pools being prepared, then closes every pool. Accepts NULL. */
void ckptd_jpools_free(ckptd_jpools *p);
/* A rank of job registered: its pool is prepared in the background when it
 * has none, releasing pools of jobs without ranks when the budget is short.
 * Returns 0, or -ENOSPC when no pool can be had (the rank writes to disk). */
int ckptd_jpools_ref(ckptd_jpools *p, const char *job);
/* A rank of job left. */
void ckptd_jpools_unref(ckptd_jpools *p, const char *job);
/* The job's pool if ready, else NULL; *preparing (may be NULL): 1 while it
 * is being prepared. */
ckptd_pool *ckptd_jpools_get(ckptd_jpools *p, const char *job, int *preparing);
/* Bytes held in segments across every pool. */
void ckptd_jpools_used(ckptd_jpools *p, uint64_t *used);
/* Calls fn for each ready pool with its stats (the metrics' gauges). */
void ckptd_jpools_each(ckptd_jpools *p, void (*fn)(void *arg, const char *job, const ckptd_pool_stats *st), void *arg);

/* ---------------------------------------------------------------- step times */

/* The coordinator's step-time table and straggler judge (steps.c). */
typedef struct ckptd_steps ckptd_steps;
/* Says an interval advice to the job's ranks (the coordinator: to every agent). */
typedef void (*ckptd_steps_announce_fn)(void *arg, const ckptd_interval_notice *n);
int ckptd_steps_new(const ckptd_config *cfg, const ckptd_log *log, ckptd_metrics *mx, ckptd_steps_announce_fn fn,
                    void *arg, ckptd_steps **out);
void ckptd_steps_free(ckptd_steps *s);
/* Takes one STEP_REPORT. Returns 0, -EINVAL (rank beyond the bound, step
 * time 0) or -ENOMEM (also: too many jobs). */
int ckptd_steps_report(ckptd_steps *s, const ckptd_step_report *r, uint64_t now_ns);
/* Judges every job (once a second): names and clears stragglers, and
 * advises a checkpoint interval (announced when it changes, and again
 * every 10 s). */
void ckptd_steps_judge(ckptd_steps *s, uint64_t now_ns);
/* The job's time accounting and timeline (entries malloc'd; free them). */
int ckptd_steps_goodput(ckptd_steps *s, const char *job, ckptd_goodput_reply *out);
/* A page of a job's ranks from start (entries malloc'd; free them). */
int ckptd_steps_query(ckptd_steps *s, const char *job, uint64_t start, ckptd_step_stats_reply *out);

/* Called by the judge for every rank flagged slow in this judgement, and once
 * more when it is not any longer (slow_runs 0): slow_runs is the number of
 * judgements in a row it was slow in. */
typedef void (*ckptd_steps_slow_fn)(void *arg, const char *job, uint32_t rank, const char *node, uint32_t slow_runs,
                                    uint64_t step_ns, uint64_t fastest_ns, uint64_t now_ns);
void ckptd_steps_on_slow(ckptd_steps *s, ckptd_steps_slow_fn fn, void *arg);

/* ---------------------------------------------------------------- persistent stragglers */

/* A rank slow for --straggler-windows judgements in a row (stragglers.c):
 * its node's agent is asked for evidence once (ask), the answer kept until
 * the rank is no longer slow, and listed for `ckpt stragglers`. A question
 * not answered within 3 s is recorded as such (the agent is down, or older
 * than 1.4). Bounded: 1024 stragglers over all jobs. */
typedef struct ckptd_stragglers ckptd_stragglers;
/* Sends the question to the agent of rq's node; returns 0, or a negative
 * code when that agent cannot be asked (then the record says so at once). */
typedef int (*ckptd_stragglers_ask_fn)(void *arg, const char *node, const ckptd_evidence_request *rq);
/* A straggler's evidence arrived (or its question timed out): for the
 * recovery side (events, --replace-stragglers). May be NULL. */
typedef void (*ckptd_stragglers_found_fn)(void *arg, const ckptd_node_evidence *ev);
int ckptd_stragglers_new(const ckptd_config *cfg, const ckptd_log *log, ckptd_metrics *mx, ckptd_stragglers_ask_fn ask,
                         ckptd_stragglers_found_fn found, void *arg, ckptd_stragglers **out);
void ckptd_stragglers_free(ckptd_stragglers *s);
/* The steps judge's hook (ckptd_steps_slow_fn; arg: the ckptd_stragglers). */
void ckptd_stragglers_judged(void *s, const char *job, uint32_t rank, const char *node, uint32_t slow_runs,
                             uint64_t step_ns, uint64_t fastest_ns, uint64_t now_ns);
/* An agent's NODE_EVIDENCE. from: the node that sent it (an agent speaks for
 * its own node only). Returns 0, -ENOENT (nobody asked for it: dropped) or
 * -EPERM (another node's). */
int ckptd_stragglers_evidence(ckptd_stragglers *s, const ckptd_node_evidence *ev, const char *from, uint64_t now_ns);
/* Once a second: questions past their time. */
void ckptd_stragglers_tick(ckptd_stragglers *s, uint64_t now_ns);
/* The job's persistent stragglers with their evidence (entries malloc'd;
 * free them). */
int ckptd_stragglers_list(ckptd_stragglers *s, const char *job, ckptd_stragglers_reply *out);
/* The evidence of (job, rank) as one line, or NULL: not a persistent
 * straggler, or nothing known yet. Valid until the next call into s. */
const char *ckptd_stragglers_text(ckptd_stragglers *s, const char *job, uint32_t rank);

/* A job's pace (ckptd_steps_pace): over the ranks reporting recently, the
 * step each is estimated to be at now (last report + steps since at its
 * pace), the furthest and the least, and the slowest rank's step time. */
typedef struct ckptd_job_pace {
	uint64_t max_step, min_step;
	double step_ns;    /* the slowest rank's */
	double fastest_ns; /* the fastest rank's */
	uint32_t ranks;
} ckptd_job_pace;
/* Returns 0, or -ENOENT when no rank of the job reported recently. */
int ckptd_steps_pace(ckptd_steps *s, const char *job, uint64_t now_ns, ckptd_job_pace *out);
/* Calls fn for each job with a rank that reported recently from node. */
void ckptd_steps_jobs_on(ckptd_steps *s, const char *node, uint64_t now_ns, void (*fn)(void *arg, const char *job),
                         void *arg);

/* ---------------------------------------------------------------- emergencies */

/* The coordinator's emergency checkpoints (preempt.c): a PREEMPT notice
 * becomes, for each job with ranks on the noticed node, one step every rank
 * can still reach before the deadline and a tier off the noticed nodes that
 * can hold the version in time; EMERGENCY tells the ranks. */
typedef struct ckptd_emerg ckptd_emerg;
typedef struct ckptd_emerg_ops {
	/* Sends m to every agent that is up (they pass it to the job's ranks). */
	void (*broadcast)(void *arg, const ckptd_msg *m);
	/* The node is going: no partner copy may be placed there any more. */
	void (*exclude)(void *arg, const char *node);
	/* The node may hold partner copies again. */
	void (*readmit)(void *arg, const char *node);
	/* Whether some node other than the noticed ones can hold partner copies. */
	int (*peer_room)(void *arg);
	/* 1 when every rank's shard of (job, version) has a live copy on a node
	 * that was not noticed (at any tier). */
	int (*safe)(void *arg, const char *job, uint64_t version);
	/* The job's emergency for node is over: its version safe off the
	 * noticed nodes (ok), or given up past the deadline. May be NULL. */
	void (*ended)(void *arg, const char *job, const char *node, uint64_t version, int ok);
} ckptd_emerg_ops;
int ckptd_emerg_new(const ckptd_config *cfg, const ckptd_log *log, ckptd_metrics *mx, ckptd_steps *steps,
                    const ckptd_emerg_ops *ops, void *arg, ckptd_emerg **out);
void ckptd_emerg_free(ckptd_emerg *e);
/* A PREEMPT notice. Returns how many jobs' ranks were told (0: none: no
 * such job, or none of its ranks reports steps). */
int ckptd_emerg_notice(ckptd_emerg *e, const ckptd_preempt *p, uint64_t now_ns);
/* A commit, for the costs it measures and the emergencies it ends:
 * latency_ns from the version's first report to this commit. */
void ckptd_emerg_commit(ckptd_emerg *e, const char *job, uint64_t version, uint32_t tier, uint64_t latency_ns,
                        uint64_t bytes);
/* A node whose agent said hello again is no longer excluded (nor one a few
 * seconds past its notices' deadline: ckptd_emerg_tick; a straggler's node,
 * CKPTD_NOTICE_SRC_STRAGGLER, stays out until its agent is back). */
void ckptd_emerg_node_back(ckptd_emerg *e, const char *node);
/* 1 if node was noticed (placement leaves it out). */
int ckptd_emerg_excluded(const ckptd_emerg *e, const char *node);
/* Once a second: emergencies past their deadline are dropped, and nodes
 * past theirs readmitted to placement. */
void ckptd_emerg_tick(ckptd_emerg *e, uint64_t now_ns);

/* ---------------------------------------------------------------- verification */

/* One copy to verify (agent_verify.c). The caller sets res.rank, res.tier,
 * checksum and either img/len (a pinned DRAM segment) or path (a shard
 * file), or res.code (decided already: MISSING). */
typedef struct ckptd_vitem {
	ckptd_verify_result res;
	const uint8_t *img;
	uint64_t len;
	uint64_t seg_id;
	char path[CKPTD_PATH_MAX + 80];
	uint64_t checksum; /* the shard's recorded checksum (a DRAM image's own footer); 0: not checked */
	uint64_t lineage;  /* the run recorded as its writer; 0: not checked */
} ckptd_vitem;
typedef struct ckptd_vtask ckptd_vtask;
/* In the event loop, once every item has its result; items are freed after. */
typedef void (*ckptd_vtask_done_fn)(void *arg, ckptd_vtask *t, ckptd_vitem *items, size_t n);
/* Verifies items (malloc'd; the task owns them) on a thread. */
int ckptd_vtask_start(ckptd_server *srv, const char *job, uint64_t version, ckptd_vitem *items, size_t n,
                      ckptd_vtask_done_fn done, void *arg, ckptd_vtask **out);
/* At shutdown (the server is gone): waits for the thread, frees; done is not called. */
void ckptd_vtask_join(ckptd_vtask *t);

/* ---------------------------------------------------------------- agent index */

/* The agent's own LMDB index: one record per copy it holds,
 * key (job, version, rank, tier). The source of truth for its inventory. */
typedef struct ckptd_aidx ckptd_aidx;
typedef struct ckptd_aidx_rec {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t rank;
	uint32_t tier;       /* one tier bit */
	uint32_t world_size;
	uint32_t committed;  /* tiers the version was announced COMMITTED at */
	uint64_t bytes;
	uint64_t checksum;
	uint64_t lineage;
} ckptd_aidx_rec;

/* Opens (creating) dir; drops LOCAL_MEM records (DRAM does not survive a
 * restart). [out] dropped: how many (may be NULL). */
int ckptd_aidx_open(const char *dir, ckptd_aidx **out, size_t *dropped);
void ckptd_aidx_close(ckptd_aidx *x);
/* Stores n records in one transaction (one fsync). */
int ckptd_aidx_put(ckptd_aidx *x, const ckptd_aidx_rec *r, size_t n);
int ckptd_aidx_del(ckptd_aidx *x, const char *job, uint64_t version, uint32_t rank, uint32_t tier);
/* Removes the records of (job, version) at the tiers in mask; returns how many. */
int ckptd_aidx_del_version(ckptd_aidx *x, const char *job, uint64_t version, uint32_t mask);
/* Adds tier to the committed mask of every record of (job, version).
 * Returns 1 if some record did not have it yet, 0 if none changed or none exist. */
int ckptd_aidx_set_committed(ckptd_aidx *x, const char *job, uint64_t version, uint32_t tier);
/* Calls fn for every record, in key order (a shard's tiers are adjacent). */
int ckptd_aidx_each(ckptd_aidx *x, int (*fn)(void *arg, const ckptd_aidx_rec *r), void *arg);
/* The same for the records of one version of job, in key order. */
int ckptd_aidx_each_of(ckptd_aidx *x, const char *job, uint64_t version,
                       int (*fn)(void *arg, const ckptd_aidx_rec *r), void *arg);
/* Remembers that job's ranks on this node keep disk copies under root (an
 * absolute path). Idempotent, and cheap when known already. */
int ckptd_aidx_root_add(ckptd_aidx *x, const char *job, const char *root);
/* Calls fn for each root of job; fn returns non-zero to stop (passed back). */
int ckptd_aidx_roots(ckptd_aidx *x, const char *job, int (*fn)(void *arg, const char *root), void *arg);
/* A deletion of (job, version) at tiers is under way: marked before the
 * first copy goes, unmarked after the last, so that a restarted agent
 * finishes it (ckptd_aidx_marks). Marks of one version accumulate tiers. */
int ckptd_aidx_mark(ckptd_aidx *x, const char *job, uint64_t version, uint32_t tiers);
int ckptd_aidx_unmark(ckptd_aidx *x, const char *job, uint64_t version);
int ckptd_aidx_marks(ckptd_aidx *x, int (*fn)(void *arg, const char *job, uint64_t version, uint32_t tiers),
                     void *arg);

#endif
