/* ckpt-sim: goodput of checkpoint strategies for a job of 1k-16k GPUs,
 * by discrete-event simulation (sim.c; --from-bench: bench_json.c; --plot:
 * plot.c); docs/goodput.md explains the model and where each default comes
 * from.
 *
 * Every option is one row of opt_table: its parser, default and help come
 * from there. Exit codes: 0 done, 1 a run or the plot failed, 2 bad input. */
#define _GNU_SOURCE
#include "bench_json.h"
#include "plot.h"
#include "sim.h"
#include "sim_ec.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)
#define SIM_MAX_GPU_COUNTS 16
#define SIM_MAX_GPUS (1u << 20)
#define SIM_MAX_STRATEGIES 8
#define SIM_MAX_SCHEMES 8
#define SIM_MAX_RUNS 100000
#define SIM_MAX_SAVES 1e8

/* Llama 3 paper: 419 unexpected interruptions in 54 days on 16,384 GPUs. */
#define LLAMA3_INTERRUPTIONS 419.0
#define LLAMA3_DAYS 54.0
#define LLAMA3_GPUS 16384.0
#define LLAMA3_MTBF_GPU_H (LLAMA3_DAYS * 24 * LLAMA3_GPUS / LLAMA3_INTERRUPTIONS)

enum sim_kind { KIND_REMOTE, KIND_CKPT };

typedef struct sim_spec {
	enum sim_kind kind;
	int has_interval;   /* given as KIND:INTERVAL */
	double interval_min; /* 0: auto */
	unsigned k, m;      /* ckpt@rs:K+M: the peer tier's scheme; 0, 0: partner copies */
} sim_spec;

typedef struct sim_opts {
	uint64_t gpus[SIM_MAX_GPU_COUNTS];
	unsigned ngpus;
	uint64_t gpus_per_node;
	double hours;
	uint64_t runs;
	uint64_t seed;
	uint64_t state_bytes;
	double mtbf_gpu_h; /* HUGE_VAL: no failures */
	double node_loss_frac, partner_loss_frac, preempt_frac, preempt_notice_s;
	double restart_s;   /* < 0: the phases below; else one constant restart (flat) */
	/* The restart's phases (docs/goodput.md, "Restart, phase by phase"). */
	double detect_s, hang_detect_s, hang_frac, base_detect_s, base_hang_detect_s;
	double spare_s, stage_eff, sched_s, start_s, comm_s /* < 0: auto */, warmup_s;
	uint64_t spares;    /* UINT64_MAX: auto */
	double spare_return_h, no_spare_s;
	double remote_write_bw, remote_read_bw, remote_total_bw; /* bytes/s; total 0: no cap */
	double snapshot_bw, local_read_bw, peer_bw;               /* bytes/s per GPU */
	const char *from_bench;
	sim_spec specs[SIM_MAX_STRATEGIES];
	unsigned nspecs;
	double interval_min; /* for specs without one; 0: auto */
	int json;
	const char *plot;
	/* --peer-scheme: the schemes' table (sim_ec.h) */
	sim_scheme schemes[SIM_MAX_SCHEMES];
	unsigned nschemes;
	uint64_t domain_nodes;
	double domain_mtbf_h, reprotect_s, version_life_s;
} sim_opts;

/* ---- option parsers: 0, or -1 with a reason in why ---------------------- */

enum opt_type {
	OT_GPUS, OT_COUNT, OT_RUNS, OT_U64, OT_HOURS, OT_MTBF, OT_FRAC, OT_SECONDS, OT_SIZE, OT_BW, OT_BW0,
	OT_STRATEGY, OT_INTERVAL, OT_PATH, OT_FLAG, OT_HELP, OT_SCHEMES, OT_AUTO_SECONDS, OT_SPARES
};

typedef struct opt_def {
	const char *name;
	enum opt_type type;
	size_t off;
	const char *def; /* parsed like a given value; NULL: none */
	const char *arg;
	const char *help;
} opt_def;

#define OFF(f) offsetof(sim_opts, f)

