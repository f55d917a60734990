/* A sharded model for elastic restore, through the public API only:
 *
 *   ckpt-reshard-bench save    --root R --job J --ranks N --bytes B [--version V] [--chunk-bytes C]
 *   ckpt-reshard-bench restore --root R --job J --ranks M [--version V] [--check] [--chunk-bytes C]
 *
 * The model: "w" f32 [rows, 1024] (90% of B), split by rows; "emb" f16
 * [rows2, 512] (the rest), split by columns; "step" an i64 scalar every
 * rank saves the same (a blob); "rng" 64 bytes of each rank's own. Values
 * follow the flat index (w: (i mod 65521) / 4, emb: i mod 2039), so any
 * reader can check them. save runs the N ranks one after the other; restore
 * starts the M ranks at once (a job coming back), times ckpt_restore on
 * each, and prints one JSON line: bytes restored, seconds from the first
 * rank's start to the last rank's end. --check compares every element. */
#define _GNU_SOURCE
#include "ckpt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct opts {
	const char *mode, *root, *job;
	uint32_t ranks;
	uint64_t bytes, version, chunk;
	int check;
} opts;

typedef struct model {
	uint64_t wrows, erows;
} model;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "ckpt-reshard-bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t parse_size(const char *s)
{
	char *e;
	uint64_t v = strtoull(s, &e, 10);
	if (*e == 'K' || *e == 'k')
		v <<= 10;
	else if (*e == 'M' || *e == 'm')
		v <<= 20;
	else if (*e == 'G' || *e == 'g')
		v <<= 30;
	return v;
}

/* [lo, hi) of n split into w near-equal parts. */
static void part(uint64_t n, uint32_t w, uint32_t r, uint64_t *lo, uint64_t *cnt)
{
	*lo = n * r / w;
	*cnt = n * (r + 1) / w - *lo;
}

static float wval(uint64_t i)
{
	return (float)(i % 65521) * 0.25f;
}

static _Float16 eval(uint64_t i)
{
	return (_Float16)(float)(i % 2039);
}

typedef struct rank_state {
	float *w;
	_Float16 *e;
	int64_t step;
	uint8_t rng[64];
	uint64_t wlo, wcnt, elo, ecnt;
} rank_state;

static ckpt_ctx *setup(const opts *o, const model *m, uint32_t r, rank_state *s, int fill)
{
	ckpt_config cfg;
	ckpt_ctx *ctx;
	if (ckpt_config_init(&cfg) < 0)
		die("config");
	cfg.root = o->root;
	cfg.job_id = o->job;
	cfg.rank = r;
	cfg.world_size = o->ranks;
	if (o->chunk)
		cfg.chunk_bytes = o->chunk;
	cfg.staging_bytes = 64ull << 20;
	int err = ckpt_ctx_open(&cfg, &ctx);
	if (err < 0)
		die("rank %u: ckpt_ctx_open: %s", r, ckpt_strerror(err));
	part(m->wrows, o->ranks, r, &s->wlo, &s->wcnt);
	part(512, o->ranks, r, &s->elo, &s->ecnt);
	uint64_t wn = s->wcnt * 1024, en = m->erows * s->ecnt;
	s->w = malloc(wn * 4 + 4);
	s->e = malloc(en * 2 + 2);
	if (!s->w || !s->e)
		die("rank %u: out of memory", r);
	if (fill) {
		for (uint64_t i = 0; i < wn; i++)
			s->w[i] = wval(s->wlo * 1024 + i);
		for (uint64_t y = 0; y < m->erows; y++)
			for (uint64_t x = 0; x < s->ecnt; x++)
				s->e[y * s->ecnt + x] = eval(y * 512 + s->elo + x);
		s->step = 1234;
		for (int i = 0; i < 64; i++)
			s->rng[i] = (uint8_t)(r * 7 + i);
	} else {
		memset(s->w, 0xff, wn * 4); /* first touch outside the timed part */
		memset(s->e, 0xff, en * 2);
	}
	ckpt_region_desc d = { .size = sizeof(d), .name = "w", .ptr = s->w, .bytes = wn * 4, .dtype = CKPT_DTYPE_F32,
	                       .ndim = 2, .global_shape = { m->wrows, 1024 }, .offsets = { s->wlo, 0 },
	                       .extents = { s->wcnt, 1024 } };
	if ((err = ckpt_region_add(ctx, &d)) < 0)
		die("region w: %s", ckpt_strerror(err));
	ckpt_region_desc e = { .size = sizeof(e), .name = "emb", .ptr = s->e, .bytes = en * 2, .dtype = CKPT_DTYPE_F16,
	                       .ndim = 2, .global_shape = { m->erows, 512 }, .offsets = { 0, s->elo },
	                       .extents = { m->erows, s->ecnt } };
	if ((err = ckpt_region_add(ctx, &e)) < 0)
		die("region emb: %s", ckpt_strerror(err));
	ckpt_region_desc b;
	ckpt_region_desc_init(&b, "step", &s->step, sizeof(s->step));
	b.dtype = CKPT_DTYPE_I64;
	ckpt_region_add(ctx, &b);
	ckpt_region_desc_init(&b, "rng", s->rng, sizeof(s->rng));
	ckpt_region_add(ctx, &b);
	return ctx;
}

