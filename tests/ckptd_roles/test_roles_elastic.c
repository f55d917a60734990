/* Elastic restore across tiers: a coordinator and two node agents n1, n2
 * (127.0.0.1, .2) with node and peer pools; two libckpt ranks, one per node,
 * each with its own checkpoint root, save a tensor split between them at
 * local_mem + peer_mem + local_disk. Node n2 is then lost (agent killed,
 * its root deleted): rank 1's shard survives only in its partner's DRAM.
 * The job comes back as ONE rank on n1, which registers the whole tensor:
 * ckpt_restore must take saved rank 0's piece from n1's DRAM (LOCAL_MEM)
 * and saved rank 1's piece from the partner copy (PEER_MEM, libfabric
 * tcp;ofi_rxm on loopback), and the tensor must come back element for
 * element. Skips (77) without the tcp;ofi_rxm provider. */
#include "roles_test.h"
#include "rank_proc.h"

#include <ckpt.h>

#define JOB "elastic"
#define N 300007 /* elements of "w" */
#define WAIT_MS 30000
#define TIERS "local_mem,peer_mem,local_disk"

static rt_env env;
static daemon_t coord, agent[2];
static char ckroot[2][600];
static pid_t driver;

static float val(uint64_t i)
{
	return (float)(i % 8191) * 0.5f + 1.0f;
}

/* A rank of `world` on node k: saves version 1 (world 2) or restores (world 1). */
static void rank_main(int rank, int world, int k, int save, int rep)
{
	rp_rank r = { env.dir, save ? "save" : "restore", JOB, rank, world, save ? 0 : 1, ckroot[k], agent[k].unixa,
	              TIERS, env.tokpath, 120 };
	rp_child_setup(driver, &r);
	setenv("CKPT_CHUNK_BYTES", "64K", 1);
	setenv("CKPT_STAGING_BYTES", "8M", 1);
	setenv("CKPT_PEER_TIMEOUT_MS", "5000", 1);
	uint64_t lo = world == 1 ? 0 : (uint64_t)rank * N / 2, hi = world == 1 ? N : (uint64_t)(rank + 1) * N / 2;
	float *w = malloc((hi - lo) * sizeof(float));
	uint64_t step = save ? 7 : 0;
	T_ASSERT(w);
	for (uint64_t i = lo; i < hi; i++)
		w[i - lo] = save ? val(i) : -1.0f;
	ckpt_config cfg;
	ckpt_ctx *ctx;
	T_OK(ckpt_config_init(&cfg));
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	ckpt_region_desc d = { .size = sizeof(d), .name = "w", .ptr = w, .bytes = (hi - lo) * sizeof(float),
	                       .dtype = CKPT_DTYPE_F32, .ndim = 1, .global_shape = { N }, .offsets = { lo },
	                       .extents = { hi - lo } };
	T_OK(ckpt_region_add(ctx, &d));
	ckpt_region_desc b;
	ckpt_region_desc_init(&b, "step", &step, sizeof(step));
	T_OK(ckpt_region_add(ctx, &b));
	if (save) {
		ckpt_handle *h;
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_save(ctx, 1, 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, WAIT_MS, &st));
		st.size = sizeof(st);
		T_OK(ckpt_handle_wait(h, CKPT_TIER_PEER_MEM, WAIT_MS, &st));
		T_ASSERT(st.committed);
		ckpt_handle_free(h);
	} else {
		uint64_t got = 0;
		T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
		T_ASSERT(got == 1 && step == 7);
		for (uint64_t i = 0; i < N; i++)
			if (w[i] != val(i))
				T_FAIL("element %llu is %g, saved %g", (unsigned long long)i, w[i], val(i));
		fprintf(stderr, "restored all %d elements from 2 saved ranks\n", N);
	}
	rp_put(rep, 'D');
	T_OK(ckpt_ctx_close(ctx));
	free(w);
}

typedef struct proc {
	pid_t pid;
	int rep;
} proc;

static proc spawn(int rank, int world, int k, int save)
{
	int rep;
	pid_t pid = rp_fork(&rep);
	if (pid == 0) {
		rank_main(rank, world, k, save, rep);
		exit(T_EXIT_PASS);
	}
	return (proc){ pid, rep };
}

