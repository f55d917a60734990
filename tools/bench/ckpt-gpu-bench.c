/* ckpt-gpu-bench: the GPU snapshot path against the machine's own limit.
 *
 *   ckpt-gpu-bench --root DIR [--size BYTES] [--regions N] [--iters K] [--json]
 *
 * Measures, on the same device in one run: a plain cudaMemcpy of the same
 * bytes from device into pinned host memory (the limit); an eager ckpt_save
 * of CUDA regions (its stall: the copies are done when it returns); a lazy
 * ckpt_save (its stall: the copies are only queued) and the ckpt_fence after
 * it; and restore into device memory. Exits 77 without a CUDA device. */
#include "ckpt.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CU(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CK(x) do { int r_ = (x); if (r_ < 0) { fprintf(stderr, "%s: %s\n", #x, ckpt_strerror(r_)); exit(1); } } while (0)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static unsigned long long parse_size(const char *s)
{
	char *e;
	unsigned long long v = strtoull(s, &e, 10);
	switch (*e) {
	case 'K': case 'k': v <<= 10; break;
	case 'M': case 'm': v <<= 20; break;
	case 'G': case 'g': v <<= 30; break;
	}
	return v;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *root = NULL;
	unsigned long long size = 4ull << 30;
	int regions = 16, iters = 3, json = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--root") && i + 1 < argc) root = argv[++i];
		else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = parse_size(argv[++i]);
		else if (!strcmp(argv[i], "--regions") && i + 1 < argc) regions = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--json")) json = 1;
		else {
			fprintf(stderr, "usage: ckpt-gpu-bench --root DIR [--size BYTES] [--regions N] [--iters K] [--json]\n");
			return 2;
		}
	}
	if (!root || regions < 1 || iters < 1)
		return 2;
	if (!ckpt_cuda_available()) {
		fprintf(stderr, "no CUDA device\n");
		return 77;
	}
	size_t per = (size_t)(size / (unsigned long long)regions);
	void **d = calloc((size_t)regions, sizeof(void *));
	for (int i = 0; i < regions; i++) {
		CU(cudaMalloc(&d[i], per));
		CU(cudaMemset(d[i], i + 1, per));
	}
	size_t total = per * (size_t)regions;
	/* The limit: device to pinned host, same bytes, same chunking. */
	void *pinned;
	CU(cudaMallocHost(&pinned, per));
	double t_ref[16];
	for (int it = 0; it < iters && it < 16; it++) {
		double t0 = now();
		for (int i = 0; i < regions; i++)
			CU(cudaMemcpy(pinned, d[i], per, cudaMemcpyDeviceToHost));
		t_ref[it] = now() - t0;
	}
	cudaFreeHost(pinned);

	ckpt_config cfg;
	CK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.job_id = "gpu-bench";
	cfg.staging_bytes = total + (64u << 20);
	ckpt_ctx *ctx;
	CK(ckpt_ctx_open(&cfg, &ctx));
	for (int i = 0; i < regions; i++) {
		char name[32];
		snprintf(name, sizeof(name), "layer%d", i);
		ckpt_region_desc rd;
		ckpt_region_desc_init(&rd, name, d[i], per);
		rd.device = CKPT_DEVICE_CUDA;
		CK(ckpt_region_add(ctx, &rd));
	}
	double t_eager[16], t_lazy[16], t_fence[16], t_durable[16], t_restore[16];
	uint64_t v = 1;
	for (int it = 0; it < iters && it < 16; it++) {
		ckpt_handle *h;
		double t0 = now();
		CK(ckpt_save(ctx, v, 0, &h));
		t_eager[it] = now() - t0;
		CK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
		t_durable[it] = now() - t0;
		ckpt_handle_free(h);
		v++;
		CU(cudaDeviceSynchronize());
		t0 = now();
		CK(ckpt_save(ctx, v, CKPT_SAVE_LAZY, &h));
		t_lazy[it] = now() - t0;
		double t1 = now();
		CK(ckpt_fence(ctx));
		t_fence[it] = now() - t1;
		CK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
		ckpt_handle_free(h);
		t0 = now();
		CK(ckpt_restore(ctx, v, 0, NULL));
		t_restore[it] = now() - t0;
		v++;
	}
	int n = iters < 16 ? iters : 16;
	qsort(t_ref, (size_t)n, sizeof(double), cmp);
	qsort(t_eager, (size_t)n, sizeof(double), cmp);
	qsort(t_lazy, (size_t)n, sizeof(double), cmp);
	qsort(t_fence, (size_t)n, sizeof(double), cmp);
	qsort(t_durable, (size_t)n, sizeof(double), cmp);
	qsort(t_restore, (size_t)n, sizeof(double), cmp);
	int m = n / 2;
	double gib = (double)total / (1 << 30);
	if (json)
		printf("{\"bytes\": %zu, \"regions\": %d, \"memcpy_d2h_s\": %.6f, \"eager_stall_s\": %.6f, "
		       "\"lazy_stall_s\": %.6f, \"fence_s\": %.6f, \"durable_s\": %.6f, \"restore_s\": %.6f, "
		       "\"snapshot_vs_memcpy\": %.3f}\n", total, regions, t_ref[m], t_eager[m], t_lazy[m], t_fence[m],
		       t_durable[m], t_restore[m], t_ref[m] / t_eager[m]);
	else
		printf("%.2f GiB in %d CUDA regions (median of %d)\n"
		       "  cudaMemcpy D2H to pinned  %8.3f s  %6.2f GiB/s  (the limit)\n"
		       "  eager save stall          %8.3f s  %6.2f GiB/s  (%.0f%% of the limit)\n"
		       "  lazy save stall           %8.3f s\n"
		       "  ckpt_fence after lazy     %8.3f s\n"
		       "  save to durable on disk   %8.3f s  %6.2f GiB/s\n"
		       "  restore into the device   %8.3f s  %6.2f GiB/s\n",
		       gib, regions, n, t_ref[m], gib / t_ref[m], t_eager[m], gib / t_eager[m],
		       100 * t_ref[m] / t_eager[m], t_lazy[m], t_fence[m], t_durable[m], gib / t_durable[m],
		       t_restore[m], gib / t_restore[m]);
	CK(ckpt_ctx_close(ctx));
	for (int i = 0; i < regions; i++)
		cudaFree(d[i]);
	free(d);
	return 0;
}
