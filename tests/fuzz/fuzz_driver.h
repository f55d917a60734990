/* Interface between a fuzz target and fuzz_driver.c, the main() that runs
 * the target as a regression test when it is not built for libFuzzer. */
#ifndef CKPT_FUZZ_DRIVER_H
#define CKPT_FUZZ_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* An invariant broke. Under libFuzzer: abort, so that it keeps the input.
 * In a regression run: count it and go on, so that one run reports every
 * seed that breaks something; fuzz_driver.c fails at the end. */
#ifdef CKPT_FUZZING
#define FZ_FAIL(...) do { fprintf(stderr, "fuzz invariant violated %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); abort(); } while (0)
#else
extern unsigned long fz_violations;
extern const char *fz_current; /* the seed being run */
#define FZ_FAIL(...) do { if (fz_violations++ < 50) { \
	fprintf(stderr, "fuzz invariant violated %s:%d: %s: ", __FILE__, __LINE__, fz_current); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)
#endif
#define FZ_CHECK(cond, ...) do { if (!(cond)) FZ_FAIL(__VA_ARGS__); } while (0)

/* The libFuzzer entry point every target defines. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef CKPT_FUZZING
/* Name of the target's seed directory under tests/fuzz/corpus/. */
extern const char fz_corpus_name[];
/* Runs systematic mutations of one seed through the target; returns how
 * many inputs it ran. Aborts when an invariant breaks. */
uint64_t fz_mutations(const uint8_t *data, size_t size);
/* For fz_mutations: every bit of every byte of data flipped, and every byte
 * set to each of vals[0..nvals), one change at a time, through the target.
 * m (size bytes) holds data on entry and on return. Returns the runs. */
uint64_t fz_flips_and_values(uint8_t *m, const uint8_t *data, size_t size, const uint8_t *vals, size_t nvals);
/* The mutations of a text seed (JSON and the like): every truncation, then
 * every bit flipped and every byte set to each of vals, from byte `from`
 * on (those before it are the target's to vary). Returns the runs. */
uint64_t fz_text_mutations(const uint8_t *data, size_t size, size_t from, const uint8_t *vals, size_t nvals);
/* For a target whose first byte picks the parser: each seed's body under
 * every selector of sel, then fz_text_mutations from byte 1. */
uint64_t fz_selector_mutations(const uint8_t *data, size_t size, const uint8_t *sel, size_t nsel, const uint8_t *vals,
                               size_t nvals);
#endif

#endif
