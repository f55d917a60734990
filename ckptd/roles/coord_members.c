/* Failure decisions: which ranks each node serves (the agents' RANKS),
 * and the coordinator's verdicts on them, each a new membership epoch of
 * the job (docs/operations.md, "Failure detection"):
 *  - rank-died, rank-hung: an agent reports one of its ranks so (its
 *    process exited, or it is silent while its process lives);
 *  - node-lost: an agent's connection closed, or it was silent (no frame,
 *    heartbeats included) past --failure-timeout. A node is decided lost
 *    once per absence: heard again, it can be lost again.
 * Each decision is logged, counted (ckpt_failures_total, the epoch gauge,
 * the detection histogram), kept (the newest RING), sent as EVENT to every
 * tool following the events and to every agent serving the job's ranks,
 * and handed to --on-failure. A job's epoch is stored in its record of the
 * coordinator's index (increasing across restarts); the kept decisions and
 * the cluster's own epochs ("") live in memory. */
#include "coordinator_int.h"
#include "hook.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING 256

/* One node's ranks of one job, as its agent last listed them. */
typedef struct node_job {
	peer *p; /* its agent (peer records live as long as the coordinator) */
	char job[CKPTD_JOB_MAX + 1];
	ckptd_member *m;
	uint32_t n;
} node_job;

typedef struct job_epoch {
	ckptd_job_epoch e; /* epoch 0: none yet */
} job_epoch;

typedef struct sub {
	struct sub *next;
	ckptd_coordinator *c;
	ckptd_session *s;
	char job[CKPTD_JOB_MAX + 1]; /* "": every job */
} sub;

struct coord_members {
	node_job *nj;
	size_t nnj, capnj;
	job_epoch *je;
	size_t nje, capje;
	ckptd_event ring[RING];
	size_t head, len; /* ring[(head + i) % RING], oldest first */
	sub *subs;
	ckptd_hook *hook;
	uint64_t tick_ns;
};

int ckptd__members_open(ckptd_coordinator *c)
{
	if (!(c->members = calloc(1, sizeof(*c->members))))
		return -ENOMEM;
	return ckptd_hook_new(c->cfg->on_failure, c->log, &c->members->hook);
}

void ckptd__members_close(ckptd_coordinator *c)
{
	struct coord_members *cm = c->members;
	if (!cm)
		return;
	for (size_t i = 0; i < cm->nnj; i++)
		free(cm->nj[i].m);
	for (size_t i = 0; i < RING; i++)
		free(cm->ring[i].entries);
	/* Followers' sessions are closed by now (the server goes first). */
	for (sub *s = cm->subs, *n; s; s = n) {
		n = s->next;
		s->c = NULL;
	}
	ckptd_hook_free(cm->hook);
	free(cm->nj);
	free(cm->je);
	free(cm);
	c->members = NULL;
}

