/* Preemption notices end to end: a coordinator, three node agents n1..n3 on
 * 127.0.0.1..3 (node and peer pools), and six libckpt ranks (two per node)
 * running a training loop that calls ckpt_step every step, saves when it
 * says SAVE (every 20 steps, and the emergency step) and leaves when it
 * says EXIT. One scenario per run (argv[1]), each a CTest test:
 *
 *   aws | gcp | azure  n2's agent polls a fake metadata service (started by
 *       the test on loopback) for that cloud; the test arms the notice.
 *   sigterm  SIGTERM to rank 3 (on n2): its signal handler raises the notice.
 *   short    `ckpt preempt --node n2 --deadline 1500ms`: no tier can hold a
 *       version in time; the ranks leave at the deadline without one.
 *   during   the notice comes while an interval save is still copying to its
 *       partners (slowed by a fault point).
 *   two      n2 and n3 noticed at once (two `ckpt preempt`).
 *   shared   no peer pools: the agents flush to one --shared-dir, throttled
 *       far below the checkpoint rate; with 15 s of notice the emergency
 *       version must go to SHARED ahead of the backlog and the throttle, and
 *       the noticed node's ranks restore from it elsewhere.
 *   shared_s3  the same with the SHARED tier on an object store
 *       (--shared-dir s3://BUCKET/pre/ on the CTest run's Ceph gateway,
 *       tests/s3): the emergency version's objects and marker are in the
 *       bucket before the deadline.
 *
 * Checked each time: every rank leaves through EXIT; every rank that saved
 * an emergency version saved the same step S; S is COMMITTED at peer_mem
 * before the deadline, and no noticed node holds a partner copy of it; the
 * last version committed before the notice is still committed; and six new
 * rank processes restore the newest committed version bit-exact. In
 * `short`, no rank saved, and the newest committed version is from before
 * the notice. Exit 0 / 1 / 77 (no python3 or no tcp;ofi_rxm provider). */
#include "roles_test.h"
#include "rank_proc.h"
#include "train_loop.h"
#include "s3gw_helper.h"

#include <ckpt.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define JOB "pre"
#define WORLD 6
#define NODES 3
#define STEP_MS 50
#define READY_STEP 45 /* interval saves 20 and 40 are in by then */
#define REGION (256u << 10)

static rt_env env;
static daemon_t coord, agent[NODES];
static char ckroot[NODES][600], scen[16], shared_dir[600];
static int failures;
static pid_t driver, fake_pid;
static int fake_port;
static s3gw gw;            /* shared_s3: the gateway */
static char bucket[64];

/* shared or shared_s3: the SHARED tier without peer pools. */
static int is_shared(void)
{
	return !strncmp(scen, "shared", 6);
}

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)

static void fill(uint8_t *b, int rank, uint64_t step)
{
	t_fill(b, REGION, (uint64_t)rank * 1000003u + step * 7919u + 1);
}

/* ---------------------------------------------------------------- fake metadata */

static void fake_start(void)
{
	char path[700];
	int fds[2];
	snprintf(path, sizeof(path), "%s/../tests/notice/fake_metadata.py", getenv("CKPT_BIN"));
	if (access(path, R_OK) != 0)
		snprintf(path, sizeof(path), "%s", CKPT_SOURCE_DIR "/tests/notice/fake_metadata.py");
	T_ASSERT(pipe(fds) == 0);
	fake_pid = fork();
	T_ASSERT(fake_pid >= 0);
	if (fake_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fds[1], 1);
		close(fds[0]);
		execlp("python3", "python3", path, "--host", "127.0.0.1", "--port", "0", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char line[32] = "";
	size_t n = 0;
	while (n + 1 < sizeof(line) && read(fds[0], line + n, 1) == 1 && line[n] != '\n')
		n++;
	close(fds[0]);
	fake_port = atoi(line);
	T_ASSERT(fake_port > 0);
}

/* POST /_control with a JSON body; returns the HTTP status. */
static int fake_ctl(const char *json)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)fake_port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_ASSERT(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	char req[1024];
	int len = snprintf(req, sizeof(req),
	                   "POST /_control HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
	                   "Content-Length: %zu\r\n\r\n%s", strlen(json), json);
	T_ASSERT(write(fd, req, (size_t)len) == len);
	char rep[64] = "";
	ssize_t r = read(fd, rep, sizeof(rep) - 1);
	close(fd);
	return r > 12 ? atoi(rep + 9) : -1;
}

