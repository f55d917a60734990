/* The coordinator's views of a running job and the operator's notice:
 * stragglers, goodput and preempt (all through a ckptd daemon). */
#include "cli.h"
#include "wire/client.h"
#include "plot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- stragglers */

static int by_step_desc(const void *x, const void *y)
{
	const ckptd_rank_step *a = x, *b = y;
	return a->step_ns < b->step_ns ? 1 : a->step_ns > b->step_ns ? -1 : (a->rank > b->rank) - (a->rank < b->rank);
}

/* The job's persistent stragglers and their nodes' evidence (1.4): into
 * *out (malloc'd; NULL and 0 when the daemon is older or knows none). */
static int fetch_persistent(cli *c, ckptd_client *cl, ckptd_node_evidence **out, uint32_t *n)
{
	*out = NULL;
	*n = 0;
	if (CKPTD_VERSION_MINOR_OF(ckptd_client_version(cl)) < 4)
		return 0;
	ckptd_msg req = { .type = CKPTD_MSG_STRAGGLERS }, rep;
	snprintf(req.u.stragglers.job, sizeof(req.u.stragglers.job), "%s", c->job);
	int rc = cli_daemon_call(c, "stragglers", cl, &req, CKPTD_MSG_STRAGGLERS_REPLY, &rep);
	if (rc)
		return rc;
	uint32_t k = rep.u.stragglers_reply.count;
	if (k && (*out = malloc(k * sizeof(**out)))) {
		memcpy(*out, rep.u.stragglers_reply.entries, k * sizeof(**out));
		*n = k;
	}
	ckptd_msg_free(&rep);
	return k && !*out ? EXIT_ERROR : 0;
}

static void print_persistent(const cli *c, const ckptd_node_evidence *ev, uint32_t n)
{
	if (c->json) {
		printf(", \"persistent\": [");
		for (uint32_t i = 0; i < n; i++) {
			const ckptd_node_evidence *e = &ev[i];
			printf("%s\n  {\"rank\": %u, \"node\": ", i ? "," : "", e->rank);
			cli_json_str(stdout, e->node);
			printf(", \"windows\": %u, \"step_seconds\": %.6f, \"fastest_seconds\": %.6f, \"verdict\": ", e->windows,
			       e->step_ns / 1e9, e->fastest_ns / 1e9);
			cli_json_str(stdout, e->verdict);
			printf(", \"evidence\": {\"window_seconds\": %.3f, \"available\": %u", e->window_ns / 1e9, e->flags);
			if (e->flags & CKPTD_EV_CPU)
				printf(", \"cpu_steal\": %.3f, \"cpu_iowait\": %.3f", e->steal_pm / 1000.0, e->iowait_pm / 1000.0);
			if (e->flags & CKPTD_EV_CGROUP)
				printf(", \"periods\": %llu, \"throttled_periods\": %llu, \"throttled_seconds\": %.6f",
				       (unsigned long long)e->nr_periods, (unsigned long long)e->nr_throttled, e->throttled_us / 1e6);
			if (e->flags & CKPTD_EV_PSI)
				printf(", \"psi_cpu_some\": %.4f, \"psi_memory_some\": %.4f, \"psi_memory_full\": %.4f, "
				       "\"psi_io_some\": %.4f, \"psi_io_full\": %.4f", e->psi_cpu_some / 1e4, e->psi_mem_some / 1e4,
				       e->psi_mem_full / 1e4, e->psi_io_some / 1e4, e->psi_io_full / 1e4);
			if (e->flags & CKPTD_EV_DISK) {
				printf(", \"disk\": ");
				cli_json_str(stdout, e->disk);
				printf(", \"disk_seconds_per_io\": %.6f", e->disk_await_us / 1e6);
			}
			if (e->flags & CKPTD_EV_KMSG) {
				printf(", \"oom_kills\": %u, \"hardware_errors\": %u, \"kernel_log\": ", e->oom_kills, e->hw_errors);
				cli_json_str(stdout, e->kmsg);
			}
			printf("}, \"text\": ");
			cli_json_str(stdout, e->text);
			printf("}");
		}
		printf("%s]", n ? "\n" : "");
		return;
	}
	if (!n)
		return;
	printf("\npersistent stragglers (slow for --straggler-windows judgements in a row), with their node's evidence:\n");
	for (uint32_t i = 0; i < n; i++)
		printf("  %s\n", ev[i].text);
}

