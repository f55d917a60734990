/* ckpt_restore: the newest committed version that verifies (or the one
 * asked for), read in parallel, every checksum checked before the bytes
 * reach the caller's regions. */
#include "ctx.h"
#include "daemon.h"
#include "peer.h"
#include "reshard.h"
#include "restore.h"
#include "format/reader.h"
#include "format/shared.h"
#include "format/s3tree.h"
#include "format/seal.h"
#include "ckpt_kernels.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

int ckpt__restore_sink(void *arg, uint32_t ri, uint64_t off, const void *data, size_t len)
{
	struct restore_arg *a = arg;
	int32_t ci = a->map[ri];
	if (ci < 0)
		return 0;
	const ckpt_region *r = &a->ctx->regions[ci];
	if (off > r->bytes || len > r->bytes - off)
		return -CKPT_ECORRUPT;
	if (r->device == CKPT_DEVICE_CUDA)
		return ckpt__dev_h2d(a->ctx->dev, (uint8_t *)r->ptr + off, data, len);
	if (r->fd >= 0)
		return ckpt__pwrite_full(r->fd, data, len, r->fd_off + off);
	memcpy((uint8_t *)r->ptr + off, data, len);
	return 0;
}

/* Where region ri's bytes [off, off+len) go in host memory, for a copy
 * fused with the checksum; NULL when they take the sink (device memory, a
 * file region) or
 * are not wanted. *bad: the range lies outside the region. */
static uint8_t *restore_place(struct restore_arg *a, uint32_t ri, uint64_t off, size_t len, int *bad)
{
	int32_t ci = a->map[ri];
	*bad = 0;
	if (ci < 0)
		return NULL;
	const ckpt_region *r = &a->ctx->regions[ci];
	if (off > r->bytes || len > r->bytes - off) {
		*bad = 1;
		return NULL;
	}
	if (r->device == CKPT_DEVICE_CUDA || r->fd >= 0)
		return NULL;
	return (uint8_t *)r->ptr + off;
}

/* The reader's place callback: a chunk's bytes read straight into host
 * regions (a range outside the region gets NULL: the sink reports it). */
uint8_t *ckpt__restore_place(void *arg, uint32_t ri, uint64_t off, size_t len)
{
	int bad;
	return restore_place(arg, ri, off, len, &bad);
}

static int restore_file(ckpt_ctx *ctx, uint64_t version, const char *path, const uint64_t *sum, uint64_t lineage);

/* listed: the coordinator lists the version as committed. A version whose
 * other ranks' shards live in other nodes' roots stays PENDING in this
 * root's index; it is restorable here when the coordinator lists it, or
 * announced its commit earlier (the index noted it). */
static int restore_one(ckpt_ctx *ctx, uint64_t version, int listed)
{
	char path[4096];
	ckpt_idx_version v;
	ckpt_idx_shard rec;
	uint32_t g;
	int err = ckpt__index_get(ctx->index, ctx->job, version, &v);
	if (err < 0)
		return err;
	if (v.state == CKPT_STATE_PENDING && (listed || ckpt__index_global(ctx->index, ctx->job, version, &g) == 0)) {
		LOG_I(&ctx->log, version, "restore: committed across the cluster; this root holds %u of %u shards",
		      v.shards_done, v.world_size);
	} else if (v.state != CKPT_STATE_COMMITTED) {
		LOG_E(&ctx->log, version, "restore: version is %s, not COMMITTED", ckpt_state_name(v.state));
		return -CKPT_ENOVERSION;
	}
	if (v.world_size != ctx->cfg.world_size) {
		LOG_E(&ctx->log, version, "restore: saved with %u ranks, this job has %u", v.world_size,
		      ctx->cfg.world_size);
		return -CKPT_EMISMATCH;
	}
	if ((err = ckpt__index_get_shard(ctx->index, ctx->job, version, ctx->cfg.rank, &rec)) < 0) {
		/* Committed across the cluster with this rank's shard saved on
		 * another node (a relaunch elsewhere): not an error, the other
		 * tiers (partner DRAM, SHARED) hold it. Committed here without
		 * it: the index lost a record. */
		if (err == -ENOENT && v.state == CKPT_STATE_PENDING) {
			LOG_I(&ctx->log, version, "restore: this root holds no shard of this rank (it was saved on another node)");
			return -ENOENT;
		}
		LOG_E(&ctx->log, version, "restore: no shard recorded for this rank");
		return err == -ENOENT ? -CKPT_ECORRUPT : err;
	}
	CKPT_TRY(ckpt__shard_path(path, sizeof(path), ctx->root, ctx->job, version, ctx->cfg.rank));
	err = restore_file(ctx, version, path, &rec.footer_checksum, 0);
	return err == -ENOENT ? -CKPT_ECORRUPT : err;
}

/* Reads this rank's shard of version from the file at path into the
 * regions, every chunk checked. sum: the footer checksum the local index
 * recorded (NULL: none; the header's job, version, rank and world size are
 * checked either way); lineage: the run that must have written it (0: any). */
