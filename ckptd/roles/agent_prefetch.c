/* Prefetch on an agent: when a rank registers here and this node holds no
 * copy of its shard of the job's newest committed version (a rank restarted
 * on a replacement node), the agent copies that shard from a partner's DRAM
 * into this node's pool before the rank asks, so that its restore reads
 * node DRAM. The rank's own restore does not wait for it: asked before the
 * copy is done, it reads the partner itself (restore.c).
 *
 *   loop   ── on REGISTER_RANK: a task, on a thread of its own
 *   thread ── the coordinator (as an agent): the newest committed version,
 *             then the nodes holding a PEER_MEM copy (SEG_WHERE); a partner:
 *             SEGMENT_REQUEST(PEER_READ), pinned there
 *   loop   ── a segment of the job's pool for (job, version, rank)
 *   thread ── fi_read into it, every chunk checked, SEGMENT_RELEASE
 *   loop   ── the segment done, the copy recorded and reported LOCAL_MEM
 * The thread and the loop hand over through the task's mutex and a pipe. */
#include "agent_int.h"

#include "fabric.h"
#include "format/format.h"
#include "format/reader.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PF_TIMEOUT_MS 10000

enum { PF_QUERY = 0, PF_NEED_SEG, PF_READING, PF_DONE };

typedef struct pf_task {
	struct pf_task *next;
	ckptd_agent *a;
	char job[CKPTD_JOB_MAX + 1];
	uint32_t rank;
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stage;       /* PF_*, with mu */
	int ok;          /* PF_DONE: the copy is in the segment, checked */
	int has_ref;     /* holds a reference on the job's pool */
	uint64_t version, bytes, checksum, lineage;
	uint64_t seg_id; /* with mu: 0 until the loop gives one */
	uint8_t *seg;
	int refused;     /* with mu: the loop gave none (held already, or no room) */
	int from_rs;     /* rebuilt from its rs group (else a partner's copy) */
	char why[1200];
} pf_task;

/* A rank's READ of a shard this agent is fetching (or rebuilding): held
 * until the task ends, at most PF_HOLD_MS (the rank's call waits
 * CKPTD_CLIENT_DEFAULT_TIMEOUT_MS), then answered as if asked then. */
typedef struct pf_wait {
	uint64_t serial;
	ckptd_segment_request req;
	uint64_t until_ns;
} pf_wait;
#define PF_HOLD_MS 8000

struct agent_prefetch {
	int pipe[2];
	pf_task *tasks;
	pf_wait *waits;
	size_t nwaits, capwaits;
};

static void wake(ckptd_agent *a)
{
	char one = 1;
	while (write(a->prefetch->pipe[1], &one, 1) < 0 && errno == EINTR)
		;
}

static void fail(pf_task *t, const char *fmt, const char *detail)
{
	snprintf(t->why, sizeof(t->why), fmt, detail);
}

/* ---------------------------------------------------------------- thread */

/* The newest version of the job committed at some tier, and where its
 * partner copies of this rank are. */
static int ask_coordinator(pf_task *t, ckptd_msg *where)
{
	ckptd_agent *a = t->a;
	ckptd_client *c = NULL;
	char why[200] = "";
	int r = ckptd_client_connect(a->cfg->coordinator, "", CKPTD_ROLE_AGENT, a->cluster, PF_TIMEOUT_MS, &c, why,
	                             sizeof(why));
	if (r < 0) {
		fail(t, "coordinator unreachable: %s", why);
		return r;
	}
	uint64_t start = 0, best = 0;
	int found = 0;
	for (;;) {
		ckptd_msg m = { .type = CKPTD_MSG_LIST_VERSIONS }, rep;
		snprintf(m.u.list_versions.job, sizeof(m.u.list_versions.job), "%s", t->job);
		m.u.list_versions.start = start;
		if ((r = ckptd_client_call(c, &m, &rep)) < 0 || rep.type != CKPTD_MSG_VERSIONS) {
			if (r == 0)
				ckptd_msg_free(&rep);
			fail(t, "%s", "the coordinator did not list the job's versions");
			ckptd_client_close(c);
			return -EPROTO;
		}
		const ckptd_versions *v = &rep.u.versions;
		for (uint32_t i = 0; i < v->count; i++)
			if (v->entries[i].state == CKPT_STATE_COMMITTED && (!found || v->entries[i].version > best)) {
				best = v->entries[i].version;
				found = 1;
			}
		int more = v->more && v->count;
		if (more)
			start = v->entries[v->count - 1].version + 1;
		ckptd_msg_free(&rep);
		if (!more)
			break;
	}
	if (!found) {
		ckptd_client_close(c);
		fail(t, "%s", "no committed version");
		return -ENOENT;
	}
	t->version = best;
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST };
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", t->job);
	m.u.segment_request.version = best;
	m.u.segment_request.rank = t->rank;
	m.u.segment_request.mode = CKPTD_SEG_WHERE;
	r = ckptd_client_call(c, &m, where);
	ckptd_client_close(c);
	if (r == 0 && where->type != CKPTD_MSG_PARTNERS) {
		ckptd_msg_free(where);
		r = -EPROTO;
	}
	if (r < 0)
		fail(t, "%s", "the coordinator did not say where the partner copies are");
	return r;
}

