/* The SHARED tier on a real S3 server (Debian's Ceph gateway, tests/s3): a
 * coordinator and two node agents n1, n2 (127.0.0.2, 127.0.0.3) started
 * with --shared-dir s3://BUCKET/pre/ and four libckpt rank processes (two
 * per node, each node with its own checkpoint root) saving at
 * local_mem + local_disk. The agents reach a gateway of this test's own on
 * the shared cluster through the fault-injecting proxy (tests/s3/s3proxy.py),
 * which counts the requests by kind.
 *
 *  A. Versions 1 and 2 commit at local_disk, the agents upload them and the
 *     coordinator commits them at shared; every object in the bucket is the
 *     rank's file byte for byte and each version has its marker. No LIST
 *     was sent, and the gateway's secret is in no agent's log.
 *  S. The ranks restore with CKPT_RESTORE_ORDER=shared: version 2 from the
 *     bucket ("restored from SHARED"), bit-exact, by ranged GETs and no LIST.
 *  R. `ckpt rm --daemon` of version 1: its marker and objects are gone.
 *  G. The gateway stopped (kill -9) while version 3 is being uploaded and
 *     started again 2 s later: version 3 commits at shared all the same.
 *  T. n1 stopped with SIGTERM while its parts are refused and would be
 *     retried for a minute (CKPT_S3_RETRY_TOTAL 60s): it exits 0 at once
 *     (the client's requests cancelled), nothing looks complete that is
 *     not; restarted, it uploads the version, which commits at shared,
 *     and no multipart upload is left.
 *  K. n1 killed -9 at random moments of its uploads, ROUNDS times (a new
 *     version saved whenever the last one is complete): after every kill,
 *     every version with a marker has every rank's object, each the rank's
 *     file byte for byte (never a torn version), and every object there is
 *     whole; restarted, n1 finishes the flush. `ckpt gc` on the s3:// root
 *     then leaves no multipart upload in progress; `ckpt restore --daemon`
 *     through n1 with --shared-dir s3:// takes n2's ranks from the bucket.
 *  C. The whole cluster lost: both agents and the coordinator killed, every
 *     checkpoint root and agent root deleted. Four ranks with nothing but
 *     CKPT_SHARED_DIR (no daemon, empty roots) restore the newest version
 *     bit-exact from the bucket; so does `ckpt restore --root s3://...`.
 *  L. Still with nothing but the bucket, the job comes back on 3 ranks and
 *     then on 2: each registers its slice of the tensor "t" (split among
 *     the 4 saved ranks otherwise) and the blob "step", and ckpt_restore
 *     reshards from the objects (ranged GETs of only the chunks each slice
 *     needs, every one verified): every element and the blob exact.
 *  F. A byte flipped in rank 0's object of the newest version: rank 0's
 *     restore finds the chunk's checksum wrong and restores the version
 *     before, bit-exact; `ckpt verify --root s3://...` exits 3 naming it.
 *  E. The tool on the bucket with a wrong secret key, on a missing bucket,
 *     on a malformed URL: each refused, its cause named, no secret said.
 *  D. A new cluster; a byte flipped in every rank's local file of a new version while the
 *     agents' flush waits on its first request (the proxy holds them), on
 *     either side of the first part boundary (in the chunk that spans it,
 *     summed piece by piece as the parts are read): each agent finds the
 *     chunk's checksum wrong as it reads, uploads none of those objects,
 *     and the version is never committed at shared nor marked.
 *
 * Checks are counted, so that one failure does not hide the next phases. */
#include "../ckptd_roles/roles_test.h"
#include "../ckptd_roles/rank_proc.h"
#include "s3gw_helper.h"

#include <ckpt.h>

#define JOB "s3j"
#define WORLD 4
#define NODES 2
#define NREG 2
#define WAIT_MS 30000
#define TIERS "local_mem,local_disk"
#define ROUNDS 20
#define TN 400009 /* elements of the tensor "t", split among the ranks */

static rt_env env;
static daemon_t coord, agent[NODES];
static char ckroot[NODES][600], url[200], bucket[64];
static const char *const regname[NREG] = { "weights", "step" };
static size_t regsize[NREG];
static int failures;
static pid_t driver;
static long part_bytes;
static s3gw g, x;
static s3proxy px;

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

static float tval(uint64_t i, uint64_t v)
{
	return (float)((i * 31u + v * 7u) % 65521u) * 0.25f;
}

/* Rank's slice [lo, hi) of "t" in a job of world ranks. */
static void t_slice(int rank, int world, uint64_t *lo, uint64_t *hi)
{
	*lo = (uint64_t)rank * TN / (uint64_t)world;
	*hi = (uint64_t)(rank + 1) * TN / (uint64_t)world;
}

static void t_add(ckpt_ctx *ctx, float *t, uint64_t lo, uint64_t hi)
{
	ckpt_region_desc d = { .size = sizeof(d), .name = "t", .ptr = t, .bytes = (hi - lo) * sizeof(float),
	                       .dtype = CKPT_DTYPE_F32, .ndim = 1, .global_shape = { TN }, .offsets = { lo },
	                       .extents = { hi - lo } };
	T_OK(ckpt_region_add(ctx, &d));
}

