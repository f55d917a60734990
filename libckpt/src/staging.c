/* The staging pool's size. Set by the caller, it is allocated when the
 * context opens and never changes. Left to the library (staging_bytes auto,
 * the default), the context opens with what a restore reads through, and
 * the first save that stages more replaces it by a pool that holds every
 * chunk of the state registered then: nobody reads the settings table
 * before their first save, and a pool smaller than the state makes each
 * save wait for the disk (its stall was 4.6-7x a copy of the same tensors
 * for a 1 GiB state in the default 256 MiB). One allocation more, inside
 * the first save only; bounded by staging_max_bytes. */
#include "ctx.h"
#include "peer.h"

#include <errno.h>
#include <unistd.h>

/* Read buffers a restore keeps in flight (restore.c, reshard.c). */
static uint64_t read_slots(const ckpt_config *cfg)
{
	return CKPT_MIN(CKPT_MAX(cfg->io_depth, 1u), 64u) + 1;
}

static uint64_t max_bytes(const ckpt_config *cfg)
{
	if (cfg->staging_max_bytes)
		return cfg->staging_max_bytes;
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t phys = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
	return CKPT_MAX(phys / 8, 256ull << 20);
}

uint64_t ckpt__staging_open_bytes(const ckpt_config *cfg)
{
	if (cfg->staging_bytes)
		return cfg->staging_bytes;
	return read_slots(cfg) * cfg->chunk_bytes;
}

/* Replaces the pool by one of `slots` slots. Nothing holds a slot (the
 * first save, single-threaded use of the context). A pool that cannot be
 * had leaves the old one in place: the save streams through it. */
static int resize(ckpt_ctx *ctx, uint64_t version, uint64_t slots)
{
	uint64_t t0 = ckpt__now_ns();
	ckpt_pool np;
	int err = ckpt__pool_init(&np, slots * ctx->cfg.chunk_bytes, ctx->cfg.chunk_bytes, &ctx->log);
	if (err < 0) {
		LOG_W(&ctx->log, version, "staging pool: cannot allocate %llu MiB for the state (%s); keeping %u slots",
		      (unsigned long long)(slots * ctx->cfg.chunk_bytes >> 20), ckpt_strerror(err), ctx->pool.nslots);
		return 0;
	}
	ckpt__peer_pool_moved(ctx);
	if (ctx->dev)
		ckpt__dev_pool_release(ctx->dev);
	pthread_mutex_lock(&ctx->lock);
	ckpt_pool old = ctx->pool;
	ctx->pool = np;
	pthread_mutex_unlock(&ctx->lock);
	ckpt__pool_fini(&old);
	if (ctx->dev && (err = ckpt__dev_pool_attach(ctx->dev, ctx->pool.base, ctx->pool.map_bytes, ctx->pool.nslots)) < 0)
		return err;
	LOG_I(&ctx->log, version, "staging pool sized from the state (staging_bytes auto): %u slots, %zu MiB, in %llu ms",
	      ctx->pool.nslots, ctx->pool.map_bytes >> 20, (unsigned long long)((ckpt__now_ns() - t0) / 1000000));
	return 0;
}

int ckpt__staging_fit(ckpt_ctx *ctx, uint64_t version, uint64_t slots)
{
	if (ctx->pool_auto && slots) {
		ctx->pool_auto = 0;
		uint64_t cap = CKPT_MAX(max_bytes(&ctx->cfg) / ctx->cfg.chunk_bytes, read_slots(&ctx->cfg));
		/* A little more than this save: a state's pickled objects and small
		 * regions grow a chunk or two over a run (optimizer bookkeeping,
		 * callbacks' state), and each would then stream. */
		uint64_t grown = slots + CKPT_MAX(slots / 16, 2u);
		uint64_t want = CKPT_MIN(CKPT_MAX(grown, read_slots(&ctx->cfg)), CKPT_MIN(cap, 1ull << 24));
		pthread_mutex_lock(&ctx->lock);
		int idle = !ctx->live && ctx->pool.nfree == ctx->pool.nslots;
		pthread_mutex_unlock(&ctx->lock);
		if (want > ctx->pool.nslots && idle)
			CKPT_TRY(resize(ctx, version, want));
	}
	ctx->pool_need = slots;
	if (slots > ctx->pool.nslots && ctx->cfg.pool_policy == CKPT_POOL_WAIT && !ctx->pool_warned) {
		ctx->pool_warned = 1;
		uint64_t need = slots * ctx->cfg.chunk_bytes, have = (uint64_t)ctx->pool.nslots * ctx->cfg.chunk_bytes;
		LOG_W(&ctx->log, version, "this save stages %llu MiB (%llu chunks) through a staging pool of %llu MiB: it "
		      "waits for the disk to free slots, its stall includes disk time; set staging_bytes "
		      "(CKPT_STAGING_BYTES) to at least %lluM%s (logged once)",
		      (unsigned long long)(need >> 20), (unsigned long long)slots, (unsigned long long)(have >> 20),
		      (unsigned long long)((need + (1u << 20) - 1) >> 20),
		      ctx->cfg.staging_bytes ? "" : ", or staging_max_bytes (CKPT_STAGING_MAX_BYTES), which bounds auto");
	}
	return 0;
}

int ckpt_staging_size(ckpt_ctx *ctx, uint64_t *pool_bytes, uint64_t *need_bytes)
{
	if (!ctx)
		return -EINVAL;
	if (pool_bytes)
		*pool_bytes = (uint64_t)ctx->pool.nslots * ctx->pool.slot_bytes;
	if (need_bytes)
		*need_bytes = ctx->pool_need * ctx->cfg.chunk_bytes;
	return 0;
}
