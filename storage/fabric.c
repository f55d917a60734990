/* libfabric RMA for the peer-DRAM tier; see fabric.h. With fabric_fetch.c
 * (pipelined reads) the only files that include <rdma/...> (through
 * fabric_int.h): what a provider asks of us (mr_mode bits, keys, progress)
 * is honoured here, as fi_getinfo(3) and fi_mr(3) describe. */
#include "fabric_int.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- errors ------------------------------------------------------------ */

/* libfabric errors above FI_ERRNO_OFFSET have no errno; they become -EIO. */
int ckpt__fab_errno(long fi_rc)
{
	long e = fi_rc < 0 ? -fi_rc : fi_rc;
	return -(int)(e > 0 && e < FI_ERRNO_OFFSET ? e : EIO);
}

/* Every fabric object comes from the loaded library, so it is there by the
 * time any error about one is described. */
const char *ckpt__fab_strerror(int e)
{
	const ckpt_fab_lib *l = ckpt__fab_lib(NULL, 0);
	return l ? l->strerror(e) : "libfabric not loaded";
}

int ckpt__fab_fail(char *err, size_t cap, int rc, const char *fmt, ...)
{
	if (err && cap) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, cap, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* "what: <fi_strerror text>", returning the errno equivalent of fi_rc. */
int ckpt__fab_fi_fail(char *err, size_t cap, long fi_rc, const char *what)
{
	return ckpt__fab_fail(err, cap, ckpt__fab_errno(fi_rc), "%s: %s (%ld)", what,
	                ckpt__fab_strerror((int)(fi_rc < 0 ? -fi_rc : fi_rc)), fi_rc);
}

int64_t ckpt__fab_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --- opening ----------------------------------------------------------- */

/* Legacy FI_MR_BASIC / FI_MR_SCALABLE and the old FI_LOCAL_MR mode bit,
 * turned into today's bits (fi_mr(3), "Basic Memory Registration"). */
static uint64_t fab_mr_mode(const struct fi_info *i)
{
	uint64_t m = (uint64_t)i->domain_attr->mr_mode;
	if (m == FI_MR_BASIC)
		m = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	else if (m == FI_MR_SCALABLE)
		m = 0;
	if (i->mode & FI_LOCAL_MR)
		m |= FI_MR_LOCAL;
	return m;
}

static struct fi_info *fab_hints(const ckpt_fab_lib *l, const char *provider, int dc)
{
	struct fi_info *h = l->dupinfo(NULL); /* fi_allocinfo() */
	if (!h)
		return NULL;
	h->caps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	h->mode = FI_CONTEXT | FI_CONTEXT2; /* every op carries a fi_context2 */
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = FAB_MR_WANT;
	h->domain_attr->threading = FI_THREAD_SAFE;
	if (dc)
		h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	if (provider && !(h->fabric_attr->prov_name = strdup(provider))) {
		l->freeinfo(h);
		return NULL;
	}
	return h;
}

/* Providers matching our needs, asking first for writes that complete only
 * once delivered to the peer's memory, then without. *dc says which. */
static int fab_getinfo(const ckpt_fab_lib *l, const char *provider, const char *host, struct fi_info **list,
                       int *dc)
{
	int rc = -FI_ENODATA;
	for (*dc = 1; *dc >= 0; (*dc)--) {
		struct fi_info *h = fab_hints(l, provider, *dc);
		if (!h)
			return -FI_ENOMEM;
		rc = l->getinfo(FAB_API, host, NULL, host ? FI_SOURCE : 0, h, list);
		l->freeinfo(h);
		if (rc != -FI_ENODATA)
			return rc;
	}
	*dc = 0;
	return rc;
}

static int fab_check_mr_mode(ckpt_fab *f, char *err, size_t cap)
{
	uint64_t extra = f->mr_mode & ~(uint64_t)FAB_MR_WANT;
	const char *prov = f->info->fabric_attr->prov_name;
	if (f->mr_mode & FI_MR_RAW)
		return ckpt__fab_fail(err, cap, -ENOTSUP, "provider %s needs raw memory keys "
		                "(FI_MR_RAW), which ckpt_fab does not support", prov);
	if (extra)
		return ckpt__fab_fail(err, cap, -ENOTSUP, "provider %s needs mr_mode bits %#llx "
		                "that ckpt_fab does not support", prov, (unsigned long long)extra);
	return 0;
}

/* A CQ with a wait object lets waits sleep; a provider without one (efa)
 * gets a CQ that we poll. A "yield" wait object is a spin anyway, and
 * libfabric 1.17's ignores fi_cq_sread's timeout (shm): we poll that too. */
static int fab_open_cq(ckpt_fab *f)
{
	struct fi_cq_attr a = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_UNSPEC };
	int rc = fi_cq_open(f->domain, &a, &f->cq, NULL);
	if (rc) {
		a.wait_obj = FI_WAIT_NONE;
		rc = fi_cq_open(f->domain, &a, &f->cq, NULL);
	}
	f->cq_wait = a.wait_obj != FI_WAIT_NONE && a.wait_obj != FI_WAIT_YIELD;
	return rc;
}

