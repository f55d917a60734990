/* SHARD_DONE: record a durable copy and, in the same transaction, commit
 * every tier it completes. */
#include "coord_int.h"

#include <errno.h>

/* Checks and applies one report. A refusal returns before writing. */
static int apply(ckptd_tx *t, const ckptd_coord_shard *s, uint32_t *committed)
{
	*committed = 0;
	if (ckpt__job_valid(s->job) < 0 || ckptd__node_valid(s->node) < 0)
		return -CKPT_ENAME;
	if (ckptd__tier_index(s->tier) < 0 || (s->world_size && s->rank >= s->world_size))
		return -EINVAL;
	ckptd_vrec v;
	int err = ckptd__get_version(t, s->job, s->version, &v);
	if (err == -CKPT_ENOVERSION) {
		if (s->world_size == 0)
			return err;
		memset(&v, 0, sizeof(v));
		v.world_size = s->world_size;
		v.lineage = s->lineage;
		v.created_ns = t->now_ns;
		CKPT_TRY(ckptd__ensure_job(t, s->job, s->world_size));
	} else if (err < 0) {
		return err;
	} else if ((s->world_size && v.world_size != s->world_size) || s->rank >= v.world_size) {
		return -CKPT_EMISMATCH;
	} else if (v.lineage != s->lineage) {
		if (v.flags & CKPTD_VF_SEALED) {
			LOG_W(&t->c->lg, s->version, "coord: %s rank %u: a shard of another run for a "
			      "committed version; refused", s->job, s->rank);
			return -CKPT_EMISMATCH;
		}
		if (v.nshards)
			LOG_W(&t->c->lg, s->version, "coord: %s: dropping %u shards of an earlier run; "
			      "this version is being saved again", s->job, v.nshards);
		CKPT_TRY(ckptd__reset_version(t, s->job, s->version, &v));
		v.lineage = s->lineage;
		v.created_ns = t->now_ns;
	}
	uint32_t before = ckptd__committed_mask(&v);
	int rbefore = ckptd__restorable(&v);
	uint32_t gen;
	int added;
	CKPT_TRY(ckptd__agent_gen(t, s->node, &gen));
	CKPT_TRY(ckptd__add_copy(t, s->job, s->version, &v, s->rank, s->tier, s->node, s->bytes,
	                         s->checksum, gen, &added));
	if (!added)
		return 0;
	*committed = ckptd__settle(t, &v, before);
	CKPT_TRY(ckptd__put_version(t, s->job, s->version, &v));
	return ckptd__note(t, s->job, s->version, before, rbefore, &v);
}

static int fatal(int err)
{
	/* Errors of the store abort the batch; refusals of an item do not. */
	return err == -CKPT_EINDEX || err == -ENOMEM || err == -ENOSPC || err == -EIO ||
	       err == -EACCES || err == -CKPT_ECORRUPT || err == -CKPT_EFORMAT;
}

int ckptd_coord_shard_done_batch(ckptd_coord *c, const ckptd_coord_shard *s, size_t n,
                                 ckptd_coord_result *res)
{
	ckptd_tx t;
	CKPT_TRY(ckptd__begin(c, 0, &t));
	int err = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t committed = 0;
		int r = apply(&t, &s[i], &committed);
		if (r < 0 && fatal(r)) {
			err = r;
			break;
		}
		if (res) {
			res[i].status = r < 0 ? r : 0;
			res[i].committed = r < 0 ? 0 : committed;
		}
	}
	err = ckptd__end(&t, err, NULL, NULL);
	if (err < 0 && res)
		for (size_t i = 0; i < n; i++)
			res[i] = (ckptd_coord_result){ err, 0 };
	return err;
}

int ckptd_coord_shard_done(ckptd_coord *c, const char *job, uint64_t version, uint32_t rank,
                           uint32_t world_size, uint32_t tier, const char *node, uint64_t bytes,
                           uint64_t checksum, uint64_t lineage, uint32_t *committed)
{
	ckptd_coord_shard s = { job, version, rank, world_size, tier, node, bytes, checksum, lineage };
	ckptd_coord_result r = { 0, 0 };
	int err = ckptd_coord_shard_done_batch(c, &s, 1, &r);
	if (committed)
		*committed = r.committed;
	return err < 0 ? err : r.status;
}
