/* The save path: the snapshot (the only blocking part) and the persist
 * pipeline behind it.
 *
 *   ckpt_save ── copy regions chunk by chunk into staging slots ──> work queue
 *   workers   ── checksum, optional shuffle+zstd, take file space ──> backend.submit(write)
 *   io thread ── completions; when a shard's header and chunks are written:
 *                trailer (footer+tail) write, fdatasync, rename into place,
 *                fsync the directory, then the index commit.
 * Data is durable before the index says so; the index commit is the commit
 * point, so a crash anywhere leaves the version PENDING or absent. */
#include "ctx.h"
#include "daemon.h"
#include "../../kernels/ckpt_kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

enum io_kind { IO_CHUNK = 1, IO_HEADER, IO_TRAILER, IO_SYNC, IO_WAKE };


/* ------------------------------------------------------------- op refs */

static void op_free(ckpt_save_op *op)
{
	if (op->fd >= 0)
		close(op->fd);
	free(op->header_buf);
	free(op->trailer_buf);
	free(op->footer.regions);
	free(op->footer.chunks);
	free(op->tasks);
	pthread_mutex_destroy(&op->mu);
	pthread_cond_destroy(&op->cond);
	free(op);
}

static void op_release(ckpt_save_op *op)
{
	pthread_mutex_lock(&op->mu);
	int last = --op->refs == 0;
	pthread_mutex_unlock(&op->mu);
	if (last)
		op_free(op);
}

/* ------------------------------------------------------------- helpers */

static void op_fail(ckpt_save_op *op, int err, int sys_errno)
{
	/* First error wins; it is what the caller sees. Workers and the io
	 * thread both report. */
	pthread_mutex_lock(&op->mu);
	if (!op->error) {
		op->error = err;
		op->sys_errno = sys_errno;
	}
	pthread_mutex_unlock(&op->mu);
}

static void release_buffers(ckpt_ctx *ctx, ckpt_chunk_task *t)
{
	if (t->slot >= 0) {
		ckpt__pool_put(&ctx->pool, t->slot);
		t->slot = -1;
	}
	if (t->cbuf >= 0) {
		ctx->cbuf_free[ctx->cbuf_nfree++] = t->cbuf;
		t->cbuf = -1;
	}
}

/* Submits; a refused submission is handed to the io thread as a failed
 * completion, so that every completion is handled in one place. */
static void submit_io(ckpt_ctx *ctx, tagged_io *ti)
{
	int r = ctx->backend->ops->submit(ctx->backend, &ti->io);
	if (r == 0)
		return;
	pthread_mutex_lock(&ctx->lock);
	ti->io.result = r;
	ti->next = NULL;
	if (ctx->failed_tail)
		ctx->failed_tail->next = ti;
	else
		ctx->failed_head = ti;
	ctx->failed_tail = ti;
	pthread_mutex_unlock(&ctx->lock);
	ctx->backend->ops->submit(ctx->backend, &ctx->wake_io.io);
}

/* ------------------------------------------------------------- workers */

