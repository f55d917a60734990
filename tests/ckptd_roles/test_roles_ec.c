/* The rs:K+M encode and rebuild with real agents in the network-namespace
 * cluster (cluster_test.h): a coordinator with --peer-scheme rs:2+1, agents
 * n1..n3 with peer pools, two libckpt ranks per node (tiers local_mem,
 * peer_mem, local_disk: the agents say their group protects the ranks, who
 * make no partner copy and wait for the group's commit at PEER_MEM).
 *
 * test_roles_ec encode: every agent reads its data slices with a delay
 * (agent.ec_read=delay) so that an encode lasts long enough to lose a node
 * in the middle of it.
 *
 *  1. versions 1 and 2 commit at PEER_MEM only through the group: every
 *     rank's PEER_MEM copy is on the pseudo-node rs-group.<id> (ckpt show's
 *     word for "protected by the group"), no node got a partner copy, and
 *     each member dropped version 1's parity once version 2 committed
 *     there (not before: version 1 committed at PEER_MEM first);
 *  2. version 3: n1 is lost while the others read from it; their EC_DONE
 *     names n1, version 3 never commits at PEER_MEM, and version 2's parity
 *     stays on n2 and n3 (its PEER_MEM commit survives one lost member).
 *
 * test_roles_ec double: rs:4+2 over n1..n6, one rank each; n1 and n2 lost
 * at once (M): both ranks rebuilt on a spare n7 from the four survivors
 * and restored bit-exact.
 *
 * test_roles_ec rebuild: the agents also flush to a --shared-dir.
 *  1. versions 1 and 2 saved, protected by the group, and flushed;
 *  2. n1 lost; a spare n4 registers (it takes n1's place in the group),
 *     ranks 0 and 1 relaunched there restore at once: n4's agent holds
 *     their reads while it rebuilds their shards of version 2 from n2's
 *     and n3's pieces (data from their DRAM, parity from their peer pools
 *     with its holders' checksums), every chunk checked, into its DRAM;
 *     the ranks restore them bit-exact from there;
 *     the rebuilt shards commit LOCAL_MEM again and the group, now with
 *     n4, re-protects version 2 (n4 makes its rows; n2's and n3's stand);
 *  3. n2 lost: the same on a spare n5, from n4's rebuilt data and re-made
 *     parity and n3's pieces (a second loss after a rebuild);
 *  4. n3 and n4 lost at once (2 > M): version 2 loses its PEER_MEM
 *     protection at the coordinator; rank 4 relaunched on n5: the rebuild
 *     is refused, naming the group, the version, the rank's node and n4
 *     unreachable, and the rank restores version 2 bit-exact from SHARED. */
#include "cluster_test.h"

#define JOB "ecj"
#define NODES 3
#define PER 2
#define WORLD (NODES * PER)
#define RANKS_MAX 16

static ct_env E;
static ct_plan plan[RANKS_MAX];
static ct_proc proc[RANKS_MAX];
static int per = PER;                    /* ranks per node */
static int world = WORLD;
static const char *scheme = "rs:2+1";
static size_t base_bytes = 1u << 20;     /* rank r's region: base_bytes + 4099 r (+ more, odd_sizes) */
static int odd_sizes;

static ckptd_version_info list_v(uint64_t v)
{
	ckptd_secret *js = rt_job_secret(&E.rt, JOB);
	ckptd_client *c = rt_connect(E.coord.unixa, JOB, CKPTD_ROLE_CLI, js);
	ckptd_version_info vi = { 0 };
	rt_list_find(c, JOB, v, &vi);
	ckptd_client_close(c);
	ckptd_secret_free(js);
	return vi;
}

/* Waits up to ms for version v to be committed at PEER_MEM. */
static int wait_peer(uint64_t v, int ms)
{
	uint64_t end = rt_ms() + (uint64_t)ms;
	while (rt_ms() < end) {
		if (list_v(v).tiers & CKPT_TIER_PEER_MEM)
			return 1;
		usleep(50000);
	}
	return 0;
}

/* Node k's agent with args, and its metrics on its address, port 9100;
 * fault: its CKPT_FAULT (NULL: none). */
static void start_agent_f(int k, const char *const *args, const char *fault)
{
	const char *a[TD_MAX_ARGS];
	static char ml[TN_MAX][32];
	int n = 0;
	for (; args[n]; n++)
		a[n] = args[n];
	snprintf(ml[k], sizeof(ml[k]), "%s:9100", E.net.addr[k]);
	a[n++] = "--metrics-listen";
	a[n++] = ml[k];
	a[n] = NULL;
	ct_start_agent(&E, k, a, fault);
}

static void start_agent(int k, const char *const *args)
{
	start_agent_f(k, args, NULL);
}

