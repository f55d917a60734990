/* The persist pipeline behind a save: workers (checksum, compression, file
 * space, writes) and the io thread (completions, trailer, fdatasync, rename,
 * the index commit, the DRAM report). The snapshot that feeds it: save.c.
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
#include "pipeline.h"
#include "format/admin.h"
#include "format/recycle.h"
#include "base/dirs.h"
#include "daemon.h"
#include "peer.h"
#include "preempt.h"
#include "ckpt_kernels.h"
#include "format/seal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>



/* ------------------------------------------------------------- op refs */

void ckpt__op_free(ckpt_save_op *op)
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
		ckpt__op_free(op);
}

/* ------------------------------------------------------------- helpers */

void ckpt__op_fail(ckpt_save_op *op, int err, int sys_errno)
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
void ckpt__wake_io_locked(ckpt_ctx *ctx)
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
		ckpt__op_fail(op, derr, 0);
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
	/* A chunk of a DRAM image gets its seal in the same pass, from the
	 * same bytes: the DRAM restore checks that instead (format/seal.h). */
	if (t->mem)
		c->checksum = ckpt_kern_checksum_sealed(raw, t->raw_len, &t->seal);
	else
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
		ckpt__op_fail(op, -CKPT_ECONTRACT, 0);
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
			ckpt__wake_io_locked(ctx);
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

void ckpt__submit_aux(ckpt_ctx *ctx, ckpt_save_op *op, int kind, int iop, void *buf, uint32_t len,
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
		ckpt__op_fail(op, r, 0);
		op_finish(ctx, op);
		return;
	}
	ckpt_fmt_footer *f = &op->footer;
	f->stored_bytes = 0;
	for (uint64_t i = 0; i < f->chunk_count; i++)
		f->stored_bytes += f->chunks[i].stored_len;
	op->trailer_len = ckpt__fmt_trailer_len(f);
	if (posix_memalign((void **)&op->trailer_buf, CKPT_ALIGN, op->trailer_len)) {
		ckpt__op_fail(op, -ENOMEM, ENOMEM);
		op_finish(ctx, op);
		return;
	}
	memset(op->trailer_buf, 0, op->trailer_len);
	ckpt__fmt_trailer_encode(op->trailer_buf, op->trailer_len, f, op->next_off, op->header_checksum);
	op->file_bytes = op->next_off + op->trailer_len;
	op->stage = OP_TRAILER;
	ckpt__submit_aux(ctx, op, IO_TRAILER, CKPT_IO_WRITE, op->trailer_buf, (uint32_t)op->trailer_len,
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
	ckpt__op_fail(op, r, r > -CKPT_ERRNO_OFFSET ? -r : 0);
	op_finish(ctx, op);
	return;
fail:
	ckpt__op_fail(op, r, r > -CKPT_ERRNO_OFFSET ? -r : 0);
	op_finish(ctx, op);
}

/* Footer, seal table and tail of the segment's image: the chunk table
 * says "stored, uncompressed" at the image's own offsets whatever the disk
 * file does. */
static int seg_finish(ckpt_save_op *op)
{
	ckpt_fmt_footer img = op->footer;
	uint64_t n = op->footer.chunk_count ? op->footer.chunk_count : 1;
	img.chunks = malloc(n * sizeof(*img.chunks));
	uint64_t *seals = malloc(n * sizeof(*seals));
	if (!img.chunks || !seals) {
		free(img.chunks);
		free(seals);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < img.chunk_count; i++) {
		img.chunks[i] = op->footer.chunks[i];
		img.chunks[i].offset = op->tasks[i].img_off;
		img.chunks[i].stored_len = img.chunks[i].raw_len;
		img.chunks[i].flags = 0;
		seals[i] = op->tasks[i].seal;
	}
	img.stored_bytes = img.data_bytes;
	size_t tl = ckpt__seal_trailer_len(&img);
	uint8_t *p = op->seg + op->img_footer_off;
	memset(p, 0, tl);
	ckpt__fmt_trailer_encode(p, tl, &img, op->img_footer_off, op->header_checksum);
	ckpt__seal_encode(p, tl, &img, seals);
	op->mem_sum = ckpt__get_le64(p + tl - CKPT_FMT_TAIL_LEN + 32);
	free(img.chunks);
	free(seals);
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
		ckpt__op_fail(op, result, -result);
	op->chunks_written++;
	if (ctx->seg_reader == op && op->chunks_written == op->chunks_total)
		ctx->seg_reader = NULL;
	if (op->chunks_written == op->chunks_total / 2 + 1) {
		int r = ckpt__fault(&ctx->faults, "save.mid_data");
		if (r < 0)
			ckpt__op_fail(op, r, 0);
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
			ckpt__op_fail(op, result, -result);
		op->header_written = 1;
		if (!op->error) {
			/* The PENDING record is made here, off the caller's stall. */
			int r = ckpt__index_begin(ctx->index, ctx->job, op->version, ctx->cfg.world_size,
			                          ctx->cfg.rank, op->created_ns, op->lineage);
			if (r < 0)
				ckpt__op_fail(op, r, 0);
		}
		maybe_trailer(ctx, op);
		break;
	case IO_TRAILER: {
		if (result < 0) {
			ckpt__op_fail(op, result, -result);
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
			ckpt__op_fail(op, r, sys);
			op_finish(ctx, op);
			break;
		}
		op->stage = OP_SYNC;
		ckpt__submit_aux(ctx, op, IO_SYNC, CKPT_IO_FDATASYNC, NULL, 0, 0);
		break;
	}
	case IO_SYNC:
		if (result < 0) {
			ckpt__op_fail(op, result, -result);
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
		if (idle && ctx->daemon)
			ckpt__daemon_warm(ctx);
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
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned gang = ctx->cfg.snapshot_threads ? ctx->cfg.snapshot_threads
	                                          : (unsigned)CKPT_MAX(1L, CKPT_MIN(ncpu, 4L));
	int pr = ckpt__pcopy_start(&ctx->pcopy, gang);
	if (pr < 0)
		return pr;
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
	ckpt__pcopy_stop(ctx->pcopy);
	ctx->pcopy = NULL;
	if (ctx->io_started) {
		ctx->backend->ops->submit(ctx->backend, &ctx->wake_io.io);
		pthread_join(ctx->io_thread, NULL);
		ctx->io_started = 0;
	}
}
