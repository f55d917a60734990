/* The restore that must not look like a new job: a version is committed
 * but this rank reached none of its copies (its node and disk lost, a
 * partition, its partners evicted or gone). One error says where the
 * copies were, from the coordinator's record (SEG_COPIES), so that an
 * operator can bring a node back or restore elsewhere; the rank stops. */
#include "restore.h"
#include "ctx.h"
#include "daemon.h"
#include "wire/proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int ckpt__restore_missed(int err)
{
	switch (-err) {
	case CKPT_ENOVERSION: case CKPT_EUNAVAIL: case ENOENT: case ENOTCONN: case ETIMEDOUT: case ECONNREFUSED:
	case ECONNRESET: case ECONNABORTED: case EHOSTUNREACH: case ENETUNREACH: case EPIPE: case EBUSY:
	case EADDRNOTAVAIL: case EIO: case EPROTO: case EAGAIN:
		return 1;
	}
	return 0;
}

static const char *tier_word(uint32_t t)
{
	return t == CKPT_TIER_LOCAL_MEM ? "local_mem" : t == CKPT_TIER_PEER_MEM ? "peer_mem"
	     : t == CKPT_TIER_LOCAL_DISK ? "local_disk" : t == CKPT_TIER_SHARED ? "shared" : "?";
}

static const char *state_word(uint32_t s)
{
	return s == CKPTD_AGENT_UP ? "up" : s == CKPTD_AGENT_DEGRADED ? "degraded" : "down";
}

/* Appends to buf (cap) what the coordinator knows of the copies; "" left
 * in buf when it cannot be asked. */
static void where_copies(ckpt_ctx *ctx, uint64_t version, char *buf, size_t cap)
{
	ckptd_msg rep;
	size_t n = strlen(buf);
	if (!ctx->daemon || !ckpt__daemon_speaks(ctx, 3) || ckpt__daemon_partners(ctx, CKPTD_SEG_COPIES, version, &rep) < 0) {
		snprintf(buf + n, cap - n, "; the coordinator could not be asked where its copies are");
		return;
	}
	if (!rep.u.partners.count)
		snprintf(buf + n, cap - n, "; the coordinator knows of no live copy of it");
	for (uint32_t i = 0; i < rep.u.partners.count && n + 1 < cap; i++) {
		const ckptd_partner *e = &rep.u.partners.entries[i];
		n += (size_t)snprintf(buf + n, cap - n, "%s%s on %s (%s, %s)", i ? ", " : "; copies: ",
		                      tier_word(e->tier), e->node, e->address, state_word(e->state));
		if (n >= cap)
			n = cap - 1;
	}
	ckptd_msg_free(&rep);
}

int ckpt__restore_lost(ckpt_ctx *ctx, uint64_t version, const char *known_by)
{
	char tried[1200], copies[1536] = "";
	snprintf(tried, sizeof(tried), "%s%s%s%s", ctx->root, ctx->daemon ? ", this node's agent" : "",
	         ctx->shared_dir ? ", the SHARED tree " : "", ctx->shared_dir ? ctx->shared_dir : "");
	where_copies(ctx, version, copies, sizeof(copies));
	LOG_E(&ctx->log, version,
	      "restore: version %llu is COMMITTED (%s says so) but no copy of rank %u's shard could be reached "
	      "from here (tried: %s)%s. This is not a new job: stop, and restart this rank where a copy is reachable "
	      "(bring its node back, heal the network) rather than start from scratch",
	      (unsigned long long)version, known_by, ctx->cfg.rank, tried, copies);
	return -CKPT_EUNREACHABLE;
}
