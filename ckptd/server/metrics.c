/* The metrics registry and its HTTP endpoint (metrics.h). */
#include "metrics.h"
#include "wire/addr.h"
#include "base/common.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { M_COUNTER = 1, M_GAUGE, M_HISTOGRAM };

typedef struct family {
	const char *name;
	int type;
	const char *labels[2]; /* NULL: fewer labels */
	const char *help;
} family;

static const family families[CKPTD_M__COUNT] = {
	[CKPTD_M_BUILD_INFO] = { "ckpt_build_info", M_GAUGE, { "version", "node" }, "ckptd build and node; always 1" },
	[CKPTD_M_UPTIME] = { "ckpt_uptime_seconds", M_GAUGE, { 0 }, "seconds since ckptd started" },
	[CKPTD_M_DROPPED] = { "ckpt_metrics_dropped_total", M_COUNTER, { 0 },
	                      "samples dropped because the registry reached its bound on jobs or series" },
	[CKPTD_M_VERSIONS_COMMITTED] = { "ckpt_versions_committed_total", M_COUNTER, { "ckpt_job", "tier" },
	                                 "coordinator: versions that became committed at a tier (every rank durable there)" },
	[CKPTD_M_COMMIT_LATENCY] = { "ckpt_commit_latency_seconds", M_HISTOGRAM, { "ckpt_job", "tier" },
	                             "coordinator: from a version's first shard report to its commit at the tier" },
	[CKPTD_M_COORD_REPORTS] = { "ckpt_coordinator_shard_reports_total", M_COUNTER, { "ckpt_job", "tier" },
	                            "coordinator: SHARD_DONE reports received" },
	[CKPTD_M_COORD_REFUSED] = { "ckpt_coordinator_shard_reports_refused_total", M_COUNTER, { "ckpt_job", "tier" },
	                            "coordinator: SHARD_DONE reports refused (state, lineage or identity conflicts, index errors)" },
	[CKPTD_M_COPIES_DELETING] = { "ckpt_copies_deleting_total", M_COUNTER, { "ckpt_job" },
	                              "coordinator: copies marked for deletion by retention" },
	[CKPTD_M_COPIES_GONE] = { "ckpt_copies_gone_total", M_COUNTER, { "ckpt_job" },
	                          "coordinator: deletions an agent reported done (one per version and node)" },
	[CKPTD_M_AGENTS] = { "ckpt_agents", M_GAUGE, { "state" }, "coordinator: agents known, by state (up, degraded: connected but silent past --heartbeat-timeout, down)" },
	[CKPTD_M_RETENTION_RUNS] = { "ckpt_retention_runs_total", M_COUNTER, { 0 }, "coordinator: retention passes run" },
	[CKPTD_M_POOL_BYTES] = { "ckpt_pool_bytes", M_GAUGE, { 0 }, "agent: node DRAM budget for every job's pool (--pool-size)" },
	[CKPTD_M_POOL_USED] = { "ckpt_pool_used_bytes", M_GAUGE, { 0 }, "agent: bytes held in segments across every pool" },
	[CKPTD_M_JOB_POOL_BYTES] = { "ckpt_job_pool_bytes", M_GAUGE, { "ckpt_job" }, "agent: size of the job's DRAM pool (0: none now)" },
	[CKPTD_M_JOB_POOL_USED] = { "ckpt_job_pool_used_bytes", M_GAUGE, { "ckpt_job" }, "agent: bytes held in the job's pool" },
	[CKPTD_M_EVICTED] = { "ckpt_segments_evicted_total", M_COUNTER, { "ckpt_job" },
	                      "agent: DRAM segments evicted to make room" },
	[CKPTD_M_GRANTS_REFUSED] = { "ckpt_segment_grants_refused_total", M_COUNTER, { "ckpt_job", "reason" },
	                             "agent: DRAM segment requests answered with an error (no_space, busy); those shards go to disk only" },
	[CKPTD_M_AGENT_REPORTS] = { "ckpt_agent_shard_reports_total", M_COUNTER, { "ckpt_job", "tier" },
	                            "agent: shards its ranks reported durable" },
	[CKPTD_M_SHARD_BYTES] = { "ckpt_shard_bytes_total", M_COUNTER, { "ckpt_job", "tier" },
	                          "agent: bytes of the shards its ranks reported durable (rate() gives throughput)" },
	[CKPTD_M_SAVE_STALL] = { "ckpt_save_stall_seconds", M_HISTOGRAM, { "ckpt_job", "tier" },
	                         "agent: how long ckpt_save blocked the trainer, from the ranks' reports at each tier" },
	[CKPTD_M_TIME_TO_DURABLE] = { "ckpt_time_to_durable_seconds", M_HISTOGRAM, { "ckpt_job", "tier" },
	                              "agent: from ckpt_save's call to the shard being durable at the tier" },
	[CKPTD_M_VERIFICATIONS] = { "ckpt_verifications_total", M_COUNTER, { "ckpt_job" }, "agent: verifications run" },
	[CKPTD_M_NOT_INTACT] = { "ckpt_verify_not_intact_total", M_COUNTER, { "ckpt_job" },
	                         "agent: copies a verification found missing or not intact" },
	[CKPTD_M_AGENT_DELETIONS] = { "ckpt_agent_deletions_total", M_COUNTER, { "ckpt_job" },
	                              "agent: deletions of a version's copies done on this node" },
	[CKPTD_M_STEP_REPORTS] = { "ckpt_step_reports_total", M_COUNTER, { "ckpt_job" },
	                           "coordinator: step-time reports received from ranks (about one a second each)" },
	[CKPTD_M_STEP_SECONDS] = { "ckpt_step_seconds", M_GAUGE, { "ckpt_job", "stat" },
	                           "coordinator: smoothed training step time over the job's ranks (fastest, mean, slowest)" },
	[CKPTD_M_STRAGGLERS] = { "ckpt_stragglers", M_GAUGE, { "ckpt_job" }, "coordinator: ranks named stragglers now" },
	[CKPTD_M_STRAGGLER_STEP] = { "ckpt_straggler_step_seconds", M_GAUGE, { "ckpt_job", "rank" },
	                             "coordinator: a straggler's smoothed step time (0 once it is no longer one)" },
	[CKPTD_M_GOODPUT] = { "ckpt_goodput_ratio", M_GAUGE, { "ckpt_job" },
	                      "coordinator: the job's useful training time over its wall time (from its step reports)" },
	[CKPTD_M_TIME_SECONDS] = { "ckpt_time_seconds_total", M_COUNTER, { "ckpt_job", "kind" },
	                           "coordinator: the job's wall time by kind: useful, stall, restore, recompute, down" },
	[CKPTD_M_INTERVAL_SECONDS] = { "ckpt_interval_advice_seconds", M_GAUGE, { "ckpt_job" },
	                               "coordinator: the checkpoint interval it advises the job (Young/Daly)" },
	[CKPTD_M_INTERVAL_STEPS] = { "ckpt_interval_advice_steps", M_GAUGE, { "ckpt_job" },
	                             "coordinator: the same, in the job's steps" },
	[CKPTD_M_RESTORE_SECONDS] = { "ckpt_restore_seconds", M_HISTOGRAM, { "ckpt_job", "tier" },
	                              "coordinator: ranks' ckpt_restore time, by the tier the data came from" },
	[CKPTD_M_SAVE_ERRORS] = { "ckpt_save_errors_total", M_COUNTER, { "ckpt_job" },
	                          "coordinator: saves that failed in the ranks (disk or pipeline errors; the ranks' logs say which)" },
	[CKPTD_M_PEER_POOL_BYTES] = { "ckpt_peer_pool_bytes", M_GAUGE, { 0 }, "agent: DRAM for partners' copies (--peer-pool-size)" },
	[CKPTD_M_PEER_POOL_USED] = { "ckpt_peer_pool_used_bytes", M_GAUGE, { 0 }, "agent: bytes of the peer pool leased or holding copies" },
	[CKPTD_M_PEER_STORED] = { "ckpt_peer_copies_stored_total", M_COUNTER, { "ckpt_job" },
	                          "agent: partners' shard images checked and stored in the peer pool" },
	[CKPTD_M_PEER_EVICTED] = { "ckpt_peer_copies_evicted_total", M_COUNTER, { "ckpt_job" },
	                           "agent: partner copies evicted to make room" },
	[CKPTD_M_PEER_REFUSED] = { "ckpt_peer_refused_total", M_COUNTER, { "ckpt_job", "reason" },
	                           "agent: partner leases refused (no_space; restore_points: only restore points were left to evict; share: the other jobs' copies are within their shares of the pool) and images that failed their check (bad_image)" },
	[CKPTD_M_PREEMPT_NOTICES] = { "ckpt_preempt_notices_total", M_COUNTER, { "source" },
	                              "coordinator: preemption notices received (aws, gcp, azure, file, signal, cli)" },
	[CKPTD_M_EMERGENCIES] = { "ckpt_emergency_checkpoints_total", M_COUNTER, { "ckpt_job", "result" },
	                          "coordinator: emergency checkpoints committed off the noticed nodes before the deadline, or missed" },
	[CKPTD_M_AGENT_NOTICES] = { "ckpt_agent_preempt_notices_total", M_COUNTER, { "source" },
	                            "agent: preemption notices its pollers (cloud metadata, trigger file) raised" },
	[CKPTD_M_FABRIC_ERRORS] = { "ckpt_fabric_errors_total", M_COUNTER, { "ckpt_job" },
	                            "coordinator: libfabric transfers that failed in the ranks (fi_strerror's text is in their logs)" },
	[CKPTD_M_PEER_SKIPS] = { "ckpt_peer_skips_total", M_COUNTER, { "ckpt_job" },
	                         "coordinator: PEER_MEM copies the ranks skipped: partner slow or gone, or a fabric error (the ranks' logs give fi_strerror's text)" },
	[CKPTD_M_SHARED_BYTES] = { "ckpt_shared_flush_bytes_total", M_COUNTER, { "ckpt_job" },
	                           "agent: bytes of shard files copied to --shared-dir (the SHARED tier)" },
	[CKPTD_M_SHARED_SECONDS] = { "ckpt_shared_flush_seconds", M_HISTOGRAM, { "ckpt_job" },
	                             "agent: time to flush one shard to --shared-dir: copy, verify, rename, throttle waits included" },
	[CKPTD_M_SHARED_BACKLOG] = { "ckpt_shared_backlog_versions", M_GAUGE, { "ckpt_job" },
	                             "agent: committed versions waiting for (or in) their flush to --shared-dir" },
	[CKPTD_M_TIER_DEGRADED] = { "ckpt_tier_degraded_nodes", M_GAUGE, { "tier" },
	                            "coordinator: nodes serving a tier that are down or silent (local_mem, local_disk: any agent; peer_mem: agents with a peer pool)" },
	[CKPTD_M_COORD_LINK] = { "ckpt_coordinator_link_up", M_GAUGE, { 0 },
	                         "agent: 1 while its coordinator answers within --heartbeat-timeout, else 0" },
	[CKPTD_M_PEER_JOB_USED] = { "ckpt_peer_job_used_bytes", M_GAUGE, { "ckpt_job" },
	                            "agent: bytes of the peer pool a job's partner copies and leases hold" },
	[CKPTD_M_PEER_PROTECTED] = { "ckpt_peer_protected_bytes", M_GAUGE, { "ckpt_job" },
	                             "agent: of those, the copies of the job's newest committed versions (its restore point), which are never evicted" },
	[CKPTD_M_STRAGGLER_PERSIST] = { "ckpt_straggler_persistent_total", M_COUNTER, { "ckpt_job" },
	                                "coordinator: ranks that stayed stragglers for --straggler-persist judgements (their node's evidence was gathered)" },
	[CKPTD_M_STRAGGLER_CAUSES] = { "ckpt_straggler_causes_total", M_COUNTER, { "ckpt_job", "cause" },
	                               "coordinator: persistent stragglers by what their node's evidence named (cpu_steal, cpu_throttling, cpu_contention, memory_pressure, io_pressure, slow_disk, oom_kill, hardware_errors; none_found; no_evidence)" },
	[CKPTD_M_RS_PROTECTED] = { "ckpt_rs_versions_protected_total", M_COUNTER, { "ckpt_job" },
	                           "coordinator: versions whose group's parity was completed by every member (their ranks protected at PEER_MEM)" },
	[CKPTD_M_RS_FAILED] = { "ckpt_rs_encode_failures_total", M_COUNTER, { "ckpt_job" },
	                        "coordinator: group encodes that did not complete (a member down at the commit, or one that failed; the log names it)" },
	[CKPTD_M_RS_UNPROTECTED] = { "ckpt_rs_unprotected_total", M_COUNTER, { "ckpt_job" },
	                             "coordinator: versions whose group lost more than M members after their encode (their PEER_MEM protection dropped)" },
	[CKPTD_M_RS_PARITY_BYTES] = { "ckpt_rs_parity_bytes", M_GAUGE, { 0 },
	                              "agent: rs parity this node holds for its groups, in its peer pool" },
	[CKPTD_M_RS_REBUILDS] = { "ckpt_rs_rebuilds_total", M_COUNTER, { "ckpt_job", "result" },
	                          "agent: shards rebuilt from their rs group's survivors into this node's DRAM (result ok, failed)" },
	[CKPTD_M_PEER_GROUPS] = { "ckpt_peer_groups", M_GAUGE, { 0 },
	                          "coordinator: Reed-Solomon groups of the peer tier (--peer-scheme rs:K+M)" },
	[CKPTD_M_PEER_UNGROUPED] = { "ckpt_peer_ungrouped_nodes", M_GAUGE, { 0 },
	                             "coordinator: eligible nodes in no rs group (too few nodes or failure domains left); they keep partner copies" },
	[CKPTD_M_PEER_GROUP_LOST] = { "ckpt_peer_group_lost_members", M_GAUGE, { "group" },
	                              "coordinator: members of an rs group that are down or silent" },
	[CKPTD_M_PEER_GROUP_LEFT] = { "ckpt_peer_group_losses_left", M_GAUGE, { "group" },
	                              "coordinator: more member losses an rs group can take (M minus those lost)" },
	[CKPTD_M_EPOCH] = { "ckpt_membership_epoch", M_GAUGE, { "ckpt_job" },
	                    "coordinator: the job's membership epoch, one more at each failure decision (ckpt_job=\"\": nodes that served no job)" },
	[CKPTD_M_FAILURES] = { "ckpt_failures_total", M_COUNTER, { "ckpt_job", "kind" },
	                       "coordinator: failure decisions by kind (rank-died, node-lost, rank-hung)" },
	[CKPTD_M_DETECT] = { "ckpt_failure_detection_seconds", M_HISTOGRAM, { "kind" },
	                     "coordinator: from the failed part's last sign of life (a frame, a heartbeat) to the decision" },
	[CKPTD_M_SPARES] = { "ckpt_spares_free", M_GAUGE, { 0 },
	                     "coordinator: agents started --spare that are up and have taken no lost node yet" },
	[CKPTD_M_SPARE_DECISIONS] = { "ckpt_spare_decisions_total", M_COUNTER, { "ckpt_job", "result" },
	                              "coordinator: spares for lost nodes: chosen, ready (the ranks' state in its DRAM), failed (its pull failed or it was lost during it), none (no spare free)" },
	[CKPTD_M_STRAGGLER_REPLACEMENTS] = { "ckpt_straggler_replacements_total", M_COUNTER, { "ckpt_job", "result" },
	                                     "coordinator: --replace-stragglers: a persistent straggler's node taken out (started: its emergency checkpoint begun; replaced: the version safe off it, the decision made and a spare asked; missed: the emergency not safe by its deadline; failed: no emergency could start)" },
	[CKPTD_M_SPARE_PULL] = { "ckpt_spare_pull_seconds", M_HISTOGRAM, { "ckpt_job" },
	                         "coordinator: from a spare chosen to the lost node's state in its DRAM (its SPARE_DONE)" },
	[CKPTD_M_RECOVERY_PHASE] = { "ckpt_recovery_phase_seconds", M_HISTOGRAM, { "phase" },
	                             "coordinator: each phase of a recovery (detect, spare, pull, register, restore, first_step) and the whole (total: failure to first step); ckpt recoveries shows them" },
};