static int restore_file(ckpt_ctx *ctx, uint64_t version, const char *path, const uint64_t *sum, uint64_t lineage)
{
	char why[512] = "";
	int err;
	ckpt_shard s;
	if ((err = ckpt__shard_open(path, &s, why, sizeof(why))) < 0) {
		LOG_E(&ctx->log, version, "restore: %s: %s", path, why);
		return err;
	}
	if (s.header.version != version || s.header.rank != ctx->cfg.rank ||
	    s.header.world_size != ctx->cfg.world_size || strcmp(s.header.job, ctx->job) ||
	    (sum && s.tail.footer_checksum != *sum) || (lineage && s.header.lineage && s.header.lineage != lineage)) {
		LOG_E(&ctx->log, version, "restore: %s is not %s", path,
		      sum ? "the shard the index recorded" : "this rank's shard of the version committed");
		ckpt__shard_close(&s);
		return -CKPT_ECORRUPT;
	}
	struct restore_arg a = { ctx, NULL };
	uint8_t *want = calloc(s.footer.region_count + 1, 1);
	a.map = malloc((s.footer.region_count + 1) * sizeof(int32_t));
	if (!want || !a.map) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < s.footer.region_count; i++)
		a.map[i] = -1;
	for (uint32_t i = 0; i < ctx->nregions; i++) {
		int k = ckpt__shard_find_region(&s, ctx->regions[i].name);
		if (k < 0 || !ckpt__reshard_same_layout(&ctx->regions[i], &s.footer.regions[k])) {
			LOG_I(&ctx->log, version, "restore: region '%s' (%llu bytes) %s: restoring from the saved pieces",
			      ctx->regions[i].name, (unsigned long long)ctx->regions[i].bytes,
			      k < 0 ? "is not in this rank's shard" : "has another size or layout in this rank's shard");
			err = -CKPT_EMISMATCH;
			goto out;
		}
		a.map[k] = (int32_t)i;
		want[k] = 1;
	}
	/* Read buffers come from the staging pool: no allocation, no first touch.
	 * Chunks that can be read straight into their region need none; the
	 * others keep the depth with one buffer more than reads in flight. */
	uint8_t *bufs[65];
	int slots[65];
	uint32_t nb = 0, depth = CKPT_MIN(ctx->cfg.io_depth, 64u);
	pthread_mutex_lock(&ctx->lock);
	while (nb < depth + 1) {
		int sl = ckpt__pool_get(&ctx->pool);
		if (sl < 0) {
			if (nb)
				break;
			pthread_cond_wait(&ctx->space_cv, &ctx->lock);
			continue;
		}
		slots[nb] = sl;
		bufs[nb++] = ckpt__pool_slot(&ctx->pool, sl);
	}
	pthread_mutex_unlock(&ctx->lock);
	ckpt_read_opts o = {
		.backend = ctx->backend_name, .depth = depth, .bufs = bufs, .nbufs = nb,
		.buf_bytes = ctx->pool.slot_bytes, .direct = ctx->direct_ok, .want = want,
		.lg = &ctx->log, .why = why, .whycap = sizeof(why), .place = ckpt__restore_place, .place_arg = &a,
		.gang = ctx->pcopy,
	};
	err = ckpt__shard_read(path, &s, &o, ckpt__restore_sink, &a);
	pthread_mutex_lock(&ctx->lock);
	for (uint32_t i = 0; i < nb; i++)
		ckpt__pool_put(&ctx->pool, slots[i]);
	pthread_cond_broadcast(&ctx->space_cv);
	pthread_mutex_unlock(&ctx->lock);
	if (err < 0)
		LOG_E(&ctx->log, version, "restore: %s", why[0] ? why : ckpt_strerror(err));
out:
	free(want);
	free(a.map);
	ckpt__shard_close(&s);
	return err;
}

/* Fills a.map / want for the context's regions; logs a mismatch. */
int ckpt__restore_map(ckpt_ctx *ctx, uint64_t version, const ckpt_shard *s, int32_t *map, uint8_t *want)
{
	for (uint32_t i = 0; i < s->footer.region_count; i++)
		map[i] = -1;
	for (uint32_t i = 0; i < ctx->nregions; i++) {
		int k = ckpt__shard_find_region(s, ctx->regions[i].name);
		if (k < 0 || !ckpt__reshard_same_layout(&ctx->regions[i], &s->footer.regions[k])) {
			LOG_I(&ctx->log, version, "restore: region '%s' (%llu bytes) %s: restoring from the saved pieces",
			      ctx->regions[i].name, (unsigned long long)ctx->regions[i].bytes,
			      k < 0 ? "is not in this rank's shard" : "has another size or layout in this rank's shard");
			return -CKPT_EMISMATCH;
		}
		map[k] = (int32_t)i;
		want[k] = 1;
	}
	return 0;
}

/* One restore from a DRAM image, shared by the threads that run it. */
typedef struct mem_restore {
	ckpt_ctx *ctx;
	uint64_t version;
	const uint8_t *img;
	uint64_t len;
	int cold;       /* fault the image in chunk by chunk, on the threads */
	const ckpt_shard *s;
	const uint8_t *want;
	const uint64_t *seals; /* the image's seal table, or NULL: the tree checksums */
	struct restore_arg *a;
	pthread_mutex_t mu;
	uint64_t next;  /* the next chunk to take */
	int err;        /* the first error */
	uint64_t fault_ns, check_ns; /* summed over the threads: page tables, checksum+copy */
} mem_restore;

/* Verifies chunk ci, whose stored bytes are at data, and hands it to its
 * region; `from` names the copy in the log. */
