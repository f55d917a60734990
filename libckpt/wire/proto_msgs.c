/* The control protocol's messages: for each type, the fields it carries
 * (tag, wire type, required or not, limits) and the checks of relations
 * between them. The generic codec in proto.c walks these tables; the
 * layout is specified in docs/protocol.md. */
#include <stdbool.h>
#include <stddef.h>

#include "proto_int.h"

#define MEMBER_SIZE(st, m) sizeof(((st *)0)->m)
#define F_U32(st, m, tag, req) { tag, CKPTD_WIRE_U32, req, CK_NONE, 0, offsetof(st, m), 0, NULL }
#define F_U64(st, m, tag, req) { tag, CKPTD_WIRE_U64, req, CK_NONE, 0, offsetof(st, m), 0, NULL }
#define F_STR(st, m, tag, req, ck) \
	{ tag, CKPTD_WIRE_STR, req, ck, MEMBER_SIZE(st, m) - 1, offsetof(st, m), 0, NULL }
#define F_BYTES(st, m, tag) { tag, CKPTD_WIRE_BYTES, 1, CK_NONE, MEMBER_SIZE(st, m), offsetof(st, m), 0, NULL }
#define F_LIST(st, m, cnt, tag, sch) \
	{ tag, CKPTD_WIRE_LIST, 0, CK_NONE, CKPTD_MAX_LIST, offsetof(st, m), offsetof(st, cnt), &sch }
#define SCHEMA(st, fields, chk) { fields, sizeof(fields) / sizeof(fields[0]), sizeof(st), chk }
#define REQ 1
#define OPT 0

static bool one_tier(uint32_t t) { return t && !(t & ~0xfu) && !(t & (t - 1)); }

static const char *check_error(const void *r)
{
	const ckptd_error *e = r;
	return e->code ? NULL : "ERROR code 0";
}

static const char *check_hello(const void *r)
{
	const ckptd_hello *h = r;
	if (h->role < CKPTD_ROLE_RANK || h->role > CKPTD_ROLE_CLI)
		return "unknown role";
	if (h->role == CKPTD_ROLE_RANK && !h->job[0])
		return "a rank must name its job";
	if (h->role == CKPTD_ROLE_AGENT && h->job[0])
		return "an agent speaks for the cluster, not a job";
	return NULL;
}

static const char *check_register(const void *r)
{
	const ckptd_register_rank *m = r;
	return m->world_size && m->rank < m->world_size ? NULL : "rank not below world size";
}

static const char *check_seg_request(const void *r)
{
	const ckptd_segment_request *m = r;
	if (m->mode == CKPTD_SEG_WRITE)
		return m->bytes ? NULL : "segment of 0 bytes";
	if (m->mode >= CKPTD_SEG_READ && m->mode <= CKPTD_SEG_EC_WHERE)
		return m->bytes ? "a read or locate request names no size" : NULL;
	return "unknown segment mode";
}

static const char *check_seg_grant(const void *r)
{
	const ckptd_segment_grant *m = r;
	if (!m->bytes)
		return "segment of 0 bytes";
	return m->offset > UINT64_MAX - m->bytes ? "segment offset + bytes overflows" : NULL;
}

static const char *check_shard_done(const void *r)
{
	const ckptd_shard_done *m = r;
	if (!one_tier(m->tier))
		return "tier is not one known tier";
	if (m->tiers & ~0xfu)
		return "unknown tier bits";
	return !m->world_size || m->rank < m->world_size ? NULL : "rank not below world size";
}

static const char *check_commit(const void *r)
{
	const ckptd_commit_notice *m = r;
	return one_tier(m->tier) ? NULL : "tier is not one known tier";
}

static const char *check_version_info(const void *r)
{
	const ckptd_version_info *v = r;
	if (v->state < CKPT_STATE_PENDING || v->state > CKPT_STATE_DELETING)
		return "unknown version state";
	if (!v->world_size || v->shards_done > v->world_size)
		return "shards done not within world size";
	if (v->gone > 1 || (v->gone && v->state == CKPT_STATE_COMMITTED))
		return "GONE is 0, or 1 for a version not committed now";
	return v->tiers & ~0xfu ? "unknown tier bits" : NULL;
}

static const char *check_versions(const void *r)
{
	const ckptd_versions *m = r;
	return m->more > 1 ? "MORE is not 0 or 1" : NULL;
}

static const char *check_agent_info(const void *r)
{
	const ckptd_agent_info *a = r;
	if (a->state < CKPTD_AGENT_UP || a->state > CKPTD_AGENT_DEGRADED)
		return "unknown agent state";
	return a->pool_used > a->pool_bytes ? "pool used exceeds pool size" : NULL;
}

static const char *check_status_reply(const void *r)
{
	const ckptd_status_reply *m = r;
	if (!m->roles || (m->roles & ~(uint32_t)(CKPTD_SERVES_AGENT | CKPTD_SERVES_COORDINATOR)))
		return "unknown daemon roles";
	return m->pool_used > m->pool_bytes ? "pool used exceeds pool size" : NULL;
}

static const char *check_group_member(const void *r)
{
	const ckptd_group_member *g = r;
	return g->state < CKPTD_AGENT_UP || g->state > CKPTD_AGENT_DEGRADED ? "unknown agent state" : NULL;
}

static const char *check_group_info(const void *r)
{
	const ckptd_group_info *g = r;
	if (g->members < 2 || g->members > 64)
		return "group width out of range";
	return g->lost > g->members || g->losses_left >= g->members ? "group losses exceed its members" : NULL;
}

static const char *check_ec_node(const void *r)
{
	const ckptd_ec_node *n = r;
	return n->member < 64 ? NULL : "member past the widest group";
}

static const char *check_ec_src(const void *r)
{
	const ckptd_ec_src *e = r;
	if (e->member >= 64)
		return "member past the widest group";
	return e->bytes ? NULL : "an empty member is not listed";
}

static const char *check_ec_plan(const void *r)
{
	const ckptd_ec_plan *m = r;
	if (m->k < 1 || m->m < 1 || m->k + m->m > 64)
		return "K, M out of range";
	if (m->nnodes != m->k + m->m || m->member >= m->nnodes)
		return "not every member listed once";
	uint64_t seen = 0;
	for (uint32_t i = 0; i < m->nnodes; i++) {
		if (m->nodes[i].member >= m->nnodes || (seen >> m->nodes[i].member & 1))
			return "not every member listed once";
		seen |= 1ull << m->nodes[i].member;
	}
	for (uint32_t i = 0; i < m->count; i++)
		if (m->entries[i].member >= m->nnodes)
			return "a shard on no member";
	return NULL;
}

static const char *check_tier_stat(const void *r)
{
	const ckptd_tier_stat *t = r;
	return one_tier(t->tier) ? NULL : "tier is not one known tier";
}

static const char *check_held(const void *r)
{
	const ckptd_held_shard *h = r;
	if (!h->tiers || (h->tiers & ~0xfu) || (h->committed & ~0xfu))
		return "unknown or no tier bits";
	return !h->world_size || h->rank < h->world_size ? NULL : "rank not below world size";
}

static const char *check_copy_info(const void *r)
{
	const ckptd_copy_info *c = r;
	if (!one_tier(c->tier))
		return "tier is not one known tier";
	return c->state == 1 || c->state == 2 ? NULL : "unknown copy state";
}

static const char *check_detail(const void *r)
{
	const ckptd_version_detail *m = r;
	if (m->state < CKPT_STATE_PENDING || m->state > CKPT_STATE_DELETING)
		return "unknown version state";
	if (!m->world_size || (m->tiers & ~0xfu))
		return "no world size or unknown tier bits";
	return m->more > 1 || m->restorable > 1 ? "MORE or RESTORABLE is not 0 or 1" : NULL;
}