static const opt_def opt_table[] = {
	{ "gpus", OT_GPUS, OFF(gpus), "1024,4096,16384", "N[,N...]", "GPU counts to simulate (1 to 1048576 each)" },
	{ "gpus-per-node", OT_COUNT, OFF(gpus_per_node), "8", "N", "GPUs per node" },
	{ "hours", OT_HOURS, OFF(hours), "168", "H", "simulated wall time per run" },
	{ "runs", OT_RUNS, OFF(runs), "20", "N", "runs per cell, averaged (min and max shown)" },
	{ "seed", OT_U64, OFF(seed), "1", "N", "seed: the same seed gives the same output" },
	{ "state-per-gpu", OT_SIZE, OFF(state_bytes), "4G", "BYTES",
	  "checkpointed state per GPU (K, M, G, T: powers of 1024)" },
	{ "mtbf-gpu-hours", OT_MTBF, OFF(mtbf_gpu_h), "llama3", "H|llama3|inf",
	  "mean time between failures of one GPU; llama3 = 54*24*16384/419; inf: no failures" },
	{ "node-loss-frac", OT_FRAC, OFF(node_loss_frac), "0.766", "F",
	  "fraction of unexpected failures that lose the node (Llama 3: 321 of 419)" },
	{ "partner-loss-frac", OT_FRAC, OFF(partner_loss_frac), "0.01", "F",
	  "fraction of node losses that also lose the partner node" },
	{ "preempt-frac", OT_FRAC, OFF(preempt_frac), "0", "F", "fraction of failures that are preemptions with notice" },
	{ "preempt-notice-s", OT_SECONDS, OFF(preempt_notice_s), "30", "S", "notice before a preemption" },
	{ "restart-s", OT_SECONDS, OFF(restart_s), NULL, "S",
	  "one constant restart per failure instead of the phases below (the model before they were split)" },
	{ "detect-s", OT_SECONDS, OFF(detect_s), "2", "S",
	  "ckpt: a death or a node loss decided by the coordinator (its bound: tools/bench-recovery.sh)" },
	{ "hang-detect-s", OT_SECONDS, OFF(hang_detect_s), "10", "S", "ckpt: a hung rank decided" },
	{ "baseline-detect-s", OT_SECONDS, OFF(base_detect_s), "15", "S",
	  "remote: a lost node noticed by the launcher (torchrun c10d rendezvous keep-alive, 3 x 5 s)" },
	{ "baseline-hang-detect-s", OT_SECONDS, OFF(base_hang_detect_s), "600", "S",
	  "remote: a hang noticed by NCCL's watchdog (PyTorch's default timeout, 10 min)" },
	{ "hang-frac", OT_FRAC, OFF(hang_frac), "0.071", "F",
	  "of failures that spare the node, those that hang (Llama 3: 7 NCCL watchdog timeouts of 98)" },
	{ "spare-s", OT_SECONDS, OFF(spare_s), "0.1", "S", "a spare node chosen and told" },
	{ "stage-eff", OT_FRAC, OFF(stage_eff), "0.8", "F",
	  "ckpt: share of --peer-bw x GPUs per node a spare's pull of the lost state reaches (plus 1 s)" },
	{ "sched-s", OT_SECONDS, OFF(sched_s), "5", "S", "the launcher relaunching the job's processes" },
	{ "start-s", OT_SECONDS, OFF(start_s), "15", "S", "a process starting: interpreter, imports, CUDA context" },
	{ "comm-s", OT_AUTO_SECONDS, OFF(comm_s), "auto", "S|auto",
	  "communicator set-up; auto: 265 s x GPUs / 98,304 (stock NCCL's bootstrap at 96k GPUs, NCCLX paper)" },
	{ "warmup-s", OT_SECONDS, OFF(warmup_s), "20", "S", "first steps slower than steady, counted as lost" },
	{ "spares", OT_SPARES, OFF(spares), "auto", "N|auto", "spare nodes of the job; auto: 1 % of its nodes, at least 2" },
	{ "spare-return-hours", OT_HOURS, OFF(spare_return_h), "4", "H",
	  "a spare taken is available again after this (the lost node repaired, or another)" },
	{ "no-spare-s", OT_SECONDS, OFF(no_spare_s), "600", "S", "a lost node with no spare: until a replacement is there" },
	{ "remote-write-bw", OT_BW, OFF(remote_write_bw), "2GiB", "BW", "remote storage write bandwidth per node" },
	{ "remote-read-bw", OT_BW, OFF(remote_read_bw), "2GiB", "BW", "remote storage read bandwidth per node" },
	{ "remote-total-bw", OT_BW0, OFF(remote_total_bw), "2TB", "BW",
	  "remote storage bandwidth of the whole job (0: no cap; Llama 3: 2 TB/s sustained)" },
	{ "snapshot-bw", OT_BW, OFF(snapshot_bw), "10GiB", "BW", "ckpt: snapshot copy per GPU (the stall)" },
	{ "local-read-bw", OT_BW, OFF(local_read_bw), "10GiB", "BW", "ckpt: restore from node DRAM per GPU" },
	{ "peer-bw", OT_BW, OFF(peer_bw), "5GiB", "BW", "ckpt: copy to and from a partner's DRAM per GPU" },
	{ "from-bench", OT_PATH, OFF(from_bench), NULL, "FILE",
	  "ckpt: stall, durable and restore from ckpt-bench --json, scaled to --state-per-gpu" },
	{ "strategy", OT_STRATEGY, 0, "remote:30,remote,ckpt", "LIST",
	  "KIND[:INTERVAL],...; KIND remote, ckpt (partner copies) or ckpt@rs:K+M (rs groups in peer DRAM)" },
	{ "interval", OT_INTERVAL, OFF(interval_min), "auto", "MIN|auto",
	  "interval of strategies listed without one; auto: Young/Daly" },
	{ "json", OT_FLAG, OFF(json), NULL, NULL, "JSON instead of the tables" },
	{ "plot", OT_PATH, OFF(plot), NULL, "FILE.png",
	  "also plot goodput against GPUs (python3 with matplotlib)" },
	{ "peer-scheme", OT_SCHEMES, 0, NULL, "LIST",
	  "also compare peer schemes, partner,rs:K+M,...: DRAM and wire bytes per node, loss per version" },
	{ "domain-nodes", OT_COUNT, OFF(domain_nodes), "16", "N", "peer schemes: nodes per failure domain (rack)" },
	{ "domain-mtbf-hours", OT_HOURS, OFF(domain_mtbf_h), "87600", "H",
	  "peer schemes: mean time between losses of one whole failure domain (assumed: once in ten years)" },
	{ "reprotect-s", OT_SECONDS, OFF(reprotect_s), "300", "S",
	  "peer schemes: a lost node's copies protected again after this (its replacement registered, re-encoded)" },
	{ "version-life-s", OT_SECONDS, OFF(version_life_s), "600", "S",
	  "peer schemes: how long a version is the restore point (the checkpoint interval)" },
	{ "help", OT_HELP, 0, NULL, NULL, "this text" },
};
#define NOPTS (sizeof(opt_table) / sizeof(opt_table[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: ckpt-sim [options]\n"
	           "Simulates a training job that checkpoints and fails, and prints its goodput\n"
	           "per strategy and GPU count (docs/goodput.md).\n\noptions:\n");
	for (unsigned i = 0; i < NOPTS; i++) {
		const opt_def *o = &opt_table[i];
		char lhs[64];
		snprintf(lhs, sizeof(lhs), "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "  %-30s %s", lhs, o->help);
		if (o->def)
			fprintf(f, " [%s]", o->def);
		fputc('\n', f);
	}
	fprintf(f, "\nBW: a number of GiB/s, or with a unit: 500MB, 2GB, 2TB (powers of 1000),\n"
	           "    512MiB, 2GiB (powers of 1024), per second. INTERVAL: minutes of compute\n"
	           "    between saves, or auto. exit: 0 done, 1 failed, 2 bad input\n");
}

