/* A real cluster on one machine: nodes in network namespaces the test
 * makes (tests/netns_helper.h, cluster_test.h), a coordinator and one
 * agent per node on private addresses, libckpt ranks inside the nodes
 * with FI_TCP_IFACE=lo. One scenario per run (argv[1]):
 *
 *  loss       3 nodes. Job "train" (6 ranks, 2 per node) saves versions 1
 *             and 2 committed at peer_mem: every shard's partner copy is on
 *             another node (placement across nodes, through the fabric
 *             bound to each node's address). Job "solo" (1 rank on n2, no
 *             peer tier) saves too. Node n2 is lost: every process in its
 *             namespace killed, its roots deleted. n2's two train ranks,
 *             relaunched on n3, restore version 2 bit-exact from partner
 *             DRAM; the solo rank, relaunched on n3, reaches no copy and
 *             fails with -CKPT_EUNREACHABLE naming n2 (down).
 *  eviction   3 nodes, partner pools of 3 MiB. Job "A" (ranks on n1, n2)
 *             commits version 2 at peer_mem; its rank 1 dies, and rank 0
 *             goes on saving versions 3-8, which can never commit; job "B"
 *             (ranks on n1, n2) saves six versions of the same size. The
 *             partner pools evict (logged), and A's restore point stays:
 *             ckpt_peer_protected_bytes{A} > 0 on its partner, never an
 *             eviction of A's version 2. n1 is lost; A's rank 0, relaunched
 *             on n3, restores version 2 bit-exact from partner DRAM.
 *  partition  see test_cluster_partition.c. */
#include "cluster_test.h"

static ct_env E;

static const char *const agent_args[] = { "--pool-size", "32M", "--peer-pool-size", "32M", NULL };

/* Reaps a rank killed with its node. */
static void reap(ct_proc *pr)
{
	int st;
	waitpid(pr->pid, &st, 0);
	close(pr->rep);
}

/* A restore from partner DRAM: directly, or through the node's DRAM after
 * the agent prefetched it; never from a disk. */
static int from_partner(const ct_plan *p)
{
	return (ct_log_has(&E, p, "restored from PEER_MEM") || ct_log_has(&E, p, "restored from LOCAL_MEM")) &&
	       !ct_log_has(&E, p, "restored from LOCAL_DISK");
}

