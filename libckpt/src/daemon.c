/* The link to the node's ckptd agent (docs/protocol.md): REGISTER_RANK,
 * SHARD_DONE per tier, SEGMENT_REQUEST write/read into the agent's DRAM
 * pool (Unix socket only), LIST_VERSIONS, COMMIT_NOTICE. */
#include "daemon.h"
#include "ctx.h"
#include "format/index.h"
#include "preempt.h"
#include "wire/client.h"
#include "wire/fdpass.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Committed (version, tiers) pairs remembered for waiters: saves in flight
 * are few, so a small ring is enough. */
#define NOTICE_RING 64
/* Mappings of an earlier pool fd, kept until close: saves in flight may
 * still read their segment through them. The pool fd is fixed for an
 * agent's life, so this only fills if the agent is replaced under us. */
#define OLD_MAPS 4
/* Page tables are built for the pool in units of this many bytes. */
#define POP_UNIT (2ull << 20)

struct ckpt_daemon {
	pthread_mutex_t mu;    /* the client is used by one thread at a time */
	ckptd_client *client;
	int unix_link;         /* segments can pass (a Unix socket) */
	int joined;            /* registered: a failure from now on is a lost link */
	int broken;            /* with mu and ctx->lock: the connection failed */
	/* One mapping of the pool per context, reused by every grant: a fresh
	 * mapping per save would pay the page faults again (ckptd/mem/README.md). */
	ckptd_mapping map;
	int map_write;
	dev_t map_dev;
	ino_t map_ino;
	ckptd_mapping old[OLD_MAPS];
	/* Which units of the mapping have their page tables built for writing.
	 * A unit is faulted in once, at its first grant or by the io thread
	 * while idle, and never again: redoing it on present page tables still
	 * costs half a memcpy. pop_mu guards these and, for the idle fill, the
	 * mapping's address (taken under mu as well when it changes). */
	pthread_mutex_t pop_mu;
	uint64_t *pop;
	size_t pop_units, pop_left, pop_next;
	uint32_t pop_gen;
	/* READ grants not yet released, with pop_mu: while a restore (or a
	 * reader of the DRAM copy) runs, the idle fill stays off, so that
	 * the readers' threads have the CPUs to themselves. */
	uint32_t readers;
	int warmed;            /* io thread: ckpt__daemon_warm ran */
	ckptd_secret *secret;  /* the job's: partner agents are dialled with it */
	char agent_listen[CKPTD_ADDR_MAX + 1]; /* the agent's --listen (1.3); "" unknown */
	uint32_t seg_wait_ms;  /* the agent's --segment-wait, as it said (or its default) */
	uint64_t heard_ns;     /* with mu: the agent's last frame */
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
	if (m->type == CKPTD_MSG_INTERVAL_NOTICE) {
		if (strcmp(m->u.interval_notice.job, ctx->job))
			return;
		/* Kept with the earlier ones: each rules from its start, until a
		 * newer one starts, so ranks that hear it at different steps
		 * still save the same versions (ckpt_step). */
		pthread_mutex_lock(&ctx->step_mu);
		uint32_t n = ctx->nadv;
		int same = n && ctx->adv[n - 1].every == m->u.interval_notice.every &&
		           ctx->adv[n - 1].from == m->u.interval_notice.from;
		if (!same) {
			if (n == sizeof(ctx->adv) / sizeof(ctx->adv[0])) { /* full: the oldest goes */
				memmove(ctx->adv, ctx->adv + 1, (n - 1) * sizeof(ctx->adv[0]));
				n--;
			}
			ctx->adv[n].every = m->u.interval_notice.every;
			ctx->adv[n].from = m->u.interval_notice.from;
			ctx->nadv = n + 1;
		}
		pthread_mutex_unlock(&ctx->step_mu);
		if (same)
			return;
		LOG_I(&ctx->log, CKPT_NO_VERSION, "advised checkpoint interval: every %llu steps from step %llu (%.1f s)",
		      (unsigned long long)m->u.interval_notice.every, (unsigned long long)m->u.interval_notice.from,
		      m->u.interval_notice.interval_ns / 1e9);
		return;
	}
	if (m->type == CKPTD_MSG_EMERGENCY) {
		if (!strcmp(m->u.emergency.job, ctx->job))
			ckpt__preempt_emergency(ctx, m->u.emergency.step, m->u.emergency.deadline_ns, m->u.emergency.tier,
			                        m->u.emergency.final);
		return;
	}
	if (m->type != CKPTD_MSG_COMMIT_NOTICE || strcmp(m->u.commit_notice.job, ctx->job))
		return;
	ckpt__preempt_committed(ctx, m->u.commit_notice.version, m->u.commit_notice.tier);
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

/* With d->mu held: the connection is unusable after a transport error
 * (ckptd_client_call). Said once; waiters for notices wake up and give up,
 * and saves go to disk alone from here on. */
static void link_lost(ckpt_ctx *ctx, int err)
{
	struct ckpt_daemon *d = ctx->daemon;
	if (d->broken)
		return;
	if (d->joined)
		LOG_W(&ctx->log, CKPT_NO_VERSION, "lost the ckptd agent %s (%s): saves go to local disk only from now on",
		      ctx->daemon_addr, ckpt_strerror(err));
	pthread_mutex_lock(&ctx->lock);
	d->broken = 1;
	pthread_cond_broadcast(&ctx->notice_cv);
	pthread_mutex_unlock(&ctx->lock);
}

/* With d->mu held. A call whose answer must be `want`; an ERROR answer
 * becomes *code. */
static int adopt_pool(ckpt_ctx *ctx, int fd, int write, uint64_t end);

static int call_expect(ckpt_ctx *ctx, const ckptd_msg *req, uint16_t want, ckptd_msg *rep, uint32_t *code)
{
	if (ctx->daemon->broken)
		return -ENOTCONN;
	int r = ckptd_client_call(ctx->daemon->client, req, rep);
	if (r < 0) {
		if (r != -EINVAL)
			link_lost(ctx, r);
		return r;
	}
	ctx->daemon->heard_ns = ckpt__now_ns();
	if (rep->type == want)
		return 0;
	if (code)
		*code = rep->type == CKPTD_MSG_ERROR ? rep->u.error.code : 0;
	int err = -EPROTO;
	if (rep->type == CKPTD_MSG_ERROR) {
		LOG_T(&ctx->log, CKPT_NO_VERSION, "daemon: %s refused: %u %s", ckptd_msg_name(req->type),
		      rep->u.error.code, rep->u.error.text);
		/* The answers a caller acts on, as errno values that say so. */
		err = rep->u.error.code == CKPTD_ERR_NOT_FOUND ? -ENOENT
		    : rep->u.error.code == CKPTD_ERR_NO_SPACE  ? -ENOSPC
		    : rep->u.error.code == CKPTD_ERR_BUSY      ? -EBUSY
		    : rep->u.error.code == CKPTD_ERR_DENIED    ? -EACCES
		                                               : -EPROTO;
	}
	ckptd_msg_free(rep);
	return err;
}

/* Errors that say the agent is not there (down, restarting, no socket yet),
 * as opposed to a configuration error such as a refused token. */
static int unreachable(int err)
{
	switch (-err) {
	case ECONNREFUSED: case ENOENT: case ETIMEDOUT: case EHOSTUNREACH: case ENETUNREACH:
	case ECONNRESET: case ECONNABORTED: case EPIPE: case ENOTCONN: case EBUSY: case EADDRNOTAVAIL:
		return 1;
	}
	return 0;
}

/* How often a heartbeat goes while the link is quiet: the interval, at
 * most a quarter of the timeout; 0: none. */
static uint32_t beat_ms(const ckpt_ctx *ctx)
{
	uint32_t hb = ctx->cfg.heartbeat_timeout_ms, iv = ctx->cfg.heartbeat_interval_ms;
	if (!hb)
		return 0;
	if (!iv || iv > hb / 4)
		iv = hb / 4;
	return iv ? iv : 1;
}

int ckpt__daemon_open(ckpt_ctx *ctx)
{
	char why[300] = "";
	ckptd_secret *cluster = NULL, *job = NULL;
	ckptd_msg rep;
	int err, reaching = 0;
	struct ckpt_daemon *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->mu, NULL);
	pthread_mutex_init(&d->pop_mu, NULL);
	ctx->daemon = d;
	d->unix_link = !strncmp(ctx->daemon_addr, "unix:", 5);
	if (ctx->token_file)
		err = ckptd_secret_load_file(ctx->token_file, &cluster, why, sizeof(why));
	else
		err = ckptd_secret_load_env(NULL, &cluster, why, sizeof(why));
	if (err < 0) {
		snprintf(why + strlen(why), sizeof(why) - strlen(why), "%sno token from %s", why[0] ? ": " : "",
		         ctx->token_file ? ctx->token_file : CKPTD_TOKEN_ENV);
		goto out;
	}
	if ((err = ckptd_secret_derive_job(cluster, ctx->job, &job)) < 0 ||
	    (err = ckptd_secret_derive_job(cluster, ctx->job, &d->secret)) < 0)
		goto out;
	reaching = 1;
	err = ckptd_client_connect(ctx->daemon_addr, ctx->job, CKPTD_ROLE_RANK, job, 0, &d->client, why,
	                           sizeof(why));
	if (err < 0)
		goto out;
	ckptd_client_on_notice(d->client, on_notice, ctx);
	ckptd_msg m = { .type = CKPTD_MSG_REGISTER_RANK };
	snprintf(m.u.register_rank.job, sizeof(m.u.register_rank.job), "%s", ctx->job);
	m.u.register_rank.rank = ctx->cfg.rank;
	m.u.register_rank.world_size = ctx->cfg.world_size;
	m.u.register_rank.pid = (uint32_t)getpid();
	m.u.register_rank.lineage = ctx->lineage;
	m.u.register_rank.beat_ms = beat_ms(ctx); /* 1.5: what the agent judges this rank's silence by */
	/* The agent deletes this root's copies on the coordinator's word
	 * (retention, ckpt rm --daemon): it needs the absolute path. */
	char *abs = realpath(ctx->root, NULL);
	if (abs && strlen(abs) <= CKPTD_PATH_MAX)
		snprintf(m.u.register_rank.root, sizeof(m.u.register_rank.root), "%s", abs);
	else
		LOG_W(&ctx->log, CKPT_NO_VERSION, "daemon: the root's absolute path is unknown or too long; "
		      "the agent will not delete its copies");
	free(abs);
	pthread_mutex_lock(&d->mu);
	err = call_expect(ctx, &m, CKPTD_MSG_OK, &rep, NULL);
	pthread_mutex_unlock(&d->mu);
	if (err < 0) {
		snprintf(why, sizeof(why), "REGISTER_RANK failed: %s", ckpt_strerror(err));
		goto out;
	}
	/* The job's pool, when the agent has it ready, comes with the answer:
	 * mapped now, its page tables built by the io thread while the trainer
	 * starts, so that even the first save copies at memcpy's speed. */
	int pfd = ckptd_client_take_fd(d->client);
	if (pfd >= 0 && (ctx->cfg.tiers & CKPT_TIER_LOCAL_MEM) && d->unix_link) {
		pthread_mutex_lock(&d->mu);
		int pr = adopt_pool(ctx, pfd, 1, 0);
		pthread_mutex_unlock(&d->mu);
		if (pr < 0)
			LOG_I(&ctx->log, CKPT_NO_VERSION, "daemon: the agent's pool could not be mapped ahead (%s); it is "
			      "mapped at the first save", ckpt_strerror(pr));
	} else if (pfd >= 0) {
		close(pfd);
	}
	snprintf(d->agent_listen, sizeof(d->agent_listen), "%s", rep.u.ok.address);
	d->seg_wait_ms = rep.u.ok.wait_ms ? rep.u.ok.wait_ms : CKPTD_SEGMENT_WAIT_DEFAULT_MS;
	if (d->seg_wait_ms > CKPTD_SEGMENT_WAIT_MAX_MS) /* no agent says more: believe no more */
		d->seg_wait_ms = CKPTD_SEGMENT_WAIT_MAX_MS;
	ckptd_msg_free(&rep);
	d->joined = 1;
	LOG_I(&ctx->log, CKPT_NO_VERSION, "joined ckptd agent %s", ctx->daemon_addr);
out:
	ckptd_secret_free(job);
	ckptd_secret_free(cluster);
	if (err == 0)
		return 0;
	if (reaching && unreachable(err) && !ctx->cfg.daemon_required) {
		/* Training goes on without the agent: its DRAM tier holds a copy
		 * of what the disk holds, never the only one. */
		LOG_W(&ctx->log, CKPT_NO_VERSION,
		      "ckptd agent %s unreachable (%s); running embedded: local_disk only%s "
		      "(daemon_required=1 makes this an error)",
		      ctx->daemon_addr, why[0] ? why : ckpt_strerror(err),
		      ctx->cfg.tiers & CKPT_TIER_LOCAL_MEM ? ", LOCAL_MEM not available" : "");
		ckpt__daemon_close(ctx);
		return 0;
	}
	LOG_E(&ctx->log, CKPT_NO_VERSION, "daemon %s: %s", ctx->daemon_addr, why[0] ? why : ckpt_strerror(err));
	return err;
}

