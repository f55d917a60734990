/*
 * ckpt.h — the public interface of libckpt.
 *
 * libckpt takes checkpoints of a training rank's state: it snapshots registered
 * memory regions into a pre-allocated staging pool (the only blocking part of a
 * save), persists them in the background (checksum, optional byte-shuffle +
 * zstd, io_uring writes to local disk), commits the version in an index once
 * every rank of the job is durable, and restores the newest intact version.
 *
 * With no daemon configured it works on its own ("embedded default"): one
 * checkpoint root on the local disk, an LMDB index inside it, several rank
 * processes of one node saving into it at once.
 *
 * Caveats
 *  - Threads: a ckpt_ctx is used by one thread at a time (the training loop).
 *    The library runs its own background threads; handles may be waited on from
 *    any thread. ckpt_strerror(), ckpt_version() and ckpt_config_init() are
 *    thread-safe.
 *  - fork: a child must not use a context its parent opened (the background
 *    threads and the LMDB environment do not survive fork). Open a new one.
 *  - Signals: no function here is async-signal-safe. Background threads block
 *    no signals of their own; install handlers in the main thread as usual.
 *    ckpt_preempt_install() calls the handler it finds in place after its own,
 *    except one that a shared library installed from its constructor when it
 *    was loaded with libckpt, before the program ran: Debian's libinfinipath
 *    (PSM, pulled in by libfabric) installs SIGTERM and SIGINT handlers that
 *    exit the process with status 1, which would end every rank on the
 *    signal launchers send (Kubernetes, systemd, Slurm, torchrun) before it
 *    could save. The log names each handler left out. Handlers the program
 *    installs itself, or that libraries loaded before libckpt installed, are
 *    chained as before; the handlers left out come back when the last
 *    context armed with the signal closes. When libckpt loads libfabric
 *    itself (on the first use of the PEER_MEM tier), every signal
 *    disposition that load changed is put back at once, whether or not a
 *    context is armed.
 *    The handler is installed with SA_RESTART, but a signal that used to end
 *    the process now returns: calls the kernel never restarts (poll, epoll,
 *    nanosleep, and libraries built on them, such as ZeroMQ's send and
 *    receive) fail with EINTR in whichever thread it lands. Code blocked in
 *    such a call when the notice comes must retry on EINTR, as the reference
 *    trainer's collectives do (trainer/comm.c), and reach ckpt_step.
 *  - Memory: the staging pool is allocated, pre-faulted and (where the memlock
 *    limit allows) locked when the context opens, and reused for every save.
 *    Its size bounds the memory libckpt uses for snapshots. With the default
 *    staging_bytes (auto) it is replaced once, inside the first save that
 *    needs more, by one sized from the registered state (staging_max_bytes
 *    bounds it); it never grows after that.
 *    With the LOCAL_MEM tier (a ckptd agent on a Unix socket) a save
 *    snapshots host regions straight into a segment of the agent's shared
 *    memory instead, so the copy outlives the process; the staging pool then
 *    only carries CUDA chunks. The context keeps one mapping of the agent's
 *    pool for as long as it is open.
 *  - Regions: a registered region's memory must stay valid until the context
 *    is closed or the region removed (ckpt_region_remove). A save copies it
 *    before ckpt_save() returns; after that the caller may change it freely.
 *    A file region (ckpt_region_add_file) is read from its file instead,
 *    chunk by chunk through the staging pool, whatever its size.
 *  - CUDA: regions may be device memory (CKPT_DEVICE_CUDA) in a build with
 *    CUDA. libckpt uses the device that is current when the first CUDA
 *    region is added, creates its own non-blocking stream there and pins
 *    the staging pool with cudaHostRegister. Call it from a thread with that
 *    device current.
 *  - Errors: every function returning int returns 0 on success or a negative
 *    error code: -errno for system errors, or -CKPT_E* for the library's own
 *    (all above CKPT_ERRNO_OFFSET). ckpt_strerror() names both. Nothing here
 *    calls exit() or abort() on a runtime error, and nothing reads global errno.
 */
#ifndef CKPT_H
#define CKPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CKPT_BUILDING_LIBRARY) && defined(__GNUC__)
#define CKPT_API __attribute__((visibility("default")))
#else
#define CKPT_API
#endif

/* Library version. The on-disk format and the index schema have their own
 * version numbers (CKPT_FORMAT_VERSION, CKPT_INDEX_SCHEMA). */
#define CKPT_VERSION_MAJOR 0
#define CKPT_VERSION_MINOR 1
#define CKPT_VERSION_PATCH 0
#define CKPT_VERSION_NUMBER \
	(CKPT_VERSION_MAJOR * 10000 + CKPT_VERSION_MINOR * 100 + CKPT_VERSION_PATCH)

#define CKPT_FORMAT_VERSION 1 /* shard file format, docs/format.md */
#define CKPT_INDEX_SCHEMA 1   /* LMDB index schema, docs/format.md */

/* ---------------------------------------------------------------- errors */

/* Error codes of the library's own, returned negated. errno values stay
 * below CKPT_ERRNO_OFFSET. */
