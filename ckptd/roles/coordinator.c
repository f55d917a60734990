/* The coordinator role: the global commit (ckptd/coord) behind the server
 * core. SHARD_DONEs are queued by the handler and committed together after
 * each batch of events, in one transaction: a loop turn drains every report
 * waiting on every agent's connection, which is what keeps a 16,384-rank
 * commit to a handful of fsyncs. */
#include "coordinator_int.h"

#include "base/common.h" /* ckpt__wall_ns: the commit engine's clock */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define LIST_PAGE 1024
#define LIVENESS_MS 200

static int job_add(char (**jobs)[CKPTD_JOB_MAX + 1], size_t *n, size_t *cap, const char *job)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*jobs)[i], job))
			return 0;
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		void *p = realloc(*jobs, nc * sizeof(**jobs));
		if (!p)
			return -ENOMEM;
		*jobs = p;
		*cap = nc;
	}
	snprintf((*jobs)[(*n)++], CKPTD_JOB_MAX + 1, "%s", job);
	return 1;
}

static int peer_has_job(const peer *p, const char *job)
{
	for (size_t i = 0; i < p->njobs; i++)
		if (!strcmp(p->jobs[i], job))
			return 1;
	return 0;
}

static int note_job(ckptd_coordinator *c, peer *p, const char *job)
{
	int r = job_add(&p->jobs, &p->njobs, &p->capjobs, job);
	if (r >= 0)
		r = job_add(&c->jobs, &c->njobs, &c->capjobs, job);
	return r < 0 ? r : 0;
}

int ckptd__coord_note_job(ckptd_coordinator *c, peer *p, const char *job)
{
	return note_job(c, p, job);
}

peer *ckptd__coord_peer_find(ckptd_coordinator *c, const char *node)
{
	for (peer *p = c->peers; p; p = p->next)
		if (!strcmp(p->node, node))
			return p;
	return NULL;
}

uint32_t ckptd__coord_peer_state(const peer *p)
{
	return !p || !p->up ? CKPTD_AGENT_DOWN : p->degraded ? CKPTD_AGENT_DEGRADED : CKPTD_AGENT_UP;
}

/* A frame from the agent: it is not silent. */
static void heard(ckptd_coordinator *c, peer *p)
{
	uint64_t now = ckpt__now_ns();
	if (p->degraded) {
		p->degraded = 0;
		CKPTD_INFO(c->log, p->node, NULL, "agent %s heard again after %.1f s of silence: up", p->node,
		           (double)(now - p->heard_ns) / 1e9);
		ckptd__coord_place_partners(c);
	}
	p->heard_ns = now;
}

peer *ckptd__coord_peer_get(ckptd_coordinator *c, const char *node)
{
	peer *p = ckptd__coord_peer_find(c, node);
	if (p)
		return p;
	if (!(p = calloc(1, sizeof(*p))))
		return NULL;
	snprintf(p->node, sizeof(p->node), "%s", node);
	p->next = c->peers;
	c->peers = p;
	return p;
}

void ckptd__coord_peer_send(ckptd_coordinator *c, peer *p, const ckptd_msg *m)
{
	if (p->local) {
		p->local(p->local_arg, m);
		return;
	}
	if (!p->s)
		return; /* it learns on reconnect: the inventory answer re-announces */
	int r = ckptd_session_send(p->s, m, -1);
	if (r < 0 && r != -EPIPE)
		CKPTD_WARN(c->log, ckptd_session_peer(p->s), m->u.commit_notice.job, "cannot queue %s to agent %s: %s",
		           ckptd_msg_name(m->type), p->node, strerror(-r));
}

/* COMMIT_NOTICE for each tier in `tiers` to every agent that holds the job
 * (only = NULL), or to one agent. */
static void notify(ckptd_coordinator *c, peer *only, const char *job, uint64_t version, uint32_t tiers)
{
	for (uint32_t t = 1; t <= CKPT_TIER_SHARED; t <<= 1) {
		if (!(tiers & t))
			continue;
		ckptd_msg m = { .type = CKPTD_MSG_COMMIT_NOTICE };
		snprintf(m.u.commit_notice.job, sizeof(m.u.commit_notice.job), "%s", job);
		m.u.commit_notice.version = version;
		m.u.commit_notice.tier = t;
		if (only) {
			ckptd__coord_peer_send(c, only, &m);
			continue;
		}
		for (peer *p = c->peers; p; p = p->next)
			if (peer_has_job(p, job))
				ckptd__coord_peer_send(c, p, &m);
	}
}

/* Counts commits at each tier in mask. */
static void count_commits(ckptd_coordinator *c, const char *job, uint32_t mask)
{
	for (uint32_t t = 1; t <= CKPT_TIER_SHARED; t <<= 1)
		if (mask & t)
			ckptd_metrics_add(c->mx, CKPTD_M_VERSIONS_COMMITTED, job, ckptd_metrics_tier(t), 1);
}

static int created_cb(void *arg, const ckptd_coord_version *v)
{
	uint64_t *out = arg;
	out[0] = v->created_ns;
	out[1] = v->bytes;
	return 1;
}

/* Commit latency: the version's record was created by its first report
 * (wall clock, like the commit engine's). */
static void observe_commit(ckptd_coordinator *c, const char *job, uint64_t version, uint32_t mask)
{
	uint64_t cv[2] = { 0, 0 }, now = ckpt__wall_ns();
	int known = ckptd_coord_list(c->db, job, version, created_cb, cv) >= 0 && cv[0] && cv[0] <= now;
	uint64_t created = cv[0];
	for (uint32_t t = 1; t <= CKPT_TIER_SHARED; t <<= 1) {
		if (!(mask & t))
			continue;
		if (known)
			ckptd_metrics_observe(c->mx, CKPTD_M_COMMIT_LATENCY, job, ckptd_metrics_tier(t),
			                      (double)(now - created) / 1e9);
		ckptd_emerg_commit(c->emerg, job, version, t, known ? now - created : 0, cv[1]);
	}
	ckptd__coord_recovery_commit(c, job, version, mask);
}