void ckpt__daemon_close(ckpt_ctx *ctx)
{
	struct ckpt_daemon *d = ctx->daemon;
	if (!d)
		return;
	/* Leaving on purpose: the connection's end is then no failure of this
	 * rank (1.5; an older agent knows no RANK_LEAVE). Bounded: an agent
	 * that does not answer is gone anyway. */
	pthread_mutex_lock(&d->mu);
	if (d->joined && !d->broken && d->client && CKPTD_VERSION_MINOR_OF(ckptd_client_version(d->client)) >= 5) {
		ckptd_msg m = { .type = CKPTD_MSG_RANK_LEAVE }, rep;
		snprintf(m.u.rank_leave.job, sizeof(m.u.rank_leave.job), "%s", ctx->job);
		ckptd_client_set_timeout(d->client, 1000);
		if (call_expect(ctx, &m, CKPTD_MSG_OK, &rep, NULL) == 0)
			ckptd_msg_free(&rep);
	}
	pthread_mutex_unlock(&d->mu);
	ckptd_seg_unmap(&d->map);
	for (int i = 0; i < OLD_MAPS; i++)
		ckptd_seg_unmap(&d->old[i]);
	ckptd_client_close(d->client);
	ckptd_secret_free(d->secret);
	pthread_mutex_destroy(&d->mu);
	pthread_mutex_destroy(&d->pop_mu);
	free(d->pop);
	free(d);
	ctx->daemon = NULL;
}