static int check_chunk(ckpt_ctx *ctx, uint64_t version, const char *from, const ckpt_fmt_footer *f, uint64_t ci,
                       const uint8_t *data, struct restore_arg *a, ZSTD_DCtx **dctx, uint8_t **plain,
                       uint8_t **scratch)
{
	const ckpt_fmt_chunk *c = &f->chunks[ci];
	const ckpt_fmt_region *r = &f->regions[c->region];
	uint64_t k = ci - r->chunk_first;
	if (c->flags & CKPT_CHUNK_ZSTD) {
		unsigned elem = (c->flags >> CKPT_CHUNK_SHUFFLE_SHIFT) & 0xffu;
		if (!*dctx)
			*dctx = ZSTD_createDCtx();
		if (!*plain)
			*plain = malloc(f->chunk_bytes);
		if (!*scratch)
			*scratch = malloc(f->chunk_bytes);
		if (!*dctx || !*plain || !*scratch)
			return -ENOMEM;
		if (ckpt_kern_decompress(*dctx, *plain, c->raw_len, data, c->stored_len, elem, *scratch) < 0)
			return -CKPT_ECORRUPT;
		data = *plain;
	}
	/* A host region takes the bytes in the same pass that checks them; a
	 * mismatch then leaves them there, which a failed restore may (the
	 * regions' contents are unspecified on error). */
	int bad;
	uint8_t *dst = restore_place(a, c->region, k * f->chunk_bytes, c->raw_len, &bad);
	if (bad)
		return -CKPT_ECORRUPT;
	uint64_t got = dst ? ckpt_kern_checksum_copy(dst, data, c->raw_len) : ckpt_kern_checksum(data, c->raw_len);
	if (got != c->checksum) {
		LOG_W(&ctx->log, version, "restore: %s: region '%s' chunk %llu: checksum mismatch", from, r->name,
		      (unsigned long long)k);
		return -CKPT_ECORRUPT;
	}
	return dst ? 0 : ckpt__restore_sink(a, c->region, k * f->chunk_bytes, data, c->raw_len);
}

/* Chunk ci of a sealed DRAM image (or a partner's copy of one), whose
 * stored bytes are at data: copied into its region and checked by its seal
 * in one pass at memcpy's speed (format/seal.h); a mismatch leaves the
 * bytes there, as check_chunk does. */
static int check_sealed(ckpt_ctx *ctx, uint64_t version, const char *from, const ckpt_fmt_footer *f,
                        const uint64_t *seals, uint64_t ci, const uint8_t *data, struct restore_arg *a)
{
	const ckpt_fmt_chunk *c = &f->chunks[ci];
	const ckpt_fmt_region *r = &f->regions[c->region];
	uint64_t k = ci - r->chunk_first;
	int bad;
	uint8_t *dst = restore_place(a, c->region, k * f->chunk_bytes, c->raw_len, &bad);
	if (bad)
		return -CKPT_ECORRUPT;
	uint64_t got = dst ? ckpt_kern_seal_copy(dst, data, c->raw_len) : ckpt_kern_seal(data, c->raw_len);
	if (got != seals[ci]) {
		LOG_W(&ctx->log, version, "restore: %s: region '%s' chunk %llu: seal mismatch", from, r->name,
		      (unsigned long long)k);
		return -CKPT_ECORRUPT;
	}
	return dst ? 0 : ckpt__restore_sink(a, c->region, k * f->chunk_bytes, data, c->raw_len);
}

/* Chunk ci of a DRAM image. */
static int mem_chunk(mem_restore *m, uint64_t ci, ZSTD_DCtx **dctx, uint8_t **plain, uint8_t **scratch)
{
	const ckpt_fmt_footer *f = &m->s->footer;
	const ckpt_fmt_chunk *c = &f->chunks[ci];
	if (!m->want[c->region])
		return 0;
	if (c->offset > m->len || c->stored_len > m->len - c->offset || c->raw_len > f->chunk_bytes)
		return -CKPT_ECORRUPT;
	const uint8_t *data = m->img + c->offset;
	uint64_t t0 = ckpt__now_ns(), t1 = t0;
	if (m->cold) {
		ckpt__daemon_fault_in(data, c->stored_len);
		t1 = ckpt__now_ns();
	}
	int err = m->seals && !c->flags ? check_sealed(m->ctx, m->version, "LOCAL_MEM copy", f, m->seals, ci, data, m->a)
	        : check_chunk(m->ctx, m->version, "LOCAL_MEM copy", f, ci, data, m->a, dctx, plain, scratch);
	uint64_t t2 = ckpt__now_ns();
	pthread_mutex_lock(&m->mu);
	m->fault_ns += t1 - t0;
	m->check_ns += t2 - t1;
	pthread_mutex_unlock(&m->mu);
	return err;
}

static void *mem_worker(void *arg)
{
	mem_restore *m = arg;
	ZSTD_DCtx *dctx = NULL;
	uint8_t *plain = NULL, *scratch = NULL;
	for (;;) {
		pthread_mutex_lock(&m->mu);
		uint64_t ci = m->next++;
		int stop = m->err || ci >= m->s->footer.chunk_count;
		pthread_mutex_unlock(&m->mu);
		if (stop)
			break;
		int err = mem_chunk(m, ci, &dctx, &plain, &scratch);
		if (err) {
			pthread_mutex_lock(&m->mu);
			if (!m->err)
				m->err = err;
			pthread_mutex_unlock(&m->mu);
		}
	}
	free(plain);
	free(scratch);
	ZSTD_freeDCtx(dctx);
	return NULL;
}

/* From this rank's copy in the agent's DRAM: the same checks as from disk,
 * every chunk verified before it reaches a region. The chunks are spread
 * over the caller and `workers - 1` threads: one thread checksumming and
 * copying reaches well under memcpy's speed. */
