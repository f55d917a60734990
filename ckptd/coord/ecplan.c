/* The instances of an rs:K+M group's version (ecplan.h). A group is of
 * nodes; a node holds any number of a job's ranks. Cutting the version
 * into instances of one shard per member keeps every member image a shard
 * image, which the rebuild checks whole (header, footer, every chunk),
 * and asks nothing of how ranks are spread: a node with fewer ranks is an
 * empty member of the instances past its count (it still holds its
 * parity). With r ranks on each of n nodes that is r instances of n full
 * members: parity (M/K) x each shard, as the layout promises. */
#include "ecplan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_member_rank(const void *x, const void *y)
{
	const ckptd_ec_shard *a = x, *b = y;
	if (a->member != b->member)
		return a->member < b->member ? -1 : 1;
	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

static int by_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return a < b ? -1 : a > b;
}

int ckptd_coord_ec_plan(unsigned k, unsigned m, const ckptd_ec_shard *sh, size_t nsh, ckptd_ec_instance **out,
                        size_t *n, char *why, size_t cap)
{
	*out = NULL;
	*n = 0;
	if (k < 1 || m < 1 || k + m > CKPT_EC_MAX_PIECES) {
		snprintf(why, cap, "rs:%u+%u: need K >= 1, M >= 1, K + M <= %u", k, m, CKPT_EC_MAX_PIECES);
		return -EINVAL;
	}
	unsigned w = k + m;
	ckptd_ec_shard *s = malloc((nsh ? nsh : 1) * sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (nsh)
		memcpy(s, sh, nsh * sizeof(*s)); /* sh may be NULL when empty */
	qsort(s, nsh, sizeof(*s), by_member_rank);
	size_t count[CKPT_EC_MAX_PIECES] = { 0 }, first[CKPT_EC_MAX_PIECES] = { 0 }, most = 0;
	int r = 0;
	for (size_t i = 0; i < nsh; i++) {
		if (s[i].member >= w) {
			snprintf(why, cap, "rank %u: member %u of a group of %u", s[i].rank, s[i].member, w);
			r = -EINVAL;
			goto out;
		}
		if (!count[s[i].member])
			first[s[i].member] = i;
		if (++count[s[i].member] > most)
			most = count[s[i].member];
	}
	/* A rank twice (on two nodes, or twice on one): a caller's mistake. */
	uint32_t *ranks = malloc((nsh ? nsh : 1) * sizeof(*ranks));
	if (!ranks) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nsh; i++)
		ranks[i] = s[i].rank;
	qsort(ranks, nsh, sizeof(*ranks), by_u32);
	for (size_t i = 1; i < nsh && !r; i++)
		if (ranks[i] == ranks[i - 1]) {
			snprintf(why, cap, "rank %u listed twice", ranks[i]);
			r = -EINVAL;
		}
	free(ranks);
	if (r < 0)
		goto out;
	if (!most)
		goto out;
	ckptd_ec_instance *in = calloc(most, sizeof(*in));
	if (!in) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < most; j++) {
		uint64_t lens[CKPT_EC_MAX_PIECES] = { 0 };
		for (unsigned i = 0; i < w; i++) {
			in[j].rank[i] = CKPTD_EC_EMPTY;
			if (j < count[i]) {
				const ckptd_ec_shard *x = &s[first[i] + j];
				in[j].rank[i] = x->rank;
				lens[i] = x->bytes;
			}
		}
		char e[160];
		if ((r = ckpt__ecg_init(&in[j].g, k, m, lens, e, sizeof(e))) < 0) {
			snprintf(why, cap, "instance %zu: %s", j, e);
			free(in);
			goto out;
		}
	}
	*out = in;
	*n = most;
out:
	free(s);
	return r;
}