int ckpt__daemon_segments(ckpt_ctx *ctx)
{
	struct ckpt_daemon *d = ctx->daemon;
	if (!d || !d->unix_link)
		return 0;
	pthread_mutex_lock(&ctx->lock);
	int up = !d->broken;
	pthread_mutex_unlock(&ctx->lock);
	return up;
}

void ckpt__daemon_poll(ckpt_ctx *ctx)
{
	struct ckpt_daemon *d = ctx->daemon;
	ckptd_msg m;
	pthread_mutex_lock(&d->mu);
	while (!d->broken) {
		int r = ckptd_client_poll(d->client, &m);
		if (r < 0)
			link_lost(ctx, r);
		if (r != 1)
			break;
		d->heard_ns = ckpt__now_ns();
		on_notice(&m, ctx);
		ckptd_msg_free(&m);
	}
	pthread_mutex_unlock(&d->mu);
}

/* With pop_mu held. */
static int pop_has(const struct ckpt_daemon *d, size_t u)
{
	return (d->pop[u / 64] >> (u % 64)) & 1;
}

/* With pop_mu held: marks units [a, b) populated. */
static void pop_mark(struct ckpt_daemon *d, size_t a, size_t b)
{
	for (size_t u = a; u < b; u++)
		if (!pop_has(d, u)) {
			d->pop[u / 64] |= 1ull << (u % 64);
			d->pop_left--;
		}
}

