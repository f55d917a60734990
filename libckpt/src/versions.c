/* ckpt_versions_list: the job's versions as the local index has them. */
#include "ctx.h"
#include "format/admin.h"

#include <errno.h>
#include <time.h>

struct list_arg {
	ckpt_version_info *out;
	size_t cap, n;
};

static int list_one(void *arg, uint64_t version, const ckpt_idx_version *v)
{
	struct list_arg *a = arg;
	if (a->n < a->cap) {
		ckpt_version_info *o = &a->out[a->n];
		uint32_t sz = o->size ? o->size : sizeof(*o);
		ckpt_version_info full = {
			.size = sz, .version = version, .state = (ckpt_version_state)v->state,
			.world_size = v->world_size, .shards_done = v->shards_done, .bytes = v->bytes,
			.stored_bytes = v->stored_bytes, .created_ns = v->created_ns,
			.committed_ns = v->committed_ns,
		};
		memcpy(o, &full, CKPT_MIN(sz, sizeof(full)));
	}
	a->n++;
	return 0;
}

int ckpt_versions_list(ckpt_ctx *ctx, ckpt_version_info *out, size_t cap, size_t *count)
{
	if (!ctx || (cap && !out))
		return -EINVAL;
	struct list_arg a = { out, cap, 0 };
	int err = ckpt__index_each_version(ctx->index, ctx->job, list_one, &a);
	if (count)
		*count = a.n;
	return err;
}

int ckpt_version_delete(ckpt_ctx *ctx, uint64_t version)
{
	if (!ctx || version == CKPT_LATEST)
		return -EINVAL;
	if (ctx->daemon) {
		LOG_W(&ctx->log, version, "delete: with a ckptd agent the coordinator deletes versions (its retention, "
		      "or `ckpt rm --daemon`); this one is kept");
		return -ENOTSUP;
	}
	/* A save that is durable leaves the live list just after its waiters
	 * are told: give it that long (space_cv is signalled then). One still
	 * persisting stays. */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 200 * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	int busy = 0;
	pthread_mutex_lock(&ctx->lock);
	for (;;) {
		busy = 0;
		for (ckpt_save_op *l = ctx->live; l; l = l->next_live)
			busy |= l->version == version;
		if (!busy || pthread_cond_timedwait(&ctx->space_cv, &ctx->lock, &until) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&ctx->lock);
	if (busy)
		return -EBUSY;
	ckpt_idx_version v;
	if (ckpt__index_get(ctx->index, ctx->job, version, &v) != 0)
		return -CKPT_ENOVERSION;
	return ckpt__admin_delete(ctx->root, ctx->index, ctx->job, version, &ctx->faults, &ctx->log);
}
