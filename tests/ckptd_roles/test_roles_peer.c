/* The peer-DRAM tier (PEER_MEM) with real libckpt ranks over libfabric
 * (tcp;ofi_rxm on loopback): a coordinator and four node agents n1..n4 on
 * 127.0.0.1..127.0.0.4, each with a node pool and a peer pool, and eight
 * rank processes (two per node, each node with its own checkpoint root)
 * saving at local_mem + peer_mem + local_disk through the public API.
 *
 *  A. Versions 1 and 2: every rank's PEER_MEM wait returns (the version is
 *     COMMITTED at peer_mem: every shard is in a partner's DRAM, checked by
 *     the partner), and the coordinator lists every shard's partner copy on
 *     a node other than its own.
 *  B. Node n2 is lost: kill -9 of its agent and of its two ranks, and its
 *     checkpoint root deleted. A replacement node n5 (127.0.0.5, an empty
 *     root) comes up. All eight ranks restart (a new launch); n2's two, on
 *     n5, restore version 2 bit-exact from partner DRAM (their logs say
 *     PEER_MEM; n2's disk no longer exists, so nothing was read from it),
 *     the others from their node's DRAM.
 *  C. The same processes save version 3. n5 runs with the fault point
 *     agent.peer_corrupt armed: every image it stores has a bit flipped
 *     after its check (partner memory going bad).
 *  D. The node X whose ranks' version-3 partner copies are on n5 loses its
 *     agent (kill -9, restarted: its DRAM is gone). All ranks restart; X's,
 *     with CKPT_RESTORE_ORDER=local_mem,peer_mem,local_disk, find the
 *     corrupted partner copy (a checksum mismatch, logged), and restore
 *     version 3 bit-exact from their disk.
 *  E. The same processes save version 4; rank 0 pauses halfway through its
 *     first partner write (fault point peer.mid_write) and the test kills
 *     that partner's agent then: rank 0's copy fails over to the next
 *     partner, which the coordinator then lists as holding it.
 *
 * Skips (77) when libfabric offers no tcp;ofi_rxm provider here. Checks are
 * counted, so that one failure does not hide the next phases. */
#include "roles_test.h"
#include "rank_plan.h"

#include <ckpt.h>

#define JOB "peer"
#define WORLD 8
#define NODES 5 /* n1..n4, and n5 the replacement */
#define NREG 2
#define TIERS "local_mem,peer_mem,local_disk"

static rt_env env;
static daemon_t coord, agent[NODES];
static char ckroot[NODES][600];
static const char *const regname[NREG] = { "weights", "step" };
static size_t regsize[NREG];
static int failures;
static pid_t driver;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)

/* ---------------------------------------------------------------- ranks */

/* Rank `rank` of the job, incarnation inc, on node (agent[node], its
 * root); the rest of its plan (rank_plan.h) is the caller's. */
static rk_plan plan_of(const char *tag, int rank, int inc, int node)
{
	return (rk_plan){ .tag = tag, .job = JOB, .rank = rank, .world = WORLD, .node = node, .bytes = regsize[0],
	                  .incarnation = inc, .tiers = TIERS };
}

static void spawn(rk_proc *pr, const rk_plan *p)
{
	rk_where w = { env.dir, env.tokpath, driver, ckroot[p->node], agent[p->node].unixa, NULL };
	rk_spawn(&w, pr, p);
}

static int finish(rk_proc *pr)
{
	return rk_finish(env.dir, &failures, pr);
}

static int log_has(const rk_plan *p, const char *needle)
{
	return rk_log_has(env.dir, p, needle);
}

/* --------------------------------------------------------- the coordinator */

