/* What the emergency checkpoints (preempt.c) need of the coordinator: its
 * agents to tell, placement to redo, and whether a version is safe off the
 * noticed nodes. */
#include "coordinator_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void em_broadcast(void *arg, const ckptd_msg *m)
{
	ckptd_coordinator *c = arg;
	for (peer *p = c->peers; p; p = p->next)
		if (p->local || (p->up && p->s))
			ckptd__coord_peer_send(c, p, m);
}

static void em_exclude(void *arg, const char *node)
{
	ckptd_coordinator *c = arg;
	CKPTD_INFO(c->log, node, NULL, "node %s noticed: partner copies are placed elsewhere", node);
	ckptd__coord_place_partners(c);
}

static void em_readmit(void *arg, const char *node)
{
	(void)node;
	ckptd__coord_place_partners(arg);
}

static int em_peer_room(void *arg)
{
	ckptd_coordinator *c = arg;
	if (!c->cfg->peer_replicas)
		return 0;
	for (peer *p = c->peers; p; p = p->next)
		if (p->up && p->peer_bytes && !ckptd_emerg_excluded(c->emerg, p->node))
			return 1;
	return 0;
}

typedef struct safe_acc {
	ckptd_coordinator *c;
	uint8_t *covered;
	uint32_t world;
} safe_acc;

static int safe_cb(void *arg, const ckptd_coord_copy_info *ci)
{
	safe_acc *a = arg;
	/* Shared storage outlives the node that flushed the copy. */
	if (!ci->deleting && ci->rank < a->world &&
	    (ci->tier == CKPT_TIER_SHARED || !ckptd_emerg_excluded(a->c->emerg, ci->node)))
		a->covered[ci->rank] = 1;
	return 0;
}

static int em_safe(void *arg, const char *job, uint64_t version)
{
	ckptd_coordinator *c = arg;
	ckptd_coord_version v;
	ckptd__coord_flush_batch(c);
	if (ckptd_coord_get(c->db, job, version, &v) < 0 || !v.world_size)
		return 0;
	safe_acc a = { c, calloc(v.world_size, 1), v.world_size };
	if (!a.covered)
		return 0;
	int ok = ckptd_coord_copies(c->db, job, version, 0, safe_cb, &a) >= 0;
	for (uint32_t r = 0; ok && r < v.world_size; r++)
		ok = a.covered[r];
	free(a.covered);
	return ok;
}

int ckptd_coordinator_preempt(ckptd_coordinator *c, const ckptd_preempt *p)
{
	ckptd__coord_flush_batch(c); /* commits already reported count */
	return ckptd_emerg_notice(c->emerg, p, ckpt__now_ns());
}

static void em_ended(void *arg, const char *job, const char *node, uint64_t version, int ok)
{
	ckptd__coord_replace_ended(arg, job, node, version, ok);
}

const ckptd_emerg_ops ckptd__coord_emerg_ops = { em_broadcast, em_exclude, em_readmit, em_peer_room,
                                                 em_safe, em_ended };
