/* Handing the pool's fd to a local rank over a Unix-domain socket
 * (SCM_RIGHTS), and the rank's side: mapping a granted segment.
 *
 * The messages themselves (grant, SHARD_DONE...) belong to the protocol;
 * these calls only move bytes plus at most one fd, robustly: EINTR,
 * partial sends and reads, non-blocking sockets with a deadline, peers that
 * send fds nobody asked for (closed, never leaked), and no SIGPIPE.
 */
#ifndef CKPTD_MEM_FDPASS_H
#define CKPTD_MEM_FDPASS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sends the len bytes at buf (len >= 1) on a Unix socket; when fd >= 0 it
 * travels with the first byte (so the receiver must ask for it in the read
 * that gets that byte). Loops over partial sends and EINTR; on a
 * non-blocking socket waits for room until timeout_ms has passed in all
 * (-1: no limit). The caller keeps its own fd.
 * Returns 0, -EINVAL, -ETIMEDOUT, -EPIPE (peer gone), or another negative
 * errno from sendmsg/poll. After an error the stream is out of step and
 * should be closed. */
int ckptd_fdpass_send(int sock, const void *buf, size_t len, int fd, int timeout_ms);

/* Receives exactly len bytes (len >= 1) into buf.
 * fd: NULL when no fd is expected: any that arrives is closed. Otherwise
 * *fd gets the first fd that arrives during this read (close-on-exec), or
 * -1 when none did; the caller owns it. Any further fd is closed.
 * timeout_ms bounds the whole read (a slow peer cannot hold the caller);
 * -1: no limit. Loops over EINTR and short reads.
 * Returns len; 0 when the peer closed before the first byte (orderly end);
 * -ECONNRESET when it closed mid-message; -ETIMEDOUT; -EMSGSIZE when a
 * datagram was longer than len; or another negative errno. On error no fd
 * is returned (*fd = -1). */
ssize_t ckptd_fdpass_recv(int sock, void *buf, size_t len, int *fd, int timeout_ms);

enum {
	CKPTD_MAP_WRITE = 1,    /* map read-write (a saving rank); else read-only */
	CKPTD_MAP_POPULATE = 2, /* build the page tables now, not during the copy */
};

/* A rank's view of one granted segment. */
typedef struct ckptd_mapping {
	void *addr;      /* the segment's first byte */
	size_t len;      /* the segment's length */
	void *map_addr;  /* what mmap returned (page-aligned) */
	size_t map_len;
} ckptd_mapping;

/* Maps [off, off+len) of a pool fd, MAP_SHARED, so that what the rank writes
 * lands in the agent's pages. Checks first that the fd is sealed against
 * shrinking and long enough (a truncated fd would SIGBUS the rank).
 * The fd may be closed after this call; the mapping stays.
 * Returns 0 and fills *m, or -EINVAL (bad arguments, not a sealable fd),
 * -EPERM (not sealed against shrinking), -ERANGE (beyond the fd's end), or
 * the error of fstat/mmap. */
int ckptd_seg_map(int fd, uint64_t off, uint64_t len, int flags, ckptd_mapping *m);

/* Builds the page tables for [off, off+len) of a mapping now (off relative
 * to m->addr), so that a later copy into it runs at memcpy speed: a rank
 * that keeps one mapping of the pool calls it on each grant, before the save.
 * write: the copy will write (on the pool's shared memory a read fault maps
 * the pages writable already). Returns 0 or -ERANGE. */
int ckptd_seg_prefault(const ckptd_mapping *m, uint64_t off, uint64_t len, int write);

/* Page tables for [p, p+len) of a mapping of shared memory: one read per
 * 64 KiB, the kernel's fault-around maps the rest. */
void ckptd_seg_touch(const void *p, size_t len);

/* Unmaps and zeroes *m. Accepts a zeroed or already-unmapped mapping.
 * Returns 0 or the error of munmap. */
int ckptd_seg_unmap(ckptd_mapping *m);

#ifdef __cplusplus
}
#endif
#endif
