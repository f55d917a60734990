#include "reader.h"
#include "ckpt_kernels.h"
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

typedef struct rd_slot {
	ckpt_io io;
	uint64_t chunk;
	uint8_t *buf;
} rd_slot;

int ckpt__shard_read(const char *path, const ckpt_shard *s, const ckpt_read_opts *o,
                     ckpt_sink_fn sink, void *arg)
{
	const ckpt_fmt_footer *f = &s->footer;
	size_t need = CKPT_ALIGN_UP(f->chunk_bytes, CKPT_ALIGN);
	uint32_t depth = o->depth ? o->depth : 8;
	int own_bufs = !o->bufs || o->nbufs == 0 || o->buf_bytes < need;
	uint32_t nbufs = own_bufs ? depth : CKPT_MIN(depth, o->nbufs);
	rd_slot *slots = calloc(nbufs, sizeof(*slots));
	uint8_t *scratch = NULL, *plain = NULL;
	ZSTD_DCtx *dctx = NULL;
	ckpt_backend *be = NULL;
	int fd = -1, err = 0;
	if (!slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < nbufs; i++) {
		if (own_bufs) {
			if (posix_memalign((void **)&slots[i].buf, CKPT_ALIGN, need)) {
				err = -ENOMEM;
				goto out;
			}
		} else {
			slots[i].buf = o->bufs[i];
		}
	}
	if (o->direct)
		fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		snprintf(o->why, o->whycap, "cannot open %s: %s", path, strerror(errno));
		goto out;
	}
	ckpt_backend_params bp = { sizeof(bp), nbufs + 2 };
	int fell_back, uerr;
	if ((err = ckpt_backend_open(o->backend, &bp, &be, &fell_back, &uerr)) < 0)
		goto out;

	uint64_t next = 0, done = 0, total = f->chunk_count;
	uint32_t free_n = nbufs, inflight = 0;
	uint32_t *free_ix = calloc(nbufs, sizeof(uint32_t));
	if (!free_ix) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < nbufs; i++)
		free_ix[i] = i;
	/* Chunks of unwanted regions are skipped up front. */
	while (done < total || inflight) {
		while (free_n && next < total) {
			const ckpt_fmt_chunk *c = &f->chunks[next];
			if (o->want && !o->want[c->region]) {
				next++;
				done++;
				continue;
			}
			rd_slot *sl = &slots[free_ix[--free_n]];
			memset(&sl->io, 0, sizeof(sl->io));
			sl->chunk = next++;
			sl->io.op = CKPT_IO_READ;
			sl->io.fd = fd;
			sl->io.buf = sl->buf;
			sl->io.len = (uint32_t)CKPT_ALIGN_UP(c->stored_len, CKPT_ALIGN);
			sl->io.off = c->offset;
			sl->io.user = sl;
			if ((err = be->ops->submit(be, &sl->io)) < 0)
				goto drain;
			inflight++;
		}
		if (!inflight)
			break;
		ckpt_io *cq[32];
		int n = be->ops->poll(be, cq, 32, -1);
		if (n < 0) {
			err = n;
			goto drain;
		}
		for (int i = 0; i < n; i++) {
			rd_slot *sl = cq[i]->user;
			inflight--;
			free_ix[free_n++] = (uint32_t)(sl - slots);
			done++;
			if (err)
				continue;
			const ckpt_fmt_chunk *c = &f->chunks[sl->chunk];
			const ckpt_fmt_region *r = &f->regions[c->region];
			uint64_t k = sl->chunk - r->chunk_first;
			if (sl->io.result < 0) {
				err = sl->io.result;
				snprintf(o->why, o->whycap, "version %llu rank %u region '%s' chunk %llu: read error: %s",
				         (unsigned long long)s->header.version, s->header.rank, r->name,
				         (unsigned long long)k, strerror(-err));
				continue;
			}
			const uint8_t *data = sl->buf;
			if (c->flags & CKPT_CHUNK_ZSTD) {
				unsigned elem = (c->flags >> CKPT_CHUNK_SHUFFLE_SHIFT) & 0xffu;
				if (!dctx)
					dctx = ZSTD_createDCtx();
				if (!plain)
					plain = malloc(f->chunk_bytes);
				if (!scratch && elem > 1)
					scratch = malloc(f->chunk_bytes);
				if (!dctx || !plain || (elem > 1 && !scratch)) {
					err = -ENOMEM;
					continue;
				}
				if (ckpt_kern_decompress(dctx, plain, c->raw_len, sl->buf, c->stored_len, elem,
				                         scratch) < 0) {
					err = -CKPT_ECORRUPT;
					snprintf(o->why, o->whycap,
					         "version %llu rank %u region '%s' chunk %llu: compressed data does not decode",
					         (unsigned long long)s->header.version, s->header.rank, r->name,
					         (unsigned long long)k);
					continue;
				}
				data = plain;
			}
			uint64_t sum = ckpt_kern_checksum(data, c->raw_len);
			if (sum != c->checksum) {
				err = -CKPT_ECORRUPT;
				snprintf(o->why, o->whycap,
				         "version %llu rank %u region '%s' chunk %llu: checksum mismatch (stored %016llx, computed %016llx)",
				         (unsigned long long)s->header.version, s->header.rank, r->name,
				         (unsigned long long)k, (unsigned long long)c->checksum,
				         (unsigned long long)sum);
				continue;
			}
			int sr = sink(arg, c->region, k * f->chunk_bytes, data, c->raw_len);
			if (sr < 0)
				err = sr;
		}
		if (err)
			goto drain;
	}
