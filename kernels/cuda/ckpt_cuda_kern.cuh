/* Device code of the chunk transforms: the kernels that ckpt_cuda.cu
 * launches. Kept apart from the launchers so that a host test can run this
 * very code in threads (tests/gpu/cuda_emu.h stands in for the CUDA
 * built-ins there). Include cuda_runtime.h, or that stand-in, first. */
#ifndef CKPT_CUDA_KERN_CUH
#define CKPT_CUDA_KERN_CUH

#include "csum_tree.h"

#define CKPT__THREADS 256u
#define CKPT__GROUPS (CKPT__THREADS / 4u) /* 4 threads (lane pairs) per work item */

/* ------------------------------------------------------------- helpers */

static __device__ __forceinline__ uint64_t ckpt__gtid(void)
{
	return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ __forceinline__ uint64_t ckpt__gstride(void)
{
	return (uint64_t)gridDim.x * blockDim.x;
}

/* ------------------------------------------------------------ checksum */

/* A secret as the kernels read it: words for the stripe and scramble keys,
 * and the two unaligned key runs pre-shifted into words. */
struct ckpt__xsh {
	uint64_t sec[CKPT_XXH3_SECRET_SIZE / 8];
	uint64_t last[8];  /* at CKPT_XXH3_LASTACC_OFF */
	uint64_t merge[8]; /* at CKPT_XXH3_MERGE_OFF */
	uint64_t contrib[CKPT__GROUPS][8];
};

/* Loads the secret for `seed` (the default one for 0); all threads call it. */
static __device__ void ckpt__xsh_set(ckpt__xsh *sh, uint64_t seed)
{
	const unsigned t = threadIdx.x;
	__syncthreads(); /* the previous hash may still read the old secret */
	for (unsigned j = t; j < CKPT_XXH3_SECRET_SIZE / 8; j += blockDim.x)
		sh->sec[j] = ckpt_xxh3_seeded_secret_word(ckpt_xxh3_ksecret(), j, seed);
	__syncthreads();
	if (t < 8) {
		sh->last[t] = ckpt_xxh3_secret_word_at(sh->sec, CKPT_XXH3_LASTACC_OFF + 8 * t);
		sh->merge[t] = ckpt_xxh3_secret_word_at(sh->sec, CKPT_XXH3_MERGE_OFF + 8 * t);
	}
	__syncthreads();
}

/* Item `item` for lanes 2*pair, 2*pair+1, p 16-byte aligned: the 16 loads of
 * a block are issued before any is used, to keep many bytes in flight. */
static __device__ __forceinline__ void ckpt__item_pair_vec(const uint8_t *__restrict__ p, uint64_t len,
                                                           uint64_t item, uint64_t nb, unsigned pair,
                                                           const ckpt__xsh *sh, uint64_t *c0, uint64_t *c1)
{
	const ulonglong2 *b = (const ulonglong2 *)(p + item * CKPT_XXH3_BLOCK) + pair;
	uint64_t a0 = 0, a1 = 0;
	if (item < nb) {
		ulonglong2 v[CKPT_XXH3_STRIPES_PER_BLOCK];
#pragma unroll
		for (unsigned s = 0; s < CKPT_XXH3_STRIPES_PER_BLOCK; s++)
			v[s] = b[4 * s];
#pragma unroll
		for (unsigned s = 0; s < CKPT_XXH3_STRIPES_PER_BLOCK; s++)
			ckpt_xxh3_pair_step(&a0, &a1, v[s].x, v[s].y, sh->sec[s + 2 * pair], sh->sec[s + 2 * pair + 1]);
	} else {
		unsigned ns = ckpt_xxh3_tail_stripes(len);
		for (unsigned s = 0; s < ns; s++) {
			ulonglong2 v = b[4 * s];
			ckpt_xxh3_pair_step(&a0, &a1, v.x, v.y, sh->sec[s + 2 * pair], sh->sec[s + 2 * pair + 1]);
		}
		const uint8_t *st = p + len - CKPT_XXH3_STRIPE + 16 * pair;
		ckpt_xxh3_pair_step(&a0, &a1, ckpt_xxh3_read64(st), ckpt_xxh3_read64(st + 8), sh->last[2 * pair],
		                    sh->last[2 * pair + 1]);
	}
	*c0 = a0;
	*c1 = a1;
}

/* XXH3 of p[0..len), len > 240, with the secret in sh, by the whole block:
 * contributions of up to CKPT__GROUPS items at a time, then threads 0..7
 * fold them into their lanes in order, then warp 0 merges. The result is
 * valid in thread 0. */
static __device__ uint64_t ckpt__xxh3_long_block(const uint8_t *__restrict__ p, uint64_t len, ckpt__xsh *sh)
{
	const unsigned t = threadIdx.x, pair = t & 3u, g = t >> 2, ng = blockDim.x >> 2;
	const uint64_t nb = ckpt_xxh3_long_nblocks(len), items = nb + 1;
	const bool vec = ((uintptr_t)p & 15u) == 0;
	uint64_t acc = ckpt_xxh3_lane_init(t);
	for (uint64_t base = 0; base < items; base += ng) {
		uint64_t item = base + g;
		if (item < items) {
			uint64_t c0, c1;
			if (vec)
				ckpt__item_pair_vec(p, len, item, nb, pair, sh, &c0, &c1);
			else
				ckpt_xxh3_item_pair(p, len, item, pair, (const uint8_t *)sh->sec, &c0, &c1);
			sh->contrib[g][2 * pair] = c0;
			sh->contrib[g][2 * pair + 1] = c1;
		}
		__syncthreads();
		if (t < 8) {
			uint64_t m = items - base < ng ? items - base : ng;
			for (uint64_t j = 0; j < m; j++)
				acc = ckpt_xxh3_lane_fold(acc, sh->contrib[j][t], base + j, len,
				                          sh->sec[CKPT_XXH3_SCRAMBLE_OFF / 8 + t]);
		}
		__syncthreads();
	}
	uint64_t h = 0;
	if (t < 32) {
		unsigned long long other = __shfl_xor_sync(0xffffffffu, (unsigned long long)acc, 1);
		unsigned long long m = 0;
		if (t < 8 && !(t & 1u))
			m = ckpt_xxh3_merge_pair(acc, other, sh->merge[t], sh->merge[t + 1]);
		/* Odd lanes hold 0, so xor 2 and 4 sum lanes 0, 2, 4, 6 into lane 0. */
		m += __shfl_xor_sync(0xffffffffu, m, 2);
		m += __shfl_xor_sync(0xffffffffu, m, 4);
		h = ckpt_xxh3_merge_finish(m, len);
	}
	return h;
}

/* One block per leaf (grid-stride): h_i = XXH3_64bits(leaf_i). */
static __global__ void __launch_bounds__(CKPT__THREADS)
ckpt__leaf_kernel(const uint8_t *__restrict__ data, ckpt_csum_geom geo, uint64_t *__restrict__ leaf)
{
	__shared__ ckpt__xsh sh;
	ckpt__xsh_set(&sh, 0);
	for (uint64_t i = blockIdx.x; i < geo.nleaves; i += gridDim.x) {
		uint64_t off, n;
		ckpt_csum_leaf_locate(&geo, i, &off, &n);
		if (n > CKPT_XXH3_MIDSIZE_MAX) {
			uint64_t h = ckpt__xxh3_long_block(data + off, n, &sh);
			if (threadIdx.x == 0)
				leaf[i] = h;
		} else if (threadIdx.x == 0) {
			leaf[i] = ckpt_xxh3_short(data + off, (size_t)n, 0);
		}
	}
}

/* One block per chunk (grid-stride): the seeded hash over its leaf hashes,
 * which are little-endian u64 in memory as the format wants them. */
static __global__ void __launch_bounds__(CKPT__THREADS)
ckpt__root_kernel(const uint64_t *__restrict__ leaf, ckpt_csum_geom geo, uint64_t *__restrict__ out)
{
	__shared__ ckpt__xsh sh;
	uint64_t have_seed = 0; /* seed 0 never occurs: a chunk has >= 1 byte */
	for (uint64_t k = blockIdx.x; k < geo.nchunks; k += gridDim.x) {
		uint64_t first, n, seed = ckpt_csum_chunk_len(&geo, k);
		ckpt_csum_chunk_leaves(&geo, k, &first, &n);
		const uint8_t *p = (const uint8_t *)(leaf + first);
		if (n <= CKPT_XXH3_MIDSIZE_MAX) {
			if (threadIdx.x == 0)
				out[k] = ckpt_xxh3_short(p, (size_t)n, seed);
			continue;
		}
		/* Chunks share a length (and so a secret) except the last one. */
		if (seed != have_seed) {
			ckpt__xsh_set(&sh, seed);
			have_seed = seed;
		}
		uint64_t h = ckpt__xxh3_long_block(p, n, &sh);
		if (threadIdx.x == 0)
			out[k] = h;
	}
}

/* -------------------------------------------------------------- shuffle */

/* Bytes [from, len) copied as they are (the shuffle's trailing bytes). */
static __device__ __forceinline__ void ckpt__copy_tail(uint8_t *d, const uint8_t *s, uint64_t from,
                                                       uint64_t len)
{
	for (uint64_t i = from + ckpt__gtid(); i < len; i += ckpt__gstride())
		d[i] = s[i];
}

/* Any elem and alignment: one element per thread; a warp still writes 32
 * consecutive bytes of each plane. */
static __global__ void ckpt__shuffle_any(uint8_t *__restrict__ d, const uint8_t *__restrict__ s, uint64_t n,
                                         unsigned elem, uint64_t len)
{
	for (uint64_t i = ckpt__gtid(); i < n; i += ckpt__gstride()) {
		const uint8_t *in = s + i * elem;
		for (unsigned k = 0; k < elem; k++)
			d[k * n + i] = in[k];
	}
	ckpt__copy_tail(d, s, n * elem, len);
}

static __global__ void ckpt__unshuffle_any(uint8_t *__restrict__ d, const uint8_t *__restrict__ s, uint64_t n,
                                           unsigned elem, uint64_t len)
{
	for (uint64_t i = ckpt__gtid(); i < n; i += ckpt__gstride()) {
		uint8_t *out = d + i * elem;
		for (unsigned k = 0; k < elem; k++)
			out[k] = s[k * n + i];
	}
	ckpt__copy_tail(d, s, n * elem, len);
}

/* Byte b of a little-endian array of u32 words. */
static __device__ __forceinline__ uint32_t ckpt__byte(const uint32_t *w, unsigned b)
{
	return w[b >> 2] >> (8 * (b & 3u)) & 0xFFu;
}

/* E in {2, 4, 8}; n % 8 == 0, src 16-aligned, dst 8-aligned: 8 elements per
 * thread, read as 16-byte loads, written as one 8-byte store per plane. */
template <unsigned E>
static __global__ void ckpt__shuffle_vec(uint8_t *__restrict__ d, const uint8_t *__restrict__ s, uint64_t n,
                                         uint64_t len)
{
	const uint64_t ng = n / 8;
	for (uint64_t g = ckpt__gtid(); g < ng; g += ckpt__gstride()) {
		const uint4 *in = (const uint4 *)(s + g * 8 * E);
		uint32_t w[2 * E];
#pragma unroll
		for (unsigned q = 0; q < E / 2; q++) {
			uint4 v = in[q];
			w[4 * q] = v.x;
			w[4 * q + 1] = v.y;
			w[4 * q + 2] = v.z;
			w[4 * q + 3] = v.w;
		}
#pragma unroll
		for (unsigned k = 0; k < E; k++) {
			uint32_t lo = 0, hi = 0;
#pragma unroll
			for (unsigned e = 0; e < 4; e++) {
				lo |= ckpt__byte(w, e * E + k) << (8 * e);
				hi |= ckpt__byte(w, (e + 4) * E + k) << (8 * e);
			}
			*(uint2 *)(d + k * n + g * 8) = make_uint2(lo, hi);
		}
	}
	ckpt__copy_tail(d, s, n * E, len);
}

/* The inverse: src 8-aligned, dst 16-aligned, n % 8 == 0. */
template <unsigned E>
static __global__ void ckpt__unshuffle_vec(uint8_t *__restrict__ d, const uint8_t *__restrict__ s, uint64_t n,
                                           uint64_t len)
{
	const uint64_t ng = n / 8;
	for (uint64_t g = ckpt__gtid(); g < ng; g += ckpt__gstride()) {
		uint32_t w[2 * E];
#pragma unroll
		for (unsigned q = 0; q < 2 * E; q++)
			w[q] = 0;
#pragma unroll
		for (unsigned k = 0; k < E; k++) {
			uint2 v = *(const uint2 *)(s + k * n + g * 8);
#pragma unroll
			for (unsigned e = 0; e < 8; e++) {
				unsigned b = e * E + k;
				uint32_t byte = (e < 4 ? v.x >> (8 * e) : v.y >> (8 * (e - 4))) & 0xFFu;
				w[b >> 2] |= byte << (8 * (b & 3u));
			}
		}
		uint4 *out = (uint4 *)(d + g * 8 * E);
#pragma unroll
		for (unsigned q = 0; q < E / 2; q++)
			out[q] = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
	}
	ckpt__copy_tail(d, s, n * E, len);
}

/* ------------------------------------------------------------------ xor */

/* 16-byte words over [head, head + 16*nvec), bytes elsewhere; with
 * differently aligned pointers nvec is 0 and all of it goes byte-wise. No
 * __restrict__: dst may be a or b. */
static __global__ void ckpt__xor_kernel(uint8_t *d, const uint8_t *a, const uint8_t *b, uint64_t len,
                                        uint64_t head, uint64_t nvec)
{
	const uint64_t i0 = ckpt__gtid(), stride = ckpt__gstride();
	uint4 *dv = (uint4 *)(d + head);
	const uint4 *av = (const uint4 *)(a + head), *bv = (const uint4 *)(b + head);
	for (uint64_t i = i0; i < nvec; i += stride) {
		uint4 x = av[i], y = bv[i];
		dv[i] = make_uint4(x.x ^ y.x, x.y ^ y.y, x.z ^ y.z, x.w ^ y.w);
	}
	for (uint64_t i = i0; i < head; i += stride)
		d[i] = a[i] ^ b[i];
	for (uint64_t i = head + 16 * nvec + i0; i < len; i += stride)
		d[i] = a[i] ^ b[i];
}

#endif
