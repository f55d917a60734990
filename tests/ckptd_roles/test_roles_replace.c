/* --replace-stragglers end to end: a coordinator started with
 * --straggler-windows 3 --replace-stragglers, agents n1..n3 on
 * 127.0.0.1..3 (node and peer pools) and a spare n4 (--spare) on
 * 127.0.0.4, and four libckpt ranks (0 and 1 on n1, 2 on n2, 3 on n3) in a
 * training loop that calls ckpt_step every step, saves when it says SAVE
 * and leaves when it says EXIT. Rank 2 takes twice as long a step as the
 * others, all along.
 *
 * Checked: rank 2 is judged a persistent straggler and its node replaced:
 * - every rank leaves through EXIT after saving the same emergency step S,
 *   committed at PEER_MEM with no partner copy on n2 (out of placement);
 * - the coordinator decides straggler-replaced on n2 with rank 2 and its
 *   evidence, a new epoch, in the events stream followed by spare-chosen
 *   and spare-ready (n4) under that epoch; ckpt_straggler_replacements
 *   counts it (the log says so);
 * - n4 pulls rank 2's version S into its DRAM before any relaunch;
 * - relaunched, rank 2 on n4 restores S from LOCAL_MEM bit-exact, and ranks
 *   0, 1, 3 on their nodes restore S bit-exact.
 * Exit 0 / 1 / 77 (no tcp;ofi_rxm provider). */
#include "roles_test.h"
#include "rank_proc.h"
#include "train_loop.h"

#include <ckpt.h>

#define JOB "rps"
#define WORLD 4
#define NODES 4 /* n4: the spare */
#define SLOW 2
#define STEP_MS 40
#define REGION ((256u << 10) + 4099u)

static rt_env env;
static daemon_t coord, agent[NODES];
static char ckroot[NODES][600];
static int failures;
static pid_t driver;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } while (0)

static int node_of(int rank)
{
	return rank < 2 ? 0 : rank - 1;
}

static void fill(uint8_t *b, int rank, uint64_t step)
{
	t_fill(b, REGION, (uint64_t)rank * 1000003u + step * 7919u + 17);
}

static void rank_env(const char *tag, int rank, int node)
{
	rp_rank r = { env.dir, tag, JOB, rank, WORLD, 0, ckroot[node], agent[node].unixa,
	              "local_mem,peer_mem,local_disk", env.tokpath, 150 };
	rp_child_setup(driver, &r);
	tl_env();
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
			tl_train(rank, rep, REGION, rank == SLOW ? 2 * STEP_MS : STEP_MS, 20, 0, fill);
		exit(T_EXIT_PASS);
	}
	return (proc){ pid, rep };
}

static ckptd_client *coord_cli(void)
{
	ckptd_secret *js = rt_job_secret(&env, JOB);
	ckptd_client *c = rt_connect(coord.tcp, JOB, CKPTD_ROLE_CLI, js);
	ckptd_secret_free(js);
	return c;
}

/* The newest COMMITTED version and its tiers. */
static uint64_t newest_committed(uint32_t *tiers)
{
	ckptd_client *c = coord_cli();
	ckptd_msg m = { .type = CKPTD_MSG_LIST_VERSIONS }, rep;
	snprintf(m.u.list_versions.job, sizeof(m.u.list_versions.job), "%s", JOB);
	uint64_t best = 0;
	if (ckptd_client_call(c, &m, &rep) == 0 && rep.type == CKPTD_MSG_VERSIONS)
		for (uint32_t i = 0; i < rep.u.versions.count; i++) {
			const ckptd_version_info *v = &rep.u.versions.entries[i];
			if (v->state == CKPT_STATE_COMMITTED && v->version > best) {
				best = v->version;
				*tiers = v->tiers;
			}
		}
	ckptd_msg_free(&rep);
	ckptd_client_close(c);
	return best;
}

/* A mask over agent[] of the nodes holding partner copies of version v. */
static int peer_nodes(uint64_t v)
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
				if (e->tier == CKPT_TIER_PEER_MEM && !strcmp(e->node, agent[k].name))
					mask |= 1 << k;
		}
	ckptd_msg_free(&rep);
	ckptd_client_close(c);
	return mask;
}

/* The job's kept events, in order: kinds, nodes, epochs, the first one's
 * text of each kind. */
