/* ckptd_coord: agent loss, rebuild from inventories, retention. */
#include "coord_test.h"

#define MEM CKPT_TIER_LOCAL_MEM
#define PEER CKPT_TIER_PEER_MEM
#define DISK CKPT_TIER_LOCAL_DISK
#define SHARED CKPT_TIER_SHARED

struct changes { ckptd_coord_change ch[16]; size_t n; };
static void on_change(void *arg, const ckptd_coord_change *ch)
{
	struct changes *c = arg;
	T_ASSERT(c->n < 16);
	c->ch[c->n++] = *ch;
}

static const ckptd_coord_change *find(const struct changes *c, uint64_t version)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->ch[i].version == version)
			return &c->ch[i];
	return NULL;
}

/* World 4: ranks 0,1 on n0, ranks 2,3 on n1; partners hold PEER_MEM. */
static void agent_loss(const char *dir)
{
	ckptd_coord *co;
	T_OK(ckptd_coord_open(dir, 0, &co));
	sim s = { 0 };
	for (uint32_t r = 0; r < 4; r++) {
		const char *own = r < 2 ? "n0" : "n1", *peer = r < 2 ? "n1" : "n0";
		sim_done(&s, co, own, "job", 1, r, 4, MEM, 9);
		sim_done(&s, co, peer, "job", 1, r, 4, PEER, 9);
		sim_done(&s, co, own, "job", 1, r, 4, DISK, 9);
		sim_done(&s, co, own, "job", 2, r, 4, MEM, 9);
	}
	sim_done(&s, co, "n0", "other", 1, 0, 1, MEM, 9);
	ckptd_coord_version v;
	T_OK(ckptd_coord_get(co, "job", 1, &v));
	T_ASSERT(v.committed == (MEM | PEER | DISK) && v.restorable);

	struct changes ch = { .n = 0 };
	T_ASSERT(ckptd_coord_agent_lost(co, "n0", on_change, &ch) == 9);
	/* Version 1: no tier complete, but every rank still has a copy. */
	T_OK(ckptd_coord_get(co, "job", 1, &v));
	T_ASSERT(v.committed == 0 && v.restorable && v.ranks_any == 4);
	T_ASSERT(v.ranks_at[0] == 2 && v.ranks_at[1] == 2 && v.ranks_at[2] == 2);
	/* Version 2: ranks 0 and 1 are gone. */
	T_OK(ckptd_coord_get(co, "job", 2, &v));
	T_ASSERT(!v.restorable && v.ranks_any == 2 && v.state == CKPT_STATE_PENDING);
	T_ERR(ckptd_coord_get(co, "other", 1, &v), -CKPT_ENOVERSION);
	const ckptd_coord_change *c1 = find(&ch, 1), *c2 = find(&ch, 2);
	T_ASSERT(ch.n == 3 && c1 && c2);
	T_ASSERT(c1->committed_before == (MEM | PEER | DISK) && c1->committed_after == 0 &&
	         c1->restorable_before && c1->restorable_after);
	T_ASSERT(c2->committed_before == MEM && !c2->restorable_after);

	/* Restore falls back to version 1, rank 0 from its partner's DRAM. */
	ckptd_coord_plan p;
	T_OK(ckptd_coord_restore_plan(co, "job", CKPT_LATEST, 0, "n0", &p));
	T_ASSERT(p.version == 1 && p.count == 1 && p.copies[0].tier == PEER &&
	         !strcmp(p.copies[0].node, "n1"));
	T_OK(ckptd_coord_restore_plan(co, "job", CKPT_LATEST, 3, "n1", &p));
	T_ASSERT(p.count == 2 && p.copies[0].tier == MEM && p.copies[1].tier == DISK);

	/* Losing n1 too loses everything; a second loss is a no-op. */
	T_ASSERT(ckptd_coord_agent_lost(co, "n1", NULL, NULL) > 0);
	T_ASSERT(ckptd_coord_agent_lost(co, "n1", NULL, NULL) == 0);
	T_ERR(ckptd_coord_restore_plan(co, "job", CKPT_LATEST, 0, NULL, &p), -CKPT_ENOVERSION);
	snap e = snap_take(co, "job");
	T_ASSERT(e.n == 0);
	snap_free(&e);
	ckptd_coord_close(co);
	free(s.c);
}

static const char *jobs[] = { "alpha", "beta", "gamma" };

/* A mixed state: three jobs, committed, partial and reset versions, several
 * tiers and nodes. */
