/* The S3 client: open and close, and the calls of a request or a few:
 * PUT, HEAD, DeleteObjects, ListObjectsV2, ListMultipartUploads and
 * AbortMultipartUpload. Multipart uploads and ranged GETs are in
 * s3_upload.c; the requests themselves in s3_http.c. */
#include "s3_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The endpoint's scheme and host[:port] (a default port left out, as
 * curl sends Host). */
static int parse_endpoint(ckpt_s3 *s3, const char *ep, char *err, size_t errcap)
{
	const char *h;
	if (!strncmp(ep, "http://", 7)) {
		snprintf(s3->scheme, sizeof(s3->scheme), "http");
		h = ep + 7;
	} else if (!strncmp(ep, "https://", 8)) {
		snprintf(s3->scheme, sizeof(s3->scheme), "https");
		h = ep + 8;
	} else {
		s3__errf(err, errcap, "S3 endpoint %.200s: wants http:// or https://", ep);
		return -EINVAL;
	}
	size_t n = strcspn(h, "/?#");
	if (!n || n >= sizeof(s3->host) - 70 || (h[n] && strcmp(h + n, "/"))) {
		s3__errf(err, errcap, "S3 endpoint %.200s: wants scheme://host[:port] and no path", ep);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr(".-:[]_", c))) {
			s3__errf(err, errcap, "S3 endpoint %.200s: a host name has no '%c'", ep, c);
			return -EINVAL;
		}
	}
	memcpy(s3->host, h, n);
	s3->host[n] = 0;
	size_t hl = strlen(s3->host);
	const char *def = !strcmp(s3->scheme, "http") ? ":80" : ":443";
	if (hl > strlen(def) && !strcmp(s3->host + hl - strlen(def), def))
		s3->host[hl - strlen(def)] = 0;
	hl = strlen(s3->host);
	char *colon = strrchr(s3->host, ':');
	size_t hostonly = colon && !strchr(colon, ']') ? (size_t)(colon - s3->host) : hl;
	s3->aws = hostonly > 14 && !strncasecmp(s3->host + hostonly - 14, ".amazonaws.com", 14);
	return 0;
}