/* The value of the metric line "series value" of node k's daemon (0: the
 * coordinator's), -1 if absent. */
static double scrape(int k, const char *series)
{
	return ct_scrape(&E, k, series);
}

static size_t bytes_of(int rank)
{
	/* odd_sizes: every third rank's shard longer by 65,537 bytes, so that
	 * the members' images (and their slices) differ unevenly */
	return base_bytes + 4099u * (size_t)rank + (odd_sizes && rank % 3 == 1 ? 65537u : 0);
}

static void save(uint64_t from, uint64_t to, int first)
{
	for (int r = 0; r < world; r++) {
		/* peer_mem asked for: the rank's part is its LOCAL_MEM copy, and
		 * the first versions are waited for until the group commits them. */
		plan[r] = (ct_plan){ .tag = first ? "save" : "save3", .job = JOB, .rank = r, .world = world,
			                 .node = 1 + r / per, .tiers = "local_mem,peer_mem,local_disk", .bytes = bytes_of(r),
			                 .from = from, .to = to, .wait_peer = first };
		if (!E.agent[plan[r].node].pid)
			continue;
		ct_spawn(&E, &proc[r], &plan[r]);
	}
	for (int r = 0; r < world; r++)
		if (E.agent[plan[r].node].pid) {
			ct_finish(&E, &proc[r]);
			char said[96];
			snprintf(said, sizeof(said), "PEER_MEM: this node's %s group protects the image", scheme);
			CT_CHECK(&E, ct_log_has(&E, &plan[r], said) &&
			                 !ct_log_has(&E, &plan[r], "PEER_MEM skipped"),
			         "rank %d did not leave PEER_MEM to its group", r);
		}
}

/* Rank r relaunched on node k: restores version v (once k's agent logged
 * `after`, if not NULL), checking every byte. relaunch_start: without
 * waiting for it (ct_finish). */
static void relaunch_start(int r, int k, uint64_t v, const char *after, const char *shared)
{
	plan[r] = (ct_plan){ .tag = "relaunch", .job = JOB, .rank = r, .world = world, .node = k,
		                 .tiers = "local_mem,local_disk", .bytes = bytes_of(r), .restore = v,
		                 .restore_after_log = after ? E.agent[k].log : NULL, .restore_after_line = after,
		                 .shared_dir = shared };
	ct_spawn(&E, &proc[r], &plan[r]);
}

static void relaunch(int r, int k, uint64_t v, const char *after, const char *shared)
{
	relaunch_start(r, k, v, after, shared);
	ct_finish(&E, &proc[r]);
}

/* Whether one line of the file holds every needle (NULL-ended). */
static int line_has(const char *path, const char *const *needles)
{
	size_t len;
	char *log = t_slurp(path, &len);
	int has = 0;
	for (char *l = log, *end = NULL; l && *l && !has; l = end ? end + 1 : l + strlen(l)) {
		if ((end = strchr(l, '\n')))
			*end = '\0';
		has = 1;
		for (int i = 0; needles[i] && has; i++)
			has = strstr(l, needles[i]) != NULL;
	}
	free(log);
	return has;
}

/* Waits for needle in d's log past byte `from`. */
static void wait_from(const daemon_t *d, long from, const char *needle, int ms)
{
	uint64_t end = rt_ms() + (uint64_t)ms;
	while (!td_file_has(d->log, from, needle)) {
		if (rt_ms() > end)
			T_FAIL("%s's log has no \"%s\" after %d ms", d->name, needle, ms);
		usleep(50000);
	}
}

/* Node `lost` gone, a spare `spare` in its place: ranks r0, r0 + 1 of the
 * lost node rebuilt there from the group and restored bit-exact; then the
 * group re-protects version 2 with the spare. */
static const char *spare_fault; /* the spare's CKPT_FAULT in replace() */

