/* Fuzz target for ckptd's control protocol: the message decoder, the frame
 * reader, the handshake's verify paths, sealed-frame opening and secret
 * parsing, all fed the same untrusted bytes.
 *
 * Invariants: the decoder refuses with one of its documented codes, and a
 * message it accepts re-encodes (canonically, never longer) to a frame that
 * decodes to the same message; the reader hands out exactly the bytes it
 * was given, frame by frame, each within the limit; no proof or sealed
 * frame made from these bytes is accepted.
 *
 * With CKPT_FUZZING this is a libFuzzer target; without it fuzz_driver.c
 * (tests/fuzz/) replays the seed corpus and fz_mutations() below. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/auth.h"
#include "wire/conn.h"
#include "fuzz/fuzz_driver.h"
#include "wire/proto.h"
#include "ckptd/samples.h"


/* Decodes; for an accepted message checks the re-encoding. Returns the
 * decoder's result and leaves the message in *m (to be freed). */
static int run_decode(const uint8_t *data, size_t size, ckptd_msg *m)
{
	const char *why = NULL;
	int r = ckptd_msg_decode(data, size, m, &why);
	FZ_CHECK(r == 0 || r == -CKPT_ECORRUPT || r == -CKPT_EFORMAT || r == -EMSGSIZE || r == -EOPNOTSUPP ||
	         r == -ENOMEM, "decode returned %d", r);
	FZ_CHECK(r == 0 || why, "refusal %d without a reason", r);
	if (r == -CKPT_EFORMAT)
		FZ_CHECK(m->major != CKPTD_PROTO_MAJOR, "EFORMAT for this build's own major");
	if (r)
		return r;
	FZ_CHECK(ckptd_msg_name(m->type), "accepted unknown type %u", m->type);
	FZ_CHECK(m->major == CKPTD_PROTO_MAJOR || m->type == CKPTD_MSG_ERROR, "accepted major %u", m->major);
	long want = ckptd_msg_encoded_size(m);
	FZ_CHECK(want > 0 && (size_t)want <= size, "accepted %s of %zu bytes re-encodes to %ld",
	         ckptd_msg_name(m->type), size, want);
	if (want <= 0 || (size_t)want > size)
		return r;
	uint8_t *enc = malloc((size_t)want), *enc2 = malloc((size_t)want);
	if (!enc || !enc2)
		abort();
	size_t len = 0, len2 = 0;
	int e = ckptd_msg_encode(m, enc, (size_t)want, &len);
	FZ_CHECK(e == 0 && len == (size_t)want, "re-encoding failed: %d", e);
	ckptd_msg d;
	e = ckptd_msg_decode(enc, len, &d, &why);
	FZ_CHECK(e == 0, "re-encoded %s refused: %s", ckptd_msg_name(m->type), why ? why : "-");
	if (e == 0) {
		FZ_CHECK(ckptd_msg_equal(m, &d), "re-encoded %s decodes differently", ckptd_msg_name(m->type));
		e = ckptd_msg_encode(&d, enc2, (size_t)want, &len2);
		FZ_CHECK(e == 0 && len2 == len && !memcmp(enc, enc2, len), "encoding not canonical");
	}
	ckptd_msg_free(&d);
	free(enc);
	free(enc2);
	return r;
}

/* Feeds the bytes to a reader in pieces whose sizes the bytes choose. */
static void run_reader(const uint8_t *data, size_t size)
{
	ckptd_reader_opts o = { .size = sizeof(o), .max_frame = size && (data[0] & 1) ? 4096 : 0,
	                        .frame_timeout_ns = 1000000000ull };
	ckptd_reader *r;
	if (ckptd_reader_new(&o, &r))
		abort();
	size_t fed = 0, out = 0;
	uint64_t now = 1, x = size;
	int e = 0;
	while (fed < size && e >= 0) {
		x = x * 6364136223846793005ull + data[fed];
		size_t piece = 1 + (size_t)((x >> 40) % 700);
		if (piece > size - fed)
			piece = size - fed;
		long k = ckptd_reader_feed(r, data + fed, piece, now);
		if (k < 0)
			break;
		fed += (size_t)k;
		now += (x >> 20) % 300000000ull;
		uint8_t *f;
		size_t fl;
		while ((e = ckptd_reader_next(r, now, &f, &fl)) == 1) {
			FZ_CHECK(fl >= CKPTD_HEADER_LEN && fl <= (o.max_frame ? o.max_frame : CKPTD_MAX_FRAME),
			         "reader returned a frame of %zu bytes", fl);
			FZ_CHECK(out + fl <= fed && !memcmp(f, data + out, fl), "reader frame differs from its input");
			out += fl;
			ckptd_msg m;
			run_decode(f, fl, &m);
			ckptd_msg_free(&m);
		}
		FZ_CHECK(e == 0 || e == -EMSGSIZE || e == -CKPT_ECORRUPT || e == -ETIMEDOUT, "reader error %d", e);
		if (k == 0 && e == 0)
			FZ_CHECK(0, "reader took nothing and returned nothing");
		if (e >= 0)
			FZ_CHECK(out + ckptd_reader_buffered(r) == fed, "reader lost or invented bytes");
	}
	ckptd_reader_free(r);
}

