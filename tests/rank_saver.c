/* A rank process for integration tests: saves versions of deterministic
 * state, or checks every committed version of a root. Public API only.
 *
 *   rank_saver save  ROOT JOB RANK WORLD FIRST LAST BYTES REGIONS
 *   rank_saver check ROOT JOB RANK WORLD BYTES REGIONS
 * The bytes of (version, rank, region) are a function of those three, so a
 * checker knows what every version must hold. */
#include "helpers.h"
#include "ckpt.h"

static uint64_t seed_of(uint64_t v, uint32_t rank, uint32_t region)
{
	return v * 1000003ull + rank * 1009ull + region + 1;
}

static size_t region_bytes(uint64_t total, uint32_t regions, uint32_t i)
{
	/* Uneven sizes: not aligned to chunks or pages. */
	size_t base = total / regions;
	return i + 1 == regions ? total - base * (regions - 1) : base - (i % 3) * 17 + (i % 2) * 34;
}

static ckpt_ctx *open_ctx(const char *root, const char *job, uint32_t rank, uint32_t world,
                          uint64_t bytes, uint8_t **bufs, uint32_t regions)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.job_id = job;
	cfg.rank = rank;
	cfg.world_size = world;
	cfg.chunk_bytes = 64 << 10;
	cfg.staging_bytes = 2 * bytes + (1 << 20);
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	for (uint32_t i = 0; i < regions; i++) {
		char name[32];
		snprintf(name, sizeof(name), "layer%u.weight", i);
		size_t n = region_bytes(bytes, regions, i);
		bufs[i] = malloc(n ? n : 1);
		T_ASSERT(bufs[i]);
		ckpt_region_desc d;
		ckpt_region_desc_init(&d, name, bufs[i], n);
		T_OK(ckpt_region_add(ctx, &d));
	}
	return ctx;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int save = !strcmp(argv[1], "save");
	if ((save && argc != 10) || (!save && argc != 8)) {
		fprintf(stderr, "usage: see the comment at the top of rank_saver.c\n");
		return 2;
	}
	const char *root = argv[2], *job = argv[3];
	uint32_t rank = (uint32_t)atoi(argv[4]), world = (uint32_t)atoi(argv[5]);
	uint64_t bytes = strtoull(argv[save ? 8 : 6], NULL, 10);
	uint32_t regions = (uint32_t)atoi(argv[save ? 9 : 7]);
	uint8_t **bufs = calloc(regions, sizeof(*bufs));
	ckpt_ctx *ctx = open_ctx(root, job, rank, world, bytes, bufs, regions);
	if (save) {
		uint64_t first = strtoull(argv[6], NULL, 10), last = strtoull(argv[7], NULL, 10);
		for (uint64_t v = first; v <= last; v++) {
			for (uint32_t i = 0; i < regions; i++)
				t_fill(bufs[i], region_bytes(bytes, regions, i), seed_of(v, rank, i));
			ckpt_handle *h;
			int r = ckpt_save(ctx, v, 0, &h);
			if (r == -EEXIST) {
				printf("version %llu already committed\n", (unsigned long long)v);
				continue;
			}
			T_OK(r);
			/* Scribble over the state right away: the snapshot must not care. */
			for (uint32_t i = 0; i < regions; i++)
				memset(bufs[i], 0xEE, region_bytes(bytes, regions, i));
			ckpt_status st = { .size = sizeof(st) };
			T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, &st));
			T_ASSERT(st.version == v);
			ckpt_handle_free(h);
			printf("saved %llu%s\n", (unsigned long long)v, st.committed ? " committed" : "");
			fflush(stdout);
		}
	} else {
		size_t cap = 4096, n = 0;
		ckpt_version_info *vi = calloc(cap, sizeof(*vi));
		T_OK(ckpt_versions_list(ctx, vi, cap, &n));
		uint64_t newest = 0;
		int any = 0;
		for (size_t k = 0; k < n && k < cap; k++) {
			if (vi[k].state != CKPT_STATE_COMMITTED)
				continue;
			any = 1;
			newest = vi[k].version;
			T_ASSERT(vi[k].shards_done == world);
			for (uint32_t i = 0; i < regions; i++)
				memset(bufs[i], 0, region_bytes(bytes, regions, i));
			uint64_t got;
			T_OK(ckpt_restore(ctx, vi[k].version, 0, &got));
			T_ASSERT(got == vi[k].version);
			for (uint32_t i = 0; i < regions; i++) {
				size_t len = region_bytes(bytes, regions, i);
				uint8_t *want = malloc(len ? len : 1);
				t_fill(want, len, seed_of(vi[k].version, rank, i));
				if (memcmp(want, bufs[i], len))
					T_FAIL("version %llu region %u differs", (unsigned long long)vi[k].version, i);
				free(want);
			}
		}
		if (any) {
			uint64_t got = 0;
			T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
			T_ASSERT(got == newest);
		} else {
			T_ERR(ckpt_restore(ctx, CKPT_LATEST, 0, NULL), -CKPT_ENOVERSION);
		}
		printf("checked %zu versions, newest committed %llu\n", n, (unsigned long long)newest);
		free(vi);
	}
	T_OK(ckpt_ctx_close(ctx));
	for (uint32_t i = 0; i < regions; i++)
		free(bufs[i]);
	free(bufs);
	return 0;
}
