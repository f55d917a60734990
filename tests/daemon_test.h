/* Helpers of the tests that run libckpt against a real ckptd (--role both):
 * a token file, the daemon as a child that dies with the test and writes
 * its log to a file (never to CTest's pipe), ranks in child processes, and
 * the coordinator's view of a version through `ckpt ls --daemon`. */
#ifndef CKPT_DAEMON_TEST_H
#define CKPT_DAEMON_TEST_H

#include "helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct dt_env {
	char dir[512], root[600], droot[600], sock[600], addr[620], tcp[64], tok[600], log[600];
	pid_t daemon;
	int port;
} dt_env;

/* Skips the test (exit 77) without the daemon binary; fills the paths under
 * a fresh directory and writes a 0600 token. */
static inline void dt_init(dt_env *e, const char *tag)
{
	const char *bin = getenv("CKPT_BIN");
	char exe[600];
	if (!bin) {
		fprintf(stderr, "skip: CKPT_BIN not set\n");
		exit(T_EXIT_SKIP);
	}
	snprintf(exe, sizeof(exe), "%s/ckptd", bin);
	if (access(exe, X_OK) != 0) {
		fprintf(stderr, "skip: no %s\n", exe);
		exit(T_EXIT_SKIP);
	}
	signal(SIGPIPE, SIG_IGN);
	unsetenv("CKPT_DAEMON");
	unsetenv("CKPT_DAEMON_REQUIRED");
	unsetenv("CKPT_TOKEN");
	unsetenv("CKPT_TOKEN_FILE");
	unsetenv("CKPT_FAULT");
	unsetenv("CKPT_TIERS");
	memset(e, 0, sizeof(*e));
	snprintf(e->dir, sizeof(e->dir), "%s", t_tmpdir(tag));
	snprintf(e->root, sizeof(e->root), "%s/root", e->dir);
	snprintf(e->droot, sizeof(e->droot), "%s/droot", e->dir);
	snprintf(e->sock, sizeof(e->sock), "%s/a.sock", e->dir);
	snprintf(e->addr, sizeof(e->addr), "unix:%s", e->sock);
	snprintf(e->tok, sizeof(e->tok), "%s/token", e->dir);
	snprintf(e->log, sizeof(e->log), "%s/ckptd.log", e->dir);
	T_ASSERT(mkdir(e->droot, 0700) == 0);
	int fd = open(e->tok, O_WRONLY | O_CREAT | O_EXCL, 0600);
	T_ASSERT(fd >= 0 && write(fd, "0123456789abcdefghijklmnopqrstuv", 32) == 32);
	close(fd);
}

