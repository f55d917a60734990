/* A shard image held in another node's DRAM (a partner's copy of a rank's
 * shard), read over the fabric (storage/fabric.h): the structure first in a
 * few small reads, then the chunks with many reads in flight
 * (ckpt_fab_fetch), each chunk checked as it lands. Restore
 * (libckpt/src/restore.c) reads the chunks straight into the caller's
 * regions through these; an agent pulling a lost node's state reads the
 * whole image into a segment of its pool with ckpt__image_pull. */
#ifndef CKPT_FORMAT_IMAGE_READ_H
#define CKPT_FORMAT_IMAGE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "fabric.h"
#include "format.h"

/* An image, opened: header, tail and footer checked, its seal table read. */
typedef struct ckpt_image {
	ckpt_shard s;
	uint64_t *seals;   /* one per chunk (format/seal.h), or NULL: check the tree checksums */
	uint64_t off;      /* where the image starts in the remote region */
	int seals_bad;     /* a seal table is there but does not check (not used) */
} ckpt_image;

/* Reads and checks the structure of the image of `bytes` bytes at `off` of
 * rem: its header and tail, then its footer and seal table, through
 * scratch (scratch_bytes, inside scratch_mr; a footer that does not fit is
 * refused as corrupt). Returns 0; -CKPT_ECORRUPT or -CKPT_EFORMAT with
 * why; -ENOMEM; a fabric error (the fab is broken). */
int ckpt__image_open(ckpt_fab *fab, const ckpt_fab_remote *rem, uint64_t off, uint64_t bytes, uint8_t *scratch,
                     ckpt_fab_mr *scratch_mr, size_t scratch_bytes, int timeout_ms, ckpt_image *im, char *why,
                     size_t cap);
void ckpt__image_close(ckpt_image *im);

/* 0 if the raw bytes of chunk ci (an uncompressed chunk: stored as it is)
 * at data are the saved ones: its seal when the image has a table, else
 * its tree checksum. -CKPT_ECORRUPT otherwise. */
int ckpt__image_chunk_ok(const ckpt_image *im, uint64_t ci, const void *data);

/* The whole image into dst (bytes long, inside dst_mr, which may be NULL
 * where the provider needs no local registration): structure first, read
 * straight into its place in dst and checked, then every chunk, with its
 * padding, many reads in flight and each chunk checked on `threads`
 * threads (0: the caller's) as it lands. On success dst holds the image
 * byte for byte and *s (may be NULL) its parse (ckpt__shard_close it).
 * Only images whose chunks are stored as they are (every DRAM image) can
 * be pulled. Returns 0; -CKPT_ECORRUPT (why names the chunk or the part);
 * -ENOMEM; a fabric error (the fab is broken: close it). */
int ckpt__image_pull(ckpt_fab *fab, const ckpt_fab_remote *rem, uint64_t off, uint64_t bytes, uint8_t *dst,
                     ckpt_fab_mr *dst_mr, unsigned threads, int timeout_ms, ckpt_shard *s, char *why, size_t cap);

#endif
