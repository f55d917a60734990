/* storage/fabric.c over loopback (tcp;ofi_rxm unless CKPT_FABRIC_PROVIDER):
 * - a passive fab on 127.0.0.1 with a 64 MiB region, an active one on
 *   127.0.0.2: WRITE then READ of 0 bytes, 1 byte, 4 MiB+17 at odd offsets,
 *   the whole region (also with small pieces, and with no local region
 *   where the provider allows it), compared byte for byte;
 * - a write past the region's end and one with a wrong key fail with the
 *   fabric's error text, break the fab (-EPIPE after), do not hang, and
 *   leave the target serving others;
 * - a partner that is gone (its fab closed; its process stopped, then
 *   killed) makes xfer fail or time out within its timeout.
 * Skips (77) when the provider is not available. */
#include "helpers.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "fabric.h"

#define REGION ((size_t)64 << 20)
#define TIMEOUT_MS 3000
#define SLACK_MS 2000

static const char *prov;

static void *xalloc(size_t len)
{
	void *p = aligned_alloc(4096, len);
	if (!p)
		T_FAIL("out of memory");
	memset(p, 0, len);
	return p;
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

static void xfer_ok(ckpt_fab *f, int op, ckpt_fab_mr *mr, void *buf, size_t len,
                    const ckpt_fab_remote *r, uint64_t roff, size_t piece, unsigned depth)
{
	char err[256] = "";
	int rc = ckpt_fab_xfer(f, op, mr, buf, len, r, roff, piece, depth, TIMEOUT_MS * 10, err,
	                       sizeof(err));
	if (rc)
		T_FAIL("xfer op %d len %zu roff %llu: %d %s", op, len, (unsigned long long)roff, rc,
		       err);
}

/* The initiator's buffers and the target's region, all in this process. */
typedef struct bufs {
	uint8_t *src, *dst;
	ckpt_fab_mr *smr, *dmr;
	const uint8_t *region;
} bufs;

/* WRITE src[soff..] to region[roff..], check it landed, READ it back into
 * dst[soff..]. */
static void roundtrip(ckpt_fab *a, const bufs *b, size_t soff, const ckpt_fab_remote *r,
                      uint64_t roff, size_t len, size_t piece, unsigned depth, uint64_t seed)
{
	t_fill(b->src + soff, len, seed);
	memset(b->dst, 0, REGION);
	xfer_ok(a, CKPT_FAB_WRITE, b->smr, b->src + soff, len, r, roff, piece, depth);
	T_ASSERT(memcmp(b->region + roff, b->src + soff, len) == 0);
	xfer_ok(a, CKPT_FAB_READ, b->dmr, b->dst + soff, len, r, roff, piece, depth);
	T_ASSERT(memcmp(b->dst + soff, b->src + soff, len) == 0);
	if (soff)
		T_ASSERT(b->dst[soff - 1] == 0); /* nothing before it */
	if (soff + len < REGION)
		T_ASSERT(b->dst[soff + len] == 0); /* nor after */
}

static void data_tests(ckpt_fab *a, const bufs *b, const ckpt_fab_remote *r)
{
	char err[256];
	T_ASSERT(ckpt_fab_xfer(a, CKPT_FAB_WRITE, b->smr, b->src, 0, r, 0, 0, 0, TIMEOUT_MS, err,
	                       sizeof(err)) == 0);
	roundtrip(a, b, 0, r, 0, 1, 0, 0, 1);
	roundtrip(a, b, 3, r, 12345, (4u << 20) + 17, 0, 0, 2);
	roundtrip(a, b, 0, r, 0, REGION, 0, 0, 3);
	roundtrip(a, b, 1, r, 7, REGION - 7, (1u << 20) + 1, 3, 4);
	/* Bad arguments fail with -EINVAL and leave the fab usable. */
	T_ASSERT(ckpt_fab_xfer(a, 7, b->smr, b->src, 1, r, 0, 0, 0, TIMEOUT_MS, err,
	                       sizeof(err)) == -EINVAL);
	T_ASSERT(ckpt_fab_xfer(a, CKPT_FAB_WRITE, b->smr, b->src + REGION - 1, 2, r, 0, 0, 0,
	                       TIMEOUT_MS, err, sizeof(err)) == -EINVAL);
	T_ASSERT(ckpt_fab_xfer(a, CKPT_FAB_READ, b->smr, b->dst, 2, r, 0, 0, 0, TIMEOUT_MS, err,
	                       sizeof(err)) == -EINVAL);
	roundtrip(a, b, 0, r, 100, 4096, 0, 0, 5);
	/* The whole region from a buffer of another local region. */
	t_fill(b->dst, REGION, 7);
	xfer_ok(a, CKPT_FAB_WRITE, b->dmr, b->dst, REGION, r, 0, 0, 0);
	T_ASSERT(memcmp(b->region, b->dst, REGION) == 0);
}

/* Without a local region, where the provider does not need one. */
static void unregistered_test(ckpt_fab *a, uint8_t *src, uint8_t *dst, const uint8_t *region,
                              const ckpt_fab_remote *r)
{
	char err[256] = "";
	t_fill(src, 1u << 20, 6);
	int rc = ckpt_fab_xfer(a, CKPT_FAB_WRITE, NULL, src, 1u << 20, r, 4096, 0, 0, TIMEOUT_MS,
	                       err, sizeof(err));
	if (rc == -EINVAL) {
		printf("provider needs FI_MR_LOCAL: %s\n", err);
		return;
	}
	T_ASSERT(rc == 0);
	T_ASSERT(memcmp(region + 4096, src, 1u << 20) == 0);
	xfer_ok(a, CKPT_FAB_READ, NULL, dst, 1u << 20, r, 4096, 0, 0);
	T_ASSERT(memcmp(dst, src, 1u << 20) == 0);
}

/* An xfer that must fail, promptly, with the fabric's error text; the fab
 * is then broken. */
static int expect_failure(const char *what, ckpt_fab *a, int op, ckpt_fab_mr *lmr,
                           uint8_t *src, size_t len, const ckpt_fab_remote *r, uint64_t roff)
{
	char err[512] = "";
	int64_t t0 = t_now_ms();
	int rc = ckpt_fab_xfer(a, op, lmr, src, len, r, roff, 0, 0, TIMEOUT_MS, err, sizeof(err));
	int64_t ms = t_now_ms() - t0;
	printf("%s: rc %d (%s) after %lld ms: %s\n", what, rc, strerror(-rc), (long long)ms, err);
	T_ASSERT(rc < 0 && rc != -EINVAL);
	T_ASSERT(ms < TIMEOUT_MS + SLACK_MS);
	T_ASSERT(strstr(err, ckpt_fab_provider_name(a))); /* names the fabric and its error */
	T_ASSERT(ckpt_fab_xfer(a, CKPT_FAB_WRITE, lmr, src, 1, r, 0, 0, 0, TIMEOUT_MS, err,
	                       sizeof(err)) == -EPIPE);
	return rc;
}

static void bad_access_tests(uint8_t *src, const ckpt_fab_remote *r)
{
	const char *bad[3] = { "write past the region's end", "write with a wrong key",
	                       "read past the region's end" };
	for (int i = 0; i < 3; i++) {
		ckpt_fab *a = open_or_skip("127.0.0.2", 0);
		ckpt_fab_mr *lmr;
		char err[256];
		T_ASSERT(ckpt_fab_mr_reg(a, src, REGION, CKPT_FAB_LOCAL, &lmr, err, sizeof(err)) == 0);
		ckpt_fab_remote rr = *r;
		if (i == 1)
			rr.key ^= 0x5a5a5a5a00ull;
		expect_failure(bad[i], a, i == 2 ? CKPT_FAB_READ : CKPT_FAB_WRITE, lmr, src,
		               i == 1 ? 4096 : 100, &rr, i == 1 ? 0 : REGION - 10);
		ckpt_fab_mr_close(lmr);
		ckpt_fab_close(a);
	}
}

/* The target still serves a new initiator after the bad ones. */
static void still_serves(uint8_t *src, const uint8_t *region, const ckpt_fab_remote *r)
{
	ckpt_fab *a = open_or_skip("127.0.0.5", 0);
	t_fill(src, 1u << 20, 8);
	xfer_ok(a, CKPT_FAB_WRITE, NULL, src, 1u << 20, r, 8192, 0, 0);
	T_ASSERT(memcmp(region + 8192, src, 1u << 20) == 0);
	ckpt_fab_close(a);
}

/* The partner's fab closed under us. */
static void closed_partner_test(uint8_t *src)
{
	ckpt_fab *p = open_or_skip("127.0.0.4", 1);
	ckpt_fab *a = open_or_skip("127.0.0.2", 0);
	uint8_t *region = xalloc(REGION);
	ckpt_fab_mr *mr;
	ckpt_fab_remote r;
	char err[256];
	T_ASSERT(ckpt_fab_mr_reg(p, region, REGION, CKPT_FAB_REMOTE_WRITE, &mr, err, sizeof(err)) ==
	         0);
	T_ASSERT(ckpt_fab_mr_remote(p, mr, &r) == 0);
	xfer_ok(a, CKPT_FAB_WRITE, NULL, src, 4096, &r, 0, 0, 0);
	ckpt_fab_close(p); /* closes mr too */
	expect_failure("partner's fab closed", a, CKPT_FAB_WRITE, NULL, src, REGION, &r, 0);
	ckpt_fab_close(a);
	free(region);
}

/* ---- a partner process, killed with SIGKILL ---- */

static void child_main(int wfd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
	if (getppid() == 1)
		_exit(1);
	ckpt_fab_remote r = { 0 };
	ckpt_fab *p = NULL;
	ckpt_fab_mr *mr;
	char err[256];
	void *region = xalloc(REGION);
	if (ckpt_fab_open(prov, "127.0.0.3", 1, &p, err, sizeof(err)) ||
	    ckpt_fab_mr_reg(p, region, REGION, CKPT_FAB_REMOTE_WRITE | CKPT_FAB_REMOTE_READ, &mr,
	                    err, sizeof(err)) ||
	    ckpt_fab_mr_remote(p, mr, &r))
		r.addr_len = 0; /* tells the parent */
	if (write(wfd, &r, sizeof(r)) != sizeof(r))
		_exit(1);
	for (;;)
		pause();
}

static pid_t start_child(ckpt_fab_remote *r)
{
	int fds[2];
	T_ASSERT(pipe(fds) == 0);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		child_main(fds[1]);
	}
	close(fds[1]);
	struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
	if (poll(&pfd, 1, 30000) != 1 || read(fds[0], r, sizeof(*r)) != sizeof(*r))
		T_FAIL("partner process did not answer");
	close(fds[0]);
	return pid;
}