void cli_status_stragglers(cli *c, ckptd_client *cl)
{
	ckptd_node_evidence *ev = NULL;
	uint32_t n = 0;
	if (fetch_persistent(c, cl, &ev, &n))
		return;
	if (c->json) {
		printf(", \"persistent_stragglers\": [");
		for (uint32_t i = 0; i < n; i++) {
			printf("%s{\"rank\": %u, \"node\": ", i ? ", " : "", ev[i].rank);
			cli_json_str(stdout, ev[i].node);
			printf(", \"verdict\": ");
			cli_json_str(stdout, ev[i].verdict);
			printf("}");
		}
		printf("]");
	} else if (n) {
		printf("persistent stragglers of job %s (ckpt stragglers for their evidence):\n", c->job);
		for (uint32_t i = 0; i < n; i++)
			printf("  rank %u on %s, slow %u s: %s\n", ev[i].rank, ev[i].node[0] ? ev[i].node : "?", ev[i].windows,
			       ev[i].verdict[0] ? ev[i].verdict : ev[i].flags ? "nothing on the node stands out"
			                                                       : "no node evidence");
	}
	free(ev);
}

int cmd_stragglers(cli *c, int argc, char **argv)
{
	int prc = cli_parse_opts(c, "stragglers", argc, argv);
	if (prc)
		return prc;
	if (!c->daemon || !*c->daemon)
		return cli_usage("stragglers", "--daemon ADDR (or CKPT_DAEMON) is required");
	if (ckpt__job_valid(c->job) < 0)
		return cli_usage("stragglers", "a valid --job is required");
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(c, "stragglers", c->job, &cl);
	if (rc)
		return rc;
	ckptd_rank_step *all = NULL;
	size_t n = 0, cap = 0;
	uint64_t start = 0;
	for (;;) {
		ckptd_msg req = { .type = CKPTD_MSG_STEP_STATS }, rep;
		snprintf(req.u.step_stats.job, sizeof(req.u.step_stats.job), "%s", c->job);
		req.u.step_stats.start = start;
		if ((rc = cli_daemon_call(c, "stragglers", cl, &req, CKPTD_MSG_STEP_STATS_REPLY, &rep)))
			break;
		const ckptd_step_stats_reply *d = &rep.u.step_stats_reply;
		if (n + d->count > cap) {
			cap = (n + d->count) * 2;
			void *p = realloc(all, cap * sizeof(*all));
			if (!p) {
				ckptd_msg_free(&rep);
				rc = EXIT_ERROR;
				break;
			}
			all = p;
		}
		memcpy(all + n, d->entries, d->count * sizeof(*all));
		n += d->count;
		int more = d->more && d->count;
		if (more)
			start = (uint64_t)d->entries[d->count - 1].rank + 1;
		ckptd_msg_free(&rep);
		if (!more)
			break;
	}
	ckptd_node_evidence *ev = NULL;
	uint32_t nev = 0;
	if (!rc)
		rc = fetch_persistent(c, cl, &ev, &nev);
	ckptd_client_close(cl);
	if (rc) {
		free(all);
		free(ev);
		return rc;
	}
	uint64_t fastest = 0;
	uint32_t flagged = 0;
	for (size_t i = 0; i < n; i++) {
		if (!fastest || all[i].step_ns < fastest)
			fastest = all[i].step_ns;
		flagged += all[i].state == CKPTD_RANK_STRAGGLER;
	}
	qsort(all, n, sizeof(*all), by_step_desc);
	if (c->json) {
		printf("{\"job\": ");
		cli_json_str(stdout, c->job);
		printf(", \"stragglers\": %u, \"ranks\": [", flagged);
		for (size_t i = 0; i < n; i++) {
			printf("%s\n  {\"rank\": %u, \"node\": ", i ? "," : "", all[i].rank);
			cli_json_str(stdout, all[i].node);
			printf(", \"step\": %llu, \"step_seconds\": %.6f, \"vs_fastest\": %.3f, \"straggler\": %s}",
			       (unsigned long long)all[i].step, all[i].step_ns / 1e9,
			       fastest ? (double)all[i].step_ns / (double)fastest : 0.0,
			       all[i].state == CKPTD_RANK_STRAGGLER ? "true" : "false");
		}
		printf("%s]", n ? "\n" : "");
		print_persistent(c, ev, nev);
		printf("}\n");
	} else if (!n) {
		printf("job %s: no step times reported (ranks call ckpt_step through an agent)\n", c->job);
	} else {
		printf("job %s: %zu ranks reporting, %u straggler%s\n", c->job, n, flagged, flagged == 1 ? "" : "s");
		printf("%8s  %-24s %12s %12s %10s  %s\n", "RANK", "NODE", "STEP", "STEP TIME", "VS FASTEST", "");
		for (size_t i = 0; i < n; i++)
			printf("%8u  %-24s %12llu %9.1f ms %9.2fx  %s\n", all[i].rank, all[i].node[0] ? all[i].node : "-",
			       (unsigned long long)all[i].step, all[i].step_ns / 1e6,
			       fastest ? (double)all[i].step_ns / (double)fastest : 0.0,
			       all[i].state == CKPTD_RANK_STRAGGLER ? "STRAGGLER" : "");
		print_persistent(c, ev, nev);
	}
	free(all);
	free(ev);
	return EXIT_OK;
}

