#ifndef CKPT_PIPELINE_H
#define CKPT_PIPELINE_H
/* What ckpt_save (save.c) needs of the persist pipeline (pipeline.c). */
#include "ctx.h"

/* The kinds of I/O the io thread completes, besides chunk writes. */
enum io_kind { IO_CHUNK = 1, IO_HEADER, IO_TRAILER, IO_SYNC, IO_WAKE };

/* Closes an op's files and frees it: the last reference's release, or a
 * save that never went live. */
void ckpt__op_free(ckpt_save_op *op);
/* Marks op failed with err (and the errno behind it); the first error wins
 * and is counted in the next step report. */
void ckpt__op_fail(ckpt_save_op *op, int err, int sys_errno);
/* Wakes the io thread; ctx->lock held. */
void ckpt__wake_io_locked(ckpt_ctx *ctx);
/* Queues one I/O of op that is not a chunk (kind: IO_HEADER, IO_TRAILER,
 * IO_SYNC) to the backend; op->aux holds it, one at a time. */
void ckpt__submit_aux(ckpt_ctx *ctx, ckpt_save_op *op, int kind, int iop, void *buf, uint32_t len,
                      uint64_t off);
#endif
