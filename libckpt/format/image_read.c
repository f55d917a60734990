/* A shard image in another node's DRAM, read over the fabric (image_read.h). */
#include "image_read.h"

#include "base/common.h"
#include "ckpt_kernels.h"
#include "seal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int say(char *why, size_t cap, int err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int say(char *why, size_t cap, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (why && cap)
		vsnprintf(why, cap, fmt, ap);
	va_end(ap);
	return err;
}

static int rd(ckpt_fab *fab, ckpt_fab_mr *mr, void *buf, size_t len, const ckpt_fab_remote *rem, uint64_t roff,
              int timeout_ms, char *why, size_t cap)
{
	char fw[300] = "";
	int r = ckpt_fab_xfer(fab, CKPT_FAB_READ, mr, buf, len, rem, roff, 0, 0, timeout_ms, fw, sizeof(fw));
	return r < 0 ? say(why, cap, r, "fi_read: %s", fw[0] ? fw : strerror(-r)) : 0;
}

/* The footer and the seal table of a parsed header and tail, from the
 * trailer bytes at t (avail of them, up to the tail). */
static int finish_open(ckpt_image *im, const uint8_t *hdr, const uint8_t *tail, const uint8_t *t, uint64_t avail,
                       char *why, size_t cap)
{
	int r = ckpt__shard_parse_parts(&im->s, im->s.file_length, hdr, CKPT_FMT_HEADER_USED, tail, t, why, cap);
	if (r < 0)
		return r;
	r = ckpt__seal_read_trailer(t, avail, &im->s, &im->seals, why, cap);
	if (r == -ENOMEM)
		return r;
	/* No table, or one that does not check: the tree checksums will do. */
	im->seals_bad = r == -CKPT_ECORRUPT;
	if (why && r < 0)
		why[0] = '\0';
	return 0;
}

/* Checks what the tail says of the footer against the image's length. */
static int footer_fits(const ckpt_image *im, uint64_t bytes, char *why, size_t cap)
{
	uint64_t foff = im->s.tail.footer_offset, flen = im->s.tail.footer_length;
	if (foff > bytes || flen > bytes - foff || bytes - foff - flen < CKPT_FMT_TAIL_LEN)
		return say(why, cap, -CKPT_ECORRUPT, "the image's footer (%llu bytes at %llu) lies outside its %llu bytes",
		           (unsigned long long)flen, (unsigned long long)foff, (unsigned long long)bytes);
	return 0;
}

int ckpt__image_open(ckpt_fab *fab, const ckpt_fab_remote *rem, uint64_t off, uint64_t bytes, uint8_t *scratch,
                     ckpt_fab_mr *scratch_mr, size_t scratch_bytes, int timeout_ms, ckpt_image *im, char *why,
                     size_t cap)
{
	memset(im, 0, sizeof(*im));
	im->s.fd = -1;
	im->off = off;
	if (bytes < CKPT_FMT_HEADER_LEN + CKPT_FMT_TAIL_LEN || scratch_bytes < CKPT_FMT_HEADER_USED + 2 * CKPT_FMT_TAIL_LEN)
		return say(why, cap, -CKPT_ECORRUPT, "the image is %llu bytes: too short", (unsigned long long)bytes);
	uint8_t *hdr = scratch, *tail = scratch + CKPT_FMT_HEADER_USED, *t = tail + CKPT_FMT_TAIL_LEN;
	int r;
	if ((r = rd(fab, scratch_mr, hdr, CKPT_FMT_HEADER_USED, rem, off, timeout_ms, why, cap)) < 0 ||
	    (r = rd(fab, scratch_mr, tail, CKPT_FMT_TAIL_LEN, rem, off + bytes - CKPT_FMT_TAIL_LEN, timeout_ms, why,
	            cap)) < 0 ||
	    (r = ckpt__shard_parse_parts(&im->s, bytes, hdr, CKPT_FMT_HEADER_USED, tail, NULL, why, cap)) < 0 ||
	    (r = footer_fits(im, bytes, why, cap)) < 0)
		return r;
	/* The footer and, when it fits too, the seal table behind it. */
	uint64_t foff = im->s.tail.footer_offset, flen = im->s.tail.footer_length;
	uint64_t room = scratch_bytes - CKPT_FMT_HEADER_USED - CKPT_FMT_TAIL_LEN;
	uint64_t avail = bytes - CKPT_FMT_TAIL_LEN - foff, want = avail < room ? avail : room;
	if (flen > room)
		return say(why, cap, -CKPT_ECORRUPT, "the image's footer of %llu bytes is larger than %llu",
		           (unsigned long long)flen, (unsigned long long)room);
	if ((r = rd(fab, scratch_mr, t, (size_t)want, rem, off + foff, timeout_ms, why, cap)) < 0)
		return r;
	return finish_open(im, hdr, tail, t, want, why, cap);
}

