/* Every ckptd setting in one typed table; defaults, the config file, the
 * CKPT_* environment, flags and --help are all generated from it. */
#include "config.h"
#include "base/parse.h"
#include "base/common.h" /* ckpt__kv_split, shared with libckpt's settings */

#include "wire/addr.h"
#include "log.h"
#include "wire/proto.h"
#include "s3.h"
#include "ec.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum cfg_type { T_PATH, T_NAME, T_TCP_ADDR, T_SOCKET, T_ROLE, T_SIZE, T_SIZE0, T_COUNT, T_DURATION, T_LOGLEVEL, T_UINT, T_URL, T_SCHEME, T_BOOL };

typedef struct cfg_entry {
	const char *name; /* flag without "--", and config-file key */
	enum cfg_type type;
	size_t offset;
	const char *def;  /* NULL: unset */
	const char *env;
	const char *help;
	const char *env_alias; /* read when env is not set (an older name) */
} cfg_entry;

#define F(field) offsetof(ckptd_config, field)

/* A default the rank assumes too, from its one definition (wire/proto.h). */
#define STR_(x) #x
#define STR(x) STR_(x)

static const cfg_entry table[] = {
	{ "config", T_PATH, F(config), NULL, "CKPT_CONFIG", "config file of `name = value` lines (flags and environment override it)" },
	{ "role", T_ROLE, F(roles), "both", "CKPT_ROLE", "agent, coordinator, or both (a single node in one process)" },
	{ "root", T_PATH, F(root), NULL, "CKPT_ROOT", "directory for this daemon's LMDB index and disk tier" },
	{ "listen", T_TCP_ADDR, F(listen), NULL, "CKPT_LISTEN", "TCP host:port for agents and the CLI; only this address is bound (unset: no TCP)" },
	{ "socket", T_SOCKET, F(socket), NULL, "CKPT_SOCKET", "Unix socket path for local ranks, created 0600 (unset: none)" },
	{ "pool-size", T_SIZE, F(pool_size), "1G", "CKPT_POOL_SIZE", "agent: node DRAM for checkpoints, bytes (K, M, G, T suffixes): all jobs' pools together" },
	{ "job-pool-size", T_SIZE0, F(job_pool_size), "0", "CKPT_JOB_POOL_SIZE", "agent: one job's DRAM pool, its own memory that no other job can map (0: all of --pool-size)" },
	{ "pools-ahead", T_UINT, F(pools_ahead), "1", "CKPT_POOLS_AHEAD", "agent: job pools made and pre-faulted when the agent starts (and again after one is taken), within --pool-size, for the next jobs that register: a job's first save does not wait for its pool (0: each is made when the job's first rank registers)" },
	{ "segment-wait", T_DURATION, F(segment_wait_ms), STR(CKPTD_SEGMENT_WAIT_DEFAULT_MS) "ms", "CKPT_SEGMENT_WAIT", "agent: how long a DRAM request waits while its job's pool is prepared (first save of a job on this node); then: disk only. At most 10m; ranks are told it and wait that long plus their call timeout" },
	{ "coordinator", T_TCP_ADDR, F(coordinator), NULL, "CKPT_COORDINATOR", "coordinator host:port (for agents)" },
	{ "token-file", T_PATH, F(token_file), NULL, "CKPT_TOKEN_FILE", "file holding the cluster secret, mode 0600 (unset: the CKPT_TOKEN variable)" },
	{ "node", T_NAME, F(node), NULL, "CKPT_NODE", "this node's name (unset: the host name)" },
	{ "max-conns", T_COUNT, F(max_conns), "1024", "CKPT_MAX_CONNS", "authenticated connections served at once; more are refused with BUSY" },
	{ "max-handshakes", T_COUNT, F(max_handshakes), "256", "CKPT_MAX_HANDSHAKES", "connections still authenticating, counted apart from --max-conns; when full, the oldest handshake is dropped for a new one" },
	{ "max-handshakes-per-peer", T_COUNT, F(max_handshakes_per_peer), "16", "CKPT_MAX_HANDSHAKES_PER_PEER", "TCP connections still authenticating from one IP address; when full, that address's oldest handshake is dropped" },
	{ "idle-timeout", T_DURATION, F(idle_timeout_ms), "0", "CKPT_IDLE_TIMEOUT", "drop a session silent this long (0: never; ranks stay connected for a whole run)" },
	{ "frame-timeout", T_DURATION, F(frame_timeout_ms), "10s", "CKPT_FRAME_TIMEOUT", "a frame must be complete this long after its first byte (slow clients are dropped)" },
	{ "handshake-timeout", T_DURATION, F(handshake_timeout_ms), "5s", "CKPT_HANDSHAKE_TIMEOUT", "a connection must authenticate within this" },
	{ "shutdown-grace", T_DURATION, F(shutdown_grace_ms), "5s", "CKPT_SHUTDOWN_GRACE", "on SIGTERM/SIGINT, time left to flush replies in flight" },
	{ "out-queue", T_SIZE, F(out_queue), "4M", "CKPT_OUT_QUEUE", "bytes queued to one peer before its requests stop being read" },
	{ "log-level", T_LOGLEVEL, F(log_level), "info", CKPT_LOG_ENV, "error, warn, info, debug or trace (the library reads CKPT_DEBUG too; CKPT_LOG_LEVEL is an alias)", CKPT_LOG_ENV_ALIAS },
	{ "domain", T_NAME, F(domain), NULL, "CKPT_DOMAIN", "agent: this node's failure domain (rack), for partner placement and rs groups" },
	{ "domain-host", T_NAME, F(domain_host), NULL, "CKPT_DOMAIN_HOST", "agent: the physical host this node runs on, when several nodes share one (rs groups take at most one node of a host)" },
	{ "domain-switch", T_NAME, F(domain_switch), NULL, "CKPT_DOMAIN_SWITCH", "agent: this node's network switch (rs groups take at most one node of a switch)" },
	{ "domain-power", T_NAME, F(domain_power), NULL, "CKPT_DOMAIN_POWER", "agent: this node's power feed (rs groups take at most one node of a feed)" },
	{ "agent-grace", T_DURATION, F(agent_grace_ms), "30s", "CKPT_AGENT_GRACE", "coordinator: a disconnected agent's copies are dropped after this (a silent one's too)" },
	{ "heartbeat-timeout", T_DURATION, F(heartbeat_timeout_ms), "10s", "CKPT_HEARTBEAT_TIMEOUT", "agent and coordinator: the other side of their link is silent (partitioned, hung) once not heard from this long: the agent reconnects, the coordinator marks the agent degraded; heartbeats go at a quarter of it (0: none)" },
	{ "heartbeat-interval", T_DURATION, F(heartbeat_interval_ms), "250ms", "CKPT_HEARTBEAT_INTERVAL", "agent: a HEARTBEAT goes to the coordinator this often (at most a quarter of --heartbeat-timeout); the coordinator's --failure-timeout judges its silence, so keep it several times this" },
	{ "failure-timeout", T_DURATION, F(failure_timeout_ms), "1500ms", "CKPT_FAILURE_TIMEOUT", "coordinator: an agent whose connection closes, or silent this long, is decided lost: a node-lost event, a new membership epoch of each job with ranks there (docs/operations.md, \"Failure detection\"; 0: silence alone decides nothing)" },
	{ "hang-timeout", T_DURATION, F(hang_timeout_ms), "5s", "CKPT_HANG_TIMEOUT", "agent: a registered rank that heartbeats (libckpt's heartbeat_interval_ms) and was not heard from this long (and for at least 4 of its heartbeat intervals) while its process exists is reported hung: a rank-hung event (0: never)" },
	{ "on-failure", T_PATH, F(on_failure), NULL, "CKPT_ON_FAILURE", "agent and coordinator: a command run as `/bin/sh -c CMD` for each failure decision, not waited for (its exit is logged), with CKPT_JOB, CKPT_NODE, CKPT_RANKS (e.g. 0,2-5), CKPT_EPOCH, CKPT_FAILURE (rank-died, node-lost, rank-hung), CKPT_FAILURE_TIME_NS in its environment, never in its text; an agent runs it for the decisions about its jobs (unset: none)" },
	{ "retention-interval", T_DURATION, F(retention_interval_ms), "60s", "CKPT_RETENTION_INTERVAL", "coordinator: how often retention runs (0: never)" },
	{ "keep-dram", T_UINT, F(keep_dram), "0", "CKPT_KEEP_DRAM", "retention for jobs without their own policy (ckpt gc --daemon sets one): DRAM copies of the newest K versions (all three 0: keep everything)" },
	{ "keep-disk", T_UINT, F(keep_disk), "0", "CKPT_KEEP_DISK", "retention: disk copies of the newest M versions" },
	{ "keep-every", T_UINT, F(keep_every), "0", "CKPT_KEEP_EVERY", "retention: disk copies of every N-th version kept forever (0: none)" },
	{ "straggler-window", T_DURATION, F(straggler_window_ms), "60s", "CKPT_STRAGGLER_WINDOW", "coordinator: ranks' step times are judged over reports this recent" },
	{ "straggler-slowest", T_UINT, F(straggler_slowest), "150", "CKPT_STRAGGLER_SLOWEST", "coordinator: stragglers are named only when the slowest rank's step takes more than this percent of the fastest's" },
	{ "mtbf", T_DURATION, F(mtbf_ms), "0", "CKPT_MTBF", "coordinator: mean time between a job's failures, for the checkpoint interval it advises (0: as observed from restarts, 24h until 3 are seen)" },
	{ "straggler-rank", T_UINT, F(straggler_rank), "120", "CKPT_STRAGGLER_RANK", "coordinator: then every rank above this percent of the fastest is a straggler" },
	{ "replace-stragglers", T_BOOL, F(replace_stragglers), "false", "CKPT_REPLACE_STRAGGLERS", "coordinator: a persistent straggler's node is handled like a noticed one: an emergency checkpoint of its jobs (the ranks leave once it is safe off the node), the node out of placement until its agent says hello again, then a decision (straggler-replaced: a new epoch, in ckpt events and --on-failure) and a spare to take its ranks. `--replace-stragglers` alone means true" },
	{ "straggler-windows", T_UINT, F(straggler_windows), "10", "CKPT_STRAGGLER_WINDOWS", "coordinator: a straggler in this many judgements in a row (one a second) is persistent: its node's agent is asked for evidence (CPU steal and throttling, memory, I/O and disk pressure, OOM kills and hardware errors, its step times), which is logged and shown by ckpt stragglers (0: never)" },
	{ "health-proc", T_PATH, F(health_proc), "/proc", "CKPT_HEALTH_PROC", "agent: where it reads the node's CPU, pressure and disk figures and its ranks' cgroups, for straggler evidence" },
	{ "health-cgroup", T_PATH, F(health_cgroup), "/sys/fs/cgroup", "CKPT_HEALTH_CGROUP", "agent: the cgroup v2 tree its ranks' CPU throttling is read from" },
	{ "health-kmsg", T_PATH, F(health_kmsg), "/dev/kmsg", "CKPT_HEALTH_KMSG", "agent: the kernel log it reads OOM kills and hardware errors from (needs root or CAP_SYSLOG)" },
	{ "spare", T_BOOL, F(spare), "false", "CKPT_SPARE", "agent: a spare node: it holds no ranks and is no partner until the coordinator, deciding a node lost, tells it to take that node's ranks; it then pulls their newest committed versions into its DRAM (from partner DRAM, an rs group, or --shared-dir) before they are relaunched here, and becomes a regular node (docs/operations.md, \"Spares\"). `--spare` alone means true" },
	{ "peer-pool-size", T_SIZE0, F(peer_pool_size), "0", "CKPT_PEER_POOL_SIZE", "agent: DRAM for partner nodes' copies (PEER_MEM), registered with libfabric at the --listen host; needs --listen (0: this node keeps none). The provider is CKPT_FABRIC_PROVIDER's, else libfabric's choice" },
	{ "peer-scheme", T_SCHEME, F(peer_scheme), "partner", "CKPT_PEER_SCHEME", "coordinator: how PEER_MEM protects a shard: partner (full copies, --peer-replicas) or rs:K+M (Reed-Solomon groups of K+M nodes, at most one per failure domain of any kind, that survive any M lost; nodes left out of a group keep partner copies)" },
	{ "peer-replicas", T_UINT, F(peer_replicas), "1", "CKPT_PEER_REPLICAS", "coordinator: copies of each shard kept in other nodes' DRAM, on nodes of other failure domains first (0: none)" },
	{ "peer-lease", T_DURATION, F(peer_lease_ms), "60s", "CKPT_PEER_LEASE", "agent: a partner's slot not committed within this is reclaimed (its writer died or hangs)" },
	{ "peer-protect-idle", T_DURATION, F(peer_protect_idle_ms), "24h", "CKPT_PEER_PROTECT_IDLE", "agent: a job's restore point in the peer pool is never evicted while the job is heard from (a commit, a lease or a read of its copies); silent this long (finished, deleted elsewhere, gone) its copies are evicted before any live job's over-share copies, and it no longer counts in the pool's shares (0: protected until deleted)" },
	{ "preempt-deadline", T_DURATION, F(preempt_deadline_ms), "30s", "CKPT_PREEMPT_DEADLINE", "coordinator: how long a preempted node has when its notice names no time (signals, trigger files, GCP gives 30 s)" },
	{ "notice-aws", T_URL, F(notice_aws), NULL, "CKPT_NOTICE_AWS", "agent: poll AWS spot instance-action (IMDSv2) at this base URL, e.g. http://169.254.169.254 (unset: off)" },
	{ "notice-gcp", T_URL, F(notice_gcp), NULL, "CKPT_NOTICE_GCP", "agent: poll GCP instance/preempted at this base URL, e.g. http://metadata.google.internal (unset: off)" },
	{ "notice-azure", T_URL, F(notice_azure), NULL, "CKPT_NOTICE_AZURE", "agent: poll Azure Scheduled Events (Preempt) at this base URL, e.g. http://169.254.169.254 (unset: off)" },
	{ "notice-azure-vm", T_NAME, F(notice_azure_vm), NULL, "CKPT_NOTICE_AZURE_VM", "agent: this VM's name among an Azure event's resources (unset: any event)" },
	{ "notice-file", T_PATH, F(notice_file), NULL, "CKPT_NOTICE_FILE", "agent: a trigger file; when it appears the node is noticed (content: empty, deadline=SECONDS, or an RFC 3339 time)" },
	{ "notice-interval", T_DURATION, F(notice_interval_ms), "1s", "CKPT_NOTICE_INTERVAL", "agent: how often the notice sources are polled" },
	{ "shared-dir", T_PATH, F(shared_dir), NULL, "CKPT_SHARED_DIR", "agent: a shared filesystem directory, or an object store s3://BUCKET/PREFIX/, that committed versions are copied to in the background (the SHARED tier, which survives losing every node; ranks read it with the same CKPT_SHARED_DIR). Unset: no SHARED tier" },
	{ "rank-roots", T_PATH, F(rank_roots), NULL, "CKPT_RANK_ROOTS", "agent: directories (':'-separated) that ranks' checkpoint roots must lie in; the agent deletes and reads files under a root a rank registers, so it takes one only inside these, and over the Unix socket only if owned by the rank's uid (unset: any root the rank's uid owns; over TCP none is recorded)" },
	{ "shared-rate", T_SIZE0, F(shared_rate), "200M", "CKPT_SHARED_RATE", "agent: bytes per second the flush to --shared-dir may read and write together, so that it leaves training its bandwidth (K, M, G suffixes; 0: unthrottled)" },
	{ "shared-retry", T_DURATION, F(shared_retry_ms), "30s", "CKPT_SHARED_RETRY", "agent: a flush to --shared-dir that failed (the shared filesystem or the object store away, an upload the client gave up on) is tried again this long after" },
	{ "metrics-listen", T_TCP_ADDR, F(metrics_listen), NULL, "CKPT_METRICS_LISTEN", "host:port serving Prometheus metrics on GET /metrics; only this address is bound (unset: no endpoint)" },
};

