/* kill -9 of the coordinator in the middle of a stream of commits, several
 * times, restarting it each time (every other time on an empty root: the
 * agents' inventories must rebuild everything). Agents reconnect and resend
 * their inventories; every version any rank was told was COMMITTED is still
 * listed COMMITTED at LOCAL_MEM afterwards. */
#include "roles_test.h"

#define JOB "recov"
#define WORLD 6
#define VERSIONS 40
#define BYTES 8192
#define KILLS 6

static rt_env env;
static daemon_t coord, agent[3];

/* Saves VERSIONS versions one after the other, each after the previous
 * one's notice; writes every version it was told committed to its pipe. */
static void saver(int rank, int out_fd)
{
	ckptd_secret *s = rt_job_secret(&env, JOB);
	ckptd_client *c = rt_rank(agent[rank / 2].unixa, JOB, s, (uint32_t)rank, WORLD);
	for (uint64_t v = 1; v <= VERSIONS; v++) {
		T_ASSERT(rt_save(c, JOB, v, (uint32_t)rank, WORLD, BYTES) == 0);
		if (rt_wait_notice(c, v, 30000) != CKPT_TIER_LOCAL_MEM)
			T_FAIL("rank %d: no notice for version %llu within 30 s", rank, (unsigned long long)v);
		T_ASSERT(write(out_fd, &v, sizeof(v)) == sizeof(v));
	}
	exit(0);
}

int main(void)
{
	rt_init(&env, "roles-recover");
	static const char *const cargs[] = { "--role", "coordinator", "--agent-grace", "30s", NULL };
	rt_daemon(&env, &coord, "coord", 1, cargs);
	rt_start(&env, &coord);
	const char *aargs[] = { "--role", "agent", "--coordinator", coord.tcp, "--pool-size", "16M", NULL };
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "node%d", i);
		rt_daemon(&env, &agent[i], name, 0, aargs);
		rt_start(&env, &agent[i]);
	}
	rt_wait_agents(&env, coord.tcp, 3, 10000);

	int out[2];
	T_ASSERT(pipe(out) == 0);
	pid_t pids[WORLD];
	for (int r = 0; r < WORLD; r++) {
		pids[r] = fork();
		T_ASSERT(pids[r] >= 0);
		if (pids[r] == 0) {
			close(out[0]);
			saver(r, out[1]);
		}
	}
	close(out[1]);
	uint64_t told_max = 0, seed = (uint64_t)getpid();
	int killed = 0;
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	uint64_t next_kill = rt_ms() + 150;
	int open_ranks = 1;
	while (open_ranks) {
		uint64_t v;
		ssize_t n = read(out[0], &v, sizeof(v));
		if (n == sizeof(v)) {
			if (v > told_max)
				told_max = v;
			continue;
		}
		if (n == 0)
			open_ranks = 0;
		if (killed < KILLS && rt_ms() >= next_kill) {
			/* SIGKILL at a random point of the stream, then back up. */
			rt_kill9(&coord);
			if (killed % 2) {
				char cmd[700];
				snprintf(cmd, sizeof(cmd), "rm -rf '%s/coord'", coord.root);
				T_ASSERT(system(cmd) == 0);
			}
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			usleep((useconds_t)(seed >> 33) % 200000);
			rt_start(&env, &coord);
			killed++;
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			next_kill = rt_ms() + 100 + (seed >> 33) % 500;
			fprintf(stderr, "kill %d: coordinator restarted%s; ranks told up to version %llu\n", killed,
			        killed % 2 == 0 ? " on an empty root" : "", (unsigned long long)told_max);
		}
		usleep(5000);
	}
	for (int r = 0; r < WORLD; r++) {
		int st;
		waitpid(pids[r], &st, 0);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	/* The stream's pace decides how many kills land inside it; at least one
	 * restart on the old root and one on an empty root must have. */
	if (killed < 2)
		T_FAIL("only %d coordinator kills landed during the commits", killed);
	T_ASSERT(told_max == VERSIONS);

	/* One last kill after everything was announced, on an empty root:
	 * only the inventories can bring it back. */
	rt_kill9(&coord);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/coord'", coord.root);
	T_ASSERT(system(cmd) == 0);
	rt_start(&env, &coord);
	ckptd_secret *js = rt_job_secret(&env, JOB);
	uint64_t end = rt_ms() + 20000;
	uint64_t v = 1;
	while (v <= VERSIONS && rt_ms() < end) {
		ckptd_client *cli = rt_connect(coord.tcp, JOB, CKPTD_ROLE_CLI, js);
		for (; v <= VERSIONS; v++) {
			ckptd_version_info vi;
			if (!rt_list_find(cli, JOB, v, &vi) || vi.state != CKPT_STATE_COMMITTED ||
			    !(vi.tiers & CKPT_TIER_LOCAL_MEM))
				break;
		}
		ckptd_client_close(cli);
		if (v <= VERSIONS)
			usleep(100000);
	}
	ckptd_secret_free(js);
	if (v <= VERSIONS)
		T_FAIL("version %llu was announced COMMITTED but is not listed so after recovery", (unsigned long long)v);
	fprintf(stderr, "ok: %d coordinator kills during %d commits; all %d announced versions COMMITTED at LOCAL_MEM after recovery\n",
	        KILLS + 1, VERSIONS, VERSIONS);
	for (int i = 0; i < 3; i++)
		T_ASSERT(rt_stop(&agent[i]) == 0);
	T_ASSERT(rt_stop(&coord) == 0);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
