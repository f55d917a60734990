/* Step times and stragglers, on the coordinator. Every rank reports its
 * step time about once a second (ckpt_step, batched by libckpt); each rank's
 * time is smoothed, and once a second the job is judged: when the slowest
 * rank takes more than --straggler-slowest percent of the fastest's step,
 * every rank above --straggler-rank percent of it is a straggler. Only
 * reports younger than --straggler-window count, so a rank that stopped
 * reporting (restarted, gone) neither is one nor sets the pace. A change is
 * logged once, naming the rank and its node, and kept in the metrics. */
#include "roles_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS (1u << 20) /* a bound on memory per job */
#define SMOOTH 0.3           /* weight of a new report in the smoothed time */
#define SLICE_NS 60000000000ull /* goodput timeline: one slice a minute */
#define SLICES 1440             /* the last day */
#define GAP_NS 3000000000ull    /* a pause between reports longer than this is downtime */
#define DEFAULT_MTBF_NS (24 * 3600 * 1000000000ull) /* until 3 restarts are seen */
#define RESEND_NS 10000000000ull /* the advice is said again this often (late joiners) */

typedef struct rank_steps {
	uint64_t step, at_ns;
	double ns;            /* smoothed step time */
	char node[CKPTD_NAME_MAX + 1];
	uint8_t seen, flagged;
	uint32_t slow_runs;   /* judgements in a row it was flagged in */
} rank_steps;

/* Where a job's time went, judged from one rank's reports (the pace rank:
 * the lowest that reports; every rank steps in lockstep with it). */
typedef struct acct {
	uint32_t pace;        /* UINT32_MAX: none yet */
	uint64_t first_ns, last_ns, max_step;
	uint64_t useful, stall, restore, recompute, down;
	uint32_t failures;
	uint64_t cost_stall, cost_saves; /* what checkpoints cost: stalls over saves */
	ckptd_goodput_slice *slices; /* ring of SLICES, by start / SLICE_NS */
	/* the interval advised, the same for every rank */
	uint64_t adv_every, adv_from, adv_ns, adv_mtbf, adv_cost, adv_sent_ns;
} acct;

typedef struct job_steps {
	struct job_steps *next;
	char job[CKPTD_JOB_MAX + 1];
	rank_steps *r;
	uint32_t n, cap;
	acct a;
} job_steps;

struct ckptd_steps {
	const ckptd_config *cfg;
	const ckptd_log *log;
	ckptd_metrics *mx;
	ckptd_steps_announce_fn announce;
	void *announce_arg;
	ckptd_steps_slow_fn slow;
	void *slow_arg;
	job_steps *jobs;
	uint32_t njobs;
};

int ckptd_steps_new(const ckptd_config *cfg, const ckptd_log *log, ckptd_metrics *mx, ckptd_steps_announce_fn fn,
                    void *arg, ckptd_steps **out)
{
	ckptd_steps *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->announce = fn;
	s->announce_arg = arg;
	s->cfg = cfg;
	s->log = log;
	s->mx = mx;
	*out = s;
	return 0;
}

void ckptd_steps_on_slow(ckptd_steps *s, ckptd_steps_slow_fn fn, void *arg)
{
	s->slow = fn;
	s->slow_arg = arg;
}

void ckptd_steps_free(ckptd_steps *s)
{
	if (!s)
		return;
	for (job_steps *j = s->jobs, *n; j; j = n) {
		n = j->next;
		free(j->r);
		free(j->a.slices);
		free(j);
	}
	free(s);
}

static job_steps *job_find(ckptd_steps *s, const char *job, int create)
{
	for (job_steps *j = s->jobs; j; j = j->next)
		if (!strcmp(j->job, job))
			return j;
	if (!create || s->njobs >= CKPTD_METRICS_MAX_JOBS)
		return NULL;
	job_steps *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	snprintf(j->job, sizeof(j->job), "%s", job);
	j->a.pace = UINT32_MAX;
	j->next = s->jobs;
	s->jobs = j;
	s->njobs++;
	return j;
}

