/* A libckpt rank process that follows a plan, for the tests of several
 * nodes (test_cluster through cluster_test.h, test_roles_peer): restore the
 * newest version (checked byte for byte, or expected out of reach), save a
 * run of versions, then exit or hold until killed. Its parent hears 'S'
 * before each save and 'D' when it is done. Its state, one region of
 * `bytes` and an 8-byte step, is a function of (job, rank, version). */
#ifndef CKPTD_ROLES_RANK_PLAN_H
#define CKPTD_ROLES_RANK_PLAN_H

#include "rank_proc.h"

#include <ckpt.h>

#define RK_WAIT_MS 30000

/* What one rank process does, in order. */
typedef struct rk_plan {
	const char *tag;       /* names the log */
	const char *job;
	int rank, world;
	int node;              /* the test's node it runs on */
	const char *root;      /* NULL: its node's root */
	const char *tiers;     /* NULL: local_mem,peer_mem,local_disk */
	size_t bytes;          /* of its one big region */
	int incarnation;
	uint64_t restore;      /* expect CKPT_LATEST to give this (0: no restore) */
	int restore_delay_ms;  /* before restoring (a trainer building its model) */
	const char *restore_after_log, *restore_after_line; /* and until this log has this line (60 s at most) */
	int unreachable;       /* instead: expect -CKPT_EUNREACHABLE */
	uint64_t from, to;     /* then save these (0: none) */
	int wait_peer;         /* wait for each at PEER_MEM (else LOCAL_DISK) */
	int hold;              /* then wait to be killed */
	const char *order;     /* CKPT_RESTORE_ORDER */
	const char *fault;     /* CKPT_FAULT of the rank */
	const char *shared_dir; /* CKPT_SHARED_DIR of the rank (NULL: none) */
	int gap_ms;            /* between saves (a training step) */
	int report;            /* log each save's tiers reached and failed once PEER_MEM settled */
	int peer_timeout_ms;   /* CKPT_PEER_TIMEOUT_MS; 0: 5000 */
	int steps;             /* after the restore: this many ckpt_step calls, 20 ms apart (steps
	                          1..steps: the first step's report reaches the coordinator) */
} rk_plan;

typedef struct rk_proc {
	pid_t pid;
	int rep;               /* 'S' before each save, 'D' when done */
	const rk_plan *p;
} rk_proc;

/* Where a plan runs: the test's directory (logs) and token, the test's
 * process, and the rank's root, agent and network namespace (NULL: the
 * test's own). */
typedef struct rk_where {
	const char *dir, *tokpath;
	pid_t driver;
	const char *root, *agent_unix, *netns;
} rk_where;

/* The bytes of (job, rank, version): the same in every process. */
static inline void rk_fill(uint8_t **b, const rk_plan *p, uint64_t v)
{
	uint64_t seed = (uint64_t)p->rank * 1000003u + v * 7919u + (uint64_t)p->job[0] * 131u + 1;
	t_fill(b[0], p->bytes, seed);
	uint64_t step = v << 32 | (uint64_t)p->rank;
	memcpy(b[1], &step, sizeof(step));
}

static inline void rk_log(const char *dir, const rk_plan *p, char *buf, size_t cap)
{
	char tag[128];
	snprintf(tag, sizeof(tag), "%s.%s", p->tag, p->job);
	rp_log_path(buf, cap, dir, tag, p->rank);
}

static inline int rk_log_has(const char *dir, const rk_plan *p, const char *needle)
{
	char log[700];
	rk_log(dir, p, log, sizeof(log));
	return td_file_has(log, 0, needle);
}

static inline void rk_restore(ckpt_ctx *ctx, const rk_plan *p, uint8_t **b, uint8_t **want, const char *const *names,
                              const size_t *sizes)
{
	uint64_t got = 0;
	usleep((useconds_t)p->restore_delay_ms * 1000);
	for (int i = 0; p->restore_after_log && i < 1200 && !td_file_has(p->restore_after_log, 0, p->restore_after_line); i++)
		usleep(50 * 1000);
	if (p->unreachable) {
		int r = ckpt_restore(ctx, CKPT_LATEST, 0, &got);
		if (r != -CKPT_EUNREACHABLE)
			T_FAIL("rank %d: restore gave %d (%s), want -CKPT_EUNREACHABLE", p->rank, r, ckpt_strerror(r));
		fprintf(stderr, "rank %d: restore refused as it must: %s\n", p->rank, ckpt_strerror(r));
		return;
	}
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	if (got != p->restore)
		T_FAIL("rank %d restored version %llu, not %llu", p->rank, (unsigned long long)got,
		       (unsigned long long)p->restore);
	rk_fill(want, p, got);
	for (int i = 0; i < 2; i++)
		if (memcmp(b[i], want[i], sizes[i]) != 0)
			T_FAIL("rank %d: region '%s' differs from version %llu", p->rank, names[i], (unsigned long long)got);
	fprintf(stderr, "rank %d: version %llu restored bit-exact\n", p->rank, (unsigned long long)got);
}