static int why_set(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int why_set(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return -1;
}

/* A whole string as a double; inf only where allowed. */
static int to_double(const char *s, double *out, int allow_inf)
{
	char *end;
	if (!s || !*s)
		return -1;
	errno = 0;
	double d = strtod(s, &end);
	if (errno || end == s || *end || isnan(d) || (!allow_inf && isinf(d)))
		return -1;
	*out = d;
	return 0;
}

/* As ckpt-bench's: 123, 4K, 8M, 1G, 1T (powers of 1024), optional B/iB. */
static int to_size(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (!strcmp(end, "iB") || !strcmp(end, "B"))
		end += strlen(end);
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int to_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

/* Bytes per second from "2", "2GiB", "500MB", "2TB/s". */
static int to_bw(const char *s, double *out)
{
	static const struct { const char *unit; double mult; } units[] = {
		{ "", GIB }, { "KB", 1e3 }, { "MB", 1e6 }, { "GB", 1e9 }, { "TB", 1e12 },
		{ "KiB", 1024.0 }, { "MiB", 1048576.0 }, { "GiB", GIB }, { "TiB", GIB * 1024 },
	};
	char *end;
	if (!s || !*s)
		return -1;
	errno = 0;
	double d = strtod(s, &end);
	if (errno || end == s || !isfinite(d))
		return -1;
	char unit[8];
	size_t n = strlen(end);
	if (n >= 2 && !strcmp(end + n - 2, "/s"))
		n -= 2;
	if (n >= sizeof(unit))
		return -1;
	memcpy(unit, end, n);
	unit[n] = '\0';
	for (unsigned i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(unit, units[i].unit)) {
			*out = d * units[i].mult;
			return 0;
		}
	return -1;
}

static int parse_gpus(const char *s, sim_opts *o, char *why, size_t wn)
{
	char buf[512];
	if (strlen(s) >= sizeof(buf))
		return why_set(why, wn, "too long");
	strcpy(buf, s);
	unsigned n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t g;
		if (to_u64(tok, &g) < 0 || g < 1 || g > SIM_MAX_GPUS)
			return why_set(why, wn, "'%s' is not a GPU count from 1 to %u", tok, SIM_MAX_GPUS);
		if (n == SIM_MAX_GPU_COUNTS)
			return why_set(why, wn, "more than %d GPU counts", SIM_MAX_GPU_COUNTS);
		o->gpus[n++] = g;
	}
	if (!n)
		return why_set(why, wn, "no GPU count given");
	o->ngpus = n;
	return 0;
}

/* Minutes > 0, or auto (0). */
static int parse_interval(const char *s, double *out)
{
	if (!strcmp(s, "auto")) {
		*out = 0;
		return 0;
	}
	double d;
	if (to_double(s, &d, 0) < 0 || !(d > 0))
		return -1;
	*out = d;
	return 0;
}

/* "partner" (0, 0) or "rs:K+M": K, M >= 1, K + M <= 64 (as ckptd takes them). */
static int parse_scheme(const char *one, unsigned *k, unsigned *m)
{
	int used = -1;
	size_t n = strlen(one);
	*k = *m = 0;
	if (!strcmp(one, "partner"))
		return 0;
	if (sscanf(one, "rs:%2u+%2u%n", k, m, &used) != 2 || used != (int)n || !one[3] || !strchr("123456789", one[3]) ||
	    !strchr("123456789", one[strcspn(one, "+") + 1]) || *k < 1 || *m < 1 || *k + *m > 64)
		return -1;
	return 0;
}

static int parse_strategies(const char *s, sim_opts *o, char *why, size_t wn)
{
	char buf[512];
	if (strlen(s) >= sizeof(buf))
		return why_set(why, wn, "too long");
	strcpy(buf, s);
	unsigned n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		sim_spec sp = { 0 };
		/* ckpt@rs:K+M[:INTERVAL]: the scheme's own colon comes first. */
		char *at = strchr(tok, '@'), *sc = at ? strchr(at, ':') : NULL;
		char *colon = strchr(sc ? sc + 1 : tok, ':');
		if (colon) {
			*colon = '\0';
			if (parse_interval(colon + 1, &sp.interval_min) < 0)
				return why_set(why, wn, "'%s': interval '%s' is neither minutes > 0 nor auto", tok, colon + 1);
			sp.has_interval = 1;
		}
		if (at) {
			*at = '\0';
			if (strcmp(tok, "ckpt") || parse_scheme(at + 1, &sp.k, &sp.m) < 0)
				return why_set(why, wn, "'%s@%s': a scheme goes with ckpt: ckpt@partner or ckpt@rs:K+M", tok, at + 1);
		}
		if (!strcmp(tok, "remote"))
			sp.kind = KIND_REMOTE;
		else if (!strcmp(tok, "ckpt"))
			sp.kind = KIND_CKPT;
		else
			return why_set(why, wn, "unknown strategy '%s' (known: remote, ckpt)", tok);
		if (n == SIM_MAX_STRATEGIES)
			return why_set(why, wn, "more than %d strategies", SIM_MAX_STRATEGIES);
		o->specs[n++] = sp;
	}
	if (!n)
		return why_set(why, wn, "no strategy given");
	o->nspecs = n;
	return 0;
}

/* "partner,rs:8+2,...". */
static int parse_schemes(const char *v, sim_opts *o, char *why, size_t wn)
{
	o->nschemes = 0;
	const char *p = v;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		char one[32];
		unsigned k = 0, m = 0;
		if (n == 0 || n >= sizeof(one) || o->nschemes == SIM_MAX_SCHEMES)
			return why_set(why, wn, "'%s': at most %d schemes, comma-separated", v, SIM_MAX_SCHEMES);
		memcpy(one, p, n);
		one[n] = '\0';
		if (parse_scheme(one, &k, &m) < 0)
			return why_set(why, wn, "'%s' is not partner or rs:K+M (K, M >= 1, K + M <= 64)", one);
		o->schemes[o->nschemes++] = (sim_scheme){ k, m };
		p += n + (e != NULL);
	}
	return o->nschemes ? 0 : why_set(why, wn, "no scheme given");
}