static int fab_open_ep(ckpt_fab *f, char *err, size_t cap)
{
	struct fi_av_attr aa = { .type = f->info->domain_attr->av_type, .count = 64 };
	int rc;
	if ((rc = ckpt__fab_lib(NULL, 0)->fabric(f->info->fabric_attr, &f->fabric, NULL)))
		return ckpt__fab_fi_fail(err, cap, rc, "fi_fabric");
	if ((rc = fi_domain(f->fabric, f->info, &f->domain, NULL)))
		return ckpt__fab_fi_fail(err, cap, rc, "fi_domain");
	if ((rc = fab_open_cq(f)))
		return ckpt__fab_fi_fail(err, cap, rc, "fi_cq_open");
	if ((rc = fi_av_open(f->domain, &aa, &f->av, NULL)))
		return ckpt__fab_fi_fail(err, cap, rc, "fi_av_open");
	if ((rc = fi_endpoint(f->domain, f->info, &f->ep, NULL)))
		return ckpt__fab_fi_fail(err, cap, rc, "fi_endpoint");
	if ((rc = fi_ep_bind(f->ep, &f->av->fid, 0)))
		return ckpt__fab_fi_fail(err, cap, rc, "fi_ep_bind(av)");
	/* RECV too: some providers progress RMA aimed at us through it. */
	if ((rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV)))
		return ckpt__fab_fi_fail(err, cap, rc, "fi_ep_bind(cq)");
	if ((rc = fi_enable(f->ep)))
		return ckpt__fab_fi_fail(err, cap, rc, "fi_enable");
	size_t len = sizeof(f->addr);
	if ((rc = fi_getname(&f->ep->fid, f->addr, &len)))
		return ckpt__fab_fi_fail(err, cap, rc, "fi_getname");
	f->addr_len = (uint32_t)len;
	return 0;
}

/* Manual progress means RMA aimed at a passive fab moves only while
 * someone reads its CQ. Nothing completes there (RMA targets get no
 * completions); error entries are dropped, the initiator hears of them. */
static void *fab_progress_main(void *arg)
{
	ckpt_fab *f = arg;
	struct fi_cq_entry ev[FAB_CQ_BATCH];
	struct timespec idle = { 0, FAB_IDLE_NS };
	while (!atomic_load(&f->stop)) {
		ssize_t n = f->cq_wait ? fi_cq_sread(f->cq, ev, FAB_CQ_BATCH, NULL, 100)
		                       : fi_cq_read(f->cq, ev, FAB_CQ_BATCH);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry e = { 0 };
			fi_cq_readerr(f->cq, &e, 0);
		} else if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT) {
			if (!f->cq_wait)
				nanosleep(&idle, NULL);
		} else if (n < 0) {
			nanosleep(&(struct timespec){ 0, 1000000L }, NULL); /* no spin on odd errors */
		}
	}
	return NULL;
}

static void fab_free(ckpt_fab *f)
{
	if (f->thread_on) {
		atomic_store(&f->stop, 1);
		if (f->cq_wait)
			fi_cq_signal(f->cq);
		pthread_join(f->thread, NULL);
	}
	/* The endpoint first: once it is closed no operation touches memory. */
	if (f->ep)
		fi_close(&f->ep->fid);
	while (f->mrs) {
		ckpt_fab_mr *m = f->mrs;
		f->mrs = m->next;
		fi_close(&m->mr->fid);
		free(m);
	}
	if (f->av)
		fi_close(&f->av->fid);
	if (f->cq)
		fi_close(&f->cq->fid);
	if (f->domain)
		fi_close(&f->domain->fid);
	if (f->fabric)
		fi_close(&f->fabric->fid);
	if (f->info)
		ckpt__fab_lib(NULL, 0)->freeinfo(f->info);
	pthread_mutex_destroy(&f->lock);
	free(f->peers);
	free(f);
}

