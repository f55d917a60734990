/* ckpt-rank-bench: one rank process for the benchmarks that need real ranks
 * around ckptd agents (tools/bench-peer.sh, tools/bench-preempt.sh). The
 * scripts start the daemons; this program is the trainer. Its settings come
 * from the CKPT_* environment (job, rank, world size, root, daemon, token,
 * tiers, restore order), like any libckpt rank; it uses only the public
 * header.
 *
 *   save     --iters K saves of the state as versions --first-version V...;
 *            each: a memcpy of the same bytes timed right before, the stall
 *            (time in ckpt_save), then ckpt_handle_wait on every tier of the
 *            context (LOCAL_MEM, PEER_MEM, LOCAL_DISK), one after the other.
 *            --warmup N saves first, not reported (the first save into a
 *            pool builds its page tables).
 *   restore  --iters K restores of --version (default: the newest
 *            committed), each in a context of its own, as a restarted
 *            trainer's: the regions are zeroed, then ckpt_ctx_open,
 *            ckpt_region_add and ckpt_restore are timed (with --startup-ms
 *            between them, untimed: a trainer building its model, while the
 *            library opens its fabric in the background), and every byte is
 *            checked against what the saving rank wrote. A memcpy of the same
 *            bytes is timed before each. Where it read from is in the
 *            library's log (CKPT_DEBUG=INFO: "restored from ...").
 *   train    a training loop: a step of --step-ms (sleeping: the compute),
 *            then, with --sync FILE, a barrier with the job's other ranks
 *            (as a data-parallel step's all-reduce keeps ranks in lockstep;
 *            FILE: 64 bytes per rank, shared by the job's processes), then
 *            ckpt_step. Saves at step --save-at (a regular checkpoint;
 *            with --save-when FILE, at the first step from there on at
 *            which FILE exists, for a --sync job at which any of its
 *            ranks had seen it) and whenever ckpt_step says SAVE (the
 *            emergency step); prints "ready" once the regular checkpoint
 *            is committed in node DRAM and on disk and its PEER_MEM
 *            outcome is known (or still pending --peer-wait seconds
 *            later); leaves when ckpt_step says EXIT.
 *
 * The state: --regions regions totalling --size bytes of pseudo-random
 * words, a function of the rank (so any process can check a restore), with
 * each region's first word set to the step / version saved. save
 * --state-file FILE: the file's bytes instead, as they are (no stamp, no
 * memcpy timed: memcpy_s 0), split into the regions as bench_util.h says
 * (ckpt-restore-bench restores them and compares them with the file).
 *
 * Output: one JSON object per line on stdout (per iteration, or per event
 * in train mode, with CLOCK_REALTIME stamps); errors on stderr. Exit 0, 1 on
 * any failure (a tier that did not commit, a restore that differs). */
#define _GNU_SOURCE
#include <ckpt.h>

#include "bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_ITERS 1000
#define MAX_REGIONS 64
#define WAIT_MS 300000 /* a tier that takes longer has failed */
#define STAGING_DEFAULT (64ull << 20)

typedef struct rb_opts {
	const char *mode;
	uint64_t bytes;
	uint32_t nregions;
	uint32_t iters, warmup;
	uint64_t first_version;
	uint64_t version;     /* restore: CKPT_LATEST unless given */
	uint32_t startup_ms;  /* restore: between the context's open and the restore (a trainer building its model) */
	uint32_t step_ms;
	uint64_t save_at, max_steps;
	uint32_t timeout_s;
	uint32_t peer_wait_s;
	const char *sync;     /* train: the barrier file, NULL for none */
	const char *save_when; /* train: the regular save waits for this file too */
	const char *state_file; /* save: the state is this file's bytes (NULL: pseudo-random) */
} rb_opts;

typedef struct rb_region {
	char name[32];
	uint64_t *w;
	size_t bytes, map_bytes;
} rb_region;

static rb_opts o;
static uint64_t main_wall_ns; /* when main() began: exec and the libraries' constructors are before */
static rb_region rg[MAX_REGIONS];
static uint8_t *dst;
static uint32_t my_rank;

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
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

/* ---------------------------------------------------------------- the state */

