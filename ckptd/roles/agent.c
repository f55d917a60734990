/* The agent role: the node-DRAM pool behind the Unix socket, the agent's own
 * index of what it holds, and its link to the coordinator.
 *
 * Order of a save: SEGMENT_REQUEST(WRITE) -> grant with the pool fd; the rank
 * copies its shard in; SHARD_DONE -> segment HELD, record in the index (one
 * transaction for every report of a loop turn), OK to the rank, SHARD_DONE
 * to the coordinator; COMMIT_NOTICE back -> pool version COMMITTED, index
 * marked, notice to the job's ranks on this node. The index is written before
 * the coordinator hears, so a restarted coordinator learns everything from
 * the inventory. */
#include "agent_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LINK_TICK_MS 100
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
#define CONNECT_TIMEOUT_MS 1000
#define INVENTORY_BATCH 2048
#define METRICS_TICK_MS 1000

/* Answers a DRAM request with NO_SPACE or BUSY (the rank writes to disk), counted. */
static int refuse_grant(ckptd_agent *a, ckptd_session *s, const char *job, uint32_t code, const char *text)
{
	ckptd_metrics_add(a->mx, CKPTD_M_GRANTS_REFUSED, job, code == CKPTD_ERR_NO_SPACE ? "no_space" : "busy", 1);
	return ckptd_session_send_error(s, code, text);
}

static int push_id(uint64_t **v, size_t *n, size_t *cap, uint64_t id)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 4;
		void *p = realloc(*v, nc * sizeof(**v));
		if (!p)
			return -ENOMEM;
		*v = p;
		*cap = nc;
	}
	(*v)[(*n)++] = id;
	return 0;
}

static int drop_id(uint64_t *v, size_t *n, uint64_t id)
{
	for (size_t i = 0; i < *n; i++)
		if (v[i] == id) {
			v[i] = v[--*n];
			return 1;
		}
	return 0;
}

/* ---------------------------------------------------------------- link */

static int fifo_push(ckptd_agent *a, int kind, uint64_t serial)
{
	if (a->flen == a->fcap) {
		size_t nc = a->fcap ? a->fcap * 2 : 64;
		fwd *f = malloc(nc * sizeof(*f));
		if (!f)
			return -ENOMEM;
		for (size_t i = 0; i < a->flen; i++)
			f[i] = a->fifo[(a->fhead + i) % a->fcap];
		free(a->fifo);
		a->fifo = f;
		a->fhead = 0;
		a->fcap = nc;
	}
	a->fifo[(a->fhead + a->flen++) % a->fcap] = (fwd){ kind, serial };
	return 0;
}

rank_sess *ckptd__agent_rank_by_serial(ckptd_agent *a, uint64_t serial)
{
	for (rank_sess *r = a->ranks; r; r = r->next)
		if (r->serial == serial)
			return r;
	return NULL;
}

static void link_down(ckptd_agent *a, const char *why)
{
	if (!a->link)
		return;
	CKPTD_WARN(a->log, a->cfg->coordinator, NULL, "coordinator link down: %s; reconnecting", why);
	ckptd_server_unwatch(a->srv, ckptd_client_fd(a->link));
	ckptd_client_close(a->link);
	a->link = NULL;
	/* Ranks waiting for a forwarded answer hear that it will not come. */
	for (; a->flen; a->flen--, a->fhead = (a->fhead + 1) % a->fcap) {
		fwd *f = &a->fifo[a->fhead];
		rank_sess *r = f->kind == FWD_LIST ? ckptd__agent_rank_by_serial(a, f->serial) : NULL;
		if (r)
			ckptd_session_send_error(r->s, CKPTD_ERR_BUSY, "coordinator unreachable; try again");
	}
	a->backoff_ms = BACKOFF_MIN_MS;
	a->next_try_ns = ckpt__now_ns() + a->backoff_ms * 1000000ull;
}

/* Sends to the coordinator; kind: what its answer is for. */
int ckptd__agent_link_send(ckptd_agent *a, const ckptd_msg *m, int kind, uint64_t serial)
{
	if (a->local)
		return ckptd_coordinator_local_msg(a->local, a->node, m);
	if (!a->link)
		return -ENOTCONN;
	int r = ckptd_client_send(a->link, m);
	if (r < 0) {
		link_down(a, strerror(-r));
		return r;
	}
	if ((r = fifo_push(a, kind, serial)) < 0)
		return r;
	return 0;
}

typedef struct inv_acc {
	ckptd_agent *a;
	ckptd_held_shard *e;
	uint32_t n, seq;
	int err;
} inv_acc;

static int inv_flush(inv_acc *acc, int final)
{
	ckptd_msg m = { .type = CKPTD_MSG_AGENT_INVENTORY };
	snprintf(m.u.agent_inventory.node, sizeof(m.u.agent_inventory.node), "%s", acc->a->node);
	m.u.agent_inventory.seq = acc->seq++;
	m.u.agent_inventory.final = (uint32_t)final;
	m.u.agent_inventory.count = acc->n;
	m.u.agent_inventory.entries = acc->e;
	acc->n = 0;
	return ckptd__agent_link_send(acc->a, &m, FWD_IGNORE, 0);
}

static int inv_cb(void *arg, const ckptd_aidx_rec *r)
{
	inv_acc *acc = arg;
	ckptd_held_shard *last = acc->n ? &acc->e[acc->n - 1] : NULL;
	if (last && last->version == r->version && last->rank == r->rank && !strcmp(last->job, r->job)) {
		last->tiers |= r->tier;
		last->committed |= r->committed;
		return 0;
	}
	if (acc->n == INVENTORY_BATCH && (acc->err = inv_flush(acc, 0)) < 0)
		return 1;
	ckptd_held_shard *e = &acc->e[acc->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->job, sizeof(e->job), "%s", r->job);
	e->version = r->version;
	e->rank = r->rank;
	e->world_size = r->world_size > r->rank ? r->world_size : 0;
	e->tiers = r->tier;
	e->committed = r->committed;
	e->bytes = r->bytes;
	e->checksum = r->checksum;
	e->lineage = r->lineage;
	return 0;
}

/* The agent is the source of truth: everything it holds, in batches. */
static int send_inventory(ckptd_agent *a)
{
	inv_acc acc = { .a = a };
	if (!(acc.e = calloc(INVENTORY_BATCH, sizeof(*acc.e))))
		return -ENOMEM;
	int r = ckptd_aidx_each(a->idx, inv_cb, &acc);
	if (r == 1)
		r = acc.err;
	if (r == 0)
		r = inv_flush(&acc, 1);
	free(acc.e);
	a->inventory_due = r < 0;
	return r;
}

