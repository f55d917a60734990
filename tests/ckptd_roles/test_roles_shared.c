/* The SHARED tier with real libckpt ranks: a coordinator and two node
 * agents n1, n2 (127.0.0.2, 127.0.0.3), both flushing to one shared
 * directory (--shared-dir, in the test's temp dir) at a small --shared-rate,
 * and four rank processes (two per node, each node with its own checkpoint
 * root) saving at local_mem + local_disk through the public API.
 *
 *  A. Versions 1 and 2 commit at local_disk; the agents flush them in the
 *     background and the coordinator lists both COMMITTED at shared, and
 *     `ckpt ls --daemon` says so. The flush is throttled: about 4 s of
 *     writes at the rate per agent take at least 3 s (a lower bound only).
 *     Every file in the tree is the rank's file byte for byte, and each
 *     version has its commit marker.
 *  R. `ckpt rm --daemon` of version 1: its SHARED files, marker and
 *     directory go with its other copies; version 2's stay.
 *  B. n1 restarts with agent.mid_shared_flush=2@kill and the ranks save
 *     version 3: n1 dies half way through copying its second shard. No
 *     file under a final name is partial (its temp file is under
 *     .partial/n1); n1 restarted without the fault and stopped (SIGTERM)
 *     mid-flush exits at once and leaves no temp file; started again, it
 *     finishes the flush and the coordinator commits version 3 at shared.
 *  C. Every copy lost except SHARED: both agents killed (kill -9), every
 *     node's checkpoint root and agent root deleted, fresh agents started
 *     under the same names (the coordinator drops the old copies: nothing
 *     is restorable by its account). Four new ranks with CKPT_SHARED_DIR
 *     and empty roots restore version 3 bit-exact from the tree ("restored
 *     from SHARED").
 *  D. The same with no daemon at all (embedded ranks, fresh roots): the
 *     tree's markers alone name version 3; a newer version directory
 *     without a marker is not offered.
 *
 * Checks are counted, so that one failure does not hide the next phases.
 * CKPT_TEST_SMALL=1 shrinks the shards (and the rate with them). */
#include "roles_test.h"
#include "rank_proc.h"

#include <ckpt.h>

#define JOB "shr"
#define WORLD 4
#define NODES 2
#define NREG 2
#define WAIT_MS 30000
#define TIERS "local_mem,local_disk"

static rt_env env;
static daemon_t coord, agent[NODES];
static char ckroot[NODES][600], shdir[600], rate[32];
static const char *const regname[NREG] = { "weights", "step" };
static size_t regsize[NREG];
static int failures;
static pid_t driver;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)

static int node_of(int rank)
{
	return rank / 2;
}

static void fill(uint8_t **b, int rank, uint64_t v)
{
	t_fill(b[0], regsize[0], (uint64_t)rank * 1000003u + v * 7919u + 1);
	uint64_t step = v << 32 | (uint64_t)rank;
	memcpy(b[1], &step, sizeof(step));
}

/* ---------------------------------------------------------------- ranks */

typedef struct plan {
	const char *tag;   /* names the logs */
	int incarnation;
	int shared;        /* CKPT_SHARED_DIR set */
	uint64_t restore;  /* expect CKPT_LATEST to be this version (0: no restore) */
	uint64_t save_from, save_to;
	int embedded;      /* no agent at all (CKPT_DAEMON unset) */
} plan;

static void rank_log(char *buf, size_t cap, const char *tag, int rank)
{
	rp_log_path(buf, cap, env.dir, tag, rank);
}

static void rank_env(const plan *p, int rank)
{
	rp_rank r = { env.dir, p->tag, JOB, rank, WORLD, p->incarnation, ckroot[node_of(rank)],
	              p->embedded ? NULL : agent[node_of(rank)].unixa, p->embedded ? "local_disk" : TIERS, env.tokpath,
	              120 };
	rp_child_setup(driver, &r);
	setenv("CKPT_CHUNK_BYTES", "256K", 1);
	setenv("CKPT_STAGING_BYTES", "8M", 1);
	setenv("CKPT_WORKERS", "1", 1);
	if (p->shared) /* the restore order stays the default: shared last */
		setenv("CKPT_SHARED_DIR", shdir, 1);
}

