/* Context life cycle and regions. */
#include "ctx.h"
#include "base/dirs.h"
#include "format/admin.h"
#include "daemon.h"
#include "peer.h"
#include "preempt.h"
#include "config.h"
#include "ckpt_kernels.h"

#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

uint64_t ckpt__lineage(uint64_t incarnation, uint64_t restored_plus_one)
{
	uint8_t b[16];
	ckpt__put_le64(b, incarnation);
	ckpt__put_le64(b + 8, restored_plus_one);
	return ckpt_kern_hash(b, sizeof(b));
}

/* ------------------------------------------------------------- open */

/* config `interval`: NULL/"off" 0, "N" 1 (every N steps), "auto" 2. */
static int parse_interval(const ckpt_config *c, int *mode, uint64_t *steps)
{
	const char *s = c->size >= offsetof(ckpt_config, interval) + sizeof(c->interval) ? c->interval : NULL;
	*mode = 0;
	*steps = 0;
	if (!s || !*s || !strcmp(s, "off"))
		return 0;
	if (!strcmp(s, "auto")) {
		*mode = 2;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v == 0 || s[0] == '-')
		return -CKPT_ECONFIG;
	*mode = 1;
	*steps = v;
	return 0;
}

static int check_config(const ckpt_config *c, const ckpt_logger *lg)
{
	int mode;
	uint64_t steps;
	if (parse_interval(c, &mode, &steps) < 0) {
		LOG_E(lg, CKPT_NO_VERSION, "config: interval '%s': off, a number of steps, or auto", c->interval);
		return -CKPT_ECONFIG;
	}
	if (c->size < offsetof(ckpt_config, faults)) {
		LOG_E(lg, CKPT_NO_VERSION, "config: size field not set (use ckpt_config_init)");
		return -CKPT_ECONFIG;
	}
	if (ckpt__job_valid(c->job_id) < 0) {
		LOG_E(lg, CKPT_NO_VERSION, "config: job id '%s' invalid: 1-64 of [A-Za-z0-9._-], not starting with '.'",
		      c->job_id ? c->job_id : "(none)");
		return -CKPT_ENAME;
	}
	if (!c->root || !*c->root) {
		LOG_E(lg, CKPT_NO_VERSION, "config: root directory not set (CKPT_ROOT)");
		return -CKPT_ECONFIG;
	}
	if (c->world_size == 0 || c->rank >= c->world_size) {
		LOG_E(lg, CKPT_NO_VERSION, "config: rank %u must be below world size %u", c->rank, c->world_size);
		return -CKPT_ECONFIG;
	}
	if (c->chunk_bytes < CKPT_FMT_MIN_CHUNK || c->chunk_bytes > CKPT_FMT_MAX_CHUNK ||
	    c->chunk_bytes % CKPT_ALIGN) {
		LOG_E(lg, CKPT_NO_VERSION, "config: chunk_bytes %llu must be a multiple of 4096 in 64 KiB..256 MiB",
		      (unsigned long long)c->chunk_bytes);
		return -CKPT_ECONFIG;
	}
	if (c->staging_bytes < c->chunk_bytes) {
		LOG_E(lg, CKPT_NO_VERSION, "config: staging_bytes %llu smaller than one chunk",
		      (unsigned long long)c->staging_bytes);
		return -CKPT_ECONFIG;
	}
	/* Older callers' structs end before `daemon`: they run embedded. */
	const char *daemon = c->size >= offsetof(ckpt_config, token_file) ? c->daemon : NULL;
	uint32_t avail = CKPT_TIER_LOCAL_DISK | (daemon && *daemon ? CKPT_TIER_LOCAL_MEM | CKPT_TIER_PEER_MEM : 0u);
	if (c->tiers & ~avail || !(c->tiers & CKPT_TIER_LOCAL_DISK)) {
		LOG_E(lg, CKPT_NO_VERSION, "config: tiers 0x%x: %s", c->tiers,
		      daemon && *daemon ? "local_mem, peer_mem and local_disk are available (local_disk required)"
		                        : "without a ckptd daemon only local_disk is available");
		return -CKPT_ECONFIG;
	}
	if (c->io_depth == 0 || c->io_depth > 1024 || c->workers == 0 || c->workers > 64) {
		LOG_E(lg, CKPT_NO_VERSION, "config: io_depth must be 1..1024 and workers 1..64");
		return -CKPT_ECONFIG;
	}
	if ((unsigned)c->pool_policy > CKPT_POOL_SKIP) {
		LOG_E(lg, CKPT_NO_VERSION, "config: pool_policy invalid");
		return -CKPT_ECONFIG;
	}
	return 0;
}