/* A partner that stops answering (SIGSTOP: its connections stay open),
 * then one that is killed. */
static void dead_partner_tests(pid_t child, const ckpt_fab_remote *r, uint8_t *src)
{
	ckpt_fab *a = open_or_skip("127.0.0.2", 0);
	xfer_ok(a, CKPT_FAB_WRITE, NULL, src, 4096, r, 0, 0, 0);
	T_ASSERT(kill(child, SIGSTOP) == 0);
	int rc = expect_failure("partner process stopped", a, CKPT_FAB_WRITE, NULL, src, REGION,
	                        r, 0);
	T_ASSERT(rc == -ETIMEDOUT);
	int64_t t0 = t_now_ms();
	ckpt_fab_close(a); /* with operations in flight */
	T_ASSERT(t_now_ms() - t0 < SLACK_MS);
	T_ASSERT(kill(child, SIGCONT) == 0);

	a = open_or_skip("127.0.0.2", 0);
	xfer_ok(a, CKPT_FAB_WRITE, NULL, src, 4096, r, 0, 0, 0);
	T_ASSERT(kill(child, SIGKILL) == 0);
	T_ASSERT(waitpid(child, NULL, 0) == child);
	expect_failure("partner process killed", a, CKPT_FAB_WRITE, NULL, src, REGION, r, 0);
	ckpt_fab_close(a);
}

