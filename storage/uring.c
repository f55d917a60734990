/* Local disk through io_uring: several reads/writes in flight, completions
 * reaped by one thread. */
#include "backend.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct uring_backend {
	ckpt_backend base;
	struct io_uring ring;
	pthread_mutex_t sq_lock;
};

static int prep_and_submit(struct uring_backend *u, ckpt_io *io)
{
	pthread_mutex_lock(&u->sq_lock);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	if (!sqe) {
		io_uring_submit(&u->ring);
		sqe = io_uring_get_sqe(&u->ring);
	}
	if (!sqe) {
		pthread_mutex_unlock(&u->sq_lock);
		return -EBUSY;
	}
	uint8_t *buf = (uint8_t *)io->buf + io->done;
	unsigned len = io->len - io->done;
	uint64_t off = io->off + io->done;
	switch (io->op) {
	case CKPT_IO_READ:
		io_uring_prep_read(sqe, io->fd, buf, len, off);
		break;
	case CKPT_IO_WRITE:
		io_uring_prep_write(sqe, io->fd, buf, len, off);
		break;
	case CKPT_IO_FDATASYNC:
		io_uring_prep_fsync(sqe, io->fd, IORING_FSYNC_DATASYNC);
		break;
	default:
		io_uring_prep_nop(sqe);
		break;
	}
	io_uring_sqe_set_data(sqe, io);
	int r = io_uring_submit(&u->ring);
	pthread_mutex_unlock(&u->sq_lock);
	return r < 0 ? r : 0;
}

static int uring_open(const ckpt_backend_params *p, ckpt_backend **out)
{
	struct uring_backend *u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	unsigned entries = 8;
	while (entries < p->depth * 2u && entries < 4096)
		entries *= 2;
	int r = io_uring_queue_init(entries, &u->ring, 0);
	if (r < 0) {
		free(u);
		return r;
	}
	/* A probe NOP makes sure the kernel really runs requests: some seccomp
	 * filters let setup through and refuse io_uring_enter. */
	ckpt_io nop = { .op = CKPT_IO_NOP };
	pthread_mutex_init(&u->sq_lock, NULL);
	r = prep_and_submit(u, &nop);
	if (r == 0) {
		struct io_uring_cqe *cqe;
		r = io_uring_wait_cqe(&u->ring, &cqe);
		if (r == 0) {
			r = cqe->res < 0 ? cqe->res : 0;
			io_uring_cqe_seen(&u->ring, cqe);
		}
	}
	if (r < 0) {
		io_uring_queue_exit(&u->ring);
		pthread_mutex_destroy(&u->sq_lock);
		free(u);
		return r;
	}
	u->base.ops = &ckpt_backend_uring;
	*out = &u->base;
	return 0;
}

static int uring_submit(ckpt_backend *b, ckpt_io *io)
{
	io->done = 0;
	io->result = 0;
	return prep_and_submit((struct uring_backend *)b, io);
}

static int uring_poll(ckpt_backend *b, ckpt_io **done, int max, int timeout_ms)
{
	struct uring_backend *u = (struct uring_backend *)b;
	int n = 0;
	while (n < max) {
		struct io_uring_cqe *cqe;
		int r;
		if (n == 0) {
			if (timeout_ms < 0) {
				r = io_uring_wait_cqe(&u->ring, &cqe);
			} else {
				struct __kernel_timespec ts = { timeout_ms / 1000, (long long)(timeout_ms % 1000) * 1000000LL };
				r = io_uring_wait_cqe_timeout(&u->ring, &cqe, &ts);
			}
			if (r == -ETIME || r == -EINTR)
				return 0;
			if (r < 0)
				return r;
		} else {
			r = io_uring_peek_cqe(&u->ring, &cqe);
			if (r < 0)
				break;
		}
		ckpt_io *io = io_uring_cqe_get_data(cqe);
		int res = cqe->res;
		io_uring_cqe_seen(&u->ring, cqe);
		if (!io)
			continue;
		if (res < 0) {
			if (res == -EAGAIN || res == -EINTR) {
				if ((r = prep_and_submit(u, io)) == 0)
					continue;
				res = r;
			}
			io->result = res;
			done[n++] = io;
			continue;
		}
		if (io->op == CKPT_IO_READ || io->op == CKPT_IO_WRITE) {
			if (res == 0) {
				io->result = -EIO; /* end of file or no progress */
				done[n++] = io;
				continue;
			}
			io->done += (uint32_t)res;
			if (io->done < io->len) {
				if ((r = prep_and_submit(u, io)) == 0)
					continue;
				io->result = r;
				done[n++] = io;
				continue;
			}
		}
		io->result = 0;
		done[n++] = io;
	}
	return n;
}

static void uring_close(ckpt_backend *b)
{
	struct uring_backend *u = (struct uring_backend *)b;
	if (!u)
		return;
	io_uring_queue_exit(&u->ring);
	pthread_mutex_destroy(&u->sq_lock);
	free(u);
}

const ckpt_backend_ops ckpt_backend_uring = {
	.version = CKPT_BACKEND_OPS_VERSION,
	.name = "uring",
	.open = uring_open,
	.submit = uring_submit,
	.poll = uring_poll,
	.close = uring_close,
};
