/* Spares and the recovery timeline, on the coordinator (docs/operations.md,
 * "Spares" and "Recoveries").
 *
 * Spares: agents started --spare say so in AGENT_HELLO; while free they
 * hold no ranks, are no partner and join no rs group. When a node is
 * decided lost (coord_members.c), one free spare takes all its ranks, of
 * every job: the one whose failure domain is neither the lost node's nor
 * one holding the lost ranks' partner copies, else one outside the lost
 * node's domain, else any; ties by node name. It is told with SPARE_ASSIGN
 * (per job: the ranks, the newest committed version), pulls their state
 * into its DRAM (agent_prefetch.c) and answers SPARE_DONE. From the choice
 * on it is a regular node: partner placement is made again with it. A
 * spare lost before its SPARE_DONE is replaced by another free one.
 *
 * The timeline: every failure decision starts a recovery of the ranks it
 * names; its phases end at the failure (the last sign of life), the
 * decision, the spare chosen, the state in the spare's DRAM, every rank
 * registered again (RANKS), every rank restored and every rank's first
 * step (the first STEP_REPORT after its registration: the step began when
 * its restore ended, so restored = arrival - its steps' time). Then each
 * phase goes to ckpt_recovery_phase_seconds and a RECOVERED event. The
 * newest KEEP recoveries are kept in memory for RECOVERIES and STATUS. */
#include "coordinator_int.h"
#include "hook.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEEP 64

typedef struct recov {
	ckptd_recovery r;      /* raw phase ends (output clamps them in order) */
	uint32_t n;            /* the ranks it follows */
	uint32_t *ranks;
	uint8_t *reg, *stepped;
	uint64_t *restored;    /* per rank: its restore's end */
	uint64_t *stepns;      /* per rank: its first step's report */
	uint64_t newest;       /* what a spare pulls: the job's newest version committed at a tier that
	                          survives a node (PEER_MEM, SHARED), else its newest committed */
	uint64_t newest_peer;  /* ... of those at PEER_MEM: protected again once a newer one commits there */
	int open;              /* its ranks' first steps not all seen */
	int need_spare;        /* node-lost: a spare wanted, none working on it */
	int pulled;            /* the spare's SPARE_DONE came (its pull ended, well or not) */
} recov;

/* A rank's registration, kept a while: a relaunched rank may register
 * before its predecessor's death is decided (the agent's RANKS list names
 * both at once, or the new one first). */
#define REGS 1024
typedef struct reg_rec {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t rank;
	uint64_t ns;
} reg_rec;

/* A step report, kept a while for the same reason: the relaunched rank's
 * first step may be reported before the decision. */
#define STEPS 4096
typedef struct step_rec {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t rank;
	uint64_t ns, start; /* its arrival; when the steps it covers began */
} step_rec;

struct coord_spares {
	recov rv[KEEP];
	size_t head, len; /* rv[(head + i) % KEEP], oldest first */
	reg_rec regs[REGS];
	size_t nregs;     /* regs[i % REGS], the newest REGS */
	step_rec steps[STEPS];
	size_t nsteps;    /* steps[i % STEPS], the newest STEPS */
	size_t nopen;     /* recoveries still waiting for first steps: the reports' fast path when 0 */
};

int ckptd__spares_open(ckptd_coordinator *c)
{
	return (c->spares = calloc(1, sizeof(*c->spares))) ? 0 : -ENOMEM;
}

static void recov_clear(recov *v)
{
	free(v->ranks);
	free(v->reg);
	free(v->stepped);
	free(v->restored);
	free(v->stepns);
	memset(v, 0, sizeof(*v));
}

void ckptd__spares_close(ckptd_coordinator *c)
{
	if (!c->spares)
		return;
	for (size_t i = 0; i < KEEP; i++)
		recov_clear(&c->spares->rv[i]);
	free(c->spares);
	c->spares = NULL;
}

static recov *at(struct coord_spares *cs, size_t i)
{
	return &cs->rv[(cs->head + i) % KEEP];
}

