/* Eviction exactly as the policy says: the requesting job's oldest committed
 * versions first, then other jobs' by age; never the newest committed version
 * of a job, never a PENDING version, never a WRITING or pinned segment; the
 * shortest prefix that makes room; -ENOSPC with nothing evicted when even
 * all of it would not. Hand-made cases, then random ones against a model. */
#include "mem_test.h"

#define PG 4096ull

typedef struct evlog {
	int n;
	struct {
		char job[CKPTD_JOB_MAX + 1];
		uint64_t version, off, cap;
		uint32_t rank;
	} e[4096];
} evlog;

static void on_evict(void *arg, const ckptd_seg_info *s)
{
	evlog *l = arg;
	if (l->n >= (int)(sizeof(l->e) / sizeof(l->e[0])))
		T_FAIL("too many evictions");
	snprintf(l->e[l->n].job, sizeof(l->e[0].job), "%s", s->job);
	l->e[l->n].version = s->version;
	l->e[l->n].rank = s->rank;
	l->e[l->n].off = s->off;
	l->e[l->n].cap = s->cap;
	l->n++;
}

/* A complete, committed shard of pages pages for (job, version, rank). */
static uint64_t held(ckptd_pool *p, const char *job, uint64_t v, uint32_t rank, uint64_t pages,
                     int commit, uint64_t want_off)
{
	ckptd_seg_info s;
	M_OK(ckptd_pool_alloc(p, job, v, rank, pages * PG, &s));
	if (want_off != UINT64_MAX && s.off != want_off * PG)
		T_FAIL("%s v%llu at page %llu, expected %llu", job, (unsigned long long)v,
		       (unsigned long long)(s.off / PG), (unsigned long long)want_off);
	M_OK(ckptd_pool_seg_done(p, s.id));
	if (commit)
		M_OK(ckptd_pool_version_set(p, job, v, CKPTD_VER_COMMITTED));
	return s.id;
}

static void expect_evicted(evlog *l, int n, const char *const *jobs, const uint64_t *versions)
{
	if (l->n != n) {
		for (int i = 0; i < l->n; i++)
			fprintf(stderr, "  evicted %s v%llu\n", l->e[i].job, (unsigned long long)l->e[i].version);
		T_FAIL("%d segments evicted, expected %d", l->n, n);
	}
	for (int i = 0; i < n; i++)
		if (strcmp(l->e[i].job, jobs[i]) || l->e[i].version != versions[i])
			T_FAIL("eviction %d: %s v%llu, expected %s v%llu", i, l->e[i].job,
			       (unsigned long long)l->e[i].version, jobs[i], (unsigned long long)versions[i]);
	l->n = 0;
}

/* One job: oldest committed first, the newest committed never, and no
 * eviction at all when it would not make room. */
static void same_job(void)
{
	static evlog l;
	ckptd_pool *p = m_pool(10 * PG, 0, on_evict, &l);
	ckptd_seg_info s;
	ckptd_pool_stats st;

	held(p, "A", 1, 0, 2, 1, 0);
	held(p, "A", 2, 0, 2, 1, 2);
	held(p, "A", 3, 0, 2, 1, 4);
	M_OK(ckptd_pool_alloc(p, "A", 4, 0, 2 * PG, &s)); /* PENDING, WRITING */
	T_ASSERT(s.off == 6 * PG);
	/* Free: pages 8-9. Four pages need v1 and v2 gone (v1 alone leaves 0-1,
	 * not next to 8-9); v3 is the newest committed. */
	M_OK(ckptd_pool_alloc(p, "A", 5, 0, 4 * PG, &s));
	T_ASSERT(s.off == 0);
	expect_evicted(&l, 2, (const char *[]){ "A", "A" }, (uint64_t[]){ 1, 2 });
	ckptd_pool_stats_get(p, &st);
	T_ASSERT(st.evicted_versions == 2 && st.evicted_bytes == 4 * PG);

	/* Now v3 is the only committed version: nothing may go. */
	M_ERR(ckptd_pool_alloc(p, "A", 6, 0, 4 * PG, NULL), -ENOSPC);
	T_ASSERT(l.n == 0);
	ckptd_pool_stats s2;
	ckptd_pool_stats_get(p, &s2);
	T_ASSERT(s2.used == st.used && s2.segments == st.segments);

	/* v5 committed: v3 becomes evictable, but pages 4-5 and 8-9 are not one
	 * run (v4 sits between), so evicting it would not help: it stays. */
	M_OK(ckptd_pool_seg_done(p, s.id));
	M_OK(ckptd_pool_version_set(p, "A", 5, CKPTD_VER_COMMITTED));
	M_ERR(ckptd_pool_alloc(p, "A", 6, 0, 4 * PG, NULL), -ENOSPC);
	T_ASSERT(l.n == 0);
	M_OK(ckptd_pool_find(p, "A", 3, 0, NULL));
	/* Two pages fit without evicting anything. */
	M_OK(ckptd_pool_alloc(p, "A", 6, 0, 2 * PG, &s));
	T_ASSERT(s.off == 8 * PG && l.n == 0);
	/* Three pages: v3 (pages 4-5) goes; still not three in a row, and
	 * nothing else may go (v4 PENDING, v5 newest, v6 WRITING). */
	M_ERR(ckptd_pool_alloc(p, "A", 7, 0, 3 * PG, NULL), -ENOSPC);
	T_ASSERT(l.n == 0);
	M_OK(ckptd_pool_alloc(p, "A", 7, 0, 2 * PG, &s));
	T_ASSERT(s.off == 4 * PG);
	expect_evicted(&l, 1, (const char *[]){ "A" }, (uint64_t[]){ 3 });
	M_OK(ckptd_pool_check(p));
	ckptd_pool_close(p);
}