#define NENTRIES (sizeof(table) / sizeof(table[0]))
_Static_assert(NENTRIES <= sizeof(((ckptd_config *)0)->source), "source[] too small");

static int set_str(char **slot, const char *v)
{
	char *c = NULL;
	if (v && *v && !(c = strdup(v)))
		return -ENOMEM;
	free(*slot);
	*slot = c;
	return 0;
}

/* Sets one entry from text; on failure *expect says what was wanted. */
static int set_field(ckptd_config *cfg, const cfg_entry *e, const char *v, const char **expect)
{
	char *base = (char *)cfg + e->offset;
	const char *why = NULL;
	ckptd_addr a;
	uint64_t u;
	switch (e->type) {
	case T_PATH:
		*expect = "a path";
		if (strlen(v) > 4000)
			return -EINVAL;
		return set_str((char **)base, v);
	case T_URL:
		*expect = "an http:// or https:// URL";
		if (strlen(v) > 1000 || (strncmp(v, "http://", 7) && strncmp(v, "https://", 8)))
			return -EINVAL;
		return set_str((char **)base, v);
	case T_SCHEME: {
		*expect = "partner or rs:K+M with K >= 1, M >= 1, K + M <= 64 (e.g. rs:8+2)";
		char why[160];
		unsigned k, m;
		if (ckpt_ec_scheme_parse(v, &k, &m, why, sizeof(why)) < 0)
			return -EINVAL;
		return set_str((char **)base, v);
	}
	case T_NAME:
		*expect = "a name of letters, digits, '.', '_', '-' (at most 64)";
		if (*v && ckpt__job_valid(v) < 0)
			return -EINVAL;
		return set_str((char **)base, v);
	case T_TCP_ADDR:
		*expect = "host:port (or [v6]:port)";
		if (*v && ckptd_addr_parse(v, CKPTD_ADDR_TCP, &a, &why) < 0)
			return -EINVAL;
		return set_str((char **)base, v);
	case T_SOCKET:
		*expect = "an absolute socket path (or unix:/path)";
		if (!*v)
			return set_str((char **)base, NULL);
		if (ckptd_addr_parse(v, CKPTD_ADDR_UNIX, &a, &why) < 0)
			return -EINVAL;
		return set_str((char **)base, a.path);
	case T_ROLE:
		*expect = "agent, coordinator or both";
		if (!strcmp(v, "agent"))
			*(uint32_t *)base = CKPTD_SERVES_AGENT;
		else if (!strcmp(v, "coordinator"))
			*(uint32_t *)base = CKPTD_SERVES_COORDINATOR;
		else if (!strcmp(v, "both"))
			*(uint32_t *)base = CKPTD_SERVES_AGENT | CKPTD_SERVES_COORDINATOR;
		else
			return -EINVAL;
		return 0;
	case T_SIZE:
	case T_SIZE0: /* the same, where 0 means "none" or "all" */
		*expect = e->type == T_SIZE ? "a size in bytes, > 0 (suffixes K, M, G, T)"
		                            : "a size in bytes (suffixes K, M, G, T), or 0";
		if (ckpt__parse_size(v, &u) < 0 || (u == 0 && e->type == T_SIZE))
			return -EINVAL;
		*(uint64_t *)base = u;
		return 0;
	case T_COUNT:
		*expect = "a whole number from 1 to 1000000";
		if (ckpt__parse_size(v, &u) < 0 || !isdigit((unsigned char)v[strlen(v) - 1]) || u < 1 || u > 1000000)
			return -EINVAL;
		*(uint32_t *)base = (uint32_t)u;
		return 0;
	case T_DURATION:
		*expect = "a duration: 10s, 250ms, 5m, 1h (bare numbers are seconds, at most a day)";
		if (ckpt__parse_duration_ms(v, &u) < 0)
			return -EINVAL;
		*(uint64_t *)base = u;
		return 0;
	case T_UINT:
		*expect = "a whole number from 0 to 1000000000";
		if (!isdigit((unsigned char)v[strlen(v) - 1]) || ckpt__parse_size(v, &u) < 0 || u > 1000000000)
			return -EINVAL;
		*(uint32_t *)base = (uint32_t)u;
		return 0;
	case T_BOOL:
		*expect = "true or false (also 1, 0, yes, no, on, off)";
		if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "on"))
			*(uint32_t *)base = 1;
		else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "off"))
			*(uint32_t *)base = 0;
		else
			return -EINVAL;
		return 0;
	case T_LOGLEVEL:
		*expect = "error, warn, info, debug or trace";
		if (ckpt__log_level_parse(v) < 0)
			return -EINVAL;
		*(int *)base = ckpt__log_level_parse(v);
		return 0;
	}
	return -EINVAL;
}

