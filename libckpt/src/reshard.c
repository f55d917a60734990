/* Elastic restore: a version saved by another number of ranks, or with
 * another layout, restored into the regions this rank registered. Every
 * saved rank's shard is opened from the best tier holding it (the
 * context's restore order), the ranks' region tables merged into a global
 * view (format/global.h), and each region filled from the pieces that
 * overlap it, reading only the chunks it needs, every one verified. A
 * copy whose chunk fails moves that rank to its next tier. */
#include "reshard.h"
#include "ctx.h"
#include "daemon.h"
#include "peer.h"
#include "restore.h"
#include "format/global.h"
#include "format/s3tree.h"
#include "format/shared.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* One copy of a saved rank's shard, at one tier. */
typedef struct rcopy {
	uint32_t tier;
	ckpt_shard s;          /* LOCAL_DISK, SHARED, LOCAL_MEM */
	char path[4096];       /* files */
	const uint8_t *img;    /* LOCAL_MEM */
	uint64_t len, seg_id;
	int cold;              /* LOCAL_MEM: page tables not built yet */
	uint64_t fault_bytes, fault_ns; /* what building them took */
	ckpt_peer_read pr;     /* PEER_MEM */
	ckpt_s3tree *s3;       /* SHARED on an object store: the client; path is the object's key */
	int failed;
	struct rcopy *next;
} rcopy;

typedef struct rsrc {
	ckpt_ctx *ctx;
	uint64_t version;
	uint32_t world;
	uint64_t lineage;      /* the SHARED marker's, 0: unknown */
	rcopy **copies;        /* per saved rank, first = the one the view uses */
	uint32_t *next_tier;   /* per saved rank: next restore_order index to try */
	const ckpt_fmt_footer **footers;
	uint8_t *bufs[64];
	int slots[64];
	uint32_t nbufs;
} rsrc;

static const ckpt_shard *copy_shard(const rcopy *c)
{
	return c->tier == CKPT_TIER_PEER_MEM ? &c->pr.s : &c->s;
}

static void copy_close(ckpt_ctx *ctx, rcopy *c)
{
	if (c->tier == CKPT_TIER_PEER_MEM) {
		ckpt__peer_close(ctx, &c->pr);
	} else {
		ckpt__shard_close(&c->s);
		if (c->tier == CKPT_TIER_LOCAL_MEM)
			ckpt__daemon_segment_release(ctx, c->seg_id);
	}
	free(c);
}

/* The header must name this job, version, the rank and the saved world. */
static int header_ok(const rsrc *rs, const ckpt_shard *s, uint32_t rank)
{
	return s->header.version == rs->version && s->header.rank == rank && s->header.world_size == rs->world &&
	       !strcmp(s->header.job, rs->ctx->job) &&
	       (!rs->lineage || !s->header.lineage || s->header.lineage == rs->lineage);
}

static int open_file(rsrc *rs, rcopy *c, const char *dir, uint32_t rank, const uint64_t *sum)
{
	char why[512] = "";
	int err = ckpt__shard_path(c->path, sizeof(c->path), dir, rs->ctx->job, rs->version, rank);
	if (err < 0)
		return err;
	if ((err = ckpt__shard_open(c->path, &c->s, why, sizeof(why))) < 0) {
		if (err != -ENOENT)
			LOG_W(&rs->ctx->log, rs->version, "restore: %s: %s", c->path, why);
		return err;
	}
	if (!header_ok(rs, &c->s, rank) || (sum && c->s.tail.footer_checksum != *sum)) {
		LOG_W(&rs->ctx->log, rs->version, "restore: %s is not rank %u's shard of the version committed", c->path,
		      rank);
		ckpt__shard_close(&c->s);
		return -CKPT_ECORRUPT;
	}
	return 0;
}

/* SHARED on an object store: the rank's shard object (keys computed, no
 * LIST), its header, tail and footer checked as a file's. */
