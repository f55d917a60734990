/* CUDA implementation of device.h.
 *
 * Streams: the trainer's stream (set by ckpt_cuda_stream_set, default the
 * legacy stream) runs the save-point checksums, so they see the state exactly
 * as the trainer left it at ckpt_save; libckpt's own non-blocking stream runs
 * the device-to-host copies after an event on the trainer's stream. Each
 * staging slot has an event: a worker checksums chunk i on the host while
 * chunk i+1 is still being copied. */
#include "device.h"
#include "ckpt_cuda.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdlib.h>

struct ckpt_dev {
	int device;
	cudaStream_t stream;       /* libckpt's copy stream */
	cudaStream_t user;         /* the trainer's stream */
	cudaEvent_t *slot_ev;      /* one per staging slot */
	uint32_t nslots;
	uint64_t *h_slot_sum;      /* pinned, one per staging slot */
	cudaEvent_t user_ev;       /* save point on the trainer's stream */
	cudaEvent_t done_ev;       /* end of the last save's queued copies */
	int pending;               /* copies queued since the last fence */
	void *pool;
	const ckpt_logger *lg;
};

static int cu(const ckpt_dev *d, cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	LOG_E(d ? d->lg : NULL, CKPT_NO_VERSION, "CUDA %s: %s", what, cudaGetErrorString(e));
	return -CKPT_EDEVICE;
}

int ckpt__dev_available(void)
{
	return ckpt_cuda_device_count() > 0;
}

int ckpt__dev_open(ckpt_dev **out, void *pool, size_t pool_bytes, uint32_t nslots, const ckpt_logger *lg)
{
	*out = NULL;
	if (!ckpt__dev_available()) {
		LOG_E(lg, CKPT_NO_VERSION, "no usable CUDA device");
		return -ENODEV;
	}
	ckpt_dev *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->lg = lg;
	d->nslots = nslots;
	int err;
	d->slot_ev = calloc(nslots, sizeof(cudaEvent_t));
	if (!d->slot_ev) {
		free(d);
		return -ENOMEM;
	}
	if ((err = cu(d, cudaGetDevice(&d->device), "get device")) < 0 ||
	    (err = cu(d, cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking), "stream")) < 0 ||
	    (err = cu(d, cudaEventCreateWithFlags(&d->user_ev, cudaEventDisableTiming), "event")) < 0 ||
	    (err = cu(d, cudaEventCreateWithFlags(&d->done_ev, cudaEventDisableTiming), "event")) < 0 ||
	    (err = cu(d, cudaMallocHost((void **)&d->h_slot_sum, nslots * sizeof(uint64_t)), "pinned sums")) < 0)
		goto fail;
	for (uint32_t i = 0; i < nslots; i++)
		if ((err = cu(d, cudaEventCreateWithFlags(&d->slot_ev[i], cudaEventDisableTiming), "event")) < 0)
			goto fail;
	/* Pinned staging: device copies run at full speed and truly async. */
	if ((err = cu(d, cudaHostRegister(pool, pool_bytes, cudaHostRegisterDefault), "pin staging")) < 0)
		goto fail;
	d->pool = pool;
	*out = d;
	return 0;
fail:
	ckpt__dev_close(d);
	return err;
}

void ckpt__dev_close(ckpt_dev *d)
{
	if (!d)
		return;
	if (d->stream)
		cudaStreamSynchronize(d->stream);
	if (d->pool)
		cudaHostUnregister(d->pool);
	for (uint32_t i = 0; d->slot_ev && i < d->nslots; i++)
		if (d->slot_ev[i])
			cudaEventDestroy(d->slot_ev[i]);
	free(d->slot_ev);
	if (d->user_ev)
		cudaEventDestroy(d->user_ev);
	if (d->done_ev)
		cudaEventDestroy(d->done_ev);
	if (d->h_slot_sum)
		cudaFreeHost(d->h_slot_sum);
	if (d->stream)
		cudaStreamDestroy(d->stream);
	free(d);
}

void ckpt__dev_pool_release(ckpt_dev *d)
{
	if (!d || !d->pool)
		return;
	cudaStreamSynchronize(d->stream);
	cudaHostUnregister(d->pool);
	d->pool = NULL;
}