static void replace(int lost, int spare, int r0, const char *const *aargs)
{
	char line[200];
	long from = td_file_size(E.coord.log);
	ct_lose_node(&E, lost);
	snprintf(line, sizeof(line), "agent n%d lost after the grace period", lost);
	wait_from(&E.coord, from, line, 10000);
	start_agent_f(spare, aargs, spare_fault);
	snprintf(line, sizeof(line), "rs group 0: n%d takes lost member %d's place (n%d)", spare, lost - 1, lost);
	wait_from(&E.coord, from, line, 10000);
	for (int r = r0; r < r0 + PER; r++) {
		snprintf(line, sizeof(line), "prefetched version 2 rank %d from its rs group", r);
		relaunch(r, spare, 2, NULL, NULL); /* restores at once: its agent holds the read until the rebuild */
		CT_CHECK(&E, td_log_has(&E.agent[spare], line), "n%d did not rebuild rank %d from the group", spare, r);
		CT_CHECK(&E, ct_log_has(&E, &plan[r], "v=2: restored from LOCAL_MEM"),
		         "rank %d did not restore the rebuilt copy from n%d's DRAM", r, spare);
	}
	/* The rebuilt shards commit LOCAL_MEM again: the group, with the spare,
	 * makes version 2's parity anew (the survivors' rows stand). */
	wait_from(&E.coord, from, "version 2: 6 ranks protected by rs group 0", 15000);
	CT_CHECK(&E, list_v(2).tiers & CKPT_TIER_PEER_MEM, "version 2 lost PEER_MEM with one member lost");
	double rb = scrape(spare, "ckpt_rs_rebuilds_total{ckpt_job=\"ecj\",result=\"ok\"}");
	double pb = scrape(spare, "ckpt_rs_parity_bytes");
	CT_CHECK(&E, rb == PER && pb > 0, "n%d's metrics: %g rebuilds, %g parity bytes", spare, rb, pb);
	printf("n%d lost: ranks %d, %d rebuilt on n%d from the two survivors, restored bit-exact; the group "
	       "re-protected version 2 with n%d\n", lost, r0, r0 + 1, spare, spare);
}

/* The agents (nagents) up and group 0 formed: versions 1 and 2 saved and
 * protected by it, and (flushed) committed at SHARED too. */
static void saved(uint32_t nagents, int flushed)
{
	ct_wait_agents(&E, nagents);
	td_wait_log(&E.coord, "rs group 0 formed", 10000);
	save(1, 2, 1);
	CT_CHECK(&E, wait_peer(2, 20000), "version 2 never committed at PEER_MEM");
	uint64_t end = rt_ms() + 30000;
	while (flushed && rt_ms() < end && !(list_v(2).tiers & CKPT_TIER_SHARED))
		usleep(100000);
	CT_CHECK(&E, !flushed || (list_v(2).tiers & CKPT_TIER_SHARED), "version 2 never committed at SHARED");
}

static int rebuild(void)
{
	ct_init(&E, "roles-ec-rebuild", NODES + 2);
	char shared[700];
	snprintf(shared, sizeof(shared), "%s/shared", E.rt.dir);
	T_ASSERT(mkdir(shared, 0700) == 0);
	char cml[32];
	snprintf(cml, sizeof(cml), "%s:9100", E.net.addr[0]);
	const char *cargs[] = { "--peer-scheme", "rs:2+1", "--agent-grace", "2s", "--metrics-listen", cml, NULL };
	ct_start_coord(&E, cargs);
	const char *aargs[] = { "--pool-size", "64M", "--peer-pool-size", "32M", "--shared-dir", shared, NULL };
	for (int k = 1; k <= NODES; k++)
		start_agent(k, aargs);
	saved(NODES, 1);
	CT_CHECK(&E, scrape(0, "ckpt_rs_versions_protected_total{ckpt_job=\"ecj\"}") == 2,
	         "ckpt_rs_versions_protected_total is not 2 after versions 1 and 2");

	/* 2. n1 lost: rebuilt on n4; 3. then n2: rebuilt on n5, from n4's
	 * rebuilt data and re-made parity (a second loss after a rebuild) */
	replace(1, 4, 0, aargs);
	replace(2, 5, PER, aargs);

	/* 4. n3 and n4 lost together: two of the group's three */
	long from = td_file_size(E.coord.log);
	ct_lose_node(&E, 3);
	ct_lose_node(&E, 4);
	wait_from(&E.coord, from, "rs group 0 lost 2 of its 3 members (n4, n3), more than 1", 10000);
	CT_CHECK(&E, !(list_v(2).tiers & CKPT_TIER_PEER_MEM), "version 2 still committed at PEER_MEM with 2 of 3 lost");
	CT_CHECK(&E, scrape(0, "ckpt_rs_unprotected_total{ckpt_job=\"ecj\"}") == 1, "ckpt_rs_unprotected_total is not 1");
	char line[160];
	snprintf(line, sizeof(line), "version 2 rank %d not rebuilt from its rs group", 2 * PER);
	relaunch(2 * PER, 5, 2, NULL, shared); /* SHARED: the rank's next tier */
	CT_CHECK(&E, td_log_has(&E.agent[5], line), "n5 does not say why rank 4 was not rebuilt");
	CT_CHECK(&E, td_log_has(&E.agent[5], "rs group 0 (rs:2+1), version 2, rank 4 on n3: rs:2+1 stripe"),
	         "the refused rebuild does not name the group, version, rank and its node");
	CT_CHECK(&E, td_log_has(&E.agent[5], "(n4) unreachable"), "the refused rebuild does not name n4, lost");
	CT_CHECK(&E, ct_log_has(&E, &plan[2 * PER], "v=2: restored from SHARED"), "rank 4 did not restore from SHARED");
	CT_CHECK(&E, scrape(5, "ckpt_rs_rebuilds_total{ckpt_job=\"ecj\",result=\"failed\"}") == 1,
	         "n5 does not count the refused rebuild");
	printf("n3, n4 lost: rank 4's rebuild refused naming group 0 and the members lost; restored from SHARED\n");
	return ct_end(&E);
}