/* Seconds: a fast DRAM snapshot to a slow shared-storage flush. */
static const double buckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
	                              2.5, 5, 10, 30, 60, 120, 300, 600 };
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))
#define LABEL_MAX 64
#define CKPTD__STR2(x) #x
#define CKPTD__STR(x) CKPTD__STR2(x)

typedef struct series {
	uint16_t fam;
	char l[2][LABEL_MAX + 1];
	double value;             /* counter, gauge; histogram: the sum */
	uint64_t count;           /* histogram */
	uint64_t *bucket;         /* histogram: NBUCKETS counts, not cumulative */
} series;

struct ckptd_metrics {
	pthread_mutex_t mu;
	const ckptd_log *log;
	series *s;
	size_t n, cap;
	char (*jobs)[LABEL_MAX + 1];
	size_t njobs;
	int warned;
	uint64_t dropped;
	uint64_t started_ns;     /* CLOCK_MONOTONIC */
	struct MHD_Daemon *httpd;
};

const char *ckptd_metrics_tier(uint32_t tier)
{
	switch (tier) {
	case 1: return "local_mem";
	case 2: return "peer_mem";
	case 4: return "local_disk";
	case 8: return "shared";
	default: return "unknown";
	}
}

int ckptd_metrics_new(const ckptd_log *log, const char *node, const char *version, ckptd_metrics **out)
{
	ckptd_metrics *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->jobs = calloc(CKPTD_METRICS_MAX_JOBS, sizeof(*m->jobs));
	if (!m->jobs) {
		free(m);
		return -ENOMEM;
	}
	pthread_mutex_init(&m->mu, NULL);
	m->log = log;
	m->started_ns = ckpt__now_ns();
	*out = m;
	ckptd_metrics_set(m, CKPTD_M_BUILD_INFO, version, node, 1);
	return 0;
}

