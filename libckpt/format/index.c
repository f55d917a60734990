#include "index.h"

#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>

#define MAP_SIZE (4ull << 30)
#define REC_VERSION 1u

struct ckpt_index {
	MDB_env *env;
	MDB_dbi meta, versions, shards;
	MDB_dbi global; /* versions a ckptd coordinator announced COMMITTED: tiers mask */
	const ckpt_logger *lg;
};

static int lmdb_err(const ckpt_index *ix, const char *what, int rc)
{
	LOG_E(ix ? ix->lg : NULL, CKPT_NO_VERSION, "index: %s: %s", what, mdb_strerror(rc));
	if (rc == ENOMEM || rc == ENOSPC || rc == EACCES || rc == EIO)
		return -rc;
	return -CKPT_EINDEX;
}

/* ------------------------------------------------------------- codecs */

void ckpt__idx_version_encode(uint8_t out[CKPT_IDX_VERSION_REC_LEN], const ckpt_idx_version *v)
{
	ckpt__put_le32(out, REC_VERSION);
	ckpt__put_le32(out + 4, v->state);
	ckpt__put_le32(out + 8, v->world_size);
	ckpt__put_le32(out + 12, v->shards_done);
	ckpt__put_le64(out + 16, v->bytes);
	ckpt__put_le64(out + 24, v->stored_bytes);
	ckpt__put_le64(out + 32, v->created_ns);
	ckpt__put_le64(out + 40, v->committed_ns);
	ckpt__put_le64(out + 48, v->lineage);
}

int ckpt__idx_version_decode(const uint8_t *buf, size_t len, ckpt_idx_version *v)
{
	memset(v, 0, sizeof(*v));
	if (len < 4)
		return -CKPT_ECORRUPT;
	uint32_t rv = ckpt__get_le32(buf);
	if (rv == 0)
		return -CKPT_ECORRUPT;
	if (rv > REC_VERSION)
		return -CKPT_EFORMAT;
	/* Records from before the lineage field are 8 bytes shorter. */
	if (len != CKPT_IDX_VERSION_REC_LEN - 8 && len < CKPT_IDX_VERSION_REC_LEN)
		return -CKPT_ECORRUPT;
	v->state = ckpt__get_le32(buf + 4);
	v->world_size = ckpt__get_le32(buf + 8);
	v->shards_done = ckpt__get_le32(buf + 12);
	v->bytes = ckpt__get_le64(buf + 16);
	v->stored_bytes = ckpt__get_le64(buf + 24);
	v->created_ns = ckpt__get_le64(buf + 32);
	v->committed_ns = ckpt__get_le64(buf + 40);
	v->lineage = len >= CKPT_IDX_VERSION_REC_LEN ? ckpt__get_le64(buf + 48) : 0;
	if (v->state < CKPT_STATE_PENDING || v->state > CKPT_STATE_DELETING || v->world_size == 0 ||
	    v->shards_done > v->world_size)
		return -CKPT_ECORRUPT;
	return 0;
}

void ckpt__idx_shard_encode(uint8_t out[CKPT_IDX_SHARD_REC_LEN], const ckpt_idx_shard *s)
{
	ckpt__put_le32(out, REC_VERSION);
	ckpt__put_le32(out + 4, s->tiers);
	ckpt__put_le64(out + 8, s->bytes);
	ckpt__put_le64(out + 16, s->stored_bytes);
	ckpt__put_le64(out + 24, s->footer_checksum);
	ckpt__put_le64(out + 32, s->durable_ns);
	ckpt__put_le64(out + 40, s->lineage);
}

int ckpt__idx_shard_decode(const uint8_t *buf, size_t len, ckpt_idx_shard *s)
{
	memset(s, 0, sizeof(*s));
	if (len < 4)
		return -CKPT_ECORRUPT;
	uint32_t rv = ckpt__get_le32(buf);
	if (rv == 0)
		return -CKPT_ECORRUPT;
	if (rv > REC_VERSION)
		return -CKPT_EFORMAT;
	if (len != CKPT_IDX_SHARD_REC_LEN - 8 && len < CKPT_IDX_SHARD_REC_LEN)
		return -CKPT_ECORRUPT;
	s->tiers = ckpt__get_le32(buf + 4);
	s->bytes = ckpt__get_le64(buf + 8);
	s->stored_bytes = ckpt__get_le64(buf + 16);
	s->footer_checksum = ckpt__get_le64(buf + 24);
	s->durable_ns = ckpt__get_le64(buf + 32);
	s->lineage = len >= CKPT_IDX_SHARD_REC_LEN ? ckpt__get_le64(buf + 40) : 0;
	if (s->tiers & ~0xfu)
		return -CKPT_ECORRUPT;
	return 0;
}

