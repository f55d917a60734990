/* Spares (ckptd --spare) and the recovery timeline, with real agents and
 * libckpt ranks in the network-namespace cluster (cluster_test.h): one rank
 * per regular node, 1 MiB of state each, partner copies in peer pools.
 *
 * test_roles_spares (select): n1..n3 in racks ra, rb, rc save versions 1
 * and 2 (committed at PEER_MEM) and hold; then spares n4 (n1's rack), n5
 * (the rack of n1's rank's partner copy) and n6 (rz). n1 is lost:
 *  - the coordinator picks n6, the only spare apart from both (n4 and n5
 *    come first by name) and says why; n4, n5 stay free;
 *  - n6 pulls rank 0's version 2 from the partner's DRAM into its own at
 *    once, before any relaunch, and says so (SPARE_DONE);
 *  - rank 0 relaunched on n6 restores version 2 from LOCAL_MEM bit-exact;
 *    ranks 1, 2 (killed, relaunched on their nodes) too; all step, then
 *    save version 3, committed at PEER_MEM with n6 a regular node;
 *  - ckpt status (text and JSON) says n6 took n1, and when the job was
 *    protected again; the events stream has spare-chosen, spare-ready and
 *    recovered under n1's epoch; the metrics count the decisions;
 *  - the timeline (RECOVERIES and `ckpt recoveries --json`): every phase
 *    present, in order, each phase the difference of its neighbours'
 *    ends, the phases adding up to failure-to-first-step.
 *
 * test_roles_spares_shared: no peer pools, a --shared-dir: the spare n3
 * pulls n1's rank from SHARED; relaunched there it restores LOCAL_MEM.
 *
 * test_roles_spares_lost: spares n4, n5; n4's pulls delayed
 * (agent.spare_pull=delay); n1 lost, n4 chosen, n4 lost during its pull:
 * n5 is chosen and pulls, rank 0 restores there from LOCAL_MEM. Then n2
 * lost with no spare left: the coordinator says so (no-spare), and rank 1
 * relaunched on a fresh n6 still restores version 2 (from its partner).
 *
 * test_roles_spares_double: spares n4, n5; n1 and the node holding rank 0's
 * partner copy lost at once: each gets a spare; rank 0's state is gone from
 * every DRAM: its spare's SPARE_DONE names rank 0 and why (loud, in both
 * logs and in the recovery); the other lost rank, whose partner survived, is
 * pulled by its spare; once the lost nodes' copies are dropped, version 2
 * (rank 0 has no copy) is committed at no tier any more, and rank 0
 * relaunched is refused (-CKPT_EUNREACHABLE), not started from scratch. */
#include "cluster_test.h"

#define JOB "spj"
#define WORLD 3

static ct_env E;
static ct_plan plan[WORLD];
static ct_proc proc[WORLD];
static char shared[700];

static size_t bytes_of(int rank)
{
	return (1u << 20) + 8191u * (size_t)rank;
}

/* Node k's agent: its rack, a spare or not, metrics on its address. */
static void agent(int k, const char *rack, int spare, const char *fault, int peer)
{
	static char ml[TN_MAX][32];
	snprintf(ml[k], sizeof(ml[k]), "%s:9100", E.net.addr[k]);
	const char *a[24] = { "--pool-size", "64M", "--metrics-listen", ml[k], "--domain", rack };
	int n = 6;
	if (peer) {
		a[n++] = "--peer-pool-size";
		a[n++] = "32M";
	}
	if (shared[0]) {
		a[n++] = "--shared-dir";
		a[n++] = shared;
	}
	if (spare)
		a[n++] = "--spare";
	a[n] = NULL;
	ct_start_agent(&E, k, a, fault);
}

static ckptd_client *cli_session(void)
{
	return rt_connect(E.coord.unixa, NULL, CKPTD_ROLE_CLI, E.rt.cluster);
}

static ckptd_version_info list_v(uint64_t v)
{
	ckptd_client *c = cli_session();
	ckptd_version_info vi = { 0 };
	rt_list_find(c, JOB, v, &vi);
	ckptd_client_close(c);
	return vi;
}