static void build(ckptd_coord *co, sim *s)
{
	for (int j = 0; j < 3; j++) {
		uint32_t W = 3 + (uint32_t)j * 2;
		for (uint64_t ver = 10; ver <= 60; ver += 10) {
			for (uint32_t r = 0; r < W; r++) {
				char own[16], peer[16];
				snprintf(own, sizeof(own), "node%u", r % 4);
				snprintf(peer, sizeof(peer), "node%u", (r + 1) % 4);
				/* The newest version of each job is incomplete. */
				if (ver == 60 && r == W - 1)
					continue;
				sim_done(s, co, own, jobs[j], ver, r, W, MEM, 100 + (uint64_t)j);
				if (ver % 20 == 0)
					sim_done(s, co, peer, jobs[j], ver, r, W, PEER, 100 + (uint64_t)j);
				if (ver != 30 || r % 2)
					sim_done(s, co, own, jobs[j], ver, r, W, DISK, 100 + (uint64_t)j);
				if (ver == 10)
					sim_done(s, co, "store", jobs[j], ver, r, W, SHARED, 100 + (uint64_t)j);
			}
		}
	}
}

static void rebuild(const char *dir, const char *dir2)
{
	ckptd_coord *co, *fresh;
	T_OK(ckptd_coord_open(dir, 0, &co));
	sim s = { 0 };
	build(co, &s);
	snap orig[3];
	for (int j = 0; j < 3; j++)
		orig[j] = snap_take(co, jobs[j]);
	T_ASSERT(orig[0].n == 6 && orig[0].v[5].restorable == 0 && orig[0].v[0].committed == (MEM | DISK | SHARED));

	/* The coordinator's database is gone; the agents report. */
	T_OK(ckptd_coord_open(dir2, 0, &fresh));
	sim_report_all(&s, fresh, 7);
	for (int j = 0; j < 3; j++) {
		snap b = snap_take(fresh, jobs[j]);
		T_ASSERT(snap_equal(&orig[j], &b));
		snap_free(&b);
	}
	/* Idempotent: again into the rebuilt one, and into the original. */
	sim_report_all(&s, fresh, 5);
	sim_report_all(&s, co, 4096);
	for (int j = 0; j < 3; j++) {
		snap b = snap_take(fresh, jobs[j]), c = snap_take(co, jobs[j]);
		T_ASSERT(snap_equal(&orig[j], &b) && snap_equal(&orig[j], &c));
		snap_free(&b);
		snap_free(&c);
	}
	ckptd_coord_close(fresh);
	t_rm_db(dir2);

	/* node2's agent restarted and lost its DRAM: its inventory no longer
	 * lists those copies, and the coordinator forgets them. */
	sim s2 = { 0 };
	for (size_t i = 0; i < s.n; i++)
		if (strcmp(s.c[i].node, "node2") || (s.c[i].tier != MEM && s.c[i].tier != PEER))
			sim_add(&s2, s.c[i].node, s.c[i].job, s.c[i].version, s.c[i].rank, s.c[i].world,
			        s.c[i].tier, s.c[i].lineage);
	T_ASSERT(s2.n < s.n);
	sim_report(&s2, co, "node2", 3);
	T_OK(ckptd_coord_open(dir2, 0, &fresh));
	sim_report_all(&s2, fresh, 64);
	for (int j = 0; j < 3; j++) {
		snap b = snap_take(fresh, jobs[j]), c = snap_take(co, jobs[j]);
		T_ASSERT(snap_equal(&c, &b));
		T_ASSERT(c.v[0].committed == (SHARED | DISK)); /* version 10 lost MEM and PEER */
		snap_free(&b);
		snap_free(&c);
	}
	/* A copy reported by SHARD_DONE during a round is not swept by it. */
	ckptd_held_shard none;
	T_ASSERT(ckptd_coord_inventory(co, "node3", &none, 0, 0, NULL, NULL) == 0);
	T_OK(ckptd_coord_shard_done(co, "alpha", 70, 0, 1, MEM, "node3", 5, 5, 1, NULL));
	sim_report(&s2, co, "node3", 4096);
	ckptd_coord_version v;
	T_OK(ckptd_coord_get(co, "alpha", 70, &v));
	T_ASSERT(v.restorable);
	/* An unknown version reported without a world size is skipped. */
	ckptd_held_shard h = { .job = "alpha", .version = 80, .rank = 0, .tiers = MEM, .bytes = 1 };
	T_ASSERT(ckptd_coord_inventory(co, "node3", &h, 1, 0, NULL, NULL) == 1);
	/* A commit announced to the agent seals the version on rebuild even
	 * when no single tier is complete any more. */
	ckptd_held_shard m[2] = {
		{ .job = "delta", .version = 1, .rank = 0, .world_size = 2, .tiers = MEM,
		  .committed = MEM, .bytes = 1, .checksum = 1, .lineage = 3 },
		{ .job = "delta", .version = 1, .rank = 1, .world_size = 2, .tiers = DISK,
		  .committed = MEM, .bytes = 1, .checksum = 2, .lineage = 3 },
	};
	T_ASSERT(ckptd_coord_inventory(co, "node3", m, 2, 1, NULL, NULL) == 0);
	T_OK(ckptd_coord_get(co, "delta", 1, &v));
	T_ASSERT(v.restorable && v.committed == 0);
	for (int j = 0; j < 3; j++)
		snap_free(&orig[j]);
	ckptd_coord_close(fresh);
	ckptd_coord_close(co);
	free(s.c);
	free(s2.c);
}