static const cfg_entry *find(const char *name, size_t n)
{
	for (size_t i = 0; i < NENTRIES; i++)
		if (strlen(table[i].name) == n && !strncmp(table[i].name, name, n))
			return &table[i];
	/* Config files may spell names with underscores. */
	for (size_t i = 0; i < NENTRIES; i++) {
		if (strlen(table[i].name) != n)
			continue;
		size_t k;
		for (k = 0; k < n; k++)
			if (table[i].name[k] != (name[k] == '_' ? '-' : name[k]))
				break;
		if (k == n)
			return &table[i];
	}
	return NULL;
}

static int apply(ckptd_config *cfg, const cfg_entry *e, const char *v, int src, const char *where, char *err,
                 size_t errcap)
{
	const char *expect = "";
	int r = set_field(cfg, e, v, &expect);
	/* A rank waits for a SEGMENT_REQUEST's answer the agent's wait plus a
	 * call's own time, and believes a wait of at most this (wire/proto.h). */
	if (r == 0 && e->offset == offsetof(ckptd_config, segment_wait_ms) &&
	    cfg->segment_wait_ms > CKPTD_SEGMENT_WAIT_MAX_MS) {
		expect = "a duration of at most 10m";
		r = -EINVAL;
	}
	if (r == -ENOMEM) {
		ckpt__errf(err, errcap, "out of memory");
		return r;
	}
	if (r < 0) {
		ckpt__errf(err, errcap, "invalid value '%s' for --%s (from %s): expected %s", v, e->name, where, expect);
		return -EINVAL;
	}
	cfg->source[e - table] = (uint8_t)src;
	return 0;
}

