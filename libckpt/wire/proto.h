/*
 * proto.h — the wire format of ckptd's control protocol (docs/protocol.md).
 *
 * A message is a frame: a fixed 16-byte header (magic, protocol version,
 * message type, flags, payload length), then a payload of typed fields
 * (tag, wire type, length, value), all little-endian. Every frame is bounded
 * by CKPTD_MAX_FRAME and every field by its own limit.
 *
 * The encoder writes a message into a buffer the caller owns, with its
 * capacity. The decoder validates everything it reads (never trusting a
 * length), fills a ckptd_msg, and says why it refused a frame.
 *
 * Caveats
 *  - No global state: every function works on its arguments only, and is
 *    thread-safe on distinct messages.
 *  - A decoded message may own list arrays: free it with ckptd_msg_free().
 *    A message the caller builds points at the caller's arrays; the encoder
 *    only reads them.
 *  - Errors are 0 or a negative code: -errno, or -CKPT_E* from ckpt.h.
 */
#ifndef CKPTD_PROTO_H
#define CKPTD_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- limits */

#define CKPTD_PROTO_MAJOR 1
#define CKPTD_PROTO_MINOR 6
/* A version as one number, for fields and the auth transcript. */
#define CKPTD_VERSION_PACK(major, minor) (((uint32_t)(major) << 16) | (uint32_t)(minor))
#define CKPTD_VERSION_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define CKPTD_VERSION_MINOR_OF(v) ((uint32_t)(v) & 0xffffu)
#define CKPTD_PROTO_VERSION CKPTD_VERSION_PACK(CKPTD_PROTO_MAJOR, CKPTD_PROTO_MINOR)

#define CKPTD_MAGIC 0x44504b43u /* "CKPD" as bytes on the wire */
#define CKPTD_HEADER_LEN 16u
#define CKPTD_MAX_FRAME (1u << 20) /* header + payload (+ seal), bytes */
#define CKPTD_MAX_PAYLOAD (CKPTD_MAX_FRAME - CKPTD_HEADER_LEN)
#define CKPTD_SEAL_LEN 32 /* MAC trailer of a sealed frame (auth.h) */
/* Largest frame the encoder makes: room is left for the seal, so that every
 * message can be sent sealed within CKPTD_MAX_FRAME. */
#define CKPTD_MAX_MESSAGE (CKPTD_MAX_FRAME - CKPTD_SEAL_LEN)
#define CKPTD_FIELD_HEADER_LEN 8u

#define CKPTD_JOB_MAX 64    /* CKPT_JOB_MAX: one rule, ckpt__job_valid */
#define CKPTD_NAME_MAX 64   /* node and failure-domain names */
#define CKPTD_ADDR_MAX 255  /* "host:port" or "unix:/path" */
#define CKPTD_TEXT_MAX 1024 /* error text */
#define CKPTD_PATH_MAX 1024 /* absolute directory path (a checkpoint root) */
#define CKPTD_NONCE_LEN 32
#define CKPTD_MAC_LEN 32
#define CKPTD_MAX_LIST 4096 /* entries in one list; longer answers are paged */
#define CKPTD_FABADDR_MAX 128 /* a libfabric endpoint address, opaque bytes */
#define CKPTD_PROVIDER_MAX 64 /* a libfabric provider name */

/* Frame flags. Unknown flags are refused: a flag may only be sent once the
 * handshake agreed on a minor version that defines it. */
#define CKPTD_FLAG_SEALED 0x1u /* payload ends in a MAC trailer (auth.h) */

/* ---------------------------------------------------------------- enums */

/* Message types. Numbers are never reused. */
typedef enum ckptd_msg_type {
	CKPTD_MSG_ERROR = 1, /* frozen across major versions */
	CKPTD_MSG_OK = 2,
	CKPTD_MSG_HELLO = 16,
	CKPTD_MSG_CHALLENGE = 17,
	CKPTD_MSG_AUTH = 18,
	CKPTD_MSG_AUTH_OK = 19,
	CKPTD_MSG_REGISTER_RANK = 32,
	CKPTD_MSG_SEGMENT_REQUEST = 33,
	CKPTD_MSG_SEGMENT_GRANT = 34,
	CKPTD_MSG_SHARD_DONE = 35,
	CKPTD_MSG_COMMIT_NOTICE = 36,
	CKPTD_MSG_STEP_REPORT = 37,
	CKPTD_MSG_SEGMENT_RELEASE = 38, /* 1.1 */
	CKPTD_MSG_LIST_VERSIONS = 48,
	CKPTD_MSG_VERSIONS = 49,
	CKPTD_MSG_DELETE_VERSION = 50,
	CKPTD_MSG_STATUS = 51,
	CKPTD_MSG_STATUS_REPLY = 52,
	CKPTD_MSG_GC = 53,            /* 1.1 */
	CKPTD_MSG_SHOW_VERSION = 54,  /* 1.1 */
	CKPTD_MSG_VERSION_DETAIL = 55, /* 1.1 */
	CKPTD_MSG_VERIFY = 56,        /* 1.1 */
	CKPTD_MSG_VERIFY_REPLY = 57,  /* 1.1 */
	CKPTD_MSG_LOCATION = 58,      /* 1.1 */
	CKPTD_MSG_STEP_STATS = 59,    /* 1.1 */
	CKPTD_MSG_STEP_STATS_REPLY = 60, /* 1.1 */
	CKPTD_MSG_GOODPUT = 61,       /* 1.1 */
	CKPTD_MSG_GOODPUT_REPLY = 62, /* 1.1 */
	CKPTD_MSG_INTERVAL_NOTICE = 63, /* 1.1 */
	CKPTD_MSG_AGENT_HELLO = 64,
	CKPTD_MSG_AGENT_INVENTORY = 65,
	CKPTD_MSG_COPIES_GONE = 66,   /* 1.1 */
	CKPTD_MSG_PARTNERS = 67,      /* 1.2 */
	CKPTD_MSG_PEER_LEASE = 68,    /* 1.2 */
	CKPTD_MSG_PEER_GRANT = 69,    /* 1.2 */
	CKPTD_MSG_PEER_COMMIT = 70,   /* 1.2 */
	CKPTD_MSG_PREEMPT = 71,       /* 1.2 */
	CKPTD_MSG_EMERGENCY = 72,     /* 1.2 */
	CKPTD_MSG_HEARTBEAT = 73,     /* 1.3 */
	/* 1.4: a persistent straggler's node evidence (80-83) */
	CKPTD_MSG_EVIDENCE_REQUEST = 80,
	CKPTD_MSG_NODE_EVIDENCE = 81,
	CKPTD_MSG_STRAGGLERS = 82,
	CKPTD_MSG_STRAGGLERS_REPLY = 83,
	/* 1.5: membership and failure decisions (90-93) */
	CKPTD_MSG_RANKS = 90,
	CKPTD_MSG_RANK_LEAVE = 91,
	CKPTD_MSG_EVENTS = 92,
	CKPTD_MSG_EVENT = 93,
	/* 1.5: the peer tier's rs:K+M encode */
	CKPTD_MSG_EC_PLAN = 96,
	CKPTD_MSG_EC_DONE = 97,
	/* 1.6: spares and the recovery timeline (100-103) */
	CKPTD_MSG_SPARE_ASSIGN = 100,
	CKPTD_MSG_SPARE_DONE = 101,
	CKPTD_MSG_RECOVERIES = 102,
	CKPTD_MSG_RECOVERIES_REPLY = 103,
} ckptd_msg_type;