static void *worker_main(void *arg)
{
	ckpt_ctx *ctx = arg;
	ZSTD_CCtx *cctx = ctx->cfg.compress ? ZSTD_createCCtx() : NULL;
	uint8_t *scratch = ctx->cfg.compress ? malloc(ctx->cfg.chunk_bytes) : NULL;
	for (;;) {
		pthread_mutex_lock(&ctx->lock);
		while ((!ctx->work_head || ctx->hold_work) && !ctx->stopping)
			pthread_cond_wait(&ctx->work_cv, &ctx->lock);
		ckpt_chunk_task *t = ctx->work_head;
		if (!t) {
			pthread_mutex_unlock(&ctx->lock);
			break;
		}
		ctx->work_head = t->next;
		if (!ctx->work_head)
			ctx->work_tail = NULL;
		pthread_mutex_unlock(&ctx->lock);

		ckpt_save_op *op = t->op;
		/* A test slows the pipeline here to fill the staging pool. */
		ckpt__fault(&ctx->faults, "persist.chunk");
		uint8_t *raw = ckpt__pool_slot(&ctx->pool, t->slot);
		ckpt_fmt_chunk *c = &op->footer.chunks[t->index];
		uint64_t dev_sum = 0;
		int derr = t->dev ? ckpt__dev_slot_wait(ctx->dev, t->slot, &dev_sum) : 0;
		if (derr < 0)
			op_fail(op, derr, 0);
		/* A test damages the staged copy here, as a faulty link would. */
		if (t->dev && t->raw_len && ckpt__fault(&ctx->faults, "persist.device_chunk") < 0)
			raw[t->raw_len / 2] ^= 0x40;
		c->checksum = ckpt_kern_checksum(raw, t->raw_len);
		if (t->dev && derr == 0 && dev_sum != c->checksum) {
			/* End-to-end: the bytes that reached staging are not the bytes
			 * the device had at the save point. */
			const ckpt_fmt_region *fr = &op->footer.regions[c->region];
			LOG_E(&ctx->log, op->version,
			      "region '%s' chunk %llu: device checksum %016llx, host %016llx: state changed before "
			      "ckpt_fence or corrupted in transit", fr->name,
			      (unsigned long long)(t->index - fr->chunk_first), (unsigned long long)dev_sum,
			      (unsigned long long)c->checksum);
			op_fail(op, -CKPT_ECONTRACT, 0);
		}
		c->raw_len = t->raw_len;
		t->out = raw;
		t->stored_len = t->raw_len;
		t->flags = 0;
		if (cctx && scratch) {
			pthread_mutex_lock(&ctx->lock);
			while (ctx->cbuf_nfree == 0)
				pthread_cond_wait(&ctx->space_cv, &ctx->lock);
			t->cbuf = ctx->cbuf_free[--ctx->cbuf_nfree];
			pthread_mutex_unlock(&ctx->lock);
			uint8_t *cb = ctx->cbufs[t->cbuf];
			size_t n = ckpt_kern_compress(cctx, ctx->cfg.compress_level, cb, ctx->cbuf_bytes, raw,
			                              t->raw_len, t->elem, scratch);
			pthread_mutex_lock(&ctx->lock);
			if (n) {
				memset(cb + n, 0, CKPT_ALIGN_UP(n, CKPT_ALIGN) - n);
				t->out = cb;
				t->stored_len = (uint32_t)n;
				t->flags = CKPT_CHUNK_ZSTD | ((t->elem > 1 ? t->elem : 0u) << CKPT_CHUNK_SHUFFLE_SHIFT);
				ckpt__pool_put(&ctx->pool, t->slot);
				t->slot = -1;
			} else {
				ctx->cbuf_free[ctx->cbuf_nfree++] = t->cbuf;
				t->cbuf = -1;
			}
			pthread_cond_broadcast(&ctx->space_cv);
			pthread_mutex_unlock(&ctx->lock);
		}
		c->stored_len = t->stored_len;
		c->flags = t->flags;

		pthread_mutex_lock(&ctx->lock);
		while (ctx->inflight >= ctx->cfg.io_depth)
			pthread_cond_wait(&ctx->space_cv, &ctx->lock);
		ctx->inflight++;
		c->offset = op->next_off;
		op->next_off += CKPT_ALIGN_UP(t->stored_len, CKPT_ALIGN);
		pthread_mutex_unlock(&ctx->lock);

		tagged_io *ti = &t->io;
		memset(ti, 0, sizeof(*ti));
		ti->io.op = CKPT_IO_WRITE;
		ti->io.fd = op->fd;
		ti->io.buf = t->out;
		ti->io.len = CKPT_ALIGN_UP(t->stored_len, CKPT_ALIGN);
		ti->io.off = c->offset;
		ti->kind = IO_CHUNK;
		ti->obj = op;
		ti->io.user = t;
		submit_io(ctx, ti);
	}
	ZSTD_freeCCtx(cctx);
	free(scratch);
	return NULL;
}

/* ------------------------------------------------------------- io thread */

