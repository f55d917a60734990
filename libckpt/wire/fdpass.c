/* SCM_RIGHTS transport for the pool fd, and mapping a granted segment. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fdpass.h"
#include "base/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Room for a hostile peer's fds in one read; those that do not fit are
 * discarded by the kernel (MSG_CTRUNC), the rest we close. */
#define CKPTD__FDS_PER_READ 16

/* Waits for events on sock until deadline (-1: none). 0, -ETIMEDOUT or
 * -errno; EINTR just returns 0 so that the caller retries. */
static int ckptd__wait(int sock, short events, int64_t deadline)
{
	int ms = -1;
	if (deadline >= 0) {
		int64_t left = deadline - (int64_t)ckpt__now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		ms = left > INT_MAX ? INT_MAX : (int)left;
	}
	struct pollfd pfd = { .fd = sock, .events = events };
	int n = poll(&pfd, 1, ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	if (n == 0)
		return -ETIMEDOUT;
	return 0; /* ready, or an error the next call reports */
}

int ckptd_fdpass_send(int sock, const void *buf, size_t len, int fd, int timeout_ms)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	const char *p = buf;
	size_t done = 0;
	int fd_pending = fd >= 0;
	int64_t deadline = timeout_ms < 0 ? -1 : (int64_t)ckpt__now_ms() + timeout_ms;

	if (sock < 0 || !buf || len == 0)
		return -EINVAL;
	while (done < len) {
		struct iovec iov = { .iov_base = (void *)(p + done), .iov_len = len - done };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		if (fd_pending) {
			memset(&ctl, 0, sizeof(ctl));
			mh.msg_control = ctl.buf;
			mh.msg_controllen = sizeof(ctl.buf);
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &fd, sizeof(int));
		}
		/* MSG_NOSIGNAL: a vanished rank is an error to handle, not a signal
		 * that kills the agent. */
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				int err = ckptd__wait(sock, POLLOUT, deadline);
				if (err < 0)
					return err;
				continue;
			}
			return -errno;
		}
		if (n == 0)
			return -EIO;
		/* The fd went with the first byte that was accepted. */
		fd_pending = 0;
		done += (size_t)n;
	}
	return 0;
}

/* Keeps the first fd of the read when one is wanted; closes every other. */
static void ckptd__take_fds(struct msghdr *mh, int *keep, int want)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (want && *keep < 0)
				*keep = fd;
			else
				close(fd);
		}
	}
}

ssize_t ckptd_fdpass_recv(int sock, void *buf, size_t len, int *fd, int timeout_ms)
{
	union {
		char buf[CMSG_SPACE(CKPTD__FDS_PER_READ * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char *p = buf;
	size_t got = 0;
	int keep = -1;
	ssize_t ret;
	int64_t deadline = timeout_ms < 0 ? -1 : (int64_t)ckpt__now_ms() + timeout_ms;

	if (fd)
		*fd = -1;
	if (sock < 0 || !buf || len == 0 || len > SSIZE_MAX)
		return -EINVAL;
	while (got < len) {
		struct iovec iov = { .iov_base = p + got, .iov_len = len - got };
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
		};
		/* Without a deadline a blocking socket may block in recvmsg; with
		 * one, wait in poll so that the deadline holds. */
		if (deadline >= 0) {
			ret = ckptd__wait(sock, POLLIN, deadline);
			if (ret < 0)
				goto fail;
		}
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | (deadline >= 0 ? MSG_DONTWAIT : 0));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ret = ckptd__wait(sock, POLLIN, deadline);
				if (ret < 0)
					goto fail;
				continue;
			}
			ret = -errno;
			goto fail;
		}
		/* Take the fds before anything else: an error path must not leave
		 * them open in this process. */
		ckptd__take_fds(&mh, &keep, fd != NULL);
		if (n == 0) {
			ret = got == 0 ? 0 : -ECONNRESET;
			goto fail;
		}
		if (mh.msg_flags & MSG_TRUNC) {
			ret = -EMSGSIZE;
			goto fail;
		}
		got += (size_t)n;
	}
	if (fd)
		*fd = keep;
	return (ssize_t)got;