typedef struct ev {
	uint32_t kind;
	uint64_t epoch;
	char node[CKPTD_NAME_MAX + 1];
	char text[CKPTD_TEXT_MAX + 1];
	char ranks[64];
} ev;

typedef struct ev_acc {
	ev *out;
	int n, cap;
} ev_acc;

static void ev_take(void *arg, const ckptd_event *e)
{
	ev_acc *a = arg;
	if (a->n == a->cap)
		return;
	ev *x = &a->out[a->n++];
	x->kind = e->kind;
	x->epoch = e->epoch;
	snprintf(x->node, sizeof(x->node), "%s", e->node);
	snprintf(x->text, sizeof(x->text), "%s", e->text);
	x->ranks[0] = '\0';
	for (uint32_t k = 0; k < e->count; k++) {
		size_t l = strlen(x->ranks);
		snprintf(x->ranks + l, sizeof(x->ranks) - l, "%s%u", k ? "," : "", e->entries[k].rank);
	}
}

static int events(ev *out, int cap)
{
	ev_acc a = { out, 0, cap };
	rt_events(coord_cli(), JOB, ev_take, &a);
	return a.n;
}

static void start_daemons(void)
{
	static const char *const cargs[] = { "--role", "coordinator", "--agent-grace", "300s", "--straggler-windows", "3",
		                                 "--replace-stragglers", "--preempt-deadline", "60s", NULL };
	rt_daemon_on(&env, &coord, "coord", "127.0.0.1", cargs);
	rt_start(&env, &coord);
	static const char *aargs[NODES][16];
	for (int k = 0; k < NODES; k++) {
		char name[16], host[32];
		snprintf(name, sizeof(name), "n%d", k + 1);
		snprintf(host, sizeof(host), "127.0.0.%d", k + 1);
		const char *a[] = { "--role", "agent", "--coordinator", coord.tcp, "--pool-size", "32M", "--peer-pool-size",
			                "32M", k == NODES - 1 ? "--spare" : NULL, NULL };
		memcpy(aargs[k], a, sizeof(a));
		rt_daemon_on(&env, &agent[k], name, host, aargs[k]);
		rt_start(&env, &agent[k]);
		snprintf(ckroot[k], sizeof(ckroot[k]), "%s/%s.ckpt", env.dir, name);
	}
	rt_wait_agents(&env, coord.tcp, NODES, 10000);
}

static int wait_log(const daemon_t *d, const char *needle, int ms)
{
	for (uint64_t end = td_ms() + (uint64_t)ms; td_ms() < end; usleep(50000))
		if (td_log_has(d, needle))
			return 1;
	return td_log_has(d, needle);
}

