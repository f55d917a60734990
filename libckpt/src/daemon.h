/* A context's link to its node's ckptd agent (config `daemon`): the
 * handshake, shard reports, the LOCAL_MEM tier and commit notices.
 * Internal. The client library is not thread-safe: every call here takes
 * the link's own mutex, so that the caller (saves, restores) and the io
 * thread (reports, notices) never talk over each other. */
#ifndef CKPT_DAEMON_H
#define CKPT_DAEMON_H

#include <stddef.h>
#include <stdint.h>

struct ckpt_ctx;
struct ckpt_save_op;

/* Loads the secret, connects as a rank and registers this process.
 * An agent that cannot be reached (nobody listening, no socket, timeout)
 * is an error only with cfg.daemon_required: otherwise it is logged and 0
 * is returned with ctx->daemon left NULL (embedded mode). A refused or
 * missing token, a bad address, another protocol version and a refused
 * registration always fail. Returns 0 or a negative code (the log says why). */
int ckpt__daemon_open(struct ckpt_ctx *ctx);
/* Unmaps, disconnects, frees. Accepts a context without a link. Only once no
 * save is in flight: their segments live in the mapping. */
void ckpt__daemon_close(struct ckpt_ctx *ctx);

/* 1 if the link can hand over DRAM segments: a Unix socket, still up. */
int ckpt__daemon_segments(struct ckpt_ctx *ctx);

/* io thread, with no save in flight: builds the page tables of up to
 * `budget` bytes of the agent's pool that no grant has faulted in yet, so
 * that later saves into those parts copy at memcpy speed. Returns 1 while
 * some remain. */
int ckpt__daemon_prefault_idle(struct ckpt_ctx *ctx, uint64_t budget);

/* io thread, idle, once per context: maps the agent's pool through a read
 * grant of this rank's newest committed DRAM copy, if the node holds one,
 * and points the idle page-table fill (ckpt__daemon_prefault_idle) at it,
 * so that a restarted rank's restore reads memory already mapped while it
 * was building its model. Nothing when the node holds no copy. */
void ckpt__daemon_warm(struct ckpt_ctx *ctx);

/* io thread: a HEARTBEAT when the link was quiet for a quarter of
 * cfg.heartbeat_timeout_ms; no answer within the timeout loses the link
 * (saves go to local disk only, as when the socket closes). */
void ckpt__daemon_heartbeat(struct ckpt_ctx *ctx);

/* 1 if the agent's protocol (what the handshake agreed) is 1.minor or later. */
int ckpt__daemon_speaks(struct ckpt_ctx *ctx, uint32_t minor);

/* io thread: takes every COMMIT_NOTICE that has arrived, without waiting. */
void ckpt__daemon_poll(struct ckpt_ctx *ctx);

/* ckpt_save: asks for a WRITE segment of `bytes` for this rank's shard of
 * version and returns it in our one mapping of the agent's pool, page
 * aligned and faulted in for writing. [out] seg valid until
 * ckpt__daemon_close; the rank must not touch it after its SHARD_DONE.
 * Returns 0; -ENOSPC (the agent's pool is full after eviction); -EEXIST (the
 * agent already holds a segment of this rank for version); -ENOTCONN (link
 * lost); -EPROTO and other negative codes. */
int ckpt__daemon_segment_write(struct ckpt_ctx *ctx, uint64_t version, uint64_t bytes, uint8_t **seg);

/* io thread: SHARD_DONE for one tier of op's shard, identified by bytes and
 * footer checksum. Returns 0 once the agent acknowledged it. */
int ckpt__daemon_shard_done(struct ckpt_ctx *ctx, const struct ckpt_save_op *op, uint32_t tier, uint64_t bytes,
                            uint64_t sum);

/* Waits (timeout_ms < 0: forever) until (version, tier) was announced
 * COMMITTED. Returns 0, -ETIMEDOUT (-EAGAIN for timeout 0) or -ENOTCONN
 * once the link is lost. */
