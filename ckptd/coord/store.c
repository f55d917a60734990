/* The environment, transactions, and the copy bookkeeping that keeps the
 * per-shard and per-version counts right; every write path goes through
 * add_copy / drop_copy so that the counts always equal what the copies
 * table says. */
#include "coord_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define DEFAULT_MAP_SIZE (16ull << 30)

int ckptd__lmdb_err(ckptd_coord *c, const char *what, int rc)
{
	LOG_E(c ? &c->lg : NULL, CKPT_NO_VERSION, "coord index: %s: %s", what, mdb_strerror(rc));
	if (rc == ENOMEM || rc == ENOSPC || rc == EACCES || rc == EIO)
		return -rc;
	return -CKPT_EINDEX;
}

int ckptd_coord_open(const char *dir, uint64_t map_size, ckptd_coord **out)
{
	*out = NULL;
	if (!dir || !*dir)
		return -EINVAL;
	CKPT_TRY(ckpt__mkdir_p(dir, 0700));
	ckptd_coord *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	ckpt__logger_init(&c->lg, "", -1);
	int rc, err = 0;
	MDB_txn *txn = NULL;
	if ((rc = mdb_env_create(&c->env)) || (rc = mdb_env_set_maxdbs(c->env, 16)) ||
	    (rc = mdb_env_set_mapsize(c->env, map_size ? map_size : DEFAULT_MAP_SIZE)) ||
	    (rc = mdb_env_open(c->env, dir, MDB_NOTLS, 0600))) {
		err = ckptd__lmdb_err(c, "open", rc);
		goto fail;
	}
	/* Readers of killed processes would pin old pages forever. */
	int dead = 0;
	mdb_reader_check(c->env, &dead);
	if ((rc = mdb_txn_begin(c->env, NULL, 0, &txn)) ||
	    (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &c->meta)) ||
	    (rc = mdb_dbi_open(txn, "jobs", MDB_CREATE, &c->jobs)) ||
	    (rc = mdb_dbi_open(txn, "versions", MDB_CREATE, &c->versions)) ||
	    (rc = mdb_dbi_open(txn, "shards", MDB_CREATE, &c->shards)) ||
	    (rc = mdb_dbi_open(txn, "copies", MDB_CREATE, &c->copies)) ||
	    (rc = mdb_dbi_open(txn, "bynode", MDB_CREATE, &c->bynode)) ||
	    (rc = mdb_dbi_open(txn, "agents", MDB_CREATE, &c->agents)) ||
	    (rc = mdb_dbi_open(txn, "ec", MDB_CREATE, &c->ec))) {
		err = ckptd__lmdb_err(c, "open tables", rc);
		goto fail;
	}
	MDB_val k = { 6, "schema" }, v;
	rc = mdb_get(txn, c->meta, &k, &v);
	if (rc == MDB_NOTFOUND) {
		uint8_t sv[4];
		ckpt__put_le32(sv, CKPTD_COORD_SCHEMA);
		v.mv_size = 4;
		v.mv_data = sv;
		if ((rc = mdb_put(txn, c->meta, &k, &v, 0))) {
			err = ckptd__lmdb_err(c, "write schema", rc);
			goto fail;
		}
	} else if (rc) {
		err = ckptd__lmdb_err(c, "read schema", rc);
		goto fail;
	} else {
		uint32_t schema = v.mv_size == 4 ? ckpt__get_le32(v.mv_data) : 0;
		if (schema == 0 || schema > CKPTD_COORD_SCHEMA) {
			LOG_E(&c->lg, CKPT_NO_VERSION, "coord index schema %u is newer than this build (%u)",
			      schema, CKPTD_COORD_SCHEMA);
			err = -CKPT_EFORMAT;
			goto fail;
		}
	}
	rc = mdb_txn_commit(txn);
	txn = NULL;
	if (rc) {
		err = ckptd__lmdb_err(c, "commit", rc);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	if (txn)
		mdb_txn_abort(txn);
	if (c->env)
		mdb_env_close(c->env);
	free(c);
	return err;
}

