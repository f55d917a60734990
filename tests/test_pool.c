/* The staging pool is bounded: CKPT_POOL_SKIP refuses a save that does not
 * fit (ESKIPPED while busy, ETOOBIG when it never can) and takes nothing;
 * CKPT_POOL_WAIT blocks and streams a save larger than the pool. */
#include "helpers.h"
#include "ckpt.h"

#include <fcntl.h>
#include <unistd.h>

#define CHUNK (64u << 10)

static ckpt_ctx *open_ctx(const char *root, const char *job, ckpt_pool_policy pol, uint64_t staging,
                          const char *faults)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.job_id = job;
	cfg.chunk_bytes = CHUNK;
	cfg.staging_bytes = staging;
	cfg.pool_policy = pol;
	cfg.faults = faults;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	return ctx;
}

/* Runs fn with stderr in a file; returns how many lines of it hold what. */
static int count_logged(const char *root, const char *what, void (*fn)(void *), void *arg)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/stderr.log", root);
	fflush(stderr);
	int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	T_ASSERT(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	size_t len = 0;
	char *log = t_slurp(path, &len);
	int n = 0;
	for (char *p = log; p && (p = strstr(p, what)); p++)
		n++;
	free(log);
	return n;
}

struct twice {
	ckpt_ctx *ctx;
	uint64_t stall_ns[2];
};

static void save_twice(void *arg)
{
	struct twice *t = arg;
	for (int i = 0; i < 2; i++) {
		ckpt_handle *h;
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_save(t->ctx, 10 + (uint64_t)i, 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, &st));
		t->stall_ns[i] = st.stall_ns;
		ckpt_handle_free(h);
	}
}

/* staging_bytes auto (the default): the context opens with a restore's read
 * buffers, the first save sizes the pool from the state, so that a save of
 * a state larger than the old fixed default does not wait for a slow disk;
 * staging_max_bytes bounds it, and a save larger than the pool is logged
 * once, naming the setting. */
static void auto_sizing(const char *root)
{
	const uint64_t nch = 40;
	size_t n = nch * CHUNK;
	uint8_t *s = malloc(n), *back = malloc(n);
	t_fill(s, n, 7);
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	T_ASSERT(cfg.staging_bytes == 0 && cfg.staging_max_bytes == 0); /* auto */
	cfg.root = root;
	cfg.job_id = "auto";
	cfg.chunk_bytes = CHUNK;
	cfg.faults = "persist.chunk=delay:50";
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	uint64_t pool = 0, need = 1;
	T_OK(ckpt_staging_size(ctx, &pool, &need));
	T_ASSERT(pool == (cfg.io_depth + 1ull) * CHUNK && need == 0);
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "s", s, n);
	T_OK(ckpt_region_add(ctx, &d));
	struct twice t = { .ctx = ctx };
	T_ASSERT(count_logged(root, "staging_bytes (CKPT_STAGING_BYTES)", save_twice, &t) == 0);
	T_OK(ckpt_staging_size(ctx, &pool, &need));
	T_ASSERT(pool == (nch + 2) * CHUNK && need == nch * CHUNK); /* 2 chunks to grow */
	/* Streaming 40 chunks through 9 slots with two workers at 50 ms a
	 * chunk would stall >= 700 ms; sized, the save is the copy alone (the
	 * first one also allocates and faults in the pool). */
	T_ASSERT(t.stall_ns[1] < 300000000ull);
	memset(back, 0, n);
	ckpt_region_desc_init(&d, "s", back, n);
	T_OK(ckpt_region_remove(ctx, "s"));
	T_OK(ckpt_region_add(ctx, &d));
	uint64_t got;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	T_ASSERT(got == 11 && !memcmp(s, back, n));
	T_OK(ckpt_ctx_close(ctx));

	/* Bounded: staging_max_bytes 16 chunks. Both saves stream (each waits
	 * for the slow disk) and the warning comes once. */
	cfg.job_id = "auto-max";
	cfg.staging_max_bytes = 16 * CHUNK;
	cfg.faults = "persist.chunk=delay:5";
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	ckpt_region_desc_init(&d, "s", s, n);
	T_OK(ckpt_region_add(ctx, &d));
	t.ctx = ctx;
	T_ASSERT(count_logged(root, "staging_bytes (CKPT_STAGING_BYTES)", save_twice, &t) == 1);
	T_OK(ckpt_staging_size(ctx, &pool, &need));
	T_ASSERT(pool == 16 * CHUNK && need == nch * CHUNK);
	T_OK(ckpt_ctx_close(ctx));

	/* Set by the caller: allocated at open, never resized. */
	cfg.job_id = "fixed";
	cfg.staging_bytes = 4 * CHUNK;
	cfg.staging_max_bytes = 0;
	cfg.faults = NULL;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	T_OK(ckpt_region_add(ctx, &d));
	t.ctx = ctx;
	T_ASSERT(count_logged(root, "staging_bytes (CKPT_STAGING_BYTES)", save_twice, &t) == 1);
	T_OK(ckpt_staging_size(ctx, &pool, &need));
	T_ASSERT(pool == 4 * CHUNK && need == nch * CHUNK);
	T_OK(ckpt_ctx_close(ctx));
	T_ERR(ckpt_staging_size(NULL, &pool, &need), -EINVAL);
	free(s);
	free(back);
}

