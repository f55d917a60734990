/* Address parsing and a connect with a deadline, shared by the daemon
 * (what to bind) and the client library (where to connect). */
#include "addr.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int parse_port(const char *p, size_t n, char out[8])
{
	if (n == 0 || n > 5)
		return -1;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -1;
	memcpy(out, p, n);
	out[n] = 0;
	return 0;
}

int ckptd_addr_parse(const char *s, int allow, ckptd_addr *out, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	memset(out, 0, sizeof(*out));
	if (!s || !*s) {
		*why = "empty address";
		return -EINVAL;
	}
	for (const char *c = s; *c; c++)
		if (*c <= 0x20 || *c >= 0x7f) {
			*why = "address must be printable ASCII without spaces";
			return -EINVAL;
		}
	const char *path = NULL;
	if (!strncmp(s, "unix:", 5))
		path = s + 5;
	else if (s[0] == '/')
		path = s;
	if (path) {
		if (!(allow & CKPTD_ADDR_UNIX)) {
			*why = "a Unix socket is not allowed here (expected host:port)";
			return -EINVAL;
		}
		if (path[0] != '/') {
			*why = "Unix socket path must be absolute (unix:/path)";
			return -EINVAL;
		}
		if (strlen(path) >= sizeof(out->path)) {
			*why = "Unix socket path too long";
			return -EINVAL;
		}
		out->kind = CKPTD_ADDR_UNIX;
		strcpy(out->path, path);
		return 0;
	}
	if (!(allow & CKPTD_ADDR_TCP)) {
		*why = "expected a Unix socket (unix:/path)";
		return -EINVAL;
	}
	const char *host = s, *host_end, *colon;
	if (s[0] == '[') {
		host = s + 1;
		host_end = strchr(host, ']');
		if (!host_end || host_end[1] != ':') {
			*why = "expected [v6-address]:port";
			return -EINVAL;
		}
		colon = host_end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', (size_t)(colon - s))) {
			*why = "expected host:port (IPv6 as [addr]:port)";
			return -EINVAL;
		}
		host_end = colon;
	}
	size_t hn = (size_t)(host_end - host);
	/* An empty host would mean "every interface": that must be asked for
	 * explicitly (0.0.0.0), never implied. */
	if (hn == 0 || hn >= sizeof(out->host)) {
		*why = "missing or too long host in host:port";
		return -EINVAL;
	}
	if (parse_port(colon + 1, strlen(colon + 1), out->port) < 0) {
		*why = "port must be 1..65535";
		return -EINVAL;
	}
	memcpy(out->host, host, hn);
	out->host[hn] = 0;
	out->kind = CKPTD_ADDR_TCP;
	return 0;
}

static int wait_connected(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int r;
	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	int err = 0;
	socklen_t sl = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
		return -errno;
	return err ? -err : 0;
}

static int connect_one(int family, const struct sockaddr *sa, socklen_t sl, int timeout_ms)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int r = 0;
	/* A Unix socket whose backlog is full answers EAGAIN: nothing is in
	 * progress (the fd would poll writable, unconnected), so try again
	 * until the deadline; ranks starting together meet this. */
	for (int waited = 0; family == AF_UNIX && connect(fd, sa, sl) < 0; waited += 5) {
		if (errno != EAGAIN || waited >= timeout_ms) {
			r = errno == EAGAIN ? -ETIMEDOUT : -errno;
			break;
		}
		poll(NULL, 0, 5);
	}
	if (family != AF_UNIX && connect(fd, sa, sl) < 0) {
		if (errno == EINPROGRESS || errno == EAGAIN)
			r = wait_connected(fd, timeout_ms);
		else
			r = -errno;
	}
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

int ckptd_addr_connect(const ckptd_addr *a, int timeout_ms)
{
	if (a->kind == CKPTD_ADDR_UNIX) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		strcpy(sun.sun_path, a->path);
		return connect_one(AF_UNIX, (struct sockaddr *)&sun, sizeof(sun), timeout_ms);
	}
	if (a->kind != CKPTD_ADDR_TCP)
		return -EINVAL;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *res = NULL;
	if (getaddrinfo(a->host, a->port, &hints, &res) != 0)
		return -EHOSTUNREACH;
	int r = -ECONNREFUSED;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		r = connect_one(ai->ai_family, ai->ai_addr, ai->ai_addrlen, timeout_ms);
		if (r >= 0)
			break;
	}
	freeaddrinfo(res);
	return r;
}