static int restore_mem(ckpt_ctx *ctx, uint64_t version)
{
	const uint8_t *img;
	uint64_t len;
	char why[512] = "";
	int cold = 0;
	uint64_t id = 0, t0 = ckpt__now_ns(), *seals = NULL;
	int err = ckpt__daemon_segment_read(ctx, version, &img, &len, &cold, &id);
	if (err < 0)
		return err;
	uint64_t t_grant = ckpt__now_ns();
	ckpt_shard s;
	if ((err = ckpt__shard_parse_mem(img, len, &s, why, sizeof(why))) < 0) {
		LOG_W(&ctx->log, version, "restore: LOCAL_MEM copy: %s", why);
		ckpt__daemon_segment_release(ctx, id);
		return err;
	}
	struct restore_arg a = { ctx, NULL };
	uint8_t *want = calloc(s.footer.region_count + 1, 1);
	a.map = malloc((s.footer.region_count + 1) * sizeof(int32_t));
	if (!want || !a.map) {
		err = -ENOMEM;
		goto out;
	}
	if (s.header.version != version || s.header.rank != ctx->cfg.rank ||
	    s.header.world_size != ctx->cfg.world_size || strcmp(s.header.job, ctx->job)) {
		LOG_W(&ctx->log, version, "restore: the LOCAL_MEM copy is not this rank's shard");
		err = -CKPT_ECORRUPT;
		goto out;
	}
	if ((err = ckpt__restore_map(ctx, version, &s, a.map, want)) < 0)
		goto out;
	/* A seal table checks each chunk at the copy's speed; without one (an
	 * older writer) or with one that does not check, the tree checksums. */
	int sr = ckpt__seal_read(img, len, &s, &seals, why, sizeof(why));
	if (sr == -ENOMEM) {
		err = sr;
		goto out;
	}
	if (sr == -CKPT_ECORRUPT)
		LOG_W(&ctx->log, version, "restore: LOCAL_MEM copy: %s; checking every chunk's checksum instead", why);
	mem_restore m = { .ctx = ctx, .version = version, .img = img, .len = len, .cold = cold, .s = &s,
	                  .want = want, .seals = seals, .a = &a };
	pthread_mutex_init(&m.mu, NULL);
	uint64_t nthreads = CKPT_MIN((uint64_t)ctx->cfg.workers, s.footer.chunk_count), t_chunks = ckpt__now_ns();
	pthread_t th[64];
	uint32_t started = 0;
	while (started + 1 < nthreads && started < CKPT_ARRAY_LEN(th) &&
	       pthread_create(&th[started], NULL, mem_worker, &m) == 0)
		started++;
	mem_worker(&m);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&m.mu);
	err = m.err;
	/* Where the time went: the benchmark's DRAM restore ratio is read
	 * against these. */
	LOG_T(&ctx->log, version, "LOCAL_MEM restore: %llu bytes, grant and map %.3f ms, footer %.3f ms, chunks %.3f ms "
	      "on %u threads (page tables %.3f ms, %s+copy %.3f ms, summed over threads)%s",
	      (unsigned long long)len, (t_grant - t0) / 1e6, (t_chunks - t_grant) / 1e6,
	      (ckpt__now_ns() - t_chunks) / 1e6, started + 1, m.fault_ns / 1e6, seals ? "seal" : "checksum",
	      m.check_ns / 1e6, cold ? "" : ", mapping warm");
out:
	free(seals);
	free(want);
	free(a.map);
	ckpt__shard_close(&s);
	/* Read: the agent may evict or delete it again. */
	ckpt__daemon_segment_release(ctx, id);
	return err;
}

/* One restore from a partner's copy, shared by the threads the chunks land on. */
typedef struct peer_restore {
	ckpt_ctx *ctx;
	uint64_t version;
	const char *from;
	const ckpt_peer_read *pr;
	const uint64_t *chunk;  /* piece -> chunk index */
	const uint8_t *direct;  /* the piece was read straight into its region */
	struct restore_arg *a;
} peer_restore;

/* A chunk landed: straight in its region (checked there), or in a staging
 * slot (checked on its way into the region). */
static int peer_landed(void *arg, size_t i, const void *data, size_t len)
{
	(void)len;
	peer_restore *q = arg;
	const ckpt_fmt_footer *f = &q->pr->s.footer;
	uint64_t ci = q->chunk[i];
	const ckpt_fmt_chunk *c = &f->chunks[ci];
	const ckpt_fmt_region *r = &f->regions[c->region];
	if (q->direct[i]) {
		const uint64_t *seals = q->pr->seals;
		uint64_t got = seals ? ckpt_kern_seal(data, c->raw_len) : ckpt_kern_checksum(data, c->raw_len);
		if (got == (seals ? seals[ci] : c->checksum))
			return 0;
		LOG_W(&q->ctx->log, q->version, "restore: %s: region '%s' chunk %llu: %s mismatch", q->from, r->name,
		      (unsigned long long)(ci - r->chunk_first), seals ? "seal" : "checksum");
		return -CKPT_ECORRUPT;
	}
	if (q->pr->seals && !c->flags)
		return check_sealed(q->ctx, q->version, q->from, f, q->pr->seals, ci, data, q->a);
	ZSTD_DCtx *dctx = NULL;
	uint8_t *plain = NULL, *scratch = NULL;
	int err = check_chunk(q->ctx, q->version, q->from, f, ci, data, q->a, &dctx, &plain, &scratch);
	free(plain);
	free(scratch);
	ZSTD_freeDCtx(dctx);
	return err;
}

#define PEER_BOUNCE 4 /* staging slots for chunks that cannot land in place */

/* The pieces to read: every wanted chunk, straight into its host region
 * where it is stored as it is (uncompressed) and the region is registered
 * or needs not be; through a staging slot otherwise. */