/* Several jobs: the requester's own old versions before older versions of
 * other jobs; then other jobs by age; pins and WRITING protect. */
static void across_jobs(void)
{
	static evlog l;
	ckptd_pool *p = m_pool(12 * PG, 0, on_evict, &l);
	ckptd_seg_info s;

	held(p, "B", 1, 0, 2, 1, 0);   /* oldest of all */
	held(p, "C", 10, 0, 2, 1, 2);
	held(p, "A", 1, 0, 2, 1, 4);
	held(p, "B", 2, 0, 2, 1, 6);
	held(p, "C", 11, 0, 2, 1, 8);
	held(p, "A", 2, 0, 2, 1, 10);

	/* A asks: its own A1 goes, although B1 and C10 are older. */
	M_OK(ckptd_pool_alloc(p, "A", 3, 0, 2 * PG, &s));
	T_ASSERT(s.off == 4 * PG);
	expect_evicted(&l, 1, (const char *[]){ "A" }, (uint64_t[]){ 1 });
	/* A again: A2 is its newest committed (A3 pending): others by age, B1. */
	uint64_t a4;
	M_OK(ckptd_pool_alloc(p, "A", 4, 0, 2 * PG, &s));
	a4 = s.id;
	T_ASSERT(s.off == 0);
	expect_evicted(&l, 1, (const char *[]){ "B" }, (uint64_t[]){ 1 });
	/* C asks for four pages: C10 could go but leaves only pages 2-3 (A4 and
	 * A3 around it); A2, B2, C11 are newest: -ENOSPC, C10 kept. */
	M_ERR(ckptd_pool_alloc(p, "C", 12, 0, 4 * PG, NULL), -ENOSPC);
	T_ASSERT(l.n == 0);
	M_OK(ckptd_pool_find(p, "C", 10, 0, NULL));
	/* A3 committed: A2 is no longer the newest. C's own C10 still first. */
	ckptd_seg_info a3;
	M_OK(ckptd_pool_find(p, "A", 3, 0, &a3));
	M_OK(ckptd_pool_seg_done(p, a3.id));
	M_OK(ckptd_pool_version_set(p, "A", 3, CKPTD_VER_COMMITTED));
	M_OK(ckptd_pool_alloc(p, "C", 12, 0, 2 * PG, &s));
	T_ASSERT(s.off == 2 * PG);
	expect_evicted(&l, 1, (const char *[]){ "C" }, (uint64_t[]){ 10 });
	/* Layout: A4 0-1, C12 2-3, A3 4-5, B2 6-7, C11 8-9, A2 10-11.
	 * A4 committed: A2 and A3 evictable; pin A2. B asks: B2 is its newest;
	 * others by age: A2 is pinned, so A3. */
	M_OK(ckptd_pool_seg_done(p, a4));
	M_OK(ckptd_pool_version_set(p, "A", 4, CKPTD_VER_COMMITTED));
	ckptd_seg_info a2;
	M_OK(ckptd_pool_find(p, "A", 2, 0, &a2));
	M_OK(ckptd_pool_seg_pin(p, a2.id));
	M_OK(ckptd_pool_alloc(p, "B", 3, 0, 2 * PG, &s));
	T_ASSERT(s.off == 4 * PG);
	expect_evicted(&l, 1, (const char *[]){ "A" }, (uint64_t[]){ 3 });
	/* Unpinned, A2 goes next (B3 still WRITING, so B2 stays newest). */
	M_OK(ckptd_pool_seg_unpin(p, a2.id));
	M_OK(ckptd_pool_alloc(p, "B", 4, 0, 2 * PG, &s));
	T_ASSERT(s.off == 10 * PG);
	expect_evicted(&l, 1, (const char *[]){ "A" }, (uint64_t[]){ 2 });
	M_OK(ckptd_pool_check(p));
	ckptd_pool_close(p);
}

