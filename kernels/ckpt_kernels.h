/* Chunk transforms: the portable C reference of each. A CUDA version of a
 * kernel must give bit-identical output to the function here. */
#ifndef CKPT_KERNELS_H
#define CKPT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* ---- checksum: "xxh3-tree-64k" (algorithm id 1 in the shard format) ----
 * The chunk is cut into leaves of CKPT_CSUM_LEAF bytes (the last may be
 * shorter); leaf i hashes to h_i = XXH3_64bits(leaf_i). The chunk checksum is
 * XXH3_64bits_withSeed(h_0 || h_1 || ... as little-endian u64, seed = len).
 * The leaves are independent, so a GPU hashes them in parallel; the final
 * pass reads 1/8192 of the data. XXH3 itself is the well-kept libxxhash. */
#define CKPT_CSUM_ALGO_XXH3_TREE 1u
#define CKPT_CSUM_LEAF 65536u

uint64_t ckpt_kern_checksum(const void *data, size_t len);

/* Copies len bytes from src to dst (no overlap) and returns the checksum of
 * what landed in dst, leaf by leaf while each leaf is in the cache: the
 * price of a memcpy instead of a memcpy plus a pass over the data. */
uint64_t ckpt_kern_checksum_copy(void *dst, const void *src, size_t len);

/* memcpy with streaming (non-temporal) stores where the CPU has them
 * (x86-64): for a destination far larger than the caches that is not read
 * again at once (a snapshot's staging slots, read next by the disk's DMA
 * and the checksum threads), which plain stores would first read line by
 * line. The same bytes as memcpy; short copies are plain memcpy. */
void ckpt_kern_copy_stream(void *dst, const void *src, size_t len);

/* The same checksum cut for several threads: the leaf hashes of len bytes
 * at src, which begin at a leaf's edge of their chunk, into hashes[0..]
 * (one per leaf, the last leaf possibly short); with dst, each leaf is
 * copied there first and hashed from the copy, as ckpt_kern_checksum_copy.
 * ckpt_kern_checksum_fold then gives the checksum of a chunk of len bytes
 * from all of its leaf hashes, in order: the two equal ckpt_kern_checksum
 * however the chunk's leaves were shared out. */
void ckpt_kern_checksum_leaves(void *dst, const void *src, size_t len, uint64_t *hashes);
uint64_t ckpt_kern_checksum_fold(const uint64_t *hashes, size_t len);

/* The tree checksum of a chunk of len bytes given in pieces, in order, of
 * any sizes (a chunk that spans two upload parts, each read on its own):
 * begin, update with every byte once, end, which returns what
 * ckpt_kern_checksum of the whole would and frees the state (also when
 * fewer or more than len bytes came: then the value is not the chunk's).
 * A piece's whole leaves are hashed where they are; a leaf cut by a
 * piece's edge is gathered (at most 64 KiB). begin returns NULL when out
 * of memory. */
typedef struct ckpt_csum_stream ckpt_csum_stream;
ckpt_csum_stream *ckpt_kern_checksum_begin(size_t len);
void ckpt_kern_checksum_update(ckpt_csum_stream *s, const void *data, size_t n);
uint64_t ckpt_kern_checksum_end(ckpt_csum_stream *s);

/* The tree checksum of data, and its seal (below) in the same pass: each
 * leaf is summed while it is in the cache from hashing it. */
uint64_t ckpt_kern_checksum_sealed(const void *data, size_t len, uint64_t *seal);

/* ---- seal: the node-DRAM copy's restore check (docs/format.md 6.4) ----
 * The bytes, zero-padded to a multiple of 64, as little-endian u64 words
 * w_0, w_1, ...; word i goes to lane i % 8, and each lane keeps
 * a += w, b += a (mod 2^64) in order. The seal is XXH3_64bits_withSeed of
 * a_0..a_7, b_0..b_7 (128 bytes, little-endian), seed = len. Any change
 * confined to one word (every flipped bit or byte) changes a lane's a;
 * the sums cost nothing beside a copy's loads, where the tree checksum
 * costs as much as the copy. It is taken from the same bytes as the tree
 * checksum when a chunk is saved into node DRAM, and checked instead of it
 * when that copy is restored. */
typedef struct ckpt_seal_state {
	uint64_t st[16]; /* a_0..a_7, b_0..b_7 */
	uint64_t len;
} ckpt_seal_state;
void ckpt_kern_seal_init(ckpt_seal_state *s);
/* Adds len bytes of src (a multiple of 64 except in the last update); with
 * dst, copies them there too (no overlap). */
void ckpt_kern_seal_update(ckpt_seal_state *s, void *dst, const void *src, size_t len);
uint64_t ckpt_kern_seal_final(const ckpt_seal_state *s);
uint64_t ckpt_kern_seal(const void *data, size_t len);
/* Copies len bytes to dst and returns the seal of what was read: the
 * price of a memcpy. */
uint64_t ckpt_kern_seal_copy(void *dst, const void *src, size_t len);

/* Plain XXH3-64 of a small record (headers, footers, index values). */
uint64_t ckpt_kern_hash(const void *data, size_t len);

/* ---- byte shuffle ----
 * Gathers byte k of every elem-byte element into plane k, so that the
 * exponents of floats sit together and compress. len need not be a multiple
 * of elem: the trailing len % elem bytes are copied unchanged at the end.
 * elem 1 is a plain copy. dst and src must not overlap. */
void ckpt_kern_shuffle(void *dst, const void *src, size_t len, unsigned elem);
void ckpt_kern_unshuffle(void *dst, const void *src, size_t len, unsigned elem);

/* ---- XOR delta ----
 * dst[i] = a[i] ^ b[i] for i < len; applying it twice gives back the input.
 * dst may equal a or b. */
void ckpt_kern_xor(void *dst, const void *a, const void *b, size_t len);

/* ---- compression: optional byte-shuffle, then zstd ----
 * ckpt_kern_compress writes into dst (cap bytes, at least
 * ckpt_kern_compress_bound(len)) and returns the compressed size, or 0 when
 * compression does not pay (result not at least 1/8 smaller) or failed; the
 * caller then stores the raw bytes. scratch holds len bytes for the shuffle.
 * cctx is a ZSTD_CCtx* owned by the caller (one per thread). */
size_t ckpt_kern_compress_bound(size_t len);
size_t ckpt_kern_compress(void *cctx, int level, void *dst, size_t cap, const void *src,
                          size_t len, unsigned elem, void *scratch);
/* Reverses ckpt_kern_compress: dst must hold exactly raw_len bytes. Returns 0,
 * or -1 if src is not a valid frame or does not decode to raw_len bytes.
 * scratch holds raw_len bytes when elem > 1. dctx is a ZSTD_DCtx*. */
int ckpt_kern_decompress(void *dctx, void *dst, size_t raw_len, const void *src, size_t len,
                         unsigned elem, void *scratch);

#endif
