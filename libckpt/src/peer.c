/* The PEER_MEM tier in a rank (peer.h): copies of shard images in partner
 * nodes' DRAM, written and read over libfabric.
 *
 *   save: io thread ── LOCAL_MEM reported ──> ckpt__peer_enqueue
 *         peer thread ── PARTNERS from the agent (best first, with spares)
 *                     ── pins its own image (a READ grant of the segment)
 *                     ── per partner, until `replicas` hold it:
 *                          PEER_LEASE ─ fi_write of the image ─ PEER_COMMIT
 *                          (the partner checks every chunk, then reports
 *                          SHARD_DONE(PEER_MEM) to the coordinator)
 *                     ── a partner that fails (gone, slow, fabric error, a
 *                        refused check) is passed over for the next one
 *   restore: SEG_WHERE (which nodes hold a copy) ── SEGMENT_REQUEST
 *         (PEER_READ) pins it there ── fi_read of header, tail and footer,
 *         then chunk by chunk into staging slots (restore.c checks them)
 *
 * The fabric endpoint is opened with the partner's provider (its PEER_GRANT
 * names it) on first use, and again after any transfer error: a fab that
 * failed may still have operations on our buffers until it is closed. The
 * regions registered with it are the agent pool's mapping (the images),
 * the staging pool (restore's chunks) and a small scratch buffer (headers). */
#include "peer.h"
#include "ctx.h"
#include "daemon.h"
#include "wire/client.h"
#include "format/image_read.h"
#include "fabric.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PEER_CONNS 8
#define SCRATCH_BYTES (1u << 20) /* header, tail and footer of a partner's image */
#define SPARE_MAX 64             /* partners tried for one image at most */

typedef struct peer_conn {
	char addr[CKPTD_ADDR_MAX + 1];
	ckptd_client *c;
} peer_conn;

struct ckpt_peer {
	ckpt_ctx *ctx;
	pthread_t thr;
	int started;
	pthread_mutex_t mu; /* the queue */
	pthread_cond_t cv;
	int stop;
	ckpt_save_op *pending;
	/* The fabric and the partner connections: the peer thread and restores,
	 * one at a time (fab_mu). */
	pthread_mutex_t fab_mu;
	pthread_t early;        /* fab_early, joined at stop */
	int early_started;
	ckpt_fab *fab;
	char provider[CKPTD_PROVIDER_MAX + 1];
	ckpt_fab_mr *seg_mr, *pool_mr, *scratch_mr;
	uint8_t *seg_base;
	size_t seg_len;
	uint8_t *scratch;
	peer_conn conns[PEER_CONNS];
	uint32_t next_conn;
};

