/* The S3 client's SigV4 (storage/s3_sign.c) against published vectors:
 * AWS's SigV4 test suite (service "service", key AKIDEXAMPLE, 2015-08-30)
 * and the examples of the S3 documentation's "Signature calculations for
 * the Authorization header" (examplebucket, AKIAIOSFODNN7EXAMPLE,
 * 2013-05-24): the GET with a Range, the PUT with a payload, the
 * lifecycle GET and the list with max-keys. Also S3's URI encoding, the
 * canonical query string and the digests. No server needed. */
#include "ckpt.h"
#include "helpers.h"
#include "s3_int.h"

#define SUITE_KEY "AKIDEXAMPLE"
#define SUITE_SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define SUITE_TIME 1440938160 /* 20150830T123600Z */
#define S3_KEY "AKIAIOSFODNN7EXAMPLE"
#define S3_SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define S3_TIME 1369353600 /* 20130524T000000Z */
#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static const char *sig_of(const char *auth)
{
	const char *s = strstr(auth, "Signature=");
	T_ASSERT(s);
	return s + 10;
}

/* One vector of the SigV4 suite: headers host and x-amz-date, plus extra. */
static void suite(const char *name, const char *method, const s3_kv *q, size_t nq, const s3_hdr *extra, size_t nx,
                  const char *body, const char *want_signed, const char *want_sig)
{
	char query[512], date[17], payload[65], auth[1024], canon[2048];
	T_ASSERT(s3__query(q, nq, query, sizeof(query)) >= 0);
	s3__amzdate(SUITE_TIME, date);
	T_ASSERT(!strcmp(date, "20150830T123600Z"));
	s3__sha256_hex(body, strlen(body), payload);
	s3_hdr h[8] = { { "host", "example.amazonaws.com" }, { "x-amz-date", date } };
	size_t nh = 2;
	for (size_t i = 0; i < nx; i++)
		h[nh++] = extra[i];
	s3_sig_in in = { method, "/", query, h, nh, payload, "us-east-1", "service", SUITE_TIME, SUITE_KEY, SUITE_SECRET };
	T_OK(s3__sign(&in, auth, sizeof(auth), canon, sizeof(canon)));
	char want[600];
	snprintf(want, sizeof(want),
	         "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=%s, "
	         "Signature=%s", want_signed, want_sig);
	if (strcmp(auth, want))
		T_FAIL("%s: got\n  %s\nwant\n  %s\ncanonical request:\n%s", name, auth, want, canon);
	printf("ok: SigV4 suite %s\n", name);
}

/* One S3 documentation example: host examplebucket.s3.amazonaws.com. */
static void s3doc(const char *name, const char *method, const char *uri, const s3_kv *q, size_t nq,
                  const s3_hdr *extra, size_t nx, const char *payload, const char *want_sig, const char *want_canon_hash)
{
	char query[512], date[17], auth[1024], canon[2048];
	T_ASSERT(s3__query(q, nq, query, sizeof(query)) >= 0);
	s3__amzdate(S3_TIME, date);
	s3_hdr h[8] = { { "host", "examplebucket.s3.amazonaws.com" }, { "x-amz-date", date },
		        { "x-amz-content-sha256", payload } };
	size_t nh = 3;
	for (size_t i = 0; i < nx; i++)
		h[nh++] = extra[i];
	s3_sig_in in = { method, uri, query, h, nh, payload, "us-east-1", "s3", S3_TIME, S3_KEY, S3_SECRET };
	T_OK(s3__sign(&in, auth, sizeof(auth), canon, sizeof(canon)));
	if (want_canon_hash) {
		char ch[65];
		s3__sha256_hex(canon, strlen(canon), ch);
		if (strcmp(ch, want_canon_hash))
			T_FAIL("%s: the canonical request's hash is %s, not the documented %s:\n%s", name, ch, want_canon_hash,
			       canon);
	}
	if (strcmp(sig_of(auth), want_sig))
		T_FAIL("%s: signature %s, documented %s; canonical request:\n%s", name, sig_of(auth), want_sig, canon);
	const char *pre = "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, ";
	T_ASSERT(!strncmp(auth, pre, strlen(pre)));
	printf("ok: S3 documentation example %s\n", name);
}