static const char *const std_args[] = { "--pool-size", "64M", "--peer-pool-size", "32M", NULL };

/* rs:2+1 over n1..n3 (a fourth namespace for a spare), two ranks each,
 * agents with std_args: versions 1 and 2 saved and protected by the group. */
static void three_saved(const char *tag)
{
	ct_init(&E, tag, NODES + 1);
	const char *cargs[] = { "--peer-scheme", "rs:2+1", "--agent-grace", "2s", NULL };
	ct_start_coord(&E, cargs);
	for (int k = 1; k <= NODES; k++)
		start_agent(k, std_args);
	saved(NODES, 0);
}

/* rs:2+1 over n1..n3, two ranks each: versions 1 and 2 encoded, then the
 * coordinator killed (-9) and started again on its index: it has group 0
 * back (same members, same indices) and version 2's finished plan, before
 * any agent says hello. n1 lost: the spare n4 takes its place, ranks 0
 * and 1 relaunched there restore bit-exact from the shards n4 rebuilt with
 * the plan the new coordinator gave (EC_WHERE), and the group re-protects
 * version 2 with n4. */
static int restart(void)
{
	three_saved("roles-ec-restart");
	long from = td_file_size(E.coord.log);
	td_daemon_kill9(&E.coord);
	td_daemon_start(&E.coord, NULL);
	wait_from(&E.coord, from, "rs group 0 restored from the index (rs:2+1): n", 5000);
	wait_from(&E.coord, from, "version 2: rs group 0's finished encode restored from the index (rs:2+1, 6 shards", 5000);
	CT_CHECK(&E, !td_file_has(E.coord.log, from, "rs group 1 formed"), "the restarted coordinator formed a new group");
	ct_wait_agents(&E, NODES);
	CT_CHECK(&E, !td_file_has(E.coord.log, from, "formed"), "the restarted coordinator formed a group anew");
	CT_CHECK(&E, wait_peer(2, 5000), "version 2 is not committed at PEER_MEM after the restart");
	printf("coordinator killed and restarted: group 0 and version 2's plan read back from its index\n");
	replace(1, 4, 0, std_args);
	return ct_end(&E);
}

/* rs:2+1 over n1..n3, two ranks each; n1 lost, the spare n4 rebuilds
 * slowly (agent.ec_rebuild_block=delay:2500: every block it fetches
 * waits 2.5 s, some 10 s a shard, past the 8 s an agent holds a read):
 * ranks 0 and 1 relaunched there wait for the rebuild (their agent says
 * BUSY after each hold while the rebuild progresses, they ask again) and
 * restore bit-exact from LOCAL_MEM, not from the next tier, and are never
 * judged hung meanwhile. */
static int slow(void)
{
	three_saved("roles-ec-slow");
	spare_fault = "agent.ec_rebuild_block=delay:2500";
	uint64_t t0 = rt_ms();
	replace(1, 4, 0, std_args);
	CT_CHECK(&E, td_log_has(&E.agent[4], "ask again"), "n4 never told a rank to ask again while it rebuilt");
	/* Held 8 s at a time, past --hang-timeout (5 s): waiting on n4, not silent. */
	CT_CHECK(&E, !td_log_has(&E.agent[4], " hung: silent for"), "n4 judged a rank hung while it held its read");
	for (int r = 0; r < PER; r++)
		CT_CHECK(&E, ct_log_has(&E, &plan[r], "the agent is still rebuilding rank"),
		         "rank %d does not say it waited for its agent's rebuild", r);
	printf("a rebuild slower than a read's 8 s hold: ranks 0, 1 waited for it (%.1f s in all) and restored bit-exact "
	       "from LOCAL_MEM\n", (double)(rt_ms() - t0) / 1000);
	return ct_end(&E);
}

/* rs:4+2 over n1..n6, one rank each: n1 and n2 lost at once (M), both
 * their ranks rebuilt on the spare n7 from the four survivors. */