static ckptd_goodput_slice *slice_at(acct *a, uint64_t now_ns)
{
	if (!a->slices && !(a->slices = calloc(SLICES, sizeof(*a->slices))))
		return NULL;
	uint64_t k = (now_ns - a->first_ns) / SLICE_NS;
	ckptd_goodput_slice *sl = &a->slices[k % SLICES];
	if (sl->start != k * SLICE_NS || k == 0) {
		if (sl->start != k * SLICE_NS)
			memset(sl, 0, sizeof(*sl));
		sl->start = k * SLICE_NS;
	}
	return sl;
}

static const char *const kinds[] = { "useful", "stall", "restore", "recompute", "down" };

/* The pace rank's report: its steps' time split into useful work (steps the
 * job had not reached before), work done again (after a restart), the
 * checkpoint stalls within them, the restore before them, and a pause since
 * the previous report longer than GAP_NS as downtime (a restart). */
static void account(ckptd_steps *s, job_steps *j, const ckptd_step_report *r, uint64_t now_ns)
{
	acct *a = &j->a;
	uint64_t count = r->count ? r->count : 1, batch = count * r->step_ns;
	uint64_t stall = r->stall_ns < batch ? r->stall_ns : batch, pure = batch - stall;
	uint64_t add[5] = { 0 };
	if (!a->first_ns) {
		uint64_t lead = batch + r->restore_ns;
		a->first_ns = now_ns > lead ? now_ns - lead : 0;
		add[2] = r->restore_ns;
	} else {
		uint64_t gap = now_ns > a->last_ns + batch ? now_ns - a->last_ns - batch : 0;
		uint64_t rest = r->restore_ns < gap ? r->restore_ns : gap;
		add[2] = rest;
		if (gap > GAP_NS || r->step < a->max_step) {
			add[4] = gap - rest;
			a->failures++;
		}
	}
	uint64_t first = r->step >= count ? r->step - count + 1 : 0;
	uint64_t fresh = r->step > a->max_step ? r->step - (a->max_step >= first ? a->max_step : first - 1) : 0;
	if (fresh > count)
		fresh = count;
	add[0] = pure / count * fresh;
	add[3] = pure - add[0];
	add[1] = stall;
	a->cost_stall += r->stall_ns;
	a->cost_saves += r->saves;
	a->useful += add[0];
	a->stall += add[1];
	a->restore += add[2];
	a->recompute += add[3];
	a->down += add[4];
	if (r->step > a->max_step)
		a->max_step = r->step;
	a->last_ns = now_ns;
	ckptd_goodput_slice *sl = slice_at(a, now_ns);
	if (sl) {
		sl->useful_ns += add[0];
		sl->stall_ns += add[1];
		sl->restore_ns += add[2];
		sl->recompute_ns += add[3];
		sl->down_ns += add[4];
	}
	for (int k = 0; k < 5; k++)
		if (add[k])
			ckptd_metrics_add(s->mx, CKPTD_M_TIME_SECONDS, j->job, kinds[k], add[k] / 1e9);
	uint64_t wall = a->last_ns - a->first_ns;
	if (wall)
		ckptd_metrics_set(s->mx, CKPTD_M_GOODPUT, j->job, NULL, (double)a->useful / (double)wall);
}

