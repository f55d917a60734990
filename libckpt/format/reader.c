#include "reader.h"
#include "ckpt_kernels.h"
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

/* ------------------------------------------------------------- one chunk */

/* What decompression needs, made on the first compressed chunk. */
typedef struct rd_dec {
	ZSTD_DCtx *dctx;
	uint8_t *plain, *scratch;
} rd_dec;

static void dec_free(rd_dec *d)
{
	free(d->plain);
	free(d->scratch);
	ZSTD_freeDCtx(d->dctx);
}

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
 * checksum, to the sink. */
static int chunk_deliver(rd_dec *d, const ckpt_shard *s, const ckpt_read_opts *o, uint64_t ci,
                         const uint8_t *stored, ckpt_sink_fn sink, void *arg)
{
	const ckpt_fmt_footer *f = &s->footer;
	const ckpt_fmt_chunk *c = &f->chunks[ci];
	const ckpt_fmt_region *r = &f->regions[c->region];
	uint64_t k = ci - r->chunk_first;
	const uint8_t *data = stored;
	if (c->flags & CKPT_CHUNK_ZSTD) {
		unsigned elem = (c->flags >> CKPT_CHUNK_SHUFFLE_SHIFT) & 0xffu;
		if (!d->dctx)
			d->dctx = ZSTD_createDCtx();
		if (!d->plain)
			d->plain = malloc(f->chunk_bytes);
		if (!d->scratch && elem > 1)
			d->scratch = malloc(f->chunk_bytes);
		if (!d->dctx || !d->plain || (elem > 1 && !d->scratch))
			return -ENOMEM;
		if (ckpt_kern_decompress(d->dctx, d->plain, c->raw_len, stored, c->stored_len, elem, d->scratch) < 0) {
			chunk_why(o, s, r->name, k, "compressed data does not decode");
			return -CKPT_ECORRUPT;
		}
		data = d->plain;
	}
	uint64_t sum = ckpt_kern_checksum(data, c->raw_len);
	if (sum != c->checksum) {
		chunk_why(o, s, r->name, k, "checksum mismatch (stored %016llx, computed %016llx)",
		          (unsigned long long)c->checksum, (unsigned long long)sum);
		return -CKPT_ECORRUPT;
	}
	return sink(arg, c->region, k * f->chunk_bytes, data, c->raw_len);
}

/* ------------------------------------------------------------- from a file */

typedef struct rd_slot {
	ckpt_io io;
	uint64_t chunk;
	uint8_t *buf;
} rd_slot;

/* A read in progress: its buffers (a free list of slots), the file and the
 * backend reading it. */
typedef struct rd_file {
	const ckpt_shard *s;
	const ckpt_read_opts *o;
	rd_slot *slots;
	uint32_t nbufs, *free_ix, free_n, inflight;
	int own_bufs;
	int fd;
	ckpt_backend *be;
	rd_dec dec;
} rd_file;

static int rd_open(rd_file *rd, const char *path)
{
	const ckpt_read_opts *o = rd->o;
	size_t need = CKPT_ALIGN_UP(rd->s->footer.chunk_bytes, CKPT_ALIGN);
	uint32_t depth = o->depth ? o->depth : 8;
	rd->fd = -1;
	rd->own_bufs = !o->bufs || o->nbufs == 0 || o->buf_bytes < need;
	rd->nbufs = rd->own_bufs ? depth : CKPT_MIN(depth, o->nbufs);
	rd->slots = calloc(rd->nbufs, sizeof(*rd->slots));
	rd->free_ix = calloc(rd->nbufs, sizeof(uint32_t));
	if (!rd->slots || !rd->free_ix)
		return -ENOMEM;
	for (uint32_t i = 0; i < rd->nbufs; i++) {
		if (!rd->own_bufs)
			rd->slots[i].buf = o->bufs[i];
		else if (posix_memalign((void **)&rd->slots[i].buf, CKPT_ALIGN, need))
			return -ENOMEM;
		rd->free_ix[i] = i;
	}
	rd->free_n = rd->nbufs;
	/* As ckpt__shard_open: a regular file, not through a symlink, and an
	 * open that cannot block (a FIFO put at the name meanwhile). */
	int fl = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
	if (o->direct)
		rd->fd = open(path, fl | O_DIRECT);
	if (rd->fd < 0)
		rd->fd = open(path, fl);
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
	ckpt_backend_params bp = { sizeof(bp), rd->nbufs + 2 };
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
	for (uint32_t i = 0; rd->own_bufs && rd->slots && i < rd->nbufs; i++)
		free(rd->slots[i].buf);
	free(rd->slots);
	free(rd->free_ix);
	dec_free(&rd->dec);
}

