/* Interface between a fuzz target and fuzz_driver.c, the main() that runs
 * the target as a regression test when it is not built for libFuzzer. */
#ifndef CKPT_FUZZ_DRIVER_H
#define CKPT_FUZZ_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/* The libFuzzer entry point every target defines. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef CKPT_FUZZING
/* Name of the target's seed directory under tests/fuzz/corpus/. */
extern const char fz_corpus_name[];
/* Runs systematic mutations of one seed through the target; returns how
 * many inputs it ran. Aborts when an invariant breaks. */
uint64_t fz_mutations(const uint8_t *data, size_t size);
#endif

#endif
