/* A libckpt rank process of a roles test: a child of the test that dies
 * with it (and at an alarm if the test is stuck), logs to a file of its
 * own, and takes its settings from the environment only, as a launcher
 * gives them. Shared by the tests that drive real ranks. */
#ifndef CKPTD_ROLES_RANK_PROC_H
#define CKPTD_ROLES_RANK_PROC_H

#include "ckptd_helper.h"

#include <ckpt.h>

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>

typedef struct rp_rank {
	const char *dir;        /* the test's directory: logs go there */
	const char *tag;        /* the phase: names the log */
	const char *job;
	int rank, world, incarnation;
	const char *root;       /* CKPT_ROOT */
	const char *daemon;     /* CKPT_DAEMON; NULL: unset (embedded) */
	const char *tiers;      /* CKPT_TIERS */
	const char *token_file; /* CKPT_TOKEN_FILE */
	int alarm_s;            /* the child's life at most */
} rp_rank;

static inline void rp_log_path(char *buf, size_t cap, const char *dir, const char *tag, int rank)
{
	snprintf(buf, cap, "%s/%s.rank%d.log", dir, tag, rank);
}

/* In the child, first thing: its own log and its settings. Every CKPT_*
 * variable a test may set for one rank is cleared here, so that nothing
 * leaks from the test's environment; the caller sets its extras after. */
static inline void rp_child_setup(pid_t driver, const rp_rank *r)
{
	char log[700], v[32];
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != driver)
		_exit(T_EXIT_FAIL); /* the test is gone already */
	/* A trainer's own dispositions, not the test driver's (inherited). */
	signal(SIGTERM, SIG_DFL);
	signal(SIGUSR1, SIG_DFL);
	alarm((unsigned)r->alarm_s);
	rp_log_path(log, sizeof(log), r->dir, r->tag, r->rank);
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		_exit(T_EXIT_FAIL);
	dup2(fd, 1);
	dup2(fd, 2);
	close(fd);
	setenv("CKPT_JOB", r->job, 1);
	snprintf(v, sizeof(v), "%d", r->rank);
	setenv("CKPT_RANK", v, 1);
	snprintf(v, sizeof(v), "%d", r->world);
	setenv("CKPT_WORLD_SIZE", v, 1);
	snprintf(v, sizeof(v), "%d", r->incarnation);
	setenv("CKPT_INCARNATION", v, 1);
	setenv("CKPT_ROOT", r->root, 1);
	setenv("CKPT_TIERS", r->tiers, 1);
	setenv("CKPT_TOKEN_FILE", r->token_file, 1);
	setenv("CKPT_DEBUG", "INFO", 1);
	if (r->daemon)
		setenv("CKPT_DAEMON", r->daemon, 1);
	else
		unsetenv("CKPT_DAEMON");
	static const char *const clear[] = { "CKPT_TOKEN", "CKPT_CONFIG", "CKPT_FAULT", "CKPT_RESTORE_ORDER",
	                                     "CKPT_SHARED_DIR", "CKPT_DAEMON_REQUIRED", "CKPT_INTERVAL" };
	for (size_t i = 0; i < sizeof(clear) / sizeof(clear[0]); i++)
		unsetenv(clear[i]);
}

/* A context from the environment (ckpt_config_init) with n host regions. */
static inline ckpt_ctx *rp_open(const char *const *names, uint8_t *const *bufs, const size_t *sizes, int n)
{
	ckpt_config cfg;
	ckpt_ctx *ctx;
	T_OK(ckpt_config_init(&cfg));
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	for (int i = 0; i < n; i++) {
		ckpt_region_desc d;
		ckpt_region_desc_init(&d, names[i], bufs[i], sizes[i]);
		T_OK(ckpt_region_add(ctx, &d));
	}
	return ctx;
}

/* A context from the environment with one host region, "weights", over
 * buf (n bytes). */
static inline ckpt_ctx *rp_open_weights(uint8_t *buf, size_t n)
{
	static const char *const names[] = { "weights" };
	uint8_t *bufs[] = { buf };
	size_t sizes[] = { n };
	return rp_open(names, bufs, sizes, 1);
}

/* Restores CKPT_LATEST into b after delay_ms (a trainer building its model
 * meanwhile): it must be version `expect`, and the regions what fill()
 * writes for (rank, version) into want, byte for byte. */
static inline void rp_restore_check(ckpt_ctx *ctx, int rank, uint64_t expect, int delay_ms, uint8_t **b,
                                    uint8_t **want, const char *const *names, const size_t *sizes, int n,
                                    void (*fill)(uint8_t **b, int rank, uint64_t v))
{
	uint64_t got = 0;
	usleep((useconds_t)delay_ms * 1000);
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	if (got != expect)
		T_FAIL("rank %d restored version %llu, not %llu", rank, (unsigned long long)got, (unsigned long long)expect);
	fill(want, rank, got);
	for (int i = 0; i < n; i++)
		if (memcmp(b[i], want[i], sizes[i]) != 0)
			T_FAIL("rank %d: region '%s' differs from version %llu", rank, names[i], (unsigned long long)got);
	fprintf(stderr, "rank %d: version %llu restored bit-exact\n", rank, (unsigned long long)got);
}

/* fork() with a pipe from the child to the test: in the child returns 0
 * and *rep is the end it reports on (rp_put); in the test returns the
 * child's pid and *rep is the end it reads (rp_get). */
static inline pid_t rp_fork(int *rep)
{
	int fds[2];
	T_ASSERT(pipe2(fds, O_CLOEXEC) == 0);
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	close(fds[pid == 0 ? 0 : 1]);
	*rep = fds[pid == 0 ? 1 : 0];
	return pid;
}

static inline void rp_put(int fd, char c)
{
	T_ASSERT(write(fd, &c, 1) == 1);
}

/* One byte within timeout_ms; 0 on timeout or end of file. */
static inline char rp_get(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;
	if (poll(&p, 1, timeout_ms) != 1 || read(fd, &c, 1) != 1)
		return 0;
	return c;
}

#endif