static int open_s3(rsrc *rs, rcopy *c, uint32_t rank)
{
	ckpt_ctx *ctx = rs->ctx;
	char why[700] = "";
	if (!(c->s3 = ckpt__restore_s3_tree(ctx)))
		return -CKPT_EUNAVAIL;
	CKPT_TRY(ckpt__s3tree_key(c->s3, c->path, sizeof(c->path), ctx->job, rs->version, rank));
	int err = ckpt__s3tree_shard_open(c->s3, c->path, &c->s, why, sizeof(why));
	if (err < 0) {
		if (err != -ENOENT)
			LOG_W(&ctx->log, rs->version, "restore: SHARED object %s: %s", c->path, why[0] ? why : ckpt_strerror(err));
		return err;
	}
	if (!header_ok(rs, &c->s, rank)) {
		LOG_W(&ctx->log, rs->version, "restore: SHARED object %s is not rank %u's shard of the version committed",
		      c->path, rank);
		ckpt__shard_close(&c->s);
		return -CKPT_ECORRUPT;
	}
	return 0;
}

static int open_mem(rsrc *rs, rcopy *c, uint32_t rank)
{
	char why[512] = "";
	if (!ckpt__daemon_segments(rs->ctx))
		return -CKPT_EUNAVAIL;
	int err = ckpt__daemon_segment_read_rank(rs->ctx, rs->version, rank, &c->img, &c->len, &c->cold, &c->seg_id);
	if (err < 0)
		return err;
	if ((err = ckpt__shard_parse_mem(c->img, c->len, &c->s, why, sizeof(why))) < 0 || !header_ok(rs, &c->s, rank)) {
		LOG_W(&rs->ctx->log, rs->version, "restore: rank %u's LOCAL_MEM copy: %s", rank,
		      err < 0 ? why : "not that rank's shard");
		if (err == 0)
			ckpt__shard_close(&c->s);
		ckpt__daemon_segment_release(rs->ctx, c->seg_id);
		return err < 0 ? err : -CKPT_ECORRUPT;
	}
	return 0;
}

static int open_peer(rsrc *rs, rcopy *c, uint32_t rank)
{
	ckpt_peer_loc *locs;
	size_t n;
	char why[600] = "";
	if (!rs->ctx->peer)
		return -CKPT_EUNAVAIL;
	int err = ckpt__peer_where_rank(rs->ctx, rs->version, rank, &locs, &n);
	if (err < 0)
		return err;
	err = -ENOENT;
	for (size_t i = 0; i < n && err; i++) {
		err = ckpt__peer_open_rank(rs->ctx, rs->version, rank, locs[i].addr, locs[i].node, &c->pr, why,
		                           sizeof(why));
		if (err == 0 && !header_ok(rs, &c->pr.s, rank)) {
			ckpt__peer_close(rs->ctx, &c->pr);
			err = -CKPT_ECORRUPT;
		}
		if (err)
			LOG_W(&rs->ctx->log, rs->version, "restore: rank %u's PEER_MEM copy on %s: %s", rank, locs[i].node,
			      why[0] ? why : ckpt_strerror(err));
	}
	free(locs);
	return err;
}

