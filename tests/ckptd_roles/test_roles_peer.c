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
#include "rank_proc.h"

#include <ckpt.h>

#define JOB "peer"
#define WORLD 8
#define NODES 5 /* n1..n4, and n5 the replacement */
#define NREG 2
#define WAIT_MS 30000
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

static void fill(uint8_t **b, int rank, uint64_t v)
{
	t_fill(b[0], regsize[0], (uint64_t)rank * 1000003u + v * 7919u + 1);
	uint64_t step = v << 32 | (uint64_t)rank;
	memcpy(b[1], &step, sizeof(step));
}

/* ---------------------------------------------------------------- ranks */

/* What one rank process does, in order. */
typedef struct plan {
	const char *tag;      /* phase: names the log */
	int incarnation;
	int node;             /* index into agent[] / ckroot[] */
	const char *order;    /* CKPT_RESTORE_ORDER; NULL: the default */
	const char *fault;    /* CKPT_FAULT; NULL: none */
	uint64_t restore;     /* expect CKPT_LATEST to be this version (0: no restore) */
	uint64_t save_from, save_to; /* then save these versions (0: none) */
	int wait_peer;        /* each save waited for at PEER_MEM (else LOCAL_DISK) */
	int hold;             /* then wait to be killed */
	int restore_delay_ms; /* between opening and restoring (a trainer building its model) */
} plan;

static void rank_log(char *buf, size_t cap, const char *tag, int rank)
{
	rp_log_path(buf, cap, env.dir, tag, rank);
}

static void rank_env(const plan *p, int rank)
{
	rp_rank r = { env.dir, p->tag, JOB, rank, WORLD, p->incarnation, ckroot[p->node], agent[p->node].unixa, TIERS,
	              env.tokpath, 150 };
	rp_child_setup(driver, &r);
	setenv("CKPT_CHUNK_BYTES", "64K", 1);
	setenv("CKPT_STAGING_BYTES", "8M", 1);
	setenv("CKPT_WORKERS", "1", 1);
	setenv("CKPT_PEER_TIMEOUT_MS", "5000", 1);
	if (p->order)
		setenv("CKPT_RESTORE_ORDER", p->order, 1);
	if (p->fault)
		setenv("CKPT_FAULT", p->fault, 1);
}

static void rank_main(const plan *p, int rank, int rep)
{
	uint8_t *b[NREG], *want[NREG];
	for (int i = 0; i < NREG; i++) {
		T_ASSERT((b[i] = malloc(regsize[i])) && (want[i] = malloc(regsize[i])));
		memset(b[i], 0xa5, regsize[i]);
	}
	ckpt_ctx *ctx = rp_open(regname, b, regsize, NREG);
	if (p->restore)
		rp_restore_check(ctx, rank, p->restore, p->restore_delay_ms, b, want, regname, regsize, NREG, fill);
	for (uint64_t v = p->save_from; v && v <= p->save_to; v++) {
		fill(b, rank, v);
		rp_put(rep, 'S');
		ckpt_handle *h;
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_save(ctx, v, 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, WAIT_MS, &st));
		if (p->wait_peer) {
			st.size = sizeof(st);
			int r = ckpt_handle_wait(h, CKPT_TIER_PEER_MEM, WAIT_MS, &st);
			if (r != 0)
				T_FAIL("rank %d: version %llu not committed at PEER_MEM: %s", rank, (unsigned long long)v,
				       ckpt_strerror(r));
			T_ASSERT(st.tier == CKPT_TIER_PEER_MEM && st.error == 0 && st.committed);
		}
		ckpt_handle_free(h);
	}
	rp_put(rep, 'D');
	if (p->hold) {
		pause();
		T_FAIL("rank %d: still alive", rank);
	}
	T_OK(ckpt_ctx_close(ctx));
	for (int i = 0; i < NREG; i++) {
		free(b[i]);
		free(want[i]);
	}
}

typedef struct proc {
	pid_t pid;
	int rep; /* its reports: 'S' before each save, 'D' when done */
	const plan *p;
} proc;

static void spawn(proc *pr, const plan *p, int rank)
{
	int fds[2];
	T_ASSERT(pipe2(fds, O_CLOEXEC) == 0);
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		rank_env(p, rank);
		rank_main(p, rank, fds[1]);
		exit(T_EXIT_PASS);
	}
	close(fds[1]);
	*pr = (proc){ pid, fds[0], p };
}

/* Waits for a rank's 'D' (done) and, unless it holds, its exit 0.
 * Returns 1 if it got there; a failure is counted with its log. */
