/* The node-DRAM pool of the ckptd agent (tier LOCAL_MEM).
 *
 * One memfd, sized once, mapped once and pre-faulted by the agent. Segments
 * are carved from it for (job, version, rank) and handed to local ranks as
 * (pool fd, offset, length); a rank maps its segment and copies its shard
 * into it. The pages belong to the memfd, so the copy outlives the rank.
 *
 * Caveats
 * - The pool fd grants the whole pool: a process that holds it can map any
 *   offset. Hand it only to ranks that may see every job in the pool (the
 *   agent opens one pool per job: ckptd/roles/agent_pools.c). Data integrity
 *   does not rest on clients: every chunk carries its checksum.
 * - A client mapping cannot be revoked. A segment freed or evicted while a
 *   rank still has it mapped can be reused; ranks unmap after SHARD_DONE and
 *   readers pin what they read (ckptd_pool_seg_pin).
 * - fork: the child inherits the mapping; the fd is close-on-exec.
 * - Threads: every call takes the pool's mutex; the memory itself is not
 *   guarded (writers and readers agree through segment states).
 * - No call logs; errors are negative errno values.
 *
 * Eviction policy (when an allocation does not fit)
 * - A version's segments leave the pool together; a version can be evicted
 *   only when it is COMMITTED, is not the newest COMMITTED version of its job
 *   held in this pool, and none of its segments is WRITING or pinned.
 * - Candidates in order: first the requesting job's, oldest version number
 *   first; then other jobs', oldest first by the order in which the pool
 *   first saw each version.
 * - The pool evicts the shortest prefix of that list after which the request
 *   fits (in one contiguous extent, within max_segments). If even the whole
 *   list would not make it fit, nothing is evicted and the call returns
 *   -ENOSPC: the caller falls back to disk.
 * - Never evicted: the newest COMMITTED version of a job, a PENDING version,
 *   a version with a WRITING or pinned segment.
 */
#ifndef CKPTD_MEM_POOL_H
#define CKPTD_MEM_POOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CKPTD_JOB_MAX 64 /* bytes of a job id, as libckpt's job_id */

enum ckptd_pool_huge {
	CKPTD_POOL_HUGE_AUTO = 0, /* explicit huge pages if reserved, else normal pages */
	CKPTD_POOL_HUGE_OFF,
	CKPTD_POOL_HUGE_ON,       /* fail with the kernel's error when none are available */
};

enum ckptd_seg_state {
	CKPTD_SEG_WRITING = 1, /* granted; a rank is filling it */
	CKPTD_SEG_HELD,        /* the shard is complete in DRAM */
};

enum ckptd_ver_state {
	CKPTD_VER_PENDING = 1, /* not yet committed: never evicted */
	CKPTD_VER_COMMITTED,
};

/* What the pool says about one segment. job points into the pool and stays
 * valid until the segment is freed; copy it to keep it. */
typedef struct ckptd_seg_info {
	uint64_t id;       /* handle; never reused within one pool */
	const char *job;
	uint64_t version;
	uint32_t rank;
	uint32_t pins;     /* readers holding it (ckptd_pool_seg_pin) */
	uint64_t off;      /* byte offset in the pool's fd; a multiple of align */
	uint64_t len;      /* bytes asked for */
	uint64_t cap;      /* bytes reserved: len rounded up to align */
	int state;         /* enum ckptd_seg_state */
	int ver_state;     /* enum ckptd_ver_state */
} ckptd_seg_info;

/* Called once per evicted segment, after the pool's mutex is released and
 * before ckptd_pool_alloc returns; the agent updates its index (and tells the
 * coordinator the LOCAL_MEM copy is gone). info->job is valid only during the
 * call. The callback may call into the pool. */
typedef void (*ckptd_pool_evict_fn)(void *arg, const ckptd_seg_info *info);

typedef struct ckptd_pool_opts {
	uint32_t size;            /* sizeof(ckptd_pool_opts): lets the struct grow */
	uint64_t bytes;           /* pool size; rounded up to the page size */
	int huge;                 /* enum ckptd_pool_huge */
	uint32_t max_segments;    /* bound on bookkeeping; 0: 65536 */
	const char *name;         /* memfd name (seen in /proc/PID/fd); NULL: "ckptd-pool" */
	ckptd_pool_evict_fn on_evict; /* may be NULL */
	void *evict_arg;
	const int *cancel;        /* may be NULL; set nonzero (from another thread) while
	                             the pool is pre-faulted: ckptd_pool_open stops within
	                             64 MiB and returns -ECANCELED */
} ckptd_pool_opts;

