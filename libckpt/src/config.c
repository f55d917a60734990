/* Every setting in one typed table; defaults, CKPT_* environment parsing,
 * config-file parsing and the help text all come from it. */
#include "config.h"
#include "base/common.h"
#include "base/parse.h"
#include "format/format.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

enum cfg_type { T_STR, T_U32, T_U64, T_U64_SIZE, T_SIZE_AUTO, T_AUTOBOOL, T_BOOL, T_INT, T_POLICY, T_TIERS, T_ORDER };

typedef struct cfg_entry {
	const char *name;
	enum cfg_type type;
	size_t offset;
	const char *def;
	const char *env;
	const char *help;
} cfg_entry;

#define F(field) offsetof(ckpt_config, field)

static const cfg_entry table[] = {
	{ "job_id", T_STR, F(job_id), NULL, "CKPT_JOB", "job id: letters, digits, '.', '_', '-' (required)" },
	{ "rank", T_U32, F(rank), "0", "CKPT_RANK", "this process's rank" },
	{ "world_size", T_U32, F(world_size), "1", "CKPT_WORLD_SIZE", "number of ranks in the job" },
	{ "root", T_STR, F(root), NULL, "CKPT_ROOT", "checkpoint root directory (required)" },
	{ "chunk_bytes", T_U64_SIZE, F(chunk_bytes), "8M", "CKPT_CHUNK_BYTES",
	  "chunk size: unit of pipelining, checksums and compression (64K..256M, multiple of 4K)" },
	{ "staging_bytes", T_SIZE_AUTO, F(staging_bytes), "auto", "CKPT_STAGING_BYTES",
	  "staging pool size, allocated once; auto: every chunk of the state at the first save (at most staging_max_bytes); a save larger than the pool streams through it, its stall including disk time" },
	{ "staging_max_bytes", T_SIZE_AUTO, F(staging_max_bytes), "auto", "CKPT_STAGING_MAX_BYTES",
	  "the largest pool staging_bytes=auto makes (auto: 1/8 of physical memory, at least 256M)" },
	{ "compress", T_BOOL, F(compress), "0", "CKPT_COMPRESS", "byte-shuffle + zstd each chunk where it pays" },
	{ "compress_level", T_INT, F(compress_level), "1", "CKPT_COMPRESS_LEVEL", "zstd level (negative: faster)" },
	{ "tiers", T_TIERS, F(tiers), "local_disk", "CKPT_TIERS",
	  "tiers to write: comma list of local_mem,peer_mem,local_disk,shared" },
	{ "pool_policy", T_POLICY, F(pool_policy), "wait", "CKPT_POOL_POLICY",
	  "when staging is full: wait (block) or skip (return CKPT_ESKIPPED)" },
	{ "io_depth", T_U32, F(io_depth), "8", "CKPT_IO_DEPTH", "disk I/Os in flight" },
	{ "workers", T_U32, F(workers), "2", "CKPT_WORKERS", "checksum/compression threads" },
	{ "backend", T_STR, F(backend), "auto", "CKPT_BACKEND", "local disk backend: auto, uring or psync" },
	{ "direct_io", T_BOOL, F(direct_io), "1", "CKPT_DIRECT_IO", "O_DIRECT where the filesystem allows" },
	{ "faults", T_STR, F(faults), NULL, "CKPT_FAULT", "test fault points (docs/testing.md)" },
	{ "snapshot_overlap", T_AUTOBOOL, F(snapshot_overlap), "auto", "CKPT_SNAPSHOT_OVERLAP",
	  "start persisting while the snapshot copies: auto (only with CPUs to spare), on, off" },
	{ "lazy_check", T_BOOL, F(lazy_check), "0", "CKPT_LAZY_CHECK",
	  "debug: detect CUDA state changed between a lazy save and ckpt_fence" },
	{ "incarnation", T_U64, F(incarnation), "0", "CKPT_INCARNATION",
	  "launch number of the job (default: TORCHELASTIC_RESTART_COUNT or SLURM_RESTART_COUNT)" },
	{ "daemon", T_STR, F(daemon), NULL, "CKPT_DAEMON",
	  "local ckptd agent: unix:/path, or host:port without local_mem (unset: embedded mode)" },
	{ "daemon_required", T_BOOL, F(daemon_required), "0", "CKPT_DAEMON_REQUIRED",
	  "1: opening fails when the agent is unreachable; 0: warn and run embedded (local_disk)" },
	{ "token_file", T_STR, F(token_file), NULL, "CKPT_TOKEN_FILE",
	  "0600 file with the cluster token (unset: the CKPT_TOKEN variable)" },
	{ "restore_order", T_ORDER, F(restore_order), CKPT__DEFAULT_RESTORE_ORDER, "CKPT_RESTORE_ORDER",
	  "where ckpt_restore looks, in order: local_mem, local_disk, peer_mem, shared (peer_mem before local_disk when the root is a slow network filesystem)" },
	{ "preempt_signals", T_STR, F(preempt_signals), "TERM,USR1", "CKPT_PREEMPT_SIGNALS",
	  "signals ckpt_preempt_install arms when given none: comma list of names (TERM, USR1, USR2, INT, HUP)" },
	{ "preempt_grace_ms", T_U32, F(preempt_grace_ms), "30000", "CKPT_PREEMPT_GRACE_MS",
	  "after a preemption signal, ms until the process is expected to be gone" },
	{ "preempt_exit_margin_ms", T_U32, F(preempt_exit_margin_ms), "2000", "CKPT_PREEMPT_EXIT_MARGIN_MS",
	  "ckpt_step answers EXIT this long before a notice's deadline, committed or not" },
	{ "peer_timeout_ms", T_U32, F(peer_timeout_ms), "30000", "CKPT_PEER_TIMEOUT_MS",
	  "PEER_MEM: ms to wait on a partner (an answer, a fabric completion) before trying the next one" },
	{ "interval", T_STR, F(interval), NULL, "CKPT_INTERVAL",
	  "when ckpt_step asks for a save: off, N (every N steps), or auto (the coordinator's Young/Daly advice)" },
	{ "keep_versions", T_U32, F(keep_versions), "0", "CKPT_KEEP_VERSIONS",
	  "without a daemon: after each commit, delete committed versions older than the newest N (0: keep all)" },
	{ "recycle", T_AUTOBOOL, F(recycle), "auto", "CKPT_RECYCLE",
	  "keep deleted versions' shard files allocated in <root>/recycle/ and overwrite them with new shards: "
	  "auto (on with keep_versions and no daemon), on, off (off empties the pool)" },
	{ "heartbeat_timeout_ms", T_U32, F(heartbeat_timeout_ms), "10000", "CKPT_HEARTBEAT_TIMEOUT_MS",
	  "the agent is lost (saves go to local disk only) once it has not answered a heartbeat within this many ms; one goes at a quarter of it while the link is quiet (0: none)" },
	{ "heartbeat_interval_ms", T_U32, F(heartbeat_interval_ms), "500", "CKPT_HEARTBEAT_INTERVAL_MS",
	  "with a daemon: a heartbeat goes to the agent once the link was quiet this many ms (at most a quarter of heartbeat_timeout_ms); the agent decides a rank silent for its --hang-timeout hung (0: 500)" },
	{ "snapshot_threads", T_U32, F(snapshot_threads), "0", "CKPT_SNAPSHOT_THREADS",
	  "threads that copy the snapshot together, the caller included (0: the CPUs online, at most 4; 1: the caller alone)" },
	{ "shared_dir", T_STR, F(shared_dir), NULL, "CKPT_SHARED_DIR",
	  "the ckptd agents' --shared-dir as this rank sees it (a directory, or s3://BUCKET/PREFIX/): ckpt_restore reads the SHARED tier there (unset: not read)" },
};

