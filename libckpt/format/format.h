/* The shard file format (docs/format.md): encoders for the writer and a
 * validating decoder for every reader. All integers little-endian. */
#ifndef CKPT_FORMAT_H
#define CKPT_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

#define CKPT_FMT_HEADER_LEN 4096u
#define CKPT_FMT_HEADER_USED 256u
#define CKPT_FMT_FOOTER_FIXED 64u
#define CKPT_FMT_CHUNK_ENTRY 32u
#define CKPT_FMT_REGION_FIXED 32u
#define CKPT_FMT_TAIL_LEN 64u
#define CKPT_FMT_MAX_REGIONS (1u << 20)
#define CKPT_FMT_MAX_FOOTER (1ull << 30)
#define CKPT_FMT_MIN_CHUNK (64u << 10)
#define CKPT_FMT_MAX_CHUNK (256u << 20)

#define CKPT_CHUNK_ZSTD 0x1u           /* stored bytes are a zstd frame */
#define CKPT_CHUNK_SHUFFLE_SHIFT 8     /* bits 8..15: shuffle element size, 0 = none */

typedef struct ckpt_fmt_header {
	uint32_t format_version;
	uint64_t version;
	uint32_t rank;
	uint32_t world_size;
	uint64_t created_ns;
	uint32_t align;
	uint32_t csum_algo;
	uint64_t lineage;  /* which run of the job wrote it (0 in older files) */
	char job[65];
} ckpt_fmt_header;

typedef struct ckpt_fmt_region {
	char name[CKPT_MAX_NAME + 1];
	uint16_t name_len;
	uint8_t dtype;
	uint8_t ndim;
	uint32_t device;
	uint64_t bytes;
	uint64_t chunk_first;
	uint32_t chunk_count;
	uint64_t global_shape[CKPT_MAX_DIMS];
	uint64_t offsets[CKPT_MAX_DIMS];
	uint64_t extents[CKPT_MAX_DIMS];
} ckpt_fmt_region;

typedef struct ckpt_fmt_chunk {
	uint64_t offset;
	uint32_t stored_len;
	uint32_t raw_len;
	uint32_t flags;
	uint32_t region;
	uint64_t checksum; /* ckpt_kern_checksum of the raw bytes */
} ckpt_fmt_chunk;

typedef struct ckpt_fmt_footer {
	uint32_t region_count;
	uint64_t chunk_count;
	uint64_t chunk_bytes;
	uint64_t data_bytes;   /* raw bytes of all regions */
	uint64_t stored_bytes; /* bytes of chunk data as stored */
	ckpt_fmt_region *regions; /* region_count entries */
	ckpt_fmt_chunk *chunks;   /* chunk_count entries */
} ckpt_fmt_footer;

typedef struct ckpt_fmt_tail {
	uint32_t format_version;
	uint64_t footer_offset;
	uint64_t footer_length;
	uint64_t footer_checksum;
	uint64_t file_length;
	uint64_t header_checksum;
} ckpt_fmt_tail;

/* ---- writer side ---- */
/* Returns the header's checksum, which the tail repeats. */
uint64_t ckpt__fmt_header_encode(uint8_t buf[CKPT_FMT_HEADER_LEN], const ckpt_fmt_header *h);
size_t ckpt__fmt_region_entry_len(uint32_t ndim, size_t name_len);
/* Bytes of footer (fixed part + tables), not counting padding or tail. */
size_t ckpt__fmt_footer_len(const ckpt_fmt_footer *f);
/* Writes footer, zero padding and tail into buf, which holds
 * ckpt__fmt_trailer_len(f, footer_offset) bytes, all zeroed by the caller;
 * the tail lands in the last 64 bytes. header_checksum is the header's. */
size_t ckpt__fmt_trailer_len(const ckpt_fmt_footer *f);
void ckpt__fmt_trailer_encode(uint8_t *buf, size_t buflen, const ckpt_fmt_footer *f,
                              uint64_t footer_offset, uint64_t header_checksum);

/* ---- reader side: every decoder validates and never trusts a count ---- */
/* Each returns 0 or -CKPT_ECORRUPT / -CKPT_EFORMAT, with a reason in why. */
int ckpt__fmt_header_decode(const uint8_t *buf, size_t len, ckpt_fmt_header *h,
                            uint64_t *checksum, char *why, size_t whycap);
int ckpt__fmt_tail_decode(const uint8_t *buf, size_t len, uint64_t file_length,
                          ckpt_fmt_tail *t, char *why, size_t whycap);
/* Parses the footer bytes (footer_length of them) located at footer_offset of
 * a file. Allocates f->regions and f->chunks: free with ckpt__fmt_footer_free. */
int ckpt__fmt_footer_decode(const uint8_t *buf, size_t len, uint64_t footer_offset,
                            ckpt_fmt_footer *f, char *why, size_t whycap);
void ckpt__fmt_footer_free(ckpt_fmt_footer *f);

/* An open, validated shard file (header, tail and footer checked; chunk data
 * is checked when read). */
typedef struct ckpt_shard {
	int fd;          /* buffered read descriptor */
	uint64_t file_length;
	ckpt_fmt_header header;
	ckpt_fmt_tail tail;
	ckpt_fmt_footer footer;
} ckpt_shard;

/* Opens and validates path. why receives a reason on failure.
 * Returns 0, -errno, -CKPT_ECORRUPT or -CKPT_EFORMAT. */
int ckpt__shard_open(const char *path, ckpt_shard *s, char *why, size_t whycap);
/* Same from a memory image (fuzzing, golden tests). fd is -1. */
int ckpt__shard_parse_mem(const uint8_t *buf, size_t len, ckpt_shard *s, char *why, size_t whycap);
/* The same from pieces of an image of len bytes read elsewhere (a partner's
 * copy): hdr (its first hdrlen >= CKPT_FMT_HEADER_USED bytes) and tail (its
 * last CKPT_FMT_TAIL_LEN). Call with footer NULL first: s->tail then says
 * where the footer is (footer_offset, footer_length); then again with it. */
int ckpt__shard_parse_parts(ckpt_shard *s, uint64_t len, const uint8_t *hdr, size_t hdrlen, const uint8_t *tail,
                            const uint8_t *footer, char *why, size_t whycap);
void ckpt__shard_close(ckpt_shard *s);
/* Index of the region named name, or -1. */
int ckpt__shard_find_region(const ckpt_shard *s, const char *name);

#endif