/* With mu held: page tables for writing [off, off+len) of the mapping,
 * built only where they are not yet, whole units at a time so that each is
 * done once. */
static void prefault(struct ckpt_daemon *d, uint64_t off, uint64_t len)
{
	pthread_mutex_lock(&d->pop_mu);
	size_t a = (size_t)(off / POP_UNIT), b = (size_t)((off + len + POP_UNIT - 1) / POP_UNIT);
	for (size_t u = a; u < b;) {
		if (pop_has(d, u)) {
			u++;
			continue;
		}
		size_t e = u;
		while (e < b && !pop_has(d, e))
			e++;
		uint64_t lo = u * POP_UNIT, hi = CKPT_MIN(e * POP_UNIT, (uint64_t)d->map.len);
		if (ckptd_seg_prefault(&d->map, lo, hi - lo, 1) == 0)
			pop_mark(d, u, e);
		u = e;
	}
	pthread_mutex_unlock(&d->pop_mu);
}

/* With mu held: 1 if [off, off+len) of the mapping has its page tables. */
static int populated(struct ckpt_daemon *d, uint64_t off, uint64_t len)
{
	pthread_mutex_lock(&d->pop_mu);
	size_t u = (size_t)(off / POP_UNIT), b = (size_t)((off + len + POP_UNIT - 1) / POP_UNIT);
	while (u < b && pop_has(d, u))
		u++;
	pthread_mutex_unlock(&d->pop_mu);
	return u == b;
}

void ckpt__daemon_fault_in(const void *p, size_t len)
{
	ckptd_seg_touch(p, len);
}

/* With d->mu held: maps the pool behind fd (the whole of it), unless the
 * mapping we have is of that pool, writable if need be, and covers `end`
 * bytes. Takes fd's ownership. */
static int adopt_pool(ckpt_ctx *ctx, int fd, int write, uint64_t end)
{
	struct ckpt_daemon *d = ctx->daemon;
	struct stat st;
	int err = 0;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto out;
	}
	if (end > (uint64_t)st.st_size) {
		err = -ERANGE;
		goto out;
	}
	if (!d->map.addr || st.st_dev != d->map_dev || st.st_ino != d->map_ino || (write && !d->map_write) ||
	    end > d->map.len) {
		int w = write || ctx->mem_tier;
		int i = 0;
		while (d->map.addr && i < OLD_MAPS && d->old[i].map_addr)
			i++;
		if (i == OLD_MAPS) {
			err = -EBUSY;
			goto out;
		}
		size_t units = (size_t)(((uint64_t)st.st_size + POP_UNIT - 1) / POP_UNIT);
		uint64_t *pop = calloc(units / 64 + 1, sizeof(uint64_t));
		ckptd_mapping m;
		if (!pop) {
			err = -ENOMEM;
			goto out;
		}
		if ((err = ckptd_seg_map(fd, 0, (uint64_t)st.st_size, w ? CKPTD_MAP_WRITE : 0, &m)) < 0) {
			free(pop);
			goto out;
		}
		pthread_mutex_lock(&d->pop_mu);
		if (d->map.addr)
			d->old[i] = d->map;
		d->map = m;
		free(d->pop);
		d->pop = pop;
		d->pop_units = d->pop_left = units;
		d->pop_next = 0;
		d->pop_gen++;
		pthread_mutex_unlock(&d->pop_mu);
		d->map_write = w;
		d->map_dev = st.st_dev;
		d->map_ino = st.st_ino;
	}
out:
	close(fd);
	return err;
}

/* With d->mu held: the grant's bytes in our mapping of the pool. The whole
 * fd is mapped once (again only if the agent hands over another pool). A
 * write grant's range is faulted in the first time, so that the copy into it
 * runs at memcpy speed instead of taking a page fault per 4 KiB; for a read
 * grant *cold says whether the reader has to (it does so on its threads). */
static int map_grant(ckpt_ctx *ctx, const ckptd_segment_grant *g, int write, uint8_t **out, int *cold)
{
	struct ckpt_daemon *d = ctx->daemon;
	int fd = ckptd_client_take_fd(d->client);
	if (fd < 0)
		return -EPROTO;
	if (g->offset + g->bytes < g->offset) {
		close(fd);
		return -ERANGE;
	}
	int err = adopt_pool(ctx, fd, write, g->offset + g->bytes);
	if (err < 0)
		return err;
	if (write) {
		/* Built ahead (the pool came with the registration, or an earlier
		 * grant's idle fill) or now, inside the save's stall. */
		int ahead = populated(d, g->offset, g->bytes);
		LOG_T(&ctx->log, CKPT_NO_VERSION, "LOCAL_MEM segment of %llu bytes: page tables %s",
		      (unsigned long long)g->bytes, ahead ? "built ahead of the save" : "built now, in the save's stall");
		if (!ahead)
			prefault(d, g->offset, g->bytes);
	} else {
		*cold = !populated(d, g->offset, g->bytes);
		pthread_mutex_lock(&d->pop_mu);
		d->readers++;
		pthread_mutex_unlock(&d->pop_mu);
	}
	*out = (uint8_t *)d->map.addr + g->offset;
	return 0;
}