void help_stragglers(FILE *o)
{
	fprintf(o, "usage: ckpt stragglers --daemon ADDR [--token-file FILE] --job J [--json]\n\n"
	           "The coordinator's view of the job's step times: every rank that reports them\n"
	           "(ranks call ckpt_step once per training step; libckpt sends the mean about once a\n"
	           "second through its agent), slowest first, with its node, last step, smoothed step\n"
	           "time and its ratio to the fastest rank. A rank is a straggler when the slowest\n"
	           "rank takes more than --straggler-slowest percent (150) of the fastest's step and it\n"
	           "takes more than --straggler-rank percent (120); the coordinator logs each change.\n"
	           "A straggler in --straggler-windows judgements in a row (10, one a second) is\n"
	           "persistent: its node's agent gathers evidence (CPU steal and iowait from\n"
	           "/proc/stat, its cgroup's CPU throttling, pressure stall information, the worst\n"
	           "disk's time per I/O, OOM kills and hardware errors in the kernel log, its recent\n"
	           "step times), listed here with a verdict naming what stands out on the node.\n"
	           "JSON: \"persistent\": [{rank, node, windows, verdict, evidence: {...}, text}].\n");
}

/* ------------------------------------------------------------- goodput */

int cmd_goodput(cli *c, int argc, char **argv)
{
	const char *png = NULL;
	for (int i = 1; i < argc; i++) {
		int r = cli_daemon_opt(c, argc, argv, &i);
		if (r == 0)
			r = cli_common_opt(c, argc, argv, &i);
		if (r < 0)
			return cli_usage("goodput", "bad value for %s", argv[i]);
		if (r)
			continue;
		if (!strcmp(argv[i], "--plot") && i + 1 < argc)
			png = argv[++i];
		else
			return cli_usage("goodput", "unknown option '%s'", argv[i]);
	}
	if (!c->daemon || !*c->daemon)
		return cli_usage("goodput", "--daemon ADDR (or CKPT_DAEMON) is required");
	if (ckpt__job_valid(c->job) < 0)
		return cli_usage("goodput", "a valid --job is required");
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(c, "goodput", c->job, &cl);
	if (rc)
		return rc;
	ckptd_msg req = { .type = CKPTD_MSG_GOODPUT }, rep;
	snprintf(req.u.goodput.job, sizeof(req.u.goodput.job), "%s", c->job);
	rc = cli_daemon_call(c, "goodput", cl, &req, CKPTD_MSG_GOODPUT_REPLY, &rep);
	ckptd_client_close(cl);
	if (rc)
		return rc;
	const ckptd_goodput_reply *g = &rep.u.goodput_reply;
	double wall = g->wall_ns / 1e9, ratio = g->wall_ns ? (double)g->useful_ns / (double)g->wall_ns : 0;
	uint64_t other = g->wall_ns;
	const uint64_t parts[] = { g->useful_ns, g->stall_ns, g->restore_ns, g->recompute_ns, g->down_ns };
	for (size_t i = 0; i < 5; i++)
		other = other > parts[i] ? other - parts[i] : 0;
	/* The JSON the plot script reads, too. */
	size_t cap = 512 + (size_t)g->count * 200, n = 0;
	char *js = malloc(cap);
	if (!js) {
		ckptd_msg_free(&rep);
		return EXIT_ERROR;
	}
	n += (size_t)snprintf(js + n, cap - n,
	                      "{\"job\": \"%s\", \"wall_s\": %.3f, \"goodput\": %.6f, \"useful_s\": %.3f, \"stall_s\": %.3f, "
	                      "\"restore_s\": %.3f, \"recompute_s\": %.3f, \"down_s\": %.3f, \"other_s\": %.3f, "
	                      "\"failures\": %u, \"step\": %llu, \"interval_steps\": %llu, \"interval_s\": %.3f, "
	                      "\"checkpoint_cost_s\": %.6f, \"mtbf_s\": %.0f, \"slice_seconds\": %.0f, \"timeline\": [",
	                      c->job, wall, ratio, g->useful_ns / 1e9, g->stall_ns / 1e9, g->restore_ns / 1e9,
	                      g->recompute_ns / 1e9, g->down_ns / 1e9, other / 1e9, g->failures,
	                      (unsigned long long)g->step, (unsigned long long)g->interval_steps, g->interval_ns / 1e9,
	                      g->cost_ns / 1e9, g->mtbf_ns / 1e9, g->bucket_ns / 1e9);
	for (uint32_t i = 0; i < g->count; i++) {
		const ckptd_goodput_slice *sl = &g->entries[i];
		n += (size_t)snprintf(js + n, cap - n,
		                      "%s{\"start_s\": %.0f, \"useful_s\": %.3f, \"stall_s\": %.3f, \"restore_s\": %.3f, "
		                      "\"recompute_s\": %.3f, \"down_s\": %.3f}",
		                      i ? ", " : "", sl->start / 1e9, sl->useful_ns / 1e9, sl->stall_ns / 1e9,
		                      sl->restore_ns / 1e9, sl->recompute_ns / 1e9, sl->down_ns / 1e9);
	}
	snprintf(js + n, cap - n, "]}\n");
	if (c->json) {
		fputs(js, stdout);
	} else if (!g->wall_ns) {
		printf("job %s: no step times reported yet (ranks call ckpt_step through an agent)\n", c->job);
	} else {
		printf("job %s: goodput %.2f%% over %.1f s (furthest step %llu, %u restart%s)\n", c->job, 100 * ratio, wall,
		       (unsigned long long)g->step, g->failures, g->failures == 1 ? "" : "s");
		const char *names[] = { "useful training", "checkpoint stalls", "restores", "steps recomputed", "downtime" };
		for (size_t i = 0; i < 5; i++)
			printf("  %-20s %12.1f s  %6.2f%%\n", names[i], parts[i] / 1e9, 100.0 * (double)parts[i] / (double)g->wall_ns);
		printf("  %-20s %12.1f s  %6.2f%%\n", "unaccounted", other / 1e9, 100.0 * (double)other / (double)g->wall_ns);
		if (g->interval_steps)
			printf("advised checkpoint interval: every %llu steps (%.1f s), from a checkpoint cost of %.3f s and "
			       "an MTBF of %.0f s (Young/Daly)\n", (unsigned long long)g->interval_steps, g->interval_ns / 1e9,
			       g->cost_ns / 1e9, g->mtbf_ns / 1e9);
	}
	ckptd_msg_free(&rep);
	if (png && tool_plot("ckpt goodput", "CKPT_GOODPUT_PLOTTER", "plot_timeline.py", png, js) < 0)
		rc = EXIT_ERROR;
	free(js);
	return rc;
}

