/* The ckpt-bench report reader, on jansson (Debian's libjansson): a
 * well-kept parser rather than one of our own; what is checked here is
 * only which fields we take and their ranges. */
#include "bench_json.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longer than any checkpoint cost this model is meant for. */
#define SIM_BENCH_MAX_S (365.0 * 24 * 3600)

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* A required time field: a JSON number, finite, in (0, a year]. */
static int get_seconds(json_t *root, const char *key, double *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(root, key);
	if (!v)
		return fail(err, errlen, "field \"%s\" missing", key);
	if (!json_is_number(v))
		return fail(err, errlen, "field \"%s\" is not a number", key);
	double d = json_number_value(v);
	if (!isfinite(d) || !(d > 0) || d > SIM_BENCH_MAX_S)
		return fail(err, errlen, "field \"%s\" out of range (%g; want 0 < s <= %g)", key, d, SIM_BENCH_MAX_S);
	*out = d;
	return 0;
}

int sim_bench_parse(const char *text, size_t len, sim_bench *out, char *err, size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	memset(out, 0, sizeof(*out));
	if (len > SIM_BENCH_MAX_BYTES)
		return fail(err, errlen, "larger than %u bytes", SIM_BENCH_MAX_BYTES);
	json_error_t je;
	/* Duplicate keys refused: which of two "stall_s" was meant is a guess. */
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return fail(err, errlen, "not valid JSON (line %d, column %d: %s)", je.line, je.column, je.text);
	int rc = -1;
	sim_bench b = { 0 };
	if (!json_is_object(root)) {
		fail(err, errlen, "not a JSON object");
		goto out;
	}
	json_t *by = json_object_get(root, "bytes");
	if (!by) {
		fail(err, errlen, "field \"bytes\" missing");
		goto out;
	}
	if (!json_is_integer(by) || json_integer_value(by) <= 0) {
		fail(err, errlen, "field \"bytes\" is not a positive integer");
		goto out;
	}
	b.bytes = (uint64_t)json_integer_value(by);
	if (get_seconds(root, "stall_s", &b.stall_s, err, errlen) < 0 ||
	    get_seconds(root, "durable_s", &b.durable_s, err, errlen) < 0 ||
	    get_seconds(root, "restore_s", &b.restore_s, err, errlen) < 0)
		goto out;
	if (b.durable_s < b.stall_s) {
		fail(err, errlen, "durable_s (%g) is shorter than stall_s (%g): durable is timed from the save's start",
		     b.durable_s, b.stall_s);
		goto out;
	}
	json_t *mc = json_object_get(root, "memcpy_s");
	if (mc && get_seconds(root, "memcpy_s", &b.memcpy_s, err, errlen) < 0)
		goto out;
	*out = b;
	rc = 0;
out:
	json_decref(root);
	return rc;
}

int sim_bench_load(const char *path, sim_bench *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	FILE *f = fopen(path, "rb");
	if (!f)
		return fail(err, errlen, "cannot open: %s", strerror(errno));
	char *buf = malloc(SIM_BENCH_MAX_BYTES + 1);
	if (!buf) {
		fclose(f);
		return fail(err, errlen, "out of memory");
	}
	size_t n = fread(buf, 1, SIM_BENCH_MAX_BYTES + 1, f);
	int bad = ferror(f);
	int saved = errno;
	fclose(f);
	int rc;
	if (bad)
		rc = fail(err, errlen, "cannot read: %s", strerror(saved));
	else if (n > SIM_BENCH_MAX_BYTES)
		rc = fail(err, errlen, "larger than %u bytes", SIM_BENCH_MAX_BYTES);
	else
		rc = sim_bench_parse(buf, n, out, err, errlen);
	free(buf);
	return rc;
}