int main(void)
{
	setenv("FI_TCP_IFACE", "lo", 0);
	prov = getenv("CKPT_FABRIC_PROVIDER");
	if (!prov || !*prov)
		prov = "tcp;ofi_rxm";
	/* The partner process first: fork before this one uses libfabric. */
	ckpt_fab_remote cr;
	pid_t child = start_child(&cr);
	if (cr.addr_len == 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		ckpt_fab_close(open_or_skip("127.0.0.3", 1)); /* skips, or says why */
		T_FAIL("partner process could not open a fab");
	}

	ckpt_fab *p = open_or_skip("127.0.0.1", 1);
	ckpt_fab *a = open_or_skip("127.0.0.2", 0);
	printf("provider %s\n", ckpt_fab_provider_name(a));
	T_ASSERT(strcmp(ckpt_fab_provider_name(a), ckpt_fab_provider_name(p)) == 0);
	uint8_t *region = xalloc(REGION), *src = xalloc(REGION), *dst = xalloc(REGION);
	ckpt_fab_mr *rmr, *smr, *dmr;
	ckpt_fab_remote r;
	char err[256];
	T_ASSERT(ckpt_fab_mr_reg(p, region, REGION, CKPT_FAB_REMOTE_WRITE | CKPT_FAB_REMOTE_READ,
	                         &rmr, err, sizeof(err)) == 0);
	T_ASSERT(ckpt_fab_mr_reg(a, src, REGION, CKPT_FAB_LOCAL, &smr, err, sizeof(err)) == 0);
	T_ASSERT(ckpt_fab_mr_reg(a, dst, REGION, CKPT_FAB_LOCAL, &dmr, err, sizeof(err)) == 0);
	T_ASSERT(ckpt_fab_mr_remote(p, rmr, &r) == 0);
	T_ASSERT(ckpt_fab_mr_remote(a, rmr, &r) == -EINVAL); /* not a's region */
	T_ASSERT(ckpt_fab_xfer(p, CKPT_FAB_WRITE, NULL, src, 1, &r, 0, 0, 0, TIMEOUT_MS, err,
	                       sizeof(err)) == -EINVAL);

	data_tests(a, &(bufs){ src, dst, smr, dmr, region }, &r);
	unregistered_test(a, src, dst, region, &r);
	ckpt_fab_mr_close(smr);
	ckpt_fab_mr_close(dmr);
	ckpt_fab_close(a);

	bad_access_tests(src, &r);
	still_serves(src, region, &r);
	ckpt_fab_close(p); /* rmr still open: closed with it */
	closed_partner_test(src);
	dead_partner_tests(child, &cr, src);
	free(region);
	free(src);
	free(dst);
	printf("PASS\n");
	return T_EXIT_PASS;
}
