/* The agent role's shared state, for its files: agent.c (ranks, the
 * coordinator link, reports, notices), agent_delete.c (deletion on the
 * coordinator's word, finished after a restart), agent_cli.c (what the
 * ckpt tool asks an agent: verify, locate, read, questions passed on).
 * Internal to ckptd/roles. */
#ifndef CKPTD_AGENT_INT_H
#define CKPTD_AGENT_INT_H

#include "roles_int.h"

#include "wire/client.h"
#include "base/common.h"
#include "base/faults.h"


/* What a rank's session holds. */
typedef struct rank_sess {
	struct rank_sess *prev, *next;
	ckptd_agent *a;
	ckptd_session *s;
	uint64_t serial;
	int registered;
	char job[CKPTD_JOB_MAX + 1];
	uint32_t rank, world_size;
	uint64_t lineage;
	uint64_t *writing, *pinned; /* segment ids: freed / unpinned when it goes */
	size_t nwriting, npinned, capwriting, cappinned;
	int pool_ref;              /* holds a reference on its job's pool */
	int waiting;               /* wreq waits for the job's pool to be ready */
	ckptd_segment_request wreq;
	uint64_t wait_until_ns;
	uint64_t heard_ns;         /* its last frame */
	int silent;                /* said silent (past --heartbeat-timeout) */
	/* failure detection (agent_members.c) */
	int pidfd;                 /* > 0: the rank's process (readable once it exited) */
	uint32_t pid, beat_ms;     /* REGISTER_RANK's: its process, its heartbeat interval (0: none) */
	uint32_t member;           /* CKPTD_MEMBER_*, as last reported */
	int left;                  /* sent RANK_LEAVE: its end is no failure */
	int dropped;               /* reported gone: no longer listed */
} rank_sess;

/* A request on the link waiting for its answer (the coordinator answers in order). */
enum { FWD_IGNORE = 1, FWD_LIST };
typedef struct fwd {
	int kind;
	uint64_t serial; /* FWD_LIST: the asking rank's session */
} fwd;

typedef struct done_item {
	rank_sess *rs;
	ckptd_shard_done d;
} done_item;

struct ckptd_agent {
	ckptd_server *srv;
	const ckptd_config *cfg;
	const ckptd_secret *cluster;
	const ckptd_log *log;
	const char *node;
	char address[CKPTD_ADDR_MAX + 1];
	ckptd_jpools *pools;
	ckptd_aidx *idx;
	rank_sess *ranks;
	uint64_t next_serial;
	/* the coordinator link */
	ckptd_coordinator *local; /* --role both */
	ckptd_client *link;
	uint64_t next_try_ns, backoff_ms;
	uint64_t link_heard_ns, link_beat_ns; /* the coordinator's last frame; our last heartbeat */
	uint64_t link_tick_ns;                /* the last link tick: a late one means we stalled */
	uint32_t beat_seq;
	uint64_t rng; /* jitter of the backoff */
	fwd *fifo;
	size_t fhead, flen, fcap;
	int inventory_due;
	/* reports of this loop turn */
	done_item *done;
	size_t ndone, capdone;
	ckpt_faults faults; /* CKPT_FAULT points of the agent (tests) */
	struct vrun *vruns;  /* verifications in flight */
	size_t nvruns;
	ckptd_interval_notice *advice; /* the coordinator's last interval advice per job */
	size_t nadvice;
	ckpt_logger lg;     /* for libckpt's maintenance code */
	ckptd_metrics *mx;
	struct ckptd_peerpool *peer; /* partners' copies (PEER_MEM); NULL: --peer-pool-size 0 */
	ckptd_partners partners;     /* where this node's ranks replicate, from the coordinator */
	struct agent_notices *notices; /* preemption-notice pollers; NULL: none configured */
	struct agent_prefetch *prefetch; /* copies fetched from partners for ranks that register here */
	struct ckptd_shared *shared; /* the flush to --shared-dir (agent_shared.c); NULL: none */
	struct ckptd_health *health; /* the node's health, for straggler evidence (agent_health.c) */
	struct ckptd_hook *hook;     /* --on-failure (agent_members.c); NULL: none */
	struct agent_members *members; /* closed connections awaiting their process's end */
	uint64_t members_tick_ns;    /* the last liveness pass over the ranks */
	struct agent_ec *ec;         /* the rs:K+M encode (agent_ec.c) */
	int spare_taken;             /* --spare, and told to take a lost node's ranks: a regular node now */
};

