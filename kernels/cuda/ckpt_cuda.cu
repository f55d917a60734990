/* CUDA versions of the chunk transforms; see ckpt_cuda.h. The kernels are
 * in ckpt_cuda_kern.cuh; here the launches.
 *
 * All kernels are bound by memory bandwidth: loads are 16 bytes wide and
 * coalesced where the pointers allow it, with a byte-wise fallback for
 * anything misaligned; grids are sized to the device and loops stride over
 * the grid, so any length works with one launch. */
#include "ckpt_cuda.h"

#include <cuda_runtime.h>

#include "ckpt_cuda_kern.cuh"

/* Blocks for `work` items of `per_block` each: enough to fill the device a
 * few times over, the rest done by the grid-stride loops. */
static cudaError_t ckpt__grid(uint64_t work, uint64_t per_block, unsigned waves, unsigned *grid)
{
	int dev = 0, sms = 0;
	cudaError_t e = cudaGetDevice(&dev);
	if (e == cudaSuccess)
		e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (e != cudaSuccess)
		return e;
	uint64_t want = ckpt_csum_div_up(work, per_block);
	uint64_t cap = (uint64_t)(sms > 0 ? sms : 1) * waves;
	*grid = (unsigned)(want < cap ? (want ? want : 1) : cap);
	return cudaSuccess;
}

/* ------------------------------------------------------------ checksum */

extern "C" uint64_t ckpt_cuda_leaf_scratch_count(uint64_t len, uint64_t chunk_bytes)
{
	return ckpt_csum_geom_make(len, chunk_bytes).nleaves;
}

extern "C" int ckpt_cuda_region_checksums(const void *d_data, uint64_t len, uint64_t chunk_bytes,
                                          uint64_t *d_leaf_scratch, uint64_t *d_out, void *stream)
{
	if (!chunk_bytes)
		return cudaErrorInvalidValue;
	if (!len)
		return 0;
	if (!d_data || !d_leaf_scratch || !d_out)
		return cudaErrorInvalidValue;
	cudaStream_t st = (cudaStream_t)stream;
	ckpt_csum_geom geo = ckpt_csum_geom_make(len, chunk_bytes);
	unsigned grid;
	cudaError_t e = ckpt__grid(geo.nleaves, 1, 16, &grid);
	if (e != cudaSuccess)
		return e;
	ckpt__leaf_kernel<<<grid, CKPT__THREADS, 0, st>>>((const uint8_t *)d_data, geo, d_leaf_scratch);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	if ((e = ckpt__grid(geo.nchunks, 1, 16, &grid)) != cudaSuccess)
		return e;
	ckpt__root_kernel<<<grid, CKPT__THREADS, 0, st>>>(d_leaf_scratch, geo, d_out);
	return cudaGetLastError();
}

/* -------------------------------------------------------------- shuffle */

static int ckpt__shuffle(void *d_dst, const void *d_src, size_t len, unsigned elem, void *stream, int inverse)
{
	cudaStream_t st = (cudaStream_t)stream;
	if (!len)
		return 0;
	if (elem <= 1)
		return cudaMemcpyAsync(d_dst, d_src, len, cudaMemcpyDeviceToDevice, st);
	uint8_t *d = (uint8_t *)d_dst;
	const uint8_t *s = (const uint8_t *)d_src;
	uint64_t n = len / elem;
	/* The wide path needs every plane aligned: n % 8 == 0 and aligned ends. */
	uintptr_t planes = inverse ? (uintptr_t)s : (uintptr_t)d;
	uintptr_t packed = inverse ? (uintptr_t)d : (uintptr_t)s;
	bool vec = (elem == 2 || elem == 4 || elem == 8) && n % 8 == 0 && planes % 8 == 0 && packed % 16 == 0;
	unsigned grid;
	cudaError_t e = ckpt__grid(vec ? n / 8 : n, CKPT__THREADS, 64, &grid);
	if (e != cudaSuccess)
		return e;
	if (!vec) {
		if (inverse)
			ckpt__unshuffle_any<<<grid, CKPT__THREADS, 0, st>>>(d, s, n, elem, len);
		else
			ckpt__shuffle_any<<<grid, CKPT__THREADS, 0, st>>>(d, s, n, elem, len);
	} else if (inverse) {
		if (elem == 2)
			ckpt__unshuffle_vec<2><<<grid, CKPT__THREADS, 0, st>>>(d, s, n, len);
		else if (elem == 4)
			ckpt__unshuffle_vec<4><<<grid, CKPT__THREADS, 0, st>>>(d, s, n, len);
		else
			ckpt__unshuffle_vec<8><<<grid, CKPT__THREADS, 0, st>>>(d, s, n, len);
	} else {
		if (elem == 2)
			ckpt__shuffle_vec<2><<<grid, CKPT__THREADS, 0, st>>>(d, s, n, len);
		else if (elem == 4)
			ckpt__shuffle_vec<4><<<grid, CKPT__THREADS, 0, st>>>(d, s, n, len);
		else
			ckpt__shuffle_vec<8><<<grid, CKPT__THREADS, 0, st>>>(d, s, n, len);
	}
	return cudaGetLastError();
}

extern "C" int ckpt_cuda_shuffle(void *d_dst, const void *d_src, size_t len, unsigned elem, void *stream)
{
	return ckpt__shuffle(d_dst, d_src, len, elem, stream, 0);
}

extern "C" int ckpt_cuda_unshuffle(void *d_dst, const void *d_src, size_t len, unsigned elem, void *stream)
{
	return ckpt__shuffle(d_dst, d_src, len, elem, stream, 1);
}

/* ------------------------------------------------------------------ xor */

extern "C" int ckpt_cuda_xor(void *d_dst, const void *d_a, const void *d_b, size_t len, void *stream)
{
	if (!len)
		return 0;
	uintptr_t d = (uintptr_t)d_dst, a = (uintptr_t)d_a, b = (uintptr_t)d_b;
	uint64_t head = 0, nvec = 0;
	if (d % 16 == a % 16 && d % 16 == b % 16) {
		head = (16 - d % 16) % 16;
		if (head > len)
			head = len;
		nvec = (len - head) / 16;
	}
	unsigned grid;
	cudaError_t e = ckpt__grid(nvec ? nvec : len, CKPT__THREADS, 64, &grid);
	if (e != cudaSuccess)
		return e;
	ckpt__xor_kernel<<<grid, CKPT__THREADS, 0, (cudaStream_t)stream>>>(
		(uint8_t *)d_dst, (const uint8_t *)d_a, (const uint8_t *)d_b, len, head, nvec);
	return cudaGetLastError();
}

/* ------------------------------------------------------------ devices */

extern "C" int ckpt_cuda_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError(); /* no driver: not an error for the caller's next call */
		return 0;
	}
	return n;
}
