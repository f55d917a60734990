/* The rs:K+M encode, the coordinator's side (--peer-scheme rs:K+M).
 *
 * When a version commits at LOCAL_MEM, each group whose nodes hold its
 * shards gets it as instances (ckptd/coord/ecplan.c): EC_PLAN goes to every
 * member, which builds its parity rows from the others' slices
 * (agent_ec.c) and answers EC_DONE. Once every member of the group has, the
 * group's ranks are protected at PEER_MEM: a copy of each is recorded on
 * the pseudo-node rs-group.<id>, and the commit rule does the rest (the
 * version commits at PEER_MEM when every rank is protected, by its group
 * or by partner copies). No agent is called that: a member's loss drops
 * none of them. A group member down at the commit, or a member that fails,
 * leaves the version unprotected there (logged, naming it).
 *
 * What is in flight lives in memory, at most ECV_MAX versions: a restarted
 * coordinator encodes the versions that commit after it. A finished plan
 * (what a rebuild needs) is kept in the coordinator's index too, as are
 * the groups (coord_groups.c), so that a restarted coordinator still
 * answers EC_WHERE for versions encoded before it and keeps their groups:
 * table "ec", each record an EC_PLAN frame as the wire codec writes it
 * (read back by the same, fuzzed, decoder):
 *   'g' be32 id                        a group: K, M, its members (NODES);
 *                                      job "rs", version 0, no entries
 *   'p' len job be64 version be32 id   a finished encode's plan
 * A plan's record goes when a newer one of its group supersedes it, when
 * it is dropped for room, or when its group lost more than M members. */
#include "coordinator_int.h"

#include "coord/ecplan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ECV_MAX 256

typedef struct ecv {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version, lineage;
	uint32_t gid, world;
	unsigned k, m, n;
	peer *p[CKPT_EC_MAX_PIECES];
	uint64_t done;          /* members that answered EC_DONE 0 */
	ckptd_coord_shard *sh;  /* the group's ranks (node: the pseudo-node) */
	size_t nsh;
	char node[CKPTD_NAME_MAX + 1];
	int complete;           /* every member's rows made: the plan is kept for rebuilds */
	int broken;             /* more than M of its members lost: its copies dropped */
	ckptd_ec_node nodes[CKPT_EC_MAX_PIECES];
	ckptd_ec_src *src;      /* the plan's entries */
	size_t nsrc;
} ecv;

/* What a job's ranks said they save to, by their latest report that said
 * (SHARD_DONE's TIERS): a job that does not ask for PEER_MEM is not
 * encoded; one that never said (older libckpt, or none since this
 * coordinator started) is, as before TIERS. */
typedef struct ecjob {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t tiers;
	int skipped_said; /* "not encoded" logged since tiers last changed */
} ecjob;

struct ckptd_ecvs {
	ecv *v[ECV_MAX];
	size_t n;
	ecjob *jobs;
	size_t njobs, capjobs;
};

static void ecv_free(ecv *e)
{
	if (e) {
		free(e->sh);
		free(e->src);
		free(e);
	}
}

static size_t plan_key(uint8_t *key, const char *job, uint64_t version, uint32_t gid)
{
	size_t n = strlen(job), o = 0;
	key[o++] = 'p';
	key[o++] = (uint8_t)n;
	memcpy(key + o, job, n);
	o += n;
	for (int b = 7; b >= 0; b--)
		key[o++] = (uint8_t)(version >> (8 * b));
	for (int b = 3; b >= 0; b--)
		key[o++] = (uint8_t)(gid >> (8 * b));
	return o;
}

/* The plan e is, as EC_PLAN to member `member` (borrows e's lists). */
static void ecv_plan(const ecv *e, uint32_t member, ckptd_ec_plan *pl)
{
	memset(pl, 0, sizeof(*pl));
	snprintf(pl->job, sizeof(pl->job), "%s", e->job);
	pl->version = e->version;
	pl->group = e->gid;
	pl->k = e->k;
	pl->m = e->m;
	pl->member = member;
	pl->nnodes = e->n;
	pl->nodes = (ckptd_ec_node *)e->nodes;
	pl->count = (uint32_t)e->nsrc;
	pl->entries = e->src;
}

