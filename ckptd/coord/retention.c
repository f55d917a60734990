/* Jobs, retention and crash-safe deletion: mark copies DELETING in one
 * transaction, let the caller delete them, forget each one when it reports
 * it gone. A crash between the steps leaves the marks, and the next
 * retention call hands the same copies out again. */
#include "coord_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DRAM_TIERS (CKPT_TIER_LOCAL_MEM | CKPT_TIER_PEER_MEM)
#define DISK_TIERS (CKPT_TIER_LOCAL_DISK | CKPT_TIER_SHARED)

static int get_job(ckptd_tx *t, const char *job, ckptd_jrec *j)
{
	uint8_t kb[1 + CKPTD_JOB_MAX];
	MDB_val k = { ckptd__job_key(kb, job), kb }, val;
	int rc = mdb_get(t->txn, t->c->jobs, &k, &val);
	if (rc == MDB_NOTFOUND)
		return -CKPT_ENOVERSION;
	if (rc)
		return ckptd__lmdb_err(t->c, "get job", rc);
	return ckptd__jrec_decode(val.mv_data, val.mv_size, j);
}

/* Changes job's record in one transaction: world_size (0: leave), p
 * (NULL: leave), and with epoch set, one more epoch into *epoch. A job not
 * known yet gets a record, retention off. */
static int job_update(ckptd_coord *c, const char *job, uint32_t world_size, const ckptd_coord_policy *p,
                      uint64_t *epoch)
{
	CKPT_TRY(ckpt__job_valid(job));
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 0, &t));
	ckptd_jrec j;
	int err = get_job(&t, job, &j);
	if (err == -CKPT_ENOVERSION) {
		memset(&j, 0, sizeof(j));
		j.created_ns = t.now_ns;
		j.policy = (ckptd_coord_policy){ UINT32_MAX, UINT32_MAX, 0 };
		err = 0;
	}
	if (err == 0) {
		if (world_size)
			j.world_size = world_size;
		if (p)
			j.policy = *p;
		if (epoch)
			*epoch = ++j.epoch;
		uint8_t kb[1 + CKPTD_JOB_MAX], vb[CKPTD_JREC_LEN];
		ckptd__jrec_encode(vb, &j);
		MDB_val k = { ckptd__job_key(kb, job), kb }, val = { sizeof(vb), vb };
		int rc = mdb_put(t.txn, c->jobs, &k, &val, 0);
		err = rc ? ckptd__lmdb_err(c, "put job", rc) : 0;
	}
	return ckptd__end(&t, err, NULL, NULL);
}

int ckptd_coord_job_set(ckptd_coord *c, const char *job, uint32_t world_size,
                        const ckptd_coord_policy *p)
{
	return job_update(c, job, world_size, p, NULL);
}

int ckptd_coord_epoch_next(ckptd_coord *c, const char *job, uint64_t *epoch)
{
	return job_update(c, job, 0, NULL, epoch);
}

int ckptd_coord_job_get(ckptd_coord *c, const char *job, uint32_t *world_size,
                        ckptd_coord_policy *p)
{
	CKPT_TRY(ckpt__job_valid(job));
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 1, &t));
	ckptd_jrec j;
	int err = get_job(&t, job, &j);
	if (err == 0) {
		if (world_size)
			*world_size = j.world_size;
		if (p)
			*p = j.policy;
	}
	mdb_txn_abort(t.txn);
	return err;
}

typedef struct vitem {
	uint64_t version;
	ckptd_vrec v;
} vitem;

static int load_versions(ckptd_tx *t, const char *job, vitem **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	MDB_cursor *cur;
	int rc = mdb_cursor_open(t->txn, t->c->versions, &cur);
	if (rc)
		return ckptd__lmdb_err(t->c, "cursor", rc);
	uint8_t kb[CKPT_IDX_KEY_MAX];
	size_t klen = ckpt__idx_key(kb, job, 0, 0, 0), plen = klen - 8, cap = 0;
	MDB_val k = { klen, kb }, val;
	int err = 0;
	rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size == klen && !memcmp(k.mv_data, kb, plen)) {
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			vitem *p = realloc(*out, cap * sizeof(*p));
			if (!p) {
				err = -ENOMEM;
				break;
			}
			*out = p;
		}
		vitem *it = &(*out)[*n];
		it->version = ckpt__get_be64((const uint8_t *)k.mv_data + plen);
		if (ckptd__vrec_decode(val.mv_data, val.mv_size, &it->v) == 0)
			(*n)++;
		rc = mdb_cursor_get(cur, &k, &val, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	if (err == 0 && rc && rc != MDB_NOTFOUND)
		err = ckptd__lmdb_err(t->c, "scan", rc);
	return err;
}

