/* ckpt-step-bench: what ckpt_step costs the training loop.
 *
 * For each mode (embedded: no daemon; joined: the agent named by CKPT_DAEMON
 * and CKPT_TOKEN_FILE, which must answer):
 *   - the time of one call, as the median over --runs runs of --calls calls
 *     in a tight loop (successive step numbers, so every call is measured as
 *     a step and summed into the next report);
 *   - the CPU time of the whole process (getrusage) over --cpu-seconds of a
 *     loop that sleeps until the next --period-us tick and calls ckpt_step,
 *     against the same loop without a context, and with a context but no
 *     ckpt_step calls: the difference is what the calls and the io thread's
 *     once-a-second report cost, wherever they run.
 * The overhead against a training step is calls per step (1) x the cost of a
 * call / the step (--step-ms, 100 ms).
 *
 * Uses only the public header.
 *   ckpt-step-bench [--root DIR] [--calls N] [--runs R] [--cpu-seconds S]
 *                   [--period-us U] [--step-ms MS] [--no-embedded] */
#define _GNU_SOURCE
#include <ckpt.h>

#include "bench_util.h"

#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct step_opts {
	const char *root;
	uint64_t calls;
	unsigned runs;
	double cpu_seconds;
	unsigned period_us;
	double step_ms;
	int embedded;
} step_opts;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int open_ctx(const step_opts *o, int joined, ckpt_ctx **ctx)
{
	ckpt_config cfg;
	int r = ckpt_config_init(&cfg);
	if (r < 0)
		return r;
	cfg.job_id = "stepbench";
	cfg.rank = 0;
	cfg.world_size = 1;
	cfg.root = o->root;
	cfg.chunk_bytes = 1u << 20;
	cfg.staging_bytes = 4u << 20; /* nothing is saved: keep the pool small */
	if (joined) {
		cfg.daemon_required = 1; /* measure the agent's path, or fail */
	} else {
		cfg.daemon = NULL;
		cfg.tiers = CKPT_TIER_LOCAL_DISK;
	}
	return ckpt_ctx_open(&cfg, ctx);
}

/* CPU seconds per wall second of a loop ticking every period_us for secs,
 * calling ckpt_step when ctx is set and call is 1. */
static double paced_loop(ckpt_ctx *ctx, int call, uint64_t *step, const step_opts *o)
{
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	uint64_t t0 = now_ns(), ticks = (uint64_t)(o->cpu_seconds * 1e6 / o->period_us);
	double c0 = cpu_s();
	for (uint64_t i = 0; i < ticks; i++) {
		next.tv_nsec += (long)o->period_us * 1000;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		if (ctx && call)
			(void)ckpt_step(ctx, ++*step);
	}
	double wall = (double)(now_ns() - t0) / 1e9;
	return (cpu_s() - c0) / wall;
}

