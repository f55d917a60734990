/* The ckpt command-line tool: shared options and helpers. */
#ifndef CKPT_CLI_H
#define CKPT_CLI_H

#include <stdint.h>
#include <stdio.h>
#include "ckpt.h"
#include "base/common.h"
#include "base/faults.h"
#include "format/index.h"

/* Exit codes (docs/cli.md). */
enum {
	EXIT_OK = 0,
	EXIT_ERROR = 1,    /* an operation failed (I/O, index, ...) */
	EXIT_USAGE = 2,    /* bad command line */
	EXIT_CORRUPT = 3,  /* corruption found (verify, restore) */
	EXIT_NOTFOUND = 4, /* no such job or version */
	EXIT_PARTIAL = 5,  /* save: durable on disk, but not at every tier asked for */
};

#define VERSION_LATEST UINT64_MAX
#define VERSION_ALL (UINT64_MAX - 1)
#define VERSION_UNSET (UINT64_MAX - 2)
/* The staging pool of ckpt import when staging_bytes is auto:
 * it streams a file set through it, whatever its size. */
#define CLI_STAGING (256ull << 20)

typedef struct cli {
	const char *root;
	const char *job;
	const char *daemon;     /* --daemon or CKPT_DAEMON: ask ckptd, not a root */
	int daemon_flag;        /* --daemon was given on the command line */
	int root_flag;          /* --root was given on the command line */
	const char *token_file; /* --token-file or CKPT_TOKEN_FILE (unset: CKPT_TOKEN) */
	const char *shared_dir; /* CKPT_SHARED_DIR, the default of restore's --shared-dir */
	uint64_t version;   /* VERSION_* or a number */
	int64_t rank;       /* -1: all ranks */
	int json;
	ckpt_logger lg;
	ckpt_faults faults;
	ckpt_index *ix;
	struct ckpt_s3tree *tree; /* --root s3://...: the object store (cmd_s3.c) */
} cli;

typedef struct cli_cmd {
	const char *name;
	const char *summary;
	int (*run)(cli *c, int argc, char **argv);
	void (*help)(FILE *out);
} cli_cmd;

extern const cli_cmd cli_cmds[];

/* Parses --root/--job/--version/--rank/--json at argv[*i]; returns 1 if it
 * consumed an option, 0 if not one of them, -1 on a bad value. */
int cli_common_opt(cli *c, int argc, char **argv, int *i);
/* Parses a command's options when it has only the common and daemon ones:
 * anything else is a usage error. Returns EXIT_OK or the exit code. */
int cli_parse_opts(cli *c, const char *cmd, int argc, char **argv);
/* Parses --daemon/--token-file at argv[*i], as cli_common_opt. */
int cli_daemon_opt(cli *c, int argc, char **argv, int *i);
/* ls against c->daemon (cmd_daemon.c). */
int cli_daemon_ls(cli *c);
/* 1 if cmd should ask the daemon (--daemon, or CKPT_DAEMON without --root),
 * 0 if not, or -EXIT_USAGE after a usage message. */
int cli_use_daemon(cli *c, const char *cmd);
/* Connects to c->daemon as the CLI (the job's secret when job is named); on
 * failure says why on stderr, never with the token, and returns EXIT_ERROR. */
struct ckptd_client;
int cli_daemon_connect(cli *c, const char *cmd, const char *job, struct ckptd_client **out);
/* Sends req; returns EXIT_OK with a reply of type want, else says why. */
struct ckptd_msg;
int cli_daemon_call(cli *c, const char *cmd, struct ckptd_client *cl, const struct ckptd_msg *req, uint16_t want,
                    struct ckptd_msg *reply);
int cli_daemon_show(cli *c);
/* Every copy of a version, read by the agents that hold them. */
int cli_daemon_verify(cli *c);
int cli_daemon_rm(cli *c, uint32_t tiers);
/* Options < 0 are absent. None given: the job's stored policy runs now;
 * else they are stored as its policy first (keep: DRAM and disk alike). */
int cli_daemon_gc(cli *c, long keep, long keep_dram, long keep_disk, long long keep_every);
/* "local_mem,local_disk" -> tier mask; 0 if a name is unknown. */
uint32_t cli_tiers_parse(const char *s);
int cmd_status(cli *c, int argc, char **argv);
void help_status(FILE *out);
int cmd_stragglers(cli *c, int argc, char **argv);
int cmd_goodput(cli *c, int argc, char **argv);
int cmd_preempt(cli *c, int argc, char **argv);
void help_preempt(FILE *out);
void help_goodput(FILE *out);
void help_stragglers(FILE *out);
/* Where a shard is restored from: a file, or an image in memory. */
typedef struct cli_shard_src {
	const char *path;        /* a shard file, or NULL */
	const uint8_t *img;      /* a shard image (a node-DRAM copy), or NULL */
	uint64_t len;
	int check_sum;           /* compare the footer checksum with footer_checksum */
	uint64_t footer_checksum;
	uint64_t lineage;        /* the run that must have written it (a SHARED marker's); 0: any */
	struct ckpt_s3tree *tree; /* or an object at key in an object store */
	const char *key;
} cli_shard_src;
/* Writes each region of the shard (version v, rank) as a file into the
 * directory outfd, every chunk verified first. Returns 0 or an error (why says). */
