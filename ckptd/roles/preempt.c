/* Emergency checkpoints, on the coordinator (roles_int.h).
 *
 * A PREEMPT notice names a node about to go (a cloud's notice, a signal to
 * one rank, `ckpt preempt`) and a deadline. For each job with ranks on that
 * node:
 *   - the step: where the furthest rank is now (its last report plus the
 *     steps since at its pace), plus 3 s of steps at the fastest rank's pace
 *     for the reports' age and the notice's way to the ranks, so that no
 *     rank has passed it when it hears; every rank saves there;
 *   - the tier: the noticed node's DRAM and disk go with it, so the version
 *     must land elsewhere: partner DRAM (placement leaves noticed nodes out
 *     from now on), else shared storage. A tier is chosen when the time to
 *     reach the step plus the version's bytes over the bandwidth the tier's
 *     last commit showed (1.5 times, plus a second) fits before the deadline; none:
 *     tier 0, and the ranks leave at the deadline, the previous version
 *     untouched;
 *   - EMERGENCY to every agent, which passes it to the job's ranks.
 * A second notice for a job in an emergency keeps its step (the ranks may be
 * saving it already), takes the earlier deadline and chooses the tier again.
 * The emergency ends when the version is safe: every rank's shard has a live
 * copy on a node that was not noticed (partner copies of the noticed nodes'
 * ranks, and the other ranks' own copies); EMERGENCY with FINAL then tells
 * the ranks to leave. Checked at each commit and once a second; given up a
 * few seconds after the deadline.
 * A noticed node stays out of placement until its agent says hello again
 * (it came back) or a few seconds after the latest deadline a notice gave
 * it (the node was not taken after all, or it is gone and its agent down,
 * which placement skips anyway); a persistent straggler's node (the
 * coordinator's own notice, --replace-stragglers) only the former. */
#include "roles_int.h"

#include "base/common.h" /* ckpt__wall_ns */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXCLUDED 1024
#define LAG_NS 3000000000ull       /* reports' age + the notice's way to the ranks */
#define SLACK_NS 1000000000ull     /* added to every estimate */
#define GRACE_NS 5000000000ull     /* an emergency is forgotten this long after its deadline */
#define PEER_GUESS_NS 5000000000ull   /* a commit at PEER_MEM before any was measured */
#define SHARED_GUESS_NS 10000000000ull /* ... at SHARED: one version's files, unthrottled (see tier_cost) */

typedef struct emjob {
	struct emjob *next;
	char job[CKPTD_JOB_MAX + 1];
	uint64_t lat_ns[4];      /* the last commit latency per tier (index: tier bit) */
	double bw[4];            /* bytes per second that commit moved (its version's bytes / latency) */
	uint64_t bytes;          /* the last committed version's bytes (all ranks) */
	int active;
	uint64_t step, deadline_ns, noticed_ns;
	uint32_t tier;
	char node[CKPTD_NAME_MAX + 1];
} emjob;

typedef struct excl {
	char node[CKPTD_NAME_MAX + 1];
	uint64_t until_ns; /* the latest deadline of the notices naming it */
} excl;

struct ckptd_emerg {
	const ckptd_config *cfg;
	const ckptd_log *log;
	ckptd_metrics *mx;
	ckptd_steps *steps;
	ckptd_emerg_ops ops;
	void *arg;
	emjob *jobs;
	excl *excluded;
	size_t nexcluded;
};

static int tier_index(uint32_t tier)
{
	return tier == CKPT_TIER_LOCAL_MEM ? 0 : tier == CKPT_TIER_PEER_MEM ? 1 : tier == CKPT_TIER_LOCAL_DISK ? 2 : 3;
}

static const char *tier_name(uint32_t tier)
{
	return tier == CKPT_TIER_PEER_MEM ? "peer_mem" : tier == CKPT_TIER_SHARED ? "shared"
	     : tier == CKPT_TIER_LOCAL_MEM ? "local_mem" : tier == CKPT_TIER_LOCAL_DISK ? "local_disk" : "none";
}

static const char *source_name(uint32_t s)
{
	static const char *const n[] = { "?", "aws", "gcp", "azure", "file", "signal", "cli", "straggler" };
	return s < sizeof(n) / sizeof(n[0]) ? n[s] : "?";
}

