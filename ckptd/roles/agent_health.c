/* The agent's side of straggler evidence (ckptd/health): the node sampled
 * once a second on the loop, its local ranks watched (their cgroups and
 * step times), and the coordinator's EVIDENCE_REQUEST answered with
 * NODE_EVIDENCE. */
#include "agent_int.h"

#include "health/health.h"

#include <stdio.h>
#include <string.h>

#define HEALTH_TICK_MS 1000

static void health_tick(ckptd_server *srv, void *arg)
{
	(void)srv;
	ckptd_agent *a = arg;
	ckptd_health_sample(a->health, ckpt__now_ns());
}

int ckptd__agent_health_start(ckptd_agent *a, char *err, size_t errcap)
{
	ckptd_health_opts o = { .proc = a->cfg->health_proc, .cgroup = a->cfg->health_cgroup,
	                        .kmsg = a->cfg->health_kmsg };
	int r = ckptd_health_new(&o, &a->health);
	if (r == 0)
		r = ckptd_server_every(a->srv, HEALTH_TICK_MS, health_tick, a);
	if (r < 0) {
		snprintf(err, errcap, "cannot set up the node's health sampling: %s", strerror(-r));
		return r;
	}
	ckptd_health_sample(a->health, ckpt__now_ns());
	return 0;
}

void ckptd__agent_health_stop(ckptd_agent *a)
{
	ckptd_health_free(a->health);
	a->health = NULL;
}

void ckptd__agent_health_rank(ckptd_agent *a, const rank_sess *rs, uint32_t pid, int gone)
{
	if (!a->health)
		return;
	if (gone)
		ckptd_health_rank_gone(a->health, rs->job, rs->rank);
	else
		ckptd_health_rank(a->health, rs->job, rs->rank, pid);
}

void ckptd__agent_health_step(ckptd_agent *a, const ckptd_step_report *r)
{
	if (a->health && r->step_ns)
		ckptd_health_step(a->health, r->job, r->rank, r->step_ns);
}

void ckptd__agent_evidence(ckptd_agent *a, const ckptd_evidence_request *rq)
{
	ckptd_msg m = { .type = CKPTD_MSG_NODE_EVIDENCE };
	ckptd_node_evidence *e = &m.u.node_evidence;
	ckptd_health_evidence(a->health, rq, a->node, ckpt__now_ns(), e);
	e->time_ns = ckpt__wall_ns();
	CKPTD_INFO(a->log, NULL, rq->job, "evidence for straggler rank %u: %s", rq->rank,
	           e->verdict[0] ? e->verdict : "nothing on the node stands out");
	ckptd__agent_link_send(a, &m, FWD_IGNORE, 0);
}
