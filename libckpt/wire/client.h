/*
 * client.h — a small synchronous client of ckptd: connect to a daemon at
 * "unix:/path" or "host:port", authenticate (auth.h), then exchange sealed
 * requests and replies. Used by the tests, and by libckpt and the ckpt tool.
 *
 * Every wait is bounded: connecting, the handshake, each send and each
 * reply have the client's timeout (ckptd_client_set_timeout).
 *
 * Thread-safety: one client per thread at a time. No global state; no
 * signals (SIGPIPE is avoided with MSG_NOSIGNAL).
 * Errors: 0 or a negative code, -errno or -CKPT_E* (ckpt.h).
 */
#ifndef CKPTD_SERVER_CLIENT_H
#define CKPTD_SERVER_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPTD_CLIENT_DEFAULT_TIMEOUT_MS 10000

typedef struct ckptd_client ckptd_client;

/* Connects to addr and authenticates as `role` for `job` ("" or NULL:
 * cluster scope) with `secret` (the job's secret, or the cluster secret;
 * only used during this call). timeout_ms bounds the whole of it (<= 0:
 * CKPTD_CLIENT_DEFAULT_TIMEOUT_MS), and becomes the client's timeout.
 * [out] err, errcap: a reason for humans on failure (may be NULL).
 * Returns 0; -EINVAL (bad address, role or job); -ENOKEY (no secret);
 * -ECONNREFUSED / -ENOENT (nobody listening); -ETIMEDOUT; -EACCES (refused:
 * wrong secret, or a job this daemon does not serve); -EBUSY (the daemon is
 * at its connection limit); -CKPT_EFORMAT (another protocol major version);
 * -EPROTO (the daemon broke the protocol); -ECONNRESET; -ENOMEM. */
int ckptd_client_connect(const char *addr, const char *job, uint32_t role, const ckptd_secret *secret,
                         int timeout_ms, ckptd_client **out, char *err, size_t errcap);

/* Closes the connection and frees. NULL is accepted. */
void ckptd_client_close(ckptd_client *c);

/* Sets the timeout of each later wait, in ms (> 0). */
void ckptd_client_set_timeout(ckptd_client *c, int timeout_ms);

/* Sends req (sealed) and waits for the answer. Unsolicited COMMIT_NOTICE
 * frames that arrive first go to the notice callback (dropped without one).
 * [out] reply: the answer, possibly an ERROR message (that is still a
 * return of 0: read reply->type); free with ckptd_msg_free.
 * Returns 0; -ETIMEDOUT; -ECONNRESET (the daemon closed); -EBADMSG (a seal
 * failed); -EPROTO (undecodable answer); -EINVAL (req does not encode).
 * After an error other than -EINVAL the connection is unusable. */
int ckptd_client_call(ckptd_client *c, const ckptd_msg *req, ckptd_msg *reply);

/* The two halves of call, for conversations that are not one-to-one. */
int ckptd_client_send(ckptd_client *c, const ckptd_msg *m);
int ckptd_client_recv(ckptd_client *c, ckptd_msg *m);

/* Like recv, without waiting: returns 1 and fills m when a whole frame has
 * arrived (buffered or readable now), 0 when none has yet (a partial frame
 * stays buffered), or recv's errors. For callers driven by poll/epoll on
 * ckptd_client_fd: call it until it returns 0 after each wake-up, since
 * frames already buffered do not wake poll. */
int ckptd_client_poll(ckptd_client *c, ckptd_msg *m);

/* The protocol version the handshake agreed on (packed major/minor): a
 * message or value of a later minor must not be sent to this peer. */
uint32_t ckptd_client_version(const ckptd_client *c);

/* Called with each COMMIT_NOTICE that call() passes over. */
void ckptd_client_on_notice(ckptd_client *c, void (*fn)(const ckptd_msg *m, void *arg), void *arg);

/* The file descriptor that came with the last frame received (SEGMENT_GRANT
 * over a Unix socket), now the caller's; -1 if none. */
int ckptd_client_take_fd(ckptd_client *c);

/* The socket, for poll() by callers that wait on several things. */
int ckptd_client_fd(const ckptd_client *c);

#ifdef __cplusplus
}
#endif

#endif
