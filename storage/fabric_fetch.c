/* ckpt_fab_fetch (fabric.h): many pieces of one remote region read with
 * many reads in flight, each piece handed to the caller's function as soon
 * as it is complete while the later ones are still on the wire.
 *
 *   caller's thread ── posts reads (up to depth), reaps completions; a piece
 *                      whose last read completed goes to the queue
 *   landed threads  ── take pieces off the queue, call landed, give bounce
 *                      buffers back
 * With threads = 0 the caller's thread calls landed itself between reaps. */
#include "fabric_int.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FETCH_DEPTH_DEFAULT 16u
#define FETCH_THREADS_MAX 16u
#define FETCH_WAIT_BOUNCE_MS 2 /* how often a caller short of bounce buffers looks again */

typedef struct fetch {
	ckpt_fab *f;
	const ckpt_fab_remote *r;
	const ckpt_fab_piece *pc;
	size_t n;
	ckpt_fab_landed_fn landed;
	void *arg;
	fi_addr_t dest;
	size_t op_bytes;
	unsigned depth, inflight;
	size_t next, next_off;  /* posting cursor: piece, offset within it */
	size_t *left;           /* bytes of each piece not yet landed */
	uint8_t **at;           /* where each piece lands */
	int *bslot;             /* its bounce buffer, or -1 */
	/* with mu */
	pthread_mutex_t mu;
	pthread_cond_t work_cv, free_cv;
	size_t *q, qhead, qtail; /* pieces landed, for the threads */
	int *bfree;
	unsigned nfree;
	size_t finished;        /* pieces whose landed call returned */
	int closing;            /* no more pieces will be queued */
	int err;                /* the first landed error */
	int fab_err;            /* a fabric error: landed is not called any more */
} fetch;

/* With mu: piece i's landed call, and its bounce buffer back. */
static void finish_locked(fetch *x, size_t i)
{
	if (x->bslot[i] >= 0)
		x->bfree[x->nfree++] = x->bslot[i];
	x->finished++;
	pthread_cond_broadcast(&x->free_cv);
}

/* Calls landed for piece i unless the fetch failed already. */
static void run_landed(fetch *x, size_t i)
{
	pthread_mutex_lock(&x->mu);
	int skip = x->err || x->fab_err;
	pthread_mutex_unlock(&x->mu);
	int r = skip ? 0 : x->landed(x->arg, i, x->at[i], x->pc[i].len);
	pthread_mutex_lock(&x->mu);
	if (r < 0 && !x->err)
		x->err = r;
	finish_locked(x, i);
	pthread_mutex_unlock(&x->mu);
}

static void *landed_main(void *arg)
{
	fetch *x = arg;
	pthread_mutex_lock(&x->mu);
	for (;;) {
		while (x->qhead == x->qtail && !x->closing)
			pthread_cond_wait(&x->work_cv, &x->mu);
		if (x->qhead == x->qtail)
			break;
		size_t i = x->q[x->qhead++];
		pthread_mutex_unlock(&x->mu);
		run_landed(x, i);
		pthread_mutex_lock(&x->mu);
	}
	pthread_mutex_unlock(&x->mu);
	return NULL;
}

/* Piece i is complete: to the threads, or landed right here. */
static void deliver(fetch *x, size_t i, unsigned threads)
{
	if (!threads) {
		run_landed(x, i);
		return;
	}
	pthread_mutex_lock(&x->mu);
	x->q[x->qtail++] = i;
	pthread_cond_signal(&x->work_cv);
	pthread_mutex_unlock(&x->mu);
}

/* Gives the next piece its landing place. 0, or 1 when it needs a bounce
 * buffer and none is free. */
static int place(fetch *x, const ckpt_fab_fetch_opts *o)
{
	size_t i = x->next;
	if (x->pc[i].buf) {
		x->at[i] = x->pc[i].buf;
		return 0;
	}
	pthread_mutex_lock(&x->mu);
	int b = x->nfree ? x->bfree[--x->nfree] : -1;
	pthread_mutex_unlock(&x->mu);
	if (b < 0)
		return 1;
	x->bslot[i] = b;
	x->at[i] = o->bounce[b];
	return 0;
}

/* Posts reads while there is room. Returns 0, 1 when short of a bounce
 * buffer, or a negative error. */