static const char *check_gc(const void *r)
{
	const ckptd_gc *m = r;
	if (m->policy > 1)
		return "POLICY is not 0 or 1";
	return m->policy || !(m->keep_dram || m->keep_disk || m->keep_every) ? NULL
	                                                                     : "keep fields without POLICY";
}

static const char *check_tiers_mask(const void *r)
{
	const ckptd_delete_version *m = r;
	return m->tiers & ~0xfu ? "unknown tier bits" : NULL;
}

static const char *check_vresult(const void *r)
{
	const ckptd_verify_result *v = r;
	if (!one_tier(v->tier))
		return "tier is not one known tier";
	return v->code <= CKPTD_VERIFY_ERROR ? NULL : "unknown verify result";
}

static const char *check_vreply(const void *r)
{
	const ckptd_verify_reply *m = r;
	return m->more > 1 ? "MORE is not 0 or 1" : NULL;
}

static const char *check_location(const void *r)
{
	const ckptd_location *m = r;
	if (m->tiers & ~0xfu)
		return "unknown tier bits";
	return !m->root[0] == !(m->tiers & CKPT_TIER_LOCAL_DISK) ? NULL : "ROOT goes with LOCAL_DISK";
}

static const char *check_rank_step(const void *r)
{
	const ckptd_rank_step *e = r;
	return e->state == CKPTD_RANK_OK || e->state == CKPTD_RANK_STRAGGLER ? NULL : "unknown rank state";
}

static const char *check_step_reply(const void *r)
{
	const ckptd_step_stats_reply *m = r;
	return m->more > 1 ? "MORE is not 0 or 1" : NULL;
}

static const char *check_peer_lease(const void *r)
{
	const ckptd_peer_lease *m = r;
	if (!m->world_size || m->rank >= m->world_size)
		return "rank not below world size";
	return m->bytes ? NULL : "a lease of 0 bytes";
}

static const char *check_peer_grant(const void *r)
{
	const ckptd_peer_grant *m = r;
	if (!m->fabric_addr_len || m->fabric_addr_len > CKPTD_FABADDR_MAX)
		return "fabric address length out of range";
	if (!m->bytes)
		return "a slot of 0 bytes";
	return m->offset > UINT64_MAX - m->bytes ? "slot offset + bytes overflows" : NULL;
}

static const char *check_partner(const void *r)
{
	const ckptd_partner *p = r;
	if (p->tier && !one_tier(p->tier))
		return "TIER is one tier bit";
	return p->state <= CKPTD_AGENT_DEGRADED ? NULL : "unknown agent state";
}

static const char *check_preempt(const void *r)
{
	const ckptd_preempt *m = r;
	if (m->source < CKPTD_NOTICE_SRC_AWS || m->source > CKPTD_NOTICE_SRC_STRAGGLER)
		return "unknown notice source";
	return NULL;
}

static const char *check_emergency(const void *r)
{
	const ckptd_emergency *m = r;
	if (!m->step)
		return "an emergency at step 0";
	return m->tier && !one_tier(m->tier) ? "TIER is one tier bit" : NULL;
}

static const char *check_interval(const void *r)
{
	const ckptd_interval_notice *m = r;
	return m->every ? NULL : "an interval of 0 steps";
}

static const char *check_gone(const void *r)
{
	const ckptd_copies_gone *m = r;
	return m->tiers && !(m->tiers & ~0xfu) ? NULL : "unknown or no tier bits";
}

static const char *check_inventory(const void *r)
{
	const ckptd_agent_inventory *m = r;
	return m->final > 1 ? "FINAL is not 0 or 1" : NULL;
}