static int peer_pieces(ckpt_ctx *ctx, uint64_t version, const char *from, const ckpt_fmt_footer *f,
                       const uint8_t *want, struct restore_arg *a, ckpt_fab_mr **mrs, ckpt_fab_piece *pc,
                       uint64_t *chunk, uint8_t *direct, size_t *n, int *bounce)
{
	*n = 0;
	*bounce = 0;
	for (uint64_t ci = 0; ci < f->chunk_count; ci++) {
		const ckpt_fmt_chunk *c = &f->chunks[ci];
		if (!want[c->region])
			continue;
		const ckpt_fmt_region *r = &f->regions[c->region];
		uint64_t k = ci - r->chunk_first;
		int bad;
		uint8_t *dst = restore_place(a, c->region, k * f->chunk_bytes, c->raw_len, &bad);
		if (bad || c->raw_len > f->chunk_bytes || (!c->flags && c->stored_len != c->raw_len)) {
			LOG_W(&ctx->log, version, "restore: %s: chunk %llu does not fit its region", from, (unsigned long long)ci);
			return -CKPT_ECORRUPT;
		}
		ckpt_fab_mr *mr = dst ? mrs[a->map[c->region]] : NULL;
		int in_place = dst && !c->flags && (mr || !ckpt__peer_needs_mr(ctx));
		if (!in_place && c->stored_len > ctx->pool.slot_bytes) {
			LOG_W(&ctx->log, version, "restore: %s: chunk %llu of %llu bytes is larger than a staging slot", from,
			      (unsigned long long)ci, (unsigned long long)c->stored_len);
			return -CKPT_ECORRUPT;
		}
		pc[*n] = (ckpt_fab_piece){ .roff = c->offset, .len = c->stored_len, .buf = in_place ? dst : NULL,
		                           .mr = in_place ? mr : NULL };
		chunk[*n] = ci;
		direct[*n] = (uint8_t)in_place;
		*bounce |= !in_place;
		(*n)++;
	}
	return 0;
}

/* One partner's copy: the chunks read with many reads in flight, most of
 * them straight into their regions, each checked (its seal, else its tree
 * checksum) as soon as it has landed while the next ones are read. */
static int restore_from_partner(ckpt_ctx *ctx, uint64_t version, const ckpt_peer_loc *loc)
{
	char why[600] = "", from[128];
	ckpt_peer_read pr;
	int err = ckpt__peer_open(ctx, version, loc->addr, loc->node, &pr, why, sizeof(why));
	if (err < 0) {
		LOG_W(&ctx->log, version, "restore: PEER_MEM copy on %s: %s", loc->node, why);
		return err;
	}
	snprintf(from, sizeof(from), "PEER_MEM copy on %s", loc->node);
	if (pr.seals_bad)
		LOG_W(&ctx->log, version, "restore: %s: its seal table does not check; checking every chunk's checksum "
		      "instead", from);
	const ckpt_shard *s = &pr.s;
	const ckpt_fmt_footer *f = &s->footer;
	struct restore_arg a = { ctx, NULL };
	uint64_t nc = f->chunk_count ? f->chunk_count : 1;
	uint8_t *want = calloc(f->region_count + 1, 1), *direct = malloc(nc);
	a.map = malloc((f->region_count + 1) * sizeof(int32_t));
	ckpt_fab_mr **mrs = calloc(ctx->nregions + 1, sizeof(*mrs));
	ckpt_fab_piece *pc = malloc(nc * sizeof(*pc));
	uint64_t *chunk = malloc(nc * sizeof(*chunk));
	int slots[PEER_BOUNCE];
	void *bufs[PEER_BOUNCE];
	unsigned nb = 0;
	if (!want || !direct || !a.map || !mrs || !pc || !chunk) {
		err = -ENOMEM;
		goto out;
	}
	if (s->header.version != version || s->header.rank != ctx->cfg.rank ||
	    s->header.world_size != ctx->cfg.world_size || strcmp(s->header.job, ctx->job)) {
		LOG_W(&ctx->log, version, "restore: the %s is not this rank's shard", from);
		err = -CKPT_ECORRUPT;
		goto out;
	}
	if ((err = ckpt__restore_map(ctx, version, s, a.map, want)) < 0)
		goto out;
	/* Where the provider needs registered buffers (verbs, efa), the host
	 * regions are registered for the restore; one that cannot be is read
	 * through staging slots. */
	if (ckpt__peer_needs_mr(ctx))
		for (uint32_t i = 0; i < ctx->nregions; i++)
			if (ctx->regions[i].device != CKPT_DEVICE_CUDA && ctx->regions[i].bytes)
				mrs[i] = ckpt__peer_mr(ctx, ctx->regions[i].ptr, ctx->regions[i].bytes);
	size_t n;
	int bounce;
	if ((err = peer_pieces(ctx, version, from, f, want, &a, mrs, pc, chunk, direct, &n, &bounce)) < 0)
		goto out;
	if (bounce) {
		slots[nb] = ckpt__slot_take(ctx); /* one at least, waiting for it */
		bufs[nb] = ckpt__pool_slot(&ctx->pool, slots[nb]);
		nb++;
		pthread_mutex_lock(&ctx->lock);
		int sl;
		while (nb < PEER_BOUNCE && (sl = ckpt__pool_get(&ctx->pool)) >= 0) {
			slots[nb] = sl;
			bufs[nb++] = ckpt__pool_slot(&ctx->pool, sl);
		}
		pthread_mutex_unlock(&ctx->lock);
	}
	peer_restore q = { .ctx = ctx, .version = version, .from = from, .pr = &pr, .chunk = chunk, .direct = direct,
	                   .a = &a };
	/* The calling thread drives the fabric; the checks run on the others. */
	unsigned threads = ctx->cfg.workers > 1 ? ctx->cfg.workers - 1 : 1;
	err = ckpt__peer_fetch(ctx, &pr, pc, n, bufs, nb, threads, peer_landed, &q, why, sizeof(why));
	if (err < 0 && why[0])
		LOG_W(&ctx->log, version, "restore: %s: %s", from, why);
out:
	for (unsigned i = 0; i < nb; i++)
		ckpt__slot_give(ctx, slots[i]);
	for (uint32_t i = 0; mrs && i < ctx->nregions; i++)
		ckpt__peer_mr_close(ctx, mrs[i]);
	free(mrs);
	free(pc);
	free(chunk);
	free(direct);
	free(want);
	free(a.map);
	ckpt__peer_close(ctx, &pr);
	return err;
}

