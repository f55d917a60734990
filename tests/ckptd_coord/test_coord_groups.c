/* rs:K+M groups (ckptd/coord/groups.c): K + M nodes each, never two of a
 * group in one failure domain of any kind (host, rack, switch, power),
 * the nodes hardest to place first so that a crowded rack does not leave
 * groups unformed, ineligible nodes never in one, members in name order. */
#include "coord/coord.h"

#include "helpers.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define NMAX 64

typedef struct cl {
	ckptd_group_node n[NMAX];
	char name[NMAX][16], lab[NMAX][CKPTD_GROUP_DOMAINS][16];
	size_t count;
	uint32_t g[NMAX], m[NMAX];
	size_t ng;
} cl;

static void add(cl *c, const char *host, const char *rack, const char *sw, const char *pw, int eligible)
{
	size_t i = c->count++;
	snprintf(c->name[i], sizeof(c->name[i]), "n%02zu", i);
	const char *v[CKPTD_GROUP_DOMAINS] = { host, rack, sw, pw };
	c->n[i].node = c->name[i];
	for (unsigned d = 0; d < CKPTD_GROUP_DOMAINS; d++) {
		snprintf(c->lab[i][d], sizeof(c->lab[i][d]), "%s", v[d] ? v[d] : "");
		c->n[i].dom[d] = c->lab[i][d];
	}
	c->n[i].eligible = eligible;
}

/* Groups formed, and every rule they must keep. */
static size_t form(cl *c, unsigned width)
{
	T_ASSERT(ckptd_coord_groups(c->n, c->count, width, c->g, c->m, &c->ng) == 0);
	for (size_t gi = 0; gi < c->ng; gi++) {
		size_t idx[NMAX], k = 0;
		for (size_t i = 0; i < c->count; i++)
			if (c->g[i] == gi)
				idx[k++] = i;
		T_ASSERT(k == width);
		for (size_t a = 0; a < k; a++) {
			T_ASSERT(c->n[idx[a]].eligible);
			T_ASSERT(c->m[idx[a]] < width);
			for (size_t b = a + 1; b < k; b++) {
				T_ASSERT(c->m[idx[a]] != c->m[idx[b]]);
				/* members in name order */
				T_ASSERT((c->m[idx[a]] < c->m[idx[b]]) == (strcmp(c->name[idx[a]], c->name[idx[b]]) < 0));
				for (unsigned d = 0; d < CKPTD_GROUP_DOMAINS; d++)
					T_ASSERT(!c->lab[idx[a]][d][0] || strcmp(c->lab[idx[a]][d], c->lab[idx[b]][d]));
			}
		}
	}
	for (size_t i = 0; i < c->count; i++)
		T_ASSERT(c->g[i] == UINT32_MAX ? c->m[i] == UINT32_MAX : c->g[i] < c->ng);
	return c->ng;
}

int main(void)
{
	cl c;
	char h[16], r[16];
	/* No labels but the host: 10 nodes, one group of 10; 11: one left over. */
	memset(&c, 0, sizeof(c));
	for (int i = 0; i < 11; i++) {
		snprintf(h, sizeof(h), "h%d", i);
		add(&c, h, NULL, NULL, NULL, 1);
	}
	T_ASSERT(form(&c, 10) == 1);
	T_ASSERT(form(&c, 12) == 0);
	T_ASSERT(form(&c, 3) == 3);
	/* Two agents on one host are one failure domain. */
	memset(&c, 0, sizeof(c));
	for (int i = 0; i < 6; i++) {
		snprintf(h, sizeof(h), "h%d", i / 2);
		add(&c, h, NULL, NULL, NULL, 1);
	}
	T_ASSERT(form(&c, 3) == 2);
	T_ASSERT(form(&c, 4) == 0);
	/* 4 racks of 5: groups of 4 take one node per rack; of 6, none fits. */
	memset(&c, 0, sizeof(c));
	for (int i = 0; i < 20; i++) {
		snprintf(h, sizeof(h), "h%d", i);
		snprintf(r, sizeof(r), "r%d", i % 4);
		add(&c, h, r, NULL, NULL, 1);
	}
	T_ASSERT(form(&c, 4) == 5);
	T_ASSERT(form(&c, 6) == 0);
	/* A crowded rack: r0 holds 6 of 12 nodes, six racks one each. Groups
	 * of 3 must each take an r0 node to make 3 groups (name order alone
	 * would group the singles first and make 2). */
	memset(&c, 0, sizeof(c));
	for (int i = 0; i < 12; i++) {
		snprintf(h, sizeof(h), "h%d", i);
		snprintf(r, sizeof(r), "r%d", i < 6 ? i + 1 : 0);
		add(&c, h, r, NULL, NULL, 1);
	}
	T_ASSERT(form(&c, 3) == 3);
	/* Switches and power feeds count as well: 8 nodes, racks all
	 * different, but pairs share a power feed and quads a switch. */
	memset(&c, 0, sizeof(c));
	for (int i = 0; i < 8; i++) {
		char sw[16], pw[16];
		snprintf(h, sizeof(h), "h%d", i);
		snprintf(r, sizeof(r), "r%d", i);
		snprintf(sw, sizeof(sw), "s%d", i / 4);
		snprintf(pw, sizeof(pw), "p%d", i / 2);
		add(&c, h, r, sw, pw, 1);
	}
	T_ASSERT(form(&c, 2) == 4); /* one of each switch */
	T_ASSERT(form(&c, 3) == 0); /* only two switches */
	for (int i = 0; i < 8; i++)
		c.lab[i][CKPTD_GDOM_SWITCH][0] = '\0';
	T_ASSERT(form(&c, 4) == 2); /* one of each power pair */
	T_ASSERT(form(&c, 5) == 0);
	/* Ineligible nodes (down, no peer pool) are in no group. */
	memset(&c, 0, sizeof(c));
	for (int i = 0; i < 7; i++) {
		snprintf(h, sizeof(h), "h%d", i);
		add(&c, h, NULL, NULL, NULL, i != 3);
	}
	T_ASSERT(form(&c, 3) == 2 && c.g[3] == UINT32_MAX);
	T_ASSERT(form(&c, 7) == 0);
	/* Random labels: the rules hold whatever the cluster. */
	uint64_t x = 88172645463325252ull;
	for (int round = 0; round < 200; round++) {
		memset(&c, 0, sizeof(c));
		size_t n = 8 + round % 50;
		for (size_t i = 0; i < n; i++) {
			char sw[16], pw[16];
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			snprintf(h, sizeof(h), "h%llu", (unsigned long long)(x % (n - 2)));
			snprintf(r, sizeof(r), "r%llu", (unsigned long long)(x >> 8) % 12);
			snprintf(sw, sizeof(sw), "s%llu", (unsigned long long)(x >> 16) % 16);
			snprintf(pw, sizeof(pw), "p%llu", (unsigned long long)(x >> 24) % 20);
			add(&c, h, r, (x >> 32) & 1 ? sw : NULL, pw, (x >> 40) % 10 != 0);
		}
		form(&c, 3 + round % 8);
	}
	printf("ok\n");
	return 0;
}
