/* The XXH3 port of kernels/cuda (the code the GPU kernels run), on the host:
 *  - against libxxhash, every length 0..2048 and long ones, several seeds;
 *  - its parallel formulation (per-item lane contributions, folded in item
 *    order, merged by pairs) against its sequential one, as the kernels
 *    split the work: 8 lanes and 4 pairs, items computed out of order;
 *  - the whole region checksum as the two kernels compute it (leaf slots,
 *    root hash over the slots in place) against ckpt_kern_checksum.
 * Exit 0 pass, 1 fail. */
#include "ckpt_kernels.h"
#include "csum_tree.h"
#include "xxh3_port.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); if (++failures > 20) exit(1); } } while (0)

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < len; i += 8) {
		x += 0x9E3779B97F4A7C15ull;
		uint64_t z = x;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		z ^= z >> 31;
		size_t n = len - i < 8 ? len - i : 8;
		memcpy(p + i, &z, n);
	}
}

static const uint64_t seeds[] = { 0, 1, 65536, 0x9E3779B97F4A7C15ull, 0xFFFFFFFFFFFFFFFFull, 8388608 };
#define NSEEDS (sizeof(seeds) / sizeof(seeds[0]))

/* The parallel long path as the device splits it, items computed in reverse
 * order, with the secret as 24 words like the kernels' shared copy.
 * pairs: 4 threads of two lanes each (what the kernels run), else 8 single
 * lanes. */
static uint64_t parallel_long(const uint8_t *p, uint64_t len, uint64_t seed, int pairs)
{
	uint64_t w[CKPT_XXH3_SECRET_SIZE / 8];
	uint8_t sec[CKPT_XXH3_SECRET_SIZE];
	for (unsigned j = 0; j < CKPT_XXH3_SECRET_SIZE / 8; j++) {
		w[j] = ckpt_xxh3_seeded_secret_word(ckpt_xxh3_ksecret(), j, seed);
		ckpt_xxh3_write64(sec + 8 * j, w[j]);
	}
	uint64_t items = ckpt_xxh3_long_nblocks(len) + 1;
	uint64_t *c = malloc(items * 8 * sizeof(*c));
	if (!c) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	/* Items in reverse: contributions must not depend on the order. */
	for (uint64_t q = 0; q < items; q++) {
		uint64_t item = items - 1 - q;
		if (pairs) {
			for (unsigned pr = 0; pr < 4; pr++)
				ckpt_xxh3_item_pair(p, len, item, pr, sec, &c[item * 8 + 2 * pr], &c[item * 8 + 2 * pr + 1]);
		} else {
			for (unsigned lane = 0; lane < 8; lane++)
				c[item * 8 + lane] = ckpt_xxh3_item_lane(p, len, item, lane, sec);
		}
	}
	uint64_t acc[8];
	for (unsigned lane = 0; lane < 8; lane++) {
		acc[lane] = ckpt_xxh3_lane_init(lane);
		for (uint64_t item = 0; item < items; item++)
			acc[lane] = ckpt_xxh3_lane_fold(acc[lane], c[item * 8 + lane], item, len,
			                                w[CKPT_XXH3_SCRAMBLE_OFF / 8 + lane]);
	}
	free(c);
	uint64_t sum = 0;
	for (unsigned pr = 0; pr < 4; pr++)
		sum += ckpt_xxh3_merge_pair(acc[2 * pr], acc[2 * pr + 1],
		                            ckpt_xxh3_secret_word_at(w, CKPT_XXH3_MERGE_OFF + 16 * pr),
		                            ckpt_xxh3_secret_word_at(w, CKPT_XXH3_MERGE_OFF + 16 * pr + 8));
	return ckpt_xxh3_merge_finish(sum, len);
}

static void check_len(const uint8_t *buf, size_t len, int parallel)
{
	for (size_t s = 0; s < NSEEDS; s++) {
		uint64_t want = seeds[s] ? XXH3_64bits_withSeed(buf, len, seeds[s]) : XXH3_64bits(buf, len);
		uint64_t got = ckpt_xxh3_64_seed(buf, len, seeds[s]);
		CHECK(got == want, "len %zu seed %llx: port %016llx, libxxhash %016llx", len,
		      (unsigned long long)seeds[s], (unsigned long long)got, (unsigned long long)want);
		if (!seeds[s])
			CHECK(ckpt_xxh3_64(buf, len) == want, "len %zu: ckpt_xxh3_64", len);
		if (parallel && len > CKPT_XXH3_MIDSIZE_MAX) {
			uint64_t p8 = parallel_long(buf, len, seeds[s], 0);
			uint64_t p4 = parallel_long(buf, len, seeds[s], 1);
			CHECK(p8 == want && p4 == want, "len %zu seed %llx: 8-lane %016llx, 4-pair %016llx, want %016llx",
			      len, (unsigned long long)seeds[s], (unsigned long long)p8, (unsigned long long)p4,
			      (unsigned long long)want);
		}
	}
}