static void set_why(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_why(char *why, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, cap, fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- fabric */

/* With fab_mu: closes the endpoint and what is registered with it. */
static void fab_drop(struct ckpt_peer *p)
{
	ckpt_fab_mr_close(p->seg_mr);
	ckpt_fab_mr_close(p->pool_mr);
	ckpt_fab_mr_close(p->scratch_mr);
	p->seg_mr = p->pool_mr = p->scratch_mr = NULL;
	p->seg_base = NULL;
	ckpt_fab_close(p->fab);
	p->fab = NULL;
}

void ckpt__peer_pool_moved(struct ckpt_ctx *ctx)
{
	struct ckpt_peer *p = ctx->peer;
	if (!p)
		return;
	pthread_mutex_lock(&p->fab_mu);
	if (p->fab) {
		LOG_I(&ctx->log, CKPT_NO_VERSION, "peer: the staging pool was resized; the fabric reopens on its next use");
		fab_drop(p);
	}
	pthread_mutex_unlock(&p->fab_mu);
}

/* With fab_mu: an endpoint of the partner's provider, with the agent's pool
 * mapping (when there is one), the staging pool and the scratch buffer
 * registered. */
static int fab_ready(struct ckpt_peer *p, const char *provider, char *why, size_t cap)
{
	ckpt_ctx *ctx = p->ctx;
	char fw[300] = "";
	int r;
	if (p->fab && provider[0] && strcmp(provider, p->provider)) {
		LOG_I(&ctx->log, CKPT_NO_VERSION, "peer: a partner uses %s, not %s; reopening the fabric", provider,
		      p->provider);
		fab_drop(p);
	}
	if (!p->fab) {
		/* Bound to the host of the agent's --listen: the network its
		 * partners reach it on. Left to libfabric, tcp would bind to
		 * whatever FI_TCP_IFACE or its first interface says, and a rank
		 * bound to lo cannot write to another node. */
		char host[CKPTD_ADDR_MAX + 1];
		int have = ckpt__daemon_fabric_host(ctx, host, sizeof(host)) == 0;
		if ((r = ckpt_fab_open(provider[0] ? provider : NULL, have ? host : NULL, 0, &p->fab, fw, sizeof(fw))) < 0) {
			set_why(why, cap, "fabric%s%s: %s", have ? " on " : "", have ? host : "", fw);
			return r;
		}
		snprintf(p->provider, sizeof(p->provider), "%s", ckpt_fab_provider_name(p->fab));
		LOG_I(&ctx->log, CKPT_NO_VERSION, "peer: fabric %s opened on %s", p->provider,
		      have ? host : "libfabric's default interface (the agent named none)");
		if ((r = ckpt_fab_mr_reg(p->fab, p->scratch, SCRATCH_BYTES, CKPT_FAB_LOCAL, &p->scratch_mr, fw,
		                         sizeof(fw))) < 0 ||
		    (r = ckpt_fab_mr_reg(p->fab, ctx->pool.base, ctx->pool.map_bytes, CKPT_FAB_LOCAL, &p->pool_mr, fw,
		                         sizeof(fw))) < 0) {
			set_why(why, cap, "fabric: registering buffers: %s", fw);
			fab_drop(p);
			return r;
		}
	}
	uint8_t *base;
	size_t len;
	if (ckpt__daemon_map_span(ctx, &base, &len) == 0 && base != p->seg_base) {
		ckpt_fab_mr_close(p->seg_mr);
		p->seg_mr = NULL;
		p->seg_base = NULL;
		if ((r = ckpt_fab_mr_reg(p->fab, base, len, CKPT_FAB_LOCAL, &p->seg_mr, fw, sizeof(fw))) < 0) {
			set_why(why, cap, "fabric: registering the agent's pool: %s", fw);
			fab_drop(p);
			return r;
		}
		p->seg_base = base;
		p->seg_len = len;
	}
	return 0;
}

/* With fab_mu: the region a local buffer lies in. */
static ckpt_fab_mr *local_mr(struct ckpt_peer *p, const void *buf)
{
	const uint8_t *b = buf;
	if (p->seg_base && b >= p->seg_base && b < p->seg_base + p->seg_len)
		return p->seg_mr;
	if (b >= p->ctx->pool.base && b < p->ctx->pool.base + p->ctx->pool.map_bytes)
		return p->pool_mr;
	return p->scratch_mr;
}

static void grant_remote(const ckptd_peer_grant *g, ckpt_fab_remote *r)
{
	memset(r, 0, sizeof(*r));
	memcpy(r->addr, g->fabric_addr, g->fabric_addr_len);
	r->addr_len = g->fabric_addr_len;
	r->key = g->key;
	r->base = g->base;
}

/* With fab_mu. A failed transfer leaves the endpoint unusable. */
static int xfer(struct ckpt_peer *p, int op, void *buf, size_t len, const ckpt_fab_remote *r, uint64_t roff,
                char *why, size_t cap)
{
	char fw[300] = "";
	int err = ckpt_fab_xfer(p->fab, op, local_mr(p, buf), buf, len, r, roff, 0, 0,
	                        (int)p->ctx->cfg.peer_timeout_ms, fw, sizeof(fw));
	if (err < 0) {
		set_why(why, cap, "fi_%s: %s", op == CKPT_FAB_WRITE ? "write" : "read", fw[0] ? fw : strerror(-err));
		if (err != -EINVAL)
			fab_drop(p);
		pthread_mutex_lock(&p->ctx->step_mu);
		p->ctx->step_fabric_errors++;
		pthread_mutex_unlock(&p->ctx->step_mu);
	}
	return err;
}

/* ---------------------------------------------------------------- connections */

/* With fab_mu: the control connection to the agent at addr, dialled once. */
static ckptd_client *conn_get(struct ckpt_peer *p, const char *addr, char *why, size_t cap)
{
	for (int i = 0; i < PEER_CONNS; i++)
		if (p->conns[i].c && !strcmp(p->conns[i].addr, addr))
			return p->conns[i].c;
	peer_conn *pc = &p->conns[p->next_conn++ % PEER_CONNS];
	ckptd_client_close(pc->c);
	pc->c = NULL;
	char dw[300] = "";
	int r = ckpt__daemon_dial(p->ctx, addr, (int)p->ctx->cfg.peer_timeout_ms, &pc->c, dw, sizeof(dw));
	if (r < 0) {
		set_why(why, cap, "cannot reach the agent at %s: %s", addr, dw[0] ? dw : ckpt_strerror(r));
		return NULL;
	}
	snprintf(pc->addr, sizeof(pc->addr), "%s", addr);
	return pc->c;
}

static void conn_drop(struct ckpt_peer *p, ckptd_client *c)
{
	for (int i = 0; i < PEER_CONNS; i++)
		if (p->conns[i].c == c) {
			ckptd_client_close(c);
			p->conns[i].c = NULL;
		}
}

/* With fab_mu: one request, one answer of type want. An ERROR answer is
 * -EREMOTEIO with its text in why; a broken connection is dropped. */
static int call(struct ckpt_peer *p, ckptd_client *c, const ckptd_msg *req, uint16_t want, ckptd_msg *rep,
                char *why, size_t cap)
{
	int r = ckptd_client_call(c, req, rep);
	if (r < 0) {
		set_why(why, cap, "%s: %s", ckptd_msg_name(req->type), ckpt_strerror(r));
		conn_drop(p, c);
		return r;
	}
	if (rep->type == want)
		return 0;
	if (rep->type == CKPTD_MSG_ERROR) {
		set_why(why, cap, "%s refused: %s", ckptd_msg_name(req->type), rep->u.error.text);
		r = rep->u.error.code == CKPTD_ERR_NOT_FOUND ? -ENOENT : -EREMOTEIO;
	} else {
		set_why(why, cap, "%s answered with %s", ckptd_msg_name(req->type), ckptd_msg_name(rep->type));
		r = -EPROTO;
	}
	ckptd_msg_free(rep);
	return r;
}

/* ---------------------------------------------------------------- save */

/* Where one partner copy's time went, for the log. */
typedef struct push_times {
	uint64_t lease_ns, write_ns, commit_ns;
} push_times;

/* With fab_mu: op's image onto one partner. [out] pt: the time of each part
 * (the lease, the fi_writes, PEER_COMMIT: the partner's check of every chunk
 * and its record). */
static int push_one(struct ckpt_peer *p, const ckptd_partner *to, ckpt_save_op *op, uint8_t *img, uint64_t len,
                    push_times *pt, char *why, size_t cap)
{
	ckpt_ctx *ctx = p->ctx;
	ckptd_client *c = conn_get(p, to->address, why, cap);
	if (!c)
		return -ECONNREFUSED;
	ckptd_msg m = { .type = CKPTD_MSG_PEER_LEASE }, rep;
	snprintf(m.u.peer_lease.job, sizeof(m.u.peer_lease.job), "%s", ctx->job);
	m.u.peer_lease.version = op->version;
	m.u.peer_lease.rank = ctx->cfg.rank;
	m.u.peer_lease.world_size = ctx->cfg.world_size;
	m.u.peer_lease.bytes = len;
	m.u.peer_lease.lineage = op->lineage;
	uint64_t t0 = ckpt__now_ns();
	int r = call(p, c, &m, CKPTD_MSG_PEER_GRANT, &rep, why, cap);
	if (r < 0)
		return r;
	ckptd_peer_grant g = rep.u.peer_grant;
	ckptd_msg_free(&rep);
	ckpt_fab_remote rem;
	grant_remote(&g, &rem);
	if (g.bytes != len) {
		set_why(why, cap, "the partner leased %llu bytes, not %llu", (unsigned long long)g.bytes,
		        (unsigned long long)len);
		return -EPROTO;
	}
	if ((r = fab_ready(p, g.provider, why, cap)) < 0)
		return r;
	uint64_t t1 = ckpt__now_ns();
	/* Two halves, with a fault point between: tests kill the partner there. */
	uint64_t half = len / 2;
	if ((r = xfer(p, CKPT_FAB_WRITE, img, half, &rem, g.offset, why, cap)) < 0)
		return r;
	if ((r = ckpt__fault(&ctx->faults, "peer.mid_write")) < 0) {
		set_why(why, cap, "fault peer.mid_write");
		return r;
	}
	if ((r = xfer(p, CKPT_FAB_WRITE, img + half, len - half, &rem, g.offset + half, why, cap)) < 0)
		return r;
	ckptd_msg cm = { .type = CKPTD_MSG_PEER_COMMIT };
	cm.u.peer_commit.segment_id = g.segment_id;
	cm.u.peer_commit.bytes = len;
	cm.u.peer_commit.checksum = op->mem_sum;
	uint64_t t2 = ckpt__now_ns();
	if ((r = call(p, c, &cm, CKPTD_MSG_OK, &rep, why, cap)) < 0)
		return r;
	ckptd_msg_free(&rep);
	*pt = (push_times){ t1 - t0, t2 - t1, ckpt__now_ns() - t2 };
	return 0;
}

/* The image of op onto `replicas` partners. Returns how many hold it, or a
 * negative code when none does (why says the last reason). */
static int replicate(struct ckpt_peer *p, ckpt_save_op *op, char *why, size_t cap)
{
	ckpt_ctx *ctx = p->ctx;
	ckptd_msg parts;
	int r = ckpt__daemon_partners(ctx, CKPTD_SEG_PARTNERS, op->version, &parts);
	if (r < 0) {
		set_why(why, cap, "the agent gave no partners: %s", ckpt_strerror(r));
		return r;
	}
	uint32_t want = parts.u.partners.replicas ? parts.u.partners.replicas : 1, got = 0;
	if (!strncmp(parts.u.partners.scheme, "rs:", 3)) {
		/* The node's rs group makes the parity from the LOCAL_MEM copy:
		 * nothing to send; the commit at PEER_MEM says when it is done. */
		LOG_I(&ctx->log, op->version, "PEER_MEM: this node's %s group protects the image", parts.u.partners.scheme);
		ckptd_msg_free(&parts);
		return 1;
	}
	if (!parts.u.partners.count) {
		set_why(why, cap, "no partner node has a peer pool (ckptd --peer-pool-size) and is up");
		ckptd_msg_free(&parts);
		return -CKPT_EUNAVAIL;
	}
	const uint8_t *img;
	uint64_t len, id;
	int cold;
	if ((r = ckpt__daemon_segment_read(ctx, op->version, &img, &len, &cold, &id)) < 0) {
		set_why(why, cap, "the LOCAL_MEM copy to send is gone: %s", ckpt_strerror(r));
		ckptd_msg_free(&parts);
		return r;
	}
	if (cold)
		ckpt__daemon_fault_in(img, len);
	pthread_mutex_lock(&p->fab_mu);
	for (uint32_t i = 0; i < parts.u.partners.count && i < SPARE_MAX && got < want; i++) {
		const ckptd_partner *to = &parts.u.partners.entries[i];
		uint64_t t0 = ckpt__now_ns();
		char w[512] = "";
		push_times pt;
		r = push_one(p, to, op, (uint8_t *)img, len, &pt, w, sizeof(w));
		if (r == 0) {
			got++;
			LOG_I(&ctx->log, op->version, "PEER_MEM copy on %s (%llu bytes in %.1f ms); lease %.1f ms, "
			      "fi_write %.1f ms, PEER_COMMIT %.1f ms (the partner's check)", to->node, (unsigned long long)len,
			      (ckpt__now_ns() - t0) / 1e6, pt.lease_ns / 1e6, pt.write_ns / 1e6, pt.commit_ns / 1e6);
		} else {
			LOG_W(&ctx->log, op->version, "PEER_MEM copy on %s failed: %s%s", to->node, w,
			      i + 1 < parts.u.partners.count ? "; trying the next partner" : "");
			set_why(why, cap, "%s: %s", to->node, w);
		}
	}
	pthread_mutex_unlock(&p->fab_mu);
	ckpt__daemon_segment_release(ctx, id);
	ckptd_msg_free(&parts);
	if (got && got < want)
		LOG_W(&ctx->log, op->version, "PEER_MEM: %u of %u copies made", got, want);
	return got ? (int)got : (r < 0 ? r : -EIO);
}

void ckpt__peer_settle(ckpt_save_op *op, int err)
{
	pthread_mutex_lock(&op->mu);
	if (op->peer_state == 0) {
		op->peer_state = err ? -1 : 1;
		op->peer_error = err;
		op->peer_ns = ckpt__now_ns() - op->t_start;
		pthread_cond_broadcast(&op->cond);
	}
	pthread_mutex_unlock(&op->mu);
}

static void count_skip(ckpt_ctx *ctx)
{
	pthread_mutex_lock(&ctx->step_mu);
	ctx->step_peer_skips++;
	pthread_mutex_unlock(&ctx->step_mu);
}

/* Opens the fabric before anyone needs it: in a new process that takes
 * 0.1-0.4 s (libfabric loaded, its providers probed, buffers registered),
 * which a restart's restore from partner DRAM, or the first copy, would
 * otherwise wait for. On a thread of its own, so that the copy thread still
 * takes the first save as it comes (and waits on fab_mu, as whoever needs
 * the fabric first does). A partner that grants with another provider gets
 * the fabric reopened. */
static void *fab_early(void *arg)
{
	struct ckpt_peer *p = arg;
	char why[400] = "";
	uint64_t t0 = ckpt__now_ns();
	pthread_mutex_lock(&p->fab_mu);
	int r = p->fab ? 0 : fab_ready(p, "", why, sizeof(why));
	pthread_mutex_unlock(&p->fab_mu);
	if (r < 0)
		LOG_I(&p->ctx->log, CKPT_NO_VERSION, "peer: fabric not opened ahead of use (%s); tried again when needed",
		      why);
	else
		LOG_T(&p->ctx->log, CKPT_NO_VERSION, "peer: fabric opened ahead of use in %.1f ms", (ckpt__now_ns() - t0) / 1e6);
	return NULL;
}

static void *peer_main(void *arg)
{
	struct ckpt_peer *p = arg;
	ckpt_ctx *ctx = p->ctx;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && !p->pending)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop)
			break;
		ckpt_save_op *op = p->pending;
		p->pending = NULL;
		pthread_mutex_unlock(&p->mu);
		char why[600] = "";
		int r = replicate(p, op, why, sizeof(why));
		if (r < 0) {
			LOG_W(&ctx->log, op->version, "PEER_MEM skipped: %s", why);
			count_skip(ctx);
		}
		ckpt__peer_settle(op, r < 0 ? r : 0);
		ckpt__op_release(op);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

void ckpt__peer_enqueue(ckpt_ctx *ctx, ckpt_save_op *op)
{
	struct ckpt_peer *p = ctx->peer;
	if (!p) {
		ckpt__peer_settle(op, -CKPT_EUNAVAIL);
		return;
	}
	ckpt__op_ref(op);
	pthread_mutex_lock(&p->mu);
	ckpt_save_op *old = p->pending;
	p->pending = op;
	op->peer_queued = 1;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (old) {
		/* The partners are slower than the saves: the newer image goes
		 * first, the older one is not copied (bounded, never a queue). */
		LOG_W(&ctx->log, old->version, "PEER_MEM skipped: version %llu is newer and the partners are still "
		      "busy with an earlier copy", (unsigned long long)op->version);
		count_skip(ctx);
		ckpt__peer_settle(old, -CKPT_ESKIPPED);
		ckpt__op_release(old);
	}
}

int ckpt__peer_start(ckpt_ctx *ctx)
{
	if (!(ctx->cfg.tiers & CKPT_TIER_PEER_MEM) || !ctx->daemon)
		return 0;
	if (!ctx->mem_tier) {
		LOG_W(&ctx->log, CKPT_NO_VERSION, "PEER_MEM needs LOCAL_MEM (the image partners receive is built in the "
		      "agent's DRAM): add local_mem to the tiers and reach the agent on its Unix socket");
		return 0;
	}
	struct ckpt_peer *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ctx = ctx;
	p->scratch = mmap(NULL, SCRATCH_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p->scratch == MAP_FAILED) {
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_mutex_init(&p->fab_mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	int r = -pthread_create(&p->thr, NULL, peer_main, p);
	if (r < 0) {
		munmap(p->scratch, SCRATCH_BYTES);
		free(p);
		return r;
	}
	p->started = 1;
	p->early_started = pthread_create(&p->early, NULL, fab_early, p) == 0;
	ctx->peer = p;
	return 0;
}

void ckpt__peer_stop(ckpt_ctx *ctx)
{
	struct ckpt_peer *p = ctx->peer;
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	ckpt_save_op *old = p->pending;
	p->pending = NULL;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thr, NULL);
	if (old) {
		ckpt__peer_settle(old, -ECANCELED);
		ckpt__op_release(old);
	}
	if (p->early_started)
		pthread_join(p->early, NULL);
	fab_drop(p);
	for (int i = 0; i < PEER_CONNS; i++)
		ckptd_client_close(p->conns[i].c);
	munmap(p->scratch, SCRATCH_BYTES);
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->fab_mu);
	pthread_cond_destroy(&p->cv);
	free(p);
	ctx->peer = NULL;
}

/* ---------------------------------------------------------------- restore */

int ckpt__peer_where(ckpt_ctx *ctx, uint64_t version, ckpt_peer_loc **out, size_t *n)
{
	return ckpt__peer_where_rank(ctx, version, ctx->cfg.rank, out, n);
}

int ckpt__peer_where_rank(ckpt_ctx *ctx, uint64_t version, uint32_t rank, ckpt_peer_loc **out, size_t *n)
{
	ckptd_msg rep;
	*out = NULL;
	*n = 0;
	int r = ckpt__daemon_partners_rank(ctx, CKPTD_SEG_WHERE, version, rank, &rep);
	if (r < 0)
		return r;
	uint32_t k = rep.u.partners.count;
	ckpt_peer_loc *l = calloc(k ? k : 1, sizeof(*l));
	if (!l) {
		ckptd_msg_free(&rep);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < k; i++) {
		snprintf(l[i].node, sizeof(l[i].node), "%s", rep.u.partners.entries[i].node);
		snprintf(l[i].addr, sizeof(l[i].addr), "%s", rep.u.partners.entries[i].address);
	}
	ckptd_msg_free(&rep);
	*out = l;
	*n = k;
	return 0;
}

int ckpt__peer_open(ckpt_ctx *ctx, uint64_t version, const char *addr, const char *node, ckpt_peer_read *pr,
                    char *why, size_t cap)
{
	return ckpt__peer_open_rank(ctx, version, ctx->cfg.rank, addr, node, pr, why, cap);
}

int ckpt__peer_open_rank(ckpt_ctx *ctx, uint64_t version, uint32_t rank, const char *addr, const char *node,
                         ckpt_peer_read *pr, char *why, size_t cap)
{
	struct ckpt_peer *p = ctx->peer;
	memset(pr, 0, sizeof(*pr));
	pr->s.fd = -1;
	pr->t_open_ns = ckpt__now_ns();
	snprintf(pr->node, sizeof(pr->node), "%s", node);
	if (!p) {
		set_why(why, cap, "this context does not use PEER_MEM (tiers)");
		return -CKPT_EUNAVAIL;
	}
	pthread_mutex_lock(&p->fab_mu);
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", ctx->job);
	m.u.segment_request.version = version;
	m.u.segment_request.rank = rank;
	m.u.segment_request.mode = CKPTD_SEG_PEER_READ;
	ckptd_client *c = conn_get(p, addr, why, cap);
	int r = c ? call(p, c, &m, CKPTD_MSG_PEER_GRANT, &rep, why, cap) : -ECONNREFUSED;
	if (r < 0)
		goto out;
	ckptd_peer_grant g = rep.u.peer_grant;
	ckptd_msg_free(&rep);
	pr->conn = c;
	pr->slot = g.segment_id;
	pr->off = g.offset;
	pr->bytes = g.bytes;
	_Static_assert(sizeof(pr->remote) >= sizeof(ckpt_fab_remote), "remote too small");
	grant_remote(&g, (ckpt_fab_remote *)pr->remote);
	uint64_t f0 = ckpt__now_ns();
	r = fab_ready(p, g.provider, why, cap);
	pr->fab_ns = ckpt__now_ns() - f0;
	if (r < 0)
		goto out;
	const ckpt_fab_remote *rem = (const ckpt_fab_remote *)pr->remote;
	ckpt_image im;
	r = ckpt__image_open(p->fab, rem, pr->off, g.bytes, p->scratch, p->scratch_mr, SCRATCH_BYTES,
	                     (int)ctx->cfg.peer_timeout_ms, &im, why, cap);
	if (r < 0) {
		ckpt__image_close(&im);
		if (r != -CKPT_ECORRUPT && r != -CKPT_EFORMAT && r != -ENOMEM)
			fab_drop(p); /* a fabric error: the endpoint is unusable */
		goto out;
	}
	pr->s = im.s;
	pr->seals = im.seals;
	pr->seals_bad = im.seals_bad;
	pr->open_ns = ckpt__now_ns() - pr->t_open_ns;
out:
	pthread_mutex_unlock(&p->fab_mu);
	if (r < 0)
		ckpt__peer_close(ctx, pr);
	return r;
}

int ckpt__peer_pread(ckpt_ctx *ctx, ckpt_peer_read *pr, uint64_t off, size_t len, void *buf, char *why, size_t cap)
{
	struct ckpt_peer *p = ctx->peer;
	if (off > pr->bytes || len > pr->bytes - off) {
		set_why(why, cap, "chunk at %llu (+%zu) beyond the partner's copy", (unsigned long long)off, len);
		return -CKPT_ECORRUPT;
	}
	pthread_mutex_lock(&p->fab_mu);
	uint64_t t0 = ckpt__now_ns();
	int r = p->fab ? 0 : fab_ready(p, "", why, cap);
	if (r == 0)
		r = xfer(p, CKPT_FAB_READ, buf, len, (const ckpt_fab_remote *)pr->remote, pr->off + off, why, cap);
	pthread_mutex_unlock(&p->fab_mu);
	if (r == 0) {
		pr->read_ns += ckpt__now_ns() - t0;
		pr->read_bytes += len;
	}
	return r;
}

void ckpt__peer_close(ckpt_ctx *ctx, ckpt_peer_read *pr)
{
	struct ckpt_peer *p = ctx->peer;
	if (p && pr->conn && pr->slot) {
		pthread_mutex_lock(&p->fab_mu);
		ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_RELEASE }, rep;
		m.u.segment_release.segment_id = pr->slot;
		char why[200];
		/* The connection may have been dropped meanwhile: then the partner
		 * unpinned it when the session went. */
		for (int i = 0; i < PEER_CONNS; i++)
			if (p->conns[i].c == pr->conn && call(p, pr->conn, &m, CKPTD_MSG_OK, &rep, why, sizeof(why)) == 0)
				ckptd_msg_free(&rep);
		pthread_mutex_unlock(&p->fab_mu);
	}
	/* Where a restore from this partner spent its time; the rest of it is
	 * the checks and copies of the chunks (restore.c). */
	if (pr->read_bytes)
		LOG_I(&ctx->log, pr->s.header.version, "PEER_MEM copy on %s read (%llu bytes in %.1f ms); open %.1f ms "
		      "(fabric %.1f ms), fi_read %.1f ms", pr->node, (unsigned long long)pr->read_bytes,
		      (ckpt__now_ns() - pr->t_open_ns) / 1e6, pr->open_ns / 1e6, pr->fab_ns / 1e6, pr->read_ns / 1e6);
	ckpt__shard_close(&pr->s);
	free(pr->seals);
	pr->seals = NULL;
	pr->conn = NULL;
	pr->slot = 0;
}

