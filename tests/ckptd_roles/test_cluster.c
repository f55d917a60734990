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
 *  idle       3 nodes, partner pools of 3 MiB, --peer-protect-idle 1s.
 *             Job "A" (ranks on n1, n2, images of 1.4 MB) commits version 1
 *             at peer_mem and finishes; silent past 1 s, its copy on its
 *             partner is no longer protected (ckpt_peer_protected_bytes{A}
 *             0, the copy still there). Job "B" (same nodes, images of 1 MB)
 *             commits version 1, then version 2, which fits only in A's
 *             place: A's copy is evicted for it and B's version 2 commits
 *             at peer_mem (with A protected forever the lease was refused).
 *  partition  3 nodes, heartbeat timeouts of 3 s. Job "part" (a rank per
 *             node) commits version 1 at peer_mem. n2's port on the bridge
 *             goes down (nothing tells TCP) while the ranks save versions
 *             2-4: the coordinator decides n2 lost within 2 s of the cut
 *             (one node-lost event, `ckpt events`), marks n2 degraded (STATUS, `ckpt status`,
 *             ckpt_agents{state="degraded"}, ckpt_tier_degraded_nodes), n2's
 *             agent drops its silent coordinator link, and n2's rank's save
 *             status says PEER_MEM failed while its disk copy is there. The
 *             link comes back: n2 is up again, versions 2-4 commit at
 *             local_disk from n2's inventory (nothing lost), and a new launch
 *             restores version 4 bit-exact and commits version 5 at peer_mem
 *             (nothing wedged). */
#include "cluster_test.h"

static ct_env E;

/* Two jobs share a node here: each gets its own half of the node's pool. */
static const char *const agent_args[] = { "--pool-size", "32M", "--job-pool-size", "16M", "--peer-pool-size", "32M",
                                          NULL };

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
	return ct_scrape(&E, k, series);
}

/* The coordinator and 3 agents with partner pools of 3 MiB, their metrics
 * on each node's :9100; protect_idle: their --peer-protect-idle (NULL: the
 * default). */
static void start_small_pools(const char *protect_idle)
{
	static const char *const cargs[] = { "--agent-grace", "300s", "--peer-replicas", "1", NULL };
	ct_start_coord(&E, cargs);
	for (int k = 1; k <= 3; k++) {
		char ml[64];
		snprintf(ml, sizeof(ml), "%s:9100", E.net.addr[k]);
		const char *args[] = { "--pool-size", "32M", "--job-pool-size", "16M", "--peer-pool-size", "3M",
		                       "--metrics-listen", ml, protect_idle ? "--peer-protect-idle" : NULL, protect_idle,
		                       NULL };
		ct_start_agent(&E, k, args, NULL);
	}
	ct_wait_agents(&E, 3);
}

/* Ranks 0 and 1 of tmpl's job, on n1 and n2, run to their end; p: their
 * plans (the caller's: a rank's process refers to its plan). Returns how
 * many finished. */
static int run_pair(const ct_plan *tmpl, ct_plan p[2])
{
	ct_proc pr[2];
	int ok = 0;
	for (int r = 0; r < 2; r++) {
		p[r] = *tmpl;
		p[r].rank = r;
		p[r].node = 1 + r;
		ct_spawn(&E, &pr[r], &p[r]);
	}
	for (int r = 0; r < 2; r++)
		ok += ct_finish(&E, &pr[r]);
	return ok;
}

/* The node (2 or 3) holding the partner copy of job's version v rank 0. */
static int partner_of(const char *job, uint64_t v, char *partner, size_t cap)
{
	ct_peer_node(&E, job, v, 0, partner, cap);
	T_ASSERT(partner[0] == 'n');
	int pk = atoi(partner + 1);
	T_ASSERT(pk >= 2 && pk <= 3);
	return pk;
}