int ckptd_steps_report(ckptd_steps *s, const ckptd_step_report *r, uint64_t now_ns)
{
	if (r->rank >= MAX_RANKS || !r->step_ns)
		return -EINVAL;
	job_steps *j = job_find(s, r->job, 1);
	if (!j)
		return -ENOMEM;
	if (r->rank >= j->cap) {
		uint32_t nc = j->cap ? j->cap : 64;
		while (nc <= r->rank)
			nc *= 2;
		rank_steps *p = realloc(j->r, nc * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + j->cap, 0, (nc - j->cap) * sizeof(*p));
		j->r = p;
		j->cap = nc;
	}
	if (r->rank >= j->n)
		j->n = r->rank + 1;
	rank_steps *e = &j->r[r->rank];
	double v = (double)r->step_ns;
	/* A rank that was silent longer than the window starts afresh. */
	int fresh = !e->seen || now_ns - e->at_ns > s->cfg->straggler_window_ms * 1000000ull;
	e->ns = fresh ? v : (1 - SMOOTH) * e->ns + SMOOTH * v;
	e->step = r->step;
	e->at_ns = now_ns;
	e->seen = 1;
	if (r->node[0])
		snprintf(e->node, sizeof(e->node), "%s", r->node);
	ckptd_metrics_add(s->mx, CKPTD_M_STEP_REPORTS, r->job, NULL, 1);
	if (r->restore_ns && r->restore_tier)
		ckptd_metrics_observe(s->mx, CKPTD_M_RESTORE_SECONDS, r->job, ckptd_metrics_tier(r->restore_tier),
		                      r->restore_ns / 1e9);
	if (r->errors)
		ckptd_metrics_add(s->mx, CKPTD_M_SAVE_ERRORS, r->job, NULL, r->errors);
	if (r->peer_skips)
		ckptd_metrics_add(s->mx, CKPTD_M_PEER_SKIPS, r->job, NULL, r->peer_skips);
	if (r->fabric_errors)
		ckptd_metrics_add(s->mx, CKPTD_M_FABRIC_ERRORS, r->job, NULL, r->fabric_errors);
	if (r->rank < j->a.pace)
		j->a.pace = r->rank; /* the lowest rank sets the pace from now on */
	if (r->rank == j->a.pace)
		account(s, j, r, now_ns);
	return 0;
}

int ckptd_steps_goodput(ckptd_steps *s, const char *job, ckptd_goodput_reply *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->job, sizeof(out->job), "%s", job);
	job_steps *j = job_find(s, job, 0);
	if (!j || !j->a.first_ns)
		return 0;
	acct *a = &j->a;
	out->wall_ns = a->last_ns - a->first_ns;
	out->useful_ns = a->useful;
	out->stall_ns = a->stall;
	out->restore_ns = a->restore;
	out->recompute_ns = a->recompute;
	out->down_ns = a->down;
	out->failures = a->failures;
	out->step = a->max_step;
	out->bucket_ns = SLICE_NS;
	out->interval_steps = a->adv_every;
	out->interval_ns = a->adv_ns;
	out->mtbf_ns = a->adv_mtbf;
	out->cost_ns = a->adv_cost;
	if (!a->slices)
		return 0;
	if (!(out->entries = calloc(SLICES, sizeof(*out->entries))))
		return -ENOMEM;
	/* The slices of the last day, oldest first. */
	uint64_t last = (a->last_ns - a->first_ns) / SLICE_NS;
	uint64_t from = last >= SLICES ? last - SLICES + 1 : 0;
	for (uint64_t k = from; k <= last; k++) {
		const ckptd_goodput_slice *sl = &a->slices[k % SLICES];
		if (sl->start == k * SLICE_NS)
			out->entries[out->count++] = *sl;
	}
	return 0;
}

