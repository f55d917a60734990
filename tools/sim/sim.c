/* The event loop of ckpt-sim (see sim.h and docs/goodput.md).
 *
 * One job moves through phases: compute, a save's stall, and after a
 * failure a restart then a restore. Failures arrive as a Poisson process
 * whatever the phase. Every completed save is a version with, per tier, the
 * time it became (or will become) durable there; a failure rolls progress
 * back to the newest version durable at a tier that the failure spares. */
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Versions kept for rollback. Only the newest few matter (the newest
 * durable one per tier); the cap bounds memory when remote flushes lag. */
#define SIM_RING 4096

typedef struct sim_version {
	uint64_t seq;
	double progress;
	double done_at;            /* snapshot finished: a flush may start */
	double at[SIM_TIER_COUNT]; /* durable from then on; HUGE_VAL: not */
} sim_version;

enum sim_phase { PH_COMPUTE, PH_STALL, PH_EMERGENCY, PH_RESTART, PH_RESTORE };

typedef struct sim_state {
	const sim_strategy *s;
	const sim_failures *f;
	sim_result *r;
	double t;
	double progress;     /* compute seconds the job's state holds */
	double next_save_p;  /* progress at which the next save starts */
	enum sim_phase phase;
	double phase_end;
	double save_start;   /* snapshot start of the save under way */
	double pipe_free_at; /* the previous save is durable at every pipelined tier */
	double restore_s;    /* of the recovery under way */
	int restore_src;     /* the tier it reads (SIM_TIER_COUNT: none) */
	/* The restart under way, phase by phase, from restart_at. */
	const sim_restart *rs;
	double restart_at;
	double rparts[SIM_R_COUNT];
	/* Spares: how many are free, and when the taken ones come back. */
	unsigned spares_free;
	double *spare_back;
	unsigned nback;
	uint64_t next_seq;
	/* Ring of versions, oldest at first. */
	sim_version *ring;
	unsigned first, count;
	/* The newest version pushed out of the ring while durable at SHARED;
	 * the initial state until then. */
	sim_version floor;
	/* The background flush to SHARED. */
	double flush_free_at;
	uint64_t flushed_seq;  /* newest version picked for a flush */
	uint64_t rng_fail, rng_class, rng_hang;
} sim_state;

int sim_tier_survives(enum sim_tier t, enum sim_class c)
{
	switch (t) {
	case SIM_TIER_LOCAL: return c == SIM_FAIL_CRASH;
	case SIM_TIER_PEER: return c != SIM_FAIL_NODE2;
	case SIM_TIER_SHARED: return 1;
	default: return 0;
	}
}

int sim_strategy_survives(const sim_strategy *s, enum sim_tier t, enum sim_class c)
{
	if (t == SIM_TIER_PEER && c == SIM_FAIL_NODE2)
		return s->peer_tolerance >= 2;
	return sim_tier_survives(t, c);
}

double sim_daly_interval(double ckpt_s, double mtbf_s)
{
	if (!(ckpt_s > 0) || !(mtbf_s > 0) || !isfinite(mtbf_s) || !isfinite(ckpt_s))
		return 0;
	if (ckpt_s >= 2 * mtbf_s)
		return mtbf_s;
	double r = ckpt_s / (2 * mtbf_s);
	return sqrt(2 * ckpt_s * mtbf_s) * (1 + sqrt(r) / 3 + r / 9) - ckpt_s;
}

/* splitmix64: small, fast, and each seed gives an independent stream. */
static uint64_t rng_next(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *x)
{
	return (double)(rng_next(x) >> 11) * 0x1.0p-53;
}

uint64_t sim_cell_seed(uint64_t seed, uint64_t gpus, uint64_t run)
{
	uint64_t x = seed;
	uint64_t a = rng_next(&x) ^ gpus;
	uint64_t b = rng_next(&a) ^ run;
	return rng_next(&b);
}

static double next_arrival(sim_state *st)
{
	if (!(st->f->rate_per_s > 0))
		return HUGE_VAL;
	return -log1p(-rng_unit(&st->rng_fail)) / st->f->rate_per_s;
}

/* Always three draws per failure, so that the classes of later failures
 * do not depend on the fractions of earlier ones. */