void ckptd_metrics_free(ckptd_metrics *m)
{
	if (!m)
		return;
	if (m->httpd)
		MHD_stop_daemon(m->httpd);
	for (size_t i = 0; i < m->n; i++)
		free(m->s[i].bucket);
	free(m->s);
	free(m->jobs);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static void drop_locked(ckptd_metrics *m, const char *why, const char *what)
{
	m->dropped++;
	if (m->warned)
		return;
	m->warned = 1;
	CKPTD_WARN(m->log, NULL, NULL, "metrics: %s (%s); further samples like it are dropped and counted in ckpt_metrics_dropped_total",
	           why, what ? what : "");
}

/* Admits a job label value: within the bound, or already known. */
static int job_ok_locked(ckptd_metrics *m, const char *job)
{
	for (size_t i = 0; i < m->njobs; i++)
		if (!strcmp(m->jobs[i], job))
			return 1;
	if (m->njobs == CKPTD_METRICS_MAX_JOBS) {
		drop_locked(m, "more than " CKPTD__STR(CKPTD_METRICS_MAX_JOBS) " jobs", job);
		return 0;
	}
	snprintf(m->jobs[m->njobs++], LABEL_MAX + 1, "%s", job);
	return 1;
}

static series *get_locked(ckptd_metrics *m, enum ckptd_metric id, const char *l1, const char *l2)
{
	const family *f = &families[id];
	const char *lv[2] = { f->labels[0] ? (l1 ? l1 : "") : "", f->labels[1] ? (l2 ? l2 : "") : "" };
	for (size_t i = 0; i < m->n; i++) {
		series *s = &m->s[i];
		if (s->fam == id && !strcmp(s->l[0], lv[0]) && !strcmp(s->l[1], lv[1]))
			return s;
	}
	for (int k = 0; k < 2; k++)
		if (f->labels[k] && !strcmp(f->labels[k], "ckpt_job") && !job_ok_locked(m, lv[k]))
			return NULL;
	if (m->n == CKPTD_METRICS_MAX_SERIES) {
		drop_locked(m, "more than " CKPTD__STR(CKPTD_METRICS_MAX_SERIES) " series", f->name);
		return NULL;
	}
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 64;
		series *p = realloc(m->s, nc * sizeof(*p));
		if (!p)
			return NULL;
		m->s = p;
		m->cap = nc;
	}
	series *s = &m->s[m->n];
	memset(s, 0, sizeof(*s));
	if (f->type == M_HISTOGRAM && !(s->bucket = calloc(NBUCKETS, sizeof(*s->bucket))))
		return NULL;
	s->fam = (uint16_t)id;
	for (int k = 0; k < 2; k++)
		snprintf(s->l[k], sizeof(s->l[k]), "%s", lv[k]);
	m->n++;
	return s;
}