static int has_rank(const recov *v, uint32_t rank, uint32_t *idx)
{
	for (uint32_t i = 0; i < v->n; i++)
		if (v->ranks[i] == rank) {
			*idx = i;
			return 1;
		}
	return 0;
}

uint32_t ckptd__coord_spares_free(ckptd_coordinator *c)
{
	uint32_t n = 0;
	for (peer *p = c->peers; p; p = p->next)
		n += p->spare && p->up && !p->degraded && !p->decided_lost;
	return n;
}

/* ---------------------------------------------------------------- versions */

static int newest_cb(void *arg, const ckptd_coord_version *v)
{
	uint64_t *best = arg;
	if (v->state == CKPT_STATE_COMMITTED && v->committed && v->version > best[0])
		best[0] = v->version;
	if (v->state == CKPT_STATE_COMMITTED && (v->committed & CKPT_TIER_PEER_MEM) && v->version > best[1])
		best[1] = v->version;
	if (v->state == CKPT_STATE_COMMITTED && (v->committed & (CKPT_TIER_PEER_MEM | CKPT_TIER_SHARED)) &&
	    v->version > best[2])
		best[2] = v->version;
	return 0;
}

/* The version a spare pulls: the job's newest committed at a tier off the
 * lost node (a newer one committed only at LOCAL_MEM or LOCAL_DISK, its
 * partner copies still on their way, went with the node), else its newest
 * committed; and its newest committed at PEER_MEM. */
static void newest_committed(ckptd_coordinator *c, const char *job, uint64_t *pull, uint64_t *peer)
{
	uint64_t best[3] = { 0, 0, 0 };
	ckptd__coord_flush_batch(c);
	ckptd_coord_list(c->db, job, 0, newest_cb, best);
	*pull = best[2] ? best[2] : best[0];
	*peer = best[1];
}

/* ---------------------------------------------------------------- choice */

#define DOMS_MAX 64

typedef struct copies_acc {
	ckptd_coordinator *c;
	const recov *v;
	char doms[DOMS_MAX][CKPTD_NAME_MAX + 1]; /* the partner copies' domains */
	size_t ndoms;
	uint64_t *bytes; /* per rank of v */
} copies_acc;

static int copies_cb(void *arg, const ckptd_coord_copy_info *ci)
{
	copies_acc *a = arg;
	uint32_t i;
	if (ci->deleting || !has_rank(a->v, ci->rank, &i))
		return 0;
	if (ci->bytes && !a->bytes[i])
		a->bytes[i] = ci->bytes;
	if (ci->tier != CKPT_TIER_PEER_MEM)
		return 0;
	peer *q = ckptd__coord_peer_find(a->c, ci->node);
	if (!q || !q->domain[0])
		return 0;
	for (size_t k = 0; k < a->ndoms; k++)
		if (!strcmp(a->doms[k], q->domain))
			return 0;
	if (a->ndoms < DOMS_MAX)
		snprintf(a->doms[a->ndoms++], CKPTD_NAME_MAX + 1, "%s", q->domain);
	return 0;
}

static int can_take(const peer *q)
{
	return q->spare && q->up && !q->degraded && !q->decided_lost && q->s && !q->local &&
	       CKPTD_VERSION_MINOR_OF(ckptd_session_version(q->s)) >= 6;
}

/* 0: a domain apart from the lost node and the partner copies; 1: apart
 * from the lost node only; 2: the lost node's own (or no domain known). */
static int score(const peer *q, const peer *lost, const copies_acc *a)
{
	if (lost && lost->domain[0] && !strcmp(q->domain, lost->domain))
		return 2;
	for (size_t k = 0; q->domain[0] && k < a->ndoms; k++)
		if (!strcmp(a->doms[k], q->domain))
			return 1;
	return 0;
}

/* The spare for v (its lost node `lost`, may be NULL), or NULL; why says
 * how it was chosen. */