/* Version v saved and waited for (and, with report, its status logged). */
static inline void rk_save(ckpt_ctx *ctx, const rk_plan *p, uint64_t v)
{
	ckpt_handle *h;
	ckpt_status st = { .size = sizeof(st) };
	T_OK(ckpt_save(ctx, v, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, RK_WAIT_MS, &st));
	if (p->wait_peer) {
		st.size = sizeof(st);
		int r = ckpt_handle_wait(h, CKPT_TIER_PEER_MEM, RK_WAIT_MS, &st);
		if (r != 0)
			T_FAIL("rank %d: version %llu not committed at PEER_MEM: %s", p->rank, (unsigned long long)v,
			       ckpt_strerror(r));
		T_ASSERT(st.tier == CKPT_TIER_PEER_MEM && st.error == 0 && st.committed);
	}
	if (p->report) {
		/* The handle's status says where this rank's copy got to. */
		uint64_t end = td_ms() + RK_WAIT_MS;
		do {
			st.size = sizeof(st);
			(void)ckpt_handle_test(h, CKPT_TIER_LOCAL_DISK, &st);
		} while (!((st.tiers_reached | st.tiers_failed) & CKPT_TIER_PEER_MEM) && td_ms() < end &&
		         usleep(20000) == 0);
		fprintf(stderr, "save v%llu: tiers reached 0x%x failed 0x%x\n", (unsigned long long)v, st.tiers_reached,
		        st.tiers_failed);
	}
	ckpt_handle_free(h);
}

static inline void rk_rank_main(const rk_plan *p, int rep)
{
	static const char *const names[] = { "weights", "step" };
	size_t sizes[2] = { p->bytes, 8 };
	uint8_t *b[2], *want[2];
	for (int i = 0; i < 2; i++) {
		T_ASSERT((b[i] = malloc(sizes[i])) && (want[i] = malloc(sizes[i])));
		memset(b[i], 0xa5, sizes[i]);
	}
	ckpt_ctx *ctx = rp_open(names, b, sizes, 2);
	if (p->restore || p->unreachable)
		rk_restore(ctx, p, b, want, names, sizes);
	for (int i = 1; i <= p->steps; i++) {
		usleep(20000);
		(void)ckpt_step(ctx, (uint64_t)i);
	}
	for (uint64_t v = p->from; v && v <= p->to; v++) {
		rk_fill(b, p, v);
		rp_put(rep, 'S');
		rk_save(ctx, p, v);
		usleep((useconds_t)p->gap_ms * 1000);
	}
	rp_put(rep, 'D');
	if (p->hold) {
		pause();
		T_FAIL("rank %d: still alive", p->rank);
	}
	T_OK(ckpt_ctx_close(ctx));
	for (int i = 0; i < 2; i++) {
		free(b[i]);
		free(want[i]);
	}
}

static inline void rk_spawn(const rk_where *w, rk_proc *pr, const rk_plan *p)
{
	int rep;
	pid_t pid = rp_fork(&rep);
	if (pid == 0) {
		if (w->netns && td_enter_netns(w->netns) < 0)
			_exit(T_EXIT_FAIL);
		char tag[128];
		snprintf(tag, sizeof(tag), "%s.%s", p->tag, p->job);
		rp_rank r = { w->dir, tag, p->job, p->rank, p->world, p->incarnation, w->root, w->agent_unix,
		              p->tiers ? p->tiers : "local_mem,peer_mem,local_disk", w->tokpath, 150 };
		rp_child_setup(w->driver, &r);
		setenv("CKPT_CHUNK_BYTES", "64K", 1);
		setenv("CKPT_STAGING_BYTES", "8M", 1);
		setenv("CKPT_WORKERS", "1", 1);
		char pt[16];
		snprintf(pt, sizeof(pt), "%d", p->peer_timeout_ms ? p->peer_timeout_ms : 5000);
		setenv("CKPT_PEER_TIMEOUT_MS", pt, 1);
		if (w->netns)
			setenv("FI_TCP_IFACE", "lo", 1); /* what broke the peer tier between nodes */
		if (p->order)
			setenv("CKPT_RESTORE_ORDER", p->order, 1);
		if (p->fault)
			setenv("CKPT_FAULT", p->fault, 1);
		if (p->shared_dir)
			setenv("CKPT_SHARED_DIR", p->shared_dir, 1);
		rk_rank_main(p, rep);
		exit(T_EXIT_PASS);
	}
	*pr = (rk_proc){ pid, rep, p };
}

/* Waits for the rank's 'D' and, unless it holds, its exit 0. Returns 1 if
 * it got there; else counts a failure in *failures and shows its log. */
static inline int rk_finish(const char *dir, int *failures, rk_proc *pr)
{
	char log[700], c;
	int st = 0;
	rk_log(dir, pr->p, log, sizeof(log));
	while ((c = rp_get(pr->rep, 90000)) == 'S')
		;
	if (c != 'D') {
		kill(pr->pid, SIGKILL);
		waitpid(pr->pid, &st, 0);
		fprintf(stderr, "FAIL: %s: rank %d of %s did not finish (status %d)\n", pr->p->tag, pr->p->rank, pr->p->job,
		        td_status_code(st));
		(*failures)++;
		td_print_tail(log, 25);
		return 0;
	}
	if (pr->p->hold)
		return 1;
	close(pr->rep);
	if (td_wait_pid(pr->pid, 60000, &st) < 0 || td_status_code(st) != 0) {
		fprintf(stderr, "FAIL: %s: rank %d of %s exited %d\n", pr->p->tag, pr->p->rank, pr->p->job,
		        td_status_code(st));
		(*failures)++;
		td_print_tail(log, 25);
		return 0;
	}
	return 1;
}

#endif
