/* Coordinator commit latency through the real daemon: simulated agents
 * (TCP connections speaking the agent protocol) send the SHARD_DONEs of N
 * ranks; the figure is the time from the first SHARD_DONE sent to the last
 * agent's COMMIT_NOTICE. A program, not a timed test:
 *   CKPT_BIN=build/bin build/tests/ckptd-roles-bench [AGENTS] [REPS] [RANKS...]
 * RANKS: the world sizes to commit (default 1024 16384); the smoke test
 * (tests/ckptd_roles/CMakeLists.txt) runs small ones. */
#include "roles_test.h"

#define MAX_AGENTS 1024
#define MAX_WORLDS 8

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t us_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
	rt_env env;
	daemon_t d;
	int agents = argc > 1 ? atoi(argv[1]) : 64, reps = argc > 2 ? atoi(argv[2]) : 5;
	uint32_t worlds[MAX_WORLDS] = { 1024, 16384 };
	int nworlds = 2;
	if (argc > 3) {
		nworlds = 0;
		for (int a = 3; a < argc; a++) {
			char *end;
			unsigned long w = strtoul(argv[a], &end, 10);
			if (*end || w < 1 || w > (1u << 20) || nworlds == MAX_WORLDS) {
				fprintf(stderr, "ckptd-roles-bench: bad world size '%s' (1..1048576, at most %d)\n", argv[a],
				        MAX_WORLDS);
				return T_EXIT_FAIL;
			}
			worlds[nworlds++] = (uint32_t)w;
		}
	}
	if (agents < 1 || agents > MAX_AGENTS || reps < 1) {
		fprintf(stderr, "usage: ckptd-roles-bench [AGENTS 1..%d] [REPS >= 1] [RANKS...]\n", MAX_AGENTS);
		return T_EXIT_FAIL;
	}
	rt_init(&env, "roles-bench");
	static const char *const args[] = { "--role", "coordinator", "--log-level", "warn", NULL };
	rt_daemon(&env, &d, "coord", 1, args);
	rt_start(&env, &d);
	static ckptd_client *ag[MAX_AGENTS];
	for (int i = 0; i < agents; i++) {
		char node[32], address[32];
		snprintf(node, sizeof(node), "sim%d", i);
		snprintf(address, sizeof(address), "127.0.0.1:%d", 20000 + i);
		ag[i] = rt_sim_agent(&env, d.tcp, node, address, 1ull << 30);
	}
	uint64_t version = 0;
	printf("coordinator commit latency, %d simulated agents over TCP, first SHARD_DONE -> last COMMIT_NOTICE\n", agents);
	for (int w = 0; w < nworlds; w++) {
		uint32_t world = worlds[w];
		char job[32];
		snprintf(job, sizeof(job), "bench%u", world);
		uint64_t *lat = calloc((size_t)reps, sizeof(*lat));
		for (int rep = 0; rep < reps; rep++) {
			version++;
			uint64_t t0 = us_now();
			/* Ranks striped over agents; each agent's reports in one burst. */
			for (int i = 0; i < agents; i++) {
				for (uint32_t r = (uint32_t)i; r < world; r += (uint32_t)agents) {
					ckptd_msg m = { .type = CKPTD_MSG_SHARD_DONE };
					snprintf(m.u.shard_done.job, sizeof(m.u.shard_done.job), "%s", job);
					m.u.shard_done.version = version;
					m.u.shard_done.rank = r;
					m.u.shard_done.world_size = world;
					m.u.shard_done.tier = CKPT_TIER_LOCAL_MEM;
					m.u.shard_done.bytes = 1 << 20;
					m.u.shard_done.checksum = r;
					m.u.shard_done.lineage = 1;
					T_ASSERT(ckptd_client_send(ag[i], &m) == 0);
				}
			}
			for (int i = 0; i < agents; i++) {
				for (;;) {
					ckptd_msg m;
					T_ASSERT(ckptd_client_recv(ag[i], &m) == 0);
					int done = m.type == CKPTD_MSG_COMMIT_NOTICE && m.u.commit_notice.version == version;
					if (m.type == CKPTD_MSG_ERROR)
						T_FAIL("refused: %s", m.u.error.text);
					ckptd_msg_free(&m);
					if (done)
						break;
				}
			}
			lat[rep] = us_now() - t0;
		}
		qsort(lat, (size_t)reps, sizeof(*lat), cmp_u64);
		printf("  %6u ranks: median %8.1f ms  min %8.1f ms  max %8.1f ms  (%d runs)\n", world,
		       (double)lat[reps / 2] / 1000.0, (double)lat[0] / 1000.0, (double)lat[reps - 1] / 1000.0, reps);
		free(lat);
	}
	for (int i = 0; i < agents; i++)
		ckptd_client_close(ag[i]);
	rt_stop(&d);
	ckptd_secret_free(env.cluster);
	t_rmrf(env.dir);
	return 0;
}
