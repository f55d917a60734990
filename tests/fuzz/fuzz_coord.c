/* Fuzz target for the coordinator's global index codecs (ckptd/coord/
 * codec.c): the record decoders of the versions, shards, copies, agents and
 * jobs tables, and the copy-key decoder as the copies table (whole key) and
 * the bynode table (the part after the node) use it. Every decoder gets the
 * same untrusted bytes; then the bytes are read as field values for the
 * encoders, whose output must decode back to the same fields.
 *
 * Invariants: a decoder returns 0, -CKPT_ECORRUPT or -CKPT_EFORMAT, and
 * -CKPT_EFORMAT exactly when the record version is newer than this build's;
 * an accepted record holds its documented invariants (counts within the
 * world size, one tier bit, a valid job id) and re-encodes to the bytes it
 * came from (a record's prefix: a longer record of the same version is
 * accepted; the copy record's reserved word is ignored by design); a copy
 * key re-encodes to exactly its bytes; encode then decode is the identity;
 * keys of one job sort by version.
 *
 * With CKPT_FUZZING this is a libFuzzer target; without it fuzz_driver.c
 * (tests/fuzz/) replays the seed corpus and fz_mutations() below. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coord_int.h"
#include "fuzz/fuzz_driver.h"


/* The record head rule of codec.c, restated: what a decoder must return
 * before looking at any field. 1: the head is fine. */
static int head_ok(const uint8_t *b, size_t len, int r)
{
	int newer = len >= 4 && ckpt__get_le32(b) > CKPTD_REC_VERSION;
	FZ_CHECK(r == 0 || r == -CKPT_ECORRUPT || r == -CKPT_EFORMAT, "decoder returned %d", r);
	FZ_CHECK((r == -CKPT_EFORMAT) == newer, "record version %u (len %zu) gave %d",
	         len >= 4 ? ckpt__get_le32(b) : 0, len, r);
	if (r == 0)
		FZ_CHECK(ckpt__get_le32(b) == CKPTD_REC_VERSION, "accepted record version %u",
		         ckpt__get_le32(b));
	return r == 0;
}

static void same_prefix(const char *what, const uint8_t *in, size_t len, const uint8_t *enc,
                        size_t n)
{
	FZ_CHECK(len >= n, "%s: accepted %zu bytes, shorter than its encoding (%zu)", what, len, n);
	if (len >= n)
		FZ_CHECK(!memcmp(in, enc, n), "%s: accepted record does not re-encode to its bytes", what);
}

static void run_vrec(const uint8_t *b, size_t len)
{
	ckptd_vrec v, d;
	if (!head_ok(b, len, ckptd__vrec_decode(b, len, &v)))
		return;
	FZ_CHECK(v.world_size > 0 && v.nshards <= v.world_size && v.ranks_any <= v.nshards,
	         "vrec counts: world %u shards %u any %u", v.world_size, v.nshards, v.ranks_any);
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		FZ_CHECK(v.ranks_at[i] <= v.ranks_any, "vrec ranks_at[%d] %u > any %u", i, v.ranks_at[i],
		         v.ranks_any);
	uint8_t enc[CKPTD_VREC_LEN];
	ckptd__vrec_encode(enc, &v);
	same_prefix("vrec", b, len, enc, sizeof(enc));
	FZ_CHECK(ckptd__vrec_decode(enc, sizeof(enc), &d) == 0 && !memcmp(&v, &d, sizeof(v)),
	         "vrec: re-encoding decodes differently");
	/* What the engine derives from a record read back. */
	ckptd_coord_version o;
	ckptd__version_view(&v, 1, &o);
	FZ_CHECK(!(o.committed & ~CKPTD_COORD_ALL_TIERS) && !(o.held & ~CKPTD_COORD_ALL_TIERS),
	         "vrec: tier masks %#x %#x", o.committed, o.held);
	FZ_CHECK((o.committed & o.held) == o.committed, "vrec: committed %#x not held %#x",
	         o.committed, o.held);
	FZ_CHECK(!o.restorable || ((v.flags & CKPTD_VF_SEALED) && v.ranks_any == v.world_size),
	         "vrec: restorable without being sealed and complete");
}

