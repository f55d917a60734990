/* A rank waiting on its agent's --segment-wait keeps its agent: the agent
 * holds a job's first DRAM request while that job's pool is prepared, up to
 * --segment-wait, then answers BUSY (this shard to disk only). The rank's
 * call for it must outlast that wait; when both were 10 s a loaded rank gave
 * up as the answer came, lost its agent, and saved to disk alone for good.
 *
 * One ckptd in both roles with --segment-wait 12s (past the rank's old
 * fixed 10 s) and its pool preparation slowed to 14 s
 * (agent.pool_prepare=delay:14000); one libckpt rank, tiers
 * local_mem,local_disk:
 *  1. version 1, saved at once, reaches the disk and not LOCAL_MEM (the
 *     agent said BUSY after 12 s; the rank's status says local_mem failed);
 *  2. version 2, saved next, commits at LOCAL_MEM once the pool is ready:
 *     the link was never lost (and the rank's log never says so).
 * And ckptd refuses a --segment-wait above its cap (10m) with exit 2. */
#include "roles_test.h"
#include "rank_proc.h"

#include <ckpt.h>

static rt_env env;
static daemon_t d;
static pid_t driver;

static void rank_main(void)
{
	static uint8_t w[200000];
	ckpt_ctx *ctx = rp_open_weights(w, sizeof(w));
	ckpt_handle *h;
	ckpt_status st = { .size = sizeof(st) };
	t_fill(w, sizeof(w), 1);
	uint64_t t0 = td_ms();
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, &st));
	int r = ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 5000, NULL);
	st.size = sizeof(st);
	T_OK(ckpt_handle_test(h, CKPT_TIER_LOCAL_DISK, &st));
	fprintf(stderr, "version 1 after %llu ms: LOCAL_MEM wait %d (%s), tiers reached 0x%x failed 0x%x\n",
	        (unsigned long long)(td_ms() - t0), r, ckpt_strerror(r), st.tiers_reached, st.tiers_failed);
	if (r == 0 || !(st.tiers_failed & CKPT_TIER_LOCAL_MEM))
		T_FAIL("version 1 reached LOCAL_MEM while the pool was being prepared (the fault did not slow it)");
	ckpt_handle_free(h);
	t_fill(w, sizeof(w), 2);
	T_OK(ckpt_save(ctx, 2, 0, &h));
	r = ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 30000, NULL);
	if (r != 0)
		T_FAIL("version 2 not committed at LOCAL_MEM once the pool was ready: %d (%s)", r, ckpt_strerror(r));
	ckpt_handle_free(h);
	T_OK(ckpt_ctx_close(ctx));
}

/* `ckptd --segment-wait 11m` exits 2 naming the cap. */
static int cap_refused(void)
{
	char cmd[2048], out[700];
	snprintf(out, sizeof(out), "%s/cap.out", env.dir);
	snprintf(cmd, sizeof(cmd), "'%s/ckptd' --segment-wait 11m --print-config >'%s' 2>&1", getenv("CKPT_BIN"), out);
	int rc = system(cmd);
	rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
	if (rc != 2 || !td_file_has(out, 0, "at most 10m")) {
		fprintf(stderr, "ckptd --segment-wait 11m exited %d:\n", rc);
		td_print_tail(out, 5);
		return 0;
	}
	return 1;
}

int main(void)
{
	driver = getpid();
	rt_init(&env, "roles-segwait");
	static const char *const args[] = { "--role", "both", "--pool-size", "16M", "--job-pool-size", "8M",
	                                    "--segment-wait", "12s", NULL };
	rt_daemon(&env, &d, "n1", 0, args);
	setenv("CKPT_FAULT", "agent.pool_prepare=delay:14000", 1);
	rt_start(&env, &d);
	unsetenv("CKPT_FAULT");
	char root[600], log[700];
	snprintf(root, sizeof(root), "%s/n1.ckpt", env.dir);
	T_ASSERT(mkdir(root, 0700) == 0);
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		rp_rank r = { env.dir, "sw", "sw", 0, 1, 0, root, d.unixa, "local_mem,local_disk", env.tokpath, 90 };
		rp_child_setup(driver, &r);
		rank_main();
		exit(T_EXIT_PASS);
	}
	rp_log_path(log, sizeof(log), env.dir, "sw", 0);
	int st = 0;
	int exited = td_wait_pid(pid, 90000, &st) == 0 && td_status_code(st) == 0;
	int kept = !td_file_has(log, 0, "lost the ckptd agent");
	int cap = cap_refused();
	int stopped = rt_stop(&d) == 0;
	if (!exited || !kept || !cap || !stopped) {
		td_print_tail(log, 20);
		fprintf(stderr, "FAIL: rank exit %d, link kept %d, cap refused %d, agent stopped cleanly %d; logs in %s\n",
		        exited, kept, cap, stopped, env.dir);
		return T_EXIT_FAIL;
	}
	fprintf(stderr, "ok: the rank waited out the agent's 12 s --segment-wait, took its BUSY (version 1 to disk), "
	        "kept its agent and committed version 2 at LOCAL_MEM\n");
	ckptd_secret_free(env.cluster);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