static int parse_tiers(const char *s, uint32_t *out)
{
	static const struct { const char *n; uint32_t bit; } names[] = {
		{ "local_mem", CKPT_TIER_LOCAL_MEM }, { "peer_mem", CKPT_TIER_PEER_MEM },
		{ "local_disk", CKPT_TIER_LOCAL_DISK }, { "shared", CKPT_TIER_SHARED },
	};
	uint32_t m = 0;
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		size_t i;
		for (i = 0; i < CKPT_ARRAY_LEN(names); i++)
			if (!strcasecmp(t, names[i].n))
				break;
		if (i == CKPT_ARRAY_LEN(names))
			return -1;
		m |= names[i].bit;
	}
	if (!m)
		return -1;
	*out = m;
	return 0;
}

/* Sets one field from text. str_owned: the string is to be kept as is. */
static int set_field(ckpt_config *cfg, const cfg_entry *e, const char *val)
{
	char *base = (char *)cfg + e->offset;
	char *end;
	switch (e->type) {
	case T_STR:
		*(const char **)base = val;
		return 0;
	case T_U32: {
		errno = 0;
		unsigned long long v = strtoull(val, &end, 10);
		if (errno || end == val || *end || v > UINT32_MAX || *val == '-')
			return -1;
		*(uint32_t *)base = (uint32_t)v;
		return 0;
	}
	case T_U64: {
		errno = 0;
		unsigned long long v = strtoull(val, &end, 10);
		if (errno || end == val || *end || *val == '-')
			return -1;
		*(uint64_t *)base = v;
		return 0;
	}
	case T_U64_SIZE:
		return ckpt__parse_size(val, (uint64_t *)base);
	case T_SIZE_AUTO:
		if (!strcasecmp(val, "auto")) {
			*(uint64_t *)base = 0;
			return 0;
		}
		return ckpt__parse_size(val, (uint64_t *)base);
	case T_BOOL:
		if (!strcmp(val, "1") || !strcasecmp(val, "true") || !strcasecmp(val, "yes") || !strcasecmp(val, "on"))
			*(int *)base = 1;
		else if (!strcmp(val, "0") || !strcasecmp(val, "false") || !strcasecmp(val, "no") || !strcasecmp(val, "off"))
			*(int *)base = 0;
		else
			return -1;
		return 0;
	case T_AUTOBOOL:
		if (!strcasecmp(val, "auto") || !strcmp(val, "-1"))
			*(int *)base = -1;
		else if (!strcmp(val, "1") || !strcasecmp(val, "on") || !strcasecmp(val, "true") || !strcasecmp(val, "yes"))
			*(int *)base = 1;
		else if (!strcmp(val, "0") || !strcasecmp(val, "off") || !strcasecmp(val, "false") || !strcasecmp(val, "no"))
			*(int *)base = 0;
		else
			return -1;
		return 0;
	case T_INT: {
		errno = 0;
		long v = strtol(val, &end, 10);
		if (errno || end == val || *end || v < -1000 || v > 1000)
			return -1;
		*(int *)base = (int)v;
		return 0;
	}
	case T_POLICY:
		if (!strcasecmp(val, "wait"))
			*(ckpt_pool_policy *)base = CKPT_POOL_WAIT;
		else if (!strcasecmp(val, "skip"))
			*(ckpt_pool_policy *)base = CKPT_POOL_SKIP;
		else
			return -1;
		return 0;
	case T_TIERS:
		return parse_tiers(val, (uint32_t *)base);
	case T_ORDER: {
		uint32_t order[4];
		if (ckpt__parse_order(val, order) < 0)
			return -1;
		*(const char **)base = val;
		return 0;
	}
	}
	return -1;
}

