/* The chunk transforms against independent computations: the tree checksum
 * rebuilt here from libxxhash's one-shot functions, XXH3 test vectors,
 * shuffle layout on a hand-checked case, round trips on odd sizes. */
#include "helpers.h"
#include "ckpt.h"
#include "ckpt_kernels.h"

#include <xxhash.h>
#include <zstd.h>

static uint64_t tree_ref(const uint8_t *p, size_t len)
{
	size_t nleaf = (len + CKPT_CSUM_LEAF - 1) / CKPT_CSUM_LEAF;
	uint8_t *cat = malloc(nleaf * 8 + 1);
	for (size_t i = 0; i < nleaf; i++) {
		size_t off = i * CKPT_CSUM_LEAF, n = len - off < CKPT_CSUM_LEAF ? len - off : CKPT_CSUM_LEAF;
		uint64_t h = XXH3_64bits(p + off, n);
		for (int b = 0; b < 8; b++)
			cat[i * 8 + b] = (uint8_t)(h >> (8 * b));
	}
	uint64_t r = XXH3_64bits_withSeed(cat, nleaf * 8, len);
	free(cat);
	return r;
}

int main(void)
{
	/* XXH3-64 of the empty input, seed 0: the published vector. */
	T_ASSERT(ckpt_kern_hash("", 0) == 0x2D06800538D394C2ull);
	size_t sizes[] = { 0, 1, 7, 63, 64, 65, 4095, 65535, 65536, 65537, 131072, 1000003, 8u << 20 };
	size_t maxn = 8u << 20;
	uint8_t *a = malloc(maxn + 16), *b = malloc(maxn + 16), *c = malloc(maxn + 16);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		t_fill(a, n, n + 1);
		uint64_t s = ckpt_kern_checksum(a, n);
		T_ASSERT(s == tree_ref(a, n));
		if (n) {
			a[n / 2] ^= 0x10; /* one flipped bit changes it */
			T_ASSERT(ckpt_kern_checksum(a, n) != s);
			a[n / 2] ^= 0x10;
		}
		/* Unaligned start gives the same value. */
		memcpy(b + 3, a, n);
		T_ASSERT(ckpt_kern_checksum(b + 3, n) == s);
		/* The fused copy: same checksum, same bytes, to an odd address. */
		memset(c, 0xee, n + 16);
		T_ASSERT(ckpt_kern_checksum_copy(c + 5, a, n) == s);
		T_ASSERT(!memcmp(c + 5, a, n) && c[4] == 0xee && c[n + 5] == 0xee);
	}
	/* Same bytes, different length: different checksum (seed = length). */
	memset(a, 0, 100);
	T_ASSERT(ckpt_kern_checksum(a, 99) != ckpt_kern_checksum(a, 100));

	/* Shuffle: element bytes gathered into planes. */
	uint8_t in[11] = { 0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22 }, out[11], back[11];
	ckpt_kern_shuffle(out, in, 11, 4);
	uint8_t want[11] = { 0, 10, 1, 11, 2, 12, 3, 13, 20, 21, 22 };
	T_ASSERT(!memcmp(out, want, 11));
	ckpt_kern_unshuffle(back, out, 11, 4);
	T_ASSERT(!memcmp(back, in, 11));
	unsigned elems[] = { 1, 2, 3, 4, 8, 16 };
	for (size_t e = 0; e < 6; e++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t n = sizes[i] > 1000003 ? 1000003 : sizes[i];
			t_fill(a, n, 77 + n);
			ckpt_kern_shuffle(b, a, n, elems[e]);
			ckpt_kern_unshuffle(c, b, n, elems[e]);
			T_ASSERT(!memcmp(a, c, n));
		}

	/* XOR delta: applying it twice gives the input back; in place works. */
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i] > 1000003 ? 1000003 : sizes[i];
		t_fill(a, n, 5);
		t_fill(b, n, 6);
		ckpt_kern_xor(c, a, b, n);
		for (size_t k = 0; k < n; k += 4099)
			T_ASSERT(c[k] == (uint8_t)(a[k] ^ b[k]));
		ckpt_kern_xor(c, c, b, n);
		T_ASSERT(!memcmp(c, a, n));
	}

	/* Compression: pays on float-like data with shuffle, refuses noise. */
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	size_t n = 1 << 20;
	float *f = (float *)a;
	for (size_t i = 0; i < n / 4; i++)
		f[i] = 1.0f + (float)(i % 1000) * 1e-3f;
	size_t cap = ckpt_kern_compress_bound(n);
	uint8_t *z = malloc(cap), *scratch = malloc(n);
	size_t zn = ckpt_kern_compress(cc, 1, z, cap, a, n, 4, scratch);
	T_ASSERT(zn > 0 && zn < n / 2);
	T_ASSERT(ckpt_kern_decompress(dc, c, n, z, zn, 4, scratch) == 0);
	T_ASSERT(!memcmp(a, c, n));
	T_ASSERT(ckpt_kern_decompress(dc, c, n - 1, z, zn, 4, scratch) < 0); /* wrong size */
	z[zn / 2] ^= 0xff;
	int r = ckpt_kern_decompress(dc, c, n, z, zn, 4, scratch);
	T_ASSERT(r < 0 || memcmp(a, c, n)); /* garbage never decodes to the original silently */
	t_fill(a, n, 1234);
	T_ASSERT(ckpt_kern_compress(cc, 1, z, cap, a, n, 1, scratch) == 0);
	ZSTD_freeCCtx(cc);
	ZSTD_freeDCtx(dc);
	free(z); free(scratch); free(a); free(b); free(c);
	printf("kernels: ok\n");
	return T_EXIT_PASS;
}
