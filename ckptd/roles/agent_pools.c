/* One DRAM pool per job on an agent. A pool's memfd grants all of its
 * memory to whoever holds it, so jobs get separate pools: a rank of job A is
 * never handed a descriptor through which job B's shards can be read.
 *
 * A job's pool is made when its first rank registers on the Unix socket,
 * on a thread of its own (pre-faulting takes seconds per GiB on some
 * machines, and the event loop must not stall for it); the thread says it is
 * done through a pipe the event loop watches. So that a job's first save
 * does not wait for that, --pools-ahead pools (job "") are made when the
 * agent starts, and again whenever one is taken: the next new job takes one
 * (ready, or part of the way there), never having been handed to anyone,
 * so no job's bytes pass to another. Every pool counts against the
 * node budget (--pool-size). When a new job does not fit, pools of jobs with
 * no rank left on the node are released, least recently used first: their
 * DRAM copies go (the evict callback hears each one), disk copies stay. */
#include "roles_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { JP_PREPARING = 1, JP_READY };

typedef struct jpool {
	struct jpool *next;
	ckptd_jpools *owner;
	char job[CKPTD_JOB_MAX + 1]; /* "": made ahead, no job's yet */
	char name[16 + CKPTD_JOB_MAX]; /* its memfd's, fixed before the thread starts */
	uint64_t bytes;
	int state;
	int err;                 /* the thread's result */
	int cancel;              /* set (atomically) to stop the pre-fault: the agent stops */
	ckptd_pool *pool;        /* JP_READY */
	uint32_t users;          /* registered rank sessions of the job */
	uint64_t idle_since_ns;
	pthread_t thr;
	int pipe[2];
} jpool;

struct ckptd_jpools {
	ckptd_server *srv;
	const ckptd_config *cfg;
	const ckptd_log *log;
	ckpt_faults *faults;
	ckptd_pool_evict_fn on_evict;
	void *evict_arg;
	ckptd_jpools_ready_fn on_ready;
	void *ready_arg;
	jpool *list;
	uint64_t committed; /* bytes of every pool, prepared or being prepared */
};

static uint64_t job_bytes(const ckptd_jpools *p)
{
	uint64_t b = p->cfg->job_pool_size ? p->cfg->job_pool_size : p->cfg->pool_size;
	return b < p->cfg->pool_size ? b : p->cfg->pool_size;
}

static jpool *find(ckptd_jpools *p, const char *job)
{
	for (jpool *j = p->list; j; j = j->next)
		if (j->job[0] && !strcmp(j->job, job))
			return j;
	return NULL;
}

static jpool *find_ahead(ckptd_jpools *p)
{
	jpool *best = NULL;
	for (jpool *j = p->list; j; j = j->next)
		if (!j->job[0] && (!best || j->state == JP_READY))
			best = j;
	return best;
}