void ckptd__coord_announce(ckptd_coordinator *c, const char *job, uint64_t version, uint32_t tiers)
{
	count_commits(c, job, tiers);
	observe_commit(c, job, version, tiers);
	CKPTD_INFO(c->log, NULL, job, "version %llu committed at tiers 0x%x", (unsigned long long)version, tiers);
	notify(c, NULL, job, version, tiers);
}

static void on_change(void *arg, const ckptd_coord_change *ch)
{
	ckptd_coordinator *c = arg;
	uint32_t gained = ch->committed_after & ~ch->committed_before;
	uint32_t lost = ch->committed_before & ~ch->committed_after;
	if (gained) {
		count_commits(c, ch->job, gained);
		CKPTD_INFO(c->log, NULL, ch->job, "version %llu committed at tiers 0x%x (recovery)",
		           (unsigned long long)ch->version, gained);
		notify(c, NULL, ch->job, ch->version, gained);
	}
	/* The protocol has no "no longer committed" notice: the log and
	 * LIST_VERSIONS carry it. */
	if (lost || (ch->restorable_before && !ch->restorable_after))
		CKPTD_WARN(c->log, NULL, ch->job, "version %llu no longer committed at tiers 0x%x%s",
		           (unsigned long long)ch->version, lost,
		           ch->restorable_before && !ch->restorable_after ? "; no longer restorable" : "");
}

/* Commits every SHARD_DONE queued this loop turn in one transaction, then
 * answers each report and announces what committed. Announcing a commit
 * reaches the emergency checks, which flush before they look: that nested
 * call must not apply and answer the same queue a second time (an agent
 * would get two OKs for one report). */
void ckptd__coord_flush_batch(ckptd_coordinator *c)
{
	if (!c->nq || c->flushing)
		return;
	c->flushing = 1;
	if (c->capbatch < c->nq) {
		void *b = realloc(c->batch, c->nq * sizeof(*c->batch));
		if (b)
			c->batch = b;
		void *r = realloc(c->res, c->nq * sizeof(*c->res));
		if (r)
			c->res = r;
		if (!b || !r)
			goto oom;
		c->capbatch = c->nq;
	}
	for (size_t i = 0; i < c->nq; i++) {
		c->batch[i] = c->q[i].sh;
		c->batch[i].job = c->q[i].job;
		c->batch[i].node = c->q[i].p->node;
	}
	uint64_t t0 = ckpt__now_ns();
	int r = ckptd_coord_shard_done_batch(c->db, c->batch, c->nq, c->res);
	CKPTD_DEBUG(c->log, NULL, NULL, "batch of %zu SHARD_DONE in %.3f ms: %d", c->nq,
	            (double)(ckpt__now_ns() - t0) / 1e6, r);
	for (size_t i = 0; i < c->nq; i++) {
		pending *e = &c->q[i];
		int st = r < 0 ? r : c->res[i].status;
		if (e->s) {
			ckptd_msg m = { .type = CKPTD_MSG_OK };
			if (st == 0) {
				m.u.ok.version = e->sh.version;
				ckptd_session_send(e->s, &m, -1);
			} else {
				char t[160];
				snprintf(t, sizeof(t), "SHARD_DONE version %llu rank %u refused: %s",
				         (unsigned long long)e->sh.version, e->sh.rank, ckpt_strerror(st));
				ckptd_session_send_error(e->s, r < 0 ? CKPTD_ERR_INTERNAL : CKPTD_ERR_STATE, t);
			}
		}
		if (st < 0)
			ckptd_metrics_add(c->mx, CKPTD_M_COORD_REFUSED, e->job, ckptd_metrics_tier(e->sh.tier), 1);
		else if (r == 0 && c->res[i].committed) {
			count_commits(c, e->job, c->res[i].committed);
			observe_commit(c, e->job, e->sh.version, c->res[i].committed);
		}
		if (st < 0)
			CKPTD_WARN(c->log, e->s ? ckptd_session_peer(e->s) : e->p->node, e->job,
			           "SHARD_DONE version %llu rank %u tier %u refused: %s",
			           (unsigned long long)e->sh.version, e->sh.rank, e->sh.tier, ckpt_strerror(st));
		else if (r == 0 && c->res[i].committed) {
			CKPTD_INFO(c->log, NULL, e->job, "version %llu committed at tiers 0x%x (%u ranks)",
			           (unsigned long long)e->sh.version, c->res[i].committed, e->sh.world_size);
			notify(c, NULL, e->job, e->sh.version, c->res[i].committed);
			if (c->res[i].committed & CKPT_TIER_LOCAL_MEM)
				ckptd__coord_ec_encode(c, e->job, e->sh.version); /* rs groups make their parity */
		}
	}
	c->nq = 0;
	c->flushing = 0;
	return;
oom:
	CKPTD_ERROR(c->log, NULL, NULL, "out of memory committing %zu reports; agents will resend inventories", c->nq);
	c->nq = 0;
	c->flushing = 0;
}

static void after_events(ckptd_server *srv, void *arg)
{
	(void)srv;
	ckptd__coord_flush_batch(arg);
}

static int enqueue(ckptd_coordinator *c, ckptd_session *s, peer *p, const ckptd_shard_done *d)
{
	if (c->nq == c->capq) {
		size_t nc = c->capq ? c->capq * 2 : 256;
		void *q = realloc(c->q, nc * sizeof(*c->q));
		if (!q)
			return -ENOMEM;
		c->q = q;
		c->capq = nc;
	}
	int r = note_job(c, p, d->job);
	if (r < 0)
		return r;
	ckptd_metrics_add(c->mx, CKPTD_M_COORD_REPORTS, d->job, ckptd_metrics_tier(d->tier), 1);
	ckptd__coord_ec_note(c, d); /* whether the job asks for PEER_MEM (rs encode) */
	pending *e = &c->q[c->nq++];
	e->s = s;
	e->p = p;
	snprintf(e->job, sizeof(e->job), "%s", d->job);
	e->sh = (ckptd_coord_shard){ .version = d->version, .rank = d->rank, .world_size = d->world_size,
	                             .tier = d->tier, .bytes = d->bytes, .checksum = d->checksum,
	                             .lineage = d->lineage };
	return 0;
}