/* Submits reads of the chunks from *next on while buffers are free; chunks
 * of unwanted regions are skipped (and counted done) here. */
static int rd_submit(rd_file *rd, uint64_t *next, uint64_t *done)
{
	const ckpt_fmt_footer *f = &rd->s->footer;
	while (rd->free_n && *next < f->chunk_count) {
		const ckpt_fmt_chunk *c = &f->chunks[*next];
		if (rd->o->want && !rd->o->want[c->region]) {
			(*next)++;
			(*done)++;
			continue;
		}
		rd_slot *sl = &rd->slots[rd->free_ix[--rd->free_n]];
		memset(&sl->io, 0, sizeof(sl->io));
		sl->chunk = (*next)++;
		sl->io.op = CKPT_IO_READ;
		sl->io.fd = rd->fd;
		sl->io.buf = sl->buf;
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

/* A completed read: its slot back on the free list, its chunk delivered
 * unless an error already stopped the read. */
static int rd_complete(rd_file *rd, ckpt_io *io, int err, ckpt_sink_fn sink, void *arg)
{
	rd_slot *sl = io->user;
	rd->inflight--;
	rd->free_ix[rd->free_n++] = (uint32_t)(sl - rd->slots);
	if (err)
		return err;
	if (sl->io.result < 0) {
		const ckpt_fmt_footer *f = &rd->s->footer;
		const ckpt_fmt_region *r = &f->regions[f->chunks[sl->chunk].region];
		chunk_why(rd->o, rd->s, r->name, sl->chunk - r->chunk_first, "read error: %s", strerror(-sl->io.result));
		return sl->io.result;
	}
	return chunk_deliver(&rd->dec, rd->s, rd->o, sl->chunk, sl->buf, sink, arg);
}

int ckpt__shard_read(const char *path, const ckpt_shard *s, const ckpt_read_opts *o,
                     ckpt_sink_fn sink, void *arg)
{
	rd_file rd = { .s = s, .o = o };
	int err = rd_open(&rd, path);
	uint64_t next = 0, done = 0, total = s->footer.chunk_count;
	while (err == 0 && (done < total || rd.inflight)) {
		if ((err = rd_submit(&rd, &next, &done)) < 0 || !rd.inflight)
			break;
		ckpt_io *cq[32];
		int n = rd.be->ops->poll(rd.be, cq, 32, -1);
		if (n < 0) {
			err = n;
			break;
		}
		for (int i = 0; i < n; i++) {
			err = rd_complete(&rd, cq[i], err, sink, arg);
			done++;
		}
	}
	rd_close(&rd);
	return err;
}

/* ------------------------------------------------------------- from memory */

int ckpt__shard_read_mem(const uint8_t *img, uint64_t len, const ckpt_shard *s, const ckpt_read_opts *o,
                         ckpt_sink_fn sink, void *arg)
{
	const ckpt_fmt_footer *f = &s->footer;
	rd_dec dec = { 0 };
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
		err = chunk_deliver(&dec, s, o, ci, img + c->offset, sink, arg);
	}
	dec_free(&dec);
	return err;
}