/* Opens rank's copy at the next tier of the restore order that has one. */
static int open_next(rsrc *rs, uint32_t rank, rcopy **out)
{
	ckpt_ctx *ctx = rs->ctx;
	int err = -ENOENT;
	while (rs->next_tier[rank] < 4 && ctx->restore_order[rs->next_tier[rank]]) {
		uint32_t tier = ctx->restore_order[rs->next_tier[rank]++];
		rcopy *c = calloc(1, sizeof(*c));
		if (!c)
			return -ENOMEM;
		c->tier = tier;
		c->s.fd = -1;
		int r;
		if (tier == CKPT_TIER_LOCAL_MEM) {
			r = open_mem(rs, c, rank);
		} else if (tier == CKPT_TIER_PEER_MEM) {
			r = open_peer(rs, c, rank);
		} else if (tier == CKPT_TIER_SHARED) {
			r = !ctx->shared_dir ? -CKPT_EUNAVAIL
			  : ckpt__s3tree_is_url(ctx->shared_dir) ? open_s3(rs, c, rank)
			  : open_file(rs, c, ctx->shared_dir, rank, NULL);
		} else {
			ckpt_idx_shard rec;
			int have = ckpt__index_get_shard(ctx->index, ctx->job, rs->version, rank, &rec) == 0;
			r = open_file(rs, c, ctx->root, rank, have ? &rec.footer_checksum : NULL);
		}
		if (r == 0) {
			c->next = rs->copies[rank];
			rs->copies[rank] = c; /* pushed, so the newest copy is first to read */
			*out = c;
			LOG_I(&ctx->log, rs->version, "restore: saved rank %u's shard from %s%s%s", rank,
			      tier == CKPT_TIER_LOCAL_MEM ? "LOCAL_MEM" : tier == CKPT_TIER_PEER_MEM ? "PEER_MEM on "
			      : tier == CKPT_TIER_SHARED ? "SHARED" : "LOCAL_DISK",
			      tier == CKPT_TIER_PEER_MEM ? c->pr.node : "", "");
			return 0;
		}
		free(c);
		if (r == -ENOMEM)
			return r;
		if (r != -CKPT_EUNAVAIL && (err == -ENOENT || err == -CKPT_EUNAVAIL))
			err = r;
	}
	return err;
}

/* A later copy must hold the same chunks as the one the view was built from. */
static int same_chunks(const ckpt_fmt_footer *a, const ckpt_fmt_footer *b, const uint64_t *chunks, size_t n)
{
	if (a->chunk_count != b->chunk_count || a->chunk_bytes != b->chunk_bytes)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const ckpt_fmt_chunk *x = &a->chunks[chunks[i]], *y = &b->chunks[chunks[i]];
		if (x->checksum != y->checksum || x->raw_len != y->raw_len || x->region != y->region)
			return 0;
	}
	return 1;
}

static int read_peer(rsrc *rs, rcopy *c, const uint64_t *chunks, size_t n, ckpt_gchunk_fn fn, void *arg,
                     char *why, size_t cap)
{
	const ckpt_fmt_footer *f = &c->pr.s.footer;
	ckpt_chunk_scratch cs = { 0 };
	int err = 0;
	for (size_t i = 0; i < n && !err; i++) {
		const ckpt_fmt_chunk *ch = &f->chunks[chunks[i]];
		const uint8_t *raw;
		if (ch->stored_len > rs->ctx->pool.slot_bytes || ch->raw_len > f->chunk_bytes) {
			snprintf(why, cap, "chunk %llu is larger than a chunk", (unsigned long long)chunks[i]);
			err = -CKPT_ECORRUPT;
		} else if ((err = ckpt__peer_pread(rs->ctx, &c->pr, ch->offset, ch->stored_len, rs->bufs[0], why, cap)) ==
		           0 &&
		           (err = ckpt__chunk_verify(f, chunks[i], rs->bufs[0], &cs, &raw, why, cap)) == 0) {
			err = fn(arg, chunks[i], raw, ch->raw_len);
		}
	}
	ckpt__chunk_scratch_free(&cs);
	return err;
}

/* A cold LOCAL_MEM copy: the page tables of the chunks about to be read
 * are built first, a fault-around window per fault, as the normal DRAM
 * restore does (restore.c), rather than a fault per page inside the
 * checksum and copy. Chunks the footer places outside the image are left
 * to ckpt__chunks_read_mem to refuse. */
static void fault_in_chunks(rcopy *c, const uint64_t *chunks, size_t n)
{
	const ckpt_fmt_footer *f = &c->s.footer;
	uint64_t t0 = ckpt__now_ns();
	for (size_t i = 0; i < n; i++) {
		if (chunks[i] >= f->chunk_count)
			continue;
		const ckpt_fmt_chunk *ch = &f->chunks[chunks[i]];
		if (ch->offset > c->len || ch->stored_len > c->len - ch->offset)
			continue;
		ckpt__daemon_fault_in(c->img + ch->offset, ch->stored_len);
		c->fault_bytes += ch->stored_len;
	}
	c->fault_ns += ckpt__now_ns() - t0;
}

