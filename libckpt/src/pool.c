#include "pool.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

int ckpt__pool_init(ckpt_pool *p, size_t bytes, size_t slot_bytes, const ckpt_logger *lg)
{
	memset(p, 0, sizeof(*p));
	size_t n = bytes / slot_bytes;
	if (n == 0)
		n = 1;
	if (n > (1u << 24))
		return -CKPT_ECONFIG;
	p->slot_bytes = slot_bytes;
	p->nslots = (uint32_t)n;
	p->map_bytes = n * slot_bytes;
	/* Explicit huge pages first (they are pre-reserved, so the fault-in is
	 * cheap and TLB misses fall away); otherwise normal pages with THP advice. */
	size_t huge_len = CKPT_ALIGN_UP(p->map_bytes, 2u << 20);
	void *m = mmap(NULL, huge_len, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
	if (m != MAP_FAILED) {
		p->huge = 1;
		p->map_bytes = huge_len;
	} else {
		m = mmap(NULL, p->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return -errno;
		madvise(m, p->map_bytes, MADV_HUGEPAGE);
		/* Touch every page now: first-touch of fresh memory is far slower
		 * than a memcpy, and must not land in a save's stall. */
		if (madvise(m, p->map_bytes, MADV_POPULATE_WRITE) < 0)
			for (size_t off = 0; off < p->map_bytes; off += 4096)
				((volatile uint8_t *)m)[off] = 0;
	}
	p->base = m;
	p->locked = mlock(m, p->map_bytes) == 0;
	if (!p->locked) {
		/* A privileged process may lift its own soft limit to the hard one. */
		struct rlimit rl;
		if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			if (setrlimit(RLIMIT_MEMLOCK, &rl) == 0)
				p->locked = mlock(m, p->map_bytes) == 0;
		}
	}
	if (!p->locked)
		LOG_I(lg, CKPT_NO_VERSION,
		      "staging pool (%zu MiB) not locked: memlock limit too low; pages stay resident unless swapped",
		      p->map_bytes >> 20);
	p->free_stack = malloc(n * sizeof(int));
	if (!p->free_stack) {
		munmap(m, p->map_bytes);
		p->base = NULL;
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		p->free_stack[i] = (int)(n - 1 - i);
	p->nfree = (uint32_t)n;
	LOG_I(lg, CKPT_NO_VERSION, "staging pool: %u slots of %zu KiB%s%s", p->nslots, slot_bytes >> 10,
	      p->huge ? ", huge pages" : "", p->locked ? ", locked" : "");
	return 0;
}

void ckpt__pool_fini(ckpt_pool *p)
{
	if (p->base)
		munmap(p->base, p->map_bytes);
	free(p->free_stack);
	memset(p, 0, sizeof(*p));
}

int ckpt__pool_get(ckpt_pool *p)
{
	return p->nfree ? p->free_stack[--p->nfree] : -1;
}

void ckpt__pool_put(ckpt_pool *p, int slot)
{
	p->free_stack[p->nfree++] = slot;
}