/* The node holding rank's PEER_MEM copy of version v ("" if none). */
static void peer_node_of(uint64_t v, uint32_t rank, char *node, size_t cap)
{
	ckptd_secret *js = rt_job_secret(&env, JOB);
	ckptd_client *c = rt_connect(coord.tcp, JOB, CKPTD_ROLE_CLI, js);
	ckptd_msg m = { .type = CKPTD_MSG_SHOW_VERSION }, rep;
	snprintf(m.u.show_version.job, sizeof(m.u.show_version.job), "%s", JOB);
	m.u.show_version.version = v;
	node[0] = 0;
	if (ckptd_client_call(c, &m, &rep) == 0 && rep.type == CKPTD_MSG_VERSION_DETAIL) {
		for (uint32_t i = 0; i < rep.u.version_detail.count; i++) {
			const ckptd_copy_info *e = &rep.u.version_detail.entries[i];
			if (e->rank == rank && e->tier == CKPT_TIER_PEER_MEM && e->state == 1)
				snprintf(node, cap, "%s", e->node);
		}
	}
	ckptd_msg_free(&rep);
	ckptd_client_close(c);
	ckptd_secret_free(js);
}

/* 1 if the file holds exactly len bytes equal to want. */
static int file_is(const char *path, const uint8_t *want, size_t len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	uint8_t *b = malloc(len + 1);
	size_t n = b ? fread(b, 1, len + 1, f) : 0;
	int ok = b && n == len && !memcmp(b, want, len);
	free(b);
	fclose(f);
	return ok;
}

/* An operator recovering the lost node n2 by hand: `ckpt restore --daemon`
 * on the agent of the node holding the partner copy of each of its ranks
 * writes out version 2 of that rank bit-exact. */
static void cli_restore_lost(void)
{
	for (uint32_t r = 2; r <= 3; r++) {
		char node[CKPTD_NAME_MAX + 1], out[700], cmd[3000], path[800];
		peer_node_of(2, r, node, sizeof(node));
		int k = -1;
		for (int i = 0; i < NODES; i++)
			if (node[0] && !strcmp(agent[i].name, node))
				k = i;
		CHECK(k >= 0, "rank %u: no partner copy of version 2 recorded", r);
		if (k < 0)
			continue;
		snprintf(out, sizeof(out), "%s/cli-restore-r%u", env.dir, r);
		snprintf(cmd, sizeof(cmd), "'%s/ckpt' restore --daemon %s --token-file '%s' --job %s --version 2 --rank %u "
		         "--out '%s' >>'%s/cli-restore.log' 2>&1", getenv("CKPT_BIN"), agent[k].unixa, env.tokpath, JOB, r,
		         out, env.dir);
		int st = system(cmd);
		CHECK(st == 0, "rank %u: ckpt restore --daemon on %s (its partner) exited %d (see cli-restore.log)", r, node,
		      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		uint8_t *want[NREG];
		for (int i = 0; i < NREG; i++)
			T_ASSERT((want[i] = malloc(regsize[i])));
		rk_plan pl = plan_of("", (int)r, 0, 0);
		rk_fill(want, &pl, 2);
		for (int i = 0; i < NREG; i++) {
			snprintf(path, sizeof(path), "%s/%s", out, regname[i]);
			CHECK(file_is(path, want[i], regsize[i]), "rank %u: %s is not region '%s' of version 2", r, path,
			      regname[i]);
			free(want[i]);
		}
	}
	if (!failures)
		fprintf(stderr, "ok: B: ckpt restore --daemon on the partners wrote out n2's ranks' version 2 bit-exact\n");
}

/* The partners n1's agent would send rank 0's copies to, best first. */
static int partners_of(int node, char (*out)[CKPTD_NAME_MAX + 1], int cap)
{
	ckptd_secret *ps = rt_job_secret(&env, "probe");
	/* Not registered: a registered job would take the node's pool. */
	ckptd_client *c = rt_connect(agent[node].unixa, "probe", CKPTD_ROLE_RANK, ps);
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "probe");
	m.u.segment_request.mode = CKPTD_SEG_PARTNERS;
	int n = 0;
	if (ckptd_client_call(c, &m, &rep) == 0 && rep.type == CKPTD_MSG_PARTNERS)
		for (uint32_t i = 0; i < rep.u.partners.count && n < cap; i++)
			snprintf(out[n++], CKPTD_NAME_MAX + 1, "%s", rep.u.partners.entries[i].node);
	ckptd_msg_free(&rep);
	ckptd_client_close(c);
	ckptd_secret_free(ps);
	return n;
}

