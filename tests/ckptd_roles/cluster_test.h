/* A cluster in network namespaces (tests/netns_helper.h) for the
 * multi-node tests (test_cluster.c): the coordinator in node 0's namespace,
 * one agent per node in nodes 1..N, each on its own private address,
 * and libckpt rank processes run inside the nodes' namespaces. The test
 * reaches every daemon over its Unix socket; ranks and agents speak TCP
 * and libfabric (tcp;ofi_rxm) across the bridge, as on real nodes. The
 * ranks run with FI_TCP_IFACE=lo, which used to turn the peer tier off
 * between nodes: their endpoint must bind where their agent listens. */
#ifndef CKPTD_ROLES_CLUSTER_TEST_H
#define CKPTD_ROLES_CLUSTER_TEST_H

#include "roles_test.h"
#include "rank_proc.h"
#include "netns_helper.h"

#include <ckpt.h>

#define CT_PORT 7000
#define CT_WAIT_MS 30000

typedef struct ct_env {
	rt_env rt;
	tn_cluster net;
	daemon_t coord;
	daemon_t agent[TN_MAX]; /* [k]: node k's agent, k >= 1 */
	char root[TN_MAX][600]; /* [k]: node k's checkpoint root for ranks */
	int nodes;              /* agents: 1..nodes */
	pid_t driver;
	int failures;
} ct_env;

#define CT_CHECK(e, cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); (e)->failures++; } } while (0)

/* Namespaces for the coordinator and `nodes` agents, and the test's dir;
 * exits 77 where namespaces or the fabric provider are not available. */
static inline void ct_init(ct_env *e, const char *tag, int nodes)
{
	memset(e, 0, sizeof(*e));
	e->driver = getpid();
	e->nodes = nodes;
	rt_init(&e->rt, tag);
	if (system("fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1") != 0) {
		fprintf(stderr, "skip: libfabric's tcp;ofi_rxm provider is not available (fi_info)\n");
		exit(T_EXIT_SKIP);
	}
	if (tn_create(&e->net, nodes + 1) < 0)
		exit(T_EXIT_SKIP);
	setenv("CKPT_FABRIC_PROVIDER", "tcp;ofi_rxm", 1);
}