static int probe_direct(const char *root)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/.direct-probe.%d", root, (int)getpid());
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	close(fd);
	unlink(p);
	return 1;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

int ckpt_ctx_open(const ckpt_config *cfg, ckpt_ctx **out)
{
	if (!cfg || !out)
		return -EINVAL;
	*out = NULL;
	ckpt_logger lg;
	ckpt__logger_init(&lg, cfg->job_id, cfg->rank);
	CKPT_TRY(check_config(cfg, &lg));
	ckpt_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	int err;
	memcpy(&ctx->cfg, cfg, CKPT_MIN(cfg->size, sizeof(ctx->cfg)));
	ctx->cfg.size = sizeof(ctx->cfg);
	ctx->cfg.owned_strings = NULL;
	ctx->job = strdup(cfg->job_id);
	ctx->root = strdup(cfg->root);
	ctx->backend_name = dup_or_null(cfg->backend);
	/* An empty daemon address means none, as an unset variable does. */
	if (ctx->cfg.daemon && *ctx->cfg.daemon)
		ctx->daemon_addr = strdup(ctx->cfg.daemon);
	ctx->token_file = dup_or_null(ctx->cfg.token_file);
	if (!ctx->job || !ctx->root || (cfg->backend && !ctx->backend_name) ||
	    (ctx->cfg.daemon && *ctx->cfg.daemon && !ctx->daemon_addr) || (ctx->cfg.token_file && !ctx->token_file)) {
		err = -ENOMEM;
		goto fail;
	}
	ctx->cfg.job_id = ctx->job;
	ctx->cfg.root = ctx->root;
	ctx->cfg.backend = ctx->backend_name;
	ctx->cfg.daemon = ctx->daemon_addr;
	ctx->cfg.token_file = ctx->token_file;
	ctx->cfg.faults = NULL;
	parse_interval(cfg, &ctx->interval_mode, &ctx->interval_steps);
	ctx->cfg.interval = NULL; /* not ours to keep: parsed above */
	if (ckpt__parse_order(ctx->cfg.restore_order ? ctx->cfg.restore_order : CKPT__DEFAULT_RESTORE_ORDER,
	                      ctx->restore_order) < 0) {
		LOG_E(&lg, CKPT_NO_VERSION,
		      "restore_order '%s': want a comma list of local_mem, local_disk, peer_mem, shared",
		      ctx->cfg.restore_order);
		err = -CKPT_ECONFIG;
		goto fail;
	}
	ctx->cfg.restore_order = NULL; /* parsed above */
	ctx->npreempt_sigs = ckpt__preempt_parse_signals(ctx->cfg.preempt_signals ? ctx->cfg.preempt_signals : "TERM,USR1",
	                                                 ctx->preempt_sigs, 8);
	if (ctx->npreempt_sigs < 0) {
		LOG_E(&lg, CKPT_NO_VERSION, "preempt_signals '%s': want a comma list of TERM, USR1, USR2, INT, HUP",
		      ctx->cfg.preempt_signals);
		err = -CKPT_ECONFIG;
		goto fail;
	}
	ctx->cfg.preempt_signals = NULL;
	if (!ctx->cfg.preempt_grace_ms)
		ctx->cfg.preempt_grace_ms = 30000;
	/* Older callers' structs end before shared_dir. */
	if (cfg->size >= offsetof(ckpt_config, shared_dir) + sizeof(cfg->shared_dir) && cfg->shared_dir &&
	    *cfg->shared_dir && !(ctx->shared_dir = strdup(cfg->shared_dir))) {
		err = -ENOMEM;
		goto fail;
	}
	ctx->cfg.shared_dir = ctx->shared_dir;
	if (!ctx->cfg.peer_timeout_ms)
		ctx->cfg.peer_timeout_ms = 30000;
	ctx->log = lg;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->step_mu, NULL);
	pthread_cond_init(&ctx->work_cv, NULL);
	pthread_cond_init(&ctx->space_cv, NULL);
	pthread_cond_init(&ctx->notice_cv, NULL);
	if ((err = ckpt__faults_parse(&ctx->faults, cfg->faults)) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "config: fault spec '%s' invalid", cfg->faults);
		goto fail;
	}
	if ((err = ckpt__mkdir_p(ctx->root, 0700)) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "cannot create root %s: %s", ctx->root, ckpt_strerror(err));
		goto fail;
	}
	{
		/* The job's directory and every parent up to the root are made
		 * durable once here; each save then syncs only what it adds. */
		char jdir[4200], rel[128];
		snprintf(jdir, sizeof(jdir), "%s/jobs/%s", ctx->root, ctx->job);
		snprintf(rel, sizeof(rel), "jobs/%s", ctx->job);
		/* Not followed below the root: a symlinked jobs/ or job directory
		 * would take every save somewhere else. */
		int jfd = ckpt__dir_open_below(ctx->root, rel, 1, 0700);
		if (jfd == -ELOOP || jfd == -ENOTDIR) {
			LOG_E(&ctx->log, CKPT_NO_VERSION, "cannot use %s: it, or jobs/ above it, is a symlink or not a "
			      "directory; not followed", jdir);
			err = -ENOTDIR;
			goto fail;
		}
		if (jfd < 0) {
			err = jfd;
			LOG_E(&ctx->log, CKPT_NO_VERSION, "cannot create %s: %s", jdir, ckpt_strerror(err));
			goto fail;
		}
		close(jfd);
		ckpt__fsync_parent(jdir);
		snprintf(jdir, sizeof(jdir), "%s/jobs", ctx->root);
		ckpt__fsync_parent(jdir);
		ckpt__fsync_parent(ctx->root);
	}
	ctx->direct_ok = cfg->direct_io && probe_direct(ctx->root);
	if (cfg->direct_io && !ctx->direct_ok)
		LOG_I(&ctx->log, CKPT_NO_VERSION, "O_DIRECT not supported under %s; using buffered I/O", ctx->root);
	if ((err = ckpt__index_open(ctx->root, &ctx->log, &ctx->index)) < 0)
		goto fail;
	if ((err = ckpt__pool_init(&ctx->pool, cfg->staging_bytes, cfg->chunk_bytes, &ctx->log)) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "cannot allocate a staging pool of %llu bytes: %s",
		      (unsigned long long)cfg->staging_bytes, ckpt_strerror(err));
		goto fail;
	}
	if (cfg->compress) {
		ctx->ncbufs = cfg->io_depth + cfg->workers;
		ctx->cbuf_bytes = CKPT_ALIGN_UP(ckpt_kern_compress_bound(cfg->chunk_bytes), CKPT_ALIGN);
		ctx->cbufs = calloc(ctx->ncbufs, sizeof(*ctx->cbufs));
		ctx->cbuf_free = calloc(ctx->ncbufs, sizeof(int));
		if (!ctx->cbufs || !ctx->cbuf_free) {
			err = -ENOMEM;
			goto fail;
		}
		for (uint32_t i = 0; i < ctx->ncbufs; i++) {
			if (posix_memalign((void **)&ctx->cbufs[i], CKPT_ALIGN, ctx->cbuf_bytes)) {
				err = -ENOMEM;
				goto fail;
			}
			memset(ctx->cbufs[i], 0, ctx->cbuf_bytes); /* fault in now, not during a save */
			ctx->cbuf_free[ctx->cbuf_nfree++] = (int)i;
		}
	}
	ckpt_backend_params bp = { sizeof(bp), cfg->io_depth + 4 };
	int fell_back, uerr;
	if ((err = ckpt_backend_open(ctx->backend_name, &bp, &ctx->backend, &fell_back, &uerr)) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "cannot open disk backend '%s': %s",
		      ctx->backend_name ? ctx->backend_name : "auto", ckpt_strerror(err));
		goto fail;
	}
	if (fell_back)
		LOG_W(&ctx->log, CKPT_NO_VERSION, "io_uring unavailable (%s); falling back to pwrite",
		      ckpt_strerror(uerr));
	/* A process that died mid-deletion left versions marked DELETING. */
	ckpt__admin_finish_deletes(ctx->root, ctx->index, ctx->job, &ctx->faults, &ctx->log);
	ctx->lineage = ckpt__lineage(cfg->incarnation, 0);
	/* On a small machine the workers would take the CPU and the memory
	 * bandwidth the snapshot copy needs, and the caller waits longer. */
	ctx->overlap = cfg->snapshot_overlap >= 0 ? cfg->snapshot_overlap
	                                          : sysconf(_SC_NPROCESSORS_ONLN) > (long)cfg->workers + 1;
	/* The handshake happens here, before the io thread takes the link over. */
	if (ctx->daemon_addr && (err = ckpt__daemon_open(ctx)) < 0)
		goto fail;
	if (cfg->tiers & CKPT_TIER_LOCAL_MEM) {
		ctx->mem_tier = ckpt__daemon_segments(ctx);
		ctx->mem_unavail = ctx->mem_tier ? 0 : -CKPT_EUNAVAIL;
		/* Unreachable agents were reported by ckpt__daemon_open. */
		if (ctx->daemon && !ctx->mem_tier)
			LOG_W(&ctx->log, CKPT_NO_VERSION,
			      "LOCAL_MEM skipped: %s is a TCP address, and DRAM segments are handed over the agent's "
			      "Unix socket only; saves go to local_disk",
			      ctx->daemon_addr);
	}
	if ((err = ckpt__pipeline_start(ctx)) < 0 || (err = ckpt__peer_start(ctx)) < 0)
		goto fail;
	*out = ctx;
	return 0;
