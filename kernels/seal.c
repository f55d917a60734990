/* The seal (ckpt_kernels.h): a Fletcher-style sum of a chunk's 64-bit
 * words in 8 lanes, cheap enough to ride along with a memcpy. Vectors of 4
 * words through GCC's vector extension: plain SSE2 code on any x86-64, AVX2
 * where the CPU has it (target_clones picks at load time). */
#include "ckpt_kernels.h"

#include <xxhash.h>

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
/* Streaming stores for the copy: a restore's destination is far larger
 * than the caches and not read again soon, so plain stores would first
 * read every line they fill (three passes over memory for a copy instead
 * of two). SSE2 is in every x86-64, whichever clone runs. */
#define SEAL_STREAM 1
#endif

typedef uint64_t ckpt_v4 __attribute__((vector_size(32)));
typedef uint64_t ckpt_v4u __attribute__((vector_size(32), aligned(1)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SEAL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SEAL_CLONES
#endif

/* Four little-endian words at p, into the vector w. A macro: a function
 * returning a 32-byte vector would change its ABI with the target. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define LOAD4(w, p)                                                   \
	do {                                                          \
		(w) = *(const ckpt_v4u *)(p);                         \
		for (int i_ = 0; i_ < 4; i_++)                        \
			(w)[i_] = __builtin_bswap64((w)[i_]);         \
	} while (0)
#else
#define LOAD4(w, p) ((w) = *(const ckpt_v4u *)(p))
#endif

/* Whole 64-byte blocks of p (n a multiple of 64); with dst, each block is
 * also stored there. One loop for both so that the copy and the sum share
 * the loads. */
SEAL_CLONES
static void seal_blocks(uint64_t st[16], uint8_t *dst, const uint8_t *p, size_t n)
{
	ckpt_v4 a0, a1, b0, b1;
	memcpy(&a0, st, 32);
	memcpy(&a1, st + 4, 32);
	memcpy(&b0, st + 8, 32);
	memcpy(&b1, st + 12, 32);
#ifdef SEAL_STREAM
	if (dst && !((uintptr_t)dst & 15)) {
		for (size_t i = 0; i < n; i += 64) {
			ckpt_v4 w0 = *(const ckpt_v4u *)(p + i), w1 = *(const ckpt_v4u *)(p + i + 32);
			__m128i q[4];
			memcpy(q, &w0, 32);
			memcpy(q + 2, &w1, 32);
			for (int k = 0; k < 4; k++)
				_mm_stream_si128((__m128i *)(dst + i) + k, q[k]);
			a0 += w0;
			a1 += w1;
			b0 += a0;
			b1 += a1;
		}
		/* Streamed stores are weakly ordered: visible before whoever
		 * hears that the copy is done reads it. */
		_mm_sfence();
	} else
#endif
	if (dst) {
		for (size_t i = 0; i < n; i += 64) {
			ckpt_v4 w0 = *(const ckpt_v4u *)(p + i), w1 = *(const ckpt_v4u *)(p + i + 32);
			*(ckpt_v4u *)(dst + i) = w0;
			*(ckpt_v4u *)(dst + i + 32) = w1;
			LOAD4(w0, p + i);
			LOAD4(w1, p + i + 32);
			a0 += w0;
			a1 += w1;
			b0 += a0;
			b1 += a1;
		}
	} else {
		for (size_t i = 0; i < n; i += 64) {
			ckpt_v4 w0, w1;
			LOAD4(w0, p + i);
			LOAD4(w1, p + i + 32);
			a0 += w0;
			a1 += w1;
			b0 += a0;
			b1 += a1;
		}
	}
	memcpy(st, &a0, 32);
	memcpy(st + 4, &a1, 32);
	memcpy(st + 8, &b0, 32);
	memcpy(st + 12, &b1, 32);
}

void ckpt_kern_seal_init(ckpt_seal_state *s)
{
	memset(s, 0, sizeof(*s));
}

void ckpt_kern_seal_update(ckpt_seal_state *s, void *dst, const void *src, size_t len)
{
	const uint8_t *p = src;
	uint8_t *d = dst;
	size_t whole = len & ~(size_t)63;
	if (whole)
		seal_blocks(s->st, d, p, whole);
	if (len > whole) {
		/* The last, partial block: zero-padded (only the final update may
		 * have one; the length, in the seed, tells the padding apart). */
		uint8_t blk[64] = { 0 };
		memcpy(blk, p + whole, len - whole);
		if (d)
			memcpy(d + whole, p + whole, len - whole);
		seal_blocks(s->st, NULL, blk, 64);
	}
	s->len += len;
}

uint64_t ckpt_kern_seal_final(const ckpt_seal_state *s)
{
	uint8_t out[128];
	for (int i = 0; i < 16; i++)
		for (int b = 0; b < 8; b++)
			out[i * 8 + b] = (uint8_t)(s->st[i] >> (8 * b));
	return XXH3_64bits_withSeed(out, sizeof(out), (XXH64_hash_t)s->len);
}

uint64_t ckpt_kern_seal(const void *data, size_t len)
{
	ckpt_seal_state s;
	ckpt_kern_seal_init(&s);
	ckpt_kern_seal_update(&s, NULL, data, len);
	return ckpt_kern_seal_final(&s);
}

uint64_t ckpt_kern_seal_copy(void *dst, const void *src, size_t len)
{
	ckpt_seal_state s;
	ckpt_kern_seal_init(&s);
	ckpt_kern_seal_update(&s, dst, src, len);
	return ckpt_kern_seal_final(&s);
}
