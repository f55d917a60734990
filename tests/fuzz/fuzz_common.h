/* Shared by the fuzz targets, their regression driver and the hostile-input
 * tests: resealing a mutated shard image, and the structural invariants that
 * every shard the decoder accepts must satisfy. Header-only so that each
 * target stays one translation unit plus the driver. */
#ifndef CKPT_FUZZ_COMMON_H
#define CKPT_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "ckpt_kernels.h"
#include "base/common.h"
#include "format/format.h"
#include "fuzz/fuzz_driver.h"

/* Byte offsets of the checksummed fields (libckpt/format/format.c). */
#define FZ_HEADER_CSUM_OFF 248u
#define FZ_TAIL_FOOTER_OFF 16u
#define FZ_TAIL_FOOTER_LEN 24u
#define FZ_TAIL_FOOTER_CSUM 32u
#define FZ_TAIL_FILE_LEN 40u
#define FZ_TAIL_HEADER_CSUM 48u
#define FZ_TAIL_CSUM 56u

/* Recomputes every checksum of a shard image in place (header, then footer
 * and tail as located by the tail), so that a mutation gets past them and
 * reaches the structural checks. Returns 0, or -1 when the image is too
 * short or its tail points outside it (only the header is resealed then). */
static inline int fz_reseal(uint8_t *buf, size_t len)
{
	if (len < CKPT_FMT_HEADER_LEN + CKPT_FMT_TAIL_LEN)
		return -1;
	uint64_t hs = ckpt_kern_hash(buf, FZ_HEADER_CSUM_OFF);
	ckpt__put_le64(buf + FZ_HEADER_CSUM_OFF, hs);
	uint8_t *t = buf + len - CKPT_FMT_TAIL_LEN;
	ckpt__put_le64(t + FZ_TAIL_HEADER_CSUM, hs);
	uint64_t fo = ckpt__get_le64(t + FZ_TAIL_FOOTER_OFF);
	uint64_t fl = ckpt__get_le64(t + FZ_TAIL_FOOTER_LEN);
	int inside = fo <= len && fl <= len - fo;
	if (inside)
		ckpt__put_le64(t + FZ_TAIL_FOOTER_CSUM, ckpt_kern_hash(buf + fo, (size_t)fl));
	ckpt__put_le64(t + FZ_TAIL_CSUM, ckpt_kern_hash(t, FZ_TAIL_CSUM));
	return inside ? 0 : -1;
}

static int fz_name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks what the decoder promises of an accepted footer, re-derived here
 * independently of its code. footer_offset is where the footer starts (chunk
 * data must end before it). Returns NULL, or what is wrong. */
/* Orders (offset, end) pairs by offset. */
static inline int fz_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static inline const char *fz_footer_invariants(const ckpt_fmt_footer *f, uint64_t footer_offset)
{
	if (f->chunk_bytes < CKPT_FMT_MIN_CHUNK || f->chunk_bytes > CKPT_FMT_MAX_CHUNK ||
	    f->chunk_bytes % CKPT_ALIGN)
		return "chunk size out of range";
	if (f->region_count > CKPT_FMT_MAX_REGIONS)
		return "too many regions";
	if (!f->regions || !f->chunks)
		return "tables missing";
	uint64_t next = 0, data = 0, stored = 0;
	const char **names = malloc(((size_t)f->region_count + 1) * sizeof(*names));
	if (!names)
		return NULL; /* nothing to check with */
	const char *bad = NULL;
	for (uint32_t ri = 0; ri < f->region_count && !bad; ri++) {
		const ckpt_fmt_region *r = &f->regions[ri];
		names[ri] = r->name;
		size_t nl = strnlen(r->name, sizeof(r->name));
		if (r->name_len == 0 || r->name_len > CKPT_MAX_NAME || nl != r->name_len)
			bad = "region name length wrong or name holds a NUL";
		else if (memchr(r->name, '/', nl) || memchr(r->name, '\\', nl) ||
		         !strcmp(r->name, ".") || !strcmp(r->name, ".."))
			bad = "region name could leave the output directory";
		else if (r->ndim > CKPT_MAX_DIMS)
			bad = "too many dimensions";
		else if (r->dtype >= CKPT_DTYPE_COUNT)
			bad = "unknown dtype";
		else if (r->chunk_first != next || r->chunk_count > f->chunk_count - next)
			bad = "region chunk range not contiguous or outside the table";
		if (bad)
			break;
		for (unsigned d = 0; d < r->ndim; d++)
			if (r->offsets[d] > r->global_shape[d] || r->extents[d] > r->global_shape[d] - r->offsets[d])
				bad = "region part outside its global shape";
		uint64_t raw = 0;
		for (uint32_t k = 0; k < r->chunk_count && !bad; k++) {
			const ckpt_fmt_chunk *c = &f->chunks[r->chunk_first + k];
			if (c->region != ri)
				bad = "chunk names another region";
			else if (c->raw_len == 0 || c->raw_len > f->chunk_bytes ||
			         (k + 1 < r->chunk_count && c->raw_len != f->chunk_bytes))
				bad = "chunk raw length wrong";
			else if (c->stored_len == 0 || c->stored_len > c->raw_len)
				bad = "chunk stored length wrong";
			else if (!(c->flags & CKPT_CHUNK_ZSTD) && c->stored_len != c->raw_len)
				bad = "uncompressed chunk with stored != raw length";
			else if (c->offset < CKPT_FMT_HEADER_LEN || c->offset % CKPT_ALIGN ||
			         c->offset > footer_offset || c->stored_len > footer_offset - c->offset)
				bad = "chunk outside the data area";
			raw += c->raw_len;
			stored += c->stored_len;
		}
		if (!bad && raw != r->bytes)
			bad = "region byte count differs from the sum of its chunks";
		if (!bad && r->bytes > UINT64_MAX - data)
			bad = "region sizes overflow";
		data += r->bytes;
		next += r->chunk_count;
	}
	if (!bad && next != f->chunk_count)
		bad = "chunk table not covered by the regions";
	if (!bad && data != f->data_bytes)
		bad = "data_bytes differs from the sum of the regions";
	if (!bad && stored != f->stored_bytes)
		bad = "stored_bytes differs from the sum of the chunks";
	if (!bad && f->region_count > 1) {
		qsort(names, f->region_count, sizeof(*names), fz_name_cmp);
		for (uint32_t i = 1; i < f->region_count && !bad; i++)
			if (!strcmp(names[i - 1], names[i]))
				bad = "two regions share a name";
	}
	free(names);
	/* Stored ranges disjoint: each stored byte is read once. */
	uint64_t *ends = NULL;
	if (!bad && f->chunk_count > 1 && (ends = malloc(f->chunk_count * 2 * sizeof(*ends)))) {
		for (uint64_t i = 0; i < f->chunk_count; i++) {
			ends[2 * i] = f->chunks[i].offset;
			ends[2 * i + 1] = f->chunks[i].offset + f->chunks[i].stored_len;
		}
		qsort(ends, f->chunk_count, 2 * sizeof(*ends), fz_u64_cmp);
		for (uint64_t i = 1; i < f->chunk_count && !bad; i++)
			if (ends[2 * i] < ends[2 * i - 1])
				bad = "two chunks store overlapping bytes";
	}
	free(ends);
	return bad;
}