fail:
	ckpt_ctx_close(ctx);
	return err;
}

int ckpt_ctx_close(ckpt_ctx *ctx)
{
	if (!ctx)
		return 0;
	ckpt__preempt_disarm(ctx);
	ckpt__pipeline_stop(ctx);
	ckpt__peer_stop(ctx); /* after the io thread: nothing is queued any more */
	ckpt__daemon_steps(ctx, 1); /* the last steps count too (the io thread is gone) */
	ckpt__daemon_close(ctx);
	if (ctx->dev) {
		ckpt_fence(ctx);
		for (uint32_t i = 0; i < ctx->nregions; i++)
			if (ctx->regions[i].device == CKPT_DEVICE_CUDA)
				ckpt__dev_region_fini(ctx->dev, &ctx->regions[i].dev);
		ckpt__dev_close(ctx->dev);
	}
	if (ctx->backend)
		ctx->backend->ops->close(ctx->backend);
	ckpt__index_close(ctx->index);
	ckpt__pool_fini(&ctx->pool);
	for (uint32_t i = 0; ctx->cbufs && i < ctx->ncbufs; i++)
		free(ctx->cbufs[i]);
	free(ctx->cbufs);
	free(ctx->cbuf_free);
	for (uint32_t i = 0; i < ctx->nregions; i++)
		free(ctx->regions[i].name);
	free(ctx->regions);
	free(ctx->job);
	free(ctx->root);
	free(ctx->backend_name);
	free(ctx->daemon_addr);
	free(ctx->token_file);
	free(ctx->shared_dir);
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->step_mu);
	pthread_cond_destroy(&ctx->notice_cv);
	pthread_cond_destroy(&ctx->work_cv);
	pthread_cond_destroy(&ctx->space_cv);
	free(ctx);
	return 0;
}