void ckptd_metrics_add(ckptd_metrics *m, enum ckptd_metric id, const char *l1, const char *l2, double v)
{
	if (!m || id >= CKPTD_M__COUNT || v < 0)
		return;
	pthread_mutex_lock(&m->mu);
	series *s = get_locked(m, id, l1, l2);
	if (s)
		s->value += v;
	pthread_mutex_unlock(&m->mu);
}

void ckptd_metrics_set(ckptd_metrics *m, enum ckptd_metric id, const char *l1, const char *l2, double v)
{
	if (!m || id >= CKPTD_M__COUNT)
		return;
	pthread_mutex_lock(&m->mu);
	series *s = get_locked(m, id, l1, l2);
	if (s)
		s->value = v;
	pthread_mutex_unlock(&m->mu);
}

void ckptd_metrics_observe(ckptd_metrics *m, enum ckptd_metric id, const char *l1, const char *l2, double v)
{
	if (!m || id >= CKPTD_M__COUNT || families[id].type != M_HISTOGRAM || !(v >= 0))
		return;
	pthread_mutex_lock(&m->mu);
	series *s = get_locked(m, id, l1, l2);
	if (s) {
		s->value += v;
		s->count++;
		for (size_t b = 0; b < NBUCKETS; b++)
			if (v <= buckets[b]) {
				s->bucket[b]++;
				break;
			}
	}
	pthread_mutex_unlock(&m->mu);
}

