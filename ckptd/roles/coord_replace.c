/* --replace-stragglers: a persistent straggler's node handled like a noticed
 * one (the slow-training playbook's last step, acting on the evidence):
 *
 *   found   ── the straggler's evidence (coord_stragglers.c's hook): the
 *              job's ranks on the node remembered, and a PREEMPT notice of
 *              the coordinator's own (source "straggler") for the job and
 *              the node: an emergency checkpoint at a common step on a tier
 *              off the node (preempt.c), the node out of partner placement
 *              and rs groups until its agent says hello again
 *   ended   ── the emergency version safe off the node (EMERGENCY FINAL:
 *              the ranks leave): the decision, a new epoch of kind
 *              straggler-replaced with the node's ranks and the evidence
 *              (EVENT, --on-failure, ckpt events, the recovery timeline),
 *              and a spare told to pull those ranks' state (coord_spares.c)
 *              before the launcher starts them again there; an emergency
 *              given up at its deadline replaces nothing (logged)
 * One replacement per (job, node) at a time; a straggler on a node already
 * being replaced is left to it. */
#include "coordinator_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPLACING_MAX 64
#define RANKS_MAX 4096

typedef struct replacing {
	char job[CKPTD_JOB_MAX + 1];
	char node[CKPTD_NAME_MAX + 1];
	uint32_t rank;
	ckptd_member *m; /* the job's ranks on the node when it was found */
	uint32_t n;
	char why[CKPTD_TEXT_MAX + 1];
} replacing;

struct coord_replace {
	replacing r[REPLACING_MAX];
	size_t n;
};

static replacing *find(struct coord_replace *cr, const char *job, const char *node)
{
	for (size_t i = 0; i < cr->n; i++)
		if (!strcmp(cr->r[i].job, job) && !strcmp(cr->r[i].node, node))
			return &cr->r[i];
	return NULL;
}

static void drop(struct coord_replace *cr, replacing *x)
{
	free(x->m);
	*x = cr->r[--cr->n];
}

static void found(ckptd_coordinator *c, const ckptd_node_evidence *ev)
{
	struct coord_replace *cr = c->replace;
	peer *p = ev->node[0] ? ckptd__coord_peer_find(c, ev->node) : NULL;
	if (!cr || !p || !ev->job[0])
		return;
	if (p->local) {
		CKPTD_WARN(c->log, p->node, ev->job, "persistent straggler rank %u on %s: not replaced (--replace-stragglers): "
		           "the node runs the coordinator itself", ev->rank, p->node);
		return;
	}
	if (find(cr, ev->job, p->node)) {
		CKPTD_INFO(c->log, p->node, ev->job, "persistent straggler rank %u on %s: the node is being replaced already",
		           ev->rank, p->node);
		return;
	}
	if (cr->n == REPLACING_MAX) {
		CKPTD_WARN(c->log, p->node, ev->job, "persistent straggler rank %u on %s: not replaced: %d replacements are "
		           "under way already", ev->rank, p->node, REPLACING_MAX);
		return;
	}
	replacing *x = &cr->r[cr->n];
	memset(x, 0, sizeof(*x));
	snprintf(x->job, sizeof(x->job), "%s", ev->job);
	snprintf(x->node, sizeof(x->node), "%s", p->node);
	x->rank = ev->rank;
	if (!(x->m = calloc(RANKS_MAX, sizeof(*x->m))))
		return;
	x->n = ckptd__coord_node_ranks(c, p, ev->job, x->m, RANKS_MAX);
	snprintf(x->why, sizeof(x->why), "persistent straggler rank %u (%.900s)", ev->rank,
	         ev->text[0] ? ev->text : ev->verdict[0] ? ev->verdict : "no evidence");
	cr->n++;
	ckptd_preempt pn = { .source = CKPTD_NOTICE_SRC_STRAGGLER };
	snprintf(pn.job, sizeof(pn.job), "%s", ev->job);
	snprintf(pn.node, sizeof(pn.node), "%s", p->node);
	snprintf(pn.text, sizeof(pn.text), "persistent straggler rank %u; verdict: %.200s", ev->rank,
	         ev->verdict[0] ? ev->verdict : "none found");
	CKPTD_WARN(c->log, p->node, ev->job, "replacing node %s (--replace-stragglers): persistent straggler rank %u; "
	           "an emergency checkpoint first, the node out of placement", p->node, ev->rank);
	if (ckptd_coordinator_preempt(c, &pn) > 0) {
		ckptd_metrics_add(c->mx, CKPTD_M_STRAGGLER_REPLACEMENTS, ev->job, "started", 1);
		return;
	}
	/* No step could be chosen (the job's ranks do not report steps): the
	 * node is not taken out for nothing. */
	CKPTD_ERROR(c->log, p->node, ev->job, "node %s not replaced: no emergency checkpoint of job %s could be "
	            "started (see above); it stays in placement", p->node, ev->job);
	ckptd_metrics_add(c->mx, CKPTD_M_STRAGGLER_REPLACEMENTS, ev->job, "failed", 1);
	ckptd_emerg_node_back(c->emerg, p->node);
	drop(cr, find(cr, ev->job, p->node));
}

void ckptd__coord_replace_ended(ckptd_coordinator *c, const char *job, const char *node, uint64_t version, int ok)
{
	struct coord_replace *cr = c->replace;
	replacing *x = cr ? find(cr, job, node) : NULL;
	if (!x)
		return; /* a preemption's emergency */
	peer *p = ckptd__coord_peer_find(c, node);
	if (!ok || !p) {
		CKPTD_ERROR(c->log, node, job, "node %s not replaced: the emergency checkpoint (version %llu) was not safe "
		            "off it by its deadline; the ranks left at the deadline, the last committed version stays the "
		            "restore point", node, (unsigned long long)version);
		ckptd_metrics_add(c->mx, CKPTD_M_STRAGGLER_REPLACEMENTS, job, "missed", 1);
		drop(cr, x);
		return;
	}
	char why[CKPTD_TEXT_MAX + 1];
	snprintf(why, sizeof(why), "%.700s; emergency version %llu safe off the node", x->why,
	         (unsigned long long)version);
	ckptd_metrics_add(c->mx, CKPTD_M_STRAGGLER_REPLACEMENTS, job, "replaced", 1);
	ckptd__coord_decide(c, job, CKPTD_FAIL_STRAGGLER, p, x->m, x->n, why);
	drop(cr, x);
	ckptd__coord_spares_node_lost(c, p); /* a spare takes the node's ranks */
}

int ckptd__coord_replace_open(ckptd_coordinator *c)
{
	if (!c->cfg->replace_stragglers)
		return 0;
	if (!(c->replace = calloc(1, sizeof(*c->replace))))
		return -ENOMEM;
	c->straggler_hook = found;
	return 0;
}

void ckptd__coord_replace_close(ckptd_coordinator *c)
{
	struct coord_replace *cr = c->replace;
	if (!cr)
		return;
	while (cr->n)
		drop(cr, &cr->r[cr->n - 1]);
	free(cr);
	c->replace = NULL;
}
