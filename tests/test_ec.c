/* storage/ec.c, the Reed–Solomon arithmetic of the rs:K+M peer scheme:
 *   - ISA-L's generator and parity against a plain-C GF(2^8) reference
 *     written here (log/antilog tables of x^8 + x^4 + x^3 + x^2 + 1, the
 *     Cauchy coefficients 1 / ((K + i) xor j) computed from them);
 *   - one data piece at a time (ec_encode_data_update), in any order and
 *     with short pieces, equals the one-shot encode;
 *   - for rs:2+1, 4+1, 4+2, 6+3 and 8+2, every pattern of 1..M lost pieces
 *     (55 for 8+2) rebuilds every lost data piece bit-exact, at lengths
 *     that are multiples of nothing convenient;
 *   - every pattern of M + 1 lost is refused with -ENODATA and a text
 *     naming the lost pieces;
 *   - misaligned buffers and bad schemes are refused. */
#include "helpers.h"
#include "ec.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- reference GF(2^8) */

static uint8_t gexp[512], glog[256];

static void ref_init(void)
{
	unsigned x = 1;
	for (unsigned i = 0; i < 255; i++) {
		gexp[i] = (uint8_t)x;
		glog[x] = (uint8_t)i;
		x <<= 1;
		if (x & 0x100)
			x ^= 0x11d;
	}
	for (unsigned i = 255; i < 512; i++)
		gexp[i] = gexp[i - 255];
}

static uint8_t ref_mul(uint8_t a, uint8_t b)
{
	return a && b ? gexp[glog[a] + glog[b]] : 0;
}

static uint8_t ref_inv(uint8_t a)
{
	return gexp[255 - glog[a]];
}

/* Parity row i of rs:k+m, byte by byte. */
static void ref_encode(unsigned k, unsigned i, size_t len, uint8_t *const *data, uint8_t *out)
{
	memset(out, 0, len);
	for (unsigned j = 0; j < k; j++) {
		uint8_t c = ref_inv((uint8_t)((k + i) ^ j));
		for (size_t b = 0; b < len; b++)
			out[b] ^= ref_mul(c, data[j][b]);
	}
}

/* ---------------------------------------------------------------- helpers */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint8_t rnd8(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint8_t)(rng >> 24);
}

static uint8_t *abuf(size_t len)
{
	uint8_t *p = aligned_alloc(CKPT_EC_ALIGN, (len + CKPT_EC_ALIGN) / CKPT_EC_ALIGN * CKPT_EC_ALIGN);
	T_ASSERT(p);
	return p;
}

typedef struct cfg {
	unsigned k, m, patterns; /* patterns of 1..m losses among k + m */
} cfg;

static const cfg CFGS[] = { { 2, 1, 3 }, { 4, 1, 5 }, { 4, 2, 21 }, { 6, 3, 129 }, { 8, 2, 55 } };
static const size_t LENS[] = { 1, 63, 65, 4099, 100003 };

/* ---------------------------------------------------------------- tests */

static void test_generator(const cfg *c)
{
	ckpt_ec *e;
	char err[200];
	T_ASSERT(ckpt_ec_new(c->k, c->m, &e, err, sizeof(err)) == 0);
	for (unsigned r = 0; r < c->k + c->m; r++)
		for (unsigned j = 0; j < c->k; j++) {
			uint8_t want = r < c->k ? (r == j) : ref_inv((uint8_t)(r ^ j));
			if (ckpt_ec_coef(e, r, j) != want)
				T_FAIL("rs:%u+%u: coefficient (%u, %u) is %u, the reference says %u", c->k, c->m, r, j,
				       ckpt_ec_coef(e, r, j), want);
		}
	ckpt_ec_free(e);
}