fail:
	if (keep >= 0)
		close(keep);
	return ret;
}

int ckptd_seg_map(int fd, uint64_t off, uint64_t len, int flags, ckptd_mapping *m)
{
	struct stat st;

	if (!m)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	if (fd < 0 || len == 0 || off > UINT64_MAX - len || (flags & ~(CKPTD_MAP_WRITE | CKPTD_MAP_POPULATE)))
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return errno == EINVAL ? -EINVAL : -errno;
	/* Only a size that cannot shrink makes the mapping safe from SIGBUS. */
	if (!(seals & F_SEAL_SHRINK))
		return -EPERM;
	if (off + len > (uint64_t)st.st_size)
		return -ERANGE;
	/* Offsets must be multiples of the fs page: the huge page on hugetlbfs. */
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	if ((uint64_t)st.st_blksize > page)
		page = (uint64_t)st.st_blksize;
	uint64_t moff = off / page * page;
	uint64_t mlen = (off - moff + len + page - 1) / page * page;
	if ((uint64_t)(size_t)mlen != mlen)
		return -EINVAL;
	int prot = PROT_READ | (flags & CKPTD_MAP_WRITE ? PROT_WRITE : 0);
	void *a = mmap(NULL, (size_t)mlen, prot, MAP_SHARED, fd, (off_t)moff);
	if (a == MAP_FAILED)
		return -errno;
	if (flags & CKPTD_MAP_POPULATE) /* writable too: see ckptd_seg_prefault */
		ckptd_seg_touch(a, (size_t)mlen);
	m->map_addr = a;
	m->map_len = (size_t)mlen;
	m->addr = (char *)a + (off - moff);
	m->len = (size_t)len;
	return 0;
}

/* One read per FAULT_STRIDE bytes: a read fault on shared memory maps the
 * pages around it as well (the kernel's fault-around, 64 KiB by default),
 * so 1 GiB of 4 KiB pages takes 16,384 faults. MADV_POPULATE_READ walks
 * the range page by page and cost a third more on a restore
 * (docs/benchmarks-history.md); touching every page would pay a TLB miss
 * per page. Pages a smaller fault-around leaves out fault later instead. */
#define FAULT_STRIDE (64u << 10)

void ckptd_seg_touch(const void *p, size_t len)
{
	if (!len)
		return;
	const volatile uint8_t *b = p;
	uintptr_t first = ((uintptr_t)p + FAULT_STRIDE - 1) / FAULT_STRIDE * FAULT_STRIDE;
	uint8_t x = b[0];
	for (uintptr_t a = first; a < (uintptr_t)p + len; a += FAULT_STRIDE)
		x ^= b[a - (uintptr_t)p];
	(void)x;
}

int ckptd_seg_prefault(const ckptd_mapping *m, uint64_t off, uint64_t len, int write)
{
	(void)write;
	if (!m || !m->map_addr || off > m->len || len > m->len - off)
		return -ERANGE;
	/* For writing too: the pool is shared memory (a memfd), which needs no
	 * write notification, so a read fault maps its pages writable, and a
	 * touch per 64 KiB builds them at a third to a quarter of what
	 * MADV_POPULATE_WRITE costs (1 GiB: 0.04-0.08 s against 0.19-0.33 s;
	 * the copy after either runs at memcpy speed). */
	ckptd_seg_touch((const uint8_t *)m->addr + off, (size_t)len);
	return 0;
}

int ckptd_seg_unmap(ckptd_mapping *m)
{
	int err = 0;
	if (!m || !m->map_addr)
		return 0;
	if (munmap(m->map_addr, m->map_len) < 0)
		err = -errno;
	memset(m, 0, sizeof(*m));
	return err;
}
