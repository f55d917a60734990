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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS (1u << 20) /* a bound on memory per job */
#define SMOOTH 0.3           /* weight of a new report in the smoothed time */

typedef struct rank_steps {
	uint64_t step, at_ns;
	double ns;            /* smoothed step time */
	char node[CKPTD_NAME_MAX + 1];
	uint8_t seen, flagged;
} rank_steps;

typedef struct job_steps {
	struct job_steps *next;
	char job[CKPTD_JOB_MAX + 1];
	rank_steps *r;
	uint32_t n, cap;
} job_steps;

struct ckptd_steps {
	const ckptd_config *cfg;
	const ckptd_log *log;
	ckptd_metrics *mx;
	job_steps *jobs;
	uint32_t njobs;
};

int ckptd_steps_new(const ckptd_config *cfg, const ckptd_log *log, ckptd_metrics *mx, ckptd_steps **out)
{
	ckptd_steps *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = cfg;
	s->log = log;
	s->mx = mx;
	*out = s;
	return 0;
}

void ckptd_steps_free(ckptd_steps *s)
{
	if (!s)
		return;
	for (job_steps *j = s->jobs, *n; j; j = n) {
		n = j->next;
		free(j->r);
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
	j->next = s->jobs;
	s->jobs = j;
	s->njobs++;
	return j;
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

void ckptd_steps_judge(ckptd_steps *s, uint64_t now_ns)
{
	for (job_steps *j = s->jobs; j; j = j->next)
		judge_job(s, j, now_ns);
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