/* Checks an accepted shard of file_length bytes. Returns NULL or what is
 * wrong. */
static inline const char *fz_shard_invariants(const ckpt_shard *s, uint64_t file_length)
{
	const ckpt_fmt_header *h = &s->header;
	const ckpt_fmt_tail *t = &s->tail;
	if (h->format_version == 0 || h->format_version > CKPT_FORMAT_VERSION ||
	    t->format_version == 0 || t->format_version > CKPT_FORMAT_VERSION)
		return "format version not supported by this build";
	if (h->world_size == 0 || h->rank >= h->world_size)
		return "rank not below world size";
	if (ckpt__job_valid(h->job) < 0)
		return "invalid job id";
	if (t->file_length != file_length)
		return "tail file length differs from the file";
	if (t->footer_offset < CKPT_FMT_HEADER_LEN || t->footer_offset % CKPT_ALIGN ||
	    t->footer_offset > file_length || t->footer_length > file_length - t->footer_offset ||
	    file_length - t->footer_offset - t->footer_length < CKPT_FMT_TAIL_LEN)
		return "footer outside the file";
	return fz_footer_invariants(&s->footer, t->footer_offset);
}

/* Decodes (and checksums) the chunk data of an accepted in-memory shard, the
 * way a reader would, within a budget of raw bytes. Mismatches are not
 * invariant violations (the reader reports them); this only exercises the
 * decompression of hostile frames. */
static inline void fz_touch_chunks(const ckpt_shard *s, const uint8_t *buf, size_t len, uint64_t budget)
{
	const ckpt_fmt_footer *f = &s->footer;
	void *dctx = NULL;
	uint8_t *out = NULL, *scratch = NULL;
	for (uint64_t i = 0; i < f->chunk_count; i++) {
		const ckpt_fmt_chunk *c = &f->chunks[i];
		if (c->raw_len > budget || c->offset > len || c->stored_len > len - c->offset)
			break;
		budget -= c->raw_len;
		const uint8_t *src = buf + c->offset;
		if (c->flags & CKPT_CHUNK_ZSTD) {
			unsigned elem = (c->flags >> CKPT_CHUNK_SHUFFLE_SHIFT) & 0xffu;
			if (!dctx)
				dctx = ZSTD_createDCtx();
			free(out);
			free(scratch);
			out = malloc(c->raw_len);
			scratch = malloc(c->raw_len);
			if (!dctx || !out || !scratch)
				break;
			if (ckpt_kern_decompress(dctx, out, c->raw_len, src, c->stored_len, elem, scratch) == 0)
				(void)ckpt_kern_checksum(out, c->raw_len);
		} else {
			(void)ckpt_kern_checksum(src, c->raw_len);
		}
	}
	free(out);
	free(scratch);
	ZSTD_freeDCtx(dctx);
}

#endif
