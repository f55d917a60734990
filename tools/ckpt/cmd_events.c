/* ckpt events: the coordinator's failure decisions (protocol 1.5), each a
 * new membership epoch of a job, and (1.6) what followed them: spares
 * chosen and ready, recoveries done; with --follow, every later one as it
 * is made, until interrupted. ckpt recoveries: each recovery's timeline
 * (1.6). Also the epochs and recoveries parts of `ckpt status`. */
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
	     : k == CKPTD_FAIL_RANK_HUNG ? "rank-hung"
	     : k == CKPTD_FAIL_SPARE_CHOSEN ? "spare-chosen"
	     : k == CKPTD_FAIL_SPARE_READY ? "spare-ready"
	     : k == CKPTD_FAIL_NO_SPARE ? "no-spare"
	     : k == CKPTD_FAIL_RECOVERED ? "recovered"
	     : k == CKPTD_FAIL_STRAGGLER ? "straggler-replaced" : "unknown";
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
	           "decision), why. Needs a coordinator of protocol 1.5.\n"
	           "With a coordinator of 1.6, what follows a failure is listed too, under the\n"
	           "failure's epoch: spare-chosen (node: the spare told to take the lost node's\n"
	           "ranks, why: which and how it was chosen), spare-ready (their state is in the\n"
	           "spare's DRAM, or FAILED and why), no-spare (none free), recovered (every rank\n"
	           "took its first step again; why: the timeline, ckpt recoveries has it whole).\n");
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

/* ------------------------------------------------------------- recoveries */

static const char *const phase_names[] = { "detect", "spare", "pull", "register", "restore", "first_step" };

/* The phase ends after the failure, in order (0: not part of it). */
static void phase_ends(const ckptd_recovery *r, uint64_t t[6])
{
	t[0] = r->detected_ns;
	t[1] = r->chosen_ns;
	t[2] = r->ready_ns;
	t[3] = r->registered_ns;
	t[4] = r->restored_ns;
	t[5] = r->first_step_ns;
}

static void print_recovery(const cli *c, const ckptd_recovery *r, int first)
{
	char t[48];
	uint64_t e[6];
	phase_ends(r, e);
	utc(r->failed_ns, t, sizeof(t));
	if (c->json) {
		printf("%s{\"job\": ", first ? "" : ", ");
		cli_json_str(stdout, r->job);
		printf(", \"epoch\": %llu, \"failure\": \"%s\", \"node\": ", (unsigned long long)r->epoch,
		       kind_name(r->kind));
		cli_json_str(stdout, r->node);
		printf(", \"ranks\": ");
		cli_json_str(stdout, r->ranks);
		printf(", \"spare\": ");
		cli_json_str(stdout, r->spare);
		printf(", \"failed\": \"%s\", \"failed_ns\": %llu, \"phases\": [", t, (unsigned long long)r->failed_ns);
		uint64_t last = r->failed_ns;
		int k = 0;
		for (int i = 0; i < 6; i++) {
			if (!e[i])
				continue;
			printf("%s{\"phase\": \"%s\", \"end_ns\": %llu, \"seconds\": %.6f}", k++ ? ", " : "", phase_names[i],
			       (unsigned long long)e[i], (double)(e[i] - last) / 1e9);
			last = e[i];
		}
		printf("], \"total_seconds\": ");
		if (r->first_step_ns)
			printf("%.6f", (double)(r->first_step_ns - r->failed_ns) / 1e9);
		else
			printf("null");
		printf(", \"protected_ns\": %llu, \"spare_bytes\": %llu, \"code\": %u, \"why\": ",
		       (unsigned long long)r->protected_ns, (unsigned long long)r->bytes, r->code);
		cli_json_str(stdout, r->text);
		printf("}");
		return;
	}
	printf("%s epoch %llu: %s on %s at %s, ranks %s%s%s\n", r->job, (unsigned long long)r->epoch, kind_name(r->kind),
	       r->node, t, r->ranks[0] ? r->ranks : "-", r->spare[0] ? ", spare " : "", r->spare);
	uint64_t last = r->failed_ns;
	for (int i = 0; i < 6; i++) {
		if (!e[i]) {
			printf("  %-11s %s\n", phase_names[i], i == 1 || i == 2 ? (r->spare[0] || r->code ? "-" : "- (no spare)")
			                                                      : "not yet");
			continue;
		}
		printf("  %-11s %9.3f s\n", phase_names[i], (double)(e[i] - last) / 1e9);
		last = e[i];
	}
	if (r->first_step_ns)
		printf("  %-11s %9.3f s (failure to first step)\n", "total", (double)(r->first_step_ns - r->failed_ns) / 1e9);
	if (r->protected_ns)
		printf("  protected again %.3f s after the failure (a newer version committed at PEER_MEM)\n",
		       (double)(r->protected_ns - r->failed_ns) / 1e9);
	else
		printf("  not protected again yet (no newer version committed at PEER_MEM)\n");
	if (r->text[0])
		printf("  %s\n", r->text);
}

