/* Eviction planning of the peer pool (ckptd/roles/peer_plan.c): room is
 * made in one contiguous range, never by evicting in two places.
 *
 *  fragmented   another job over its share by one slot's worth: evicting
 *               its oldest slot (first fit's pick) frees nothing usable
 *               and leaves it at its share; the plan evicts the slot next
 *               to the free gap instead and the lease fits.
 *  protected    evictable bytes enough in all, but every wide enough range
 *               holds a restore point: refused, and only a plan allowed to
 *               evict restore points would fit (the reason named).
 *  share        a job's two adjacent copies would fit but evicting both
 *               pushes it below its share: refused.
 *  cost         own copies before others', fewer bytes before more, a free
 *               gap before any eviction.
 *  brute        random pools against every window tried by hand.
 *  scaling      CPU time per slot at 2^14 and 2^18 slots within 4x (the
 *               least of three runs; quadratic work would be 16x). */
#include "ckpt.h"
#include "helpers.h"

#include "roles/peer_plan.h"

#include <errno.h>
#include <stdlib.h>

#define P 4096ull

static ckptd_pext ext(uint64_t page, uint64_t pages, int cls, uint32_t job)
{
	return (ckptd_pext){ .off = page * P, .len = pages * P, .cls = cls, .job = job };
}

static int plan(const ckptd_pext *x, size_t n, uint64_t pages, uint64_t want, const uint64_t *allow,
                size_t nj, unsigned relax, size_t *f, size_t *c, uint64_t *off)
{
	*f = *c = 99;
	*off = 0;
	return ckptd__peer_plan(x, n, pages * P, want * P, allow, nj, relax, f, c, off);
}

static int fragmented(void)
{
	/* 16 pages, jobs A (index 0) and B leasing: A's share is 8 pages,
	 * it holds 10. */
	ckptd_pext x[] = { ext(0, 2, CKPTD_PX_OTHER, 0), ext(2, 6, CKPTD_PX_KEEP, 0), /* gap 8..10 */
		           ext(10, 2, CKPTD_PX_OTHER, 0), ext(12, 4, CKPTD_PX_BUSY, 0) };
	uint64_t allow[] = { 2 * P };
	size_t f, c;
	uint64_t off;
	T_OK(plan(x, 4, 16, 4, allow, 1, 0, &f, &c, &off));
	T_ASSERT(f == 2 && c == 1 && off == 8 * P);
	return 0;
}

static int protected(void)
{
	ckptd_pext x[] = { ext(0, 2, CKPTD_PX_OWN, 0), ext(2, 2, CKPTD_PX_KEEP, 0), ext(4, 2, CKPTD_PX_OWN, 0),
		           ext(6, 2, CKPTD_PX_KEEP, 0) };
	size_t f, c;
	uint64_t off;
	T_ERR(plan(x, 4, 8, 4, NULL, 0, 0, &f, &c, &off), -ENOSPC);
	T_ERR(plan(x, 4, 8, 4, NULL, 0, CKPTD_PLAN_ANY_SHARE, &f, &c, &off), -ENOSPC);
	T_OK(plan(x, 4, 8, 4, NULL, 0, CKPTD_PLAN_ANY_SHARE | CKPTD_PLAN_ANY_KEEP, &f, &c, &off));
	T_ASSERT(c == 2 && off == (f == 0 ? 0 : f == 1 ? 2 * P : 4 * P));
	/* A busy slot (being written or read) stands in the way whatever the relaxation. */
	x[1].cls = CKPTD_PX_BUSY;
	x[3].cls = CKPTD_PX_BUSY;
	T_ERR(plan(x, 4, 8, 4, NULL, 0, CKPTD_PLAN_ANY_SHARE | CKPTD_PLAN_ANY_KEEP, &f, &c, &off), -ENOSPC);
	return 0;
}