void ckptd_coord_close(ckptd_coord *c)
{
	if (!c)
		return;
	mdb_env_close(c->env);
	free(c);
}

/* ------------------------------------------------------------- txn */

int ckptd__begin(ckptd_coord *c, int rdonly, ckptd_tx *t)
{
	memset(t, 0, sizeof(*t));
	t->c = c;
	t->now_ns = ckpt__wall_ns();
	int rc = mdb_txn_begin(c->env, NULL, rdonly ? MDB_RDONLY : 0, &t->txn);
	if (rc == MDB_MAP_RESIZED) {
		/* Another process grew the map; adopt its size. */
		mdb_env_set_mapsize(c->env, 0);
		rc = mdb_txn_begin(c->env, NULL, rdonly ? MDB_RDONLY : 0, &t->txn);
	}
	return rc ? ckptd__lmdb_err(c, "begin", rc) : 0;
}

int ckptd__end(ckptd_tx *t, int err, ckptd_coord_change_fn fn, void *arg)
{
	if (err < 0) {
		mdb_txn_abort(t->txn);
	} else {
		int rc = mdb_txn_commit(t->txn);
		if (rc)
			err = ckptd__lmdb_err(t->c, "commit", rc);
	}
	t->txn = NULL;
	for (size_t i = 0; err >= 0 && fn && i < t->nch; i++) {
		const ckptd_coord_change *ch = &t->ch[i];
		if (ch->committed_before != ch->committed_after ||
		    ch->restorable_before != ch->restorable_after)
			fn(arg, ch);
	}
	free(t->ch);
	t->ch = NULL;
	t->nch = t->cap = 0;
	return err;
}

/* ------------------------------------------------------------- records */

int ckptd__get_version(ckptd_tx *t, const char *job, uint64_t version, ckptd_vrec *v)
{
	uint8_t kb[CKPT_IDX_KEY_MAX];
	MDB_val k = { ckpt__idx_key(kb, job, version, 0, 0), kb }, val;
	int rc = mdb_get(t->txn, t->c->versions, &k, &val);
	if (rc == MDB_NOTFOUND)
		return -CKPT_ENOVERSION;
	if (rc)
		return ckptd__lmdb_err(t->c, "get version", rc);
	int d = ckptd__vrec_decode(val.mv_data, val.mv_size, v);
	if (d < 0)
		LOG_E(&t->c->lg, version, "coord index: version record of %s damaged (%s)", job,
		      ckpt_strerror(d));
	return d;
}

int ckptd__put_version(ckptd_tx *t, const char *job, uint64_t version, const ckptd_vrec *v)
{
	uint8_t kb[CKPT_IDX_KEY_MAX], vb[CKPTD_VREC_LEN];
	MDB_val k = { ckpt__idx_key(kb, job, version, 0, 0), kb };
	int rc;
	if (v->nshards == 0) {
		/* Nothing holds any of it: the version is gone. */
		rc = mdb_del(t->txn, t->c->versions, &k, NULL);
		return (rc && rc != MDB_NOTFOUND) ? ckptd__lmdb_err(t->c, "del version", rc) : 0;
	}
	ckptd__vrec_encode(vb, v);
	MDB_val val = { sizeof(vb), vb };
	rc = mdb_put(t->txn, t->c->versions, &k, &val, 0);
	return rc ? ckptd__lmdb_err(t->c, "put version", rc) : 0;
}

int ckptd__get_shard(ckptd_tx *t, const char *job, uint64_t version, uint32_t rank, ckptd_srec *s)
{
	uint8_t kb[CKPT_IDX_KEY_MAX];
	MDB_val k = { ckpt__idx_key(kb, job, version, 1, rank), kb }, val;
	int rc = mdb_get(t->txn, t->c->shards, &k, &val);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc)
		return ckptd__lmdb_err(t->c, "get shard", rc);
	return ckptd__srec_decode(val.mv_data, val.mv_size, s);
}

