/* ckpt_fab_fetch (storage/fabric.h) over loopback (tcp;ofi_rxm unless
 * CKPT_FABRIC_PROVIDER): a passive fab on 127.0.0.1 with a 32 MiB region of
 * known bytes, an active one on 127.0.0.2.
 * - 40 pieces of odd sizes and offsets (some empty), some read straight into
 *   their place, some through bounce buffers (fewer than the pieces, so
 *   they are reused), with landed on the caller's thread and on 1 and 3
 *   threads, at depths 1 and 16: every piece lands exactly once with its
 *   own bytes, and each landed call sees them;
 * - a landed error stops the fetch with that error after draining, and the
 *   fab stays usable;
 * - bad arguments are -EINVAL and post nothing;
 * - a piece past the region's end fails with the fabric's error, promptly,
 *   and breaks the fab (-EPIPE after).
 * Skips (77) when the provider is not available. */
#include "helpers.h"

#include <pthread.h>
#include <stdatomic.h>

#include "fabric.h"

#define REGION ((size_t)32 << 20)
#define NPIECE 40
#define BOUNCE ((size_t)2 << 20)
#define NBOUNCE 3
#define TIMEOUT_MS 5000

static const char *prov;

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

typedef struct run {
	const uint8_t *region;
	uint8_t *dst;
	const ckpt_fab_piece *pc;
	atomic_int calls[NPIECE];
	atomic_int bad;
	int fail_at;          /* landed returns an error for this piece; -1: none */
	atomic_int after_fail; /* landed calls that began after the error */
	atomic_int failed;
} run;

static int landed(void *arg, size_t i, const void *data, size_t len)
{
	run *r = arg;
	if (atomic_load(&r->failed))
		atomic_fetch_add(&r->after_fail, 1);
	atomic_fetch_add(&r->calls[i], 1);
	if (len != r->pc[i].len || memcmp(data, r->region + r->pc[i].roff, len))
		atomic_fetch_add(&r->bad, 1);
	if (!r->pc[i].buf)
		memcpy(r->dst + r->pc[i].roff, data, len); /* out of the bounce buffer */
	if ((int)i == r->fail_at) {
		atomic_store(&r->failed, 1);
		return -ENOSPC;
	}
	return 0;
}

/* The pieces: sizes from empty to 3 MiB, unaligned offsets, every third
 * through a bounce buffer (at most BOUNCE bytes). */
static void make_pieces(ckpt_fab_piece *pc, uint8_t *dst, ckpt_fab_mr *dmr)
{
	uint64_t off = 5;
	for (int i = 0; i < NPIECE; i++) {
		size_t len = i % 7 == 3 ? 0 : (size_t)((i * 2654435761u) % (3u << 20)) + 1;
		int bounce = i % 3 == 1;
		if (bounce && len > BOUNCE)
			len = BOUNCE - (size_t)i;
		if (off + len > REGION)
			len = 0;
		pc[i] = (ckpt_fab_piece){ .roff = off, .len = len, .buf = bounce ? NULL : dst + off,
		                          .mr = bounce ? NULL : dmr };
		off += len + 13;
	}
}

static int fetch(ckpt_fab *a, const ckpt_fab_remote *rem, run *r, const ckpt_fab_piece *pc, size_t n,
                 unsigned threads, unsigned depth, uint8_t *bounce, ckpt_fab_mr *bmr, char *err, size_t cap)
{
	void *bufs[NBOUNCE];
	for (int b = 0; b < NBOUNCE; b++)
		bufs[b] = bounce + (size_t)(NBOUNCE - 1 - b) * BOUNCE; /* any order */
	ckpt_fab_fetch_opts o = { .size = sizeof(o), .depth = depth, .op_bytes = 1u << 20, .threads = threads,
	                          .bounce = bufs, .bounce_mr = bmr, .bounce_bytes = BOUNCE, .nbounce = NBOUNCE,
	                          .timeout_ms = TIMEOUT_MS };
	return ckpt_fab_fetch(a, rem, pc, n, &o, landed, r, err, cap);
}