static void test_patterns(const cfg *c, size_t len)
{
	const unsigned k = c->k, m = c->m, n = k + m;
	ckpt_ec *e;
	char err[300];
	T_ASSERT(ckpt_ec_new(k, m, &e, err, sizeof(err)) == 0);
	uint8_t *piece[CKPT_EC_MAX_PIECES], *ref = abuf(len), *upd[CKPT_EC_MAX_PIECES];
	for (unsigned i = 0; i < n; i++)
		piece[i] = abuf(len);
	for (unsigned j = 0; j < k; j++)
		for (size_t b = 0; b < len; b++)
			piece[j][b] = rnd8();
	T_ASSERT(ckpt_ec_encode(e, len, (const uint8_t *const *)piece, piece + k) == 0);
	/* ISA-L's parity equals the reference's. */
	for (unsigned i = 0; i < m; i++) {
		ref_encode(k, i, len, piece, ref);
		if (memcmp(ref, piece[k + i], len))
			T_FAIL("rs:%u+%u len %zu: parity %u differs from the reference encoder", k, m, len, i);
	}
	/* Piece by piece, last to first, per row: the same parity. */
	for (unsigned i = 0; i < m; i++) {
		upd[i] = abuf(len);
		memset(upd[i], 0, len);
		for (unsigned j = k; j-- > 0;)
			T_ASSERT(ckpt_ec_update(e, i, j, len, piece[j], upd[i]) == 0);
		if (memcmp(upd[i], piece[k + i], len))
			T_FAIL("rs:%u+%u len %zu: incremental parity %u differs from the one-shot encode", k, m, len, i);
		free(upd[i]);
	}
	/* Every pattern of 1..m lost pieces. */
	unsigned tried = 0;
	uint8_t *out[CKPT_EC_MAX_PIECES];
	for (unsigned j = 0; j < k; j++)
		out[j] = abuf(len);
	for (uint64_t mask = 1; mask < (1ull << n); mask++) {
		unsigned lost = (unsigned)__builtin_popcountll(mask);
		if (lost > m + 1)
			continue;
		const uint8_t *have[CKPT_EC_MAX_PIECES];
		unsigned want[CKPT_EC_MAX_PIECES], nw = 0;
		for (unsigned i = 0; i < n; i++) {
			have[i] = (mask >> i & 1) ? NULL : piece[i];
			if ((mask >> i & 1) && i < k)
				want[nw++] = i;
		}
		for (unsigned w = 0; w < nw; w++)
			memset(out[w], 0xa5, len);
		int r = ckpt_ec_decode(e, len, have, want, nw, out, err, sizeof(err));
		if (lost == m + 1) {
			if (r != -ENODATA)
				T_FAIL("rs:%u+%u: %u lost (mask %#llx) decoded (%d); must be refused", k, m, lost,
				       (unsigned long long)mask, r);
			char first[32];
			unsigned f = (unsigned)__builtin_ctzll(mask);
			snprintf(first, sizeof(first), "%s%u", f < k ? "data " : "parity ", f < k ? f : f - k);
			if (!strstr(err, "survive") || !strstr(err, first))
				T_FAIL("rs:%u+%u: refusal does not name what was lost: %s", k, m, err);
			continue;
		}
		if (r != 0)
			T_FAIL("rs:%u+%u len %zu mask %#llx: decode failed: %s", k, m, len, (unsigned long long)mask, err);
		for (unsigned w = 0; w < nw; w++)
			if (memcmp(out[w], piece[want[w]], len))
				T_FAIL("rs:%u+%u len %zu mask %#llx: data piece %u not bit-exact", k, m, len,
				       (unsigned long long)mask, want[w]);
		tried++;
	}
	if (tried != c->patterns)
		T_FAIL("rs:%u+%u: %u loss patterns tried, expected %u", k, m, tried, c->patterns);
	for (unsigned j = 0; j < k; j++)
		free(out[j]);
	for (unsigned i = 0; i < n; i++)
		free(piece[i]);
	free(ref);
	ckpt_ec_free(e);
}

/* A piece shorter than the parity is one with a zero tail. */
static void test_short_pieces(void)
{
	ckpt_ec *e;
	char err[200];
	const size_t len = 777777;
	const size_t have_len[4] = { 777777, 5001, 0, 777700 };
	T_ASSERT(ckpt_ec_new(4, 2, &e, err, sizeof(err)) == 0);
	uint8_t *d[4], *p[2], *q = abuf(len);
	for (unsigned j = 0; j < 4; j++) {
		d[j] = abuf(len);
		memset(d[j], 0, len);
		for (size_t b = 0; b < have_len[j]; b++)
			d[j][b] = rnd8();
	}
	for (unsigned i = 0; i < 2; i++)
		p[i] = abuf(len);
	T_ASSERT(ckpt_ec_encode(e, len, (const uint8_t *const *)d, p) == 0);
	for (unsigned i = 0; i < 2; i++) {
		memset(q, 0, len);
		for (unsigned j = 0; j < 4; j++)
			T_ASSERT(ckpt_ec_update(e, i, (j + 2) % 4, have_len[(j + 2) % 4], d[(j + 2) % 4], q) == 0);
		T_ASSERT(memcmp(q, p[i], len) == 0);
	}
	for (unsigned j = 0; j < 4; j++)
		free(d[j]);
	free(p[0]);
	free(p[1]);
	free(q);
	ckpt_ec_free(e);
}

