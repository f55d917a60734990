/* Checkpoint-interval advice: two libckpt ranks run with interval "auto"
 * and save whenever ckpt_step says so. Before any advice both save at step
 * 100, 200, ... (which measures what a checkpoint costs); then the coordinator
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
#define STEPS 800 /* the same steps on both ranks: a fixed count, not a time */
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
	for (uint64_t step = 1; step <= STEPS; step++) {
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
		T_ASSERT(td_wait_pid(pids[r], STEPS * STEP_MS * 10, &st) == 0);
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
	for (size_t i = 0; i < nb; i++)
		fprintf(stderr, "%s%llu", i ? " " : "rank 1: ", (unsigned long long)b[i]);
	fprintf(stderr, "\n");
	if (na != nb || memcmp(a, b, na * sizeof(*a)))
		T_FAIL("the ranks saved at different steps (%zu and %zu saves)", na, nb);
	if (na < 3 || a[0] != 100)
		T_FAIL("want the bootstrap save at step 100 and advised saves after it");
	/* After the bootstrap, each save is at a step of the advice in force:
	 * the coordinator logs every advice (it changes as the cost and step
	 * time are measured again), each starting at a step no rank had
	 * reached, and both ranks followed the same one. */
	uint64_t adv_every[64], adv_from[64];
	size_t nadv = 0;
	FILE *lf = fopen(d.log, "r");
	T_ASSERT(lf);
	char line[1024];
	while (fgets(line, sizeof(line), lf) && nadv < 64) {
		const char *p = strstr(line, "checkpoint interval advised: every ");
		unsigned long long e, f;
		double secs;
		if (p && sscanf(p, "checkpoint interval advised: every %llu steps (%lf s) from step %llu", &e, &secs, &f) == 3) {
			adv_every[nadv] = e;
			adv_from[nadv++] = f;
		}
	}
	fclose(lf);
	if (!nadv)
		T_FAIL("no advice in the daemon's log");
	size_t advised = 0;
	for (size_t i = 1; i < na; i++) {
		/* The newest advice (in the order they were announced) that has
		 * started by then rules, as in ckpt_step. */
		size_t k = nadv;
		for (size_t q = nadv; q-- > 0;)
			if (adv_from[q] <= a[i]) {
				k = q;
				break;
			}
		if (k == nadv) { /* before the first advice starts: every 100 steps */
			if (a[i] % 100)
				T_FAIL("save at step %llu, before any advice, is not a multiple of 100", (unsigned long long)a[i]);
			continue;
		}
		if ((a[i] - adv_from[k]) % adv_every[k])
			T_FAIL("save at step %llu follows no advice", (unsigned long long)a[i]);
		advised++;
	}
	if (advised < 2)
		T_FAIL("only %zu saves at an advised step", advised);
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
	if (g->interval_steps != adv_every[nadv - 1])
		T_FAIL("the coordinator reports %llu steps, its log's last advice %llu",
		       (unsigned long long)g->interval_steps, (unsigned long long)adv_every[nadv - 1]);
	if (fabs(m - MTBF_S) > 0.01 || c <= 0)
		T_FAIL("advice used cost %.4f s and MTBF %.1f s, want MTBF %d", c, m, MTBF_S);
	double x = c / (2 * m), want = sqrt(2 * c * m) * (1 + sqrt(x) / 3 + x / 9) - c;
	if (fabs(t - want) > 1e-3 * want)
		T_FAIL("advised %.4f s, Young/Daly gives %.4f s for those figures", t, want);
	/* A step takes STEP_MS and a little: the interval in steps follows. */
	double steps = t / (STEP_MS / 1e3);
	if (g->interval_steps > steps * 1.05 + 1)
		T_FAIL("every %llu steps is more than %.3f s at %d ms a step", (unsigned long long)g->interval_steps, t,
		       STEP_MS);
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