void ckptd_metrics_zero(ckptd_metrics *m, enum ckptd_metric id)
{
	if (!m || id >= CKPTD_M__COUNT || families[id].type != M_GAUGE)
		return;
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n; i++)
		if (m->s[i].fam == id)
			m->s[i].value = 0;
	pthread_mutex_unlock(&m->mu);
}

/* ---------------------------------------------------------------- rendering */

typedef struct buf {
	char *p;
	size_t len, cap;
	int oom;
} buf;

static void bputf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bputf(buf *b, const char *fmt, ...)
{
	for (;;) {
		if (b->oom)
			return;
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t nc = b->cap * 2 + (size_t)n + 1;
		char *p = realloc(b->p, nc);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = nc;
	}
}

/* A label value per the exposition format: \\, \" and \n escaped. */
static void bput_label(buf *b, const char *name, const char *v)
{
	bputf(b, "%s=\"", name);
	for (const char *c = v; *c; c++) {
		if (*c == '\\')
			bputf(b, "\\\\");
		else if (*c == '"')
			bputf(b, "\\\"");
		else if (*c == '\n')
			bputf(b, "\\n");
		else
			bputf(b, "%c", *c);
	}
	bputf(b, "\"");
}

/* {a="x",b="y"[,le="..."]}, or nothing when there are no labels. */
static void bput_labels(buf *b, const family *f, const series *s, const char *le)
{
	int any = 0;
	for (int k = 0; k < 2; k++) {
		if (!f->labels[k])
			continue;
		bputf(b, any ? "," : "{");
		bput_label(b, f->labels[k], s->l[k]);
		any = 1;
	}
	if (le) {
		bputf(b, any ? "," : "{");
		bput_label(b, "le", le);
		any = 1;
	}
	if (any)
		bputf(b, "}");
}

