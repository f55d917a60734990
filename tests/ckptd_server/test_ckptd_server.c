/* The ckptd server core, end to end: a real daemon on 127.0.0.1 (free
 * port) and a Unix socket in a temp dir. STATUS over both transports;
 * refused handshakes; bad clients dropped with a log line while a good one
 * is served; the connection cap; idle timeout; socket file safety;
 * SIGTERM; the token never in ps or the log.
 * Needs CKPT_BIN (the directory holding ckptd). Exit 0 / 1 / 77. */
#include "ckptd_helper.h"

#include "wire/addr.h"
#include "wire/auth.h"
#include "wire/client.h"
#include "wire/proto.h"

typedef td_daemon daemon_t;

static char dir[512], tokpath[600], token[40];
static ckptd_secret *cluster;

static uint64_t ms_now(void)
{
	return td_ms();
}

/* Starts ckptd on 127.0.0.1 and a socket in dir, with the common flags
 * plus extra (NULL-terminated). */
static void start(daemon_t *d, const char *name, const char *const *extra)
{
	td_daemon_init(d, dir, name, "127.0.0.1", TD_SOCKET | TD_ROOT);
	const char *argv[TD_MAX_ARGS] = { "--token-file", tokpath, "--frame-timeout", "1s", "--handshake-timeout", "2s",
	                                  "--log-level", "debug", "--root", d->root };
	int n = 10;
	for (int i = 0; extra && extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	td_daemon_start(d, argv);
}

static int stop(daemon_t *d)
{
	return td_daemon_stop(d);
}

static int log_has(const daemon_t *d, const char *needle)
{
	return td_log_has(d, needle);
}

static void wait_log(const daemon_t *d, const char *needle)
{
	td_wait_log(d, needle, 10000);
}

/* A second ckptd on path that must refuse to start: exits non-zero, soon. */
static void start_refused(const char *name, const char *path)
{
	char log[600];
	int st;
	snprintf(log, sizeof(log), "%s/%s.log", dir, name);
	char root[600];
	snprintf(root, sizeof(root), "%s/%s.root", dir, name);
	mkdir(root, 0700);
	const char *argv[] = { td_ckptd_exe(), "--socket", path, "--token-file", tokpath, "--root", root, NULL };
	pid_t p = td_spawn(argv, log);
	if (td_wait_pid(p, 10000, &st) < 0) {
		kill(p, SIGKILL);
		waitpid(p, NULL, 0);
		T_FAIL("ckptd on %s was expected to refuse to start, but it runs; see %s", path, log);
	}
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) != 0);
}

static ckptd_client *connect_ok(const char *addr, const char *job, uint32_t role, const ckptd_secret *s)
{
	ckptd_client *c;
	char err[256] = "";
	int r = ckptd_client_connect(addr, job, role, s, 3000, &c, err, sizeof(err));
	if (r < 0)
		T_FAIL("connect %s job '%s': %d %s", addr, job ? job : "", r, err);
	return c;
}

/* As connect_ok, retrying while the daemon answers BUSY: connections
 * that were closed (probes, b below) count against --max-conns until the
 * daemon has seen them close. */
static ckptd_client *connect_when_free(const char *addr, const ckptd_secret *s)
{
	uint64_t end = ms_now() + 3000;
	for (;;) {
		ckptd_client *c = NULL;
		char err[256] = "";
		int r = ckptd_client_connect(addr, NULL, CKPTD_ROLE_CLI, s, 3000, &c, err, sizeof(err));
		if (r == 0)
			return c;
		if (r != -EBUSY || ms_now() >= end)
			T_FAIL("connect %s: %d %s", addr, r, err);
		usleep(20000);
	}
}

