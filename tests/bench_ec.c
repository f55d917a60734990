/* ckpt-ec-bench: the rs:K+M peer scheme's costs, each against the limit it
 * is judged by, measured in one run between the same two nodes
 * (processes on 127.0.0.1 and 127.0.0.2, libfabric as the peer tier uses
 * it: storage/fabric.h, tcp;ofi_rxm on loopback):
 *
 *   encode     ISA-L encode of K slices of a --size shard into M parity,
 *              one core, against a memcpy of the same bytes (best of iters)
 *   raw        fi_write and fi_read of --size bytes (the fabric's limit)
 *   protect    one node's part of protecting a version: its K slices
 *              fi_written to the holder of each of the M parity rows, the
 *              holder folding each into its row as it arrives
 *              (ckpt_ec_update); the same transfers with the fold stubbed
 *   wire       bytes this node put on the wire (RMA and control) / shard
 *   memory     DRAM per node for its shard and the parity it holds / shard
 *   rebuild    a lost node's shard rebuilt from K survivors' pieces, read
 *              with fi_read block by block, every block checksum-checked,
 *              decoded (format/ecgroup.c): shard bytes back per second and
 *              fabric bytes read per second, against raw fi_read
 *   reprotect  the lost node's M parity rows made again from K pieces of
 *              their stripes, against what partner copies need after a
 *              loss (two shard copies written: the lost node's own, and
 *              the one it held for another node)
 *
 *   ckpt-ec-bench [--size 256M] [--k 8] [--m 2] [--iters 3] [--rows]
 * --rows prints BENCH-ROW lines for tools/bench-all.sh. Exits 77 when no
 * fabric provider is available. */
#include "helpers.h"

#include "ckpt_kernels.h"
#include "ec.h"
#include "fabric.h"
#include "format/ecgroup.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_MS 60000
#define ITERS_MAX 20
#define NSTAGE 4     /* staging slots on a holder: slices in flight or folding */
#define RA_BLOCKS 16 /* read-ahead of a rebuild's fetches: blocks per fi_read */

typedef struct opts {
	uint64_t size;
	unsigned k, m, iters;
	int rows;
} opts;

/* What the passive side registered. */
typedef struct hello {
	int rc;
	char err[256], prov[64];
	ckpt_fab_remote stage, raw, arena;
	uint64_t lens[CKPT_EC_MAX_PIECES];
	uint64_t lost_sum; /* member 0's image, for the rebuild's check */
	uint64_t par_sum[CKPT_EC_MAX_PIECES]; /* member 0's parity rows */
} hello;

enum { CMD_FOLD = 1, CMD_STUB, CMD_RESET, CMD_QUIT };
typedef struct cmd {
	uint32_t op, t, d, slot;
	uint64_t len;
} cmd;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint8_t *abuf(uint64_t len)
{
	uint8_t *p = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	if (p)
		memset(p, 0, len); /* backed before it is registered or timed */
	return p;
}

