/* Persistent stragglers on the coordinator (roles_int.h): a rank the judge
 * (steps.c) flags slow for --straggler-windows judgements in a row gets its
 * node's evidence from that node's agent (ckptd/health), once; the evidence
 * is logged, kept for `ckpt stragglers --daemon` and `ckpt status`, turned
 * into metrics, and handed to the recovery side (found) which may replace
 * the rank's node. A rank that is no longer slow is dropped. */
#include "roles_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TRACKED 1024
#define ANSWER_NS 3000000000ull  /* an agent answers within this, or the record says it did not */
#define RING_NS 60000000000ull   /* the agents keep a minute of samples */

enum { ST_ASKED = 1, ST_KNOWN };

typedef struct tracked {
	int used, state;
	uint64_t asked_ns;
	ckptd_node_evidence ev;
} tracked;

struct ckptd_stragglers {
	const ckptd_config *cfg;
	const ckptd_log *log;
	ckptd_metrics *mx;
	ckptd_stragglers_ask_fn ask;
	ckptd_stragglers_found_fn found;
	void *arg;
	tracked *t; /* MAX_TRACKED */
};

int ckptd_stragglers_new(const ckptd_config *cfg, const ckptd_log *log, ckptd_metrics *mx, ckptd_stragglers_ask_fn ask,
                         ckptd_stragglers_found_fn found, void *arg, ckptd_stragglers **out)
{
	ckptd_stragglers *s = calloc(1, sizeof(*s));
	if (!s || !(s->t = calloc(MAX_TRACKED, sizeof(*s->t)))) {
		free(s);
		return -ENOMEM;
	}
	*s = (ckptd_stragglers){ cfg, log, mx, ask, found, arg, s->t };
	*out = s;
	return 0;
}

void ckptd_stragglers_free(ckptd_stragglers *s)
{
	if (!s)
		return;
	free(s->t);
	free(s);
}

static tracked *find(ckptd_stragglers *s, const char *job, uint32_t rank)
{
	for (int i = 0; i < MAX_TRACKED; i++)
		if (s->t[i].used && s->t[i].ev.rank == rank && !strcmp(s->t[i].ev.job, job))
			return &s->t[i];
	return NULL;
}

/* What the evidence names, for the metric's cause label. */
static void causes(ckptd_stragglers *s, const ckptd_node_evidence *ev)
{
	static const struct { const char *word, *label; } map[] = {
		{ "OOM kill", "oom_kill" }, { "hardware errors", "hardware_errors" }, { "CPU steal", "cpu_steal" },
		{ "CPU throttling", "cpu_throttling" }, { "CPU contention", "cpu_contention" },
		{ "memory pressure", "memory_pressure" }, { "I/O pressure", "io_pressure" }, { "slow disk", "slow_disk" },
	};
	int any = 0;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strstr(ev->verdict, map[i].word)) {
			ckptd_metrics_add(s->mx, CKPTD_M_STRAGGLER_CAUSES, ev->job, map[i].label, 1);
			any = 1;
		}
	if (!any)
		ckptd_metrics_add(s->mx, CKPTD_M_STRAGGLER_CAUSES, ev->job, ev->flags ? "none_found" : "no_evidence", 1);
}

static void known(ckptd_stragglers *s, tracked *t)
{
	t->state = ST_KNOWN;
	CKPTD_WARN(s->log, t->ev.node[0] ? t->ev.node : NULL, t->ev.job, "persistent straggler: %s", t->ev.text);
	causes(s, &t->ev);
	if (s->found)
		s->found(s->arg, &t->ev);
}

/* The record of a question nobody answered: what the coordinator saw. */
static void unanswered(ckptd_stragglers *s, tracked *t, const char *why)
{
	ckptd_node_evidence *e = &t->ev;
	e->flags = 0;
	e->verdict[0] = '\0';
	snprintf(e->text, sizeof(e->text),
	         "rank %u on %s: %.1f ms a step, %.2fx the fastest rank's %.1f ms, slow in %u judgements in a row; "
	         "no node evidence: %s", e->rank, e->node[0] ? e->node : "?", e->step_ns / 1e6,
	         e->fastest_ns ? (double)e->step_ns / (double)e->fastest_ns : 0.0, e->fastest_ns / 1e6, e->windows, why);
	known(s, t);
}