/* Field wire types. */
enum {
	CKPTD_WIRE_U32 = 1,
	CKPTD_WIRE_U64 = 2,
	CKPTD_WIRE_STR = 3,
	CKPTD_WIRE_BYTES = 4,
	CKPTD_WIRE_LIST = 5,
};

/* Field tags: one global registry, a tag means the same in every message. */
enum {
	CKPTD_TAG_CODE = 1, CKPTD_TAG_TEXT, CKPTD_TAG_PEER_VERSION, CKPTD_TAG_OWN_VERSION,
	CKPTD_TAG_ROLE, CKPTD_TAG_JOB, CKPTD_TAG_NONCE, CKPTD_TAG_MAC,
	CKPTD_TAG_RANK, CKPTD_TAG_WORLD_SIZE, CKPTD_TAG_PID, CKPTD_TAG_LINEAGE,
	CKPTD_TAG_VERSION, CKPTD_TAG_MODE, CKPTD_TAG_BYTES, CKPTD_TAG_SEGMENT_ID,
	CKPTD_TAG_OFFSET, CKPTD_TAG_TIER, CKPTD_TAG_TIERS, CKPTD_TAG_CHECKSUM,
	CKPTD_TAG_START, CKPTD_TAG_LIMIT, CKPTD_TAG_MORE, CKPTD_TAG_ENTRIES,
	CKPTD_TAG_STATE, CKPTD_TAG_SHARDS_DONE, CKPTD_TAG_NODE, CKPTD_TAG_ADDRESS,
	CKPTD_TAG_DOMAIN, CKPTD_TAG_POOL_BYTES, CKPTD_TAG_POOL_USED, CKPTD_TAG_ROLES,
	CKPTD_TAG_JOBS, CKPTD_TAG_VERSIONS, CKPTD_TAG_SEQ, CKPTD_TAG_FINAL,
	CKPTD_TAG_COMMITTED, CKPTD_TAG_STEP, CKPTD_TAG_STEP_NS,
	/* 1.1 */
	CKPTD_TAG_ROOT, CKPTD_TAG_COUNT, CKPTD_TAG_KEEP_DRAM, CKPTD_TAG_KEEP_DISK,
	CKPTD_TAG_KEEP_EVERY, CKPTD_TAG_POLICY, CKPTD_TAG_RESTORABLE, CKPTD_TAG_TIER_STATS,
	/* 1.1, later: optional timings of SHARD_DONE */
	CKPTD_TAG_STALL_NS, CKPTD_TAG_DURABLE_NS,
	CKPTD_TAG_RESTORE_NS, CKPTD_TAG_USEFUL_NS, CKPTD_TAG_RECOMPUTE_NS, CKPTD_TAG_DOWN_NS, CKPTD_TAG_WALL_NS,
	CKPTD_TAG_FAILURES, CKPTD_TAG_BUCKET_NS, CKPTD_TAG_INTERVAL_STEPS, CKPTD_TAG_INTERVAL_NS, CKPTD_TAG_MTBF_NS,
	CKPTD_TAG_COST_NS, CKPTD_TAG_SAVES, CKPTD_TAG_RESTORE_TIER, CKPTD_TAG_ERRORS,
	/* 1.2: the peer-DRAM tier */
	CKPTD_TAG_PEER_BYTES, CKPTD_TAG_REPLICAS, CKPTD_TAG_FABRIC_ADDR, CKPTD_TAG_FABRIC_ADDR_LEN,
	CKPTD_TAG_KEY, CKPTD_TAG_BASE, CKPTD_TAG_PROVIDER, CKPTD_TAG_PEER_SKIPS,
	/* 1.2: preemption */
	CKPTD_TAG_SOURCE, CKPTD_TAG_DEADLINE_NS, CKPTD_TAG_FABRIC_ERRORS,
	/* 1.3, later: REGISTER_RANK's OK says how long a segment request may wait */
	CKPTD_TAG_WAIT_MS,
	/* 1.4: node evidence of a straggler (tags 96 and up) */
	CKPTD_TAG_FASTEST_NS = 96, CKPTD_TAG_WINDOW_NS, CKPTD_TAG_WINDOWS, CKPTD_TAG_FLAGS,
	CKPTD_TAG_STEAL_PM, CKPTD_TAG_IOWAIT_PM, CKPTD_TAG_NR_PERIODS, CKPTD_TAG_NR_THROTTLED,
	CKPTD_TAG_THROTTLED_US, CKPTD_TAG_PSI_CPU_SOME, CKPTD_TAG_PSI_MEM_SOME, CKPTD_TAG_PSI_MEM_FULL,
	CKPTD_TAG_PSI_IO_SOME, CKPTD_TAG_PSI_IO_FULL, CKPTD_TAG_DISK_AWAIT_US, CKPTD_TAG_DISK,
	CKPTD_TAG_OOM_KILLS, CKPTD_TAG_HW_ERRORS, CKPTD_TAG_KMSG, CKPTD_TAG_TIME_NS,
	CKPTD_TAG_VERDICT,
	/* 1.4: the peer tier's rs:K+M groups (tags 160 and up) */
	CKPTD_TAG_HOST_DOMAIN = 160, CKPTD_TAG_SWITCH_DOMAIN, CKPTD_TAG_POWER_DOMAIN, CKPTD_TAG_SCHEME,
	CKPTD_TAG_GROUPS, CKPTD_TAG_MEMBERS, CKPTD_TAG_GROUP, CKPTD_TAG_LOST, CKPTD_TAG_LOSSES_LEFT,
	CKPTD_TAG_UNGROUPED,
	/* 1.5: the rs:K+M encode (after UNGROUPED: 170 and up) */
	CKPTD_TAG_EC_K, CKPTD_TAG_EC_M, CKPTD_TAG_MEMBER, CKPTD_TAG_INSTANCE, CKPTD_TAG_NODES,
	/* 1.5: membership and failure decisions (tags 128 and up) */
	CKPTD_TAG_EPOCH = 128, CKPTD_TAG_KIND, CKPTD_TAG_FOLLOW, CKPTD_TAG_BEAT_MS, CKPTD_TAG_SILENT_NS,
	CKPTD_TAG_EPOCHS, CKPTD_TAG_RANKS,
	/* 1.6: spares and the recovery timeline (tags 192 and up) */
	CKPTD_TAG_SPARE = 192, CKPTD_TAG_SPARE_NODE, CKPTD_TAG_RECOVERIES, CKPTD_TAG_FAILED_NS, CKPTD_TAG_DETECTED_NS,
	CKPTD_TAG_CHOSEN_NS, CKPTD_TAG_READY_NS, CKPTD_TAG_REGISTERED_NS, CKPTD_TAG_RESTORED_NS, CKPTD_TAG_FIRST_STEP_NS,
	CKPTD_TAG_PROTECTED_NS, CKPTD_TAG_GONE,
};

/* GC.keep_dram / keep_disk: no limit. */
#define CKPTD_KEEP_ALL UINT32_MAX

/* Who opens a connection (HELLO.role). */
enum {
	CKPTD_ROLE_RANK = 1,  /* a training rank to its node's agent; job required */
	CKPTD_ROLE_AGENT = 2, /* an agent to the coordinator; cluster scope, no job */
	CKPTD_ROLE_CLI = 3,   /* the ckpt tool; a job, or cluster scope */
};

/* What a daemon process is (STATUS_REPLY.roles, a mask). */
enum { CKPTD_SERVES_AGENT = 1u << 0, CKPTD_SERVES_COORDINATOR = 1u << 1 };