static int load_file(ckptd_config *cfg, const char *path, char *err, size_t errcap)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		int e = errno;
		ckpt__errf(err, errcap, "cannot open config file %s (--config): %s", path, strerror(e));
		return -e;
	}
	char line[4200], where[300];
	int lineno = 0, r = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *s, *v;
		int kv = ckpt__kv_split(line, &s, &v);
		if (kv == 0)
			continue;
		if (kv < 0) {
			ckpt__errf(err, errcap, "%s:%d: expected `name = value`", path, lineno);
			r = -EINVAL;
			break;
		}
		const cfg_entry *e = find(s, strlen(s));
		if (!e || !strcmp(e->name, "config")) {
			ckpt__errf(err, errcap, "%s:%d: unknown setting '%s'", path, lineno, s);
			r = -EINVAL;
			break;
		}
		snprintf(where, sizeof(where), "%s:%d", path, lineno);
		if ((r = apply(cfg, e, v, CKPTD_SRC_FILE, where, err, errcap)) < 0)
			break;
	}
	fclose(f);
	return r;
}

/* A secret on the command line would be readable by every local user. */
static int is_secret_flag(const char *name, size_t n)
{
	return (n == 5 && !strncmp(name, "token", 5)) || (n == 6 && !strncmp(name, "secret", 6));
}