drain:
	while (inflight) {
		ckpt_io *cq[32];
		int n = be->ops->poll(be, cq, 32, -1);
		if (n < 0)
			break;
		inflight -= (uint32_t)n;
	}
	free(free_ix);
out:
	if (be)
		be->ops->close(be);
	if (fd >= 0)
		close(fd);
	for (uint32_t i = 0; own_bufs && slots && i < nbufs; i++)
		free(slots[i].buf);
	free(slots);
	free(plain);
	free(scratch);
	ZSTD_freeDCtx(dctx);
	return err;
}

int ckpt__shard_read_mem(const uint8_t *img, uint64_t len, const ckpt_shard *s, const ckpt_read_opts *o,
                         ckpt_sink_fn sink, void *arg)
{
	const ckpt_fmt_footer *f = &s->footer;
	uint8_t *plain = NULL, *scratch = NULL;
	ZSTD_DCtx *dctx = NULL;
	int err = 0;
	for (uint64_t ci = 0; ci < f->chunk_count && !err; ci++) {
		const ckpt_fmt_chunk *c = &f->chunks[ci];
		const ckpt_fmt_region *r = &f->regions[c->region];
		uint64_t k = ci - r->chunk_first;
		if (o->want && !o->want[c->region])
			continue;
		/* The parser checked the table against the image's size; checked
		 * again here, since nothing may be read outside the image. */
		if (c->offset > len || c->stored_len > len - c->offset || c->raw_len > f->chunk_bytes) {
			err = -CKPT_ECORRUPT;
			snprintf(o->why, o->whycap, "version %llu rank %u region '%s' chunk %llu: outside the image",
			         (unsigned long long)s->header.version, s->header.rank, r->name, (unsigned long long)k);
			break;
		}
		const uint8_t *data = img + c->offset;
		if (c->flags & CKPT_CHUNK_ZSTD) {
			unsigned elem = (c->flags >> CKPT_CHUNK_SHUFFLE_SHIFT) & 0xffu;
			if (!dctx)
				dctx = ZSTD_createDCtx();
			if (!plain)
				plain = malloc(f->chunk_bytes);
			if (!scratch && elem > 1)
				scratch = malloc(f->chunk_bytes);
			if (!dctx || !plain || (elem > 1 && !scratch)) {
				err = -ENOMEM;
				break;
			}
			if (ckpt_kern_decompress(dctx, plain, c->raw_len, data, c->stored_len, elem, scratch) < 0) {
				err = -CKPT_ECORRUPT;
				snprintf(o->why, o->whycap,
				         "version %llu rank %u region '%s' chunk %llu: compressed data does not decode",
				         (unsigned long long)s->header.version, s->header.rank, r->name, (unsigned long long)k);
				break;
			}
			data = plain;
		}
		uint64_t sum = ckpt_kern_checksum(data, c->raw_len);
		if (sum != c->checksum) {
			err = -CKPT_ECORRUPT;
			snprintf(o->why, o->whycap,
			         "version %llu rank %u region '%s' chunk %llu: checksum mismatch (stored %016llx, computed %016llx)",
			         (unsigned long long)s->header.version, s->header.rank, r->name, (unsigned long long)k,
			         (unsigned long long)c->checksum, (unsigned long long)sum);
			break;
		}
		err = sink(arg, c->region, k * f->chunk_bytes, data, c->raw_len);
	}
	free(plain);
	free(scratch);
	ZSTD_freeDCtx(dctx);
	return err;
}
