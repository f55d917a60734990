/* Partner placement (ckptd/coord/place.c): a ring in name order, other
 * failure domains first, never the node itself nor an ineligible node,
 * and every node receiving the same number of copies. */
#include "coord/coord.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c)                                                                 \
	do {                                                                         \
		if (!(c)) {                                                              \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c); \
			fails++;                                                             \
		}                                                                        \
	} while (0)

/* Runs placement; out rows of `rep` per node. */
static void place(const ckptd_place_node *n, size_t cnt, uint32_t rep, size_t *out, size_t *count)
{
	CHECK(ckptd_coord_place(n, cnt, rep, out, count) == 0);
}

static void ring_no_domains(void)
{
	/* Given in another order: the ring is by name. */
	ckptd_place_node n[4] = { { "c", NULL, 1 }, { "a", NULL, 1 }, { "d", NULL, 1 }, { "b", NULL, 1 } };
	size_t out[4 * 3], cnt[4];
	place(n, 4, 1, out, cnt);
	CHECK(cnt[1] == 1 && out[1] == 3); /* a -> b */
	CHECK(cnt[2] == 1 && out[2] == 1); /* d -> a: wraps */
	/* Two copies: every node its next two along the ring. */
	place(n, 4, 2, out, cnt);
	CHECK(cnt[1] == 2 && out[1 * 2] == 3 && out[1 * 2 + 1] == 0); /* a -> b, c */
	CHECK(cnt[3] == 2 && out[3 * 2] == 0 && out[3 * 2 + 1] == 2); /* b -> c, d */
	/* More replicas than other nodes: every other node, once. */
	place(n, 4, 3, out, cnt);
	for (int i = 0; i < 4; i++) {
		CHECK(cnt[i] == 3);
		int seen = 1 << i;
		for (int j = 0; j < 3; j++)
			seen |= 1 << out[i * 3 + j];
		CHECK(seen == 0xf);
	}
	place(n, 1, 1, out, cnt);
	CHECK(cnt[0] == 0); /* alone */
	CHECK(ckptd_coord_place(n, 0, 1, out, cnt) == 0);
}

static void skips_ineligible(void)
{
	ckptd_place_node n[4] = { { "a", NULL, 1 }, { "b", NULL, 0 }, { "c", NULL, 1 }, { "d", NULL, 0 } };
	size_t out[4 * 2], cnt[4];
	place(n, 4, 2, out, cnt);
	CHECK(cnt[0] == 1 && out[0] == 2);
	/* A node without a pool still gets partners. */
	CHECK(cnt[1] == 2 && ((out[2] == 2 && out[3] == 0) || (out[2] == 0 && out[3] == 2)));
	CHECK(cnt[3] == 2);
}

static void other_domain_first(void)
{
	ckptd_place_node n[4] = { { "a", "r1", 1 }, { "b", "r1", 1 }, { "c", "r2", 1 }, { "d", "r2", 1 } };
	size_t out[4 * 3], cnt[4];
	/* Ring: a (r1), c (r2), b (r1), d (r2). */
	place(n, 4, 1, out, cnt);
	CHECK(cnt[0] == 1 && out[0] == 2); /* a -> c */
	CHECK(cnt[2] == 1 && out[2] == 1); /* c -> b */
	CHECK(cnt[3] == 1 && out[3] == 0); /* d -> a */
	/* Three copies: the other rack's two before the own rack's. */
	place(n, 4, 3, out, cnt);
	CHECK(cnt[0] == 3 && out[0] == 2 && out[1] == 3 && out[2] == 1);
	/* The other rack has no eligible node: the own rack's, rather than none. */
	n[2].eligible = n[3].eligible = 0;
	place(n, 4, 1, out, cnt);
	CHECK(cnt[0] == 1 && out[0] == 1);
}

/* Every node eligible, racks of equal size: each node receives exactly
 * `replicas` nodes' copies, never from its own rack. Racks of unequal size:
 * still off the rack, and bounded. */
/* One copy and two spares (what the coordinator asks for): the first
 * partners are all different nodes, and so are the second ones. */
static void spares_spread(void)
{
	ckptd_place_node n[4] = { { "n1", NULL, 1 }, { "n2", NULL, 1 }, { "n3", NULL, 1 }, { "n4", NULL, 1 } };
	size_t out[4 * 3], cnt[4];
	place(n, 4, 3, out, cnt);
	for (int k = 0; k < 3; k++) {
		int seen = 0;
		for (int i = 0; i < 4; i++) {
			CHECK(cnt[i] == 3 && out[i * 3 + k] != (size_t)i);
			seen |= 1 << out[i * 3 + k];
		}
		CHECK(seen == 0xf); /* k-th partners: a permutation */
	}
	ckptd_place_node r[4] = { { "n1", "r1", 1 }, { "n2", "r1", 1 }, { "n3", "r2", 1 }, { "n4", "r2", 1 } };
	place(r, 4, 3, out, cnt);
	int seen = 0;
	for (int i = 0; i < 4; i++) {
		CHECK(strcmp(r[out[i * 3]].domain, r[i].domain) != 0);
		seen |= 1 << out[i * 3];
	}
	CHECK(seen == 0xf);
}

static void balanced(void)
{
	enum { N = 64 };
	ckptd_place_node n[N];
	char names[N][8];
	const char *racks[5] = { "r0", "r1", "r2", "r3", "r4" };
	for (int uneven = 0; uneven < 2; uneven++) {
		for (int i = 0; i < N; i++) {
			snprintf(names[i], sizeof(names[i]), "n%02d", i);
			n[i] = (ckptd_place_node){ names[i], racks[uneven ? (i < 40 ? 0 : 1 + i % 4) : i / 16], 1 };
		}
		for (uint32_t rep = 1; rep <= 2; rep++) {
			int recv[N] = { 0 };
			size_t out[N * 2], cnt[N];
			place(n, N, rep, out, cnt);
			for (int i = 0; i < N; i++) {
				CHECK(cnt[i] == rep);
				for (size_t j = 0; j < cnt[i]; j++) {
					size_t p = out[(size_t)i * rep + j];
					CHECK(p != (size_t)i);
					CHECK(strcmp(n[p].domain, n[i].domain) != 0);
					recv[p]++;
				}
			}
			int lo = N, hi = 0;
			for (int i = 0; i < N; i++) {
				lo = recv[i] < lo ? recv[i] : lo;
				hi = recv[i] > hi ? recv[i] : hi;
			}
			fprintf(stderr, "%s racks, replicas %u: copies received per node %d..%d\n", uneven ? "uneven" : "even",
			        rep, lo, hi);
			if (!uneven)
				CHECK(lo == (int)rep && hi == (int)rep);
			else
				CHECK(hi <= 4 * (int)rep);
		}
	}
}

int main(void)
{
	ring_no_domains();
	skips_ineligible();
	other_domain_first();
	spares_spread();
	balanced();
	if (fails)
		fprintf(stderr, "%d checks failed\n", fails);
	return fails ? 1 : 0;
}
