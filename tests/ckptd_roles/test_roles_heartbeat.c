/* The rank <-> agent heartbeat: a rank whose agent stops answering (here:
 * SIGSTOP, a hung daemon; its socket stays open, so nothing but a
 * heartbeat tells) loses the link within its heartbeat timeout, says so,
 * and saves to disk only, its handle's status naming the tiers reached and
 * missed; an agent that answers keeps its ranks however quiet they are.
 *
 * One ckptd in both roles on loopback; one libckpt rank with
 * CKPT_HEARTBEAT_TIMEOUT_MS=3000 (room for a loaded CI host) and tiers
 * local_mem,local_disk:
 *  1. version 1 commits at local_mem; the rank then idles 2 s (heartbeats
 *     answered: the link must stay), and version 2 commits at local_mem;
 *  2. the agent is stopped; the rank idles 5 s; version 3 reaches the
 *     disk, its LOCAL_MEM wait fails with -ENOTCONN, tiers_reached is
 *     local_disk and tiers_failed local_mem; the rank's log names the
 *     missed heartbeat. The agent is continued and stops cleanly.
 * And `ckpt save --daemon` exits 0 having reached local_mem and local_disk,
 * and 5 when peer_mem was asked for too (this daemon keeps no peer pool),
 * naming the tier it missed. */
#include "roles_test.h"
#include "rank_proc.h"

#include <ckpt.h>

static rt_env env;
static daemon_t d;
static pid_t driver;

static void rank_main(int rep, int go)
{
	static uint8_t w[200000];
	ckpt_ctx *ctx = rp_open_weights(w, sizeof(w));
	ckpt_handle *h;
	ckpt_status st = { .size = sizeof(st) };
	t_fill(w, sizeof(w), 1);
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 20000, &st));
	ckpt_handle_free(h);
	usleep(2000 * 1000); /* quiet, but answered: nothing may be lost */
	T_OK(ckpt_save(ctx, 2, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 20000, &st));
	ckpt_handle_free(h);
	rp_put(rep, 'A');
	T_ASSERT(rp_get(go, 20000) == 'S'); /* the agent is stopped now */
	usleep(5000 * 1000);
	t_fill(w, sizeof(w), 3);
	T_OK(ckpt_save(ctx, 3, 0, &h));
	st.size = sizeof(st);
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 20000, &st));
	int r = ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 5000, NULL);
	st.size = sizeof(st);
	T_OK(ckpt_handle_test(h, CKPT_TIER_LOCAL_DISK, &st));
	fprintf(stderr, "version 3: LOCAL_MEM wait %d (%s), tiers reached 0x%x failed 0x%x\n", r, ckpt_strerror(r),
	        st.tiers_reached, st.tiers_failed);
	if (r != -ENOTCONN && r != -CKPT_EUNAVAIL)
		T_FAIL("LOCAL_MEM of version 3 with the agent stopped: %d (%s)", r, ckpt_strerror(r));
	if (st.tiers_reached != CKPT_TIER_LOCAL_DISK || st.tiers_failed != CKPT_TIER_LOCAL_MEM)
		T_FAIL("status: reached 0x%x failed 0x%x; want 0x%x and 0x%x", st.tiers_reached, st.tiers_failed,
		       CKPT_TIER_LOCAL_DISK, CKPT_TIER_LOCAL_MEM);
	ckpt_handle_free(h);
	rp_put(rep, 'D');
	T_OK(ckpt_ctx_close(ctx));
}