size_t ckpt__idx_key(uint8_t *out, const char *job, uint64_t version, int with_rank, uint32_t rank)
{
	size_t jl = strnlen(job, 64);
	out[0] = (uint8_t)jl;
	memcpy(out + 1, job, jl);
	ckpt__put_be64(out + 1 + jl, version);
	if (!with_rank)
		return 1 + jl + 8;
	ckpt__put_be32(out + 1 + jl + 8, rank);
	return 1 + jl + 12;
}

int ckpt__idx_key_decode(const uint8_t *k, size_t len, char job[65], uint64_t *version,
                         uint32_t *rank, int *has_rank)
{
	if (len < 1)
		return -CKPT_ECORRUPT;
	size_t jl = k[0];
	if (jl == 0 || jl > 64 || (len != 1 + jl + 8 && len != 1 + jl + 12) || memchr(k + 1, 0, jl))
		return -CKPT_ECORRUPT;
	memcpy(job, k + 1, jl);
	job[jl] = 0;
	if (ckpt__job_valid(job) < 0)
		return -CKPT_ECORRUPT;
	*version = ckpt__get_be64(k + 1 + jl);
	*has_rank = len == 1 + jl + 12;
	*rank = *has_rank ? ckpt__get_be32(k + 1 + jl + 8) : 0;
	return 0;
}

/* ------------------------------------------------------------- open */

