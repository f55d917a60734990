/* The instances of one rs:K+M group's version (ecplan.c): which shards
 * the members' images are, in the layout of libckpt/format/ecgroup.h.
 * Internal to the coordinator; pure, no I/O. */
#ifndef CKPTD_COORD_ECPLAN_H
#define CKPTD_COORD_ECPLAN_H

#include "format/ecgroup.h"

#include <stddef.h>
#include <stdint.h>

#define CKPTD_EC_EMPTY UINT32_MAX /* an instance's member with no shard */

/* A shard of the version whose DRAM copy is on a node of the group. */
typedef struct ckptd_ec_shard {
	uint32_t rank;
	uint32_t member; /* the group's node holding its DRAM copy, < K + M */
	uint64_t bytes;  /* its image */
} ckptd_ec_shard;

typedef struct ckptd_ec_instance {
	uint32_t rank[CKPT_EC_MAX_PIECES]; /* member i's shard, CKPTD_EC_EMPTY for none */
	ckpt_ecg g;                         /* the layout over their images */
} ckptd_ec_instance;

/* Instance j has, as member i, the shard of the j-th lowest rank among
 * those on node i, or an empty image where node i has fewer: as many
 * instances as the most shards one node holds, each member's image one
 * shard (a rebuild checks it as one). [out] *out (free()), *n. Returns 0;
 * -EINVAL with why (K, M out of range, a member index >= K + M, a rank
 * listed twice, an instance of empty images only); -ENOMEM. */
int ckptd_coord_ec_plan(unsigned k, unsigned m, const ckptd_ec_shard *sh, size_t nsh, ckptd_ec_instance **out,
                        size_t *n, char *why, size_t cap);

#endif