static int set_option(const opt_def *d, const char *v, sim_opts *o, char *why, size_t wn)
{
	void *p = (char *)o + d->off;
	double x;
	uint64_t u;
	switch (d->type) {
	case OT_GPUS: return parse_gpus(v, o, why, wn);
	case OT_STRATEGY: return parse_strategies(v, o, why, wn);
	case OT_COUNT:
		if (to_u64(v, &u) < 0 || u < 1 || u > 1024)
			return why_set(why, wn, "'%s' is not a count from 1 to 1024", v);
		*(uint64_t *)p = u;
		return 0;
	case OT_RUNS:
		if (to_u64(v, &u) < 0 || u < 1 || u > SIM_MAX_RUNS)
			return why_set(why, wn, "'%s' is not a count from 1 to %d", v, SIM_MAX_RUNS);
		*(uint64_t *)p = u;
		return 0;
	case OT_U64:
		if (to_u64(v, &u) < 0)
			return why_set(why, wn, "'%s' is not an unsigned 64-bit integer", v);
		*(uint64_t *)p = u;
		return 0;
	case OT_HOURS:
		if (to_double(v, &x, 0) < 0 || !(x > 0) || x > 1e6)
			return why_set(why, wn, "'%s' is not a number of hours > 0 and <= 1e6", v);
		*(double *)p = x;
		return 0;
	case OT_MTBF:
		if (!strcmp(v, "llama3"))
			x = LLAMA3_MTBF_GPU_H;
		else if (to_double(v, &x, 1) < 0 || !(x > 0))
			return why_set(why, wn, "'%s' is not a number of hours > 0, llama3 or inf", v);
		*(double *)p = x;
		return 0;
	case OT_FRAC:
		if (to_double(v, &x, 0) < 0 || !(x >= 0 && x <= 1))
			return why_set(why, wn, "'%s' is not a fraction from 0 to 1", v);
		*(double *)p = x;
		return 0;
	case OT_SECONDS:
		if (to_double(v, &x, 0) < 0 || !(x >= 0) || x > 1e7)
			return why_set(why, wn, "'%s' is not a number of seconds >= 0 and <= 1e7", v);
		*(double *)p = x;
		return 0;
	case OT_SIZE:
		if (to_size(v, &u) < 0 || !u)
			return why_set(why, wn, "'%s' is not a size > 0 (e.g. 4G)", v);
		*(uint64_t *)p = u;
		return 0;
	case OT_BW:
	case OT_BW0:
		if (to_bw(v, &x) < 0 || x < 0 || (d->type == OT_BW && !(x > 0)))
			return why_set(why, wn, "'%s' is not a bandwidth %s (e.g. 2GiB, 500MB)", v,
			               d->type == OT_BW ? "> 0" : ">= 0");
		*(double *)p = x;
		return 0;
	case OT_INTERVAL:
		if (parse_interval(v, &x) < 0)
			return why_set(why, wn, "'%s' is neither minutes > 0 nor auto", v);
		*(double *)p = x;
		return 0;
	case OT_PATH:
		if (!*v)
			return why_set(why, wn, "empty path");
		*(const char **)p = v;
		return 0;
	case OT_FLAG:
		*(int *)p = 1;
		return 0;
	case OT_SCHEMES:
		return parse_schemes(v, o, why, wn);
	case OT_AUTO_SECONDS:
		if (!strcmp(v, "auto")) {
			*(double *)p = -1;
			return 0;
		}
		if (to_double(v, &x, 0) < 0 || !(x >= 0) || x > 1e7)
			return why_set(why, wn, "'%s' is neither a number of seconds >= 0 and <= 1e7 nor auto", v);
		*(double *)p = x;
		return 0;
	case OT_SPARES:
		if (!strcmp(v, "auto")) {
			*(uint64_t *)p = UINT64_MAX;
			return 0;
		}
		if (to_u64(v, &u) < 0 || u > SIM_MAX_SPARES)
			return why_set(why, wn, "'%s' is neither a count from 0 to %d nor auto", v, SIM_MAX_SPARES);
		*(uint64_t *)p = u;
		return 0;
	case OT_HELP:
		return 0;
	}
	return why_set(why, wn, "unhandled option type");
}

/* Returns 0, 1 for --help, or -1 (reported). */
static int parse_args(int argc, char **argv, sim_opts *o)
{
	char why[256];
	memset(o, 0, sizeof(*o));
	o->restart_s = -1; /* the phases, unless --restart-s */
	for (unsigned i = 0; i < NOPTS; i++)
		if (opt_table[i].def && set_option(&opt_table[i], opt_table[i].def, o, why, sizeof(why)) < 0) {
			fprintf(stderr, "ckpt-sim: default of --%s: %s\n", opt_table[i].name, why);
			return -1;
		}
	struct option lo[NOPTS + 1];
	for (unsigned i = 0; i < NOPTS; i++) {
		int bare = opt_table[i].type == OT_FLAG || opt_table[i].type == OT_HELP;
		lo[i] = (struct option){ opt_table[i].name, bare ? no_argument : required_argument, NULL, (int)(256 + i) };
	}
	lo[NOPTS] = (struct option){ 0 };
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
		if (c == '?' || c == ':') {
			const char *arg = argv[optind - 1];
			if (c == ':')
				fprintf(stderr, "ckpt-sim: %s: a value is required\n", arg);
			else
				fprintf(stderr, "ckpt-sim: %s: unknown option (see --help)\n", arg);
			return -1;
		}
		const opt_def *d = &opt_table[c - 256];
		if (d->type == OT_HELP)
			return 1;
		if (set_option(d, optarg, o, why, sizeof(why)) < 0) {
			fprintf(stderr, "ckpt-sim: --%s: %s\n", d->name, why);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ckpt-sim: unexpected argument '%s' (see --help)\n", argv[optind]);
		return -1;
	}
	return 0;
}

/* ---- the model's inputs for one strategy at one GPU count ---------------- */

typedef struct cell {
	sim_strategy s;
	const sim_spec *spec;
	uint64_t gpus, nodes;
	double job_mtbf_s;
	int auto_interval;
	/* Per failure class: seconds from a save's start until it would be
	 * restorable after that failure, and the restore time. */
	double durable[SIM_FAIL_COUNT], restore[SIM_FAIL_COUNT];
	sim_restart rs;
	/* Over the runs. */
	double gp_sum, gp_min, gp_max;
	double lost[4]; /* stall, recompute, restore, restart: fractions summed */
	double failures, saves, emergency;
	double by_class[SIM_FAIL_COUNT];
	double phase[SIM_R_COUNT]; /* restart seconds by phase, summed over the runs */
	double hangs, staged, no_spare;
} cell;

/* A strategy's name in the tables: "remote", "ckpt tiers", "ckpt rs:8+2". */
static const char *kind_label(const sim_spec *sp, char *buf, size_t n)
{
	if (sp->kind == KIND_REMOTE)
		return "remote";
	if (!sp->k)
		return "ckpt tiers";
	snprintf(buf, n, "ckpt rs:%u+%u", sp->k, sp->m);
	return buf;
}

static const char *kind_name(enum sim_kind k)
{
	return k == KIND_REMOTE ? "remote" : "ckpt";
}

/* Remote bandwidth one node gets when every node of the job reads or
 * writes at once. */
static double per_node(double node_bw, double total_bw, uint64_t nodes)
{
	double share = total_bw > 0 ? total_bw / (double)nodes : HUGE_VAL;
	return node_bw < share ? node_bw : share;
}

/* The restart of one cell: ckpt's phases for ckpt strategies (its
 * detection; its spare pulling the lost state), the launcher's detection
 * for remote storage; the same spares and outside phases for both. */
static void build_restart(const sim_opts *o, cell *c, double node_bytes)
{
	sim_restart *r = &c->rs;
	if (o->restart_s >= 0) {
		sim_restart_flat(r, o->restart_s);
		return;
	}
	int ckpt = c->spec->kind == KIND_CKPT;
	*r = (sim_restart){
		.detect_s = ckpt ? o->detect_s : o->base_detect_s,
		.hang_detect_s = ckpt ? o->hang_detect_s : o->base_hang_detect_s,
		.hang_frac = o->hang_frac,
		.spare_s = o->spare_s,
		.stage_s = ckpt && o->stage_eff > 0 ? node_bytes / (o->peer_bw * (double)o->gpus_per_node * o->stage_eff) + 1 : 0,
		.sched_s = o->sched_s,
		.start_s = o->start_s,
		.comm_s = o->comm_s >= 0 ? o->comm_s : 265.0 * (double)c->gpus / 98304.0,
		.warmup_s = o->warmup_s,
		.spare_return_s = o->spare_return_h * 3600,
		.no_spare_s = o->no_spare_s,
	};
	uint64_t sp = o->spares != UINT64_MAX ? o->spares : (c->nodes + 99) / 100;
	if (o->spares == UINT64_MAX && sp < 2)
		sp = 2;
	r->spares = (unsigned)(sp > SIM_MAX_SPARES ? SIM_MAX_SPARES : sp);
}