static peer *choose(ckptd_coordinator *c, const peer *lost, const copies_acc *a, char *why, size_t cap)
{
	peer *best = NULL;
	int bs = 3;
	size_t n = 0;
	char passed[400] = "";
	for (peer *q = c->peers; q; q = q->next) {
		if (!can_take(q))
			continue;
		int s = score(q, lost, a);
		if (s < bs || (s == bs && strcmp(q->node, best->node) < 0)) {
			best = q;
			bs = s;
		}
	}
	for (peer *q = c->peers; q; q = q->next)
		if (can_take(q) && q != best) {
			size_t k = strlen(passed);
			int s = score(q, lost, a);
			snprintf(passed + k, sizeof(passed) - k, "%s%s (%s)", k ? ", " : "", q->node,
			         s == 2 ? "the lost node's domain" : s == 1 ? "a partner copy's domain" : "later by name");
			n++;
		}
	if (!best)
		return NULL;
	char doms[300] = "";
	for (size_t k = 0; k < a->ndoms; k++) {
		size_t l = strlen(doms);
		snprintf(doms + l, sizeof(doms) - l, "%s%s", k ? "," : "", a->doms[k]);
	}
	snprintf(why, cap, "domain %s; the lost node's %s, its ranks' partner copies' %s; %s%s%s",
	         best->domain[0] ? best->domain : "(none)", lost && lost->domain[0] ? lost->domain : "(none)",
	         doms[0] ? doms : "(none)",
	         bs == 0 ? "apart from both" : bs == 1 ? "apart from the lost node's only (no spare apart from both)"
	                                          : "in the lost node's domain (no spare outside it)",
	         n ? "; passed over: " : "", passed);
	return best;
}

static void note(ckptd_coordinator *c, const recov *v, uint32_t kind, const char *node, const char *text)
{
	ckptd_event e = { .epoch = v->r.epoch, .kind = kind, .time_ns = ckpt__wall_ns() };
	snprintf(e.job, sizeof(e.job), "%s", v->r.job);
	snprintf(e.node, sizeof(e.node), "%s", node);
	snprintf(e.text, sizeof(e.text), "%s", text);
	ckptd__coord_event_note(c, &e);
}

/* Tells spare q to take v's ranks (bytes: per rank, 0 unknown). */
static void assign(ckptd_coordinator *c, recov *v, peer *q, const uint64_t *bytes, const char *why)
{
	ckptd_spare_rank *ent = calloc(v->n ? v->n : 1, sizeof(*ent));
	if (!ent)
		return;
	for (uint32_t i = 0; i < v->n; i++)
		ent[i] = (ckptd_spare_rank){ v->ranks[i], bytes ? bytes[i] : 0 };
	ckptd_msg m = { .type = CKPTD_MSG_SPARE_ASSIGN };
	ckptd_spare_assign *sa = &m.u.spare_assign;
	snprintf(sa->job, sizeof(sa->job), "%s", v->r.job);
	snprintf(sa->node, sizeof(sa->node), "%s", v->r.node);
	sa->epoch = v->r.epoch;
	sa->version = v->newest;
	sa->count = v->n;
	sa->entries = ent;
	ckptd__coord_peer_send(c, q, &m);
	free(ent);
	q->spare = 0; /* a regular node from now on */
	snprintf(q->took, sizeof(q->took), "%s", v->r.node);
	q->took_ns = ckpt__wall_ns();
	(void)ckptd__coord_note_job(c, q, v->r.job); /* it hears the job's notices */
	v->r.chosen_ns = q->took_ns;
	v->r.ready_ns = 0;
	v->pulled = 0;
	v->r.code = 0;
	v->r.text[0] = '\0';
	v->need_spare = 0;
	snprintf(v->r.spare, sizeof(v->r.spare), "%s", q->node);
	char text[CKPTD_TEXT_MAX + 1];
	snprintf(text, sizeof(text), "takes %s's ranks %s (version %" PRIu64 "): %.800s", v->r.node, v->r.ranks,
	         v->newest, why);
	CKPTD_WARN(c->log, q->node, v->r.job, "spare %s chosen for lost node %s, ranks %s, epoch %" PRIu64
	           " (version %" PRIu64 "; %s)", q->node, v->r.node, v->r.ranks, v->r.epoch, v->newest, why);
	ckptd_metrics_add(c->mx, CKPTD_M_SPARE_DECISIONS, v->r.job, "chosen", 1);
	note(c, v, CKPTD_FAIL_SPARE_CHOSEN, q->node, text);
}