static void run(void)
{
	proc p[WORLD];
	for (int r = 0; r < WORLD; r++)
		p[r] = spawn("train", r, node_of(r), 0);
	/* Judged, found persistent, its node's emergency: every rank leaves. */
	uint64_t last[WORLD];
	for (int r = 0; r < WORLD; r++) {
		char line[64] = "";
		size_t n = 0;
		char c;
		while (n + 1 < sizeof(line) && (c = rp_get(p[r].rep, 90000)) && c != '\n')
			if (c != 'S' && c != 'R')
				line[n++] = c;
		unsigned long long e = 0, l = 0;
		CHECK(sscanf(line, "E %llu %llu", &e, &l) == 2, "rank %d did not leave through EXIT (got '%s')", r, line);
		last[r] = l;
		int st;
		CHECK(td_wait_pid(p[r].pid, 30000, &st) == 0 && td_status_code(st) == 0, "rank %d exited %d", r,
		      td_status_code(st));
		close(p[r].rep);
	}
	uint64_t S = last[0];
	for (int r = 1; r < WORLD; r++)
		CHECK(last[r] == S, "rank %d's last save is step %llu, rank 0's %llu: not one emergency step", r,
		      (unsigned long long)last[r], (unsigned long long)S);
	CHECK(td_log_has(&coord, "persistent straggler: rank 2"), "the coordinator named no persistent straggler");
	CHECK(td_log_has(&coord, "replacing node n2 (--replace-stragglers)"), "the coordinator did not replace n2");
	uint32_t tiers = 0;
	uint64_t newest = newest_committed(&tiers);
	CHECK(newest == S && (tiers & CKPT_TIER_PEER_MEM), "newest committed version %llu (tiers 0x%x); want the "
	      "emergency step %llu at PEER_MEM", (unsigned long long)newest, tiers, (unsigned long long)S);
	int where = peer_nodes(S);
	CHECK(where && !(where & 2), "partner copies of version %llu on nodes 0x%x: none may be on n2",
	      (unsigned long long)S, where);
	/* The decision, then the spare's pull, before any relaunch. */
	CHECK(wait_log(&coord, "decided: straggler-replaced on n2, ranks 2", 20000),
	      "no straggler-replaced decision for n2 in the coordinator's log");
	CHECK(wait_log(&agent[3], "pulled into this node's DRAM in", 20000), "the spare n4 pulled nothing");
	ev e[64];
	int ne = 0, have_ready = 0;
	for (uint64_t end = td_ms() + 10000; td_ms() < end && !have_ready; usleep(100000)) {
		ne = events(e, 64);
		for (int i = 0; i < ne; i++)
			have_ready |= e[i].kind == CKPTD_FAIL_SPARE_READY;
	}
	int at = -1;
	for (int i = 0; i < ne; i++)
		if (e[i].kind == CKPTD_FAIL_STRAGGLER)
			at = i;
	CHECK(at >= 0, "no straggler-replaced event among %d", ne);
	if (at >= 0) {
		CHECK(!strcmp(e[at].node, "n2") && !strcmp(e[at].ranks, "2") && strstr(e[at].text, "persistent straggler "
		      "rank 2") && strstr(e[at].text, "safe off the node"), "straggler-replaced event: node %s ranks %s: %s",
		      e[at].node, e[at].ranks, e[at].text);
		int chosen = 0, ready = 0;
		for (int i = at + 1; i < ne; i++) {
			chosen |= e[i].kind == CKPTD_FAIL_SPARE_CHOSEN && e[i].epoch == e[at].epoch && !strcmp(e[i].node, "n4");
			ready |= e[i].kind == CKPTD_FAIL_SPARE_READY && e[i].epoch == e[at].epoch && !strcmp(e[i].node, "n4") &&
			         chosen;
		}
		CHECK(chosen && ready, "after the decision (epoch %llu): spare-chosen n4 %d, spare-ready n4 %d",
		      (unsigned long long)e[at].epoch, chosen, ready);
	}
	/* The job again: rank 2 on the spare, the others where they were. */
	proc q[WORLD];
	for (int r = 0; r < WORLD; r++)
		q[r] = spawn("restore", r, r == SLOW ? 3 : node_of(r), S);
	int ok = 0;
	for (int r = 0; r < WORLD; r++) {
		int st;
		ok += td_wait_pid(q[r].pid, 60000, &st) == 0 && td_status_code(st) == 0;
		close(q[r].rep);
	}
	CHECK(ok == WORLD, "%d of %d relaunched ranks restored version %llu bit-exact", ok, WORLD, (unsigned long long)S);
	char log[700];
	rp_log_path(log, sizeof(log), env.dir, "restore", SLOW);
	CHECK(td_file_has(log, 0, "restored from LOCAL_MEM"), "rank 2 on the spare did not restore from its DRAM (%s)",
	      log);
	if (!failures)
		fprintf(stderr, "ok: rank 2 (2x slower) judged a persistent straggler, every rank saved step %llu and left, "
		        "n2 replaced by n4 (decision, spare-chosen, spare-ready), rank 2 restored there from LOCAL_MEM, the "
		        "others in place, all bit-exact\n", (unsigned long long)S);
}

int main(void)
{
	driver = getpid();
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("CKPT_FABRIC_PROVIDER", "tcp;ofi_rxm", 1);
	if (system("fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1") != 0) {
		fprintf(stderr, "skip: needs libfabric's tcp;ofi_rxm provider\n");
		return T_EXIT_SKIP;
	}
	rt_init(&env, "roles-replace");
	start_daemons();
	run();
	for (int k = 0; k < NODES; k++)
		rt_kill9(&agent[k]);
	rt_kill9(&coord);
	ckptd_secret_free(env.cluster);
	if (failures) {
		fprintf(stderr, "%d check(s) failed; logs kept in %s\n", failures, env.dir);
		return T_EXIT_FAIL;
	}
	if (!getenv("CKPT_TEST_KEEP"))
		t_rmrf(env.dir);
	return T_EXIT_PASS;
}