/* forget: a finished plan's record in the index goes too. */
static void ecv_drop(ckptd_coordinator *c, size_t i, int forget)
{
	struct ckptd_ecvs *x = c->ecvs;
	ecv *e = x->v[i];
	if (forget && e->complete) {
		uint8_t key[1 + 1 + CKPTD_JOB_MAX + 12];
		ckptd__coord_ec_keep(c, key, plan_key(key, e->job, e->version, e->gid), NULL);
	}
	ecv_free(e);
	x->v[i] = x->v[--x->n];
}

void ckptd__coord_ec_free(ckptd_coordinator *c)
{
	struct ckptd_ecvs *x = c->ecvs;
	if (!x)
		return;
	while (x->n)
		ecv_drop(c, x->n - 1, 0);
	free(x->jobs);
	free(x);
	c->ecvs = NULL;
}

typedef struct shard_acc {
	ckptd_coord_copy_info *ci;
	size_t n, cap;
	int err;
} shard_acc;

static int copy_cb(void *arg, const ckptd_coord_copy_info *ci)
{
	shard_acc *a = arg;
	if (ci->tier != CKPT_TIER_LOCAL_MEM || ci->deleting)
		return 0;
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 64;
		void *q = realloc(a->ci, nc * sizeof(*a->ci));
		if (!q) {
			a->err = -ENOMEM;
			return 1;
		}
		a->ci = q;
		a->cap = nc;
	}
	a->ci[a->n++] = *ci;
	return 0;
}

static int version_cb(void *arg, const ckptd_coord_version *v)
{
	*(ckptd_coord_version *)arg = *v;
	return 1;
}

