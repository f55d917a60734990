/* Eviction planning for the peer pool: a window of adjacent slots slides
 * over the pool in offset order. Evicting slots i..j frees the range from
 * the end of slot i-1 to the start of slot j+1, so freeing space in two
 * separate places (which first fit then cannot use) never counts. For each
 * right end j the left end is the largest i that still frees enough: costs
 * are positive, so a shorter window never costs more. Both ends only move
 * right, which keeps the plan linear in the number of slots. */
#include "peer_plan.h"

#include <errno.h>
#include <stdlib.h>

static int evictable(int cls, unsigned relax)
{
	return cls >= CKPTD_PX_OWN || (cls == CKPTD_PX_KEEP && (relax & CKPTD_PLAN_ANY_KEEP));
}

static uint64_t weight(int cls)
{
	switch (cls) {
	case CKPTD_PX_OWN:
		return 1;
	case CKPTD_PX_IDLE:
		return 2;
	case CKPTD_PX_STALE:
		return 8;
	default:
		return 4; /* OTHER, and KEEP when only asking why */
	}
}

/* Whether slot k's bytes count against its job's allowance. */
static int counted(const ckptd_pext *x, size_t k, unsigned relax)
{
	return x[k].cls == CKPTD_PX_OTHER && !(relax & CKPTD_PLAN_ANY_SHARE);
}

int ckptd__peer_plan(const ckptd_pext *x, size_t n, uint64_t size, uint64_t len, const uint64_t *allow,
                     size_t njobs, unsigned relax, size_t *first, size_t *count, uint64_t *off)
{
	uint64_t *spent = calloc(njobs ? njobs : 1, sizeof(*spent));
	uint64_t *cost = malloc((n + 1) * sizeof(*cost)); /* cost[k]: weighted bytes of x[0..k) */
	int r = -ENOSPC;
	if (!spent || !cost) {
		r = -ENOMEM;
		goto out;
	}
	cost[0] = 0;
	for (size_t k = 0; k < n; k++)
		cost[k + 1] = cost[k] + x[k].len * weight(x[k].cls);
	for (size_t k = 0; k < n; k++)
		if (counted(x, k, relax) && x[k].job >= njobs)
			goto out; /* a caller's mistake: no allowance for that job */
	uint64_t best = UINT64_MAX;
	/* Windows are [lo.. j-1] in slots 0-based with j the slot after them:
	 * lo is the leftmost left end the rules allow, i the one chosen. */
	size_t lo = 0, i = 0;
	for (size_t j = 0; j <= n; j++) {
		if (j > 0) {
			size_t k = j - 1; /* the slot the window grows by */
			if (!evictable(x[k].cls, relax)) {
				for (; lo < j; lo++)
					if (counted(x, lo, relax))
						spent[x[lo].job] -= x[lo].len;
			} else if (counted(x, k, relax)) {
				spent[x[k].job] += x[k].len;
				for (; spent[x[k].job] > allow[x[k].job]; lo++)
					if (counted(x, lo, relax))
						spent[x[lo].job] -= x[lo].len;
			}
		}
		uint64_t end = j < n ? x[j].off : size;
		/* Freed by evicting i..j-1: from the end of slot i-1 to end. */
#define FROM(i_) ((i_) ? x[(i_) - 1].off + x[(i_) - 1].len : 0)
		if (i < lo)
			i = lo;
		while (i < j && end - FROM(i + 1) >= len)
			i++;
		if (end - FROM(i) >= len && cost[j] - cost[i] < best) {
			best = cost[j] - cost[i];
			*first = i;
			*count = j - i;
			*off = FROM(i);
			r = 0;
		}
#undef FROM
	}
out:
	free(spent);
	free(cost);
	return r;
}
