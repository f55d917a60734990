/* XXH3-64 for ckpt, written from the algorithm's specification (xxHash's
 * doc/xxhash_spec.md) so that one body of code hashes on the host (plain C,
 * tested bit for bit against libxxhash) and on a CUDA device.
 *
 * Two formulations of the long path (inputs over 240 bytes):
 *  - sequential, the reference: stripes of 64 bytes into 8 accumulators,
 *    a scramble after each block of stripes, then a merge;
 *  - parallel: accumulator lane i only ever reads input words i and i^1 and
 *    only adds within a block, so the sum a block adds to each lane (its
 *    "contribution") depends on nothing but that block's bytes. Any number of
 *    threads compute contributions of different blocks at once; a short chain
 *    per lane then folds them in order with the scrambles, and the lanes
 *    meet only in the merge. The device kernels are built from the
 *    ckpt_xxh3_item_* and ckpt_xxh3_lane_* functions below, which the host
 *    test runs in emulation.
 *
 * Only the default secret (and the one derived from it for a seed) is used,
 * so the secret size is fixed at 192 bytes: 16 stripes per block. */
#ifndef CKPT_XXH3_PORT_H
#define CKPT_XXH3_PORT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define CKPT_HD __host__ __device__ __forceinline__
#else
#define CKPT_HD static inline
#endif

#if !defined(__CUDA_ARCH__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define CKPT_XXH3_BIG_ENDIAN 1
#endif

#define CKPT_XXH3_SECRET_SIZE 192u
#define CKPT_XXH3_STRIPE 64u
#define CKPT_XXH3_STRIPES_PER_BLOCK 16u /* (secret size - stripe) / 8 */
#define CKPT_XXH3_BLOCK 1024u           /* stripe * stripes per block */
#define CKPT_XXH3_MIDSIZE_MAX 240u
#define CKPT_XXH3_SCRAMBLE_OFF 128u     /* secret size - stripe */
#define CKPT_XXH3_LASTACC_OFF 121u      /* secret size - stripe - 7 */
#define CKPT_XXH3_MERGE_OFF 11u

#define CKPT_XXH3_P32_1 0x9E3779B1u
#define CKPT_XXH3_P32_2 0x85EBCA77u
#define CKPT_XXH3_P32_3 0xC2B2AE3Du
#define CKPT_XXH3_P64_1 0x9E3779B185EBCA87ull
#define CKPT_XXH3_P64_2 0xC2B2AE3D27D4EB4Full
#define CKPT_XXH3_P64_3 0x165667B19E3779F9ull
#define CKPT_XXH3_P64_4 0x85EBCA77C2B2AE63ull
#define CKPT_XXH3_P64_5 0x27D4EB2F165667C5ull
#define CKPT_XXH3_PMX_1 0x165667919E3779F9ull
#define CKPT_XXH3_PMX_2 0x9FB21C651E98DF25ull

/* The default secret: constant values of the algorithm. */
#define CKPT_XXH3_KSECRET_BYTES \
	0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, \
	0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, \
	0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, \
	0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c, \
	0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3, \
	0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8, \
	0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, \
	0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, \
	0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, \
	0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, \
	0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, \
	0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e

/* Device code cannot read a host array, so the device gets its own copy. */
static const uint8_t ckpt__xxh3_ksecret_h[CKPT_XXH3_SECRET_SIZE] = { CKPT_XXH3_KSECRET_BYTES };
#ifdef __CUDACC__
static __device__ const uint8_t ckpt__xxh3_ksecret_d[CKPT_XXH3_SECRET_SIZE] = { CKPT_XXH3_KSECRET_BYTES };
#endif

CKPT_HD const uint8_t *ckpt_xxh3_ksecret(void)
{
#ifdef __CUDA_ARCH__
	return ckpt__xxh3_ksecret_d;
#else
	return ckpt__xxh3_ksecret_h;
#endif
}

/* ------------------------------------------------------------ primitives */

