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
 *             and folded into the row as it lands (ckpt_ec_update), its
 *             block checksums kept (what a rebuild checks the data piece
 *             against); the row's block checksums once it is complete
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
#include "ckpt_kernels.h"
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
#define EC_SHARD_MAX (1ull << 48) /* no sum of a plan's sizes can wrap */

enum { EC_RUNNING = 1, EC_FINISHED, EC_REPORTED };

/* A version's instances as an EC_PLAN lists them, and where each member's
 * rows and their checksums lie in its parity slot: the same for the member
 * that makes them and an agent that rebuilds from them. */
typedef struct eclay {
	size_t ninst;
	ckpt_ecg *g;       /* per instance */
	uint32_t *rank;    /* [instance * n + member]: its shard, UINT32_MAX for none */
	uint64_t *row_off; /* [instance]: its M rows' offset in the slot */
	uint64_t *sum_at;  /* [instance]: the index of its first row block's checksum */
	uint64_t *dsum_at; /* [instance]: the index (past the rows' nsums) of its data pieces' checksums */
	uint64_t total;    /* the rows' bytes (a multiple of 64); the checksums follow */
	uint64_t nsums;    /* the rows' block checksums: M x blocks per instance */
	uint64_t ndsums;   /* then, per instance and row, the K data pieces' it was made of: M x K x blocks */
} eclay;

/* What identifies a plan's instances: K, M and every (instance, member,
 * rank, bytes), in order (FNV-1a). */
static uint64_t plan_sig(const ckptd_ec_plan *p)
{
	uint64_t h = 1469598103934665603ull;
	uint64_t v[2] = { p->k, p->m };
	for (int pass = 0; pass <= (int)p->count; pass++) {
		if (pass) {
			const ckptd_ec_src *e = &p->entries[pass - 1];
			v[0] = (uint64_t)e->instance << 40 ^ (uint64_t)e->member << 32 ^ e->rank;
			v[1] = e->bytes;
		}
		for (int i = 0; i < 2; i++)
			for (int b = 0; b < 8; b++)
				h = (h ^ (uint8_t)(v[i] >> (8 * b))) * 1099511628211ull;
	}
	return h;
}

static void lay_free(eclay *L)
{
	free(L->g);
	free(L->rank);
	free(L->row_off);
	free(L->sum_at);
	free(L->dsum_at);
	memset(L, 0, sizeof(*L));
}

static int lay_init(eclay *L, const ckptd_ec_plan *p, char *why, size_t cap)
{
	unsigned n = p->k + p->m;
	memset(L, 0, sizeof(*L));
	for (uint32_t i = 0; i < p->count; i++) {
		if (p->entries[i].instance >= EC_INSTANCES_MAX) {
			snprintf(why, cap, "an instance past the plan's bound");
			return -EINVAL;
		}
		if (p->entries[i].bytes > EC_SHARD_MAX) {
			snprintf(why, cap, "rank %u: a shard of %llu bytes", p->entries[i].rank,
			         (unsigned long long)p->entries[i].bytes);
			return -EINVAL;
		}
		if (p->entries[i].instance + 1 > L->ninst)
			L->ninst = p->entries[i].instance + 1;
	}
	size_t ni = L->ninst ? L->ninst : 1;
	L->g = calloc(ni, sizeof(*L->g));
	L->rank = malloc(ni * n * sizeof(*L->rank));
	L->row_off = calloc(ni, sizeof(*L->row_off));
	L->sum_at = calloc(ni, sizeof(*L->sum_at));
	L->dsum_at = calloc(ni, sizeof(*L->dsum_at));
	uint64_t *lens = calloc(ni * n, sizeof(*lens));
	int r = !L->g || !L->rank || !L->row_off || !L->sum_at || !L->dsum_at || !lens ? -ENOMEM : 0;
	if (r)
		snprintf(why, cap, "no memory");
	for (size_t i = 0; !r && i < L->ninst * n; i++)
		L->rank[i] = UINT32_MAX;
	for (uint32_t i = 0; !r && i < p->count; i++) {
		const ckptd_ec_src *e = &p->entries[i];
		size_t at = (size_t)e->instance * n + e->member;
		if (L->rank[at] != UINT32_MAX) {
			r = -EINVAL;
			snprintf(why, cap, "member %u of instance %u listed twice", e->member, e->instance);
		}
		L->rank[at] = e->rank;
		lens[at] = e->bytes;
	}
	for (size_t j = 0; !r && j < L->ninst; j++) {
		char e[160];
		if ((r = ckpt__ecg_init(&L->g[j], p->k, p->m, lens + j * n, e, sizeof(e))) < 0) {
			snprintf(why, cap, "instance %zu: %s", j, e);
			break;
		}
		L->row_off[j] = L->total;
		L->sum_at[j] = L->nsums;
		L->dsum_at[j] = L->ndsums;
		uint64_t rows = (uint64_t)p->m * L->g[j].slice;
		if (L->total + rows < L->total) {
			r = -EOVERFLOW;
			snprintf(why, cap, "parity past 2^64 bytes");
		}
		L->total += rows;
		L->nsums += (uint64_t)p->m * ckpt__ecg_blocks(&L->g[j]);
		L->ndsums += (uint64_t)p->m * p->k * ckpt__ecg_blocks(&L->g[j]);
	}
	free(lens);
	if (r < 0)
		lay_free(L);
	return r;
}

