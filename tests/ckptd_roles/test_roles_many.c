/* 256 concurrent simulated ranks (threads, one connection each) against one
 * daemon in --role both: every save of every round commits, and the
 * daemon's resident memory stays bounded.
 *
 * The bound: VmRSS is read once the job's pool is faulted in and the ranks
 * are connected, and again after ROUNDS saves of every rank. What may grow in
 * between is per-request state (replies queued, the coordinator's batch
 * arrays: tens of bytes per rank), LMDB pages touched in the two indexes
 * (256 x ROUNDS records of under 100 bytes: well under 1 MiB each) and
 * heap fragmentation. 16 MiB is ten times that; a leak of one segment-sized
 * buffer (64 KiB) per save would be 256 x 4 x 64 KiB = 64 MiB and fail. */
#include "roles_test.h"

#include <pthread.h>

#define JOB "many"
#define WORLD 256
#define ROUNDS 4
#define BYTES (64 * 1024)
#define RSS_BOUND_KB (16 * 1024)

static rt_env env;
static daemon_t d;
static ckptd_secret *js;
static pthread_barrier_t connected, measured;

typedef struct arg_t {
	int rank;
	int failed;
} arg_t;

static void *rank_main(void *p)
{
	arg_t *a = p;
	ckptd_client *c = rt_rank(d.unixa, JOB, js, (uint32_t)a->rank, WORLD);
	pthread_barrier_wait(&connected);
	pthread_barrier_wait(&measured);
	for (uint64_t v = 1; v <= ROUNDS && !a->failed; v++) {
		if (rt_save(c, JOB, v, (uint32_t)a->rank, WORLD, BYTES) != 0)
			a->failed = 1;
		else if (rt_wait_notice(c, v, 60000) != CKPT_TIER_LOCAL_MEM)
			a->failed = 2;
	}
	ckptd_client_close(c);
	return NULL;
}

static long rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

int main(void)
{
	rt_init(&env, "roles-many");
	static const char *const args[] = { "--role", "both", "--pool-size", "96M", "--log-level", "info", NULL };
	rt_daemon(&env, &d, "node0", 1, args);
	rt_start(&env, &d);
	js = rt_job_secret(&env, JOB);
	pthread_t th[WORLD];
	static arg_t args_[WORLD];
	pthread_barrier_init(&connected, NULL, WORLD + 1);
	pthread_barrier_init(&measured, NULL, WORLD + 1);
	for (int r = 0; r < WORLD; r++) {
		args_[r].rank = r;
		T_ASSERT(pthread_create(&th[r], NULL, rank_main, &args_[r]) == 0);
	}
	pthread_barrier_wait(&connected);
	/* The job's DRAM pool is made on a thread when its first rank
	 * registers: measure once it is faulted in. */
	td_wait_log(&d, "DRAM pool ready", 20000);
	long before = rss_kb(d.pid);
	uint64_t t0 = rt_ms();
	pthread_barrier_wait(&measured);
	int failed = 0;
	for (int r = 0; r < WORLD; r++) {
		pthread_join(th[r], NULL);
		failed += args_[r].failed != 0;
	}
	uint64_t t1 = rt_ms();
	long after = rss_kb(d.pid);
	T_ASSERT(before > 0 && after > 0);
	fprintf(stderr, "%d ranks x %d saves of %d KiB: %llu ms; daemon VmRSS %ld -> %ld kB (+%ld kB, bound %d kB)\n",
	        WORLD, ROUNDS, BYTES / 1024, (unsigned long long)(t1 - t0), before, after, after - before, RSS_BOUND_KB);
	if (failed)
		T_FAIL("%d ranks did not see all their saves commit", failed);
	ckptd_client *cli = rt_connect(d.tcp, JOB, CKPTD_ROLE_CLI, js);
	for (uint64_t v = 1; v <= ROUNDS; v++) {
		ckptd_version_info vi;
		T_ASSERT(rt_list_find(cli, JOB, v, &vi));
		T_ASSERT(vi.state == CKPT_STATE_COMMITTED && vi.shards_done == WORLD && (vi.tiers & CKPT_TIER_LOCAL_MEM));
	}
	ckptd_client_close(cli);
	T_ASSERT(after - before <= RSS_BOUND_KB);
	fprintf(stderr, "ok: every save committed; memory bounded\n");
	T_ASSERT(rt_stop(&d) == 0);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