/* The coordinator, with its flags after the common ones. */
static inline void ct_start_coord(ct_env *e, const char *const *args)
{
	char dir[512], ns[32], addr[20]; /* copies: the compiler cannot tell they do not overlap *d */
	snprintf(dir, sizeof(dir), "%s", e->rt.dir);
	snprintf(ns, sizeof(ns), "%s", e->net.ns[0]);
	snprintf(addr, sizeof(addr), "%s", e->net.addr[0]);
	td_daemon_init_ns(&e->coord, dir, "coord", ns, addr, CT_PORT, TD_ROOT);
	const char *argv[TD_MAX_ARGS] = { "--token-file", e->rt.tokpath, "--root", e->coord.root, "--node", "coord",
	                                  "--log-level", "debug", "--role", "coordinator" };
	int n = 10;
	for (int i = 0; args && args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	td_daemon_start(&e->coord, argv);
}

/* Node k's agent (k >= 1), named n<k>, with its flags after the common
 * ones; `fault`: CKPT_FAULT for it. A restart reuses the flags. */
static inline void ct_start_agent(ct_env *e, int k, const char *const *args, const char *fault)
{
	daemon_t *d = &e->agent[k];
	if (!d->name[0]) {
		char name[16], coord[64];
		snprintf(name, sizeof(name), "n%d", k);
		snprintf(coord, sizeof(coord), "%s:%d", e->net.addr[0], CT_PORT);
		char dir[512], ns[32], addr[20]; /* copies, as in ct_start_coord */
		snprintf(dir, sizeof(dir), "%s", e->rt.dir);
		snprintf(ns, sizeof(ns), "%s", e->net.ns[k]);
		snprintf(addr, sizeof(addr), "%s", e->net.addr[k]);
		td_daemon_init_ns(d, dir, name, ns, addr, CT_PORT, TD_ROOT);
		const char *argv[TD_MAX_ARGS] = { "--token-file", e->rt.tokpath, "--root", d->root, "--node", name,
		                                  "--log-level", "debug", "--role", "agent", "--coordinator", coord };
		int n = 12;
		for (int i = 0; args && args[i]; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		td_daemon_set_args(d, argv);
		snprintf(e->root[k], sizeof(e->root[k]), "%s/%s.ckpt", dir, name);
		T_ASSERT(mkdir(e->root[k], 0700) == 0 || errno == EEXIST);
	}
	if (fault)
		setenv("CKPT_FAULT", fault, 1);
	td_daemon_start(d, NULL);
	unsetenv("CKPT_FAULT");
}

static inline void ct_wait_agents(ct_env *e, uint32_t want)
{
	rt_wait_agents(&e->rt, e->coord.unixa, want, 15000);
}

/* ---------------------------------------------------------------- ranks */

/* What one rank process does, in order. */
typedef struct ct_plan {
	const char *tag;       /* names the log */
	const char *job;
	int rank, world;
	int node;              /* the namespace it runs in (>= 1) */
	const char *root;      /* NULL: its node's root */
	const char *tiers;     /* NULL: local_mem,peer_mem,local_disk */
	size_t bytes;          /* of its one big region */
	int incarnation;
	uint64_t restore;      /* expect CKPT_LATEST to give this (0: no restore) */
	int unreachable;       /* instead: expect -CKPT_EUNREACHABLE */
	uint64_t from, to;     /* then save these (0: none) */
	int wait_peer;         /* wait for each at PEER_MEM (else LOCAL_DISK) */
	int hold;              /* then wait to be killed */
	const char *order;     /* CKPT_RESTORE_ORDER */
	int gap_ms;            /* between saves (a training step) */
	int report;            /* log each save's tiers reached and failed once PEER_MEM settled */
	int peer_timeout_ms;   /* CKPT_PEER_TIMEOUT_MS; 0: 5000 */
} ct_plan;

typedef struct ct_proc {
	pid_t pid;
	int rep;               /* 'S' before each save, 'D' when done */
	const ct_plan *p;
} ct_proc;

/* The bytes of (job, rank, version): the same in every process. */
static inline void ct_fill(uint8_t **b, const ct_plan *p, uint64_t v)
{
	uint64_t seed = (uint64_t)p->rank * 1000003u + v * 7919u + (uint64_t)p->job[0] * 131u + 1;
	t_fill(b[0], p->bytes, seed);
	uint64_t step = v << 32 | (uint64_t)p->rank;
	memcpy(b[1], &step, sizeof(step));
}

static inline void ct_log(const ct_env *e, const ct_plan *p, char *buf, size_t cap)
{
	char tag[128];
	snprintf(tag, sizeof(tag), "%s.%s", p->tag, p->job);
	rp_log_path(buf, cap, e->rt.dir, tag, p->rank);
}

static inline void ct_rank_main(ct_env *e, const ct_plan *p, int rep)
{
	static const char *const names[] = { "weights", "step" };
	size_t sizes[2] = { p->bytes, 8 };
	uint8_t *b[2], *want[2];
	for (int i = 0; i < 2; i++) {
		T_ASSERT((b[i] = malloc(sizes[i])) && (want[i] = malloc(sizes[i])));
		memset(b[i], 0xa5, sizes[i]);
	}
	ckpt_ctx *ctx = rp_open(names, b, sizes, 2);
	if (p->unreachable) {
		uint64_t got = 0;
		int r = ckpt_restore(ctx, CKPT_LATEST, 0, &got);
		if (r != -CKPT_EUNREACHABLE)
			T_FAIL("rank %d: restore gave %d (%s), want -CKPT_EUNREACHABLE", p->rank, r, ckpt_strerror(r));
		fprintf(stderr, "rank %d: restore refused as it must: %s\n", p->rank, ckpt_strerror(r));
	} else if (p->restore) {
		uint64_t got = 0;
		T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
		if (got != p->restore)
			T_FAIL("rank %d restored version %llu, not %llu", p->rank, (unsigned long long)got,
			       (unsigned long long)p->restore);
		ct_fill(want, p, got);
		for (int i = 0; i < 2; i++)
			if (memcmp(b[i], want[i], sizes[i]) != 0)
				T_FAIL("rank %d: region '%s' differs from version %llu", p->rank, names[i],
				       (unsigned long long)got);
		fprintf(stderr, "rank %d: version %llu restored bit-exact\n", p->rank, (unsigned long long)got);
	}
	for (uint64_t v = p->from; v && v <= p->to; v++) {
		ct_fill(b, p, v);
		rp_put(rep, 'S');
		ckpt_handle *h;
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_save(ctx, v, 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, CT_WAIT_MS, &st));
		if (p->wait_peer) {
			st.size = sizeof(st);
			int r = ckpt_handle_wait(h, CKPT_TIER_PEER_MEM, CT_WAIT_MS, &st);
			if (r != 0)
				T_FAIL("rank %d: version %llu not committed at PEER_MEM: %s", p->rank, (unsigned long long)v,
				       ckpt_strerror(r));
		}
		if (p->report) {
			/* The handle's status says where this rank's copy got to. */
			uint64_t end = td_ms() + CT_WAIT_MS;
			do {
				st.size = sizeof(st);
				(void)ckpt_handle_test(h, CKPT_TIER_LOCAL_DISK, &st);
			} while (!((st.tiers_reached | st.tiers_failed) & CKPT_TIER_PEER_MEM) && td_ms() < end &&
			         usleep(20000) == 0);
			fprintf(stderr, "save v%llu: tiers reached 0x%x failed 0x%x\n", (unsigned long long)v,
			        st.tiers_reached, st.tiers_failed);
		}
		ckpt_handle_free(h);
		usleep((useconds_t)p->gap_ms * 1000);
	}
	rp_put(rep, 'D');
	if (p->hold) {
		pause();
		T_FAIL("rank %d: still alive", p->rank);
	}
	T_OK(ckpt_ctx_close(ctx));
	for (int i = 0; i < 2; i++) {
		free(b[i]);
		free(want[i]);
	}
	(void)e;
}

static inline void ct_spawn(ct_env *e, ct_proc *pr, const ct_plan *p)
{
	int fds[2];
	T_ASSERT(pipe2(fds, O_CLOEXEC) == 0);
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		if (td_enter_netns(e->net.ns[p->node]) < 0)
			_exit(T_EXIT_FAIL);
		char tag[128];
		snprintf(tag, sizeof(tag), "%s.%s", p->tag, p->job);
		rp_rank r = { e->rt.dir, tag, p->job, p->rank, p->world, p->incarnation,
		              p->root ? p->root : e->root[p->node], e->agent[p->node].unixa,
		              p->tiers ? p->tiers : "local_mem,peer_mem,local_disk", e->rt.tokpath, 150 };
		rp_child_setup(e->driver, &r);
		setenv("CKPT_CHUNK_BYTES", "64K", 1);
		setenv("CKPT_STAGING_BYTES", "8M", 1);
		setenv("CKPT_WORKERS", "1", 1);
		char pt[16];
		snprintf(pt, sizeof(pt), "%d", p->peer_timeout_ms ? p->peer_timeout_ms : 5000);
		setenv("CKPT_PEER_TIMEOUT_MS", pt, 1);
		setenv("FI_TCP_IFACE", "lo", 1); /* what broke the peer tier between nodes */
		if (p->order)
			setenv("CKPT_RESTORE_ORDER", p->order, 1);
		ct_rank_main(e, p, fds[1]);
		exit(T_EXIT_PASS);
	}
	close(fds[1]);
	*pr = (ct_proc){ pid, fds[0], p };
}