static void hello(ckptd_coordinator *c, peer *p, const ckptd_agent_hello *h)
{
	snprintf(p->address, sizeof(p->address), "%s", h->address);
	snprintf(p->domain, sizeof(p->domain), "%s", h->domain);
	snprintf(p->host, sizeof(p->host), "%s", h->host);
	snprintf(p->sw, sizeof(p->sw), "%s", h->sw);
	snprintf(p->power, sizeof(p->power), "%s", h->power);
	p->pool_bytes = h->pool_bytes;
	p->peer_bytes = h->peer_bytes;
	p->beat_ms = h->beat_ms;
	/* A spare that took a node says it no longer is; one lost and back
	 * before it took any is free again. */
	p->spare = h->spare && !p->took[0];
	p->up = 1;
	p->degraded = 0;
	p->heard_ns = ckpt__now_ns();
	ckptd_emerg_node_back(c->emerg, p->node);
	p->lost_at_ns = 0;
	int r = ckptd_coord_agent_hello(c->db, p->node, h->address, h->domain, ckpt__now_ns());
	if (r < 0)
		CKPTD_WARN(c->log, p->node, NULL, "recording agent failed: %s", ckpt_strerror(r));
	CKPTD_INFO(c->log, p->node, NULL, "agent %s up at %s%s%s%s", p->node, h->address, h->domain[0] ? " domain " : "",
	           h->domain, p->spare ? ": a spare, free to take a lost node's ranks" : "");
	ckptd__coord_place_partners(c);
}

/* After an agent's last inventory batch: announce again what is committed
 * among its jobs (it may have missed notices while disconnected; agents
 * pass on only what is new to them). */
static int reannounce_cb(void *arg, const ckptd_coord_version *v)
{
	void **a = arg;
	if (v->committed)
		notify(a[0], a[1], a[2], v->version, v->committed);
	return 0;
}

static int inventory(ckptd_coordinator *c, peer *p, const ckptd_agent_inventory *inv)
{
	for (uint32_t i = 0; i < inv->count; i++)
		if (note_job(c, p, inv->entries[i].job) < 0)
			return -ENOMEM;
	int r = ckptd_coord_inventory(c->db, p->node, inv->entries, inv->count, inv->final, on_change, c);
	if (r < 0)
		return r;
	if (r > 0)
		CKPTD_WARN(c->log, p->node, NULL, "inventory: %d entries skipped (other lineage or unknown world size)", r);
	if (inv->final) {
		CKPTD_INFO(c->log, p->node, NULL, "inventory of %s complete (%u jobs)", p->node, (unsigned)p->njobs);
		for (size_t j = 0; j < p->njobs; j++) {
			void *a[3] = { c, p, p->jobs[j] };
			ckptd_coord_list(c->db, p->jobs[j], 0, reannounce_cb, a);
		}
	}
	return 0;
}

static void agent_sess_free(void *arg)
{
	agent_sess *as = arg;
	if (as->p && as->p->s == as->s) {
		as->p->s = NULL;
		as->p->up = 0;
		as->p->lost_at_ns = ckpt__now_ns() + as->c->cfg->agent_grace_ms * 1000000ull;
		CKPTD_WARN(as->c->log, as->p->node, NULL, "agent %s disconnected; lost in %llu ms unless it returns",
		           as->p->node, (unsigned long long)as->c->cfg->agent_grace_ms);
		ckptd__coord_node_lost(as->c, as->p, ckpt__now_ns() - as->p->heard_ns, "its agent's connection closed");
		ckptd__coord_place_partners(as->c);
	}
	free(as);
}

/* Agents not heard from within --heartbeat-timeout are degraded: still
 * connected (TCP keeps an idle connection through a partition), but left
 * out of partner placement and of restores' partner lists until heard
 * again. Silent past --agent-grace, the connection is dropped and the agent
 * lost, as a disconnected one would be. */
static void silence(ckptd_coordinator *c, uint64_t t)
{
	uint64_t hb = c->cfg->heartbeat_timeout_ms * 1000000ull, grace = c->cfg->agent_grace_ms * 1000000ull;
	uint64_t last = c->silence_tick_ns;
	c->silence_tick_ns = t;
	/* This pass comes late: the coordinator itself stalled (an overloaded
	 * host), and the agents' frames wait unread in its sockets. Their
	 * silence is ours; judge at the next pass, once they are read. */
	if (!hb || (last && t - last > hb / 2))
		return;
	for (peer *p = c->peers; p; p = p->next) {
		if (!p->up || !p->s || p->local || t - p->heard_ns <= hb ||
		    CKPTD_VERSION_MINOR_OF(ckptd_session_version(p->s)) < 3) /* older agents send no heartbeats */
			continue;
		if (!p->degraded) {
			p->degraded = 1;
			CKPTD_WARN(c->log, p->node, NULL, "agent %s silent for %.1f s (heartbeat timeout %llu ms): degraded; "
			           "not a partner until heard again, lost in %llu ms unless it is", p->node,
			           (double)(t - p->heard_ns) / 1e9, (unsigned long long)c->cfg->heartbeat_timeout_ms,
			           (unsigned long long)c->cfg->agent_grace_ms);
			ckptd__coord_place_partners(c);
		} else if (t - p->heard_ns > grace) {
			ckptd_session *s = p->s;
			p->s = NULL; /* its close must not restart the grace */
			p->up = 0;
			p->degraded = 0;
			p->lost_at_ns = t;
			ckptd_session_drop(s, "agent silent past --agent-grace");
			ckptd__coord_place_partners(c);
		}
	}
}

/* What the metrics and STATUS say of agents and tiers. */
static void count_states(ckptd_coordinator *c, uint32_t *up, uint32_t *degraded, uint32_t *down, uint32_t *peer_bad)
{
	*up = *degraded = *down = *peer_bad = 0;
	for (peer *p = c->peers; p; p = p->next) {
		uint32_t st = ckptd__coord_peer_state(p);
		st == CKPTD_AGENT_UP ? (*up)++ : st == CKPTD_AGENT_DEGRADED ? (*degraded)++ : (*down)++;
		if (st != CKPTD_AGENT_UP && p->peer_bytes)
			(*peer_bad)++;
	}
}

