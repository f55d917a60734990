/* ckpt_restore from the SHARED tier on an object store (CKPT_SHARED_DIR =
 * s3://BUCKET/PREFIX, format/s3tree.h): this rank's shard object read with
 * ranged GETs, its header, tail and footer first, then the chunks many at a
 * time, straight into host regions where they are stored as they are (else
 * into staging slots), every chunk's checksum verified before its bytes
 * count. Keys are computed: no LIST, but to find versions when neither the
 * coordinator nor this root knows any (every node lost). */
#include "ctx.h"
#include "restore.h"
#include "format/reader.h"
#include "format/s3tree.h"
#include "format/shared.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define S3_SLOTS 16 /* staging slots a restore takes for chunks that cannot land in place */

/* The context's client, opened once (a failure is said once, then the
 * tier is unavailable). */
ckpt_s3tree *ckpt__restore_s3_tree(ckpt_ctx *ctx)
{
	pthread_mutex_lock(&ctx->lock);
	if (!ctx->s3tree && !ctx->s3tree_failed) {
		char err[700] = "";
		ckpt_s3tree *t = calloc(1, sizeof(*t));
		int r = t ? ckpt__s3tree_open(t, ctx->shared_dir, err, sizeof(err)) : -ENOMEM;
		if (r < 0) {
			LOG_E(&ctx->log, CKPT_NO_VERSION, "restore: the SHARED tier on the object store: %s",
			      err[0] ? err : ckpt_strerror(r));
			free(t);
			ctx->s3tree_failed = 1;
		} else {
			ctx->s3tree = t;
		}
	}
	ckpt_s3tree *t = ctx->s3tree;
	pthread_mutex_unlock(&ctx->lock);
	return t;
}

void ckpt__restore_s3_close(ckpt_ctx *ctx)
{
	if (!ctx->s3tree)
		return;
	ckpt__s3tree_close(ctx->s3tree);
	free(ctx->s3tree);
	ctx->s3tree = NULL;
}

int ckpt__restore_s3_marked(ckpt_ctx *ctx, uint64_t version)
{
	ckpt_s3tree *t = ckpt__restore_s3_tree(ctx);
	ckpt_shared_mark mk;
	char err[600];
	return t && ckpt__s3tree_marker_read(t, ctx->job, version, &mk, err, sizeof(err)) == 0;
}

int ckpt__restore_s3_merge(ckpt_ctx *ctx, uint64_t **v, size_t *n, uint8_t **tree_only)
{
	ckpt_s3tree *t = ckpt__restore_s3_tree(ctx);
	uint64_t *found = NULL;
	size_t nf = 0;
	char err[600] = "";
	*tree_only = NULL;
	if (t) {
		int r = ckpt__s3tree_versions(t, ctx->job, &found, &nf, err, sizeof(err));
		if (r == -ENOMEM)
			return r;
		if (r < 0) {
			LOG_W(&ctx->log, CKPT_NO_VERSION, "restore: cannot list the versions in %s: %s", t->url, err);
			nf = 0;
		}
	}
	return ckpt__shared_merge_found(v, n, found, nf, tree_only);
}