static int send_hello(ckptd_agent *a)
{
	ckptd_msg m = { .type = CKPTD_MSG_AGENT_HELLO };
	snprintf(m.u.agent_hello.node, sizeof(m.u.agent_hello.node), "%s", a->node);
	snprintf(m.u.agent_hello.address, sizeof(m.u.agent_hello.address), "%s", a->address);
	snprintf(m.u.agent_hello.domain, sizeof(m.u.agent_hello.domain), "%s", a->cfg->domain ? a->cfg->domain : "");
	snprintf(m.u.agent_hello.host, sizeof(m.u.agent_hello.host), "%s", a->cfg->domain_host ? a->cfg->domain_host : "");
	snprintf(m.u.agent_hello.sw, sizeof(m.u.agent_hello.sw), "%s", a->cfg->domain_switch ? a->cfg->domain_switch : "");
	snprintf(m.u.agent_hello.power, sizeof(m.u.agent_hello.power), "%s", a->cfg->domain_power ? a->cfg->domain_power : "");
	m.u.agent_hello.pool_bytes = a->cfg->pool_size;
	ckptd__peer_stats(a, &m.u.agent_hello.peer_bytes, &(uint64_t){ 0 });
	uint64_t hb = a->cfg->heartbeat_timeout_ms, iv = a->cfg->heartbeat_interval_ms;
	if (hb && (!iv || iv > hb / 4))
		iv = hb / 4;
	m.u.agent_hello.beat_ms = hb ? (uint32_t)(iv > UINT32_MAX ? UINT32_MAX : iv) : 0;
	/* A spare that took a lost node's ranks is a regular node from then on. */
	m.u.agent_hello.spare = a->cfg->spare && !a->spare_taken ? 1 : 0;
	int r = ckptd__agent_link_send(a, &m, FWD_IGNORE, 0);
	if (r == 0)
		r = send_inventory(a);
	if (r == 0)
		ckptd__members_hello(a);
	return r;
}

static void on_notice(ckptd_agent *a, const ckptd_commit_notice *n);
static void on_interval(ckptd_agent *a, const ckptd_interval_notice *n);

static void on_link(ckptd_server *srv, int fd, uint32_t events, void *arg)
{
	(void)srv, (void)fd, (void)events;
	ckptd_agent *a = arg;
	while (a->link) {
		ckptd_msg m;
		int r = ckptd_client_poll(a->link, &m);
		if (r == 0)
			return;
		if (r < 0) {
			link_down(a, r == -ECONNRESET ? "closed by the coordinator" : strerror(-r));
			return;
		}
		a->link_heard_ns = ckpt__now_ns();
		if (m.type == CKPTD_MSG_INTERVAL_NOTICE) {
			on_interval(a, &m.u.interval_notice);
		} else if (m.type == CKPTD_MSG_COMMIT_NOTICE) {
			on_notice(a, &m.u.commit_notice);
		} else if (m.type == CKPTD_MSG_DELETE_VERSION) {
			ckptd__agent_delete(a, &m.u.delete_version);
		} else if (m.type == CKPTD_MSG_PARTNERS && !m.u.partners.job[0]) {
			ckptd__peer_partners(a, &m.u.partners);
		} else if (m.type == CKPTD_MSG_EMERGENCY) {
			ckptd__agent_emergency(a, &m.u.emergency);
		} else if (m.type == CKPTD_MSG_EVIDENCE_REQUEST) {
			ckptd__agent_evidence(a, &m.u.evidence_request);
		} else if (m.type == CKPTD_MSG_EVENT) {
			ckptd__members_event(a, &m.u.event);
		} else if (m.type == CKPTD_MSG_EC_PLAN) {
			ckptd__ec_plan(a, &m.u.ec_plan);
		} else if (m.type == CKPTD_MSG_SPARE_ASSIGN) {
			ckptd__prefetch_assign(a, &m.u.spare_assign);
		} else if (!a->flen) {
			CKPTD_WARN(a->log, a->cfg->coordinator, NULL, "unexpected %s from the coordinator",
			           ckptd_msg_name(m.type) ? ckptd_msg_name(m.type) : "message");
		} else {
			fwd f = a->fifo[a->fhead];
			a->fhead = (a->fhead + 1) % a->fcap;
			a->flen--;
			rank_sess *rs = f.kind == FWD_LIST ? ckptd__agent_rank_by_serial(a, f.serial) : NULL;
			if (rs)
				ckptd_session_send(rs->s, &m, -1);
			else if (m.type == CKPTD_MSG_ERROR)
				CKPTD_WARN(a->log, a->cfg->coordinator, NULL, "coordinator refused a report: %s",
				           m.u.error.text);
		}
		ckptd_msg_free(&m);
	}
}

static uint64_t next_rand(ckptd_agent *a)
{
	a->rng ^= a->rng << 13;
	a->rng ^= a->rng >> 7;
	a->rng ^= a->rng << 17;
	return a->rng;
}

/* The link's heartbeat: a HEARTBEAT every --heartbeat-interval (at most a
 * quarter of the timeout), and the link dropped (then redialled) when the coordinator
 * said nothing for the whole timeout: through a partition TCP keeps an idle
 * connection open, and the agent would never learn that its reports and
 * forwarded questions go nowhere. */
static void link_beat(ckptd_agent *a, uint64_t now)
{
	uint64_t hb = a->cfg->heartbeat_timeout_ms * 1000000ull, last = a->link_tick_ns;
	a->link_tick_ns = now;
	if (!hb || !a->link || CKPTD_VERSION_MINOR_OF(ckptd_client_version(a->link)) < 3)
		return; /* an older coordinator knows no HEARTBEAT */
	/* A late tick: this agent stalled, and what the coordinator sent may
	 * wait unread; no verdict until it is read. */
	if (last && now - last > hb / 2)
		return;
	if (now - a->link_heard_ns > hb) {
		char why[96];
		snprintf(why, sizeof(why), "silent for %.1f s (heartbeat timeout %llu ms)",
		         (double)(now - a->link_heard_ns) / 1e9, (unsigned long long)a->cfg->heartbeat_timeout_ms);
		link_down(a, why);
		return;
	}
	uint64_t every = a->cfg->heartbeat_interval_ms * 1000000ull;
	if (!every || every > hb / 4)
		every = hb / 4;
	if (now - a->link_beat_ns >= every) {
		ckptd_msg m = { .type = CKPTD_MSG_HEARTBEAT, .u.heartbeat.seq = ++a->beat_seq };
		a->link_beat_ns = now;
		ckptd__agent_link_send(a, &m, FWD_IGNORE, 0);
	}
}