static void liveness(ckptd_server *srv, void *arg)
{
	(void)srv;
	ckptd_coordinator *c = arg;
	uint64_t t = ckpt__now_ns();
	uint32_t up, degraded, down, peer_bad;
	silence(c, t);
	ckptd__coord_members_tick(c, t);
	count_states(c, &up, &degraded, &down, &peer_bad);
	ckptd_metrics_set(c->mx, CKPTD_M_AGENTS, "up", NULL, up);
	ckptd_metrics_set(c->mx, CKPTD_M_AGENTS, "degraded", NULL, degraded);
	ckptd_metrics_set(c->mx, CKPTD_M_AGENTS, "down", NULL, down);
	ckptd_metrics_set(c->mx, CKPTD_M_SPARES, NULL, NULL, ckptd__coord_spares_free(c));
	for (uint32_t tier = CKPT_TIER_LOCAL_MEM; tier <= CKPT_TIER_SHARED; tier <<= 1)
		ckptd_metrics_set(c->mx, CKPTD_M_TIER_DEGRADED, ckptd_metrics_tier(tier), NULL,
		                  tier == CKPT_TIER_PEER_MEM ? peer_bad : degraded + down);
	for (peer *p = c->peers; p; p = p->next) {
		if (p->up || !p->lost_at_ns || p->lost_at_ns > t)
			continue;
		p->lost_at_ns = 0;
		ckptd__coord_flush_batch(c);
		int r = ckptd_coord_agent_lost(c->db, p->node, on_change, c);
		CKPTD_WARN(c->log, p->node, NULL, "agent %s lost after the grace period: %d copies dropped", p->node, r);
		ckptd__coord_groups_update(c); /* a free node may take its place in its rs group */
	}
}

static int by_version_node(const void *x, const void *y)
{
	const ckptd_coord_delete *a = x, *b = y;
	if (a->version != b->version)
		return a->version < b->version ? -1 : 1;
	return strcmp(a->node, b->node);
}

/* Hands copies marked DELETING to the agents that hold them: one
 * DELETE_VERSION per (version, node), naming the tiers. The marks stay until
 * the agent answers COPIES_GONE, so a copy on an agent that is away is asked
 * for again at the next pass, and after a restart of either side. DRAM on a
 * node that is gone went with it: those are forgotten at once (if the agent
 * was only cut off, its next inventory lists them and they are marked again). */
static void dispatch_deletes(ckptd_coordinator *c, const char *job, ckptd_coord_delete *d, size_t n)
{
	ckptd_metrics_add(c->mx, CKPTD_M_COPIES_DELETING, job, NULL, (double)n);
	qsort(d, n, sizeof(*d), by_version_node);
	for (size_t i = 0, j; i < n; i = j) {
		uint32_t tiers = 0;
		for (j = i; j < n && d[j].version == d[i].version && !strcmp(d[j].node, d[i].node); j++)
			tiers |= d[j].tier;
		peer *p = ckptd__coord_peer_find(c, d[i].node);
		if (p && (p->local || (p->up && p->s))) {
			ckptd_msg m = { .type = CKPTD_MSG_DELETE_VERSION };
			snprintf(m.u.delete_version.job, sizeof(m.u.delete_version.job), "%s", job);
			m.u.delete_version.version = d[i].version;
			m.u.delete_version.tiers = tiers;
			ckptd__coord_peer_send(c, p, &m);
		} else if (!(tiers & (CKPT_TIER_LOCAL_DISK | CKPT_TIER_SHARED))) {
			ckptd_coord_copies_gone(c->db, job, d[i].version, tiers, d[i].node, on_change, c);
		}
	}
}

static int policy_unset(const ckptd_coord_policy *p)
{
	return p->keep_dram == UINT32_MAX && p->keep_disk == UINT32_MAX && p->keep_every == 0;
}

/* Runs retention for one job: its own policy, or the daemon's --keep-*
 * settings when it has none. Returns the copies being deleted, or an error. */
