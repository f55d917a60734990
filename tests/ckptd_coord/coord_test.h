/* Helpers of the ckptd_coord tests: a model of what the agents hold (the
 * source of truth a coordinator rebuilds from) and snapshots of a job's
 * versions to compare coordinators by. */
#ifndef CKPTD_COORD_TEST_H
#define CKPTD_COORD_TEST_H

#include "helpers.h"
#include "coord/coord.h"

#include <sys/stat.h>

/* One copy an agent holds. */
typedef struct sim_copy {
	char node[CKPTD_NAME_MAX + 1];
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t rank, world, tier;
	uint64_t bytes, checksum, lineage;
} sim_copy;

typedef struct sim {
	sim_copy *c;
	size_t n, cap;
} sim;

static inline uint64_t sim_checksum(const char *job, uint64_t version, uint32_t rank, uint64_t lineage)
{
	uint64_t h = 1469598103934665603ull ^ lineage;
	for (const char *p = job; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	h = (h ^ version) * 1099511628211ull;
	return (h ^ rank) * 1099511628211ull;
}

static inline void sim_add(sim *s, const char *node, const char *job, uint64_t version,
                           uint32_t rank, uint32_t world, uint32_t tier, uint64_t lineage)
{
	for (size_t i = 0; i < s->n; i++) {
		sim_copy *c = &s->c[i];
		if (!strcmp(c->node, node) && !strcmp(c->job, job) && c->version == version &&
		    c->rank == rank && c->tier == tier)
			return;
	}
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->c = realloc(s->c, s->cap * sizeof(*s->c));
		T_ASSERT(s->c);
	}
	sim_copy *c = &s->c[s->n++];
	memset(c, 0, sizeof(*c));
	snprintf(c->node, sizeof(c->node), "%s", node);
	snprintf(c->job, sizeof(c->job), "%s", job);
	c->version = version;
	c->rank = rank;
	c->world = world;
	c->tier = tier;
	c->bytes = 1000 + rank;
	c->lineage = lineage;
	c->checksum = sim_checksum(job, version, rank, lineage);
}

/* Records the copy in the model and reports it to the coordinator. */
static inline uint32_t sim_done(sim *s, ckptd_coord *co, const char *node, const char *job,
                                uint64_t version, uint32_t rank, uint32_t world, uint32_t tier,
                                uint64_t lineage)
{
	sim_add(s, node, job, version, rank, world, tier, lineage);
	uint32_t committed = 0;
	T_OK(ckptd_coord_shard_done(co, job, version, rank, world, tier, node, 1000 + rank,
	                            sim_checksum(job, version, rank, lineage), lineage, &committed));
	return committed;
}

/* Sends node's inventory from the model in batches of `batch`. */
static inline void sim_report(const sim *s, ckptd_coord *co, const char *node, size_t batch)
{
	ckptd_held_shard *e = calloc(batch, sizeof(*e));
	T_ASSERT(e);
	size_t k = 0, total = 0;
	for (size_t i = 0; i < s->n; i++)
		total += !strcmp(s->c[i].node, node);
	size_t sent = 0;
	for (size_t i = 0; i < s->n; i++) {
		const sim_copy *c = &s->c[i];
		if (strcmp(c->node, node))
			continue;
		ckptd_held_shard *h = &e[k++];
		memset(h, 0, sizeof(*h));
		snprintf(h->job, sizeof(h->job), "%s", c->job);
		h->version = c->version;
		h->rank = c->rank;
		h->world_size = c->world;
		h->tiers = c->tier;
		h->bytes = c->bytes;
		h->checksum = c->checksum;
		h->lineage = c->lineage;
		sent++;
		if (k == batch) {
			T_ASSERT(ckptd_coord_inventory(co, node, e, k, sent == total, NULL, NULL) >= 0);
			k = 0;
		}
	}
	if (k || total == 0)
		T_ASSERT(ckptd_coord_inventory(co, node, e, k, 1, NULL, NULL) >= 0);
	free(e);
}

static inline void sim_report_all(const sim *s, ckptd_coord *co, size_t batch)
{
	for (size_t i = 0; i < s->n; i++) {
		int seen = 0;
		for (size_t j = 0; j < i && !seen; j++)
			seen = !strcmp(s->c[j].node, s->c[i].node);
		if (!seen)
			sim_report(s, co, s->c[i].node, batch);
	}
}

typedef struct snap {
	ckptd_coord_version *v;
	size_t n, cap;
} snap;

static inline int snap_fn(void *arg, const ckptd_coord_version *v)
{
	snap *s = arg;
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 32;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			return -ENOMEM;
	}
	s->v[s->n] = *v;
	/* Times differ between a coordinator and its rebuild. */
	s->v[s->n].created_ns = s->v[s->n].committed_ns = 0;
	s->n++;
	return 0;
}

static inline snap snap_take(ckptd_coord *co, const char *job)
{
	snap s = { 0 };
	T_OK(ckptd_coord_list(co, job, 0, snap_fn, &s));
	return s;
}

static inline int snap_equal(const snap *a, const snap *b)
{
	if (a->n != b->n) {
		fprintf(stderr, "snap: %zu versions vs %zu\n", a->n, b->n);
		return 0;
	}
	for (size_t i = 0; i < a->n; i++)
		if (memcmp(&a->v[i], &b->v[i], sizeof(a->v[i]))) {
			fprintf(stderr, "snap: version %llu differs: committed %x/%x restorable %u/%u "
			        "ranks %u/%u deleting %u/%u bytes %llu/%llu\n",
			        (unsigned long long)a->v[i].version, a->v[i].committed, b->v[i].committed,
			        a->v[i].restorable, b->v[i].restorable, a->v[i].ranks_any, b->v[i].ranks_any,
			        a->v[i].deleting, b->v[i].deleting, (unsigned long long)a->v[i].bytes,
			        (unsigned long long)b->v[i].bytes);
			return 0;
		}
	return 1;
}

static inline void snap_free(snap *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static inline void t_rm_db(const char *dir)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/data.mdb", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/lock.mdb", dir);
	unlink(p);
	rmdir(dir);
}

#endif