static void judge_job(ckptd_steps *s, job_steps *j, uint64_t now_ns)
{
	uint64_t window = s->cfg->straggler_window_ms * 1000000ull;
	double fastest = 0, slowest = 0, sum = 0;
	uint32_t live = 0;
	for (uint32_t i = 0; i < j->n; i++) {
		rank_steps *e = &j->r[i];
		if (!e->seen || now_ns - e->at_ns > window)
			continue;
		if (!live || e->ns < fastest)
			fastest = e->ns;
		if (!live || e->ns > slowest)
			slowest = e->ns;
		sum += e->ns;
		live++;
	}
	int any = live >= 2 && slowest * 100 > fastest * s->cfg->straggler_slowest;
	uint32_t flagged = 0;
	char rk[16];
	for (uint32_t i = 0; i < j->n; i++) {
		rank_steps *e = &j->r[i];
		int recent = e->seen && now_ns - e->at_ns <= window;
		int now_flag = any && recent && e->ns * 100 > fastest * s->cfg->straggler_rank;
		snprintf(rk, sizeof(rk), "%u", i);
		if (now_flag && !e->flagged)
			CKPTD_WARN(s->log, e->node[0] ? e->node : NULL, j->job,
			           "straggler: rank %u%s%s takes %.1f ms a step, %.2fx the fastest rank's %.1f ms", i,
			           e->node[0] ? " on " : "", e->node, e->ns / 1e6, e->ns / fastest, fastest / 1e6);
		else if (!now_flag && e->flagged)
			CKPTD_INFO(s->log, e->node[0] ? e->node : NULL, j->job, "rank %u is no longer a straggler", i);
		if (now_flag || e->flagged)
			ckptd_metrics_set(s->mx, CKPTD_M_STRAGGLER_STEP, j->job, rk, now_flag ? e->ns / 1e9 : 0);
		e->slow_runs = now_flag ? e->slow_runs + (e->slow_runs < UINT32_MAX) : 0;
		if (s->slow && (now_flag || e->flagged))
			s->slow(s->slow_arg, j->job, i, e->node, e->slow_runs, (uint64_t)e->ns, (uint64_t)fastest, now_ns);
		e->flagged = (uint8_t)now_flag;
		flagged += (uint32_t)now_flag;
	}
	if (live) {
		ckptd_metrics_set(s->mx, CKPTD_M_STEP_SECONDS, j->job, "fastest", fastest / 1e9);
		ckptd_metrics_set(s->mx, CKPTD_M_STEP_SECONDS, j->job, "mean", sum / live / 1e9);
		ckptd_metrics_set(s->mx, CKPTD_M_STEP_SECONDS, j->job, "slowest", slowest / 1e9);
	}
	ckptd_metrics_set(s->mx, CKPTD_M_STRAGGLERS, j->job, NULL, flagged);
}

/* Young/Daly: the interval that minimises the expected loss for a
 * checkpoint cost C and a mean time between failures M, with Daly's
 * higher-order terms (C < 2M); T = M when checkpoints cost more. */
static double advised_ns(double c, double m)
{
	if (c >= 2 * m)
		return m;
	double x = c / (2 * m);
	return sqrt(2 * c * m) * (1 + sqrt(x) / 3 + x / 9) - c;
}

static void announce(ckptd_steps *s, job_steps *j, uint64_t now_ns)
{
	ckptd_interval_notice n = { .every = j->a.adv_every, .from = j->a.adv_from, .interval_ns = j->a.adv_ns };
	snprintf(n.job, sizeof(n.job), "%s", j->job);
	if (s->announce)
		s->announce(s->announce_arg, &n);
	j->a.adv_sent_ns = now_ns;
}

/* The interval to save at, in the job's steps: from the pace rank's
 * checkpoint cost (its stalls over its saves) and step time, and the MTBF
 * (--mtbf, else observed once 3 restarts were seen, else a day). A new
 * interval starts at a step every rank is still short of, so that all save
 * the same versions; a change under 20% is not worth that. */
static void advise(ckptd_steps *s, job_steps *j, uint64_t now_ns)
{
	acct *a = &j->a;
	/* Two saves at least: the first pays page faults, which is not the cost. */
	if (a->pace >= j->n || a->cost_saves < 2 || !j->r[a->pace].seen)
		return;
	double step = j->r[a->pace].ns, cost = (double)a->cost_stall / (double)a->cost_saves;
	double wall = (double)(a->last_ns - a->first_ns);
	double mtbf = s->cfg->mtbf_ms ? s->cfg->mtbf_ms * 1e6
	            : a->failures >= 3 ? wall / a->failures : (double)DEFAULT_MTBF_NS;
	double t = advised_ns(cost, mtbf);
	uint64_t every = (uint64_t)llround(t / step);
	if (every < 1)
		every = 1;
	uint64_t old = a->adv_every;
	if (old && (every > old ? every - old : old - every) * 5 <= old) {
		if (now_ns - a->adv_sent_ns >= RESEND_NS)
			announce(s, j, now_ns);
		return;
	}
	uint64_t top = 0;
	for (uint32_t i = 0; i < j->n; i++)
		if (j->r[i].seen && j->r[i].step > top)
			top = j->r[i].step;
	uint64_t margin = (uint64_t)(3e9 / step); /* three seconds of steps: a report a second, notices in flight */
	if (margin < 10)
		margin = 10;
	uint64_t from = (top + margin + every - 1) / every * every;
	a->adv_every = every;
	a->adv_from = from;
	a->adv_ns = (uint64_t)t;
	a->adv_mtbf = (uint64_t)mtbf;
	a->adv_cost = (uint64_t)cost;
	CKPTD_INFO(s->log, NULL, j->job,
	           "checkpoint interval advised: every %llu steps (%.1f s) from step %llu; cost %.3f s, MTBF %.0f s%s",
	           (unsigned long long)every, t / 1e9, (unsigned long long)from, cost / 1e9, mtbf / 1e9,
	           s->cfg->mtbf_ms ? " (--mtbf)" : a->failures >= 3 ? " (observed)" : " (default)");
	ckptd_metrics_set(s->mx, CKPTD_M_INTERVAL_SECONDS, j->job, NULL, t / 1e9);
	ckptd_metrics_set(s->mx, CKPTD_M_INTERVAL_STEPS, j->job, NULL, (double)every);
	announce(s, j, now_ns);
}