int ckptd_config_parse(ckptd_config *cfg, int argc, char **argv, char *err, size_t errcap)
{
	const char *expect;
	int r, action = CKPTD_CFG_RUN;
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < NENTRIES; i++)
		if (table[i].def && set_field(cfg, &table[i], table[i].def, &expect) < 0)
			return -ENOMEM;

	/* The file comes first in precedence order but is named by a flag or
	 * the environment: find its name before anything else. */
	const char *cfile = getenv("CKPT_CONFIG");
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			cfile = argv[i + 1];
		else if (!strncmp(argv[i], "--config=", 9))
			cfile = argv[i] + 9;
	}
	if (cfile && *cfile && (r = load_file(cfg, cfile, err, errcap)) < 0)
		return r;

	for (size_t i = 0; i < NENTRIES; i++) {
		const char *name = table[i].env, *v = getenv(name);
		if (!v && table[i].env_alias)
			v = getenv(name = table[i].env_alias);
		if (!v)
			continue;
		if ((r = apply(cfg, &table[i], v, CKPTD_SRC_ENV, name, err, errcap)) < 0)
			return r;
	}

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			action = CKPTD_CFG_HELP;
			continue;
		}
		if (!strcmp(a, "--print-config")) {
			action = CKPTD_CFG_PRINT;
			continue;
		}
		if (!strcmp(a, "--version")) {
			action = CKPTD_CFG_VERSION;
			continue;
		}
		if (strncmp(a, "--", 2) != 0) {
			ckpt__errf(err, errcap, "unexpected argument '%s' (settings are --name value)", a);
			return -EINVAL;
		}
		const char *name = a + 2, *eq = strchr(name, '=');
		size_t n = eq ? (size_t)(eq - name) : strlen(name);
		if (is_secret_flag(name, n)) {
			/* Not echoing the value: it is the secret. */
			ckpt__errf(err, errcap, "--%.*s: secrets are not accepted on the command line (visible in ps); use --token-file FILE or the CKPT_TOKEN variable",
			     (int)n, name);
			return -EINVAL;
		}
		const cfg_entry *e = find(name, n);
		if (!e) {
			ckpt__errf(err, errcap, "unknown setting --%.*s (see ckptd --help)", (int)n, name);
			return -EINVAL;
		}
		const char *v;
		if (eq)
			v = eq + 1;
		else if (e->type == T_BOOL) /* --spare alone: a switch */
			v = "true";
		else if (i + 1 < argc)
			v = argv[++i];
		else {
			ckpt__errf(err, errcap, "--%s needs a value", e->name);
			return -EINVAL;
		}
		if ((r = apply(cfg, e, v, CKPTD_SRC_FLAG, "command line", err, errcap)) < 0)
			return r;
	}
	return action;
}

