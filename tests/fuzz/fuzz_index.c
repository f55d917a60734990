/* Fuzz target for the LMDB index codecs: version records, shard records and
 * keys; the SHARED tree's commit marker (a small text record on disk); and
 * the object store's keys as a LIST answers them (format/s3tree.h). A record that decodes must re-encode to the same bytes and satisfy
 * the decoder's promises; anything else must be refused with
 * -CKPT_ECORRUPT or -CKPT_EFORMAT.
 *
 * With CKPT_FUZZING this is a libFuzzer target; without it fuzz_driver.c
 * replays the seed corpus and fz_mutations() below. */
#include "fuzz_common.h"
#include "fuzz_driver.h"
#include "format/index.h"
#include "format/shared.h"
#include "format/s3tree.h"

#include <errno.h>

static void check_err(int r, const char *what)
{
	FZ_CHECK(r == 0 || r == -CKPT_ECORRUPT || r == -CKPT_EFORMAT, "%s returned %d", what, r);
}

/* A decoded record re-encodes to the bytes it came from. A record shorter
 * than today's (written before a field was added) decodes the missing
 * fields as zero; bytes past today's length are ignored. */
static int same_record(const uint8_t *enc, size_t enclen, const uint8_t *data, size_t size)
{
	size_t k = size < enclen ? size : enclen;
	if (memcmp(enc, data, k))
		return 0;
	for (size_t i = k; i < enclen; i++)
		if (enc[i])
			return 0;
	return 1;
}

static int run_version(const uint8_t *data, size_t size)
{
	ckpt_idx_version v;
	int r = ckpt__idx_version_decode(data, size, &v);
	check_err(r, "ckpt__idx_version_decode");
	if (r == 0) {
		FZ_CHECK(v.state >= CKPT_STATE_PENDING && v.state <= CKPT_STATE_DELETING,
		         "accepted version record has state %u", v.state);
		FZ_CHECK(v.world_size > 0 && v.shards_done <= v.world_size,
		         "accepted version record has %u/%u shards", v.shards_done, v.world_size);
		uint8_t enc[CKPT_IDX_VERSION_REC_LEN];
		ckpt__idx_version_encode(enc, &v);
		FZ_CHECK(same_record(enc, sizeof(enc), data, size), "version record does not re-encode to its bytes");
	}
	return r;
}

static int run_shard(const uint8_t *data, size_t size)
{
	ckpt_idx_shard s;
	int r = ckpt__idx_shard_decode(data, size, &s);
	check_err(r, "ckpt__idx_shard_decode");
	if (r == 0) {
		FZ_CHECK(!(s.tiers & ~0xfu), "accepted shard record has tiers %#x", s.tiers);
		uint8_t enc[CKPT_IDX_SHARD_REC_LEN];
		ckpt__idx_shard_encode(enc, &s);
		FZ_CHECK(same_record(enc, sizeof(enc), data, size), "shard record does not re-encode to its bytes");
	}
	return r;
}

static int run_key(const uint8_t *data, size_t size)
{
	char job[65];
	uint64_t version;
	uint32_t rank;
	int has_rank;
	int r = ckpt__idx_key_decode(data, size, job, &version, &rank, &has_rank);
	FZ_CHECK(r == 0 || r == -CKPT_ECORRUPT, "ckpt__idx_key_decode returned %d", r);
	if (r == 0) {
		FZ_CHECK(ckpt__job_valid(job) == 0, "accepted key holds an invalid job id");
		uint8_t enc[CKPT_IDX_KEY_MAX];
		size_t n = ckpt__idx_key(enc, job, version, has_rank, rank);
		FZ_CHECK(n == size && !memcmp(enc, data, n), "key does not re-encode to its bytes");
	}
	return r;
}

/* A marker is accepted only for the job and version it names, with ranks. */
static int run_marker(const uint8_t *data, size_t size)
{
	ckpt_shared_mark m = { 0, 0 };
	int r = ckpt__shared_marker_parse((const char *)data, size, "j", 7, &m);
	FZ_CHECK(r == 0 || r == -CKPT_ECORRUPT, "ckpt__shared_marker_parse returned %d", r);
	if (r == 0) {
		FZ_CHECK(m.world_size > 0, "accepted marker has world size 0");
		ckpt_shared_mark o;
		FZ_CHECK(ckpt__shared_marker_parse((const char *)data, size, "k", 7, &o) == -CKPT_ECORRUPT &&
		         ckpt__shared_marker_parse((const char *)data, size, "j", 8, &o) == -CKPT_ECORRUPT,
		         "a marker was accepted for another job or version");
	}
	return r;
}