int ckpt_config_init(ckpt_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	for (size_t i = 0; i < CKPT_ARRAY_LEN(table); i++)
		if (table[i].def)
			set_field(cfg, &table[i], table[i].def);
	/* Launchers count restarts; ranks of one launch see the same number. */
	const char *launch[] = { "TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT" };
	for (size_t i = 0; i < CKPT_ARRAY_LEN(launch); i++) {
		const char *v = getenv(launch[i]);
		char *end;
		if (v && *v) {
			unsigned long long n = strtoull(v, &end, 10);
			if (!*end) {
				cfg->incarnation = n;
				break;
			}
		}
	}
	int err = 0;
	for (size_t i = 0; i < CKPT_ARRAY_LEN(table); i++) {
		const char *v = getenv(table[i].env);
		if (!v)
			continue;
		if (set_field(cfg, &table[i], v) < 0) {
			LOG_E(NULL, CKPT_NO_VERSION, "invalid value '%s' in %s (%s)", v, table[i].env, table[i].help);
			if (table[i].def)
				set_field(cfg, &table[i], table[i].def);
			err = -CKPT_ECONFIG;
		}
	}
	return err;
}

/* Strings read from a file live in a list hung off the config. */
typedef struct owned_str {
	struct owned_str *next;
	char s[];
} owned_str;

static char *own(ckpt_config *cfg, const char *v)
{
	size_t n = strlen(v);
	owned_str *o = malloc(sizeof(*o) + n + 1);
	if (!o)
		return NULL;
	memcpy(o->s, v, n + 1);
	o->next = cfg->owned_strings;
	cfg->owned_strings = o;
	return o->s;
}