CKPT_HD uint64_t ckpt_xxh3_read64(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
	/* The device faults on unaligned wide loads. */
	if (((uintptr_t)p & 7u) == 0)
		return *(const uint64_t *)p;
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
#else
	uint64_t v;
	memcpy(&v, p, 8);
#ifdef CKPT_XXH3_BIG_ENDIAN
	v = __builtin_bswap64(v);
#endif
	return v;
#endif
}

CKPT_HD uint32_t ckpt_xxh3_read32(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
	if (((uintptr_t)p & 3u) == 0)
		return *(const uint32_t *)p;
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
#else
	uint32_t v;
	memcpy(&v, p, 4);
#ifdef CKPT_XXH3_BIG_ENDIAN
	v = __builtin_bswap32(v);
#endif
	return v;
#endif
}

CKPT_HD void ckpt_xxh3_write64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

CKPT_HD uint64_t ckpt_xxh3_rotl64(uint64_t x, unsigned r)
{
	return x << r | x >> (64 - r);
}

CKPT_HD uint64_t ckpt_xxh3_bswap64(uint64_t x)
{
	x = (x & 0x00FF00FF00FF00FFull) << 8 | (x >> 8 & 0x00FF00FF00FF00FFull);
	x = (x & 0x0000FFFF0000FFFFull) << 16 | (x >> 16 & 0x0000FFFF0000FFFFull);
	return x << 32 | x >> 32;
}

CKPT_HD uint32_t ckpt_xxh3_bswap32(uint32_t x)
{
	return x << 24 | (x << 8 & 0x00FF0000u) | (x >> 8 & 0x0000FF00u) | x >> 24;
}

/* Low and high halves of the 128-bit product, xored together. */
CKPT_HD uint64_t ckpt_xxh3_mulfold(uint64_t a, uint64_t b)
{
#if defined(__CUDA_ARCH__)
	return (a * b) ^ __umul64hi(a, b);
#elif defined(__SIZEOF_INT128__)
	__extension__ unsigned __int128 p = (unsigned __int128)a * b;
	return (uint64_t)p ^ (uint64_t)(p >> 64);
#else
	uint64_t lo_lo = (a & 0xFFFFFFFFu) * (b & 0xFFFFFFFFu);
	uint64_t hi_lo = (a >> 32) * (b & 0xFFFFFFFFu);
	uint64_t lo_hi = (a & 0xFFFFFFFFu) * (b >> 32);
	uint64_t hi_hi = (a >> 32) * (b >> 32);
	uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFu) + lo_hi;
	uint64_t hi = (hi_lo >> 32) + (cross >> 32) + hi_hi;
	uint64_t lo = cross << 32 | (lo_lo & 0xFFFFFFFFu);
	return lo ^ hi;
#endif
}

CKPT_HD uint64_t ckpt_xxh3_xxh64_avalanche(uint64_t h)
{
	h ^= h >> 33;
	h *= CKPT_XXH3_P64_2;
	h ^= h >> 29;
	h *= CKPT_XXH3_P64_3;
	h ^= h >> 32;
	return h;
}

CKPT_HD uint64_t ckpt_xxh3_avalanche(uint64_t h)
{
	h ^= h >> 37;
	h *= CKPT_XXH3_PMX_1;
	h ^= h >> 32;
	return h;
}

CKPT_HD uint64_t ckpt_xxh3_rrmxmx(uint64_t h, uint64_t len)
{
	h ^= ckpt_xxh3_rotl64(h, 49) ^ ckpt_xxh3_rotl64(h, 24);
	h *= CKPT_XXH3_PMX_2;
	h ^= (h >> 35) + len;
	h *= CKPT_XXH3_PMX_2;
	h ^= h >> 28;
	return h;
}

/* ------------------------------------------------------ short inputs */

CKPT_HD uint64_t ckpt_xxh3_len_0(const uint8_t *sec, uint64_t seed)
{
	return ckpt_xxh3_xxh64_avalanche(seed ^ ckpt_xxh3_read64(sec + 56) ^ ckpt_xxh3_read64(sec + 64));
}

