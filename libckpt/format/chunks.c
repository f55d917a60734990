/* Reading chosen chunks of a shard (global.h): from a file through the
 * storage backend with several reads in flight, or from an image in
 * memory; every chunk decoded and its checksum checked before anyone sees
 * its bytes. */
#include "global.h"
#include "base/common.h"
#include "backend.h"
#include "ckpt_kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

int ckpt__chunk_verify(const ckpt_fmt_footer *f, uint64_t ci, const uint8_t *stored, ckpt_chunk_scratch *cs,
                       const uint8_t **raw, char *why, size_t cap)
{
	const ckpt_fmt_chunk *c = &f->chunks[ci];
	const ckpt_fmt_region *r = &f->regions[c->region];
	uint64_t k = ci - r->chunk_first;
	const uint8_t *data = stored;
	if (c->flags & CKPT_CHUNK_ZSTD) {
		unsigned elem = (c->flags >> CKPT_CHUNK_SHUFFLE_SHIFT) & 0xffu;
		if (!cs->dctx)
			cs->dctx = ZSTD_createDCtx();
		if (!cs->plain)
			cs->plain = malloc(f->chunk_bytes);
		if (!cs->shuf && elem > 1)
			cs->shuf = malloc(f->chunk_bytes);
		if (!cs->dctx || !cs->plain || (elem > 1 && !cs->shuf))
			return -ENOMEM;
		if (ckpt_kern_decompress(cs->dctx, cs->plain, c->raw_len, stored, c->stored_len, elem, cs->shuf) < 0) {
			ckpt__errf(why, cap, "region '%s' chunk %llu: compressed data does not decode", r->name,
			    (unsigned long long)k);
			return -CKPT_ECORRUPT;
		}
		data = cs->plain;
	}
	uint64_t sum = ckpt_kern_checksum(data, c->raw_len);
	if (sum != c->checksum) {
		ckpt__errf(why, cap, "region '%s' chunk %llu: checksum mismatch (stored %016llx, computed %016llx)", r->name,
		    (unsigned long long)k, (unsigned long long)c->checksum, (unsigned long long)sum);
		return -CKPT_ECORRUPT;
	}
	*raw = data;
	return 0;
}

void ckpt__chunk_scratch_free(ckpt_chunk_scratch *cs)
{
	ZSTD_freeDCtx(cs->dctx);
	free(cs->plain);
	free(cs->shuf);
	memset(cs, 0, sizeof(*cs));
}

int ckpt__chunks_read_mem(const uint8_t *img, uint64_t len, const ckpt_shard *s, const uint64_t *chunks, size_t n,
                          ckpt_gchunk_fn fn, void *arg, char *why, size_t cap)
{
	const ckpt_fmt_footer *f = &s->footer;
	ckpt_chunk_scratch cs = { 0 };
	int err = 0;
	for (size_t i = 0; i < n && !err; i++) {
		uint64_t ci = chunks[i];
		const ckpt_fmt_chunk *c;
		const uint8_t *raw;
		if (ci >= f->chunk_count) {
			ckpt__errf(why, cap, "chunk %llu is not in the shard", (unsigned long long)ci);
			err = -EINVAL;
			break;
		}
		c = &f->chunks[ci];
		/* The parser checked these against the image; nothing is read outside it. */
		if (c->offset > len || c->stored_len > len - c->offset || c->raw_len > f->chunk_bytes) {
			ckpt__errf(why, cap, "chunk %llu lies outside the image", (unsigned long long)ci);
			err = -CKPT_ECORRUPT;
			break;
		}
		if ((err = ckpt__chunk_verify(f, ci, img + c->offset, &cs, &raw, why, cap)) == 0)
			err = fn(arg, ci, raw, c->raw_len);
	}
	ckpt__chunk_scratch_free(&cs);
	return err;
}

typedef struct rslot {
	ckpt_io io;
	uint64_t chunk;
	uint8_t *buf;
} rslot;

