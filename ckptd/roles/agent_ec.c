/* The rs:K+M encode on an agent (--peer-scheme on the coordinator): this
 * node as a member of a Reed–Solomon group holds M parity rows of every
 * instance of a version (ckptd/coord/ecplan.h, docs/format.md 10b), and
 * serves its own shards' slices to the other members.
 *
 *   coordinator ── EC_PLAN (at the version's LOCAL_MEM commit) ──> loop:
 *                  the rows' room in the peer pool (never evicted), zeroed
 *   thread ── per row: the K data slices of its stripe, each read from its
 *             owner (SEGMENT_REQUEST(EC_READ) to the owner's agent pins its
 *             LOCAL_MEM copy and registers it for remote reads; fi_read)
 *             and folded into the row as it lands (ckpt_ec_update); the
 *             row's block checksums once it is complete
 *   loop   ── EC_DONE to the coordinator (done, or which owner failed); the
 *             parity stays until the job commits a newer version at
 *             PEER_MEM (the previous version's parity is kept until then)
 *
 * The owner's side (EC_READ, SEGMENT_RELEASE of an EC pin) runs in the loop:
 * a pinned segment is registered with the peer pool's fabric for as long as
 * the session holding it. Parity is counted in --peer-pool-size. */
#include "agent_int.h"

#include "ec.h"
#include "fabric.h"
#include "format/ecgroup.h"
#include "mem/pool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EC_PIN_BIT (1ull << 61)
#define EC_TIMEOUT_MS 10000
#define EC_INSTANCES_MAX 4096

enum { EC_RUNNING = 1, EC_FINISHED, EC_REPORTED };

typedef struct ectask {
	struct ectask *next;
	ckptd_agent *a;
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t group, me, n;
	unsigned k, m;
	ckptd_ec_node nodes[CKPT_EC_MAX_PIECES]; /* by member */
	size_t ninst;
	ckpt_ecg *g;          /* per instance */
	uint32_t *rank;       /* [instance * n + member]: its shard, UINT32_MAX for none */
	uint64_t *row_off;    /* [instance]: its M rows' offset in par */
	uint64_t slot, bytes; /* the peer-pool room */
	uint8_t *par;
	uint64_t *sums;       /* block checksums of every row, in row order */
	pthread_t thr;
	int started;
	int state;            /* with the module's mutex */
	int rc;
	char why[600];
} ectask;

typedef struct ecpin {
	uint64_t id, serial, seg;
	char job[CKPTD_JOB_MAX + 1];
	ckpt_fab_mr *mr;
} ecpin;

struct agent_ec {
	pthread_mutex_t mu;
	int pipe[2];
	ectask *tasks;
	ecpin *pins;
	size_t npins, cappins;
	uint64_t next_pin;
};

/* ---------------------------------------------------------------- thread */

typedef struct owner {
	ckptd_client *c;
	int dead;
	struct { uint32_t rank; ckptd_peer_grant g; } grant[64];
	size_t ngrant;
} owner;

static int fail(ectask *t, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(ectask *t, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->why, sizeof(t->why), fmt, ap);
	va_end(ap);
	t->rc = rc < 0 ? rc : -EIO;
	return t->rc;
}

