/* No silent fresh start: a rank whose job has a committed version, run
 * where none of that version's copies can be reached, fails with
 * -CKPT_EUNREACHABLE and one error naming where the copies are, under
 * every restore order, and the shipped example program stops on it.
 *
 * A coordinator and two node agents n1, n2 on loopback; the peer tier is
 * off (tiers local_mem,local_disk), so that n1's copies are the only ones.
 *  1. ckpt-example saves versions 5 and 10 of job "lost" on n1.
 *  2. A rank of that job on n2 with an empty root: ckpt_restore(LATEST)
 *     under the default order and under CKPT_RESTORE_ORDER=peer_mem, and
 *     ckpt_restore(10), all -CKPT_EUNREACHABLE; the log names version 10,
 *     rank 0 and its copies at local_disk and local_mem on n1 (up).
 *  3. ckpt-example on n2 exits 1 without "starting fresh", and has saved
 *     nothing there.
 *  4. n1 is lost (agent killed): the error says n1 is down.
 *  5. The coordinator is stopped: a rank on n2 with an empty root cannot
 *     learn whether a version exists, and fails the same way.
 *  Control: a job that never saved, on n2, gets -CKPT_ENOVERSION (a new
 *  job still starts from scratch). */
#include "roles_test.h"
#include "rank_proc.h"

#include <ckpt.h>

#define JOB "lost"
#define WORLD 1

static rt_env env;
static daemon_t coord, n1, n2;
static int failures;
static pid_t driver;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)

/* The example program's environment: its agent, the token, the tiers. */
static void example_env(const daemon_t *agent)
{
	setenv("CKPT_DAEMON", agent->unixa, 1);
	setenv("CKPT_TOKEN_FILE", env.tokpath, 1);
	setenv("CKPT_TIERS", "local_mem,local_disk", 1);
	setenv("CKPT_DEBUG", "INFO", 1);
	unsetenv("CKPT_RESTORE_ORDER");
}

/* Runs ckpt-example on agent's node with root; returns its exit code. */
static int run_example(const daemon_t *agent, const char *root, const char *log, int steps)
{
	char exe[600], st[16];
	snprintf(exe, sizeof(exe), "%s/ckpt-example", getenv("CKPT_BIN"));
	snprintf(st, sizeof(st), "%d", steps);
	const char *argv[] = { exe, "--root", root, "--job", JOB, "--rank", "0", "--world-size", "1",
	                       "--steps", st, "--ckpt-every", "5", "--state-bytes", "65536", NULL };
	example_env(agent);
	pid_t pid = td_spawn(argv, log);
	int status = 0;
	T_ASSERT(td_wait_pid(pid, 60000, &status) == 0);
	return td_status_code(status);
}

/* A rank of job on n2 in a child: restores `version` under order (NULL:
 * the default); exits 0 for -CKPT_EUNREACHABLE, 10 for -CKPT_ENOVERSION,
 * 20 for a restore that worked, 30 for anything else. */
static int probe(const char *tag, const char *job, const daemon_t *agent, const char *root, const char *order,
                 uint64_t version)
{
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		rp_rank r = { env.dir, tag, job, 0, WORLD, 1, root, agent->unixa, "local_mem,local_disk", env.tokpath,
		              60 };
		rp_child_setup(driver, &r);
		if (order)
			setenv("CKPT_RESTORE_ORDER", order, 1);
		static uint8_t w[65536];
		ckpt_ctx *ctx = rp_open_weights(w, sizeof(w));
		uint64_t got = 0;
		int e = ckpt_restore(ctx, version, 0, &got);
		fprintf(stderr, "probe: ckpt_restore: %d (%s)\n", e, ckpt_strerror(e));
		ckpt_ctx_close(ctx);
		_exit(e == -CKPT_EUNREACHABLE ? 0 : e == -CKPT_ENOVERSION ? 10 : e == 0 ? 20 : 30);
	}
	int st = 0;
	T_ASSERT(td_wait_pid(pid, 60000, &st) == 0);
	return td_status_code(st);
}

static int probe_log_has(const char *tag, const char *needle)
{
	char log[700];
	rp_log_path(log, sizeof(log), env.dir, tag, 0);
	return td_file_has(log, 0, needle);
}

static void fresh_root(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", env.dir, name);
	T_ASSERT(mkdir(out, 0700) == 0);
}