int main(void)
{
	driver = getpid();
	rt_init(&env, "roles-hb");
	/* Two jobs (the rank's, the tool's): half of the pool each. */
	static const char *const args[] = { "--role", "both", "--pool-size", "16M", "--job-pool-size", "8M",
	                                    "--heartbeat-timeout", "1s", NULL };
	rt_daemon(&env, &d, "n1", 1, args);
	rt_start(&env, &d);
	char root[600], log[700];
	snprintf(root, sizeof(root), "%s/n1.ckpt", env.dir);
	T_ASSERT(mkdir(root, 0700) == 0);
	int up[2], down[2];
	T_ASSERT(pipe2(up, O_CLOEXEC) == 0 && pipe2(down, O_CLOEXEC) == 0);
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		rp_rank r = { env.dir, "hb", "hb", 0, 1, 0, root, d.unixa, "local_mem,local_disk", env.tokpath, 60 };
		rp_child_setup(driver, &r);
		setenv("CKPT_HEARTBEAT_TIMEOUT_MS", "3000", 1);
		rank_main(up[1], down[0]);
		exit(T_EXIT_PASS);
	}
	close(up[1]);
	close(down[0]);
	rp_log_path(log, sizeof(log), env.dir, "hb", 0);
	/* `ckpt save` says which tiers it reached: this daemon keeps no peer
	 * pool, so asking for peer_mem is a partial save (exit 5). */
	int cli_ok = 1;
	{
		char cmd[4096], file[700], out[700];
		snprintf(file, sizeof(file), "%s/state.bin", env.dir);
		snprintf(out, sizeof(out), "%s/cli.out", env.dir);
		FILE *f = fopen(file, "w");
		T_ASSERT(f && fputs("some state", f) >= 0 && fclose(f) == 0);
		const char *tiers[2] = { "local_mem,local_disk", "local_mem,peer_mem,local_disk" };
		for (int i = 0; i < 2; i++) {
			snprintf(cmd, sizeof(cmd), "'%s/ckpt' save --root '%s' --job cli --version %d --daemon '%s' "
			         "--token-file '%s' --tiers %s '%s' >'%s' 2>&1", getenv("CKPT_BIN"), root, i + 1, d.unixa,
			         env.tokpath, tiers[i], file, out);
			int rc = system(cmd);
			rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
			int says = i ? td_file_has(out, 0, "tiers NOT reached: peer_mem")
			             : td_file_has(out, 0, "tiers reached: local_mem, local_disk");
			if (rc != (i ? 5 : 0) || !says) {
				td_print_tail(out, 10);
				cli_ok = 0;
			}
		}
	}
	int ok = rp_get(up[0], 30000) == 'A';
	int kept = ok && !td_file_has(log, 0, "lost the ckptd agent");
	T_ASSERT(kill(d.pid, SIGSTOP) == 0);
	rp_put(down[1], 'S');
	int done = ok && rp_get(up[0], 30000) == 'D';
	T_ASSERT(kill(d.pid, SIGCONT) == 0);
	int st = 0;
	int exited = td_wait_pid(pid, 30000, &st) == 0 && td_status_code(st) == 0;
	/* Lost while the rank was idle (before version 3's lines): only a
	 * heartbeat can have noticed. */
	int said = 0;
	{
		FILE *f = fopen(log, "r");
		char line[2048];
		while (f && fgets(line, sizeof(line), f) && !strstr(line, "v=3"))
			said |= strstr(line, "lost the ckptd agent") != NULL;
		if (f)
			fclose(f);
	}
	int stopped = rt_stop(&d) == 0;
	if (!ok || !kept || !done || !exited || !said || !stopped || !cli_ok) {
		td_print_tail(log, 20);
		fprintf(stderr, "FAIL: ckpt save's tiers and exit codes %d, first saves %d, link kept while quiet %d, stopped-agent save %d, rank exit %d, "
		        "link lost while idle %d, agent stopped cleanly %d; logs in %s\n", cli_ok, ok, kept, done, exited, said,
		        stopped, env.dir);
		return T_EXIT_FAIL;
	}
	fprintf(stderr, "ok: a quiet rank kept its answering agent; with the agent stopped it lost the link within its "
	        "heartbeat timeout and saved to disk only, its status saying local_mem failed\n");
	ckptd_secret_free(env.cluster);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