#define CKPT_ERRNO_OFFSET 4096
enum {
	CKPT_ECORRUPT = CKPT_ERRNO_OFFSET + 1, /* checksum or structure check failed */
	CKPT_EFORMAT,   /* a format or schema version this build cannot read */
	CKPT_ENOVERSION, /* no such version, or none restorable */
	CKPT_ESKIPPED,  /* save skipped: staging pool busy (CKPT_POOL_SKIP) */
	CKPT_EMISMATCH, /* checkpoint does not match the registered regions */
	CKPT_ECONFIG,   /* invalid configuration value */
	CKPT_EINDEX,    /* the LMDB index failed (details in the log) */
	CKPT_ENAME,     /* invalid job id or region name */
	CKPT_ETOOBIG,   /* save larger than the staging pool under CKPT_POOL_SKIP */
	CKPT_ESTATE,    /* call not valid in the current state */
	CKPT_EFAULT_INJECTED, /* a fault point armed by a test fired */
	CKPT_EDEVICE,   /* a CUDA call failed (details in the log) */
	CKPT_ECONTRACT, /* lazy save: state changed before ckpt_fence, or the
	                   copy was corrupted on its way from the device */
	CKPT_EUNAVAIL,  /* the tier is not available to this context: no ckptd
	                   agent could be reached when it opened, or the agent's
	                   address is TCP, where no DRAM segment can be handed over */
	CKPT_EUNREACHABLE, /* restore: a committed version exists (the coordinator
	                   or the index says so) but no copy of this rank's shard
	                   could be reached; the log names where the copies were.
	                   Never start from scratch on this error. */
	CKPT_ECHANGED,  /* a file region's file changed while a save read it (its
	                   size or modification time), or is shorter than the
	                   region: the save fails, nothing of it is committed */
	CKPT_ELAST
};

/* Returns a static, human-readable string for err (negative or positive,
 * errno or CKPT_E*). Never NULL. Thread-safe. */
CKPT_API const char *ckpt_strerror(int err);

/* Returns the library version as "MAJOR.MINOR.PATCH" (static string). */
CKPT_API const char *ckpt_version(void);
/* Returns CKPT_VERSION_NUMBER of the library actually linked. */
CKPT_API unsigned ckpt_version_number(void);

/* ---------------------------------------------------------------- enums */

/* Storage tiers, ordered by speed. Used as bit masks in ckpt_config.tiers. */
typedef enum ckpt_tier {
	CKPT_TIER_LOCAL_MEM = 1u << 0,  /* node DRAM owned by the ckptd agent */
	CKPT_TIER_PEER_MEM = 1u << 1,   /* partner nodes' DRAM over libfabric */
	CKPT_TIER_LOCAL_DISK = 1u << 2, /* local NVMe, io_uring */
	CKPT_TIER_SHARED = 1u << 3,     /* shared filesystem */
} ckpt_tier;

/* Element types of a region. CKPT_DTYPE_BYTES for opaque blobs. */
typedef enum ckpt_dtype {
	CKPT_DTYPE_BYTES = 0,
	CKPT_DTYPE_U8, CKPT_DTYPE_I8, CKPT_DTYPE_I16, CKPT_DTYPE_U16,
	CKPT_DTYPE_I32, CKPT_DTYPE_U32, CKPT_DTYPE_I64, CKPT_DTYPE_U64,
	CKPT_DTYPE_F16, CKPT_DTYPE_BF16, CKPT_DTYPE_F32, CKPT_DTYPE_F64,
	CKPT_DTYPE_F8E4M3, CKPT_DTYPE_F8E5M2, CKPT_DTYPE_BOOL,
	CKPT_DTYPE_COUNT
} ckpt_dtype;

/* Size in bytes of one element of dtype (1 for CKPT_DTYPE_BYTES), 0 if dtype
 * is not a valid value. */
CKPT_API size_t ckpt_dtype_size(ckpt_dtype dtype);
/* Name of dtype ("f32", ...), "?" when invalid. */
CKPT_API const char *ckpt_dtype_name(ckpt_dtype dtype);

typedef enum ckpt_device {
	CKPT_DEVICE_HOST = 0,
	CKPT_DEVICE_CUDA = 1, /* ptr is CUDA device memory of the current device */
} ckpt_device;

/* What ckpt_save() does when the staging pool has no room because earlier
 * saves are still being persisted. */
typedef enum ckpt_pool_policy {
	/* Block until the persist pipeline frees staging slots. A save larger
	 * than the whole pool streams through it (its stall then includes disk
	 * time). The default. */
	CKPT_POOL_WAIT = 0,
	/* Take nothing and return -CKPT_ESKIPPED at once unless the whole save
	 * fits in the free part of the pool; -CKPT_ETOOBIG if it can never fit. */
	CKPT_POOL_SKIP = 1,
} ckpt_pool_policy;

typedef enum ckpt_version_state {
	CKPT_STATE_PENDING = 1,   /* some ranks' shards are not yet durable */
	CKPT_STATE_COMMITTED = 2, /* every rank's shard durable: restorable */
	CKPT_STATE_DELETING = 3,  /* being removed; never offered for restore */
} ckpt_version_state;

/* Name of state ("PENDING", "COMMITTED", "DELETING"), "?" when invalid. */
CKPT_API const char *ckpt_state_name(ckpt_version_state state);

/* ---------------------------------------------------------------- config */

/* Configuration of a context. Fill it with ckpt_config_init(), then set what
 * you need. Precedence: a field set by the caller > CKPT_* environment
 * variable (read by ckpt_config_init) > built-in default. `ckpt --help-config`
 * lists every setting with its variable and default. */