/* SEGMENT_REQUEST.mode */
enum {
	CKPTD_SEG_WRITE = 1, /* a new segment for a shard about to be saved */
	CKPTD_SEG_READ = 2,  /* the segment holding a saved shard, for restore */
	CKPTD_SEG_LOCATE = 3, /* 1.1: where this node holds a shard (LOCATION), no segment */
	CKPTD_SEG_PEER_READ = 4, /* 1.2, to a partner: its PEER_MEM copy of a shard (PEER_GRANT) */
	CKPTD_SEG_PARTNERS = 5,  /* 1.2, to the own agent: where to replicate (PARTNERS) */
	CKPTD_SEG_WHERE = 6,     /* 1.2, to the own agent, passed on to the coordinator:
	                          * the nodes holding a live PEER_MEM copy of a shard (PARTNERS) */
	CKPTD_SEG_COPIES = 7,    /* 1.3, to the own agent, passed on to the coordinator:
	                          * every copy of a shard at every tier, with its node's
	                          * state (PARTNERS with TIER and STATE) */
	CKPTD_SEG_PARTNER_COPY = 8, /* 1.3, the tool to an agent: the PEER_MEM copy this node
	                          * holds of another node's shard, as SEGMENT_GRANT with a
	                          * sealed memfd of that shard alone (SEGMENT_ID 0) */
	CKPTD_SEG_EC_READ = 9,   /* 1.5, an rs parity holder to a data owner's agent: its
	                          * LOCAL_MEM copy of a shard, pinned and registered for
	                          * remote reads (PEER_GRANT; SEGMENT_RELEASE ends it) */
	CKPTD_SEG_EC_PARITY = 10, /* 1.5, a rebuilding agent to an rs member's: its parity
	                          * rows of (job, version) for group RANK, pinned (PEER_GRANT:
	                          * the rows, then their block checksums) */
	CKPTD_SEG_EC_WHERE = 11,  /* 1.5, an agent to the coordinator: the rs plan protecting
	                          * (job, version, rank), answered by EC_PLAN (MEMBER: the
	                          * rank's member) or ERROR NOT_FOUND */
};

/* Agent state in STATUS_REPLY entries. */
enum {
	CKPTD_AGENT_UP = 1,
	CKPTD_AGENT_DOWN = 2,
	CKPTD_AGENT_DEGRADED = 3, /* 1.3: connected, but its heartbeats are late */
};

/* ERROR.code. Numbers are never reused. */
enum {
	CKPTD_ERR_MALFORMED = 1,   /* the frame could not be decoded */
	CKPTD_ERR_VERSION = 2,     /* protocol major version not supported */
	CKPTD_ERR_AUTH = 3,        /* handshake failed */
	CKPTD_ERR_DENIED = 4,      /* authenticated, but not for this job/operation */
	CKPTD_ERR_NOT_FOUND = 5,   /* no such job, version or segment */
	CKPTD_ERR_NO_SPACE = 6,    /* pool full after eviction */
	CKPTD_ERR_TOO_BIG = 7,     /* frame over the size limit */
	CKPTD_ERR_TIMEOUT = 8,     /* a frame or the handshake took too long */
	CKPTD_ERR_UNSUPPORTED = 9, /* message type unknown to the receiver */
	CKPTD_ERR_STATE = 10,      /* message not valid at this point */
	CKPTD_ERR_INTERNAL = 11,   /* the daemon failed (details in its log) */
	CKPTD_ERR_BUSY = 12,       /* try again later */
};

/* ---------------------------------------------------------------- messages */

/* Strings are NUL-terminated in fixed arrays; on the wire they carry no NUL.
 * Optional fields are 0 / "" when absent, and are not sent when 0 / "". */

typedef struct ckptd_error {
	uint32_t code;                   /* CKPTD_ERR_* */
	char text[CKPTD_TEXT_MAX + 1];   /* printable ASCII, for humans; optional */
	uint32_t peer_version;           /* optional: the version the peer sent */
	uint32_t own_version;            /* optional: the sender's version */
} ckptd_error;

typedef struct ckptd_ok {
	uint64_t version; /* optional: the checkpoint version acknowledged */
	uint32_t count;   /* optional (1.1): how many things the request touched */
	char address[CKPTD_ADDR_MAX + 1]; /* optional (1.3), answering REGISTER_RANK: the agent's
	                                   * --listen host:port; its host is where the rank's
	                                   * fabric endpoint binds (the peer tier) */
	uint32_t wait_ms; /* optional (1.3, later), answering REGISTER_RANK: the agent's
	                   * --segment-wait, the longest it holds a SEGMENT_REQUEST
	                   * before answering; 0: not said (CKPTD_SEGMENT_WAIT_DEFAULT_MS) */
} ckptd_ok;

/* An agent's --segment-wait: its default (assumed by a rank whose agent
 * does not say), and its most (a rank waits at most this long plus a call's
 * own time for a SEGMENT_REQUEST's answer). */
#define CKPTD_SEGMENT_WAIT_DEFAULT_MS 10000
#define CKPTD_SEGMENT_WAIT_MAX_MS 600000u

typedef struct ckptd_hello {
	uint32_t role;                   /* CKPTD_ROLE_* */
	char job[CKPTD_JOB_MAX + 1];     /* "" = cluster scope */
	uint8_t nonce[CKPTD_NONCE_LEN];  /* client nonce */
} ckptd_hello;

typedef struct ckptd_challenge {
	uint8_t nonce[CKPTD_NONCE_LEN]; /* server nonce */
} ckptd_challenge;

typedef struct ckptd_auth_msg {
	uint8_t mac[CKPTD_MAC_LEN]; /* client's proof */
} ckptd_auth_msg;

typedef struct ckptd_auth_ok {
	uint8_t mac[CKPTD_MAC_LEN]; /* server's proof */
} ckptd_auth_ok;

typedef struct ckptd_register_rank {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t rank;
	uint32_t world_size; /* >= 1, > rank */
	uint32_t pid;
	uint64_t lineage;    /* optional: the run this process belongs to */
	char root[CKPTD_PATH_MAX + 1]; /* optional (1.1): the rank's checkpoint root (its disk tier) */
	uint32_t beat_ms;    /* optional (1.5): the rank heartbeats at least this often while
	                        its link is quiet; 0: it does not (never judged hung) */
} ckptd_register_rank;

typedef struct ckptd_segment_request {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t rank;
	uint32_t mode;  /* CKPTD_SEG_* */
	uint64_t bytes; /* WRITE: > 0, the size wanted; READ: 0 */
} ckptd_segment_request;

typedef struct ckptd_segment_release {
	uint64_t segment_id; /* a READ grant this session holds */
} ckptd_segment_release;

typedef struct ckptd_segment_grant {
	uint64_t segment_id; /* names the memfd that comes with this frame */
	uint64_t offset;     /* where the shard starts in it */
	uint64_t bytes;      /* > 0; offset + bytes does not overflow */
} ckptd_segment_grant;

typedef struct ckptd_shard_done {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t rank;
	uint32_t world_size; /* optional; when sent, > rank */
	uint32_t tier;       /* one ckpt_tier bit */
	uint64_t bytes;
	uint64_t checksum;   /* the shard's footer checksum */
	uint64_t lineage;
	uint64_t stall_ns;   /* optional: how long ckpt_save blocked the trainer */
	uint64_t durable_ns; /* optional: from ckpt_save's call to durability at tier */
	uint32_t tiers;      /* optional (1.5, later): the tiers the rank saves to (its CKPT_TIERS); 0: not said */
} ckptd_shard_done;