static void rank_main(const plan *p, int rank)
{
	uint8_t *b[NREG], *want[NREG];
	for (int i = 0; i < NREG; i++) {
		T_ASSERT((b[i] = malloc(regsize[i])) && (want[i] = malloc(regsize[i])));
		memset(b[i], 0xa5, regsize[i]);
	}
	ckpt_ctx *ctx = rp_open(regname, b, regsize, NREG);
	if (p->restore)
		rp_restore_check(ctx, rank, p->restore, 0, b, want, regname, regsize, NREG, fill);
	for (uint64_t v = p->save_from; v && v <= p->save_to; v++) {
		fill(b, rank, v);
		ckpt_handle *h;
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_save(ctx, v, 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, WAIT_MS, &st));
		ckpt_handle_free(h);
	}
	T_OK(ckpt_ctx_close(ctx));
	for (int i = 0; i < NREG; i++) {
		free(b[i]);
		free(want[i]);
	}
}

/* Runs WORLD ranks to the end; returns how many exited 0. */
static int launch(const plan *p)
{
	pid_t pid[WORLD];
	for (int r = 0; r < WORLD; r++) {
		fflush(NULL);
		pid[r] = fork();
		T_ASSERT(pid[r] >= 0);
		if (pid[r] == 0) {
			rank_env(p, r);
			rank_main(p, r);
			exit(T_EXIT_PASS);
		}
	}
	int ok = 0;
	for (int r = 0; r < WORLD; r++) {
		int st = 0;
		char log[700];
		if (td_wait_pid(pid[r], 90000, &st) < 0) {
			kill(pid[r], SIGKILL);
			waitpid(pid[r], &st, 0);
		}
		if (td_status_code(st) == 0) {
			ok++;
		} else {
			rank_log(log, sizeof(log), p->tag, r);
			CHECK(0, "%s: rank %d exited %d", p->tag, r, td_status_code(st));
			td_print_tail(log, 25);
		}
	}
	return ok;
}

static int log_has(const plan *p, int rank, const char *needle)
{
	char log[700];
	rank_log(log, sizeof(log), p->tag, rank);
	return td_file_has(log, 0, needle);
}

/* --------------------------------------------------------------- helpers */

static ckptd_client *coord_cli(void)
{
	return rt_connect(coord.tcp, NULL, CKPTD_ROLE_CLI, env.cluster);
}

/* Waits until the coordinator lists v committed at every tier of want;
 * returns 1 (0 on timeout). */
static int wait_tiers(uint64_t v, uint32_t want, int timeout_ms)
{
	ckptd_client *c = coord_cli();
	uint64_t end = td_ms() + (uint64_t)timeout_ms;
	int ok = 0;
	while (!ok && td_ms() < end) {
		ckptd_version_info vi;
		ok = rt_list_find(c, JOB, v, &vi) && vi.state == CKPT_STATE_COMMITTED && (vi.tiers & want) == want;
		if (!ok)
			usleep(50000);
	}
	ckptd_client_close(c);
	return ok;
}

static void shard_in(char *out, size_t cap, const char *root, uint64_t v, int rank)
{
	snprintf(out, cap, "%s/jobs/%s/v%020llu/r%06d.ckpt", root, JOB, (unsigned long long)v, rank);
}

static void vdir_in(char *out, size_t cap, const char *root, uint64_t v)
{
	snprintf(out, cap, "%s/jobs/%s/v%020llu", root, JOB, (unsigned long long)v);
}

/* 1 if the file at a is byte for byte the file at b. */
static int same_file(const char *a, const char *b)
{
	size_t la = 0, lb = 0;
	uint8_t *x = (uint8_t *)t_slurp(a, &la), *y = (uint8_t *)t_slurp(b, &lb);
	int same = x && y && la == lb && memcmp(x, y, la) == 0;
	free(x);
	free(y);
	return same;
}