static int retain_job(ckptd_coordinator *c, const char *job)
{
	const ckptd_config *cfg = c->cfg;
	ckptd_coord_policy pol = { .keep_dram = cfg->keep_dram, .keep_disk = cfg->keep_disk, .keep_every = cfg->keep_every };
	ckptd_coord_policy own;
	int have = cfg->keep_dram || cfg->keep_disk || cfg->keep_every;
	if (ckptd_coord_job_get(c->db, job, NULL, &own) == 0 && !policy_unset(&own))
		have = 0; /* the job's own */
	ckptd_coord_delete *d = NULL;
	size_t n = 0;
	int r = ckptd_coord_retention(c->db, job, have ? &pol : NULL, &d, &n);
	if (r < 0) {
		CKPTD_DEBUG(c->log, NULL, job, "retention: %s", ckpt_strerror(r));
		return r;
	}
	if (n) {
		CKPTD_INFO(c->log, NULL, job, "retention: %zu copies being deleted", n);
		dispatch_deletes(c, job, d, n);
	}
	free(d);
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

static void retention(ckptd_server *srv, void *arg)
{
	(void)srv;
	ckptd_coordinator *c = arg;
	ckptd__coord_flush_batch(c);
	ckptd_metrics_add(c->mx, CKPTD_M_RETENTION_RUNS, NULL, NULL, 1);
	for (size_t j = 0; j < c->njobs; j++)
		retain_job(c, c->jobs[j]);
}

/* ---------------------------------------------------------------- queries */

typedef struct list_acc {
	ckptd_versions *out;
	uint32_t limit;
} list_acc;

static int list_cb(void *arg, const ckptd_coord_version *v)
{
	list_acc *a = arg;
	if (a->out->count == a->limit) {
		a->out->more = 1;
		return 1;
	}
	ckptd_version_info *e = &a->out->entries[a->out->count++];
	e->version = v->version;
	e->state = v->state ? v->state : CKPT_STATE_PENDING;
	e->world_size = v->world_size ? v->world_size : 1;
	e->shards_done = v->ranks_any > e->world_size ? e->world_size : v->ranks_any;
	e->bytes = v->bytes;
	e->tiers = v->committed;
	/* Committed once, not restorable now, nothing being deleted: a shard's
	 * every copy went with lost nodes (a rank must not start afresh). */
	e->gone = v->committed_ns && !v->restorable && !v->deleting && e->state != CKPT_STATE_COMMITTED;
	return 0;
}

int ckptd_coordinator_list(ckptd_coordinator *c, const ckptd_list_versions *req, ckptd_versions *out)
{
	ckptd__coord_flush_batch(c); /* a listing sees every report before it */
	memset(out, 0, sizeof(*out));
	snprintf(out->job, sizeof(out->job), "%s", req->job);
	list_acc a = { out, req->limit && req->limit <= CKPTD_MAX_LIST ? req->limit : LIST_PAGE };
	if (!(out->entries = calloc(a.limit, sizeof(*out->entries))))
		return -ENOMEM;
	int r = ckptd_coord_list(c->db, req->job, req->start, list_cb, &a);
	return r < 0 ? r : 0;
}

typedef struct tier_acc {
	uint32_t versions;
	uint32_t at[CKPTD_COORD_TIERS];
	uint64_t bytes[CKPTD_COORD_TIERS];
} tier_acc;

static int tier_cb(void *arg, const ckptd_coord_version *v)
{
	tier_acc *t = arg;
	t->versions++;
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		if (v->committed & (1u << i)) {
			t->at[i]++;
			t->bytes[i] += v->bytes;
		}
	return 0;
}

int ckptd_coordinator_status(ckptd_coordinator *c, const char *job, ckptd_status_reply *out)
{
	size_t n = 0;
	for (peer *p = c->peers; p; p = p->next)
		if (!job || !job[0] || peer_has_job(p, job))
			n++;
	if (n > CKPTD_MAX_LIST)
		n = CKPTD_MAX_LIST;
	out->entries = n ? calloc(n, sizeof(*out->entries)) : NULL;
	if (n && !out->entries)
		return -ENOMEM;
	out->count = 0;
	for (peer *p = c->peers; p && out->count < n; p = p->next) {
		if (job && job[0] && !peer_has_job(p, job))
			continue;
		ckptd_agent_info *e = &out->entries[out->count++];
		snprintf(e->node, sizeof(e->node), "%s", p->node);
		snprintf(e->address, sizeof(e->address), "%s", p->address[0] ? p->address : "unknown:0");
		snprintf(e->domain, sizeof(e->domain), "%s", p->domain);
		e->pool_bytes = p->pool_bytes;
		e->state = ckptd__coord_peer_state(p);
	}
	out->jobs = (uint32_t)c->njobs;
	/* Versions per tier, over the job asked about or every job known. */
	ckptd__coord_flush_batch(c);
	tier_acc t = { 0 };
	for (size_t j = 0; j < c->njobs; j++)
		if (!job || !job[0] || !strcmp(c->jobs[j], job))
			ckptd_coord_list(c->db, c->jobs[j], 0, tier_cb, &t);
	out->versions = t.versions;
	if (ckptd__coord_epochs_status(c, job, out) < 0 || ckptd__coord_recoveries_status(c, job, out) < 0 ||
	    !(out->tier_stats = calloc(CKPTD_COORD_TIERS, sizeof(*out->tier_stats))))
		return -ENOMEM;
	uint32_t up, degraded, down, peer_bad;
	count_states(c, &up, &degraded, &down, &peer_bad);
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		out->tier_stats[out->ntiers++] = (ckptd_tier_stat){ 1u << i, t.at[i], t.bytes[i],
		                                                    (1u << i) == CKPT_TIER_PEER_MEM ? peer_bad
		                                                                                    : degraded + down };
	return ckptd__coord_groups_status(c, out);
}

/* ---------------------------------------------------------------- deletion */

static int copies_gone(ckptd_coordinator *c, peer *p, const ckptd_copies_gone *g)
{
	ckptd__coord_flush_batch(c);
	int r = ckptd_coord_copies_gone(c->db, g->job, g->version, g->tiers, p->node, on_change, c);
	if (r < 0)
		CKPTD_WARN(c->log, p->node, g->job, "COPIES_GONE for version %llu not applied: %s",
		           (unsigned long long)g->version, ckpt_strerror(r));
	else {
		ckptd_metrics_add(c->mx, CKPTD_M_COPIES_GONE, g->job, NULL, 1);
		CKPTD_DEBUG(c->log, p->node, g->job, "version %llu: %d copies deleted by %s", (unsigned long long)g->version,
		            r, p->node);
	}
	return r;
}

static int delete_version(ckptd_coordinator *c, ckptd_session *s, const ckptd_delete_version *m)
{
	ckptd__coord_flush_batch(c);
	ckptd_coord_delete *d = NULL;
	size_t n = 0;
	int r = ckptd_coord_delete_version(c->db, m->job, m->version, m->tiers, &d, &n);
	if (r == -CKPT_ENOVERSION)
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "no such version of that job");
	if (r < 0)
		return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "deletion not marked; see the coordinator's log");
	CKPTD_INFO(c->log, ckptd_session_peer(s), m->job, "version %llu: %zu copies marked for deletion on request",
	           (unsigned long long)m->version, n);
	dispatch_deletes(c, m->job, d, n);
	free(d);
	ckptd_msg ok = { .type = CKPTD_MSG_OK, .u.ok = { m->version, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n } };
	return ckptd_session_send(s, &ok, -1);
}

static int gc(ckptd_coordinator *c, ckptd_session *s, const ckptd_gc *m)
{
	ckptd__coord_flush_batch(c);
	if (m->policy) {
		ckptd_coord_policy pol = { m->keep_dram, m->keep_disk, m->keep_every };
		int r = ckptd_coord_job_set(c->db, m->job, 0, &pol);
		if (r < 0)
			return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "policy not stored; see the coordinator's log");
		CKPTD_INFO(c->log, ckptd_session_peer(s), m->job, "retention policy set: keep-dram %u keep-disk %u keep-every %llu",
		           m->keep_dram, m->keep_disk, (unsigned long long)m->keep_every);
		job_add(&c->jobs, &c->njobs, &c->capjobs, m->job);
	}
	int n = retain_job(c, m->job);
	if (n < 0)
		return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "retention failed; see the coordinator's log");
	ckptd_msg ok = { .type = CKPTD_MSG_OK, .u.ok.count = (uint32_t)n };
	return ckptd_session_send(s, &ok, -1);
}