/* The grant of rank's LOCAL_MEM copy from member i's agent. */
static const ckptd_peer_grant *grant_of(ectask *t, owner *ow, unsigned i, uint32_t rank, uint64_t want)
{
	owner *o = &ow[i];
	for (size_t j = 0; j < o->ngrant; j++)
		if (o->grant[j].rank == rank)
			return &o->grant[j].g;
	const ckptd_ec_node *nd = &t->nodes[i];
	char why[300] = "";
	if (!o->c) {
		ckptd_secret *js = NULL;
		int r = ckptd_secret_derive_job(t->a->cluster, t->job, &js);
		if (r == 0)
			r = ckptd_client_connect(nd->address, t->job, CKPTD_ROLE_RANK, js, EC_TIMEOUT_MS, &o->c, why, sizeof(why));
		ckptd_secret_free(js);
		if (r < 0) {
			fail(t, r, "member %u (%s) unreachable: %s", i, nd->node, why);
			return NULL;
		}
	}
	if (o->ngrant == sizeof(o->grant) / sizeof(o->grant[0])) {
		fail(t, -E2BIG, "member %u (%s): more than 64 shards to read", i, nd->node);
		return NULL;
	}
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", t->job);
	m.u.segment_request.version = t->version;
	m.u.segment_request.rank = rank;
	m.u.segment_request.mode = CKPTD_SEG_EC_READ;
	int r = ckptd_client_call(o->c, &m, &rep);
	if (r < 0) {
		fail(t, r, "member %u (%s): %s", i, nd->node, strerror(-r));
		return NULL;
	}
	if (rep.type != CKPTD_MSG_PEER_GRANT) {
		fail(t, -ENOENT, "member %u (%s) has no DRAM copy of rank %u: %s", i, nd->node, rank,
		     rep.type == CKPTD_MSG_ERROR ? rep.u.error.text : "unexpected answer");
		ckptd_msg_free(&rep);
		return NULL;
	}
	if (rep.u.peer_grant.bytes != want) {
		fail(t, -CKPT_EMISMATCH, "member %u (%s): rank %u's copy is %llu bytes, the plan says %llu", i, nd->node,
		     rank, (unsigned long long)rep.u.peer_grant.bytes, (unsigned long long)want);
		ckptd_msg_free(&rep);
		return NULL;
	}
	o->grant[o->ngrant].rank = rank;
	o->grant[o->ngrant].g = rep.u.peer_grant;
	ckptd_msg_free(&rep);
	return &o->grant[o->ngrant++].g;
}

static void owners_close(ectask *t, owner *ow)
{
	for (unsigned i = 0; i < t->n; i++) {
		for (size_t j = 0; j < ow[i].ngrant && ow[i].c; j++) {
			ckptd_msg rel = { .type = CKPTD_MSG_SEGMENT_RELEASE }, rep;
			rel.u.segment_release.segment_id = ow[i].grant[j].g.segment_id;
			if (ckptd_client_call(ow[i].c, &rel, &rep) == 0)
				ckptd_msg_free(&rep);
		}
		ckptd_client_close(ow[i].c);
	}
}

/* Every row this member holds, slice by slice as they land. */
static int encode(ectask *t, owner *ow)
{
	ckpt_ec *e = NULL;
	ckpt_fab *fab = NULL;
	ckpt_fab_mr *mr = NULL;
	uint8_t *scratch = NULL;
	char why[300] = "";
	uint64_t most = 0;
	for (size_t j = 0; j < t->ninst; j++)
		most = t->g[j].slice > most ? t->g[j].slice : most;
	int r = ckpt_ec_new(t->k, t->m, &e, why, sizeof(why));
	if (r < 0)
		return fail(t, r, "rs:%u+%u: %s", t->k, t->m, why);
	if (!(scratch = aligned_alloc(CKPT_EC_ALIGN, most))) {
		r = fail(t, -ENOMEM, "no memory for a slice of %llu bytes", (unsigned long long)most);
		goto out;
	}
	size_t s_at = 0;
	for (size_t j = 0; j < t->ninst && !r; j++) {
		const ckpt_ecg *g = &t->g[j];
		for (unsigned row = 0; row < t->m && !r; row++) {
			unsigned s = (t->me + t->n - row) % t->n; /* the stripe whose row `row` this member holds */
			uint8_t *par = t->par + t->row_off[j] + (uint64_t)row * g->slice;
			for (unsigned d = 0; d < t->k && !r; d++) {
				unsigned i = ckpt__ecg_holder(g, s, d);
				uint64_t have = ckpt__ecg_have(g, i, d);
				if (!have)
					continue; /* zeros: nothing to fold */
				uint32_t rank = t->rank[j * t->n + i];
				const ckptd_peer_grant *gr = grant_of(t, ow, i, rank, g->len[i]);
				if (!gr) {
					r = t->rc;
					break;
				}
				if ((r = ckpt__fault(&t->a->faults, "agent.ec_read")) < 0) {
					fail(t, r, "row %u of stripe %u: fault injected", row, s);
					break;
				}
				if (!fab) {
					if ((r = ckpt_fab_open(gr->provider[0] ? gr->provider : NULL, NULL, 0, &fab, why, sizeof(why))) < 0 ||
					    (r = ckpt_fab_mr_reg(fab, scratch, most, CKPT_FAB_LOCAL, &mr, why, sizeof(why))) < 0) {
						fail(t, r, "fabric: %s", why);
						break;
					}
				}
				ckpt_fab_remote rem = { .addr_len = gr->fabric_addr_len, .key = gr->key, .base = gr->base };
				memcpy(rem.addr, gr->fabric_addr, gr->fabric_addr_len);
				if ((r = ckpt_fab_xfer(fab, CKPT_FAB_READ, mr, scratch, have, &rem, gr->offset + (uint64_t)d * g->slice,
				                       0, 0, EC_TIMEOUT_MS, why, sizeof(why))) < 0) {
					fail(t, r, "row %u of stripe %u of instance %zu: fi_read from member %u (%s): %s", row, s, j, i,
					     t->nodes[i].node, why);
					break;
				}
				if ((r = ckpt_ec_update(e, row, d, have, scratch, par)) < 0)
					fail(t, r, "row %u of stripe %u: the fold refused its buffers", row, s);
			}
			for (uint64_t b = 0; !r && b < ckpt__ecg_blocks(g); b++)
				t->sums[s_at++] = ckpt__ecg_block_sum(g, par, g->slice, b);
		}
	}
out:
	ckpt_fab_mr_close(mr);
	ckpt_fab_close(fab);
	free(scratch);
	ckpt_ec_free(e);
	return r;
}

