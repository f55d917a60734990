/* The S3 client's parsers and settings, no server needed: S3's XML
 * answers (errors, list pages, delete results; entities refused, fields
 * bounded), the AWS credentials/config files, the metadata service's
 * credentials, s3:// URLs and the CKPT_S3_* environment. */
#include "ckpt.h"
#include "helpers.h"
#include "s3_int.h"

typedef struct recs {
	int n;
	char keys[8][64];
	uint64_t sizes[8];
	char extra[8][64];
	int stop_at;
} recs;

static int rec(void *arg, const char *key, uint64_t size, const char *extra)
{
	recs *r = arg;
	if (r->n < 8) {
		snprintf(r->keys[r->n], 64, "%s", key);
		r->sizes[r->n] = size;
		snprintf(r->extra[r->n], 64, "%s", extra);
	}
	r->n++;
	return r->stop_at && r->n == r->stop_at ? 42 : 0;
}

static void xml(void)
{
	const char *err = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>RequestTimeTooSkewed</Code>"
	                  "<Message>The difference between the request time and the current time is too large.</Message>"
	                  "<RequestTime>20260101T000000Z</RequestTime><ServerTime>2026-01-01T00:20:00Z</ServerTime>"
	                  "<MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds></Error>";
	s3_xml_err e;
	T_OK(s3__xml_error(err, strlen(err), &e));
	T_ASSERT(!strcmp(e.code, "RequestTimeTooSkewed") && !strncmp(e.message, "The difference", 14));
	T_ASSERT(!strcmp(e.server_time, "2026-01-01T00:20:00Z"));
	T_ASSERT(s3__rfc3339(e.server_time) == 1767226800);
	T_ASSERT(s3__xml_error("<ListBucketResult/>", 19, &e) == -1);
	T_ASSERT(s3__xml_error("not xml", 7, &e) == -1);
	T_ASSERT(s3__xml_error(NULL, 0, &e) == -1);

	const char *page = "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	                   "<Name>b</Name><Prefix>p/</Prefix><KeyCount>3</KeyCount><MaxKeys>3</MaxKeys>"
	                   "<IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM="
	                   "</NextContinuationToken><Contents><Key>p/a&amp;b</Key><Size>10</Size><ETag>\"x\"</ETag>"
	                   "<Owner><ID>o</ID></Owner></Contents><Contents><Key>p/c</Key><Size>18446744073709551615</Size>"
	                   "</Contents><CommonPrefixes><Prefix>p/d/</Prefix></CommonPrefixes></ListBucketResult>";
	recs r = { 0 };
	s3_xml_page pg;
	char msg[S3_ERRCAP];
	if (s3__xml_list(page, strlen(page), S3_LIST_OBJECTS, rec, &r, &pg, msg, sizeof(msg)))
		T_FAIL("list page: %s", msg);
	T_ASSERT(r.n == 3 && pg.truncated && pg.records == 3);
	T_ASSERT(!strcmp(pg.next, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM="));
	T_ASSERT(!strcmp(r.keys[0], "p/a&b") && r.sizes[0] == 10);
	T_ASSERT(!strcmp(r.keys[1], "p/c") && r.sizes[1] == UINT64_MAX);
	T_ASSERT(!strcmp(r.keys[2], "p/d/") && r.sizes[2] == 0);
	/* the callback stops the walk with its value */
	recs stop = { .stop_at = 2 };
	T_ASSERT(s3__xml_list(page, strlen(page), S3_LIST_OBJECTS, rec, &stop, &pg, msg, sizeof(msg)) == 42 && stop.n == 2);
	/* hostile pages */
	const char *bad[] = {
		"<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>",
		"<ListBucketResult><Contents><Key>k</Key><Size>18446744073709551616</Size></Contents></ListBucketResult>",
		"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
		"<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;\">]>"
		"<ListBucketResult><Contents><Key>&b;</Key><Size>1</Size></Contents></ListBucketResult>",
		"<Error><Code>x</Code></Error>",
		"<ListBucketResult><Contents><Key>unclosed",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		recs z = { 0 };
		msg[0] = 0;
		T_ASSERT(s3__xml_list(bad[i], strlen(bad[i]), S3_LIST_OBJECTS, rec, &z, &pg, msg, sizeof(msg)) == -EIO);
		T_ASSERT(msg[0]);
	}
	/* a field longer than any key, and nesting without end */
	size_t n = 4 * S3_XML_VAL;
	char *big = malloc(n + 200);
	T_ASSERT(big);
	int o = sprintf(big, "<ListBucketResult><Contents><Key>");
	memset(big + o, 'k', 2 * S3_XML_VAL);
	sprintf(big + o + 2 * S3_XML_VAL, "</Key></Contents></ListBucketResult>");
	T_ASSERT(s3__xml_list(big, strlen(big), S3_LIST_OBJECTS, rec, &r, &pg, msg, sizeof(msg)) == -EIO);
	T_ASSERT(strstr(msg, "too long"));
	o = sprintf(big, "<ListBucketResult>");
	for (int i = 0; i < 40; i++)
		o += sprintf(big + o, "<a>");
	T_ASSERT(s3__xml_list(big, (size_t)o, S3_LIST_OBJECTS, rec, &r, &pg, msg, sizeof(msg)) == -EIO);
	T_ASSERT(strstr(msg, "deep"));
	free(big);

	const char *up = "<ListMultipartUploadsResult><Bucket>b</Bucket><IsTruncated>true</IsTruncated>"
	                 "<NextKeyMarker>k2</NextKeyMarker><NextUploadIdMarker>u2</NextUploadIdMarker>"
	                 "<Upload><Key>k1</Key><UploadId>u1</UploadId></Upload><Upload><Key>k2</Key><UploadId>u2</UploadId>"
	                 "</Upload></ListMultipartUploadsResult>";
	recs u = { 0 };
	T_OK(s3__xml_list(up, strlen(up), S3_LIST_UPLOADS, rec, &u, &pg, msg, sizeof(msg)));
	T_ASSERT(u.n == 2 && !strcmp(u.keys[1], "k2") && !strcmp(u.extra[1], "u2") && pg.truncated);
	T_ASSERT(!strcmp(pg.next, "k2") && !strcmp(pg.next_upload, "u2"));

	const char *del = "<DeleteResult><Deleted><Key>a</Key></Deleted><Error><Key>b</Key><Code>AccessDenied</Code>"
	                  "<Message>no</Message></Error></DeleteResult>";
	recs d = { 0 };
	T_OK(s3__xml_list(del, strlen(del), S3_DELETE_RESULT, rec, &d, &pg, msg, sizeof(msg)));
	T_ASSERT(d.n == 1 && !strcmp(d.keys[0], "b") && !strcmp(d.extra[0], "AccessDenied"));

	char id[64];
	const char *init = "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>2~abc</UploadId>"
	                   "</InitiateMultipartUploadResult>";
	T_OK(s3__xml_field(init, strlen(init), "InitiateMultipartUploadResult", "UploadId", id, sizeof(id)));
	T_ASSERT(!strcmp(id, "2~abc"));
	T_ASSERT(s3__xml_field(init, strlen(init), "InitiateMultipartUploadResult", "UploadId", id, 3) == -EIO);
	T_ASSERT(s3__xml_field(err, strlen(err), "InitiateMultipartUploadResult", "UploadId", id, sizeof(id)) == -EIO);
	printf("ok: XML answers\n");
}

static void ini(void)
{
	const char *creds = "# comment\n[default]\naws_access_key_id = AKDEF\naws_secret_access_key=SKDEF\n\n"
	                    "[work]\r\n  aws_access_key_id=  AKWORK  \r\naws_access_key_id = AKWORK2\n"
	                    "aws_secret_access_key = SK/WORK+2=\n; other\n[empty]\n";
	char v[64];
	int seen = 0;
	T_ASSERT(s3__ini_get(creds, strlen(creds), "default", "aws_access_key_id", v, sizeof(v), &seen) == 1);
	T_ASSERT(!strcmp(v, "AKDEF") && seen);
	/* indented: a nested block's line, not a key of the section */
	T_ASSERT(s3__ini_get(creds, strlen(creds), "work", "aws_access_key_id", v, sizeof(v), NULL) == 1);
	T_ASSERT(!strcmp(v, "AKWORK2"));
	T_ASSERT(s3__ini_get(creds, strlen(creds), "work", "aws_secret_access_key", v, sizeof(v), NULL) == 1);
	T_ASSERT(!strcmp(v, "SK/WORK+2="));
	seen = 0;
	T_ASSERT(s3__ini_get(creds, strlen(creds), "empty", "aws_access_key_id", v, sizeof(v), &seen) == 0 && seen);
	seen = 0;
	T_ASSERT(s3__ini_get(creds, strlen(creds), "none", "aws_access_key_id", v, sizeof(v), &seen) == 0 && !seen);
	T_ASSERT(s3__ini_get(creds, strlen(creds), "work", "aws_secret_access_key", v, 4, NULL) == -1);
	const char *cfg = "[profile   work]\nregion = eu-west-3\ns3 =\n  addressing_style = path\n[default]\nregion=us-west-2";
	T_ASSERT(s3__ini_get(cfg, strlen(cfg), "profile work", "region", v, sizeof(v), NULL) == 1 && !strcmp(v, "eu-west-3"));
	T_ASSERT(s3__ini_get(cfg, strlen(cfg), "profile work", "addressing_style", v, sizeof(v), NULL) == 0);
	T_ASSERT(s3__ini_get(cfg, strlen(cfg), "default", "region", v, sizeof(v), NULL) == 1 && !strcmp(v, "us-west-2"));
	/* a section without its ']' and bytes that are no text at all */
	const char *junk = "[work\naws_access_key_id=X\n\0\xff[work]\n=\n==\nk";
	T_ASSERT(s3__ini_get(junk, 40, "work", "aws_access_key_id", v, sizeof(v), NULL) == 0);
	/* a control byte inside a value (here a NUL): refused, not cut short */
	const char nul[] = "[work]\naws_secret_access_key = SK\tX\0tail\n";
	T_ASSERT(s3__ini_get(nul, sizeof(nul) - 1, "work", "aws_secret_access_key", v, sizeof(v), NULL) == -1);
	printf("ok: credentials and config files\n");
}

static void imds(void)
{
	s3_creds c;
	char msg[S3_ERRCAP];
	const char *ok = "{\"Code\":\"Success\",\"LastUpdated\":\"2026-12-02T18:00:00Z\",\"Type\":\"AWS-HMAC\","
	                 "\"AccessKeyId\":\"ASIAEXAMPLE\",\"SecretAccessKey\":\"s3cr3t/x+y\",\"Token\":\"tok==\","
	                 "\"Expiration\":\"2026-12-02T19:00:00Z\"}";
	memset(&c, 0, sizeof(c));
	T_OK(s3__imds_parse(ok, strlen(ok), &c, msg, sizeof(msg)));
	T_ASSERT(!strcmp(c.access, "ASIAEXAMPLE") && !strcmp(c.secret, "s3cr3t/x+y") && !strcmp(c.token, "tok=="));
	T_ASSERT(c.expires == s3__rfc3339("2026-12-02T19:00:00Z") && c.expires > 0);
	const char *bad[] = {
		"{\"Code\":\"Failure\",\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"s3cr3t\"}",
		"{\"AccessKeyId\":\"A\"}",
		"{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"s3cr3t\",\"Expiration\":\"tomorrow\"}",
		"{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"s3 cr3t\"}",
		"{\"AccessKeyId\":\"A\",\"SecretAccessKey\":7}",
		"[1,2]",
		"{\"AccessKeyId\":\"A\",\"AccessKeyId\":\"B\",\"SecretAccessKey\":\"s3cr3t\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		msg[0] = 0;
		T_ASSERT(s3__imds_parse(bad[i], strlen(bad[i]), &c, msg, sizeof(msg)) == -EINVAL);
		T_ASSERT(msg[0] && !strstr(msg, "s3cr3t"));
	}
	T_ASSERT(s3__rfc3339("2026-12-02T19:00:00.123Z") == s3__rfc3339("2026-12-02T19:00:00Z"));
	T_ASSERT(s3__rfc3339("2026-13-02T19:00:00Z") == -1 && s3__rfc3339("2026-12-02T19:00:00+02:00") == -1);
	printf("ok: instance metadata credentials\n");
}

static void urls(void)
{
	char b[64], p[128];
	T_OK(ckpt_s3_url_parse("s3://my-bucket/a/b", b, sizeof(b), p, sizeof(p)));
	T_ASSERT(!strcmp(b, "my-bucket") && !strcmp(p, "a/b/"));
	T_OK(ckpt_s3_url_parse("s3://my.bucket.1", b, sizeof(b), p, sizeof(p)));
	T_ASSERT(!strcmp(b, "my.bucket.1") && !strcmp(p, ""));
	T_OK(ckpt_s3_url_parse("s3://abc/", b, sizeof(b), p, sizeof(p)));
	T_ASSERT(!strcmp(p, ""));
	T_OK(ckpt_s3_url_parse("s3://abc/x/", b, sizeof(b), p, sizeof(p)));
	T_ASSERT(!strcmp(p, "x/"));
	const char *bad[] = { "s3://ab/x", "s3://Abc/x", "s3://-abc", "s3://a..b", "s3://192.168.1.1", "http://abc/x",
		              "s3://abc//x", "s3://abc/../x", "s3://abc/x/./y", "s3://abc/x\n", "s3://abc/x\\y",
		              "s3://abc/x/..", "s3://ab_c", "s3://abc-.d", NULL };
	for (int i = 0; bad[i]; i++)
		if (ckpt_s3_url_parse(bad[i], b, sizeof(b), p, sizeof(p)) != -EINVAL)
			T_FAIL("%s was taken", bad[i]);
	T_ASSERT(ckpt_s3_url_parse("s3://abcdef/x", b, 4, p, sizeof(p)) == -EINVAL);
	T_ASSERT(ckpt_s3_url_parse("s3://abc/xyz", b, sizeof(b), p, 4) == -EINVAL);
	printf("ok: s3:// URLs\n");
}

static void env(void)
{
	ckpt_s3_cfg c;
	char msg[256];
	memset(&c, 0, sizeof(c));
	setenv("CKPT_S3_ENDPOINT", "http://127.0.0.1:7480", 1);
	setenv("CKPT_S3_REGION", "eu-west-3", 1);
	setenv("CKPT_S3_ADDRESSING", "virtual", 1);
	setenv("CKPT_S3_PART_BYTES", "8M", 1);
	setenv("CKPT_S3_PARTS_IN_FLIGHT", "4", 1);
	setenv("CKPT_S3_TIMEOUT", "1500ms", 1);
	setenv("CKPT_S3_RETRY_TOTAL", "2m", 1);
	T_OK(ckpt_s3_cfg_env(&c, msg, sizeof(msg)));
	T_ASSERT(c.content_md5 == 0); /* off unless asked for */
	setenv("CKPT_S3_CONTENT_MD5", "on", 1);
	T_OK(ckpt_s3_cfg_env(&c, msg, sizeof(msg)));
	T_ASSERT(c.content_md5 == 1);
	setenv("CKPT_S3_CONTENT_MD5", "off", 1);
	T_OK(ckpt_s3_cfg_env(&c, msg, sizeof(msg)));
	T_ASSERT(c.content_md5 == 0);
	T_ASSERT(c.size == sizeof(c) && !strcmp(c.endpoint, "http://127.0.0.1:7480") && !strcmp(c.region, "eu-west-3"));
	T_ASSERT(c.addressing == 2 && c.part_bytes == 8u << 20 && c.parts_in_flight == 4);
	T_ASSERT(c.timeout_ms == 1500 && c.retry_total_ms == 120000);
	const char *bad[][2] = { { "CKPT_S3_ENDPOINT", "ftp://x" }, { "CKPT_S3_REGION", "eu west" },
		                 { "CKPT_S3_ADDRESSING", "vhost" }, { "CKPT_S3_PART_BYTES", "1K" },
		                 { "CKPT_S3_PART_BYTES", "6G" }, { "CKPT_S3_PARTS_IN_FLIGHT", "0" },
		                 { "CKPT_S3_PARTS_IN_FLIGHT", "1000" }, { "CKPT_S3_TIMEOUT", "soon" },
		                 { "CKPT_S3_RETRY_TOTAL", "0" }, { "CKPT_S3_ENDPOINT", "http://a b" },
		                 { "CKPT_S3_CONTENT_MD5", "yes" } };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char old[64];
		snprintf(old, sizeof(old), "%s", getenv(bad[i][0]));
		setenv(bad[i][0], bad[i][1], 1);
		msg[0] = 0;
		T_ASSERT(ckpt_s3_cfg_env(&c, msg, sizeof(msg)) == -EINVAL);
		T_ASSERT(strstr(msg, bad[i][0]));
		setenv(bad[i][0], old, 1);
	}
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ckpt_s3_env_help(f);
	fclose(f);
	T_ASSERT(strstr(text, "CKPT_S3_ENDPOINT") && strstr(text, "CKPT_S3_PARTS_IN_FLIGHT"));
	free(text);
	printf("ok: CKPT_S3_* settings\n");
}

int main(void)
{
	xml();
	ini();
	imds();
	urls();
	env();
	printf("PASS\n");
	return 0;
}
