/* Requests over libcurl's multi interface: each signed afresh at every
 * try, many in flight on one multi handle (its connections kept for the
 * next call through a small pool), retried with jittered exponential
 * backoff on 5xx, SlowDown, timeouts, broken connections and bodies the
 * server found damaged (not matching their signed hash) until the
 * retry bound runs out, and a final failure turned into an errno and a
 * message that names the cause and never a secret. */
#include "s3_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void s3__errf(char *err, size_t cap, const char *fmt, ...)
{
	if (!err || !cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
}

int64_t s3__now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t rnd(ckpt_s3 *s3)
{
	pthread_mutex_lock(&s3->lock);
	uint64_t x = s3->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	s3->rng = x;
	pthread_mutex_unlock(&s3->lock);
	return x;
}

static void stat_add(ckpt_s3 *s3, uint64_t *field, uint64_t n)
{
	pthread_mutex_lock(&s3->lock);
	*field += n;
	pthread_mutex_unlock(&s3->lock);
}

/* "bucket/key" of r for messages. */
static void what(const s3_req *r, char *out, size_t cap)
{
	snprintf(out, cap, "%s %s%s%.300s", r->method, r->bucket ? r->bucket : "", r->key ? "/" : "",
	         r->key ? r->key : "");
}

/* ---- the answer --------------------------------------------------------- */

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
	s3_req *r = ud;
	size_t k = sz * n;
	char line[512];
	size_t m = k < sizeof(line) - 1 ? k : sizeof(line) - 1;
	memcpy(line, p, m);
	line[m] = 0;
	line[strcspn(line, "\r\n")] = 0;
	if (!strncmp(line, "HTTP/", 5)) {
		const char *sp = strchr(line, ' ');
		r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		r->have_clen = 0;
		r->etag[0] = r->date[0] = r->content_range[0] = r->bucket_region[0] = 0;
		r->retry_after_s = 0;
		return k;
	}
	char *colon = strchr(line, ':');
	if (!colon)
		return k;
	*colon = 0;
	char *v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	size_t vl = strlen(v);
	while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
		v[--vl] = 0;
	if (!strcasecmp(line, "Content-Length")) {
		char *end;
		unsigned long long u = strtoull(v, &end, 10);
		if (*v && !*end) {
			r->clen = u;
			r->have_clen = 1;
		}
	} else if (!strcasecmp(line, "ETag"))
		snprintf(r->etag, sizeof(r->etag), "%s", v);
	else if (!strcasecmp(line, "Date"))
		snprintf(r->date, sizeof(r->date), "%s", v);
	else if (!strcasecmp(line, "Content-Range"))
		snprintf(r->content_range, sizeof(r->content_range), "%s", v);
	else if (!strcasecmp(line, "x-amz-bucket-region"))
		snprintf(r->bucket_region, sizeof(r->bucket_region), "%s", v);
	else if (!strcasecmp(line, "Retry-After"))
		r->retry_after_s = strtol(v, NULL, 10);
	return k;
}

static size_t on_write(char *p, size_t sz, size_t n, void *ud)
{
	s3_req *r = ud;
	size_t k = sz * n;
	if (r->dst && r->status >= 200 && r->status < 300) {
		if (k > r->dst_cap - r->got) {
			r->overflow = 1;
			return 0;
		}
		memcpy((char *)r->dst + r->got, p, k);
		r->got += k;
		return k;
	}
	size_t cap = r->resp_max ? r->resp_max : 64u << 10;
	if (k > cap - r->resp_len) {
		r->overflow = 2;
		return 0;
	}
	char *d = realloc(r->resp, r->resp_len + k + 1);
	if (!d) {
		r->overflow = 3;
		return 0;
	}
	memcpy(d + r->resp_len, p, k);
	r->resp = d;
	r->resp_len += k;
	r->resp[r->resp_len] = 0;
	return k;
}

static size_t on_read(char *p, size_t sz, size_t n, void *ud)
{
	s3_req *r = ud;
	size_t k = sz * n, left = r->body_len - r->up_off;
	if (k > left)
		k = left;
	if (!k)
		return 0;
	memcpy(p, (const char *)r->body + r->up_off, k);
	r->up_off += k;
	return k;
}

