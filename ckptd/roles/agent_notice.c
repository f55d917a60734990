/* Preemption on an agent: the notice pollers (ckptd/notice: cloud metadata
 * services, a trigger file), PREEMPT from the node's ranks (a signal) and
 * from the tool, all passed to the coordinator with this node's name; and
 * EMERGENCY from the coordinator, passed to the job's ranks.
 *
 * The pollers run on a thread of their own; a notice crosses into the event
 * loop through a queue and a pipe the loop watches. */
#include "agent_int.h"

#include "notice/notice.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define QUEUE_MAX 16

struct agent_notices {
	ckptd_agent *a;
	ckptd_notice_poller *poller;
	int pipe[2];
	pthread_mutex_t mu;
	ckptd_notice_event q[QUEUE_MAX];
	int n;
};

static uint32_t wire_source(int s)
{
	switch (s) {
	case CKPTD_NOTICE_AWS: return CKPTD_NOTICE_SRC_AWS;
	case CKPTD_NOTICE_GCP: return CKPTD_NOTICE_SRC_GCP;
	case CKPTD_NOTICE_AZURE: return CKPTD_NOTICE_SRC_AZURE;
	default: return CKPTD_NOTICE_SRC_FILE;
	}
}

/* To the coordinator (in this process or over the link). Lost while the
 * link is down: the sources keep no state to resend, so it is said loudly. */
static void to_coordinator(ckptd_agent *a, const ckptd_preempt *p)
{
	if (a->local) {
		ckptd_coordinator_preempt(a->local, p);
		return;
	}
	ckptd_msg m = { .type = CKPTD_MSG_PREEMPT, .u.preempt = *p };
	if (ckptd__agent_link_send(a, &m, FWD_IGNORE, 0) < 0)
		CKPTD_ERROR(a->log, NULL, p->job[0] ? p->job : NULL,
		            "preemption notice NOT passed on: the coordinator is unreachable");
}

/* Poller thread. */
static void on_event(void *arg, const ckptd_notice_event *ev)
{
	struct agent_notices *n = arg;
	pthread_mutex_lock(&n->mu);
	if (n->n < QUEUE_MAX)
		n->q[n->n++] = *ev;
	pthread_mutex_unlock(&n->mu);
	char one = 1;
	while (write(n->pipe[1], &one, 1) < 0 && errno == EINTR)
		;
}

/* Event loop: the notices the pollers queued. */
static void on_pipe(ckptd_server *srv, int fd, uint32_t events, void *arg)
{
	(void)srv, (void)events;
	struct agent_notices *n = arg;
	char buf[64];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	ckptd_notice_event q[QUEUE_MAX];
	pthread_mutex_lock(&n->mu);
	int k = n->n;
	memcpy(q, n->q, (size_t)k * sizeof(q[0]));
	n->n = 0;
	pthread_mutex_unlock(&n->mu);
	for (int i = 0; i < k; i++) {
		ckptd_agent *a = n->a;
		ckptd_preempt p = { .deadline_ns = q[i].deadline_ns, .source = wire_source(q[i].source) };
		snprintf(p.node, sizeof(p.node), "%s", a->node);
		snprintf(p.text, sizeof(p.text), "%s", q[i].detail);
		ckptd_metrics_add(a->mx, CKPTD_M_AGENT_NOTICES,
		                  (const char *[]){ "aws", "gcp", "azure", "file" }[p.source - 1], NULL, 1);
		CKPTD_WARN(a->log, NULL, NULL, "preemption notice for this node: %s", q[i].detail);
		to_coordinator(a, &p);
	}
}