static void retention(const char *dir)
{
	ckptd_coord *co;
	T_OK(ckptd_coord_open(dir, 0, &co));
	sim s = { 0 };
	for (uint64_t ver = 1; ver <= 11; ver++)
		for (uint32_t r = 0; r < 2; r++) {
			if (ver == 11 && r == 1)
				continue; /* still being saved */
			const char *n = r ? "n1" : "n0";
			sim_done(&s, co, n, "ret", ver, r, 2, MEM, 1);
			sim_done(&s, co, n, "ret", ver, r, 2, DISK, 1);
		}
	ckptd_coord_policy pol = { .keep_dram = 2, .keep_disk = 3, .keep_every = 4 };
	T_OK(ckptd_coord_job_set(co, "ret", 2, &pol));
	ckptd_coord_policy got;
	uint32_t w;
	T_OK(ckptd_coord_job_get(co, "ret", &w, &got));
	T_ASSERT(w == 2 && got.keep_dram == 2 && got.keep_every == 4);
	ckptd_coord_delete *d;
	size_t n;
	T_OK(ckptd_coord_retention(co, "ret", NULL, &d, &n));
	/* DRAM of versions 1..8, disk of 1,2,3,5,6,7; two ranks each. */
	T_ASSERT(n == 8 * 2 + 6 * 2);
	for (size_t i = 0; i < n; i++) {
		T_ASSERT(d[i].version <= 8);
		if (d[i].tier == DISK)
			T_ASSERT(d[i].version % 4 != 0);
		T_ASSERT(!strcmp(d[i].node, d[i].rank ? "n1" : "n0"));
	}
	ckptd_coord_version v;
	T_OK(ckptd_coord_get(co, "ret", 5, &v));
	T_ASSERT(v.state == CKPT_STATE_DELETING && !v.restorable && v.deleting == 4);
	T_OK(ckptd_coord_get(co, "ret", 8, &v));
	T_ASSERT(v.restorable && v.committed == DISK);
	T_OK(ckptd_coord_get(co, "ret", 9, &v));
	T_ASSERT(v.committed == (MEM | DISK));

	/* A crash before the deletions finished: the marks come back. */
	ckptd_coord_close(co);
	T_OK(ckptd_coord_open(dir, 0, &co));
	ckptd_coord_delete *d2;
	size_t n2;
	T_OK(ckptd_coord_retention(co, "ret", NULL, &d2, &n2));
	T_ASSERT(n2 == n);
	free(d2);
	for (size_t i = 0; i < n; i++) {
		T_OK(ckptd_coord_delete_done(co, "ret", d[i].version, d[i].rank, d[i].tier, d[i].node));
		T_OK(ckptd_coord_delete_done(co, "ret", d[i].version, d[i].rank, d[i].tier, d[i].node));
	}
	free(d);
	T_ERR(ckptd_coord_get(co, "ret", 5, &v), -CKPT_ENOVERSION);
	snap a = snap_take(co, "ret");
	T_ASSERT(a.n == 5); /* 4, 8, 9, 10, 11 */
	snap_free(&a);
	T_OK(ckptd_coord_retention(co, "ret", NULL, &d, &n));
	T_ASSERT(n == 0);
	free(d);

	/* Keep nothing: the newest restorable version (10) still keeps all its
	 * copies, and 11, newer and incomplete, is not touched. */
	ckptd_coord_policy none = { 0, 0, 0 };
	T_OK(ckptd_coord_retention(co, "ret", &none, &d, &n));
	for (size_t i = 0; i < n; i++)
		T_ASSERT(d[i].version < 10);
	free(d);
	T_OK(ckptd_coord_get(co, "ret", 10, &v));
	T_ASSERT(v.restorable && v.committed == (MEM | DISK) && v.deleting == 0);
	T_OK(ckptd_coord_get(co, "ret", 11, &v));
	T_ASSERT(v.deleting == 0 && v.ranks_any == 1);
	ckptd_coord_plan p;
	T_OK(ckptd_coord_restore_plan(co, "ret", CKPT_LATEST, 1, "n1", &p));
	T_ASSERT(p.version == 10);
	/* Once node n0 is lost, 10 is no longer restorable; nothing restorable
	 * means retention deletes nothing new. */
	T_ASSERT(ckptd_coord_agent_lost(co, "n0", NULL, NULL) > 0);
	T_OK(ckptd_coord_retention(co, "ret", &none, &d, &n));
	for (size_t i = 0; i < n; i++)
		T_ASSERT(d[i].version < 10);
	free(d);
	T_OK(ckptd_coord_get(co, "ret", 10, &v));
	T_ASSERT(v.deleting == 0 && v.ranks_any == 1);
	ckptd_coord_close(co);
	free(s.c);
}

