/* The context's life cycle: ckpt_ctx_open and ckpt_ctx_close. */
#include "ctx.h"
#include "format/recycle.h"
#include "base/dirs.h"
#include "format/admin.h"
#include "daemon.h"
#include "peer.h"
#include "preempt.h"
#include "restore.h"
#include "config.h"
#include "ckpt_kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

uint64_t ckpt__lineage(uint64_t incarnation, uint64_t restored_plus_one)
{
	uint8_t b[16];
	ckpt__put_le64(b, incarnation);
	ckpt__put_le64(b + 8, restored_plus_one);
	return ckpt_kern_hash(b, sizeof(b));
}

/* ------------------------------------------------------------- open */

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

/* The context's own copy of the config: strings duplicated, the settings
 * given as text parsed, defaults for zeros. */
static int own_config(ckpt_ctx *ctx, const ckpt_config *cfg, const ckpt_logger *lg)
{
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
	    (ctx->cfg.daemon && *ctx->cfg.daemon && !ctx->daemon_addr) || (ctx->cfg.token_file && !ctx->token_file))
		return -ENOMEM;
	ctx->cfg.job_id = ctx->job;
	ctx->cfg.root = ctx->root;
	ctx->cfg.backend = ctx->backend_name;
	ctx->cfg.daemon = ctx->daemon_addr;
	ctx->cfg.token_file = ctx->token_file;
	ctx->cfg.faults = NULL;
	ckpt__config_interval(cfg, &ctx->interval_mode, &ctx->interval_steps);
	ctx->cfg.interval = NULL; /* not ours to keep: parsed above */
	if (ckpt__parse_order(ctx->cfg.restore_order ? ctx->cfg.restore_order : CKPT__DEFAULT_RESTORE_ORDER,
	                      ctx->restore_order) < 0) {
		LOG_E(lg, CKPT_NO_VERSION,
		      "restore_order '%s': want a comma list of local_mem, local_disk, peer_mem, shared",
		      ctx->cfg.restore_order);
		return -CKPT_ECONFIG;
	}
	ctx->cfg.restore_order = NULL; /* parsed above */
	ctx->npreempt_sigs = ckpt__preempt_parse_signals(ctx->cfg.preempt_signals ? ctx->cfg.preempt_signals : "TERM,USR1",
	                                                 ctx->preempt_sigs, 8);
	if (ctx->npreempt_sigs < 0) {
		LOG_E(lg, CKPT_NO_VERSION, "preempt_signals '%s': want a comma list of TERM, USR1, USR2, INT, HUP",
		      ctx->cfg.preempt_signals);
		return -CKPT_ECONFIG;
	}
	ctx->cfg.preempt_signals = NULL;
	if (!ctx->cfg.preempt_grace_ms)
		ctx->cfg.preempt_grace_ms = 30000;
	/* Older callers' structs end before shared_dir. */
	if (cfg->size >= offsetof(ckpt_config, shared_dir) + sizeof(cfg->shared_dir) && cfg->shared_dir &&
	    *cfg->shared_dir && !(ctx->shared_dir = strdup(cfg->shared_dir)))
		return -ENOMEM;
	ctx->cfg.shared_dir = ctx->shared_dir;
	if (!ctx->cfg.peer_timeout_ms)
		ctx->cfg.peer_timeout_ms = 30000;
	if (cfg->size < offsetof(ckpt_config, heartbeat_timeout_ms) + sizeof(cfg->heartbeat_timeout_ms))
		ctx->cfg.heartbeat_timeout_ms = 10000; /* an older caller's struct: the default */
	if (cfg->size < offsetof(ckpt_config, heartbeat_interval_ms) + sizeof(cfg->heartbeat_interval_ms) ||
	    !ctx->cfg.heartbeat_interval_ms)
		ctx->cfg.heartbeat_interval_ms = 500; /* an older caller's struct, or 0: the default */
	/* snapshot_threads: an older caller's struct leaves it 0, auto. */
	return 0;
}

/* The root, the job's directory and every parent up to the root, made
 * durable once here; each save then syncs only what it adds. */