CKPT_HD uint64_t ckpt_xxh3_len_1to3(const uint8_t *p, size_t len, const uint8_t *sec, uint64_t seed)
{
	uint32_t c1 = p[0], c2 = p[len >> 1], c3 = p[len - 1];
	uint32_t combined = c1 << 16 | c2 << 24 | c3 | (uint32_t)len << 8;
	uint64_t bitflip = (uint64_t)(ckpt_xxh3_read32(sec) ^ ckpt_xxh3_read32(sec + 4)) + seed;
	return ckpt_xxh3_xxh64_avalanche((uint64_t)combined ^ bitflip);
}

CKPT_HD uint64_t ckpt_xxh3_len_4to8(const uint8_t *p, size_t len, const uint8_t *sec, uint64_t seed)
{
	seed ^= (uint64_t)ckpt_xxh3_bswap32((uint32_t)seed) << 32;
	uint32_t in1 = ckpt_xxh3_read32(p), in2 = ckpt_xxh3_read32(p + len - 4);
	uint64_t bitflip = (ckpt_xxh3_read64(sec + 8) ^ ckpt_xxh3_read64(sec + 16)) - seed;
	uint64_t in64 = in2 + ((uint64_t)in1 << 32);
	return ckpt_xxh3_rrmxmx(in64 ^ bitflip, len);
}

CKPT_HD uint64_t ckpt_xxh3_len_9to16(const uint8_t *p, size_t len, const uint8_t *sec, uint64_t seed)
{
	uint64_t bitflip1 = (ckpt_xxh3_read64(sec + 24) ^ ckpt_xxh3_read64(sec + 32)) + seed;
	uint64_t bitflip2 = (ckpt_xxh3_read64(sec + 40) ^ ckpt_xxh3_read64(sec + 48)) - seed;
	uint64_t lo = ckpt_xxh3_read64(p) ^ bitflip1;
	uint64_t hi = ckpt_xxh3_read64(p + len - 8) ^ bitflip2;
	uint64_t acc = len + ckpt_xxh3_bswap64(lo) + hi + ckpt_xxh3_mulfold(lo, hi);
	return ckpt_xxh3_avalanche(acc);
}

CKPT_HD uint64_t ckpt_xxh3_mix16(const uint8_t *p, const uint8_t *sec, uint64_t seed)
{
	uint64_t lo = ckpt_xxh3_read64(p), hi = ckpt_xxh3_read64(p + 8);
	return ckpt_xxh3_mulfold(lo ^ (ckpt_xxh3_read64(sec) + seed), hi ^ (ckpt_xxh3_read64(sec + 8) - seed));
}

CKPT_HD uint64_t ckpt_xxh3_len_17to128(const uint8_t *p, size_t len, const uint8_t *sec, uint64_t seed)
{
	/* Pairs of 16-byte reads from both ends, more pairs for longer input. */
	uint64_t acc = len * CKPT_XXH3_P64_1;
	size_t pairs = (len - 1) / 32 + 1;
	for (size_t i = 0; i < pairs; i++) {
		acc += ckpt_xxh3_mix16(p + 16 * i, sec + 32 * i, seed);
		acc += ckpt_xxh3_mix16(p + len - 16 * (i + 1), sec + 32 * i + 16, seed);
	}
	return ckpt_xxh3_avalanche(acc);
}

CKPT_HD uint64_t ckpt_xxh3_len_129to240(const uint8_t *p, size_t len, const uint8_t *sec, uint64_t seed)
{
	uint64_t acc = len * CKPT_XXH3_P64_1;
	size_t rounds = len / 16;
	for (size_t i = 0; i < 8; i++)
		acc += ckpt_xxh3_mix16(p + 16 * i, sec + 16 * i, seed);
	acc = ckpt_xxh3_avalanche(acc);
	/* Rounds past the eighth reuse the secret from offset 3. */
	for (size_t i = 8; i < rounds; i++)
		acc += ckpt_xxh3_mix16(p + 16 * i, sec + 16 * (i - 8) + 3, seed);
	acc += ckpt_xxh3_mix16(p + len - 16, sec + 136 - 17, seed);
	return ckpt_xxh3_avalanche(acc);
}

