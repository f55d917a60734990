/* The GPU side of snapshots and restores, behind one small interface: a
 * CUDA implementation (device_cuda.c) and one for builds without CUDA
 * (device_none.c), chosen by CMake. The pipeline calls these whatever the
 * build; without CUDA no device region can be registered, so they are never
 * reached there. */
#ifndef CKPT_DEVICE_H
#define CKPT_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include "base/common.h"

typedef struct ckpt_dev ckpt_dev;

/* Device state of one registered CUDA region. */
typedef struct ckpt_dev_region {
	uint64_t *d_sums;     /* per-chunk checksums taken at the save point */
	uint64_t *d_scratch;  /* leaf hashes */
	uint64_t *h_save;     /* pinned: the last save point's checksums (lazy_check) */
	uint64_t *d_check;    /* lazy_check: checksums at the fence */
	uint64_t *h_check;
	uint32_t nchunks;
} ckpt_dev_region;

int ckpt__dev_available(void);
/* Opens the current CUDA device: a non-blocking stream, one event per staging
 * slot, a pinned checksum slot per staging slot; pins the pool. */
int ckpt__dev_open(ckpt_dev **out, void *pool, size_t pool_bytes, uint32_t nslots,
                   const ckpt_logger *lg);
void ckpt__dev_close(ckpt_dev *d);
/* The staging pool is being replaced (nothing in flight): unpins the old
 * one, then pins the new one, with an event and a pinned checksum slot for
 * each of its nslots. */
void ckpt__dev_pool_release(ckpt_dev *d);
int ckpt__dev_pool_attach(ckpt_dev *d, void *pool, size_t pool_bytes, uint32_t nslots);
/* -EINVAL unless p..p+n is device memory of the open device. */
int ckpt__dev_check_ptr(ckpt_dev *d, const void *p, size_t n);
int ckpt__dev_region_init(ckpt_dev *d, ckpt_dev_region *r, uint64_t bytes, uint64_t chunk_bytes);
void ckpt__dev_region_fini(ckpt_dev *d, ckpt_dev_region *r);
int ckpt__dev_stream_set(ckpt_dev *d, void *stream);

/* Save point: on the trainer's stream, after the previous save's device work,
 * per-chunk checksums of every region; the ckpt stream then waits for it. */
int ckpt__dev_save_point(ckpt_dev *d, void *const *ptrs, const uint64_t *bytes,
                         ckpt_dev_region *const *regions, uint32_t n, uint64_t chunk_bytes,
                         int keep_for_check);
/* Queues the copy of chunk k of a region into staging slot `slot`, and of its
 * device checksum next to it; the slot's event marks both done. */
int ckpt__dev_copy_chunk(ckpt_dev *d, int slot, void *dst, const void *src, size_t len,
                         const ckpt_dev_region *r, uint32_t k);
/* Marks the end of a save's queued copies (what ckpt_fence waits for). */
int ckpt__dev_save_end(ckpt_dev *d, int wait);
/* Waits for the slot's copy; returns the device checksum of its chunk. */
int ckpt__dev_slot_wait(ckpt_dev *d, int slot, uint64_t *dev_sum);
/* Waits for all queued copies. With check, recomputes the regions'
 * checksums and compares them with the last save point: -CKPT_ECONTRACT
 * (and a log line naming region and chunk) when they differ. */
int ckpt__dev_fence(ckpt_dev *d, void *const *ptrs, const uint64_t *bytes, const char *const *names,
                    ckpt_dev_region *const *regions, uint32_t n, uint64_t chunk_bytes, int check);
/* Synchronous host-to-device copy for restore. */
int ckpt__dev_h2d(ckpt_dev *d, void *dst, const void *src, size_t len);

#endif
