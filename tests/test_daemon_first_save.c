/* A rank's first save into node DRAM costs what its others do: when its
 * job's pool is ready at registration, the agent hands the pool over with
 * the answer, the rank maps it, and its io thread builds the page tables
 * while the trainer starts, so the first WRITE grant finds them built and
 * the save's stall is the copy alone. A second rank registering before the
 * pool is ready gets no pool with the answer and builds its segment's page
 * tables at its first grant, as before: the first process here, with the
 * agent's --pools-ahead 0. With the default (one pool made when the agent
 * starts), even the job's first rank on the node gets a ready pool with
 * its registration: the third process.
 * Public API, plus the library's TRACE lines (CKPT_DEBUG=TRACE). */
#include "daemon_test.h"

#include <ckpt.h>

#define JOB "dfirst"
#define NREG 1
static const size_t sizes[NREG] = { 8u << 20 };

static void rank_saves(const dt_env *e, uint64_t version, int startup_ms)
{
	uint8_t *bufs[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	t_fill(bufs[0], sizes[0], version);
	ckpt_config cfg;
	dt_config(&cfg, e, JOB);
	ckpt_ctx *ctx = dt_open(&cfg, bufs, sizes, NREG);
	usleep((useconds_t)startup_ms * 1000); /* the trainer builds its model */
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, version, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 30000, NULL));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, NULL));
	ckpt_handle_free(h);
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
}

static void first(const dt_env *e)
{
	rank_saves(e, 1, 0);
}

static void second(const dt_env *e)
{
	rank_saves(e, 2, 1000);
}

/* The agent's pool made ahead, handed to the job's first rank. */
static void ahead(void)
{
	dt_env e;
	dt_init(&e, "dfirst-ahead");
	dt_start(&e, "64M", 0);
	for (int i = 0; i < 3000 && !td_file_has(e.log, 0, "DRAM pool ready ahead of the next job"); i++)
		usleep(10000);
	T_ASSERT(td_file_has(e.log, 0, "DRAM pool ready ahead of the next job"));
	char log3[700];
	snprintf(log3, sizeof(log3), "%s/third.err", e.dir);
	int st = dt_child(second, &e, log3);
	dt_stop(&e);
	if (st != 0)
		T_FAIL("a rank exited %d; log %s, daemon log %s", st, log3, e.log);
	T_ASSERT(td_file_has(e.log, 0, "this job takes a 67108864-byte DRAM pool made ahead (ready)"));
	T_ASSERT(td_file_has(log3, 0, "page tables built ahead of the save"));
	T_ASSERT(!td_file_has(log3, 0, "page tables built now, in the save's stall"));
	t_rmrf(e.dir);
}

int main(void)
{
	dt_env e;
	dt_init(&e, "dfirst");
	setenv("CKPT_POOLS_AHEAD", "0", 1);
	dt_start(&e, "64M", 0);
	unsetenv("CKPT_POOLS_AHEAD");
	setenv("CKPT_DEBUG", "TRACE", 1);
	char log1[700], log2[700];
	snprintf(log1, sizeof(log1), "%s/first.err", e.dir);
	snprintf(log2, sizeof(log2), "%s/second.err", e.dir);
	/* The job's first rank on this node: its registration starts the pool. */
	int st = dt_child(first, &e, log1);
	if (st == 0)
		st = dt_child(second, &e, log2);
	dt_stop(&e);
	if (st != 0)
		T_FAIL("a rank exited %d; logs %s %s, daemon log %s", st, log1, log2, e.log);
	/* The second process got the ready pool at registration: its first
	 * and only save found the page tables built. */
	T_ASSERT(td_file_has(log2, 0, "page tables built ahead of the save"));
	T_ASSERT(!td_file_has(log2, 0, "page tables built now, in the save's stall"));
	/* The first waited for the pool to be made, and built its own. */
	T_ASSERT(td_file_has(log1, 0, "page tables built now, in the save's stall"));
	T_ASSERT(!td_file_has(e.log, 0, "ahead of the next job"));
	t_rmrf(e.dir);
	ahead();
	return T_EXIT_PASS;
}