int ckpt__index_open(const char *root, const ckpt_logger *lg, ckpt_index **out)
{
	char dir[4096];
	if (snprintf(dir, sizeof(dir), "%s/index", root) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	CKPT_TRY(ckpt__mkdir_p(dir, 0700));
	ckpt_index *ix = calloc(1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	ix->lg = lg;
	int rc, err;
	MDB_txn *txn = NULL;
	if ((rc = mdb_env_create(&ix->env)) ||
	    (rc = mdb_env_set_maxdbs(ix->env, 4)) ||
	    (rc = mdb_env_set_mapsize(ix->env, MAP_SIZE)) ||
	    (rc = mdb_env_open(ix->env, dir, MDB_NOTLS, 0600))) {
		err = lmdb_err(ix, "open", rc);
		goto fail;
	}
	/* Readers of processes that were killed would pin old pages forever. */
	int dead = 0;
	mdb_reader_check(ix->env, &dead);
	if ((rc = mdb_txn_begin(ix->env, NULL, 0, &txn)) ||
	    (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &ix->meta)) ||
	    (rc = mdb_dbi_open(txn, "versions", MDB_CREATE, &ix->versions)) ||
	    (rc = mdb_dbi_open(txn, "shards", MDB_CREATE, &ix->shards)) ||
	    (rc = mdb_dbi_open(txn, "global", MDB_CREATE, &ix->global))) {
		err = lmdb_err(ix, "open tables", rc);
		goto fail;
	}
	MDB_val k = { 6, "schema" }, v;
	rc = mdb_get(txn, ix->meta, &k, &v);
	if (rc == MDB_NOTFOUND) {
		uint8_t sv[4];
		ckpt__put_le32(sv, CKPT_INDEX_SCHEMA);
		v.mv_size = 4;
		v.mv_data = sv;
		if ((rc = mdb_put(txn, ix->meta, &k, &v, 0))) {
			err = lmdb_err(ix, "write schema", rc);
			goto fail;
		}
	} else if (rc) {
		err = lmdb_err(ix, "read schema", rc);
		goto fail;
	} else {
		uint32_t schema = v.mv_size == 4 ? ckpt__get_le32(v.mv_data) : 0;
		if (schema == 0 || schema > CKPT_INDEX_SCHEMA) {
			LOG_E(lg, CKPT_NO_VERSION, "index schema %u is newer than this build (%u)", schema,
			      CKPT_INDEX_SCHEMA);
			err = -CKPT_EFORMAT;
			goto fail;
		}
	}
	if ((rc = mdb_txn_commit(txn))) {
		txn = NULL;
		err = lmdb_err(ix, "commit", rc);
		goto fail;
	}
	*out = ix;
	return 0;
fail:
	if (txn)
		mdb_txn_abort(txn);
	if (ix->env)
		mdb_env_close(ix->env);
	free(ix);
	return err;
}

void ckpt__index_close(ckpt_index *ix)
{
	if (!ix)
		return;
	mdb_env_close(ix->env);
	free(ix);
}

/* ------------------------------------------------------------- ops */

static int get_version(ckpt_index *ix, MDB_txn *txn, const char *job, uint64_t version,
                       ckpt_idx_version *v)
{
	uint8_t kb[CKPT_IDX_KEY_MAX];
	MDB_val k = { ckpt__idx_key(kb, job, version, 0, 0), kb }, val;
	int rc = mdb_get(txn, ix->versions, &k, &val);
	if (rc == MDB_NOTFOUND)
		return -CKPT_ENOVERSION;
	if (rc)
		return lmdb_err(ix, "get version", rc);
	int r = ckpt__idx_version_decode(val.mv_data, val.mv_size, v);
	if (r < 0)
		LOG_E(ix->lg, version, "index: version record is damaged (%s); run 'ckpt reindex'",
		      ckpt_strerror(r));
	return r;
}

static int put_version(ckpt_index *ix, MDB_txn *txn, const char *job, uint64_t version,
                       const ckpt_idx_version *v)
{
	uint8_t kb[CKPT_IDX_KEY_MAX], vb[CKPT_IDX_VERSION_REC_LEN];
	ckpt__idx_version_encode(vb, v);
	MDB_val k = { ckpt__idx_key(kb, job, version, 0, 0), kb }, val = { sizeof(vb), vb };
	int rc = mdb_put(txn, ix->versions, &k, &val, 0);
	return rc ? lmdb_err(ix, "put version", rc) : 0;
}

static int get_shard(ckpt_index *ix, MDB_txn *txn, const char *job, uint64_t version,
                     uint32_t rank, ckpt_idx_shard *s)
{
	uint8_t kb[CKPT_IDX_KEY_MAX];
	MDB_val k = { ckpt__idx_key(kb, job, version, 1, rank), kb }, val;
	int rc = mdb_get(txn, ix->shards, &k, &val);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc)
		return lmdb_err(ix, "get shard", rc);
	return ckpt__idx_shard_decode(val.mv_data, val.mv_size, s);
}

static int del_range(ckpt_index *ix, MDB_txn *txn, MDB_dbi dbi, const uint8_t *prefix, size_t plen);

static int commit(ckpt_index *ix, MDB_txn *txn, int err)
{
	if (err < 0) {
		mdb_txn_abort(txn);
		return err;
	}
	int rc = mdb_txn_commit(txn);
	return rc ? lmdb_err(ix, "commit", rc) : 0;
}

static int begin(ckpt_index *ix, int rdonly, MDB_txn **txn)
{
	int rc = mdb_txn_begin(ix->env, NULL, rdonly ? MDB_RDONLY : 0, txn);
	if (rc == MDB_MAP_RESIZED) {
		/* Another process grew the map; adopt its size and retry. */
		mdb_env_set_mapsize(ix->env, 0);
		rc = mdb_txn_begin(ix->env, NULL, rdonly ? MDB_RDONLY : 0, txn);
	}
	return rc ? lmdb_err(ix, "begin", rc) : 0;
}