/* The shard object at key into the regions, every chunk checked. */
static int restore_object(ckpt_ctx *ctx, ckpt_s3tree *t, uint64_t version, const char *key, uint64_t lineage)
{
	char why[700] = "";
	ckpt_shard s;
	int err = ckpt__s3tree_shard_open(t, key, &s, why, sizeof(why));
	if (err < 0) {
		if (err == -ENOENT)
			LOG_I(&ctx->log, version, "restore: no SHARED object %s in %s", key, t->url);
		else
			LOG_W(&ctx->log, version, "restore: SHARED object %s: %s", key, why[0] ? why : ckpt_strerror(err));
		return err;
	}
	if (s.header.version != version || s.header.rank != ctx->cfg.rank || s.header.world_size != ctx->cfg.world_size ||
	    strcmp(s.header.job, ctx->job) || (lineage && s.header.lineage && s.header.lineage != lineage)) {
		LOG_E(&ctx->log, version, "restore: SHARED object %s is not this rank's shard of the version committed", key);
		ckpt__shard_close(&s);
		return -CKPT_ECORRUPT;
	}
	struct restore_arg a = { ctx, NULL };
	uint8_t *want = calloc(s.footer.region_count + 1, 1);
	a.map = malloc((s.footer.region_count + 1) * sizeof(int32_t));
	uint8_t *bufs[S3_SLOTS];
	int slots[S3_SLOTS];
	uint32_t nb = 0;
	if (!want || !a.map) {
		err = -ENOMEM;
		goto out;
	}
	if ((err = ckpt__restore_map(ctx, version, &s, a.map, want)) < 0)
		goto out;
	/* Staging slots for the chunks that cannot be read in place (device
	 * and file regions, compressed chunks): one at least, waiting for it. */
	if (ctx->pool.slot_bytes >= s.footer.chunk_bytes) {
		slots[nb] = ckpt__slot_take(ctx);
		bufs[nb] = ckpt__pool_slot(&ctx->pool, slots[nb]);
		nb++;
		pthread_mutex_lock(&ctx->lock);
		int sl;
		while (nb < S3_SLOTS && (sl = ckpt__pool_get(&ctx->pool)) >= 0) {
			slots[nb] = sl;
			bufs[nb++] = ckpt__pool_slot(&ctx->pool, sl);
		}
		pthread_mutex_unlock(&ctx->lock);
	}
	ckpt_read_opts o = { .depth = 64, .bufs = nb ? bufs : NULL, .nbufs = nb, .buf_bytes = ctx->pool.slot_bytes,
	                     .want = want, .lg = &ctx->log, .why = why, .whycap = sizeof(why),
	                     .place = ckpt__restore_place, .place_arg = &a };
	uint64_t t0 = ckpt__now_ns();
	err = ckpt__s3tree_shard_read(t, key, &s, &o, ckpt__restore_sink, &a);
	if (err < 0)
		LOG_W(&ctx->log, version, "restore: SHARED object %s: %s", key, why[0] ? why : ckpt_strerror(err));
	else
		LOG_T(&ctx->log, version, "restore: %llu bytes from %s in %.3f s", (unsigned long long)s.file_length, key,
		      (ckpt__now_ns() - t0) / 1e9);
out:
	for (uint32_t i = 0; i < nb; i++)
		ckpt__slot_give(ctx, slots[i]);
	free(want);
	free(a.map);
	ckpt__shard_close(&s);
	return err;
}

int ckpt__restore_s3(ckpt_ctx *ctx, uint64_t version, int listed)
{
	ckpt_s3tree *t = ckpt__restore_s3_tree(ctx);
	if (!t)
		return -CKPT_EUNAVAIL;
	char key[CKPT_S3TREE_KEY_MAX], err[600] = "";
	ckpt_shared_mark mk = { 0 };
	uint32_t g;
	int r = ckpt__s3tree_marker_read(t, ctx->job, version, &mk, err, sizeof(err));
	if (r < 0 && r != -ENOENT)
		LOG_W(&ctx->log, version, "restore: the SHARED commit marker in %s: %s", t->url, err);
	if (r == 0 && mk.world_size != ctx->cfg.world_size) {
		LOG_I(&ctx->log, version, "restore: saved with %u ranks, this job has %u: resharding", mk.world_size,
		      ctx->cfg.world_size);
		return -CKPT_EMISMATCH;
	}
	if (r < 0 && !listed && ckpt__index_global(ctx->index, ctx->job, version, &g) != 0)
		return -CKPT_ENOVERSION; /* not known to be committed */
	CKPT_TRY(ckpt__s3tree_key(t, key, sizeof(key), ctx->job, version, ctx->cfg.rank));
	return restore_object(ctx, t, version, key, r == 0 ? mk.lineage : 0);
}