typedef struct ckptd_commit_notice {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t tier; /* one ckpt_tier bit */
} ckptd_commit_notice;

typedef struct ckptd_step_report {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t rank;
	uint64_t step;
	uint64_t step_ns; /* wall time of that step (with COUNT: the mean over COUNT steps) */
	uint32_t count;   /* optional (1.1): steps this report sums up, ending at step */
	char node[CKPTD_NAME_MAX + 1]; /* optional (1.1): set by the agent passing it on */
	uint64_t stall_ns;   /* optional (1.1): time ckpt_save blocked within those steps */
	uint64_t restore_ns; /* optional (1.1): time in ckpt_restore since the last report */
	uint32_t saves;      /* optional (1.1): ckpt_save calls those stalls add up over */
	uint32_t restore_tier; /* optional (1.1): the tier the restore read (one bit) */
	uint32_t errors;     /* optional (1.1): saves that failed since the last report */
	uint32_t peer_skips; /* optional (1.2): PEER_MEM copies skipped (partner slow or gone) */
	uint32_t fabric_errors; /* optional (1.2): libfabric transfers that failed (fi_strerror in the rank's log) */
} ckptd_step_report;

/* INTERVAL_NOTICE (1.1): coordinator -> agents -> ranks: save every
 * `every` steps, at the steps from + k * every; the same for every rank. */
typedef struct ckptd_interval_notice {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t every;       /* steps; > 0 */
	uint64_t from;        /* the first step it applies to */
	uint64_t interval_ns; /* optional: the advised time between saves */
} ckptd_interval_notice;

/* GOODPUT (1.1): a job's time accounting, from its step reports. */
typedef struct ckptd_goodput {
	char job[CKPTD_JOB_MAX + 1];
} ckptd_goodput;

/* One slice of the timeline (GOODPUT_REPLY entries). */
typedef struct ckptd_goodput_slice {
	uint64_t start;        /* ns since the job's first report */
	uint64_t useful_ns, stall_ns, restore_ns, recompute_ns, down_ns;
} ckptd_goodput_slice;

typedef struct ckptd_goodput_reply {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t wall_ns;      /* first report to the last */
	uint64_t useful_ns;    /* steps that advanced the job, less stalls */
	uint64_t stall_ns;     /* ckpt_save blocking the trainer */
	uint64_t restore_ns;   /* ckpt_restore */
	uint64_t recompute_ns; /* steps done again after a restart */
	uint64_t down_ns;      /* no rank stepping: restarts, rescheduling */
	uint32_t failures;     /* restarts seen */
	uint64_t step;         /* the furthest step reached */
	uint64_t bucket_ns;    /* optional: width of a timeline slice */
	uint64_t interval_steps; /* optional: the advised checkpoint interval, in steps (0: none yet) */
	uint64_t interval_ns;    /* optional: the same in time */
	uint64_t mtbf_ns;        /* optional: the MTBF the advice used */
	uint64_t cost_ns;        /* optional: the checkpoint cost (mean stall) it used */
	uint32_t count;
	ckptd_goodput_slice *entries;
} ckptd_goodput_reply;

/* STEP_STATS (1.1): the coordinator's view of a job's step times. */
typedef struct ckptd_step_stats {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t start; /* optional: ranks >= start (paging) */
} ckptd_step_stats;

enum { CKPTD_RANK_OK = 1, CKPTD_RANK_STRAGGLER = 2 };
typedef struct ckptd_rank_step {
	uint32_t rank;
	uint64_t step;     /* last step reported */
	uint64_t step_ns;  /* smoothed step time */
	uint32_t state;    /* CKPTD_RANK_* */
	char node[CKPTD_NAME_MAX + 1]; /* optional */
} ckptd_rank_step;

typedef struct ckptd_step_stats_reply {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t more;   /* 1: ask again with start = last rank + 1 */
	uint32_t count;
	ckptd_rank_step *entries;
} ckptd_step_stats_reply;

typedef struct ckptd_list_versions {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t start; /* optional: list versions >= start */
	uint32_t limit; /* optional: at most this many (0: the server's page size) */
} ckptd_list_versions;

typedef struct ckptd_version_info {
	uint64_t version;
	uint32_t state;       /* CKPT_STATE_PENDING..DELETING */
	uint32_t world_size;  /* >= 1 */
	uint32_t shards_done; /* <= world_size */
	uint64_t bytes;
	uint32_t tiers;       /* ckpt_tier mask committed at */
	uint32_t gone;        /* 1.6, optional: 1 = committed once, and a rank's shard has no live copy left
	                         (not deleted: lost with the nodes that held it) */
} ckptd_version_info;

typedef struct ckptd_versions {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t more;  /* 1: ask again with start = last version + 1 */
	uint32_t count; /* <= CKPTD_MAX_LIST */
	ckptd_version_info *entries;
} ckptd_versions;

typedef struct ckptd_delete_version {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t tiers; /* optional (1.1): ckpt_tier mask to delete; 0 = every tier */
} ckptd_delete_version;

/* GC (1.1): run retention for a job now. */
typedef struct ckptd_gc {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t policy;     /* optional: 1 = the keep fields become the job's policy */
	uint32_t keep_dram;  /* policy: DRAM copies of the newest K versions (CKPTD_KEEP_ALL) */
	uint32_t keep_disk;  /* policy: disk copies of the newest M versions (CKPTD_KEEP_ALL) */
	uint64_t keep_every; /* policy: every N-th version's disk copies kept forever; 0 none */
} ckptd_gc;

typedef struct ckptd_show_version {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint64_t start; /* optional: copies of ranks >= start (paging) */
} ckptd_show_version;

/* One copy of one shard (VERSION_DETAIL entries). */
typedef struct ckptd_copy_info {
	uint32_t rank;
	uint32_t tier;   /* one ckpt_tier bit */
	uint32_t state;  /* 1 live, 2 deleting */
	char node[CKPTD_NAME_MAX + 1];
	uint64_t bytes;
	uint64_t checksum;
} ckptd_copy_info;

typedef struct ckptd_version_detail {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t state;       /* CKPT_STATE_* */
	uint32_t world_size;
	uint32_t tiers;       /* committed at */
	uint32_t restorable;  /* optional: 1 if every rank has a live copy */
	uint32_t more;        /* 1: ask again with start = the last entry's rank + 1 */
	uint32_t count;
	ckptd_copy_info *entries;
} ckptd_version_detail;

/* VERIFY (1.1): an agent reads every copy of a version it holds. */
typedef struct ckptd_verify {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
} ckptd_verify;

/* VERIFY_REPLY entries: one copy's result. */
enum {
	CKPTD_VERIFY_OK = 0,      /* every check and every chunk checksum passed */
	CKPTD_VERIFY_CORRUPT = 1, /* a check failed: TEXT names the region and chunk */
	CKPTD_VERIFY_MISSING = 2, /* recorded but not there (file gone, segment evicted) */
	CKPTD_VERIFY_ERROR = 3,   /* could not be read (I/O error, no memory) */
};
typedef struct ckptd_verify_result {
	uint32_t rank;
	uint32_t tier;                 /* one ckpt_tier bit */
	uint32_t code;                 /* CKPTD_VERIFY_* */
	char text[CKPTD_TEXT_MAX + 1]; /* optional: why */
} ckptd_verify_result;

typedef struct ckptd_verify_reply {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t more;  /* 1: another VERIFY_REPLY follows */
	uint32_t count;
	ckptd_verify_result *entries;
} ckptd_verify_reply;

