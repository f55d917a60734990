/* Partner placement: where each node's ranks keep their PEER_MEM copies.
 *
 * The nodes form a ring that deals the failure domains out in turn: the
 * first node of each rack, then the second of each, and so on (racks and
 * nodes in name order). A node's partners are the next eligible nodes along
 * the ring, those of another failure domain first: losing a rack then never
 * takes a shard and its partner copy together while another rack can hold
 * it. Every node's first partner is chosen before anyone's second, and so
 * on; among the candidates a node takes the one holding the fewest copies
 * so far, the nearest along the ring on a tie: with racks of equal size
 * that is the ring order and each node receives exactly one copy per
 * round; with a rack much larger than the others its copies still spread
 * over every other node instead of piling on the first one. O(n^2 r), run
 * once per change of membership. */
#include "coord.h"

#include <errno.h>

#include <stdlib.h>
#include <string.h>

static const char *dom(const ckptd_place_node *x)
{
	return x->domain ? x->domain : "";
}

static int same_domain(const ckptd_place_node *a, const ckptd_place_node *b)
{
	return dom(a)[0] && !strcmp(dom(a), dom(b));
}

typedef struct slot {
	const ckptd_place_node *n;
	size_t idx;  /* into the caller's array */
	size_t pos;  /* its place among its domain's nodes */
} slot;

static int taken(const size_t *o, size_t k, size_t idx)
{
	for (size_t i = 0; i < k; i++)
		if (o[i] == idx)
			return 1;
	return 0;
}

static int by_domain_name(const void *x, const void *y)
{
	const slot *a = x, *b = y;
	int c = strcmp(dom(a->n), dom(b->n));
	return c ? c : strcmp(a->n->node, b->n->node);
}

static int by_ring(const void *x, const void *y)
{
	const slot *a = x, *b = y;
	if (a->pos != b->pos)
		return a->pos < b->pos ? -1 : 1;
	return by_domain_name(x, y);
}

int ckptd_coord_place(const ckptd_place_node *nodes, size_t n, uint32_t replicas, size_t *out, size_t *count)
{
	slot *r = calloc(n ? n : 1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		r[i] = (slot){ &nodes[i], i, 0 };
	qsort(r, n, sizeof(*r), by_domain_name);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(dom(r[i].n), dom(r[i - 1].n)))
			r[i].pos = r[i - 1].pos + 1;
	qsort(r, n, sizeof(*r), by_ring);
	size_t *load = calloc(n ? n : 1, sizeof(*load));
	if (!load) {
		free(r);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		count[i] = 0;
	/* Every node's first partner before anyone's second: the first ones,
	 * where the copies go unless a partner fails, are spread evenly, and the
	 * later ones (further copies, spares) too. */
	for (uint32_t k = 0; k < replicas; k++)
		for (size_t self = 0; self < n; self++) {
			size_t *o = out + r[self].idx * replicas, *have = &count[r[self].idx];
			if (*have < k)
				continue; /* no candidate was left for an earlier one */
			/* Pass 0: other failure domains; pass 1: this node's own. */
			size_t best = 0, bstep = 0;
			for (int pass = 0; pass < 2 && !bstep; pass++)
				for (size_t step = 1; step < n; step++) {
					size_t j = (self + step) % n;
					if (!r[j].n->eligible || same_domain(r[self].n, r[j].n) != pass || taken(o, *have, r[j].idx))
						continue;
					if (!bstep || load[j] < load[best])
						best = j, bstep = step;
				}
			if (!bstep)
				continue;
			load[best]++;
			o[(*have)++] = r[best].idx;
		}
	free(load);
	free(r);
	return 0;
}