static void run_srec(const uint8_t *b, size_t len)
{
	ckptd_srec s, d;
	if (!head_ok(b, len, ckptd__srec_decode(b, len, &s)))
		return;
	uint64_t live = 0;
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		live += s.live[i];
	FZ_CHECK(s.ncopies > 0 && live <= s.ncopies, "srec counts: live %llu copies %u",
	         (unsigned long long)live, s.ncopies);
	uint8_t enc[CKPTD_SREC_LEN];
	ckptd__srec_encode(enc, &s);
	same_prefix("srec", b, len, enc, sizeof(enc));
	FZ_CHECK(ckptd__srec_decode(enc, sizeof(enc), &d) == 0 && !memcmp(&s, &d, sizeof(s)),
	         "srec: re-encoding decodes differently");
}

static void run_crec(const uint8_t *b, size_t len)
{
	ckptd_crec c, d;
	if (!head_ok(b, len, ckptd__crec_decode(b, len, &c)))
		return;
	FZ_CHECK(c.state == CKPTD_COPY_LIVE || c.state == CKPTD_COPY_DELETING, "crec state %u",
	         c.state);
	uint8_t enc[CKPTD_CREC_LEN], in[CKPTD_CREC_LEN];
	ckptd__crec_encode(enc, &c);
	if (len >= sizeof(in)) {
		/* Bytes 12..15 are reserved: written 0, not read. */
		memcpy(in, b, sizeof(in));
		memset(in + 12, 0, 4);
		same_prefix("crec", in, sizeof(in), enc, sizeof(enc));
	} else {
		same_prefix("crec", b, len, enc, sizeof(enc));
	}
	FZ_CHECK(ckptd__crec_decode(enc, sizeof(enc), &d) == 0 && !memcmp(&c, &d, sizeof(c)),
	         "crec: re-encoding decodes differently");
}

static void run_arec(const uint8_t *b, size_t len)
{
	ckptd_arec a, d;
	if (!head_ok(b, len, ckptd__arec_decode(b, len, &a)))
		return;
	FZ_CHECK(a.state == CKPTD_AGENT_REC_UP || a.state == CKPTD_AGENT_REC_DOWN, "arec state %u",
	         a.state);
	FZ_CHECK(!a.address[CKPTD_ADDR_MAX] && !a.domain[CKPTD_NAME_MAX], "arec: unterminated string");
	size_t al = ckpt__get_le16(b + 24), dl = ckpt__get_le16(b + 26 + al);
	FZ_CHECK(al <= CKPTD_ADDR_MAX && dl <= CKPTD_NAME_MAX && CKPTD_AREC_MIN + al + dl <= len,
	         "arec: accepted lengths %zu %zu in %zu bytes", al, dl, len);
	if (strlen(a.address) != al || strlen(a.domain) != dl) {
		/* The decoder does not refuse a NUL inside address or domain. */
		FZ_FAIL("ckptd__arec_decode accepted a NUL byte inside address or domain");
		return;
	}
	uint8_t enc[CKPTD_AREC_MIN + CKPTD_ADDR_MAX + CKPTD_NAME_MAX];
	size_t n = ckptd__arec_encode(enc, sizeof(enc), &a);
	FZ_CHECK(n == CKPTD_AREC_MIN + al + dl, "arec: encodes to %zu bytes", n);
	same_prefix("arec", b, len, enc, n);
	FZ_CHECK(ckptd__arec_decode(enc, n, &d) == 0 && !memcmp(&a, &d, sizeof(a)),
	         "arec: re-encoding decodes differently");
	FZ_CHECK(ckptd__arec_encode(enc, n - 1, &a) == 0, "arec: encoded past its capacity");
}

static void run_jrec(const uint8_t *b, size_t len)
{
	ckptd_jrec j, d;
	if (!head_ok(b, len, ckptd__jrec_decode(b, len, &j)))
		return;
	uint8_t enc[CKPTD_JREC_LEN];
	ckptd__jrec_encode(enc, &j);
	/* A record from before the epoch was appended (shorter than it, the
	 * bytes past the old fields ignored) re-encodes its old fields. */
	same_prefix("jrec", b, len, enc, len < sizeof(enc) ? CKPTD_JREC_MIN : sizeof(enc));
	FZ_CHECK(ckptd__jrec_decode(enc, sizeof(enc), &d) == 0 && !memcmp(&j, &d, sizeof(j)),
	         "jrec: re-encoding decodes differently");
}