static void status_ok(ckptd_client *c, const char *job)
{
	ckptd_msg req = { .type = CKPTD_MSG_STATUS }, rep;
	if (job)
		snprintf(req.u.status.job, sizeof(req.u.status.job), "%s", job);
	int r = ckptd_client_call(c, &req, &rep);
	if (r < 0)
		T_FAIL("STATUS call: %d", r);
	if (rep.type != CKPTD_MSG_STATUS_REPLY)
		T_FAIL("STATUS answered by type %u (code %u)", rep.type, rep.u.error.code);
	T_ASSERT(rep.u.status_reply.roles == (CKPTD_SERVES_AGENT | CKPTD_SERVES_COORDINATOR));
	T_ASSERT(rep.u.status_reply.node[0]);
	ckptd_msg_free(&rep);
}

static int raw_connect(const char *addr)
{
	ckptd_addr a;
	T_ASSERT(ckptd_addr_parse(addr, CKPTD_ADDR_UNIX | CKPTD_ADDR_TCP, &a, NULL) == 0);
	int fd = ckptd_addr_connect(&a, 2000);
	T_ASSERT(fd >= 0);
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

static void raw_send(int fd, const void *p, size_t n)
{
	T_ASSERT(send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n);
}

static size_t encode(const ckptd_msg *m, uint8_t *buf, size_t cap)
{
	size_t len;
	T_ASSERT(ckptd_msg_encode(m, buf, cap, &len) == 0);
	return len;
}

/* Reads until the daemon closes (returns 1), or timeout_ms passes (0). */
static int closed_within(int fd, int timeout_ms)
{
	uint64_t end = ms_now() + (uint64_t)timeout_ms;
	uint8_t b[4096];
	while (ms_now() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, (int)(end - ms_now())) <= 0)
			return 0;
		ssize_t n = recv(fd, b, sizeof(b), 0);
		if (n <= 0)
			return 1;
	}
	return 0;
}

/* Reads one frame (plain) from a blocking socket. */
static int read_frame(int fd, ckptd_msg *m)
{
	uint8_t b[4096];
	size_t have = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	while (have < CKPTD_HEADER_LEN || have < CKPTD_HEADER_LEN + (b[12] | b[13] << 8)) {
		if (poll(&p, 1, 3000) <= 0)
			return -ETIMEDOUT;
		ssize_t n = recv(fd, b + have, sizeof(b) - have, 0);
		if (n <= 0)
			return -ECONNRESET;
		have += (size_t)n;
	}
	return ckptd_msg_decode(b, have, m, NULL);
}

/* ---------------------------------------------------------------- cases */

static void test_status(const daemon_t *d)
{
	ckptd_secret *js;
	T_OK(ckptd_secret_derive_job(cluster, "llama", &js));
	ckptd_client *u = connect_ok(d->unixa, "llama", CKPTD_ROLE_RANK, js);
	status_ok(u, NULL);
	status_ok(u, "llama");
	ckptd_client_close(u);
	ckptd_client *t = connect_ok(d->tcp, NULL, CKPTD_ROLE_CLI, cluster);
	status_ok(t, NULL);
	ckptd_client_close(t);
	ckptd_client *t2 = connect_ok(d->tcp, "llama", CKPTD_ROLE_CLI, js);
	status_ok(t2, NULL);
	ckptd_client_close(t2);
	ckptd_secret_free(js);
	fprintf(stderr, "ok: STATUS over unix and tcp, job and cluster scope\n");
}