typedef struct show_acc {
	ckptd_version_detail *out;
} show_acc;

static int show_cb(void *arg, const ckptd_coord_copy_info *ci)
{
	show_acc *a = arg;
	ckptd_version_detail *o = a->out;
	if (o->count == CKPTD_MAX_LIST) {
		/* A page ends on a rank boundary, so that paging by rank loses nothing. */
		uint32_t last = o->entries[o->count - 1].rank;
		while (o->count && o->entries[o->count - 1].rank == last)
			o->count--;
		o->more = 1;
		return 1;
	}
	ckptd_copy_info *e = &o->entries[o->count++];
	e->rank = ci->rank;
	e->tier = ci->tier;
	e->state = ci->deleting ? 2 : 1;
	snprintf(e->node, sizeof(e->node), "%s", ci->node);
	e->bytes = ci->bytes;
	e->checksum = ci->checksum;
	return 0;
}

static int show_version(ckptd_coordinator *c, ckptd_session *s, const ckptd_show_version *m)
{
	ckptd__coord_flush_batch(c);
	if (m->start > UINT32_MAX)
		return ckptd_session_send_error(s, CKPTD_ERR_MALFORMED, "START is a rank");
	ckptd_coord_version v;
	int r = ckptd_coord_get(c->db, m->job, m->version, &v);
	if (r == -CKPT_ENOVERSION)
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "no such version of that job");
	if (r < 0)
		return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "lookup failed; see the coordinator's log");
	ckptd_msg rep = { .type = CKPTD_MSG_VERSION_DETAIL };
	ckptd_version_detail *o = &rep.u.version_detail;
	snprintf(o->job, sizeof(o->job), "%s", m->job);
	o->version = m->version;
	o->state = v.state ? v.state : CKPT_STATE_PENDING;
	o->world_size = v.world_size ? v.world_size : 1;
	o->tiers = v.committed;
	o->restorable = v.restorable ? 1 : 0;
	if (!(o->entries = calloc(CKPTD_MAX_LIST, sizeof(*o->entries))))
		return -ENOMEM;
	show_acc a = { o };
	r = ckptd_coord_copies(c->db, m->job, m->version, (uint32_t)m->start, show_cb, &a);
	if (r < 0)
		r = ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "listing copies failed; see the coordinator's log");
	else
		r = ckptd_session_send(s, &rep, -1);
	free(o->entries);
	return r;
}

/* Every agent hears it (a job's ranks may be on any node; agents pass it on
 * to the job's ranks only, and keep it for ranks that register later). */
static void announce_interval(void *arg, const ckptd_interval_notice *n)
{
	ckptd_coordinator *c = arg;
	ckptd_msg m = { .type = CKPTD_MSG_INTERVAL_NOTICE, .u.interval_notice = *n };
	for (peer *p = c->peers; p; p = p->next)
		if (p->local || (p->up && p->s))
			ckptd__coord_peer_send(c, p, &m);
}

static void judge_steps(ckptd_server *srv, void *arg)
{
	(void)srv;
	ckptd_coordinator *c = arg;
	ckptd_emerg_tick(c->emerg, ckpt__now_ns());
	ckptd_steps_judge(c->steps, ckpt__now_ns());
	ckptd_stragglers_tick(c->stragglers, ckpt__now_ns());
}

/* ---------------------------------------------------------------- handlers */