static int check(const model *m, uint32_t r, const rank_state *s)
{
	for (uint64_t i = 0; i < s->wcnt * 1024; i++)
		if (s->w[i] != wval(s->wlo * 1024 + i)) {
			fprintf(stderr, "rank %u: w element %llu is %g, saved %g\n", r,
			        (unsigned long long)(s->wlo * 1024 + i), s->w[i], wval(s->wlo * 1024 + i));
			return 1;
		}
	for (uint64_t y = 0; y < m->erows; y++)
		for (uint64_t x = 0; x < s->ecnt; x++)
			if (s->e[y * s->ecnt + x] != eval(y * 512 + s->elo + x)) {
				fprintf(stderr, "rank %u: emb [%llu,%llu] differs\n", r, (unsigned long long)y,
				        (unsigned long long)(s->elo + x));
				return 1;
			}
	if (s->step != 1234) {
		fprintf(stderr, "rank %u: step is %lld\n", r, (long long)s->step);
		return 1;
	}
	return 0;
}

static void save_rank(const opts *o, const model *m, uint32_t r)
{
	rank_state s;
	ckpt_ctx *ctx = setup(o, m, r, &s, 1);
	ckpt_handle *h;
	int err = ckpt_save(ctx, o->version, 0, &h);
	if (err == 0)
		err = ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL);
	if (err < 0)
		die("rank %u: save: %s", r, ckpt_strerror(err));
	ckpt_handle_free(h);
	ckpt_ctx_close(ctx);
	free(s.w);
	free(s.e);
}

/* Writes start and end times to fd. */
static int restore_rank(const opts *o, const model *m, uint32_t r, int go, int fd)
{
	rank_state s;
	ckpt_ctx *ctx = setup(o, m, r, &s, 0);
	char c;
	if (read(go, &c, 1) != 1) /* every rank set up: start together */
		die("rank %u: no start signal", r);
	double t[2];
	t[0] = now_s();
	uint64_t got;
	int err = ckpt_restore(ctx, o->version, 0, &got);
	t[1] = now_s();
	if (err < 0)
		die("rank %u: restore: %s", r, ckpt_strerror(err));
	int bad = o->check ? check(m, r, &s) : 0;
	if (write(fd, t, sizeof(t)) != sizeof(t))
		die("pipe");
	ckpt_ctx_close(ctx);
	free(s.w);
	free(s.e);
	return bad;
}