/* LOCATION (1.1): the copies of one shard on this node. */
typedef struct ckptd_location {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t rank;
	uint32_t tiers;                /* held here: LOCAL_MEM, LOCAL_DISK; 0: none */
	char root[CKPTD_PATH_MAX + 1]; /* LOCAL_DISK: the checkpoint root holding the file */
	uint64_t checksum;             /* optional: the footer checksum recorded for the disk copy */
} ckptd_location;

/* COPIES_GONE (1.1): an agent deleted every copy it held of a version at
 * these tiers. */
typedef struct ckptd_copies_gone {
	char node[CKPTD_NAME_MAX + 1];
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t tiers;
} ckptd_copies_gone;

typedef struct ckptd_status {
	char job[CKPTD_JOB_MAX + 1]; /* optional: "" = everything the session may see */
} ckptd_status;

typedef struct ckptd_agent_info {
	char node[CKPTD_NAME_MAX + 1];
	char address[CKPTD_ADDR_MAX + 1];
	char domain[CKPTD_NAME_MAX + 1]; /* optional: failure domain (rack) */
	uint64_t pool_bytes;
	uint64_t pool_used; /* <= pool_bytes */
	uint32_t state;     /* CKPTD_AGENT_* */
} ckptd_agent_info;

/* Versions committed at one tier (STATUS_REPLY.tier_stats, 1.1). */
typedef struct ckptd_tier_stat {
	uint32_t tier;     /* one ckpt_tier bit */
	uint32_t versions; /* versions committed there */
	uint64_t bytes;    /* their bytes, summed */
	uint32_t degraded; /* optional (1.3): nodes serving the tier that are down or silent */
} ckptd_tier_stat;

/* One rs:K+M group of the peer tier (STATUS_REPLY.groups, 1.4). */
typedef struct ckptd_group_info {
	uint32_t group;       /* its id, kept while it exists */
	uint32_t members;     /* K + M */
	uint32_t lost;        /* members down or silent */
	uint32_t losses_left; /* more losses it can take: M - lost, 0 at or past M */
} ckptd_group_info;

/* One member of a group (STATUS_REPLY.members, 1.4), in member order. */
typedef struct ckptd_group_member {
	uint32_t group;
	char node[CKPTD_NAME_MAX + 1];
	uint32_t state; /* CKPTD_AGENT_* */
} ckptd_group_member;

typedef struct ckptd_status_reply {
	char node[CKPTD_NAME_MAX + 1];
	uint32_t roles;      /* CKPTD_SERVES_* mask, not 0 */
	uint64_t pool_bytes; /* optional: this node's pool */
	uint64_t pool_used;  /* optional, <= pool_bytes */
	uint32_t jobs;       /* optional */
	uint32_t versions;   /* optional */
	uint32_t count;      /* agents known (coordinator), <= CKPTD_MAX_LIST */
	ckptd_agent_info *entries;
	uint32_t ntiers;     /* optional (1.1): per tier, versions committed there */
	ckptd_tier_stat *tier_stats;
	/* optional (1.4): the peer tier's scheme, "partner" or "rs:K+M" (a
	 * coordinator's), its groups and their members, and the eligible
	 * agents in no group (too few nodes or failure domains left) */
	char scheme[CKPTD_NAME_MAX + 1];
	uint32_t ungrouped;
	uint32_t ngroups;
	ckptd_group_info *groups;
	uint32_t nmembers;
	ckptd_group_member *members;
	uint32_t nepochs;    /* optional (1.5): per job, its membership epoch and last failure */
	struct ckptd_job_epoch *epochs;
	uint32_t nrecoveries; /* optional (1.6): per job, its newest recovery (the spare, when protected again) */
	struct ckptd_recovery *recoveries;
} ckptd_status_reply;

typedef struct ckptd_agent_hello {
	char node[CKPTD_NAME_MAX + 1];
	char address[CKPTD_ADDR_MAX + 1]; /* where partners and the CLI reach it */
	char domain[CKPTD_NAME_MAX + 1];  /* optional failure domain */
	uint64_t pool_bytes;
	uint64_t peer_bytes;              /* optional (1.2): its pool for partners' replicas; 0: none */
	/* optional (1.4): more failure domains, for rs:K+M groups: the
	 * physical host, the switch, the power feed */
	char host[CKPTD_NAME_MAX + 1];
	char sw[CKPTD_NAME_MAX + 1];
	char power[CKPTD_NAME_MAX + 1];
	uint32_t beat_ms; /* optional (1.5): it heartbeats this often (--heartbeat-interval) */
	uint32_t spare;   /* optional (1.6): 1: a spare (--spare), holding no ranks until told to take a lost node's */
} ckptd_agent_hello;

/* PARTNERS (1.2). Coordinator -> agent: the nodes this node's ranks
 * replicate to, best first (sent again whenever placement changes).
 * Agent -> rank: the same list (SEG_PARTNERS), or the nodes holding a live
 * PEER_MEM copy of (job, version, rank) (SEG_WHERE). */
typedef struct ckptd_partner {
	char node[CKPTD_NAME_MAX + 1];
	char address[CKPTD_ADDR_MAX + 1]; /* the partner agent's control address, host:port */
	char domain[CKPTD_NAME_MAX + 1];  /* optional */
	uint32_t tier;                    /* optional (1.3, SEG_COPIES): the copy's tier, one bit */
	uint32_t state;                   /* optional (1.3, SEG_COPIES): CKPTD_AGENT_UP/DOWN/DEGRADED */
} ckptd_partner;

typedef struct ckptd_partners {
	char job[CKPTD_JOB_MAX + 1];   /* optional: SEG_WHERE's shard */
	uint64_t version;              /* optional */
	uint32_t rank;                 /* optional */
	uint32_t replicas;             /* optional: copies wanted (the replication factor) */
	uint32_t count;
	ckptd_partner *entries;
	/* optional (1.5, SEG_PARTNERS): "rs:K+M" when this node's ranks are
	 * protected by its rs group instead (then no entries): a rank's part
	 * of PEER_MEM is done with its LOCAL_MEM copy */
	char scheme[CKPTD_NAME_MAX + 1];
} ckptd_partners;

/* PEER_LEASE (1.2), rank -> partner agent: room for this rank's shard image
 * of version in the partner's peer pool. */
typedef struct ckptd_peer_lease {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t rank;
	uint32_t world_size; /* > rank */
	uint64_t bytes;      /* > 0: the whole image */
	uint64_t lineage;
	char node[CKPTD_NAME_MAX + 1]; /* optional: the rank's own node */
} ckptd_peer_lease;

/* PEER_GRANT (1.2), partner agent -> rank: where to fi_write (lease) or
 * fi_read (SEG_PEER_READ) the image: the remote address of its byte i is
 * base + offset + i under key, at the partner's fabric endpoint. */
typedef struct ckptd_peer_grant {
	uint64_t segment_id; /* the slot: PEER_COMMIT / SEGMENT_RELEASE name it */
	uint64_t offset;     /* the slot's offset in the registered region */
	uint64_t bytes;      /* > 0 */
	uint64_t key;
	uint64_t base;
	uint8_t fabric_addr[CKPTD_FABADDR_MAX];
	uint32_t fabric_addr_len; /* 1..CKPTD_FABADDR_MAX */
	char provider[CKPTD_PROVIDER_MAX + 1]; /* the partner's provider, e.g. "tcp;ofi_rxm" */
	uint64_t checksum;   /* optional, reads: the footer checksum recorded */
} ckptd_peer_grant;

