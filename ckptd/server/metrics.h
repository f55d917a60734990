/*
 * metrics.h — ckptd's metrics registry and its Prometheus endpoint.
 *
 * The registry holds counters, gauges and fixed-bucket histograms, each a
 * family (one of enum ckptd_metric, with its name, type, help and up to two
 * label names) times label values. The event loop records with the calls
 * below; an HTTP thread (libmicrohttpd) renders the text exposition format
 * on GET /metrics. Both go through one mutex: recording takes it for a
 * lookup and an add, rendering for one pass over the series, and the HTTP
 * thread never reaches anything but the registry.
 *
 * Bounded: at most CKPTD_METRICS_MAX_JOBS distinct job label values and
 * CKPTD_METRICS_MAX_SERIES series; what does not fit is dropped (one log
 * line the first time, and ckpt_metrics_dropped_total counts it).
 *
 * Recording calls accept a NULL registry (roles in tests without one).
 */
#ifndef CKPTD_SERVER_METRICS_H
#define CKPTD_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPTD_METRICS_MAX_JOBS 256
#define CKPTD_METRICS_MAX_SERIES 8192

/* Every family ckptd exposes; docs/operations.md lists them. */
enum ckptd_metric {
	/* process */
	CKPTD_M_BUILD_INFO,          /* gauge {version, node} = 1 */
	CKPTD_M_UPTIME,              /* gauge, seconds (computed at render) */
	CKPTD_M_DROPPED,             /* counter: samples dropped by the bounds */
	/* coordinator */
	CKPTD_M_VERSIONS_COMMITTED,  /* counter {job, tier} */
	CKPTD_M_COMMIT_LATENCY,      /* histogram {job, tier} */
	CKPTD_M_COORD_REPORTS,       /* counter {job, tier} */
	CKPTD_M_COORD_REFUSED,       /* counter {job, tier} */
	CKPTD_M_COPIES_DELETING,     /* counter {job} */
	CKPTD_M_COPIES_GONE,         /* counter {job} */
	CKPTD_M_AGENTS,              /* gauge {state} */
	CKPTD_M_RETENTION_RUNS,      /* counter */
	/* agent */
	CKPTD_M_POOL_BYTES,          /* gauge */
	CKPTD_M_POOL_USED,           /* gauge */
	CKPTD_M_JOB_POOL_BYTES,      /* gauge {job} */
	CKPTD_M_JOB_POOL_USED,       /* gauge {job} */
	CKPTD_M_EVICTED,             /* counter {job} */
	CKPTD_M_GRANTS_REFUSED,      /* counter {job, reason} */
	CKPTD_M_AGENT_REPORTS,       /* counter {job, tier} */
	CKPTD_M_SHARD_BYTES,         /* counter {job, tier} */
	CKPTD_M_SAVE_STALL,          /* histogram {job, tier} */
	CKPTD_M_TIME_TO_DURABLE,     /* histogram {job, tier} */
	CKPTD_M_VERIFICATIONS,       /* counter {job} */
	CKPTD_M_NOT_INTACT,          /* counter {job} */
	CKPTD_M_AGENT_DELETIONS,     /* counter {job} */
	/* coordinator: step times (ckpt_step) */
	CKPTD_M_STEP_REPORTS,        /* counter {job} */
	CKPTD_M_STEP_SECONDS,        /* gauge {job, stat: fastest, mean, slowest} */
	CKPTD_M_STRAGGLERS,          /* gauge {job} */
	CKPTD_M_STRAGGLER_STEP,      /* gauge {job, rank}: flagged ranks' step time, 0 once cleared */
	CKPTD_M_GOODPUT,             /* gauge {job}: useful time / wall time */
	CKPTD_M_TIME_SECONDS,        /* counter {job, kind}: where the job's time went */
	CKPTD_M_INTERVAL_SECONDS,    /* gauge {job}: the advised checkpoint interval */
	CKPTD_M_INTERVAL_STEPS,      /* gauge {job}: the same in steps */
	CKPTD_M_RESTORE_SECONDS,     /* histogram {job, tier}: ranks' restores, by the tier read */
	CKPTD_M_SAVE_ERRORS,         /* counter {job}: saves that failed in the ranks */
	CKPTD_M_PEER_POOL_BYTES,     /* gauge: the peer pool (--peer-pool-size) */
	CKPTD_M_PEER_POOL_USED,      /* gauge */
	CKPTD_M_PEER_STORED,         /* counter {job}: partner copies checked and stored */
	CKPTD_M_PEER_EVICTED,        /* counter {job} */
	CKPTD_M_PEER_REFUSED,        /* counter {job, reason}: leases refused, images failing their check */
	CKPTD_M_PEER_SKIPS,          /* counter {job}: PEER_MEM copies ranks skipped (partner slow, gone, fabric error) */
	CKPTD_M_PREEMPT_NOTICES,     /* counter {source}: preemption notices the coordinator acted on */
	CKPTD_M_EMERGENCIES,         /* counter {job, result: committed, missed} */
	CKPTD_M_AGENT_NOTICES,       /* counter {source}: notices this agent's pollers raised */
	CKPTD_M_FABRIC_ERRORS,       /* counter {job}: ranks' failed libfabric transfers */
	CKPTD_M_SHARED_BYTES,        /* counter {job}: bytes the agent copied to --shared-dir */
	CKPTD_M_SHARED_SECONDS,      /* histogram {job}: one shard's flush to SHARED */
	CKPTD_M_SHARED_BACKLOG,      /* gauge {job}: versions waiting for their flush */
	CKPTD_M_TIER_DEGRADED,       /* gauge {tier}: nodes serving it that are down or silent */
	CKPTD_M_COORD_LINK,          /* gauge: agent's coordinator link answers (1) or not (0) */
	CKPTD_M_PEER_JOB_USED,       /* gauge {job}: peer pool bytes a job's copies and leases hold */
	CKPTD_M_PEER_PROTECTED,      /* gauge {job}: of which its restore point's copies (never evicted) */
	CKPTD_M_STRAGGLER_PERSIST,   /* counter {job}: ranks that became persistent stragglers */
	CKPTD_M_STRAGGLER_CAUSES,    /* counter {job, cause}: what their node's evidence named */
	CKPTD_M_PEER_GROUPS,         /* gauge: rs:K+M groups formed (--peer-scheme) */
	CKPTD_M_PEER_UNGROUPED,      /* gauge: eligible nodes in no group */
	CKPTD_M_PEER_GROUP_LOST,     /* gauge {group}: members down or silent */
	CKPTD_M_PEER_GROUP_LEFT,     /* gauge {group}: losses it can still take */
	CKPTD_M_EPOCH,               /* gauge {job}: its membership epoch (one per failure decision) */
	CKPTD_M_FAILURES,            /* counter {job, kind}: failure decisions */
	CKPTD_M_DETECT,              /* histogram {kind}: from the last sign of life to the decision */
	CKPTD_M_RS_PROTECTED,        /* counter {job}: versions an rs group's parity protects */
	CKPTD_M_RS_FAILED,           /* counter {job}: group encodes that did not complete */
	CKPTD_M_RS_UNPROTECTED,      /* counter {job}: protections dropped (more than M lost) */
	CKPTD_M_RS_PARITY_BYTES,     /* gauge: agent: rs parity held in the peer pool */
	CKPTD_M_RS_REBUILDS,         /* counter {job, result}: agent: shards rebuilt from a group */
	CKPTD_M_SPARES,              /* gauge: spares free to take a lost node */
	CKPTD_M_SPARE_DECISIONS,     /* counter {job, result}: spares chosen, ready, failed, none free */
	CKPTD_M_STRAGGLER_REPLACEMENTS, /* counter {job, result}: --replace-stragglers: started, replaced, missed, failed */
	CKPTD_M_SPARE_PULL,          /* histogram {job}: the spare's pull of a lost node's state */
	CKPTD_M_RECOVERY_PHASE,      /* histogram {phase}: each phase of a recovery */
	CKPTD_M__COUNT
};