static void *ec_main(void *arg)
{
	ectask *t = arg;
	owner *ow = calloc(t->n, sizeof(*ow));
	if (!ow)
		fail(t, -ENOMEM, "no memory");
	else {
		encode(t, ow);
		owners_close(t, ow);
	}
	free(ow);
	struct agent_ec *x = t->a->ec;
	pthread_mutex_lock(&x->mu);
	t->state = EC_FINISHED;
	pthread_mutex_unlock(&x->mu);
	char one = 1;
	if (write(x->pipe[1], &one, 1) < 0) {
		/* the loop looks again at its next plan or notice */
	}
	return NULL;
}

/* ---------------------------------------------------------------- loop */

static void task_free(ckptd_agent *a, ectask *t)
{
	if (t->started)
		pthread_join(t->thr, NULL);
	if (t->slot)
		ckptd__peer_unreserve(a, t->slot);
	free(t->g);
	free(t->rank);
	free(t->row_off);
	free(t->sums);
	free(t);
}

static void report(ckptd_agent *a, ectask *t)
{
	ckptd_msg m = { .type = CKPTD_MSG_EC_DONE };
	ckptd_ec_done *d = &m.u.ec_done;
	snprintf(d->job, sizeof(d->job), "%s", t->job);
	d->version = t->version;
	d->group = t->group;
	d->code = (uint32_t)(t->rc < 0 ? -t->rc : 0);
	d->bytes = t->rc ? 0 : t->bytes;
	snprintf(d->text, sizeof(d->text), "%s", t->rc ? t->why : "");
	if (t->rc)
		CKPTD_WARN(a->log, NULL, t->job, "rs group %u: parity of version %llu not made: %s", t->group,
		           (unsigned long long)t->version, t->why);
	else
		CKPTD_INFO(a->log, NULL, t->job, "rs group %u: parity of version %llu made (%zu instance%s, %llu bytes)",
		           t->group, (unsigned long long)t->version, t->ninst, t->ninst == 1 ? "" : "s",
		           (unsigned long long)t->bytes);
	int r = ckptd__agent_link_send(a, &m, FWD_IGNORE, 0);
	if (r < 0)
		CKPTD_WARN(a->log, NULL, t->job, "EC_DONE of version %llu not sent: %s", (unsigned long long)t->version,
		           strerror(-r));
	t->state = EC_REPORTED;
}