static int make_job_dir(ckpt_ctx *ctx)
{
	int err;
	if ((err = ckpt__mkdir_p(ctx->root, 0700)) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "cannot create root %s: %s", ctx->root, ckpt_strerror(err));
		return err;
	}
	char jdir[4200], rel[128];
	snprintf(jdir, sizeof(jdir), "%s/jobs/%s", ctx->root, ctx->job);
	snprintf(rel, sizeof(rel), "jobs/%s", ctx->job);
	/* Not followed below the root: a symlinked jobs/ or job directory
	 * would take every save somewhere else. */
	int jfd = ckpt__dir_open_below(ctx->root, rel, 1, 0700);
	if (jfd == -ELOOP || jfd == -ENOTDIR) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "cannot use %s: it, or jobs/ above it, is a symlink or not a "
		      "directory; not followed", jdir);
		return -ENOTDIR;
	}
	if (jfd < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "cannot create %s: %s", jdir, ckpt_strerror(jfd));
		return jfd;
	}
	close(jfd);
	ckpt__fsync_parent(jdir);
	snprintf(jdir, sizeof(jdir), "%s/jobs", ctx->root);
	ckpt__fsync_parent(jdir);
	ckpt__fsync_parent(ctx->root);
	return 0;
}

/* Compression outputs: one per worker and per I/O in flight, faulted in now,
 * not during a save. */
static int alloc_cbufs(ckpt_ctx *ctx)
{
	const ckpt_config *cfg = &ctx->cfg;
	ctx->ncbufs = cfg->io_depth + cfg->workers;
	ctx->cbuf_bytes = CKPT_ALIGN_UP(ckpt_kern_compress_bound(cfg->chunk_bytes), CKPT_ALIGN);
	ctx->cbufs = calloc(ctx->ncbufs, sizeof(*ctx->cbufs));
	ctx->cbuf_free = calloc(ctx->ncbufs, sizeof(int));
	if (!ctx->cbufs || !ctx->cbuf_free)
		return -ENOMEM;
	for (uint32_t i = 0; i < ctx->ncbufs; i++) {
		if (posix_memalign((void **)&ctx->cbufs[i], CKPT_ALIGN, ctx->cbuf_bytes))
			return -ENOMEM;
		memset(ctx->cbufs[i], 0, ctx->cbuf_bytes);
		ctx->cbuf_free[ctx->cbuf_nfree++] = (int)i;
	}
	return 0;
}

static int open_backend(ckpt_ctx *ctx)
{
	ckpt_backend_params bp = { sizeof(bp), ctx->cfg.io_depth + 4 };
	int fell_back, uerr;
	int err = ckpt_backend_open(ctx->backend_name, &bp, &ctx->backend, &fell_back, &uerr);
	if (err < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "cannot open disk backend '%s': %s",
		      ctx->backend_name ? ctx->backend_name : "auto", ckpt_strerror(err));
		return err;
	}
	if (fell_back)
		LOG_W(&ctx->log, CKPT_NO_VERSION, "io_uring unavailable (%s); falling back to pwrite",
		      ckpt_strerror(uerr));
	return 0;
}

/* The agent's link, when there is a daemon address. The handshake happens
 * here, before the io thread takes the link over. */
static int link_daemon(ckpt_ctx *ctx)
{
	int err;
	if (ctx->daemon_addr && (err = ckpt__daemon_open(ctx)) < 0)
		return err;
	if (ctx->cfg.tiers & CKPT_TIER_LOCAL_MEM) {
		ctx->mem_tier = ckpt__daemon_segments(ctx);
		ctx->mem_unavail = ctx->mem_tier ? 0 : -CKPT_EUNAVAIL;
		/* Unreachable agents were reported by ckpt__daemon_open. */
		if (ctx->daemon && !ctx->mem_tier)
			LOG_W(&ctx->log, CKPT_NO_VERSION,
			      "LOCAL_MEM skipped: %s is a TCP address, and DRAM segments are handed over the agent's "
			      "Unix socket only; saves go to local_disk",
			      ctx->daemon_addr);
	}
	return 0;
}

/* The root's pool of recycled shard files: there when recycling is on (the
 * deletions of gc and retention fill it), emptied when it is off, so that
 * turning it off gives the space back. Failures cost speed, not data. */