static const char FZ_SECRET[] = "fuzzing secret 0123456789abcdef";

static ckptd_secret *fz_secret(void)
{
	ckptd_secret *s;
	if (ckptd_secret_parse((const uint8_t *)FZ_SECRET, sizeof(FZ_SECRET) - 1, &s, NULL, 0))
		abort();
	return s;
}

/* Runs a real handshake between two fresh objects. */
static void pair(const ckptd_secret *k, ckptd_auth **c, ckptd_auth **s)
{
	uint8_t nc[CKPTD_NONCE_LEN], ns[CKPTD_NONCE_LEN], cm[CKPTD_MAC_LEN], sm[CKPTD_MAC_LEN];
	if (ckptd_auth_new(c) || ckptd_auth_new(s) ||
	    ckptd_auth_client_start(*c, k, CKPTD_ROLE_RANK, "fz", nc) ||
	    ckptd_auth_server_start(*s, k, CKPTD_PROTO_VERSION, CKPTD_ROLE_RANK, "fz", nc, ns) ||
	    ckptd_auth_client_respond(*c, CKPTD_PROTO_VERSION, ns, cm) || ckptd_auth_server_verify(*s, cm, sm) ||
	    ckptd_auth_client_verify_server(*c, sm))
		abort();
}

/* No proof taken from the input verifies, whatever the message. */
static void run_auth(const uint8_t *data, size_t size, const ckptd_msg *m, int decoded)
{
	ckptd_secret *k = fz_secret();
	ckptd_auth *c = NULL, *s = NULL;
	uint8_t nonce[CKPTD_NONCE_LEN], mac[CKPTD_MAC_LEN];
	int r;
	if (decoded == 0 && m->type == CKPTD_MSG_HELLO) {
		/* A server answering this HELLO, then a proof out of its bytes. */
		if (ckptd_auth_new(&s))
			abort();
		r = ckptd_auth_server_start(s, k, CKPTD_VERSION_PACK(m->major, m->minor), m->u.hello.role,
		                            m->u.hello.job, m->u.hello.nonce, nonce);
		FZ_CHECK(r == 0, "server refused a HELLO the decoder accepted: %d", r);
		memcpy(mac, m->u.hello.nonce, sizeof(mac));
		r = ckptd_auth_server_verify(s, mac, mac);
		FZ_CHECK(r == -EACCES, "server accepted a proof from the input: %d", r);
		ckptd_auth_free(s);
		s = NULL;
	}
	if (decoded == 0 && (m->type == CKPTD_MSG_CHALLENGE || m->type == CKPTD_MSG_AUTH_OK)) {
		/* A client given this CHALLENGE (or the nonce-sized bytes of an
		 * AUTH_OK), then this AUTH_OK's proof. */
		if (ckptd_auth_new(&c))
			abort();
		const uint8_t *ns = m->type == CKPTD_MSG_CHALLENGE ? m->u.challenge.nonce : m->u.auth_ok.mac;
		if (ckptd_auth_client_start(c, k, CKPTD_ROLE_CLI, "", nonce))
			abort();
		r = ckptd_auth_client_respond(c, CKPTD_VERSION_PACK(m->major, m->minor), ns, mac);
		FZ_CHECK(r == 0 || r == -CKPT_EFORMAT, "client_respond: %d", r);
		r = ckptd_auth_client_verify_server(c, m->type == CKPTD_MSG_AUTH_OK ? m->u.auth_ok.mac : ns);
		FZ_CHECK(r == -EACCES, "client accepted a server proof from the input: %d", r);
		ckptd_auth_free(c);
		c = NULL;
	}
	if (decoded == 0 && m->type == CKPTD_MSG_AUTH) {
		uint8_t cnonce[CKPTD_NONCE_LEN] = { 0 };
		if (ckptd_auth_new(&s) ||
		    ckptd_auth_server_start(s, k, CKPTD_PROTO_VERSION, CKPTD_ROLE_RANK, "fz", cnonce, nonce))
			abort();
		r = ckptd_auth_server_verify(s, m->u.auth.mac, mac);
		FZ_CHECK(r == -EACCES, "server accepted an AUTH from the input: %d", r);
		ckptd_auth_free(s);
		s = NULL;
	}
	/* Anything claiming to be sealed is opened by a live session, and
	 * must not open. */
	if (size >= CKPTD_HEADER_LEN && (data[8] & CKPTD_FLAG_SEALED)) {
		pair(k, &c, &s);
		uint8_t *copy = malloc(size);
		if (!copy)
			abort();
		memcpy(copy, data, size);
		size_t ol;
		r = ckptd_auth_open(s, copy, size, &ol);
		FZ_CHECK(r == -EBADMSG, "a sealed frame from the input opened: %d", r);
		free(copy);
		ckptd_auth_free(c);
		ckptd_auth_free(s);
	}
	ckptd_secret_free(k);
}

