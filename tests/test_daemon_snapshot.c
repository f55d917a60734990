/* The snapshot of a save with LOCAL_MEM goes straight into the ckptd agent's
 * segment, and the DRAM copy is reported before the disk is done:
 *
 *  1. A rank saves v1 (lazy, with a staging pool of one slot and the skip
 *     policy: the save could not even start through staging) and sees it
 *     committed in DRAM and on disk, both tiers at the coordinator. Its
 *     next save, v2, is killed with every chunk checksummed but before its
 *     DRAM copy is reported (save.before_mem_report). With every shard file
 *     deleted, a new process restores v1 from DRAM, bit-exact; v2 is never
 *     offered.
 *  2. Another rank saves v3 (compressed on disk) and is killed after the
 *     footer write, before fdatasync: the disk copy never got its name, but
 *     the DRAM copy was complete and is committed. With the files deleted
 *     again, a new process restores v3 from DRAM, bit-exact.
 *  3. Saves back to back, faster than a slow disk (io depth 1), into an
 *     agent whose pool holds about two versions: DRAM copies are reported
 *     while disk writes still read them, and the agent evicts old versions
 *     to make room. Every save commits on disk, and every disk file
 *     restores bit-exact (a segment reused under a disk write would show).
 * Public API and the installed tools only, plus starting the daemon. */
#include "daemon_test.h"

#include <ckpt.h>

#define JOB "dsnap"
#define NREG 2
static const size_t sizes[NREG] = { 3u << 20, (1u << 20) + 5000 };

/* Region 0 random, region 1 mostly zeros (it compresses). */
static void fill(uint8_t **bufs, uint64_t seed)
{
	t_fill(bufs[0], sizes[0], seed);
	memset(bufs[1], 0, sizes[1]);
	t_fill(bufs[1] + 4096, 8192, seed + 1);
}

static ckpt_ctx *open_ctx(const dt_env *e, uint8_t **bufs, int compress, const char *faults)
{
	ckpt_config cfg;
	dt_config(&cfg, e, JOB);
	/* One slot: a staged save of 5 chunks would be refused (ETOOBIG). */
	cfg.staging_bytes = 1u << 20;
	cfg.pool_policy = CKPT_POOL_SKIP;
	cfg.compress = compress;
	cfg.daemon_required = 1;
	cfg.faults = faults;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	for (int i = 0; i < NREG; i++) {
		ckpt_region_desc d;
		char name[16];
		snprintf(name, sizeof(name), "r%d", i);
		ckpt_region_desc_init(&d, name, bufs[i], sizes[i]);
		if (i == 1) {
			d.dtype = CKPT_DTYPE_U8;
			d.ndim = 1;
			d.global_shape[0] = d.extents[0] = sizes[i];
		}
		T_OK(ckpt_region_add(ctx, &d));
	}
	return ctx;
}

static void saver_a(const dt_env *e)
{
	uint8_t *bufs[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	fill(bufs, 1);
	/* The second save (v2) dies before its DRAM copy is reported. */
	ckpt_ctx *ctx = open_ctx(e, bufs, 0, "save.before_mem_report=2@kill");
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 1, CKPT_SAVE_LAZY, &h));
	T_OK(ckpt_fence(ctx));
	ckpt_status st = { .size = sizeof(st) };
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 30000, &st));
	T_ASSERT(st.tier == CKPT_TIER_LOCAL_MEM && st.error == 0 && st.committed == 1);
	/* The DRAM copy is the uncompressed image: at least header + data. */
	T_ASSERT(st.stored_bytes > 4096 + sizes[0] + sizes[1]);
	T_ASSERT(st.durable_ns > 0);
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, &st));
	T_ASSERT(st.committed == 1);
	ckpt_handle_free(h);

	fill(bufs, 2);
	T_OK(ckpt_save(ctx, 2, 0, &h));
	ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 30000, NULL);
	T_FAIL("the save of version 2 should have been killed");
}

static void saver_b(const dt_env *e)
{
	uint8_t *bufs[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	fill(bufs, 3);
	ckpt_ctx *ctx = open_ctx(e, bufs, 1, "save.before_fsync=kill");
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 3, 0, &h));
	/* Either the notice wins the race with the kill, or nothing returns. */
	ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 30000, NULL);
	ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, NULL);
	T_FAIL("the save of version 3 should have been killed");
}

static uint64_t want_version;