/* Where a preemption notice came from (PREEMPT.source). */
enum {
	CKPTD_NOTICE_SRC_AWS = 1, CKPTD_NOTICE_SRC_GCP = 2, CKPTD_NOTICE_SRC_AZURE = 3, CKPTD_NOTICE_SRC_FILE = 4,
	CKPTD_NOTICE_SRC_SIGNAL = 5, /* a rank got SIGTERM / SIGUSR1 (ckpt_preempt_install) */
	CKPTD_NOTICE_SRC_CLI = 6,    /* ckpt preempt */
	CKPTD_NOTICE_SRC_STRAGGLER = 7, /* 1.6: the coordinator's own, replacing a persistent straggler's node */
};

/* PREEMPT (1.2): a node (or a job) is about to go. Rank or tool -> agent
 * -> coordinator; agent (its pollers) -> coordinator. */
typedef struct ckptd_preempt {
	char job[CKPTD_JOB_MAX + 1];   /* optional: "" = every job with ranks on node */
	char node[CKPTD_NAME_MAX + 1]; /* optional: the node going away (an agent fills in its own) */
	uint64_t deadline_ns;          /* optional: when, CLOCK_REALTIME ns; 0: the coordinator's default */
	uint32_t source;               /* CKPTD_NOTICE_SRC_* */
	char text[CKPTD_TEXT_MAX + 1]; /* optional: what the source said */
} ckptd_preempt;

/* HEARTBEAT (1.3): agent -> coordinator and rank -> agent, when the link
 * has been quiet for a while; answered by OK. Either side takes a peer it
 * has not heard from (any frame) within its heartbeat timeout for silent:
 * a partition that TCP, carrying an idle connection, would never report. */
typedef struct ckptd_heartbeat {
	uint32_t seq; /* optional: the sender's count, for logs */
} ckptd_heartbeat;

/* EMERGENCY (1.2): coordinator -> agents -> the job's ranks: every rank
 * saves at `step`, then leaves once the version is COMMITTED at `tier`,
 * or when the deadline is close. */
typedef struct ckptd_emergency {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t step;        /* > 0 */
	uint64_t deadline_ns; /* CLOCK_REALTIME ns */
	uint32_t tier;        /* optional: one tier bit off the noticed nodes; 0: none can make it: leave at the deadline */
	char node[CKPTD_NAME_MAX + 1]; /* optional: a node noticed (logs) */
	uint32_t final;       /* optional: 1: the version is safe (every rank's shard has a copy off
	                         the noticed nodes): leave now */
} ckptd_emergency;

/* PEER_COMMIT (1.2), rank -> partner agent: the image is written; the
 * partner checks it (structure, footer checksum, every chunk), records it
 * and reports SHARD_DONE(PEER_MEM) to the coordinator, then answers OK. */
typedef struct ckptd_peer_commit {
	uint64_t segment_id;
	uint64_t bytes;
	uint64_t checksum; /* the image's footer checksum */
} ckptd_peer_commit;

typedef struct ckptd_held_shard {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t rank;
	uint32_t world_size; /* optional; when sent, > rank */
	uint32_t tiers;      /* ckpt_tier mask this agent holds it in, not 0 */
	uint32_t committed;  /* optional: tiers the version was announced committed at */
	uint64_t bytes;
	uint64_t checksum;   /* footer checksum */
	uint64_t lineage;    /* optional */
} ckptd_held_shard;

typedef struct ckptd_agent_inventory {
	char node[CKPTD_NAME_MAX + 1];
	uint32_t seq;   /* batch number, from 0 */
	uint32_t final; /* 1 on the last batch */
	uint32_t count; /* <= CKPTD_MAX_LIST */
	ckptd_held_shard *entries;
} ckptd_agent_inventory;

/* One message. `type` says which member of `u` is valid. */
/* EVIDENCE_REQUEST (1.4), coordinator to the agent of a persistent
 * straggler's node: what the coordinator saw, for the answer to repeat. */
typedef struct ckptd_evidence_request {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t rank;
	uint32_t windows;    /* consecutive judgements it was slow in */
	uint64_t step_ns;    /* its smoothed step time */
	uint64_t fastest_ns; /* the fastest rank's */
	uint64_t window_ns;  /* how far back the node's figures should reach */
} ckptd_evidence_request;

/* What the evidence says was available (flags). */
enum {
	CKPTD_EV_CPU = 1u << 0,     /* /proc/stat: steal, iowait */
	CKPTD_EV_CGROUP = 1u << 1,  /* the rank's cgroup cpu.stat: throttling */
	CKPTD_EV_PSI = 1u << 2,     /* /proc/pressure */
	CKPTD_EV_DISK = 1u << 3,    /* /proc/diskstats */
	CKPTD_EV_KMSG = 1u << 4,    /* /dev/kmsg */
	CKPTD_EV_STEPS = 1u << 5,   /* the rank's step times as the agent saw them */
};

/* NODE_EVIDENCE (1.4), the agent's answer (and an entry of
 * STRAGGLERS_REPLY): the rank's node over the last window_ns. PSI figures
 * are avg10 in hundredths of a percent; steal and iowait per mille of the
 * node's CPU time. text: one printable line of all of it, with the rank's
 * last step times; verdict: the likely cause in a few words, or "". */
typedef struct ckptd_node_evidence {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t rank;
	char node[CKPTD_NAME_MAX + 1];
	uint32_t windows;
	uint64_t step_ns, fastest_ns, window_ns;
	uint64_t time_ns;    /* wall clock when gathered */
	uint32_t flags;      /* CKPTD_EV_* */
	uint32_t steal_pm, iowait_pm;
	uint64_t nr_periods, nr_throttled, throttled_us;
	uint32_t psi_cpu_some, psi_mem_some, psi_mem_full, psi_io_some, psi_io_full;
	uint32_t disk_await_us;
	char disk[32];
	uint32_t oom_kills, hw_errors; /* kernel log records within the window (at least an hour) */
	char kmsg[161];      /* the newest of them */
	char verdict[97];
	char text[CKPTD_TEXT_MAX + 1];
} ckptd_node_evidence;

/* STRAGGLERS (1.4): a job's persistent stragglers and their evidence. */
typedef struct ckptd_straggler_query {
	char job[CKPTD_JOB_MAX + 1];
} ckptd_straggler_query;
typedef struct ckptd_stragglers_reply {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t count;
	ckptd_node_evidence *entries;
} ckptd_stragglers_reply;

/* ---- 1.5: membership and failure decisions ---- */

/* A rank's state in RANKS and EVENT entries. */
enum {
	CKPTD_MEMBER_UP = 1,   /* registered, heard within its heartbeats */
	CKPTD_MEMBER_LEFT = 2, /* closed its context on purpose (RANK_LEAVE) */
	CKPTD_MEMBER_DIED = 3, /* its process exited, or its connection dropped, without RANK_LEAVE */
	CKPTD_MEMBER_HUNG = 4, /* silent past the agent's --hang-timeout while its process exists */
};

/* What a failure decision says failed (EVENT.kind). */
enum {
	CKPTD_FAIL_RANK_DIED = 1,
	CKPTD_FAIL_NODE_LOST = 2, /* its agent's connection closed, or it was silent past --failure-timeout */
	CKPTD_FAIL_RANK_HUNG = 3,
	/* 1.6: what follows a failure (EVENT.kind only; EPOCH the failure's) */
	CKPTD_FAIL_SPARE_CHOSEN = 4, /* NODE: the spare told to take the lost node's ranks */
	CKPTD_FAIL_SPARE_READY = 5,  /* NODE: the spare; CODE 0: their state is in its DRAM, else why not */
	CKPTD_FAIL_NO_SPARE = 6,     /* NODE: the lost node; no spare could take it */
	CKPTD_FAIL_RECOVERED = 7,    /* NODE: the failed node; its ranks took a step again (the timeline) */
	/* 1.6, a decision (a new epoch) as 1-3: a persistent straggler's node
	 * replaced (--replace-stragglers), once its emergency checkpoint is
	 * safe off the node; ENTRIES: the job's ranks there; TEXT: the rank
	 * and its node's evidence */
	CKPTD_FAIL_STRAGGLER = 8,
};

