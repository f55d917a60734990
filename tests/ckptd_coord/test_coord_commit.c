/* ckptd_coord: commit exactly when the last rank arrives (per tier),
 * duplicates, lineage reset, refusals, listing order, batches, job
 * isolation, restore plans. */
#include "coord_test.h"

#define MEM CKPT_TIER_LOCAL_MEM
#define PEER CKPT_TIER_PEER_MEM
#define DISK CKPT_TIER_LOCAL_DISK
#define SHARED CKPT_TIER_SHARED

static void per_tier_commit(ckptd_coord *co, sim *s)
{
	const uint32_t W = 4;
	for (uint32_t r = 0; r < W; r++) {
		char node[16];
		snprintf(node, sizeof(node), "n%u", r / 2);
		uint32_t got = sim_done(s, co, node, "llama", 100, r, W, DISK, 7);
		T_ASSERT(got == (r == W - 1 ? DISK : 0));
		ckptd_coord_version v;
		T_OK(ckptd_coord_get(co, "llama", 100, &v));
		T_ASSERT(v.ranks_at[2] == r + 1 && v.ranks_any == r + 1);
		T_ASSERT(v.restorable == (r == W - 1));
		T_ASSERT(v.state == (r == W - 1 ? CKPT_STATE_COMMITTED : CKPT_STATE_PENDING));
	}
	/* A second tier commits on its own last rank, in reverse order. */
	for (uint32_t r = W; r-- > 0;) {
		char node[16];
		snprintf(node, sizeof(node), "n%u", r / 2);
		T_ASSERT(sim_done(s, co, node, "llama", 100, r, W, MEM, 7) == (r == 0 ? MEM : 0));
	}
	ckptd_coord_version v;
	T_OK(ckptd_coord_get(co, "llama", 100, &v));
	T_ASSERT(v.committed == (MEM | DISK) && v.held == (MEM | DISK));
	T_ASSERT(v.bytes == 1000 + 1001 + 1002 + 1003);

	/* Duplicates change nothing and commit nothing. */
	snap a = snap_take(co, "llama");
	for (uint32_t r = 0; r < W; r++)
		T_ASSERT(sim_done(s, co, r < 2 ? "n0" : "n1", "llama", 100, r, W, DISK, 7) == 0);
	snap b = snap_take(co, "llama");
	T_ASSERT(snap_equal(&a, &b));
	snap_free(&a);
	snap_free(&b);
}

static void refusals(ckptd_coord *co)
{
	uint32_t c;
	T_ERR(ckptd_coord_shard_done(co, "llama", 100, 0, 8, DISK, "n0", 1000, 1, 7, &c), -CKPT_EMISMATCH);
	T_ERR(ckptd_coord_shard_done(co, "llama", 101, 4, 4, DISK, "n0", 1, 1, 7, &c), -EINVAL);
	T_ERR(ckptd_coord_shard_done(co, "llama", 101, 0, 4, DISK | MEM, "n0", 1, 1, 7, &c), -EINVAL);
	T_ERR(ckptd_coord_shard_done(co, "../x", 101, 0, 4, DISK, "n0", 1, 1, 7, &c), -CKPT_ENAME);
	T_ERR(ckptd_coord_shard_done(co, "llama", 101, 0, 4, DISK, "bad node", 1, 1, 7, &c), -CKPT_ENAME);
	T_ERR(ckptd_coord_shard_done(co, "llama", 555, 0, 0, DISK, "n0", 1, 1, 7, &c), -CKPT_ENOVERSION);
	/* A committed version refuses another run's shards... */
	T_ERR(ckptd_coord_shard_done(co, "llama", 100, 0, 4, SHARED, "n0", 1000, 5, 8, &c), -CKPT_EMISMATCH);
	/* ...and a copy whose checksum differs from the rank's shard. */
	T_ERR(ckptd_coord_shard_done(co, "llama", 100, 0, 4, SHARED, "store", 1000, 5, 7, &c),
	      -CKPT_EMISMATCH);
	/* world_size 0 (optional on the wire) is fine once the version exists. */
	T_OK(ckptd_coord_shard_done(co, "llama", 100, 0, 0, SHARED, "store", 1000,
	                            sim_checksum("llama", 100, 0, 7), 7, &c));
	T_ASSERT(c == 0);
}

