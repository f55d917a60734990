/* The peer tier's Reed–Solomon groups on the coordinator (--peer-scheme
 * rs:K+M): which K + M agents form each group, kept across changes of
 * membership so that what a group protects keeps its meaning.
 *
 *   a member that goes down stays in its group and counts as lost: the
 *   group can take M - lost more losses (STATUS, metrics);
 *   once it is declared lost (--agent-grace), the first free node (in no
 *   group, eligible, name order) that shares no failure domain with the
 *   group's other members takes its place, keeping its member index (the
 *   layout of format/ecgroup.h is by index): the group is re-protected as
 *   soon as a replacement registers;
 *   a group that has lost more than M members can protect nothing any
 *   more: it is dissolved and its members are free again;
 *   free nodes form new groups (ckptd/coord/groups.c: at most one member
 *   per failure domain of any kind); what is left over is named in the log
 *   (too few nodes or domains) and keeps partner copies.
 *
 * Eligible: up, not silent, with a peer pool, not noticed for preemption.
 * Groups are kept in the coordinator's index as they change (coord_ec.c,
 * "kept"): a restarted coordinator has them back, members and indices as
 * they were, before any agent says hello (a member that does not come
 * back is lost after --agent-grace and replaced as any). Runs in the event loop, after partner
 * placement, on every change of membership: linear in the nodes (members
 * point at their peer records, which live as long as the coordinator),
 * plus the grouping of the free nodes (ckptd/coord/groups.c). */
#include "coordinator_int.h"

#include "ec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cgroup {
	uint32_t id;
	peer *p[CKPT_EC_MAX_PIECES]; /* by member index */
} cgroup;

struct ckptd_cgroups {
	unsigned k, m;
	char scheme[32];
	cgroup *g;
	size_t ng, cap;
	uint32_t next_id;
	uint32_t ungrouped;
	uint64_t warned_sig; /* the ungrouped set last warned about */
	uint64_t kept_sig;   /* the groups as last written to the index */
	uint32_t *kept;      /* their ids */
	size_t nkept;
};

int ckptd__coord_groups_open(ckptd_coordinator *c, char *err, size_t errcap)
{
	struct ckptd_cgroups *gs = calloc(1, sizeof(*gs));
	if (!gs)
		return -ENOMEM;
	char why[160];
	const char *s = c->cfg->peer_scheme ? c->cfg->peer_scheme : "partner";
	if (ckpt_ec_scheme_parse(s, &gs->k, &gs->m, why, sizeof(why)) < 0) {
		snprintf(err, errcap, "--peer-scheme: %s", why);
		free(gs);
		return -EINVAL;
	}
	snprintf(gs->scheme, sizeof(gs->scheme), "%s", gs->k ? s : "partner");
	c->groups = gs;
	if (gs->k)
		CKPTD_INFO(c->log, NULL, NULL, "peer scheme %s: groups of %u nodes, one per failure domain, any %u may be lost",
		           gs->scheme, gs->k + gs->m, gs->m);
	/* Groups and finished plans from before a restart (plans even under
	 * another scheme now: their versions are still protected by them). */
	ckptd__coord_ec_restore(c);
	return 0;
}

void ckptd__coord_groups_free(ckptd_coordinator *c)
{
	if (!c->groups)
		return;
	free(c->groups->g);
	free(c->groups->kept);
	free(c->groups);
	c->groups = NULL;
}

static int eligible(ckptd_coordinator *c, const peer *p)
{
	return p && p->up && !p->degraded && p->peer_bytes > 0 && !p->spare && /* a free spare: none yet */
	       !ckptd_emerg_excluded(c->emerg, p->node);
}

/* Down past --agent-grace: its copies dropped. */
static int declared_lost(const peer *p)
{
	return !p->up && !p->lost_at_ns;
}

static ckptd_group_node gnode(const peer *p)
{
	ckptd_group_node n = { p->node, { p->host, p->domain, p->sw, p->power }, 1 };
	return n;
}

/* A free node for member j of group g: one sharing no domain with the
 * members that are not lost, the first in name order. */
static peer *replacement(ckptd_coordinator *c, const cgroup *g, unsigned j)
{
	struct ckptd_cgroups *gs = c->groups;
	unsigned w = gs->k + gs->m;
	peer *best = NULL;
	for (peer *p = c->peers; p; p = p->next) {
		if (!eligible(c, p) || p->in_rs_group || (best && strcmp(p->node, best->node) >= 0))
			continue;
		ckptd_group_node a = gnode(p);
		int ok = 1;
		for (unsigned i = 0; i < w && ok; i++) {
			peer *q = i == j ? NULL : g->p[i];
			if (q && !declared_lost(q)) {
				ckptd_group_node b = gnode(q);
				ok = !ckptd_coord_group_clash(&a, &b);
			}
		}
		if (ok)
			best = p;
	}
	return best;
}