static void data_tests(ckpt_fab *a, const ckpt_fab_remote *rem, const uint8_t *region, uint8_t *dst,
                       ckpt_fab_mr *dmr, uint8_t *bounce, ckpt_fab_mr *bmr)
{
	ckpt_fab_piece pc[NPIECE];
	make_pieces(pc, dst, dmr);
	const unsigned threads[4] = { 0, 1, 3, 3 }, depths[4] = { 16, 16, 16, 1 };
	for (int k = 0; k < 4; k++) {
		memset(dst, 0, REGION);
		run r = { .region = region, .dst = dst, .pc = pc, .fail_at = -1 };
		char err[256] = "";
		int64_t t0 = t_now_ms();
		int rc = fetch(a, rem, &r, pc, NPIECE, threads[k], depths[k], bounce, bmr, err, sizeof(err));
		printf("fetch: %u threads, depth %u: rc %d in %lld ms %s\n", threads[k], depths[k], rc,
		       (long long)(t_now_ms() - t0), err);
		T_ASSERT(rc == 0);
		T_ASSERT(atomic_load(&r.bad) == 0);
		for (int i = 0; i < NPIECE; i++) {
			T_ASSERT(atomic_load(&r.calls[i]) == 1);
			T_ASSERT(memcmp(dst + pc[i].roff, region + pc[i].roff, pc[i].len) == 0);
		}
	}
}

static void landed_error_test(ckpt_fab *a, const ckpt_fab_remote *rem, const uint8_t *region, uint8_t *dst,
                              ckpt_fab_mr *dmr, uint8_t *bounce, ckpt_fab_mr *bmr)
{
	ckpt_fab_piece pc[NPIECE];
	make_pieces(pc, dst, dmr);
	for (unsigned threads = 0; threads <= 2; threads += 2) {
		run r = { .region = region, .dst = dst, .pc = pc, .fail_at = 4 };
		char err[256] = "";
		T_ASSERT(fetch(a, rem, &r, pc, NPIECE, threads, 8, bounce, bmr, err, sizeof(err)) == -ENOSPC);
		/* Stopped: the pieces that landed after the error were not handed on
		 * (a call already running may finish), and the rest were never read. */
		int called = 0;
		for (int i = 0; i < NPIECE; i++)
			called += atomic_load(&r.calls[i]);
		printf("landed error at piece 4, %u threads: %d of %d pieces handed over\n", threads, called, NPIECE);
		T_ASSERT(called < NPIECE && atomic_load(&r.after_fail) <= (int)threads);
	}
	/* The fab is still usable. */
	run r = { .region = region, .dst = dst, .pc = pc, .fail_at = -1 };
	char err[256] = "";
	T_ASSERT(fetch(a, rem, &r, pc, NPIECE, 1, 16, bounce, bmr, err, sizeof(err)) == 0);
}

static void bad_args_test(ckpt_fab *a, const ckpt_fab_remote *rem, uint8_t *dst, ckpt_fab_mr *dmr,
                          uint8_t *bounce, ckpt_fab_mr *bmr)
{
	run r = { .fail_at = -1 };
	char err[256];
	ckpt_fab_piece big = { .roff = 0, .len = BOUNCE + 1, .buf = NULL };
	r.pc = &big;
	T_ASSERT(fetch(a, rem, &r, &big, 1, 0, 0, bounce, bmr, err, sizeof(err)) == -EINVAL);
	printf("bad args: %s\n", err);
	ckpt_fab_piece out = { .roff = 0, .len = 100, .buf = dst + REGION - 50, .mr = dmr };
	r.pc = &out;
	T_ASSERT(fetch(a, rem, &r, &out, 1, 0, 0, bounce, bmr, err, sizeof(err)) == -EINVAL);
	ckpt_fab_fetch_opts o = { .size = sizeof(o), .threads = 17 };
	T_ASSERT(ckpt_fab_fetch(a, rem, &out, 1, &o, landed, &r, err, sizeof(err)) == -EINVAL);
	o.threads = 0;
	o.size = 4; /* an older, shorter struct than this library knows */
	T_ASSERT(ckpt_fab_fetch(a, rem, &out, 1, &o, landed, &r, err, sizeof(err)) == -EINVAL);
	T_ASSERT(ckpt_fab_fetch(a, rem, &out, 0, &o, NULL, &r, err, sizeof(err)) == -EINVAL);
	/* Nothing was posted: the fab is fine. */
	ckpt_fab_piece ok = { .roff = 0, .len = 4096, .buf = dst, .mr = dmr };
	r.pc = &ok;
	r.region = NULL;
	(void)rem;
	T_ASSERT(ckpt_fab_xfer(a, CKPT_FAB_READ, dmr, dst, 4096, rem, 0, 0, 0, TIMEOUT_MS, err, sizeof(err)) == 0);
}

