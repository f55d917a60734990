/* The parsers of what each source returns: pure functions of the bytes, no
 * I/O, no log (tests/fuzz/fuzz_notice.c feeds them anything). A reason is a
 * fixed string and a detail is formatted here from values checked against
 * fixed sets, so that nothing received reaches a log line as it came. JSON
 * goes through jansson (duplicate keys refused, NUL bytes refused, bounded
 * nesting). */
#include "notice_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define ID_MAX 64 /* bytes of an Azure EventId (a GUID has 36) */

int nt_fail(char *err, size_t errcap, const char *reason)
{
	if (err && errcap)
		snprintf(err, errcap, "%s", reason);
	return -EINVAL;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static void fill(ckptd_notice_event *ev, int source, uint64_t deadline_ns)
{
	memset(ev, 0, sizeof(*ev));
	ev->source = source;
	ev->deadline_ns = deadline_ns;
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* body[0..len) without white space around it. */
static const char *trim(const char *body, size_t *len)
{
	if (!body) {
		*len = 0;
		return "";
	}
	while (*len && is_space(body[0]))
		body++, (*len)--;
	while (*len && is_space(body[*len - 1]))
		(*len)--;
	return body;
}

static json_t *load_object(const char *body, size_t len)
{
	if (!body || !len)
		return NULL;
	json_error_t je;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (j && !json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* ---------------------------------------------------------------- AWS */

int ckptd_notice_parse_aws(const char *body, size_t len, uint64_t now_ns, ckptd_notice_event *ev, char *err,
                           size_t errcap)
{
	static const char *const actions[] = { "terminate", "stop", "hibernate" };
	(void)now_ns;
	json_t *j = load_object(body, len);
	if (!j)
		return nt_fail(err, errcap, "not a JSON object");
	json_t *a = json_object_get(j, "action"), *t = json_object_get(j, "time");
	const char *action = NULL;
	uint64_t at;
	int rc = -EINVAL;
	for (size_t i = 0; json_is_string(a) && i < sizeof(actions) / sizeof(actions[0]); i++)
		if (!strcmp(json_string_value(a), actions[i]))
			action = actions[i];
	if (!action)
		rc = nt_fail(err, errcap, "\"action\" is not terminate, stop or hibernate");
	else if (!json_is_string(t) || nt_time_rfc3339(json_string_value(t), json_string_length(t), &at) < 0)
		rc = nt_fail(err, errcap, "\"time\" is not an RFC 3339 time");
	else
		rc = 1;
	json_decref(j);
	if (rc != 1)
		return rc;
	char when[40];
	nt_time_format(at, when, sizeof(when));
	fill(ev, CKPTD_NOTICE_AWS, at);
	snprintf(ev->detail, sizeof(ev->detail), "aws spot instance-action %s at %s", action, when);
	return 1;
}

/* ---------------------------------------------------------------- GCP */

int ckptd_notice_parse_gcp(const char *body, size_t len, uint64_t now_ns, ckptd_notice_event *ev, char *err,
                           size_t errcap)
{
	const char *b = trim(body, &len);
	if (len == 5 && !memcmp(b, "FALSE", 5))
		return 0;
	if (len != 4 || memcmp(b, "TRUE", 4))
		return nt_fail(err, errcap, "neither TRUE nor FALSE");
	fill(ev, CKPTD_NOTICE_GCP, add_sat(now_ns, CKPTD_NOTICE_GCP_GRACE_S * NT_NS));
	snprintf(ev->detail, sizeof(ev->detail), "gcp instance preempted (%d s notice)", CKPTD_NOTICE_GCP_GRACE_S);
	return 1;
}

/* ---------------------------------------------------------------- Azure */

static int id_ok(const char *s, size_t n)
{
	if (n == 0 || n > ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
		      c == '_' || c == '.' || c == '{' || c == '}'))
			return 0;
	}
	return 1;
}

/* 1: resources (a JSON array of strings) names vm; 0: it does not; -1: it
 * is not an array of strings. */
static int lists_vm(json_t *resources, const char *vm)
{
	if (!json_is_array(resources))
		return -1;
	int found = 0;
	size_t i;
	json_t *r;
	json_array_foreach(resources, i, r) {
		if (!json_is_string(r))
			return -1;
		if (!strcasecmp(json_string_value(r), vm))
			found = 1;
	}
	return found;
}

typedef struct az_pick {
	int have;
	uint64_t deadline;
	const char *id, *status;
	int started;          /* NotBefore was empty */
} az_pick;

/* Looks at one Preempt event: *mine = 1 when it is a notice for this VM
 * (in cand). Returns NULL, or why the event is malformed. */
static const char *az_event(json_t *e, const char *vm, uint64_t now_ns, az_pick *cand, int *mine)
{
	static const char *const statuses[] = { "Scheduled", "Started" };
	*mine = 0;
	json_t *st = json_object_get(e, "EventStatus");
	if (!json_is_string(st))
		return "a Preempt event without an \"EventStatus\" string";
	cand->status = NULL;
	for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++)
		if (!strcmp(json_string_value(st), statuses[i]))
			cand->status = statuses[i];
	if (!cand->status)
		return NULL; /* over, or a state we do not act on */
	if (vm && *vm) {
		int l = lists_vm(json_object_get(e, "Resources"), vm);
		if (l < 0)
			return "a Preempt event whose \"Resources\" is not an array of strings";
		if (!l)
			return NULL;
	}
	json_t *id = json_object_get(e, "EventId"), *nb = json_object_get(e, "NotBefore");
	if (!json_is_string(id) || !id_ok(json_string_value(id), json_string_length(id)))
		return "a Preempt event without a well-formed \"EventId\"";
	if (!json_is_string(nb))
		return "a Preempt event without a \"NotBefore\" string";
	cand->id = json_string_value(id);
	cand->started = json_string_length(nb) == 0;
	if (cand->started)
		cand->deadline = now_ns;
	else if (nt_time_rfc1123(json_string_value(nb), json_string_length(nb), &cand->deadline) < 0)
		return "a Preempt event whose \"NotBefore\" is not an RFC 1123 time";
	*mine = 1;
	return NULL;
}

int nt_parse_azure(const char *body, size_t len, const char *vm_name, uint64_t now_ns, ckptd_notice_event *ev,
                   char *id, size_t idcap, char *err, size_t errcap)
{
	json_t *j = load_object(body, len);
	if (!j)
		return nt_fail(err, errcap, "not a JSON object");
	json_t *events = json_object_get(j, "Events");
	if (!json_is_array(events)) {
		json_decref(j);
		return nt_fail(err, errcap, "no \"Events\" array");
	}
	az_pick best = { 0 };
	const char *bad = NULL;
	size_t i;
	json_t *e;
	json_array_foreach(events, i, e) {
		json_t *type = json_object_get(e, "EventType");
		if (!json_is_string(type) || strcmp(json_string_value(type), "Preempt"))
			continue; /* not a preemption (or not an object): not ours to judge */
		az_pick cand = { 0 };
		int mine;
		const char *why = az_event(e, vm_name, now_ns, &cand, &mine);
		if (why && !bad)
			bad = why;
		if (mine && (!best.have || cand.deadline < best.deadline)) {
			best = cand;
			best.have = 1;
		}
	}
	int rc = best.have ? 1 : bad ? nt_fail(err, errcap, bad) : 0;
	if (rc == 1) {
		char when[40];
		nt_time_format(best.deadline, when, sizeof(when));
		fill(ev, CKPTD_NOTICE_AZURE, best.deadline);
		snprintf(ev->detail, sizeof(ev->detail), "azure scheduled event %s Preempt (%s) %s %s", best.id,
		         best.status, best.started ? "started, now" : "not before", when);
		if (id && idcap)
			snprintf(id, idcap, "%s", best.id);
	}
	json_decref(j);
	return rc;
}

int ckptd_notice_parse_azure(const char *body, size_t len, const char *vm_name, uint64_t now_ns,
                             ckptd_notice_event *ev, char *err, size_t errcap)
{
	return nt_parse_azure(body, len, vm_name, now_ns, ev, NULL, 0, err, errcap);
}

/* ---------------------------------------------------------------- trigger file */

int ckptd_notice_parse_trigger(const char *body, size_t len, uint64_t now_ns, ckptd_notice_event *ev, char *err,
                               size_t errcap)
{
	static const char pre[] = "deadline=";
	const char *b = trim(body, &len);
	uint64_t at;
	char when[40];
	if (len == 0) {
		fill(ev, CKPTD_NOTICE_FILE, 0);
		snprintf(ev->detail, sizeof(ev->detail), "trigger file, no deadline given");
		return 1;
	}
	if (len > sizeof(pre) - 1 && !memcmp(b, pre, sizeof(pre) - 1)) {
		uint64_t s = 0;
		size_t n = len - (sizeof(pre) - 1);
		if (n > 9) /* some thirty years */
			return nt_fail(err, errcap, "deadline=<seconds>: more than nine digits");
		for (size_t i = sizeof(pre) - 1; i < len; i++) {
			if (b[i] < '0' || b[i] > '9')
				return nt_fail(err, errcap, "deadline=<seconds>: not a number of seconds");
			s = s * 10 + (uint64_t)(b[i] - '0');
		}
		if (now_ns > UINT64_MAX - s * NT_NS)
			return nt_fail(err, errcap, "deadline=<seconds>: past the end of time");
		at = now_ns + s * NT_NS;
		nt_time_format(at, when, sizeof(when));
		fill(ev, CKPTD_NOTICE_FILE, at);
		snprintf(ev->detail, sizeof(ev->detail), "trigger file, deadline in %llu s (%s)", (unsigned long long)s,
		         when);
		return 1;
	}
	if (nt_time_rfc3339(b, len, &at) < 0)
		return nt_fail(err, errcap, "neither empty, deadline=<seconds> nor an RFC 3339 time");
	nt_time_format(at, when, sizeof(when));
	fill(ev, CKPTD_NOTICE_FILE, at);
	snprintf(ev->detail, sizeof(ev->detail), "trigger file, deadline %s", when);
	return 1;
}