static unsigned lost_members(ckptd_coordinator *c, const cgroup *g)
{
	unsigned n = 0, w = c->groups->k + c->groups->m;
	for (unsigned j = 0; j < w; j++)
		n += ckptd__coord_peer_state(g->p[j]) != CKPTD_AGENT_UP;
	return n;
}

static void publish(ckptd_coordinator *c)
{
	struct ckptd_cgroups *gs = c->groups;
	ckptd_metrics_set(c->mx, CKPTD_M_PEER_GROUPS, NULL, NULL, (double)gs->ng);
	ckptd_metrics_set(c->mx, CKPTD_M_PEER_UNGROUPED, NULL, NULL, gs->ungrouped);
	ckptd_metrics_zero(c->mx, CKPTD_M_PEER_GROUP_LOST);
	ckptd_metrics_zero(c->mx, CKPTD_M_PEER_GROUP_LEFT);
	for (size_t i = 0; i < gs->ng; i++) {
		char id[16];
		snprintf(id, sizeof(id), "%u", gs->g[i].id);
		unsigned lost = lost_members(c, &gs->g[i]);
		ckptd_metrics_set(c->mx, CKPTD_M_PEER_GROUP_LOST, id, NULL, lost);
		ckptd_metrics_set(c->mx, CKPTD_M_PEER_GROUP_LEFT, id, NULL, lost < gs->m ? gs->m - lost : 0);
	}
}

/* Members declared lost: replaced where a free node fits; a group past M
 * such losses is dissolved. */
static void repair(ckptd_coordinator *c)
{
	struct ckptd_cgroups *gs = c->groups;
	unsigned w = gs->k + gs->m;
	for (size_t i = 0; i < gs->ng;) {
		cgroup *g = &gs->g[i];
		unsigned gone = 0;
		for (unsigned j = 0; j < w; j++) {
			if (!declared_lost(g->p[j]))
				continue;
			peer *r = replacement(c, g, j);
			if (r) {
				CKPTD_INFO(c->log, r->node, NULL, "rs group %u: %s takes lost member %u's place (%s)", g->id, r->node, j,
				           g->p[j]->node);
				g->p[j]->in_rs_group = 0;
				g->p[j] = r;
				r->in_rs_group = 1;
				r->rs_gid = g->id;
				r->rs_member = j;
			} else {
				gone++;
			}
		}
		if (gone > gs->m) {
			CKPTD_WARN(c->log, NULL, NULL, "rs group %u lost %u of its %u members, more than %u: dissolved", g->id, gone,
			           w, gs->m);
			for (unsigned j = 0; j < w; j++)
				g->p[j]->in_rs_group = 0;
			gs->g[i] = gs->g[--gs->ng];
			continue;
		}
		i++;
	}
}

static int grow(struct ckptd_cgroups *gs, size_t want)
{
	if (want <= gs->cap)
		return 0;
	size_t cap = gs->cap ? gs->cap * 2 : 8;
	while (cap < want)
		cap *= 2;
	cgroup *g = realloc(gs->g, cap * sizeof(*g));
	if (!g)
		return -ENOMEM;
	gs->g = g;
	gs->cap = cap;
	return 0;
}

/* Free eligible nodes into new groups; the rest counted (and named in the
 * log when that set changes). */
