/* N nodes of a cluster as network namespaces the test makes itself, for
 * multi-node tests on one machine:
 *
 *   switch namespace  ckS<pid>: a bridge br0, one port p<i> per node
 *   node namespace    ckN<pid>_<i>: lo and n<i> (a veth to p<i>), with the
 *                     private address 10.213.0.<i+1>/24, and no other
 *                     route: nothing a test sends leaves the namespaces
 *
 * Nothing is made in the test's own namespace. A reaper process (its own
 * session, stdio on /dev/null) deletes every namespace when the test ends,
 * however it ends (a failed check, a crash, CTest's kill at the timeout).
 * Where namespaces cannot be made (not root, no `ip`, no CAP_SYS_ADMIN in
 * a container), tn_create says why and the test skips (77).
 *
 *   tn_cluster c;
 *   if (tn_create(&c, 3) < 0) return T_EXIT_SKIP;
 *   ... td_daemon_init_ns(&d, dir, "n1", c.ns[0], c.addr[0], 7001, TD_ROOT); ...
 *   ... in a forked rank: td_enter_netns(c.ns[1]) ...
 *   tn_link(&c, 1, 0);             partition node 1: its port drops everything
 *   tn_link(&c, 1, 1);             healed
 *   tn_kill_all(&c, 1);            SIGKILL to every process in node 1
 *   tn_empty(&c, 1, 10000);        ... and wait until none is left in it
 *   tn_destroy(&c);
 */
#ifndef CKPT_TEST_NETNS_HELPER_H
#define CKPT_TEST_NETNS_HELPER_H

#include "ckptd_helper.h"

#include <stdarg.h>

#define TN_MAX 16

typedef struct tn_cluster {
	int n;
	char sw[32];
	char ns[TN_MAX][32];
	char addr[TN_MAX][20];
	int reaper_fd; /* write end of the reaper's pipe; closed: it cleans up */
} tn_cluster;

/* Runs a shell command (built from the test's own names only); returns its
 * exit code. Output goes to /dev/null unless loud. */
static inline int tn_sh(int loud, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int tn_sh(int loud, const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof(cmd) - 32, fmt, ap);
	va_end(ap);
	T_ASSERT(n > 0 && (size_t)n < sizeof(cmd) - 32);
	if (!loud)
		strcat(cmd, " >/dev/null 2>&1");
	int st = system(cmd);
	return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static inline void tn_delete_all(const tn_cluster *c)
{
	for (int i = 0; i < c->n; i++)
		tn_sh(0, "ip netns del %s", c->ns[i]);
	tn_sh(0, "ip netns del %s", c->sw);
}

/* The reaper: waits for the test's end (its pipe's write end closes when
 * the test exits or dies), then deletes the namespaces. */
static inline void tn_start_reaper(tn_cluster *c)
{
	int fds[2];
	T_ASSERT(pipe(fds) == 0);
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		setsid(); /* out of the test's process group: CTest's kill misses it */
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		for (int i = 3; i < 1024; i++)
			if (i != fds[0])
				close(i);
		char b;
		for (;;) {
			ssize_t r = read(fds[0], &b, 1);
			if (r == 0 || (r < 0 && errno != EINTR))
				break;
		}
		tn_delete_all(c);
		_exit(0);
	}
	close(fds[0]);
	c->reaper_fd = fds[1];
	fcntl(c->reaper_fd, F_SETFD, FD_CLOEXEC);
}

/* Makes n (<= TN_MAX) nodes on one bridge. Returns 0, or -1 (said why on
 * stderr) where namespaces cannot be made here: the test skips. */