int ckptd_metrics_render(ckptd_metrics *m, char **out, size_t *len)
{
	buf b = { malloc(4096), 0, 4096, 0 };
	if (!b.p)
		return -ENOMEM;
	b.p[0] = 0;
	uint64_t now = ckpt__now_ns();
	pthread_mutex_lock(&m->mu);
	double up = (double)(now - m->started_ns) / 1e9;
	for (int id = 0; id < CKPTD_M__COUNT; id++) {
		const family *f = &families[id];
		int head = 0;
		if (id == CKPTD_M_UPTIME || id == CKPTD_M_DROPPED) {
			/* Unlabelled and always there. */
			bputf(&b, "# HELP %s %s\n# TYPE %s %s\n%s %.*f\n", f->name, f->help, f->name,
			      f->type == M_COUNTER ? "counter" : "gauge", f->name,
			      id == CKPTD_M_UPTIME ? 3 : 0, id == CKPTD_M_UPTIME ? up : (double)m->dropped);
			continue;
		}
		for (size_t i = 0; i < m->n; i++) {
			const series *s = &m->s[i];
			if (s->fam != id)
				continue;
			if (!head) {
				bputf(&b, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name,
				      f->type == M_COUNTER ? "counter" : f->type == M_GAUGE ? "gauge" : "histogram");
				head = 1;
			}
			if (f->type != M_HISTOGRAM) {
				bputf(&b, "%s", f->name);
				bput_labels(&b, f, s, NULL);
				bputf(&b, " %.17g\n", s->value);
				continue;
			}
			uint64_t cum = 0;
			for (size_t k = 0; k <= NBUCKETS; k++) {
				char le[32];
				if (k < NBUCKETS) {
					cum += s->bucket[k];
					snprintf(le, sizeof(le), "%g", buckets[k]);
				} else {
					cum = s->count;
					snprintf(le, sizeof(le), "+Inf");
				}
				bputf(&b, "%s_bucket", f->name);
				bput_labels(&b, f, s, le);
				bputf(&b, " %llu\n", (unsigned long long)cum);
			}
			bputf(&b, "%s_sum", f->name);
			bput_labels(&b, f, s, NULL);
			bputf(&b, " %.17g\n%s_count", s->value, f->name);
			bput_labels(&b, f, s, NULL);
			bputf(&b, " %llu\n", (unsigned long long)s->count);
		}
	}
	pthread_mutex_unlock(&m->mu);
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}

