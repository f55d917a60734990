/* The peer-DRAM tier on an agent (PEER_MEM): one pool of DRAM registered
 * with libfabric for remote writes and reads, cut into slots that ranks of
 * other nodes lease for their shard images.
 *
 *   rank ── PEER_LEASE ──> slot WRITING (a deadline: a writer that dies
 *                          leaves it to be reclaimed), PEER_GRANT back
 *   rank ── fi_write of the image into the slot (storage/fabric.c)
 *   rank ── PEER_COMMIT ─> VERIFYING: a thread checks the image (structure,
 *                          the footer checksum the rank names, every chunk)
 *        <── OK ────────── STORED: recorded in the agent index, SHARD_DONE
 *                          (PEER_MEM) to the coordinator, which then counts
 *                          the copy as this node's
 *   rank ── SEGMENT_REQUEST(PEER_READ) ─> the slot pinned, PEER_GRANT; the
 *                          rank fi_reads it, then SEGMENT_RELEASE
 *
 * Room is made as the node-DRAM pool does it (ckptd/mem/pool.c): a job's
 * restore point here (the copies of its newest version committed at
 * PEER_MEM, and of its newest committed at any tier when that is newer) is
 * never evicted while the job is heard from (a commit notice, a lease, a
 * read: --peer-protect-idle), so that a node's loss cannot be followed by
 * the loss of the copies that restore it. A copy needs one contiguous
 * range, so what is evicted is one run of adjacent slots (peer_plan.c),
 * the cheapest that frees enough: the leasing job's own other copies cost
 * least; then those of jobs silent past --peer-protect-idle (finished or
 * gone: nothing else ever frees their DRAM); another job's only as far as
 * it holds more than its share of the pool (the pool over the live jobs
 * in it), so that one job's saves cannot push another's copies out; then
 * leases past their deadline. A lease that finds no room is refused with
 * the reason in the log and in
 * ckpt_peer_refused_total; a fresh inventory tells the coordinator of
 * what was evicted. Slot ids
 * carry PEER_SLOT_BIT so that a release is never taken for a DRAM segment.
 * Everything here runs in the event loop but the verification thread,
 * which reads a slot the loop does not touch while it is VERIFYING. */
#include "agent_int.h"

#include "fabric.h"
#include "peer_plan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PEER_SLOT_BIT (1ull << 62)
#define SLOT_ALIGN 4096u

enum { SLOT_WRITING = 1, SLOT_VERIFYING, SLOT_STORED, SLOT_PARITY /* rs parity (agent_ec.c): never evicted */ };

typedef struct pslot {
	uint64_t id, off, len;
	int state;
	int doomed;           /* deleted while VERIFYING or pinned: freed after */
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t rank, world_size;
	uint64_t lineage, checksum, bytes;
	uint64_t writer;      /* the leasing session's serial */
	uint64_t deadline_ns; /* WRITING: reclaimable after */
	uint64_t stored_ns;
	uint32_t pins;
	int keep;             /* scratch of mark_keep(): part of its job's restore point */
	int idle;             /* scratch of mark_keep(): its job is silent past --peer-protect-idle */
} pslot;

typedef struct ppin {
	uint64_t id, serial;
} ppin;

typedef struct pcheck {
	ckptd_agent *a;
	uint64_t id, serial;
	uint64_t start_ns;
	ckptd_vtask *t;
} pcheck;

/* A job's newest versions announced COMMITTED (at PEER_MEM, at any tier):
 * its restore point, wherever this pool holds copies of them, protected
 * while the job was heard from within --peer-protect-idle. */
typedef struct pjob {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t peer_v, any_v;
	int has_peer, has_any;  /* announced at all */
	uint64_t heard_ns;      /* its last commit notice, lease or read here */
} pjob;
#define PJOBS_MAX 256 /* beyond: the entries of jobs with no copy here go */

struct ckptd_peerpool {
	ckpt_fab *fab;
	ckpt_fab_mr *mr;
	ckpt_fab_remote rem;
	uint8_t *mem;
	uint64_t size, used;
	uint64_t idle_ns;     /* --peer-protect-idle; 0: a restore point stays until deleted */
	pslot *slots; /* sorted by offset */
	size_t n, cap;
	ppin *pins;
	size_t npins, cappins;
	pcheck **checks; /* verifications in flight */
	size_t nchecks, capchecks;
	uint64_t next_id;
	pjob *jobs;
	size_t njobs;
};

/* ---------------------------------------------------------------- slots */

