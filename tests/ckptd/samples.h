/* Sample messages of every type, for the unit tests, the fuzz target's
 * mutations and the seed corpus. Variant 0 fills every field (strings at
 * their longest, lists with entries); variant 1 only what is required. */
#ifndef CKPTD_TEST_SAMPLES_H
#define CKPTD_TEST_SAMPLES_H

#include <stdio.h>
#include <string.h>

#include "wire/proto.h"

static const uint16_t t_types[] = {
	CKPTD_MSG_ERROR, CKPTD_MSG_OK, CKPTD_MSG_HELLO, CKPTD_MSG_CHALLENGE, CKPTD_MSG_AUTH,
	CKPTD_MSG_AUTH_OK, CKPTD_MSG_REGISTER_RANK, CKPTD_MSG_SEGMENT_REQUEST, CKPTD_MSG_SEGMENT_GRANT,
	CKPTD_MSG_SHARD_DONE, CKPTD_MSG_COMMIT_NOTICE, CKPTD_MSG_STEP_REPORT, CKPTD_MSG_LIST_VERSIONS,
	CKPTD_MSG_VERSIONS, CKPTD_MSG_DELETE_VERSION, CKPTD_MSG_STATUS, CKPTD_MSG_STATUS_REPLY,
	CKPTD_MSG_AGENT_HELLO, CKPTD_MSG_AGENT_INVENTORY, CKPTD_MSG_SEGMENT_RELEASE, CKPTD_MSG_GC,
	CKPTD_MSG_SHOW_VERSION, CKPTD_MSG_VERSION_DETAIL, CKPTD_MSG_COPIES_GONE, CKPTD_MSG_VERIFY,
	CKPTD_MSG_VERIFY_REPLY, CKPTD_MSG_LOCATION, CKPTD_MSG_STEP_STATS, CKPTD_MSG_STEP_STATS_REPLY,
	CKPTD_MSG_GOODPUT, CKPTD_MSG_GOODPUT_REPLY, CKPTD_MSG_INTERVAL_NOTICE, CKPTD_MSG_PARTNERS,
	CKPTD_MSG_PEER_LEASE, CKPTD_MSG_PEER_GRANT, CKPTD_MSG_PEER_COMMIT, CKPTD_MSG_PREEMPT, CKPTD_MSG_EMERGENCY,
	CKPTD_MSG_EVIDENCE_REQUEST, CKPTD_MSG_NODE_EVIDENCE, CKPTD_MSG_STRAGGLERS, CKPTD_MSG_STRAGGLERS_REPLY,
	CKPTD_MSG_RANKS, CKPTD_MSG_RANK_LEAVE, CKPTD_MSG_EVENTS, CKPTD_MSG_EVENT,
	CKPTD_MSG_EC_PLAN, CKPTD_MSG_EC_DONE, CKPTD_MSG_HEARTBEAT, /* appended: seed names keep their index */
	CKPTD_MSG_SPARE_ASSIGN, CKPTD_MSG_SPARE_DONE, CKPTD_MSG_RECOVERIES, CKPTD_MSG_RECOVERIES_REPLY,
};
#define T_NTYPES (sizeof(t_types) / sizeof(t_types[0]))

/* Storage for the lists of a sample message. */
typedef struct t_store {
	ckptd_version_info v[5];
	ckptd_agent_info a[3];
	ckptd_held_shard h[5];
	ckptd_copy_info c[4];
	ckptd_tier_stat t[4];
	ckptd_verify_result vr[3];
	ckptd_rank_step rs[3];
	ckptd_goodput_slice gs[3];
	ckptd_partner p[3];
	ckptd_node_evidence ev[2];
	ckptd_group_info gi[2];
	ckptd_group_member gm[6];
	ckptd_member mb[4];
	ckptd_job_epoch je[2];
	ckptd_ec_node en[3];
	ckptd_ec_src es[4];
	ckptd_spare_rank sr[3];
	ckptd_recovery rc[2];
} t_store;



/* A string of n characters c (n < cap). */
static inline void t_str(char *dst, size_t n, char c)
{
	memset(dst, c, n);
	dst[n] = '\0';
}

/* A recovery: every phase reached and every field set (full), or the
 * required ones (a rank that died, detected 1.5 s after it did). */
