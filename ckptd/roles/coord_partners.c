/* Partner placement for the peer-DRAM tier, on the coordinator: which nodes
 * each node's ranks replicate to (PARTNERS, pushed to every agent when one
 * comes or goes), and where a shard's partner copies are (SEG_WHERE). */
#include "coordinator_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tells every agent that is up where its ranks replicate (PEER_MEM): run
 * whenever an agent comes or goes, after the rs groups are formed again
 * (members of a group get no partners). */
void ckptd__coord_place_partners(ckptd_coordinator *c)
{
	ckptd__coord_groups_update(c); /* the same change of membership regroups rs:K+M */
	size_t n = 0, k = 0;
	for (peer *p = c->peers; p; p = p->next)
		n++;
	/* Two spares after the copies wanted: a rank whose partner fails
	 * mid-write moves on to the next. */
	uint32_t want = c->cfg->peer_replicas, rep = want ? want + 2 : 0;
	ckptd_place_node *nodes = calloc(n ? n : 1, sizeof(*nodes));
	peer **ps = calloc(n ? n : 1, sizeof(*ps));
	size_t *out = calloc(n * (rep ? rep : 1) + 1, sizeof(*out)), *cnt = calloc(n ? n : 1, sizeof(*cnt));
	ckptd_partner *ent = calloc(rep ? rep : 1, sizeof(*ent));
	if (!nodes || !ps || !out || !cnt || !ent)
		goto done;
	for (peer *p = c->peers; p; p = p->next, k++) {
		ps[k] = p;
		/* A degraded (silent) node is no partner: a rank's copy to it
		 * would wait out the peer timeout, then fail over. */
		/* A free spare keeps no one's copies: it may have to take a lost node. */
		nodes[k] = (ckptd_place_node){ p->node, p->domain,
		                               p->up && !p->degraded && p->peer_bytes > 0 && !p->spare &&
		                                   !ckptd_emerg_excluded(c->emerg, p->node) };
	}
	if (ckptd_coord_place(nodes, n, rep, out, cnt) < 0)
		goto done;
	for (size_t i = 0; i < n; i++) {
		if (!ps[i]->up)
			continue;
		ckptd_msg m = { .type = CKPTD_MSG_PARTNERS };
		m.u.partners.replicas = want;
		/* A group member's ranks are protected by its group's parity. */
		m.u.partners.count = ps[i]->in_rs_group ? 0 : (uint32_t)cnt[i];
		if (ps[i]->in_rs_group)
			snprintf(m.u.partners.scheme, sizeof(m.u.partners.scheme), "%s", c->cfg->peer_scheme);
		m.u.partners.entries = ent;
		for (size_t j = 0; j < cnt[i]; j++) {
			const peer *q = ps[out[i * rep + j]];
			memset(&ent[j], 0, sizeof(ent[j]));
			snprintf(ent[j].node, sizeof(ent[j].node), "%s", q->node);
			snprintf(ent[j].address, sizeof(ent[j].address), "%s", q->address);
			snprintf(ent[j].domain, sizeof(ent[j].domain), "%s", q->domain);
		}
		ckptd__coord_peer_send(c, ps[i], &m);
	}
done:
	free(nodes);
	free(ps);
	free(out);
	free(cnt);
	free(ent);
}

#define WHERE_MAX 64 /* a shard has a copy per tier per node: few */

typedef struct where_acc {
	ckptd_coordinator *c;
	uint32_t rank;
	int all;               /* SEG_COPIES: every tier, nodes down too */
	ckptd_partners *out;
} where_acc;

static int where_cb(void *arg, const ckptd_coord_copy_info *ci)
{
	where_acc *w = arg;
	if (ci->rank != w->rank)
		return 1;
	if (ci->deleting || w->out->count == WHERE_MAX || (!w->all && ci->tier != CKPT_TIER_PEER_MEM))
		return 0;
	peer *p = ckptd__coord_peer_find(w->c, ci->node);
	if (!w->all && (!p || !p->up || p->degraded))
		return 0;
	ckptd_partner *e = &w->out->entries[w->out->count++];
	memset(e, 0, sizeof(*e));
	snprintf(e->node, sizeof(e->node), "%s", ci->node);
	if (p && p->address[0]) {
		snprintf(e->address, sizeof(e->address), "%s", p->address);
		snprintf(e->domain, sizeof(e->domain), "%s", p->domain);
	} else {
		snprintf(e->address, sizeof(e->address), "unknown:0");
	}
	if (w->all) {
		e->tier = ci->tier;
		e->state = ckptd__coord_peer_state(p);
	}
	return 0;
}

int ckptd_coordinator_where(ckptd_coordinator *c, const ckptd_segment_request *m, ckptd_partners *out)
{
	ckptd__coord_flush_batch(c);
	memset(out, 0, sizeof(*out));
	snprintf(out->job, sizeof(out->job), "%s", m->job);
	out->version = m->version;
	out->rank = m->rank;
	out->replicas = c->cfg->peer_replicas;
	if (!(out->entries = calloc(WHERE_MAX, sizeof(*out->entries))))
		return -ENOMEM;
	where_acc w = { c, m->rank, m->mode == CKPTD_SEG_COPIES, out };
	int r = ckptd_coord_copies(c->db, m->job, m->version, m->rank, where_cb, &w);
	if (r == -CKPT_ENOVERSION)
		r = 0;
	return r < 0 ? r : 0;
}

