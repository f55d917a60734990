/* Writing a file of consolidated tensors, front to back, with the reading
 * spread over several threads: the file is cut into 32 MiB slabs; reader t
 * fills slabs t, t+R, t+2R, ... through a view of its own (ckpt_view_* is
 * one thread at a time), into a ring of 2R slab buffers; one writer thread
 * writes them in order with O_DIRECT where the filesystem allows (every
 * slab is whole 4096-byte blocks at a block-aligned offset; the last is
 * padded and the length cut back). Memory: 2R slabs and each view's read
 * buffers, whatever the file's size. Used by `ckpt export`. */
#ifndef CKPT_CLI_PSTREAM_H
#define CKPT_CLI_PSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

#define PSTREAM_SLAB (32u << 20)
#define PSTREAM_READERS 2

/* One part of the file: literal bytes (data != NULL), or `len` bytes of
 * tensor `tensor` of the views from byte `off`. */
typedef struct pstream_seg {
	const void *data;
	size_t tensor;
	uint64_t off, len;
} pstream_seg;

/* Writes the segments, in order, to fd (opened for writing, O_DIRECT or
 * not) with one reader thread per view (nviews <= PSTREAM_READERS, all
 * views of the same version). Returns 0, or the first error (why says). */
int pstream_write(ckpt_view *const *views, int nviews, const pstream_seg *segs, size_t nseg, int fd, char *why,
                  size_t cap);

#endif
