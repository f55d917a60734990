/* The staging pool: one allocation made when the context opens, pre-faulted,
 * locked where the memlock limit allows, cut into chunk-sized slots and
 * recycled. It never grows. */
#ifndef CKPT_POOL_H
#define CKPT_POOL_H

#include <stddef.h>
#include <stdint.h>
#include "base/common.h"

typedef struct ckpt_pool {
	uint8_t *base;
	size_t map_bytes;
	size_t slot_bytes;
	uint32_t nslots;
	int *free_stack;
	uint32_t nfree;
	int huge;    /* backed by huge pages */
	int locked;  /* mlock succeeded */
} ckpt_pool;

/* bytes is rounded down to whole slots (at least one). */
int ckpt__pool_init(ckpt_pool *p, size_t bytes, size_t slot_bytes, const ckpt_logger *lg);
void ckpt__pool_fini(ckpt_pool *p);
/* Not thread-safe: the caller holds its own lock. -1 when empty. */
int ckpt__pool_get(ckpt_pool *p);
void ckpt__pool_put(ckpt_pool *p, int slot);
static inline uint8_t *ckpt__pool_slot(const ckpt_pool *p, int slot)
{
	return p->base + (size_t)slot * p->slot_bytes;
}

#endif