/* One group's plan out to its members. */
static void plan_group(ckptd_coordinator *c, const char *job, const ckptd_coord_version *ver, uint32_t gid,
                       const shard_acc *acc)
{
	peer *mem[CKPT_EC_MAX_PIECES];
	unsigned k, m;
	if (ckptd__coord_group_of(c, gid, mem, &k, &m) < 0)
		return;
	unsigned n = k + m;
	ckptd_ec_shard *sh = calloc(acc->n ? acc->n : 1, sizeof(*sh));
	ckptd_ec_instance *in = NULL;
	ckptd_ec_node *nodes = calloc(n, sizeof(*nodes));
	ckptd_ec_src *src = NULL;
	ecv *e = calloc(1, sizeof(*e));
	size_t nsh = 0, ni = 0, nsrc = 0;
	char why[300] = "";
	if (!sh || !nodes || !e)
		goto out;
	for (size_t i = 0; i < acc->n; i++) {
		peer *p = ckptd__coord_peer_find(c, acc->ci[i].node);
		if (p && p->in_rs_group && p->rs_gid == gid)
			sh[nsh++] = (ckptd_ec_shard){ acc->ci[i].rank, p->rs_member, acc->ci[i].bytes };
	}
	if (!nsh)
		goto out;
	for (unsigned j = 0; j < n; j++)
		if (ckptd__coord_peer_state(mem[j]) != CKPTD_AGENT_UP) {
			ckptd_metrics_add(c->mx, CKPTD_M_RS_FAILED, job, NULL, 1);
			CKPTD_WARN(c->log, mem[j]->node, job, "version %llu: rs group %u not encoded: member %s is %s",
			           (unsigned long long)ver->version, gid, mem[j]->node,
			           mem[j]->up ? "silent" : "down");
			goto out;
		}
	if (ckptd_coord_ec_plan(k, m, sh, nsh, &in, &ni, why, sizeof(why)) < 0) {
		CKPTD_WARN(c->log, NULL, job, "version %llu: rs group %u not encoded: %s", (unsigned long long)ver->version,
		           gid, why);
		goto out;
	}
	for (size_t j = 0; j < ni; j++)
		for (unsigned i = 0; i < n; i++)
			nsrc += in[j].rank[i] != CKPTD_EC_EMPTY;
	if (nsrc > CKPTD_MAX_LIST || !(src = calloc(nsrc, sizeof(*src))))
		goto out;
	nsrc = 0;
	for (size_t j = 0; j < ni; j++)
		for (unsigned i = 0; i < n; i++)
			if (in[j].rank[i] != CKPTD_EC_EMPTY)
				src[nsrc++] = (ckptd_ec_src){ (uint32_t)j, i, in[j].rank[i], in[j].g.len[i] };
	for (unsigned i = 0; i < n; i++) {
		nodes[i].member = i;
		snprintf(nodes[i].node, sizeof(nodes[i].node), "%s", mem[i]->node);
		snprintf(nodes[i].address, sizeof(nodes[i].address), "%s", mem[i]->address);
	}
	/* What the group's EC_DONEs will record. */
	if (!(e->sh = calloc(nsh, sizeof(*e->sh))))
		goto out;
	snprintf(e->job, sizeof(e->job), "%s", job);
	snprintf(e->node, sizeof(e->node), "rs-group.%u", gid);
	e->version = ver->version;
	e->lineage = ver->lineage;
	e->world = ver->world_size;
	e->gid = gid;
	e->k = k;
	e->m = m;
	e->n = n;
	memcpy(e->p, mem, n * sizeof(*mem));
	memcpy(e->nodes, nodes, n * sizeof(*nodes));
	if (!(e->src = malloc(nsrc * sizeof(*src))))
		goto out;
	memcpy(e->src, src, nsrc * sizeof(*src));
	e->nsrc = nsrc;
	for (size_t i = 0; i < acc->n; i++) {
		peer *p = ckptd__coord_peer_find(c, acc->ci[i].node);
		if (p && p->in_rs_group && p->rs_gid == gid)
			e->sh[e->nsh++] = (ckptd_coord_shard){ .version = ver->version, .rank = acc->ci[i].rank,
			                                       .world_size = ver->world_size, .tier = CKPT_TIER_PEER_MEM,
			                                       .bytes = acc->ci[i].bytes, .checksum = acc->ci[i].checksum,
			                                       .lineage = ver->lineage };
	}
	struct ckptd_ecvs *x = c->ecvs;
	if (x->n == ECV_MAX) {
		/* Room: a finished one first (its plan only serves rebuilds). */
		for (size_t q = 0; q < x->n; q++)
			if (x->v[q]->complete) {
				ecv_drop(c, q, 1);
				break;
			}
	}
	if (x->n == ECV_MAX) {
		CKPTD_WARN(c->log, NULL, x->v[0]->job, "version %llu: rs group %u's encode forgotten (%d in flight)",
		           (unsigned long long)x->v[0]->version, x->v[0]->gid, ECV_MAX);
		ecv_drop(c, 0, 1);
	}
	x->v[x->n++] = e;
	e = NULL;
	for (unsigned i = 0; i < n; i++) {
		ckptd_msg msg = { .type = CKPTD_MSG_EC_PLAN };
		ckptd_ec_plan *pl = &msg.u.ec_plan;
		snprintf(pl->job, sizeof(pl->job), "%s", job);
		pl->version = ver->version;
		pl->group = gid;
		pl->k = k;
		pl->m = m;
		pl->member = i;
		pl->nnodes = n;
		pl->nodes = nodes;
		pl->count = (uint32_t)nsrc;
		pl->entries = src;
		ckptd__coord_peer_send(c, mem[i], &msg);
	}
	CKPTD_INFO(c->log, NULL, job, "version %llu: rs group %u encoding %zu shard%s in %zu instance%s", 
	           (unsigned long long)ver->version, gid, nsh, nsh == 1 ? "" : "s", ni, ni == 1 ? "" : "s");
out:
	ecv_free(e);
	free(sh);
	free(in);
	free(nodes);
	free(src);
}

static ecjob *ecjob_of(struct ckptd_ecvs *x, const char *job)
{
	for (size_t i = 0; i < x->njobs; i++)
		if (!strcmp(x->jobs[i].job, job))
			return &x->jobs[i];
	return NULL;
}

