/* The coordinator's side of persistent stragglers (stragglers.c): asking
 * the straggler's node's agent for evidence, taking its answer, answering
 * STRAGGLERS. */
#include "coordinator_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ckptd_stragglers_ask_fn: EVIDENCE_REQUEST to the agent of node. */
static int ask(void *arg, const char *node, const ckptd_evidence_request *rq)
{
	ckptd_coordinator *c = arg;
	peer *p = ckptd__coord_peer_find(c, node);
	if (!p || !(p->local || (p->up && p->s)))
		return -ENOTCONN;
	if (!p->local && CKPTD_VERSION_MINOR_OF(ckptd_session_version(p->s)) < 4)
		return -EPROTONOSUPPORT;
	ckptd_msg m = { .type = CKPTD_MSG_EVIDENCE_REQUEST, .u.evidence_request = *rq };
	ckptd__coord_peer_send(c, p, &m);
	return 0;
}

static void found(void *arg, const ckptd_node_evidence *ev)
{
	ckptd_coordinator *c = arg;
	if (c->straggler_hook)
		c->straggler_hook(c, ev);
}

int ckptd__coord_stragglers_open(ckptd_coordinator *c)
{
	int r = ckptd_stragglers_new(c->cfg, c->log, c->mx, ask, found, c, &c->stragglers);
	if (r == 0)
		ckptd_steps_on_slow(c->steps, ckptd_stragglers_judged, c->stragglers);
	return r;
}

int ckptd__coord_evidence_in(ckptd_coordinator *c, ckptd_session *s, peer *p, const ckptd_node_evidence *ev)
{
	int r = ckptd_stragglers_evidence(c->stragglers, ev, p->node, ckpt__now_ns());
	if (r == -EPERM)
		CKPTD_WARN(c->log, p->node, ev->job, "node %s sent evidence about rank %u of another node: dropped", p->node,
		           ev->rank);
	if (!s)
		return 0;
	if (r == -EPERM)
		return ckptd_session_send_error(s, CKPTD_ERR_DENIED, "evidence about another node's rank");
	/* Not asked for (any longer: the rank recovered meanwhile): taken, unused. */
	ckptd_msg ok = { .type = CKPTD_MSG_OK };
	return ckptd_session_send(s, &ok, -1);
}

int ckptd__coord_stragglers_query(ckptd_coordinator *c, ckptd_session *s, const ckptd_straggler_query *q)
{
	ckptd_msg rep = { .type = CKPTD_MSG_STRAGGLERS_REPLY };
	int r = ckptd_stragglers_list(c->stragglers, q->job, &rep.u.stragglers_reply);
	if (r < 0)
		return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "out of memory");
	r = ckptd_session_send(s, &rep, -1);
	free(rep.u.stragglers_reply.entries);
	return r;
}

const char *ckptd__coord_evidence(ckptd_coordinator *c, const char *job, uint32_t rank)
{
	return c->stragglers ? ckptd_stragglers_text(c->stragglers, job, rank) : NULL;
}
