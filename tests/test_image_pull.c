/* An agent's pull of a partner's shard image (ckpt__image_pull,
 * libckpt/format/image_read.h) against a raw fi_read of the same bytes, over
 * loopback (tcp;ofi_rxm unless CKPT_FABRIC_PROVIDER): a real shard file
 * (saved through the public API, 8 MiB chunks) is held by a passive fab in
 * a child process on 127.0.0.1, as a partner's agent holds it; this process
 * on 127.0.0.2 pulls it, alternating with a raw ckpt_fab_xfer READ of the
 * same length, N times each. Checks every pull is the image byte for byte,
 * a pull of an image with a flipped byte fails naming the chunk, and prints
 * the pull's speed as a share of the raw read's (median / median, and the
 * median of pairs).
 *
 *   test_image_pull [SIZE_MIB [ITERS]]   (default 32 MiB, 2: a smoke test;
 *                                         `test_image_pull 1024 5` to measure)
 * Skips (77) when the provider is not available. */
#include "helpers.h"

#include <ckpt.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "fabric.h"
#include "format/image_read.h"

#define TIMEOUT_MS 60000

static const char *prov;

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	T_ASSERT(p != MAP_FAILED);
	return p;
}

/* A shard file of `bytes` of pseudo-random state, read back whole. */
static uint8_t *make_image(const char *dir, size_t bytes, size_t *len)
{
	uint8_t *state = map_anon(bytes);
	t_fill(state, bytes, 99);
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = dir;
	cfg.job_id = "pull";
	cfg.chunk_bytes = 8u << 20;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "state", state, bytes);
	T_OK(ckpt_region_add(ctx, &d));
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, NULL));
	ckpt_handle_free(h);
	T_OK(ckpt_ctx_close(ctx));
	munmap(state, bytes);
	char path[800];
	snprintf(path, sizeof(path), "%s/jobs/pull/v%020d/r%06d.ckpt", dir, 1, 0);
	uint8_t *img = (uint8_t *)t_slurp(path, len);
	T_ASSERT(img);
	return img;
}

static ckpt_fab *open_or_skip(const char *host, int passive)
{
	char err[256] = "";
	ckpt_fab *f = NULL;
	int rc = ckpt_fab_open(prov, host, passive, &f, err, sizeof(err));
	if (rc == -ENODATA) {
		printf("SKIP: %s\n", err);
		exit(T_EXIT_SKIP);
	}
	if (rc)
		T_FAIL("ckpt_fab_open(%s, %s): %d %s", prov, host, rc, err);
	return f;
}

/* The partner: registers the image (and a damaged copy right after it) and
 * sends where they are. */
static void partner(int fd, const uint8_t *img, size_t len)
{
	uint8_t *region = map_anon(2 * len);
	memcpy(region, img, len);
	memcpy(region + len, img, len);
	region[len + 4096 + (3u << 20) + 17] ^= 0x04; /* in the copy's first stored chunk */
	ckpt_fab *p = open_or_skip("127.0.0.1", 1);
	ckpt_fab_mr *mr;
	ckpt_fab_remote r;
	char err[256];
	if (ckpt_fab_mr_reg(p, region, 2 * len, CKPT_FAB_REMOTE_READ, &mr, err, sizeof(err)) < 0 ||
	    ckpt_fab_mr_remote(p, mr, &r) < 0)
		_exit(3);
	if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(4);
	char b;
	(void)read(fd, &b, 1); /* until the parent is done */
	ckpt_fab_close(p);
	_exit(0);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double med(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 32;
	unsigned iters = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
	T_ASSERT(mib >= 8 && iters >= 1 && iters <= 100);
	setenv("FI_TCP_IFACE", "lo", 0);
	prov = getenv("CKPT_FABRIC_PROVIDER");
	if (!prov || !*prov)
		prov = "tcp;ofi_rxm";
	char *dir = t_tmpdir("pull");
	size_t len;
	uint8_t *img = make_image(dir, mib << 20, &len);
	int sv[2];
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	fflush(stdout);
	pid_t child = fork();
	T_ASSERT(child >= 0);
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sv[0]);
		partner(sv[1], img, len);
	}
	close(sv[1]);
	ckpt_fab_remote rem;
	ssize_t n = read(sv[0], &rem, sizeof(rem));
	if (n != (ssize_t)sizeof(rem)) {
		int st;
		waitpid(child, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == T_EXIT_SKIP)
			return T_EXIT_SKIP;
		T_FAIL("the partner process did not start (status %d)", st);
	}
	ckpt_fab *a = open_or_skip("127.0.0.2", 0);
	uint8_t *dst = map_anon(len);
	ckpt_fab_mr *dmr;
	char err[400] = "";
	T_OK(ckpt_fab_mr_reg(a, dst, len, CKPT_FAB_LOCAL, &dmr, err, sizeof(err)));
	double pull[100], raw[100], pair[100];
	for (unsigned k = 0; k < iters; k++) {
		double t0 = t_now_ms();
		T_OK(ckpt_fab_xfer(a, CKPT_FAB_READ, dmr, dst, len, &rem, 0, 0, 0, TIMEOUT_MS, err, sizeof(err)));
		double t1 = t_now_ms();
		memset(dst, 0, len);
		ckpt_shard s;
		double t2 = t_now_ms();
		int r = ckpt__image_pull(a, &rem, 0, len, dst, dmr, 1, TIMEOUT_MS, &s, err, sizeof(err));
		double t3 = t_now_ms();
		if (r < 0)
			T_FAIL("pull %u: %d %s", k, r, err);
		T_ASSERT(s.footer.chunk_count == ((mib << 20) + (8u << 20) - 1) / (8u << 20));
		ckpt__shard_close(&s);
		T_ASSERT(memcmp(dst, img, len) == 0);
		raw[k] = (t1 - t0) / 1e3;
		pull[k] = (t3 - t2) / 1e3;
		pair[k] = raw[k] / pull[k];
	}
	/* A damaged copy: refused, naming the chunk; the fab is still usable. */
	int r = ckpt__image_pull(a, &rem, len, len, dst, dmr, 1, TIMEOUT_MS, NULL, err, sizeof(err));
	printf("damaged image: %d (%s)\n", r, err);
	/* (A disk file places chunks as they were written: which one holds the
	 * byte is the footer's to say.) */
	T_ASSERT(r == -CKPT_ECORRUPT && strstr(err, "region 'state' chunk ") && strstr(err, ": checksum mismatch"));
	T_OK(ckpt_fab_xfer(a, CKPT_FAB_READ, dmr, dst, 4096, &rem, 0, 0, 0, TIMEOUT_MS, err, sizeof(err)));
	double gb = (double)len / 1e9, mp = med(pull, iters), mr = med(raw, iters), mpair = med(pair, iters);
	printf("image of %.1f MiB, %u iterations: pull %.3f s (%.2f GB/s), raw fi_read %.3f s (%.2f GB/s); "
	       "pull / raw %.2f (median of pairs %.2f)\n", (double)len / (1 << 20), iters, mp, gb / mp, mr, gb / mr,
	       mr / mp, mpair);
	ckpt_fab_mr_close(dmr);
	ckpt_fab_close(a);
	(void)write(sv[0], "x", 1);
	int st;
	waitpid(child, &st, 0);
	free(img);
	t_rmrf(dir);
	printf("PASS\n");
	return T_EXIT_PASS;
}