typedef struct ckpt_config {
	uint32_t size;          /* sizeof(ckpt_config); set by ckpt_config_init */
	const char *job_id;     /* [A-Za-z0-9._-]{1,64}, not starting with '.'. CKPT_JOB */
	uint32_t rank;          /* this process's rank, < world_size. CKPT_RANK */
	uint32_t world_size;    /* ranks in the job. CKPT_WORLD_SIZE */
	const char *root;       /* checkpoint root directory. CKPT_ROOT */
	uint64_t chunk_bytes;   /* chunk size, multiple of 4096, 64 KiB..256 MiB. CKPT_CHUNK_BYTES */
	uint64_t staging_bytes; /* staging pool size; 0 ("auto", the default): sized from the
	                           state at the first save, see staging_max_bytes.
	                           CKPT_STAGING_BYTES */
	int compress;           /* 1: byte-shuffle + zstd where it pays. CKPT_COMPRESS */
	int compress_level;     /* zstd level (negative = faster). CKPT_COMPRESS_LEVEL */
	uint32_t tiers;         /* ckpt_tier mask wanted. CKPT_TIERS */
	ckpt_pool_policy pool_policy; /* CKPT_POOL_POLICY=wait|skip */
	uint32_t io_depth;      /* disk I/Os in flight. CKPT_IO_DEPTH */
	uint32_t workers;       /* checksum/compression threads. CKPT_WORKERS */
	const char *backend;    /* local disk backend: "uring", "psync" or NULL=auto. CKPT_BACKEND */
	int direct_io;          /* 1: O_DIRECT where the filesystem allows. CKPT_DIRECT_IO */
	const char *faults;     /* test fault points, see docs/testing.md. CKPT_FAULT */
	int lazy_check;         /* 1: detect lazy-save contract violations. CKPT_LAZY_CHECK */
	int snapshot_overlap;   /* 1: workers start on chunks while the snapshot is still
	                           copying; 0: they wait until it is done (or blocks on a
	                           full pool); -1 auto: overlap only with more CPUs than
	                           workers + 1. CKPT_SNAPSHOT_OVERLAP=auto|on|off */
	uint64_t incarnation;   /* which launch of the job this is: ranks of one launch
	                           share it. CKPT_INCARNATION; default from the launcher
	                           (TORCHELASTIC_RESTART_COUNT, SLURM_RESTART_COUNT), else 0.
	                           With the version a rank restored, it keeps shards of
	                           different runs out of one version. */
	const char *daemon;     /* the node's ckptd agent, "unix:/path", or "host:port" (no
	                           LOCAL_MEM there: DRAM segments pass over the Unix socket
	                           only); NULL: embedded mode, no daemon. Needed for
	                           CKPT_TIER_LOCAL_MEM. CKPT_DAEMON */
	const char *token_file; /* 0600 file holding the cluster token the job's secret is
	                           derived from; NULL: the CKPT_TOKEN variable. CKPT_TOKEN_FILE */
	void *owned_strings;    /* private: strings ckpt_config_load_file allocated */
	int daemon_required;    /* 0 (default): an agent that cannot be reached when the
	                           context opens (nobody listening, no socket, timeout) is
	                           logged as a warning and the context runs embedded:
	                           local_disk only, LOCAL_MEM waits fail with
	                           -CKPT_EUNAVAIL. 1: ckpt_ctx_open fails instead. A refused
	                           token fails the open either way. CKPT_DAEMON_REQUIRED */
	const char *interval;   /* when ckpt_step answers CKPT_STEP_SAVE: NULL or "off"
	                           (never), "N" (every N steps), or "auto": at the interval
	                           a ckptd coordinator advises from the measured checkpoint
	                           cost and the job's MTBF (Young/Daly), the same steps on
	                           every rank; before the first advice, every 100 steps.
	                           CKPT_INTERVAL */
	const char *restore_order; /* where ckpt_restore looks for this rank's shard, in order:
	                           a comma list of local_mem, local_disk, peer_mem, shared
	                           (NULL: that order). Put peer_mem before local_disk when
	                           the root is a network filesystem slower than the fabric.
	                           CKPT_RESTORE_ORDER */
	const char *preempt_signals; /* signals ckpt_preempt_install(ctx, NULL, 0) arms: a comma
	                           list of names ("TERM,USR1", the default). CKPT_PREEMPT_SIGNALS */
	uint32_t preempt_grace_ms; /* a signal's deadline: this long after it (30000).
	                           CKPT_PREEMPT_GRACE_MS */
	uint32_t preempt_exit_margin_ms; /* ckpt_step says EXIT this long before the deadline
	                           even without a committed emergency version (2000).
	                           CKPT_PREEMPT_EXIT_MARGIN_MS */
	uint32_t peer_timeout_ms; /* PEER_MEM: the longest wait on a partner (its answer, a
	                           fabric completion) before it is passed over for the
	                           next one. CKPT_PEER_TIMEOUT_MS */
	const char *shared_dir;  /* the shared filesystem directory the ckptd agents flush
	                           committed versions to (their --shared-dir), as this
	                           process sees it. ckpt_restore reads this rank's shard
	                           there when "shared" is in restore_order: a version the
	                           coordinator lists, or one the tree itself marks
	                           committed (so a job restores with every node, and the
	                           coordinator's knowledge of the copies, lost). NULL: the
	                           SHARED tier is not read. CKPT_SHARED_DIR */
	int recycle;            /* 1: shard files of versions that retention or gc deleted
	                           stay allocated in the root's pool (<root>/recycle/) and
	                           new shards overwrite them: writes run at the disk's
	                           overwrite speed instead of its new-file speed. The pool
	                           holds only what deletions freed (at most 64 files).
	                           0: deleted files are unlinked, and opening a context
	                           empties the root's pool. -1 (default, auto): 1 with
	                           keep_versions and no daemon (the library deletes a
	                           version per save: the pool holds about one shard), else
	                           0. CKPT_RECYCLE=auto|on|off */
	uint32_t keep_versions; /* retention without a daemon: once a save commits a version,
	                           committed versions older than the newest keep_versions
	                           are deleted (their files recycled when recycle is on).
	                           0 (default): keep everything; with a daemon the
	                           coordinator's retention rules instead. CKPT_KEEP_VERSIONS */
	uint32_t heartbeat_timeout_ms; /* the agent is lost (saves go to local disk
	                           only, as when its socket closes) once it has not
	                           answered a heartbeat within this; one goes at a
	                           quarter of it while the link is otherwise quiet
	                           (10000; 0: none). CKPT_HEARTBEAT_TIMEOUT_MS */
	uint32_t snapshot_threads; /* threads that copy host regions into the snapshot
	                           together, the caller of ckpt_save included: one core's
	                           memcpy reaches only part of the memory bandwidth, and
	                           that copy is the stall. 0 (default): the CPUs online,
	                           at most 4; 1: the caller alone. CKPT_SNAPSHOT_THREADS */
	uint64_t staging_max_bytes; /* with staging_bytes auto (0): the context opens with a
	                           pool of io_depth + 1 chunks (a restore's read buffers);
	                           the first ckpt_save that needs more replaces it, once,
	                           by one holding every chunk of the regions registered
	                           then (each chunk takes a whole slot) and a sixteenth
	                           more (at least 2 chunks) to grow, allocated and
	                           pre-faulted inside that save, and never resized again.
	                           This bounds that size; 0 ("auto", the default): an
	                           eighth of the machine's physical memory, at least
	                           256 MiB. CKPT_STAGING_MAX_BYTES */
	uint32_t heartbeat_interval_ms; /* with a daemon: a heartbeat goes to the agent
	                           once the link was quiet this long (at most a quarter
	                           of heartbeat_timeout_ms). The agent is told it when
	                           the rank registers and decides the rank hung (a
	                           rank-hung event, docs/operations.md) once it is
	                           silent for its --hang-timeout while its process
	                           exists. 500 (default); 0: the default.
	                           CKPT_HEARTBEAT_INTERVAL_MS */
} ckpt_config;

