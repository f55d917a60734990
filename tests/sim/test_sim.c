/* Checks ckpt-sim's model (tools/sim/sim.c) against what can be worked out
 * by hand: exact goodput without failures, the expected loss per failure,
 * the Young/Daly interval being the best of its neighbours, the Poisson
 * failure count, the durable window and emergency saves.
 * Every check could fail: each compares the simulation with a number not
 * computed by the simulation. */
#include <math.h>

#include "helpers.h"
#include "sim.h"

#define HOUR 3600.0

static int checks;

#define CHECK(cond, ...) do { checks++; if (!(cond)) T_FAIL(__VA_ARGS__); } while (0)

/* torch.save-like: one remote tier, written while training waits. */
static sim_strategy remote(double stall_s, double read_s, double interval_s)
{
	sim_strategy s = { .stall_s = stall_s, .interval_s = interval_s };
	snprintf(s.name, sizeof(s.name), "remote");
	s.tier[SIM_TIER_SHARED] = (sim_tier_cost){ .present = 1, .durable_s = stall_s, .read_s = read_s };
	return s;
}

/* ckpt-like: node DRAM, partner DRAM after peer_s more, remote by flush. */
static sim_strategy tiers(double stall_s, double peer_s, double flush_s, double interval_s)
{
	sim_strategy s = { .stall_s = stall_s, .interval_s = interval_s };
	snprintf(s.name, sizeof(s.name), "tiers");
	s.tier[SIM_TIER_LOCAL] = (sim_tier_cost){ .present = 1, .durable_s = stall_s, .read_s = 0.5 };
	s.tier[SIM_TIER_PEER] = (sim_tier_cost){ .present = 1, .durable_s = stall_s + peer_s, .read_s = 1 };
	s.tier[SIM_TIER_SHARED] = (sim_tier_cost){ .present = 1, .flush_s = flush_s, .read_s = 40 };
	return s;
}

static double lost_s(const sim_result *r)
{
	return r->stall_s + r->recompute_s + r->restore_s + r->restart_s;
}

static void run(const sim_strategy *s, const sim_failures *f, double wall, double restart, uint64_t seed,
                sim_result *r)
{
	if (sim_run(s, f, wall, restart, seed, r) < 0)
		T_FAIL("sim_run refused %s", s->name);
	/* The split adds up to the wall time, whatever else is checked. */
	double sum = r->useful_s + lost_s(r);
	CHECK(fabs(sum - wall) <= 1e-9 * wall, "%s: useful + lost = %.9f s, wall %.9f s", s->name, sum, wall);
	CHECK(r->useful_s >= 0 && r->stall_s >= 0 && r->recompute_s >= 0 && r->restore_s >= 0 && r->restart_s >= 0,
	      "%s: a negative share", s->name);
}

/* (a) No failures: goodput is 1 - stall * saves / T, saves counted by hand
 * (a save cut by the end counts its part). */
static void test_no_failures(void)
{
	const sim_failures none = { 0 };
	const sim_strategy ss[] = { remote(35.18, 35.18, 1800), tiers(0.4, 0.8, 32, 96.5), remote(60, 60, 3540),
	                            tiers(2, 1, 1, 30) };
	const double walls[] = { 168 * HOUR, 24 * HOUR + 1234.5, 3600 };
	for (unsigned i = 0; i < sizeof(ss) / sizeof(ss[0]); i++)
		for (unsigned w = 0; w < sizeof(walls) / sizeof(walls[0]); w++) {
			const sim_strategy *s = &ss[i];
			double T = walls[w], cyc = s->interval_s + s->stall_s;
			double n = floor(T / cyc), rem = T - n * cyc;
			double cut = rem > s->interval_s ? rem - s->interval_s : 0;
			double want = 1 - (n * s->stall_s + cut) / T;
			sim_result r;
			run(s, &none, T, 120, 7, &r);
			double got = r.useful_s / T;
			CHECK(fabs(got - want) <= 1e-9 * want, "%s, %g s: goodput %.12f, expected %.12f", s->name, T, got,
			      want);
			CHECK(r.failures == 0 && r.recompute_s == 0 && r.restore_s == 0 && r.restart_s == 0,
			      "%s: losses without failures", s->name);
			CHECK(r.saves == (uint64_t)n, "%s: %llu saves, expected %.0f", s->name, (unsigned long long)r.saves, n);
		}
	/* Saves closer together than the partner copy takes wait for it (one
	 * version in the staging pool): a save starts every max(S + I, d). */
	sim_strategy s = tiers(2, 1, 1, 0.25);
	sim_result r;
	run(&s, &none, 1e5, 120, 7, &r);
	double want = 0.25 / 3;
	CHECK(fabs(r.useful_s / 1e5 - want) < 1e-4, "staging pool wait: goodput %.6f, expected %.6f",
	      r.useful_s / 1e5, want);
}