/* Finished encodes reported; those that failed forgotten. */
static void reap(ckptd_agent *a)
{
	struct agent_ec *x = a->ec;
	char buf[64];
	while (read(x->pipe[0], buf, sizeof(buf)) > 0)
		;
	for (ectask **pp = &x->tasks; *pp;) {
		ectask *t = *pp;
		pthread_mutex_lock(&x->mu);
		int st = t->state;
		pthread_mutex_unlock(&x->mu);
		if (st == EC_FINISHED) {
			pthread_join(t->thr, NULL);
			t->started = 0;
			report(a, t);
			if (t->rc) {
				*pp = t->next;
				task_free(a, t);
				continue;
			}
		}
		pp = &t->next;
	}
}

static void on_wake(ckptd_server *srv, int fd, uint32_t events, void *arg)
{
	(void)srv, (void)fd, (void)events;
	reap(arg);
}

static void refuse(ckptd_agent *a, const ckptd_ec_plan *p, int rc, const char *why)
{
	ectask t = { .a = a, .version = p->version, .group = p->group, .rc = rc };
	snprintf(t.job, sizeof(t.job), "%s", p->job);
	snprintf(t.why, sizeof(t.why), "%s", why);
	report(a, &t);
}

void ckptd__ec_plan(ckptd_agent *a, const ckptd_ec_plan *p)
{
	struct agent_ec *x = a->ec;
	if (!x)
		return;
	for (ectask *t = x->tasks; t; t = t->next)
		if (t->version == p->version && t->group == p->group && !strcmp(t->job, p->job))
			return; /* told twice: one encode */
	if (!a->peer)
		return refuse(a, p, -ENOSPC, "this node keeps no peer pool (--peer-pool-size 0)");
	size_t ninst = 0;
	for (uint32_t i = 0; i < p->count; i++)
		if (p->entries[i].instance >= EC_INSTANCES_MAX)
			return refuse(a, p, -EINVAL, "an instance past the plan's bound");
		else if (p->entries[i].instance + 1 > ninst)
			ninst = p->entries[i].instance + 1;
	ectask *t = calloc(1, sizeof(*t));
	if (!t)
		return refuse(a, p, -ENOMEM, "no memory");
	t->a = a;
	snprintf(t->job, sizeof(t->job), "%s", p->job);
	t->version = p->version;
	t->group = p->group;
	t->k = p->k;
	t->m = p->m;
	t->n = p->k + p->m;
	t->me = p->member;
	for (uint32_t i = 0; i < p->nnodes; i++)
		t->nodes[p->nodes[i].member] = p->nodes[i];
	t->ninst = ninst;
	t->g = calloc(ninst ? ninst : 1, sizeof(*t->g));
	t->rank = malloc((ninst ? ninst : 1) * t->n * sizeof(*t->rank));
	t->row_off = calloc(ninst ? ninst : 1, sizeof(*t->row_off));
	uint64_t *lens = calloc((ninst ? ninst : 1) * t->n, sizeof(*lens));
	char why[300] = "";
	int r = !t->g || !t->rank || !t->row_off || !lens ? -ENOMEM : 0;
	for (size_t i = 0; !r && i < ninst * t->n; i++)
		t->rank[i] = UINT32_MAX;
	for (uint32_t i = 0; !r && i < p->count; i++) {
		const ckptd_ec_src *e = &p->entries[i];
		size_t at = (size_t)e->instance * t->n + e->member;
		if (t->rank[at] != UINT32_MAX) {
			r = -EINVAL;
			snprintf(why, sizeof(why), "member %u of instance %u listed twice", e->member, e->instance);
		}
		t->rank[at] = e->rank;
		lens[at] = e->bytes;
	}
	uint64_t total = 0, nsums = 0;
	for (size_t j = 0; !r && j < ninst; j++) {
		char e[160];
		if ((r = ckpt__ecg_init(&t->g[j], t->k, t->m, lens + j * t->n, e, sizeof(e))) < 0) {
			snprintf(why, sizeof(why), "instance %zu: %s", j, e);
			break;
		}
		t->row_off[j] = total;
		uint64_t rows = (uint64_t)t->m * t->g[j].slice;
		if (total + rows < total) {
			r = -EOVERFLOW;
			snprintf(why, sizeof(why), "parity past 2^64 bytes");
		}
		total += rows;
		nsums += (uint64_t)t->m * ckpt__ecg_blocks(&t->g[j]);
	}
	free(lens);
	const char *room = NULL;
	if (!r && !(t->sums = calloc(nsums ? nsums : 1, sizeof(*t->sums))))
		r = -ENOMEM;
	if (!r && (r = ckptd__peer_reserve(a, t->job, t->version, total ? total : 1, &t->slot, &t->par, &room)) < 0)
		snprintf(why, sizeof(why), "no room in the peer pool for %llu bytes of parity (%s)", (unsigned long long)total,
		         room);
	if (r < 0) {
		refuse(a, p, r, why[0] ? why : strerror(-r));
		task_free(a, t);
		return;
	}
	memset(t->par, 0, total);
	t->bytes = total;
	t->state = EC_RUNNING;
	t->next = x->tasks;
	x->tasks = t;
	if ((r = pthread_create(&t->thr, NULL, ec_main, t)) != 0) {
		fail(t, -r, "no thread: %s", strerror(r));
		t->state = EC_FINISHED;
		reap(a);
		return;
	}
	t->started = 1;
	CKPTD_DEBUG(a->log, NULL, t->job, "rs group %u: encoding version %llu, member %u, %zu instance%s, %llu bytes of parity",
	            t->group, (unsigned long long)t->version, t->me, ninst, ninst == 1 ? "" : "s",
	            (unsigned long long)total);
}