void help_goodput(FILE *o)
{
	fprintf(o, "usage: ckpt goodput --daemon ADDR [--token-file FILE] --job J [--json] [--plot FILE.png]\n\n"
	           "Where the job's time went, as the coordinator judges it from the step times its\n"
	           "ranks report (ranks call ckpt_step once per step): useful training (steps that\n"
	           "advanced the job), checkpoint stalls within steps, restores, steps done again after\n"
	           "a restart, and downtime (no step for more than 3 s: restarts, rescheduling).\n"
	           "Goodput is useful time over wall time (first report to the last). --plot draws\n"
	           "the timeline, a minute a bar, and the goodput so far (python3 with matplotlib).\n");
}

/* ------------------------------------------------------------- preempt */

/* "30s", "2m", "1500ms", or plain seconds; -1 when not a duration. */
static int64_t parse_secs_ms(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0 || v > 86400 * 7)
		return -1;
	if (!*end || !strcmp(end, "s"))
		return (int64_t)(v * 1000);
	if (!strcmp(end, "ms"))
		return (int64_t)v;
	if (!strcmp(end, "m"))
		return (int64_t)(v * 60000);
	return -1;
}

int cmd_preempt(cli *c, int argc, char **argv)
{
	const char *node = "";
	int64_t deadline_ms = 0;
	for (int i = 1; i < argc; i++) {
		int r = cli_daemon_opt(c, argc, argv, &i);
		if (r == 0)
			r = cli_common_opt(c, argc, argv, &i);
		if (r < 0)
			return cli_usage("preempt", "bad value for %s", argv[i]);
		if (r)
			continue;
		if (!strcmp(argv[i], "--node") && i + 1 < argc) {
			node = argv[++i];
			if (ckpt__job_valid(node) < 0)
				return cli_usage("preempt", "--node: a node name of letters, digits, '.', '_', '-'");
		} else if (!strcmp(argv[i], "--deadline") && i + 1 < argc) {
			if ((deadline_ms = parse_secs_ms(argv[++i])) <= 0)
				return cli_usage("preempt", "--deadline: a duration such as 30s, 90s, 2m or 1500ms");
		} else {
			return cli_usage("preempt", "unknown option '%s'", argv[i]);
		}
	}
	if (!c->daemon || !*c->daemon)
		return cli_usage("preempt", "--daemon ADDR (or CKPT_DAEMON) is required");
	if (ckpt__job_valid(c->job) < 0)
		return cli_usage("preempt", "a valid --job is required");
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(c, "preempt", c->job, &cl);
	if (rc)
		return rc;
	ckptd_msg req = { .type = CKPTD_MSG_PREEMPT }, rep;
	ckptd_preempt *p = &req.u.preempt;
	snprintf(p->job, sizeof(p->job), "%s", c->job);
	snprintf(p->node, sizeof(p->node), "%s", node);
	p->source = CKPTD_NOTICE_SRC_CLI;
	if (deadline_ms)
		p->deadline_ns = ckpt__wall_ns() + (uint64_t)deadline_ms * 1000000ull;
	snprintf(p->text, sizeof(p->text), "ckpt preempt");
	rc = cli_daemon_call(c, "preempt", cl, &req, CKPTD_MSG_OK, &rep);
	ckptd_client_close(cl);
	if (rc)
		return rc;
	uint32_t told = rep.u.ok.count; /* jobs whose ranks the coordinator told */
	ckptd_msg_free(&rep);
	if (c->json)
		printf("{\"job\": \"%s\", \"node\": \"%s\", \"emergency\": %s, \"jobs_told\": %u}\n", c->job, node,
		       told ? "true" : "false", told);
	else if (told)
		printf("job %s: emergency checkpoint requested%s%s; its ranks save one step and leave\n", c->job,
		       node[0] ? " for node " : "", node);
	if (!told)
		fprintf(stderr, "ckpt preempt: job %s: no rank was told: the coordinator knows no rank of the job that "
		        "reports its steps (ranks call ckpt_step, through an agent); nothing will be saved%s%s%s\n", c->job,
		        node[0] ? "; node " : "", node, node[0] ? " stays out of partner placement until the deadline" : "");
	return told ? EXIT_OK : EXIT_NOTFOUND;
}

void help_preempt(FILE *o)
{
	fprintf(o, "usage: ckpt preempt --daemon ADDR [--token-file FILE] --job J [--node N] [--deadline 30s] [--json]\n\n"
	           "Raises a preemption notice, as a cloud's metadata service or a signal would: the\n"
	           "coordinator picks one step every rank of the job can still reach, every rank saves\n"
	           "it to a tier off node N (partner DRAM, else shared storage) and leaves once it is\n"
	           "committed there, or when the deadline is close. Without --node no node is left\n"
	           "out (through an agent: that agent's node). --deadline: how long the node has\n"
	           "(default: the coordinator's --preempt-deadline, 30 s).\n"
	           "Exit: 0 when the ranks were told; 4 when no rank was (an unknown job, or ranks\n"
	           "that do not call ckpt_step through an agent); 1 when the daemon cannot be asked.\n");
}