static pslot *slot_by_id(ckptd_peerpool *pp, uint64_t id)
{
	for (size_t i = 0; i < pp->n; i++)
		if (pp->slots[i].id == id)
			return &pp->slots[i];
	return NULL;
}

static pslot *slot_of(ckptd_peerpool *pp, const char *job, uint64_t version, uint32_t rank)
{
	for (size_t i = 0; i < pp->n; i++) {
		pslot *s = &pp->slots[i];
		if (s->version == version && s->rank == rank && !strcmp(s->job, job))
			return s;
	}
	return NULL;
}

/* Forgets a slot; a stored one leaves the index, and the coordinator hears
 * of it from the next inventory. */
static void slot_free(ckptd_agent *a, pslot *s, const char *why)
{
	ckptd_peerpool *pp = a->peer;
	if (s->state == SLOT_STORED) {
		ckptd_aidx_del(a->idx, s->job, s->version, s->rank, CKPT_TIER_PEER_MEM);
		a->inventory_due = 1;
		CKPTD_INFO(a->log, NULL, s->job, "partner copy of version %llu rank %u dropped (%s)",
		           (unsigned long long)s->version, s->rank, why);
	}
	pp->used -= s->len;
	size_t i = (size_t)(s - pp->slots);
	memmove(&pp->slots[i], &pp->slots[i + 1], (pp->n - i - 1) * sizeof(*s));
	pp->n--;
}

static pjob *pjob_find(ckptd_peerpool *pp, const char *job)
{
	for (size_t i = 0; i < pp->njobs; i++)
		if (!strcmp(pp->jobs[i].job, job))
			return &pp->jobs[i];
	return NULL;
}

/* The job was heard from here: its restore point is protected again. */
static void pjob_heard(ckptd_peerpool *pp, const char *job)
{
	pjob *j = pjob_find(pp, job);
	if (j)
		j->heard_ns = ckpt__now_ns();
}

/* 1 if the job has been silent past --peer-protect-idle. A job never
 * announced here has no restore point to lose and is not idle. */
static int pjob_idle(const ckptd_peerpool *pp, const pjob *j, uint64_t now)
{
	return j && pp->idle_ns && now - j->heard_ns >= pp->idle_ns;
}

/* Marks the stored slots that make up their job's restore point (keep):
 * copies of its newest version committed at PEER_MEM, and of its newest
 * committed at any tier, unless the job is idle (then idle is set). */
static void mark_keep(ckptd_peerpool *pp, uint64_t now)
{
	for (size_t i = 0; i < pp->n; i++) {
		pslot *s = &pp->slots[i];
		const pjob *j = pjob_find(pp, s->job);
		s->idle = pjob_idle(pp, j, now);
		s->keep = j && !s->idle && s->state == SLOT_STORED &&
		          ((j->has_peer && s->version == j->peer_v) || (j->has_any && s->version == j->any_v));
	}
}

/* Bytes of job's slots. */
static uint64_t job_used(const ckptd_peerpool *pp, const char *job)
{
	uint64_t used = 0;
	for (size_t i = 0; i < pp->n; i++)
		if (!strcmp(pp->slots[i].job, job))
			used += pp->slots[i].len;
	return used;
}

static int by_job(const void *pa, const void *pb)
{
	return strcmp((*(pslot *const *)pa)->job, (*(pslot *const *)pb)->job);
}

/* The pool as the planner sees it (peer_plan.h), for a lease of job's
 * version. What may go: never a slot of a restore point, pinned or being
 * checked, and never a copy of the version being leased (another rank's
 * shard of it is as new as this one, and evicting it would keep the
 * version from ever being whole in partner DRAM; the writer goes to its
 * next partner). The job's own stored copies cost least; then an idle
 * job's (silent past --peer-protect-idle); then another job's, only as
 * far as that job holds more than its share (the pool over the live jobs
 * in it, leasing job counted: nobody is pushed below it by others); then
 * a lease past its deadline. [out] x (n entries), allow (one per job).
 * Sorting by job keeps this n log n. */