void ckptd_stragglers_judged(void *arg, const char *job, uint32_t rank, const char *node, uint32_t slow_runs,
                             uint64_t step_ns, uint64_t fastest_ns, uint64_t now_ns)
{
	ckptd_stragglers *s = arg;
	uint32_t persist = s->cfg->straggler_windows;
	tracked *t = find(s, job, rank);
	if (!slow_runs) { /* no longer slow */
		if (t) {
			CKPTD_INFO(s->log, t->ev.node[0] ? t->ev.node : NULL, job, "rank %u is no longer a persistent straggler",
			           rank);
			memset(t, 0, sizeof(*t));
		}
		return;
	}
	if (t) { /* still slow: what the coordinator sees is kept current */
		t->ev.windows = slow_runs;
		t->ev.step_ns = step_ns;
		t->ev.fastest_ns = fastest_ns;
		return;
	}
	if (!persist || slow_runs < persist)
		return;
	for (int i = 0; i < MAX_TRACKED && !t; i++)
		if (!s->t[i].used)
			t = &s->t[i];
	if (!t) {
		CKPTD_WARN(s->log, node[0] ? node : NULL, job, "rank %u is a persistent straggler; %d are tracked already, "
		           "its node evidence is not gathered", rank, MAX_TRACKED);
		return;
	}
	memset(t, 0, sizeof(*t));
	t->used = 1;
	t->state = ST_ASKED;
	t->asked_ns = now_ns;
	snprintf(t->ev.job, sizeof(t->ev.job), "%s", job);
	snprintf(t->ev.node, sizeof(t->ev.node), "%s", node);
	t->ev.rank = rank;
	t->ev.windows = slow_runs;
	t->ev.step_ns = step_ns;
	t->ev.fastest_ns = fastest_ns;
	ckptd_metrics_add(s->mx, CKPTD_M_STRAGGLER_PERSIST, job, NULL, 1);
	/* The agent's figures cover the time it was slow, up to its ring. */
	uint64_t window = (uint64_t)slow_runs * 1000000000ull;
	ckptd_evidence_request rq = { .rank = rank, .windows = slow_runs, .step_ns = step_ns, .fastest_ns = fastest_ns,
	                              .window_ns = window < RING_NS ? window : RING_NS };
	snprintf(rq.job, sizeof(rq.job), "%s", job);
	int r = node[0] && s->ask ? s->ask(s->arg, node, &rq) : -ENOENT;
	if (r < 0)
		unanswered(s, t, node[0] ? "its node's agent cannot be asked (down, or older than protocol 1.4)"
		                         : "its node is not known");
}

int ckptd_stragglers_evidence(ckptd_stragglers *s, const ckptd_node_evidence *ev, const char *from, uint64_t now_ns)
{
	(void)now_ns;
	tracked *t = find(s, ev->job, ev->rank);
	if (!t || t->state != ST_ASKED)
		return -ENOENT;
	if (strcmp(from, t->ev.node))
		return -EPERM;
	/* The coordinator's own figures stay: the agent only adds the node's. */
	uint32_t windows = t->ev.windows;
	uint64_t step = t->ev.step_ns, fastest = t->ev.fastest_ns;
	t->ev = *ev;
	snprintf(t->ev.node, sizeof(t->ev.node), "%s", from);
	t->ev.windows = windows > ev->windows ? windows : ev->windows;
	t->ev.step_ns = step;
	t->ev.fastest_ns = fastest;
	known(s, t);
	return 0;
}

void ckptd_stragglers_tick(ckptd_stragglers *s, uint64_t now_ns)
{
	for (int i = 0; i < MAX_TRACKED; i++)
		if (s->t[i].used && s->t[i].state == ST_ASKED && now_ns - s->t[i].asked_ns > ANSWER_NS)
			unanswered(s, &s->t[i], "its node's agent did not answer within 3 s");
}

int ckptd_stragglers_list(ckptd_stragglers *s, const char *job, ckptd_stragglers_reply *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->job, sizeof(out->job), "%s", job);
	uint32_t n = 0;
	for (int i = 0; i < MAX_TRACKED; i++)
		n += s->t[i].used && s->t[i].state == ST_KNOWN && !strcmp(s->t[i].ev.job, job);
	if (!n)
		return 0;
	if (n > CKPTD_MAX_LIST)
		n = CKPTD_MAX_LIST;
	if (!(out->entries = calloc(n, sizeof(*out->entries))))
		return -ENOMEM;
	for (int i = 0; i < MAX_TRACKED && out->count < n; i++)
		if (s->t[i].used && s->t[i].state == ST_KNOWN && !strcmp(s->t[i].ev.job, job))
			out->entries[out->count++] = s->t[i].ev;
	return 0;
}

const char *ckptd_stragglers_text(ckptd_stragglers *s, const char *job, uint32_t rank)
{
	tracked *t = find(s, job, rank);
	return t && t->state == ST_KNOWN ? t->ev.text : NULL;
}