static int double_loss(void)
{
	per = 1;
	scheme = "rs:4+2";
	ct_init(&E, "roles-ec-42", 7);
	const char *cargs[] = { "--peer-scheme", "rs:4+2", "--agent-grace", "2s", NULL };
	ct_start_coord(&E, cargs);
	const char *aargs[] = { "--pool-size", "64M", "--peer-pool-size", "32M", NULL };
	for (int k = 1; k <= 6; k++)
		ct_start_agent(&E, k, aargs, NULL);
	ct_wait_agents(&E, 6);
	td_wait_log(&E.coord, "rs group 0 formed", 10000);
	save(1, 2, 1);
	CT_CHECK(&E, wait_peer(2, 20000), "version 2 never committed at PEER_MEM");
	long from = td_file_size(E.coord.log);
	ct_lose_node(&E, 1);
	ct_lose_node(&E, 2);
	wait_from(&E.coord, from, "agent n1 lost after the grace period", 10000);
	wait_from(&E.coord, from, "agent n2 lost after the grace period", 10000);
	CT_CHECK(&E, list_v(2).tiers & CKPT_TIER_PEER_MEM, "version 2 lost PEER_MEM with M = 2 members lost");
	ct_start_agent(&E, 7, aargs, NULL);
	char line[160];
	for (int r = 0; r < 2; r++) {
		snprintf(line, sizeof(line), "prefetched version 2 rank %d from its rs group", r);
		relaunch(r, 7, 2, NULL, NULL);
		CT_CHECK(&E, td_log_has(&E.agent[7], line), "n7 did not rebuild rank %d from the group", r);
		CT_CHECK(&E, ct_log_has(&E, &plan[r], "v=2: restored from LOCAL_MEM"),
		         "rank %d did not restore the rebuilt copy from n7's DRAM", r);
	}
	printf("rs:4+2: n1 and n2 lost at once, ranks 0 and 1 rebuilt on n7 from the 4 survivors, restored bit-exact\n");
	return ct_end(&E);
}

/* ---------------------------------------------------------------- matrix */

/* The daemon's test matrix for rs:K+M (K + M nodes, one rank each, shards
 * of uneven lengths that are multiples of nothing; the agents flush to a
 * --shared-dir): versions 1 and 2 protected by the group, then loss
 * patterns in turn, each with real nodes lost (every process of the
 * namespace killed, its roots deleted):
 *   a rebuild pattern: the nodes lost at once, a spare for each taking a
 *     lost member's place, the lost ranks relaunched on the spares restore
 *     version 2 at once from the shard their agent rebuilt from the
 *     survivors (every chunk checked; bit-exact), and the group re-protects
 *     version 2 with the spares;
 *   then M + 1 lost at once: the coordinator drops the group's protection,
 *     a lost rank relaunched on a survivor is refused its rebuild by name
 *     (group, version, rank, node, the members unreachable) and restores
 *     version 2 bit-exact from SHARED.
 * home[r]: the node holding rank r's DRAM copy of version 2. */
static int home[RANKS_MAX];

/* The node spare took the place of, among lost[0..nl) (0: none yet). */
static int replaced_by(int spare, const int *lost, int nl, long from, unsigned w)
{
	char line[160];
	for (int i = 0; i < nl; i++)
		for (unsigned j = 0; j < w; j++) {
			snprintf(line, sizeof(line), "rs group 0: n%d takes lost member %u's place (n%d)", spare, j, lost[i]);
			if (td_file_has(E.coord.log, from, line))
				return lost[i];
		}
	return 0;
}

/* lost[0..nl) lost at once; spare[0..nl) take their places (fault[i]:
 * spare i's CKPT_FAULT, or NULL); their ranks rebuilt there and restored
 * bit-exact; version 2 re-protected. A spare armed to damage a piece it
 * reads (agent.ec_corrupt_data, _parity) must say it passed it over. */