static int build_cell(const sim_opts *o, const sim_bench *bench, const sim_spec *sp, uint64_t gpus, cell *c,
                      char *why, size_t wn)
{
	memset(c, 0, sizeof(*c));
	c->spec = sp;
	c->gpus = gpus;
	c->nodes = (gpus + o->gpus_per_node - 1) / o->gpus_per_node;
	c->job_mtbf_s = o->mtbf_gpu_h * 3600.0 / (double)gpus;
	sim_strategy *s = &c->s;
	char lab[32];
	double state = (double)o->state_bytes;
	/* A node writes what its GPUs hold; a partly filled last node is
	 * counted full: the job waits for its slowest node. */
	double node_bytes = state * (double)(gpus < o->gpus_per_node ? gpus : o->gpus_per_node);
	double wr = per_node(o->remote_write_bw, o->remote_total_bw, c->nodes);
	double rd = per_node(o->remote_read_bw, o->remote_total_bw, c->nodes);
	double remote_read = node_bytes / rd;
	if (sp->kind == KIND_REMOTE) {
		/* torch.save to a shared filesystem: training waits for the write. */
		s->stall_s = node_bytes / wr;
		s->tier[SIM_TIER_SHARED] = (sim_tier_cost){ .present = 1, .durable_s = s->stall_s, .read_s = remote_read };
	} else {
		double local_durable, local_read;
		if (bench) {
			double k = state / (double)bench->bytes;
			s->stall_s = bench->stall_s * k;
			local_durable = bench->durable_s * k;
			local_read = bench->restore_s * k;
		} else {
			s->stall_s = state / o->snapshot_bw;
			local_durable = s->stall_s;
			local_read = state / o->local_read_bw;
		}
		/* Partner copies send the state once and read it back once; rs:K+M
		 * sends M times the state (a slice to each parity holder) and a
		 * lost node's rebuild reads K times it (K pieces of each slice). */
		double peer = state / o->peer_bw;
		double send = sp->k ? sp->m * peer : peer, back = sp->k ? sp->k * peer : peer;
		s->tier[SIM_TIER_LOCAL] = (sim_tier_cost){ .present = 1, .durable_s = local_durable, .read_s = local_read };
		s->tier[SIM_TIER_PEER] = (sim_tier_cost){ .present = 1, .durable_s = s->stall_s + send, .read_s = back };
		s->peer_tolerance = sp->k ? sp->m : 1;
		s->tier[SIM_TIER_SHARED] = (sim_tier_cost){ .present = 1, .flush_s = node_bytes / wr,
		                                            .read_s = remote_read };
	}
	double minutes = sp->has_interval ? sp->interval_min : o->interval_min;
	if (minutes > 0) {
		s->interval_s = minutes * 60;
		snprintf(s->name, sizeof(s->name), "%s every %g min", kind_label(sp, lab, sizeof(lab)), minutes);
	} else {
		c->auto_interval = 1;
		s->interval_s = sim_daly_interval(s->stall_s, c->job_mtbf_s);
		if (!(s->interval_s > 0))
			return why_set(why, wn, "no Young/Daly interval without failures: give minutes, or a finite "
			                        "--mtbf-gpu-hours");
		/* Saves closer than the pipelined tiers take would wait on each
		 * other (one version in the staging pool). */
		for (int j = 0; j < SIM_TIER_COUNT; j++)
			if (s->tier[j].present && !(s->tier[j].flush_s > 0) &&
			    s->tier[j].durable_s - s->stall_s > s->interval_s)
				s->interval_s = s->tier[j].durable_s - s->stall_s;
		snprintf(s->name, sizeof(s->name), "%s, Young/Daly", kind_label(sp, lab, sizeof(lab)));
	}
	/* Each save is a few events: bound a run's work, not the model. */
	if (o->hours * 3600 / s->interval_s > SIM_MAX_SAVES)
		return why_set(why, wn, "%s at %" PRIu64 " GPUs: %.3g s between saves over %g h is more than %.0e saves "
		               "per run", s->name, gpus, s->interval_s, o->hours, SIM_MAX_SAVES);
	for (int k = 0; k < SIM_FAIL_COUNT; k++) {
		c->durable[k] = c->restore[k] = HUGE_VAL;
		for (int j = 0; j < SIM_TIER_COUNT; j++) {
			const sim_tier_cost *t = &s->tier[j];
			if (!t->present || !sim_strategy_survives(&c->s, j, k))
				continue;
			double d = t->flush_s > 0 ? s->stall_s + t->flush_s : t->durable_s;
			if (d < c->durable[k])
				c->durable[k] = d;
			if (t->read_s < c->restore[k])
				c->restore[k] = t->read_s;
		}
	}
	build_restart(o, c, node_bytes);
	c->gp_min = HUGE_VAL;
	c->gp_max = -HUGE_VAL;
	return 0;
}

static int run_cell(const sim_opts *o, cell *c)
{
	sim_failures f = {
		.rate_per_s = isinf(o->mtbf_gpu_h) ? 0 : 1.0 / c->job_mtbf_s,
		.node_loss_frac = o->node_loss_frac,
		.partner_loss_frac = o->partner_loss_frac,
		.preempt_frac = o->preempt_frac,
		.preempt_notice_s = o->preempt_notice_s,
	};
	double wall = o->hours * 3600;
	for (uint64_t r = 0; r < o->runs; r++) {
		sim_result res;
		if (sim_run_phased(&c->s, &f, &c->rs, wall, sim_cell_seed(o->seed, c->gpus, r), &res) < 0)
			return -1;
		for (int k = 0; k < SIM_R_COUNT; k++)
			c->phase[k] += res.restart_phase_s[k];
		c->hangs += (double)res.hangs;
		c->staged += (double)res.staged;
		c->no_spare += (double)res.no_spare;
		double gp = res.useful_s / wall;
		c->gp_sum += gp;
		c->gp_min = gp < c->gp_min ? gp : c->gp_min;
		c->gp_max = gp > c->gp_max ? gp : c->gp_max;
		c->lost[0] += res.stall_s / wall;
		c->lost[1] += res.recompute_s / wall;
		c->lost[2] += res.restore_s / wall;
		c->lost[3] += res.restart_s / wall;
		c->failures += (double)res.failures;
		c->saves += (double)res.saves;
		c->emergency += (double)res.emergency_saves;
		for (int k = 0; k < SIM_FAIL_COUNT; k++)
			c->by_class[k] += (double)res.by_class[k];
	}
	return 0;
}