int ckpt_s3_open(ckpt_s3 **out, const ckpt_s3_cfg *cfg, char *err, size_t errcap)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!cfg || cfg->size < offsetof(ckpt_s3_cfg, list_page)) {
		s3__errf(err, errcap, "S3 settings: cfg.size is not set (sizeof(ckpt_s3_cfg))");
		return -EINVAL;
	}
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		s3__errf(err, errcap, "libcurl did not start: %s", curl_easy_strerror(curl_init_rc));
		return -EIO;
	}
	ckpt_s3 *s3 = calloc(1, sizeof(*s3));
	if (!s3) {
		s3__errf(err, errcap, "out of memory");
		return -ENOMEM;
	}
	memcpy(&s3->cfg, cfg, cfg->size < sizeof(*cfg) ? cfg->size : sizeof(*cfg));
	ckpt_s3_cfg *c = &s3->cfg;
	c->size = sizeof(*c);
	pthread_mutex_init(&s3->lock, NULL);
	int rc = -EINVAL;
	if (!c->part_bytes)
		c->part_bytes = 64u << 20;
	if (!c->parts_in_flight)
		c->parts_in_flight = 8;
	if (!c->timeout_ms)
		c->timeout_ms = 30000;
	if (!c->retry_total_ms)
		c->retry_total_ms = 120000;
	if (!c->list_page)
		c->list_page = 1000;
	if (!c->delete_batch)
		c->delete_batch = 1000;
	if (c->part_bytes < (64u << 10) || c->part_bytes > (5ull << 30)) {
		s3__errf(err, errcap, "S3 part size %llu: wants 64 KiB to 5 GiB (CKPT_S3_PART_BYTES)",
		         (unsigned long long)c->part_bytes);
		goto fail;
	}
	if (c->parts_in_flight > 256 || c->list_page > 1000 || c->delete_batch > 1000 || c->addressing < 0 ||
	    c->addressing > 2) {
		s3__errf(err, errcap, "S3 settings: parts_in_flight 1..256, list_page and delete_batch 1..1000, addressing 0..2");
		goto fail;
	}
	const char *reg = c->region;
	if (!reg || !*reg)
		reg = getenv("AWS_REGION");
	if (!reg || !*reg)
		reg = getenv("AWS_DEFAULT_REGION");
	if (reg && *reg) {
		if (strlen(reg) >= sizeof(s3->region)) {
			s3__errf(err, errcap, "S3 region is too long");
			goto fail;
		}
		snprintf(s3->region, sizeof(s3->region), "%s", reg);
	}
	const char *imds = c->imds_endpoint;
	if (!imds || !*imds)
		imds = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	if (!imds || !*imds)
		imds = "http://169.254.169.254";
	if (strlen(imds) >= sizeof(s3->imds) || (strncmp(imds, "http://", 7) && strncmp(imds, "https://", 8))) {
		s3__errf(err, errcap, "instance metadata endpoint %.100s: wants an http:// URL", imds);
		goto fail;
	}
	snprintf(s3->imds, sizeof(s3->imds), "%s", imds);
	size_t il = strlen(s3->imds);
	while (il > 8 && s3->imds[il - 1] == '/')
		s3->imds[--il] = 0;
	s3->rng = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)s3;
	if (!s3->rng)
		s3->rng = 1;

	if ((rc = s3__creds_init(s3, err, errcap)) < 0)
		goto fail;
	if (!s3->region[0])
		snprintf(s3->region, sizeof(s3->region), "us-east-1");
	for (const char *p = s3->region; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || (*p >= 'A' && *p <= 'Z'))) {
			s3__errf(err, errcap, "S3 region %.64s: wants letters, digits and '-'", s3->region);
			rc = -EINVAL;
			goto fail;
		}
	char ep[400];
	if (c->endpoint && *c->endpoint)
		snprintf(ep, sizeof(ep), "%s", c->endpoint);
	else
		snprintf(ep, sizeof(ep), "https://s3.%s.amazonaws.com", s3->region);
	if ((rc = parse_endpoint(s3, ep, err, errcap)) < 0)
		goto fail;
	s3->vhost = c->addressing == 2 || (c->addressing == 0 && s3->aws);
	/* Borrowed strings are not kept. */
	c->endpoint = c->region = c->profile = c->imds_endpoint = NULL;
	*out = s3;
	return 0;
fail:
	memset(&s3->creds, 0, sizeof(s3->creds));
	pthread_mutex_destroy(&s3->lock);
	free(s3);
	return rc;
}

void ckpt_s3_cancel(ckpt_s3 *s3, int on)
{
	if (s3)
		atomic_store(&s3->cancel, on ? 1 : 0);
}

void ckpt_s3_close(ckpt_s3 *s3)
{
	if (!s3)
		return;
	ckpt_s3_trim(s3);
	for (int i = 0; i < s3->npool; i++)
		curl_multi_cleanup(s3->pool[i]);
	memset(&s3->creds, 0, sizeof(s3->creds));
	memset(s3->imds_token, 0, sizeof(s3->imds_token));
	pthread_mutex_destroy(&s3->lock);
	free(s3);
}

void ckpt_s3_stats_get(ckpt_s3 *s3, ckpt_s3_stats *st)
{
	if (!s3 || !st)
		return;
	pthread_mutex_lock(&s3->lock);
	*st = s3->st;
	st->part_bytes_held = s3->part_bytes_now;
	pthread_mutex_unlock(&s3->lock);
}

/* A bucket name and a key S3 takes: 0 or -EINVAL with a message. key NULL:
 * none. */
int s3__check(const char *bucket, const char *key, char *err, size_t errcap)
{
	char b[80], p[8];
	char url[80];
	if (!bucket || strlen(bucket) > 63) {
		s3__errf(err, errcap, "S3: no bucket, or a bucket name over 63 bytes");
		return -EINVAL;
	}
	snprintf(url, sizeof(url), "s3://%s", bucket);
	if (ckpt_s3_url_parse(url, b, sizeof(b), p, sizeof(p)) < 0) {
		s3__errf(err, errcap, "S3: %.63s is not a bucket name (3-63 of a-z 0-9 . -)", bucket);
		return -EINVAL;
	}
	if (key) {
		size_t n = strlen(key);
		if (!n || n > 1024) {
			s3__errf(err, errcap, "S3: a key is 1 to 1024 bytes");
			return -EINVAL;
		}
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f) {
				s3__errf(err, errcap, "S3: key %.100s... has a control byte", key);
				return -EINVAL;
			}
	}
	return 0;
}