static void run_secret(const uint8_t *data, size_t size)
{
	ckptd_secret *s = NULL;
	char err[200];
	int r = ckptd_secret_parse(data, size, &s, err, sizeof(err));
	FZ_CHECK(r == 0 || r == -EINVAL, "secret parse: %d", r);
	FZ_CHECK((r == 0) == (s != NULL), "secret parse result and secret disagree");
	ckptd_secret_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ckptd_msg m;
	int r = run_decode(data, size, &m);
	run_auth(data, size, &m, r);
	ckptd_msg_free(&m);
	run_reader(data, size);
	run_secret(data, size);
	return 0;
}

#ifndef CKPT_FUZZING
const char fz_corpus_name[] = "proto";

/* Sets a frame's payload length to match its size, so that a mutation
 * reaches the field decoder instead of the length check. */
static void fix_length(uint8_t *b, size_t n)
{
	if (n < CKPTD_HEADER_LEN)
		return;
	uint32_t pl = (uint32_t)(n - CKPTD_HEADER_LEN);
	for (int i = 0; i < 4; i++)
		b[12 + i] = (uint8_t)(pl >> (8 * i));
}

uint64_t fz_mutations(const uint8_t *data, size_t size)
{
	uint64_t runs = 0;
	uint8_t *m = malloc(size + 1);
	if (!m)
		abort();
	/* Every truncation, as cut and with the header's length fixed. */
	for (size_t n = 0; n < size; n++) {
		memcpy(m, data, n);
		LLVMFuzzerTestOneInput(m, n);
		fix_length(m, n);
		LLVMFuzzerTestOneInput(m, n);
		runs += 2;
	}
	/* Bit flips and boundary values at every offset. */
	static const uint8_t vals[] = { 0, 1, 2, 3, 4, 5, 8, 0x10, 0x20, 0x2e, 0x2f, 0x7f, 0x80, 0xfe, 0xff };
	memcpy(m, data, size);
	runs += fz_flips_and_values(m, data, size, vals, sizeof(vals));
	/* One byte added at every offset, length fixed. */
	for (size_t i = 0; i <= size; i++, runs++) {
		memcpy(m, data, i);
		m[i] = 0;
		memcpy(m + i + 1, data + i, size - i);
		fix_length(m, size + 1);
		LLVMFuzzerTestOneInput(m, size + 1);
	}
	free(m);

	/* Every sample message of every type decodes, re-encodes and survives
	 * the same treatment (once per driver run is enough: keyed on the
	 * first seed). */
	static int samples_done;
	if (!samples_done) {
		samples_done = 1;
		static uint8_t buf[65536];
		for (size_t t = 0; t < T_NTYPES; t++)
			for (int v = 0; v < 2; v++, runs++) {
				ckptd_msg s;
				t_store st;
				size_t len;
				t_sample(&s, &st, t_types[t], v);
				if (ckptd_msg_encode(&s, buf, sizeof(buf), &len))
					FZ_FAIL("sample %u/%d does not encode", t_types[t], v);
				ckptd_msg d;
				FZ_CHECK(run_decode(buf, len, &d) == 0 && ckptd_msg_equal(&s, &d), "sample %u/%d",
				         t_types[t], v);
				ckptd_msg_free(&d);
				LLVMFuzzerTestOneInput(buf, len);
			}
	}
	return runs;
}
#endif