/* ---------------------------------------------------------------- HTTP */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *text)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state)
{
	(void)version;
	(void)upload;
	ckptd_metrics *m = cls;
	/* A request body is never wanted: refuse before reading it. */
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: GET /metrics\n");
	if (*upload_size) {
		*upload_size = 0;
		return MHD_YES;
	}
	(void)state;
	if (strcmp(url, "/metrics") != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
	char *text;
	size_t len;
	if (ckptd_metrics_render(m, &text, &len) < 0)
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
	enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* Binds exactly the address given (no wildcard fallback) and listens. */
static int bind_listen(const char *addr, char *err, size_t errcap)
{
	ckptd_addr a;
	const char *why = NULL;
	if (ckptd_addr_parse(addr, CKPTD_ADDR_TCP, &a, &why) < 0) {
		ckpt__errf(err, errcap, "--metrics-listen %s: %s", addr, why ? why : "expected host:port");
		return -EINVAL;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	int g = getaddrinfo(a.host, a.port, &hints, &res);
	if (g != 0) {
		ckpt__errf(err, errcap, "--metrics-listen %s: cannot resolve %s: %s", addr, a.host, gai_strerror(g));
		return -EINVAL;
	}
	int fd = -1, r = -EADDRNOTAVAIL;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			r = -errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0)
			break;
		r = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		ckpt__errf(err, errcap, "--metrics-listen %s: cannot listen there: %s", addr, strerror(-r));
		return r;
	}
	return fd;
}

#define METRICS_CONNS 64        /* all scrapers together */
#define METRICS_CONNS_PER_IP 4   /* one scraper (Prometheus uses one) */
#define METRICS_IDLE_S 5         /* a connection silent this long is closed */

int ckptd_metrics_serve(ckptd_metrics *m, const char *addr, char *err, size_t errcap)
{
	if (m->httpd) {
		ckpt__errf(err, errcap, "--metrics-listen: already serving");
		return -EINVAL;
	}
	int fd = bind_listen(addr, err, errcap);
	if (fd < 0)
		return fd;
	/* Scrapes are small and rare: a few connections per scraper, a short
	 * idle timeout. The per-address limit is what keeps one peer's slow,
	 * half-sent requests from taking every connection a scraper needs. */
	m->httpd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, on_request, m,
	                            MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_CONNS,
	                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)METRICS_CONNS_PER_IP,
	                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_IDLE_S, MHD_OPTION_END);
	if (!m->httpd) {
		close(fd);
		ckpt__errf(err, errcap, "--metrics-listen %s: the HTTP server (libmicrohttpd) did not start", addr);
		return -EIO;
	}
	CKPTD_INFO(m->log, NULL, NULL, "metrics at http://%s/metrics", addr);
	return 0;
}