/* Waits for the rank's 'D' and, unless it holds, its exit 0. Returns 1 if
 * it got there; a failure is counted, with its log. */
static inline int ct_finish(ct_env *e, ct_proc *pr)
{
	char log[700], c;
	int st = 0;
	ct_log(e, pr->p, log, sizeof(log));
	while ((c = rp_get(pr->rep, 90000)) == 'S')
		;
	if (c != 'D') {
		CT_CHECK(e, 0, "%s: rank %d of %s did not finish", pr->p->tag, pr->p->rank, pr->p->job);
		kill(pr->pid, SIGKILL);
		waitpid(pr->pid, &st, 0);
		td_print_tail(log, 25);
		return 0;
	}
	if (pr->p->hold)
		return 1;
	close(pr->rep);
	if (td_wait_pid(pr->pid, 60000, &st) < 0 || td_status_code(st) != 0) {
		CT_CHECK(e, 0, "%s: rank %d of %s exited %d", pr->p->tag, pr->p->rank, pr->p->job, td_status_code(st));
		td_print_tail(log, 25);
		return 0;
	}
	return 1;
}

/* Kills a holding rank. */
static inline void ct_kill(ct_proc *pr)
{
	int st;
	kill(pr->pid, SIGKILL);
	waitpid(pr->pid, &st, 0);
	close(pr->rep);
}