/* PEER_MEM: the partners the coordinator names, one after the other. */
static int restore_peer(ckpt_ctx *ctx, uint64_t version)
{
	ckpt_peer_loc *locs;
	size_t n;
	if (!ctx->peer)
		return -CKPT_EUNAVAIL;
	int err = ckpt__peer_where(ctx, version, &locs, &n);
	if (err < 0)
		return err;
	err = -ENOENT;
	for (size_t i = 0; i < n && err != 0; i++) {
		err = restore_from_partner(ctx, version, &locs[i]);
		if (err == 0)
			LOG_I(&ctx->log, version, "restored from PEER_MEM on %s", locs[i].node);
		else if (err == -CKPT_EMISMATCH || err == -ENOMEM)
			break;
	}
	free(locs);
	return err;
}

/* SHARED: this rank's file in the tree the agents flush to (shared.h), read
 * like the local disk's. The version must be committed by the coordinator's
 * word (listed, or a notice this root noted) or by the tree's marker, which
 * the agents write once the coordinator committed it at SHARED. */
static int restore_shared(ckpt_ctx *ctx, uint64_t version, int listed)
{
	char path[4096];
	ckpt_shared_mark mk = { 0 };
	uint32_t g;
	if (!ctx->shared_dir)
		return -CKPT_EUNAVAIL;
	if (ckpt__s3tree_is_url(ctx->shared_dir))
		return ckpt__restore_s3(ctx, version, listed);
	int err = ckpt__shared_marker_read(ctx->shared_dir, ctx->job, version, &mk);
	if (err < 0 && err != -ENOENT)
		LOG_W(&ctx->log, version, "restore: the SHARED tree's commit marker: %s", ckpt_strerror(err));
	if (err == 0 && mk.world_size != ctx->cfg.world_size) {
		LOG_I(&ctx->log, version, "restore: saved with %u ranks, this job has %u: resharding", mk.world_size,
		      ctx->cfg.world_size);
		return -CKPT_EMISMATCH;
	}
	if (err < 0 && !listed && ckpt__index_global(ctx->index, ctx->job, version, &g) != 0)
		return -CKPT_ENOVERSION; /* not known to be committed */
	CKPT_TRY(ckpt__shard_path(path, sizeof(path), ctx->shared_dir, ctx->job, version, ctx->cfg.rank));
	return restore_file(ctx, version, path, NULL, err == 0 ? mk.lineage : 0);
}

static const char *tier_name(uint32_t tier)
{
	return tier == CKPT_TIER_LOCAL_MEM ? "LOCAL_MEM" : tier == CKPT_TIER_PEER_MEM ? "PEER_MEM"
	     : tier == CKPT_TIER_SHARED ? "SHARED" : "LOCAL_DISK";
}

/* The tiers in the context's restore order (default: this node's DRAM,
 * the local disk, partners' DRAM, shared storage), each tried when the one
 * before has no usable copy. A mismatch of the regions, or no memory, ends it. */
static int restore_any(ckpt_ctx *ctx, uint64_t version, int listed)
{
	int err = -CKPT_ENOVERSION, first = 0;
	/* Saved by another number of ranks: elastic restore (reshard.c). */
	uint32_t saved;
	uint64_t lin;
	if (ckpt__reshard_world(ctx, version, &saved, &lin) == 0 && saved != ctx->cfg.world_size)
		return ckpt__reshard_restore(ctx, version);
	for (int i = 0; i < 4 && ctx->restore_order[i]; i++) {
		uint32_t tier = ctx->restore_order[i];
		int r;
		if (tier == CKPT_TIER_LOCAL_MEM)
			r = ckpt__daemon_segments(ctx) ? restore_mem(ctx, version) : -CKPT_EUNAVAIL;
		else if (tier == CKPT_TIER_PEER_MEM)
			r = ctx->peer ? restore_peer(ctx, version) : -CKPT_EUNAVAIL;
		else if (tier == CKPT_TIER_SHARED)
			r = restore_shared(ctx, version, listed);
		else
			r = restore_one(ctx, version, listed);
		if (r == 0) {
			if (tier != CKPT_TIER_PEER_MEM) /* which partner: said by restore_peer */
				LOG_I(&ctx->log, version, "restored from %s", tier_name(tier));
			ctx->step_restore_tier = tier;
			return 0;
		}
		if (r == -CKPT_EMISMATCH) /* another layout: the regions from the pieces */
			return ckpt__reshard_restore(ctx, version);
		if (r == -ENOMEM)
			return r;
		if (r != -CKPT_EUNAVAIL) {
			LOG_I(&ctx->log, version, "no usable %s copy (%s)%s", tier_name(tier), ckpt_strerror(r),
			      i + 1 < 4 && ctx->restore_order[i + 1] ? "; trying the next tier" : "");
			/* The error to report: the first real one (a missing copy
			 * says less than a corrupt one found earlier). */
			if (!first || (err == -ENOENT && r != -ENOENT)) {
				err = r;
				first = 1;
			}
		}
	}
	return err;
}

/* This rank resumes from `base` (0: from scratch); its shards of pending
 * versions after that were written by its previous run and must not be
 * combined with the shards the other ranks write now. The file goes first:
 * if we die in between, the record of a PENDING version points at nothing,
 * which is harmless, while reindex would otherwise adopt the stale file. */