static int post_some(fetch *x, const ckpt_fab_fetch_opts *o, unsigned threads, char *err, size_t cap)
{
	ckpt_fab *f = x->f;
	while (x->next < x->n && x->inflight < x->depth) {
		const ckpt_fab_piece *p = &x->pc[x->next];
		if (x->next_off == 0) {
			if (place(x, o))
				return 1;
			x->left[x->next] = p->len;
			if (p->len == 0) {
				deliver(x, x->next++, threads);
				continue;
			}
		}
		size_t n = p->len - x->next_off < x->op_bytes ? p->len - x->next_off : x->op_bytes;
		struct fab_slot *s = f->free_slots;
		void *desc = p->buf ? (p->mr && (f->mr_mode & FI_MR_LOCAL) ? fi_mr_desc(p->mr->mr) : NULL)
		                    : (o->bounce_mr && (f->mr_mode & FI_MR_LOCAL) ? fi_mr_desc(o->bounce_mr->mr) : NULL);
		struct iovec iov = { x->at[x->next] + x->next_off, n };
		struct fi_rma_iov rma = { .addr = x->r->base + p->roff + x->next_off, .len = n, .key = x->r->key };
		struct fi_msg_rma msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = x->dest,
		                          .rma_iov = &rma, .rma_iov_count = 1, .context = &s->ctx };
		ssize_t rc = fi_readmsg(f->ep, &msg, FI_COMPLETION);
		if (rc == -FI_EAGAIN)
			return 0;
		if (rc)
			return ckpt__fab_fail(err, cap, ckpt__fab_errno(rc), "READ of piece %zu (%zu bytes at offset %llu): "
			                      "fi_readmsg: %s", x->next, p->len, (unsigned long long)p->roff,
			                      ckpt__fab_strerror((int)-rc));
		f->free_slots = s->next_free;
		s->len = n;
		s->piece = x->next;
		x->inflight++;
		x->next_off += n;
		if (x->next_off == p->len) {
			x->next++;
			x->next_off = 0;
		}
	}
	return 0;
}

/* Reads completions, waiting up to wait_ms. Returns how many, or an error. */
static int reap(fetch *x, int wait_ms, unsigned threads, char *err, size_t cap)
{
	ckpt_fab *f = x->f;
	struct fi_cq_entry ev[FAB_CQ_BATCH];
	ssize_t n = f->cq_wait && wait_ms > 0 ? fi_cq_sread(f->cq, ev, FAB_CQ_BATCH, NULL, wait_ms)
	                                      : fi_cq_read(f->cq, ev, FAB_CQ_BATCH);
	if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT)
		return 0;
	if (n == -FI_EAVAIL) {
		char what[160];
		snprintf(what, sizeof(what), "READ of a piece of a fetch (%s)", f->info->fabric_attr->prov_name);
		return ckpt__fab_cq_error(f, what, err, cap);
	}
	if (n < 0)
		return ckpt__fab_fi_fail(err, cap, n, "fi_cq_read");
	for (ssize_t k = 0; k < n; k++) {
		struct fab_slot *s = ev[k].op_context;
		size_t i = s->piece;
		x->inflight--;
		x->left[i] -= s->len;
		s->next_free = f->free_slots;
		f->free_slots = s;
		if (x->left[i] == 0)
			deliver(x, i, threads);
	}
	return (int)n;
}

static int check_args(ckpt_fab *f, const ckpt_fab_remote *r, const ckpt_fab_piece *pc, size_t n,
                      const ckpt_fab_fetch_opts *o, ckpt_fab_landed_fn landed, char *err, size_t cap)
{
	if (!f || !r || (n && !pc) || !o || o->size < sizeof(*o) || !landed || o->threads > FETCH_THREADS_MAX)
		return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_fetch: bad arguments");
	if (f->passive)
		return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_fetch: a passive fab does not initiate");
	if (r->addr_len == 0 || r->addr_len > CKPT_FAB_ADDR_MAX)
		return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_fetch: bad remote region");
	int need = (f->mr_mode & FI_MR_LOCAL) != 0;
	if (o->nbounce && (!o->bounce || !o->bounce_bytes || (need && !o->bounce_mr)))
		return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_fetch: bounce buffers without memory or region");
	for (unsigned b = 0; b < o->nbounce; b++) {
		const uint8_t *bb = o->bounce[b];
		if (!bb || (o->bounce_mr && (o->bounce_mr->f != f || bb < o->bounce_mr->buf ||
		                             o->bounce_bytes > o->bounce_mr->len ||
		                             (size_t)(bb - o->bounce_mr->buf) > o->bounce_mr->len - o->bounce_bytes)))
			return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_fetch: bounce buffer %u outside its region", b);
	}
	for (size_t i = 0; i < n; i++) {
		const ckpt_fab_piece *p = &pc[i];
		const uint8_t *b = p->buf;
		if (p->roff + p->len < p->roff)
			return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_fetch: piece %zu wraps", i);
		if (!b && (p->len > o->bounce_bytes || !o->nbounce))
			return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_fetch: piece %zu (%zu bytes) has no buffer and "
			                      "no bounce buffer holds it", i, p->len);
		if (b && p->mr && (p->mr->f != f || !(p->mr->access & CKPT_FAB_LOCAL) || b < p->mr->buf ||
		                   p->len > p->mr->len || (size_t)(b - p->mr->buf) > p->mr->len - p->len))
			return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_fetch: piece %zu lies outside its region", i);
		if (b && !p->mr && p->len && need)
			return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_fetch: provider %s needs registered local "
			                      "buffers (FI_MR_LOCAL)", f->info->fabric_attr->prov_name);
	}
	return 0;
}

/* The caller's loop: posts and reaps until every piece was handed over, or
 * an error. */