/* ---------------------------------------------------------------- ranks */

static void rank_env(const char *tag, int rank, int node)
{
	int shared = is_shared();
	rp_rank r = { env.dir, tag, JOB, rank, WORLD, 0, ckroot[node], agent[node].unixa,
	              shared ? "local_mem,local_disk" : "local_mem,peer_mem,local_disk", env.tokpath, 150 };
	rp_child_setup(driver, &r);
	if (shared)
		setenv("CKPT_SHARED_DIR", shared_dir, 1);
	tl_env();
	if (!strcmp(scen, "during") && rank == 0)
		setenv("CKPT_FAULT", "peer.mid_write=delay:1500", 1);
}

typedef tl_proc proc;

static proc spawn(const char *tag, int rank, int node, uint64_t restore_want)
{
	int rep;
	pid_t pid = rp_fork(&rep);
	if (pid == 0) {
		rank_env(tag, rank, node);
		if (restore_want)
			tl_restore(rank, restore_want, REGION, fill);
		else
			tl_train(rank, rep, REGION, STEP_MS, 20, READY_STEP, fill);
		exit(T_EXIT_PASS);
	}
	return (proc){ pid, rep };
}

/* Reads report bytes until `want` (returns 1), or timeout / end (0). The
 * 'S' bytes seen are counted into *saves. */
static int wait_for(proc *p, char want, int timeout_ms, int *saves)
{
	uint64_t end = td_ms() + (uint64_t)timeout_ms;
	while (td_ms() < end) {
		char c = rp_get(p->rep, (int)(end - td_ms()));
		if (!c)
			return 0;
		if (c == 'S' && saves)
			(*saves)++;
		if (c == want)
			return 1;
	}
	return 0;
}

/* ---------------------------------------------------------------- the coordinator */

static ckptd_client *coord_cli(void)
{
	ckptd_secret *js = rt_job_secret(&env, JOB);
	ckptd_client *c = rt_connect(coord.tcp, JOB, CKPTD_ROLE_CLI, js);
	ckptd_secret_free(js);
	return c;
}

/* The newest version COMMITTED before `below` (0: any) at some tier (at a
 * tier of `need` when not 0), and its tiers. */
static uint64_t newest_committed(uint64_t below, uint32_t need, uint32_t *tiers)
{
	ckptd_client *c = coord_cli();
	ckptd_msg m = { .type = CKPTD_MSG_LIST_VERSIONS }, rep;
	snprintf(m.u.list_versions.job, sizeof(m.u.list_versions.job), "%s", JOB);
	uint64_t best = 0;
	if (ckptd_client_call(c, &m, &rep) == 0 && rep.type == CKPTD_MSG_VERSIONS) {
		for (uint32_t i = 0; i < rep.u.versions.count; i++) {
			const ckptd_version_info *v = &rep.u.versions.entries[i];
			if (v->state == CKPT_STATE_COMMITTED && (!below || v->version < below) && v->version > best &&
			    (!need || (v->tiers & need))) {
				best = v->version;
				if (tiers)
					*tiers = v->tiers;
			}
		}
	}
	ckptd_msg_free(&rep);
	ckptd_client_close(c);
	return best;
}

/* The nodes holding partner copies of version v of `rank` (-1: any rank):
 * a mask over agent[]. */