/* A version leaves whole; a version with one WRITING segment stays whole. */
static void whole_versions(void)
{
	static evlog l;
	ckptd_pool *p = m_pool(8 * PG, 0, on_evict, &l);
	ckptd_seg_info s;

	for (uint32_t r = 0; r < 3; r++)
		held(p, "J", 1, r, 1, 0, r);
	M_OK(ckptd_pool_version_set(p, "J", 1, CKPTD_VER_COMMITTED));
	/* v2: rank 0 done, rank 1 still writing, yet the version is committed
	 * (say at LOCAL_DISK); v3 newest. */
	held(p, "J", 2, 0, 1, 0, 3);
	M_OK(ckptd_pool_alloc(p, "J", 2, 1, PG, &s));
	T_ASSERT(s.off == 4 * PG);
	M_OK(ckptd_pool_version_set(p, "J", 2, CKPTD_VER_COMMITTED));
	held(p, "J", 3, 0, 2, 1, 5);
	/* One page left (7). Two pages: v1 goes whole (its 3 segments), v2 not. */
	M_OK(ckptd_pool_alloc(p, "J", 4, 0, 2 * PG, &s));
	T_ASSERT(s.off == 0);
	T_ASSERT(l.n == 3);
	for (int i = 0; i < 3; i++)
		T_ASSERT(l.e[i].version == 1 && l.e[i].cap == PG);
	l.n = 0;
	/* Pages 2 and 7 free. Two pages: only v2 could go, and it has a WRITING
	 * segment; v3 is the newest, v4 PENDING. */
	M_ERR(ckptd_pool_alloc(p, "J", 5, 0, 2 * PG, NULL), -ENOSPC);
	T_ASSERT(l.n == 0);
	M_OK(ckptd_pool_seg_done(p, s.id)); /* v4's: v4 stays PENDING */
	M_ERR(ckptd_pool_alloc(p, "J", 5, 0, 2 * PG, NULL), -ENOSPC);
	ckptd_seg_info w;
	M_OK(ckptd_pool_find(p, "J", 2, 1, &w));
	M_OK(ckptd_pool_seg_done(p, w.id));
	M_OK(ckptd_pool_alloc(p, "J", 5, 0, 2 * PG, &s));
	T_ASSERT(l.n == 2 && l.e[0].version == 2 && l.e[1].version == 2);
	M_OK(ckptd_pool_check(p));
	ckptd_pool_close(p);
}

/* A late rank of an old committed version does not evict its own version;
 * max_segments makes room the same way bytes do. */
static void self_and_count(void)
{
	static evlog l;
	ckptd_pool *p = m_pool(4 * PG, 0, on_evict, &l);
	held(p, "A", 1, 0, 2, 1, 0);
	held(p, "A", 2, 0, 2, 1, 2);
	M_ERR(ckptd_pool_alloc(p, "A", 1, 1, 2 * PG, NULL), -ENOSPC);
	T_ASSERT(l.n == 0);
	M_OK(ckptd_pool_find(p, "A", 1, 0, NULL));
	ckptd_pool_close(p);

	p = m_pool(64 * PG, 3, on_evict, &l);
	held(p, "A", 1, 0, 1, 1, 0);
	held(p, "B", 1, 0, 1, 1, 1);
	held(p, "A", 2, 0, 1, 1, 2);
	/* Room for bytes, not for a fourth segment: A1 goes. */
	M_OK(ckptd_pool_alloc(p, "B", 2, 0, PG, NULL));
	expect_evicted(&l, 1, (const char *[]){ "A" }, (uint64_t[]){ 1 });
	M_ERR(ckptd_pool_alloc(p, "B", 3, 0, PG, NULL), -ENOSPC);
	T_ASSERT(l.n == 0);
	M_OK(ckptd_pool_check(p));
	ckptd_pool_close(p);
}

