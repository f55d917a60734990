/* Fuzz target for the preemption-notice parsers of the ckptd agent
 * (ckptd/notice/parse.c and time.c): what a metadata service or a trigger
 * file says is either refused with a reason, or no notice, or a notice
 * whose detail is one printable line and whose deadline is what the format
 * allows; the same bytes always give the same answer, and the time formats
 * read back what they write.
 *
 * Input: one byte choosing the parser, then the body.
 *   'a' AWS, 'g' GCP, 'z' Azure for the VM "ckpt-vm", 'Z' Azure for any VM,
 *   't' trigger file; any other byte: its value modulo 5, in that order.
 *
 * With CKPT_FUZZING this is a libFuzzer target; without it fuzz_driver.c
 * replays corpus/notice and fz_mutations() below. */
#include <errno.h>

#include "fuzz_common.h"
#include "fuzz_driver.h"
#include "notice/notice_int.h"

#define NOW (1795959600ull * NT_NS) /* 2026-11-29T13:40:00Z */
#define VM "ckpt-vm"
#define PATTERN 0xa5

enum { P_AWS, P_GCP, P_AZURE_VM, P_AZURE_ANY, P_TRIGGER, P_COUNT };

static int pick(uint8_t b)
{
	switch (b) {
	case 'a': return P_AWS;
	case 'g': return P_GCP;
	case 'z': return P_AZURE_VM;
	case 'Z': return P_AZURE_ANY;
	case 't': return P_TRIGGER;
	default: return b % P_COUNT;
	}
}

static int parse(int which, const char *b, size_t n, ckptd_notice_event *ev, char *err, size_t cap)
{
	memset(ev, PATTERN, sizeof(*ev));
	memset(err, 'x', cap);
	switch (which) {
	case P_AWS: return ckptd_notice_parse_aws(b, n, NOW, ev, err, cap);
	case P_GCP: return ckptd_notice_parse_gcp(b, n, NOW, ev, err, cap);
	case P_AZURE_VM: return ckptd_notice_parse_azure(b, n, VM, NOW, ev, err, cap);
	case P_AZURE_ANY: return ckptd_notice_parse_azure(b, n, NULL, NOW, ev, err, cap);
	default: return ckptd_notice_parse_trigger(b, n, NOW, ev, err, cap);
	}
}

static int untouched(const ckptd_notice_event *ev)
{
	const uint8_t *p = (const uint8_t *)ev;
	for (size_t i = 0; i < sizeof(*ev); i++)
		if (p[i] != PATTERN)
			return 0;
	return 1;
}

/* A deadline printed and read back is the same second. */
static void time_round_trip(uint64_t ns)
{
	char s[40];
	uint64_t back;
	nt_time_format(ns, s, sizeof(s));
	FZ_CHECK(nt_time_rfc3339(s, strlen(s), &back) == 0 && back == ns / NT_NS * NT_NS,
	         "deadline %llu printed as %s does not read back", (unsigned long long)ns, s);
}

static void check_notice(int which, const ckptd_notice_event *ev)
{
	static const int src[P_COUNT] = { CKPTD_NOTICE_AWS, CKPTD_NOTICE_GCP, CKPTD_NOTICE_AZURE, CKPTD_NOTICE_AZURE,
	                                  CKPTD_NOTICE_FILE };
	FZ_CHECK(ev->source == src[which], "source %d from parser %d", ev->source, which);
	size_t len = strnlen(ev->detail, sizeof(ev->detail));
	FZ_CHECK(len > 0 && len < sizeof(ev->detail), "detail empty or not terminated");
	for (size_t i = 0; i < len; i++)
		FZ_CHECK(ev->detail[i] >= 0x20 && ev->detail[i] < 0x7f, "detail byte %zu is 0x%02x", i,
		         (uint8_t)ev->detail[i]);
	if (which == P_GCP)
		FZ_CHECK(ev->deadline_ns == NOW + CKPTD_NOTICE_GCP_GRACE_S * NT_NS, "GCP deadline not now + 30 s");
	if (ev->deadline_ns)
		time_round_trip(ev->deadline_ns);
	FZ_CHECK(ev->deadline_ns <= (UINT64_MAX / NT_NS) * NT_NS, "deadline past the last representable second");
}

static void run_one(const uint8_t *data, size_t size)
{
	if (size == 0)
		return;
	int which = pick(data[0]);
	const char *b = (const char *)data + 1;
	size_t n = size - 1;
	ckptd_notice_event ev, ev2;
	char err[128], err2[128];
	int rc = parse(which, b, n, &ev, err, sizeof(err));
	FZ_CHECK(rc == 1 || rc == 0 || rc == -EINVAL, "parser %d returned %d", which, rc);
	FZ_CHECK(rc != 0 || (which != P_AWS && which != P_TRIGGER), "parser %d said no notice", which);
	if (rc < 0)
		FZ_CHECK(memchr(err, 0, sizeof(err)) && err[0] && err[0] != 'x', "refused without a reason");
	if (rc != 1)
		FZ_CHECK(untouched(&ev), "the event was written without a notice");
	else
		check_notice(which, &ev);
	/* The same bytes, the same answer. */
	int rc2 = parse(which, b, n, &ev2, err2, sizeof(err2));
	FZ_CHECK(rc2 == rc && !memcmp(&ev, &ev2, sizeof(ev)), "a second parse differs");
	/* A notice for this VM is a notice for any VM, and not a later one. */
	if (which == P_AZURE_VM && rc == 1) {
		rc2 = parse(P_AZURE_ANY, b, n, &ev2, err2, sizeof(err2));
		FZ_CHECK(rc2 == 1 && ev2.deadline_ns <= ev.deadline_ns, "a notice for " VM " is none for any VM");
	}
	/* The time formats alone, on the whole body. */
	uint64_t t;
	if (nt_time_rfc3339(b, n, &t) == 0)
		time_round_trip(t);
	if (nt_time_rfc1123(b, n, &t) == 0) {
		FZ_CHECK(t % NT_NS == 0, "an RFC 1123 time with a fraction");
		time_round_trip(t);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_one(data, size);
	return 0;
}

#ifndef CKPT_FUZZING
const char fz_corpus_name[] = "notice";

/* Every truncation, every single-bit flip, at every offset the bytes that
 * change JSON's structure, a number or a time, and each seed's body under
 * every parser. */
uint64_t fz_mutations(const uint8_t *data, size_t size)
{
	static const uint8_t pokes[] = { '"', '{', '}', '[', ']', ',', ':', '-', '+', '.', '0', '9', 'T', 'Z',
	                                 ' ', '\\', 0x00, 0x80, 0xff };
	static const uint8_t sel[] = { 'a', 'g', 'z', 'Z', 't' };
	uint64_t runs = 0;
	uint8_t *m = malloc(size ? size : 1);
	if (!m)
		return 0;
	/* Byte 0 picks the parser: each seed's body under every one. */
	for (size_t k = 0; size && k < sizeof(sel); k++, runs++) {
		memcpy(m, data, size);
		m[0] = sel[k];
		run_one(m, size);
	}
	free(m);
	return runs + fz_text_mutations(data, size, 1, pokes, sizeof(pokes));
}
#endif
