/* ckpt_save: admission (index, pool, pipeline), the shard file (new or
 * recycled), and the snapshot, the only part the caller waits for: regions
 * copied chunk by chunk into staging slots, or with LOCAL_MEM into a
 * segment of the ckptd agent's pool, then queued for the persist pipeline
 * (pipeline.c, whose comment has the whole path and its ordering rules). */
#include "pipeline.h"
#include "format/admin.h"
#include "format/recycle.h"
#include "format/seal.h"
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
		ckpt__op_free(op);
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
 * chunk stored uncompressed at its aligned place in table order, footer,
 * seal table and tail. Places each chunk; returns the image's length. */
static uint64_t image_layout(ckpt_ctx *ctx, ckpt_save_op *op)
{
	uint64_t cb = ctx->cfg.chunk_bytes, off = CKPT_FMT_HEADER_LEN, ci = 0;
	for (uint32_t i = 0; i < ctx->nregions; i++)
		for (uint64_t r = 0; r < ctx->regions[i].bytes; r += cb, ci++) {
			op->tasks[ci].img_off = off;
			off += CKPT_ALIGN_UP(CKPT_MIN(cb, ctx->regions[i].bytes - r), CKPT_ALIGN);
		}
	op->img_footer_off = off;
	return off + ckpt__seal_trailer_len(&op->footer);
}

/* Undoes a save that failed before anything was queued. */
static void op_discard(ckpt_save_op *op, ckpt_handle *h)
{
	if (op->dir_fd >= 0)
		unlinkat(op->dir_fd, op->tmp_name, 0);
	ckpt__op_free(op);
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

/* Chunks of the registered regions, in all, on the device, and read from
 * files (file regions stream through the pool by design). */
static void count_chunks(ckpt_ctx *ctx, uint64_t *nchunks, uint64_t *ndev, uint64_t *nfile)
{
	uint64_t cb = ctx->cfg.chunk_bytes;
	*nchunks = *ndev = *nfile = 0;
	for (uint32_t i = 0; i < ctx->nregions; i++) {
		uint64_t n = (ctx->regions[i].bytes + cb - 1) / cb;
		*nchunks += n;
		if (ctx->regions[i].device == CKPT_DEVICE_CUDA)
			*ndev += n;
		if (ctx->regions[i].fd >= 0)
			*nfile += n;
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
		ckpt__op_free(op);
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
	ckpt__submit_aux(ctx, op, IO_HEADER, CKPT_IO_WRITE, op->header_buf, CKPT_FMT_HEADER_LEN, 0);
}

/* A file region's file as the save found it before its first read
 * (when = 0) or after its last (1): shorter than the region, or changed
 * since, fails the save. Returns 0 or -CKPT_ECHANGED (logged). */
static int file_check(ckpt_ctx *ctx, ckpt_save_op *op, ckpt_region *rg, int when)
{
	struct stat st;
	const char *why = NULL;
	char b[128];
	if (fstat(rg->fd, &st) < 0) {
		snprintf(b, sizeof(b), "%s", strerror(errno));
		why = b;
	} else if ((uint64_t)st.st_size < rg->fd_off + rg->bytes) {
		snprintf(b, sizeof(b), "the file is %lld bytes, shorter than the %llu it was registered with (it shrank)",
		         (long long)st.st_size, (unsigned long long)(rg->fd_off + rg->bytes));
		why = b;
	} else if (when && (st.st_size != rg->fd_st.st_size || st.st_mtim.tv_sec != rg->fd_st.st_mtim.tv_sec ||
	                    st.st_mtim.tv_nsec != rg->fd_st.st_mtim.tv_nsec)) {
		why = "the file changed while the save read it";
	}
	if (!why) {
		if (!when)
			rg->fd_st = st;
		return 0;
	}
	LOG_E(&ctx->log, op->version, "save: region '%s': %s; nothing of this version is committed", rg->name, why);
	ckpt__op_fail(op, -CKPT_ECHANGED, 0);
	return -CKPT_ECHANGED;
}


/* Copies one chunk (bytes [off, off+len) of region rg) into its segment
 * place or a staging slot, and queues it for the workers. A file region's
 * chunk is read from its file instead (*bad: the file failed a check or a
 * read; its chunks are queued unread, the save having failed). */
static void snapshot_chunk(ckpt_ctx *ctx, ckpt_save_op *op, uint8_t *seg, const ckpt_region *rg, uint64_t off,
                           uint32_t len, uint64_t ci, unsigned elem, int *bad)
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
			ckpt__op_fail(op, r, 0);
			t->dev = 0; /* nothing to wait for; the save fails */
		}
	} else if (rg->fd >= 0) {
		int r = *bad ? 0 : ckpt__fault(&ctx->faults, "save.file_read");
		if (r == 0 && !*bad)
			r = ckpt__pread_full(rg->fd, dst, len, rg->fd_off + off);
		if (r < 0) {
			LOG_E(&ctx->log, op->version, "save: region '%s': reading %u bytes at %llu of its file: %s", rg->name,
			      len, (unsigned long long)(rg->fd_off + off),
			      r == -EIO ? "end of file (it shrank)" : ckpt_strerror(r));
			ckpt__op_fail(op, r == -EIO ? -CKPT_ECHANGED : r, r == -EIO ? 0 : -r);
			*bad = 1;
		}
	} else {
		/* Streaming stores: the slot is read next by the checksum threads
		 * and the disk, not from this core's cache, and plain stores into a
		 * snapshot far larger than the caches first read every line. */
		ckpt__pcopy_with(ctx->pcopy, dst, (const uint8_t *)rg->ptr + off, len, ckpt_kern_copy_stream);
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
		ckpt_region *rg = &ctx->regions[i];
		unsigned elem = shuffle_elem(rg->dtype);
		int bad = rg->fd >= 0 && file_check(ctx, op, rg, 0) < 0;
		for (uint64_t off = 0; off < rg->bytes; off += cb, ci++)
			snapshot_chunk(ctx, op, seg, rg, off, (uint32_t)CKPT_MIN(cb, rg->bytes - off), ci, elem, &bad);
		if (rg->fd >= 0 && !bad)
			file_check(ctx, op, rg, 1);
	}
	pthread_mutex_lock(&ctx->lock);
	ctx->hold_work = 0;
	if (seg && op->chunks_total == 0) {
		op->mem_ready = 1; /* nothing to checksum */
		ckpt__wake_io_locked(ctx);
	}
	pthread_cond_broadcast(&ctx->work_cv);
	pthread_mutex_unlock(&ctx->lock);
}