static int plan_input(ckptd_peerpool *pp, uint64_t now, const char *job, uint64_t version, ckptd_pext *x,
                      uint64_t *allow, size_t *njobs)
{
	pslot **byjob = malloc((pp->n ? pp->n : 1) * sizeof(*byjob));
	if (!byjob)
		return -ENOMEM;
	mark_keep(pp, now);
	for (size_t i = 0; i < pp->n; i++)
		byjob[i] = &pp->slots[i];
	qsort(byjob, pp->n, sizeof(*byjob), by_job);
	uint32_t live = 1; /* the leasing job */
	size_t nj = 0;
	for (size_t i = 0; i < pp->n; i++) {
		if (i && strcmp(byjob[i]->job, byjob[i - 1]->job)) /* slots of the next job */
			nj++;
		if (i == 0 || strcmp(byjob[i]->job, byjob[i - 1]->job)) {
			allow[nj] = 0;
			live += !byjob[i]->idle && strcmp(byjob[i]->job, job);
		}
		allow[nj] += byjob[i]->len; /* its bytes, for now */
		x[byjob[i] - pp->slots].job = (uint32_t)nj;
	}
	*njobs = pp->n ? nj + 1 : 0;
	uint64_t share = pp->size / live;
	for (size_t j = 0; j < *njobs; j++)
		allow[j] = allow[j] > share ? allow[j] - share : 0;
	for (size_t i = 0; i < pp->n; i++) {
		const pslot *s = &pp->slots[i];
		x[i].off = s->off;
		x[i].len = s->len;
		if (s->state == SLOT_WRITING && s->deadline_ns < now)
			x[i].cls = CKPTD_PX_STALE;
		else if (s->state != SLOT_STORED || s->pins || (s->version == version && !strcmp(s->job, job)))
			x[i].cls = CKPTD_PX_BUSY;
		else if (s->keep)
			x[i].cls = CKPTD_PX_KEEP;
		else if (!strcmp(s->job, job))
			x[i].cls = CKPTD_PX_OWN;
		else
			x[i].cls = s->idle ? CKPTD_PX_IDLE : CKPTD_PX_OTHER;
	}
	free(byjob);
	return 0;
}

/* Where a slot of len bytes for job's version goes: [out] the run of
 * slots to evict for it (*count 0: a free gap fits) and its offset.
 * *why (a ckpt_peer_refused_total reason) when there is no room: "share"
 * when other jobs' copies within their shares stand in the way,
 * "restore_points" when restore points do, else "no_space". */
static int plan_room(ckptd_peerpool *pp, const char *job, uint64_t version, uint64_t len, size_t *first,
                     size_t *count, uint64_t *off, const char **why)
{
	size_t n = pp->n ? pp->n : 1, njobs = 0;
	ckptd_pext *x = calloc(n, sizeof(*x));
	uint64_t *allow = calloc(n, sizeof(*allow));
	int r = -ENOMEM;
	*why = "no_space";
	if (!x || !allow || plan_input(pp, ckpt__now_ns(), job, version, x, allow, &njobs) < 0)
		goto out;
	r = ckptd__peer_plan(x, pp->n, pp->size, len, allow, njobs, 0, first, count, off);
	if (r == -ENOSPC) {
		size_t f, c;
		uint64_t o;
		if (ckptd__peer_plan(x, pp->n, pp->size, len, allow, njobs, CKPTD_PLAN_ANY_SHARE, &f, &c, &o) == 0)
			*why = "share";
		else if (ckptd__peer_plan(x, pp->n, pp->size, len, allow, njobs,
		                          CKPTD_PLAN_ANY_SHARE | CKPTD_PLAN_ANY_KEEP, &f, &c, &o) == 0)
			*why = "restore_points";
	}
out:
	free(x);
	free(allow);
	return r;
}

/* A slot of bytes for job's version, evicting as plan_room() says; NULL
 * with *why (a ckpt_peer_refused_total reason) when there is no room. A
 * lease that cannot be granted evicts nothing. */