/* Fills cfg with defaults, then applies CKPT_* environment variables.
 * Returns 0, or -CKPT_ECONFIG when a variable holds an invalid value (the
 * message names it; cfg then holds the defaults for that field).
 * String fields point into the environment or static storage: they stay
 * valid while the environment is not modified. */
CKPT_API int ckpt_config_init(ckpt_config *cfg);

/* Reads "key = value" lines (keys as in the table: job_id, root, chunk_bytes,
 * ...; '#' starts a comment) from path into cfg. String values are copied into
 * storage tied to cfg: call ckpt_config_free_strings(cfg) when done with it
 * (a copy of cfg shares those strings; free once).
 * Returns 0, -errno if the file cannot be read, -CKPT_ECONFIG naming the line
 * on a bad key or value. */
CKPT_API int ckpt_config_load_file(ckpt_config *cfg, const char *path);
/* Sets one setting from its text form, by its name in the table (job_id,
 * root, staging_bytes = "1G", tiers = "local_disk", ...), parsed exactly as
 * ckpt_config_load_file parses a line: what bindings and tools use to pass
 * settings through without knowing each field's type. String values are
 * copied into storage tied to cfg (free with ckpt_config_free_strings).
 * Returns 0; -CKPT_ECONFIG for an unknown key or a value that does not parse
 * (logged, naming both; the field is then unchanged); -EINVAL when an
 * argument is NULL; -ENOMEM. */
CKPT_API int ckpt_config_set(ckpt_config *cfg, const char *key, const char *value);
/* Frees string values that ckpt_config_load_file() and
 * ckpt_config_set() allocated. Accepts NULL. */
CKPT_API void ckpt_config_free_strings(ckpt_config *cfg);

/* Writes the settings table to out: one line per setting with its name, its CKPT_*
 * variable, its default and what it means. What `ckpt --help-config` prints.
 * Thread-safe. */
CKPT_API void ckpt_config_help(FILE *out);

/* ---------------------------------------------------------------- context */

typedef struct ckpt_ctx ckpt_ctx;

/* Opens a context: validates cfg, creates the root and its index if needed,
 * allocates and pre-faults the staging pool, starts the background threads,
 * and finishes any deletion a crashed process left half-done. With cfg->daemon
 * set, it also authenticates to the ckptd agent and registers the rank; an
 * agent that cannot be reached is an error only with cfg->daemon_required
 * (otherwise a warning naming the address, and embedded mode).
 * [in] cfg  copied; the caller may free it afterwards.
 * [out] out the new context, NULL on error.
 * Returns 0; -CKPT_ECONFIG / -CKPT_ENAME on bad configuration; -ENOMEM if the
 * pool cannot be allocated; -errno for filesystem errors; -CKPT_EINDEX.
 * With a daemon: -EACCES (the agent refused the token), -ENOKEY (no token),
 * -EINVAL (bad address), -CKPT_EFORMAT (another protocol version), -EPROTO
 * (registration refused); with daemon_required, also -ECONNREFUSED, -ENOENT,
 * -ETIMEDOUT and the like when the agent is unreachable. */
CKPT_API int ckpt_ctx_open(const ckpt_config *cfg, ckpt_ctx **out);

/* Waits for every save in progress to finish persisting (their handles stay
 * valid until freed), stops the threads and frees everything. Accepts NULL.
 * Returns 0, or the first error a pending save hit. */
CKPT_API int ckpt_ctx_close(ckpt_ctx *ctx);

/* ---------------------------------------------------------------- regions */

#define CKPT_MAX_DIMS 8
#define CKPT_MAX_NAME 255