static int node_index(const char *name)
{
	for (int k = 0; k < NODES; k++)
		if (!strcmp(agent[k].name, name))
			return k;
	return -1;
}

/* ------------------------------------------------------------------ phases */

static int home[WORLD]; /* the node each rank runs on */

/* Runs one launch of all eight ranks with per-rank plans; returns how many
 * finished. */
static int launch_all(rk_plan *plans, rk_proc *procs)
{
	for (int r = 0; r < WORLD; r++)
		spawn(&procs[r], &plans[r]);
	int ok = 0;
	for (int r = 0; r < WORLD; r++)
		ok += finish(&procs[r]);
	return ok;
}

static void start_agent(int k, const char *fault)
{
	char name[16], host[32];
	snprintf(name, sizeof(name), "n%d", k + 1);
	snprintf(host, sizeof(host), "127.0.0.%d", k + 1);
	const char *aargs[] = { "--role", "agent", "--coordinator", coord.tcp, "--pool-size", "32M",
	                        "--peer-pool-size", "32M", NULL };
	if (!agent[k].name[0])
		rt_daemon_on(&env, &agent[k], name, host, aargs);
	if (fault)
		setenv("CKPT_FAULT", fault, 1);
	rt_start(&env, &agent[k]);
	unsetenv("CKPT_FAULT");
	snprintf(ckroot[k], sizeof(ckroot[k]), "%s/%s.ckpt", env.dir, name);
}

static void phase_a(void)
{
	rk_plan p[WORLD];
	rk_proc pr[WORLD];
	for (int r = 0; r < WORLD; r++) {
		home[r] = r / 2;
		p[r] = plan_of("a-save", r, 0, home[r]);
		p[r].from = 1;
		p[r].to = 2;
		p[r].wait_peer = 1;
		p[r].hold = r / 2 == 1;
	}
	int ok = launch_all(p, pr);
	CHECK(ok == WORLD, "phase A: %d of %d ranks saved versions 1-2 committed at peer_mem", ok, WORLD);
	for (int r = 0; r < WORLD; r++) {
		char node[CKPTD_NAME_MAX + 1];
		peer_node_of(2, (uint32_t)r, node, sizeof(node));
		CHECK(node[0] && strcmp(node, agent[home[r]].name) != 0,
		      "rank %d (on %s): partner copy of version 2 on '%s', want another node", r, agent[home[r]].name, node);
	}
	/* The damaged image: refused by n4's check (every chunk), and its
	 * writer moved on to its next partner. */
	int failover = 0;
	for (int r = 0; r < WORLD; r++)
		failover += log_has(&p[r], "PEER_MEM copy on n4 failed");
	CHECK(td_log_has(&agent[3], "checksum mismatch") && failover == 1,
	      "n4 got a damaged image: want its check to refuse it (checksum mismatch in its log) and one rank to "
	      "fail over (%d did)", failover);
	if (ok == WORLD)
		fprintf(stderr, "ok: A: 8 ranks on 4 nodes, versions 1-2 committed at peer_mem, every shard's partner "
		        "copy on another node; a damaged image refused by the partner's check, its writer failed over\n");
	/* B begins: n2 is lost with its ranks, and its disk. */
	rt_kill9(&agent[1]);
	for (int r = 2; r <= 3; r++) {
		int st;
		kill(pr[r].pid, SIGKILL);
		T_ASSERT(td_wait_pid(pr[r].pid, 10000, &st) == 0 && WIFSIGNALED(st));
		close(pr[r].rep);
	}
	char cmd[800];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ckroot[1]);
	T_ASSERT(system(cmd) == 0);
	cli_restore_lost();
}

/* B and C: n2's ranks on n5 restore from partner DRAM; then everyone saves
 * version 3 while n5 corrupts what it stores. */