static void op_finish(ckpt_ctx *ctx, ckpt_save_op *op)
{
	if (op->fd >= 0) {
		close(op->fd);
		op->fd = -1;
	}
	if (op->error) {
		unlink(op->tmp_path);
		LOG_E(&ctx->log, op->version, "save failed: %s%s%s", ckpt_strerror(op->error),
		      op->sys_errno ? " / " : "", op->sys_errno ? ckpt_strerror(op->sys_errno) : "");
	}
	pthread_mutex_lock(&op->mu);
	op->durable_ns = ckpt__now_ns() - op->t_start;
	op->finished = 1;
	pthread_cond_broadcast(&op->cond);
	pthread_mutex_unlock(&op->mu);

	pthread_mutex_lock(&ctx->lock);
	ckpt_save_op **pp = &ctx->live;
	while (*pp && *pp != op)
		pp = &(*pp)->next_live;
	if (*pp)
		*pp = op->next_live;
	ctx->nlive--;
	pthread_cond_broadcast(&ctx->space_cv);
	pthread_mutex_unlock(&ctx->lock);
	op_release(op);
}

static void submit_aux(ckpt_ctx *ctx, ckpt_save_op *op, int kind, int iop, void *buf, uint32_t len,
                       uint64_t off)
{
	tagged_io *ti = &op->aux;
	memset(ti, 0, sizeof(*ti));
	ti->io.op = iop;
	ti->io.fd = op->fd;
	ti->io.buf = buf;
	ti->io.len = len;
	ti->io.off = off;
	ti->kind = kind;
	ti->obj = op;
	submit_io(ctx, ti);
}

/* All chunk data and the header are written: close the shard. */
static void op_write_trailer(ckpt_ctx *ctx, ckpt_save_op *op)
{
	int r;
	if (op->error) {
		op_finish(ctx, op);
		return;
	}
	if ((r = ckpt__fault(&ctx->faults, "save.before_footer")) < 0) {
		op_fail(op, r, 0);
		op_finish(ctx, op);
		return;
	}
	ckpt_fmt_footer *f = &op->footer;
	f->stored_bytes = 0;
	for (uint64_t i = 0; i < f->chunk_count; i++)
		f->stored_bytes += f->chunks[i].stored_len;
	op->trailer_len = ckpt__fmt_trailer_len(f);
	if (posix_memalign((void **)&op->trailer_buf, CKPT_ALIGN, op->trailer_len)) {
		op_fail(op, -ENOMEM, ENOMEM);
		op_finish(ctx, op);
		return;
	}
	memset(op->trailer_buf, 0, op->trailer_len);
	ckpt__fmt_trailer_encode(op->trailer_buf, op->trailer_len, f, op->next_off, op->header_checksum);
	op->file_bytes = op->next_off + op->trailer_len;
	op->stage = OP_TRAILER;
	submit_aux(ctx, op, IO_TRAILER, CKPT_IO_WRITE, op->trailer_buf, (uint32_t)op->trailer_len,
	           op->next_off);
}

/* Data and trailer are on stable storage: make the name appear, then commit. */
static void op_commit(ckpt_ctx *ctx, ckpt_save_op *op)
{
	int r;
	close(op->fd);
	op->fd = -1;
	if ((r = ckpt__fault(&ctx->faults, "save.before_rename")) < 0)
		goto fail;
	if (rename(op->tmp_path, op->final_path) < 0) {
		r = -errno;
		goto fail;
	}
	if ((r = ckpt__fsync_dir(op->dir_path)) < 0 || (r = ckpt__fsync_parent(op->dir_path)) < 0)
		goto fail_renamed;
	if ((r = ckpt__fault(&ctx->faults, "save.before_index_commit")) < 0)
		goto fail_renamed;
	ckpt_idx_shard s = {
		.tiers = CKPT_TIER_LOCAL_DISK,
		.bytes = op->footer.data_bytes,
		.stored_bytes = op->footer.stored_bytes,
		.footer_checksum = ckpt__get_le64(op->trailer_buf + op->trailer_len - CKPT_FMT_TAIL_LEN + 32),
		.durable_ns = ckpt__wall_ns(),
		.lineage = op->lineage,
	};
	int committed = 0;
	if ((r = ckpt__index_shard_done(ctx->index, ctx->job, op->version, ctx->cfg.world_size,
	                                ctx->cfg.rank, &s, &committed)) < 0)
		goto fail_renamed;
	op->committed = committed;
	LOG_I(&ctx->log, op->version, "shard durable (%llu bytes, %llu stored)%s",
	      (unsigned long long)op->footer.data_bytes, (unsigned long long)op->footer.stored_bytes,
	      committed ? "; version COMMITTED" : "");
	if (ctx->daemon)
		ckpt__daemon_shard_saved(ctx, op, s.footer_checksum);
	op_finish(ctx, op);
	return;
fail_renamed:
	/* The file is complete but not indexed; 'ckpt reindex' can adopt it.
	 * Leave it: removing a complete shard helps nobody. */
	op_fail(op, r, r > -CKPT_ERRNO_OFFSET ? -r : 0);
	op_finish(ctx, op);
	return;
fail:
	op_fail(op, r, r > -CKPT_ERRNO_OFFSET ? -r : 0);
	op_finish(ctx, op);
}