static int exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

/* Every rank's SHARED file of v is its rank's file, and the marker is there. */
static int tree_has(uint64_t v, int marker)
{
	char a[800], b[800];
	int ok = 1;
	for (int r = 0; r < WORLD; r++) {
		shard_in(a, sizeof(a), shdir, v, r);
		shard_in(b, sizeof(b), ckroot[node_of(r)], v, r);
		if (!same_file(a, b)) {
			CHECK(0, "%s is not a copy of %s", a, b);
			ok = 0;
		}
	}
	if (marker) {
		vdir_in(a, sizeof(a), shdir, v);
		strcat(a, "/COMMITTED");
		uint64_t end = td_ms() + 10000; /* written on the SHARED notice */
		while (!exists(a) && td_ms() < end)
			usleep(50000);
		CHECK(exists(a), "no commit marker %s", a);
		ok &= exists(a);
	}
	return ok;
}

/* Entries of a directory, but . and .. (-1 if it cannot be read). */
static int dir_count(const char *p)
{
	DIR *d = opendir(p);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void start_agent(int k, const char *fault)
{
	char name[16], host[32];
	snprintf(name, sizeof(name), "n%d", k + 1);
	snprintf(host, sizeof(host), "127.0.0.%d", k + 2);
	const char *aargs[] = { "--role", "agent", "--coordinator", coord.tcp, "--pool-size", "32M",
	                        "--shared-dir", shdir, "--shared-rate", rate, NULL };
	if (!agent[k].name[0])
		rt_daemon_on(&env, &agent[k], name, host, aargs);
	if (fault)
		setenv("CKPT_FAULT", fault, 1);
	rt_start(&env, &agent[k]);
	unsetenv("CKPT_FAULT");
	snprintf(ckroot[k], sizeof(ckroot[k]), "%s/%s.ckpt", env.dir, name);
}

static void rmrf_now(const char *dir)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	T_ASSERT(system(cmd) == 0);
}

/* Runs the ckpt tool against the coordinator; its output (whitespace
 * dropped) in out. Returns its exit code. */
static int ckpt_tool(const char *args, char *out, size_t cap)
{
	char cmd[2000];
	snprintf(cmd, sizeof(cmd), "'%s/ckpt' %s --daemon %s --token-file '%s' --job %s 2>&1", getenv("CKPT_BIN"), args,
	         coord.tcp, env.tokpath, JOB);
	FILE *p = popen(cmd, "r");
	T_ASSERT(p);
	size_t n = 0;
	int c;
	while ((c = fgetc(p)) != EOF)
		if (n + 1 < cap && !strchr(" \t\r\n", c))
			out[n++] = (char)c;
	out[n] = 0;
	return td_status_code(pclose(p));
}

/* ------------------------------------------------------------------ phases */

static void phase_a(uint64_t per_agent)
{
	plan p = { "a-save", 0, 0, 0, 1, 2 };
	uint64_t t0 = td_ms();
	int ok = launch(&p);
	CHECK(ok == WORLD, "phase A: %d of %d ranks saved versions 1-2", ok, WORLD);
	int v1 = wait_tiers(1, CKPT_TIER_SHARED | CKPT_TIER_LOCAL_DISK, 40000);
	int v2 = wait_tiers(2, CKPT_TIER_SHARED | CKPT_TIER_LOCAL_DISK, 40000);
	uint64_t dt = td_ms() - t0;
	CHECK(v1 && v2, "versions 1 and 2 not committed at shared (%d, %d) after %llu ms", v1, v2, (unsigned long long)dt);
	if (!v1 || !v2)
		return;
	/* Each agent wrote per_agent bytes at the rate (and read them back):
	 * well over 3 s unthrottled would be well under one. */
	CHECK(dt >= 3000, "the flush of %llu bytes per agent took %llu ms: not throttled", (unsigned long long)per_agent,
	      (unsigned long long)dt);
	int files = tree_has(1, 1) & tree_has(2, 1);
	static char out[1 << 16];
	int rc = ckpt_tool("ls --json", out, sizeof(out));
	CHECK(rc == 0 && strstr(out, "\"shared\""), "ckpt ls --daemon does not show the shared tier (exit %d): %s", rc, out);
	if (files && rc == 0)
		fprintf(stderr, "ok: A: versions 1-2 committed at shared in %.1f s (%llu bytes per agent at --shared-rate "
		        "%s), the tree holds every rank's file byte for byte and each version's marker\n", (double)dt / 1e3,
		        (unsigned long long)per_agent, rate);
}