typedef struct ckptd_member {
	uint32_t rank;
	uint32_t pid;       /* optional: the process, as the agent sees it */
	uint32_t state;     /* CKPTD_MEMBER_* */
	uint64_t silent_ns; /* optional: how long it had been silent (HUNG, DIED) */
} ckptd_member;

/* RANKS (1.5), agent -> coordinator: every rank of job this node's agent
 * serves, each with its state; sent whole whenever one changes and after
 * every AGENT_HELLO. A rank that died or left is listed once more with that
 * state, then no longer. */
typedef struct ckptd_ranks {
	char job[CKPTD_JOB_MAX + 1];
	char node[CKPTD_NAME_MAX + 1];
	uint32_t count; /* <= CKPTD_MAX_LIST */
	ckptd_member *entries;
} ckptd_ranks;

/* RANK_LEAVE (1.5), rank -> agent: this rank closes its context on purpose
 * (its connection closing after this is no failure). Answered OK. */
typedef struct ckptd_rank_leave {
	char job[CKPTD_JOB_MAX + 1];
} ckptd_rank_leave;

/* EVENTS (1.5), tool -> coordinator: the failure decisions kept (the newest
 * first-come, oldest first), as EVENT messages, then OK(count); with follow,
 * every later decision as an EVENT too, until the tool disconnects. */
typedef struct ckptd_events {
	char job[CKPTD_JOB_MAX + 1]; /* optional: this job's only; "" every job (a job session: its own) */
	uint32_t follow;             /* optional: 1 keep sending */
} ckptd_events;

/* EVENT (1.5), coordinator -> tool and agents: one failure decision, a new
 * membership epoch of job ("" for a node that served no job's ranks). */
typedef struct ckptd_event {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t epoch;     /* > 0, increasing per job */
	uint32_t kind;      /* CKPTD_FAIL_* */
	char node[CKPTD_NAME_MAX + 1];
	uint64_t time_ns;   /* CLOCK_REALTIME ns of the decision */
	uint64_t silent_ns; /* optional: from the last sign of life to the decision */
	char text[CKPTD_TEXT_MAX + 1]; /* optional: why, for humans */
	uint32_t count;     /* the ranks it names, <= CKPTD_MAX_LIST */
	ckptd_member *entries;
} ckptd_event;

/* A STATUS_REPLY entry (1.5): a job's epoch and its newest decision. */
typedef struct ckptd_job_epoch {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t epoch;
	uint32_t kind;
	char node[CKPTD_NAME_MAX + 1];
	uint64_t time_ns;
	char ranks[CKPTD_TEXT_MAX + 1]; /* the ranks, "0,2-5", for display (cut at CKPTD_TEXT_MAX with "...") */
} ckptd_job_epoch;

/* ---- 1.6: spares and the recovery timeline ---- */

/* SPARE_ASSIGN (1.6), coordinator -> a spare's agent: take over the ranks
 * of job that ran on the lost node: pull their newest committed version
 * into this node's DRAM now, before they are relaunched here. Answered,
 * once every rank's pull ended, by SPARE_DONE. */
typedef struct ckptd_spare_rank {
	uint32_t rank;
	uint64_t bytes; /* optional: its shard image of the version, as recorded */
} ckptd_spare_rank;
typedef struct ckptd_spare_assign {
	char job[CKPTD_JOB_MAX + 1];
	char node[CKPTD_NAME_MAX + 1]; /* the lost node */
	uint64_t epoch;                /* the failure's membership epoch, > 0 */
	uint64_t version;              /* optional: the job's newest committed version (0: none known: ask) */
	uint32_t count;                /* 1..CKPTD_MAX_LIST */
	ckptd_spare_rank *entries;
} ckptd_spare_assign;

/* SPARE_DONE (1.6), the spare's agent -> coordinator: the pulls of an
 * assignment ended; code 0: every rank's state is in this node's DRAM. */
typedef struct ckptd_spare_done {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t epoch;
	uint64_t version;  /* optional: the version pulled */
	uint32_t code;     /* optional: 0 every rank pulled, else an errno value */
	uint32_t count;    /* optional: ranks now in this node's DRAM */
	uint64_t bytes;    /* optional: their bytes */
	char text[CKPTD_TEXT_MAX + 1]; /* optional: where each came from, or why not */
} ckptd_spare_done;

/* RECOVERIES (1.6), tool -> coordinator: the kept recoveries of a job
 * (every job's: ""), answered by RECOVERIES_REPLY. */
typedef struct ckptd_recoveries {
	char job[CKPTD_JOB_MAX + 1];
} ckptd_recoveries;

/* One recovery: a failure decision and what followed, each phase's end as
 * CLOCK_REALTIME ns (0: not reached, or not part of this recovery). */
typedef struct ckptd_recovery {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t epoch;                      /* the failure's */
	uint32_t kind;                       /* CKPTD_FAIL_RANK_DIED..RANK_HUNG */
	char node[CKPTD_NAME_MAX + 1];       /* the failed node */
	char spare[CKPTD_NAME_MAX + 1];      /* optional: the spare that took it */
	char ranks[CKPTD_TEXT_MAX + 1];      /* optional: its ranks, "0,2-5" */
	uint64_t failed_ns;                  /* the last sign of life of what failed */
	uint64_t detected_ns;                /* the decision */
	uint64_t chosen_ns, ready_ns;        /* optional: the spare chosen; its state in the spare's DRAM */
	uint64_t registered_ns, restored_ns; /* optional: every rank registered again; every rank restored */
	uint64_t first_step_ns;              /* optional: every rank's first step reported */
	uint64_t protected_ns;               /* optional: a newer version committed at PEER_MEM */
	uint64_t bytes;                      /* optional: state pulled onto the spare */
	uint32_t code;                       /* optional: the spare's pull failed (errno value) or none was free */
	char text[CKPTD_TEXT_MAX + 1];       /* optional: why, for humans */
} ckptd_recovery;

typedef struct ckptd_recoveries_reply {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t count;
	ckptd_recovery *entries;
} ckptd_recoveries_reply;
/* EC_PLAN (1.5): coordinator -> every member of an rs:K+M group, once a
 * version is committed at LOCAL_MEM: the version's instances
 * (ckptd/coord/ecplan.h) and who holds what. The recipient, member
 * `member`, builds the M parity rows it holds of every instance from the
 * other members' slices, read over the fabric (SEG_EC_READ), and answers
 * EC_DONE. */
typedef struct ckptd_ec_node {
	uint32_t member;                  /* < k + m */
	char node[CKPTD_NAME_MAX + 1];
	char address[CKPTD_ADDR_MAX + 1]; /* its agent's control address */
} ckptd_ec_node;
typedef struct ckptd_ec_src {
	uint32_t instance;
	uint32_t member;
	uint32_t rank;
	uint64_t bytes; /* the shard image, > 0 */
} ckptd_ec_src;
typedef struct ckptd_ec_plan {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t group;
	uint32_t k, m;
	uint32_t member;  /* the recipient's */
	uint32_t nnodes;  /* k + m, every member once */
	ckptd_ec_node *nodes;
	uint32_t count;   /* the non-empty members of every instance */
	ckptd_ec_src *entries;
} ckptd_ec_plan;

