/* The chunk transforms against independent computations: the tree checksum
 * rebuilt here from libxxhash's one-shot functions (whole and in pieces cut
 * anywhere), XXH3 test vectors,
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

/* The seal as docs/format.md 6.4 defines it, word by word. */
static uint64_t seal_ref(const uint8_t *p, size_t len)
{
	uint64_t a[8] = { 0 }, b[8] = { 0 };
	size_t padded = (len + 63) / 64 * 64;
	for (size_t i = 0; i * 8 < padded; i++) {
		uint64_t w = 0;
		for (int k = 7; k >= 0; k--) {
			size_t at = i * 8 + (size_t)k;
			w = (w << 8) | (at < len ? p[at] : 0);
		}
		a[i % 8] += w;
		b[i % 8] += a[i % 8];
	}
	uint8_t out[128];
	for (int i = 0; i < 16; i++)
		for (int k = 0; k < 8; k++)
			out[i * 8 + k] = (uint8_t)((i < 8 ? a[i] : b[i - 8]) >> (8 * k));
	return XXH3_64bits_withSeed(out, sizeof(out), len);
}

static void seal_tests(uint8_t *a, uint8_t *c, const size_t *sizes, size_t nsizes)
{
	for (size_t i = 0; i < nsizes; i++) {
		size_t n = sizes[i];
		t_fill(a, n, 3 * n + 11);
		uint64_t s = ckpt_kern_seal(a, n), sealed = 0;
		T_ASSERT(s == seal_ref(a, n));
		/* The copy gives the same seal and the same bytes, at odd addresses. */
		memset(c, 0xee, n + 16);
		T_ASSERT(ckpt_kern_seal_copy(c + 5, a + 1, n) == seal_ref(a + 1, n));
		T_ASSERT(!memcmp(c + 5, a + 1, n) && c[4] == 0xee && c[n + 5] == 0xee);
		/* Into an aligned destination (streamed stores on x86-64), from an
		 * odd source: the same again, nothing past either end written. */
		memset(c, 0xee, n + 32);
		T_ASSERT(ckpt_kern_seal_copy(c + 16, a + 3, n) == seal_ref(a + 3, n));
		T_ASSERT(!memcmp(c + 16, a + 3, n) && c[15] == 0xee && c[n + 16] == 0xee);
		/* Taken with the tree checksum in one pass: both as on their own. */
		T_ASSERT(ckpt_kern_checksum_sealed(a, n, &sealed) == ckpt_kern_checksum(a, n) && sealed == s);
		/* In leaf-sized updates, as the checksum feeds it. */
		ckpt_seal_state st;
		ckpt_kern_seal_init(&st);
		for (size_t off = 0; off < n; off += CKPT_CSUM_LEAF)
			ckpt_kern_seal_update(&st, NULL, a + off, n - off < CKPT_CSUM_LEAF ? n - off : CKPT_CSUM_LEAF);
		T_ASSERT(ckpt_kern_seal_final(&st) == s);
		if (!n)
			continue;
		/* Every single flipped bit is caught, wherever it is. */
		for (size_t at = 0; at < n; at += n / 7 + 1)
			for (int bit = 0; bit < 8; bit += 3) {
				a[at] ^= (uint8_t)(1u << bit);
				T_ASSERT(ckpt_kern_seal(a, n) != s);
				a[at] ^= (uint8_t)(1u << bit);
			}
		a[n - 1] ^= 0x80; /* the top bit of the last word */
		T_ASSERT(ckpt_kern_seal(a, n) != s);
		a[n - 1] ^= 0x80;
		if (n >= 128) {
			/* Two words swapped (another lane, then the same lane). */
			uint8_t tmp[8];
			size_t w1 = 8, w2s[2] = { 24, 72 };
			for (int k = 0; k < 2; k++) {
				size_t w2 = w2s[k];
				if (!memcmp(a + w1, a + w2, 8))
					continue;
				memcpy(tmp, a + w1, 8), memcpy(a + w1, a + w2, 8), memcpy(a + w2, tmp, 8);
				T_ASSERT(ckpt_kern_seal(a, n) != s);
				memcpy(tmp, a + w1, 8), memcpy(a + w1, a + w2, 8), memcpy(a + w2, tmp, 8);
			}
		}
	}
	/* docs/format.md 6.4's vectors, D[j] = (7*j) mod 251. */
	static const struct { size_t len; uint64_t seal; } vec[] = {
		{ 0, 0x093c29f27ecfcf21ull }, { 3, 0x62cd66ccc50c6b39ull }, { 64, 0x9b657009ac5bdd05ull },
		{ 65536, 0xa134d3de242e94afull }, { 65537, 0x37a94092550344fbull }, { 200000, 0xc81d62d6bceca9d8ull },
	};
	for (size_t j = 0; j < 200000; j++)
		a[j] = (uint8_t)((7 * j) % 251);
	for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++)
		T_ASSERT(ckpt_kern_seal(a, vec[i].len) == vec[i].seal);
	/* Zero padding is told apart by the length. */
	memset(a, 0, 128);
	T_ASSERT(ckpt_kern_seal(a, 63) != ckpt_kern_seal(a, 64));
}

