/* ckptd-coord-bench: the coordinator's figures (docs/benchmarks.md).
 *
 *   ckptd-coord-bench [--worlds N,N,...] [--versions V] [--ranks R] [DIR]
 *
 * Defaults: --worlds 1024,16384 --versions 1000 --ranks 1000 (the figures);
 * the smoke test runs small ones.
 *
 * 1. Commit latency of one version for 1,024 and 16,384 simulated ranks
 *    (8 ranks per node): time from the first SHARD_DONE applied to the one
 *    that commits, with every report its own transaction (1,024 only), one
 *    batch per agent, and batches of 4,096 (a full AGENT list).
 * 2. Listing the versions of a job over an index of 10^6 shard records
 *    (1,000 versions x 1,000 ranks), and a LATEST restore plan. */
#include "coord_test.h"

#include <getopt.h>
#include <time.h>

#define MAX_WORLDS 8

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char (*node_names(uint32_t nodes))[16]
{
	char (*n)[16] = calloc(nodes, sizeof(*n));
	T_ASSERT(n);
	for (uint32_t i = 0; i < nodes; i++)
		snprintf(n[i], sizeof(n[i]), "node%05u", i);
	return n;
}

/* Returns seconds from the first report to the commit; batch 0: one
 * transaction per report. */
static double commit_once(const char *dir, uint32_t world, uint32_t batch)
{
	ckptd_coord *co;
	T_OK(ckptd_coord_open(dir, 0, &co));
	uint32_t nodes = (world + 7) / 8;
	char (*names)[16] = node_names(nodes);
	ckptd_coord_shard *s = calloc(world, sizeof(*s));
	ckptd_coord_result *res = calloc(world, sizeof(*res));
	T_ASSERT(s && res);
	for (uint32_t r = 0; r < world; r++)
		s[r] = (ckptd_coord_shard){ "bench", 1, r, world, CKPT_TIER_LOCAL_MEM, names[r / 8],
		                            1u << 20, r * 2654435761u, 77 };
	uint32_t committed = 0;
	double t0 = now_s();
	if (batch == 0) {
		for (uint32_t r = 0; r < world; r++) {
			uint32_t c;
			T_OK(ckptd_coord_shard_done(co, s[r].job, 1, r, world, s[r].tier, s[r].node,
			                            s[r].bytes, s[r].checksum, s[r].lineage, &c));
			committed |= c;
		}
	} else {
		for (uint32_t r = 0; r < world; r += batch) {
			uint32_t k = world - r < batch ? world - r : batch;
			T_OK(ckptd_coord_shard_done_batch(co, s + r, k, res + r));
			committed |= res[r + k - 1].committed;
		}
	}
	double dt = now_s() - t0;
	T_ASSERT(committed == CKPT_TIER_LOCAL_MEM);
	ckptd_coord_close(co);
	t_rm_db(dir);
	free(s);
	free(res);
	free(names);
	return dt;
}

static int count_fn(void *arg, const ckptd_coord_version *v)
{
	size_t *n = arg;
	*n += v->restorable;
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: ckptd-coord-bench [--worlds N,N,...] [--versions V] [--ranks R] [DIR]\n");
	return 2;
}

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	uint32_t worlds[MAX_WORLDS] = { 1024, 16384 }, versions = 1000, ranks = 1000;
	int nworlds = 2;
	static const struct option lo[] = { { "worlds", 1, 0, 'w' }, { "versions", 1, 0, 'v' },
		                            { "ranks", 1, 0, 'r' }, { 0, 0, 0, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'w') {
			nworlds = 0;
			for (char *tok = strtok(optarg, ","); tok; tok = strtok(NULL, ",")) {
				if (nworlds == MAX_WORLDS || parse_u32(tok, 1, 1u << 20, &worlds[nworlds]) < 0) {
					fprintf(stderr, "ckptd-coord-bench: --worlds: '%s' is not 1..1048576 (at most %d)\n",
					        tok, MAX_WORLDS);
					return 2;
				}
				nworlds++;
			}
		} else if (c == 'v') {
			if (parse_u32(optarg, 1, 1u << 24, &versions) < 0)
				return usage();
		} else if (c == 'r') {
			if (parse_u32(optarg, 1, 1u << 20, &ranks) < 0)
				return usage();
		} else {
			return usage();
		}
	}
	if (argc - optind > 1 || nworlds == 0)
		return usage();
	const char *dirarg = optind < argc ? argv[optind] : NULL;
	char *base = dirarg ? (char *)dirarg : t_tmpdir("coord-bench");
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/db", base);
	for (int i = 0; i < nworlds; i++) {
		uint32_t w = worlds[i];
		if (w <= 1024)
			printf("commit %5u ranks, one txn per SHARD_DONE: %8.1f ms\n", w,
			       1e3 * commit_once(dir, w, 0));
		printf("commit %5u ranks, one batch per agent (8): %8.1f ms\n", w,
		       1e3 * commit_once(dir, w, 8));
		printf("commit %5u ranks, batches of 4096:         %8.1f ms\n", w,
		       1e3 * commit_once(dir, w, 4096));
	}

	/* 10^6 shard records: 1,000 versions of 1,000 ranks (by default). */
	ckptd_coord *co;
	T_OK(ckptd_coord_open(dir, 0, &co));
	char (*names)[16] = node_names(ranks / 8 + 1);
	ckptd_coord_shard *s = calloc(ranks, sizeof(*s));
	T_ASSERT(s);
	double t0 = now_s();
	for (uint64_t v = 1; v <= versions; v++) {
		for (uint32_t r = 0; r < ranks; r++)
			s[r] = (ckptd_coord_shard){ "big", v * 100, r, ranks, CKPT_TIER_LOCAL_DISK,
			                            names[r / 8], 1u << 20, r, 5 };
		T_OK(ckptd_coord_shard_done_batch(co, s, ranks, NULL));
	}
	printf("build: %llu shard records in %.1f s\n", (unsigned long long)versions * ranks, now_s() - t0);
	ckptd_coord_close(co);
	T_OK(ckptd_coord_open(dir, 0, &co)); /* cold handle, warm page cache */
	size_t n = 0;
	t0 = now_s();
	T_OK(ckptd_coord_list(co, "big", 0, count_fn, &n));
	double dt = now_s() - t0;
	T_ASSERT(n == versions);
	printf("list: %zu versions over %llu shard records: %.2f ms\n", n, (unsigned long long)versions * ranks, 1e3 * dt);
	ckptd_coord_plan p;
	t0 = now_s();
	T_OK(ckptd_coord_restore_plan(co, "big", CKPT_LATEST, ranks - 1, NULL, &p));
	printf("restore plan (LATEST, one rank): %.3f ms\n", 1e3 * (now_s() - t0));
	ckptd_coord_close(co);
	free(s);
	free(names);
	/* CKPT_BENCH_KEEP=1: leave the 10^6-record index for tools/bench-ls.sh. */
	if (getenv("CKPT_BENCH_KEEP"))
		printf("kept: %s\n", dir);
	else if (!dirarg)
		t_rmrf(base);
	else
		t_rm_db(dir);
	return 0;
}