static void wait_from(const daemon_t *d, long from, const char *needle, int ms)
{
	uint64_t end = rt_ms() + (uint64_t)ms;
	while (!td_file_has(d->log, from, needle)) {
		if (rt_ms() > end) {
			fprintf(stderr, "FAIL: %s's log has no \"%s\" after %d ms\n", d->name, needle, ms);
			E.failures++;
			return;
		}
		usleep(50000);
	}
}

/* Ranks 0..WORLD-1 on nodes 1..WORLD save versions 1, 2 and hold. */
static void save_and_hold(const char *tiers, int wait_peer)
{
	for (int r = 0; r < WORLD; r++) {
		plan[r] = (ct_plan){ .tag = "save", .job = JOB, .rank = r, .world = WORLD, .node = 1 + r, .tiers = tiers,
			                 .bytes = bytes_of(r), .from = 1, .to = 2, .wait_peer = wait_peer, .hold = 1 };
		ct_spawn(&E, &proc[r], &plan[r]);
	}
	for (int r = 0; r < WORLD; r++)
		ct_finish(&E, &proc[r]);
}

/* Rank r on node k: restores v (or expects it out of reach), steps, then
 * saves `to` (0: none), waiting for PEER_MEM with wait_peer. Not waited for. */
static void launch(int r, int k, uint64_t v, const char *tiers, uint64_t to, int wait_peer, int unreachable)
{
	plan[r] = (ct_plan){ .tag = "relaunch", .job = JOB, .rank = r, .world = WORLD, .node = k, .tiers = tiers,
		                 .bytes = bytes_of(r), .restore = unreachable ? 0 : v, .unreachable = unreachable,
		                 .steps = 3, .from = to, .to = to, .wait_peer = wait_peer,
		                 .shared_dir = shared[0] ? shared : NULL };
	ct_spawn(&E, &proc[r], &plan[r]);
}