static int fab_open_one(const struct fi_info *i, int passive, int dc, ckpt_fab **out,
                        char *err, size_t cap)
{
	ckpt_fab *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->lock, NULL);
	f->passive = passive;
	f->next_key = 1;
	f->wflags = dc ? FI_DELIVERY_COMPLETE : 0;
	for (int s = CKPT_FAB_DEPTH_MAX - 1; s >= 0; s--) {
		f->slots[s].next_free = f->free_slots;
		f->free_slots = &f->slots[s];
	}
	int rc = -ENOMEM;
	if (!(f->info = ckpt__fab_lib(NULL, 0)->dupinfo(i)))
		goto fail;
	f->mr_mode = fab_mr_mode(f->info);
	if ((rc = fab_check_mr_mode(f, err, cap)) || (rc = fab_open_ep(f, err, cap)))
		goto fail;
	if (passive && f->info->domain_attr->data_progress != FI_PROGRESS_AUTO) {
		if ((rc = -pthread_create(&f->thread, NULL, fab_progress_main, f))) {
			ckpt__fab_fail(err, cap, rc, "progress thread: %s", strerror(-rc));
			goto fail;
		}
		f->thread_on = 1;
	}
	*out = f;
	return 0;
fail:
	fab_free(f);
	return rc;
}

int ckpt_fab_open(const char *provider, const char *host, int passive, ckpt_fab **out,
                  char *err, size_t errcap)
{
	if (!out)
		return ckpt__fab_fail(err, errcap, -EINVAL, "ckpt_fab_open: out is NULL");
	*out = NULL;
	if (!provider || !*provider)
		provider = getenv("CKPT_FABRIC_PROVIDER");
	if (provider && !*provider)
		provider = NULL;
	char why[256] = "";
	const ckpt_fab_lib *l = ckpt__fab_lib(why, sizeof(why));
	if (!l)
		return ckpt__fab_fail(err, errcap, -ENODATA, "no libfabric: %s", why);
	struct fi_info *list = NULL;
	int dc, rc = fab_getinfo(l, provider, host, &list, &dc);
	if (rc == -FI_ENODATA)
		return ckpt__fab_fail(err, errcap, -ENODATA, "no libfabric provider%s%s offers RMA on "
		                "FI_EP_RDM at %s: %s", provider ? " " : "", provider ? provider : "",
		                host ? host : "any address", ckpt__fab_strerror(FI_ENODATA));
	if (rc)
		return ckpt__fab_fi_fail(err, errcap, rc, "fi_getinfo");
	/* The first that opens: a provider can list a device it cannot use. */
	rc = -ENODATA;
	for (struct fi_info *i = list; i && rc; i = i->next)
		rc = fab_open_one(i, passive, dc, out, err, errcap);
	l->freeinfo(list);
	return rc;
}

void ckpt_fab_close(ckpt_fab *f)
{
	if (f)
		fab_free(f);
}

int ckpt_fab_broken(const ckpt_fab *f)
{
	return f && f->broken;
}

int ckpt_fab_needs_local_mr(const ckpt_fab *f)
{
	return f && (f->mr_mode & FI_MR_LOCAL) != 0;
}

const char *ckpt_fab_provider_name(const ckpt_fab *f)
{
	return f ? f->info->fabric_attr->prov_name : NULL;
}

/* --- memory regions ---------------------------------------------------- */

static uint64_t fab_access(unsigned access)
{
	uint64_t a = 0;
	if (access & CKPT_FAB_LOCAL)
		a |= FI_READ | FI_WRITE; /* sink of a read, source of a write */
	if (access & CKPT_FAB_REMOTE_WRITE)
		a |= FI_REMOTE_WRITE;
	if (access & CKPT_FAB_REMOTE_READ)
		a |= FI_REMOTE_READ;
	return a;
}

/* FI_MR_ENDPOINT: a region works only once bound to the endpoint. */
static int fab_mr_bind(ckpt_fab *f, ckpt_fab_mr *m, char *err, size_t cap)
{
	int rc;
	if (!(f->mr_mode & FI_MR_ENDPOINT))
		return 0;
	if ((rc = fi_mr_bind(m->mr, &f->ep->fid, 0)))
		return ckpt__fab_fi_fail(err, cap, rc, "fi_mr_bind");
	if ((rc = fi_mr_enable(m->mr)))
		return ckpt__fab_fi_fail(err, cap, rc, "fi_mr_enable");
	return 0;
}