int main(void)
{
	/* --- AWS's SigV4 test suite --- */
	suite("get-vanilla", "GET", NULL, 0, NULL, 0, "", "host;x-amz-date",
	      "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	suite("post-vanilla", "POST", NULL, 0, NULL, 0, "", "host;x-amz-date",
	      "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
	s3_kv order[] = { { "Param2", "value2" }, { "Param1", "value1" } };
	suite("get-vanilla-query-order-key-case", "GET", order, 2, NULL, 0, "", "host;x-amz-date",
	      "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
	s3_kv one[] = { { "Param1", "value1" } };
	suite("get-vanilla-empty-query-key", "GET", one, 1, NULL, 0, "", "host;x-amz-date",
	      "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb");
	const char *unres = "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	s3_kv un[] = { { unres, unres } };
	suite("get-vanilla-query-unreserved", "GET", un, 1, NULL, 0, "", "host;x-amz-date",
	      "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197");
	s3_kv utf8[] = { { "\xe1\x88\xb4", "bar" } };
	suite("get-vanilla-utf8-query", "GET", utf8, 1, NULL, 0, "", "host;x-amz-date",
	      "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04");
	s3_hdr my[] = { { "my-header1", "value1" } };
	suite("post-header-key-sort", "POST", NULL, 0, my, 1, "", "host;my-header1;x-amz-date",
	      "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c");
	s3_hdr form[] = { { "content-type", "application/x-www-form-urlencoded" } };
	suite("post-x-www-form-urlencoded", "POST", NULL, 0, form, 1, "Param1=value1", "content-type;host;x-amz-date",
	      "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a");

	/* --- the S3 documentation's examples --- */
	s3_hdr range[] = { { "range", "bytes=0-9" } };
	s3doc("GET Object (Range: bytes=0-9)", "GET", "/test.txt", NULL, 0, range, 1, EMPTY_SHA,
	      "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
	      "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
	char welcome[65], uri[64];
	s3__sha256_hex("Welcome to Amazon S3.", 21, welcome);
	T_ASSERT(!strcmp(welcome, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"));
	/* The key "test$file.text": '$' is encoded in the canonical URI. */
	T_ASSERT(s3__uri_encode("/test$file.text", 15, 1, uri, sizeof(uri)) == 17 && !strcmp(uri, "/test%24file.text"));
	s3_hdr put[] = { { "date", "Fri, 24 May 2013 00:00:00 GMT" }, { "x-amz-storage-class", "REDUCED_REDUNDANCY" } };
	s3doc("PUT Object", "PUT", uri, NULL, 0, put, 2, welcome,
	      "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd", NULL);
	s3_kv lc[] = { { "lifecycle", "" } };
	s3doc("GET Bucket lifecycle", "GET", "/", lc, 1, NULL, 0, EMPTY_SHA,
	      "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543", NULL);
	s3_kv lst[] = { { "prefix", "J" }, { "max-keys", "2" } }; /* out of order on purpose */
	s3doc("GET Bucket (List Objects)", "GET", "/", lst, 2, NULL, 0, EMPTY_SHA,
	      "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7", NULL);

	/* --- encodings --- */
	char out[256];
	T_ASSERT(s3__uri_encode("a b+c/é~_.-*", strlen("a b+c/é~_.-*"), 1, out, sizeof(out)) > 0);
	T_ASSERT(!strcmp(out, "a%20b%2Bc/%C3%A9~_.-%2A"));
	T_ASSERT(s3__uri_encode("a/b", 3, 0, out, sizeof(out)) > 0 && !strcmp(out, "a%2Fb"));
	T_ASSERT(s3__uri_encode("abc", 3, 0, out, 3) == -1); /* no room for the NUL */
	T_ASSERT(s3__uri_encode("abc", 3, 0, out, 4) == 3);
	s3_kv q[] = { { "uploadId", "x+y/z=" }, { "partNumber", "10" }, { "uploads", NULL }, { "b", "2" }, { "b", "1" } };
	T_ASSERT(s3__query(q, 5, out, sizeof(out)) > 0);
	T_ASSERT(!strcmp(out, "b=1&b=2&partNumber=10&uploadId=x%2By%2Fz%3D&uploads="));
	T_ASSERT(s3__query(q, 5, out, 10) == -1 && out[0] == 0);
	T_ASSERT(s3__query(q, 0, out, sizeof(out)) == 0 && out[0] == 0);

	/* Header values: spaces trimmed and runs of them made one. */
	char auth1[1024], auth2[1024];
	s3_hdr h1[] = { { "host", "h" }, { "x-a", "  a   b  " } }, h2[] = { { "x-a", "a b" }, { "host", "h" } };
	s3_sig_in in1 = { "GET", "/", "", h1, 2, EMPTY_SHA, "r", "s3", S3_TIME, "K", "S" };
	s3_sig_in in2 = { "GET", "/", "", h2, 2, EMPTY_SHA, "r", "s3", S3_TIME, "K", "S" };
	T_OK(s3__sign(&in1, auth1, sizeof(auth1), NULL, 0));
	T_OK(s3__sign(&in2, auth2, sizeof(auth2), NULL, 0));
	T_ASSERT(!strcmp(auth1, auth2) && strstr(auth1, "SignedHeaders=host;x-a,"));
	in2.secret = "T";
	T_OK(s3__sign(&in2, auth2, sizeof(auth2), NULL, 0));
	T_ASSERT(strcmp(auth1, auth2) != 0 && !strstr(auth2, "T,") && !strstr(auth2, "=T"));
	T_ASSERT(s3__sign(&in1, auth1, 40, NULL, 0) == -ENOSPC);

	/* --- digests: RFC 1321's and FIPS 180-2's "abc", both at once --- */
	char md5[25], sha[65];
	s3__md5_b64("abc", 3, md5);
	T_ASSERT(!strcmp(md5, "kAFQmDzST7DWlj99KOF/cg==")); /* 900150983cd24fb0d6963f7d28e17f72 */
	s3__sha256_hex("abc", 3, sha);
	T_ASSERT(!strcmp(sha, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
	size_t n = (5u << 20) + 7;
	char *big = malloc(n), md5b[25], shab[65];
	T_ASSERT(big);
	t_fill(big, n, 7);
	s3__digests(big, n, shab, md5b, NULL, NULL);
	s3__md5_b64(big, n, md5);
	s3__sha256_hex(big, n, sha);
	T_ASSERT(!strcmp(md5, md5b) && !strcmp(sha, shab));
	free(big);
	printf("PASS\n");
	return 0;
}