void ckptd__coord_ec_note(ckptd_coordinator *c, const ckptd_shard_done *d)
{
	if (!d->tiers || !c->groups)
		return;
	if (!c->ecvs && !(c->ecvs = calloc(1, sizeof(*c->ecvs))))
		return;
	struct ckptd_ecvs *x = c->ecvs;
	ecjob *j = ecjob_of(x, d->job);
	if (!j) {
		if (x->njobs == x->capjobs) {
			size_t nc = x->capjobs ? x->capjobs * 2 : 8;
			void *q = realloc(x->jobs, nc * sizeof(*x->jobs));
			if (!q)
				return;
			x->jobs = q;
			x->capjobs = nc;
		}
		j = &x->jobs[x->njobs++];
		memset(j, 0, sizeof(*j));
		snprintf(j->job, sizeof(j->job), "%s", d->job);
	}
	if (j->tiers != d->tiers)
		j->skipped_said = 0;
	j->tiers = d->tiers;
}

void ckptd__coord_ec_encode(ckptd_coordinator *c, const char *job, uint64_t version)
{
	if (!c->groups)
		return;
	if (!c->ecvs && !(c->ecvs = calloc(1, sizeof(*c->ecvs))))
		return;
	ecjob *j = ecjob_of(c->ecvs, job);
	if (j && !(j->tiers & CKPT_TIER_PEER_MEM)) {
		/* Its ranks keep no peer copy: parity would only cost the groups'
		 * memory and fabric. Said once per change of the job's tiers. */
		ckptd_logf(c->log, j->skipped_said ? CKPTD_LOG_DEBUG : CKPTD_LOG_INFO, NULL, job,
		           "version %llu: not rs-encoded: the job's ranks do not save to peer_mem", (unsigned long long)version);
		j->skipped_said = 1;
		return;
	}
	ckptd_coord_version ver = { 0 };
	if (ckptd_coord_list(c->db, job, version, version_cb, &ver) < 0 || ver.version != version)
		return;
	shard_acc acc = { 0 };
	int r = ckptd_coord_copies(c->db, job, version, 0, copy_cb, &acc);
	if (r >= 0 && !acc.err) {
		/* Each group once, in the order its first shard is met. */
		uint32_t seen[256];
		size_t nseen = 0;
		for (size_t i = 0; i < acc.n; i++) {
			peer *p = ckptd__coord_peer_find(c, acc.ci[i].node);
			if (!p || !p->in_rs_group)
				continue;
			int dup = 0;
			for (size_t j = 0; j < nseen && !dup; j++)
				dup = seen[j] == p->rs_gid;
			if (dup)
				continue;
			if (nseen < sizeof(seen) / sizeof(seen[0]))
				seen[nseen++] = p->rs_gid;
			plan_group(c, job, &ver, p->rs_gid, &acc);
		}
	}
	free(acc.ci);
}

