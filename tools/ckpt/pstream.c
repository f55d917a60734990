/* Several readers, one writer, a ring of slabs (pstream.h). */
#include "pstream.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"

#define NSLOT (2 * PSTREAM_READERS)

typedef struct pstream {
	ckpt_view *const *views;
	int nviews;
	const pstream_seg *segs;
	size_t nseg;
	uint64_t total, nslabs;
	int fd;
	uint8_t *buf[NSLOT];
	int64_t ready[NSLOT];  /* the slab a slot holds, filled; -1 none */
	int64_t freed[NSLOT];  /* the last slab written from a slot; a reader may fill slab j when freed == j - NSLOT */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int err;
	char *why;
	size_t cap;
} pstream;

static void fail(pstream *p, int err, const char *what)
{
	pthread_mutex_lock(&p->mu);
	if (!p->err) {
		p->err = err;
		snprintf(p->why, p->cap, "%s", what);
	}
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* Fills dst with stream bytes [a, a+n). */
static int fill(pstream *p, ckpt_view *v, uint8_t *dst, uint64_t a, uint64_t n, char *why, size_t cap)
{
	uint64_t at = 0;
	for (size_t i = 0; i < p->nseg && n; i++) {
		const pstream_seg *s = &p->segs[i];
		if (a >= at + s->len) {
			at += s->len;
			continue;
		}
		uint64_t from = a - at, k = CKPT_MIN(s->len - from, n);
		if (s->data) {
			memcpy(dst, (const uint8_t *)s->data + from, k);
		} else {
			int err = ckpt_view_read(v, s->tensor, s->off + from, k, dst);
			if (err < 0) {
				snprintf(why, cap, "%s", ckpt_view_error(v)[0] ? ckpt_view_error(v) : ckpt_strerror(err));
				return err;
			}
		}
		dst += k;
		a += k;
		n -= k;
		at += s->len;
	}
	return 0;
}

typedef struct reader_arg {
	pstream *p;
	int t;
} reader_arg;

static void *reader(void *arg)
{
	reader_arg *ra = arg;
	pstream *p = ra->p;
	char why[512] = "";
	for (uint64_t j = (uint64_t)ra->t; j < p->nslabs; j += (uint64_t)p->nviews) {
		int s = (int)(j % NSLOT);
		pthread_mutex_lock(&p->mu);
		while (!p->err && p->freed[s] != (int64_t)j - NSLOT)
			pthread_cond_wait(&p->cv, &p->mu);
		int stop = p->err;
		pthread_mutex_unlock(&p->mu);
		if (stop)
			break;
		uint64_t a = j * PSTREAM_SLAB, n = CKPT_MIN((uint64_t)PSTREAM_SLAB, p->total - a);
		int err = fill(p, p->views[ra->t], p->buf[s], a, n, why, sizeof(why));
		if (err < 0) {
			fail(p, err, why);
			break;
		}
		pthread_mutex_lock(&p->mu);
		p->ready[s] = (int64_t)j;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
	return NULL;
}

/* The writer: slabs in order; the last one padded to whole blocks. */
static int write_all(pstream *p)
{
	for (uint64_t j = 0; j < p->nslabs; j++) {
		int s = (int)(j % NSLOT);
		pthread_mutex_lock(&p->mu);
		while (!p->err && p->ready[s] != (int64_t)j)
			pthread_cond_wait(&p->cv, &p->mu);
		int err = p->err;
		pthread_mutex_unlock(&p->mu);
		if (err)
			return err;
		uint64_t a = j * PSTREAM_SLAB, n = CKPT_MIN((uint64_t)PSTREAM_SLAB, p->total - a);
		uint64_t whole = CKPT_ALIGN_UP(n, 4096u);
		memset(p->buf[s] + n, 0, whole - n);
		if ((err = ckpt__pwrite_full(p->fd, p->buf[s], whole, a)) < 0) {
			char w[128];
			snprintf(w, sizeof(w), "write: %s", strerror(-err));
			fail(p, err, w);
			return err;
		}
		pthread_mutex_lock(&p->mu);
		p->freed[s] = (int64_t)j;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
	if (ftruncate(p->fd, (off_t)p->total) < 0)
		return -errno;
	return 0;
}

int pstream_write(ckpt_view *const *views, int nviews, const pstream_seg *segs, size_t nseg, int fd, char *why,
                  size_t cap)
{
	pstream p = { .views = views, .nviews = nviews, .segs = segs, .nseg = nseg, .fd = fd, .why = why, .cap = cap };
	pthread_t th[PSTREAM_READERS];
	reader_arg ra[PSTREAM_READERS];
	int started = 0, err = 0;
	if (nviews < 1 || nviews > PSTREAM_READERS)
		return -EINVAL;
	for (size_t i = 0; i < nseg; i++)
		p.total += segs[i].len;
	p.nslabs = (p.total + PSTREAM_SLAB - 1) / PSTREAM_SLAB;
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	for (int s = 0; s < NSLOT; s++) {
		p.ready[s] = -1;
		p.freed[s] = (int64_t)s - NSLOT;
		if (posix_memalign((void **)&p.buf[s], 4096, PSTREAM_SLAB)) {
			err = -ENOMEM;
			snprintf(why, cap, "out of memory for the slabs");
			goto out;
		}
	}
	for (; started < nviews; started++) {
		ra[started] = (reader_arg){ &p, started };
		if (pthread_create(&th[started], NULL, reader, &ra[started])) {
			fail(&p, -EAGAIN, "cannot start a reader thread");
			break;
		}
	}
	err = write_all(&p);
	if (err < 0)
		fail(&p, err, "write failed");
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	if (!err)
		err = p.err;
	if (err < 0 && !why[0])
		snprintf(why, cap, "%s", strerror(-err));
out:
	for (int s = 0; s < NSLOT; s++)
		free(p.buf[s]);
	pthread_mutex_destroy(&p.mu);
	pthread_cond_destroy(&p.cv);
	return err;
}
