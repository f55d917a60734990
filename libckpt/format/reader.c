#include "reader.h"
#include "global.h"
#include "ckpt_kernels.h"
#include "backend.h"
#include "base/pcopy.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ------------------------------------------------------------- one chunk */

/* Sets o->why to "version V rank R region 'N' chunk K: " and the rest. */
static void chunk_why(const ckpt_read_opts *o, const ckpt_shard *s, const char *region, uint64_t k, const char *fmt,
                      ...) __attribute__((format(printf, 5, 6)));
static void chunk_why(const ckpt_read_opts *o, const ckpt_shard *s, const char *region, uint64_t k, const char *fmt,
                      ...)
{
	if (!o->why || !o->whycap)
		return;
	int n = snprintf(o->why, o->whycap, "version %llu rank %u region '%s' chunk %llu: ",
	                 (unsigned long long)s->header.version, s->header.rank, region, (unsigned long long)k);
	if (n < 0 || (size_t)n >= o->whycap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o->why + n, o->whycap - (size_t)n, fmt, ap);
	va_end(ap);
}

/* Chunk ci's stored bytes, decompressed if need be and checked against its
 * checksum (ckpt__chunk_verify), to the sink. */
static int chunk_deliver(ckpt_chunk_scratch *cs, const ckpt_shard *s, const ckpt_read_opts *o, uint64_t ci,
                         const uint8_t *stored, ckpt_sink_fn sink, void *arg)
{
	const ckpt_fmt_footer *f = &s->footer;
	const ckpt_fmt_chunk *c = &f->chunks[ci];
	const ckpt_fmt_region *r = &f->regions[c->region];
	const uint8_t *raw;
	char why[320] = "";
	int err = ckpt__chunk_verify(f, ci, stored, cs, &raw, why, sizeof(why));
	if (err < 0) {
		if (why[0] && o->why && o->whycap) /* it names the region and chunk */
			snprintf(o->why, o->whycap, "version %llu rank %u %s", (unsigned long long)s->header.version,
			         s->header.rank, why);
		return err;
	}
	return sink(arg, c->region, (ci - r->chunk_first) * f->chunk_bytes, raw, c->raw_len);
}

/* ------------------------------------------------------------- from a file */

/* Parts of a chunk's check handed to the gang's threads (whole leaves),
 * and the smallest chunk worth sharing out (a wake-up costs tens of
 * microseconds on a virtual machine; a 1 MiB part takes a few hundred). */
#define RD_GANG_PART ((size_t)16 * CKPT_CSUM_LEAF)
#define RD_GANG_MIN (2 * RD_GANG_PART)

/* One read in flight: into a buffer of the free list (buf_ix >= 0), or
 * straight into the chunk's place in the caller's memory (buf_ix -1). */
typedef struct rd_slot {
	ckpt_io io;
	uint64_t chunk;
	uint8_t *dst;
	int buf_ix;
} rd_slot;

/* A read in progress: its slots, its buffers (a free list), the file and
 * the backend reading it, and where the time went. */
typedef struct rd_file {
	const ckpt_shard *s;
	const ckpt_read_opts *o;
	rd_slot *slots;
	uint32_t depth, *free_slot, nfree_slot, inflight;
	uint8_t **bufs;
	uint32_t nbufs, *free_buf, nfree_buf;
	int own_bufs;
	int fd;
	ckpt_backend *be;
	ckpt_chunk_scratch cs;
	uint64_t wait_ns, check_ns, direct_chunks, copied_chunks, chunks;
	size_t mem_align; /* what a place's address must be a multiple of */
	uint64_t *leaf_h; /* with a gang: a chunk's leaf hashes */
} rd_file;

/* The memory alignment O_DIRECT reads of fd need: the file system's
 * answer (NVMe: often 4 bytes, so a tensor allocator's 64-byte alignment
 * reads in place), else a block. */
static size_t dio_mem_align(int fd)
{
#ifdef STATX_DIOALIGN
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
	    sx.stx_dio_mem_align && sx.stx_dio_mem_align <= CKPT_ALIGN &&
	    !(sx.stx_dio_mem_align & (sx.stx_dio_mem_align - 1)))
		return sx.stx_dio_mem_align;
#else
	(void)fd;
#endif
	return CKPT_ALIGN;
}