int ckpt__index_begin(ckpt_index *ix, const char *job, uint64_t version, uint32_t world_size,
                      uint32_t rank, uint64_t created_ns, uint64_t lineage)
{
	MDB_txn *txn;
	CKPT_TRY(begin(ix, 0, &txn));
	ckpt_idx_version v;
	int err = get_version(ix, txn, job, version, &v);
	if (err == -CKPT_ENOVERSION) {
		memset(&v, 0, sizeof(v));
		v.state = CKPT_STATE_PENDING;
		v.world_size = world_size;
		v.created_ns = created_ns;
		v.lineage = lineage;
		err = put_version(ix, txn, job, version, &v);
	} else if (err == 0) {
		ckpt_idx_shard s;
		if (v.world_size != world_size)
			err = -CKPT_EMISMATCH;
		else if (v.state == CKPT_STATE_DELETING)
			err = -CKPT_ESTATE;
		else if (v.state == CKPT_STATE_COMMITTED)
			err = get_shard(ix, txn, job, version, rank, &s) == 0 ? -EEXIST : -CKPT_ESTATE;
	}
	return commit(ix, txn, err);
}

int ckpt__index_shard_done(ckpt_index *ix, const char *job, uint64_t version, uint32_t world_size,
                           uint32_t rank, const ckpt_idx_shard *s, int *committed)
{
	MDB_txn *txn;
	*committed = 0;
	CKPT_TRY(begin(ix, 0, &txn));
	ckpt_idx_version v;
	ckpt_idx_shard old;
	int err = get_version(ix, txn, job, version, &v);
	if (err < 0)
		goto out;
	if (v.world_size != world_size) {
		err = -CKPT_EMISMATCH;
		goto out;
	}
	if (v.state != CKPT_STATE_PENDING) {
		err = v.state == CKPT_STATE_COMMITTED ? -EEXIST : -CKPT_ESTATE;
		goto out;
	}
	if (v.lineage != s->lineage) {
		if (v.shards_done)
			LOG_W(ix->lg, version, "index: dropping %u shards of an earlier run of the job; "
			      "this version is being saved again", v.shards_done);
		uint8_t kb[CKPT_IDX_KEY_MAX];
		size_t kl = ckpt__idx_key(kb, job, version, 0, 0);
		if ((err = del_range(ix, txn, ix->shards, kb, kl)) < 0)
			goto out;
		v.shards_done = 0;
		v.bytes = v.stored_bytes = 0;
		v.lineage = s->lineage;
	}
	int had = get_shard(ix, txn, job, version, rank, &old);
	if (had < 0 && had != -ENOENT) {
		err = had;
		goto out;
	}
	if (had == 0) {
		/* A rank that saves a pending version again replaces its shard. */
		v.bytes -= old.bytes;
		v.stored_bytes -= old.stored_bytes;
	} else {
		v.shards_done++;
	}
	v.bytes += s->bytes;
	v.stored_bytes += s->stored_bytes;
	uint8_t kb[CKPT_IDX_KEY_MAX], vb[CKPT_IDX_SHARD_REC_LEN];
	ckpt__idx_shard_encode(vb, s);
	MDB_val k = { ckpt__idx_key(kb, job, version, 1, rank), kb }, val = { sizeof(vb), vb };
	int rc = mdb_put(txn, ix->shards, &k, &val, 0);
	if (rc) {
		err = lmdb_err(ix, "put shard", rc);
		goto out;
	}
	if (v.shards_done == v.world_size) {
		v.state = CKPT_STATE_COMMITTED;
		v.committed_ns = ckpt__wall_ns();
		*committed = 1;
	}
	err = put_version(ix, txn, job, version, &v);
out:
	err = commit(ix, txn, err);
	if (err < 0)
		*committed = 0;
	return err;
}

struct select_arg {
	uint64_t *v;
	size_t n, cap;
	uint32_t state;
	uint64_t from;
};

static int collect_state(void *arg, uint64_t version, const ckpt_idx_version *v)
{
	struct select_arg *a = arg;
	if (v->state != a->state || version < a->from)
		return 0;
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 16;
		uint64_t *p = realloc(a->v, nc * sizeof(*p));
		if (!p)
			return -ENOMEM;
		a->v = p;
		a->cap = nc;
	}
	a->v[a->n++] = version;
	return 0;
}

int ckpt__index_select(ckpt_index *ix, const char *job, uint32_t state, uint64_t from,
                       uint64_t **out, size_t *n)
{
	struct select_arg a = { NULL, 0, 0, state, from };
	int err = ckpt__index_each_version(ix, job, collect_state, &a);
	if (err < 0) {
		free(a.v);
		a.v = NULL;
		a.n = 0;
	}
	*out = a.v;
	*n = a.n;
	return err;
}