int ckpt__daemon_prefault_idle(ckpt_ctx *ctx, uint64_t budget)
{
	struct ckpt_daemon *d = ctx->daemon;
	if (!d || !ctx->mem_tier)
		return 0;
	pthread_mutex_lock(&d->pop_mu);
	if (!d->pop || !d->pop_left || !d->map_write) {
		pthread_mutex_unlock(&d->pop_mu);
		return 0;
	}
	if (d->readers) {
		/* Later: some remain, and the io thread looks again soon. */
		pthread_mutex_unlock(&d->pop_mu);
		return 1;
	}
	size_t a = d->pop_next;
	while (a < d->pop_units && pop_has(d, a))
		a++;
	if (a == d->pop_units) {
		/* Wrap: grants may have skipped ahead of the cursor. */
		for (a = 0; a < d->pop_units && pop_has(d, a);)
			a++;
	}
	size_t b = a, max = (size_t)CKPT_MAX(budget / POP_UNIT, 1);
	while (b < d->pop_units && b - a < max && !pop_has(d, b))
		b++;
	ckptd_mapping m = d->map;
	uint32_t gen = d->pop_gen;
	pthread_mutex_unlock(&d->pop_mu);
	/* Outside the lock: a grant must not wait for this. A remap meanwhile
	 * leaves m mapped (retired until close), so this stays harmless. */
	uint64_t lo = a * POP_UNIT, hi = CKPT_MIN(b * POP_UNIT, (uint64_t)m.len);
	int ok = a < b && ckptd_seg_prefault(&m, lo, hi - lo, 1) == 0;
	pthread_mutex_lock(&d->pop_mu);
	if (d->pop_gen == gen) {
		if (ok)
			pop_mark(d, a, b);
		else
			d->pop_left = 0; /* not supported here: stop trying */
		d->pop_next = b;
	}
	int more = d->pop_left > 0;
	pthread_mutex_unlock(&d->pop_mu);
	return more;
}

void ckpt__daemon_warm(ckpt_ctx *ctx)
{
	struct ckpt_daemon *d = ctx->daemon;
	if (!d || d->warmed || !ctx->mem_tier || !ckpt__daemon_segments(ctx))
		return;
	d->warmed = 1;
	uint64_t *v = NULL, id, len;
	size_t n = 0;
	const uint8_t *img;
	int cold;
	/* The copy a restart restores first: the newest committed version the
	 * node holds (1.4 agents answer that themselves; older ones are asked
	 * for the coordinator's newest). */
	int got = ckpt__daemon_speaks(ctx, 4) ? ckpt__daemon_segment_read(ctx, CKPT_LATEST, &img, &len, &cold, &id)
	        : ckpt__daemon_versions(ctx, &v, &n, NULL) == 0 && n ? ckpt__daemon_segment_read(ctx, v[n - 1], &img, &len,
	                                                                                  &cold, &id)
	        : -ENOENT;
	if (got == 0) {
		pthread_mutex_lock(&d->pop_mu);
		if (d->map.addr && img >= (const uint8_t *)d->map.addr)
			d->pop_next = (size_t)((uint64_t)(img - (const uint8_t *)d->map.addr) / POP_UNIT);
		pthread_mutex_unlock(&d->pop_mu);
		ckpt__daemon_segment_release(ctx, id);
		LOG_T(&ctx->log, CKPT_NO_VERSION, "LOCAL_MEM: this node holds a committed copy of this rank (%llu bytes): its "
		      "page tables are built while idle, before a restore asks", (unsigned long long)len);
	}
	free(v);
}

/* With d->mu held: an answer other than a grant may still carry an fd. */
static void drop_fd(struct ckpt_daemon *d)
{
	int fd = ckptd_client_take_fd(d->client);
	if (fd >= 0)
		close(fd);
}

int ckpt__daemon_segment_write(ckpt_ctx *ctx, uint64_t version, uint64_t bytes, uint8_t **seg)
{
	struct ckpt_daemon *d = ctx->daemon;
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	uint32_t code = 0;
	*seg = NULL;
	if (!d->unix_link)
		return -CKPT_EUNAVAIL;
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", ctx->job);
	m.u.segment_request.version = version;
	m.u.segment_request.rank = ctx->cfg.rank;
	m.u.segment_request.mode = CKPTD_SEG_WRITE;
	m.u.segment_request.bytes = bytes;
	pthread_mutex_lock(&d->mu);
	/* The agent may hold a WRITE up to its --segment-wait while the job's
	 * pool is prepared, then answers BUSY: this call outlasts that by a
	 * whole call's time, or a loaded rank would give up (and lose its
	 * agent) just as the answer comes. */
	ckptd_client_set_timeout(d->client, (int)(d->seg_wait_ms + CKPTD_CLIENT_DEFAULT_TIMEOUT_MS));
	int err = call_expect(ctx, &m, CKPTD_MSG_SEGMENT_GRANT, &rep, &code);
	ckptd_client_set_timeout(d->client, CKPTD_CLIENT_DEFAULT_TIMEOUT_MS);
	if (err < 0) {
		if (d->broken)
			err = -ENOTCONN;
		else
			drop_fd(d);
		if (err == -EPROTO)
			err = code == CKPTD_ERR_NO_SPACE ? -ENOSPC : code == CKPTD_ERR_STATE ? -EEXIST
			    : code == CKPTD_ERR_DENIED   ? -EACCES : -EPROTO;
		goto out;
	}
	ckptd_segment_grant g = rep.u.segment_grant;
	ckptd_msg_free(&rep);
	if (g.bytes < bytes) {
		drop_fd(d);
		err = -EPROTO;
		goto out;
	}
	uint8_t *p;
	if ((err = map_grant(ctx, &g, 1, &p, NULL)) < 0)
		goto out;
	/* The shard image is written with O_DIRECT straight from here. */
	if ((uintptr_t)p % CKPT_ALIGN) {
		err = -EPROTO;
		goto out;
	}
	*seg = p;
out:
	pthread_mutex_unlock(&d->mu);
	return err;
}

