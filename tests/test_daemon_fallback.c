/* libckpt when the ckptd agent cannot give it what it asks for:
 *
 *  - agent down at open: with daemon_required=0 (the default) the context
 *    opens embedded with a warning naming the address, saves and restores
 *    on local disk, and LOCAL_MEM waits say the tier is not available; with
 *    daemon_required=1 (also as CKPT_DAEMON_REQUIRED) the open fails,
 *    naming the address. A refused token fails the open either way.
 *  - NO_SPACE: an agent whose pool is smaller than the shard: the save
 *    commits on disk, the LOCAL_MEM wait reports -ENOSPC, nothing hangs.
 *  - host:port: a rank joins over TCP: it registers, reports its disk
 *    shard (committed at the coordinator), lists versions and restores
 *    bit-exact; LOCAL_MEM is skipped with one warning.
 *  - the agent killed mid-run: the next saves commit on disk, LOCAL_MEM
 *    waits return -ENOTCONN, nothing hangs, the context closes.
 * Public API and the installed tools only, plus starting the daemon. */
#include "daemon_test.h"

#include <ckpt.h>

#define NREG 2
static const size_t sizes[NREG] = { (2u << 20) + 12345, 1u << 20 };

static const char *job;
static const char *addr;
static uint32_t tiers;
static int required;
static const char *token;

static void fill(uint8_t **bufs, uint64_t seed)
{
	for (int i = 0; i < NREG; i++)
		t_fill(bufs[i], sizes[i], seed + (uint64_t)i);
}

static int open_ctx(const dt_env *e, uint8_t **bufs, ckpt_ctx **out)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = e->root;
	cfg.job_id = job;
	cfg.chunk_bytes = 1u << 20;
	cfg.staging_bytes = 2u << 20; /* smaller than the state: a staged save streams */
	cfg.tiers = tiers;
	cfg.daemon = addr;
	cfg.token_file = token ? token : e->tok;
	cfg.daemon_required = required;
	int r = ckpt_ctx_open(&cfg, out);
	if (r < 0)
		return r;
	dt_regions_add(*out, bufs, sizes, NREG);
	return 0;
}

/* Saves version 1 (and 2); waits for both tiers; LOCAL_MEM must fail with
 * mem_err (0: must commit). */
static void save_expect(const dt_env *e, int mem_err)
{
	uint8_t *bufs[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	ckpt_ctx *ctx;
	T_OK(open_ctx(e, bufs, &ctx));
	for (uint64_t v = 1; v <= 2; v++) {
		fill(bufs, v);
		ckpt_handle *h;
		T_OK(ckpt_save(ctx, v, 0, &h));
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, &st));
		T_ASSERT(st.committed == 1 && st.error == 0);
		if (tiers & CKPT_TIER_LOCAL_MEM) {
			T_ERR(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 10000, &st), mem_err);
			T_ASSERT(st.tier == CKPT_TIER_LOCAL_MEM && st.error == mem_err);
			T_ERR(ckpt_handle_test(h, CKPT_TIER_LOCAL_MEM, NULL), mem_err);
		}
		ckpt_handle_free(h);
	}
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
}

static void save_unavail(const dt_env *e) { save_expect(e, -CKPT_EUNAVAIL); }
static void save_nospace(const dt_env *e) { save_expect(e, -ENOSPC); }
static void save_plain(const dt_env *e) { save_expect(e, 0); }

static void restore_latest(const dt_env *e)
{
	uint8_t *bufs[NREG], *want[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	dt_bufs_alloc(want, sizes, NREG);
	fill(want, 2);
	for (int i = 0; i < NREG; i++)
		memset(bufs[i], 0x5a, sizes[i]);
	ckpt_ctx *ctx;
	T_OK(open_ctx(e, bufs, &ctx));
	uint64_t got = 0;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	T_ASSERT(got == 2);
	for (int i = 0; i < NREG; i++)
		T_ASSERT(memcmp(bufs[i], want[i], sizes[i]) == 0);
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
	dt_bufs_free(want, NREG);
}

static int expected_open_err;

static void open_fails(const dt_env *e)
{
	uint8_t *bufs[NREG] = { 0 };
	ckpt_ctx *ctx = NULL;
	T_ERR(open_ctx(e, bufs, &ctx), expected_open_err);
	T_ASSERT(ctx == NULL);
}

/* The same through the environment, as a launcher would set it. */
static void open_fails_env(const dt_env *e)
{
	(void)e;
	setenv("CKPT_DAEMON_REQUIRED", "1", 1);
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	T_ASSERT(cfg.daemon_required == 1);
	cfg.root = e->root;
	cfg.job_id = job;
	cfg.daemon = addr;
	cfg.token_file = e->tok;
	ckpt_ctx *ctx = NULL;
	T_ERR(ckpt_ctx_open(&cfg, &ctx), expected_open_err);
}

/* The agent dies under a running rank. */
static pid_t agent_pid;

static void agent_dies(const dt_env *e)
{
	uint8_t *bufs[NREG];
	dt_bufs_alloc(bufs, sizes, NREG);
	ckpt_ctx *ctx;
	T_OK(open_ctx(e, bufs, &ctx));
	fill(bufs, 1);
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 30000, NULL));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, NULL));
	ckpt_handle_free(h);
	T_ASSERT(kill(agent_pid, SIGKILL) == 0);
	T_ASSERT(td_wait_exited(agent_pid, 15000) == 0); /* gone before the next save, not during it */
	for (uint64_t v = 2; v <= 3; v++) {
		fill(bufs, v);
		T_OK(ckpt_save(ctx, v, 0, &h));
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 30000, &st));
		T_ASSERT(st.committed == 1);
		T_ERR(ckpt_handle_wait(h, CKPT_TIER_LOCAL_MEM, 30000, &st), -ENOTCONN);
		ckpt_handle_free(h);
	}
	T_OK(ckpt_ctx_close(ctx));
	dt_bufs_free(bufs, NREG);
}

