/* Helpers of the tests that run libckpt against a real ckptd (--role both):
 * a token file, the daemon (started by tests/ckptd_helper.h: it dies with
 * the test and logs to a file, never to CTest's pipe), ranks in child
 * processes, and
 * the coordinator's view of a version through `ckpt ls --daemon`. */
#ifndef CKPT_DAEMON_TEST_H
#define CKPT_DAEMON_TEST_H

#include "helpers.h"
#include "ckptd_helper.h"

#include <ckpt.h>

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
	td_daemon d;
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

/* A TCP port nobody listens on right now. */
static inline int dt_free_port(void)
{
	return td_free_port("127.0.0.1");
}

/* Starts `ckptd --role both` (tests/ckptd_helper.h) on a socket in e->dir
 * with a pool of pool_size and, with tcp, on 127.0.0.1 at a free port
 * (e->tcp); e->sock, e->addr and e->log name its socket and log. */
static inline void dt_start(dt_env *e, const char *pool_size, int tcp)
{
	td_daemon_init(&e->d, e->dir, "n0", tcp ? "127.0.0.1" : NULL, TD_SOCKET);
	const char *args[] = { "--role", "both", "--root", e->droot, "--token-file", e->tok, "--pool-size", pool_size,
	                       "--node", "n0", NULL };
	td_daemon_start(&e->d, args);
	e->daemon = e->d.pid;
	e->port = e->d.port;
	snprintf(e->tcp, sizeof(e->tcp), "%s", e->d.tcp);
	snprintf(e->sock, sizeof(e->sock), "%s", e->d.sock);
	snprintf(e->addr, sizeof(e->addr), "%s", e->d.unixa);
	snprintf(e->log, sizeof(e->log), "%s", e->d.log);
}

/* SIGKILL. A caller that reaped e->daemon itself sets it to 0 first. */
static inline void dt_stop(dt_env *e)
{
	if (e->daemon <= 0)
		e->d.pid = 0;
	td_daemon_kill9(&e->d);
	e->daemon = 0;
}

/* A rank's configuration for job against this daemon: node DRAM and disk,
 * 1 MiB chunks, 8 MiB of staging; the caller changes what it tests. */
static inline void dt_config(ckpt_config *cfg, const dt_env *e, const char *job)
{
	T_OK(ckpt_config_init(cfg));
	cfg->root = e->root;
	cfg->job_id = job;
	cfg->chunk_bytes = 1u << 20;
	cfg->staging_bytes = 8u << 20;
	cfg->tiers = CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK;
	cfg->daemon = e->addr;
	cfg->token_file = e->tok;
}

/* The state of a rank: n regions of the given sizes, malloc'd. */
static inline void dt_bufs_alloc(uint8_t **bufs, const size_t *sizes, int n)
{
	for (int i = 0; i < n; i++)
		T_ASSERT((bufs[i] = malloc(sizes[i])));
}

static inline void dt_bufs_free(uint8_t **bufs, int n)
{
	for (int i = 0; i < n; i++)
		free(bufs[i]);
}

/* Registers bufs as byte regions "r0" .. "r<n-1>". */
static inline void dt_regions_add(ckpt_ctx *ctx, uint8_t **bufs, const size_t *sizes, int n)
{
	for (int i = 0; i < n; i++) {
		ckpt_region_desc d;
		char name[16];
		snprintf(name, sizeof(name), "r%d", i);
		ckpt_region_desc_init(&d, name, bufs[i], sizes[i]);
		T_OK(ckpt_region_add(ctx, &d));
	}
}

/* Opens a rank with cfg and registers bufs as byte regions "r0" .. "r<n-1>". */
static inline ckpt_ctx *dt_open(const ckpt_config *cfg, uint8_t **bufs, const size_t *sizes, int n)
{
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(cfg, &ctx));
	dt_regions_add(ctx, bufs, sizes, n);
	return ctx;
}

/* Restores version through ctx (whose regions are bufs, overwritten first
 * so that nothing passes by chance): it must be version expect, every
 * byte as in want. */
static inline void dt_restore_expect(ckpt_ctx *ctx, uint64_t version, uint64_t expect, uint8_t **bufs,
                                     uint8_t **want, const size_t *sizes, int n)
{
	for (int i = 0; i < n; i++)
		memset(bufs[i], 0xa5, sizes[i]);
	uint64_t got = 0;
	T_OK(ckpt_restore(ctx, version, 0, &got));
	if (got != expect)
		T_FAIL("restored version %llu, expected %llu", (unsigned long long)got, (unsigned long long)expect);
	for (int i = 0; i < n; i++)
		if (memcmp(bufs[i], want[i], sizes[i]))
			T_FAIL("region r%d differs from what was saved", i);
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