int ckpt__index_drop_stale(ckpt_index *ix, const char *job, uint32_t rank, uint64_t from,
                           ckpt_idx_drop_fn before, void *arg)
{
	struct { uint64_t *v; size_t n; } a;
	int err = ckpt__index_select(ix, job, CKPT_STATE_PENDING, from, &a.v, &a.n);
	int dropped = 0;
	for (size_t i = 0; err == 0 && i < a.n; i++) {
		ckpt_idx_shard s;
		uint32_t g;
		if (ckpt__index_get_shard(ix, job, a.v[i], rank, &s) < 0)
			continue;
		/* Committed across the cluster (other ranks' shards live in other
		 * roots): part of a restorable version, never stale. */
		if (ckpt__index_global(ix, job, a.v[i], &g) == 0)
			continue;
		if (before)
			before(arg, a.v[i]);
		MDB_txn *txn;
		if ((err = begin(ix, 0, &txn)) < 0)
			break;
		ckpt_idx_version v;
		err = get_version(ix, txn, job, a.v[i], &v);
		if (err == 0 && v.state == CKPT_STATE_PENDING &&
		    get_shard(ix, txn, job, a.v[i], rank, &s) == 0) {
			uint8_t kb[CKPT_IDX_KEY_MAX];
			MDB_val k = { ckpt__idx_key(kb, job, a.v[i], 1, rank), kb };
			int rc = mdb_del(txn, ix->shards, &k, NULL);
			if (rc) {
				err = lmdb_err(ix, "drop shard", rc);
			} else {
				v.shards_done--;
				v.bytes -= s.bytes;
				v.stored_bytes -= s.stored_bytes;
				err = put_version(ix, txn, job, a.v[i], &v);
				dropped++;
			}
		}
		if ((err = commit(ix, txn, err)) < 0)
			break;
	}
	free(a.v);
	return err < 0 ? err : dropped;
}

int ckpt__index_get(ckpt_index *ix, const char *job, uint64_t version, ckpt_idx_version *v)
{
	MDB_txn *txn;
	CKPT_TRY(begin(ix, 1, &txn));
	int err = get_version(ix, txn, job, version, v);
	mdb_txn_abort(txn);
	return err;
}

int ckpt__index_get_shard(ckpt_index *ix, const char *job, uint64_t version, uint32_t rank,
                          ckpt_idx_shard *s)
{
	MDB_txn *txn;
	CKPT_TRY(begin(ix, 1, &txn));
	int err = get_shard(ix, txn, job, version, rank, s);
	mdb_txn_abort(txn);
	return err;
}

int ckpt__index_set_state(ckpt_index *ix, const char *job, uint64_t version, uint32_t state)
{
	MDB_txn *txn;
	CKPT_TRY(begin(ix, 0, &txn));
	ckpt_idx_version v;
	int err = get_version(ix, txn, job, version, &v);
	if (err == 0) {
		v.state = state;
		err = put_version(ix, txn, job, version, &v);
	}
	return commit(ix, txn, err);
}

static int del_range(ckpt_index *ix, MDB_txn *txn, MDB_dbi dbi, const uint8_t *prefix, size_t plen)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, dbi, &c);
	if (rc)
		return lmdb_err(ix, "cursor", rc);
	MDB_val k = { plen, (void *)prefix }, v;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size >= plen && !memcmp(k.mv_data, prefix, plen)) {
		if ((rc = mdb_cursor_del(c, 0)))
			break;
		rc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT);
		if (rc == EINVAL || rc == MDB_NOTFOUND)
			rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	}
	mdb_cursor_close(c);
	return (rc == 0 || rc == MDB_NOTFOUND) ? 0 : lmdb_err(ix, "delete range", rc);
}