static int drive(fetch *x, const ckpt_fab_fetch_opts *o, char *err, size_t cap)
{
	int timeout = o->timeout_ms > 0 ? o->timeout_ms : FAB_TIMEOUT_DEFAULT;
	int64_t last = ckpt__fab_now_ms();
	for (;;) {
		pthread_mutex_lock(&x->mu);
		int stop = x->err != 0;
		pthread_mutex_unlock(&x->mu);
		int short_of = 0;
		if (!stop) {
			size_t before = x->next, off = x->next_off;
			int r = post_some(x, o, o->threads, err, cap);
			if (r < 0)
				return r;
			short_of = r == 1;
			if (x->next != before || x->next_off != off)
				last = ckpt__fab_now_ms();
		}
		if (x->inflight == 0 && (stop || x->next == x->n))
			return 0;
		int64_t left = timeout - (ckpt__fab_now_ms() - last);
		if (left <= 0)
			return ckpt__fab_fail(err, cap, -ETIMEDOUT, "fetch of %zu pieces: no progress for %d ms (%u reads "
			                      "in flight, %zu pieces posted)", x->n, timeout, x->inflight, x->next);
		if (x->inflight == 0) {
			/* Nothing on the wire: waiting for a bounce buffer only. */
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += FETCH_WAIT_BOUNCE_MS * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_mutex_lock(&x->mu);
			if (!x->nfree && !x->err)
				pthread_cond_timedwait(&x->free_cv, &x->mu, &ts);
			pthread_mutex_unlock(&x->mu);
			last = ckpt__fab_now_ms();
			continue;
		}
		int wait = short_of && left > FETCH_WAIT_BOUNCE_MS ? FETCH_WAIT_BOUNCE_MS : (int)left;
		int n = reap(x, wait, o->threads, err, cap);
		if (n < 0)
			return n;
		if (n > 0)
			last = ckpt__fab_now_ms();
		else if (!x->f->cq_wait)
			sched_yield();
	}
}

int ckpt_fab_fetch(ckpt_fab *f, const ckpt_fab_remote *r, const ckpt_fab_piece *pieces, size_t n,
                   const ckpt_fab_fetch_opts *o, ckpt_fab_landed_fn landed, void *arg, char *err,
                   size_t errcap)
{
	int rc = check_args(f, r, pieces, n, o, landed, err, errcap);
	if (rc)
		return rc;
	if (f->broken)
		return ckpt__fab_fail(err, errcap, -EPIPE, "ckpt_fab_fetch: fab broken by an earlier error");
	if (n == 0)
		return 0;
	fetch x = { .f = f, .r = r, .pc = pieces, .n = n, .landed = landed, .arg = arg };
	if ((rc = ckpt__fab_peer(f, r, &x.dest, err, errcap)))
		return rc;
	size_t max_msg = f->info->ep_attr->max_msg_size;
	x.op_bytes = o->op_bytes ? o->op_bytes : FAB_PIECE_DEFAULT;
	if (max_msg && x.op_bytes > max_msg)
		x.op_bytes = max_msg;
	x.depth = o->depth ? o->depth : FETCH_DEPTH_DEFAULT;
	if (x.depth > CKPT_FAB_DEPTH_MAX)
		x.depth = CKPT_FAB_DEPTH_MAX;
	if (f->info->tx_attr->size && x.depth > f->info->tx_attr->size)
		x.depth = (unsigned)f->info->tx_attr->size;
	x.left = calloc(n, sizeof(*x.left));
	x.at = calloc(n, sizeof(*x.at));
	x.bslot = malloc(n * sizeof(*x.bslot));
	x.q = malloc(n * sizeof(*x.q));
	x.bfree = malloc((o->nbounce ? o->nbounce : 1) * sizeof(*x.bfree));
	pthread_t th[FETCH_THREADS_MAX];
	unsigned started = 0;
	if (!x.left || !x.at || !x.bslot || !x.q || !x.bfree) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		x.bslot[i] = -1;
	for (unsigned b = 0; b < o->nbounce; b++)
		x.bfree[x.nfree++] = (int)(o->nbounce - 1 - b);
	pthread_mutex_init(&x.mu, NULL);
	pthread_cond_init(&x.work_cv, NULL);
	pthread_cond_init(&x.free_cv, NULL);
	while (started < o->threads && pthread_create(&th[started], NULL, landed_main, &x) == 0)
		started++;
	if (started < o->threads) {
		rc = ckpt__fab_fail(err, errcap, -EAGAIN, "ckpt_fab_fetch: cannot start its threads");
	} else {
		rc = drive(&x, o, err, errcap);
		if (rc == -EINVAL) /* from the provider: not our arguments */
			rc = -EIO;
	}
	pthread_mutex_lock(&x.mu);
	if (rc < 0)
		x.fab_err = rc;
	x.closing = 1;
	pthread_cond_broadcast(&x.work_cv);
	pthread_mutex_unlock(&x.mu);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (rc < 0 && (rc != -EAGAIN || x.inflight)) /* reads may still be in flight */
		f->broken = 1;
	if (rc == 0)
		rc = x.err;
	pthread_cond_destroy(&x.work_cv);
	pthread_cond_destroy(&x.free_cv);
	pthread_mutex_destroy(&x.mu);
out:
	free(x.left);
	free(x.at);
	free(x.bslot);
	free(x.q);
	free(x.bfree);
	return rc;
}