void ckptd__coord_ec_done(ckptd_coordinator *c, peer *p, const ckptd_ec_done *d)
{
	struct ckptd_ecvs *x = c->ecvs;
	size_t i;
	for (i = 0; x && i < x->n; i++)
		if (!x->v[i]->complete && x->v[i]->version == d->version && x->v[i]->gid == d->group &&
		    !strcmp(x->v[i]->job, d->job))
			break;
	if (!x || i == x->n) {
		CKPTD_DEBUG(c->log, p->node, d->job, "EC_DONE for version %llu of group %u: not being encoded",
		            (unsigned long long)d->version, d->group);
		return;
	}
	ecv *e = x->v[i];
	unsigned j;
	for (j = 0; j < e->n && e->p[j] != p; j++)
		;
	if (j == e->n)
		return; /* not a member of that encode */
	if (d->code) {
		ckptd_metrics_add(c->mx, CKPTD_M_RS_FAILED, d->job, NULL, 1);
		CKPTD_WARN(c->log, p->node, d->job, "version %llu: rs group %u not protected: member %s: %s",
		           (unsigned long long)d->version, d->group, p->node, d->text[0] ? d->text : strerror((int)d->code));
		ecv_drop(c, i, 1);
		return;
	}
	e->done |= 1ull << j;
	if (e->done != (e->n == 64 ? ~0ull : (1ull << e->n) - 1))
		return;
	/* Every row of every instance is made: the group's ranks are protected. */
	ckptd__coord_flush_batch(c);
	ckptd_coord_result *res = calloc(e->nsh, sizeof(*res));
	if (!res) {
		ecv_drop(c, i, 1);
		return;
	}
	for (size_t k = 0; k < e->nsh; k++) {
		e->sh[k].job = e->job;
		e->sh[k].node = e->node;
	}
	int r = ckptd_coord_shard_done_batch(c->db, e->sh, e->nsh, res);
	uint32_t committed = 0;
	for (size_t k = 0; r == 0 && k < e->nsh; k++) {
		if (res[k].status < 0)
			CKPTD_WARN(c->log, e->node, e->job, "version %llu rank %u: rs protection not recorded: %s",
			           (unsigned long long)e->version, e->sh[k].rank, ckpt_strerror(res[k].status));
		committed |= res[k].committed;
	}
	if (r < 0)
		CKPTD_WARN(c->log, e->node, e->job, "version %llu: rs protection not recorded: %s",
		           (unsigned long long)e->version, ckpt_strerror(r));
	else
		ckptd_metrics_add(c->mx, CKPTD_M_RS_PROTECTED, e->job, NULL, 1);
	if (r == 0)
		CKPTD_INFO(c->log, NULL, e->job, "version %llu: %zu rank%s protected by rs group %u (rs:%u+%u, any %u of %u "
		           "members may be lost)", (unsigned long long)e->version, e->nsh, e->nsh == 1 ? "" : "s", e->gid,
		           e->k, e->m, e->m, e->n);
	free(res);
	char job[CKPTD_JOB_MAX + 1];
	snprintf(job, sizeof(job), "%s", e->job);
	uint64_t version = e->version;
	uint32_t gid = e->gid;
	e->complete = r == 0;
	if (!e->complete) {
		ecv_drop(c, i, 1);
	} else {
		/* Kept for a restarted coordinator's rebuilds. */
		uint8_t key[1 + 1 + CKPTD_JOB_MAX + 12];
		ckptd_ec_plan pl;
		ecv_plan(e, 0, &pl);
		ckptd__coord_ec_keep(c, key, plan_key(key, e->job, e->version, e->gid), &pl);
	}
	/* Older finished plans of the group: their parity goes with this commit;
	 * this version's earlier one (before a member was replaced) is
	 * superseded by this one. */
	for (size_t q = 0; r == 0 && q < x->n;)
		if (x->v[q] != e && x->v[q]->complete && x->v[q]->gid == gid && x->v[q]->version <= version &&
		    !strcmp(x->v[q]->job, job))
			ecv_drop(c, q, 1);
		else
			q++;
	if (committed)
		ckptd__coord_announce(c, job, version, committed);
}

int ckptd__coord_ec_where(ckptd_coordinator *c, ckptd_session *s, const ckptd_segment_request *m)
{
	struct ckptd_ecvs *x = c->ecvs;
	for (size_t i = 0; x && i < x->n; i++) {
		const ecv *e = x->v[i];
		if (!e->complete || e->version != m->version || strcmp(e->job, m->job))
			continue;
		for (size_t j = 0; j < e->nsrc; j++) {
			if (e->src[j].rank != m->rank)
				continue;
			ckptd_msg msg = { .type = CKPTD_MSG_EC_PLAN };
			ecv_plan(e, e->src[j].member, &msg.u.ec_plan);
			return ckptd_session_send(s, &msg, -1);
		}
	}
	char t[200];
	snprintf(t, sizeof(t), "version %llu rank %u is protected by no rs group this coordinator knows",
	         (unsigned long long)m->version, m->rank);
	return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, t);
}