static void link_tick(ckptd_server *srv, void *arg)
{
	(void)srv;
	ckptd_agent *a = arg;
	link_beat(a, ckpt__now_ns());
	if (a->local || a->link || ckpt__now_ns() < a->next_try_ns)
		return;
	char err[300] = "";
	ckptd_client *c = NULL;
	int r = ckptd_client_connect(a->cfg->coordinator, NULL, CKPTD_ROLE_AGENT, a->cluster, CONNECT_TIMEOUT_MS, &c,
	                             err, sizeof(err));
	if (r < 0) {
		CKPTD_DEBUG(a->log, a->cfg->coordinator, NULL, "coordinator not reachable: %s", err);
		/* Doubling with jitter, so that agents restarted together spread out. */
		a->backoff_ms = a->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : a->backoff_ms * 2;
		a->next_try_ns = ckpt__now_ns() + (a->backoff_ms / 2 + next_rand(a) % (a->backoff_ms / 2 + 1)) * 1000000ull;
		return;
	}
	ckptd_client_set_timeout(c, 5000);
	if ((r = ckptd_server_watch(a->srv, ckptd_client_fd(c), on_link, a)) < 0) {
		ckptd_client_close(c);
		return;
	}
	a->link = c;
	a->link_heard_ns = a->link_beat_ns = ckpt__now_ns();
	a->backoff_ms = BACKOFF_MIN_MS;
	CKPTD_INFO(a->log, a->cfg->coordinator, NULL, "connected to the coordinator; sending hello and inventory");
	send_hello(a);
}

/* ---------------------------------------------------------------- notices */

static void on_notice(ckptd_agent *a, const ckptd_commit_notice *n)
{
	int r = ckptd_aidx_set_committed(a->idx, n->job, n->version, n->tier);
	if (r < 0)
		CKPTD_WARN(a->log, NULL, n->job, "index: marking version %llu committed failed: %s",
		           (unsigned long long)n->version, strerror(-r));
	ckptd__shared_notice(a, n); /* SHARED: queues the flush (or the commit marker) */
	ckptd_pool *pool = ckptd_jpools_get(a->pools, n->job, NULL);
	if (pool)
		ckptd_pool_version_set(pool, n->job, n->version, CKPTD_VER_COMMITTED);
	ckptd__peer_committed(a, n->job, n->version, n->tier); /* the peer pool's restore points */
	ckptd__ec_committed(a, n->job, n->version, n->tier);   /* rs parity superseded */
	if (r == 0)
		return; /* nothing new to this node: a re-announcement after a reconnect */
	ckptd_msg m = { .type = CKPTD_MSG_COMMIT_NOTICE, .u.commit_notice = *n };
	int k = 0;
	for (rank_sess *rs = a->ranks; rs; rs = rs->next)
		if (rs->registered && !strcmp(rs->job, n->job) && ckptd_session_send(rs->s, &m, -1) == 0)
			k++;
	CKPTD_DEBUG(a->log, NULL, n->job, "version %llu committed at tier %u: told %d ranks",
	            (unsigned long long)n->version, n->tier, k);
}

/* The interval advices: the last 8 of each job (bounded: 256 jobs), kept in
 * the order heard for ranks that register later (they need the history: an
 * advice rules only from its start step, the earlier ones until then), and
 * a new one passed on to the job's ranks here. */
#define ADVICE_PER_JOB 8
static void on_interval(ckptd_agent *a, const ckptd_interval_notice *n)
{
	size_t have = 0, oldest = SIZE_MAX, jobs = 0;
	const ckptd_interval_notice *last = NULL;
	for (size_t i = 0; i < a->nadvice; i++) {
		if (strcmp(a->advice[i].job, n->job))
			continue;
		if (oldest == SIZE_MAX)
			oldest = i;
		last = &a->advice[i];
		have++;
	}
	if (last && last->every == n->every && last->from == n->from)
		return; /* said again (every 10 s), nothing new */
	if (have == ADVICE_PER_JOB) {
		memmove(&a->advice[oldest], &a->advice[oldest + 1], (a->nadvice - oldest - 1) * sizeof(*a->advice));
		a->nadvice--;
	} else if (!have) {
		for (size_t i = 0; i < a->nadvice; i++) { /* distinct jobs: first entry of each */
			size_t k = 0;
			while (k < i && strcmp(a->advice[k].job, a->advice[i].job))
				k++;
			jobs += k == i;
		}
		if (jobs >= 256)
			return;
	}
	void *p = realloc(a->advice, (a->nadvice + 1) * sizeof(*a->advice));
	if (!p)
		return;
	a->advice = p;
	a->advice[a->nadvice++] = *n;
	ckptd_msg m = { .type = CKPTD_MSG_INTERVAL_NOTICE, .u.interval_notice = *n };
	int k = 0;
	for (rank_sess *rs = a->ranks; rs; rs = rs->next)
		if (rs->registered && !strcmp(rs->job, n->job) && ckptd_session_send(rs->s, &m, -1) == 0)
			k++;
	CKPTD_DEBUG(a->log, NULL, n->job, "interval advice every %llu steps from %llu: told %d ranks",
	            (unsigned long long)n->every, (unsigned long long)n->from, k);
}

static void local_from_coord(void *arg, const ckptd_msg *m)
{
	ckptd_agent *a = arg;
	if (m->type == CKPTD_MSG_INTERVAL_NOTICE)
		on_interval(a, &m->u.interval_notice);
	else if (m->type == CKPTD_MSG_COMMIT_NOTICE)
		on_notice(a, &m->u.commit_notice);
	else if (m->type == CKPTD_MSG_DELETE_VERSION)
		ckptd__agent_delete(a, &m->u.delete_version);
	else if (m->type == CKPTD_MSG_PARTNERS)
		ckptd__peer_partners(a, &m->u.partners);
	else if (m->type == CKPTD_MSG_EMERGENCY)
		ckptd__agent_emergency(a, &m->u.emergency);
	else if (m->type == CKPTD_MSG_EVIDENCE_REQUEST)
		ckptd__agent_evidence(a, &m->u.evidence_request);
	else if (m->type == CKPTD_MSG_EVENT)
		ckptd__members_event(a, &m->u.event);
	else if (m->type == CKPTD_MSG_EC_PLAN)
		ckptd__ec_plan(a, &m->u.ec_plan);
}

