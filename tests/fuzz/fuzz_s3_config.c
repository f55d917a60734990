/* Fuzz target for the S3 client's parsers of credentials
 * (storage/s3_parse.c): the AWS credentials and config files (INI) and the
 * instance metadata service's credentials (JSON, on jansson), and RFC 3339
 * times. Whatever the bytes: an INI lookup finds a value with no spaces
 * around it and no line break in it, within its buffer, or nothing; the
 * metadata credentials are refused (-EINVAL, a message, the secret wiped)
 * or give a key id and secret without spaces or control bytes; a time is
 * refused or a second from 1970 to 9999; the same bytes always give the
 * same answer.
 *
 * Input: one byte choosing the parser ('i' credentials file, 'c' config
 * file, 'j' metadata JSON, 't' a time; any other byte: its value modulo
 * 4), then the bytes.
 *
 * With CKPT_FUZZING this is a libFuzzer target; without it fuzz_driver.c
 * replays corpus/s3_config and fz_mutations() below. */
#include <errno.h>
#include <string.h>

#include "fuzz_driver.h"
#include "s3_int.h"

enum { P_CREDS, P_CONFIG, P_JSON, P_TIME, P_COUNT };

static int pick(uint8_t b)
{
	switch (b) {
	case 'i': return P_CREDS;
	case 'c': return P_CONFIG;
	case 'j': return P_JSON;
	case 't': return P_TIME;
	default: return b % P_COUNT;
	}
}

static uint64_t ini(const char *b, size_t n, const char *section)
{
	static const char *keys[] = { "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "region",
		                      "role_arn" };
	uint64_t d = 0;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		char v[64];
		int seen = 0;
		int rc = s3__ini_get(b, n, section, keys[k], v, sizeof(v), &seen);
		FZ_CHECK(rc >= -1 && rc <= 1, "s3__ini_get returned %d", rc);
		if (rc == 1) {
			size_t l = strlen(v);
			FZ_CHECK(l < sizeof(v) && l <= n, "a value of %zu bytes", l);
			FZ_CHECK(!l || (v[0] != ' ' && v[0] != '\t' && v[l - 1] != ' ' && v[l - 1] != '\t'),
			         "a value with spaces around it");
			FZ_CHECK(!strpbrk(v, "\n"), "a value across lines");
			FZ_CHECK(seen, "a value of a section never seen");
			d = d * 131 + l + 1;
		}
		d = d * 3 + (uint64_t)(rc + 1) + (uint64_t)seen;
	}
	return d;
}

static uint64_t parse(int which, const char *b, size_t n)
{
	if (which == P_CREDS)
		return ini(b, n, "default") * 7 + ini(b, n, "work");
	if (which == P_CONFIG)
		return ini(b, n, "profile work") * 7 + ini(b, n, "default");
	if (which == P_TIME) {
		char s[64];
		size_t l = n < sizeof(s) - 1 ? n : sizeof(s) - 1;
		memcpy(s, b, l);
		s[l] = 0;
		int64_t t = s3__rfc3339(s);
		FZ_CHECK(t == -1 || (t >= 0 && t <= 253402300800ll), "a time of %lld", (long long)t);
		return (uint64_t)t;
	}
	s3_creds c;
	char msg[S3_ERRCAP];
	memset(&c, 0x5a, sizeof(c));
	msg[0] = 0;
	int rc = s3__imds_parse(b, n, &c, msg, sizeof(msg));
	FZ_CHECK(rc == 0 || rc == -EINVAL, "s3__imds_parse returned %d", rc);
	if (rc) {
		FZ_CHECK(msg[0], "a refusal without a message");
		FZ_CHECK(!c.secret[0] && !c.token[0], "the secret kept after a refusal");
		return 1;
	}
	FZ_CHECK(c.access[0] && c.secret[0] && strlen(c.access) < sizeof(c.access) &&
	         strlen(c.secret) < sizeof(c.secret) && strlen(c.token) < sizeof(c.token), "empty or unbounded keys");
	for (const char *p = c.secret; *p; p++)
		FZ_CHECK((unsigned char)*p > 0x20 && *p != 0x7f, "a secret with a space or control byte");
	FZ_CHECK(c.expires >= 0, "an expiry before 1970");
	return 2 + strlen(c.access) * 131 + strlen(c.secret) * 7 + strlen(c.token) + (uint64_t)c.expires;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > (1u << 20))
		return 0;
	int which = pick(data[0]);
	const char *b = (const char *)data + 1;
	uint64_t a = parse(which, b, size - 1), c = parse(which, b, size - 1);
	FZ_CHECK(a == c, "the same bytes gave two answers");
	return 0;
}

#ifndef CKPT_FUZZING
const char fz_corpus_name[] = "s3_config";

uint64_t fz_mutations(const uint8_t *data, size_t size)
{
	static const uint8_t pokes[] = { '[', ']', '=', '#', ';', ' ', '\t', '\n', '\r', '"', '{', '}', ':', ',',
		                         '\\', '0', '9', 'T', 'Z', '.', 0x00, 0x80, 0xff };
	static const uint8_t sel[] = { 'i', 'c', 'j', 't' };
	return fz_selector_mutations(data, size, sel, sizeof(sel), pokes, sizeof(pokes));
}
#endif
