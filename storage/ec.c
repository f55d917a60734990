/* Reed–Solomon over GF(2^8) with ISA-L (ec.h). The codec keeps the
 * (k + m) x k generator and ISA-L's expanded tables of its parity rows
 * (32 bytes per coefficient), made once; a decode inverts the k x k
 * submatrix of the pieces it uses and expands the rows it wants. */
#include "ec.h"

#include <isa-l/erasure_code.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ckpt_ec {
	unsigned k, m;
	uint8_t *gen;  /* (k + m) x k, row-major */
	uint8_t *tbls; /* m rows x k coefficients x 32 bytes */
};

static int aligned(const void *p)
{
	return p && ((uintptr_t)p % CKPT_EC_ALIGN) == 0;
}

int ckpt_ec_new(unsigned k, unsigned m, ckpt_ec **out, char *err, size_t errcap)
{
	*out = NULL;
	if (k < 1 || m < 1 || k + m > CKPT_EC_MAX_PIECES) {
		snprintf(err, errcap, "rs:%u+%u: need K >= 1, M >= 1 and K + M <= %u", k, m, CKPT_EC_MAX_PIECES);
		return -EINVAL;
	}
	ckpt_ec *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->k = k;
	e->m = m;
	e->gen = malloc((size_t)(k + m) * k);
	e->tbls = aligned_alloc(CKPT_EC_ALIGN, ((size_t)32 * k * m + CKPT_EC_ALIGN - 1) / CKPT_EC_ALIGN * CKPT_EC_ALIGN);
	if (!e->gen || !e->tbls) {
		ckpt_ec_free(e);
		return -ENOMEM;
	}
	/* ISA-L's matrix functions take the total row count, k + m. */
	gf_gen_cauchy1_matrix(e->gen, (int)(k + m), (int)k);
	ec_init_tables((int)k, (int)m, e->gen + (size_t)k * k, e->tbls);
	*out = e;
	return 0;
}

void ckpt_ec_free(ckpt_ec *e)
{
	if (!e)
		return;
	free(e->gen);
	free(e->tbls);
	free(e);
}

unsigned ckpt_ec_k(const ckpt_ec *e)
{
	return e->k;
}

unsigned ckpt_ec_m(const ckpt_ec *e)
{
	return e->m;
}

uint8_t ckpt_ec_coef(const ckpt_ec *e, unsigned row, unsigned j)
{
	return row < e->k + e->m && j < e->k ? e->gen[(size_t)row * e->k + j] : 0;
}

/* ISA-L takes an int length: long pieces go in slices that keep every
 * pointer aligned. */
#define EC_SLICE ((size_t)1 << 30)

int ckpt_ec_encode(const ckpt_ec *e, size_t len, const uint8_t *const *data, uint8_t *const *parity)
{
	uint8_t *src[CKPT_EC_MAX_PIECES], *dst[CKPT_EC_MAX_PIECES];
	if (!e || !data || !parity)
		return -EINVAL;
	for (unsigned j = 0; j < e->k; j++)
		if (!aligned(data[j]))
			return -EINVAL;
	for (unsigned i = 0; i < e->m; i++)
		if (!aligned(parity[i]))
			return -EINVAL;
	for (size_t off = 0; off < len; off += EC_SLICE) {
		size_t n = len - off < EC_SLICE ? len - off : EC_SLICE;
		for (unsigned j = 0; j < e->k; j++)
			src[j] = (uint8_t *)data[j] + off;
		for (unsigned i = 0; i < e->m; i++)
			dst[i] = parity[i] + off;
		ec_encode_data((int)n, (int)e->k, (int)e->m, e->tbls, src, dst);
	}
	return 0;
}

int ckpt_ec_update(const ckpt_ec *e, unsigned row, unsigned j, size_t len, const uint8_t *data, uint8_t *parity)
{
	if (!e || row >= e->m || j >= e->k || !aligned(data) || !aligned(parity))
		return -EINVAL;
	/* The tables of one parity row: a holder of that row updates only it. */
	uint8_t *t = e->tbls + (size_t)32 * e->k * row;
	for (size_t off = 0; off < len; off += EC_SLICE) {
		size_t n = len - off < EC_SLICE ? len - off : EC_SLICE;
		uint8_t *dst = parity + off;
		ec_encode_data_update((int)n, (int)e->k, 1, (int)j, t, (uint8_t *)data + off, &dst);
	}
	return 0;
}