void ckptd__coord_ec_lost(ckptd_coordinator *c)
{
	struct ckptd_ecvs *x = c->ecvs;
	for (size_t i = 0; x && i < x->n; i++) {
		ecv *e = x->v[i];
		if (!e->complete || e->broken)
			continue;
		unsigned lost = 0;
		char names[400];
		size_t o = 0;
		names[0] = '\0';
		for (unsigned j = 0; j < e->n; j++)
			if (!e->p[j]->up && !e->p[j]->lost_at_ns) { /* past --agent-grace */
				lost++;
				if (o < sizeof(names))
					o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s", o ? ", " : "", e->p[j]->node);
			}
		if (lost <= e->m)
			continue;
		e->broken = 1;
		uint8_t key[1 + 1 + CKPTD_JOB_MAX + 12];
		ckptd__coord_ec_keep(c, key, plan_key(key, e->job, e->version, e->gid), NULL); /* nothing to rebuild from */
		ckptd_metrics_add(c->mx, CKPTD_M_RS_UNPROTECTED, e->job, NULL, 1);
		ckptd__coord_flush_batch(c);
		int r = ckptd_coord_copies_gone(c->db, e->job, e->version, CKPT_TIER_PEER_MEM, e->node, NULL, NULL);
		CKPTD_WARN(c->log, e->node, e->job,
		           "version %llu: rs group %u lost %u of its %u members (%s), more than %u: its %zu ranks are no longer "
		           "protected at PEER_MEM (%d copies dropped)",
		           (unsigned long long)e->version, e->gid, lost, e->n, names, e->m, e->nsh, r);
	}
}

/* ---------------------------------------------------------------- kept */

int ckptd__coord_ec_keep(ckptd_coordinator *c, const uint8_t *key, size_t klen, const ckptd_ec_plan *pl)
{
	uint8_t *b = NULL;
	size_t len = 0;
	int r = 0;
	if (pl) {
		ckptd_msg m = { .type = CKPTD_MSG_EC_PLAN };
		m.u.ec_plan = *pl;
		long n = ckptd_msg_encoded_size(&m);
		if (n < 0)
			r = (int)n;
		else if (!(b = malloc((size_t)n)))
			r = -ENOMEM;
		else
			r = ckptd_msg_encode(&m, b, (size_t)n, &len);
	}
	if (r == 0)
		r = ckptd_coord_ec_put(c->db, key, klen, b, len);
	free(b);
	if (r < 0)
		CKPTD_WARN(c->log, NULL, pl ? pl->job : NULL, "rs record %s in the index: %s (a restarted coordinator %s)",
		           pl ? "not kept" : "not removed", ckpt_strerror(r),
		           pl ? "will not know it" : "may offer a plan that is gone");
	return r;
}

/* A member named in a kept record: one not heard of since the start is
 * down, its --agent-grace running from now (as after a disconnection). */
static peer *kept_peer(ckptd_coordinator *c, const ckptd_ec_node *nd)
{
	if (ckpt__name_check(nd->node, strlen(nd->node)))
		return NULL;
	peer *p = ckptd__coord_peer_get(c, nd->node);
	if (p && !p->up && !p->lost_at_ns && !p->address[0]) {
		snprintf(p->address, sizeof(p->address), "%s", nd->address);
		p->lost_at_ns = ckpt__now_ns() + c->cfg->agent_grace_ms * 1000000ull;
	}
	return p;
}

static int plan_restore(ckptd_coordinator *c, const ckptd_ec_plan *pl, peer **ps, char *why, size_t cap)
{
	if (!c->ecvs && !(c->ecvs = calloc(1, sizeof(*c->ecvs))))
		return -ENOMEM;
	struct ckptd_ecvs *x = c->ecvs;
	if (x->n == ECV_MAX) {
		snprintf(why, cap, "more than %d plans kept", ECV_MAX);
		return -E2BIG;
	}
	for (size_t i = 0; i < x->n; i++)
		if (x->v[i]->version == pl->version && x->v[i]->gid == pl->group && !strcmp(x->v[i]->job, pl->job)) {
			snprintf(why, cap, "kept twice");
			return -EINVAL;
		}
	ecv *e = calloc(1, sizeof(*e));
	if (!e || !(e->src = malloc((pl->count ? pl->count : 1) * sizeof(*e->src)))) {
		free(e);
		return -ENOMEM;
	}
	snprintf(e->job, sizeof(e->job), "%s", pl->job);
	snprintf(e->node, sizeof(e->node), "rs-group.%u", pl->group);
	e->version = pl->version;
	e->gid = pl->group;
	e->k = pl->k;
	e->m = pl->m;
	e->n = pl->nnodes;
	for (uint32_t i = 0; i < pl->nnodes; i++) {
		e->nodes[pl->nodes[i].member] = pl->nodes[i];
		e->p[pl->nodes[i].member] = ps[pl->nodes[i].member];
	}
	if (pl->count)
		memcpy(e->src, pl->entries, pl->count * sizeof(*e->src));
	e->nsrc = pl->count;
	e->nsh = pl->count; /* one entry per rank */
	e->complete = 1;
	x->v[x->n++] = e;
	return 0;
}