int ckpt__peer_needs_mr(ckpt_ctx *ctx)
{
	struct ckpt_peer *p = ctx->peer;
	pthread_mutex_lock(&p->fab_mu);
	int need = p->fab ? ckpt_fab_needs_local_mr(p->fab) : 1;
	pthread_mutex_unlock(&p->fab_mu);
	return need;
}

ckpt_fab_mr *ckpt__peer_mr(ckpt_ctx *ctx, void *buf, size_t len)
{
	struct ckpt_peer *p = ctx->peer;
	ckpt_fab_mr *mr = NULL;
	char fw[300] = "";
	pthread_mutex_lock(&p->fab_mu);
	if (p->fab && ckpt_fab_mr_reg(p->fab, buf, len, CKPT_FAB_LOCAL, &mr, fw, sizeof(fw)) < 0) {
		LOG_I(&ctx->log, CKPT_NO_VERSION, "peer: a region of %zu bytes cannot be registered (%s): it is read "
		      "through staging", len, fw);
		mr = NULL;
	}
	pthread_mutex_unlock(&p->fab_mu);
	return mr;
}

void ckpt__peer_mr_close(ckpt_ctx *ctx, ckpt_fab_mr *mr)
{
	struct ckpt_peer *p = ctx->peer;
	if (!mr)
		return;
	pthread_mutex_lock(&p->fab_mu);
	/* A dropped fab closed its regions with it. */
	if (p->fab)
		ckpt_fab_mr_close(mr);
	pthread_mutex_unlock(&p->fab_mu);
}

