/* Elastic restore: random shardings (1-D and 2-D splits, uneven and empty
 * pieces, several dtypes, a replicated tensor, per-rank blobs) saved by N
 * ranks and restored by M ranks, N and M in 1..5, every element compared
 * with the global tensor it came from. N == M restores twice: with the
 * saved layout (the fast path) and with another one (resharding). Each
 * rank is a process of its own, through the public API only. */
#include "ckpt.h"
#include "helpers.h"

#include <sys/wait.h>

typedef struct tspec {
	const char *name;
	ckpt_dtype dt;
	uint32_t ndim;
	uint64_t shape[3];
	int replicated; /* every rank holds all of it */
} tspec;

static const tspec T[] = {
	{ "a.f32", CKPT_DTYPE_F32, 1, { 50021 }, 0 },
	{ "b.bf16", CKPT_DTYPE_BF16, 2, { 97, 3001 }, 0 },
	{ "c.f64", CKPT_DTYPE_F64, 2, { 64, 800 }, 0 },
	{ "d.i8", CKPT_DTYPE_I8, 3, { 7, 33, 1290 }, 0 },
	{ "ln.f32", CKPT_DTYPE_F32, 1, { 640 }, 1 },
};
#define NT (sizeof(T) / sizeof(T[0]))

static uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Cut [0, len) into n uneven pieces (some may be empty); piece i is
 * [cuts[i], cuts[i+1]). */
static void cut(uint64_t len, uint32_t n, uint64_t seed, uint64_t *cuts)
{
	cuts[0] = 0;
	cuts[n] = len;
	for (uint32_t i = 1; i < n; i++)
		cuts[i] = mix(seed + i) % (len + 1);
	for (uint32_t i = 1; i < n; i++) /* insertion sort: n <= 5 */
		for (uint32_t j = i; j > 1 && cuts[j - 1] > cuts[j]; j--) {
			uint64_t t = cuts[j];
			cuts[j] = cuts[j - 1];
			cuts[j - 1] = t;
		}
}

/* Rank r's box of tensor t in a world of w ranks under layout seed s. */
static void box(const tspec *t, uint32_t r, uint32_t w, uint64_t s, uint64_t *off, uint64_t *ext)
{
	uint64_t cuts[8], cuts2[8];
	for (uint32_t d = 0; d < t->ndim; d++) {
		off[d] = 0;
		ext[d] = t->shape[d];
	}
	if (t->replicated || w == 1)
		return;
	uint64_t seed = mix(s * 131 + (uint64_t)(t - T) * 7 + w);
	uint32_t mode = (uint32_t)(seed % 3);
	if (t->ndim == 2 && mode == 2 && (w == 4 || w == 2)) { /* a 2-D grid: 2 x (w/2) */
		uint32_t a = 2, b = w / 2;
		cut(t->shape[0], a, seed + 1, cuts);
		cut(t->shape[1], b, seed + 2, cuts2);
		uint32_t i = r / b, j = r % b;
		off[0] = cuts[i];
		ext[0] = cuts[i + 1] - cuts[i];
		off[1] = cuts2[j];
		ext[1] = cuts2[j + 1] - cuts2[j];
		return;
	}
	uint32_t d = (uint32_t)(seed / 3 % t->ndim);
	cut(t->shape[d], w, seed + 3, cuts);
	off[d] = cuts[r];
	ext[d] = cuts[r + 1] - cuts[r];
}

/* The bytes of element `flat` of tensor ti. */
static void elem(size_t ti, uint64_t flat, uint8_t *out, size_t es)
{
	uint64_t v = mix(ti * 1000003 + flat);
	memcpy(out, &v, es);
}

/* Fills buf with the elements of box (off, ext) of tensor ti. */
static void fill(size_t ti, const uint64_t *off, const uint64_t *ext, uint8_t *buf)
{
	const tspec *t = &T[ti];
	size_t es = ckpt_dtype_size(t->dt);
	uint64_t n = 1, idx[3] = { 0 };
	for (uint32_t d = 0; d < t->ndim; d++)
		n *= ext[d];
	for (uint64_t k = 0; k < n; k++) {
		uint64_t q = k, flat = 0;
		for (int d = (int)t->ndim - 1; d >= 0; d--) {
			idx[d] = q % ext[d];
			q /= ext[d];
		}
		for (uint32_t d = 0; d < t->ndim; d++)
			flat = flat * t->shape[d] + off[d] + idx[d];
		elem(ti, flat, buf + k * es, es);
	}
}

static uint64_t blob_len(uint32_t r)
{
	return 100 + r;
}

static void blob_fill(uint32_t r, uint8_t *b)
{
	for (uint64_t i = 0; i < blob_len(r); i++)
		b[i] = (uint8_t)(r * 31 + i);
}

static ckpt_ctx *open_ctx(const char *root, const char *job, uint32_t r, uint32_t w, int compress)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.job_id = job;
	cfg.rank = r;
	cfg.world_size = w;
	cfg.compress = compress;
	cfg.chunk_bytes = 64 << 10;
	cfg.staging_bytes = 1 << 20;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	return ctx;
}