/* The snapshot's stall, for the handle and the step report (goodput). */
static void snapshot_account(ckpt_ctx *ctx, ckpt_save_op *op, uint64_t t0, uint64_t t_copy, int in_seg,
                             unsigned long long helped0)
{
	uint64_t t1 = ckpt__now_ns(), stall = t1 - t0;
	unsigned long long helped = ckpt__pcopy_helped(ctx->pcopy) - helped0;
	pthread_mutex_lock(&op->mu);
	op->stall_ns = stall;
	pthread_mutex_unlock(&op->mu);
	pthread_mutex_lock(&ctx->step_mu);
	ctx->step_stall_ns += stall;
	ctx->step_saves++;
	pthread_mutex_unlock(&ctx->step_mu);
	LOG_T(&ctx->log, op->version, "snapshot taken: %llu bytes in %.3f ms, %.3f ms of it copying (%llu MiB by the "
	      "copy gang's other threads)%s", (unsigned long long)op->footer.data_bytes, stall / 1e6, (t1 - t_copy) / 1e6,
	      helped, in_seg ? " (into the LOCAL_MEM segment)" : "");
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
	uint64_t nchunks, ndev, nfile;
	count_chunks(ctx, &nchunks, &ndev, &nfile);
	if (nchunks > UINT32_MAX)
		return -CKPT_ETOOBIG;
	int r;
	if ((r = index_admits(ctx, version)) < 0)
		return r;
	/* Into a segment, only device chunks take staging slots (they cross
	 * through pinned memory); the rest is checked again if no segment comes. */
	int mem = ctx->mem_tier && ckpt__daemon_segments(ctx);
	/* The pool is sized for (and a save larger than it is warned of) the
	 * memory regions only: a file region's chunks are read from its file
	 * into whatever slots are free, its memory bounded by the pool. */
	if ((r = ckpt__staging_fit(ctx, version, mem ? ndev : nchunks - nfile)) < 0 ||
	    (r = pipeline_admits(ctx, version, mem ? ndev : nchunks)) < 0)
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
	unsigned long long helped0 = ckpt__pcopy_helped(ctx->pcopy);
	snapshot(ctx, op, seg);
	/* Eager: the caller may change its state once we return, so the device
	 * copies must be done. Lazy: ckpt_fence waits for them. */
	if (ctx->ndev_regions && (r = ckpt__dev_save_end(ctx->dev, !lazy)) < 0)
		ckpt__op_fail(op, r, 0);
	snapshot_account(ctx, op, t0, t_copy, seg != NULL, helped0);
	ckpt__op_release(op);
	if (out)
		*out = h;
	return 0;
}
