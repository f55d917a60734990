/* Synchronous ckptd client: connect, handshake, sealed request/reply,
 * every wait bounded by a deadline. */
#include "client.h"
#include "base/common.h"

#include "addr.h"
#include "conn.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct ckptd_client {
	int fd;
	int timeout_ms;
	int held_fd; /* came with the last frame; -1 if none */
	ckptd_reader *reader;
	ckptd_auth *auth;
	void (*notice)(const ckptd_msg *, void *);
	void *notice_arg;
	uint8_t buf[CKPTD_MAX_FRAME];
};

static int left_ms(uint64_t deadline)
{
	uint64_t t = ckpt__now_ms();
	return t >= deadline ? 0 : (int)(deadline - t);
}

static int wait_fd(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		int ms = left_ms(deadline);
		if (ms == 0)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = ev };
		int r = poll(&p, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		return 0;
	}
}

static int write_all(ckptd_client *c, const uint8_t *p, size_t len, uint64_t deadline)
{
	while (len) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				int r = wait_fd(c->fd, POLLOUT, deadline);
				if (r < 0)
					return r;
				continue;
			}
			return errno == EPIPE ? -ECONNRESET : -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_msg(ckptd_client *c, const ckptd_msg *m, int seal, uint64_t deadline)
{
	size_t len;
	int r = ckptd_msg_encode(m, c->buf, sizeof(c->buf), &len);
	if (r < 0)
		return r;
	if (seal && (r = ckptd_auth_seal(c->auth, c->buf, len, sizeof(c->buf), &len)) < 0)
		return r;
	return write_all(c, c->buf, len, deadline);
}

/* Reads into the frame reader; keeps the first fd that comes along. */
static int read_some(ckptd_client *c, uint64_t deadline)
{
	uint8_t *p;
	size_t cap;
	int r = ckptd_reader_space(c->reader, &p, &cap);
	if (r < 0)
		return r;
	for (;;) {
		union {
			char b[CMSG_SPACE(4 * sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = { .iov_base = p, .iov_len = cap };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
		ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if ((r = wait_fd(c->fd, POLLIN, deadline)) < 0)
				return r;
			continue;
		}
		if (n < 0)
			return -errno;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				if (c->held_fd < 0)
					c->held_fd = fd;
				else
					close(fd); /* only one travels with a frame */
			}
		}
		if (n == 0)
			return -ECONNRESET;
		return ckptd_reader_commit(c->reader, (size_t)n, ckpt__now_ns());
	}
}

/* The next frame, opened when sealed is set, decoded into m. */
static int recv_msg(ckptd_client *c, ckptd_msg *m, int sealed, uint64_t deadline)
{
	memset(m, 0, sizeof(*m));
	for (;;) {
		uint8_t *frame;
		size_t len;
		int r = ckptd_reader_next(c->reader, ckpt__now_ns(), &frame, &len);
		if (r < 0)
			return -EPROTO;
		if (r == 1) {
			/* A refusal may come unsealed: the server could not seal it. */
			if (sealed && (r = ckptd_auth_open(c->auth, frame, len, &len)) < 0) {
				if (ckptd_msg_decode(frame, len, m, NULL) == 0 && m->type == CKPTD_MSG_ERROR)
					return 0;
				ckptd_msg_free(m);
				return -EBADMSG;
			}
			r = ckptd_msg_decode(frame, len, m, NULL);
			if (r == -CKPT_EFORMAT)
				return r;
			return r < 0 ? -EPROTO : 0;
		}
		if ((r = read_some(c, deadline)) < 0)
			return r;
	}
}

static int refusal(const ckptd_msg *m, char *err, size_t errcap)
{
	ckpt__errf(err, errcap, "refused by the daemon: error %u%s%s", m->u.error.code, m->u.error.text[0] ? ": " : "",
	     m->u.error.text);
	switch (m->u.error.code) {
	case CKPTD_ERR_AUTH: return -EACCES;
	case CKPTD_ERR_BUSY: return -EBUSY;
	case CKPTD_ERR_VERSION: return -CKPT_EFORMAT;
	case CKPTD_ERR_TIMEOUT: return -ETIMEDOUT;
	default: return -EPROTO;
	}
}