void ckpt__image_close(ckpt_image *im)
{
	ckpt__shard_close(&im->s);
	free(im->seals);
	im->seals = NULL;
}

int ckpt__image_chunk_ok(const ckpt_image *im, uint64_t ci, const void *data)
{
	const ckpt_fmt_chunk *c = &im->s.footer.chunks[ci];
	if (c->flags || c->stored_len != c->raw_len)
		return -CKPT_ECORRUPT;
	uint64_t got = im->seals ? ckpt_kern_seal(data, c->raw_len) : ckpt_kern_checksum(data, c->raw_len);
	return got == (im->seals ? im->seals[ci] : c->checksum) ? 0 : -CKPT_ECORRUPT;
}

/* ---------------------------------------------------------------- pull */

typedef struct pull {
	const ckpt_image *im;
	const uint64_t *chunk;  /* piece -> chunk index, or UINT64_MAX for a gap */
	pthread_mutex_t mu;
	char *why;
	size_t cap;
	int said;
} pull;

static int pull_landed(void *arg, size_t i, const void *data, size_t len)
{
	(void)len;
	pull *p = arg;
	uint64_t ci = p->chunk[i];
	if (ci == UINT64_MAX || ckpt__image_chunk_ok(p->im, ci, data) == 0)
		return 0;
	const ckpt_fmt_chunk *c = &p->im->s.footer.chunks[ci];
	const ckpt_fmt_region *r = &p->im->s.footer.regions[c->region];
	pthread_mutex_lock(&p->mu);
	if (!p->said++)
		say(p->why, p->cap, 0, "region '%s' chunk %llu: %s mismatch", r->name,
		    (unsigned long long)(ci - r->chunk_first), p->im->seals ? "seal" : "checksum");
	pthread_mutex_unlock(&p->mu);
	return -CKPT_ECORRUPT;
}

static int by_offset(const void *a, const void *b, void *arg)
{
	const ckpt_fmt_chunk *c = arg;
	uint64_t x = c[*(const uint64_t *)a].offset, y = c[*(const uint64_t *)b].offset;
	return x < y ? -1 : x > y;
}

/* One piece per chunk (with its padding), and one per gap between them, so
 * that every byte of the data area is read. */
static int make_pieces(const ckpt_image *im, uint8_t *dst, ckpt_fab_mr *dst_mr, ckpt_fab_piece **out,
                       uint64_t **chunk_of, size_t *n)
{
	const ckpt_fmt_footer *f = &im->s.footer;
	uint64_t nc = f->chunk_count, foff = im->s.tail.footer_offset;
	uint64_t *order = malloc((nc ? nc : 1) * sizeof(*order));
	ckpt_fab_piece *pc = malloc((2 * nc + 1) * sizeof(*pc));
	uint64_t *of = malloc((2 * nc + 1) * sizeof(*of));
	if (!order || !pc || !of) {
		free(order);
		free(pc);
		free(of);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < nc; i++)
		order[i] = i;
	qsort_r(order, nc, sizeof(*order), by_offset, f->chunks);
	size_t k = 0;
	uint64_t at = CKPT_FMT_HEADER_LEN;
	for (uint64_t j = 0; j < nc; j++) {
		const ckpt_fmt_chunk *c = &f->chunks[order[j]];
		if (c->offset > at) { /* a gap no chunk names: read it as it is */
			pc[k] = (ckpt_fab_piece){ .roff = im->off + at, .len = c->offset - at, .buf = dst + at, .mr = dst_mr };
			of[k++] = UINT64_MAX;
		}
		uint64_t end = CKPT_MIN(CKPT_ALIGN_UP(c->offset + c->stored_len, CKPT_ALIGN), foff);
		pc[k] = (ckpt_fab_piece){ .roff = im->off + c->offset, .len = end - c->offset, .buf = dst + c->offset,
		                          .mr = dst_mr };
		of[k++] = order[j];
		at = end;
	}
	if (foff > at) {
		pc[k] = (ckpt_fab_piece){ .roff = im->off + at, .len = foff - at, .buf = dst + at, .mr = dst_mr };
		of[k++] = UINT64_MAX;
	}
	free(order);
	*out = pc;
	*chunk_of = of;
	*n = k;
	return 0;
}

