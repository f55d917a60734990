/* Restore reads chunks straight into block-aligned host regions and checks
 * them where they land; a chunk whose place is not block-aligned (a ragged
 * last chunk, a region at an odd address: torch's and numpy's allocations)
 * is read into a buffer and copied to its place with the checksum taken in
 * the same pass. Regions of every shape restore bit-exact; the reader sends
 * through the sink only the chunks that have no place (device memory); a
 * damaged chunk is refused whichever way it came, and ckpt_restore then
 * falls back to the previous version, whose bytes end up in the regions. */
#include "helpers.h"
#include "ckpt.h"
#include "format/format.h"
#include "format/reader.h"

#include <fcntl.h>
#include <unistd.h>

#define CB (64u << 10)
#define NREG 3

static const size_t sizes[NREG] = {
	3 * CB + 2 * 4096, /* aligned, every chunk whole blocks: all in place */
	2 * CB + 1000,     /* aligned, ragged last chunk: that one through a buffer */
	CB + 4096,         /* placed at an odd address: all through buffers */
};
static uint8_t *mem[NREG], *reg[NREG];

static int open_ctx(const char *root, ckpt_ctx **ctx)
{
	ckpt_config c;
	T_OK(ckpt_config_init(&c));
	c.job_id = "inplace";
	c.root = root;
	c.chunk_bytes = CB;
	c.staging_bytes = 16 * CB;
	T_OK(ckpt_ctx_open(&c, ctx));
	for (int i = 0; i < NREG; i++) {
		char name[16];
		snprintf(name, sizeof(name), "r%d", i);
		ckpt_region_desc d;
		ckpt_region_desc_init(&d, name, reg[i], sizes[i]);
		T_OK(ckpt_region_add(*ctx, &d));
	}
	return 0;
}

static void fill_all(uint64_t v)
{
	for (int i = 0; i < NREG; i++)
		t_fill(reg[i], sizes[i], v * 100 + (uint64_t)i);
}

static int same_as(uint64_t v)
{
	int ok = 1;
	for (int i = 0; i < NREG; i++) {
		uint8_t *want = malloc(sizes[i]);
		t_fill(want, sizes[i], v * 100 + (uint64_t)i);
		ok &= !memcmp(want, reg[i], sizes[i]);
		free(want);
	}
	return ok;
}

/* The reader's callbacks: places are the regions themselves, except
 * region 1's, which has none (as device memory): the sink counts and copies
 * what it gets. */
static uint8_t *place(void *arg, uint32_t ri, uint64_t off, size_t len)
{
	(void)arg;
	return ri < NREG && ri != 1 && off + len <= sizes[ri] ? reg[ri] + off : NULL;
}

static int sunk;
static int sink(void *arg, uint32_t ri, uint64_t off, const void *data, size_t len)
{
	(void)arg;
	T_ASSERT(ri < NREG && off + len <= sizes[ri]);
	memcpy(reg[ri] + off, data, len);
	sunk++;
	return 0;
}

/* Flips one byte of chunk k of region name in the shard file at path. */
static int flip(const char *path, const char *name, uint64_t k)
{
	char why[256];
	ckpt_shard s;
	T_OK(ckpt__shard_open(path, &s, why, sizeof(why)));
	int ri = ckpt__shard_find_region(&s, name);
	T_ASSERT(ri >= 0);
	uint64_t off = s.footer.chunks[s.footer.regions[ri].chunk_first + k].offset + 77;
	ckpt__shard_close(&s);
	int fd = open(path, O_RDWR);
	uint8_t b;
	T_ASSERT(fd >= 0 && pread(fd, &b, 1, (off_t)off) == 1);
	b ^= 0x20;
	T_ASSERT(pwrite(fd, &b, 1, (off_t)off) == 1 && fsync(fd) == 0);
	close(fd);
	return 0;
}

static int read_shard(const char *path, char *why, size_t cap)
{
	ckpt_shard s;
	T_OK(ckpt__shard_open(path, &s, why, cap));
	ckpt_read_opts o = { .depth = 4, .direct = 1, .why = why, .whycap = cap, .place = place };
	int err = ckpt__shard_read(path, &s, &o, sink, NULL);
	ckpt__shard_close(&s);
	return err;
}

int main(void)
{
	char *root = t_tmpdir("inplace");
	for (int i = 0; i < NREG; i++) {
		T_ASSERT(posix_memalign((void **)&mem[i], 4096, sizes[i] + 4096) == 0);
		reg[i] = mem[i] + (i == 2 ? 1 : 0);
	}
	ckpt_ctx *ctx;
	T_OK(open_ctx(root, &ctx));
	for (uint64_t v = 1; v <= 2; v++) {
		fill_all(v);
		ckpt_handle *h;
		T_OK(ckpt_save(ctx, v, 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
		ckpt_handle_free(h);
	}
	for (int i = 0; i < NREG; i++)
		memset(reg[i], 0, sizes[i]);
	uint64_t got = 0;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	T_ASSERT(got == 2 && same_as(2));

	/* The reader: region 0's 4 chunks in place, region 2's 2 copied to
	 * their place, region 1's 3 through the sink. */
	char path[1024], why[512] = "";
	snprintf(path, sizeof(path), "%s/jobs/inplace/v%020u/r000000.ckpt", root, 2u);
	for (int i = 0; i < NREG; i++)
		memset(reg[i], 0, sizes[i]);
	sunk = 0;
	T_OK(read_shard(path, why, sizeof(why)));
	T_ASSERT(sunk == 3);
	T_ASSERT(same_as(2));

	/* One flipped byte in region 2's second chunk (copied to its place),
	 * then, that one put back, in region 0's second (read in place). */
	T_OK(flip(path, "r2", 1));
	why[0] = 0;
	T_ERR(read_shard(path, why, sizeof(why)), -CKPT_ECORRUPT);
	T_ASSERT(strstr(why, "region 'r2' chunk 1") && strstr(why, "checksum mismatch"));
	T_OK(flip(path, "r2", 1));
	T_OK(flip(path, "r0", 1));
	why[0] = 0;
	T_ERR(read_shard(path, why, sizeof(why)), -CKPT_ECORRUPT);
	T_ASSERT(strstr(why, "region 'r0' chunk 1") && strstr(why, "checksum mismatch"));

	/* ckpt_restore: version 2 refused, version 1 restored in full. */
	for (int i = 0; i < NREG; i++)
		memset(reg[i], 0xaa, sizes[i]);
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	T_ASSERT(got == 1 && same_as(1));
	T_OK(ckpt_ctx_close(ctx));
	for (int i = 0; i < NREG; i++)
		free(mem[i]);
	t_rmrf(root);
	printf("restore in place: ok\n");
	return T_EXIT_PASS;
}
