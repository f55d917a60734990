/* What the ckpt tool asks an agent: VERIFY (every copy this node holds,
 * read on a thread), LOCATE (where a shard is here), READ grants of its
 * job's DRAM copies (restore --daemon), and questions for the coordinator
 * (LIST_VERSIONS, SHOW_VERSION, STEP_STATS, GOODPUT, STRAGGLERS), passed on. */
#include "agent_int.h"

#include "format/index.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#define MAX_VERIFY 4 /* verifications in flight at once */

/* A verification in flight: who asked, what is pinned. */
typedef struct vrun {
	struct vrun *next;
	ckptd_agent *a;
	ckptd_vtask *t;
	uint64_t serial; /* the asking session */
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
} vrun;

typedef struct vcollect {
	ckptd_agent *a;
	const char *job;
	uint64_t version;
	ckptd_vitem *items;
	size_t n, cap;
	int err;
} vcollect;

typedef struct root_find {
	char *path;
	size_t cap;
	const char *job;
	uint64_t version;
	uint32_t rank;
	int found;
} root_find;

static int root_find_cb(void *arg, const char *root)
{
	root_find *f = arg;
	struct stat st;
	if (ckpt__shard_path(f->path, f->cap, root, f->job, f->version, f->rank) == 0 && stat(f->path, &st) == 0) {
		f->found = 1;
		return 1;
	}
	return 0;
}

static int vcollect_cb(void *arg, const ckptd_aidx_rec *r)
{
	vcollect *c = arg;
	if (r->version != c->version || strcmp(r->job, c->job))
		return 0;
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 16;
		void *p = realloc(c->items, nc * sizeof(*c->items));
		if (!p) {
			c->err = -ENOMEM;
			return 1;
		}
		c->items = p;
		c->cap = nc;
	}
	ckptd_vitem *it = &c->items[c->n++];
	memset(it, 0, sizeof(*it));
	it->res.rank = r->rank;
	it->res.tier = r->tier;
	it->checksum = r->checksum;
	it->lineage = r->lineage;
	it->seg_id = UINT64_MAX;
	if (r->tier == CKPT_TIER_LOCAL_MEM) {
		ckptd_pool *pool = ckptd_jpools_get(c->a->pools, r->job, NULL);
		ckptd_seg_info si;
		if (!pool || ckptd_pool_find(pool, r->job, r->version, r->rank, &si) < 0 || si.state != CKPTD_SEG_HELD ||
		    ckptd_pool_seg_pin(pool, si.id) < 0) {
			it->res.code = CKPTD_VERIFY_MISSING;
			snprintf(it->res.text, sizeof(it->res.text), "no DRAM segment holds it any more");
		} else {
			it->seg_id = si.id;
			it->img = (const uint8_t *)ckptd_pool_base(pool) + si.off;
			it->len = si.len;
		}
	} else if (r->tier == CKPT_TIER_LOCAL_DISK) {
		root_find f = { it->path, sizeof(it->path), r->job, r->version, r->rank, 0 };
		ckptd_aidx_roots(c->a->idx, r->job, root_find_cb, &f);
		if (!f.found) {
			it->res.code = CKPTD_VERIFY_MISSING;
			snprintf(it->res.text, sizeof(it->res.text), "no shard file under the roots its ranks registered");
		}
	} else {
		it->res.code = CKPTD_VERIFY_ERROR;
		snprintf(it->res.text, sizeof(it->res.text), "tier not verified by agents");
	}
	return 0;
}

static void unpin_items(ckptd_agent *a, const char *job, ckptd_vitem *items, size_t n)
{
	ckptd_pool *pool = ckptd_jpools_get(a->pools, job, NULL);
	for (size_t i = 0; pool && i < n; i++)
		if (items[i].seg_id != UINT64_MAX)
			ckptd_pool_seg_unpin(pool, items[i].seg_id);
}

/* Answers in pages of at most CKPTD_MAX_LIST entries (MORE on all but the last). */
static void send_results(ckptd_session *s, const char *job, uint64_t version, ckptd_vitem *items, size_t n)
{
	ckptd_verify_result *e = calloc(n < CKPTD_MAX_LIST ? (n ? n : 1) : CKPTD_MAX_LIST, sizeof(*e));
	if (!e) {
		ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "out of memory");
		return;
	}
	size_t i = 0;
	do {
		ckptd_msg m = { .type = CKPTD_MSG_VERIFY_REPLY };
		ckptd_verify_reply *r = &m.u.verify_reply;
		snprintf(r->job, sizeof(r->job), "%s", job);
		r->version = version;
		r->entries = e;
		for (; i < n && r->count < CKPTD_MAX_LIST; i++)
			e[r->count++] = items[i].res;
		r->more = i < n;
		if (ckptd_session_send(s, &m, -1) < 0)
			break;
	} while (i < n);
	free(e);
}