static const ckptd__field f_error[] = {
	F_U32(ckptd_error, code, CKPTD_TAG_CODE, REQ),
	F_STR(ckptd_error, text, CKPTD_TAG_TEXT, OPT, CK_TEXT),
	F_U32(ckptd_error, peer_version, CKPTD_TAG_PEER_VERSION, OPT),
	F_U32(ckptd_error, own_version, CKPTD_TAG_OWN_VERSION, OPT),
};
static const ckptd__field f_ok[] = {
	F_U64(ckptd_ok, version, CKPTD_TAG_VERSION, OPT),
	F_U32(ckptd_ok, count, CKPTD_TAG_COUNT, OPT),
	F_STR(ckptd_ok, address, CKPTD_TAG_ADDRESS, OPT, CK_ADDR),
	F_U32(ckptd_ok, wait_ms, CKPTD_TAG_WAIT_MS, OPT),
};
static const ckptd__field f_hello[] = {
	F_U32(ckptd_hello, role, CKPTD_TAG_ROLE, REQ),
	F_STR(ckptd_hello, job, CKPTD_TAG_JOB, OPT, CK_JOB),
	F_BYTES(ckptd_hello, nonce, CKPTD_TAG_NONCE),
};
static const ckptd__field f_challenge[] = {
	F_BYTES(ckptd_challenge, nonce, CKPTD_TAG_NONCE),
};
static const ckptd__field f_auth[] = {
	F_BYTES(ckptd_auth_msg, mac, CKPTD_TAG_MAC),
};
static const ckptd__field f_auth_ok[] = {
	F_BYTES(ckptd_auth_ok, mac, CKPTD_TAG_MAC),
};
static const ckptd__field f_register[] = {
	F_STR(ckptd_register_rank, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U32(ckptd_register_rank, rank, CKPTD_TAG_RANK, REQ),
	F_U32(ckptd_register_rank, world_size, CKPTD_TAG_WORLD_SIZE, REQ),
	F_U32(ckptd_register_rank, pid, CKPTD_TAG_PID, REQ),
	F_U64(ckptd_register_rank, lineage, CKPTD_TAG_LINEAGE, OPT),
	F_STR(ckptd_register_rank, root, CKPTD_TAG_ROOT, OPT, CK_PATH),
	F_U32(ckptd_register_rank, beat_ms, CKPTD_TAG_BEAT_MS, OPT),
};
static const ckptd__field f_seg_release[] = {
	F_U64(ckptd_segment_release, segment_id, CKPTD_TAG_SEGMENT_ID, REQ),
};
static const ckptd__field f_seg_request[] = {
	F_STR(ckptd_segment_request, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_segment_request, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_segment_request, rank, CKPTD_TAG_RANK, REQ),
	F_U32(ckptd_segment_request, mode, CKPTD_TAG_MODE, REQ),
	F_U64(ckptd_segment_request, bytes, CKPTD_TAG_BYTES, OPT),
};
static const ckptd__field f_seg_grant[] = {
	F_U64(ckptd_segment_grant, segment_id, CKPTD_TAG_SEGMENT_ID, REQ),
	F_U64(ckptd_segment_grant, offset, CKPTD_TAG_OFFSET, REQ),
	F_U64(ckptd_segment_grant, bytes, CKPTD_TAG_BYTES, REQ),
};
static const ckptd__field f_shard_done[] = {
	F_STR(ckptd_shard_done, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_shard_done, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_shard_done, rank, CKPTD_TAG_RANK, REQ),
	F_U32(ckptd_shard_done, world_size, CKPTD_TAG_WORLD_SIZE, OPT),
	F_U32(ckptd_shard_done, tier, CKPTD_TAG_TIER, REQ),
	F_U64(ckptd_shard_done, bytes, CKPTD_TAG_BYTES, REQ),
	F_U64(ckptd_shard_done, checksum, CKPTD_TAG_CHECKSUM, REQ),
	F_U64(ckptd_shard_done, lineage, CKPTD_TAG_LINEAGE, REQ),
	F_U64(ckptd_shard_done, stall_ns, CKPTD_TAG_STALL_NS, OPT),
	F_U64(ckptd_shard_done, durable_ns, CKPTD_TAG_DURABLE_NS, OPT),
	F_U32(ckptd_shard_done, tiers, CKPTD_TAG_TIERS, OPT),
};
static const ckptd__field f_commit[] = {
	F_STR(ckptd_commit_notice, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_commit_notice, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_commit_notice, tier, CKPTD_TAG_TIER, REQ),
};
static const ckptd__field f_step[] = {
	F_STR(ckptd_step_report, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U32(ckptd_step_report, rank, CKPTD_TAG_RANK, REQ),
	F_U64(ckptd_step_report, step, CKPTD_TAG_STEP, REQ),
	F_U64(ckptd_step_report, step_ns, CKPTD_TAG_STEP_NS, REQ),
	F_U32(ckptd_step_report, count, CKPTD_TAG_COUNT, OPT),
	F_STR(ckptd_step_report, node, CKPTD_TAG_NODE, OPT, CK_NAME),
	F_U64(ckptd_step_report, stall_ns, CKPTD_TAG_STALL_NS, OPT),
	F_U64(ckptd_step_report, restore_ns, CKPTD_TAG_RESTORE_NS, OPT),
	F_U32(ckptd_step_report, saves, CKPTD_TAG_SAVES, OPT),
	F_U32(ckptd_step_report, restore_tier, CKPTD_TAG_RESTORE_TIER, OPT),
	F_U32(ckptd_step_report, errors, CKPTD_TAG_ERRORS, OPT),
	F_U32(ckptd_step_report, peer_skips, CKPTD_TAG_PEER_SKIPS, OPT),
	F_U32(ckptd_step_report, fabric_errors, CKPTD_TAG_FABRIC_ERRORS, OPT),
};
static const ckptd__field f_interval[] = {
	F_STR(ckptd_interval_notice, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_interval_notice, every, CKPTD_TAG_INTERVAL_STEPS, REQ),
	F_U64(ckptd_interval_notice, from, CKPTD_TAG_START, OPT),
	F_U64(ckptd_interval_notice, interval_ns, CKPTD_TAG_INTERVAL_NS, OPT),
};
static const ckptd__field f_goodput[] = {
	F_STR(ckptd_goodput, job, CKPTD_TAG_JOB, REQ, CK_JOB),
};
static const ckptd__field f_gslice[] = {
	F_U64(ckptd_goodput_slice, start, CKPTD_TAG_START, OPT),
	F_U64(ckptd_goodput_slice, useful_ns, CKPTD_TAG_USEFUL_NS, OPT),
	F_U64(ckptd_goodput_slice, stall_ns, CKPTD_TAG_STALL_NS, OPT),
	F_U64(ckptd_goodput_slice, restore_ns, CKPTD_TAG_RESTORE_NS, OPT),
	F_U64(ckptd_goodput_slice, recompute_ns, CKPTD_TAG_RECOMPUTE_NS, OPT),
	F_U64(ckptd_goodput_slice, down_ns, CKPTD_TAG_DOWN_NS, OPT),
};
static const ckptd__schema s_gslice = SCHEMA(ckptd_goodput_slice, f_gslice, NULL);
static const ckptd__field f_goodput_reply[] = {
	F_STR(ckptd_goodput_reply, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_goodput_reply, wall_ns, CKPTD_TAG_WALL_NS, OPT),
	F_U64(ckptd_goodput_reply, useful_ns, CKPTD_TAG_USEFUL_NS, OPT),
	F_U64(ckptd_goodput_reply, stall_ns, CKPTD_TAG_STALL_NS, OPT),
	F_U64(ckptd_goodput_reply, restore_ns, CKPTD_TAG_RESTORE_NS, OPT),
	F_U64(ckptd_goodput_reply, recompute_ns, CKPTD_TAG_RECOMPUTE_NS, OPT),
	F_U64(ckptd_goodput_reply, down_ns, CKPTD_TAG_DOWN_NS, OPT),
	F_U32(ckptd_goodput_reply, failures, CKPTD_TAG_FAILURES, OPT),
	F_U64(ckptd_goodput_reply, step, CKPTD_TAG_STEP, OPT),
	F_U64(ckptd_goodput_reply, bucket_ns, CKPTD_TAG_BUCKET_NS, OPT),
	F_U64(ckptd_goodput_reply, interval_steps, CKPTD_TAG_INTERVAL_STEPS, OPT),
	F_U64(ckptd_goodput_reply, interval_ns, CKPTD_TAG_INTERVAL_NS, OPT),
	F_U64(ckptd_goodput_reply, mtbf_ns, CKPTD_TAG_MTBF_NS, OPT),
	F_U64(ckptd_goodput_reply, cost_ns, CKPTD_TAG_COST_NS, OPT),
	F_LIST(ckptd_goodput_reply, entries, count, CKPTD_TAG_ENTRIES, s_gslice),
};
static const ckptd__field f_step_stats[] = {
	F_STR(ckptd_step_stats, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_step_stats, start, CKPTD_TAG_START, OPT),
};
static const ckptd__field f_rank_step[] = {
	F_U32(ckptd_rank_step, rank, CKPTD_TAG_RANK, REQ),
	F_U64(ckptd_rank_step, step, CKPTD_TAG_STEP, REQ),
	F_U64(ckptd_rank_step, step_ns, CKPTD_TAG_STEP_NS, REQ),
	F_U32(ckptd_rank_step, state, CKPTD_TAG_STATE, REQ),
	F_STR(ckptd_rank_step, node, CKPTD_TAG_NODE, OPT, CK_NAME),
};
static const ckptd__schema s_rank_step = SCHEMA(ckptd_rank_step, f_rank_step, check_rank_step);
static const ckptd__field f_step_stats_reply[] = {
	F_STR(ckptd_step_stats_reply, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U32(ckptd_step_stats_reply, more, CKPTD_TAG_MORE, OPT),
	F_LIST(ckptd_step_stats_reply, entries, count, CKPTD_TAG_ENTRIES, s_rank_step),
};
static const ckptd__field f_list_versions[] = {
	F_STR(ckptd_list_versions, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_list_versions, start, CKPTD_TAG_START, OPT),
	F_U32(ckptd_list_versions, limit, CKPTD_TAG_LIMIT, OPT),
};
static const ckptd__field f_version_info[] = {
	F_U64(ckptd_version_info, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_version_info, state, CKPTD_TAG_STATE, REQ),
	F_U32(ckptd_version_info, world_size, CKPTD_TAG_WORLD_SIZE, REQ),
	F_U32(ckptd_version_info, shards_done, CKPTD_TAG_SHARDS_DONE, REQ),
	F_U64(ckptd_version_info, bytes, CKPTD_TAG_BYTES, REQ),
	F_U32(ckptd_version_info, tiers, CKPTD_TAG_TIERS, REQ),
	F_U32(ckptd_version_info, gone, CKPTD_TAG_GONE, OPT),
};
static const ckptd__schema s_version_info = SCHEMA(ckptd_version_info, f_version_info, check_version_info);
static const ckptd__field f_versions[] = {
	F_STR(ckptd_versions, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U32(ckptd_versions, more, CKPTD_TAG_MORE, OPT),
	F_LIST(ckptd_versions, entries, count, CKPTD_TAG_ENTRIES, s_version_info),
};
static const ckptd__field f_delete[] = {
	F_STR(ckptd_delete_version, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_delete_version, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_delete_version, tiers, CKPTD_TAG_TIERS, OPT),
};
static const ckptd__field f_gc[] = {
	F_STR(ckptd_gc, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U32(ckptd_gc, policy, CKPTD_TAG_POLICY, OPT),
	F_U32(ckptd_gc, keep_dram, CKPTD_TAG_KEEP_DRAM, OPT),
	F_U32(ckptd_gc, keep_disk, CKPTD_TAG_KEEP_DISK, OPT),
	F_U64(ckptd_gc, keep_every, CKPTD_TAG_KEEP_EVERY, OPT),
};
static const ckptd__field f_show[] = {
	F_STR(ckptd_show_version, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_show_version, version, CKPTD_TAG_VERSION, REQ),
	F_U64(ckptd_show_version, start, CKPTD_TAG_START, OPT),
};
static const ckptd__field f_copy_info[] = {
	F_U32(ckptd_copy_info, rank, CKPTD_TAG_RANK, REQ),
	F_U32(ckptd_copy_info, tier, CKPTD_TAG_TIER, REQ),
	F_U32(ckptd_copy_info, state, CKPTD_TAG_STATE, REQ),
	F_STR(ckptd_copy_info, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_U64(ckptd_copy_info, bytes, CKPTD_TAG_BYTES, REQ),
	F_U64(ckptd_copy_info, checksum, CKPTD_TAG_CHECKSUM, REQ),
};
static const ckptd__schema s_copy_info = SCHEMA(ckptd_copy_info, f_copy_info, check_copy_info);
static const ckptd__field f_detail[] = {
	F_STR(ckptd_version_detail, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_version_detail, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_version_detail, state, CKPTD_TAG_STATE, REQ),
	F_U32(ckptd_version_detail, world_size, CKPTD_TAG_WORLD_SIZE, REQ),
	F_U32(ckptd_version_detail, tiers, CKPTD_TAG_TIERS, REQ),
	F_U32(ckptd_version_detail, restorable, CKPTD_TAG_RESTORABLE, OPT),
	F_U32(ckptd_version_detail, more, CKPTD_TAG_MORE, OPT),
	F_LIST(ckptd_version_detail, entries, count, CKPTD_TAG_ENTRIES, s_copy_info),
};
static const ckptd__field f_verify[] = {
	F_STR(ckptd_verify, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_verify, version, CKPTD_TAG_VERSION, REQ),
};
static const ckptd__field f_vresult[] = {
	F_U32(ckptd_verify_result, rank, CKPTD_TAG_RANK, REQ),
	F_U32(ckptd_verify_result, tier, CKPTD_TAG_TIER, REQ),
	F_U32(ckptd_verify_result, code, CKPTD_TAG_CODE, OPT),
	F_STR(ckptd_verify_result, text, CKPTD_TAG_TEXT, OPT, CK_TEXT),
};
static const ckptd__schema s_vresult = SCHEMA(ckptd_verify_result, f_vresult, check_vresult);
static const ckptd__field f_vreply[] = {
	F_STR(ckptd_verify_reply, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_verify_reply, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_verify_reply, more, CKPTD_TAG_MORE, OPT),
	F_LIST(ckptd_verify_reply, entries, count, CKPTD_TAG_ENTRIES, s_vresult),
};
static const ckptd__field f_location[] = {
	F_STR(ckptd_location, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_location, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_location, rank, CKPTD_TAG_RANK, REQ),
	F_U32(ckptd_location, tiers, CKPTD_TAG_TIERS, OPT),
	F_STR(ckptd_location, root, CKPTD_TAG_ROOT, OPT, CK_PATH),
	F_U64(ckptd_location, checksum, CKPTD_TAG_CHECKSUM, OPT),
};
static const ckptd__field f_gone[] = {
	F_STR(ckptd_copies_gone, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_STR(ckptd_copies_gone, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_copies_gone, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_copies_gone, tiers, CKPTD_TAG_TIERS, REQ),
};
static const ckptd__field f_status[] = {
	F_STR(ckptd_status, job, CKPTD_TAG_JOB, OPT, CK_JOB),
};
static const ckptd__field f_agent_info[] = {
	F_STR(ckptd_agent_info, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_STR(ckptd_agent_info, address, CKPTD_TAG_ADDRESS, REQ, CK_ADDR),
	F_STR(ckptd_agent_info, domain, CKPTD_TAG_DOMAIN, OPT, CK_NAME),
	F_U64(ckptd_agent_info, pool_bytes, CKPTD_TAG_POOL_BYTES, REQ),
	F_U64(ckptd_agent_info, pool_used, CKPTD_TAG_POOL_USED, REQ),
	F_U32(ckptd_agent_info, state, CKPTD_TAG_STATE, REQ),
};
static const ckptd__schema s_agent_info = SCHEMA(ckptd_agent_info, f_agent_info, check_agent_info);
static const ckptd__field f_tier_stat[] = {
	F_U32(ckptd_tier_stat, tier, CKPTD_TAG_TIER, REQ),
	F_U32(ckptd_tier_stat, versions, CKPTD_TAG_VERSIONS, REQ),
	F_U64(ckptd_tier_stat, bytes, CKPTD_TAG_BYTES, REQ),
	F_U32(ckptd_tier_stat, degraded, CKPTD_TAG_COUNT, OPT),
};
static const ckptd__schema s_tier_stat = SCHEMA(ckptd_tier_stat, f_tier_stat, check_tier_stat);
static const ckptd__field f_group_info[] = {
	F_U32(ckptd_group_info, group, CKPTD_TAG_GROUP, REQ),
	F_U32(ckptd_group_info, members, CKPTD_TAG_COUNT, REQ),
	F_U32(ckptd_group_info, lost, CKPTD_TAG_LOST, REQ),
	F_U32(ckptd_group_info, losses_left, CKPTD_TAG_LOSSES_LEFT, REQ),
};
static const ckptd__schema s_group_info = SCHEMA(ckptd_group_info, f_group_info, check_group_info);
static const ckptd__field f_group_member[] = {
	F_U32(ckptd_group_member, group, CKPTD_TAG_GROUP, REQ),
	F_STR(ckptd_group_member, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_U32(ckptd_group_member, state, CKPTD_TAG_STATE, REQ),
};
static const ckptd__schema s_group_member = SCHEMA(ckptd_group_member, f_group_member, check_group_member);
static const char *check_kind(uint32_t k)
{
	return (k >= CKPTD_FAIL_RANK_DIED && k <= CKPTD_FAIL_RANK_HUNG) || k == CKPTD_FAIL_STRAGGLER
	       ? NULL : "unknown failure kind";
}
static const char *check_job_epoch(const void *r)
{
	const ckptd_job_epoch *e = r;
	return e->epoch ? check_kind(e->kind) : "epoch 0";
}
static const ckptd__field f_job_epoch[] = {
	F_STR(ckptd_job_epoch, job, CKPTD_TAG_JOB, OPT, CK_JOB),
	F_U64(ckptd_job_epoch, epoch, CKPTD_TAG_EPOCH, REQ),
	F_U32(ckptd_job_epoch, kind, CKPTD_TAG_KIND, REQ),
	F_STR(ckptd_job_epoch, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_U64(ckptd_job_epoch, time_ns, CKPTD_TAG_TIME_NS, REQ),
	F_STR(ckptd_job_epoch, ranks, CKPTD_TAG_RANKS, OPT, CK_TEXT),
};
static const ckptd__schema s_job_epoch = SCHEMA(ckptd_job_epoch, f_job_epoch, check_job_epoch);
/* ---- 1.6: spares and the recovery timeline ---- */
static const char *check_recovery(const void *r)
{
	const ckptd_recovery *e = r;
	if (!e->epoch)
		return "epoch 0";
	const char *k = check_kind(e->kind);
	if (k)
		return k;
	/* Each phase ends at or after the one before it (0: not reached). */
	const uint64_t t[] = { e->failed_ns, e->detected_ns, e->chosen_ns, e->ready_ns, e->registered_ns,
	                       e->restored_ns, e->first_step_ns };
	uint64_t last = 0;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (t[i] && t[i] < last)
			return "a recovery phase ends before the one before it";
		if (t[i])
			last = t[i];
	}
	return e->detected_ns && e->failed_ns <= e->detected_ns ? NULL : "recovery without its detection";
}
static const ckptd__field f_recovery[] = {
	F_U32(ckptd_recovery, code, CKPTD_TAG_CODE, OPT),
	F_STR(ckptd_recovery, text, CKPTD_TAG_TEXT, OPT, CK_TEXT),
	F_STR(ckptd_recovery, job, CKPTD_TAG_JOB, OPT, CK_JOB),
	F_U64(ckptd_recovery, bytes, CKPTD_TAG_BYTES, OPT),
	F_STR(ckptd_recovery, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_U64(ckptd_recovery, epoch, CKPTD_TAG_EPOCH, REQ),
	F_U32(ckptd_recovery, kind, CKPTD_TAG_KIND, REQ),
	F_STR(ckptd_recovery, ranks, CKPTD_TAG_RANKS, OPT, CK_TEXT),
	F_STR(ckptd_recovery, spare, CKPTD_TAG_SPARE_NODE, OPT, CK_NAME),
	F_U64(ckptd_recovery, failed_ns, CKPTD_TAG_FAILED_NS, REQ),
	F_U64(ckptd_recovery, detected_ns, CKPTD_TAG_DETECTED_NS, REQ),
	F_U64(ckptd_recovery, chosen_ns, CKPTD_TAG_CHOSEN_NS, OPT),
	F_U64(ckptd_recovery, ready_ns, CKPTD_TAG_READY_NS, OPT),
	F_U64(ckptd_recovery, registered_ns, CKPTD_TAG_REGISTERED_NS, OPT),
	F_U64(ckptd_recovery, restored_ns, CKPTD_TAG_RESTORED_NS, OPT),
	F_U64(ckptd_recovery, first_step_ns, CKPTD_TAG_FIRST_STEP_NS, OPT),
	F_U64(ckptd_recovery, protected_ns, CKPTD_TAG_PROTECTED_NS, OPT),
};
static const ckptd__schema s_recovery = SCHEMA(ckptd_recovery, f_recovery, check_recovery);
static const ckptd__field f_spare_rank[] = {
	F_U32(ckptd_spare_rank, rank, CKPTD_TAG_RANK, REQ),
	F_U64(ckptd_spare_rank, bytes, CKPTD_TAG_BYTES, OPT),
};
static const ckptd__schema s_spare_rank = SCHEMA(ckptd_spare_rank, f_spare_rank, NULL);
static const ckptd__field f_spare_assign[] = {
	F_STR(ckptd_spare_assign, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_spare_assign, version, CKPTD_TAG_VERSION, OPT),
	F_LIST(ckptd_spare_assign, entries, count, CKPTD_TAG_ENTRIES, s_spare_rank),
	F_STR(ckptd_spare_assign, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_U64(ckptd_spare_assign, epoch, CKPTD_TAG_EPOCH, REQ),
};
static const char *check_spare_assign(const void *r)
{
	const ckptd_spare_assign *m = r;
	return !m->epoch ? "epoch 0" : !m->count ? "an assignment of no ranks" : NULL;
}
static const ckptd__field f_spare_done[] = {
	F_U32(ckptd_spare_done, code, CKPTD_TAG_CODE, OPT),
	F_STR(ckptd_spare_done, text, CKPTD_TAG_TEXT, OPT, CK_TEXT),
	F_STR(ckptd_spare_done, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_spare_done, version, CKPTD_TAG_VERSION, OPT),
	F_U64(ckptd_spare_done, bytes, CKPTD_TAG_BYTES, OPT),
	F_U32(ckptd_spare_done, count, CKPTD_TAG_COUNT, OPT),
	F_U64(ckptd_spare_done, epoch, CKPTD_TAG_EPOCH, REQ),
};
static const char *check_spare_done(const void *r)
{
	const ckptd_spare_done *m = r;
	return m->epoch ? NULL : "epoch 0";
}
static const ckptd__field f_recoveries[] = {
	F_STR(ckptd_recoveries, job, CKPTD_TAG_JOB, OPT, CK_JOB),
};
static const ckptd__field f_recoveries_reply[] = {
	F_STR(ckptd_recoveries_reply, job, CKPTD_TAG_JOB, OPT, CK_JOB),
	F_LIST(ckptd_recoveries_reply, entries, count, CKPTD_TAG_ENTRIES, s_recovery),
};
static const ckptd__field f_status_reply[] = {
	F_STR(ckptd_status_reply, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_U32(ckptd_status_reply, roles, CKPTD_TAG_ROLES, REQ),
	F_U64(ckptd_status_reply, pool_bytes, CKPTD_TAG_POOL_BYTES, OPT),
	F_U64(ckptd_status_reply, pool_used, CKPTD_TAG_POOL_USED, OPT),
	F_U32(ckptd_status_reply, jobs, CKPTD_TAG_JOBS, OPT),
	F_U32(ckptd_status_reply, versions, CKPTD_TAG_VERSIONS, OPT),
	F_LIST(ckptd_status_reply, entries, count, CKPTD_TAG_ENTRIES, s_agent_info),
	F_LIST(ckptd_status_reply, tier_stats, ntiers, CKPTD_TAG_TIER_STATS, s_tier_stat),
	F_STR(ckptd_status_reply, scheme, CKPTD_TAG_SCHEME, OPT, CK_TEXT),
	F_U32(ckptd_status_reply, ungrouped, CKPTD_TAG_UNGROUPED, OPT),
	F_LIST(ckptd_status_reply, groups, ngroups, CKPTD_TAG_GROUPS, s_group_info),
	F_LIST(ckptd_status_reply, members, nmembers, CKPTD_TAG_MEMBERS, s_group_member),
	F_LIST(ckptd_status_reply, epochs, nepochs, CKPTD_TAG_EPOCHS, s_job_epoch),
	F_LIST(ckptd_status_reply, recoveries, nrecoveries, CKPTD_TAG_RECOVERIES, s_recovery),
};
static const ckptd__field f_agent_hello[] = {
	F_STR(ckptd_agent_hello, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_STR(ckptd_agent_hello, address, CKPTD_TAG_ADDRESS, REQ, CK_ADDR),
	F_STR(ckptd_agent_hello, domain, CKPTD_TAG_DOMAIN, OPT, CK_NAME),
	F_U64(ckptd_agent_hello, pool_bytes, CKPTD_TAG_POOL_BYTES, REQ),
	F_U64(ckptd_agent_hello, peer_bytes, CKPTD_TAG_PEER_BYTES, OPT),
	F_STR(ckptd_agent_hello, host, CKPTD_TAG_HOST_DOMAIN, OPT, CK_NAME),
	F_STR(ckptd_agent_hello, sw, CKPTD_TAG_SWITCH_DOMAIN, OPT, CK_NAME),
	F_STR(ckptd_agent_hello, power, CKPTD_TAG_POWER_DOMAIN, OPT, CK_NAME),
	F_U32(ckptd_agent_hello, beat_ms, CKPTD_TAG_BEAT_MS, OPT),
	F_U32(ckptd_agent_hello, spare, CKPTD_TAG_SPARE, OPT),
};
static const ckptd__field f_partner[] = {
	F_STR(ckptd_partner, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_STR(ckptd_partner, address, CKPTD_TAG_ADDRESS, REQ, CK_ADDR),
	F_STR(ckptd_partner, domain, CKPTD_TAG_DOMAIN, OPT, CK_NAME),
	F_U32(ckptd_partner, tier, CKPTD_TAG_TIER, OPT),
	F_U32(ckptd_partner, state, CKPTD_TAG_STATE, OPT),
};
static const ckptd__schema s_partner = SCHEMA(ckptd_partner, f_partner, check_partner);
static const ckptd__field f_partners[] = {
	F_STR(ckptd_partners, job, CKPTD_TAG_JOB, OPT, CK_JOB),
	F_U64(ckptd_partners, version, CKPTD_TAG_VERSION, OPT),
	F_U32(ckptd_partners, rank, CKPTD_TAG_RANK, OPT),
	F_U32(ckptd_partners, replicas, CKPTD_TAG_REPLICAS, OPT),
	F_LIST(ckptd_partners, entries, count, CKPTD_TAG_ENTRIES, s_partner),
	F_STR(ckptd_partners, scheme, CKPTD_TAG_SCHEME, OPT, CK_TEXT),
};
static const ckptd__field f_peer_lease[] = {
	F_STR(ckptd_peer_lease, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_peer_lease, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_peer_lease, rank, CKPTD_TAG_RANK, REQ),
	F_U32(ckptd_peer_lease, world_size, CKPTD_TAG_WORLD_SIZE, REQ),
	F_U64(ckptd_peer_lease, bytes, CKPTD_TAG_BYTES, REQ),
	F_U64(ckptd_peer_lease, lineage, CKPTD_TAG_LINEAGE, OPT),
	F_STR(ckptd_peer_lease, node, CKPTD_TAG_NODE, OPT, CK_NAME),
};
static const ckptd__field f_peer_grant[] = {
	F_U64(ckptd_peer_grant, segment_id, CKPTD_TAG_SEGMENT_ID, REQ),
	F_U64(ckptd_peer_grant, offset, CKPTD_TAG_OFFSET, REQ),
	F_U64(ckptd_peer_grant, bytes, CKPTD_TAG_BYTES, REQ),
	F_U64(ckptd_peer_grant, key, CKPTD_TAG_KEY, REQ),
	F_U64(ckptd_peer_grant, base, CKPTD_TAG_BASE, OPT),
	F_BYTES(ckptd_peer_grant, fabric_addr, CKPTD_TAG_FABRIC_ADDR),
	F_U32(ckptd_peer_grant, fabric_addr_len, CKPTD_TAG_FABRIC_ADDR_LEN, REQ),
	F_STR(ckptd_peer_grant, provider, CKPTD_TAG_PROVIDER, OPT, CK_TEXT),
	F_U64(ckptd_peer_grant, checksum, CKPTD_TAG_CHECKSUM, OPT),
};
static const ckptd__field f_ec_node[] = {
	F_U32(ckptd_ec_node, member, CKPTD_TAG_MEMBER, REQ),
	F_STR(ckptd_ec_node, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_STR(ckptd_ec_node, address, CKPTD_TAG_ADDRESS, REQ, CK_ADDR),
};
static const ckptd__schema s_ec_node = SCHEMA(ckptd_ec_node, f_ec_node, check_ec_node);
static const ckptd__field f_ec_src[] = {
	F_U32(ckptd_ec_src, instance, CKPTD_TAG_INSTANCE, REQ),
	F_U32(ckptd_ec_src, member, CKPTD_TAG_MEMBER, REQ),
	F_U32(ckptd_ec_src, rank, CKPTD_TAG_RANK, REQ),
	F_U64(ckptd_ec_src, bytes, CKPTD_TAG_BYTES, REQ),
};
static const ckptd__schema s_ec_src = SCHEMA(ckptd_ec_src, f_ec_src, check_ec_src);
static const ckptd__field f_ec_plan[] = {
	F_STR(ckptd_ec_plan, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_ec_plan, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_ec_plan, group, CKPTD_TAG_GROUP, REQ),
	F_U32(ckptd_ec_plan, k, CKPTD_TAG_EC_K, REQ),
	F_U32(ckptd_ec_plan, m, CKPTD_TAG_EC_M, REQ),
	F_U32(ckptd_ec_plan, member, CKPTD_TAG_MEMBER, REQ),
	F_LIST(ckptd_ec_plan, nodes, nnodes, CKPTD_TAG_NODES, s_ec_node),
	F_LIST(ckptd_ec_plan, entries, count, CKPTD_TAG_ENTRIES, s_ec_src),
};
static const ckptd__field f_ec_done[] = {
	F_STR(ckptd_ec_done, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_ec_done, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_ec_done, group, CKPTD_TAG_GROUP, REQ),
	F_U32(ckptd_ec_done, code, CKPTD_TAG_CODE, OPT),
	F_U64(ckptd_ec_done, bytes, CKPTD_TAG_BYTES, OPT),
	F_STR(ckptd_ec_done, text, CKPTD_TAG_TEXT, OPT, CK_TEXT),
};
static const ckptd__field f_preempt[] = {
	F_STR(ckptd_preempt, job, CKPTD_TAG_JOB, OPT, CK_JOB),
	F_STR(ckptd_preempt, node, CKPTD_TAG_NODE, OPT, CK_NAME),
	F_U64(ckptd_preempt, deadline_ns, CKPTD_TAG_DEADLINE_NS, OPT),
	F_U32(ckptd_preempt, source, CKPTD_TAG_SOURCE, REQ),
	F_STR(ckptd_preempt, text, CKPTD_TAG_TEXT, OPT, CK_TEXT),
};
static const ckptd__field f_emergency[] = {
	F_STR(ckptd_emergency, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_emergency, step, CKPTD_TAG_STEP, REQ),
	F_U64(ckptd_emergency, deadline_ns, CKPTD_TAG_DEADLINE_NS, REQ),
	F_U32(ckptd_emergency, tier, CKPTD_TAG_TIER, OPT),
	F_STR(ckptd_emergency, node, CKPTD_TAG_NODE, OPT, CK_NAME),
	F_U32(ckptd_emergency, final, CKPTD_TAG_FINAL, OPT),
};
static const ckptd__field f_heartbeat[] = {
	F_U32(ckptd_heartbeat, seq, CKPTD_TAG_SEQ, OPT),
};
static const ckptd__field f_peer_commit[] = {
	F_U64(ckptd_peer_commit, segment_id, CKPTD_TAG_SEGMENT_ID, REQ),
	F_U64(ckptd_peer_commit, bytes, CKPTD_TAG_BYTES, REQ),
	F_U64(ckptd_peer_commit, checksum, CKPTD_TAG_CHECKSUM, REQ),
};
static const ckptd__field f_held[] = {
	F_STR(ckptd_held_shard, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U64(ckptd_held_shard, version, CKPTD_TAG_VERSION, REQ),
	F_U32(ckptd_held_shard, rank, CKPTD_TAG_RANK, REQ),
	F_U32(ckptd_held_shard, world_size, CKPTD_TAG_WORLD_SIZE, OPT),
	F_U32(ckptd_held_shard, tiers, CKPTD_TAG_TIERS, REQ),
	F_U32(ckptd_held_shard, committed, CKPTD_TAG_COMMITTED, OPT),
	F_U64(ckptd_held_shard, bytes, CKPTD_TAG_BYTES, REQ),
	F_U64(ckptd_held_shard, checksum, CKPTD_TAG_CHECKSUM, REQ),
	F_U64(ckptd_held_shard, lineage, CKPTD_TAG_LINEAGE, OPT),
};
static const ckptd__schema s_held = SCHEMA(ckptd_held_shard, f_held, check_held);
static const ckptd__field f_inventory[] = {
	F_STR(ckptd_agent_inventory, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_U32(ckptd_agent_inventory, seq, CKPTD_TAG_SEQ, REQ),
	F_U32(ckptd_agent_inventory, final, CKPTD_TAG_FINAL, OPT),
	F_LIST(ckptd_agent_inventory, entries, count, CKPTD_TAG_ENTRIES, s_held),
};

/* ---- 1.4: a persistent straggler's node evidence ---- */
static const ckptd__field f_evidence_request[] = {
	F_STR(ckptd_evidence_request, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U32(ckptd_evidence_request, rank, CKPTD_TAG_RANK, REQ),
	F_U32(ckptd_evidence_request, windows, CKPTD_TAG_WINDOWS, OPT),
	F_U64(ckptd_evidence_request, step_ns, CKPTD_TAG_STEP_NS, OPT),
	F_U64(ckptd_evidence_request, fastest_ns, CKPTD_TAG_FASTEST_NS, OPT),
	F_U64(ckptd_evidence_request, window_ns, CKPTD_TAG_WINDOW_NS, OPT),
};
static const ckptd__field f_node_evidence[] = {
	F_STR(ckptd_node_evidence, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_U32(ckptd_node_evidence, rank, CKPTD_TAG_RANK, REQ),
	F_STR(ckptd_node_evidence, node, CKPTD_TAG_NODE, OPT, CK_NAME),
	F_U32(ckptd_node_evidence, windows, CKPTD_TAG_WINDOWS, OPT),
	F_U64(ckptd_node_evidence, step_ns, CKPTD_TAG_STEP_NS, OPT),
	F_U64(ckptd_node_evidence, fastest_ns, CKPTD_TAG_FASTEST_NS, OPT),
	F_U64(ckptd_node_evidence, window_ns, CKPTD_TAG_WINDOW_NS, OPT),
	F_U64(ckptd_node_evidence, time_ns, CKPTD_TAG_TIME_NS, OPT),
	F_U32(ckptd_node_evidence, flags, CKPTD_TAG_FLAGS, OPT),
	F_U32(ckptd_node_evidence, steal_pm, CKPTD_TAG_STEAL_PM, OPT),
	F_U32(ckptd_node_evidence, iowait_pm, CKPTD_TAG_IOWAIT_PM, OPT),
	F_U64(ckptd_node_evidence, nr_periods, CKPTD_TAG_NR_PERIODS, OPT),
	F_U64(ckptd_node_evidence, nr_throttled, CKPTD_TAG_NR_THROTTLED, OPT),
	F_U64(ckptd_node_evidence, throttled_us, CKPTD_TAG_THROTTLED_US, OPT),
	F_U32(ckptd_node_evidence, psi_cpu_some, CKPTD_TAG_PSI_CPU_SOME, OPT),
	F_U32(ckptd_node_evidence, psi_mem_some, CKPTD_TAG_PSI_MEM_SOME, OPT),
	F_U32(ckptd_node_evidence, psi_mem_full, CKPTD_TAG_PSI_MEM_FULL, OPT),
	F_U32(ckptd_node_evidence, psi_io_some, CKPTD_TAG_PSI_IO_SOME, OPT),
	F_U32(ckptd_node_evidence, psi_io_full, CKPTD_TAG_PSI_IO_FULL, OPT),
	F_U32(ckptd_node_evidence, disk_await_us, CKPTD_TAG_DISK_AWAIT_US, OPT),
	F_STR(ckptd_node_evidence, disk, CKPTD_TAG_DISK, OPT, CK_TEXT),
	F_U32(ckptd_node_evidence, oom_kills, CKPTD_TAG_OOM_KILLS, OPT),
	F_U32(ckptd_node_evidence, hw_errors, CKPTD_TAG_HW_ERRORS, OPT),
	F_STR(ckptd_node_evidence, kmsg, CKPTD_TAG_KMSG, OPT, CK_TEXT),
	F_STR(ckptd_node_evidence, verdict, CKPTD_TAG_VERDICT, OPT, CK_TEXT),
	F_STR(ckptd_node_evidence, text, CKPTD_TAG_TEXT, OPT, CK_TEXT),
};
static const char *check_node_evidence(const void *r)
{
	const ckptd_node_evidence *e = r;
	if (e->steal_pm > 1000 || e->iowait_pm > 1000)
		return "a share of CPU time over 1000 per mille";
	if (e->psi_cpu_some > 10000 || e->psi_mem_some > 10000 || e->psi_mem_full > 10000 || e->psi_io_some > 10000 ||
	    e->psi_io_full > 10000)
		return "a pressure over 100 %";
	return e->nr_throttled > e->nr_periods ? "more throttled periods than periods" : NULL;
}
static const ckptd__schema s_node_evidence = SCHEMA(ckptd_node_evidence, f_node_evidence, check_node_evidence);
static const ckptd__field f_stragglers[] = {
	F_STR(ckptd_straggler_query, job, CKPTD_TAG_JOB, REQ, CK_JOB),
};
static const ckptd__field f_stragglers_reply[] = {
	F_STR(ckptd_stragglers_reply, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_LIST(ckptd_stragglers_reply, entries, count, CKPTD_TAG_ENTRIES, s_node_evidence),
};

/* ---- 1.5: membership and failure decisions ---- */
static const char *check_member(const void *r)
{
	const ckptd_member *m = r;
	return m->state >= CKPTD_MEMBER_UP && m->state <= CKPTD_MEMBER_HUNG ? NULL : "unknown rank state";
}
static const ckptd__field f_member[] = {
	F_U32(ckptd_member, rank, CKPTD_TAG_RANK, REQ),
	F_U32(ckptd_member, pid, CKPTD_TAG_PID, OPT),
	F_U32(ckptd_member, state, CKPTD_TAG_STATE, REQ),
	F_U64(ckptd_member, silent_ns, CKPTD_TAG_SILENT_NS, OPT),
};
static const ckptd__schema s_member = SCHEMA(ckptd_member, f_member, check_member);
static const ckptd__field f_ranks[] = {
	F_STR(ckptd_ranks, job, CKPTD_TAG_JOB, REQ, CK_JOB),
	F_STR(ckptd_ranks, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_LIST(ckptd_ranks, entries, count, CKPTD_TAG_ENTRIES, s_member),
};
static const ckptd__field f_rank_leave[] = {
	F_STR(ckptd_rank_leave, job, CKPTD_TAG_JOB, REQ, CK_JOB),
};
static const ckptd__field f_events[] = {
	F_STR(ckptd_events, job, CKPTD_TAG_JOB, OPT, CK_JOB),
	F_U32(ckptd_events, follow, CKPTD_TAG_FOLLOW, OPT),
};
static const char *check_events(const void *r)
{
	const ckptd_events *m = r;
	return m->follow > 1 ? "FOLLOW is not 0 or 1" : NULL;
}
static const char *check_event(const void *r)
{
	const ckptd_event *e = r;
	if (!e->epoch)
		return "epoch 0";
	/* 1.6: what follows a failure */
	return e->kind >= CKPTD_FAIL_SPARE_CHOSEN && e->kind <= CKPTD_FAIL_RECOVERED ? NULL : check_kind(e->kind);
}
static const ckptd__field f_event[] = {
	F_STR(ckptd_event, job, CKPTD_TAG_JOB, OPT, CK_JOB),
	F_U64(ckptd_event, epoch, CKPTD_TAG_EPOCH, REQ),
	F_U32(ckptd_event, kind, CKPTD_TAG_KIND, REQ),
	F_STR(ckptd_event, node, CKPTD_TAG_NODE, REQ, CK_NAME),
	F_U64(ckptd_event, time_ns, CKPTD_TAG_TIME_NS, REQ),
	F_U64(ckptd_event, silent_ns, CKPTD_TAG_SILENT_NS, OPT),
	F_STR(ckptd_event, text, CKPTD_TAG_TEXT, OPT, CK_TEXT),
	F_LIST(ckptd_event, entries, count, CKPTD_TAG_ENTRIES, s_member),
};

static const ckptd__msgdef msgdefs[] = {
	{ CKPTD_MSG_ERROR, "ERROR", SCHEMA(ckptd_error, f_error, check_error) },
	{ CKPTD_MSG_OK, "OK", SCHEMA(ckptd_ok, f_ok, NULL) },
	{ CKPTD_MSG_HELLO, "HELLO", SCHEMA(ckptd_hello, f_hello, check_hello) },
	{ CKPTD_MSG_CHALLENGE, "CHALLENGE", SCHEMA(ckptd_challenge, f_challenge, NULL) },
	{ CKPTD_MSG_AUTH, "AUTH", SCHEMA(ckptd_auth_msg, f_auth, NULL) },
	{ CKPTD_MSG_AUTH_OK, "AUTH_OK", SCHEMA(ckptd_auth_ok, f_auth_ok, NULL) },
	{ CKPTD_MSG_REGISTER_RANK, "REGISTER_RANK", SCHEMA(ckptd_register_rank, f_register, check_register) },
	{ CKPTD_MSG_SEGMENT_REQUEST, "SEGMENT_REQUEST",
	  SCHEMA(ckptd_segment_request, f_seg_request, check_seg_request) },
	{ CKPTD_MSG_SEGMENT_GRANT, "SEGMENT_GRANT", SCHEMA(ckptd_segment_grant, f_seg_grant, check_seg_grant) },
	{ CKPTD_MSG_SHARD_DONE, "SHARD_DONE", SCHEMA(ckptd_shard_done, f_shard_done, check_shard_done) },
	{ CKPTD_MSG_COMMIT_NOTICE, "COMMIT_NOTICE", SCHEMA(ckptd_commit_notice, f_commit, check_commit) },
	{ CKPTD_MSG_STEP_REPORT, "STEP_REPORT", SCHEMA(ckptd_step_report, f_step, NULL) },
	{ CKPTD_MSG_LIST_VERSIONS, "LIST_VERSIONS", SCHEMA(ckptd_list_versions, f_list_versions, NULL) },
	{ CKPTD_MSG_VERSIONS, "VERSIONS", SCHEMA(ckptd_versions, f_versions, check_versions) },
	{ CKPTD_MSG_DELETE_VERSION, "DELETE_VERSION", SCHEMA(ckptd_delete_version, f_delete, check_tiers_mask) },
	{ CKPTD_MSG_STATUS, "STATUS", SCHEMA(ckptd_status, f_status, NULL), CKPTD__JOB_OWN_OR_EMPTY },
	{ CKPTD_MSG_STATUS_REPLY, "STATUS_REPLY", SCHEMA(ckptd_status_reply, f_status_reply, check_status_reply) },
	{ CKPTD_MSG_AGENT_HELLO, "AGENT_HELLO", SCHEMA(ckptd_agent_hello, f_agent_hello, NULL) },
	{ CKPTD_MSG_AGENT_INVENTORY, "AGENT_INVENTORY",
	  SCHEMA(ckptd_agent_inventory, f_inventory, check_inventory) },
	{ CKPTD_MSG_SEGMENT_RELEASE, "SEGMENT_RELEASE", SCHEMA(ckptd_segment_release, f_seg_release, NULL) },
	{ CKPTD_MSG_GC, "GC", SCHEMA(ckptd_gc, f_gc, check_gc) },
	{ CKPTD_MSG_SHOW_VERSION, "SHOW_VERSION", SCHEMA(ckptd_show_version, f_show, NULL) },
	{ CKPTD_MSG_VERSION_DETAIL, "VERSION_DETAIL", SCHEMA(ckptd_version_detail, f_detail, check_detail) },
	{ CKPTD_MSG_COPIES_GONE, "COPIES_GONE", SCHEMA(ckptd_copies_gone, f_gone, check_gone) },
	{ CKPTD_MSG_VERIFY, "VERIFY", SCHEMA(ckptd_verify, f_verify, NULL) },
	{ CKPTD_MSG_VERIFY_REPLY, "VERIFY_REPLY", SCHEMA(ckptd_verify_reply, f_vreply, check_vreply) },
	{ CKPTD_MSG_LOCATION, "LOCATION", SCHEMA(ckptd_location, f_location, check_location) },
	{ CKPTD_MSG_STEP_STATS, "STEP_STATS", SCHEMA(ckptd_step_stats, f_step_stats, NULL) },
	{ CKPTD_MSG_GOODPUT, "GOODPUT", SCHEMA(ckptd_goodput, f_goodput, NULL) },
	{ CKPTD_MSG_INTERVAL_NOTICE, "INTERVAL_NOTICE", SCHEMA(ckptd_interval_notice, f_interval, check_interval) },
	{ CKPTD_MSG_GOODPUT_REPLY, "GOODPUT_REPLY", SCHEMA(ckptd_goodput_reply, f_goodput_reply, NULL) },
	{ CKPTD_MSG_STEP_STATS_REPLY, "STEP_STATS_REPLY",
	  SCHEMA(ckptd_step_stats_reply, f_step_stats_reply, check_step_reply) },
	{ CKPTD_MSG_PARTNERS, "PARTNERS", SCHEMA(ckptd_partners, f_partners, NULL) },
	{ CKPTD_MSG_PEER_LEASE, "PEER_LEASE", SCHEMA(ckptd_peer_lease, f_peer_lease, check_peer_lease) },
	{ CKPTD_MSG_PEER_GRANT, "PEER_GRANT", SCHEMA(ckptd_peer_grant, f_peer_grant, check_peer_grant) },
	{ CKPTD_MSG_PEER_COMMIT, "PEER_COMMIT", SCHEMA(ckptd_peer_commit, f_peer_commit, NULL) },
	{ CKPTD_MSG_PREEMPT, "PREEMPT", SCHEMA(ckptd_preempt, f_preempt, check_preempt) },
	{ CKPTD_MSG_EMERGENCY, "EMERGENCY", SCHEMA(ckptd_emergency, f_emergency, check_emergency) },
	{ CKPTD_MSG_HEARTBEAT, "HEARTBEAT", SCHEMA(ckptd_heartbeat, f_heartbeat, NULL) },
	{ CKPTD_MSG_EVIDENCE_REQUEST, "EVIDENCE_REQUEST", SCHEMA(ckptd_evidence_request, f_evidence_request, NULL) },
	{ CKPTD_MSG_NODE_EVIDENCE, "NODE_EVIDENCE", SCHEMA(ckptd_node_evidence, f_node_evidence, check_node_evidence) },
	{ CKPTD_MSG_STRAGGLERS, "STRAGGLERS", SCHEMA(ckptd_straggler_query, f_stragglers, NULL) },
	{ CKPTD_MSG_STRAGGLERS_REPLY, "STRAGGLERS_REPLY", SCHEMA(ckptd_stragglers_reply, f_stragglers_reply, NULL) },
	{ CKPTD_MSG_RANKS, "RANKS", SCHEMA(ckptd_ranks, f_ranks, NULL) },
	{ CKPTD_MSG_RANK_LEAVE, "RANK_LEAVE", SCHEMA(ckptd_rank_leave, f_rank_leave, NULL) },
	{ CKPTD_MSG_EVENTS, "EVENTS", SCHEMA(ckptd_events, f_events, check_events), CKPTD__JOB_OWN_OR_EMPTY },
	{ CKPTD_MSG_EVENT, "EVENT", SCHEMA(ckptd_event, f_event, check_event) },
	{ CKPTD_MSG_EC_PLAN, "EC_PLAN", SCHEMA(ckptd_ec_plan, f_ec_plan, check_ec_plan) },
	{ CKPTD_MSG_EC_DONE, "EC_DONE", SCHEMA(ckptd_ec_done, f_ec_done, NULL) },
	{ CKPTD_MSG_SPARE_ASSIGN, "SPARE_ASSIGN", SCHEMA(ckptd_spare_assign, f_spare_assign, check_spare_assign) },
	{ CKPTD_MSG_SPARE_DONE, "SPARE_DONE", SCHEMA(ckptd_spare_done, f_spare_done, check_spare_done) },
	{ CKPTD_MSG_RECOVERIES, "RECOVERIES", SCHEMA(ckptd_recoveries, f_recoveries, NULL), CKPTD__JOB_OWN_OR_EMPTY },
	{ CKPTD_MSG_RECOVERIES_REPLY, "RECOVERIES_REPLY", SCHEMA(ckptd_recoveries_reply, f_recoveries_reply, NULL) },
};

const ckptd__msgdef *ckptd__msg_at(size_t i)
{
	return i < sizeof(msgdefs) / sizeof(msgdefs[0]) ? &msgdefs[i] : NULL;
}

const ckptd__msgdef *ckptd__find_msg(uint16_t type)
{
	for (size_t i = 0; i < sizeof(msgdefs) / sizeof(msgdefs[0]); i++)
		if (msgdefs[i].type == type)
			return &msgdefs[i];
	return NULL;
}