static emjob *job_get(ckptd_emerg *e, const char *job)
{
	for (emjob *j = e->jobs; j; j = j->next)
		if (!strcmp(j->job, job))
			return j;
	emjob *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	snprintf(j->job, sizeof(j->job), "%s", job);
	j->next = e->jobs;
	e->jobs = j;
	return j;
}

int ckptd_emerg_new(const ckptd_config *cfg, const ckptd_log *log, ckptd_metrics *mx, ckptd_steps *steps,
                    const ckptd_emerg_ops *ops, void *arg, ckptd_emerg **out)
{
	ckptd_emerg *e = calloc(1, sizeof(*e));
	if (!e || !(e->excluded = calloc(MAX_EXCLUDED, sizeof(*e->excluded)))) {
		free(e);
		return -ENOMEM;
	}
	e->cfg = cfg;
	e->log = log;
	e->mx = mx;
	e->steps = steps;
	e->ops = *ops;
	e->arg = arg;
	*out = e;
	return 0;
}

void ckptd_emerg_free(ckptd_emerg *e)
{
	if (!e)
		return;
	for (emjob *j = e->jobs, *n; j; j = n) {
		n = j->next;
		free(j);
	}
	free(e->excluded);
	free(e);
}

int ckptd_emerg_excluded(const ckptd_emerg *e, const char *node)
{
	for (size_t i = 0; i < e->nexcluded; i++)
		if (!strcmp(e->excluded[i].node, node))
			return 1;
	return 0;
}

static void readmit(ckptd_emerg *e, size_t i, const char *why)
{
	char node[CKPTD_NAME_MAX + 1];
	snprintf(node, sizeof(node), "%s", e->excluded[i].node);
	memmove(&e->excluded[i], &e->excluded[i + 1], (e->nexcluded - i - 1) * sizeof(e->excluded[0]));
	e->nexcluded--;
	CKPTD_INFO(e->log, node, NULL, "node %s %s: partner copies may go there again", node, why);
	e->ops.readmit(e->arg, node);
}

void ckptd_emerg_node_back(ckptd_emerg *e, const char *node)
{
	for (size_t i = 0; i < e->nexcluded; i++)
		if (!strcmp(e->excluded[i].node, node)) {
			readmit(e, i, "is back");
			return;
		}
}

/* The time a commit at tier is expected to take for the job: its bytes
 * over the bandwidth the tier's last commit measured, with half again as
 * margin (the latency itself when the bytes are unknown). A SHARED commit
 * measured in the background waited for the flush's backlog and throttle
 * (--shared-rate), which an emergency's files skip: no more than the guess
 * is counted for it. */
static uint64_t tier_cost(const emjob *j, uint32_t tier)
{
	int k = tier_index(tier);
	uint64_t lat = j->lat_ns[k];
	if (!lat)
		return tier == CKPT_TIER_PEER_MEM ? PEER_GUESS_NS : SHARED_GUESS_NS;
	if (j->bw[k] > 0 && j->bytes)
		lat = (uint64_t)((double)j->bytes / j->bw[k] * 1e9);
	lat += lat / 2;
	return tier == CKPT_TIER_SHARED && lat > SHARED_GUESS_NS ? SHARED_GUESS_NS : lat;
}

/* Chooses the step and the tier for j against its deadline, and tells the
 * ranks. keep_step: a later notice, the ranks heard the step already.
 * Returns 1 when the ranks were told, 0 when no step could be chosen. */