int ckpt__dev_pool_attach(ckpt_dev *d, void *pool, size_t pool_bytes, uint32_t nslots)
{
	if (nslots > d->nslots) {
		cudaEvent_t *ev = realloc(d->slot_ev, nslots * sizeof(*ev));
		if (!ev)
			return -ENOMEM;
		d->slot_ev = ev;
		for (uint32_t i = d->nslots; i < nslots; i++)
			d->slot_ev[i] = NULL;
		uint64_t *sums = NULL;
		int err = cu(d, cudaMallocHost((void **)&sums, nslots * sizeof(uint64_t)), "pinned sums");
		if (err < 0)
			return err;
		cudaFreeHost(d->h_slot_sum);
		d->h_slot_sum = sums;
		for (uint32_t i = d->nslots; i < nslots; i++, d->nslots++)
			if ((err = cu(d, cudaEventCreateWithFlags(&d->slot_ev[i], cudaEventDisableTiming), "event")) < 0)
				return err;
	}
	int err = cu(d, cudaHostRegister(pool, pool_bytes, cudaHostRegisterDefault), "pin staging");
	if (err == 0)
		d->pool = pool;
	return err;
}

int ckpt__dev_check_ptr(ckpt_dev *d, const void *p, size_t n)
{
	struct cudaPointerAttributes a;
	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		cudaGetLastError();
		return -EINVAL;
	}
	if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
		return -EINVAL;
	if (n && a.device != d->device)
		return -EINVAL;
	return 0;
}

int ckpt__dev_region_init(ckpt_dev *d, ckpt_dev_region *r, uint64_t bytes, uint64_t chunk_bytes)
{
	memset(r, 0, sizeof(*r));
	r->nchunks = (uint32_t)(bytes / chunk_bytes + (bytes % chunk_bytes != 0));
	size_t nsum = r->nchunks ? r->nchunks : 1;
	size_t nleaf = ckpt_cuda_leaf_scratch_count(bytes, chunk_bytes);
	int err;
	if ((err = cu(d, cudaMalloc((void **)&r->d_sums, nsum * 8), "alloc sums")) < 0 ||
	    (err = cu(d, cudaMalloc((void **)&r->d_check, nsum * 8), "alloc sums")) < 0 ||
	    (err = cu(d, cudaMalloc((void **)&r->d_scratch, (nleaf ? nleaf : 1) * 8), "alloc scratch")) < 0 ||
	    (err = cu(d, cudaMallocHost((void **)&r->h_save, nsum * 8), "pinned sums")) < 0 ||
	    (err = cu(d, cudaMallocHost((void **)&r->h_check, nsum * 8), "pinned sums")) < 0) {
		ckpt__dev_region_fini(d, r);
		return err;
	}
	return 0;
}

void ckpt__dev_region_fini(ckpt_dev *d, ckpt_dev_region *r)
{
	(void)d;
	if (r->d_sums)
		cudaFree(r->d_sums);
	if (r->d_check)
		cudaFree(r->d_check);
	if (r->d_scratch)
		cudaFree(r->d_scratch);
	if (r->h_save)
		cudaFreeHost(r->h_save);
	if (r->h_check)
		cudaFreeHost(r->h_check);
	memset(r, 0, sizeof(*r));
}

int ckpt__dev_stream_set(ckpt_dev *d, void *stream)
{
	if (d)
		d->user = (cudaStream_t)stream;
	return 0;
}

int ckpt__dev_save_point(ckpt_dev *d, void *const *ptrs, const uint64_t *bytes,
                         ckpt_dev_region *const *regions, uint32_t n, uint64_t chunk_bytes,
                         int keep_for_check)
{
	int err;
	/* The previous save's copies read d_sums: the new checksums wait for them. */
	if (d->pending && (err = cu(d, cudaStreamWaitEvent(d->user, d->done_ev, 0), "wait")) < 0)
		return err;
	for (uint32_t i = 0; i < n; i++) {
		if (!bytes[i])
			continue;
		int e = ckpt_cuda_region_checksums(ptrs[i], bytes[i], chunk_bytes, regions[i]->d_scratch,
		                                   regions[i]->d_sums, d->user);
		if ((err = cu(d, (cudaError_t)e, "checksum kernel")) < 0)
			return err;
	}
	if ((err = cu(d, cudaEventRecord(d->user_ev, d->user), "record")) < 0 ||
	    (err = cu(d, cudaStreamWaitEvent(d->stream, d->user_ev, 0), "wait")) < 0)
		return err;
	if (keep_for_check)
		for (uint32_t i = 0; i < n; i++)
			if (regions[i]->nchunks &&
			    (err = cu(d, cudaMemcpyAsync(regions[i]->h_save, regions[i]->d_sums,
			                                 regions[i]->nchunks * 8ull, cudaMemcpyDeviceToHost, d->stream),
			              "copy sums")) < 0)
				return err;
	d->pending = 1;
	return 0;
}

