/* The coordinator role's shared state, for its files: coordinator.c (the
 * commit engine behind the server core, agents, queries, deletion),
 * coord_partners.c (partner placement, where the copies are),
 * coord_emerg.c (what emergencies need of the coordinator). Internal to
 * ckptd/roles. */
#ifndef CKPTD_COORDINATOR_INT_H
#define CKPTD_COORDINATOR_INT_H

#include "roles_int.h"

/* An agent this coordinator has heard from. */
typedef struct peer {
	struct peer *next;
	char node[CKPTD_NAME_MAX + 1];
	char address[CKPTD_ADDR_MAX + 1];
	char domain[CKPTD_NAME_MAX + 1];
	char host[CKPTD_NAME_MAX + 1], sw[CKPTD_NAME_MAX + 1], power[CKPTD_NAME_MAX + 1]; /* more domains (rs groups) */
	int in_rs_group;            /* a member of an rs:K+M group (coord_groups.c) */
	uint32_t rs_gid, rs_member; /* ... which, and its index there */
	uint64_t pool_bytes;
	uint64_t peer_bytes;        /* its pool for partners' copies; 0: holds none */
	ckptd_session *s;           /* NULL while disconnected, or when local */
	ckptd_local_agent_fn local; /* the in-process agent (--role both) */
	void *local_arg;
	int up;
	uint64_t lost_at_ns;        /* disconnected: agent_lost after this; 0: none due */
	uint64_t heard_ns;          /* its last frame (heartbeats included) */
	int degraded;               /* connected but silent past --heartbeat-timeout */
	int decided_lost;           /* a node-lost decision was made; cleared once heard again */
	uint32_t beat_ms;           /* its heartbeat interval (AGENT_HELLO, 1.5); 0: unknown */
	int beat_warned;            /* said that it beats too seldom for --failure-timeout */
	char (*jobs)[CKPTD_JOB_MAX + 1]; /* jobs it holds shards of: who hears notices */
	size_t njobs, capjobs;
	int spare;                  /* started --spare and free: no partner, no group member, no ranks */
	char took[CKPTD_NAME_MAX + 1]; /* a spare that took this lost node's ranks ("": none) */
	uint64_t took_ns;           /* ... then (CLOCK_REALTIME) */
} peer;

/* What a session of an agent points at: the peer, once AGENT_HELLO named it. */
typedef struct agent_sess {
	ckptd_coordinator *c;
	peer *p;
	ckptd_session *s;
} agent_sess;

typedef struct pending {
	ckptd_session *s; /* who to answer; NULL for the in-process agent */
	peer *p;
	char job[CKPTD_JOB_MAX + 1];
	ckptd_coord_shard sh;
} pending;

struct ckptd_coordinator {
	ckptd_server *srv;
	const ckptd_config *cfg;
	const ckptd_log *log;
	ckptd_coord *db;
	peer *peers;
	pending *q;
	size_t nq, capq;
	ckptd_coord_shard *batch;
	ckptd_coord_result *res;
	size_t capbatch;
	int flushing; /* in ckptd__coord_flush_batch: what it calls may call it again */
	char (*jobs)[CKPTD_JOB_MAX + 1]; /* every job seen: what retention walks */
	size_t njobs, capjobs;
	ckptd_metrics *mx;
	ckptd_steps *steps;
	ckptd_emerg *emerg;
	ckptd_stragglers *stragglers;
	/* Called when a persistent straggler's evidence is known (or its agent
	 * did not answer): the recovery side's, NULL when unset. */
	void (*straggler_hook)(ckptd_coordinator *c, const ckptd_node_evidence *ev);
	uint64_t silence_tick_ns; /* the last liveness pass: a late one means this process stalled */
	struct ckptd_cgroups *groups; /* the peer tier's rs:K+M groups (coord_groups.c) */
	struct coord_members *members; /* membership and failure decisions (coord_members.c) */
	struct ckptd_ecvs *ecvs;      /* versions being rs-encoded (coord_ec.c) */
	struct coord_spares *spares;  /* spares taking lost nodes, every recovery's timeline (coord_spares.c) */
	struct coord_replace *replace; /* --replace-stragglers (coord_replace.c); NULL when off */
};

