/* The pool fd over a Unix socket, between processes:
 * - a rank (child) maps its granted segment from the passed fd, writes a
 *   pattern, exits or is killed with SIGKILL; the agent (parent) still reads
 *   the pattern from the pool: the node-DRAM copy outlives the rank;
 * - fds a peer sends unasked, or too many of them, are closed, not leaked;
 * - partial sends, EINTR, deadlines, slow peers, a peer that goes away. */
#include "mem_test.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#include "wire/fdpass.h"

typedef struct grant {
	uint64_t id, off, len, seed;
} grant;

static void pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		T_FAIL("socketpair: %s", strerror(errno));
}

/* Several fds with one message, as a hostile peer would. */
static int send_fds(int sock, const void *buf, size_t len, const int *fds, int n)
{
	char ctl[CMSG_SPACE(32 * sizeof(int))];
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
	                     .msg_controllen = CMSG_SPACE(n * sizeof(int)) };
	memset(ctl, 0, sizeof(ctl));
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

/* ---- the copy outlives the rank ---- */

enum { RANK_EXITS, RANK_KILLED };

/* The rank: drops everything inherited from the agent, so that it can only
 * reach the pool through the fd it is sent. */
static void rank_main(ckptd_pool *inherited, int sock, int how)
{
	ckptd_pool_close(inherited);
	grant g;
	int fd;
	if (ckptd_fdpass_recv(sock, &g, sizeof(g), &fd, 10000) != (ssize_t)sizeof(g) || fd < 0)
		_exit(2);
	if (!(fcntl(fd, F_GETFD) & FD_CLOEXEC))
		_exit(3);
	ckptd_mapping m;
	if (ckptd_seg_map(fd, g.off, g.len, CKPTD_MAP_WRITE | CKPTD_MAP_POPULATE, &m) < 0)
		_exit(4);
	close(fd);
	t_fill(m.addr, m.len, g.seed);
	if (how == RANK_EXITS) {
		ckptd_seg_unmap(&m);
		if (ckptd_fdpass_send(sock, "DONE", 4, -1, 10000) < 0)
			_exit(5);
		_exit(0);
	}
	/* Killed: still mapped, mid-conversation. */
	if (ckptd_fdpass_send(sock, "DONE", 4, -1, 10000) < 0)
		_exit(5);
	for (;;)
		pause();
}