void ckptd_steps_judge(ckptd_steps *s, uint64_t now_ns)
{
	for (job_steps *j = s->jobs; j; j = j->next) {
		judge_job(s, j, now_ns);
		advise(s, j, now_ns);
	}
}

int ckptd_steps_query(ckptd_steps *s, const char *job, uint64_t start, ckptd_step_stats_reply *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->job, sizeof(out->job), "%s", job);
	job_steps *j = job_find(s, job, 0);
	if (!j)
		return 0;
	if (!(out->entries = calloc(CKPTD_MAX_LIST, sizeof(*out->entries))))
		return -ENOMEM;
	for (uint64_t i = start; i < j->n; i++) {
		rank_steps *e = &j->r[i];
		if (!e->seen)
			continue;
		if (out->count == CKPTD_MAX_LIST) {
			out->more = 1;
			break;
		}
		ckptd_rank_step *o = &out->entries[out->count++];
		o->rank = (uint32_t)i;
		o->step = e->step;
		o->step_ns = (uint64_t)e->ns;
		o->state = e->flagged ? CKPTD_RANK_STRAGGLER : CKPTD_RANK_OK;
		snprintf(o->node, sizeof(o->node), "%s", e->node);
	}
	return 0;
}

/* ---------------------------------------------------------------- pace */

int ckptd_steps_pace(ckptd_steps *s, const char *job, uint64_t now_ns, ckptd_job_pace *out)
{
	job_steps *j = job_find(s, job, 0);
	memset(out, 0, sizeof(*out));
	if (!j)
		return -ENOENT;
	uint64_t window = s->cfg->straggler_window_ms * 1000000ull;
	for (uint32_t i = 0; i < j->n; i++) {
		const rank_steps *e = &j->r[i];
		if (!e->seen || now_ns - e->at_ns > window || e->ns <= 0)
			continue;
		/* Where the rank is now: its last report, plus the steps it made
		 * since at its pace (reports come about once a second). */
		uint64_t est = e->step + (uint64_t)((double)(now_ns - e->at_ns) / e->ns);
		if (!out->ranks || est > out->max_step)
			out->max_step = est;
		if (!out->ranks || est < out->min_step)
			out->min_step = est;
		if (e->ns > out->step_ns)
			out->step_ns = e->ns;
		if (!out->ranks || e->ns < out->fastest_ns)
			out->fastest_ns = e->ns;
		out->ranks++;
	}
	return out->ranks ? 0 : -ENOENT;
}

void ckptd_steps_jobs_on(ckptd_steps *s, const char *node, uint64_t now_ns, void (*fn)(void *arg, const char *job),
                         void *arg)
{
	uint64_t window = s->cfg->straggler_window_ms * 1000000ull;
	for (job_steps *j = s->jobs; j; j = j->next)
		for (uint32_t i = 0; i < j->n; i++) {
			const rank_steps *e = &j->r[i];
			if (e->seen && now_ns - e->at_ns <= window && !strcmp(e->node, node)) {
				fn(arg, j->job);
				break;
			}
		}
}