static void test_auth_refused(const daemon_t *d)
{
	ckptd_client *c = NULL;
	ckptd_secret *wrong, *ja;
	char err[256];
	uint8_t rnd[32];
	t_fill(rnd, sizeof(rnd), 42);
	for (size_t i = 0; i < sizeof(rnd); i++)
		rnd[i] = (uint8_t)('a' + rnd[i] % 26);
	T_OK(ckptd_secret_parse(rnd, sizeof(rnd), &wrong, NULL, 0));
	/* wrong token, both scopes and transports */
	T_ERR(ckptd_client_connect(d->tcp, NULL, CKPTD_ROLE_CLI, wrong, 3000, &c, err, sizeof(err)), -EACCES);
	T_ERR(ckptd_client_connect(d->unixa, "llama", CKPTD_ROLE_RANK, wrong, 3000, &c, err, sizeof(err)), -EACCES);
	/* no token: the library refuses, and a daemon refuses any request before a handshake */
	T_ERR(ckptd_client_connect(d->tcp, NULL, CKPTD_ROLE_CLI, NULL, 3000, &c, err, sizeof(err)), -ENOKEY);
	{
		uint8_t b[256];
		ckptd_msg m = { .type = CKPTD_MSG_STATUS }, rep;
		int fd = raw_connect(d->tcp);
		raw_send(fd, b, encode(&m, b, sizeof(b)));
		T_OK(read_frame(fd, &rep));
		T_ASSERT(rep.type == CKPTD_MSG_ERROR && rep.u.error.code == CKPTD_ERR_AUTH);
		T_ASSERT(closed_within(fd, 2000));
		close(fd);
	}
	/* cross-job: job A's secret opens neither job B nor cluster scope */
	T_OK(ckptd_secret_derive_job(cluster, "jobA", &ja));
	T_ERR(ckptd_client_connect(d->unixa, "jobB", CKPTD_ROLE_RANK, ja, 3000, &c, err, sizeof(err)), -EACCES);
	T_ERR(ckptd_client_connect(d->tcp, NULL, CKPTD_ROLE_CLI, ja, 3000, &c, err, sizeof(err)), -EACCES);
	/* ... and a job-A session cannot ask about job B */
	c = connect_ok(d->unixa, "jobA", CKPTD_ROLE_RANK, ja);
	ckptd_msg req = { .type = CKPTD_MSG_STATUS }, rep;
	snprintf(req.u.status.job, sizeof(req.u.status.job), "jobB");
	T_OK(ckptd_client_call(c, &req, &rep));
	T_ASSERT(rep.type == CKPTD_MSG_ERROR && rep.u.error.code == CKPTD_ERR_DENIED);
	ckptd_client_close(c);

	/* replay: record a good handshake, play its HELLO and AUTH again */
	uint8_t hello[256], authf[256], b[256];
	size_t hl, al;
	{
		ckptd_auth *a;
		ckptd_msg m = { .type = CKPTD_MSG_HELLO }, ch;
		T_OK(ckptd_auth_new(&a));
		m.u.hello.role = CKPTD_ROLE_RANK;
		snprintf(m.u.hello.job, sizeof(m.u.hello.job), "jobA");
		T_OK(ckptd_auth_client_start(a, ja, CKPTD_ROLE_RANK, "jobA", m.u.hello.nonce));
		hl = encode(&m, hello, sizeof(hello));
		int fd = raw_connect(d->tcp);
		raw_send(fd, hello, hl);
		T_OK(read_frame(fd, &ch));
		T_ASSERT(ch.type == CKPTD_MSG_CHALLENGE);
		ckptd_msg am = { .type = CKPTD_MSG_AUTH }, ok;
		T_OK(ckptd_auth_client_respond(a, CKPTD_VERSION_PACK(ch.major, ch.minor), ch.u.challenge.nonce, am.u.auth.mac));
		al = encode(&am, authf, sizeof(authf));
		raw_send(fd, authf, al);
		T_OK(read_frame(fd, &ok));
		T_ASSERT(ok.type == CKPTD_MSG_AUTH_OK);
		T_OK(ckptd_auth_client_verify_server(a, ok.u.auth_ok.mac));
		close(fd);
		ckptd_auth_free(a);
	}
	{
		ckptd_msg ch, rep2;
		int fd = raw_connect(d->tcp);
		raw_send(fd, hello, hl);
		T_OK(read_frame(fd, &ch));
		T_ASSERT(ch.type == CKPTD_MSG_CHALLENGE);
		raw_send(fd, authf, al);
		T_OK(read_frame(fd, &rep2));
		T_ASSERT(rep2.type == CKPTD_MSG_ERROR && rep2.u.error.code == CKPTD_ERR_AUTH);
		T_ASSERT(closed_within(fd, 2000));
		close(fd);
	}
	(void)b;
	ckptd_secret_free(ja);
	ckptd_secret_free(wrong);
	fprintf(stderr, "ok: wrong token, no token, cross-job, replayed handshake refused\n");
}

