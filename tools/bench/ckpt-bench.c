/* ckpt-bench: time a save (stall and durable), a restore and a plain memcpy
 * of the same state in one run, so that their ratios can be compared.
 *
 * Per iteration: ckpt_save (stall) → ckpt_handle_wait(LOCAL_DISK) (durable,
 * fdatasync and index commit included) → zero the regions → ckpt_restore of
 * that version (restore) → verify every region against the original. The
 * reported figure of each is the median over iterations.
 *
 * With --tiers local_mem,local_disk (and CKPT_DAEMON, CKPT_TOKEN_FILE naming
 * a ckptd agent) the save snapshots into the agent's DRAM; the time until
 * ckpt_handle_wait(LOCAL_MEM) returns is reported too, and each restore runs
 * in a context of its own, as a restarted trainer's would (it reads node
 * DRAM first, and the agent keeps a segment pinned while a context that read
 * it is open).
 *
 * Uses only the public header. */
#define _GNU_SOURCE
#include <ckpt.h>

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <pthread.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BENCH_MEMCPY_REPS 3
#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct bench_opts {
	const char *root;
	uint64_t bytes;
	uint32_t nregions;
	uint64_t chunk_bytes; /* 0: library default */
	int compress;
	uint32_t workers;     /* 0: library default */
	uint32_t io_depth;    /* 0: library default */
	uint32_t iters;
	uint32_t tiers;       /* 0: library default */
	uint64_t staging;     /* 0: the whole state (staged), 64 MiB (LOCAL_MEM) */
	int json;
	int keep;
	int recycle;          /* --recycle: cfg.recycle */
	uint32_t keep_versions; /* --keep-versions N: cfg.keep_versions */
	uint32_t startup_ms;  /* LOCAL_MEM restores: between the context's open and the restore */
} bench_opts;

typedef struct bench_region {
	char name[32];
	uint8_t *ptr;
	size_t bytes;
	size_t map_bytes;
	uint64_t sum;         /* digest of the original contents */
} bench_region;

typedef struct bench_iter {
	double memcpy_s;      /* taken right before this iteration's save */
	double stall_s, durable_s, restore_s;
	double mem_s;         /* save entry to LOCAL_MEM commit; 0 without that tier */
	double restore_memcpy_s; /* memcpy taken right before this iteration's restore */
	double shm_memcpy_s;  /* LOCAL_MEM: memcpy into shared memory, right before the save */
	double stall_shm_ratio; /* stall_s / shm_memcpy_s */
	double restore_ratio; /* restore_memcpy_s / restore_s: restore speed as a share of memcpy's */
	double stall_ratio;   /* stall_s / memcpy_s */
	double lib_stall_s, lib_durable_s;
	double stall_cpu_s, stall_runq_s; /* this thread during the stall, -1 if unknown */
	uint64_t stored_bytes;
} bench_iter;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Accepts 123, 4K, 8M, 1G, 1T (powers of 1024), with an optional "B"/"iB". */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (!strcmp(end, "iB") || !strcmp(end, "B"))
		end += strlen(end);
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;
	if (parse_size(s, &v) < 0 || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* "local_mem,local_disk" -> tier mask; local_disk is required. */
static int parse_tiers(const char *s, uint32_t *out)
{
	char buf[128];
	uint32_t m = 0;
	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "local_mem"))
			m |= CKPT_TIER_LOCAL_MEM;
		else if (!strcmp(t, "local_disk"))
			m |= CKPT_TIER_LOCAL_DISK;
		else
			return -1;
	}
	if (!(m & CKPT_TIER_LOCAL_DISK))
		return -1;
	*out = m;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: ckpt-bench --root DIR --size BYTES --regions N [--json]\n"
	        "                  [--chunk-bytes B] [--compress] [--workers W] [--io-depth D]\n"
	        "                  [--iters K] [--keep] [--tiers LIST] [--staging BYTES]\n"
	        "                  [--recycle] [--keep-versions N] [--startup-ms MS]\n"
	        "Sizes accept K, M, G suffixes (powers of 1024).\n"
	        "Saves N host regions totalling BYTES into DIR K times (default 3), restores\n"
	        "each save and verifies it, and times a memcpy of the same bytes (by as many\n"
	        "threads as the snapshot copies with: CKPT_SNAPSHOT_THREADS, by default the\n"
	        "CPUs online, at most 4).\n"
	        "--tiers local_mem,local_disk saves into a ckptd agent's DRAM too (set\n"
	        "CKPT_DAEMON=unix:/path and CKPT_TOKEN_FILE) and times its commit; restores\n"
	        "then read DRAM, each in a context of its own (--startup-ms after it opened,\n"
	        "untimed: a trainer building its model). --staging sizes the staging\n"
	        "pool (default: the whole state; 64M with local_mem, where saves do not use it).\n"
	        "--recycle with --keep-versions N: the library's retention deletes all but\n"
	        "the newest N versions after each commit and later saves overwrite their\n"
	        "files (recycled shard files).\n"
	        "DIR's contents are removed at the end unless --keep.\n");
}