static void maybe_trailer(ckpt_ctx *ctx, ckpt_save_op *op)
{
	if (op->stage == OP_DATA && op->header_written && op->chunks_written == op->chunks_total)
		op_write_trailer(ctx, op);
}

static void on_chunk_done(ckpt_ctx *ctx, ckpt_chunk_task *t, int result)
{
	ckpt_save_op *op = t->op;
	pthread_mutex_lock(&ctx->lock);
	release_buffers(ctx, t);
	ctx->inflight--;
	pthread_cond_broadcast(&ctx->space_cv);
	pthread_mutex_unlock(&ctx->lock);
	if (result < 0)
		op_fail(op, result, -result);
	op->chunks_written++;
	if (op->chunks_written == op->chunks_total / 2 + 1) {
		int r = ckpt__fault(&ctx->faults, "save.mid_data");
		if (r < 0)
			op_fail(op, r, 0);
	}
	maybe_trailer(ctx, op);
}

static void on_aux_done(ckpt_ctx *ctx, tagged_io *ti)
{
	ckpt_save_op *op = ti->obj;
	int result = ti->io.result;
	switch (ti->kind) {
	case IO_HEADER:
		if (result < 0)
			op_fail(op, result, -result);
		op->header_written = 1;
		if (!op->error) {
			/* The PENDING record is made here, off the caller's stall. */
			int r = ckpt__index_begin(ctx->index, ctx->job, op->version, ctx->cfg.world_size,
			                          ctx->cfg.rank, op->created_ns, op->lineage);
			if (r < 0)
				op_fail(op, r, 0);
		}
		maybe_trailer(ctx, op);
		break;
	case IO_TRAILER: {
		if (result < 0) {
			op_fail(op, result, -result);
			op_finish(ctx, op);
			break;
		}
		int r = ckpt__fault(&ctx->faults, "save.before_fsync");
		if (r < 0) {
			op_fail(op, r, 0);
			op_finish(ctx, op);
			break;
		}
		op->stage = OP_SYNC;
		submit_aux(ctx, op, IO_SYNC, CKPT_IO_FDATASYNC, NULL, 0, 0);
		break;
	}
	case IO_SYNC:
		if (result < 0) {
			op_fail(op, result, -result);
			op_finish(ctx, op);
			break;
		}
		op_commit(ctx, op);
		break;
	}
}

static void on_complete(ckpt_ctx *ctx, tagged_io *ti)
{
	if (ti->kind == IO_CHUNK)
		on_chunk_done(ctx, ti->io.user, ti->io.result);
	else if (ti->kind != IO_WAKE)
		on_aux_done(ctx, ti);
}

static void *io_main(void *arg)
{
	ckpt_ctx *ctx = arg;
	ckpt_io *done[64];
	for (;;) {
		int n = ctx->backend->ops->poll(ctx->backend, done, 64, 200);
		for (int i = 0; i < n; i++)
			on_complete(ctx, (tagged_io *)done[i]);
		pthread_mutex_lock(&ctx->lock);
		tagged_io *f = ctx->failed_head;
		ctx->failed_head = ctx->failed_tail = NULL;
		int stop = ctx->stopping && ctx->nlive == 0 && !f;
		pthread_mutex_unlock(&ctx->lock);
		while (f) {
			tagged_io *nx = f->next;
			on_complete(ctx, f);
			f = nx;
		}
		if (ctx->daemon)
			ckpt__daemon_poll(ctx);
		if (stop)
			break;
	}
	return NULL;
}