/* A memory region to checkpoint: one named tensor or blob of this rank. */
typedef struct ckpt_region_desc {
	uint32_t size;        /* sizeof(ckpt_region_desc) */
	const char *name;     /* unique in the context; 1..255 bytes of well-formed
	                         UTF-8, no control character (U+0000..U+001F,
	                         U+007F..U+009F), no '/' or '\\', not "." or "..";
	                         copied */
	void *ptr;            /* the memory; borrowed until ckpt_ctx_close */
	uint64_t bytes;       /* length in bytes (0 allowed) */
	ckpt_dtype dtype;     /* element type */
	ckpt_device device;   /* CKPT_DEVICE_HOST, or CKPT_DEVICE_CUDA (device memory) */
	uint32_t ndim;        /* 0..CKPT_MAX_DIMS; 0 = no shape information */
	uint64_t global_shape[CKPT_MAX_DIMS]; /* shape of the whole tensor */
	uint64_t offsets[CKPT_MAX_DIMS];      /* where this rank's part starts */
	uint64_t extents[CKPT_MAX_DIMS];      /* this rank's part; with ndim > 0 and a
	                                         typed dtype, bytes must equal
	                                         prod(extents) * ckpt_dtype_size */
} ckpt_region_desc;

/* Fills d for an opaque host blob: dtype BYTES, ndim 0. */
CKPT_API void ckpt_region_desc_init(ckpt_region_desc *d, const char *name, void *ptr,
                                    uint64_t bytes);

/* Registers a region. Returns 0; -CKPT_ENAME for a bad or duplicate name;
 * -EINVAL for inconsistent shape/offsets; -CKPT_ESTATE while a snapshot is
 * being taken. */
CKPT_API int ckpt_region_add(ckpt_ctx *ctx, const ckpt_region_desc *desc);

/* Registers a region whose bytes come from a file instead of memory: bytes
 * [offset, offset + bytes) of the open descriptor fd, a regular file. Each
 * save reads them chunk by chunk straight into the staging pool (or the
 * LOCAL_MEM segment) with pread, so the save holds no more of the file in
 * memory than the pool, whatever the file's size: a file larger than the
 * pool streams through it, ckpt_save returning once its last chunk is read
 * (the read is in the stall). Its chunks do not count when the library
 * sizes the pool (staging_bytes auto) or warns of a save larger than it. The file must not change during the save: one
 * shorter than offset + bytes, or whose size or modification time changed
 * between its first and last read, fails the save with -CKPT_ECHANGED
 * (nothing of that version is committed; the log names the region). A
 * restore writes the bytes back into the file with pwrite at the same
 * offset (fd must then be open for writing, else the restore fails with
 * -EBADF). The region is an opaque blob (dtype BYTES, no shape), named as
 * in ckpt_region_add; fd is borrowed until ckpt_ctx_close or
 * ckpt_region_remove.
 * Returns 0; -CKPT_ENAME for a bad or duplicate name; -EBADF if fd is not
 * open; -EINVAL if it is not a regular file, offset + bytes overflows, or an
 * argument is NULL. */
CKPT_API int ckpt_region_add_file(ckpt_ctx *ctx, const char *name, int fd, uint64_t offset, uint64_t bytes);

/* Unregisters the region named name: later saves leave it out and restores
 * no longer fill it, and its memory is no longer borrowed once this returns
 * (for a CUDA region, after the device copies of lazy saves still reading it
 * are done: this waits for them like ckpt_fence). Saves already taken keep
 * their copy. A binding re-registers a tensor whose storage moved this way:
 * remove, then add with the new pointer. Not while another thread is in a
 * call on the same context.
 * Returns 0; -ENOENT if no region has that name; -EINVAL (NULL argument);
 * -CKPT_EDEVICE if waiting for the device copies failed (the region is then
 * still registered). */
CKPT_API int ckpt_region_remove(ckpt_ctx *ctx, const char *name);

/* ---------------------------------------------------------------- save */

/* The result of a save at one tier, filled by ckpt_handle_wait/test. */
typedef struct ckpt_status {
	uint32_t size;        /* sizeof(ckpt_status), set by the caller */
	uint64_t version;
	uint32_t tier;        /* the tier this status is for */
	int error;            /* 0 or a negative code: what failed */
	int sys_errno;        /* underlying errno when error came from the system */
	int committed;        /* 1: the version is COMMITTED (all ranks durable) */
	uint64_t bytes;       /* raw bytes of this rank's shard */
	uint64_t stored_bytes;/* bytes written to the tier (after compression) */
	uint64_t stall_ns;    /* time spent blocking in ckpt_save */
	uint64_t durable_ns;  /* from ckpt_save entry to durable + indexed */
	uint32_t tiers_reached; /* every tier this rank's copy is durable at so far (a
	                         mask; a DRAM copy counts once it is checked and
	                         reported), whichever tier the status is for */
	uint32_t tiers_failed;  /* the tiers asked for (CKPT_TIERS) where this rank's
	                         copy failed or was skipped: a save that reached its
	                         disk but not a partner says so here */
} ckpt_status;

typedef struct ckpt_handle ckpt_handle;

/* Save flags. */
#define CKPT_SAVE_DEFAULT 0u
/* Lazy snapshot: ckpt_save returns once the device-to-host copies of CUDA
 * regions are queued, ordered after the work already queued on the
 * trainer's stream (ckpt_cuda_stream_set); it does not wait for them.
 * Contract: until ckpt_fence() returns, the trainer must not modify CUDA
 * regions (normally: call ckpt_fence before optimizer.step()). Host regions
 * are still copied before ckpt_save returns. With the setting lazy_check
 * (CKPT_LAZY_CHECK=1) a broken contract is detected: the checksum taken on
 * the device at the save point differs from the one of the copy, and the
 * save fails with -CKPT_ECONTRACT. The staging pool must have room for the
 * whole save, else the call waits for slots like an eager save. */
#define CKPT_SAVE_LAZY 0x1u

