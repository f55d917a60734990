/*
 * server.h — the core of the ckptd daemon: listeners, an epoll event loop,
 * per-connection state (frame reader, handshake, sealed frames, output
 * queue, deadlines) and a table of message handlers that the agent and
 * coordinator roles fill in.
 *
 * Every connection begins with the handshake of auth.h. The secret for a
 * HELLO's job is derived from the cluster secret (ckptd_secret_derive_job);
 * for cluster scope it is the cluster secret. A job's session reaches its
 * own job only: the dispatch refuses any message naming another (the
 * message table says which carry a job; see ckptd_msg_job_allowed).
 * After the handshake every frame is sealed both ways; handlers see decoded
 * requests only and answer with ckptd_session_send().
 *
 * A misbehaving peer (garbage, oversized or truncated frames, too slow, not
 * reading its replies, failed handshake) is dropped with one log line naming
 * it and the reason; everyone else keeps being served.
 *
 * No global state: everything hangs off the ckptd_server. Single-threaded:
 * all calls from the thread that runs ckptd_server_run, handlers included.
 * SIGTERM and SIGINT are taken through a signalfd: ckptd_server_new blocks
 * them in the calling thread (create the server before other threads).
 */
#ifndef CKPTD_SERVER_SERVER_H
#define CKPTD_SERVER_SERVER_H

#include <stdint.h>
#include <sys/types.h>

#include "wire/auth.h"
#include "config.h"
#include "log.h"
#include "metrics.h"
#include "wire/proto.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckptd_server ckptd_server;
typedef struct ckptd_session ckptd_session;

/* Handles one decoded request on an authenticated session.
 * Answer with ckptd_session_send (any number of frames, or none).
 * Return 0 to keep the connection, or a negative code to drop it (logged
 * with the reason ckptd_session_drop_reason gives, or the code). */
typedef int (*ckptd_handler_fn)(ckptd_server *srv, ckptd_session *s, const ckptd_msg *req, void *arg);

/* Creates a server from cfg and the cluster secret (both borrowed: they
 * must outlive the server). Binds the configured listeners only; creates the
 * Unix socket 0600, replacing a stale socket file but never a live one or a
 * file that is not a socket. Blocks SIGTERM and SIGINT in this thread.
 * [out] err, errcap: the reason on failure, for the operator.
 * Returns 0; -EADDRINUSE (a live daemon owns the socket or port); -EEXIST
 * (the socket path is taken by something else); -EINVAL (nothing to listen
 * on, bad address); -ENOMEM; other -errno. */
int ckptd_server_new(const ckptd_config *cfg, const ckptd_secret *cluster, const ckptd_log *log,
                     ckptd_server **out, char *err, size_t errcap);

/* Closes every connection and listener, removes the socket file (if it is
 * still ours), restores the signal mask. NULL is accepted. */
void ckptd_server_free(ckptd_server *srv);

/* Registers handler for message type `type`, replacing the one there (the
 * built-in STATUS handler may be replaced). handler NULL removes it.
 * Returns 0, -EINVAL (a handshake or reply-only type), -ENOSPC. */
int ckptd_server_on(ckptd_server *srv, uint16_t type, ckptd_handler_fn handler, void *arg);

/* Runs the loop until SIGTERM/SIGINT or ckptd_server_stop, then stops
 * accepting, flushes replies (up to cfg->shutdown_grace_ms), closes
 * listeners and removes the socket. Returns 0 on a clean stop, or a
 * negative errno if the loop itself failed. */
int ckptd_server_run(ckptd_server *srv);

/* Asks the loop to stop as a signal would (from a handler). */
void ckptd_server_stop(ckptd_server *srv);
/* 1 once the daemon is stopping: sessions that end now end because it goes. */
int ckptd_server_stopping(const ckptd_server *srv);

/* The bound TCP port (useful with port 0), or 0 with no TCP listener. */
int ckptd_server_tcp_port(const ckptd_server *srv);