/* EC_DONE (1.5): a member -> the coordinator: its parity rows of the
 * version are complete (code 0), or could not be made (text says why,
 * naming the member that failed). */
typedef struct ckptd_ec_done {
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint32_t group;
	uint32_t code;    /* 0 done, else a negative errno's absolute value */
	uint64_t bytes;   /* parity bytes it holds for the version */
	char text[CKPTD_TEXT_MAX + 1];
} ckptd_ec_done;

typedef struct ckptd_msg {
	uint16_t type;  /* ckptd_msg_type */
	uint8_t major;  /* decoded: from the header; encoder: ignored */
	uint8_t minor;  /* decoded: from the header; encoder: ignored */
	uint8_t owned;  /* set by the decoder: list arrays belong to the message */
	union {
		ckptd_error error;
		ckptd_ok ok;
		ckptd_hello hello;
		ckptd_challenge challenge;
		ckptd_auth_msg auth;
		ckptd_auth_ok auth_ok;
		ckptd_register_rank register_rank;
		ckptd_segment_request segment_request;
		ckptd_segment_grant segment_grant;
		ckptd_shard_done shard_done;
		ckptd_commit_notice commit_notice;
		ckptd_step_report step_report;
		ckptd_list_versions list_versions;
		ckptd_versions versions;
		ckptd_delete_version delete_version;
		ckptd_status status;
		ckptd_status_reply status_reply;
		ckptd_agent_hello agent_hello;
		ckptd_agent_inventory agent_inventory;
		ckptd_segment_release segment_release;
		ckptd_gc gc;
		ckptd_show_version show_version;
		ckptd_version_detail version_detail;
		ckptd_copies_gone copies_gone;
		ckptd_verify verify;
		ckptd_verify_reply verify_reply;
		ckptd_location location;
		ckptd_step_stats step_stats;
		ckptd_step_stats_reply step_stats_reply;
		ckptd_goodput goodput;
		ckptd_goodput_reply goodput_reply;
		ckptd_interval_notice interval_notice;
		ckptd_partners partners;
		ckptd_peer_lease peer_lease;
		ckptd_peer_grant peer_grant;
		ckptd_peer_commit peer_commit;
		ckptd_preempt preempt;
		ckptd_emergency emergency;
		ckptd_heartbeat heartbeat;
		ckptd_evidence_request evidence_request;
		ckptd_node_evidence node_evidence;
		ckptd_straggler_query stragglers;
		ckptd_stragglers_reply stragglers_reply;
		ckptd_ranks ranks;
		ckptd_rank_leave rank_leave;
		ckptd_events events;
		ckptd_event event;
		ckptd_ec_plan ec_plan;
		ckptd_ec_done ec_done;
		ckptd_spare_assign spare_assign;
		ckptd_spare_done spare_done;
		ckptd_recoveries recoveries;
		ckptd_recoveries_reply recoveries_reply;
	} u;
} ckptd_msg;

/* The fixed frame header. */
typedef struct ckptd_frame_header {
	uint8_t major;
	uint8_t minor;
	uint16_t type;
	uint32_t flags;
	uint32_t length; /* payload bytes after the header */
} ckptd_frame_header;

/* ---------------------------------------------------------------- functions */

/* Name of a message type ("SHARD_DONE"), or NULL if the type is unknown. */
const char *ckptd_msg_name(uint16_t type);

/* The message types of the protocol, in table order: the i-th, or 0 past
 * the last (for iterating the table, as tests do). */
uint16_t ckptd_msg_type_at(size_t i);

/* Job scope, a property of the message table: every message whose payload
 * carries a job (a top-level job field) names, from a session authenticated
 * for a job, that job and no other; a cluster-scope session (job "") may
 * name any. STATUS may also leave it empty, asking about the session's own.
 * The daemon checks this once, before any handler runs.
 *
 * The job field of m, or NULL when its type carries none. */
const char *ckptd_msg_job(const ckptd_msg *m);
char *ckptd_msg_job_mut(ckptd_msg *m);
/* 1 if a session of session_job ("": cluster scope) may send m, else 0. */
int ckptd_msg_job_allowed(const ckptd_msg *m, const char *session_job);

/* Decodes a frame header from the first CKPTD_HEADER_LEN bytes of buf.
 * Checks only what the header alone tells: the magic and the size bound,
 * so that a reader can refuse a frame before its body arrives.
 * [in] buf, len: len >= CKPTD_HEADER_LEN  [out] h  [out] why: reason (static
 * string) on failure, may be NULL.
 * Returns 0; -EINVAL if len is short; -CKPT_ECORRUPT for a wrong magic;
 * -EMSGSIZE if header + payload exceeds CKPTD_MAX_FRAME. */
int ckptd_header_decode(const uint8_t *buf, size_t len, ckptd_frame_header *h, const char **why);

/* Writes a frame header into buf[0..CKPTD_HEADER_LEN). */
void ckptd_header_encode(uint8_t *buf, const ckptd_frame_header *h);

/* Size the encoding of m takes, header included, or a negative error as
 * ckptd_msg_encode would return it. */
long ckptd_msg_encoded_size(const ckptd_msg *m);

/* Encodes m as one frame with this build's protocol version.
 * [in] m  [out] buf, cap: where to write  [out] len: bytes written.
 * Every field is checked as the decoder would check it, so that a peer never
 * receives what it must refuse.
 * Returns 0; -EINVAL if a field is invalid (bad job id, string too long or
 * not printable, list too long, inconsistent values, unknown type);
 * -EMSGSIZE if the frame would exceed CKPTD_MAX_MESSAGE; -ENOBUFS if cap is
 * smaller than the frame (ckptd_msg_encoded_size() tells how much). */
int ckptd_msg_encode(const ckptd_msg *m, uint8_t *buf, size_t cap, size_t *len);

/* Decodes exactly one frame of len bytes (header and payload, no seal).
 * [out] m: filled on success (free with ckptd_msg_free); zeroed otherwise
 * except major/minor/type when the header could be read.
 * [out] why: reason (static string) on failure, may be NULL.
 * Fields with tags unknown to this build are skipped (newer minor versions
 * add fields). ERROR frames decode whatever their major version (their form
 * is frozen), so that a refusal is always readable.
 * Returns 0; -CKPT_ECORRUPT for anything malformed (bad magic or flags,
 * truncated, trailing bytes, bad field, missing required field, invalid
 * value); -CKPT_EFORMAT if the major version differs from this build's (see
 * m->major, m->minor); -EMSGSIZE if the header declares a message over
 * CKPTD_MAX_MESSAGE; -EOPNOTSUPP for a message type unknown to this build;
 * -ENOMEM. */
int ckptd_msg_decode(const uint8_t *buf, size_t len, ckptd_msg *m, const char **why);

/* Frees the lists a decoded message owns; does nothing to a message the
 * caller built. Leaves m empty. NULL is accepted. */
void ckptd_msg_free(ckptd_msg *m);

/* 1 if a and b carry the same type and field values (lists by content),
 * else 0. For tests and fuzz invariants. */
int ckptd_msg_equal(const ckptd_msg *a, const ckptd_msg *b);

/* Fills m as an ERROR refusing a peer that speaks peer_version (packed),
 * text naming both versions. */
void ckptd_msg_version_error(ckptd_msg *m, uint32_t peer_version);

#ifdef __cplusplus
}
#endif

#endif