int cli_restore_shard(cli *c, const cli_shard_src *src, uint64_t v, uint32_t rank, int outfd, char *why, size_t cap);
/* Moves a staging directory's files (and rank-N directories) into dst. */
int cli_publish_dir(const char *stage, const char *dst, char *why, size_t cap);
void cli_remove_stage(const char *dir);
/* Makes out and a private staging directory inside it (stage receives its
 * path, "" on failure). Returns 0 or an error (why says). */
int cli_stage_make(const char *out, char *stage, size_t scap, char *why, size_t cap);
/* A version restored whole into a staging directory inside out (every
 * rank of world, or --rank's; rank-N directories when there are several),
 * one(c, arg, v, rank, dirfd) writing each rank's regions, and only then
 * moved into place: a version that fails half-way leaves nothing behind to
 * mix with the next one tried. Returns 0 or an error (why says). */
typedef int (*cli_rank_restore_fn)(cli *c, void *arg, uint64_t v, uint32_t rank, int dirfd, char *why, size_t cap);
int cli_restore_staged(cli *c, uint64_t v, uint32_t world, const char *out, cli_rank_restore_fn one, void *arg,
                       char *why, size_t cap);
/* shared_dir: the SHARED tree as this machine sees it (NULL: not read). */
int cli_restore_daemon(cli *c, const char *out, const char *shared_dir);
int cli_open_index(cli *c);
/* cmd_s3.c: the commands on an object store root (--root s3://BUCKET/PREFIX):
 * versions and shards from a LIST of the job's keys, markers, objects. */
int cli_s3_root(const cli *c); /* 1 if --root names an object store */
/* Opens c->tree on url (EXIT_OK, or an exit code after saying why); close
 * with cli_s3_close (none open: nothing done). */
int cli_s3_open(cli *c, const char *url, const char *cmd);
void cli_s3_close(cli *c);
int cli_s3_ls(cli *c);
int cli_s3_show(cli *c);
int cli_s3_verify(cli *c);
int cli_s3_restore(cli *c, const char *out);
int cli_s3_rm(cli *c);
int cli_s3_gc(cli *c, long keep);
/* cmd_export.c, cmd_import.c */
int cmd_export(cli *c, int argc, char **argv);
void help_export(FILE *out);
int cmd_import(cli *c, int argc, char **argv);
void help_import(FILE *out);
/* ckpt show --global: the global tensors of c->version (or the newest). */
int cli_show_global(cli *c);
int cli_need(cli *c, int root, int job);
/* The ranks below world with a shard file in version v's directory, sorted
 * (ranks.c); *out is freed by the caller. Returns 0 or -errno. */
int cli_version_ranks(const cli *c, uint64_t v, uint32_t world, uint32_t **out, size_t *n);
/* Calls fn for the first limit ranks below world that are not in have
 * (sorted, distinct, all below world); returns how many are missing in all.
 * Its work is bounded by n + limit, whatever world says. */
uint64_t cli_missing_ranks(uint32_t world, const uint32_t *have, size_t n, unsigned limit,
                           void (*fn)(void *arg, uint32_t r), void *arg);
#define CLI_MISSING_NAMED 16 /* missing ranks named one by one, then counted */
void cli_json_str(FILE *out, const char *s);
void cli_text_str(FILE *out, const char *s);
const char *cli_text(const char *s, char *buf, size_t cap);
const char *cli_human(uint64_t bytes, char *buf, size_t cap);
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* cmd_ops.c: ckpt status --job's line on the job's persistent stragglers
 * (STRAGGLERS, 1.4); JSON: a "persistent_stragglers" member. */
struct ckptd_client;
void cli_status_stragglers(cli *c, struct ckptd_client *cl);
/* cmd_events.c: ckpt events; ckpt status's lines on the jobs' membership
 * epochs (1.5); JSON: an "epochs" member. */
int cmd_events(cli *c, int argc, char **argv);
void help_events(FILE *out);
struct ckptd_status_reply;
void cli_status_epochs(const cli *c, const struct ckptd_status_reply *s);
/* ckpt recoveries (1.6), and ckpt status's lines on each job's newest
 * recovery (the spare that took which node, when protected again). */
int cmd_recoveries(cli *c, int argc, char **argv);
void help_recoveries(FILE *out);
void cli_status_recoveries(const cli *c, const struct ckptd_status_reply *s);

#endif