/* (b) Fixed interval, failures: mean (recompute + restore + restart) per
 * failure against interval/2 + restore + restart, and against the exact
 * expectation for Poisson arrivals: recovery lasts min(Exp, D) and a failure
 * during compute loses the truncated exponential 1/l - I/(e^{lI} - 1). */
static void test_loss_per_failure(void)
{
	const double I = 1800, restore = 60, restart = 120, mtbf = 10 * HOUR, lambda = 1 / mtbf;
	const sim_failures f = { .rate_per_s = lambda };
	const sim_strategy s = remote(0, restore, I);
	double lost = 0, n = 0;
	for (uint64_t k = 0; k < 40; k++) {
		sim_result r;
		run(&s, &f, 10000 * HOUR, restart, 1000 + k, &r);
		lost += r.recompute_s + r.restore_s + r.restart_s;
		n += (double)r.failures;
	}
	double D = restore + restart;
	double naive = I / 2 + D;
	double exact = (1 - exp(-lambda * D)) / lambda + exp(-lambda * D) * (1 / lambda - I / expm1(lambda * I));
	double got = lost / n;
	printf("loss per failure: %.1f s over %.0f failures; I/2 + restore + restart = %.1f s, exact %.1f s\n", got,
	       n, naive, exact);
	CHECK(fabs(got / exact - 1) < 0.01, "loss per failure %.1f s, exact expectation %.1f s", got, exact);
	CHECK(fabs(got / naive - 1) < 0.03, "loss per failure %.1f s, interval/2 + restore + restart %.1f s", got,
	      naive);
}

/* A failure inside a save's durable window loses back to the version
 * before. A failure X ~ Exp(l) after a recovery falls u = X mod I into the
 * cycle of its m = floor(X / I)-th save (m and u independent; u has density
 * ~ e^{-lu} on [0, I)). With node losses only and the partner copy durable
 * d after each save, it loses u, plus I when m >= 1 and u < d (the first
 * cycle rolls back to the version restored, which is durable). With
 * crashes, node DRAM is durable when the stall ends: only u. */
static void test_durable_window(void)
{
	const double I = 1800, d = 600, lambda = 1 / (10 * HOUR);
	const sim_strategy s = tiers(1e-3, d, 1e6, I);
	double mean_u = 1 / lambda - I / expm1(lambda * I);
	double p_window = exp(-lambda * I) * expm1(-lambda * d) / expm1(-lambda * I);
	const struct { double node; double want; const char *what; } cases[] = {
		{ 1, mean_u + I * p_window, "node losses" },
		{ 0, mean_u, "crashes" },
	};
	for (unsigned i = 0; i < 2; i++) {
		const sim_failures f = { .rate_per_s = lambda, .node_loss_frac = cases[i].node };
		double rec = 0, n = 0;
		for (uint64_t k = 0; k < 10; k++) {
			sim_result r;
			run(&s, &f, 20000 * HOUR, 0, 2000 + k, &r);
			rec += r.recompute_s;
			n += (double)r.failures;
		}
		double got = rec / n;
		printf("recompute per failure, %s: %.1f s (expected %.1f s) over %.0f failures\n", cases[i].what, got,
		       cases[i].want, n);
		CHECK(fabs(got / cases[i].want - 1) < 0.015, "%s: recompute per failure %.1f s, expected %.1f s",
		      cases[i].what, got, cases[i].want);
	}
}

/* (c) Goodput at the Young/Daly interval is at least that at half and
 * twice it, on the same failures (common seeds). */