int ckptd_coordinator_handle(ckptd_coordinator *c, ckptd_session *s, const ckptd_msg *m)
{
	agent_sess *as = ckptd_session_data(s);
	uint32_t role = ckptd_session_role(s);
	if (as && as->p && as->p->s == s)
		heard(c, as->p);
	switch (m->type) {
	case CKPTD_MSG_HEARTBEAT: {
		ckptd_msg ok = { .type = CKPTD_MSG_OK };
		return ckptd_session_send(s, &ok, -1);
	}
	case CKPTD_MSG_AGENT_HELLO: {
		if (role != CKPTD_ROLE_AGENT)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "AGENT_HELLO needs an agent session");
		ckptd__coord_flush_batch(c);
		peer *p = ckptd__coord_peer_get(c, m->u.agent_hello.node);
		if (!p)
			return -ENOMEM;
		if (p->local)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "that node is this daemon's own agent");
		if (!as) {
			if (!(as = calloc(1, sizeof(*as))))
				return -ENOMEM;
			as->c = c;
			as->s = s;
			ckptd_session_set_data(s, as, agent_sess_free);
		}
		if (p->s && p->s != s) /* a reconnect that beat the old session's close */
			CKPTD_INFO(c->log, p->node, NULL, "agent %s replaces its earlier connection", p->node);
		as->p = p;
		p->s = s;
		hello(c, p, &m->u.agent_hello);
		ckptd_msg ok = { .type = CKPTD_MSG_OK };
		return ckptd_session_send(s, &ok, -1);
	}
	case CKPTD_MSG_EC_DONE: {
		if (role != CKPTD_ROLE_AGENT || !as || !as->p)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "EC_DONE comes from a group member's agent");
		ckptd__coord_ec_done(c, as->p, &m->u.ec_done);
		ckptd_msg ok = { .type = CKPTD_MSG_OK };
		return ckptd_session_send(s, &ok, -1);
	}
	case CKPTD_MSG_SPARE_DONE: {
		if (role != CKPTD_ROLE_AGENT || !as || !as->p)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "SPARE_DONE comes from a spare's agent");
		ckptd__coord_spare_done(c, as->p, &m->u.spare_done);
		ckptd_msg ok = { .type = CKPTD_MSG_OK };
		return ckptd_session_send(s, &ok, -1);
	}
	case CKPTD_MSG_RECOVERIES:
		if (role == CKPTD_ROLE_AGENT)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "RECOVERIES is for the ckpt tool");
		return ckptd__coord_recoveries_query(c, s, &m->u.recoveries);
	case CKPTD_MSG_NODE_EVIDENCE:
		if (role != CKPTD_ROLE_AGENT || !as || !as->p)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "node evidence comes from a node's agent");
		return ckptd__coord_evidence_in(c, s, as->p, &m->u.node_evidence);
	case CKPTD_MSG_STRAGGLERS:
		return ckptd__coord_stragglers_query(c, s, &m->u.stragglers);
	case CKPTD_MSG_RANKS: {
		if (role != CKPTD_ROLE_AGENT || !as || !as->p)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "RANKS comes from a node's agent, after AGENT_HELLO");
		if (strcmp(m->u.ranks.node, as->p->node) != 0)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "RANKS names another node");
		if (ckptd__coord_ranks_in(c, as->p, &m->u.ranks) < 0)
			return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "ranks not recorded; see the coordinator's log");
		ckptd_msg ok = { .type = CKPTD_MSG_OK };
		return ckptd_session_send(s, &ok, -1);
	}
	case CKPTD_MSG_EVENTS:
		if (role == CKPTD_ROLE_AGENT)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "EVENTS is for the ckpt tool");
		return ckptd__coord_events_query(c, s, &m->u.events);
	case CKPTD_MSG_AGENT_INVENTORY:
	case CKPTD_MSG_SHARD_DONE:
		if (role != CKPTD_ROLE_AGENT)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "agents report shards, through their agent");
		if (!as || !as->p)
			return ckptd_session_send_error(s, CKPTD_ERR_STATE, "AGENT_HELLO first");
		if (m->type == CKPTD_MSG_SHARD_DONE)
			return enqueue(c, s, as->p, &m->u.shard_done);
		ckptd__coord_flush_batch(c); /* the round's stamps must see the reports before it */
		if (strcmp(m->u.agent_inventory.node, as->p->node) != 0)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "inventory names another node");
		{
			int r = inventory(c, as->p, &m->u.agent_inventory);
			if (r < 0)
				return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "inventory not applied; see the coordinator's log");
			ckptd_msg ok = { .type = CKPTD_MSG_OK };
			return ckptd_session_send(s, &ok, -1);
		}
	case CKPTD_MSG_LIST_VERSIONS: {
		ckptd_msg rep = { .type = CKPTD_MSG_VERSIONS };
		int r = ckptd_coordinator_list(c, &m->u.list_versions, &rep.u.versions);
		if (r == 0)
			r = ckptd_session_send(s, &rep, -1);
		else
			r = ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "listing failed; see the coordinator's log");
		free(rep.u.versions.entries);
		return r;
	}
	case CKPTD_MSG_DELETE_VERSION:
		if (role == CKPTD_ROLE_AGENT)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "agents delete on the coordinator's word only");
		return delete_version(c, s, &m->u.delete_version);
	case CKPTD_MSG_GC:
		if (role == CKPTD_ROLE_AGENT)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "GC is for the ckpt tool");
		return gc(c, s, &m->u.gc);
	case CKPTD_MSG_PREEMPT: {
		if (!m->u.preempt.job[0] && !m->u.preempt.node[0])
			return ckptd_session_send_error(s, CKPTD_ERR_MALFORMED, "PREEMPT names a job, a node, or both");
		/* count: the jobs whose ranks were told (0: nobody was). */
		int r = ckptd_coordinator_preempt(c, &m->u.preempt);
		ckptd_msg ok = { .type = CKPTD_MSG_OK, .u.ok.count = r > 0 ? (uint32_t)r : 0 };
		return ckptd_session_send(s, &ok, -1);
	}
	case CKPTD_MSG_SEGMENT_REQUEST: {
		if (role == CKPTD_ROLE_AGENT && m->u.segment_request.mode == CKPTD_SEG_EC_WHERE)
			return ckptd__coord_ec_where(c, s, &m->u.segment_request);
		/* SEG_WHERE and SEG_COPIES, passed on by a rank's agent. */
		if (role != CKPTD_ROLE_AGENT ||
		    (m->u.segment_request.mode != CKPTD_SEG_WHERE && m->u.segment_request.mode != CKPTD_SEG_COPIES))
			return ckptd_session_send_error(s, CKPTD_ERR_UNSUPPORTED,
			                                "the coordinator answers SEG_WHERE and SEG_COPIES of agents only");
		ckptd_msg rep = { .type = CKPTD_MSG_PARTNERS };
		int r = ckptd_coordinator_where(c, &m->u.segment_request, &rep.u.partners);
		r = r == 0 ? ckptd_session_send(s, &rep, -1)
		           : ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "lookup failed; see the coordinator's log");
		free(rep.u.partners.entries);
		return r;
	}
	case CKPTD_MSG_SHOW_VERSION:
		return show_version(c, s, &m->u.show_version);
	case CKPTD_MSG_STEP_REPORT: {
		if (role != CKPTD_ROLE_AGENT)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "ranks report steps through their agent");
		int r = ckptd_steps_report(c->steps, &m->u.step_report, ckpt__now_ns());
		if (r < 0)
			return ckptd_session_send_error(s, CKPTD_ERR_MALFORMED, "step report not taken (rank or job beyond the bounds)");
		ckptd__coord_recovery_step(c, &m->u.step_report);
		ckptd_msg ok = { .type = CKPTD_MSG_OK };
		return ckptd_session_send(s, &ok, -1);
	}
	case CKPTD_MSG_STEP_STATS: {
		ckptd_msg rep = { .type = CKPTD_MSG_STEP_STATS_REPLY };
		int r = ckptd_steps_query(c->steps, m->u.step_stats.job, m->u.step_stats.start, &rep.u.step_stats_reply);
		r = r < 0 ? r : ckptd_session_send(s, &rep, -1);
		free(rep.u.step_stats_reply.entries);
		return r;
	}
	case CKPTD_MSG_GOODPUT: {
		ckptd_msg rep = { .type = CKPTD_MSG_GOODPUT_REPLY };
		int r = ckptd_steps_goodput(c->steps, m->u.goodput.job, &rep.u.goodput_reply);
		r = r < 0 ? r : ckptd_session_send(s, &rep, -1);
		free(rep.u.goodput_reply.entries);
		return r;
	}
	case CKPTD_MSG_COPIES_GONE: {
		if (role != CKPTD_ROLE_AGENT)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "COPIES_GONE needs an agent session");
		if (!as || !as->p)
			return ckptd_session_send_error(s, CKPTD_ERR_STATE, "AGENT_HELLO first");
		if (strcmp(m->u.copies_gone.node, as->p->node) != 0)
			return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "COPIES_GONE names another node");
		int r = copies_gone(c, as->p, &m->u.copies_gone);
		if (r < 0)
			return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "not applied; see the coordinator's log");
		ckptd_msg ok = { .type = CKPTD_MSG_OK, .u.ok = { m->u.copies_gone.version, (uint32_t)r } };
		return ckptd_session_send(s, &ok, -1);
	}
	default:
		return ckptd_session_send_error(s, CKPTD_ERR_UNSUPPORTED, "not handled by the coordinator");
	}
}