static int on_seek(void *ud, curl_off_t off, int origin)
{
	s3_req *r = ud;
	if (origin != SEEK_SET || off < 0 || (uint64_t)off > r->body_len)
		return CURL_SEEKFUNC_CANTSEEK;
	r->up_off = (size_t)off;
	return CURL_SEEKFUNC_OK;
}

/* ---- one try ------------------------------------------------------------ */

static void drop_easy(s3_eng *e, s3_req *r)
{
	if (r->easy) {
		curl_multi_remove_handle(e->multi, r->easy);
		curl_easy_cleanup(r->easy);
		r->easy = NULL;
	}
	curl_slist_free_all(r->hlist);
	r->hlist = NULL;
}

static void finish(s3_req *r, int rc)
{
	r->rc = rc;
	r->waiting = 0;
}

static struct curl_slist *hadd(struct curl_slist *l, int *bad, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static struct curl_slist *hadd(struct curl_slist *l, int *bad, const char *fmt, ...)
{
	char h[4400];
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(h, sizeof(h), fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= sizeof(h)) {
		*bad = 1;
		return l;
	}
	struct curl_slist *n = curl_slist_append(l, h);
	if (!n) {
		*bad = 1;
		return l;
	}
	return n;
}

/* Signs r now and hands it to the multi handle. */
static void start(s3_eng *e, s3_req *r)
{
	ckpt_s3 *s3 = e->s3;
	char w[400];
	what(r, w, sizeof(w));
	s3_creds c;
	char cerr[S3_ERRCAP];
	int rc = s3__creds_get(s3, &c, cerr, sizeof(cerr));
	if (rc < 0) {
		s3__errf(r->err, sizeof(r->err), "%s: %s", w, cerr);
		return finish(r, rc);
	}
	if (!r->sha[0])
		s3__sha256_hex(r->body ? r->body : "", r->body ? r->body_len : 0, r->sha);

	/* The URL, and the canonical URI, which is its path as sent. */
	char host[320], *uri = NULL, *url = NULL;
	size_t ucap = 3 * (r->key ? strlen(r->key) : 0) + 128;
	uri = malloc(ucap);
	url = malloc(ucap + sizeof(r->query) + sizeof(host) + 16);
	if (!uri || !url) {
		free(uri);
		free(url);
		s3__errf(r->err, sizeof(r->err), "%s: out of memory", w);
		return finish(r, -ENOMEM);
	}
	size_t o = 0;
	if (r->bucket && s3->vhost)
		snprintf(host, sizeof(host), "%s.%s", r->bucket, s3->host);
	else
		snprintf(host, sizeof(host), "%s", s3->host);
	if (r->bucket && !s3->vhost)
		o += (size_t)snprintf(uri, ucap, "/%s", r->bucket);
	if (r->key) {
		uri[o++] = '/';
		s3__uri_encode(r->key, strlen(r->key), 1, uri + o, ucap - o);
	} else if (!r->bucket || s3->vhost) {
		uri[o++] = '/';
		uri[o] = 0;
	}
	sprintf(url, "%s://%s%s%s%s", s3->scheme, host, uri, r->query[0] ? "?" : "", r->query);

	time_t now = time(NULL) + s3->cfg.clock_skew_s;
	char amzdate[17], auth[1024];
	s3__amzdate(now, amzdate);
	s3_hdr h[10];
	size_t nh = 0;
	h[nh++] = (s3_hdr){ "host", host };
	h[nh++] = (s3_hdr){ "x-amz-content-sha256", r->sha };
	h[nh++] = (s3_hdr){ "x-amz-date", amzdate };
	if (r->md5[0])
		h[nh++] = (s3_hdr){ "content-md5", r->md5 };
	if (r->range[0])
		h[nh++] = (s3_hdr){ "range", r->range };
	if (r->flags & S3_CONDITIONAL)
		h[nh++] = (s3_hdr){ "if-none-match", "*" };
	if (r->content_type)
		h[nh++] = (s3_hdr){ "content-type", r->content_type };
	if (c.token[0])
		h[nh++] = (s3_hdr){ "x-amz-security-token", c.token };
	s3_sig_in in = { r->method, uri, r->query, h, nh, r->sha, s3->region, "s3", now, c.access, c.secret };
	rc = s3__sign(&in, auth, sizeof(auth), NULL, 0);
	free(uri);
	int bad = rc < 0;
	struct curl_slist *l = NULL;
	for (size_t i = 0; i < nh && !bad; i++)
		l = hadd(l, &bad, "%s: %s", h[i].name, h[i].value);
	l = hadd(l, &bad, "Authorization: %s", auth);
	l = hadd(l, &bad, "Expect:");
	if (!r->content_type)
		l = hadd(l, &bad, "Content-Type:");
	l = hadd(l, &bad, "Accept:");
	memset(&c, 0, sizeof(c));
	memset(auth, 0, sizeof(auth));
	CURL *easy = bad ? NULL : curl_easy_init();
	if (!easy) {
		curl_slist_free_all(l);
		free(url);
		s3__errf(r->err, sizeof(r->err), "%s: cannot build the request (out of memory or too long)", w);
		return finish(r, -ENOMEM);
	}
	r->easy = easy;
	r->hlist = l;
	r->status = 0;
	r->got = 0;
	r->up_off = 0;
	r->overflow = 0;
	r->have_clen = 0;
	free(r->resp);
	r->resp = NULL;
	r->resp_len = 0;
	r->signed_at = (int64_t)now;

	curl_easy_setopt(easy, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(easy, CURLOPT_PRIVATE, r);
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, l);
	curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(easy, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
	/* Larger than curl's 64 KiB: fewer callbacks and syscalls a part. */
	curl_easy_setopt(easy, CURLOPT_UPLOAD_BUFFERSIZE, 512L << 10);
	curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 512L << 10);
	long tmo = s3->cfg.timeout_ms;
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, tmo);
	/* No progress for the timeout: at least one byte a second over it. */
	curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, (tmo + 999) / 1000);
	if (!strcmp(r->method, "PUT")) {
		curl_easy_setopt(easy, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(easy, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
	} else if (!strcmp(r->method, "POST")) {
		curl_easy_setopt(easy, CURLOPT_POST, 1L);
		curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
	} else if (!strcmp(r->method, "HEAD"))
		curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
	else if (strcmp(r->method, "GET"))
		curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, r->method);
	if (r->body || !strcmp(r->method, "PUT") || !strcmp(r->method, "POST")) {
		curl_easy_setopt(easy, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(easy, CURLOPT_READDATA, r);
		curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(easy, CURLOPT_SEEKDATA, r);
	}
	stat_add(s3, &s3->st.requests, 1);
	if (curl_multi_add_handle(e->multi, easy) != CURLM_OK) {
		drop_easy(e, r);
		s3__errf(r->err, sizeof(r->err), "%s: libcurl refused the request", w);
		return finish(r, -EIO);
	}
}

/* ---- what an answer means ----------------------------------------------- */

static int retryable_curl(CURLcode c)
{
	switch (c) {
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return 1;
	default:
		return 0;
	}
}

/* Schedules another try of r, or ends it with -ETIMEDOUT when the retry
 * bound would be passed. */
static void retry(s3_eng *e, s3_req *r, const char *why)
{
	ckpt_s3 *s3 = e->s3;
	snprintf(r->last, sizeof(r->last), "%s", why);
	int64_t now = s3__now_ms();
	int64_t d = 100ll << (r->attempts < 7 ? r->attempts : 7); /* 100 ms .. 12.8 s */
	d = d / 2 + (int64_t)(rnd(s3) % (uint64_t)(d / 2 + 1));
	if (r->retry_after_s > 0)
		d = d > r->retry_after_s * 1000 ? d : (r->retry_after_s > 20 ? 20000 : r->retry_after_s * 1000);
	r->attempts++;
	if (r->flags & S3_NO_RETRY || now + d - r->t0 > (int64_t)s3->cfg.retry_total_ms) {
		char w[400];
		what(r, w, sizeof(w));
		s3__errf(r->err, sizeof(r->err), "%s: gave up after %d tries in %.1f s (CKPT_S3_RETRY_TOTAL %u ms); last: %s",
		         w, r->attempts, (double)(now - r->t0) / 1000, s3->cfg.retry_total_ms, why);
		return finish(r, -ETIMEDOUT);
	}
	stat_add(s3, &s3->st.retries, 1);
	r->waiting = 1;
	r->retry_at = now + d;
}

static void final_error(ckpt_s3 *s3, s3_req *r)
{
	char w[400];
	what(r, w, sizeof(w));
	s3_xml_err x;
	if (s3__xml_error(r->resp, r->resp_len, &x) < 0)
		memset(&x, 0, sizeof(x));
	/* The server's message, printable and short (it may quote what was
	 * sent: s3__scrub removes anything secret after). */
	char msg[200] = "";
	if (x.message[0]) {
		size_t o = 0;
		for (const char *p = x.message; *p && o + 1 < sizeof(msg); p++)
			msg[o++] = (unsigned char)*p >= 0x20 && *p != 0x7f ? *p : '?';
		msg[o] = 0;
	}
	const char *code = x.code;
	long st = r->status;
	char src[200];
	pthread_mutex_lock(&s3->lock);
	snprintf(src, sizeof(src), "%s", s3->creds.source);
	pthread_mutex_unlock(&s3->lock);
	int rc = -EIO;
	if (st == 404 && !strcmp(code, "NoSuchBucket")) {
		rc = -ENXIO;
		s3__errf(r->err, sizeof(r->err), "%s: bucket %s does not exist (NoSuchBucket)", w, r->bucket ? r->bucket : "?");
	} else if (st == 404 && !strcmp(code, "NoSuchUpload")) {
		rc = -ENOENT;
		s3__errf(r->err, sizeof(r->err), "%s: no such multipart upload (NoSuchUpload: completed or aborted)", w);
	} else if (st == 404) {
		rc = -ENOENT;
		s3__errf(r->err, sizeof(r->err), "%s: no such key (%s)", w, code[0] ? code : "404");
	} else if (st == 412 && (r->flags & S3_CONDITIONAL)) {
		rc = -EEXIST;
		s3__errf(r->err, sizeof(r->err), "%s: the key exists already (412 on If-None-Match: *)", w);
	} else if (st == 403 && !strcmp(code, "InvalidAccessKeyId")) {
		rc = -EACCES;
		s3__errf(r->err, sizeof(r->err),
		         "%s: the server knows no such access key id (InvalidAccessKeyId: wrong key id; credentials from %s)",
		         w, src);
	} else if (st == 403 && !strcmp(code, "SignatureDoesNotMatch")) {
		rc = -EACCES;
		s3__errf(r->err, sizeof(r->err),
		         "%s: the signature does not match (SignatureDoesNotMatch: wrong secret key for this key id; "
		         "credentials from %s)", w, src);
	} else if ((st == 403 || st == 400) && !strcmp(code, "RequestTimeTooSkewed")) {
		rc = -EACCES;
		time_t server = r->date[0] ? curl_getdate(r->date, NULL) : -1;
		if (x.server_time[0] && s3__rfc3339(x.server_time) > 0)
			server = (time_t)s3__rfc3339(x.server_time);
		if (server > 0)
			s3__errf(r->err, sizeof(r->err),
			         "%s: this host's clock is %+lld s off the server's (RequestTimeTooSkewed: set the clock right)",
			         w, (long long)(r->signed_at - server));
		else
			s3__errf(r->err, sizeof(r->err),
			         "%s: this host's clock is too far off the server's (RequestTimeTooSkewed: set the clock right)", w);
	} else if (st == 403 && !strcmp(code, "AccessDenied")) {
		rc = -EACCES;
		s3__errf(r->err, sizeof(r->err), "%s: access denied (AccessDenied: no permission for this; credentials from %s)",
		         w, src);
	} else if (st == 403) {
		rc = -EACCES;
		s3__errf(r->err, sizeof(r->err), "%s: refused (403 %s%s%s; credentials from %s)", w, code[0] ? code : "",
		         msg[0] ? ": " : "", msg, src);
	} else if (st == 301 || st == 307 || (st == 400 && !strcmp(code, "AuthorizationHeaderMalformed") && x.region[0])) {
		rc = -EINVAL;
		const char *reg = r->bucket_region[0] ? r->bucket_region : x.region;
		s3__errf(r->err, sizeof(r->err), "%s: the bucket is in region %s, not %s (%ld %s: set CKPT_S3_REGION)", w,
		         reg[0] ? reg : "?", s3->region, st, code[0] ? code : "redirect");
	} else if (st >= 400 && st < 500 && st != 404 && st != 412 && st != 416) {
		rc = -EINVAL;
		s3__errf(r->err, sizeof(r->err), "%s: HTTP %ld %s%s%s", w, st, code[0] ? code : "", msg[0] ? ": " : "", msg);
	} else
		s3__errf(r->err, sizeof(r->err), "%s: HTTP %ld %s%s%s", w, st, code[0] ? code : "", msg[0] ? ": " : "", msg);
	pthread_mutex_lock(&s3->lock);
	s3__scrub(&s3->creds, r->err);
	pthread_mutex_unlock(&s3->lock);
	finish(r, rc);
}

static void done(s3_eng *e, s3_req *r, CURLcode cc)
{
	ckpt_s3 *s3 = e->s3;
	if (cc == CURLE_OK)
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
	drop_easy(e, r);
	char w[400], why[200];
	what(r, w, sizeof(w));
	if (cc != CURLE_OK) {
		if (r->overflow == 1) {
			s3__errf(r->err, sizeof(r->err), "%s: the answer is longer than the %zu bytes asked", w, r->dst_cap);
			return finish(r, -EIO);
		}
		if (r->overflow) {
			s3__errf(r->err, sizeof(r->err), "%s: the answer is larger than %zu bytes%s", w,
			         r->resp_max ? r->resp_max : (size_t)64 << 10, r->overflow == 3 ? " (out of memory)" : "");
			return finish(r, r->overflow == 3 ? -ENOMEM : -EIO);
		}
		if (retryable_curl(cc)) {
			if (cc == CURLE_OPERATION_TIMEDOUT)
				snprintf(why, sizeof(why), "no progress for %u ms (timeout)", s3->cfg.timeout_ms);
			else
				snprintf(why, sizeof(why), "%s", curl_easy_strerror(cc));
			return retry(e, r, why);
		}
		s3__errf(r->err, sizeof(r->err), "%s: %s", w, curl_easy_strerror(cc));
		return finish(r, -EIO);
	}
	long st = r->status;
	if (st >= 200 && st < 300) {
		if ((r->flags & S3_ERR_IN_200) && r->resp && strstr(r->resp, "<Error>")) {
			s3_xml_err x;
			s3__xml_error(r->resp, r->resp_len, &x);
			snprintf(why, sizeof(why), "200 with an error inside: %s", x.code[0] ? x.code : "?");
			return retry(e, r, why);
		}
		stat_add(s3, &s3->st.bytes_up, r->body_len);
		stat_add(s3, &s3->st.bytes_down, r->dst ? r->got : r->resp_len);
		return finish(r, 0);
	}
	s3_xml_err x;
	if (s3__xml_error(r->resp, r->resp_len, &x) < 0)
		memset(&x, 0, sizeof(x));
	/* XAmzContentSHA256Mismatch, BadDigest: the body that arrived is not
	 * the one hashed here (damaged on its way): nothing was stored, and
	 * the same bytes go again. */
	if (st >= 500 || st == 429 || (st == 400 && !strcmp(x.code, "RequestTimeout")) ||
	    (st == 400 && (!strcmp(x.code, "XAmzContentSHA256Mismatch") || !strcmp(x.code, "BadDigest"))) ||
	    (st == 409 && !strcmp(x.code, "ConditionalRequestConflict"))) {
		snprintf(why, sizeof(why), "HTTP %ld %s", st, x.code);
		return retry(e, r, why);
	}
	final_error(s3, r);
}

/* ---- the engine --------------------------------------------------------- */

void s3__eng_open(ckpt_s3 *s3, s3_eng *e)
{
	memset(e, 0, sizeof(*e));
	e->s3 = s3;
	pthread_mutex_lock(&s3->lock);
	if (s3->npool)
		e->multi = s3->pool[--s3->npool];
	pthread_mutex_unlock(&s3->lock);
	if (!e->multi)
		e->multi = curl_multi_init();
}

int s3__eng_add(s3_eng *e, s3_req *r)
{
	r->err[0] = 0;
	r->attempts = 0;
	r->t0 = s3__now_ms();
	r->waiting = 0;
	if (e->nact >= (int)(sizeof(e->act) / sizeof(e->act[0]))) {
		s3__errf(r->err, sizeof(r->err), "%s: too many requests at once", r->method);
		return r->rc = -E2BIG;
	}
	e->act[e->nact++] = r; /* a failed start is returned by the next s3__eng_next */
	if (atomic_load(&e->s3->cancel)) {
		s3__errf(r->err, sizeof(r->err), "%s: cancelled (the client is stopping)", r->method);
		r->rc = -ECANCELED;
		return 0;
	}
	if (!e->multi) {
		s3__errf(r->err, sizeof(r->err), "%s: no libcurl multi handle (out of memory)", r->method);
		r->rc = -ENOMEM;
		return 0;
	}
	r->rc = 1; /* running */
	start(e, r);
	return 0;
}

static s3_req *take_done(s3_eng *e)
{
	for (int i = 0; i < e->nact; i++) {
		s3_req *r = e->act[i];
		if (r->rc != 1 && !r->waiting && !r->easy) {
			e->act[i] = e->act[--e->nact];
			return r;
		}
	}
	return NULL;
}

/* Reads what finished; starts the retries that are due. */
static void harvest(s3_eng *e)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(e->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		s3_req *r = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		if (r)
			done(e, r, m->data.result);
	}
	int64_t now = s3__now_ms();
	for (int i = 0; i < e->nact; i++) {
		s3_req *r = e->act[i];
		if (r->waiting && r->retry_at <= now) {
			r->waiting = 0;
			start(e, r);
		}
	}
}