/* ------------------------------------------------------------- regions */

void ckpt_region_desc_init(ckpt_region_desc *d, const char *name, void *ptr, uint64_t bytes)
{
	memset(d, 0, sizeof(*d));
	d->size = sizeof(*d);
	d->name = name;
	d->ptr = ptr;
	d->bytes = bytes;
	d->dtype = CKPT_DTYPE_BYTES;
	d->device = CKPT_DEVICE_HOST;
}

int ckpt_region_add(ckpt_ctx *ctx, const ckpt_region_desc *d)
{
	if (!ctx || !d || d->size < sizeof(*d))
		return -EINVAL;
	size_t nl = d->name ? strnlen(d->name, CKPT_MAX_NAME + 1) : 0;
	if (ckpt__region_name_valid(d->name, nl) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "region name invalid: 1-255 bytes, no '/', not '.' or '..'");
		return -CKPT_ENAME;
	}
	for (uint32_t i = 0; i < ctx->nregions; i++)
		if (!strcmp(ctx->regions[i].name, d->name)) {
			LOG_E(&ctx->log, CKPT_NO_VERSION, "region '%s' already registered", d->name);
			return -CKPT_ENAME;
		}
	if (d->device != CKPT_DEVICE_HOST && d->device != CKPT_DEVICE_CUDA)
		return -EINVAL;
	if (d->device == CKPT_DEVICE_CUDA && !ctx->dev) {
		int err = ckpt__dev_open(&ctx->dev, ctx->pool.base, ctx->pool.map_bytes, ctx->pool.nslots, &ctx->log);
		if (err < 0) {
			LOG_E(&ctx->log, CKPT_NO_VERSION, "region '%s': CUDA regions need %s", d->name,
			      err == -ENOTSUP ? "a build with CUDA" : "a usable CUDA device");
			return err;
		}
		ckpt__dev_stream_set(ctx->dev, ctx->cuda_stream);
	}
	if (d->device == CKPT_DEVICE_CUDA && ckpt__dev_check_ptr(ctx->dev, d->ptr, d->bytes) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "region '%s': not device memory of the current CUDA device", d->name);
		return -EINVAL;
	}
	if (ckpt_dtype_size(d->dtype) == 0 || d->ndim > CKPT_MAX_DIMS || (d->bytes && !d->ptr))
		return -EINVAL;
	if (d->ndim) {
		uint64_t n = 1;
		for (uint32_t k = 0; k < d->ndim; k++) {
			if (d->offsets[k] > d->global_shape[k] || d->extents[k] > d->global_shape[k] - d->offsets[k]) {
				LOG_E(&ctx->log, CKPT_NO_VERSION, "region '%s': dim %u: offset+extent beyond global shape",
				      d->name, k);
				return -EINVAL;
			}
			if (d->extents[k] && n > UINT64_MAX / d->extents[k])
				return -EINVAL;
			n *= d->extents[k];
		}
		if (d->dtype != CKPT_DTYPE_BYTES && n * ckpt_dtype_size(d->dtype) != d->bytes) {
			LOG_E(&ctx->log, CKPT_NO_VERSION, "region '%s': %llu bytes but extents give %llu elements of %zu",
			      d->name, (unsigned long long)d->bytes, (unsigned long long)n, ckpt_dtype_size(d->dtype));
			return -EINVAL;
		}
	}
	if (ctx->nregions == ctx->cap_regions) {
		uint32_t nc = ctx->cap_regions ? ctx->cap_regions * 2 : 16;
		ckpt_region *r = realloc(ctx->regions, nc * sizeof(*r));
		if (!r)
			return -ENOMEM;
		ctx->regions = r;
		ctx->cap_regions = nc;
	}
	ckpt_region *r = &ctx->regions[ctx->nregions];
	memset(r, 0, sizeof(*r));
	r->name = strdup(d->name);
	if (!r->name)
		return -ENOMEM;
	r->name_len = nl;
	r->ptr = d->ptr;
	r->bytes = d->bytes;
	r->dtype = d->dtype;
	r->device = d->device;
	r->ndim = d->ndim;
	memcpy(r->global_shape, d->global_shape, sizeof(r->global_shape));
	memcpy(r->offsets, d->offsets, sizeof(r->offsets));
	memcpy(r->extents, d->extents, sizeof(r->extents));
	if (d->device == CKPT_DEVICE_CUDA) {
		int err = ckpt__dev_region_init(ctx->dev, &r->dev, r->bytes, ctx->cfg.chunk_bytes);
		if (err < 0) {
			free(r->name);
			return err;
		}
		ctx->ndev_regions++;
	}
	ctx->nregions++;
	return 0;
}

