/* The agent's own index of the copies it holds (LMDB, one small
 * environment). Keys sort by job, then version, then rank, then tier, so a
 * version's records are one range and a shard's tiers are adjacent. */
#include "roles_int.h"

#include <errno.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define AIDX_REC_VERSION 1u
#define AIDX_KEY_MAX (1 + CKPTD_JOB_MAX + 8 + 4 + 1)
#define AIDX_VAL_LEN 40
/* Keys of other kinds start with a byte no job length can be (jobs are at
 * most 64 bytes): the checkpoint roots of a job's ranks on this node, and
 * deletions under way. */
#define AIDX_ROOT 0xf0u /* job-len, job, root path -> empty */
#define AIDX_MARK 0xf1u /* job-len, job, version (BE) -> tiers (LE u32) */
#define AIDX_AUX_KEY_MAX (2 + CKPTD_JOB_MAX + CKPTD_PATH_MAX)

struct ckptd_aidx {
	MDB_env *env;
	MDB_dbi dbi;
};

static int lmdb_err(int rc)
{
	return rc > 0 ? -rc : rc == 0 ? 0 : -EIO;
}

/* Commits; then makes it durable unless every record it touched is of a
 * DRAM tier (LOCAL_MEM, PEER_MEM): those are dropped at the next start
 * anyway, so their records need no fsync, which keeps a partner's copy and
 * a lease from waiting for the disk. The environment is opened MDB_NOSYNC:
 * a crash loses at most the unsynced DRAM-tier records, and LMDB stays
 * consistent at the last synced transaction. */
static int commit(ckptd_aidx *x, MDB_txn *txn, int durable)
{
	int rc = mdb_txn_commit(txn);
	if (rc == 0 && durable)
		rc = mdb_env_sync(x->env, 1);
	return rc;
}

static int dram_tier(uint32_t tier)
{
	return tier == CKPT_TIER_LOCAL_MEM || tier == CKPT_TIER_PEER_MEM;
}

/* The job prefix (length byte first, so "a" never ranges into "ab"), then
 * as much of version, rank, tier as `depth` asks: 1 version, 2 rank, 3 tier. */
static size_t key_make(uint8_t *k, const char *job, uint64_t version, uint32_t rank, uint32_t tier, int depth)
{
	size_t n = strlen(job), o = 0;
	k[o++] = (uint8_t)n;
	memcpy(k + o, job, n);
	o += n;
	if (depth >= 1) {
		ckpt__put_be64(k + o, version);
		o += 8;
	}
	if (depth >= 2) {
		ckpt__put_be32(k + o, rank);
		o += 4;
	}
	if (depth >= 3)
		k[o++] = (uint8_t)tier;
	return o;
}

static int rec_decode(const MDB_val *k, const MDB_val *v, ckptd_aidx_rec *r)
{
	const uint8_t *p = k->mv_data;
	if (k->mv_size < 1 || k->mv_size != (size_t)1 + p[0] + 13 || p[0] > CKPTD_JOB_MAX || v->mv_size < AIDX_VAL_LEN)
		return -EINVAL;
	const uint8_t *q = v->mv_data;
	if (ckpt__get_le32(q) != AIDX_REC_VERSION)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	memcpy(r->job, p + 1, p[0]);
	p += 1 + p[0];
	r->version = ckpt__get_be64(p);
	r->rank = (uint32_t)ckpt__get_be32(p + 8);
	r->tier = p[12];
	r->world_size = (uint32_t)ckpt__get_le32(q + 4);
	r->committed = (uint32_t)ckpt__get_le32(q + 8);
	r->bytes = ckpt__get_le64(q + 16);
	r->checksum = ckpt__get_le64(q + 24);
	r->lineage = ckpt__get_le64(q + 32);
	return 0;
}

static void val_make(uint8_t *q, const ckptd_aidx_rec *r)
{
	memset(q, 0, AIDX_VAL_LEN);
	ckpt__put_le32(q, AIDX_REC_VERSION);
	ckpt__put_le32(q + 4, r->world_size);
	ckpt__put_le32(q + 8, r->committed);
	ckpt__put_le64(q + 16, r->bytes);
	ckpt__put_le64(q + 24, r->checksum);
	ckpt__put_le64(q + 32, r->lineage);
}