static int peer_nodes(uint64_t v, int rank)
{
	ckptd_client *c = coord_cli();
	ckptd_msg m = { .type = CKPTD_MSG_SHOW_VERSION }, rep;
	snprintf(m.u.show_version.job, sizeof(m.u.show_version.job), "%s", JOB);
	m.u.show_version.version = v;
	int mask = 0;
	if (ckptd_client_call(c, &m, &rep) == 0 && rep.type == CKPTD_MSG_VERSION_DETAIL)
		for (uint32_t i = 0; i < rep.u.version_detail.count; i++) {
			const ckptd_copy_info *e = &rep.u.version_detail.entries[i];
			for (int k = 0; k < NODES; k++)
				if (e->tier == CKPT_TIER_PEER_MEM && (rank < 0 || e->rank == (uint32_t)rank) &&
				    !strcmp(e->node, agent[k].name))
					mask |= 1 << k;
		}
	ckptd_msg_free(&rep);
	ckptd_client_close(c);
	return mask;
}

static void cli_preempt(const char *node, const char *deadline)
{
	char cmd[2000];
	snprintf(cmd, sizeof(cmd), "'%s/ckpt' preempt --daemon %s --token-file '%s' --job %s --node %s --deadline %s "
	         ">>'%s/preempt-cli.log' 2>&1", getenv("CKPT_BIN"), coord.tcp, env.tokpath, JOB, node, deadline, env.dir);
	CHECK(system(cmd) == 0, "ckpt preempt --node %s failed (see preempt-cli.log)", node);
}

/* ---------------------------------------------------------------- the run */

static void start_daemons(void)
{
	static const char *const cargs[] = { "--role", "coordinator", "--agent-grace", "300s", NULL };
	rt_daemon_on(&env, &coord, "coord", "127.0.0.1", cargs);
	rt_start(&env, &coord);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", fake_port);
	for (int k = 0; k < NODES; k++) {
		char name[16], host[32];
		snprintf(name, sizeof(name), "n%d", k + 1);
		snprintf(host, sizeof(host), "127.0.0.%d", k + 1);
		const char *aargs[16] = { "--role", "agent", "--coordinator", coord.tcp, "--pool-size", "32M",
		                          "--peer-pool-size", "32M", NULL };
		if (is_shared()) { /* far below the checkpoint rate: a backlog builds */
			aargs[6] = "--shared-dir";
			aargs[7] = shared_dir;
			aargs[8] = "--shared-rate";
			aargs[9] = "64K";
		}
		if (k == 1 && fake_port) {
			aargs[8] = !strcmp(scen, "aws") ? "--notice-aws" : !strcmp(scen, "gcp") ? "--notice-gcp" : "--notice-azure";
			aargs[9] = url;
			aargs[10] = "--notice-interval";
			aargs[11] = "200ms";
			aargs[12] = NULL;
		}
		rt_daemon_on(&env, &agent[k], name, host, aargs);
		rt_start(&env, &agent[k]);
		snprintf(ckroot[k], sizeof(ckroot[k]), "%s/%s.ckpt", env.dir, name);
	}
	rt_wait_agents(&env, coord.tcp, NODES, 10000);
}

/* Raises the scenario's notice; returns its deadline (wall ns) and the
 * noticed nodes (mask over agent[]). */
static uint64_t raise_notice(proc *p, int *noticed)
{
	*noticed = 1 << 1;
	uint64_t now = t_wall_ns();
	if (!strcmp(scen, "aws")) {
		CHECK(fake_ctl("{\"aws\": \"terminate\", \"aws_in\": 30}") == 200, "fake metadata: arming AWS");
		return now + 30000000000ull;
	}
	if (!strcmp(scen, "gcp")) {
		CHECK(fake_ctl("{\"gcp\": \"preempted\"}") == 200, "fake metadata: arming GCP");
		return now + 30000000000ull; /* GCP gives 30 s */
	}
	if (!strcmp(scen, "azure")) {
		CHECK(fake_ctl("{\"azure\": \"preempt\", \"azure_in\": 30}") == 200, "fake metadata: arming Azure");
		return now + 30000000000ull;
	}
	if (!strcmp(scen, "sigterm")) {
		kill(p[3].pid, SIGTERM);
		return now + 30000000000ull; /* the ranks' default grace */
	}
	if (!strcmp(scen, "short")) {
		cli_preempt("n2", "1500ms");
		return now + 1500000000ull;
	}
	if (!strcmp(scen, "two")) {
		*noticed |= 1 << 2;
		cli_preempt("n2", "40s");
		cli_preempt("n3", "30s");
		return now + 30000000000ull;
	}
	if (is_shared()) { /* n2's two files take 16 s at the throttle's rate */
		cli_preempt("n2", "15s");
		return now + 15000000000ull;
	}
	cli_preempt("n2", "30s"); /* during */
	return now + 30000000000ull;
}