static void t_check(const float *t, uint64_t lo, uint64_t hi, uint64_t v, int rank)
{
	for (uint64_t i = lo; i < hi; i++)
		if (t[i - lo] != tval(i, v))
			T_FAIL("rank %d: element %llu of t is %g, version %llu saved %g", rank, (unsigned long long)i, t[i - lo],
			       (unsigned long long)v, tval(i, v));
}

/* ---------------------------------------------------------------- ranks */

typedef struct plan {
	const char *tag;
	int incarnation;
	uint64_t restore;  /* expect CKPT_LATEST to be this version (0: no restore) */
	uint64_t save_from, save_to;
	int embedded;      /* no agent at all (CKPT_DAEMON unset), SHARED read */
	int shared_first;  /* CKPT_RESTORE_ORDER=shared */
	int only_rank;     /* >= 0: that rank alone */
} plan;

static void rank_log(char *buf, size_t cap, const char *tag, int rank)
{
	rp_log_path(buf, cap, env.dir, tag, rank);
}

/* Every rank's library settings: small chunks and pool, the bucket as SHARED. */
static void rank_settings(void)
{
	setenv("CKPT_CHUNK_BYTES", "256K", 1);
	setenv("CKPT_STAGING_BYTES", "8M", 1);
	setenv("CKPT_WORKERS", "1", 1);
	setenv("CKPT_DEBUG", "TRACE", 1);
	setenv("CKPT_SHARED_DIR", url, 1);
}

static void rank_env(const plan *p, int rank)
{
	rp_rank r = { env.dir, p->tag, JOB, rank, WORLD, p->incarnation, ckroot[node_of(rank)],
	              p->embedded ? NULL : agent[node_of(rank)].unixa, p->embedded ? "local_disk" : TIERS, env.tokpath,
	              120 };
	rp_child_setup(driver, &r);
	rank_settings();
	if (p->shared_first)
		setenv("CKPT_RESTORE_ORDER", "shared", 1);
}

static void rank_main(const plan *p, int rank)
{
	uint8_t *b[NREG], *want[NREG];
	for (int i = 0; i < NREG; i++) {
		T_ASSERT((b[i] = malloc(regsize[i])) && (want[i] = malloc(regsize[i])));
		memset(b[i], 0xa5, regsize[i]);
	}
	ckpt_ctx *ctx = rp_open(regname, b, regsize, NREG);
	uint64_t lo, hi;
	t_slice(rank, WORLD, &lo, &hi);
	float *t = malloc((hi - lo) * sizeof(float));
	T_ASSERT(t);
	t_add(ctx, t, lo, hi);
	if (p->restore) {
		rp_restore_check(ctx, rank, p->restore, 0, b, want, regname, regsize, NREG, fill);
		t_check(t, lo, hi, p->restore, rank);
	}
	for (uint64_t v = p->save_from; v && v <= p->save_to; v++) {
		fill(b, rank, v);
		for (uint64_t i = lo; i < hi; i++)
			t[i - lo] = tval(i, v);
		ckpt_handle *h;
		ckpt_status st = { .size = sizeof(st) };
		T_OK(ckpt_save(ctx, v, 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, WAIT_MS, &st));
		ckpt_handle_free(h);
	}
	T_OK(ckpt_ctx_close(ctx));
	free(t);
	for (int i = 0; i < NREG; i++) {
		free(b[i]);
		free(want[i]);
	}
}

/* Phase L's rank of a job of world ranks, with nothing but the bucket:
 * its slice of "t" and the blob "step", resharded from the objects. */
static void elastic_main(int rank, int world, uint64_t expect)
{
	char tag[32];
	snprintf(tag, sizeof(tag), "l-restore-%d", world);
	rp_rank r = { env.dir, tag, JOB, rank, world, 60 + world, ckroot[0], NULL, "local_disk", env.tokpath, 120 };
	rp_child_setup(driver, &r);
	rank_settings();
	uint64_t lo, hi, step = 0, got = 0;
	t_slice(rank, world, &lo, &hi);
	float *t = malloc((hi - lo) * sizeof(float));
	T_ASSERT(t);
	for (uint64_t i = lo; i < hi; i++)
		t[i - lo] = -1.0f;
	ckpt_config cfg;
	ckpt_ctx *ctx;
	T_OK(ckpt_config_init(&cfg));
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	t_add(ctx, t, lo, hi);
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "step", &step, sizeof(step));
	T_OK(ckpt_region_add(ctx, &d));
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	if (got != expect)
		T_FAIL("rank %d of %d restored version %llu, not %llu", rank, world, (unsigned long long)got,
		       (unsigned long long)expect);
	t_check(t, lo, hi, got, rank);
	if (step != (got << 32 | (uint64_t)rank)) /* the saved rank of the same number's blob */
		T_FAIL("rank %d of %d: step is %llx", rank, world, (unsigned long long)step);
	T_OK(ckpt_ctx_close(ctx));
	free(t);
}