int ckpt__image_pull(ckpt_fab *fab, const ckpt_fab_remote *rem, uint64_t off, uint64_t bytes, uint8_t *dst,
                     ckpt_fab_mr *dst_mr, unsigned threads, int timeout_ms, ckpt_shard *s, char *why, size_t cap)
{
	ckpt_image im;
	memset(&im, 0, sizeof(im));
	im.s.fd = -1;
	im.off = off;
	if (s) {
		memset(s, 0, sizeof(*s));
		s->fd = -1;
	}
	if (bytes < CKPT_FMT_HEADER_LEN + CKPT_FMT_TAIL_LEN)
		return say(why, cap, -CKPT_ECORRUPT, "the image is %llu bytes: too short", (unsigned long long)bytes);
	uint8_t *tail = dst + bytes - CKPT_FMT_TAIL_LEN;
	int r;
	/* The structure, each part read into its place. */
	if ((r = rd(fab, dst_mr, dst, CKPT_FMT_HEADER_LEN, rem, off, timeout_ms, why, cap)) < 0 ||
	    (r = rd(fab, dst_mr, tail, CKPT_FMT_TAIL_LEN, rem, off + bytes - CKPT_FMT_TAIL_LEN, timeout_ms, why,
	            cap)) < 0 ||
	    (r = ckpt__shard_parse_parts(&im.s, bytes, dst, CKPT_FMT_HEADER_USED, tail, NULL, why, cap)) < 0 ||
	    (r = footer_fits(&im, bytes, why, cap)) < 0)
		goto out;
	uint64_t foff = im.s.tail.footer_offset, avail = bytes - CKPT_FMT_TAIL_LEN - foff;
	if ((r = rd(fab, dst_mr, dst + foff, (size_t)avail, rem, off + foff, timeout_ms, why, cap)) < 0 ||
	    (r = finish_open(&im, dst, tail, dst + foff, avail, why, cap)) < 0)
		goto out;
	for (uint64_t i = 0; i < im.s.footer.chunk_count; i++)
		if (im.s.footer.chunks[i].flags) {
			r = say(why, cap, -CKPT_ECORRUPT, "chunk %llu is compressed: not an image of node DRAM",
			        (unsigned long long)i);
			goto out;
		}
	/* The chunks, many reads in flight, each checked as it lands. */
	ckpt_fab_piece *pc = NULL;
	uint64_t *of = NULL;
	size_t n = 0;
	if ((r = make_pieces(&im, dst, dst_mr, &pc, &of, &n)) < 0)
		goto out;
	pull p = { .im = &im, .chunk = of, .why = why, .cap = cap };
	pthread_mutex_init(&p.mu, NULL);
	ckpt_fab_fetch_opts o = { .size = sizeof(o), .threads = threads, .timeout_ms = timeout_ms };
	char fw[300] = "";
	r = ckpt_fab_fetch(fab, rem, pc, n, &o, pull_landed, &p, fw, sizeof(fw));
	if (r < 0 && r != -CKPT_ECORRUPT)
		say(why, cap, r, "fi_read: %s", fw[0] ? fw : strerror(-r));
	pthread_mutex_destroy(&p.mu);
	free(pc);
	free(of);
out:
	if (r == 0 && s) {
		*s = im.s; /* handed over */
		memset(&im.s, 0, sizeof(im.s));
		im.s.fd = -1;
	}
	ckpt__image_close(&im);
	return r;
}