/* The pool evicted a segment to make room: the copy is gone. */
static void on_evict(void *arg, const ckptd_seg_info *si)
{
	ckptd_agent *a = arg;
	ckptd_aidx_del(a->idx, si->job, si->version, si->rank, CKPT_TIER_LOCAL_MEM);
	/* The protocol has no message for one lost copy: a fresh inventory
	 * tells the coordinator (its final batch drops what is not listed). */
	a->inventory_due = 1;
	ckptd_metrics_add(a->mx, CKPTD_M_EVICTED, si->job, NULL, 1);
	CKPTD_INFO(a->log, NULL, si->job, "evicted version %llu rank %u from DRAM", (unsigned long long)si->version,
	           si->rank);
}

/* ---------------------------------------------------------------- reports */

static void after_events(ckptd_server *srv, void *arg)
{
	(void)srv;
	ckptd_agent *a = arg;
	if (a->ndone) {
		ckptd_aidx_rec *recs = calloc(a->ndone, sizeof(*recs));
		int r = recs ? 0 : -ENOMEM;
		for (size_t i = 0; recs && i < a->ndone; i++) {
			const ckptd_shard_done *d = &a->done[i].d;
			snprintf(recs[i].job, sizeof(recs[i].job), "%s", d->job);
			recs[i].version = d->version;
			recs[i].rank = d->rank;
			recs[i].tier = d->tier;
			recs[i].world_size = d->world_size;
			recs[i].bytes = d->bytes;
			recs[i].checksum = d->checksum;
			recs[i].lineage = d->lineage;
		}
		if (recs)
			r = ckptd_aidx_put(a->idx, recs, a->ndone);
		free(recs);
		for (size_t i = 0; i < a->ndone; i++) {
			done_item *e = &a->done[i];
			if (r < 0) {
				if (e->rs)
					ckptd_session_send_error(e->rs->s, CKPTD_ERR_INTERNAL, "agent index write failed");
				continue;
			}
			const char *tier = ckptd_metrics_tier(e->d.tier);
			ckptd_metrics_add(a->mx, CKPTD_M_AGENT_REPORTS, e->d.job, tier, 1);
			ckptd_metrics_add(a->mx, CKPTD_M_SHARD_BYTES, e->d.job, tier, (double)e->d.bytes);
			if (e->d.stall_ns)
				ckptd_metrics_observe(a->mx, CKPTD_M_SAVE_STALL, e->d.job, tier, (double)e->d.stall_ns / 1e9);
			if (e->d.durable_ns)
				ckptd_metrics_observe(a->mx, CKPTD_M_TIME_TO_DURABLE, e->d.job, tier, (double)e->d.durable_ns / 1e9);
			ckptd_msg ok = { .type = CKPTD_MSG_OK, .u.ok.version = e->d.version };
			if (e->rs)
				ckptd_session_send(e->rs->s, &ok, -1);
			ckptd_msg fw = { .type = CKPTD_MSG_SHARD_DONE, .u.shard_done = e->d };
			/* Down: the inventory on reconnect carries it. */
			ckptd__agent_link_send(a, &fw, FWD_IGNORE, 0);
		}
		if (r < 0)
			CKPTD_ERROR(a->log, NULL, NULL, "index write of %zu reports failed: %s", a->ndone, strerror(-r));
		a->ndone = 0;
	}
	if (a->inventory_due && (a->link || a->local))
		send_inventory(a);
}

/* ---------------------------------------------------------------- ranks */

static void rank_sess_free(void *arg)
{
	rank_sess *rs = arg;
	ckptd_agent *a = rs->a;
	/* A rank gone before SHARD_DONE leaves a half-written segment. */
	ckptd_pool *pool = rs->job[0] ? ckptd_jpools_get(a->pools, rs->job, NULL) : NULL;
	for (size_t i = 0; pool && i < rs->nwriting; i++)
		ckptd_pool_seg_free(pool, rs->writing[i]);
	for (size_t i = 0; pool && i < rs->npinned; i++)
		ckptd_pool_seg_unpin(pool, rs->pinned[i]);
	if (rs->pool_ref)
		ckptd_jpools_unref(a->pools, rs->job);
	if (rs->registered)
		ckptd__agent_health_rank(a, rs, 0, 1);
	ckptd__members_gone(a, rs);
	ckptd__peer_session_gone(a, rs->serial);
	ckptd__ec_session_gone(a, rs->serial);
	if (rs->nwriting)
		CKPTD_INFO(a->log, NULL, rs->job, "rank %u left before SHARD_DONE: %zu segments freed", rs->rank, rs->nwriting);
	/* Reports of this turn still name it. */
	for (size_t i = 0; i < a->ndone; i++)
		if (a->done[i].rs == rs)
			a->done[i].rs = NULL;
	if (rs->prev)
		rs->prev->next = rs->next;
	else
		a->ranks = rs->next;
	if (rs->next)
		rs->next->prev = rs->prev;
	free(rs->writing);
	free(rs->pinned);
	free(rs);
}

rank_sess *ckptd__agent_rank_of(ckptd_agent *a, ckptd_session *s)
{
	rank_sess *rs = ckptd_session_data(s);
	if (rs)
		return rs;
	if (!(rs = calloc(1, sizeof(*rs))))
		return NULL;
	rs->a = a;
	rs->s = s;
	rs->serial = ++a->next_serial;
	rs->next = a->ranks;
	if (a->ranks)
		a->ranks->prev = rs;
	a->ranks = rs;
	ckptd_session_set_data(s, rs, rank_sess_free);
	return rs;
}