static void test_refusals(void)
{
	ckpt_ec *e;
	char err[200];
	T_ASSERT(ckpt_ec_new(0, 2, &e, err, sizeof(err)) == -EINVAL && !e && strstr(err, "K >= 1"));
	T_ASSERT(ckpt_ec_new(4, 0, &e, err, sizeof(err)) == -EINVAL);
	T_ASSERT(ckpt_ec_new(60, 5, &e, err, sizeof(err)) == -EINVAL);
	T_ASSERT(ckpt_ec_new(2, 1, &e, err, sizeof(err)) == 0);
	uint8_t *a = abuf(256), *b = abuf(256), *c = abuf(256);
	const uint8_t *d[2] = { a + 1, b };
	uint8_t *p[1] = { c };
	T_ASSERT(ckpt_ec_encode(e, 100, d, p) == -EINVAL);
	T_ASSERT(ckpt_ec_update(e, 0, 0, 100, a + 8, c) == -EINVAL);
	T_ASSERT(ckpt_ec_update(e, 1, 0, 100, a, c) == -EINVAL); /* no parity row 1 */
	T_ASSERT(ckpt_ec_update(e, 0, 2, 100, a, c) == -EINVAL); /* no data piece 2 */
	const uint8_t *have[3] = { NULL, b, c };
	unsigned want[1] = { 0 };
	uint8_t *out[1] = { a + 64 + 32 };
	T_ASSERT(ckpt_ec_decode(e, 100, have, want, 1, out, err, sizeof(err)) == -EINVAL && strstr(err, "aligned"));
	want[0] = 1; /* not lost */
	out[0] = a;
	T_ASSERT(ckpt_ec_decode(e, 100, have, want, 1, out, err, sizeof(err)) == -EINVAL);
	free(a);
	free(b);
	free(c);
	ckpt_ec_free(e);

	unsigned k, m;
	T_ASSERT(ckpt_ec_scheme_parse("partner", &k, &m, err, sizeof(err)) == 0 && k == 0 && m == 0);
	T_ASSERT(ckpt_ec_scheme_parse("rs:8+2", &k, &m, err, sizeof(err)) == 0 && k == 8 && m == 2);
	T_ASSERT(ckpt_ec_scheme_parse("rs:60+4", &k, &m, err, sizeof(err)) == 0 && k == 60 && m == 4);
	const char *bad[] = { "rs:8+0", "rs:0+2", "rs:8+", "rs:+2", "rs:8 +2", "rs:8+ 2", "rs:8+-2", "rs:8+2x",
	                      "rs:61+4", "rs:1000+1", "RS:8+2", "rs8+2", "partners", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		if (ckpt_ec_scheme_parse(bad[i], &k, &m, err, sizeof(err)) != -EINVAL || !strstr(err, "scheme"))
			T_FAIL("scheme \"%s\" was not refused with a clear error (%s)", bad[i], err);
}

int main(void)
{
	ref_init();
	for (size_t c = 0; c < sizeof(CFGS) / sizeof(*CFGS); c++) {
		test_generator(&CFGS[c]);
		for (size_t l = 0; l < sizeof(LENS) / sizeof(*LENS); l++)
			test_patterns(&CFGS[c], LENS[l]);
		printf("rs:%u+%u: %u loss patterns bit-exact at %zu lengths, every %u-loss pattern refused\n", CFGS[c].k,
		       CFGS[c].m, CFGS[c].patterns, sizeof(LENS) / sizeof(*LENS), CFGS[c].m + 1);
	}
	test_short_pieces();
	test_refusals();
	printf("ok\n");
	return T_EXIT_PASS;
}
