/* Internals of the notice pollers shared by their files: time parsing
 * (time.c), the Azure parser that also names the event (parse.c), one HTTP
 * request on a curl handle (http.c), the cloud sources (sources.c), the
 * trigger file (trigger.c) and the poller's loop (poll.c). */
#ifndef CKPTD_NOTICE_INT_H
#define CKPTD_NOTICE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "notice.h"
#include "base/common.h"

#define NT_NS 1000000000ull
#define NT_KEY_MAX 160 /* what tells one notice of a source from another */

/* ---------------------------------------------------------------- time.c */

/* "2026-11-29T13:40:00Z", with optional fraction and a "Z" or "+hh:mm"
 * offset; the whole of s[0..len). [out] ns: since the epoch. 0 or -1. */
int nt_time_rfc3339(const char *s, size_t len, uint64_t *ns);
/* "Mon, 19 Sep 2016 18:29:47 GMT"; the whole of s[0..len). 0 or -1. */
int nt_time_rfc1123(const char *s, size_t len, uint64_t *ns);
/* ns as "2026-11-29T13:40:00Z" (seconds; the fraction is dropped). */
void nt_time_format(uint64_t ns, char *buf, size_t cap);

/* ---------------------------------------------------------------- parse.c */

/* ckptd_notice_parse_azure, also giving the chosen event's EventId. */
int nt_parse_azure(const char *body, size_t len, const char *vm_name, uint64_t now_ns, ckptd_notice_event *ev,
                   char *id, size_t idcap, char *err, size_t errcap);
/* Writes err (when errcap > 0) and returns -EINVAL. */
int nt_fail(char *err, size_t errcap, const char *reason);

/* ---------------------------------------------------------------- http.c */

typedef struct nt_http {
	void *easy;           /* CURL * */
	void *headers;        /* struct curl_slist * of the request in flight */
	char *body;
	size_t len, cap, max;
	int too_big;          /* the body went past max */
	uint32_t ttl_s;       /* X-aws-ec2-metadata-token-ttl-seconds in the reply; 0: none */
	int busy;             /* in the multi handle */
} nt_http;

/* Outcome of a finished request. */
typedef struct nt_reply {
	int code;             /* CURLcode; 0: a reply came */
	long status;          /* HTTP status when code is 0 */
	const char *body;     /* the body read (not NUL-terminated) */
	size_t len;
	int too_big;
} nt_reply;

int nt_http_init(nt_http *h, size_t max_body, void *owner);
void nt_http_free(nt_http *h);
/* Prepares h for one request: method "GET" or "PUT", the URL and up to two
 * "Name: value" headers (NULL for none). The caller adds h->easy to its
 * multi handle. Returns 0 or -ENOMEM/-EIO. */
int nt_http_prepare(nt_http *h, const char *method, const char *url, const char *h1, const char *h2,
                    int timeout_ms);
/* After the multi handle said h is done with code: what came back. */
void nt_http_reply(nt_http *h, int code, nt_reply *r);
/* Why a request failed, a fixed string. */
const char *nt_http_strerror(const nt_reply *r);
/* Checks a base URL (see notice.h) and returns it without a trailing "/",
 * malloc'd, or NULL with a reason in err. */
char *nt_http_base(const char *url, char *err, size_t errcap);

/* ---------------------------------------------------------------- poll.c */

typedef struct ckptd_notice_poller nt_poller;

/* What every source keeps: when to poll, what it fired, how it logs. */
typedef struct nt_state {
	const char *name;     /* "aws", "gcp", "azure", "file" */
	int kind;             /* CKPTD_NOTICE_* */
	uint64_t next_ns;     /* CLOCK_MONOTONIC time of the next poll */
	int fired;
	char key[NT_KEY_MAX];
	/* failure lines: at most one per NT_LOG_EVERY_NS, the count of the rest */
	uint64_t logged_ns;
	uint32_t unlogged;
	int failing;          /* a failure was logged since the last success */
} nt_state;

/* A poll went wrong: logs why, rate-limited. */
void nt_failed(nt_poller *p, nt_state *s, const char *why, const char *more);
/* A poll was answered (notice or not): logs a recovery once. */
void nt_answered(nt_poller *p, nt_state *s);
/* A notice was seen: passes it on unless key is the one fired last. */
void nt_notice(nt_poller *p, nt_state *s, const ckptd_notice_event *ev, const char *key);
/* When the next poll of s is due after one now. */
void nt_schedule(nt_poller *p, nt_state *s, uint64_t now_ns);

/* ---------------------------------------------------------------- sources.c */

/* One cloud source: its state, its request, its URLs. */
typedef struct nt_cloud {
	nt_state st;
	nt_http http;
	char *url;            /* what is polled */
	char *token_url;      /* AWS */
	int step;             /* NT_IDLE, or which request is in flight */
	/* AWS's IMDSv2 session token */
	char token[512];
	uint64_t token_renew_ns; /* CLOCK_MONOTONIC: fetch another from then on */
	int retried;          /* a 401 was answered by fetching a token once */
} nt_cloud;

enum { NT_IDLE = 0, NT_TOKEN, NT_GET };

/* Sets c up for source kind over base (a checked base URL, taken). */
int nt_cloud_init(nt_cloud *c, int kind, char *base, size_t max_body);
void nt_cloud_free(nt_cloud *c);
/* Starts the next request of c; the caller adds c->http.easy to its multi
 * handle when it returns 1 (0: nothing to do, failure already reported). */
int nt_cloud_begin(nt_poller *p, nt_cloud *c, int timeout_ms, uint64_t now_ns);
/* c's request ended with code (CURLcode). */
void nt_cloud_done(nt_poller *p, nt_cloud *c, int code, const char *vm_name, uint64_t now_ns);

/* ---------------------------------------------------------------- trigger.c */

typedef struct nt_trigger {
	nt_state st;
	char *path;
	size_t max;           /* bytes of content read at most */
	int present;          /* the file was there at the last look */
} nt_trigger;

/* Looks at the file once. */
void nt_trigger_check(nt_poller *p, nt_trigger *t, uint64_t now_ns);

#endif
