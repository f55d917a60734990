/* The safetensors file format, read and written from its specification:
 * an 8-byte little-endian header length N, N bytes of a JSON object (one
 * entry per tensor: dtype, shape, data_offsets [begin, end) relative to the
 * data that follows the header; an optional "__metadata__" object of
 * strings), then the data. Used by `ckpt export` and `ckpt import`. */
#ifndef CKPT_SAFETENSORS_H
#define CKPT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

#define ST_MAX_HEADER (100u << 20) /* the format's own limit on the header */

typedef struct st_tensor {
	char *name;
	ckpt_dtype dtype;
	uint32_t ndim;
	uint64_t shape[CKPT_MAX_DIMS];
	uint64_t begin, end; /* in the data section */
} st_tensor;

typedef struct st_file {
	uint64_t header_len;
	uint64_t data_start; /* 8 + header_len */
	uint64_t data_len;   /* file size - data_start */
	size_t n;
	st_tensor *t;        /* in data order */
} st_file;

/* The header length in the first 8 bytes of buf (len of them) of a file of
 * file_size bytes: 0, or -1 with why (too short, too long, past the end). */
int st_header_len(const uint8_t *buf, size_t len, uint64_t file_size, uint64_t *hlen, char *why, size_t cap);
/* Parses the header JSON (json, hlen bytes) of a file of file_size bytes
 * and checks every entry: a known dtype, at most CKPT_MAX_DIMS dimensions,
 * data_offsets inside the data, their length equal to the shape's, a name
 * that is a valid region name; tensors neither overlapping nor leaving
 * holes in the data. Returns 0 (free out with st_file_free) or -1 with why
 * naming the tensor. Work is bounded by hlen (one parse, one sort). */
int st_header_parse(const char *json, size_t hlen, uint64_t file_size, st_file *out, char *why, size_t cap);
void st_file_free(st_file *f);

/* "F32", "BF16", ... for dtype (bytes: "U8"). */
const char *st_dtype_name(ckpt_dtype dtype);
/* The dtype named s, or -1. */
int st_dtype_parse(const char *s, ckpt_dtype *out);

/* Builds a header for n tensors laid out back to back in the given order
 * (data_offsets computed here from the shapes), with metadata pairs
 * meta[2k] = meta[2k+1] (nmeta pairs). The JSON is padded with spaces so
 * that the data starts at a multiple of 8. Returns a malloc'd buffer of
 * 8 + header bytes (*len), or NULL. */
uint8_t *st_header_build(const st_tensor *t, size_t n, const char *const *meta, size_t nmeta, size_t *len);

#endif