static void scenario_eviction(void)
{
	start_small_pools(NULL);

	/* A commits version 2 at peer_mem. */
	ct_plan a[2];
	T_ASSERT(run_pair(&(ct_plan){ .tag = "a", .job = "A", .world = 2, .bytes = 600000, .from = 1, .to = 2,
	                              .wait_peer = 1 }, a) == 2);
	char partner[CKPTD_NAME_MAX + 1];
	int pk = partner_of("A", 2, partner, sizeof(partner));

	/* A's rank 1 is gone; rank 0 saves versions that never commit. */
	ct_plan a2 = { .tag = "a2", .job = "A", .rank = 0, .world = 2, .node = 1, .bytes = 600000, .incarnation = 1,
	               .restore = 2, .from = 3, .to = 8, .gap_ms = 400 };
	ct_proc a2r;
	ct_spawn(&E, &a2r, &a2);
	CT_CHECK(&E, ct_finish(&E, &a2r), "A's rank 0 did not save versions 3-8");
	/* B on the same nodes. */
	ct_plan b[2];
	int ok = run_pair(&(ct_plan){ .tag = "b", .job = "B", .world = 2, .bytes = 600000, .from = 1, .to = 6,
	                              .gap_ms = 400 }, b);
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

/* Polls node k's gauge series until cond(value) holds; the last value. */
static double scrape_until(int k, const char *series, int (*cond)(double), int timeout_ms)
{
	uint64_t end = td_ms() + (uint64_t)timeout_ms;
	double v;
	while (!cond(v = scrape(k, series)) && td_ms() < end)
		usleep(100000);
	return v;
}

static int is_zero(double v)
{
	return v == 0;
}

static void scenario_idle(void)
{
	start_small_pools("1s");

	/* A commits version 1 at peer_mem and finishes. */
	ct_plan a[2];
	T_ASSERT(run_pair(&(ct_plan){ .tag = "a", .job = "A", .world = 2, .bytes = 1400000, .from = 1, .to = 1,
	                              .wait_peer = 1 }, a) == 2);
	char partner[CKPTD_NAME_MAX + 1];
	int pk = partner_of("A", 1, partner, sizeof(partner));
	const daemon_t *pa = &E.agent[pk];

	/* Silent past --peer-protect-idle: A's copy stays, unprotected. Its
	 * partner heard A's commit last (then it was protected); 1 s of silence
	 * and two of the agent's 1 s metrics ticks later the gauge says 0
	 * (waiting longer only makes A quieter). */
	td_wait_log(pa, "[job=A]: version 1 committed at tier 2", 20000);
	usleep(3000 * 1000);
	double prot = scrape_until(pk, "ckpt_peer_protected_bytes{ckpt_job=\"A\"}", is_zero, 10000);
	CT_CHECK(&E, prot == 0, "%s: ckpt_peer_protected_bytes{A} = %.0f after A was silent past 1 s, want 0", partner,
	         prot);
	double used = scrape(pk, "ckpt_peer_job_used_bytes{ckpt_job=\"A\"}");
	CT_CHECK(&E, used >= 1400000, "%s: ckpt_peer_job_used_bytes{A} = %.0f, want A's copy still there", partner, used);

	/* B's version 1, known committed on A's partner before version 2 is
	 * leased (else B's own version 1 would be the victim). */
	ct_plan b[2], b2[2];
	ct_plan bt = { .tag = "b", .job = "B", .world = 2, .bytes = 1000000, .from = 1, .to = 1, .wait_peer = 1 };
	int ok = run_pair(&bt, b);
	CT_CHECK(&E, ok == 2, "job B: %d of 2 ranks committed version 1 at peer_mem", ok);
	char node[CKPTD_NAME_MAX + 1];
	ct_peer_node(&E, "B", 1, 0, node, sizeof(node));
	CT_CHECK(&E, !strcmp(node, partner), "B's version 1 rank 0 copy is on '%s', not on A's partner %s", node,
	         partner);
	td_wait_log(pa, "[job=B]: version 1 committed at tier 2", 20000);

	/* B's version 2 fits only in place of A's copy (A's, then B's version
	 * 1 from the pool's start; what is left after them is too short). */
	bt.tag = "b2";
	bt.incarnation = 1;
	bt.from = bt.to = 2;
	ok = run_pair(&bt, b2);
	CT_CHECK(&E, ok == 2, "job B: %d of 2 ranks committed version 2 at peer_mem", ok);
	CT_CHECK(&E, td_log_has(pa, "[job=A]: partner copy of version 1 rank 0 dropped (evicted for version 2 of job B)"),
	         "%s did not evict idle A's copy for B's version 2", partner);
	CT_CHECK(&E, !td_log_has(pa, "[job=B]: partner copy of version 1 rank 0 dropped"),
	         "%s evicted B's restore point (version 1) instead", partner);
	ct_peer_node(&E, "B", 2, 0, node, sizeof(node));
	CT_CHECK(&E, !strcmp(node, partner), "B's version 2 rank 0 copy is on '%s', not on %s", node, partner);
	if (!E.failures)
		fprintf(stderr, "ok: A silent past --peer-protect-idle lost its protection on %s; its copy was evicted "
		        "for B's version 2, which committed at peer_mem\n", partner);
}

/* The coordinator's STATUS state of node k's agent (CKPTD_AGENT_*), 0 if
 * it is not listed. */
static uint32_t agent_state(int k)
{
	char name[16];
	snprintf(name, sizeof(name), "n%d", k);
	ckptd_client *c = rt_connect(E.coord.unixa, NULL, CKPTD_ROLE_CLI, E.rt.cluster);
	ckptd_msg m = { .type = CKPTD_MSG_STATUS }, rep;
	uint32_t st = 0;
	if (ckptd_client_call(c, &m, &rep) == 0 && rep.type == CKPTD_MSG_STATUS_REPLY)
		for (uint32_t i = 0; i < rep.u.status_reply.count; i++)
			if (!strcmp(rep.u.status_reply.entries[i].node, name))
				st = rep.u.status_reply.entries[i].state;
	ckptd_msg_free(&rep);
	ckptd_client_close(c);
	return st;
}

static int wait_state(int k, uint32_t want, int timeout_ms)
{
	uint64_t end = td_ms() + (uint64_t)timeout_ms;
	while (td_ms() < end) {
		if (agent_state(k) == want)
			return 1;
		usleep(50000);
	}
	return 0;
}

/* 1 once the coordinator lists version v of job as committed at tier. */
static int wait_committed(const char *job, uint64_t v, uint32_t tier, int timeout_ms)
{
	ckptd_secret *js = rt_job_secret(&E.rt, job);
	uint64_t end = td_ms() + (uint64_t)timeout_ms;
	int ok = 0;
	while (!ok && td_ms() < end) {
		ckptd_client *c = rt_connect(E.coord.unixa, job, CKPTD_ROLE_CLI, js);
		ckptd_version_info vi;
		ok = rt_list_find(c, job, v, &vi) && vi.state == CKPT_STATE_COMMITTED && (vi.tiers & tier);
		ckptd_client_close(c);
		if (!ok)
			usleep(100000);
	}
	ckptd_secret_free(js);
	return ok;
}

/* `ckpt status` against the coordinator: 1 if its output has needle. */
static int status_says(const char *needle)
{
	char cmd[1600], line[512];
	snprintf(cmd, sizeof(cmd), "'%s/ckpt' status --daemon '%s' --token-file '%s' 2>&1", getenv("CKPT_BIN"),
	         E.coord.unixa, E.rt.tokpath);
	FILE *f = popen(cmd, "r");
	int found = 0;
	while (f && fgets(line, sizeof(line), f))
		found |= strstr(line, needle) != NULL;
	if (f)
		pclose(f);
	return found;
}

/* The coordinator's node-lost decisions about node since t0 (wall ns), from
 * `ckpt events --json`: how many, and the first one's latency in *lat. */
static int lost_since(const char *node, uint64_t t0, double *lat)
{
	char cmd[1600], line[4096], want[96];
	snprintf(cmd, sizeof(cmd), "'%s/ckpt' events --json --daemon '%s' --token-file '%s' 2>&1", getenv("CKPT_BIN"),
	         E.coord.unixa, E.rt.tokpath);
	snprintf(want, sizeof(want), "\"failure\": \"node-lost\", \"node\": \"%s\"", node);
	FILE *f = popen(cmd, "r");
	int n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		const char *t = strstr(line, "\"time_ns\": ");
		unsigned long long ns = t ? strtoull(t + 11, NULL, 10) : 0;
		if (!strstr(line, want) || ns < t0)
			continue;
		if (!n++)
			*lat = ((double)ns - (double)t0) / 1e9;
	}
	if (f)
		pclose(f);
	return n;
}

