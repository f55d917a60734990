/* The instances of an rs:K+M group's version (ckptd/coord/ecplan.c):
 *   - a fixed case: nodes holding 2, 1 and 3 ranks give 3 instances, each
 *     member the j-th lowest rank of its node, empty past its count, the
 *     layouts over those shards' lengths;
 *   - refusals, each naming what is wrong: K or M out of range, a member
 *     index past the group, a rank listed twice (on two nodes, or twice on
 *     one), an instance of empty images only;
 *   - 300 random spreads of ranks over rs:2+1, 4+2 and 8+2 groups (nodes
 *     with none included): every shard in exactly one instance, each
 *     node's ranks in rising order across instances, as many instances as
 *     the fullest node has shards;
 *   - instances with empty members encode and rebuild: for rs:4+2 with two
 *     nodes holding fewer ranks, the parity folded slice by slice, every
 *     pattern of one and two lost non-empty members rebuilt bit-exact from
 *     the others' pieces (checked by their block checksums), three refused. */
#include "coord/ecplan.h"

#include "helpers.h"

#include "ec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int plan(unsigned k, unsigned m, const ckptd_ec_shard *sh, size_t n, ckptd_ec_instance **in, size_t *ni,
                char *why, size_t cap)
{
	why[0] = '\0';
	return ckptd_coord_ec_plan(k, m, sh, n, in, ni, why, cap);
}

static void fixed(void)
{
	const ckptd_ec_shard sh[] = { { 5, 0, 1000 }, { 1, 0, 2000 }, { 3, 1, 777 },
		                          { 4, 2, 64 },   { 0, 2, 5000 }, { 2, 2, 3001 } };
	ckptd_ec_instance *in;
	size_t ni;
	char why[200];
	T_ASSERT(plan(2, 1, sh, 6, &in, &ni, why, sizeof(why)) == 0);
	T_ASSERT(ni == 3);
	const uint32_t E = CKPTD_EC_EMPTY;
	const uint32_t want[3][3] = { { 1, 3, 0 }, { 5, E, 2 }, { E, E, 4 } };
	const uint64_t lens[3][3] = { { 2000, 777, 5000 }, { 1000, 0, 3001 }, { 0, 0, 64 } };
	for (size_t j = 0; j < 3; j++)
		for (unsigned i = 0; i < 3; i++) {
			if (in[j].rank[i] != want[j][i] || in[j].g.len[i] != lens[j][i])
				T_FAIL("instance %zu member %u: rank %u (%llu bytes), want %u (%llu)", j, i, in[j].rank[i],
				       (unsigned long long)in[j].g.len[i], want[j][i], (unsigned long long)lens[j][i]);
		}
	/* slice = ceil(longest / K) rounded up to 64 */
	T_ASSERT(in[0].g.slice == 2560 && in[1].g.slice == 1536 && in[2].g.slice == 64);
	T_ASSERT(in[0].g.k == 2 && in[0].g.m == 1 && in[0].g.n == 3);
	free(in);
	printf("fixed case: 3 instances, members by rank, empty past each node's count\n");
}

static void refused(unsigned k, unsigned m, const ckptd_ec_shard *sh, size_t n, const char *needle)
{
	ckptd_ec_instance *in = (void *)1;
	size_t ni = 7;
	char why[200];
	int r = plan(k, m, sh, n, &in, &ni, why, sizeof(why));
	if (r != -EINVAL || in || ni || !strstr(why, needle))
		T_FAIL("rs:%u+%u: %d \"%s\", want -EINVAL naming \"%s\"", k, m, r, why, needle);
	printf("refused: %s\n", why);
}