/* A copy key (node non-NULL: copies table) or a node key's tail (bynode). */
static void run_copy_key(const uint8_t *k, size_t len, const char *prefix_node)
{
	char job[CKPTD_JOB_MAX + 1], node[CKPTD_NAME_MAX + 1];
	uint64_t version;
	uint32_t rank, tier;
	int r = ckptd__copy_key_decode(k, len, job, &version, &rank, &tier,
	                               prefix_node ? NULL : node);
	FZ_CHECK(r == 0 || r == -CKPT_ECORRUPT, "copy_key_decode returned %d", r);
	if (r)
		return;
	FZ_CHECK(ckpt__job_valid(job) == 0, "copy key: accepted job id \"%s\"", job);
	FZ_CHECK(ckptd__tier_index(tier) >= 0, "copy key: accepted tier %#x", tier);
	const char *nd = prefix_node ? prefix_node : node;
	if (!prefix_node && (strlen(node) != k[k[0] + 14] || ckptd__node_valid(node) < 0)) {
		/* Node names must pass ckptd__node_valid (printable, no space, no
		 * NUL), as job ids pass ckpt__job_valid; the decoder checks only
		 * the length. */
		FZ_FAIL("ckptd__copy_key_decode accepted a node name ckptd__node_valid refuses (\"%s\", %zu bytes)", node, len);
		return;
	}
	uint8_t enc[CKPTD_KEY_MAX];
	size_t n;
	if (prefix_node) {
		/* The tail of ckptd__node_key: the copy key without its node. */
		uint8_t full[CKPTD_KEY_MAX];
		size_t fl = ckptd__node_key(full, nd, job, version, rank, tier);
		size_t nl = strlen(nd) + 1;
		n = fl - nl;
		memcpy(enc, full + nl, n);
	} else {
		n = ckptd__copy_key(enc, job, version, rank, tier, nd);
	}
	FZ_CHECK(n == len && !memcmp(enc, k, n), "copy key: does not re-encode to its %zu bytes (%zu)",
	         len, n);
}

/* The bytes as a bynode key: len, node, then the copy key without node. */
static void run_node_key(const uint8_t *k, size_t len)
{
	if (len < 1)
		return;
	size_t nl = k[0];
	if (nl == 0 || nl > CKPTD_NAME_MAX || len <= 1 + nl)
		return;
	char node[CKPTD_NAME_MAX + 1];
	memcpy(node, k + 1, nl);
	node[nl] = 0;
	if (strlen(node) != nl || ckptd__node_valid(node) < 0)
		return; /* recover.c looks up by a valid node; this key is not reached */
	run_copy_key(k + 1 + nl, len - 1 - nl, node);
}

/* ---------------------------------------------------------------- encoders */

typedef struct {
	const uint8_t *p;
	size_t n;
} fz_in;

static uint8_t take8(fz_in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}
static uint32_t take32(fz_in *in)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v = (v << 8) | take8(in);
	return v;
}
static uint64_t take64(fz_in *in)
{
	return (uint64_t)take32(in) << 32 | take32(in);
}
/* A string of 1..max characters from set (first character from first). */
static void take_name(fz_in *in, char *out, size_t max, const char *first, const char *set)
{
	size_t n = 1 + take8(in) % max, fl = strlen(first), sl = strlen(set);
	for (size_t i = 0; i < n; i++)
		out[i] = i ? set[take8(in) % sl] : first[take8(in) % fl];
	out[n] = 0;
}
static uint32_t below(uint32_t x, uint32_t lim) /* 0..lim */
{
	return (uint32_t)(x % ((uint64_t)lim + 1));
}

#define FZ_JOB_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

