/* libckpt joined to a real ckptd (--role both): a save goes to node DRAM
 * (LOCAL_MEM) and disk, both commit; with the shard files deleted, a new
 * process restores from the daemon's DRAM alone, bit-exact.
 * Public API only, plus starting the daemon. */
#include "helpers.h"

#include <sys/prctl.h>
#include <ckpt.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define JOB "dmem"
#define NREG 2
static const size_t sizes[NREG] = { 3u << 20, (1u << 20) + 5000 };

typedef struct env {
	char dir[512], root[600], droot[600], sock[600], addr[620], tok[600], log[600];
	pid_t daemon;
} env;

/* Region 0 random, region 1 mostly zeros: both the stored and the zstd
 * chunk paths are exercised. */
static void fill(uint8_t **bufs, uint64_t seed)
{
	t_fill(bufs[0], sizes[0], seed);
	memset(bufs[1], 0, sizes[1]);
	t_fill(bufs[1] + 4096, 4096, seed + 1);
}

static ckpt_ctx *open_ctx(const env *e, uint8_t **bufs, uint32_t tiers, int with_daemon)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = e->root;
	cfg.job_id = JOB;
	cfg.chunk_bytes = 1u << 20;
	cfg.staging_bytes = 8u << 20;
	cfg.compress = 1;
	cfg.tiers = tiers;
	cfg.daemon = with_daemon ? e->addr : NULL;
	cfg.token_file = e->tok;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	for (int i = 0; i < NREG; i++) {
		ckpt_region_desc d;
		char name[16];
		snprintf(name, sizeof(name), "r%d", i);
		ckpt_region_desc_init(&d, name, bufs[i], sizes[i]);
		T_OK(ckpt_region_add(ctx, &d));
	}
	return ctx;
}

static void start_daemon(env *e)
{
	char exe[600];
	snprintf(exe, sizeof(exe), "%s/ckptd", getenv("CKPT_BIN"));
	e->daemon = fork();
	T_ASSERT(e->daemon >= 0);
	if (e->daemon == 0) {
		/* Dies with the test, and keeps CTest's output pipe free. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(e->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(exe, exe, "--role", "both", "--root", e->droot, "--socket", e->sock, "--token-file", e->tok,
		      "--pool-size", "64M", "--node", "n0", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		T_ASSERT(strlen(e->sock) < sizeof(a.sun_path));
		memcpy(a.sun_path, e->sock, strlen(e->sock) + 1);
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			return;
		int st;
		if (waitpid(e->daemon, &st, WNOHANG) == e->daemon)
			T_FAIL("ckptd exited early (status %d); see %s", st, e->log);
		usleep(20000);
	}
	T_FAIL("ckptd did not come up; see %s", e->log);
}

/* Runs fn in a child process (a rank), returns its exit status. */
static int in_child(void (*fn)(const env *), const env *e)
{
	pid_t p = fork();
	T_ASSERT(p >= 0);
	if (p == 0) {
		fn(e);
		_exit(T_EXIT_PASS);
	}
	int st;
	T_ASSERT(waitpid(p, &st, 0) == p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void alloc_bufs(uint8_t **bufs)
{
	for (int i = 0; i < NREG; i++)
		T_ASSERT((bufs[i] = malloc(sizes[i])));
}

static void rank_save(const env *e)
{
	uint8_t *bufs[NREG];
	alloc_bufs(bufs);
	fill(bufs, 42);
	ckpt_ctx *ctx = open_ctx(e, bufs, CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK, 1);
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 1, 0, &h));
	ckpt_status st = { .size = sizeof(st) };
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, &st));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 30000, &st));
	T_ERR(ckpt_handle_wait(h, CKPT_TIER_SHARED, 0, NULL), -EINVAL);
	ckpt_handle_free(h);
	T_OK(ckpt_ctx_close(ctx));
	for (int i = 0; i < NREG; i++)
		free(bufs[i]);
}

