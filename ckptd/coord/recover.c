/* Agents: hello, loss, and the inventories a restarted coordinator rebuilds
 * its view from. Agents are the source of truth for what they hold, so each
 * of these rewrites copies and lets the commit state follow from them. */
#include "coord_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int ckptd_coord_agent_hello(ckptd_coord *c, const char *node, const char *address,
                            const char *domain, uint64_t now_ns)
{
	CKPT_TRY(ckptd__node_valid(node));
	if (!address || strlen(address) > CKPTD_ADDR_MAX || (domain && strlen(domain) > CKPTD_NAME_MAX))
		return -EINVAL;
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 0, &t));
	ckptd_arec a;
	int err = ckptd__get_agent(&t, node, &a);
	if (err == -ENOENT) {
		memset(&a, 0, sizeof(a));
		a.gen = 1;
		err = 0;
	}
	if (err == 0) {
		a.state = CKPTD_AGENT_REC_UP;
		a.last_seen_ns = now_ns;
		snprintf(a.address, sizeof(a.address), "%s", address);
		snprintf(a.domain, sizeof(a.domain), "%s", domain ? domain : "");
		err = ckptd__put_agent(&t, node, &a);
	}
	return ckptd__end(&t, err, NULL, NULL);
}

typedef struct held_copy {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t rank, tier;
} held_copy;

/* The copies node holds (from bynode), read before any is dropped so the
 * cursor never walks a table it changes. keep_gen: skip copies confirmed in
 * that inventory round (0: take all). */
static int node_copies(ckptd_tx *t, const char *node, uint32_t keep_gen, held_copy **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	uint8_t pb[1 + CKPTD_NAME_MAX];
	size_t plen = strlen(node);
	pb[0] = (uint8_t)plen;
	memcpy(pb + 1, node, plen);
	plen += 1;
	MDB_cursor *cur;
	int rc = mdb_cursor_open(t->txn, t->c->bynode, &cur);
	if (rc)
		return ckptd__lmdb_err(t->c, "cursor", rc);
	size_t cap = 0;
	int err = 0;
	MDB_val k = { plen, pb }, val;
	rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size > plen && !memcmp(k.mv_data, pb, plen)) {
		held_copy h;
		if ((err = ckptd__copy_key_decode((const uint8_t *)k.mv_data + plen, k.mv_size - plen, h.job,
		                                  &h.version, &h.rank, &h.tier, NULL)) < 0)
			break;
		if (keep_gen) {
			uint8_t cb[CKPTD_KEY_MAX];
			MDB_val ck = { ckptd__copy_key(cb, h.job, h.version, h.rank, h.tier, node), cb }, cv;
			ckptd_crec cr;
			if ((rc = mdb_get(t->txn, t->c->copies, &ck, &cv)) ||
			    (err = ckptd__crec_decode(cv.mv_data, cv.mv_size, &cr)) < 0)
				break;
			if (cr.gen == keep_gen)
				goto next;
		}
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			held_copy *p = realloc(*out, cap * sizeof(*p));
			if (!p) {
				err = -ENOMEM;
				break;
			}
			*out = p;
		}
		(*out)[(*n)++] = h;
next:
		rc = mdb_cursor_get(cur, &k, &val, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	if (err == 0 && rc && rc != MDB_NOTFOUND)
		err = ckptd__lmdb_err(t->c, "scan node", rc);
	if (err < 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return err;
}

/* Forgets the given copies of node, one version record update per version
 * (the list is in key order, so a version's copies are adjacent). */
static int drop_all(ckptd_tx *t, const char *node, const held_copy *h, size_t n)
{
	size_t i = 0;
	while (i < n) {
		ckptd_vrec v;
		int err = ckptd__get_version(t, h[i].job, h[i].version, &v);
		if (err < 0)
			return err == -CKPT_ENOVERSION ? -CKPT_ECORRUPT : err;
		uint32_t cb = ckptd__committed_mask(&v);
		int rb = ckptd__restorable(&v);
		size_t j = i;
		for (; j < n && h[j].version == h[i].version && !strcmp(h[j].job, h[i].job); j++)
			CKPT_TRY(ckptd__drop_copy(t, h[j].job, h[j].version, &v, h[j].rank, h[j].tier, node, 0));
		CKPT_TRY(ckptd__put_version(t, h[i].job, h[i].version, &v));
		CKPT_TRY(ckptd__note(t, h[i].job, h[i].version, cb, rb, v.nshards ? &v : NULL));
		i = j;
	}
	return 0;
}

int ckptd_coord_agent_lost(ckptd_coord *c, const char *node, ckptd_coord_change_fn fn, void *arg)
{
	CKPT_TRY(ckptd__node_valid(node));
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 0, &t));
	held_copy *h = NULL;
	size_t n = 0, k = 0;
	int err = node_copies(&t, node, 0, &h, &n);
	/* SHARED copies are on the shared filesystem, not on the node: they
	 * stay (the node's agent, back or not, still answers for deleting them). */
	for (size_t i = 0; i < n; i++)
		if (h[i].tier != CKPT_TIER_SHARED)
			h[k++] = h[i];
	n = k;
	if (err == 0)
		err = drop_all(&t, node, h, n);
	ckptd_arec a;
	if (err == 0 && ckptd__get_agent(&t, node, &a) == 0) {
		/* Its next inventory starts a fresh round. */
		a.state = CKPTD_AGENT_REC_DOWN;
		a.in_round = 0;
		err = ckptd__put_agent(&t, node, &a);
	}
	free(h);
	if (n)
		LOG_W(&c->lg, CKPT_NO_VERSION, "coord: agent %s lost; %zu copies dropped", node, n);
	err = ckptd__end(&t, err, fn, arg);
	return err < 0 ? err : (int)CKPT_MIN(n, (size_t)INT32_MAX);
}

