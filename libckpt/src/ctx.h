/* The context and the objects of the save pipeline. Internal. */
#ifndef CKPT_CTX_H
#define CKPT_CTX_H

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/common.h"
#include "base/faults.h"
#include "base/pcopy.h"
#include "format/format.h"
#include "format/index.h"
#include "pool.h"
#include "device.h"
#include "preempt.h"
#include "backend.h"

typedef struct ckpt_region {
	char *name;
	size_t name_len;
	void *ptr;
	uint64_t bytes;
	ckpt_dtype dtype;
	ckpt_device device;
	uint32_t ndim;
	uint64_t global_shape[CKPT_MAX_DIMS];
	uint64_t offsets[CKPT_MAX_DIMS];
	uint64_t extents[CKPT_MAX_DIMS];
	ckpt_dev_region dev;     /* CUDA regions only */
	int fd;                  /* a file region (ckpt_region_add_file): its bytes are
	                            read from fd at fd_off; -1 for memory */
	uint64_t fd_off;
	struct stat fd_st;       /* snapshot: the file as its first read found it */
} ckpt_region;

typedef struct ckpt_save_op ckpt_save_op;

/* An I/O with what it belongs to, so that its completion finds its way. */
typedef struct tagged_io {
	ckpt_io io;
	int kind;                 /* enum io_kind in save.c */
	void *obj;
	struct tagged_io *next;   /* on the failed-submission list */
} tagged_io;

/* One chunk on its way from staging (or the LOCAL_MEM segment) to disk. */
typedef struct ckpt_chunk_task {
	ckpt_save_op *op;
	uint32_t index;     /* in the shard's chunk table */
	int slot;           /* staging slot holding the raw bytes, -1 once released */
	int cbuf;           /* compression buffer, -1 if none */
	uint8_t *mem;       /* LOCAL_MEM: the chunk's place in the segment (the raw bytes
	                       once the snapshot, or for a device chunk the worker, put them
	                       there); NULL when staged */
	uint64_t img_off;   /* LOCAL_MEM: its offset in the segment's shard image */
	uint64_t seal;      /* LOCAL_MEM: ckpt_kern_seal of the raw bytes (format/seal.h) */
	void *out;          /* what gets written: slot, segment or compression buffer */
	uint32_t raw_len;
	int dev;            /* the bytes come from the device: wait for the slot's copy */
	uint32_t stored_len;
	uint32_t flags;
	unsigned elem;      /* shuffle element size */
	tagged_io io;
	struct ckpt_chunk_task *next;
} ckpt_chunk_task;

enum op_stage { OP_DATA = 0, OP_TRAILER, OP_SYNC, OP_DONE };

