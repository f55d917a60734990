/* The link to the node's ckptd agent (docs/protocol.md): REGISTER_RANK,
 * SHARD_DONE per tier, SEGMENT_REQUEST write/read into the agent's DRAM
 * pool, LIST_VERSIONS, COMMIT_NOTICE. */
#include "daemon.h"
#include "ctx.h"
#include "index.h"
#include "../../ckptd/server/client.h"
#include "../../ckptd/mem/fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Committed (version, tiers) pairs remembered for waiters: saves in flight
 * are few, so a small ring is enough. */
#define NOTICE_RING 64

struct ckpt_daemon {
	pthread_mutex_t mu;    /* the client is used by one thread at a time */
	ckptd_client *client;
	/* One mapping of the pool per context, reused by every grant: a fresh
	 * mapping per save would pay the page faults again (ckptd/mem/README.md). */
	ckptd_mapping map;
	int map_write;
	dev_t map_dev;
	ino_t map_ino;
	/* with ctx->lock */
	struct { uint64_t version; uint32_t tiers; } notices[NOTICE_RING];
	uint32_t nnext;
};

/* With ctx->lock held. */
static int notice_find(const struct ckpt_daemon *d, uint64_t version)
{
	for (int i = 0; i < NOTICE_RING; i++)
		if (d->notices[i].tiers && d->notices[i].version == version)
			return i;
	return -1;
}

static void on_notice(const ckptd_msg *m, void *arg)
{
	ckpt_ctx *ctx = arg;
	struct ckpt_daemon *d = ctx->daemon;
	if (m->type != CKPTD_MSG_COMMIT_NOTICE || strcmp(m->u.commit_notice.job, ctx->job))
		return;
	pthread_mutex_lock(&ctx->lock);
	int i = notice_find(d, m->u.commit_notice.version);
	if (i < 0) {
		i = (int)(d->nnext++ % NOTICE_RING);
		d->notices[i].version = m->u.commit_notice.version;
		d->notices[i].tiers = 0;
	}
	d->notices[i].tiers |= m->u.commit_notice.tier;
	pthread_cond_broadcast(&ctx->notice_cv);
	pthread_mutex_unlock(&ctx->lock);
	/* The root keeps it: this node's root holds only its own ranks' shards,
	 * and a rank restarting without its agent must still know the version
	 * is complete (restore.c), and never drop its shard as stale. */
	int err = ckpt__index_note_global(ctx->index, ctx->job, m->u.commit_notice.version, m->u.commit_notice.tier);
	if (err < 0)
		LOG_W(&ctx->log, m->u.commit_notice.version, "daemon: cannot record the commit in the index: %s",
		      ckpt_strerror(err));
	LOG_T(&ctx->log, m->u.commit_notice.version, "daemon: COMMITTED at tier 0x%x", m->u.commit_notice.tier);
}

/* A call whose answer must be `want`; an ERROR answer becomes *code. */
static int call_expect(ckpt_ctx *ctx, const ckptd_msg *req, uint16_t want, ckptd_msg *rep, uint32_t *code)
{
	int r = ckptd_client_call(ctx->daemon->client, req, rep);
	if (r < 0)
		return r;
	if (rep->type == want)
		return 0;
	if (code)
		*code = rep->type == CKPTD_MSG_ERROR ? rep->u.error.code : 0;
	if (rep->type == CKPTD_MSG_ERROR)
		LOG_T(&ctx->log, CKPT_NO_VERSION, "daemon: %s refused: %u %s", ckptd_msg_name(req->type),
		      rep->u.error.code, rep->u.error.text);
	ckptd_msg_free(rep);
	return -EPROTO;
}