static void refusals(void)
{
	const ckptd_ec_shard ok[] = { { 0, 0, 100 }, { 1, 1, 100 } };
	refused(0, 2, ok, 2, "K >= 1");
	refused(4, 0, ok, 2, "M >= 1");
	refused(60, 5, ok, 2, "K + M <= 64");
	const ckptd_ec_shard far[] = { { 0, 0, 100 }, { 9, 3, 100 } };
	refused(2, 1, far, 2, "rank 9: member 3 of a group of 3");
	const ckptd_ec_shard two[] = { { 0, 0, 100 }, { 4, 1, 100 }, { 4, 2, 50 } };
	refused(2, 1, two, 3, "rank 4 listed twice");
	const ckptd_ec_shard one[] = { { 0, 0, 100 }, { 6, 1, 100 }, { 6, 1, 100 } };
	refused(2, 1, one, 3, "rank 6 listed twice");
	const ckptd_ec_shard nil[] = { { 0, 1, 0 } };
	refused(2, 1, nil, 1, "instance 0");
	ckptd_ec_instance *in;
	size_t ni;
	char why[200];
	T_ASSERT(plan(2, 1, NULL, 0, &in, &ni, why, sizeof(why)) == 0 && ni == 0 && !in);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void random_spreads(void)
{
	static const unsigned km[3][2] = { { 2, 1 }, { 4, 2 }, { 8, 2 } };
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	for (int it = 0; it < 300; it++) {
		unsigned k = km[it % 3][0], m = km[it % 3][1], w = k + m;
		size_t n = rnd(&seed) % 40;
		ckptd_ec_shard sh[40];
		size_t per[CKPT_EC_MAX_PIECES] = { 0 }, most = 0;
		for (size_t i = 0; i < n; i++) {
			/* ranks 3 apart, shuffled by where they land */
			sh[i] = (ckptd_ec_shard){ (uint32_t)(3 * i + 1), (uint32_t)(rnd(&seed) % w), 1 + rnd(&seed) % 100000 };
			if (++per[sh[i].member] > most)
				most = per[sh[i].member];
		}
		ckptd_ec_instance *in;
		size_t ni;
		char why[200];
		if (plan(k, m, sh, n, &in, &ni, why, sizeof(why)) < 0)
			T_FAIL("spread %d: %s", it, why);
		T_ASSERT(ni == most);
		for (size_t i = 0; i < n; i++) {
			int found = 0;
			for (size_t j = 0; j < ni; j++)
				if (in[j].rank[sh[i].member] == sh[i].rank) {
					found++;
					T_ASSERT(in[j].g.len[sh[i].member] == sh[i].bytes);
				}
			if (found != 1)
				T_FAIL("spread %d: rank %u in %d instances", it, sh[i].rank, found);
		}
		for (unsigned mb = 0; mb < w; mb++)
			for (size_t j = 0; j < ni; j++) {
				uint32_t r = in[j].rank[mb];
				T_ASSERT((r == CKPTD_EC_EMPTY) == (j >= per[mb]));
				T_ASSERT(r != CKPTD_EC_EMPTY || in[j].g.len[mb] == 0);
				if (j && r != CKPTD_EC_EMPTY)
					T_ASSERT(in[j - 1].rank[mb] < r);
			}
		free(in);
	}
	printf("300 random spreads: every shard in one instance, ranks rising per node\n");
}

/* ------------------------------------------------ encode and rebuild */

#define K 4
#define M 2
#define W (K + M)

typedef struct mem {
	const ckpt_ecg *g;
	uint8_t *img[W];
	uint8_t *par[W][M]; /* [stripe][row] */
	int lost[W];
} mem;

static uint8_t *abuf(size_t len)
{
	uint8_t *p = aligned_alloc(CKPT_EC_ALIGN, (len + CKPT_EC_ALIGN) / CKPT_EC_ALIGN * CKPT_EC_ALIGN);
	T_ASSERT(p);
	memset(p, 0, (len + CKPT_EC_ALIGN) / CKPT_EC_ALIGN * CKPT_EC_ALIGN);
	return p;
}

static int fetch(void *arg, unsigned s, unsigned p, uint64_t b, uint8_t *buf, const uint8_t **data,
                    uint64_t *sum, char *why, size_t cap)
{
	mem *x = arg;
	(void)data; /* copies into buf */
	const ckpt_ecg *g = x->g;
	unsigned h = ckpt__ecg_holder(g, s, p);
	if (x->lost[h]) {
		snprintf(why, cap, "member %u lost", h);
		return -EIO;
	}
	const uint8_t *piece = p < K ? x->img[h] + (uint64_t)p * g->slice : x->par[s][p - K];
	uint64_t have = p < K ? ckpt__ecg_have(g, h, p) : g->slice;
	uint64_t off = b * CKPT_ECG_BLOCK, len = g->slice - off < CKPT_ECG_BLOCK ? g->slice - off : CKPT_ECG_BLOCK;
	memset(buf, 0, len);
	if (have > off)
		memcpy(buf, piece + off, have - off < len ? have - off : len);
	*sum = ckpt__ecg_block_sum(g, piece, have, b);
	return 0;
}

static void encode_rebuild(void)
{
	/* 6 nodes; nodes 1 and 4 hold one rank, the others two: instance 1
	 * has two empty members. */
	ckptd_ec_shard sh[10];
	size_t n = 0;
	for (uint32_t node = 0; node < W; node++)
		for (uint32_t j = 0; j < (node == 1 || node == 4 ? 1u : 2u); j++)
			sh[n] = (ckptd_ec_shard){ (uint32_t)n, node, 150001 + 7919 * n }, n++;
	ckptd_ec_instance *in;
	size_t ni;
	char why[600];
	T_ASSERT(plan(K, M, sh, n, &in, &ni, why, sizeof(why)) == 0 && ni == 2);
	T_ASSERT(in[1].rank[1] == CKPTD_EC_EMPTY && in[1].rank[4] == CKPTD_EC_EMPTY);
	ckpt_ec *e;
	T_ASSERT(ckpt_ec_new(K, M, &e, why, sizeof(why)) == 0);
	unsigned rebuilt = 0, refused_ = 0;
	for (size_t j = 0; j < ni; j++) {
		mem x = { .g = &in[j].g };
		const ckpt_ecg *g = x.g;
		for (unsigned i = 0; i < W; i++) {
			x.img[i] = abuf(K * g->slice);
			t_fill(x.img[i], g->len[i], 77 + 10 * j + i);
		}
		/* The holders' rows, one data slice at a time, as they arrive. */
		for (unsigned s = 0; s < W; s++)
			for (unsigned t = 0; t < M; t++) {
				x.par[s][t] = abuf(g->slice);
				for (unsigned d = 0; d < K; d++) {
					unsigned i = ckpt__ecg_holder(g, s, d);
					uint64_t have = ckpt__ecg_have(g, i, d);
					if (have)
						T_ASSERT(ckpt_ec_update(e, t, d, have, x.img[i] + (uint64_t)d * g->slice, x.par[s][t]) == 0);
				}
			}
		uint8_t *dst = abuf(K * g->slice);
		for (unsigned a = 0; a < W; a++)
			for (unsigned b = a; b < W; b++) {
				memset(x.lost, 0, sizeof(x.lost));
				x.lost[a] = x.lost[b] = 1;
				for (unsigned lost = 0; lost < W; lost++) {
					if (!x.lost[lost] || !g->len[lost])
						continue;
					if (ckpt__ecg_rebuild(g, e, lost, fetch, &x, NULL, dst, why, sizeof(why)) < 0)
						T_FAIL("instance %zu, members %u and %u lost: rebuild of %u: %s", j, a, b, lost, why);
					if (memcmp(dst, x.img[lost], g->len[lost]))
						T_FAIL("instance %zu: member %u rebuilt wrong", j, lost);
					rebuilt++;
				}
				/* and a third member lost: too many */
				unsigned c = (b + 1) % W;
				if (c == a || b == a || !g->len[a])
					continue;
				x.lost[c] = 1;
				int r = ckpt__ecg_rebuild(g, e, a, fetch, &x, NULL, dst, why, sizeof(why));
				if (r != -ENODATA || !strstr(why, "stripe"))
					T_FAIL("instance %zu, 3 lost: %d %s", j, r, why);
				refused_++;
			}
		free(dst);
		for (unsigned i = 0; i < W; i++) {
			free(x.img[i]);
			for (unsigned t = 0; t < M; t++)
				free(x.par[i][t]);
		}
	}
	ckpt_ec_free(e);
	free(in);
	T_ASSERT(rebuilt > 40 && refused_ > 10);
	printf("rs:4+2 with empty members: %u rebuilds bit-exact, %u three-loss patterns refused\n", rebuilt, refused_);
}

int main(void)
{
	fixed();
	refusals();
	random_spreads();
	encode_rebuild();
	printf("ok\n");
	return T_EXIT_PASS;
}
