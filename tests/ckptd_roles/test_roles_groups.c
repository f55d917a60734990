/* --peer-scheme rs:K+M on the coordinator: Reed–Solomon groups formed from
 * the agents that say hello, never two members of one failure domain,
 * kept across losses, re-protected by a replacement, and shown by STATUS,
 * `ckpt status` (text and --json) and the metrics.
 *
 *  1. bad schemes (rs:0+2, rs:4+0, rs:60+5, raid6) are refused at start
 *     with the setting named; the default is partner, with no groups;
 *  2. a coordinator with rs:2+1, a real ckptd agent (--domain,
 *     --domain-host) and eight simulated ones: seven with a peer pool and
 *     rack / power / host labels, one without a pool:
 *     every group has 3 members sharing no domain, no node is in two, the
 *     pool-less one in none, and what the domains leave over is counted
 *     (STATUS, the log naming it, ckpt status, metrics);
 *  3. a member's link drops: its group shows it down and can lose 0 more,
 *     and keeps it (no replacement within --agent-grace); after the grace a
 *     new agent that shares no domain with the others takes its place, at
 *     its member index, and the group can lose 1 again; a free node that
 *     clashes is passed over;
 *  4. two members of one group lost (more than M) and no free node to
 *     take their places: the group is dissolved. */
#include "roles_test.h"

#define NSIM 9

static rt_env env;
static daemon_t coord, real;

typedef struct sim {
	const char *node, *rack, *power, *host;
	uint64_t peer_bytes;
	ckptd_client *c;
} sim;

/* Racks r0 x3, r1 x2, r2, none; a5 and a6 share a power feed, a2 and a6 a
 * host; nopool has no peer pool (never in a group). */
static sim sims[NSIM] = {
	{ "a0", "r0", "", "", 1 << 20, NULL }, { "a1", "r0", "", "", 1 << 20, NULL },
	{ "a2", "r0", "", "h0", 1 << 20, NULL }, { "a3", "r1", "", "", 1 << 20, NULL },
	{ "a4", "r1", "", "", 1 << 20, NULL }, { "a5", "r2", "p0", "", 1 << 20, NULL },
	{ "a6", "", "p0", "h0", 1 << 20, NULL }, { "nopool", "r5", "", "", 0, NULL },
	{ "repl", "r9", "", "", 1 << 20, NULL }, /* joins later: the replacement */
};

static ckptd_client *hello(const sim *s)
{
	ckptd_agent_hello h = { 0 };
	snprintf(h.node, sizeof(h.node), "%s", s->node);
	snprintf(h.address, sizeof(h.address), "127.0.0.1:1");
	snprintf(h.domain, sizeof(h.domain), "%s", s->rack);
	snprintf(h.power, sizeof(h.power), "%s", s->power);
	snprintf(h.host, sizeof(h.host), "%s", s->host);
	h.pool_bytes = 1 << 20;
	h.peer_bytes = s->peer_bytes;
	return rt_sim_agent_hello(&env, coord.tcp, &h);
}

static void status(ckptd_msg *rep)
{
	ckptd_client *c = rt_connect(coord.tcp, NULL, CKPTD_ROLE_CLI, env.cluster);
	ckptd_msg m = { .type = CKPTD_MSG_STATUS };
	T_ASSERT(ckptd_client_call(c, &m, rep) == 0 && rep->type == CKPTD_MSG_STATUS_REPLY);
	ckptd_client_close(c);
}

static const sim *sim_of(const char *node)
{
	for (int i = 0; i < NSIM; i++)
		if (!strcmp(sims[i].node, node))
			return &sims[i];
	return NULL;
}

static int share(const char *a, const char *b)
{
	return a[0] && !strcmp(a, b);
}

/* Every group's members share no domain (the real agent "real" has rack
 * r7, host h0: it clashes with a2 and a6); no node is in two groups; the
 * pool-less node in none. Returns the groups; *in_groups the members. */