static void unlink_stale(void *arg, uint64_t version)
{
	ckpt_ctx *ctx = arg;
	char p[4096];
	if (ckpt__shard_path(p, sizeof(p), ctx->root, ctx->job, version, ctx->cfg.rank) == 0) {
		unlink(p);
		ckpt__fsync_parent(p);
	}
}

static void drop_stale(ckpt_ctx *ctx, uint64_t from)
{
	int n = ckpt__index_drop_stale(ctx->index, ctx->job, ctx->cfg.rank, from, unlink_stale, ctx);
	if (n > 0)
		LOG_I(&ctx->log, CKPT_NO_VERSION, "dropped %d shards of this rank's previous run from pending versions", n);
	else if (n < 0)
		LOG_W(&ctx->log, CKPT_NO_VERSION, "could not drop stale pending shards: %s", ckpt_strerror(n));
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* Without the coordinator's word: versions COMMITTED in this root, and those
 * a coordinator announced committed earlier (noted in the index), ascending. */
static int local_candidates(ckpt_ctx *ctx, uint64_t **out, size_t *n)
{
	uint64_t *c = NULL, *g = NULL;
	size_t nc = 0, ng = 0;
	int err = ckpt__index_select(ctx->index, ctx->job, CKPT_STATE_COMMITTED, 0, &c, &nc);
	if (err == 0)
		err = ckpt__index_global_list(ctx->index, ctx->job, 0xfu, &g, &ng);
	if (err < 0) {
		free(c);
		return err;
	}
	uint64_t *all = realloc(c, (nc + ng + 1) * sizeof(*all));
	if (!all) {
		free(c);
		free(g);
		return -ENOMEM;
	}
	if (ng)
		memcpy(all + nc, g, ng * sizeof(*g));
	free(g);
	size_t m = nc + ng, k = 0;
	qsort(all, m, sizeof(*all), cmp_u64);
	for (size_t i = 0; i < m; i++)
		if (!k || all[k - 1] != all[i])
			all[k++] = all[i];
	*out = all;
	*n = k;
	return 0;
}

static int restore_timed(ckpt_ctx *ctx, uint64_t version, uint64_t *restored);

/* The coordinator's committed versions; an agent that cannot reach its
 * coordinator says so (busy) for a while after a restart or a partition:
 * asked a few times before giving up. */
static int list_committed(ckpt_ctx *ctx, uint64_t **v, size_t *n, uint64_t *lost)
{
	int err = -EBUSY;
	for (int i = 0; i < 5 && err == -EBUSY; i++) {
		if (i)
			usleep(400 * 1000);
		err = ckpt__daemon_versions(ctx, v, n, lost);
	}
	return err;
}

/* 1 if the SHARED tree marks version committed (with any world size: a
 * different one is restored elastically). */
static int shared_marked(ckpt_ctx *ctx, uint64_t version)
{
	ckpt_shared_mark mk;
	if (ckpt__s3tree_is_url(ctx->shared_dir))
		return ckpt__restore_s3_marked(ctx, version);
	return ckpt__shared_marker_read(ctx->shared_dir, ctx->job, version, &mk) == 0;
}

static int order_has(const ckpt_ctx *ctx, uint32_t tier)
{
	for (int i = 0; i < 4; i++)
		if (ctx->restore_order[i] == tier)
			return 1;
	return 0;
}

/* Timed for the goodput accounting: the next step report carries it. */
int ckpt_restore(ckpt_ctx *ctx, uint64_t version, uint32_t flags, uint64_t *restored)
{
	if (!ctx || flags)
		return -EINVAL;
	uint64_t t0 = ckpt__now_ns();
	int err = restore_timed(ctx, version, restored);
	uint64_t dt = ckpt__now_ns() - t0;
	pthread_mutex_lock(&ctx->step_mu);
	ctx->step_restore_ns += dt;
	pthread_mutex_unlock(&ctx->step_mu);
	return err;
}

/* The versions a restore of CKPT_LATEST tries, ascending: the
 * coordinator's committed ones (else this root's index), and those the
 * SHARED tree marks committed (tree[i]: named by the tree alone, offered
 * only with its marker). */
typedef struct candidates {
	uint64_t *v;
	size_t n;
	uint8_t *tree;
	int listed;  /* the coordinator's word */
	int unasked; /* the coordinator could not be asked: its error */
	uint64_t lost; /* the newest version committed once whose shards the coordinator no longer all has (0: none) */
} candidates;

static int gather_candidates(ckpt_ctx *ctx, candidates *a)
{
	int err = -ENOENT;
	memset(a, 0, sizeof(*a));
	/* The coordinator knows what every rank committed at any tier; the
	 * local index only what this node wrote to disk. */
	if (ctx->daemon && (err = list_committed(ctx, &a->v, &a->n, &a->lost)) < 0) {
		LOG_W(&ctx->log, CKPT_NO_VERSION, "restore: daemon cannot list versions (%s); using the local index",
		      ckpt_strerror(err));
		a->unasked = err;
	}
	a->listed = err == 0 && a->n > 0;
	if (!a->listed) {
		free(a->v);
		a->v = NULL;
		if ((err = local_candidates(ctx, &a->v, &a->n)) < 0)
			return err;
	}
	/* The versions the SHARED tree marks committed count too: with every
	 * node lost, neither this root nor the coordinator knows them. */
	if (ctx->shared_dir && order_has(ctx, CKPT_TIER_SHARED) && (!a->listed || !ckpt__s3tree_is_url(ctx->shared_dir))) {
		/* An object store is listed only when the coordinator could not
		 * say (no LIST on the restore path but recovery's). */
		int k = ckpt__s3tree_is_url(ctx->shared_dir) ? ckpt__restore_s3_merge(ctx, &a->v, &a->n, &a->tree)
		                                              : ckpt__shared_merge(ctx->shared_dir, ctx->job, &a->v, &a->n,
		                                                                   &a->tree);
		if (k < 0) {
			free(a->v);
			a->v = NULL;
			return k;
		}
		LOG_T(&ctx->log, CKPT_NO_VERSION, "restore: %d versions in the SHARED tree %s", k, ctx->shared_dir);
	}
	return 0;
}

int ckpt_versions_restorable(ckpt_ctx *ctx, uint64_t *out, size_t cap, size_t *count)
{
	if (!ctx || !count || (!out && cap))
		return -EINVAL;
	candidates a;
	CKPT_TRY(gather_candidates(ctx, &a));
	size_t k = 0;
	for (size_t i = 0; i < a.n; i++) {
		if (a.tree && a.tree[i] && !shared_marked(ctx, a.v[i]))
			continue;
		if (k < cap)
			out[k] = a.v[i];
		k++;
	}
	free(a.v);
	free(a.tree);
	*count = k;
	return 0;
}

static int restore_timed(ckpt_ctx *ctx, uint64_t version, uint64_t *restored)
{
	if (ctx->nregions == 0)
		return -CKPT_ESTATE;
	if (version != CKPT_LATEST) {
		/* Committed across the cluster, though this root may still hold it
		 * PENDING (its ranks left before their disk's commit: an emergency). */
		uint64_t *cv = NULL;
		size_t ncv = 0;
		int listed = 0;
		if (ctx->daemon && ckpt__daemon_versions(ctx, &cv, &ncv, NULL) == 0)
			for (size_t i = 0; i < ncv && !listed; i++)
				listed = cv[i] == version;
		free(cv);
		int err = restore_any(ctx, version, listed);
		if (err < 0 && ckpt__restore_missed(err)) {
			ckpt_idx_version iv;
			uint32_t g;
			if (listed)
				return ckpt__restore_lost(ctx, version, "the coordinator");
			if (ckpt__index_global(ctx->index, ctx->job, version, &g) == 0 ||
			    (ckpt__index_get(ctx->index, ctx->job, version, &iv) == 0 && iv.state == CKPT_STATE_COMMITTED))
				return ckpt__restore_lost(ctx, version, "this root's index");
		}
		if (err == 0) {
			ctx->lineage = ckpt__lineage(ctx->cfg.incarnation, version + 1);
			drop_stale(ctx, version + 1);
			if (restored)
				*restored = version;
		}
		return err;
	}
	candidates c;
	int err = gather_candidates(ctx, &c);
	if (err < 0)
		return err;
	struct { uint64_t *v; size_t n; } a = { c.v, c.n };
	uint8_t *tree = c.tree;
	int listed = c.listed, unasked = c.unasked;
	int first_err = -CKPT_ENOVERSION, hard_err = 0;
	size_t offered = 0;
	uint64_t newest = 0;
	const char *known_by = "this root's index";
	for (size_t i = a.n; i-- > 0;) {
		/* Named by the tree alone: offered only with its commit marker. */
		if (tree && tree[i] && !shared_marked(ctx, a.v[i]))
			continue;
		if (!offered++) {
			newest = a.v[i];
			known_by = listed ? "the coordinator" : tree && tree[i] ? "the SHARED tree's commit marker"
			                                                        : "this root's index";
		}
		err = restore_any(ctx, a.v[i], listed || (tree && tree[i]));
		if (err == 0) {
			if (offered > 1)
				LOG_W(&ctx->log, a.v[i], "restored an older version: newer ones did not verify");
			else
				LOG_I(&ctx->log, a.v[i], "restored");
			ctx->lineage = ckpt__lineage(ctx->cfg.incarnation, a.v[i] + 1);
			drop_stale(ctx, a.v[i] + 1);
			if (restored)
				*restored = a.v[i];
			free(a.v);
			free(tree);
			return 0;
		}
		if (err == -ENOMEM || err == -CKPT_EINDEX) {
			free(a.v);
			free(tree);
			return err;
		}
		if (first_err == -CKPT_ENOVERSION)
			first_err = err;
		if (!hard_err && !ckpt__restore_missed(err))
			hard_err = err;
		LOG_W(&ctx->log, a.v[i], "not restorable (%s); trying the previous version", ckpt_strerror(err));
	}
	free(a.v);
	free(tree);
	if (offered == 0 && unasked) {
		/* Nothing here, and the one who knows could not be asked: a new
		 * job and a lost node look the same from here. */
		LOG_E(&ctx->log, CKPT_NO_VERSION, "restore: the coordinator could not be asked which versions are "
		      "committed (%s) and this root (%s) holds none; not starting from scratch",
		      ckpt_strerror(unasked), ctx->root);
		return -CKPT_EUNREACHABLE;
	}
	if (offered == 0 && c.lost) {
		/* The job had committed versions, and every copy of them went with
		 * the nodes that held them: a fresh start would silently drop its
		 * training. */
		LOG_E(&ctx->log, c.lost, "restore: version %llu was committed, but a rank's shard of it has no copy left at "
		      "any tier (every node that held one was lost), and no other version is restorable",
		      (unsigned long long)c.lost);
		return ckpt__restore_lost(ctx, c.lost, "the coordinator");
	}
	if (offered == 0) {
		LOG_I(&ctx->log, CKPT_NO_VERSION, "restore: no committed version");
		drop_stale(ctx, 0); /* starting from scratch */
		return first_err;
	}
	/* Copies that were read and found wrong say more than missing ones;
	 * with none read at all, the version exists but is out of reach. */
	return hard_err ? hard_err : ckpt__restore_lost(ctx, newest, known_by);
}
