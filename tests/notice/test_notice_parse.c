/* The notice parsers (ckptd/notice/parse.c, time.c), table-driven: valid
 * answers of each source, malformed ones, and the edges of the two time
 * formats (leap second, 30 February, offsets, the last second a uint64_t
 * of nanoseconds holds). */
#include "helpers.h"
#include "notice/notice.h"

#define NOW (1700000000ull * 1000000000ull)
#define S(x) ((uint64_t)(x) * 1000000000ull)
#define REL 1 /* deadline is NOW + want */
#define VM "ckpt-vm"

enum { AWS = CKPTD_NOTICE_AWS, GCP = CKPTD_NOTICE_GCP, AZ = CKPTD_NOTICE_AZURE, TRIG = CKPTD_NOTICE_FILE };

typedef struct pcase {
	int src;
	const char *body;
	const char *vm;     /* Azure */
	int want;           /* 1, 0, or -EINVAL */
	uint64_t deadline;  /* on 1 */
	int rel;
	const char *detail; /* a part of it, on 1 */
} pcase;

#define AWSJ(action, t) "{\"action\": \"" action "\", \"time\": \"" t "\"}"
#define AZEV(fields) "{\"DocumentIncarnation\": 3, \"Events\": [" fields "]}"
#define PRE(id, res, st, nb) "{\"EventId\": \"" id "\", \"EventType\": \"Preempt\", \"ResourceType\": " \
	"\"VirtualMachine\", \"Resources\": " res ", \"EventStatus\": \"" st "\", \"NotBefore\": \"" nb "\"}"
#define NB "Mon, 19 Sep 2016 18:29:47 GMT"

