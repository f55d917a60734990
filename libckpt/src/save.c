/* The save path: the snapshot (the only blocking part) and the persist
 * pipeline behind it.
 *
 *   ckpt_save ── copy regions chunk by chunk into staging slots, or with
 *                LOCAL_MEM into a segment of the ckptd agent's pool at the
 *                chunks' places in a shard image ──> work queue
 *   workers   ── checksum, optional shuffle+zstd, take file space ──> backend.submit(write)
 *   io thread ── completions; when every chunk of a LOCAL_MEM save is
 *                checksummed: the image's footer and tail into the segment,
 *                SHARD_DONE(LOCAL_MEM); when every chunk and the header are
 *                written: trailer (footer+tail) write, fdatasync, rename into
 *                place, fsync the directory, then the index commit, then
 *                SHARD_DONE(LOCAL_DISK).
 * Data is durable before the index says so; the index commit is the commit
 * point, so a crash anywhere leaves the version PENDING or absent. The DRAM
 * copy does not wait for the disk: it outlives the process once reported. */
#include "ctx.h"
#include "format/admin.h"
#include "format/recycle.h"
#include "base/dirs.h"
#include "daemon.h"
#include "peer.h"
#include "preempt.h"
#include "ckpt_kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

enum io_kind { IO_CHUNK = 1, IO_HEADER, IO_TRAILER, IO_SYNC, IO_WAKE };


/* ------------------------------------------------------------- op refs */

static void op_free(ckpt_save_op *op)
{
	if (op->fd >= 0)
		close(op->fd);
	if (op->dir_fd >= 0)
		close(op->dir_fd);
	if (op->job_fd >= 0)
		close(op->job_fd);
	free(op->header_buf);
	free(op->trailer_buf);
	free(op->footer.regions);
	free(op->footer.chunks);
	free(op->tasks);
	pthread_mutex_destroy(&op->mu);
	pthread_cond_destroy(&op->cond);
	free(op);
}

void ckpt__op_ref(ckpt_save_op *op)
{
	pthread_mutex_lock(&op->mu);
	op->refs++;
	pthread_mutex_unlock(&op->mu);
}

void ckpt__op_release(ckpt_save_op *op)
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
	int first = !op->error;
	if (first) {
		op->error = err;
		op->sys_errno = sys_errno;
	}
	pthread_mutex_unlock(&op->mu);
	if (first) { /* counted in the next step report (metrics) */
		pthread_mutex_lock(&op->ctx->step_mu);
		op->ctx->step_errors++;
		pthread_mutex_unlock(&op->ctx->step_mu);
	}
}

/* With ctx->lock held. */
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

/* Staging slots, for the snapshot and for restores: waits for a free one.
 * Only the save pipeline and restores free them, so a snapshot holding the
 * workers back (hold_work) lets them run from here on, or nothing would. */
int ckpt__slot_take(ckpt_ctx *ctx)
{
	int slot;
	pthread_mutex_lock(&ctx->lock);
	while ((slot = ckpt__pool_get(&ctx->pool)) < 0) {
		if (ctx->hold_work) {
			ctx->hold_work = 0;
			pthread_cond_broadcast(&ctx->work_cv);
		}
		pthread_cond_wait(&ctx->space_cv, &ctx->lock);
	}
	pthread_mutex_unlock(&ctx->lock);
	return slot;
}