/* Walks the copies of one version: mark = tiers to mark DELETING (0: none);
 * DELETING copies (old and new) are appended to the output list. */
static int sweep_version(ckptd_tx *t, const char *job, vitem *it, uint32_t mark,
                         ckptd_coord_delete **out, size_t *n, size_t *cap)
{
	uint8_t pb[CKPT_IDX_KEY_MAX];
	size_t plen = ckpt__idx_key(pb, job, it->version, 0, 0);
	MDB_cursor *cur;
	int rc = mdb_cursor_open(t->txn, t->c->copies, &cur);
	if (rc)
		return ckptd__lmdb_err(t->c, "cursor", rc);
	MDB_val k = { plen, pb }, val;
	int err = 0;
	rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size > plen && !memcmp(k.mv_data, pb, plen)) {
		ckptd_coord_delete d;
		char j[CKPTD_JOB_MAX + 1];
		uint64_t ver;
		ckptd_crec cr;
		if ((err = ckptd__copy_key_decode(k.mv_data, k.mv_size, j, &ver, &d.rank, &d.tier,
		                                  d.node)) < 0 ||
		    (err = ckptd__crec_decode(val.mv_data, val.mv_size, &cr)) < 0)
			break;
		d.version = ver;
		if (cr.state == CKPTD_COPY_LIVE && (d.tier & mark)) {
			/* drop_copy rewrites this value in place (same size), which
			 * leaves the cursor where it is. */
			if ((err = ckptd__drop_copy(t, job, ver, &it->v, d.rank, d.tier, d.node, 1)) < 0)
				break;
			cr.state = CKPTD_COPY_DELETING;
		}
		if (cr.state == CKPTD_COPY_DELETING) {
			if (*n == *cap) {
				*cap = *cap ? 2 * *cap : 64;
				ckptd_coord_delete *p = realloc(*out, *cap * sizeof(*p));
				if (!p) {
					err = -ENOMEM;
					break;
				}
				*out = p;
			}
			(*out)[(*n)++] = d;
		}
		rc = mdb_cursor_get(cur, &k, &val, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	if (err == 0 && rc && rc != MDB_NOTFOUND)
		err = ckptd__lmdb_err(t->c, "scan copies", rc);
	return err;
}

int ckptd_coord_retention(ckptd_coord *c, const char *job, const ckptd_coord_policy *p,
                          ckptd_coord_delete **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	CKPT_TRY(ckpt__job_valid(job));
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 0, &t));
	vitem *vs = NULL;
	size_t nv = 0, cap = 0;
	ckptd_coord_policy pol;
	ckptd_jrec j;
	int err = 0;
	if (p) {
		pol = *p;
	} else if ((err = get_job(&t, job, &j)) == 0) {
		pol = j.policy;
	} else {
		if (err == -CKPT_ENOVERSION)
			err = 0; /* no job, nothing to do */
		goto out;
	}
	if ((err = load_versions(&t, job, &vs, &nv)) < 0)
		goto out;
	size_t newest = nv;
	for (size_t i = nv; i-- > 0;)
		if (ckptd__restorable(&vs[i].v)) {
			newest = i;
			break;
		}
	uint32_t rindex = 0; /* rank among restorable versions, newest = 0 */
	for (size_t i = nv; i-- > 0;) {
		vitem *it = &vs[i];
		uint32_t mark = 0;
		/* Nothing restorable: keep everything. Versions newer than the newest
		 * restorable one are still being saved. That one is never touched. */
		if (newest < nv && i < newest) {
			if (!ckptd__restorable(&it->v)) {
				mark = CKPTD_COORD_ALL_TIERS;
			} else {
				rindex++;
				int forever = pol.keep_every && it->version % pol.keep_every == 0;
				if (rindex >= pol.keep_dram)
					mark |= DRAM_TIERS;
				if (rindex >= pol.keep_disk && !forever)
					mark |= DISK_TIERS;
			}
		}
		if (!mark && !it->v.deleting)
			continue;
		uint32_t cb = ckptd__committed_mask(&it->v);
		int rb = ckptd__restorable(&it->v);
		uint32_t had = it->v.deleting;
		if ((err = sweep_version(&t, job, it, mark, out, n, &cap)) < 0)
			goto out;
		if (it->v.deleting != had) {
			if ((err = ckptd__put_version(&t, job, it->version, &it->v)) < 0 ||
			    (err = ckptd__note(&t, job, it->version, cb, rb, &it->v)) < 0)
				goto out;
		}
	}
out:
	free(vs);
	err = ckptd__end(&t, err, NULL, NULL);
	if (err < 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return err;
}