static int on_register(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_register_rank *m)
{
	pid_t pid;
	/* Over TCP there are no peer credentials: the job's secret is the check. */
	if (ckptd_session_transport(s) == CKPTD_TRANSPORT_UNIX &&
	    (ckptd_session_peer_cred(s, &pid, NULL, NULL) < 0 || (uint32_t)pid != m->pid))
		return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "PID does not match the socket's peer credentials");
	if (rs->registered && (rs->rank != m->rank || rs->world_size != m->world_size))
		return ckptd_session_send_error(s, CKPTD_ERR_STATE, "this session is registered as another rank");
	char canon[CKPTD_PATH_MAX + 1] = "", why[300];
	int trust = m->root[0] ? ckptd__agent_root_trust(a, s, m->root, canon, sizeof(canon), why, sizeof(why)) : 0;
	if (trust == -EPERM) {
		CKPTD_WARN(a->log, ckptd_session_peer(s), m->job, "rank %u: its root is not recorded: %s", m->rank, why);
		canon[0] = '\0';
	} else if (trust < 0) {
		CKPTD_WARN(a->log, ckptd_session_peer(s), m->job, "rank %u refused: %s", m->rank, why);
		return ckptd_session_send_error(s, CKPTD_ERR_DENIED, why);
	}
	rs->registered = 1;
	snprintf(rs->job, sizeof(rs->job), "%s", m->job);
	/* DRAM segments only pass over the Unix socket: only ranks there need the job's pool. */
	if (!rs->pool_ref && ckptd_session_transport(s) == CKPTD_TRANSPORT_UNIX)
		rs->pool_ref = ckptd_jpools_ref(a->pools, m->job) == 0;
	rs->rank = m->rank;
	rs->world_size = m->world_size;
	rs->lineage = m->lineage;
	if (canon[0]) {
		int r = ckptd_aidx_root_add(a->idx, m->job, canon);
		if (r < 0)
			return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "agent index write failed");
	}
	CKPTD_DEBUG(a->log, ckptd_session_peer(s), rs->job, "rank %u/%u registered", rs->rank, rs->world_size);
	/* Its pid is the socket's (checked above); over TCP it names a process
	 * of another host, whose cgroup is not this node's to read. */
	if (ckptd_session_transport(s) == CKPTD_TRANSPORT_UNIX)
		ckptd__agent_health_rank(a, rs, m->pid, 0);
	if (rs->pool_ref)
		ckptd__prefetch_register(a, rs->job, rs->rank);
	ckptd__members_registered(a, rs, ckptd_session_transport(s) == CKPTD_TRANSPORT_UNIX ? m->pid : 0, m->beat_ms);
	ckptd_msg ok = { .type = CKPTD_MSG_OK };
	/* The rank's fabric endpoint binds to the host partners reach this
	 * node at: the network the peer tier runs on (docs/operations.md). */
	if (a->cfg->listen && strlen(a->cfg->listen) <= CKPTD_ADDR_MAX)
		snprintf(ok.u.ok.address, sizeof(ok.u.ok.address), "%s", a->cfg->listen);
	/* The rank's call waits this long plus its own timeout: never gives
	 * up while this agent may still answer (the config caps it). */
	ok.u.ok.wait_ms = (uint32_t)a->cfg->segment_wait_ms;
	/* The job's pool, when it is ready, goes with the answer: the rank maps
	 * it and builds its page tables while it starts up, so that its first
	 * save copies at the speed of the others (docs/protocol.md). */
	ckptd_pool *pool = rs->pool_ref ? ckptd_jpools_get(a->pools, rs->job, NULL) : NULL;
	int r = ckptd_session_send(s, &ok, pool ? ckptd_pool_fd(pool) : -1);
	/* A rank that joins (or comes back) saves at the steps the others do. */
	for (size_t i = 0; r == 0 && i < a->nadvice; i++)
		if (!strcmp(a->advice[i].job, rs->job)) {
			ckptd_msg m = { .type = CKPTD_MSG_INTERVAL_NOTICE, .u.interval_notice = a->advice[i] };
			r = ckptd_session_send(s, &m, -1);
		}
	return r;
}

static int on_segment(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_segment_request *m)
{
	ckptd_seg_info si;
	ckptd_msg g = { .type = CKPTD_MSG_SEGMENT_GRANT };
	int r, preparing;
	ckptd_pool *pool = ckptd_jpools_get(a->pools, m->job, &preparing);
	if (!pool && m->mode == CKPTD_SEG_WRITE && preparing) {
		/* The job's first save on this node: answered when its pool is ready. */
		if (rs->waiting)
			return ckptd_session_send_error(s, CKPTD_ERR_STATE, "a segment request is already waiting");
		rs->waiting = 1;
		rs->wreq = *m;
		rs->wait_until_ns = ckpt__now_ns() + a->cfg->segment_wait_ms * 1000000ull;
		return 0;
	}
	if (!pool && m->mode == CKPTD_SEG_WRITE)
		return refuse_grant(a, s, m->job, CKPTD_ERR_NO_SPACE, "no DRAM pool for this job on this node; write this shard to disk");
	if (!pool && m->mode == CKPTD_SEG_READ && ckptd__prefetch_hold(a, rs, m))
		return 0; /* its pool is being made for the shard being fetched here */
	if (!pool)
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "no DRAM copy of that shard on this node");
	if (m->mode == CKPTD_SEG_WRITE) {
		if (m->rank != rs->rank)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "a rank writes its own shard only");
		if (!m->bytes)
			return ckptd_session_send_error(s, CKPTD_ERR_MALFORMED, "WRITE needs BYTES");
		r = ckptd_pool_alloc(pool, m->job, m->version, m->rank, m->bytes, &si);
		if (r == -ENOSPC)
			return refuse_grant(a, s, m->job, CKPTD_ERR_NO_SPACE, "node DRAM pool full; write this shard to disk");
		if (r == -EEXIST)
			return ckptd_session_send_error(s, CKPTD_ERR_STATE, "this rank already has a segment in that version");
		if (r < 0)
			return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "segment allocation failed");
		if ((r = push_id(&rs->writing, &rs->nwriting, &rs->capwriting, si.id)) < 0) {
			ckptd_pool_seg_free(pool, si.id);
			return r;
		}
	} else if (m->mode == CKPTD_SEG_READ) {
		if (m->rank >= rs->world_size)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "rank outside this job's world");
		return ckptd__agent_grant_read(a, s, rs, m);
	} else {
		return ckptd_session_send_error(s, CKPTD_ERR_MALFORMED, "unknown MODE");
	}
	g.u.segment_grant.segment_id = si.id;
	g.u.segment_grant.offset = si.off;
	g.u.segment_grant.bytes = si.len;
	return ckptd_session_send(s, &g, ckptd_pool_fd(pool));
}

/* The newest committed segment this pool holds of (job, rank) (1.4: READ of
 * version ~0, a rank making its mapping ready before it restores). */
