/* File regions (ckpt_region_add_file): a file several times the staging
 * pool's size streams through it, beside a memory region, and restores
 * bit-exact into another file at the same offset (pwrite), the memory
 * region too; a file shorter than its region, or one grown while a save
 * reads it (fault point save.file_read), fails the save with
 * -CKPT_ECHANGED and nothing is committed; a restore into a file opened
 * read-only fails with -EBADF; bad arguments (no descriptor, a directory,
 * a duplicate name, an offset that overflows) are refused. Recycling's
 * default (auto): on with keep_versions, off without. */
#include "helpers.h"
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CB (64u << 10)
#define FBYTES (9 * CB + 1000) /* more than the pool's 2 chunks */
#define OFF 4096               /* where the region starts in its file */
#define MBYTES (CB + 12)

static char root[512], path[600], back[600];
static uint8_t fdata[FBYTES], mem[MBYTES];

static ckpt_ctx *open_ctx(const char *faults, uint32_t keep)
{
	ckpt_config c;
	T_OK(ckpt_config_init(&c));
	c.job_id = "fr";
	c.root = root;
	c.chunk_bytes = CB;
	c.staging_bytes = 2 * CB;
	c.faults = faults;
	c.keep_versions = keep;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&c, &ctx));
	return ctx;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

static int write_file(const char *p, const uint8_t *b, size_t n)
{
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	T_ASSERT(fd >= 0);
	T_ASSERT(write(fd, "header..", 8) == 8); /* bytes before OFF: not the region's */
	T_ASSERT(pwrite(fd, b, n, OFF) == (ssize_t)n);
	return fd;
}

static int save_wait(ckpt_ctx *ctx, uint64_t v)
{
	ckpt_handle *h;
	int r = ckpt_save(ctx, v, 0, &h);
	if (r < 0)
		return r;
	r = ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL);
	ckpt_handle_free(h);
	return r;
}

int main(void)
{
	snprintf(root, sizeof(root), "%s", t_tmpdir("file-region"));
	snprintf(path, sizeof(path), "%s/in.bin", root);
	snprintf(back, sizeof(back), "%s/back.bin", root);
	fill(fdata, sizeof(fdata), 7);
	fill(mem, sizeof(mem), 9);

	/* Arguments. */
	ckpt_ctx *ctx = open_ctx(NULL, 0);
	int fd = write_file(path, fdata, FBYTES);
	T_ERR(ckpt_region_add_file(ctx, "f", -1, 0, 10), -EBADF);
	int dfd = open(root, O_RDONLY | O_DIRECTORY);
	T_ERR(ckpt_region_add_file(ctx, "f", dfd, 0, 10), -EINVAL);
	close(dfd);
	T_ERR(ckpt_region_add_file(ctx, "f", fd, UINT64_MAX - 5, 10), -EINVAL);
	T_ERR(ckpt_region_add_file(NULL, "f", fd, 0, 10), -EINVAL);
	T_ERR(ckpt_region_add_file(ctx, "a/b", fd, 0, 10), -CKPT_ENAME);

	/* A save streams the file through a pool of 2 chunks. */
	T_OK(ckpt_region_add_file(ctx, "file", fd, OFF, FBYTES));
	T_ERR(ckpt_region_add_file(ctx, "file", fd, 0, 10), -CKPT_ENAME);
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "mem", mem, MBYTES);
	T_OK(ckpt_region_add(ctx, &d));
	T_OK(save_wait(ctx, 1));

	/* Shorter than the region: the save fails, nothing committed. */
	T_ASSERT(ftruncate(fd, OFF + FBYTES - 1) == 0);
	T_ERR(save_wait(ctx, 2), -CKPT_ECHANGED);
	T_ASSERT(pwrite(fd, fdata + FBYTES - 1, 1, OFF + FBYTES - 1) == 1);
	T_OK(ckpt_ctx_close(ctx));

	/* Grown between the region's first and last read (a pause before its
	 * 3rd chunk, another thread appending): the same. */
	ctx = open_ctx("save.file_read=3@delay:300", 0);
	T_OK(ckpt_region_add_file(ctx, "file", fd, OFF, FBYTES));
	T_OK(ckpt_region_add(ctx, &d));
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		usleep(100 * 1000);
		_exit(pwrite(fd, "x", 1, OFF + FBYTES + 10) == 1 ? 0 : 1);
	}
	T_ERR(save_wait(ctx, 3), -CKPT_ECHANGED);
	int st;
	T_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	T_OK(ckpt_ctx_close(ctx));

	/* Restore version 1 into another file at the same offset, and the
	 * memory region; versions 2 and 3 are not there. */
	memset(mem, 0, sizeof(mem));
	ctx = open_ctx(NULL, 0);
	int bfd = open(back, O_RDWR | O_CREAT | O_TRUNC, 0600);
	T_ASSERT(bfd >= 0);
	T_OK(ckpt_region_add_file(ctx, "file", bfd, OFF, FBYTES));
	T_OK(ckpt_region_add(ctx, &d));
	uint64_t v = 0;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &v));
	T_ASSERT(v == 1);
	T_ERR(ckpt_restore(ctx, 2, 0, NULL), -CKPT_ENOVERSION);
	static uint8_t got[FBYTES];
	T_ASSERT(pread(bfd, got, FBYTES, OFF) == FBYTES);
	T_ASSERT(memcmp(got, fdata, FBYTES) == 0);
	uint8_t want[MBYTES];
	fill(want, sizeof(want), 9);
	T_ASSERT(memcmp(mem, want, MBYTES) == 0);
	T_OK(ckpt_ctx_close(ctx));

	/* Into a file open read-only: -EBADF, from the write back. */
	ctx = open_ctx(NULL, 0);
	int rfd = open(back, O_RDONLY);
	T_OK(ckpt_region_add_file(ctx, "file", rfd, OFF, FBYTES));
	T_OK(ckpt_region_add(ctx, &d));
	T_ERR(ckpt_restore(ctx, 1, 0, NULL), -EBADF);
	T_OK(ckpt_ctx_close(ctx));
	close(rfd);
	close(bfd);

	/* Recycling's default: on with keep_versions (the pool appears), off
	 * without (the next context empties it). */
	char pool[700];
	snprintf(pool, sizeof(pool), "%s/recycle", root);
	ctx = open_ctx(NULL, 1);
	T_OK(ckpt_region_add(ctx, &d));
	struct stat sb;
	T_ASSERT(stat(pool, &sb) == 0 && S_ISDIR(sb.st_mode));
	T_OK(save_wait(ctx, 4));
	T_OK(save_wait(ctx, 5)); /* retention deletes 4: its file goes to the pool */
	T_OK(ckpt_ctx_close(ctx));
	char shard4[800];
	snprintf(shard4, sizeof(shard4), "%s/jobs/fr/v%020d", root, 4);
	T_ASSERT(stat(shard4, &sb) < 0);
	ctx = open_ctx(NULL, 0);
	T_OK(ckpt_ctx_close(ctx));
	T_ASSERT(stat(pool, &sb) < 0 || rmdir(pool) == 0); /* gone, or empty */

	close(fd);
	t_rmrf(root);
	printf("ok: file regions stream, fail on change, restore through pwrite\n");
	return 0;
}
