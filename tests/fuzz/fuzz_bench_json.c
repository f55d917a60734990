/* Fuzz target for ckpt-sim's reader of ckpt-bench reports
 * (tools/sim/bench_json.c): any bytes are either refused with a reason or
 * give costs inside the ranges the reader promises, and an accepted report
 * written back out with the same values is read back to the same values.
 *
 * With CKPT_FUZZING this is a libFuzzer target; without it fuzz_driver.c
 * replays corpus/bench_json and fz_mutations() below. */
#include <math.h>

#include "bench_json.h"
#include "fuzz_common.h"
#include "fuzz_driver.h"

#define YEAR_S (365.0 * 24 * 3600)

static int seconds_ok(double s)
{
	return isfinite(s) && s > 0 && s <= YEAR_S;
}

static int run_one(const uint8_t *data, size_t size)
{
	sim_bench b;
	char err[256];
	memset(err, 'x', sizeof(err)); /* a reason must be written, not left over */
	int r = sim_bench_parse((const char *)data, size, &b, err, sizeof(err));
	FZ_CHECK(r == 0 || r == -1, "sim_bench_parse returned %d", r);
	if (r < 0) {
		FZ_CHECK(memchr(err, '\0', sizeof(err)) && err[0], "refused without a reason");
		return r;
	}
	FZ_CHECK(b.bytes > 0, "accepted bytes 0");
	FZ_CHECK(seconds_ok(b.stall_s) && seconds_ok(b.durable_s) && seconds_ok(b.restore_s),
	         "accepted a time out of range: %g %g %g", b.stall_s, b.durable_s, b.restore_s);
	FZ_CHECK(b.durable_s >= b.stall_s, "accepted durable %g < stall %g", b.durable_s, b.stall_s);
	FZ_CHECK(b.memcpy_s == 0 || seconds_ok(b.memcpy_s), "accepted memcpy_s %g", b.memcpy_s);
	/* Round trip: %.17g keeps every double exactly. */
	char out[512];
	int n = snprintf(out, sizeof(out),
	                 "{\"bytes\": %llu, \"stall_s\": %.17g, \"durable_s\": %.17g, \"restore_s\": %.17g%s",
	                 (unsigned long long)b.bytes, b.stall_s, b.durable_s, b.restore_s, b.memcpy_s > 0 ? "" : "}");
	if (b.memcpy_s > 0)
		n += snprintf(out + n, sizeof(out) - (size_t)n, ", \"memcpy_s\": %.17g}", b.memcpy_s);
	sim_bench c;
	int r2 = sim_bench_parse(out, (size_t)n, &c, err, sizeof(err));
	FZ_CHECK(r2 == 0, "its own values written back were refused: %s (%s)", err, out);
	if (r2 == 0)
		FZ_CHECK(c.bytes == b.bytes && c.stall_s == b.stall_s && c.durable_s == b.durable_s &&
		         c.restore_s == b.restore_s && c.memcpy_s == b.memcpy_s, "values changed on a round trip: %s", out);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_one(data, size);
	return 0;
}

#ifndef CKPT_FUZZING
const char fz_corpus_name[] = "bench_json";

/* Every truncation, every single-bit flip, and at every offset the bytes
 * that change JSON's structure or a number's meaning. */
uint64_t fz_mutations(const uint8_t *data, size_t size)
{
	static const uint8_t pokes[] = { '"', '{', '}', '[', ']', ',', ':', '-', '+', '.', 'e', 'E', '0', '9',
	                                 '\\', ' ', 'n', 0x00, 0x80, 0xff };
	return fz_text_mutations(data, size, 0, pokes, sizeof(pokes));
}
#endif
