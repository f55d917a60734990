/* Listening sockets of the ckptd server: TCP on exactly the configured
 * address, and the Unix socket for local ranks (0600, a stale file replaced,
 * a live daemon's socket never). */
#include "server_int.h"

/* ---------------------------------------------------------------- listeners */

int ckptd__listen_tcp(ckptd_server *srv, const char *spec, char *err, size_t errcap)
{
	ckptd_addr a;
	const char *why;
	if (ckptd_addr_parse(spec, CKPTD_ADDR_TCP, &a, &why) < 0) {
		ckptd__errf(err, errcap, "--listen %s: %s", spec, why);
		return -EINVAL;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *res = NULL;
	int g = getaddrinfo(a.host, a.port, &hints, &res);
	if (g != 0) {
		ckptd__errf(err, errcap, "--listen %s: cannot resolve host: %s", spec, gai_strerror(g));
		return -EINVAL;
	}
	/* Exactly one address: the first the name resolves to, nothing wider. */
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), r = 0, one = 1;
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (res->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
		r = -errno;
		ckptd__errf(err, errcap, "--listen %s: %s", spec, strerror(errno));
		close(fd);
		goto out;
	}
	srv->tcp_fd = fd;
out:
	freeaddrinfo(res);
	if (r < 0 && err && !err[0])
		ckptd__errf(err, errcap, "--listen %s: %s", spec, strerror(-r));
	return r;
}

int ckptd__listen_unix(ckptd_server *srv, const char *path, char *err, size_t errcap)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		ckptd__errf(err, errcap, "--socket %s: path too long", path);
		return -EINVAL;
	}
	strcpy(sun.sun_path, path);
	if (lstat(path, &st) == 0) {
		/* Replace a socket only when nobody answers on it: never a live
		 * daemon's, never a file that is not a socket. */
		if (!S_ISSOCK(st.st_mode)) {
			ckptd__errf(err, errcap, "--socket %s: exists and is not a socket; not replacing it", path);
			return -EEXIST;
		}
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe < 0)
			return -errno;
		int c = connect(probe, (struct sockaddr *)&sun, sizeof(sun));
		int e = errno;
		close(probe);
		if (c == 0) {
			ckptd__errf(err, errcap, "--socket %s: another daemon is listening on it", path);
			return -EADDRINUSE;
		}
		if (e != ECONNREFUSED) {
			ckptd__errf(err, errcap, "--socket %s: cannot check the existing socket: %s", path, strerror(e));
			return -e;
		}
		if (unlink(path) < 0 && errno != ENOENT) {
			ckptd__errf(err, errcap, "--socket %s: cannot remove the stale socket: %s", path, strerror(errno));
			return -errno;
		}
		CKPTD_INFO(srv->log, NULL, NULL, "replaced stale socket %s", path);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Created 0600 from the start: no window where others may connect. */
	mode_t old = umask(0177);
	int b = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	int e = errno;
	umask(old);
	if (b < 0 || chmod(path, 0600) < 0 || listen(fd, SOMAXCONN) < 0 || stat(path, &st) < 0) {
		if (b == 0) {
			e = errno;
			unlink(path);
		}
		ckptd__errf(err, errcap, "--socket %s: %s", path, strerror(e));
		close(fd);
		return -e;
	}
	srv->unix_fd = fd;
	srv->sock_dev = st.st_dev;
	srv->sock_ino = st.st_ino;
	srv->sock_ours = 1;
	return 0;
}

/* Removes the socket file if it is still the one we made. */
void ckptd__remove_socket(ckptd_server *srv)
{
	struct stat st;
	if (!srv->sock_ours)
		return;
	srv->sock_ours = 0;
	if (stat(srv->cfg->socket, &st) == 0 && st.st_dev == srv->sock_dev && st.st_ino == srv->sock_ino)
		unlink(srv->cfg->socket);
}

void ckptd__close_listeners(ckptd_server *srv)
{
	if (srv->tcp_fd >= 0) {
		epoll_ctl(srv->epfd, EPOLL_CTL_DEL, srv->tcp_fd, NULL);
		close(srv->tcp_fd);
		srv->tcp_fd = -1;
	}
	if (srv->unix_fd >= 0) {
		epoll_ctl(srv->epfd, EPOLL_CTL_DEL, srv->unix_fd, NULL);
		close(srv->unix_fd);
		srv->unix_fd = -1;
	}
	ckptd__remove_socket(srv);
}