static pslot *slot_new(ckptd_agent *a, const char *job, uint64_t version, uint64_t bytes, const char **why)
{
	ckptd_peerpool *pp = a->peer;
	uint64_t len = (bytes + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN, off;
	size_t idx, count;
	*why = "no_space";
	if (len > pp->size || len < bytes)
		return NULL;
	if (plan_room(pp, job, version, len, &idx, &count, &off, why) < 0)
		return NULL;
	if (count) {
		char what[160];
		snprintf(what, sizeof(what), "evicted for version %llu of job %s", (unsigned long long)version, job);
		for (size_t i = idx + count; i-- > idx;) {
			ckptd_metrics_add(a->mx, CKPTD_M_PEER_EVICTED, pp->slots[i].job, NULL, 1);
			slot_free(a, &pp->slots[i], what);
		}
	}
	*why = NULL;
	if (pp->n == pp->cap) {
		size_t nc = pp->cap ? pp->cap * 2 : 32;
		void *p = realloc(pp->slots, nc * sizeof(*pp->slots));
		if (!p)
			return NULL;
		pp->slots = p;
		pp->cap = nc;
	}
	memmove(&pp->slots[idx + 1], &pp->slots[idx], (pp->n - idx) * sizeof(*pp->slots));
	pp->n++;
	pslot *s = &pp->slots[idx];
	memset(s, 0, sizeof(*s));
	s->id = PEER_SLOT_BIT | ++pp->next_id;
	s->off = off;
	s->len = len;
	pp->used += len;
	return s;
}

/* ---------------------------------------------------------------- requests */

static void grant_of(const ckptd_peerpool *pp, const pslot *s, ckptd_peer_grant *g)
{
	memset(g, 0, sizeof(*g));
	g->segment_id = s->id;
	g->offset = s->off;
	g->bytes = s->bytes;
	g->key = pp->rem.key;
	g->base = pp->rem.base;
	g->fabric_addr_len = pp->rem.addr_len;
	memcpy(g->fabric_addr, pp->rem.addr, pp->rem.addr_len);
	snprintf(g->provider, sizeof(g->provider), "%s", ckpt_fab_provider_name(pp->fab));
	g->checksum = s->checksum;
}

static int on_lease(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_peer_lease *m)
{
	ckptd_peerpool *pp = a->peer;
	pslot *old = slot_of(pp, m->job, m->version, m->rank);
	if (old && (old->state == SLOT_VERIFYING || old->pins))
		return ckptd_session_send_error(s, CKPTD_ERR_BUSY, "that shard's partner copy is in use");
	if (old)
		slot_free(a, old, "written again");
	pjob_heard(pp, m->job); /* before the room is made: a job leasing is not idle */
	const char *why = NULL;
	pslot *sl = slot_new(a, m->job, m->version, m->bytes, &why);
	if (!sl) {
		const char *text = !strcmp(why, "restore_points")
		                       ? "the peer pool holds only restore points (newest committed versions) it must keep"
		                 : !strcmp(why, "share") ? "the other jobs' copies in the peer pool are within their shares of it"
		                                         : "the peer pool has no room for that image";
		CKPTD_WARN(a->log, NULL, m->job, "cannot keep a partner copy of version %llu rank %u (%llu bytes): %s",
		            (unsigned long long)m->version, m->rank, (unsigned long long)m->bytes, text);
		ckptd_metrics_add(a->mx, CKPTD_M_PEER_REFUSED, m->job, why, 1);
		return ckptd_session_send_error(s, CKPTD_ERR_NO_SPACE, text);
	}
	sl->state = SLOT_WRITING;
	snprintf(sl->job, sizeof(sl->job), "%s", m->job);
	sl->version = m->version;
	sl->rank = m->rank;
	sl->world_size = m->world_size;
	sl->lineage = m->lineage;
	sl->bytes = m->bytes;
	sl->writer = rs->serial;
	sl->deadline_ns = ckpt__now_ns() + a->cfg->peer_lease_ms * 1000000ull;
	CKPTD_DEBUG(a->log, NULL, m->job, "leased %llu bytes to version %llu rank %u of node %s",
	            (unsigned long long)m->bytes, (unsigned long long)m->version, m->rank,
	            m->node[0] ? m->node : "?");
	ckptd_msg rep = { .type = CKPTD_MSG_PEER_GRANT };
	grant_of(pp, sl, &rep.u.peer_grant);
	return ckptd_session_send(s, &rep, -1);
}

static void check_done(void *arg, ckptd_vtask *t, ckptd_vitem *items, size_t n)
{
	(void)t, (void)n;
	pcheck *c = arg;
	ckptd_agent *a = c->a;
	ckptd_peerpool *pp = a->peer;
	for (size_t i = 0; i < pp->nchecks; i++)
		if (pp->checks[i] == c)
			pp->checks[i] = pp->checks[--pp->nchecks];
	pslot *s = slot_by_id(pp, c->id);
	rank_sess *rs = ckptd__agent_rank_by_serial(a, c->serial);
	uint64_t took_ns = ckpt__now_ns() - c->start_ns;
	free(c);
	if (!s)
		return;
	if (items[0].res.code != CKPTD_VERIFY_OK || s->doomed) {
		const char *why = s->doomed ? "deleted meanwhile" : items[0].res.text;
		CKPTD_WARN(a->log, NULL, s->job, "partner copy of version %llu rank %u refused: %s",
		           (unsigned long long)s->version, s->rank, why);
		ckptd_metrics_add(a->mx, CKPTD_M_PEER_REFUSED, s->job, "bad_image", 1);
		if (rs)
			ckptd_session_send_error(rs->s, CKPTD_ERR_STATE, why);
		s->state = SLOT_WRITING; /* not in the index: nothing to drop */
		slot_free(a, s, why);
		return;
	}
	s->state = SLOT_STORED;
	s->stored_ns = ckpt__now_ns();
	CKPTD_DEBUG(a->log, NULL, s->job, "partner copy of version %llu rank %u checked (%llu bytes in %.1f ms)",
	            (unsigned long long)s->version, s->rank, (unsigned long long)s->bytes, took_ns / 1e6);
	ckptd_metrics_add(a->mx, CKPTD_M_PEER_STORED, s->job, NULL, 1);
	if (ckpt__fault(&a->faults, "agent.peer_corrupt") < 0 && s->bytes > 8192) {
		/* Tests: a bit flips in partner memory after the check. */
		a->peer->mem[s->off + 4096] ^= 0x40;
		CKPTD_WARN(a->log, NULL, s->job, "fault agent.peer_corrupt: flipped a bit of version %llu rank %u",
		           (unsigned long long)s->version, s->rank);
	}
	ckptd_shard_done d = { .version = s->version, .rank = s->rank, .world_size = s->world_size,
	                       .tier = CKPT_TIER_PEER_MEM, .bytes = s->bytes, .checksum = s->checksum,
	                       .lineage = s->lineage };
	snprintf(d.job, sizeof(d.job), "%s", s->job);
	if (ckptd__agent_done_push(a, rs, &d) < 0 && rs)
		ckptd_session_send_error(rs->s, CKPTD_ERR_INTERNAL, "out of memory");
}

static int on_commit(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_peer_commit *m)
{
	ckptd_peerpool *pp = a->peer;
	pslot *sl = slot_by_id(pp, m->segment_id);
	if (!sl || sl->state != SLOT_WRITING || sl->writer != rs->serial)
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "no slot leased to this session by that id");
	if (m->bytes != sl->bytes)
		return ckptd_session_send_error(s, CKPTD_ERR_MALFORMED, "BYTES differs from the lease");
	ckptd_vitem *it = calloc(1, sizeof(*it));
	pcheck *c = calloc(1, sizeof(*c));
	if (!it || !c || (pp->nchecks == pp->capchecks &&
	                  !(pp->checks = realloc(pp->checks, (pp->capchecks = pp->capchecks * 2 + 4) * sizeof(c))))) {
		free(it);
		free(c);
		return -ENOMEM;
	}
	if (ckpt__fault(&a->faults, "agent.peer_corrupt_before_check") < 0 && sl->bytes > 8192) {
		/* Tests: the image arrived damaged; the check must refuse it. */
		pp->mem[sl->off + 4096] ^= 0x10;
		CKPTD_WARN(a->log, NULL, sl->job, "fault agent.peer_corrupt_before_check: flipped a bit of version %llu rank %u",
		           (unsigned long long)sl->version, sl->rank);
	}
	it->res.rank = sl->rank;
	it->res.tier = CKPT_TIER_PEER_MEM;
	it->img = pp->mem + sl->off;
	it->len = sl->bytes;
	it->checksum = m->checksum;
	it->lineage = sl->lineage;
	sl->checksum = m->checksum;
	sl->state = SLOT_VERIFYING;
	c->a = a;
	c->id = sl->id;
	c->serial = rs->serial;
	c->start_ns = ckpt__now_ns();
	int r = ckptd_vtask_start(a->srv, sl->job, sl->version, it, 1, check_done, c, &c->t);
	if (r < 0) {
		free(it);
		free(c);
		sl->state = SLOT_WRITING;
		return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "cannot start the check of the image");
	}
	pp->checks[pp->nchecks++] = c;
	return 0;
}

