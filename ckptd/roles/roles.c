/* Wires the roles into the server core: one handler per message type that
 * routes by who is asking (a rank on the Unix socket goes to the agent; an
 * agent or the CLI goes to the coordinator), and the STATUS reply both
 * contribute to. */
#include "roles_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ckptd_roles {
	const ckptd_config *cfg;
	ckptd_coordinator *coord;
	ckptd_agent *agent;
};

static int route(ckptd_server *srv, ckptd_session *s, const ckptd_msg *m, void *arg)
{
	(void)srv;
	ckptd_roles *r = arg;
	int from_rank = ckptd_session_role(s) == CKPTD_ROLE_RANK;
	int from_cli = ckptd_session_role(s) == CKPTD_ROLE_CLI;
	int from_agent = ckptd_session_role(s) == CKPTD_ROLE_AGENT;
	switch (m->type) {
	case CKPTD_MSG_SEGMENT_REQUEST:
		/* SEG_WHERE passed on by a rank's agent. */
		if (from_agent && r->coord)
			return ckptd_coordinator_handle(r->coord, s, m);
		/* fall through */
	case CKPTD_MSG_REGISTER_RANK:
	case CKPTD_MSG_SEGMENT_RELEASE:
	case CKPTD_MSG_VERIFY:
	case CKPTD_MSG_PEER_LEASE:
	case CKPTD_MSG_PEER_COMMIT:
		if (r->agent)
			return ckptd_agent_handle(r->agent, s, m);
		break;
	case CKPTD_MSG_SHARD_DONE:
	case CKPTD_MSG_STEP_REPORT:
	case CKPTD_MSG_LIST_VERSIONS:
	case CKPTD_MSG_PREEMPT:
		if (from_rank && r->agent)
			return ckptd_agent_handle(r->agent, s, m);
		if (!from_rank && r->coord)
			return ckptd_coordinator_handle(r->coord, s, m);
		/* The tool on an agent-only daemon: the agent passes it on. */
		if (from_cli && r->agent && (m->type == CKPTD_MSG_LIST_VERSIONS || m->type == CKPTD_MSG_PREEMPT))
			return ckptd_agent_handle(r->agent, s, m);
		break;
	case CKPTD_MSG_AGENT_HELLO:
	case CKPTD_MSG_AGENT_INVENTORY:
	case CKPTD_MSG_DELETE_VERSION:
	case CKPTD_MSG_GC:
	case CKPTD_MSG_SHOW_VERSION:
	case CKPTD_MSG_STEP_STATS:
	case CKPTD_MSG_GOODPUT:
	case CKPTD_MSG_STRAGGLERS:
	case CKPTD_MSG_NODE_EVIDENCE:
	case CKPTD_MSG_COPIES_GONE:
	case CKPTD_MSG_RANKS:
	case CKPTD_MSG_EVENTS:
	case CKPTD_MSG_EC_DONE:
	case CKPTD_MSG_SPARE_DONE:
	case CKPTD_MSG_RECOVERIES:
		if (r->coord)
			return ckptd_coordinator_handle(r->coord, s, m);
		/* Questions the tool asks an agent-only daemon: it passes them on. */
		if (from_cli && r->agent && m->type != CKPTD_MSG_COPIES_GONE && m->type != CKPTD_MSG_GC &&
		    m->type != CKPTD_MSG_NODE_EVIDENCE && m->type != CKPTD_MSG_RANKS && m->type != CKPTD_MSG_EVENTS &&
		    m->type != CKPTD_MSG_EC_DONE && m->type != CKPTD_MSG_SPARE_DONE && m->type != CKPTD_MSG_RECOVERIES)
			return ckptd_agent_handle(r->agent, s, m);
		break;
	case CKPTD_MSG_RANK_LEAVE:
		if (from_rank && r->agent)
			return ckptd_agent_handle(r->agent, s, m);
		break;
	case CKPTD_MSG_HEARTBEAT:
		/* An agent's to its coordinator, a rank's to its agent: each side
		 * notes that the other is alive. */
		if (from_agent && r->coord)
			return ckptd_coordinator_handle(r->coord, s, m);
		if (from_rank && r->agent)
			return ckptd_agent_handle(r->agent, s, m);
		{
			ckptd_msg ok = { .type = CKPTD_MSG_OK };
			return ckptd_session_send(s, &ok, -1);
		}
	default:
		break;
	}
	return ckptd_session_send_error(s, CKPTD_ERR_UNSUPPORTED, "this daemon's role does not handle that message");
}