static void run(void)
{
	proc p[WORLD];
	for (int r = 0; r < WORLD; r++)
		p[r] = spawn("train", r, r / 2, 0);
	for (int r = 0; r < WORLD; r++)
		if (!wait_for(&p[r], 'R', 60000, NULL))
			T_FAIL("rank %d did not reach step %d", r, READY_STEP);
	if (!strcmp(scen, "during")) /* the next interval save is on its way to the partners */
		CHECK(wait_for(&p[0], 'S', 10000, NULL), "rank 0 did not start an interval save");
	/* Version 40 was saved at step 40; its commit may lag on a loaded machine. */
	uint64_t before = newest_committed(0, 0, NULL);
	for (uint64_t end = td_ms() + 10000; before < 40 && td_ms() < end; before = newest_committed(0, 0, NULL))
		usleep(50000);
	CHECK(before >= 40, "version %llu is the newest committed before the notice; want 40 or later",
	      (unsigned long long)before);
	int noticed;
	uint64_t deadline = raise_notice(p, &noticed);
	uint64_t emergency[WORLD], last[WORLD], exit_ns[WORLD];
	for (int r = 0; r < WORLD; r++) {
		char line[64] = "";
		size_t n = 0;
		char c;
		while (n + 1 < sizeof(line) && (c = rp_get(p[r].rep, 60000)) && c != '\n')
			if (c != 'S' && c != 'R')
				line[n++] = c;
		exit_ns[r] = t_wall_ns();
		unsigned long long e = 0, l = 0;
		CHECK(sscanf(line, "E %llu %llu", &e, &l) == 2, "rank %d did not leave through EXIT (got '%s')", r, line);
		emergency[r] = e;
		last[r] = l;
		int st;
		CHECK(td_wait_pid(p[r].pid, 30000, &st) == 0 && td_status_code(st) == 0, "rank %d exited %d", r,
		      td_status_code(st));
		close(p[r].rep);
	}
	int short_ = !strcmp(scen, "short");
	uint64_t S = short_ ? emergency[0] : last[0];
	int same = 1;
	for (int r = 0; r < WORLD; r++)
		same &= (short_ ? emergency[r] : last[r]) == S;
	if (short_) {
		CHECK(S == 0 && same, "a deadline too short for any tier: no rank should save (rank 0 saved %llu)",
		      (unsigned long long)S);
		for (int r = 0; r < WORLD; r++)
			CHECK(exit_ns[r] <= deadline + 3000000000ull, "rank %d left %.1f s after the deadline", r,
			      (exit_ns[r] - deadline) / 1e9);
	} else {
		CHECK(S > before && same, "the ranks' last saves differ or are not after the notice (rank 0: %llu, "
		      "committed before: %llu)", (unsigned long long)S, (unsigned long long)before);
		for (int r = 0; r < WORLD; r++)
			CHECK(exit_ns[r] < deadline, "rank %d left %.1f s after the deadline", r, (exit_ns[r] - deadline) / 1e9);
		uint32_t tiers = 0;
		uint64_t newest = newest_committed(0, 0, &tiers);
		CHECK(newest == S, "the newest committed version is %llu at tiers 0x%x; want the emergency step %llu",
		      (unsigned long long)newest, tiers, (unsigned long long)S);
	}
	if (!short_ && is_shared()) {
		uint32_t tiers = 0;
		newest_committed(S + 1, 0, &tiers);
		CHECK(tiers & CKPT_TIER_SHARED, "version %llu is committed at tiers 0x%x, not at SHARED",
		      (unsigned long long)S, tiers);
		if (bucket[0]) { /* in the bucket itself: every rank's object, and the marker */
			int have = 0;
			for (int r = -1; r < WORLD; r++) {
				char key[300];
				s3gw_buf b = { 0 };
				if (r < 0)
					snprintf(key, sizeof(key), "pre/jobs/%s/v%020llu/COMMITTED", JOB, (unsigned long long)S);
				else
					snprintf(key, sizeof(key), "pre/jobs/%s/v%020llu/r%06d.ckpt", JOB, (unsigned long long)S, r);
				uint64_t end = td_ms() + 10000; /* the marker follows the SHARED commit */
				long st;
				while ((st = s3gw_get(&gw, bucket, key, &b)) != 200 && td_ms() < end) {
					s3gw_buf_free(&b);
					usleep(50000);
				}
				have += st == 200 && b.len > 0;
				s3gw_buf_free(&b);
			}
			CHECK(have == WORLD + 1, "%d of %d objects and the marker of version %llu in the bucket", have - 1, WORLD,
			      (unsigned long long)S);
		}
		if (!failures)
			fprintf(stderr, "ok: %s: every rank saved step %llu and left; committed at SHARED %.1f s before the "
			        "deadline, ahead of the throttled backlog\n", scen, (unsigned long long)S,
			        (deadline - exit_ns[WORLD - 1]) / 1e9);
	} else if (!short_) {
		/* The noticed nodes' ranks have partner copies, none on a noticed
		 * node; the other ranks keep their own copies (they need none). */
		int where = peer_nodes(S, -1);
		CHECK(!(where & noticed), "partner copies of version %llu are on nodes 0x%x; none may be on a noticed node "
		      "(0x%x)", (unsigned long long)S, where, noticed);
		for (int r = 0; r < WORLD; r++)
			if (noticed & (1 << (r / 2)))
				CHECK(peer_nodes(S, r) != 0, "rank %d, on a noticed node, has no partner copy of version %llu", r,
				      (unsigned long long)S);
		if (!failures)
			fprintf(stderr, "ok: %s: every rank saved step %llu and left; safe off the noticed node(s) (their "
			        "ranks' copies in partner DRAM) %.1f s before the deadline\n", scen, (unsigned long long)S,
			        (deadline - exit_ns[WORLD - 1]) / 1e9);
	}
	/* The version committed before the notice is still committed. */
	CHECK(newest_committed(before + 1, 0, NULL) == before, "version %llu is no longer committed",
	      (unsigned long long)before);
	/* New ranks restore the newest committed version bit-exact. After an
	 * emergency, the noticed nodes' ranks (their nodes gone) on the first
	 * node that was not noticed, whose root holds the other ranks' shards
	 * but not theirs: the emergency version is safe off the noticed nodes.
	 * (Without one, in `short`, the newest version may have committed on
	 * the nodes alone, a partner copy skipped under load: they stay.) */
	uint64_t want = newest_committed(0, 0, NULL);
	int spare = 0;
	while (noticed & (1 << spare))
		spare++;
	proc q[WORLD];
	for (int r = 0; r < WORLD; r++)
		q[r] = spawn("restore", r, !short_ && (noticed & (1 << (r / 2))) ? spare : r / 2, want);
	int ok = 0;
	for (int r = 0; r < WORLD; r++) {
		int st;
		close(q[r].rep);
		ok += td_wait_pid(q[r].pid, 60000, &st) == 0 && td_status_code(st) == 0;
	}
	CHECK(ok == WORLD, "%d of %d new ranks restored version %llu bit-exact", ok, WORLD, (unsigned long long)want);
	for (int r = 0; r < WORLD; r++) {
		char log[700];
		rp_log_path(log, sizeof(log), env.dir, "restore", r);
		CHECK(!td_file_has(log, 0, "ckpt ERROR"), "rank %d restored fine but logged an ERROR (%s)", r, log);
		/* Their node gone and no partner DRAM: the noticed node's ranks
		 * read the emergency version from SHARED, themselves or through
		 * the agent they register with, which fetches it into its DRAM
		 * while their read waits (then "restored from LOCAL_MEM"). */
		if (!short_ && is_shared() && (noticed & (1 << (r / 2)))) {
			char line[128];
			snprintf(line, sizeof(line), "prefetched version %llu rank %d from SHARED", (unsigned long long)want, r);
			CHECK(td_file_has(log, 0, "restored from SHARED") ||
			      (td_file_has(log, 0, "restored from LOCAL_MEM") && td_log_has(&agent[spare], line)),
			      "rank %d (its node noticed) did not restore from SHARED, nor from a copy %s fetched from it (%s)", r,
			      agent[spare].name, log);
		}
	}
	if (ok == WORLD)
		fprintf(stderr, "ok: %s: 6 new ranks restored version %llu bit-exact\n", scen, (unsigned long long)want);
}