static enum sim_class draw_class(sim_state *st)
{
	double u_pre = rng_unit(&st->rng_class);
	double u_node = rng_unit(&st->rng_class);
	double u_pair = rng_unit(&st->rng_class);
	if (u_pre < st->f->preempt_frac)
		return SIM_FAIL_PREEMPT;
	if (u_node >= st->f->node_loss_frac)
		return SIM_FAIL_CRASH;
	return u_pair < st->f->partner_loss_frac ? SIM_FAIL_NODE2 : SIM_FAIL_NODE;
}

static sim_version *ring_at(sim_state *st, unsigned i)
{
	return &st->ring[(st->first + i) % SIM_RING];
}

static void ring_push(sim_state *st, const sim_version *v)
{
	if (st->count == SIM_RING) {
		sim_version *old = ring_at(st, 0);
		if (old->at[SIM_TIER_SHARED] < HUGE_VAL)
			st->floor = *old;
		st->first = (st->first + 1) % SIM_RING;
		st->count--;
	}
	*ring_at(st, st->count++) = *v;
}

static int flushed_tier(const sim_strategy *s, int j)
{
	return s->tier[j].present && s->tier[j].flush_s > 0;
}

/* Starts every flush that would have started by now: when the flusher is
 * free it takes the newest finished snapshot not yet flushed, or waits for
 * the next one. Called before anything looks at SHARED durability. */
static void flush_advance(sim_state *st, double now)
{
	if (!flushed_tier(st->s, SIM_TIER_SHARED))
		return;
	while (st->flush_free_at <= now) {
		sim_version *pick = NULL, *next = NULL;
		for (unsigned i = st->count; i-- > 0;) {
			sim_version *v = ring_at(st, i);
			if (v->seq <= st->flushed_seq)
				break;
			if (v->done_at <= st->flush_free_at) {
				pick = v;
				break;
			}
			if (v->done_at <= now)
				next = v; /* the oldest finished after the flusher freed */
		}
		if (!pick)
			pick = next;
		if (!pick)
			return;
		double start = pick->done_at > st->flush_free_at ? pick->done_at : st->flush_free_at;
		pick->at[SIM_TIER_SHARED] = start + st->s->tier[SIM_TIER_SHARED].flush_s;
		st->flush_free_at = pick->at[SIM_TIER_SHARED];
		st->flushed_seq = pick->seq;
	}
}

/* Charges the time from st->t to t1 to the current phase. */
static void advance(sim_state *st, double t1)
{
	double dt = t1 - st->t;
	switch (st->phase) {
	case PH_COMPUTE: st->progress += dt; break;
	case PH_STALL:
	case PH_EMERGENCY: st->r->stall_s += dt; break;
	case PH_RESTART: st->r->restart_s += dt; break;
	case PH_RESTORE: st->r->restore_s += dt; break;
	}
	st->t = t1;
}

/* Seconds from a save's start until durable at tier j. A tier cannot be
 * durable before the snapshot it copies is finished. */
static double tier_durable(const sim_strategy *s, int j)
{
	double d = s->tier[j].flush_s > 0 ? s->stall_s + s->tier[j].flush_s : s->tier[j].durable_s;
	return d > s->stall_s ? d : s->stall_s;
}

/* Records the save that just finished its snapshot; an emergency save is
 * durable only at the tiers it waited for. */
static void finish_save(sim_state *st, int emergency)
{
	const sim_strategy *s = st->s;
	sim_version v = { .seq = st->next_seq++, .progress = st->progress, .done_at = st->t };
	double pipe = st->t;
	for (int j = 0; j < SIM_TIER_COUNT; j++) {
		v.at[j] = HUGE_VAL;
		if (!s->tier[j].present || s->tier[j].flush_s > 0)
			continue;
		double at = st->save_start + tier_durable(s, j);
		if (emergency && at > st->t)
			continue;
		v.at[j] = at;
		if (at > pipe)
			pipe = at;
	}
	ring_push(st, &v);
	st->pipe_free_at = pipe;
	st->r->saves++;
	if (emergency)
		st->r->emergency_saves++;
	flush_advance(st, st->t);
}

/* Rolls back to the newest version that class c spares and enters the
 * restart; the caller sets when it ends. */