static void restorer(const dt_env *e)
{
	uint8_t *bufs[NREG], *want[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	dt_bufs_alloc(want, sizes, NREG);
	fill(want, want_version);
	ckpt_ctx *ctx = open_ctx(e, bufs, 0, NULL);
	dt_restore_expect(ctx, CKPT_LATEST, want_version, bufs, want, sizes, NREG);
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
	dt_bufs_free(want, NREG);
}

#define NOVER 8
static int overlap_compress;

static void overlap_saves(const dt_env *e)
{
	uint8_t *bufs[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = e->root;
	cfg.job_id = "dsnap-o";
	cfg.chunk_bytes = 1u << 20;
	cfg.staging_bytes = 2u << 20;
	cfg.io_depth = 1;
	cfg.compress = overlap_compress;
	cfg.tiers = CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK;
	cfg.daemon = e->addr;
	cfg.token_file = e->tok;
	cfg.daemon_required = 1;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	dt_regions_add(ctx, bufs, sizes, NREG);
	ckpt_handle *h[NOVER + 1];
	uint64_t base = overlap_compress ? 100 : 0;
	for (uint64_t v = 1; v <= NOVER; v++) {
		fill(bufs, 1000 + base + v);
		T_OK(ckpt_save(ctx, base + v, 0, &h[v]));
	}
	int in_dram = 0;
	for (uint64_t v = 1; v <= NOVER; v++) {
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_handle_wait(h[v], CKPT_TIER_LOCAL_DISK, 60000, &st));
		int r = ckpt_handle_wait(h[v], CKPT_TIER_LOCAL_MEM, 60000, &st);
		if (r != 0 && r != -ENOSPC)
			T_FAIL("version %llu: LOCAL_MEM %d (%s)", (unsigned long long)(base + v), r, ckpt_strerror(r));
		in_dram += r == 0;
		ckpt_handle_free(h[v]);
	}
	T_ASSERT(in_dram >= 1);
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
}

/* Every version from its disk file alone (no daemon: no DRAM copy). */
static void overlap_verify(const dt_env *e)
{
	uint8_t *bufs[NREG], *want[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	dt_bufs_alloc(want, sizes, NREG);
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = e->root;
	cfg.job_id = "dsnap-o";
	cfg.chunk_bytes = 1u << 20;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	dt_regions_add(ctx, bufs, sizes, NREG);
	for (uint64_t base = 0; base <= 100; base += 100)
		for (uint64_t v = 1; v <= NOVER; v++) {
			fill(want, 1000 + base + v);
			T_OK(ckpt_restore(ctx, base + v, 0, NULL));
			for (int i = 0; i < NREG; i++)
				if (memcmp(bufs[i], want[i], sizes[i]))
					T_FAIL("version %llu region %d differs", (unsigned long long)(base + v), i);
		}
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
	dt_bufs_free(want, NREG);
}

static void shard_path(const dt_env *e, uint64_t version, int tmp, char *out, size_t cap)
{
	snprintf(out, cap, "%s/jobs/%s/v%020llu/%sr000000.ckpt%s", e->root, JOB, (unsigned long long)version,
	         tmp ? "." : "", tmp ? ".tmp" : "");
}

static void remove_shards(const dt_env *e)
{
	char cmd[800];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/jobs'", e->root);
	T_ASSERT(system(cmd) == 0);
}

static void expect(int cond, dt_env *e, const char *what)
{
	if (!cond) {
		dt_stop(e);
		T_FAIL("%s; daemon log %s", what, e->log);
	}
}

int main(void)
{
	dt_env e;
	char p[800], tiers[128], errlog[700];
	dt_init(&e, "dsnap");
	snprintf(errlog, sizeof(errlog), "%s/rank.err", e.dir);
	dt_start(&e, "64M", 0);

	/* 1. */
	int st = dt_child(saver_a, &e, errlog);
	expect(st == 128 + SIGKILL, &e, "saver A did not die before the DRAM report of version 2");
	expect(dt_count(errlog, "fault point save.before_mem_report: kill") == 1, &e, "saver A died elsewhere");
	shard_path(&e, 2, 0, p, sizeof(p));
	expect(access(p, F_OK) != 0, &e, "version 2 has a complete shard file");
	expect(dt_wait_tier(&e, e.addr, JOB, 1, "local_disk", tiers, sizeof(tiers)) && strstr(tiers, "local_mem"), &e,
	       "version 1 not committed in DRAM and on disk at the coordinator");
	dt_tiers(&e, e.addr, JOB, 2, tiers, sizeof(tiers));
	expect(tiers[0] == 0, &e, "the half-written version 2 is offered");
	remove_shards(&e);
	want_version = 1;
	expect(dt_child(restorer, &e, NULL) == 0, &e, "restore of version 1 from DRAM failed");

	/* 2. */
	st = dt_child(saver_b, &e, errlog);
	expect(st == 128 + SIGKILL, &e, "saver B did not die at save.before_fsync");
	expect(dt_count(errlog, "fault point save.before_fsync: kill") == 1, &e, "saver B died elsewhere");
	shard_path(&e, 3, 0, p, sizeof(p));
	expect(access(p, F_OK) != 0, &e, "version 3 has a complete shard file");
	shard_path(&e, 3, 1, p, sizeof(p));
	expect(access(p, F_OK) == 0, &e, "version 3 has no partial shard file");
	expect(dt_wait_tier(&e, e.addr, JOB, 3, "local_mem", tiers, sizeof(tiers)), &e,
	       "version 3 not committed in DRAM");
	expect(!strstr(tiers, "local_disk"), &e, "version 3 committed on a disk it never reached");
	remove_shards(&e);
	want_version = 3;
	expect(dt_child(restorer, &e, NULL) == 0, &e, "restore of version 3 from DRAM failed");

	/* 3. A pool of about two versions (4.2 MiB images). */
	dt_stop(&e);
	dt_start(&e, "10M", 0);
	for (overlap_compress = 0; overlap_compress <= 1; overlap_compress++)
		expect(dt_child(overlap_saves, &e, NULL) == 0, &e, "back-to-back saves");
	expect(dt_child(overlap_verify, &e, NULL) == 0, &e, "disk files of back-to-back saves");

	dt_stop(&e);
	t_rmrf(e.dir);
	return T_EXIT_PASS;
}