/* Room for one more of n elements in *arr (capacity *cap, doubling). */
static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 8;
	void *p = realloc(*arr, nc * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

static node_job *nj_get(struct coord_members *cm, peer *p, const char *job)
{
	for (size_t i = 0; i < cm->nnj; i++)
		if (cm->nj[i].p == p && !strcmp(cm->nj[i].job, job))
			return &cm->nj[i];
	if (grow((void **)&cm->nj, &cm->capnj, cm->nnj, sizeof(*cm->nj)) < 0)
		return NULL;
	node_job *j = &cm->nj[cm->nnj++];
	memset(j, 0, sizeof(*j));
	j->p = p;
	snprintf(j->job, sizeof(j->job), "%s", job);
	return j;
}

static job_epoch *je_get(struct coord_members *cm, const char *job)
{
	for (size_t i = 0; i < cm->nje; i++)
		if (!strcmp(cm->je[i].e.job, job))
			return &cm->je[i];
	if (grow((void **)&cm->je, &cm->capje, cm->nje, sizeof(*cm->je)) < 0)
		return NULL;
	job_epoch *j = &cm->je[cm->nje++];
	memset(j, 0, sizeof(*j));
	snprintf(j->e.job, sizeof(j->e.job), "%s", job);
	return j;
}

static int sub_wants(const sub *s, const char *job)
{
	return !s->job[0] || !strcmp(s->job, job);
}

/* The ring's next slot (the oldest goes when it is full), emptied. */
static ckptd_event *ring_next(struct coord_members *cm)
{
	ckptd_event *e = &cm->ring[(cm->head + cm->len) % RING];
	if (cm->len == RING) {
		cm->head = (cm->head + 1) % RING; /* the oldest goes */
	} else {
		cm->len++;
	}
	free(e->entries);
	memset(e, 0, sizeof(*e));
	return e;
}

/* A session may hear e: the kinds after a failure are 1.6's. */
static int speaks(ckptd_session *s, const ckptd_event *e)
{
	return e->kind <= CKPTD_FAIL_RANK_HUNG || CKPTD_VERSION_MINOR_OF(ckptd_session_version(s)) >= 6;
}

void ckptd__coord_event_note(ckptd_coordinator *c, const ckptd_event *src)
{
	struct coord_members *cm = c->members;
	ckptd_event *e = ring_next(cm);
	*e = *src;
	e->entries = NULL;
	e->count = 0;
	if (src->count && (e->entries = malloc(src->count * sizeof(*src->entries)))) {
		memcpy(e->entries, src->entries, src->count * sizeof(*src->entries));
		e->count = src->count;
	}
	if (!e->time_ns)
		e->time_ns = ckpt__wall_ns();
	ckptd_msg msg = { .type = CKPTD_MSG_EVENT, .u.event = *e };
	for (sub *s = cm->subs; s; s = s->next)
		if (sub_wants(s, e->job) && speaks(s->s, e))
			ckptd_session_send(s->s, &msg, -1);
}

/* A decision: the job's next epoch, and everyone told. */
static void decide(ckptd_coordinator *c, const char *job, uint32_t kind, const char *node, const ckptd_member *m,
                   uint32_t n, uint64_t silent_ns, const char *why)
{
	struct coord_members *cm = c->members;
	job_epoch *je = je_get(cm, job);
	if (!je)
		return;
	ckptd_event *e = ring_next(cm);
	snprintf(e->job, sizeof(e->job), "%s", job);
	/* The job's record keeps its epochs increasing across restarts; the
	 * cluster's own ("") and a failed write count in memory. */
	uint64_t ep = 0;
	int r = job[0] ? ckptd_coord_epoch_next(c->db, job, &ep) : -ENOENT;
	if (r < 0 && job[0])
		CKPTD_WARN(c->log, node, job, "membership epoch not stored: %s; counting in memory", ckpt_strerror(r));
	if (r < 0 || ep <= je->e.epoch)
		ep = je->e.epoch + 1;
	e->epoch = je->e.epoch = ep;
	e->kind = kind;
	snprintf(e->node, sizeof(e->node), "%s", node);
	e->time_ns = ckpt__wall_ns();
	e->silent_ns = silent_ns;
	snprintf(e->text, sizeof(e->text), "%s", why);
	if (n && (e->entries = malloc(n * sizeof(*m)))) {
		memcpy(e->entries, m, n * sizeof(*m));
		e->count = n;
	}
	je->e.kind = kind;
	snprintf(je->e.node, sizeof(je->e.node), "%s", node);
	je->e.time_ns = e->time_ns;
	ckptd_ranks_text(e->entries, e->count, je->e.ranks, sizeof(je->e.ranks));
	CKPTD_WARN(c->log, node, job[0] ? job : NULL, "decided: %s on %s, ranks %s: epoch %llu (%s; silent %.3f s)",
	           ckptd_fail_name(kind), node, je->e.ranks[0] ? je->e.ranks : "none", (unsigned long long)e->epoch, why,
	           (double)silent_ns / 1e9);
	ckptd_metrics_set(c->mx, CKPTD_M_EPOCH, job, NULL, (double)e->epoch);
	ckptd_metrics_add(c->mx, CKPTD_M_FAILURES, job, ckptd_fail_name(kind), 1);
	ckptd_metrics_observe(c->mx, CKPTD_M_DETECT, ckptd_fail_name(kind), NULL, (double)silent_ns / 1e9);
	ckptd_msg msg = { .type = CKPTD_MSG_EVENT, .u.event = *e };
	for (sub *s = cm->subs; s; s = s->next)
		if (sub_wants(s, job))
			ckptd_session_send(s->s, &msg, -1);
	/* The agents serving the job's ranks (their hooks), the lost one too
	 * if it still listens: one (node, job) record each. */
	for (size_t i = 0; i < cm->nnj; i++) {
		peer *p = cm->nj[i].p;
		if (!cm->nj[i].n || strcmp(cm->nj[i].job, job) ||
		    (!p->local && (!p->s || CKPTD_VERSION_MINOR_OF(ckptd_session_version(p->s)) < 5)))
			continue;
		ckptd__coord_peer_send(c, p, &msg);
	}
	ckptd_hook_run(cm->hook, e);
	if (job[0])
		ckptd__coord_recovery_begin(c, e);
}

int ckptd__coord_ranks_in(ckptd_coordinator *c, peer *p, const ckptd_ranks *r)
{
	struct coord_members *cm = c->members;
	node_job *j = nj_get(cm, p, r->job);
	if (!j)
		return -ENOMEM;
	ckptd_member *nm = r->count ? malloc(r->count * sizeof(*nm)) : NULL;
	if (r->count && !nm)
		return -ENOMEM;
	uint32_t k = 0, nup = 0;
	uint32_t *up = r->count ? malloc(r->count * sizeof(*up)) : NULL; /* ranks registered anew */
	for (uint32_t i = 0; i < r->count; i++) {
		const ckptd_member *e = &r->entries[i];
		uint32_t was = 0, was_pid = 0;
		for (uint32_t q = 0; q < j->n; q++)
			if (j->m[q].rank == e->rank && (!was || j->m[q].pid == e->pid)) {
				was = j->m[q].state;
				was_pid = j->m[q].pid;
			}
		if (was != e->state && (e->state == CKPTD_MEMBER_DIED || e->state == CKPTD_MEMBER_HUNG)) {
			char why[160];
			if (e->state == CKPTD_MEMBER_DIED)
				snprintf(why, sizeof(why), "the agent saw rank %u's process %u end", e->rank, e->pid);
			else
				snprintf(why, sizeof(why), "the agent heard nothing from rank %u for %.1f s while its process lives",
				         e->rank, (double)e->silent_ns / 1e9);
			decide(c, r->job, e->state == CKPTD_MEMBER_DIED ? CKPTD_FAIL_RANK_DIED : CKPTD_FAIL_RANK_HUNG, p->node,
			       e, 1, e->silent_ns, why);
		} else if (was == CKPTD_MEMBER_HUNG && e->state == CKPTD_MEMBER_UP) {
			CKPTD_INFO(c->log, p->node, r->job, "rank %u on %s heard again after it was decided hung", e->rank,
			           p->node);
		}
		/* Registered here since the last list (a process of its own; the
		 * one it replaces may be listed DIED in this same list). */
		if (up && e->state == CKPTD_MEMBER_UP && (!was || (e->pid && was_pid != e->pid)))
			up[nup++] = e->rank;
		/* Gone ones are said once, then forgotten. */
		if (e->state == CKPTD_MEMBER_UP || e->state == CKPTD_MEMBER_HUNG)
			nm[k++] = *e;
	}
	free(j->m);
	j->m = nm;
	j->n = k;
	/* After this list's decisions: a relaunch counts once its failure is decided. */
	for (uint32_t i = 0; i < nup; i++)
		ckptd__coord_recovery_rank_up(c, p, r->job, up[i]);
	free(up);
	return 0;
}

void ckptd__coord_node_lost(ckptd_coordinator *c, peer *p, uint64_t silent_ns, const char *why)
{
	struct coord_members *cm = c->members;
	if (!cm || p->decided_lost || p->local || ckptd_server_stopping(c->srv))
		return;
	p->decided_lost = 1;
	int any = 0;
	for (size_t i = 0; i < cm->nnj; i++) {
		node_job *j = &cm->nj[i];
		if (j->p != p || !j->n)
			continue;
		any = 1;
		decide(c, j->job, CKPTD_FAIL_NODE_LOST, p->node, j->m, j->n, silent_ns, why);
	}
	if (!any) /* a node with no ranks (a spare): the cluster's own epoch */
		decide(c, "", CKPTD_FAIL_NODE_LOST, p->node, NULL, 0, silent_ns, why);
	ckptd__coord_spares_node_lost(c, p); /* a spare for it; another for a spare lost while it pulled */
}

void ckptd__coord_members_tick(ckptd_coordinator *c, uint64_t now)
{
	struct coord_members *cm = c->members;
	uint64_t ft = c->cfg->failure_timeout_ms * 1000000ull, last = cm->tick_ns;
	cm->tick_ns = now;
	ckptd_hook_reap(cm->hook);
	/* A late pass: this process stalled, the agents' frames wait unread. */
	int stalled = ft && last && now - last > ft / 2;
	for (peer *p = c->peers; p; p = p->next) {
		if (p->local || !p->up || !p->s)
			continue;
		uint64_t quiet = now - p->heard_ns;
		/* One that said it beats seldom (its --heartbeat-interval) gets 4
		 * of its intervals at least. */
		uint64_t limit = ft, floor = 4ull * p->beat_ms * 1000000ull;
		if (ft && floor > limit) {
			if (!p->beat_warned) {
				p->beat_warned = 1;
				CKPTD_WARN(c->log, p->node, NULL, "agent %s heartbeats every %u ms: judged silent after %llu ms, "
				           "not --failure-timeout %llu ms", p->node, p->beat_ms, (unsigned long long)(floor / 1000000ull),
				           (unsigned long long)c->cfg->failure_timeout_ms);
			}
			limit = floor;
		}
		if (p->decided_lost && quiet < (limit ? limit : 1000000000ull)) {
			p->decided_lost = 0;
			CKPTD_INFO(c->log, p->node, NULL, "agent %s heard again after it was decided lost", p->node);
			continue;
		}
		/* Agents before 1.5 heartbeat at a quarter of --heartbeat-timeout,
		 * too seldom to be judged by this. */
		if (!limit || stalled || p->decided_lost || quiet <= limit ||
		    CKPTD_VERSION_MINOR_OF(ckptd_session_version(p->s)) < 5)
			continue;
		char why[160];
		snprintf(why, sizeof(why), "silent for %.1f s (--failure-timeout %llu ms)", (double)quiet / 1e9,
		         (unsigned long long)(limit / 1000000ull));
		ckptd__coord_node_lost(c, p, quiet, why);
	}
}

static void sub_free(void *arg)
{
	sub *s = arg;
	if (s->c && s->c->members) {
		struct coord_members *cm = s->c->members;
		for (sub **pp = &cm->subs; *pp; pp = &(*pp)->next)
			if (*pp == s) {
				*pp = s->next;
				break;
			}
	}
	free(s);
}

int ckptd__coord_events_query(ckptd_coordinator *c, ckptd_session *s, const ckptd_events *q)
{
	struct coord_members *cm = c->members;
	/* A job's session sees its own job's decisions only. */
	const char *sjob = ckptd_session_job(s);
	const char *job = sjob[0] ? sjob : q->job;
	uint32_t n = 0;
	for (size_t i = 0; i < cm->len; i++) {
		const ckptd_event *e = &cm->ring[(cm->head + i) % RING];
		if ((job[0] && strcmp(e->job, job)) || !speaks(s, e))
			continue;
		ckptd_msg m = { .type = CKPTD_MSG_EVENT, .u.event = *e };
		int r = ckptd_session_send(s, &m, -1);
		if (r < 0)
			return r;
		n++;
	}
	if (q->follow) {
		if (ckptd_session_data(s))
			return ckptd_session_send_error(s, CKPTD_ERR_STATE, "this session already serves something else; "
			                                "follow the events on a connection of their own");
		sub *f = calloc(1, sizeof(*f));
		if (!f)
			return -ENOMEM;
		f->c = c;
		f->s = s;
		snprintf(f->job, sizeof(f->job), "%s", job);
		f->next = cm->subs;
		cm->subs = f;
		ckptd_session_set_data(s, f, sub_free);
	}
	ckptd_msg ok = { .type = CKPTD_MSG_OK, .u.ok.count = n };
	return ckptd_session_send(s, &ok, -1);
}

int ckptd__coord_epochs_status(ckptd_coordinator *c, const char *job, ckptd_status_reply *out)
{
	struct coord_members *cm = c->members;
	size_t n = 0;
	for (size_t i = 0; i < cm->nje; i++)
		if (cm->je[i].e.epoch && (!job || !job[0] || !strcmp(cm->je[i].e.job, job)))
			n++;
	if (n > CKPTD_MAX_LIST)
		n = CKPTD_MAX_LIST;
	if (!n)
		return 0;
	if (!(out->epochs = calloc(n, sizeof(*out->epochs))))
		return -ENOMEM;
	for (size_t i = 0; i < cm->nje && out->nepochs < n; i++)
		if (cm->je[i].e.epoch && (!job || !job[0] || !strcmp(cm->je[i].e.job, job)))
			out->epochs[out->nepochs++] = cm->je[i].e;
	return 0;
}

uint32_t ckptd__coord_node_ranks(ckptd_coordinator *c, const peer *p, const char *job, ckptd_member *out,
                                 uint32_t cap)
{
	struct coord_members *cm = c->members;
	for (size_t i = 0; cm && i < cm->nnj; i++) {
		const node_job *j = &cm->nj[i];
		if (j->p != p || strcmp(j->job, job))
			continue;
		uint32_t n = j->n < cap ? j->n : cap;
		memcpy(out, j->m, n * sizeof(*out));
		return n;
	}
	return 0;
}

void ckptd__coord_decide(ckptd_coordinator *c, const char *job, uint32_t kind, const peer *p, const ckptd_member *m,
                         uint32_t n, const char *why)
{
	if (c->members)
		decide(c, job, kind, p->node, m, n, 0, why);
}