static void roll_back(sim_state *st, enum sim_class c)
{
	const sim_strategy *s = st->s;
	const sim_version *best = NULL;
	double read = HUGE_VAL;
	flush_advance(st, st->t);
	int src = SIM_TIER_COUNT;
	for (unsigned i = st->count; i-- > 0 && !best;) {
		const sim_version *v = ring_at(st, i);
		for (int j = 0; j < SIM_TIER_COUNT; j++)
			if (s->tier[j].present && sim_strategy_survives(s, j, c) && v->at[j] <= st->t) {
				best = v;
				if (s->tier[j].read_s < read) {
					read = s->tier[j].read_s;
					src = j;
				}
			}
	}
	sim_version from;
	if (best) {
		from = *best;
	} else {
		/* Nothing newer left: the floor (at worst the initial state). */
		from = st->floor;
		for (int j = 0; j < SIM_TIER_COUNT; j++)
			if (s->tier[j].present && sim_strategy_survives(s, j, c) && from.at[j] <= st->t &&
			    s->tier[j].read_s < read) {
				read = s->tier[j].read_s;
				src = j;
			}
		if (read == HUGE_VAL) {
			/* No tier outlives this failure: start over. */
			from.progress = 0;
			read = 0;
		}
	}
	st->r->recompute_s += st->progress - from.progress;
	st->progress = from.progress;
	while (st->count && ring_at(st, st->count - 1)->seq > from.seq)
		st->count--;
	if (!st->count)
		ring_push(st, &from);
	/* Copies still in flight died with the job's processes: the pipelined
	 * copies of the newest versions and the flush under way, so the scan
	 * stops at the first older version with neither. */
	double pipe = 0;
	for (int j = 0; j < SIM_TIER_COUNT; j++)
		if (s->tier[j].present && !(s->tier[j].flush_s > 0) && tier_durable(s, j) > pipe)
			pipe = tier_durable(s, j);
	for (unsigned i = st->count; i-- > 0;) {
		sim_version *v = ring_at(st, i);
		if (v->seq < st->flushed_seq && v->done_at - s->stall_s + pipe <= st->t)
			break;
		for (int j = 0; j < SIM_TIER_COUNT; j++)
			if (v->at[j] > st->t)
				v->at[j] = HUGE_VAL;
	}
	for (int j = 0; j < SIM_TIER_COUNT; j++)
		if (st->floor.at[j] > st->t)
			st->floor.at[j] = HUGE_VAL;
	st->pipe_free_at = st->t;
	if (st->flush_free_at > st->t)
		st->flush_free_at = st->t;
	st->restore_s = read;
	st->restore_src = read == 0 && src == SIM_TIER_COUNT ? SIM_TIER_COUNT : src;
	st->phase = PH_RESTART;
}

void sim_restart_flat(sim_restart *r, double restart_s)
{
	memset(r, 0, sizeof(*r));
	r->sched_s = restart_s;
}

/* The time spent in the restart that is ending (or cut short by another
 * failure), charged to its phases in order. */
static void restart_account(sim_state *st)
{
	double left = st->t - st->restart_at;
	for (int k = 0; k < SIM_R_COUNT && left > 0; k++) {
		double d = st->rparts[k] < left ? st->rparts[k] : left;
		st->r->restart_phase_s[k] += d;
		left -= d;
	}
}

/* A node is gone: a spare takes its place if one is free (the lost state
 * pulled onto it from partner DRAM while the job relaunches, so the restore
 * reads node DRAM), else the job waits for a replacement. */
static void replace_node(sim_state *st, double *spare_part)
{
	const sim_restart *rs = st->rs;
	for (unsigned i = 0; i < st->nback;) /* spares back by now */
		if (st->spare_back[i] <= st->t) {
			st->spare_back[i] = st->spare_back[--st->nback];
			st->spares_free++;
		} else {
			i++;
		}
	if (!st->spares_free) {
		*spare_part = rs->no_spare_s;
		st->r->no_spare++;
		return;
	}
	st->spares_free--;
	st->spare_back[st->nback++] = st->t + rs->spare_return_s;
	double path = rs->spare_s;
	if (rs->stage_s > 0 && st->restore_src == SIM_TIER_PEER && st->s->tier[SIM_TIER_LOCAL].present) {
		path += rs->stage_s;
		st->restore_s = st->s->tier[SIM_TIER_LOCAL].read_s;
		st->r->staged++;
	}
	/* Staged while the launcher relaunches: only what outlasts it counts. */
	double overlap = rs->sched_s + rs->start_s;
	*spare_part = path > overlap ? path - overlap : 0;
}

