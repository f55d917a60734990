/* A gang of threads that copy one buffer together.
 *
 * The snapshot's copy is the whole stall a trainer waits for, and one core's
 * memcpy reaches only part of the memory bandwidth (about half of it on a
 * two-core machine, far less on a server socket). A copy is cut into 1 MiB
 * parts that the caller and the gang's threads take in turn, so a thread
 * that wakes late only takes fewer parts: a copy is never slower than the
 * caller's own memcpy by more than the cost of a wake-up. */
#ifndef CKPT_BASE_PCOPY_H
#define CKPT_BASE_PCOPY_H

#include <stddef.h>

typedef struct ckpt_pcopy ckpt_pcopy;

/* A gang of `threads` copiers, the caller included (threads - 1 are
 * started; 1: plain memcpy). Returns 0 or a negative errno. */
int ckpt__pcopy_start(ckpt_pcopy **out, unsigned threads);

/* Copies len bytes from src to dst (no overlap), returning when all of
 * them are copied. Calls from several threads take turns. */
void ckpt__pcopy(ckpt_pcopy *pc, void *dst, const void *src, size_t len);

/* The same with another copy than memcpy for each part (a streaming one);
 * NULL: memcpy. */
typedef void (*ckpt_copy_fn)(void *dst, const void *src, size_t len);
void ckpt__pcopy_with(ckpt_pcopy *pc, void *dst, const void *src, size_t len, ckpt_copy_fn copy);

/* The gang's parallel loop, of which the copy is one use: fn(arg, off, n)
 * over [0, len) cut into parts of part bytes (0: 1 MiB) at multiples of
 * part, the caller and the gang's threads taking parts in turn; returns
 * when every part is done. Under two parts, or without a gang, the caller
 * runs fn(arg, 0, len) itself. fn must not call into the same gang. */
typedef void (*ckpt_pcopy_fn)(void *arg, size_t off, size_t n);
void ckpt__pcopy_each(ckpt_pcopy *pc, size_t len, size_t part, ckpt_pcopy_fn fn, void *arg);

/* Parts (1 MiB) the gang's threads, not the callers, have copied so far:
 * whether the gang takes part at all (tests, trace lines). */
unsigned long long ckpt__pcopy_helped(ckpt_pcopy *pc);

/* Stops and joins the gang; NULL is fine. */
void ckpt__pcopy_stop(ckpt_pcopy *pc);

#endif
