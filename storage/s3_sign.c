/* SigV4 for S3: canonical URI (S3 encodes each byte once and keeps '/'),
 * canonical query string (each key and value encoded, sorted), signed
 * headers, a real payload hash; then the string to sign and the signing
 * key's HMAC chain. SHA-256, HMAC and MD5 by libcrypto. */
#include "s3_int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
	       c == '.' || c == '~';
}

long s3__uri_encode(const char *s, size_t n, int keep_slash, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (unreserved(c) || (keep_slash && c == '/')) {
			if (o + 1 >= cap)
				return -1;
			out[o++] = (char)c;
		} else {
			if (o + 3 >= cap)
				return -1;
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (o >= cap)
		return -1;
	out[o] = 0;
	return (long)o;
}

typedef struct enc_kv {
	char *k, *v;
} enc_kv;

static int kv_cmp(const void *a, const void *b)
{
	const enc_kv *x = a, *y = b;
	int c = strcmp(x->k, y->k);
	return c ? c : strcmp(x->v, y->v);
}

long s3__query(const s3_kv *kv, size_t n, char *out, size_t cap)
{
	if (!cap)
		return -1;
	out[0] = 0;
	if (!n)
		return 0;
	enc_kv *e = calloc(n, sizeof(*e));
	long rc = -1;
	if (!e)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const char *v = kv[i].v ? kv[i].v : "";
		size_t kc = strlen(kv[i].k) * 3 + 1, vc = strlen(v) * 3 + 1;
		e[i].k = malloc(kc);
		e[i].v = malloc(vc);
		if (!e[i].k || !e[i].v || s3__uri_encode(kv[i].k, strlen(kv[i].k), 0, e[i].k, kc) < 0 ||
		    s3__uri_encode(v, strlen(v), 0, e[i].v, vc) < 0)
			goto out;
	}
	qsort(e, n, sizeof(*e), kv_cmp);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int w = snprintf(out + o, cap - o, "%s%s=%s", i ? "&" : "", e[i].k, e[i].v);
		if (w < 0 || (size_t)w >= cap - o)
			goto out;
		o += (size_t)w;
	}
	rc = (long)o;
out:
	for (size_t i = 0; i < n; i++) {
		free(e[i].k);
		free(e[i].v);
	}
	free(e);
	if (rc < 0)
		out[0] = 0;
	return rc;
}

static void hexify(const unsigned char *d, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[2 * n] = 0;
}

void s3__sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int dn = 0;
	EVP_Digest(p, n, d, &dn, EVP_sha256(), NULL);
	hexify(d, 32, out);
}

void s3__md5_b64(const void *p, size_t n, char out[25])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int dn = 0;
	EVP_Digest(p, n, d, &dn, EVP_md5(), NULL);
	EVP_EncodeBlock((unsigned char *)out, d, 16);
}

void s3__digests(const void *p, size_t n, char sha_hex[65], char md5_b64[25], void (*pump)(void *), void *arg)
{
	EVP_MD_CTX *s = EVP_MD_CTX_new(), *m = md5_b64 ? EVP_MD_CTX_new() : NULL;
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int dn = 0;
	if (!s || (md5_b64 && !m)) {
		/* Out of memory for the contexts: the one-shot forms. */
		EVP_MD_CTX_free(s);
		EVP_MD_CTX_free(m);
		s3__sha256_hex(p, n, sha_hex);
		if (md5_b64)
			s3__md5_b64(p, n, md5_b64);
		return;
	}
	EVP_DigestInit_ex(s, EVP_sha256(), NULL);
	if (m)
		EVP_DigestInit_ex(m, EVP_md5(), NULL);
	const size_t step = 1u << 20; /* in cache while both read it */
	for (size_t off = 0; off < n; off += step) {
		size_t k = n - off < step ? n - off : step;
		EVP_DigestUpdate(s, (const char *)p + off, k);
		if (m)
			EVP_DigestUpdate(m, (const char *)p + off, k);
		if (pump && (off / step) % 4 == 3)
			pump(arg);
	}
	EVP_DigestFinal_ex(s, d, &dn);
	hexify(d, 32, sha_hex);
	if (m) {
		EVP_DigestFinal_ex(m, d, &dn);
		EVP_EncodeBlock((unsigned char *)md5_b64, d, 16);
	}
	EVP_MD_CTX_free(s);
	EVP_MD_CTX_free(m);
}