void ckptd__ec_committed(ckptd_agent *a, const char *job, uint64_t version, uint32_t tier)
{
	struct agent_ec *x = a->ec;
	if (!x || tier != CKPT_TIER_PEER_MEM)
		return;
	reap(a);
	/* The newer version is protected: the older parity of the job goes. */
	for (ectask **pp = &x->tasks; *pp;) {
		ectask *t = *pp;
		if (t->version < version && t->state == EC_REPORTED && !strcmp(t->job, job)) {
			CKPTD_DEBUG(a->log, NULL, job, "rs group %u: parity of version %llu dropped (version %llu protected)",
			            t->group, (unsigned long long)t->version, (unsigned long long)version);
			*pp = t->next;
			task_free(a, t);
			continue;
		}
		pp = &t->next;
	}
}

/* ---------------------------------------------------------------- owner side */

int ckptd__ec_is_pin(uint64_t id)
{
	return (id & EC_PIN_BIT) != 0;
}

static void pin_drop(ckptd_agent *a, size_t i)
{
	struct agent_ec *x = a->ec;
	ecpin *p = &x->pins[i];
	ckpt_fab_mr_close(p->mr);
	ckptd_pool *pool = ckptd_jpools_get(a->pools, p->job, NULL);
	if (pool)
		ckptd_pool_seg_unpin(pool, p->seg);
	x->pins[i] = x->pins[--x->npins];
}

