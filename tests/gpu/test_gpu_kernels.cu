/* The CUDA chunk transforms (kernels/cuda) against their C reference
 * (kernels/checksum.c, shuffle.c, delta.c): region checksums, shuffle,
 * unshuffle and xor, on random data of odd sizes and offsets. Then the
 * device throughput of each kernel on 1 GiB next to a device-to-device
 * cudaMemcpy of the same bytes, as lines
 *   BENCH kernel=<name> bytes=<n> gbps=<x> memcpy_gbps=<y> ratio=<x/y>
 * for the GPU benchmark script (CKPT_GPU_BENCH=0 skips them).
 * Exit 0 pass, 1 fail, 77 no device. */
#include "ckpt_cuda.h"
extern "C" {
#include "ckpt_kernels.h"
}

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_SKIP 77

static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); if (++failures > 20) exit(1); } } while (0)
/* A CUDA call that must work: anything else ends the test. */
#define CU(expr) do { cudaError_t cu__e = (cudaError_t)(expr); if (cu__e != cudaSuccess) { \
	fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(cu__e)); \
	exit(1); } } while (0)

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < len; i += 8) {
		x += 0x9E3779B97F4A7C15ull;
		uint64_t z = x;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		z ^= z >> 31;
		size_t n = len - i < 8 ? len - i : 8;
		memcpy(p + i, &z, n);
	}
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

#define GUARD 0xA5A5A5A5A5A5A5A5ull

/* Checksums of h (len bytes) copied to the device at byte offset off. */
static void check_checksums(const uint8_t *h, uint64_t len, uint64_t chunk, unsigned off, cudaStream_t st)
{
	uint64_t nchunks = len / chunk + (len % chunk != 0);
	uint64_t nleaf = ckpt_cuda_leaf_scratch_count(len, chunk);
	uint8_t *d;
	uint64_t *d_leaf, *d_out;
	CU(cudaMalloc((void **)&d, len + off + 1));
	CU(cudaMalloc((void **)&d_leaf, (nleaf + 1) * 8));
	CU(cudaMalloc((void **)&d_out, (nchunks + 1) * 8));
	CU(cudaMemcpy(d + off, h, len, cudaMemcpyHostToDevice));
	/* A guard after each array catches writes past the sizes promised. */
	uint64_t *out = (uint64_t *)xmalloc((nchunks + 1) * 8);
	for (uint64_t k = 0; k <= nchunks; k++)
		out[k] = GUARD;
	CU(cudaMemcpy(d_out, out, (nchunks + 1) * 8, cudaMemcpyHostToDevice));
	CU(cudaMemcpy(d_leaf + nleaf, out, 8, cudaMemcpyHostToDevice));
	CU(ckpt_cuda_region_checksums(d + off, len, chunk, d_leaf, d_out, st));
	CU(cudaStreamSynchronize(st));
	CU(cudaMemcpy(out, d_out, (nchunks + 1) * 8, cudaMemcpyDeviceToHost));
	uint64_t leaf_guard;
	CU(cudaMemcpy(&leaf_guard, d_leaf + nleaf, 8, cudaMemcpyDeviceToHost));
	CHECK(out[nchunks] == GUARD && leaf_guard == GUARD, "len %llu chunk %llu: wrote past the end",
	      (unsigned long long)len, (unsigned long long)chunk);
	for (uint64_t k = 0; k < nchunks; k++) {
		uint64_t clen = len - k * chunk < chunk ? len - k * chunk : chunk;
		uint64_t want = ckpt_kern_checksum(h + k * chunk, clen);
		CHECK(out[k] == want, "len %llu chunk %llu off %u: chunk %llu: device %016llx, C %016llx",
		      (unsigned long long)len, (unsigned long long)chunk, off, (unsigned long long)k,
		      (unsigned long long)out[k], (unsigned long long)want);
	}
	free(out);
	CU(cudaFree(d));
	CU(cudaFree(d_leaf));
	CU(cudaFree(d_out));
}