static void req_init(s3_req *r, const char *method, const char *bucket, const char *key)
{
	memset(r, 0, sizeof(*r));
	r->method = method;
	r->bucket = bucket;
	r->key = key;
}

int ckpt_s3_put(ckpt_s3 *s3, const char *bucket, const char *key, const void *data, size_t len, uint32_t flags,
                char *err, size_t errcap)
{
	int rc = s3__check(bucket, key, err, errcap);
	if (rc < 0)
		return rc;
	if (!data && len) {
		s3__errf(err, errcap, "S3 PUT %s/%s: no data", bucket, key);
		return -EINVAL;
	}
	s3_req *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	req_init(r, "PUT", bucket, key);
	r->body = data ? data : "";
	r->body_len = len;
	r->flags = flags & CKPT_S3_IF_NONE_MATCH ? S3_CONDITIONAL : 0;
	r->content_type = "application/octet-stream";
	s3__digests(r->body, len, r->sha, s3->cfg.content_md5 || (flags & CKPT_S3_IF_NONE_MATCH) ? r->md5 : NULL,
	            NULL, NULL);
	s3__do(s3, r);
	rc = s3__req_result(r, err, errcap);
	/* 412: the key exists. Holding these very bytes it is ours (a try
	 * whose answer was lost, retried by us or by curl on a dead reused
	 * connection) or the same content: no conflict. */
	char hex[33], etag[130];
	if (rc == -EEXIST && s3__md5_b64_hex(r->md5, hex) == 0) {
		s3__req_free(r);
		req_init(r, "HEAD", bucket, key);
		if (s3__do(s3, r) == 0) {
			snprintf(etag, sizeof(etag), "%s", r->etag);
			size_t el = strlen(etag);
			if (el == 34 && etag[0] == '"' && etag[33] == '"' && !strncasecmp(etag + 1, hex, 32) &&
			    r->have_clen && r->clen == len)
				rc = 0;
		}
	}
	s3__req_free(r);
	free(r);
	return rc;
}

int ckpt_s3_head(ckpt_s3 *s3, const char *bucket, const char *key, uint64_t *size, char *err, size_t errcap)
{
	int rc = s3__check(bucket, key, err, errcap);
	if (rc < 0)
		return rc;
	s3_req *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	req_init(r, "HEAD", bucket, key);
	s3__do(s3, r);
	if (r->rc == 0) {
		if (!r->have_clen) {
			s3__errf(r->err, sizeof(r->err), "HEAD %s/%s: no Content-Length in the answer", bucket, key);
			r->rc = -EIO;
		} else if (size)
			*size = r->clen;
	} else if (r->status == 403 || r->status == 400 || r->status == 404) {
		/* A HEAD's answer has no body to say why: a one-byte GET does. */
		s3_req *g = calloc(1, sizeof(*g));
		if (g) {
			req_init(g, "GET", bucket, key);
			snprintf(g->range, sizeof(g->range), "bytes=0-0");
			char one[1];
			g->dst = one;
			g->dst_cap = 1;
			s3__do(s3, g);
			if (g->rc < 0 && g->status == r->status) {
				r->rc = g->rc;
				snprintf(r->err, sizeof(r->err), "HEAD%s", g->err + 3);
			}
			s3__req_free(g);
			free(g);
		}
	}
	rc = s3__req_result(r, err, errcap);
	s3__req_free(r);
	free(r);
	return rc;
}

/* Appends s, XML-escaped. */
static size_t xml_put(char *out, size_t o, const char *s)
{
	for (; *s; s++) {
		const char *e = NULL;
		switch (*s) {
		case '&': e = "&amp;"; break;
		case '<': e = "&lt;"; break;
		case '>': e = "&gt;"; break;
		case '"': e = "&quot;"; break;
		case '\'': e = "&apos;"; break;
		}
		if (e) {
			memcpy(out + o, e, strlen(e));
			o += strlen(e);
		} else
			out[o++] = *s;
	}
	return o;
}

