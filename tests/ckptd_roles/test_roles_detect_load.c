/* No false suspicion with the CPUs saturated (docs/operations.md, "Failure
 * detection"), with the default detection settings: a coordinator, agents
 * n1 and n2, and a libckpt rank on each that keeps as many threads spinning
 * as there are CPUs (a trainer's own compute competing with its io thread,
 * which heartbeats), while the test adds as many spinning processes again.
 * For 6 s (past the 5 s --hang-timeout and four times the 1.5 s
 * --failure-timeout) no decision may be made: `ckpt events --job ld` lists
 * none and the coordinator logs none. Still under the load, agent n2 is
 * stopped: node-lost n2 must come within 2 s (detection works under load,
 * so the silence before was not blindness). */
#include "roles_test.h"
#include "rank_proc.h"

#include <ckpt.h>
#include <pthread.h>

static rt_env env;
static daemon_t coord, ag[3];
static pid_t driver;

static void *spin(void *arg)
{
	volatile uint64_t *x = arg;
	for (;;)
		(*x)++;
	return NULL;
}

static void rank_main(int out, int ncpu)
{
	static uint8_t w[4096];
	static uint64_t sink[64];
	ckpt_ctx *ctx = rp_open_weights(w, sizeof(w));
	for (int i = 0; i < ncpu; i++) {
		pthread_t t;
		T_ASSERT(pthread_create(&t, NULL, spin, &sink[i % 64]) == 0);
	}
	rp_put(out, 'R');
	(void)ctx;
	for (;;)
		pause();
}

static int events_now(char *buf, size_t cap)
{
	char cmd[2048], out[700];
	snprintf(out, sizeof(out), "%s/events.out", env.dir);
	snprintf(cmd, sizeof(cmd), "'%s/ckpt' events --job ld --json --daemon %s --token-file '%s' >'%s' 2>&1",
	         getenv("CKPT_BIN"), coord.tcp, env.tokpath, out);
	int rc = system(cmd);
	size_t len;
	char *s = t_slurp(out, &len);
	snprintf(buf, cap, "%s", s ? s : "");
	int n = 0;
	for (char *p = s; p && (p = strstr(p, "\"epoch\": ")); p++)
		n++;
	free(s);
	return WIFEXITED(rc) && WEXITSTATUS(rc) == 0 ? n : -1;
}

int main(int argc, char **argv)
{
	/* A soak by hand: test_roles_detect_load SECONDS (CI: 6). */
	int secs = argc > 1 ? atoi(argv[1]) : 6;
	if (secs < 1 || secs > 86400) {
		fprintf(stderr, "usage: %s [SECONDS]\n", argv[0]);
		return T_EXIT_FAIL;
	}
	driver = getpid();
	rt_init(&env, "roles-dload");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 1)
		ncpu = 1;
	if (ncpu > 64)
		ncpu = 64;
	const char *cargs[] = { "--role", "coordinator", NULL };
	rt_daemon(&env, &coord, "coord", 1, cargs);
	rt_start(&env, &coord);
	for (int k = 1; k <= 2; k++) {
		char name[8], up[64];
		snprintf(name, sizeof(name), "n%d", k);
		const char *aargs[] = { "--role", "agent", "--coordinator", coord.tcp, "--pool-size", "8M", NULL };
		rt_daemon(&env, &ag[k], name, 0, aargs);
		rt_start(&env, &ag[k]);
		snprintf(up, sizeof(up), "agent %s up", name);
		td_wait_log(&coord, up, 10000);
	}
	pid_t ranks[2];
	int rep[2];
	for (int r = 0; r < 2; r++) {
		char root[600];
		snprintf(root, sizeof(root), "%s/r%d.ckpt", env.dir, r);
		T_ASSERT(mkdir(root, 0700) == 0);
		ranks[r] = rp_fork(&rep[r]);
		if (ranks[r] == 0) {
			rp_rank rr = { env.dir, "load", "ld", r, 2, 0, root, ag[r + 1].unixa, "local_disk", env.tokpath, secs + 60 };
			rp_child_setup(driver, &rr);
			rank_main(rep[r], (int)ncpu);
			exit(T_EXIT_PASS);
		}
	}
	for (int r = 0; r < 2; r++)
		T_ASSERT(rp_get(rep[r], 20000) == 'R');
	/* As many spinning processes again as CPUs, at the daemons' priority. */
	pid_t spinners[64];
	for (long i = 0; i < ncpu; i++) {
		fflush(NULL);
		if ((spinners[i] = fork()) == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			alarm((unsigned)secs + 30);
			volatile uint64_t x = 0;
			for (;;)
				x++;
		}
		T_ASSERT(spinners[i] > 0);
	}
	fprintf(stderr, "load: %ld CPUs, %ld spinning threads in each of 2 ranks, %ld spinning processes, for %d s\n", ncpu,
	        ncpu, ncpu, secs);
	uint64_t tl = td_ms();
	while (td_ms() - tl < (uint64_t)secs * 1000)
		usleep(100 * 1000);
	char buf[8192];
	int quiet = events_now(buf, sizeof(buf));
	int logged = td_log_has(&coord, "decided:");
	uint64_t t0 = td_ms();
	T_ASSERT(kill(ag[2].pid, SIGSTOP) == 0);
	int seen = 0;
	double lat = 0;
	while (td_ms() - t0 < 8000 && !seen) {
		usleep(50 * 1000);
		seen = td_log_has(&coord, "decided: node-lost on n2, ranks 1");
		lat = (double)(td_ms() - t0) / 1e3;
	}
	for (long i = 0; i < ncpu; i++)
		kill(spinners[i], SIGKILL);
	for (long i = 0; i < ncpu; i++)
		waitpid(spinners[i], NULL, 0);
	kill(ag[2].pid, SIGCONT);
	for (int r = 0; r < 2; r++) {
		kill(ranks[r], SIGKILL);
		waitpid(ranks[r], NULL, 0);
	}
	rt_stop(&ag[1]);
	rt_stop(&ag[2]);
	rt_stop(&coord);
	int ok = quiet == 0 && !logged && seen && lat <= 2.5;
	if (!ok) {
		td_print_tail(coord.log, 30);
		fprintf(stderr, "FAIL: under load: %d decisions listed%s%s, the coordinator %s; node-lost of the stopped n2 "
		        "%s after %.2f s (bound 2 s + the log's poll); logs in %s\n", quiet, quiet ? ":\n" : "", quiet ? buf : "",
		        logged ? "logged one" : "logged none", seen ? "seen" : "NOT seen", lat, env.dir);
		return T_EXIT_FAIL;
	}
	fprintf(stderr, "ok: %d s of saturated CPUs, no decision; a stopped agent still decided lost in %.2f s\n", secs, lat);
	ckptd_secret_free(env.cluster);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