/* agent_ec.c: the rs:K+M encode (parity held, slices served) */
int ckptd__ec_start(ckptd_agent *a);
void ckptd__ec_stop(ckptd_agent *a);
/* EC_PLAN from the coordinator: this node's parity rows of a version. */
void ckptd__ec_plan(ckptd_agent *a, const ckptd_ec_plan *p);
/* COMMIT_NOTICE: at PEER_MEM, the job's parity of older versions goes. */
void ckptd__ec_committed(ckptd_agent *a, const char *job, uint64_t version, uint32_t tier);
/* SEGMENT_REQUEST(EC_READ) and SEGMENT_RELEASE of its pins. */
int ckptd__ec_handle(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_msg *m);
int ckptd__ec_is_pin(uint64_t id);
void ckptd__ec_session_gone(ckptd_agent *a, uint64_t serial);
/* Rebuilds rank's shard image of the version plan p protects into dst
 * (bytes long, as the plan says) from the group's other members: data
 * slices from their DRAM, parity rows (checked by their holders' block
 * checksums) from their peer pools; the image then checked as any copy.
 * Blocking: a thread's. Returns 0; -ENODATA with why naming the group, the
 * stripe and the members lost or corrupt; another error with why. */
int ckptd__ec_rebuild(ckptd_agent *a, const ckptd_ec_plan *p, uint32_t rank, uint8_t *dst, uint64_t bytes, char *why,
                      size_t cap);
/* Bytes read so far by the rebuilds of (job, rank) in flight here (0:
 * none): whether a rank's read held for one may wait on (agent_prefetch.c). */
uint64_t ckptd__ec_rebuild_progress(ckptd_agent *a, const char *job, uint32_t rank);

/* agent.c */
rank_sess *ckptd__agent_rank_by_serial(ckptd_agent *a, uint64_t serial);
/* The session's record, made on its first message. NULL: no memory. */
rank_sess *ckptd__agent_rank_of(ckptd_agent *a, ckptd_session *s);
/* Sends to the coordinator; kind: what its answer is for (FWD_*). */
int ckptd__agent_link_send(ckptd_agent *a, const ckptd_msg *m, int kind, uint64_t serial);
/* READ: the segment holding (job, version, rank), pinned for the session
 * until it releases it or goes, granted with its pool's fd. */
int ckptd__agent_grant_read(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_segment_request *m);
/* SEGMENT_RELEASE of a READ grant the session holds. */
int ckptd__agent_release(ckptd_agent *a, ckptd_session *s, rank_sess *rs, uint64_t id);

/* Queues a durable copy: recorded in the agent index after this loop turn,
 * then OK to rs (may be NULL) and SHARD_DONE on to the coordinator. */
int ckptd__agent_done_push(ckptd_agent *a, rank_sess *rs, const ckptd_shard_done *d);

/* agent_health.c: the node sampled for straggler evidence. */
int ckptd__agent_health_start(ckptd_agent *a, char *err, size_t errcap);
void ckptd__agent_health_stop(ckptd_agent *a);
/* A local rank registered (its pid, checked against the socket) or gone. */
void ckptd__agent_health_rank(ckptd_agent *a, const rank_sess *rs, uint32_t pid, int gone);
void ckptd__agent_health_step(ckptd_agent *a, const ckptd_step_report *r);
/* The coordinator's EVIDENCE_REQUEST: NODE_EVIDENCE back. */
void ckptd__agent_evidence(ckptd_agent *a, const ckptd_evidence_request *rq);

/* agent_members.c: failure detection of the local ranks (see there) */
int ckptd__members_start(ckptd_agent *a);
void ckptd__members_stop(ckptd_agent *a);
/* REGISTER_RANK accepted: pid checked against the socket (0: unknown). */
void ckptd__members_registered(ckptd_agent *a, rank_sess *rs, uint32_t pid, uint32_t beat_ms);
/* RANK_LEAVE. */
void ckptd__members_leave(ckptd_agent *a, rank_sess *rs);
/* A frame from the rank. */
void ckptd__members_heard(ckptd_agent *a, rank_sess *rs);
/* Its session is ending (still in the list). */
void ckptd__members_gone(ckptd_agent *a, rank_sess *rs);
/* From a timer: exited processes, silent ranks. */
void ckptd__members_tick(ckptd_agent *a, uint64_t now);
/* After AGENT_HELLO: every job's RANKS again. */
void ckptd__members_hello(ckptd_agent *a);
/* EVENT from the coordinator: a decision about one of this node's jobs. */
void ckptd__members_event(ckptd_agent *a, const ckptd_event *e);