/* Records to drop, once the scan's transaction has ended. */
typedef struct drops {
	ckptd_coordinator *c;
	uint8_t (*key)[CKPTD_COORD_EC_KEY_MAX];
	size_t *len, n, cap;
} drops;

static void drop_later(drops *d, const uint8_t *key, size_t klen)
{
	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 8;
		void *k = realloc(d->key, nc * sizeof(*d->key)), *l = k ? realloc(d->len, nc * sizeof(*d->len)) : NULL;
		if (k)
			d->key = k;
		if (!l)
			return;
		d->len = l;
		d->cap = nc;
	}
	memcpy(d->key[d->n], key, klen);
	d->len[d->n++] = klen;
}

static int restore_cb(void *arg, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen)
{
	drops *d = arg;
	ckptd_coordinator *c = d->c;
	ckptd_msg m;
	const char *dw = NULL;
	char why[200] = "";
	int r = klen && (key[0] == 'g' || key[0] == 'p') ? ckptd_msg_decode(val, vlen, &m, &dw) : -EINVAL;
	if (r == 0 && m.type != CKPTD_MSG_EC_PLAN) {
		ckptd_msg_free(&m);
		r = -EINVAL;
	}
	if (r < 0) {
		CKPTD_WARN(c->log, NULL, NULL, "an rs record in the index cannot be read (%s): dropped",
		           dw ? dw : "not an EC_PLAN of a known kind");
		drop_later(d, key, klen);
		return 0;
	}
	const ckptd_ec_plan *pl = &m.u.ec_plan;
	peer *ps[CKPT_EC_MAX_PIECES] = { 0 };
	for (uint32_t i = 0; i < pl->nnodes && r == 0; i++)
		if (!(ps[pl->nodes[i].member] = kept_peer(c, &pl->nodes[i]))) {
			snprintf(why, sizeof(why), "member %u has no valid node name", pl->nodes[i].member);
			r = -EINVAL;
		}
	char names[600];
	size_t o = 0;
	names[0] = '\0';
	for (unsigned j = 0; r == 0 && j < pl->nnodes && o < sizeof(names); j++)
		o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s", j ? " " : "", ps[j]->node);
	if (r == 0 && key[0] == 'g') {
		if ((r = ckptd__coord_group_restore(c, pl, ps, why, sizeof(why))) == 0)
			CKPTD_INFO(c->log, NULL, NULL, "rs group %u restored from the index (rs:%u+%u): %s", pl->group, pl->k, pl->m,
			           names);
	} else if (r == 0) {
		if ((r = plan_restore(c, pl, ps, why, sizeof(why))) == 0)
			CKPTD_INFO(c->log, NULL, pl->job, "version %llu: rs group %u's finished encode restored from the index "
			           "(rs:%u+%u, %u shards over %s)", (unsigned long long)pl->version, pl->group, pl->k, pl->m,
			           pl->count, names);
	}
	if (r < 0) {
		CKPTD_WARN(c->log, NULL, key[0] == 'p' ? pl->job : NULL, "rs %s %u of the index not restored: %s; dropped",
		           key[0] == 'g' ? "group" : "plan of group", pl->group, why[0] ? why : ckpt_strerror(r));
		drop_later(d, key, klen);
	}
	ckptd_msg_free(&m);
	return 0;
}

void ckptd__coord_ec_restore(ckptd_coordinator *c)
{
	drops d = { .c = c };
	int r = ckptd_coord_ec_each(c->db, restore_cb, &d);
	if (r < 0)
		CKPTD_WARN(c->log, NULL, NULL, "rs records of the index not read: %s", ckpt_strerror(r));
	for (size_t i = 0; i < d.n; i++)
		ckptd_coord_ec_put(c->db, d.key[i], d.len[i], NULL, 0);
	free(d.key);
	free(d.len);
}
