/* A node's health, sampled by its agent for the evidence of a persistent
 * straggler (docs/operations.md, "Stragglers"): CPU time stolen by the
 * hypervisor and spent waiting on I/O (/proc/stat), CPU throttling of each
 * local rank's cgroup (cpu.stat), pressure stall information
 * (/proc/pressure), disk latency (/proc/diskstats), and OOM kills and
 * hardware errors in the kernel log (/dev/kmsg, which needs root or
 * CAP_SYSLOG), plus each local rank's recent step times.
 *
 * Sampled once a second on the agent's loop: every file is small and read
 * with a bounded buffer, at most HEALTH_KMSG_READS kernel records a turn;
 * the figures over a window are differences of two samples from a ring.
 * What cannot be read is left out of the evidence (its flag unset), never
 * guessed. The file locations are roots so that tests point them at trees
 * of their own. Not thread-safe: the agent's loop only. */
#ifndef CKPTD_HEALTH_H
#define CKPTD_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "wire/proto.h"

typedef struct ckptd_health ckptd_health;

typedef struct ckptd_health_opts {
	const char *proc;    /* "/proc" */
	const char *cgroup;  /* "/sys/fs/cgroup" (v2) */
	const char *kmsg;    /* "/dev/kmsg"; "" for none */
} ckptd_health_opts;

/* Opens the kernel log (from its oldest record still held: events of the
 * last hour before the agent started count too). NULL fields take the
 * defaults. Returns 0 or -ENOMEM. */
int ckptd_health_new(const ckptd_health_opts *o, ckptd_health **out);
void ckptd_health_free(ckptd_health *h);

/* One sample of everything (the agent's loop, about once a second).
 * now_ns: CLOCK_MONOTONIC. */
void ckptd_health_sample(ckptd_health *h, uint64_t now_ns);

/* A local rank (its process) to watch: its cgroup's throttling and its
 * step times. Bounded (256 ranks per node; more are not watched). */
void ckptd_health_rank(ckptd_health *h, const char *job, uint32_t rank, uint32_t pid);
void ckptd_health_rank_gone(ckptd_health *h, const char *job, uint32_t rank);
/* A STEP_REPORT of a local rank: its mean step time, kept in a ring. */
void ckptd_health_step(ckptd_health *h, const char *job, uint32_t rank, uint64_t step_ns);

/* The evidence about (job, rank) over the last window_ns (at most the
 * ring's span): fills every field of out the agent knows, sets its flags,
 * its verdict and its text. The request's figures (windows, step times)
 * are copied in; node names the node. */
void ckptd_health_evidence(ckptd_health *h, const ckptd_evidence_request *rq, const char *node, uint64_t now_ns,
                           ckptd_node_evidence *out);

#endif