static void test_daly_is_best(void)
{
	const double M = 3.1 * HOUR;
	const sim_failures f = { .rate_per_s = 1 / M, .node_loss_frac = 0.766, .partner_loss_frac = 0.01 };
	const struct { sim_strategy s; double cost; } cases[] = {
		{ remote(35, 35, 1), 35 },
		{ tiers(0.4, 0.8, 35, 1), 0.4 },
	};
	for (unsigned i = 0; i < 2; i++) {
		double tau = sim_daly_interval(cases[i].cost, M);
		double young = sqrt(2 * cases[i].cost * M);
		CHECK(tau > 0.9 * young && tau < young, "Daly %.1f s against Young %.1f s", tau, young);
		const double mult[] = { 1, 0.5, 2 };
		double gp[3] = { 0 };
		for (int m = 0; m < 3; m++) {
			sim_strategy s = cases[i].s;
			s.interval_s = tau * mult[m];
			for (uint64_t k = 0; k < 24; k++) {
				sim_result r;
				run(&s, &f, 168 * HOUR, 120, 3000 + k, &r);
				gp[m] += r.useful_s / (168 * HOUR) / 24;
			}
		}
		printf("%s: goodput at Young/Daly (%.0f s) %.4f%%, at half %.4f%%, at twice %.4f%%\n", cases[i].s.name,
		       tau, 100 * gp[0], 100 * gp[1], 100 * gp[2]);
		CHECK(gp[0] >= gp[1] && gp[0] >= gp[2], "%s: Young/Daly interval not the best of the three",
		      cases[i].s.name);
	}
	/* The formula itself, by hand: C = 60 s, M = 1e4 s. */
	double r = 60 / 2e4;
	double want = sqrt(2 * 60 * 1e4) * (1 + sqrt(r) / 3 + r / 9) - 60;
	CHECK(fabs(sim_daly_interval(60, 1e4) - want) < 1e-9, "Daly interval formula");
	CHECK(sim_daly_interval(100, 40) == 40, "Daly interval when C >= 2M is M");
	CHECK(sim_daly_interval(0, 1e4) == 0 && sim_daly_interval(1, HUGE_VAL) == 0, "no Daly interval");
}

/* (d) Failures over a long run: Poisson with mean l*T; the classes drawn
 * in their fractions. */
static void test_poisson(void)
{
	const double lambda = 1 / (2 * HOUR), T = 20000 * HOUR;
	const sim_failures f = { .rate_per_s = lambda, .node_loss_frac = 0.766, .partner_loss_frac = 0.01,
	                         .preempt_frac = 0.1, .preempt_notice_s = 30 };
	const sim_strategy ss[] = { remote(35, 35, 1800), tiers(0.4, 0.8, 35, 900) };
	sim_result r[2];
	for (int i = 0; i < 2; i++)
		run(&ss[i], &f, T, 120, 42, &r[i]);
	double mean = lambda * T, n = (double)r[0].failures;
	printf("failures: %.0f, Poisson mean %.0f (sigma %.1f)\n", n, mean, sqrt(mean));
	CHECK(fabs(n - mean) <= 3 * sqrt(mean), "%.0f failures, Poisson mean %.0f", n, mean);
	CHECK(r[1].failures == r[0].failures, "strategies on one seed met different failures");
	for (int c = 0; c < SIM_FAIL_COUNT; c++)
		CHECK(r[1].by_class[c] == r[0].by_class[c], "strategies on one seed met different failure classes");
	double p[SIM_FAIL_COUNT] = { 0.9 * 0.234, 0.9 * 0.766 * 0.99, 0.9 * 0.766 * 0.01, 0.1 };
	for (int c = 0; c < SIM_FAIL_COUNT; c++) {
		double k = (double)r[0].by_class[c], sd = sqrt(n * p[c] * (1 - p[c]));
		CHECK(fabs(k - n * p[c]) <= 3 * sd + 1, "class %d: %.0f failures, expected %.1f", c, k, n * p[c]);
	}
	/* The same seed gives the same run. */
	sim_result again;
	run(&ss[1], &f, T, 120, 42, &again);
	CHECK(!memcmp(&again, &r[1], sizeof(again)), "same seed, different result");
}

/* Preemptions whose notice covers the emergency save lose no work; those
 * whose notice does not are node losses. */
static void test_preemption(void)
{
	const sim_failures f = { .rate_per_s = 1 / (3 * HOUR), .preempt_frac = 1, .preempt_notice_s = 30 };
	sim_strategy fits = tiers(0.4, 2, 35, 600), late = remote(35, 35, 1800);
	sim_result r;
	run(&fits, &f, 2000 * HOUR, 120, 5, &r);
	CHECK(r.recompute_s == 0, "emergency saves within notice still lost %.1f s", r.recompute_s);
	CHECK(r.emergency_saves <= r.failures && r.emergency_saves >= 0.95 * (double)r.failures,
	      "%llu emergency saves for %llu preemptions", (unsigned long long)r.emergency_saves,
	      (unsigned long long)r.failures);
	run(&late, &f, 2000 * HOUR, 120, 5, &r);
	CHECK(r.emergency_saves == 0 && r.recompute_s > 0, "a 35 s save fit in a 30 s notice");
}