static void lineage_reset(ckptd_coord *co, sim *s)
{
	for (uint32_t r = 0; r < 3; r++)
		sim_done(s, co, "n0", "llama", 200, r, 4, DISK, 1);
	ckptd_coord_version v;
	T_OK(ckptd_coord_get(co, "llama", 200, &v));
	T_ASSERT(v.ranks_any == 3 && v.lineage == 1);
	/* The job restarted (a new run) and saves version 200 again. */
	T_ASSERT(sim_done(s, co, "n1", "llama", 200, 3, 4, DISK, 2) == 0);
	T_OK(ckptd_coord_get(co, "llama", 200, &v));
	T_ASSERT(v.ranks_any == 1 && v.lineage == 2 && v.bytes == 1003 && !v.restorable);
	ckptd_coord_plan p;
	T_ERR(ckptd_coord_restore_plan(co, "llama", 200, 0, NULL, &p), -CKPT_ENOVERSION);
	for (uint32_t r = 0; r < 3; r++)
		T_ASSERT(sim_done(s, co, "n1", "llama", 200, r, 4, DISK, 2) == (r == 2 ? DISK : 0));
	T_OK(ckptd_coord_restore_plan(co, "llama", 200, 1, "n1", &p));
	T_ASSERT(p.count == 1 && p.lineage == 2 && !strcmp(p.copies[0].node, "n1"));
}

struct order { uint64_t last; size_t n; };
static int check_order(void *arg, const ckptd_coord_version *v)
{
	struct order *o = arg;
	if (o->n && v->version <= o->last)
		return -1;
	o->last = v->version;
	o->n++;
	return 0;
}

static void listing_and_isolation(ckptd_coord *co)
{
	/* Versions across byte boundaries, added out of order. */
	const uint64_t vs[] = { 1ull << 40, 3, 256, 255, 65536, 1 };
	for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++)
		T_OK(ckptd_coord_shard_done(co, "a", vs[i], 0, 1, DISK, "n0", 1, 1, 1, NULL));
	T_OK(ckptd_coord_shard_done(co, "ab", 2, 0, 1, DISK, "n0", 1, 1, 1, NULL));
	T_OK(ckptd_coord_shard_done(co, "b", 7, 0, 2, DISK, "n0", 1, 1, 1, NULL));
	struct order o = { 0, 0 };
	T_OK(ckptd_coord_list(co, "a", 0, check_order, &o));
	T_ASSERT(o.n == 6 && o.last == 1ull << 40);
	o = (struct order){ 0, 0 };
	T_OK(ckptd_coord_list(co, "a", 256, check_order, &o));
	T_ASSERT(o.n == 3);
	o = (struct order){ 0, 0 };
	T_OK(ckptd_coord_list(co, "ab", 0, check_order, &o));
	T_ASSERT(o.n == 1 && o.last == 2);
	ckptd_coord_version v;
	T_ERR(ckptd_coord_get(co, "b", 3, &v), -CKPT_ENOVERSION);
	ckptd_coord_plan p;
	T_ERR(ckptd_coord_restore_plan(co, "b", 3, 0, NULL, &p), -CKPT_ENOVERSION);
	T_ERR(ckptd_coord_restore_plan(co, "b", CKPT_LATEST, 0, NULL, &p), -CKPT_ENOVERSION);
	T_ERR(ckptd_coord_restore_plan(co, "zz", CKPT_LATEST, 0, NULL, &p), -CKPT_ENOVERSION);
	T_OK(ckptd_coord_restore_plan(co, "a", CKPT_LATEST, 0, NULL, &p));
	T_ASSERT(p.version == 1ull << 40);
	T_ERR(ckptd_coord_restore_plan(co, "a", CKPT_LATEST, 1, NULL, &p), -EINVAL);
}