static void form(ckptd_coordinator *c)
{
	struct ckptd_cgroups *gs = c->groups;
	unsigned w = gs->k + gs->m;
	size_t n = 0;
	for (peer *p = c->peers; p; p = p->next)
		n += eligible(c, p) && !p->in_rs_group;
	gs->ungrouped = 0;
	if (!n)
		return;
	ckptd_group_node *nodes = calloc(n, sizeof(*nodes));
	peer **ps = calloc(n, sizeof(*ps));
	uint32_t *grp = calloc(n, sizeof(*grp)), *mem = calloc(n, sizeof(*mem));
	size_t k = 0, ng = 0;
	if (!nodes || !ps || !grp || !mem)
		goto out;
	for (peer *p = c->peers; p; p = p->next)
		if (eligible(c, p) && !p->in_rs_group) {
			ps[k] = p;
			nodes[k++] = gnode(p);
		}
	if (ckptd_coord_groups(nodes, n, w, grp, mem, &ng) < 0 || grow(gs, gs->ng + ng) < 0)
		goto out;
	for (size_t i = 0; i < ng; i++) {
		cgroup *g = &gs->g[gs->ng + i];
		memset(g, 0, sizeof(*g));
		g->id = gs->next_id++;
	}
	for (size_t i = 0; i < n; i++)
		if (grp[i] != UINT32_MAX) {
			gs->g[gs->ng + grp[i]].p[mem[i]] = ps[i];
			ps[i]->in_rs_group = 1;
			ps[i]->rs_gid = gs->g[gs->ng + grp[i]].id;
			ps[i]->rs_member = mem[i];
		}
	for (size_t i = 0; i < ng; i++) {
		char line[600];
		size_t o = 0;
		for (unsigned j = 0; j < w && o < sizeof(line); j++)
			o += (size_t)snprintf(line + o, sizeof(line) - o, "%s%s", j ? " " : "", gs->g[gs->ng + i].p[j]->node);
		CKPTD_INFO(c->log, NULL, NULL, "rs group %u formed: %s", gs->g[gs->ng + i].id, line);
	}
	gs->ng += ng;
	/* What the domains left over: said once per such set. */
	uint64_t sig = 1469598103934665603ull;
	char left[600];
	size_t o = 0;
	left[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (grp[i] != UINT32_MAX)
			continue;
		gs->ungrouped++;
		for (const char *q = ps[i]->node; *q; q++)
			sig = (sig ^ (uint8_t)*q) * 1099511628211ull;
		sig = (sig ^ ' ') * 1099511628211ull;
		if (o < sizeof(left))
			o += (size_t)snprintf(left + o, sizeof(left) - o, "%s%s", o ? " " : "", ps[i]->node);
	}
	/* Fewer than a group's width: waiting for nodes (as a cluster comes
	 * up); as many or more: their failure domains keep them apart. */
	if (gs->ungrouped && sig != gs->warned_sig)
		ckptd_logf(c->log, gs->ungrouped < w ? CKPTD_LOG_INFO : CKPTD_LOG_WARN, NULL, NULL,
		           "peer scheme %s: %u node%s in no group (%s): a group needs %u nodes of distinct failure domains "
		           "(host, rack, switch, power)%s; they keep partner copies",
		           gs->scheme, gs->ungrouped, gs->ungrouped == 1 ? "" : "s", left, w,
		           gs->ungrouped < w ? "" : ", which these do not have");
	gs->warned_sig = gs->ungrouped ? sig : 0;
out:
	free(nodes);
	free(ps);
	free(grp);
	free(mem);
}

static uint64_t groups_sig(const struct ckptd_cgroups *gs)
{
	uint64_t h = 1469598103934665603ull;
	unsigned w = gs->k + gs->m;
	for (size_t i = 0; i < gs->ng; i++) {
		for (int b = 0; b < 4; b++)
			h = (h ^ (uint8_t)(gs->g[i].id >> (8 * b))) * 1099511628211ull;
		for (unsigned j = 0; j < w; j++) {
			for (const char *q = gs->g[i].p[j]->node; *q; q++)
				h = (h ^ (uint8_t)*q) * 1099511628211ull;
			h = (h ^ ' ') * 1099511628211ull;
		}
	}
	return h;
}

static size_t group_key(uint8_t *key, uint32_t id)
{
	key[0] = 'g';
	for (int b = 0; b < 4; b++)
		key[1 + b] = (uint8_t)(id >> (8 * (3 - b)));
	return 5;
}

/* The groups into the index when they changed: each as a record, those
 * dissolved removed. */
static void keep(ckptd_coordinator *c)
{
	struct ckptd_cgroups *gs = c->groups;
	uint64_t sig = groups_sig(gs);
	if (sig == gs->kept_sig)
		return;
	unsigned w = gs->k + gs->m;
	uint8_t key[8];
	int err = 0;
	for (size_t i = 0; i < gs->nkept; i++) {
		size_t j;
		for (j = 0; j < gs->ng && gs->g[j].id != gs->kept[i]; j++)
			;
		if (j == gs->ng)
			err |= ckptd__coord_ec_keep(c, key, group_key(key, gs->kept[i]), NULL) < 0;
	}
	uint32_t *ids = malloc((gs->ng ? gs->ng : 1) * sizeof(*ids));
	ckptd_ec_node nodes[CKPT_EC_MAX_PIECES];
	for (size_t i = 0; i < gs->ng; i++) {
		const cgroup *g = &gs->g[i];
		for (unsigned j = 0; j < w; j++) {
			nodes[j] = (ckptd_ec_node){ .member = j };
			snprintf(nodes[j].node, sizeof(nodes[j].node), "%s", g->p[j]->node);
			snprintf(nodes[j].address, sizeof(nodes[j].address), "%s", g->p[j]->address);
		}
		ckptd_ec_plan pl = { .job = "rs", .group = g->id, .k = gs->k, .m = gs->m, .nnodes = w, .nodes = nodes };
		err |= ckptd__coord_ec_keep(c, key, group_key(key, g->id), &pl) < 0;
		if (ids)
			ids[i] = g->id;
	}
	free(gs->kept);
	gs->kept = ids;
	gs->nkept = ids ? gs->ng : 0;
	gs->kept_sig = err || !ids ? 0 : sig; /* a failure: written again at the next change */
}