/* Remote restores only when the partner is lost too: with partner losses
 * excluded, no restore takes the remote read time. */
static void test_restore_sources(void)
{
	const sim_failures f = { .rate_per_s = 1 / HOUR, .node_loss_frac = 0.5, .partner_loss_frac = 0 };
	sim_strategy s = tiers(0.4, 0.8, 35, 300);
	sim_result r;
	run(&s, &f, 1000 * HOUR, 0, 9, &r);
	/* Each restore reads 0.5 s (node DRAM) or 1 s (partner), never 40 s. */
	CHECK(r.restore_s <= 1.0 * (double)r.failures + 1e-6 && r.restore_s >= 0.5 * 0.9 * (double)r.failures,
	      "restore time %.1f s for %llu failures", r.restore_s, (unsigned long long)r.failures);
	const sim_failures both = { .rate_per_s = 1 / HOUR, .node_loss_frac = 1, .partner_loss_frac = 1 };
	run(&s, &both, 1000 * HOUR, 0, 9, &r);
	CHECK(r.restore_s > 30 * (double)r.failures, "node and partner lost, yet restored from DRAM");
}

static void test_refused(void)
{
	const sim_failures f = { .rate_per_s = 1e-4 };
	sim_result r;
	sim_strategy s = remote(1, 1, 0);
	CHECK(sim_run(&s, &f, 3600, 0, 1, &r) < 0, "interval 0 accepted");
	s = remote(-1, 1, 60);
	CHECK(sim_run(&s, &f, 3600, 0, 1, &r) < 0, "negative stall accepted");
	s = remote(1, 1, 60);
	s.tier[SIM_TIER_SHARED].present = 0;
	CHECK(sim_run(&s, &f, 3600, 0, 1, &r) < 0, "no tier accepted");
	s = tiers(1, 1, 1, 60);
	s.tier[SIM_TIER_PEER].flush_s = 5;
	CHECK(sim_run(&s, &f, 3600, 0, 1, &r) < 0, "a flushed partner tier accepted");
	const sim_failures bad = { .rate_per_s = 1e-4, .node_loss_frac = 1.5 };
	s = remote(1, 1, 60);
	CHECK(sim_run(&s, &bad, 3600, 0, 1, &r) < 0, "fraction 1.5 accepted");
}

/* A phased run: the split adds up, and so does the restart's phase split. */
static void run_phased(const sim_strategy *s, const sim_failures *f, const sim_restart *rs, double wall, uint64_t seed,
                       sim_result *r)
{
	if (sim_run_phased(s, f, rs, wall, seed, r) < 0)
		T_FAIL("sim_run_phased refused %s", s->name);
	double sum = r->useful_s + lost_s(r), ph = 0;
	CHECK(fabs(sum - wall) <= 1e-9 * wall, "%s: useful + lost = %.9f s, wall %.9f s", s->name, sum, wall);
	for (int k = 0; k < SIM_R_COUNT; k++) {
		CHECK(r->restart_phase_s[k] >= 0, "%s: phase %d negative", s->name, k);
		ph += r->restart_phase_s[k];
	}
	CHECK(fabs(ph - r->restart_s) <= 1e-6 * (r->restart_s + 1), "%s: phases %.6f s, restart %.6f s", s->name, ph,
	      r->restart_s);
}

/* (i) The restart, phase by phase: crashes cost detect + sched + start +
 * comm + warm-up, hangs the hang detection instead; a node loss with a spare
 * costs the pull onto the spare beyond what the relaunch hides, and its
 * restore reads node DRAM; without a spare it waits for a new node and reads
 * the partner's DRAM; a pool of one spare that does not come back serves the
 * first loss only. Each against numbers computed here, failures rare enough
 * that few recoveries are cut short (those are counted out exactly: a
 * failure during a recovery ends it). */
