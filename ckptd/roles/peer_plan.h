/* Room for a new partner copy in the peer pool (agent_peer.c): which run
 * of adjacent slots to evict so that one contiguous range is wide enough.
 * Kept apart from the pool so that it can be tested on any pool state. */
#ifndef CKPTD_PEER_PLAN_H
#define CKPTD_PEER_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* What evicting a slot costs, or that it may not be evicted. */
enum {
	CKPTD_PX_BUSY = 0, /* being written, checked or read, or the version being leased: never */
	CKPTD_PX_KEEP,     /* part of its job's restore point: never */
	CKPTD_PX_OWN,      /* the leasing job's own older copy */
	CKPTD_PX_IDLE,     /* a copy of a job silent past --peer-protect-idle */
	CKPTD_PX_OTHER,    /* another live job's: only what it holds over its share */
	CKPTD_PX_STALE,    /* a lease past its deadline */
};

typedef struct ckptd_pext {
	uint64_t off, len; /* sorted by off, not overlapping */
	int cls;           /* CKPTD_PX_* */
	uint32_t job;      /* CKPTD_PX_OTHER: index into allow[] */
} ckptd_pext;

#define CKPTD_PLAN_ANY_SHARE 1u /* OTHER slots whatever their job's share */
#define CKPTD_PLAN_ANY_KEEP 2u  /* KEEP slots too: only to name why there is no room */

/* The cheapest run x[*first .. *first + *count) whose eviction (with the
 * free gaps around it) frees len contiguous bytes of a pool of size bytes
 * starting at *off; *count 0 when a gap is wide enough already. A run
 * holds no BUSY or KEEP slot (KEEP allowed with CKPTD_PLAN_ANY_KEEP) and,
 * of each other job j, at most allow[j] bytes (njobs entries; unlimited
 * with CKPTD_PLAN_ANY_SHARE). Cost: the bytes evicted, weighted by class
 * (own 1, idle 2, other 4, stale lease 8), the lowest offset on a tie.
 * Linear in n. Returns 0, -ENOSPC when no run fits, -ENOMEM. */
int ckptd__peer_plan(const ckptd_pext *x, size_t n, uint64_t size, uint64_t len, const uint64_t *allow,
                     size_t njobs, unsigned relax, size_t *first, size_t *count, uint64_t *off);

#endif