static int rd_open(rd_file *rd, const char *path)
{
	const ckpt_read_opts *o = rd->o;
	size_t need = CKPT_ALIGN_UP(rd->s->footer.chunk_bytes, CKPT_ALIGN);
	rd->depth = o->depth ? o->depth : 8;
	rd->fd = -1;
	rd->own_bufs = !o->bufs || o->nbufs == 0 || o->buf_bytes < need;
	/* One buffer more than reads in flight: the disk keeps the full depth
	 * while a completed chunk is being checked. */
	rd->nbufs = rd->own_bufs ? rd->depth + 1 : o->nbufs;
	rd->slots = calloc(rd->depth, sizeof(*rd->slots));
	rd->free_slot = calloc(rd->depth, sizeof(uint32_t));
	rd->bufs = calloc(rd->nbufs, sizeof(uint8_t *));
	rd->free_buf = calloc(rd->nbufs, sizeof(uint32_t));
	if (o->gang)
		rd->leaf_h = malloc((rd->s->footer.chunk_bytes / CKPT_CSUM_LEAF + 1) * sizeof(uint64_t));
	if (!rd->slots || !rd->free_slot || !rd->bufs || !rd->free_buf || (o->gang && !rd->leaf_h))
		return -ENOMEM;
	for (uint32_t i = 0; i < rd->depth; i++)
		rd->free_slot[i] = i;
	rd->nfree_slot = rd->depth;
	for (uint32_t i = 0; i < rd->nbufs; i++) {
		if (!rd->own_bufs)
			rd->bufs[i] = o->bufs[i];
		else if (posix_memalign((void **)&rd->bufs[i], CKPT_ALIGN, need))
			return -ENOMEM;
		rd->free_buf[i] = i;
	}
	rd->nfree_buf = rd->nbufs;
	/* As ckpt__shard_open: a regular file, not through a symlink, and an
	 * open that cannot block (a FIFO put at the name meanwhile). */
	int fl = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
	rd->mem_align = CKPT_ALIGN;
	if (o->direct && (rd->fd = open(path, fl | O_DIRECT)) >= 0)
		rd->mem_align = dio_mem_align(rd->fd);
	if (rd->fd < 0 && (rd->fd = open(path, fl)) >= 0)
		rd->mem_align = 1; /* through the page cache: any address */
	if (rd->fd < 0) {
		int err = -errno;
		snprintf(o->why, o->whycap, "cannot open %s: %s", path, strerror(errno));
		return err;
	}
	struct stat st;
	if (fstat(rd->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(o->why, o->whycap, "%s is not a regular file", path);
		return -CKPT_ECORRUPT;
	}
	ckpt_backend_params bp = { sizeof(bp), rd->depth + 2 };
	int fell_back, uerr;
	return ckpt_backend_open(o->backend, &bp, &rd->be, &fell_back, &uerr);
}

/* Waits for the reads in flight (after an error), then frees everything. */
static void rd_close(rd_file *rd)
{
	while (rd->be && rd->inflight) {
		ckpt_io *cq[32];
		int n = rd->be->ops->poll(rd->be, cq, 32, -1);
		if (n < 0)
			break;
		rd->inflight -= (uint32_t)n;
	}
	if (rd->be)
		rd->be->ops->close(rd->be);
	if (rd->fd >= 0)
		close(rd->fd);
	for (uint32_t i = 0; rd->own_bufs && rd->bufs && i < rd->nbufs; i++)
		free(rd->bufs[i]);
	free(rd->bufs);
	free(rd->free_buf);
	free(rd->slots);
	free(rd->free_slot);
	free(rd->leaf_h);
	ckpt__chunk_scratch_free(&rd->cs);
}

/* A chunk's check (and copy) shared out over the gang, in parts of whole
 * leaves. */
typedef struct rd_sum_job {
	uint8_t *dst;
	const uint8_t *src;
	uint64_t *leaf_h;
} rd_sum_job;

static void rd_sum_part(void *arg, size_t off, size_t n)
{
	const rd_sum_job *j = arg;
	ckpt_kern_checksum_leaves(j->dst ? j->dst + off : NULL, j->src + off, n, j->leaf_h + off / CKPT_CSUM_LEAF);
}

/* The checksum of the len bytes at src, copied to dst first when dst is
 * given: on the gang's threads when there is one and the chunk is worth
 * sharing, else on this one. */
static uint64_t rd_sum(rd_file *rd, uint8_t *dst, const uint8_t *src, size_t len)
{
	if (!rd->o->gang || !rd->leaf_h || len < RD_GANG_MIN)
		return dst ? ckpt_kern_checksum_copy(dst, src, len) : ckpt_kern_checksum(src, len);
	rd_sum_job j = { dst, src, rd->leaf_h };
	ckpt__pcopy_each(rd->o->gang, len, RD_GANG_PART, rd_sum_part, &j);
	return ckpt_kern_checksum_fold(rd->leaf_h, len);
}

/* Where chunk c may be read straight to: an uncompressed chunk whose raw
 * length is whole blocks, at a place the caller offers that O_DIRECT can
 * read into (rd->mem_align). */
static uint8_t *rd_place(rd_file *rd, const ckpt_fmt_chunk *c, uint64_t k)
{
	const ckpt_read_opts *o = rd->o;
	if (!o->place || (c->flags & CKPT_CHUNK_ZSTD) || c->raw_len % CKPT_ALIGN)
		return NULL;
	uint8_t *p = o->place(o->place_arg, c->region, k * rd->s->footer.chunk_bytes, c->raw_len);
	return p && (uintptr_t)p % rd->mem_align == 0 ? p : NULL;
}

/* Where an uncompressed chunk read into a buffer may be copied to (any
 * alignment); NULL: through the sink. */
static uint8_t *rd_copy_place(rd_file *rd, const ckpt_fmt_chunk *c)
{
	const ckpt_read_opts *o = rd->o;
	if (!o->place || (c->flags & CKPT_CHUNK_ZSTD))
		return NULL;
	uint64_t k = (uint64_t)(c - rd->s->footer.chunks) - rd->s->footer.regions[c->region].chunk_first;
	return o->place(o->place_arg, c->region, k * rd->s->footer.chunk_bytes, c->raw_len);
}

/* Submits reads of the chunks from *next on while a slot (and, for a
 * chunk that cannot be read in place, a buffer) is free; chunks of
 * unwanted regions are skipped (and counted done) here. */
static int rd_submit(rd_file *rd, uint64_t *next, uint64_t *done)
{
	const ckpt_fmt_footer *f = &rd->s->footer;
	while (rd->nfree_slot && *next < f->chunk_count) {
		const ckpt_fmt_chunk *c = &f->chunks[*next];
		if (rd->o->want && !rd->o->want[c->region]) {
			(*next)++;
			(*done)++;
			continue;
		}
		uint8_t *dst = rd_place(rd, c, *next - f->regions[c->region].chunk_first);
		if (!dst && !rd->nfree_buf)
			break;
		rd_slot *sl = &rd->slots[rd->free_slot[--rd->nfree_slot]];
		memset(&sl->io, 0, sizeof(sl->io));
		sl->dst = dst;
		sl->buf_ix = -1;
		if (!dst) {
			sl->buf_ix = (int)rd->free_buf[--rd->nfree_buf];
			sl->dst = rd->bufs[sl->buf_ix];
		}
		sl->chunk = (*next)++;
		sl->io.op = CKPT_IO_READ;
		sl->io.fd = rd->fd;
		sl->io.buf = sl->dst;
		sl->io.len = (uint32_t)CKPT_ALIGN_UP(c->stored_len, CKPT_ALIGN);
		sl->io.off = c->offset;
		sl->io.user = sl;
		int err = rd->be->ops->submit(rd->be, &sl->io);
		if (err < 0)
			return err;
		rd->inflight++;
	}
	return 0;
}

/* A completed read: its chunk checked (in place, or from its buffer on to
 * the sink) unless an error already stopped the read; then its buffer goes
 * back on the free list. */
static int rd_complete(rd_file *rd, const rd_slot *sl, int err, ckpt_sink_fn sink, void *arg)
{
	const ckpt_fmt_footer *f = &rd->s->footer;
	const ckpt_fmt_chunk *c = &f->chunks[sl->chunk];
	const ckpt_fmt_region *r = &f->regions[c->region];
	uint64_t t0 = ckpt__now_ns();
	uint8_t *place;
	if (err) {
	} else if (sl->io.result < 0) {
		chunk_why(rd->o, rd->s, r->name, sl->chunk - r->chunk_first, "read error: %s", strerror(-sl->io.result));
		err = sl->io.result;
	} else if (sl->buf_ix < 0 || (place = rd_copy_place(rd, c))) {
		/* Read in place: checked where it landed. Read into a buffer
		 * because its place is not block-aligned (a tensor allocator's
		 * 64-byte alignment): copied there with the checksum taken on the
		 * way, one pass instead of a checksum pass and a copy. On a
		 * mismatch the bytes stay there; the caller's read has failed. */
		uint64_t sum;
		if (sl->buf_ix < 0) {
			sum = rd_sum(rd, NULL, sl->dst, c->raw_len);
			rd->direct_chunks++;
		} else {
			sum = rd_sum(rd, place, sl->dst, c->raw_len);
			rd->copied_chunks++;
		}
		if (sum != c->checksum) {
			chunk_why(rd->o, rd->s, r->name, sl->chunk - r->chunk_first,
			          "checksum mismatch (stored %016llx, computed %016llx)", (unsigned long long)c->checksum,
			          (unsigned long long)sum);
			err = -CKPT_ECORRUPT;
		}
	} else {
		err = chunk_deliver(&rd->cs, rd->s, rd->o, sl->chunk, sl->dst, sink, arg);
	}
	rd->chunks++;
	rd->check_ns += ckpt__now_ns() - t0;
	if (sl->buf_ix >= 0)
		rd->free_buf[rd->nfree_buf++] = (uint32_t)sl->buf_ix;
	return err;
}

int ckpt__shard_read(const char *path, const ckpt_shard *s, const ckpt_read_opts *o,
                     ckpt_sink_fn sink, void *arg)
{
	rd_file rd = { .s = s, .o = o };
	uint64_t t_start = ckpt__now_ns();
	int err = rd_open(&rd, path);
	uint64_t next = 0, done = 0, total = s->footer.chunk_count;
	while (err == 0 && (done < total || rd.inflight)) {
		if ((err = rd_submit(&rd, &next, &done)) < 0 || !rd.inflight)
			break;
		ckpt_io *cq[32];
		uint64_t t0 = ckpt__now_ns();
		int n = rd.be->ops->poll(rd.be, cq, 32, -1);
		rd.wait_ns += ckpt__now_ns() - t0;
		if (n < 0) {
			err = n;
			break;
		}
		/* The slots go back first (copied out: the next reads reuse
		 * them) and their successors are submitted before any chunk is
		 * checked, so the disk is not left idle while the CPU works.
		 * A chunk read into a buffer frees it only once copied to its
		 * place, so the reads that waited for a buffer are submitted
		 * after each chunk, not after the whole batch. */
		rd_slot got[32];
		for (int i = 0; i < n; i++) {
			rd_slot *sl = cq[i]->user;
			got[i] = *sl;
			rd.inflight--;
			rd.free_slot[rd.nfree_slot++] = (uint32_t)(sl - rd.slots);
		}
		if (err == 0)
			err = rd_submit(&rd, &next, &done);
		for (int i = 0; i < n; i++) {
			err = rd_complete(&rd, &got[i], err, sink, arg);
			done++;
			if (err == 0 && got[i].buf_ix >= 0)
				err = rd_submit(&rd, &next, &done);
		}
	}
	rd_close(&rd);
	LOG_T(o->lg, s->header.version, "read %s: %llu chunks (%llu in place, %llu copied to their place) in %.3f ms: "
	      "waiting for the disk %.3f ms, checking and copying %.3f ms, depth %u, %u buffers", path,
	      (unsigned long long)rd.chunks, (unsigned long long)rd.direct_chunks, (unsigned long long)rd.copied_chunks,
	      (ckpt__now_ns() - t_start) / 1e6, rd.wait_ns / 1e6, rd.check_ns / 1e6, rd.depth, rd.nbufs);
	return err;
}

/* ------------------------------------------------------------- from memory */

int ckpt__shard_read_mem(const uint8_t *img, uint64_t len, const ckpt_shard *s, const ckpt_read_opts *o,
                         ckpt_sink_fn sink, void *arg)
{
	const ckpt_fmt_footer *f = &s->footer;
	ckpt_chunk_scratch cs = { 0 };
	int err = 0;
	for (uint64_t ci = 0; ci < f->chunk_count && !err; ci++) {
		const ckpt_fmt_chunk *c = &f->chunks[ci];
		const ckpt_fmt_region *r = &f->regions[c->region];
		if (o->want && !o->want[c->region])
			continue;
		/* The parser checked the table against the image's size; checked
		 * again here, since nothing may be read outside the image. */
		if (c->offset > len || c->stored_len > len - c->offset || c->raw_len > f->chunk_bytes) {
			chunk_why(o, s, r->name, ci - r->chunk_first, "outside the image");
			err = -CKPT_ECORRUPT;
			break;
		}
		err = chunk_deliver(&cs, s, o, ci, img + c->offset, sink, arg);
	}
	ckpt__chunk_scratch_free(&cs);
	return err;
}