/* ------------------------------------------------- long path: lanes */

CKPT_HD uint64_t ckpt_xxh3_lane_init(unsigned lane)
{
	switch (lane & 7u) {
	case 0: return CKPT_XXH3_P32_3;
	case 1: return CKPT_XXH3_P64_1;
	case 2: return CKPT_XXH3_P64_2;
	case 3: return CKPT_XXH3_P64_3;
	case 4: return CKPT_XXH3_P64_4;
	case 5: return CKPT_XXH3_P32_2;
	case 6: return CKPT_XXH3_P64_5;
	default: return CKPT_XXH3_P32_1;
	}
}

/* What one stripe adds to lane i: its own word keyed and multiplied, plus
 * the raw word of its neighbour i^1. */
CKPT_HD uint64_t ckpt_xxh3_lane_step(uint64_t w_self, uint64_t w_partner, uint64_t key)
{
	uint64_t k = w_self ^ key;
	return w_partner + (k & 0xFFFFFFFFu) * (k >> 32);
}

/* Lanes 2*pair and 2*pair+1 of one stripe from one 16-byte load: no
 * exchange between threads is needed. */
CKPT_HD void ckpt_xxh3_pair_step(uint64_t *c0, uint64_t *c1, uint64_t w0, uint64_t w1,
                                 uint64_t k0, uint64_t k1)
{
	*c0 += ckpt_xxh3_lane_step(w0, w1, k0);
	*c1 += ckpt_xxh3_lane_step(w1, w0, k1);
}

CKPT_HD uint64_t ckpt_xxh3_lane_scramble(uint64_t acc, uint64_t key)
{
	acc ^= acc >> 47;
	acc ^= key;
	return acc * CKPT_XXH3_P32_1;
}

/* Work items of a long input: item b < nblocks is block b (16 stripes, then
 * a scramble); item nblocks is the tail (the remaining whole stripes, then
 * the last 64 bytes with their own key, no scramble). */
CKPT_HD uint64_t ckpt_xxh3_long_nblocks(uint64_t len)
{
	return (len - 1) / CKPT_XXH3_BLOCK;
}

CKPT_HD unsigned ckpt_xxh3_tail_stripes(uint64_t len)
{
	return (unsigned)(((len - 1) % CKPT_XXH3_BLOCK) / CKPT_XXH3_STRIPE);
}

/* Contribution of item `item` to lane `lane` (the 8-lane formulation). */
CKPT_HD uint64_t ckpt_xxh3_item_lane(const uint8_t *p, uint64_t len, uint64_t item, unsigned lane,
                                     const uint8_t *sec)
{
	uint64_t nb = ckpt_xxh3_long_nblocks(len);
	unsigned ns = item < nb ? CKPT_XXH3_STRIPES_PER_BLOCK : ckpt_xxh3_tail_stripes(len);
	const uint8_t *b = p + item * CKPT_XXH3_BLOCK;
	uint64_t c = 0;
	for (unsigned s = 0; s < ns; s++) {
		const uint8_t *st = b + (size_t)s * CKPT_XXH3_STRIPE;
		c += ckpt_xxh3_lane_step(ckpt_xxh3_read64(st + 8 * lane), ckpt_xxh3_read64(st + 8 * (lane ^ 1u)),
		                         ckpt_xxh3_read64(sec + 8 * (s + lane)));
	}
	if (item == nb) {
		const uint8_t *st = p + len - CKPT_XXH3_STRIPE;
		c += ckpt_xxh3_lane_step(ckpt_xxh3_read64(st + 8 * lane), ckpt_xxh3_read64(st + 8 * (lane ^ 1u)),
		                         ckpt_xxh3_read64(sec + CKPT_XXH3_LASTACC_OFF + 8 * lane));
	}
	return c;
}

/* The same for lanes 2*pair and 2*pair+1 (the 4-thread formulation the
 * device uses: one 16-byte read per stripe and thread). */