int ckpt__daemon_open(ckpt_ctx *ctx)
{
	char why[300] = "";
	ckptd_secret *cluster = NULL, *job = NULL;
	ckptd_msg rep;
	int err;
	struct ckpt_daemon *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->mu, NULL);
	ctx->daemon = d;
	if (ctx->token_file)
		err = ckptd_secret_load_file(ctx->token_file, &cluster, why, sizeof(why));
	else
		err = ckptd_secret_load_env(NULL, &cluster, why, sizeof(why));
	if (err < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "daemon: no token (%s): %s",
		      ctx->token_file ? ctx->token_file : CKPTD_TOKEN_ENV, why[0] ? why : ckpt_strerror(err));
		goto out;
	}
	if ((err = ckptd_secret_derive_job(cluster, ctx->job, &job)) < 0)
		goto out;
	err = ckptd_client_connect(ctx->daemon_addr, ctx->job, CKPTD_ROLE_RANK, job, 0, &d->client, why,
	                           sizeof(why));
	if (err < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "daemon %s: %s", ctx->daemon_addr, why[0] ? why : ckpt_strerror(err));
		goto out;
	}
	ckptd_client_on_notice(d->client, on_notice, ctx);
	ckptd_msg m = { .type = CKPTD_MSG_REGISTER_RANK };
	snprintf(m.u.register_rank.job, sizeof(m.u.register_rank.job), "%s", ctx->job);
	m.u.register_rank.rank = ctx->cfg.rank;
	m.u.register_rank.world_size = ctx->cfg.world_size;
	m.u.register_rank.pid = (uint32_t)getpid();
	m.u.register_rank.lineage = ctx->lineage;
	/* The agent deletes this root's copies on the coordinator's word
	 * (retention, ckpt rm --daemon): it needs the absolute path. */
	char *abs = realpath(ctx->root, NULL);
	if (abs && strlen(abs) <= CKPTD_PATH_MAX)
		snprintf(m.u.register_rank.root, sizeof(m.u.register_rank.root), "%s", abs);
	else
		LOG_W(&ctx->log, CKPT_NO_VERSION, "daemon: the root's absolute path is unknown or too long; "
		      "the agent will not delete its copies");
	free(abs);
	if ((err = call_expect(ctx, &m, CKPTD_MSG_OK, &rep, NULL)) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "daemon %s: REGISTER_RANK failed: %s", ctx->daemon_addr,
		      ckpt_strerror(err));
		goto out;
	}
	ckptd_msg_free(&rep);
	LOG_I(&ctx->log, CKPT_NO_VERSION, "joined ckptd agent %s", ctx->daemon_addr);
out:
	ckptd_secret_free(job);
	ckptd_secret_free(cluster);
	return err;
}

void ckpt__daemon_close(ckpt_ctx *ctx)
{
	struct ckpt_daemon *d = ctx->daemon;
	if (!d)
		return;
	ckptd_seg_unmap(&d->map);
	ckptd_client_close(d->client);
	pthread_mutex_destroy(&d->mu);
	free(d);
	ctx->daemon = NULL;
}

void ckpt__daemon_poll(ckpt_ctx *ctx)
{
	struct ckpt_daemon *d = ctx->daemon;
	ckptd_msg m;
	pthread_mutex_lock(&d->mu);
	while (d->client && ckptd_client_poll(d->client, &m) == 1) {
		on_notice(&m, ctx);
		ckptd_msg_free(&m);
	}
	pthread_mutex_unlock(&d->mu);
}

/* With d->mu held: the grant's bytes in our mapping of the pool, mapping it
 * (again) only when the pool is new to us or has grown. */