static void run_encoders(const uint8_t *data, size_t size)
{
	fz_in in = { data, size };
	ckptd_vrec v, vd;
	memset(&v, 0, sizeof(v));
	v.world_size = take32(&in) | 1;
	v.nshards = below(take32(&in), v.world_size);
	v.ranks_any = below(take32(&in), v.nshards);
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		v.ranks_at[i] = below(take32(&in), v.ranks_any);
	v.flags = take32(&in);
	v.deleting = take32(&in);
	v.bytes = take64(&in);
	v.lineage = take64(&in);
	v.created_ns = take64(&in);
	v.committed_ns = take64(&in);
	uint8_t vb[CKPTD_VREC_LEN + 8];
	ckptd__vrec_encode(vb, &v);
	memset(vb + CKPTD_VREC_LEN, take8(&in), 8); /* a field appended later */
	FZ_CHECK(ckptd__vrec_decode(vb, CKPTD_VREC_LEN, &vd) == 0 && !memcmp(&v, &vd, sizeof(v)),
	         "vrec: encode/decode is not the identity");
	FZ_CHECK(ckptd__vrec_decode(vb, sizeof(vb), &vd) == 0 && !memcmp(&v, &vd, sizeof(v)),
	         "vrec: a longer record is refused");
	FZ_CHECK(ckptd__vrec_decode(vb, CKPTD_VREC_LEN - 1, &vd) == -CKPT_ECORRUPT,
	         "vrec: a short record is accepted");

	ckptd_srec s, sd;
	memset(&s, 0, sizeof(s));
	s.ncopies = take32(&in) | 1;
	uint32_t left = s.ncopies;
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		left -= s.live[i] = below(take32(&in), left);
	s.bytes = take64(&in);
	s.checksum = take64(&in);
	s.lineage = take64(&in);
	uint8_t sb[CKPTD_SREC_LEN];
	ckptd__srec_encode(sb, &s);
	FZ_CHECK(ckptd__srec_decode(sb, sizeof(sb), &sd) == 0 && !memcmp(&s, &sd, sizeof(s)),
	         "srec: encode/decode is not the identity");

	ckptd_crec c, cd;
	memset(&c, 0, sizeof(c));
	c.state = take8(&in) & 1 ? CKPTD_COPY_DELETING : CKPTD_COPY_LIVE;
	c.gen = take32(&in);
	c.since_ns = take64(&in);
	uint8_t cb[CKPTD_CREC_LEN];
	ckptd__crec_encode(cb, &c);
	FZ_CHECK(ckptd__crec_decode(cb, sizeof(cb), &cd) == 0 && !memcmp(&c, &cd, sizeof(c)),
	         "crec: encode/decode is not the identity");

	ckptd_arec a, ad;
	memset(&a, 0, sizeof(a));
	a.state = take8(&in) & 1 ? CKPTD_AGENT_REC_DOWN : CKPTD_AGENT_REC_UP;
	a.gen = take32(&in);
	a.in_round = take32(&in);
	a.last_seen_ns = take64(&in);
	take_name(&in, a.address, CKPTD_ADDR_MAX, "u", "unix:/abc09.-_ ");
	if (take8(&in) & 1)
		take_name(&in, a.domain, CKPTD_NAME_MAX, "r", "rack0123456789-");
	uint8_t ab[CKPTD_AREC_MIN + CKPTD_ADDR_MAX + CKPTD_NAME_MAX];
	size_t an = ckptd__arec_encode(ab, sizeof(ab), &a);
	FZ_CHECK(an == CKPTD_AREC_MIN + strlen(a.address) + strlen(a.domain), "arec: %zu bytes", an);
	FZ_CHECK(ckptd__arec_decode(ab, an, &ad) == 0 && !memcmp(&a, &ad, sizeof(a)),
	         "arec: encode/decode is not the identity");
	FZ_CHECK(an == 0 || ckptd__arec_decode(ab, an - 1, &ad) == -CKPT_ECORRUPT,
	         "arec: a short record is accepted");

	ckptd_jrec j, jd;
	memset(&j, 0, sizeof(j));
	j.world_size = take32(&in);
	j.policy.keep_dram = take32(&in);
	j.policy.keep_disk = take32(&in);
	j.policy.keep_every = take64(&in);
	j.created_ns = take64(&in);
	uint8_t jb[CKPTD_JREC_LEN];
	ckptd__jrec_encode(jb, &j);
	FZ_CHECK(ckptd__jrec_decode(jb, sizeof(jb), &jd) == 0 && !memcmp(&j, &jd, sizeof(j)),
	         "jrec: encode/decode is not the identity");

	/* Keys. */
	char job[CKPTD_JOB_MAX + 1], node[CKPTD_NAME_MAX + 1], jd_[CKPTD_JOB_MAX + 1];
	char nd[CKPTD_NAME_MAX + 1];
	take_name(&in, job, CKPTD_JOB_MAX, "abzAZ09_-", FZ_JOB_CHARS);
	take_name(&in, node, CKPTD_NAME_MAX, "n", "!#$%&()*+,-./0123456789:;<=>?@AZaz[]^_`{|}~");
	uint64_t version = take64(&in), dv;
	uint32_t rank = take32(&in), tier = 1u << (take8(&in) % CKPTD_COORD_TIERS), dr, dt;
	FZ_CHECK(ckpt__job_valid(job) == 0 && ckptd__node_valid(node) == 0, "bad generated names");
	uint8_t kb[CKPTD_KEY_MAX], kb2[CKPTD_KEY_MAX];
	size_t kn = ckptd__copy_key(kb, job, version, rank, tier, node);
	FZ_CHECK(kn <= CKPTD_KEY_MAX, "copy key of %zu bytes", kn);
	int r = ckptd__copy_key_decode(kb, kn, jd_, &dv, &dr, &dt, nd);
	FZ_CHECK(r == 0 && !strcmp(job, jd_) && dv == version && dr == rank && dt == tier &&
	         !strcmp(node, nd), "copy key: encode/decode is not the identity (%d)", r);
	size_t nn = ckptd__node_key(kb2, node, job, version, rank, tier);
	size_t nl = strlen(node) + 1;
	FZ_CHECK(nn <= CKPTD_KEY_MAX && kb2[0] == nl - 1, "node key of %zu bytes", nn);
	r = ckptd__copy_key_decode(kb2 + nl, nn - nl, jd_, &dv, &dr, &dt, NULL);
	FZ_CHECK(r == 0 && !strcmp(job, jd_) && dv == version && dr == rank && dt == tier,
	         "node key: encode/decode is not the identity (%d)", r);
	/* A range scan of one job walks its versions in ascending order. */
	if (version < UINT64_MAX) {
		size_t kn2 = ckptd__copy_key(kb2, job, version + 1, 0, CKPT_TIER_LOCAL_MEM, "a");
		size_t m = kn < kn2 ? kn : kn2;
		FZ_CHECK(memcmp(kb, kb2, m) < 0, "copy keys of versions %llu and next out of order",
		         (unsigned long long)version);
	}
	size_t jl = ckptd__job_key(kb2, job);
	FZ_CHECK(jl == 1 + strlen(job) && kb2[0] == strlen(job) && !memcmp(kb2 + 1, job, jl - 1) &&
	         !memcmp(kb, kb2, jl), "job key is not the copy key's prefix");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_vrec(data, size);
	run_srec(data, size);
	run_crec(data, size);
	run_arec(data, size);
	run_jrec(data, size);
	run_copy_key(data, size, NULL);
	run_node_key(data, size);
	run_encoders(data, size);
	return 0;
}

#ifndef CKPT_FUZZING
const char fz_corpus_name[] = "coord";

uint64_t fz_mutations(const uint8_t *data, size_t size)
{
	uint64_t runs = 0;
	uint8_t *m = malloc(size + 16);
	if (!m)
		abort();
	/* Every truncation, and a few appended bytes (fields of a later version). */
	for (size_t n = 0; n < size; n++, runs++) {
		memcpy(m, data, n);
		LLVMFuzzerTestOneInput(m, n);
	}
	for (size_t extra = 1; extra <= 16; extra *= 2, runs++) {
		memcpy(m, data, size);
		memset(m + size, 0xa5, extra);
		LLVMFuzzerTestOneInput(m, size + extra);
	}
	/* Bit flips and boundary values at every offset. */
	static const uint8_t vals[] = { 0, 1, 2, 3, 4, 8, 0x20, 0x2e, 0x40, 0x7e, 0x7f, 0x80, 0xfe, 0xff };
	memcpy(m, data, size);
	runs += fz_flips_and_values(m, data, size, vals, sizeof(vals));
	free(m);
	return runs;
}
#endif