static void must(int cond, dt_env *e, const char *what, const char *log)
{
	if (!cond) {
		dt_stop(e);
		T_FAIL("%s; see %s", what, log);
	}
}

int main(void)
{
	dt_env e;
	char errlog[700], down[700], bad[700], tiers_seen[128];
	dt_init(&e, "dfall");
	snprintf(errlog, sizeof(errlog), "%s/rank.err", e.dir);
	T_ASSERT(strstr(ckpt_strerror(-CKPT_EUNAVAIL), "not available"));

	/* Agent down: a socket path nobody serves, a TCP port nobody listens on. */
	snprintf(down, sizeof(down), "unix:%s/nobody.sock", e.dir);
	char tcp_down[64];
	snprintf(tcp_down, sizeof(tcp_down), "127.0.0.1:%d", dt_free_port());
	const char *downs[] = { down, tcp_down };
	for (int i = 0; i < 2; i++) {
		addr = downs[i];
		job = i ? "down-tcp" : "down-unix";
		tiers = CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK;
		required = 0;
		must(dt_child(save_unavail, &e, errlog) == 0, &e, "embedded fallback save", errlog);
		must(dt_count(errlog, addr) >= 1 && dt_count(errlog, "unreachable") == 1, &e,
		     "no warning naming the address", errlog);
		must(dt_child(restore_latest, &e, NULL) == 0, &e, "embedded fallback restore", errlog);
		required = 1;
		expected_open_err = i ? -ECONNREFUSED : -ENOENT;
		must(dt_child(open_fails, &e, errlog) == 0, &e, "daemon_required=1 opened", errlog);
		must(dt_count(errlog, addr) >= 1, &e, "the error does not name the address", errlog);
		required = 0;
		must(dt_child(open_fails_env, &e, errlog) == 0, &e, "CKPT_DAEMON_REQUIRED=1 opened", errlog);
	}

	/* A pool of 1 MiB for shards of 3 MiB; TCP for ranks elsewhere. */
	dt_start(&e, "1M", 1);

	/* A wrong token is a configuration error, not an outage. */
	snprintf(bad, sizeof(bad), "%s/bad-token", e.dir);
	int fd = open(bad, O_WRONLY | O_CREAT | O_EXCL, 0600);
	T_ASSERT(fd >= 0 && write(fd, "not-the-cluster-secret-at-all!!!", 32) == 32);
	close(fd);
	addr = e.addr;
	job = "badtok";
	token = bad;
	required = 0;
	expected_open_err = -EACCES;
	must(dt_child(open_fails, &e, errlog) == 0, &e, "a wrong token opened", errlog);
	token = NULL;

	/* NO_SPACE. */
	job = "nospace";
	tiers = CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK;
	must(dt_child(save_nospace, &e, errlog) == 0, &e, "save with a full agent pool", errlog);
	must(dt_count(errlog, "no room") == 2, &e, "no warning per save about the full pool", errlog);
	must(dt_wait_tier(&e, e.addr, job, 2, "local_disk", tiers_seen, sizeof(tiers_seen)), &e,
	     "version 2 not committed on disk at the coordinator", e.log);
	must(!strstr(tiers_seen, "local_mem"), &e, "version 2 committed in DRAM without room", e.log);
	must(dt_child(restore_latest, &e, NULL) == 0, &e, "restore after NO_SPACE", errlog);

	/* host:port. */
	addr = e.tcp;
	job = "tcp";
	tiers = CKPT_TIER_LOCAL_DISK;
	must(dt_child(save_plain, &e, errlog) == 0, &e, "save over TCP", errlog);
	must(dt_wait_tier(&e, e.tcp, job, 2, "local_disk", tiers_seen, sizeof(tiers_seen)), &e,
	     "version 2 not committed at the coordinator over TCP", e.log);
	must(dt_count(e.log, "job=tcp]: authenticated as rank") >= 1, &e, "the rank did not join over TCP", e.log);
	/* The local index alone would offer version 2 too: the daemon must
	 * have been asked, over TCP, and have agreed. */
	must(dt_child(restore_latest, &e, errlog) == 0, &e, "restore over TCP", errlog);
	must(dt_count(errlog, "cannot list versions") == 0, &e, "listing over TCP failed", errlog);
	job = "tcp-mem";
	tiers = CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK;
	must(dt_child(save_unavail, &e, errlog) == 0, &e, "LOCAL_MEM over TCP", errlog);
	must(dt_count(errlog, "LOCAL_MEM skipped") == 1, &e, "not exactly one warning about LOCAL_MEM over TCP", errlog);
	must(dt_count(errlog, "no segment from the agent") == 0, &e, "a segment was asked for over TCP", errlog);

	/* The agent killed under a running rank (one with room this time). */
	dt_stop(&e);
	dt_start(&e, "64M", 0);
	addr = e.addr;
	job = "agent-dies";
	agent_pid = e.daemon;
	must(dt_child(agent_dies, &e, errlog) == 0, &e, "saves after the agent died", errlog);
	must(dt_count(errlog, "lost the ckptd agent") == 1, &e, "no single warning about the lost agent", errlog);
	waitpid(e.daemon, NULL, 0);
	e.daemon = 0;

	t_rmrf(e.dir);
	return T_EXIT_PASS;
}