static void past_end_test(const ckpt_fab_remote *rem, const uint8_t *region, uint8_t *dst)
{
	ckpt_fab *a = open_or_skip("127.0.0.2", 0);
	ckpt_fab_mr *dmr;
	char err[512] = "";
	T_ASSERT(ckpt_fab_mr_reg(a, dst, REGION, CKPT_FAB_LOCAL, &dmr, err, sizeof(err)) == 0);
	ckpt_fab_piece pc[3] = {
		{ .roff = 0, .len = 1u << 20, .buf = dst, .mr = dmr },
		{ .roff = REGION - 100, .len = 4096, .buf = dst + (2u << 20), .mr = dmr },
		{ .roff = 8192, .len = 1u << 20, .buf = dst + (4u << 20), .mr = dmr },
	};
	run r = { .region = region, .dst = dst, .pc = pc, .fail_at = -1 };
	ckpt_fab_fetch_opts o = { .size = sizeof(o), .threads = 1, .timeout_ms = TIMEOUT_MS };
	int64_t t0 = t_now_ms();
	int rc = ckpt_fab_fetch(a, rem, pc, 3, &o, landed, &r, err, sizeof(err));
	int64_t ms = t_now_ms() - t0;
	printf("read past the region's end: rc %d after %lld ms: %s\n", rc, (long long)ms, err);
	T_ASSERT(rc < 0 && rc != -EINVAL && ms < TIMEOUT_MS + 2000);
	T_ASSERT(strstr(err, ckpt_fab_provider_name(a)) || strstr(err, "completion error"));
	T_ASSERT(atomic_load(&r.calls[1]) == 0);
	T_ASSERT(ckpt_fab_fetch(a, rem, pc, 1, &o, landed, &r, err, sizeof(err)) == -EPIPE);
	ckpt_fab_mr_close(dmr);
	ckpt_fab_close(a);
}

int main(void)
{
	setenv("FI_TCP_IFACE", "lo", 0);
	prov = getenv("CKPT_FABRIC_PROVIDER");
	if (!prov || !*prov)
		prov = "tcp;ofi_rxm";
	ckpt_fab *p = open_or_skip("127.0.0.1", 1);
	ckpt_fab *a = open_or_skip("127.0.0.2", 0);
	uint8_t *region = aligned_alloc(4096, REGION), *dst = aligned_alloc(4096, REGION),
	        *bounce = aligned_alloc(4096, BOUNCE * NBOUNCE);
	T_ASSERT(region && dst && bounce);
	t_fill(region, REGION, 42);
	ckpt_fab_mr *rmr, *dmr, *bmr;
	ckpt_fab_remote rem;
	char err[256];
	T_ASSERT(ckpt_fab_mr_reg(p, region, REGION, CKPT_FAB_REMOTE_READ, &rmr, err, sizeof(err)) == 0);
	T_ASSERT(ckpt_fab_mr_remote(p, rmr, &rem) == 0);
	T_ASSERT(ckpt_fab_mr_reg(a, dst, REGION, CKPT_FAB_LOCAL, &dmr, err, sizeof(err)) == 0);
	T_ASSERT(ckpt_fab_mr_reg(a, bounce, BOUNCE * NBOUNCE, CKPT_FAB_LOCAL, &bmr, err, sizeof(err)) == 0);

	data_tests(a, &rem, region, dst, dmr, bounce, bmr);
	landed_error_test(a, &rem, region, dst, dmr, bounce, bmr);
	bad_args_test(a, &rem, dst, dmr, bounce, bmr);
	ckpt_fab_mr_close(dmr);
	ckpt_fab_mr_close(bmr);
	ckpt_fab_close(a);
	past_end_test(&rem, region, dst);
	ckpt_fab_close(p);
	free(region);
	free(dst);
	free(bounce);
	printf("PASS\n");
	return T_EXIT_PASS;
}