void ckptd_config_free(ckptd_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < NENTRIES; i++) {
		enum cfg_type t = table[i].type;
		if (t == T_PATH || t == T_NAME || t == T_TCP_ADDR || t == T_SOCKET || t == T_URL ||
		    t == T_SCHEME)
			free(*(char **)((char *)cfg + table[i].offset));
	}
	memset(cfg, 0, sizeof(*cfg));
}

void ckptd_config_help(FILE *out)
{
	fprintf(out, "usage: ckptd [--name value | --name=value]...\n\n"
	             "The checkpoint daemon: a node agent, a coordinator, or both (docs/protocol.md).\n"
	             "Precedence: flags > environment > config file > defaults.\n\n");
	fprintf(out, "  %-22s %-24s %-8s %s\n", "flag", "environment", "default", "meaning");
	for (size_t i = 0; i < NENTRIES; i++) {
		char flag[64];
		snprintf(flag, sizeof(flag), "--%s", table[i].name);
		fprintf(out, "  %-22s %-24s %-8s %s\n", flag, table[i].env, table[i].def ? table[i].def : "-",
		        table[i].help);
	}
	fprintf(out, "\n  %-22s %-24s %-8s %s\n", "", "CKPT_TOKEN", "-",
	        "the cluster secret itself, when no --token-file is set");
	fprintf(out, "  %-22s %-24s %-8s %s\n", "", "CKPT_FABRIC_PROVIDER", "-",
	        "the libfabric provider of the peer pool (unset: libfabric's choice)");
	fprintf(out, "  %-22s %-24s %-8s %s\n", "", "CKPT_FAULT", "-",
	        "fault points to arm, for tests only (docs/testing.md)");
	fprintf(out, "\nThe S3 client (an s3:// SHARED tier; credentials as AWS tools take them: AWS_ACCESS_KEY_ID,\n"
	             "AWS_PROFILE with ~/.aws/credentials and ~/.aws/config, the instance metadata service):\n");
	ckpt_s3_env_help(out);
	fprintf(out, "\nOther flags: --help, --version, --print-config (show the effective settings and exit).\n"
	             "Secrets are never accepted on the command line.\n"
	             "Signals: SIGTERM or SIGINT stop accepting, flush replies, remove the socket, exit 0.\n"
	             "Exit status: 0 clean stop, 1 runtime failure, 2 bad settings.\n");
}