static void phase_bc(void)
{
	/* n5's job pool takes 4 s to make (its pool made ahead, delayed). */
	start_agent(4, "agent.peer_corrupt=error,agent.pool_prepare=delay:4000");
	rt_wait_agents(&env, coord.tcp, 4, 10000);
	rk_plan p[WORLD];
	rk_proc pr[WORLD];
	home[2] = home[3] = 4;
	for (int r = 0; r < WORLD; r++) {
		p[r] = plan_of("bc", r, 1, home[r]);
		p[r].restore = 2;
		p[r].from = p[r].to = 3;
		p[r].wait_peer = 1;
	}
	/* Rank 3 takes its time before restoring (a trainer building its
	 * model): n5's agent, seeing a rank register that it holds nothing of,
	 * fetches its shard from the partner into node DRAM meanwhile (on a
	 * loaded machine that can take seconds: the rank waits for it). Rank 2
	 * restores at once. */
	p[3].restore_delay_ms = 1000;
	p[3].restore_after_log = agent[4].log;
	p[3].restore_after_line = "prefetched version 2 rank 3";
	int ok = launch_all(p, pr);
	CHECK(ok == WORLD, "phase B/C: %d of %d ranks restored version 2 and saved version 3", ok, WORLD);
	int peer_ok = 0;
	for (int r = 0; r < WORLD; r++) {
		int from_peer = log_has(&p[r], "restored from PEER_MEM");
		int from_mem = log_has(&p[r], "restored from LOCAL_MEM");
		int from_disk = log_has(&p[r], "restored from LOCAL_DISK");
		if (r == 2 || r == 3)
			CHECK(!log_has(&p[r], "ckpt ERROR"), "rank %d on the replacement node restored fine but logged an "
			      "ERROR (its shard is on partners, not in this node's root)", r);
		if (r == 2) {
			/* Its read came while n5's pool was still being made: not held
			 * for the prefetch, it read the partner itself, and n5 then
			 * fetched nothing for it. */
			CHECK(from_peer && !from_disk, "rank %d on the replacement node: want a restore from partner DRAM, "
			      "read by the rank while n5's pool was made", r);
			CHECK(td_log_has(&agent[4], "rank 2 reads its shard from the partner itself") &&
			      td_log_has(&agent[4], "the rank read the partner's copy itself"),
			      "n5: want rank 2's read answered at once and no prefetch of its shard");
			peer_ok += from_peer && !from_disk;
		} else if (r == 3) {
			CHECK(from_mem && !from_disk && td_log_has(&agent[4], "prefetched version 2 rank 3"),
			      "rank 3 on the replacement node: want its shard prefetched from the partner into n5's DRAM "
			      "and restored from there");
			peer_ok += from_mem && !from_disk;
		} else {
			CHECK(from_mem, "rank %d: want a restore from its node's DRAM", r);
		}
	}
	if (peer_ok == 2)
		fprintf(stderr, "ok: B: n2 lost (agent and ranks killed, its disk deleted); its ranks restarted on n5 "
		        "restored version 2 bit-exact from partner DRAM (rank 3 after n5 prefetched it into node DRAM)\n");
}

/* D: the node whose version-3 partner copies n5 corrupted loses its DRAM;
 * its ranks detect the bad copies and restore from disk. E: version 4 with
 * rank 0's partner killed mid-write. */
