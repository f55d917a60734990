/* One 1 GiB region, saved and restored bit-exact, compressed and not; the
 * staging pool is half the state, so the snapshot also streams. */
#include "helpers.h"
#include "ckpt.h"

#define GIB (1ull << 30)
#define PIECE (1u << 20)

static void fill(uint8_t *p, uint64_t seed)
{
	for (uint64_t off = 0; off < GIB; off += PIECE)
		t_fill(p + off, PIECE, seed + off / PIECE);
}

static void check(const uint8_t *p, uint64_t seed)
{
	uint8_t *ref = malloc(PIECE);
	for (uint64_t off = 0; off < GIB; off += PIECE) {
		t_fill(ref, PIECE, seed + off / PIECE);
		if (memcmp(ref, p + off, PIECE))
			T_FAIL("mismatch in MiB %llu", (unsigned long long)(off / PIECE));
	}
	free(ref);
}

int main(void)
{
	if (getenv("CKPT_TEST_SMALL"))
		return T_EXIT_SKIP;
	char *root = t_tmpdir("large");
	uint8_t *buf = malloc(GIB);
	T_ASSERT(buf);
	for (int z = 0; z <= 1; z++) {
		ckpt_config cfg;
		T_OK(ckpt_config_init(&cfg));
		cfg.root = root;
		cfg.job_id = z ? "large-z" : "large";
		cfg.staging_bytes = GIB / 2;
		cfg.compress = z;
		ckpt_ctx *ctx;
		T_OK(ckpt_ctx_open(&cfg, &ctx));
		ckpt_region_desc d;
		ckpt_region_desc_init(&d, "big", buf, GIB);
		d.dtype = CKPT_DTYPE_F32;
		T_OK(ckpt_region_add(ctx, &d));
		fill(buf, 1000 + z);
		ckpt_handle *h;
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_save(ctx, 1, 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, &st));
		T_ASSERT(st.committed && st.bytes == GIB);
		ckpt_handle_free(h);
		memset(buf, 0, GIB);
		uint64_t got;
		T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
		T_ASSERT(got == 1);
		check(buf, 1000 + z);
		T_OK(ckpt_ctx_close(ctx));
		printf("1 GiB %s: stall %.3f s, durable %.3f s\n", z ? "compressed" : "raw", st.stall_ns / 1e9,
		       st.durable_ns / 1e9);
	}
	free(buf);
	t_rmrf(root);
	printf("large: ok\n");
	return T_EXIT_PASS;
}
