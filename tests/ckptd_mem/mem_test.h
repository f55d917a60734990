/* Shared bits of the node-DRAM pool tests: exit 0 pass, 1 fail, 77 skip. */
#ifndef CKPTD_MEM_TEST_H
#define CKPTD_MEM_TEST_H

#include "helpers.h"

#include <dirent.h>
#include <string.h>

#include "mem/pool.h"

/* Checks a call that returns 0 (or a count) / a negative errno. */
#define M_OK(expr) do { long m__r = (long)(expr); if (m__r < 0) \
	T_FAIL("%s returned %ld (%s)", #expr, m__r, strerror((int)-m__r)); } while (0)
#define M_ERR(expr, want) do { long m__r = (long)(expr); if (m__r != (long)(want)) \
	T_FAIL("%s returned %ld (%s), expected %ld (%s)", #expr, m__r, \
	       m__r < 0 ? strerror((int)-m__r) : "ok", (long)(want), \
	       (want) < 0 ? strerror(-(int)(want)) : "ok"); } while (0)

/* A pool on normal pages (huge = CKPTD_POOL_HUGE_OFF), so that sizes and
 * alignment are the same on every machine, or as asked. */
static inline ckptd_pool *m_pool_huge(uint64_t bytes, uint32_t max_segs, ckptd_pool_evict_fn fn,
                                      void *arg, int huge)
{
	ckptd_pool_opts o = { .size = sizeof(o), .bytes = bytes, .huge = huge,
	                      .max_segments = max_segs, .name = "ckptd-test", .on_evict = fn,
	                      .evict_arg = arg };
	ckptd_pool *p = NULL;
	int err = ckptd_pool_open(&p, &o);
	if (err == -ENOSYS || err == -EOPNOTSUPP) {
		fprintf(stderr, "SKIP: memfd not available (%s)\n", strerror(-err));
		exit(T_EXIT_SKIP);
	}
	if (err < 0)
		T_FAIL("ckptd_pool_open(%llu): %s", (unsigned long long)bytes, strerror(-err));
	return p;
}

static inline ckptd_pool *m_pool(uint64_t bytes, uint32_t max_segs, ckptd_pool_evict_fn fn, void *arg)
{
	return m_pool_huge(bytes, max_segs, fn, arg, CKPTD_POOL_HUGE_OFF);
}

/* Open descriptors of this process. */
static inline int m_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

#endif