int ckpt__pipeline_start(ckpt_ctx *ctx)
{
	tagged_io *w = &ctx->wake_io;
	memset(w, 0, sizeof(*w));
	w->io.op = CKPT_IO_NOP;
	w->kind = IO_WAKE;
	ctx->nworkers = ctx->cfg.workers;
	ctx->workers = calloc(ctx->nworkers, sizeof(pthread_t));
	if (!ctx->workers)
		return -ENOMEM;
	for (uint32_t i = 0; i < ctx->nworkers; i++) {
		int r = pthread_create(&ctx->workers[i], NULL, worker_main, ctx);
		if (r) {
			ctx->nworkers = i;
			return -r;
		}
	}
	int r = pthread_create(&ctx->io_thread, NULL, io_main, ctx);
	if (r)
		return -r;
	ctx->io_started = 1;
	return 0;
}

void ckpt__pipeline_stop(ckpt_ctx *ctx)
{
	pthread_mutex_lock(&ctx->lock);
	while (ctx->nlive)
		pthread_cond_wait(&ctx->space_cv, &ctx->lock);
	ctx->stopping = 1;
	pthread_cond_broadcast(&ctx->work_cv);
	pthread_mutex_unlock(&ctx->lock);
	for (uint32_t i = 0; i < ctx->nworkers; i++)
		pthread_join(ctx->workers[i], NULL);
	free(ctx->workers);
	ctx->workers = NULL;
	ctx->nworkers = 0;
	if (ctx->io_started) {
		ctx->backend->ops->submit(ctx->backend, &ctx->wake_io.io);
		pthread_join(ctx->io_thread, NULL);
		ctx->io_started = 0;
	}
}

/* ------------------------------------------------------------- ckpt_save */

static unsigned shuffle_elem(ckpt_dtype d)
{
	size_t s = ckpt_dtype_size(d);
	return (d == CKPT_DTYPE_BYTES || s <= 1) ? 1u : (unsigned)s;
}

static int open_shard_file(ckpt_ctx *ctx, ckpt_save_op *op)
{
	int r;
	CKPT_TRY(ckpt__version_dir(op->dir_path, sizeof(op->dir_path), ctx->root, ctx->job, op->version));
	CKPT_TRY(ckpt__shard_path(op->final_path, sizeof(op->final_path), ctx->root, ctx->job, op->version,
	                          ctx->cfg.rank));
	if (snprintf(op->tmp_path, sizeof(op->tmp_path), "%s/.r%06u.ckpt.tmp", op->dir_path, ctx->cfg.rank) >=
	    (int)sizeof(op->tmp_path))
		return -ENAMETOOLONG;
	if ((r = ckpt__mkdir_p(op->dir_path, 0700)) < 0) {
		LOG_E(&ctx->log, op->version, "cannot create %s: %s", op->dir_path, ckpt_strerror(r));
		return r;
	}
	int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
	op->fd = open(op->tmp_path, flags | (ctx->direct_ok ? O_DIRECT : 0), 0600);
	if (op->fd < 0 && ctx->direct_ok && errno == EINVAL)
		op->fd = open(op->tmp_path, flags, 0600);
	if (op->fd < 0) {
		r = -errno;
		LOG_E(&ctx->log, op->version, "cannot create %s: %s", op->tmp_path, ckpt_strerror(r));
		return r;
	}
	return 0;
}

