/* What a save's handle tells its caller: ckpt_handle_wait / _test per tier
 * (LOCAL_MEM and PEER_MEM settle before the disk, then wait for the
 * coordinator's commit at that tier), the status, and its release. */
#include "ctx.h"
#include "daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* With op->mu held. */
static void fill_status(ckpt_save_op *op, uint32_t tier, int mem_committed, ckpt_status *st)
{
	if (!st)
		return;
	uint32_t sz = st->size ? st->size : sizeof(*st);
	ckpt_status s = {
		.size = sz, .version = op->version, .tier = tier, .error = op->error,
		.sys_errno = op->sys_errno, .committed = op->committed, .bytes = op->footer.data_bytes,
		.stored_bytes = op->footer.stored_bytes, .stall_ns = op->stall_ns,
		.durable_ns = op->finished ? op->durable_ns : 0,
	};
	/* Every tier's outcome so far, whichever this status is for. */
	if (op->finished)
		(op->error ? &s.tiers_failed : &s.tiers_reached)[0] |= CKPT_TIER_LOCAL_DISK;
	if ((op->tiers & CKPT_TIER_LOCAL_MEM) && op->mem_state)
		(op->mem_state > 0 ? &s.tiers_reached : &s.tiers_failed)[0] |= CKPT_TIER_LOCAL_MEM;
	if ((op->tiers & CKPT_TIER_PEER_MEM) && op->peer_state)
		(op->peer_state > 0 ? &s.tiers_reached : &s.tiers_failed)[0] |= CKPT_TIER_PEER_MEM;
	if (tier == CKPT_TIER_LOCAL_MEM) {
		/* The DRAM copy stands on its own: a disk failure after it was
		 * reported is not its failure. */
		s.error = op->mem_state < 0 ? op->mem_error : 0;
		s.sys_errno = 0;
		s.committed = mem_committed;
		s.stored_bytes = op->mem_state > 0 ? op->seg_bytes : 0;
		s.durable_ns = op->mem_state > 0 ? op->mem_ns : 0;
	} else if (tier == CKPT_TIER_PEER_MEM) {
		s.error = op->peer_state < 0 ? op->peer_error : 0;
		s.sys_errno = 0;
		s.committed = mem_committed;
		s.stored_bytes = op->peer_state > 0 ? op->seg_bytes : 0;
		s.durable_ns = op->peer_state > 0 ? op->peer_ns : 0;
	}
	memcpy(st, &s, CKPT_MIN(sz, sizeof(s)));
}

int ckpt_handle_wait(ckpt_handle *h, uint32_t tier, int64_t timeout_ms, ckpt_status *st)
{
	if (!h)
		return -EINVAL;
	ckpt_save_op *op = h->op;
	if (tier != CKPT_TIER_LOCAL_DISK && !((tier == CKPT_TIER_LOCAL_MEM || tier == CKPT_TIER_PEER_MEM) &&
	                                      (op->tiers & tier)))
		return -EINVAL;
	/* The DRAM tiers: settled (copied or failed) before the disk is done,
	 * then committed when every rank's copy is there. */
	int mem = tier != CKPT_TIER_LOCAL_DISK;
	int peer = tier == CKPT_TIER_PEER_MEM;
	uint64_t t0 = ckpt__now_ns();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (timeout_ms > 0) {
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	/* LOCAL_MEM is settled (reported or failed) before the disk is done. */
	pthread_mutex_lock(&op->mu);
#define SETTLED(op) (peer ? (op)->peer_state != 0 : mem ? (op)->mem_state != 0 : (op)->finished)
	while (!SETTLED(op) && timeout_ms != 0)
		if (timeout_ms < 0)
			pthread_cond_wait(&op->cond, &op->mu);
		else if (pthread_cond_timedwait(&op->cond, &op->mu, &ts) == ETIMEDOUT)
			break;
	int done = SETTLED(op);
#undef SETTLED
	int err = peer ? (op->peer_state < 0 ? op->peer_error : 0) : mem ? (op->mem_state < 0 ? op->mem_error : 0)
	                                                                 : op->error;
	fill_status(op, tier, 0, st);
	pthread_mutex_unlock(&op->mu);
	if (!done)
		return timeout_ms == 0 ? -EAGAIN : -ETIMEDOUT;
	if (err || !mem)
		return err;
	/* Reported: now every rank's copy must be in some node's DRAM. */
	int64_t left = timeout_ms;
	if (timeout_ms > 0) {
		int64_t spent = (int64_t)((ckpt__now_ns() - t0) / 1000000u);
		left = spent >= timeout_ms ? 1 : timeout_ms - spent;
	}
	err = ckpt__daemon_wait_commit(op->ctx, op->version, tier, left);
	if (err == 0 && st) {
		pthread_mutex_lock(&op->mu);
		fill_status(op, tier, 1, st);
		pthread_mutex_unlock(&op->mu);
	}
	return err;
}

int ckpt_handle_test(ckpt_handle *h, uint32_t tier, ckpt_status *st)
{
	return ckpt_handle_wait(h, tier, 0, st);
}

void ckpt_handle_free(ckpt_handle *h)
{
	if (!h)
		return;
	ckpt__op_release(h->op);
	free(h);
}
