/* The snapshot's copy gang (libckpt/base/pcopy.c): every length and
 * alignment copied exactly, its parallel loop doing each byte once, nothing written outside the destination, the
 * gang's threads really take parts, several callers at once take turns, and
 * the snapshot_threads setting is bounded. */
#include "helpers.h"

#include <ckpt.h>
#include <pthread.h>

#include "base/pcopy.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Copies len bytes at the given offsets and checks the copy and the guard
 * bytes around it. */
static void check_copy(ckpt_pcopy *pc, uint8_t *dbuf, const uint8_t *sbuf, size_t doff, size_t soff, size_t len)
{
	memset(dbuf, 0xA5, len + doff + 64);
	ckpt__pcopy(pc, dbuf + doff, sbuf + soff, len);
	for (size_t i = 0; i < doff; i++)
		if (dbuf[i] != 0xA5)
			T_FAIL("byte %zu before the destination written (len %zu)", i, len);
	if (memcmp(dbuf + doff, sbuf + soff, len))
		T_FAIL("copy of %zu bytes (dst +%zu, src +%zu) differs", len, doff, soff);
	for (size_t i = 0; i < 64; i++)
		if (dbuf[doff + len + i] != 0xA5)
			T_FAIL("byte %zu after the destination written (len %zu)", i, len);
}

struct caller {
	ckpt_pcopy *pc;
	uint8_t *src, *dst;
	size_t len;
	int bad;
};

static void *caller_main(void *arg)
{
	struct caller *c = arg;
	for (int i = 0; i < 20 && !c->bad; i++) {
		memset(c->dst, 0, c->len);
		ckpt__pcopy(c->pc, c->dst, c->src, c->len);
		c->bad = memcmp(c->dst, c->src, c->len) != 0;
	}
	return NULL;
}

/* ckpt__pcopy_each: every byte of [0, len) in exactly one call, parts at
 * multiples of part and no longer than it (or the whole in one call). */
struct each_rec {
	size_t len, part;
	_Atomic unsigned calls;
	uint8_t *seen;
	int bad;
};

static void each_fn(void *arg, size_t off, size_t n)
{
	struct each_rec *r = arg;
	r->calls++;
	int whole = off == 0 && n == r->len; /* no gang, or under two parts */
	if (off + n > r->len || n == 0 || (!whole && (off % r->part || n > r->part)))
		r->bad = 1;
	for (size_t i = off; i < off + n && i < r->len; i++)
		r->seen[i]++;
}

static void check_each(ckpt_pcopy *pc, size_t len, size_t part)
{
	struct each_rec r = { .len = len, .part = part ? part : 1u << 20, .seen = calloc(len + 1, 1) };
	T_ASSERT(r.seen);
	ckpt__pcopy_each(pc, len, part, each_fn, &r);
	if (r.bad)
		T_FAIL("pcopy_each(len %zu, part %zu): a call outside its part", len, part);
	for (size_t i = 0; i < len; i++)
		if (r.seen[i] != 1)
			T_FAIL("pcopy_each(len %zu, part %zu): byte %zu done %u times", len, part, i, r.seen[i]);
	if (len == 0 && r.calls)
		T_FAIL("pcopy_each of nothing called its function");
	free(r.seen);
}