static int decide(ckptd_emerg *e, emjob *j, int keep_step, uint64_t now_ns)
{
	ckptd_job_pace pace;
	if (ckptd_steps_pace(e->steps, j->job, now_ns, &pace) < 0) {
		CKPTD_WARN(e->log, j->node[0] ? j->node : NULL, j->job,
		           "preemption notice: no rank of the job reports its steps (ckpt_step), so no common step "
		           "can be chosen; its ranks are not told");
		j->active = 0;
		return 0;
	}
	/* At the fastest rank's pace (a step time smoothed over saves reads
	 * slow): the margin in steps is then never too small. */
	uint64_t margin = (uint64_t)ceil((double)LAG_NS / pace.fastest_ns) + 2;
	if (!keep_step)
		j->step = pace.max_step + margin;
	uint64_t wall = ckpt__wall_ns();
	uint64_t left = j->deadline_ns > wall ? j->deadline_ns - wall : 0;
	uint64_t reach = j->step > pace.min_step ? (uint64_t)((double)(j->step - pace.min_step) * pace.step_ns) : 0;
	uint32_t cands[2], nc = 0;
	if (e->ops.peer_room(e->arg))
		cands[nc++] = CKPT_TIER_PEER_MEM;
	cands[nc++] = CKPT_TIER_SHARED;
	j->tier = 0;
	for (uint32_t i = 0; i < nc && !j->tier; i++)
		if (reach + tier_cost(j, cands[i]) + SLACK_NS <= left)
			j->tier = cands[i];
	if (j->tier)
		CKPTD_WARN(e->log, j->node[0] ? j->node : NULL, j->job,
		           "emergency checkpoint at step %llu (ranks at %llu..%llu, %.0f ms a step): %s, expected within "
		           "%.1f s of %.1f s left", (unsigned long long)j->step, (unsigned long long)pace.min_step,
		           (unsigned long long)pace.max_step, pace.step_ns / 1e6, tier_name(j->tier),
		           (reach + tier_cost(j, j->tier)) / 1e9, left / 1e9);
	else
		CKPTD_WARN(e->log, j->node[0] ? j->node : NULL, j->job,
		           "emergency: no tier off the noticed nodes can hold step %llu within %.1f s (reaching it: %.1f "
		           "s); the ranks leave at the deadline and the last committed version stays the restore point",
		           (unsigned long long)j->step, left / 1e9, reach / 1e9);
	ckptd_msg m = { .type = CKPTD_MSG_EMERGENCY };
	snprintf(m.u.emergency.job, sizeof(m.u.emergency.job), "%s", j->job);
	m.u.emergency.step = j->step;
	m.u.emergency.deadline_ns = j->deadline_ns;
	m.u.emergency.tier = j->tier;
	snprintf(m.u.emergency.node, sizeof(m.u.emergency.node), "%s", j->node);
	e->ops.broadcast(e->arg, &m);
	return 1;
}

static void exclude(ckptd_emerg *e, const char *node, uint64_t until_ns)
{
	if (!node[0])
		return;
	for (size_t i = 0; i < e->nexcluded; i++)
		if (!strcmp(e->excluded[i].node, node)) {
			if (until_ns > e->excluded[i].until_ns)
				e->excluded[i].until_ns = until_ns;
			return;
		}
	if (e->nexcluded == MAX_EXCLUDED)
		return;
	excl *x = &e->excluded[e->nexcluded++];
	snprintf(x->node, sizeof(x->node), "%s", node);
	x->until_ns = until_ns;
	e->ops.exclude(e->arg, node);
}

typedef struct notice_ctx {
	ckptd_emerg *e;
	const ckptd_preempt *p;
	uint64_t deadline, now;
	int jobs;
} notice_ctx;

static void for_job(void *arg, const char *job)
{
	notice_ctx *n = arg;
	ckptd_emerg *e = n->e;
	emjob *j = job_get(e, job);
	if (!j)
		return;
	int again = j->active;
	if (!again || n->deadline < j->deadline_ns)
		j->deadline_ns = n->deadline;
	if (!again) {
		j->noticed_ns = n->now;
		snprintf(j->node, sizeof(j->node), "%s", n->p->node);
	} else {
		CKPTD_WARN(e->log, n->p->node[0] ? n->p->node : NULL, job,
		           "another preemption notice during the emergency: step %llu stays, deadline the earlier",
		           (unsigned long long)j->step);
	}
	j->active = 1;
	n->jobs += decide(e, j, again, n->now);
}

