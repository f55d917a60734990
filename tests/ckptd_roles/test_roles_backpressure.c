/* A client that sends requests and never reads the replies: the daemon
 * stops reading it once its replies queue up (--out-queue), so its memory
 * stays bounded and the client's own sends block; everyone else is served
 * meanwhile, and the flooding client, once it reads, gets every reply in
 * order.
 *
 * First, the resume: with --out-queue 1 every reply throttles the client,
 * so requests that arrived together wait in the daemon's frame reader with
 * nothing left in the socket to wake it; once the reply has gone out they
 * must still be answered (they were not, and the flood below lost the last
 * few replies of a burst now and then). */
#include "helpers.h"
#include "roles_test.h"

static long rss_kib(pid_t pid)
{
	char p[64], line[256];
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	FILE *f = fopen(p, "r");
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

/* Requests sent back to back, then read: every one is answered. */
static void burst(rt_env *env)
{
	enum { N = 200 };
	daemon_t d;
	static const char *const args[] = { "--role", "both", "--pool-size", "16M", "--out-queue", "1",
	                                    "--retention-interval", "0", NULL };
	rt_daemon(env, &d, "n2", 0, args);
	rt_start(env, &d);
	ckptd_secret *js = rt_job_secret(env, "burst");
	ckptd_client *c = rt_connect(d.unixa, "burst", CKPTD_ROLE_CLI, js);
	ckptd_msg req = { .type = CKPTD_MSG_LIST_VERSIONS };
	snprintf(req.u.list_versions.job, sizeof(req.u.list_versions.job), "burst");
	for (int i = 0; i < N; i++)
		T_ASSERT(ckptd_client_send(c, &req) == 0);
	ckptd_client_set_timeout(c, 10000);
	int got = 0;
	ckptd_msg rep;
	while (got < N && ckptd_client_recv(c, &rep) == 0) {
		got += rep.type == CKPTD_MSG_VERSIONS;
		ckptd_msg_free(&rep);
	}
	if (got != N)
		T_FAIL("--out-queue 1: %d of %d requests sent back to back were answered (the rest waited in the "
		       "daemon's reader)", got, N);
	fprintf(stderr, "burst: %d requests sent back to back with --out-queue 1, all answered\n", N);
	ckptd_client_close(c);
	ckptd_secret_free(js);
	T_ASSERT(rt_stop(&d) == 0);
}

int main(void)
{
	rt_env env;
	rt_init(&env, "roles-backpressure");
	burst(&env);
	daemon_t d;
	static const char *const args[] = { "--role", "both", "--pool-size", "16M", "--out-queue", "64K", "--frame-timeout", "60s",
	                                    "--retention-interval", "0", NULL };
	rt_daemon(&env, &d, "n1", 0, args);
	rt_start(&env, &d);
	ckptd_secret *js = rt_job_secret(&env, "bp");
	ckptd_client *flood = rt_connect(d.unixa, "bp", CKPTD_ROLE_CLI, js);
	ckptd_client *other = rt_connect(d.unixa, "bp", CKPTD_ROLE_CLI, js);
	long rss0 = rss_kib(d.pid);
	T_ASSERT(rss0 > 0);

	/* Send until the daemon stops taking requests (our send blocks). */
	ckptd_client_set_timeout(flood, 300);
	ckptd_msg req = { .type = CKPTD_MSG_LIST_VERSIONS };
	snprintf(req.u.list_versions.job, sizeof(req.u.list_versions.job), "bp");
	long sent = 0;
	int r = 0;
	while (sent < 2000000 && (r = ckptd_client_send(flood, &req)) == 0)
		sent++;
	if (r != -ETIMEDOUT)
		T_FAIL("after %ld requests the send ended with %d, want a timeout (the daemon kept reading?)", sent, r);
	long rss1 = rss_kib(d.pid);
	fprintf(stderr, "flood: %ld requests sent before the daemon stopped reading; daemon RSS %ld -> %ld KiB\n", sent,
	        rss0, rss1);
#if defined(__SANITIZE_ADDRESS__)
	long bound = 256 * 1024; /* ASan keeps freed memory in quarantine */
#else
	long bound = 32 * 1024;
#endif
	if (rss1 - rss0 > bound)
		T_FAIL("the daemon grew by %ld KiB for one client's unread replies", rss1 - rss0);

	/* Everyone else is served, promptly. */
	for (int i = 0; i < 20; i++) {
		uint64_t t0 = rt_ms();
		ckptd_msg st = { .type = CKPTD_MSG_STATUS }, rep;
		T_ASSERT(ckptd_client_call(other, &st, &rep) == 0 && rep.type == CKPTD_MSG_STATUS_REPLY);
		ckptd_msg_free(&rep);
		if (rt_ms() - t0 > 1000)
			T_FAIL("STATUS took %llu ms while another client flooded", (unsigned long long)(rt_ms() - t0));
	}
	/* The flooding client's last frame may be cut (its send timed out half
	 * way): it reads what it was answered, in order, until the daemon drops
	 * it for the incomplete frame or it has them all. */
	ckptd_client_set_timeout(flood, 15000);
	long got = 0;
	for (;;) {
		ckptd_msg rep;
		if (ckptd_client_recv(flood, &rep) < 0)
			break;
		if (rep.type == CKPTD_MSG_VERSIONS)
			got++;
		else if (rep.type != CKPTD_MSG_ERROR)
			T_FAIL("reply %ld is %u", got, rep.type);
		ckptd_msg_free(&rep);
		if (got == sent)
			break;
	}
	if (got < sent - 1)
		T_FAIL("only %ld of %ld replies arrived", got, sent);
	fprintf(stderr, "flood: %ld replies read back\n", got);
	ckptd_client_close(flood);
	ckptd_msg st = { .type = CKPTD_MSG_STATUS }, rep;
	T_ASSERT(ckptd_client_call(other, &st, &rep) == 0 && rep.type == CKPTD_MSG_STATUS_REPLY);
	ckptd_msg_free(&rep);
	ckptd_client_close(other);
	ckptd_secret_free(js);
	T_ASSERT(rt_stop(&d) == 0);
	ckptd_secret_free(env.cluster);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
