/* An agent dies (kill -9): within the grace period nothing changes; after
 * it the coordinator reports that node's copies gone per tier (LOCAL_MEM
 * and, as the node's disk is unreachable, LOCAL_DISK). When the agent comes
 * back on the same root its DRAM is gone but its disk copies are not: its
 * inventory brings the version back COMMITTED at LOCAL_DISK, and only
 * there. */
#include "roles_test.h"

#define JOB "lossy"
#define WORLD 6
#define V 7
#define BYTES 4096

static rt_env env;
static daemon_t coord, agent[3];

static ckptd_version_info list_v(ckptd_client *cli)
{
	ckptd_version_info vi;
	T_ASSERT(rt_list_find(cli, JOB, V, &vi));
	return vi;
}

int main(void)
{
	rt_init(&env, "roles-loss");
	static const char *const cargs[] = { "--role", "coordinator", "--agent-grace", "1500ms", NULL };
	rt_daemon(&env, &coord, "coord", 1, cargs);
	rt_start(&env, &coord);
	const char *aargs[] = { "--role", "agent", "--coordinator", coord.tcp, "--pool-size", "8M", NULL };
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "node%d", i);
		rt_daemon(&env, &agent[i], name, 0, aargs);
		rt_start(&env, &agent[i]);
	}
	rt_wait_agents(&env, coord.tcp, 3, 10000);

	/* Six ranks (one process, one connection each): DRAM and disk copies. */
	ckptd_secret *js = rt_job_secret(&env, JOB);
	ckptd_client *rk[WORLD];
	for (int r = 0; r < WORLD; r++) {
		rk[r] = rt_rank(agent[r / 2].unixa, JOB, js, (uint32_t)r, WORLD);
		T_ASSERT(rt_save(rk[r], JOB, V, (uint32_t)r, WORLD, BYTES) == 0);
		rt_shard_done(rk[r], JOB, V, (uint32_t)r, WORLD, CKPT_TIER_LOCAL_DISK, BYTES);
	}
	for (int r = 0; r < WORLD; r++)
		T_ASSERT(rt_wait_notice(rk[r], V, 10000));
	ckptd_client *cli = rt_connect(coord.tcp, JOB, CKPTD_ROLE_CLI, js);
	ckptd_version_info vi = list_v(cli);
	T_ASSERT(vi.state == CKPT_STATE_COMMITTED && vi.tiers == (CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK));

	uint64_t killed = rt_ms();
	rt_kill9(&agent[2]);
	usleep(300000);
	vi = list_v(cli);
	/* The grace period starts when the coordinator sees the link drop, after
	 * the kill: an answer within 1.5 s of the kill is within it. */
	if (rt_ms() - killed < 1500)
		T_ASSERT(vi.state == CKPT_STATE_COMMITTED && vi.tiers == (CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK));
	else
		fprintf(stderr, "note: the machine was too slow to look within the grace period (%llu ms)\n",
		        (unsigned long long)(rt_ms() - killed));
	uint64_t end = rt_ms() + 10000;
	while (rt_ms() < end && (vi = list_v(cli)).shards_done == WORLD)
		usleep(100000);
	T_ASSERT(vi.shards_done == WORLD - 2);
	T_ASSERT(vi.tiers == 0 && vi.state != CKPT_STATE_COMMITTED);
	/* STATUS shows the node down. */
	ckptd_client *adm = rt_connect(coord.tcp, NULL, CKPTD_ROLE_CLI, env.cluster);
	ckptd_msg m = { .type = CKPTD_MSG_STATUS }, rep;
	T_ASSERT(ckptd_client_call(adm, &m, &rep) == 0 && rep.type == CKPTD_MSG_STATUS_REPLY);
	int down = 0, up = 0;
	for (uint32_t i = 0; i < rep.u.status_reply.count; i++) {
		const ckptd_agent_info *a = &rep.u.status_reply.entries[i];
		if (!strcmp(a->node, "node2"))
			down = a->state == CKPTD_AGENT_DOWN;
		else
			up += a->state == CKPTD_AGENT_UP;
	}
	ckptd_msg_free(&rep);
	T_ASSERT(down && up == 2);
	fprintf(stderr, "ok: node2 lost after the grace period: its LOCAL_MEM and LOCAL_DISK copies gone, version no longer committed\n");

	/* Back on the same root: the disk copies return, DRAM ones do not. */
	rt_start(&env, &agent[2]);
	end = rt_ms() + 10000;
	while (rt_ms() < end && (vi = list_v(cli)).shards_done != WORLD)
		usleep(100000);
	T_ASSERT(vi.shards_done == WORLD && vi.state == CKPT_STATE_COMMITTED && vi.tiers == CKPT_TIER_LOCAL_DISK);
	fprintf(stderr, "ok: node2 back: COMMITTED at LOCAL_DISK only (its DRAM did not survive)\n");

	for (int r = 0; r < WORLD; r++)
		ckptd_client_close(rk[r]);
	ckptd_client_close(cli);
	ckptd_secret_free(js);
	ckptd_client_close(adm);
	for (int i = 0; i < 3; i++)
		T_ASSERT(rt_stop(&agent[i]) == 0);
	T_ASSERT(rt_stop(&coord) == 0);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