/* SHARED copies are on shared storage: losing the node that flushed them
 * keeps them, so its versions stay restorable, and retention (keeping every
 * version) does not take the other ranks' SHARED copies as a broken
 * version's leftovers. World 2: rank 0 on n0, rank 1 on n1. */
static void shared_outlives_node(const char *dir)
{
	ckptd_coord *co;
	T_OK(ckptd_coord_open(dir, 0, &co));
	sim s = { 0 };
	for (uint64_t ver = 1; ver <= 3; ver++)
		for (uint32_t r = 0; r < 2; r++) {
			sim_done(&s, co, r ? "n1" : "n0", "sh", ver, r, 2, DISK, 5);
			sim_done(&s, co, r ? "n1" : "n0", "sh", ver, r, 2, SHARED, 5);
		}
	/* Version 4: rank 0's only copy off its node is in n1's DRAM. */
	sim_done(&s, co, "n1", "sh", 4, 0, 2, PEER, 5);
	sim_done(&s, co, "n0", "sh", 4, 0, 2, DISK, 5);
	sim_done(&s, co, "n1", "sh", 4, 1, 2, DISK, 5);
	T_ASSERT(ckptd_coord_agent_lost(co, "n0", NULL, NULL) == 4); /* 3 disk copies and version 4's */
	ckptd_coord_version v;
	for (uint64_t ver = 1; ver <= 3; ver++) {
		T_OK(ckptd_coord_get(co, "sh", ver, &v));
		T_ASSERT(v.restorable && v.committed == SHARED);
	}
	T_OK(ckptd_coord_get(co, "sh", 4, &v));
	T_ASSERT(v.restorable);
	ckptd_coord_policy all = { UINT32_MAX, UINT32_MAX, 0 };
	ckptd_coord_delete *d;
	size_t n;
	T_OK(ckptd_coord_retention(co, "sh", &all, &d, &n));
	T_ASSERT(n == 0);
	free(d);
	/* Per policy (disk copies of the newest version only), SHARED copies go
	 * with the LOCAL_DISK ones, the lost node's included. */
	ckptd_coord_policy one = { UINT32_MAX, 1, 0 };
	T_OK(ckptd_coord_retention(co, "sh", &one, &d, &n));
	size_t shared = 0;
	for (size_t i = 0; i < n; i++) {
		T_ASSERT(d[i].version < 4);
		shared += d[i].tier == SHARED;
	}
	T_ASSERT(shared == 6);
	free(d);
	ckptd_coord_close(co);
	free(s.c);
}

int main(void)
{
	char *base = t_tmpdir("coord-recover");
	char d1[600], d2[600], d3[600], d4[600], d5[600];
	snprintf(d1, sizeof(d1), "%s/loss", base);
	snprintf(d2, sizeof(d2), "%s/orig", base);
	snprintf(d3, sizeof(d3), "%s/fresh", base);
	snprintf(d4, sizeof(d4), "%s/ret", base);
	agent_loss(d1);
	rebuild(d2, d3);
	retention(d4);
	snprintf(d5, sizeof(d5), "%s/shared", base);
	shared_outlives_node(d5);
	t_rmrf(base);
	printf("PASS\n");
	return T_EXIT_PASS;
}