static inline void t_recovery(ckptd_recovery *e, const char *job, int full, uint64_t epoch)
{
	memset(e, 0, sizeof(*e));
	e->epoch = epoch;
	e->kind = full ? CKPTD_FAIL_NODE_LOST : CKPTD_FAIL_RANK_DIED;
	t_str(e->node, full ? CKPTD_NAME_MAX : 1, 'l');
	e->failed_ns = 1800000000000000000ull;
	e->detected_ns = e->failed_ns + 1500000000ull;
	if (!full)
		return;
	snprintf(e->job, sizeof(e->job), "%s", job);
	snprintf(e->spare, sizeof(e->spare), "spare-node-7");
	snprintf(e->ranks, sizeof(e->ranks), "0,2-5");
	e->chosen_ns = e->detected_ns + 1000;
	e->ready_ns = e->chosen_ns + 900000000ull;
	e->registered_ns = e->ready_ns + 2000000000ull;
	e->restored_ns = e->registered_ns + 400000000ull;
	e->first_step_ns = e->restored_ns + 100000000ull;
	e->protected_ns = e->first_step_ns + 3000000000ull;
	e->bytes = 5ull << 30;
	e->code = ENOENT;
	t_str(e->text, CKPTD_TEXT_MAX, 'r');
}

/* A straggler's node evidence: every field set (full), or the required ones. */
static inline void t_evidence(ckptd_node_evidence *e, const char *job, int full, uint32_t rank)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->job, sizeof(e->job), "%s", job);
	e->rank = rank;
	if (!full)
		return;
	t_str(e->node, CKPTD_NAME_MAX, 'n');
	e->windows = 12;
	e->step_ns = 180000000ull;
	e->fastest_ns = 100000000ull;
	e->window_ns = 10000000000ull;
	e->time_ns = 1800000000000000000ull;
	e->flags = CKPTD_EV_CPU | CKPTD_EV_CGROUP | CKPTD_EV_PSI | CKPTD_EV_DISK | CKPTD_EV_KMSG | CKPTD_EV_STEPS;
	e->steal_pm = 312;
	e->iowait_pm = 1000;
	e->nr_periods = 500;
	e->nr_throttled = 500;
	e->throttled_us = 1234567;
	e->psi_cpu_some = 10000;
	e->psi_mem_some = 150;
	e->psi_mem_full = 20;
	e->psi_io_some = 0;
	e->psi_io_full = 1;
	e->disk_await_us = 81000;
	t_str(e->disk, sizeof(e->disk) - 1, 'd');
	e->oom_kills = 1;
	e->hw_errors = 3;
	t_str(e->kmsg, sizeof(e->kmsg) - 1, 'k');
	t_str(e->verdict, sizeof(e->verdict) - 1, 'v');
	t_str(e->text, CKPTD_TEXT_MAX, 't');
}

