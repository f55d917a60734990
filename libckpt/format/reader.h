/* Reading a shard's chunks: parallel reads through a storage backend, every
 * checksum verified, decompressed, handed to a sink. Used by ckpt_restore,
 * and by the CLI's verify and restore. */
#ifndef CKPT_READER_H
#define CKPT_READER_H

#include "format.h"
#include "base/common.h"

/* Receives verified raw bytes of region `ri`, at offset `off` within it.
 * Return 0 to go on, negative to stop the read with that error. */
typedef int (*ckpt_sink_fn)(void *arg, uint32_t ri, uint64_t off, const void *data, size_t len);

typedef struct ckpt_read_opts {
	const char *backend;     /* NULL = auto */
	uint32_t depth;          /* reads in flight */
	uint8_t **bufs;          /* caller's aligned read buffers, or NULL to allocate */
	uint32_t nbufs;
	size_t buf_bytes;        /* each at least the shard's chunk size, else ignored */
	int direct;              /* try O_DIRECT */
	const uint8_t *want;     /* per region: 1 = read it; NULL = all */
	/* Optional: where the raw bytes [off, off+len) of region ri belong in
	 * host memory, so that an uncompressed chunk is read there directly and
	 * checked in place (4096-aligned places, whole-block lengths), or else
	 * read into a buffer and copied there with its checksum taken in the
	 * same pass, instead of going through the sink; NULL (from the
	 * function) to take the sink. */
	uint8_t *(*place)(void *place_arg, uint32_t ri, uint64_t off, size_t len);
	void *place_arg;
	const ckpt_logger *lg;
	char *why;               /* reason on failure */
	size_t whycap;
	/* Optional: a gang (base/pcopy.h) that checks a chunk's leaves, and
	 * copies them to their place, on several threads: one thread's fused
	 * copy and checksum is slower than the disk. NULL: the caller's thread. */
	struct ckpt_pcopy *gang;
} ckpt_read_opts;

/* s was opened by ckpt__shard_open(path). Returns 0, -CKPT_ECORRUPT (why
 * names version, rank, region and chunk), -errno, or the sink's error. */
int ckpt__shard_read(const char *path, const ckpt_shard *s, const ckpt_read_opts *o,
                     ckpt_sink_fn sink, void *arg);

/* The same from a shard image in memory (a node-DRAM copy): s was parsed
 * from it by ckpt__shard_parse_mem(img, len). o's backend, depth, buffers
 * and direct are unused. */
int ckpt__shard_read_mem(const uint8_t *img, uint64_t len, const ckpt_shard *s, const ckpt_read_opts *o,
                         ckpt_sink_fn sink, void *arg);

#endif