int ckpt__daemon_shard_done(ckpt_ctx *ctx, const ckpt_save_op *op, uint32_t tier, uint64_t bytes, uint64_t sum)
{
	struct ckpt_daemon *d = ctx->daemon;
	ckptd_msg m = { .type = CKPTD_MSG_SHARD_DONE }, rep;
	snprintf(m.u.shard_done.job, sizeof(m.u.shard_done.job), "%s", ctx->job);
	m.u.shard_done.version = op->version;
	m.u.shard_done.rank = ctx->cfg.rank;
	m.u.shard_done.world_size = ctx->cfg.world_size;
	m.u.shard_done.tier = tier;
	m.u.shard_done.bytes = bytes;
	m.u.shard_done.checksum = sum;
	m.u.shard_done.lineage = op->lineage;
	/* What the rank saves to: the coordinator encodes a version for an
	 * rs:K+M group only when its ranks ask for PEER_MEM. */
	m.u.shard_done.tiers = ctx->cfg.tiers & 0xfu;
	/* Timings for the agent's histograms (optional fields). The stall is
	 * known once ckpt_save has returned; a report that beats it omits it. */
	ckpt_save_op *mop = (ckpt_save_op *)op;
	pthread_mutex_lock(&mop->mu);
	m.u.shard_done.stall_ns = op->stall_ns;
	pthread_mutex_unlock(&mop->mu);
	uint64_t now = ckpt__now_ns();
	m.u.shard_done.durable_ns = now > op->t_start ? now - op->t_start : 1;
	pthread_mutex_lock(&d->mu);
	int err = call_expect(ctx, &m, CKPTD_MSG_OK, &rep, NULL);
	if (err < 0 && d->broken)
		err = -ENOTCONN;
	pthread_mutex_unlock(&d->mu);
	if (err == 0)
		ckptd_msg_free(&rep);
	return err;
}

/* With ctx->lock held: 1 committed, -ENOTCONN link lost, 0 not yet. */
static int commit_seen(ckpt_ctx *ctx, uint64_t version, uint32_t tier)
{
	struct ckpt_daemon *d = ctx->daemon;
	int i = notice_find(d, version);
	if (i >= 0 && (d->notices[i].tiers & tier))
		return 1;
	return d->broken ? -ENOTCONN : 0;
}

int ckpt__daemon_wait_commit(ckpt_ctx *ctx, uint64_t version, uint32_t tier, int64_t timeout_ms)
{
	struct ckpt_daemon *d = ctx->daemon;
	uint64_t deadline = ckpt__now_ns() + (timeout_ms > 0 ? (uint64_t)timeout_ms * 1000000u : 0);
	for (;;) {
		pthread_mutex_lock(&ctx->lock);
		int r = commit_seen(ctx, version, tier);
		pthread_mutex_unlock(&ctx->lock);
		if (r)
			return r < 0 ? r : 0;
		if (timeout_ms == 0) {
			/* A test: read what has arrived, unless the link is busy. */
			if (pthread_mutex_trylock(&d->mu) == 0) {
				pthread_mutex_unlock(&d->mu);
				ckpt__daemon_poll(ctx);
				pthread_mutex_lock(&ctx->lock);
				r = commit_seen(ctx, version, tier);
				pthread_mutex_unlock(&ctx->lock);
				if (r)
					return r < 0 ? r : 0;
			}
			return -EAGAIN;
		}
		uint64_t now = ckpt__now_ns();
		if (timeout_ms > 0 && now >= deadline)
			return -ETIMEDOUT;
		/* The notice is read by whoever holds the link: the io thread (only
		 * between its completions), a call in flight, or this waiter, which
		 * watches the socket so that the commit is seen when it arrives.
		 * Frames a call read ahead stay buffered without waking poll(),
		 * hence the bounded slices. */
		int slice = 50;
		if (timeout_ms > 0 && (deadline - now) / 1000000u < (uint64_t)slice)
			slice = (int)((deadline - now) / 1000000u) + 1;
		struct pollfd p = { .fd = ckptd_client_fd(d->client), .events = POLLIN };
		(void)poll(&p, 1, slice);
		ckpt__daemon_poll(ctx);
	}
}

int ckpt__daemon_versions(ckpt_ctx *ctx, uint64_t **out, size_t *nout, uint64_t *lost)
{
	struct ckpt_daemon *d = ctx->daemon;
	uint64_t *v = NULL, start = 0;
	size_t n = 0, cap = 0;
	int err = 0, more = 1;
	*out = NULL;
	*nout = 0;
	if (lost)
		*lost = 0;
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
			if (lost && e->gone && e->world_size == ctx->cfg.world_size && e->version > *lost)
				*lost = e->version;
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

int ckpt__daemon_segment_release(ckpt_ctx *ctx, uint64_t id)
{
	struct ckpt_daemon *d = ctx->daemon;
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_RELEASE }, rep;
	m.u.segment_release.segment_id = id;
	pthread_mutex_lock(&d->mu);
	int err = call_expect(ctx, &m, CKPTD_MSG_OK, &rep, NULL);
	if (err == 0)
		ckptd_msg_free(&rep);
	pthread_mutex_unlock(&d->mu);
	/* Done reading whatever the agent said (a lost link unpins it too). */
	pthread_mutex_lock(&d->pop_mu);
	if (d->readers)
		d->readers--;
	pthread_mutex_unlock(&d->pop_mu);
	return err;
}