typedef struct del_ctx {
	char first[S3_ERRCAP];
	size_t failed;
} del_ctx;

static int del_err(void *arg, const char *key, uint64_t size, const char *code)
{
	(void)size;
	del_ctx *d = arg;
	if (!strcmp(code, "NoSuchKey"))
		return 0;
	if (!d->failed++)
		snprintf(d->first, sizeof(d->first), "%.200s (%.60s)", key, code);
	return 0;
}

int ckpt_s3_delete(ckpt_s3 *s3, const char *bucket, const char *const *keys, size_t n, char *err, size_t errcap)
{
	int rc = s3__check(bucket, NULL, err, errcap);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		if ((rc = s3__check(bucket, keys[i], err, errcap)) < 0)
			return rc;
	size_t batch = s3->cfg.delete_batch;
	/* Each key escaped at most 6 bytes a byte, in <Object><Key>...</Key></Object>. */
	char *body = malloc(batch * (1024 * 6 + 40) + 128);
	s3_req *r = calloc(1, sizeof(*r));
	if (!body || !r) {
		free(body);
		free(r);
		return -ENOMEM;
	}
	for (size_t at = 0; at < n && rc == 0; at += batch) {
		size_t k = n - at < batch ? n - at : batch, o = 0;
		o += (size_t)sprintf(body, "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Delete><Quiet>true</Quiet>");
		for (size_t i = 0; i < k; i++) {
			o += (size_t)sprintf(body + o, "<Object><Key>");
			o = xml_put(body, o, keys[at + i]);
			o += (size_t)sprintf(body + o, "</Key></Object>");
		}
		o += (size_t)sprintf(body + o, "</Delete>");
		req_init(r, "POST", bucket, NULL);
		s3_kv q[] = { { "delete", "" } };
		s3__query(q, 1, r->query, sizeof(r->query));
		r->body = body;
		r->body_len = o;
		r->content_type = "application/xml";
		r->resp_max = 8u << 20;
		s3__digests(body, o, r->sha, r->md5, NULL, NULL);
		s3__do(s3, r);
		rc = s3__req_result(r, err, errcap);
		if (rc == 0) {
			del_ctx d = { "", 0 };
			s3_xml_page pg;
			char xerr[S3_ERRCAP];
			rc = s3__xml_list(r->resp, r->resp_len, S3_DELETE_RESULT, del_err, &d, &pg, xerr, sizeof(xerr));
			if (rc < 0)
				s3__errf(err, errcap, "DeleteObjects %s: %s", bucket, xerr);
			else if (d.failed) {
				s3__errf(err, errcap, "DeleteObjects %s: %zu of %zu keys not deleted, the first %s", bucket,
				         d.failed, k, d.first);
				rc = -EIO;
			}
		}
		s3__req_free(r);
	}
	free(body);
	free(r);
	return rc;
}

typedef struct list_ctx {
	ckpt_s3_list_fn fn;
	ckpt_s3_upload_fn ufn;
	void *arg;
} list_ctx;

static int list_rec(void *arg, const char *key, uint64_t size, const char *extra)
{
	list_ctx *l = arg;
	if (l->ufn)
		return l->ufn(l->arg, key, extra);
	return l->fn(l->arg, key, size);
}

