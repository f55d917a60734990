/* Recycled shard files: gc moves the files of the versions it deletes into
 * the root's pool (never a symlink, never past the cap), a save with
 * recycling on overwrites one of them (the same inode) and cuts it to the
 * new shard's exact length, the new shard restores bit-exact and the old
 * version is gone for good; a compressed (shorter) shard in a recycled
 * file is cut to size; a symlink planted in the pool is never written
 * through; a full pool takes no more; recycling off empties the pool. */
#include "helpers.h"
#include "ckpt.h"
#include "format/admin.h"
#include "format/format.h"
#include "format/index.h"
#include "format/recycle.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#define CB (64u << 10)
#define BYTES (5 * CB + 4096)

static uint8_t *buf;
static char root[512], pool[600];

static uint32_t keep;

static int open_ctx(int recycle, int compress, ckpt_ctx **ctx)
{
	ckpt_config c;
	T_OK(ckpt_config_init(&c));
	c.job_id = "rec";
	c.root = root;
	c.chunk_bytes = CB;
	c.staging_bytes = 8 * CB;
	c.recycle = recycle;
	c.compress = compress;
	c.keep_versions = keep;
	T_OK(ckpt_ctx_open(&c, ctx));
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "w", buf, BYTES);
	d.dtype = CKPT_DTYPE_F32;
	T_OK(ckpt_region_add(*ctx, &d));
	return 0;
}

static void save(ckpt_ctx *ctx, uint64_t v)
{
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, v, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
	ckpt_handle_free(h);
}

/* Inodes of the pool's files (up to cap); returns how many. */
static int pool_inodes(ino_t *ino, int cap)
{
	DIR *d = opendir(pool);
	int n = 0;
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (ckpt__recycle_name(e->d_name)) {
			char p[1100];
			struct stat st;
			snprintf(p, sizeof(p), "%s/%s", pool, e->d_name);
			T_ASSERT(lstat(p, &st) == 0);
			if (S_ISREG(st.st_mode) && n < cap)
				ino[n++] = st.st_ino;
		}
	closedir(d);
	return n;
}

static void shard_path(char *p, size_t cap, uint64_t v)
{
	snprintf(p, cap, "%s/jobs/rec/v%020llu/r000000.ckpt", root, (unsigned long long)v);
}

static void gc(uint32_t keep)
{
	ckpt_index *ix;
	ckpt_logger lg = { 0 };
	uint32_t n = 0;
	T_OK(ckpt__index_open(root, &lg, &ix));
	T_OK(ckpt__admin_gc(root, ix, "rec", keep, NULL, &lg, &n));
	ckpt__index_close(ix);
}

static void restore_check(ckpt_ctx *ctx, uint64_t v)
{
	memset(buf, 0, BYTES);
	uint64_t got = 0;
	T_OK(ckpt_restore(ctx, v, 0, &got));
	uint8_t *want = malloc(BYTES);
	t_fill(want, BYTES, v);
	T_ASSERT(got == v && !memcmp(want, buf, BYTES));
	free(want);
}