int ckptd_coordinator_local_attach(ckptd_coordinator *c, const char *node, ckptd_local_agent_fn fn, void *arg)
{
	peer *p = ckptd__coord_peer_get(c, node);
	if (!p)
		return -ENOMEM;
	p->local = fn;
	p->local_arg = arg;
	return 0;
}

int ckptd_coordinator_local_msg(ckptd_coordinator *c, const char *node, const ckptd_msg *m)
{
	peer *p = ckptd__coord_peer_find(c, node);
	if (!p || !p->local)
		return -ENOENT;
	switch (m->type) {
	case CKPTD_MSG_AGENT_HELLO:
		hello(c, p, &m->u.agent_hello);
		return 0;
	case CKPTD_MSG_AGENT_INVENTORY:
		ckptd__coord_flush_batch(c);
		return inventory(c, p, &m->u.agent_inventory);
	case CKPTD_MSG_SHARD_DONE:
		return enqueue(c, NULL, p, &m->u.shard_done);
	case CKPTD_MSG_COPIES_GONE: {
		int r = copies_gone(c, p, &m->u.copies_gone);
		return r < 0 ? r : 0;
	}
	case CKPTD_MSG_STEP_REPORT:
		ckptd__coord_recovery_step(c, &m->u.step_report);
		return ckptd_steps_report(c->steps, &m->u.step_report, ckpt__now_ns());
	case CKPTD_MSG_NODE_EVIDENCE:
		return ckptd__coord_evidence_in(c, NULL, p, &m->u.node_evidence);
	case CKPTD_MSG_RANKS:
		return ckptd__coord_ranks_in(c, p, &m->u.ranks);
	case CKPTD_MSG_PREEMPT:
		ckptd_coordinator_preempt(c, &m->u.preempt);
		return 0;
	case CKPTD_MSG_EC_DONE:
		ckptd__coord_ec_done(c, p, &m->u.ec_done);
		return 0;
	default:
		return -EINVAL;
	}
}

int ckptd_coordinator_new(ckptd_server *srv, const ckptd_config *cfg, const ckptd_log *log,
                          ckptd_coordinator **out, char *err, size_t errcap)
{
	char dir[4200];
	int r;
	*out = NULL;
	ckptd_coordinator *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->srv = srv;
	c->cfg = cfg;
	c->log = log;
	c->mx = ckptd_server_metrics(srv);
	ckptd_metrics_add(c->mx, CKPTD_M_RETENTION_RUNS, NULL, NULL, 0);
	snprintf(dir, sizeof(dir), "%s/coord", cfg->root);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		snprintf(err, errcap, "--root: cannot create %s: %s", dir, strerror(errno));
		goto fail;
	}
	if ((r = ckptd_coord_open(dir, 0, &c->db)) < 0) {
		snprintf(err, errcap, "--root: cannot open the coordinator index in %s: %s", dir, ckpt_strerror(r));
		goto fail;
	}
	if ((r = ckptd__coord_groups_open(c, err, errcap)) < 0)
		goto fail;
	if ((r = ckptd_server_after_events(srv, after_events, c)) < 0 ||
	    (r = ckptd_server_every(srv, LIVENESS_MS, liveness, c)) < 0 ||
	    (r = ckptd_steps_new(cfg, log, c->mx, announce_interval, c, &c->steps)) < 0 ||
	    (r = ckptd_emerg_new(cfg, log, c->mx, c->steps, &ckptd__coord_emerg_ops,
	                         c, &c->emerg)) < 0 ||
	    (r = ckptd__coord_stragglers_open(c)) < 0 || (r = ckptd__members_open(c)) < 0 ||
	    (r = ckptd__spares_open(c)) < 0 || (r = ckptd__coord_replace_open(c)) < 0 ||
	    (r = ckptd_server_every(srv, 1000, judge_steps, c)) < 0 ||
	    (cfg->retention_interval_ms && (r = ckptd_server_every(srv, cfg->retention_interval_ms, retention, c)) < 0)) {
		snprintf(err, errcap, "cannot install the coordinator's timers: %s", strerror(-r));
		goto fail;
	}
	*out = c;
	return 0;
fail:
	ckptd_coordinator_free(c);
	return r;
}

void ckptd_coordinator_free(ckptd_coordinator *c)
{
	if (!c)
		return;
	for (peer *p = c->peers, *n; p; p = n) {
		n = p->next;
		free(p->jobs);
		free(p);
	}
	ckptd__coord_ec_free(c);
	ckptd__coord_groups_free(c);
	ckptd__members_close(c);
	ckptd__spares_close(c);
	ckptd__coord_replace_close(c);
	ckptd_coord_close(c->db);
	ckptd_emerg_free(c->emerg);
	ckptd_stragglers_free(c->stragglers);
	ckptd_steps_free(c->steps);
	free(c->q);
	free(c->batch);
	free(c->res);
	free(c->jobs);
	free(c);
}