/* coordinator.c */
peer *ckptd__coord_peer_find(ckptd_coordinator *c, const char *node);
/* The node's record, made (down, never heard) if there is none; NULL: no memory. */
peer *ckptd__coord_peer_get(ckptd_coordinator *c, const char *node);
void ckptd__coord_peer_send(ckptd_coordinator *c, peer *p, const ckptd_msg *m);
/* CKPTD_AGENT_UP, _DOWN (also for NULL: never heard of) or _DEGRADED. */
uint32_t ckptd__coord_peer_state(const peer *p);
/* Commits the SHARD_DONEs queued this loop turn. */
void ckptd__coord_flush_batch(ckptd_coordinator *c);

/* coord_partners.c */
/* Tells every agent that is up where its ranks replicate (PARTNERS). */
void ckptd__coord_place_partners(ckptd_coordinator *c);

/* coord_groups.c: the rs:K+M groups of --peer-scheme */
/* Parses --peer-scheme. Returns 0 or -EINVAL/-ENOMEM with why in err. */
int ckptd__coord_groups_open(ckptd_coordinator *c, char *err, size_t errcap);
void ckptd__coord_groups_free(ckptd_coordinator *c);
/* Re-forms the groups after a change of membership: members declared lost
 * are replaced by free nodes that fit, free nodes form new groups. */
void ckptd__coord_groups_update(ckptd_coordinator *c);
/* The scheme, groups and members into a STATUS_REPLY (freed with
 * ckptd__coord_groups_status_free, roles_int.h). Returns 0 or -ENOMEM. */
int ckptd__coord_groups_status(ckptd_coordinator *c, ckptd_status_reply *out);

/* The members of group gid: [out] out (k + m peers), *k, *m. Returns 0 or
 * -ENOENT (no such group). */
int ckptd__coord_group_of(ckptd_coordinator *c, uint32_t gid, peer **out, unsigned *k, unsigned *m);
/* A group read back from the index at start (pl: its record, ps: its
 * members by index). Returns 0, or -EINVAL with why (another scheme's
 * width, a member in another group already, an id twice): the record is
 * then dropped. */
int ckptd__coord_group_restore(ckptd_coordinator *c, const ckptd_ec_plan *pl, peer **ps, char *why, size_t cap);

/* coord_ec.c: the rs encode of committed versions */
/* A SHARD_DONE: its TIERS (when said) tell whether the job's ranks save
 * to PEER_MEM, which an rs group's encode is for. */
void ckptd__coord_ec_note(ckptd_coordinator *c, const ckptd_shard_done *d);
/* A version committed at LOCAL_MEM: EC_PLAN to every member of every group
 * holding its shards. */
void ckptd__coord_ec_encode(ckptd_coordinator *c, const char *job, uint64_t version);
/* A member's EC_DONE; the last one of a group records its ranks' PEER_MEM
 * copies on the group's pseudo-node (rs-group.<id>). */
void ckptd__coord_ec_done(ckptd_coordinator *c, peer *p, const ckptd_ec_done *d);
/* SEGMENT_REQUEST(EC_WHERE) of an agent: the plan protecting (job,
 * version, rank), as EC_PLAN with MEMBER the rank's, or ERROR NOT_FOUND. */
int ckptd__coord_ec_where(ckptd_coordinator *c, ckptd_session *s, const ckptd_segment_request *m);
/* After agents are declared lost: versions whose group lost more than M
 * of its members since their encode lose their PEER_MEM protection. */
void ckptd__coord_ec_lost(ckptd_coordinator *c);
void ckptd__coord_ec_free(ckptd_coordinator *c);
/* The rs records kept in the index (table "ec"): pl as an EC_PLAN frame
 * under key (ckptd__coord_ec_keep; pl NULL: the record deleted), and at
 * start every group and finished plan read back (ckptd__coord_ec_restore;
 * a member not heard of yet is down, its --agent-grace running). Errors
 * are logged; keep returns 0 or the error. */
int ckptd__coord_ec_keep(ckptd_coordinator *c, const uint8_t *key, size_t klen, const ckptd_ec_plan *pl);
void ckptd__coord_ec_restore(ckptd_coordinator *c);

/* coordinator.c: COMMIT_NOTICE of tiers that committed outside a batch. */
void ckptd__coord_announce(ckptd_coordinator *c, const char *job, uint64_t version, uint32_t tiers);

/* coord_stragglers.c */
int ckptd__coord_stragglers_open(ckptd_coordinator *c);
/* An agent's NODE_EVIDENCE (s: its session, answered; NULL: in-process). */
int ckptd__coord_evidence_in(ckptd_coordinator *c, ckptd_session *s, peer *p, const ckptd_node_evidence *ev);
/* STRAGGLERS from the tool. */
int ckptd__coord_stragglers_query(ckptd_coordinator *c, ckptd_session *s, const ckptd_straggler_query *q);
/* The persistent straggler's evidence as one line, or NULL (events, logs). */
const char *ckptd__coord_evidence(ckptd_coordinator *c, const char *job, uint32_t rank);