/* agent_peer.c: the peer pool (see there) */
typedef struct ckptd_peerpool ckptd_peerpool;
/* Maps and registers the peer pool when --peer-pool-size is set. */
int ckptd__peer_open(ckptd_agent *a, char *err, size_t errcap);
void ckptd__peer_close(ckptd_agent *a);
/* 1 if a segment id names a peer-pool slot. */
int ckptd__peer_is_slot(uint64_t id);
/* PEER_LEASE, PEER_COMMIT, SEGMENT_REQUEST(PEER_READ), SEGMENT_RELEASE of a slot. */
int ckptd__peer_handle(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_msg *m);
/* A session went: its pins are released, its unfinished leases freed. */
void ckptd__peer_session_gone(ckptd_agent *a, uint64_t serial);
/* Drops the partner copies of (job, version); returns how many. */
int ckptd__peer_delete(ckptd_agent *a, const char *job, uint64_t version);
/* Room in the peer pool for bytes of rs parity of job's version (evicting
 * as a lease does), never evicted until ckptd__peer_unreserve(id). [out]
 * *mem: the agent's mapping of it. Returns 0 or -ENOSPC with *why. */
int ckptd__peer_reserve(ckptd_agent *a, const char *job, uint64_t version, uint64_t bytes, uint64_t *id,
                        uint8_t **mem, const char **why);
void ckptd__peer_unreserve(ckptd_agent *a, uint64_t id);
/* The peer pool's (passive) fabric, NULL without a pool. */
struct ckpt_fab *ckptd__peer_fab(ckptd_agent *a);
/* The peer pool's fabric, its registration (for PEER_GRANTs) and mem's
 * offset in it. Returns 0 or -EINVAL (not in the pool, no pool). */
struct ckpt_fab;
struct ckpt_fab_remote;
int ckptd__peer_remote(ckptd_agent *a, const uint8_t *mem, struct ckpt_fab **fab, struct ckpt_fab_remote *rem,
                       uint64_t *off);
void ckptd__peer_stats(ckptd_agent *a, uint64_t *bytes, uint64_t *used);
/* COMMIT_NOTICE: the copies of (job, version) here are committed at tier;
 * the newest committed ones are the job's restore point, never evicted. */
void ckptd__peer_committed(ckptd_agent *a, const char *job, uint64_t version, uint32_t tier);
/* The per-job gauges of the peer pool (ckpt_peer_job_used_bytes,
 * ckpt_peer_protected_bytes). */
void ckptd__peer_gauges(ckptd_agent *a);
/* The coordinator's placement for this node; SEG_PARTNERS answers it. */
void ckptd__peer_partners(ckptd_agent *a, const ckptd_partners *p);
int ckptd__peer_send_partners(ckptd_agent *a, ckptd_session *s);

/* agent_notice.c: preemption */
/* Starts the notice pollers the --notice-* settings name (none: nothing). */
int ckptd__agent_notices_start(ckptd_agent *a, char *err, size_t errcap);
void ckptd__agent_notices_stop(ckptd_agent *a);
/* PREEMPT from a rank or the tool: on to the coordinator, with this node. */
/* A PREEMPT from a session of this agent. relay: the serial of a tool's
 * session that gets the coordinator's answer (how many jobs' ranks were
 * told); 0: a rank's, answered OK at once. */
int ckptd__agent_preempt(ckptd_agent *a, ckptd_session *s, const ckptd_preempt *m, uint64_t relay);
/* EMERGENCY from the coordinator: to the job's ranks here. */
void ckptd__agent_emergency(ckptd_agent *a, const ckptd_emergency *e);

/* agent_prefetch.c: a rank registering here whose newest committed shard
 * this node does not hold gets it copied from a partner's DRAM. */