static void batch(ckptd_coord *co)
{
	enum { W = 64 };
	ckptd_coord_shard s[W + 2];
	ckptd_coord_result res[W + 2];
	char nodes[W][16];
	for (uint32_t r = 0; r < W; r++) {
		snprintf(nodes[r], sizeof(nodes[r]), "node%02u", r / 8);
		s[r] = (ckptd_coord_shard){ "big", 9, r, W, MEM, nodes[r], 10, r, 3 };
	}
	s[W] = s[3];                      /* a duplicate inside the batch */
	s[W + 1] = s[4];
	s[W + 1].world_size = 65;         /* refused, the rest goes on */
	T_OK(ckptd_coord_shard_done_batch(co, s, W + 2, res));
	for (uint32_t r = 0; r < W; r++)
		T_ASSERT(res[r].status == 0 && res[r].committed == (r == W - 1 ? MEM : 0));
	T_ASSERT(res[W].status == 0 && res[W].committed == 0);
	T_ASSERT(res[W + 1].status == -CKPT_EMISMATCH);
	ckptd_coord_version v;
	T_OK(ckptd_coord_get(co, "big", 9, &v));
	T_ASSERT(v.committed == MEM && v.restorable && v.bytes == 10 * W);
}

static void restore_order(ckptd_coord *co)
{
	/* Rank 0 of "r" runs on n0; rank 1 on n1. */
	const uint32_t tiers[] = { SHARED, PEER, DISK, MEM };
	const char *holder[] = { "store", "n1", "n0", "n0" };
	for (int i = 0; i < 4; i++) {
		T_OK(ckptd_coord_shard_done(co, "r", 5, 0, 2, tiers[i], holder[i], 8, 42, 1, NULL));
		T_OK(ckptd_coord_shard_done(co, "r", 5, 1, 2, tiers[i],
		                            i == 1 ? "n0" : i == 0 ? "store" : "n1", 8, 43, 1, NULL));
	}
	/* A newer version that is not complete is never offered. */
	T_OK(ckptd_coord_shard_done(co, "r", 6, 0, 2, MEM, "n0", 8, 44, 1, NULL));
	ckptd_coord_plan p;
	T_OK(ckptd_coord_restore_plan(co, "r", CKPT_LATEST, 0, "n0", &p));
	T_ASSERT(p.version == 5 && p.count == 4 && p.checksum == 42 && p.bytes == 8);
	T_ASSERT(p.copies[0].tier == MEM && !strcmp(p.copies[0].node, "n0"));
	T_ASSERT(p.copies[1].tier == DISK && !strcmp(p.copies[1].node, "n0"));
	T_ASSERT(p.copies[2].tier == PEER && !strcmp(p.copies[2].node, "n1"));
	T_ASSERT(p.copies[3].tier == SHARED);
	/* Restarted elsewhere: its old node's DRAM is remote, its disk the last resort. */
	T_OK(ckptd_coord_restore_plan(co, "r", 5, 0, "n7", &p));
	T_ASSERT(p.copies[0].tier == PEER && p.copies[1].tier == MEM && p.copies[2].tier == SHARED &&
	         p.copies[3].tier == DISK);
	T_ERR(ckptd_coord_restore_plan(co, "r", 6, 0, "n0", &p), -CKPT_ENOVERSION);
}

int main(void)
{
	char *dir = t_tmpdir("coord-commit");
	ckptd_coord *co;
	T_OK(ckptd_coord_open(dir, 0, &co));
	sim s = { 0 };
	per_tier_commit(co, &s);
	refusals(co);
	lineage_reset(co, &s);
	listing_and_isolation(co);
	batch(co);
	restore_order(co);
	/* The state survives a reopen. */
	snap a = snap_take(co, "llama");
	ckptd_coord_close(co);
	T_OK(ckptd_coord_open(dir, 0, &co));
	snap b = snap_take(co, "llama");
	T_ASSERT(snap_equal(&a, &b) && a.n == 2);
	snap_free(&a);
	snap_free(&b);
	ckptd_coord_close(co);
	free(s.c);
	t_rmrf(dir);
	printf("PASS\n");
	return T_EXIT_PASS;
}
