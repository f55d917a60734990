/* ckpt-sim's model of the peer tier's schemes (docs/goodput.md, "Peer
 * schemes"): partner copies against Reed–Solomon groups rs:K+M — DRAM and
 * wire bytes per node, and the probability that a version is lost from
 * peer DRAM under the simulator's failure model.
 *
 * Failure model: nodes are lost independently (rate `node_rate` per node:
 * the GPU MTBF times GPUs per node times the share of failures that lose a
 * node); a loss takes a second node with it with probability `pair_frac`,
 * and that second node is always the one that hurts (the partner, or a
 * member of the same group: pessimistic, as the goodput model is); a
 * whole failure domain (a rack, a switch, a power feed: `domain_nodes`
 * nodes) fails at `domain_rate` per domain. Groups and partners never
 * share a domain. A lost node's copies are protected again `reprotect_s`
 * after the loss (its replacement registered, the group re-encoded or the
 * partner copy made). A version is at risk for `window_s` (the checkpoint
 * interval: then a newer version replaces it). It is lost when some
 * partner pair, or some group, has more than M members down at once. */
#ifndef CKPT_SIM_EC_H
#define CKPT_SIM_EC_H

#include <stdint.h>

typedef struct sim_scheme {
	unsigned k, m; /* 0, 0: partner copies (one replica) */
} sim_scheme;

typedef struct sim_ec_model {
	uint64_t nodes;
	uint64_t domain_nodes; /* nodes per failure domain */
	double node_rate;      /* per node per second */
	double pair_frac;
	double domain_rate;    /* per domain per second */
	double reprotect_s;
	double window_s;
} sim_ec_model;

/* DRAM per node for its own shard and the scheme's redundancy, in shards:
 * 2 for partner copies, 1 + M/K for rs:K+M. */
double sim_scheme_memory(const sim_scheme *s);
/* Bytes each node sends per version, in shards: 1 for partner, M for rs. */
double sim_scheme_wire(const sim_scheme *s);
/* Bytes read over the fabric to rebuild one lost node, in shards: 1 for
 * partner (its copy), K for rs (K pieces of each of its K slices). */
double sim_scheme_rebuild(const sim_scheme *s);

/* The probability that a version is lost, by the rare-event estimate
 * (the rate of a pair or group first exceeding its tolerance, times the
 * window; good while the result is small). -1 when the model is unusable
 * (a group wider than the cluster, non-positive sizes). */
double sim_scheme_loss(const sim_scheme *s, const sim_ec_model *mo);

/* The same by Monte Carlo: trials windows simulated event by event.
 * [out] lost: windows in which the version was lost. Returns the
 * fraction, or -1 as above. */
double sim_scheme_loss_mc(const sim_scheme *s, const sim_ec_model *mo, uint64_t trials, uint64_t seed,
                          uint64_t *lost);

#endif
