/* Elastic restore and the read API facing inconsistent checkpoints: pieces
 * that overlap, gaps, shapes that disagree between ranks, replicas that
 * differ. Each is saved by ranks (processes) that register the pieces as
 * given, then restored into one rank and opened with ckpt_view_open. */
#include "ckpt.h"
#include "helpers.h"

#include <sys/wait.h>

#define LEN 100

typedef struct piece {
	uint64_t shape, off, ext;
	float bias; /* added to the values: replicas that differ */
} piece;

static float value(uint64_t i)
{
	return (float)i * 0.5f + 1.0f;
}

static ckpt_ctx *open_ctx(const char *root, const char *job, uint32_t r, uint32_t w)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.job_id = job;
	cfg.rank = r;
	cfg.world_size = w;
	cfg.chunk_bytes = 64 << 10;
	cfg.staging_bytes = 1 << 20;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	return ctx;
}

static void add(ckpt_ctx *ctx, float *buf, const piece *p)
{
	ckpt_region_desc d = { .size = sizeof(d), .name = "w", .ptr = buf, .bytes = p->ext * sizeof(float),
	                       .dtype = CKPT_DTYPE_F32, .ndim = 1 };
	d.global_shape[0] = p->shape;
	d.offsets[0] = p->off;
	d.extents[0] = p->ext;
	T_OK(ckpt_region_add(ctx, &d));
}

static void save(const char *root, const char *job, const piece *p, uint32_t w)
{
	for (uint32_t r = 0; r < w; r++) {
		pid_t pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0) {
			ckpt_ctx *ctx = open_ctx(root, job, r, w);
			float buf[LEN + 1];
			for (uint64_t i = 0; i < p[r].ext; i++)
				buf[i] = value(p[r].off + i) + p[r].bias;
			add(ctx, buf, &p[r]);
			ckpt_handle *h;
			T_OK(ckpt_save(ctx, 1, 0, &h));
			T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
			ckpt_handle_free(h);
			T_OK(ckpt_ctx_close(ctx));
			_exit(0);
		}
		int st;
		T_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

/* Restores [off, off+ext) into one rank (a process); returns ckpt_restore's
 * result, and checks the values when it is 0. */
static int restore(const char *root, const char *job, uint64_t off, uint64_t ext)
{
	int fds[2];
	T_ASSERT(pipe(fds) == 0);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		ckpt_ctx *ctx = open_ctx(root, job, 0, 1);
		float buf[LEN + 1];
		piece p = { LEN, off, ext, 0 };
		add(ctx, buf, &p);
		int r = ckpt_restore(ctx, 1, 0, NULL);
		for (uint64_t i = 0; r == 0 && i < ext; i++)
			if (buf[i] != value(off + i))
				T_FAIL("%s: element %llu is %g, saved %g", job, (unsigned long long)(off + i), buf[i],
				       value(off + i));
		T_OK(ckpt_ctx_close(ctx));
		T_ASSERT(write(fds[1], &r, sizeof(r)) == sizeof(r));
		_exit(0);
	}
	close(fds[1]);
	int r = 1, st;
	T_ASSERT(read(fds[0], &r, sizeof(r)) == sizeof(r));
	close(fds[0]);
	T_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return r;
}

/* ckpt_view_open's result; why must mention `word` when it fails. */
static int view(const char *root, const char *job, const char *word, uint64_t *missing)
{
	char why[512] = "";
	ckpt_view *v;
	int r = ckpt_view_open(root, job, 1, &v, why, sizeof(why));
	if (r < 0) {
		if (word && !strstr(why, word))
			T_FAIL("%s: ckpt_view_open: '%s' does not say '%s'", job, why, word);
		printf("  %s: %s\n", job, why);
		return r;
	}
	ckpt_tensor_info ti = { .size = sizeof(ti) };
	T_OK(ckpt_view_tensor(v, 0, &ti));
	*missing = ti.missing;
	ckpt_view_close(v);
	return 0;
}

int main(void)
{
	char *root = t_tmpdir("hostile");
	uint64_t missing = 0;

	/* Two ranks claim elements 50..59. */
	piece overlap[2] = { { LEN, 0, 60, 0 }, { LEN, 50, 50, 0 } };
	save(root, "overlap", overlap, 2);
	T_ERR(restore(root, "overlap", 0, LEN), -CKPT_ECORRUPT);
	T_ERR(view(root, "overlap", "overlap", &missing), -CKPT_ECORRUPT);

	/* Elements 40..49 are in no shard: a restore that needs them is
	 * refused, one that does not succeeds. */
	piece gap[2] = { { LEN, 0, 40, 0 }, { LEN, 50, 50, 0 } };
	save(root, "gap", gap, 2);
	T_ERR(restore(root, "gap", 0, LEN), -CKPT_EMISMATCH);
	T_ERR(restore(root, "gap", 35, 10), -CKPT_EMISMATCH);
	T_OK(restore(root, "gap", 50, 50));
	T_OK(restore(root, "gap", 10, 30));
	T_OK(view(root, "gap", NULL, &missing));
	T_ASSERT(missing == 10);

	/* The ranks disagree on the global shape. */
	piece shape[2] = { { LEN, 0, 50, 0 }, { LEN + 1, 50, 51, 0 } };
	save(root, "shape", shape, 2);
	T_ERR(restore(root, "shape", 0, LEN), -CKPT_ECORRUPT);
	T_ERR(view(root, "shape", "disagree", &missing), -CKPT_ECORRUPT);

	/* Replicas: the same box on three ranks with the same bytes is fine... */
	piece same[3] = { { LEN, 0, LEN, 0 }, { LEN, 0, LEN, 0 }, { LEN, 0, LEN, 0 } };
	save(root, "replicas", same, 3);
	T_OK(restore(root, "replicas", 0, LEN));
	T_OK(view(root, "replicas", NULL, &missing));
	T_ASSERT(missing == 0);
	/* ...with different bytes it is an inconsistency. */
	piece differ[2] = { { LEN, 0, LEN, 0 }, { LEN, 0, LEN, 1.0f } };
	save(root, "differ", differ, 2);
	T_ERR(restore(root, "differ", 0, LEN), -CKPT_ECORRUPT);
	T_ERR(view(root, "differ", "different bytes", &missing), -CKPT_ECORRUPT);

	t_rmrf(root);
	printf("elastic_hostile: ok\n");
	return T_EXIT_PASS;
}