/* Waits for the loop to give a segment (or refuse), at most as long as a
 * rank's request waits for its job's pool to be made. */
static int wait_segment(pf_task *t)
{
	if (t->seg_id)
		return 0; /* an earlier partner failed after the segment came */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	uint64_t ms = t->a->cfg->segment_wait_ms + 1000;
	until.tv_sec += (time_t)(ms / 1000);
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&t->mu);
	t->stage = PF_NEED_SEG;
	pthread_mutex_unlock(&t->mu);
	wake(t->a);
	pthread_mutex_lock(&t->mu);
	while (t->stage == PF_NEED_SEG)
		if (pthread_cond_timedwait(&t->cv, &t->mu, &until) == ETIMEDOUT && t->stage == PF_NEED_SEG) {
			t->stage = PF_READING;
			t->refused = 1;
		}
	int ok = t->seg_id != 0;
	pthread_mutex_unlock(&t->mu);
	return ok ? 0 : -ENOSPC;
}

static int sink(void *arg, uint32_t ri, uint64_t off, const void *d, size_t len)
{
	(void)arg, (void)ri, (void)off, (void)d, (void)len;
	return 0;
}

/* The image in the segment is this rank's shard of the version, intact. */
static int check_image(pf_task *t)
{
	ckpt_shard s;
	char why[300] = "";
	ckpt_read_opts o = { .depth = 4, .why = why, .whycap = sizeof(why) };
	int r = ckpt__shard_parse_mem(t->seg, t->bytes, &s, why, sizeof(why));
	if (r == 0 && (s.header.version != t->version || s.header.rank != t->rank || strcmp(s.header.job, t->job)))
		r = -CKPT_ECORRUPT, snprintf(why, sizeof(why), "not this rank's shard of the version");
	if (r == 0 && t->checksum && s.tail.footer_checksum != t->checksum)
		r = -CKPT_ECORRUPT, snprintf(why, sizeof(why), "footer checksum differs from the one recorded");
	if (r == 0)
		r = ckpt__shard_read_mem(t->seg, t->bytes, &s, &o, sink, NULL);
	if (r == 0) {
		t->checksum = s.tail.footer_checksum;
		t->lineage = s.header.lineage;
	} else {
		fail(t, "the partner's copy does not verify: %s", why[0] ? why : ckpt_strerror(r));
	}
	ckpt__shard_close(&s);
	return r;
}