static void test_phases(void)
{
	const double wall = 4000 * HOUR, mtbf = 40 * HOUR;
	sim_strategy s = tiers(0.4, 0.8, 32, 600);
	sim_restart rs = { .detect_s = 2, .hang_detect_s = 10, .spare_s = 0.1, .stage_s = 30, .sched_s = 5, .start_s = 15,
	                   .comm_s = 44, .warmup_s = 20, .spares = 1000, .spare_return_s = 3600, .no_spare_s = 600 };
	sim_result r;
	/* Crashes only: every restart whole, or cut short by the next failure. */
	sim_failures crash = { .rate_per_s = 1 / mtbf };
	run_phased(&s, &crash, &rs, wall, 7, &r);
	double full = 2 + 5 + 15 + 44 + 20;
	CHECK(r.failures > 50 && r.by_class[SIM_FAIL_CRASH] == r.failures, "crash only: %llu failures",
	      (unsigned long long)r.failures);
	CHECK(r.restart_s <= full * (double)r.failures + 1e-6 && r.restart_s >= full * (double)r.failures * 0.98,
	      "crash restart %.1f s for %llu failures, want %.1f s each", r.restart_s, (unsigned long long)r.failures, full);
	CHECK(fabs(r.restart_phase_s[SIM_R_COMM] / r.restart_s - 44 / full) < 0.01, "comm share %.3f, want %.3f",
	      r.restart_phase_s[SIM_R_COMM] / r.restart_s, 44 / full);
	CHECK(r.restart_phase_s[SIM_R_SPARE] == 0 && r.staged == 0 && r.no_spare == 0, "a crash took a spare");
	/* The same failures as hangs. */
	rs.hang_frac = 1;
	sim_result h;
	run_phased(&s, &crash, &rs, wall, 7, &h);
	CHECK(h.hangs == h.failures && h.failures == r.failures, "hangs %llu of %llu", (unsigned long long)h.hangs,
	      (unsigned long long)h.failures);
	CHECK(fabs(h.restart_phase_s[SIM_R_DETECT] - 10 * (double)h.failures) <= 10, "hang detection %.1f s over %llu",
	      h.restart_phase_s[SIM_R_DETECT], (unsigned long long)h.failures);
	rs.hang_frac = 0;
	/* Node losses with spares: the pull (0.1 + 30 s) outlasts the relaunch
	 * (5 + 15 s) by 10.1 s; restored from node DRAM (0.5 s). */
	sim_failures node = { .rate_per_s = 1 / mtbf, .node_loss_frac = 1 };
	run_phased(&s, &node, &rs, wall, 8, &r);
	CHECK(r.staged == r.failures && r.no_spare == 0, "staged %llu of %llu", (unsigned long long)r.staged,
	      (unsigned long long)r.failures);
	CHECK(fabs(r.restart_phase_s[SIM_R_SPARE] / (double)r.failures - 10.1) < 0.2, "spare %.2f s a loss, want 10.1",
	      r.restart_phase_s[SIM_R_SPARE] / (double)r.failures);
	CHECK(r.restore_s <= 0.5 * (double)r.failures + 1e-6 && r.restore_s >= 0.5 * (double)r.failures * 0.98,
	      "restore %.2f s for %llu staged losses, want 0.5 s each", r.restore_s, (unsigned long long)r.failures);
	/* No spares: 600 s for a new node, restored from the partner (1 s). */
	rs.spares = 0;
	run_phased(&s, &node, &rs, wall, 8, &r);
	CHECK(r.staged == 0 && r.no_spare == r.failures, "no spares: staged %llu", (unsigned long long)r.staged);
	CHECK(r.restart_phase_s[SIM_R_SPARE] >= 600 * (double)r.failures * 0.95, "no spare: %.0f s waiting",
	      r.restart_phase_s[SIM_R_SPARE]);
	CHECK(r.restore_s >= 1.0 * (double)r.failures * 0.98, "no spare: restore %.1f s", r.restore_s);
	/* One spare that never comes back serves the first loss alone. */
	rs.spares = 1;
	rs.spare_return_s = 1e9;
	run_phased(&s, &node, &rs, wall, 8, &r);
	CHECK(r.staged == 1 && r.no_spare == r.failures - 1, "one spare: staged %llu, without %llu of %llu",
	      (unsigned long long)r.staged, (unsigned long long)r.no_spare, (unsigned long long)r.failures);
	/* A flat restart through sim_run_phased is sim_run's. */
	sim_restart flat;
	sim_restart_flat(&flat, 120);
	sim_result a, b;
	run_phased(&s, &node, &flat, wall, 9, &a);
	run(&s, &node, wall, 120, 9, &b);
	CHECK(a.useful_s == b.useful_s && a.restart_s == b.restart_s && a.restart_phase_s[SIM_R_SCHED] == a.restart_s,
	      "flat restart differs from sim_run's");
	rs.warmup_s = -1;
	CHECK(sim_run_phased(&s, &node, &rs, wall, 9, &a) < 0, "a negative phase accepted");
}

int main(void)
{
	test_no_failures();
	test_loss_per_failure();
	test_durable_window();
	test_daly_is_best();
	test_poisson();
	test_preemption();
	test_restore_sources();
	test_refused();
	test_phases();
	printf("test_sim: %d checks passed\n", checks);
	return T_EXIT_PASS;
}