static int read_copy(rsrc *rs, rcopy *c, const uint64_t *chunks, size_t n, ckpt_gchunk_fn fn, void *arg,
                     char *why, size_t cap)
{
	if (c->tier == CKPT_TIER_LOCAL_MEM) {
		if (c->cold)
			fault_in_chunks(c, chunks, n);
		return ckpt__chunks_read_mem(c->img, c->len, &c->s, chunks, n, fn, arg, why, cap);
	}
	if (c->tier == CKPT_TIER_PEER_MEM)
		return read_peer(rs, c, chunks, n, fn, arg, why, cap);
	if (c->s3)
		return ckpt__s3tree_chunks_read(c->s3, c->path, &c->s, chunks, n, rs->bufs, rs->nbufs,
		                                rs->ctx->pool.slot_bytes, fn, arg, why, cap);
	ckpt_chunk_read_opts o = { rs->ctx->backend_name, rs->nbufs, rs->ctx->direct_ok, rs->bufs, rs->nbufs,
		                   rs->ctx->pool.slot_bytes };
	return ckpt__chunks_read_file(c->path, &c->s, &o, chunks, n, fn, arg, why, cap);
}

/* The gsource: the rank's copies, best first; a copy that fails is marked
 * and the next one (opened on demand) reads the chunks again. A sink error
 * (the region's own) ends it. */
typedef struct sink_guard {
	ckpt_gchunk_fn fn;
	void *arg;
	int sink_err;
} sink_guard;

static int guarded(void *arg, uint64_t ci, const void *raw, size_t len)
{
	sink_guard *g = arg;
	int r = g->fn(g->arg, ci, raw, len);
	if (r < 0)
		g->sink_err = r;
	return r;
}

static int src_read(void *self, uint32_t rank, const uint64_t *chunks, size_t n, ckpt_gchunk_fn fn, void *arg,
                    char *why, size_t cap)
{
	rsrc *rs = self;
	const ckpt_fmt_footer *want = rs->footers[rank];
	int err = -ENOENT;
	for (;;) {
		rcopy *c = rs->copies[rank];
		while (c && c->failed)
			c = c->next;
		if (!c) {
			int r = open_next(rs, rank, &c);
			if (r < 0)
				return err == -ENOENT ? r : err;
		}
		if (!same_chunks(want, &copy_shard(c)->footer, chunks, n)) {
			LOG_W(&rs->ctx->log, rs->version, "restore: rank %u's copy at another tier holds other chunks", rank);
			c->failed = 1;
			err = -CKPT_ECORRUPT;
			continue;
		}
		sink_guard g = { fn, arg, 0 };
		err = read_copy(rs, c, chunks, n, guarded, &g, why, cap);
		if (err == 0 || g.sink_err || err == -ENOMEM)
			return err;
		LOG_W(&rs->ctx->log, rs->version, "restore: rank %u's copy: %s; trying the next tier", rank,
		      why[0] ? why : ckpt_strerror(err));
		c->failed = 1;
	}
}

/* ---- the regions */

typedef struct reg_put {
	ckpt_ctx *ctx;
	const ckpt_region *r;
} reg_put;

static int put_region(void *arg, uint64_t off, const void *data, size_t len)
{
	reg_put *p = arg;
	if (off > p->r->bytes || len > p->r->bytes - off)
		return -CKPT_ECORRUPT;
	if (p->r->device == CKPT_DEVICE_CUDA)
		return ckpt__dev_h2d(p->ctx->dev, (uint8_t *)p->r->ptr + off, data, len);
	if (p->r->fd >= 0)
		return ckpt__pwrite_full(p->r->fd, data, len, p->r->fd_off + off);
	memcpy((uint8_t *)p->r->ptr + off, data, len);
	return 0;
}

