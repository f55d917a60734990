/* Issue 3's scenario with real libckpt ranks: a coordinator and three node
 * agents (n1..n3 on 127.0.0.2..4), six rank processes (two per node, each
 * node with its own checkpoint root: its own "disk") saving versions 1..3
 * at local_mem + local_disk through the public API.
 *
 *  1. A version commits only when every rank's shard is in, across the
 *     three agents: rank 5 saves version 3 last, and until it does the
 *     others see version 3 uncommitted (ckpt_handle_test / a timed wait) and
 *     the coordinator lists it PENDING with 5 shards.
 *  2. Every rank is killed (SIGKILL) and every node's checkpoint root is
 *     moved away; six new ranks, on empty roots, restore version 3 bit-exact:
 *     it can only have come from the agents' DRAM.
 *  3. The roots come back and agent n2 is killed. n2's ranks restore
 *     version 3 bit-exact from their disk, embedded (CKPT_DAEMON unset) and,
 *     where libckpt has the setting, with CKPT_DAEMON still naming the dead
 *     agent and CKPT_DAEMON_REQUIRED=0. The other ranks still restore from
 *     DRAM.
 *  4. n2's agent restarts on its root: the coordinator hears its inventory
 *     (disk copies; its DRAM is gone), lists version 3 restorable at
 *     local_disk only, `ckpt ls --daemon` shows it, and n2's ranks restore
 *     it through the new agent.
 *
 * The ranks use ckpt.h only, configured by CKPT_* variables as a launcher
 * would; the test itself asks the coordinator over the client library.
 * Checks of the ranks' outcomes are collected, so that one failure does not
 * hide the next steps; the test fails if any failed. CKPT_TEST_SMALL=1
 * shrinks the regions. Exit 0 / 1 / 77. */
#include "roles_test.h"
#include "rank_proc.h"

#include <ckpt.h>

#define JOB "mnode"
#define WORLD 6
#define NODES 3
#define HOLD 5   /* the rank that saves the last version last */
#define NV 3     /* versions 1..NV */
#define NREG 3
#define WAIT_MS 30000

static rt_env env;
static daemon_t coord, agent[NODES];
static char ckroot[NODES][600], away[NODES][600];
static const char *const regname[NREG] = { "weights", "optim", "step" };
static size_t regsize[NREG];
static int failures;
static pid_t driver; /* the test's process, the ranks' parent */

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)

static int node_of(int rank)
{
	return rank / 2;
}

/* The bytes of (rank, version): random weights, a mostly-zero optimizer
 * state (compressible), and a step counter. */
static void fill(uint8_t **b, int rank, uint64_t v)
{
	uint64_t seed = (uint64_t)rank * 1000003u + v * 7919u + 1;
	t_fill(b[0], regsize[0], seed);
	memset(b[1], 0, regsize[1]);
	t_fill(b[1] + 4096 * (v % 4), 4096, seed + 1);
	uint64_t step = v << 32 | (uint64_t)rank;
	memcpy(b[2], &step, sizeof(step));
}

static void bufs_alloc(uint8_t **b)
{
	for (int i = 0; i < NREG; i++)
		T_ASSERT((b[i] = malloc(regsize[i])));
}

static void bufs_free(uint8_t **b)
{
	for (int i = 0; i < NREG; i++)
		free(b[i]);
}

/* ---------------------------------------------------------------- ranks */

/* How a rank process is launched. */
typedef struct launch {
	const char *tag;        /* phase, names the log file */
	int incarnation;        /* launch number, as a launcher's restart count */
	const char *root;       /* CKPT_ROOT */
	const char *daemon;     /* CKPT_DAEMON; NULL: unset */
	const char *tiers;      /* CKPT_TIERS */
	const char *required;   /* CKPT_DAEMON_REQUIRED; NULL: unset */
} launch;

static void rank_log(char *buf, size_t cap, const char *tag, int rank)
{
	rp_log_path(buf, cap, env.dir, tag, rank);
}

/* In the child: dies with the test, logs to its own file, and gets its
 * settings from the environment only. */