static int run_cli(const char *args, const char *out)
{
	char cmd[3000];
	snprintf(cmd, sizeof(cmd), "'%s/ckpt' %s --daemon %s --token-file '%s' >'%s' 2>&1", getenv("CKPT_BIN"), args,
	         E.coord.unixa, E.rt.tokpath, out);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* The job's recoveries (RECOVERIES); *n of them, malloc'd. */
static ckptd_recovery *recoveries(uint32_t *n)
{
	ckptd_client *c = cli_session();
	ckptd_msg m = { .type = CKPTD_MSG_RECOVERIES }, rep = { 0 };
	snprintf(m.u.recoveries.job, sizeof(m.u.recoveries.job), "%s", JOB);
	ckptd_recovery *out = NULL;
	*n = 0;
	if (ckptd_client_call(c, &m, &rep) == 0 && rep.type == CKPTD_MSG_RECOVERIES_REPLY) {
		*n = rep.u.recoveries_reply.count;
		out = calloc(*n ? *n : 1, sizeof(*out));
		T_ASSERT(out);
		memcpy(out, rep.u.recoveries_reply.entries, *n * sizeof(*out));
	}
	ckptd_msg_free(&rep);
	ckptd_client_close(c);
	return out;
}

static const ckptd_recovery *find_rec(const ckptd_recovery *v, uint32_t n, uint32_t kind, const char *node)
{
	const ckptd_recovery *f = NULL;
	for (uint32_t i = 0; i < n; i++)
		if (v[i].kind == kind && !strcmp(v[i].node, node))
			f = &v[i];
	return f;
}

/* The kinds of the job's events of epoch ep, and their nodes, in order. */
typedef struct ev_acc {
	uint64_t ep;
	uint32_t *kinds;
	char (*nodes)[CKPTD_NAME_MAX + 1];
	int n, cap;
} ev_acc;

static void ev_take(void *arg, const ckptd_event *e)
{
	ev_acc *a = arg;
	if (e->epoch == a->ep && a->n < a->cap) {
		a->kinds[a->n] = e->kind;
		snprintf(a->nodes[a->n++], CKPTD_NAME_MAX + 1, "%s", e->node);
	}
}

static int events_of(uint64_t ep, uint32_t *kinds, char nodes[][CKPTD_NAME_MAX + 1], int cap)
{
	ev_acc a = { ep, kinds, nodes, 0, cap };
	rt_events(cli_session(), JOB, ev_take, &a);
	return a.n;
}

/* `ckpt recoveries --json`: in every recovery with a total, the phases'
 * seconds add up to it. Returns how many were checked. */
static int cli_timeline_adds_up(void)
{
	char out[800];
	snprintf(out, sizeof(out), "%s/recoveries.json", E.rt.dir);
	int rc = run_cli("recoveries --json --job " JOB, out);
	size_t len = 0;
	char *s = t_slurp(out, &len);
	CT_CHECK(&E, rc == 0 && s, "ckpt recoveries --json exited %d", rc);
	int checked = 0;
	for (char *p = s ? strstr(s, "{\"job\": ") : NULL; p; p = strstr(p + 1, "{\"job\": ")) {
		char *next = strstr(p + 1, "{\"job\": ");
		char *tot = strstr(p, "\"total_seconds\": ");
		if (!tot || (next && tot > next) || !strncmp(tot + 17, "null", 4))
			continue;
		double total = strtod(tot + 17, NULL), sum = 0;
		int phases = 0;
		for (char *q = strstr(p, "\"seconds\": "); q && q < tot; q = strstr(q + 1, "\"seconds\": ")) {
			double x = strtod(q + 11, NULL);
			CT_CHECK(&E, x >= 0, "a phase of %.3f s", x);
			sum += x;
			phases++;
		}
		CT_CHECK(&E, phases >= 4 && sum > total - 1e-5 * phases && sum < total + 1e-5 * phases,
		         "ckpt recoveries: %d phases add up to %.6f s, total %.6f s", phases, sum, total);
		checked++;
	}
	free(s);
	return checked;
}

/* A recovery's phases are there, in order, from failure to first step. */
static void check_timeline(const ckptd_recovery *r, int spare)
{
	uint64_t t[] = { r->failed_ns, r->detected_ns, r->chosen_ns, r->ready_ns, r->registered_ns, r->restored_ns,
		             r->first_step_ns };
	const char *nm[] = { "failure", "detected", "spare chosen", "state on the spare", "ranks registered",
		                 "restores done", "first step" };
	uint64_t last = 0;
	for (int i = 0; i < 7; i++) {
		if (!spare && (i == 2 || i == 3))
			continue;
		CT_CHECK(&E, t[i] != 0, "%s on %s: no '%s' in its timeline", r->ranks, r->node, nm[i]);
		CT_CHECK(&E, t[i] >= last, "%s on %s: '%s' ends before the phase before it", r->ranks, r->node, nm[i]);
		if (t[i])
			last = t[i];
	}
	printf("  %s of ranks %s on %s%s%s: detect %.3f s, %.3f s to registered, restore %.3f s, first step "
	       "%.3f s; failure to first step %.3f s\n", r->kind == CKPTD_FAIL_NODE_LOST ? "node-lost" : "rank-died",
	       r->ranks, r->node, spare ? ", spare " : "", spare ? r->spare : "",
	       (double)(r->detected_ns - r->failed_ns) / 1e9,
	       (double)(r->registered_ns - (spare ? r->ready_ns : r->detected_ns)) / 1e9,
	       (double)(r->restored_ns - r->registered_ns) / 1e9, (double)(r->first_step_ns - r->restored_ns) / 1e9,
	       (double)(r->first_step_ns - r->failed_ns) / 1e9);
	if (spare)
		printf("  spare chosen %.3f s after the decision, its pull %.3f s\n",
		       (double)(r->chosen_ns - r->detected_ns) / 1e9, (double)(r->ready_ns - r->chosen_ns) / 1e9);
}

/* The spare's pull for lost node n<lost> logged ok on node k. */
static void wait_pulled(int k, int lost, long from)
{
	char line[120];
	snprintf(line, sizeof(line), "spare for n%d (epoch", lost);
	wait_from(&E.agent[k], from, line, 15000);
	CT_CHECK(&E, td_file_has(E.agent[k].log, from, "pulled into this node's DRAM in"),
	         "n%d did not pull n%d's ranks into its DRAM", k, lost);
}

static void three_saved(const char *extra0, const char *extra1);

static int select_test(void)
{
	ct_init(&E, "roles-spares", 6);
	char cml[32];
	snprintf(cml, sizeof(cml), "%s:9100", E.net.addr[0]);
	three_saved("--metrics-listen", cml);
	const char *racks[] = { "", "ra", "rb", "rc" };
	char partner[CKPTD_NAME_MAX + 1];
	ct_peer_node(&E, JOB, 2, 0, partner, sizeof(partner));
	int pk = partner[0] == 'n' ? atoi(partner + 1) : 0;
	CT_CHECK(&E, pk >= 2 && pk <= 3, "rank 0's partner copy is on '%s'", partner);
	if (pk < 2 || pk > 3)
		return ct_end(&E);
	/* n4 in n1's rack, n5 in the partner's, n6 apart from both */
	agent(4, "ra", 1, NULL, 1);
	agent(5, racks[pk], 1, NULL, 1);
	agent(6, "rz", 1, NULL, 1);
	ct_wait_agents(&E, 6);
	for (int k = 4; k <= 6; k++) {
		char line[80];
		snprintf(line, sizeof(line), "agent n%d up at", k);
		td_wait_log(&E.coord, line, 5000);
	}
	CT_CHECK(&E, td_log_has(&E.coord, "a spare, free to take a lost node's ranks"), "no spare registered as one");
	uint64_t until = rt_ms() + 3000; /* the gauge follows at the next liveness pass */
	while (ct_scrape(&E, 0, "ckpt_spares_free") != 3 && rt_ms() < until)
		usleep(100000);
	CT_CHECK(&E, ct_scrape(&E, 0, "ckpt_spares_free") == 3, "ckpt_spares_free is not 3");

	long from = td_file_size(E.coord.log), from6 = td_file_size(E.agent[6].log);
	ct_lose_node(&E, 1);
	wait_from(&E.coord, from, "spare n6 chosen for lost node n1, ranks 0", 10000);
	CT_CHECK(&E, td_file_has(E.coord.log, from, "apart from both; passed over: n5 (a partner copy's domain), n4 "
	                                            "(the lost node's domain)") ||
	                 td_file_has(E.coord.log, from, "apart from both; passed over: n4 (the lost node's domain), n5 "
	                                                "(a partner copy's domain)"),
	         "the choice does not say why n4 and n5 were passed over");
	wait_pulled(6, 1, from6);
	char line[160];
	snprintf(line, sizeof(line), "prefetched version 2 rank 0 from partner DRAM");
	CT_CHECK(&E, td_file_has(E.agent[6].log, from6, line), "n6 did not pull rank 0 from partner DRAM");
	CT_CHECK(&E, td_file_has(E.agent[6].log, from6, "DRAM pool made ahead"),
	         "n6 did not pull into a pool made ahead (at its start)");
	wait_from(&E.coord, from, "spare n6 ready", 5000);
	CT_CHECK(&E, !td_log_has(&E.agent[4], "spare: taking") && !td_log_has(&E.agent[5], "spare: taking"),
	         "n4 or n5 was told to take a node too");

	/* The relaunch: rank 0 on n6, ranks 1 and 2 where they were. */
	for (int r = 1; r < WORLD; r++)
		ct_kill(&proc[r]);
	const char *tiers = "local_mem,peer_mem,local_disk";
	launch(0, 6, 2, tiers, 3, 1, 0);
	for (int r = 1; r < WORLD; r++)
		launch(r, 1 + r, 2, tiers, 3, 1, 0);
	for (int r = 0; r < WORLD; r++)
		ct_finish(&E, &proc[r]);
	CT_CHECK(&E, ct_log_has(&E, &plan[0], "v=2: restored from LOCAL_MEM"),
	         "rank 0 did not restore its state from n6's DRAM");
	CT_CHECK(&E, list_v(3).tiers & CKPT_TIER_PEER_MEM, "version 3 not committed at PEER_MEM after the takeover");
	wait_from(&E.coord, from, "recovered from node-lost on n1", 5000);
	wait_from(&E.coord, from, "protected again after node-lost on n1", 5000);

	/* the timeline */
	uint32_t n;
	ckptd_recovery *rv = recoveries(&n);
	const ckptd_recovery *r = rv ? find_rec(rv, n, CKPTD_FAIL_NODE_LOST, "n1") : NULL;
	CT_CHECK(&E, r != NULL, "no recovery of n1's loss (%u recoveries)", n);
	if (r) {
		CT_CHECK(&E, !strcmp(r->spare, "n6") && !strcmp(r->ranks, "0"), "n1's recovery: spare '%s', ranks '%s'",
		         r->spare, r->ranks);
		check_timeline(r, 1);
		CT_CHECK(&E, r->protected_ns > r->first_step_ns, "n1's recovery not protected again after its first step");
		CT_CHECK(&E, r->bytes > bytes_of(0), "the spare pulled %llu bytes, less than rank 0's state",
		         (unsigned long long)r->bytes);
	}
	for (int k = 2; k <= 3; k++) {
		char node[8];
		snprintf(node, sizeof(node), "n%d", k);
		const ckptd_recovery *d = rv ? find_rec(rv, n, CKPTD_FAIL_RANK_DIED, node) : NULL;
		CT_CHECK(&E, d != NULL, "no recovery of the rank killed on %s", node);
		if (d)
			check_timeline(d, 0);
	}
	CT_CHECK(&E, cli_timeline_adds_up() == 3, "ckpt recoveries --json does not give 3 finished timelines");

	/* the events under n1's epoch */
	uint32_t kinds[8];
	char nodes[8][CKPTD_NAME_MAX + 1];
	int ne = r ? events_of(r->epoch, kinds, nodes, 8) : 0;
	CT_CHECK(&E, ne == 4 && kinds[0] == CKPTD_FAIL_NODE_LOST && kinds[1] == CKPTD_FAIL_SPARE_CHOSEN &&
	                 kinds[2] == CKPTD_FAIL_SPARE_READY && kinds[3] == CKPTD_FAIL_RECOVERED &&
	                 !strcmp(nodes[1], "n6") && !strcmp(nodes[2], "n6") && !strcmp(nodes[3], "n1"),
	         "n1's epoch has %d events, not node-lost, spare-chosen n6, spare-ready n6, recovered n1", ne);
	free(rv);

	/* ckpt status, text and JSON */
	char out[800];
	snprintf(out, sizeof(out), "%s/status.txt", E.rt.dir);
	CT_CHECK(&E, run_cli("status", out) == 0, "ckpt status failed");
	CT_CHECK(&E, td_file_has(out, 0, "job spj: spare n6 took n1 (ranks 0) at") &&
	                 td_file_has(out, 0, "; protected again at"),
	         "ckpt status does not say n6 took n1 and when the job was protected again");
	snprintf(out, sizeof(out), "%s/status.json", E.rt.dir);
	CT_CHECK(&E, run_cli("status --json", out) == 0, "ckpt status --json failed");
	CT_CHECK(&E, td_file_has(out, 0, "\"recoveries\": [{\"job\": \"spj\", \"epoch\": ") &&
	                 td_file_has(out, 0, "\"spare\": \"n6\", \"spare_chosen_ns\": "),
	         "ckpt status --json has no recovery naming spare n6");

	snprintf(out, sizeof(out), "%s/recoveries.txt", E.rt.dir);
	CT_CHECK(&E, run_cli("recoveries --job " JOB, out) == 0 && td_file_has(out, 0, ", spare n6\n") &&
	                 td_file_has(out, 0, "(failure to first step)"),
	         "ckpt recoveries does not show n1's recovery with spare n6");
	char *txt = t_slurp(out, &(size_t){ 0 });
	printf("ckpt recoveries:\n%s", txt ? txt : "");
	free(txt);
	snprintf(out, sizeof(out), "%s/status.txt", E.rt.dir);
	txt = t_slurp(out, &(size_t){ 0 });
	printf("ckpt status:\n%s", txt ? txt : "");
	free(txt);

	/* metrics */
	CT_CHECK(&E, ct_scrape(&E, 0, "ckpt_spare_decisions_total{ckpt_job=\"spj\",result=\"chosen\"}") == 1 &&
	                 ct_scrape(&E, 0, "ckpt_spare_decisions_total{ckpt_job=\"spj\",result=\"ready\"}") == 1,
	         "the coordinator's metrics do not count one spare chosen and ready");
	CT_CHECK(&E, ct_scrape(&E, 0, "ckpt_recovery_phase_seconds_count{phase=\"pull\"}") == 1 &&
	                 ct_scrape(&E, 0, "ckpt_recovery_phase_seconds_count{phase=\"total\"}") == 3,
	         "ckpt_recovery_phase_seconds does not count 1 pull and 3 recoveries");
	CT_CHECK(&E, ct_scrape(&E, 0, "ckpt_spares_free") == 2, "ckpt_spares_free is not 2 after the takeover");
	printf("n1 lost: spare n6 chosen (n4 in n1's rack, n5 in its partner's passed over), pulled rank 0 from "
	       "partner DRAM before the relaunch; restored from LOCAL_MEM bit-exact; protected again at version 3\n");
	return ct_end(&E);
}

static int shared_test(void)
{
	ct_init(&E, "roles-spares-sh", 3);
	snprintf(shared, sizeof(shared), "%s/shared", E.rt.dir);
	T_ASSERT(mkdir(shared, 0700) == 0);
	const char *cargs[] = { "--agent-grace", "2s", NULL };
	ct_start_coord(&E, cargs);
	agent(1, "ra", 0, NULL, 0);
	agent(2, "rb", 0, NULL, 0);
	ct_wait_agents(&E, 2);
	/* two ranks: n1 and n2; no peer pools, so no partner copy */
	for (int r = 0; r < 2; r++) {
		plan[r] = (ct_plan){ .tag = "save", .job = JOB, .rank = r, .world = 2, .node = 1 + r,
			                 .tiers = "local_mem,local_disk", .bytes = bytes_of(r), .from = 1, .to = 2, .hold = 1 };
		ct_spawn(&E, &proc[r], &plan[r]);
	}
	for (int r = 0; r < 2; r++)
		ct_finish(&E, &proc[r]);
	uint64_t end = rt_ms() + 30000;
	while (rt_ms() < end && !(list_v(2).tiers & CKPT_TIER_SHARED))
		usleep(100000);
	CT_CHECK(&E, list_v(2).tiers & CKPT_TIER_SHARED, "version 2 never committed at SHARED");
	agent(3, "rc", 1, NULL, 0);
	ct_wait_agents(&E, 3);
	long from = td_file_size(E.coord.log);
	ct_lose_node(&E, 1);
	wait_from(&E.coord, from, "spare n3 chosen for lost node n1, ranks 0", 10000);
	wait_pulled(3, 1, 0);
	CT_CHECK(&E, td_log_has(&E.agent[3], "prefetched version 2 rank 0 from SHARED"),
	         "n3 did not pull rank 0 from SHARED");
	plan[0] = (ct_plan){ .tag = "relaunch", .job = JOB, .rank = 0, .world = 2, .node = 3, .tiers = "local_mem,local_disk",
		                 .bytes = bytes_of(0), .restore = 2, .shared_dir = shared };
	ct_spawn(&E, &proc[0], &plan[0]);
	ct_finish(&E, &proc[0]);
	CT_CHECK(&E, ct_log_has(&E, &plan[0], "v=2: restored from LOCAL_MEM"),
	         "rank 0 did not restore the SHARED copy from n3's DRAM");
	ct_kill(&proc[1]);
	printf("n1 lost with no partner copies: spare n3 pulled rank 0 from SHARED; restored from LOCAL_MEM bit-exact\n");
	return ct_end(&E);
}

/* The coordinator (extra: its flags after --agent-grace 2s), n1..n3 in
 * racks ra, rb, rc with peer pools, versions 1 and 2 saved, ranks held. */
static void three_saved(const char *extra0, const char *extra1)
{
	const char *cargs[] = { "--agent-grace", "2s", extra0, extra1, NULL };
	ct_start_coord(&E, cargs);
	const char *racks[] = { "", "ra", "rb", "rc" };
	for (int k = 1; k <= 3; k++)
		agent(k, racks[k], 0, NULL, 1);
	ct_wait_agents(&E, 3);
	save_and_hold("local_mem,peer_mem,local_disk", 1);
	CT_CHECK(&E, list_v(2).tiers & CKPT_TIER_PEER_MEM, "version 2 not committed at PEER_MEM");
}

static int lost_test(void)
{
	ct_init(&E, "roles-spares-lost", 6);
	three_saved(NULL, NULL);
	agent(4, "rx", 1, "agent.spare_pull=delay:4000", 1);
	agent(5, "ry", 1, NULL, 1);
	ct_wait_agents(&E, 5);
	long from = td_file_size(E.coord.log);
	ct_lose_node(&E, 1);
	wait_from(&E.coord, from, "spare n4 chosen for lost node n1", 10000);
	wait_from(&E.agent[4], 0, "spare: taking n1's 1 rank(s)", 5000);
	ct_lose_node(&E, 4); /* during its (delayed) pull */
	wait_from(&E.coord, from, "spare n4 lost while it pulled lost node n1's ranks 0", 10000);
	wait_from(&E.coord, from, "spare n5 chosen for lost node n1, ranks 0", 10000);
	wait_pulled(5, 1, 0);
	launch(0, 5, 2, "local_mem,peer_mem,local_disk", 0, 0, 0);
	ct_finish(&E, &proc[0]);
	CT_CHECK(&E, ct_log_has(&E, &plan[0], "v=2: restored from LOCAL_MEM"), "rank 0 did not restore from n5's DRAM");
	/* No spare left: n2 lost. */
	from = td_file_size(E.coord.log);
	ct_lose_node(&E, 2);
	wait_from(&E.coord, from, "lost node n2, ranks 1, epoch", 10000);
	CT_CHECK(&E, td_file_has(E.coord.log, from, "no spare free (start agents with --spare): ranks 1 restore from"),
	         "no clear message when no spare is free");
	uint32_t n;
	ckptd_recovery *rv = recoveries(&n);
	const ckptd_recovery *r = rv ? find_rec(rv, n, CKPTD_FAIL_NODE_LOST, "n2") : NULL;
	CT_CHECK(&E, r && r->code == ENOENT && !r->spare[0] && strstr(r->text, "no spare free"),
	         "n2's recovery does not say no spare was free");
	free(rv);
	agent(6, "rz", 0, NULL, 1); /* a fresh node, not a spare */
	ct_wait_agents(&E, 3);
	launch(1, 6, 2, "local_mem,peer_mem,local_disk", 0, 0, 0);
	ct_finish(&E, &proc[1]);
	CT_CHECK(&E, ct_log_has(&E, &plan[1], "v=2: restored from"), "rank 1 did not restore version 2 on n6");
	ct_kill(&proc[2]);
	printf("spare n4 lost during its pull: n5 chosen, rank 0 restored from its DRAM; n2 lost with no spare: said "
	       "so, rank 1 restored on a fresh node\n");
	return ct_end(&E);
}

static int double_test(void)
{
	ct_init(&E, "roles-spares-2", 5);
	three_saved(NULL, NULL);
	char partner[CKPTD_NAME_MAX + 1], p2[CKPTD_NAME_MAX + 1];
	ct_peer_node(&E, JOB, 2, 0, partner, sizeof(partner));
	int pk = partner[0] == 'n' ? atoi(partner + 1) : 0;
	CT_CHECK(&E, pk >= 2 && pk <= 3, "rank 0's partner copy is on '%s'", partner);
	if (pk < 2 || pk > 3)
		return ct_end(&E);
	int other = pk - 1; /* the partner node's rank */
	ct_peer_node(&E, JOB, 2, (uint32_t)other, p2, sizeof(p2));
	int survives = strcmp(p2, "n1") != 0; /* its partner copy is not on n1 */
	agent(4, "rx", 1, NULL, 1);
	agent(5, "ry", 1, NULL, 1);
	ct_wait_agents(&E, 5);
	long from = td_file_size(E.coord.log);
	ct_lose_node(&E, 1);
	ct_lose_node(&E, pk);
	char line[200];
	wait_from(&E.coord, from, "chosen for lost node n1, ranks 0", 10000);
	snprintf(line, sizeof(line), "chosen for lost node n%d, ranks %d", pk, other);
	wait_from(&E.coord, from, line, 10000);
	/* rank 0's only DRAM copies were on n1 and n<pk>: loud, naming it (a
	 * pull begun from the partner as it died waits out the fabric's 10 s) */
	wait_from(&E.coord, from, "pulled 0 of n1's ranks 0: rank 0: ", 25000);
	int s0 = td_file_has(E.coord.log, from, "spare n4 chosen for lost node n1") ? 4 : 5, s1 = 9 - s0;
	CT_CHECK(&E, td_file_has(E.agent[s0].log, 0, "NOT pulled: rank 0:"), "n%d does not say rank 0 was not pulled", s0);
	if (survives) {
		wait_pulled(s1, pk, 0);
	} else {
		snprintf(line, sizeof(line), "pulled 0 of n%d's ranks %d: rank %d: ", pk, other, other);
		wait_from(&E.coord, from, line, 25000);
	}
	/* The recovery says what was lost; once --agent-grace dropped the lost
	 * nodes' copies, version 2 is restorable no more (rank 0 has no copy
	 * left): nothing offers it, no rank restores it. */
	uint32_t n;
	ckptd_recovery *rv = recoveries(&n);
	const ckptd_recovery *r = rv ? find_rec(rv, n, CKPTD_FAIL_NODE_LOST, "n1") : NULL;
	CT_CHECK(&E, r && r->code == ENODATA && strstr(r->text, "rank 0: ") && !r->ready_ns,
	         "n1's recovery does not name rank 0 as not pulled");
	free(rv);
	uint64_t end = rt_ms() + 10000;
	while (rt_ms() < end && list_v(2).tiers)
		usleep(100000);
	CT_CHECK(&E, !list_v(2).tiers, "version 2 still committed (tiers 0x%x) with rank 0's every copy lost",
	         list_v(2).tiers);
	/* Relaunched now, rank 0 must not start from scratch: the job's newest
	 * committed version is lost, not absent (-CKPT_EUNREACHABLE). */
	launch(0, s0, 2, "local_mem,peer_mem,local_disk", 0, 0, 1);
	CT_CHECK(&E, ct_finish(&E, &proc[0]), "rank 0, relaunched with every copy of version 2 lost, did not "
	         "refuse to start from scratch (rank log: 'restore gave')");
	for (int r = 0; r < WORLD; r++)
		if (r != 0 && r != other)
			ct_kill(&proc[r]);
	printf("n1 and n%d lost at once: each got a spare; rank 0 (every copy lost) named by its spare's SPARE_DONE "
	       "and in the recovery; rank %d %s; version 2 no longer offered\n", pk, other,
	       survives ? "pulled by its spare" : "lost too, named");
	return ct_end(&E);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "shared"))
		return shared_test();
	if (argc > 1 && !strcmp(argv[1], "lost"))
		return lost_test();
	if (argc > 1 && !strcmp(argv[1], "double"))
		return double_test();
	return select_test();
}
