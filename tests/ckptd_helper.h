/* Starting ckptd from a test: one place for what every daemon test needs.
 * A daemon started here dies with the test (PR_SET_PDEATHSIG), writes
 * stdout and stderr to its own log file (a daemon holding CTest's output
 * pipe would keep CTest waiting), listens on loopback only, on a port that
 * was free (and is picked again if another process took it meanwhile), and
 * counts as started once its socket accepts connections.
 *
 *   td_daemon d;
 *   td_require_ckptd();                            skips (77) without ckptd
 *   td_token_write(dir/token, ...);                a 0600 cluster token
 *   td_daemon_init(&d, dir, "n1", "127.0.0.2", TD_SOCKET | TD_ROOT);
 *   td_daemon_start(&d, args);                     args: NULL-terminated
 *   ...  td_daemon_kill9(&d); td_daemon_start(&d, NULL);  same flags, port
 *   T_ASSERT(td_daemon_stop(&d) == 0);             SIGTERM, then SIGKILL
 *
 * Failures end the test through T_FAIL (helpers.h). */
#ifndef CKPT_TEST_CKPTD_HELPER_H
#define CKPT_TEST_CKPTD_HELPER_H

#include "helpers.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#define TD_MAX_ARGS 48
#define TD_START_MS 15000 /* a daemon that does not accept within this failed */

enum { TD_SOCKET = 1, TD_ROOT = 2 };

typedef struct td_daemon {
	pid_t pid;                /* 0: not running */
	char name[32];
	char host[40];            /* TCP listen host ("127.0.0.N"); "" for no TCP */
	int port;
	char tcp[64];             /* "host:port" */
	char sock[600];           /* Unix socket path; "" for none */
	char unixa[620];          /* "unix:" + sock */
	char log[600];            /* stdout and stderr, appended across restarts */
	char root[600];           /* a directory made for --root (TD_ROOT); the caller passes it */
	int started;              /* started once: restarts keep the port */
	char netns[64];           /* a network namespace the test made (tests/netns_helper.h): the
	                           * daemon runs there, on a fixed port; "" for the test's own */
	/* the caller's flags, copied, reused by restarts */
	char argbuf[4096];
	size_t arglen;
	const char *args[TD_MAX_ARGS];
	int nargs;
} td_daemon;

static inline uint64_t td_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The ckptd binary ($CKPT_BIN/ckptd); exits 77 (skip) when there is none. */
static inline const char *td_ckptd_exe(void)
{
	static char exe[600];
	const char *bin = getenv("CKPT_BIN");
	if (!bin || !*bin) {
		fprintf(stderr, "skip: CKPT_BIN not set\n");
		exit(T_EXIT_SKIP);
	}
	snprintf(exe, sizeof(exe), "%s/ckptd", bin);
	if (access(exe, X_OK) != 0) {
		fprintf(stderr, "skip: no %s\n", exe);
		exit(T_EXIT_SKIP);
	}
	return exe;
}

/* Skips without ckptd; a peer that goes away must not kill the test. */
static inline void td_require_ckptd(void)
{
	(void)td_ckptd_exe();
	signal(SIGPIPE, SIG_IGN);
}