static int put_shard(ckptd_tx *t, const char *job, uint64_t version, uint32_t rank,
                     const ckptd_srec *s)
{
	uint8_t kb[CKPT_IDX_KEY_MAX], vb[CKPTD_SREC_LEN];
	MDB_val k = { ckpt__idx_key(kb, job, version, 1, rank), kb };
	int rc;
	if (s->ncopies == 0) {
		rc = mdb_del(t->txn, t->c->shards, &k, NULL);
		return (rc && rc != MDB_NOTFOUND) ? ckptd__lmdb_err(t->c, "del shard", rc) : 0;
	}
	ckptd__srec_encode(vb, s);
	MDB_val val = { sizeof(vb), vb };
	rc = mdb_put(t->txn, t->c->shards, &k, &val, 0);
	return rc ? ckptd__lmdb_err(t->c, "put shard", rc) : 0;
}

int ckptd__get_agent(ckptd_tx *t, const char *node, ckptd_arec *a)
{
	MDB_val k = { strlen(node), (void *)node }, val;
	int rc = mdb_get(t->txn, t->c->agents, &k, &val);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc)
		return ckptd__lmdb_err(t->c, "get agent", rc);
	return ckptd__arec_decode(val.mv_data, val.mv_size, a);
}

int ckptd__put_agent(ckptd_tx *t, const char *node, const ckptd_arec *a)
{
	uint8_t vb[CKPTD_AREC_MIN + CKPTD_ADDR_MAX + CKPTD_NAME_MAX];
	MDB_val k = { strlen(node), (void *)node }, val = { ckptd__arec_encode(vb, sizeof(vb), a), vb };
	int rc = mdb_put(t->txn, t->c->agents, &k, &val, 0);
	return rc ? ckptd__lmdb_err(t->c, "put agent", rc) : 0;
}

int ckptd__agent_gen(ckptd_tx *t, const char *node, uint32_t *gen)
{
	ckptd_arec a;
	int err = ckptd__get_agent(t, node, &a);
	if (err == -ENOENT) {
		memset(&a, 0, sizeof(a));
		a.state = CKPTD_AGENT_REC_UP;
		a.gen = 1;
		a.last_seen_ns = t->now_ns;
		err = ckptd__put_agent(t, node, &a);
	}
	*gen = a.gen;
	return err;
}

int ckptd__ensure_job(ckptd_tx *t, const char *job, uint32_t world_size)
{
	uint8_t kb[1 + CKPTD_JOB_MAX], vb[CKPTD_JREC_LEN];
	MDB_val k = { ckptd__job_key(kb, job), kb }, val;
	int rc = mdb_get(t->txn, t->c->jobs, &k, &val);
	if (rc == 0)
		return 0;
	if (rc != MDB_NOTFOUND)
		return ckptd__lmdb_err(t->c, "get job", rc);
	/* Retention is off until a policy is set: keep everything. */
	ckptd_jrec j = { .world_size = world_size, .created_ns = t->now_ns,
	                 .policy = { UINT32_MAX, UINT32_MAX, 0 } };
	ckptd__jrec_encode(vb, &j);
	val.mv_size = sizeof(vb);
	val.mv_data = vb;
	rc = mdb_put(t->txn, t->c->jobs, &k, &val, 0);
	return rc ? ckptd__lmdb_err(t->c, "put job", rc) : 0;
}

/* ------------------------------------------------------------- derived state */

uint32_t ckptd__committed_mask(const ckptd_vrec *v)
{
	uint32_t m = 0;
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		if (v->ranks_at[i] == v->world_size)
			m |= 1u << i;
	return m;
}

int ckptd__restorable(const ckptd_vrec *v)
{
	return (v->flags & CKPTD_VF_SEALED) && v->ranks_any == v->world_size;
}

