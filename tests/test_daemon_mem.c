/* libckpt joined to a real ckptd (--role both): a save goes to node DRAM
 * (LOCAL_MEM) and disk, both commit; with the shard files deleted, a new
 * process restores from the daemon's DRAM alone, bit-exact.
 * Public API only, plus starting the daemon. */
#include "daemon_test.h"

#include <ckpt.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define JOB "dmem"
#define NREG 2
static const size_t sizes[NREG] = { 3u << 20, (1u << 20) + 5000 };


/* Region 0 random, region 1 mostly zeros: both the stored and the zstd
 * chunk paths are exercised. */
static void fill(uint8_t **bufs, uint64_t seed)
{
	t_fill(bufs[0], sizes[0], seed);
	memset(bufs[1], 0, sizes[1]);
	t_fill(bufs[1] + 4096, 4096, seed + 1);
}

static ckpt_ctx *open_ctx(const dt_env *e, uint8_t **bufs, uint32_t tiers, int with_daemon)
{
	ckpt_config cfg;
	dt_config(&cfg, e, JOB);
	cfg.compress = 1;
	cfg.tiers = tiers;
	cfg.daemon = with_daemon ? e->addr : NULL;
	return dt_open(&cfg, bufs, sizes, NREG);
}

static void rank_save(const dt_env *e)
{
	uint8_t *bufs[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	fill(bufs, 42);
	ckpt_ctx *ctx = open_ctx(e, bufs, CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK, 1);
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 1, 0, &h));
	ckpt_status st = { .size = sizeof(st) };
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, &st));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 30000, &st));
	T_ERR(ckpt_handle_wait(h, CKPT_TIER_SHARED, 0, NULL), -EINVAL);
	ckpt_handle_free(h);
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
}

static void rank_restore(const dt_env *e)
{
	uint8_t *bufs[NREG], *want[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	dt_bufs_alloc(want, sizes, NREG);
	fill(want, 42);
	ckpt_ctx *ctx = open_ctx(e, bufs, CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK, 1);
	dt_restore_expect(ctx, CKPT_LATEST, 1, bufs, want, sizes, NREG);
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
	dt_bufs_free(want, NREG);
}

/* Without a daemon: local_mem is refused, and embedded mode is unchanged. */
static void embedded(const dt_env *e)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = e->root;
	cfg.job_id = JOB "-embedded";
	cfg.tiers = CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK;
	cfg.daemon = NULL;
	ckpt_ctx *ctx = NULL;
	T_ERR(ckpt_ctx_open(&cfg, &ctx), -CKPT_ECONFIG);
	uint8_t b[4096] = { 1 };
	cfg.tiers = CKPT_TIER_LOCAL_DISK;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "b", b, sizeof(b));
	T_OK(ckpt_region_add(ctx, &d));
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_ERR(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 0, NULL), -EINVAL);
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
	ckpt_handle_free(h);
	T_OK(ckpt_ctx_close(ctx));
}

int main(void)
{
	dt_env e;
	dt_init(&e, "dmem");
	embedded(&e);
	dt_start(&e, "64M", 0);
	int st = dt_child(rank_save, &e, NULL);
	if (st != 0) {
		dt_stop(&e);
		T_FAIL("saving rank exited %d; daemon log %s", st, e.log);
	}
	/* Only the daemon's DRAM copy is left. */
	char jobs[700];
	snprintf(jobs, sizeof(jobs), "%s/jobs", e.root);
	char cmd[800];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", jobs);
	T_ASSERT(system(cmd) == 0 && access(jobs, F_OK) != 0);
	st = dt_child(rank_restore, &e, NULL);
	dt_stop(&e);
	if (st != 0)
		T_FAIL("restoring rank exited %d; daemon log %s", st, e.log);
	t_rmrf(e.dir);
	return T_EXIT_PASS;
}