static int finish(proc *pr, int rank)
{
	char log[700], c;
	int st = 0;
	rank_log(log, sizeof(log), pr->p->tag, rank);
	while ((c = rp_get(pr->rep, 90000)) == 'S')
		;
	if (c != 'D') {
		CHECK(0, "%s: rank %d did not finish", pr->p->tag, rank);
		kill(pr->pid, SIGKILL);
		waitpid(pr->pid, &st, 0);
		td_print_tail(log, 25);
		return 0;
	}
	if (pr->p->hold)
		return 1;
	close(pr->rep);
	if (td_wait_pid(pr->pid, 60000, &st) < 0 || td_status_code(st) != 0) {
		CHECK(0, "%s: rank %d exited %d", pr->p->tag, rank, td_status_code(st));
		td_print_tail(log, 25);
		return 0;
	}
	return 1;
}

static int log_has(const plan *p, int rank, const char *needle)
{
	char log[700];
	rank_log(log, sizeof(log), p->tag, rank);
	return td_file_has(log, 0, needle);
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
		fill(want, (int)r, 2);
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
static int launch_all(plan *plans, proc *procs)
{
	for (int r = 0; r < WORLD; r++)
		spawn(&procs[r], &plans[r], r);
	int ok = 0;
	for (int r = 0; r < WORLD; r++)
		ok += finish(&procs[r], r);
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
	plan p[WORLD];
	proc pr[WORLD];
	for (int r = 0; r < WORLD; r++) {
		home[r] = r / 2;
		p[r] = (plan){ "a-save", 0, home[r], NULL, NULL, 0, 1, 2, 1, r / 2 == 1, 0 };
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
		failover += log_has(&p[r], r, "PEER_MEM copy on n4 failed");
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
	start_agent(4, "agent.peer_corrupt=error");
	rt_wait_agents(&env, coord.tcp, 4, 10000);
	plan p[WORLD];
	proc pr[WORLD];
	home[2] = home[3] = 4;
	for (int r = 0; r < WORLD; r++)
		p[r] = (plan){ "bc", 1, home[r], NULL, NULL, 2, 3, 3, 1, 0, 0 };
	/* Rank 3 takes its time before restoring: n5's agent, seeing a rank
	 * register that it holds nothing of, has fetched its shard from the
	 * partner into node DRAM by then. Rank 2 restores at once. */
	p[3].restore_delay_ms = 3000;
	int ok = launch_all(p, pr);
	CHECK(ok == WORLD, "phase B/C: %d of %d ranks restored version 2 and saved version 3", ok, WORLD);
	int peer_ok = 0;
	for (int r = 0; r < WORLD; r++) {
		int from_peer = log_has(&p[r], r, "restored from PEER_MEM");
		int from_mem = log_has(&p[r], r, "restored from LOCAL_MEM");
		int from_disk = log_has(&p[r], r, "restored from LOCAL_DISK");
		if (r == 2 || r == 3)
			CHECK(!log_has(&p[r], r, "ckpt ERROR"), "rank %d on the replacement node restored fine but logged an "
			      "ERROR (its shard is on partners, not in this node's root)", r);
		if (r == 2) {
			CHECK((from_peer || from_mem) && !from_disk, "rank %d on the replacement node: want a restore from "
			      "partner DRAM (directly, or prefetched into node DRAM)", r);
			peer_ok += (from_peer || from_mem) && !from_disk;
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

	plan p[WORLD];
	proc pr[WORLD];
	for (int r = 0; r < WORLD; r++) {
		int is_v = 0;
		for (int i = 0; i < nv; i++)
			is_v |= vranks[i] == r;
		/* Only rank 0's peer copy is waited for: the partner killed below
		 * takes its own ranks' DRAM tier with it. */
		p[r] = (plan){ "de", 2, home[r], is_v ? "local_mem,peer_mem,local_disk" : NULL,
		               r == 0 ? "peer.mid_write=1@delay:6000" : NULL, 3, 4, 4, 0, 0, 0 };
	}
	for (int r = 0; r < WORLD; r++)
		spawn(&pr[r], &p[r], r);
	/* Rank 0 announces its save of version 4, writes half its image to its
	 * first partner and pauses: that partner dies now. */
	CHECK(rp_get(pr[0].rep, 60000) == 'S', "rank 0 did not start saving version 4");
	usleep(2500 * 1000);
	rt_kill9(&agent[first]);
	int ok = 0;
	for (int r = 0; r < WORLD; r++)
		ok += finish(&pr[r], r);
	CHECK(ok == WORLD, "phase D/E: %d of %d ranks restored version 3 and saved version 4", ok, WORLD);
	for (int i = 0; i < nv; i++) {
		int r = vranks[i];
		CHECK(log_has(&p[r], r, "checksum mismatch") && log_has(&p[r], r, "restored from LOCAL_DISK"),
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
	CHECK(log_has(&p[0], 0, "trying the next partner"), "rank 0's log does not show the fail-over");
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