/* The table entry named key, or NULL. */
static const cfg_entry *find_entry(const char *key)
{
	for (size_t i = 0; i < CKPT_ARRAY_LEN(table); i++)
		if (!strcmp(table[i].name, key))
			return &table[i];
	return NULL;
}

/* Sets e from val; strings the field keeps are copied onto cfg first. */
static int set_owned(ckpt_config *cfg, const cfg_entry *e, const char *val)
{
	if (e->type == T_STR || e->type == T_ORDER) {
		val = own(cfg, val);
		if (!val)
			return -ENOMEM;
	}
	return set_field(cfg, e, val) < 0 ? -CKPT_ECONFIG : 0;
}

int ckpt_config_set(ckpt_config *cfg, const char *key, const char *value)
{
	if (!cfg || !key || !value)
		return -EINVAL;
	const cfg_entry *e = find_entry(key);
	if (!e) {
		LOG_E(NULL, CKPT_NO_VERSION, "unknown setting '%s' (ckpt --help-config lists them)", key);
		return -CKPT_ECONFIG;
	}
	int err = set_owned(cfg, e, value);
	if (err == -CKPT_ECONFIG)
		LOG_E(NULL, CKPT_NO_VERSION, "invalid value '%s' for %s (%s)", value, key, e->help);
	return err;
}

int ckpt_config_load_file(ckpt_config *cfg, const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	char line[1024];
	int lineno = 0, err = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *k, *v;
		int kv = ckpt__kv_split(line, &k, &v);
		if (kv == 0)
			continue;
		if (kv < 0) {
			LOG_E(NULL, CKPT_NO_VERSION, "%s:%d: expected key = value", path, lineno);
			err = -CKPT_ECONFIG;
			break;
		}
		const cfg_entry *e = find_entry(k);
		if (!e) {
			LOG_E(NULL, CKPT_NO_VERSION, "%s:%d: unknown setting '%s'", path, lineno, k);
			err = -CKPT_ECONFIG;
			break;
		}
		/* restore_order is kept as a string too: the line buffer is not. */
		if ((err = set_owned(cfg, e, v)) < 0) {
			if (err == -CKPT_ECONFIG)
				LOG_E(NULL, CKPT_NO_VERSION, "%s:%d: invalid value '%s' for %s", path, lineno, v, k);
			break;
		}
	}
	fclose(f);
	return err;
}

void ckpt_config_free_strings(ckpt_config *cfg)
{
	if (!cfg)
		return;
	for (owned_str *o = cfg->owned_strings, *n; o; o = n) {
		n = o->next;
		free(o);
	}
	cfg->owned_strings = NULL;
}

void ckpt_config_help(FILE *out)
{
	fprintf(out, "%-16s %-20s %-12s %s\n", "setting", "environment", "default", "meaning");
	for (size_t i = 0; i < CKPT_ARRAY_LEN(table); i++)
		fprintf(out, "%-16s %-20s %-12s %s\n", table[i].name, table[i].env,
		        table[i].def ? table[i].def : "-", table[i].help);
	/* Read outside the table: not settings of a context. */
	static const struct { const char *env, *def, *help; } also[] = {
		{ CKPT_LOG_ENV, "WARN", "log level: ERROR, WARN, INFO, DEBUG, TRACE (CKPT_LOG_LEVEL: an alias)" },
		{ "CKPT_TOKEN", "-", "the cluster token itself, when no token_file is set" },
		{ "CKPT_FABRIC_PROVIDER", "-", "the libfabric provider of partner copies (unset: libfabric's choice)" },
	};
	fprintf(out, "\nAlso read by the library:\n");
	for (size_t i = 0; i < CKPT_ARRAY_LEN(also); i++)
		fprintf(out, "%-16s %-20s %-12s %s\n", "", also[i].env, also[i].def, also[i].help);
	fprintf(out, "%-16s %-20s %-12s %s\n", "", "TORCHELASTIC_RESTART_COUNT", "-",
	        "incarnation, when CKPT_INCARNATION is not set (also SLURM_RESTART_COUNT)");
}

/* ------------------------------------------------------------- checks at open */