/* ---- output ------------------------------------------------------------- */

static const char *mtbf_source(const sim_opts *o, char *buf, size_t n)
{
	if (isinf(o->mtbf_gpu_h))
		snprintf(buf, n, "no failures (--mtbf-gpu-hours inf)");
	else if (o->mtbf_gpu_h == LLAMA3_MTBF_GPU_H)
		snprintf(buf, n, "MTBF %.0f GPU-hours = 54 days x 24 h x 16,384 GPUs / 419 unexpected interruptions "
		                 "(Llama 3 paper), Poisson, rate linear in GPU count", o->mtbf_gpu_h);
	else
		snprintf(buf, n, "MTBF %g GPU-hours (--mtbf-gpu-hours), Poisson, rate linear in GPU count",
		         o->mtbf_gpu_h);
	return buf;
}

/* Seconds with one decimal, or "-" when no tier outlives that failure. */
static const char *secs(double s, char *buf, size_t n)
{
	if (isinf(s))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.1f", s);
	return buf;
}

static void print_tables(const sim_opts *o, const sim_bench *bench, cell *cells, unsigned ncells)
{
	char src[256];
	double runs = (double)o->runs;
	printf("ckpt-sim: %g h of wall time per run, %" PRIu64 " runs (seed %" PRIu64 "), %.2f GiB of state per GPU, "
	       "%" PRIu64 " GPUs per node\n",
	       o->hours, o->runs, o->seed, (double)o->state_bytes / GIB, o->gpus_per_node);
	printf("failures: %s\n", mtbf_source(o, src, sizeof(src)));
	printf("  %.1f%% lose a node, %.1f%% of those its partner too; %.1f%% are preemptions with %g s notice; ",
	       100 * o->node_loss_frac, 100 * o->partner_loss_frac, 100 * o->preempt_frac, o->preempt_notice_s);
	if (o->restart_s >= 0)
		printf("restart %g s\n", o->restart_s);
	else
		printf("%.1f%% of the others hang\nrestart, phase by phase: detect %g s (hang %g s; remote storage: the "
		       "launcher's %g s, hang %g s), spare %g s, sched %g s, start %g s, comm %s, warm-up %g s; spares %s, "
		       "back after %g h, else %g s for a new node\n",
		       100 * o->hang_frac, o->detect_s, o->hang_detect_s, o->base_detect_s, o->base_hang_detect_s, o->spare_s,
		       o->sched_s, o->start_s, o->comm_s >= 0 ? "as given" : "265 s x GPUs / 98,304", o->warmup_s,
		       o->spares == UINT64_MAX ? "1% of nodes (at least 2)" : "as given", o->spare_return_h, o->no_spare_s);
	printf("remote storage per node: write %.2f GiB/s, read %.2f GiB/s; ", o->remote_write_bw / GIB,
	       o->remote_read_bw / GIB);
	if (o->remote_total_bw > 0)
		printf("whole job at most %.1f GiB/s, shared by its nodes\n", o->remote_total_bw / GIB);
	else
		printf("no cap for the whole job\n");
	if (bench)
		printf("ckpt tiers: stall, local durable and restore from %s (ckpt-bench, %.2f GiB: stall %.3f s, "
		       "durable %.3f s, restore %.3f s), scaled x%.2f; peer %.2f GiB/s per GPU\n",
		       o->from_bench, (double)bench->bytes / GIB, bench->stall_s, bench->durable_s, bench->restore_s,
		       (double)o->state_bytes / (double)bench->bytes, o->peer_bw / GIB);
	else
		printf("ckpt tiers per GPU: snapshot %.2f GiB/s, restore from node DRAM %.2f GiB/s, partner DRAM "
		       "%.2f GiB/s\n",
		       o->snapshot_bw / GIB, o->local_read_bw / GIB, o->peer_bw / GIB);

	printf("\n%57s%-23s  %s\n", "", "durable after a failure:", "restore after a failure:");
	printf("%-30s %5s  %8s  %7s  %7s %7s %7s  %7s %7s %7s\n", "costs, seconds", "GPUs", "job MTBF", "stall",
	       "crash", "node", "both", "crash", "node", "both");
	for (unsigned i = 0; i < ncells; i++) {
		cell *c = &cells[i];
		char d[3][32], r[3][32];
		for (int k = 0; k < 3; k++) {
			secs(c->durable[k], d[k], sizeof(d[k]));
			secs(c->restore[k], r[k], sizeof(r[k]));
		}
		char mt[32];
		if (isinf(c->job_mtbf_s))
			snprintf(mt, sizeof(mt), "inf");
		else
			snprintf(mt, sizeof(mt), "%.1f h", c->job_mtbf_s / 3600);
		printf("%-30s %5" PRIu64 "  %8s  %7.2f  %7s %7s %7s  %7s %7s %7s\n", c->s.name, c->gpus, mt, c->s.stall_s,
		       d[0], d[1], d[2], r[0], r[1], r[2]);
	}
	printf("(crash: processes die, nodes stay; node: a node is lost; both: a node and its partner are lost)\n");

	printf("\n%74s%s\n", "", "lost, % of wall time:");
	printf("%-30s %5s  %8s  %-24s  %6s %9s %7s %7s  %12s\n", "goodput", "GPUs", "interval", "goodput % (min - max)",
	       "stall", "recompute", "restore", "restart", "failures/run");
	for (unsigned i = 0; i < ncells; i++) {
		cell *c = &cells[i];
		char range[64], iv[32];
		snprintf(range, sizeof(range), "%.2f (%.2f - %.2f)", 100 * c->gp_sum / runs, 100 * c->gp_min,
		         100 * c->gp_max);
		snprintf(iv, sizeof(iv), "%.1f min", c->s.interval_s / 60);
		printf("%-30s %5" PRIu64 "  %8s  %-24s  %6.2f %9.2f %7.2f %7.2f  %12.1f\n", c->s.name, c->gpus, iv, range,
		       100 * c->lost[0] / runs, 100 * c->lost[1] / runs, 100 * c->lost[2] / runs, 100 * c->lost[3] / runs,
		       c->failures / runs);
	}
	if (o->restart_s >= 0)
		return;
	double wall = o->hours * 3600;
	printf("\n%45s%s\n", "", "restart after a failure, seconds (mean per failure):");
	printf("%-30s %5s  %7s %7s %7s %7s %7s %7s %7s  %7s  %7s %7s  %6s %7s\n", "recovery", "GPUs", "detect", "spare",
	       "sched", "start", "comm", "warm-up", "restore", "total", "ft+state", "relaunch", "spares", "staged");
	for (unsigned i = 0; i < ncells; i++) {
		cell *c = &cells[i];
		double n = c->failures > 0 ? c->failures : 1, p[SIM_R_COUNT];
		for (int k = 0; k < SIM_R_COUNT; k++)
			p[k] = c->phase[k] / n;
		double restore = c->lost[2] * wall / n;
		double ours = p[SIM_R_DETECT] + p[SIM_R_SPARE] + restore;
		double theirs = p[SIM_R_SCHED] + p[SIM_R_START] + p[SIM_R_COMM] + p[SIM_R_WARMUP];
		double losses = c->by_class[SIM_FAIL_NODE] + c->by_class[SIM_FAIL_NODE2] + c->by_class[SIM_FAIL_PREEMPT];
		char st[32];
		snprintf(st, sizeof(st), "%.0f%%", losses > 0 ? 100 * c->staged / losses : 0);
		printf("%-30s %5" PRIu64 "  %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f  %7.2f  %7.2f %7.2f  %6u %7s\n",
		       c->s.name, c->gpus, p[SIM_R_DETECT], p[SIM_R_SPARE], p[SIM_R_SCHED], p[SIM_R_START], p[SIM_R_COMM],
		       p[SIM_R_WARMUP], restore, ours + theirs, ours, theirs, c->rs.spares, st);
	}
	printf("(ft+state: detect + spare + restore, what ckpt does for its strategies; relaunch: the launcher, process\n"
	       " start, communicators, warm-up; staged: node losses whose state a spare held before the relaunch,\n"
	       " restored from its node DRAM)\n");
}

