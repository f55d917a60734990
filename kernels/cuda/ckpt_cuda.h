/* CUDA versions of the chunk transforms of kernels/ckpt_kernels.h. Each
 * gives bit-identical output to its C reference there.
 *
 * Usable from C: no CUDA header needed. Pointers named d_* are device memory
 * of the current device. `stream` is a cudaStream_t (NULL: the legacy
 * default stream); every call only queues work on it and returns, so inputs
 * must stay valid and unchanged until the stream reaches that work.
 * Functions returning int give 0, or a cudaError_t value (positive) when a
 * launch could not be queued; errors while the work runs surface at the
 * next synchronisation, as for any CUDA kernel. Thread-safe: no state is
 * kept between calls. */
#ifndef CKPT_CUDA_H
#define CKPT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices; 0 when there is none or no usable driver. */
int ckpt_cuda_device_count(void);

/* u64 slots of leaf-hash scratch that ckpt_cuda_region_checksums needs for
 * a region of len bytes cut into chunks of chunk_bytes (0 if either is 0). */
uint64_t ckpt_cuda_leaf_scratch_count(uint64_t len, uint64_t chunk_bytes);

/* Chunk checksums ("xxh3-tree-64k", ckpt_kern_checksum) of a region: chunk
 * k covers [k*chunk_bytes, min((k+1)*chunk_bytes, len)) of d_data, and its
 * checksum goes to d_out[k], for k < ceil(len / chunk_bytes).
 *  d_data          [in]  len bytes, any alignment (16-byte aligned is fastest)
 *  d_leaf_scratch  [tmp] ckpt_cuda_leaf_scratch_count(len, chunk_bytes) u64
 *  d_out           [out] ceil(len / chunk_bytes) u64
 * len 0 queues nothing. chunk_bytes 0 gives cudaErrorInvalidValue. */
int ckpt_cuda_region_checksums(const void *d_data, uint64_t len, uint64_t chunk_bytes,
                               uint64_t *d_leaf_scratch, uint64_t *d_out, void *stream);

/* Byte shuffle and its inverse (ckpt_kern_shuffle / ckpt_kern_unshuffle):
 * the layout of the C reference, the trailing len % elem bytes copied
 * unchanged at the end; elem 0 or 1 is a plain copy. d_dst and d_src must not
 * overlap. */
int ckpt_cuda_shuffle(void *d_dst, const void *d_src, size_t len, unsigned elem, void *stream);
int ckpt_cuda_unshuffle(void *d_dst, const void *d_src, size_t len, unsigned elem, void *stream);

/* d_dst[i] = d_a[i] ^ d_b[i] (ckpt_kern_xor); d_dst may equal d_a or d_b. */
int ckpt_cuda_xor(void *d_dst, const void *d_a, const void *d_b, size_t len, void *stream);

#ifdef __cplusplus
}
#endif

#endif
