/* The agent's side of failure detection: which ranks this node serves and
 * whether they live. The coordinator decides (coord_members.c); the agent
 * tells it what it sees, in RANKS (docs/protocol.md, 1.5):
 *  - died: the rank's process exited (its pidfd turned readable, seen at
 *    the next tick, even while a child it forked keeps the socket open), or
 *    its connection closed without RANK_LEAVE and its process is gone within
 *    a second (a process closes its files before it becomes a zombie: the
 *    socket's end comes first). A rank whose connection closed while its
 *    process lives on dropped its link (its own heartbeat timeout): gone
 *    from this node, no failure. Over TCP (no pidfd) a close is a death;
 *  - hung: a rank that said it heartbeats (REGISTER_RANK's BEAT_MS) was not
 *    heard from for --hang-timeout, and at least 4 of its intervals, while
 *    its process exists (SIGSTOP, a deadlock holding its io thread). A rank
 *    waiting on this agent (a segment request held for its job's pool, a
 *    read held while its shard is fetched or rebuilt here, a question
 *    passed on to the coordinator) is not silent: it waits on us.
 *  - up again: a hung rank heard from.
 * The agent's --on-failure runs when the coordinator's EVENT for one of its
 * jobs comes back (with the epoch), or at once, epoch 0, when the agent
 * cannot reach the coordinator. */
#include "agent_int.h"
#include "hook.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* A late tick (this agent stalled longer than this): no hang verdicts,
 * the ranks' frames may be waiting unread. */
#define STALL_NS (1000ull * 1000000ull)

/* A rank whose connection closed without RANK_LEAVE, its process not
 * yet seen gone. */
typedef struct gone_rank {
	char job[CKPTD_JOB_MAX + 1];
	ckptd_member m;
	int pidfd;
	uint64_t heard_ns, until_ns;
} gone_rank;

struct agent_members {
	gone_rank *v;
	size_t n, cap;
};

int ckptd__members_start(ckptd_agent *a)
{
	if (!(a->members = calloc(1, sizeof(*a->members))))
		return -ENOMEM;
	/* --role both: the coordinator's hook runs; one command per decision. */
	if (a->local)
		return 0;
	return ckptd_hook_new(a->cfg->on_failure, a->log, &a->hook);
}

void ckptd__members_stop(ckptd_agent *a)
{
	ckptd_hook_free(a->hook);
	a->hook = NULL;
	for (size_t i = 0; a->members && i < a->members->n; i++)
		close(a->members->v[i].pidfd);
	if (a->members)
		free(a->members->v);
	free(a->members);
	a->members = NULL;
}

static int speaks_members(ckptd_agent *a)
{
	return a->local || (a->link && CKPTD_VERSION_MINOR_OF(ckptd_client_version(a->link)) >= 5);
}