static void rank_setup(const launch *l, int rank)
{
	rp_rank r = { env.dir, l->tag, JOB, rank, WORLD, l->incarnation, l->root, l->daemon, l->tiers, env.tokpath, 120 };
	rp_child_setup(driver, &r);
	setenv("CKPT_CHUNK_BYTES", "64K", 1);
	setenv("CKPT_STAGING_BYTES", "16M", 1);
	setenv("CKPT_COMPRESS", "1", 1);
	setenv("CKPT_WORKERS", "1", 1);
	if (l->required)
		setenv("CKPT_DAEMON_REQUIRED", l->required, 1);
}

static ckpt_ctx *rank_open(int rank, uint8_t **b)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	T_ASSERT(cfg.rank == (uint32_t)rank && cfg.world_size == WORLD);
	return rp_open(regname, b, regsize, NREG);
}

/* Saves versions 1..NV, each waited for at both tiers; rank HOLD saves the
 * last one only when told to ('G'), and the others first show it is not
 * committed without HOLD's shard ('P' each). 'D' when done; then waits to
 * be killed, its context open. */
static void rank_save(int rank, int cmd, int rep)
{
	uint8_t *b[NREG];
	bufs_alloc(b);
	ckpt_ctx *ctx = rank_open(rank, b);
	uint64_t total = 0;
	for (int i = 0; i < NREG; i++)
		total += regsize[i];
	for (uint64_t v = 1; v <= NV; v++) {
		fill(b, rank, v);
		if (v == NV && rank == HOLD && rp_get(cmd, 60000) != 'G')
			T_FAIL("rank %d: no go for version %llu", rank, (unsigned long long)v);
		ckpt_handle *h;
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_save(ctx, v, 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, WAIT_MS, &st));
		T_ASSERT(st.version == v && st.tier == CKPT_TIER_LOCAL_DISK && st.error == 0 && st.bytes == total);
		if (v == NV && rank != HOLD) {
			/* Durable here, and in this node's DRAM, yet not committed:
			 * rank HOLD, on another agent, has not saved. */
			T_ERR(ckpt_handle_test(h, CKPT_TIER_LOCAL_MEM, NULL), -EAGAIN);
			T_ERR(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 300, NULL), -ETIMEDOUT);
			rp_put(rep, 'P');
		}
		st.size = sizeof(st);
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, WAIT_MS, &st));
		T_ASSERT(st.version == v && st.error == 0);
		ckpt_handle_free(h);
	}
	rp_put(rep, 'D');
	rp_get(cmd, 120000);
	T_FAIL("rank %d: still alive", rank);
}

/* Restores CKPT_LATEST: must be version NV, bit-exact. */
static void rank_restore(int rank)
{
	uint8_t *b[NREG], *want[NREG];
	bufs_alloc(b);
	bufs_alloc(want);
	for (int i = 0; i < NREG; i++)
		memset(b[i], 0xa5, regsize[i]);
	fill(want, rank, NV);
	ckpt_ctx *ctx = rank_open(rank, b);
	uint64_t got = 0;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	if (got != NV)
		T_FAIL("rank %d restored version %llu, not %d", rank, (unsigned long long)got, NV);
	for (int i = 0; i < NREG; i++)
		if (memcmp(b[i], want[i], regsize[i]) != 0)
			T_FAIL("rank %d: region '%s' differs from version %d", rank, regname[i], NV);
	T_OK(ckpt_ctx_close(ctx));
	bufs_free(b);
	bufs_free(want);
	fprintf(stderr, "rank %d: version %d restored bit-exact\n", rank, NV);
}

static pid_t spawn_saver(const launch *l, int rank, int cmd, int rep, int close_a, int close_b)
{
	fflush(NULL);
	pid_t p = fork();
	T_ASSERT(p >= 0);
	if (p == 0) {
		close(close_a);
		close(close_b);
		rank_setup(l, rank);
		rank_save(rank, cmd, rep);
		exit(T_EXIT_PASS);
	}
	return p;
}

static pid_t spawn_restorer(const launch *l, int rank)
{
	fflush(NULL);
	pid_t p = fork();
	T_ASSERT(p >= 0);
	if (p == 0) {
		rank_setup(l, rank);
		rank_restore(rank);
		exit(T_EXIT_PASS);
	}
	return p;
}

/* Waits for a rank process; returns 1 if it exited 0. A failure is
 * counted and its log shown. */
