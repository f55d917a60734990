/* The seal table (seal.h, docs/format.md 6.4). */
#include "seal.h"

#include "base/common.h"
#include "ckpt_kernels.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SEAL_MAGIC[8] = { 'C', 'K', 'P', 'T', 'S', 'E', 'A', 'L' };
#define SEAL_VERSION 1u

size_t ckpt__seal_at(size_t footer_len)
{
	return CKPT_ALIGN_UP(footer_len, 64);
}

static size_t table_len(uint64_t chunks)
{
	return CKPT_SEAL_FIXED + 8 * chunks + 8;
}

size_t ckpt__seal_trailer_len(const ckpt_fmt_footer *f)
{
	return CKPT_ALIGN_UP(ckpt__seal_at(ckpt__fmt_footer_len(f)) + table_len(f->chunk_count) + CKPT_FMT_TAIL_LEN,
	                     CKPT_ALIGN);
}

void ckpt__seal_encode(uint8_t *buf, size_t buflen, const ckpt_fmt_footer *f, const uint64_t *seals)
{
	(void)buflen;
	uint8_t *p = buf + ckpt__seal_at(ckpt__fmt_footer_len(f));
	const uint8_t *tail = buf + buflen - CKPT_FMT_TAIL_LEN;
	memcpy(p, SEAL_MAGIC, 8);
	ckpt__put_le32(p + 8, SEAL_VERSION);
	ckpt__put_le32(p + 12, 0);
	ckpt__put_le64(p + 16, f->chunk_count);
	ckpt__put_le64(p + 24, ckpt__get_le64(tail + 32)); /* the footer's checksum, from the tail */
	for (uint64_t i = 0; i < f->chunk_count; i++)
		ckpt__put_le64(p + CKPT_SEAL_FIXED + 8 * i, seals[i]);
	size_t n = CKPT_SEAL_FIXED + 8 * f->chunk_count;
	ckpt__put_le64(p + n, ckpt_kern_hash(p, n));
}

static int fail(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (why && cap)
		vsnprintf(why, cap, fmt, ap);
	va_end(ap);
	return -CKPT_ECORRUPT;
}

int ckpt__seal_read(const uint8_t *img, uint64_t len, const ckpt_shard *s, uint64_t **out, char *why, size_t cap)
{
	/* The parse checked footer_offset + footer_length + 64 <= len. */
	uint64_t foff = s->tail.footer_offset;
	return ckpt__seal_read_trailer(img + foff, len - CKPT_FMT_TAIL_LEN - foff, s, out, why, cap);
}

int ckpt__seal_read_trailer(const uint8_t *trailer, uint64_t avail, const ckpt_shard *s, uint64_t **out, char *why,
                            size_t cap)
{
	*out = NULL;
	uint64_t flen = s->tail.footer_length, n = s->footer.chunk_count;
	uint64_t at = ckpt__seal_at(flen);
	if (at > avail || avail - at < CKPT_SEAL_FIXED || memcmp(trailer + at, SEAL_MAGIC, 8))
		return -ENOENT;
	const uint8_t *p = trailer + at;
	/* Bounded by the image: a count that does not fit is refused before
	 * anything is allocated or hashed. */
	uint64_t count = ckpt__get_le64(p + 16);
	if (count != n || (avail - at - CKPT_SEAL_FIXED) / 8 < n + 1)
		return fail(why, cap, "the seal table names %llu chunks, the footer %llu (or does not fit)",
		            (unsigned long long)count, (unsigned long long)n);
	if (ckpt__get_le32(p + 8) != SEAL_VERSION)
		return fail(why, cap, "seal table version %u not supported", ckpt__get_le32(p + 8));
	size_t body = CKPT_SEAL_FIXED + 8 * (size_t)n;
	uint64_t *v = malloc((n ? n : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	/* Copied first, then checked: what is checked is what is used. */
	uint8_t fixed[CKPT_SEAL_FIXED];
	memcpy(fixed, p, sizeof(fixed));
	for (uint64_t i = 0; i < n; i++)
		v[i] = ckpt__get_le64(p + CKPT_SEAL_FIXED + 8 * i);
	uint64_t sum = ckpt__get_le64(p + body);
	/* The hash over the private copy: the fixed part, then the seals as read. */
	uint8_t *copy = malloc(body);
	if (!copy) {
		free(v);
		return -ENOMEM;
	}
	memcpy(copy, fixed, sizeof(fixed));
	for (uint64_t i = 0; i < n; i++)
		ckpt__put_le64(copy + CKPT_SEAL_FIXED + 8 * i, v[i]);
	int ok = ckpt_kern_hash(copy, body) == sum && ckpt__get_le64(fixed + 16) == n &&
	         ckpt__get_le64(fixed + 24) == s->tail.footer_checksum;
	free(copy);
	if (!ok) {
		free(v);
		return fail(why, cap, "the seal table does not check (its checksum, or the footer it names)");
	}
	*out = v;
	return 0;
}