int ckpt__daemon_segment_read(ckpt_ctx *ctx, uint64_t version, const uint8_t **buf, uint64_t *len, int *cold,
                              uint64_t *id)
{
	return ckpt__daemon_segment_read_rank(ctx, version, ctx->cfg.rank, buf, len, cold, id);
}

/* A bound on READ's "still rebuilding" answers (8 s of progress each):
 * hours, against an agent that would never stop saying so. */
#define READ_BUSY_TRIES 2048u

int ckpt__daemon_segment_read_rank(ckpt_ctx *ctx, uint64_t version, uint32_t rank, const uint8_t **buf,
                                   uint64_t *len, int *cold, uint64_t *id)
{
	struct ckpt_daemon *d = ctx->daemon;
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	uint8_t *p;
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", ctx->job);
	m.u.segment_request.version = version;
	m.u.segment_request.rank = rank;
	m.u.segment_request.mode = CKPTD_SEG_READ;
	if (!d->unix_link)
		return -CKPT_EUNAVAIL;
	pthread_mutex_lock(&d->mu);
	int err = call_expect(ctx, &m, CKPTD_MSG_SEGMENT_GRANT, &rep, NULL);
	/* BUSY: the agent is rebuilding this shard from its rs group and the
	 * rebuild read more during the last hold (it holds each READ up to 8 s):
	 * asked again for as long as that goes on, the link free in between.
	 * The agent answers as usual once the rebuild ends or stalls. */
	for (unsigned tries = 0; err == -EBUSY && !d->broken && tries < READ_BUSY_TRIES; tries++) {
		if (!tries)
			LOG_I(&ctx->log, version, "daemon: the agent is still rebuilding rank %u's shard; waiting for it", rank);
		pthread_mutex_unlock(&d->mu);
		pthread_mutex_lock(&d->mu);
		err = call_expect(ctx, &m, CKPTD_MSG_SEGMENT_GRANT, &rep, NULL);
	}
	if (err == 0) {
		ckptd_segment_grant g = rep.u.segment_grant;
		ckptd_msg_free(&rep);
		if ((err = map_grant(ctx, &g, 0, &p, cold)) == 0) {
			*buf = p;
			*len = g.bytes;
			*id = g.segment_id;
		}
	} else if (!d->broken) {
		drop_fd(d);
	}
	pthread_mutex_unlock(&d->mu);
	return err;
}

#define STEP_REPORT_NS 1000000000ull /* one report a second at most */

void ckpt__daemon_steps(ckpt_ctx *ctx, int force)
{
	struct ckpt_daemon *d = ctx->daemon;
	if (!d || d->broken)
		return;
	uint64_t now = ckpt__now_ns();
	if (!force && now - ctx->step_sent_ns < STEP_REPORT_NS)
		return;
	pthread_mutex_lock(&ctx->step_mu);
	uint64_t count = ctx->step_count, sum = ctx->step_sum_ns, step = ctx->step_cur;
	uint64_t stall = ctx->step_stall_ns, restore = ctx->step_restore_ns, saves = ctx->step_saves;
	uint64_t errors = ctx->step_errors, skips = ctx->step_peer_skips, ferrs = ctx->step_fabric_errors;
	uint32_t rtier = ctx->step_restore_tier;
	if (count) { /* stalls and restores wait for steps to go with */
		ctx->step_count = 0;
		ctx->step_sum_ns = 0;
		ctx->step_stall_ns = 0;
		ctx->step_restore_ns = 0;
		ctx->step_saves = 0;
		ctx->step_errors = 0;
		ctx->step_peer_skips = 0;
		ctx->step_fabric_errors = 0;
		ctx->step_restore_tier = 0;
	}
	pthread_mutex_unlock(&ctx->step_mu);
	ctx->step_sent_ns = now;
	if (!count)
		return;
	ckptd_msg m = { .type = CKPTD_MSG_STEP_REPORT }, rep;
	snprintf(m.u.step_report.job, sizeof(m.u.step_report.job), "%s", ctx->job);
	m.u.step_report.rank = ctx->cfg.rank;
	m.u.step_report.step = step;
	m.u.step_report.step_ns = sum / count;
	m.u.step_report.count = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
	m.u.step_report.stall_ns = stall;
	m.u.step_report.restore_ns = restore;
	m.u.step_report.saves = saves > UINT32_MAX ? UINT32_MAX : (uint32_t)saves;
	m.u.step_report.errors = errors > UINT32_MAX ? UINT32_MAX : (uint32_t)errors;
	m.u.step_report.restore_tier = restore ? rtier : 0;
	m.u.step_report.peer_skips = skips > UINT32_MAX ? UINT32_MAX : (uint32_t)skips;
	m.u.step_report.fabric_errors = ferrs > UINT32_MAX ? UINT32_MAX : (uint32_t)ferrs;
	pthread_mutex_lock(&d->mu);
	int err = call_expect(ctx, &m, CKPTD_MSG_OK, &rep, NULL);
	pthread_mutex_unlock(&d->mu);
	if (err == 0)
		ckptd_msg_free(&rep);
	else
		LOG_T(&ctx->log, CKPT_NO_VERSION, "daemon: step report not taken: %s", ckpt_strerror(err));
}

