/* Prefetch on an agent: a shard's newest committed version copied into
 * this node's pool before a rank asks for it, so that its restore reads
 * node DRAM. Two things start a task, the same one:
 *  - a rank registers here and this node holds no copy of its shard (a
 *    rank restarted on a replacement node): its read waits for the task,
 *    except while a partner's copy waits for the job's pool here to be
 *    made: the rank then reads the partner itself (restore.c), sooner, and
 *    nothing is fetched for it;
 *  - the coordinator's SPARE_ASSIGN (this agent a spare, --spare): the lost
 *    node's ranks, before any of them is relaunched here; once every task
 *    of the assignment ended, SPARE_DONE says how it went.
 * The sources, in order: a partner's DRAM (PEER_MEM), the rank's rs group
 * (rebuilt from the survivors, agent_ec.c), the SHARED directory.
 *
 *   loop   ── a task, on a thread of its own
 *   thread ── the coordinator (as an agent): the newest committed version
 *             (unless the assignment names it), then the nodes holding a
 *             PEER_MEM copy (SEG_WHERE); a partner: SEGMENT_REQUEST(PEER_READ),
 *             pinned there
 *   loop   ── a segment of the job's pool for (job, version, rank)
 *   thread ── fi_reads into it, many in flight, each chunk checked as it
 *             lands (ckpt__image_pull; or the rebuild, or a read of the
 *             SHARED file, every chunk checked), SEGMENT_RELEASE
 *   loop   ── the segment done, the copy recorded and reported LOCAL_MEM
 * The thread and the loop hand over through the task's mutex and a pipe. */
#include "agent_int.h"

#include "fabric.h"
#include "format/format.h"
#include "format/image_read.h"
#include "format/reader.h"
#include "format/s3tree.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PF_TIMEOUT_MS 10000

enum { PF_QUERY = 0, PF_NEED_SEG, PF_READING, PF_DONE };
enum { SRC_PARTNER = 1, SRC_RS, SRC_SHARED };

/* A SPARE_ASSIGN: its tasks, and what SPARE_DONE will say. */
typedef struct pf_assign {
	struct pf_assign *next;
	char job[CKPTD_JOB_MAX + 1];
	char node[CKPTD_NAME_MAX + 1]; /* the lost node */
	uint64_t epoch, version;
	uint32_t left, ok;             /* tasks not ended; ranks now in DRAM */
	uint32_t from[SRC_SHARED + 1]; /* ranks per source */
	uint64_t bytes, start_ns;
	char text[CKPTD_TEXT_MAX + 1]; /* the ranks not pulled, and why */
} pf_assign;

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
	int from;        /* SRC_*: where the copy came from */
	pf_assign *as;   /* the spare's assignment it serves; NULL: a rank registered */
	int direct;      /* loop: a partner's copy waits here for a pool still being
	                    made: the rank's reads meanwhile are not held */
	int rank_read;   /* loop: it read; the pool ready, nothing is fetched (not
	                    to compete with its read, which has the bytes already) */
	char why[1200];
} pf_task;

/* A rank's READ of a shard this agent is fetching (or rebuilding): held
 * until the task ends, at most PF_HOLD_MS (the rank's call waits
 * CKPTD_CLIENT_DEFAULT_TIMEOUT_MS), then answered as if asked then; but
 * a rebuild from the rs group that read more since the hold began is
 * still going: ERROR BUSY then, and the rank asks again (libckpt's
 * daemon.c), so that the wait lasts as long as the rebuild progresses,
 * however large the shard, and ends as soon as it stalls. */
typedef struct pf_wait {
	uint64_t serial;
	ckptd_segment_request req;
	uint64_t until_ns;
	uint64_t progress; /* the rebuild's bytes read when the hold began */
} pf_wait;
#define PF_HOLD_MS 8000