/* splitmix64: word i of a region, reproducible in any process. */
static inline uint64_t word_of(uint64_t seed, uint64_t i)
{
	uint64_t x = seed + i * 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t seed_of(uint32_t region)
{
	return ((uint64_t)my_rank + 1) << 32 | region;
}

static void *map_touched(size_t bytes, size_t *map_bytes)
{
	size_t len = (bytes + 4095) & ~(size_t)4095;
	void *m = mmap(NULL, len ? len : 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	madvise(m, len, MADV_HUGEPAGE); /* as the staging pool and ckpt-bench */
	memset(m, 0, len);
	*map_bytes = len;
	return m;
}

static int regions_alloc(void)
{
	for (uint32_t i = 0; i < o.nregions; i++) {
		rb_region *r = &rg[i];
		r->bytes = sf_region_len(o.bytes, o.nregions, i);
		sf_region_name(r->name, sizeof(r->name), i);
		if (!(r->w = map_touched(r->bytes, &r->map_bytes))) {
			fprintf(stderr, "ckpt-rank-bench: cannot allocate %zu bytes: %s\n", r->bytes, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int regions_fill(void)
{
	if (o.state_file) {
		int fd = open(o.state_file, O_RDONLY | O_CLOEXEC), r = fd < 0 ? -errno : 0;
		for (uint64_t i = 0, off = 0; r == 0 && i < o.nregions; off += rg[i].bytes, i++)
			r = sf_read(fd, rg[i].w, rg[i].bytes, off);
		if (fd >= 0)
			close(fd);
		if (r < 0)
			fprintf(stderr, "ckpt-rank-bench: --state-file %s: %s\n", o.state_file, strerror(-r));
		return r;
	}
	for (uint32_t i = 0; i < o.nregions; i++) {
		size_t n = rg[i].bytes / 8;
		uint64_t s = seed_of(i);
		for (size_t k = 0; k < n; k++)
			rg[i].w[k] = word_of(s, k);
	}
	return 0;
}

static void regions_stamp(uint64_t step)
{
	if (o.state_file)
		return;
	for (uint32_t i = 0; i < o.nregions; i++)
		rg[i].w[0] = step;
}

static void regions_zero(void)
{
	for (uint32_t i = 0; i < o.nregions; i++)
		memset(rg[i].w, 0, rg[i].bytes);
}

/* 0 if the regions hold what this rank saved as version v. */
static int regions_check(uint64_t v)
{
	for (uint32_t i = 0; i < o.nregions; i++) {
		size_t n = rg[i].bytes / 8;
		uint64_t s = seed_of(i);
		if (rg[i].w[0] != v) {
			fprintf(stderr, "ckpt-rank-bench: region %s holds step %" PRIu64 ", not %" PRIu64 "\n", rg[i].name,
			        rg[i].w[0], v);
			return -1;
		}
		for (size_t k = 1; k < n; k++)
			if (rg[i].w[k] != word_of(s, k)) {
				fprintf(stderr, "ckpt-rank-bench: region %s differs at byte %zu\n", rg[i].name, k * 8);
				return -1;
			}
	}
	return 0;
}

static double time_memcpy(void)
{
	if (!dst)
		return 0;
	double t0 = mono_s();
	size_t off = 0;
	for (uint32_t i = 0; i < o.nregions; i++) {
		memcpy(dst + off, rg[i].w, rg[i].bytes);
		off += rg[i].bytes;
	}
	double t = mono_s() - t0;
	if (off && dst[off - 1] != ((uint8_t *)rg[o.nregions - 1].w)[rg[o.nregions - 1].bytes - 1])
		fprintf(stderr, "ckpt-rank-bench: memcpy check failed\n");
	return t;
}

/* ---------------------------------------------------------------- contexts */

static int ctx_open(const ckpt_config *cfg, ckpt_ctx **ctx)
{
	int err = ckpt_ctx_open(cfg, ctx);
	if (err < 0) {
		fprintf(stderr, "ckpt-rank-bench: ckpt_ctx_open: %s\n", ckpt_strerror(err));
		return err;
	}
	for (uint32_t i = 0; i < o.nregions; i++) {
		ckpt_region_desc d;
		ckpt_region_desc_init(&d, rg[i].name, rg[i].w, rg[i].bytes);
		if ((err = ckpt_region_add(*ctx, &d)) < 0) {
			fprintf(stderr, "ckpt-rank-bench: ckpt_region_add: %s\n", ckpt_strerror(err));
			ckpt_ctx_close(*ctx);
			*ctx = NULL;
			return err;
		}
	}
	return 0;
}

static const char *tier_name(uint32_t t)
{
	return t == CKPT_TIER_LOCAL_MEM ? "mem" : t == CKPT_TIER_PEER_MEM ? "peer" : "disk";
}

/* ---------------------------------------------------------------- save */

static int run_save(const ckpt_config *cfg)
{
	static const uint32_t order[] = { CKPT_TIER_LOCAL_MEM, CKPT_TIER_PEER_MEM, CKPT_TIER_LOCAL_DISK };
	ckpt_ctx *ctx;
	if (regions_fill() < 0)
		return 1;
	double best = 0;
	for (int k = 0; k < 3; k++) {
		double t = time_memcpy();
		if (k == 0 || t < best)
			best = t;
	}
	if (ctx_open(cfg, &ctx) < 0)
		return 1;
	int rc = 0;
	for (uint32_t k = 0; k < o.warmup + o.iters && rc == 0; k++) {
		uint64_t v = o.first_version + k;
		regions_stamp(v);
		double mc = time_memcpy();
		ckpt_handle *h = NULL;
		double t0 = mono_s();
		int err = ckpt_save(ctx, v, CKPT_SAVE_DEFAULT, &h);
		double t1 = mono_s();
		if (err < 0) {
			fprintf(stderr, "ckpt-rank-bench: save of version %" PRIu64 ": %s\n", v, ckpt_strerror(err));
			rc = 1;
			break;
		}
		double at[3] = { 0, 0, 0 };
		uint64_t lib_stall = 0, durable_wall = 0;
		for (int i = 0; i < 3; i++) {
			if (!(cfg->tiers & order[i]))
				continue;
			ckpt_status st = { .size = sizeof(st) };
			err = ckpt_handle_wait(h, order[i], WAIT_MS, &st);
			at[i] = mono_s() - t0;
			if (err < 0) {
				fprintf(stderr, "ckpt-rank-bench: version %" PRIu64 " did not commit at %s: %s\n", v,
				        tier_name(order[i]), ckpt_strerror(err));
				rc = 1;
			}
			if (order[i] == CKPT_TIER_LOCAL_DISK) {
				lib_stall = st.stall_ns;
				durable_wall = wall_ns();
			}
		}
		ckpt_handle_free(h);
		if (k < o.warmup)
			continue;
		printf("{\"kind\": \"save\", \"version\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"stall_s\": %.6f, "
		       "\"lib_stall_s\": %.6f, \"memcpy_s\": %.6f, \"memcpy_best_s\": %.6f, \"mem_s\": %.6f, "
		       "\"peer_s\": %.6f, \"durable_s\": %.6f, \"durable_wall_ns\": %" PRIu64 "}\n",
		       v, o.bytes, t1 - t0, lib_stall / 1e9, mc, best, at[0], at[1], at[2], durable_wall);
		fflush(stdout);
	}
	int err = ckpt_ctx_close(ctx);
	if (err < 0) {
		fprintf(stderr, "ckpt-rank-bench: ckpt_ctx_close: %s\n", ckpt_strerror(err));
		rc = 1;
	}
	return rc;
}

/* ---------------------------------------------------------------- restore */

static int run_restore(const ckpt_config *cfg)
{
	regions_fill(); /* the memcpy's source (pseudo-random: no file) */
	double best = 0;
	for (int k = 0; k < 3; k++) {
		double t = time_memcpy();
		if (k == 0 || t < best)
			best = t;
	}
	for (uint32_t k = 0; k < o.iters; k++) {
		double mc = time_memcpy();
		if (mc < best)
			best = mc;
		regions_zero();
		ckpt_ctx *ctx;
		uint64_t got = 0;
		double t0 = mono_s();
		if (ctx_open(cfg, &ctx) < 0)
			return 1;
		double t1 = mono_s();
		if (o.startup_ms)
			usleep((useconds_t)o.startup_ms * 1000);
		double t1r = mono_s();
		int err = ckpt_restore(ctx, o.version, 0, &got);
		double t2 = mono_s();
		if (err < 0) {
			fprintf(stderr, "ckpt-rank-bench: restore: %s\n", ckpt_strerror(err));
			ckpt_ctx_close(ctx);
			return 1;
		}
		if (regions_check(got) < 0) {
			ckpt_ctx_close(ctx);
			return 1;
		}
		double t3 = mono_s();
		err = ckpt_ctx_close(ctx);
		double t4 = mono_s();
		if (err < 0) {
			fprintf(stderr, "ckpt-rank-bench: ckpt_ctx_close: %s\n", ckpt_strerror(err));
			return 1;
		}
		printf("{\"kind\": \"restore\", \"version\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"open_s\": %.6f, "
		       "\"startup_s\": %.6f, \"restore_s\": %.6f, \"resumed_s\": %.6f, \"close_s\": %.6f, "
		       "\"memcpy_s\": %.6f, \"memcpy_best_s\": %.6f, \"main_wall_ns\": %" PRIu64 ", \"verified\": true}\n",
		       got, o.bytes, t1 - t0, t1r - t1, t2 - t1r, t2 - t0, t4 - t3, mc, best, main_wall_ns);
		fflush(stdout);
	}
	return 0;
}

/* ---------------------------------------------------------------- train */

#define SYNC_STRIDE 64 /* bytes per rank in the barrier file: one cache line */
#define SYNC_GONE UINT64_MAX
#define SYNC_WAIT_S 60.0

typedef struct rb_sync {
	_Atomic uint64_t *slot; /* world slots, SYNC_STRIDE apart */
	uint32_t world, rank;
	size_t len;
} rb_sync;

static _Atomic uint64_t *sync_slot(const rb_sync *b, uint32_t r)
{
	return (_Atomic uint64_t *)((uint8_t *)b->slot + (size_t)r * SYNC_STRIDE);
}

/* The word after a rank's step: the first step at which it saw the
 * --save-when file (0: not yet). */
static _Atomic uint64_t *sync_seen_slot(const rb_sync *b, uint32_t r)
{
	return sync_slot(b, r) + 1;
}

static int sync_open(rb_sync *b, const char *path, uint32_t world, uint32_t rank)
{
	b->world = world;
	b->rank = rank;
	b->len = (size_t)world * SYNC_STRIDE;
	int fd = open(path, O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "ckpt-rank-bench: --sync %s: %s\n", path, strerror(errno));
		return -1;
	}
	void *m = MAP_FAILED;
	struct stat st;
	if (fstat(fd, &st) == 0 && (size_t)st.st_size >= b->len)
		m = mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		fprintf(stderr, "ckpt-rank-bench: --sync %s: not a file of %zu bytes\n", path, b->len);
		return -1;
	}
	b->slot = m;
	return 0;
}

/* This rank finished step; waits until every rank has (or has left). */
static int sync_step(const rb_sync *b, uint64_t step)
{
	atomic_store(sync_slot(b, b->rank), step);
	double t0 = mono_s();
	for (uint32_t r = 0; r < b->world; r++) {
		while (atomic_load(sync_slot(b, r)) < step) {
			if (mono_s() - t0 > SYNC_WAIT_S) {
				fprintf(stderr, "ckpt-rank-bench: rank %u did not reach step %" PRIu64 " in %.0f s\n", r, step,
				        SYNC_WAIT_S);
				return -1;
			}
			nanosleep(&(struct timespec){ 0, 100000 }, NULL);
		}
	}
	return 0;
}

/* Before the barrier of step: this rank says whether it sees FILE now. */
static void sync_mark_seen(const rb_sync *b, uint64_t step, const char *file)
{
	if (!atomic_load(sync_seen_slot(b, b->rank)) && access(file, F_OK) == 0)
		atomic_store(sync_seen_slot(b, b->rank), step);
}

/* After the barrier of step: whether some rank had seen the file by then.
 * Every rank gets the same answer (what each rank marked up to this step
 * was stored before its step, which the barrier waited for; a later mark
 * names a later step), so the whole job saves the same step; each rank
 * asking access() itself once made one rank save a step before the others
 * (a version that never commits). */
static int sync_any_seen(const rb_sync *b, uint64_t step)
{
	for (uint32_t r = 0; r < b->world; r++) {
		uint64_t v = atomic_load(sync_seen_slot(b, r));
		if (v && v <= step)
			return 1;
	}
	return 0;
}

/* Leaving: nobody waits for this rank any more. */
static void sync_leave(rb_sync *b)
{
	if (!b->slot)
		return;
	atomic_store(sync_slot(b, b->rank), SYNC_GONE);
	munmap((void *)b->slot, b->len);
	b->slot = NULL;
}

/* 0 once h is committed at LOCAL_MEM and LOCAL_DISK (those the context
 * writes), -EAGAIN before, or the error of a tier that failed. */
static int node_tiers(const ckpt_config *cfg, ckpt_handle *h)
{
	static const uint32_t order[] = { CKPT_TIER_LOCAL_MEM, CKPT_TIER_LOCAL_DISK };
	for (int i = 0; i < 2; i++) {
		if (!(cfg->tiers & order[i]))
			continue;
		ckpt_status st = { .size = sizeof(st) };
		int err = ckpt_handle_test(h, order[i], &st);
		if (err < 0)
			return err;
	}
	return 0;
}

static int run_train(const ckpt_config *cfg)
{
	ckpt_ctx *ctx;
	rb_sync bar = { 0 };
	regions_fill();
	if (o.sync && sync_open(&bar, o.sync, cfg->world_size, cfg->rank) < 0)
		return 1;
	if (ctx_open(cfg, &ctx) < 0) {
		sync_leave(&bar);
		return 1;
	}
	int err = ckpt_preempt_install(ctx, NULL, 0);
	if (err < 0) {
		fprintf(stderr, "ckpt-rank-bench: ckpt_preempt_install: %s\n", ckpt_strerror(err));
		sync_leave(&bar);
		ckpt_ctx_close(ctx);
		return 1;
	}
	printf("{\"kind\": \"started\", \"wall_ns\": %" PRIu64 "}\n", wall_ns());
	fflush(stdout);
	ckpt_handle *regular = NULL, *em = NULL;
	uint64_t em_step = 0;
	double node_done_s = 0;
	int ready = 0, rc = 1;
	for (uint64_t step = 1; step <= o.max_steps; step++) {
		usleep(o.step_ms * 1000u);
		regions_stamp(step);
		if (bar.slot && o.save_when)
			sync_mark_seen(&bar, step, o.save_when);
		if (bar.slot && sync_step(&bar, step) < 0)
			break;
		int a = ckpt_step(ctx, step);
		if (a < 0) {
			fprintf(stderr, "ckpt-rank-bench: ckpt_step: %s\n", ckpt_strerror(a));
			break;
		}
		/* The regular checkpoint: at --save-at, or the first step after
		 * it once the --save-when file exists (the script says the
		 * agents' pools are ready); with --sync, the first step at which
		 * any rank had seen it, the same step at every rank. */
		int go = !o.save_when || (bar.slot ? sync_any_seen(&bar, step) : access(o.save_when, F_OK) == 0);
		int regular_now = !regular && o.save_at && step >= o.save_at && go;
		if (regular_now || a == CKPT_STEP_SAVE) {
			ckpt_handle *h = NULL;
			uint64_t w0 = wall_ns();
			double t0 = mono_s();
			err = ckpt_save(ctx, step, CKPT_SAVE_DEFAULT, &h);
			double t1 = mono_s();
			if (err < 0) {
				fprintf(stderr, "ckpt-rank-bench: save of step %" PRIu64 ": %s\n", step, ckpt_strerror(err));
				break;
			}
			int emergency = a == CKPT_STEP_SAVE && !regular_now;
			printf("{\"kind\": \"save\", \"step\": %" PRIu64 ", \"emergency\": %s, \"wall_ns\": %" PRIu64 ", "
			       "\"stall_s\": %.6f}\n", step, emergency ? "true" : "false", w0, t1 - t0);
			fflush(stdout);
			if (emergency) {
				ckpt_handle_free(em);
				em = h;
				em_step = step;
			} else {
				ckpt_handle_free(regular);
				regular = h;
			}
		}
		/* Ready: the regular checkpoint is committed in every node's DRAM
		 * and disk, and its PEER_MEM result is known (committed, failed),
		 * or still unknown --peer-wait seconds after that. */
		if (regular && !ready) {
			err = node_tiers(cfg, regular);
			if (err == 0 && !node_done_s)
				node_done_s = mono_s();
			int peer = -EAGAIN;
			if (err == 0 && (cfg->tiers & CKPT_TIER_PEER_MEM)) {
				ckpt_status st = { .size = sizeof(st) };
				peer = ckpt_handle_test(regular, CKPT_TIER_PEER_MEM, &st);
			}
			if (err == 0 && (!(cfg->tiers & CKPT_TIER_PEER_MEM) || peer != -EAGAIN ||
			                 mono_s() - node_done_s > o.peer_wait_s)) {
				ready = 1;
				printf("{\"kind\": \"ready\", \"step\": %" PRIu64 ", \"wall_ns\": %" PRIu64 ", \"peer\": \"%s\"}\n",
				       step, wall_ns(), peer == 0 ? "committed" : peer == -EAGAIN ? "pending" : ckpt_strerror(peer));
				fflush(stdout);
			} else if (err < 0 && err != -EAGAIN) {
				fprintf(stderr, "ckpt-rank-bench: the regular checkpoint failed a tier: %s\n", ckpt_strerror(err));
				break;
			}
		}
		if (a == CKPT_STEP_EXIT) {
			printf("{\"kind\": \"exit\", \"step\": %" PRIu64 ", \"emergency_step\": %" PRIu64 ", \"wall_ns\": %" PRIu64
			       "}\n", step, em_step, wall_ns());
			fflush(stdout);
			rc = 0;
			break;
		}
	}
	sync_leave(&bar);
	if (rc)
		fprintf(stderr, "ckpt-rank-bench: the loop ended without EXIT\n");
	ckpt_handle_free(regular);
	ckpt_handle_free(em);
	if ((err = ckpt_ctx_close(ctx)) < 0) {
		fprintf(stderr, "ckpt-rank-bench: ckpt_ctx_close: %s\n", ckpt_strerror(err));
		rc = 1;
	}
	return rc;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: ckpt-rank-bench save    [--size 1G] [--regions 1] [--iters 5] [--warmup 1] [--first-version V]\n"
	        "                               [--state-file FILE] (the state: FILE's bytes, not --size)\n"
	        "       ckpt-rank-bench restore [--size 1G] [--regions 1] [--iters 5] [--version V] [--startup-ms 0]\n"
	        "       ckpt-rank-bench train   [--size 1G] [--regions 1] [--step-ms 20] [--save-at S] [--max-steps N]\n"
	        "                               [--peer-wait 10] [--sync FILE] [--save-when FILE]\n"
	        "options of all: [--timeout SECONDS] (default 600; then the process is killed)\n"
	        "Settings (job, rank, root, daemon, token, tiers) come from CKPT_* variables.\n"
	        "Prints one JSON object per line on stdout.\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "size", 1, 0, 's' }, { "regions", 1, 0, 'r' }, { "iters", 1, 0, 'i' }, { "warmup", 1, 0, 'w' },
		{ "first-version", 1, 0, 'f' }, { "version", 1, 0, 'v' }, { "step-ms", 1, 0, 'm' },
		{ "save-at", 1, 0, 'a' }, { "max-steps", 1, 0, 'x' }, { "timeout", 1, 0, 't' }, { "peer-wait", 1, 0, 'p' }, { "sync", 1, 0, 'S' }, { "save-when", 1, 0, 'W' },
		{ "startup-ms", 1, 0, 'u' }, { "state-file", 1, 0, 'F' },
		{ "help", 0, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	main_wall_ns = wall_ns();
	o = (rb_opts){ .bytes = 1ull << 30, .nregions = 1, .iters = 5, .warmup = 1, .first_version = 1,
	               .version = CKPT_LATEST, .step_ms = 20, .max_steps = 1000000, .timeout_s = 600, .peer_wait_s = 10 };
	if (argc < 2 || argv[1][0] == '-') {
		usage(argc > 1 && !strcmp(argv[1], "--help") ? stdout : stderr);
		return argc > 1 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	o.mode = argv[1];
	optind = 2;
	int c;
	uint64_t v = 0;
	const char *bad = NULL;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1 && !bad) {
		int ok = c == 'h' || c == 'S' || c == 'W' || c == 'F' || parse_size(optarg, &v) == 0;
		switch (c) {
		case 's': if (!ok || v < 4096) bad = "--size"; else o.bytes = v; break;
		case 'r': if (!ok || !v || v > MAX_REGIONS) bad = "--regions"; else o.nregions = (uint32_t)v; break;
		case 'i': if (!ok || !v || v > MAX_ITERS) bad = "--iters"; else o.iters = (uint32_t)v; break;
		case 'w': if (!ok || v > MAX_ITERS) bad = "--warmup"; else o.warmup = (uint32_t)v; break;
		case 'f': if (!ok || !v) bad = "--first-version"; else o.first_version = v; break;
		case 'v': if (!ok) bad = "--version"; else o.version = v; break;
		case 'm': if (!ok || !v || v > 60000) bad = "--step-ms"; else o.step_ms = (uint32_t)v; break;
		case 'a': if (!ok) bad = "--save-at"; else o.save_at = v; break;
		case 'x': if (!ok || !v) bad = "--max-steps"; else o.max_steps = v; break;
		case 't': if (!ok || !v || v > 86400) bad = "--timeout"; else o.timeout_s = (uint32_t)v; break;
		case 'p': if (!ok || v > 3600) bad = "--peer-wait"; else o.peer_wait_s = (uint32_t)v; break;
		case 'S': o.sync = optarg; break;
		case 'W': o.save_when = optarg; break;
		case 'F': o.state_file = optarg; break;
		case 'u': if (!ok || v > 600000) bad = "--startup-ms"; else o.startup_ms = (uint32_t)v; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (o.state_file && !bad) {
		struct stat sb;
		errno = 0;
		if (strcmp(o.mode, "save")) {
			bad = "--state-file (save only)";
		} else if (stat(o.state_file, &sb) < 0 || !S_ISREG(sb.st_mode)) {
			fprintf(stderr, "ckpt-rank-bench: --state-file %s: %s\n", o.state_file,
			        errno ? strerror(errno) : "not a regular file");
			return 2;
		} else {
			o.bytes = (uint64_t)sb.st_size;
		}
	}
	if (bad || optind != argc || o.bytes / o.nregions < 4096) {
		fprintf(stderr, "ckpt-rank-bench: bad %s\n", bad ? bad : "arguments");
		usage(stderr);
		return 2;
	}
	/* A rank that hangs (a daemon gone) must not hold the script forever. */
	alarm(o.timeout_s);

	ckpt_config cfg;
	int err = ckpt_config_init(&cfg);
	if (err < 0) {
		fprintf(stderr, "ckpt-rank-bench: configuration: %s\n", ckpt_strerror(err));
		return 1;
	}
	my_rank = cfg.rank;
	/* Measure the agent or nothing: no quiet fallback to disk alone. */
	if (cfg.daemon && *cfg.daemon)
		cfg.daemon_required = 1;
	/* Saves into LOCAL_MEM take no staging slot; restores from disk or a
	 * partner go through it (8 chunks in flight). */
	if (!getenv("CKPT_STAGING_BYTES"))
		cfg.staging_bytes = STAGING_DEFAULT;
	if (regions_alloc() < 0)
		return 1;
	int rc;
	if (!strcmp(o.mode, "save") || !strcmp(o.mode, "restore")) {
		size_t map;
		if (!o.state_file && !(dst = map_touched(o.bytes, &map))) {
			fprintf(stderr, "ckpt-rank-bench: cannot allocate the memcpy buffer: %s\n", strerror(errno));
			return 1;
		}
		rc = !strcmp(o.mode, "save") ? run_save(&cfg) : run_restore(&cfg);
	} else if (!strcmp(o.mode, "train")) {
		rc = run_train(&cfg);
	} else {
		usage(stderr);
		return 2;
	}
	return rc;
}