int main(void)
{
	snprintf(root, sizeof(root), "%s", t_tmpdir("recycle"));
	snprintf(pool, sizeof(pool), "%s/%s", root, CKPT_RECYCLE_DIR);
	T_ASSERT(posix_memalign((void **)&buf, 4096, BYTES) == 0);
	ckpt_ctx *ctx;
	T_OK(open_ctx(1, 0, &ctx));
	for (uint64_t v = 1; v <= 3; v++) {
		t_fill(buf, BYTES, v);
		save(ctx, v);
	}
	char p[700];
	struct stat st;
	shard_path(p, sizeof(p), 1);
	T_ASSERT(stat(p, &st) == 0);
	off_t full_len = st.st_size;
	T_OK(ckpt_ctx_close(ctx));

	/* gc keeps version 3; the files of 1 and 2 go to the pool. */
	gc(1);
	ino_t ino[8];
	T_ASSERT(pool_inodes(ino, 8) == 2);
	T_ASSERT(stat(p, &st) < 0);

	/* A symlink in the pool, to a file outside, with a pool file's name. */
	char outside[700], link[700];
	snprintf(outside, sizeof(outside), "%s/outside", root);
	FILE *f = fopen(outside, "w");
	T_ASSERT(f && fputs("not a shard", f) >= 0 && fclose(f) == 0);
	snprintf(link, sizeof(link), "%s/p00000000000000ab.free", pool);
	T_ASSERT(symlink(outside, link) == 0);

	/* Version 4 overwrites one of them: same inode, exact length. */
	T_OK(open_ctx(1, 0, &ctx));
	t_fill(buf, BYTES, 4);
	save(ctx, 4);
	shard_path(p, sizeof(p), 4);
	T_ASSERT(stat(p, &st) == 0);
	T_ASSERT(st.st_ino == ino[0] || st.st_ino == ino[1]);
	T_ASSERT(st.st_size == full_len);
	ino_t left[8];
	T_ASSERT(pool_inodes(left, 8) == 1 && left[0] != st.st_ino);
	restore_check(ctx, 4);
	T_ERR(ckpt_restore(ctx, 1, 0, NULL), -CKPT_ENOVERSION);
	char why[256];
	ckpt_shard s;
	T_OK(ckpt__shard_open(p, &s, why, sizeof(why)));
	T_ASSERT(s.header.version == 4);
	ckpt__shard_close(&s);
	T_OK(ckpt_ctx_close(ctx));

	/* Compressed: a much shorter shard in the other pooled file. */
	T_OK(open_ctx(1, 1, &ctx));
	float *fl = (float *)buf;
	for (size_t i = 0; i < BYTES / 4; i++)
		fl[i] = 1.0f;
	save(ctx, 5);
	shard_path(p, sizeof(p), 5);
	T_ASSERT(stat(p, &st) == 0);
	T_ASSERT(st.st_ino == left[0]);
	T_ASSERT(st.st_size < full_len / 2);
	T_OK(ckpt__shard_open(p, &s, why, sizeof(why)));
	T_ASSERT(s.header.version == 5 && s.tail.file_length == (uint64_t)st.st_size);
	ckpt__shard_close(&s);
	memset(buf, 0, BYTES);
	T_OK(ckpt_restore(ctx, 5, 0, NULL));
	for (size_t i = 0; i < BYTES / 4; i++)
		T_ASSERT(fl[i] == 1.0f);
	/* The pool is empty now but for the symlink: a new file, and the file
	 * outside is untouched. */
	t_fill(buf, BYTES, 6);
	save(ctx, 6);
	T_ASSERT(pool_inodes(left, 8) == 0);
	f = fopen(outside, "r");
	char got[32] = "";
	T_ASSERT(f && fgets(got, sizeof(got), f) && fclose(f) == 0);
	T_ASSERT(!strcmp(got, "not a shard"));
	T_OK(ckpt_ctx_close(ctx));

	/* Retention in the library (keep_versions 2): each commit deletes the
	 * committed versions older than the newest two, into the pool, and
	 * the next save overwrites one of their files. */
	keep = 2;
	for (uint64_t v = 7; v <= 9; v++) {
		ino_t before[8];
		int nb = pool_inodes(before, 8);
		/* Retention runs on the io thread after the wait returns; the
		 * close waits for it, so the next save finds the pool filled. */
		T_OK(open_ctx(1, 0, &ctx));
		t_fill(buf, BYTES, v);
		save(ctx, v);
		T_OK(ckpt_ctx_close(ctx));
		shard_path(p, sizeof(p), v);
		T_ASSERT(stat(p, &st) == 0);
		int reused = 0;
		for (int i = 0; i < nb; i++)
			reused |= before[i] == st.st_ino;
		T_ASSERT(reused == (v > 7)); /* the pool was empty before 7 */
	}
	keep = 0;
	T_OK(open_ctx(1, 0, &ctx));
	for (uint64_t v = 3; v <= 7; v++)
		T_ERR(ckpt_restore(ctx, v, 0, NULL), -CKPT_ENOVERSION);
	restore_check(ctx, 8);
	restore_check(ctx, 9);
	T_OK(ckpt_ctx_close(ctx));
	T_ASSERT(pool_inodes(left, 8) == 3);

	/* Off: the pool's files go (the symlink, not a pool file, stays). */
	gc(1);
	T_ASSERT(pool_inodes(left, 8) == 4);
	/* Bounded: with the pool at its cap, a deletion unlinks. */
	int have = pool_inodes(left, 8);
	for (int i = have; i < CKPT_RECYCLE_MAX; i++) {
		char fp[700];
		snprintf(fp, sizeof(fp), "%s/p%016x.free", pool, 0x1000 + i);
		f = fopen(fp, "w");
		T_ASSERT(f && fputs("x", f) >= 0 && fclose(f) == 0);
	}
	T_OK(open_ctx(1, 0, &ctx));
	t_fill(buf, BYTES, 10);
	save(ctx, 10); /* takes one pooled shard file: CKPT_RECYCLE_MAX - 1 left */
	t_fill(buf, BYTES, 11);
	save(ctx, 11); /* takes another */
	T_OK(ckpt_ctx_close(ctx));
	ino_t all[CKPT_RECYCLE_MAX + 4];
	T_ASSERT(pool_inodes(all, CKPT_RECYCLE_MAX + 4) == CKPT_RECYCLE_MAX - 2);
	for (int i = 0; i < 2; i++) { /* two more files reach the cap */
		char fp[700];
		snprintf(fp, sizeof(fp), "%s/p%016x.free", pool, 0x2000 + i);
		f = fopen(fp, "w");
		T_ASSERT(f && fputs("x", f) >= 0 && fclose(f) == 0);
	}
	gc(1); /* deletes 9 and 10: the pool is full, their files are unlinked */
	T_ASSERT(pool_inodes(all, CKPT_RECYCLE_MAX + 4) == CKPT_RECYCLE_MAX);
	T_OK(open_ctx(0, 0, &ctx));
	T_ASSERT(pool_inodes(left, 8) == 0);
	T_ASSERT(lstat(link, &st) == 0);
	restore_check(ctx, 11);
	T_OK(ckpt_ctx_close(ctx));
	free(buf);
	t_rmrf(root);
	printf("recycle: ok\n");
	return T_EXIT_PASS;
}
