/* Read-only questions: the versions of a job, and where a rank restores
 * from. Each runs in one read transaction, so it sees one committed state. */
#include "coord_int.h"

#include <errno.h>
#include <stdlib.h>

int ckptd_coord_list(ckptd_coord *c, const char *job, uint64_t start, ckptd_coord_version_fn fn,
                     void *arg)
{
	CKPT_TRY(ckpt__job_valid(job));
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 1, &t));
	MDB_cursor *cur;
	int rc = mdb_cursor_open(t.txn, c->versions, &cur);
	if (rc) {
		mdb_txn_abort(t.txn);
		return ckptd__lmdb_err(c, "cursor", rc);
	}
	uint8_t kb[CKPT_IDX_KEY_MAX];
	size_t klen = ckpt__idx_key(kb, job, start, 0, 0), plen = klen - 8;
	MDB_val k = { klen, kb }, val;
	int ret = 0;
	rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size == klen && !memcmp(k.mv_data, kb, plen)) {
		uint64_t ver = ckpt__get_be64((const uint8_t *)k.mv_data + plen);
		ckptd_vrec v;
		int d = ckptd__vrec_decode(val.mv_data, val.mv_size, &v);
		if (d < 0) {
			LOG_E(&c->lg, ver, "coord: %s: damaged version record skipped (%s)", job,
			      ckpt_strerror(d));
		} else {
			ckptd_coord_version view;
			ckptd__version_view(&v, ver, &view);
			if ((ret = fn(arg, &view)) != 0)
				break;
		}
		rc = mdb_cursor_get(cur, &k, &val, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(t.txn);
	if (ret)
		return ret;
	return (rc == 0 || rc == MDB_NOTFOUND) ? 0 : ckptd__lmdb_err(c, "scan", rc);
}

int ckptd_coord_get(ckptd_coord *c, const char *job, uint64_t version, ckptd_coord_version *out)
{
	CKPT_TRY(ckpt__job_valid(job));
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 1, &t));
	ckptd_vrec v;
	int err = ckptd__get_version(&t, job, version, &v);
	if (err == 0)
		ckptd__version_view(&v, version, out);
	mdb_txn_abort(t.txn);
	return err;
}

/* The newest restorable version of job, scanning backwards. */
static int latest_restorable(ckptd_tx *t, const char *job, uint64_t *version, ckptd_vrec *v)
{
	MDB_cursor *cur;
	int rc = mdb_cursor_open(t->txn, t->c->versions, &cur);
	if (rc)
		return ckptd__lmdb_err(t->c, "cursor", rc);
	uint8_t kb[CKPT_IDX_KEY_MAX];
	size_t klen = ckpt__idx_key(kb, job, UINT64_MAX, 0, 0), plen = klen - 8;
	MDB_val k = { klen, kb }, val;
	int err = -CKPT_ENOVERSION;
	rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	if (rc == 0 && !(k.mv_size == klen && !memcmp(k.mv_data, kb, klen)))
		rc = mdb_cursor_get(cur, &k, &val, MDB_PREV);
	else if (rc == MDB_NOTFOUND)
		rc = mdb_cursor_get(cur, &k, &val, MDB_LAST);
	while (rc == 0 && k.mv_size == klen && !memcmp(k.mv_data, kb, plen)) {
		if (ckptd__vrec_decode(val.mv_data, val.mv_size, v) == 0 && ckptd__restorable(v)) {
			*version = ckpt__get_be64((const uint8_t *)k.mv_data + plen);
			err = 0;
			break;
		}
		rc = mdb_cursor_get(cur, &k, &val, MDB_PREV);
	}
	mdb_cursor_close(cur);
	if (err < 0 && rc && rc != MDB_NOTFOUND)
		err = ckptd__lmdb_err(t->c, "scan", rc);
	return err;
}

/* Read cost, smaller first (coord.h, ckptd_coord_restore_plan). */
static int copy_rank(uint32_t tier, int own)
{
	switch (tier) {
	case CKPT_TIER_LOCAL_MEM: return own ? 0 : 3;
	case CKPT_TIER_LOCAL_DISK: return own ? 1 : 5;
	case CKPT_TIER_PEER_MEM: return 2;
	default: return 4;
	}
}

