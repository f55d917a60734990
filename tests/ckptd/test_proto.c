/* The control protocol's codec: round trips of every message type, every
 * truncation, size limits, field limits and version rules. */
#include "helpers.h"
#include "wire/proto.h"
#include "base/common.h"
#include "samples.h"

/* ---- hand-made frames ---- */
typedef struct tb {
	uint8_t buf[16384];
	size_t len;
} tb;

static void tb_start(tb *b, uint8_t major, uint8_t minor, uint16_t type)
{
	ckptd_frame_header h = { .major = major, .minor = minor, .type = type };
	ckptd_header_encode(b->buf, &h);
	b->len = CKPTD_HEADER_LEN;
}

static void tb_raw(tb *b, uint16_t tag, uint8_t wire, const void *p, uint32_t n)
{
	T_ASSERT(b->len + 8 + n <= sizeof(b->buf));
	uint8_t *q = b->buf + b->len;
	q[0] = (uint8_t)tag;
	q[1] = (uint8_t)(tag >> 8);
	q[2] = wire;
	q[3] = 0;
	for (int i = 0; i < 4; i++)
		q[4 + i] = (uint8_t)(n >> (8 * i));
	if (n)
		memcpy(q + 8, p, n);
	b->len += 8 + n;
}

static void tb_u32(tb *b, uint16_t tag, uint32_t v)
{
	uint8_t x[4];
	for (int i = 0; i < 4; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	tb_raw(b, tag, CKPTD_WIRE_U32, x, 4);
}

static void tb_u64(tb *b, uint16_t tag, uint64_t v)
{
	uint8_t x[8];
	for (int i = 0; i < 8; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	tb_raw(b, tag, CKPTD_WIRE_U64, x, 8);
}

static void tb_str(tb *b, uint16_t tag, const char *s)
{
	tb_raw(b, tag, CKPTD_WIRE_STR, s, (uint32_t)strlen(s));
}

static void tb_end(tb *b)
{
	uint32_t n = (uint32_t)(b->len - CKPTD_HEADER_LEN);
	for (int i = 0; i < 4; i++)
		b->buf[12 + i] = (uint8_t)(n >> (8 * i));
}

static int decode(const uint8_t *buf, size_t len, const char **why)
{
	ckptd_msg m;
	int r = ckptd_msg_decode(buf, len, &m, why);
	ckptd_msg_free(&m);
	return r;
}

#define EXPECT(b, want, what) do { const char *why__ = NULL; tb_end(b); \
	int r__ = decode((b)->buf, (b)->len, &why__); \
	if (r__ != (want)) T_FAIL("%s: decode returned %d (%s), expected %d", what, r__, why__ ? why__ : "-", want); \
	} while (0)

/* A SHARD_DONE with every required field except those the caller adds. */
static void shard_done_base(tb *b, const char *job)
{
	tb_start(b, CKPTD_PROTO_MAJOR, CKPTD_PROTO_MINOR, CKPTD_MSG_SHARD_DONE);
	tb_str(b, CKPTD_TAG_JOB, job);
	tb_u64(b, CKPTD_TAG_VERSION, 5);
	tb_u32(b, CKPTD_TAG_RANK, 1);
	tb_u64(b, CKPTD_TAG_BYTES, 4096);
	tb_u64(b, CKPTD_TAG_CHECKSUM, 1);
	tb_u64(b, CKPTD_TAG_LINEAGE, 1);
}

/* ---- round trips ---- */
static void test_roundtrip(void)
{
	static uint8_t buf[CKPTD_MAX_FRAME], buf2[CKPTD_MAX_FRAME];
	for (size_t t = 0; t < T_NTYPES; t++)
		for (int variant = 0; variant < 2; variant++) {
			ckptd_msg m, d;
			t_store st;
			t_sample(&m, &st, t_types[t], variant);
			long want = ckptd_msg_encoded_size(&m);
			size_t len = 0, len2 = 0;
			T_OK(ckptd_msg_encode(&m, buf, sizeof(buf), &len));
			T_ASSERT(want > 0 && (size_t)want == len);
			const char *why = NULL;
			int r = ckptd_msg_decode(buf, len, &d, &why);
			if (r)
				T_FAIL("%s variant %d: decode %d (%s)", ckptd_msg_name(m.type), variant, r, why);
			T_ASSERT(d.major == CKPTD_PROTO_MAJOR && d.minor == CKPTD_PROTO_MINOR);
			if (!ckptd_msg_equal(&m, &d))
				T_FAIL("%s variant %d: decoded message differs", ckptd_msg_name(m.type), variant);
			T_OK(ckptd_msg_encode(&d, buf2, sizeof(buf2), &len2));
			T_ASSERT(len2 == len && !memcmp(buf, buf2, len));
			/* One byte too little room: refused, nothing claimed written. */
			T_ERR(ckptd_msg_encode(&m, buf2, len - 1, &len2), -ENOBUFS);
			ckptd_msg_free(&d);
			ckptd_msg_free(&m); /* caller-built: must not free st */
			T_ASSERT(ckptd_msg_name(t_types[t]) != NULL);
		}
	T_ASSERT(ckptd_msg_name(999) == NULL);
}

/* Every truncation as it is (header length unchanged) is refused; with the
 * header's length made to match, it is refused or, cut at a field boundary
 * after the required fields, read as the same message without the optional
 * fields cut off (it re-encodes to exactly the bytes kept). */
static void test_truncations(void)
{
	static uint8_t buf[65536], cut[65536], re[65536];
	unsigned long n_checked = 0, n_accepted = 0;
	for (size_t t = 0; t < T_NTYPES; t++)
		for (int variant = 0; variant < 2; variant++) {
			ckptd_msg m;
			t_store st;
			t_sample(&m, &st, t_types[t], variant);
			size_t len;
			T_OK(ckptd_msg_encode(&m, buf, sizeof(buf), &len));
			for (size_t n = 0; n < len; n++) {
				const char *why = NULL;
				uint8_t *exact = malloc(n ? n : 1); /* so that ASan sees overreads */
				T_ASSERT(exact);
				memcpy(exact, buf, n);
				int r = decode(exact, n, &why);
				free(exact);
				if (r != -CKPT_ECORRUPT)
					T_FAIL("%s: truncation to %zu of %zu bytes: %d", ckptd_msg_name(m.type), n, len, r);
				if (n < CKPTD_HEADER_LEN)
					continue;
				memcpy(cut, buf, n);
				uint32_t pl = (uint32_t)(n - CKPTD_HEADER_LEN);
				for (int i = 0; i < 4; i++)
					cut[12 + i] = (uint8_t)(pl >> (8 * i));
				ckptd_msg d;
				r = ckptd_msg_decode(cut, n, &d, &why);
				n_checked++;
				if (r == 0) {
					size_t rl;
					n_accepted++;
					T_OK(ckptd_msg_encode(&d, re, sizeof(re), &rl));
					if (rl != n || memcmp(re, cut, n))
						T_FAIL("%s: cut to %zu bytes accepted but is not a shorter valid message",
						       ckptd_msg_name(m.type), n);
				} else if (r != -CKPT_ECORRUPT) {
					T_FAIL("%s: cut to %zu: %d", ckptd_msg_name(m.type), n, r);
				}
				ckptd_msg_free(&d);
			}
		}
	printf("truncations: %lu cut frames, %lu accepted as shorter valid messages\n", n_checked, n_accepted);
}

/* ---- sizes ---- */
static void test_sizes(void)
{
	/* A header declaring more than the limit is refused from the header
	 * alone, before any body. */
	uint8_t hb[CKPTD_HEADER_LEN];
	ckptd_frame_header h = { .major = 1, .type = CKPTD_MSG_STATUS, .length = CKPTD_MAX_PAYLOAD + 1 }, g;
	ckptd_header_encode(hb, &h);
	const char *why = NULL;
	T_ERR(ckptd_header_decode(hb, sizeof(hb), &g, &why), -EMSGSIZE);
	T_ERR(decode(hb, sizeof(hb), &why), -EMSGSIZE);
	h.length = UINT32_MAX;
	ckptd_header_encode(hb, &h);
	T_ERR(decode(hb, sizeof(hb), &why), -EMSGSIZE);
	h.length = CKPTD_MAX_PAYLOAD;
	ckptd_header_encode(hb, &h);
	T_OK(ckptd_header_decode(hb, sizeof(hb), &g, &why));
	T_ASSERT(g.length == CKPTD_MAX_PAYLOAD && g.type == CKPTD_MSG_STATUS);
	T_ERR(ckptd_header_decode(hb, sizeof(hb) - 1, &g, &why), -EINVAL);

	/* The largest message (room left for the seal) decodes; one byte more
	 * is refused. Filled with a field of a newer minor version. */
	uint8_t *huge = malloc(CKPTD_MAX_FRAME);
	T_ASSERT(huge);
	for (uint32_t extra = 0; extra < 2; extra++) {
		uint32_t total = CKPTD_MAX_MESSAGE + extra, fl = total - CKPTD_HEADER_LEN - 8;
		ckptd_frame_header bh = { .major = 1, .type = CKPTD_MSG_OK, .length = total - CKPTD_HEADER_LEN };
		ckptd_header_encode(huge, &bh);
		memset(huge + CKPTD_HEADER_LEN, 'x', total - CKPTD_HEADER_LEN);
		uint8_t fh[8] = { 0x60, 0xea, CKPTD_WIRE_STR, 0, (uint8_t)fl, (uint8_t)(fl >> 8), (uint8_t)(fl >> 16), 0 };
		memcpy(huge + CKPTD_HEADER_LEN, fh, sizeof(fh));
		T_ERR(decode(huge, total, &why), extra ? -EMSGSIZE : 0);
	}
	free(huge);

	/* Lists at their longest: fit when entries are small, refused with
	 * EMSGSIZE when the frame would exceed the limit, EINVAL past the count. */
	uint8_t *buf = malloc(CKPTD_MAX_FRAME);
	ckptd_held_shard *hs = calloc(CKPTD_MAX_LIST + 1, sizeof(*hs));
	ckptd_agent_info *ai = calloc(CKPTD_MAX_LIST, sizeof(*ai));
	T_ASSERT(buf && hs && ai);
	for (uint32_t i = 0; i <= CKPTD_MAX_LIST; i++) {
		t_str(hs[i].job, CKPTD_JOB_MAX, 'q');
		hs[i].version = i;
		hs[i].rank = i;
		hs[i].world_size = i + 1;
		hs[i].tiers = CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK;
		hs[i].committed = CKPT_TIER_LOCAL_DISK;
		hs[i].bytes = UINT64_MAX;
		hs[i].checksum = ~(uint64_t)i;
		hs[i].lineage = 3;
	}
	ckptd_msg m = { .type = CKPTD_MSG_AGENT_INVENTORY }, d;
	snprintf(m.u.agent_inventory.node, sizeof(m.u.agent_inventory.node), "n1");
	m.u.agent_inventory.entries = hs;
	m.u.agent_inventory.count = CKPTD_MAX_LIST;
	size_t len;
	T_OK(ckptd_msg_encode(&m, buf, CKPTD_MAX_FRAME, &len));
	T_ASSERT(len <= CKPTD_MAX_FRAME);
	T_OK(ckptd_msg_decode(buf, len, &d, &why));
	T_ASSERT(d.u.agent_inventory.count == CKPTD_MAX_LIST && ckptd_msg_equal(&m, &d));
	ckptd_msg_free(&d);
	/* The same frame with its count raised past the limit. */
	size_t off = CKPTD_HEADER_LEN;
	for (;;) { /* find the ENTRIES field */
		uint16_t tag = (uint16_t)(buf[off] | buf[off + 1] << 8);
		uint32_t fl = (uint32_t)buf[off + 4] | (uint32_t)buf[off + 5] << 8 | (uint32_t)buf[off + 6] << 16 |
		              (uint32_t)buf[off + 7] << 24;
		if (tag == CKPTD_TAG_ENTRIES)
			break;
		off += 8 + fl;
		T_ASSERT(off < len);
	}
	uint32_t big = CKPTD_MAX_LIST + 1;
	for (int i = 0; i < 4; i++)
		buf[off + 8 + i] = (uint8_t)(big >> (8 * i));
	T_ERR(decode(buf, len, &why), -CKPT_ECORRUPT);
	m.u.agent_inventory.count = CKPTD_MAX_LIST + 1;
	T_ERR(ckptd_msg_encode(&m, buf, CKPTD_MAX_FRAME, &len), -EINVAL);

	for (uint32_t i = 0; i < CKPTD_MAX_LIST; i++) {
		t_str(ai[i].node, CKPTD_NAME_MAX, 'n');
		t_str(ai[i].address, CKPTD_ADDR_MAX, 'a');
		t_str(ai[i].domain, CKPTD_NAME_MAX, 'd');
		ai[i].state = CKPTD_AGENT_UP;
	}
	memset(&m, 0, sizeof(m));
	m.type = CKPTD_MSG_STATUS_REPLY;
	snprintf(m.u.status_reply.node, sizeof(m.u.status_reply.node), "n");
	m.u.status_reply.roles = CKPTD_SERVES_COORDINATOR;
	m.u.status_reply.entries = ai;
	m.u.status_reply.count = CKPTD_MAX_LIST;
	T_ERR(ckptd_msg_encode(&m, buf, CKPTD_MAX_FRAME, &len), -EMSGSIZE);
	T_ERR((int)ckptd_msg_encoded_size(&m), -EMSGSIZE);
	m.u.status_reply.count = 1000; /* about 470 KB */
	T_OK(ckptd_msg_encode(&m, buf, CKPTD_MAX_FRAME, &len));
	T_OK(ckptd_msg_decode(buf, len, &d, &why));
	T_ASSERT(ckptd_msg_equal(&m, &d));
	ckptd_msg_free(&d);
	m.u.status_reply.entries = NULL;
	T_ERR(ckptd_msg_encode(&m, buf, CKPTD_MAX_FRAME, &len), -EINVAL);
	free(buf);
	free(hs);
	free(ai);
}

/* ---- field limits and malformed fields ---- */
static void test_fields(void)
{
	static tb b;
	char s[2048];
	uint8_t nonce[CKPTD_NONCE_LEN + 1] = { 0 };

	shard_done_base(&b, "job");
	tb_u32(&b, CKPTD_TAG_TIER, CKPT_TIER_LOCAL_DISK);
	EXPECT(&b, 0, "valid SHARD_DONE");

	t_str(s, CKPTD_JOB_MAX, 'j');
	shard_done_base(&b, s);
	tb_u32(&b, CKPTD_TAG_TIER, CKPT_TIER_LOCAL_DISK);
	EXPECT(&b, 0, "job at its longest");
	t_str(s, CKPTD_JOB_MAX + 1, 'j');
	shard_done_base(&b, s);
	tb_u32(&b, CKPTD_TAG_TIER, CKPT_TIER_LOCAL_DISK);
	EXPECT(&b, -CKPT_ECORRUPT, "job one too long");
	static const char *bad_jobs[] = { "", ".hidden", "a/b", "..", "a b", "a\\b", "j\xc3\xa9" };
	for (size_t i = 0; i < sizeof(bad_jobs) / sizeof(bad_jobs[0]); i++) {
		shard_done_base(&b, bad_jobs[i]);
		tb_u32(&b, CKPTD_TAG_TIER, CKPT_TIER_LOCAL_DISK);
		EXPECT(&b, -CKPT_ECORRUPT, bad_jobs[i]);
	}
	/* A NUL inside a string. */
	tb_start(&b, 1, 0, CKPTD_MSG_DELETE_VERSION);
	tb_raw(&b, CKPTD_TAG_JOB, CKPTD_WIRE_STR, "ab\0c", 4);
	tb_u64(&b, CKPTD_TAG_VERSION, 1);
	EXPECT(&b, -CKPT_ECORRUPT, "NUL in a job id");

	/* Semantic checks. */
	shard_done_base(&b, "job");
	tb_u32(&b, CKPTD_TAG_TIER, CKPT_TIER_LOCAL_DISK | CKPT_TIER_SHARED);
	EXPECT(&b, -CKPT_ECORRUPT, "two tiers where one is meant");
	shard_done_base(&b, "job");
	tb_u32(&b, CKPTD_TAG_TIER, 1u << 4);
	EXPECT(&b, -CKPT_ECORRUPT, "unknown tier");
	shard_done_base(&b, "job");
	tb_u32(&b, CKPTD_TAG_TIER, CKPT_TIER_LOCAL_MEM);
	tb_u32(&b, CKPTD_TAG_WORLD_SIZE, 1);
	EXPECT(&b, -CKPT_ECORRUPT, "rank 1 of world size 1");
	tb_start(&b, 1, 0, CKPTD_MSG_REGISTER_RANK);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_u32(&b, CKPTD_TAG_RANK, 0);
	tb_u32(&b, CKPTD_TAG_WORLD_SIZE, 0);
	tb_u32(&b, CKPTD_TAG_PID, 1);
	EXPECT(&b, -CKPT_ECORRUPT, "world size 0");
	tb_start(&b, 1, 0, CKPTD_MSG_HELLO);
	tb_u32(&b, CKPTD_TAG_ROLE, CKPTD_ROLE_AGENT);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_raw(&b, CKPTD_TAG_NONCE, CKPTD_WIRE_BYTES, nonce, CKPTD_NONCE_LEN);
	EXPECT(&b, -CKPT_ECORRUPT, "agent HELLO naming a job");
	tb_start(&b, 1, 0, CKPTD_MSG_HELLO);
	tb_u32(&b, CKPTD_TAG_ROLE, 9);
	tb_raw(&b, CKPTD_TAG_NONCE, CKPTD_WIRE_BYTES, nonce, CKPTD_NONCE_LEN);
	EXPECT(&b, -CKPT_ECORRUPT, "unknown role");
	tb_start(&b, 1, 0, CKPTD_MSG_HELLO);
	tb_u32(&b, CKPTD_TAG_ROLE, CKPTD_ROLE_CLI);
	tb_raw(&b, CKPTD_TAG_NONCE, CKPTD_WIRE_BYTES, nonce, CKPTD_NONCE_LEN);
	EXPECT(&b, 0, "cluster-scope CLI HELLO");

	/* Fixed-size bytes. */
	tb_start(&b, 1, 0, CKPTD_MSG_CHALLENGE);
	tb_raw(&b, CKPTD_TAG_NONCE, CKPTD_WIRE_BYTES, nonce, CKPTD_NONCE_LEN - 1);
	EXPECT(&b, -CKPT_ECORRUPT, "short nonce");
	tb_start(&b, 1, 0, CKPTD_MSG_CHALLENGE);
	tb_raw(&b, CKPTD_TAG_NONCE, CKPTD_WIRE_BYTES, nonce, CKPTD_NONCE_LEN + 1);
	EXPECT(&b, -CKPT_ECORRUPT, "long nonce");

	/* Error text: printable, bounded. */
	tb_start(&b, 1, 0, CKPTD_MSG_ERROR);
	tb_u32(&b, CKPTD_TAG_CODE, CKPTD_ERR_AUTH);
	tb_str(&b, CKPTD_TAG_TEXT, "bad\nFAKE LOG LINE");
	EXPECT(&b, -CKPT_ECORRUPT, "newline in error text");
	t_str(s, CKPTD_TEXT_MAX, 't');
	tb_start(&b, 1, 0, CKPTD_MSG_ERROR);
	tb_u32(&b, CKPTD_TAG_CODE, CKPTD_ERR_AUTH);
	tb_str(&b, CKPTD_TAG_TEXT, s);
	EXPECT(&b, 0, "text at its longest");
	t_str(s, CKPTD_TEXT_MAX + 1, 't');
	tb_start(&b, 1, 0, CKPTD_MSG_ERROR);
	tb_u32(&b, CKPTD_TAG_CODE, CKPTD_ERR_AUTH);
	tb_str(&b, CKPTD_TAG_TEXT, s);
	EXPECT(&b, -CKPT_ECORRUPT, "text one too long");
	tb_start(&b, 1, 0, CKPTD_MSG_ERROR);
	tb_u32(&b, CKPTD_TAG_CODE, 0);
	EXPECT(&b, -CKPT_ECORRUPT, "error code 0");

	/* Field framing. */
	tb_start(&b, 1, 0, CKPTD_MSG_DELETE_VERSION);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	EXPECT(&b, -CKPT_ECORRUPT, "required field missing");
	tb_start(&b, 1, 0, CKPTD_MSG_DELETE_VERSION);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_u64(&b, CKPTD_TAG_VERSION, 1);
	tb_u64(&b, CKPTD_TAG_VERSION, 2);
	EXPECT(&b, -CKPT_ECORRUPT, "duplicate field");
	tb_start(&b, 1, 0, CKPTD_MSG_DELETE_VERSION);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_u32(&b, CKPTD_TAG_VERSION, 1);
	EXPECT(&b, -CKPT_ECORRUPT, "u32 where u64 is meant");
	tb_start(&b, 1, 0, CKPTD_MSG_DELETE_VERSION);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_raw(&b, CKPTD_TAG_VERSION, CKPTD_WIRE_U64, "12345678", 7);
	EXPECT(&b, -CKPT_ECORRUPT, "u64 of 7 bytes");
	/* Fields in any order, unknown tags skipped. */
	tb_start(&b, 1, 0, CKPTD_MSG_DELETE_VERSION);
	tb_u32(&b, 60000, 5);
	tb_u64(&b, CKPTD_TAG_VERSION, 1);
	tb_raw(&b, 60001, CKPTD_WIRE_LIST, "\0\0\0\0", 4);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	EXPECT(&b, 0, "unknown fields and another order");
	tb_start(&b, 1, 0, CKPTD_MSG_DELETE_VERSION);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_u64(&b, CKPTD_TAG_VERSION, 1);
	tb_raw(&b, 60000, 9, "x", 1);
	EXPECT(&b, -CKPT_ECORRUPT, "unknown wire type");
	tb_start(&b, 1, 0, CKPTD_MSG_DELETE_VERSION);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_u64(&b, CKPTD_TAG_VERSION, 1);
	b.buf[b.len - 8 - 8 + 3] = 1;
	EXPECT(&b, -CKPT_ECORRUPT, "reserved byte set");
	tb_start(&b, 1, 0, CKPTD_MSG_DELETE_VERSION);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_u64(&b, CKPTD_TAG_VERSION, 1);
	b.buf[b.len - 8 - 4] = 0xff; /* field length 0xff000008 */
	b.buf[b.len - 8 - 1] = 0xff;
	EXPECT(&b, -CKPT_ECORRUPT, "field length beyond the frame");
	tb_start(&b, 1, 0, CKPTD_MSG_DELETE_VERSION);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_u64(&b, CKPTD_TAG_VERSION, 1);
	b.buf[b.len++] = 0;
	EXPECT(&b, -CKPT_ECORRUPT, "half a field header at the end");

	/* Lists. */
	uint8_t lv[256];
	tb e;
	size_t n;
	memset(lv, 0, sizeof(lv));
	/* count 1, then one entry */
	tb_start(&e, 1, 0, 0);
	tb_u64(&e, CKPTD_TAG_VERSION, 9);
	tb_u32(&e, CKPTD_TAG_STATE, CKPT_STATE_COMMITTED);
	tb_u32(&e, CKPTD_TAG_WORLD_SIZE, 2);
	tb_u32(&e, CKPTD_TAG_SHARDS_DONE, 2);
	tb_u64(&e, CKPTD_TAG_BYTES, 10);
	tb_u32(&e, CKPTD_TAG_TIERS, CKPT_TIER_LOCAL_DISK);
	size_t elen = e.len - CKPTD_HEADER_LEN;
	lv[0] = 1;
	lv[4] = (uint8_t)elen;
	memcpy(lv + 8, e.buf + CKPTD_HEADER_LEN, elen);
	n = 8 + elen;
	tb_start(&b, 1, 0, CKPTD_MSG_VERSIONS);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_raw(&b, CKPTD_TAG_ENTRIES, CKPTD_WIRE_LIST, lv, (uint32_t)n);
	EXPECT(&b, 0, "one-entry list");
	tb_start(&b, 1, 0, CKPTD_MSG_VERSIONS);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_raw(&b, CKPTD_TAG_ENTRIES, CKPTD_WIRE_LIST, lv, (uint32_t)n + 1);
	EXPECT(&b, -CKPT_ECORRUPT, "byte after the last entry");
	lv[0] = 2;
	tb_start(&b, 1, 0, CKPTD_MSG_VERSIONS);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_raw(&b, CKPTD_TAG_ENTRIES, CKPTD_WIRE_LIST, lv, (uint32_t)n);
	EXPECT(&b, -CKPT_ECORRUPT, "count larger than the entries");
	lv[0] = 0xff;
	lv[1] = 0xff;
	lv[2] = 0xff;
	lv[3] = 0x7f;
	tb_start(&b, 1, 0, CKPTD_MSG_VERSIONS);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_raw(&b, CKPTD_TAG_ENTRIES, CKPTD_WIRE_LIST, lv, (uint32_t)n);
	EXPECT(&b, -CKPT_ECORRUPT, "huge count");
	memset(lv, 0, 4);
	lv[0] = 1;
	lv[4] = (uint8_t)(elen + 1);
	tb_start(&b, 1, 0, CKPTD_MSG_VERSIONS);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_raw(&b, CKPTD_TAG_ENTRIES, CKPTD_WIRE_LIST, lv, (uint32_t)n);
	EXPECT(&b, -CKPT_ECORRUPT, "entry longer than its list");
	lv[4] = (uint8_t)elen;
	lv[8 + elen - 4] = 1u << 5; /* tiers: unknown bit */
	tb_start(&b, 1, 0, CKPTD_MSG_VERSIONS);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_raw(&b, CKPTD_TAG_ENTRIES, CKPTD_WIRE_LIST, lv, (uint32_t)n);
	EXPECT(&b, -CKPT_ECORRUPT, "entry with an unknown tier bit");
	/* A list inside a list entry (unknown tag) is skipped; a known one
	 * would be refused, but no entry schema has one. */
	tb_start(&b, 1, 0, CKPTD_MSG_VERSIONS);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_raw(&b, CKPTD_TAG_ENTRIES, CKPTD_WIRE_LIST, "\0\0\0", 3);
	EXPECT(&b, -CKPT_ECORRUPT, "list shorter than its count");
	tb_start(&b, 1, 0, CKPTD_MSG_VERSIONS);
	tb_str(&b, CKPTD_TAG_JOB, "j");
	tb_raw(&b, CKPTD_TAG_ENTRIES, CKPTD_WIRE_LIST, "\0\0\0\0", 4);
	EXPECT(&b, 0, "empty list");

	/* Frame level. */
	tb_start(&b, 1, 0, CKPTD_MSG_STATUS);
	b.buf[0] ^= 1;
	EXPECT(&b, -CKPT_ECORRUPT, "bad magic");
	tb_start(&b, 1, 0, CKPTD_MSG_STATUS);
	b.buf[8] = 2;
	EXPECT(&b, -CKPT_ECORRUPT, "unknown flag");
	tb_start(&b, 1, 0, CKPTD_MSG_STATUS);
	b.buf[8] = CKPTD_FLAG_SEALED;
	EXPECT(&b, -CKPT_ECORRUPT, "sealed frame handed to the decoder");
	tb_start(&b, 1, 0, 200);
	EXPECT(&b, -EOPNOTSUPP, "unknown type");
	tb_start(&b, 1, 0, CKPTD_MSG_STATUS);
	tb_end(&b);
	b.buf[b.len] = 0;
	T_ERR(decode(b.buf, b.len + 1, NULL), -CKPT_ECORRUPT);
	T_ERR(decode(NULL, 0, NULL), -CKPT_ECORRUPT);
}

/* ---- versions ---- */
static void test_versions(void)
{
	static tb b;
	ckptd_msg m;
	const char *why = NULL;
	/* A newer major: refused, and the decoder says which version came. */
	shard_done_base(&b, "job");
	b.buf[4] = CKPTD_PROTO_MAJOR + 1;
	b.buf[5] = 4;
	tb_u32(&b, CKPTD_TAG_TIER, CKPT_TIER_LOCAL_DISK);
	tb_end(&b);
	T_ERR(ckptd_msg_decode(b.buf, b.len, &m, &why), -CKPT_EFORMAT);
	T_ASSERT(m.major == CKPTD_PROTO_MAJOR + 1 && m.minor == 4 && m.type == CKPTD_MSG_SHARD_DONE);
	/* The ERROR answering it names both versions. */
	ckptd_msg e, d;
	ckptd_msg_version_error(&e, CKPTD_VERSION_PACK(m.major, m.minor));
	uint8_t buf[4096];
	size_t len;
	T_OK(ckptd_msg_encode(&e, buf, sizeof(buf), &len));
	T_OK(ckptd_msg_decode(buf, len, &d, &why));
	T_ASSERT(d.u.error.code == CKPTD_ERR_VERSION);
	T_ASSERT(d.u.error.peer_version == CKPTD_VERSION_PACK(2, 4));
	T_ASSERT(d.u.error.own_version == CKPTD_PROTO_VERSION);
	char own[16];
	snprintf(own, sizeof(own), "%u.%u", CKPTD_PROTO_MAJOR, CKPTD_PROTO_MINOR);
	if (!strstr(d.u.error.text, "2.4") || !strstr(d.u.error.text, own))
		T_FAIL("version error does not name both versions: %s", d.u.error.text);
	printf("version refusal: %s\n", d.u.error.text);
	ckptd_msg_free(&d);
	/* An older major too. */
	b.buf[4] = 0;
	T_ERR(ckptd_msg_decode(b.buf, b.len, &m, &why), -CKPT_EFORMAT);
	/* An ERROR from any major is readable: its form is frozen. */
	buf[4] = 7;
	T_OK(ckptd_msg_decode(buf, len, &d, &why));
	T_ASSERT(d.major == 7 && d.u.error.code == CKPTD_ERR_VERSION);
	ckptd_msg_free(&d);
	/* A newer minor of the same major: read, its new fields skipped. */
	shard_done_base(&b, "job");
	b.buf[5] = 200;
	tb_u32(&b, CKPTD_TAG_TIER, CKPT_TIER_LOCAL_DISK);
	tb_u64(&b, 4000, 1);
	tb_end(&b);
	T_OK(ckptd_msg_decode(b.buf, b.len, &m, &why));
	T_ASSERT(m.minor == 200 && m.u.shard_done.tier == CKPT_TIER_LOCAL_DISK);
	ckptd_msg_free(&m);
}

/* ---- the encoder refuses what the decoder would ---- */
static void test_encoder_checks(void)
{
	uint8_t buf[4096];
	size_t len;
	ckptd_msg m;
	t_store st;
	t_sample(&m, &st, CKPTD_MSG_SHARD_DONE, 0);
	snprintf(m.u.shard_done.job, sizeof(m.u.shard_done.job), "a/b");
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	m.u.shard_done.job[0] = '\0';
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	memset(m.u.shard_done.job, 'x', sizeof(m.u.shard_done.job)); /* no NUL */
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	t_sample(&m, &st, CKPTD_MSG_SHARD_DONE, 0);
	m.u.shard_done.tier = 3;
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	t_sample(&m, &st, CKPTD_MSG_ERROR, 0);
	m.u.error.text[3] = '\t';
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	t_sample(&m, &st, CKPTD_MSG_VERSIONS, 0);
	st.v[2].shards_done = 7;
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	m.type = 999;
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	T_ERR(ckptd_msg_encode(NULL, buf, sizeof(buf), &len), -EINVAL);
	/* 1.6: an assignment names ranks and an epoch; a recovery's phases end
	 * in order, after its detection; EVENT's new kinds go, others not. */
	t_sample(&m, &st, CKPTD_MSG_SPARE_ASSIGN, 0);
	T_OK(ckptd_msg_encode(&m, buf, sizeof(buf), &len));
	m.u.spare_assign.count = 0;
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	t_sample(&m, &st, CKPTD_MSG_SPARE_ASSIGN, 0);
	m.u.spare_assign.epoch = 0;
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	t_sample(&m, &st, CKPTD_MSG_RECOVERIES_REPLY, 0);
	T_OK(ckptd_msg_encode(&m, buf, sizeof(buf), &len));
	st.rc[0].registered_ns = st.rc[0].ready_ns - 1;
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	t_sample(&m, &st, CKPTD_MSG_RECOVERIES_REPLY, 0);
	st.rc[1].failed_ns = st.rc[1].detected_ns + 1;
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	t_sample(&m, &st, CKPTD_MSG_RECOVERIES_REPLY, 0);
	st.rc[0].chosen_ns = 0; /* a phase not part of it: skipped */
	T_OK(ckptd_msg_encode(&m, buf, sizeof(buf), &len));
	st.rc[0].kind = CKPTD_FAIL_SPARE_CHOSEN; /* not a failure */
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	t_sample(&m, &st, CKPTD_MSG_EVENT, 1);
	m.u.event.kind = CKPTD_FAIL_RECOVERED;
	T_OK(ckptd_msg_encode(&m, buf, sizeof(buf), &len));
	m.u.event.kind = 99; /* no such kind */
	T_ERR(ckptd_msg_encode(&m, buf, sizeof(buf), &len), -EINVAL);
	T_ASSERT(ckpt__job_valid("ok-job_1.2") == 0);
	T_ASSERT(ckpt__job_valid(".x") == -CKPT_ENAME && ckpt__job_valid(NULL) == -CKPT_ENAME);
}

int main(void)
{
	test_roundtrip();
	test_truncations();
	test_sizes();
	test_fields();
	test_versions();
	test_encoder_checks();
	printf("test_proto: ok\n");
	return T_EXIT_PASS;
}
