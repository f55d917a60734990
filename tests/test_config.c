/* Configuration: defaults, CKPT_* variables, config files, and the errors
 * that name a bad value; invalid names and contexts are refused. */
#include "helpers.h"
#include "ckpt.h"

static int try_open(ckpt_config *cfg)
{
	ckpt_ctx *ctx = NULL;
	int r = ckpt_ctx_open(cfg, &ctx);
	T_ASSERT((r == 0) == (ctx != NULL));
	ckpt_ctx_close(ctx);
	return r;
}

int main(void)
{
	char *root = t_tmpdir("config");
	ckpt_config cfg;
	unsetenv("CKPT_CHUNK_BYTES");
	T_OK(ckpt_config_init(&cfg));
	T_ASSERT(cfg.size == sizeof(cfg));
	T_ASSERT(cfg.chunk_bytes == 8u << 20);
	T_ASSERT(cfg.world_size == 1 && cfg.rank == 0);
	T_ASSERT(cfg.tiers == CKPT_TIER_LOCAL_DISK);
	T_ASSERT(cfg.pool_policy == CKPT_POOL_WAIT);

	setenv("CKPT_CHUNK_BYTES", "1MiB", 1);
	setenv("CKPT_POOL_POLICY", "skip", 1);
	setenv("CKPT_COMPRESS", "yes", 1);
	setenv("CKPT_JOB", "from-env", 1);
	T_OK(ckpt_config_init(&cfg));
	T_ASSERT(cfg.chunk_bytes == 1u << 20);
	T_ASSERT(cfg.pool_policy == CKPT_POOL_SKIP);
	T_ASSERT(cfg.compress == 1);
	T_ASSERT(!strcmp(cfg.job_id, "from-env"));
	setenv("CKPT_CHUNK_BYTES", "12 parsecs", 1);
	T_ERR(ckpt_config_init(&cfg), -CKPT_ECONFIG);
	T_ASSERT(cfg.chunk_bytes == 8u << 20); /* the default stands for a bad value */
	unsetenv("CKPT_CHUNK_BYTES");
	unsetenv("CKPT_POOL_POLICY");
	unsetenv("CKPT_COMPRESS");
	unsetenv("CKPT_JOB");

	char path[600];
	snprintf(path, sizeof(path), "%s/ckpt.conf", root);
	FILE *f = fopen(path, "w");
	fprintf(f, "# a comment\njob_id = filejob\nroot = %s\nstaging_bytes = 4M  # trailing\nworkers=3\n", root);
	fclose(f);
	T_OK(ckpt_config_init(&cfg));
	T_OK(ckpt_config_load_file(&cfg, path));
	T_ASSERT(!strcmp(cfg.job_id, "filejob") && !strcmp(cfg.root, root));
	T_ASSERT(cfg.staging_bytes == 4u << 20 && cfg.workers == 3);
	cfg.chunk_bytes = 1 << 20;
	T_OK(try_open(&cfg));
	ckpt_config_free_strings(&cfg);
	f = fopen(path, "w");
	fprintf(f, "no_such_setting = 1\n");
	fclose(f);
	T_OK(ckpt_config_init(&cfg));
	T_ERR(ckpt_config_load_file(&cfg, path), -CKPT_ECONFIG);
	T_ERR(ckpt_config_load_file(&cfg, "/nonexistent/ckpt.conf"), -ENOENT);

	/* Bad contexts. */
	T_OK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.staging_bytes = 1 << 20;
	cfg.chunk_bytes = 1 << 20;
	cfg.job_id = "../etc";
	T_ERR(try_open(&cfg), -CKPT_ENAME);
	cfg.job_id = "";
	T_ERR(try_open(&cfg), -CKPT_ENAME);
	cfg.job_id = "ok";
	cfg.rank = 4;
	cfg.world_size = 4;
	T_ERR(try_open(&cfg), -CKPT_ECONFIG);
	cfg.rank = 0;
	cfg.chunk_bytes = 5000;
	T_ERR(try_open(&cfg), -CKPT_ECONFIG);
	cfg.chunk_bytes = 1 << 20;
	cfg.tiers = CKPT_TIER_PEER_MEM | CKPT_TIER_LOCAL_DISK;
	T_ERR(try_open(&cfg), -CKPT_ECONFIG);
	cfg.tiers = CKPT_TIER_LOCAL_DISK;
	cfg.backend = "no-such-backend";
	T_ERR(try_open(&cfg), -ENOENT);
	cfg.backend = "psync";
	T_OK(try_open(&cfg));
	cfg.backend = NULL;
	cfg.faults = "save.before_data=explode";
	T_ERR(try_open(&cfg), -CKPT_ECONFIG);
	cfg.faults = NULL;
	cfg.root = NULL;
	T_ERR(try_open(&cfg), -CKPT_ECONFIG);
	cfg.root = root;

	/* Region names. */
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	char buf[16];
	ckpt_region_desc d;
	const char *bad[] = { "", ".", "..", "a/b", "../x", "/abs" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ckpt_region_desc_init(&d, bad[i], buf, sizeof(buf));
		T_ERR(ckpt_region_add(ctx, &d), -CKPT_ENAME);
	}
	char longname[300];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[299] = 0;
	ckpt_region_desc_init(&d, longname, buf, sizeof(buf));
	T_ERR(ckpt_region_add(ctx, &d), -CKPT_ENAME);
	T_ERR(ckpt_save(ctx, 1, 0, NULL), -CKPT_ESTATE); /* no region yet */
	ckpt_region_desc_init(&d, "..hidden.ok", buf, sizeof(buf));
	T_OK(ckpt_region_add(ctx, &d));
	ckpt_region_desc_init(&d, "gpu", buf, sizeof(buf));
	d.device = CKPT_DEVICE_CUDA;
	/* A host pointer as a CUDA region: no CUDA in the build, no device, or
	 * not device memory. Never accepted. */
	int gr = ckpt_region_add(ctx, &d);
	T_ASSERT(gr == (ckpt_cuda_available() ? -EINVAL : gr == -ENODEV ? -ENODEV : -ENOTSUP));
	T_ERR(ckpt_save(ctx, CKPT_LATEST, 0, NULL), -EINVAL);
	T_OK(ckpt_ctx_close(ctx));

	/* Strings and versions. */
	T_ASSERT(strstr(ckpt_strerror(-CKPT_ECORRUPT), "corrupt"));
	T_ASSERT(strstr(ckpt_strerror(-ENOENT), "No such file"));
	T_ASSERT(ckpt_strerror(-99999) != NULL);
	/* Every library code has its own text. */
	for (int e = CKPT_ERRNO_OFFSET + 1; e < CKPT_ELAST; e++)
		T_ASSERT(strcmp(ckpt_strerror(-e), "unknown error") != 0);
	T_ASSERT(strstr(ckpt_strerror(-CKPT_ECONTRACT), "ckpt_fence"));
	T_ASSERT(ckpt_version_number() == CKPT_VERSION_NUMBER);
	char v[32];
	snprintf(v, sizeof(v), "%d.%d.%d", CKPT_VERSION_MAJOR, CKPT_VERSION_MINOR, CKPT_VERSION_PATCH);
	T_ASSERT(!strcmp(ckpt_version(), v));
	T_ASSERT(ckpt_dtype_size(CKPT_DTYPE_BF16) == 2 && ckpt_dtype_size(CKPT_DTYPE_COUNT) == 0);
	T_ASSERT(!strcmp(ckpt_state_name(CKPT_STATE_COMMITTED), "COMMITTED"));
	ckpt_ctx_close(NULL);
	ckpt_handle_free(NULL);
	t_rmrf(root);
	printf("config: ok\n");
	return T_EXIT_PASS;
}
