/* The read API (ckpt_view_*): a version saved by 3 ranks holding uneven
 * 2-D pieces of f32 [37, 53] (two column blocks of the first rows, then the
 * remaining rows) and of u16 [1000]; the view lists the tensors and pieces,
 * and random boxes and random byte ranges (any alignment, partial elements)
 * read back exactly the global tensor; reads outside the shape and boxes
 * too big for the buffer are refused. */
#include "ckpt.h"
#include "helpers.h"

#include <sys/wait.h>

#define R 37
#define C 53
#define L 1000

static float fval(uint64_t y, uint64_t x)
{
	return (float)(y * 1000 + x) + 0.25f;
}

static uint16_t uval(uint64_t i)
{
	return (uint16_t)(i * 2654435761u >> 7);
}

/* Rank r's box of the matrix and range of the vector. */
static void boxes(int r, uint64_t *off, uint64_t *ext, uint64_t *vlo, uint64_t *vn)
{
	static const uint64_t b[3][4] = { { 0, 0, 20, 30 }, { 0, 30, 20, C - 30 }, { 20, 0, R - 20, C } };
	off[0] = b[r][0], off[1] = b[r][1], ext[0] = b[r][2], ext[1] = b[r][3];
	*vlo = (uint64_t)r * 333;
	*vn = r == 2 ? L - 666 : 333;
}

static void save_rank(const char *root, int r)
{
	ckpt_config cfg;
	ckpt_ctx *ctx;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.job_id = "view";
	cfg.rank = (uint32_t)r;
	cfg.world_size = 3;
	cfg.chunk_bytes = 64 << 10;
	cfg.staging_bytes = 1 << 20;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	uint64_t off[2], ext[2], vlo, vn;
	boxes(r, off, ext, &vlo, &vn);
	float *m = malloc(ext[0] * ext[1] * sizeof(float) + 4);
	uint16_t *v = malloc(vn * 2 + 2);
	for (uint64_t y = 0; y < ext[0]; y++)
		for (uint64_t x = 0; x < ext[1]; x++)
			m[y * ext[1] + x] = fval(off[0] + y, off[1] + x);
	for (uint64_t i = 0; i < vn; i++)
		v[i] = uval(vlo + i);
	ckpt_region_desc d = { .size = sizeof(d), .name = "m", .ptr = m, .bytes = ext[0] * ext[1] * sizeof(float),
	                       .dtype = CKPT_DTYPE_F32, .ndim = 2, .global_shape = { R, C },
	                       .offsets = { off[0], off[1] }, .extents = { ext[0], ext[1] } };
	T_OK(ckpt_region_add(ctx, &d));
	ckpt_region_desc e = { .size = sizeof(e), .name = "v", .ptr = v, .bytes = vn * 2, .dtype = CKPT_DTYPE_U16,
	                       .ndim = 1, .global_shape = { L }, .offsets = { vlo }, .extents = { vn } };
	T_OK(ckpt_region_add(ctx, &e));
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 9, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
	ckpt_handle_free(h);
	T_OK(ckpt_ctx_close(ctx));
	free(m);
	free(v);
}

static uint64_t rnd(uint64_t *s, uint64_t n)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (*s >> 33) % n;
}

