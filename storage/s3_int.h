/* The S3 client's insides, shared by its files:
 *   s3_sign.c    SigV4: URI and query encoding, canonical request, signature
 *   s3_parse.c   the credentials/config files and the metadata service's JSON
 *   s3_cred.c    where credentials come from, and their refresh
 *   s3_xml.c     S3's XML answers (expat)
 *   s3_http.c    requests over libcurl's multi interface: retries, errors
 *   s3.c         open/close and the small calls (PUT, HEAD, list, delete)
 *   s3_upload.c  multipart uploads and ranged GETs
 *   s3_env.c     CKPT_S3_* settings, s3:// URLs
 * Nothing here is a public API: tests and fuzz targets use it. */
#ifndef CKPT_STORAGE_S3_INT_H
#define CKPT_STORAGE_S3_INT_H

#include "s3.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <time.h>

#define S3_ERRCAP 320

void s3__errf(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int64_t s3__now_ms(void); /* CLOCK_MONOTONIC */

/* ---- s3_sign.c ---------------------------------------------------------- */

/* S3's URI encoding: A-Z a-z 0-9 - _ . ~ kept, '/' kept when keep_slash,
 * every other byte %XX (upper case). Returns the length, or -1 when out
 * (NUL-terminated) is too small. */
long s3__uri_encode(const char *s, size_t n, int keep_slash, char *out, size_t cap);

/* One query parameter, raw (not encoded); v NULL or "": "k=". */
typedef struct s3_kv {
	const char *k, *v;
} s3_kv;

/* The canonical query string of kv (each encoded, sorted by key then
 * value): also what is sent. Returns the length or -1 (too small). */
long s3__query(const s3_kv *kv, size_t n, char *out, size_t cap);

/* One header to sign: name in lower case, value as sent. */
typedef struct s3_hdr {
	const char *name, *value;
} s3_hdr;

typedef struct s3_sig_in {
	const char *method;
	const char *uri;        /* canonical URI: already encoded */
	const char *query;      /* canonical query string ("" none) */
	s3_hdr *hdrs;           /* the headers to sign (sorted here, in place) */
	size_t nhdrs;
	const char *payload;    /* hex SHA-256 of the body (x-amz-content-sha256) */
	const char *region, *service;
	time_t when;
	const char *access, *secret;
} s3_sig_in;

/* "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=..." into
 * auth; amzdate gets "YYYYMMDDTHHMMSSZ" (the x-amz-date header, which the
 * caller puts among hdrs with this same value: s3__amzdate). canon, when
 * not NULL, gets the canonical request (for tests). 0 or -ENOSPC. */
int s3__sign(const s3_sig_in *in, char *auth, size_t cap, char *canon, size_t canon_cap);
void s3__amzdate(time_t t, char out[17]);

void s3__sha256_hex(const void *p, size_t n, char out[65]);
void s3__md5_b64(const void *p, size_t n, char out[25]);
/* The hex form of a base64 MD5 (an S3 ETag's): 0, or -1 if not one. */
int s3__md5_b64_hex(const char *b64, char hex[33]);
/* Both in one pass, in steps; between steps pump(arg) (NULL: none) keeps
 * other transfers going. */
void s3__digests(const void *p, size_t n, char sha_hex[65], char md5_b64[25], void (*pump)(void *), void *arg);

/* ---- s3_parse.c: untrusted files and answers (fuzzed) -------------------- */

/* key in [section] of an AWS INI text (credentials: "[name]"; config:
 * "[profile name]", "[default]"): 1 found (value trimmed into out), 0 not,
 * -1 too long for out or with a control byte in it. section_seen: set to 1
 * when the section exists. */
int s3__ini_get(const char *text, size_t len, const char *section, const char *key, char *out, size_t cap,
                int *section_seen);

typedef struct s3_creds {
	char access[128];
	char secret[128];
	char token[4096];
	int64_t expires;        /* Unix seconds; 0: never */
	char source[160];       /* where they came from (no secret) */
} s3_creds;

/* The role credentials JSON of the metadata service. 0, or -EINVAL with a
 * message (never a value from it). */
int s3__imds_parse(const char *json, size_t len, s3_creds *c, char *err, size_t errcap);
/* "2026-12-02T19:00:00Z" -> Unix seconds, or -1. */
int64_t s3__rfc3339(const char *s);

/* ---- s3_xml.c ----------------------------------------------------------- */

#define S3_XML_VAL 1100 /* a field's text: keys are at most 1024 bytes */

typedef struct s3_xml_err {
	char code[64];
	char message[256];
	char server_time[40], request_time[40];
	char region[64];
} s3_xml_err;

/* An <Error> answer: 0 (fields set), -1 when xml is not one. */
int s3__xml_error(const char *xml, size_t n, s3_xml_err *e);

/* Records of a list answer. kind: S3_LIST_OBJECTS (Contents: key, size;
 * CommonPrefixes: prefix, size 0), S3_LIST_UPLOADS (Upload: key, upload
 * id), S3_DELETE_RESULT (Error: key, code). */
enum { S3_LIST_OBJECTS, S3_LIST_UPLOADS, S3_DELETE_RESULT };
typedef int (*s3_xml_rec_fn)(void *arg, const char *key, uint64_t size, const char *extra);
typedef struct s3_xml_page {
	int truncated;
	char next[S3_XML_VAL];        /* NextContinuationToken / NextKeyMarker */
	char next_upload[S3_XML_VAL]; /* NextUploadIdMarker */
	uint64_t records;
} s3_xml_page;
/* 0, a non-zero return of fn, or -EIO with a message (malformed, too deep,
 * entities, a field too long, a size not a number). */
int s3__xml_list(const char *xml, size_t n, int kind, s3_xml_rec_fn fn, void *arg, s3_xml_page *page, char *err,
                 size_t errcap);
/* One top-level field of root ("InitiateMultipartUploadResult", "UploadId"):
 * 0, or -EIO. */
int s3__xml_field(const char *xml, size_t n, const char *root, const char *field, char *out, size_t cap);

/* ---- s3_http.c ---------------------------------------------------------- */

enum { S3_ERR_IN_200 = 1, S3_CONDITIONAL = 2, S3_NO_RETRY = 4 };

typedef struct s3_req {
	/* the request */
	const char *method;     /* GET PUT POST DELETE HEAD */
	const char *bucket;     /* NULL: the service */
	const char *key;        /* NULL: the bucket */
	char query[8192];       /* canonical (s3__query): a prefix and a marker, encoded */
	const void *body;
	size_t body_len;
	char sha[65];           /* of the body; "" : computed at start */
	char md5[25];           /* Content-MD5, "" none */
	char range[64];         /* "bytes=A-B", "" none */
	const char *content_type;
	unsigned flags;
	void *dst;              /* a 2xx body goes here (at most dst_cap bytes) */
	size_t dst_cap;
	size_t resp_max;        /* else into resp, at most this (0: 64 KiB) */
	/* the answer */
	long status;
	char *resp;
	size_t resp_len;
	size_t got;             /* bytes into dst */
	uint64_t clen;          /* Content-Length (have_clen) */
	int have_clen;
	char etag[130];
	char date[64];
	char content_range[96];
	char bucket_region[64];
	long retry_after_s;
	int rc;                 /* 0 or -errno when done */
	char err[S3_ERRCAP];
	/* the engine's */
	CURL *easy;
	struct curl_slist *hlist;
	int attempts;
	int64_t t0, retry_at, signed_at;
	int waiting, overflow;
	size_t up_off;
	char last[200];         /* the last retried failure */
	void *user;
	size_t idx;
} s3_req;

struct ckpt_s3 {
	ckpt_s3_cfg cfg;        /* with the defaults filled in; strings below */
	char scheme[8];
	char host[256];         /* host[:port] of the endpoint */
	int vhost;
	int aws;
	char region[64];
	char profile[128];
	char imds[256];
	pthread_mutex_t lock;   /* creds, stats, the pool, rng */
	s3_creds creds;
	int imds_creds;         /* creds came from the metadata service: refresh */
	char imds_token[256];
	int64_t imds_token_until;
	CURLM *pool[32];
	int npool;
	ckpt_s3_stats st;
	uint64_t part_bytes_now; /* part buffers held, the spare ones too */
	void *spare[256];        /* part buffers of cfg.part_bytes kept for the next upload */
	uint32_t nspare;
	uint64_t rng;
	_Atomic int cancel;      /* ckpt_s3_cancel: every request ends at once */
};

typedef struct s3_eng {
	ckpt_s3 *s3;
	CURLM *multi;
	s3_req *act[512];
	int nact;
} s3_eng;

void s3__eng_open(ckpt_s3 *s3, s3_eng *e);
/* Starts r (its first try); s3__eng_next returns it when done. 0, or
 * -E2BIG (not taken: too many at once). */
int s3__eng_add(s3_eng *e, s3_req *r);
/* Runs until one request is done (r->rc final) and returns it; NULL when
 * none is left. */
s3_req *s3__eng_next(s3_eng *e);
/* Lets transfers progress without waiting. */
void s3__eng_pump(void *e);
/* Stops the requests still running (they are left with rc -ECANCELED). */
void s3__eng_close(s3_eng *e);
/* One request to its end: r->rc. */
int s3__do(ckpt_s3 *s3, s3_req *r);
void s3__req_free(s3_req *r);
/* Copies r's message to err and returns r->rc. */
int s3__req_result(s3_req *r, char *err, size_t errcap);

/* ---- s3.c ------------------------------------------------------------- */

/* A bucket name and a key (NULL: none) S3 takes: 0 or -EINVAL. */
int s3__check(const char *bucket, const char *key, char *err, size_t errcap);

/* ---- s3_cred.c ---------------------------------------------------------- */

/* The credentials at open (env, profile, IMDS): 0 or -EACCES/-EINVAL. */
int s3__creds_init(ckpt_s3 *s3, char *err, size_t errcap);
/* A copy of valid credentials (refreshed first when they expire within 5
 * minutes): 0 or -errno. */
int s3__creds_get(ckpt_s3 *s3, s3_creds *out, char *err, size_t errcap);
/* err without any of c's secrets (replaced by "***"). */
void s3__scrub(const s3_creds *c, char *err);

#endif
