/* ckpt-sim's model: a discrete-event simulation of one training job that
 * checkpoints at a fixed interval, fails at random and rolls back.
 * docs/goodput.md explains the model; this header is what the simulator and
 * its tests share. No global state: everything a run needs is passed in. */
#ifndef CKPT_SIM_H
#define CKPT_SIM_H

#include <stdint.h>

/* Where a copy of a checkpoint lives; each survives a different set of
 * failure classes (sim_tier_survives). */
enum sim_tier {
	SIM_TIER_LOCAL,  /* node DRAM (or local disk): survives a process crash */
	SIM_TIER_PEER,   /* a partner node's DRAM: survives the loss of the node */
	SIM_TIER_SHARED, /* remote storage: survives everything simulated */
	SIM_TIER_COUNT
};

/* What a failure destroys. */
enum sim_class {
	SIM_FAIL_CRASH,   /* the processes die; the node, its DRAM and disk stay */
	SIM_FAIL_NODE,    /* a node is lost (and replaced); its partner is not */
	SIM_FAIL_NODE2,   /* a node and its partner are both lost */
	SIM_FAIL_PREEMPT, /* a node is taken away after a notice */
	SIM_FAIL_COUNT
};

typedef struct sim_tier_cost {
	int present;
	/* Pipelined tiers: seconds from the start of a save until the version
	 * is durable here (the stall included). */
	double durable_s;
	/* Background tiers (flush_s > 0): one version at a time is copied
	 * there from node DRAM, taking flush_s, always the newest one. */
	double flush_s;
	/* Seconds for the whole job to read its state back when this tier is
	 * the source. */
	double read_s;
} sim_tier_cost;

typedef struct sim_strategy {
	char name[64];
	double stall_s;    /* training blocked per save */
	double interval_s; /* compute time between the end of a save and the next */
	sim_tier_cost tier[SIM_TIER_COUNT];
	/* Nodes a peer copy outlives at once: 0 or 1 partner copies (a node and
	 * its partner lost together lose it), M for rs:K+M groups (M >= 2
	 * outlive SIM_FAIL_NODE2). */
	unsigned peer_tolerance;
} sim_strategy;

typedef struct sim_failures {
	double rate_per_s;        /* job-wide Poisson rate; 0: no failures */
	double node_loss_frac;    /* of unexpected failures, those that lose a node */
	double partner_loss_frac; /* of node losses, those that lose the partner too */
	double preempt_frac;      /* of all failures, preemptions with notice */
	double preempt_notice_s;
} sim_failures;

/* A restart after a failure, phase by phase (docs/goodput.md, "Restart,
 * phase by phase"). ckpt's own phases: the failure decided (detect), a
 * spare chosen (spare) that pulls the lost node's state from partner DRAM
 * into its own while the job relaunches (stage), and the restore (the
 * tier's read_s, from node DRAM on the spare when staged). Outside ckpt:
 * the launcher relaunching (sched), the processes starting (start), the
 * communicators set up (comm), the first steps slower than steady
 * (warmup, counted as lost). */
enum sim_rphase { SIM_R_DETECT, SIM_R_SPARE, SIM_R_SCHED, SIM_R_START, SIM_R_COMM, SIM_R_WARMUP, SIM_R_COUNT };

typedef struct sim_restart {
	double detect_s;       /* a death, or a node loss, decided */
	double hang_detect_s;  /* a hung rank decided */
	double hang_frac;      /* of failures that spare the node, those that hang (detected as hangs) */
	double spare_s;        /* a spare chosen and told */
	double stage_s;        /* the lost node's state onto the spare (overlaps sched + start); 0: not staged */
	double sched_s, start_s, comm_s, warmup_s;
	unsigned spares;       /* spare nodes; a node loss takes one. 0 (or all taken): the job waits no_spare_s */
	double spare_return_s; /* a spare taken is available again after this (repair, or a new one) */
	double no_spare_s;     /* a lost node without a spare: until a replacement node is there */
} sim_restart;
#define SIM_MAX_SPARES 65536

/* Every phase 0 but sched_s = restart_s, no spares: the one constant
 * restart of sim_run. */
void sim_restart_flat(sim_restart *r, double restart_s);

typedef struct sim_result {
	/* Wall time, split: useful_s + the four losses = the simulated time. */
	double useful_s;
	double stall_s;     /* blocked in saves (emergency saves included) */
	double recompute_s; /* work done, then lost by a rollback */
	double restore_s;   /* reading state back */
	double restart_s;   /* relaunch and rescheduling */
	uint64_t failures;
	uint64_t by_class[SIM_FAIL_COUNT];
	uint64_t emergency_saves; /* preemptions saved within their notice */
	uint64_t saves;           /* saves completed (emergency ones included) */
	/* restart_s, split by phase (sim_run_phased; all in sched for sim_run). */
	double restart_phase_s[SIM_R_COUNT];
	uint64_t hangs;           /* failures detected as hangs */
	uint64_t staged;          /* node losses whose state a spare held before the restore */
	uint64_t no_spare;        /* node losses that found no spare */
} sim_result;

/* 1 when a copy at tier t outlives a failure of class c (partner copies
 * for the peer tier). */
int sim_tier_survives(enum sim_tier t, enum sim_class c);
/* The same for strategy s: its peer tier's tolerance counted. */
int sim_strategy_survives(const sim_strategy *s, enum sim_tier t, enum sim_class c);

/* Runs one job of wall_s seconds; a failure costs restart_s before the
 * restore. The failure arrivals and classes depend only on seed and f, not
 * on the strategy, so strategies run with one seed meet the same failures.
 * Returns 0, or -1 when s or f is unusable (no tier, interval <= 0, a
 * negative cost). */
int sim_run(const sim_strategy *s, const sim_failures *f, double wall_s, double restart_s, uint64_t seed,
            sim_result *out);

/* As sim_run, with the restart of rs (phases, spares) instead of a
 * constant. Returns 0, or -1 for an unusable s, f or rs. */
int sim_run_phased(const sim_strategy *s, const sim_failures *f, const sim_restart *rs, double wall_s, uint64_t seed,
                   sim_result *out);

/* Daly's (2006) estimate of the compute time between checkpoints that
 * minimises the expected loss, for a checkpoint costing ckpt_s and a job
 * MTBF of mtbf_s: Young's sqrt(2 C M) with Daly's correction terms. Returns
 * mtbf_s when ckpt_s >= 2 mtbf_s, and 0 when ckpt_s <= 0 or the MTBF is
 * not finite and positive (no optimum: checkpoint as often, or as seldom,
 * as wanted). */
double sim_daly_interval(double ckpt_s, double mtbf_s);

/* The seed of one (user seed, GPU count, run) cell: strategies compared in
 * one cell share it. */
uint64_t sim_cell_seed(uint64_t seed, uint64_t gpus, uint64_t run);

#endif
