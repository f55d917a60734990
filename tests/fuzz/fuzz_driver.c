/* Regression driver for a fuzz target built without libFuzzer: feeds it every
 * file of its seed corpus (or of the files and directories given), then the
 * target's systematic mutations of each. An invariant the target finds
 * broken aborts the run.
 *
 * usage: fuzz_<target> [FILE|DIR]...
 * default: $CKPT_TEST_DATA/fuzz/corpus/<target> */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_driver.h"
#include "helpers.h"

#define FZ_MAX_INPUT (64u << 20)

static uint64_t files, runs;
unsigned long fz_violations;
const char *fz_current = "";

static void run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		T_FAIL("cannot open %s: %s", path, strerror(errno));
	uint8_t *buf = malloc(FZ_MAX_INPUT);
	if (!buf)
		T_FAIL("out of memory");
	size_t n = fread(buf, 1, FZ_MAX_INPUT, f);
	int bad = ferror(f);
	fclose(f);
	if (bad)
		T_FAIL("cannot read %s", path);
	/* An exact-size copy, so that ASan sees any read past the input. */
	uint8_t *in = malloc(n ? n : 1);
	if (!in)
		T_FAIL("out of memory");
	memcpy(in, buf, n);
	free(buf);
	fz_current = path;
	LLVMFuzzerTestOneInput(in, n);
	uint64_t m = fz_mutations(in, n);
	printf("%-60s %8zu bytes %10llu mutations\n", path, n, (unsigned long long)m);
	fflush(stdout);
	runs += 1 + m;
	files++;
	free(in);
}

static void run_path(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		T_FAIL("%s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode)) {
		run_file(path);
		return;
	}
	struct dirent **ents;
	int n = scandir(path, &ents, NULL, alphasort);
	if (n < 0)
		T_FAIL("cannot list %s: %s", path, strerror(errno));
	for (int i = 0; i < n; i++) {
		char p[4096];
		if (ents[i]->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", path, ents[i]->d_name);
			if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
				run_file(p);
		}
		free(ents[i]);
	}
	free(ents);
}

static uint64_t flips_from(uint8_t *m, const uint8_t *data, size_t size, size_t from, const uint8_t *vals,
                           size_t nvals)
{
	uint64_t runs = 0;
	for (size_t i = from; i < size; i++) {
		for (int b = 0; b < 8; b++, runs++) {
			m[i] ^= (uint8_t)(1u << b);
			LLVMFuzzerTestOneInput(m, size);
			m[i] = data[i];
		}
		for (size_t k = 0; k < nvals; k++, runs++) {
			m[i] = vals[k];
			LLVMFuzzerTestOneInput(m, size);
			m[i] = data[i];
		}
	}
	return runs;
}

uint64_t fz_flips_and_values(uint8_t *m, const uint8_t *data, size_t size, const uint8_t *vals, size_t nvals)
{
	return flips_from(m, data, size, 0, vals, nvals);
}

uint64_t fz_text_mutations(const uint8_t *data, size_t size, size_t from, const uint8_t *vals, size_t nvals)
{
	uint64_t runs = 0;
	uint8_t *m = malloc(size ? size : 1);
	if (!m)
		return 0;
	for (size_t n = 0; n < size; n++, runs++) {
		memcpy(m, data, n);
		LLVMFuzzerTestOneInput(m, n);
	}
	memcpy(m, data, size);
	runs += flips_from(m, data, size, from, vals, nvals);
	free(m);
	return runs;
}

uint64_t fz_selector_mutations(const uint8_t *data, size_t size, const uint8_t *sel, size_t nsel, const uint8_t *vals,
                               size_t nvals)
{
	uint64_t runs = 0;
	uint8_t *m = malloc(size ? size : 1);
	if (!m)
		return 0;
	for (size_t k = 0; size && k < nsel; k++, runs++) {
		memcpy(m, data, size);
		m[0] = sel[k];
		LLVMFuzzerTestOneInput(m, size);
	}
	free(m);
	return runs + fz_text_mutations(data, size, 1, vals, nvals);
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			run_path(argv[i]);
	} else {
		const char *data = getenv("CKPT_TEST_DATA");
		if (!data || !*data)
			T_FAIL("give corpus files or directories, or set CKPT_TEST_DATA to the tests/ directory");
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s/fuzz/corpus/%s", data, fz_corpus_name);
		run_path(dir);
	}
	if (!files)
		T_FAIL("no corpus files found");
	printf("%s: %llu files, %llu inputs, %lu invariant violations\n", fz_corpus_name,
	       (unsigned long long)files, (unsigned long long)runs, fz_violations);
	return fz_violations ? T_EXIT_FAIL : T_EXIT_PASS;
}