int ckptd_client_connect(const char *addr, const char *job, uint32_t role, const ckptd_secret *secret,
                         int timeout_ms, ckptd_client **out, char *err, size_t errcap)
{
	ckptd_addr a;
	const char *why;
	ckptd_msg m = { 0 };
	int r;
	*out = NULL;
	if (!secret) {
		ckpt__errf(err, errcap, "no secret: set --token-file or CKPT_TOKEN");
		return -ENOKEY;
	}
	if (ckptd_addr_parse(addr, CKPTD_ADDR_UNIX | CKPTD_ADDR_TCP, &a, &why) < 0) {
		ckpt__errf(err, errcap, "daemon address '%s': %s", addr ? addr : "", why);
		return -EINVAL;
	}
	if (timeout_ms <= 0)
		timeout_ms = CKPTD_CLIENT_DEFAULT_TIMEOUT_MS;
	uint64_t deadline = ckpt__now_ms() + (uint64_t)timeout_ms;
	ckptd_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = -1;
	c->held_fd = -1;
	c->timeout_ms = timeout_ms;
	ckptd_reader_opts ro = { .size = sizeof(ro), .frame_timeout_ns = (uint64_t)timeout_ms * 1000000ull };
	if ((r = ckptd_reader_new(&ro, &c->reader)) < 0 || (r = ckptd_auth_new(&c->auth)) < 0)
		goto fail;
	m.type = CKPTD_MSG_HELLO;
	m.u.hello.role = role;
	snprintf(m.u.hello.job, sizeof(m.u.hello.job), "%s", job ? job : "");
	if ((r = ckptd_auth_client_start(c->auth, secret, role, job, m.u.hello.nonce)) < 0) {
		ckpt__errf(err, errcap, "role and job do not go together, or the job id is invalid");
		goto fail;
	}
	if ((c->fd = ckptd_addr_connect(&a, left_ms(deadline))) < 0) {
		r = c->fd;
		ckpt__errf(err, errcap, "cannot connect to %s: %s", addr, strerror(-r));
		goto fail;
	}
	if ((r = send_msg(c, &m, 0, deadline)) < 0)
		goto io;
	if ((r = recv_msg(c, &m, 0, deadline)) < 0)
		goto io;
	if (m.type == CKPTD_MSG_ERROR) {
		r = refusal(&m, err, errcap);
		goto fail;
	}
	if (m.type != CKPTD_MSG_CHALLENGE) {
		r = -EPROTO;
		goto io;
	}
	uint8_t nonce[CKPTD_NONCE_LEN];
	memcpy(nonce, m.u.challenge.nonce, sizeof(nonce));
	uint32_t sv = CKPTD_VERSION_PACK(m.major, m.minor);
	ckptd_msg_free(&m);
	m.type = CKPTD_MSG_AUTH;
	if ((r = ckptd_auth_client_respond(c->auth, sv, nonce, m.u.auth.mac)) < 0)
		goto io;
	if ((r = send_msg(c, &m, 0, deadline)) < 0)
		goto io;
	if ((r = recv_msg(c, &m, 0, deadline)) < 0)
		goto io;
	if (m.type == CKPTD_MSG_ERROR) {
		r = refusal(&m, err, errcap);
		goto fail;
	}
	if (m.type != CKPTD_MSG_AUTH_OK) {
		r = -EPROTO;
		goto io;
	}
	if ((r = ckptd_auth_client_verify_server(c->auth, m.u.auth_ok.mac)) < 0) {
		ckpt__errf(err, errcap, "the daemon at %s could not prove it knows the secret", addr);
		goto fail;
	}
	ckptd_msg_free(&m);
	*out = c;
	return 0;
io:
	ckpt__errf(err, errcap, "handshake with %s failed: %s", addr,
	     r == -EPROTO ? "protocol error" : r == -CKPT_EFORMAT ? "protocol version mismatch" : strerror(-r));
fail:
	ckptd_msg_free(&m);
	ckptd_client_close(c);
	return r;
}

void ckptd_client_close(ckptd_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	if (c->held_fd >= 0)
		close(c->held_fd);
	ckptd_reader_free(c->reader);
	ckptd_auth_free(c->auth);
	free(c);
}

void ckptd_client_set_timeout(ckptd_client *c, int timeout_ms)
{
	if (timeout_ms > 0)
		c->timeout_ms = timeout_ms;
}

int ckptd_client_send(ckptd_client *c, const ckptd_msg *m)
{
	return send_msg(c, m, 1, ckpt__now_ms() + (uint64_t)c->timeout_ms);
}

int ckptd_client_recv(ckptd_client *c, ckptd_msg *m)
{
	return recv_msg(c, m, 1, ckpt__now_ms() + (uint64_t)c->timeout_ms);
}

int ckptd_client_poll(ckptd_client *c, ckptd_msg *m)
{
	/* A deadline already past: read only what has arrived, never wait. */
	int r = recv_msg(c, m, 1, ckpt__now_ms());
	if (r == -ETIMEDOUT) {
		memset(m, 0, sizeof(*m));
		return 0;
	}
	return r < 0 ? r : 1;
}

int ckptd_client_call(ckptd_client *c, const ckptd_msg *req, ckptd_msg *reply)
{
	uint64_t deadline = ckpt__now_ms() + (uint64_t)c->timeout_ms;
	int r = send_msg(c, req, 1, deadline);
	if (r < 0)
		return r;
	for (;;) {
		if ((r = recv_msg(c, reply, 1, deadline)) < 0)
			return r;
		/* Unsolicited notices may come before the answer. */
		if (reply->type != CKPTD_MSG_COMMIT_NOTICE && reply->type != CKPTD_MSG_INTERVAL_NOTICE &&
		    reply->type != CKPTD_MSG_EMERGENCY)
			return 0;
		if (c->notice)
			c->notice(reply, c->notice_arg);
		ckptd_msg_free(reply);
	}
}

uint32_t ckptd_client_version(const ckptd_client *c)
{
	return ckptd_auth_version(c->auth);
}

void ckptd_client_on_notice(ckptd_client *c, void (*fn)(const ckptd_msg *m, void *arg), void *arg)
{
	c->notice = fn;
	c->notice_arg = arg;
}

int ckptd_client_take_fd(ckptd_client *c)
{
	int fd = c->held_fd;
	c->held_fd = -1;
	return fd;
}

int ckptd_client_fd(const ckptd_client *c)
{
	return c->fd;
}