/* A TCP port on host (a loopback address) that was free a moment ago. */
static inline int td_free_port(const char *host)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t sl = sizeof(a);
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		T_FAIL("td_free_port: '%s' is not an IPv4 address", host);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		T_FAIL("cannot bind %s:0: %s", host, strerror(errno));
	T_ASSERT(getsockname(fd, (struct sockaddr *)&a, &sl) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* Writes a fresh random cluster token (32 letters and digits, then a
 * newline, which is not part of the secret) to path, mode 0600. The token
 * goes to tok (cap >= 33) when tok is not NULL. */
static inline void td_token_write(const char *path, char *tok, size_t cap)
{
	static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	uint8_t raw[32];
	char t[34];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	t_fill(raw, sizeof(raw), (uint64_t)getpid() ^ (uint64_t)ts.tv_sec ^ (uint64_t)ts.tv_nsec << 20);
	for (size_t i = 0; i < 32; i++)
		t[i] = al[raw[i] % 62];
	t[32] = '\n';
	t[33] = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		T_FAIL("token %s: %s", path, strerror(errno));
	T_ASSERT(write(fd, t, 33) == 33);
	close(fd);
	if (tok) {
		T_ASSERT(cap >= 33);
		memcpy(tok, t, 32);
		tok[32] = 0;
	}
}

/* Describes a daemon: its log (and with TD_SOCKET its socket, with TD_ROOT
 * a fresh directory for --root) under dir, named after name; host: its TCP
 * listen address, NULL for none. Starts nothing. */
static inline void td_daemon_init(td_daemon *d, const char *dir, const char *name, const char *host, int flags)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->log, sizeof(d->log), "%s/%s.log", dir, name);
	if (flags & TD_SOCKET) {
		snprintf(d->sock, sizeof(d->sock), "%s/%s.sock", dir, name);
		snprintf(d->unixa, sizeof(d->unixa), "unix:%s", d->sock);
		struct sockaddr_un sun;
		if (strlen(d->sock) >= sizeof(sun.sun_path))
			T_FAIL("socket path too long: %s (set TMPDIR shorter)", d->sock);
	}
	if (flags & TD_ROOT) {
		snprintf(d->root, sizeof(d->root), "%s/%s.root", dir, name);
		if (mkdir(d->root, 0700) != 0 && errno != EEXIST)
			T_FAIL("mkdir %s: %s", d->root, strerror(errno));
	}
	if (host) {
		snprintf(d->host, sizeof(d->host), "%s", host);
		d->port = td_free_port(host);
		snprintf(d->tcp, sizeof(d->tcp), "%s:%d", host, d->port);
	}
}

/* As td_daemon_init with TD_SOCKET (the test reaches it over its Unix
 * socket: a path works across network namespaces), for a daemon in
 * network namespace netns listening on host:port there (a namespace of the
 * test's own: nothing else holds the port). */
static inline void td_daemon_init_ns(td_daemon *d, const char *dir, const char *name, const char *netns,
                                     const char *host, int port, int flags)
{
	td_daemon_init(d, dir, name, NULL, flags | TD_SOCKET);
	snprintf(d->netns, sizeof(d->netns), "%s", netns);
	snprintf(d->host, sizeof(d->host), "%s", host);
	d->port = port;
	snprintf(d->tcp, sizeof(d->tcp), "%s:%d", host, port);
}

/* Replaces the daemon's flags (copied). */
static inline void td_daemon_set_args(td_daemon *d, const char *const *args)
{
	d->nargs = 0;
	d->arglen = 0;
	for (int i = 0; args && args[i]; i++) {
		size_t n = strlen(args[i]) + 1;
		if (d->nargs + 1 >= TD_MAX_ARGS || d->arglen + n > sizeof(d->argbuf))
			T_FAIL("ckptd %s: too many flags", d->name);
		memcpy(d->argbuf + d->arglen, args[i], n);
		d->args[d->nargs++] = d->argbuf + d->arglen;
		d->arglen += n;
	}
}

/* In a child: joins the named network namespace (/run/netns/NAME, made by
 * `ip netns add`). Returns 0 or -errno. */
static inline int td_enter_netns(const char *netns)
{
	char p[128];
	snprintf(p, sizeof(p), "/run/netns/%s", netns);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = setns(fd, CLONE_NEWNET) == 0 ? 0 : -errno;
	close(fd);
	return r;
}

/* Forks and execs argv (argv[0]: the program) with stdin from /dev/null and
 * stdout and stderr appended to log, in network namespace netns (NULL or
 * "": the test's). The child dies with this process and does not see
 * CKPT_TOKEN (secrets come from token files). */
static inline pid_t td_spawn_ns(const char *const *argv, const char *log, const char *netns)
{
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent) /* the test died before prctl took hold */
			_exit(127);
		if (netns && netns[0] && td_enter_netns(netns) < 0)
			_exit(126);
		int in = open("/dev/null", O_RDONLY);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (in < 0 || fd < 0)
			_exit(127);
		dup2(in, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		/* nothing of the test's (its sockets, pipes to ranks) in the daemon */
		for (int i = 3; i < 1024; i++)
			close(i);
		unsetenv("CKPT_TOKEN");
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	return pid;
}