static inline void t_sample(ckptd_msg *m, t_store *st, uint16_t type, int variant)
{
	memset(m, 0, sizeof(*m));
	memset(st, 0, sizeof(*st));
	m->type = type;
	int full = variant == 0;
	const char *job = full ? "llama-70B_run.7" : "j";
	switch (type) {
	case CKPTD_MSG_ERROR:
		m->u.error.code = full ? CKPTD_ERR_DENIED : CKPTD_ERR_INTERNAL;
		if (full) {
			t_str(m->u.error.text, CKPTD_TEXT_MAX, 'e');
			memcpy(m->u.error.text, "job B: not yours ", 17);
			m->u.error.peer_version = CKPTD_VERSION_PACK(2, 3);
			m->u.error.own_version = CKPTD_PROTO_VERSION;
		}
		break;
	case CKPTD_MSG_OK:
		m->u.ok.version = full ? 0xfedcba9876543210ull : 0;
		m->u.ok.count = full ? 12 : 0;
		break;
	case CKPTD_MSG_HELLO:
		m->u.hello.role = full ? CKPTD_ROLE_RANK : CKPTD_ROLE_AGENT;
		if (full)
			t_str(m->u.hello.job, CKPTD_JOB_MAX, 'J');
		for (int i = 0; i < CKPTD_NONCE_LEN; i++)
			m->u.hello.nonce[i] = (uint8_t)(i * 7 + variant);
		break;
	case CKPTD_MSG_CHALLENGE:
		for (int i = 0; i < CKPTD_NONCE_LEN; i++)
			m->u.challenge.nonce[i] = (uint8_t)(255 - i);
		break;
	case CKPTD_MSG_AUTH:
		for (int i = 0; i < CKPTD_MAC_LEN; i++)
			m->u.auth.mac[i] = (uint8_t)(i ^ 0x5a);
		break;
	case CKPTD_MSG_AUTH_OK:
		for (int i = 0; i < CKPTD_MAC_LEN; i++)
			m->u.auth_ok.mac[i] = (uint8_t)(i ^ 0xa5);
		break;
	case CKPTD_MSG_REGISTER_RANK:
		snprintf(m->u.register_rank.job, sizeof(m->u.register_rank.job), "%s", job);
		m->u.register_rank.rank = full ? 16383 : 0;
		m->u.register_rank.world_size = full ? 16384 : 1;
		m->u.register_rank.pid = full ? 4194303 : 1;
		m->u.register_rank.lineage = full ? 0x0102030405060708ull : 0;
		m->u.register_rank.beat_ms = full ? 500 : 0;
		if (full) {
			t_str(m->u.register_rank.root, CKPTD_PATH_MAX, 'r');
			memcpy(m->u.register_rank.root, "/nvme/ckpt dir/", 15);
		}
		break;
	case CKPTD_MSG_SEGMENT_REQUEST:
		snprintf(m->u.segment_request.job, sizeof(m->u.segment_request.job), "%s", job);
		m->u.segment_request.version = full ? UINT64_MAX : 0;
		m->u.segment_request.rank = full ? 7 : 0;
		m->u.segment_request.mode = full ? CKPTD_SEG_WRITE : CKPTD_SEG_READ;
		m->u.segment_request.bytes = full ? (3ull << 30) : 0;
		break;
	case CKPTD_MSG_SEGMENT_GRANT:
		m->u.segment_grant.segment_id = full ? 42 : 0;
		m->u.segment_grant.offset = full ? (1ull << 40) : 0;
		m->u.segment_grant.bytes = full ? (3ull << 30) : 1;
		break;
	case CKPTD_MSG_SHARD_DONE:
		snprintf(m->u.shard_done.job, sizeof(m->u.shard_done.job), "%s", job);
		m->u.shard_done.version = full ? 1000 : 0;
		m->u.shard_done.rank = full ? 5 : 0;
		m->u.shard_done.world_size = full ? 6 : 0;
		m->u.shard_done.tier = full ? CKPT_TIER_SHARED : CKPT_TIER_LOCAL_MEM;
		m->u.shard_done.bytes = full ? 123456789 : 0;
		m->u.shard_done.checksum = full ? 0xdeadbeefcafef00dull : 0;
		m->u.shard_done.lineage = full ? 99 : 0;
		m->u.shard_done.stall_ns = full ? 1500000 : 0;
		m->u.shard_done.durable_ns = full ? 250000000 : 0;
		m->u.shard_done.tiers = full ? CKPT_TIER_LOCAL_MEM | CKPT_TIER_PEER_MEM | CKPT_TIER_LOCAL_DISK : 0;
		break;
	case CKPTD_MSG_COMMIT_NOTICE:
		snprintf(m->u.commit_notice.job, sizeof(m->u.commit_notice.job), "%s", job);
		m->u.commit_notice.version = full ? 1000 : 0;
		m->u.commit_notice.tier = full ? CKPT_TIER_LOCAL_DISK : CKPT_TIER_PEER_MEM;
		break;
	case CKPTD_MSG_STEP_REPORT:
		snprintf(m->u.step_report.job, sizeof(m->u.step_report.job), "%s", job);
		m->u.step_report.rank = full ? 3 : 0;
		m->u.step_report.step = full ? 123456 : 0;
		m->u.step_report.step_ns = full ? 987654321 : 0;
		m->u.step_report.count = full ? 17 : 0;
		if (full) {
			snprintf(m->u.step_report.node, sizeof(m->u.step_report.node), "gpu-node-7");
			m->u.step_report.stall_ns = 12345678;
			m->u.step_report.restore_ns = 2000000000ull;
			m->u.step_report.saves = 3;
			m->u.step_report.restore_tier = CKPT_TIER_LOCAL_MEM;
			m->u.step_report.errors = 1;
			m->u.step_report.peer_skips = 2;
			m->u.step_report.fabric_errors = 5;
		}
		break;
	case CKPTD_MSG_LIST_VERSIONS:
		snprintf(m->u.list_versions.job, sizeof(m->u.list_versions.job), "%s", job);
		m->u.list_versions.start = full ? 500 : 0;
		m->u.list_versions.limit = full ? 100 : 0;
		break;
	case CKPTD_MSG_VERSIONS:
		snprintf(m->u.versions.job, sizeof(m->u.versions.job), "%s", job);
		m->u.versions.more = full ? 1 : 0;
		m->u.versions.count = full ? 5 : 0;
		m->u.versions.entries = st->v;
		for (int i = 0; i < 5; i++)
			st->v[i] = (ckptd_version_info){ .version = 100u * (unsigned)i + 1, .state = 1 + i % 3,
			                                 .world_size = 6, .shards_done = (uint32_t)(i % 7),
			                                 .bytes = (uint64_t)i << 33, .tiers = (uint32_t)(i * 3) & 0xf };
		st->v[4].shards_done = 6;
		st->v[0].gone = st->v[0].state != CKPT_STATE_COMMITTED;
		break;
	case CKPTD_MSG_DELETE_VERSION:
		snprintf(m->u.delete_version.job, sizeof(m->u.delete_version.job), "%s", job);
		m->u.delete_version.version = full ? 77 : 0;
		m->u.delete_version.tiers = full ? (CKPT_TIER_LOCAL_DISK | CKPT_TIER_SHARED) : 0;
		break;
	case CKPTD_MSG_STATUS:
		if (full)
			snprintf(m->u.status.job, sizeof(m->u.status.job), "%s", job);
		break;
	case CKPTD_MSG_STATUS_REPLY:
		t_str(m->u.status_reply.node, full ? CKPTD_NAME_MAX : 1, 'n');
		m->u.status_reply.roles = full ? (CKPTD_SERVES_AGENT | CKPTD_SERVES_COORDINATOR) : CKPTD_SERVES_AGENT;
		m->u.status_reply.pool_bytes = full ? (64ull << 30) : 0;
		m->u.status_reply.pool_used = full ? (12ull << 30) : 0;
		m->u.status_reply.jobs = full ? 3 : 0;
		m->u.status_reply.versions = full ? 40 : 0;
		m->u.status_reply.count = full ? 3 : 0;
		m->u.status_reply.entries = st->a;
		for (int i = 0; i < 3; i++) {
			snprintf(st->a[i].node, sizeof(st->a[i].node), "node-%02d", i);
			snprintf(st->a[i].address, sizeof(st->a[i].address), "10.0.0.%d:7070", i + 1);
			if (i)
				snprintf(st->a[i].domain, sizeof(st->a[i].domain), "rack%d", i);
			st->a[i].pool_bytes = 1ull << 34;
			st->a[i].pool_used = (uint64_t)i << 30;
			st->a[i].state = i == 2 ? CKPTD_AGENT_DOWN : CKPTD_AGENT_UP;
		}
		t_str(st->a[0].address, CKPTD_ADDR_MAX, 'a');
		memcpy(st->a[0].address, "unix:/", 6);
		m->u.status_reply.ntiers = full ? 4 : 0;
		m->u.status_reply.tier_stats = st->t;
		for (int i = 0; i < 4; i++)
			st->t[i] = (ckptd_tier_stat){ 1u << i, (uint32_t)(10 * i), (uint64_t)i << 35 };
		if (full) {
			snprintf(m->u.status_reply.scheme, sizeof(m->u.status_reply.scheme), "rs:2+1");
			m->u.status_reply.ungrouped = 1;
			m->u.status_reply.ngroups = 2;
			m->u.status_reply.groups = st->gi;
			m->u.status_reply.nmembers = 6;
			m->u.status_reply.members = st->gm;
			st->gi[0] = (ckptd_group_info){ 0, 3, 0, 1 };
			st->gi[1] = (ckptd_group_info){ 7, 3, 1, 0 };
			for (int i = 0; i < 6; i++) {
				st->gm[i].group = i < 3 ? 0 : 7;
				snprintf(st->gm[i].node, sizeof(st->gm[i].node), "gpu-%d", i);
				st->gm[i].state = i == 4 ? CKPTD_AGENT_DOWN : CKPTD_AGENT_UP;
			}
		}
		m->u.status_reply.nepochs = full ? 2 : 0;
		m->u.status_reply.epochs = st->je;
		for (int i = 0; i < 2; i++) {
			snprintf(st->je[i].job, sizeof(st->je[i].job), "%s", i ? "" : job);
			st->je[i].epoch = 7u + (uint64_t)i;
			st->je[i].kind = CKPTD_FAIL_NODE_LOST - (uint32_t)i;
			snprintf(st->je[i].node, sizeof(st->je[i].node), "node-%02d", i);
			st->je[i].time_ns = 1800000000000000000ull;
		}
		t_str(st->je[0].ranks, CKPTD_TEXT_MAX, '7');
		m->u.status_reply.nrecoveries = full ? 2 : 0;
		m->u.status_reply.recoveries = st->rc;
		for (int i = 0; i < 2; i++)
			t_recovery(&st->rc[i], job, !i, 7u + (uint64_t)i);
		break;
	case CKPTD_MSG_RANKS:
		snprintf(m->u.ranks.job, sizeof(m->u.ranks.job), "%s", job);
		t_str(m->u.ranks.node, full ? CKPTD_NAME_MAX : 1, 'r');
		m->u.ranks.count = full ? 4 : 0;
		m->u.ranks.entries = st->mb;
		for (int i = 0; i < 4; i++)
			st->mb[i] = (ckptd_member){ (uint32_t)i * 8, 4000u + (uint32_t)i, CKPTD_MEMBER_UP + (uint32_t)i,
			                            (uint64_t)i * 1000000000ull };
		break;
	case CKPTD_MSG_RANK_LEAVE:
		snprintf(m->u.rank_leave.job, sizeof(m->u.rank_leave.job), "%s", job);
		break;
	case CKPTD_MSG_EVENTS:
		if (full)
			snprintf(m->u.events.job, sizeof(m->u.events.job), "%s", job);
		m->u.events.follow = full ? 1 : 0;
		break;
	case CKPTD_MSG_EVENT:
		snprintf(m->u.event.job, sizeof(m->u.event.job), "%s", full ? job : "");
		m->u.event.epoch = full ? UINT64_MAX : 1;
		m->u.event.kind = full ? CKPTD_FAIL_RANK_HUNG : CKPTD_FAIL_RANK_DIED;
		t_str(m->u.event.node, full ? CKPTD_NAME_MAX : 1, 'e');
		m->u.event.time_ns = full ? 1800000000000000000ull : 0;
		m->u.event.silent_ns = full ? 5000000000ull : 0;
		if (full)
			t_str(m->u.event.text, CKPTD_TEXT_MAX, 'w');
		m->u.event.count = full ? 4 : 0;
		m->u.event.entries = st->mb;
		for (int i = 0; i < 4; i++)
			st->mb[i] = (ckptd_member){ (uint32_t)i, 0, CKPTD_MEMBER_HUNG, 0 };
		break;
	case CKPTD_MSG_AGENT_HELLO:
		t_str(m->u.agent_hello.node, full ? CKPTD_NAME_MAX : 1, 'h');
		snprintf(m->u.agent_hello.address, sizeof(m->u.agent_hello.address), "%s",
		         full ? "[fe80::1]:7070" : "x");
		if (full) {
			snprintf(m->u.agent_hello.domain, sizeof(m->u.agent_hello.domain), "rack-12.row_3");
			snprintf(m->u.agent_hello.host, sizeof(m->u.agent_hello.host), "host-7");
			snprintf(m->u.agent_hello.sw, sizeof(m->u.agent_hello.sw), "tor-3");
			snprintf(m->u.agent_hello.power, sizeof(m->u.agent_hello.power), "pdu-a");
			m->u.agent_hello.beat_ms = 250;
			m->u.agent_hello.spare = 1;
		}
		m->u.agent_hello.pool_bytes = full ? (256ull << 30) : 0;
		break;
	case CKPTD_MSG_AGENT_INVENTORY:
		snprintf(m->u.agent_inventory.node, sizeof(m->u.agent_inventory.node), "%s", full ? "gpu-node-0042" : "n");
		m->u.agent_inventory.seq = full ? 9 : 0;
		m->u.agent_inventory.final = full ? 1 : 0;
		m->u.agent_inventory.count = full ? 5 : 0;
		m->u.agent_inventory.entries = st->h;
		for (int i = 0; i < 5; i++) {
			ckptd_held_shard *h = &st->h[i];
			snprintf(h->job, sizeof(h->job), "job-%d", i % 2);
			h->version = 1000 + (uint64_t)i;
			h->rank = (uint32_t)i;
			h->world_size = i % 2 ? 8 : 0;
			h->tiers = 1u + (uint32_t)i % 15;
			h->committed = (uint32_t)i & 0x5;
			h->bytes = (uint64_t)i * 4096;
			h->checksum = 0x1111111111111111ull * (uint64_t)i;
			h->lineage = i % 3 ? 7 : 0;
		}
		break;
	case CKPTD_MSG_SEGMENT_RELEASE:
		m->u.segment_release.segment_id = full ? UINT64_MAX : 0;
		break;
	case CKPTD_MSG_GC:
		snprintf(m->u.gc.job, sizeof(m->u.gc.job), "%s", job);
		if (full) {
			m->u.gc.policy = 1;
			m->u.gc.keep_dram = 2;
			m->u.gc.keep_disk = CKPTD_KEEP_ALL;
			m->u.gc.keep_every = 1000;
		}
		break;
	case CKPTD_MSG_SHOW_VERSION:
		snprintf(m->u.show_version.job, sizeof(m->u.show_version.job), "%s", job);
		m->u.show_version.version = full ? 4000 : 0;
		m->u.show_version.start = full ? 4096 : 0;
		break;
	case CKPTD_MSG_VERSION_DETAIL:
		snprintf(m->u.version_detail.job, sizeof(m->u.version_detail.job), "%s", job);
		m->u.version_detail.version = full ? 4000 : 1;
		m->u.version_detail.state = full ? CKPT_STATE_COMMITTED : CKPT_STATE_PENDING;
		m->u.version_detail.world_size = full ? 4 : 1;
		m->u.version_detail.tiers = full ? (CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK) : 0;
		m->u.version_detail.restorable = full ? 1 : 0;
		m->u.version_detail.more = full ? 1 : 0;
		m->u.version_detail.count = full ? 4 : 0;
		m->u.version_detail.entries = st->c;
		for (int i = 0; i < 4; i++) {
			ckptd_copy_info *c = &st->c[i];
			c->rank = (uint32_t)i / 2;
			c->tier = i % 2 ? CKPT_TIER_LOCAL_DISK : CKPT_TIER_LOCAL_MEM;
			c->state = i == 3 ? 2 : 1;
			snprintf(c->node, sizeof(c->node), "node-%d", i);
			c->bytes = (uint64_t)i << 30;
			c->checksum = 0x0123456789abcdefull ^ (uint64_t)i;
		}
		break;
	case CKPTD_MSG_VERIFY:
		snprintf(m->u.verify.job, sizeof(m->u.verify.job), "%s", job);
		m->u.verify.version = full ? 123 : 0;
		break;
	case CKPTD_MSG_VERIFY_REPLY:
		snprintf(m->u.verify_reply.job, sizeof(m->u.verify_reply.job), "%s", job);
		m->u.verify_reply.version = full ? 123 : 0;
		m->u.verify_reply.more = full ? 1 : 0;
		m->u.verify_reply.count = full ? 3 : 0;
		m->u.verify_reply.entries = st->vr;
		for (int i = 0; i < 3; i++) {
			st->vr[i].rank = (uint32_t)i;
			st->vr[i].tier = i ? CKPT_TIER_LOCAL_DISK : CKPT_TIER_LOCAL_MEM;
			st->vr[i].code = (uint32_t)i;
			if (i == 1)
				t_str(st->vr[i].text, CKPTD_TEXT_MAX, 'x');
		}
		break;
	case CKPTD_MSG_INTERVAL_NOTICE:
		snprintf(m->u.interval_notice.job, sizeof(m->u.interval_notice.job), "%s", job);
		m->u.interval_notice.every = full ? 250 : 1;
		m->u.interval_notice.from = full ? 10000 : 0;
		m->u.interval_notice.interval_ns = full ? 600000000000ull : 0;
		break;
	case CKPTD_MSG_GOODPUT:
		snprintf(m->u.goodput.job, sizeof(m->u.goodput.job), "%s", job);
		break;
	case CKPTD_MSG_GOODPUT_REPLY: {
		ckptd_goodput_reply *g = &m->u.goodput_reply;
		snprintf(g->job, sizeof(g->job), "%s", job);
		if (full) {
			*g = (ckptd_goodput_reply){ .wall_ns = 7200000000000ull, .useful_ns = 7000000000000ull,
			                            .stall_ns = 50000000000ull, .restore_ns = 30000000000ull,
			                            .recompute_ns = 60000000000ull, .down_ns = 60000000000ull, .failures = 2,
			                            .step = 72000, .bucket_ns = 60000000000ull, .interval_steps = 300,
			                            .interval_ns = 900000000000ull, .mtbf_ns = 86400000000000ull,
			                            .cost_ns = 2000000000ull, .count = 3, .entries = st->gs };
			snprintf(g->job, sizeof(g->job), "%s", job);
			for (int i = 0; i < 3; i++)
				st->gs[i] = (ckptd_goodput_slice){ 60000000000ull * (uint64_t)i, 59000000000ull, 500000000ull,
				                                   (uint64_t)i, 0, (uint64_t)i * 1000 };
		}
		break;
	}
	case CKPTD_MSG_STEP_STATS:
		snprintf(m->u.step_stats.job, sizeof(m->u.step_stats.job), "%s", job);
		m->u.step_stats.start = full ? 4096 : 0;
		break;
	case CKPTD_MSG_STEP_STATS_REPLY:
		snprintf(m->u.step_stats_reply.job, sizeof(m->u.step_stats_reply.job), "%s", job);
		m->u.step_stats_reply.more = full ? 1 : 0;
		m->u.step_stats_reply.count = full ? 3 : 0;
		m->u.step_stats_reply.entries = st->rs;
		for (int i = 0; i < 3; i++) {
			st->rs[i] = (ckptd_rank_step){ (uint32_t)i, 1000u + (uint64_t)i, 100000000ull * (uint64_t)(i + 1),
			                               i == 2 ? CKPTD_RANK_STRAGGLER : CKPTD_RANK_OK, "" };
			if (i)
				snprintf(st->rs[i].node, sizeof(st->rs[i].node), "n%d", i);
		}
		break;
	case CKPTD_MSG_LOCATION:
		snprintf(m->u.location.job, sizeof(m->u.location.job), "%s", job);
		m->u.location.version = full ? 9 : 0;
		m->u.location.rank = full ? 3 : 0;
		m->u.location.tiers = full ? (CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK) : 0;
		if (full) {
			snprintf(m->u.location.root, sizeof(m->u.location.root), "/nvme/ckpt");
			m->u.location.checksum = 0xabcdef;
		}
		break;
	case CKPTD_MSG_COPIES_GONE:
		snprintf(m->u.copies_gone.node, sizeof(m->u.copies_gone.node), "%s", full ? "gpu-node-0042" : "n");
		snprintf(m->u.copies_gone.job, sizeof(m->u.copies_gone.job), "%s", job);
		m->u.copies_gone.version = full ? 1000 : 0;
		m->u.copies_gone.tiers = full ? 0xf : CKPT_TIER_LOCAL_MEM;
		break;
	case CKPTD_MSG_PARTNERS: {
		ckptd_partners *p = &m->u.partners;
		if (full) {
			snprintf(p->job, sizeof(p->job), "%s", job);
			p->version = 77;
			p->rank = 5;
			p->replicas = 2;
			p->count = 3;
			snprintf(p->scheme, sizeof(p->scheme), "rs:8+2");
		}
		p->entries = st->p;
		for (int i = 0; i < 3; i++) {
			snprintf(st->p[i].node, sizeof(st->p[i].node), "node-%d", i);
			snprintf(st->p[i].address, sizeof(st->p[i].address), "127.0.0.%d:7000", i + 1);
			if (i)
				snprintf(st->p[i].domain, sizeof(st->p[i].domain), "rack%d", i);
		}
		break;
	}
	case CKPTD_MSG_PEER_LEASE:
		snprintf(m->u.peer_lease.job, sizeof(m->u.peer_lease.job), "%s", job);
		m->u.peer_lease.version = full ? 1234 : 0;
		m->u.peer_lease.rank = full ? 7 : 0;
		m->u.peer_lease.world_size = full ? 8 : 1;
		m->u.peer_lease.bytes = full ? (1ull << 30) : 1;
		m->u.peer_lease.lineage = full ? 0x1234567890abcdefull : 0;
		if (full)
			snprintf(m->u.peer_lease.node, sizeof(m->u.peer_lease.node), "gpu-node-0042");
		break;
	case CKPTD_MSG_PEER_GRANT: {
		ckptd_peer_grant *g = &m->u.peer_grant;
		g->segment_id = full ? 99 : 0;
		g->offset = full ? 4096 : 0;
		g->bytes = full ? (1ull << 30) : 1;
		g->key = full ? 0xfeedull : 0;
		g->base = full ? 0x7f0000000000ull : 0;
		g->fabric_addr_len = full ? CKPTD_FABADDR_MAX : 1;
		for (int i = 0; i < CKPTD_FABADDR_MAX; i++)
			g->fabric_addr[i] = (uint8_t)(full ? i * 7 : 0);
		if (full) {
			snprintf(g->provider, sizeof(g->provider), "tcp;ofi_rxm");
			g->checksum = 0xabcdefull;
		}
		break;
	}
	case CKPTD_MSG_PREEMPT:
		m->u.preempt.source = full ? CKPTD_NOTICE_SRC_AZURE : CKPTD_NOTICE_SRC_SIGNAL;
		if (full) {
			snprintf(m->u.preempt.job, sizeof(m->u.preempt.job), "%s", job);
			snprintf(m->u.preempt.node, sizeof(m->u.preempt.node), "gpu-node-0042");
			m->u.preempt.deadline_ns = 1800000000000000000ull;
			t_str(m->u.preempt.text, CKPTD_TEXT_MAX, 'p');
		}
		break;
	case CKPTD_MSG_EVIDENCE_REQUEST:
		snprintf(m->u.evidence_request.job, sizeof(m->u.evidence_request.job), "%s", job);
		m->u.evidence_request.rank = full ? 4095 : 0;
		if (full) {
			m->u.evidence_request.windows = 30;
			m->u.evidence_request.step_ns = 190000000ull;
			m->u.evidence_request.fastest_ns = 100000000ull;
			m->u.evidence_request.window_ns = 10000000000ull;
		}
		break;
	case CKPTD_MSG_NODE_EVIDENCE:
		t_evidence(&m->u.node_evidence, job, full, full ? 7 : 0);
		break;
	case CKPTD_MSG_STRAGGLERS:
		snprintf(m->u.stragglers.job, sizeof(m->u.stragglers.job), "%s", job);
		break;
	case CKPTD_MSG_STRAGGLERS_REPLY:
		snprintf(m->u.stragglers_reply.job, sizeof(m->u.stragglers_reply.job), "%s", job);
		m->u.stragglers_reply.count = full ? 2 : 0;
		m->u.stragglers_reply.entries = st->ev;
		for (int i = 0; i < 2; i++)
			t_evidence(&st->ev[i], job, i == 0, (uint32_t)i + 3);
		break;
	case CKPTD_MSG_EC_PLAN: {
		ckptd_ec_plan *p = &m->u.ec_plan;
		snprintf(p->job, sizeof(p->job), "%s", job);
		p->version = full ? 1ull << 40 : 1;
		p->group = full ? 17 : 0;
		p->k = 2;
		p->m = 1;
		p->member = full ? 2 : 0;
		p->nnodes = 3;
		p->nodes = st->en;
		for (uint32_t i = 0; i < 3; i++) {
			st->en[i].member = 2 - i;
			snprintf(st->en[i].node, sizeof(st->en[i].node), "gpu-node-%u", i);
			snprintf(st->en[i].address, sizeof(st->en[i].address), "10.0.0.%u:7070", i + 1);
		}
		p->count = full ? 4 : 0;
		p->entries = st->es;
		for (uint32_t i = 0; i < 4; i++)
			st->es[i] = (ckptd_ec_src){ i / 3, i % 3, 10 + i, 4096 + 7 * i };
		break;
	}
	case CKPTD_MSG_EC_DONE:
		snprintf(m->u.ec_done.job, sizeof(m->u.ec_done.job), "%s", job);
		m->u.ec_done.version = full ? 99 : 1;
		m->u.ec_done.group = full ? 3 : 0;
		if (full) {
			m->u.ec_done.code = EIO;
			m->u.ec_done.bytes = 1ull << 33;
			snprintf(m->u.ec_done.text, sizeof(m->u.ec_done.text), "stripe 2 row 1: gpu-node-4 unreachable");
		}
		break;
	case CKPTD_MSG_EMERGENCY:
		snprintf(m->u.emergency.job, sizeof(m->u.emergency.job), "%s", job);
		m->u.emergency.step = full ? 123456 : 1;
		m->u.emergency.deadline_ns = full ? 1800000000000000000ull : 0;
		if (full) {
			m->u.emergency.tier = CKPT_TIER_PEER_MEM;
			m->u.emergency.final = 1;
			snprintf(m->u.emergency.node, sizeof(m->u.emergency.node), "gpu-node-0042");
		}
		break;
	case CKPTD_MSG_HEARTBEAT:
		m->u.heartbeat.seq = full ? UINT32_MAX : 0;
		break;
	case CKPTD_MSG_SPARE_ASSIGN:
		snprintf(m->u.spare_assign.job, sizeof(m->u.spare_assign.job), "%s", job);
		t_str(m->u.spare_assign.node, full ? CKPTD_NAME_MAX : 1, 'l');
		m->u.spare_assign.epoch = full ? UINT64_MAX : 1;
		m->u.spare_assign.version = full ? 4200 : 0;
		m->u.spare_assign.count = full ? 3 : 1;
		m->u.spare_assign.entries = st->sr;
		for (uint32_t i = 0; i < 3; i++)
			st->sr[i] = (ckptd_spare_rank){ full ? 16380 + i : 0, full ? (1ull << 30) + i : 0 };
		break;
	case CKPTD_MSG_SPARE_DONE:
		snprintf(m->u.spare_done.job, sizeof(m->u.spare_done.job), "%s", job);
		m->u.spare_done.epoch = full ? 77 : 1;
		if (full) {
			m->u.spare_done.version = 4200;
			m->u.spare_done.code = ENODATA;
			m->u.spare_done.count = 2;
			m->u.spare_done.bytes = 2ull << 30;
			t_str(m->u.spare_done.text, CKPTD_TEXT_MAX, 's');
		}
		break;
	case CKPTD_MSG_RECOVERIES:
		if (full)
			snprintf(m->u.recoveries.job, sizeof(m->u.recoveries.job), "%s", job);
		break;
	case CKPTD_MSG_RECOVERIES_REPLY:
		if (full)
			snprintf(m->u.recoveries_reply.job, sizeof(m->u.recoveries_reply.job), "%s", job);
		m->u.recoveries_reply.count = full ? 2 : 0;
		m->u.recoveries_reply.entries = st->rc;
		for (int i = 0; i < 2; i++)
			t_recovery(&st->rc[i], job, !i, 3u + (uint64_t)i);
		break;
	case CKPTD_MSG_PEER_COMMIT:
		m->u.peer_commit.segment_id = full ? 99 : 0;
		m->u.peer_commit.bytes = full ? (1ull << 30) : 0;
		m->u.peer_commit.checksum = full ? 0x1234ull : 0;
		break;
	}
}

#endif