static void phase_de(void)
{
	/* The first node whose ranks' copies n5 holds. */
	int victim = -1, vranks[WORLD], nv = 0;
	for (int r = 0; r < WORLD; r++) {
		char node[CKPTD_NAME_MAX + 1];
		peer_node_of(3, (uint32_t)r, node, sizeof(node));
		if (!strcmp(node, "n5") && (victim < 0 || home[r] == victim)) {
			vranks[nv++] = r;
			victim = home[r];
		}
	}
	CHECK(nv > 0, "no rank has its version-3 partner copy on n5");
	if (nv == 0)
		return;
	rt_kill9(&agent[victim]);
	start_agent(victim, NULL);
	rt_wait_agents(&env, coord.tcp, 4, 10000);

	char parts[8][CKPTD_NAME_MAX + 1];
	int np = partners_of(home[0], parts, 8);
	CHECK(np >= 2, "n1 has %d partners; a fail-over needs two", np);
	int first = np ? node_index(parts[0]) : -1;
	T_ASSERT(first >= 0);

	rk_plan p[WORLD];
	rk_proc pr[WORLD];
	for (int r = 0; r < WORLD; r++) {
		int is_v = 0;
		for (int i = 0; i < nv; i++)
			is_v |= vranks[i] == r;
		/* Only rank 0's peer copy is waited for: the partner killed below
		 * takes its own ranks' DRAM tier with it. */
		p[r] = plan_of("de", r, 2, home[r]);
		p[r].order = is_v ? "local_mem,peer_mem,local_disk" : NULL;
		p[r].fault = r == 0 ? "peer.mid_write=1@delay:6000" : NULL;
		p[r].restore = 3;
		p[r].from = p[r].to = 4;
	}
	for (int r = 0; r < WORLD; r++)
		spawn(&pr[r], &p[r]);
	/* Rank 0 announces its save of version 4, leases room on its first
	 * partner, writes half its image there and pauses: that partner dies
	 * now (once it granted the lease: on a loaded machine the rank's fabric
	 * may take seconds to open). */
	CHECK(rp_get(pr[0].rep, 60000) == 'S', "rank 0 did not start saving version 4");
	td_wait_log(&agent[first], "to version 4 rank 0", 60000);
	usleep(1000 * 1000);
	rt_kill9(&agent[first]);
	int ok = 0;
	for (int r = 0; r < WORLD; r++)
		ok += finish(&pr[r]);
	CHECK(ok == WORLD, "phase D/E: %d of %d ranks restored version 3 and saved version 4", ok, WORLD);
	for (int i = 0; i < nv; i++) {
		int r = vranks[i];
		CHECK((log_has(&p[r], "checksum mismatch") || log_has(&p[r], "seal mismatch")) && log_has(&p[r], "restored from LOCAL_DISK"),
		      "rank %d: want the corrupted partner copy detected, then a restore from disk", r);
	}
	if (!failures)
		fprintf(stderr, "ok: D: partner memory corrupted (n5): %d ranks detected it and restored version 3 "
		        "bit-exact from disk\n", nv);
	/* E: rank 0's copy went to another partner. */
	char node[CKPTD_NAME_MAX + 1] = "";
	uint64_t end = td_ms() + 30000;
	while (td_ms() < end) {
		peer_node_of(4, 0, node, sizeof(node));
		if (node[0])
			break;
		usleep(100000);
	}
	CHECK(node[0] && strcmp(node, parts[0]) != 0 && strcmp(node, "n1") != 0,
	      "rank 0's version-4 partner copy is on '%s'; want a node other than n1 and the killed %s", node, parts[0]);
	CHECK(log_has(&p[0], "trying the next partner"), "rank 0's log does not show the fail-over");
	if (node[0] && strcmp(node, parts[0]))
		fprintf(stderr, "ok: E: partner %s killed mid-write; rank 0's copy of version 4 failed over to %s\n",
		        parts[0], node);
}

int main(void)
{
	driver = getpid();
	int small = getenv("CKPT_TEST_SMALL") != NULL;
	regsize[0] = small ? 200000 + 3 : (1u << 20) + 4097;
	regsize[1] = 8;
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("CKPT_FABRIC_PROVIDER", "tcp;ofi_rxm", 1);
	rt_init(&env, "roles-peer");
	if (system("fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1") != 0) {
		fprintf(stderr, "skip: libfabric's tcp;ofi_rxm provider is not available (fi_info)\n");
		return T_EXIT_SKIP;
	}
	/* A long grace: a dead agent's copies count until the test is done. */
	static const char *const cargs[] = { "--role", "coordinator", "--agent-grace", "300s", "--peer-replicas", "1",
	                                     NULL };
	rt_daemon_on(&env, &coord, "coord", "127.0.0.1", cargs);
	rt_start(&env, &coord);
	/* n4 receives its first image damaged: its check refuses it. */
	for (int k = 0; k < 4; k++)
		start_agent(k, k == 3 ? "agent.peer_corrupt_before_check=1@error" : NULL);
	rt_wait_agents(&env, coord.tcp, 4, 10000);

	phase_a();
	phase_bc();
	phase_de();

	for (int k = 0; k < NODES; k++)
		if (agent[k].pid > 0 && kill(agent[k].pid, 0) == 0)
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