static void no_spare(ckptd_coordinator *c, recov *v, const char *lost_spare)
{
	v->need_spare = 0;
	v->r.code = ENOENT;
	char ranks[CKPTD_TEXT_MAX + 1], text[CKPTD_TEXT_MAX + 1];
	snprintf(ranks, sizeof(ranks), "%s", v->r.ranks);
	snprintf(text, sizeof(text), "%s%s%sno spare free (start agents with --spare): ranks %.700s restore "
	         "from partner DRAM, an rs group or SHARED wherever they are relaunched",
	         lost_spare ? "spare " : "", lost_spare ? lost_spare : "", lost_spare ? " lost while it pulled; " : "",
	         ranks);
	snprintf(v->r.text, sizeof(v->r.text), "%s", text);
	/* A cluster run without spares hears of it in the log only. */
	int any = lost_spare != NULL;
	for (peer *q = c->peers; q && !any; q = q->next)
		any = q->spare || q->took[0];
	if (!any) {
		CKPTD_INFO(c->log, v->r.node, v->r.job, "lost node %s, ranks %s, epoch %" PRIu64 ": this cluster has no "
		           "spares (agents started --spare): its ranks restore wherever they are relaunched", v->r.node,
		           v->r.ranks, v->r.epoch);
		return;
	}
	CKPTD_ERROR(c->log, v->r.node, v->r.job, "lost node %s, ranks %s, epoch %" PRIu64 ": %s", v->r.node,
	            v->r.ranks, v->r.epoch, v->r.text);
	ckptd_metrics_add(c->mx, CKPTD_M_SPARE_DECISIONS, v->r.job, "none", 1);
	note(c, v, CKPTD_FAIL_NO_SPARE, v->r.node, v->r.text);
}

void ckptd__coord_spares_node_lost(ckptd_coordinator *c, peer *p)
{
	struct coord_spares *cs = c->spares;
	if (!cs)
		return;
	p->spare = 0; /* a lost spare is free no more (it says so again if it comes back) */
	const char *lost_spare = NULL;
	/* A spare lost while it pulled: its recoveries want another. */
	for (size_t i = 0; i < cs->len; i++) {
		recov *v = at(cs, i);
		if (v->open && v->r.spare[0] && !v->pulled && !strcmp(v->r.spare, p->node)) {
			CKPTD_ERROR(c->log, p->node, v->r.job, "spare %s lost while it pulled lost node %s's ranks %s "
			            "(epoch %" PRIu64 "): choosing another", p->node, v->r.node, v->r.ranks, v->r.epoch);
			ckptd_metrics_add(c->mx, CKPTD_M_SPARE_DECISIONS, v->r.job, "failed", 1);
			v->r.spare[0] = '\0';
			v->r.chosen_ns = 0;
			v->need_spare = 1;
			lost_spare = p->node;
		}
	}
	/* One spare per lost node, for every job of it. */
	int placed = 0;
	for (size_t i = 0; i < cs->len; i++) {
		recov *v = at(cs, i);
		if (!v->need_spare)
			continue;
		peer *q = NULL;
		char why[CKPTD_TEXT_MAX + 1] = "";
		for (size_t j = 0; j < i && !q; j++) { /* the node's other job took one just now */
			recov *w = at(cs, j);
			if (w->open && w->r.spare[0] && !strcmp(w->r.node, v->r.node) && w->r.chosen_ns &&
			    w->r.epoch && !w->r.ready_ns && (q = ckptd__coord_peer_find(c, w->r.spare)))
				snprintf(why, sizeof(why), "the spare that took %s's other job", v->r.node);
		}
		copies_acc *a = calloc(1, sizeof(*a));
		uint64_t *bytes = calloc(v->n ? v->n : 1, sizeof(*bytes));
		if (!a || !bytes) {
			free(a);
			free(bytes);
			continue;
		}
		a->c = c;
		a->v = v;
		a->bytes = bytes;
		if (v->newest)
			ckptd_coord_copies(c->db, v->r.job, v->newest, 0, copies_cb, a);
		peer *lost = ckptd__coord_peer_find(c, v->r.node);
		if (!q)
			q = choose(c, lost, a, why, sizeof(why));
		if (q) {
			assign(c, v, q, bytes, why);
			placed = 1;
		} else {
			no_spare(c, v, lost_spare);
		}
		free(a);
		free(bytes);
	}
	if (placed)
		ckptd__coord_place_partners(c); /* the spare is a partner and a group candidate now */
}