static uint32_t check_groups(const ckptd_status_reply *s, uint32_t *in_groups)
{
	T_ASSERT(!strcmp(s->scheme, "rs:2+1"));
	T_ASSERT(s->nmembers == s->ngroups * 3);
	for (uint32_t i = 0; i < s->nmembers; i++) {
		const ckptd_group_member *x = &s->members[i];
		if (!strcmp(x->node, "nopool"))
			T_FAIL("the node without a peer pool is in group %u", x->group);
		for (uint32_t j = i + 1; j < s->nmembers; j++) {
			const ckptd_group_member *y = &s->members[j];
			if (!strcmp(x->node, y->node))
				T_FAIL("%s is in groups %u and %u", x->node, x->group, y->group);
			if (x->group != y->group)
				continue;
			const sim *a = sim_of(x->node), *b = sim_of(y->node);
			static const sim realsim = { "real", "r7", "", "h0", 1, NULL };
			a = a ? a : &realsim;
			b = b ? b : &realsim;
			if (share(a->rack, b->rack) || share(a->power, b->power) || share(a->host, b->host))
				T_FAIL("group %u holds %s and %s, of one failure domain", x->group, x->node, y->node);
		}
	}
	*in_groups = s->nmembers;
	return s->ngroups;
}

static const ckptd_group_info *group_of(const ckptd_status_reply *s, const char *node, uint32_t *index)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < s->nmembers; i++) {
		if (i && s->members[i].group != s->members[i - 1].group)
			k = 0;
		if (!strcmp(s->members[i].node, node)) {
			for (uint32_t g = 0; g < s->ngroups; g++)
				if (s->groups[g].group == s->members[i].group) {
					if (index)
						*index = k;
					return &s->groups[g];
				}
		}
		k++;
	}
	return NULL;
}

