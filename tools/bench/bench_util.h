/* What the benchmark programs share (the C programs of tools/bench/): clocks, CPU time,
 * and a rank's state read from a file, for the benchmarks that move given
 * bytes (tools/bench/ckpt-s3.sh: ckpt-rank-bench save --state-file saves
 * them, ckpt-restore-bench restores them and compares them with the file).
 * The layout both sides register: nregions regions named
 * "layer%04u.weight", the bytes split as ckpt-rank-bench splits --size
 * (equal parts, multiples of 8 bytes, the remainder in the last). */
#ifndef CKPT_TOOLS_BENCH_UTIL_H
#define CKPT_TOOLS_BENCH_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static inline double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* User + system seconds of the whole process (every thread) so far. */
static inline double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) * 1e-6;
}

static inline uint64_t sf_region_len(uint64_t bytes, uint32_t nregions, uint32_t i)
{
	uint64_t per = bytes / nregions / 8 * 8;
	return i + 1 < nregions ? per : bytes - per * (nregions - 1);
}

static inline void sf_region_name(char *out, size_t cap, uint32_t i)
{
	snprintf(out, cap, "layer%04u.weight", i);
}

/* len bytes of fd at off into buf; 0, or -errno (-EIO: the file ended). */
static inline int sf_read(int fd, void *buf, uint64_t len, uint64_t off)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = pread(fd, p, len > (1u << 30) ? (1u << 30) : (size_t)len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* Compares buf with len bytes of fd at off, 8 MiB at a time (the file's
 * pages stay out of this process's RSS). 0 when equal; 1 with *where the
 * first byte that differs (from buf's start); -errno. */
static inline int sf_compare(int fd, const void *buf, uint64_t len, uint64_t off, uint64_t *where)
{
	const size_t step = 8u << 20;
	uint8_t *tmp = malloc(step);
	if (!tmp)
		return -ENOMEM;
	int r = 0;
	for (uint64_t o = 0; o < len && r == 0; o += step) {
		size_t k = len - o < step ? (size_t)(len - o) : step;
		if ((r = sf_read(fd, tmp, k, off + o)) < 0)
			break;
		if (memcmp(tmp, (const uint8_t *)buf + o, k)) {
			size_t j = 0;
			while (tmp[j] == ((const uint8_t *)buf)[o + j])
				j++;
			*where = o + j;
			r = 1;
		}
	}
	free(tmp);
	return r;
}

#endif
