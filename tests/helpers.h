/* Test helpers: exit 0 pass, 1 fail, 77 skip (as liburing's tests do). */
#ifndef CKPT_TEST_HELPERS_H
#define CKPT_TEST_HELPERS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define T_EXIT_PASS 0
#define T_EXIT_FAIL 1
#define T_EXIT_SKIP 77

#define T_FAIL(...) do { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(T_EXIT_FAIL); } while (0)
#define T_ASSERT(cond) do { if (!(cond)) T_FAIL("assertion failed: %s", #cond); } while (0)
/* Checks a ckpt call returning 0 / negative error. */
#define T_OK(expr) do { int t__r = (expr); if (t__r < 0) \
	T_FAIL("%s returned %d (%s)", #expr, t__r, ckpt_strerror(t__r)); } while (0)
#define T_ERR(expr, want) do { int t__r = (expr); if (t__r != (want)) \
	T_FAIL("%s returned %d (%s), expected %d (%s)", #expr, t__r, ckpt_strerror(t__r), \
	       (int)(want), ckpt_strerror(want)); } while (0)

/* A fresh directory under $TMPDIR (or /tmp), removed by t_rmrf. */
static inline char *t_tmpdir(const char *tag)
{
	const char *base = getenv("TMPDIR");
	static char buf[4][512];
	static int n;
	char *p = buf[n++ & 3];
	snprintf(p, 512, "%s/ckpt-test-%s-XXXXXX", base && *base ? base : "/tmp", tag);
	if (!mkdtemp(p)) {
		perror("mkdtemp");
		exit(T_EXIT_FAIL);
	}
	return p;
}

static inline void t_rmrf(const char *dir)
{
	if (getenv("CKPT_TEST_KEEP"))
		return;
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", dir);
}

/* Clocks: monotonic milliseconds (timeouts), and wall nanoseconds
 * (deadlines that cross processes). */
static inline int64_t t_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline uint64_t t_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU seconds of this process: what scaling tests compare (work, not the
 * wall clock of a loaded machine). */
static inline double t_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The least of three runs of a CPU-time measurement fn(n, reps) (noise
 * only ever adds to it), for the scaling tests; <= 0 when a run failed. */
static inline double t_least_cpu(double (*fn)(size_t n, int reps), size_t n, int reps)
{
	double least = 0;
	for (int run = 0; run < 3; run++) {
		double t = fn(n, reps);
		if (t <= 0)
			return t;
		least = run == 0 || t < least ? t : least;
	}
	return least;
}

/* The whole file, malloc'd with a NUL after its *len bytes; NULL when it
 * cannot be opened or read to its end. */
static inline char *t_slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	char *b = NULL;
	size_t got = 0;
	if (fstat(fd, &st) == 0 && (b = malloc((size_t)st.st_size + 1))) {
		while (got < (size_t)st.st_size) {
			ssize_t n = read(fd, b + got, (size_t)st.st_size - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		if (got < (size_t)st.st_size) {
			free(b);
			b = NULL;
		} else {
			b[got] = 0;
		}
	}
	close(fd);
	*len = got;
	return b;
}

/* Deterministic pseudo-random bytes (splitmix64). */
static inline void t_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < len; i += 8) {
		x += 0x9E3779B97F4A7C15ull;
		uint64_t z = x;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		z ^= z >> 31;
		size_t n = len - i < 8 ? len - i : 8;
		memcpy(p + i, &z, n);
	}
}

#endif