static int newest_held(ckptd_pool *pool, const char *job, uint32_t rank, ckptd_seg_info *out)
{
	size_t n = 0;
	ckptd_pool_list(pool, NULL, 0, &n);
	ckptd_seg_info *segs = n ? calloc(n, sizeof(*segs)) : NULL;
	int found = -ENOENT;
	size_t got = n;
	if (segs)
		ckptd_pool_list(pool, segs, n, &got);
	for (size_t i = 0; segs && i < n && i < got; i++)
		if (segs[i].rank == rank && segs[i].state == CKPTD_SEG_HELD && segs[i].ver_state == CKPTD_VER_COMMITTED &&
		    !strcmp(segs[i].job, job) && (found < 0 || segs[i].version > out->version)) {
			*out = segs[i];
			found = 0;
		}
	free(segs);
	return found;
}

int ckptd__agent_grant_read(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_segment_request *m)
{
	ckptd_pool *pool = ckptd_jpools_get(a->pools, m->job, NULL);
	ckptd_seg_info si;
	int r = !pool ? -ENOENT : m->version == UINT64_MAX ? newest_held(pool, m->job, m->rank, &si)
	                        : ckptd_pool_find(pool, m->job, m->version, m->rank, &si);
	if (r < 0 || si.state != CKPTD_SEG_HELD) {
		if (ckptd__prefetch_hold(a, rs, m))
			return 0; /* being fetched here: answered when that ends */
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "no DRAM copy of that shard on this node");
	}
	if (ckptd_pool_seg_pin(pool, si.id) < 0)
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "that shard is not readable now");
	r = push_id(&rs->pinned, &rs->npinned, &rs->cappinned, si.id);
	if (r < 0) {
		ckptd_pool_seg_unpin(pool, si.id);
		return r;
	}
	ckptd_msg g = { .type = CKPTD_MSG_SEGMENT_GRANT };
	g.u.segment_grant.segment_id = si.id;
	g.u.segment_grant.offset = si.off;
	g.u.segment_grant.bytes = si.len;
	return ckptd_session_send(s, &g, ckptd_pool_fd(pool));
}

int ckptd__agent_release(ckptd_agent *a, ckptd_session *s, rank_sess *rs, uint64_t id)
{
	if (!drop_id(rs->pinned, &rs->npinned, id))
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "this session holds no such read grant");
	ckptd_pool *pool = ckptd_jpools_get(a->pools, rs->job, NULL);
	if (pool)
		ckptd_pool_seg_unpin(pool, id);
	ckptd_msg ok = { .type = CKPTD_MSG_OK };
	return ckptd_session_send(s, &ok, -1);
}

/* SEG_WHERE and SEG_COPIES: the coordinator knows where a shard's copies are. */
static int where(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_segment_request *m)
{
	if (a->local) {
		ckptd_msg rep = { .type = CKPTD_MSG_PARTNERS };
		int r = ckptd_coordinator_where(a->local, m, &rep.u.partners);
		r = r == 0 ? ckptd_session_send(s, &rep, -1)
		           : ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "lookup failed");
		free(rep.u.partners.entries);
		return r;
	}
	ckptd_msg fw = { .type = CKPTD_MSG_SEGMENT_REQUEST, .u.segment_request = *m };
	if (m->mode == CKPTD_SEG_COPIES && a->link && CKPTD_VERSION_MINOR_OF(ckptd_client_version(a->link)) < 3)
		return ckptd_session_send_error(s, CKPTD_ERR_UNSUPPORTED, "the coordinator predates SEG_COPIES (1.3)");
	if (ckptd__agent_link_send(a, &fw, FWD_LIST, rs->serial) < 0)
		return ckptd_session_send_error(s, CKPTD_ERR_BUSY, "coordinator unreachable; try again");
	return 0;
}

int ckptd__agent_done_push(ckptd_agent *a, rank_sess *rs, const ckptd_shard_done *d)
{
	if (a->ndone == a->capdone) {
		size_t nc = a->capdone ? a->capdone * 2 : 64;
		void *p = realloc(a->done, nc * sizeof(*a->done));
		if (!p)
			return -ENOMEM;
		a->done = p;
		a->capdone = nc;
	}
	done_item *e = &a->done[a->ndone++];
	e->rs = rs;
	e->d = *d;
	return 0;
}

static int on_shard_done(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_shard_done *m)
{
	if (m->rank != rs->rank)
		return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "a rank reports its own shard only");
	if (m->tier != CKPT_TIER_LOCAL_MEM && m->tier != CKPT_TIER_LOCAL_DISK)
		return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "a rank reports its node's tiers; partners report PEER_MEM");
	if (m->tier == CKPT_TIER_LOCAL_MEM) {
		ckptd_seg_info si;
		ckptd_pool *pool = ckptd_jpools_get(a->pools, m->job, NULL);
		if (!pool || ckptd_pool_find(pool, m->job, m->version, m->rank, &si) < 0)
			return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "no DRAM segment of that shard here");
		if (si.state == CKPTD_SEG_WRITING) {
			if (!drop_id(rs->writing, &rs->nwriting, si.id))
				return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "that segment was granted to another session");
			ckptd_pool_seg_done(pool, si.id);
		}
	}
	ckptd_shard_done d = *m;
	if (!d.world_size)
		d.world_size = rs->world_size;
	if (!d.lineage)
		d.lineage = rs->lineage;
	return ckptd__agent_done_push(a, rs, &d);
}