void ckptd__version_view(const ckptd_vrec *v, uint64_t version, ckptd_coord_version *o)
{
	memset(o, 0, sizeof(*o));
	o->version = version;
	o->world_size = v->world_size;
	o->committed = ckptd__committed_mask(v);
	o->restorable = (uint32_t)ckptd__restorable(v);
	o->ranks_any = v->ranks_any;
	for (int i = 0; i < CKPTD_COORD_TIERS; i++) {
		o->ranks_at[i] = v->ranks_at[i];
		if (v->ranks_at[i])
			o->held |= 1u << i;
	}
	o->deleting = v->deleting;
	o->state = o->restorable ? CKPT_STATE_COMMITTED
	         : (v->ranks_any == 0 && v->deleting) ? CKPT_STATE_DELETING : CKPT_STATE_PENDING;
	o->bytes = v->bytes;
	o->lineage = v->lineage;
	o->created_ns = v->created_ns;
	o->committed_ns = v->committed_ns;
}

uint32_t ckptd__settle(ckptd_tx *t, ckptd_vrec *v, uint32_t before)
{
	uint32_t now = ckptd__committed_mask(v);
	if (now && !(v->flags & CKPTD_VF_SEALED)) {
		v->flags |= CKPTD_VF_SEALED;
		v->committed_ns = t->now_ns;
	}
	return now & ~before;
}

int ckptd__note(ckptd_tx *t, const char *job, uint64_t version, uint32_t committed_before,
                int restorable_before, const ckptd_vrec *after)
{
	uint32_t ca = after ? ckptd__committed_mask(after) : 0;
	uint32_t ra = after ? (uint32_t)ckptd__restorable(after) : 0;
	for (size_t i = t->nch; i-- > 0;) {
		ckptd_coord_change *ch = &t->ch[i];
		if (ch->version == version && !strcmp(ch->job, job)) {
			ch->committed_after = ca;
			ch->restorable_after = ra;
			return 0;
		}
	}
	if (ca == committed_before && ra == (uint32_t)restorable_before)
		return 0;
	if (t->nch == t->cap) {
		size_t nc = t->cap ? 2 * t->cap : 16;
		ckptd_coord_change *p = realloc(t->ch, nc * sizeof(*p));
		if (!p)
			return -ENOMEM;
		t->ch = p;
		t->cap = nc;
	}
	ckptd_coord_change *ch = &t->ch[t->nch++];
	memset(ch, 0, sizeof(*ch));
	snprintf(ch->job, sizeof(ch->job), "%s", job);
	ch->version = version;
	ch->committed_before = committed_before;
	ch->restorable_before = (uint32_t)restorable_before;
	ch->committed_after = ca;
	ch->restorable_after = ra;
	return 0;
}

/* ------------------------------------------------------------- copies */

static uint32_t live_total(const ckptd_srec *s)
{
	uint32_t n = 0;
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		n += s->live[i];
	return n;
}

