/* The S3 client of the SHARED tier.
 *
 * An S3-compatible object store client over libcurl's multi interface,
 * SigV4 signed by us (canonical URI and query string, UNSIGNED-PAYLOAD
 * never: payload hashes are real, and the server checks each body against
 * its signed hash: XAmzContentSHA256Mismatch, a body damaged on its way,
 * is retried like a 5xx), path-style or virtual-host addressing.
 * A leaf of storage/: includes nothing of libckpt or ckptd.
 *
 * Threading: one ckpt_s3 may be used from several threads at once (each
 * call runs its own requests to completion; credentials are refreshed
 * under a lock). Every call returns 0 or a negative errno, with a one-line
 * message in err (never a secret: no key, no token, no signature):
 *   -ENOENT      NoSuchKey / 404 on an object
 *   -ENXIO       NoSuchBucket ("bucket B does not exist")
 *   -EEXIST      412 on a conditional PUT (If-None-Match: * and the key exists, other bytes)
 *   -EACCES      403: InvalidAccessKeyId, SignatureDoesNotMatch (wrong secret),
 *                AccessDenied (no permission), RequestTimeTooSkewed (the clock:
 *                the message says by how much when the server says)
 *   -EINVAL      400s other than the above, bad URL, bad settings
 *   -ETIMEDOUT   the retries' bounded total ran out on timeouts / 5xx / 503 SlowDown /
 *                reset connections (each retried with jittered exponential backoff)
 *   -EIO         anything else (message: the HTTP status and the S3 error Code)
 */
#ifndef CKPT_STORAGE_S3_H
#define CKPT_STORAGE_S3_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

typedef struct ckpt_s3 ckpt_s3;

typedef struct ckpt_s3_cfg {
	uint32_t size;          /* sizeof(ckpt_s3_cfg) */
	const char *endpoint;   /* "http://127.0.0.1:7480"; NULL: https://s3.<region>.amazonaws.com */
	const char *region;     /* NULL: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1 */
	int addressing;         /* 0 auto (path style for a non-AWS endpoint), 1 path, 2 virtual host */
	uint64_t part_bytes;    /* multipart part size; 0: 64 MiB (min 5 MiB but the last) */
	uint32_t parts_in_flight; /* 0: 8. Memory of an upload <= parts_in_flight x part_bytes */
	uint32_t timeout_ms;    /* per request with no progress; 0: 30000 */
	uint32_t retry_total_ms;/* bound on one request's retries; 0: 120000 */
	const char *profile;    /* NULL: AWS_PROFILE, else "default" */
	const char *imds_endpoint; /* NULL: AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254 */
	int no_imds;            /* 1: never ask the instance metadata service (nor with AWS_EC2_METADATA_DISABLED=true) */
	uint32_t list_page;     /* keys one ListObjectsV2 / ListMultipartUploads page asks for; 0: 1000 */
	uint32_t delete_batch;  /* keys one DeleteObjects request carries; 0: 1000 (S3's most) */
	int32_t clock_skew_s;   /* tests: seconds added to the clock requests are signed with */
	int content_md5;        /* 1: every part and object also carries its Content-MD5 (about
	                           1.5 s of CPU a GiB). 0 (default): the signed SHA-256 payload
	                           hash alone, which S3 and Ceph's gateway check on every PUT and
	                           part (a body that does not match is refused, and sent again) */
} ckpt_s3_cfg;

/* cfg from the CKPT_S3_* environment (ckpt_s3_env_help lists them), on top
 * of what cfg holds (zero it first: every field 0 is the defaults). Strings
 * point into the environment. Returns 0, or -EINVAL with a message naming
 * the variable and what it wants. */
int ckpt_s3_cfg_env(ckpt_s3_cfg *cfg, char *err, size_t errcap);

/* The CKPT_S3_* variables, their defaults and meaning, one a line (for
 * ckptd --help and ckpt --help-config). */
void ckpt_s3_env_help(FILE *out);

/* "s3://bucket/prefix/" -> bucket and prefix (no leading '/', may be empty,
 * ends in '/' when not empty). Checks S3's bucket naming rules and that the
 * prefix has no "..", no "//", no control bytes. Returns 0 or -EINVAL. */
int ckpt_s3_url_parse(const char *url, char *bucket, size_t bcap, char *prefix, size_t pcap);

/* Credentials in the order every S3 tool uses: AWS_ACCESS_KEY_ID /
 * AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN; the profile in
 * AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials) and AWS_CONFIG_FILE
 * (~/.aws/config); IMDSv2 (PUT token, then the role's credentials),
 * refreshed before they expire. Returns 0 or -errno (-EACCES: no
 * credentials anywhere, the message says where it looked). */
int ckpt_s3_open(ckpt_s3 **out, const ckpt_s3_cfg *cfg, char *err, size_t errcap);
void ckpt_s3_close(ckpt_s3 *s3);

/* For a caller that is stopping (an agent's SIGTERM): with on, every
 * request of the client in flight or waiting for its next try, on any
 * thread, ends within a poll (0.2 s) with -ECANCELED, and new ones fail at
 * once with it, so no call waits out CKPT_S3_RETRY_TOTAL; an upload cut
 * short is not aborted (its AbortMultipartUpload is cancelled too): the
 * next start's clean-up and gc abort it, as after a kill. Off again
 * with 0. Thread-safe. */
