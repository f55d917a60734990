/* ckpt-sim's peer schemes (tools/sim/sim_ec.c): the DRAM and wire bytes
 * per node of partner copies and rs:K+M, and the loss probability per
 * version: the rare-event estimate against a Monte Carlo run of the same
 * failure model at rates high enough for losses to be counted, for
 * partner, rs:4+1, rs:4+2 and rs:8+2; more parity never loses more;
 * whole-domain losses alone never lose a version unless two overlap. */
#include "sim.h"
#include "sim_ec.h"

#include "helpers.h"

#include <math.h>
#include <stdio.h>


static void close_to(const sim_scheme *s, const sim_ec_model *mo, uint64_t trials, double tol)
{
	uint64_t lost;
	double a = sim_scheme_loss(s, mo), q = sim_scheme_loss_mc(s, mo, trials, 7, &lost);
	printf("rs:%u+%u: estimate %.4g, Monte Carlo %.4g (%llu of %llu)\n", s->k, s->m, a, q,
	       (unsigned long long)lost, (unsigned long long)trials);
	T_ASSERT(a > 0 && q > 0 && lost >= 100);
	T_ASSERT(fabs(a - q) <= tol * q);
}

int main(void)
{
	sim_scheme partner = { 0, 0 }, r41 = { 4, 1 }, r42 = { 4, 2 }, r82 = { 8, 2 }, r63 = { 6, 3 };
	T_ASSERT(sim_scheme_memory(&partner) == 2.0 && sim_scheme_memory(&r82) == 1.25 && sim_scheme_memory(&r63) == 1.5);
	T_ASSERT(sim_scheme_wire(&partner) == 1.0 && sim_scheme_wire(&r82) == 2.0 && sim_scheme_wire(&r63) == 3.0);
	T_ASSERT(sim_scheme_rebuild(&partner) == 1.0 && sim_scheme_rebuild(&r82) == 8.0);
	/* Failures far more often than in life, so that losses are counted. */
	sim_ec_model mo = { .nodes = 200, .domain_nodes = 10, .node_rate = 2e-5, .pair_frac = 0.02,
		            .domain_rate = 2e-6, .reprotect_s = 300, .window_s = 600 };
	close_to(&partner, &mo, 50000, 0.25);
	close_to(&r41, &mo, 50000, 0.25);
	mo.node_rate = 7e-5;
	close_to(&r42, &mo, 50000, 0.3);
	mo.domain_nodes = 20; /* 10 domains: rs:8+2's groups fit */
	mo.node_rate = 4e-5;
	close_to(&r82, &mo, 50000, 0.3);
	/* More parity never loses more. */
	mo = (sim_ec_model){ .nodes = 1250, .domain_nodes = 16, .node_rate = 3.4e-8, .pair_frac = 0.01,
		             .domain_rate = 3.2e-9, .reprotect_s = 300, .window_s = 600 };
	double pp = sim_scheme_loss(&partner, &mo), p41 = sim_scheme_loss(&r41, &mo), p42 = sim_scheme_loss(&r42, &mo),
	       p82 = sim_scheme_loss(&r82, &mo), p63 = sim_scheme_loss(&r63, &mo);
	printf("10,000 GPUs: partner %.3g, rs:4+1 %.3g, rs:4+2 %.3g, rs:8+2 %.3g, rs:6+3 %.3g\n", pp, p41, p42, p82, p63);
	T_ASSERT(p42 < p41 && p63 < p42 && p82 < pp / 1000);
	/* Whole domains only, never two down at once (re-protected at once):
	 * groups and pairs span domains, nothing is lost. */
	mo.node_rate = 0;
	mo.pair_frac = 0;
	mo.domain_rate = 1e-3;
	mo.reprotect_s = 0;
	uint64_t lost = 1;
	T_ASSERT(sim_scheme_loss_mc(&r82, &mo, 20000, 3, &lost) == 0 && lost == 0);
	T_ASSERT(sim_scheme_loss_mc(&partner, &mo, 20000, 3, &lost) == 0 && lost == 0);
	/* ...but overlapping domain losses do lose a partner pair. */
	mo.reprotect_s = 600;
	T_ASSERT(sim_scheme_loss_mc(&partner, &mo, 2000, 3, &lost) > 0);
	/* A group wider than the domains allows: unusable. */
	mo.domain_nodes = 200;
	T_ASSERT(sim_scheme_loss(&r82, &mo) < 0);
	/* The goodput model: a node lost with its partner (or a second member
	 * of its group) is restored from peer DRAM with rs:K+M, M >= 2, and
	 * from shared storage with partner copies. */
	sim_strategy st = { .stall_s = 1, .interval_s = 600 };
	st.tier[SIM_TIER_LOCAL] = (sim_tier_cost){ .present = 1, .durable_s = 1, .read_s = 1 };
	st.tier[SIM_TIER_PEER] = (sim_tier_cost){ .present = 1, .durable_s = 3, .read_s = 8 };
	st.tier[SIM_TIER_SHARED] = (sim_tier_cost){ .present = 1, .flush_s = 60, .read_s = 300 };
	sim_failures fl = { .rate_per_s = 1.0 / 7200, .node_loss_frac = 1, .partner_loss_frac = 1 };
	sim_result part, rs;
	st.peer_tolerance = 1;
	T_ASSERT(sim_run(&st, &fl, 200 * 3600.0, 60, 5, &part) == 0);
	st.peer_tolerance = 2;
	T_ASSERT(sim_run(&st, &fl, 200 * 3600.0, 60, 5, &rs) == 0);
	T_ASSERT(part.failures == rs.failures && rs.failures > 50 && rs.by_class[SIM_FAIL_NODE2] == rs.failures);
	printf("both nodes lost, %llu times: restore %.0f s with partner copies, %.0f s with rs\n",
	       (unsigned long long)rs.failures, part.restore_s, rs.restore_s);
	/* (a failure during a restore, or at the run's end, cuts one short) */
	T_ASSERT(rs.restore_s <= 8.0 * (double)rs.failures + 1e-6 && rs.restore_s >= 0.85 * 8.0 * (double)rs.failures);
	T_ASSERT(part.restore_s <= 300.0 * (double)part.failures + 1e-6 &&
	         part.restore_s >= 0.85 * 300.0 * (double)part.failures);
	T_ASSERT(!sim_strategy_survives(&(sim_strategy){ .peer_tolerance = 1 }, SIM_TIER_PEER, SIM_FAIL_NODE2));
	T_ASSERT(sim_strategy_survives(&(sim_strategy){ .peer_tolerance = 2 }, SIM_TIER_PEER, SIM_FAIL_NODE2));
	T_ASSERT(sim_strategy_survives(&(sim_strategy){ .peer_tolerance = 0 }, SIM_TIER_PEER, SIM_FAIL_NODE));
	printf("ok\n");
	return 0;
}