/* After roll_back: the restart's phases for a failure of class c. */
static void begin_restart(sim_state *st, enum sim_class c, int hang)
{
	const sim_restart *rs = st->rs;
	double spare = 0;
	if (c != SIM_FAIL_CRASH)
		replace_node(st, &spare);
	st->rparts[SIM_R_DETECT] = hang ? rs->hang_detect_s : rs->detect_s;
	st->rparts[SIM_R_SPARE] = spare;
	st->rparts[SIM_R_SCHED] = rs->sched_s;
	st->rparts[SIM_R_START] = rs->start_s;
	st->rparts[SIM_R_COMM] = rs->comm_s;
	st->rparts[SIM_R_WARMUP] = rs->warmup_s;
	double total = 0;
	for (int k = 0; k < SIM_R_COUNT; k++)
		total += st->rparts[k];
	st->restart_at = st->t;
	st->phase_end = st->t + total;
}

/* Seconds an emergency save needs to be durable at a tier that outlives
 * a preemption; HUGE_VAL when none is there. */
static double emergency_cost(const sim_strategy *s)
{
	double best = HUGE_VAL;
	for (int j = 0; j < SIM_TIER_COUNT; j++)
		if (s->tier[j].present && sim_strategy_survives(s, j, SIM_FAIL_PREEMPT) && s->tier[j].flush_s <= 0) {
			double d = tier_durable(s, j);
			if (d < best)
				best = d;
		}
	return best;
}

static void fail(sim_state *st)
{
	enum sim_class c = draw_class(st);
	/* Its own stream: the classes and arrivals stay those of sim_run. */
	int hang = c == SIM_FAIL_CRASH && rng_unit(&st->rng_hang) < st->rs->hang_frac;
	st->r->failures++;
	st->r->by_class[c]++;
	st->r->hangs += (uint64_t)hang;
	if (st->phase == PH_RESTART)
		restart_account(st);
	if (c == SIM_FAIL_PREEMPT && (st->phase == PH_COMPUTE || st->phase == PH_STALL)) {
		double e = emergency_cost(st->s);
		if (e <= st->f->preempt_notice_s) {
			/* Save now, exit once durable off the node: nothing is lost
			 * but the save itself (a regular save under way is dropped). */
			st->phase = PH_EMERGENCY;
			st->save_start = st->t;
			st->phase_end = st->t + e;
			return;
		}
	}
	roll_back(st, c);
	begin_restart(st, c, hang);
}

static int valid_restart(const sim_restart *r)
{
	const double v[] = { r->detect_s, r->hang_detect_s, r->spare_s, r->stage_s, r->sched_s, r->start_s, r->comm_s,
		             r->warmup_s, r->spare_return_s, r->no_spare_s };
	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (!(v[i] >= 0) || !isfinite(v[i]))
			return 0;
	return r->hang_frac >= 0 && r->hang_frac <= 1 && r->spares <= SIM_MAX_SPARES;
}

static int valid(const sim_strategy *s, const sim_failures *f, double wall_s, double restart_s)
{
	if (!(s->interval_s > 0) || !isfinite(s->interval_s) || !(s->stall_s >= 0) || !isfinite(s->stall_s))
		return 0;
	int tiers = 0;
	for (int j = 0; j < SIM_TIER_COUNT; j++) {
		const sim_tier_cost *c = &s->tier[j];
		if (!c->present)
			continue;
		tiers++;
		if (!(c->durable_s >= 0) || !(c->flush_s >= 0) || !(c->read_s >= 0) || !isfinite(c->durable_s) ||
		    !isfinite(c->flush_s) || !isfinite(c->read_s))
			return 0;
		if (c->flush_s > 0 && j != SIM_TIER_SHARED)
			return 0;
	}
	if (!tiers || !(wall_s > 0) || !isfinite(wall_s) || !(restart_s >= 0) || !isfinite(restart_s))
		return 0;
	if (!(f->rate_per_s >= 0) || !isfinite(f->rate_per_s) || !(f->preempt_notice_s >= 0))
		return 0;
	const double fr[] = { f->node_loss_frac, f->partner_loss_frac, f->preempt_frac };
	for (unsigned i = 0; i < sizeof(fr) / sizeof(fr[0]); i++)
		if (!(fr[i] >= 0 && fr[i] <= 1))
			return 0;
	return 1;
}