int ckptd__add_copy(ckptd_tx *t, const char *job, uint64_t version, ckptd_vrec *v, uint32_t rank,
                    uint32_t tier, const char *node, uint64_t bytes, uint64_t checksum,
                    uint32_t gen, int *added)
{
	*added = 0;
	int ti = ckptd__tier_index(tier);
	if (ti < 0 || rank >= v->world_size)
		return -EINVAL;
	ckptd_srec s;
	int err = ckptd__get_shard(t, job, version, rank, &s);
	if (err == -ENOENT) {
		memset(&s, 0, sizeof(s));
		s.bytes = bytes;
		s.checksum = checksum;
		s.lineage = v->lineage;
	} else if (err < 0) {
		return err;
	} else if (s.checksum != checksum || s.bytes != bytes) {
		LOG_W(&t->c->lg, version, "coord: %s rank %u: copy on %s differs from the recorded shard",
		      job, rank, node);
		return -CKPT_EMISMATCH;
	}
	uint8_t kb[CKPTD_KEY_MAX], cb[CKPTD_CREC_LEN];
	MDB_val k = { ckptd__copy_key(kb, job, version, rank, tier, node), kb }, val;
	ckptd_crec cr;
	int rc = mdb_get(t->txn, t->c->copies, &k, &val);
	if (rc == 0) {
		CKPT_TRY(ckptd__crec_decode(val.mv_data, val.mv_size, &cr));
		if (cr.gen == gen)
			return 0; /* a duplicate: nothing to write */
		/* Seen again in this round. A DELETING copy stays so. */
		cr.gen = gen;
		ckptd__crec_encode(cb, &cr);
		val.mv_size = sizeof(cb);
		val.mv_data = cb;
		rc = mdb_put(t->txn, t->c->copies, &k, &val, 0);
		return rc ? ckptd__lmdb_err(t->c, "put copy", rc) : 0;
	}
	if (rc != MDB_NOTFOUND)
		return ckptd__lmdb_err(t->c, "get copy", rc);
	cr = (ckptd_crec){ .state = CKPTD_COPY_LIVE, .gen = gen, .since_ns = t->now_ns };
	ckptd__crec_encode(cb, &cr);
	val.mv_size = sizeof(cb);
	val.mv_data = cb;
	if ((rc = mdb_put(t->txn, t->c->copies, &k, &val, 0)))
		return ckptd__lmdb_err(t->c, "put copy", rc);
	uint8_t nb[CKPTD_KEY_MAX];
	MDB_val nk = { ckptd__node_key(nb, node, job, version, rank, tier), nb }, nv = { 0, "" };
	if ((rc = mdb_put(t->txn, t->c->bynode, &nk, &nv, 0)))
		return ckptd__lmdb_err(t->c, "put node copy", rc);
	if (s.ncopies == 0) {
		v->nshards++;
		v->bytes += bytes;
	}
	if (live_total(&s) == 0)
		v->ranks_any++;
	if (s.live[ti] == 0)
		v->ranks_at[ti]++;
	s.live[ti]++;
	s.ncopies++;
	*added = 1;
	return put_shard(t, job, version, rank, &s);
}

int ckptd__drop_copy(ckptd_tx *t, const char *job, uint64_t version, ckptd_vrec *v, uint32_t rank,
                     uint32_t tier, const char *node, int deleting)
{
	int ti = ckptd__tier_index(tier);
	if (ti < 0)
		return -EINVAL;
	uint8_t kb[CKPTD_KEY_MAX], cb[CKPTD_CREC_LEN];
	MDB_val k = { ckptd__copy_key(kb, job, version, rank, tier, node), kb }, val;
	ckptd_crec cr;
	int rc = mdb_get(t->txn, t->c->copies, &k, &val);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return ckptd__lmdb_err(t->c, "get copy", rc);
	CKPT_TRY(ckptd__crec_decode(val.mv_data, val.mv_size, &cr));
	ckptd_srec s;
	int err = ckptd__get_shard(t, job, version, rank, &s);
	if (err < 0)
		return err == -ENOENT ? -CKPT_ECORRUPT : err;
	if (cr.state == CKPTD_COPY_LIVE) {
		if (s.live[ti] == 0)
			return -CKPT_ECORRUPT;
		if (--s.live[ti] == 0)
			v->ranks_at[ti]--;
		if (live_total(&s) == 0)
			v->ranks_any--;
	}
	if (deleting) {
		if (cr.state == CKPTD_COPY_LIVE) {
			cr.state = CKPTD_COPY_DELETING;
			ckptd__crec_encode(cb, &cr);
			val.mv_size = sizeof(cb);
			val.mv_data = cb;
			if ((rc = mdb_put(t->txn, t->c->copies, &k, &val, 0)))
				return ckptd__lmdb_err(t->c, "put copy", rc);
			v->deleting++;
		}
		return put_shard(t, job, version, rank, &s);
	}
	if (cr.state == CKPTD_COPY_DELETING)
		v->deleting--;
	if ((rc = mdb_del(t->txn, t->c->copies, &k, NULL)))
		return ckptd__lmdb_err(t->c, "del copy", rc);
	uint8_t nb[CKPTD_KEY_MAX];
	MDB_val nk = { ckptd__node_key(nb, node, job, version, rank, tier), nb };
	if ((rc = mdb_del(t->txn, t->c->bynode, &nk, NULL)) && rc != MDB_NOTFOUND)
		return ckptd__lmdb_err(t->c, "del node copy", rc);
	if (--s.ncopies == 0) {
		v->nshards--;
		v->bytes -= s.bytes;
	}
	return put_shard(t, job, version, rank, &s);
}