static int map_grant(ckpt_ctx *ctx, const ckptd_segment_grant *g, int write, uint8_t **out)
{
	struct ckpt_daemon *d = ctx->daemon;
	int fd = ckptd_client_take_fd(d->client), err = 0;
	struct stat st;
	if (fd < 0)
		return -EPROTO;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto out;
	}
	if (g->offset > (uint64_t)st.st_size || g->bytes > (uint64_t)st.st_size - g->offset) {
		err = -ERANGE;
		goto out;
	}
	if (!d->map.addr || st.st_dev != d->map_dev || st.st_ino != d->map_ino || (write && !d->map_write) ||
	    g->offset + g->bytes > d->map.len) {
		int w = write || (ctx->cfg.tiers & CKPT_TIER_LOCAL_MEM);
		ckptd_seg_unmap(&d->map);
		if ((err = ckptd_seg_map(fd, 0, (uint64_t)st.st_size, w ? CKPTD_MAP_WRITE : 0, &d->map)) < 0)
			goto out;
		d->map_write = w;
		d->map_dev = st.st_dev;
		d->map_ino = st.st_ino;
	}
	*out = (uint8_t *)d->map.addr + g->offset;
out:
	close(fd);
	return err;
}

static int shard_done(ckpt_ctx *ctx, ckpt_save_op *op, uint32_t tier, uint64_t bytes, uint64_t sum)
{
	ckptd_msg m = { .type = CKPTD_MSG_SHARD_DONE }, rep;
	snprintf(m.u.shard_done.job, sizeof(m.u.shard_done.job), "%s", ctx->job);
	m.u.shard_done.version = op->version;
	m.u.shard_done.rank = ctx->cfg.rank;
	m.u.shard_done.world_size = ctx->cfg.world_size;
	m.u.shard_done.tier = tier;
	m.u.shard_done.bytes = bytes;
	m.u.shard_done.checksum = sum;
	m.u.shard_done.lineage = op->lineage;
	int err = call_expect(ctx, &m, CKPTD_MSG_OK, &rep, NULL);
	if (err == 0)
		ckptd_msg_free(&rep);
	return err;
}

/* Copies the durable shard file into the segment: it is in the page cache,
 * and the segment then holds exactly the bytes a disk restore would read. */
static int copy_file(const char *path, uint8_t *dst, uint64_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;
	if (fd < 0)
		return -errno;
	for (uint64_t off = 0; off < len;) {
		ssize_t n = pread(fd, dst + off, len - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			break;
		}
		off += (uint64_t)n;
	}
	close(fd);
	return err;
}

static int save_mem(ckpt_ctx *ctx, ckpt_save_op *op, uint64_t sum)
{
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	uint32_t code = 0;
	uint8_t *dst;
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", ctx->job);
	m.u.segment_request.version = op->version;
	m.u.segment_request.rank = ctx->cfg.rank;
	m.u.segment_request.mode = CKPTD_SEG_WRITE;
	m.u.segment_request.bytes = op->file_bytes;
	int err = call_expect(ctx, &m, CKPTD_MSG_SEGMENT_GRANT, &rep, &code);
	if (err < 0) {
		if (code == CKPTD_ERR_NO_SPACE) {
			LOG_W(&ctx->log, op->version, "LOCAL_MEM skipped: the agent's pool has no room for %llu bytes",
			      (unsigned long long)op->file_bytes);
			return -ENOSPC;
		}
		return err;
	}
	ckptd_segment_grant g = rep.u.segment_grant;
	ckptd_msg_free(&rep);
	if (g.bytes < op->file_bytes)
		return -EPROTO;
	if ((err = map_grant(ctx, &g, 1, &dst)) < 0)
		return err;
	if ((err = copy_file(op->final_path, dst, op->file_bytes)) < 0)
		return err;
	return shard_done(ctx, op, CKPT_TIER_LOCAL_MEM, op->file_bytes, sum);
}

void ckpt__daemon_shard_saved(ckpt_ctx *ctx, ckpt_save_op *op, uint64_t sum)
{
	struct ckpt_daemon *d = ctx->daemon;
	pthread_mutex_lock(&d->mu);
	int err = shard_done(ctx, op, CKPT_TIER_LOCAL_DISK, op->file_bytes, sum);
	if (err < 0)
		LOG_W(&ctx->log, op->version, "daemon: LOCAL_DISK report failed: %s", ckpt_strerror(err));
	if (ctx->cfg.tiers & CKPT_TIER_LOCAL_MEM) {
		err = save_mem(ctx, op, sum);
		if (err < 0 && err != -ENOSPC)
			LOG_W(&ctx->log, op->version, "LOCAL_MEM copy failed: %s", ckpt_strerror(err));
		op->mem_error = err;
	}
	pthread_mutex_unlock(&d->mu);
}

