/* The global view of a version: every rank's region table merged into one
 * table of global tensors, each with the pieces the ranks hold (offsets and
 * extents from the footers, docs/format.md 4.2), checked for consistency;
 * and reads of any box of a global tensor, chunk by chunk, from whatever
 * source delivers a rank's verified chunks (a file, a DRAM image, a
 * partner). Used by elastic restore (src/reshard.c), the public read API
 * (src/view.c) and, through it, `ckpt export` and `ckpt show --global`.
 *
 * Rules (docs/format.md, "Global tensors"):
 *  - a name with ndim > 0 anywhere is a tensor: every rank holding it must
 *    agree on dtype, ndim and global shape, and each piece's bytes must be
 *    prod(extents) * dtype size;
 *  - two pieces with the same box are replicas: accepted when their chunk
 *    checksums agree (the same bytes), the lowest rank's read; any other
 *    overlap of two pieces is an error naming both ranks;
 *  - elements no piece holds (gaps) are counted, not an error of the view:
 *    a read of a box that needs them fails with -CKPT_EMISMATCH;
 *  - a name with ndim 0 on every rank is a blob: one copy per rank, read
 *    whole from one rank's copy.
 * Work is bounded: sorting, and a sweep over the pieces' boundaries (no
 * comparison of every piece with every other). */
#ifndef CKPT_GLOBAL_H
#define CKPT_GLOBAL_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

typedef struct ckpt_gpiece {
	uint32_t rank;   /* whose shard */
	uint32_t region; /* index in that shard's region table */
	const uint64_t *off, *ext; /* into that footer's region entry */
	uint32_t replicas; /* other ranks holding the same box with the same bytes */
} ckpt_gpiece;

typedef struct ckpt_gtensor {
	const char *name;    /* borrowed from a footer */
	uint8_t dtype;
	uint8_t ndim;        /* 0: a blob */
	const uint64_t *shape;
	uint64_t elems;      /* prod(shape); blobs: bytes of the first copy */
	uint64_t bytes;      /* elems * dtype size */
	uint64_t missing;    /* elements no piece holds */
	uint32_t npieces;
	ckpt_gpiece *pieces; /* tensors: sorted by offsets, replicas folded; blobs: by rank */
} ckpt_gtensor;

typedef struct ckpt_gview {
	uint32_t nranks;
	const ckpt_fmt_footer *const *footers; /* borrowed, one per rank */
	uint32_t ntensors;
	ckpt_gtensor *tensors; /* sorted by name */
	ckpt_gpiece *store;
} ckpt_gview;

/* Builds v from nranks footers (footers[r] is rank r's; they must outlive
 * v). Returns 0, -ENOMEM, or -CKPT_ECORRUPT with why naming the region and
 * ranks (shapes disagreeing, overlapping pieces, a piece's size wrong). */
int ckpt__gview_build(ckpt_gview *v, const ckpt_fmt_footer *const *footers, uint32_t nranks, char *why,
                      size_t cap);
void ckpt__gview_free(ckpt_gview *v);
/* The tensor named name, or NULL. */
const ckpt_gtensor *ckpt__gview_find(const ckpt_gview *v, const char *name);
size_t ckpt__dtype_size(uint8_t dtype);

/* A rank's verified chunks: called with each chunk the reader asked for,
 * its raw bytes after decompression and checksum. */
typedef int (*ckpt_gchunk_fn)(void *arg, uint64_t chunk, const void *raw, size_t len);
typedef struct ckpt_gsource {
	/* Reads chunks[0..n) (ascending indices into rank's chunk table),
	 * verifying each, and calls fn once for each, in any order. Returns 0
	 * or an error (why says). */
	int (*read)(void *self, uint32_t rank, const uint64_t *chunks, size_t n, ckpt_gchunk_fn fn, void *arg,
	            char *why, size_t cap);
	void *self;
} ckpt_gsource;

/* Where the bytes of a read go: dst_off is the byte offset in the dense
 * row-major box (or in the blob). */
typedef int (*ckpt_gput_fn)(void *arg, uint64_t dst_off, const void *data, size_t len);

/* Reads box [lo, lo+cnt) of tensor t (ndim > 0) into put, as a dense
 * row-major array of prod(cnt) elements. Only the chunks that hold bytes of
 * the box are read. Returns 0; -EINVAL (box outside the shape);
 * -CKPT_EMISMATCH when pieces do not cover the box (why says how much is
 * missing); the source's error. */
int ckpt__gread_box(const ckpt_gview *v, const ckpt_gtensor *t, const uint64_t *lo, const uint64_t *cnt,
                    const ckpt_gsource *src, ckpt_gput_fn put, void *arg, char *why, size_t cap);
/* Reads bytes [off, off+len) of a blob's copy held by piece p of t. */
int ckpt__gread_blob(const ckpt_gview *v, const ckpt_gtensor *t, const ckpt_gpiece *p, uint64_t off,
                     uint64_t len, const ckpt_gsource *src, ckpt_gput_fn put, void *arg, char *why, size_t cap);
/* Bytes [off, off+len) of tensor t in row-major order (any t): split into
 * boxes for tensors; for blobs, from the copy of rank `blob_rank` if it
 * holds one, else the lowest rank's. */
int ckpt__gread_range(const ckpt_gview *v, const ckpt_gtensor *t, uint64_t off, uint64_t len, uint32_t blob_rank,
                      const ckpt_gsource *src, ckpt_gput_fn put, void *arg, char *why, size_t cap);

/* Verifies chunk ci of footer f whose stored bytes are at stored: decodes
 * (zstd, shuffle) into *plain when needed and checks the checksum. *raw
 * receives the raw bytes. dctx/plain/scratch are the caller's, allocated on
 * first use (free with ckpt__chunk_scratch_free). */
typedef struct ckpt_chunk_scratch {
	void *dctx;
	uint8_t *plain, *shuf;
} ckpt_chunk_scratch;
int ckpt__chunk_verify(const ckpt_fmt_footer *f, uint64_t ci, const uint8_t *stored, ckpt_chunk_scratch *cs,
                       const uint8_t **raw, char *why, size_t cap);
void ckpt__chunk_scratch_free(ckpt_chunk_scratch *cs);

/* Reads chunks[0..n) of the shard file at path (s opened from it) through
 * the storage backend, depth reads in flight, O_DIRECT when direct, each
 * verified, into fn. bufs: nbufs caller buffers of buf_bytes (aligned), or
 * NULL to allocate. */
typedef struct ckpt_chunk_read_opts {
	const char *backend;
	uint32_t depth;
	int direct;
	uint8_t **bufs;
	uint32_t nbufs;
	size_t buf_bytes;
} ckpt_chunk_read_opts;
int ckpt__chunks_read_file(const char *path, const ckpt_shard *s, const ckpt_chunk_read_opts *o,
                           const uint64_t *chunks, size_t n, ckpt_gchunk_fn fn, void *arg, char *why, size_t cap);
/* The same from a shard image in memory. */
int ckpt__chunks_read_mem(const uint8_t *img, uint64_t len, const ckpt_shard *s, const uint64_t *chunks, size_t n,
                          ckpt_gchunk_fn fn, void *arg, char *why, size_t cap);

#endif