static void phase_r(void)
{
	static char out[1 << 16];
	char v1[800], local[800];
	vdir_in(v1, sizeof(v1), shdir, 1);
	int rc = ckpt_tool("rm --version 1", out, sizeof(out));
	CHECK(rc == 0, "ckpt rm --daemon --version 1 exited %d: %s", rc, out);
	uint64_t end = td_ms() + 15000;
	while (exists(v1) && td_ms() < end)
		usleep(50000);
	CHECK(!exists(v1), "%s still there after ckpt rm", v1);
	shard_in(local, sizeof(local), ckroot[0], 1, 0);
	while (exists(local) && td_ms() < end)
		usleep(50000);
	CHECK(!exists(local), "%s still there after ckpt rm", local);
	if (!exists(v1) && tree_has(2, 1))
		fprintf(stderr, "ok: R: ckpt rm --daemon of version 1 removed its SHARED files and marker; version 2's "
		        "stay\n");
}

static void phase_b(void)
{
	/* n1 restarts with the fault armed: the second shard it copies (rank 1
	 * of version 3; rank 0's goes first) kills it half way. */
	rt_kill9(&agent[0]);
	start_agent(0, "agent.mid_shared_flush=2@kill");
	rt_wait_agents(&env, coord.tcp, 2, 10000);
	plan p = { "b-save", 1, 0, 2, 3, 3 };
	int ok = launch(&p);
	CHECK(ok == WORLD, "phase B: %d of %d ranks restored version 2 and saved version 3", ok, WORLD);
	int st = 0;
	int died = td_wait_pid(agent[0].pid, 40000, &st) == 0;
	CHECK(died && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "n1 did not die at agent.mid_shared_flush");
	if (!died) {
		rt_kill9(&agent[0]);
		return;
	}
	agent[0].pid = 0;
	char a[800], b[800], partial[800];
	for (int r = 0; r < 2; r++) {
		shard_in(a, sizeof(a), shdir, 3, r);
		shard_in(b, sizeof(b), ckroot[0], 3, r);
		CHECK(!exists(a) || same_file(a, b), "%s is there but not a whole copy", a);
	}
	shard_in(a, sizeof(a), shdir, 3, 1);
	CHECK(!exists(a), "rank 1's copy of version 3 is in place though its flush was killed");
	snprintf(partial, sizeof(partial), "%s/.partial/n1", shdir);
	CHECK(dir_count(partial) >= 1, "no temp file under %s: the kill was not half way", partial);
	/* Restarted without the fault: the index says what is left to copy.
	 * A SIGTERM while it copies stops the thread at once, its temp file
	 * removed; the next start copies again. */
	start_agent(0, NULL);
	td_wait_log(&agent[0], "SHARED: 1 shard files", 10000);
	usleep(200000);
	uint64_t t = td_ms();
	int rc = rt_stop(&agent[0]);
	uint64_t took = td_ms() - t;
	CHECK(rc == 0 && took < 3000, "n1 stopped in %llu ms with status %d, mid-flush", (unsigned long long)took, rc);
	CHECK(dir_count(partial) == 0, "SIGTERM mid-flush left %d temp files in %s", dir_count(partial), partial);
	shard_in(a, sizeof(a), shdir, 3, 1);
	CHECK(!exists(a), "rank 1's copy of version 3 in place though n1 stopped before its flush could finish");
	start_agent(0, NULL);
	int v3 = wait_tiers(3, CKPT_TIER_SHARED, 40000);
	CHECK(v3, "version 3 not committed at shared after n1's restart");
	/* The commit notice makes the agent write the version's marker, through
	 * a temp file of its own: wait for that to be renamed too. */
	uint64_t end = td_ms() + 10000;
	while (dir_count(partial) > 0 && td_ms() < end)
		usleep(50000);
	CHECK(dir_count(partial) == 0, "%s keeps %d temp files after the restart", partial, dir_count(partial));
	if (v3 && tree_has(3, 1) && td_log_has(&agent[0], "SHARED: 1 shard files"))
		fprintf(stderr, "ok: B: n1 killed half way through a flush left no partial file under a final name; "
		        "restarted and stopped mid-flush, it exited in %llu ms leaving no temp file; started again, it "
		        "finished the flush and version 3 committed at shared\n", (unsigned long long)took);
	else
		CHECK(td_log_has(&agent[0], "SHARED: 1 shard files"), "n1 did not pick up the unfinished flush at start");
}

