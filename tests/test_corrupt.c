/* Damage in a shard file is detected, named, and restore of the latest
 * version falls back to the newest one that verifies. */
#include "helpers.h"
#include "ckpt.h"

#include <fcntl.h>
#include <sys/stat.h>

#define CHUNK (64u << 10)
#define N (5 * CHUNK + 333)

static char root[512];

static void shard_path(char *out, size_t cap, const char *job, uint64_t v)
{
	snprintf(out, cap, "%s/jobs/%s/v%020llu/r%06u.ckpt", root, job, (unsigned long long)v, 0u);
}

static void flip(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	T_ASSERT(fd >= 0);
	uint8_t b;
	T_ASSERT(pread(fd, &b, 1, off) == 1);
	b ^= 0x01;
	T_ASSERT(pwrite(fd, &b, 1, off) == 1);
	close(fd);
}

static off_t file_size(const char *path)
{
	struct stat st;
	T_ASSERT(stat(path, &st) == 0);
	return st.st_size;
}

static ckpt_ctx *open_ctx(const char *job, uint8_t *buf, int compress)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.job_id = job;
	cfg.chunk_bytes = CHUNK;
	cfg.staging_bytes = 16 * CHUNK;
	cfg.compress = compress;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "state", buf, N);
	T_OK(ckpt_region_add(ctx, &d));
	return ctx;
}

static void save(ckpt_ctx *ctx, uint8_t *buf, uint64_t v, int compressible)
{
	t_fill(buf, N, v);
	if (compressible)
		for (size_t i = 0; i < N; i++)
			if (i % 32)
				buf[i] = 0;
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, v, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
	ckpt_handle_free(h);
}

static void expect_version(ckpt_ctx *ctx, uint8_t *buf, uint64_t want, int compressible)
{
	uint8_t *ref = malloc(N);
	t_fill(ref, N, want);
	if (compressible)
		for (size_t i = 0; i < N; i++)
			if (i % 32)
				ref[i] = 0;
	memset(buf, 0, N);
	uint64_t got = 0;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	if (got != want)
		T_FAIL("restored version %llu, expected %llu", (unsigned long long)got, (unsigned long long)want);
	T_ASSERT(!memcmp(buf, ref, N));
	free(ref);
}

/* Each damage is applied to the newest of three versions; latest must fall
 * back to the one before, and the damaged version restored by number fails
 * with CKPT_ECORRUPT. */
static void scenario(const char *job, int compress, void (*damage)(const char *path))
{
	uint8_t *buf = malloc(N);
	ckpt_ctx *ctx = open_ctx(job, buf, compress);
	for (uint64_t v = 1; v <= 3; v++)
		save(ctx, buf, v, compress);
	char p[1024];
	shard_path(p, sizeof(p), job, 3);
	damage(p);
	expect_version(ctx, buf, 2, compress);
	T_ERR(ckpt_restore(ctx, 3, 0, NULL), -CKPT_ECORRUPT);
	T_OK(ckpt_ctx_close(ctx));
	free(buf);
}

static void d_data_bit(const char *p) { flip(p, file_size(p) / 2 + 100); }
static void d_first_data_byte(const char *p) { flip(p, 4096); }
static void d_header(const char *p) { flip(p, 20); }
static void d_tail(const char *p) { flip(p, file_size(p) - 30); }
static void d_footer(const char *p) { flip(p, file_size(p) - 4096 + 70); }
static void d_truncate(const char *p) { T_ASSERT(truncate(p, file_size(p) - 4096) == 0); }
static void d_truncate_mid(const char *p) { T_ASSERT(truncate(p, file_size(p) / 2) == 0); }
static void d_extend(const char *p) { T_ASSERT(truncate(p, file_size(p) + 4096) == 0); }
static void d_unlink(const char *p) { T_ASSERT(unlink(p) == 0); }
static void d_swap(const char *p)
{
	/* A valid shard of another version put in its place. */
	char other[1024];
	snprintf(other, sizeof(other), "%s", p);
	char *v = strstr(other, "v00000000000000000003");
	T_ASSERT(v);
	v[20] = '2';
	char cmd[2200];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", other, p);
	T_ASSERT(system(cmd) == 0);
}

int main(void)
{
	snprintf(root, sizeof(root), "%s", t_tmpdir("corrupt"));
	struct { const char *name; void (*fn)(const char *); } cases[] = {
		{ "data-bit", d_data_bit }, { "first-byte", d_first_data_byte }, { "header", d_header },
		{ "tail", d_tail }, { "footer", d_footer }, { "truncate", d_truncate },
		{ "truncate-mid", d_truncate_mid }, { "extend", d_extend }, { "unlink", d_unlink },
		{ "swap", d_swap },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int z = 0; z <= 1; z++) {
			char job[64];
			snprintf(job, sizeof(job), "%s-%d", cases[i].name, z);
			scenario(job, z, cases[i].fn);
		}
	/* Every version damaged: nothing to restore, and the error says corrupt. */
	uint8_t *buf = malloc(N);
	ckpt_ctx *ctx = open_ctx("all-bad", buf, 0);
	save(ctx, buf, 1, 0);
	char p[1024];
	shard_path(p, sizeof(p), "all-bad", 1);
	d_data_bit(p);
	T_ERR(ckpt_restore(ctx, CKPT_LATEST, 0, NULL), -CKPT_ECORRUPT);
	T_OK(ckpt_ctx_close(ctx));
	free(buf);
	t_rmrf(root);
	printf("corrupt: ok\n");
	return T_EXIT_PASS;
}
