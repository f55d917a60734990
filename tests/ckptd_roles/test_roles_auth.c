/* The agent refuses ranks that cannot prove their job: a wrong token, a
 * job's token used for another job, a session of job B asking about job
 * A, a REGISTER_RANK whose PID is not the caller's; and a CLI session of
 * job B cannot list job A at the coordinator. */
#include "roles_test.h"

static rt_env env;
static daemon_t d;

static uint32_t call_code(ckptd_client *c, const ckptd_msg *m)
{
	ckptd_msg rep;
	T_ASSERT(ckptd_client_call(c, m, &rep) == 0);
	uint32_t code = rep.type == CKPTD_MSG_ERROR ? rep.u.error.code : 0;
	ckptd_msg_free(&rep);
	return code;
}

int main(void)
{
	rt_init(&env, "roles-auth");
	static const char *const args[] = { "--role", "both", "--pool-size", "8M", NULL };
	rt_daemon(&env, &d, "node0", 1, args);
	rt_start(&env, &d);
	ckptd_secret *sa = rt_job_secret(&env, "jobA"), *sb = rt_job_secret(&env, "jobB"), *bad = NULL;
	char err[300];
	const char *junk = "this-is-not-the-cluster-token-at-all";
	T_ASSERT(ckptd_secret_parse((const uint8_t *)junk, strlen(junk), &bad, err, sizeof(err)) == 0);
	ckptd_client *c = NULL;

	/* Wrong token; another job's token; the cluster token is no rank's. */
	T_ASSERT(ckptd_client_connect(d.unixa, "jobA", CKPTD_ROLE_RANK, bad, 3000, &c, err, sizeof(err)) == -EACCES);
	T_ASSERT(ckptd_client_connect(d.unixa, "jobA", CKPTD_ROLE_RANK, sb, 3000, &c, err, sizeof(err)) == -EACCES);
	T_ASSERT(ckptd_client_connect(d.unixa, "jobA", CKPTD_ROLE_RANK, env.cluster, 3000, &c, err, sizeof(err)) == -EACCES);

	/* Job B's rank, authenticated, reaching for job A. */
	c = rt_connect(d.unixa, "jobB", CKPTD_ROLE_RANK, sb);
	ckptd_msg m = { .type = CKPTD_MSG_REGISTER_RANK };
	snprintf(m.u.register_rank.job, sizeof(m.u.register_rank.job), "jobA");
	m.u.register_rank.world_size = 2;
	m.u.register_rank.pid = (uint32_t)getpid();
	T_ASSERT(call_code(c, &m) == CKPTD_ERR_DENIED);
	/* Someone else's PID. */
	snprintf(m.u.register_rank.job, sizeof(m.u.register_rank.job), "jobB");
	m.u.register_rank.pid = (uint32_t)getppid();
	T_ASSERT(call_code(c, &m) == CKPTD_ERR_DENIED);
	/* Nothing before registering. */
	ckptd_msg sr = { .type = CKPTD_MSG_SEGMENT_REQUEST };
	snprintf(sr.u.segment_request.job, sizeof(sr.u.segment_request.job), "jobB");
	sr.u.segment_request.version = 1;
	sr.u.segment_request.mode = CKPTD_SEG_WRITE;
	sr.u.segment_request.bytes = 4096;
	T_ASSERT(call_code(c, &sr) == CKPTD_ERR_STATE);
	m.u.register_rank.pid = (uint32_t)getpid();
	T_ASSERT(call_code(c, &m) == 0);
	snprintf(sr.u.segment_request.job, sizeof(sr.u.segment_request.job), "jobA");
	T_ASSERT(call_code(c, &sr) == CKPTD_ERR_DENIED);
	ckptd_msg lv = { .type = CKPTD_MSG_LIST_VERSIONS };
	snprintf(lv.u.list_versions.job, sizeof(lv.u.list_versions.job), "jobA");
	T_ASSERT(call_code(c, &lv) == CKPTD_ERR_DENIED);
	ckptd_msg sd = { .type = CKPTD_MSG_SHARD_DONE };
	snprintf(sd.u.shard_done.job, sizeof(sd.u.shard_done.job), "jobA");
	sd.u.shard_done.version = 1;
	sd.u.shard_done.tier = CKPT_TIER_LOCAL_DISK;
	sd.u.shard_done.bytes = 1;
	sd.u.shard_done.lineage = 1;
	T_ASSERT(call_code(c, &sd) == CKPTD_ERR_DENIED);
	/* A rank cannot pass as an agent. */
	ckptd_msg ah = { .type = CKPTD_MSG_AGENT_HELLO };
	snprintf(ah.u.agent_hello.node, sizeof(ah.u.agent_hello.node), "evil");
	snprintf(ah.u.agent_hello.address, sizeof(ah.u.agent_hello.address), "127.0.0.1:1");
	ah.u.agent_hello.pool_bytes = 1;
	T_ASSERT(call_code(c, &ah) == CKPTD_ERR_DENIED);
	ckptd_client_close(c);

	/* A CLI session of job B at the coordinator cannot list job A. */
	c = rt_connect(d.tcp, "jobB", CKPTD_ROLE_CLI, sb);
	T_ASSERT(call_code(c, &lv) == CKPTD_ERR_DENIED);
	ckptd_client_close(c);
	/* With job A's secret it can. */
	c = rt_connect(d.tcp, "jobA", CKPTD_ROLE_CLI, sa);
	T_ASSERT(call_code(c, &lv) == 0);
	ckptd_client_close(c);
	fprintf(stderr, "ok: wrong token, other job's token, cross-job requests, foreign PID, rank as agent: refused\n");

	ckptd_secret_free(sa);
	ckptd_secret_free(sb);
	ckptd_secret_free(bad);
	T_ASSERT(rt_stop(&d) == 0);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
