/* `ckpt verify --daemon` matches each agent's answer (rank, tier, its
 * node) against the coordinator's copy list. Both come from daemons and
 * may hold 10^5 entries and more: an index sorted once by node, rank and
 * tier makes the matching n log n instead of answers x copies. */
#include "copies.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int key_cmp(const cli_copy *a, const cli_copy *b)
{
	int c = strcmp(a->node, b->node);
	if (c)
		return c;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if (a->tier != b->tier)
		return a->tier < b->tier ? -1 : 1;
	return 0;
}

/* qsort has no context argument: the list being sorted, one sort at a time
 * (the tool is single-threaded). */
static const cli_copy *sorting;

static int ix_cmp(const void *pa, const void *pb)
{
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
	int c = key_cmp(&sorting[a], &sorting[b]);
	return c ? c : (a > b) - (a < b); /* stable: the first listing first */
}

int cli_copies_sort(const cli_copy *cp, size_t n, size_t **ix)
{
	*ix = malloc((n ? n : 1) * sizeof(**ix));
	if (!*ix)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		(*ix)[i] = i;
	sorting = cp;
	qsort(*ix, n, sizeof(**ix), ix_cmp);
	sorting = NULL;
	return 0;
}

size_t cli_copies_node_end(const cli_copy *cp, const size_t *ix, size_t n, size_t lo)
{
	size_t hi = lo;
	while (hi < n && !strcmp(cp[ix[hi]].node, cp[ix[lo]].node))
		hi++;
	return hi;
}

cli_copy *cli_copies_find(cli_copy *cp, const size_t *ix, size_t lo, size_t hi, uint32_t rank, uint32_t tier)
{
	size_t end = hi;
	while (lo < hi) { /* the first at or after (rank, tier) */
		size_t mid = lo + (hi - lo) / 2;
		const cli_copy *m = &cp[ix[mid]];
		if (m->rank < rank || (m->rank == rank && m->tier < tier))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == end || cp[ix[lo]].rank != rank || cp[ix[lo]].tier != tier)
		return NULL;
	return &cp[ix[lo]];
}

void cli_copies_dups(cli_copy *cp, const size_t *ix, size_t lo, size_t hi)
{
	for (size_t k = lo + 1; k < hi; k++) {
		cli_copy *prev = &cp[ix[k - 1]], *c = &cp[ix[k]];
		if (!key_cmp(prev, c)) {
			c->code = prev->code;
			memcpy(c->text, prev->text, sizeof(c->text));
		}
	}
}