static void rank_restore(const env *e)
{
	uint8_t *bufs[NREG], *want[NREG];
	alloc_bufs(bufs);
	alloc_bufs(want);
	fill(want, 42);
	for (int i = 0; i < NREG; i++)
		memset(bufs[i], 0xa5, sizes[i]);
	ckpt_ctx *ctx = open_ctx(e, bufs, CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK, 1);
	uint64_t got = 0;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	T_ASSERT(got == 1);
	for (int i = 0; i < NREG; i++)
		T_ASSERT(memcmp(bufs[i], want[i], sizes[i]) == 0);
	T_OK(ckpt_ctx_close(ctx));
	for (int i = 0; i < NREG; i++) {
		free(bufs[i]);
		free(want[i]);
	}
}

/* Without a daemon: local_mem is refused, and embedded mode is unchanged. */
static void embedded(const env *e)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = e->root;
	cfg.job_id = JOB "-embedded";
	cfg.tiers = CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK;
	cfg.daemon = NULL;
	ckpt_ctx *ctx = NULL;
	T_ERR(ckpt_ctx_open(&cfg, &ctx), -CKPT_ECONFIG);
	uint8_t b[4096] = { 1 };
	cfg.tiers = CKPT_TIER_LOCAL_DISK;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "b", b, sizeof(b));
	T_OK(ckpt_region_add(ctx, &d));
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_ERR(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 0, NULL), -EINVAL);
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
	ckpt_handle_free(h);
	T_OK(ckpt_ctx_close(ctx));
}

int main(void)
{
	env e = { 0 };
	const char *bin = getenv("CKPT_BIN");
	char exe[600];
	if (!bin) {
		fprintf(stderr, "skip: CKPT_BIN not set\n");
		return T_EXIT_SKIP;
	}
	snprintf(exe, sizeof(exe), "%s/ckptd", bin);
	if (access(exe, X_OK) != 0) {
		fprintf(stderr, "skip: no %s\n", exe);
		return T_EXIT_SKIP;
	}
	signal(SIGPIPE, SIG_IGN);
	unsetenv("CKPT_DAEMON");
	unsetenv("CKPT_TOKEN");
	snprintf(e.dir, sizeof(e.dir), "%s", t_tmpdir("dmem"));
	snprintf(e.root, sizeof(e.root), "%s/root", e.dir);
	snprintf(e.droot, sizeof(e.droot), "%s/droot", e.dir);
	snprintf(e.sock, sizeof(e.sock), "%s/a.sock", e.dir);
	snprintf(e.addr, sizeof(e.addr), "unix:%s", e.sock);
	snprintf(e.tok, sizeof(e.tok), "%s/token", e.dir);
	snprintf(e.log, sizeof(e.log), "%s/ckptd.log", e.dir);
	T_ASSERT(mkdir(e.droot, 0700) == 0);
	int fd = open(e.tok, O_WRONLY | O_CREAT | O_EXCL, 0600);
	T_ASSERT(fd >= 0 && write(fd, "0123456789abcdefghijklmnopqrstuv", 32) == 32);
	close(fd);

	embedded(&e);
	start_daemon(&e);
	int st = in_child(rank_save, &e);
	if (st != 0) {
		kill(e.daemon, SIGKILL);
		T_FAIL("saving rank exited %d; daemon log %s", st, e.log);
	}
	/* Only the daemon's DRAM copy is left. */
	char jobs[700];
	snprintf(jobs, sizeof(jobs), "%s/jobs", e.root);
	char cmd[800];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", jobs);
	T_ASSERT(system(cmd) == 0 && access(jobs, F_OK) != 0);
	st = in_child(rank_restore, &e);
	kill(e.daemon, SIGKILL);
	waitpid(e.daemon, NULL, 0);
	if (st != 0)
		T_FAIL("restoring rank exited %d; daemon log %s", st, e.log);
	t_rmrf(e.dir);
	return T_EXIT_PASS;
}
