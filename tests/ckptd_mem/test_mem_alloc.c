/* The pool's allocator against a page-map model: random allocations and
 * frees must land where first fit says, fail exactly when no free run is long
 * enough, and leave the free list coalesced. Plus the API's error cases. */
#include "mem_test.h"

#include <pthread.h>

#define NPAGES 512
#define MAXLIVE 400

typedef struct live {
	uint64_t id, off, pages;
	uint64_t version;
} live;

typedef struct model {
	uint8_t used[NPAGES];
	live seg[MAXLIVE];
	int n;
} model;

static int64_t model_first_fit(const model *m, uint64_t pages)
{
	uint64_t run = 0;
	for (uint64_t i = 0; i < NPAGES; i++) {
		run = m->used[i] ? 0 : run + 1;
		if (run == pages)
			return (int64_t)(i + 1 - pages);
	}
	return -1;
}

static void model_compare(ckptd_pool *p, const model *m, uint64_t page)
{
	uint64_t free_pages = 0, largest = 0, run = 0, runs = 0;
	for (int i = 0; i < NPAGES; i++) {
		if (m->used[i]) {
			run = 0;
			continue;
		}
		free_pages++;
		if (run++ == 0)
			runs++;
		if (run > largest)
			largest = run;
	}
	ckptd_pool_stats st;
	ckptd_pool_stats_get(p, &st);
	if (st.free != free_pages * page || st.largest_free != largest * page ||
	    st.free_extents != runs || st.segments != (uint32_t)m->n)
		T_FAIL("pool says free %llu largest %llu extents %u segs %u; model %llu %llu %llu %d",
		       (unsigned long long)st.free, (unsigned long long)st.largest_free, st.free_extents,
		       st.segments, (unsigned long long)(free_pages * page),
		       (unsigned long long)(largest * page), (unsigned long long)runs, m->n);
	M_OK(ckptd_pool_check(p));
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void random_run(uint64_t seed)
{
	static model m;
	memset(&m, 0, sizeof(m));
	ckptd_pool *p = m_pool(NPAGES * 4096ull, 0, NULL, NULL);
	ckptd_pool_stats st;
	ckptd_pool_stats_get(p, &st);
	T_ASSERT(st.align == 4096 && st.bytes == NPAGES * 4096ull);
	uint64_t page = st.align, s = seed, version = 0;

	for (int op = 0; op < 20000; op++) {
		uint64_t r = rnd(&s) % 100;
		if (m.n > 0 && (r < 45 || m.n == MAXLIVE)) {
			int k = (int)(rnd(&s) % (uint64_t)m.n);
			live l = m.seg[k];
			if (rnd(&s) & 1) {
				M_OK(ckptd_pool_seg_free(p, l.id));
			} else {
				/* The other road to freeing: a version dropped whole. */
				M_OK(ckptd_pool_seg_done(p, l.id));
				M_ERR(ckptd_pool_version_drop(p, "job", l.version), 1);
			}
			memset(m.used + l.off, 0, l.pages);
			m.seg[k] = m.seg[--m.n];
		} else {
			/* Mostly small, now and then large, to fragment and then fail. */
			uint64_t pages = r < 90 ? 1 + rnd(&s) % 8 : 1 + rnd(&s) % 96;
			uint64_t len = pages * page - rnd(&s) % page; /* rounds up to pages */
			ckptd_seg_info info;
			int64_t want = model_first_fit(&m, pages);
			version++;
			int err = ckptd_pool_alloc(p, "job", version, (uint32_t)(version % 7), len, &info);
			if (want < 0) {
				if (err != -ENOSPC)
					T_FAIL("seed %llu op %d: %llu pages: model has no room, pool said %d",
					       (unsigned long long)seed, op, (unsigned long long)pages, err);
			} else {
				if (err < 0)
					T_FAIL("seed %llu op %d: alloc of %llu pages failed (%s); model fits at %lld",
					       (unsigned long long)seed, op, (unsigned long long)pages, strerror(-err),
					       (long long)want);
				if (info.off != (uint64_t)want * page || info.len != len || info.cap != pages * page ||
				    info.state != CKPTD_SEG_WRITING || info.ver_state != CKPTD_VER_PENDING)
					T_FAIL("seed %llu op %d: at %llu, first fit says %llu",
					       (unsigned long long)seed, op, (unsigned long long)info.off,
					       (unsigned long long)(want * page));
				memset(m.used + want, 1, pages);
				m.seg[m.n++] = (live){ info.id, (uint64_t)want, pages, version };
			}
		}
		model_compare(p, &m, page);
	}
	/* Free everything: one extent again. */
	while (m.n)
		M_OK(ckptd_pool_seg_free(p, m.seg[--m.n].id));
	ckptd_pool_stats_get(p, &st);
	T_ASSERT(st.free == st.bytes && st.free_extents == 1 && st.versions == 0 && st.used == 0);
	ckptd_pool_close(p);
}

static void api_errors(void)
{
	ckptd_pool *p = m_pool(64 * 4096, 4, NULL, NULL);
	ckptd_seg_info a, b, f;
	char longjob[CKPTD_JOB_MAX + 2];
	memset(longjob, 'j', sizeof(longjob) - 1);
	longjob[sizeof(longjob) - 1] = 0;

	M_ERR(ckptd_pool_alloc(p, "job", 1, 0, 0, NULL), -EINVAL);
	M_ERR(ckptd_pool_alloc(p, "", 1, 0, 4096, NULL), -EINVAL);
	M_ERR(ckptd_pool_alloc(p, NULL, 1, 0, 4096, NULL), -EINVAL);
	M_ERR(ckptd_pool_alloc(p, longjob, 1, 0, 4096, NULL), -EINVAL);
	longjob[CKPTD_JOB_MAX] = 0; /* exactly the maximum is fine */
	M_OK(ckptd_pool_alloc(p, longjob, 1, 0, 4096, &a));
	M_OK(ckptd_pool_seg_free(p, a.id));
	M_ERR(ckptd_pool_alloc(p, "job", 1, 0, 64 * 4096 + 1, NULL), -ENOSPC);
	M_ERR(ckptd_pool_alloc(p, "job", 1, 0, UINT64_MAX, NULL), -ENOSPC);

	M_OK(ckptd_pool_alloc(p, "job", 1, 0, 100, &a));
	T_ASSERT(a.off == 0 && a.len == 100 && a.cap == 4096 && a.rank == 0 && a.version == 1 &&
	         strcmp(a.job, "job") == 0);
	M_ERR(ckptd_pool_alloc(p, "job", 1, 0, 100, NULL), -EEXIST);
	M_OK(ckptd_pool_alloc(p, "job", 1, 1, 5000, &b));
	T_ASSERT(b.off == 4096 && b.cap == 8192 && b.id != a.id);

	M_OK(ckptd_pool_find(p, "job", 1, 1, &f));
	T_ASSERT(f.id == b.id && f.off == b.off && f.state == CKPTD_SEG_WRITING);
	M_ERR(ckptd_pool_find(p, "job", 1, 2, &f), -ENOENT);
	M_ERR(ckptd_pool_find(p, "job", 2, 0, &f), -ENOENT);
	M_ERR(ckptd_pool_find(p, "other", 1, 0, &f), -ENOENT);

	/* Pins: only on a complete segment; a pinned one cannot be freed. */
	M_ERR(ckptd_pool_seg_pin(p, a.id), -EAGAIN);
	M_OK(ckptd_pool_seg_done(p, a.id));
	M_ERR(ckptd_pool_seg_done(p, a.id), -EALREADY);
	M_ERR(ckptd_pool_seg_done(p, 9999), -ENOENT);
	M_OK(ckptd_pool_seg_pin(p, a.id));
	M_OK(ckptd_pool_seg_pin(p, a.id));
	M_OK(ckptd_pool_find(p, "job", 1, 0, &f));
	T_ASSERT(f.pins == 2 && f.state == CKPTD_SEG_HELD);
	M_ERR(ckptd_pool_seg_free(p, a.id), -EBUSY);
	M_OK(ckptd_pool_seg_unpin(p, a.id));
	M_OK(ckptd_pool_seg_unpin(p, a.id));
	M_ERR(ckptd_pool_seg_unpin(p, a.id), -EINVAL);
	M_ERR(ckptd_pool_seg_pin(p, 9999), -ENOENT);

	/* Version state. */
	M_ERR(ckptd_pool_version_set(p, "job", 7, CKPTD_VER_COMMITTED), -ENOENT);
	M_ERR(ckptd_pool_version_set(p, "job", 1, 42), -EINVAL);
	M_OK(ckptd_pool_version_set(p, "job", 1, CKPTD_VER_COMMITTED));
	M_OK(ckptd_pool_find(p, "job", 1, 0, &f));
	T_ASSERT(f.ver_state == CKPTD_VER_COMMITTED);

	/* Dropping a version with a WRITING segment frees the rest, says busy. */
	M_ERR(ckptd_pool_version_drop(p, "job", 1), -EBUSY);
	M_ERR(ckptd_pool_find(p, "job", 1, 0, &f), -ENOENT);
	M_OK(ckptd_pool_find(p, "job", 1, 1, &f));
	M_OK(ckptd_pool_seg_free(p, b.id));
	M_ERR(ckptd_pool_seg_free(p, b.id), -ENOENT);
	M_ERR(ckptd_pool_version_drop(p, "job", 1), -ENOENT);

	/* max_segments bounds the bookkeeping: the fifth segment does not fit
	 * (nothing is evictable: all PENDING). */
	for (uint32_t r = 0; r < 4; r++)
		M_OK(ckptd_pool_alloc(p, "job", 2, r, 4096, NULL));
	M_ERR(ckptd_pool_alloc(p, "job", 2, 4, 4096, NULL), -ENOSPC);
	size_t n;
	ckptd_seg_info list[8];
	ckptd_pool_list(p, list, 2, &n);
	T_ASSERT(n == 4);
	ckptd_pool_list(p, list, 8, &n);
	T_ASSERT(n == 4);
	for (size_t i = 0; i < n; i++)
		T_ASSERT(list[i].version == 2 && strcmp(list[i].job, "job") == 0);
	M_ERR(ckptd_pool_version_drop(p, "job", 2), -EBUSY); /* all WRITING */
	for (size_t i = 0; i < n; i++)
		M_OK(ckptd_pool_seg_done(p, list[i].id));
	M_ERR(ckptd_pool_version_drop(p, "job", 2), 4);
	M_OK(ckptd_pool_check(p));
	ckptd_pool_close(p);
	ckptd_pool_close(NULL);

	/* Bad options. */
	ckptd_pool *q = NULL;
	ckptd_pool_opts o = { .size = sizeof(o), .bytes = 0 };
	M_ERR(ckptd_pool_open(&q, &o), -EINVAL);
	o.bytes = 4096;
	o.huge = 9;
	M_ERR(ckptd_pool_open(&q, &o), -EINVAL);
	o.huge = 0;
	o.size = 4;
	M_ERR(ckptd_pool_open(&q, &o), -EINVAL);
	T_ASSERT(q == NULL);
}

/* The default (huge pages where reserved) opens on any machine, and rounds
 * the size up to its page. */
static void default_open(void)
{
	ckptd_pool_opts o = { .size = sizeof(o), .bytes = 5000 };
	ckptd_pool *p = NULL;
	M_OK(ckptd_pool_open(&p, &o));
	ckptd_pool_stats st;
	ckptd_pool_stats_get(p, &st);
	T_ASSERT(st.bytes >= 5000 && st.bytes % st.align == 0);
	printf("default pool: %llu bytes, page %llu, hugetlb %d, locked %d\n",
	       (unsigned long long)st.bytes, (unsigned long long)st.align, st.hugetlb, st.locked);
	ckptd_seg_info a;
	M_OK(ckptd_pool_alloc(p, "j", 1, 0, 1, &a));
	T_ASSERT(a.cap == st.align);
	memset((char *)ckptd_pool_base(p) + a.off, 0x5a, a.len);
	ckptd_pool_close(p);
	/* Cancelled (an agent stopping while it pre-faults): no pool. */
	int cancel = 1;
	o.cancel = &cancel;
	p = NULL;
	M_ERR(ckptd_pool_open(&p, &o), -ECANCELED);
	T_ASSERT(p == NULL);
	cancel = 0;
	M_OK(ckptd_pool_open(&p, &o));
	ckptd_pool_close(p);
}

/* The pool is shared by the agent's threads: hammer it from several, each
 * its own job, then check that nothing was lost or doubled. */
typedef struct worker {
	ckptd_pool *p;
	char job[8];
	int fail;
} worker;

static void *worker_main(void *arg)
{
	worker *w = arg;
	uint64_t s = (uint64_t)(uintptr_t)w | 1, ids[16] = { 0 };
	for (int op = 0; op < 20000; op++) {
		int k = (int)(rnd(&s) % 16);
		if (ids[k]) {
			if (ckptd_pool_seg_free(w->p, ids[k]) < 0)
				w->fail = 1;
			ids[k] = 0;
		} else {
			ckptd_seg_info info;
			if (ckptd_pool_alloc(w->p, w->job, (uint64_t)op, 0, 4096 * (1 + rnd(&s) % 4), &info) == 0) {
				ids[k] = info.id;
				/* Our bytes are ours alone while we hold them. */
				memset((char *)ckptd_pool_base(w->p) + info.off, w->job[0], info.len);
			}
		}
	}
	for (int k = 0; k < 16; k++)
		if (ids[k] && ckptd_pool_seg_free(w->p, ids[k]) < 0)
			w->fail = 1;
	return NULL;
}

static void threads(void)
{
	ckptd_pool *p = m_pool(128 * 4096, 0, NULL, NULL);
	worker w[4];
	pthread_t t[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (worker){ .p = p };
		snprintf(w[i].job, sizeof(w[i].job), "%c", 'a' + i);
		T_ASSERT(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		T_ASSERT(!w[i].fail);
	}
	ckptd_pool_stats st;
	ckptd_pool_stats_get(p, &st);
	T_ASSERT(st.segments == 0 && st.free == st.bytes && st.free_extents == 1);
	M_OK(ckptd_pool_check(p));
	ckptd_pool_close(p);
}

int main(void)
{
	threads();
	api_errors();
	default_open();
	for (uint64_t seed = 1; seed <= 8; seed++)
		random_run(seed * 0x9E3779B97F4A7C15ull);
	printf("test_mem_alloc: ok\n");
	return T_EXIT_PASS;
}