int main(void)
{
	const size_t max = (24u << 20) + 4096;
	uint8_t *src = malloc(max), *dst = malloc(max + 128);
	T_ASSERT(src && dst);
	for (size_t i = 0; i < max; i += 8) {
		uint64_t v = next_rand();
		memcpy(src + i, &v, max - i < 8 ? max - i : 8);
	}

	/* Every length class on gangs of 1..4: under the threshold, at it,
	 * parts and a tail, odd offsets on either side. */
	const size_t lens[] = { 0, 1, 4095, 1u << 20, (2u << 20) - 1, 2u << 20, (2u << 20) + 1,
		                (7u << 20) + 12345, 24u << 20 };
	for (unsigned threads = 1; threads <= 4; threads++) {
		ckpt_pcopy *pc = NULL;
		T_OK(ckpt__pcopy_start(&pc, threads));
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
			for (size_t off = 0; off < 3; off++)
				check_copy(pc, dst, src, off * 17, off * 5, lens[k]);
		for (int i = 0; i < 30; i++) {
			size_t len = next_rand() % (max - 64), doff = next_rand() % 64, soff = next_rand() % 64;
			check_copy(pc, dst, src, doff, soff, len);
		}
		const size_t elens[] = { 0, 1, 65535, 65536, 131071, 131072, 131073, 1000003 };
		const size_t parts[] = { 0, 1, 65536, 65537 };
		for (size_t k = 0; k < sizeof(elens) / sizeof(elens[0]); k++)
			for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]); p++)
				if (parts[p] != 1 || elens[k] <= 65536) /* part 1 of a megabyte: a million calls */
					check_each(pc, elens[k], parts[p]);
		ckpt__pcopy_stop(pc);
	}

	/* The gang's threads take parts: over many 24 MiB copies (24 parts
	 * each) at least one must come from them, or the gang does nothing. */
	ckpt_pcopy *pc = NULL;
	T_OK(ckpt__pcopy_start(&pc, 2));
	for (int i = 0; i < 200 && ckpt__pcopy_helped(pc) == 0; i++)
		check_copy(pc, dst, src, 0, 0, 24u << 20);
	if (ckpt__pcopy_helped(pc) == 0)
		T_FAIL("the gang's thread copied no part of 200 copies of 24 MiB");
	T_ASSERT(ckpt__pcopy_helped(pc) > 0);

	/* Three callers at once on one gang take turns. */
	struct caller c[3];
	pthread_t th[3];
	for (int i = 0; i < 3; i++) {
		c[i] = (struct caller){ pc, src + i * 4096, malloc(8u << 20), 8u << 20, 0 };
		T_ASSERT(c[i].dst);
		T_ASSERT(pthread_create(&th[i], NULL, caller_main, &c[i]) == 0);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		if (c[i].bad)
			T_FAIL("caller %d: a copy made while others copied differs", i);
		free(c[i].dst);
	}
	ckpt__pcopy_stop(pc);
	ckpt__pcopy_stop(NULL);

	/* The setting: 65 refused, 0 (auto) and 64 taken. */
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	T_ASSERT(cfg.snapshot_threads == 0);
	setenv("CKPT_SNAPSHOT_THREADS", "3", 1);
	T_OK(ckpt_config_init(&cfg));
	T_ASSERT(cfg.snapshot_threads == 3);
	unsetenv("CKPT_SNAPSHOT_THREADS");
	char *tmpl = t_tmpdir("pcopy");
	T_OK(ckpt_config_init(&cfg));
	cfg.job_id = "pcopy";
	cfg.root = tmpl;
	cfg.snapshot_threads = 65;
	ckpt_ctx *ctx = NULL;
	T_ERR(ckpt_ctx_open(&cfg, &ctx), -CKPT_ECONFIG);
	cfg.snapshot_threads = 3;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	/* A save and a restore through a gang of three: the bytes come back. */
	size_t n = 9u << 20;
	uint8_t *state = malloc(n);
	T_ASSERT(state);
	memcpy(state, src, n);
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "w", state, n);
	T_OK(ckpt_region_add(ctx, &d));
	ckpt_handle *h = NULL;
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
	ckpt_handle_free(h);
	memset(state, 0, n);
	uint64_t got = 0;
	T_OK(ckpt_restore(ctx, 1, 0, &got));
	T_ASSERT(got == 1);
	if (memcmp(state, src, n))
		T_FAIL("a version saved through a gang of three restores different bytes");
	ckpt_ctx_close(ctx);
	free(state);
	t_rmrf(tmpl);
	free(src);
	free(dst);
	puts("test_pcopy: ok");
	return T_EXIT_PASS;
}