/* A TCP port nobody listens on right now (the kernel's pick for port 0). */
static inline int dt_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	T_ASSERT(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	T_ASSERT(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

static inline int dt_connects(const struct sockaddr *a, socklen_t len)
{
	int fd = socket(a->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ok = fd >= 0 && connect(fd, a, len) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Starts `ckptd --role both` on e->sock with a pool of pool_size and, with
 * tcp, on 127.0.0.1 at a free port (e->tcp). Another process may take the
 * port between our pick and the daemon's bind: then it is tried again. */
static inline void dt_start(dt_env *e, const char *pool_size, int tcp)
{
	char exe[600], listen_at[64];
	snprintf(exe, sizeof(exe), "%s/ckptd", getenv("CKPT_BIN"));
	for (int attempt = 0; attempt < 5; attempt++) {
		e->port = tcp ? dt_free_port() : 0;
		snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%d", e->port);
		snprintf(e->tcp, sizeof(e->tcp), "%s", listen_at);
		unlink(e->sock);
		e->daemon = fork();
		T_ASSERT(e->daemon >= 0);
		if (e->daemon == 0) {
			/* Dies with the test, and keeps CTest's output pipe free. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			int fd = open(e->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
			dup2(fd, 1);
			dup2(fd, 2);
			if (tcp)
				execl(exe, exe, "--role", "both", "--root", e->droot, "--socket", e->sock, "--listen",
				      listen_at, "--token-file", e->tok, "--pool-size", pool_size, "--node", "n0",
				      (char *)NULL);
			else
				execl(exe, exe, "--role", "both", "--root", e->droot, "--socket", e->sock, "--token-file",
				      e->tok, "--pool-size", pool_size, "--node", "n0", (char *)NULL);
			_exit(127);
		}
		struct sockaddr_un su = { .sun_family = AF_UNIX };
		T_ASSERT(strlen(e->sock) < sizeof(su.sun_path));
		memcpy(su.sun_path, e->sock, strlen(e->sock) + 1);
		struct sockaddr_in si = { .sin_family = AF_INET, .sin_port = htons((uint16_t)e->port),
		                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		for (int i = 0; i < 500; i++) {
			if (dt_connects((struct sockaddr *)&su, sizeof(su)) &&
			    (!tcp || dt_connects((struct sockaddr *)&si, sizeof(si))))
				return;
			int st;
			if (waitpid(e->daemon, &st, WNOHANG) == e->daemon) {
				e->daemon = 0;
				break;
			}
			usleep(20000);
		}
		if (e->daemon) {
			kill(e->daemon, SIGKILL);
			waitpid(e->daemon, NULL, 0);
			e->daemon = 0;
		}
	}
	T_FAIL("ckptd did not come up; see %s", e->log);
}

static inline void dt_stop(dt_env *e)
{
	if (e->daemon > 0) {
		kill(e->daemon, SIGKILL);
		waitpid(e->daemon, NULL, 0);
	}
	e->daemon = 0;
}

/* Runs fn in a child process (a rank); returns its exit status, or 128 +
 * the signal that killed it. With errlog, the child's stderr goes there. */
static inline int dt_child(void (*fn)(const dt_env *), const dt_env *e, const char *errlog)
{
	fflush(stderr);
	pid_t p = fork();
	T_ASSERT(p >= 0);
	if (p == 0) {
		if (errlog) {
			int fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0 || dup2(fd, 2) < 0)
				_exit(T_EXIT_FAIL);
			close(fd);
		}
		fn(e);
		_exit(T_EXIT_PASS);
	}
	int st;
	T_ASSERT(waitpid(p, &st, 0) == p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* How often `needle` occurs in the file at path (0 if unreadable). */
static inline int dt_count(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[2048];
	int n = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		for (char *p = line; (p = strstr(p, needle)); p += strlen(needle))
			n++;
	fclose(f);
	return n;
}

/* The coordinator's view: the tiers ("local_mem,local_disk") at which
 * version is COMMITTED, as `ckpt ls --daemon addr` prints them; "" if it is
 * not listed or not committed. */
static inline void dt_tiers(const dt_env *e, const char *addr, const char *job, uint64_t version, char *out,
                            size_t cap)
{
	char cmd[2000], line[512];
	snprintf(cmd, sizeof(cmd), "'%s/ckpt' ls --daemon '%s' --token-file '%s' --job '%s' 2>>'%s'",
	         getenv("CKPT_BIN"), addr, e->tok, job, e->log);
	out[0] = 0;
	FILE *p = popen(cmd, "r");
	T_ASSERT(p);
	while (fgets(line, sizeof(line), p)) {
		char j[80], state[32], tiers[128];
		unsigned long long v;
		if (sscanf(line, "%79s %llu %31s %127s", j, &v, state, tiers) == 4 && v == version &&
		    !strcmp(state, "COMMITTED"))
			snprintf(out, cap, "%s", tiers);
	}
	pclose(p);
}

/* Waits up to 10 s for version to be COMMITTED at a tier named `want`
 * (commits are announced asynchronously); returns the tiers seen last. */
static inline int dt_wait_tier(const dt_env *e, const char *addr, const char *job, uint64_t version,
                               const char *want, char *tiers, size_t cap)
{
	for (int i = 0; i < 100; i++) {
		dt_tiers(e, addr, job, version, tiers, cap);
		if (strstr(tiers, want))
			return 1;
		usleep(100000);
	}
	return 0;
}

#endif
