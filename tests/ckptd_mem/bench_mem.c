/* LOCAL_MEM against the physical limit: copying a shard into a granted
 * segment through the rank's own mapping of the pool fd, and back out (a
 * restore), against a plain memcpy between private buffers, in one run.
 *
 *   bench_mem [BYTES[K|M|G]] [REPS]     default 64M 5; the figure: 1G 5
 *
 * As a test it only checks that the copies are right; speed is reported,
 * not judged (a shared machine is noise; the ratio is the figure). */
#include "mem_test.h"

#include <sys/wait.h>
#include <time.h>

#include "wire/fdpass.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);
	switch (*end) {
	case 'G': case 'g': v <<= 30; break;
	case 'M': case 'm': v <<= 20; break;
	case 'K': case 'k': v <<= 10; break;
	default: break;
	}
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

typedef struct figure {
	double best, median; /* seconds */
} figure;

static figure timed_copies(void *dst, const void *src, size_t len, int reps)
{
	double t[64];
	for (int i = 0; i < reps; i++) {
		double t0 = now_s();
		memcpy(dst, src, len);
		t[i] = now_s() - t0;
	}
	qsort(t, (size_t)reps, sizeof(double), cmp_double);
	return (figure){ t[0], t[reps / 2] };
}

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A restoring rank's fresh mapping of the segment, its page tables for
 * reading built one of two ways: MADV_POPULATE_READ (how = 0), or one read
 * per 64 KiB (how = 1), the kernel mapping the pages around each read fault
 * (libckpt's ckpt__daemon_fault_in). The median CPU seconds of reps fresh
 * mappings: CPU time moves less than wall time on a loaded machine. */
static double fault_in_cpu(int fd, const ckptd_seg_info *seg, int how, int reps)
{
	double t[64];
	for (int i = 0; i < reps; i++) {
		ckptd_mapping m;
		M_OK(ckptd_seg_map(fd, seg->off, seg->len, 0, &m));
		volatile const uint8_t *b = m.addr;
		uint8_t x = 0;
		double t0 = cpu_s();
		if (how == 0)
			M_OK(ckptd_seg_prefault(&m, 0, seg->len, 0));
		else
			for (size_t o = 0; o < seg->len; o += 64u << 10)
				x ^= b[o];
		t[i] = cpu_s() - t0;
		(void)x;
		M_OK(ckptd_seg_unmap(&m));
	}
	qsort(t, (size_t)reps, sizeof(double), cmp_double);
	return t[reps / 2];
}

static void report(const char *what, figure f, figure base, size_t len)
{
	double gib = (double)len / (1u << 30);
	printf("%-44s %7.2f GiB/s best, %7.2f median; ratio to memcpy %.2f (best) %.2f (median)\n", what,
	       gib / f.best, gib / f.median, base.best / f.best, base.median / f.median);
}

int main(int argc, char **argv)
{
	uint64_t len = argc > 1 ? parse_size(argv[1]) : 64ull << 20;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	if (len == 0 || reps < 1 || reps > 64) {
		fprintf(stderr, "usage: %s [BYTES[K|M|G]] [REPS<=64]\n", argv[0]);
		return T_EXIT_FAIL;
	}
	/* The default pool: huge pages where the machine has them reserved. */
	double t0 = now_s();
	ckptd_pool_opts o = { .size = sizeof(o), .bytes = len };
	ckptd_pool *p = NULL;
	int err = ckptd_pool_open(&p, &o);
	if (err == -ENOMEM) {
		printf("SKIP: no memory for a %llu-byte pool\n", (unsigned long long)len);
		return T_EXIT_SKIP;
	}
	M_OK(err);
	double t_open = now_s() - t0;
	ckptd_pool_stats st;
	ckptd_pool_stats_get(p, &st);
	ckptd_seg_info seg;
	M_OK(ckptd_pool_alloc(p, "bench", 1, 0, len, &seg));

	/* Source and private destination, faulted in before any timing. */
	uint8_t *src = malloc(len), *priv = malloc(len);
	if (!src || !priv) {
		printf("SKIP: no memory for the buffers\n");
		return T_EXIT_SKIP;
	}
	t_fill(src, len, 42);
	memset(priv, 1, len);

	printf("%llu MiB, %d reps; pool: %s pages, %s, opened and faulted in %.3f s\n",
	       (unsigned long long)(len >> 20), reps, st.hugetlb ? "huge" : "4 KiB",
	       st.locked ? "locked" : "not locked", t_open);

	figure base = timed_copies(priv, src, len, reps);
	report("memcpy private -> private", base, base, len);

	/* The rank's first save: a fresh mapping, page tables built by the copy. */
	ckptd_mapping m;
	M_OK(ckptd_seg_map(ckptd_pool_fd(p), seg.off, seg.len, CKPTD_MAP_WRITE, &m));
	t0 = now_s();
	memcpy(m.addr, src, len);
	double cold = now_s() - t0;
	M_OK(ckptd_seg_unmap(&m));
	report("save, fresh mapping (first touch)", (figure){ cold, cold }, base, len);

	/* What the rank does: map with POPULATE once, then save into it. */
	t0 = now_s();
	M_OK(ckptd_seg_map(ckptd_pool_fd(p), seg.off, seg.len, CKPTD_MAP_WRITE | CKPTD_MAP_POPULATE, &m));
	double t_map = now_s() - t0;
	figure save = timed_copies(m.addr, src, len, reps);
	report("save: private -> granted segment", save, base, len);
	printf("%-44s %7.3f s (%.2f of one memcpy)\n", "  map + populate of the segment", t_map,
	       t_map / base.median);
	/* The pool holds it, through the agent's own mapping. */
	uint8_t *pool = (uint8_t *)ckptd_pool_base(p) + seg.off;
	if (memcmp(pool, src, len) != 0)
		T_FAIL("the agent does not see what the rank wrote");
	figure restore = timed_copies(priv, m.addr, len, reps);
	report("restore: granted segment -> private", restore, base, len);
	if (memcmp(priv, src, len) != 0)
		T_FAIL("restore read something else");
	M_OK(ckptd_seg_unmap(&m));

	double pop_read = fault_in_cpu(ckptd_pool_fd(p), &seg, 0, reps);
	double touch = fault_in_cpu(ckptd_pool_fd(p), &seg, 1, reps);
	printf("%-44s %7.3f s CPU (%.2f of one memcpy)\n", "restore's page tables: MADV_POPULATE_READ", pop_read,
	       pop_read / base.median);
	printf("%-44s %7.3f s CPU (%.2f of one memcpy)\n", "restore's page tables: a read per 64 KiB", touch,
	       touch / base.median);

	/* And from another process, as a rank is. */
	fflush(stdout);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		int e = ckptd_seg_map(ckptd_pool_fd(p), seg.off, seg.len, CKPTD_MAP_WRITE | CKPTD_MAP_POPULATE, &m);
		if (e < 0) {
			fprintf(stderr, "child: map: %s\n", strerror(-e));
			_exit(2);
		}
		figure f = timed_copies(m.addr, src, len, reps);
		report("save from a child process", f, base, len);
		fflush(stdout);
		_exit(0);
	}
	int status;
	T_ASSERT(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		T_FAIL("the child's copy failed: status %#x", status);
	printf("RATIO save/memcpy %.2f  restore/memcpy %.2f (medians; target >= 0.5)\n",
	       base.median / save.median, base.median / restore.median);
	free(src);
	free(priv);
	ckptd_pool_close(p);
	return T_EXIT_PASS;
}
