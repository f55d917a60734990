/* The SHARED flush's state, shared by agent_shared.c (the queue, the
 * thread, the directory tree) and agent_shared_s3.c (the object store). */
#ifndef CKPTD_AGENT_SHARED_INT_H
#define CKPTD_AGENT_SHARED_INT_H

#include "agent_int.h"
#include "format/format.h"
#include "format/s3tree.h"

#include <pthread.h>

#define BLOCK (1u << 20)          /* bytes read and written at once */
#define BURST_NS 100000000ull     /* the throttle saves up at most 0.1 s of its rate */
#define TICK_MS 1000
#define PATH_BUF (CKPTD_PATH_MAX + 256)
#define URGENT_MAX 16             /* emergency versions remembered at once */

enum { SH_COPY = 1, SH_MARK };

typedef struct sh_item {
	struct sh_item *next; /* finished, for the loop */
	int kind;
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t rank, world_size;
	uint64_t bytes, checksum, lineage; /* the LOCAL_DISK record's: the copy is the same shard */
	char src[PATH_BUF];                /* the rank's file */
	/* outcome, for the loop */
	int err;
	int cancelled; /* its version was deleted meanwhile */
	int placed;    /* the file is under its final name */
	uint64_t copied; /* bytes written; 0: it was in place already */
	uint64_t ns;
	char why[1024];
} sh_item;

struct ckptd_shared {
	ckptd_agent *a;
	char dir[PATH_BUF];     /* --shared-dir */
	char partial[PATH_BUF]; /* dir/.partial/<node>: this node's temp files */
	ckpt_s3tree *tree;      /* --shared-dir s3://...: the object store (agent_shared_s3.c); NULL: a directory */
	uint64_t rate;
	uint64_t retry_ms;      /* --shared-retry */
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* work queued, stop (CLOCK_MONOTONIC) */
	pthread_t thr;
	int started, stop;
	sh_item *q;             /* waiting */
	size_t nq, capq;
	sh_item *cur;           /* the one in flight (the thread's) */
	int cancel;             /* cur's version was deleted: drop it */
	sh_item *done;          /* finished, for the loop (newest first) */
	int pipe[2];            /* the thread wakes the loop */
	uint64_t next_ns;       /* the throttle (thread only) */
	uint64_t retry_at_ns;   /* loop: rescan the index then (0: nothing failed) */
	struct {                /* emergency versions aimed at SHARED (mu) */
		char job[CKPTD_JOB_MAX + 1];
		uint64_t version;
	} urgent[URGENT_MAX];
	size_t nurgent;         /* the newest URGENT_MAX, round robin */
};

/* Waits for the throttle to allow `bytes` more (an emergency's version is
 * not throttled). -ECANCELED on stop or a deletion of the version in
 * flight. Thread only. */
int ckptd__sh_pace(ckptd_shared *sh, uint64_t bytes);
/* -ECANCELED on stop or a deletion of the version in flight. */
int ckptd__sh_check(ckptd_shared *sh);
/* 1 if the shard s is it's (job, version, rank). */
int ckptd__sh_same_shard(const ckpt_shard *s, const sh_item *it);

/* agent_shared_s3.c */
/* Opens the object store of --shared-dir s3://...; 0 or -errno (err says). */
int ckptd__sh_s3_open(ckptd_shared *sh, const char *url, char *err, size_t errcap);
void ckptd__sh_s3_close(ckptd_shared *sh);
/* The thread's first act: aborts the multipart uploads a killed run of
 * this agent left, those of the shards its index holds. */
void ckptd__sh_s3_clean(ckptd_shared *sh);
/* Uploads it's shard file as its object, every chunk checked on its way. */
int ckptd__sh_s3_copy(ckptd_shared *sh, sh_item *it);
/* The version's commit marker, one conditional PUT. */
int ckptd__sh_s3_mark(ckptd_shared *sh, sh_item *it);
/* Deletes ranks' objects of (job, version), the marker first. */
int ckptd__sh_s3_delete(ckptd_shared *sh, const char *job, uint64_t version, const uint32_t *ranks, size_t n);
/* Deletes one object it made (a flush of a version deleted meanwhile). */
void ckptd__sh_s3_unplace(ckptd_shared *sh, const sh_item *it);

#endif
