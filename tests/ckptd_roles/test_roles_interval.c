/* Checkpoint-interval advice: two libckpt ranks run with interval "auto"
 * and save whenever ckpt_step says so. Before any advice both save at step
 * 100 (which measures what a checkpoint costs); then the coordinator
 * advises the Young/Daly interval for that cost, the ranks' step time and
 * --mtbf, and both ranks save at exactly the same steps, every one of which
 * commits. The advice is what the formula gives for the reported figures. */
#include "helpers.h"
#include "roles_test.h"

#include <ckpt.h>
#include <math.h>

#define JOB "intv"
#define WORLD 2
#define STEP_MS 10
#define RUN_MS 9000
#define MTBF_S 30

static void rank_main(const rt_env *env, const daemon_t *d, uint32_t rank)
{
	char root[700], out[700];
	snprintf(root, sizeof(root), "%s/root", env->dir);
	snprintf(out, sizeof(out), "%s/saves.%u", env->dir, rank);
	FILE *f = fopen(out, "w");
	if (!f)
		_exit(10);
	static uint8_t state[4 << 20];
	ckpt_config cfg;
	if (ckpt_config_init(&cfg) < 0)
		_exit(11);
	cfg.root = root;
	cfg.job_id = JOB;
	cfg.rank = rank;
	cfg.world_size = WORLD;
	cfg.daemon = d->unixa;
	cfg.token_file = env->tokpath;
	cfg.daemon_required = 1;
	cfg.interval = "auto";
	cfg.chunk_bytes = 1 << 20;
	cfg.staging_bytes = 16 << 20;
	ckpt_ctx *ctx;
	if (ckpt_ctx_open(&cfg, &ctx) < 0)
		_exit(12);
	ckpt_region_desc rd;
	ckpt_region_desc_init(&rd, "state", state, sizeof(state));
	if (ckpt_region_add(ctx, &rd) < 0)
		_exit(13);
	uint64_t end = rt_ms() + RUN_MS;
	for (uint64_t step = 1; rt_ms() < end; step++) {
		state[step % sizeof(state)]++;
		usleep(STEP_MS * 1000);
		int act = ckpt_step(ctx, step);
		if (act == CKPT_STEP_SAVE) {
			ckpt_handle *h;
			if (ckpt_save(ctx, step, 0, &h) < 0)
				_exit(14);
			ckpt_handle_free(h);
			fprintf(f, "%llu\n", (unsigned long long)step);
			fflush(f);
		} else if (act != CKPT_STEP_CONTINUE) {
			_exit(15);
		}
	}
	ckpt_ctx_close(ctx);
	fclose(f);
	_exit(0);
}

static size_t read_saves(const rt_env *env, uint32_t rank, uint64_t *v, size_t cap)
{
	char p[700];
	snprintf(p, sizeof(p), "%s/saves.%u", env->dir, rank);
	FILE *f = fopen(p, "r");
	T_ASSERT(f);
	size_t n = 0;
	unsigned long long x;
	while (n < cap && fscanf(f, "%llu", &x) == 1)
		v[n++] = x;
	fclose(f);
	return n;
}

int main(void)
{
	rt_env env;
	rt_init(&env, "roles-interval");
	daemon_t d;
	static const char *const args[] = { "--role", "both", "--mtbf", "30s", "--retention-interval", "0", NULL };
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
		T_ASSERT(td_wait_pid(pids[r], RUN_MS + 30000, &st) == 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			T_FAIL("rank %u exited with status %d; see %s", r, st, d.log);
	}
	uint64_t a[1000], b[1000];
	size_t na = read_saves(&env, 0, a, 1000), nb = read_saves(&env, 1, b, 1000);
	fprintf(stderr, "rank 0 saved %zu times:", na);
	for (size_t i = 0; i < na; i++)
		fprintf(stderr, " %llu", (unsigned long long)a[i]);
	fprintf(stderr, "\n");
	/* Same steps on both ranks, or no version would ever commit. */
	if (na != nb || memcmp(a, b, na * sizeof(*a)))
		T_FAIL("the ranks saved at different steps (%zu and %zu saves)", na, nb);
	if (na < 3 || a[0] != 100)
		T_FAIL("want the bootstrap save at step 100 and advised saves after it");
	/* After the bootstrap the spacing is the advised one; the advice may
	 * change as the cost is measured again (the first save pays page
	 * faults), each change starting at a step both ranks had not reached.
	 * The last saves are at the final advice's spacing. */
	uint64_t every = a[na - 1] - a[na - 2];
	size_t run = 1;
	while (run + 1 < na && a[na - run] - a[na - run - 1] == every)
		run++;
	if (run < 3)
		T_FAIL("the last saves are not evenly spaced (%zu at %llu steps)", run, (unsigned long long)every);
	T_ASSERT(every > 1 && every != 100);
	/* The coordinator's figures, and the formula. */
	ckptd_secret *js = rt_job_secret(&env, JOB);
	ckptd_client *cli = rt_connect(d.unixa, JOB, CKPTD_ROLE_CLI, js);
	ckptd_msg req = { .type = CKPTD_MSG_GOODPUT }, rep;
	snprintf(req.u.goodput.job, sizeof(req.u.goodput.job), "%s", JOB);
	T_ASSERT(ckptd_client_call(cli, &req, &rep) == 0 && rep.type == CKPTD_MSG_GOODPUT_REPLY);
	const ckptd_goodput_reply *g = &rep.u.goodput_reply;
	double c = g->cost_ns / 1e9, m = g->mtbf_ns / 1e9, t = g->interval_ns / 1e9;
	fprintf(stderr, "advice: every %llu steps, %.3f s; cost %.4f s, MTBF %.0f s\n",
	        (unsigned long long)g->interval_steps, t, c, m);
	if (g->interval_steps != every)
		T_FAIL("the ranks saved every %llu steps, the coordinator advised %llu", (unsigned long long)every,
		       (unsigned long long)g->interval_steps);
	if (fabs(m - MTBF_S) > 0.01 || c <= 0)
		T_FAIL("advice used cost %.4f s and MTBF %.1f s, want MTBF %d", c, m, MTBF_S);
	double x = c / (2 * m), want = sqrt(2 * c * m) * (1 + sqrt(x) / 3 + x / 9) - c;
	if (fabs(t - want) > 1e-3 * want)
		T_FAIL("advised %.4f s, Young/Daly gives %.4f s for those figures", t, want);
	/* A step takes STEP_MS and a little: the interval in steps follows. */
	double steps = t / (STEP_MS / 1e3);
	if (every > steps * 1.05 + 1)
		T_FAIL("every %llu steps is more than %.1f s at %d ms a step", (unsigned long long)every, t, STEP_MS);
	ckptd_msg_free(&rep);
	/* Every advised save committed (the last one may still be in flight). */
	for (size_t i = 0; i + 1 < na; i++) {
		ckptd_version_info v;
		if (!rt_list_find(cli, JOB, a[i], &v) || v.state != CKPT_STATE_COMMITTED)
			T_FAIL("version %llu is not committed", (unsigned long long)a[i]);
	}
	T_ASSERT(td_log_has(&d, "checkpoint interval advised"));
	ckptd_client_close(cli);
	ckptd_secret_free(js);
	T_ASSERT(rt_stop(&d) == 0);
	ckptd_secret_free(env.cluster);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