int main(int argc, char **argv)
{
	opts o = { .version = 1 };
	if (argc < 2)
		die("usage: ckpt-reshard-bench save|restore --root R --job J --ranks N [--bytes B] [--version V] "
		    "[--chunk-bytes C] [--check]");
	o.mode = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--check")) {
			o.check = 1;
			continue;
		}
		if (!v)
			die("%s needs a value", a);
		i++;
		if (!strcmp(a, "--root"))
			o.root = v;
		else if (!strcmp(a, "--job"))
			o.job = v;
		else if (!strcmp(a, "--ranks"))
			o.ranks = (uint32_t)atoi(v);
		else if (!strcmp(a, "--bytes"))
			o.bytes = parse_size(v);
		else if (!strcmp(a, "--version"))
			o.version = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--chunk-bytes"))
			o.chunk = parse_size(v);
		else
			die("unknown option %s", a);
	}
	if (!o.root || !o.job || !o.ranks)
		die("--root, --job and --ranks are required");
	/* The model's shape: from --bytes when saving; a restore reads it back
	 * from the version through the read API. */
	model m;
	if (!strcmp(o.mode, "save")) {
		if (o.bytes < (8u << 20))
			die("--bytes must be at least 8M");
		m.wrows = o.bytes / 10 * 9 / 4096;
		m.erows = (o.bytes - m.wrows * 4096) / 1024;
		for (uint32_t r = 0; r < o.ranks; r++)
			save_rank(&o, &m, r);
		printf("{\"saved_bytes\": %llu, \"ranks\": %u}\n", (unsigned long long)(m.wrows * 4096 + m.erows * 1024),
		       o.ranks);
		return 0;
	}
	if (strcmp(o.mode, "restore"))
		die("mode is save or restore");
	char why[512] = "";
	ckpt_view *v;
	size_t wi, ei;
	int err = ckpt_view_open(o.root, o.job, o.version, &v, why, sizeof(why));
	if (err < 0)
		die("ckpt_view_open: %s", why);
	ckpt_tensor_info wt = { .size = sizeof(wt) }, et = { .size = sizeof(et) };
	if (ckpt_view_find(v, "w", &wi) < 0 || ckpt_view_find(v, "emb", &ei) < 0)
		die("the version holds no 'w' or 'emb'");
	ckpt_view_tensor(v, wi, &wt);
	ckpt_view_tensor(v, ei, &et);
	m.wrows = wt.shape[0];
	m.erows = et.shape[0];
	ckpt_view_close(v);
	int go[2], res[2];
	if (pipe(go) < 0 || pipe(res) < 0)
		die("pipe");
	pid_t *pids = calloc(o.ranks, sizeof(*pids));
	for (uint32_t r = 0; r < o.ranks; r++) {
		if ((pids[r] = fork()) == 0) {
			close(go[1]);
			close(res[0]);
			_exit(restore_rank(&o, &m, r, go[0], res[1]));
		}
	}
	close(go[0]);
	close(res[1]);
	sleep(1); /* let every rank open its context and fault in its regions */
	char starts[64] = { 0 };
	if (write(go[1], starts, o.ranks) != (ssize_t)o.ranks)
		die("pipe");
	double t0 = 1e300, t1 = 0, t[2];
	uint32_t n = 0;
	while (read(res[0], t, sizeof(t)) == sizeof(t)) {
		t0 = t[0] < t0 ? t[0] : t0;
		t1 = t[1] > t1 ? t[1] : t1;
		n++;
	}
	int bad = 0;
	for (uint32_t r = 0; r < o.ranks; r++) {
		int st;
		waitpid(pids[r], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	free(pids);
	if (bad || n != o.ranks)
		die("a rank failed");
	uint64_t bytes = m.wrows * 4096 + m.erows * 1024;
	printf("{\"restored_bytes\": %llu, \"ranks\": %u, \"seconds\": %.3f, \"gib_per_s\": %.3f, \"checked\": %d}\n",
	       (unsigned long long)bytes, o.ranks, t1 - t0, bytes / (t1 - t0) / (1 << 30), o.check);
	return 0;
}