int ckpt_region_remove(ckpt_ctx *ctx, const char *name)
{
	if (!ctx || !name)
		return -EINVAL;
	uint32_t i;
	for (i = 0; i < ctx->nregions; i++)
		if (!strcmp(ctx->regions[i].name, name))
			break;
	if (i == ctx->nregions)
		return -ENOENT;
	ckpt_region *r = &ctx->regions[i];
	if (r->device == CKPT_DEVICE_CUDA) {
		/* A lazy save's device copies may still read it. */
		int err = ckpt_fence(ctx);
		if (err < 0)
			return err;
		ckpt__dev_region_fini(ctx->dev, &r->dev);
		ctx->ndev_regions--;
	}
	free(r->name);
	/* Order is the footer's region order: keep it. */
	memmove(r, r + 1, (ctx->nregions - i - 1) * sizeof(*r));
	ctx->nregions--;
	return 0;
}

/* ------------------------------------------------------------- CUDA */

int ckpt_cuda_available(void)
{
	return ckpt__dev_available();
}

int ckpt_cuda_stream_set(ckpt_ctx *ctx, void *stream)
{
	if (!ctx)
		return -EINVAL;
	int err = ckpt__dev_stream_set(ctx->dev, stream);
	if (err == 0)
		ctx->cuda_stream = stream;
	return err;
}

