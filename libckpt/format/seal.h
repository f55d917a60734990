/* The seal table of a node-DRAM image (docs/format.md 6.4): one seal per
 * chunk (ckpt_kern_seal), taken from the same bytes as the chunk's tree
 * checksum when the image was written, stored between the footer and the
 * tail. A restore from node DRAM checks each chunk's seal, which rides
 * along with the copy, instead of its tree checksum, which costs as much
 * as the copy. Other tiers' files never carry one; readers that do not
 * know it see zero-free padding, which no rule forbids. */
#ifndef CKPT_FORMAT_SEAL_H
#define CKPT_FORMAT_SEAL_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#define CKPT_SEAL_FIXED 32u /* magic, version, reserved, chunk count, footer checksum */

/* Where the table starts, from the footer's start: after the footer,
 * rounded up to 64 bytes. */
size_t ckpt__seal_at(size_t footer_len);
/* The trailer (footer, table, padding, tail) of an image of f with a seal
 * table: what ckpt__fmt_trailer_len is without one. */
size_t ckpt__seal_trailer_len(const ckpt_fmt_footer *f);
/* Writes the table for f's chunks into a trailer already encoded by
 * ckpt__fmt_trailer_encode (buf, buflen = ckpt__seal_trailer_len(f)).
 * seals: f->chunk_count values, in chunk-table order. */
void ckpt__seal_encode(uint8_t *buf, size_t buflen, const ckpt_fmt_footer *f, const uint64_t *seals);

/* The table of the image img (len bytes) that s was parsed from, copied
 * out (the image may be shared memory that changes under us). Returns 0
 * with *out (s->footer.chunk_count seals; free() it); -ENOENT when the
 * image carries none; -CKPT_ECORRUPT when one is there but does not check
 * (its own checksum, its chunk count, the footer it names), with why. */
int ckpt__seal_read(const uint8_t *img, uint64_t len, const ckpt_shard *s, uint64_t **out, char *why, size_t cap);
/* The same from the image's trailer alone (read from another node):
 * trailer holds the bytes from footer_offset on, avail of them up to the
 * tail. */
int ckpt__seal_read_trailer(const uint8_t *trailer, uint64_t avail, const ckpt_shard *s, uint64_t **out, char *why,
                            size_t cap);

#endif