int main(void)
{
	driver = getpid();
	rt_init(&env, "roles-unreach");
	static const char *const cargs[] = { "--role", "coordinator", "--agent-grace", "300s", "--peer-replicas", "0",
	                                     NULL };
	static const char *const aargs_tail[] = { "--pool-size", "16M", NULL };
	rt_daemon_on(&env, &coord, "coord", "127.0.0.1", cargs);
	rt_start(&env, &coord);
	const char *aargs[] = { "--role", "agent", "--coordinator", coord.tcp, aargs_tail[0], aargs_tail[1], NULL };
	rt_daemon_on(&env, &n1, "n1", "127.0.0.2", aargs);
	rt_daemon_on(&env, &n2, "n2", "127.0.0.3", aargs);
	rt_start(&env, &n1);
	rt_start(&env, &n2);
	rt_wait_agents(&env, coord.tcp, 2, 10000);

	/* 1. Versions 5 and 10 on n1. */
	char root1[600], root2[600], root3[600], log[700];
	fresh_root(root1, sizeof(root1), "n1.ckpt");
	snprintf(log, sizeof(log), "%s/example-n1.log", env.dir);
	int rc = run_example(&n1, root1, log, 10);
	if (rc != 0)
		td_print_tail(log, 30);
	T_ASSERT(rc == 0);

	/* 2. On n2, nothing reachable, whatever the order. */
	fresh_root(root2, sizeof(root2), "n2.ckpt");
	CHECK(probe("default", JOB, &n2, root2, NULL, CKPT_LATEST) == 0,
	      "default order: want -CKPT_EUNREACHABLE");
	CHECK(probe_log_has("default", "version 10 is COMMITTED (the coordinator says so)") &&
	      probe_log_has("default", "rank 0's shard") && probe_log_has("default", "local_disk on n1 (") &&
	      probe_log_has("default", "local_mem on n1 (") && probe_log_has("default", ", up)"),
	      "the error does not name version 10 and its copies on n1 (up)");
	CHECK(probe("peer", JOB, &n2, root2, "peer_mem", CKPT_LATEST) == 0,
	      "CKPT_RESTORE_ORDER=peer_mem: want -CKPT_EUNREACHABLE");
	CHECK(probe("explicit", JOB, &n2, root2, NULL, 10) == 0, "ckpt_restore(10): want -CKPT_EUNREACHABLE");
	CHECK(probe("newjob", "other", &n2, root2, NULL, CKPT_LATEST) == 10,
	      "a job that never saved: want -CKPT_ENOVERSION");
	{
		char lp[700], line[4096];
		rp_log_path(lp, sizeof(lp), env.dir, "default", 0);
		FILE *f = fopen(lp, "r");
		while (f && fgets(line, sizeof(line), f))
			if (strstr(line, "is COMMITTED"))
				fprintf(stderr, "the error: %s", line);
		if (f)
			fclose(f);
	}
	if (!failures)
		fprintf(stderr, "ok: a rank on n2 reaches no copy of committed version 10: -CKPT_EUNREACHABLE under "
		        "every order, its copies on n1 named; a new job still gets -CKPT_ENOVERSION\n");

	/* 3. The example program stops, and saves nothing. */
	snprintf(log, sizeof(log), "%s/example-n2.log", env.dir);
	rc = run_example(&n2, root2, log, 10);
	CHECK(rc == 1 && !td_file_has(log, 0, "starting fresh") && td_file_has(log, 0, "cannot be reached"),
	      "ckpt-example on n2: exit %d; want 1, no fresh start", rc);
	char v5[800];
	snprintf(v5, sizeof(v5), "%s/jobs/%s/v5", root2, JOB);
	struct stat sb;
	CHECK(stat(v5, &sb) != 0, "ckpt-example on n2 saved version 5 over the lost job");
	if (rc != 1)
		td_print_tail(log, 20);

	/* 4. n1 lost. */
	rt_kill9(&n1);
	uint64_t end = rt_ms() + 15000;
	int said_down = 0;
	while (!said_down && rt_ms() < end) {
		CHECK(probe("down", JOB, &n2, root2, NULL, CKPT_LATEST) == 0, "n1 down: want -CKPT_EUNREACHABLE");
		said_down = probe_log_has("down", ", down)");
		if (!said_down)
			usleep(200000);
	}
	CHECK(said_down, "with n1's agent killed, the error does not say n1 is down");

	/* 5. The coordinator gone: n2's agent cannot ask. */
	CHECK(rt_stop(&coord) == 0, "the coordinator did not stop cleanly");
	fresh_root(root3, sizeof(root3), "n2b.ckpt");
	CHECK(probe("nocoord", JOB, &n2, root3, NULL, CKPT_LATEST) == 0,
	      "coordinator unreachable, empty root: want -CKPT_EUNREACHABLE");
	CHECK(probe_log_has("nocoord", "could not be asked which versions are committed"),
	      "the error does not say the coordinator could not be asked");

	CHECK(rt_stop(&n2) == 0, "n2 did not stop cleanly");
	ckptd_secret_free(env.cluster);
	if (failures) {
		fprintf(stderr, "%d check(s) failed; logs kept in %s\n", failures, env.dir);
		return T_EXIT_FAIL;
	}
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
