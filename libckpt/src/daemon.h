/* A context's link to its node's ckptd agent (config `daemon`): the
 * handshake, shard reports, the LOCAL_MEM tier and commit notices.
 * Internal. The client library is not thread-safe: every call here takes
 * the link's own mutex, so that the io thread (saves, notices) and a
 * restoring caller never talk over each other. */
#ifndef CKPT_DAEMON_H
#define CKPT_DAEMON_H

#include <stddef.h>
#include <stdint.h>

struct ckpt_ctx;
struct ckpt_save_op;

/* Loads the secret, connects as a rank and registers this process.
 * Returns 0 or a negative code (the log says why). */
int ckpt__daemon_open(struct ckpt_ctx *ctx);
/* Unmaps, disconnects, frees. Accepts a context without a link. */
void ckpt__daemon_close(struct ckpt_ctx *ctx);

/* io thread: takes every COMMIT_NOTICE that has arrived, without waiting. */
void ckpt__daemon_poll(struct ckpt_ctx *ctx);

/* io thread, after the shard is durable and in the local index: reports it
 * at LOCAL_DISK, and with LOCAL_MEM in the tiers copies the shard file into
 * a granted segment and reports that too (op->mem_error says when not). */
void ckpt__daemon_shard_saved(struct ckpt_ctx *ctx, struct ckpt_save_op *op, uint64_t footer_checksum);

/* Waits (timeout_ms < 0: forever) until (version, tier) was announced
 * COMMITTED. Returns 0 or -ETIMEDOUT (-EAGAIN for timeout 0). */
int ckpt__daemon_wait_commit(struct ckpt_ctx *ctx, uint64_t version, uint32_t tier, int64_t timeout_ms);

/* Versions committed at some tier, as the coordinator sees them, ascending.
 * [out] v: free() it. Returns 0 or a negative code. */
int ckpt__daemon_versions(struct ckpt_ctx *ctx, uint64_t **v, size_t *n);

/* Asks for this rank's LOCAL_MEM copy of version, read-only. [out] buf, len:
 * the shard image, valid until ckpt__daemon_close (the agent keeps it
 * pinned while we are connected). Returns 0 or a negative code. */
int ckpt__daemon_segment_read(struct ckpt_ctx *ctx, uint64_t version, const uint8_t **buf, uint64_t *len);

#endif
