/* Straggler detection with real libckpt ranks: four rank processes call
 * ckpt_step once per step through a `ckptd --role both`; one of them is
 * slowed on purpose (three times the others' step). The coordinator names
 * that rank, and only it, in STEP_STATS (what `ckpt stragglers` prints) and
 * in its log; every rank's step time is close to what it slept. */
#include "helpers.h"
#include "roles_test.h"

#include <ckpt.h>
#include <math.h>

#define JOB "strag"
#define WORLD 4
#define SLOW 2
#define FAST_MS 20
#define SLOW_MS 60
#define RUN_MS 3500

static void rank_main(const rt_env *env, const daemon_t *d, uint32_t rank)
{
	char root[700];
	snprintf(root, sizeof(root), "%s/root", env->dir);
	ckpt_config cfg;
	if (ckpt_config_init(&cfg) < 0)
		_exit(10);
	cfg.root = root;
	cfg.job_id = JOB;
	cfg.rank = rank;
	cfg.world_size = WORLD;
	cfg.daemon = d->unixa;
	cfg.token_file = env->tokpath;
	cfg.daemon_required = 1;
	ckpt_ctx *ctx;
	if (ckpt_ctx_open(&cfg, &ctx) < 0)
		_exit(11);
	uint64_t end = rt_ms() + RUN_MS;
	for (uint64_t step = 1; rt_ms() < end; step++) {
		usleep((rank == SLOW ? SLOW_MS : FAST_MS) * 1000);
		if (ckpt_step(ctx, step) != CKPT_STEP_CONTINUE)
			_exit(12);
	}
	ckpt_ctx_close(ctx);
	_exit(0);
}

int main(void)
{
	rt_env env;
	rt_init(&env, "roles-stragglers");
	daemon_t d;
	static const char *const args[] = { "--role", "both", "--straggler-window", "30s", "--retention-interval", "0",
	                                    NULL };
	rt_daemon(&env, &d, "n1", 0, args);
	rt_start(&env, &d);
	pid_t pids[WORLD];
	for (uint32_t r = 0; r < WORLD; r++) {
		fflush(stderr);
		pids[r] = fork();
		T_ASSERT(pids[r] >= 0);
		if (pids[r] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			rank_main(&env, &d, r);
		}
	}
	for (uint32_t r = 0; r < WORLD; r++) {
		int st;
		T_ASSERT(td_wait_pid(pids[r], RUN_MS + 20000, &st) == 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			T_FAIL("rank %u exited with status %d", r, st);
	}
	/* The judge runs once a second: the last reports are in within two. */
	ckptd_secret *js = rt_job_secret(&env, JOB);
	ckptd_client *cli = rt_connect(d.unixa, JOB, CKPTD_ROLE_CLI, js);
	ckptd_rank_step got[WORLD];
	uint32_t n = 0;
	uint64_t deadline = rt_ms() + 5000;
	int flagged_ok = 0;
	while (!flagged_ok && rt_ms() < deadline) {
		ckptd_msg req = { .type = CKPTD_MSG_STEP_STATS }, rep;
		snprintf(req.u.step_stats.job, sizeof(req.u.step_stats.job), "%s", JOB);
		T_ASSERT(ckptd_client_call(cli, &req, &rep) == 0);
		if (rep.type != CKPTD_MSG_STEP_STATS_REPLY)
			T_FAIL("STEP_STATS answered %u", rep.type);
		n = rep.u.step_stats_reply.count;
		T_ASSERT(n <= WORLD);
		memcpy(got, rep.u.step_stats_reply.entries, n * sizeof(*got));
		ckptd_msg_free(&rep);
		flagged_ok = n == WORLD;
		for (uint32_t i = 0; i < n; i++)
			flagged_ok &= (got[i].state == CKPTD_RANK_STRAGGLER) == (got[i].rank == SLOW);
		if (!flagged_ok)
			usleep(200000);
	}
	for (uint32_t i = 0; i < n; i++)
		fprintf(stderr, "rank %u on %s: step %llu, %.1f ms, %s\n", got[i].rank, got[i].node,
		        (unsigned long long)got[i].step, got[i].step_ns / 1e6,
		        got[i].state == CKPTD_RANK_STRAGGLER ? "STRAGGLER" : "ok");
	if (!flagged_ok)
		T_FAIL("the coordinator did not name exactly rank %d a straggler (%u ranks reported)", SLOW, n);
	/* The measure is the trainer's step: what each rank slept, plus a little. */
	for (uint32_t i = 0; i < n; i++) {
		double want = got[i].rank == SLOW ? SLOW_MS : FAST_MS, ms = got[i].step_ns / 1e6;
		if (ms < want || ms > want * 1.6 + 5)
			T_FAIL("rank %u: step time %.1f ms, slept %.0f ms a step", got[i].rank, ms, want);
		if (strcmp(got[i].node, "n1"))
			T_FAIL("rank %u: node '%s', want n1", got[i].rank, got[i].node);
	}
	T_ASSERT(td_log_has(&d, "straggler: rank 2 on n1"));
	ckptd_client_close(cli);
	ckptd_secret_free(js);
	T_ASSERT(rt_stop(&d) == 0);
	ckptd_secret_free(env.cluster);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