/* Connections open now. */
uint32_t ckptd_server_connections(const ckptd_server *srv);
const ckptd_config *ckptd_server_config(const ckptd_server *srv);
const ckptd_log *ckptd_server_log(const ckptd_server *srv);
/* The metrics registry (metrics.h): always there; served over HTTP when
 * cfg->metrics_listen is set. Lives as long as the server. */
ckptd_metrics *ckptd_server_metrics(const ckptd_server *srv);
/* Node name: cfg->node or the host name. */
const char *ckptd_server_node(const ckptd_server *srv);

/* ---------------------------------------------------------------- role hooks */

/* Called in the loop's thread when fd is readable (or has hung up). */
typedef void (*ckptd_watch_fn)(ckptd_server *srv, int fd, uint32_t events, void *arg);
/* Called in the loop's thread (timers, after-events). */
typedef void (*ckptd_hook_fn)(ckptd_server *srv, void *arg);

/* Watches a role's own fd (e.g. an agent's link to its coordinator) for
 * input. The fd stays the caller's; unwatch it before closing it.
 * Returns 0, -ENOSPC (16 at most), or the error of epoll_ctl. */
int ckptd_server_watch(ckptd_server *srv, int fd, ckptd_watch_fn fn, void *arg);
void ckptd_server_unwatch(ckptd_server *srv, int fd);

/* Calls fn every period_ms (> 0), first one period from now.
 * Returns 0, -EINVAL, -ENOSPC (8 at most). */
int ckptd_server_every(ckptd_server *srv, uint64_t period_ms, ckptd_hook_fn fn, void *arg);

/* Calls fn after each batch of events the loop handled (and after each
 * timeout): what a batch of requests brought can be acted on at once, e.g.
 * every SHARD_DONE of the batch committed in one transaction. Replies that
 * hooks queue are flushed right after. Returns 0, -EINVAL, -ENOSPC (4). */
int ckptd_server_after_events(ckptd_server *srv, ckptd_hook_fn fn, void *arg);

/* ---------------------------------------------------------------- sessions */

enum { CKPTD_TRANSPORT_TCP = 1, CKPTD_TRANSPORT_UNIX = 2 };

/* Queues one message to the peer, sealed (after the handshake). fd >= 0
 * travels with the frame's first byte (SCM_RIGHTS; Unix sockets only); it
 * is duplicated, the caller keeps its own. Pass -1 for none.
 * Returns 0; -EINVAL (the message does not encode); -ENOTSUP (an fd on TCP);
 * -ENOBUFS (the peer is not reading: the connection will be dropped);
 * -EPIPE (the session is closing); -ENOMEM. */
int ckptd_session_send(ckptd_session *s, const ckptd_msg *m, int fd);

/* Queues ERROR(code, text). text: printable ASCII, may be NULL. */
int ckptd_session_send_error(ckptd_session *s, uint32_t code, const char *text);

/* What the handshake established. job: "" for cluster scope. */
const char *ckptd_session_job(const ckptd_session *s);
uint32_t ckptd_session_role(const ckptd_session *s);
int ckptd_session_transport(const ckptd_session *s);
/* "tcp:127.0.0.1:5555" or "unix:pid=123,uid=1000" — for logs. */
const char *ckptd_session_peer(const ckptd_session *s);
/* SO_PEERCRED of a Unix-socket peer: returns 0 and fills, or -ENOENT (TCP). */
int ckptd_session_peer_cred(const ckptd_session *s, pid_t *pid, uid_t *uid, gid_t *gid);
/* The version the session speaks (packed major/minor). */
uint32_t ckptd_session_version(const ckptd_session *s);

/* Per-session slot for a role's own state; the role frees it through
 * the destructor when the session ends. */
void ckptd_session_set_data(ckptd_session *s, void *data, void (*destroy)(void *));
void *ckptd_session_data(const ckptd_session *s);

/* Drops the session from outside its handlers (a heartbeat timeout): one
 * log line with why, then close; its role's destructor runs as for any
 * close. */
void ckptd_session_drop(ckptd_session *s, const char *why);

/* Sets the reason logged when a handler returns an error (static string). */
void ckptd_session_drop_reason(ckptd_session *s, const char *why);

#ifdef __cplusplus
}
#endif

#endif