struct ckpt_save_op {
	struct ckpt_ctx *ctx;
	uint64_t version;
	int refs;            /* ctx pipeline + caller's handle */
	int fd;
	/* The version directory and its job directory, opened without following
	 * a symlink below the root: the shard is created, renamed and synced
	 * through them, so that nothing is written outside the root. */
	int dir_fd, job_fd;
	char tmp_name[32], final_name[32];
	char tmp_path[4096];   /* for messages */
	char final_path[4096];
	char dir_path[4096];
	uint64_t t_start;
	uint64_t created_ns;
	uint64_t lineage;
	/* filled as chunks complete */
	ckpt_fmt_footer footer;
	uint32_t chunks_total;
	uint32_t chunks_queued;   /* handed to the pipeline by the snapshot */
	uint32_t chunks_written;
	uint32_t chunks_summed;   /* LOCAL_MEM, with ctx->lock: chunks checksummed */
	int mem_ready;           /* with ctx->lock: every chunk checksummed, the copy can be reported */
	int snapshot_done;
	uint64_t next_off;       /* file space allocator (aligned) */
	enum op_stage stage;
	uint8_t *header_buf;     /* aligned CKPT_FMT_HEADER_LEN */
	uint64_t header_checksum;
	int header_written;
	uint8_t *trailer_buf;
	size_t trailer_len;
	tagged_io aux;           /* header, trailer, sync: one at a time */
	ckpt_chunk_task *tasks;  /* one per chunk */
	uint64_t file_bytes;     /* the shard file's length, once the trailer is placed */
	int recycled;            /* the file came from the root's pool: cut it to file_bytes */
	/* LOCAL_MEM: the snapshot went into a segment of the agent's pool that
	 * holds an uncompressed shard image (docs/format.md); NULL once reported
	 * (the agent owns it then) or when the save is staged. */
	uint8_t *seg;
	uint64_t seg_bytes;      /* the image's length */
	uint64_t img_footer_off; /* where its footer starts */
	int fixed_layout;        /* the disk file is the image byte for byte (no compression) */
	int mem_state;           /* with op->mu: 0 in progress, 1 reported, -1 failed (mem_error) */
	int mem_error;           /* LOCAL_MEM: 0, or why this rank's copy is missing */
	uint64_t mem_sum;        /* the image's footer checksum, as reported */
	uint64_t mem_ns;         /* save entry to the DRAM copy reported */
	uint32_t tiers;          /* the context's tiers, kept: a handle may outlive it */
	/* PEER_MEM (peer.c), with op->mu */
	int peer_queued;         /* io thread: handed to the peer thread */
	int peer_state;          /* 0 in progress, 1 on a partner, -1 failed or skipped (peer_error) */
	int peer_error;
	uint64_t peer_ns;        /* save entry to the partner's acknowledgement */
	/* result */
	int error;
	int sys_errno;
	int finished;
	int committed;
	uint64_t stall_ns;
	uint64_t durable_ns;
	pthread_mutex_t mu;      /* guards refs, finished and the result for handles */
	pthread_cond_t cond;
	struct ckpt_save_op *next_live;
};

struct ckpt_handle {
	ckpt_save_op *op;
};

struct ckpt_ctx {
	ckpt_config cfg;         /* strings point into the owned copies below */
	char *job, *root, *backend_name, *daemon_addr, *token_file;
	struct ckpt_daemon *daemon; /* the ckptd agent's link; NULL in embedded mode */
	struct ckpt_peer *peer;  /* PEER_MEM copies (peer.c); NULL when not written */
	uint32_t restore_order[4]; /* tier bits ckpt_restore tries, in order; 0 ends */
	int mem_tier;            /* LOCAL_MEM wanted and possible: a Unix-socket link */
	int mem_unavail;         /* LOCAL_MEM wanted but not possible: -CKPT_EUNAVAIL, else 0 */
	pthread_cond_t notice_cv;   /* with lock: a COMMIT_NOTICE arrived */
	ckpt_logger log;
	ckpt_faults faults;

	ckpt_region *regions;
	uint32_t nregions, cap_regions;

	ckpt_pool pool;
	int pool_auto;           /* staging_bytes auto: not yet sized by a save (staging.c) */
	int pool_warned;         /* a save larger than the pool was logged */
	uint64_t pool_need;      /* staging slots the last save needed */
	uint8_t **cbufs;         /* compression outputs, aligned */
	size_t cbuf_bytes;
	uint32_t ncbufs;
	int *cbuf_free;
	uint32_t cbuf_nfree;

	ckpt_backend *backend;
	ckpt_index *index;
	int direct_ok;           /* O_DIRECT worked on this root */
	uint64_t lineage;        /* hash of (incarnation, version restored); see index.h */
	ckpt_dev *dev;           /* opened with the first CUDA region */
	void *cuda_stream;       /* the trainer's stream */
	uint32_t ndev_regions;

	/* ckpt_step: the trainer's step times since the last report (step_mu) */
	pthread_mutex_t step_mu;
	uint64_t step_last_ns;   /* when ckpt_step was last called; 0: never */
	uint64_t step_cur;       /* the step it named */
	uint64_t step_sum_ns, step_count;
	uint64_t step_stall_ns;   /* ckpt_save stalls since the last report */
	uint64_t step_restore_ns; /* ckpt_restore time since the last report */
	uint64_t step_saves;      /* ckpt_save calls since the last report */
	uint64_t step_errors;     /* saves that failed since the last report */
	uint64_t step_peer_skips; /* PEER_MEM copies skipped since the last report */
	uint64_t step_fabric_errors; /* libfabric transfers failed since the last report */
	uint32_t step_restore_tier; /* the tier the last restore read */
	int interval_mode;        /* 0 off, 1 every interval_steps, 2 auto (the advice below) */
	uint64_t interval_steps;
	/* the coordinator's advices, oldest first (step_mu): at a step, the
	 * newest one that has started rules; before any has, every 100 steps */
	struct { uint64_t every, from; } adv[8];
	uint32_t nadv;
	uint64_t step_sent_ns;   /* io thread: when the last report went */
	ckpt_emergency em;        /* the emergency checkpoint (preempt.h), with step_mu */