int ckpt__index_remove(ckpt_index *ix, const char *job, uint64_t version)
{
	MDB_txn *txn;
	CKPT_TRY(begin(ix, 0, &txn));
	uint8_t kb[CKPT_IDX_KEY_MAX];
	size_t kl = ckpt__idx_key(kb, job, version, 0, 0);
	MDB_val k = { kl, kb };
	int rc = mdb_del(txn, ix->versions, &k, NULL);
	int err = (rc && rc != MDB_NOTFOUND) ? lmdb_err(ix, "delete version", rc) : 0;
	if (err == 0)
		err = del_range(ix, txn, ix->shards, kb, kl);
	if (err == 0 && (rc = mdb_del(txn, ix->global, &k, NULL)) && rc != MDB_NOTFOUND)
		err = lmdb_err(ix, "delete global commit", rc);
	return commit(ix, txn, err);
}

int ckpt__index_note_global(ckpt_index *ix, const char *job, uint64_t version, uint32_t tiers)
{
	MDB_txn *txn;
	CKPT_TRY(begin(ix, 0, &txn));
	uint8_t kb[CKPT_IDX_KEY_MAX], vb[4];
	MDB_val k = { ckpt__idx_key(kb, job, version, 0, 0), kb }, v;
	int rc = mdb_get(txn, ix->global, &k, &v);
	if (rc == 0 && v.mv_size == 4)
		tiers |= ckpt__get_le32(v.mv_data);
	ckpt__put_le32(vb, tiers);
	v = (MDB_val){ 4, vb };
	int err = 0;
	if ((rc = mdb_put(txn, ix->global, &k, &v, 0)))
		err = lmdb_err(ix, "note global commit", rc);
	return commit(ix, txn, err);
}

int ckpt__index_global(ckpt_index *ix, const char *job, uint64_t version, uint32_t *tiers)
{
	MDB_txn *txn;
	CKPT_TRY(begin(ix, 1, &txn));
	uint8_t kb[CKPT_IDX_KEY_MAX];
	MDB_val k = { ckpt__idx_key(kb, job, version, 0, 0), kb }, v;
	int rc = mdb_get(txn, ix->global, &k, &v);
	int err = rc == MDB_NOTFOUND ? -ENOENT : rc ? lmdb_err(ix, "read global commit", rc) : 0;
	if (err == 0)
		*tiers = v.mv_size == 4 ? ckpt__get_le32(v.mv_data) : 0;
	mdb_txn_abort(txn);
	return err;
}

int ckpt__index_global_list(ckpt_index *ix, const char *job, uint32_t mask, uint64_t **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	MDB_txn *txn;
	CKPT_TRY(begin(ix, 1, &txn));
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, ix->global, &c);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_err(ix, "cursor", rc);
	}
	uint8_t kb[CKPT_IDX_KEY_MAX];
	size_t klen = ckpt__idx_key(kb, job, 0, 0, 0), plen = klen - 8, cap = 0;
	MDB_val k = { klen, kb }, v;
	int err = 0;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != klen || memcmp(k.mv_data, kb, plen))
			break;
		if (v.mv_size != 4 || !(ckpt__get_le32(v.mv_data) & mask))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			uint64_t *p = realloc(*out, cap * sizeof(*p));
			if (!p) {
				err = -ENOMEM;
				break;
			}
			*out = p;
		}
		(*out)[(*n)++] = ckpt__get_be64((const uint8_t *)k.mv_data + plen);
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (err == 0 && rc && rc != MDB_NOTFOUND)
		err = lmdb_err(ix, "scan global commits", rc);
	if (err < 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return err;
}

int ckpt__index_each_version(ckpt_index *ix, const char *job, ckpt_idx_version_fn fn, void *arg)
{
	MDB_txn *txn;
	CKPT_TRY(begin(ix, 1, &txn));
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, ix->versions, &c);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_err(ix, "cursor", rc);
	}
	uint8_t kb[CKPT_IDX_KEY_MAX];
	size_t plen = ckpt__idx_key(kb, job, 0, 0, 0) - 8;
	MDB_val k = { plen + 8, kb }, v;
	int ret = 0;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size == plen + 8 && !memcmp(k.mv_data, kb, plen)) {
		ckpt_idx_version rec;
		uint64_t ver = ckpt__get_be64((const uint8_t *)k.mv_data + plen);
		int d = ckpt__idx_version_decode(v.mv_data, v.mv_size, &rec);
		if (d < 0) {
			LOG_E(ix->lg, ver, "index: damaged version record skipped (%s); run 'ckpt reindex'",
			      ckpt_strerror(d));
		} else if ((ret = fn(arg, ver, &rec)) != 0) {
			break;
		}
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (ret)
		return ret;
	return (rc == 0 || rc == MDB_NOTFOUND) ? 0 : lmdb_err(ix, "scan", rc);
}