static int restore_region(rsrc *rs, const ckpt_gview *v, const ckpt_region *r)
{
	ckpt_ctx *ctx = rs->ctx;
	char why[512] = "";
	const ckpt_gtensor *t = ckpt__gview_find(v, r->name);
	ckpt_gsource src = { src_read, rs };
	reg_put p = { ctx, r };
	int err;
	if (!t) {
		LOG_E(&ctx->log, rs->version, "restore: region '%s' is not in the checkpoint (saved by %u ranks)", r->name,
		      rs->world);
		return -CKPT_EMISMATCH;
	}
	if (r->ndim > 0) {
		if (t->ndim != r->ndim || t->dtype != r->dtype ||
		    memcmp(t->shape, r->global_shape, r->ndim * sizeof(uint64_t))) {
			LOG_E(&ctx->log, rs->version,
			      "restore: region '%s': saved as %s with %u dimensions, registered as %s with %u (or another global shape)",
			      r->name, ckpt_dtype_name(t->dtype), t->ndim, ckpt_dtype_name(r->dtype), r->ndim);
			return -CKPT_EMISMATCH;
		}
		err = ckpt__gread_box(v, t, r->offsets, r->extents, &src, put_region, &p, why, sizeof(why));
	} else {
		/* A blob: this rank's copy if the saved job had this rank, else
		 * rank 0's (the lowest rank's); a tensor: all of it. */
		const ckpt_gpiece *pc = NULL;
		for (uint32_t i = 0; t->ndim == 0 && i < t->npieces && !pc; i++)
			if (t->pieces[i].rank == ctx->cfg.rank)
				pc = &t->pieces[i];
		uint64_t have = t->ndim ? t->bytes : v->footers[(pc ? pc : &t->pieces[0])->rank]
		                                         ->regions[(pc ? pc : &t->pieces[0])->region].bytes;
		if (have != r->bytes) {
			LOG_E(&ctx->log, rs->version, "restore: region '%s' (%llu bytes) has %llu bytes in the checkpoint",
			      r->name, (unsigned long long)r->bytes, (unsigned long long)have);
			return -CKPT_EMISMATCH;
		}
		err = ckpt__gread_range(v, t, 0, r->bytes, ctx->cfg.rank, &src, put_region, &p, why, sizeof(why));
	}
	if (err < 0)
		LOG_E(&ctx->log, rs->version, "restore: %s", why[0] ? why : ckpt_strerror(err));
	return err;
}

/* Read buffers from the staging pool, as the fast path: no allocation. */
static void take_bufs(rsrc *rs)
{
	ckpt_ctx *ctx = rs->ctx;
	uint32_t depth = CKPT_MIN(CKPT_MAX(ctx->cfg.io_depth, 1u), 64u);
	pthread_mutex_lock(&ctx->lock);
	while (rs->nbufs < depth) {
		int sl = ckpt__pool_get(&ctx->pool);
		if (sl < 0) {
			if (rs->nbufs)
				break;
			pthread_cond_wait(&ctx->space_cv, &ctx->lock);
			continue;
		}
		rs->slots[rs->nbufs] = sl;
		rs->bufs[rs->nbufs++] = ckpt__pool_slot(&ctx->pool, sl);
	}
	pthread_mutex_unlock(&ctx->lock);
}

static void give_bufs(rsrc *rs)
{
	ckpt_ctx *ctx = rs->ctx;
	pthread_mutex_lock(&ctx->lock);
	for (uint32_t i = 0; i < rs->nbufs; i++)
		ckpt__pool_put(&ctx->pool, rs->slots[i]);
	pthread_cond_broadcast(&ctx->space_cv);
	pthread_mutex_unlock(&ctx->lock);
	rs->nbufs = 0;
}