int ckpt__dev_copy_chunk(ckpt_dev *d, int slot, void *dst, const void *src, size_t len,
                         const ckpt_dev_region *r, uint32_t k)
{
	int err;
	if ((err = cu(d, cudaMemcpyAsync(dst, src, len, cudaMemcpyDeviceToHost, d->stream), "copy")) < 0 ||
	    (err = cu(d, cudaMemcpyAsync(&d->h_slot_sum[slot], r->d_sums + k, 8, cudaMemcpyDeviceToHost,
	                                 d->stream), "copy sum")) < 0 ||
	    (err = cu(d, cudaEventRecord(d->slot_ev[slot], d->stream), "record")) < 0)
		return err;
	return 0;
}

int ckpt__dev_save_end(ckpt_dev *d, int wait)
{
	int err = cu(d, cudaEventRecord(d->done_ev, d->stream), "record");
	if (err == 0 && wait)
		err = cu(d, cudaEventSynchronize(d->done_ev), "sync");
	return err;
}

int ckpt__dev_slot_wait(ckpt_dev *d, int slot, uint64_t *dev_sum)
{
	int err = cu(d, cudaEventSynchronize(d->slot_ev[slot]), "sync");
	if (err == 0)
		*dev_sum = d->h_slot_sum[slot];
	return err;
}

int ckpt__dev_fence(ckpt_dev *d, void *const *ptrs, const uint64_t *bytes, const char *const *names,
                    ckpt_dev_region *const *regions, uint32_t n, uint64_t chunk_bytes, int check)
{
	if (!d || !d->pending)
		return 0;
	int err = cu(d, cudaEventSynchronize(d->done_ev), "fence");
	if (err < 0 || !check) {
		d->pending = 0;
		return err;
	}
	/* Debug: the state now, after everything the trainer has queued, must be
	 * the state of the save point. */
	if ((err = cu(d, cudaEventRecord(d->user_ev, d->user), "record")) == 0)
		err = cu(d, cudaStreamWaitEvent(d->stream, d->user_ev, 0), "wait");
	for (uint32_t i = 0; i < n && err == 0; i++) {
		if (!bytes[i])
			continue;
		err = cu(d, (cudaError_t)ckpt_cuda_region_checksums(ptrs[i], bytes[i], chunk_bytes,
		                                                    regions[i]->d_scratch, regions[i]->d_check,
		                                                    d->stream), "checksum kernel");
		if (err == 0)
			err = cu(d, cudaMemcpyAsync(regions[i]->h_check, regions[i]->d_check, regions[i]->nchunks * 8ull,
			                            cudaMemcpyDeviceToHost, d->stream), "copy sums");
	}
	if (err == 0)
		err = cu(d, cudaStreamSynchronize(d->stream), "sync");
	for (uint32_t i = 0; i < n && err == 0; i++)
		for (uint32_t k = 0; k < regions[i]->nchunks; k++)
			if (regions[i]->h_check[k] != regions[i]->h_save[k]) {
				LOG_E(d->lg, CKPT_NO_VERSION,
				      "lazy save contract broken: region '%s' chunk %u changed between ckpt_save and ckpt_fence",
				      names[i], k);
				err = -CKPT_ECONTRACT;
				break;
			}
	d->pending = 0;
	return err;
}

int ckpt__dev_h2d(ckpt_dev *d, void *dst, const void *src, size_t len)
{
	int err = cu(d, cudaMemcpyAsync(dst, src, len, cudaMemcpyHostToDevice, d->stream), "copy to device");
	if (err == 0)
		err = cu(d, cudaStreamSynchronize(d->stream), "sync");
	return err;
}