int ckpt__index_each_job(ckpt_index *ix, ckpt_idx_job_fn fn, void *arg)
{
	MDB_txn *txn;
	CKPT_TRY(begin(ix, 1, &txn));
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, ix->versions, &c);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_err(ix, "cursor", rc);
	}
	char last[65] = "";
	MDB_val k, v;
	int ret = 0;
	rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	while (rc == 0) {
		char job[65];
		uint64_t ver;
		uint32_t rank;
		int hr;
		if (ckpt__idx_key_decode(k.mv_data, k.mv_size, job, &ver, &rank, &hr) == 0 &&
		    strcmp(job, last)) {
			snprintf(last, sizeof(last), "%s", job);
			if ((ret = fn(arg, job)) != 0)
				break;
		}
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (ret)
		return ret;
	return (rc == 0 || rc == MDB_NOTFOUND) ? 0 : lmdb_err(ix, "scan", rc);
}

int ckpt__index_rebuild_job(ckpt_index *ix, const char *job, const ckpt_idx_rebuild_shard *s,
                            size_t n)
{
	MDB_txn *txn;
	CKPT_TRY(begin(ix, 0, &txn));
	uint8_t kb[CKPT_IDX_KEY_MAX];
	size_t plen = ckpt__idx_key(kb, job, 0, 0, 0) - 8;
	int err = del_range(ix, txn, ix->versions, kb, plen);
	if (err == 0)
		err = del_range(ix, txn, ix->shards, kb, plen);
	for (size_t i = 0; err == 0 && i < n; i++) {
		ckpt_idx_version v;
		int g = get_version(ix, txn, job, s[i].version, &v);
		if (g == -CKPT_ENOVERSION) {
			memset(&v, 0, sizeof(v));
			v.state = CKPT_STATE_PENDING;
			v.world_size = s[i].world_size;
			v.created_ns = s[i].created_ns;
			v.lineage = s[i].rec.lineage;
		} else if (g < 0) {
			err = g;
			break;
		} else if (v.lineage != s[i].rec.lineage && v.state == CKPT_STATE_PENDING) {
			/* Shards of another run: the later run's shards win (the caller
			 * passes them oldest first). */
			uint8_t vk[CKPT_IDX_KEY_MAX];
			size_t vkl = ckpt__idx_key(vk, job, s[i].version, 0, 0);
			if ((err = del_range(ix, txn, ix->shards, vk, vkl)) < 0)
				break;
			v.shards_done = 0;
			v.bytes = v.stored_bytes = 0;
			v.lineage = s[i].rec.lineage;
		} else if (v.world_size != s[i].world_size) {
			LOG_W(ix->lg, s[i].version, "reindex: rank %u says world size %u, others %u; skipped",
			      s[i].rank, s[i].world_size, v.world_size);
			continue;
		}
		ckpt_idx_shard old;
		if (get_shard(ix, txn, job, s[i].version, s[i].rank, &old) == 0)
			continue;
		uint8_t sk[CKPT_IDX_KEY_MAX], sv[CKPT_IDX_SHARD_REC_LEN];
		ckpt__idx_shard_encode(sv, &s[i].rec);
		MDB_val k = { ckpt__idx_key(sk, job, s[i].version, 1, s[i].rank), sk }, val = { sizeof(sv), sv };
		int rc = mdb_put(txn, ix->shards, &k, &val, 0);
		if (rc) {
			err = lmdb_err(ix, "put shard", rc);
			break;
		}
		v.shards_done++;
		v.bytes += s[i].rec.bytes;
		v.stored_bytes += s[i].rec.stored_bytes;
		if (s[i].created_ns < v.created_ns)
			v.created_ns = s[i].created_ns;
		if (v.shards_done == v.world_size) {
			v.state = CKPT_STATE_COMMITTED;
			v.committed_ns = ckpt__wall_ns();
		}
		err = put_version(ix, txn, job, s[i].version, &v);
	}
	return commit(ix, txn, err);
}
