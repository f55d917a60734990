/*
 * conn.h — the receiving side of one ckptd connection: accumulates the
 * bytes a non-blocking socket delivers and cuts them into frames.
 *
 * It enforces, as early as it can:
 *  - the frame size limit, as soon as a header is complete: an oversized
 *    frame is refused before any of its body is read or buffer is grown;
 *  - a bad magic, as soon as a header is complete (garbage is dropped at
 *    once);
 *  - a deadline per frame: a frame not complete within frame_timeout_ns of
 *    its first byte is refused (slow or stalled clients, "slowloris").
 * The buffer starts small and grows with the bytes that actually arrive,
 * never beyond the declared frame size, so a client cannot make the daemon
 * allocate much by promising a large frame.
 *
 * Pure logic: no sockets, no clock. The caller reads into the space this
 * gives it and passes its own monotonic time in nanoseconds.
 *
 *   for (;;) {                     // on POLLIN, or when the deadline passes
 *       ckptd_reader_space(r, &p, &cap);
 *       n = recv(fd, p, cap, 0);   // n > 0
 *       ckptd_reader_commit(r, n, now);
 *       while ((k = ckptd_reader_next(r, now, &frame, &len)) == 1)
 *           handle(frame, len);    // open (auth.h), then ckptd_msg_decode
 *       if (k < 0) drop the connection, log why;
 *   }
 *   poll timeout: ckptd_reader_deadline(r) - now.
 *
 * Errors are sticky: after one, every call returns it.
 * Thread-safety: one reader per connection, used by one thread at a time.
 */
#ifndef CKPTD_CONN_H
#define CKPTD_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPTD_DEFAULT_FRAME_TIMEOUT_NS (10ull * 1000000000ull)
#define CKPTD_READER_INITIAL 4096u /* bytes buffered before a header says more */

typedef struct ckptd_reader_opts {
	uint32_t size;             /* sizeof(ckptd_reader_opts): lets the struct grow */
	uint32_t max_frame;        /* largest frame accepted, header and seal included;
	                              0 or above CKPTD_MAX_FRAME: CKPTD_MAX_FRAME */
	uint64_t frame_timeout_ns; /* 0: CKPTD_DEFAULT_FRAME_TIMEOUT_NS */
} ckptd_reader_opts;

typedef struct ckptd_reader ckptd_reader;

/* [in] opts: may be NULL for the defaults. Returns 0, -EINVAL or -ENOMEM. */
int ckptd_reader_new(const ckptd_reader_opts *opts, ckptd_reader **out);
/* NULL is accepted. */
void ckptd_reader_free(ckptd_reader *r);

/* Where the next bytes go: *buf with room for *cap > 0 bytes, valid until
 * the next call on r. Never offers more than the current frame still needs
 * once its header is known, or CKPTD_READER_INITIAL before.
 * Returns 0; -ENOMEM; or the reader's sticky error. */
int ckptd_reader_space(ckptd_reader *r, uint8_t **buf, size_t *cap);

/* Records that n bytes were written into the space, received at now_ns.
 * Checks a header as soon as it is complete. Returns 0, -EINVAL if n is
 * more than the space offered, or an error as for ckptd_reader_next. */
int ckptd_reader_commit(ckptd_reader *r, size_t n, uint64_t now_ns);

/* Copies up to len bytes in (space + commit). Returns the number taken,
 * which may be less than len (call next, then feed the rest), or a negative
 * error. For tests and callers that hold bytes already. */
long ckptd_reader_feed(ckptd_reader *r, const void *data, size_t len, uint64_t now_ns);

/* The next complete frame. [out] frame, len: valid, and writable in place
 * (for ckptd_auth_open), until the next call on r.
 * Returns 1 with a frame; 0 if more bytes are needed; -EMSGSIZE if a header
 * declares a frame over the limit; -CKPT_ECORRUPT for a bad magic;
 * -ETIMEDOUT if the frame in progress started more than the timeout before
 * now_ns. Any error means: drop the connection. */
int ckptd_reader_next(ckptd_reader *r, uint64_t now_ns, uint8_t **frame, size_t *len);

/* Monotonic time by which the frame in progress must be complete, or
 * UINT64_MAX when no frame is in progress. */
uint64_t ckptd_reader_deadline(const ckptd_reader *r);

/* Bytes held (not yet returned as frames), and the buffer's size: for
 * tests and memory accounting. */
size_t ckptd_reader_buffered(const ckptd_reader *r);
size_t ckptd_reader_capacity(const ckptd_reader *r);

/* A reason for the sticky error (static string), or NULL. */
const char *ckptd_reader_why(const ckptd_reader *r);

#ifdef __cplusplus
}
#endif

#endif
