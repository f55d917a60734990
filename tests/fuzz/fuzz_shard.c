/* Fuzz target for the shard file decoder: ckpt__shard_parse_mem on the input
 * as it is and on a resealed copy (checksums recomputed, so that mutations
 * reach the structural checks behind them), plus the header, tail and footer
 * decoders on their own. Every accepted shard must satisfy the invariants of
 * fuzz_common.h; every rejection must come with a reason.
 *
 * With CKPT_FUZZING this is a libFuzzer target; without it fuzz_driver.c
 * replays the seed corpus and fz_mutations() below. */
#include <errno.h>

#include "fuzz_common.h"
#include "fuzz_driver.h"
#include "format/seal.h"

#define RESEAL_MAX (4u << 20)   /* larger inputs are not copied and resealed */
#define TOUCH_BUDGET (8u << 20) /* raw chunk bytes decoded per input */
#define FOOTER_AT (1u << 20)    /* file offset assumed for a bare footer */

static void check_result(int r, const char *why, const char *what)
{
	FZ_CHECK(r == 0 || r == -CKPT_ECORRUPT || r == -CKPT_EFORMAT || r == -ENOMEM,
	         "%s returned %d", what, r);
	FZ_CHECK(r == 0 || r == -ENOMEM || why[0], "%s rejected the input without a reason", what);
}

/* Parses buf as a whole shard file, checks the outcome; returns the
 * decoder's result. */
static int parse_one(const uint8_t *buf, size_t len)
{
	ckpt_shard s;
	char why[256] = "";
	int r = ckpt__shard_parse_mem(buf, len, &s, why, sizeof(why));
	check_result(r, why, "ckpt__shard_parse_mem");
	if (r == 0) {
		const char *bad = fz_shard_invariants(&s, len);
		FZ_CHECK(!bad, "accepted shard breaks an invariant: %s", bad);
		fz_touch_chunks(&s, buf, len, TOUCH_BUDGET);
		/* A DRAM image's seal table, if the input carries one. */
		uint64_t *seals = NULL;
		int sr = ckpt__seal_read(buf, len, &s, &seals, why, sizeof(why));
		FZ_CHECK(sr == 0 || sr == -ENOENT || sr == -CKPT_ECORRUPT || sr == -ENOMEM, "ckpt__seal_read returned %d", sr);
		FZ_CHECK(sr != -CKPT_ECORRUPT || why[0], "ckpt__seal_read rejected a table without a reason");
		FZ_CHECK(sr == 0 || !seals, "ckpt__seal_read failed but returned seals");
		free(seals);
	}
	ckpt__shard_close(&s);
	return r;
}

