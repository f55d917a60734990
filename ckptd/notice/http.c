/* One HTTP request at a time on a curl easy handle, driven by the poller's
 * multi handle. Every request is bounded: timeout_ms from start to end,
 * max_body bytes kept (a bigger body aborts the transfer), no redirects,
 * http and https only, no proxy from the environment (a metadata request
 * must never leave the host through one). Base URLs are checked once, at
 * start, against the addresses metadata services live at. */
#include "notice_int.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BODY_FIRST 4096
#define TTL_HEADER "x-aws-ec2-metadata-token-ttl-seconds:"

int nt_http_init(nt_http *h, size_t max_body, void *owner)
{
	memset(h, 0, sizeof(*h));
	h->max = max_body;
	h->easy = curl_easy_init();
	if (!h->easy)
		return -ENOMEM;
	curl_easy_setopt(h->easy, CURLOPT_PRIVATE, owner);
	return 0;
}

void nt_http_free(nt_http *h)
{
	if (h->easy)
		curl_easy_cleanup(h->easy);
	curl_slist_free_all(h->headers);
	free(h->body);
	memset(h, 0, sizeof(*h));
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	nt_http *h = arg;
	size_t add = size * n;
	if (add > h->max - h->len) {
		h->too_big = 1;
		return 0; /* anything but add: curl ends the transfer */
	}
	if (add > h->cap - h->len) {
		size_t cap = h->cap ? h->cap : BODY_FIRST < h->max ? BODY_FIRST : h->max;
		while (cap - h->len < add)
			cap = cap > h->max / 2 ? h->max : cap * 2;
		char *b = realloc(h->body, cap);
		if (!b)
			return 0;
		h->body = b;
		h->cap = cap;
	}
	memcpy(h->body + h->len, data, add);
	h->len += add;
	return add;
}

/* Only AWS's token reply carries a header we read: its time to live. */
static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
	nt_http *h = arg;
	size_t len = size * n, k = sizeof(TTL_HEADER) - 1;
	if (len > k && !strncasecmp(line, TTL_HEADER, k)) {
		uint32_t v = 0;
		size_t i = k;
		while (i < len && line[i] == ' ')
			i++;
		for (; i < len && line[i] >= '0' && line[i] <= '9' && v < 1000000; i++)
			v = v * 10 + (uint32_t)(line[i] - '0');
		h->ttl_s = v;
	}
	return len;
}

int nt_http_prepare(nt_http *h, const char *method, const char *url, const char *h1, const char *h2,
                    int timeout_ms)
{
	CURL *e = h->easy;
	void *owner = NULL;
	curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&owner);
	/* Every option from scratch; live connections are kept. */
	curl_easy_reset(e);
	curl_slist_free_all(h->headers);
	h->headers = NULL;
	h->len = 0;
	h->too_big = 0;
	h->ttl_s = 0;
	struct curl_slist *l = NULL;
	if (h1 && !(l = curl_slist_append(l, h1)))
		return -ENOMEM;
	if (h2) {
		struct curl_slist *l2 = curl_slist_append(l, h2);
		if (!l2) {
			curl_slist_free_all(l);
			return -ENOMEM;
		}
		l = l2;
	}
	h->headers = l;
	int bad = 0;
#define SET(opt, val) (bad |= curl_easy_setopt(e, opt, val) != CURLE_OK)
	SET(CURLOPT_PRIVATE, owner);
	SET(CURLOPT_URL, url);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_MAXREDIRS, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
#else
	SET(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
#if LIBCURL_VERSION_NUM >= 0x075700
	/* Stopping must not wait for a name lookup in curl's resolver thread. */
	SET(CURLOPT_QUICK_EXIT, 1L);
#endif
	SET(CURLOPT_PROXY, "");
	SET(CURLOPT_NOPROXY, "*");
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)h->max);
	SET(CURLOPT_USERAGENT, "ckptd-notice");
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, h);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, h);
	SET(CURLOPT_HTTPHEADER, h->headers);
	if (!strcmp(method, "PUT"))
		SET(CURLOPT_CUSTOMREQUEST, "PUT");
#undef SET
	return bad ? -EIO : 0;
}

void nt_http_reply(nt_http *h, int code, nt_reply *r)
{
	memset(r, 0, sizeof(*r));
	r->code = code;
	r->too_big = h->too_big || code == CURLE_FILESIZE_EXCEEDED;
	if (code == CURLE_OK)
		curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &r->status);
	r->body = h->body ? h->body : "";
	r->len = h->len;
}

const char *nt_http_strerror(const nt_reply *r)
{
	if (r->too_big)
		return "response larger than max_body";
	switch (r->code) {
	case CURLE_OPERATION_TIMEDOUT:
		return "no complete answer within timeout_ms";
	case CURLE_COULDNT_CONNECT:
		return "cannot connect";
	case CURLE_GOT_NOTHING:
		return "connection closed without an answer";
	case CURLE_WEIRD_SERVER_REPLY:
		return "not an HTTP answer";
	default:
		return curl_easy_strerror((CURLcode)r->code); /* libcurl's own fixed text */
	}
}

/* ---------------------------------------------------------------- base URLs */

static int host_allowed(const char *host)
{
	static const uint8_t aws6[16] = { 0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54 };
	struct in_addr a4;
	struct in6_addr a6;
	char in[64];
	if (!strcasecmp(host, "localhost") || !strcasecmp(host, "metadata.google.internal"))
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1) {
		uint32_t a = ntohl(a4.s_addr);
		return (a >> 24) == 127 || (a >> 16) == 0xa9feu; /* 127/8, 169.254/16 */
	}
	size_t n = strlen(host);
	if (n < 3 || n >= sizeof(in) || host[0] != '[' || host[n - 1] != ']')
		return 0;
	memcpy(in, host + 1, n - 2);
	in[n - 2] = 0;
	if (inet_pton(AF_INET6, in, &a6) != 1)
		return 0;
	return IN6_IS_ADDR_LOOPBACK(&a6) || IN6_IS_ADDR_LINKLOCAL(&a6) || !memcmp(&a6, aws6, 16);
}

static int has_part(CURLU *u, CURLUPart what)
{
	char *v = NULL;
	CURLUcode rc = curl_url_get(u, what, &v, 0);
	int has = rc == CURLUE_OK && v && *v;
	curl_free(v);
	return has;
}

char *nt_http_base(const char *url, char *err, size_t errcap)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *path = NULL, *out = NULL;
	const char *why = NULL;
	if (!u) {
		why = "out of memory";
	} else if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	           curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	           curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
		why = "not a URL";
	} else if (strcmp(scheme, "http") && strcmp(scheme, "https")) {
		why = "not http or https";
	} else if (has_part(u, CURLUPART_USER) || has_part(u, CURLUPART_PASSWORD) || has_part(u, CURLUPART_QUERY) ||
	           has_part(u, CURLUPART_FRAGMENT)) {
		why = "a user, query or fragment in a base URL";
	} else if (curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK && path && strcmp(path, "/") &&
	           *path) {
		why = "a path in a base URL";
	} else if (!host_allowed(host)) {
		why = "not a loopback, link-local or metadata address";
	} else {
		size_t n = strlen(url);
		while (n && url[n - 1] == '/')
			n--;
		if (!(out = strndup(url, n)))
			why = "out of memory";
	}
	if (why && err && errcap)
		snprintf(err, errcap, "%s", why);
	curl_free(scheme);
	curl_free(host);
	curl_free(path);
	curl_url_cleanup(u);
	return out;
}