static int share(void)
{
	ckptd_pext x[] = { ext(0, 2, CKPTD_PX_OTHER, 1), ext(2, 2, CKPTD_PX_OTHER, 1), ext(4, 4, CKPTD_PX_BUSY, 0) };
	uint64_t allow[] = { 0, 2 * P };
	size_t f, c;
	uint64_t off;
	T_ERR(plan(x, 3, 8, 4, allow, 2, 0, &f, &c, &off), -ENOSPC);
	T_OK(plan(x, 3, 8, 4, allow, 2, CKPTD_PLAN_ANY_SHARE, &f, &c, &off));
	T_ASSERT(f == 0 && c == 2 && off == 0);
	allow[1] = 4 * P;
	T_OK(plan(x, 3, 8, 4, allow, 2, 0, &f, &c, &off));
	T_ASSERT(f == 0 && c == 2);
	/* Two jobs each within allowance in one window. */
	ckptd_pext y[] = { ext(0, 2, CKPTD_PX_OTHER, 0), ext(2, 2, CKPTD_PX_OTHER, 1), ext(4, 4, CKPTD_PX_BUSY, 0) };
	allow[0] = allow[1] = 2 * P;
	T_OK(plan(y, 3, 8, 4, allow, 2, 0, &f, &c, &off));
	T_ASSERT(f == 0 && c == 2);
	return 0;
}

static int cost(void)
{
	/* Other (4 pages at 4) vs own (4 pages at 1): the own copy goes. */
	ckptd_pext x[] = { ext(0, 4, CKPTD_PX_OTHER, 0), ext(4, 4, CKPTD_PX_BUSY, 0), ext(8, 4, CKPTD_PX_OWN, 0) };
	uint64_t allow[] = { 8 * P };
	size_t f, c;
	uint64_t off;
	T_OK(plan(x, 3, 12, 4, allow, 1, 0, &f, &c, &off));
	T_ASSERT(f == 2 && c == 1 && off == 8 * P);
	/* Fewer bytes: one own slot of 4 pages over two of 3 pages next to each other. */
	ckptd_pext y[] = { ext(0, 3, CKPTD_PX_OWN, 0), ext(3, 3, CKPTD_PX_OWN, 0), ext(6, 2, CKPTD_PX_KEEP, 0),
		           ext(8, 4, CKPTD_PX_OWN, 0) };
	T_OK(plan(y, 4, 12, 4, allow, 1, 0, &f, &c, &off));
	T_ASSERT(f == 3 && c == 1 && off == 8 * P);
	/* A free gap wins over any eviction, even at the far end. */
	T_OK(plan(y, 4, 16, 4, allow, 1, 0, &f, &c, &off));
	T_ASSERT(c == 0 && off == 12 * P);
	/* An empty pool. */
	T_OK(plan(NULL, 0, 4, 4, NULL, 0, 0, &f, &c, &off));
	T_ASSERT(c == 0 && off == 0);
	T_ERR(plan(NULL, 0, 4, 5, NULL, 0, 0, &f, &c, &off), -ENOSPC);
	return 0;
}

static uint64_t weight_of(int cls)
{
	return cls == CKPTD_PX_OWN ? 1 : cls == CKPTD_PX_IDLE ? 2 : cls == CKPTD_PX_STALE ? 8 : 4;
}