/* A real, or null where it is not finite (JSON has no infinity). */
static json_t *jnum(double d)
{
	return isfinite(d) ? json_real(d) : json_null();
}

static json_t *by_class(const double *v, double div)
{
	return json_pack("{s:o, s:o, s:o, s:o}", "crash", jnum(v[SIM_FAIL_CRASH] / div), "node",
	                 jnum(v[SIM_FAIL_NODE] / div), "node_and_partner", jnum(v[SIM_FAIL_NODE2] / div), "preempt",
	                 jnum(v[SIM_FAIL_PREEMPT] / div));
}

/* Builds the --json report; NULL when out of memory. */
static json_t *report_json(const sim_opts *o, const sim_bench *bench, cell *cells, unsigned ncells)
{
	char src[256];
	double runs = (double)o->runs;
	json_t *model = json_pack(
		"{s:f, s:I, s:I, s:I, s:o, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
		"hours", o->hours, "runs", (json_int_t)o->runs, "state_per_gpu_bytes",
		(json_int_t)o->state_bytes, "gpus_per_node", (json_int_t)o->gpus_per_node, "mtbf_gpu_hours",
		jnum(o->mtbf_gpu_h), "mtbf_source", mtbf_source(o, src, sizeof(src)), "node_loss_frac",
		o->node_loss_frac, "partner_loss_frac", o->partner_loss_frac, "preempt_frac", o->preempt_frac,
		"preempt_notice_s", o->preempt_notice_s, "restart_s", o->restart_s, "remote_write_bw",
		o->remote_write_bw, "remote_read_bw", o->remote_read_bw, "remote_total_bw", o->remote_total_bw,
		"snapshot_bw", o->snapshot_bw, "local_read_bw", o->local_read_bw, "peer_bw", o->peer_bw);
	if (!model)
		return NULL;
	/* The seed as a string: a u64 may not fit JSON integers (jansson's
	 * are signed 64-bit). */
	char seed[32];
	snprintf(seed, sizeof(seed), "%" PRIu64, o->seed);
	json_object_set_new(model, "seed", json_string(seed));
	if (o->restart_s < 0)
		json_object_set_new(model, "restart_phases", json_pack(
			"{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:f, s:o, s:f, s:f}", "detect_s", o->detect_s,
			"hang_detect_s", o->hang_detect_s, "baseline_detect_s", o->base_detect_s, "baseline_hang_detect_s",
			o->base_hang_detect_s, "hang_frac", o->hang_frac, "spare_s", o->spare_s, "stage_eff", o->stage_eff,
			"sched_s", o->sched_s, "comm_s", o->comm_s >= 0 ? json_real(o->comm_s) : json_string("auto"),
			"start_s", o->start_s, "spares", o->spares == UINT64_MAX ? json_string("auto")
			                                                        : json_integer((json_int_t)o->spares),
			"spare_return_hours", o->spare_return_h, "no_spare_s", o->no_spare_s));
	if (bench)
		json_object_set_new(model, "from_bench",
		                    json_pack("{s:s, s:I, s:f, s:f, s:f}", "file", o->from_bench, "bytes",
		                              (json_int_t)bench->bytes, "stall_s", bench->stall_s, "durable_s",
		                              bench->durable_s, "restore_s", bench->restore_s));
	else
		json_object_set_new(model, "from_bench", json_null());
	json_t *results = json_array();
	for (unsigned i = 0; results && i < ncells; i++) {
		cell *c = &cells[i];
		json_t *row = json_pack(
			"{s:s, s:s, s:I, s:I, s:o, s:f, s:b, s:f, s:o, s:o, s:{s:f, s:f, s:f}, "
			"s:{s:f, s:f, s:f, s:f}, s:f, s:f, s:f, s:o}",
			"strategy", c->s.name, "kind", kind_name(c->spec->kind), "gpus", (json_int_t)c->gpus, "nodes",
			(json_int_t)c->nodes, "job_mtbf_s", jnum(c->job_mtbf_s), "interval_s", c->s.interval_s,
			"interval_auto", c->auto_interval, "stall_s", c->s.stall_s, "durable_s", by_class(c->durable, 1),
			"restore_s", by_class(c->restore, 1), "goodput", "mean", c->gp_sum / runs, "min", c->gp_min, "max",
			c->gp_max, "lost", "stall", c->lost[0] / runs, "recompute", c->lost[1] / runs, "restore",
			c->lost[2] / runs, "restart", c->lost[3] / runs, "failures_per_run", c->failures / runs,
			"saves_per_run", c->saves / runs, "emergency_saves_per_run", c->emergency / runs,
			"failures_by_class_per_run", by_class(c->by_class, runs));
		if (row) {
			/* Seconds per failure, by phase (sim.h), the restore with them. */
			static const char *const names[SIM_R_COUNT] = { "detect", "spare", "sched", "start", "comm", "warmup" };
			double n = c->failures > 0 ? c->failures : 1;
			json_t *ph = json_object();
			for (int k = 0; ph && k < SIM_R_COUNT; k++)
				json_object_set_new(ph, names[k], json_real(c->phase[k] / n));
			if (ph) {
				json_object_set_new(ph, "restore", json_real(c->lost[2] * o->hours * 3600 / n));
				json_object_set_new(ph, "spares", json_integer(c->rs.spares));
				json_object_set_new(ph, "stage_s", json_real(c->rs.stage_s));
				json_object_set_new(ph, "staged_per_run", json_real(c->staged / runs));
				json_object_set_new(ph, "no_spare_per_run", json_real(c->no_spare / runs));
				json_object_set_new(ph, "hangs_per_run", json_real(c->hangs / runs));
				json_object_set_new(row, "restart_per_failure_s", ph);
			}
		}
		if (!row || json_array_append_new(results, row) < 0) {
			json_decref(results);
			results = NULL;
		}
	}
	if (!results) {
		json_decref(model);
		return NULL;
	}
	return json_pack("{s:o, s:o}", "model", model, "results", results);
}

