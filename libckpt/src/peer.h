/* The PEER_MEM tier in a rank (peer.c): a thread of its own copies each
 * shard image, once its LOCAL_MEM copy is reported, into the DRAM of
 * partner nodes' agents over libfabric (storage/fabric.h); restore reads
 * such a copy back, chunk by chunk, into staging slots.
 *
 * Bounded: one image is being copied and at most one waits; a newer save
 * replaces the waiting one, which is skipped (counted in the step report's
 * peer_skips, and the handle's PEER_MEM wait fails with -CKPT_ESKIPPED).
 * Every wait is bounded by cfg.peer_timeout_ms. Internal. */
#ifndef CKPT_PEER_H
#define CKPT_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "format/format.h"
#include "fabric.h"

struct ckpt_ctx;
struct ckpt_save_op;

/* Starts the thread when the context writes PEER_MEM through an agent.
 * Returns 0 (ctx->peer stays NULL when the tier is not wanted). */
int ckpt__peer_start(struct ckpt_ctx *ctx);
/* Stops the thread; copies not done fail with -ECANCELED. */
void ckpt__peer_stop(struct ckpt_ctx *ctx);
/* The staging pool is about to be replaced (nothing in flight): the fabric,
 * which registered it, is closed, and opens again on its next use. */
void ckpt__peer_pool_moved(struct ckpt_ctx *ctx);
/* io thread, after op's LOCAL_MEM report: queue its image for partners. */
void ckpt__peer_enqueue(struct ckpt_ctx *ctx, struct ckpt_save_op *op);
/* op finished without its image queued: settles its PEER_MEM result. */
void ckpt__peer_settle(struct ckpt_save_op *op, int err);

/* A partner's copy of this rank's shard, open for reading. */
typedef struct ckpt_peer_read {
	ckpt_shard s;          /* header and footer, checked */
	uint64_t *seals;       /* the image's seal table (format/seal.h), or NULL */
	int seals_bad;         /* there is one, but it does not check */
	char node[65];         /* the partner */
	void *conn;            /* private */
	uint64_t slot, off, bytes;
	uint8_t remote[160];   /* private: the region's ckpt_fab_remote */
	/* For the log at close: when it was opened, how long the opening and
	 * the fabric's part of it took, and the chunks read. */
	uint64_t t_open_ns, open_ns, fab_ns, read_ns, read_bytes;
} ckpt_peer_read;

/* A node holding a PEER_MEM copy. */
typedef struct ckpt_peer_loc {
	char node[65];
	char addr[256];
} ckpt_peer_loc;
/* The nodes that hold a PEER_MEM copy of this rank's shard of version,
 * from the coordinator (through the agent). [out] out: malloc'd, n
 * entries. Returns 0 or a negative code. */
int ckpt__peer_where(struct ckpt_ctx *ctx, uint64_t version, ckpt_peer_loc **out, size_t *n);
/* Opens the copy held by the agent at addr: pins it there, reads and checks
 * its header, tail and footer. Returns 0, -ENOENT (no copy there), or an
 * error with the reason in why. */
int ckpt__peer_open(struct ckpt_ctx *ctx, uint64_t version, const char *addr, const char *node, ckpt_peer_read *pr,
                    char *why, size_t cap);
/* The same two for another rank's shard (elastic restore). */
int ckpt__peer_where_rank(struct ckpt_ctx *ctx, uint64_t version, uint32_t rank, ckpt_peer_loc **out, size_t *n);
int ckpt__peer_open_rank(struct ckpt_ctx *ctx, uint64_t version, uint32_t rank, const char *addr, const char *node,
                         ckpt_peer_read *pr, char *why, size_t cap);
/* Reads [off, off+len) of the image into buf, a staging slot. */
int ckpt__peer_pread(struct ckpt_ctx *ctx, ckpt_peer_read *pr, uint64_t off, size_t len, void *buf, char *why,
                     size_t cap);
/* 1 when local buffers of a read must be registered (ckpt__peer_mr). */
int ckpt__peer_needs_mr(struct ckpt_ctx *ctx);
/* Registers [buf, buf+len) for reading into (the caller's regions); NULL
 * when it cannot be (then read through staging slots). Closed by
 * ckpt__peer_mr_close before the memory goes. */
ckpt_fab_mr *ckpt__peer_mr(struct ckpt_ctx *ctx, void *buf, size_t len);
void ckpt__peer_mr_close(struct ckpt_ctx *ctx, ckpt_fab_mr *mr);
/* Reads n pieces of the open copy (offsets within the image), many reads
 * in flight (ckpt_fab_fetch), handing each to landed on `threads` threads
 * as it lands; pieces without a buffer go through the nbounce staging
 * slots given. A fabric error drops the endpoint (reopened at the next
 * use). Returns 0, landed's error, or a fabric error with why. */
int ckpt__peer_fetch(struct ckpt_ctx *ctx, ckpt_peer_read *pr, ckpt_fab_piece *pc, size_t n, void *const *bounce,
                     unsigned nbounce, unsigned threads, ckpt_fab_landed_fn landed, void *arg, char *why, size_t cap);
/* Unpins and forgets. */
void ckpt__peer_close(struct ckpt_ctx *ctx, ckpt_peer_read *pr);

#endif
