/* A restore from the agent's DRAM in a new process (its page tables of the
 * pool built during the restore, chunk by chunk on the restore threads) is
 * bit-exact, and a byte flipped in the DRAM copy makes it fail with
 * CKPT_ECORRUPT instead of landing in the regions: in a middle chunk, and in
 * the region's last, partial chunk (the ends of a chunk need not be
 * page-aligned). Flipping the byte back makes the copy restorable again, so
 * the failure came from that byte. The copy is corrupted the way a stray
 * writer would: through the agent's pool memfd, reached from /proc. The
 * copy is checked by its seals (docs/format.md 6.4), and the flips are
 * caught by them; with its seal table damaged, the tree checksums check it
 * instead, and catch the flip too. */
#include "daemon_test.h"

#include <ckpt.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOB "dmemc"
#define NREG 2
/* Region 0: six whole 1 MiB chunks and a partial one; region 1: one. */
static const size_t sizes[NREG] = { (6u << 20) + 12345, 1u << 20 };
#define CHUNK (1u << 20)

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* 1 if the file holds the text (a rank's log). */
static int t_file_contains(const char *path, const char *text)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	int found = 0;
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, text) != NULL;
	if (f)
		fclose(f);
	return found;
}

static void fill(uint8_t **bufs)
{
	for (int i = 0; i < NREG; i++)
		t_fill(bufs[i], sizes[i], 7 + (uint64_t)i);
}

static ckpt_ctx *open_ctx(const dt_env *e, uint8_t **bufs)
{
	ckpt_config cfg;
	dt_config(&cfg, e, JOB);
	cfg.chunk_bytes = CHUNK;
	cfg.workers = 2; /* chunks taken by two threads */
	return dt_open(&cfg, bufs, sizes, NREG);
}

static void rank_save(const dt_env *e)
{
	uint8_t *bufs[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	fill(bufs);
	ckpt_ctx *ctx = open_ctx(e, bufs);
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, NULL));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 30000, NULL));
	ckpt_handle_free(h);
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
}

/* A new process restores version 1: the only copy left is in DRAM. */
static void rank_restore_ok(const dt_env *e)
{
	uint8_t *bufs[NREG], *want[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	dt_bufs_alloc(want, sizes, NREG);
	fill(want);
	ckpt_ctx *ctx = open_ctx(e, bufs);
	dt_restore_expect(ctx, 1, 1, bufs, want, sizes, NREG);
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
	dt_bufs_free(want, NREG);
}

static void rank_restore_corrupt(const dt_env *e)
{
	uint8_t *bufs[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	ckpt_ctx *ctx = open_ctx(e, bufs);
	uint64_t got = 0;
	T_ERR(ckpt_restore(ctx, 1, 0, &got), -CKPT_ECORRUPT);
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
}

/* The agent's pool: the one memfd among its open files that holds
 * region 0's saved bytes (found by its first 4 KiB). Maps it read-write;
 * returns where region 0 starts in it, or NULL to skip (no access). */
static uint8_t *find_region0(const dt_env *e, uint8_t **map, size_t *maplen)
{
	char dir[64], path[400], link[256];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)e->daemon);
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	uint8_t *want = malloc(sizes[0]), *found = NULL;
	T_ASSERT(want);
	t_fill(want, sizes[0], 7);
	struct dirent *de;
	int pools = 0;
	while ((de = readdir(d))) {
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		if (strncmp(link, "/memfd:", 7))
			continue;
		int fd = open(path, O_RDWR | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		uint8_t *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		T_ASSERT(m != MAP_FAILED);
		uint8_t *p = memmem(m, (size_t)st.st_size, want, 4096);
		if (p && !found) {
			/* The whole region, raw (no compression): the copy to corrupt. */
			T_ASSERT((size_t)(m + st.st_size - p) >= sizes[0] && memcmp(p, want, sizes[0]) == 0);
			found = p;
			*map = m;
			*maplen = (size_t)st.st_size;
			pools++;
		} else {
			munmap(m, (size_t)st.st_size);
		}
	}
	closedir(d);
	free(want);
	T_ASSERT(pools <= 1);
	return found;
}

int main(void)
{
	dt_env e;
	dt_init(&e, "dmemc");
	dt_start(&e, "64M", 0);
	int st = dt_child(rank_save, &e, NULL);
	if (st != 0) {
		dt_stop(&e);
		T_FAIL("saving rank exited %d; daemon log %s", st, e.log);
	}
	char cmd[800];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/jobs'", e.root);
	T_ASSERT(system(cmd) == 0);

	T_ASSERT(dt_child(rank_restore_ok, &e, NULL) == 0);

	uint8_t *map = NULL;
	size_t maplen = 0;
	uint8_t *r0 = find_region0(&e, &map, &maplen);
	if (!r0) {
		dt_stop(&e);
		fprintf(stderr, "skip: cannot open the agent's pool through /proc\n");
		t_rmrf(e.dir);
		return T_EXIT_SKIP;
	}
	/* The image carries a seal table (format.md 6.4): the restore checks
	 * chunks by their seals, and a flipped byte must be caught by them. */
	uint8_t *seal = memmem(r0, (size_t)(map + maplen - r0), "CKPTSEAL", 8);
	T_ASSERT(seal && le64(seal + 16) == 8); /* 7 chunks of region 0, 1 of region 1 */
	char errlog[700];
	snprintf(errlog, sizeof(errlog), "%s/restore.err", e.dir);
	/* A middle chunk (the fourth), then the last, partial one. */
	const size_t at[2] = { 3 * (size_t)CHUNK + 100000, sizes[0] - 3 };
	for (int k = 0; k < 2; k++) {
		r0[at[k]] ^= 0x10;
		st = dt_child(rank_restore_corrupt, &e, errlog);
		r0[at[k]] ^= 0x10;
		if (st != 0) {
			dt_stop(&e);
			T_FAIL("byte %zu of region 0 flipped in DRAM: the restoring rank exited %d (want CKPT_ECORRUPT); "
			       "daemon log %s", at[k], st, e.log);
		}
		T_ASSERT(t_file_contains(errlog, "seal mismatch"));
		T_ASSERT(dt_child(rank_restore_ok, &e, NULL) == 0);
	}
	/* A damaged seal table is not used: the tree checksums check the
	 * chunks instead, so an intact copy restores bit-exact ... */
	seal[32 + 8 * 2] ^= 0x01;
	T_ASSERT(dt_child(rank_restore_ok, &e, errlog) == 0);
	T_ASSERT(t_file_contains(errlog, "seal table does not check"));
	/* ... and a flipped byte is still caught, by them. */
	r0[at[0]] ^= 0x10;
	st = dt_child(rank_restore_corrupt, &e, errlog);
	r0[at[0]] ^= 0x10;
	seal[32 + 8 * 2] ^= 0x01;
	T_ASSERT(st == 0 && t_file_contains(errlog, "checksum mismatch"));
	T_ASSERT(dt_child(rank_restore_ok, &e, NULL) == 0);
	munmap(map, maplen);
	dt_stop(&e);
	t_rmrf(e.dir);
	return T_EXIT_PASS;
}
