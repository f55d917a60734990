/* `ckpt verify --daemon` matches each agent's answer against the
 * coordinator's copy list (tools/ckpt/copies_match.c) in time bounded by
 * their sizes, not their product.
 *
 *  match     copies on several nodes, looked up by node, rank and tier:
 *            the right one found, absent ones not, a copy listed twice
 *            takes its first listing's result.
 *  scaling   every copy of 2^11 and of 2^17 ranks x 2 tiers on 64 nodes
 *            looked up once, as an agent's answer naming all of them
 *            would: CPU time per copy within 12x, the least of three runs
 *            (the sort's log and its cache misses measure 3-4x; answers x
 *            copies, as before, would be 64x). */
#include "helpers.h"

#include "copies.h"


#define NODES 64

static cli_copy *make(size_t ranks, size_t *n)
{
	*n = ranks * 2;
	cli_copy *cp = calloc(*n, sizeof(*cp));
	if (!cp)
		return NULL;
	for (size_t i = 0; i < *n; i++) { /* rank order, as the coordinator lists them */
		cp[i].rank = (uint32_t)(i / 2);
		cp[i].tier = i % 2 ? CKPT_TIER_PEER_MEM : CKPT_TIER_LOCAL_MEM;
		snprintf(cp[i].node, sizeof(cp[i].node), "n%zu", (i / 2 + (i % 2)) % NODES);
		cp[i].live = 1;
		cp[i].code = -1;
	}
	return cp;
}

static int match(void)
{
	size_t n, *ix;
	cli_copy *cp = make(100, &n);
	T_ASSERT(cp);
	/* rank 7 LOCAL_MEM on n7 listed twice */
	cli_copy *more = realloc(cp, (n + 1) * sizeof(*cp));
	T_ASSERT(more);
	cp = more;
	cp[n] = cp[14];
	n++;
	T_ASSERT(cli_copies_sort(cp, n, &ix) == 0);
	size_t seen = 0, nodes = 0;
	for (size_t lo = 0, hi; lo < n; lo = hi, nodes++) {
		hi = cli_copies_node_end(cp, ix, n, lo);
		for (size_t k = lo; k < hi; k++)
			T_ASSERT(!strcmp(cp[ix[k]].node, cp[ix[lo]].node));
		T_ASSERT(hi == n || strcmp(cp[ix[hi]].node, cp[ix[lo]].node));
		seen += hi - lo;
		if (strcmp(cp[ix[lo]].node, "n7"))
			continue;
		cli_copy *e = cli_copies_find(cp, ix, lo, hi, 7, CKPT_TIER_LOCAL_MEM);
		T_ASSERT(e == &cp[14]); /* the first listing */
		e->code = 2;
		snprintf(e->text, sizeof(e->text), "chunk 3: checksum mismatch");
		T_ASSERT(cli_copies_find(cp, ix, lo, hi, 6, CKPT_TIER_PEER_MEM) == &cp[13]);
		T_ASSERT(!cli_copies_find(cp, ix, lo, hi, 7, CKPT_TIER_PEER_MEM)); /* on n8 */
		T_ASSERT(!cli_copies_find(cp, ix, lo, hi, 8, CKPT_TIER_LOCAL_MEM));
		T_ASSERT(!cli_copies_find(cp, ix, lo, hi, 1000, CKPT_TIER_LOCAL_MEM));
		T_ASSERT(!cli_copies_find(cp, ix, lo, hi, 0, 0));
		cli_copies_dups(cp, ix, lo, hi);
	}
	T_ASSERT(seen == n && nodes == NODES);
	T_ASSERT(cp[n - 1].code == 2 && !strcmp(cp[n - 1].text, "chunk 3: checksum mismatch"));
	T_ASSERT(cp[13].code == -1 && cp[15].code == -1);
	free(ix);
	free(cp);
	T_ASSERT(cli_copies_sort(NULL, 0, &ix) == 0);
	free(ix);
	return 0;
}

/* CPU seconds per copy: sorted, then every copy found on its node's run. */
static double per_copy(size_t ranks, int reps)
{
	size_t n;
	cli_copy *cp = make(ranks, &n);
	if (!cp)
		return -1;
	double t0 = t_cpu_s();
	for (int r = 0; r < reps; r++) {
		size_t *ix;
		if (cli_copies_sort(cp, n, &ix) < 0)
			return -1;
		for (size_t lo = 0, hi; lo < n; lo = hi) {
			hi = cli_copies_node_end(cp, ix, n, lo);
			for (size_t k = lo; k < hi; k++) {
				const cli_copy *want = &cp[ix[k]];
				if (cli_copies_find(cp, ix, lo, hi, want->rank, want->tier) != want) {
					free(ix);
					free(cp);
					return -1;
				}
			}
		}
		free(ix);
	}
	double t = (t_cpu_s() - t0) / ((double)n * reps);
	free(cp);
	return t;
}

static int scaling(void)
{
	double small = t_least_cpu(per_copy, 1u << 11, 64), large = t_least_cpu(per_copy, 1u << 17, 1);
	T_ASSERT(small > 0 && large > 0);
	fprintf(stderr, "matching: %.0f ns per copy at 2^12 copies, %.0f at 2^18\n", small * 1e9, large * 1e9);
	T_ASSERT(large < 12 * small);
	return 0;
}

int main(void)
{
	if (match() || scaling())
		return T_EXIT_FAIL;
	fprintf(stderr, "ok: verify's matching of answers to copies\n");
	return T_EXIT_PASS;
}