/* coord_members.c: failure decisions, membership epochs, the events */
int ckptd__members_open(ckptd_coordinator *c);
void ckptd__members_close(ckptd_coordinator *c);
/* An agent's RANKS: its ranks of a job; a rank newly DIED or HUNG is decided. */
int ckptd__coord_ranks_in(ckptd_coordinator *c, peer *p, const ckptd_ranks *r);
/* The node is lost (its connection closed, or it is silent): decided once per absence. */
void ckptd__coord_node_lost(ckptd_coordinator *c, peer *p, uint64_t silent_ns, const char *why);
/* From the liveness timer: agents silent past --failure-timeout, hooks to reap. */
void ckptd__coord_members_tick(ckptd_coordinator *c, uint64_t now);
/* EVENTS from the tool: the kept decisions, then (FOLLOW) every new one. */
int ckptd__coord_events_query(ckptd_coordinator *c, ckptd_session *s, const ckptd_events *q);
/* STATUS_REPLY's epochs (out->epochs malloc'd: the caller frees it). */
int ckptd__coord_epochs_status(ckptd_coordinator *c, const char *job, ckptd_status_reply *out);

/* The job's ranks node p serves (as its agent last said), at most cap of
 * them into out; returns how many. */
uint32_t ckptd__coord_node_ranks(ckptd_coordinator *c, const peer *p, const char *job, ckptd_member *out,
                                 uint32_t cap);
/* A decision of kind (CKPTD_FAIL_*) about p's ranks m[0..n) of job: the
 * job's next epoch, everyone told, the recovery's timeline begun. */
void ckptd__coord_decide(ckptd_coordinator *c, const char *job, uint32_t kind, const peer *p, const ckptd_member *m,
                         uint32_t n, const char *why);

/* coord_replace.c: --replace-stragglers */
int ckptd__coord_replace_open(ckptd_coordinator *c);
void ckptd__coord_replace_close(ckptd_coordinator *c);
/* The emergency of (job, node) is over (preempt.c's ended op). */
void ckptd__coord_replace_ended(ckptd_coordinator *c, const char *job, const char *node, uint64_t version, int ok);

/* EVENT of a kind that follows a failure (1.6: spare chosen, ready, none,
 * recovered): kept for EVENTS, sent to the tools following (of 1.6). */
void ckptd__coord_event_note(ckptd_coordinator *c, const ckptd_event *e);

/* coordinator.c: job is one of p's (it hears the job's notices). */
int ckptd__coord_note_job(ckptd_coordinator *c, peer *p, const char *job);

/* coord_spares.c: spares and the recovery timeline */
int ckptd__spares_open(ckptd_coordinator *c);
void ckptd__spares_close(ckptd_coordinator *c);
/* A failure decision (decide): a recovery's timeline starts. */
void ckptd__coord_recovery_begin(ckptd_coordinator *c, const ckptd_event *e);
/* After node p's node-lost decisions: a spare takes its ranks; a spare
 * lost while it pulled is replaced by another. */
void ckptd__coord_spares_node_lost(ckptd_coordinator *c, peer *p);
/* SPARE_DONE from a spare's agent. */
void ckptd__coord_spare_done(ckptd_coordinator *c, peer *p, const ckptd_spare_done *d);
/* RANKS listed rank of job newly up on p; a STEP_REPORT; a commit. */
void ckptd__coord_recovery_rank_up(ckptd_coordinator *c, peer *p, const char *job, uint32_t rank);
void ckptd__coord_recovery_step(ckptd_coordinator *c, const ckptd_step_report *r);
void ckptd__coord_recovery_commit(ckptd_coordinator *c, const char *job, uint64_t version, uint32_t tiers);
/* RECOVERIES from the tool. */
int ckptd__coord_recoveries_query(ckptd_coordinator *c, ckptd_session *s, const ckptd_recoveries *q);
/* STATUS_REPLY's recoveries: each job's newest (out->recoveries malloc'd). */
int ckptd__coord_recoveries_status(ckptd_coordinator *c, const char *job, ckptd_status_reply *out);
/* The spares free now (for the gauge). */
uint32_t ckptd__coord_spares_free(ckptd_coordinator *c);

/* coord_emerg.c */
extern const ckptd_emerg_ops ckptd__coord_emerg_ops;

#endif