int ckptd__reset_version(ckptd_tx *t, const char *job, uint64_t version, ckptd_vrec *v)
{
	uint8_t pb[CKPT_IDX_KEY_MAX];
	size_t plen = ckpt__idx_key(pb, job, version, 0, 0);
	MDB_cursor *cur;
	int rc = mdb_cursor_open(t->txn, t->c->copies, &cur);
	if (rc)
		return ckptd__lmdb_err(t->c, "cursor", rc);
	MDB_val k = { plen, pb }, val;
	int err = 0;
	rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size > plen && !memcmp(k.mv_data, pb, plen)) {
		char j[CKPTD_JOB_MAX + 1], node[CKPTD_NAME_MAX + 1];
		uint64_t ver;
		uint32_t rank, tier;
		if ((err = ckptd__copy_key_decode(k.mv_data, k.mv_size, j, &ver, &rank, &tier, node)) < 0)
			break;
		uint8_t nb[CKPTD_KEY_MAX];
		MDB_val nk = { ckptd__node_key(nb, node, job, version, rank, tier), nb };
		if ((rc = mdb_del(t->txn, t->c->bynode, &nk, NULL)) && rc != MDB_NOTFOUND)
			break;
		if ((rc = mdb_cursor_del(cur, 0)))
			break;
		rc = mdb_cursor_get(cur, &k, &val, MDB_GET_CURRENT);
		if (rc == EINVAL || rc == MDB_NOTFOUND)
			rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	}
	mdb_cursor_close(cur);
	if (err < 0)
		return err;
	if (rc && rc != MDB_NOTFOUND)
		return ckptd__lmdb_err(t->c, "drop copies", rc);
	if ((rc = mdb_cursor_open(t->txn, t->c->shards, &cur)))
		return ckptd__lmdb_err(t->c, "cursor", rc);
	k.mv_size = plen;
	k.mv_data = pb;
	rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size > plen && !memcmp(k.mv_data, pb, plen)) {
		if ((rc = mdb_cursor_del(cur, 0)))
			break;
		rc = mdb_cursor_get(cur, &k, &val, MDB_GET_CURRENT);
		if (rc == EINVAL || rc == MDB_NOTFOUND)
			rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return ckptd__lmdb_err(t->c, "drop shards", rc);
	v->nshards = v->ranks_any = v->deleting = 0;
	memset(v->ranks_at, 0, sizeof(v->ranks_at));
	v->bytes = 0;
	return 0;
}

/* ------------------------------------------------------------- ec */

int ckptd_coord_ec_put(ckptd_coord *c, const void *key, size_t klen, const void *val, size_t vlen)
{
	if (!key || !klen || klen > CKPTD_COORD_EC_KEY_MAX || (vlen && !val))
		return -EINVAL;
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 0, &t));
	MDB_val k = { klen, (void *)key }, v = { vlen, (void *)val };
	int rc = vlen ? mdb_put(t.txn, c->ec, &k, &v, 0) : mdb_del(t.txn, c->ec, &k, NULL);
	int err = rc == 0 || (!vlen && rc == MDB_NOTFOUND) ? 0 : ckptd__lmdb_err(c, "ec record", rc);
	return ckptd__end(&t, err, NULL, NULL);
}

int ckptd_coord_ec_each(ckptd_coord *c, ckptd_coord_ec_fn fn, void *arg)
{
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 1, &t));
	MDB_cursor *cur = NULL;
	int rc = mdb_cursor_open(t.txn, c->ec, &cur), err = 0;
	if (rc) {
		err = ckptd__lmdb_err(c, "ec cursor", rc);
	} else {
		MDB_val k, v;
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
			if (fn(arg, k.mv_data, k.mv_size, v.mv_data, v.mv_size))
				break;
		if (rc && rc != MDB_NOTFOUND)
			err = ckptd__lmdb_err(c, "ec scan", rc);
		mdb_cursor_close(cur);
	}
	mdb_txn_abort(t.txn);
	return err;
}