/* ---------------------------------------------------------------- partners */

int ckpt__daemon_partners(ckpt_ctx *ctx, uint32_t mode, uint64_t version, ckptd_msg *rep)
{
	return ckpt__daemon_partners_rank(ctx, mode, version, ctx->cfg.rank, rep);
}

int ckpt__daemon_partners_rank(ckpt_ctx *ctx, uint32_t mode, uint64_t version, uint32_t rank, ckptd_msg *rep)
{
	struct ckpt_daemon *d = ctx->daemon;
	if (!d)
		return -CKPT_EUNAVAIL;
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST };
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", ctx->job);
	m.u.segment_request.version = version;
	m.u.segment_request.rank = rank;
	m.u.segment_request.mode = mode;
	pthread_mutex_lock(&d->mu);
	int err = call_expect(ctx, &m, CKPTD_MSG_PARTNERS, rep, NULL);
	pthread_mutex_unlock(&d->mu);
	return err;
}

int ckpt__daemon_dial(ckpt_ctx *ctx, const char *addr, int timeout_ms, ckptd_client **out, char *why, size_t cap)
{
	struct ckpt_daemon *d = ctx->daemon;
	if (!d || !d->secret)
		return -CKPT_EUNAVAIL;
	return ckptd_client_connect(addr, ctx->job, CKPTD_ROLE_RANK, d->secret, timeout_ms, out, why, cap);
}

int ckpt__daemon_map_span(ckpt_ctx *ctx, uint8_t **base, size_t *len)
{
	struct ckpt_daemon *d = ctx->daemon;
	if (!d)
		return -CKPT_EUNAVAIL;
	pthread_mutex_lock(&d->mu);
	*base = d->map.addr;
	*len = d->map.len;
	pthread_mutex_unlock(&d->mu);
	return *base ? 0 : -ENOENT;
}

int ckpt__daemon_preempt(ckpt_ctx *ctx, uint64_t deadline_ns, uint32_t source, const char *text)
{
	struct ckpt_daemon *d = ctx->daemon;
	ckptd_msg m = { .type = CKPTD_MSG_PREEMPT }, rep;
	snprintf(m.u.preempt.job, sizeof(m.u.preempt.job), "%s", ctx->job);
	m.u.preempt.deadline_ns = deadline_ns;
	m.u.preempt.source = source;
	snprintf(m.u.preempt.text, sizeof(m.u.preempt.text), "rank %u: %s", ctx->cfg.rank, text);
	pthread_mutex_lock(&d->mu);
	int err = call_expect(ctx, &m, CKPTD_MSG_OK, &rep, NULL);
	pthread_mutex_unlock(&d->mu);
	if (err == 0)
		ckptd_msg_free(&rep);
	return err;
}

int ckpt__daemon_fabric_host(ckpt_ctx *ctx, char *host, size_t cap)
{
	struct ckpt_daemon *d = ctx->daemon;
	host[0] = 0;
	if (!d || !d->agent_listen[0])
		return -ENOENT;
	const char *l = d->agent_listen, *colon = strrchr(l, ':');
	size_t n = colon ? (size_t)(colon - l) : 0;
	if (n >= 2 && l[0] == '[' && l[n - 1] == ']') {
		l++;
		n -= 2;
	}
	if (!n || n >= cap)
		return -ENOENT;
	memcpy(host, l, n);
	host[n] = 0;
	/* A wildcard names no interface: libfabric's own choice then. */
	if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "*")) {
		host[0] = 0;
		return -ENOENT;
	}
	return 0;
}

void ckpt__daemon_heartbeat(ckpt_ctx *ctx)
{
	struct ckpt_daemon *d = ctx->daemon;
	uint64_t hb = ctx->cfg.heartbeat_timeout_ms;
	if (!d || !hb)
		return;
	pthread_mutex_lock(&d->mu);
	uint64_t now = ckpt__now_ns();
	if (d->broken || !d->joined || now - d->heard_ns < beat_ms(ctx) * 1000000ull ||
	    CKPTD_VERSION_MINOR_OF(ckptd_client_version(d->client)) < 3) { /* HEARTBEAT is 1.3's */
		pthread_mutex_unlock(&d->mu);
		return;
	}
	/* Bounded by the heartbeat timeout: an agent that stopped answering
	 * (hung, stopped) is lost like one whose socket closed. */
	ckptd_msg m = { .type = CKPTD_MSG_HEARTBEAT }, rep;
	ckptd_client_set_timeout(d->client, (int)(hb > INT32_MAX ? INT32_MAX : hb));
	int err = call_expect(ctx, &m, CKPTD_MSG_OK, &rep, NULL);
	ckptd_client_set_timeout(d->client, CKPTD_CLIENT_DEFAULT_TIMEOUT_MS);
	pthread_mutex_unlock(&d->mu);
	if (err == 0)
		ckptd_msg_free(&rep);
	else
		LOG_W(&ctx->log, CKPT_NO_VERSION, "heartbeat to the ckptd agent failed (%s; timeout %llu ms)",
		      ckpt_strerror(err), (unsigned long long)hb);
}

int ckpt__daemon_speaks(ckpt_ctx *ctx, uint32_t minor)
{
	struct ckpt_daemon *d = ctx->daemon;
	if (!d || !d->client)
		return 0;
	return CKPTD_VERSION_MINOR_OF(ckptd_client_version(d->client)) >= minor;
}