/* From one partner: pin, read into our segment, check, release. */
static int from_partner(pf_task *t, const ckptd_partner *p)
{
	ckptd_agent *a = t->a;
	ckptd_secret *js = NULL;
	ckptd_client *c = NULL;
	ckpt_fab *fab = NULL;
	ckpt_fab_mr *mr = NULL;
	char why[300] = "";
	int r = ckptd_secret_derive_job(a->cluster, t->job, &js);
	if (r == 0)
		r = ckptd_client_connect(p->address, t->job, CKPTD_ROLE_RANK, js, PF_TIMEOUT_MS, &c, why, sizeof(why));
	ckptd_secret_free(js);
	if (r < 0) {
		fail(t, "partner unreachable: %s", why);
		return r;
	}
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", t->job);
	m.u.segment_request.version = t->version;
	m.u.segment_request.rank = t->rank;
	m.u.segment_request.mode = CKPTD_SEG_PEER_READ;
	if ((r = ckptd_client_call(c, &m, &rep)) < 0 || rep.type != CKPTD_MSG_PEER_GRANT) {
		if (r == 0)
			ckptd_msg_free(&rep);
		ckptd_client_close(c);
		fail(t, "partner %s has no copy", p->node);
		return -ENOENT;
	}
	ckptd_peer_grant g = rep.u.peer_grant;
	ckptd_msg_free(&rep);
	t->bytes = g.bytes;
	t->checksum = g.checksum;
	ckpt_fab_remote rem = { .addr_len = g.fabric_addr_len, .key = g.key, .base = g.base };
	memcpy(rem.addr, g.fabric_addr, g.fabric_addr_len);
	if ((r = wait_segment(t)) < 0) {
		if (!t->why[0])
			fail(t, "%s", "no segment in this node's pool in time");
	} else if ((r = ckpt_fab_open(g.provider[0] ? g.provider : NULL, NULL, 0, &fab, why, sizeof(why))) < 0 ||
	           (r = ckpt_fab_mr_reg(fab, t->seg, g.bytes, CKPT_FAB_LOCAL, &mr, why, sizeof(why))) < 0 ||
	           (r = ckpt_fab_xfer(fab, CKPT_FAB_READ, mr, t->seg, g.bytes, &rem, g.offset, 0, 0, PF_TIMEOUT_MS,
	                              why, sizeof(why))) < 0) {
		fail(t, "fi_read: %s", why);
	} else {
		r = check_image(t);
	}
	ckpt_fab_mr_close(mr);
	ckpt_fab_close(fab);
	ckptd_msg rel = { .type = CKPTD_MSG_SEGMENT_RELEASE, .u.segment_release.segment_id = g.segment_id };
	if (ckptd_client_call(c, &rel, &rep) == 0)
		ckptd_msg_free(&rep);
	ckptd_client_close(c);
	return r;
}

/* No partner copy: rebuilt from the rs group that protects it, from the
 * survivors' pieces (agent_ec.c), into our segment, then checked. */
static int from_group(pf_task *t)
{
	ckptd_agent *a = t->a;
	ckptd_client *c = NULL;
	char why[1200] = "";
	int r = ckptd_client_connect(a->cfg->coordinator, "", CKPTD_ROLE_AGENT, a->cluster, PF_TIMEOUT_MS, &c, why,
	                             sizeof(why));
	if (r < 0) {
		fail(t, "coordinator unreachable: %s", why);
		return r;
	}
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, plan;
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", t->job);
	m.u.segment_request.version = t->version;
	m.u.segment_request.rank = t->rank;
	m.u.segment_request.mode = CKPTD_SEG_EC_WHERE;
	r = ckptd_client_call(c, &m, &plan);
	ckptd_client_close(c);
	if (r < 0 || plan.type != CKPTD_MSG_EC_PLAN) {
		if (r == 0)
			ckptd_msg_free(&plan);
		return -ENOENT; /* no rs group either: the partner's reason stands */
	}
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < plan.u.ec_plan.count; i++)
		if (plan.u.ec_plan.entries[i].rank == t->rank)
			bytes = plan.u.ec_plan.entries[i].bytes;
	t->bytes = bytes;
	t->checksum = 0;
	t->from_rs = 1;
	if (!bytes) {
		fail(t, "%s", "the rs plan does not list this rank");
		r = -ENOENT;
	} else if ((r = wait_segment(t)) < 0) {
		if (!t->why[0] || !t->refused)
			fail(t, "%s", "no segment in this node's pool in time");
	} else if ((r = ckptd__ec_rebuild(a, &plan.u.ec_plan, t->rank, t->seg, bytes, why, sizeof(why))) < 0) {
		fail(t, "%s", why);
	} else {
		r = check_image(t);
	}
	ckptd_msg_free(&plan);
	return r;
}

static void *pf_main(void *arg)
{
	pf_task *t = arg;
	ckptd_msg where;
	int ok = 0;
	if (ask_coordinator(t, &where) == 0) {
		if (!where.u.partners.count)
			fail(t, "%s", "no partner holds a copy");
		/* The first partner that hands over an intact copy; once a segment
		 * is ours, a later failure keeps it (the loop frees it). */
		for (uint32_t i = 0; i < where.u.partners.count && !ok && !t->refused; i++)
			ok = from_partner(t, &where.u.partners.entries[i]) == 0;
		ckptd_msg_free(&where);
		if (!ok && !t->refused && !t->seg_id)
			ok = from_group(t) == 0;
	}
	pthread_mutex_lock(&t->mu);
	t->ok = ok;
	t->stage = PF_DONE;
	pthread_mutex_unlock(&t->mu);
	wake(t->a);
	return NULL;
}