/* ---- random workloads against a model of the policy ---- */

#define RP 64      /* pool pages */
#define RMAX 256   /* segments */

typedef struct mver {
	char job[8];
	uint64_t version;
	int state, busy, cand;
	int nseg;
	uint64_t off[RMAX], cap[RMAX];
} mver;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Versions from the pool's list, which is in the order first seen (age). */
static int model_versions(ckptd_pool *p, mver *mv)
{
	static ckptd_seg_info list[RMAX];
	size_t n;
	int nv = 0;
	ckptd_pool_list(p, list, RMAX, &n);
	T_ASSERT(n <= RMAX);
	for (size_t i = 0; i < n; i++) {
		int k;
		for (k = 0; k < nv; k++)
			if (mv[k].version == list[i].version && strcmp(mv[k].job, list[i].job) == 0)
				break;
		if (k == nv) {
			memset(&mv[nv], 0, sizeof(mv[nv]));
			snprintf(mv[nv].job, sizeof(mv[nv].job), "%s", list[i].job);
			mv[nv].version = list[i].version;
			mv[nv].state = list[i].ver_state;
			nv++;
		}
		mv[k].busy |= list[i].state == CKPTD_SEG_WRITING || list[i].pins;
		mv[k].off[mv[k].nseg] = list[i].off;
		mv[k].cap[mv[k].nseg++] = list[i].cap;
	}
	return nv;
}

static int model_order(mver *mv, int nv, const char *job, uint64_t self, int *order)
{
	int n = 0;
	for (int i = 0; i < nv; i++) {
		mv[i].cand = 0;
		if (mv[i].state != CKPTD_VER_COMMITTED || mv[i].busy)
			continue;
		if (strcmp(mv[i].job, job) == 0 && mv[i].version == self)
			continue;
		int newest = 1;
		for (int k = 0; k < nv; k++)
			if (strcmp(mv[k].job, mv[i].job) == 0 && mv[k].state == CKPTD_VER_COMMITTED &&
			    mv[k].version > mv[i].version)
				newest = 0;
		mv[i].cand = !newest;
	}
	/* Own job, ascending version. */
	for (;;) {
		int best = -1;
		for (int i = 0; i < nv; i++)
			if (mv[i].cand == 1 && strcmp(mv[i].job, job) == 0 &&
			    (best < 0 || mv[i].version < mv[best].version))
				best = i;
		if (best < 0)
			break;
		mv[best].cand = 2;
		order[n++] = best;
	}
	/* Others in the list's order: age. */
	for (int i = 0; i < nv; i++)
		if (mv[i].cand == 1)
			order[n++] = i;
	return n;
}

static int model_fits(const mver *mv, int nv, const int *order, int k, uint64_t pages,
                      uint32_t max_segs)
{
	uint8_t used[RP] = { 0 };
	int segs = 0;
	for (int i = 0; i < nv; i++) {
		int gone = 0;
		for (int j = 0; j < k; j++)
			gone |= order[j] == i;
		if (gone)
			continue;
		segs += mv[i].nseg;
		for (int s = 0; s < mv[i].nseg; s++)
			memset(used + mv[i].off[s] / PG, 1, mv[i].cap[s] / PG);
	}
	if ((uint32_t)segs >= max_segs)
		return 0;
	uint64_t run = 0;
	for (int i = 0; i < RP; i++) {
		run = used[i] ? 0 : run + 1;
		if (run >= pages)
			return 1;
	}
	return 0;
}

