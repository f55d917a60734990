/* Shared by the ckptd role tests: ckptd processes on 127.0.0.1 (a free
 * port, sockets in a temp dir) and simulated ranks speaking the protocol
 * through the client library, as libckpt will. */
#ifndef CKPTD_ROLES_TEST_H
#define CKPTD_ROLES_TEST_H

#include "ckptd_helper.h"

#include "wire/addr.h"
#include "wire/auth.h"
#include "wire/client.h"
#include "wire/fdpass.h"
#include "wire/proto.h"

#include <poll.h>

/* A daemon of the test (tests/ckptd_helper.h): on 127.0.0.1, its socket,
 * log and --root in the test's temp dir. */
typedef td_daemon daemon_t;

typedef struct rt_env {
	char dir[512];
	char tokpath[600];
	ckptd_secret *cluster;
} rt_env;

static inline uint64_t rt_ms(void)
{
	return td_ms();
}

/* A temp dir with a 0600 cluster token; skips when ckptd is not built. */
static inline void rt_init(rt_env *e, const char *tag)
{
	td_require_ckptd();
	snprintf(e->dir, sizeof(e->dir), "%s", t_tmpdir(tag));
	snprintf(e->tokpath, sizeof(e->tokpath), "%s/token", e->dir);
	td_token_write(e->tokpath, NULL, 0);
	char err[256];
	T_ASSERT(ckptd_secret_load_file(e->tokpath, &e->cluster, err, sizeof(err)) == 0);
}

static inline ckptd_secret *rt_job_secret(const rt_env *e, const char *job)
{
	ckptd_secret *s = NULL;
	T_ASSERT(ckptd_secret_derive_job(e->cluster, job, &s) == 0);
	return s;
}

/* Describes a daemon on host (NULL: no TCP) with the common flags (token,
 * root, node name, debug log) followed by args (NULL-terminated); kept for
 * restarts. */
