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
#include "rank_plan.h"
#include "netns_helper.h"

#include <ckpt.h>

#define CT_PORT 7000

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

/* Ranks follow plans (rank_plan.h) inside their node's namespace; node k's
 * root and agent unless the plan names a root. */
typedef rk_plan ct_plan;
typedef rk_proc ct_proc;

static inline void ct_spawn(ct_env *e, ct_proc *pr, const ct_plan *p)
{
	rk_where w = { e->rt.dir, e->rt.tokpath, e->driver, p->root ? p->root : e->root[p->node],
	               e->agent[p->node].unixa, e->net.ns[p->node] };
	rk_spawn(&w, pr, p);
}

/* Waits for the rank's 'D' and, unless it holds, its exit 0. Returns 1 if
 * it got there; a failure is counted, with its log. */
static inline int ct_finish(ct_env *e, ct_proc *pr)
{
	return rk_finish(e->rt.dir, &e->failures, pr);
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
	return rk_log_has(e->rt.dir, p, needle);
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

/* The value of the metric line "series value" scraped from node k's daemon
 * (its --metrics-listen on its address, port 9100), -1 if absent. */
static inline double ct_scrape(const ct_env *e, int k, const char *series)
{
	char cmd[300], line[1024];
	snprintf(cmd, sizeof(cmd), "ip netns exec %s curl -s --max-time 5 http://%s:9100/metrics", e->net.ns[k],
	         e->net.addr[k]);
	FILE *f = popen(cmd, "r");
	double v = -1;
	size_t n = strlen(series);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, series, n) && line[n] == ' ')
			v = strtod(line + n + 1, NULL);
	if (f)
		pclose(f);
	return v;
}

/* Node k lost: every process in its namespace killed, its roots deleted. */
static inline void ct_lose_node(ct_env *e, int k)
{
	tn_kill_all(&e->net, k);
	if (e->agent[k].pid > 0) {
		waitpid(e->agent[k].pid, NULL, 0);
		e->agent[k].pid = 0;
	}
	/* The killed ranks may still be exiting (not yet out of the namespace). */
	CT_CHECK(e, tn_empty(&e->net, k, 15000) == 0, "node n%d: %d process(es) still in its namespace 15 s after "
	         "SIGKILL", k, tn_count(&e->net, k));
	char cmd[1400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", e->root[k], e->agent[k].root);
	T_ASSERT(system(cmd) == 0);
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