static int by_rank(const void *x, const void *y)
{
	const ckptd_member *a = x, *b = y;
	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/* RANKS for job: every registered rank of it here, whole, and `failed`
 * (DIED or HUNG, or LEFT: once more; NULL: none) when its session is gone.
 * A failure seen while the coordinator is away runs the hook here at once
 * (epoch 0). */
static void report(ckptd_agent *a, const char *job, const ckptd_member *failed, int listed, uint64_t now)
{
	size_t n = failed && !listed ? 1 : 0;
	for (rank_sess *rs = a->ranks; rs; rs = rs->next)
		if (rs->registered && !rs->dropped && !strcmp(rs->job, job))
			n++;
	if (n > CKPTD_MAX_LIST)
		n = CKPTD_MAX_LIST;
	ckptd_member *e = n ? calloc(n, sizeof(*e)) : NULL;
	if (n && !e)
		return;
	uint32_t k = 0;
	for (rank_sess *rs = a->ranks; rs && k < n; rs = rs->next) {
		if (!rs->registered || rs->dropped || strcmp(rs->job, job))
			continue;
		e[k].rank = rs->rank;
		e[k].pid = rs->pid;
		e[k].state = rs->member;
		e[k].silent_ns = rs->member == CKPTD_MEMBER_UP || !rs->heard_ns ? 0 : now - rs->heard_ns;
		k++;
	}
	if (failed && !listed && k < n)
		e[k++] = *failed;
	if (k > 1)
		qsort(e, k, sizeof(*e), by_rank);
	if (speaks_members(a)) {
		ckptd_msg m = { .type = CKPTD_MSG_RANKS };
		snprintf(m.u.ranks.job, sizeof(m.u.ranks.job), "%s", job);
		snprintf(m.u.ranks.node, sizeof(m.u.ranks.node), "%s", a->node);
		m.u.ranks.count = k;
		m.u.ranks.entries = e;
		ckptd__agent_link_send(a, &m, FWD_IGNORE, 0);
	} else if (failed && (failed->state == CKPTD_MEMBER_DIED || failed->state == CKPTD_MEMBER_HUNG)) {
		ckptd_member one = *failed;
		ckptd_event ev = { .epoch = 0, .kind = failed->state == CKPTD_MEMBER_DIED ? CKPTD_FAIL_RANK_DIED
		                                                                          : CKPTD_FAIL_RANK_HUNG,
		                   .time_ns = ckpt__wall_ns(), .silent_ns = failed->silent_ns, .count = 1, .entries = &one };
		snprintf(ev.job, sizeof(ev.job), "%s", job);
		snprintf(ev.node, sizeof(ev.node), "%s", a->node);
		CKPTD_WARN(a->log, a->node, job, "%s of rank %u: no coordinator of 1.5 to decide it (unreachable or older); "
		           "--on-failure run here, epoch 0", ckptd_fail_name(ev.kind), failed->rank);
		ckptd_hook_run(a->hook, &ev);
	}
	free(e);
}

void ckptd__members_registered(ckptd_agent *a, rank_sess *rs, uint32_t pid, uint32_t beat_ms)
{
	if (rs->pidfd > 0)
		close(rs->pidfd);
	rs->pidfd = -1;
	rs->pid = pid;
	rs->beat_ms = beat_ms;
	rs->member = CKPTD_MEMBER_UP;
	/* Its pid is the socket's peer credential (checked by the caller); over
	 * TCP it names a process of another host: no pidfd then. */
	if (pid && ckptd_session_transport(rs->s) == CKPTD_TRANSPORT_UNIX) {
		long fd = syscall(SYS_pidfd_open, (pid_t)pid, 0);
		if (fd >= 0) {
			rs->pidfd = (int)fd;
			(void)fcntl(rs->pidfd, F_SETFD, FD_CLOEXEC);
		} else {
			CKPTD_DEBUG(a->log, ckptd_session_peer(rs->s), rs->job, "rank %u: no pidfd (%s): its death is seen "
			            "when its connection closes", rs->rank, strerror(errno));
		}
	}
	report(a, rs->job, NULL, 0, ckpt__now_ns());
}

static ckptd_member member_of(const rank_sess *rs, uint64_t now)
{
	ckptd_member m = { .rank = rs->rank, .pid = rs->pid, .state = rs->member };
	m.silent_ns = rs->member == CKPTD_MEMBER_UP || !rs->heard_ns ? 0 : now - rs->heard_ns;
	return m;
}

void ckptd__members_leave(ckptd_agent *a, rank_sess *rs)
{
	(void)a;
	rs->left = 1;
}

void ckptd__members_gone(ckptd_agent *a, rank_sess *rs)
{
	int pidfd = rs->pidfd;
	rs->pidfd = -1;
	if (!rs->registered || rs->dropped) {
		if (pidfd > 0)
			close(pidfd);
		return;
	}
	uint64_t now = ckpt__now_ns();
	rs->dropped = 1;
	/* The daemon is stopping: its ranks' connections close because it goes. */
	if (ckptd_server_stopping(a->srv)) {
		if (pidfd > 0)
			close(pidfd);
		return;
	}
	if (rs->member == CKPTD_MEMBER_DIED || rs->left) { /* said already, or no failure */
		if (pidfd > 0)
			close(pidfd);
		report(a, rs->job, NULL, 0, now);
		return;
	}
	gone_rank *g = NULL;
	struct agent_members *am = a->members;
	if (pidfd > 0 && am && (am->n < am->cap || (am->cap < CKPTD_MAX_LIST &&
	                                            (g = realloc(am->v, (am->cap ? am->cap * 2 : 8) * sizeof(*g)))))) {
		if (g) {
			am->v = g;
			am->cap = am->cap ? am->cap * 2 : 8;
		}
		g = &am->v[am->n++];
		snprintf(g->job, sizeof(g->job), "%s", rs->job);
		g->m = member_of(rs, now);
		g->pidfd = pidfd;
		g->heard_ns = rs->heard_ns;
		g->until_ns = now + 1000ull * 1000000ull;
		return; /* reported once its process is seen gone, or seen living on */
	}
	if (pidfd > 0)
		close(pidfd);
	rs->member = CKPTD_MEMBER_DIED;
	ckptd_member m = member_of(rs, now);
	CKPTD_WARN(a->log, ckptd_session_peer(rs->s), rs->job, "rank %u died: its connection closed without "
	           "RANK_LEAVE", rs->rank);
	report(a, rs->job, &m, 0, now);
}

/* Closed connections whose processes exited (died) or still live past
 * their second (dropped their link: no failure). */
static void gone_tick(ckptd_agent *a, uint64_t now)
{
	struct agent_members *am = a->members;
	for (size_t i = 0; am && i < am->n;) {
		gone_rank *g = &am->v[i];
		struct pollfd p = { .fd = g->pidfd, .events = POLLIN };
		int dead = poll(&p, 1, 0) == 1;
		if (!dead && now < g->until_ns) {
			i++;
			continue;
		}
		if (dead) {
			g->m.state = CKPTD_MEMBER_DIED;
			g->m.silent_ns = g->heard_ns ? now - g->heard_ns : 0;
			CKPTD_WARN(a->log, a->node, g->job, "rank %u died: its connection closed and process %u exited",
			           g->m.rank, g->m.pid);
			report(a, g->job, &g->m, 0, now);
		} else {
			CKPTD_INFO(a->log, a->node, g->job, "rank %u closed its connection without RANK_LEAVE; its process %u "
			           "lives: it left this agent", g->m.rank, g->m.pid);
			report(a, g->job, NULL, 0, now);
		}
		close(g->pidfd);
		am->v[i] = am->v[--am->n];
	}
}

/* Whether the rank waits on this agent (then its silence is ours). */
static int waits_on_us(ckptd_agent *a, const rank_sess *rs)
{
	if (rs->waiting || ckptd__prefetch_holds(a, rs->serial))
		return 1;
	for (size_t i = 0; i < a->flen; i++) {
		const fwd *f = &a->fifo[(a->fhead + i) % a->fcap];
		if (f->kind == FWD_LIST && f->serial == rs->serial)
			return 1;
	}
	return 0;
}

void ckptd__members_heard(ckptd_agent *a, rank_sess *rs)
{
	if (rs->member != CKPTD_MEMBER_HUNG)
		return;
	rs->member = CKPTD_MEMBER_UP;
	CKPTD_INFO(a->log, ckptd_session_peer(rs->s), rs->job, "rank %u heard again after being reported hung", rs->rank);
	report(a, rs->job, NULL, 0, ckpt__now_ns());
}

void ckptd__members_tick(ckptd_agent *a, uint64_t now)
{
	uint64_t last = a->members_tick_ns;
	a->members_tick_ns = now;
	int stalled = last && now - last > STALL_NS;
	ckptd_hook_reap(a->hook);
	gone_tick(a, now);
	for (rank_sess *rs = a->ranks; rs; rs = rs->next) {
		if (!rs->registered || rs->dropped || rs->member == CKPTD_MEMBER_DIED)
			continue;
		if (rs->pidfd > 0) {
			struct pollfd p = { .fd = rs->pidfd, .events = POLLIN };
			if (poll(&p, 1, 0) == 1) {
				rs->member = CKPTD_MEMBER_DIED;
				CKPTD_WARN(a->log, ckptd_session_peer(rs->s), rs->job, "rank %u died: process %u exited%s",
				           rs->rank, rs->pid, rs->left ? " (after RANK_LEAVE)" : "");
				if (rs->left) { /* it said goodbye: gone, not failed */
					rs->member = CKPTD_MEMBER_LEFT;
					rs->dropped = 1;
					report(a, rs->job, NULL, 0, now);
					continue;
				}
				ckptd_member m = member_of(rs, now);
				report(a, rs->job, &m, 1, now);
				continue;
			}
		}
		uint64_t hang = a->cfg->hang_timeout_ms * 1000000ull, floor = 4ull * rs->beat_ms * 1000000ull;
		if (hang && hang < floor)
			hang = floor;
		if (!hang || !rs->beat_ms || stalled || rs->member == CKPTD_MEMBER_HUNG || rs->left || !rs->heard_ns ||
		    now - rs->heard_ns <= hang || waits_on_us(a, rs))
			continue;
		rs->member = CKPTD_MEMBER_HUNG;
		CKPTD_WARN(a->log, ckptd_session_peer(rs->s), rs->job, "rank %u hung: silent for %.1f s (--hang-timeout %llu ms, "
		           "heartbeats every %u ms) while its process lives", rs->rank, (double)(now - rs->heard_ns) / 1e9,
		           (unsigned long long)a->cfg->hang_timeout_ms, rs->beat_ms);
		ckptd_member m = member_of(rs, now);
		report(a, rs->job, &m, 1, now);
	}
}

void ckptd__members_hello(ckptd_agent *a)
{
	uint64_t now = ckpt__now_ns();
	for (rank_sess *rs = a->ranks; rs; rs = rs->next) {
		if (!rs->registered || rs->dropped)
			continue;
		int first = 1; /* one RANKS per job */
		for (rank_sess *q = a->ranks; q != rs; q = q->next)
			if (q->registered && !q->dropped && !strcmp(q->job, rs->job))
				first = 0;
		if (first)
			report(a, rs->job, NULL, 0, now);
	}
}

void ckptd__members_event(ckptd_agent *a, const ckptd_event *e)
{
	CKPTD_INFO(a->log, e->node, e->job, "epoch %llu: %s on %s", (unsigned long long)e->epoch,
	           ckptd_fail_name(e->kind), e->node);
	ckptd_hook_run(a->hook, e);
}