static int rank_done(const launch *l, int rank, pid_t p)
{
	char log[700];
	int st = 0;
	rank_log(log, sizeof(log), l->tag, rank);
	if (td_wait_pid(p, 90000, &st) < 0) {
		kill(p, SIGKILL);
		waitpid(p, &st, 0);
		CHECK(0, "%s: rank %d did not finish within 90 s", l->tag, rank);
		td_print_tail(log, 20);
		return 0;
	}
	if (td_status_code(st) != 0) {
		CHECK(0, "%s: rank %d exited %d", l->tag, rank, td_status_code(st));
		td_print_tail(log, 20);
		return 0;
	}
	return 1;
}

/* Where a restore must have read: the API does not tell, libckpt's INFO
 * line "restored from LOCAL_MEM" does. */
enum { FROM_MEM, FROM_DISK };

/* Runs a restoring rank for each of ranks[0..n) at once, each reading from
 * `from`. Returns how many passed. */
static int restore_ranks(const launch *per_node, const int *ranks, int n, int from)
{
	pid_t p[WORLD];
	int ok = 0;
	for (int i = 0; i < n; i++)
		p[i] = spawn_restorer(&per_node[node_of(ranks[i])], ranks[i]);
	for (int i = 0; i < n; i++) {
		const launch *l = &per_node[node_of(ranks[i])];
		if (!rank_done(l, ranks[i], p[i]))
			continue;
		char log[700];
		rank_log(log, sizeof(log), l->tag, ranks[i]);
		int mem = td_file_has(log, 0, "restored from LOCAL_MEM");
		if ((from == FROM_MEM && !mem) || (from == FROM_DISK && mem)) {
			CHECK(0, "%s: rank %d restored, but %s LOCAL_MEM", l->tag, ranks[i], mem ? "from" : "not from");
			td_print_tail(log, 20);
			continue;
		}
		ok++;
	}
	return ok;
}

/* ------------------------------------------------------- the coordinator */

static ckptd_version_info coord_version(ckptd_client *cli, uint64_t v)
{
	ckptd_version_info vi;
	memset(&vi, 0, sizeof(vi));
	if (!rt_list_find(cli, JOB, v, &vi))
		memset(&vi, 0, sizeof(vi));
	return vi;
}

/* Polls the coordinator until version v is COMMITTED at exactly `tiers`;
 * returns the last listing either way. */
static ckptd_version_info wait_committed(ckptd_client *cli, uint64_t v, uint32_t tiers, int timeout_ms)
{
	uint64_t end = td_ms() + (uint64_t)timeout_ms;
	ckptd_version_info vi;
	for (;;) {
		vi = coord_version(cli, v);
		if ((vi.state == CKPT_STATE_COMMITTED && vi.tiers == tiers) || td_ms() >= end)
			return vi;
		usleep(50000);
	}
}

/* Waits until the coordinator lists n1..n3 up, at their listen addresses. */
static void wait_agents_up(int timeout_ms)
{
	uint64_t end = td_ms() + (uint64_t)timeout_ms;
	int up = 0;
	while (td_ms() < end) {
		ckptd_client *c = rt_connect(coord.tcp, NULL, CKPTD_ROLE_CLI, env.cluster);
		ckptd_msg m = { .type = CKPTD_MSG_STATUS }, rep;
		T_ASSERT(ckptd_client_call(c, &m, &rep) == 0 && rep.type == CKPTD_MSG_STATUS_REPLY);
		up = 0;
		for (uint32_t i = 0; i < rep.u.status_reply.count; i++) {
			const ckptd_agent_info *a = &rep.u.status_reply.entries[i];
			for (int k = 0; k < NODES; k++)
				if (!strcmp(a->node, agent[k].name) && a->state == CKPTD_AGENT_UP &&
				    !strcmp(a->address, agent[k].tcp))
					up++;
		}
		ckptd_msg_free(&rep);
		ckptd_client_close(c);
		if (up == NODES)
			return;
		usleep(50000);
	}
	T_FAIL("only %d of %d agents up at their addresses after %d ms", up, NODES, timeout_ms);
}

/* 1 if this libckpt has the setting (the CKPT_DAEMON_REQUIRED variable). */
static int have_setting(const char *var)
{
	char cmd[700], line[512];
	int found = 0;
	snprintf(cmd, sizeof(cmd), "'%s/ckpt' --help-config 2>/dev/null", getenv("CKPT_BIN"));
	FILE *p = popen(cmd, "r");
	T_ASSERT(p);
	while (fgets(line, sizeof(line), p))
		found |= strstr(line, var) != NULL;
	pclose(p);
	return found;
}

