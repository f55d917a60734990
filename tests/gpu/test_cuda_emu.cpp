/* The CUDA kernels' own code (kernels/cuda/ckpt_cuda_kern.cuh) run on the
 * host in threads (cuda_emu.h), against the C reference: the checksum's
 * leaf and root kernels with several block and grid sizes (multi-round
 * blocks, grid-stride loops, aligned and unaligned data), the wide and the
 * byte-wise shuffle, unshuffle and xor. Checks on machines without a GPU
 * what test_gpu_kernels checks on one. Exit 0 pass, 1 fail. */
#include "cuda_emu.h"

#include "ckpt_cuda_kern.cuh"

extern "C" {
#include "ckpt_kernels.h"
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CKPT_EMU_STATE

static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); if (++failures > 20) exit(1); } } while (0)

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < len; i++) {
		x += 0x9E3779B97F4A7C15ull;
		uint64_t z = x;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		p[i] = (uint8_t)(z ^ (z >> 31));
	}
}

static void check_checksums(const uint8_t *h, uint64_t len, uint64_t chunk, unsigned grid, unsigned block)
{
	ckpt_csum_geom g = ckpt_csum_geom_make(len, chunk);
	std::vector<uint64_t> leaf(g.nleaves + 1, 0), out(g.nchunks + 1, 0);
	ckpt_emu_launch(grid, block, [&] { ckpt__leaf_kernel(h, g, leaf.data()); });
	ckpt_emu_launch(grid, block, [&] { ckpt__root_kernel(leaf.data(), g, out.data()); });
	for (uint64_t k = 0; k < g.nchunks; k++) {
		uint64_t want = ckpt_kern_checksum(h + k * chunk, ckpt_csum_chunk_len(&g, k));
		CHECK(out[k] == want, "len %llu chunk %llu (data %% 16 = %u, %ux%u): chunk %llu: %016llx, C %016llx",
		      (unsigned long long)len, (unsigned long long)chunk, (unsigned)((uintptr_t)h & 15), grid, block,
		      (unsigned long long)k, (unsigned long long)out[k], (unsigned long long)want);
	}
}

static void run_shuffle(uint8_t *d, const uint8_t *s, size_t len, unsigned e, bool vec, bool inverse)
{
	uint64_t n = len / e;
	ckpt_emu_launch(3, 64, [&] {
		if (!vec && inverse)
			ckpt__unshuffle_any(d, s, n, e, len);
		else if (!vec)
			ckpt__shuffle_any(d, s, n, e, len);
		else if (inverse)
			e == 2 ? ckpt__unshuffle_vec<2>(d, s, n, len)
			       : e == 4 ? ckpt__unshuffle_vec<4>(d, s, n, len) : ckpt__unshuffle_vec<8>(d, s, n, len);
		else
			e == 2 ? ckpt__shuffle_vec<2>(d, s, n, len)
			       : e == 4 ? ckpt__shuffle_vec<4>(d, s, n, len) : ckpt__shuffle_vec<8>(d, s, n, len);
	});
}

static void check_shuffle(const uint8_t *s, uint8_t *d, uint8_t *back, size_t len, unsigned e, bool vec)
{
	std::vector<uint8_t> want(len + 1);
	ckpt_kern_shuffle(want.data(), s, len, e);
	run_shuffle(d, s, len, e, vec, false);
	CHECK(memcmp(d, want.data(), len) == 0, "shuffle len %zu elem %u wide %d", len, e, vec);
	run_shuffle(back, d, len, e, vec, true);
	CHECK(memcmp(back, s, len) == 0, "unshuffle len %zu elem %u wide %d", len, e, vec);
}

static void check_xor(uint8_t *d, const uint8_t *a, const uint8_t *b, size_t len)
{
	std::vector<uint8_t> want(len + 1);
	ckpt_kern_xor(want.data(), a, b, len);
	/* The launcher's split: 16-byte words when all three agree mod 16. */
	uint64_t head = 0, nvec = 0;
	uintptr_t da = (uintptr_t)d % 16;
	if ((uintptr_t)a % 16 == da && (uintptr_t)b % 16 == da) {
		head = (16 - da) % 16;
		head = head > len ? len : head;
		nvec = (len - head) / 16;
	}
	ckpt_emu_launch(3, 64, [&] { ckpt__xor_kernel(d, a, b, len, head, nvec); });
	CHECK(memcmp(d, want.data(), len) == 0, "xor len %zu (%u %u %u)", len, (unsigned)da,
	      (unsigned)((uintptr_t)a % 16), (unsigned)((uintptr_t)b % 16));
}

int main(void)
{
	const size_t max = 2101248; /* 2 MiB + a bit, a multiple of 64 for aligned_alloc */
	uint8_t *h = (uint8_t *)aligned_alloc(64, max), *h2 = (uint8_t *)aligned_alloc(64, max);
	uint8_t *d = (uint8_t *)aligned_alloc(64, max), *back = (uint8_t *)aligned_alloc(64, max);
	if (!h || !h2 || !d || !back)
		return 1;
	fill(h, max, 1);
	fill(h2, max, 2);

	/* Leaves long and short, roots short (<= 30 leaves) and long, the
	 * shorter last chunk; 16-aligned data (wide loads) and not. */
	static const uint64_t lens[] = { 1, 241, 1025, 65536 + 7, 1000003, 31 * 65536 + 5 };
	static const uint64_t chunks[] = { 4096, 65536, 100000, 31 * 65536, 8u << 20 };
	for (uint64_t len : lens)
		for (uint64_t c : chunks)
			for (unsigned off : { 0u, 3u })
				if (off == 0 || len >= 65536)
					check_checksums(h + off, len, c, 3, 128);
	/* The launchers' block size; fewer threads than items (several rounds
	 * per leaf); a single block. */
	check_checksums(h + 8, 1000003, 100000, 3, 256);
	check_checksums(h, 1000003, 65536, 2, 64);
	check_checksums(h + 5, 31 * 65536 + 5, 31 * 65536, 1, 32);
	check_checksums(h, 31 * 65536 + 5, 1ull << 30, 1, 64);

	for (size_t len : { (size_t)0, (size_t)7, (size_t)64, (size_t)65537, (size_t)100003 })
		for (unsigned e : { 2u, 4u, 8u }) {
			check_shuffle(h, d, back, len, e, false);
			check_shuffle(h + 1, d + 3, back + 5, len, e, false);
			if ((len / e) % 8 == 0)
				check_shuffle(h, d, back, len, e, true);
		}
	check_shuffle(h, d, back, 6400 * 8 + 3, 8, true);
	check_shuffle(h, d, back, 100003, 3, false);

	for (size_t len : { (size_t)1, (size_t)15, (size_t)100003 })
		for (unsigned off : { 0u, 1u, 8u }) {
			check_xor(d + off, h + off, h2 + off, len);
			check_xor(d + off, h + off, h2 + off + 1, len);
		}

	free(h);
	free(h2);
	free(d);
	free(back);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("cuda kernels (emulated): all checks passed\n");
	return 0;
}