static void lose_rebuild(const int *lost, const int *spare, const char *const *fault, int nl,
                         const char *const *aargs)
{
	char line[200];
	uint64_t t0 = rt_ms();
	long from = td_file_size(E.coord.log);
	for (int i = 0; i < nl; i++)
		ct_lose_node(&E, lost[i]);
	for (int i = 0; i < nl; i++) {
		snprintf(line, sizeof(line), "agent n%d lost after the grace period", lost[i]);
		wait_from(&E.coord, from, line, 10000);
	}
	/* One spare at a time: the first free node in name order takes the
	 * first lost member's place, so which one it replaced is read back. */
	int rel[RANKS_MAX], nrel = 0;
	for (int i = 0; i < nl; i++) {
		start_agent_f(spare[i], aargs, fault[i]);
		uint64_t end = rt_ms() + 10000;
		int was = 0;
		while (!(was = replaced_by(spare[i], lost, nl, from, (unsigned)world)) && rt_ms() < end)
			usleep(50000);
		if (!was)
			T_FAIL("n%d took no lost member's place in rs group 0 in 10 s", spare[i]);
		for (int r = 0; r < world; r++)
			if (home[r] == was) {
				relaunch_start(r, spare[i], 2, NULL, NULL); /* restores at once: the read is held for the rebuild */
				home[r] = spare[i];
				rel[nrel++] = r;
			}
	}
	for (int i = 0; i < nrel; i++) {
		int r = rel[i];
		ct_finish(&E, &proc[r]);
		snprintf(line, sizeof(line), "prefetched version 2 rank %d from its rs group", r);
		CT_CHECK(&E, td_log_has(&E.agent[home[r]], line), "n%d did not rebuild rank %d from the group", home[r], r);
		CT_CHECK(&E, ct_log_has(&E, &plan[r], "v=2: restored from LOCAL_MEM"),
		         "rank %d did not restore the rebuilt copy from n%d's DRAM", r, home[r]);
	}
	for (int i = 0; i < nl; i++) {
		const char *kind = !fault[i] ? NULL : strstr(fault[i], "data") ? "data" : "parity";
		if (!kind)
			continue;
		/* One line of its log says the rebuild, what it passed over and why. */
		snprintf(line, sizeof(line), "(%s ", kind);
		const char *want[] = { "rebuilt from rs group 0", "passed over", line, "checksum mismatch", NULL };
		int said = line_has(E.agent[spare[i]].log, want);
		CT_CHECK(&E, said, "n%d, armed to damage a %s piece it reads, does not say it passed over the %s piece "
		         "(checksum mismatch)", spare[i], kind, kind);
		if (said)
			printf("%s: n%d passed over the %s piece it read damaged (checksum mismatch), rebuilt from the others\n",
			       scheme, spare[i], kind);
	}
	snprintf(line, sizeof(line), "version 2: %d ranks protected by rs group 0", world);
	wait_from(&E.coord, from, line, 20000);
	CT_CHECK(&E, list_v(2).tiers & CKPT_TIER_PEER_MEM, "version 2 lost PEER_MEM with %d member(s) lost", nl);
	printf("%s: n%d", scheme, lost[0]);
	for (int i = 1; i < nl; i++)
		printf(", n%d", lost[i]);
	printf(" lost at once: %d rank(s) rebuilt on spares from the survivors, restored bit-exact, version 2 "
	       "re-protected (%.1f s)\n", nrel, (double)(rt_ms() - t0) / 1000);
}

/* lost[0..nl) (nl > M) lost at once: protection dropped; the first lost
 * node's rank relaunched on `on` is refused its rebuild by name and
 * restores from SHARED. */
static void lose_too_many(const int *lost, int nl, int on, unsigned k, unsigned m, const char *shared)
{
	char line[300], names[200];
	uint64_t t0 = rt_ms();
	long from = td_file_size(E.coord.log);
	size_t o = 0;
	for (int i = 0; i < nl; i++)
		ct_lose_node(&E, lost[i]);
	names[0] = '\0';
	snprintf(line, sizeof(line), "rs group 0 lost %d of its %u members (", nl, k + m);
	wait_from(&E.coord, from, line, 15000);
	CT_CHECK(&E, !(list_v(2).tiers & CKPT_TIER_PEER_MEM), "version 2 still committed at PEER_MEM with %d of %u lost",
	         nl, k + m);
	int r = -1;
	for (int q = 0; q < world && r < 0; q++)
		if (home[q] == lost[0])
			r = q;
	T_ASSERT(r >= 0);
	long afrom = td_file_size(E.agent[on].log);
	relaunch(r, on, 2, NULL, shared);
	snprintf(line, sizeof(line), "version 2 rank %d not rebuilt from its rs group", r);
	CT_CHECK(&E, td_file_has(E.agent[on].log, afrom, line), "n%d does not say why rank %d was not rebuilt", on, r);
	snprintf(line, sizeof(line), "rs group 0 (rs:%u+%u), version 2, rank %d on n%d: rs:%u+%u stripe", k, m, r, lost[0],
	         k, m);
	CT_CHECK(&E, td_file_has(E.agent[on].log, afrom, line),
	         "the refused rebuild does not name the group, version, rank and its node n%d", lost[0]);
	/* Every stripe of the rank's slices holds a piece of each lost node
	 * but its own: those the rebuild tried are named unreachable. */
	int named = 0;
	for (int i = 1; i < nl; i++) {
		snprintf(line, sizeof(line), "(n%d) unreachable", lost[i]);
		named += td_file_has(E.agent[on].log, afrom, line);
		o += (size_t)snprintf(names + o, sizeof(names) - o, "%sn%d", i > 1 ? ", " : "", lost[i]);
	}
	CT_CHECK(&E, named > 0, "the refused rebuild names none of the lost members (%s) unreachable", names);
	CT_CHECK(&E, ct_log_has(&E, &plan[r], "v=2: restored from SHARED"), "rank %d did not restore from SHARED", r);
	printf("%s: %d lost at once (n%d, %s): rank %d's rebuild refused naming the group and the lost members; restored "
	       "bit-exact from SHARED (%.1f s)\n", scheme, nl, lost[0], names, r, (double)(rt_ms() - t0) / 1000);
}