/* `ckpt ls --daemon` against the coordinator (JSON): exits 0 and lists v
 * COMMITTED at local_disk. */
static void cli_ls(uint64_t v)
{
	char cmd[2000], want[64];
	static char out[1 << 16];
	size_t n = 0;
	int c;
	snprintf(cmd, sizeof(cmd), "'%s/ckpt' ls --daemon %s --token-file '%s' --job %s --json 2>&1",
	         getenv("CKPT_BIN"), coord.tcp, env.tokpath, JOB);
	FILE *p = popen(cmd, "r");
	T_ASSERT(p);
	while ((c = fgetc(p)) != EOF)
		if (n + 1 < sizeof(out) && !strchr(" \t\r\n", c)) /* whitespace is not significant */
			out[n++] = (char)c;
	out[n] = 0;
	int st = pclose(p);
	CHECK(td_status_code(st) == 0, "ckpt ls --daemon exited %d: %s", td_status_code(st), out);
	/* the object holding "version":v */
	snprintf(want, sizeof(want), "\"version\":%llu", (unsigned long long)v);
	char *at = out;
	while ((at = strstr(at, want)) && at[strlen(want)] != ',' && at[strlen(want)] != '}')
		at++;
	int found = 0;
	if (at) {
		char *open = at, *close = strchr(at, '}');
		while (open > out && *open != '{')
			open--;
		if (close) {
			*close = 0;
			found = strstr(open, "\"state\":\"COMMITTED\"") && strstr(open, "\"local_disk\"");
		}
	}
	CHECK(found, "ckpt ls --daemon does not list version %llu COMMITTED at local_disk: %s", (unsigned long long)v,
	      out);
}

/* ------------------------------------------------------------------ main */

/* Removes a directory tree now (t_rmrf keeps it under CKPT_TEST_KEEP). */
static void rmrf_now(const char *dir)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	T_ASSERT(system(cmd) == 0);
}

static void run_ranks_save(ckptd_client *cli, launch *per_node)
{
	int cmd[WORLD][2], rep[WORLD][2];
	pid_t pid[WORLD];
	for (int r = 0; r < WORLD; r++) {
		T_ASSERT(pipe2(cmd[r], O_CLOEXEC) == 0 && pipe2(rep[r], O_CLOEXEC) == 0);
		pid[r] = spawn_saver(&per_node[node_of(r)], r, cmd[r][0], rep[r][1], cmd[r][1], rep[r][0]);
		close(cmd[r][0]);
		close(rep[r][1]);
	}
	/* Ranks 0..4 have version NV durable and in DRAM, and see it uncommitted. */
	for (int r = 0; r < WORLD; r++) {
		if (r == HOLD)
			continue;
		char c = rp_get(rep[r][0], 90000);
		if (c != 'P') {
			for (int k = 0; k < WORLD; k++)
				kill(pid[k], SIGKILL);
			char log[700];
			rank_log(log, sizeof(log), per_node[node_of(r)].tag, r);
			td_print_tail(log, 30);
			T_FAIL("rank %d did not reach version %d uncommitted", r, NV);
		}
	}
	/* The coordinator agrees: five shards in, nothing committed. */
	uint64_t end = td_ms() + 10000;
	ckptd_version_info vi;
	while ((vi = coord_version(cli, NV)).shards_done < WORLD - 1 && td_ms() < end)
		usleep(50000);
	T_ASSERT(vi.version == NV && vi.world_size == WORLD && vi.shards_done == WORLD - 1);
	T_ASSERT(vi.state == CKPT_STATE_PENDING && vi.tiers == 0);
	for (uint64_t v = 1; v < NV; v++) {
		vi = coord_version(cli, v);
		T_ASSERT(vi.state == CKPT_STATE_COMMITTED && vi.shards_done == WORLD &&
		         vi.tiers == (CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK));
	}
	rp_put(cmd[HOLD][1], 'G');
	for (int r = 0; r < WORLD; r++) {
		if (rp_get(rep[r][0], 90000) != 'D') {
			for (int k = 0; k < WORLD; k++)
				kill(pid[k], SIGKILL);
			char log[700];
			rank_log(log, sizeof(log), per_node[node_of(r)].tag, r);
			td_print_tail(log, 30);
			T_FAIL("rank %d did not see version %d committed", r, NV);
		}
	}
	/* Committed at both tiers, which the ranks' LOCAL_DISK waits (durable
	 * here) do not show: the coordinator's listing does. */
	vi = wait_committed(cli, NV, CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK, 10000);
	T_ASSERT(vi.state == CKPT_STATE_COMMITTED && vi.shards_done == WORLD &&
	         vi.tiers == (CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK));
	fprintf(stderr, "ok: 6 libckpt ranks on 3 agents; version %d uncommitted until rank %d saved, then committed "
	        "at local_mem and local_disk\n", NV, HOLD);

	/* Every rank dies hard, its context open. */
	for (int r = 0; r < WORLD; r++) {
		int st;
		kill(pid[r], SIGKILL);
		T_ASSERT(td_wait_pid(pid[r], 10000, &st) == 0);
		T_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		close(cmd[r][1]);
		close(rep[r][0]);
	}
}