static int parse_args(int argc, char **argv, bench_opts *o)
{
	static const struct option longopts[] = {
		{ "root", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 's' },
		{ "regions", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "chunk-bytes", required_argument, NULL, 'c' },
		{ "compress", no_argument, NULL, 'z' },
		{ "workers", required_argument, NULL, 'w' },
		{ "io-depth", required_argument, NULL, 'd' },
		{ "iters", required_argument, NULL, 'i' },
		{ "keep", no_argument, NULL, 'k' },
		{ "recycle", no_argument, NULL, 'R' },
		{ "keep-versions", required_argument, NULL, 'K' },
		{ "tiers", required_argument, NULL, 't' },
		{ "staging", required_argument, NULL, 'S' },
		{ "startup-ms", required_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	memset(o, 0, sizeof(*o));
	o->iters = 3;
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		const char *bad = NULL;
		switch (c) {
		case 'r': o->root = optarg; break;
		case 's': if (parse_size(optarg, &o->bytes) < 0) bad = "--size"; break;
		case 'n': if (parse_u32(optarg, &o->nregions) < 0) bad = "--regions"; break;
		case 'j': o->json = 1; break;
		case 'c': if (parse_size(optarg, &o->chunk_bytes) < 0) bad = "--chunk-bytes"; break;
		case 'z': o->compress = 1; break;
		case 'w': if (parse_u32(optarg, &o->workers) < 0) bad = "--workers"; break;
		case 'd': if (parse_u32(optarg, &o->io_depth) < 0) bad = "--io-depth"; break;
		case 'i': if (parse_u32(optarg, &o->iters) < 0) bad = "--iters"; break;
		case 'k': o->keep = 1; break;
		case 'R': o->recycle = 1; break;
		case 'K': if (parse_u32(optarg, &o->keep_versions) < 0) bad = "--keep-versions"; break;
		case 't': if (parse_tiers(optarg, &o->tiers) < 0) bad = "--tiers"; break;
		case 'S': if (parse_size(optarg, &o->staging) < 0 || !o->staging) bad = "--staging"; break;
		case 'u': if (parse_u32(optarg, &o->startup_ms) < 0 || o->startup_ms > 600000) bad = "--startup-ms"; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
		if (bad) {
			fprintf(stderr, "ckpt-bench: %s: invalid value '%s'\n", bad, optarg);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ckpt-bench: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return -1;
	}
	if (!o->root || !*o->root || !o->bytes || !o->nregions) {
		fprintf(stderr, "ckpt-bench: --root, --size and --regions are required (size, regions > 0)\n");
		usage(stderr);
		return -1;
	}
	if (o->nregions > o->bytes) {
		fprintf(stderr, "ckpt-bench: more regions than bytes\n");
		return -1;
	}
	if (o->iters == 0) {
		fprintf(stderr, "ckpt-bench: --iters must be at least 1\n");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------- data */

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Floats in [-1, 1) rather than raw random bits, so that --compress meets
 * data shaped like weights (byte-shuffle finds the exponent bytes). */
static void fill_region(bench_region *r, uint64_t seed)
{
	uint64_t s = seed;
	size_t nf = r->bytes / 4;
	float *f = (float *)r->ptr;
	for (size_t i = 0; i + 1 < nf; i += 2) {
		uint64_t x = splitmix64(&s);
		f[i] = (float)(int32_t)(uint32_t)x * (1.0f / 2147483648.0f);
		f[i + 1] = (float)(int32_t)(uint32_t)(x >> 32) * (1.0f / 2147483648.0f);
	}
	if (nf % 2)
		f[nf - 1] = (float)(int32_t)(uint32_t)splitmix64(&s) * (1.0f / 2147483648.0f);
	for (size_t b = nf * 4; b < r->bytes; b++)
		r->ptr[b] = (uint8_t)splitmix64(&s);
}

/* Four independent multiply-xor lanes: fast enough to verify GiBs, and any
 * changed word changes the digest. Not a cryptographic hash. */
static uint64_t digest(const uint8_t *p, size_t len)
{
	const uint64_t k = 0x9fb21c651e98df25ull;
	uint64_t h[4] = { len, len ^ 1, len ^ 2, len ^ 3 };
	size_t i = 0;
	for (; i + 32 <= len; i += 32) {
		uint64_t w[4];
		memcpy(w, p + i, sizeof(w));
		for (int l = 0; l < 4; l++) {
			h[l] ^= w[l];
			h[l] *= k;
			h[l] ^= h[l] >> 29;
		}
	}
	for (; i < len; i++) {
		h[0] ^= p[i];
		h[0] *= k;
	}
	uint64_t out = 0;
	for (int l = 0; l < 4; l++) {
		out ^= h[l];
		out *= k;
		out ^= out >> 32;
	}
	return out;
}

static void *map_touched(size_t bytes, size_t *map_bytes)
{
	size_t len = (bytes + 4095) & ~(size_t)4095;
	if (len == 0)
		len = 4096;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	/* Same treatment as the library's staging pool, so the comparison is
	 * of copies, not of page sizes. */
	madvise(m, len, MADV_HUGEPAGE);
	memset(m, 0, len);
	*map_bytes = len;
	return m;
}

/* Shared memory like the agent's pool (a memfd, MAP_SHARED, touched): a
 * save into LOCAL_MEM copies into such pages, and where shared memory gets
 * no transparent huge pages its copies meet more TLB misses than one into
 * map_touched's buffer. The like-for-like limit of that stall. */
static void *map_shared_touched(size_t bytes, size_t *map_bytes)
{
	size_t len = (bytes + 4095) & ~(size_t)4095;
	if (len == 0)
		len = 4096;
	int fd = memfd_create("ckpt-bench", MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	void *m = MAP_FAILED;
	if (ftruncate(fd, (off_t)len) == 0)
		m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	madvise(m, len, MADV_HUGEPAGE); /* as the agent does */
	memset(m, 0, len);
	*map_bytes = len;
	return m;
}

/* On-CPU and run-queue time of the calling thread (Linux schedstat), so a
 * stall can be split into copying and waiting for a core that background
 * threads hold. Returns -1 where the file is not available. */
static int thread_sched(double *cpu_s, double *runq_s)
{
	unsigned long long cpu, wait;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");
	if (!f)
		return -1;
	int n = fscanf(f, "%llu %llu", &cpu, &wait);
	fclose(f);
	if (n != 2)
		return -1;
	*cpu_s = (double)cpu * 1e-9;
	*runq_s = (double)wait * 1e-9;
	return 0;
}

/* A share of the regions' bytes, [from, to) counted over all of them
 * back to back, for one copying thread. */
struct copy_share {
	uint8_t *dst;
	const bench_region *rg;
	uint32_t n;
	size_t from, to;
};

static void *copy_share_main(void *arg)
{
	const struct copy_share *c = arg;
	size_t off = 0;
	for (uint32_t i = 0; i < c->n && off < c->to; off += c->rg[i].bytes, i++) {
		size_t a = off > c->from ? off : c->from, e = off + c->rg[i].bytes;
		if (e > c->to)
			e = c->to;
		if (a < e)
			memcpy(c->dst + a, c->rg[i].ptr + (a - off), e - a);
	}
	return NULL;
}

#define BENCH_COPY_THREADS_MAX 64 /* config.c: snapshot_threads' limit */

/* As many threads as the snapshot copies with: the configuration's
 * snapshot_threads (CKPT_SNAPSHOT_THREADS), or where that is 0 (auto) the
 * library's default, the CPUs online, at most 4. The machine's memcpy
 * limit, not one core's. */
static unsigned copy_threads(uint32_t configured)
{
	if (configured)
		return configured > BENCH_COPY_THREADS_MAX ? BENCH_COPY_THREADS_MAX : configured;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1u : n > 4 ? 4u : (unsigned)n;
}

/* One copy of every region, back to back, into dst, shared among nt
 * threads; returns seconds. */
static double time_memcpy(uint8_t *dst, const bench_region *rg, uint32_t n, unsigned nt)
{
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++)
		total += rg[i].bytes;
	struct copy_share cs[BENCH_COPY_THREADS_MAX];
	pthread_t th[BENCH_COPY_THREADS_MAX];
	for (unsigned k = 0; k < nt; k++)
		cs[k] = (struct copy_share){ dst, rg, n, total / nt * k, k + 1 == nt ? total : total / nt * (k + 1) };
	double t0 = now_s();
	unsigned started = 1;
	for (unsigned k = 1; k < nt; k++, started++)
		if (pthread_create(&th[k], NULL, copy_share_main, &cs[k]))
			break;
	copy_share_main(&cs[0]);
	for (unsigned k = started; k < nt; k++)
		copy_share_main(&cs[k]); /* a thread that could not start: copied here */
	for (unsigned k = 1; k < started; k++)
		pthread_join(th[k], NULL);
	double t = now_s() - t0;
	size_t off = total;
	/* Keep the copy observable so it cannot be optimised away. */
	if (off && dst[off - 1] != rg[n - 1].ptr[rg[n - 1].bytes - 1])
		fprintf(stderr, "ckpt-bench: memcpy check failed\n");
	return t;
}

/* ------------------------------------------------------------- cleanup */

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	if (ftw->level == 0)
		return 0; /* the root itself stays: it may be a mount point */
	if (remove(path) < 0)
		fprintf(stderr, "ckpt-bench: cannot remove %s: %s\n", path, strerror(errno));
	return 0;
}

/* 1 if dir holds nothing but the given names. */
static int only_holds(const char *dir, const char *const *names)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT;
	struct dirent *e;
	int ok = 1;
	while (ok && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		ok = 0;
		for (const char *const *n = names; *n; n++)
			if (!strcmp(e->d_name, *n))
				ok = 1;
	}
	closedir(d);
	return ok;
}

/* The root's contents are removed at the end, so refuse a directory that
 * holds anything but an earlier benchmark's checkpoints. */
static int root_is_ours(const char *root)
{
	static const char *const top[] = { "index", "jobs", NULL };
	static const char *const jobs[] = { "bench", NULL };
	char p[4200];
	snprintf(p, sizeof(p), "%s/jobs", root);
	return only_holds(root, top) && only_holds(p, jobs);
}

static void remove_contents(const char *root)
{
	nftw(root, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

/* 1 if a file under root can be opened with O_DIRECT (what the library
 * probes too); reported so that a buffered fallback is not mistaken for
 * disk speed. */
static int probe_direct(const char *root)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/.bench-direct-probe.%d", root, (int)getpid());
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	close(fd);
	unlink(p);
	return 1;
}

/* ------------------------------------------------------------- stats */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median_of(const bench_iter *it, uint32_t n, size_t field_off)
{
	double *v = malloc(n * sizeof(double));
	if (!v)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		memcpy(&v[i], (const char *)&it[i] + field_off, sizeof(double));
	qsort(v, n, sizeof(double), cmp_double);
	double m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	free(v);
	return m;
}

#define MEDIAN(it, n, f) median_of((it), (n), offsetof(bench_iter, f))

static void print_series(const bench_iter *it, uint32_t n, size_t field_off)
{
	printf("[");
	for (uint32_t i = 0; i < n; i++) {
		double v;
		memcpy(&v, (const char *)&it[i] + field_off, sizeof(double));
		printf("%s%.6f", i ? ", " : "", v);
	}
	printf("]");
}

#define SERIES(it, n, f) print_series((it), (n), offsetof(bench_iter, f))

/* ------------------------------------------------------------- main */

static int open_registered(const ckpt_config *cfg, const bench_region *rg, uint32_t n, ckpt_ctx **out)
{
	int err = ckpt_ctx_open(cfg, out);
	if (err < 0) {
		fprintf(stderr, "ckpt-bench: cannot open a context on %s: %s\n", cfg->root, ckpt_strerror(err));
		return err;
	}
	for (uint32_t i = 0; i < n; i++) {
		ckpt_region_desc d;
		ckpt_region_desc_init(&d, rg[i].name, rg[i].ptr, rg[i].bytes);
		if (rg[i].bytes % 4 == 0) {
			d.dtype = CKPT_DTYPE_F32;
			d.ndim = 1;
			d.global_shape[0] = d.extents[0] = rg[i].bytes / 4;
		}
		if ((err = ckpt_region_add(*out, &d)) < 0) {
			fprintf(stderr, "ckpt-bench: cannot register region %s: %s\n", rg[i].name, ckpt_strerror(err));
			ckpt_ctx_close(*out);
			*out = NULL;
			return err;
		}
	}
	return 0;
}

/* LOCAL_MEM restores: a context of their own, with the version's shard file
 * gone, so that only the agent's DRAM copy can serve them. Returns the
 * seconds ckpt_restore took, or -1. */
static double restore_from_mem(const ckpt_config *cfg, const bench_region *rg, uint32_t n, uint64_t v,
                               uint32_t startup_ms)
{
	char p[4300];
	snprintf(p, sizeof(p), "%s/jobs/%s/v%020" PRIu64 "/r%06u.ckpt", cfg->root, cfg->job_id, v, cfg->rank);
	if (unlink(p) < 0) {
		fprintf(stderr, "ckpt-bench: cannot remove %s: %s\n", p, strerror(errno));
		return -1;
	}
	ckpt_ctx *ctx;
	if (open_registered(cfg, rg, n, &ctx) < 0)
		return -1;
	if (startup_ms)
		usleep((useconds_t)startup_ms * 1000);
	uint64_t got = 0;
	double t0 = now_s();
	int err = ckpt_restore(ctx, v, 0, &got);
	double t = now_s() - t0;
	ckpt_ctx_close(ctx);
	if (err < 0) {
		fprintf(stderr, "ckpt-bench: restore of version %" PRIu64 " from LOCAL_MEM failed: %s\n", v,
		        ckpt_strerror(err));
		return -1;
	}
	return t;
}

static int max_version(ckpt_ctx *ctx, uint64_t *out)
{
	size_t n = 0;
	int r = ckpt_versions_list(ctx, NULL, 0, &n);
	*out = 0;
	if (r < 0 || n == 0)
		return r;
	ckpt_version_info *v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i].size = sizeof(v[i]);
	size_t got = 0;
	r = ckpt_versions_list(ctx, v, n, &got);
	for (size_t i = 0; r == 0 && i < n && i < got; i++)
		if (v[i].version > *out)
			*out = v[i].version;
	free(v);
	return r;
}

/* One run: the options, the context's settings, the regions and the
 * buffers of the memcpy limits, the iterations done. */
typedef struct bench {
	bench_opts o;
	ckpt_config cfg;
	int mem;              /* LOCAL_MEM saved and timed */
	bench_region *rg;
	uint32_t nalloc;      /* regions mapped */
	bench_iter *it;
	uint32_t done_iters;
	uint8_t *dst, *shm;   /* memcpy targets: private, and shared like the agent's pool */
	size_t dst_map, shm_map;
	double memcpy_s, shm_s; /* the best of every memcpy timed */
	ckpt_ctx *ctx;
} bench;

/* The root is created, or holds only an earlier run's checkpoints (its
 * contents are removed at the end). */
static int bench_root(const bench_opts *o, int *created)
{
	*created = 0;
	if (mkdir(o->root, 0700) == 0) {
		*created = 1;
	} else if (errno != EEXIST) {
		fprintf(stderr, "ckpt-bench: cannot create %s: %s\n", o->root, strerror(errno));
		return -1;
	} else if (!o->keep && !root_is_ours(o->root)) {
		fprintf(stderr,
		        "ckpt-bench: %s holds files other than ckpt-bench's own checkpoints, and would be emptied at "
		        "the end; use an empty or new directory, or --keep\n",
		        o->root);
		return -1;
	}
	return 0;
}

static int bench_config(bench *b)
{
	ckpt_config *cfg = &b->cfg;
	int err;
	if ((err = ckpt_config_init(cfg)) < 0) {
		fprintf(stderr, "ckpt-bench: configuration from the environment: %s\n", ckpt_strerror(err));
		return -1;
	}
	cfg->job_id = "bench";
	cfg->rank = 0;
	cfg->world_size = 1;
	cfg->root = b->o.root;
	cfg->compress = b->o.compress;
	cfg->recycle = b->o.recycle;
	cfg->keep_versions = b->o.keep_versions;
	cfg->pool_policy = CKPT_POOL_WAIT;
	if (b->o.chunk_bytes)
		cfg->chunk_bytes = b->o.chunk_bytes;
	if (b->o.workers)
		cfg->workers = b->o.workers;
	if (b->o.io_depth)
		cfg->io_depth = b->o.io_depth;
	if (b->o.tiers)
		cfg->tiers = b->o.tiers;
	b->mem = (cfg->tiers & CKPT_TIER_LOCAL_MEM) != 0;
	if (b->mem) {
		if (!cfg->daemon || !*cfg->daemon) {
			fprintf(stderr, "ckpt-bench: --tiers local_mem needs a ckptd agent: set CKPT_DAEMON=unix:/path "
			        "and CKPT_TOKEN_FILE\n");
			return -1;
		}
		/* Measure the agent or nothing: no quiet fallback to disk alone. */
		cfg->daemon_required = 1;
	}
	return 0;
}

/* The regions, filled; *nchunks receives the chunk count that sizes the
 * staging pool: each chunk takes a whole slot, so the pool must hold every
 * region's chunks for the stall to be the copy alone. */
static int bench_regions(bench *b, uint64_t *nchunks)
{
	const bench_opts *o = &b->o;
	uint64_t per = o->bytes / o->nregions;
	*nchunks = 0;
	for (uint32_t i = 0; i < o->nregions; i++) {
		bench_region *r = &b->rg[i];
		r->bytes = per + (i == o->nregions - 1 ? o->bytes % o->nregions : 0);
		snprintf(r->name, sizeof(r->name), "layer%04u.weight", i);
		r->ptr = map_touched(r->bytes, &r->map_bytes);
		if (!r->ptr) {
			fprintf(stderr, "ckpt-bench: cannot allocate region %u (%zu bytes): %s\n", i, r->bytes,
			        strerror(errno));
			return -1;
		}
		b->nalloc++;
		fill_region(r, 0x5eed0000ull + i);
		r->sum = digest(r->ptr, r->bytes);
		*nchunks += (r->bytes + b->cfg.chunk_bytes - 1) / b->cfg.chunk_bytes;
	}
	return 0;
}

/* Best of a few memcpys of every region into dst. */
static double best_memcpy(uint8_t *dst, const bench *b)
{
	double best = 0;
	for (int k = 0; k < BENCH_MEMCPY_REPS; k++) {
		double t = time_memcpy(dst, b->rg, b->o.nregions, copy_threads(b->cfg.snapshot_threads));
		if (k == 0 || t < best)
			best = t;
	}
	return best;
}

/* The physical limit of the snapshot: memcpy of the same regions into a
 * touched buffer, a few times before the context exists and once more
 * right before each save, so that drift in a shared machine's speed
 * shows up in both figures alike. */
static int bench_limits(bench *b)
{
	uint64_t bytes = b->o.bytes;
	if (!(b->dst = map_touched(bytes, &b->dst_map))) {
		fprintf(stderr, "ckpt-bench: cannot allocate the memcpy buffer (%" PRIu64 " bytes): %s\n", bytes,
		        strerror(errno));
		return -1;
	}
	b->memcpy_s = best_memcpy(b->dst, b);
	if (!b->mem)
		return 0;
	if (!(b->shm = map_shared_touched(bytes, &b->shm_map))) {
		fprintf(stderr, "ckpt-bench: cannot allocate shared memory (%" PRIu64 " bytes): %s\n", bytes,
		        strerror(errno));
		return -1;
	}
	b->shm_s = best_memcpy(b->shm, b);
	return 0;
}

/* A memcpy into dst timed now, kept as the best if it is. */
static double memcpy_now(bench *b, uint8_t *dst, double *best)
{
	double t = time_memcpy(dst, b->rg, b->o.nregions, copy_threads(b->cfg.snapshot_threads));
	if (t < *best)
		*best = t;
	return t;
}

/* Saves version v, waits for LOCAL_MEM (if saved there) then LOCAL_DISK;
 * fills the iteration's save figures. t0 receives the save's start. */
static int bench_save(bench *b, bench_iter *it, uint64_t v, double *t0)
{
	ckpt_handle *h = NULL;
	ckpt_status st = { .size = sizeof(st) };
	double c0, q0, c1, q1;
	int sched_ok = thread_sched(&c0, &q0) == 0;
	*t0 = now_s();
	int err = ckpt_save(b->ctx, v, CKPT_SAVE_DEFAULT, &h);
	double t1 = now_s();
	sched_ok = sched_ok && thread_sched(&c1, &q1) == 0;
	if (err < 0) {
		fprintf(stderr, "ckpt-bench: save of version %" PRIu64 " failed: %s\n", v, ckpt_strerror(err));
		return -1;
	}
	double tm = 0;
	if (b->mem) {
		ckpt_status sm = { .size = sizeof(sm) };
		err = ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, -1, &sm);
		tm = now_s();
		if (err < 0) {
			fprintf(stderr, "ckpt-bench: version %" PRIu64 " did not commit in DRAM: %s\n", v,
			        ckpt_strerror(err));
			ckpt_handle_free(h);
			return -1;
		}
	}
	err = ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, &st);
	double t2 = now_s();
	ckpt_handle_free(h);
	if (err < 0) {
		fprintf(stderr, "ckpt-bench: version %" PRIu64 " did not become durable: %s%s%s\n", v,
		        ckpt_strerror(err), st.sys_errno ? " / " : "", st.sys_errno ? ckpt_strerror(st.sys_errno) : "");
		return -1;
	}
	it->stall_s = t1 - *t0;
	it->stall_ratio = it->stall_s / it->memcpy_s;
	it->stall_shm_ratio = b->mem ? it->stall_s / it->shm_memcpy_s : 0;
	it->durable_s = t2 - *t0;
	it->mem_s = b->mem ? tm - *t0 : 0;
	it->lib_stall_s = (double)st.stall_ns * 1e-9;
	it->lib_durable_s = (double)st.durable_ns * 1e-9;
	it->stall_cpu_s = sched_ok ? c1 - c0 : -1;
	it->stall_runq_s = sched_ok ? q1 - q0 : -1;
	it->stored_bytes = st.stored_bytes;
	return 0;
}

/* Zeroes the regions, restores version v into them and checks every one. */
static int bench_restore(bench *b, bench_iter *it, uint64_t v)
{
	for (uint32_t i = 0; i < b->o.nregions; i++)
		memset(b->rg[i].ptr, 0, b->rg[i].bytes);
	double t3 = 0, t4 = 0;
	if (b->mem) {
		if ((t4 = restore_from_mem(&b->cfg, b->rg, b->o.nregions, v, b->o.startup_ms)) < 0)
			return -1;
	} else {
		uint64_t got = 0;
		t3 = now_s();
		int err = ckpt_restore(b->ctx, v, 0, &got);
		t4 = now_s();
		if (err < 0) {
			fprintf(stderr, "ckpt-bench: restore of version %" PRIu64 " failed: %s\n", v, ckpt_strerror(err));
			return -1;
		}
	}
	for (uint32_t i = 0; i < b->o.nregions; i++)
		if (digest(b->rg[i].ptr, b->rg[i].bytes) != b->rg[i].sum) {
			fprintf(stderr, "ckpt-bench: version %" PRIu64 ": region %s restored with wrong contents\n", v,
			        b->rg[i].name);
			return -1;
		}
	it->restore_s = t4 - t3;
	it->restore_ratio = it->restore_memcpy_s / it->restore_s;
	return 0;
}

/* Iteration k: save version v and restore it, each after a memcpy timed
 * right before it. */
static int bench_iteration(bench *b, uint32_t k, uint64_t v)
{
	bench_iter *it = &b->it[k];
	if (b->mem)
		it->shm_memcpy_s = memcpy_now(b, b->shm, &b->shm_s);
	it->memcpy_s = memcpy_now(b, b->dst, &b->memcpy_s);
	double t0;
	if (bench_save(b, it, v, &t0) < 0)
		return -1;
	it->restore_memcpy_s = memcpy_now(b, b->dst, &b->memcpy_s);
	if (bench_restore(b, it, v) < 0)
		return -1;
	b->done_iters++;
	if (!b->o.json) {
		char memc[64] = "";
		if (b->mem)
			snprintf(memc, sizeof(memc), "LOCAL_MEM commit %.4f s, ", it->mem_s);
		fprintf(stderr,
		        "iter %u: version %" PRIu64 " memcpy %.4f s, stall %.4f s (on cpu %.4f, run queue %.4f), "
		        "%sdurable %.4f s, restore%s %.4f s\n",
		        k, v, it->memcpy_s, it->stall_s, it->stall_cpu_s, it->stall_runq_s, memc, it->durable_s,
		        b->mem ? " from LOCAL_MEM" : "", it->restore_s);
	}
	return 0;
}

/* The medians over the iterations done. */
typedef struct bench_summary {
	double stall, durable, restore, paired, stall_cpu, stall_runq, mem_commit, restore_ratio, stall_shm_paired;
	double gib;
	int direct;
} bench_summary;

static void report_json(const bench *b, const bench_summary *m)
{
	const bench_iter *it = b->it;
	uint32_t n = b->done_iters;
	const ckpt_config *cfg = &b->cfg;
	printf("{\"bytes\": %" PRIu64 ", \"regions\": %u, \"chunk_bytes\": %" PRIu64
	       ", \"recycle\": %d, \"keep_versions\": %u, \"compress\": %d, \"workers\": %u, \"io_depth\": %u, "
	       "\"iters\": %u, \"direct_io\": %d, "
	       "\"stored_bytes\": %" PRIu64 ", \"tiers\": \"%s\", \"staging_bytes\": %" PRIu64 ", \"startup_ms\": %u, ",
	       b->o.bytes, b->o.nregions, (uint64_t)cfg->chunk_bytes, cfg->recycle, cfg->keep_versions, cfg->compress,
	       cfg->workers, cfg->io_depth, n,
	       m->direct, it[n - 1].stored_bytes, b->mem ? "local_mem,local_disk" : "local_disk",
	       (uint64_t)cfg->staging_bytes, b->o.startup_ms);
	if (b->mem)
		printf("\"mem_commit_s\": %.6f, \"mem_commit_vs_durable\": %.4f, \"memcpy_shm_s\": %.6f, "
		       "\"stall_vs_memcpy_shm\": %.4f, \"stall_vs_memcpy_shm_paired\": %.4f, ",
		       m->mem_commit, m->mem_commit / m->durable, b->shm_s, m->stall / b->shm_s, m->stall_shm_paired);
	printf("\"restore_vs_memcpy\": %.4f, \"restore_vs_memcpy_paired\": %.4f, ", b->memcpy_s / m->restore,
	       m->restore_ratio);
	printf("\"stall_s\": %.6f, \"durable_s\": %.6f, \"restore_s\": %.6f, \"memcpy_s\": %.6f, "
	       "\"stall_vs_memcpy\": %.4f, \"stall_vs_memcpy_paired\": %.4f, "
	       "\"stall_gib_s\": %.4f, \"durable_gib_s\": %.4f, \"restore_gib_s\": %.4f, "
	       "\"memcpy_gib_s\": %.4f, ",
	       m->stall, m->durable, m->restore, b->memcpy_s, m->stall / b->memcpy_s, m->paired, m->gib / m->stall,
	       m->gib / m->durable, m->gib / m->restore, m->gib / b->memcpy_s);
	printf("\"lib_stall_s\": %.6f, \"lib_durable_s\": %.6f, \"stall_cpu_s\": %.6f, "
	       "\"stall_runq_s\": %.6f, ",
	       MEDIAN(it, n, lib_stall_s), MEDIAN(it, n, lib_durable_s), m->stall_cpu, m->stall_runq);
	printf("\"memcpy_s_all\": ");
	SERIES(it, n, memcpy_s);
	printf(", \"stall_s_all\": ");
	SERIES(it, n, stall_s);
	printf(", \"durable_s_all\": ");
	SERIES(it, n, durable_s);
	printf(", \"restore_s_all\": ");
	SERIES(it, n, restore_s);
	if (b->mem) {
		printf(", \"mem_commit_s_all\": ");
		SERIES(it, n, mem_s);
	}
	printf("}\n");
}

static void report_text(const bench *b, const bench_summary *m)
{
	const ckpt_config *cfg = &b->cfg;
	double gib = m->gib;
	printf("ckpt-bench: %.3f GiB in %u regions, chunk %" PRIu64 " KiB, %s, %u workers, io depth %u, "
	       "%u iterations (median), %s I/O\n",
	       gib, b->o.nregions, (uint64_t)cfg->chunk_bytes >> 10, cfg->compress ? "compressed" : "uncompressed",
	       cfg->workers, cfg->io_depth, b->done_iters, m->direct ? "direct" : "buffered");
	printf("  memcpy   %9.4f s  %7.2f GiB/s  (best of %u)\n", b->memcpy_s, gib / b->memcpy_s,
	       BENCH_MEMCPY_REPS + 2 * b->done_iters);
	printf("  stall    %9.4f s  %7.2f GiB/s  %.2fx memcpy (%.2fx the memcpy just before each save)\n", m->stall,
	       gib / m->stall, m->stall / b->memcpy_s, m->paired);
	if (m->stall_cpu >= 0)
		printf("           on cpu %.4f s, waiting for a cpu %.4f s\n", m->stall_cpu, m->stall_runq);
	if (b->mem)
		printf("           %.2fx a memcpy into shared memory like the agent's (%.4f s; %.2fx paired)\n",
		       m->stall / b->shm_s, b->shm_s, m->stall_shm_paired);
	if (b->mem)
		printf("  LOCAL_MEM %8.4f s  %7.2f GiB/s  (save to committed in node DRAM)\n", m->mem_commit,
		       gib / m->mem_commit);
	printf("  durable  %9.4f s  %7.2f GiB/s  (save to fdatasync + index commit)\n", m->durable, gib / m->durable);
	printf("  restore  %9.4f s  %7.2f GiB/s  %.2fx memcpy's speed (%.2fx the memcpy just before each; "
	       "verified%s)\n", m->restore, gib / m->restore, b->memcpy_s / m->restore, m->restore_ratio,
	       b->mem ? ", from LOCAL_MEM" : "");
	if (b->o.compress)
		printf("  stored   %" PRIu64 " of %" PRIu64 " bytes\n", b->it[b->done_iters - 1].stored_bytes, b->o.bytes);
}

static void bench_report(const bench *b)
{
	const bench_iter *it = b->it;
	uint32_t n = b->done_iters;
	bench_summary m = {
		.stall = MEDIAN(it, n, stall_s), .durable = MEDIAN(it, n, durable_s), .restore = MEDIAN(it, n, restore_s),
		.paired = MEDIAN(it, n, stall_ratio), .stall_cpu = MEDIAN(it, n, stall_cpu_s),
		.stall_runq = MEDIAN(it, n, stall_runq_s), .mem_commit = MEDIAN(it, n, mem_s),
		.restore_ratio = MEDIAN(it, n, restore_ratio), .stall_shm_paired = MEDIAN(it, n, stall_shm_ratio),
		.gib = (double)b->o.bytes / GIB, .direct = probe_direct(b->o.root),
	};
	if (b->o.json)
		report_json(b, &m);
	else
		report_text(b, &m);
}

/* Regions, limits, the context, then every iteration and the report. */
static int bench_run(bench *b)
{
	int err;
	uint64_t nchunks;
	b->rg = calloc(b->o.nregions, sizeof(*b->rg));
	b->it = calloc(b->o.iters, sizeof(*b->it));
	if (!b->rg || !b->it) {
		fprintf(stderr, "ckpt-bench: out of memory\n");
		return -1;
	}
	if (bench_regions(b, &nchunks) < 0 || bench_limits(b) < 0)
		return -1;
	/* Into LOCAL_MEM the snapshot takes no staging slot. */
	b->cfg.staging_bytes = nchunks * b->cfg.chunk_bytes;
	if (b->mem && b->cfg.staging_bytes > (64u << 20))
		b->cfg.staging_bytes = 64u << 20;
	if (b->o.staging)
		b->cfg.staging_bytes = b->o.staging;
	if (open_registered(&b->cfg, b->rg, b->o.nregions, &b->ctx) < 0)
		return -1;
	/* A root kept from an earlier run already holds versions: go past them. */
	uint64_t base;
	if ((err = max_version(b->ctx, &base)) < 0) {
		fprintf(stderr, "ckpt-bench: cannot list versions: %s\n", ckpt_strerror(err));
		return -1;
	}
	for (uint32_t k = 0; k < b->o.iters; k++)
		if (bench_iteration(b, k, base + 1 + k) < 0)
			return -1;
	err = ckpt_ctx_close(b->ctx);
	b->ctx = NULL;
	if (err < 0) {
		fprintf(stderr, "ckpt-bench: closing the context: %s\n", ckpt_strerror(err));
		return -1;
	}
	bench_report(b);
	return 0;
}

int main(int argc, char **argv)
{
	bench b = { 0 };
	if (parse_args(argc, argv, &b.o) < 0)
		return 2;
	int created_root;
	if (bench_root(&b.o, &created_root) < 0)
		return 1;
	int rc = bench_config(&b) == 0 && bench_run(&b) == 0 ? 0 : 1;
	if (b.ctx) {
		int err = ckpt_ctx_close(b.ctx);
		if (err < 0)
			fprintf(stderr, "ckpt-bench: closing the context: %s\n", ckpt_strerror(err));
	}
	for (uint32_t i = 0; i < b.nalloc; i++)
		munmap(b.rg[i].ptr, b.rg[i].map_bytes);
	if (b.dst)
		munmap(b.dst, b.dst_map);
	if (b.shm)
		munmap(b.shm, b.shm_map);
	free(b.rg);
	free(b.it);
	if (!b.o.keep) {
		remove_contents(b.o.root);
		if (created_root)
			rmdir(b.o.root);
	}
	return rc;
}