void ckptd__coord_spare_done(ckptd_coordinator *c, peer *p, const ckptd_spare_done *d)
{
	struct coord_spares *cs = c->spares;
	for (size_t i = 0; cs && i < cs->len; i++) {
		recov *v = at(cs, i);
		if (v->r.epoch != d->epoch || strcmp(v->r.job, d->job) || strcmp(v->r.spare, p->node) || v->pulled)
			continue;
		uint64_t now = ckpt__wall_ns();
		v->pulled = 1;
		v->r.bytes = d->bytes;
		char text[CKPTD_TEXT_MAX + 1];
		if (d->code == 0) {
			v->r.ready_ns = now;
			double s = (double)(now - v->r.chosen_ns) / 1e9;
			ckptd_metrics_add(c->mx, CKPTD_M_SPARE_DECISIONS, v->r.job, "ready", 1);
			ckptd_metrics_observe(c->mx, CKPTD_M_SPARE_PULL, v->r.job, NULL, s);
			snprintf(text, sizeof(text), "%s's ranks %s (%u, %" PRIu64 " bytes of version %" PRIu64 ") in its DRAM "
			         "%.3f s after the choice: %.600s", v->r.node, v->r.ranks, d->count, d->bytes, d->version, s,
			         d->text);
			CKPTD_INFO(c->log, p->node, v->r.job, "spare %s ready: %s", p->node, text);
		} else {
			v->r.code = d->code;
			snprintf(text, sizeof(text), "spare %s pulled %u of %s's ranks %.100s: %.800s", p->node, d->count,
			         v->r.node, v->r.ranks, d->text);
			snprintf(v->r.text, sizeof(v->r.text), "%s", text);
			snprintf(text, sizeof(text), "FAILED: %s", v->r.text);
			ckptd_metrics_add(c->mx, CKPTD_M_SPARE_DECISIONS, v->r.job, "failed", 1);
			CKPTD_ERROR(c->log, p->node, v->r.job, "epoch %" PRIu64 ": %s; the ranks not pulled restore from "
			            "what is left (their own restore tries every tier)", v->r.epoch, v->r.text);
		}
		note(c, v, CKPTD_FAIL_SPARE_READY, p->node, text);
		return;
	}
	CKPTD_INFO(c->log, p->node, d->job, "SPARE_DONE for epoch %" PRIu64 " matches no recovery given to %s",
	           d->epoch, p->node);
}

/* ---------------------------------------------------------------- timeline */

static void stepped(ckptd_coordinator *c, recov *v, uint32_t k, uint64_t ns, uint64_t start);