/* The peer schemes' table: per GPU count and scheme, what a node holds
 * and sends, and how likely a version is lost from peer DRAM. */
static void print_schemes(const sim_opts *o)
{
	double node_rate = isinf(o->mtbf_gpu_h) ? 0 : (double)o->gpus_per_node * o->node_loss_frac / (o->mtbf_gpu_h * 3600);
	printf("\npeer schemes: nodes lost at %.3g per node-hour (%.1f%% of them with a second node that hurts), a "
	       "failure domain of %" PRIu64 " nodes lost every %g h, protected again %g s after a loss, a version the "
	       "restore point for %g s\n",
	       node_rate * 3600, 100 * o->partner_loss_frac, o->domain_nodes, o->domain_mtbf_h, o->reprotect_s,
	       o->version_life_s);
	printf("%6s  %-9s %10s %10s %12s  %12s %22s\n", "GPUs", "scheme", "DRAM/node", "sent/node", "rebuild read",
	       "P(lost)/ver", "Monte Carlo (10^6)");
	for (unsigned g = 0; g < o->ngpus; g++)
		for (unsigned i = 0; i < o->nschemes; i++) {
			const sim_scheme *sc = &o->schemes[i];
			sim_ec_model mo = { .nodes = (o->gpus[g] + o->gpus_per_node - 1) / o->gpus_per_node,
				            .domain_nodes = o->domain_nodes,
				            .node_rate = node_rate,
				            .pair_frac = o->partner_loss_frac,
				            .domain_rate = 1 / (o->domain_mtbf_h * 3600),
				            .reprotect_s = o->reprotect_s,
				            .window_s = o->version_life_s };
			char name[16], pl[32], mc[48];
			if (sc->k)
				snprintf(name, sizeof(name), "rs:%u+%u", sc->k, sc->m);
			else
				snprintf(name, sizeof(name), "partner");
			double p = sim_scheme_loss(sc, &mo);
			uint64_t lost = 0;
			double q = sim_scheme_loss_mc(sc, &mo, 1000000, sim_cell_seed(o->seed, o->gpus[g], i), &lost);
			if (p < 0) {
				snprintf(pl, sizeof(pl), "too few domains");
				snprintf(mc, sizeof(mc), "-");
			} else {
				snprintf(pl, sizeof(pl), "%.2e", p);
				if (lost)
					snprintf(mc, sizeof(mc), "%.2e (%" PRIu64 " lost)", q, lost);
				else
					snprintf(mc, sizeof(mc), "< 3e-06 (none lost)");
			}
			printf("%6" PRIu64 "  %-9s %9.2fx %9.2fx %11.2fx  %12s %22s\n", o->gpus[g], name,
			       sim_scheme_memory(sc), sim_scheme_wire(sc), sim_scheme_rebuild(sc), pl, mc);
		}
	printf("(x: times a node's shard; rebuild read: fabric bytes read to rebuild one lost node)\n");
}

int main(int argc, char **argv)
{
	sim_opts o;
	int p = parse_args(argc, argv, &o);
	if (p == 1) {
		usage(stdout);
		return 0;
	}
	if (p < 0)
		return 2;
	sim_bench bench, *bp = NULL;
	if (o.from_bench) {
		char err[256];
		if (sim_bench_load(o.from_bench, &bench, err, sizeof(err)) < 0) {
			fprintf(stderr, "ckpt-sim: --from-bench %s: %s\n", o.from_bench, err);
			return 2;
		}
		bp = &bench;
	}
	unsigned ncells = o.ngpus * o.nspecs;
	cell *cells = calloc(ncells, sizeof(*cells));
	if (!cells) {
		fprintf(stderr, "ckpt-sim: out of memory\n");
		return 1;
	}
	int rc = 1;
	/* GPU count outermost: strategies of one count sit together. */
	for (unsigned g = 0; g < o.ngpus; g++)
		for (unsigned i = 0; i < o.nspecs; i++) {
			cell *c = &cells[g * o.nspecs + i];
			char why[256];
			if (build_cell(&o, bp, &o.specs[i], o.gpus[g], c, why, sizeof(why)) < 0) {
				fprintf(stderr, "ckpt-sim: --interval: %s\n", why);
				rc = 2;
				goto out;
			}
			if (run_cell(&o, c) < 0) {
				fprintf(stderr, "ckpt-sim: %s at %" PRIu64 " GPUs: the model refused its inputs\n", c->s.name,
				        c->gpus);
				goto out;
			}
		}
	json_t *rep = NULL;
	char *text = NULL;
	if (o.json || o.plot) {
		rep = report_json(&o, bp, cells, ncells);
		text = rep ? json_dumps(rep, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) : NULL;
		if (!text) {
			fprintf(stderr, "ckpt-sim: out of memory building the report\n");
			json_decref(rep);
			goto out;
		}
	}
	if (o.json)
		printf("%s\n", text);
	else
		print_tables(&o, bp, cells, ncells);
	if (!o.json && o.nschemes)
		print_schemes(&o);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "ckpt-sim: writing the output: %s\n", strerror(errno));
	} else if (!o.plot || sim_plot(o.plot, text) == 0) {
		rc = 0;
	}
	free(text);
	json_decref(rep);
out:
	free(cells);
	return rc;
}