static inline pid_t td_spawn(const char *const *argv, const char *log)
{
	return td_spawn_ns(argv, log, NULL);
}

/* Waits up to timeout_ms (< 0: forever) for pid. Returns 0 and its wait
 * status in *st, or -ETIMEDOUT. */
static inline int td_wait_pid(pid_t pid, int timeout_ms, int *st)
{
	uint64_t end = td_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	for (;;) {
		pid_t r = waitpid(pid, st, timeout_ms < 0 ? 0 : WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			T_FAIL("waitpid %d: %s", (int)pid, strerror(errno));
		if (timeout_ms >= 0 && td_ms() >= end)
			return -ETIMEDOUT;
		usleep(5000);
	}
}

/* A wait status as one number: the exit code, or 128 + the signal. */
static inline int td_status_code(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

/* 1 if the file from byte `from` on contains needle. */
static inline int td_file_has(const char *path, long from, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int found = 0;
	if (!f)
		return 0;
	if (from > 0)
		fseek(f, from, SEEK_SET);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static inline int td_log_has(const td_daemon *d, const char *needle)
{
	return td_file_has(d->log, 0, needle);
}

/* Waits up to timeout_ms for a log line containing needle. */
static inline void td_wait_log(const td_daemon *d, const char *needle, int timeout_ms)
{
	uint64_t end = td_ms() + (uint64_t)timeout_ms;
	while (!td_log_has(d, needle)) {
		if (td_ms() >= end)
			T_FAIL("no log line containing '%s' in %s", needle, d->log);
		usleep(10000);
	}
}

/* Copies the last lines of a file to stderr (what a failure report needs). */
static inline void td_print_tail(const char *path, int lines)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char (*ring)[512] = calloc((size_t)lines, 512);
	long n = 0;
	while (ring && fgets(ring[n % lines], 512, f))
		n++;
	fclose(f);
	fprintf(stderr, "---- last lines of %s\n", path);
	for (long i = n > lines ? n - lines : 0; ring && i < n; i++)
		fputs(ring[i % lines], stderr);
	fprintf(stderr, "----\n");
	free(ring);
}

static inline long td_file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* 1 if process pid holds a listening TCP socket on host:port (Linux
 * /proc): a connection to the port alone could reach whoever else took it. */
static inline int td_pid_listens(pid_t pid, const char *host, int port)
{
	struct in_addr ia;
	char line[512], want[64], fdpath[300], target[64];
	unsigned long addr, inode;
	unsigned lport, state;
	int found = 0;
	T_ASSERT(inet_pton(AF_INET, host, &ia) == 1);
	FILE *f = fopen("/proc/net/tcp", "r");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
		if (sscanf(line, " %*u: %lx:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &addr, &lport, &state,
		           &inode) != 4 || state != 0x0A || lport != (unsigned)port || (uint32_t)addr != ia.s_addr)
			continue;
		snprintf(want, sizeof(want), "socket:[%lu]", inode);
		snprintf(fdpath, sizeof(fdpath), "/proc/%d/fd", (int)pid);
		DIR *d = opendir(fdpath);
		struct dirent *e;
		while (d && !found && (e = readdir(d))) {
			snprintf(fdpath, sizeof(fdpath), "/proc/%d/fd/%s", (int)pid, e->d_name);
			ssize_t n = readlink(fdpath, target, sizeof(target) - 1);
			if (n > 0) {
				target[n] = 0;
				found = !strcmp(target, want);
			}
		}
		if (d)
			closedir(d);
	}
	fclose(f);
	return found;
}

/* 1 once pid runs exe (a forked child still holds the test's files). */
static inline int td_pid_runs(pid_t pid, const char *exe)
{
	char p[64], have[4096], want[4096];
	snprintf(p, sizeof(p), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(p, have, sizeof(have) - 1);
	if (n <= 0 || !realpath(exe, want))
		return 0;
	have[n] = 0;
	return !strcmp(have, want);
}

/* 1 once the daemon is ready: its Unix socket accepts a connection (ckptd
 * binds its TCP address first, so that one is bound too), or, without a
 * socket, it listens on its TCP port. */
static inline int td_daemon_accepts(const td_daemon *d)
{
	if (!d->sock[0])
		return td_pid_runs(d->pid, td_ckptd_exe()) && td_pid_listens(d->pid, d->host, d->port);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	memcpy(a.sun_path, d->sock, strlen(d->sock) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Starts the daemon: ckptd [--listen host:port] [--socket path] flags,
 * where flags are args (copied and kept; NULL reuses the previous ones).
 * Returns once it accepts connections; a daemon that exits first fails
 * the test with its log, except that a port taken meanwhile by another
 * process is replaced by a fresh one (on a first start only: a restart
 * keeps its address, others may know it). */
static inline void td_daemon_start(td_daemon *d, const char *const *args)
{
	const char *exe = td_ckptd_exe();
	if (args)
		td_daemon_set_args(d, args);
	T_ASSERT(d->pid <= 0);
	for (int attempt = 0;; attempt++) {
		const char *argv[TD_MAX_ARGS + 8];
		int n = 0;
		argv[n++] = exe;
		if (d->host[0]) {
			argv[n++] = "--listen";
			argv[n++] = d->tcp;
		}
		if (d->sock[0]) {
			argv[n++] = "--socket";
			argv[n++] = d->sock;
		}
		for (int i = 0; i < d->nargs; i++)
			argv[n++] = d->args[i];
		argv[n] = NULL;
		long logpos = td_file_size(d->log);
		d->pid = td_spawn_ns(argv, d->log, d->netns);
		uint64_t end = td_ms() + TD_START_MS;
		int st, exited = 0;
		while (!exited && td_ms() < end) {
			if (td_daemon_accepts(d)) {
				d->started = 1;
				return;
			}
			if (waitpid(d->pid, &st, WNOHANG) == d->pid)
				exited = 1;
			else
				usleep(10000);
		}
		if (!exited) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &st, 0);
			d->pid = 0;
			td_print_tail(d->log, 30);
			T_FAIL("ckptd %s did not accept connections within %d ms; see %s", d->name, TD_START_MS, d->log);
		}
		d->pid = 0;
		int in_use = d->host[0] && td_file_has(d->log, logpos, "Address already in use");
		if (in_use && attempt < 5) {
			if (!d->started && !d->netns[0]) {
				d->port = td_free_port(d->host);
				snprintf(d->tcp, sizeof(d->tcp), "%s:%d", d->host, d->port);
			} else {
				usleep(200000); /* our own port: wait for whoever holds it */
			}
			continue;
		}
		td_print_tail(d->log, 30);
		T_FAIL("ckptd %s exited at start (status %d); see %s", d->name, td_status_code(st), d->log);
	}
}

/* Waits, up to timeout_ms, until process pid has exited (a zombie or
 * gone), for a process that cannot wait for it (not its parent): a SIGKILL
 * is delivered asynchronously. Returns 0 once it has, -1 at the timeout. */
static inline int td_wait_exited(pid_t pid, int timeout_ms)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	uint64_t end = td_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	for (;;) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return 0;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[n > 0 ? n : 0] = 0;
		const char *rp = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold anything */
		if (n <= 0 || (rp && (rp[1] == 0 || rp[2] == 'Z' || rp[2] == 'X')))
			return 0;
		if (td_ms() >= end)
			return -1;
		usleep(5000);
	}
}

/* SIGKILL, reaped. */
static inline void td_daemon_kill9(td_daemon *d)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
}

/* SIGTERM, then SIGKILL if it has not exited within 10 s. Returns its exit
 * code (128 + signal if a signal ended it), or -1 if it had to be killed
 * or was not running. */
static inline int td_daemon_stop(td_daemon *d)
{
	int st = 0;
	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	if (td_wait_pid(d->pid, 10000, &st) == 0) {
		d->pid = 0;
		return td_status_code(st);
	}
	fprintf(stderr, "ckptd %s ignored SIGTERM for 10 s; killing it\n", d->name);
	td_daemon_kill9(d);
	return -1;
}

#endif