void ckptd__coord_recovery_begin(ckptd_coordinator *c, const ckptd_event *e)
{
	struct coord_spares *cs = c->spares;
	if (!cs || !e->job[0] ||
	    ((e->kind < CKPTD_FAIL_RANK_DIED || e->kind > CKPTD_FAIL_RANK_HUNG) && e->kind != CKPTD_FAIL_STRAGGLER))
		return;
	recov *v = at(cs, cs->len);
	if (cs->len == KEEP)
		cs->head = (cs->head + 1) % KEEP;
	else
		cs->len++;
	cs->nopen -= v->open; /* an unfinished one pushed out */
	recov_clear(v);
	uint32_t n = e->count;
	v->ranks = calloc(n ? n : 1, sizeof(*v->ranks));
	v->reg = calloc(n ? n : 1, 1);
	v->stepped = calloc(n ? n : 1, 1);
	v->restored = calloc(n ? n : 1, sizeof(*v->restored));
	v->stepns = calloc(n ? n : 1, sizeof(*v->stepns));
	if (!v->ranks || !v->reg || !v->stepped || !v->restored || !v->stepns) {
		recov_clear(v);
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		v->ranks[i] = e->entries[i].rank;
	v->n = n;
	snprintf(v->r.job, sizeof(v->r.job), "%s", e->job);
	snprintf(v->r.node, sizeof(v->r.node), "%s", e->node);
	v->r.epoch = e->epoch;
	v->r.kind = e->kind;
	v->r.detected_ns = e->time_ns;
	v->r.failed_ns = e->silent_ns < e->time_ns ? e->time_ns - e->silent_ns : e->time_ns;
	ckptd_ranks_text(e->entries, e->count, v->r.ranks, sizeof(v->r.ranks));
	newest_committed(c, e->job, &v->newest, &v->newest_peer);
	v->open = n > 0;
	cs->nopen += v->open;
	/* A replaced straggler's node is left as a lost one is. */
	v->need_spare = (e->kind == CKPTD_FAIL_NODE_LOST || e->kind == CKPTD_FAIL_STRAGGLER) && n > 0;
	/* Ranks registered again since the failure, before this decision. */
	uint32_t left = n;
	for (size_t i = cs->nregs > REGS ? cs->nregs - REGS : 0; i < cs->nregs; i++) {
		const reg_rec *g = &cs->regs[i % REGS];
		uint32_t k;
		if (g->ns < v->r.failed_ns || strcmp(g->job, e->job) || !has_rank(v, g->rank, &k))
			continue;
		left -= !v->reg[k];
		v->reg[k] = 1;
		v->restored[k] = g->ns;
		if (g->ns > v->r.registered_ns)
			v->r.registered_ns = g->ns;
	}
	if (left)
		v->r.registered_ns = 0;
	/* ... and their first steps, reported since. */
	for (uint32_t k = 0; k < v->n && v->open; k++) {
		if (!v->reg[k])
			continue;
		for (size_t i = cs->nsteps > STEPS ? cs->nsteps - STEPS : 0; i < cs->nsteps; i++) {
			const step_rec *g = &cs->steps[i % STEPS];
			if (g->rank == v->ranks[k] && g->ns >= v->restored[k] && !strcmp(g->job, e->job)) {
				stepped(c, v, k, g->ns, g->start);
				break;
			}
		}
	}
}

void ckptd__coord_recovery_rank_up(ckptd_coordinator *c, peer *p, const char *job, uint32_t rank)
{
	struct coord_spares *cs = c->spares;
	uint64_t now = ckpt__wall_ns();
	if (!cs)
		return;
	reg_rec *g = &cs->regs[cs->nregs++ % REGS];
	snprintf(g->job, sizeof(g->job), "%s", job);
	g->rank = rank;
	g->ns = now;
	for (size_t i = 0; i < cs->len; i++) {
		recov *v = at(cs, i);
		uint32_t k;
		if (!v->open || strcmp(v->r.job, job) || now < v->r.detected_ns || !has_rank(v, rank, &k) || v->reg[k])
			continue;
		v->reg[k] = 1;
		v->restored[k] = now; /* its restore ends after this */
		uint32_t left = 0;
		for (uint32_t j = 0; j < v->n; j++)
			left += !v->reg[j];
		CKPTD_DEBUG(c->log, p->node, job, "recovery of epoch %" PRIu64 ": rank %u registered on %s (%u to go)",
		            v->r.epoch, rank, p->node, left);
		if (!left)
			v->r.registered_ns = now;
	}
}

static void finish(ckptd_coordinator *c, recov *v);

/* Rank k of v took its first step (reported at ns, begun at start). */
static void stepped(ckptd_coordinator *c, recov *v, uint32_t k, uint64_t ns, uint64_t start)
{
	if (start > v->restored[k])
		v->restored[k] = start; /* it restored before its first step began */
	v->stepped[k] = 1;
	v->stepns[k] = ns;
	uint64_t restored = 0, first = 0;
	for (uint32_t j = 0; j < v->n; j++) {
		if (!v->stepped[j])
			return;
		if (v->restored[j] > restored)
			restored = v->restored[j];
		if (v->stepns[j] > first)
			first = v->stepns[j];
	}
	v->r.restored_ns = restored;
	v->r.first_step_ns = first;
	finish(c, v);
}

/* The phases' ends in order, each at least the one before (a phase that
 * ended before the previous one, e.g. ranks registered while the spare
 * still pulled, takes 0 s); 0: not part of this recovery. */
enum { PH_FAILED, PH_DETECTED, PH_CHOSEN, PH_READY, PH_REGISTERED, PH_RESTORED, PH_FIRST_STEP, PH_N };
static const char *const phase_name[PH_N] = { "failure", "detect", "spare", "pull", "register", "restore",
	                                          "first_step" };

static void ordered(const ckptd_recovery *r, uint64_t t[PH_N])
{
	t[PH_FAILED] = r->failed_ns;
	t[PH_DETECTED] = r->detected_ns;
	t[PH_CHOSEN] = r->chosen_ns;
	t[PH_READY] = r->ready_ns;
	t[PH_REGISTERED] = r->registered_ns;
	t[PH_RESTORED] = r->restored_ns;
	t[PH_FIRST_STEP] = r->first_step_ns;
	uint64_t last = 0;
	for (int i = 0; i < PH_N; i++)
		if (t[i]) {
			if (t[i] < last)
				t[i] = last;
			last = t[i];
		}
}

static void finish(ckptd_coordinator *c, recov *v)
{
	uint64_t t[PH_N];
	ordered(&v->r, t);
	char text[CKPTD_TEXT_MAX + 1];
	int n = snprintf(text, sizeof(text), "failure to first step %.3f s:",
	                 (double)(t[PH_FIRST_STEP] - t[PH_FAILED]) / 1e9);
	uint64_t last = t[PH_FAILED];
	for (int i = PH_DETECTED; i < PH_N; i++) {
		if (!t[i])
			continue;
		double s = (double)(t[i] - last) / 1e9;
		ckptd_metrics_observe(c->mx, CKPTD_M_RECOVERY_PHASE, phase_name[i], NULL, s);
		if (n > 0 && (size_t)n < sizeof(text))
			n += snprintf(text + n, sizeof(text) - (size_t)n, " %s %.3f s%s", phase_name[i], s, i < PH_N - 1 ? "," : "");
		last = t[i];
	}
	ckptd_metrics_observe(c->mx, CKPTD_M_RECOVERY_PHASE, "total", NULL,
	                      (double)(t[PH_FIRST_STEP] - t[PH_FAILED]) / 1e9);
	v->open = 0;
	c->spares->nopen--;
	CKPTD_INFO(c->log, v->r.node, v->r.job, "recovered from %s on %s (epoch %" PRIu64 ", ranks %s%s%s): %s",
	           ckptd_fail_name(v->r.kind), v->r.node, v->r.epoch, v->r.ranks, v->r.spare[0] ? ", spare " : "",
	           v->r.spare, text);
	note(c, v, CKPTD_FAIL_RECOVERED, v->r.node, text);
}

void ckptd__coord_recovery_step(ckptd_coordinator *c, const ckptd_step_report *r)
{
	struct coord_spares *cs = c->spares;
	uint64_t now = ckpt__wall_ns();
	if (!cs)
		return;
	/* The steps this report covers began when its restore had ended. */
	uint64_t steps = r->step_ns * (r->count ? r->count : 1);
	uint64_t start = steps < now ? now - steps : now;
	step_rec *g = &cs->steps[cs->nsteps++ % STEPS];
	snprintf(g->job, sizeof(g->job), "%s", r->job);
	g->rank = r->rank;
	g->ns = now;
	g->start = start;
	for (size_t i = 0; cs->nopen && i < cs->len; i++) {
		recov *v = at(cs, i);
		uint32_t k;
		if (v->open && !strcmp(v->r.job, r->job) && has_rank(v, r->rank, &k) && v->reg[k] && !v->stepped[k])
			stepped(c, v, k, now, start);
	}
}

void ckptd__coord_recovery_commit(ckptd_coordinator *c, const char *job, uint64_t version, uint32_t tiers)
{
	struct coord_spares *cs = c->spares;
	if (!cs || !(tiers & CKPT_TIER_PEER_MEM))
		return;
	for (size_t i = 0; i < cs->len; i++) {
		recov *v = at(cs, i);
		if (v->r.protected_ns || strcmp(v->r.job, job) || version <= v->newest_peer)
			continue;
		v->r.protected_ns = ckpt__wall_ns();
		CKPTD_INFO(c->log, v->r.node, job, "protected again after %s on %s (epoch %" PRIu64 "): version %" PRIu64
		           " committed at PEER_MEM %.3f s after the failure", ckptd_fail_name(v->r.kind), v->r.node,
		           v->r.epoch, version, (double)(v->r.protected_ns - v->r.failed_ns) / 1e9);
	}
}

/* ---------------------------------------------------------------- queries */

static void out_entry(const recov *v, ckptd_recovery *o)
{
	*o = v->r;
	uint64_t t[PH_N];
	ordered(&v->r, t);
	o->failed_ns = t[PH_FAILED];
	o->detected_ns = t[PH_DETECTED];
	o->chosen_ns = t[PH_CHOSEN];
	o->ready_ns = t[PH_READY];
	o->registered_ns = t[PH_REGISTERED];
	o->restored_ns = t[PH_RESTORED];
	o->first_step_ns = t[PH_FIRST_STEP];
}

int ckptd__coord_recoveries_query(ckptd_coordinator *c, ckptd_session *s, const ckptd_recoveries *q)
{
	struct coord_spares *cs = c->spares;
	const char *sjob = ckptd_session_job(s);
	const char *job = sjob[0] ? sjob : q->job;
	ckptd_msg m = { .type = CKPTD_MSG_RECOVERIES_REPLY };
	ckptd_recoveries_reply *o = &m.u.recoveries_reply;
	snprintf(o->job, sizeof(o->job), "%s", job);
	if (!(o->entries = calloc(KEEP, sizeof(*o->entries))))
		return -ENOMEM;
	for (size_t i = 0; i < cs->len; i++) {
		const recov *v = at(cs, i);
		if (!job[0] || !strcmp(v->r.job, job))
			out_entry(v, &o->entries[o->count++]);
	}
	int r = ckptd_session_send(s, &m, -1);
	free(o->entries);
	return r;
}

int ckptd__coord_recoveries_status(ckptd_coordinator *c, const char *job, ckptd_status_reply *out)
{
	struct coord_spares *cs = c->spares;
	if (!cs || !cs->len)
		return 0;
	if (!(out->recoveries = calloc(cs->len, sizeof(*out->recoveries))))
		return -ENOMEM;
	/* Per job, newest first: its newest recovery, and its newest with a
	 * spare (which spare took which node) when that is an older one. */
	for (int want_spare = 0; want_spare < 2; want_spare++)
		for (size_t i = cs->len; i-- > 0;) {
			const recov *v = at(cs, i);
			if ((job && job[0] && strcmp(v->r.job, job)) || (want_spare && !v->r.spare[0]))
				continue;
			int seen = 0;
			for (uint32_t k = 0; k < out->nrecoveries && !seen; k++)
				seen = !strcmp(out->recoveries[k].job, v->r.job) &&
				       (!want_spare || out->recoveries[k].spare[0] || out->recoveries[k].epoch == v->r.epoch);
			if (!seen)
				out_entry(v, &out->recoveries[out->nrecoveries++]);
		}
	return 0;
}