static ckpt_save_op *op_new(ckpt_ctx *ctx, uint64_t version, uint64_t nchunks)
{
	ckpt_save_op *op = calloc(1, sizeof(*op));
	if (!op)
		return NULL;
	op->ctx = ctx;
	op->tiers = ctx->cfg.tiers;
	op->fd = -1;
	op->version = version;
	op->footer.region_count = ctx->nregions;
	op->footer.chunk_count = nchunks;
	op->footer.chunk_bytes = ctx->cfg.chunk_bytes;
	op->footer.regions = calloc(ctx->nregions ? ctx->nregions : 1, sizeof(ckpt_fmt_region));
	op->footer.chunks = calloc(nchunks ? nchunks : 1, sizeof(ckpt_fmt_chunk));
	op->tasks = calloc(nchunks ? nchunks : 1, sizeof(ckpt_chunk_task));
	if (posix_memalign((void **)&op->header_buf, CKPT_ALIGN, CKPT_FMT_HEADER_LEN))
		op->header_buf = NULL;
	pthread_mutex_init(&op->mu, NULL);
	pthread_cond_init(&op->cond, NULL);
	if (!op->footer.regions || !op->footer.chunks || !op->tasks || !op->header_buf) {
		op_free(op);
		return NULL;
	}
	op->chunks_total = (uint32_t)nchunks;
	uint64_t ci = 0;
	for (uint32_t i = 0; i < ctx->nregions; i++) {
		const ckpt_region *r = &ctx->regions[i];
		ckpt_fmt_region *fr = &op->footer.regions[i];
		memcpy(fr->name, r->name, r->name_len + 1);
		fr->name_len = (uint16_t)r->name_len;
		fr->dtype = (uint8_t)r->dtype;
		fr->ndim = (uint8_t)r->ndim;
		fr->device = r->device;
		fr->bytes = r->bytes;
		fr->chunk_first = ci;
		fr->chunk_count = (uint32_t)((r->bytes + ctx->cfg.chunk_bytes - 1) / ctx->cfg.chunk_bytes);
		memcpy(fr->global_shape, r->global_shape, sizeof(fr->global_shape));
		memcpy(fr->offsets, r->offsets, sizeof(fr->offsets));
		memcpy(fr->extents, r->extents, sizeof(fr->extents));
		for (uint32_t k = 0; k < fr->chunk_count; k++)
			op->footer.chunks[ci + k].region = i;
		ci += fr->chunk_count;
		op->footer.data_bytes += r->bytes;
	}
	return op;
}