/* A bad client on its own connection, while a good one keeps getting
 * STATUS answers quickly. */
static void with_good_client(const daemon_t *d, ckptd_client *good, int bad_fd, const char *what,
                             void (*step)(int fd, int i), int steps, int step_ms)
{
	int closed = 0;
	for (int i = 0; i < steps && !closed; i++) {
		if (step)
			step(bad_fd, i);
		uint64_t t0 = ms_now();
		status_ok(good, NULL);
		if (ms_now() - t0 > 500)
			T_FAIL("%s: good client waited %llu ms", what, (unsigned long long)(ms_now() - t0));
		struct pollfd p = { .fd = bad_fd, .events = POLLIN };
		if (poll(&p, 1, step_ms) > 0) {
			uint8_t b[512];
			ssize_t n = recv(bad_fd, b, sizeof(b), MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN))
				closed = 1;
		}
	}
	if (!closed && !closed_within(bad_fd, 3000))
		T_FAIL("%s: bad client was not dropped", what);
	(void)d;
}

static uint8_t slow_frame[256];
static size_t slow_len;
static void slow_step(int fd, int i)
{
	if ((size_t)i < slow_len)
		(void)!send(fd, slow_frame + i, 1, MSG_NOSIGNAL);
}

static void test_bad_clients(const daemon_t *d)
{
	ckptd_client *good = connect_ok(d->tcp, NULL, CKPTD_ROLE_CLI, cluster);

	int fd = raw_connect(d->tcp);
	const char garbage[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	raw_send(fd, garbage, sizeof(garbage) - 1);
	with_good_client(d, good, fd, "garbage", NULL, 20, 100);
	close(fd);
	wait_log(d, "dropped: bad frame magic");

	fd = raw_connect(d->unixa);
	uint8_t h[CKPTD_HEADER_LEN];
	ckptd_frame_header fh = { .major = 1, .minor = 0, .type = CKPTD_MSG_HELLO, .length = 8u << 20 };
	ckptd_header_encode(h, &fh);
	raw_send(fd, h, sizeof(h));
	with_good_client(d, good, fd, "oversized", NULL, 20, 100);
	close(fd);
	wait_log(d, "dropped: frame over the size limit");

	ckptd_msg m = { .type = CKPTD_MSG_HELLO };
	m.u.hello.role = CKPTD_ROLE_CLI;
	slow_len = encode(&m, slow_frame, sizeof(slow_frame));
	fd = raw_connect(d->tcp);
	raw_send(fd, slow_frame, slow_len / 2);
	status_ok(good, NULL);
	close(fd);
	wait_log(d, "closed in the middle of a frame (truncated)");

	/* one byte per 200 ms: the 1 s frame timeout drops it */
	fd = raw_connect(d->tcp);
	uint64_t t0 = ms_now();
	with_good_client(d, good, fd, "slowloris", slow_step, (int)slow_len, 200);
	uint64_t took = ms_now() - t0;
	close(fd);
	wait_log(d, "dropped: frame not complete within the frame timeout");
	T_ASSERT(took < 4000);

	/* a sealed session that sends an unsealed frame is dropped too */
	status_ok(good, NULL);
	ckptd_client_close(good);
	fprintf(stderr, "ok: garbage, oversized, truncated, slowloris dropped; good client served (slowloris gone after %llu ms)\n",
	        (unsigned long long)took);
}

static void test_cap_idle(void)
{
	daemon_t d2;
	/* A stale socket file at the path is replaced... */
	char path[600];
	snprintf(path, sizeof(path), "%s/d2.sock", dir);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	T_ASSERT(strlen(path) < sizeof(sun.sun_path));
	memcpy(sun.sun_path, path, strlen(path) + 1);
	T_ASSERT(bind(s, (struct sockaddr *)&sun, sizeof(sun)) == 0);
	close(s);
	const char *extra[] = { "--max-conns", "2", "--idle-timeout", "1s", NULL };
	start(&d2, "d2", extra);
	wait_log(&d2, "replaced stale socket");
	struct stat st;
	T_ASSERT(stat(d2.sock, &st) == 0 && (st.st_mode & 0777) == 0600);

	/* ... but a live daemon's socket is not */
	start_refused("d2-second", d2.sock);
	T_ASSERT(stat(d2.sock, &st) == 0);

	/* the readiness probe and the second daemon's liveness probe have
	 * connected and closed: a and b wait until they are gone */
	ckptd_client *a = connect_when_free(d2.unixa, cluster);
	ckptd_client *b = connect_when_free(d2.tcp, cluster);
	ckptd_client *c = NULL;
	char err[256];
	T_ERR(ckptd_client_connect(d2.tcp, NULL, CKPTD_ROLE_CLI, cluster, 3000, &c, err, sizeof(err)), -EBUSY);
	wait_log(&d2, "refused: connection limit (2) reached");
	status_ok(a, NULL);
	ckptd_client_close(b);
	c = connect_when_free(d2.tcp, cluster);
	status_ok(c, NULL);
	ckptd_client_close(c);
	/* idle: silent for longer than 1 s */
	usleep(1600000);
	wait_log(&d2, "idle for longer than the idle timeout"); /* closed by then, however loaded the machine */
	ckptd_msg req = { .type = CKPTD_MSG_STATUS }, rep;
	int r = ckptd_client_call(a, &req, &rep);
	T_ASSERT(r < 0 || rep.type == CKPTD_MSG_ERROR);
	if (r == 0)
		ckptd_msg_free(&rep);
	ckptd_client_close(a);
	T_ASSERT(stop(&d2) == 0);
	T_ASSERT(access(d2.sock, F_OK) != 0);
	fprintf(stderr, "ok: stale socket replaced, live one kept, 0600, connection cap, idle timeout\n");
}

static void test_not_a_socket(void)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/plain-file", dir);
	FILE *f = fopen(path, "w");
	fputs("keep me\n", f);
	fclose(f);
	start_refused("plain-file", path);
	struct stat st;
	T_ASSERT(stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 8);
	fprintf(stderr, "ok: a file that is not a socket is never replaced\n");
}

