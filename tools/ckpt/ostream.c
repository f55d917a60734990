/* Streaming a file out through two slabs (ostream.h). */
#include "ostream.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"

#define BLK 4096u

struct ostream {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint8_t *buf[2];
	/* with mu: slab k holds len[k] bytes for file offset off[k] (aligned) */
	int full[2];
	uint64_t off[2];
	size_t len[2];
	int stop, err, fd;
	/* the caller's side */
	int k;          /* the slab being filled */
	size_t head;    /* bytes at its front carried from the previous slab */
	size_t filled;  /* bytes in it so far, head included */
	uint64_t base;  /* its file offset */
	int started;    /* a slab is being filled */
	uint64_t total; /* bytes streamed */
};

static void *writer(void *arg)
{
	ostream *s = arg;
	int k = 0;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->full[k] && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->full[k])
			break;
		size_t n = s->len[k] / BLK * BLK; /* the tail goes with the next slab */
		pthread_mutex_unlock(&s->mu);
		int r = n && !s->err ? ckpt__pwrite_full(s->fd, s->buf[k], n, s->off[k]) : 0;
		pthread_mutex_lock(&s->mu);
		if (r < 0 && !s->err)
			s->err = r;
		s->full[k] = 0;
		pthread_cond_broadcast(&s->cv);
		k ^= 1;
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int ostream_start(ostream **out)
{
	ostream *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (int i = 0; i < 2; i++)
		if (posix_memalign((void **)&s->buf[i], BLK, OSTREAM_SLAB + BLK)) {
			free(s->buf[0]);
			free(s);
			return -ENOMEM;
		}
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->th, NULL, writer, s)) {
		free(s->buf[0]);
		free(s->buf[1]);
		free(s);
		return -EAGAIN;
	}
	*out = s;
	return 0;
}

void ostream_stop(ostream *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->th, NULL);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s->buf[0]);
	free(s->buf[1]);
	free(s);
}

static void wait_free(ostream *s, int k)
{
	pthread_mutex_lock(&s->mu);
	while (s->full[k])
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

void ostream_begin(ostream *s, int fd)
{
	wait_free(s, 0);
	wait_free(s, 1);
	s->fd = fd;
	s->err = 0;
	s->k = 0;
	s->head = s->filled = 0;
	s->base = 0;
	s->started = 1;
	s->total = 0;
}

uint8_t *ostream_room(ostream *s, size_t *room)
{
	if (s->filled == OSTREAM_SLAB)
		ostream_commit(s, 0); /* full: move on */
	*room = OSTREAM_SLAB - s->filled;
	return s->buf[s->k] + s->filled;
}

void ostream_commit(ostream *s, size_t n)
{
	s->filled += n;
	s->total += n;
	if (s->filled < OSTREAM_SLAB && n)
		return; /* room left: keep filling this slab */
	int k = s->k;
	size_t len = s->filled, tail = len % BLK;
	pthread_mutex_lock(&s->mu);
	s->off[k] = s->base;
	s->len[k] = len;
	s->full[k] = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	/* The next slab starts with this one's partial block. */
	int j = k ^ 1;
	wait_free(s, j);
	memcpy(s->buf[j], s->buf[k] + len - tail, tail);
	s->base += len - tail;
	s->k = j;
	s->head = s->filled = tail;
}

void ostream_write(ostream *s, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		size_t room;
		uint8_t *d = ostream_room(s, &room);
		size_t c = CKPT_MIN(room, n);
		memcpy(d, b, c);
		ostream_commit(s, c);
		b += c;
		n -= c;
	}
}

int ostream_end(ostream *s)
{
	int k = s->k;
	size_t len = s->filled;
	wait_free(s, k ^ 1);
	int err = s->err;
	/* The last partial block, padded with zeros to a whole one; then the
	 * length cut back to what was streamed. */
	if (!err && len) {
		size_t whole = CKPT_ALIGN_UP(len, BLK);
		memset(s->buf[k] + len, 0, whole - len);
		err = ckpt__pwrite_full(s->fd, s->buf[k], whole, s->base);
	}
	if (!err && ftruncate(s->fd, (off_t)s->total) < 0)
		err = -errno;
	s->started = 0;
	return err;
}