int main(void)
{
	int small = getenv("CKPT_TEST_SMALL") != NULL;
	driver = getpid();
	regsize[0] = small ? 300000 + 3 : (3u << 20) + 4097;
	regsize[1] = small ? 150000 : 1u << 20;
	regsize[2] = 8;
	rt_init(&env, "roles-libckpt");
	const char *bin = getenv("CKPT_BIN");
	char ckpt_tool[600];
	snprintf(ckpt_tool, sizeof(ckpt_tool), "%s/ckpt", bin);
	if (access(ckpt_tool, X_OK) != 0) {
		fprintf(stderr, "skip: no %s\n", ckpt_tool);
		return T_EXIT_SKIP;
	}

	/* A long agent grace: the dead agent's copies must still count while
	 * the others restore (what happens after it is test_roles_agent_loss's). */
	static const char *const cargs[] = { "--role", "coordinator", "--agent-grace", "120s", NULL };
	rt_daemon_on(&env, &coord, "coord", "127.0.0.1", cargs);
	rt_start(&env, &coord);
	for (int k = 0; k < NODES; k++) {
		char name[8], host[16];
		snprintf(name, sizeof(name), "n%d", k + 1);
		snprintf(host, sizeof(host), "127.0.0.%d", k + 2);
		const char *aargs[] = { "--role", "agent", "--coordinator", coord.tcp, "--pool-size", "64M", NULL };
		rt_daemon_on(&env, &agent[k], name, host, aargs);
		rt_start(&env, &agent[k]);
		snprintf(ckroot[k], sizeof(ckroot[k]), "%s/%s.ckpt", env.dir, name);
		snprintf(away[k], sizeof(away[k]), "%s/%s.ckpt.away", env.dir, name);
	}
	wait_agents_up(10000);
	ckptd_secret *js = rt_job_secret(&env, JOB);
	ckptd_client *cli = rt_connect(coord.tcp, JOB, CKPTD_ROLE_CLI, js);

	/* 1: save 1..NV; the last commits only with rank HOLD's shard. */
	launch save[NODES];
	for (int k = 0; k < NODES; k++)
		save[k] = (launch){ "save", 0, ckroot[k], agent[k].unixa, "local_mem,local_disk", NULL };
	run_ranks_save(cli, save);

	/* 2: every disk gone; the agents' DRAM alone restores version NV. */
	for (int k = 0; k < NODES; k++)
		T_ASSERT(rename(ckroot[k], away[k]) == 0);
	launch mem[NODES];
	for (int k = 0; k < NODES; k++)
		mem[k] = (launch){ "dram", 1, ckroot[k], agent[k].unixa, "local_mem,local_disk", NULL };
	static const int all[WORLD] = { 0, 1, 2, 3, 4, 5 };
	int ok = restore_ranks(mem, all, WORLD, FROM_MEM);
	CHECK(ok == WORLD, "only %d of %d ranks restored from DRAM with every disk gone", ok, WORLD);
	if (ok == WORLD)
		fprintf(stderr, "ok: after kill -9 of every rank, with every checkpoint root gone, 6 new ranks "
		        "restored version %d bit-exact from the agents' DRAM\n", NV);
	/* The disks come back (the empty roots the restores made go). */
	for (int k = 0; k < NODES; k++) {
		rmrf_now(ckroot[k]);
		T_ASSERT(rename(away[k], ckroot[k]) == 0);
	}

	/* 3: agent n2 dies; its ranks have their disk only. */
	rt_kill9(&agent[1]);
	static const int n2[2] = { 2, 3 }, others[4] = { 0, 1, 4, 5 };
	launch dead[NODES];
	for (int k = 0; k < NODES; k++)
		dead[k] = (launch){ "n2-dead", 2, ckroot[k], agent[k].unixa, "local_mem,local_disk", NULL };
	launch embedded = { "n2-embedded", 2, ckroot[1], NULL, "local_disk", NULL };
	launch emb[NODES] = { dead[0], embedded, dead[2] };
	ok = restore_ranks(emb, n2, 2, FROM_DISK);
	CHECK(ok == 2, "n2's ranks without a daemon (CKPT_DAEMON unset): %d of 2 restored version %d from disk", ok, NV);
	if (ok == 2)
		fprintf(stderr, "ok: agent n2 dead: its ranks, embedded, restored version %d bit-exact from disk\n", NV);
	if (have_setting("CKPT_DAEMON_REQUIRED")) {
		launch unreach = { "n2-unreachable", 3, ckroot[1], agent[1].unixa, "local_mem,local_disk", "0" };
		launch un[NODES] = { dead[0], unreach, dead[2] };
		ok = restore_ranks(un, n2, 2, FROM_DISK);
		CHECK(ok == 2, "n2's ranks with CKPT_DAEMON naming the dead agent, CKPT_DAEMON_REQUIRED=0: %d of 2 "
		      "restored version %d from disk", ok, NV);
		if (ok == 2)
			fprintf(stderr, "ok: with CKPT_DAEMON_REQUIRED=0 and the agent dead, n2's ranks ran embedded and "
			        "restored version %d from disk\n", NV);
	} else {
		fprintf(stderr, "note: this libckpt has no CKPT_DAEMON_REQUIRED (ckpt --help-config): the restart of "
		        "n2's ranks against the dead agent is not run\n");
	}
	ok = restore_ranks(dead, others, 4, FROM_MEM);
	CHECK(ok == 4, "with agent n2 dead, %d of 4 ranks on n1/n3 restored from DRAM", ok);
	if (ok == 4)
		fprintf(stderr, "ok: with agent n2 dead, the ranks of n1 and n3 restored version %d from DRAM\n", NV);

	/* 4: n2's agent back on its root: disk copies only. */
	rt_start(&env, &agent[1]);
	wait_agents_up(10000);
	ckptd_version_info vi = wait_committed(cli, NV, CKPT_TIER_LOCAL_DISK, 10000);
	CHECK(vi.state == CKPT_STATE_COMMITTED && vi.tiers == CKPT_TIER_LOCAL_DISK && vi.shards_done == WORLD,
	      "after n2's agent restarted, version %d is %s at tiers 0x%x with %u shards; want COMMITTED at "
	      "local_disk only (n2's DRAM copies are gone) with %d", NV, ckpt_state_name(vi.state), vi.tiers,
	      vi.shards_done, WORLD);
	cli_ls(NV);
	launch back[NODES];
	for (int k = 0; k < NODES; k++)
		back[k] = (launch){ "n2-back", 4, ckroot[k], agent[k].unixa, "local_mem,local_disk", NULL };
	ok = restore_ranks(back, n2, 2, FROM_DISK);
	CHECK(ok == 2, "through n2's restarted agent, %d of 2 of its ranks restored version %d from disk", ok, NV);
	ok += restore_ranks(back, others, 4, FROM_MEM);
	if (ok == WORLD)
		fprintf(stderr, "ok: agent n2 restarted: version %d listed at local_disk; n2's ranks restored it from "
		        "disk, the others from DRAM\n", NV);

	ckptd_client_close(cli);
	ckptd_secret_free(js);
	for (int k = 0; k < NODES; k++)
		CHECK(rt_stop(&agent[k]) == 0, "agent %s did not stop cleanly on SIGTERM", agent[k].name);
	CHECK(rt_stop(&coord) == 0, "the coordinator did not stop cleanly on SIGTERM");
	ckptd_secret_free(env.cluster);
	if (failures) {
		fprintf(stderr, "%d check(s) failed; logs kept in %s\n", failures, env.dir);
		return T_EXIT_FAIL;
	}
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