/* Shuffle, unshuffle and xor of h (len bytes) at the given device offsets. */
static void check_transforms(const uint8_t *h, const uint8_t *h2, size_t len, unsigned off_src,
                             unsigned off_dst, cudaStream_t st)
{
	uint8_t *d_src, *d_dst, *d_back, *d_b;
	CU(cudaMalloc((void **)&d_src, len + 32));
	CU(cudaMalloc((void **)&d_dst, len + 32));
	CU(cudaMalloc((void **)&d_back, len + 32));
	CU(cudaMalloc((void **)&d_b, len + 32));
	CU(cudaMemcpy(d_src + off_src, h, len, cudaMemcpyHostToDevice));
	CU(cudaMemcpy(d_b + off_src, h2, len, cudaMemcpyHostToDevice));
	uint8_t *want = (uint8_t *)xmalloc(len), *got = (uint8_t *)xmalloc(len + 32);
	static const unsigned elems[] = { 1, 2, 3, 4, 8, 16 };
	for (size_t i = 0; i < sizeof(elems) / sizeof(elems[0]); i++) {
		unsigned e = elems[i];
		ckpt_kern_shuffle(want, h, len, e);
		CU(cudaMemset(d_dst, 0x5A, len + 32));
		CU(ckpt_cuda_shuffle(d_dst + off_dst, d_src + off_src, len, e, st));
		CU(cudaStreamSynchronize(st));
		CU(cudaMemcpy(got, d_dst, len + 32, cudaMemcpyDeviceToHost));
		CHECK(memcmp(got + off_dst, want, len) == 0, "shuffle len %zu elem %u offs %u/%u", len, e, off_src,
		      off_dst);
		CHECK(got[off_dst + len] == 0x5A && (off_dst == 0 || got[off_dst - 1] == 0x5A),
		      "shuffle len %zu elem %u: wrote outside", len, e);
		/* Back from the device's own shuffled bytes, to the other offset. */
		CU(ckpt_cuda_unshuffle(d_back + off_src, d_dst + off_dst, len, e, st));
		CU(cudaStreamSynchronize(st));
		CU(cudaMemcpy(got, d_back + off_src, len, cudaMemcpyDeviceToHost));
		CHECK(memcmp(got, h, len) == 0, "unshuffle len %zu elem %u offs %u/%u", len, e, off_dst, off_src);
		ckpt_kern_unshuffle(want, h, len, e);
		CU(ckpt_cuda_unshuffle(d_dst + off_dst, d_src + off_src, len, e, st));
		CU(cudaStreamSynchronize(st));
		CU(cudaMemcpy(got, d_dst + off_dst, len, cudaMemcpyDeviceToHost));
		CHECK(memcmp(got, want, len) == 0, "unshuffle (C layout) len %zu elem %u offs %u/%u", len, e, off_src,
		      off_dst);
	}
	ckpt_kern_xor(want, h, h2, len);
	CU(ckpt_cuda_xor(d_dst + off_dst, d_src + off_src, d_b + off_src, len, st));
	CU(cudaStreamSynchronize(st));
	CU(cudaMemcpy(got, d_dst + off_dst, len, cudaMemcpyDeviceToHost));
	CHECK(memcmp(got, want, len) == 0, "xor len %zu offs %u/%u", len, off_src, off_dst);
	/* In place: dst == a. */
	CU(ckpt_cuda_xor(d_src + off_src, d_src + off_src, d_b + off_src, len, st));
	CU(cudaStreamSynchronize(st));
	CU(cudaMemcpy(got, d_src + off_src, len, cudaMemcpyDeviceToHost));
	CHECK(memcmp(got, want, len) == 0, "xor in place len %zu off %u", len, off_src);
	free(want);
	free(got);
	CU(cudaFree(d_src));
	CU(cudaFree(d_dst));
	CU(cudaFree(d_back));
	CU(cudaFree(d_b));
}

/* ------------------------------------------------------------ throughput */

typedef int (*bench_fn)(void *ctx, cudaStream_t st);

struct bench_ctx {
	uint8_t *a, *b, *c;
	uint64_t *leaf, *out;
	size_t len;
	unsigned elem;
};

static int b_memcpy(void *p, cudaStream_t st)
{
	struct bench_ctx *c = (struct bench_ctx *)p;
	return cudaMemcpyAsync(c->b, c->a, c->len, cudaMemcpyDeviceToDevice, st);
}

static int b_checksum(void *p, cudaStream_t st)
{
	struct bench_ctx *c = (struct bench_ctx *)p;
	return ckpt_cuda_region_checksums(c->a, c->len, 8u << 20, c->leaf, c->out, st);
}

static int b_shuffle(void *p, cudaStream_t st)
{
	struct bench_ctx *c = (struct bench_ctx *)p;
	return ckpt_cuda_shuffle(c->b, c->a, c->len, c->elem, st);
}

static int b_unshuffle(void *p, cudaStream_t st)
{
	struct bench_ctx *c = (struct bench_ctx *)p;
	return ckpt_cuda_unshuffle(c->b, c->a, c->len, c->elem, st);
}

static int b_xor(void *p, cudaStream_t st)
{
	struct bench_ctx *c = (struct bench_ctx *)p;
	return ckpt_cuda_xor(c->c, c->a, c->b, c->len, st);
}

/* GB/s (10^9 bytes of input per second), best of a few timed runs. */
static double bench(bench_fn fn, struct bench_ctx *c, cudaStream_t st)
{
	cudaEvent_t e0, e1;
	CU(cudaEventCreate(&e0));
	CU(cudaEventCreate(&e1));
	CU(fn(c, st)); /* warm up */
	CU(cudaStreamSynchronize(st));
	float best = 0;
	for (int i = 0; i < 5; i++) {
		CU(cudaEventRecord(e0, st));
		CU(fn(c, st));
		CU(cudaEventRecord(e1, st));
		CU(cudaEventSynchronize(e1));
		float ms;
		CU(cudaEventElapsedTime(&ms, e0, e1));
		if (i == 0 || ms < best)
			best = ms;
	}
	CU(cudaEventDestroy(e0));
	CU(cudaEventDestroy(e1));
	return (double)c->len / (best * 1e-3) / 1e9;
}