/* Pages of ListObjectsV2 (uploads 0) or ListMultipartUploads (1). */
static int list_pages(ckpt_s3 *s3, const char *bucket, const char *prefix, const char *delimiter, int uploads,
                      list_ctx *l, char *err, size_t errcap)
{
	int rc = s3__check(bucket, NULL, err, errcap);
	if (rc < 0)
		return rc;
	if (delimiter && strcmp(delimiter, "/")) {
		s3__errf(err, errcap, "S3 list: the delimiter is \"/\" or none");
		return -EINVAL;
	}
	if (prefix && strlen(prefix) > 1024) {
		s3__errf(err, errcap, "S3 list: a prefix is at most 1024 bytes");
		return -EINVAL;
	}
	s3_req *r = calloc(1, sizeof(*r));
	s3_xml_page *pg = calloc(1, sizeof(*pg));
	char *tok = calloc(2, S3_XML_VAL);
	if (!r || !pg || !tok) {
		free(r);
		free(pg);
		free(tok);
		return -ENOMEM;
	}
	char *utok = tok + S3_XML_VAL, page[16];
	snprintf(page, sizeof(page), "%u", s3->cfg.list_page);
	for (int first = 1;; first = 0) {
		req_init(r, "GET", bucket, NULL);
		s3_kv q[6];
		size_t nq = 0;
		if (uploads) {
			q[nq++] = (s3_kv){ "uploads", "" };
			q[nq++] = (s3_kv){ "max-uploads", page };
			if (!first) {
				q[nq++] = (s3_kv){ "key-marker", tok };
				q[nq++] = (s3_kv){ "upload-id-marker", utok };
			}
		} else {
			q[nq++] = (s3_kv){ "list-type", "2" };
			q[nq++] = (s3_kv){ "max-keys", page };
			if (delimiter)
				q[nq++] = (s3_kv){ "delimiter", delimiter };
			if (!first)
				q[nq++] = (s3_kv){ "continuation-token", tok };
		}
		q[nq++] = (s3_kv){ "prefix", prefix ? prefix : "" };
		if (s3__query(q, nq, r->query, sizeof(r->query)) < 0) {
			s3__errf(err, errcap, "S3 list %s: the query is too long", bucket);
			rc = -EINVAL;
			break;
		}
		r->resp_max = 32u << 20;
		pthread_mutex_lock(&s3->lock);
		s3->st.lists++;
		pthread_mutex_unlock(&s3->lock);
		s3__do(s3, r);
		if ((rc = s3__req_result(r, err, errcap)) < 0)
			break;
		char xerr[S3_ERRCAP];
		rc = s3__xml_list(r->resp, r->resp_len, uploads ? S3_LIST_UPLOADS : S3_LIST_OBJECTS, list_rec, l, pg, xerr,
		                  sizeof(xerr));
		if (rc) {
			if (rc == -EIO)
				s3__errf(err, errcap, "S3 list %s: %s", bucket, xerr);
			break;
		}
		if (!pg->truncated)
			break;
		if (!strcmp(pg->next, tok) && !strcmp(pg->next_upload, utok)) {
			s3__errf(err, errcap, "S3 list %s: the server gave the same next marker twice", bucket);
			rc = -EIO;
			break;
		}
		memcpy(tok, pg->next, S3_XML_VAL);
		memcpy(utok, pg->next_upload, S3_XML_VAL);
		s3__req_free(r);
	}
	s3__req_free(r);
	free(r);
	free(pg);
	free(tok);
	return rc;
}

int ckpt_s3_list(ckpt_s3 *s3, const char *bucket, const char *prefix, const char *delimiter, ckpt_s3_list_fn cb,
                 void *arg, char *err, size_t errcap)
{
	list_ctx l = { cb, NULL, arg };
	if (!cb)
		return -EINVAL;
	return list_pages(s3, bucket, prefix, delimiter, 0, &l, err, errcap);
}

int ckpt_s3_list_uploads(ckpt_s3 *s3, const char *bucket, const char *prefix, ckpt_s3_upload_fn cb, void *arg,
                         char *err, size_t errcap)
{
	list_ctx l = { NULL, cb, arg };
	if (!cb)
		return -EINVAL;
	return list_pages(s3, bucket, prefix, NULL, 1, &l, err, errcap);
}

int ckpt_s3_abort(ckpt_s3 *s3, const char *bucket, const char *key, const char *upload_id, char *err, size_t errcap)
{
	int rc = s3__check(bucket, key, err, errcap);
	if (rc < 0)
		return rc;
	if (!upload_id || !*upload_id || strlen(upload_id) > 1024) {
		s3__errf(err, errcap, "S3 abort %s/%s: no upload id", bucket, key);
		return -EINVAL;
	}
	s3_req *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	req_init(r, "DELETE", bucket, key);
	s3_kv q[] = { { "uploadId", upload_id } };
	if (s3__query(q, 1, r->query, sizeof(r->query)) < 0) {
		free(r);
		return -EINVAL;
	}
	s3__do(s3, r);
	rc = s3__req_result(r, err, errcap);
	s3__req_free(r);
	free(r);
	return rc;
}