static void test_token_hidden(const daemon_t *d)
{
	char cmd[700], out[65536];
	snprintf(cmd, sizeof(cmd), "ps -eo args 2>/dev/null; cat /proc/%d/cmdline", (int)d->pid);
	FILE *p = popen(cmd, "r");
	T_ASSERT(p);
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = 0;
	pclose(p);
	for (size_t i = 0; i < n; i++)
		if (!out[i])
			out[i] = ' ';
	T_ASSERT(strstr(out, "ckptd") != NULL);
	T_ASSERT(strstr(out, token) == NULL);
	T_ASSERT(!log_has(d, token));
}

int main(void)
{
	td_require_ckptd();
	snprintf(dir, sizeof(dir), "%s", t_tmpdir("ckptd-server"));
	snprintf(tokpath, sizeof(tokpath), "%s/token", dir);
	td_token_write(tokpath, token, sizeof(token));
	char err[256];
	T_OK(ckptd_secret_load_file(tokpath, &cluster, err, sizeof(err)));

	daemon_t d;
	start(&d, "d1", NULL);
	struct stat st;
	T_ASSERT(stat(d.sock, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600);
	test_status(&d);
	test_auth_refused(&d);
	test_bad_clients(&d);
	test_token_hidden(&d);
	test_cap_idle();
	test_not_a_socket();

	/* SIGTERM: exit 0, socket removed, no token anywhere in the log */
	int rc = stop(&d);
	if (rc != 0)
		T_FAIL("ckptd exited %d on SIGTERM; see %s", rc, d.log);
	T_ASSERT(access(d.sock, F_OK) != 0);
	T_ASSERT(log_has(&d, "stopping (SIGTERM)"));
	T_ASSERT(!log_has(&d, token));
	fprintf(stderr, "ok: SIGTERM exits 0 and removes the socket; token in neither ps nor log\n");
	ckptd_secret_free(cluster);
	t_rmrf(dir);
	return T_EXIT_PASS;
}