static void scenario_loss(void)
{
	static const char *const cargs[] = { "--agent-grace", "300s", "--peer-replicas", "1", NULL };
	ct_start_coord(&E, cargs);
	for (int k = 1; k <= 3; k++)
		ct_start_agent(&E, k, agent_args, NULL);
	ct_wait_agents(&E, 3);

	enum { W = 6 };
	ct_plan p[W + 1];
	ct_proc pr[W + 1];
	for (int r = 0; r < W; r++)
		p[r] = (ct_plan){ .tag = "save", .job = "train", .rank = r, .world = W, .node = 1 + r / 2,
		                  .bytes = 300000 + 3, .from = 1, .to = 2, .wait_peer = 1, .hold = r / 2 == 1 };
	p[W] = (ct_plan){ .tag = "save", .job = "solo", .rank = 0, .world = 1, .node = 2, .bytes = 100000,
	                  .tiers = "local_mem,local_disk", .from = 1, .to = 2, .hold = 1 };
	for (int r = 0; r <= W; r++)
		ct_spawn(&E, &pr[r], &p[r]);
	int ok = 0;
	for (int r = 0; r <= W; r++)
		ok += ct_finish(&E, &pr[r]);
	CT_CHECK(&E, ok == W + 1, "%d of %d ranks saved their versions (train at peer_mem)", ok, W + 1);
	int across = 0;
	for (int r = 0; r < W; r++) {
		char node[CKPTD_NAME_MAX + 1], own[16];
		ct_peer_node(&E, "train", 2, (uint32_t)r, node, sizeof(node));
		snprintf(own, sizeof(own), "n%d", 1 + r / 2);
		CT_CHECK(&E, node[0] && strcmp(node, own), "rank %d (on %s): partner copy of version 2 on '%s'", r, own,
		         node);
		across += node[0] && strcmp(node, own);
	}
	if (across == W)
		fprintf(stderr, "ok: 6 ranks on 3 namespaced nodes, version 2 committed at peer_mem, every partner copy "
		        "on another node\n");

	ct_lose_node(&E, 2);
	for (int r = 2; r <= 3; r++)
		reap(&pr[r]);
	reap(&pr[W]);
	fprintf(stderr, "n2 lost: its processes killed, its roots deleted\n");

	ct_plan q[3];
	ct_proc qr[3];
	for (int i = 0; i < 2; i++)
		q[i] = (ct_plan){ .tag = "relaunch", .job = "train", .rank = 2 + i, .world = W, .node = 3,
		                  .bytes = 300000 + 3, .incarnation = 1, .restore = 2 };
	q[2] = (ct_plan){ .tag = "relaunch", .job = "solo", .rank = 0, .world = 1, .node = 3, .bytes = 100000,
	                  .tiers = "local_mem,local_disk", .incarnation = 1, .unreachable = 1 };
	for (int i = 0; i < 3; i++)
		ct_spawn(&E, &qr[i], &q[i]);
	ok = 0;
	for (int i = 0; i < 3; i++)
		ok += ct_finish(&E, &qr[i]);
	CT_CHECK(&E, ok == 3, "%d of 3 relaunched ranks did what they must", ok);
	for (int i = 0; i < 2; i++)
		CT_CHECK(&E, from_partner(&q[i]), "rank %d on n3: want its restore from partner DRAM", q[i].rank);
	CT_CHECK(&E, ct_log_has(&E, &q[2], "version 2 is COMMITTED") && ct_log_has(&E, &q[2], " on n2 (") &&
	         ct_log_has(&E, &q[2], ", down)"),
	         "the solo rank's error does not name version 2 and its copies on n2 (down)");
	if (!E.failures)
		fprintf(stderr, "ok: n2's train ranks restored version 2 bit-exact from partner DRAM on n3; the solo "
		        "rank, with no copy off n2, failed with -CKPT_EUNREACHABLE naming n2 (down)\n");
}

/* The value of a metric line "name{labels} value" scraped from node k's
 * agent, -1 if absent. */