int ckptd_aidx_open(const char *dir, ckptd_aidx **out, size_t *dropped)
{
	int rc;
	MDB_txn *txn = NULL;
	MDB_cursor *cur = NULL;
	size_t ndrop = 0;
	*out = NULL;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	ckptd_aidx *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	if ((rc = mdb_env_create(&x->env)) || (rc = mdb_env_set_mapsize(x->env, 1ull << 30)) ||
	    (rc = mdb_env_open(x->env, dir, MDB_NOTLS | MDB_NOSYNC, 0600)))
		goto fail;
	if ((rc = mdb_txn_begin(x->env, NULL, 0, &txn)) || (rc = mdb_dbi_open(txn, NULL, 0, &x->dbi)) ||
	    (rc = mdb_cursor_open(txn, x->dbi, &cur)))
		goto fail;
	/* DRAM does not survive the agent: what the old pools held is gone. */
	MDB_val k, v;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		ckptd_aidx_rec r;
		if (k.mv_size && *(const uint8_t *)k.mv_data >= AIDX_ROOT)
			continue;
		if (rec_decode(&k, &v, &r) < 0 || r.tier == CKPT_TIER_LOCAL_MEM || r.tier == CKPT_TIER_PEER_MEM) {
			if ((rc = mdb_cursor_del(cur, 0)))
				goto fail;
			ndrop++;
		}
	}
	if (rc != MDB_NOTFOUND)
		goto fail;
	mdb_cursor_close(cur);
	cur = NULL;
	rc = commit(x, txn, 1);
	txn = NULL;
	if (rc)
		goto fail;
	if (dropped)
		*dropped = ndrop;
	*out = x;
	return 0;
fail:
	if (cur)
		mdb_cursor_close(cur);
	if (txn)
		mdb_txn_abort(txn);
	ckptd_aidx_close(x);
	return lmdb_err(rc);
}

void ckptd_aidx_close(ckptd_aidx *x)
{
	if (!x)
		return;
	if (x->env)
		mdb_env_close(x->env);
	free(x);
}

int ckptd_aidx_put(ckptd_aidx *x, const ckptd_aidx_rec *r, size_t n)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(x->env, NULL, 0, &txn);
	if (rc)
		return lmdb_err(rc);
	for (size_t i = 0; i < n && !rc; i++) {
		uint8_t kb[AIDX_KEY_MAX], vb[AIDX_VAL_LEN];
		MDB_val k = { key_make(kb, r[i].job, r[i].version, r[i].rank, r[i].tier, 3), kb };
		MDB_val v = { AIDX_VAL_LEN, vb };
		val_make(vb, &r[i]);
		rc = mdb_put(txn, x->dbi, &k, &v, 0);
	}
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_err(rc);
	}
	int durable = 0;
	for (size_t i = 0; i < n; i++)
		durable |= !dram_tier(r[i].tier);
	return lmdb_err(commit(x, txn, durable));
}

int ckptd_aidx_del(ckptd_aidx *x, const char *job, uint64_t version, uint32_t rank, uint32_t tier)
{
	MDB_txn *txn;
	uint8_t kb[AIDX_KEY_MAX];
	MDB_val k = { key_make(kb, job, version, rank, tier, 3), kb };
	int rc = mdb_txn_begin(x->env, NULL, 0, &txn);
	if (rc)
		return lmdb_err(rc);
	rc = mdb_del(txn, x->dbi, &k, NULL);
	if (rc && rc != MDB_NOTFOUND) {
		mdb_txn_abort(txn);
		return lmdb_err(rc);
	}
	return lmdb_err(commit(x, txn, !dram_tier(tier)));
}

/* Walks the records of (job, version): fn may rewrite or delete through cur. */
static int each_of_version(ckptd_aidx *x, const char *job, uint64_t version,
                           int (*fn)(void *arg, MDB_cursor *cur, const MDB_val *k, const MDB_val *v,
                                     const ckptd_aidx_rec *r),
                           void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	uint8_t kb[AIDX_KEY_MAX];
	size_t plen = key_make(kb, job, version, 0, 0, 1);
	MDB_val k = { plen, kb }, v;
	int rc = mdb_txn_begin(x->env, NULL, 0, &txn), n = 0;
	if (rc)
		return lmdb_err(rc);
	if ((rc = mdb_cursor_open(txn, x->dbi, &cur))) {
		mdb_txn_abort(txn);
		return lmdb_err(rc);
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size < plen || memcmp(k.mv_data, kb, plen) != 0)
			break;
		ckptd_aidx_rec r;
		if (rec_decode(&k, &v, &r) < 0)
			continue;
		int f = fn(arg, cur, &k, &v, &r);
		if (f < 0) {
			rc = -f;
			break;
		}
		n += f;
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND) {
		mdb_txn_abort(txn);
		return lmdb_err(rc);
	}
	rc = commit(x, txn, 1);
	return rc ? lmdb_err(rc) : n;
}

static int del_cb(void *arg, MDB_cursor *cur, const MDB_val *k, const MDB_val *v, const ckptd_aidx_rec *r)
{
	(void)k, (void)v;
	if (!(r->tier & *(uint32_t *)arg))
		return 0;
	int rc = mdb_cursor_del(cur, 0);
	return rc ? -rc : 1;
}