int ckpt_save(ckpt_ctx *ctx, uint64_t version, uint32_t flags, ckpt_handle **out)
{
	if (out)
		*out = NULL;
	if (!ctx || (flags & ~CKPT_SAVE_LAZY) || version == CKPT_LATEST)
		return -EINVAL;
	int lazy = (flags & CKPT_SAVE_LAZY) != 0;
	if (ctx->nregions == 0) {
		LOG_E(&ctx->log, version, "save: no region registered");
		return -CKPT_ESTATE;
	}
	uint64_t t0 = ckpt__now_ns();
	uint64_t cb = ctx->cfg.chunk_bytes, nchunks = 0;
	for (uint32_t i = 0; i < ctx->nregions; i++)
		nchunks += (ctx->regions[i].bytes + cb - 1) / cb;
	if (nchunks > UINT32_MAX)
		return -CKPT_ETOOBIG;

	/* A version already committed with this rank in it is never rewritten. */
	ckpt_idx_shard old;
	ckpt_idx_version v;
	if (ckpt__index_get(ctx->index, ctx->job, version, &v) == 0) {
		if (v.state == CKPT_STATE_DELETING)
			return -CKPT_ESTATE;
		if (v.state == CKPT_STATE_COMMITTED &&
		    ckpt__index_get_shard(ctx->index, ctx->job, version, ctx->cfg.rank, &old) == 0) {
			LOG_E(&ctx->log, version, "save: version already committed");
			return -EEXIST;
		}
		if (v.world_size != ctx->cfg.world_size) {
			LOG_E(&ctx->log, version, "save: version exists with world size %u", v.world_size);
			return -CKPT_EMISMATCH;
		}
	}
	pthread_mutex_lock(&ctx->lock);
	for (ckpt_save_op *l = ctx->live; l; l = l->next_live)
		if (l->version == version) {
			pthread_mutex_unlock(&ctx->lock);
			return -EEXIST;
		}
	if (ctx->cfg.pool_policy == CKPT_POOL_SKIP) {
		if (nchunks > ctx->pool.nslots) {
			pthread_mutex_unlock(&ctx->lock);
			LOG_W(&ctx->log, version, "save skipped: %llu chunks never fit a pool of %u slots",
			      (unsigned long long)nchunks, ctx->pool.nslots);
			return -CKPT_ETOOBIG;
		}
		if (nchunks > ctx->pool.nfree) {
			pthread_mutex_unlock(&ctx->lock);
			LOG_I(&ctx->log, version, "save skipped: staging pool busy (%u of %u slots free, %llu needed)",
			      ctx->pool.nfree, ctx->pool.nslots, (unsigned long long)nchunks);
			return -CKPT_ESKIPPED;
		}
	}
	pthread_mutex_unlock(&ctx->lock);

	/* The save point on the device: checksums taken in the trainer's stream
	 * order, before anything is queued (nothing to undo if it fails). */
	if (ctx->ndev_regions) {
		uint32_t n = ctx->ndev_regions;
		void *ptrs[n];
		uint64_t bytes[n];
		const char *names[n];
		ckpt_dev_region *regs[n];
		ckpt__dev_regions(ctx, ptrs, bytes, names, regs);
		int r = ckpt__dev_save_point(ctx->dev, ptrs, bytes, regs, n, cb, lazy && ctx->cfg.lazy_check);
		if (r < 0)
			return r;
	}
	ckpt_save_op *op = op_new(ctx, version, nchunks);
	if (!op)
		return -ENOMEM;
	int r = open_shard_file(ctx, op);
	if (r < 0) {
		op_free(op);
		return r;
	}
	if ((r = ckpt__fault(&ctx->faults, "save.before_data")) < 0) {
		unlink(op->tmp_path);
		op_free(op);
		return r;
	}
	ckpt_handle *h = NULL;
	if (out) {
		h = calloc(1, sizeof(*h));
		if (!h) {
			unlink(op->tmp_path);
			op_free(op);
			return -ENOMEM;
		}
		h->op = op;
	}
	op->refs = h ? 3 : 2; /* pipeline, handle, and this call until the snapshot ends */
	op->t_start = t0;
	op->created_ns = ckpt__wall_ns();
	op->next_off = CKPT_FMT_HEADER_LEN;
	op->lineage = ctx->lineage;
	ckpt_fmt_header hd = {
		.version = version, .rank = ctx->cfg.rank, .world_size = ctx->cfg.world_size,
		.created_ns = op->created_ns, .lineage = ctx->lineage,
	};
	snprintf(hd.job, sizeof(hd.job), "%s", ctx->job);
	ckpt__fmt_header_encode(op->header_buf, &hd);
	op->header_checksum = ckpt__get_le64(op->header_buf + 248);

	pthread_mutex_lock(&ctx->lock);
	op->next_live = ctx->live;
	ctx->live = op;
	ctx->nlive++;
	pthread_mutex_unlock(&ctx->lock);
	submit_aux(ctx, op, IO_HEADER, CKPT_IO_WRITE, op->header_buf, CKPT_FMT_HEADER_LEN, 0);

	/* The snapshot: the only part the caller waits for. */
	uint64_t ci = 0;
	if (!ctx->overlap) {
		pthread_mutex_lock(&ctx->lock);
		ctx->hold_work = 1;
		pthread_mutex_unlock(&ctx->lock);
	}
	for (uint32_t i = 0; i < ctx->nregions; i++) {
		const ckpt_region *rg = &ctx->regions[i];
		unsigned elem = shuffle_elem(rg->dtype);
		for (uint64_t off = 0; off < rg->bytes; off += cb, ci++) {
			uint32_t len = (uint32_t)CKPT_MIN(cb, rg->bytes - off);
			pthread_mutex_lock(&ctx->lock);
			int slot;
			while ((slot = ckpt__pool_get(&ctx->pool)) < 0) {
				/* Only the pipeline frees slots: let it run from here on. */
				if (ctx->hold_work) {
					ctx->hold_work = 0;
					pthread_cond_broadcast(&ctx->work_cv);
				}
				pthread_cond_wait(&ctx->space_cv, &ctx->lock);
			}
			pthread_mutex_unlock(&ctx->lock);
			uint8_t *dst = ckpt__pool_slot(&ctx->pool, slot);
			size_t padded = CKPT_ALIGN_UP(len, CKPT_ALIGN);
			if (padded > len)
				memset(dst + len, 0, padded - len);
			ckpt_chunk_task *t = &op->tasks[ci];
			t->dev = rg->device == CKPT_DEVICE_CUDA;
			if (t->dev) {
				int r = ckpt__dev_copy_chunk(ctx->dev, slot, dst, (const uint8_t *)rg->ptr + off, len,
				                             &rg->dev, (uint32_t)(off / cb));
				if (r < 0) {
					op_fail(op, r, 0);
					t->dev = 0; /* nothing to wait for; the save fails */
				}
			} else {
				memcpy(dst, (const uint8_t *)rg->ptr + off, len);
			}
			t->op = op;
			t->index = (uint32_t)ci;
			t->slot = slot;
			t->cbuf = -1;
			t->raw_len = len;
			t->elem = elem;
			t->next = NULL;
			pthread_mutex_lock(&ctx->lock);
			if (ctx->work_tail)
				ctx->work_tail->next = t;
			else
				ctx->work_head = t;
			ctx->work_tail = t;
			if (!ctx->hold_work)
				pthread_cond_signal(&ctx->work_cv);
			pthread_mutex_unlock(&ctx->lock);
		}
	}
	pthread_mutex_lock(&ctx->lock);
	ctx->hold_work = 0;
	pthread_cond_broadcast(&ctx->work_cv);
	pthread_mutex_unlock(&ctx->lock);
	/* Eager: the caller may change its state once we return, so the device
	 * copies must be done. Lazy: ckpt_fence waits for them. */
	if (ctx->ndev_regions) {
		int r = ckpt__dev_save_end(ctx->dev, !lazy);
		if (r < 0)
			op_fail(op, r, 0);
	}
	uint64_t stall = ckpt__now_ns() - t0;
	pthread_mutex_lock(&op->mu);
	op->stall_ns = stall;
	pthread_mutex_unlock(&op->mu);
	LOG_T(&ctx->log, version, "snapshot taken: %llu bytes in %.3f ms",
	      (unsigned long long)op->footer.data_bytes, stall / 1e6);
	op_release(op);
	if (out)
		*out = h;
	return 0;
}