/* Each decoder alone, so that the fuzzer need not get past checksums. */
static void decoders(const uint8_t *data, size_t size)
{
	char why[256] = "";
	ckpt_fmt_header h;
	uint64_t hsum;
	int r = ckpt__fmt_header_decode(data, size, &h, &hsum, why, sizeof(why));
	check_result(r, why, "ckpt__fmt_header_decode");
	if (r == 0)
		FZ_CHECK(h.world_size && h.rank < h.world_size && ckpt__job_valid(h.job) == 0 &&
		         h.format_version >= 1 && h.format_version <= CKPT_FORMAT_VERSION,
		         "accepted header breaks an invariant");

	/* The input as a tail: once with the file length it claims (to reach
	 * the location checks), once as the end of a file of its own size. */
	ckpt_fmt_tail t;
	uint64_t claimed = size >= 48 ? ckpt__get_le64(data + 40) : size;
	const uint8_t *tails[2] = { data, size >= CKPT_FMT_TAIL_LEN ? data + size - CKPT_FMT_TAIL_LEN : data };
	uint64_t lens[2] = { claimed, size };
	for (int i = 0; i < 2; i++) {
		why[0] = 0;
		size_t tl = i == 0 ? size : CKPT_MIN(size, (size_t)CKPT_FMT_TAIL_LEN);
		r = ckpt__fmt_tail_decode(tails[i], tl, lens[i], &t, why, sizeof(why));
		check_result(r, why, "ckpt__fmt_tail_decode");
		if (r == 0)
			FZ_CHECK(t.footer_offset >= CKPT_FMT_HEADER_LEN && t.footer_offset % CKPT_ALIGN == 0 &&
			         t.footer_offset <= lens[i] && t.footer_length <= lens[i] - t.footer_offset &&
			         lens[i] - t.footer_offset - t.footer_length >= CKPT_FMT_TAIL_LEN &&
			         t.footer_length <= CKPT_FMT_MAX_FOOTER,
			         "accepted tail points outside the file");
	}

	ckpt_fmt_footer f;
	why[0] = 0;
	r = ckpt__fmt_footer_decode(data, size, FOOTER_AT, &f, why, sizeof(why));
	check_result(r, why, "ckpt__fmt_footer_decode");
	if (r == 0) {
		const char *bad = fz_footer_invariants(&f, FOOTER_AT);
		FZ_CHECK(!bad, "accepted footer breaks an invariant: %s", bad);
		ckpt__fmt_footer_free(&f);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	parse_one(data, size);
	decoders(data, size);
	if (size >= CKPT_FMT_HEADER_LEN + CKPT_FMT_TAIL_LEN && size <= RESEAL_MAX) {
		uint8_t *copy = malloc(size);
		if (copy) {
			memcpy(copy, data, size);
			fz_reseal(copy, size);
			parse_one(copy, size);
			free(copy);
		}
	}
	return 0;
}

#ifndef CKPT_FUZZING
const char fz_corpus_name[] = "shard";

static const uint64_t interesting[] = {
	0, 1, 2, 7, 8, 0x7f, 0x80, 0xff, 0x100, 0xfff, 0x1000, 0x1001, 0xffff, 0x10000, 0x10001,
	0x7fffffff, 0x80000000, 0xffffffff, 0x100000000ull, 1ull << 40, 1ull << 63,
	UINT64_MAX - CKPT_ALIGN + 1, UINT64_MAX - 1, UINT64_MAX,
};

/* Puts back what a mutation at [off, off+n) and a reseal changed. */
static void restore(uint8_t *m, const uint8_t *data, size_t size, size_t off, size_t n)
{
	memcpy(m + off, data + off, n);
	memcpy(m + FZ_HEADER_CSUM_OFF, data + FZ_HEADER_CSUM_OFF, 8);
	memcpy(m + size - CKPT_FMT_TAIL_LEN, data + size - CKPT_FMT_TAIL_LEN, CKPT_FMT_TAIL_LEN);
}

/* The seed as a node-DRAM image: its footer followed by a seal table
 * (format.md 6.4). Read back, the table must be found; with any byte of it
 * flipped (the image resealed), never accepted. Returns the runs. */
static uint64_t sealed_mutations(const uint8_t *data, size_t size, uint64_t fo, uint64_t fl)
{
	ckpt_shard s;
	char why[256];
	if (ckpt__shard_parse_mem(data, size, &s, why, sizeof(why)) < 0)
		return 0;
	uint64_t n = s.footer.chunk_count, at = fo + ckpt__seal_at(fl), tl = CKPT_SEAL_FIXED + 8 * n + 8;
	size_t len = fo + CKPT_ALIGN_UP(ckpt__seal_at(fl) + tl + CKPT_FMT_TAIL_LEN, CKPT_ALIGN), runs = 0;
	uint8_t *m = len <= RESEAL_MAX ? calloc(1, len) : NULL;
	if (!m) {
		ckpt__shard_close(&s);
		return 0;
	}
	memcpy(m, data, fo + fl);
	memcpy(m + len - CKPT_FMT_TAIL_LEN, data + size - CKPT_FMT_TAIL_LEN, CKPT_FMT_TAIL_LEN);
	ckpt__put_le64(m + len - CKPT_FMT_TAIL_LEN + 40, len);
	fz_reseal(m, len);
	memcpy(m + at, "CKPTSEAL", 8);
	ckpt__put_le32(m + at + 8, 1);
	ckpt__put_le64(m + at + 16, n);
	ckpt__put_le64(m + at + 24, ckpt__get_le64(m + len - CKPT_FMT_TAIL_LEN + 32));
	for (uint64_t i = 0; i < n; i++)
		ckpt__put_le64(m + at + CKPT_SEAL_FIXED + 8 * i, i * 0x9e3779b97f4a7c15ull);
	ckpt__put_le64(m + at + tl - 8, ckpt_kern_hash(m + at, tl - 8));
	ckpt__shard_close(&s);
	FZ_CHECK(ckpt__shard_parse_mem(m, len, &s, why, sizeof(why)) == 0, "the sealed image does not parse: %s", why);
	uint64_t *seals = NULL;
	FZ_CHECK(ckpt__seal_read(m, len, &s, &seals, why, sizeof(why)) == 0 && (n == 0 || seals[n - 1] ==
	         (n - 1) * 0x9e3779b97f4a7c15ull), "the seal table written is not read back");
	free(seals);
	for (uint64_t i = 0; i < tl; i++, runs++) {
		m[at + i] ^= (uint8_t)(1u << (i % 8));
		parse_one(m, len);
		int r = ckpt__seal_read(m, len, &s, &seals, why, sizeof(why));
		FZ_CHECK(r == -CKPT_ECORRUPT || r == -ENOENT, "byte %llu of the seal table flipped: %d",
		         (unsigned long long)i, r);
		m[at + i] ^= (uint8_t)(1u << (i % 8));
	}
	ckpt__shard_close(&s);
	free(m);
	return runs;
}

uint64_t fz_mutations(const uint8_t *data, size_t size)
{
	ckpt_shard s;
	char why[256];
	if (ckpt__shard_parse_mem(data, size, &s, why, sizeof(why)) < 0)
		return 0; /* a seed that is not a valid shard: replayed as is only */
	uint64_t fo = s.tail.footer_offset, fl = s.tail.footer_length, runs = 0;
	ckpt__shard_close(&s);
	uint8_t *m = calloc(1, size + CKPT_ALIGN);
	if (!m)
		abort();

	/* Truncated or extended files never pass. */
	for (size_t n = 0; n < size; n++, runs++)
		FZ_CHECK(parse_one(data, n) < 0, "file truncated to %zu of %zu bytes accepted", n, size);
	memcpy(m, data, size);
	FZ_CHECK(parse_one(m, size + 1) < 0, "file extended by a byte accepted");
	FZ_CHECK(parse_one(m, size + CKPT_ALIGN) < 0, "file extended by a block accepted");
	runs += 2;

	/* Bit flips at every offset: in checksummed bytes, all eight bits, each
	 * of which must be rejected as it is and may do anything but break an
	 * invariant once resealed; elsewhere (chunk data, padding, which no
	 * checksum of the parser covers) one bit per byte. Large seeds get a
	 * sample of their data. */
	int every = size <= (64u << 10);
	for (size_t i = 0; i < size; i++) {
		int guarded = i < CKPT_FMT_HEADER_USED || (i >= fo && i - fo < fl) ||
		              i >= size - CKPT_FMT_TAIL_LEN;
		if (!guarded) {
			if (every || i % 61 == 0) {
				m[i] ^= (uint8_t)(1u << (i % 8));
				parse_one(m, size);
				m[i] = data[i];
				runs++;
			}
			continue;
		}
		for (int b = 0; b < 8; b++) {
			m[i] ^= (uint8_t)(1u << b);
			int r = parse_one(m, size);
			FZ_CHECK(r != 0, "bit %d of byte %zu flipped, checksums kept: accepted", b, i);
			fz_reseal(m, size);
			parse_one(m, size);
			restore(m, data, size, i, 1);
			runs += 2;
		}
	}

	/* Boundary values in every aligned field of header, footer and tail. */
	for (size_t i = 0; i + 8 <= size; i += 4) {
		int meta = i < CKPT_FMT_HEADER_USED || (i >= fo && i - fo < fl) ||
		           i >= size - CKPT_FMT_TAIL_LEN;
		if (!meta)
			continue;
		for (size_t k = 0; k < CKPT_ARRAY_LEN(interesting); k++) {
			for (int w = 4; w <= 8; w += 4) {
				if (w == 4)
					ckpt__put_le32(m + i, (uint32_t)interesting[k]);
				else
					ckpt__put_le64(m + i, interesting[k]);
				fz_reseal(m, size);
				parse_one(m, size);
				restore(m, data, size, i, (size_t)w);
				runs++;
			}
		}
	}
	free(m);
	return runs + sealed_mutations(data, size, fo, fl);
}
#endif
