/* Fallback when io_uring is refused: the I/O runs synchronously in the
 * submitting thread (pread/pwrite/fdatasync) and its completion is queued for
 * poll(). Several submitting threads still give several I/Os in flight. */
#include "backend.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct psync_backend {
	ckpt_backend base;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	ckpt_io **done;
	unsigned cap, head, count;
};

static int psync_open(const ckpt_backend_params *p, ckpt_backend **out)
{
	struct psync_backend *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cap = p->depth * 2u + 8u;
	s->done = calloc(s->cap, sizeof(*s->done));
	if (!s->done) {
		free(s);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	s->base.ops = &ckpt_backend_psync;
	*out = &s->base;
	return 0;
}

static int run(ckpt_io *io)
{
	uint8_t *buf = io->buf;
	while (io->done < io->len) {
		ssize_t r;
		if (io->op == CKPT_IO_READ)
			r = pread(io->fd, buf + io->done, io->len - io->done, (off_t)(io->off + io->done));
		else
			r = pwrite(io->fd, buf + io->done, io->len - io->done, (off_t)(io->off + io->done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		io->done += (uint32_t)r;
	}
	return 0;
}

static int psync_submit(ckpt_backend *b, ckpt_io *io)
{
	struct psync_backend *s = (struct psync_backend *)b;
	io->done = 0;
	switch (io->op) {
	case CKPT_IO_READ:
	case CKPT_IO_WRITE:
		io->result = run(io);
		break;
	case CKPT_IO_FDATASYNC:
		io->result = fdatasync(io->fd) < 0 ? -errno : 0;
		break;
	default:
		io->result = 0;
	}
	pthread_mutex_lock(&s->lock);
	if (s->count == s->cap) {
		pthread_mutex_unlock(&s->lock);
		return -EBUSY;
	}
	s->done[(s->head + s->count++) % s->cap] = io;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int psync_poll(ckpt_backend *b, ckpt_io **done, int max, int timeout_ms)
{
	struct psync_backend *s = (struct psync_backend *)b;
	pthread_mutex_lock(&s->lock);
	if (s->count == 0 && timeout_ms != 0) {
		if (timeout_ms < 0) {
			while (s->count == 0)
				pthread_cond_wait(&s->cond, &s->lock);
		} else {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += timeout_ms / 1000;
			ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			while (s->count == 0)
				if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
					break;
		}
	}
	int n = 0;
	while (n < max && s->count) {
		done[n++] = s->done[s->head];
		s->head = (s->head + 1) % s->cap;
		s->count--;
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void psync_close(ckpt_backend *b)
{
	struct psync_backend *s = (struct psync_backend *)b;
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s->done);
	free(s);
}

const ckpt_backend_ops ckpt_backend_psync = {
	.version = CKPT_BACKEND_OPS_VERSION,
	.name = "psync",
	.open = psync_open,
	.submit = psync_submit,
	.poll = psync_poll,
	.close = psync_close,
};