typedef struct ckptd_pool_stats {
	uint64_t bytes;           /* pool size */
	uint64_t align;           /* page size of the pool: 4 KiB, or the huge page size */
	uint64_t used;            /* bytes reserved by segments */
	uint64_t free;
	uint64_t largest_free;    /* the largest request that fits without eviction */
	uint32_t free_extents;    /* free runs (fragmentation) */
	uint32_t segments;
	uint32_t versions;
	uint64_t evicted_versions; /* since open */
	uint64_t evicted_bytes;
	int hugetlb;              /* backed by explicit huge pages */
	int locked;               /* mlock succeeded */
} ckptd_pool_stats;

typedef struct ckptd_pool ckptd_pool;

/* Creates the memfd, sizes it, seals its size (and its seals), maps it and
 * faults every page in. Slow (it touches every page) and done once.
 * Returns 0 and *out, or -EINVAL (bad opts), -ENOMEM, or the kernel's error
 * from memfd_create/ftruncate/mmap/fcntl. */
int ckptd_pool_open(ckptd_pool **out, const ckptd_pool_opts *opts);

/* Unmaps and closes. Mappings that ranks hold stay valid until they unmap.
 * Accepts NULL. */
void ckptd_pool_close(ckptd_pool *p);

/* The pool's fd, to pass to ranks (ckptd_fdpass_send). Owned by the pool. */
int ckptd_pool_fd(const ckptd_pool *p);

/* The agent's own mapping of the whole pool: segment s lives at
 * base + s.off. Valid until ckptd_pool_close. */
void *ckptd_pool_base(const ckptd_pool *p);

void ckptd_pool_stats_get(ckptd_pool *p, ckptd_pool_stats *out);

/* Reserves len bytes for (job, version, rank), first fit, evicting as the
 * policy above allows. The segment starts WRITING; a version first seen here
 * starts PENDING. On success fills *out (may be NULL) and returns 0.
 * Errors: -EINVAL (len 0, job empty or longer than CKPTD_JOB_MAX),
 * -EEXIST (that rank already has a segment in that version),
 * -ENOSPC (does not fit even after the eviction the policy allows, or is
 * larger than the pool; nothing was evicted). */
int ckptd_pool_alloc(ckptd_pool *p, const char *job, uint64_t version, uint32_t rank,
                     uint64_t len, ckptd_seg_info *out);

/* WRITING -> HELD: the rank reported its shard complete.
 * -ENOENT (no such segment), -EALREADY (already HELD). */
int ckptd_pool_seg_done(ckptd_pool *p, uint64_t id);

/* Frees a segment in any state (a writer that disconnected before it was
 * done, retention). -ENOENT, -EBUSY (pinned). */
int ckptd_pool_seg_free(ckptd_pool *p, uint64_t id);

/* Readers (restore, the flush to SHARED) pin a HELD segment so that it is not
 * evicted or freed under them. -ENOENT, -EAGAIN (still WRITING). */
int ckptd_pool_seg_pin(ckptd_pool *p, uint64_t id);
int ckptd_pool_seg_unpin(ckptd_pool *p, uint64_t id); /* -ENOENT, -EINVAL (not pinned) */

/* Finds the segment of (job, version, rank). -ENOENT. */
int ckptd_pool_find(ckptd_pool *p, const char *job, uint64_t version, uint32_t rank,
                    ckptd_seg_info *out);

/* Tells the pool a version's commit state (the coordinator's word).
 * -ENOENT when the pool holds no segment of it, -EINVAL for a bad state. */
int ckptd_pool_version_set(ckptd_pool *p, const char *job, uint64_t version, int state);

/* Frees every segment of a version (retention, an aborted version).
 * Returns the number freed, or -ENOENT; -EBUSY when a segment is pinned or
 * WRITING (the others are freed). */
int ckptd_pool_version_drop(ckptd_pool *p, const char *job, uint64_t version);

/* Copies up to cap segment records, oldest version first, into out and sets
 * *n to the number of segments held (which may exceed cap). The job pointers
 * are valid only until the next call that frees a segment. */
void ckptd_pool_list(ckptd_pool *p, ckptd_seg_info *out, size_t cap, size_t *n);

/* Checks the allocator's invariants (free extents sorted, coalesced, and
 * with the segments tiling the pool exactly). 0 or -EFAULT. For tests. */
int ckptd_pool_check(ckptd_pool *p);

#ifdef __cplusplus
}
#endif
#endif
