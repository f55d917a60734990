/*
 * config.h — ckptd's settings, from one typed table (config.c) that
 * generates the defaults, config-file parsing, CKPT_* environment parsing,
 * flag parsing and `ckptd --help`.
 *
 * Precedence: flags > environment > config file > defaults. The config file
 * is named by --config or CKPT_CONFIG; lines are `name = value`, `#` starts
 * a comment, names as the flags without the dashes.
 *
 * The secret itself is never a setting: only the path of a file holding it
 * (--token-file) or the CKPT_TOKEN variable. A command line is visible to
 * every user of the machine (ps), so `--token` is refused.
 */
#ifndef CKPTD_SERVER_CONFIG_H
#define CKPTD_SERVER_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckptd_config {
	char *config;            /* the config file read, or NULL */
	uint32_t roles;          /* CKPTD_SERVES_* mask */
	char *root;              /* index and disk tier; NULL: not set */
	char *listen;            /* "host:port" for TCP, NULL: no TCP listener */
	char *socket;            /* Unix socket path (no "unix:"), NULL: none */
	uint64_t pool_size;      /* node DRAM budget, bytes: every job's pool together */
	uint64_t job_pool_size;  /* one job's pool, bytes; 0: pool_size */
	uint32_t pools_ahead;    /* job pools made ahead of the jobs that will take them */
	uint64_t segment_wait_ms; /* a segment request waits this long for its job's pool */
	char *coordinator;       /* "host:port", NULL: none */
	char *token_file;        /* NULL: CKPT_TOKEN */
	char *node;              /* this daemon's node name; NULL: host name */
	uint32_t max_conns;      /* authenticated connections served at once */
	uint32_t max_handshakes; /* connections not yet authenticated, all peers */
	uint32_t max_handshakes_per_peer; /* ... over TCP from one IP address */
	uint64_t idle_timeout_ms;      /* 0: never */
	uint64_t frame_timeout_ms;     /* a frame must complete within this */
	uint64_t handshake_timeout_ms; /* the handshake must complete within this */
	uint64_t shutdown_grace_ms;    /* SIGTERM: time left to flush replies */
	uint64_t out_queue;      /* bytes queued to one peer before it is throttled */
	int log_level;           /* CKPTD_LOG_* */
	char *domain;            /* failure domain (rack) an agent reports; NULL: none */
	char *domain_host, *domain_switch, *domain_power; /* agent: more failure domains, for rs groups; NULL: none */
	uint64_t agent_grace_ms; /* coordinator: a disconnected agent is lost after this */
	uint64_t heartbeat_timeout_ms; /* a link's peer not heard from this long is silent; 0: no heartbeats */
	uint64_t heartbeat_interval_ms; /* agent: heartbeats to the coordinator at least this often */
	uint64_t failure_timeout_ms;   /* coordinator: an agent silent this long is decided lost; 0: never by silence */
	uint64_t hang_timeout_ms;      /* agent: a heartbeating rank silent this long is hung; 0: never */
	char *on_failure;              /* a command run for each failure decision; NULL: none */
	uint64_t retention_interval_ms; /* coordinator: retention timer; 0: off */
	uint32_t keep_dram;      /* retention default for jobs without a policy: DRAM copies of the newest K */
	uint32_t keep_disk;      /* ... disk copies of the newest M */
	uint32_t keep_every;     /* ... disk copies of every N-th version forever */
	char *metrics_listen;    /* "host:port" of the Prometheus endpoint, NULL: none */
	uint64_t straggler_window_ms; /* coordinator: step reports older than this are ignored */
	uint32_t straggler_slowest;   /* percent: stragglers only when the slowest rank exceeds this of the fastest */
	uint32_t straggler_rank;      /* percent: a rank above this of the fastest is a straggler */
	uint32_t straggler_windows;   /* judgements in a row that make a straggler persistent (0: never) */
	int replace_stragglers;       /* coordinator: a persistent straggler's node replaced (coord_replace.c) */
	char *health_proc, *health_cgroup, *health_kmsg; /* agent: where the node's health is read; NULL: the defaults */
	uint64_t mtbf_ms;             /* coordinator: the jobs' MTBF for interval advice; 0: observed */
	uint32_t spare;          /* agent: a spare (--spare): no ranks until told to take a lost node's */
	uint64_t peer_pool_size; /* agent: DRAM for partners' copies (PEER_MEM), bytes; 0: none */
	uint32_t peer_replicas;  /* coordinator: partner copies of each shard */
	char *peer_scheme;       /* coordinator: "partner" or "rs:K+M" (checked by ckpt_ec_scheme_parse) */
	uint64_t peer_lease_ms;  /* agent: a leased slot not committed within this is reclaimed */
	uint64_t peer_protect_idle_ms; /* agent: a job silent this long loses its peer pool protection; 0: never */
	uint64_t preempt_deadline_ms; /* coordinator: a notice's deadline when its source names none */
	char *notice_aws, *notice_gcp, *notice_azure; /* agent: metadata base URLs polled for notices */
	char *notice_azure_vm;   /* agent: this VM's name in Azure's scheduled events */
	char *notice_file;       /* agent: a trigger file */
	uint64_t notice_interval_ms; /* agent: poll period */
	char *shared_dir;        /* agent: the SHARED tier's directory (a shared filesystem); NULL: none */
	char *rank_roots;        /* agent: ':'-separated directories ranks' roots must lie in; NULL: any the rank's uid owns */
	uint64_t shared_rate;    /* agent: bytes/s the flush to shared_dir may move; 0: unthrottled */
	uint64_t shared_retry_ms; /* agent: a failed flush is tried again this long after */
	uint8_t source[64];      /* per table entry: where its value came from */
} ckptd_config;

enum { CKPTD_SRC_DEFAULT = 0, CKPTD_SRC_FILE, CKPTD_SRC_ENV, CKPTD_SRC_FLAG };

/* What ckptd_config_parse asks the caller to do. */
enum { CKPTD_CFG_RUN = 0, CKPTD_CFG_HELP = 1, CKPTD_CFG_PRINT = 2, CKPTD_CFG_VERSION = 3 };

/* Fills cfg from defaults, the config file, the environment and argv, in
 * rising precedence. Flags: `--name value`, `--name=value`, plus --config,
 * --help, --print-config and --version.
 * [out] err, errcap: on failure, one line naming the setting at fault.
 * Returns CKPTD_CFG_* (>= 0), or -EINVAL (bad value, unknown flag), -ENOENT
 * (config file missing), -ENOMEM. Free with ckptd_config_free either way. */
int ckptd_config_parse(ckptd_config *cfg, int argc, char **argv, char *err, size_t errcap);

/* Frees the strings; leaves cfg zeroed. NULL is accepted. */
void ckptd_config_free(ckptd_config *cfg);

/* Writes the help text: every setting with its flag, variable, default and
 * meaning. */
void ckptd_config_help(FILE *out);

/* Writes the effective settings as a config file would hold them, each with
 * where it came from (for operators and tests). Never a secret. */
void ckptd_config_print(const ckptd_config *cfg, FILE *out);

/* Parses "10", "10s", "250ms", "5m", "1h" (bare numbers are seconds) into
 * milliseconds. Returns 0 or -EINVAL. */

/* Parses "4096", "64K", "2M", "1G", "1T" (KiB units) into bytes. */

#ifdef __cplusplus
}
#endif

#endif