static inline int ct_log_has(const ct_env *e, const ct_plan *p, const char *needle)
{
	char log[700];
	ct_log(e, p, log, sizeof(log));
	return td_file_has(log, 0, needle);
}

/* The node holding (job, v, rank)'s live PEER_MEM copy, "" if none, by
 * the coordinator's SHOW_VERSION (over its Unix socket). */
static inline void ct_peer_node(ct_env *e, const char *job, uint64_t v, uint32_t rank, char *node, size_t cap)
{
	ckptd_secret *js = rt_job_secret(&e->rt, job);
	ckptd_client *c = rt_connect(e->coord.unixa, job, CKPTD_ROLE_CLI, js);
	ckptd_msg m = { .type = CKPTD_MSG_SHOW_VERSION }, rep;
	snprintf(m.u.show_version.job, sizeof(m.u.show_version.job), "%s", job);
	m.u.show_version.version = v;
	node[0] = 0;
	if (ckptd_client_call(c, &m, &rep) == 0 && rep.type == CKPTD_MSG_VERSION_DETAIL)
		for (uint32_t i = 0; i < rep.u.version_detail.count; i++) {
			const ckptd_copy_info *ci = &rep.u.version_detail.entries[i];
			if (ci->rank == rank && ci->tier == CKPT_TIER_PEER_MEM && ci->state == 1)
				snprintf(node, cap, "%s", ci->node);
		}
	ckptd_msg_free(&rep);
	ckptd_client_close(c);
	ckptd_secret_free(js);
}

/* Node k lost: every process in its namespace killed, its roots deleted. */
static inline void ct_lose_node(ct_env *e, int k)
{
	tn_kill_all(&e->net, k);
	if (e->agent[k].pid > 0) {
		waitpid(e->agent[k].pid, NULL, 0);
		e->agent[k].pid = 0;
	}
	char cmd[1400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", e->root[k], e->agent[k].root);
	T_ASSERT(system(cmd) == 0);
	T_ASSERT(tn_count(&e->net, k) == 0);
}

/* Stops what runs, removes the namespaces; returns the exit code. */
static inline int ct_end(ct_env *e)
{
	for (int k = 1; k <= e->nodes; k++)
		if (e->agent[k].pid > 0)
			CT_CHECK(e, rt_stop(&e->agent[k]) == 0, "agent n%d did not stop cleanly on SIGTERM", k);
	if (e->coord.pid > 0)
		CT_CHECK(e, rt_stop(&e->coord) == 0, "the coordinator did not stop cleanly on SIGTERM");
	tn_destroy(&e->net);
	ckptd_secret_free(e->rt.cluster);
	if (e->failures) {
		fprintf(stderr, "%d check(s) failed; logs kept in %s\n", e->failures, e->rt.dir);
		return T_EXIT_FAIL;
	}
	t_rmrf(e->rt.dir);
	return T_EXIT_PASS;
}

#endif