static void scenario_partition(void)
{
	char ml[64];
	snprintf(ml, sizeof(ml), "%s:9100", E.net.addr[0]);
	const char *cargs[] = { "--agent-grace", "300s", "--peer-replicas", "1", "--heartbeat-timeout", "3s",
	                        "--metrics-listen", ml, NULL };
	ct_start_coord(&E, cargs);
	static const char *const aargs[] = { "--pool-size", "32M", "--peer-pool-size", "32M", "--heartbeat-timeout",
	                                     "3s", NULL };
	for (int k = 1; k <= 3; k++)
		ct_start_agent(&E, k, aargs, NULL);
	ct_wait_agents(&E, 3);

	enum { W = 3 };
	ct_plan p[W];
	ct_proc pr[W];
	int ok = 0;
	for (int r = 0; r < W; r++)
		p[r] = (ct_plan){ .tag = "p1", .job = "part", .rank = r, .world = W, .node = 1 + r, .bytes = 300000,
		                  .from = 1, .to = 1, .wait_peer = 1 };
	for (int r = 0; r < W; r++)
		ct_spawn(&E, &pr[r], &p[r]);
	for (int r = 0; r < W; r++)
		ok += ct_finish(&E, &pr[r]);
	T_ASSERT(ok == W);

	/* The partition, while versions 2-4 are saved. */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t cut_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	tn_link(&E.net, 2, 0);
	fprintf(stderr, "n2 partitioned (its bridge port down)\n");
	for (int r = 0; r < W; r++)
		p[r] = (ct_plan){ .tag = "p2", .job = "part", .rank = r, .world = W, .node = 1 + r, .bytes = 300000,
		                  .incarnation = 1, .from = 2, .to = 4, .gap_ms = 300, .report = 1,
		                  .peer_timeout_ms = 1500 };
	for (int r = 0; r < W; r++)
		ct_spawn(&E, &pr[r], &p[r]);
	int degraded = wait_state(2, CKPTD_AGENT_DEGRADED, 20000);
	CT_CHECK(&E, degraded, "the coordinator did not mark the partitioned n2 degraded");
	/* The others' heartbeats go on: quiet is not silent. */
	CT_CHECK(&E, agent_state(1) == CKPTD_AGENT_UP && agent_state(3) == CKPTD_AGENT_UP,
	         "n1 and n3 are not up while n2 is partitioned");
	CT_CHECK(&E, status_says("degraded") && status_says("DEGRADED"),
	         "`ckpt status` does not show n2 degraded and the tiers DEGRADED");
	double mdeg = scrape(0, "ckpt_agents{state=\"degraded\"}");
	double tdeg = scrape(0, "ckpt_tier_degraded_nodes{tier=\"peer_mem\"}");
	CT_CHECK(&E, mdeg == 1 && tdeg == 1, "metrics: ckpt_agents{degraded} = %.0f, ckpt_tier_degraded_nodes{peer_mem} "
	         "= %.0f; want 1 and 1", mdeg, tdeg);
	ok = 0;
	for (int r = 0; r < W; r++)
		ok += ct_finish(&E, &pr[r]);
	CT_CHECK(&E, ok == W, "%d of %d ranks saved versions 2-4 during the partition", ok, W);
	CT_CHECK(&E, ct_log_has(&E, &p[1], "save v4: tiers reached 0x5 failed 0x2"),
	         "n2's rank: want version 4's status to say local_mem and local_disk reached, peer_mem failed");
	CT_CHECK(&E, td_log_has(&E.agent[2], "coordinator link down: silent for"),
	         "n2's agent did not drop its silent coordinator link");
	CT_CHECK(&E, td_log_has(&E.coord, "agent n2 silent for"), "the coordinator's log does not say n2 went silent");
	/* Decided lost within 2 s of the cut (--failure-timeout 1.5 s), once. */
	double lost_s = -1;
	int nlost = lost_since("n2", cut_ns, &lost_s);
	CT_CHECK(&E, nlost == 1 && lost_s >= 0 && lost_s <= 2.5,
	         "node-lost n2 decided %d times, the first %.3f s after its link was cut (want once, within 2 s, and "
	         "0.5 s for a loaded host)", nlost,
	         lost_s);
	if (!E.failures)
		fprintf(stderr, "ok: partition noticed: n2 decided lost %.3f s after the cut, degraded (STATUS, ckpt status, "
		        "metrics), its agent dropped the silent link, its rank's save status says peer_mem failed\n", lost_s);

	/* Healed. */
	tn_link(&E.net, 2, 1);
	CT_CHECK(&E, wait_state(2, CKPTD_AGENT_UP, 20000), "n2 is not up again after the partition healed");
	ct_wait_agents(&E, 3);
	CT_CHECK(&E, wait_committed("part", 4, CKPT_TIER_LOCAL_DISK, 15000),
	         "version 4 not committed at local_disk after the heal: n2's reports were lost");
	for (int r = 0; r < W; r++)
		p[r] = (ct_plan){ .tag = "p3", .job = "part", .rank = r, .world = W, .node = 1 + r, .bytes = 300000,
		                  .incarnation = 2, .restore = 4, .from = 5, .to = 5, .wait_peer = 1 };
	for (int r = 0; r < W; r++)
		ct_spawn(&E, &pr[r], &p[r]);
	ok = 0;
	for (int r = 0; r < W; r++)
		ok += ct_finish(&E, &pr[r]);
	CT_CHECK(&E, ok == W, "after the heal: %d of %d ranks restored version 4 and committed version 5 at peer_mem",
	         ok, W);
	if (!E.failures)
		fprintf(stderr, "ok: healed: n2 up, versions 2-4 committed from its inventory, version 4 restored "
		        "bit-exact, version 5 committed at peer_mem\n");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		T_FAIL("usage: test_cluster loss|eviction|idle|partition");
	ct_init(&E, argv[1], 3);
	if (!strcmp(argv[1], "loss"))
		scenario_loss();
	else if (!strcmp(argv[1], "eviction"))
		scenario_eviction();
	else if (!strcmp(argv[1], "idle"))
		scenario_idle();
	else if (!strcmp(argv[1], "partition"))
		scenario_partition();
	else
		T_FAIL("unknown scenario %s", argv[1]);
	return ct_end(&E);
}