/* The region checksum as the leaf and root kernels compute it. */
static void region_checksums(const uint8_t *data, uint64_t len, uint64_t chunk, uint64_t *out)
{
	ckpt_csum_geom g = ckpt_csum_geom_make(len, chunk);
	uint64_t *leaf = malloc((g.nleaves ? g.nleaves : 1) * 8);
	if (!leaf) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (uint64_t i = 0; i < g.nleaves; i++) {
		uint64_t off, n;
		ckpt_csum_leaf_locate(&g, i, &off, &n);
		leaf[i] = n > CKPT_XXH3_MIDSIZE_MAX ? parallel_long(data + off, n, 0, 1)
		                                    : ckpt_xxh3_short(data + off, (size_t)n, 0);
	}
	for (uint64_t k = 0; k < g.nchunks; k++) {
		uint64_t first, n, seed = ckpt_csum_chunk_len(&g, k);
		ckpt_csum_chunk_leaves(&g, k, &first, &n);
		/* The slots are host-order u64: the format's little-endian bytes on
		 * the little-endian machines this runs on, as on the device. */
		const uint8_t *p = (const uint8_t *)(leaf + first);
		out[k] = n > CKPT_XXH3_MIDSIZE_MAX ? parallel_long(p, n, seed, 0) : ckpt_xxh3_short(p, (size_t)n, seed);
	}
	free(leaf);
}

static void check_region(const uint8_t *data, uint64_t len, uint64_t chunk)
{
	ckpt_csum_geom g = ckpt_csum_geom_make(len, chunk);
	uint64_t *out = calloc(g.nchunks ? g.nchunks : 1, 8);
	if (!out) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	region_checksums(data, len, chunk, out);
	for (uint64_t k = 0; k < g.nchunks; k++) {
		uint64_t clen = ckpt_csum_chunk_len(&g, k), first, n;
		uint64_t want = ckpt_kern_checksum(data + k * chunk, clen);
		CHECK(out[k] == want, "region %llu chunk %llu: chunk %llu: %016llx, ckpt_kern_checksum %016llx",
		      (unsigned long long)len, (unsigned long long)chunk, (unsigned long long)k,
		      (unsigned long long)out[k], (unsigned long long)want);
		/* A chunk's slots fit its share, and the last one ends the scratch. */
		ckpt_csum_chunk_leaves(&g, k, &first, &n);
		CHECK(n / 8 <= g.lpc && (k + 1 < g.nchunks || first + n / 8 == g.nleaves),
		      "region %llu chunk %llu: leaf slots", (unsigned long long)len, (unsigned long long)chunk);
	}
	free(out);
}

int main(void)
{
	const size_t max = 8u << 20;
	uint8_t *buf = malloc(max + 64);
	if (!buf)
		return 1;
	fill(buf, max + 64, 42);

	/* Every length class, both formulations where they apply. */
	for (size_t len = 0; len <= 2048; len++)
		check_len(buf, len, 1);
	/* Unaligned starts: the device reads unaligned data byte-wise. */
	for (size_t len = 0; len <= 300; len += 7)
		check_len(buf + 3, len, 1);
	static const size_t longs[] = { 4095, 4096, 4097, 65535, 65536, 65537, 100000, 1000000, 1000003,
	                                8u << 20 };
	for (size_t i = 0; i < sizeof(longs) / sizeof(longs[0]); i++) {
		check_len(buf, longs[i], 1);
		check_len(buf + 1, longs[i] - 1, longs[i] <= 65537);
	}

	/* A known vector: XXH3 of the empty input (the spec's value). */
	CHECK(ckpt_xxh3_64(buf, 0) == 0x2D06800538D394C2ull, "empty input");

	/* The secret as words, and its unaligned reads. */
	uint64_t w[24];
	for (unsigned j = 0; j < 24; j++)
		w[j] = ckpt_xxh3_read64(ckpt_xxh3_ksecret() + 8 * j);
	for (unsigned off = 0; off + 8 <= 184; off++)
		CHECK(ckpt_xxh3_secret_word_at(w, off) == ckpt_xxh3_read64(ckpt_xxh3_ksecret() + off), "word at %u", off);

	/* The full tree: chunk sizes around the leaf and the root's 240-byte
	 * boundary (30 leaves), odd ones, one larger than the region. */
	static const uint64_t lens[] = { 0, 1, 7, 240, 241, 4095, 65535, 65536, 65537, 1000003,
	                                 30u * 65536, 31u * 65536 + 5, 8u << 20 };
	static const uint64_t chunks[] = { 1, 4096, 65536, 100000, 30u * 65536, 31u * 65536, 2u << 20, 8u << 20,
	                                   1ull << 30 };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t j = 0; j < sizeof(chunks) / sizeof(chunks[0]); j++) {
			if (chunks[j] == 1 && lens[i] > 4096)
				continue; /* a hash per byte: slow, and no new case */
			check_region(buf, lens[i], chunks[j]);
		}
	/* The whole checksum of one chunk, straight. */
	uint64_t one;
	region_checksums(buf + 5, 3000001, 1ull << 40, &one);
	CHECK(one == ckpt_kern_checksum(buf + 5, 3000001), "single chunk");
	CHECK(ckpt_csum_geom_make(0, 65536).nleaves == 0 && ckpt_csum_geom_make(5, 0).nchunks == 0, "empty geometry");

	free(buf);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("xxh3 port: all checks passed\n");
	return 0;
}