typedef struct ectask {
	struct ectask *next;
	ckptd_agent *a;
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t group, me, n;
	unsigned k, m;
	ckptd_ec_node nodes[CKPT_EC_MAX_PIECES]; /* by member */
	eclay L;
	uint64_t slot, bytes; /* the peer-pool room; bytes: the rows' */
	uint8_t *par;
	uint64_t *sums;       /* in the slot, after the rows: block checksums of every row, in row order, then
	                       * those of the data pieces each row was made of (eclay) */
	uint32_t pins;        /* rebuilds reading it (EC_PARITY) */
	uint64_t sig;         /* of the plan's instances (plan_sig) */
	pthread_t thr;
	int started;
	int state;            /* with the module's mutex */
	int rc;
	char why[600];
} ectask;

typedef struct ecpin {
	uint64_t id, serial, seg;
	char job[CKPTD_JOB_MAX + 1];
	ckpt_fab_mr *mr;       /* a data shard's registration; NULL for parity */
	struct ectask *parity; /* the parity rows pinned */
} ecpin;

/* A rebuild in flight (on a prefetch thread): how far it is, for the
 * loop deciding whether a rank's held read may wait on. */
typedef struct ecrb {
	struct ecrb *next;
	char job[CKPTD_JOB_MAX + 1];
	uint32_t rank;
	uint64_t bytes; /* read so far, with the module's mutex */
} ecrb;