/* Every window i..j-1, checked on its own. */
static int brute(void)
{
	srand(17);
	for (int it = 0; it < 20000; it++) {
		ckptd_pext x[12];
		uint64_t allow[3];
		size_t n = (size_t)(rand() % 12), nj = 3;
		uint64_t page = 0;
		for (size_t k = 0; k < n; k++) {
			page += (uint64_t)(rand() % 3 == 0 ? rand() % 3 : 0); /* gaps now and then */
			x[k] = ext(page, 1 + (uint64_t)(rand() % 4), rand() % 6, (uint32_t)(rand() % 3));
			page += x[k].len / P;
		}
		uint64_t pages = page + (uint64_t)(rand() % 3), want = 1 + (uint64_t)(rand() % 8);
		for (size_t j = 0; j < nj; j++)
			allow[j] = (uint64_t)(rand() % 6) * P;
		unsigned relax = (unsigned)(rand() % 4);
		uint64_t best = UINT64_MAX;
		for (size_t i = 0; i <= n; i++)
			for (size_t j = i; j <= n; j++) {
				uint64_t from = i ? x[i - 1].off + x[i - 1].len : 0, to = j < n ? x[j].off : pages * P;
				uint64_t spent[3] = { 0 }, c = 0;
				int ok = to - from >= want * P;
				for (size_t k = i; k < j && ok; k++) {
					int cls = x[k].cls;
					ok = cls >= CKPTD_PX_OWN || (cls == CKPTD_PX_KEEP && (relax & CKPTD_PLAN_ANY_KEEP));
					if (cls == CKPTD_PX_OTHER && !(relax & CKPTD_PLAN_ANY_SHARE))
						ok = ok && (spent[x[k].job] += x[k].len) <= allow[x[k].job];
					c += x[k].len * weight_of(cls);
				}
				if (ok && c < best)
					best = c;
			}
		size_t f, c;
		uint64_t off;
		int r = plan(x, n, pages, want, allow, nj, relax, &f, &c, &off);
		if (best == UINT64_MAX) {
			if (r != -ENOSPC)
				T_FAIL("pool %d: planned %zu+%zu where no window fits", it, f, c);
			continue;
		}
		if (r < 0)
			T_FAIL("pool %d: no plan where a window of cost %llu fits", it, (unsigned long long)best);
		uint64_t got = 0, to = f + c < n ? x[f + c].off : pages * P;
		for (size_t k = f; k < f + c; k++)
			got += x[k].len * weight_of(x[k].cls);
		if (got != best || off != (f ? x[f - 1].off + x[f - 1].len : 0) || to - off < want * P)
			T_FAIL("pool %d: plan %zu+%zu at %llu costs %llu, best %llu", it, f, c, (unsigned long long)off,
			       (unsigned long long)got, (unsigned long long)best);
	}
	return 0;
}

/* CPU seconds per slot planning over n slots (reps times): own copies
 * between restore points, the only fit at the far end. */
static double per_slot(size_t n, int reps)
{
	ckptd_pext *x = calloc(n, sizeof(*x));
	uint64_t allow[1] = { UINT64_MAX };
	if (!x)
		return -1;
	for (size_t k = 0; k < n; k++)
		x[k] = ext(k, 1, k % 2 ? CKPTD_PX_KEEP : k % 4 ? CKPTD_PX_OTHER : CKPTD_PX_OWN, 0);
	x[n - 1].cls = x[n - 2].cls = CKPTD_PX_OWN;
	double t0 = t_cpu_s();
	for (int r = 0; r < reps; r++) {
		size_t f, c;
		uint64_t off;
		if (ckptd__peer_plan(x, n, n * P, 2 * P, allow, 1, 0, &f, &c, &off) < 0 || f != n - 2 || c != 2) {
			free(x);
			return -1;
		}
	}
	double t = (t_cpu_s() - t0) / ((double)n * reps);
	free(x);
	return t;
}

static int scaling(void)
{
	double small = t_least_cpu(per_slot, 1u << 14, 64), large = t_least_cpu(per_slot, 1u << 18, 4);
	T_ASSERT(small > 0 && large > 0);
	fprintf(stderr, "planning: %.1f ns per slot at 2^14 slots, %.1f at 2^18\n", small * 1e9, large * 1e9);
	T_ASSERT(large < 4 * small + 20e-9); /* quadratic would be 16x */
	return 0;
}

int main(void)
{
	if (fragmented() || protected() || share() || cost() || brute() || scaling())
		return T_EXIT_FAIL;
	fprintf(stderr, "ok: peer pool eviction planning\n");
	return T_EXIT_PASS;
}
