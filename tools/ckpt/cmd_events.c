/* ckpt events: the coordinator's failure decisions (protocol 1.5), each a
 * new membership epoch of a job; with --follow, every later one as it is
 * made, until interrupted. Also the epochs part of `ckpt status`. */
#include "cli.h"
#include "wire/client.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *kind_name(uint32_t k)
{
	return k == CKPTD_FAIL_RANK_DIED ? "rank-died"
	     : k == CKPTD_FAIL_NODE_LOST ? "node-lost"
	     : k == CKPTD_FAIL_RANK_HUNG ? "rank-hung" : "unknown";
}

static void utc(uint64_t ns, char *buf, size_t cap)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;
	gmtime_r(&t, &tm);
	size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, cap - n, ".%03uZ", (unsigned)(ns / 1000000ull % 1000));
}

static void print_event(const cli *c, const ckptd_event *e)
{
	char t[48];
	utc(e->time_ns, t, sizeof(t));
	if (c->json) {
		printf("{\"job\": ");
		cli_json_str(stdout, e->job);
		printf(", \"epoch\": %llu, \"failure\": \"%s\", \"node\": ", (unsigned long long)e->epoch, kind_name(e->kind));
		cli_json_str(stdout, e->node);
		printf(", \"ranks\": [");
		for (uint32_t i = 0; i < e->count; i++)
			printf("%s%u", i ? ", " : "", e->entries[i].rank);
		printf("], \"time\": \"%s\", \"time_ns\": %llu, \"silent_seconds\": %.3f, \"why\": ", t,
		       (unsigned long long)e->time_ns, e->silent_ns / 1e9);
		cli_json_str(stdout, e->text);
		printf("}\n");
	} else {
		printf("%s  %-16s epoch %-5llu %-10s node %-16s ranks ", t, e->job[0] ? e->job : "(no job)",
		       (unsigned long long)e->epoch, kind_name(e->kind), e->node);
		if (!e->count)
			printf("-");
		for (uint32_t i = 0; i < e->count; i++)
			printf("%s%u", i ? "," : "", e->entries[i].rank);
		printf("  (%s)\n", e->text);
	}
	fflush(stdout);
}

int cmd_events(cli *c, int argc, char **argv)
{
	int follow = 0;
	for (int i = 1; i < argc; i++) {
		int r = cli_daemon_opt(c, argc, argv, &i);
		if (r == 0)
			r = cli_common_opt(c, argc, argv, &i);
		if (r < 0)
			return cli_usage("events", "bad value for %s", argv[i]);
		if (r)
			continue;
		if (!strcmp(argv[i], "--follow") || !strcmp(argv[i], "-f"))
			follow = 1;
		else
			return cli_usage("events", "unknown option '%s'", argv[i]);
	}
	if (!c->daemon || !*c->daemon)
		return cli_usage("events", "--daemon ADDR (or CKPT_DAEMON) is required");
	if (c->job && ckpt__job_valid(c->job) < 0)
		return cli_usage("events", "invalid job id '%s'", c->job);
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(c, "events", c->job, &cl);
	if (rc)
		return rc;
	if (CKPTD_VERSION_MINOR_OF(ckptd_client_version(cl)) < 5) {
		fprintf(stderr, "ckpt events: the daemon at %s speaks protocol 1.%u; failure events are 1.5's\n", c->daemon,
		        CKPTD_VERSION_MINOR_OF(ckptd_client_version(cl)));
		ckptd_client_close(cl);
		return EXIT_ERROR;
	}
	ckptd_msg req = { .type = CKPTD_MSG_EVENTS };
	if (c->job)
		snprintf(req.u.events.job, sizeof(req.u.events.job), "%s", c->job);
	req.u.events.follow = (uint32_t)follow;
	int err = ckptd_client_send(cl, &req);
	int history = 1;
	while (err == 0) {
		if (!history) {
			/* Following: wait as long as it takes (frames already buffered
			 * are read first; poll wakes for new ones only). */
			ckptd_msg m;
			int r = ckptd_client_poll(cl, &m);
			if (r == 0) {
				struct pollfd p = { .fd = ckptd_client_fd(cl), .events = POLLIN };
				if (poll(&p, 1, -1) < 0 && errno != EINTR)
					err = -errno;
				continue;
			}
			if (r < 0) {
				err = r;
				break;
			}
			if (m.type == CKPTD_MSG_EVENT)
				print_event(c, &m.u.event);
			ckptd_msg_free(&m);
			continue;
		}
		ckptd_msg m;
		if ((err = ckptd_client_recv(cl, &m)) < 0)
			break;
		if (m.type == CKPTD_MSG_EVENT) {
			print_event(c, &m.u.event);
		} else if (m.type == CKPTD_MSG_OK) {
			history = 0;
			if (!follow) {
				ckptd_msg_free(&m);
				break;
			}
		} else {
			if (m.type == CKPTD_MSG_ERROR)
				fprintf(stderr, "ckpt events: the daemon at %s answered error %u: %s\n", c->daemon, m.u.error.code,
				        m.u.error.text);
			ckptd_msg_free(&m);
			ckptd_client_close(cl);
			return EXIT_ERROR;
		}
		ckptd_msg_free(&m);
	}
	ckptd_client_close(cl);
	if (err < 0) {
		fprintf(stderr, "ckpt events: daemon at %s: %s\n", c->daemon,
		        err == -ECONNRESET ? "it closed the connection" : ckpt_strerror(err));
		return EXIT_ERROR;
	}
	return EXIT_OK;
}