static double scrape(int k, const char *series)
{
	char cmd[300], line[1024];
	snprintf(cmd, sizeof(cmd), "ip netns exec %s curl -s --max-time 5 http://%s:9100/metrics", E.net.ns[k],
	         E.net.addr[k]);
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

static void scenario_eviction(void)
{
	static const char *const cargs[] = { "--agent-grace", "300s", "--peer-replicas", "1", NULL };
	ct_start_coord(&E, cargs);
	for (int k = 1; k <= 3; k++) {
		char ml[64];
		snprintf(ml, sizeof(ml), "%s:9100", E.net.addr[k]);
		const char *args[] = { "--pool-size", "32M", "--peer-pool-size", "3M", "--metrics-listen", ml, NULL };
		ct_start_agent(&E, k, args, NULL);
	}
	ct_wait_agents(&E, 3);

	/* A commits version 2 at peer_mem. */
	ct_plan a[2];
	ct_proc ar[2];
	for (int r = 0; r < 2; r++)
		a[r] = (ct_plan){ .tag = "a", .job = "A", .rank = r, .world = 2, .node = 1 + r, .bytes = 600000,
		                  .from = 1, .to = 2, .wait_peer = 1 };
	int ok = 0;
	for (int r = 0; r < 2; r++)
		ct_spawn(&E, &ar[r], &a[r]);
	for (int r = 0; r < 2; r++)
		ok += ct_finish(&E, &ar[r]);
	T_ASSERT(ok == 2);
	char partner[CKPTD_NAME_MAX + 1];
	ct_peer_node(&E, "A", 2, 0, partner, sizeof(partner));
	T_ASSERT(partner[0] == 'n');
	int pk = atoi(partner + 1);
	T_ASSERT(pk >= 2 && pk <= 3);

	/* A's rank 1 is gone; rank 0 saves versions that never commit. */
	ct_plan a2 = { .tag = "a2", .job = "A", .rank = 0, .world = 2, .node = 1, .bytes = 600000, .incarnation = 1,
	               .restore = 2, .from = 3, .to = 8, .gap_ms = 400 };
	ct_proc a2r;
	ct_spawn(&E, &a2r, &a2);
	CT_CHECK(&E, ct_finish(&E, &a2r), "A's rank 0 did not save versions 3-8");
	/* B on the same nodes. */
	ct_plan b[2];
	ct_proc br[2];
	for (int r = 0; r < 2; r++)
		b[r] = (ct_plan){ .tag = "b", .job = "B", .rank = r, .world = 2, .node = 1 + r, .bytes = 600000,
		                  .from = 1, .to = 6, .gap_ms = 400 };
	for (int r = 0; r < 2; r++)
		ct_spawn(&E, &br[r], &b[r]);
	ok = 0;
	for (int r = 0; r < 2; r++)
		ok += ct_finish(&E, &br[r]);
	CT_CHECK(&E, ok == 2, "job B: %d of 2 ranks saved versions 1-6", ok);

	const daemon_t *pa = &E.agent[pk];
	CT_CHECK(&E, td_log_has(pa, "(evicted for version 1 of job B)"),
	         "%s never evicted a copy for B: no pressure from B on its peer pool", partner);
	CT_CHECK(&E, !td_log_has(pa, "[job=A]: partner copy of version 2 rank 0 dropped"),
	         "%s dropped A's restore point (version 2 rank 0)", partner);
	double prot = scrape(pk, "ckpt_peer_protected_bytes{ckpt_job=\"A\"}");
	CT_CHECK(&E, prot >= 600000, "%s: ckpt_peer_protected_bytes{A} = %.0f, want A's version 2 copy", partner, prot);
	double used = scrape(pk, "ckpt_peer_job_used_bytes{ckpt_job=\"B\"}");
	CT_CHECK(&E, used > 0, "%s: ckpt_peer_job_used_bytes{B} = %.0f", partner, used);
	char node[CKPTD_NAME_MAX + 1];
	ct_peer_node(&E, "A", 2, 0, node, sizeof(node));
	CT_CHECK(&E, !strcmp(node, partner), "the coordinator lists A's version 2 rank 0 copy on '%s', not %s", node,
	         partner);
	if (!E.failures)
		fprintf(stderr, "ok: %s's peer pool evicted under B's saves and A's uncommittable ones; A's restore "
		        "point stayed (%.0f protected bytes)\n", partner, prot);

	/* n1 is lost; A's rank 0 restores on n3. */
	ct_lose_node(&E, 1);
	ct_plan a3 = { .tag = "a3", .job = "A", .rank = 0, .world = 2, .node = 3, .bytes = 600000, .incarnation = 2,
	               .restore = 2 };
	ct_proc a3r;
	ct_spawn(&E, &a3r, &a3);
	CT_CHECK(&E, ct_finish(&E, &a3r), "A's rank 0 on n3 did not restore version 2");
	CT_CHECK(&E, from_partner(&a3), "A's rank 0 on n3: want its restore from partner DRAM");
	if (!E.failures)
		fprintf(stderr, "ok: n1 lost; A's rank 0 restored version 2 bit-exact from partner DRAM on n3\n");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		T_FAIL("usage: test_cluster loss|eviction");
	ct_init(&E, argv[1], 3);
	if (!strcmp(argv[1], "loss"))
		scenario_loss();
	else if (!strcmp(argv[1], "eviction"))
		scenario_eviction();
	else
		T_FAIL("unknown scenario %s", argv[1]);
	return ct_end(&E);
}