void ckptd__coord_groups_update(ckptd_coordinator *c)
{
	if (!c->groups || !c->groups->k)
		return;
	ckptd__coord_ec_lost(c); /* before repair(): the lost members are still named */
	repair(c);
	form(c);
	publish(c);
	keep(c);
}

int ckptd__coord_group_restore(ckptd_coordinator *c, const ckptd_ec_plan *pl, peer **ps, char *why, size_t cap)
{
	struct ckptd_cgroups *gs = c->groups;
	unsigned w = gs->k + gs->m;
	if (pl->k != gs->k || pl->m != gs->m) {
		snprintf(why, cap, "a group of rs:%u+%u, the scheme is %s now", pl->k, pl->m, gs->scheme);
		return -EINVAL;
	}
	for (size_t i = 0; i < gs->ng; i++)
		if (gs->g[i].id == pl->group) {
			snprintf(why, cap, "group id %u twice", pl->group);
			return -EINVAL;
		}
	for (unsigned j = 0; j < w; j++)
		if (ps[j]->in_rs_group) {
			snprintf(why, cap, "%s is in rs group %u already", ps[j]->node, ps[j]->rs_gid);
			return -EINVAL;
		}
	uint32_t *ids = realloc(gs->kept, (gs->nkept + 1) * sizeof(*ids));
	if (!ids || grow(gs, gs->ng + 1) < 0) {
		if (ids)
			gs->kept = ids;
		snprintf(why, cap, "no memory");
		return -ENOMEM;
	}
	gs->kept = ids;
	gs->kept[gs->nkept++] = pl->group;
	cgroup *g = &gs->g[gs->ng++];
	memset(g, 0, sizeof(*g));
	g->id = pl->group;
	for (unsigned j = 0; j < w; j++) {
		g->p[j] = ps[j];
		ps[j]->in_rs_group = 1;
		ps[j]->rs_gid = g->id;
		ps[j]->rs_member = j;
	}
	if (g->id >= gs->next_id)
		gs->next_id = g->id + 1;
	gs->kept_sig = groups_sig(gs);
	return 0;
}

int ckptd__coord_group_of(ckptd_coordinator *c, uint32_t gid, peer **out, unsigned *k, unsigned *m)
{
	struct ckptd_cgroups *gs = c->groups;
	for (size_t i = 0; gs && i < gs->ng; i++)
		if (gs->g[i].id == gid) {
			memcpy(out, gs->g[i].p, (gs->k + gs->m) * sizeof(*out));
			*k = gs->k;
			*m = gs->m;
			return 0;
		}
	return -ENOENT;
}

int ckptd__coord_groups_status(ckptd_coordinator *c, ckptd_status_reply *out)
{
	struct ckptd_cgroups *gs = c->groups;
	if (!gs)
		return 0;
	snprintf(out->scheme, sizeof(out->scheme), "%s", gs->scheme);
	if (!gs->k)
		return 0;
	unsigned w = gs->k + gs->m;
	size_t ng = gs->ng;
	if (ng * w > CKPTD_MAX_LIST)
		ng = CKPTD_MAX_LIST / w;
	out->ungrouped = gs->ungrouped;
	if (!ng)
		return 0;
	out->groups = calloc(ng, sizeof(*out->groups));
	out->members = calloc(ng * w, sizeof(*out->members));
	if (!out->groups || !out->members)
		return -ENOMEM;
	for (size_t i = 0; i < ng; i++) {
		const cgroup *g = &gs->g[i];
		unsigned lost = lost_members(c, g);
		out->groups[out->ngroups++] = (ckptd_group_info){ g->id, w, lost, lost < gs->m ? gs->m - lost : 0 };
		for (unsigned j = 0; j < w; j++) {
			ckptd_group_member *e = &out->members[out->nmembers++];
			e->group = g->id;
			snprintf(e->node, sizeof(e->node), "%s", g->p[j]->node);
			e->state = ckptd__coord_peer_state(g->p[j]);
		}
	}
	return 0;
}

void ckptd__coord_groups_status_free(ckptd_status_reply *out)
{
	free(out->groups);
	free(out->members);
	out->groups = NULL;
	out->members = NULL;
	out->ngroups = out->nmembers = 0;
}