/* Takes a checkpoint of every registered region as `version` (normally the
 * training step). Returns once the snapshot is in the staging pool, or, with
 * the LOCAL_MEM tier, in the segment the ckptd agent granted for it; the rest
 * runs in the background. If the agent cannot grant a segment (its pool is
 * full, the link is lost) the save goes through the staging pool to disk
 * alone, with a warning, and the handle's LOCAL_MEM status says why.
 * [out] out  a handle to wait on; free it with ckpt_handle_free (may be NULL
 *            if the caller does not want one).
 * Returns 0; -CKPT_ESKIPPED / -CKPT_ETOOBIG per CKPT_POOL_SKIP; -EEXIST if
 * `version` is already COMMITTED with this rank's shard in it (a PENDING
 * version is saved again: this rank's shard is replaced); -CKPT_ESTATE if no
 * region is registered; -CKPT_EDEVICE if queuing device copies failed. */
CKPT_API int ckpt_save(ckpt_ctx *ctx, uint64_t version, uint32_t flags, ckpt_handle **out);

/* Waits until every device copy of lazy saves is done, so that the trainer
 * may modify its CUDA regions. Waits only for copies not yet finished;
 * returns at once when there are none (and always without CUDA).
 * Returns 0, or a CUDA error as -CKPT_EDEVICE. */
CKPT_API int ckpt_fence(ckpt_ctx *ctx);

/* The staging pool's size now (*pool_bytes) and what the last save needed
 * of it (*need_bytes: its chunks staged there, each a whole slot, file
 * regions' left out: they stream by design; 0 before the first save). need > pool means that save streamed through the pool
 * under CKPT_POOL_WAIT: its stall included disk time (the library logs a
 * warning naming staging_bytes, once per context). Either pointer may be
 * NULL. Returns 0, or -EINVAL when ctx is NULL. */
CKPT_API int ckpt_staging_size(ckpt_ctx *ctx, uint64_t *pool_bytes, uint64_t *need_bytes);

/* Sets the CUDA stream (a cudaStream_t) whose queued work a snapshot must
 * follow; NULL (the default) means the legacy default stream. Returns 0, or
 * -ENOTSUP in a build without CUDA. */
CKPT_API int ckpt_cuda_stream_set(ckpt_ctx *ctx, void *stream);

/* 1 if this build has CUDA support and a CUDA device is usable, else 0. */
CKPT_API int ckpt_cuda_available(void);

/* Waits until the save is durable at `tier` (only CKPT_TIER_LOCAL_DISK in
 * the embedded default) or failed. CKPT_TIER_LOCAL_MEM (with a daemon):
 * returns once the daemon announced the version COMMITTED in node DRAM
 * (every rank's shard there). This rank's DRAM copy is reported as soon as
 * every chunk of it is checksummed, without waiting for the disk. Errors of
 * this tier alone (the save still counts on disk): -ENOSPC if the agent had
 * no room for this rank's shard; -CKPT_EUNAVAIL if the tier is not
 * available to the context (agent unreachable at open, TCP address);
 * -ENOTCONN if the link to the agent was lost; -EEXIST if the agent already
 * held this rank's copy of the version (an earlier attempt); the save's own
 * error if it failed before its DRAM copy was complete. A LOCAL_MEM wait
 * needs the context open (its daemon connection); a LOCAL_DISK wait does
 * not. For LOCAL_MEM, st->stored_bytes is the size of the DRAM copy and
 * st->durable_ns the time until it was reported to the agent.
 * [in] timeout_ms  -1 waits forever.
 * [out] st         may be NULL; set st->size first.
 * Returns 0 when durable; the save's error if it failed (also in st->error);
 * -ETIMEDOUT; -EINVAL for a tier this context does not write. Thread-safe. */
CKPT_API int ckpt_handle_wait(ckpt_handle *h, uint32_t tier, int64_t timeout_ms,
                              ckpt_status *st);

/* Like ckpt_handle_wait with timeout 0 but returns -EAGAIN while in progress. */
CKPT_API int ckpt_handle_test(ckpt_handle *h, uint32_t tier, ckpt_status *st);

/* Releases the caller's reference. The save itself goes on. Accepts NULL. */
CKPT_API void ckpt_handle_free(ckpt_handle *h);

/* ---------------------------------------------------------------- restore */

#define CKPT_LATEST UINT64_MAX

/* What ckpt_step tells the training loop. */
typedef enum ckpt_step_action {
	CKPT_STEP_CONTINUE = 0, /* go on training */
	CKPT_STEP_SAVE = 1,     /* save a checkpoint at this step: interval advice, or an emergency */
	CKPT_STEP_EXIT = 2,     /* preempted: the emergency checkpoint is committed (or the deadline
	                           is close); close the context and leave */
} ckpt_step_action;

/* Call once per training step, with the step number, at the end of the step
 * (after the optimizer update). Measures the time between calls (the step
 * time) and, through a ckptd agent, reports it about once a second, batched,
 * for straggler detection and goodput accounting; it costs no system call
 * on its fast path (a clock read through the vDSO and an uncontended lock).
 * Thread-safe with the context's other calls. Returns CKPT_STEP_SAVE when
 * config `interval` asks for a checkpoint of this step (save it as version
 * `step`), else CKPT_STEP_CONTINUE; -EINVAL without a context. */
CKPT_API int ckpt_step(ckpt_ctx *ctx, uint64_t step);

/* ---------------------------------------------------------------- preemption */