typedef struct mpattern {
	int n;
	int lost[8], spare[8]; /* spare: none for the last, too-many pattern */
	const char *fault[8];  /* the spares' CKPT_FAULT */
} mpattern;

static int matrix(unsigned k, unsigned m, const mpattern *pat, int npat)
{
	static char sch[16];
	snprintf(sch, sizeof(sch), "rs:%u+%u", k, m);
	scheme = sch;
	per = 1;
	world = (int)(k + m);
	base_bytes = 300007;
	odd_sizes = 1;
	int nodes = world;
	for (int p = 0; p < npat; p++)
		for (int i = 0; i < pat[p].n; i++)
			nodes = pat[p].spare[i] > nodes ? pat[p].spare[i] : nodes;
	char tag[32];
	snprintf(tag, sizeof(tag), "roles-ec-%u%u", k, m);
	uint64_t t0 = rt_ms();
	ct_init(&E, tag, nodes);
	char shared[700];
	snprintf(shared, sizeof(shared), "%s/shared", E.rt.dir);
	T_ASSERT(mkdir(shared, 0700) == 0);
	const char *cargs[] = { "--peer-scheme", sch, "--agent-grace", "1s", NULL };
	ct_start_coord(&E, cargs);
	const char *aargs[] = { "--pool-size", "16M", "--peer-pool-size", "8M", "--shared-dir", shared, NULL };
	for (int i = 1; i <= world; i++) {
		ct_start_agent(&E, i, aargs, NULL);
		home[i - 1] = i;
	}
	saved((uint32_t)world, 1);
	printf("%s: %d nodes, versions 1 and 2 protected by the group and flushed (%.1f s)\n", sch, world,
	       (double)(rt_ms() - t0) / 1000);
	for (int p = 0; p < npat && !E.failures; p++) {
		if (pat[p].spare[0])
			lose_rebuild(pat[p].lost, pat[p].spare, pat[p].fault, pat[p].n, aargs);
		else
			lose_too_many(pat[p].lost, pat[p].n, pat[p].spare[1], k, m, shared);
	}
	printf("%s: %.1f s in all\n", sch, (double)(rt_ms() - t0) / 1000);
	return ct_end(&E);
}

/* The patterns: exactly M at once first (members spread over the group),
 * then fewer, a rebuilt spare among them (a loss after a rebuild), then
 * M + 1 (spare[1]: the survivor the refused rank is relaunched on). */