static void on_vdone(void *arg, ckptd_vtask *t, ckptd_vitem *items, size_t n)
{
	vrun *v = arg;
	ckptd_agent *a = v->a;
	unpin_items(a, v->job, items, n);
	rank_sess *rs = ckptd__agent_rank_by_serial(a, v->serial);
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += items[i].res.code != CKPTD_VERIFY_OK;
	ckptd_metrics_add(a->mx, CKPTD_M_VERIFICATIONS, v->job, NULL, 1);
	ckptd_metrics_add(a->mx, CKPTD_M_NOT_INTACT, v->job, NULL, (double)bad);
	CKPTD_INFO(a->log, NULL, v->job, "version %llu: verified %zu copies, %zu not intact", (unsigned long long)v->version,
	           n, bad);
	if (rs)
		send_results(rs->s, v->job, v->version, items, n);
	for (vrun **pp = &a->vruns; *pp; pp = &(*pp)->next)
		if (*pp == v) {
			*pp = v->next;
			break;
		}
	a->nvruns--;
	(void)t;
	free(v);
}

static int on_verify(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_verify *m)
{
	if (a->nvruns >= MAX_VERIFY)
		return ckptd_session_send_error(s, CKPTD_ERR_BUSY, "verifications already running here; try again");
	vcollect c = { a, m->job, m->version, NULL, 0, 0, 0 };
	int r = ckptd_aidx_each(a->idx, vcollect_cb, &c);
	if (r < 0 || c.err < 0) {
		unpin_items(a, m->job, c.items, c.n);
		free(c.items);
		return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "cannot list the copies held here");
	}
	if (!c.n) {
		free(c.items);
		send_results(s, m->job, m->version, NULL, 0);
		return 0;
	}
	vrun *v = calloc(1, sizeof(*v));
	if (!v) {
		unpin_items(a, m->job, c.items, c.n);
		free(c.items);
		return -ENOMEM;
	}
	v->a = a;
	v->serial = rs->serial;
	snprintf(v->job, sizeof(v->job), "%s", m->job);
	v->version = m->version;
	if ((r = ckptd_vtask_start(a->srv, m->job, m->version, c.items, c.n, on_vdone, v, &v->t)) < 0) {
		unpin_items(a, m->job, c.items, c.n);
		free(c.items);
		free(v);
		return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "cannot start the verification");
	}
	v->next = a->vruns;
	a->vruns = v;
	a->nvruns++;
	return 0;
}

typedef struct loc_acc {
	uint32_t tiers;
	uint64_t checksum;
} loc_acc;

typedef struct loc_walk {
	const char *job;
	uint64_t version;
	uint32_t rank;
	loc_acc *acc;
} loc_walk;

static int loc_cb(void *arg, const ckptd_aidx_rec *r)
{
	loc_walk *w = arg;
	if (r->version == w->version && r->rank == w->rank && !strcmp(r->job, w->job)) {
		w->acc->tiers |= r->tier;
		if (r->tier == CKPT_TIER_LOCAL_DISK)
			w->acc->checksum = r->checksum;
	}
	return 0;
}