/* The CUDA regions as parallel arrays, for the device layer. */
int ckpt__dev_regions(ckpt_ctx *ctx, void **ptrs, uint64_t *bytes, const char **names,
                      ckpt_dev_region **regs)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < ctx->nregions; i++) {
		ckpt_region *r = &ctx->regions[i];
		if (r->device != CKPT_DEVICE_CUDA)
			continue;
		ptrs[n] = r->ptr;
		bytes[n] = r->bytes;
		names[n] = r->name;
		regs[n] = &r->dev;
		n++;
	}
	return (int)n;
}

int ckpt_fence(ckpt_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	if (!ctx->dev)
		return 0;
	uint32_t n = ctx->ndev_regions;
	void **ptrs = calloc(n + 1, sizeof(*ptrs));
	uint64_t *bytes = calloc(n + 1, sizeof(*bytes));
	const char **names = calloc(n + 1, sizeof(*names));
	ckpt_dev_region **regs = calloc(n + 1, sizeof(*regs));
	int err = -ENOMEM;
	if (ptrs && bytes && names && regs) {
		ckpt__dev_regions(ctx, ptrs, bytes, names, regs);
		err = ckpt__dev_fence(ctx->dev, ptrs, bytes, names, regs, n, ctx->cfg.chunk_bytes,
		                      ctx->cfg.lazy_check);
	}
	free(ptrs);
	free(bytes);
	free(names);
	free(regs);
	return err;
}

/* ------------------------------------------------------------- listing */

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

int ckpt_step(ckpt_ctx *ctx, uint64_t step)
{
	if (!ctx)
		return -EINVAL;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* the vDSO: no system call */
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	pthread_mutex_lock(&ctx->step_mu);
	/* A step is the time between two calls naming successive steps; a
	 * jump (a restore, a skipped call) starts the measure afresh. */
	if (ctx->step_last_ns && step == ctx->step_cur + 1) {
		ctx->step_sum_ns += now - ctx->step_last_ns;
		ctx->step_count++;
	}
	ctx->step_last_ns = now;
	ctx->step_cur = step;
	/* The save steps are a function of the step number alone (and of the
	 * coordinator's advice, the same for every rank): every rank saves the
	 * same versions. Before any advice, auto saves every 100 steps, which
	 * also measures what a checkpoint costs. */
	int act = CKPT_STEP_CONTINUE;
	uint64_t every = 0, from = 0;
	if (ctx->interval_mode == 1) {
		every = ctx->interval_steps;
	} else if (ctx->interval_mode == 2) {
		/* The newest advice whose start this step has reached; those
		 * before it can never rule again. Before any, every 100 steps. */
		every = 100;
		for (uint32_t k = ctx->nadv; k-- > 0;)
			if (step >= ctx->adv[k].from) {
				every = ctx->adv[k].every;
				from = ctx->adv[k].from;
				if (k) {
					memmove(ctx->adv, ctx->adv + k, (ctx->nadv - k) * sizeof(ctx->adv[0]));
					ctx->nadv -= k;
				}
				break;
			}
	}
	if (every && step && step >= from && (step - from) % every == 0)
		act = CKPT_STEP_SAVE;
	act = ckpt__preempt_step(ctx, step, act);
	int said = ctx->em_said_exit && !ctx->em_logged;
	if (said)
		ctx->em_logged = 1;
	int late = ctx->em_said_exit == 2;
	uint64_t em_step = ctx->em_step;
	pthread_mutex_unlock(&ctx->step_mu);
	if (said)
		LOG_W(&ctx->log, em_step, "preempted: leave now (%s)", late ? "the deadline is near and the emergency "
		      "version is not committed; the previous committed version is the restore point"
		      : "the emergency version is committed");
	return act;
}
