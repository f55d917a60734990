/* What the golden checkpoints in tests/golden/v1 hold: every region, and the
 * deterministic generator of its bytes. The shard files were written from
 * exactly these bytes (make-golden.sh); never change this table or the
 * generators, or the comparison against the committed files breaks. */
#ifndef CKPT_GOLDEN_DATA_H
#define CKPT_GOLDEN_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define GOLDEN_JOB "golden"
#define GOLDEN_CHUNK (64u << 10)

enum { GOLDEN_RANDOM = 1, GOLDEN_TEXT = 2 };

typedef struct golden_region {
	uint64_t version;
	uint32_t rank, world_size;
	int compress;      /* saved with --compress */
	const char *name;  /* region name = file name */
	size_t bytes;
	int kind;          /* GOLDEN_RANDOM or GOLDEN_TEXT */
	uint64_t seed;
} golden_region;

/* In save order: a shard's regions appear in the order listed here. */
static const golden_region golden_regions[] = {
	/* version 1: plain, empty, and a size that is no multiple of the chunk */
	{ 1, 0, 1, 0, "plain.bin", 2 * GOLDEN_CHUNK, GOLDEN_RANDOM, 1 },
	{ 1, 0, 1, 0, "empty.bin", 0, GOLDEN_RANDOM, 2 },
	{ 1, 0, 1, 0, "odd.bin", 70001, GOLDEN_RANDOM, 3 },
	/* version 2: compressed (log.txt compresses; noise.bin stays raw) */
	{ 2, 0, 1, 1, "log.txt", 200000, GOLDEN_TEXT, 4 },
	{ 2, 0, 1, 1, "noise.bin", 20000, GOLDEN_RANDOM, 5 },
	/* version 3: two ranks */
	{ 3, 0, 2, 0, "part.bin", 40000, GOLDEN_RANDOM, 6 },
	{ 3, 1, 2, 0, "part.bin", 50000, GOLDEN_RANDOM, 7 },
	{ 3, 1, 2, 0, "rng.state", 17, GOLDEN_RANDOM, 8 },
};
#define GOLDEN_NREGIONS (sizeof(golden_regions) / sizeof(golden_regions[0]))

/* splitmix64, little-endian bytes. */
static inline void golden_random(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t z = (x += 0x9E3779B97F4A7C15ull);
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		z ^= z >> 31;
		for (size_t k = 0; k < 8 && i + k < len; k++)
			p[i + k] = (uint8_t)(z >> (8 * k));
	}
}

/* Training-log lines: compress well, like real text state. */
static inline void golden_text(uint8_t *p, size_t len, uint64_t seed)
{
	size_t n = 0;
	for (uint64_t step = 0; n < len; step++) {
		char line[96];
		uint64_t loss = 40000 - (step * 7 + seed) % 30000;
		int l = snprintf(line, sizeof(line), "step %06llu loss %llu.%04llu lr 3.0e-04 tokens %llu\n",
		                 (unsigned long long)step, (unsigned long long)(loss / 10000),
		                 (unsigned long long)(loss % 10000), (unsigned long long)(step * 4096));
		size_t k = (size_t)l < len - n ? (size_t)l : len - n;
		memcpy(p + n, line, k);
		n += k;
	}
}

static inline void golden_fill(const golden_region *g, uint8_t *p)
{
	if (g->kind == GOLDEN_TEXT)
		golden_text(p, g->bytes, g->seed);
	else
		golden_random(p, g->bytes, g->seed);
}

#endif
