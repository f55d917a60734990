/* Reed–Solomon erasure coding over GF(2^8), the arithmetic of the peer
 * tier's rs:K+M scheme, done by Intel ISA-L (Debian's libisal). K data
 * pieces of one length give M parity pieces of that length; any K of the
 * K + M give back the others, byte for byte.
 *
 * The code is systematic with a Cauchy generator (gf_gen_cauchy1_matrix):
 * the top K rows are the identity, parity row i (0 <= i < M) has the
 * coefficients 1 / ((K + i) xor j) for data piece j. Unlike ISA-L's
 * Vandermonde generator, every K x K submatrix of it is invertible, for
 * every K and M, so that every pattern of at most M lost pieces decodes.
 * The coefficients are part of the stored data's meaning: a parity piece
 * written by one version of ckpt is decoded by any later one.
 *
 * Parity is built either at once (ckpt_ec_encode) or one data piece at a
 * time as pieces arrive (ckpt_ec_update, ISA-L's ec_encode_data_update):
 * the results are identical, and a holder that keeps one parity row needs
 * only that row's tables.
 *
 * Alignment: every buffer passed here starts on a 64-byte boundary
 * (CKPT_EC_ALIGN). ISA-L 2.30, the version Debian ships, mishandles some
 * unaligned buffers in its vector loops (fixed in 2.31); a misaligned
 * pointer is refused with -EINVAL, never computed wrong. Lengths are any.
 *
 * A codec is immutable after ckpt_ec_new: any number of threads may use
 * one at once. A leaf: nothing of libckpt or ckptd. */
#ifndef CKPT_STORAGE_EC_H
#define CKPT_STORAGE_EC_H

#include <stddef.h>
#include <stdint.h>

#define CKPT_EC_ALIGN 64
#define CKPT_EC_MAX_PIECES 64 /* K + M: the widest group a codec is made for */

typedef struct ckpt_ec ckpt_ec;

/* A codec for k data and m parity pieces: 1 <= k, 1 <= m,
 * k + m <= CKPT_EC_MAX_PIECES. [out] out, freed by ckpt_ec_free. Returns
 * 0, -EINVAL (with why in err) or -ENOMEM. */
int ckpt_ec_new(unsigned k, unsigned m, ckpt_ec **out, char *err, size_t errcap);
/* NULL is a no-op. */
void ckpt_ec_free(ckpt_ec *e);
unsigned ckpt_ec_k(const ckpt_ec *e);
unsigned ckpt_ec_m(const ckpt_ec *e);
/* The generator's coefficient for data piece j in piece row (0 <= row <
 * k + m; rows below k are the identity): what the tests' reference
 * encoder is checked against. */
uint8_t ckpt_ec_coef(const ckpt_ec *e, unsigned row, unsigned j);

/* All m parity pieces from the k data pieces, len bytes each:
 * parity[i] = sum over j of coef(k + i, j) * data[j]. Returns 0 or -EINVAL
 * (a misaligned buffer, NULL). */
int ckpt_ec_encode(const ckpt_ec *e, size_t len, const uint8_t *const *data, uint8_t *const *parity);

/* Folds data piece j (len bytes) into parity row `row` (0 <= row < m):
 * parity += coef(k + row, j) * data. Start from a zeroed parity piece;
 * once every j has been folded in once, in any order, it equals what
 * ckpt_ec_encode gives. A shorter piece is one whose missing tail is zero:
 * fold the len bytes it has (len may be less than the parity's length).
 * Returns 0 or -EINVAL. */
int ckpt_ec_update(const ckpt_ec *e, unsigned row, unsigned j, size_t len, const uint8_t *data, uint8_t *parity);

/* Rebuilds the data pieces listed in want[0..nwant) (indices < k, each
 * missing) from any k pieces that survive.
 *   have [in]: k + m pointers, index i < k a data piece, k + i parity row
 *     i; NULL where the piece is lost (or could not be trusted: a piece
 *     whose checksum failed counts as lost).
 *   out [out]: nwant buffers of len bytes, out[w] receives data piece
 *     want[w]. They may be the same memory as nothing in have.
 * Uses the first k surviving pieces in index order. Returns 0; -ENODATA
 * when fewer than k survive (err says how many and which are lost);
 * -EINVAL for bad arguments or misaligned buffers; -ENOMEM. */
int ckpt_ec_decode(const ckpt_ec *e, size_t len, const uint8_t *const *have, const unsigned *want,
                   unsigned nwant, uint8_t *const *out, char *err, size_t errcap);

/* Parses a peer scheme, "partner" or "rs:K+M" (e.g. "rs:8+2"), as
 * --peer-scheme and CKPT_PEER_SCHEME take it. [out] *k, *m: 0 and 0 for
 * partner. Returns 0 or -EINVAL with why in err (k, m out of range, other
 * text). */
int ckpt_ec_scheme_parse(const char *s, unsigned *k, unsigned *m, char *err, size_t errcap);

#endif