/* LOCATE: which tiers this node holds a shard in, and the root of its file. */
int ckptd__agent_locate(ckptd_agent *a, ckptd_session *s, const ckptd_segment_request *m)
{
	ckptd_msg rep = { .type = CKPTD_MSG_LOCATION };
	ckptd_location *l = &rep.u.location;
	snprintf(l->job, sizeof(l->job), "%s", m->job);
	l->version = m->version;
	l->rank = m->rank;
	loc_acc acc = { 0, 0 };
	loc_walk w = { m->job, m->version, m->rank, &acc };
	if (ckptd_aidx_each(a->idx, loc_cb, &w) < 0)
		return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "cannot read the agent index");
	l->tiers = acc.tiers & (CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK);
	if (ckptd__peer_has(a, m->job, m->version, m->rank)) /* a partner's copy, held here */
		l->tiers |= CKPT_TIER_PEER_MEM;
	if (l->tiers & CKPT_TIER_LOCAL_DISK) {
		char path[CKPTD_PATH_MAX + 80];
		root_find f = { path, sizeof(path), m->job, m->version, m->rank, 0 };
		ckptd_aidx_roots(a->idx, m->job, root_find_cb, &f);
		if (f.found && strlen(path) < sizeof(path)) {
			/* The root is the path up to "/jobs/<job>/". */
			char *cut = strstr(path, "/jobs/");
			size_t n = cut ? (size_t)(cut - path) : 0;
			for (char *q = cut; q && (q = strstr(q + 1, "/jobs/"));)
				n = (size_t)(q - path); /* the last one: a root may itself hold "/jobs/" */
			if (n && n <= CKPTD_PATH_MAX) {
				memcpy(l->root, path, n);
				l->root[n] = 0;
				l->checksum = acc.checksum;
			}
		}
		if (!l->root[0])
			l->tiers &= ~(uint32_t)CKPT_TIER_LOCAL_DISK; /* recorded, but the file is not there */
	}
	return ckptd_session_send(s, &rep, -1);
}

/* The ckpt tool on the agent: what this node holds (verify, locate, read),
 * and questions for the coordinator, passed on. A session scoped to a job
 * reaches that job only. */
int ckptd__agent_cli(ckptd_agent *a, ckptd_session *s, const ckptd_msg *m)
{
	const char *sjob = ckptd_session_job(s);
	rank_sess *rs = ckptd__agent_rank_of(a, s);
	if (!rs)
		return -ENOMEM;
	switch (m->type) {
	case CKPTD_MSG_VERIFY:
		return on_verify(a, s, rs, &m->u.verify);
	case CKPTD_MSG_PREEMPT:
		return ckptd__agent_preempt(a, s, &m->u.preempt, rs->serial);
	case CKPTD_MSG_LIST_VERSIONS:
	case CKPTD_MSG_SHOW_VERSION:
	case CKPTD_MSG_STEP_STATS:
	case CKPTD_MSG_GOODPUT:
	case CKPTD_MSG_STRAGGLERS:
		if (ckptd__agent_link_send(a, m, FWD_LIST, rs->serial) < 0)
			return ckptd_session_send_error(s, CKPTD_ERR_BUSY, "coordinator unreachable; try again");
		return 0;
	case CKPTD_MSG_SEGMENT_REQUEST: {
		const ckptd_segment_request *q = &m->u.segment_request;
		if (q->mode == CKPTD_SEG_LOCATE)
			return ckptd__agent_locate(a, s, q);
		if ((q->mode != CKPTD_SEG_READ && q->mode != CKPTD_SEG_PARTNER_COPY) || !sjob[0])
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "the tool reads segments of its job only");
		if (ckptd_session_transport(s) != CKPTD_TRANSPORT_UNIX)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED,
			                                "DRAM segments are handed over the agent's Unix socket only");
		snprintf(rs->job, sizeof(rs->job), "%s", sjob); /* for unpinning when it goes */
		if (q->mode == CKPTD_SEG_PARTNER_COPY) {
			/* The partner copy this node holds of another node's rank (a
			 * lost node's, restored by hand): a sealed copy, nothing to
			 * release (segment id 0). */
			int fd = -1;
			uint64_t len = 0;
			int r = ckptd__peer_copy_fd(a, q->job, q->version, q->rank, &fd, &len);
			if (r < 0)
				return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, r == -ENOENT ? "no partner copy of that "
				                                "shard on this node" : "cannot copy the partner copy");
			ckptd_msg g = { .type = CKPTD_MSG_SEGMENT_GRANT, .u.segment_grant = { 0, 0, len } };
			r = ckptd_session_send(s, &g, fd);
			close(fd);
			return r;
		}
		return ckptd__agent_grant_read(a, s, rs, q);
	}
	case CKPTD_MSG_SEGMENT_RELEASE:
		return ckptd__agent_release(a, s, rs, m->u.segment_release.segment_id);
	default:
		return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "the tool may not send that to an agent");
	}
}

void ckptd__agent_verify_join(ckptd_agent *a)
{
	for (vrun *v = a->vruns, *n; v; v = n) {
		n = v->next;
		ckptd_vtask_join(v->t);
		free(v);
	}
	a->vruns = NULL;
	a->nvruns = 0;
}