int ckptd_agent_handle(ckptd_agent *a, ckptd_session *s, const ckptd_msg *m)
{
	if (ckptd_session_role(s) == CKPTD_ROLE_CLI)
		return ckptd__agent_cli(a, s, m);
	if (ckptd_session_role(s) != CKPTD_ROLE_RANK)
		return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "only ranks speak to the agent this way");
	rank_sess *rs = ckptd__agent_rank_of(a, s);
	if (!rs)
		return -ENOMEM;
	rs->heard_ns = ckpt__now_ns();
	if (rs->silent) {
		rs->silent = 0;
		CKPTD_INFO(a->log, ckptd_session_peer(s), rs->job, "rank %u heard again", rs->rank);
	}
	ckptd__members_heard(a, rs);
	if (m->type == CKPTD_MSG_HEARTBEAT) {
		ckptd_msg ok = { .type = CKPTD_MSG_OK };
		return ckptd_session_send(s, &ok, -1);
	}
	if (m->type == CKPTD_MSG_RANK_LEAVE) {
		ckptd__members_leave(a, rs);
		ckptd_msg ok = { .type = CKPTD_MSG_OK };
		return ckptd_session_send(s, &ok, -1);
	}
	if (m->type == CKPTD_MSG_REGISTER_RANK)
		return on_register(a, s, rs, &m->u.register_rank);
	/* Ranks of other nodes, for their partner copies: no registration. */
	if (m->type == CKPTD_MSG_PEER_LEASE || m->type == CKPTD_MSG_PEER_COMMIT ||
	    (m->type == CKPTD_MSG_SEGMENT_REQUEST && m->u.segment_request.mode == CKPTD_SEG_PEER_READ) ||
	    (m->type == CKPTD_MSG_SEGMENT_RELEASE && ckptd__peer_is_slot(m->u.segment_release.segment_id)))
		return ckptd__peer_handle(a, s, rs, m);
	if ((m->type == CKPTD_MSG_SEGMENT_REQUEST && (m->u.segment_request.mode == CKPTD_SEG_EC_READ ||
	                                              m->u.segment_request.mode == CKPTD_SEG_EC_PARITY)) ||
	    (m->type == CKPTD_MSG_SEGMENT_RELEASE && ckptd__ec_is_pin(m->u.segment_release.segment_id)))
		return ckptd__ec_handle(a, s, rs, m);
	if (m->type == CKPTD_MSG_SEGMENT_REQUEST && m->u.segment_request.mode == CKPTD_SEG_PARTNERS)
		return ckptd__peer_send_partners(a, s);
	if (!rs->registered)
		return ckptd_session_send_error(s, CKPTD_ERR_STATE, "REGISTER_RANK first");
	/* The job each request names is the session's (server.c checked it). */
	switch (m->type) {
	case CKPTD_MSG_SEGMENT_REQUEST:
		if (m->u.segment_request.mode == CKPTD_SEG_LOCATE)
			return ckptd__agent_locate(a, s, &m->u.segment_request);
		if (m->u.segment_request.mode == CKPTD_SEG_WHERE || m->u.segment_request.mode == CKPTD_SEG_COPIES)
			return where(a, s, rs, &m->u.segment_request);
		/* A segment is a file descriptor: only a Unix socket carries one. */
		if (ckptd_session_transport(s) != CKPTD_TRANSPORT_UNIX)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED,
			                                "DRAM segments are handed over the agent's Unix socket only");
		return on_segment(a, s, rs, &m->u.segment_request);
	case CKPTD_MSG_SHARD_DONE:
		return on_shard_done(a, s, rs, &m->u.shard_done);
	case CKPTD_MSG_PREEMPT:
		return ckptd__agent_preempt(a, s, &m->u.preempt, 0);
	case CKPTD_MSG_SEGMENT_RELEASE:
		return ckptd__agent_release(a, s, rs, m->u.segment_release.segment_id);
	case CKPTD_MSG_STEP_REPORT: {
		if (m->u.step_report.rank != rs->rank)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "a rank reports its own steps only");
		/* On to the coordinator with this node's name; lost when the link
		 * is down (the next report, a second later, says the same). */
		ckptd_msg fw = *m;
		snprintf(fw.u.step_report.node, sizeof(fw.u.step_report.node), "%s", a->node);
		ckptd__agent_health_step(a, &m->u.step_report);
		ckptd__agent_link_send(a, &fw, FWD_IGNORE, 0);
		ckptd_msg ok = { .type = CKPTD_MSG_OK };
		return ckptd_session_send(s, &ok, -1);
	}
	case CKPTD_MSG_LIST_VERSIONS: {
		if (a->local) {
			ckptd_msg rep = { .type = CKPTD_MSG_VERSIONS };
			int r = ckptd_coordinator_list(a->local, &m->u.list_versions, &rep.u.versions);
			r = r == 0 ? ckptd_session_send(s, &rep, -1)
			           : ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "listing failed");
			free(rep.u.versions.entries);
			return r;
		}
		if (ckptd__agent_link_send(a, m, FWD_LIST, rs->serial) < 0)
			return ckptd_session_send_error(s, CKPTD_ERR_BUSY, "coordinator unreachable; try again");
		return 0;
	}
	default:
		return ckptd_session_send_error(s, CKPTD_ERR_UNSUPPORTED, "not handled by the agent");
	}
}

void ckptd_agent_pool_stats(ckptd_agent *a, uint64_t *bytes, uint64_t *used)
{
	*bytes = a->cfg->pool_size;
	ckptd_jpools_used(a->pools, used);
}

/* A job's pool is ready, or could not be made: answer the requests that waited. */
static void on_pool_ready(void *arg, const char *job, int err)
{
	ckptd_agent *a = arg;
	ckptd__prefetch_pool_ready(a);
	for (rank_sess *rs = a->ranks; rs; rs = rs->next) {
		if (!rs->waiting || strcmp(rs->job, job))
			continue;
		rs->waiting = 0;
		if (err < 0) {
			refuse_grant(a, rs->s, rs->job, CKPTD_ERR_NO_SPACE, "no DRAM pool for this job on this node; write this shard to disk");
			continue;
		}
		ckptd_segment_request m = rs->wreq;
		if (on_segment(a, rs->s, rs, &m) < 0)
			ckptd_session_send_error(rs->s, CKPTD_ERR_INTERNAL, "segment allocation failed");
	}
}

static void pool_gauge(void *arg, const char *job, const ckptd_pool_stats *st)
{
	ckptd_agent *a = arg;
	ckptd_metrics_set(a->mx, CKPTD_M_JOB_POOL_BYTES, job, NULL, (double)st->bytes);
	ckptd_metrics_set(a->mx, CKPTD_M_JOB_POOL_USED, job, NULL, (double)st->used);
}