static inline void rt_daemon_on(const rt_env *e, daemon_t *d, const char *name, const char *host,
                                const char *const *args)
{
	td_daemon_init(d, e->dir, name, host, TD_SOCKET | TD_ROOT);
	const char *argv[TD_MAX_ARGS] = { "--token-file", e->tokpath, "--root", d->root, "--node", name,
	                                  "--log-level", "debug" };
	int n = 8;
	for (int i = 0; args && args[i]; i++) {
		if (n + 1 >= TD_MAX_ARGS)
			T_FAIL("ckptd %s: too many flags", name);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	td_daemon_set_args(d, argv);
}

/* As rt_daemon_on, on 127.0.0.1 when tcp is set. */
static inline void rt_daemon(const rt_env *e, daemon_t *d, const char *name, int tcp, const char *const *args)
{
	rt_daemon_on(e, d, name, tcp ? "127.0.0.1" : NULL, args);
}

/* Starts (or restarts, with the same flags and address) the daemon and
 * waits until its socket accepts. */
static inline void rt_start(const rt_env *e, daemon_t *d)
{
	(void)e;
	td_daemon_start(d, NULL);
}

static inline void rt_kill9(daemon_t *d)
{
	td_daemon_kill9(d);
}

/* SIGTERM; returns the exit status (or -1 after a forced kill). */
static inline int rt_stop(daemon_t *d)
{
	return td_daemon_stop(d);
}

static inline ckptd_client *rt_connect(const char *addr, const char *job, uint32_t role, const ckptd_secret *s)
{
	ckptd_client *c = NULL;
	char err[300];
	int r = ckptd_client_connect(addr, job, role, s, 5000, &c, err, sizeof(err));
	if (r < 0)
		T_FAIL("connect %s: %s", addr, err);
	return c;
}

/* ---------------------------------------------------------------- ranks */

/* The bytes rank writes for version: reproducible anywhere. */
static inline void rt_pattern(void *buf, size_t len, uint64_t version, uint32_t rank)
{
	t_fill(buf, len, version * 100003u + rank + 1);
}

/* A rank: connected to its agent and registered. */
static inline ckptd_client *rt_rank(const char *agent_unix, const char *job, const ckptd_secret *s, uint32_t rank,
                                    uint32_t world)
{
	ckptd_client *c = rt_connect(agent_unix, job, CKPTD_ROLE_RANK, s);
	ckptd_msg m = { .type = CKPTD_MSG_REGISTER_RANK }, rep;
	snprintf(m.u.register_rank.job, sizeof(m.u.register_rank.job), "%s", job);
	m.u.register_rank.rank = rank;
	m.u.register_rank.world_size = world;
	m.u.register_rank.pid = (uint32_t)getpid();
	m.u.register_rank.lineage = 7;
	T_ASSERT(ckptd_client_call(c, &m, &rep) == 0);
	if (rep.type != CKPTD_MSG_OK)
		T_FAIL("REGISTER_RANK refused: %u %s", rep.u.error.code, rep.u.error.text);
	ckptd_msg_free(&rep);
	return c;
}

/* Asks for a segment; returns the reply type (GRANT: *m mapped). */
static inline int rt_segment(ckptd_client *c, const char *job, uint64_t v, uint32_t rank, uint32_t mode,
                             uint64_t bytes, ckptd_mapping *map, uint32_t *err_code)
{
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", job);
	m.u.segment_request.version = v;
	m.u.segment_request.rank = rank;
	m.u.segment_request.mode = mode;
	m.u.segment_request.bytes = mode == CKPTD_SEG_WRITE ? bytes : 0;
	T_ASSERT(ckptd_client_call(c, &m, &rep) == 0);
	int type = rep.type;
	int fd = ckptd_client_take_fd(c);
	if (type == CKPTD_MSG_SEGMENT_GRANT) {
		T_ASSERT(fd >= 0);
		int r = ckptd_seg_map(fd, rep.u.segment_grant.offset, rep.u.segment_grant.bytes,
		                      mode == CKPTD_SEG_WRITE ? CKPTD_MAP_WRITE : 0, map);
		if (r < 0)
			T_FAIL("map of a granted segment failed: %d", r);
	} else if (err_code) {
		*err_code = type == CKPTD_MSG_ERROR ? rep.u.error.code : 0;
	}
	if (fd >= 0)
		close(fd);
	ckptd_msg_free(&rep);
	return type;
}

static inline void rt_shard_done(ckptd_client *c, const char *job, uint64_t v, uint32_t rank, uint32_t world,
                                 uint32_t tier, uint64_t bytes)
{
	ckptd_msg m = { .type = CKPTD_MSG_SHARD_DONE }, rep;
	snprintf(m.u.shard_done.job, sizeof(m.u.shard_done.job), "%s", job);
	m.u.shard_done.version = v;
	m.u.shard_done.rank = rank;
	m.u.shard_done.world_size = world;
	m.u.shard_done.tier = tier;
	m.u.shard_done.bytes = bytes;
	m.u.shard_done.checksum = v * 31 + rank;
	m.u.shard_done.lineage = 7;
	int r = ckptd_client_call(c, &m, &rep);
	if (r < 0)
		T_FAIL("SHARD_DONE v%llu rank %u: %d", (unsigned long long)v, rank, r);
	if (rep.type != CKPTD_MSG_OK)
		T_FAIL("SHARD_DONE v%llu rank %u refused: %u %s", (unsigned long long)v, rank, rep.u.error.code,
		       rep.u.error.text);
	ckptd_msg_free(&rep);
}

/* Saves one shard into node DRAM: grant, copy through our own mapping,
 * SHARD_DONE(LOCAL_MEM). Returns 0, or the ERROR code of a refused grant. */
static inline uint32_t rt_save(ckptd_client *c, const char *job, uint64_t v, uint32_t rank, uint32_t world,
                               size_t bytes)
{
	ckptd_mapping map;
	uint32_t code = 0;
	int t = rt_segment(c, job, v, rank, CKPTD_SEG_WRITE, bytes, &map, &code);
	if (t != CKPTD_MSG_SEGMENT_GRANT)
		return code ? code : 1000;
	rt_pattern(map.addr, bytes, v, rank);
	ckptd_seg_unmap(&map);
	rt_shard_done(c, job, v, rank, world, CKPT_TIER_LOCAL_MEM, bytes);
	return 0;
}

/* Reads the shard back from node DRAM; 0 if bit-exact. */
static inline int rt_verify(ckptd_client *c, const char *job, uint64_t v, uint32_t rank, size_t bytes)
{
	ckptd_mapping map;
	uint32_t code = 0;
	if (rt_segment(c, job, v, rank, CKPTD_SEG_READ, 0, &map, &code) != CKPTD_MSG_SEGMENT_GRANT)
		return -(int)(code ? code : 1000);
	uint8_t *want = malloc(bytes);
	T_ASSERT(want);
	rt_pattern(want, bytes, v, rank);
	int ok = map.len == bytes && memcmp(map.addr, want, bytes) == 0;
	free(want);
	ckptd_seg_unmap(&map);
	return ok ? 0 : 1;
}

/* Waits up to timeout_ms for COMMIT_NOTICE(v) (other notices are skipped).
 * Returns the tier, or 0 on timeout. */
static inline uint32_t rt_wait_notice(ckptd_client *c, uint64_t v, int timeout_ms)
{
	uint64_t end = rt_ms() + (uint64_t)timeout_ms;
	while (rt_ms() < end) {
		ckptd_msg m;
		int r = ckptd_client_poll(c, &m);
		if (r < 0)
			T_FAIL("waiting for a notice: %d", r);
		if (r == 0) {
			struct pollfd p = { .fd = ckptd_client_fd(c), .events = POLLIN };
			poll(&p, 1, 50);
			continue;
		}
		uint32_t tier = m.type == CKPTD_MSG_COMMIT_NOTICE && m.u.commit_notice.version == v ? m.u.commit_notice.tier : 0;
		ckptd_msg_free(&m);
		if (tier)
			return tier;
	}
	return 0;
}

/* LIST_VERSIONS; finds v. Returns 1 and fills *out if listed. */
static inline int rt_list_find(ckptd_client *c, const char *job, uint64_t v, ckptd_version_info *out)
{
	ckptd_msg m = { .type = CKPTD_MSG_LIST_VERSIONS }, rep;
	snprintf(m.u.list_versions.job, sizeof(m.u.list_versions.job), "%s", job);
	m.u.list_versions.start = v;
	m.u.list_versions.limit = 1;
	int r = ckptd_client_call(c, &m, &rep);
	if (r < 0)
		T_FAIL("LIST_VERSIONS: %d", r);
	if (rep.type != CKPTD_MSG_VERSIONS)
		T_FAIL("LIST_VERSIONS answered %u (%s)", rep.type, rep.type == CKPTD_MSG_ERROR ? rep.u.error.text : "");
	int found = rep.u.versions.count == 1 && rep.u.versions.entries[0].version == v;
	if (found && out)
		*out = rep.u.versions.entries[0];
	ckptd_msg_free(&rep);
	return found;
}

/* A simulated agent: connects to the coordinator at coord_tcp and says
 * AGENT_HELLO h. The coordinator may push PARTNERS (placement changed) and
 * notices before its OK, as a real agent's link sees them
 * (ckptd/roles/agent.c, on_link): those are skipped; an ERROR fails. */
static inline ckptd_client *rt_sim_agent_hello(const rt_env *e, const char *coord_tcp, const ckptd_agent_hello *h)
{
	ckptd_client *c = rt_connect(coord_tcp, NULL, CKPTD_ROLE_AGENT, e->cluster);
	ckptd_msg m = { .type = CKPTD_MSG_AGENT_HELLO };
	m.u.agent_hello = *h;
	T_ASSERT(ckptd_client_send(c, &m) == 0);
	for (;;) {
		ckptd_msg rep;
		T_ASSERT(ckptd_client_recv(c, &rep) == 0);
		uint16_t type = rep.type;
		if (type == CKPTD_MSG_ERROR)
			T_FAIL("AGENT_HELLO of %s refused: %u %s", h->node, rep.u.error.code, rep.u.error.text);
		ckptd_msg_free(&rep);
		if (type == CKPTD_MSG_OK)
			return c;
		if (type != CKPTD_MSG_PARTNERS && type != CKPTD_MSG_COMMIT_NOTICE && type != CKPTD_MSG_INTERVAL_NOTICE)
			T_FAIL("AGENT_HELLO of %s answered %s", h->node, ckptd_msg_name(type) ? ckptd_msg_name(type) : "?");
	}
}

/* As rt_sim_agent_hello, as node `node` at address with a DRAM pool. */
static inline ckptd_client *rt_sim_agent(const rt_env *e, const char *coord_tcp, const char *node,
                                         const char *address, uint64_t pool_bytes)
{
	ckptd_agent_hello h = { 0 };
	snprintf(h.node, sizeof(h.node), "%s", node);
	snprintf(h.address, sizeof(h.address), "%s", address);
	h.pool_bytes = pool_bytes;
	return rt_sim_agent_hello(e, coord_tcp, &h);
}

/* Waits until the coordinator's STATUS lists `want` agents up. */
static inline void rt_wait_agents(const rt_env *e, const char *coord_tcp, uint32_t want, int timeout_ms)
{
	uint64_t end = rt_ms() + (uint64_t)timeout_ms;
	uint32_t up = 0;
	while (rt_ms() < end) {
		ckptd_client *c = rt_connect(coord_tcp, NULL, CKPTD_ROLE_CLI, e->cluster);
		ckptd_msg m = { .type = CKPTD_MSG_STATUS }, rep;
		T_ASSERT(ckptd_client_call(c, &m, &rep) == 0 && rep.type == CKPTD_MSG_STATUS_REPLY);
		up = 0;
		for (uint32_t i = 0; i < rep.u.status_reply.count; i++)
			up += rep.u.status_reply.entries[i].state == CKPTD_AGENT_UP;
		ckptd_msg_free(&rep);
		ckptd_client_close(c);
		if (up >= want)
			return;
		usleep(50000);
	}
	T_FAIL("only %u of %u agents up after %d ms", up, want, timeout_ms);
}

/* The job's kept decisions and what followed them (EVENTS, without
 * FOLLOW) through c, each EVENT to fn in order; c is closed after.
 * Returns how many came. */
typedef void (*rt_event_fn)(void *arg, const ckptd_event *e);
static inline int rt_events(ckptd_client *c, const char *job, rt_event_fn fn, void *arg)
{
	ckptd_msg m = { .type = CKPTD_MSG_EVENTS };
	snprintf(m.u.events.job, sizeof(m.u.events.job), "%s", job);
	T_ASSERT(ckptd_client_send(c, &m) == 0);
	int n = 0;
	for (;;) {
		ckptd_msg e;
		if (ckptd_client_recv(c, &e) < 0)
			break;
		int more = e.type == CKPTD_MSG_EVENT;
		if (more) {
			fn(arg, &e.u.event);
			n++;
		}
		ckptd_msg_free(&e);
		if (!more)
			break;
	}
	ckptd_client_close(c);
	return n;
}

#endif