static void outlives_rank(int how, int huge)
{
	ckptd_pool *p = m_pool_huge(64 << 20, 0, NULL, NULL, huge);
	ckptd_seg_info a, b;
	/* A neighbour segment, to see that the rank wrote only inside its own. */
	M_OK(ckptd_pool_alloc(p, "train", 7, 0, 3 << 20, &a));
	M_OK(ckptd_pool_alloc(p, "train", 7, 1, (5 << 20) + 123, &b));
	uint8_t *base = ckptd_pool_base(p);
	memset(base + a.off, 0xa5, a.cap);
	memset(base + b.off, 0, b.cap);
	ckptd_pool_stats st;
	ckptd_pool_stats_get(p, &st);
	T_ASSERT(a.off % st.align == 0 && b.off % st.align == 0 && b.cap % st.align == 0);
	if (huge != CKPTD_POOL_HUGE_OFF)
		printf("rank killed, pool on %s pages\n", st.hugetlb ? "huge" : "normal");

	int sv[2];
	pair(sv);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		rank_main(p, sv[1], how);
	}
	close(sv[1]);
	grant g = { b.id, b.off, b.len, 0x1234 + (uint64_t)how };
	M_OK(ckptd_fdpass_send(sv[0], &g, sizeof(g), ckptd_pool_fd(p), 10000));
	char done[4];
	M_ERR(ckptd_fdpass_recv(sv[0], done, sizeof(done), NULL, 10000), 4);
	T_ASSERT(memcmp(done, "DONE", 4) == 0);
	if (how != RANK_EXITS)
		T_ASSERT(kill(pid, SIGKILL) == 0);
	int status;
	T_ASSERT(waitpid(pid, &status, 0) == pid);
	if (how == RANK_EXITS && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
		T_FAIL("rank failed: status %#x", status);
	if (how != RANK_EXITS && (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL))
		T_FAIL("rank not killed: status %#x", status);
	/* The agent sees EOF on the rank's socket. */
	M_ERR(ckptd_fdpass_recv(sv[0], done, sizeof(done), NULL, 10000), 0);
	close(sv[0]);

	M_OK(ckptd_pool_seg_done(p, b.id));
	uint8_t *want = malloc(b.len);
	T_ASSERT(want);
	t_fill(want, b.len, g.seed);
	if (memcmp(base + b.off, want, b.len) != 0)
		T_FAIL("the shard written by the rank is not in the pool after the rank died (how=%d)", how);
	for (uint64_t i = b.len; i < b.cap; i++)
		T_ASSERT(base[b.off + i] == 0);
	for (uint64_t i = 0; i < a.cap; i++)
		if (base[a.off + i] != 0xa5)
			T_FAIL("neighbour segment changed at %llu", (unsigned long long)i);
	/* A restore by a new rank: a second process maps it read-only. */
	pair(sv);
	pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		ckptd_pool_close(p);
		grant r;
		int fd;
		if (ckptd_fdpass_recv(sv[1], &r, sizeof(r), &fd, 10000) != (ssize_t)sizeof(r) || fd < 0)
			_exit(2);
		ckptd_mapping m;
		if (ckptd_seg_map(fd, r.off, r.len, 0, &m) < 0)
			_exit(4);
		_exit(memcmp(m.addr, want, r.len) == 0 ? 0 : 6);
	}
	close(sv[1]);
	M_OK(ckptd_pool_seg_pin(p, b.id));
	M_OK(ckptd_fdpass_send(sv[0], &g, sizeof(g), ckptd_pool_fd(p), 10000));
	T_ASSERT(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		T_FAIL("restoring rank read something else: status %#x", status);
	M_OK(ckptd_pool_seg_unpin(p, b.id));
	close(sv[0]);
	free(want);
	ckptd_pool_close(p);
}

/* ---- unexpected and extra fds ---- */

static void no_leaks(void)
{
	int sv[2];
	pair(sv);
	int before = m_count_fds();
	T_ASSERT(before > 0);
	int nul[20];
	for (int i = 0; i < 20; i++) {
		nul[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		T_ASSERT(nul[i] >= 0);
	}
	char buf[8];
	int fd;

	/* An fd where none was expected. */
	M_OK(send_fds(sv[1], "hello123", 8, nul, 1));
	M_ERR(ckptd_fdpass_recv(sv[0], buf, 8, NULL, 1000), 8);
	/* Three where one was: the first is kept, the others closed. */
	M_OK(send_fds(sv[1], "three..3", 8, nul, 3));
	M_ERR(ckptd_fdpass_recv(sv[0], buf, 8, &fd, 1000), 8);
	T_ASSERT(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC));
	T_ASSERT(m_count_fds() == before + 20 + 1);
	close(fd);
	/* More than fit in the control buffer (the kernel drops the rest). */
	M_OK(send_fds(sv[1], "twenty20", 8, nul, 20));
	M_ERR(ckptd_fdpass_recv(sv[0], buf, 8, &fd, 1000), 8);
	T_ASSERT(fd >= 0);
	close(fd);
	/* Fds on a later part of a message the caller reads in one go. */
	M_OK(ckptd_fdpass_send(sv[1], "abcd", 4, -1, 1000));
	M_OK(send_fds(sv[1], "efgh", 4, nul, 2));
	M_ERR(ckptd_fdpass_recv(sv[0], buf, 8, NULL, 1000), 8);
	T_ASSERT(memcmp(buf, "abcdefgh", 8) == 0);
	M_OK(send_fds(sv[1], "ijkl", 4, nul, 1));
	M_OK(send_fds(sv[1], "mnop", 4, nul + 1, 2));
	M_ERR(ckptd_fdpass_recv(sv[0], buf, 8, &fd, 1000), 8);
	T_ASSERT(fd >= 0 && memcmp(buf, "ijklmnop", 8) == 0);
	close(fd);
	/* A message cut short: the error path closes what came with it. */
	M_OK(send_fds(sv[1], "xy", 2, nul, 4));
	close(sv[1]);
	M_ERR(ckptd_fdpass_recv(sv[0], buf, 8, &fd, 1000), -ECONNRESET);
	T_ASSERT(fd == -1);
	for (int i = 0; i < 20; i++)
		close(nul[i]);
	close(sv[0]);
	int after = m_count_fds();
	if (after != before - 2)
		T_FAIL("fd count %d before (with the pair), %d after: leaked %d", before, after,
		       after - (before - 2));
}