struct agent_ec {
	pthread_mutex_t mu;
	int pipe[2];
	ecrb *rebuilds;       /* with mu */
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

/* A session of the job with member i's agent. */
static int owner_connect(ectask *t, owner *ow, unsigned i)
{
	owner *o = &ow[i];
	if (o->c)
		return 0;
	const ckptd_ec_node *nd = &t->nodes[i];
	char why[300] = "";
	ckptd_secret *js = NULL;
	int r = ckptd_secret_derive_job(t->a->cluster, t->job, &js);
	if (r == 0)
		r = ckptd_client_connect(nd->address, t->job, CKPTD_ROLE_RANK, js, EC_TIMEOUT_MS, &o->c, why, sizeof(why));
	ckptd_secret_free(js);
	if (r < 0)
		return fail(t, r, "member %u (%s) unreachable: %s", i, nd->node, why);
	return 0;
}

/* The grant of rank's LOCAL_MEM copy from member i's agent. */
static const ckptd_peer_grant *grant_of(ectask *t, owner *ow, unsigned i, uint32_t rank, uint64_t want)
{
	owner *o = &ow[i];
	for (size_t j = 0; j < o->ngrant; j++)
		if (o->grant[j].rank == rank)
			return &o->grant[j].g;
	const ckptd_ec_node *nd = &t->nodes[i];
	if (owner_connect(t, ow, i) < 0)
		return NULL;
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
	for (size_t j = 0; j < t->L.ninst; j++)
		most = t->L.g[j].slice > most ? t->L.g[j].slice : most;
	int r = ckpt_ec_new(t->k, t->m, &e, why, sizeof(why));
	if (r < 0)
		return fail(t, r, "rs:%u+%u: %s", t->k, t->m, why);
	if (!(scratch = aligned_alloc(CKPT_EC_ALIGN, most))) {
		r = fail(t, -ENOMEM, "no memory for a slice of %llu bytes", (unsigned long long)most);
		goto out;
	}
	size_t s_at = 0;
	for (size_t j = 0; j < t->L.ninst && !r; j++) {
		const ckpt_ecg *g = &t->L.g[j];
		for (unsigned row = 0; row < t->m && !r; row++) {
			unsigned s = (t->me + t->n - row) % t->n; /* the stripe whose row `row` this member holds */
			uint8_t *par = t->par + t->L.row_off[j] + (uint64_t)row * g->slice;
			uint64_t nb = ckpt__ecg_blocks(g);
			uint64_t *dsum = t->sums + t->L.nsums + t->L.dsum_at[j] + (uint64_t)row * t->k * nb;
			for (unsigned d = 0; d < t->k && !r; d++) {
				unsigned i = ckpt__ecg_holder(g, s, d);
				uint64_t have = ckpt__ecg_have(g, i, d);
				if (!have) {
					/* zeros: nothing to fold, their checksums only */
					for (uint64_t b = 0; b < nb; b++)
						dsum[(uint64_t)d * nb + b] = ckpt__ecg_block_sum(g, scratch, 0, b);
					continue;
				}
				uint32_t rank = t->L.rank[j * t->n + i];
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
				/* What the row was made of: a rebuild checks the data piece
				 * against it (any holder of the stripe's parity has them). */
				for (uint64_t b = 0; !r && b < nb; b++)
					dsum[(uint64_t)d * nb + b] = ckpt__ecg_block_sum(g, scratch, have, b);
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

/* ckpt_rs_parity_bytes: what the finished encodes hold. */
static void parity_gauge(ckptd_agent *a)
{
	uint64_t b = 0;
	for (ectask *t = a->ec ? a->ec->tasks : NULL; t; t = t->next)
		b += t->state == EC_REPORTED && !t->rc ? t->bytes : 0;
	ckptd_metrics_set(a->mx, CKPTD_M_RS_PARITY_BYTES, NULL, NULL, (double)b);
}

static void task_free(ckptd_agent *a, ectask *t)
{
	if (t->started)
		pthread_join(t->thr, NULL);
	if (t->slot)
		ckptd__peer_unreserve(a, t->slot);
	lay_free(&t->L);
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
		           t->group, (unsigned long long)t->version, t->L.ninst, t->L.ninst == 1 ? "" : "s",
		           (unsigned long long)t->bytes);
	int r = ckptd__agent_link_send(a, &m, FWD_IGNORE, 0);
	if (r < 0)
		CKPTD_WARN(a->log, NULL, t->job, "EC_DONE of version %llu not sent: %s", (unsigned long long)t->version,
		           strerror(-r));
	t->state = EC_REPORTED;
	parity_gauge(a);
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
	uint64_t sig = plan_sig(p);
	reap(a);
	for (ectask *t = x->tasks; t; t = t->next)
		if (t->version == p->version && t->group == p->group && !strcmp(t->job, p->job)) {
			/* Told again: the group re-protects the version after a member
			 * was replaced (its shards rebuilt bit-exact elsewhere). Rows of
			 * the same instances are still right; one being made answers
			 * when done. Other instances: made anew. */
			if (t->sig == sig && t->me == p->member) {
				if (t->state == EC_REPORTED)
					report(a, t);
				return;
			}
			if (t->state != EC_REPORTED || t->pins)
				return refuse(a, p, -EBUSY, "an earlier plan of this version is still in use here");
			ectask **pp;
			for (pp = &x->tasks; *pp != t; pp = &(*pp)->next)
				;
			*pp = t->next;
			task_free(a, t);
			break;
		}
	if (!a->peer)
		return refuse(a, p, -ENOSPC, "this node keeps no peer pool (--peer-pool-size 0)");
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
	t->sig = sig;
	for (uint32_t i = 0; i < p->nnodes; i++)
		t->nodes[p->nodes[i].member] = p->nodes[i];
	char why[300] = "";
	int r = lay_init(&t->L, p, why, sizeof(why));
	uint64_t total = t->L.total, nsums = t->L.nsums + t->L.ndsums;
	size_t ninst = t->L.ninst;
	const char *room = NULL;
	/* The rows, then their block checksums (read by a rebuild with them). */
	uint64_t slot_bytes = total + nsums * sizeof(uint64_t);
	if (!r && (r = ckptd__peer_reserve(a, t->job, t->version, slot_bytes, &t->slot, &t->par, &room)) < 0)
		snprintf(why, sizeof(why), "no room in the peer pool for %llu bytes of parity (%s)", (unsigned long long)total,
		         room);
	if (r < 0) {
		refuse(a, p, r, why[0] ? why : strerror(-r));
		task_free(a, t);
		return;
	}
	memset(t->par, 0, slot_bytes);
	t->sums = (uint64_t *)(t->par + total); /* total is a multiple of 64 */
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
		if (t->version < version && t->state == EC_REPORTED && !t->pins && !strcmp(t->job, job)) {
			CKPTD_DEBUG(a->log, NULL, job, "rs group %u: parity of version %llu dropped (version %llu protected)",
			            t->group, (unsigned long long)t->version, (unsigned long long)version);
			*pp = t->next;
			task_free(a, t);
			continue;
		}
		pp = &t->next;
	}
	parity_gauge(a);
}

/* ---------------------------------------------------------------- rebuild */

/* A rebuild from the group's survivors, on the caller's thread: data pieces
 * read from their owners' DRAM (EC_READ), parity rows and the checksums
 * from their holders' peer pools (EC_PARITY): a row's block checksums, and
 * those of the data pieces it was made of, which check a data piece of the
 * stripe (from the first of its parity holders that answers; with none,
 * the rebuilt image's own chunk checksums are the only check). A member
 * that cannot be reached, or whose piece fails its checksum, counts as
 * lost. */
typedef struct rbuild {
	ckptd_agent *a;
	const ckptd_ec_plan *p;
	const eclay *L;
	size_t inst;
	unsigned n;
	ectask t;             /* for grant_of(): job, version, nodes, the error */
	owner *ow;
	ckptd_peer_grant par[CKPT_EC_MAX_PIECES];
	int has_par[CKPT_EC_MAX_PIECES], dead[CKPT_EC_MAX_PIECES];
	/* [h]: holder h's checksums of the instance, read once: M x blocks of
	 * its rows, then M x K x blocks of the data pieces they were made of */
	uint64_t *sums[CKPT_EC_MAX_PIECES];
	uint64_t unchecked;   /* data blocks no parity holder had a checksum for */
	ckpt_fab *fab;
	ckpt_fab_mr *mr;
	uint8_t *bounce;      /* CKPT_ECG_BLOCK bytes, registered */
	uint64_t blocks_read, bytes_read;
	ecrb prog;            /* in a->ec->rebuilds while it runs */
} rbuild;

static int rb_xfer(rbuild *x, const ckptd_peer_grant *g, uint64_t off, uint64_t len, unsigned who, char *why,
                   size_t cap)
{
	char w[300] = "";
	int r = 0;
	if (!x->fab &&
	    ((r = ckpt_fab_open(g->provider[0] ? g->provider : NULL, NULL, 0, &x->fab, w, sizeof(w))) < 0 ||
	     (r = ckpt_fab_mr_reg(x->fab, x->bounce, CKPT_ECG_BLOCK, CKPT_FAB_LOCAL, &x->mr, w, sizeof(w))) < 0)) {
		snprintf(why, cap, "fabric: %s", w);
		return r;
	}
	ckpt_fab_remote rem = { .addr_len = g->fabric_addr_len, .key = g->key, .base = g->base };
	memcpy(rem.addr, g->fabric_addr, g->fabric_addr_len);
	if ((r = ckpt_fab_xfer(x->fab, CKPT_FAB_READ, x->mr, x->bounce, len, &rem, g->offset + off, 0, 0, EC_TIMEOUT_MS,
	                       w, sizeof(w))) < 0) {
		snprintf(why, cap, "fi_read from %s: %s", x->t.nodes[who].node, w);
		/* A fab whose transfer failed may still hold our buffers: a new one. */
		ckpt_fab_mr_close(x->mr);
		ckpt_fab_close(x->fab);
		x->mr = NULL;
		x->fab = NULL;
		return r;
	}
	x->blocks_read++;
	x->bytes_read += len;
	struct agent_ec *ec = x->a->ec;
	pthread_mutex_lock(&ec->mu);
	x->prog.bytes = x->bytes_read;
	pthread_mutex_unlock(&ec->mu);
	return 0;
}

uint64_t ckptd__ec_rebuild_progress(ckptd_agent *a, const char *job, uint32_t rank)
{
	struct agent_ec *x = a->ec;
	uint64_t b = 0;
	if (!x)
		return 0;
	pthread_mutex_lock(&x->mu);
	for (const ecrb *r = x->rebuilds; r; r = r->next)
		if (r->rank == rank && !strcmp(r->job, job))
			b += r->bytes;
	pthread_mutex_unlock(&x->mu);
	return b;
}

/* Holder h's parity of the version pinned, and its checksums of the
 * instance read (x->sums[h]). A failure makes h count as lost. */
static int holder_sums(rbuild *x, unsigned h, char *why, size_t cap)
{
	if (x->sums[h])
		return 0;
	if (x->dead[h]) {
		snprintf(why, cap, "%s unreachable before", x->t.nodes[h].node);
		return -EHOSTUNREACH;
	}
	int r;
	if (!x->has_par[h]) {
		owner *o = &x->ow[h];
		if (owner_connect(&x->t, x->ow, h) < 0) {
			x->dead[h] = 1;
			snprintf(why, cap, "%s", x->t.why);
			return x->t.rc;
		}
		ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
		snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", x->p->job);
		m.u.segment_request.version = x->p->version;
		m.u.segment_request.rank = x->p->group;
		m.u.segment_request.mode = CKPTD_SEG_EC_PARITY;
		if ((r = ckptd_client_call(o->c, &m, &rep)) < 0 || rep.type != CKPTD_MSG_PEER_GRANT) {
			snprintf(why, cap, "%s holds no parity of the version: %s", x->t.nodes[h].node,
			         r < 0 ? strerror(-r) : rep.type == CKPTD_MSG_ERROR ? rep.u.error.text : "unexpected answer");
			if (r == 0)
				ckptd_msg_free(&rep);
			x->dead[h] = 1;
			return r < 0 ? r : -ENOENT;
		}
		x->par[h] = rep.u.peer_grant;
		x->has_par[h] = 1;
		ckptd_msg_free(&rep);
		if (x->par[h].bytes != x->L->total) {
			snprintf(why, cap, "%s's parity is %llu bytes, the plan's %llu", x->t.nodes[h].node,
			         (unsigned long long)x->par[h].bytes, (unsigned long long)x->L->total);
			x->dead[h] = 1;
			return -CKPT_EMISMATCH;
		}
	}
	const ckpt_ecg *g = &x->L->g[x->inst];
	uint64_t nb = ckpt__ecg_blocks(g), np = (uint64_t)g->m * nb, nd = np * g->k;
	uint64_t *sums = malloc((np + nd) * sizeof(*sums));
	if (!sums) {
		snprintf(why, cap, "no memory");
		return -ENOMEM;
	}
	/* Two runs of the slot's checksums: the rows', then the data pieces'. */
	struct { uint64_t at, count; } run[2] = { { x->L->sum_at[x->inst], np },
		                                      { x->L->nsums + x->L->dsum_at[x->inst], nd } };
	uint64_t got = 0;
	r = 0;
	for (int i = 0; i < 2 && !r; i++)
		for (uint64_t done = 0; done < run[i].count && !r;) {
			uint64_t n = run[i].count - done, most = CKPT_ECG_BLOCK / sizeof(uint64_t);
			n = n < most ? n : most;
			if ((r = rb_xfer(x, &x->par[h], x->L->total + (run[i].at + done) * sizeof(uint64_t), n * sizeof(uint64_t), h,
			                 why, cap)) == 0) {
				memcpy(sums + got, x->bounce, n * sizeof(uint64_t));
				got += n;
				done += n;
			}
		}
	if (r < 0) {
		free(sums);
		x->dead[h] = 1;
		return r;
	}
	x->sums[h] = sums;
	return 0;
}

static int rb_fetch(void *arg, unsigned s, unsigned p, uint64_t b, uint8_t *buf, const uint8_t **data,
                    uint64_t *sum, char *why, size_t cap)
{
	rbuild *x = arg;
	(void)data; /* copies into buf */
	const ckpt_ecg *g = &x->L->g[x->inst];
	unsigned h = ckpt__ecg_holder(g, s, p), k = g->k;
	uint64_t off = b * CKPT_ECG_BLOCK, bl = g->slice - off < CKPT_ECG_BLOCK ? g->slice - off : CKPT_ECG_BLOCK;
	uint64_t nb = ckpt__ecg_blocks(g);
	if (x->dead[h]) {
		snprintf(why, cap, "%s unreachable before", x->t.nodes[h].node);
		return -EHOSTUNREACH;
	}
	int r;
	x->t.why[0] = '\0';
	ckpt__fault(&x->a->faults, "agent.ec_rebuild_block"); /* delay:MS: a slow rebuild */
	if (p < k) {
		/* Slice p of member h's shard; past its image, zeros. */
		uint64_t have = ckpt__ecg_have(g, h, p), take = have > off ? (have - off < bl ? have - off : bl) : 0;
		memset(buf, 0, bl);
		if (take) {
			uint32_t rank = x->L->rank[x->inst * x->n + h];
			const ckptd_peer_grant *gr = grant_of(&x->t, x->ow, h, rank, g->len[h]);
			if (!gr) {
				x->dead[h] = 1;
				snprintf(why, cap, "%s", x->t.why);
				return x->t.rc;
			}
			if ((r = rb_xfer(x, gr, (uint64_t)p * g->slice + off, take, h, why, cap)) < 0)
				return r;
			memcpy(buf, x->bounce, take);
			if (ckpt__fault(&x->a->faults, "agent.ec_corrupt_data") < 0)
				buf[take / 2] ^= 0x10; /* arrived damaged */
		}
		/* The checksum its stripe's parity holders took as they folded it in. */
		for (unsigned t = 0; t < g->m; t++) {
			unsigned ph = ckpt__ecg_holder(g, s, k + t);
			char w[300];
			if (holder_sums(x, ph, w, sizeof(w)) == 0) {
				*sum = x->sums[ph][(uint64_t)g->m * nb + ((uint64_t)t * k + p) * nb + b];
				return 0;
			}
		}
		x->unchecked++;
		*sum = ckpt_kern_checksum(buf, bl);
		return 0;
	}
	/* Parity row p - k of stripe s, and the checksum its holder took. */
	if ((r = holder_sums(x, h, why, cap)) < 0)
		return r;
	unsigned t = p - k;
	uint64_t row = x->L->row_off[x->inst] + (uint64_t)t * g->slice;
	*sum = x->sums[h][(uint64_t)t * nb + b];
	if ((r = rb_xfer(x, &x->par[h], row + off, bl, h, why, cap)) < 0)
		return r;
	memcpy(buf, x->bounce, bl);
	if (ckpt__fault(&x->a->faults, "agent.ec_corrupt_parity") < 0)
		buf[bl / 2] ^= 0x10;
	return 0;
}

int ckptd__ec_rebuild(ckptd_agent *a, const ckptd_ec_plan *p, uint32_t rank, uint8_t *dst, uint64_t bytes, char *why,
                      size_t cap)
{
	rbuild x = { .a = a, .p = p, .n = p->k + p->m };
	eclay L;
	ckpt_ec *e = NULL;
	const char *names[CKPT_EC_MAX_PIECES];
	int r = lay_init(&L, p, why, cap);
	if (r < 0)
		return r;
	x.L = &L;
	uint32_t lost = UINT32_MAX;
	for (uint32_t i = 0; i < p->count; i++)
		if (p->entries[i].rank == rank) {
			x.inst = p->entries[i].instance;
			lost = p->entries[i].member;
		}
	x.t.a = a;
	snprintf(x.t.job, sizeof(x.t.job), "%s", p->job);
	x.t.version = p->version;
	x.t.n = x.n;
	for (uint32_t i = 0; i < p->nnodes; i++)
		x.t.nodes[p->nodes[i].member] = p->nodes[i];
	for (unsigned i = 0; i < x.n; i++)
		names[i] = x.t.nodes[i].node;
	if (lost == UINT32_MAX || L.g[x.inst].len[lost] != bytes) {
		snprintf(why, cap, "rank %u is not in rs group %u's plan of version %llu with %llu bytes", rank, p->group,
		         (unsigned long long)p->version, (unsigned long long)bytes);
		r = -EINVAL;
		goto out;
	}
	x.dead[lost] = 1; /* its own copy is what is missing */
	snprintf(x.prog.job, sizeof(x.prog.job), "%s", p->job);
	x.prog.rank = rank;
	if (a->ec) {
		pthread_mutex_lock(&a->ec->mu);
		x.prog.next = a->ec->rebuilds;
		a->ec->rebuilds = &x.prog;
		pthread_mutex_unlock(&a->ec->mu);
	}
	if (!(x.ow = calloc(x.n, sizeof(*x.ow))) || !(x.bounce = aligned_alloc(CKPT_EC_ALIGN, CKPT_ECG_BLOCK))) {
		r = -ENOMEM;
		snprintf(why, cap, "no memory");
		goto out;
	}
	if ((r = ckpt_ec_new(p->k, p->m, &e, why, cap)) < 0)
		goto out;
	char w[1500] = "";
	r = ckpt__ecg_rebuild_shard(&L.g[x.inst], e, lost, rb_fetch, &x, names, dst, w, sizeof(w));
	ckptd_metrics_add(a->mx, CKPTD_M_RS_REBUILDS, p->job, r < 0 ? "failed" : "ok", 1);
	if (r < 0)
		snprintf(why, cap, "rs group %u (rs:%u+%u), version %llu, rank %u on %s: %s", p->group, p->k, p->m,
		         (unsigned long long)p->version, rank, names[lost], w);
	else
		ckptd_logf(a->log, w[0] || x.unchecked ? CKPTD_LOG_INFO : CKPTD_LOG_DEBUG, NULL, p->job,
		           "version %llu rank %u rebuilt from rs group %u: %llu blocks, %llu bytes read%s%s%s",
		           (unsigned long long)p->version, rank, p->group, (unsigned long long)x.blocks_read,
		           (unsigned long long)x.bytes_read, w[0] ? "; " : "", w,
		           x.unchecked ? "; some data blocks checked by the image's chunk checksums alone (no parity holder "
		                         "of their stripe answered)" : "");
out:
	if (a->ec && x.prog.job[0]) {
		pthread_mutex_lock(&a->ec->mu);
		for (ecrb **pp = &a->ec->rebuilds; *pp; pp = &(*pp)->next)
			if (*pp == &x.prog) {
				*pp = x.prog.next;
				break;
			}
		pthread_mutex_unlock(&a->ec->mu);
	}
	if (x.ow) {
		for (unsigned i = 0; i < x.n; i++)
			if (x.has_par[i] && x.ow[i].c) {
				ckptd_msg rel = { .type = CKPTD_MSG_SEGMENT_RELEASE }, rep;
				rel.u.segment_release.segment_id = x.par[i].segment_id;
				if (ckptd_client_call(x.ow[i].c, &rel, &rep) == 0)
					ckptd_msg_free(&rep);
			}
		owners_close(&x.t, x.ow);
	}
	free(x.ow);
	for (unsigned i = 0; i < CKPT_EC_MAX_PIECES; i++)
		free(x.sums[i]);
	ckpt_fab_mr_close(x.mr);
	ckpt_fab_close(x.fab);
	free(x.bounce);
	ckpt_ec_free(e);
	lay_free(&L);
	return r;
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
	if (p->parity) {
		p->parity->pins--;
	} else {
		ckpt_fab_mr_close(p->mr);
		ckptd_pool *pool = ckptd_jpools_get(a->pools, p->job, NULL);
		if (pool)
			ckptd_pool_seg_unpin(pool, p->seg);
	}
	x->pins[i] = x->pins[--x->npins];
}

static ecpin *pin_new(struct agent_ec *x)
{
	if (x->npins == x->cappins) {
		size_t nc = x->cappins ? x->cappins * 2 : 16;
		void *q = realloc(x->pins, nc * sizeof(*x->pins));
		if (!q)
			return NULL;
		x->pins = q;
		x->cappins = nc;
	}
	ecpin *p = &x->pins[x->npins];
	memset(p, 0, sizeof(*p));
	p->id = EC_PIN_BIT | ++x->next_pin;
	return p;
}

/* PEER_GRANT of bytes at offset of a region registered with fab. */
static int send_grant(ckptd_session *s, ckpt_fab *fab, const ckpt_fab_remote *rem, uint64_t id, uint64_t offset,
                      uint64_t bytes)
{
	ckptd_msg rep = { .type = CKPTD_MSG_PEER_GRANT };
	ckptd_peer_grant *g = &rep.u.peer_grant;
	g->segment_id = id;
	g->offset = offset;
	g->bytes = bytes;
	g->key = rem->key;
	g->base = rem->base;
	g->fabric_addr_len = rem->addr_len;
	memcpy(g->fabric_addr, rem->addr, rem->addr_len);
	snprintf(g->provider, sizeof(g->provider), "%s", ckpt_fab_provider_name(fab));
	return ckptd_session_send(s, &rep, -1);
}

/* The parity rows (and their checksums) this member made of (job, version)
 * for group `group`, pinned for a rebuild. */
static int ec_parity(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_segment_request *m)
{
	struct agent_ec *x = a->ec;
	reap(a);
	ectask *t;
	for (t = x->tasks; t; t = t->next)
		if (t->version == m->version && t->group == m->rank && t->state == EC_REPORTED && !t->rc &&
		    !strcmp(t->job, m->job))
			break;
	if (!t)
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "no parity of that version and group here");
	ckpt_fab *fab;
	ckpt_fab_remote rem;
	uint64_t off;
	if (ckptd__peer_remote(a, t->par, &fab, &rem, &off) < 0)
		return ckptd_session_send_error(s, CKPTD_ERR_INTERNAL, "the parity is not in the peer pool");
	ecpin *p = pin_new(x);
	if (!p)
		return -ENOMEM;
	p->serial = rs->serial;
	p->parity = t;
	snprintf(p->job, sizeof(p->job), "%s", m->job);
	t->pins++;
	x->npins++;
	return send_grant(s, fab, &rem, p->id, off, t->bytes);
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
	ecpin *p = pin_new(x);
	if (!p)
		return -ENOMEM;
	if (ckptd_pool_seg_pin(pool, si.id) < 0)
		return ckptd_session_send_error(s, CKPTD_ERR_NOT_FOUND, "that shard's DRAM copy is going");
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
	return send_grant(s, fab, &rem, p->id, 0, si.len);
}

int ckptd__ec_handle(ckptd_agent *a, ckptd_session *s, rank_sess *rs, const ckptd_msg *m)
{
	struct agent_ec *x = a->ec;
	if (!x)
		return ckptd_session_send_error(s, CKPTD_ERR_UNSUPPORTED, "no rs encode here");
	if (m->type == CKPTD_MSG_SEGMENT_REQUEST)
		return m->u.segment_request.mode == CKPTD_SEG_EC_PARITY ? ec_parity(a, s, rs, &m->u.segment_request)
		                                                        : ec_read(a, s, rs, &m->u.segment_request);
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
	while (x->npins) /* before the tasks: parity pins point at them */
		pin_drop(a, x->npins - 1);
	while (x->tasks) {
		ectask *t = x->tasks;
		x->tasks = t->next;
		task_free(a, t);
	}
	free(x->pins);
	/* No unwatch: the server is freed before the roles (as for the other
	 * pipes of the agent's threads); its watches went with it. */
	close(x->pipe[0]);
	close(x->pipe[1]);
	pthread_mutex_destroy(&x->mu);
	free(x);
	a->ec = NULL;
}