int main(void)
{
	char *root = t_tmpdir("view");
	for (int r = 0; r < 3; r++) {
		pid_t pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0) {
			save_rank(root, r);
			_exit(0);
		}
		int st;
		T_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	/* The whole matrix and vector, as the reads must see them. */
	static float gm[R * C];
	static uint16_t gv[L];
	for (uint64_t y = 0; y < R; y++)
		for (uint64_t x = 0; x < C; x++)
			gm[y * C + x] = fval(y, x);
	for (uint64_t i = 0; i < L; i++)
		gv[i] = uval(i);

	char why[512] = "";
	ckpt_view *v;
	T_ERR(ckpt_view_open(root, "nosuch", CKPT_LATEST, &v, why, sizeof(why)), -CKPT_ENOVERSION);
	T_OK(ckpt_view_open(root, "view", CKPT_LATEST, &v, why, sizeof(why)));
	T_ASSERT(ckpt_view_version(v) == 9 && ckpt_view_world_size(v) == 3 && ckpt_view_count(v) == 2);
	size_t mi, vi;
	T_OK(ckpt_view_find(v, "m", &mi));
	T_OK(ckpt_view_find(v, "v", &vi));
	T_ERR(ckpt_view_find(v, "nope", &mi), -ENOENT);
	ckpt_tensor_info ti = { .size = sizeof(ti) };
	T_OK(ckpt_view_tensor(v, mi, &ti));
	T_ASSERT(!strcmp(ti.name, "m") && ti.dtype == CKPT_DTYPE_F32 && ti.ndim == 2 && ti.shape[0] == R &&
	         ti.shape[1] == C && ti.bytes == sizeof(gm) && ti.missing == 0 && ti.npieces == 3);
	/* Pieces in row-major order of their offsets. */
	uint64_t seen = 0;
	for (uint32_t j = 0; j < ti.npieces; j++) {
		ckpt_piece_info p = { .size = sizeof(p) };
		uint64_t off[2], ext[2], a, b;
		T_OK(ckpt_view_piece(v, mi, j, &p));
		boxes((int)p.rank, off, ext, &a, &b);
		T_ASSERT(p.offsets[0] == off[0] && p.offsets[1] == off[1] && p.extents[0] == ext[0] &&
		         p.extents[1] == ext[1] && p.bytes == ext[0] * ext[1] * 4);
		T_ASSERT(p.rank == j); /* (0,0), (0,30), (20,0) */
		seen += ext[0] * ext[1];
	}
	T_ASSERT(seen == R * C);

	uint64_t s = 12345;
	static float box[R * C];
	for (int k = 0; k < 300; k++) {
		uint64_t lo[2], cnt[2];
		lo[0] = rnd(&s, R);
		lo[1] = rnd(&s, C);
		cnt[0] = 1 + rnd(&s, R - lo[0]);
		cnt[1] = 1 + rnd(&s, C - lo[1]);
		T_OK(ckpt_view_read_box(v, mi, lo, cnt, box, sizeof(box)));
		for (uint64_t y = 0; y < cnt[0]; y++)
			for (uint64_t x = 0; x < cnt[1]; x++)
				if (box[y * cnt[1] + x] != gm[(lo[0] + y) * C + lo[1] + x])
					T_FAIL("box at [%llu,%llu] size [%llu,%llu]: element [%llu,%llu] differs",
					       (unsigned long long)lo[0], (unsigned long long)lo[1], (unsigned long long)cnt[0],
					       (unsigned long long)cnt[1], (unsigned long long)y, (unsigned long long)x);
	}
	static uint8_t buf[sizeof(gm) + 8];
	for (int k = 0; k < 300; k++) {
		int mat = k & 1;
		size_t i = mat ? mi : vi, total = mat ? sizeof(gm) : sizeof(gv);
		const uint8_t *g = mat ? (const uint8_t *)gm : (const uint8_t *)gv;
		uint64_t off = rnd(&s, total), len = 1 + rnd(&s, total - off);
		memset(buf, 0xee, sizeof(buf));
		T_OK(ckpt_view_read(v, i, off, len, buf));
		if (memcmp(buf, g + off, len) || buf[len] != 0xee)
			T_FAIL("%s bytes %llu..%llu differ (or the read ran past them)", mat ? "m" : "v",
			       (unsigned long long)off, (unsigned long long)(off + len));
	}
	/* Refusals: outside the shape, a buffer too small, a range past the end. */
	uint64_t lo[2] = { 30, 0 }, cnt[2] = { 8, 1 };
	T_ERR(ckpt_view_read_box(v, mi, lo, cnt, box, sizeof(box)), -EINVAL);
	cnt[0] = 7;
	T_ERR(ckpt_view_read_box(v, mi, lo, cnt, box, 7 * 4 - 1), -EOVERFLOW);
	T_ERR(ckpt_view_read(v, vi, sizeof(gv) - 1, 2, buf), -EINVAL);
	T_ASSERT(ckpt_view_error(v)[0]);
	ckpt_view_close(v);
	t_rmrf(root);
	printf("view: ok\n");
	return T_EXIT_PASS;
}
