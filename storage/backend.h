/* The local-disk backend interface: a versioned vtable, registered by name,
 * like a libfabric provider (io_uring, psync). The persist pipeline and
 * restore reach the disk only through this. The other tiers are not behind
 * it: node DRAM is the agent's shared-memory segments (ckptd/mem), partner
 * DRAM is libfabric RMA (fabric.h), SHARED is the agent's flush to a shared
 * directory (ckptd/roles/agent_shared.c).
 *
 * Threading: submit() may be called from any thread; poll() from one thread
 * at a time. A backend completes an I/O only when all of it is done or it
 * failed (short transfers are continued inside the backend). */
#ifndef CKPT_STORAGE_BACKEND_H
#define CKPT_STORAGE_BACKEND_H

#include <stdint.h>

#define CKPT_BACKEND_OPS_VERSION 1u

enum ckpt_io_op { CKPT_IO_READ = 1, CKPT_IO_WRITE, CKPT_IO_FDATASYNC, CKPT_IO_NOP };

typedef struct ckpt_io {
	int op;
	int fd;
	void *buf;
	uint32_t len;
	uint64_t off;
	int result;     /* on completion: 0 or -errno */
	uint32_t done;  /* bytes moved so far (backend-private progress) */
	void *user;     /* caller's */
} ckpt_io;

typedef struct ckpt_backend_params {
	uint32_t size;      /* sizeof(ckpt_backend_params) */
	uint32_t depth;     /* most I/Os in flight at once */
} ckpt_backend_params;

typedef struct ckpt_backend ckpt_backend;

typedef struct ckpt_backend_ops {
	uint32_t version;   /* CKPT_BACKEND_OPS_VERSION */
	const char *name;
	/* Returns 0 or -errno (e.g. -ENOSYS/-EPERM where the kernel refuses). */
	int (*open)(const ckpt_backend_params *p, ckpt_backend **out);
	/* Queues io; never blocks on the device. Returns 0 or -errno. The caller
	 * keeps at most depth I/Os outstanding. */
	int (*submit)(ckpt_backend *b, ckpt_io *io);
	/* Waits up to timeout_ms (-1 forever) for at least one completion and
	 * returns up to max of them in done[]; returns the count, 0 on timeout,
	 * or -errno. */
	int (*poll)(ckpt_backend *b, ckpt_io **done, int max, int timeout_ms);
	void (*close)(ckpt_backend *b);
} ckpt_backend_ops;

/* Every backend struct starts with this. */
struct ckpt_backend {
	const ckpt_backend_ops *ops;
};

extern const ckpt_backend_ops ckpt_backend_uring;
extern const ckpt_backend_ops ckpt_backend_psync;

/* The backend named name, or NULL. */
const ckpt_backend_ops *ckpt_backend_find(const char *name);

/* Opens name, or with name NULL/"auto" the first that works in the order
 * uring, psync (a refusal of io_uring by the kernel or a seccomp filter
 * falls back to psync; the caller logs *fell_back). */
int ckpt_backend_open(const char *name, const ckpt_backend_params *p, ckpt_backend **out,
                      int *fell_back, int *uring_err);

#endif