void s3__eng_pump(void *arg)
{
	s3_eng *e = arg;
	int running;
	curl_multi_perform(e->multi, &running);
}

/* ckpt_s3_cancel: what is running or waiting to be tried again ends now,
 * with -ECANCELED. */
static void cancel_all(s3_eng *e)
{
	for (int i = 0; i < e->nact; i++) {
		s3_req *r = e->act[i];
		if (r->rc != 1 && !r->waiting)
			continue;
		drop_easy(e, r);
		char w[400];
		what(r, w, sizeof(w));
		s3__errf(r->err, sizeof(r->err), "%s: cancelled after %d tries (the client is stopping)", w, r->attempts);
		finish(r, -ECANCELED);
	}
}

s3_req *s3__eng_next(s3_eng *e)
{
	for (;;) {
		if (atomic_load(&e->s3->cancel))
			cancel_all(e);
		s3_req *r = take_done(e);
		if (r)
			return r;
		if (!e->nact)
			return NULL;
		int running = 0;
		curl_multi_perform(e->multi, &running);
		harvest(e);
		if ((r = take_done(e)))
			return r;
		int64_t wait = 200, now = s3__now_ms();
		for (int i = 0; i < e->nact; i++)
			if (e->act[i]->waiting && e->act[i]->retry_at - now < wait)
				wait = e->act[i]->retry_at - now;
		if (wait < 0)
			wait = 0;
		curl_multi_poll(e->multi, NULL, 0, (int)wait, NULL);
	}
}