/* ---------------------------------------------------------------- loop */

/* The held READs of (job, rank), or those past their hold (all: NULL job),
 * answered now. */
static void answer_waits(ckptd_agent *a, const char *job, uint32_t rank, uint64_t now)
{
	struct agent_prefetch *p = a->prefetch;
	for (size_t i = 0; i < p->nwaits;) {
		pf_wait w = p->waits[i];
		int due = job ? (w.req.rank == rank && !strcmp(w.req.job, job)) : now >= w.until_ns;
		if (!due) {
			i++;
			continue;
		}
		p->waits[i] = p->waits[--p->nwaits];
		rank_sess *rs = ckptd__agent_rank_by_serial(a, w.serial);
		if (rs)
			ckptd__agent_grant_read(a, rs->s, rs, &w.req);
	}
}

int ckptd__prefetch_hold(ckptd_agent *a, rank_sess *rs, const ckptd_segment_request *m)
{
	struct agent_prefetch *p = a->prefetch;
	if (!p)
		return 0;
	pf_task *t;
	for (t = p->tasks; t; t = t->next)
		if (t->rank == m->rank && !strcmp(t->job, m->job))
			break;
	if (!t)
		return 0;
	if (p->nwaits == p->capwaits) {
		size_t nc = p->capwaits ? p->capwaits * 2 : 8;
		void *q = realloc(p->waits, nc * sizeof(*p->waits));
		if (!q)
			return 0;
		p->waits = q;
		p->capwaits = nc;
	}
	p->waits[p->nwaits++] = (pf_wait){ rs->serial, *m, ckpt__now_ns() + PF_HOLD_MS * 1000000ull };
	CKPTD_DEBUG(a->log, NULL, m->job, "rank %u's read held while its shard is fetched here", m->rank);
	return 1;
}

void ckptd__prefetch_tick(ckptd_agent *a, uint64_t now)
{
	if (a->prefetch && a->prefetch->nwaits)
		answer_waits(a, NULL, 0, now);
}

static void task_end(ckptd_agent *a, pf_task *t)
{
	pthread_join(t->thr, NULL);
	ckptd_pool *pool = ckptd_jpools_get(a->pools, t->job, NULL);
	if (t->ok && pool) {
		ckptd_pool_seg_done(pool, t->seg_id);
		ckptd_shard_done d = { .version = t->version, .rank = t->rank, .tier = CKPT_TIER_LOCAL_MEM,
		                       .bytes = t->bytes, .checksum = t->checksum, .lineage = t->lineage };
		snprintf(d.job, sizeof(d.job), "%s", t->job);
		ckptd__agent_done_push(a, NULL, &d);
		CKPTD_INFO(a->log, NULL, t->job, "prefetched version %llu rank %u from %s into this node's pool "
		           "(%llu bytes)", (unsigned long long)t->version, t->rank,
		           t->from_rs ? "its rs group (rebuilt from the survivors, every chunk checked)" : "partner DRAM",
		           (unsigned long long)t->bytes);
	} else {
		if (t->seg_id && pool)
			ckptd_pool_seg_free(pool, t->seg_id);
		if (t->from_rs)
			CKPTD_WARN(a->log, NULL, t->job, "version %llu rank %u not rebuilt from its rs group: %s",
			           (unsigned long long)t->version, t->rank, t->why[0] ? t->why : "failed");
		else
			CKPTD_INFO(a->log, NULL, t->job, "no prefetch of rank %u: %s", t->rank, t->why[0] ? t->why : "failed");
	}
	if (t->has_ref)
		ckptd_jpools_unref(a->pools, t->job);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t);
}

/* A task asks for its segment (with t->mu); while the job's pool is being
 * made it waits (the pool's readiness wakes the tasks again). */
