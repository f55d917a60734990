/* ckpt_versions_list: the job's versions as the local index has them. */
#include "ctx.h"

#include <errno.h>

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
