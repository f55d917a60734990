/* The rs:K+M encode with real agents in the network-namespace cluster
 * (cluster_test.h): a coordinator with --peer-scheme rs:2+1, agents n1..n3
 * with peer pools, two libckpt ranks per node (tiers local_mem and
 * local_disk: the ranks make no partner copy; the group protects them).
 * Every agent reads its data slices with a delay (agent.ec_read=delay) so
 * that an encode lasts long enough to lose a node in the middle of it.
 *
 *  1. versions 1 and 2 commit at PEER_MEM only through the group: every
 *     rank's PEER_MEM copy is on the pseudo-node rs-group.<id> (ckpt show's
 *     word for "protected by the group"), no node got a partner copy, and
 *     each member dropped version 1's parity once version 2 committed
 *     there (not before: version 1 committed at PEER_MEM first);
 *  2. version 3: n1 is lost while the others read from it; their EC_DONE
 *     names n1, version 3 never commits at PEER_MEM, and version 2's parity
 *     stays on n2 and n3 (its PEER_MEM commit survives one lost member). */
#include "cluster_test.h"

#define JOB "ecj"
#define NODES 3
#define PER 2
#define WORLD (NODES * PER)

static ct_env E;
static ct_plan plan[WORLD];
static ct_proc proc[WORLD];

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

static void save(uint64_t from, uint64_t to, int first)
{
	for (int r = 0; r < WORLD; r++) {
		plan[r] = (ct_plan){ .tag = first ? "save" : "save3", .job = JOB, .rank = r, .world = WORLD,
			                 .node = 1 + r / PER, .tiers = "local_mem,local_disk", .bytes = (1u << 20) + 4099u * r,
			                 .from = from, .to = to };
		if (!E.agent[plan[r].node].pid)
			continue;
		ct_spawn(&E, &proc[r], &plan[r]);
	}
	for (int r = 0; r < WORLD; r++)
		if (E.agent[plan[r].node].pid)
			ct_finish(&E, &proc[r]);
}

int main(void)
{
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