/* Arms handlers for signals that announce the end of the process: signals
 * (nsignals of them), or when NULL the config `preempt_signals` (SIGTERM
 * for Kubernetes and clouds, SIGUSR1 for Slurm's --signal). The handler is
 * async-signal-safe: it only marks the context; the context's io thread
 * then raises a notice with a deadline `preempt_grace_ms` away, like
 * ckpt_preempt_notice. A handler installed before is still called after
 * ours (a SIG_DFL or SIG_IGN one is not: the process must live to save; nor
 * one a library's constructor installed when it was loaded with libckpt,
 * see Caveats).
 * The handlers go back to what they were when the last context armed with
 * them closes. At most 16 contexts per process. Returns 0, -EINVAL (a
 * signal that cannot be caught, ctx NULL), -ENOSPC (16 armed), -errno.
 *
 * What follows, through ckpt_step (which the training loop must call):
 * with a ckptd agent, the coordinator picks one step every rank of the job
 * can still reach and a tier off the noticed node that holds the version in
 * time (partner DRAM, else shared storage); ckpt_step answers
 * CKPT_STEP_SAVE at that step on every rank (save it as version `step`),
 * then CKPT_STEP_EXIT once that version is committed there, or
 * `preempt_exit_margin_ms` before the deadline, whichever comes first.
 * Embedded (no agent): the next step is saved and CKPT_STEP_EXIT follows
 * once it is on local disk. The previous version stays restorable. */
CKPT_API int ckpt_preempt_install(ckpt_ctx *ctx, const int *signals, int nsignals);

/* The same notice raised by the caller (a preStop hook, a watcher of its
 * own): the node goes at deadline_ns (CLOCK_REALTIME ns; 0: in
 * preempt_grace_ms). Thread-safe; not async-signal-safe. Returns 0,
 * -EINVAL, or the error of telling the agent. */
CKPT_API int ckpt_preempt_notice(ckpt_ctx *ctx, uint64_t deadline_ns);

/* Restores every registered region from `version`, or from the newest
 * committed version that verifies when version is CKPT_LATEST (a version
 * whose shard is corrupt or missing is logged and skipped).
 * Every chunk's checksum is verified before it reaches the region.
 *
 * Elastic restore: when the version was saved by another number of ranks,
 * or a region's layout differs from the saved one, each region is filled
 * from the saved pieces that overlap what it describes (global_shape,
 * offsets, extents of its ckpt_region_desc), reading only the chunks it
 * needs, every saved rank's shard from the first tier of restore_order
 * holding an intact copy. A region with ndim 0 (a blob) gets the copy this
 * rank saved when the saved job had this rank, else the copy of the lowest
 * saved rank (rank 0: for replicated state such as step counters); a
 * registered blob whose name the checkpoint holds as a tensor gets the
 * whole global tensor. Same world size and layout: each rank reads its own
 * shard, as before.
 * [out] restored  the version restored; may be NULL.
 * Returns 0; -CKPT_ENOVERSION if there is none (the only answer that means
 * a new job); -CKPT_EUNREACHABLE if a committed version exists (the
 * coordinator lists it, or this root's index knows it) but no copy of this
 * rank's shard could be reached, or if the agent cannot ask the coordinator
 * and this root holds nothing (the log names where the copies are; never
 * start from scratch on it); -CKPT_ECORRUPT (the log names version, rank,
 * region and chunk; also saved pieces that overlap or disagree on shape);
 * -CKPT_EMISMATCH if a registered region is missing from the checkpoint,
 * has another dtype, global shape or size, or asks for elements no saved
 * rank holds (the log names the region and the elements missing). On error
 * the regions' contents are unspecified: some may have been written. */
CKPT_API int ckpt_restore(ckpt_ctx *ctx, uint64_t version, uint32_t flags, uint64_t *restored);

/* ---------------------------------------------------------------- listing */

typedef struct ckpt_version_info {
	uint32_t size;          /* sizeof(ckpt_version_info), set by the caller */
	uint64_t version;
	ckpt_version_state state;
	uint32_t world_size;
	uint32_t shards_done;   /* ranks whose shard is durable */
	uint64_t bytes;         /* raw bytes over all durable shards */
	uint64_t stored_bytes;  /* bytes on disk */
	uint64_t created_ns;    /* CLOCK_REALTIME of the first shard's start */
	uint64_t committed_ns;  /* 0 while PENDING */
} ckpt_version_info;

/* Lists the job's versions, oldest first.
 * [out] out    array of cap entries, each with .size set (or all zero: the
 *              library then assumes the current size); may be NULL with cap 0.
 * [out] count  total number of versions (may exceed cap).
 * Returns 0 or -CKPT_EINDEX. */
CKPT_API int ckpt_versions_list(ckpt_ctx *ctx, ckpt_version_info *out, size_t cap,
                                size_t *count);

/* The versions ckpt_restore(CKPT_LATEST) would try, oldest first: those
 * the coordinator says are committed (else the COMMITTED ones of this
 * root's index), with those the SHARED tier's commit markers name (found
 * by listing it when nobody else names any: every node lost). A caller
 * whose restore of one failed takes the next older one from here.
 * [out] out    cap entries; may be NULL with cap 0.
 * [out] count  how many there are (may exceed cap).
 * Returns 0, -CKPT_EINDEX, -ENOMEM, or the SHARED tier's -errno. */
CKPT_API int ckpt_versions_restorable(ckpt_ctx *ctx, uint64_t *out, size_t cap, size_t *count);

/* Deletes one version of the context's job from its root, crash-safely, as
 * `ckpt rm` does: marked DELETING first (never offered for restore from
 * then on), its shard files removed, then its records; a deletion a crash
 * interrupted is finished by the next context opened on the root. Any
 * state (a PENDING version too). Not while a save of that version is in
 * flight. Embedded mode only: with a ckptd agent the coordinator owns
 * deletion (its retention, `ckpt rm --daemon`).
 * Returns 0; -CKPT_ENOVERSION if the root holds no such version; -EBUSY (a
 * save of it in flight); -ENOTSUP (a daemon is configured); -EINVAL;
 * -CKPT_EINDEX or -errno from the index and the files. */
CKPT_API int ckpt_version_delete(ckpt_ctx *ctx, uint64_t version);

/* ---------------------------------------------------------------- reading a version */

