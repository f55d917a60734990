/* Persistent stragglers and their node evidence, end to end: three real
 * libckpt ranks step through a `ckptd --role both` started with
 * --straggler-windows 3 and its health files pointed at a tree this test
 * writes (--health-proc, --health-cgroup, --health-kmsg), where the node
 * shows CPU steal rising, the ranks' cgroup throttled, memory pressure and
 * an OOM kill in the kernel log. Rank 1 is three times slower than the
 * others. Within a few judgements:
 * - STRAGGLERS (what `ckpt stragglers` lists) names rank 1, and only it,
 *   with evidence the agent gathered: every source available, the verdict
 *   naming CPU steal, CPU throttling, memory pressure and the OOM kill, the
 *   kernel message, its own step times (at least the 60 ms it sleeps);
 * - the coordinator logs "persistent straggler", and `ckpt stragglers
 *   --json` and `ckpt status --job --json` show it;
 * - a fast rank is never named. */
#include "helpers.h"
#include "roles_test.h"

#include <ckpt.h>
#include <stdarg.h>
#include <time.h>

#define JOB "persist"
#define WORLD 3
#define SLOW 1
#define FAST_MS 20
#define SLOW_MS 60
#define RUN_MS 9000

static char tree[700];

static void put(const char *rel, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(const char *rel, const char *fmt, ...)
{
	char path[1000], tmp[1010], cmd[1100];
	snprintf(path, sizeof(path), "%s/%s", tree, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	if (system(cmd) != 0)
		_exit(20);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		_exit(21);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
	rename(tmp, path); /* the agent never reads half a file */
}

static void rank_main(const rt_env *env, const daemon_t *d, uint32_t rank)
{
	/* The agent reads this process's cgroup from the tree. */
	char rel[64];
	snprintf(rel, sizeof(rel), "proc/%d/cgroup", (int)getpid());
	put(rel, "0::/train/rank%u\n", rank);
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

/* The node's files at tick k (every 250 ms): 1,000 ticks of CPU time a
 * tick, 300 of them stolen; each rank's cgroup throttled in half its
 * periods. */
static void node_files(unsigned k)
{
	unsigned long long t = 1000ull * k;
	put("proc/stat", "cpu  %llu 0 %llu %llu 0 0 0 %llu 0 0\nctxt 1\n", t / 2, t / 10, t / 10, 3 * t / 10);
	for (uint32_t r = 0; r < WORLD; r++) {
		char rel[64];
		snprintf(rel, sizeof(rel), "cgroup/train/rank%u/cpu.stat", r);
		put(rel, "usage_usec %u\nnr_periods %u\nnr_throttled %u\nthrottled_usec %u\n", 1000 * k, 10 * k, 5 * k,
		    50000 * k);
	}
}

static uint64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

static int persistent(ckptd_client *cli, ckptd_node_evidence *out, uint32_t *n)
{
	ckptd_msg req = { .type = CKPTD_MSG_STRAGGLERS }, rep;
	snprintf(req.u.stragglers.job, sizeof(req.u.stragglers.job), "%s", JOB);
	T_ASSERT(ckptd_client_call(cli, &req, &rep) == 0);
	if (rep.type != CKPTD_MSG_STRAGGLERS_REPLY)
		T_FAIL("STRAGGLERS answered %u", rep.type);
	*n = rep.u.stragglers_reply.count;
	int found = -1;
	for (uint32_t i = 0; i < *n; i++)
		if (rep.u.stragglers_reply.entries[i].rank == SLOW) {
			*out = rep.u.stragglers_reply.entries[i];
			found = 1;
		} else {
			found = 0; /* a fast rank named: wrong */
			fprintf(stderr, "fast rank named: %s\n", rep.u.stragglers_reply.entries[i].text);
			break;
		}
	ckptd_msg_free(&rep);
	return found;
}

static void cli_shows(const rt_env *env, const daemon_t *d)
{
	char cmd[4000], out[800];
	snprintf(out, sizeof(out), "%s/cli.json", env->dir);
	snprintf(cmd, sizeof(cmd), "timeout 20 '%s/ckpt' stragglers --daemon '%s' --token-file '%s' --job %s --json > '%s'",
	         getenv("CKPT_BIN"), d->unixa, env->tokpath, JOB, out);
	T_ASSERT(system(cmd) == 0);
	T_ASSERT(td_file_has(out, 0, "\"persistent\": [") && td_file_has(out, 0, "\"verdict\": \"OOM kill") &&
	         td_file_has(out, 0, "\"cpu_steal\": 0.300"));
	snprintf(cmd, sizeof(cmd), "timeout 20 '%s/ckpt' status --daemon '%s' --token-file '%s' --job %s --json > '%s'",
	         getenv("CKPT_BIN"), d->unixa, env->tokpath, JOB, out);
	T_ASSERT(system(cmd) == 0);
	T_ASSERT(td_file_has(out, 0, "\"persistent_stragglers\": [{\"rank\": 1"));
}

int main(void)
{
	rt_env env;
	rt_init(&env, "roles-persist");
	snprintf(tree, sizeof(tree), "%s/node", env.dir);
	char proc[800], cg[800], km[800];
	snprintf(proc, sizeof(proc), "%s/proc", tree);
	snprintf(cg, sizeof(cg), "%s/cgroup", tree);
	snprintf(km, sizeof(km), "%s/kmsg", tree);
	node_files(0);
	put("proc/diskstats", " 253 0 vda 10 0 0 10 10 0 0 10 0 0 0\n");
	put("proc/pressure/cpu", "some avg10=3.00 avg60=1.00 avg300=0.00 total=5\n");
	put("proc/pressure/memory", "some avg10=30.00 avg60=1.00 avg300=0.00 total=5\n"
	                            "full avg10=12.00 avg60=1.00 avg300=0.00 total=5\n");
	put("proc/pressure/io", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	                        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
	put("kmsg", "6,1,%llu,-;Out of memory: Killed process 777 (dataloader) total-vm:1kB\n",
	    (unsigned long long)mono_us());
	daemon_t d;
	const char *const args[] = { "--role", "both", "--straggler-window", "30s", "--straggler-windows", "3",
	                             "--retention-interval", "0", "--health-proc", proc, "--health-cgroup", cg,
	                             "--health-kmsg", km, NULL };
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
	ckptd_secret *js = rt_job_secret(&env, JOB);
	ckptd_client *cli = rt_connect(d.unixa, JOB, CKPTD_ROLE_CLI, js);
	ckptd_node_evidence e;
	uint32_t n = 0;
	int got = -1;
	uint64_t t0 = rt_ms();
	for (unsigned k = 1; got != 1 && k <= (RUN_MS - 1000) / 250; k++) {
		node_files(k);
		usleep(250000);
		got = persistent(cli, &e, &n);
		T_ASSERT(got != 0); /* never a fast rank */
	}
	if (got != 1)
		T_FAIL("no persistent straggler named within %d s (daemon log %s)", RUN_MS / 1000, d.log);
	fprintf(stderr, "named after %llu ms; evidence: %s\n", (unsigned long long)(rt_ms() - t0), e.text);
	T_ASSERT(e.rank == SLOW && !strcmp(e.node, "n1") && e.windows >= 3);
	uint32_t every = CKPTD_EV_CPU | CKPTD_EV_CGROUP | CKPTD_EV_PSI | CKPTD_EV_DISK | CKPTD_EV_KMSG | CKPTD_EV_STEPS;
	if (e.flags != every)
		T_FAIL("evidence sources %#x, want %#x (daemon log %s)", e.flags, every, d.log);
	T_ASSERT(e.steal_pm == 300 && e.nr_throttled * 2 == e.nr_periods && e.nr_periods > 0);
	T_ASSERT(e.psi_mem_full == 1200 && e.oom_kills == 1 && strstr(e.kmsg, "dataloader"));
	T_ASSERT(strstr(e.verdict, "OOM kill") && strstr(e.verdict, "CPU steal") && strstr(e.verdict, "CPU throttling") &&
	         strstr(e.verdict, "memory pressure") && !strstr(e.verdict, "slow disk"));
	/* Its own step times, as the agent saw its reports: about 60 ms. */
	const char *h = strstr(e.text, "its step times (ms, oldest first): ");
	T_ASSERT(h && atof(h + strlen("its step times (ms, oldest first): ")) >= SLOW_MS - 5);
	T_ASSERT(e.step_ns * 10 > e.fastest_ns * 15); /* what made it a straggler */
	T_ASSERT(td_log_has(&d, "persistent straggler: rank 1 on n1"));
	cli_shows(&env, &d);
	for (uint32_t r = 0; r < WORLD; r++) {
		int st;
		T_ASSERT(td_wait_pid(pids[r], RUN_MS + 20000, &st) == 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			T_FAIL("rank %u exited with status %d", r, st);
	}
	ckptd_client_close(cli);
	ckptd_secret_free(js);
	T_ASSERT(rt_stop(&d) == 0);
	ckptd_secret_free(env.cluster);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
