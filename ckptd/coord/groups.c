/* Reed–Solomon groups of the peer tier's rs:K+M scheme (coord.h): sets of
 * K + M eligible nodes with at most one member per failure domain, of
 * every kind a node names (its host, rack, switch, power feed), so that
 * losing any one domain costs a group at most one member.
 *
 * Greedy, one group at a time: the nodes hardest to place go first (those
 * whose crowdedest domain holds the most eligible nodes still free), each
 * group taking the next node that clashes with none of its members, in
 * that order (name order on a tie). A group that cannot be filled is not
 * formed; its nodes stay ungrouped (their ranks keep partner copies).
 * Members of a group are listed in name order: member i holds stripe
 * parity as format/ecgroup.h lays it out. O(n^2 d) per change of
 * membership, n nodes and d domain kinds. */
#include "coord.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int ckptd_coord_group_clash(const ckptd_group_node *a, const ckptd_group_node *b)
{
	for (unsigned d = 0; d < CKPTD_GROUP_DOMAINS; d++)
		if (a->dom[d] && a->dom[d][0] && b->dom[d] && !strcmp(a->dom[d], b->dom[d]))
			return 1;
	return 0;
}

typedef struct gcand {
	size_t idx;
	size_t crowd; /* free eligible nodes sharing its crowdedest domain */
} gcand;

int ckptd_coord_groups(const ckptd_group_node *nodes, size_t n, unsigned width, uint32_t *group, uint32_t *member,
                       size_t *ngroups)
{
	*ngroups = 0;
	for (size_t i = 0; i < n; i++)
		group[i] = member[i] = UINT32_MAX;
	if (width < 2 || n < width)
		return 0;
	unsigned char *free_ = calloc(n, 1);
	gcand *c = calloc(n, sizeof(*c));
	size_t *pick = calloc(width, sizeof(*pick));
	if (!free_ || !c || !pick) {
		free(free_);
		free(c);
		free(pick);
		return -ENOMEM;
	}
	size_t left = 0;
	for (size_t i = 0; i < n; i++)
		left += free_[i] = nodes[i].eligible != 0;
	while (left >= width) {
		/* Order the free nodes: most crowded domain first, then by name. */
		size_t nc = 0;
		for (size_t i = 0; i < n; i++) {
			if (!free_[i])
				continue;
			size_t crowd = 0;
			for (unsigned d = 0; d < CKPTD_GROUP_DOMAINS; d++) {
				if (!nodes[i].dom[d] || !nodes[i].dom[d][0])
					continue;
				size_t same = 0;
				for (size_t j = 0; j < n; j++)
					same += free_[j] && nodes[j].dom[d] && !strcmp(nodes[i].dom[d], nodes[j].dom[d]);
				crowd = same > crowd ? same : crowd;
			}
			c[nc++] = (gcand){ i, crowd };
		}
		/* Insertion sort: n is a cluster's node count, and this runs once
		 * per membership change. */
		for (size_t a = 1; a < nc; a++) {
			gcand x = c[a];
			size_t b = a;
			while (b > 0 && (c[b - 1].crowd < x.crowd ||
			                 (c[b - 1].crowd == x.crowd && strcmp(nodes[c[b - 1].idx].node, nodes[x.idx].node) > 0))) {
				c[b] = c[b - 1];
				b--;
			}
			c[b] = x;
		}
		size_t got = 0;
		for (size_t a = 0; a < nc && got < width; a++) {
			int ok = 1;
			for (size_t b = 0; b < got && ok; b++)
				ok = !ckptd_coord_group_clash(&nodes[c[a].idx], &nodes[pick[b]]);
			if (ok)
				pick[got++] = c[a].idx;
		}
		if (got < width)
			break; /* the domains left cannot fill another group */
		for (size_t a = 1; a < width; a++) /* members in name order */
			for (size_t b = a; b > 0 && strcmp(nodes[pick[b - 1]].node, nodes[pick[b]].node) > 0; b--) {
				size_t t = pick[b];
				pick[b] = pick[b - 1];
				pick[b - 1] = t;
			}
		for (size_t b = 0; b < width; b++) {
			group[pick[b]] = (uint32_t)*ngroups;
			member[pick[b]] = (uint32_t)b;
			free_[pick[b]] = 0;
		}
		left -= width;
		++*ngroups;
	}
	free(free_);
	free(c);
	free(pick);
	return 0;
}