static void give_segment(ckptd_agent *a, pf_task *t)
{
	int preparing = 0;
	ckptd_pool *pool = ckptd_jpools_get(a->pools, t->job, &preparing);
	ckptd_seg_info si;
	if (!pool && preparing)
		return;
	if (pool && ckptd_pool_find(pool, t->job, t->version, t->rank, &si) == 0) {
		fail(t, "%s", "this node holds that copy already");
		t->refused = 1;
	} else if (!pool || ckptd_pool_alloc(pool, t->job, t->version, t->rank, t->bytes, &si) < 0) {
		fail(t, "%s", "no room in this node's pool");
		t->refused = 1;
	} else {
		t->seg_id = si.id;
		t->seg = (uint8_t *)ckptd_pool_base(pool) + si.off;
	}
	t->stage = PF_READING;
	pthread_cond_signal(&t->cv);
}

static void on_pipe(ckptd_server *srv, int fd, uint32_t events, void *arg)
{
	(void)srv, (void)events;
	ckptd_agent *a = arg;
	char buf[64];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	for (pf_task **pp = &a->prefetch->tasks; *pp;) {
		pf_task *t = *pp;
		pthread_mutex_lock(&t->mu);
		int stage = t->stage;
		if (stage == PF_NEED_SEG)
			give_segment(a, t);
		pthread_mutex_unlock(&t->mu);
		if (stage == PF_DONE) {
			*pp = t->next;
			char job[CKPTD_JOB_MAX + 1];
			uint32_t rank = t->rank;
			snprintf(job, sizeof(job), "%s", t->job);
			task_end(a, t);
			answer_waits(a, job, rank, 0); /* the task is out of the list: no hold again */
			continue;
		}
		pp = &t->next;
	}
}

void ckptd__prefetch_pool_ready(ckptd_agent *a)
{
	if (a->prefetch)
		on_pipe(a->srv, a->prefetch->pipe[0], 0, a);
}

void ckptd__prefetch_register(ckptd_agent *a, const char *job, uint32_t rank)
{
	if (!a->prefetch || a->local)
		return;
	for (pf_task *t = a->prefetch->tasks; t; t = t->next)
		if (t->rank == rank && !strcmp(t->job, job))
			return;
	/* A rank that holds DRAM copies here restarted in place: nothing to fetch. */
	ckptd_pool *pool = ckptd_jpools_get(a->pools, job, NULL);
	if (pool) {
		ckptd_seg_info segs[256];
		size_t n = 0;
		ckptd_pool_list(pool, segs, 256, &n);
		for (size_t i = 0; i < n && i < 256; i++)
			if (segs[i].rank == rank && !strcmp(segs[i].job, job))
				return;
	}
	pf_task *t = calloc(1, sizeof(*t));
	if (!t)
		return;
	t->a = a;
	snprintf(t->job, sizeof(t->job), "%s", job);
	t->rank = rank;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	/* The pool stays while the copy goes in, even if the rank leaves. */
	t->has_ref = ckptd_jpools_ref(a->pools, job) == 0;
	if (pthread_create(&t->thr, NULL, pf_main, t) != 0) {
		if (t->has_ref)
			ckptd_jpools_unref(a->pools, job);
		free(t);
		return;
	}
	t->next = a->prefetch->tasks;
	a->prefetch->tasks = t;
}

int ckptd__prefetch_start(ckptd_agent *a)
{
	if (!a->cfg->coordinator || a->local)
		return 0;
	struct agent_prefetch *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (pipe2(p->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(p);
		return -errno;
	}
	a->prefetch = p;
	return ckptd_server_watch(a->srv, p->pipe[0], on_pipe, a);
}

void ckptd__prefetch_stop(ckptd_agent *a)
{
	struct agent_prefetch *p = a->prefetch;
	if (!p)
		return;
	free(p->waits);
	p->waits = NULL;
	p->nwaits = 0;
	/* Threads waiting for a segment get none; the others end within their
	 * timeouts. */
	while (p->tasks) {
		pf_task *t = p->tasks;
		pthread_mutex_lock(&t->mu);
		if (t->stage == PF_NEED_SEG) {
			t->stage = PF_READING;
			pthread_cond_signal(&t->cv);
		}
		pthread_mutex_unlock(&t->mu);
		pthread_join(t->thr, NULL);
		p->tasks = t->next;
		pthread_mutex_destroy(&t->mu);
		pthread_cond_destroy(&t->cv);
		free(t);
	}
	close(p->pipe[0]);
	close(p->pipe[1]);
	free(p);
	a->prefetch = NULL;
}