static inline int tn_create(tn_cluster *c, int n)
{
	memset(c, 0, sizeof(*c));
	T_ASSERT(n > 0 && n <= TN_MAX);
	c->reaper_fd = -1;
	int id = (int)getpid();
	snprintf(c->sw, sizeof(c->sw), "ckS%d", id);
	if (geteuid() != 0) {
		fprintf(stderr, "skip: network namespaces need root\n");
		return -1;
	}
	if (tn_sh(0, "ip -V") != 0) {
		fprintf(stderr, "skip: no `ip` command (iproute2)\n");
		return -1;
	}
	for (int i = 0; i < n; i++) { /* named first: the reaper deletes these */
		snprintf(c->ns[i], sizeof(c->ns[i]), "ckN%d_%d", id, i);
		snprintf(c->addr[i], sizeof(c->addr[i]), "10.213.0.%d", i + 1);
	}
	c->n = n;
	tn_start_reaper(c);
	if (tn_sh(0, "ip netns add %s", c->sw) != 0 || tn_sh(0, "ip -n %s link set lo up", c->sw) != 0) {
		fprintf(stderr, "skip: `ip netns add` fails here (no CAP_SYS_ADMIN, or no /run/netns)\n");
		tn_delete_all(c);
		return -1;
	}
	if (tn_sh(0, "ip -n %s link add br0 type bridge", c->sw) != 0 || tn_sh(0, "ip -n %s link set br0 up", c->sw) != 0) {
		fprintf(stderr, "skip: no bridge device in a namespace here\n");
		tn_delete_all(c);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (tn_sh(1, "ip netns add %s", c->ns[i]) != 0 ||
		    tn_sh(1, "ip -n %s link add n%d type veth peer name p%d", c->sw, i, i) != 0 ||
		    tn_sh(1, "ip -n %s link set n%d netns %s", c->sw, i, c->ns[i]) != 0 ||
		    tn_sh(1, "ip -n %s link set p%d master br0", c->sw, i) != 0 ||
		    tn_sh(1, "ip -n %s link set p%d up", c->sw, i) != 0 ||
		    tn_sh(1, "ip -n %s link set lo up", c->ns[i]) != 0 ||
		    tn_sh(1, "ip -n %s addr add %s/24 dev n%d", c->ns[i], c->addr[i], i) != 0 ||
		    tn_sh(1, "ip -n %s link set n%d up", c->ns[i], i) != 0) {
			tn_delete_all(c);
			T_FAIL("could not make node %d's namespace %s", i, c->ns[i]);
		}
	}
	return 0;
}

/* Node i's port on the bridge down (0: a partition; the node's own link
 * stays up and nothing tells its TCP connections) or up again (1). */
static inline void tn_link(const tn_cluster *c, int i, int up)
{
	if (tn_sh(1, "ip -n %s link set p%d %s", c->sw, i, up ? "up" : "down") != 0)
		T_FAIL("ip link set p%d %s failed", i, up ? "up" : "down");
}

/* SIGKILL to every process in node i's namespace; returns how many. */
static inline int tn_kill_all(const tn_cluster *c, int i)
{
	char cmd[160], line[64];
	int k = 0;
	snprintf(cmd, sizeof(cmd), "ip netns pids %s 2>/dev/null", c->ns[i]);
	FILE *f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f)) {
		pid_t p = (pid_t)atoi(line);
		if (p > 1 && p != getpid() && kill(p, SIGKILL) == 0)
			k++;
	}
	if (f)
		pclose(f);
	return k;
}

/* How many processes run in node i's namespace. */
static inline int tn_count(const tn_cluster *c, int i)
{
	char cmd[160], line[64];
	int k = 0;
	snprintf(cmd, sizeof(cmd), "ip netns pids %s 2>/dev/null", c->ns[i]);
	FILE *f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f))
		k++;
	if (f)
		pclose(f);
	return k;
}

/* Kills every process in node i and waits, up to timeout_ms, until none is
 * left in its namespace; returns 0 when it is empty, -1 at the timeout.
 * SIGKILL is asynchronous: a process stays in the namespace's list until
 * its exit has torn down its memory and reached its namespaces (a killed
 * 3 GiB process stayed listed through five more looks), and one forked between
 * listing and killing is not in the first list; so kill and look again. */
static inline int tn_empty(const tn_cluster *c, int i, int timeout_ms)
{
	uint64_t end = td_ms() + (uint64_t)timeout_ms;
	for (;;) {
		tn_kill_all(c, i);
		if (tn_count(c, i) == 0)
			return 0;
		if (td_ms() >= end)
			return -1;
		usleep(20000);
	}
}

static inline void tn_destroy(tn_cluster *c)
{
	for (int i = 0; i < c->n; i++)
		tn_kill_all(c, i);
	tn_delete_all(c);
	if (c->reaper_fd >= 0)
		close(c->reaper_fd);
	c->reaper_fd = -1;
	c->n = 0;
}

#endif
