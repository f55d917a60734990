/* Round trips of random data through save and restore: empty, one byte,
 * sizes off chunk and page boundaries, many small regions, compression on
 * and off, shaped tensors; versions listed in order with their states. */
#include "helpers.h"
#include "ckpt.h"

typedef struct reg {
	char name[40];
	uint8_t *buf, *orig;
	size_t n;
} reg;

static ckpt_ctx *open_ctx(const char *root, const char *job, int compress, uint64_t chunk,
                          uint64_t staging)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.job_id = job;
	cfg.compress = compress;
	cfg.chunk_bytes = chunk;
	cfg.staging_bytes = staging;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	return ctx;
}

static void run_case(const char *root, const char *job, const size_t *sizes, size_t nreg, int compress,
                     uint64_t chunk, uint64_t seed)
{
	ckpt_ctx *ctx = open_ctx(root, job, compress, chunk, 4 * chunk);
	reg *r = calloc(nreg, sizeof(*r));
	for (size_t i = 0; i < nreg; i++) {
		snprintf(r[i].name, sizeof(r[i].name), "r%zu", i);
		r[i].n = sizes[i];
		r[i].buf = malloc(sizes[i] + 1);
		r[i].orig = malloc(sizes[i] + 1);
		t_fill(r[i].orig, sizes[i], seed + i);
		/* Half the regions compressible: zeros with a few random words. */
		if (compress && (i % 2))
			for (size_t k = 0; k < sizes[i]; k++)
				r[i].orig[k] = (k % 64 == 0) ? r[i].orig[k] : 0;
		memcpy(r[i].buf, r[i].orig, sizes[i]);
		ckpt_region_desc d;
		ckpt_region_desc_init(&d, r[i].name, r[i].buf, sizes[i]);
		T_OK(ckpt_region_add(ctx, &d));
	}
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 7, 0, &h));
	for (size_t i = 0; i < nreg; i++)
		memset(r[i].buf, 0x5A, r[i].n); /* the snapshot owns a copy now */
	ckpt_status st = { .size = sizeof(st) };
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, &st));
	T_ASSERT(st.committed == 1);
	T_ASSERT(st.error == 0);
	uint64_t total = 0;
	for (size_t i = 0; i < nreg; i++)
		total += sizes[i];
	T_ASSERT(st.bytes == total);
	if (compress && total > 1 << 20)
		T_ASSERT(st.stored_bytes < total);
	if (!compress)
		T_ASSERT(st.stored_bytes == total);
	T_OK(ckpt_handle_test(h, CKPT_TIER_LOCAL_DISK, NULL));
	T_ERR(ckpt_handle_wait(h, CKPT_TIER_PEER_MEM, 0, NULL), -EINVAL);
	ckpt_handle_free(h);
	uint64_t got = 0;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	T_ASSERT(got == 7);
	for (size_t i = 0; i < nreg; i++)
		if (memcmp(r[i].buf, r[i].orig, r[i].n))
			T_FAIL("region %zu (%zu bytes, compress %d) differs after restore", i, r[i].n, compress);
	/* Saving the same committed version again is refused. */
	T_ERR(ckpt_save(ctx, 7, 0, NULL), -EEXIST);
	T_OK(ckpt_ctx_close(ctx));
	for (size_t i = 0; i < nreg; i++) {
		free(r[i].buf);
		free(r[i].orig);
	}
	free(r);
}

int main(void)
{
	char *root = t_tmpdir("roundtrip");
	const uint64_t chunk = 64 << 10;
	size_t edge[] = { 0, 1, 4095, 4096, 4097, chunk - 1, chunk, chunk + 1, 3 * chunk + 12345, 0 };
	for (int compress = 0; compress <= 1; compress++) {
		char job[32];
		snprintf(job, sizeof(job), "edge-%d", compress);
		run_case(root, job, edge, sizeof(edge) / sizeof(edge[0]), compress, chunk, 100 + compress);
		/* One region at a time, each size alone. */
		for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
			snprintf(job, sizeof(job), "one-%d-%zu", compress, i);
			run_case(root, job, &edge[i], 1, compress, chunk, 7 * i + compress);
		}
	}
	/* Many small regions: more chunks than the staging pool has slots. */
	size_t many[600];
	for (size_t i = 0; i < 600; i++)
		many[i] = 1 + (i * 7919) % 3000;
	run_case(root, "many", many, 600, 0, chunk, 999);
	run_case(root, "many-z", many, 600, 1, chunk, 998);
	/* Bigger than the staging pool (4 chunks): the snapshot streams. */
	size_t big[] = { 20 * chunk + 5 };
	run_case(root, "stream", big, 1, 0, chunk, 5);

	/* Shaped regions, versions in order, states. */
	ckpt_ctx *ctx = open_ctx(root, "shaped", 0, chunk, 1 << 20);
	float w[6 * 4];
	t_fill(w, sizeof(w), 3);
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "w", w, sizeof(w));
	d.dtype = CKPT_DTYPE_F32;
	d.ndim = 2;
	d.global_shape[0] = 12; d.global_shape[1] = 4;
	d.offsets[0] = 6; d.offsets[1] = 0;
	d.extents[0] = 6; d.extents[1] = 4;
	T_OK(ckpt_region_add(ctx, &d));
	d.name = "bad";
	d.extents[0] = 7; /* beyond the global shape */
	T_ERR(ckpt_region_add(ctx, &d), -EINVAL);
	d.name = "w";
	d.extents[0] = 6;
	T_ERR(ckpt_region_add(ctx, &d), -CKPT_ENAME);
	T_ERR(ckpt_restore(ctx, CKPT_LATEST, 0, NULL), -CKPT_ENOVERSION);
	uint64_t vers[] = { 30, 10, 20 };
	for (int i = 0; i < 3; i++) {
		ckpt_handle *h;
		w[0] = (float)vers[i];
		T_OK(ckpt_save(ctx, vers[i], 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
		ckpt_handle_free(h);
	}
	ckpt_version_info vi[8] = { 0 };
	size_t n;
	T_OK(ckpt_versions_list(ctx, vi, 8, &n));
	T_ASSERT(n == 3);
	T_ASSERT(vi[0].version == 10 && vi[1].version == 20 && vi[2].version == 30);
	for (int i = 0; i < 3; i++) {
		T_ASSERT(vi[i].state == CKPT_STATE_COMMITTED);
		T_ASSERT(vi[i].bytes == sizeof(w));
		T_ASSERT(vi[i].committed_ns >= vi[i].created_ns);
	}
	uint64_t got;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	T_ASSERT(got == 30 && w[0] == 30.0f);
	T_OK(ckpt_restore(ctx, 10, 0, &got));
	T_ASSERT(got == 10 && w[0] == 10.0f);
	T_ERR(ckpt_restore(ctx, 11, 0, NULL), -CKPT_ENOVERSION);
	T_OK(ckpt_ctx_close(ctx));

	/* A restore into regions the checkpoint does not hold is refused. */
	ctx = open_ctx(root, "shaped", 0, chunk, 1 << 20);
	char other[10];
	ckpt_region_desc_init(&d, "not-there", other, sizeof(other));
	T_OK(ckpt_region_add(ctx, &d));
	T_ERR(ckpt_restore(ctx, 30, 0, NULL), -CKPT_EMISMATCH);
	T_OK(ckpt_ctx_close(ctx));
	t_rmrf(root);
	printf("roundtrip: ok\n");
	return T_EXIT_PASS;
}