static int tool(const char *args, const char *out)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "timeout 20 '%s/ckpt' status %s --daemon '%s' --token-file '%s' >'%s' 2>&1",
	         getenv("CKPT_BIN"), args, coord.tcp, env.tokpath, out);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *slurp(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	T_ASSERT(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* A daemon with these flags must refuse to start, naming --peer-scheme. */
static void refused(const char *scheme)
{
	daemon_t d;
	char log[700];
	const char *args[] = { "--role", "coordinator", "--peer-scheme", scheme, NULL };
	rt_daemon(&env, &d, "bad", 1, args);
	snprintf(log, sizeof(log), "%s/bad-%s.log", env.dir, scheme);
	const char *argv[TD_MAX_ARGS];
	int n = 0;
	argv[n++] = td_ckptd_exe();
	for (int i = 0; d.args[i]; i++)
		argv[n++] = d.args[i];
	argv[n] = NULL;
	pid_t pid = td_spawn(argv, log);
	int st;
	T_ASSERT(td_wait_pid(pid, 10000, &st) == 0);
	if (td_status_code(st) == 0 || !td_file_has(log, 0, "--peer-scheme"))
		T_FAIL("--peer-scheme %s: exit %d, and the log must name the setting", scheme, td_status_code(st));
	printf("refused: --peer-scheme %s (exit %d)\n", scheme, td_status_code(st));
}

int main(void)
{
	rt_init(&env, "roles-groups");
	/* 1. bad schemes; the default */
	refused("rs:0+2");
	refused("rs:4+0");
	refused("rs:60+5");
	refused("raid6");
	{
		static const char *const pargs[] = { "--role", "coordinator", NULL };
		rt_daemon(&env, &coord, "plain", 1, pargs);
		rt_start(&env, &coord);
		ckptd_msg rep;
		status(&rep);
		T_ASSERT(!strcmp(rep.u.status_reply.scheme, "partner") && rep.u.status_reply.ngroups == 0);
		ckptd_msg_free(&rep);
		rt_stop(&coord);
	}

	/* 2. groups formed */
	char ml[64];
	snprintf(ml, sizeof(ml), "127.0.0.1:%d", td_free_port("127.0.0.1"));
	const char *cargs[] = { "--role", "coordinator", "--peer-scheme", "rs:2+1", "--agent-grace", "1s",
		                    "--heartbeat-timeout", "0", "--metrics-listen", ml, NULL };
	rt_daemon(&env, &coord, "coord", 1, cargs);
	rt_start(&env, &coord);
	/* Groups form as nodes arrive (they are kept once formed): real, then
	 * a0 .. a6, nopool. With these domains that makes {a0 a3 real} and
	 * {a1 a4 a5}, and leaves a2 (r0, h0) and a6 (p0, h0) free. */
	const char *aargs[] = { "--role", "agent", "--coordinator", coord.tcp, "--pool-size", "8M", "--peer-pool-size", "4M",
		                    "--domain", "r7", "--domain-host", "h0", "--heartbeat-timeout", "0", NULL };
	rt_daemon(&env, &real, "real", 1, aargs);
	rt_start(&env, &real);
	rt_wait_agents(&env, coord.tcp, 1, 10000);
	for (int i = 0; i < NSIM - 1; i++)
		sims[i].c = hello(&sims[i]);
	rt_wait_agents(&env, coord.tcp, NSIM, 10000);
	ckptd_msg rep;
	status(&rep);
	uint32_t members;
	uint32_t ng = check_groups(&rep.u.status_reply, &members);
	T_ASSERT(ng == 2 && members == 6 && rep.u.status_reply.ungrouped == 2);
	for (uint32_t g = 0; g < ng; g++)
		T_ASSERT(rep.u.status_reply.groups[g].lost == 0 && rep.u.status_reply.groups[g].losses_left == 1);
	printf("rs:2+1 over 8 eligible nodes: %u groups, %u nodes in none\n", ng, rep.u.status_reply.ungrouped);
	T_ASSERT(group_of(&rep.u.status_reply, "real", NULL) && !group_of(&rep.u.status_reply, "a2", NULL) &&
	         !group_of(&rep.u.status_reply, "a6", NULL));
	td_wait_log(&coord, "2 nodes in no group", 5000);
	char out[700], mfile[700];
	snprintf(out, sizeof(out), "%s/status.txt", env.dir);
	T_ASSERT(tool("", out) == 0);
	char *txt = slurp(out);
	if (!strstr(txt, "peer scheme: rs:2+1, 2 groups, 2 nodes in none") || !strstr(txt, "can lose 1 more"))
		T_FAIL("ckpt status does not show the groups:\n%s", txt);
	T_ASSERT(tool("--json", out) == 0);
	txt = slurp(out);
	if (!strstr(txt, "\"peer_scheme\": \"rs:2+1\"") || !strstr(txt, "\"ungrouped_nodes\": 2") ||
	    !strstr(txt, "\"losses_left\": 1, \"members\": [{\"node\": "))
		T_FAIL("ckpt status --json does not show the groups:\n%s", txt);
	snprintf(mfile, sizeof(mfile), "%s/metrics.txt", env.dir);
	char cmd[1600];
	snprintf(cmd, sizeof(cmd), "curl -s --max-time 5 http://%s/metrics >'%s'", ml, mfile);
	T_ASSERT(system(cmd) == 0);
	txt = slurp(mfile);
	if (!strstr(txt, "ckpt_peer_groups 2") || !strstr(txt, "ckpt_peer_ungrouped_nodes 2") ||
	    !strstr(txt, "ckpt_peer_group_losses_left{group=\"0\"} 1"))
		T_FAIL("the metrics do not show the groups:\n%s", txt);

	/* 3. a member lost, then replaced. a3 (rack r1) is in a group: which. */
	const ckptd_group_info *gi = group_of(&rep.u.status_reply, "a3", NULL);
	T_ASSERT(gi);
	uint32_t gid = gi->group, idx = 0;
	group_of(&rep.u.status_reply, "a3", &idx);
	ckptd_msg_free(&rep);
	ckptd_client_close(sims[3].c);
	sims[3].c = NULL;
	uint64_t end = rt_ms() + 5000;
	for (;;) {
		status(&rep);
		gi = group_of(&rep.u.status_reply, "a3", NULL);
		T_ASSERT(gi && gi->group == gid); /* kept while down */
		if (gi->lost == 1)
			break;
		ckptd_msg_free(&rep);
		T_ASSERT(rt_ms() < end);
		usleep(20000);
	}
	T_ASSERT(gi->losses_left == 0);
	ckptd_msg_free(&rep);
	T_ASSERT(tool("", out) == 0);
	txt = slurp(out);
	if (!strstr(txt, "can lose 0 more") || !strstr(txt, "a3(down)"))
		T_FAIL("ckpt status does not show the loss:\n%s", txt);
	/* After the grace: both free nodes clash with a3's group (a2 with a0's
	 * rack, a6 with real's host: the real agent's --domain-host reached
	 * the coordinator), so a3 stays, lost; "repl" (rack r9) fits, and
	 * takes its place. */
	usleep(1500000);
	status(&rep);
	gi = group_of(&rep.u.status_reply, "a3", NULL);
	if (gi) /* no free node fitted: still the lost member */
		T_ASSERT(gi->group == gid && gi->lost == 1);
	else
		T_FAIL("a3 was replaced by a free node sharing a domain with its group, or its group vanished");
	ckptd_msg_free(&rep);
	sims[8].c = hello(&sims[8]);
	status(&rep);
	uint32_t ridx = 99;
	gi = group_of(&rep.u.status_reply, "repl", &ridx);
	if (!gi || gi->group != gid || ridx != idx || gi->lost != 0 || gi->losses_left != 1)
		T_FAIL("the replacement did not take a3's place in group %u at index %u", gid, idx);
	T_ASSERT(!group_of(&rep.u.status_reply, "a3", NULL));
	check_groups(&rep.u.status_reply, &members);
	printf("group %u: a3 lost, kept as down until --agent-grace, then replaced by repl at index %u\n", gid, idx);
	td_wait_log(&coord, "takes lost member", 2000);

	/* 4. two members of the other group lost (more than M), with no free
	 * node left to take their places (a2, a6 gone first): dissolved. */
	ckptd_client_close(sims[2].c);
	ckptd_client_close(sims[6].c);
	sims[2].c = sims[6].c = NULL;
	const ckptd_group_info *other = NULL;
	for (uint32_t g = 0; g < rep.u.status_reply.ngroups; g++)
		if (rep.u.status_reply.groups[g].group != gid)
			other = &rep.u.status_reply.groups[g];
	T_ASSERT(other);
	uint32_t oid = other->group;
	int dropped = 0;
	for (uint32_t i = 0; i < rep.u.status_reply.nmembers && dropped < 2; i++) {
		const ckptd_group_member *x = &rep.u.status_reply.members[i];
		if (x->group != oid)
			continue;
		if (!strcmp(x->node, "real")) {
			rt_stop(&real);
			dropped++;
			continue;
		}
		for (int s = 0; s < NSIM; s++)
			if (sims[s].c && !strcmp(sims[s].node, x->node)) {
				ckptd_client_close(sims[s].c);
				sims[s].c = NULL;
				dropped++;
			}
	}
	ckptd_msg_free(&rep);
	T_ASSERT(dropped == 2);
	td_wait_log(&coord, "dissolved", 8000);
	status(&rep);
	for (uint32_t g = 0; g < rep.u.status_reply.ngroups; g++)
		T_ASSERT(rep.u.status_reply.groups[g].group != oid);
	printf("group %u lost 2 members (M = 1): dissolved; %u group(s) left\n", oid, rep.u.status_reply.ngroups);
	ckptd_msg_free(&rep);
	for (int i = 0; i < NSIM; i++)
		ckptd_client_close(sims[i].c);
	rt_stop(&coord);
	printf("ok\n");
	return T_EXIT_PASS;
}