int ckptd__prefetch_start(ckptd_agent *a);
void ckptd__prefetch_stop(ckptd_agent *a);
void ckptd__prefetch_register(ckptd_agent *a, const char *job, uint32_t rank);
/* SPARE_ASSIGN (this agent a spare): the lost node's ranks pulled into this
 * node's DRAM at once, by the same tasks; SPARE_DONE when all ended. */
void ckptd__prefetch_assign(ckptd_agent *a, const ckptd_spare_assign *m);
/* A READ of a shard this agent is fetching for the rank (from a partner or
 * its rs group): held until that ends (at most a few seconds), then
 * answered. Returns 1 if held, 0 if there is nothing to wait for. */
int ckptd__prefetch_hold(ckptd_agent *a, rank_sess *rs, const ckptd_segment_request *m);
/* 1 while a READ of the rank session `serial` is held here (it waits on
 * this agent: not silent). */
int ckptd__prefetch_holds(const ckptd_agent *a, uint64_t serial);
/* Held READs past their hold, answered. */
void ckptd__prefetch_tick(ckptd_agent *a, uint64_t now);
/* A job's pool became ready: tasks waiting for a segment get one. */
void ckptd__prefetch_pool_ready(ckptd_agent *a);

/* agent_delete.c */
/* DELETE_VERSION from the coordinator: marked, then deleted, then unmarked. */
void ckptd__agent_delete(ckptd_agent *a, const ckptd_delete_version *d);
/* At start: finishes the deletions a previous run left marked. */
void ckptd__agent_finish_deletes(ckptd_agent *a);

/* agent_roots.c: whether the rank on s may have root recorded (canonical
 * path into canon) and acted on. -EPERM: it cannot be checked (TCP without
 * --rank-roots), serve the rank but record nothing; -EACCES and others: it
 * is refused. A reason in why either way. */
int ckptd__agent_root_trust(const ckptd_agent *a, const ckptd_session *s, const char *root, char *canon,
                            size_t cap, char *why, size_t whycap);
/* At deletion: a recorded root still resolves to itself and is allowed. */
int ckptd__agent_root_still_ok(const ckptd_agent *a, const char *root, char *why, size_t whycap);
/* --rank-roots: every item an absolute path. */
int ckptd__agent_roots_check_config(const ckptd_config *cfg, char *err, size_t errcap);

/* agent_shared.c: the SHARED tier, flushed to --shared-dir (see there) */
typedef struct ckptd_shared ckptd_shared;
/* Starts the flush thread when --shared-dir is set, and queues what the
 * index says is still to flush. */
int ckptd__shared_open(ckptd_agent *a, char *err, size_t errcap);
/* Stops the thread promptly (its temp file removed); frees. */
void ckptd__shared_close(ckptd_agent *a);
/* COMMIT_NOTICE: at LOCAL_DISK, queues this node's shard files of the
 * version; at SHARED, its commit marker in the tree. */
void ckptd__shared_notice(ckptd_agent *a, const ckptd_commit_notice *n);
/* EMERGENCY aimed at SHARED: (job, version)'s files go first and unthrottled. */
void ckptd__shared_emergency(ckptd_agent *a, const char *job, uint64_t version);
/* Whether this node's peer pool holds a partner copy of the shard. */
int ckptd__peer_has(ckptd_agent *a, const char *job, uint64_t version, uint32_t rank);
/* The tool's restore of a partner copy held here: a new sealed memfd with
 * that shard's image alone (*fd, the caller's; *bytes). -ENOENT: none. */
int ckptd__peer_copy_fd(ckptd_agent *a, const char *job, uint64_t version, uint32_t rank, int *fd, uint64_t *bytes);
/* Deletion of (job, version) at tiers: cancels its flush (LOCAL_DISK or
 * SHARED), removes the SHARED files this agent flushed (the marker first).
 * Returns 0 or -errno (the deletion is then retried). */
int ckptd__shared_delete(ckptd_agent *a, const char *job, uint64_t version, uint32_t tiers);

/* agent_cli.c */
int ckptd__agent_cli(ckptd_agent *a, ckptd_session *s, const ckptd_msg *m);
/* LOCATE (ranks and the tool): where this node holds a shard. */
int ckptd__agent_locate(ckptd_agent *a, ckptd_session *s, const ckptd_segment_request *m);
/* At shutdown: waits for verifications still reading pinned segments. */
void ckptd__agent_verify_join(ckptd_agent *a);

#endif