/* A key from a listing is taken only in the layout's own spelling: one that
 * parses is what ckpt__s3tree_key writes for what it parsed to. */
static int run_s3key(const uint8_t *data, size_t size)
{
	static ckpt_s3tree t = { .prefix = "p/" };
	char key[CKPT_S3TREE_KEY_MAX], job[65], again[CKPT_S3TREE_KEY_MAX];
	size_t n = size < sizeof(key) - 1 ? size : sizeof(key) - 1;
	memcpy(key, data, n);
	key[n] = '\0';
	uint64_t v = 0;
	uint32_t rank = 0;
	int r = ckpt__s3tree_parse_key(&t, key, job, &v, &rank);
	FZ_CHECK(r == 0 || r == -EINVAL, "ckpt__s3tree_parse_key returned %d", r);
	if (r == 0) {
		FZ_CHECK(ckpt__job_valid(job) == 0, "a key parsed to an invalid job id");
		FZ_CHECK(ckpt__s3tree_key(&t, again, sizeof(again), job, v, rank) == 0 && !strcmp(again, key),
		         "key '%s' parses but is not the one written for it", key);
	}
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_version(data, size);
	run_shard(data, size);
	run_key(data, size);
	run_marker(data, size);
	run_s3key(data, size);
	return 0;
}

#ifndef CKPT_FUZZING
const char fz_corpus_name[] = "index";

static uint64_t mix(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

uint64_t fz_mutations(const uint8_t *data, size_t size)
{
	uint64_t runs = 0;
	uint8_t *m = malloc(size + 1);
	if (!m)
		abort();
	memcpy(m, data, size);
	/* Every truncation: refused, or read as an older, shorter record. */
	for (size_t n = 0; n < size; n++, runs++)
		LLVMFuzzerTestOneInput(data, n);
	static const uint8_t vals[] = { 0, 1, 2, 3, 4, 0x0f, 0x10, 0x2e, 0x2f, 0x40, 0x41, 0x7f, 0x80, 0xff };
	runs += fz_flips_and_values(m, data, size, vals, sizeof(vals));
	free(m);

	/* Records made by the encoders from random fields decode back to them
	 * whenever the fields are valid. */
	uint64_t x = size;
	for (int i = 0; i < 2000; i++, runs += 2) {
		ckpt_idx_version v = { .state = (uint32_t)(mix(&x) % 5), .world_size = (uint32_t)(mix(&x) % 4),
		                       .shards_done = (uint32_t)(mix(&x) % 4), .bytes = mix(&x),
		                       .stored_bytes = mix(&x), .created_ns = mix(&x), .committed_ns = mix(&x),
		                       .lineage = mix(&x) };
		uint8_t vb[CKPT_IDX_VERSION_REC_LEN];
		ckpt__idx_version_encode(vb, &v);
		int valid = v.state >= 1 && v.state <= 3 && v.world_size && v.shards_done <= v.world_size;
		FZ_CHECK((run_version(vb, sizeof(vb)) == 0) == valid, "encoded version record misjudged");
		ckpt_idx_shard s = { .tiers = (uint32_t)(mix(&x) & 0x1f), .bytes = mix(&x), .stored_bytes = mix(&x),
		                     .footer_checksum = mix(&x), .durable_ns = mix(&x), .lineage = mix(&x) };
		uint8_t sb[CKPT_IDX_SHARD_REC_LEN];
		ckpt__idx_shard_encode(sb, &s);
		FZ_CHECK((run_shard(sb, sizeof(sb)) == 0) == !(s.tiers & ~0xfu), "encoded shard record misjudged");
		char mk[200];
		unsigned ws = (unsigned)(mix(&x) % 3);
		int n = snprintf(mk, sizeof(mk), "ckpt-shared-commit 1\njob j\nversion 7\nworld_size %u\nlineage %016llx\n", ws,
		                 (unsigned long long)mix(&x));
		FZ_CHECK((run_marker((const uint8_t *)mk, (size_t)n) == 0) == (ws > 0), "written marker misjudged");
	}
	return runs;
}
#endif