void s3__eng_close(s3_eng *e)
{
	for (int i = 0; i < e->nact; i++) {
		s3_req *r = e->act[i];
		drop_easy(e, r);
		if (r->rc == 1 || r->waiting) {
			r->waiting = 0;
			r->rc = -ECANCELED;
		}
	}
	e->nact = 0;
	if (!e->multi)
		return;
	ckpt_s3 *s3 = e->s3;
	pthread_mutex_lock(&s3->lock);
	if (s3->npool < (int)(sizeof(s3->pool) / sizeof(s3->pool[0]))) {
		s3->pool[s3->npool++] = e->multi;
		e->multi = NULL;
	}
	pthread_mutex_unlock(&s3->lock);
	if (e->multi)
		curl_multi_cleanup(e->multi);
	e->multi = NULL;
}

int s3__do(ckpt_s3 *s3, s3_req *r)
{
	s3_eng e;
	s3__eng_open(s3, &e);
	if (s3__eng_add(&e, r) == 0)
		while (s3__eng_next(&e) != r)
			;
	s3__eng_close(&e);
	return r->rc;
}

void s3__req_free(s3_req *r)
{
	free(r->resp);
	r->resp = NULL;
	r->resp_len = 0;
}

int s3__req_result(s3_req *r, char *err, size_t errcap)
{
	if (r->rc < 0)
		s3__errf(err, errcap, "%s", r->err);
	return r->rc;
}
