/* CUDA regions through the public API: eager and lazy saves, bit-exact
 * restore into device memory, ckpt_fence, the lazy contract checker, and
 * corruption between device and host caught by the end-to-end checksum.
 * Exits 77 where no CUDA device is usable. */
#include "helpers.h"
#include "ckpt.h"

#include <cuda_runtime_api.h>

#define CHUNK (1u << 20)
#define CU(x) do { cudaError_t e__ = (x); if (e__ != cudaSuccess) T_FAIL("%s: %s", #x, cudaGetErrorString(e__)); } while (0)

static ckpt_ctx *open_ctx(const char *root, const char *job, int lazy_check, const char *faults)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.job_id = job;
	cfg.chunk_bytes = CHUNK;
	cfg.staging_bytes = 64u << 20;
	cfg.lazy_check = lazy_check;
	cfg.faults = faults;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	return ctx;
}

int main(void)
{
	if (!ckpt_cuda_available()) {
		printf("no CUDA device: skipped\n");
		return T_EXIT_SKIP;
	}
	char *root = t_tmpdir("gpu");
	size_t sizes[] = { 1, 4097, 3 * CHUNK + 5, 17 * CHUNK + 12345 };
	const int n = 4;
	void *dev[4];
	uint8_t *ref[4], *back[4];
	for (int i = 0; i < n; i++) {
		CU(cudaMalloc(&dev[i], sizes[i]));
		ref[i] = malloc(sizes[i]);
		back[i] = malloc(sizes[i]);
		t_fill(ref[i], sizes[i], 100 + i);
		CU(cudaMemcpy(dev[i], ref[i], sizes[i], cudaMemcpyHostToDevice));
	}
	uint8_t host_state[1000];
	t_fill(host_state, sizeof(host_state), 7);
	uint8_t host_ref[1000];
	memcpy(host_ref, host_state, sizeof(host_ref));

	cudaStream_t s;
	CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	ckpt_ctx *ctx = open_ctx(root, "gpu", 1, NULL);
	T_OK(ckpt_cuda_stream_set(ctx, s));
	for (int i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof(name), "d%d", i);
		ckpt_region_desc d;
		ckpt_region_desc_init(&d, name, dev[i], sizes[i]);
		d.device = CKPT_DEVICE_CUDA;
		T_OK(ckpt_region_add(ctx, &d));
	}
	ckpt_region_desc hd;
	ckpt_region_desc_init(&hd, "host", host_state, sizeof(host_state));
	T_OK(ckpt_region_add(ctx, &hd));
	/* A host pointer passed as device memory is refused. */
	ckpt_region_desc bad;
	ckpt_region_desc_init(&bad, "bad", host_state, sizeof(host_state));
	bad.device = CKPT_DEVICE_CUDA;
	T_ERR(ckpt_region_add(ctx, &bad), -EINVAL);

	/* Eager save, then the state changes; restore brings the saved bytes back. */
	ckpt_handle *h;
	ckpt_status st = { .size = sizeof(st) };
	T_OK(ckpt_save(ctx, 1, 0, &h));
	for (int i = 0; i < n; i++)
		CU(cudaMemsetAsync(dev[i], 0xAB, sizes[i], s));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, &st));
	T_ASSERT(st.committed);
	ckpt_handle_free(h);

	/* Lazy save: returns at once; the fence comes before the state changes. */
	T_OK(ckpt_save(ctx, 2, CKPT_SAVE_LAZY, &h));
	T_OK(ckpt_fence(ctx));
	for (int i = 0; i < n; i++)
		CU(cudaMemsetAsync(dev[i], 0xCD, sizes[i], s));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, NULL));
	ckpt_handle_free(h);
	CU(cudaStreamSynchronize(s));

	uint64_t got;
	T_OK(ckpt_restore(ctx, 1, 0, &got));
	for (int i = 0; i < n; i++) {
		CU(cudaMemcpy(back[i], dev[i], sizes[i], cudaMemcpyDeviceToHost));
		if (memcmp(back[i], ref[i], sizes[i]))
			T_FAIL("device region %d differs after restore of version 1", i);
	}
	T_ASSERT(!memcmp(host_state, host_ref, sizeof(host_ref)));
	T_OK(ckpt_restore(ctx, 2, 0, &got));
	for (int i = 0; i < n; i++) {
		CU(cudaMemcpy(back[i], dev[i], sizes[i], cudaMemcpyDeviceToHost));
		for (size_t k = 0; k < sizes[i]; k += 997)
			if (back[i][k] != 0xAB)
				T_FAIL("version 2 region %d byte %zu is %02x, expected ab", i, k, back[i][k]);
	}

	/* Broken contract: the state changes before the fence; lazy_check says so. */
	T_OK(ckpt_save(ctx, 3, CKPT_SAVE_LAZY, &h));
	CU(cudaMemsetAsync(dev[3], 0x11, sizes[3], s));
	int r = ckpt_fence(ctx);
	T_ASSERT(r == -CKPT_ECONTRACT);
	r = ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, NULL);
	T_ASSERT(r == 0 || r == -CKPT_ECONTRACT); /* the copy may have won the race */
	ckpt_handle_free(h);
	T_OK(ckpt_ctx_close(ctx));

	/* Damage between device and host: the end-to-end checksum refuses it. */
	ctx = open_ctx(root, "gpu-bad", 0, "persist.device_chunk=2@error");
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "d3", dev[3], sizes[3]);
	d.device = CKPT_DEVICE_CUDA;
	T_OK(ckpt_region_add(ctx, &d));
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_ERR(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, &st), -CKPT_ECONTRACT);
	T_ASSERT(!st.committed);
	ckpt_handle_free(h);
	T_ERR(ckpt_restore(ctx, CKPT_LATEST, 0, NULL), -CKPT_ENOVERSION);
	T_OK(ckpt_ctx_close(ctx));

	for (int i = 0; i < n; i++) {
		cudaFree(dev[i]);
		free(ref[i]);
		free(back[i]);
	}
	cudaStreamDestroy(s);
	t_rmrf(root);
	printf("gpu regions: ok\n");
	return T_EXIT_PASS;
}