struct agent_prefetch {
	int pipe[2];
	pf_task *tasks;
	pf_assign *assigns;
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
	uint64_t start = 0, best = t->version;
	int found = best != 0, named = found; /* the assignment named it */
	while (!named) {
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

/* The parsed image s in the segment is this rank's shard of the version
 * (its chunks checked by whoever parsed it). */
static int check_parsed(pf_task *t, const ckpt_shard *s, char *why, size_t cap)
{
	if (s->header.version != t->version || s->header.rank != t->rank || strcmp(s->header.job, t->job)) {
		snprintf(why, cap, "not this rank's shard of the version");
		return -CKPT_ECORRUPT;
	}
	if (t->checksum && s->tail.footer_checksum != t->checksum) {
		snprintf(why, cap, "footer checksum differs from the one recorded");
		return -CKPT_ECORRUPT;
	}
	t->checksum = s->tail.footer_checksum;
	t->lineage = s->header.lineage;
	return 0;
}

/* Threads that check the chunks of a pull as they land, besides the one
 * driving the fabric. */
static unsigned pull_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n <= 2 ? 1u : n > 5 ? 4u : (unsigned)n - 1;
}

/* The image in the segment is this rank's shard of the version, intact. */
static int check_image(pf_task *t)
{
	ckpt_shard s;
	char why[300] = "";
	ckpt_read_opts o = { .depth = 4, .why = why, .whycap = sizeof(why) };
	int r = ckpt__shard_parse_mem(t->seg, t->bytes, &s, why, sizeof(why));
	if (r == 0)
		r = check_parsed(t, &s, why, sizeof(why));
	if (r == 0)
		r = ckpt__shard_read_mem(t->seg, t->bytes, &s, &o, sink, NULL);
	if (r < 0) {
		fail(t, t->from == SRC_SHARED ? "the SHARED copy does not verify: %s"
		        : t->from == SRC_RS     ? "the rebuilt copy does not verify: %s"
		                                : "the partner's copy does not verify: %s",
		     why[0] ? why : ckpt_strerror(r));
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
	           (r = ckpt_fab_mr_reg(fab, t->seg, g.bytes, CKPT_FAB_LOCAL, &mr, why, sizeof(why))) < 0) {
		fail(t, "fi_read: %s", why);
	} else {
		/* The structure, then every chunk with many reads in flight, each
		 * checked (seal, else checksum) as it lands while the next are
		 * read: no second pass over the image. */
		ckpt_shard s;
		uint64_t t0 = ckpt__now_ns();
		r = ckpt__image_pull(fab, &rem, g.offset, g.bytes, t->seg, mr, pull_threads(), PF_TIMEOUT_MS, &s, why,
		                     sizeof(why));
		if (r == 0) {
			r = check_parsed(t, &s, why, sizeof(why));
			ckpt__shard_close(&s);
		}
		if (r < 0)
			fail(t, "the partner's copy: %s", why[0] ? why : ckpt_strerror(r));
		else
			CKPTD_DEBUG(a->log, NULL, t->job, "version %llu rank %u pulled from %s: %llu bytes in %.1f ms",
			            (unsigned long long)t->version, t->rank, p->node, (unsigned long long)g.bytes,
			            (ckpt__now_ns() - t0) / 1e6);
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
	t->from = SRC_RS;
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

/* No partner copy, no rs group: the version's file in the SHARED
 * directory (--shared-dir), read into our segment, then checked. An object
 * store is left to the ranks' own restore. */
static int from_shared(pf_task *t)
{
	ckptd_agent *a = t->a;
	const char *dir = a->cfg->shared_dir;
	char path[CKPTD_PATH_MAX + 256], prev[sizeof(t->why)];
	snprintf(prev, sizeof(prev), "%s", t->why);
	if (!dir || !dir[0] || ckpt__s3tree_is_url(dir)) {
		if (dir && dir[0])
			snprintf(t->why, sizeof(t->why), "%.1000s; SHARED is an object store, read by the rank itself", prev);
		return -ENOENT;
	}
	int r = ckpt__shard_path(path, sizeof(path), dir, t->job, t->version, t->rank);
	int fd = r < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
		r = fd < 0 && r == 0 ? -errno : -ENOENT;
		snprintf(t->why, sizeof(t->why), "%.500s; no copy in SHARED (%.400s: %s)", prev, path, ckpt_strerror(r));
		if (fd >= 0)
			close(fd);
		return r;
	}
	t->from = SRC_SHARED;
	t->bytes = (uint64_t)st.st_size; /* bounded by the pool: a larger one gets no segment */
	t->checksum = 0;
	if ((r = wait_segment(t)) < 0) {
		if (!t->refused)
			fail(t, "%s", "no segment in this node's pool in time");
	} else {
		for (uint64_t off = 0; off < t->bytes && r == 0;) {
			size_t want = t->bytes - off > (64u << 20) ? (64u << 20) : (size_t)(t->bytes - off);
			ssize_t n = pread(fd, t->seg + off, want, (off_t)off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				r = n < 0 ? -errno : -EIO;
				snprintf(t->why, sizeof(t->why), "reading %.900s: %s", path,
				         n < 0 ? ckpt_strerror(r) : "shorter than it was");
			}
			off += n > 0 ? (uint64_t)n : 0;
		}
		if (r == 0)
			r = check_image(t);
	}
	close(fd);
	return r;
}

static void *pf_main(void *arg)
{
	pf_task *t = arg;
	ckptd_msg where;
	int ok = 0;
	if (t->as && ckpt__fault(&t->a->faults, "agent.spare_pull") < 0)
		fail(t, "%s", "fault agent.spare_pull armed");
	else if (ask_coordinator(t, &where) == 0) {
		if (!where.u.partners.count)
			fail(t, "%s", "no partner holds a copy");
		/* The first partner that hands over an intact copy; once a segment
		 * is ours, a later failure keeps it (the loop frees it). */
		t->from = SRC_PARTNER;
		for (uint32_t i = 0; i < where.u.partners.count && !ok && !t->refused; i++)
			ok = from_partner(t, &where.u.partners.entries[i]) == 0;
		ckptd_msg_free(&where);
		if (!ok && !t->refused && !t->seg_id)
			ok = from_group(t) == 0;
		/* A segment given and then failed keeps its size: a SHARED read
		 * would need another. */
		if (!ok && !t->refused && !t->seg_id)
			ok = from_shared(t) == 0;
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
		uint64_t now_b = job ? 0 : ckptd__ec_rebuild_progress(a, w.req.job, w.req.rank);
		if (rs && now_b > w.progress) {
			char t[200];
			snprintf(t, sizeof(t), "the shard is being rebuilt here from its rs group (%llu bytes read, %llu in the "
			         "last %d ms): ask again", (unsigned long long)now_b, (unsigned long long)(now_b - w.progress),
			         PF_HOLD_MS);
			CKPTD_DEBUG(a->log, NULL, w.req.job, "rank %u: %s", w.req.rank, t);
			ckptd_session_send_error(rs->s, CKPTD_ERR_BUSY, t);
		} else if (rs) {
			ckptd__agent_grant_read(a, rs->s, rs, &w.req);
		}
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
	/* The newest copy asked for (UINT64_MAX): a rank's io thread looking
	 * for one to map ahead of a restore, not a restore; held, its
	 * heartbeats would wait as long (a "hung" rank). */
	if (!t || m->version == UINT64_MAX)
		return 0;
	pthread_mutex_lock(&t->mu);
	int direct = t->direct && t->stage == PF_NEED_SEG;
	if (direct)
		t->rank_read = 1;
	pthread_mutex_unlock(&t->mu);
	if (direct) {
		CKPTD_DEBUG(a->log, NULL, m->job, "rank %u reads its shard from the partner itself: this node's pool is "
		            "still being made", m->rank);
		return 0;
	}
	if (p->nwaits == p->capwaits) {
		size_t nc = p->capwaits ? p->capwaits * 2 : 8;
		void *q = realloc(p->waits, nc * sizeof(*p->waits));
		if (!q)
			return 0;
		p->waits = q;
		p->capwaits = nc;
	}
	p->waits[p->nwaits++] = (pf_wait){ rs->serial, *m, ckpt__now_ns() + PF_HOLD_MS * 1000000ull,
		                                ckptd__ec_rebuild_progress(a, m->job, m->rank) };
	CKPTD_DEBUG(a->log, NULL, m->job, "rank %u's read held while its shard is fetched here", m->rank);
	return 1;
}

int ckptd__prefetch_holds(const ckptd_agent *a, uint64_t serial)
{
	const struct agent_prefetch *p = a->prefetch;
	for (size_t i = 0; p && i < p->nwaits; i++)
		if (p->waits[i].serial == serial)
			return 1;
	return 0;
}

void ckptd__prefetch_tick(ckptd_agent *a, uint64_t now)
{
	if (a->prefetch && a->prefetch->nwaits)
		answer_waits(a, NULL, 0, now);
}

static const char *src_name(int from)
{
	return from == SRC_RS ? "its rs group (rebuilt from the survivors, every chunk checked)"
	     : from == SRC_SHARED ? "SHARED (every chunk checked)" : "partner DRAM";
}

/* The assignment's last task ended: SPARE_DONE to the coordinator. */
static void assign_end(ckptd_agent *a, pf_assign *as)
{
	struct agent_prefetch *p = a->prefetch;
	for (pf_assign **pp = &p->assigns; *pp; pp = &(*pp)->next)
		if (*pp == as) {
			*pp = as->next;
			break;
		}
	double s = (double)(ckpt__now_ns() - as->start_ns) / 1e9;
	uint32_t n = as->ok;
	ckptd_msg m = { .type = CKPTD_MSG_SPARE_DONE };
	ckptd_spare_done *d = &m.u.spare_done;
	snprintf(d->job, sizeof(d->job), "%s", as->job);
	d->epoch = as->epoch;
	d->version = as->version;
	d->count = n;
	d->bytes = as->bytes;
	uint32_t failed = 0;
	for (const char *c = as->text; *c; c++)
		failed += *c == ';';
	d->code = failed ? ENODATA : 0;
	if (failed)
		snprintf(d->text, sizeof(d->text), "%.1000s", as->text);
	else
		snprintf(d->text, sizeof(d->text), "%u from partner DRAM, %u from rs groups, %u from SHARED, in %.3f s",
		         as->from[SRC_PARTNER], as->from[SRC_RS], as->from[SRC_SHARED], s);
	if (failed)
		CKPTD_ERROR(a->log, NULL, as->job, "spare for %s (epoch %" PRIu64 "): %u of %u ranks pulled into this "
		            "node's DRAM in %.3f s; NOT pulled: %s", as->node, as->epoch, n, n + failed, s, as->text);
	else
		CKPTD_INFO(a->log, NULL, as->job, "spare for %s (epoch %" PRIu64 "): %u ranks (%" PRIu64 " bytes) of "
		           "version %" PRIu64 " pulled into this node's DRAM in %.3f s (%s)", as->node, as->epoch, n,
		           as->bytes, as->version, s, d->text);
	if (ckptd__agent_link_send(a, &m, FWD_IGNORE, 0) < 0)
		CKPTD_WARN(a->log, NULL, as->job, "SPARE_DONE not sent: the coordinator link is down");
	free(as);
}

static void task_end(ckptd_agent *a, pf_task *t)
{
	pthread_join(t->thr, NULL);
	ckptd_pool *pool = ckptd_jpools_get(a->pools, t->job, NULL);
	pf_assign *as = t->as;
	if (t->ok && pool) {
		ckptd_pool_seg_done(pool, t->seg_id);
		ckptd_shard_done d = { .version = t->version, .rank = t->rank, .tier = CKPT_TIER_LOCAL_MEM,
		                       .bytes = t->bytes, .checksum = t->checksum, .lineage = t->lineage };
		snprintf(d.job, sizeof(d.job), "%s", t->job);
		ckptd__agent_done_push(a, NULL, &d);
		CKPTD_INFO(a->log, NULL, t->job, "prefetched version %llu rank %u from %s into this node's pool "
		           "(%llu bytes)", (unsigned long long)t->version, t->rank, src_name(t->from),
		           (unsigned long long)t->bytes);
		if (as) {
			as->ok++;
			as->from[t->from]++;
			as->bytes += t->bytes;
			if (!as->version)
				as->version = t->version;
		}
	} else {
		if (t->seg_id && pool)
			ckptd_pool_seg_free(pool, t->seg_id);
		if (t->from == SRC_RS)
			CKPTD_WARN(a->log, NULL, t->job, "version %llu rank %u not rebuilt from its rs group: %s",
			           (unsigned long long)t->version, t->rank, t->why[0] ? t->why : "failed");
		else
			CKPTD_INFO(a->log, NULL, t->job, "no prefetch of rank %u: %s", t->rank, t->why[0] ? t->why : "failed");
		if (as) {
			size_t n = strlen(as->text);
			snprintf(as->text + n, sizeof(as->text) - n, "%srank %u: %.300s;", n ? " " : "", t->rank,
			         t->why[0] ? t->why : "failed");
		}
	}
	if (t->has_ref)
		ckptd_jpools_unref(a->pools, t->job);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t);
	if (as && --as->left == 0)
		assign_end(a, as);
}

/* A task asks for its segment (with t->mu); while the job's pool is being
 * made it waits (the pool's readiness wakes the tasks again). */
static void give_segment(ckptd_agent *a, pf_task *t)
{
	int preparing = 0;
	ckptd_pool *pool = ckptd_jpools_get(a->pools, t->job, &preparing);
	ckptd_seg_info si;
	if (!pool && preparing) {
		/* A partner's copy for a rank that registered, waiting here for
		 * the pool: the rank reads it sooner itself than after the pool
		 * and the copy. (A spare's pull is its assignment: it waits.) */
		if (t->from == SRC_PARTNER && !t->as)
			t->direct = 1;
		return;
	}
	if (t->rank_read) {
		fail(t, "%s", "the rank read the partner's copy itself while this node's pool was made");
		t->refused = 1;
	} else if (pool && ckptd_pool_find(pool, t->job, t->version, t->rank, &si) == 0) {
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
		int stage = t->stage, direct = t->direct;
		if (stage == PF_NEED_SEG)
			give_segment(a, t);
		int released = t->direct && !direct;
		pthread_mutex_unlock(&t->mu);
		if (released) /* its held reads: answered now, not held again */
			answer_waits(a, t->job, t->rank, 0);
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

/* A task for (job, rank), at version (0: the newest committed), serving
 * as (may be NULL). Returns 0, or -EEXIST (one runs already), -ENOMEM,
 * -EAGAIN (no thread). */
static int task_start(ckptd_agent *a, const char *job, uint32_t rank, uint64_t version, pf_assign *as)
{
	for (pf_task *t = a->prefetch->tasks; t; t = t->next)
		if (t->rank == rank && !strcmp(t->job, job))
			return -EEXIST;
	pf_task *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->a = a;
	snprintf(t->job, sizeof(t->job), "%s", job);
	t->rank = rank;
	t->version = version;
	t->as = as;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	/* The pool stays while the copy goes in, even if the rank leaves; on a
	 * spare, this reference is what makes the job's pool. */
	t->has_ref = ckptd_jpools_ref(a->pools, job) == 0;
	if (pthread_create(&t->thr, NULL, pf_main, t) != 0) {
		if (t->has_ref)
			ckptd_jpools_unref(a->pools, job);
		pthread_mutex_destroy(&t->mu);
		pthread_cond_destroy(&t->cv);
		free(t);
		return -EAGAIN;
	}
	t->next = a->prefetch->tasks;
	a->prefetch->tasks = t;
	return 0;
}

/* Whether this node's pool holds a DRAM copy of (job, rank). */
static int holds_rank(ckptd_agent *a, const char *job, uint32_t rank)
{
	ckptd_pool *pool = ckptd_jpools_get(a->pools, job, NULL);
	if (!pool)
		return 0;
	ckptd_seg_info segs[256];
	size_t n = 0;
	ckptd_pool_list(pool, segs, 256, &n);
	for (size_t i = 0; i < n && i < 256; i++)
		if (segs[i].rank == rank && !strcmp(segs[i].job, job))
			return 1;
	return 0;
}

void ckptd__prefetch_register(ckptd_agent *a, const char *job, uint32_t rank)
{
	if (!a->prefetch || a->local)
		return;
	/* A rank that holds DRAM copies here restarted in place: nothing to fetch. */
	if (holds_rank(a, job, rank))
		return;
	(void)task_start(a, job, rank, 0, NULL);
}

void ckptd__prefetch_assign(ckptd_agent *a, const ckptd_spare_assign *m)
{
	if (!a->prefetch || a->local) {
		CKPTD_ERROR(a->log, NULL, m->job, "told to take %s's ranks, but this agent cannot prefetch (%s)", m->node,
		            a->local ? "--role both" : "no --coordinator");
		return;
	}
	a->spare_taken = 1;
	pf_assign *as = calloc(1, sizeof(*as));
	if (!as)
		return;
	snprintf(as->job, sizeof(as->job), "%s", m->job);
	snprintf(as->node, sizeof(as->node), "%s", m->node);
	as->epoch = m->epoch;
	as->version = m->version;
	as->start_ns = ckpt__now_ns();
	as->next = a->prefetch->assigns;
	a->prefetch->assigns = as;
	as->left = 1; /* held while the tasks start: one that ends at once must not end the assignment */
	CKPTD_INFO(a->log, NULL, m->job, "spare: taking %s's %u rank(s) (epoch %" PRIu64 "): pulling version %" PRIu64
	           " into this node's DRAM", m->node, m->count, m->epoch, m->version);
	for (uint32_t i = 0; i < m->count; i++) {
		uint32_t rank = m->entries[i].rank;
		int r = holds_rank(a, m->job, rank) ? -EALREADY : task_start(a, m->job, rank, m->version, as);
		pf_task *t = NULL;
		if (r == -EEXIST) /* a rank registered here first: its task serves the assignment too */
			for (t = a->prefetch->tasks; t && (t->rank != rank || strcmp(t->job, m->job)); t = t->next)
				;
		if (r == 0 || (t && !t->as)) {
			if (t)
				t->as = as;
			as->left++;
		} else if (r == -EALREADY) {
			as->ok++;
		} else {
			size_t n = strlen(as->text);
			snprintf(as->text + n, sizeof(as->text) - n, "%srank %u: %s;", n ? " " : "", rank,
			         r == -EEXIST ? "another assignment's fetch runs already" : ckpt_strerror(r));
		}
	}
	if (--as->left == 0)
		assign_end(a, as);
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
	while (p->assigns) {
		pf_assign *as = p->assigns;
		p->assigns = as->next;
		free(as);
	}
	close(p->pipe[0]);
	close(p->pipe[1]);
	free(p);
	a->prefetch = NULL;
}