int ckpt__daemon_wait_commit(struct ckpt_ctx *ctx, uint64_t version, uint32_t tier, int64_t timeout_ms);

/* Versions committed at some tier, as the coordinator sees them, ascending.
 * [out] v: free() it. [out] lost (may be NULL): the newest version of this
 * world size that was committed and is restorable no more, a shard's every
 * copy gone with lost nodes (VERSIONS' GONE, 1.6), 0 if none. Returns 0 or
 * a negative code. */
int ckpt__daemon_versions(struct ckpt_ctx *ctx, uint64_t **v, size_t *n, uint64_t *lost);

/* Asks for this rank's LOCAL_MEM copy of version, read-only. [out] buf, len:
 * the shard image, pinned by the agent (never evicted nor deleted) until
 * ckpt__daemon_segment_release(id) or the link closes. [out] cold: 1 if its
 * page tables are not built yet (ckpt__daemon_fault_in each part before
 * reading it). Returns 0, -ENOENT (no DRAM copy here), or a negative code. */
int ckpt__daemon_segment_read(struct ckpt_ctx *ctx, uint64_t version, const uint8_t **buf, uint64_t *len,
                              int *cold, uint64_t *id);
/* The same for another rank's copy held by this node's agent (elastic
 * restore reads the shards of the ranks of the saved job). */
int ckpt__daemon_segment_read_rank(struct ckpt_ctx *ctx, uint64_t version, uint32_t rank, const uint8_t **buf,
                                   uint64_t *len, int *cold, uint64_t *id);
/* io thread: about once a second (force: now, at close), the step times
 * ckpt_step measured since the last report, as one STEP_REPORT (mean over
 * the steps). */
void ckpt__daemon_steps(struct ckpt_ctx *ctx, int force);
/* Done reading the segment of a READ grant (SEGMENT_RELEASE). */
int ckpt__daemon_segment_release(struct ckpt_ctx *ctx, uint64_t id);
/* Builds the page tables of [p, p+len) of the mapping for reading, a
 * fault-around window per fault rather than a fault per page. Any thread;
 * an optimisation only. */
void ckpt__daemon_fault_in(const void *p, size_t len);


/* Partners (1.2). The agent's PARTNERS answer to SEGMENT_REQUEST of mode
 * CKPTD_SEG_PARTNERS (where this node's ranks replicate) or CKPTD_SEG_WHERE
 * (the nodes holding a PEER_MEM copy of this rank's shard of version).
 * [out] rep: the message; ckptd_msg_free it. */
struct ckptd_msg;
struct ckptd_client;
int ckpt__daemon_partners(struct ckpt_ctx *ctx, uint32_t mode, uint64_t version, struct ckptd_msg *rep);
/* The same about another rank's shard (SEG_WHERE of a saved rank). */
int ckpt__daemon_partners_rank(struct ckpt_ctx *ctx, uint32_t mode, uint64_t version, uint32_t rank,
                               struct ckptd_msg *rep);
/* Connects to another agent (a partner, host:port) as this rank, with the
 * job's secret. */
int ckpt__daemon_dial(struct ckpt_ctx *ctx, const char *addr, int timeout_ms, struct ckptd_client **out,
                      char *why, size_t cap);
/* Our mapping of the agent's pool (for registering it with the fabric):
 * -ENOENT before the first grant. The mapping is fixed while the agent lives. */
/* PREEMPT for this rank's job and node (the agent names the node). */
int ckpt__daemon_preempt(struct ckpt_ctx *ctx, uint64_t deadline_ns, uint32_t source, const char *text);
int ckpt__daemon_map_span(struct ckpt_ctx *ctx, uint8_t **base, size_t *len);
/* The host of the agent's --listen address (REGISTER_RANK's answer, 1.3),
 * where this rank's fabric endpoint binds: the network partners use.
 * Returns 0, or -ENOENT (an older agent, no --listen, a wildcard). */
int ckpt__daemon_fabric_host(struct ckpt_ctx *ctx, char *host, size_t cap);

#endif