static int ec_read(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_segment_request *m)
{
	struct agent_ec *x = a->ec;
	ckptd_pool *pool = ckptd_jpools_get(a->pools, m->job, NULL);
	ckptd_seg_info si;
	if (!pool || ckptd_pool_find(pool, m->job, m->version, m->rank, &si) < 0 || si.state != CKPTD_SEG_HELD)
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "no DRAM copy of that shard here");
	ckpt_fab *fab = ckptd__peer_fab(a);
	ckpt_fab_remote rem;
	if (!fab)
		return ckptd_session_send_error(s, CKPTD_ERR_UNSUPPORTED, "this node has no fabric (--peer-pool-size 0)");
	if (x->npins == x->cappins) {
		size_t nc = x->cappins ? x->cappins * 2 : 16;
		void *q = realloc(x->pins, nc * sizeof(*x->pins));
		if (!q)
			return -ENOMEM;
		x->pins = q;
		x->cappins = nc;
	}
	if (ckptd_pool_seg_pin(pool, si.id) < 0)
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "that shard's DRAM copy is going");
	ecpin *p = &x->pins[x->npins];
	memset(p, 0, sizeof(*p));
	p->id = EC_PIN_BIT | ++x->next_pin;
	p->serial = rs->serial;
	p->seg = si.id;
	snprintf(p->job, sizeof(p->job), "%s", m->job);
	char why[300] = "";
	uint8_t *mem = (uint8_t *)ckptd_pool_base(pool) + si.off;
	int r = ckpt_fab_mr_reg(fab, mem, si.len, CKPT_FAB_REMOTE_READ, &p->mr, why, sizeof(why));
	if (r == 0)
		r = ckpt_fab_mr_remote(fab, p->mr, &rem);
	if (r < 0) {
		ckpt_fab_mr_close(p->mr);
		ckptd_pool_seg_unpin(pool, si.id);
		CKPTD_WARN(a->log, ckptd_session_peer(s), m->job, "cannot offer version %llu rank %u for rs parity: %s",
		           (unsigned long long)m->version, m->rank, why);
		return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "cannot register the copy with the fabric");
	}
	x->npins++;
	ckptd_msg rep = { .type = CKPTD_MSG_PEER_GRANT };
	ckptd_peer_grant *g = &rep.u.peer_grant;
	g->segment_id = p->id;
	g->offset = 0;
	g->bytes = si.len;
	g->key = rem.key;
	g->base = rem.base;
	g->fabric_addr_len = rem.addr_len;
	memcpy(g->fabric_addr, rem.addr, rem.addr_len);
	snprintf(g->provider, sizeof(g->provider), "%s", ckpt_fab_provider_name(fab));
	return ckptd_session_send(s, &rep, -1);
}

int ckptd__ec_handle(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_msg *m)
{
	struct agent_ec *x = a->ec;
	if (!x)
		return ckptd_session_send_error(s, CKPTD_ERR_UNSUPPORTED, "no rs encode here");
	if (m->type == CKPTD_MSG_SEGMENT_REQUEST)
		return ec_read(a, s, rs, &m->u.segment_request);
	for (size_t i = 0; i < x->npins; i++)
		if (x->pins[i].id == m->u.segment_release.segment_id && x->pins[i].serial == rs->serial) {
			pin_drop(a, i);
			ckptd_msg ok = { .type = CKPTD_MSG_OK };
			return ckptd_session_send(s, &ok, -1);
		}
	return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "this session holds no such shard");
}

void ckptd__ec_session_gone(ckptd_agent *a, uint64_t serial)
{
	struct agent_ec *x = a->ec;
	for (size_t i = x ? x->npins : 0; i-- > 0;)
		if (x->pins[i].serial == serial)
			pin_drop(a, i);
}

/* ---------------------------------------------------------------- life */

int ckptd__ec_start(ckptd_agent *a)
{
	struct agent_ec *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	pthread_mutex_init(&x->mu, NULL);
	if (pipe2(x->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
		int r = -errno;
		pthread_mutex_destroy(&x->mu);
		free(x);
		return r;
	}
	int r = ckptd_server_watch(a->srv, x->pipe[0], on_wake, a);
	if (r < 0) {
		close(x->pipe[0]);
		close(x->pipe[1]);
		pthread_mutex_destroy(&x->mu);
		free(x);
		return r;
	}
	a->ec = x;
	return 0;
}

void ckptd__ec_stop(ckptd_agent *a)
{
	struct agent_ec *x = a->ec;
	if (!x)
		return;
	while (x->tasks) {
		ectask *t = x->tasks;
		x->tasks = t->next;
		task_free(a, t);
	}
	while (x->npins)
		pin_drop(a, x->npins - 1);
	free(x->pins);
	ckptd_server_unwatch(a->srv, x->pipe[0]);
	close(x->pipe[0]);
	close(x->pipe[1]);
	pthread_mutex_destroy(&x->mu);
	free(x);
	a->ec = NULL;
}
