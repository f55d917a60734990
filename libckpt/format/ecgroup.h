/* The layout of one Reed–Solomon group of the peer tier (rs:K+M,
 * docs/format.md "Erasure-coded groups"), and the rebuild of a lost
 * member's image from the pieces that survive.
 *
 * A group has n = K + M members (shard images of one version, each on its
 * own failure domain), of lengths len[i]. Every image is cut into K slices
 * of `slice` bytes (the longest image over K, rounded up to 64: a shorter
 * image's slices end in zeros that are never stored). There are n stripes;
 * stripe s holds K data pieces and M parity pieces:
 *   parity row t (0 <= t < M) is held by member (s + t) mod n;
 *   data piece d (0 <= d < K) is slice d of member (s + M + d) mod n.
 * So each member is data in K stripes, one slice each, and holds M parity
 * pieces: (1 + M/K) x its image in all, and rotating the parity keeps any
 * member from holding more than that. A stripe survives any M lost
 * members, so the group does: any K survivors rebuild the rest.
 *
 * Every piece is checked in blocks of CKPT_ECG_BLOCK bytes, each with its
 * xxh3-tree checksum (kernels/checksum.h): a parity row's holder takes its
 * row's once complete, and each data piece's (over the zero-padded slice)
 * as it folds it in, so any parity holder of a stripe vouches for its
 * data pieces; a block that fails its checksum makes its whole piece count
 * as lost in that stripe. Internal. */
#ifndef CKPT_FORMAT_ECGROUP_H
#define CKPT_FORMAT_ECGROUP_H

#include <stddef.h>
#include <stdint.h>

#include "ec.h"

#define CKPT_ECG_BLOCK ((uint64_t)1 << 20)

typedef struct ckpt_ecg {
	unsigned k, m, n;
	uint64_t slice;                      /* bytes of every piece, a multiple of 64 */
	uint64_t len[CKPT_EC_MAX_PIECES];    /* each member's image */
} ckpt_ecg;

/* The layout of rs:k+m over members with images of lens[0..k+m). Returns
 * 0 or -EINVAL (k, m out of range; every image empty). */
int ckpt__ecg_init(ckpt_ecg *g, unsigned k, unsigned m, const uint64_t *lens, char *why, size_t cap);
/* The member holding piece p of stripe s (p < k: data piece p, k + t:
 * parity row t). */
unsigned ckpt__ecg_holder(const ckpt_ecg *g, unsigned s, unsigned p);
/* The stripe that slice d of member i is data piece d of. */
unsigned ckpt__ecg_stripe(const ckpt_ecg *g, unsigned i, unsigned d);
/* The bytes of slice d of member i that its image has (the rest of the
 * piece is zeros): 0 .. slice. */
uint64_t ckpt__ecg_have(const ckpt_ecg *g, unsigned i, unsigned d);
/* Checksum blocks in a piece. */
uint64_t ckpt__ecg_blocks(const ckpt_ecg *g);
/* The checksum of block b of a piece whose bytes are at piece[0..have)
 * (zeros after, up to the slice): no copy is made of the padding. */
uint64_t ckpt__ecg_block_sum(const ckpt_ecg *g, const uint8_t *piece, uint64_t have, uint64_t b);

/* Reads block b of piece p of stripe s into buf (min(CKPT_ECG_BLOCK,
 * slice - b * CKPT_ECG_BLOCK) bytes, zeros past what the image has) and
 * says the checksum recorded for it; or, instead of copying, points *data
 * (buf when called) at those bytes in memory of its own: 64-byte aligned,
 * unchanged until its next call for the same piece index p. Returns 0, or
 * a negative code with why (the holder is gone, unreachable): the piece
 * counts as lost. */
typedef int (*ckpt_ecg_fetch_fn)(void *arg, unsigned s, unsigned p, uint64_t b, uint8_t *buf, const uint8_t **data,
                                 uint64_t *sum, char *why, size_t cap);

/* Rebuilds member lost's image into dst (g->len[lost] bytes, any
 * alignment) from the others' pieces: per stripe that holds one of its
 * slices, block by block, the first k pieces whose block is reachable and
 * passes its checksum (a piece failing either is not used again in that
 * stripe). names (n entries, or NULL) name the members in errors; the
 * caller checks the rebuilt image's own chunk checksums as any read's.
 * Returns 0, with why naming the pieces passed over on the way (""
 * when none was: "passed over M (data|parity T of stripe S): why; ...");
 * -ENODATA when a stripe has fewer than k good pieces, with why naming
 * the stripe and every member whose piece was missing or corrupt;
 * -ENOMEM. */
int ckpt__ecg_rebuild(const ckpt_ecg *g, const ckpt_ec *e, unsigned lost, ckpt_ecg_fetch_fn fetch, void *arg,
                      const char *const *names, uint8_t *dst, char *why, size_t cap);
/* ckpt__ecg_rebuild, then the rebuilt image read as any copy is: its
 * header, footer and every chunk's checksum checked (a piece corrupt
 * before it was protected decodes to the same corrupt bytes: only the
 * image's own checksums can catch that). Returns 0, the rebuild's error,
 * or -CKPT_ECORRUPT with the region and chunk named in why. */
int ckpt__ecg_rebuild_shard(const ckpt_ecg *g, const ckpt_ec *e, unsigned lost, ckpt_ecg_fetch_fn fetch, void *arg,
                            const char *const *names, uint8_t *dst, char *why, size_t cap);
/* The parity row t that member lost held (of stripe (lost - t) mod n),
 * made again from k good pieces of that stripe, into dst (slice bytes):
 * what re-protects a group once a replacement takes the lost member's
 * place. Returns as ckpt__ecg_rebuild. */
int ckpt__ecg_rebuild_parity(const ckpt_ecg *g, const ckpt_ec *e, unsigned lost, unsigned t, ckpt_ecg_fetch_fn fetch,
                             void *arg, const char *const *names, uint8_t *dst, char *why, size_t cap);

#endif
