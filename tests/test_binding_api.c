/* What language bindings lean on: ckpt_config_set (settings by name from
 * text, strings copied) and ckpt_region_remove (a tensor whose storage moved
 * is registered again; the next save and restore follow the new set). */
#include "helpers.h"
#include "ckpt.h"

#include <unistd.h>

static void config_set(void)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	char job[16] = "job-a";
	T_OK(ckpt_config_set(&cfg, "job_id", job));
	memset(job, 'z', sizeof(job) - 1); /* the value was copied */
	T_ASSERT(!strcmp(cfg.job_id, "job-a"));
	T_OK(ckpt_config_set(&cfg, "staging_bytes", "3M"));
	T_ASSERT(cfg.staging_bytes == 3ull << 20);
	T_OK(ckpt_config_set(&cfg, "world_size", "4"));
	T_ASSERT(cfg.world_size == 4);
	T_OK(ckpt_config_set(&cfg, "pool_policy", "skip"));
	T_ASSERT(cfg.pool_policy == CKPT_POOL_SKIP);
	char order[32] = "local_disk,shared";
	T_OK(ckpt_config_set(&cfg, "restore_order", order));
	memset(order, 0, sizeof(order));
	T_ASSERT(!strcmp(cfg.restore_order, "local_disk,shared"));
	/* Bad keys and values: refused, the field unchanged. */
	T_ERR(ckpt_config_set(&cfg, "no_such_setting", "1"), -CKPT_ECONFIG);
	T_ERR(ckpt_config_set(&cfg, "world_size", "four"), -CKPT_ECONFIG);
	T_ASSERT(cfg.world_size == 4);
	T_ERR(ckpt_config_set(&cfg, "world_size", "-1"), -CKPT_ECONFIG);
	T_ERR(ckpt_config_set(&cfg, "staging_bytes", "12 parsecs"), -CKPT_ECONFIG);
	T_ASSERT(cfg.staging_bytes == 3ull << 20);
	T_ERR(ckpt_config_set(&cfg, "restore_order", "local_disk,tape"), -CKPT_ECONFIG);
	T_ERR(ckpt_config_set(NULL, "rank", "1"), -EINVAL);
	T_ERR(ckpt_config_set(&cfg, NULL, "1"), -EINVAL);
	T_ERR(ckpt_config_set(&cfg, "rank", NULL), -EINVAL);
	ckpt_config_free_strings(&cfg);
}

static ckpt_ctx *open_ctx(const char *root)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	T_OK(ckpt_config_set(&cfg, "job_id", "rm"));
	T_OK(ckpt_config_set(&cfg, "root", root));
	T_OK(ckpt_config_set(&cfg, "chunk_bytes", "64K"));
	T_OK(ckpt_config_set(&cfg, "staging_bytes", "1M"));
	ckpt_ctx *ctx;
	int err = ckpt_ctx_open(&cfg, &ctx);
	ckpt_config_free_strings(&cfg); /* the context copied what it keeps */
	T_OK(err);
	return ctx;
}

static void add(ckpt_ctx *ctx, const char *name, void *p, size_t n)
{
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, name, p, n);
	T_OK(ckpt_region_add(ctx, &d));
}

static void save(ckpt_ctx *ctx, uint64_t v)
{
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, v, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, NULL));
	ckpt_handle_free(h);
}