int ckptd__agent_notices_start(ckptd_agent *a, char *err, size_t errcap)
{
	const ckptd_config *cfg = a->cfg;
	if (!cfg->notice_aws && !cfg->notice_gcp && !cfg->notice_azure && !cfg->notice_file)
		return 0;
	struct agent_notices *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->a = a;
	pthread_mutex_init(&n->mu, NULL);
	int r;
	if (pipe2(n->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		r = -errno;
		pthread_mutex_destroy(&n->mu);
		free(n);
		return r;
	}
	a->notices = n;
	if ((r = ckptd_server_watch(a->srv, n->pipe[0], on_pipe, n)) < 0) {
		snprintf(err, errcap, "cannot watch the notice pipe: %s", strerror(-r));
		return r;
	}
	ckptd_notice_cfg nc = { .aws_url = cfg->notice_aws, .gcp_url = cfg->notice_gcp, .azure_url = cfg->notice_azure,
	                        .azure_vm_name = cfg->notice_azure_vm, .trigger_file = cfg->notice_file,
	                        .interval_ms = (int)cfg->notice_interval_ms };
	if ((r = ckptd_notice_start(&nc, a->log, on_event, n, &n->poller)) < 0) {
		snprintf(err, errcap, "--notice-*: the preemption-notice pollers did not start (%s); see the log",
		         strerror(-r));
		return r;
	}
	CKPTD_INFO(a->log, NULL, NULL, "preemption notices polled:%s%s%s%s every %llu ms", cfg->notice_aws ? " aws" : "",
	           cfg->notice_gcp ? " gcp" : "", cfg->notice_azure ? " azure" : "", cfg->notice_file ? " file" : "",
	           (unsigned long long)cfg->notice_interval_ms);
	return 0;
}

void ckptd__agent_notices_stop(ckptd_agent *a)
{
	struct agent_notices *n = a->notices;
	if (!n)
		return;
	ckptd_notice_stop(n->poller); /* its thread is gone after this */
	close(n->pipe[0]);
	close(n->pipe[1]);
	pthread_mutex_destroy(&n->mu);
	free(n);
	a->notices = NULL;
}

int ckptd__agent_preempt(ckptd_agent *a, ckptd_session *s, const ckptd_preempt *m, uint64_t relay)
{
	ckptd_preempt p = *m;
	if (!p.node[0]) /* a rank's signal, or `ckpt preempt` on this node: this node goes */
		snprintf(p.node, sizeof(p.node), "%s", a->node);
	CKPTD_WARN(a->log, NULL, p.job[0] ? p.job : NULL, "preemption notice from a %s for node %s",
	           ckptd_session_role(s) == CKPTD_ROLE_RANK ? "rank" : "client", p.node);
	ckptd_msg ok = { .type = CKPTD_MSG_OK };
	if (relay && a->local) {
		int r = ckptd_coordinator_preempt(a->local, &p);
		ok.u.ok.count = r > 0 ? (uint32_t)r : 0;
	} else if (relay) {
		/* The tool is told what the coordinator did, not that it was asked. */
		ckptd_msg fw = { .type = CKPTD_MSG_PREEMPT, .u.preempt = p };
		if (ckptd__agent_link_send(a, &fw, FWD_LIST, relay) < 0)
			return ckptd_session_send_error(s, CKPTD_ERR_BUSY, "coordinator unreachable; the notice was not "
			                                "passed on; try again");
		return 0;
	} else {
		to_coordinator(a, &p);
	}
	return ckptd_session_send(s, &ok, -1);
}

void ckptd__agent_emergency(ckptd_agent *a, const ckptd_emergency *e)
{
	if (e->tier == CKPT_TIER_SHARED && !e->final)
		ckptd__shared_emergency(a, e->job, e->step);
	ckptd_msg m = { .type = CKPTD_MSG_EMERGENCY, .u.emergency = *e };
	int k = 0;
	for (rank_sess *rs = a->ranks; rs; rs = rs->next)
		if (rs->registered && !strcmp(rs->job, e->job) && ckptd_session_send(rs->s, &m, -1) == 0)
			k++;
	CKPTD_INFO(a->log, NULL, e->job, "emergency checkpoint at step %llu: told %d ranks", (unsigned long long)e->step,
	           k);
}