typedef struct ckptd_metrics ckptd_metrics;

/* Creates an empty registry. log (borrowed, may be NULL) hears the one line
 * about dropped samples; node and version label ckpt_build_info.
 * Returns 0 or -ENOMEM. */
int ckptd_metrics_new(const ckptd_log *log, const char *node, const char *version, ckptd_metrics **out);
/* Stops the endpoint (if serving), frees. NULL is accepted. */
void ckptd_metrics_free(ckptd_metrics *m);

/* Counter: adds v (>= 0). Gauge: sets v. Histogram: observes v (seconds).
 * l1, l2: the family's label values in order (NULL where it has fewer). */
void ckptd_metrics_add(ckptd_metrics *m, enum ckptd_metric id, const char *l1, const char *l2, double v);
void ckptd_metrics_set(ckptd_metrics *m, enum ckptd_metric id, const char *l1, const char *l2, double v);
void ckptd_metrics_observe(ckptd_metrics *m, enum ckptd_metric id, const char *l1, const char *l2, double v);
/* Sets every existing series of a gauge family to 0 (before setting the
 * ones that still exist: a job whose pool went reads 0, not its last value). */
void ckptd_metrics_zero(ckptd_metrics *m, enum ckptd_metric id);

/* The text exposition (format 0.0.4) into a malloc'd buffer.
 * Returns 0 or -ENOMEM. */
int ckptd_metrics_render(ckptd_metrics *m, char **out, size_t *len);

/* Binds addr ("host:port", "[v6]:port"; only that address) and serves
 * GET /metrics from a thread of libmicrohttpd's (404 for other paths, 405
 * for other methods). Call once, from a thread with SIGTERM/SIGINT blocked.
 * [out] err, errcap: the reason on failure, naming --metrics-listen.
 * Returns 0; -EINVAL (bad address); -EADDRINUSE; other -errno. */
int ckptd_metrics_serve(ckptd_metrics *m, const char *addr, char *err, size_t errcap);

/* The tier name used as a label value ("local_mem", ...), "unknown" for
 * anything but one tier bit. */
const char *ckptd_metrics_tier(uint32_t tier);

#ifdef __cplusplus
}
#endif

#endif