static int status(ckptd_server *srv, ckptd_session *s, const ckptd_msg *req, void *arg)
{
	ckptd_roles *r = arg;
	const char *sjob = ckptd_session_job(s);
	ckptd_msg m = { .type = CKPTD_MSG_STATUS_REPLY };
	ckptd_status_reply *o = &m.u.status_reply;
	snprintf(o->node, sizeof(o->node), "%s", ckptd_server_node(srv));
	o->roles = r->cfg->roles;
	if (r->agent)
		ckptd_agent_pool_stats(r->agent, &o->pool_bytes, &o->pool_used);
	if (r->coord) {
		const char *job = sjob[0] ? sjob : req->u.status.job;
		int e = ckptd_coordinator_status(r->coord, job, o);
		if (e < 0) {
			free(o->entries);
			free(o->tier_stats);
			ckptd__coord_groups_status_free(o);
			free(o->epochs);
			free(o->recoveries);
			return e;
		}
		/* DEGRADED is 1.3's: an older peer would refuse the whole reply. */
		if (CKPTD_VERSION_MINOR_OF(ckptd_session_version(s)) < 3)
			for (uint32_t i = 0; i < o->count; i++)
				if (o->entries[i].state == CKPTD_AGENT_DEGRADED)
					o->entries[i].state = CKPTD_AGENT_UP;
	}
	int e = ckptd_session_send(s, &m, -1);
	free(o->entries);
	free(o->tier_stats);
	ckptd__coord_groups_status_free(o);
	free(o->epochs);
	free(o->recoveries);
	return e;
}

int ckptd_roles_start(ckptd_server *srv, const ckptd_config *cfg, const ckptd_secret *cluster,
                      const ckptd_log *log, ckptd_roles **out, char *err, size_t errcap)
{
	int r;
	*out = NULL;
	if (!cfg->root) {
		snprintf(err, errcap, "--root is required: the roles keep their indexes there");
		return -EINVAL;
	}
	if ((cfg->roles & CKPTD_SERVES_AGENT) && !cfg->socket) {
		snprintf(err, errcap, "--socket is required for the agent role (local ranks connect there)");
		return -EINVAL;
	}
	if (cfg->roles == CKPTD_SERVES_AGENT && !cfg->coordinator) {
		snprintf(err, errcap, "--coordinator is required for --role agent");
		return -EINVAL;
	}
	if (cfg->roles == CKPTD_SERVES_COORDINATOR && !cfg->listen) {
		snprintf(err, errcap, "--listen is required for --role coordinator (agents connect there)");
		return -EINVAL;
	}
	ckptd_roles *ro = calloc(1, sizeof(*ro));
	if (!ro)
		return -ENOMEM;
	ro->cfg = cfg;
	if ((cfg->roles & CKPTD_SERVES_COORDINATOR) &&
	    (r = ckptd_coordinator_new(srv, cfg, log, &ro->coord, err, errcap)) < 0)
		goto fail;
	if ((cfg->roles & CKPTD_SERVES_AGENT) &&
	    (r = ckptd_agent_new(srv, cfg, cluster, log, ro->coord, &ro->agent, err, errcap)) < 0)
		goto fail;
	static const uint16_t types[] = {
		CKPTD_MSG_REGISTER_RANK, CKPTD_MSG_SEGMENT_REQUEST, CKPTD_MSG_SHARD_DONE,  CKPTD_MSG_LIST_VERSIONS,
		CKPTD_MSG_AGENT_HELLO,   CKPTD_MSG_AGENT_INVENTORY, CKPTD_MSG_DELETE_VERSION,
		CKPTD_MSG_SEGMENT_RELEASE, CKPTD_MSG_GC, CKPTD_MSG_SHOW_VERSION, CKPTD_MSG_COPIES_GONE, CKPTD_MSG_VERIFY,
		CKPTD_MSG_STEP_REPORT, CKPTD_MSG_STEP_STATS, CKPTD_MSG_GOODPUT, CKPTD_MSG_PEER_LEASE, CKPTD_MSG_PEER_COMMIT,
		CKPTD_MSG_PREEMPT, CKPTD_MSG_HEARTBEAT, CKPTD_MSG_STRAGGLERS, CKPTD_MSG_NODE_EVIDENCE,
		CKPTD_MSG_RANKS, CKPTD_MSG_RANK_LEAVE, CKPTD_MSG_EVENTS,
		CKPTD_MSG_EC_DONE, CKPTD_MSG_SPARE_DONE, CKPTD_MSG_RECOVERIES,
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if ((r = ckptd_server_on(srv, types[i], route, ro)) < 0)
			goto fail;
	if ((r = ckptd_server_on(srv, CKPTD_MSG_STATUS, status, ro)) < 0)
		goto fail;
	*out = ro;
	return 0;
fail:
	ckptd_roles_free(ro);
	return r;
}

void ckptd_roles_free(ckptd_roles *r)
{
	if (!r)
		return;
	ckptd_agent_free(r->agent);
	ckptd_coordinator_free(r->coord);
	free(r);
}
