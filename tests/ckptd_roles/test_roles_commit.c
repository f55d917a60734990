/* Three agents and a coordinator as processes on 127.0.0.1; a 6-rank job,
 * 2 ranks per agent, each rank a process. Every rank saves into node DRAM
 * and hears COMMIT_NOTICE only after the 6th shard; LIST_VERSIONS shows the
 * version COMMITTED at LOCAL_MEM. Then every rank is killed with SIGKILL
 * and new rank processes read their shards back, bit-exact, from the DRAM
 * the agents kept. */
#include "roles_test.h"

#define JOB "llama"
#define WORLD 6
#define VERSION 100
#define BYTES (256 * 1024 + 123)

static rt_env env;
static daemon_t coord, agent[3];

/* A saver: saves, tells the parent, waits for the go (rank 5) or checks
 * that no notice comes early (ranks 0-4), waits for the notice, reports,
 * then lives on until killed. */
static void saver(int rank, int ready_fd, int go_fd)
{
	ckptd_secret *s = rt_job_secret(&env, JOB);
	ckptd_client *c = rt_rank(agent[rank / 2].unixa, JOB, s, (uint32_t)rank, WORLD);
	char b = 0;
	if (rank == WORLD - 1) {
		T_ASSERT(read(go_fd, &b, 1) == 1); /* the others have reported */
		T_ASSERT(rt_save(c, JOB, VERSION, (uint32_t)rank, WORLD, BYTES) == 0);
	} else {
		T_ASSERT(rt_save(c, JOB, VERSION, (uint32_t)rank, WORLD, BYTES) == 0);
		/* 5 of 6 shards in: nothing may be announced. */
		struct pollfd p = { .fd = ckptd_client_fd(c), .events = POLLIN };
		if (poll(&p, 1, 700) != 0)
			T_FAIL("rank %d heard something before the 6th shard", rank);
		b = 'r';
		T_ASSERT(write(ready_fd, &b, 1) == 1);
	}
	if (rt_wait_notice(c, VERSION, 15000) != CKPT_TIER_LOCAL_MEM)
		T_FAIL("rank %d: no COMMIT_NOTICE at LOCAL_MEM", rank);
	b = 'n';
	T_ASSERT(write(ready_fd, &b, 1) == 1);
	for (;;)
		pause(); /* until SIGKILL: the copy must outlive us */
}

static void reader(int rank)
{
	ckptd_secret *s = rt_job_secret(&env, JOB);
	ckptd_client *c = rt_rank(agent[rank / 2].unixa, JOB, s, (uint32_t)rank, WORLD);
	int r = rt_verify(c, JOB, VERSION, (uint32_t)rank, BYTES);
	if (r != 0)
		T_FAIL("rank %d read back from DRAM: %d", rank, r);
	/* The agent forwards a rank's listing to the coordinator. */
	ckptd_version_info vi;
	T_ASSERT(rt_list_find(c, JOB, VERSION, &vi));
	T_ASSERT(vi.state == CKPT_STATE_COMMITTED && (vi.tiers & CKPT_TIER_LOCAL_MEM));
	ckptd_client_close(c);
	exit(0);
}

int main(void)
{
	rt_init(&env, "roles-commit");
	static const char *const cargs[] = { "--role", "coordinator", "--agent-grace", "5s", NULL };
	rt_daemon(&env, &coord, "coord", 1, cargs);
	rt_start(&env, &coord);
	static char coordflag[64];
	snprintf(coordflag, sizeof(coordflag), "%s", coord.tcp);
	const char *aargs[] = { "--role", "agent", "--coordinator", coordflag, "--pool-size", "32M", NULL };
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "node%d", i);
		rt_daemon(&env, &agent[i], name, 0, aargs);
		rt_start(&env, &agent[i]);
	}
	rt_wait_agents(&env, coord.tcp, 3, 10000);

	int ready[2], go[2];
	T_ASSERT(pipe(ready) == 0 && pipe(go) == 0);
	pid_t pids[WORLD];
	for (int r = 0; r < WORLD; r++) {
		pids[r] = fork();
		T_ASSERT(pids[r] >= 0);
		if (pids[r] == 0)
			saver(r, ready[1], go[0]);
	}
	char b;
	for (int i = 0; i < WORLD - 1; i++)
		T_ASSERT(read(ready[0], &b, 1) == 1 && b == 'r');
	/* Before the last shard the coordinator lists the version PENDING. */
	ckptd_secret *js = rt_job_secret(&env, JOB);
	ckptd_client *cli = rt_connect(coord.tcp, JOB, CKPTD_ROLE_CLI, js);
	ckptd_version_info vi;
	T_ASSERT(rt_list_find(cli, JOB, VERSION, &vi));
	T_ASSERT(vi.state == CKPT_STATE_PENDING && vi.tiers == 0 && vi.shards_done == WORLD - 1);
	T_ASSERT(write(go[1], "g", 1) == 1);
	for (int i = 0; i < WORLD; i++) {
		if (read(ready[0], &b, 1) != 1 || b != 'n') {
			for (int r = 0; r < WORLD; r++)
				kill(pids[r], SIGKILL);
			T_FAIL("a rank failed before its COMMIT_NOTICE");
		}
	}
	T_ASSERT(rt_list_find(cli, JOB, VERSION, &vi));
	T_ASSERT(vi.state == CKPT_STATE_COMMITTED && (vi.tiers & CKPT_TIER_LOCAL_MEM) && vi.shards_done == WORLD);
	T_ASSERT(vi.world_size == WORLD && vi.bytes == (uint64_t)WORLD * BYTES);
	fprintf(stderr, "ok: 6 ranks over 3 agents; notice only after the 6th shard; COMMITTED at LOCAL_MEM\n");

	/* Test 2: every rank dies hard; the DRAM copies stay with the agents. */
	for (int r = 0; r < WORLD; r++) {
		int st;
		kill(pids[r], SIGKILL);
		waitpid(pids[r], &st, 0);
		T_ASSERT(WIFSIGNALED(st));
	}
	for (int r = 0; r < WORLD; r++) {
		pids[r] = fork();
		T_ASSERT(pids[r] >= 0);
		if (pids[r] == 0)
			reader(r);
	}
	for (int r = 0; r < WORLD; r++) {
		int st;
		waitpid(pids[r], &st, 0);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	fprintf(stderr, "ok: after kill -9 of every rank, new ranks read their shards back bit-exact from node DRAM\n");

	ckptd_client_close(cli);
	ckptd_secret_free(js);
	for (int i = 0; i < 3; i++)
		T_ASSERT(rt_stop(&agent[i]) == 0);
	T_ASSERT(rt_stop(&coord) == 0);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