int ckptd_aidx_del_version(ckptd_aidx *x, const char *job, uint64_t version, uint32_t mask)
{
	return each_of_version(x, job, version, del_cb, &mask);
}

static int commit_cb(void *arg, MDB_cursor *cur, const MDB_val *k, const MDB_val *v, const ckptd_aidx_rec *r)
{
	uint32_t tier = *(uint32_t *)arg;
	if (r->committed & tier)
		return 0;
	ckptd_aidx_rec n = *r;
	n.committed |= tier;
	uint8_t vb[AIDX_VAL_LEN];
	val_make(vb, &n);
	MDB_val nv = { AIDX_VAL_LEN, vb };
	(void)v;
	int rc = mdb_cursor_put(cur, (MDB_val *)k, &nv, MDB_CURRENT);
	return rc ? -rc : 1;
}

int ckptd_aidx_set_committed(ckptd_aidx *x, const char *job, uint64_t version, uint32_t tier)
{
	int n = each_of_version(x, job, version, commit_cb, &tier);
	return n < 0 ? n : n > 0;
}

int ckptd_aidx_each(ckptd_aidx *x, int (*fn)(void *arg, const ckptd_aidx_rec *r), void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = mdb_txn_begin(x->env, NULL, MDB_RDONLY, &txn), r = 0;
	if (rc)
		return lmdb_err(rc);
	if ((rc = mdb_cursor_open(txn, x->dbi, &cur))) {
		mdb_txn_abort(txn);
		return lmdb_err(rc);
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		ckptd_aidx_rec rec;
		if (rec_decode(&k, &v, &rec) < 0)
			continue;
		if ((r = fn(arg, &rec)) != 0)
			break;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (r)
		return r;
	return rc == MDB_NOTFOUND ? 0 : lmdb_err(rc);
}

int ckptd_aidx_each_of(ckptd_aidx *x, const char *job, uint64_t version,
                       int (*fn)(void *arg, const ckptd_aidx_rec *r), void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	uint8_t kb[AIDX_KEY_MAX];
	size_t plen = key_make(kb, job, version, 0, 0, 1);
	MDB_val k = { plen, kb }, v;
	int rc = mdb_txn_begin(x->env, NULL, MDB_RDONLY, &txn), r = 0;
	if (rc)
		return lmdb_err(rc);
	if ((rc = mdb_cursor_open(txn, x->dbi, &cur))) {
		mdb_txn_abort(txn);
		return lmdb_err(rc);
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		ckptd_aidx_rec rec;
		if (k.mv_size < plen || memcmp(k.mv_data, kb, plen) != 0)
			break;
		if (rec_decode(&k, &v, &rec) < 0)
			continue;
		if ((r = fn(arg, &rec)) != 0)
			break;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (r)
		return r;
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : lmdb_err(rc);
}

/* ---------------------------------------------------------------- roots, marks */

static size_t aux_key(uint8_t *k, uint8_t kind, const char *job)
{
	size_t n = strlen(job);
	k[0] = kind;
	k[1] = (uint8_t)n;
	memcpy(k + 2, job, n);
	return 2 + n;
}

static int aux_put(ckptd_aidx *x, const uint8_t *kb, size_t klen, const void *val, size_t vlen)
{
	MDB_txn *txn;
	MDB_val k = { klen, (void *)kb }, v = { vlen, (void *)val };
	int rc = mdb_txn_begin(x->env, NULL, 0, &txn);
	if (rc)
		return lmdb_err(rc);
	if ((rc = mdb_put(txn, x->dbi, &k, &v, 0))) {
		mdb_txn_abort(txn);
		return lmdb_err(rc);
	}
	return lmdb_err(commit(x, txn, 1));
}

int ckptd_aidx_root_add(ckptd_aidx *x, const char *job, const char *root)
{
	uint8_t kb[AIDX_AUX_KEY_MAX];
	size_t o = aux_key(kb, AIDX_ROOT, job), n = strlen(root);
	if (n > CKPTD_PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(kb + o, root, n);
	/* Known already: no write, no fsync (every rank registers). */
	MDB_txn *txn;
	MDB_val k = { o + n, kb }, v;
	int rc = mdb_txn_begin(x->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return lmdb_err(rc);
	rc = mdb_get(txn, x->dbi, &k, &v);
	mdb_txn_abort(txn);
	if (rc == 0)
		return 0;
	return aux_put(x, kb, o + n, "", 0);
}

/* Walks the keys of one kind (and job, when given) in order. */
static int aux_each(ckptd_aidx *x, uint8_t kind, const char *job,
                    int (*fn)(void *arg, const uint8_t *k, size_t klen, const MDB_val *v), void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	uint8_t kb[AIDX_AUX_KEY_MAX];
	size_t plen = job ? aux_key(kb, kind, job) : (kb[0] = kind, 1);
	MDB_val k = { plen, kb }, v;
	int rc = mdb_txn_begin(x->env, NULL, MDB_RDONLY, &txn), r = 0;
	if (rc)
		return lmdb_err(rc);
	if ((rc = mdb_cursor_open(txn, x->dbi, &cur))) {
		mdb_txn_abort(txn);
		return lmdb_err(rc);
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		const uint8_t *p = k.mv_data;
		if (k.mv_size < plen || memcmp(p, kb, plen) != 0)
			break;
		if (k.mv_size < 2 || (size_t)2 + p[1] > k.mv_size || p[1] > CKPTD_JOB_MAX)
			continue; /* damaged: not ours to interpret */
		if ((r = fn(arg, p, k.mv_size, &v)) != 0)
			break;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (r)
		return r;
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : lmdb_err(rc);
}

typedef struct root_walk {
	int (*fn)(void *arg, const char *root);
	void *arg;
} root_walk;

static int root_cb(void *arg, const uint8_t *k, size_t klen, const MDB_val *v)
{
	(void)v;
	root_walk *w = arg;
	char root[CKPTD_PATH_MAX + 1];
	size_t o = (size_t)2 + k[1];
	if (klen - o == 0 || klen - o > CKPTD_PATH_MAX)
		return 0;
	memcpy(root, k + o, klen - o);
	root[klen - o] = '\0';
	return w->fn(w->arg, root);
}

int ckptd_aidx_roots(ckptd_aidx *x, const char *job, int (*fn)(void *arg, const char *root), void *arg)
{
	root_walk w = { fn, arg };
	return aux_each(x, AIDX_ROOT, job, root_cb, &w);
}

static size_t mark_key(uint8_t *kb, const char *job, uint64_t version)
{
	size_t o = aux_key(kb, AIDX_MARK, job);
	ckpt__put_be64(kb + o, version);
	return o + 8;
}

int ckptd_aidx_mark(ckptd_aidx *x, const char *job, uint64_t version, uint32_t tiers)
{
	uint8_t kb[AIDX_AUX_KEY_MAX], vb[4];
	size_t klen = mark_key(kb, job, version);
	MDB_txn *txn;
	MDB_val k = { klen, kb }, v;
	int rc = mdb_txn_begin(x->env, NULL, 0, &txn);
	if (rc)
		return lmdb_err(rc);
	if ((rc = mdb_get(txn, x->dbi, &k, &v)) == 0 && v.mv_size == 4)
		tiers |= (uint32_t)ckpt__get_le32(v.mv_data);
	ckpt__put_le32(vb, tiers);
	v = (MDB_val){ 4, vb };
	if ((rc = mdb_put(txn, x->dbi, &k, &v, 0))) {
		mdb_txn_abort(txn);
		return lmdb_err(rc);
	}
	return lmdb_err(commit(x, txn, 1));
}

int ckptd_aidx_unmark(ckptd_aidx *x, const char *job, uint64_t version)
{
	uint8_t kb[AIDX_AUX_KEY_MAX];
	MDB_val k = { mark_key(kb, job, version), kb };
	MDB_txn *txn;
	int rc = mdb_txn_begin(x->env, NULL, 0, &txn);
	if (rc)
		return lmdb_err(rc);
	rc = mdb_del(txn, x->dbi, &k, NULL);
	if (rc && rc != MDB_NOTFOUND) {
		mdb_txn_abort(txn);
		return lmdb_err(rc);
	}
	return lmdb_err(commit(x, txn, 1));
}

typedef struct mark_walk {
	int (*fn)(void *arg, const char *job, uint64_t version, uint32_t tiers);
	void *arg;
} mark_walk;

static int mark_cb(void *arg, const uint8_t *k, size_t klen, const MDB_val *v)
{
	mark_walk *w = arg;
	char job[CKPTD_JOB_MAX + 1];
	size_t o = (size_t)2 + k[1];
	if (klen != o + 8 || v->mv_size != 4)
		return 0;
	memcpy(job, k + 2, k[1]);
	job[k[1]] = '\0';
	return w->fn(w->arg, job, ckpt__get_be64(k + o), (uint32_t)ckpt__get_le32(v->mv_data));
}

int ckptd_aidx_marks(ckptd_aidx *x, int (*fn)(void *arg, const char *job, uint64_t version, uint32_t tiers),
                     void *arg)
{
	mark_walk w = { fn, arg };
	return aux_each(x, AIDX_MARK, NULL, mark_cb, &w);
}