static void run_bench(cudaStream_t st)
{
	struct bench_ctx c;
	memset(&c, 0, sizeof(c));
	c.len = (size_t)1 << 30;
	uint64_t nleaf = ckpt_cuda_leaf_scratch_count(c.len, 8u << 20);
	if (cudaMalloc((void **)&c.a, c.len) != cudaSuccess || cudaMalloc((void **)&c.b, c.len) != cudaSuccess ||
	    cudaMalloc((void **)&c.c, c.len) != cudaSuccess || cudaMalloc((void **)&c.leaf, nleaf * 8) != cudaSuccess ||
	    cudaMalloc((void **)&c.out, (c.len >> 23) * 8) != cudaSuccess) {
		(void)cudaGetLastError();
		printf("BENCH skipped: not enough device memory for 3 x 1 GiB\n");
		goto out;
	}
	CU(cudaMemset(c.a, 0x3C, c.len));
	CU(cudaMemset(c.b, 0x69, c.len));
	{
		double mc = bench(b_memcpy, &c, st);
		static const struct { const char *name; bench_fn fn; unsigned elem; } runs[] = {
			{ "checksum", b_checksum, 0 },  { "shuffle2", b_shuffle, 2 },
			{ "shuffle4", b_shuffle, 4 },   { "shuffle8", b_shuffle, 8 },
			{ "unshuffle4", b_unshuffle, 4 }, { "xor", b_xor, 0 },
		};
		printf("BENCH kernel=memcpy_d2d bytes=%zu gbps=%.1f memcpy_gbps=%.1f ratio=1.00\n", c.len, mc, mc);
		for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
			c.elem = runs[i].elem;
			double g = bench(runs[i].fn, &c, st);
			printf("BENCH kernel=%s bytes=%zu gbps=%.1f memcpy_gbps=%.1f ratio=%.2f\n", runs[i].name, c.len, g,
			       mc, g / mc);
		}
	}
out:
	cudaFree(c.a);
	cudaFree(c.b);
	cudaFree(c.c);
	cudaFree(c.leaf);
	cudaFree(c.out);
}

int main(void)
{
	if (ckpt_cuda_device_count() <= 0) {
		printf("no CUDA device: skipped\n");
		return T_SKIP;
	}
	cudaDeviceProp prop;
	CU(cudaGetDeviceProperties(&prop, 0));
	printf("device: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
	cudaStream_t st;
	CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

	const size_t big = ((size_t)64 << 20) + 5;
	uint8_t *h = (uint8_t *)xmalloc(big), *h2 = (uint8_t *)xmalloc(big);
	fill(h, big, 1);
	fill(h2, big, 2);

	/* Nothing queued, nothing written for an empty region; chunk 0 refused. */
	CHECK(ckpt_cuda_leaf_scratch_count(0, 65536) == 0, "scratch for 0 bytes");
	CHECK(ckpt_cuda_region_checksums(NULL, 0, 65536, NULL, NULL, st) == 0, "empty region");
	CHECK(ckpt_cuda_region_checksums(h, 10, 0, NULL, NULL, st) == cudaErrorInvalidValue, "chunk 0");

	static const size_t lens[] = { 1, 7, 240, 241, 4095, 65535, 65537, 1000003 };
	static const uint64_t chunks[] = { 4096, 65536, 100000, 30u * 65536, 31u * 65536, 8u << 20, 1ull << 30 };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t j = 0; j < sizeof(chunks) / sizeof(chunks[0]); j++)
			for (unsigned off = 0; off < 16; off += 5)
				check_checksums(h, lens[i], chunks[j], off, st);
	/* The big one: chunk sizes of the library (64 KiB..8 MiB) and odd ones. */
	static const uint64_t big_chunks[] = { 65536, 100000, 2u << 20, (2u << 20) + 1, 8u << 20, 1ull << 30 };
	for (size_t j = 0; j < sizeof(big_chunks) / sizeof(big_chunks[0]); j++)
		check_checksums(h, big, big_chunks[j], 0, st);
	check_checksums(h, big, 8u << 20, 3, st);
	check_checksums(h, big, 8u << 20, 8, st);
	/* The legacy default stream. */
	check_checksums(h, 1000003, 65536, 0, NULL);

	static const size_t tlens[] = { 0, 1, 7, 15, 16, 17, 63, 64, 65, 4095, 65535, 65537, 1000003, big };
	for (size_t i = 0; i < sizeof(tlens) / sizeof(tlens[0]); i++) {
		check_transforms(h, h2, tlens[i], 0, 0, st);
		if (tlens[i] < big) {
			check_transforms(h, h2, tlens[i], 1, 0, st);
			check_transforms(h, h2, tlens[i], 0, 3, st);
			check_transforms(h, h2, tlens[i], 8, 8, st);
		}
	}
	check_transforms(h, h2, big - 5, 16, 8, st);
	free(h);
	free(h2);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("gpu kernels: all checks passed\n");

	const char *b = getenv("CKPT_GPU_BENCH");
	if (!b || strcmp(b, "0") != 0)
		run_bench(st);
	CU(cudaStreamDestroy(st));
	return 0;
}