static int matrix_of(const char *which)
{
	if (!strcmp(which, "41")) {
		const mpattern p[] = { { 1, { 1 }, { 6 }, { 0 } }, { 1, { 6 }, { 7 }, { 0 } }, { 2, { 2, 5 }, { 0, 3 }, { 0 } } };
		return matrix(4, 1, p, 3);
	}
	if (!strcmp(which, "63")) {
		/* Pattern 2's spares each damage the first piece of one kind they
		 * read: 2 lost + 1 corrupt = M, still rebuilt. */
		const mpattern p[] = { { 3, { 1, 4, 8 }, { 10, 11, 12 }, { 0 } },
			                   { 2, { 10, 2 }, { 13, 14 }, { "agent.ec_corrupt_data=1@error", "agent.ec_corrupt_parity=1@error" } },
			                   { 4, { 3, 5, 6, 11 }, { 0, 7 }, { 0 } } };
		return matrix(6, 3, p, 3);
	}
	if (!strcmp(which, "82")) {
		const mpattern p[] = { { 2, { 3, 10 }, { 11, 12 }, { 0 } },
			                   { 1, { 11 }, { 13 }, { "agent.ec_corrupt_data=1@error" } },
			                   { 3, { 1, 12, 5 }, { 0, 7 }, { 0 } } };
		return matrix(8, 2, p, 3);
	}
	fprintf(stderr, "matrix: 41, 63 or 82\n");
	return T_EXIT_FAIL;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "matrix"))
		return matrix_of(argv[2]);
	if (argc > 1 && !strcmp(argv[1], "double"))
		return double_loss();
	if (argc > 1 && !strcmp(argv[1], "rebuild"))
		return rebuild();
	if (argc > 1 && !strcmp(argv[1], "restart"))
		return restart();
	if (argc > 1 && !strcmp(argv[1], "slow"))
		return slow();
	ct_init(&E, "roles-ec", NODES);
	const char *cargs[] = { "--peer-scheme", "rs:2+1", "--agent-grace", "2s", NULL };
	ct_start_coord(&E, cargs);
	const char *aargs[] = { "--pool-size", "64M", "--peer-pool-size", "32M", NULL };
	for (int k = 1; k <= NODES; k++)
		ct_start_agent(&E, k, aargs, "agent.ec_read=delay:400");
	ct_wait_agents(&E, NODES);
	td_wait_log(&E.coord, "rs group 0 formed", 10000);

	/* 1. two versions, protected by the group */
	save(1, 2, 1);
	CT_CHECK(&E, wait_peer(1, 20000), "version 1 never committed at PEER_MEM");
	CT_CHECK(&E, wait_peer(2, 20000), "version 2 never committed at PEER_MEM");
	for (int r = 0; r < WORLD; r++) {
		char node[CKPTD_NAME_MAX + 1];
		ct_peer_node(&E, JOB, 2, (uint32_t)r, node, sizeof(node));
		CT_CHECK(&E, !strcmp(node, "rs-group.0"), "rank %d's PEER_MEM copy of version 2 is on \"%s\", not the group",
		         r, node);
	}
	CT_CHECK(&E, td_log_has(&E.coord, "version 2: 6 ranks protected by rs group 0"),
	         "the coordinator does not say which group protects version 2");
	for (int k = 1; k <= NODES; k++) {
		CT_CHECK(&E, !td_log_has(&E.agent[k], "leased"), "n%d was leased a partner copy", k);
		td_wait_log(&E.agent[k], "parity of version 2 made", 5000);
		td_wait_log(&E.agent[k], "parity of version 1 dropped (version 2 protected)", 5000);
	}
	printf("versions 1, 2: committed at peer_mem by rs group 0 alone; version 1's parity dropped after 2's\n");

	/* A job whose ranks do not save to peer_mem, on the group's nodes: its
	 * versions commit at local_mem and are not encoded (no parity made). */
	ct_plan np = { .tag = "nopeer", .job = "ecn", .rank = 0, .world = 1, .node = 2, .tiers = "local_mem,local_disk",
		           .bytes = 200003, .from = 1, .to = 2 };
	ct_proc npp;
	ct_spawn(&E, &npp, &np);
	ct_finish(&E, &npp);
	const char *skip[] = { "ecn", "version 1: not rs-encoded: the job's ranks do not save to peer_mem", NULL };
	uint64_t end = rt_ms() + 10000;
	while (!line_has(E.coord.log, skip) && rt_ms() < end)
		usleep(50000);
	CT_CHECK(&E, line_has(E.coord.log, skip), "the coordinator does not say job ecn's version 1 is not encoded");
	const char *enc[] = { "ecn", "rs group 0 encoding", NULL };
	CT_CHECK(&E, !line_has(E.coord.log, enc), "job ecn (no peer_mem) was rs-encoded");
	for (int k = 1; k <= NODES; k++) {
		const char *made[] = { "ecn", "parity of version", NULL };
		CT_CHECK(&E, !line_has(E.agent[k].log, made), "n%d made parity for job ecn (no peer_mem)", k);
	}
	printf("job ecn (local_mem,local_disk): committed at local_mem, not rs-encoded\n");

	/* 2. n1 lost in the middle of version 3's encode */
	save(3, 3, 0);
	td_wait_log(&E.coord, "version 3: rs group 0 encoding", 10000);
	ct_lose_node(&E, 1);
	td_wait_log(&E.coord, "version 3: rs group 0 not protected", 15000);
	CT_CHECK(&E, td_log_has(&E.coord, "(n1)"), "the failed encode does not name the lost member n1");
	usleep(3000000); /* past --agent-grace: n1's copies dropped */
	ckptd_version_info v3 = list_v(3), v2 = list_v(2);
	CT_CHECK(&E, !(v3.tiers & CKPT_TIER_PEER_MEM), "version 3 committed at PEER_MEM with its encode failed");
	CT_CHECK(&E, v2.tiers & CKPT_TIER_PEER_MEM, "version 2 lost its PEER_MEM commit with one member lost of 3");
	for (int k = 2; k <= NODES; k++)
		CT_CHECK(&E, !td_log_has(&E.agent[k], "parity of version 2 dropped"),
		         "n%d dropped version 2's parity though version 3 was not protected", k);
	printf("version 3: n1 lost mid-encode, not committed at peer_mem; version 2's parity kept\n");
	return ct_end(&E);
}