/* The pool gauges, from the loop's thread (the HTTP thread reads the registry only). */
static void metrics_tick(ckptd_server *srv, void *arg)
{
	(void)srv;
	ckptd_agent *a = arg;
	uint64_t bytes, used;
	ckptd_agent_pool_stats(a, &bytes, &used);
	ckptd_metrics_set(a->mx, CKPTD_M_POOL_BYTES, NULL, NULL, (double)bytes);
	ckptd_metrics_set(a->mx, CKPTD_M_POOL_USED, NULL, NULL, (double)used);
	ckptd_metrics_zero(a->mx, CKPTD_M_JOB_POOL_BYTES);
	ckptd_metrics_zero(a->mx, CKPTD_M_JOB_POOL_USED);
	ckptd_jpools_each(a->pools, pool_gauge, a);
	ckptd__peer_stats(a, &bytes, &used);
	ckptd_metrics_set(a->mx, CKPTD_M_PEER_POOL_BYTES, NULL, NULL, (double)bytes);
	ckptd_metrics_set(a->mx, CKPTD_M_PEER_POOL_USED, NULL, NULL, (double)used);
	ckptd__peer_gauges(a);
	ckptd_metrics_set(a->mx, CKPTD_M_COORD_LINK, NULL, NULL, a->local || a->link ? 1 : 0);
	/* A registered rank silent past the heartbeat timeout (stopped, hung):
	 * said once; its session stays, the Unix socket would say if it died. */
	uint64_t now = ckpt__now_ns(), hb = a->cfg->heartbeat_timeout_ms * 1000000ull;
	for (rank_sess *rs = a->ranks; hb && rs; rs = rs->next)
		if (rs->registered && !rs->silent && rs->heard_ns && now - rs->heard_ns > hb) {
			rs->silent = 1;
			CKPTD_WARN(a->log, ckptd_session_peer(rs->s), rs->job, "rank %u silent for %.1f s (heartbeat timeout)",
			           rs->rank, (double)(now - rs->heard_ns) / 1e9);
		}
}

/* Requests that waited too long for their job's pool: disk only this time. */
static void wait_tick(ckptd_server *srv, void *arg)
{
	(void)srv;
	ckptd_agent *a = arg;
	uint64_t now = ckpt__now_ns();
	ckptd__members_tick(a, now);
	ckptd__prefetch_tick(a, now);
	for (rank_sess *rs = a->ranks; rs; rs = rs->next)
		if (rs->waiting && now >= rs->wait_until_ns) {
			rs->waiting = 0;
			refuse_grant(a, rs->s, rs->job, CKPTD_ERR_BUSY,
			             "this job's DRAM pool is still being prepared; write this shard to disk");
		}
}

int ckptd_agent_new(ckptd_server *srv, const ckptd_config *cfg, const ckptd_secret *cluster,
                    const ckptd_log *log, ckptd_coordinator *local, ckptd_agent **out, char *err,
                    size_t errcap)
{
	char dir[4200];
	size_t dropped = 0;
	int r;
	*out = NULL;
	ckptd_agent *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->srv = srv;
	a->cfg = cfg;
	if ((r = ckptd__agent_roots_check_config(cfg, err, errcap)) < 0)
		goto fail;
	a->cluster = cluster;
	a->log = log;
	a->local = local;
	a->node = ckptd_server_node(srv);
	a->mx = ckptd_server_metrics(srv);
	if (cfg->listen)
		snprintf(a->address, sizeof(a->address), "%s", cfg->listen);
	else
		snprintf(a->address, sizeof(a->address), "unix:%s", cfg->socket);
	snprintf(dir, sizeof(dir), "%s/agent", cfg->root);
	if ((r = ckptd_aidx_open(dir, &a->idx, &dropped)) < 0) {
		snprintf(err, errcap, "--root: cannot open the agent index in %s: %s", dir, strerror(-r));
		goto fail;
	}
	if (dropped)
		CKPTD_INFO(log, NULL, NULL, "agent index: %zu DRAM records dropped (DRAM does not survive a restart)", dropped);
	ckpt__logger_init(&a->lg, "", -1);
	/* Fault points are for tests, not a setting of the daemon (listed in
	 * --help all the same). */
	if ((r = ckpt__faults_parse(&a->faults, getenv("CKPT_FAULT"))) < 0) {
		snprintf(err, errcap, "CKPT_FAULT: cannot parse the fault points");
		goto fail;
	}
	if ((r = ckptd_jpools_new(srv, cfg, log, &a->faults, on_evict, a, on_pool_ready, a, &a->pools)) < 0 ||
	    (r = ckptd_server_every(srv, LINK_TICK_MS, wait_tick, a)) < 0 ||
	    (r = ckptd_server_every(srv, METRICS_TICK_MS, metrics_tick, a)) < 0) {
		snprintf(err, errcap, "cannot set up the DRAM pools: %s", strerror(-r));
		goto fail;
	}
	if ((r = ckptd__peer_open(a, err, errcap)) < 0 || (r = ckptd__agent_notices_start(a, err, errcap)) < 0)
		goto fail;
	if ((r = ckptd__agent_health_start(a, err, errcap)) < 0)
		goto fail;
	if ((r = ckptd__members_start(a)) < 0) {
		snprintf(err, errcap, "cannot set up --on-failure: %s", strerror(-r));
		goto fail;
	}
	if ((r = ckptd__prefetch_start(a)) < 0) {
		snprintf(err, errcap, "cannot set up prefetching: %s", strerror(-r));
		goto fail;
	}
	if ((r = ckptd__ec_start(a)) < 0) {
		snprintf(err, errcap, "cannot set up the rs encode: %s", strerror(-r));
		goto fail;
	}
	/* Before anyone hears of this node: what a crash left half deleted. */
	ckptd__agent_finish_deletes(a);
	if ((r = ckptd__shared_open(a, err, errcap)) < 0)
		goto fail;
	if ((r = ckptd_server_after_events(srv, after_events, a)) < 0) {
		snprintf(err, errcap, "cannot install the agent's hooks: %s", strerror(-r));
		goto fail;
	}
	if (local) {
		if ((r = ckptd_coordinator_local_attach(local, a->node, local_from_coord, a)) < 0)
			goto fail;
		send_hello(a);
	} else if ((r = ckptd_server_every(srv, LINK_TICK_MS, link_tick, a)) < 0) {
		snprintf(err, errcap, "cannot install the agent's timers: %s", strerror(-r));
		goto fail;
	}
	a->backoff_ms = BACKOFF_MIN_MS;
	a->rng = ckpt__now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	*out = a;
	return 0;
fail:
	ckptd_agent_free(a);
	return r;
}

void ckptd_agent_free(ckptd_agent *a)
{
	if (!a)
		return;
	/* Sessions are gone (the server is freed first); their records too. */
	ckptd__agent_notices_stop(a);
	ckptd__prefetch_stop(a);
	ckptd__ec_stop(a);
	ckptd__agent_health_stop(a);
	ckptd__members_stop(a);
	ckptd_client_close(a->link);
	/* Verifications still reading pinned segments end before the pools go. */
	ckptd__agent_verify_join(a);
	ckptd__shared_close(a);
	ckptd__peer_close(a);
	free(a->partners.entries);
	ckptd_jpools_free(a->pools);
	free(a->advice);
	ckptd_aidx_close(a->idx);
	free(a->fifo);
	free(a->done);
	free(a);
}