/* One reported copy. Returns 1 if skipped, 0 if applied, or an error. */
static int inventory_one(ckptd_tx *t, const char *node, uint32_t gen, const ckptd_held_shard *e,
                         uint32_t tier)
{
	ckptd_vrec v;
	int err = ckptd__get_version(t, e->job, e->version, &v);
	if (err == -CKPT_ENOVERSION) {
		if (e->world_size == 0 || e->rank >= e->world_size)
			return 1;
		memset(&v, 0, sizeof(v));
		v.world_size = e->world_size;
		v.lineage = e->lineage;
		v.created_ns = t->now_ns;
		CKPT_TRY(ckptd__ensure_job(t, e->job, e->world_size));
	} else if (err < 0) {
		return err;
	} else if ((e->world_size && e->world_size != v.world_size) || e->rank >= v.world_size) {
		return 1;
	} else if (e->lineage != v.lineage) {
		/* Rebuild must not depend on the order agents answer in: the lineage
		 * a commit was announced for wins; otherwise the first seen stays. */
		if ((v.flags & CKPTD_VF_SEALED) || !e->committed)
			return 1;
		CKPT_TRY(ckptd__reset_version(t, e->job, e->version, &v));
		v.lineage = e->lineage;
	}
	uint32_t cb = ckptd__committed_mask(&v);
	int rb = ckptd__restorable(&v);
	int added;
	err = ckptd__add_copy(t, e->job, e->version, &v, e->rank, tier, node, e->bytes, e->checksum,
	                      gen, &added);
	if (err == -CKPT_EMISMATCH || err == -EINVAL)
		return 1;
	if (err < 0)
		return err;
	if (e->committed && !(v.flags & CKPTD_VF_SEALED)) {
		/* Announced committed: every rank was durable at a tier once. */
		v.flags |= CKPTD_VF_SEALED;
		v.committed_ns = t->now_ns;
	} else if (!added) {
		return 0;
	}
	ckptd__settle(t, &v, cb);
	CKPT_TRY(ckptd__put_version(t, e->job, e->version, &v));
	CKPT_TRY(ckptd__note(t, e->job, e->version, cb, rb, &v));
	return 0;
}

int ckptd_coord_inventory(ckptd_coord *c, const char *node, const ckptd_held_shard *e, size_t n,
                          int final, ckptd_coord_change_fn fn, void *arg)
{
	CKPT_TRY(ckptd__node_valid(node));
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 0, &t));
	ckptd_arec a;
	int skipped = 0;
	held_copy *stale = NULL;
	size_t nstale = 0;
	int err = ckptd__get_agent(&t, node, &a);
	if (err == -ENOENT) {
		memset(&a, 0, sizeof(a));
		err = 0;
	}
	if (err < 0)
		goto out;
	if (!a.in_round) {
		/* A new round: copies confirmed from now on carry the new number. */
		a.gen++;
		a.in_round = 1;
	}
	a.state = CKPTD_AGENT_REC_UP;
	a.last_seen_ns = t.now_ns;
	for (size_t i = 0; i < n; i++) {
		if (ckpt__job_valid(e[i].job) < 0 || (e[i].tiers & ~CKPTD_COORD_ALL_TIERS) || !e[i].tiers) {
			skipped++;
			continue;
		}
		for (uint32_t tier = 1; tier <= CKPT_TIER_SHARED; tier <<= 1) {
			if (!(e[i].tiers & tier))
				continue;
			int r = inventory_one(&t, node, a.gen, &e[i], tier);
			if (r < 0) {
				err = r;
				goto out;
			}
			skipped += r;
		}
	}
	if (final) {
		if ((err = node_copies(&t, node, a.gen, &stale, &nstale)) < 0 ||
		    (err = drop_all(&t, node, stale, nstale)) < 0)
			goto out;
		a.in_round = 0;
	}
	err = ckptd__put_agent(&t, node, &a);
out:
	free(stale);
	err = ckptd__end(&t, err, fn, arg);
	return err < 0 ? err : skipped;
}
