/* Internals shared by fabric.c (open, regions, single transfers) and
 * fabric_fetch.c (pipelined reads). The only files that include
 * <rdma/...>. Internal to storage/. */
#ifndef CKPT_STORAGE_FABRIC_INT_H
#define CKPT_STORAGE_FABRIC_INT_H

#include "fabric.h"
#include "fabric_lib.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* 1.9 is old enough for every distribution we meet, new enough for
 * FI_CONTEXT2 and the mr_mode bits. */
#define FAB_API FI_VERSION(1, 9)
/* The registration modes we can follow; the provider clears what it does
 * not need. */
#define FAB_MR_WANT (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | \
                     FI_MR_ENDPOINT)
#define FAB_PIECE_DEFAULT ((size_t)4 << 20)
#define FAB_DEPTH_DEFAULT 8u
#define FAB_TIMEOUT_DEFAULT 30000
#define FAB_CQ_BATCH 16
#define FAB_IDLE_NS 50000L /* poll interval where there is nothing to wait on */

/* One operation in flight; its context is what the provider hands back. */
struct fab_slot {
	struct fi_context2 ctx; /* first: op_context points here */
	size_t len;
	size_t piece;           /* ckpt_fab_fetch: the piece it belongs to */
	struct fab_slot *next_free;
};

struct fab_peer {
	uint8_t addr[CKPT_FAB_ADDR_MAX];
	uint32_t len;
	fi_addr_t fa;
};

struct ckpt_fab_mr {
	ckpt_fab *f;
	struct fid_mr *mr;
	uint8_t *buf;
	size_t len;
	uint64_t key;
	unsigned access;      /* CKPT_FAB_* */
	ckpt_fab_mr *prev, *next;
};

struct ckpt_fab {
	struct fi_info *info; /* the entry this fab was opened from */
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	uint64_t mr_mode;     /* the FI_MR_* bits the provider requires */
	uint64_t wflags;      /* op flags of a WRITE */
	int passive;
	int cq_wait;          /* the CQ has a wait object: fi_cq_sread works */
	int broken;
	uint8_t addr[CKPT_FAB_ADDR_MAX];
	uint32_t addr_len;
	pthread_mutex_t lock; /* mrs, next_key */
	ckpt_fab_mr *mrs;
	uint64_t next_key;
	struct fab_peer *peers;
	unsigned npeers, peer_cap;
	struct fab_slot slots[CKPT_FAB_DEPTH_MAX];
	struct fab_slot *free_slots;
	pthread_t thread;
	int thread_on;
	atomic_int stop;
};

/* fabric.c */
int ckpt__fab_errno(long fi_rc);
const char *ckpt__fab_strerror(int e);
int ckpt__fab_fail(char *err, size_t cap, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int ckpt__fab_fi_fail(char *err, size_t cap, long fi_rc, const char *what);
int64_t ckpt__fab_now_ms(void);
/* The peer's fi_addr_t, inserting its address into the AV the first time. */
int ckpt__fab_peer(ckpt_fab *f, const ckpt_fab_remote *r, fi_addr_t *fa, char *err, size_t cap);
/* A completion error entry, described (what: the operation). */
int ckpt__fab_cq_error(ckpt_fab *f, const char *what, char *err, size_t cap);

#endif