static void phase_c(void)
{
	for (int k = 0; k < NODES; k++) {
		rt_kill9(&agent[k]);
		rmrf_now(ckroot[k]);
		rmrf_now(agent[k].root);
		T_ASSERT(mkdir(agent[k].root, 0700) == 0);
	}
	for (int k = 0; k < NODES; k++)
		start_agent(k, NULL);
	rt_wait_agents(&env, coord.tcp, 2, 10000);
	/* The fresh agents' inventories hold nothing: the coordinator drops
	 * every copy it knew of, SHARED ones included. */
	ckptd_client *c = coord_cli();
	uint64_t end = td_ms() + 15000;
	int gone = 0;
	while (!gone && td_ms() < end) {
		ckptd_version_info vi;
		gone = !rt_list_find(c, JOB, 3, &vi) || vi.state != CKPT_STATE_COMMITTED;
		if (!gone)
			usleep(50000);
	}
	ckptd_client_close(c);
	CHECK(gone, "the coordinator still lists version 3 restorable after every agent was replaced");
	plan p = { "c-restore", 2, 1, 3, 0, 0 };
	int ok = launch(&p);
	CHECK(ok == WORLD, "phase C: %d of %d ranks restored version 3", ok, WORLD);
	int shared = 0;
	for (int r = 0; r < WORLD; r++) {
		int from = log_has(&p, r, "restored from SHARED");
		CHECK(from, "rank %d: want a restore from SHARED", r);
		shared += from;
	}
	if (gone && ok == WORLD && shared == WORLD)
		fprintf(stderr, "ok: C: every agent, checkpoint root and agent index lost; 4 new ranks restored version 3 "
		        "bit-exact from the SHARED tree alone\n");
	/* The operator's way: ckpt restore through a (fresh) agent reads the
	 * tree too, every rank bit-exact. */
	char out[700], cmd[6000], path[800];
	snprintf(out, sizeof(out), "%s/cli-restore", env.dir);
	snprintf(cmd, sizeof(cmd), "'%s/ckpt' restore --daemon %s --token-file '%s' --job %s --version 3 --shared-dir '%s' "
	         "--out '%s' >>'%s/cli-restore.log' 2>&1", getenv("CKPT_BIN"), agent[0].unixa, env.tokpath, JOB, shdir, out,
	         env.dir);
	int st = system(cmd);
	CHECK(st == 0, "ckpt restore --daemon --shared-dir exited %d (see cli-restore.log)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	int exact = 0;
	for (int r = 0; r < WORLD; r++) {
		uint8_t *want[NREG];
		for (int i = 0; i < NREG; i++)
			T_ASSERT((want[i] = malloc(regsize[i])));
		fill(want, r, 3);
		int same = 1;
		for (int i = 0; i < NREG; i++) {
			snprintf(path, sizeof(path), "%s/rank-%d/%s", out, r, regname[i]);
			FILE *f = fopen(path, "rb");
			uint8_t *b = malloc(regsize[i] + 1);
			size_t got = f && b ? fread(b, 1, regsize[i] + 1, f) : 0;
			same &= got == regsize[i] && !memcmp(b, want[i], regsize[i]);
			if (f)
				fclose(f);
			free(b);
			free(want[i]);
		}
		CHECK(same, "ckpt restore --shared-dir: rank %d's files are not version 3", r);
		exact += same;
	}
	if (exact == WORLD)
		fprintf(stderr, "ok: C: ckpt restore --daemon --shared-dir wrote version 3 of every rank bit-exact\n");
}

static void phase_d(void)
{
	for (int k = 0; k < NODES; k++)
		rmrf_now(ckroot[k]);
	/* A newer version directory without its marker (a flush that never
	 * completed): every file there, none of it offered. */
	char cmd[2600], v3[800], v4[800];
	vdir_in(v3, sizeof(v3), shdir, 3);
	vdir_in(v4, sizeof(v4), shdir, 4);
	snprintf(cmd, sizeof(cmd), "mkdir '%s' && cp '%s'/r*.ckpt '%s'/", v4, v3, v4);
	T_ASSERT(system(cmd) == 0);
	plan p = { "d-embedded", 3, 1, 3, 0, 0, 1 };
	int ok = launch(&p);
	int shared = 0, v4_tried = 0;
	for (int r = 0; r < WORLD; r++) {
		shared += log_has(&p, r, "restored from SHARED");
		v4_tried += log_has(&p, r, "v=4");
	}
	CHECK(ok == WORLD && shared == WORLD, "phase D: %d of %d embedded ranks restored version 3 from SHARED", shared,
	      WORLD);
	CHECK(!v4_tried, "%d ranks tried version 4, which has no commit marker", v4_tried);
	if (ok == WORLD && shared == WORLD)
		fprintf(stderr, "ok: D: with no daemon, 4 ranks on empty roots restored version 3 bit-exact from the tree's "
		        "markers\n");
}

int main(void)
{
	driver = getpid();
	int small = getenv("CKPT_TEST_SMALL") != NULL;
	regsize[0] = small ? (512u << 10) + 4097 : (2u << 20) + 4097;
	regsize[1] = 8;
	/* The rate scales with the shards: each agent's share of versions 1-2
	 * (two ranks, two versions) is about 4 s of writes at it. */
	snprintf(rate, sizeof(rate), "%s", small ? "512K" : "2M");
	uint64_t per_agent = 2 * 2 * (uint64_t)regsize[0];
	rt_init(&env, "roles-shared");
	const char *bin = getenv("CKPT_BIN");
	char tool[600];
	snprintf(tool, sizeof(tool), "%s/ckpt", bin);
	if (access(tool, X_OK) != 0) {
		fprintf(stderr, "skip: no %s\n", tool);
		return T_EXIT_SKIP;
	}
	snprintf(shdir, sizeof(shdir), "%s/shared", env.dir);
	T_ASSERT(mkdir(shdir, 0700) == 0);
	/* A long grace: phase C's agents come back under the same names, and
	 * their inventories (not a timer) drop the old copies. */
	static const char *const cargs[] = { "--role", "coordinator", "--agent-grace", "300s", "--retention-interval", "0",
	                                     NULL };
	rt_daemon_on(&env, &coord, "coord", "127.0.0.1", cargs);
	rt_start(&env, &coord);
	for (int k = 0; k < NODES; k++)
		start_agent(k, NULL);
	rt_wait_agents(&env, coord.tcp, 2, 10000);

	phase_a(per_agent);
	phase_r();
	phase_b();
	phase_c();
	phase_d();

	for (int k = 0; k < NODES; k++)
		if (agent[k].pid > 0)
			CHECK(rt_stop(&agent[k]) == 0, "agent %s did not stop cleanly on SIGTERM", agent[k].name);
	CHECK(rt_stop(&coord) == 0, "the coordinator did not stop cleanly on SIGTERM");
	ckptd_secret_free(env.cluster);
	if (failures) {
		fprintf(stderr, "%d check(s) failed; logs kept in %s\n", failures, env.dir);
		return T_EXIT_FAIL;
	}
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