/* 1 when the rank reported done and exited 0; else its log's tail. */
static int finish(proc p, const char *tag, int rank)
{
	char log[700];
	int st = 0;
	rp_log_path(log, sizeof(log), env.dir, tag, rank);
	char c = rp_get(p.rep, 90000);
	close(p.rep);
	if (c != 'D')
		kill(p.pid, SIGKILL);
	if (c != 'D' || td_wait_pid(p.pid, 60000, &st) < 0 || td_status_code(st) != 0) {
		fprintf(stderr, "FAIL: %s rank %d\n", tag, rank);
		td_print_tail(log, 30);
		return 0;
	}
	return 1;
}

static void start_agent(int k)
{
	char name[16], host[32];
	snprintf(name, sizeof(name), "n%d", k + 1);
	snprintf(host, sizeof(host), "127.0.0.%d", k + 1);
	const char *aargs[] = { "--role", "agent", "--coordinator", coord.tcp, "--pool-size", "32M",
	                        "--peer-pool-size", "32M", NULL };
	rt_daemon_on(&env, &agent[k], name, host, aargs);
	rt_start(&env, &agent[k]);
	snprintf(ckroot[k], sizeof(ckroot[k]), "%s/%s.ckpt", env.dir, name);
}

int main(void)
{
	int ok = 1;
	char log[700], cmd[800];
	driver = getpid();
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("CKPT_FABRIC_PROVIDER", "tcp;ofi_rxm", 1);
	rt_init(&env, "roles-elastic");
	if (system("fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1") != 0) {
		fprintf(stderr, "skip: libfabric's tcp;ofi_rxm provider is not available (fi_info)\n");
		return T_EXIT_SKIP;
	}
	static const char *const cargs[] = { "--role", "coordinator", "--agent-grace", "300s", "--peer-replicas", "1",
	                                     NULL };
	rt_daemon_on(&env, &coord, "coord", "127.0.0.1", cargs);
	rt_start(&env, &coord);
	start_agent(0);
	start_agent(1);
	rt_wait_agents(&env, coord.tcp, 2, 10000);

	proc s0 = spawn(0, 2, 0, 1), s1 = spawn(1, 2, 1, 1);
	ok &= finish(s0, "save", 0);
	ok &= finish(s1, "save", 1);
	if (!ok)
		goto out;
	/* n2 is lost, its DRAM and its disk. */
	rt_kill9(&agent[1]);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ckroot[1]);
	T_ASSERT(system(cmd) == 0);

	proc r0 = spawn(0, 1, 0, 0);
	ok &= finish(r0, "restore", 0);
	rp_log_path(log, sizeof(log), env.dir, "restore", 0);
	if (ok && (!td_file_has(log, 0, "saved rank 0's shard from LOCAL_MEM") ||
	           !td_file_has(log, 0, "saved rank 1's shard from PEER_MEM on n1"))) {
		fprintf(stderr, "FAIL: the restore did not take rank 0's piece from node DRAM and rank 1's from the partner\n");
		td_print_tail(log, 30);
		ok = 0;
	}
	/* A fresh process maps the agent's pool without page tables: the copy
	 * is faulted in before its chunks are read, as a plain DRAM restore does. */
	if (ok && !td_file_has(log, 0, "saved rank 0's LOCAL_MEM copy: page tables of")) {
		fprintf(stderr, "FAIL: the elastic restore read node DRAM without building its page tables first\n");
		td_print_tail(log, 30);
		ok = 0;
	}
	if (ok)
		fprintf(stderr, "ok: 2 saved ranks restored into 1: rank 0's piece from LOCAL_MEM, rank 1's (its node "
		        "lost) from PEER_MEM\n");
out:
	if (agent[0].pid > 0)
		rt_stop(&agent[0]);
	rt_stop(&coord);
	ckptd_secret_free(env.cluster);
	if (!ok) {
		fprintf(stderr, "logs kept in %s\n", env.dir);
		return T_EXIT_FAIL;
	}
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