static void setup_recycling(ckpt_ctx *ctx)
{
	/* auto: on where the library's own retention deletes as many versions
	 * as it saves, so the pool holds about one shard and every save
	 * overwrites; elsewhere deletions may be meant to free space. */
	if (ctx->cfg.recycle < 0)
		ctx->cfg.recycle = ctx->cfg.keep_versions > 0 && !(ctx->cfg.daemon && *ctx->cfg.daemon);
	if (ctx->cfg.recycle) {
		int pfd = ckpt__recycle_open(ctx->root, 1);
		if (pfd < 0)
			LOG_W(&ctx->log, CKPT_NO_VERSION, "recycle: no pool under %s (%s); shard files are new files",
			      ctx->root, ckpt_strerror(pfd));
		else
			close(pfd);
		return;
	}
	int n = ckpt__recycle_drain(ctx->root);
	if (n > 0)
		LOG_I(&ctx->log, CKPT_NO_VERSION, "recycle off: %d pooled shard files removed from %s", n, ctx->root);
}

int ckpt_ctx_open(const ckpt_config *cfg, ckpt_ctx **out)
{
	if (!cfg || !out)
		return -EINVAL;
	*out = NULL;
	ckpt_logger lg;
	ckpt__logger_init(&lg, cfg->job_id, cfg->rank);
	CKPT_TRY(ckpt__config_check(cfg, &lg));
	ckpt_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	int err;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->step_mu, NULL);
	pthread_cond_init(&ctx->work_cv, NULL);
	pthread_cond_init(&ctx->space_cv, NULL);
	pthread_cond_init(&ctx->notice_cv, NULL);
	ctx->log = lg;
	if ((err = own_config(ctx, cfg, &lg)) < 0)
		goto fail;
	if ((err = ckpt__faults_parse(&ctx->faults, cfg->faults)) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "config: fault spec '%s' invalid", cfg->faults);
		goto fail;
	}
	if ((err = make_job_dir(ctx)) < 0)
		goto fail;
	ctx->direct_ok = cfg->direct_io && probe_direct(ctx->root);
	if (cfg->direct_io && !ctx->direct_ok)
		LOG_I(&ctx->log, CKPT_NO_VERSION, "O_DIRECT not supported under %s; using buffered I/O", ctx->root);
	if ((err = ckpt__index_open(ctx->root, &ctx->log, &ctx->index)) < 0)
		goto fail;
	if ((err = ckpt__pool_init(&ctx->pool, ckpt__staging_open_bytes(&ctx->cfg), cfg->chunk_bytes, &ctx->log)) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "cannot allocate a staging pool of %llu bytes: %s",
		      (unsigned long long)ckpt__staging_open_bytes(&ctx->cfg), ckpt_strerror(err));
		goto fail;
	}
	ctx->pool_auto = ctx->cfg.staging_bytes == 0;
	if ((cfg->compress && (err = alloc_cbufs(ctx)) < 0) || (err = open_backend(ctx)) < 0)
		goto fail;
	setup_recycling(ctx);
	/* A process that died mid-deletion left versions marked DELETING. */
	ckpt__admin_finish_deletes(ctx->root, ctx->index, ctx->job, &ctx->faults, &ctx->log);
	ctx->lineage = ckpt__lineage(cfg->incarnation, 0);
	/* On a small machine the workers would take the CPU and the memory
	 * bandwidth the snapshot copy needs, and the caller waits longer. */
	ctx->overlap = cfg->snapshot_overlap >= 0 ? cfg->snapshot_overlap
	                                          : sysconf(_SC_NPROCESSORS_ONLN) > (long)cfg->workers + 1;
	if ((err = link_daemon(ctx)) < 0 || (err = ckpt__pipeline_start(ctx)) < 0 || (err = ckpt__peer_start(ctx)) < 0)
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
	ckpt__restore_s3_close(ctx);
	free(ctx->shared_dir);
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->step_mu);
	pthread_cond_destroy(&ctx->notice_cv);
	pthread_cond_destroy(&ctx->work_cv);
	pthread_cond_destroy(&ctx->space_cv);
	free(ctx);
	return 0;
}