int ckpt_fab_mr_reg(ckpt_fab *f, void *buf, size_t len, unsigned access, ckpt_fab_mr **out,
                    char *err, size_t errcap)
{
	if (!f || !buf || !len || !out || !fab_access(access))
		return ckpt__fab_fail(err, errcap, -EINVAL, "ckpt_fab_mr_reg: bad arguments");
	ckpt_fab_mr *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->f = f;
	m->buf = buf;
	m->len = len;
	m->access = access;
	pthread_mutex_lock(&f->lock);
	uint64_t want_key = f->next_key++; /* ignored under FI_MR_PROV_KEY */
	pthread_mutex_unlock(&f->lock);
	int rc = fi_mr_reg(f->domain, buf, len, fab_access(access), 0, want_key, 0, &m->mr, NULL);
	if (rc) {
		free(m);
		return ckpt__fab_fi_fail(err, errcap, rc, "fi_mr_reg");
	}
	if ((rc = fab_mr_bind(f, m, err, errcap)))
		goto fail;
	m->key = fi_mr_key(m->mr);
	if (m->key == FI_KEY_NOTAVAIL) {
		rc = ckpt__fab_fail(err, errcap, -ENOTSUP, "fi_mr_key: no key available");
		goto fail;
	}
	pthread_mutex_lock(&f->lock);
	m->next = f->mrs;
	if (f->mrs)
		f->mrs->prev = m;
	f->mrs = m;
	pthread_mutex_unlock(&f->lock);
	*out = m;
	return 0;
fail:
	fi_close(&m->mr->fid);
	free(m);
	return rc;
}

void ckpt_fab_mr_close(ckpt_fab_mr *m)
{
	if (!m)
		return;
	ckpt_fab *f = m->f;
	/* Under FI_MR_ENDPOINT a region may refuse (-FI_EBUSY) while its
	 * endpoint is open: it then stays listed and ckpt_fab_close closes it. */
	if (fi_close(&m->mr->fid))
		return;
	pthread_mutex_lock(&f->lock);
	if (m->prev)
		m->prev->next = m->next;
	else
		f->mrs = m->next;
	if (m->next)
		m->next->prev = m->prev;
	pthread_mutex_unlock(&f->lock);
	free(m);
}

int ckpt_fab_mr_remote(ckpt_fab *f, const ckpt_fab_mr *mr, ckpt_fab_remote *r)
{
	if (!f || !mr || !r || mr->f != f)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	memcpy(r->addr, f->addr, f->addr_len);
	r->addr_len = f->addr_len;
	r->key = mr->key;
	r->base = (f->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)mr->buf : 0;
	return 0;
}

/* --- transfers --------------------------------------------------------- */

