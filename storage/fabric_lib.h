/* libfabric, loaded with dlopen when the first fabric opens rather than
 * linked. Linking it costs every process ~0.2 s before main() whether it
 * uses the peer tier or not: Debian's libfabric.so.1 pulls in
 * libpsm_infinipath and libpsm2, whose constructors take ~0.1 s each. That
 * was most of `ckpt ls --daemon` (docs/benchmarks-history.md), and every rank's and
 * every daemon's start.
 *
 * Loading it this way would let libinfinipath's constructor replace the
 * process's SIGTERM, SIGINT, SIGSEGV and SIGBUS handlers with ones that exit
 * with status 1 (a rank's preemption handler included): the load puts back
 * every signal disposition it changed (fabric_lib.c).
 *
 * Only the library's exported entry points go through this table; the rest
 * of the API (fi_domain, fi_mr_reg, fi_write, ...) are inline calls through
 * the objects these return. Internal to storage/. */
#ifndef CKPT_STORAGE_FABRIC_LIB_H
#define CKPT_STORAGE_FABRIC_LIB_H

#include <rdma/fabric.h>

#include <stddef.h>
#include <stdint.h>

typedef struct ckpt_fab_lib {
	int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
	               const struct fi_info *hints, struct fi_info **info);
	void (*freeinfo)(struct fi_info *info);
	struct fi_info *(*dupinfo)(const struct fi_info *info);
	int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
	const char *(*strerror)(int errnum);
} ckpt_fab_lib;

/* Loads libfabric once per process (thread-safe). Returns the table, or
 * NULL with why in err (cap bytes) when it cannot be loaded; the answer
 * does not change for the life of the process. */
const ckpt_fab_lib *ckpt__fab_lib(char *err, size_t cap);

#endif