/* ------------------------------------------------------------- handles */

static void fill_status(ckpt_save_op *op, uint32_t tier, ckpt_status *st)
{
	if (!st)
		return;
	uint32_t sz = st->size ? st->size : sizeof(*st);
	ckpt_status s = {
		.size = sz, .version = op->version, .tier = tier, .error = op->error,
		.sys_errno = op->sys_errno, .committed = op->committed, .bytes = op->footer.data_bytes,
		.stored_bytes = op->footer.stored_bytes, .stall_ns = op->stall_ns,
		.durable_ns = op->finished ? op->durable_ns : 0,
	};
	memcpy(st, &s, CKPT_MIN(sz, sizeof(s)));
}

int ckpt_handle_wait(ckpt_handle *h, uint32_t tier, int64_t timeout_ms, ckpt_status *st)
{
	if (!h)
		return -EINVAL;
	ckpt_save_op *op = h->op;
	if (tier != CKPT_TIER_LOCAL_DISK && !(tier == CKPT_TIER_LOCAL_MEM && (op->tiers & CKPT_TIER_LOCAL_MEM)))
		return -EINVAL;
	uint64_t t0 = ckpt__now_ns();
	pthread_mutex_lock(&op->mu);
	if (timeout_ms < 0) {
		while (!op->finished)
			pthread_cond_wait(&op->cond, &op->mu);
	} else if (!op->finished && timeout_ms > 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (!op->finished)
			if (pthread_cond_timedwait(&op->cond, &op->mu, &ts) == ETIMEDOUT)
				break;
	}
	int fin = op->finished;
	fill_status(op, tier, st);
	int err = op->error;
	pthread_mutex_unlock(&op->mu);
	if (!fin)
		return timeout_ms == 0 ? -EAGAIN : -ETIMEDOUT;
	if (err || tier != CKPT_TIER_LOCAL_MEM)
		return err;
	/* The file went into node DRAM on the io thread before finishing. */
	if (op->mem_error)
		return op->mem_error;
	int64_t left = timeout_ms;
	if (timeout_ms > 0) {
		int64_t spent = (int64_t)((ckpt__now_ns() - t0) / 1000000u);
		left = spent >= timeout_ms ? 1 : timeout_ms - spent;
	}
	return ckpt__daemon_wait_commit(op->ctx, op->version, CKPT_TIER_LOCAL_MEM, left);
}

int ckpt_handle_test(ckpt_handle *h, uint32_t tier, ckpt_status *st)
{
	return ckpt_handle_wait(h, tier, 0, st);
}

void ckpt_handle_free(ckpt_handle *h)
{
	if (!h)
		return;
	op_release(h->op);
	free(h);
}