static void random_policy(uint64_t seed)
{
	static evlog l;
	static mver mv[RMAX];
	const uint32_t max_segs = 14; /* binds as often as bytes do */
	const char *jobs[] = { "a", "b", "c" };
	uint64_t next_version[3] = { 1, 1, 1 };
	uint64_t s = seed;
	int evictions = 0, nospace = 0;
	ckptd_pool *p = m_pool(RP * PG, max_segs, on_evict, &l);

	for (int op = 0; op < 4000; op++) {
		uint64_t r = rnd(&s) % 100;
		static ckptd_seg_info list[RMAX];
		size_t n;
		ckptd_pool_list(p, list, RMAX, &n);
		if (r < 50 || n == 0) {
			int j = (int)(rnd(&s) % 3);
			/* Mostly a new version; sometimes another rank of the newest. */
			uint64_t v = next_version[j];
			if (rnd(&s) % 3 == 0 && v > 1)
				v--;
			else
				next_version[j]++;
			uint32_t rank = (uint32_t)(rnd(&s) % 4);
			uint64_t pages = 1 + rnd(&s) % 6;
			int nv = model_versions(p, mv);
			int order[RMAX];
			int nc = model_order(mv, nv, jobs[j], v, order);
			int dup = 0;
			for (size_t i = 0; i < n; i++)
				dup |= strcmp(list[i].job, jobs[j]) == 0 && list[i].version == v && list[i].rank == rank;
			l.n = 0;
			int err = ckptd_pool_alloc(p, jobs[j], v, rank, pages * PG, NULL);
			if (dup) {
				M_ERR(err, -EEXIST);
				T_ASSERT(l.n == 0);
				continue;
			}
			if (err == -ENOSPC) {
				nospace++;
				if (l.n || model_fits(mv, nv, order, nc, pages, max_segs))
					T_FAIL("seed %llu op %d: -ENOSPC but the policy makes room (%d evicted)",
					       (unsigned long long)seed, op, l.n);
				continue;
			}
			M_OK(err);
			/* Which versions went, in order, as a prefix of the model's order. */
			int k = 0, e = 0;
			while (e < l.n) {
				if (k >= nc)
					T_FAIL("seed %llu op %d: evicted %s v%llu, not a candidate",
					       (unsigned long long)seed, op, l.e[e].job,
					       (unsigned long long)l.e[e].version);
				const mver *x = &mv[order[k]];
				if (strcmp(x->job, l.e[e].job) || x->version != l.e[e].version)
					T_FAIL("seed %llu op %d: evicted %s v%llu, policy says %s v%llu next",
					       (unsigned long long)seed, op, l.e[e].job,
					       (unsigned long long)l.e[e].version, x->job,
					       (unsigned long long)x->version);
				for (int c = 0; c < x->nseg; c++, e++)
					if (e >= l.n || strcmp(l.e[e].job, x->job) || l.e[e].version != x->version)
						T_FAIL("seed %llu op %d: version evicted in part", (unsigned long long)seed, op);
				k++;
			}
			if (!model_fits(mv, nv, order, k, pages, max_segs) ||
			    (k > 0 && model_fits(mv, nv, order, k - 1, pages, max_segs)))
				T_FAIL("seed %llu op %d: evicted %d versions, not the shortest prefix that fits",
				       (unsigned long long)seed, op, k);
			evictions += k;
		} else if (r < 75) {
			ckptd_seg_info *x = &list[rnd(&s) % n];
			if (x->state == CKPTD_SEG_WRITING)
				M_OK(ckptd_pool_seg_done(p, x->id));
			else if (x->pins && rnd(&s) % 2)
				M_OK(ckptd_pool_seg_unpin(p, x->id));
			else if (rnd(&s) % 4 == 0)
				M_OK(ckptd_pool_seg_pin(p, x->id));
		} else if (r < 95) {
			ckptd_seg_info *x = &list[rnd(&s) % n];
			M_OK(ckptd_pool_version_set(p, x->job, x->version,
			                            rnd(&s) % 8 ? CKPTD_VER_COMMITTED : CKPTD_VER_PENDING));
		} else {
			ckptd_seg_info *x = &list[rnd(&s) % n];
			int err = ckptd_pool_seg_free(p, x->id);
			T_ASSERT(err == 0 || (err == -EBUSY && x->pins));
		}
		M_OK(ckptd_pool_check(p));
	}
	if (evictions < 50 || nospace < 10)
		T_FAIL("seed %llu: workload too tame (%d evictions, %d ENOSPC)", (unsigned long long)seed,
		       evictions, nospace);
	ckptd_pool_close(p);
}

int main(void)
{
	same_job();
	across_jobs();
	whole_versions();
	self_and_count();
	for (uint64_t seed = 1; seed <= 10; seed++)
		random_policy(seed * 0x2545F4914F6CDD1Dull);
	printf("test_mem_evict: ok\n");
	return T_EXIT_PASS;
}