int s3__md5_b64_hex(const char *b64, char hex[33])
{
	unsigned char d[24];
	if (strlen(b64) != 24 || EVP_DecodeBlock(d, (const unsigned char *)b64, 24) != 18)
		return -1;
	hexify(d, 16, hex);
	return 0;
}

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
	unsigned int n = 32;
	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &n);
}

void s3__amzdate(time_t t, char out[17])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static int hdr_cmp(const void *a, const void *b)
{
	return strcmp(((const s3_hdr *)a)->name, ((const s3_hdr *)b)->name);
}

/* Appends with snprintf; -1 once out of room. */
static int app(char *buf, size_t cap, size_t *o, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int app(char *buf, size_t cap, size_t *o, const char *fmt, ...)
{
	if (*o >= cap)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf + *o, cap - *o, fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= cap - *o) {
		*o = cap;
		return -1;
	}
	*o += (size_t)w;
	return 0;
}

/* A header value as SigV4 wants it: outer spaces trimmed, inner runs of
 * spaces one. */
static void trim_value(const char *v, char *out, size_t cap)
{
	size_t o = 0;
	while (*v == ' ' || *v == '\t')
		v++;
	int space = 0;
	for (; *v && o + 1 < cap; v++) {
		if (*v == ' ' || *v == '\t') {
			space = 1;
			continue;
		}
		if (space && o)
			out[o++] = ' ';
		space = 0;
		if (o + 1 < cap)
			out[o++] = *v;
	}
	out[o] = 0;
}

int s3__sign(const s3_sig_in *in, char *auth, size_t cap, char *canon_out, size_t canon_cap)
{
	qsort(in->hdrs, in->nhdrs, sizeof(*in->hdrs), hdr_cmp);
	size_t need = 1024 + strlen(in->uri) + strlen(in->query);
	for (size_t i = 0; i < in->nhdrs; i++)
		need += strlen(in->hdrs[i].name) * 2 + strlen(in->hdrs[i].value) + 4;
	char *canon = malloc(need), *signed_h = malloc(need), *val = malloc(need);
	int rc = -ENOSPC;
	if (!canon || !signed_h || !val)
		goto out;
	size_t o = 0, so = 0;
	app(canon, need, &o, "%s\n%s\n%s\n", in->method, in->uri, in->query);
	for (size_t i = 0; i < in->nhdrs; i++) {
		trim_value(in->hdrs[i].value, val, need);
		app(canon, need, &o, "%s:%s\n", in->hdrs[i].name, val);
		app(signed_h, need, &so, "%s%s", i ? ";" : "", in->hdrs[i].name);
	}
	if (!in->nhdrs)
		signed_h[0] = 0;
	if (app(canon, need, &o, "\n%s\n%s", signed_h, in->payload) < 0)
		goto out;
	if (canon_out && canon_cap)
		snprintf(canon_out, canon_cap, "%s", canon);

	char amzdate[17], day[9], chash[65];
	s3__amzdate(in->when, amzdate);
	memcpy(day, amzdate, 8);
	day[8] = 0;
	s3__sha256_hex(canon, o, chash);
	char scope[160], sts[400];
	snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", day, in->region, in->service);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", amzdate, scope, chash);

	char k0[160];
	unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
	int kn = snprintf(k0, sizeof(k0), "AWS4%s", in->secret);
	if (kn < 0 || (size_t)kn >= sizeof(k0))
		goto out;
	hmac(k0, (size_t)kn, day, k1);
	hmac(k1, 32, in->region, k2);
	hmac(k2, 32, in->service, k3);
	hmac(k3, 32, "aws4_request", k4);
	hmac(k4, 32, sts, sig);
	char sighex[65];
	hexify(sig, 32, sighex);
	int w = snprintf(auth, cap, "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s", in->access,
	                 scope, signed_h, sighex);
	if (w > 0 && (size_t)w < cap)
		rc = 0;
	/* The derived keys are as good as the secret for a day. */
	memset(k0, 0, sizeof(k0));
	memset(k1, 0, sizeof(k1));
	memset(k2, 0, sizeof(k2));
	memset(k3, 0, sizeof(k3));
	memset(k4, 0, sizeof(k4));
out:
	free(canon);
	free(signed_h);
	free(val);
	return rc;
}