void ckpt_s3_cancel(ckpt_s3 *s3, int on);

/* Counters of what this client sent (for tests and metrics): requests
 * counts every try, retries the tries after a failure that the client
 * itself retried (curl also retries, unseen, a request on a reused
 * connection that died before any answer), lists the list pages asked. */
typedef struct ckpt_s3_stats {
	uint64_t requests, retries, lists, bytes_up, bytes_down;
	uint64_t part_bytes_peak; /* most bytes of upload part buffers held at once */
	uint64_t part_bytes_held; /* ... held now (spares kept for the next upload) */
} ckpt_s3_stats;
void ckpt_s3_stats_get(ckpt_s3 *s3, ckpt_s3_stats *st);

/* A small object in one PUT (with Content-MD5 when cfg.content_md5, or
 * for a conditional PUT, whose ETag is compared with it). flags CKPT_S3_IF_NONE_MATCH:
 * "If-None-Match: *" (the commit marker): -EEXIST when the key is there
 * with other bytes; there with these very bytes (its ETag is their MD5:
 * a try whose answer was lost wrote them, or a writer of the same
 * content) it is 0. */
#define CKPT_S3_IF_NONE_MATCH 1u
int ckpt_s3_put(ckpt_s3 *s3, const char *bucket, const char *key, const void *data, size_t len,
                uint32_t flags, char *err, size_t errcap);

/* A large object as a multipart upload (a single PUT when len <= part_bytes),
 * parts_in_flight parts at once, each part's bytes produced by fill into a
 * page-aligned buffer of the client's (bounded memory whatever len), in order of their
 * offsets, once each, and sent with their signed SHA-256 (and Content-MD5
 * when cfg.content_md5); fill may check the bytes (chunk checksums) and fail the
 * upload by returning < 0. On any failure the multipart upload is aborted
 * (best effort; gc aborts what is left). Returns 0 or -errno. */
typedef int (*ckpt_s3_fill_fn)(void *arg, uint64_t off, void *buf, size_t len);
int ckpt_s3_upload(ckpt_s3 *s3, const char *bucket, const char *key, uint64_t len, ckpt_s3_fill_fn fill,
                   void *arg, char *err, size_t errcap);

/* An upload's part buffers stay with the client for the next one (parts in
 * flight of them at most: a new buffer's pages are faulted and zeroed
 * again, about a tenth of a flush's CPU); this frees them (so does
 * ckpt_s3_close). For a caller about to be idle. Thread-safe. */
void ckpt_s3_trim(ckpt_s3 *s3);

/* HEAD: the object's size (size may be NULL). -ENOENT if none, -ENXIO
 * when the bucket is missing (a refused HEAD has no body to say why: a
 * one-byte GET of the key then asks). */
int ckpt_s3_head(ckpt_s3 *s3, const char *bucket, const char *key, uint64_t *size, char *err, size_t errcap);

/* Ranged GETs of one object into caller memory, up to parts_in_flight at
 * once; each range must come back whole (a short body is -EIO).
 * ranges[i].buf has ranges[i].len bytes (a range of 0 bytes is skipped).
 * A range past the object's end is -EIO (416) or short (-EIO); a broken
 * or truncated answer is retried as a failed request is. Returns 0 or
 * -errno. */
typedef struct ckpt_s3_range {
	uint64_t off, len;
	void *buf;
} ckpt_s3_range;
int ckpt_s3_get_ranges(ckpt_s3 *s3, const char *bucket, const char *key, ckpt_s3_range *ranges, size_t n,
                       char *err, size_t errcap);

/* Deletes keys (DeleteObjects, 1000 a request; a key already gone is not an
 * error). Returns 0 or -errno. */
int ckpt_s3_delete(ckpt_s3 *s3, const char *bucket, const char *const *keys, size_t n, char *err, size_t errcap);

/* ListObjectsV2 of prefix (paged; every call counts in stats.lists): cb
 * gets each key and size; a non-zero return from cb stops the walk and is
 * returned. delimiter NULL or "/" (then common prefixes come as keys ending
 * in '/', size 0). Keys are as the server sent them: callers must check
 * them (the daemon trusts no name from the wire). */
typedef int (*ckpt_s3_list_fn)(void *arg, const char *key, uint64_t size);
int ckpt_s3_list(ckpt_s3 *s3, const char *bucket, const char *prefix, const char *delimiter,
                 ckpt_s3_list_fn cb, void *arg, char *err, size_t errcap);

/* Multipart uploads in progress under prefix (ListMultipartUploads, paged
 * as ckpt_s3_list), and aborting one (-ENOENT: no such upload any more,
 * completed or aborted). For restart and gc: no parts leak. */
typedef int (*ckpt_s3_upload_fn)(void *arg, const char *key, const char *upload_id);
int ckpt_s3_list_uploads(ckpt_s3 *s3, const char *bucket, const char *prefix, ckpt_s3_upload_fn cb, void *arg,
                         char *err, size_t errcap);
int ckpt_s3_abort(ckpt_s3 *s3, const char *bucket, const char *key, const char *upload_id, char *err,
                  size_t errcap);

#endif