/* A committed version opened for reading by tools and bindings, without a
 * context: every rank's shard file in a root, its regions merged into
 * global tensors (docs/format.md, "Global tensors"). A tensor (a region
 * saved with ndim > 0) is assembled from the pieces the ranks hold (their
 * offsets and extents); a blob (ndim 0) is one copy per rank. Reads take
 * only the chunks they need and verify every one.
 *
 * Opening checks that the pieces are consistent: every rank holding a name
 * agrees on dtype and global shape, pieces do not overlap (the same box on
 * several ranks is accepted as a replica when the chunk checksums agree),
 * and each piece's size matches its extents. Elements no rank holds are
 * counted (ckpt_tensor_info.missing): a read that needs them fails.
 *
 * A view is used by one thread at a time; several views may be open at
 * once. It opens the root's LMDB index only while ckpt_view_open runs: do
 * not call that in a process where a context on the same root is open
 * (LMDB's rule: one environment per file per process). */
typedef struct ckpt_view ckpt_view;

/* One global tensor of a view. */
typedef struct ckpt_tensor_info {
	uint32_t size;       /* sizeof(ckpt_tensor_info), or 0: set on return */
	const char *name;    /* valid until ckpt_view_close */
	ckpt_dtype dtype;
	uint32_t ndim;       /* 0: a blob */
	uint64_t shape[CKPT_MAX_DIMS]; /* the global shape (ndim entries) */
	uint64_t bytes;      /* of the global tensor; of the lowest rank's copy for a blob */
	uint64_t missing;    /* elements no rank holds (0 when complete) */
	uint32_t npieces;    /* pieces (replicas folded); a blob: its copies */
} ckpt_tensor_info;

/* One piece of a global tensor: what one rank holds. */
typedef struct ckpt_piece_info {
	uint32_t size;       /* sizeof(ckpt_piece_info), or 0 */
	uint32_t rank;       /* the rank that holds it (the lowest one of replicas) */
	uint32_t replicas;   /* other ranks holding the same box with the same bytes */
	uint64_t bytes;      /* the piece's bytes */
	uint64_t offsets[CKPT_MAX_DIMS]; /* where it starts in the global tensor */
	uint64_t extents[CKPT_MAX_DIMS]; /* its size per dimension */
} ckpt_piece_info;

/* Opens version `version` (CKPT_LATEST: the newest COMMITTED) of job in the
 * checkpoint root `root`, which must already hold an index; or, when root
 * is s3://BUCKET/PREFIX/, in the SHARED tier on that object store (the
 * CKPT_S3_* settings and credentials from the environment): a version is
 * COMMITTED there when its commit marker is, CKPT_LATEST is the newest
 * with one (a LIST), and every chunk is read by ranged GETs.
 * [out] out    the view, NULL on error. Close with ckpt_view_close.
 * [out] why    whycap bytes for the reason on error (may be NULL).
 * Returns 0; -CKPT_ENOVERSION (no such committed version); -CKPT_ECORRUPT
 * (a shard missing or not the one the index recorded, a structure check
 * failed, or the pieces are inconsistent: why names region and ranks);
 * -CKPT_ENAME; -CKPT_EFORMAT; -CKPT_EINDEX; -ENOENT (no index under root);
 * -ENOMEM; -errno. */
CKPT_API int ckpt_view_open(const char *root, const char *job, uint64_t version, ckpt_view **out, char *why,
                            size_t whycap);
/* Closes the view. Accepts NULL. */
CKPT_API void ckpt_view_close(ckpt_view *v);
/* The version the view holds and the number of ranks that saved it. */
CKPT_API uint64_t ckpt_view_version(const ckpt_view *v);
CKPT_API uint32_t ckpt_view_world_size(const ckpt_view *v);
/* Number of global tensors; they are indexed 0..count-1 in name order. */
CKPT_API size_t ckpt_view_count(const ckpt_view *v);
/* Describes tensor i. Returns 0 or -EINVAL (i out of range). */
CKPT_API int ckpt_view_tensor(const ckpt_view *v, size_t i, ckpt_tensor_info *out);
/* The index of the tensor named name. Returns 0 or -ENOENT. */
CKPT_API int ckpt_view_find(const ckpt_view *v, const char *name, size_t *i);
/* Describes piece j (0..npieces-1) of tensor i, pieces in row-major order
 * of their offsets (a blob's copies by rank). Returns 0 or -EINVAL. */
CKPT_API int ckpt_view_piece(const ckpt_view *v, size_t i, uint32_t j, ckpt_piece_info *out);
/* Reads bytes [off, off+len) of tensor i in row-major order of the global
 * tensor (a blob: of the lowest rank's copy) into buf (len bytes).
 * Returns 0; -EINVAL (out of range); -CKPT_EMISMATCH (some bytes are held
 * by no rank); -CKPT_ECORRUPT (a chunk failed its checksum); -errno.
 * ckpt_view_error says more. */
CKPT_API int ckpt_view_read(ckpt_view *v, size_t i, uint64_t off, uint64_t len, void *buf);
/* Reads the box lo[d] .. lo[d]+cnt[d] (d < ndim) of tensor i into buf as a
 * dense row-major array of prod(cnt) elements; cap is buf's size. Returns
 * as ckpt_view_read, and -EOVERFLOW when cap is too small, -EINVAL for a
 * blob or a box outside the shape. */
CKPT_API int ckpt_view_read_box(ckpt_view *v, size_t i, const uint64_t *lo, const uint64_t *cnt, void *buf,
                                size_t cap);
/* Why the view's last read failed ("" if it did not); valid until the next
 * call on the view. */
CKPT_API const char *ckpt_view_error(const ckpt_view *v);

#ifdef __cplusplus
}
#endif
#endif /* CKPT_H */