int sim_run(const sim_strategy *s, const sim_failures *f, double wall_s, double restart_s, uint64_t seed,
            sim_result *out)
{
	sim_restart r;
	sim_restart_flat(&r, restart_s);
	if (!(restart_s >= 0) || !isfinite(restart_s)) {
		memset(out, 0, sizeof(*out));
		return -1;
	}
	return sim_run_phased(s, f, &r, wall_s, seed, out);
}

int sim_run_phased(const sim_strategy *s, const sim_failures *f, const sim_restart *rs, double wall_s, uint64_t seed,
                   sim_result *out)
{
	memset(out, 0, sizeof(*out));
	if (!rs || !valid(s, f, wall_s, 0) || !valid_restart(rs))
		return -1;
	sim_state *st = calloc(1, sizeof(*st));
	sim_version *ring = st ? malloc(SIM_RING * sizeof(*ring)) : NULL;
	double *back = ring ? malloc((rs->spares ? rs->spares : 1) * sizeof(*back)) : NULL;
	if (!back) {
		free(ring);
		free(st);
		return -1;
	}
	st->s = s;
	st->f = f;
	st->rs = rs;
	st->r = out;
	st->ring = ring;
	st->spare_back = back;
	st->spares_free = rs->spares;
	st->rng_fail = seed;
	st->rng_class = seed ^ 0xD1B54A32D192ED03ull;
	st->rng_hang = seed ^ 0x8CB92BA72F3D8DD7ull;
	/* The initial state: restorable from every tier from the start, the
	 * way a job's first weights are. */
	sim_version v0 = { .seq = 0 };
	for (int j = 0; j < SIM_TIER_COUNT; j++)
		v0.at[j] = s->tier[j].present ? 0 : HUGE_VAL;
	st->floor = v0;
	ring_push(st, &v0);
	st->next_seq = 1;
	st->phase = PH_COMPUTE;
	st->next_save_p = s->interval_s;

	double next_fail = next_arrival(st);
	while (st->t < wall_s) {
		double end = st->phase == PH_COMPUTE ? st->t + (st->next_save_p - st->progress) : st->phase_end;
		if (next_fail < end && next_fail < wall_s) {
			advance(st, next_fail);
			fail(st);
			next_fail += next_arrival(st);
			continue;
		}
		if (end > wall_s) {
			advance(st, wall_s);
			if (st->phase == PH_RESTART)
				restart_account(st);
			break;
		}
		advance(st, end);
		switch (st->phase) {
		case PH_COMPUTE: {
			/* The staging pool holds one version: a save waits until the
			 * previous one is durable at the pipelined tiers. */
			double wait = st->pipe_free_at > st->t ? st->pipe_free_at - st->t : 0;
			st->save_start = st->t + wait;
			st->phase = PH_STALL;
			st->phase_end = st->save_start + s->stall_s;
			break;
		}
		case PH_STALL:
			finish_save(st, 0);
			st->phase = PH_COMPUTE;
			st->next_save_p = st->progress + s->interval_s;
			break;
		case PH_EMERGENCY:
			finish_save(st, 1);
			roll_back(st, SIM_FAIL_PREEMPT);
			begin_restart(st, SIM_FAIL_PREEMPT, 0);
			break;
		case PH_RESTART:
			restart_account(st);
			st->phase = PH_RESTORE;
			st->phase_end = st->t + st->restore_s;
			break;
		case PH_RESTORE:
			st->phase = PH_COMPUTE;
			st->next_save_p = st->progress + s->interval_s;
			break;
		}
	}
	out->useful_s = st->progress;
	free(back);
	free(ring);
	free(st);
	return 0;
}