static int full_io(int fd, void *buf, size_t len, int wr)
{
	for (size_t done = 0; done < len;) {
		ssize_t r = wr ? write(fd, (char *)buf + done, len - done) : read(fd, (char *)buf + done, len - done);
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* The group both sides agree on: member lengths differ a little, as ranks' shards do. */
static void group_lens(const opts *o, uint64_t *lens)
{
	for (unsigned i = 0; i < o->k + o->m; i++)
		lens[i] = o->size - 4099 * i;
}

static uint64_t arena_img(const ckpt_ecg *g, unsigned i)
{
	return (uint64_t)i * g->k * g->slice;
}

static uint64_t arena_par(const ckpt_ecg *g, unsigned s, unsigned t)
{
	return (uint64_t)g->n * g->k * g->slice + ((uint64_t)s * g->m + t) * g->slice;
}

/* ---------------------------------------------------------------- passive side */

static int passive_main(const opts *o, int sock)
{
	hello h = { 0 };
	ckpt_fab *f = NULL;
	ckpt_fab_mr *mr[3] = { 0 };
	ckpt_ec *e = NULL;
	ckpt_ecg g;
	group_lens(o, h.lens);
	h.rc = ckpt__ecg_init(&g, o->k, o->m, h.lens, h.err, sizeof(h.err));
	if (!h.rc)
		h.rc = ckpt_ec_new(o->k, o->m, &e, h.err, sizeof(h.err));
	uint64_t arena_len = (uint64_t)g.n * (g.k + g.m) * g.slice;
	uint8_t *stage = abuf(NSTAGE * g.slice), *raw = abuf(o->size), *arena = abuf(arena_len);
	uint8_t *par[CKPT_EC_MAX_PIECES] = { 0 };
	for (unsigned t = 0; t < o->m; t++)
		par[t] = abuf(g.slice);
	if (!stage || !raw || !arena)
		h.rc = -ENOMEM;
	uint64_t nb = ckpt__ecg_blocks(&g), *sums = calloc((size_t)g.n * g.n * nb, sizeof(uint64_t));
	if (!h.rc && sums) {
		/* The group as its holders would have built it. */
		for (unsigned i = 0; i < g.n; i++)
			t_fill(arena + arena_img(&g, i), h.lens[i], 77 + i);
		for (unsigned i = 0; i < g.n; i++)
			for (unsigned d = 0; d < g.k; d++) {
				unsigned s = ckpt__ecg_stripe(&g, i, d);
				const uint8_t *sl = arena + arena_img(&g, i) + d * g.slice;
				uint64_t have = ckpt__ecg_have(&g, i, d);
				for (unsigned t = 0; t < g.m; t++)
					ckpt_ec_update(e, t, d, have, sl, arena + arena_par(&g, s, t));
				for (uint64_t b = 0; b < nb; b++)
					sums[((uint64_t)s * g.n + d) * nb + b] = ckpt__ecg_block_sum(&g, sl, have, b);
			}
		for (unsigned s = 0; s < g.n; s++)
			for (unsigned t = 0; t < g.m; t++)
				for (uint64_t b = 0; b < nb; b++)
					sums[((uint64_t)s * g.n + g.k + t) * nb + b] =
						ckpt__ecg_block_sum(&g, arena + arena_par(&g, s, t), g.slice, b);
		h.lost_sum = ckpt_kern_checksum(arena, h.lens[0]);
		for (unsigned t = 0; t < g.m; t++)
			h.par_sum[t] = ckpt_kern_checksum(arena + arena_par(&g, (g.n - t) % g.n, t), g.slice);
	} else if (!h.rc) {
		h.rc = -ENOMEM;
	}
	if (!h.rc)
		h.rc = ckpt_fab_open(NULL, "127.0.0.1", 1, &f, h.err, sizeof(h.err));
	if (!h.rc && !(h.rc = ckpt_fab_mr_reg(f, stage, NSTAGE * g.slice, CKPT_FAB_REMOTE_WRITE, &mr[0], h.err, sizeof(h.err))))
		h.rc = ckpt_fab_mr_remote(f, mr[0], &h.stage);
	if (!h.rc && !(h.rc = ckpt_fab_mr_reg(f, raw, o->size, CKPT_FAB_REMOTE_WRITE | CKPT_FAB_REMOTE_READ, &mr[1],
	                                      h.err, sizeof(h.err))))
		h.rc = ckpt_fab_mr_remote(f, mr[1], &h.raw);
	if (!h.rc && !(h.rc = ckpt_fab_mr_reg(f, arena, arena_len, CKPT_FAB_REMOTE_READ, &mr[2], h.err, sizeof(h.err))))
		h.rc = ckpt_fab_mr_remote(f, mr[2], &h.arena);
	if (f)
		snprintf(h.prov, sizeof(h.prov), "%s", ckpt_fab_provider_name(f));
	int ok = full_io(sock, &h, sizeof(h), 1) == 0 && (h.rc || full_io(sock, sums, (size_t)g.n * g.n * nb * 8, 1) == 0);
	/* Serve folds until told to stop. */
	cmd c;
	while (ok && !h.rc && full_io(sock, &c, sizeof(c), 0) == 0 && c.op != CMD_QUIT) {
		/* The ack says how long the fold took (its CPU cost on this side). */
		float took = 0;
		if (c.op == CMD_FOLD) {
			double f0 = now_s();
			ckpt_ec_update(e, c.t, c.d, c.len, stage + (uint64_t)c.slot * g.slice, par[c.t]);
			took = (float)(now_s() - f0);
		}
		else if (c.op == CMD_RESET)
			for (unsigned t = 0; t < o->m; t++)
				memset(par[t], 0, g.slice);
		ok = full_io(sock, &took, sizeof(took), 1) == 0;
	}
	for (int i = 0; i < 3; i++)
		ckpt_fab_mr_close(mr[i]);
	ckpt_fab_close(f);
	free(stage);
	free(raw);
	free(arena);
	free(sums);
	for (unsigned t = 0; t < o->m; t++)
		free(par[t]);
	ckpt_ec_free(e);
	return ok && !h.rc ? 0 : 1;
}

/* ---------------------------------------------------------------- active side */

typedef struct act {
	const opts *o;
	int sock;
	hello h;
	ckpt_ecg g;
	ckpt_ec *e;
	ckpt_fab *f;
	ckpt_fab_mr *mr_img, *mr_cache;
	uint8_t *img, *cache;
	uint64_t *sums, nb;
	unsigned lost;
	/* Read-ahead: per piece index two windows of RA_BLOCKS blocks; while
	 * the rebuild decodes one, a reader thread (a fab of its own) fetches
	 * the piece's next. */
	struct win {
		unsigned s;
		uint64_t b0, n;
		int state; /* W_EMPTY, W_READING, W_READY, W_FAILED */
		uint8_t *buf;
	} win[CKPT_EC_MAX_PIECES][2];
	ckpt_fab *f2;
	ckpt_fab_mr *mr_cache2;
	pthread_t reader;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int jobs[2 * CKPT_EC_MAX_PIECES][2]; /* windows to read, in order: (piece, window) */
	unsigned jhead, jn;
	int stop;
	uint64_t read_bytes;
	int reader_on;
	double fold_s; /* the holder's time folding slices, summed over protects */
	char err[512];
} act;

static int xfer_p(act *a, int op, ckpt_fab_mr *mr, void *buf, uint64_t len, const ckpt_fab_remote *r, uint64_t roff,
                  size_t piece, unsigned depth)
{
	int rc = ckpt_fab_xfer(a->f, op, mr, buf, len, r, roff, piece, depth, TIMEOUT_MS, a->err, sizeof(a->err));
	if (rc)
		fprintf(stderr, "ckpt-ec-bench: fi_%s: %s\n", op == CKPT_FAB_WRITE ? "write" : "read", a->err);
	return rc;
}

/* The fabric's defaults (4 MiB operations, 8 in flight), as the peer tier uses them. */
static int xfer(act *a, int op, ckpt_fab_mr *mr, void *buf, uint64_t len, const ckpt_fab_remote *r, uint64_t roff)
{
	return xfer_p(a, op, mr, buf, len, r, roff, 0, 0);
}

static int send_cmd(act *a, uint32_t op, uint32_t t, uint32_t d, uint32_t slot, uint64_t len, uint64_t *wire)
{
	cmd c = { op, t, d, slot, len };
	*wire += sizeof(c);
	return full_io(a->sock, &c, sizeof(c), 1);
}

static int wait_ack(act *a, uint64_t *wire)
{
	float took;
	*wire += sizeof(took);
	int rc = full_io(a->sock, &took, sizeof(took), 0);
	a->fold_s += took;
	return rc;
}

/* One protect: every slice to each parity row's holder, folded or not.
 * NSTAGE staging slots: the next slices are written while the last ones fold. */
static int protect(act *a, int fold, double *secs, uint64_t *wire)
{
	const ckpt_ecg *g = &a->g;
	uint64_t w = 0;
	int rc = send_cmd(a, CMD_RESET, 0, 0, 0, 0, &w) || wait_ack(a, &w);
	unsigned out = 0, n = 0;
	double t0 = now_s();
	for (unsigned t = 0; t < g->m && !rc; t++)
		for (unsigned d = 0; d < g->k && !rc; d++, n++) {
			uint64_t have = ckpt__ecg_have(g, a->lost, d);
			if (out == NSTAGE) {
				rc = wait_ack(a, &w);
				out--;
			}
			if (!rc)
				rc = xfer(a, CKPT_FAB_WRITE, a->mr_img, a->img + d * g->slice, have, &a->h.stage, (n % NSTAGE) * g->slice);
			w += have;
			if (!rc)
				rc = send_cmd(a, fold ? CMD_FOLD : CMD_STUB, t, d, n % NSTAGE, have, &w);
			out++;
		}
	while (!rc && out--)
		rc = wait_ack(a, &w);
	*secs = now_s() - t0;
	*wire = w;
	return rc;
}

enum { W_EMPTY, W_READING, W_READY, W_FAILED };

/* Where window w of piece p (stripe s, blocks b0..) lies in the arena, and its length. */
static void win_span(const act *a, unsigned s, unsigned p, uint64_t b0, uint64_t *off, uint64_t *len, uint64_t *n)
{
	const ckpt_ecg *g = &a->g;
	uint64_t blk = CKPT_ECG_BLOCK;
	*n = a->nb - b0 < RA_BLOCKS ? a->nb - b0 : RA_BLOCKS;
	uint64_t last = b0 + *n - 1;
	*len = (*n - 1) * blk + (g->slice - last * blk < blk ? g->slice - last * blk : blk);
	unsigned holder = ckpt__ecg_holder(g, s, p);
	*off = (p < g->k ? arena_img(g, holder) + p * g->slice : arena_par(g, s, p - g->k)) + b0 * blk;
}

static void *reader_main(void *arg)
{
	act *a = arg;
	char err[300];
	pthread_mutex_lock(&a->mu);
	for (;;) {
		while (!a->stop && !a->jn)
			pthread_cond_wait(&a->cv, &a->mu);
		if (a->stop)
			break;
		int p = a->jobs[a->jhead][0], w = a->jobs[a->jhead][1];
		a->jhead = (a->jhead + 1) % (2 * CKPT_EC_MAX_PIECES);
		a->jn--;
		struct win *x = &a->win[p][w];
		unsigned s = x->s;
		uint64_t b0 = x->b0, off, len, n;
		pthread_mutex_unlock(&a->mu);
		win_span(a, s, (unsigned)p, b0, &off, &len, &n);
		int rc = ckpt_fab_xfer(a->f2, CKPT_FAB_READ, a->mr_cache2, x->buf, len, &a->h.arena, off, 0, 0, TIMEOUT_MS,
		                       err, sizeof(err));
		pthread_mutex_lock(&a->mu);
		x->state = rc ? W_FAILED : W_READY;
		a->read_bytes += rc ? 0 : len;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/* With mu: piece p's next window after window w, to the reader (when it is idle). */
static void prefetch(act *a, unsigned p, int w)
{
	struct win *cur = &a->win[p][w], *nx = &a->win[p][!w];
	uint64_t b0 = cur->b0 + cur->n;
	unsigned s = cur->s;
	if (b0 >= a->nb) {
		/* The piece is done: the same piece of the next stripe the rebuild
		 * goes to (ecgroup.h: the lost member's slices in order). */
		unsigned d = 0;
		while (d < a->g.k && ckpt__ecg_stripe(&a->g, a->lost, d) != s)
			d++;
		if (d + 1 >= a->g.k || p == d + 1)
			return;
		s = ckpt__ecg_stripe(&a->g, a->lost, d + 1);
		b0 = 0;
	}
	if (a->jn == 2 * CKPT_EC_MAX_PIECES || nx->state == W_READING || (nx->state == W_READY && nx->s == s && nx->b0 == b0))
		return;
	*nx = (struct win){ s, b0, a->nb - b0 < RA_BLOCKS ? a->nb - b0 : RA_BLOCKS, W_READING, nx->buf };
	unsigned tail = (a->jhead + a->jn++) % (2 * CKPT_EC_MAX_PIECES);
	a->jobs[tail][0] = (int)p;
	a->jobs[tail][1] = !w;
	pthread_cond_broadcast(&a->cv);
}

static int fetch(void *arg, unsigned s, unsigned p, uint64_t b, uint8_t *buf, const uint8_t **data,
                    uint64_t *sum, char *why, size_t cap)
{
	act *a = arg;
	const ckpt_ecg *g = &a->g;
	unsigned holder = ckpt__ecg_holder(g, s, p);
	if (holder == a->lost) {
		snprintf(why, cap, "member %u is lost", holder);
		return -EHOSTDOWN;
	}
	uint64_t blk = CKPT_ECG_BLOCK, bl = g->slice - b * blk < blk ? g->slice - b * blk : blk;
	pthread_mutex_lock(&a->mu);
	int w = -1;
	for (int i = 0; i < 2 && w < 0; i++) {
		struct win *x = &a->win[p][i];
		if (x->state != W_EMPTY && x->s == s && b >= x->b0 && b < x->b0 + x->n)
			w = i;
	}
	if (w >= 0)
		while (a->win[p][w].state == W_READING)
			pthread_cond_wait(&a->cv, &a->mu);
	if (w < 0 || a->win[p][w].state == W_FAILED) {
		/* Not read ahead: read it here, into the window the reader is not filling. */
		w = a->win[p][0].state == W_READING ? 1 : 0;
		struct win *x = &a->win[p][w];
		uint64_t off, len, n;
		win_span(a, s, p, b, &off, &len, &n);
		pthread_mutex_unlock(&a->mu);
		if (xfer(a, CKPT_FAB_READ, a->mr_cache, x->buf, len, &a->h.arena, off))
			return -EIO;
		pthread_mutex_lock(&a->mu);
		*x = (struct win){ s, b, n, W_READY, x->buf };
		a->read_bytes += len;
	}
	struct win *x = &a->win[p][w];
	(void)buf, (void)bl;
	*data = x->buf + (b - x->b0) * blk; /* no copy: the window stays until p's next fetch moves past it */
	prefetch(a, p, w);
	pthread_mutex_unlock(&a->mu);
	*sum = a->sums[((uint64_t)s * g->n + p) * a->nb + b];
	return 0;
}

/* Between runs: nothing in flight, nothing held. */
static void ra_reset(act *a)
{
	pthread_mutex_lock(&a->mu);
	for (unsigned p = 0; p < CKPT_EC_MAX_PIECES; p++)
		for (int i = 0; i < 2; i++) {
			while (a->win[p][i].state == W_READING)
				pthread_cond_wait(&a->cv, &a->mu);
			a->win[p][i].state = W_EMPTY;
		}
	a->read_bytes = 0;
	pthread_mutex_unlock(&a->mu);
}

static void row(const opts *o, const char *fig, double v, const char *fmt, const char *target)
{
	if (o->rows)
		printf("BENCH-ROW {\"figure\": \"rs:%u+%u, %llu MiB shard: %s\", \"value\": %.4f, \"format\": \"%s\", "
		       "\"target\": \"%s\"}\n",
		       o->k, o->m, (unsigned long long)(o->size >> 20), fig, v, fmt, target);
}

static int active_main(const opts *o, act *a)
{
	const ckpt_ecg *g = &a->g;
	const unsigned k = o->k, m = o->m, it = o->iters;
	double t1[ITERS_MAX], t2[ITERS_MAX], t3[ITERS_MAX];
	int rc = 1;
	uint8_t *dst = abuf(o->size), *par = abuf(g->slice), *copy = abuf(o->size);
	uint8_t *parity[CKPT_EC_MAX_PIECES];
	for (unsigned t = 0; t < m; t++)
		parity[t] = abuf(g->slice);
	a->img = abuf(k * g->slice);
	a->cache = abuf(2ull * g->n * RA_BLOCKS * CKPT_ECG_BLOCK);
	if (!dst || !par || !copy || !a->img || !a->cache)
		return 1;
	t_fill(a->img, g->len[0], 77);
	/* encode against memcpy, one core */
	const uint8_t *data[CKPT_EC_MAX_PIECES];
	for (unsigned d = 0; d < k; d++)
		data[d] = a->img + d * g->slice;
	for (unsigned i = 0; i < it; i++) {
		double s0 = now_s();
		ckpt_ec_encode(a->e, g->slice, data, parity);
		t1[i] = now_s() - s0;
		s0 = now_s();
		memcpy(copy, a->img, k * g->slice < o->size ? k * g->slice : o->size);
		t2[i] = now_s() - s0;
	}
	qsort(t1, it, sizeof(double), cmp_d);
	qsort(t2, it, sizeof(double), cmp_d);
	double enc = (double)k * g->slice / t1[0] / 1e9, mc = (double)(k * g->slice < o->size ? k * g->slice : o->size) / t2[0] / 1e9;
	/* the fabric */
	if (ckpt_fab_open(a->h.prov, "127.0.0.2", 0, &a->f, a->err, sizeof(a->err)) ||
	    ckpt_fab_mr_reg(a->f, a->img, k * g->slice, CKPT_FAB_LOCAL, &a->mr_img, a->err, sizeof(a->err)) ||
	    ckpt_fab_mr_reg(a->f, a->cache, 2ull * g->n * RA_BLOCKS * CKPT_ECG_BLOCK, CKPT_FAB_LOCAL, &a->mr_cache,
	                    a->err, sizeof(a->err)) ||
	    ckpt_fab_open(a->h.prov, "127.0.0.2", 0, &a->f2, a->err, sizeof(a->err)) ||
	    ckpt_fab_mr_reg(a->f2, a->cache, 2ull * g->n * RA_BLOCKS * CKPT_ECG_BLOCK, CKPT_FAB_LOCAL, &a->mr_cache2,
	                    a->err, sizeof(a->err))) {
		fprintf(stderr, "ckpt-ec-bench: fabric: %s\n", a->err);
		return 1;
	}
	for (unsigned p = 0; p < g->n; p++)
		for (int i = 0; i < 2; i++)
			a->win[p][i].buf = a->cache + ((uint64_t)p * 2 + i) * RA_BLOCKS * CKPT_ECG_BLOCK;
	if (pthread_create(&a->reader, NULL, reader_main, a)) {
		fprintf(stderr, "ckpt-ec-bench: no reader thread\n");
		return 1;
	}
	a->reader_on = 1;
	for (unsigned i = 0; i < it; i++) {
		double s0 = now_s();
		if (xfer(a, CKPT_FAB_WRITE, a->mr_img, a->img, o->size, &a->h.raw, 0))
			return 1;
		t1[i] = now_s() - s0;
		s0 = now_s();
		if (xfer(a, CKPT_FAB_READ, a->mr_img, a->img, o->size, &a->h.raw, 0))
			return 1;
		t2[i] = now_s() - s0;
	}
	t_fill(a->img, g->len[0], 77); /* the read brought back what the write sent, but be sure */
	double raw_w = (double)o->size / median(t1, it) / 1e9, raw_r = (double)o->size / median(t2, it) / 1e9;
	/* protect, folded and stubbed, alternated */
	uint64_t wire = 0;
	a->fold_s = 0;
	for (unsigned i = 0; i < it; i++) {
		if (protect(a, 1, &t1[i], &wire) || protect(a, 0, &t2[i], &wire))
			return 1;
	}
	double fold_each = a->fold_s / it;
	double p_fold = median(t1, it), p_stub = median(t2, it);
	/* rebuild of member 0 and its parity rows; partner re-protection: two shard copies */
	double rb[ITERS_MAX], rr[ITERS_MAX], pair[ITERS_MAX];
	uint64_t rb_read = 0;
	for (unsigned i = 0; i < it; i++) {
		char why[600];
		/* A raw read just before each rebuild: the load on a shared machine
		 * moves within seconds, so the ratio is taken pair by pair. */
		double s0 = now_s();
		if (xfer(a, CKPT_FAB_READ, a->mr_img, a->img, o->size, &a->h.raw, 0))
			return 1;
		rr[i] = (double)o->size / (now_s() - s0) / 1e9;
		ra_reset(a);
		s0 = now_s();
		if (ckpt__ecg_rebuild(g, a->e, 0, fetch, a, NULL, dst, why, sizeof(why)) < 0) {
			fprintf(stderr, "ckpt-ec-bench: rebuild: %s\n", why);
			return 1;
		}
		rb[i] = now_s() - s0;
		rb_read = a->read_bytes;
		pair[i] = (double)rb_read / rb[i] / 1e9 / rr[i];
		if (ckpt_kern_checksum(dst, g->len[0]) != a->h.lost_sum) {
			fprintf(stderr, "ckpt-ec-bench: the rebuilt shard differs from the lost one\n");
			return 1;
		}
		ra_reset(a);
		s0 = now_s();
		for (unsigned t = 0; t < m; t++) {
			if (ckpt__ecg_rebuild_parity(g, a->e, 0, t, fetch, a, NULL, par, why, sizeof(why)) < 0) {
				fprintf(stderr, "ckpt-ec-bench: re-protect: %s\n", why);
				return 1;
			}
			if (ckpt_kern_checksum(par, g->slice) != a->h.par_sum[t]) {
				fprintf(stderr, "ckpt-ec-bench: parity row %u made again differs\n", t);
				return 1;
			}
		}
		t3[i] = now_s() - s0;
		s0 = now_s();
		for (int c = 0; c < 2; c++)
			if (xfer(a, CKPT_FAB_WRITE, a->mr_img, a->img, o->size, &a->h.raw, 0))
				return 1;
		t1[i] = now_s() - s0;
	}
	double t_rb = median(rb, it), t_rp = median(t3, it), t_pp = median(t1, it);
	double mem = ((double)g->len[0] + (double)m * g->slice) / (double)g->len[0];
	double wire_x = (double)wire / (double)g->len[0];
	double back = (double)g->len[0] / t_rb / 1e9, readbw = (double)rb_read / t_rb / 1e9, paired = median(pair, it);
	printf("provider %s, rs:%u+%u, shard %llu bytes, slice %llu, %u iterations\n", a->h.prov, k, m,
	       (unsigned long long)g->len[0], (unsigned long long)g->slice, it);
	printf("encode %.2f GB/s of data (one core), memcpy %.2f GB/s: %.2f\n", enc, mc, enc / mc);
	printf("raw fabric: write %.3f GB/s, read %.3f GB/s (median)\n", raw_w, raw_r);
	printf("protect (this node's slices to %u holders, folded as they arrive): %.3f s; transfers alone %.3f s: %.3f\n",
	       m, p_fold, p_stub, p_fold / p_stub);
	printf("  the holder's folds took %.3f s of it (ISA-L ec_encode_data_update, %.2f GB/s)\n", fold_each,
	       (double)m * g->len[0] / fold_each / 1e9);
	printf("wire bytes sent per node: %.3f x the shard (RMA %llu + control)\n", wire_x,
	       (unsigned long long)((uint64_t)m * g->len[0]));
	printf("DRAM per node: %.3f x the shard (partner copies: 2.000)\n", mem);
	printf("rebuild of a lost shard: %.3f s: %.3f GB/s of shard, %.3f GB/s read (%llu bytes); raw fi_read "
	       "%.3f GB/s: %.3f, %.3f\n",
	       t_rb, back, readbw, (unsigned long long)rb_read, raw_r, back / raw_r, readbw / raw_r);
	printf("rebuild: fabric bytes read per s / a raw fi_read just before it: %.3f (median of pairs)\n", paired);
	printf("re-protection after a loss: rs %.3f s (its %u parity rows made again), partner copies %.3f s (two "
	       "shard copies): %.3f\n",
	       t_rp, m, t_pp, t_rp / t_pp);
	char mt[32];
	snprintf(mt, sizeof(mt), "<= %.3f", 1.0 + (double)o->m / o->k + 0.001);
	row(o, "DRAM per node / shard (partner copies: 2.0)", mem, "%.3f", mt);
	row(o, "encode GB/s / memcpy GB/s (one core)", enc / mc, "%.2f", ">= 0.80");
	row(o, "protect time / the same transfers without the arithmetic", p_fold / p_stub, "%.3f", "<= 1.10");
	char wt[32];
	snprintf(wt, sizeof(wt), "<= %.2f", o->m + 0.05);
	row(o, "wire bytes sent per node / shard", wire_x, "%.3f", wt);
	row(o, "rebuild: fabric bytes read per s / raw fi_read", readbw / raw_r, "%.2f", ">= 0.80");
	row(o, "rebuild: fabric bytes read per s / a raw fi_read just before it (median of pairs)", paired, "%.2f", "");
	row(o, "rebuild: shard bytes back per s / raw fi_read", back / raw_r, "%.3f", "");
	row(o, "re-protection after a loss / partner copies' (two shard copies)", t_rp / t_pp, "%.2f", "< 1.00");
	rc = 0;
	free(dst);
	free(par);
	free(copy);
	for (unsigned t = 0; t < m; t++)
		free(parity[t]);
	return rc;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	int sh = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
	if (sh)
		end++;
	return *end || !v ? 0 : (uint64_t)v << sh;
}

int main(int argc, char **argv)
{
	opts o = { .size = 256ull << 20, .k = 8, .m = 2, .iters = 3 };
	static const struct option lo[] = { { "size", 1, 0, 's' }, { "k", 1, 0, 'k' }, { "m", 1, 0, 'm' },
		                            { "iters", 1, 0, 'i' }, { "rows", 0, 0, 'r' }, { 0, 0, 0, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1)
		switch (c) {
		case 's': o.size = parse_size(optarg); break;
		case 'k': o.k = (unsigned)atoi(optarg); break;
		case 'm': o.m = (unsigned)atoi(optarg); break;
		case 'i': o.iters = (unsigned)atoi(optarg); break;
		case 'r': o.rows = 1; break;
		default: o.size = 0;
		}
	if (optind != argc || o.size < (1u << 20) || o.k < 1 || o.m < 1 || o.k + o.m > 16 || o.iters < 1 ||
	    o.iters > ITERS_MAX) {
		fprintf(stderr, "usage: ckpt-ec-bench [--size 256M (>= 1M)] [--k 8] [--m 2] [--iters 3 (<= %d)] [--rows]\n",
		        ITERS_MAX);
		return 2;
	}
	setenv("FI_TCP_IFACE", "lo", 0); /* loopback: tcp must not pick another NIC */
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	pid_t pid = fork(); /* before either side touches libfabric */
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(sv[0]);
		_exit(passive_main(&o, sv[1]));
	}
	close(sv[1]);
	act a = { .o = &o, .sock = sv[0], .lost = 0 };
	pthread_mutex_init(&a.mu, NULL);
	pthread_cond_init(&a.cv, NULL);
	int rc = 1;
	char why[200];
	group_lens(&o, a.g.len);
	if (full_io(a.sock, &a.h, sizeof(a.h), 0) < 0) {
		fprintf(stderr, "ckpt-ec-bench: the passive side did not answer\n");
	} else if (a.h.rc) {
		fprintf(stderr, "ckpt-ec-bench: %s: %s\n", a.h.rc == -ENODATA ? "skipped" : "passive side", a.h.err);
		rc = a.h.rc == -ENODATA ? 77 : 1;
	} else if (ckpt__ecg_init(&a.g, o.k, o.m, a.h.lens, why, sizeof(why)) == 0 &&
	           ckpt_ec_new(o.k, o.m, &a.e, why, sizeof(why)) == 0) {
		a.nb = ckpt__ecg_blocks(&a.g);
		size_t ns = (size_t)a.g.n * a.g.n * a.nb;
		a.sums = calloc(ns, sizeof(uint64_t));
		if (a.sums && full_io(a.sock, a.sums, ns * 8, 0) == 0)
			rc = active_main(&o, &a);
	}
	uint64_t w = 0;
	if (send_cmd(&a, CMD_QUIT, 0, 0, 0, 0, &w))
		kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	if (a.reader_on) {
		pthread_mutex_lock(&a.mu);
		a.stop = 1;
		pthread_cond_broadcast(&a.cv);
		pthread_mutex_unlock(&a.mu);
		pthread_join(a.reader, NULL);
	}
	ckpt_fab_mr_close(a.mr_cache2);
	ckpt_fab_close(a.f2);
	ckpt_fab_mr_close(a.mr_img);
	ckpt_fab_mr_close(a.mr_cache);
	ckpt_fab_close(a.f);
	ckpt_ec_free(a.e);
	free(a.img);
	free(a.cache);
	free(a.sums);
	return rc;
}