int ckptd_emerg_notice(ckptd_emerg *e, const ckptd_preempt *p, uint64_t now_ns)
{
	uint64_t wall = ckpt__wall_ns();
	notice_ctx n = { e, p, p->deadline_ns ? p->deadline_ns : wall + e->cfg->preempt_deadline_ms * 1000000ull,
	                 now_ns, 0 };
	ckptd_metrics_add(e->mx, CKPTD_M_PREEMPT_NOTICES, source_name(p->source), NULL, 1);
	CKPTD_WARN(e->log, p->node[0] ? p->node : NULL, p->job[0] ? p->job : NULL,
	           "preemption notice (%s) for %s%s%s, deadline in %.1f s%s%s", source_name(p->source),
	           p->node[0] ? "node " : "", p->node[0] ? p->node : "", p->job[0] ? " (its job)" : "",
	           n.deadline > wall ? (n.deadline - wall) / 1e9 : 0.0, p->text[0] ? ": " : "", p->text);
	/* Before the ranks hear: their partners must be off the noticed node.
	 * A straggler's node is not going away by itself: it stays out until
	 * its agent says hello again (restarted, repaired). */
	exclude(e, p->node, p->source == CKPTD_NOTICE_SRC_STRAGGLER ? UINT64_MAX - GRACE_NS : n.deadline);
	if (p->job[0])
		for_job(&n, p->job);
	else if (p->node[0])
		ckptd_steps_jobs_on(e->steps, p->node, now_ns, for_job, &n);
	if (!n.jobs)
		CKPTD_WARN(e->log, p->node[0] ? p->node : NULL, p->job[0] ? p->job : NULL,
		           "preemption notice: no rank was told (%s)%s", p->job[0] ? "no rank of the job reports its steps"
		           : "no job reporting steps has ranks there", p->node[0] ? "; the node stays out of partner "
		           "placement until the deadline" : "");
	return n.jobs;
}

/* Ends j's emergency once its version is safe off the noticed nodes. */
static void check_safe(ckptd_emerg *e, emjob *j)
{
	if (!j->tier || !e->ops.safe(e->arg, j->job, j->step))
		return;
	uint64_t wall = ckpt__wall_ns();
	CKPTD_WARN(e->log, NULL, j->job, "emergency version %llu is safe off the noticed nodes, %.1f s before the "
	           "deadline: the ranks may leave", (unsigned long long)j->step,
	           j->deadline_ns > wall ? (j->deadline_ns - wall) / 1e9 : -((wall - j->deadline_ns) / 1e9));
	ckptd_metrics_add(e->mx, CKPTD_M_EMERGENCIES, j->job, "committed", 1);
	j->active = 0;
	ckptd_msg m = { .type = CKPTD_MSG_EMERGENCY };
	snprintf(m.u.emergency.job, sizeof(m.u.emergency.job), "%s", j->job);
	m.u.emergency.step = j->step;
	m.u.emergency.deadline_ns = j->deadline_ns;
	m.u.emergency.tier = j->tier;
	m.u.emergency.final = 1;
	e->ops.broadcast(e->arg, &m);
	if (e->ops.ended)
		e->ops.ended(e->arg, j->job, j->node, j->step, 1);
}

void ckptd_emerg_commit(ckptd_emerg *e, const char *job, uint64_t version, uint32_t tier, uint64_t latency_ns,
                        uint64_t bytes)
{
	emjob *j = job_get(e, job);
	if (!j)
		return;
	if (latency_ns) {
		j->lat_ns[tier_index(tier)] = latency_ns;
		if (bytes) {
			j->bw[tier_index(tier)] = (double)bytes / ((double)latency_ns / 1e9);
			j->bytes = bytes;
		}
	}
	if (j->active && version == j->step)
		check_safe(e, j);
}

void ckptd_emerg_tick(ckptd_emerg *e, uint64_t now_ns)
{
	(void)now_ns;
	uint64_t wall = ckpt__wall_ns();
	for (size_t i = e->nexcluded; i-- > 0;)
		if (wall > e->excluded[i].until_ns + GRACE_NS)
			readmit(e, i, "outlived its notice's deadline");
	for (emjob *j = e->jobs; j; j = j->next) {
		if (j->active)
			check_safe(e, j);
		if (j->active && wall > j->deadline_ns + GRACE_NS) {
			CKPTD_WARN(e->log, NULL, j->job, "emergency at step %llu: not committed at %s by the deadline",
			           (unsigned long long)j->step, tier_name(j->tier));
			ckptd_metrics_add(e->mx, CKPTD_M_EMERGENCIES, j->job, "missed", 1);
			j->active = 0;
			if (e->ops.ended)
				e->ops.ended(e->arg, j->job, j->node, j->step, 0);
		}
	}
}