int main(void)
{
	/* XXH3-64 of the empty input, seed 0: the published vector. */
	T_ASSERT(ckpt_kern_hash("", 0) == 0x2D06800538D394C2ull);
	size_t sizes[] = { 0, 1, 7, 63, 64, 65, 4095, 65535, 65536, 65537, 131072, 1000003, 8u << 20 };
	size_t maxn = 8u << 20;
	uint8_t *a = malloc(maxn + 16), *b = malloc(maxn + 16), *c = aligned_alloc(64, maxn + 64);
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
		/* Leaf hashes taken in parts of whole leaves (as several threads
		 * share a chunk out), folded: the same checksum, with and without
		 * the copy; a flipped bit in one part is not it. */
		{
			size_t nl = n / CKPT_CSUM_LEAF + 1;
			uint64_t *h = calloc(nl, sizeof(*h));
			T_ASSERT(h);
			size_t parts[] = { CKPT_CSUM_LEAF, 3 * CKPT_CSUM_LEAF, 16 * CKPT_CSUM_LEAF };
			for (size_t p = 0; p < 3; p++) {
				for (size_t o = 0; o < n; o += parts[p])
					ckpt_kern_checksum_leaves(NULL, a + o, n - o < parts[p] ? n - o : parts[p],
					                          h + o / CKPT_CSUM_LEAF);
				T_ASSERT(ckpt_kern_checksum_fold(h, n) == s);
				memset(c, 0xee, n + 16);
				for (size_t o = n; o > 0;) { /* last part first: the order does not matter */
					size_t po = (o - 1) / parts[p] * parts[p];
					ckpt_kern_checksum_leaves(c + 5 + po, a + po, o - po, h + po / CKPT_CSUM_LEAF);
					o = po;
				}
				T_ASSERT(ckpt_kern_checksum_fold(h, n) == s);
				T_ASSERT(!memcmp(c + 5, a, n) && c[4] == 0xee && c[n + 5] == 0xee);
			}
			if (n) {
				a[n - 1] ^= 1;
				ckpt_kern_checksum_leaves(NULL, a + (n - 1) / CKPT_CSUM_LEAF * CKPT_CSUM_LEAF,
				                          n - (n - 1) / CKPT_CSUM_LEAF * CKPT_CSUM_LEAF,
				                          h + (n - 1) / CKPT_CSUM_LEAF);
				T_ASSERT(ckpt_kern_checksum_fold(h, n) != s);
				a[n - 1] ^= 1;
			}
			free(h);
		}
		/* In pieces: whole, cut inside and at leaf edges, byte by byte at
		 * the start, pseudo-random cuts; a byte short is not it. */
		size_t cuts[] = { 0, 1, CKPT_CSUM_LEAF - 1, CKPT_CSUM_LEAF, CKPT_CSUM_LEAF + 1, n / 3, n };
		for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
			size_t at = cuts[k] < n ? cuts[k] : n;
			ckpt_csum_stream *cs = ckpt_kern_checksum_begin(n);
			T_ASSERT(cs);
			ckpt_kern_checksum_update(cs, a, at);
			ckpt_kern_checksum_update(cs, a + at, n - at);
			T_ASSERT(ckpt_kern_checksum_end(cs) == s);
		}
		ckpt_csum_stream *cs = ckpt_kern_checksum_begin(n);
		size_t off = 0;
		for (uint64_t x = n * 2654435761u + 1; off < n;) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			size_t k = off < 5 ? 1 : (size_t)(x >> 33) % (3 * CKPT_CSUM_LEAF);
			k = k > n - off ? n - off : k;
			ckpt_kern_checksum_update(cs, a + off, k);
			off += k;
		}
		T_ASSERT(ckpt_kern_checksum_end(cs) == s);
		if (n) {
			cs = ckpt_kern_checksum_begin(n);
			ckpt_kern_checksum_update(cs, a, n - 1);
			T_ASSERT(ckpt_kern_checksum_end(cs) != s);
		}
	}
	seal_tests(a, c, sizes, sizeof(sizes) / sizeof(sizes[0]));
	/* The streaming copy: memcpy's bytes at every length and alignment,
	 * nothing written around them. */
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (size_t da = 0; da < 3; da++) {
			size_t n = sizes[i], doff = da * 7, soff = da * 3;
			t_fill(a, n + 8, n + 5);
			memset(c, 0xee, n + 32);
			ckpt_kern_copy_stream(c + doff, a + soff, n);
			T_ASSERT(!memcmp(c + doff, a + soff, n));
			for (size_t k = 0; k < doff; k++)
				T_ASSERT(c[k] == 0xee);
			T_ASSERT(c[doff + n] == 0xee && c[doff + n + 15] == 0xee);
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
