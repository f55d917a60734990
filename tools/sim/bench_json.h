/* Reads the --json report of ckpt-bench (tools/bench/ckpt-bench.c), the
 * measured costs that ckpt-sim --from-bench puts in its model. The input is
 * untrusted bytes from disk: fuzzed by tests/fuzz/fuzz_bench_json.c. */
#ifndef CKPT_SIM_BENCH_JSON_H
#define CKPT_SIM_BENCH_JSON_H

#include <stddef.h>
#include <stdint.h>

/* Largest report accepted: ckpt-bench writes about 1 KiB plus 4 series of
 * one number per iteration. */
#define SIM_BENCH_MAX_BYTES (1u << 20)

typedef struct sim_bench {
	uint64_t bytes;   /* state saved per iteration */
	double stall_s;   /* median time in ckpt_save() */
	double durable_s; /* median time from ckpt_save() to durable on local disk */
	double restore_s; /* median verified restore from local disk */
	double memcpy_s;  /* best plain memcpy of the same bytes; 0 if absent */
} sim_bench;

/* Parses len bytes of text (need not be NUL-terminated). Returns 0 and
 * fills *out, or -1 with a reason in err (always NUL-terminated when
 * errlen > 0): not JSON, not an object, a field missing, of the wrong type,
 * or out of range (bytes > 0; times finite, > 0 and at most a year;
 * durable not shorter than the stall). */
int sim_bench_parse(const char *text, size_t len, sim_bench *out, char *err, size_t errlen);

/* Reads and parses the file at path (at most SIM_BENCH_MAX_BYTES). Returns
 * 0, or -1 with a reason in err. */
int sim_bench_load(const char *path, sim_bench *out, char *err, size_t errlen);

#endif
