/* Job scope is a property of the message table: every message type whose
 * payload carries a job, named by a session of another job, is refused
 * with DENIED before any handler runs. The types come from the protocol's
 * own table (ckptd_msg_type_at), so a message added later is covered
 * without touching this test. Sessions: a registered rank of job B over
 * the agent's Unix socket, and a CLI session of job B over TCP. Controls:
 * job B's own LIST_VERSIONS, STATUS with no job, and a cluster-scope CLI
 * session naming job A, are not refused. */
#include "roles_test.h"
#include "ckptd/samples.h"

static rt_env env;
static daemon_t d;

/* The reply's error code (0: not an ERROR); -1 when the daemon closed the
 * session without one. Either way a closed session is opened again. */
static int call_code(ckptd_client **c, const ckptd_msg *m, const char *addr, const char *job, uint32_t role,
                     const ckptd_secret *sec)
{
	ckptd_msg rep;
	int r = ckptd_client_call(*c, m, &rep);
	if (r == -EINVAL)
		T_FAIL("%s: the sample does not encode", ckptd_msg_name(m->type));
	if (r < 0) {
		ckptd_client_close(*c);
		*c = rt_connect(addr, job, role, sec);
		return -1;
	}
	int code = rep.type == CKPTD_MSG_ERROR ? (int)rep.u.error.code : 0;
	ckptd_msg_free(&rep);
	return code;
}

static ckptd_client *rank_b(const ckptd_secret *sb)
{
	return rt_rank(d.unixa, "jobB", sb, 0, 1);
}

int main(void)
{
	rt_init(&env, "roles-scope");
	static const char *const args[] = { "--role", "both", "--pool-size", "8M", NULL };
	rt_daemon(&env, &d, "node0", 1, args);
	rt_start(&env, &d);
	ckptd_secret *sb = rt_job_secret(&env, "jobB");
	ckptd_client *rank = rank_b(sb);
	ckptd_client *cli = rt_connect(d.tcp, "jobB", CKPTD_ROLE_CLI, sb);

	unsigned with_job = 0;
	for (size_t i = 0; ckptd_msg_type_at(i); i++) {
		uint16_t type = ckptd_msg_type_at(i);
		ckptd_msg m;
		t_store st;
		t_sample(&m, &st, type, 1);
		char *job = ckptd_msg_job_mut(&m);
		if (!job)
			continue;
		with_job++;
		snprintf(job, CKPTD_JOB_MAX + 1, "jobA");
		if (type == CKPTD_MSG_HELLO)
			m.u.hello.role = CKPTD_ROLE_RANK; /* an agent's HELLO names no job */
		T_ASSERT(!ckptd_msg_job_allowed(&m, "jobB") && ckptd_msg_job_allowed(&m, ""));
		int rc = call_code(&rank, &m, d.unixa, "jobB", CKPTD_ROLE_RANK, sb);
		int cc = call_code(&cli, &m, d.tcp, "jobB", CKPTD_ROLE_CLI, sb);
		/* HELLO after the handshake closes the session (STATE) whatever it
		 * names: the handshake's own message, never a handler's. */
		int want = type == CKPTD_MSG_HELLO ? CKPTD_ERR_STATE : CKPTD_ERR_DENIED;
		if (rc != want || cc != want)
			T_FAIL("%s naming job A from job B's sessions: rank got %d, CLI got %d, want %d", ckptd_msg_name(type),
			       rc, cc, want);
		if (type == CKPTD_MSG_HELLO) {
			ckptd_client_close(rank);
			ckptd_client_close(cli);
			rank = rank_b(sb);
			cli = rt_connect(d.tcp, "jobB", CKPTD_ROLE_CLI, sb);
		}
	}
	T_ASSERT(with_job >= 20); /* the table has that many job-carrying types */

	/* Controls: what job B may do is not refused for its job. */
	ckptd_msg lv = { .type = CKPTD_MSG_LIST_VERSIONS };
	snprintf(lv.u.list_versions.job, sizeof(lv.u.list_versions.job), "jobB");
	T_ASSERT(call_code(&cli, &lv, d.tcp, "jobB", CKPTD_ROLE_CLI, sb) == 0);
	T_ASSERT(call_code(&rank, &lv, d.unixa, "jobB", CKPTD_ROLE_RANK, sb) == 0);
	ckptd_msg stq = { .type = CKPTD_MSG_STATUS };
	T_ASSERT(call_code(&cli, &stq, d.tcp, "jobB", CKPTD_ROLE_CLI, sb) == 0);
	/* A cluster-scope session reaches any job. */
	ckptd_client *admin = rt_connect(d.tcp, NULL, CKPTD_ROLE_CLI, env.cluster);
	snprintf(lv.u.list_versions.job, sizeof(lv.u.list_versions.job), "jobA");
	T_ASSERT(call_code(&admin, &lv, d.tcp, NULL, CKPTD_ROLE_CLI, env.cluster) == 0);
	fprintf(stderr, "ok: %u job-carrying message types refused across jobs, before any handler\n", with_job);

	ckptd_client_close(admin);
	ckptd_client_close(cli);
	ckptd_client_close(rank);
	ckptd_secret_free(sb);
	T_ASSERT(rt_stop(&d) == 0);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