int main(int argc, char **argv)
{
	driver = getpid();
	snprintf(scen, sizeof(scen), "%s", argc > 1 ? argv[1] : "cli");
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("CKPT_FABRIC_PROVIDER", "tcp;ofi_rxm", 1);
	if (system("fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1") != 0 || system("python3 -c 1 >/dev/null 2>&1") != 0) {
		fprintf(stderr, "skip: needs libfabric's tcp;ofi_rxm provider and python3\n");
		return T_EXIT_SKIP;
	}
	char tag[32];
	snprintf(tag, sizeof(tag), "preempt-%s", scen);
	rt_init(&env, tag);
	snprintf(shared_dir, sizeof(shared_dir), "%s/shared", env.dir);
	T_ASSERT(mkdir(shared_dir, 0700) == 0);
	if (!strcmp(scen, "shared_s3")) { /* the agents and ranks reach the bucket with the user's keys */
		s3gw_open(&gw, env.dir);
		s3gw_new_bucket(&gw, "preempt", bucket, sizeof(bucket));
		snprintf(shared_dir, sizeof(shared_dir), "s3://%s/pre/", bucket);
		setenv("CKPT_S3_ENDPOINT", gw.endpoint, 1);
		setenv("CKPT_S3_REGION", gw.region[0] ? gw.region : "us-east-1", 1);
		setenv("AWS_ACCESS_KEY_ID", gw.access, 1);
		setenv("AWS_SECRET_ACCESS_KEY", gw.secret, 1);
		setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
		unsetenv("AWS_SESSION_TOKEN");
		unsetenv("AWS_PROFILE");
	}
	if (!strcmp(scen, "aws") || !strcmp(scen, "gcp") || !strcmp(scen, "azure"))
		fake_start();
	start_daemons();
	run();
	for (int k = 0; k < NODES; k++)
		CHECK(rt_stop(&agent[k]) == 0, "agent %s did not stop cleanly on SIGTERM", agent[k].name);
	CHECK(rt_stop(&coord) == 0, "the coordinator did not stop cleanly on SIGTERM");
	/* One answer per report: an agent that heard an answer it did not ask
	 * for had the coordinator apply and answer a batch twice. */
	for (int k = 0; k < NODES; k++)
		CHECK(!td_log_has(&agent[k], "unexpected"), "agent %s logged an answer it did not expect (see %s)",
		      agent[k].name, agent[k].log);
	if (fake_pid > 0) {
		kill(fake_pid, SIGTERM);
		waitpid(fake_pid, NULL, 0);
	}
	s3gw_close(&gw);
	ckptd_secret_free(env.cluster);
	if (failures) {
		fprintf(stderr, "%d check(s) failed; logs kept in %s\n", failures, env.dir);
		return T_EXIT_FAIL;
	}
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
