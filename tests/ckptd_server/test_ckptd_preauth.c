/* Connections that never authenticate cannot lock legitimate clients out.
 * A real ckptd on 127.0.0.1 with --max-conns 16:
 *  1. 150 idle TCP connections from one peer (127.0.0.2) hold no more than
 *     its per-peer share of the handshake slots; a CLI from 127.0.0.1 is
 *     served at once;
 *  2. idle connections from 40 different peers (127.0.0.10..49) fill the
 *     handshake slots; the oldest gives way and the CLI is served;
 *  3. 80 half-sent HTTP requests to /metrics from one peer leave the
 *     endpoint answering another peer.
 * Needs CKPT_BIN (the directory holding ckptd). Exit 0 / 1 / 77. */
#include "ckptd_helper.h"

#include "wire/auth.h"
#include "wire/client.h"
#include "wire/proto.h"

#define ATTACK_ONE 150
#define PEERS 40
#define SLOW_HTTP 80

static char dir[512], tokpath[600], token[40];
static ckptd_secret *cluster;

/* A TCP connection to host:port from the local address src, left open. */
static int connect_from(const char *src, int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	T_ASSERT(inet_pton(AF_INET, src, &a.sin_addr) == 1);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		T_FAIL("bind %s: %s", src, strerror(errno));
	struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &d.sin_addr);
	if (connect(fd, (struct sockaddr *)&d, sizeof(d)) < 0)
		T_FAIL("connect from %s: %s", src, strerror(errno));
	return fd;
}

static void status_served(const char *addr, const char *what)
{
	ckptd_client *c = NULL;
	char err[256] = "";
	int r = ckptd_client_connect(addr, NULL, CKPTD_ROLE_CLI, cluster, 3000, &c, err, sizeof(err));
	if (r < 0)
		T_FAIL("%s: a legitimate CLI was not served: %d %s", what, r, err);
	ckptd_msg req = { .type = CKPTD_MSG_STATUS }, rep;
	T_OK(ckptd_client_call(c, &req, &rep));
	T_ASSERT(rep.type == CKPTD_MSG_STATUS_REPLY);
	ckptd_msg_free(&rep);
	ckptd_client_close(c);
}

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Connected sockets the daemon has closed (read returns 0 or an error). */
static int count_closed(const int *fds, int n)
{
	int closed = 0;
	for (int i = 0; i < n; i++) {
		char b;
		ssize_t r = recv(fds[i], &b, 1, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			closed++;
	}
	return closed;
}

static void test_one_peer(const td_daemon *d)
{
	int fds[ATTACK_ONE];
	for (int i = 0; i < ATTACK_ONE; i++)
		fds[i] = connect_from("127.0.0.2", d->port);
	td_wait_log(d, "handshake limit per peer", 5000);
	status_served(d->tcp, "150 idle connections from one peer");
	/* all but the per-peer share (4) were dropped, long before the handshake timeout */
	uint64_t end = td_ms() + 3000;
	int closed;
	while ((closed = count_closed(fds, ATTACK_ONE)) < ATTACK_ONE - 4 && td_ms() < end)
		usleep(20000);
	if (closed < ATTACK_ONE - 4)
		T_FAIL("only %d of %d idle connections from one peer were dropped", closed, ATTACK_ONE);
	close_all(fds, ATTACK_ONE);
	fprintf(stderr, "ok: %d idle connections from one peer: %d dropped, CLI served\n", ATTACK_ONE, closed);
}

static void test_many_peers(const td_daemon *d)
{
	int fds[PEERS];
	char src[32];
	for (int i = 0; i < PEERS; i++) {
		snprintf(src, sizeof(src), "127.0.0.%d", 10 + i);
		fds[i] = connect_from(src, d->port);
	}
	td_wait_log(d, "handshake limit (16) reached", 5000);
	status_served(d->tcp, "idle connections from 40 peers");
	close_all(fds, PEERS);
	fprintf(stderr, "ok: idle connections from %d peers: the oldest give way, CLI served\n", PEERS);
}

/* GET /metrics from 127.0.0.1; returns the HTTP status, or -1. */
static int metrics_get(int port)
{
	int fd = connect_from("127.0.0.1", port);
	struct timeval tv = { .tv_sec = 3 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	const char req[] = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
	int status = -1;
	char buf[256];
	if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof(req) - 1)) {
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n > 12) {
			buf[n] = 0;
			sscanf(buf, "HTTP/1.%*d %d", &status);
		}
	}
	close(fd);
	return status;
}

static void test_slow_http(int mport)
{
	int fds[SLOW_HTTP];
	const char half[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
	for (int i = 0; i < SLOW_HTTP; i++) {
		fds[i] = connect_from("127.0.0.3", mport);
		(void)!send(fds[i], half, sizeof(half) - 1, MSG_NOSIGNAL);
	}
	usleep(200000);
	int st = metrics_get(mport);
	if (st != 200)
		T_FAIL("/metrics with %d half-sent requests from another peer: status %d, wanted 200", SLOW_HTTP, st);
	close_all(fds, SLOW_HTTP);
	fprintf(stderr, "ok: %d half-sent HTTP requests from one peer, /metrics still answers\n", SLOW_HTTP);
}

int main(void)
{
	td_require_ckptd();
	snprintf(dir, sizeof(dir), "%s", t_tmpdir("ckptd-preauth"));
	snprintf(tokpath, sizeof(tokpath), "%s/token", dir);
	td_token_write(tokpath, token, sizeof(token));
	char err[256];
	T_OK(ckptd_secret_load_file(tokpath, &cluster, err, sizeof(err)));

	td_daemon d;
	td_daemon_init(&d, dir, "d", "127.0.0.1", TD_ROOT);
	/* A coordinator only: no Unix socket to set up. */
	char mlisten[64];
	int mport = td_free_port("127.0.0.1");
	snprintf(mlisten, sizeof(mlisten), "127.0.0.1:%d", mport);
	/* The handshake timeout is long: what frees a slot is the limit, not the timeout. */
	const char *argv[] = { "--role", "coordinator", "--token-file", tokpath, "--root", d.root, "--max-conns", "16",
	                       "--max-handshakes", "16", "--max-handshakes-per-peer", "4",
	                       "--handshake-timeout", "60s", "--metrics-listen", mlisten, NULL };
	td_daemon_start(&d, argv);
	test_one_peer(&d);
	test_many_peers(&d);
	test_slow_http(mport);
	T_ASSERT(td_daemon_stop(&d) == 0);
	ckptd_secret_free(cluster);
	t_rmrf(dir);
	return T_EXIT_PASS;
}