static int on_read(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_segment_request *m)
{
	ckptd_peerpool *pp = a->peer;
	pslot *sl = slot_of(pp, m->job, m->version, m->rank);
	if (!sl || sl->state != SLOT_STORED || sl->doomed)
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "no partner copy of that shard here");
	if (pp->npins == pp->cappins) {
		size_t nc = pp->cappins ? pp->cappins * 2 : 16;
		void *p = realloc(pp->pins, nc * sizeof(*pp->pins));
		if (!p)
			return -ENOMEM;
		pp->pins = p;
		pp->cappins = nc;
	}
	pp->pins[pp->npins++] = (ppin){ sl->id, rs->serial };
	pjob_heard(pp, m->job);
	sl->pins++;
	ckptd_msg rep = { .type = CKPTD_MSG_PEER_GRANT };
	grant_of(pp, sl, &rep.u.peer_grant);
	return ckptd_session_send(s, &rep, -1);
}

int ckptd__peer_has(ckptd_agent *a, const char *job, uint64_t version, uint32_t rank)
{
	pslot *sl = a->peer ? slot_of(a->peer, job, version, rank) : NULL;
	return sl && sl->state == SLOT_STORED && !sl->doomed;
}

int ckptd__peer_copy_fd(ckptd_agent *a, const char *job, uint64_t version, uint32_t rank, int *fd, uint64_t *bytes)
{
	ckptd_peerpool *pp = a->peer;
	pslot *sl = pp ? slot_of(pp, job, version, rank) : NULL;
	if (!sl || sl->state != SLOT_STORED || sl->doomed)
		return -ENOENT;
	/* The pool holds every job's partner copies: its own descriptor would
	 * hand all of them over. A sealed copy of this one shard goes instead
	 * (a restore by hand is rare; the copy is the shard's size). */
	int f = memfd_create("ckpt-partner-copy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (f < 0)
		return -errno;
	int r = 0;
	for (uint64_t done = 0; done < sl->len && r == 0;) {
		ssize_t w = pwrite(f, pp->mem + sl->off + done, sl->len - done, (off_t)done);
		if (w < 0 && errno != EINTR)
			r = -errno;
		else if (w > 0)
			done += (uint64_t)w;
	}
	if (r == 0 && fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		r = -errno;
	if (r < 0) {
		close(f);
		return r;
	}
	*fd = f;
	*bytes = sl->len;
	return 0;
}

static void unpin(ckptd_agent *a, size_t i)
{
	ckptd_peerpool *pp = a->peer;
	pslot *sl = slot_by_id(pp, pp->pins[i].id);
	pp->pins[i] = pp->pins[--pp->npins];
	if (sl && sl->pins && --sl->pins == 0 && sl->doomed)
		slot_free(a, sl, "deleted");
}

static int on_release(ckptd_agent *a, ckptd_session *s, rank_sess *rs, uint64_t id)
{
	ckptd_peerpool *pp = a->peer;
	for (size_t i = 0; i < pp->npins; i++)
		if (pp->pins[i].id == id && pp->pins[i].serial == rs->serial) {
			unpin(a, i);
			ckptd_msg ok = { .type = CKPTD_MSG_OK };
			return ckptd_session_send(s, &ok, -1);
		}
	return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "this session holds no such partner copy");
}

/* ---------------------------------------------------------------- agent's calls */

int ckptd__peer_is_slot(uint64_t id)
{
	return (id & PEER_SLOT_BIT) != 0;
}

int ckptd__peer_handle(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_msg *m)
{
	if (!a->peer)
		return ckptd_session_send_error(s, CKPTD_ERR_UNSUPPORTED, "this node keeps no partner copies (--peer-pool-size 0)");
	switch (m->type) {
	case CKPTD_MSG_PEER_LEASE:
		return on_lease(a, s, rs, &m->u.peer_lease);
	case CKPTD_MSG_PEER_COMMIT:
		return on_commit(a, s, rs, &m->u.peer_commit);
	case CKPTD_MSG_SEGMENT_REQUEST:
		return on_read(a, s, rs, &m->u.segment_request);
	case CKPTD_MSG_SEGMENT_RELEASE:
		return on_release(a, s, rs, m->u.segment_release.segment_id);
	}
	return ckptd_session_send_error(s, CKPTD_ERR_UNSUPPORTED, "not a partner request");
}

void ckptd__peer_session_gone(ckptd_agent *a, uint64_t serial)
{
	ckptd_peerpool *pp = a->peer;
	if (!pp)
		return;
	for (size_t i = pp->npins; i-- > 0;)
		if (pp->pins[i].serial == serial)
			unpin(a, i);
	/* Its leases end now: what it did not commit never will be. */
	for (size_t i = pp->n; i-- > 0;)
		if (pp->slots[i].state == SLOT_WRITING && pp->slots[i].writer == serial)
			slot_free(a, &pp->slots[i], "its writer went");
}

int ckptd__peer_reserve(ckptd_agent *a, const char *job, uint64_t version, uint64_t bytes, uint64_t *id,
                        uint8_t **mem, const char **why)
{
	ckptd_peerpool *pp = a->peer;
	*why = "no_space";
	if (!pp)
		return -ENOSPC;
	pjob_heard(pp, job);
	pslot *sl = slot_new(a, job, version, bytes, why);
	if (!sl)
		return -ENOSPC;
	sl->state = SLOT_PARITY;
	snprintf(sl->job, sizeof(sl->job), "%s", job);
	sl->version = version;
	sl->rank = UINT32_MAX;
	sl->bytes = bytes;
	*id = sl->id;
	*mem = pp->mem + sl->off;
	return 0;
}

void ckptd__peer_unreserve(ckptd_agent *a, uint64_t id)
{
	pslot *sl = a->peer ? slot_by_id(a->peer, id) : NULL;
	if (sl && sl->state == SLOT_PARITY)
		slot_free(a, sl, "parity superseded");
}

ckpt_fab *ckptd__peer_fab(ckptd_agent *a)
{
	return a->peer ? a->peer->fab : NULL;
}

int ckptd__peer_remote(ckptd_agent *a, const uint8_t *mem, ckpt_fab **fab, ckpt_fab_remote *rem, uint64_t *off)
{
	ckptd_peerpool *pp = a->peer;
	if (!pp || mem < pp->mem || mem >= pp->mem + pp->size)
		return -EINVAL;
	*fab = pp->fab;
	*rem = pp->rem;
	*off = (uint64_t)(mem - pp->mem);
	return 0;
}

int ckptd__peer_delete(ckptd_agent *a, const char *job, uint64_t version)
{
	ckptd_peerpool *pp = a->peer;
	int n = 0;
	if (!pp)
		return 0;
	for (size_t i = pp->n; i-- > 0;) {
		pslot *s = &pp->slots[i];
		if (s->version != version || strcmp(s->job, job) || s->state == SLOT_PARITY)
			continue; /* parity goes with agent_ec.c's word */
		n++;
		if (s->state == SLOT_VERIFYING || s->pins)
			s->doomed = 1;
		else
			slot_free(a, s, "deleted");
	}
	return n;
}

void ckptd__peer_committed(ckptd_agent *a, const char *job, uint64_t version, uint32_t tier)
{
	ckptd_peerpool *pp = a->peer;
	if (!pp)
		return;
	pjob *j = pjob_find(pp, job);
	if (!j && pp->njobs == PJOBS_MAX) { /* full: forget the jobs with no copy here */
		size_t k = 0;
		for (size_t i = 0; i < pp->njobs; i++)
			if (job_used(pp, pp->jobs[i].job))
				pp->jobs[k++] = pp->jobs[i];
		pp->njobs = k;
	}
	if (!j && pp->njobs < PJOBS_MAX) {
		j = &pp->jobs[pp->njobs++];
		memset(j, 0, sizeof(*j));
		snprintf(j->job, sizeof(j->job), "%s", job);
	}
	if (!j)
		return; /* 256 jobs with copies here: this one's are evicted as any */
	j->heard_ns = ckpt__now_ns();
	if (tier == CKPT_TIER_PEER_MEM && (!j->has_peer || version > j->peer_v)) {
		j->peer_v = version;
		j->has_peer = 1;
	}
	if (!j->has_any || version > j->any_v) {
		j->any_v = version;
		j->has_any = 1;
	}
}

void ckptd__peer_gauges(ckptd_agent *a)
{
	ckptd_peerpool *pp = a->peer;
	ckptd_metrics_zero(a->mx, CKPTD_M_PEER_JOB_USED);
	ckptd_metrics_zero(a->mx, CKPTD_M_PEER_PROTECTED);
	if (!pp)
		return;
	mark_keep(pp, ckpt__now_ns());
	for (size_t i = 0; i < pp->n; i++) {
		const pslot *s = &pp->slots[i];
		size_t k = 0;
		while (k < i && strcmp(pp->slots[k].job, s->job))
			k++;
		if (k < i)
			continue; /* its job was summed at its first slot */
		uint64_t used = 0, kept = 0;
		for (size_t j = i; j < pp->n; j++)
			if (!strcmp(pp->slots[j].job, s->job)) {
				used += pp->slots[j].len;
				kept += pp->slots[j].keep ? pp->slots[j].len : 0;
			}
		ckptd_metrics_set(a->mx, CKPTD_M_PEER_JOB_USED, s->job, NULL, (double)used);
		ckptd_metrics_set(a->mx, CKPTD_M_PEER_PROTECTED, s->job, NULL, (double)kept);
	}
}

void ckptd__peer_stats(ckptd_agent *a, uint64_t *bytes, uint64_t *used)
{
	*bytes = a->peer ? a->peer->size : 0;
	*used = a->peer ? a->peer->used : 0;
}

/* The host part of --listen: where partners reach this node's endpoint. */
static void listen_host(const char *listen, char *host, size_t cap)
{
	const char *colon = listen ? strrchr(listen, ':') : NULL;
	size_t n = colon ? (size_t)(colon - listen) : 0;
	if (n && listen[0] == '[' && listen[n - 1] == ']') {
		listen++;
		n -= 2;
	}
	snprintf(host, cap, "%.*s", (int)(n < cap ? n : cap - 1), listen ? listen : "");
}

int ckptd__peer_open(ckptd_agent *a, char *err, size_t errcap)
{
	const ckptd_config *cfg = a->cfg;
	if (!cfg->peer_pool_size)
		return 0;
	if (!cfg->listen) {
		snprintf(err, errcap, "--peer-pool-size needs --listen HOST:PORT: partners reach this node there");
		return -EINVAL;
	}
	ckptd_peerpool *pp = calloc(1, sizeof(*pp));
	if (!pp)
		return -ENOMEM;
	char host[CKPTD_ADDR_MAX + 1], why[512] = "";
	listen_host(cfg->listen, host, sizeof(host));
	int r;
	pp->size = cfg->peer_pool_size / SLOT_ALIGN * SLOT_ALIGN;
	pp->idle_ns = cfg->peer_protect_idle_ms * 1000000ull;
	if (!(pp->jobs = calloc(PJOBS_MAX, sizeof(*pp->jobs)))) {
		free(pp);
		return -ENOMEM;
	}
	pp->mem = mmap(NULL, pp->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (pp->mem == MAP_FAILED) {
		r = -errno;
		pp->mem = NULL;
		snprintf(err, errcap, "--peer-pool-size: cannot map %llu bytes: %s", (unsigned long long)pp->size,
		         strerror(-r));
		goto fail;
	}
	madvise(pp->mem, pp->size, MADV_HUGEPAGE);
	if ((r = ckpt_fab_open(NULL, host, 1, &pp->fab, why, sizeof(why))) < 0 ||
	    (r = ckpt_fab_mr_reg(pp->fab, pp->mem, pp->size, CKPT_FAB_REMOTE_WRITE | CKPT_FAB_REMOTE_READ, &pp->mr,
	                         why, sizeof(why))) < 0 ||
	    (r = ckpt_fab_mr_remote(pp->fab, pp->mr, &pp->rem)) < 0) {
		snprintf(err, errcap, "peer pool: fabric on %s: %s", host, why[0] ? why : strerror(-r));
		goto fail;
	}
	a->peer = pp;
	CKPTD_INFO(a->log, NULL, NULL, "peer pool: %llu bytes registered with %s on %s",
	           (unsigned long long)pp->size, ckpt_fab_provider_name(pp->fab), host);
	return 0;
fail:
	a->peer = pp;
	ckptd__peer_close(a);
	return r;
}

void ckptd__peer_close(ckptd_agent *a)
{
	ckptd_peerpool *pp = a->peer;
	if (!pp)
		return;
	for (size_t i = 0; i < pp->nchecks; i++) {
		ckptd_vtask_join(pp->checks[i]->t);
		free(pp->checks[i]);
	}
	ckpt_fab_mr_close(pp->mr);
	ckpt_fab_close(pp->fab);
	if (pp->mem)
		munmap(pp->mem, pp->size);
	free(pp->slots);
	free(pp->pins);
	free(pp->checks);
	free(pp->jobs);
	free(pp);
	a->peer = NULL;
}

/* ---------------------------------------------------------------- partners */

void ckptd__peer_partners(ckptd_agent *a, const ckptd_partners *p)
{
	ckptd_partner *e = NULL;
	if (p->count && !(e = malloc(p->count * sizeof(*e))))
		return; /* keeps the old list */
	if (p->count)
		memcpy(e, p->entries, p->count * sizeof(*e));
	free(a->partners.entries);
	a->partners = *p;
	a->partners.entries = e;
	char list[512] = "";
	for (uint32_t i = 0; i < p->count && strlen(list) + CKPTD_NAME_MAX + 2 < sizeof(list); i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", p->entries[i].node);
	if (p->scheme[0])
		CKPTD_INFO(a->log, NULL, NULL, "partners: none, this node's ranks are protected by its %s group", p->scheme);
	else
		CKPTD_INFO(a->log, NULL, NULL, "partners (%u cop%s wanted): %s", p->replicas, p->replicas == 1 ? "y" : "ies",
		           p->count ? list : "none");
}

int ckptd__peer_send_partners(ckptd_agent *a, ckptd_session *s)
{
	ckptd_msg rep = { .type = CKPTD_MSG_PARTNERS, .u.partners = a->partners };
	rep.u.partners.job[0] = '\0';
	return ckptd_session_send(s, &rep, -1);
}
