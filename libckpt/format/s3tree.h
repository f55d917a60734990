/* The SHARED tier on an S3-compatible object store (s3://BUCKET/PREFIX):
 * the same layout as the shared directory tree (shared.h), as keys:
 *
 *   PREFIX jobs/<job>/v<version:020>/r<rank:06>.ckpt   the shard objects
 *   PREFIX jobs/<job>/v<version:020>/COMMITTED         the commit marker
 *
 * The agents upload the shard objects, then the marker last, as one
 * conditional PUT (If-None-Match: *), once the coordinator committed the
 * version at SHARED; a version without its marker is never offered. Keys
 * are computed, never listed, on the save and restore paths: a LIST is for
 * the ckpt tool and for a restore that knows of no version at all (every
 * node and the coordinator lost). The client is storage/s3.h; its settings
 * come from CKPT_S3_* (ckpt__s3tree_open). docs/operations.md, "Shared
 * storage on an object store". */
#ifndef CKPT_FORMAT_S3TREE_H
#define CKPT_FORMAT_S3TREE_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "global.h"
#include "reader.h"
#include "shared.h"
#include "s3.h"

#define CKPT_S3TREE_MARKER UINT32_MAX       /* ckpt__s3tree_key: the version's marker */
#define CKPT_S3TREE_VERSION (UINT32_MAX - 1) /* ckpt__s3tree_key: the version's prefix (ends in '/') */
#define CKPT_S3TREE_KEY_MAX 1200

typedef struct ckpt_s3tree {
	ckpt_s3 *s3;
	char bucket[64];
	char prefix[1024]; /* "" or ends in '/' */
	char url[1100];    /* as given: names the tree in messages (no secret in it) */
} ckpt_s3tree;

/* 1 if s names an object store ("s3://..."), else 0. */
int ckpt__s3tree_is_url(const char *s);

/* Parses url and opens a client with the settings of the CKPT_S3_*
 * environment (ckpt_s3_cfg_env: endpoint, region, addressing, part size,
 * parts in flight, timeouts); credentials as every S3 tool takes them
 * (s3.h). Returns 0 or -errno with a message in err (no secret). */
int ckpt__s3tree_open(ckpt_s3tree *t, const char *url, char *err, size_t cap);
void ckpt__s3tree_close(ckpt_s3tree *t);

/* The key of rank's shard of (job, version), or CKPT_S3TREE_MARKER /
 * CKPT_S3TREE_VERSION. Returns 0, -EINVAL (a job that is not a valid id)
 * or -ENAMETOOLONG. */
int ckpt__s3tree_key(const ckpt_s3tree *t, char *out, size_t cap, const char *job, uint64_t version, uint32_t rank);

/* The marker of (job, version): 0, -ENOENT (none), -CKPT_ECORRUPT (not a
 * marker of this version), or the client's -errno (err says). */
int ckpt__s3tree_marker_read(ckpt_s3tree *t, const char *job, uint64_t version, ckpt_shared_mark *m, char *err,
                             size_t cap);
/* Writes it with If-None-Match: * (one already there is left as it is: 0). */
int ckpt__s3tree_marker_write(ckpt_s3tree *t, const char *job, uint64_t version, const ckpt_shared_mark *m,
                              char *err, size_t cap);

/* The versions of job that have a key under the tree (one LIST with a
 * delimiter, paged), ascending, malloc'd (*n may be 0). Names that are not
 * a version's are skipped (the listing is not trusted). 0 or -errno. */
int ckpt__s3tree_versions(ckpt_s3tree *t, const char *job, uint64_t **v, size_t *n, char *err, size_t cap);
/* The job ids with a key under PREFIX jobs/ (a LIST), sorted; *names is
 * one malloc'd block of *n entries of CKPT_JOB_MAX + 1 bytes. */
int ckpt__s3tree_jobs(ckpt_s3tree *t, char (**names)[65], size_t *n, char *err, size_t cap);

/* Opens the shard object at key: its size (HEAD), its header and tail (one
 * request of two ranges), its footer; every part checked as from a file.
 * s->fd is -1; close with ckpt__shard_close. 0, -ENOENT, -CKPT_ECORRUPT /
 * -CKPT_EFORMAT (why says), or the client's -errno. */
int ckpt__s3tree_shard_open(ckpt_s3tree *t, const char *key, ckpt_shard *s, char *why, size_t cap);

/* Reads the wanted chunks of the shard object at key (s opened from it) with
 * ranged GETs, many in flight, every chunk's checksum verified before the
 * sink (or the place) gets it, like ckpt__shard_read: o->want, o->place
 * (an uncompressed chunk is read straight there, then checked in place),
 * o->bufs/nbufs/buf_bytes (buffers for the others; NULL: allocated),
 * o->why. o->depth: chunks asked for at once (0: 16). Returns 0,
 * -CKPT_ECORRUPT (why names version, rank, region and chunk), the sink's
 * error, or the client's -errno. */
int ckpt__s3tree_shard_read(ckpt_s3tree *t, const char *key, const ckpt_shard *s, const ckpt_read_opts *o,
                            ckpt_sink_fn sink, void *arg);

/* Reads chunks[0..n) (indices into s's chunk table, s opened from key)
 * with ranged GETs, up to nbufs at once into bufs (each at least the
 * chunk size; NULL: buffers of its own), each chunk decoded and its
 * checksum verified before fn gets its raw bytes (global.h's gsource
 * read, for elastic restores). Returns 0, -CKPT_ECORRUPT / -EINVAL (why
 * names the chunk), fn's error, or the client's -errno. */
int ckpt__s3tree_chunks_read(ckpt_s3tree *t, const char *key, const ckpt_shard *s, const uint64_t *chunks, size_t n,
                             uint8_t **bufs, uint32_t nbufs, size_t buf_bytes, ckpt_gchunk_fn fn, void *arg,
                             char *why, size_t cap);

/* Deletes the SHARED copies of (job, version) for the ranks given: the
 * marker first (a version with an object missing is never complete), then
 * the shard objects in batched deletes. ranks NULL: every rank below
 * world. 0 or -errno. */
int ckpt__s3tree_delete(ckpt_s3tree *t, const char *job, uint64_t version, const uint32_t *ranks, size_t n,
                        char *err, size_t cap);

/* Aborts the multipart uploads in progress under PREFIX jobs/ for which
 * keep(arg, job, version, rank) returns 1 (keep NULL: every one). *aborted:
 * how many. 0 or -errno. */
typedef int (*ckpt_s3tree_pick_fn)(void *arg, const char *job, uint64_t version, uint32_t rank);
int ckpt__s3tree_abort_uploads(ckpt_s3tree *t, ckpt_s3tree_pick_fn pick, void *arg, size_t *aborted, char *err,
                               size_t cap);

/* Parses a key under t's prefix: 0 with (job, version, rank) for a shard
 * object, rank CKPT_S3TREE_MARKER for a marker; -EINVAL for anything else. */
int ckpt__s3tree_parse_key(const ckpt_s3tree *t, const char *key, char job[65], uint64_t *version, uint32_t *rank);

#endif