CKPT_HD void ckpt_xxh3_item_pair(const uint8_t *p, uint64_t len, uint64_t item, unsigned pair,
                                 const uint8_t *sec, uint64_t *c0, uint64_t *c1)
{
	uint64_t nb = ckpt_xxh3_long_nblocks(len);
	unsigned ns = item < nb ? CKPT_XXH3_STRIPES_PER_BLOCK : ckpt_xxh3_tail_stripes(len);
	const uint8_t *b = p + item * CKPT_XXH3_BLOCK + 16 * pair;
	*c0 = *c1 = 0;
	for (unsigned s = 0; s < ns; s++) {
		const uint8_t *st = b + (size_t)s * CKPT_XXH3_STRIPE;
		ckpt_xxh3_pair_step(c0, c1, ckpt_xxh3_read64(st), ckpt_xxh3_read64(st + 8),
		                    ckpt_xxh3_read64(sec + 8 * (s + 2 * pair)),
		                    ckpt_xxh3_read64(sec + 8 * (s + 2 * pair + 1)));
	}
	if (item == nb) {
		const uint8_t *st = p + len - CKPT_XXH3_STRIPE + 16 * pair;
		const uint8_t *k = sec + CKPT_XXH3_LASTACC_OFF + 16 * pair;
		ckpt_xxh3_pair_step(c0, c1, ckpt_xxh3_read64(st), ckpt_xxh3_read64(st + 8), ckpt_xxh3_read64(k),
		                    ckpt_xxh3_read64(k + 8));
	}
}

/* Folds item `item`'s contribution into a lane: in item order, one call per
 * item, starting from ckpt_xxh3_lane_init(lane). */
CKPT_HD uint64_t ckpt_xxh3_lane_fold(uint64_t acc, uint64_t contrib, uint64_t item, uint64_t len,
                                     uint64_t scramble_key)
{
	acc += contrib;
	if (item < ckpt_xxh3_long_nblocks(len))
		acc = ckpt_xxh3_lane_scramble(acc, scramble_key);
	return acc;
}

/* Merge term of lanes 2*pair and 2*pair+1; the terms of the four pairs
 * summed go to ckpt_xxh3_merge_finish. */
CKPT_HD uint64_t ckpt_xxh3_merge_pair(uint64_t a0, uint64_t a1, uint64_t k0, uint64_t k1)
{
	return ckpt_xxh3_mulfold(a0 ^ k0, a1 ^ k1);
}

CKPT_HD uint64_t ckpt_xxh3_merge_finish(uint64_t sum, uint64_t len)
{
	return ckpt_xxh3_avalanche(len * CKPT_XXH3_P64_1 + sum);
}

/* Word `off` bytes into a secret held as 24 little-endian words (the device
 * keeps secrets as words; the last-stripe and merge keys are unaligned). */
CKPT_HD uint64_t ckpt_xxh3_secret_word_at(const uint64_t *w, unsigned off)
{
	unsigned i = off >> 3, sh = 8 * (off & 7u);
	return sh ? w[i] >> sh | w[i + 1] << (64 - sh) : w[i];
}

/* Word j of the secret derived for a seed: pairs of words, +seed and -seed. */
CKPT_HD uint64_t ckpt_xxh3_seeded_secret_word(const uint8_t *ksec, unsigned j, uint64_t seed)
{
	uint64_t k = ckpt_xxh3_read64(ksec + 8 * j);
	return (j & 1u) ? k - seed : k + seed;
}

/* --------------------------------------------- long path: sequential */

CKPT_HD void ckpt_xxh3_accumulate_stripe(uint64_t *acc, const uint8_t *st, const uint8_t *key)
{
	for (unsigned i = 0; i < 8; i++) {
		uint64_t v = ckpt_xxh3_read64(st + 8 * i);
		uint64_t k = v ^ ckpt_xxh3_read64(key + 8 * i);
		acc[i ^ 1u] += v;
		acc[i] += (k & 0xFFFFFFFFu) * (k >> 32);
	}
}