int ckpt_ec_decode(const ckpt_ec *e, size_t len, const uint8_t *const *have, const unsigned *want,
                   unsigned nwant, uint8_t *const *out, char *err, size_t errcap)
{
	if (!e || !have || (nwant && (!want || !out)) || nwant > e->k) {
		snprintf(err, errcap, "bad arguments");
		return -EINVAL;
	}
	const unsigned k = e->k, n = e->k + e->m;
	unsigned use[CKPT_EC_MAX_PIECES], nuse = 0;
	for (unsigned i = 0; i < n && nuse < k; i++)
		if (have[i])
			use[nuse++] = i;
	if (nuse < k) {
		size_t o = (size_t)snprintf(err, errcap, "only %u of the %u pieces needed survive; lost:", nuse, k);
		for (unsigned i = 0; i < n && o < errcap; i++)
			if (!have[i])
				o += (size_t)snprintf(err + o, errcap - o, " %s%u", i < k ? "data " : "parity ", i < k ? i : i - k);
		return -ENODATA;
	}
	for (unsigned w = 0; w < nwant; w++)
		if (want[w] >= k || have[want[w]] || !aligned(out[w])) {
			snprintf(err, errcap, "piece %u: not a lost data piece, or its buffer is not %u-byte aligned", want[w],
			         CKPT_EC_ALIGN);
			return -EINVAL;
		}
	for (unsigned i = 0; i < k; i++)
		if (!aligned(have[use[i]])) {
			snprintf(err, errcap, "piece %u: buffer not %u-byte aligned", use[i], CKPT_EC_ALIGN);
			return -EINVAL;
		}
	if (!nwant)
		return 0;
	uint8_t *sub = malloc((size_t)k * k), *inv = malloc((size_t)k * k), *dm = malloc((size_t)nwant * k);
	uint8_t *t = aligned_alloc(CKPT_EC_ALIGN, ((size_t)32 * k * nwant + CKPT_EC_ALIGN - 1) / CKPT_EC_ALIGN * CKPT_EC_ALIGN);
	int r = 0;
	if (!sub || !inv || !dm || !t) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < k; i++)
		memcpy(sub + (size_t)i * k, e->gen + (size_t)use[i] * k, k);
	if (gf_invert_matrix(sub, inv, (int)k) < 0) {
		/* Cannot happen with a Cauchy generator: every k rows are independent. */
		snprintf(err, errcap, "the generator's submatrix is singular");
		r = -EIO;
		goto out;
	}
	/* Data piece d = row d of the inverse applied to the pieces used. */
	for (unsigned w = 0; w < nwant; w++)
		memcpy(dm + (size_t)w * k, inv + (size_t)want[w] * k, k);
	ec_init_tables((int)k, (int)nwant, dm, t);
	uint8_t *src[CKPT_EC_MAX_PIECES], *dst[CKPT_EC_MAX_PIECES];
	for (size_t off = 0; off < len; off += EC_SLICE) {
		size_t nb = len - off < EC_SLICE ? len - off : EC_SLICE;
		for (unsigned i = 0; i < k; i++)
			src[i] = (uint8_t *)have[use[i]] + off;
		for (unsigned w = 0; w < nwant; w++)
			dst[w] = out[w] + off;
		ec_encode_data((int)nb, (int)k, (int)nwant, t, src, dst);
	}
out:
	free(sub);
	free(inv);
	free(dm);
	free(t);
	return r;
}

/* Digits only (no sign, no blanks, at most three): [out] *v; the text after. */
static const char *digits(const char *s, unsigned *v)
{
	unsigned n = 0, x = 0;
	while (s[n] >= '0' && s[n] <= '9' && n < 4)
		x = x * 10 + (unsigned)(s[n++] - '0');
	*v = x;
	return n && n < 4 ? s + n : NULL;
}

int ckpt_ec_scheme_parse(const char *s, unsigned *k, unsigned *m, char *err, size_t errcap)
{
	*k = *m = 0;
	if (!s || !strcmp(s, "partner"))
		return 0;
	unsigned a = 0, b = 0;
	const char *p = !strncmp(s, "rs:", 3) ? digits(s + 3, &a) : NULL;
	p = p && *p == '+' ? digits(p + 1, &b) : NULL;
	if (!p || *p) {
		snprintf(err, errcap, "peer scheme \"%.40s\": expected partner or rs:K+M (e.g. rs:8+2)", s);
		return -EINVAL;
	}
	if (a < 1 || b < 1 || a + b > CKPT_EC_MAX_PIECES) {
		snprintf(err, errcap, "peer scheme %.40s: need K >= 1, M >= 1 and K + M <= %u", s, CKPT_EC_MAX_PIECES);
		return -EINVAL;
	}
	*k = a;
	*m = b;
	return 0;
}