void ckpt__slot_give(ckpt_ctx *ctx, int slot)
{
	pthread_mutex_lock(&ctx->lock);
	ckpt__pool_put(&ctx->pool, slot);
	pthread_cond_broadcast(&ctx->space_cv);
	pthread_mutex_unlock(&ctx->lock);
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

/* With ctx->lock held: wakes the io thread (a NOP through the backend),
 * once: a completion queue holds few entries, and one wake-up is enough for
 * everything that happened before the io thread takes it. */
static void wake_io_locked(ckpt_ctx *ctx)
{
	if (ctx->wake_pending)
		return;
	ctx->wake_pending = 1;
	ctx->backend->ops->submit(ctx->backend, &ctx->wake_io.io);
}

/* The raw bytes of a chunk, checksummed (and checked against the device's
 * own checksum for a CUDA chunk). */
static void chunk_sum(ckpt_ctx *ctx, ckpt_chunk_task *t)
{
	ckpt_save_op *op = t->op;
	/* A test slows the pipeline here to fill the staging pool. */
	ckpt__fault(&ctx->faults, "persist.chunk");
	ckpt_fmt_chunk *c = &op->footer.chunks[t->index];
	uint64_t dev_sum = 0;
	int derr = t->dev ? ckpt__dev_slot_wait(ctx->dev, t->slot, &dev_sum) : 0;
	if (derr < 0)
		op_fail(op, derr, 0);
	uint8_t *raw = t->mem;
	if (!raw) {
		raw = ckpt__pool_slot(&ctx->pool, t->slot);
	} else if (t->slot >= 0) {
		/* A device chunk crossed over in its pinned slot (the segment is
		 * not registered with CUDA); its place is in the segment. */
		memcpy(raw, ckpt__pool_slot(&ctx->pool, t->slot), t->raw_len);
		pthread_mutex_lock(&ctx->lock);
		ckpt__pool_put(&ctx->pool, t->slot);
		t->slot = -1;
		pthread_cond_broadcast(&ctx->space_cv);
		pthread_mutex_unlock(&ctx->lock);
	}
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
}

/* Optional compression, file space, the write. credit: an io slot was
 * taken for it already; otherwise wait for one here. */
static void chunk_write(ckpt_ctx *ctx, ckpt_chunk_task *t, ZSTD_CCtx *cctx, uint8_t *scratch, int credit)
{
	ckpt_save_op *op = t->op;
	ckpt_fmt_chunk *c = &op->footer.chunks[t->index];
	uint8_t *raw = t->out;
	t->stored_len = t->raw_len;
	t->flags = 0;
	if (cctx && scratch) {
		pthread_mutex_lock(&ctx->lock);
		while (ctx->cbuf_nfree == 0)
			pthread_cond_wait(&ctx->space_cv, &ctx->lock);
		t->cbuf = ctx->cbuf_free[--ctx->cbuf_nfree];
		pthread_mutex_unlock(&ctx->lock);
		uint8_t *cb = ctx->cbufs[t->cbuf];
		size_t n = ckpt_kern_compress(cctx, ctx->cfg.compress_level, cb, ctx->cbuf_bytes, raw, t->raw_len,
		                              t->elem, scratch);
		pthread_mutex_lock(&ctx->lock);
		if (n) {
			memset(cb + n, 0, CKPT_ALIGN_UP(n, CKPT_ALIGN) - n);
			t->out = cb;
			t->stored_len = (uint32_t)n;
			t->flags = CKPT_CHUNK_ZSTD | ((t->elem > 1 ? t->elem : 0u) << CKPT_CHUNK_SHUFFLE_SHIFT);
			if (t->slot >= 0) {
				ckpt__pool_put(&ctx->pool, t->slot);
				t->slot = -1;
			}
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
	if (!credit) {
		while (ctx->inflight >= ctx->cfg.io_depth)
			pthread_cond_wait(&ctx->space_cv, &ctx->lock);
		ctx->inflight++;
	}
	if (op->fixed_layout) {
		c->offset = t->img_off;
	} else {
		c->offset = op->next_off;
		op->next_off += CKPT_ALIGN_UP(t->stored_len, CKPT_ALIGN);
	}
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

/* Two queues. work: chunks to checksum (and, when staged, to write at
 * once: their slot is held until then anyway). write: LOCAL_MEM chunks
 * already checksummed, taken only with an io slot free, so that checksums
 * run ahead of the disk and the DRAM copy is reported without waiting for
 * it; their bytes stay in the segment meanwhile, costing nothing. */
static void *worker_main(void *arg)
{
	ckpt_ctx *ctx = arg;
	ZSTD_CCtx *cctx = ctx->cfg.compress ? ZSTD_createCCtx() : NULL;
	uint8_t *scratch = ctx->cfg.compress ? malloc(ctx->cfg.chunk_bytes) : NULL;
	for (;;) {
		ckpt_chunk_task *t = NULL;
		int credit = 0;
		pthread_mutex_lock(&ctx->lock);
		for (;;) {
			if (!ctx->hold_work && ctx->work_head) {
				t = ctx->work_head;
				ctx->work_head = t->next;
				if (!ctx->work_head)
					ctx->work_tail = NULL;
				break;
			}
			if (!ctx->hold_work && ctx->write_head && ctx->inflight < ctx->cfg.io_depth) {
				t = ctx->write_head;
				ctx->write_head = t->next;
				if (!ctx->write_head)
					ctx->write_tail = NULL;
				ctx->inflight++;
				credit = 1;
				break;
			}
			if (ctx->stopping && !ctx->work_head && !ctx->write_head)
				break;
			pthread_cond_wait(&ctx->work_cv, &ctx->lock);
		}
		pthread_mutex_unlock(&ctx->lock);
		if (!t)
			break;
		if (credit) {
			chunk_write(ctx, t, cctx, scratch, 1);
			continue;
		}
		chunk_sum(ctx, t);
		if (!t->mem) {
			chunk_write(ctx, t, cctx, scratch, 0);
			continue;
		}
		ckpt_save_op *op = t->op;
		pthread_mutex_lock(&ctx->lock);
		t->next = NULL;
		if (ctx->write_tail)
			ctx->write_tail->next = t;
		else
			ctx->write_head = t;
		ctx->write_tail = t;
		if (++op->chunks_summed == op->chunks_total) {
			op->mem_ready = 1;
			wake_io_locked(ctx);
		}
		pthread_cond_broadcast(&ctx->work_cv);
		pthread_mutex_unlock(&ctx->lock);
	}
	ZSTD_freeCCtx(cctx);
	free(scratch);
	return NULL;
}

/* ------------------------------------------------------------- io thread */

static void op_finish(ckpt_ctx *ctx, ckpt_save_op *op)
{
	if (ctx->seg_reader == op)
		ctx->seg_reader = NULL;
	if (op->fd >= 0) {
		close(op->fd);
		op->fd = -1;
	}
	if (op->error) {
		if (op->dir_fd >= 0)
			unlinkat(op->dir_fd, op->tmp_name, 0);
		LOG_E(&ctx->log, op->version, "save failed: %s%s%s", ckpt_strerror(op->error),
		      op->sys_errno ? " / " : "", op->sys_errno ? ckpt_strerror(op->sys_errno) : "");
	}
	pthread_mutex_lock(&op->mu);
	op->durable_ns = ckpt__now_ns() - op->t_start;
	op->finished = 1;
	if (op->mem_state == 0) {
		op->mem_state = -1;
		op->mem_error = op->error ? op->error : -EIO;
	}
	int peer_unqueued = (op->tiers & CKPT_TIER_PEER_MEM) && !op->peer_queued;
	int peer_err = op->mem_error ? op->mem_error : -CKPT_EUNAVAIL;
	pthread_cond_broadcast(&op->cond);
	pthread_mutex_unlock(&op->mu);
	if (peer_unqueued) /* no DRAM image: nothing to send to a partner */
		ckpt__peer_settle(op, peer_err);

	pthread_mutex_lock(&ctx->lock);
	ckpt_save_op **pp = &ctx->live;
	while (*pp && *pp != op)
		pp = &(*pp)->next_live;
	if (*pp)
		*pp = op->next_live;
	ctx->nlive--;
	pthread_cond_broadcast(&ctx->space_cv);
	pthread_mutex_unlock(&ctx->lock);
	ckpt__op_release(op);
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

/* Embedded retention (keep_versions), after the commit of version: the
 * caller's wait has returned already; the io thread pays for it. */
static void retain(ckpt_ctx *ctx, uint64_t version)
{
	uint32_t n = 0;
	int r = ckpt__admin_retain(ctx->root, ctx->index, ctx->job, ctx->cfg.keep_versions, &ctx->faults, &ctx->log,
	                           &n);
	if (r < 0)
		LOG_W(&ctx->log, version, "retention: %s", ckpt_strerror(r));
	else if (n)
		LOG_I(&ctx->log, version, "retention: %u older version%s deleted (keeping %u)", n, n == 1 ? "" : "s",
		      ctx->cfg.keep_versions);
}

/* Data and trailer are on stable storage: make the name appear, then commit. */
static void op_commit(ckpt_ctx *ctx, ckpt_save_op *op)
{
	int r;
	close(op->fd);
	op->fd = -1;
	if ((r = ckpt__fault(&ctx->faults, "save.before_rename")) < 0)
		goto fail;
	if (renameat(op->dir_fd, op->tmp_name, op->dir_fd, op->final_name) < 0) {
		r = -errno;
		goto fail;
	}
	if (fsync(op->dir_fd) < 0 || fsync(op->job_fd) < 0) {
		r = -errno;
		goto fail_renamed;
	}
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
	if (committed)
		ckpt__preempt_committed(ctx, op->version, CKPT_TIER_LOCAL_DISK);
	LOG_I(&ctx->log, op->version, "shard durable (%llu bytes, %llu stored)%s",
	      (unsigned long long)op->footer.data_bytes, (unsigned long long)op->footer.stored_bytes,
	      committed ? "; version COMMITTED" : "");
	if (ctx->daemon) {
		/* The daemon knows one shard per rank and version, with copies at
		 * tiers: once the DRAM image is reported, the disk copy goes by
		 * its identity (the same bytes uncompressed, the same data
		 * compressed); the local index keeps the file's own checksum. */
		int mem = op->mem_state > 0;
		r = ckpt__daemon_shard_done(ctx, op, CKPT_TIER_LOCAL_DISK, mem ? op->seg_bytes : op->file_bytes,
		                            mem ? op->mem_sum : s.footer_checksum);
		if (r < 0 && r != -ENOTCONN) /* a lost link was said once */
			LOG_W(&ctx->log, op->version, "daemon: LOCAL_DISK report failed: %s", ckpt_strerror(r));
	}
	uint64_t version = op->version;
	op_finish(ctx, op);
	if (committed && ctx->cfg.keep_versions && !ctx->daemon)
		retain(ctx, version);
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

/* Footer and tail of the segment's image: the chunk table says "stored,
 * uncompressed" at the image's own offsets whatever the disk file does. */
static int seg_finish(ckpt_save_op *op)
{
	ckpt_fmt_footer img = op->footer;
	img.chunks = malloc((op->footer.chunk_count ? op->footer.chunk_count : 1) * sizeof(*img.chunks));
	if (!img.chunks)
		return -ENOMEM;
	for (uint64_t i = 0; i < img.chunk_count; i++) {
		img.chunks[i] = op->footer.chunks[i];
		img.chunks[i].offset = op->tasks[i].img_off;
		img.chunks[i].stored_len = img.chunks[i].raw_len;
		img.chunks[i].flags = 0;
	}
	img.stored_bytes = img.data_bytes;
	size_t tl = ckpt__fmt_trailer_len(&img);
	uint8_t *p = op->seg + op->img_footer_off;
	memset(p, 0, tl);
	ckpt__fmt_trailer_encode(p, tl, &img, op->img_footer_off, op->header_checksum);
	op->mem_sum = ckpt__get_le64(p + tl - CKPT_FMT_TAIL_LEN + 32);
	free(img.chunks);
	return 0;
}

/* Every chunk is checksummed: the DRAM copy is completed and handed to the
 * agent now, before the disk is done. The disk writes may go on reading
 * the segment after that, which is safe only while the agent cannot evict
 * it: it evicts a committed version only once a newer one of the job is
 * committed, and no newer one can be without this rank's report. Hence
 * (mem_scan) a copy still to be read is reported only if it is newer than
 * every copy this context reported, and only one such copy at a time
 * (ctx->seg_reader); other reports wait for the disk writes. */
static void mem_report(ckpt_ctx *ctx, ckpt_save_op *op)
{
	int err = op->error;
	if (!err)
		err = ckpt__fault(&ctx->faults, "save.before_mem_report");
	if (!err)
		err = seg_finish(op);
	if (!err)
		err = ckpt__daemon_shard_done(ctx, op, CKPT_TIER_LOCAL_MEM, op->seg_bytes, op->mem_sum);
	op->seg = NULL;
	if (!err && (op->tiers & CKPT_TIER_PEER_MEM))
		ckpt__peer_enqueue(ctx, op);
	if (!err) {
		if (op->chunks_written < op->chunks_total)
			ctx->seg_reader = op;
		if (!ctx->mem_reported || op->version > ctx->mem_newest)
			ctx->mem_newest = op->version;
		ctx->mem_reported = 1;
	}
	pthread_mutex_lock(&op->mu);
	op->mem_state = err ? -1 : 1;
	op->mem_error = err;
	op->mem_ns = ckpt__now_ns() - op->t_start;
	pthread_cond_broadcast(&op->cond);
	pthread_mutex_unlock(&op->mu);
	if (err)
		LOG_W(&ctx->log, op->version, "LOCAL_MEM copy not reported: %s", ckpt_strerror(err));
	else
		LOG_T(&ctx->log, op->version, "LOCAL_MEM copy reported (%llu bytes, %.3f ms after the save began)",
		      (unsigned long long)op->seg_bytes, op->mem_ns / 1e6);
}

/* The disk's trailer waits for the DRAM report: both reports must name the
 * shard by the image when there is one (see op_commit). */
static void maybe_trailer(ckpt_ctx *ctx, ckpt_save_op *op)
{
	if (op->stage == OP_DATA && op->header_written && op->chunks_written == op->chunks_total && !op->seg)
		op_write_trailer(ctx, op);
}

/* io thread: whether op's DRAM copy may be reported now (see mem_report). */
static int mem_may_report(const ckpt_ctx *ctx, const ckpt_save_op *op)
{
	if (!op->seg || !op->mem_ready)
		return 0;
	if (op->error || op->chunks_written == op->chunks_total)
		return 1; /* nothing reads the segment after the report */
	return !ctx->seg_reader && (!ctx->mem_reported || op->version > ctx->mem_newest);
}

/* io thread: reports the oldest DRAM copy that is ready and may be, then
 * lets its disk path go on. */
static void mem_scan(ckpt_ctx *ctx)
{
	for (;;) {
		ckpt_save_op *op = NULL;
		pthread_mutex_lock(&ctx->lock);
		for (ckpt_save_op *l = ctx->live; l; l = l->next_live)
			if (mem_may_report(ctx, l))
				op = l; /* the list is newest first */
		pthread_mutex_unlock(&ctx->lock);
		if (!op)
			return;
		mem_report(ctx, op);
		maybe_trailer(ctx, op);
	}
}

static void on_chunk_done(ckpt_ctx *ctx, ckpt_chunk_task *t, int result)
{
	ckpt_save_op *op = t->op;
	pthread_mutex_lock(&ctx->lock);
	release_buffers(ctx, t);
	ctx->inflight--;
	pthread_cond_broadcast(&ctx->space_cv);
	if (ctx->write_head)
		pthread_cond_broadcast(&ctx->work_cv);
	pthread_mutex_unlock(&ctx->lock);
	if (result < 0)
		op_fail(op, result, -result);
	op->chunks_written++;
	if (ctx->seg_reader == op && op->chunks_written == op->chunks_total)
		ctx->seg_reader = NULL;
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
		/* A recycled file may be longer than the new shard: the rest goes
		 * now, so the length is on disk with the data's fdatasync. */
		int sys = 0;
		if (r == 0 && op->recycled && ftruncate(op->fd, (off_t)op->file_bytes) < 0) {
			sys = errno;
			r = -sys;
		}
		if (r < 0) {
			op_fail(op, r, sys);
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
	if (ti->kind == IO_CHUNK) {
		on_chunk_done(ctx, ti->io.user, ti->io.result);
	} else if (ti->kind == IO_WAKE) {
		/* What it was sent for is seen by mem_scan after this. */
		pthread_mutex_lock(&ctx->lock);
		ctx->wake_pending = 0;
		pthread_mutex_unlock(&ctx->lock);
	} else {
		on_aux_done(ctx, ti);
	}
}

/* Bytes of the agent's pool faulted in per idle turn of the io thread:
 * tens of milliseconds of work, so that a save arriving meanwhile waits
 * little for its completions. */
#define PREFAULT_STEP (128ull << 20)

static void *io_main(void *arg)
{
	ckpt_ctx *ctx = arg;
	ckpt_io *done[64];
	int filling = 0;
	for (;;) {
		int n = ctx->backend->ops->poll(ctx->backend, done, 64, filling ? 5 : 200);
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
		mem_scan(ctx);
		ckpt__preempt_poll(ctx);
		if (ctx->daemon) {
			ckpt__daemon_poll(ctx);
			ckpt__daemon_steps(ctx, 0);
			ckpt__daemon_heartbeat(ctx);
		}
		pthread_mutex_lock(&ctx->lock);
		int idle = ctx->nlive == 0 && !ctx->stopping;
		pthread_mutex_unlock(&ctx->lock);
		filling = idle && ckpt__daemon_prefault_idle(ctx, PREFAULT_STEP);
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

/* The shard file's length when no chunk compresses: header, every chunk
 * in whole blocks, footer and tail. */
static uint64_t full_file_len(const ckpt_ctx *ctx, const ckpt_save_op *op)
{
	uint64_t cb = ctx->cfg.chunk_bytes, len = CKPT_FMT_HEADER_LEN;
	for (uint32_t i = 0; i < ctx->nregions; i++) {
		uint64_t b = ctx->regions[i].bytes;
		len += b / cb * cb + CKPT_ALIGN_UP(b % cb, CKPT_ALIGN);
	}
	return len + ckpt__fmt_trailer_len(&op->footer);
}

/* Recycling on: a file of about the shard's size from the root's pool,
 * renamed to the temp name and opened for overwriting. Every byte up to
 * the new length is written before the fdatasync and the rest is cut off
 * then (op->recycled), so nothing of the old shard stays. Returns 0 with
 * op->fd open, or -ENOENT when the pool has none (a new file is made). */
static int take_recycled(ckpt_ctx *ctx, ckpt_save_op *op)
{
	int pfd = ckpt__recycle_open(ctx->root, 0);
	if (pfd < 0)
		return -ENOENT;
	uint64_t want = full_file_len(ctx, op), got = 0;
	int r = ckpt__recycle_take(pfd, want, op->dir_fd, op->tmp_name, &got);
	close(pfd);
	if (r <= 0) {
		LOG_T(&ctx->log, op->version, "recycle: no pooled file near %llu bytes%s%s", (unsigned long long)want,
		      r < 0 ? ": " : "", r < 0 ? ckpt_strerror(r) : "");
		return -ENOENT;
	}
	int flags = O_WRONLY | O_CLOEXEC | O_NOFOLLOW;
	op->fd = openat(op->dir_fd, op->tmp_name, flags | (ctx->direct_ok ? O_DIRECT : 0));
	if (op->fd < 0 && ctx->direct_ok && errno == EINVAL)
		op->fd = openat(op->dir_fd, op->tmp_name, flags);
	struct stat st;
	if (op->fd >= 0 && (fstat(op->fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1)) {
		close(op->fd);
		op->fd = -1;
	}
	if (op->fd < 0) {
		/* The pool file is in our way under the temp name: a new file
		 * replaces it (O_TRUNC). */
		LOG_W(&ctx->log, op->version, "recycle: cannot reuse the pooled file as %s; writing a new file",
		      op->tmp_path);
		return -ENOENT;
	}
	op->recycled = 1;
	LOG_T(&ctx->log, op->version, "recycle: overwriting a pooled file of %llu bytes for a shard of up to %llu",
	      (unsigned long long)got, (unsigned long long)want);
	return 0;
}

static int open_shard_file(ckpt_ctx *ctx, ckpt_save_op *op)
{
	int r;
	CKPT_TRY(ckpt__version_dir(op->dir_path, sizeof(op->dir_path), ctx->root, ctx->job, op->version));
	CKPT_TRY(ckpt__shard_path(op->final_path, sizeof(op->final_path), ctx->root, ctx->job, op->version,
	                          ctx->cfg.rank));
	snprintf(op->tmp_name, sizeof(op->tmp_name), ".r%06u.ckpt.tmp", ctx->cfg.rank);
	snprintf(op->final_name, sizeof(op->final_name), "r%06u.ckpt", ctx->cfg.rank);
	if (snprintf(op->tmp_path, sizeof(op->tmp_path), "%s/%s", op->dir_path, op->tmp_name) >=
	    (int)sizeof(op->tmp_path))
		return -ENAMETOOLONG;
	char rel[128], vname[32];
	snprintf(rel, sizeof(rel), "jobs/%s", ctx->job);
	snprintf(vname, sizeof(vname), "v%020llu", (unsigned long long)op->version);
	if ((r = op->job_fd = ckpt__dir_open_below(ctx->root, rel, 1, 0700)) >= 0 &&
	    (r = op->dir_fd = ckpt__dir_open_at(op->job_fd, vname, 1, 0700)) >= 0)
		r = 0;
	if (r == -ELOOP || r == -ENOTDIR) {
		LOG_E(&ctx->log, op->version, "cannot create %s: a symlink or a file is in the way below the root; "
		      "not followed", op->dir_path);
		return -ENOTDIR;
	}
	if (r < 0) {
		LOG_E(&ctx->log, op->version, "cannot create %s: %s", op->dir_path, ckpt_strerror(r));
		return r;
	}
	if (ctx->cfg.recycle && take_recycled(ctx, op) == 0)
		return 0;
	/* O_NOFOLLOW: a symlink at the temp name is not written through. */
	int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW;
	op->fd = openat(op->dir_fd, op->tmp_name, flags | (ctx->direct_ok ? O_DIRECT : 0), 0600);
	if (op->fd < 0 && ctx->direct_ok && errno == EINVAL)
		op->fd = openat(op->dir_fd, op->tmp_name, flags, 0600);
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
	op->dir_fd = -1;
	op->job_fd = -1;
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

/* With ctx->lock held: CKPT_POOL_SKIP's verdict on a save that needs
 * `slots` staging slots. */
static int pool_skip(ckpt_ctx *ctx, uint64_t version, uint64_t slots)
{
	if (ctx->cfg.pool_policy != CKPT_POOL_SKIP || slots == 0)
		return 0;
	if (slots > ctx->pool.nslots) {
		LOG_W(&ctx->log, version, "save skipped: %llu chunks never fit a pool of %u slots",
		      (unsigned long long)slots, ctx->pool.nslots);
		return -CKPT_ETOOBIG;
	}
	if (slots > ctx->pool.nfree) {
		LOG_I(&ctx->log, version, "save skipped: staging pool busy (%u of %u slots free, %llu needed)",
		      ctx->pool.nfree, ctx->pool.nslots, (unsigned long long)slots);
		return -CKPT_ESKIPPED;
	}
	return 0;
}

/* The shard image a LOCAL_MEM segment holds (docs/format.md): header, every
 * chunk stored uncompressed at its aligned place in table order, footer and
 * tail. Places each chunk; returns the image's length. */
static uint64_t image_layout(ckpt_ctx *ctx, ckpt_save_op *op)
{
	uint64_t cb = ctx->cfg.chunk_bytes, off = CKPT_FMT_HEADER_LEN, ci = 0;
	for (uint32_t i = 0; i < ctx->nregions; i++)
		for (uint64_t r = 0; r < ctx->regions[i].bytes; r += cb, ci++) {
			op->tasks[ci].img_off = off;
			off += CKPT_ALIGN_UP(CKPT_MIN(cb, ctx->regions[i].bytes - r), CKPT_ALIGN);
		}
	op->img_footer_off = off;
	return off + ckpt__fmt_trailer_len(&op->footer);
}

/* Undoes a save that failed before anything was queued. */
static void op_discard(ckpt_save_op *op, ckpt_handle *h)
{
	if (op->dir_fd >= 0)
		unlinkat(op->dir_fd, op->tmp_name, 0);
	op_free(op);
	free(h);
}

/* LOCAL_MEM: a segment for the whole image. Without one the save goes to
 * disk alone through the staging pool, and its handle says why. */
static void take_segment(ckpt_ctx *ctx, ckpt_save_op *op)
{
	uint64_t len = image_layout(ctx, op), t0 = ckpt__now_ns();
	int r = ckpt__daemon_segment_write(ctx, op->version, len, &op->seg);
	LOG_T(&ctx->log, op->version, "LOCAL_MEM segment request: %s in %.3f ms", r ? ckpt_strerror(r) : "granted",
	      (ckpt__now_ns() - t0) / 1e6);
	if (r == 0) {
		op->seg_bytes = len;
		/* Uncompressed, the disk file is the image itself: same offsets,
		 * same footer, written straight from the segment. */
		op->fixed_layout = !ctx->cfg.compress;
		return;
	}
	op->mem_state = -1;
	op->mem_error = r;
	if (r == -ENOSPC)
		LOG_W(&ctx->log, op->version, "LOCAL_MEM skipped: the agent's pool has no room for %llu bytes; "
		      "this save goes to local disk only", (unsigned long long)len);
	else if (r == -EEXIST)
		LOG_W(&ctx->log, op->version, "LOCAL_MEM skipped: the agent already holds a copy of this rank for "
		      "this version (an earlier attempt); this save goes to local disk only");
	else
		LOG_W(&ctx->log, op->version, "LOCAL_MEM skipped: no segment from the agent (%s); "
		      "this save goes to local disk only", ckpt_strerror(r));
}

/* Chunks of the registered regions, in all and on the device. */
static void count_chunks(ckpt_ctx *ctx, uint64_t *nchunks, uint64_t *ndev)
{
	uint64_t cb = ctx->cfg.chunk_bytes;
	*nchunks = *ndev = 0;
	for (uint32_t i = 0; i < ctx->nregions; i++) {
		uint64_t n = (ctx->regions[i].bytes + cb - 1) / cb;
		*nchunks += n;
		if (ctx->regions[i].device == CKPT_DEVICE_CUDA)
			*ndev += n;
	}
}

/* What the index says of saving version: a version already committed with
 * this rank in it is never rewritten. */
static int index_admits(ckpt_ctx *ctx, uint64_t version)
{
	ckpt_idx_shard old;
	ckpt_idx_version v;
	if (ckpt__index_get(ctx->index, ctx->job, version, &v) != 0)
		return 0;
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
	return 0;
}

static int pool_admits(ckpt_ctx *ctx, uint64_t version, uint64_t slots)
{
	pthread_mutex_lock(&ctx->lock);
	int r = pool_skip(ctx, version, slots);
	pthread_mutex_unlock(&ctx->lock);
	return r;
}

/* No save of version already in flight, and the pool policy lets it go with
 * `slots` staging slots. */
static int pipeline_admits(ckpt_ctx *ctx, uint64_t version, uint64_t slots)
{
	int r = 0;
	pthread_mutex_lock(&ctx->lock);
	for (ckpt_save_op *l = ctx->live; l; l = l->next_live)
		if (l->version == version)
			r = -EEXIST;
	if (r == 0)
		r = pool_skip(ctx, version, slots);
	pthread_mutex_unlock(&ctx->lock);
	return r;
}

/* The op, its temp file, the caller's handle (when out is wanted) and, with
 * mem, its LOCAL_MEM segment. On failure nothing is left behind. */
static int op_start(ckpt_ctx *ctx, uint64_t version, uint64_t nchunks, uint64_t ndev, int mem, int want_handle,
                    ckpt_save_op **opp, ckpt_handle **hp)
{
	int r;
	ckpt_save_op *op = op_new(ctx, version, nchunks);
	if (!op)
		return -ENOMEM;
	if ((r = open_shard_file(ctx, op)) < 0) {
		op_free(op);
		return r;
	}
	ckpt_handle *h = NULL;
	if ((r = ckpt__fault(&ctx->faults, "save.before_data")) < 0) {
		op_discard(op, h);
		return r;
	}
	if (want_handle) {
		h = calloc(1, sizeof(*h));
		if (!h) {
			op_discard(op, h);
			return -ENOMEM;
		}
		h->op = op;
	}
	if (mem) {
		take_segment(ctx, op);
		/* Without a segment every chunk is staged: check the pool again. */
		if (!op->seg && nchunks > ndev && (r = pool_admits(ctx, version, nchunks)) < 0) {
			op_discard(op, h);
			return r;
		}
	} else if (op->tiers & CKPT_TIER_LOCAL_MEM) {
		op->mem_state = -1;
		op->mem_error = ctx->mem_unavail ? ctx->mem_unavail : -ENOTCONN;
	}
	*opp = op;
	*hp = h;
	return 0;
}

/* The save point on the device: checksums taken in the trainer's stream
 * order, before anything is queued. */
static int device_save_point(ckpt_ctx *ctx, ckpt_save_op *op, int lazy)
{
	uint32_t n = ctx->ndev_regions;
	if (!n)
		return 0;
	void *ptrs[n];
	uint64_t bytes[n];
	const char *names[n];
	ckpt_dev_region *regs[n];
	ckpt__dev_regions(ctx, ptrs, bytes, names, regs);
	int r = ckpt__dev_save_point(ctx->dev, ptrs, bytes, regs, n, ctx->cfg.chunk_bytes, lazy && ctx->cfg.lazy_check);
	if (r < 0 && op->seg)
		LOG_W(&ctx->log, op->version, "save failed before its LOCAL_MEM segment was filled; the agent "
		      "frees it when this process leaves");
	return r;
}

/* Makes the op live: its header encoded (and copied into the segment's
 * image), the op on the live list, the header's write submitted. */
static void op_go_live(ckpt_ctx *ctx, ckpt_save_op *op, uint64_t t0)
{
	op->t_start = t0;
	op->created_ns = ckpt__wall_ns();
	op->next_off = op->fixed_layout ? op->img_footer_off : CKPT_FMT_HEADER_LEN;
	op->lineage = ctx->lineage;
	ckpt_fmt_header hd = {
		.version = op->version, .rank = ctx->cfg.rank, .world_size = ctx->cfg.world_size,
		.created_ns = op->created_ns, .lineage = ctx->lineage,
	};
	snprintf(hd.job, sizeof(hd.job), "%s", ctx->job);
	op->header_checksum = ckpt__fmt_header_encode(op->header_buf, &hd);
	if (op->seg)
		memcpy(op->seg, op->header_buf, CKPT_FMT_HEADER_LEN);

	pthread_mutex_lock(&ctx->lock);
	op->next_live = ctx->live;
	ctx->live = op;
	ctx->nlive++;
	pthread_mutex_unlock(&ctx->lock);
	submit_aux(ctx, op, IO_HEADER, CKPT_IO_WRITE, op->header_buf, CKPT_FMT_HEADER_LEN, 0);
}

/* Copies one chunk (bytes [off, off+len) of region rg) into its segment
 * place or a staging slot, and queues it for the workers. */
static void snapshot_chunk(ckpt_ctx *ctx, ckpt_save_op *op, uint8_t *seg, const ckpt_region *rg, uint64_t off,
                           uint32_t len, uint64_t ci, unsigned elem)
{
	size_t padded = CKPT_ALIGN_UP(len, CKPT_ALIGN);
	int dev = rg->device == CKPT_DEVICE_CUDA;
	ckpt_chunk_task *t = &op->tasks[ci];
	int slot = -1;
	uint8_t *dst;
	if (seg) {
		/* Padding is part of the image, and of the disk write. */
		t->mem = seg + t->img_off;
		if (padded > len)
			memset(t->mem + len, 0, padded - len);
	}
	if (!seg || dev) {
		slot = ckpt__slot_take(ctx);
		dst = ckpt__pool_slot(&ctx->pool, slot);
		if (padded > len)
			memset(dst + len, 0, padded - len);
	} else {
		dst = t->mem;
	}
	t->dev = dev;
	if (dev) {
		int r = ckpt__dev_copy_chunk(ctx->dev, slot, dst, (const uint8_t *)rg->ptr + off, len, &rg->dev,
		                             (uint32_t)(off / ctx->cfg.chunk_bytes));
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

/* The snapshot: the only part the caller waits for. The io thread takes
 * op->seg back once every chunk is checksummed, so the segment is read once
 * here, before anything is queued. */
static void snapshot(ckpt_ctx *ctx, ckpt_save_op *op, uint8_t *seg)
{
	uint64_t cb = ctx->cfg.chunk_bytes, ci = 0;
	if (!ctx->overlap) {
		pthread_mutex_lock(&ctx->lock);
		ctx->hold_work = 1;
		pthread_mutex_unlock(&ctx->lock);
	}
	for (uint32_t i = 0; i < ctx->nregions; i++) {
		const ckpt_region *rg = &ctx->regions[i];
		unsigned elem = shuffle_elem(rg->dtype);
		for (uint64_t off = 0; off < rg->bytes; off += cb, ci++)
			snapshot_chunk(ctx, op, seg, rg, off, (uint32_t)CKPT_MIN(cb, rg->bytes - off), ci, elem);
	}
	pthread_mutex_lock(&ctx->lock);
	ctx->hold_work = 0;
	if (seg && op->chunks_total == 0) {
		op->mem_ready = 1; /* nothing to checksum */
		wake_io_locked(ctx);
	}
	pthread_cond_broadcast(&ctx->work_cv);
	pthread_mutex_unlock(&ctx->lock);
}

/* The snapshot's stall, for the handle and the step report (goodput). */
static void snapshot_account(ckpt_ctx *ctx, ckpt_save_op *op, uint64_t t0, uint64_t t_copy, int in_seg)
{
	uint64_t t1 = ckpt__now_ns(), stall = t1 - t0;
	pthread_mutex_lock(&op->mu);
	op->stall_ns = stall;
	pthread_mutex_unlock(&op->mu);
	pthread_mutex_lock(&ctx->step_mu);
	ctx->step_stall_ns += stall;
	ctx->step_saves++;
	pthread_mutex_unlock(&ctx->step_mu);
	LOG_T(&ctx->log, op->version, "snapshot taken: %llu bytes in %.3f ms, %.3f ms of it copying%s",
	      (unsigned long long)op->footer.data_bytes, stall / 1e6, (t1 - t_copy) / 1e6,
	      in_seg ? " (into the LOCAL_MEM segment)" : "");
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
	uint64_t nchunks, ndev;
	count_chunks(ctx, &nchunks, &ndev);
	if (nchunks > UINT32_MAX)
		return -CKPT_ETOOBIG;
	int r;
	if ((r = index_admits(ctx, version)) < 0)
		return r;
	/* Into a segment, only device chunks take staging slots (they cross
	 * through pinned memory); the rest is checked again if no segment comes. */
	int mem = ctx->mem_tier && ckpt__daemon_segments(ctx);
	if ((r = pipeline_admits(ctx, version, mem ? ndev : nchunks)) < 0)
		return r;

	ckpt_save_op *op;
	ckpt_handle *h;
	if ((r = op_start(ctx, version, nchunks, ndev, mem, out != NULL, &op, &h)) < 0)
		return r;
	if ((r = device_save_point(ctx, op, lazy)) < 0) {
		op_discard(op, h);
		return r;
	}
	op->refs = h ? 3 : 2; /* pipeline, handle, and this call until the snapshot ends */
	uint8_t *seg = op->seg;
	op_go_live(ctx, op, t0);

	uint64_t t_copy = ckpt__now_ns();
	snapshot(ctx, op, seg);
	/* Eager: the caller may change its state once we return, so the device
	 * copies must be done. Lazy: ckpt_fence waits for them. */
	if (ctx->ndev_regions && (r = ckpt__dev_save_end(ctx->dev, !lazy)) < 0)
		op_fail(op, r, 0);
	snapshot_account(ctx, op, t0, t_copy, seg != NULL);
	ckpt__op_release(op);
	if (out)
		*out = h;
	return 0;
}