int cmd_recoveries(cli *c, int argc, char **argv)
{
	int prc = cli_parse_opts(c, "recoveries", argc, argv);
	if (prc)
		return prc;
	if (!c->daemon || !*c->daemon)
		return cli_usage("recoveries", "--daemon ADDR (or CKPT_DAEMON) is required");
	if (c->job && ckpt__job_valid(c->job) < 0)
		return cli_usage("recoveries", "invalid job id '%s'", c->job);
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(c, "recoveries", c->job, &cl);
	if (rc)
		return rc;
	if (CKPTD_VERSION_MINOR_OF(ckptd_client_version(cl)) < 6) {
		fprintf(stderr, "ckpt recoveries: the daemon at %s speaks protocol 1.%u; recoveries are 1.6's\n", c->daemon,
		        CKPTD_VERSION_MINOR_OF(ckptd_client_version(cl)));
		ckptd_client_close(cl);
		return EXIT_ERROR;
	}
	ckptd_msg req = { .type = CKPTD_MSG_RECOVERIES }, rep;
	if (c->job)
		snprintf(req.u.recoveries.job, sizeof(req.u.recoveries.job), "%s", c->job);
	if ((rc = cli_daemon_call(c, "recoveries", cl, &req, CKPTD_MSG_RECOVERIES_REPLY, &rep))) {
		ckptd_client_close(cl);
		return rc;
	}
	const ckptd_recoveries_reply *o = &rep.u.recoveries_reply;
	if (c->json)
		printf("{\"job\": %s%s%s, \"recoveries\": [", c->job ? "\"" : "", c->job ? c->job : "null", c->job ? "\"" : "");
	else if (!o->count)
		printf("no recoveries%s%s\n", c->job ? " of job " : "", c->job ? c->job : "");
	for (uint32_t i = 0; i < o->count; i++)
		print_recovery(c, &o->entries[i], i == 0);
	if (c->json)
		printf("]}\n");
	ckptd_msg_free(&rep);
	ckptd_client_close(cl);
	return EXIT_OK;
}

void help_recoveries(FILE *o)
{
	fprintf(o, "usage: ckpt recoveries --daemon ADDR [--token-file FILE] [--job J] [--json]\n\n"
	           "Every recovery the coordinator keeps (the newest 64, oldest first): a failure\n"
	           "decision (ckpt events) and how its ranks came back, phase by phase, each the\n"
	           "time since the end of the one before: detect (the failure's last sign of life\n"
	           "to the decision), spare (a spare chosen to take the lost node), pull (the\n"
	           "ranks' state in the spare's DRAM), register (every rank registered again),\n"
	           "restore (every rank restored), first_step (every rank's first step reported);\n"
	           "total: failure to first step, the phases' sum. A phase that ended before the\n"
	           "one before it (ranks relaunched while the spare still pulled) shows 0 s; the\n"
	           "spare phases are absent without a spare. Then when the job was protected again\n"
	           "(a newer version committed at PEER_MEM). --json: one object, recoveries: job,\n"
	           "epoch, failure, node, ranks, spare, failed (UTC), failed_ns, phases (phase,\n"
	           "end_ns, seconds), total_seconds (null until the first step), protected_ns,\n"
	           "spare_bytes, code (non-zero: the spare failed or none was free), why. Needs a\n"
	           "coordinator of protocol 1.6.\n");
}

void cli_status_recoveries(const cli *c, const struct ckptd_status_reply *s)
{
	char t[48];
	if (c->json) {
		printf(", \"recoveries\": [");
		for (uint32_t i = 0; i < s->nrecoveries; i++) {
			const ckptd_recovery *r = &s->recoveries[i];
			printf("%s{\"job\": ", i ? ", " : "");
			cli_json_str(stdout, r->job);
			printf(", \"epoch\": %llu, \"node\": ", (unsigned long long)r->epoch);
			cli_json_str(stdout, r->node);
			printf(", \"spare\": ");
			cli_json_str(stdout, r->spare);
			printf(", \"spare_chosen_ns\": %llu, \"spare_ready_ns\": %llu, \"first_step_ns\": %llu, "
			       "\"protected_ns\": %llu, \"why\": ", (unsigned long long)r->chosen_ns,
			       (unsigned long long)r->ready_ns, (unsigned long long)r->first_step_ns,
			       (unsigned long long)r->protected_ns);
			cli_json_str(stdout, r->text);
			printf("}");
		}
		printf("]");
		return;
	}
	for (uint32_t i = 0; i < s->nrecoveries; i++) {
		const ckptd_recovery *r = &s->recoveries[i];
		if (r->spare[0]) {
			utc(r->chosen_ns, t, sizeof(t));
			printf("job %s: spare %s took %s (ranks %s) at %s", r->job, r->spare, r->node, r->ranks[0] ? r->ranks : "-",
			       t);
			if (r->ready_ns)
				printf(", its state in DRAM %.3f s later", (double)(r->ready_ns - r->chosen_ns) / 1e9);
		} else {
			printf("job %s: %s on %s (ranks %s), no spare", r->job, kind_name(r->kind), r->node,
			       r->ranks[0] ? r->ranks : "-");
		}
		if (r->protected_ns) {
			utc(r->protected_ns, t, sizeof(t));
			printf("; protected again at %s\n", t);
		} else {
			printf("; not protected again yet\n");
		}
		if (r->text[0])
			printf("  %s\n", r->text);
	}
}