void help_events(FILE *o)
{
	fprintf(o, "usage: ckpt events --daemon ADDR [--token-file FILE] [--job J] [--follow] [--json]\n\n"
	           "The coordinator's failure decisions, oldest first (it keeps the newest 256): a\n"
	           "rank that died (its process ended without closing its context), a node lost\n"
	           "(its agent's connection closed, or silent past --failure-timeout) or a rank\n"
	           "hung (silent past the agent's --hang-timeout while its process lives). Each is\n"
	           "a new membership epoch of the job (of job \"\" for a node that served none).\n"
	           "--follow keeps the connection and prints each later decision as it is made,\n"
	           "until interrupted. --job: that job's only (the session is the job's). --json:\n"
	           "one object a line: job, epoch, failure (rank-died, node-lost, rank-hung), node,\n"
	           "ranks, time (UTC), time_ns, silent_seconds (from the last sign of life to the\n"
	           "decision), why. Needs a coordinator of protocol 1.5.\n");
}

void cli_status_epochs(const cli *c, const struct ckptd_status_reply *s)
{
	char t[48];
	if (c->json) {
		printf(", \"epochs\": [");
		for (uint32_t i = 0; i < s->nepochs; i++) {
			const ckptd_job_epoch *e = &s->epochs[i];
			utc(e->time_ns, t, sizeof(t));
			printf("%s{\"job\": ", i ? ", " : "");
			cli_json_str(stdout, e->job);
			printf(", \"epoch\": %llu, \"last_failure\": \"%s\", \"node\": ", (unsigned long long)e->epoch,
			       kind_name(e->kind));
			cli_json_str(stdout, e->node);
			printf(", \"ranks\": ");
			cli_json_str(stdout, e->ranks);
			printf(", \"time\": \"%s\"}", t);
		}
		printf("]");
		return;
	}
	for (uint32_t i = 0; i < s->nepochs; i++) {
		const ckptd_job_epoch *e = &s->epochs[i];
		utc(e->time_ns, t, sizeof(t));
		printf("job %s: membership epoch %llu, last failure %s on %s (ranks %s) at %s\n",
		       e->job[0] ? e->job : "(none)", (unsigned long long)e->epoch, kind_name(e->kind), e->node,
		       e->ranks[0] ? e->ranks : "-", t);
	}
}