static const pcase cases[] = {
	/* ---- AWS */
	{ AWS, AWSJ("terminate", "2026-11-29T13:40:00Z"), 0, 1, S(1795959600), 0,
	  "aws spot instance-action terminate at 2026-11-29T13:40:00Z" },
	{ AWS, AWSJ("stop", "2026-11-29T13:40:00Z"), 0, 1, S(1795959600), 0, "stop" },
	{ AWS, AWSJ("hibernate", "2026-11-29T13:40:00Z"), 0, 1, S(1795959600), 0, "hibernate" },
	{ AWS, "{\"time\": \"2026-11-29T13:40:00Z\", \"action\": \"terminate\", \"x\": [1, {}]}", 0, 1,
	  S(1795959600), 0, NULL },
	{ AWS, " \n" AWSJ("terminate", "2026-11-29T13:40:00Z") "\n", 0, 1, S(1795959600), 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T13:40:00.5Z"), 0, 1, S(1795959600) + 500000000, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T13:40:00.123456789123Z"), 0, 1, S(1795959600) + 123456789, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29t13:40:00z"), 0, 1, S(1795959600), 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T14:40:00+01:00"), 0, 1, S(1795959600), 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T13:10:00-00:30"), 0, 1, S(1795959600), 0, NULL },
	{ AWS, AWSJ("terminate", "2016-12-31T23:59:60Z"), 0, 1, S(1483228800), 0, "2017-01-01T00:00:00Z" },
	{ AWS, AWSJ("terminate", "2024-02-29T00:00:00Z"), 0, 1, S(1709164800), 0, NULL },
	{ AWS, AWSJ("terminate", "2554-07-21T23:34:32Z"), 0, 1, S(18446744072ull), 0, NULL },
	{ AWS, AWSJ("terminate", "2554-07-21T23:34:33Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "1970-01-01T00:00:01Z"), 0, 1, S(1), 0, NULL },
	{ AWS, AWSJ("terminate", "1970-01-01T00:30:00+01:00"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "1969-12-31T23:59:59Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2025-02-29T00:00:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-02-30T00:00:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-13-01T00:00:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T24:00:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T13:60:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T13:40:61Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T13:40:00"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29 13:40:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", " 2026-11-29T13:40:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T13:40:00Z "), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-1-29T13:40:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T13:40:00.Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T13:40:00+24:00"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T13:40:00+0100"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "+2026-11-29T13:40:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("reboot", "2026-11-29T13:40:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("Terminate", "2026-11-29T13:40:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate\\u0000x", "2026-11-29T13:40:00Z"), 0, -EINVAL, 0, 0, NULL },
	{ AWS, "{\"action\": \"terminate\"}", 0, -EINVAL, 0, 0, NULL },
	{ AWS, "{\"action\": \"terminate\", \"time\": 1795959600}", 0, -EINVAL, 0, 0, NULL },
	{ AWS, "{\"action\": \"stop\", \"action\": \"terminate\", \"time\": \"2026-11-29T13:40:00Z\"}", 0,
	  -EINVAL, 0, 0, NULL },
	{ AWS, AWSJ("terminate", "2026-11-29T13:40:00Z") " x", 0, -EINVAL, 0, 0, NULL },
	{ AWS, "[" AWSJ("terminate", "2026-11-29T13:40:00Z") "]", 0, -EINVAL, 0, 0, NULL },
	{ AWS, "", 0, -EINVAL, 0, 0, NULL },
	{ AWS, "<html>404</html>", 0, -EINVAL, 0, 0, NULL },
	/* ---- GCP */
	{ GCP, "TRUE", 0, 1, S(30), REL, "gcp instance preempted" },
	{ GCP, "TRUE\n", 0, 1, S(30), REL, NULL },
	{ GCP, "FALSE", 0, 0, 0, 0, NULL },
	{ GCP, " FALSE\r\n", 0, 0, 0, 0, NULL },
	{ GCP, "true", 0, -EINVAL, 0, 0, NULL },
	{ GCP, "TRUEX", 0, -EINVAL, 0, 0, NULL },
	{ GCP, "TRU", 0, -EINVAL, 0, 0, NULL },
	{ GCP, "", 0, -EINVAL, 0, 0, NULL },
	{ GCP, "TRUE FALSE", 0, -EINVAL, 0, 0, NULL },
	/* ---- Azure */
	{ AZ, AZEV(PRE("602d9444-d2cd-49c7-8624-8643e7171297", "[\"ckpt-vm\"]", "Scheduled", NB)), VM, 1,
	  S(1474309787), 0,
	  "azure scheduled event 602d9444-d2cd-49c7-8624-8643e7171297 Preempt (Scheduled) not before "
	  "2016-09-19T18:29:47Z" },
	{ AZ, AZEV(PRE("e1", "[\"other\", \"CKPT-VM\"]", "Scheduled", NB)), VM, 1, S(1474309787), 0, NULL },
	{ AZ, AZEV(PRE("e1", "[\"other\"]", "Scheduled", NB)), VM, 0, 0, 0, NULL },
	{ AZ, AZEV(PRE("e1", "[\"other\"]", "Scheduled", NB)), NULL, 1, S(1474309787), 0, NULL },
	{ AZ, AZEV(PRE("e1", "[\"other\"]", "Scheduled", NB)), "", 1, S(1474309787), 0, NULL },
	{ AZ, AZEV(PRE("e1", "[\"ckpt-vm\"]", "Started", "")), VM, 1, 0, REL, "(Started) started, now" },
	{ AZ, AZEV(PRE("e1", "[\"ckpt-vm\"]", "Completed", NB)), VM, 0, 0, 0, NULL },
	{ AZ, AZEV("{\"EventId\": \"e1\", \"EventType\": \"Reboot\", \"Resources\": [\"ckpt-vm\"], "
	           "\"EventStatus\": \"Scheduled\", \"NotBefore\": \"" NB "\"}"), VM, 0, 0, 0, NULL },
	{ AZ, AZEV(""), VM, 0, 0, 0, NULL },
	{ AZ, "{\"Events\": []}", VM, 0, 0, 0, NULL },
	{ AZ, AZEV("1, \"x\", null, [], {}"), VM, 0, 0, 0, NULL },
	{ AZ, AZEV(PRE("late", "[\"ckpt-vm\"]", "Scheduled", "Tue, 20 Sep 2016 18:29:47 GMT") ", "
	           PRE("early", "[\"ckpt-vm\"]", "Scheduled", NB)), VM, 1, S(1474309787), 0, "early" },
	{ AZ, AZEV(PRE("bad id", "[\"ckpt-vm\"]", "Scheduled", NB) ", " PRE("good", "[\"ckpt-vm\"]", "Scheduled", NB)),
	  VM, 1, S(1474309787), 0, "good" },
	{ AZ, AZEV(PRE("bad id", "[\"ckpt-vm\"]", "Scheduled", NB)), VM, -EINVAL, 0, 0, NULL },
	{ AZ, AZEV(PRE("bad id", "[\"other\"]", "Scheduled", NB)), VM, 0, 0, 0, NULL },
	{ AZ, AZEV(PRE("e1", "\"ckpt-vm\"", "Scheduled", NB)), VM, -EINVAL, 0, 0, NULL },
	{ AZ, AZEV(PRE("e1", "[\"ckpt-vm\", 7]", "Scheduled", NB)), VM, -EINVAL, 0, 0, NULL },
	{ AZ, AZEV(PRE("e1", "\"ckpt-vm\"", "Scheduled", NB)), NULL, 1, S(1474309787), 0, NULL },
	{ AZ, AZEV(PRE("e1", "[\"ckpt-vm\"]", "Scheduled", "2016-09-19T18:29:47Z")), VM, -EINVAL, 0, 0, NULL },
	{ AZ, AZEV(PRE("e1", "[\"ckpt-vm\"]", "Scheduled", "Mon, 19 Sep 2016 18:29:47 UTC")), VM, -EINVAL, 0, 0,
	  NULL },
	{ AZ, AZEV(PRE("e1", "[\"ckpt-vm\"]", "Scheduled", "Mon, 31 Feb 2016 18:29:47 GMT")), VM, -EINVAL, 0, 0,
	  NULL },
	{ AZ, AZEV(PRE("e1", "[\"ckpt-vm\"]", "Scheduled", "Mon, 19 Foo 2016 18:29:47 GMT")), VM, -EINVAL, 0, 0,
	  NULL },
	{ AZ, AZEV(PRE("e1", "[\"ckpt-vm\"]", "Scheduled", "Xyz, 19 Sep 2016 18:29:47 GMT")), VM, -EINVAL, 0, 0,
	  NULL },
	{ AZ, AZEV(PRE("e1", "[\"ckpt-vm\"]", "Scheduled", "Mon, 9 Sep 2016 18:29:47 GMT")), VM, -EINVAL, 0, 0,
	  NULL },
	{ AZ, AZEV(PRE("e1", "[\"ckpt-vm\"]", "Scheduled", "Thu, 01 Jan 1970 00:00:01 GMT")), VM, 1, S(1), 0,
	  NULL },
	{ AZ, AZEV("{\"EventType\": \"Preempt\", \"Resources\": [\"ckpt-vm\"], \"EventStatus\": \"Scheduled\", "
	           "\"NotBefore\": \"" NB "\"}"), VM, -EINVAL, 0, 0, NULL },
	{ AZ, AZEV("{\"EventId\": \"e1\", \"EventType\": \"Preempt\", \"Resources\": [\"ckpt-vm\"], "
	           "\"NotBefore\": \"" NB "\"}"), VM, -EINVAL, 0, 0, NULL },
	{ AZ, "{\"DocumentIncarnation\": 3}", VM, -EINVAL, 0, 0, NULL },
	{ AZ, "{\"Events\": {}}", VM, -EINVAL, 0, 0, NULL },
	{ AZ, "[]", VM, -EINVAL, 0, 0, NULL },
	{ AZ, "{\"Events\": [", VM, -EINVAL, 0, 0, NULL },
	/* ---- trigger file */
	{ TRIG, "", 0, 1, 0, 0, "no deadline" },
	{ TRIG, " \n", 0, 1, 0, 0, NULL },
	{ TRIG, "deadline=45", 0, 1, S(45), REL, "deadline in 45 s" },
	{ TRIG, "deadline=0\n", 0, 1, 0, REL, NULL },
	{ TRIG, "deadline=999999999", 0, 1, S(999999999), REL, NULL },
	{ TRIG, "deadline=1234567890", 0, -EINVAL, 0, 0, NULL },
	{ TRIG, "deadline=", 0, -EINVAL, 0, 0, NULL },
	{ TRIG, "deadline=-5", 0, -EINVAL, 0, 0, NULL },
	{ TRIG, "deadline=4 5", 0, -EINVAL, 0, 0, NULL },
	{ TRIG, "deadline=45s", 0, -EINVAL, 0, 0, NULL },
	{ TRIG, "2026-11-29T13:40:00Z\n", 0, 1, S(1795959600), 0, "deadline 2026-11-29T13:40:00Z" },
	{ TRIG, "2026-11-29T13:40:00", 0, -EINVAL, 0, 0, NULL },
	{ TRIG, "soon", 0, -EINVAL, 0, 0, NULL },
};

static int parse(const pcase *c, const char *body, size_t len, ckptd_notice_event *ev, char *err, size_t cap)
{
	switch (c->src) {
	case AWS:
		return ckptd_notice_parse_aws(body, len, NOW, ev, err, cap);
	case GCP:
		return ckptd_notice_parse_gcp(body, len, NOW, ev, err, cap);
	case AZ:
		return ckptd_notice_parse_azure(body, len, c->vm, NOW, ev, err, cap);
	default:
		return ckptd_notice_parse_trigger(body, len, NOW, ev, err, cap);
	}
}

static void check(size_t i, const pcase *c)
{
	ckptd_notice_event ev;
	char err[128];
	memset(&ev, 0x5a, sizeof(ev));
	memset(err, 'x', sizeof(err));
	size_t len = strlen(c->body);
	/* An exact-size copy, so that ASan sees any read past the body. */
	char *b = malloc(len ? len : 1);
	T_ASSERT(b);
	memcpy(b, c->body, len);
	int rc = parse(c, b, len, &ev, err, sizeof(err));
	if (rc != c->want)
		T_FAIL("case %zu (%s): returned %d, expected %d; err '%.*s'", i, c->body, rc, c->want,
		       rc < 0 ? (int)sizeof(err) : 0, err);
	if (rc < 0) {
		T_ASSERT(memchr(err, 0, sizeof(err)) && err[0]);
		/* err may be NULL, or too small */
		T_ASSERT(parse(c, b, len, &ev, NULL, 0) == rc);
		char tiny[4];
		T_ASSERT(parse(c, b, len, &ev, tiny, sizeof(tiny)) == rc && strlen(tiny) == 3);
	}
	if (rc == 1) {
		uint64_t want = c->rel ? NOW + c->deadline : c->deadline;
		if (ev.source != c->src || ev.deadline_ns != want)
			T_FAIL("case %zu (%s): source %d deadline %llu, expected %d %llu", i, c->body, ev.source,
			       (unsigned long long)ev.deadline_ns, c->src, (unsigned long long)want);
		T_ASSERT(memchr(ev.detail, 0, sizeof(ev.detail)));
		for (const char *p = ev.detail; *p; p++)
			T_ASSERT(*p >= 0x20 && *p < 0x7f);
		if (c->detail && !strstr(ev.detail, c->detail))
			T_FAIL("case %zu: detail '%s' lacks '%s'", i, ev.detail, c->detail);
	}
	free(b);
}

/* A body with a NUL inside, and NULL bodies. */
static void odd_bodies(void)
{
	ckptd_notice_event ev;
	char err[64];
	static const char aws_nul[] = "{\"action\": \"terminate\", \"time\": \"2026-11-29T13:40:00Z\"}\0";
	T_ASSERT(ckptd_notice_parse_aws(aws_nul, sizeof(aws_nul), NOW, &ev, err, sizeof(err)) == -EINVAL);
	T_ASSERT(ckptd_notice_parse_gcp("TRUE\0", 5, NOW, &ev, err, sizeof(err)) == -EINVAL);
	T_ASSERT(ckptd_notice_parse_trigger("deadline=5\0", 11, NOW, &ev, err, sizeof(err)) == -EINVAL);
	T_ASSERT(ckptd_notice_parse_aws(NULL, 0, NOW, &ev, err, sizeof(err)) == -EINVAL);
	T_ASSERT(ckptd_notice_parse_gcp(NULL, 0, NOW, &ev, err, sizeof(err)) == -EINVAL);
	T_ASSERT(ckptd_notice_parse_azure(NULL, 0, NULL, NOW, &ev, err, sizeof(err)) == -EINVAL);
	T_ASSERT(ckptd_notice_parse_trigger(NULL, 0, NOW, &ev, err, sizeof(err)) == 1 && ev.deadline_ns == 0);
	/* GCP's deadline saturates rather than wrapping. */
	T_ASSERT(ckptd_notice_parse_gcp("TRUE", 4, UINT64_MAX - 5, &ev, err, sizeof(err)) == 1 &&
	         ev.deadline_ns == UINT64_MAX);
	T_ASSERT(ckptd_notice_parse_trigger("deadline=999999999", 18, UINT64_MAX - 5, &ev, err, sizeof(err)) ==
	         -EINVAL);
}

int main(void)
{
	size_t n = sizeof(cases) / sizeof(cases[0]);
	for (size_t i = 0; i < n; i++)
		check(i, &cases[i]);
	odd_bodies();
	printf("%zu parser cases passed\n", n);
	return T_EXIT_PASS;
}
