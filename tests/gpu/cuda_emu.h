/* Stand-ins for the CUDA built-ins that kernels/cuda/ckpt_cuda_kern.cuh
 * uses, so that a host C++ test runs the kernels' own code, device branches
 * included (__CUDA_ARCH__ is defined), with one thread per CUDA thread:
 * __syncthreads is a barrier of the block, a warp shuffle a barrier of
 * warp 0 (the only warp that shuffles). Blocks run one after another, so
 * __shared__ variables become function statics. Correctness only: this
 * says nothing about speed. */
#ifndef CKPT_CUDA_EMU_H
#define CKPT_CUDA_EMU_H

#define __CUDACC__ 1
#define __CUDA_ARCH__ 900

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static

struct ckpt_emu_dim {
	unsigned x;
};
extern thread_local ckpt_emu_dim threadIdx, blockIdx;
extern ckpt_emu_dim blockDim, gridDim;

struct uint2 {
	unsigned x, y;
};
struct alignas(16) uint4 {
	unsigned x, y, z, w;
};
struct alignas(16) ulonglong2 {
	unsigned long long x, y;
};

static inline uint2 make_uint2(unsigned a, unsigned b)
{
	return uint2{ a, b };
}

static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d)
{
	return uint4{ a, b, c, d };
}

static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{
	return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}

/* Barriers and the warp-0 exchange slots of the block being run. */
struct ckpt_emu_block {
	pthread_barrier_t block, warp;
	unsigned long long slot[32];
};
extern ckpt_emu_block ckpt_emu;

static inline void __syncthreads(void)
{
	pthread_barrier_wait(&ckpt_emu.block);
}

static inline unsigned long long __shfl_xor_sync(unsigned mask, unsigned long long v, int lane_mask)
{
	(void)mask;
	unsigned t = threadIdx.x;
	ckpt_emu.slot[t] = v;
	pthread_barrier_wait(&ckpt_emu.warp);
	unsigned long long r = ckpt_emu.slot[t ^ (unsigned)lane_mask];
	pthread_barrier_wait(&ckpt_emu.warp);
	return r;
}

/* Runs kernel() as grid blocks of `block` threads (block >= 32), one block
 * after another on the same threads. */
template <typename F>
static void ckpt_emu_launch(unsigned grid, unsigned block, F kernel)
{
	gridDim.x = grid;
	blockDim.x = block;
	pthread_barrier_init(&ckpt_emu.block, NULL, block);
	pthread_barrier_init(&ckpt_emu.warp, NULL, 32);
	std::vector<std::thread> th;
	for (unsigned t = 0; t < block; t++)
		th.emplace_back([=] {
			threadIdx.x = t;
			for (unsigned b = 0; b < grid; b++) {
				blockIdx.x = b;
				kernel();
				/* The next block reuses the statics standing for __shared__. */
				pthread_barrier_wait(&ckpt_emu.block);
			}
		});
	for (auto &x : th)
		x.join();
	pthread_barrier_destroy(&ckpt_emu.block);
	pthread_barrier_destroy(&ckpt_emu.warp);
}

/* Defines the state above; in exactly one file of the test. */
#define CKPT_EMU_STATE \
	thread_local ckpt_emu_dim threadIdx, blockIdx; \
	ckpt_emu_dim blockDim, gridDim; \
	ckpt_emu_block ckpt_emu;

#endif
