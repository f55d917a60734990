/* Fuzz target for the S3 client's parsers of its servers' XML answers
 * (storage/s3_xml.c, on expat): errors, ListObjectsV2 and
 * ListMultipartUploads pages, DeleteObjects results, single fields.
 * Whatever the bytes, a parse refuses them (-EIO with a message) or gives
 * records whose fields are NUL-terminated within their bounds, as many
 * callbacks as records counted, a truncated list page with its next
 * marker; the same bytes always give the same answer; entities are never
 * expanded (a key is never longer than the input).
 *
 * Input: one byte choosing the parser ('e' error, 'o' objects, 'u'
 * uploads, 'd' delete result, 'f' UploadId field; any other byte: its
 * value modulo 5), then the answer's bytes.
 *
 * With CKPT_FUZZING this is a libFuzzer target; without it fuzz_driver.c
 * replays corpus/s3_xml and fz_mutations() below. */
#include <errno.h>
#include <string.h>

#include "fuzz_driver.h"
#include "s3_int.h"

enum { P_ERROR, P_OBJECTS, P_UPLOADS, P_DELETE, P_FIELD, P_COUNT };

static int pick(uint8_t b)
{
	switch (b) {
	case 'e': return P_ERROR;
	case 'o': return P_OBJECTS;
	case 'u': return P_UPLOADS;
	case 'd': return P_DELETE;
	case 'f': return P_FIELD;
	default: return b % P_COUNT;
	}
}

typedef struct seen {
	uint64_t calls, sum;
	size_t input;
} seen;

static int rec(void *arg, const char *key, uint64_t size, const char *extra)
{
	seen *s = arg;
	size_t kl = strlen(key), el = strlen(extra);
	FZ_CHECK(kl < S3_XML_VAL && el < S3_XML_VAL, "a field of %zu/%zu bytes", kl, el);
	FZ_CHECK(kl <= s->input && el <= s->input, "a field longer than the input: an entity was expanded");
	s->calls++;
	s->sum = s->sum * 31 + kl * 7 + el + size;
	return 0;
}

/* One parse; a digest of what it gave, for the same-answer check. */
static uint64_t parse(int which, const char *b, size_t n)
{
	char msg[S3_ERRCAP];
	seen s = { 0, 0, n };
	if (which == P_ERROR) {
		s3_xml_err e;
		int rc = s3__xml_error(b, n, &e);
		FZ_CHECK(rc == 0 || rc == -1, "s3__xml_error returned %d", rc);
		if (rc)
			return 1;
		FZ_CHECK(e.code[0] && strlen(e.code) < sizeof(e.code) && strlen(e.message) < sizeof(e.message),
		         "an error without a code, or fields past their bounds");
		return 2 + strlen(e.code) * 131 + strlen(e.message);
	}
	if (which == P_FIELD) {
		char id[64];
		int rc = s3__xml_field(b, n, "InitiateMultipartUploadResult", "UploadId", id, sizeof(id));
		FZ_CHECK(rc == 0 || rc == -EIO || rc == -ENOMEM, "s3__xml_field returned %d", rc);
		FZ_CHECK(rc || (id[0] && strlen(id) < sizeof(id)), "an empty or unbounded field");
		return rc ? 1 : 2 + strlen(id);
	}
	int kind = which == P_OBJECTS ? S3_LIST_OBJECTS : which == P_UPLOADS ? S3_LIST_UPLOADS : S3_DELETE_RESULT;
	s3_xml_page pg;
	msg[0] = 0;
	int rc = s3__xml_list(b, n, kind, rec, &s, &pg, msg, sizeof(msg));
	FZ_CHECK(rc == 0 || rc == -EIO || rc == -ENOMEM, "s3__xml_list returned %d", rc);
	if (rc) {
		FZ_CHECK(rc == -ENOMEM || msg[0], "a refusal without a message");
		return 1;
	}
	FZ_CHECK(kind == S3_DELETE_RESULT || s.calls == pg.records, "%llu callbacks for %llu records",
	         (unsigned long long)s.calls, (unsigned long long)pg.records);
	FZ_CHECK(!pg.truncated || kind == S3_DELETE_RESULT || pg.next[0], "a truncated page without its marker");
	FZ_CHECK(strlen(pg.next) < S3_XML_VAL && strlen(pg.next_upload) < S3_XML_VAL, "a marker past its bound");
	return 3 + s.sum * 7 + pg.records + (uint64_t)pg.truncated;
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
const char fz_corpus_name[] = "s3_xml";

/* Every truncation, every bit flip, and at every offset the bytes that
 * change XML's structure; each seed's body under every parser. */
uint64_t fz_mutations(const uint8_t *data, size_t size)
{
	static const uint8_t pokes[] = { '<', '>', '/', '&', ';', '"', '=', '!', '?', '0', '9', '-', ' ', 0x00, 0x80, 0xff };
	static const uint8_t sel[] = { 'e', 'o', 'u', 'd', 'f' };
	return fz_selector_mutations(data, size, sel, sizeof(sel), pokes, sizeof(pokes));
}
#endif