static void region_remove(void)
{
	char *root = t_tmpdir("binding");
	ckpt_ctx *ctx = open_ctx(root);
	size_t n1 = 100000, n2 = 3000, n3 = 70000;
	uint8_t *a = malloc(n1), *b = malloc(n2), *moved = malloc(n3), *c = malloc(n3);
	t_fill(a, n1, 1);
	t_fill(b, n2, 2);
	add(ctx, "a", a, n1);
	add(ctx, "b", b, n2);
	T_ERR(ckpt_region_remove(ctx, "nope"), -ENOENT);
	T_ERR(ckpt_region_remove(NULL, "a"), -EINVAL);
	T_ERR(ckpt_region_remove(ctx, NULL), -EINVAL);
	save(ctx, 1);

	/* "a" moves to a new buffer of another size: removed, added again. */
	T_OK(ckpt_region_remove(ctx, "a"));
	T_ERR(ckpt_region_remove(ctx, "a"), -ENOENT);
	t_fill(moved, n3, 3);
	add(ctx, "a", moved, n3);
	free(a); /* no longer borrowed */
	save(ctx, 2);
	T_OK(ckpt_region_remove(ctx, "b"));
	T_OK(ckpt_region_remove(ctx, "a"));
	T_ERR(ckpt_save(ctx, 3, 0, NULL), -CKPT_ESTATE); /* nothing registered */

	/* Restore follows the registered set: version 2's "a" into c. */
	add(ctx, "a", c, n3);
	uint64_t got = 0;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	T_ASSERT(got == 2);
	T_ASSERT(!memcmp(c, moved, n3));
	/* Version 1 held the old, smaller "a": a mismatch, named. */
	T_ERR(ckpt_restore(ctx, 1, 0, NULL), -CKPT_EMISMATCH);
	/* Version 1 "b" alone restores. */
	T_OK(ckpt_region_remove(ctx, "a"));
	uint8_t *b2 = calloc(1, n2);
	add(ctx, "b", b2, n2);
	T_OK(ckpt_restore(ctx, 1, 0, &got));
	T_ASSERT(got == 1 && !memcmp(b2, b, n2));
	T_OK(ckpt_ctx_close(ctx));
	free(b);
	free(b2);
	free(c);
	free(moved);
	t_rmrf(root);
}

/* ckpt_version_delete: one version gone (files and records), the others
 * restore; a missing version, a save in flight and bad arguments refused. */
static void version_delete(void)
{
	char *root = t_tmpdir("binding-del");
	ckpt_ctx *ctx = open_ctx(root);
	size_t n = 200000;
	uint8_t *a = malloc(n), *back = malloc(n);
	add(ctx, "a", a, n);
	for (uint64_t v = 1; v <= 3; v++) {
		t_fill(a, n, v);
		save(ctx, v);
	}
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/jobs/rm/v%020llu", root, 2ull);
	T_ASSERT(access(dir, F_OK) == 0);
	T_OK(ckpt_version_delete(ctx, 2));
	T_ASSERT(access(dir, F_OK) != 0);
	ckpt_version_info vi[4] = { 0 };
	size_t cnt = 0;
	T_OK(ckpt_versions_list(ctx, vi, 4, &cnt));
	T_ASSERT(cnt == 2 && vi[0].version == 1 && vi[1].version == 3);
	/* What a restore of the newest would try: the two left, oldest first. */
	uint64_t rv[1] = { 0 };
	T_OK(ckpt_versions_restorable(ctx, NULL, 0, &cnt));
	T_ASSERT(cnt == 2);
	T_OK(ckpt_versions_restorable(ctx, rv, 1, &cnt));
	T_ASSERT(cnt == 2 && rv[0] == 1);
	T_ERR(ckpt_versions_restorable(ctx, NULL, 1, &cnt), -EINVAL);
	T_ERR(ckpt_versions_restorable(NULL, NULL, 0, &cnt), -EINVAL);
	T_ERR(ckpt_version_delete(ctx, 2), -CKPT_ENOVERSION);
	T_ERR(ckpt_version_delete(ctx, CKPT_LATEST), -EINVAL);
	T_ERR(ckpt_version_delete(NULL, 1), -EINVAL);
	T_ERR(ckpt_restore(ctx, 2, 0, NULL), -CKPT_ENOVERSION);
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "a", back, n);
	T_OK(ckpt_region_remove(ctx, "a"));
	T_OK(ckpt_region_add(ctx, &d));
	T_OK(ckpt_restore(ctx, 1, 0, NULL));
	t_fill(a, n, 1);
	T_ASSERT(!memcmp(a, back, n));
	/* A save still persisting (each chunk held 200 ms) cannot be deleted. */
	T_OK(ckpt_ctx_close(ctx));
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.job_id = "rm";
	cfg.root = root;
	cfg.chunk_bytes = 64 << 10;
	cfg.faults = "persist.chunk=delay:200";
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	add(ctx, "a", a, n);
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 9, 0, &h));
	T_ERR(ckpt_version_delete(ctx, 9), -EBUSY);
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, NULL));
	ckpt_handle_free(h);
	T_OK(ckpt_version_delete(ctx, 9));
	T_OK(ckpt_ctx_close(ctx));
	free(a);
	free(back);
	t_rmrf(root);
}

int main(void)
{
	config_set();
	region_remove();
	version_delete();
	printf("binding api: ok\n");
	return T_EXIT_PASS;
}