CKPT_HD uint64_t ckpt_xxh3_long(const uint8_t *p, uint64_t len, const uint8_t *sec)
{
	uint64_t acc[8];
	for (unsigned i = 0; i < 8; i++)
		acc[i] = ckpt_xxh3_lane_init(i);
	uint64_t nb = ckpt_xxh3_long_nblocks(len);
	for (uint64_t b = 0; b < nb; b++) {
		for (unsigned s = 0; s < CKPT_XXH3_STRIPES_PER_BLOCK; s++)
			ckpt_xxh3_accumulate_stripe(acc, p + b * CKPT_XXH3_BLOCK + (size_t)s * CKPT_XXH3_STRIPE,
			                            sec + 8 * s);
		for (unsigned i = 0; i < 8; i++)
			acc[i] = ckpt_xxh3_lane_scramble(acc[i], ckpt_xxh3_read64(sec + CKPT_XXH3_SCRAMBLE_OFF + 8 * i));
	}
	unsigned ns = ckpt_xxh3_tail_stripes(len);
	for (unsigned s = 0; s < ns; s++)
		ckpt_xxh3_accumulate_stripe(acc, p + nb * CKPT_XXH3_BLOCK + (size_t)s * CKPT_XXH3_STRIPE, sec + 8 * s);
	ckpt_xxh3_accumulate_stripe(acc, p + len - CKPT_XXH3_STRIPE, sec + CKPT_XXH3_LASTACC_OFF);
	uint64_t sum = 0;
	for (unsigned i = 0; i < 8; i += 2)
		sum += ckpt_xxh3_merge_pair(acc[i], acc[i + 1], ckpt_xxh3_read64(sec + CKPT_XXH3_MERGE_OFF + 8 * i),
		                            ckpt_xxh3_read64(sec + CKPT_XXH3_MERGE_OFF + 8 * i + 8));
	return ckpt_xxh3_merge_finish(sum, len);
}

/* The secret derived from the default one for a nonzero seed. */
CKPT_HD void ckpt_xxh3_seeded_secret(uint8_t *out, uint64_t seed)
{
	const uint8_t *k = ckpt_xxh3_ksecret();
	for (unsigned j = 0; j < CKPT_XXH3_SECRET_SIZE / 8; j++)
		ckpt_xxh3_write64(out + 8 * j, ckpt_xxh3_seeded_secret_word(k, j, seed));
}

/* Inputs up to 240 bytes, which read the default secret and the seed. */
CKPT_HD uint64_t ckpt_xxh3_short(const uint8_t *p, size_t len, uint64_t seed)
{
	const uint8_t *k = ckpt_xxh3_ksecret();
	if (len <= 16) {
		if (len > 8)
			return ckpt_xxh3_len_9to16(p, len, k, seed);
		if (len >= 4)
			return ckpt_xxh3_len_4to8(p, len, k, seed);
		if (len)
			return ckpt_xxh3_len_1to3(p, len, k, seed);
		return ckpt_xxh3_len_0(k, seed);
	}
	if (len <= 128)
		return ckpt_xxh3_len_17to128(p, len, k, seed);
	return ckpt_xxh3_len_129to240(p, len, k, seed);
}

/* XXH3_64bits_withSeed; seed 0 gives XXH3_64bits. */
CKPT_HD uint64_t ckpt_xxh3_64_seed(const void *data, size_t len, uint64_t seed)
{
	const uint8_t *p = (const uint8_t *)data;
	if (len <= CKPT_XXH3_MIDSIZE_MAX)
		return ckpt_xxh3_short(p, len, seed);
	if (seed == 0)
		return ckpt_xxh3_long(p, len, ckpt_xxh3_ksecret());
	uint8_t sec[CKPT_XXH3_SECRET_SIZE];
	ckpt_xxh3_seeded_secret(sec, seed);
	return ckpt_xxh3_long(p, len, sec);
}

CKPT_HD uint64_t ckpt_xxh3_64(const void *data, size_t len)
{
	return ckpt_xxh3_64_seed(data, len, 0);
}

#endif