	/* preemption signals (preempt.c) */
	int preempt_sigs[8], npreempt_sigs; /* config preempt_signals, parsed */
	int armed_sigs[8], narmed_sigs;     /* what ckpt_preempt_install armed (its lock) */
	_Atomic int preempt_sig;            /* set by the handler, taken by the io thread */
	int preempt_raised;                 /* io thread: the notice went */

	pthread_mutex_t lock;
	pthread_cond_t work_cv;  /* workers wait for tasks */
	pthread_cond_t space_cv; /* snapshot waits for slots / cbufs / io credits */
	ckpt_chunk_task *work_head, *work_tail;
	ckpt_chunk_task *write_head, *write_tail; /* LOCAL_MEM chunks checksummed, to write */
	ckpt_save_op *seg_reader; /* io thread: the op whose DRAM copy was reported while its
	                             disk writes still read the segment (at most one) */
	int mem_reported;        /* io thread: some DRAM copy was reported */
	uint64_t mem_newest;     /* io thread: the newest version reported */
	uint32_t inflight;       /* data I/Os submitted, not completed */
	int stopping;
	int hold_work;           /* workers leave queued chunks alone (snapshot running) */
	int overlap;             /* resolved snapshot_overlap */
	pthread_t *workers;
	uint32_t nworkers;
	ckpt_pcopy *pcopy;       /* the snapshot's copy gang */
	pthread_t io_thread;
	int io_started;
	ckpt_save_op *live;      /* saves not finished */
	tagged_io *failed_head, *failed_tail; /* submissions that failed */
	tagged_io wake_io;
	int wake_pending;        /* with lock: a wake-up for mem_ready is on its way */
	uint32_t nlive;
	char *shared_dir;        /* the SHARED tree (cfg.shared_dir, owned); NULL: not read */
	struct ckpt_s3tree *s3tree; /* shared_dir s3://...: its client, opened at the first restore (lock) */
	int s3tree_failed;       /* the client could not be opened (said once) */
};

/* ctx.c: the lineage of a run that started fresh (restored 0) or resumed
 * from version restored+1. */
uint64_t ckpt__lineage(uint64_t incarnation, uint64_t restored_plus_one);

/* region.c: fills parallel arrays (ctx->ndev_regions entries) of the CUDA regions. */
int ckpt__dev_regions(struct ckpt_ctx *ctx, void **ptrs, uint64_t *bytes, const char **names,
                      ckpt_dev_region **regs);

/* pipeline.c */
int ckpt__pipeline_start(struct ckpt_ctx *ctx);
void ckpt__pipeline_stop(struct ckpt_ctx *ctx);
/* Drops a reference (op->mu); the last one frees. */
void ckpt__op_release(ckpt_save_op *op);
/* Takes a reference. */
void ckpt__op_ref(ckpt_save_op *op);
/* A staging slot for a snapshot or a restore: waits for one (and lets a
 * held-back pipeline run, since only it and restores free slots). */
/* staging.c: the pool a context opens with, in bytes; at a save needing
 * `slots` staging slots, the pool sized from the state (the first save with
 * staging_bytes auto) and the warning when the save will not fit. */
uint64_t ckpt__staging_open_bytes(const ckpt_config *cfg);
int ckpt__staging_fit(struct ckpt_ctx *ctx, uint64_t version, uint64_t slots);
int ckpt__slot_take(struct ckpt_ctx *ctx);
/* Gives it back and wakes whoever waits for one. */
void ckpt__slot_give(struct ckpt_ctx *ctx, int slot);

#endif