void ckptd_config_print(const ckptd_config *cfg, FILE *out)
{
	static const char *const src[] = { "default", "file", "env", "flag" };
	for (size_t i = 0; i < NENTRIES; i++) {
		const char *base = (const char *)cfg + table[i].offset;
		char v[4200];
		switch (table[i].type) {
		case T_ROLE: {
			uint32_t m = *(const uint32_t *)base;
			snprintf(v, sizeof(v), "%s", m == CKPTD_SERVES_AGENT ? "agent" : m == CKPTD_SERVES_COORDINATOR ? "coordinator" : "both");
			break;
		}
		case T_SIZE:
		case T_SIZE0:
		case T_DURATION:
			snprintf(v, sizeof(v), "%llu%s", (unsigned long long)*(const uint64_t *)base,
			         table[i].type == T_DURATION ? "ms" : "");
			break;
		case T_COUNT:
		case T_UINT:
			snprintf(v, sizeof(v), "%u", *(const uint32_t *)base);
			break;
		case T_BOOL:
			snprintf(v, sizeof(v), "%s", *(const uint32_t *)base ? "true" : "false");
			break;
		case T_LOGLEVEL:
			snprintf(v, sizeof(v), "%s", ckpt__log_level_name(*(const int *)base));
			for (char *c = v; *c; c++)
				*c = (char)tolower((unsigned char)*c);
			break;
		default: {
			const char *s = *(char *const *)base;
			snprintf(v, sizeof(v), "%s", s ? s : "");
		}
		}
		fprintf(out, "%s = %s  # %s\n", table[i].name, v, src[cfg->source[i]]);
	}
}