/* Runs the plan's ranks to the end; returns how many exited 0. */
static int launch(const plan *p)
{
	pid_t pid[WORLD];
	int n = 0, ok = 0;
	for (int r = 0; r < WORLD; r++) {
		if (p->only_rank >= 0 && r != p->only_rank)
			continue;
		fflush(NULL);
		pid[n] = fork();
		T_ASSERT(pid[n] >= 0);
		if (pid[n] == 0) {
			rank_env(p, r);
			rank_main(p, r);
			exit(T_EXIT_PASS);
		}
		n++;
	}
	for (int i = 0, r = 0; i < n; i++, r++) {
		if (p->only_rank >= 0)
			r = p->only_rank;
		int st = 0;
		char log[700];
		if (td_wait_pid(pid[i], 90000, &st) < 0) {
			kill(pid[i], SIGKILL);
			waitpid(pid[i], &st, 0);
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

static void key_of(char *out, size_t cap, uint64_t v, int rank)
{
	if (rank < 0)
		snprintf(out, cap, "pre/jobs/%s/v%020llu/COMMITTED", JOB, (unsigned long long)v);
	else
		snprintf(out, cap, "pre/jobs/%s/v%020llu/r%06d.ckpt", JOB, (unsigned long long)v, rank);
}

static void shard_in(char *out, size_t cap, const char *root, uint64_t v, int rank)
{
	snprintf(out, cap, "%s/jobs/%s/v%020llu/r%06d.ckpt", root, JOB, (unsigned long long)v, rank);
}

/* The object's HTTP status (200, 404) and its bytes in *b. */
static long get_obj(uint64_t v, int rank, s3gw_buf *b)
{
	char key[300];
	key_of(key, sizeof(key), v, rank);
	memset(b, 0, sizeof(*b));
	return s3gw_get(&g, bucket, key, b);
}

static int has_marker(uint64_t v)
{
	s3gw_buf b;
	long st = get_obj(v, -1, &b);
	int ok = st == 200 && b.data && strstr(b.data, "ckpt-shared-commit 1") != NULL;
	s3gw_buf_free(&b);
	return ok;
}

/* 1: rank's object of v is its local file byte for byte; 0: no object;
 * -1: an object that is not (a torn or foreign one). */
static int obj_state(uint64_t v, int rank)
{
	char local[800];
	shard_in(local, sizeof(local), ckroot[node_of(rank)], v, rank);
	s3gw_buf b;
	long st = get_obj(v, rank, &b);
	if (st == 404) {
		s3gw_buf_free(&b);
		return 0;
	}
	size_t ln = 0;
	char *l = t_slurp(local, &ln);
	int same = st == 200 && l && ln == b.len && !memcmp(l, b.data, ln);
	free(l);
	s3gw_buf_free(&b);
	return same ? 1 : -1;
}

/* Every rank's object of v is its rank's file, and the marker is there. */
static int bucket_has(uint64_t v, int marker_wait_ms)
{
	int ok = 1;
	for (int r = 0; r < WORLD; r++)
		if (obj_state(v, r) != 1) {
			CHECK(0, "version %llu rank %d: the object is not the rank's file", (unsigned long long)v, r);
			ok = 0;
		}
	uint64_t end = td_ms() + (uint64_t)marker_wait_ms; /* written on the SHARED notice */
	while (!has_marker(v) && td_ms() < end)
		usleep(50000);
	CHECK(has_marker(v), "version %llu: no commit marker", (unsigned long long)v);
	return ok && has_marker(v);
}

static void start_agent(int k, const char *fault)
{
	char name[16], host[32];
	snprintf(name, sizeof(name), "n%d", k + 1);
	snprintf(host, sizeof(host), "127.0.0.%d", k + 2);
	static const char *aargs[NODES][16];
	const char *a[] = { "--role", "agent", "--coordinator", coord.tcp, "--pool-size", "32M", "--shared-dir", url,
	                    "--shared-rate", "2M", "--shared-retry", "2s", NULL };
	if (!agent[k].name[0]) {
		memcpy(aargs[k], a, sizeof(a));
		rt_daemon_on(&env, &agent[k], name, host, aargs[k]);
	}
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

/* The ckpt tool with args (its output, whitespace dropped, in out). */
static int ckpt_tool(const char *args, char *out, size_t cap)
{
	char cmd[3000];
	snprintf(cmd, sizeof(cmd), "'%s/ckpt' %s 2>&1", getenv("CKPT_BIN"), args);
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

static int ckpt_daemon_tool(const char *args, char *out, size_t cap)
{
	char a[2000];
	snprintf(a, sizeof(a), "%s --daemon %s --token-file '%s' --job %s", args, coord.tcp, env.tokpath, JOB);
	return ckpt_tool(a, out, cap);
}

/* 1 if the files ckpt restore wrote into out are rank r's regions of v. */
static int restored_files(const char *out, int r, uint64_t v)
{
	char path[900];
	uint8_t *want[NREG];
	int same = 1;
	for (int i = 0; i < NREG; i++)
		T_ASSERT((want[i] = malloc(regsize[i])));
	fill(want, r, v);
	for (int i = 0; i < NREG; i++) {
		snprintf(path, sizeof(path), "%s/rank-%d/%s", out, r, regname[i]);
		size_t len = 0;
		char *b = t_slurp(path, &len);
		same &= b && len == regsize[i] && !memcmp(b, want[i], regsize[i]);
		free(b);
		free(want[i]);
	}
	return same;
}

/* ------------------------------------------------------------------ phases */

static void phase_a(void)
{
	s3proxy_reset(&px);
	plan p = { .tag = "a-save", .save_from = 1, .save_to = 2, .only_rank = -1 };
	int ok = launch(&p);
	CHECK(ok == WORLD, "phase A: %d of %d ranks saved versions 1-2", ok, WORLD);
	int v1 = wait_tiers(1, CKPT_TIER_SHARED | CKPT_TIER_LOCAL_DISK, 40000);
	int v2 = wait_tiers(2, CKPT_TIER_SHARED | CKPT_TIER_LOCAL_DISK, 40000);
	CHECK(v1 && v2, "versions 1 and 2 not committed at shared (%d, %d)", v1, v2);
	if (!v1 || !v2)
		return;
	int objs = bucket_has(1, 10000) & bucket_has(2, 10000);
	long lists = s3proxy_count(&px, "lists", NULL), parts = s3proxy_count(&px, "PUT_PART", NULL);
	CHECK(lists == 0, "the flush sent %ld LIST requests; want none", lists);
	CHECK(parts >= 2 * WORLD, "only %ld parts uploaded: the shards did not go up in parts", parts);
	int leak = 0;
	for (int k = 0; k < NODES; k++)
		leak |= td_log_has(&agent[k], g.secret);
	CHECK(!leak, "the secret key is in an agent's log");
	static char out[1 << 16];
	int rc = ckpt_daemon_tool("ls --json", out, sizeof(out));
	CHECK(rc == 0 && strstr(out, "\"shared\""), "ckpt ls --daemon does not show the shared tier (exit %d): %s", rc, out);
	if (objs && !lists && !leak)
		fprintf(stderr, "ok: A: versions 1-2 committed at shared; the bucket holds every rank's file byte for byte "
		        "(%ld parts) and each version's marker; no LIST sent, no secret logged\n", parts);
}

static void phase_s(void)
{
	s3proxy_reset(&px);
	plan p = { .tag = "s-restore", .incarnation = 1, .restore = 2, .shared_first = 1, .only_rank = -1 };
	int ok = launch(&p);
	CHECK(ok == WORLD, "phase S: %d of %d ranks restored version 2", ok, WORLD);
	int shared = 0;
	for (int r = 0; r < WORLD; r++)
		shared += log_has(&p, r, "restored from SHARED");
	long lists = s3proxy_count(&px, "lists", NULL), ranges = s3proxy_count(&px, "GET_RANGE", NULL);
	CHECK(shared == WORLD, "%d of %d ranks restored from SHARED", shared, WORLD);
	CHECK(lists == 0, "the restore sent %ld LIST requests; want none", lists);
	CHECK(ranges >= WORLD * 3, "only %ld ranged GETs for %d restores", ranges, WORLD);
	if (ok == WORLD && shared == WORLD && !lists)
		fprintf(stderr, "ok: S: 4 ranks restored version 2 bit-exact from the object store with %ld ranged GETs and "
		        "no LIST\n", ranges);
}

static void phase_r(void)
{
	static char out[1 << 16];
	int rc = ckpt_daemon_tool("rm --version 1", out, sizeof(out));
	CHECK(rc == 0, "ckpt rm --daemon --version 1 exited %d: %s", rc, out);
	uint64_t end = td_ms() + 15000;
	int left = 1;
	while (left && td_ms() < end) {
		left = has_marker(1);
		for (int r = 0; r < WORLD; r++)
			left |= obj_state(1, r) != 0;
		if (left)
			usleep(100000);
	}
	CHECK(!left, "version 1's objects or marker still in the bucket after ckpt rm");
	if (!left && has_marker(2))
		fprintf(stderr, "ok: R: ckpt rm --daemon of version 1 deleted its marker and objects; version 2's stay\n");
}

static void phase_g(uint64_t v)
{
	s3proxy_reset(&px);
	plan p = { .tag = "g-save", .incarnation = 2, .restore = v - 1, .save_from = v, .save_to = v, .only_rank = -1 };
	int ok = launch(&p);
	CHECK(ok == WORLD, "phase G: %d of %d ranks saved version %llu", ok, WORLD, (unsigned long long)v);
	/* The flush starts on the local commit: once a part is on its way, the
	 * gateway goes, then comes back. */
	int started = s3proxy_wait(&px, "PUT_PART", 1, 20) == 0;
	s3gw_gw_stop(&x, 1);
	usleep(2000000);
	s3gw_gw_start(&x);
	int done = wait_tiers(v, CKPT_TIER_SHARED, 60000);
	CHECK(started && done, "version %llu not committed at shared after the gateway's restart (upload started: %d)",
	      (unsigned long long)v, started);
	if (done && bucket_has(v, 10000))
		fprintf(stderr, "ok: G: the gateway killed mid-upload and restarted 2 s later; version %llu committed at "
		        "shared with every object whole\n", (unsigned long long)v);
}

static int bucket_sane(uint64_t from, uint64_t upto);

/* n1 stopped with SIGTERM while its parts are refused (503 at every try)
 * and would be retried for a minute: it exits 0 at once, without waiting
 * out the retries; no version looks complete that is not; started again,
 * it uploads version v, which commits at shared, and no multipart upload is
 * left in progress. */
static void phase_t(uint64_t v)
{
	rt_stop(&agent[0]);
	setenv("CKPT_S3_RETRY_TOTAL", "60s", 1);
	start_agent(0, NULL);
	setenv("CKPT_S3_RETRY_TOTAL", "8s", 1);
	rt_wait_agents(&env, coord.tcp, 2, 10000);
	s3proxy_reset(&px);
	s3proxy_rule(&px, "{\"kind\":\"PUT_PART\",\"action\":\"status\",\"status\":503,\"times\":0}");
	plan p = { .tag = "t-save", .incarnation = 45, .save_from = v, .save_to = v, .only_rank = -1 };
	int ok = launch(&p);
	int refused = s3proxy_wait(&px, "PUT_PART", 2, 20) == 0;
	uint64_t t = td_ms();
	int rc = rt_stop(&agent[0]); /* -1: it was still there after 10 s, and killed */
	double secs = (td_ms() - t) / 1e3;
	int sane = bucket_sane(v, v) && !has_marker(v);
	CHECK(ok == WORLD && refused && rc == 0 && sane,
	      "phase T: %d of %d ranks saved version %llu, parts refused %d; n1 exited %d %.1f s after SIGTERM "
	      "mid-upload; bucket sane and unmarked %d", ok, WORLD, (unsigned long long)v, refused, rc, secs, sane);
	s3proxy_reset(&px);
	start_agent(0, NULL);
	rt_wait_agents(&env, coord.tcp, 2, 10000);
	int done = wait_tiers(v, CKPT_TIER_SHARED, 60000);
	long left = -1;
	for (int i = 0; i < 100 && (left = s3gw_count_uploads(&g, bucket, "pre/")) != 0; i++)
		usleep(100000);
	CHECK(done && bucket_has(v, 10000) && left == 0,
	      "phase T: after n1's restart version %llu committed at shared %d, %ld uploads left in progress",
	      (unsigned long long)v, done, left);
	if (ok == WORLD && rc == 0 && sane && done && left == 0)
		fprintf(stderr, "ok: T: n1 stopped (SIGTERM) in %.1f s while its parts were being retried; restarted, it "
		        "uploaded version %llu, committed at shared, no upload left\n", secs, (unsigned long long)v);
}

/* After a kill: nothing that looks complete is not (versions from..upto). */
static int bucket_sane(uint64_t from, uint64_t upto)
{
	int ok = 1;
	for (uint64_t v = from; v <= upto; v++) {
		int marked = has_marker(v);
		for (int r = 0; r < WORLD; r++) {
			int st = obj_state(v, r);
			if (st < 0 || (marked && st != 1)) {
				CHECK(0, "version %llu rank %d: %s", (unsigned long long)v, r,
				      st < 0 ? "an object that is not the rank's file" : "marked committed without its object");
				ok = 0;
			}
		}
	}
	return ok;
}

static uint64_t phase_k(uint64_t v)
{
	unsigned seed = (unsigned)getpid();
	int killed_mid = 0, sane = 1, saved = 0, left = 0;
	uint64_t t0 = td_ms(), newest = v - 1;
	for (int round = 0; round < ROUNDS; round++) {
		if (has_marker(newest)) { /* the last one is whole: a new version to upload */
			plan p = { .tag = "k-save", .incarnation = 3 + round, .save_from = newest + 1,
			           .save_to = newest + 1, .only_rank = -1 };
			int ok = launch(&p);
			CHECK(ok == WORLD, "round %d: %d of %d ranks saved version %llu", round, ok, WORLD,
			      (unsigned long long)(newest + 1));
			newest++;
			saved++;
		}
		s3proxy_reset(&px);
		usleep((useconds_t)(200 + rand_r(&seed) % 1200) * 1000);
		killed_mid += s3proxy_count(&px, "PUT_PART", NULL) > 0 && !has_marker(newest);
		rt_kill9(&agent[0]);
		sane &= bucket_sane(newest > 2 ? newest - 1 : 2, newest); /* the older ones were checked */
		left += s3gw_count_uploads(&g, bucket, "pre/") > 0;
		start_agent(0, NULL);
		rt_wait_agents(&env, coord.tcp, 2, 10000);
	}
	int done = wait_tiers(newest, CKPT_TIER_SHARED, 60000);
	CHECK(done, "version %llu not committed at shared after the last kill", (unsigned long long)newest);
	sane &= bucket_sane(2, newest) && bucket_has(newest, 10000);
	CHECK(killed_mid >= ROUNDS / 5, "only %d of %d kills hit an upload in progress", killed_mid, ROUNDS);
	static char out[1 << 16];
	char a[600];
	long before = s3gw_count_uploads(&g, bucket, "pre/");
	snprintf(a, sizeof(a), "gc --root %s --job %s --keep 1000", url, JOB);
	int rc = ckpt_tool(a, out, sizeof(out));
	long after = s3gw_count_uploads(&g, bucket, "pre/");
	CHECK(rc == 0 && after == 0, "ckpt gc --root s3:// exited %d and left %ld uploads (%ld before): %s", rc, after,
	      before, out);
	/* The operator's way through a node's agent: n1's ranks from its own
	 * copies, n2's from the bucket. */
	char dir[700], da[3000];
	snprintf(dir, sizeof(dir), "%s/cli-daemon-restore", env.dir);
	snprintf(da, sizeof(da), "restore --daemon %s --token-file '%s' --job %s --version %llu --shared-dir %s "
	         "--out '%s' --json", agent[0].unixa, env.tokpath, JOB, (unsigned long long)newest, url, dir);
	rc = ckpt_tool(da, out, sizeof(out));
	int exact = 0;
	for (int r = 0; r < WORLD; r++)
		exact += restored_files(dir, r, newest);
	CHECK(rc == 0 && exact == WORLD && strstr(out, "\"from_shared\":2"),
	      "ckpt restore --daemon --shared-dir s3:// exited %d, %d of %d ranks bit-exact: %s", rc, exact, WORLD, out);
	if (done && sane && after == 0)
		fprintf(stderr, "ok: K: n1 killed -9 %d times (%d mid-upload, %d leaving an incomplete upload, %d versions "
		        "saved meanwhile) in %.1f s: no version ever looked complete that was not; version %llu committed at "
		        "shared; gc left no upload (%ld before)\n", ROUNDS, killed_mid, left, saved, (td_ms() - t0) / 1e3,
		        (unsigned long long)newest, before);
	return newest;
}

static void phase_c(uint64_t newest)
{
	for (int k = 0; k < NODES; k++)
		rt_kill9(&agent[k]);
	rt_kill9(&coord);
	for (int k = 0; k < NODES; k++) {
		rmrf_now(ckroot[k]);
		rmrf_now(agent[k].root);
	}
	rmrf_now(coord.root);
	plan p = { .tag = "c-restore", .incarnation = 50, .restore = newest, .embedded = 1, .only_rank = -1 };
	int ok = launch(&p);
	int shared = 0;
	for (int r = 0; r < WORLD; r++)
		shared += log_has(&p, r, "restored from SHARED");
	CHECK(ok == WORLD && shared == WORLD, "phase C: %d of %d ranks restored version %llu from SHARED", shared, WORLD,
	      (unsigned long long)newest);
	char out[700], a[1500];
	static char o[1 << 16];
	snprintf(out, sizeof(out), "%s/cli-restore", env.dir);
	snprintf(a, sizeof(a), "restore --root %s --job %s --out '%s'", url, JOB, out);
	int rc = ckpt_tool(a, o, sizeof(o));
	int exact = 0;
	for (int r = 0; r < WORLD; r++)
		exact += restored_files(out, r, newest);
	CHECK(rc == 0 && exact == WORLD, "ckpt restore --root s3:// exited %d, %d of %d ranks bit-exact: %s", rc, exact,
	      WORLD, o);
	if (ok == WORLD && shared == WORLD && exact == WORLD)
		fprintf(stderr, "ok: C: every agent, root and the coordinator lost; 4 ranks with nothing but the bucket "
		        "restored version %llu bit-exact, and so did ckpt restore --root s3://\n", (unsigned long long)newest);
}

static void phase_l(uint64_t newest)
{
	static const int worlds[] = { 3, 2 };
	for (size_t w = 0; w < sizeof(worlds) / sizeof(worlds[0]); w++) {
		int world = worlds[w], ok = 0, shared = 0;
		pid_t pid[WORLD];
		rmrf_now(ckroot[0]);
		for (int r = 0; r < world; r++) {
			fflush(NULL);
			T_ASSERT((pid[r] = fork()) >= 0);
			if (pid[r] == 0) {
				elastic_main(r, world, newest);
				exit(T_EXIT_PASS);
			}
		}
		for (int r = 0; r < world; r++) {
			int st = 0;
			char log[700], tag[32];
			if (td_wait_pid(pid[r], 90000, &st) < 0) {
				kill(pid[r], SIGKILL);
				waitpid(pid[r], &st, 0);
			}
			snprintf(tag, sizeof(tag), "l-restore-%d", world);
			rank_log(log, sizeof(log), tag, r);
			ok += td_status_code(st) == 0;
			shared += td_file_has(log, 0, "shard from SHARED");
			if (td_status_code(st) != 0) {
				CHECK(0, "phase L: rank %d of %d exited %d", r, world, td_status_code(st));
				td_print_tail(log, 25);
			}
		}
		CHECK(ok == world && shared == world, "phase L: %d of %d ranks resharded version %llu from the bucket "
		      "(%d read shards from SHARED)", ok, world, (unsigned long long)newest, shared);
		if (ok == world && shared == world)
			fprintf(stderr, "ok: L: %d ranks restored their slices of version %llu (saved by 4) from the bucket "
			        "alone, every element exact\n", world, (unsigned long long)newest);
	}
}

static void phase_f(uint64_t newest, uint64_t older)
{
	s3gw_buf b;
	char key[300];
	key_of(key, sizeof(key), newest, 0);
	T_ASSERT(get_obj(newest, 0, &b) == 200 && b.len > 8192);
	b.data[4096 + 1000] ^= 0x01; /* in the first chunk's data */
	T_ASSERT(s3gw_put(&g, bucket, key, b.data, b.len) == 200);
	s3gw_buf_free(&b);
	rmrf_now(ckroot[0]);
	plan p = { .tag = "f-restore", .incarnation = 60, .restore = older, .embedded = 1, .only_rank = 0 };
	int ok = launch(&p);
	int mismatch = log_has(&p, 0, "checksum mismatch"), fell = log_has(&p, 0, "restored an older version");
	CHECK(ok == 1 && mismatch && fell, "phase F: rank 0 (exit ok %d) found the flipped byte %d, fell back %d", ok,
	      mismatch, fell);
	static char o[1 << 16];
	char a[800];
	snprintf(a, sizeof(a), "verify --root %s --job %s --version %llu", url, JOB, (unsigned long long)newest);
	int rc = ckpt_tool(a, o, sizeof(o));
	CHECK(rc == 3 && strstr(o, "checksummismatch"), "ckpt verify --root s3:// of the damaged version exited %d: %s",
	      rc, o);
	if (ok == 1 && mismatch && fell && rc == 3)
		fprintf(stderr, "ok: F: a flipped byte in rank 0's object of version %llu caught by its chunk checksum; "
		        "rank 0 restored version %llu bit-exact instead; ckpt verify exits 3\n", (unsigned long long)newest,
		        (unsigned long long)older);
}

/* Errors name their cause and carry no secret: a wrong secret key, a
 * bucket that does not exist, a malformed URL. */
static void phase_e(void)
{
	static char out[1 << 16];
	char a[1200];
	const char *bad = "wrong0secret0for0this0test0abcdefgh";
	setenv("AWS_SECRET_ACCESS_KEY", bad, 1);
	snprintf(a, sizeof(a), "ls --root %s --job %s", url, JOB);
	int rc = ckpt_tool(a, out, sizeof(out));
	CHECK(rc == 1 && strstr(out, "SignatureDoesNotMatch") && !strstr(out, bad) && !strstr(out, g.secret),
	      "ckpt ls with a wrong secret key exited %d: %s", rc, out);
	setenv("AWS_SECRET_ACCESS_KEY", g.secret, 1);
	snprintf(a, sizeof(a), "ls --root s3://%s-none/pre/ --job %s", bucket, JOB);
	int rc2 = ckpt_tool(a, out, sizeof(out));
	CHECK(rc2 == 1 && strstr(out, "doesnotexist"), "ckpt ls of a missing bucket exited %d: %s", rc2, out);
	int rc3 = ckpt_tool("ls --root s3://Bad_Bucket/x/", out, sizeof(out));
	CHECK(rc3 == 2 && strstr(out, "notanobjectstoreURL"), "ckpt ls of a malformed URL exited %d: %s", rc3, out);
	if (rc == 1 && rc2 == 1 && rc3 == 2)
		fprintf(stderr, "ok: E: a wrong secret (SignatureDoesNotMatch), a missing bucket and a malformed URL each "
		        "refused with their cause named, no secret in the message\n");
}

static void flip_at(const char *path, long off)
{
	int fd = open(path, O_RDWR);
	uint8_t c;
	T_ASSERT(fd >= 0 && pread(fd, &c, 1, off) == 1);
	c ^= 0x01;
	T_ASSERT(pwrite(fd, &c, 1, off) == 1 && fsync(fd) == 0);
	close(fd);
}

static void phase_d(uint64_t v)
{
	/* A cluster again (C took every daemon and root away). */
	long from[NODES];
	T_ASSERT(mkdir(coord.root, 0700) == 0);
	rt_start(&env, &coord);
	for (int k = 0; k < NODES; k++) {
		struct stat st;
		from[k] = stat(agent[k].log, &st) == 0 ? (long)st.st_size : 0;
		T_ASSERT(mkdir(agent[k].root, 0700) == 0);
		start_agent(k, NULL);
	}
	rt_wait_agents(&env, coord.tcp, NODES, 10000);
	s3proxy_reset(&px);
	s3proxy_rule(&px, "{\"kind\":\"HEAD\",\"action\":\"hold\",\"times\":0}");
	plan p = { .tag = "d-save", .incarnation = 70, .save_from = v, .save_to = v, .only_rank = -1 };
	int ok = launch(&p);
	int held = s3proxy_wait(&px, "held", NODES, 30) == 0;
	for (int r = 0; r < WORLD; r++) {
		char f[800];
		shard_in(f, sizeof(f), ckroot[node_of(r)], v, r);
		flip_at(f, part_bytes + (r % 2 ? -100 : 100));
	}
	s3proxy_reset(&px); /* the held requests go on */
	int refused = 0;
	for (int i = 0; i < 300 && refused < NODES; i++) {
		refused = 0;
		for (int k = 0; k < NODES; k++)
			refused += td_file_has(agent[k].log, from[k], "does not verify as it is read") != 0;
		usleep(100000);
	}
	int committed = wait_tiers(v, CKPT_TIER_SHARED, 3000), objects = 0;
	for (int r = 0; r < WORLD; r++)
		objects += obj_state(v, r) != 0;
	CHECK(ok == WORLD && held && refused == NODES && !committed && !objects && !has_marker(v),
	      "phase D: %d ranks saved, flush held %d, %d agents refused the damaged files, committed at shared %d, "
	      "%d objects uploaded", ok, held, refused, committed, objects);
	if (ok == WORLD && held && refused == NODES && !committed && !objects)
		fprintf(stderr, "ok: D: a byte flipped in every rank's file of version %llu, either side of a part "
		        "boundary: both agents refused them as they read, nothing uploaded, never committed at shared\n",
		        (unsigned long long)v);
}

int main(void)
{
	driver = getpid();
	regsize[0] = (3u << 19) + 4097; /* two parts of the gateway's 1 MiB */
	regsize[1] = 8;
	rt_init(&env, "s3-shared");
	const char *bin = getenv("CKPT_BIN");
	char tool[600];
	snprintf(tool, sizeof(tool), "%s/ckpt", bin ? bin : ".");
	if (!bin || access(tool, X_OK) != 0) {
		fprintf(stderr, "skip: no %s\n", tool);
		return T_EXIT_SKIP;
	}
	s3gw_open(&g, env.dir);
	s3gw_new_bucket(&g, "shared", bucket, sizeof(bucket));
	s3gw_gw_add(&g, "sh", &x);
	s3proxy_start(&px, &x, env.dir);
	snprintf(url, sizeof(url), "s3://%s/pre/", bucket);
	/* Every process of the test reaches the bucket through the proxy. */
	char part[32];
	part_bytes = g.min_part > 0 ? g.min_part : 1048576;
	snprintf(part, sizeof(part), "%ld", part_bytes);
	setenv("CKPT_S3_ENDPOINT", px.endpoint, 1);
	setenv("CKPT_S3_REGION", g.region[0] ? g.region : "us-east-1", 1);
	setenv("CKPT_S3_PART_BYTES", part, 1);
	setenv("CKPT_S3_PARTS_IN_FLIGHT", "4", 1);
	setenv("CKPT_S3_TIMEOUT", "3s", 1);
	setenv("CKPT_S3_RETRY_TOTAL", "8s", 1);
	setenv("AWS_ACCESS_KEY_ID", g.access, 1);
	setenv("AWS_SECRET_ACCESS_KEY", g.secret, 1);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("AWS_PROFILE");

	static const char *const cargs[] = { "--role", "coordinator", "--agent-grace", "300s", "--retention-interval", "0",
	                                     NULL };
	rt_daemon_on(&env, &coord, "coord", "127.0.0.1", cargs);
	rt_start(&env, &coord);
	for (int k = 0; k < NODES; k++)
		start_agent(k, NULL);
	rt_wait_agents(&env, coord.tcp, 2, 10000);

	uint64_t t0 = td_ms();
#define PHASE(name, call) do { uint64_t t_ = td_ms(); call; \
	fprintf(stderr, "phase %s: %.1f s (%.1f s in all)\n", name, (td_ms() - t_) / 1e3, (td_ms() - t0) / 1e3); } while (0)
	uint64_t newest = 0;
	PHASE("A", phase_a());
	PHASE("S", phase_s());
	PHASE("R", phase_r());
	PHASE("G", phase_g(3));
	PHASE("T", phase_t(4));
	PHASE("K", newest = phase_k(5));
	PHASE("C", phase_c(newest));
	PHASE("L", phase_l(newest));
	PHASE("F", phase_f(newest, newest - 1));
	PHASE("E", phase_e());
	PHASE("D", phase_d(newest + 1));

	for (int k = 0; k < NODES; k++)
		if (agent[k].pid > 0)
			rt_kill9(&agent[k]);
	s3proxy_stop(&px);
	s3gw_close(&g);
	ckptd_secret_free(env.cluster);
	if (failures) {
		fprintf(stderr, "%d check(s) failed; logs kept in %s\n", failures, env.dir);
		return T_EXIT_FAIL;
	}
	if (!getenv("CKPT_TEST_KEEP"))
		t_rmrf(env.dir);
	return T_EXIT_PASS;
}