/* One rank: save (restore 0) or restore and compare (restore 1). */
static void rank_main(const char *root, const char *job, uint32_t r, uint32_t w, uint64_t layout, int restore,
                      uint32_t saved_world)
{
	ckpt_ctx *ctx = open_ctx(root, job, r, w, (int)(saved_world & 1));
	uint8_t *bufs[NT];
	uint64_t off[NT][3], ext[NT][3], bytes[NT];
	for (size_t i = 0; i < NT; i++) {
		const tspec *t = &T[i];
		size_t es = ckpt_dtype_size(t->dt);
		box(t, r, w, layout, off[i], ext[i]);
		bytes[i] = es;
		for (uint32_t d = 0; d < t->ndim; d++)
			bytes[i] *= ext[i][d];
		bufs[i] = malloc(bytes[i] + 1);
		T_ASSERT(bufs[i]);
		if (restore)
			memset(bufs[i], 0xA5, bytes[i]);
		else
			fill(i, off[i], ext[i], bufs[i]);
		ckpt_region_desc d = { .size = sizeof(d), .name = t->name, .ptr = bufs[i], .bytes = bytes[i],
		                       .dtype = t->dt, .device = CKPT_DEVICE_HOST, .ndim = t->ndim };
		memcpy(d.global_shape, t->shape, sizeof(t->shape));
		memcpy(d.offsets, off[i], sizeof(off[i]));
		memcpy(d.extents, ext[i], sizeof(ext[i]));
		T_OK(ckpt_region_add(ctx, &d));
	}
	/* The blob rule: this rank's copy if the saved job had it, else rank 0's. */
	uint32_t from = restore && r >= saved_world ? 0 : r;
	uint8_t blob[256], want[256];
	blob_fill(from, want);
	if (restore)
		memset(blob, 0, sizeof(blob));
	else
		memcpy(blob, want, blob_len(from));
	ckpt_region_desc bd;
	ckpt_region_desc_init(&bd, "meta", blob, blob_len(from));
	T_OK(ckpt_region_add(ctx, &bd));
	if (!restore) {
		ckpt_handle *h;
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_save(ctx, 5, 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, &st));
		ckpt_handle_free(h);
	} else {
		uint64_t got = 0;
		T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
		T_ASSERT(got == 5);
		for (size_t i = 0; i < NT; i++) {
			uint8_t *exp = malloc(bytes[i] + 1);
			fill(i, off[i], ext[i], exp);
			if (memcmp(exp, bufs[i], bytes[i])) {
				size_t k = 0;
				while (exp[k] == bufs[i][k])
					k++;
				T_FAIL("saved %u ranks, rank %u of %u: '%s' differs at byte %zu of %llu", saved_world, r, w,
				       T[i].name, k, (unsigned long long)bytes[i]);
			}
			free(exp);
		}
		if (memcmp(blob, want, blob_len(from)))
			T_FAIL("saved %u ranks, rank %u of %u: blob 'meta' is not rank %u's copy", saved_world, r, w, from);
	}
	for (size_t i = 0; i < NT; i++)
		free(bufs[i]);
	T_OK(ckpt_ctx_close(ctx));
}

static void run_ranks(const char *root, const char *job, uint32_t w, uint64_t layout, int restore, uint32_t saved)
{
	for (uint32_t r = 0; r < w; r++) {
		pid_t pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0) {
			rank_main(root, job, r, w, layout, restore, saved);
			_exit(0);
		}
		int st;
		T_ASSERT(waitpid(pid, &st, 0) == pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			T_FAIL("%s %u ranks (saved by %u): rank %u failed", restore ? "restore into" : "save with", w, saved,
			       r);
	}
}

int main(void)
{
	char *root = t_tmpdir("elastic");
	uint64_t seed = getenv("CKPT_TEST_SEED") ? strtoull(getenv("CKPT_TEST_SEED"), NULL, 0) : 20261201;
	printf("elastic: seed %llu\n", (unsigned long long)seed);
	/* CKPT_TEST_N: only the versions saved by that many ranks. */
	uint32_t only = getenv("CKPT_TEST_N") ? (uint32_t)atoi(getenv("CKPT_TEST_N")) : 0;
	for (uint32_t n = 1; n <= 5; n++) {
		char job[32];
		if (only && n != only)
			continue;
		snprintf(job, sizeof(job), "j%u", n);
		run_ranks(root, job, n, seed + n, 0, n);
		for (uint32_t m = 1; m <= 5; m++) {
			run_ranks(root, job, m, seed + m, 1, n);
			if (m == n) /* the same world with another layout */
				run_ranks(root, job, m, seed + 100 + m, 1, n);
		}
		printf("elastic: saved by %u, restored into 1..5: ok\n", n);
	}
	t_rmrf(root);
	printf("elastic: ok\n");
	return T_EXIT_PASS;
}