/* The peer's fi_addr_t, inserting its address into the AV the first time. */
int ckpt__fab_peer(ckpt_fab *f, const ckpt_fab_remote *r, fi_addr_t *fa, char *err, size_t cap)
{
	for (unsigned i = 0; i < f->npeers; i++) {
		struct fab_peer *p = &f->peers[i];
		if (p->len == r->addr_len && !memcmp(p->addr, r->addr, p->len)) {
			*fa = p->fa;
			return 0;
		}
	}
	if (f->npeers == f->peer_cap) {
		unsigned n = f->peer_cap ? f->peer_cap * 2 : 8;
		struct fab_peer *p = realloc(f->peers, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		f->peers = p;
		f->peer_cap = n;
	}
	struct fab_peer *p = &f->peers[f->npeers];
	int rc = fi_av_insert(f->av, r->addr, 1, &p->fa, 0, NULL);
	if (rc != 1)
		return ckpt__fab_fail(err, cap, -EINVAL, "fi_av_insert: peer address not accepted: %s",
		                ckpt__fab_strerror(rc < 0 ? -rc : FI_EINVAL));
	memcpy(p->addr, r->addr, r->addr_len);
	p->len = r->addr_len;
	f->npeers++;
	*fa = p->fa;
	return 0;
}

/* One ckpt_fab_xfer in progress. */
struct fab_run {
	ckpt_fab *f;
	const ckpt_fab_remote *r;
	uint64_t roff;
	int op;
	uint8_t *buf;
	void *desc;
	fi_addr_t dest;
	uint64_t raddr, key;
	size_t len, piece, posted, done;
	unsigned depth, inflight;
};

/* "WRITE of N bytes at offset O of <peer> (<provider>)", for errors. */
static const char *fab_what(const struct fab_run *x, char *buf, size_t cap)
{
	char peer[96] = "?";
	size_t len = sizeof(peer);
	fi_av_straddr(x->f->av, x->r->addr, peer, &len);
	snprintf(buf, cap, "%s of %zu bytes at offset %llu of a region at %s (%s)",
	         x->op == CKPT_FAB_WRITE ? "WRITE" : "READ", x->len, (unsigned long long)x->roff,
	         peer, x->f->info->fabric_attr->prov_name);
	return buf;
}

/* Posts the next piece; -FI_EAGAIN when the provider wants progress first. */
static ssize_t fab_post(struct fab_run *x)
{
	ckpt_fab *f = x->f;
	struct fab_slot *s = f->free_slots;
	size_t n = x->len - x->posted < x->piece ? x->len - x->posted : x->piece;
	struct iovec iov = { x->buf + x->posted, n };
	struct fi_rma_iov rma = { .addr = x->raddr + x->posted, .len = n, .key = x->key };
	struct fi_msg_rma msg = { .msg_iov = &iov, .desc = &x->desc, .iov_count = 1,
	                          .addr = x->dest, .rma_iov = &rma, .rma_iov_count = 1,
	                          .context = &s->ctx };
	ssize_t rc = x->op == CKPT_FAB_WRITE ? fi_writemsg(f->ep, &msg, FI_COMPLETION | f->wflags)
	                                     : fi_readmsg(f->ep, &msg, FI_COMPLETION);
	if (rc)
		return rc;
	f->free_slots = s->next_free;
	s->len = n;
	x->posted += n;
	x->inflight++;
	return 0;
}

int ckpt__fab_cq_error(ckpt_fab *f, const char *what, char *err, size_t cap)
{
	struct fi_cq_err_entry e = { 0 };
	char prov[160];
	ssize_t rc = fi_cq_readerr(f->cq, &e, 0);
	if (rc < 0)
		return ckpt__fab_fi_fail(err, cap, rc, "fi_cq_readerr");
	const char *ptxt = fi_cq_strerror(f->cq, e.prov_errno, e.err_data, prov, sizeof(prov));
	return ckpt__fab_fail(err, cap, ckpt__fab_errno(e.err), "%s: completion error: %s (provider: %s)", what,
	                      ckpt__fab_strerror(e.err), ptxt ? ptxt : "no detail");
}

static int fab_cq_error(struct fab_run *x, char *err, size_t cap)
{
	char what[256];
	return ckpt__fab_cq_error(x->f, fab_what(x, what, sizeof(what)), err, cap);
}

/* Reads completions, waiting up to wait_ms for one (0: just progress).
 * Returns how many were read or -errno. */
static int fab_reap(struct fab_run *x, int wait_ms, char *err, size_t cap)
{
	ckpt_fab *f = x->f;
	struct fi_cq_entry ev[FAB_CQ_BATCH];
	ssize_t n = f->cq_wait && wait_ms > 0 ? fi_cq_sread(f->cq, ev, FAB_CQ_BATCH, NULL, wait_ms)
	                                      : fi_cq_read(f->cq, ev, FAB_CQ_BATCH);
	if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT) /* how sread says "nothing yet" */
		return 0;
	if (n == -FI_EAVAIL)
		return fab_cq_error(x, err, cap);
	if (n < 0)
		return ckpt__fab_fi_fail(err, cap, n, "fi_cq_read");
	for (ssize_t i = 0; i < n; i++) {
		struct fab_slot *s = ev[i].op_context;
		x->done += s->len;
		x->inflight--;
		s->next_free = f->free_slots;
		f->free_slots = s;
	}
	return (int)n;
}

/* Keeps up to depth pieces in flight until all completed. -FI_EAGAIN from a
 * post (rxm sets up connections on demand) means: progress, then retry. */