static int plan_copies(ckptd_tx *t, const char *job, uint64_t version, uint32_t rank,
                       const char *node, ckptd_coord_plan *out)
{
	uint8_t pb[CKPT_IDX_KEY_MAX];
	size_t plen = ckpt__idx_key(pb, job, version, 1, rank);
	MDB_cursor *cur;
	int rc = mdb_cursor_open(t->txn, t->c->copies, &cur);
	if (rc)
		return ckptd__lmdb_err(t->c, "cursor", rc);
	int order[CKPTD_COORD_MAX_COPIES];
	MDB_val k = { plen, pb }, val;
	rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size > plen && !memcmp(k.mv_data, pb, plen) &&
	       out->count < CKPTD_COORD_MAX_COPIES) {
		char j[CKPTD_JOB_MAX + 1], holder[CKPTD_NAME_MAX + 1];
		uint64_t ver;
		uint32_t r, tier;
		ckptd_crec cr;
		if (ckptd__copy_key_decode(k.mv_data, k.mv_size, j, &ver, &r, &tier, holder) == 0 &&
		    ckptd__crec_decode(val.mv_data, val.mv_size, &cr) == 0 &&
		    cr.state == CKPTD_COPY_LIVE) {
			int o = copy_rank(tier, !node || !strcmp(node, holder));
			/* Insertion sort: a shard has a handful of copies. */
			uint32_t i = out->count++;
			while (i > 0 && order[i - 1] > o) {
				order[i] = order[i - 1];
				out->copies[i] = out->copies[i - 1];
				i--;
			}
			order[i] = o;
			out->copies[i].tier = tier;
			memcpy(out->copies[i].node, holder, sizeof(holder));
		}
		rc = mdb_cursor_get(cur, &k, &val, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	return (rc == 0 || rc == MDB_NOTFOUND) ? 0 : ckptd__lmdb_err(t->c, "scan", rc);
}

int ckptd_coord_restore_plan(ckptd_coord *c, const char *job, uint64_t version, uint32_t rank,
                             const char *node, ckptd_coord_plan *out)
{
	memset(out, 0, sizeof(*out));
	CKPT_TRY(ckpt__job_valid(job));
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 1, &t));
	ckptd_vrec v;
	int err;
	if (version == CKPT_LATEST) {
		err = latest_restorable(&t, job, &version, &v);
	} else {
		err = ckptd__get_version(&t, job, version, &v);
		if (err == 0 && !ckptd__restorable(&v))
			err = -CKPT_ENOVERSION;
	}
	if (err < 0)
		goto out;
	if (rank >= v.world_size) {
		err = -EINVAL;
		goto out;
	}
	ckptd_srec s;
	if ((err = ckptd__get_shard(&t, job, version, rank, &s)) < 0) {
		err = err == -ENOENT ? -CKPT_ECORRUPT : err;
		goto out;
	}
	out->version = version;
	out->world_size = v.world_size;
	out->bytes = s.bytes;
	out->checksum = s.checksum;
	out->lineage = s.lineage;
	err = plan_copies(&t, job, version, rank, node, out);
	if (err == 0 && out->count == 0)
		err = -CKPT_ECORRUPT; /* restorable means this rank has a live copy */
out:
	mdb_txn_abort(t.txn);
	return err;
}

int ckptd_coord_copies(ckptd_coord *c, const char *job, uint64_t version, uint32_t start_rank,
                       ckptd_coord_copy_fn fn, void *arg)
{
	CKPT_TRY(ckpt__job_valid(job));
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 1, &t));
	ckptd_vrec v;
	int err = ckptd__get_version(&t, job, version, &v);
	MDB_cursor *cur = NULL;
	int rc = 0;
	if (err == 0 && (rc = mdb_cursor_open(t.txn, c->copies, &cur)))
		err = ckptd__lmdb_err(c, "cursor", rc);
	if (err < 0) {
		mdb_txn_abort(t.txn);
		return err;
	}
	/* Copy keys sort by rank within the version, then tier and node. */
	uint8_t pb[CKPT_IDX_KEY_MAX];
	size_t plen = ckpt__idx_key(pb, job, version, 0, 0);
	MDB_val k = { plen, pb }, val;
	uint32_t srank = UINT32_MAX;
	ckptd_srec s = { 0 };
	rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size > plen && !memcmp(k.mv_data, pb, plen)) {
		ckptd_coord_copy_info ci;
		char j[CKPTD_JOB_MAX + 1];
		uint64_t ver;
		ckptd_crec cr;
		if ((err = ckptd__copy_key_decode(k.mv_data, k.mv_size, j, &ver, &ci.rank, &ci.tier, ci.node)) < 0 ||
		    (err = ckptd__crec_decode(val.mv_data, val.mv_size, &cr)) < 0)
			break;
		if (ci.rank >= start_rank) {
			if (ci.rank != srank) {
				if ((err = ckptd__get_shard(&t, job, version, ci.rank, &s)) < 0)
					break;
				srank = ci.rank;
			}
			ci.deleting = cr.state == CKPTD_COPY_DELETING;
			ci.bytes = s.bytes;
			ci.checksum = s.checksum;
			if ((err = fn(arg, &ci)) != 0)
				break;
		}
		rc = mdb_cursor_get(cur, &k, &val, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(t.txn);
	if (err)
		return err;
	return (rc == 0 || rc == MDB_NOTFOUND) ? 0 : ckptd__lmdb_err(c, "scan copies", rc);
}
