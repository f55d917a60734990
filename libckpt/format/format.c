#include "format.h"
#include "base/common.h"
#include "ckpt_kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char HEADER_MAGIC[8] = { 'C', 'K', 'P', 'T', 'S', 'H', 'R', 'D' };
static const char FOOTER_MAGIC[8] = { 'C', 'K', 'P', 'T', 'F', 'O', 'O', 'T' };
static const char TAIL_MAGIC[8] = { 'C', 'K', 'P', 'T', 'T', 'A', 'I', 'L' };

#define HEADER_CSUM_OFF 248u
#define JOB_FIELD_OFF 48u
#define JOB_FIELD_LEN 128u
#define LINEAGE_OFF 184u

static int bad(char *why, size_t cap, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int bad(char *why, size_t cap, int err, const char *fmt, ...)
{
	if (why && cap) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, cap, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* ------------------------------------------------------------- header */

uint64_t ckpt__fmt_header_encode(uint8_t buf[CKPT_FMT_HEADER_LEN], const ckpt_fmt_header *h)
{
	memset(buf, 0, CKPT_FMT_HEADER_LEN);
	memcpy(buf, HEADER_MAGIC, 8);
	ckpt__put_le32(buf + 8, CKPT_FORMAT_VERSION);
	ckpt__put_le32(buf + 12, CKPT_FMT_HEADER_LEN);
	ckpt__put_le64(buf + 16, h->version);
	ckpt__put_le32(buf + 24, h->rank);
	ckpt__put_le32(buf + 28, h->world_size);
	ckpt__put_le64(buf + 32, h->created_ns);
	ckpt__put_le32(buf + 40, CKPT_ALIGN);
	ckpt__put_le32(buf + 44, CKPT_CSUM_ALGO_XXH3_TREE);
	size_t jl = strnlen(h->job, 64);
	memcpy(buf + JOB_FIELD_OFF, h->job, jl);
	ckpt__put_le32(buf + JOB_FIELD_OFF + JOB_FIELD_LEN, (uint32_t)jl);
	ckpt__put_le64(buf + LINEAGE_OFF, h->lineage);
	uint64_t sum = ckpt_kern_hash(buf, HEADER_CSUM_OFF);
	ckpt__put_le64(buf + HEADER_CSUM_OFF, sum);
	return sum;
}

int ckpt__fmt_header_decode(const uint8_t *buf, size_t len, ckpt_fmt_header *h,
                            uint64_t *checksum, char *why, size_t cap)
{
	memset(h, 0, sizeof(*h));
	if (len < CKPT_FMT_HEADER_USED)
		return bad(why, cap, -CKPT_ECORRUPT, "file shorter than a header (%zu bytes)", len);
	if (memcmp(buf, HEADER_MAGIC, 8))
		return bad(why, cap, -CKPT_ECORRUPT, "not a ckpt shard file (bad header magic)");
	uint64_t sum = ckpt__get_le64(buf + HEADER_CSUM_OFF);
	if (sum != ckpt_kern_hash(buf, HEADER_CSUM_OFF))
		return bad(why, cap, -CKPT_ECORRUPT, "header checksum mismatch");
	h->format_version = ckpt__get_le32(buf + 8);
	if (h->format_version == 0 || h->format_version > CKPT_FORMAT_VERSION)
		return bad(why, cap, -CKPT_EFORMAT, "format version %u not supported (this build reads up to %u)",
		           h->format_version, CKPT_FORMAT_VERSION);
	if (ckpt__get_le32(buf + 12) != CKPT_FMT_HEADER_LEN)
		return bad(why, cap, -CKPT_ECORRUPT, "header length %u, expected %u",
		           ckpt__get_le32(buf + 12), CKPT_FMT_HEADER_LEN);
	h->version = ckpt__get_le64(buf + 16);
	h->rank = ckpt__get_le32(buf + 24);
	h->world_size = ckpt__get_le32(buf + 28);
	h->created_ns = ckpt__get_le64(buf + 32);
	h->lineage = ckpt__get_le64(buf + LINEAGE_OFF);
	h->align = ckpt__get_le32(buf + 40);
	h->csum_algo = ckpt__get_le32(buf + 44);
	uint32_t jl = ckpt__get_le32(buf + JOB_FIELD_OFF + JOB_FIELD_LEN);
	if (h->world_size == 0 || h->rank >= h->world_size)
		return bad(why, cap, -CKPT_ECORRUPT, "rank %u not below world size %u", h->rank, h->world_size);
	if (h->align != CKPT_ALIGN)
		return bad(why, cap, -CKPT_EFORMAT, "chunk alignment %u not supported", h->align);
	if (h->csum_algo != CKPT_CSUM_ALGO_XXH3_TREE)
		return bad(why, cap, -CKPT_EFORMAT, "checksum algorithm %u not supported", h->csum_algo);
	if (jl == 0 || jl > 64 || memchr(buf + JOB_FIELD_OFF, 0, jl))
		return bad(why, cap, -CKPT_ECORRUPT, "job id length %u out of range or holding a NUL", jl);
	memcpy(h->job, buf + JOB_FIELD_OFF, jl);
	h->job[jl] = 0;
	if (ckpt__job_valid(h->job) < 0)
		return bad(why, cap, -CKPT_ECORRUPT, "invalid job id in header");
	if (checksum)
		*checksum = sum;
	return 0;
}

/* ------------------------------------------------------------- footer */

size_t ckpt__fmt_region_entry_len(uint32_t ndim, size_t name_len)
{
	return CKPT_FMT_REGION_FIXED + 24u * ndim + CKPT_ALIGN_UP(name_len, 8u);
}

size_t ckpt__fmt_footer_len(const ckpt_fmt_footer *f)
{
	size_t n = CKPT_FMT_FOOTER_FIXED;
	for (uint32_t i = 0; i < f->region_count; i++)
		n += ckpt__fmt_region_entry_len(f->regions[i].ndim, f->regions[i].name_len);
	return n + (size_t)f->chunk_count * CKPT_FMT_CHUNK_ENTRY;
}

size_t ckpt__fmt_trailer_len(const ckpt_fmt_footer *f)
{
	return CKPT_ALIGN_UP(ckpt__fmt_footer_len(f) + CKPT_FMT_TAIL_LEN, CKPT_ALIGN);
}

void ckpt__fmt_trailer_encode(uint8_t *buf, size_t buflen, const ckpt_fmt_footer *f,
                              uint64_t footer_offset, uint64_t header_checksum)
{
	size_t flen = ckpt__fmt_footer_len(f);
	size_t rt = 0;
	for (uint32_t i = 0; i < f->region_count; i++)
		rt += ckpt__fmt_region_entry_len(f->regions[i].ndim, f->regions[i].name_len);
	uint8_t *p = buf;
	memcpy(p, FOOTER_MAGIC, 8);
	ckpt__put_le32(p + 8, CKPT_FORMAT_VERSION);
	ckpt__put_le32(p + 12, f->region_count);
	ckpt__put_le64(p + 16, f->chunk_count);
	ckpt__put_le64(p + 24, rt);
	ckpt__put_le64(p + 32, f->chunk_bytes);
	ckpt__put_le64(p + 40, f->data_bytes);
	ckpt__put_le64(p + 48, f->stored_bytes);
	p += CKPT_FMT_FOOTER_FIXED;
	for (uint32_t i = 0; i < f->region_count; i++) {
		const ckpt_fmt_region *r = &f->regions[i];
		size_t el = ckpt__fmt_region_entry_len(r->ndim, r->name_len);
		ckpt__put_le32(p, (uint32_t)el);
		ckpt__put_le16(p + 4, r->name_len);
		p[6] = r->dtype;
		p[7] = r->ndim;
		ckpt__put_le32(p + 8, r->device);
		ckpt__put_le32(p + 12, r->chunk_count);
		ckpt__put_le64(p + 16, r->bytes);
		ckpt__put_le64(p + 24, r->chunk_first);
		uint8_t *q = p + CKPT_FMT_REGION_FIXED;
		for (unsigned d = 0; d < r->ndim; d++)
			ckpt__put_le64(q + 8 * d, r->global_shape[d]);
		q += 8 * r->ndim;
		for (unsigned d = 0; d < r->ndim; d++)
			ckpt__put_le64(q + 8 * d, r->offsets[d]);
		q += 8 * r->ndim;
		for (unsigned d = 0; d < r->ndim; d++)
			ckpt__put_le64(q + 8 * d, r->extents[d]);
		q += 8 * r->ndim;
		memcpy(q, r->name, r->name_len);
		p += el;
	}
	for (uint64_t i = 0; i < f->chunk_count; i++) {
		const ckpt_fmt_chunk *c = &f->chunks[i];
		ckpt__put_le64(p, c->offset);
		ckpt__put_le32(p + 8, c->stored_len);
		ckpt__put_le32(p + 12, c->raw_len);
		ckpt__put_le32(p + 16, c->flags);
		ckpt__put_le32(p + 20, c->region);
		ckpt__put_le64(p + 24, c->checksum);
		p += CKPT_FMT_CHUNK_ENTRY;
	}
	uint8_t *t = buf + buflen - CKPT_FMT_TAIL_LEN;
	memcpy(t, TAIL_MAGIC, 8);
	ckpt__put_le32(t + 8, CKPT_FORMAT_VERSION);
	ckpt__put_le32(t + 12, CKPT_FMT_TAIL_LEN);
	ckpt__put_le64(t + 16, footer_offset);
	ckpt__put_le64(t + 24, flen);
	ckpt__put_le64(t + 32, ckpt_kern_hash(buf, flen));
	ckpt__put_le64(t + 40, footer_offset + buflen);
	ckpt__put_le64(t + 48, header_checksum);
	ckpt__put_le64(t + 56, ckpt_kern_hash(t, 56));
}

int ckpt__fmt_tail_decode(const uint8_t *buf, size_t len, uint64_t file_length,
                          ckpt_fmt_tail *t, char *why, size_t cap)
{
	memset(t, 0, sizeof(*t));
	if (len < CKPT_FMT_TAIL_LEN)
		return bad(why, cap, -CKPT_ECORRUPT, "file too short for a tail");
	if (memcmp(buf, TAIL_MAGIC, 8))
		return bad(why, cap, -CKPT_ECORRUPT, "no tail at end of file (truncated or not finished)");
	if (ckpt__get_le64(buf + 56) != ckpt_kern_hash(buf, 56))
		return bad(why, cap, -CKPT_ECORRUPT, "tail checksum mismatch");
	t->format_version = ckpt__get_le32(buf + 8);
	if (t->format_version == 0 || t->format_version > CKPT_FORMAT_VERSION)
		return bad(why, cap, -CKPT_EFORMAT, "format version %u not supported", t->format_version);
	if (ckpt__get_le32(buf + 12) != CKPT_FMT_TAIL_LEN)
		return bad(why, cap, -CKPT_ECORRUPT, "tail length field wrong");
	t->footer_offset = ckpt__get_le64(buf + 16);
	t->footer_length = ckpt__get_le64(buf + 24);
	t->footer_checksum = ckpt__get_le64(buf + 32);
	t->file_length = ckpt__get_le64(buf + 40);
	t->header_checksum = ckpt__get_le64(buf + 48);
	if (t->file_length != file_length)
		return bad(why, cap, -CKPT_ECORRUPT, "file is %llu bytes, tail says %llu (truncated or extended)",
		           (unsigned long long)file_length, (unsigned long long)t->file_length);
	if (t->footer_offset < CKPT_FMT_HEADER_LEN || t->footer_offset % CKPT_ALIGN ||
	    t->footer_length < CKPT_FMT_FOOTER_FIXED || t->footer_length > CKPT_FMT_MAX_FOOTER ||
	    t->footer_offset > file_length ||
	    t->footer_length > file_length - t->footer_offset ||
	    file_length - t->footer_offset - t->footer_length < CKPT_FMT_TAIL_LEN)
		return bad(why, cap, -CKPT_ECORRUPT, "footer location (offset %llu, length %llu) outside the file",
		           (unsigned long long)t->footer_offset, (unsigned long long)t->footer_length);
	return 0;
}

void ckpt__fmt_footer_free(ckpt_fmt_footer *f)
{
	if (!f)
		return;
	free(f->regions);
	free(f->chunks);
	f->regions = NULL;
	f->chunks = NULL;
}

/* Decodes region entry i at p (which lies before rend) into f->regions[i].
 * next_chunk and data carry the running chunk index and byte total; *el
 * receives the entry's length. */
static int region_decode(const uint8_t *p, const uint8_t *rend, ckpt_fmt_footer *f, uint32_t i,
                         uint64_t *next_chunk, uint64_t *data, size_t *el_out, char *why, size_t cap)
{
	ckpt_fmt_region *r = &f->regions[i];
	if ((size_t)(rend - p) < CKPT_FMT_REGION_FIXED)
		return bad(why, cap, -CKPT_ECORRUPT, "region %u runs past the region table", i);
	uint32_t el = ckpt__get_le32(p);
	r->name_len = ckpt__get_le16(p + 4);
	r->dtype = p[6];
	r->ndim = p[7];
	r->device = ckpt__get_le32(p + 8);
	r->chunk_count = ckpt__get_le32(p + 12);
	r->bytes = ckpt__get_le64(p + 16);
	r->chunk_first = ckpt__get_le64(p + 24);
	if (r->ndim > CKPT_MAX_DIMS || r->name_len == 0 || r->name_len > CKPT_MAX_NAME ||
	    el != ckpt__fmt_region_entry_len(r->ndim, r->name_len) || el > (size_t)(rend - p))
		return bad(why, cap, -CKPT_ECORRUPT, "region %u entry malformed", i);
	if (r->dtype >= CKPT_DTYPE_COUNT)
		return bad(why, cap, -CKPT_ECORRUPT, "region %u has unknown dtype %u", i, r->dtype);
	const uint8_t *q = p + CKPT_FMT_REGION_FIXED;
	for (unsigned d = 0; d < r->ndim; d++) {
		r->global_shape[d] = ckpt__get_le64(q + 8 * d);
		r->offsets[d] = ckpt__get_le64(q + 8 * (r->ndim + d));
		r->extents[d] = ckpt__get_le64(q + 8 * (2 * r->ndim + d));
		if (r->offsets[d] > r->global_shape[d] || r->extents[d] > r->global_shape[d] - r->offsets[d])
			return bad(why, cap, -CKPT_ECORRUPT, "region %u: part outside the global shape in dim %u", i, d);
	}
	q += 24u * r->ndim;
	memcpy(r->name, q, r->name_len);
	r->name[r->name_len] = 0;
	if (ckpt__region_name_valid(r->name, r->name_len) < 0)
		return bad(why, cap, -CKPT_ECORRUPT, "region %u has an unsafe name", i);
	if (r->chunk_first != *next_chunk || r->chunk_count > f->chunk_count - *next_chunk)
		return bad(why, cap, -CKPT_ECORRUPT, "region '%s' chunk range out of order or out of table", r->name);
	uint64_t want = r->bytes / f->chunk_bytes + (r->bytes % f->chunk_bytes != 0);
	if (want != r->chunk_count)
		return bad(why, cap, -CKPT_ECORRUPT, "region '%s': %llu bytes need %llu chunks, table has %u", r->name,
		           (unsigned long long)r->bytes, (unsigned long long)want, r->chunk_count);
	*next_chunk += r->chunk_count;
	if (r->bytes > UINT64_MAX - *data)
		return bad(why, cap, -CKPT_ECORRUPT, "region sizes overflow");
	*data += r->bytes;
	*el_out = el;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* No two regions share a name: sorted, O(n log n) (2^20 regions allowed). */
static int names_unique(const ckpt_fmt_footer *f, char *why, size_t cap)
{
	if (f->region_count < 2)
		return 0;
	const char **nm = malloc(f->region_count * sizeof(*nm));
	if (!nm)
		return bad(why, cap, -ENOMEM, "out of memory for the region names");
	for (uint32_t i = 0; i < f->region_count; i++)
		nm[i] = f->regions[i].name;
	qsort(nm, f->region_count, sizeof(*nm), by_name);
	int err = 0;
	for (uint32_t i = 1; i < f->region_count && !err; i++)
		if (!strcmp(nm[i - 1], nm[i]))
			err = bad(why, cap, -CKPT_ECORRUPT, "region name '%s' appears twice", nm[i]);
	free(nm);
	return err;
}

static int by_offset(const void *a, const void *b, void *arg)
{
	const ckpt_fmt_chunk *c = arg;
	uint64_t x = c[*(const uint32_t *)a].offset, y = c[*(const uint32_t *)b].offset;
	return x < y ? -1 : x > y;
}

/* Stored ranges are disjoint, so that a reader reads each stored byte once
 * and its work is bounded by the file's size. Writers store chunks in table
 * order: that case is one pass; any other order is sorted (n log n). */
static int ranges_disjoint(const ckpt_fmt_footer *f, char *why, size_t cap)
{
	const ckpt_fmt_chunk *c = f->chunks;
	uint64_t n = f->chunk_count, i;
	for (i = 1; i < n && c[i - 1].offset < c[i].offset; i++)
		if (c[i - 1].stored_len > c[i].offset - c[i - 1].offset)
			break;
	if (i >= n)
		return 0;
	/* chunk_count <= 2^30 / 32: the footer's size bounds it */
	uint32_t *ix = malloc(n * sizeof(*ix));
	if (!ix)
		return bad(why, cap, -ENOMEM, "out of memory for the chunk ranges");
	for (i = 0; i < n; i++)
		ix[i] = (uint32_t)i;
	qsort_r(ix, n, sizeof(*ix), by_offset, (void *)c);
	int err = 0;
	for (i = 1; i < n && !err; i++) {
		const ckpt_fmt_chunk *p = &c[ix[i - 1]], *q = &c[ix[i]];
		if (q->offset - p->offset < p->stored_len)
			err = bad(why, cap, -CKPT_ECORRUPT, "chunks %u and %u store overlapping bytes (at offset %llu)",
			          ix[i - 1], ix[i], (unsigned long long)q->offset);
	}
	free(ix);
	return err;
}

/* Decodes the chunk table at p, region by region (the regions are decoded
 * and cover it exactly), checking each entry against its region and the data
 * area that ends at footer_offset. */
static int chunks_decode(const uint8_t *p, ckpt_fmt_footer *f, uint64_t footer_offset, char *why, size_t cap)
{
	uint64_t stored = 0;
	for (uint32_t ri = 0; ri < f->region_count; ri++) {
		const ckpt_fmt_region *r = &f->regions[ri];
		for (uint32_t k = 0; k < r->chunk_count; k++) {
			uint64_t i = r->chunk_first + k;
			ckpt_fmt_chunk *c = &f->chunks[i];
			const uint8_t *e = p + i * CKPT_FMT_CHUNK_ENTRY;
			c->offset = ckpt__get_le64(e);
			c->stored_len = ckpt__get_le32(e + 8);
			c->raw_len = ckpt__get_le32(e + 12);
			c->flags = ckpt__get_le32(e + 16);
			c->region = ckpt__get_le32(e + 20);
			c->checksum = ckpt__get_le64(e + 24);
			uint64_t want_raw = k + 1 < r->chunk_count ? f->chunk_bytes
			                                           : r->bytes - (uint64_t)k * f->chunk_bytes;
			uint32_t known = CKPT_CHUNK_ZSTD | (0xffu << CKPT_CHUNK_SHUFFLE_SHIFT);
			if (c->region != ri || c->raw_len != want_raw || (c->flags & ~known) ||
			    c->stored_len == 0 ||
			    ((c->flags & CKPT_CHUNK_ZSTD) ? c->stored_len > c->raw_len : c->stored_len != c->raw_len) ||
			    (!(c->flags & CKPT_CHUNK_ZSTD) && (c->flags >> CKPT_CHUNK_SHUFFLE_SHIFT)))
				return bad(why, cap, -CKPT_ECORRUPT, "chunk %llu of region '%s' has an invalid entry",
				           (unsigned long long)k, r->name);
			if (c->offset < CKPT_FMT_HEADER_LEN || c->offset % CKPT_ALIGN ||
			    c->offset > footer_offset || c->stored_len > footer_offset - c->offset)
				return bad(why, cap, -CKPT_ECORRUPT, "chunk %llu of region '%s' lies outside the data area",
				           (unsigned long long)k, r->name);
			stored += c->stored_len;
		}
	}
	if (stored != f->stored_bytes)
		return bad(why, cap, -CKPT_ECORRUPT, "chunks hold %llu stored bytes, footer says %llu",
		           (unsigned long long)stored, (unsigned long long)f->stored_bytes);
	return 0;
}

int ckpt__fmt_footer_decode(const uint8_t *buf, size_t len, uint64_t footer_offset,
                            ckpt_fmt_footer *f, char *why, size_t cap)
{
	memset(f, 0, sizeof(*f));
	if (len < CKPT_FMT_FOOTER_FIXED)
		return bad(why, cap, -CKPT_ECORRUPT, "footer too short");
	if (memcmp(buf, FOOTER_MAGIC, 8))
		return bad(why, cap, -CKPT_ECORRUPT, "bad footer magic");
	uint32_t fv = ckpt__get_le32(buf + 8);
	if (fv == 0 || fv > CKPT_FORMAT_VERSION)
		return bad(why, cap, -CKPT_EFORMAT, "footer version %u not supported", fv);
	uint32_t nreg = ckpt__get_le32(buf + 12);
	uint64_t nchunk = ckpt__get_le64(buf + 16);
	uint64_t rt = ckpt__get_le64(buf + 24);
	f->chunk_bytes = ckpt__get_le64(buf + 32);
	f->data_bytes = ckpt__get_le64(buf + 40);
	f->stored_bytes = ckpt__get_le64(buf + 48);
	if (nreg > CKPT_FMT_MAX_REGIONS)
		return bad(why, cap, -CKPT_ECORRUPT, "region count %u too large", nreg);
	/* The tables must fill the footer exactly; this bounds every count. */
	if (rt > len - CKPT_FMT_FOOTER_FIXED ||
	    (len - CKPT_FMT_FOOTER_FIXED - rt) % CKPT_FMT_CHUNK_ENTRY ||
	    (len - CKPT_FMT_FOOTER_FIXED - rt) / CKPT_FMT_CHUNK_ENTRY != nchunk)
		return bad(why, cap, -CKPT_ECORRUPT, "table sizes (%u regions, %llu chunks) do not match footer length %zu",
		           nreg, (unsigned long long)nchunk, len);
	if (f->chunk_bytes < CKPT_FMT_MIN_CHUNK || f->chunk_bytes > CKPT_FMT_MAX_CHUNK ||
	    f->chunk_bytes % CKPT_ALIGN)
		return bad(why, cap, -CKPT_ECORRUPT, "chunk size %llu invalid", (unsigned long long)f->chunk_bytes);
	if (rt < (uint64_t)nreg * CKPT_FMT_REGION_FIXED)
		return bad(why, cap, -CKPT_ECORRUPT, "region table too small for %u regions", nreg);
	f->region_count = nreg;
	f->chunk_count = nchunk;
	f->regions = calloc(nreg ? nreg : 1, sizeof(*f->regions));
	f->chunks = calloc(nchunk ? nchunk : 1, sizeof(*f->chunks));
	if (!f->regions || !f->chunks) {
		ckpt__fmt_footer_free(f);
		return bad(why, cap, -ENOMEM, "out of memory for footer tables");
	}
	int err;
	const uint8_t *p = buf + CKPT_FMT_FOOTER_FIXED;
	const uint8_t *rend = p + rt;
	uint64_t next_chunk = 0, data = 0;
	for (uint32_t i = 0; i < nreg; i++) {
		size_t el = 0;
		if ((err = region_decode(p, rend, f, i, &next_chunk, &data, &el, why, cap)) < 0)
			goto fail;
		p += el;
	}
	if (p != rend || next_chunk != nchunk) {
		err = bad(why, cap, -CKPT_ECORRUPT, "region table does not cover the chunk table exactly");
		goto fail;
	}
	if ((err = names_unique(f, why, cap)) < 0)
		goto fail;
	if (data != f->data_bytes) {
		err = bad(why, cap, -CKPT_ECORRUPT, "regions hold %llu bytes, footer says %llu",
		          (unsigned long long)data, (unsigned long long)f->data_bytes);
		goto fail;
	}
	if ((err = chunks_decode(p, f, footer_offset, why, cap)) < 0 || (err = ranges_disjoint(f, why, cap)) < 0)
		goto fail;
	return 0;
fail:
	ckpt__fmt_footer_free(f);
	return err;
}

/* ------------------------------------------------------------- shard */

static int shard_parse(ckpt_shard *s, const uint8_t *hdr, size_t hdrlen, const uint8_t *tail,
                       const uint8_t *footer, char *why, size_t cap)
{
	int err;
	uint64_t hsum;
	CKPT_TRY(ckpt__fmt_tail_decode(tail, CKPT_FMT_TAIL_LEN, s->file_length, &s->tail, why, cap));
	if ((err = ckpt__fmt_header_decode(hdr, hdrlen, &s->header, &hsum, why, cap)) < 0)
		return err;
	if (hsum != s->tail.header_checksum)
		return bad(why, cap, -CKPT_ECORRUPT, "header and tail disagree (header checksum)");
	if (!footer)
		return 0;
	if (ckpt_kern_hash(footer, s->tail.footer_length) != s->tail.footer_checksum)
		return bad(why, cap, -CKPT_ECORRUPT, "footer checksum mismatch");
	return ckpt__fmt_footer_decode(footer, s->tail.footer_length, s->tail.footer_offset,
	                               &s->footer, why, cap);
}

int ckpt__shard_parse_mem(const uint8_t *buf, size_t len, ckpt_shard *s, char *why, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->file_length = len;
	if (len < CKPT_FMT_HEADER_LEN + CKPT_FMT_TAIL_LEN)
		return bad(why, cap, -CKPT_ECORRUPT, "file too short (%zu bytes)", len);
	int err = shard_parse(s, buf, len, buf + len - CKPT_FMT_TAIL_LEN, NULL, why, cap);
	if (err < 0)
		return err;
	return shard_parse(s, buf, len, buf + len - CKPT_FMT_TAIL_LEN, buf + s->tail.footer_offset,
	                   why, cap);
}

int ckpt__shard_parse_parts(ckpt_shard *s, uint64_t len, const uint8_t *hdr, size_t hdrlen, const uint8_t *tail,
                            const uint8_t *footer, char *why, size_t cap)
{
	if (!footer) {
		memset(s, 0, sizeof(*s));
		s->fd = -1;
		s->file_length = len;
		if (len < CKPT_FMT_HEADER_LEN + CKPT_FMT_TAIL_LEN)
			return bad(why, cap, -CKPT_ECORRUPT, "image too short (%llu bytes)", (unsigned long long)len);
	}
	return shard_parse(s, hdr, hdrlen, tail, footer, why, cap);
}

int ckpt__shard_open(const char *path, ckpt_shard *s, char *why, size_t cap)
{
	memset(s, 0, sizeof(*s));
	/* Shard files are only ever regular files written in place: a symlink
	 * is not followed (it could name any file the caller, maybe the daemon
	 * running as root, may read), and a FIFO or device cannot block the
	 * open (O_NONBLOCK; reads of a regular file ignore it). */
	s->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (s->fd < 0) {
		int e = errno;
		if (e == ELOOP)
			return bad(why, cap, -CKPT_ECORRUPT, "%s is a symbolic link, not a shard file", path);
		return bad(why, cap, -e, "cannot open %s: %s", path, strerror(e));
	}
	struct stat st;
	uint8_t hdr[CKPT_FMT_HEADER_USED], tail[CKPT_FMT_TAIL_LEN];
	uint8_t *footer = NULL;
	int err;
	if (fstat(s->fd, &st) < 0) {
		err = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		err = bad(why, cap, -CKPT_ECORRUPT, "%s is not a regular file", path);
		goto fail;
	}
	s->file_length = (uint64_t)st.st_size;
	if (s->file_length < CKPT_FMT_HEADER_LEN + CKPT_FMT_TAIL_LEN) {
		err = bad(why, cap, -CKPT_ECORRUPT, "file too short (%llu bytes)", (unsigned long long)s->file_length);
		goto fail;
	}
	if ((err = ckpt__pread_full(s->fd, hdr, sizeof(hdr), 0)) < 0 ||
	    (err = ckpt__pread_full(s->fd, tail, sizeof(tail), s->file_length - CKPT_FMT_TAIL_LEN)) < 0) {
		bad(why, cap, err, "read error: %s", strerror(-err));
		goto fail;
	}
	if ((err = shard_parse(s, hdr, sizeof(hdr), tail, NULL, why, cap)) < 0)
		goto fail;
	footer = malloc(s->tail.footer_length);
	if (!footer) {
		err = -ENOMEM;
		goto fail;
	}
	if ((err = ckpt__pread_full(s->fd, footer, s->tail.footer_length, s->tail.footer_offset)) < 0) {
		bad(why, cap, err, "read error: %s", strerror(-err));
		goto fail;
	}
	if ((err = shard_parse(s, hdr, sizeof(hdr), tail, footer, why, cap)) < 0)
		goto fail;
	free(footer);
	return 0;
fail:
	free(footer);
	close(s->fd);
	s->fd = -1;
	return err;
}

void ckpt__shard_close(ckpt_shard *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	ckpt__fmt_footer_free(&s->footer);
}

int ckpt__shard_find_region(const ckpt_shard *s, const char *name)
{
	for (uint32_t i = 0; i < s->footer.region_count; i++)
		if (!strcmp(s->footer.regions[i].name, name))
			return (int)i;
	return -1;
}