int ckptd_coord_delete_done(ckptd_coord *c, const char *job, uint64_t version, uint32_t rank,
                            uint32_t tier, const char *node)
{
	CKPT_TRY(ckpt__job_valid(job));
	CKPT_TRY(ckptd__node_valid(node));
	if (ckptd__tier_index(tier) < 0)
		return -EINVAL;
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 0, &t));
	ckptd_vrec v;
	int err = ckptd__get_version(&t, job, version, &v);
	if (err == -CKPT_ENOVERSION) {
		err = 0; /* already forgotten */
	} else if (err == 0 && (err = ckptd__drop_copy(&t, job, version, &v, rank, tier, node, 0)) == 0) {
		err = ckptd__put_version(&t, job, version, &v);
	}
	return ckptd__end(&t, err, NULL, NULL);
}

int ckptd_coord_delete_version(ckptd_coord *c, const char *job, uint64_t version, uint32_t tiers,
                               ckptd_coord_delete **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	CKPT_TRY(ckpt__job_valid(job));
	if (tiers & ~(uint32_t)CKPTD_COORD_ALL_TIERS)
		return -EINVAL;
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 0, &t));
	vitem it = { .version = version };
	size_t cap = 0;
	int err = ckptd__get_version(&t, job, version, &it.v);
	if (err == 0) {
		uint32_t cb = ckptd__committed_mask(&it.v);
		int rb = ckptd__restorable(&it.v);
		uint32_t had = it.v.deleting;
		err = sweep_version(&t, job, &it, tiers ? tiers : CKPTD_COORD_ALL_TIERS, out, n, &cap);
		if (err == 0 && it.v.deleting != had &&
		    ((err = ckptd__put_version(&t, job, version, &it.v)) == 0))
			err = ckptd__note(&t, job, version, cb, rb, &it.v);
	}
	err = ckptd__end(&t, err, NULL, NULL);
	if (err < 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return err;
}

/* Collects the copies of one version held by one node at some tiers. */
static int node_copies(ckptd_tx *t, const char *job, uint64_t version, uint32_t tiers, const char *node,
                       ckptd_coord_delete **out, size_t *n)
{
	uint8_t pb[CKPT_IDX_KEY_MAX];
	size_t plen = ckpt__idx_key(pb, job, version, 0, 0), cap = 0;
	MDB_cursor *cur;
	int rc = mdb_cursor_open(t->txn, t->c->copies, &cur);
	if (rc)
		return ckptd__lmdb_err(t->c, "cursor", rc);
	MDB_val k = { plen, pb }, val;
	int err = 0;
	rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size > plen && !memcmp(k.mv_data, pb, plen)) {
		ckptd_coord_delete d;
		char j[CKPTD_JOB_MAX + 1];
		uint64_t ver;
		if ((err = ckptd__copy_key_decode(k.mv_data, k.mv_size, j, &ver, &d.rank, &d.tier, d.node)) < 0)
			break;
		d.version = ver;
		if ((d.tier & tiers) && !strcmp(d.node, node)) {
			if (*n == cap) {
				cap = cap ? 2 * cap : 64;
				ckptd_coord_delete *p = realloc(*out, cap * sizeof(*p));
				if (!p) {
					err = -ENOMEM;
					break;
				}
				*out = p;
			}
			(*out)[(*n)++] = d;
		}
		rc = mdb_cursor_get(cur, &k, &val, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	if (err == 0 && rc && rc != MDB_NOTFOUND)
		err = ckptd__lmdb_err(t->c, "scan copies", rc);
	return err;
}

int ckptd_coord_copies_gone(ckptd_coord *c, const char *job, uint64_t version, uint32_t tiers,
                            const char *node, ckptd_coord_change_fn fn, void *arg)
{
	CKPT_TRY(ckpt__job_valid(job));
	CKPT_TRY(ckptd__node_valid(node));
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 0, &t));
	ckptd_coord_delete *d = NULL;
	size_t n = 0;
	ckptd_vrec v;
	int err = ckptd__get_version(&t, job, version, &v);
	if (err == -CKPT_ENOVERSION) {
		err = 0; /* already forgotten */
		goto out;
	}
	if (err < 0 || (err = node_copies(&t, job, version, tiers, node, &d, &n)) < 0 || n == 0)
		goto out;
	uint32_t cb = ckptd__committed_mask(&v);
	int rb = ckptd__restorable(&v);
	for (size_t i = 0; i < n && err == 0; i++)
		err = ckptd__drop_copy(&t, job, version, &v, d[i].rank, d[i].tier, node, 0);
	/* put_version removes a version no shard is left of. */
	if (err == 0 && (err = ckptd__put_version(&t, job, version, &v)) == 0)
		err = ckptd__note(&t, job, version, cb, rb, v.nshards ? &v : NULL);
out:
	free(d);
	err = ckptd__end(&t, err, fn, arg);
	return err < 0 ? err : (int)n;
}