int ckpt__peer_fetch(ckpt_ctx *ctx, ckpt_peer_read *pr, ckpt_fab_piece *pc, size_t n, void *const *bounce,
                     unsigned nbounce, unsigned threads, ckpt_fab_landed_fn landed, void *arg, char *why, size_t cap)
{
	struct ckpt_peer *p = ctx->peer;
	for (size_t i = 0; i < n; i++) {
		if (pc[i].roff > pr->bytes || pc[i].len > pr->bytes - pc[i].roff) {
			set_why(why, cap, "chunk at %llu (+%zu) beyond the partner's copy", (unsigned long long)pc[i].roff,
			        pc[i].len);
			return -CKPT_ECORRUPT;
		}
		pc[i].roff += pr->off;
	}
	pthread_mutex_lock(&p->fab_mu);
	uint64_t t0 = ckpt__now_ns();
	int r = p->fab ? 0 : fab_ready(p, "", why, cap);
	char fw[300] = "";
	if (r == 0) {
		ckpt_fab_fetch_opts o = { .size = sizeof(o), .threads = threads, .bounce = bounce,
		                          .bounce_mr = p->pool_mr, .bounce_bytes = ctx->pool.slot_bytes,
		                          .nbounce = nbounce, .timeout_ms = (int)ctx->cfg.peer_timeout_ms };
		r = ckpt_fab_fetch(p->fab, (const ckpt_fab_remote *)pr->remote, pc, n, &o, landed, arg, fw, sizeof(fw));
		if (r < 0 && fw[0])
			set_why(why, cap, "fi_read: %s", fw);
		if (r < 0 && ckpt_fab_broken(p->fab)) {
			/* The fetch broke the endpoint: reads may still be in flight. */
			fab_drop(p);
			pthread_mutex_lock(&ctx->step_mu);
			ctx->step_fabric_errors++;
			pthread_mutex_unlock(&ctx->step_mu);
		}
	}
	pthread_mutex_unlock(&p->fab_mu);
	for (size_t i = 0; i < n; i++)
		pc[i].roff -= pr->off;
	if (r == 0) {
		pr->read_ns += ckpt__now_ns() - t0;
		for (size_t i = 0; i < n; i++)
			pr->read_bytes += pc[i].len;
	}
	return r;
}