/* ---- partial sends, EINTR, deadlines ---- */

static volatile sig_atomic_t alarms;
static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void tick(int us)
{
	struct itimerval it = { { 0, us }, { 0, us } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static void big_messages(void)
{
	/* No SA_RESTART: blocking calls return EINTR or a short count. */
	struct sigaction sa = { .sa_handler = on_alarm };
	sigemptyset(&sa.sa_mask);
	T_ASSERT(sigaction(SIGALRM, &sa, NULL) == 0);

	const size_t len = 8 << 20;
	uint8_t *msg = malloc(len), *got = malloc(len);
	T_ASSERT(msg && got);
	t_fill(msg, len, 99);
	int memfd = memfd_create("payload", MFD_CLOEXEC);
	T_ASSERT(memfd >= 0);
	int fds_before = m_count_fds();

	for (int mode = 0; mode < 2; mode++) {
		/* mode 0: non-blocking sender (partial sends, EAGAIN, poll);
		 * mode 1: blocking on both ends, interrupted every 200 us. */
		int sv[2];
		pair(sv);
		int small = 4096;
		setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
		setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		if (mode == 0)
			T_ASSERT(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
		pid_t pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0) {
			close(sv[0]);
			int fd;
			if (mode == 1)
				tick(200);
			/* Slow start so the sender fills its buffer and waits. */
			usleep(50000);
			/* The fd comes with the first byte, and only with it: a
			 * sender that re-attached it to every partial send would
			 * hand out copies. */
			int again;
			ssize_t n1 = ckptd_fdpass_recv(sv[1], got, 1, &fd, 30000);
			ssize_t n = ckptd_fdpass_recv(sv[1], got + 1, len - 1, &again, 30000);
			tick(0);
			if (n1 != 1 || n != (ssize_t)len - 1)
				_exit(2);
			if (fd < 0 || again != -1)
				_exit(3);
			if (memcmp(got, msg, len) != 0)
				_exit(4);
			/* Only one fd, and it is the memfd. */
			char tail;
			if (ckptd_fdpass_recv(sv[1], &tail, 1, &fd, 10000) != 1 || fd != -1 || tail != 'T')
				_exit(5);
			_exit(0);
		}
		close(sv[1]);
		alarms = 0;
		if (mode == 1)
			tick(200);
		M_OK(ckptd_fdpass_send(sv[0], msg, len, memfd, 30000));
		M_OK(ckptd_fdpass_send(sv[0], "T", 1, -1, 30000));
		tick(0);
		int status;
		T_ASSERT(waitpid(pid, &status, 0) == pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			T_FAIL("mode %d: receiver failed, status %#x", mode, status);
		if (mode == 1)
			printf("blocking send of %zu MiB survived %d interruptions\n", len >> 20, (int)alarms);
		close(sv[0]);
	}

	/* A recv that blocks while signals arrive: EINTR is retried. */
	{
		int sv[2];
		pair(sv);
		pid_t pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0) {
			usleep(200000);
			ckptd_fdpass_send(sv[1], "late", 4, -1, 1000);
			_exit(0);
		}
		alarms = 0;
		tick(1000);
		char buf[4];
		M_ERR(ckptd_fdpass_recv(sv[0], buf, 4, NULL, -1), 4);
		tick(0);
		T_ASSERT(alarms > 0 && memcmp(buf, "late", 4) == 0);
		waitpid(pid, NULL, 0);
		close(sv[0]);
		close(sv[1]);
	}
	close(memfd);
	T_ASSERT(m_count_fds() == fds_before - 1);
	signal(SIGALRM, SIG_DFL);
	free(msg);
	free(got);
}

static void deadlines_and_peers(void)
{
	int sv[2];
	char buf[100];

	/* Nothing comes. */
	pair(sv);
	int64_t t0 = t_now_ms();
	M_ERR(ckptd_fdpass_recv(sv[0], buf, 4, NULL, 150), -ETIMEDOUT);
	int64_t dt = t_now_ms() - t0;
	T_ASSERT(dt >= 140 && dt < 5000);

	/* A slowloris: a byte every 20 ms keeps coming, the deadline holds for
	 * the message as a whole. */
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		for (int i = 0; i < 100; i++) {
			if (ckptd_fdpass_send(sv[1], "s", 1, -1, 1000) < 0)
				_exit(0);
			usleep(20000);
		}
		_exit(0);
	}
	t0 = t_now_ms();
	M_ERR(ckptd_fdpass_recv(sv[0], buf, 100, NULL, 300), -ETIMEDOUT);
	dt = t_now_ms() - t0;
	T_ASSERT(dt >= 290 && dt < 1500);
	close(sv[0]);
	close(sv[1]);
	waitpid(pid, NULL, 0);

	/* A sender whose peer reads nothing: the deadline holds on send too. */
	pair(sv);
	T_ASSERT(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
	static uint8_t big[4 << 20];
	M_ERR(ckptd_fdpass_send(sv[0], big, sizeof(big), -1, 200), -ETIMEDOUT);
	close(sv[0]);
	close(sv[1]);

	/* Peer gone: EOF before a message is 0, sending is -EPIPE, no SIGPIPE. */
	pair(sv);
	close(sv[1]);
	M_ERR(ckptd_fdpass_recv(sv[0], buf, 4, NULL, 1000), 0);
	M_ERR(ckptd_fdpass_send(sv[0], "x", 1, -1, 1000), -EPIPE);
	close(sv[0]);

	/* Bad arguments. */
	M_ERR(ckptd_fdpass_send(-1, "x", 1, -1, 0), -EINVAL);
	M_ERR(ckptd_fdpass_send(0, "x", 0, -1, 0), -EINVAL);
	M_ERR(ckptd_fdpass_recv(-1, buf, 1, NULL, 0), -EINVAL);
	int fd = 5;
	M_ERR(ckptd_fdpass_recv(0, buf, 0, &fd, 0), -EINVAL);
	T_ASSERT(fd == -1);

	/* A datagram longer than asked for. */
	T_ASSERT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	M_OK(ckptd_fdpass_send(sv[1], "0123456789", 10, -1, 1000));
	M_ERR(ckptd_fdpass_recv(sv[0], buf, 4, NULL, 1000), -EMSGSIZE);
	M_OK(ckptd_fdpass_send(sv[1], "0123", 4, -1, 1000));
	M_ERR(ckptd_fdpass_recv(sv[0], buf, 4, NULL, 1000), 4);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	outlives_rank(RANK_EXITS, CKPTD_POOL_HUGE_OFF);
	outlives_rank(RANK_KILLED, CKPTD_POOL_HUGE_OFF);
	/* Huge pages where the machine has them reserved (2 MiB offsets). */
	outlives_rank(RANK_KILLED, CKPTD_POOL_HUGE_AUTO);
	no_leaks();
	big_messages();
	deadlines_and_peers();
	printf("test_mem_fdpass: ok\n");
	return T_EXIT_PASS;
}