static void unlink_free(ckptd_jpools *p, jpool *j)
{
	for (jpool **pp = &p->list; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	p->committed -= j->bytes;
	free(j);
}

static void *prepare_main(void *arg)
{
	jpool *j = arg;
	/* j->job is not read here: the loop may hand a pool made ahead to a
	 * job while it is made. */
	ckptd_pool_opts po = { .size = sizeof(po), .bytes = j->bytes, .huge = CKPTD_POOL_HUGE_AUTO, .name = j->name,
	                       .on_evict = j->owner->on_evict, .evict_arg = j->owner->evict_arg,
	                       .cancel = &j->cancel };
	/* Tests: a slow preparation (delay:MS), requests waiting on it. */
	j->err = ckpt__fault(j->owner->faults, "agent.pool_prepare");
	if (j->err == 0)
		j->err = ckptd_pool_open(&j->pool, &po);
	char one = 1;
	while (write(j->pipe[1], &one, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static void on_prepared(ckptd_server *srv, int fd, uint32_t events, void *arg)
{
	(void)events;
	jpool *j = arg;
	ckptd_jpools *p = j->owner;
	char b;
	if (read(fd, &b, 1) != 1 && errno == EAGAIN)
		return;
	ckptd_server_unwatch(srv, fd);
	pthread_join(j->thr, NULL);
	close(j->pipe[0]);
	close(j->pipe[1]);
	char job[CKPTD_JOB_MAX + 1];
	snprintf(job, sizeof(job), "%s", j->job);
	int err = j->err;
	if (err < 0 && !job[0]) {
		CKPTD_WARN(p->log, NULL, NULL, "cannot prepare a %llu-byte DRAM pool ahead of the next job: %s; a job's "
		           "pool is made when its first rank registers", (unsigned long long)j->bytes, strerror(-err));
		unlink_free(p, j); /* not again until one is taken */
		return;
	}
	if (err < 0) {
		CKPTD_ERROR(p->log, NULL, job, "cannot prepare a %llu-byte DRAM pool: %s; this job's ranks write to disk only",
		            (unsigned long long)j->bytes, strerror(-err));
		unlink_free(p, j); /* the next registration tries again */
	} else {
		j->state = JP_READY;
		ckptd_pool_stats st;
		ckptd_pool_stats_get(j->pool, &st);
		CKPTD_INFO(p->log, NULL, job[0] ? job : NULL, "DRAM pool ready%s: %llu bytes%s%s",
		           job[0] ? "" : " ahead of the next job", (unsigned long long)st.bytes,
		           st.hugetlb ? ", huge pages" : "", st.locked ? ", locked" : "");
	}
	if (p->on_ready && job[0])
		p->on_ready(p->ready_arg, job, err);
}

/* A pool is releasable when no rank of its job is registered and nothing in
 * it is being written or read. */
static int releasable(jpool *j)
{
	if (j->state != JP_READY || j->users)
		return 0;
	size_t n = 0;
	ckptd_pool_list(j->pool, NULL, 0, &n);
	if (!n)
		return 1;
	ckptd_seg_info *segs = calloc(n, sizeof(*segs));
	if (!segs)
		return 0;
	size_t got = n;
	ckptd_pool_list(j->pool, segs, n, &got);
	int ok = 1;
	for (size_t i = 0; i < n && i < got; i++)
		if (segs[i].pins || segs[i].state == CKPTD_SEG_WRITING)
			ok = 0;
	free(segs);
	return ok;
}

static void release(ckptd_jpools *p, jpool *j, const char *for_job)
{
	size_t n = 0;
	ckptd_pool_list(j->pool, NULL, 0, &n);
	ckptd_seg_info *segs = n ? calloc(n, sizeof(*segs)) : NULL;
	size_t got = n;
	if (segs) {
		ckptd_pool_list(j->pool, segs, n, &got);
		/* The copies are gone: the agent's records and the coordinator hear so. */
		for (size_t i = 0; i < got && i < n && p->on_evict; i++)
			p->on_evict(p->evict_arg, &segs[i]);
	}
	CKPTD_INFO(p->log, NULL, j->job, "DRAM pool released (%zu segments) to make room for job %s: no rank of %s is left on this node",
	           got < n ? got : n, for_job, j->job);
	free(segs);
	ckptd_pool_close(j->pool);
	unlink_free(p, j);
}

/* A pool of want bytes for job ("": ahead of one), its preparation started
 * on a thread of its own. */
static int prepare(ckptd_jpools *p, const char *job, uint64_t want, jpool **out)
{
	jpool *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->owner = p;
	snprintf(j->job, sizeof(j->job), "%s", job);
	snprintf(j->name, sizeof(j->name), "ckptd-job-%s", job[0] ? job : "ahead");
	j->bytes = want;
	j->state = JP_PREPARING;
	j->users = job[0] ? 1 : 0;
	if (pipe2(j->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		int e = -errno;
		free(j);
		return e;
	}
	int r = ckptd_server_watch(p->srv, j->pipe[0], on_prepared, j);
	if (r == 0 && (r = -pthread_create(&j->thr, NULL, prepare_main, j)) < 0)
		ckptd_server_unwatch(p->srv, j->pipe[0]);
	if (r < 0) {
		close(j->pipe[0]);
		close(j->pipe[1]);
		free(j);
		return r;
	}
	j->next = p->list;
	p->list = j;
	p->committed += want;
	*out = j;
	return 0;
}

/* Pools made ahead, up to --pools-ahead, where the budget has room. */
static void top_up(ckptd_jpools *p)
{
	uint64_t want = job_bytes(p);
	uint32_t have = 0;
	for (jpool *j = p->list; j; j = j->next)
		have += !j->job[0];
	jpool *j;
	while (want && have < p->cfg->pools_ahead && p->cfg->pool_size - p->committed >= want &&
	       prepare(p, "", want, &j) == 0) {
		have++;
		CKPTD_INFO(p->log, NULL, NULL, "preparing a %llu-byte DRAM pool ahead of the next job",
		           (unsigned long long)want);
	}
}

int ckptd_jpools_ref(ckptd_jpools *p, const char *job)
{
	jpool *j = find(p, job);
	if (j) {
		j->users++;
		return 0;
	}
	if (!job[0])
		return -EINVAL;
	uint64_t want = job_bytes(p);
	if (!want)
		return -ENOSPC;
	/* One made ahead: the job's now, ready or on its way. */
	if ((j = find_ahead(p))) {
		snprintf(j->job, sizeof(j->job), "%s", job);
		j->users = 1;
		CKPTD_INFO(p->log, NULL, job, "this job takes a %llu-byte DRAM pool made ahead (%s)",
		           (unsigned long long)j->bytes, j->state == JP_READY ? "ready" : "still being pre-faulted");
		top_up(p);
		return 0;
	}
	/* Make room: idle jobs' pools, least recently used first. */
	while (p->cfg->pool_size - p->committed < want) {
		jpool *victim = NULL;
		for (jpool *k = p->list; k; k = k->next)
			if (releasable(k) && (!victim || k->idle_since_ns < victim->idle_since_ns))
				victim = k;
		if (!victim)
			break;
		release(p, victim, job);
	}
	if (p->cfg->pool_size - p->committed < want) {
		CKPTD_WARN(p->log, NULL, job, "no DRAM pool for this job: %llu of %llu bytes are other jobs' pools in use; "
		           "its ranks write to disk only", (unsigned long long)p->committed,
		           (unsigned long long)p->cfg->pool_size);
		return -ENOSPC;
	}
	int r = prepare(p, job, want, &j);
	if (r < 0)
		return r;
	CKPTD_INFO(p->log, NULL, job, "preparing a %llu-byte DRAM pool for this job", (unsigned long long)want);
	return 0;
}

void ckptd_jpools_unref(ckptd_jpools *p, const char *job)
{
	jpool *j = find(p, job);
	if (j && j->users && --j->users == 0)
		j->idle_since_ns = ckpt__now_ns();
}

ckptd_pool *ckptd_jpools_get(ckptd_jpools *p, const char *job, int *preparing)
{
	jpool *j = find(p, job);
	if (preparing)
		*preparing = j && j->state == JP_PREPARING;
	return j && j->state == JP_READY ? j->pool : NULL;
}

void ckptd_jpools_used(ckptd_jpools *p, uint64_t *used)
{
	*used = 0;
	for (jpool *j = p->list; j; j = j->next)
		if (j->state == JP_READY) {
			ckptd_pool_stats st;
			ckptd_pool_stats_get(j->pool, &st);
			*used += st.used;
		}
}

void ckptd_jpools_each(ckptd_jpools *p, void (*fn)(void *arg, const char *job, const ckptd_pool_stats *st), void *arg)
{
	for (jpool *j = p->list; j; j = j->next)
		if (j->state == JP_READY && j->job[0]) {
			ckptd_pool_stats st;
			ckptd_pool_stats_get(j->pool, &st);
			fn(arg, j->job, &st);
		}
}

int ckptd_jpools_new(ckptd_server *srv, const ckptd_config *cfg, const ckptd_log *log, ckpt_faults *faults,
                     ckptd_pool_evict_fn on_evict, void *evict_arg, ckptd_jpools_ready_fn on_ready, void *ready_arg,
                     ckptd_jpools **out)
{
	ckptd_jpools *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	*p = (ckptd_jpools){ srv, cfg, log, faults, on_evict, evict_arg, on_ready, ready_arg, NULL, 0 };
	*out = p;
	top_up(p);
	return 0;
}

void ckptd_jpools_free(ckptd_jpools *p)
{
	if (!p)
		return;
	while (p->list) {
		jpool *j = p->list;
		if (j->state == JP_PREPARING) {
			/* The server (and its watch) is gone already: stop the thread's
			 * pre-fault (seconds per GiB: a stop would wait it out) and
			 * wait for it. */
			__atomic_store_n(&j->cancel, 1, __ATOMIC_RELAXED);
			pthread_join(j->thr, NULL);
			close(j->pipe[0]);
			close(j->pipe[1]);
		}
		ckptd_pool_close(j->pool);
		unlink_free(p, j);
	}
	free(p);
}