/* Handles one completed read: verify, hand over. */
static int done_one(const ckpt_shard *s, rslot *sl, ckpt_chunk_scratch *cs, ckpt_gchunk_fn fn, void *arg, char *why,
                    size_t cap)
{
	const ckpt_fmt_footer *f = &s->footer;
	const ckpt_fmt_chunk *c = &f->chunks[sl->chunk];
	const uint8_t *raw;
	if (sl->io.result < 0) {
		ckpt__errf(why, cap, "chunk %llu: read error: %s", (unsigned long long)sl->chunk, strerror(-sl->io.result));
		return sl->io.result;
	}
	CKPT_TRY(ckpt__chunk_verify(f, sl->chunk, sl->buf, cs, &raw, why, cap));
	return fn(arg, sl->chunk, raw, c->raw_len);
}

int ckpt__chunks_read_file(const char *path, const ckpt_shard *s, const ckpt_chunk_read_opts *o,
                           const uint64_t *chunks, size_t n, ckpt_gchunk_fn fn, void *arg, char *why, size_t cap)
{
	const ckpt_fmt_footer *f = &s->footer;
	size_t need = CKPT_ALIGN_UP(f->chunk_bytes, CKPT_ALIGN);
	uint32_t depth = o && o->depth ? o->depth : 8;
	int own = !o || !o->bufs || !o->nbufs || o->buf_bytes < need;
	uint32_t nb = own ? depth : CKPT_MIN(depth, o->nbufs);
	rslot *slots = calloc(nb, sizeof(*slots));
	uint32_t *freel = calloc(nb, sizeof(*freel));
	ckpt_chunk_scratch cs = { 0 };
	ckpt_backend *be = NULL;
	int fd = -1, err = 0;
	if (!slots || !freel) {
		err = -ENOMEM;
		goto out;
	}
	if (n == 0)
		goto out;
	for (uint32_t i = 0; i < nb; i++) {
		if (own ? posix_memalign((void **)&slots[i].buf, CKPT_ALIGN, need) != 0 : !(slots[i].buf = o->bufs[i])) {
			err = -ENOMEM;
			goto out;
		}
		freel[i] = i;
	}
	if (o && o->direct)
		fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		ckpt__errf(why, cap, "cannot open %s: %s", path, strerror(errno));
		goto out;
	}
	ckpt_backend_params bp = { sizeof(bp), nb + 2 };
	int fell_back, uerr;
	if ((err = ckpt_backend_open(o ? o->backend : NULL, &bp, &be, &fell_back, &uerr)) < 0) {
		ckpt__errf(why, cap, "no storage backend: %s", strerror(-err));
		goto out;
	}
	size_t next = 0, nfree = nb;
	uint32_t inflight = 0;
	while ((next < n && !err) || inflight) {
		while (!err && nfree && next < n) {
			uint64_t ci = chunks[next];
			if (ci >= f->chunk_count) {
				ckpt__errf(why, cap, "chunk %llu is not in the shard", (unsigned long long)ci);
				err = -EINVAL;
				break;
			}
			const ckpt_fmt_chunk *c = &f->chunks[ci];
			rslot *sl = &slots[freel[--nfree]];
			memset(&sl->io, 0, sizeof(sl->io));
			sl->chunk = ci;
			sl->io.op = CKPT_IO_READ;
			sl->io.fd = fd;
			sl->io.buf = sl->buf;
			sl->io.len = (uint32_t)CKPT_ALIGN_UP(c->stored_len, CKPT_ALIGN);
			sl->io.off = c->offset;
			sl->io.user = sl;
			if ((err = be->ops->submit(be, &sl->io)) < 0) {
				ckpt__errf(why, cap, "read of chunk %llu: %s", (unsigned long long)ci, strerror(-err));
				nfree++;
				break;
			}
			next++;
			inflight++;
		}
		if (!inflight)
			break;
		ckpt_io *cq[32];
		int k = be->ops->poll(be, cq, 32, -1);
		if (k < 0) {
			if (!err)
				err = k;
			break; /* the backend is gone: nothing more completes */
		}
		for (int i = 0; i < k; i++) {
			rslot *sl = cq[i]->user;
			inflight--;
			freel[nfree++] = (uint32_t)(sl - slots);
			if (!err)
				err = done_one(s, sl, &cs, fn, arg, why, cap);
		}
	}
out:
	if (be)
		be->ops->close(be);
	if (fd >= 0)
		close(fd);
	for (uint32_t i = 0; own && slots && i < nb; i++)
		free(slots[i].buf);
	free(slots);
	free(freel);
	ckpt__chunk_scratch_free(&cs);
	return err;
}