int ckpt__reshard_world(ckpt_ctx *ctx, uint64_t version, uint32_t *world, uint64_t *lineage)
{
	ckpt_idx_version v;
	ckpt_shared_mark mk;
	*lineage = 0;
	if (ckpt__index_get(ctx->index, ctx->job, version, &v) == 0) {
		*world = v.world_size;
		return 0;
	}
	if (!ctx->shared_dir)
		return -CKPT_ENOVERSION;
	if (ckpt__s3tree_is_url(ctx->shared_dir)) {
		ckpt_s3tree *t = ckpt__restore_s3_tree(ctx);
		char err[600];
		if (!t || ckpt__s3tree_marker_read(t, ctx->job, version, &mk, err, sizeof(err)) != 0)
			return -CKPT_ENOVERSION;
	} else if (ckpt__shared_marker_read(ctx->shared_dir, ctx->job, version, &mk) != 0) {
		return -CKPT_ENOVERSION;
	}
	*world = mk.world_size;
	*lineage = mk.lineage;
	return 0;
}

int ckpt__reshard_restore(ckpt_ctx *ctx, uint64_t version)
{
	rsrc rs = { .ctx = ctx, .version = version };
	ckpt_gview v = { 0 };
	char why[512] = "";
	int err = ckpt__reshard_world(ctx, version, &rs.world, &rs.lineage);
	if (err < 0)
		return err;
	rs.copies = calloc(rs.world, sizeof(*rs.copies));
	rs.next_tier = calloc(rs.world, sizeof(*rs.next_tier));
	rs.footers = calloc(rs.world, sizeof(*rs.footers));
	if (!rs.copies || !rs.next_tier || !rs.footers) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t r = 0; r < rs.world; r++) {
		rcopy *c;
		if ((err = open_next(&rs, r, &c)) < 0) {
			LOG_E(&ctx->log, version, "restore: no copy of saved rank %u's shard (of %u): %s", r, rs.world,
			      ckpt_strerror(err));
			if (err == -ENOENT)
				err = -CKPT_ECORRUPT;
			goto out;
		}
		rs.footers[r] = &copy_shard(c)->footer;
	}
	if ((err = ckpt__gview_build(&v, rs.footers, rs.world, why, sizeof(why))) < 0) {
		LOG_E(&ctx->log, version, "restore: the saved pieces are inconsistent: %s", why);
		goto out;
	}
	LOG_I(&ctx->log, version, "restore: resharding from %u saved ranks into rank %u of %u", rs.world, ctx->cfg.rank,
	      ctx->cfg.world_size);
	take_bufs(&rs);
	for (uint32_t i = 0; i < ctx->nregions && !err; i++)
		err = restore_region(&rs, &v, &ctx->regions[i]);
	give_bufs(&rs);
out:
	ckpt__gview_free(&v);
	for (uint32_t r = 0; rs.copies && r < rs.world; r++)
		while (rs.copies[r]) {
			rcopy *n = rs.copies[r]->next;
			if (rs.copies[r]->fault_bytes)
				LOG_I(&ctx->log, version, "restore: saved rank %u's LOCAL_MEM copy: page tables of %llu bytes "
				      "built in %.1f ms before reading", r, (unsigned long long)rs.copies[r]->fault_bytes,
				      rs.copies[r]->fault_ns / 1e6);
			copy_close(ctx, rs.copies[r]);
			rs.copies[r] = n;
		}
	free(rs.copies);
	free(rs.next_tier);
	free(rs.footers);
	return err;
}

int ckpt__reshard_same_layout(const ckpt_region *r, const ckpt_fmt_region *s)
{
	if (r->bytes != s->bytes || r->ndim != s->ndim)
		return 0;
	if (r->ndim == 0)
		return 1;
	size_t n = r->ndim * sizeof(uint64_t);
	return r->dtype == s->dtype && !memcmp(r->global_shape, s->global_shape, n) &&
	       !memcmp(r->offsets, s->offsets, n) && !memcmp(r->extents, s->extents, n);
}