static int run_mode(const step_opts *o, int joined, double cpu_base)
{
	const char *name = joined ? "joined to ckptd" : "embedded";
	ckpt_ctx *ctx = NULL;
	int r = open_ctx(o, joined, &ctx);
	if (r < 0) {
		fprintf(stderr, "ckpt-step-bench: %s: ckpt_ctx_open: %s\n", name, ckpt_strerror(r));
		return 1;
	}
	uint64_t step = 0;
	double *ns = calloc(o->runs, sizeof(*ns));
	if (!ns)
		return 1;
	/* A warm-up run, then the measured ones. */
	for (unsigned run = 0; run <= o->runs; run++) {
		uint64_t t0 = now_ns();
		for (uint64_t i = 0; i < o->calls; i++) {
			if (ckpt_step(ctx, ++step) != CKPT_STEP_CONTINUE) {
				fprintf(stderr, "ckpt-step-bench: ckpt_step did not answer CONTINUE\n");
				return 1;
			}
		}
		if (run)
			ns[run - 1] = (double)(now_ns() - t0) / (double)o->calls;
	}
	qsort(ns, o->runs, sizeof(*ns), cmp_double);
	double med = ns[o->runs / 2];
	double idle = paced_loop(ctx, 0, &step, o);
	double busy = paced_loop(ctx, 1, &step, o);
	double step_s = o->step_ms / 1e3;
	printf("%s:\n", name);
	printf("  ckpt_step: median %.1f ns/call (min %.1f, max %.1f; %u runs of %" PRIu64 " calls)\n", med, ns[0],
	       ns[o->runs - 1], o->runs, o->calls);
	printf("  overhead on a %.0f ms step, 1 call per step: %.6f %% (target < 0.5 %%)\n", o->step_ms,
	       100.0 * med * 1e-9 / step_s);
	printf("  process CPU, loop calling ckpt_step every %u us for %.0f s: %.3f ms/s\n", o->period_us,
	       o->cpu_seconds, busy * 1e3);
	printf("  process CPU, same loop, context open, no ckpt_step:       %.3f ms/s\n", idle * 1e3);
	printf("  process CPU, same loop, no context:                       %.3f ms/s\n", cpu_base * 1e3);
	printf("  CPU the context adds: %.3f ms/s (%.4f %% of a core), of which ckpt_step and its reports %.3f ms/s\n",
	       (busy - cpu_base) * 1e3, 100.0 * (busy - cpu_base), (busy - idle) * 1e3);
	printf("RESULT mode=%s ns_per_call=%.2f min=%.2f max=%.2f overhead_pct=%.6f cpu_ms_per_s=%.4f "
	       "idle_ms_per_s=%.4f base_ms_per_s=%.4f\n",
	       joined ? "joined" : "embedded", med, ns[0], ns[o->runs - 1], 100.0 * med * 1e-9 / step_s, busy * 1e3,
	       idle * 1e3, cpu_base * 1e3);
	free(ns);
	r = ckpt_ctx_close(ctx);
	if (r < 0) {
		fprintf(stderr, "ckpt-step-bench: %s: ckpt_ctx_close: %s\n", name, ckpt_strerror(r));
		return 1;
	}
	return 0;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ckpt-step-bench [--root DIR] [--calls N] [--runs R] [--cpu-seconds S]\n"
	           "                       [--period-us U] [--step-ms MS] [--no-embedded]\n"
	           "  embedded always (unless --no-embedded); joined to the agent too when CKPT_DAEMON is set\n");
}

int main(int argc, char **argv)
{
	step_opts o = { .calls = 1000000, .runs = 7, .cpu_seconds = 10, .period_us = 1000, .step_ms = 100,
		        .embedded = 1 };
	static const struct option lo[] = { { "root", 1, 0, 'r' },       { "calls", 1, 0, 'n' },
		                            { "runs", 1, 0, 'R' },       { "cpu-seconds", 1, 0, 's' },
		                            { "period-us", 1, 0, 'p' }, { "step-ms", 1, 0, 'm' },
		                            { "no-embedded", 0, 0, 'E' }, { "help", 0, 0, 'h' },
		                            { 0, 0, 0, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'r': o.root = optarg; break;
		case 'n': o.calls = strtoull(optarg, NULL, 10); break;
		case 'R': o.runs = (unsigned)atoi(optarg); break;
		case 's': o.cpu_seconds = atof(optarg); break;
		case 'p': o.period_us = (unsigned)atoi(optarg); break;
		case 'm': o.step_ms = atof(optarg); break;
		case 'E': o.embedded = 0; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!o.calls || !o.runs || o.cpu_seconds <= 0 || !o.period_us || o.step_ms <= 0) {
		usage(stderr);
		return 2;
	}
	const char *daemon = getenv("CKPT_DAEMON");
	int joined = daemon && *daemon;
	if (!o.embedded && !joined) {
		fprintf(stderr, "ckpt-step-bench: --no-embedded and no CKPT_DAEMON: nothing to measure\n");
		return 2;
	}
	int made = 0;
	if (!o.root) {
		const char *td = getenv("TMPDIR");
		static char buf[512];
		snprintf(buf, sizeof(buf), "%s/ckpt-step-bench-XXXXXX", td && *td ? td : "/tmp");
		if (!mkdtemp(buf)) {
			perror("mkdtemp");
			return 1;
		}
		o.root = buf;
		made = 1;
	}
	printf("ckpt-step-bench: %u runs of %" PRIu64 " calls; CPU over %.0f s at one call per %u us; "
	       "online CPUs %ld; load average at the start: ",
	       o.runs, o.calls, o.cpu_seconds, o.period_us, sysconf(_SC_NPROCESSORS_ONLN));
	FILE *la = fopen("/proc/loadavg", "r");
	char line[128] = "?";
	if (la) {
		if (!fgets(line, sizeof(line), la))
			snprintf(line, sizeof(line), "?\n");
		fclose(la);
	}
	fputs(line, stdout);
	uint64_t dummy = 0;
	double base = paced_loop(NULL, 0, &dummy, &o);
	int rc = 0;
	if (o.embedded)
		rc |= run_mode(&o, 0, base);
	if (joined)
		rc |= run_mode(&o, 1, base);
	if (made)
		nftw(o.root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}