int ckpt__daemon_wait_commit(ckpt_ctx *ctx, uint64_t version, uint32_t tier, int64_t timeout_ms)
{
	struct ckpt_daemon *d = ctx->daemon;
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
	int err = 0;
	pthread_mutex_lock(&ctx->lock);
	for (;;) {
		int i = notice_find(d, version);
		if (i >= 0 && (d->notices[i].tiers & tier))
			break;
		if (timeout_ms == 0) {
			err = -EAGAIN;
			break;
		}
		if (timeout_ms < 0)
			pthread_cond_wait(&ctx->notice_cv, &ctx->lock);
		else if (pthread_cond_timedwait(&ctx->notice_cv, &ctx->lock, &ts) == ETIMEDOUT) {
			err = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return err;
}

int ckpt__daemon_versions(ckpt_ctx *ctx, uint64_t **out, size_t *nout)
{
	struct ckpt_daemon *d = ctx->daemon;
	uint64_t *v = NULL, start = 0;
	size_t n = 0, cap = 0;
	int err = 0, more = 1;
	*out = NULL;
	*nout = 0;
	pthread_mutex_lock(&d->mu);
	while (more && !err) {
		ckptd_msg m = { .type = CKPTD_MSG_LIST_VERSIONS }, rep;
		snprintf(m.u.list_versions.job, sizeof(m.u.list_versions.job), "%s", ctx->job);
		m.u.list_versions.start = start;
		if ((err = call_expect(ctx, &m, CKPTD_MSG_VERSIONS, &rep, NULL)) < 0)
			break;
		more = rep.u.versions.more && rep.u.versions.count;
		for (uint32_t i = 0; i < rep.u.versions.count; i++) {
			const ckptd_version_info *e = &rep.u.versions.entries[i];
			start = e->version + 1;
			if (e->state != CKPT_STATE_COMMITTED || !e->tiers || e->world_size != ctx->cfg.world_size)
				continue;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 16;
				uint64_t *nv = realloc(v, nc * sizeof(*nv));
				if (!nv) {
					err = -ENOMEM;
					break;
				}
				v = nv;
				cap = nc;
			}
			v[n++] = e->version;
		}
		ckptd_msg_free(&rep);
	}
	pthread_mutex_unlock(&d->mu);
	if (err < 0) {
		free(v);
		return err;
	}
	*out = v;
	*nout = n;
	return 0;
}

int ckpt__daemon_segment_read(ckpt_ctx *ctx, uint64_t version, const uint8_t **buf, uint64_t *len)
{
	struct ckpt_daemon *d = ctx->daemon;
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	uint8_t *p;
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", ctx->job);
	m.u.segment_request.version = version;
	m.u.segment_request.rank = ctx->cfg.rank;
	m.u.segment_request.mode = CKPTD_SEG_READ;
	pthread_mutex_lock(&d->mu);
	int err = call_expect(ctx, &m, CKPTD_MSG_SEGMENT_GRANT, &rep, NULL);
	if (err == 0) {
		ckptd_segment_grant g = rep.u.segment_grant;
		ckptd_msg_free(&rep);
		if ((err = map_grant(ctx, &g, 0, &p)) == 0) {
			*buf = p;
			*len = g.bytes;
		}
	} else {
		/* An answer without a grant may still carry an fd: drop it. */
		int fd = ckptd_client_take_fd(d->client);
		if (fd >= 0)
			close(fd);
	}
	pthread_mutex_unlock(&d->mu);
	return err;
}