int main(void)
{
	char *root = t_tmpdir("pool");
	size_t n = 8 * CHUNK;
	uint8_t *a = malloc(n), *b = malloc(n);
	t_fill(a, n, 1);

	/* SKIP, state bigger than the pool: never fits. */
	ckpt_ctx *ctx = open_ctx(root, "skip-big", CKPT_POOL_SKIP, 4 * CHUNK, NULL);
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "a", a, n);
	T_OK(ckpt_region_add(ctx, &d));
	T_ERR(ckpt_save(ctx, 1, 0, NULL), -CKPT_ETOOBIG);
	size_t cnt = 99;
	T_OK(ckpt_versions_list(ctx, NULL, 0, &cnt));
	T_ASSERT(cnt == 0); /* nothing was taken */
	T_OK(ckpt_ctx_close(ctx));

	/* SKIP, pool busy with a slow earlier save: the second is skipped, the
	 * first still completes, and a later save succeeds. */
	ctx = open_ctx(root, "skip-busy", CKPT_POOL_SKIP, 10 * CHUNK, "persist.chunk=delay:100");
	T_OK(ckpt_region_add(ctx, &d));
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_ERR(ckpt_save(ctx, 2, 0, NULL), -CKPT_ESKIPPED);
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, NULL));
	ckpt_handle_free(h);
	T_OK(ckpt_save(ctx, 3, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, NULL));
	ckpt_handle_free(h);
	ckpt_version_info vi[4] = { 0 };
	T_OK(ckpt_versions_list(ctx, vi, 4, &cnt));
	T_ASSERT(cnt == 2 && vi[0].version == 1 && vi[1].version == 3);
	T_OK(ckpt_ctx_close(ctx));

	/* WAIT, pool of 2 chunks for 8 chunks of state, slow disk: the save
	 * blocks while it streams, and the result is intact. */
	ctx = open_ctx(root, "wait", CKPT_POOL_WAIT, 2 * CHUNK, "persist.chunk=delay:20");
	ckpt_region_desc_init(&d, "a", b, n);
	memcpy(b, a, n);
	T_OK(ckpt_region_add(ctx, &d));
	ckpt_status st = { .size = sizeof(st) };
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, &st));
	/* 6 of the 8 chunks had to wait for a slot freed by one of 2 workers,
	 * each delayed 20 ms: at least 3 x 20 ms. */
	T_ASSERT(st.stall_ns >= 55000000ull);
	T_ASSERT(st.durable_ns >= st.stall_ns);
	ckpt_handle_free(h);
	/* Two saves back to back, each waiting its turn, then a timeout check. */
	T_OK(ckpt_save(ctx, 2, 0, NULL));
	T_OK(ckpt_save(ctx, 3, 0, &h));
	T_ERR(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 1, NULL), -ETIMEDOUT);
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, NULL));
	ckpt_handle_free(h);
	memset(b, 0, n);
	uint64_t got;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	T_ASSERT(got == 3 && !memcmp(a, b, n));
	T_OK(ckpt_ctx_close(ctx));

	/* Closing with a save in flight finishes it; the handle outlives the context. */
	ctx = open_ctx(root, "close", CKPT_POOL_WAIT, 16 * CHUNK, "persist.chunk=delay:10");
	T_OK(ckpt_region_add(ctx, &d));
	T_OK(ckpt_save(ctx, 5, 0, &h));
	T_OK(ckpt_ctx_close(ctx));
	T_OK(ckpt_handle_test(h, CKPT_TIER_LOCAL_DISK, &st));
	T_ASSERT(st.committed);
	ckpt_handle_free(h);

	/* Injected error on the write path: the save fails, nothing is committed,
	 * the error comes back in the completion record. */
	ctx = open_ctx(root, "err", CKPT_POOL_WAIT, 16 * CHUNK, "save.before_fsync=error");
	T_OK(ckpt_region_add(ctx, &d));
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_ERR(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, &st), -CKPT_EFAULT_INJECTED);
	T_ASSERT(st.error == -CKPT_EFAULT_INJECTED && !st.committed);
	ckpt_handle_free(h);
	T_ERR(ckpt_restore(ctx, CKPT_LATEST, 0, NULL), -CKPT_ENOVERSION);
	T_OK(ckpt_ctx_close(ctx));

	auto_sizing(root);
	free(a);
	free(b);
	t_rmrf(root);
	printf("pool: ok\n");
	return T_EXIT_PASS;
}