/* config `interval`: NULL/"off" 0, "N" 1 (every N steps), "auto" 2. */
int ckpt__config_interval(const ckpt_config *c, int *mode, uint64_t *steps)
{
	const char *s = c->size >= offsetof(ckpt_config, interval) + sizeof(c->interval) ? c->interval : NULL;
	*mode = 0;
	*steps = 0;
	if (!s || !*s || !strcmp(s, "off"))
		return 0;
	if (!strcmp(s, "auto")) {
		*mode = 2;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v == 0 || s[0] == '-')
		return -CKPT_ECONFIG;
	*mode = 1;
	*steps = v;
	return 0;
}

int ckpt__config_check(const ckpt_config *c, const ckpt_logger *lg)
{
	int mode;
	uint64_t steps;
	if (ckpt__config_interval(c, &mode, &steps) < 0) {
		LOG_E(lg, CKPT_NO_VERSION, "config: interval '%s': off, a number of steps, or auto", c->interval);
		return -CKPT_ECONFIG;
	}
	if (c->size < offsetof(ckpt_config, faults)) {
		LOG_E(lg, CKPT_NO_VERSION, "config: size field not set (use ckpt_config_init)");
		return -CKPT_ECONFIG;
	}
	if (ckpt__job_valid(c->job_id) < 0) {
		LOG_E(lg, CKPT_NO_VERSION, "config: job id '%s' invalid: 1-64 of [A-Za-z0-9._-], not starting with '.'",
		      c->job_id ? c->job_id : "(none)");
		return -CKPT_ENAME;
	}
	if (!c->root || !*c->root) {
		LOG_E(lg, CKPT_NO_VERSION, "config: root directory not set (CKPT_ROOT)");
		return -CKPT_ECONFIG;
	}
	if (c->world_size == 0 || c->rank >= c->world_size) {
		LOG_E(lg, CKPT_NO_VERSION, "config: rank %u must be below world size %u", c->rank, c->world_size);
		return -CKPT_ECONFIG;
	}
	if (c->chunk_bytes < CKPT_FMT_MIN_CHUNK || c->chunk_bytes > CKPT_FMT_MAX_CHUNK ||
	    c->chunk_bytes % CKPT_ALIGN) {
		LOG_E(lg, CKPT_NO_VERSION, "config: chunk_bytes %llu must be a multiple of 4096 in 64 KiB..256 MiB",
		      (unsigned long long)c->chunk_bytes);
		return -CKPT_ECONFIG;
	}
	if (c->staging_bytes && c->staging_bytes < c->chunk_bytes) {
		LOG_E(lg, CKPT_NO_VERSION, "config: staging_bytes %llu smaller than one chunk",
		      (unsigned long long)c->staging_bytes);
		return -CKPT_ECONFIG;
	}
	/* Older callers' structs end before `daemon`: they run embedded. */
	const char *daemon = c->size >= offsetof(ckpt_config, token_file) ? c->daemon : NULL;
	uint32_t avail = CKPT_TIER_LOCAL_DISK | (daemon && *daemon ? CKPT_TIER_LOCAL_MEM | CKPT_TIER_PEER_MEM : 0u);
	if (c->tiers & ~avail || !(c->tiers & CKPT_TIER_LOCAL_DISK)) {
		LOG_E(lg, CKPT_NO_VERSION, "config: tiers 0x%x: %s", c->tiers,
		      daemon && *daemon ? "local_mem, peer_mem and local_disk are available (local_disk required)"
		                        : "without a ckptd daemon only local_disk is available");
		return -CKPT_ECONFIG;
	}
	if (c->io_depth == 0 || c->io_depth > 1024 || c->workers == 0 || c->workers > 64) {
		LOG_E(lg, CKPT_NO_VERSION, "config: io_depth must be 1..1024 and workers 1..64");
		return -CKPT_ECONFIG;
	}
	if (c->size >= offsetof(ckpt_config, snapshot_threads) + sizeof(c->snapshot_threads) &&
	    c->snapshot_threads > 64) {
		LOG_E(lg, CKPT_NO_VERSION, "config: snapshot_threads must be 0 (auto)..64, not %u", c->snapshot_threads);
		return -CKPT_ECONFIG;
	}
	if ((unsigned)c->pool_policy > CKPT_POOL_SKIP) {
		LOG_E(lg, CKPT_NO_VERSION, "config: pool_policy invalid");
		return -CKPT_ECONFIG;
	}
	return 0;
}