static int fab_run(struct fab_run *x, int timeout_ms, char *err, size_t cap)
{
	char what[256];
	int64_t last = ckpt__fab_now_ms();
	while (x->done < x->len) {
		ssize_t rc = 0;
		while (x->posted < x->len && x->inflight < x->depth && !(rc = fab_post(x)))
			last = ckpt__fab_now_ms();
		if (rc && rc != -FI_EAGAIN)
			return ckpt__fab_fail(err, cap, ckpt__fab_errno(rc), "%s: %s: %s", fab_what(x, what,
			                sizeof(what)), x->op == CKPT_FAB_WRITE ? "fi_writemsg"
			                : "fi_readmsg", ckpt__fab_strerror((int)-rc));
		int64_t left = timeout_ms - (ckpt__fab_now_ms() - last);
		if (left <= 0)
			return ckpt__fab_fail(err, cap, -ETIMEDOUT, "%s: no progress for %d ms (%u operations "
			                "in flight, %zu bytes done)", fab_what(x, what, sizeof(what)),
			                timeout_ms, x->inflight, x->done);
		int n = fab_reap(x, x->inflight ? (int)left : 0, err, cap);
		if (n < 0)
			return n;
		if (n > 0)
			last = ckpt__fab_now_ms();
		else if (!x->inflight)
			nanosleep(&(struct timespec){ 0, FAB_IDLE_NS }, NULL); /* connecting */
		else if (!x->f->cq_wait)
			sched_yield();
	}
	return 0;
}

static int fab_xfer_check(ckpt_fab *f, int op, ckpt_fab_mr *local, const void *buf, size_t len,
                          const ckpt_fab_remote *r, uint64_t roff, char *err, size_t cap)
{
	const uint8_t *b = buf;
	if (!f || !r || (op != CKPT_FAB_WRITE && op != CKPT_FAB_READ) || (len && !buf))
		return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_xfer: bad arguments");
	if (f->passive)
		return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_xfer: a passive fab does not initiate");
	if (r->addr_len == 0 || r->addr_len > CKPT_FAB_ADDR_MAX || roff + len < roff)
		return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_xfer: bad remote region");
	if (local && (local->f != f || !(local->access & CKPT_FAB_LOCAL) || b < local->buf ||
	              len > local->len || (size_t)(b - local->buf) > local->len - len))
		return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_xfer: buffer outside its region");
	if (!local && len && (f->mr_mode & FI_MR_LOCAL))
		return ckpt__fab_fail(err, cap, -EINVAL, "ckpt_fab_xfer: provider %s needs registered "
		                "local buffers (FI_MR_LOCAL)", f->info->fabric_attr->prov_name);
	return 0;
}

int ckpt_fab_xfer(ckpt_fab *f, int op, ckpt_fab_mr *local, void *buf, size_t len,
                  const ckpt_fab_remote *r, uint64_t roff, size_t piece, unsigned depth,
                  int timeout_ms, char *err, size_t errcap)
{
	int rc = fab_xfer_check(f, op, local, buf, len, r, roff, err, errcap);
	if (rc)
		return rc;
	if (f->broken)
		return ckpt__fab_fail(err, errcap, -EPIPE, "ckpt_fab_xfer: fab broken by an earlier error");
	if (len == 0)
		return 0;
	struct fab_run x = { .f = f, .r = r, .roff = roff, .op = op, .buf = buf, .len = len,
	                     .key = r->key, .raddr = r->base + roff };
	if (local && (f->mr_mode & FI_MR_LOCAL))
		x.desc = fi_mr_desc(local->mr);
	if ((rc = ckpt__fab_peer(f, r, &x.dest, err, errcap)))
		return rc;
	size_t max_msg = f->info->ep_attr->max_msg_size;
	x.piece = piece ? piece : FAB_PIECE_DEFAULT;
	if (max_msg && x.piece > max_msg)
		x.piece = max_msg;
	x.depth = depth ? depth : FAB_DEPTH_DEFAULT;
	if (x.depth > CKPT_FAB_DEPTH_MAX)
		x.depth = CKPT_FAB_DEPTH_MAX;
	if (f->info->tx_attr->size && x.depth > f->info->tx_attr->size)
		x.depth = (unsigned)f->info->tx_attr->size;
	rc = fab_run(&x, timeout_ms > 0 ? timeout_ms : FAB_TIMEOUT_DEFAULT, err, errcap);
	if (rc)
		f->broken = 1;
	/* -EINVAL is kept for arguments refused before anything was posted. */
	return rc == -EINVAL ? -EIO : rc;
}
