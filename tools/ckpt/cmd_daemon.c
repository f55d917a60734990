/* Commands that ask a ckptd daemon instead of a local root: the --daemon
 * options; ls, show, rm, gc and verify with --daemon; status. (restore
 * --daemon: cmd_restore_daemon.c; stragglers, goodput and preempt: cmd_ops.c.) The CLI authenticates as CKPTD_ROLE_CLI, with the job's secret
 * (derived from the cluster token) when a job is named, else the cluster's. */
#include "cli.h"
#include "copies.h"
#include "wire/client.h"
#include "plot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DAEMON_TIMEOUT_MS 5000

int cli_daemon_opt(cli *c, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	const char *names[] = { "--daemon", "--token-file" };
	for (int k = 0; k < 2; k++) {
		size_t n = strlen(names[k]);
		if (strncmp(a, names[k], n) || (a[n] != 0 && a[n] != '='))
			continue;
		const char *val;
		if (a[n] == '=')
			val = a + n + 1;
		else if (*i + 1 < argc)
			val = argv[++*i];
		else
			return -1;
		if (!*val)
			return -1;
		if (k == 0) {
			c->daemon = val;
			c->daemon_flag = 1;
		} else {
			c->token_file = val;
		}
		return 1;
	}
	return 0;
}

/* Connects to c->daemon; on failure says why on stderr, never with the
 * token, and returns EXIT_ERROR. */
int cli_daemon_connect(cli *c, const char *cmd, const char *job, ckptd_client **out)
{
	ckptd_secret *cluster = NULL, *sec = NULL;
	char why[256] = "";
	const char *from = c->token_file ? c->token_file : CKPTD_TOKEN_ENV;
	int err = c->token_file ? ckptd_secret_load_file(c->token_file, &cluster, why, sizeof(why))
	                        : ckptd_secret_load_env(NULL, &cluster, why, sizeof(why));
	if (err < 0) {
		if (err == -ENOKEY && !c->token_file)
			fprintf(stderr, "ckpt %s: no token: give --token-file, CKPT_TOKEN_FILE or CKPT_TOKEN\n", cmd);
		else
			fprintf(stderr, "ckpt %s: cannot load the token from %s: %s\n", cmd, from,
			        why[0] ? why : ckpt_strerror(err));
		return EXIT_ERROR;
	}
	if (job && *job) {
		err = ckptd_secret_derive_job(cluster, job, &sec);
		ckptd_secret_free(cluster);
		if (err < 0) {
			fprintf(stderr, "ckpt %s: %s\n", cmd, ckpt_strerror(err));
			return EXIT_ERROR;
		}
	} else {
		sec = cluster;
	}
	why[0] = 0;
	err = ckptd_client_connect(c->daemon, job, CKPTD_ROLE_CLI, sec, DAEMON_TIMEOUT_MS, out, why, sizeof(why));
	ckptd_secret_free(sec);
	if (err == 0)
		return EXIT_OK;
	if (err == -EACCES)
		fprintf(stderr, "ckpt %s: the daemon at %s refused the token from %s%s%s%s\n", cmd, c->daemon, from,
		        job && *job ? " for job " : "", job && *job ? job : "", "");
	else if (err == -EINVAL)
		fprintf(stderr, "ckpt %s: bad daemon address '%s' (unix:/path or host:port)%s%s\n", cmd, c->daemon,
		        why[0] ? ": " : "", why);
	else
		fprintf(stderr, "ckpt %s: cannot reach the daemon at %s: %s\n", cmd, c->daemon,
		        why[0] ? why : ckpt_strerror(err));
	return EXIT_ERROR;
}

/* Sends req; returns EXIT_OK with reply of type `want`, else says why. */
int cli_daemon_call(cli *c, const char *cmd, ckptd_client *cl, const ckptd_msg *req, uint16_t want,
                    ckptd_msg *reply)
{
	int err = ckptd_client_call(cl, req, reply);
	if (err < 0) {
		fprintf(stderr, "ckpt %s: daemon at %s: %s\n", cmd, c->daemon, ckpt_strerror(err));
		return EXIT_ERROR;
	}
	if (reply->type == want)
		return EXIT_OK;
	int rc = EXIT_ERROR;
	if (reply->type == CKPTD_MSG_ERROR) {
		const ckptd_error *e = &reply->u.error;
		if (e->code == CKPTD_ERR_NOT_FOUND)
			rc = EXIT_NOTFOUND;
		fprintf(stderr, "ckpt %s: the daemon at %s answered error %u%s%s\n", cmd, c->daemon, e->code,
		        e->text[0] ? ": " : "", e->text);
	} else {
		const char *n = ckptd_msg_name(reply->type);
		fprintf(stderr, "ckpt %s: the daemon at %s answered %s\n", cmd, c->daemon, n ? n : "an unknown message");
	}
	ckptd_msg_free(reply);
	return rc;
}

static const struct {
	uint32_t bit;
	const char *name;
} tier_names[] = {
	{ CKPT_TIER_LOCAL_MEM, "local_mem" },
	{ CKPT_TIER_PEER_MEM, "peer_mem" },
	{ CKPT_TIER_LOCAL_DISK, "local_disk" },
	{ CKPT_TIER_SHARED, "shared" },
};
#define NTIERS (sizeof(tier_names) / sizeof(tier_names[0]))

static void tiers_text(uint32_t mask, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = 0;
	for (size_t i = 0; i < NTIERS; i++)
		if (mask & tier_names[i].bit)
			n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", n ? "," : "", tier_names[i].name);
	if (!n)
		snprintf(buf, cap, "-");
}

/* Committed at any tier is COMMITTED; DELETING stays DELETING. */
static const char *remote_state(const ckptd_version_info *v)
{
	if (v->state == CKPT_STATE_DELETING)
		return "DELETING";
	return v->tiers ? "COMMITTED" : "PENDING";
}

/* Calls fn for each of the job's versions the coordinator lists, page after
 * page. Returns EXIT_OK or the exit code (after saying why). */
static int each_version(cli *c, const char *cmd, ckptd_client *cl,
                        void (*fn)(void *arg, const ckptd_version_info *v), void *arg)
{
	uint64_t start = 0;
	for (;;) {
		ckptd_msg req = { .type = CKPTD_MSG_LIST_VERSIONS }, rep;
		snprintf(req.u.list_versions.job, sizeof(req.u.list_versions.job), "%s", c->job);
		req.u.list_versions.start = start;
		int rc = cli_daemon_call(c, cmd, cl, &req, CKPTD_MSG_VERSIONS, &rep);
		if (rc)
			return rc;
		const ckptd_versions *vs = &rep.u.versions;
		for (uint32_t i = 0; i < vs->count; i++)
			fn(arg, &vs->entries[i]);
		int more = vs->more && vs->count > 0;
		if (more)
			start = vs->entries[vs->count - 1].version + 1;
		ckptd_msg_free(&rep);
		if (!more)
			return EXIT_OK;
	}
}

typedef struct ls_acc {
	cli *c;
	size_t n;
} ls_acc;

static void ls_one(void *arg, const ckptd_version_info *v)
{
	ls_acc *a = arg;
	cli *c = a->c;
	char hb[32];
	if (c->json) {
		printf("%s\n  {\"job\": ", a->n ? "," : "");
		cli_json_str(stdout, c->job);
		printf(", \"version\": %llu, \"state\": \"%s\", \"tiers\": [", (unsigned long long)v->version,
		       remote_state(v));
		int first = 1;
		for (size_t k = 0; k < NTIERS; k++)
			if (v->tiers & tier_names[k].bit) {
				printf("%s\"%s\"", first ? "" : ", ", tier_names[k].name);
				first = 0;
			}
		printf("], \"world_size\": %u, \"shards_done\": %u, \"bytes\": %llu}", v->world_size, v->shards_done,
		       (unsigned long long)v->bytes);
	} else {
		char tb[64];
		tiers_text(v->tiers, tb, sizeof(tb));
		printf("%-20s %20llu  %-9s %-28s %5u/%-5u %12s\n", c->job, (unsigned long long)v->version, remote_state(v),
		       tb, v->shards_done, v->world_size, cli_human(v->bytes, hb, sizeof(hb)));
	}
	a->n++;
}

int cli_daemon_ls(cli *c)
{
	if (ckpt__job_valid(c->job) < 0)
		return cli_usage("ls", c->job ? "invalid job id '%s'" : "--job is required with --daemon%s",
		                 c->job ? c->job : "");
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(c, "ls", c->job, &cl);
	if (rc)
		return rc;
	if (c->json)
		printf("[");
	else
		printf("%-20s %20s  %-9s %-28s %11s %12s\n", "JOB", "VERSION", "STATE", "TIERS COMMITTED", "SHARDS",
		       "BYTES");
	ls_acc acc = { c, 0 };
	rc = each_version(c, "ls", cl, ls_one, &acc);
	size_t n = acc.n;
	if (c->json)
		printf("%s]\n", n ? "\n" : "");
	ckptd_client_close(cl);
	return rc;
}

/* ------------------------------------------------------------- status */

static const char *agent_state(uint32_t st)
{
	return st == CKPTD_AGENT_UP ? "up" : st == CKPTD_AGENT_DEGRADED ? "degraded" : "down";
}

/* The peer tier's scheme and rs groups (a coordinator's, protocol 1.4). */
static void status_groups_json(const ckptd_status_reply *s)
{
	if (!s->scheme[0])
		return;
	printf(", \"peer_scheme\": ");
	cli_json_str(stdout, s->scheme);
	printf(", \"ungrouped_nodes\": %u, \"groups\": [", s->ungrouped);
	for (uint32_t i = 0; i < s->ngroups; i++) {
		const ckptd_group_info *g = &s->groups[i];
		printf("%s{\"group\": %u, \"lost\": %u, \"losses_left\": %u, \"members\": [", i ? ", " : "", g->group,
		       g->lost, g->losses_left);
		int first = 1;
		for (uint32_t j = 0; j < s->nmembers; j++) {
			if (s->members[j].group != g->group)
				continue;
			printf("%s{\"node\": ", first ? "" : ", ");
			cli_json_str(stdout, s->members[j].node);
			printf(", \"state\": \"%s\"}", agent_state(s->members[j].state));
			first = 0;
		}
		printf("]}");
	}
	printf("]");
}

static void status_groups_text(const ckptd_status_reply *s)
{
	if (!s->scheme[0])
		return;
	printf("peer scheme: %s", s->scheme);
	if (strcmp(s->scheme, "partner"))
		printf(", %u group%s, %u node%s in none%s", s->ngroups, s->ngroups == 1 ? "" : "s", s->ungrouped,
		       s->ungrouped == 1 ? "" : "s", s->ungrouped ? " (too few nodes or failure domains: partner copies)" : "");
	printf("\n");
	for (uint32_t i = 0; i < s->ngroups; i++) {
		const ckptd_group_info *g = &s->groups[i];
		printf("  group %u: can lose %u more%s:", g->group, g->losses_left,
		       g->lost ? "" : " (all members up)");
		for (uint32_t j = 0; j < s->nmembers; j++)
			if (s->members[j].group == g->group)
				printf(" %s%s", s->members[j].node,
				       s->members[j].state == CKPTD_AGENT_UP ? "" : s->members[j].state == CKPTD_AGENT_DOWN ? "(down)" : "(degraded)");
		printf("\n");
	}
}

int cmd_status(cli *c, int argc, char **argv)
{
	int prc = cli_parse_opts(c, "status", argc, argv);
	if (prc)
		return prc;
	if (!c->daemon || !*c->daemon)
		return cli_usage("status", "--daemon ADDR (or CKPT_DAEMON) is required");
	if (c->job && ckpt__job_valid(c->job) < 0)
		return cli_usage("status", "invalid job id '%s'", c->job);
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(c, "status", c->job, &cl);
	if (rc)
		return rc;
	ckptd_msg req = { .type = CKPTD_MSG_STATUS }, rep;
	if (c->job)
		snprintf(req.u.status.job, sizeof(req.u.status.job), "%s", c->job);
	if ((rc = cli_daemon_call(c, "status", cl, &req, CKPTD_MSG_STATUS_REPLY, &rep))) {
		ckptd_client_close(cl);
		return rc;
	}
	const ckptd_status_reply *s = &rep.u.status_reply;
	char b1[32], b2[32];
	const char *roles = (s->roles & CKPTD_SERVES_AGENT) && (s->roles & CKPTD_SERVES_COORDINATOR)
	                        ? "agent,coordinator"
	                        : (s->roles & CKPTD_SERVES_COORDINATOR) ? "coordinator"
	                        : (s->roles & CKPTD_SERVES_AGENT) ? "agent" : "-";
	if (c->json) {
		printf("{\"daemon\": ");
		cli_json_str(stdout, c->daemon);
		printf(", \"node\": ");
		cli_json_str(stdout, s->node);
		printf(", \"roles\": [%s%s%s], \"pool_bytes\": %llu, \"pool_used\": %llu, \"jobs\": %u, "
		       "\"versions\": %u, \"agents\": [",
		       (s->roles & CKPTD_SERVES_AGENT) ? "\"agent\"" : "",
		       (s->roles & CKPTD_SERVES_AGENT) && (s->roles & CKPTD_SERVES_COORDINATOR) ? ", " : "",
		       (s->roles & CKPTD_SERVES_COORDINATOR) ? "\"coordinator\"" : "",
		       (unsigned long long)s->pool_bytes, (unsigned long long)s->pool_used, s->jobs, s->versions);
		for (uint32_t i = 0; i < s->count; i++) {
			const ckptd_agent_info *a = &s->entries[i];
			printf("%s{\"node\": ", i ? ", " : "");
			cli_json_str(stdout, a->node);
			printf(", \"address\": ");
			cli_json_str(stdout, a->address);
			printf(", \"domain\": ");
			cli_json_str(stdout, a->domain);
			printf(", \"pool_bytes\": %llu, \"pool_used\": %llu, \"state\": \"%s\"}",
			       (unsigned long long)a->pool_bytes, (unsigned long long)a->pool_used, agent_state(a->state));
		}
		printf("], \"tiers\": [");
		for (uint32_t i = 0; i < s->ntiers; i++) {
			char tb[32];
			tiers_text(s->tier_stats[i].tier, tb, sizeof(tb));
			printf("%s{\"tier\": \"%s\", \"versions\": %u, \"bytes\": %llu, \"degraded_nodes\": %u}",
			       i ? ", " : "", tb, s->tier_stats[i].versions, (unsigned long long)s->tier_stats[i].bytes,
			       s->tier_stats[i].degraded);
		}
		printf("]");
		status_groups_json(s);
		cli_status_epochs(c, s);
		cli_status_recoveries(c, s);
		if (c->job)
			cli_status_stragglers(c, cl);
		printf("}\n");
	} else {
		printf("daemon %s: node %s, roles %s\n", c->daemon, s->node, roles);
		if (s->pool_bytes)
			printf("pool: %s used of %s\n", cli_human(s->pool_used, b1, sizeof(b1)),
			       cli_human(s->pool_bytes, b2, sizeof(b2)));
		printf("jobs: %u, versions: %u\n", s->jobs, s->versions);
		for (uint32_t i = 0; i < s->ntiers; i++) {
			char tb[32];
			tiers_text(s->tier_stats[i].tier, tb, sizeof(tb));
			printf("  committed at %-11s %6u versions, %s", tb, s->tier_stats[i].versions,
			       cli_human(s->tier_stats[i].bytes, b1, sizeof(b1)));
			if (s->tier_stats[i].degraded)
				printf("  DEGRADED: %u node%s down or silent", s->tier_stats[i].degraded,
				       s->tier_stats[i].degraded == 1 ? "" : "s");
			printf("\n");
		}
		if (s->count) {
			printf("%-24s %-28s %-12s %-8s %12s %12s\n", "AGENT", "ADDRESS", "DOMAIN", "STATE", "POOL USED",
			       "POOL");
			for (uint32_t i = 0; i < s->count; i++) {
				const ckptd_agent_info *a = &s->entries[i];
				printf("%-24s %-28s %-12s %-8s %12s %12s\n", a->node, a->address, a->domain[0] ? a->domain : "-",
				       agent_state(a->state), cli_human(a->pool_used, b1, sizeof(b1)),
				       cli_human(a->pool_bytes, b2, sizeof(b2)));
			}
		}
		status_groups_text(s);
		cli_status_epochs(c, s);
		cli_status_recoveries(c, s);
		if (c->job)
			cli_status_stragglers(c, cl);
	}
	ckptd_msg_free(&rep);
	ckptd_client_close(cl);
	return EXIT_OK;
}

void help_status(FILE *o)
{
	fprintf(o, "usage: ckpt status --daemon ADDR [--token-file FILE] [--job J] [--json]\n\n"
	           "Asks a ckptd daemon (ADDR: unix:/path or host:port; or CKPT_DAEMON) what it is:\n"
	           "its node, roles (agent, coordinator), DRAM pool, jobs and versions known, and\n"
	           "for a coordinator the agents it knows with their state (up; degraded: connected\n"
	           "but silent past the heartbeat timeout; down) and the tiers with nodes down or\n"
	           "silent (DEGRADED). The token\n"
	           "comes from --token-file, CKPT_TOKEN_FILE or CKPT_TOKEN; with --job the session\n"
	           "is that job's and sees only what concerns it, and its persistent stragglers are\n"
	           "listed with what their node's evidence names (ckpt stragglers shows it all).\n"
	           "--json prints one object: daemon, node, roles, pool_bytes, pool_used, jobs,\n"
	           "versions, agents (node, address, domain, pool_bytes, pool_used, state), tiers\n"
	           "(tier, versions committed there, their bytes, degraded_nodes), peer_scheme\n"
	           "(partner or rs:K+M), ungrouped_nodes, groups (group, lost, losses_left, members\n"
	           "with node and state), epochs (per job with a failure decided: job, epoch,\n"
	           "last_failure, node, ranks, time; ckpt events lists them all), recoveries (1.6:\n"
	           "per job its newest: job, epoch, node lost, spare that took it, spare_chosen_ns,\n"
	           "spare_ready_ns, first_step_ns, protected_ns: when a newer version committed at\n"
	           "PEER_MEM, 0 not yet; why), and with --job persistent_stragglers (rank, node,\n"
	           "verdict).\n"
	           "A coordinator with --peer-scheme rs:K+M lists its Reed-Solomon groups: members,\n"
	           "their state, and how many more losses each group can take.\n");
}

/* ------------------------------------------------------------- show, rm, gc */

int cli_use_daemon(cli *c, const char *cmd)
{
	if (c->daemon_flag && c->root_flag)
		return -cli_usage(cmd, "--root and --daemon exclude each other");
	return c->daemon && *c->daemon && (c->daemon_flag || !c->root_flag);
}

/* The newest version committed at some tier, as the coordinator sees it. */
typedef struct latest_acc {
	uint64_t v;
	int found;
} latest_acc;

static void latest_one(void *arg, const ckptd_version_info *v)
{
	latest_acc *a = arg;
	if (v->tiers && v->state != CKPT_STATE_DELETING) {
		a->v = v->version;
		a->found = 1;
	}
}

int cli_daemon_latest(cli *c, const char *cmd, ckptd_client *cl, uint64_t *out)
{
	latest_acc acc = { 0, 0 };
	int rc = each_version(c, cmd, cl, latest_one, &acc);
	if (rc)
		return rc;
	int found = acc.found;
	*out = acc.v;
	if (!found) {
		fprintf(stderr, "ckpt %s: job %s has no committed version at the daemon %s\n", cmd, c->job, c->daemon);
		return EXIT_NOTFOUND;
	}
	return EXIT_OK;
}

int cli_daemon_show(cli *c)
{
	if (ckpt__job_valid(c->job) < 0)
		return cli_usage("show", "a valid --job is required");
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(c, "show", c->job, &cl);
	if (rc)
		return rc;
	uint64_t v = c->version;
	if ((v == VERSION_UNSET || v == VERSION_ALL || v == VERSION_LATEST) && (rc = cli_daemon_latest(c, "show", cl, &v))) {
		ckptd_client_close(cl);
		return rc;
	}
	uint64_t start = c->rank >= 0 ? (uint64_t)c->rank : 0;
	size_t n = 0;
	for (int page = 0;; page++) {
		ckptd_msg req = { .type = CKPTD_MSG_SHOW_VERSION }, rep;
		snprintf(req.u.show_version.job, sizeof(req.u.show_version.job), "%s", c->job);
		req.u.show_version.version = v;
		req.u.show_version.start = start;
		if ((rc = cli_daemon_call(c, "show", cl, &req, CKPTD_MSG_VERSION_DETAIL, &rep)))
			break;
		const ckptd_version_detail *d = &rep.u.version_detail;
		char tb[64], hb[32];
		if (page == 0) {
			tiers_text(d->tiers, tb, sizeof(tb));
			const char *st = d->state == CKPT_STATE_DELETING ? "DELETING" : d->tiers ? "COMMITTED" : "PENDING";
			if (c->json) {
				printf("{\"job\": ");
				cli_json_str(stdout, c->job);
				printf(", \"version\": %llu, \"state\": \"%s\", \"world_size\": %u, \"restorable\": %s, "
				       "\"tiers\": [",
				       (unsigned long long)v, st, d->world_size, d->restorable ? "true" : "false");
				int first = 1;
				for (size_t k = 0; k < NTIERS; k++)
					if (d->tiers & tier_names[k].bit) {
						printf("%s\"%s\"", first ? "" : ", ", tier_names[k].name);
						first = 0;
					}
				printf("], \"copies\": [");
			} else {
				printf("job %s version %llu: %s at %s, %s, world size %u\n", c->job, (unsigned long long)v, st, tb,
				       d->restorable ? "restorable" : "NOT restorable", d->world_size);
				printf("%6s  %-11s %-24s %-8s %12s  %s\n", "RANK", "TIER", "NODE", "STATE", "BYTES", "CHECKSUM");
			}
		}
		for (uint32_t i = 0; i < d->count; i++) {
			const ckptd_copy_info *e = &d->entries[i];
			if (c->rank >= 0 && e->rank != (uint64_t)c->rank)
				continue;
			tiers_text(e->tier, tb, sizeof(tb));
			if (c->json) {
				printf("%s{\"rank\": %u, \"tier\": \"%s\", \"node\": ", n ? ", " : "", e->rank, tb);
				cli_json_str(stdout, e->node);
				printf(", \"state\": \"%s\", \"bytes\": %llu, \"checksum\": \"%016llx\"}",
				       e->state == 2 ? "deleting" : "live", (unsigned long long)e->bytes,
				       (unsigned long long)e->checksum);
			} else {
				printf("%6u  %-11s %-24s %-8s %12s  %016llx\n", e->rank, tb, e->node,
				       e->state == 2 ? "deleting" : "live", cli_human(e->bytes, hb, sizeof(hb)),
				       (unsigned long long)e->checksum);
			}
			n++;
		}
		int more = d->more && d->count > 0 && c->rank < 0;
		if (more)
			start = (uint64_t)d->entries[d->count - 1].rank + 1;
		ckptd_msg_free(&rep);
		if (!more)
			break;
	}
	if (rc == EXIT_OK && c->json)
		printf("]}\n");
	ckptd_client_close(cl);
	return rc;
}

/* Parses "local_mem,local_disk" into a tier mask; 0 on a bad name. */
uint32_t cli_tiers_parse(const char *s)
{
	uint32_t mask = 0;
	while (*s) {
		size_t n = strcspn(s, ",");
		size_t k;
		for (k = 0; k < NTIERS; k++)
			if (strlen(tier_names[k].name) == n && !strncmp(s, tier_names[k].name, n))
				break;
		if (k == NTIERS)
			return 0;
		mask |= tier_names[k].bit;
		s += n;
		if (*s == ',')
			s++;
	}
	return mask;
}

int cli_daemon_rm(cli *c, uint32_t tiers)
{
	if (ckpt__job_valid(c->job) < 0)
		return cli_usage("rm", "a valid --job is required");
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(c, "rm", c->job, &cl);
	if (rc)
		return rc;
	ckptd_msg req = { .type = CKPTD_MSG_DELETE_VERSION }, rep;
	snprintf(req.u.delete_version.job, sizeof(req.u.delete_version.job), "%s", c->job);
	req.u.delete_version.version = c->version;
	req.u.delete_version.tiers = tiers;
	if ((rc = cli_daemon_call(c, "rm", cl, &req, CKPTD_MSG_OK, &rep)) == EXIT_OK) {
		if (c->json)
			printf("{\"version\": %llu, \"copies\": %u}\n", (unsigned long long)c->version, rep.u.ok.count);
		else
			printf("job %s version %llu: %u copies marked for deletion; the agents that hold them delete them\n",
			       c->job, (unsigned long long)c->version, rep.u.ok.count);
		ckptd_msg_free(&rep);
	}
	ckptd_client_close(cl);
	return rc;
}

int cli_daemon_gc(cli *c, long keep, long kdram, long kdisk, long long kevery)
{
	int policy = keep >= 0 || kdram >= 0 || kdisk >= 0 || kevery >= 0;
	uint32_t keep_dram = kdram >= 0 ? (uint32_t)kdram : keep >= 0 ? (uint32_t)keep : CKPTD_KEEP_ALL;
	uint32_t keep_disk = kdisk >= 0 ? (uint32_t)kdisk : keep >= 0 ? (uint32_t)keep : CKPTD_KEEP_ALL;
	uint64_t keep_every = kevery > 0 ? (uint64_t)kevery : 0;
	if (ckpt__job_valid(c->job) < 0)
		return cli_usage("gc", "a valid --job is required");
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(c, "gc", c->job, &cl);
	if (rc)
		return rc;
	ckptd_msg req = { .type = CKPTD_MSG_GC }, rep;
	snprintf(req.u.gc.job, sizeof(req.u.gc.job), "%s", c->job);
	if (policy) {
		req.u.gc.policy = 1;
		req.u.gc.keep_dram = keep_dram;
		req.u.gc.keep_disk = keep_disk;
		req.u.gc.keep_every = keep_every;
	}
	if ((rc = cli_daemon_call(c, "gc", cl, &req, CKPTD_MSG_OK, &rep)) == EXIT_OK) {
		if (c->json)
			printf("{\"copies\": %u}\n", rep.u.ok.count);
		else
			printf("job %s: %u copies being deleted by retention%s\n", c->job, rep.u.ok.count,
			       policy ? " (policy stored for the job)" : "");
		ckptd_msg_free(&rep);
	}
	ckptd_client_close(cl);
	return rc;
}

/* ------------------------------------------------------------- verify */

/* Every copy of version v the coordinator knows, in rank order. Its answer
 * is checked, not trusted: one world size on every page, every rank below
 * it and in order (a page resumes after the last rank of the one before,
 * so pages always progress). *listed: how many ranks it names a copy of.
 * What the caller does follows what the answer carries, never the world
 * size it claims (2^32-1 ranks would be a loop of hours). */
int cli_collect_copies(cli *c, const char *cmd, ckptd_client *cl, uint64_t v, cli_copy **out, size_t *n,
                       uint32_t *world, uint32_t *listed)
{
	size_t cap = 0;
	uint64_t start = 0;
	*out = NULL;
	*n = 0;
	*world = 0;
	*listed = 0;
	for (;;) {
		ckptd_msg req = { .type = CKPTD_MSG_SHOW_VERSION }, rep;
		snprintf(req.u.show_version.job, sizeof(req.u.show_version.job), "%s", c->job);
		req.u.show_version.version = v;
		req.u.show_version.start = start;
		int rc = cli_daemon_call(c, cmd, cl, &req, CKPTD_MSG_VERSION_DETAIL, &rep);
		if (rc)
			return rc;
		const ckptd_version_detail *d = &rep.u.version_detail;
		const char *bad = !d->world_size ? "no world size"
		                : *world && d->world_size != *world ? "a world size that changes between pages" : NULL;
		*world = d->world_size;
		for (uint32_t i = 0; i < d->count && !bad; i++) {
			uint32_t rk = d->entries[i].rank;
			if (rk >= *world)
				bad = "a copy of a rank not below the world size";
			else if (rk < start || (*n && rk < (*out)[*n - 1].rank))
				bad = "copies out of rank order";
			if (bad)
				break;
			if (*n == cap) {
				cap = cap ? 2 * cap : 64;
				cli_copy *p = realloc(*out, cap * sizeof(*p));
				if (!p) {
					ckptd_msg_free(&rep);
					return EXIT_ERROR;
				}
				*out = p;
			}
			*listed += !*n || (*out)[*n - 1].rank != rk;
			cli_copy *e = &(*out)[(*n)++];
			memset(e, 0, sizeof(*e));
			e->rank = d->entries[i].rank;
			e->tier = d->entries[i].tier;
			e->live = d->entries[i].state == 1;
			e->code = -1;
			snprintf(e->node, sizeof(e->node), "%s", d->entries[i].node);
		}
		if (bad) {
			fprintf(stderr, "ckpt %s: the coordinator's answer about version %llu is not valid: %s\n", cmd,
			        (unsigned long long)v, bad);
			ckptd_msg_free(&rep);
			return EXIT_ERROR;
		}
		int more = d->more && d->count > 0;
		if (more)
			start = (uint64_t)d->entries[d->count - 1].rank + 1;
		ckptd_msg_free(&rep);
		if (!more)
			return EXIT_OK;
	}
}

/* Asks the agent at addr to verify what it holds of v; fills the matching
 * copies among its node's, ix[0..m) (cli_copies_sort). */
static int verify_at(cli *c, const char *addr, uint64_t v, cli_copy *cp, const size_t *ix, size_t m)
{
	cli sub = *c;
	sub.daemon = addr;
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(&sub, "verify", c->job, &cl);
	if (rc)
		return rc;
	/* Reading a node's copies takes as long as its disks and memory take. */
	ckptd_client_set_timeout(cl, 3600 * 1000);
	ckptd_msg req = { .type = CKPTD_MSG_VERIFY }, rep;
	snprintf(req.u.verify.job, sizeof(req.u.verify.job), "%s", c->job);
	req.u.verify.version = v;
	if ((rc = cli_daemon_call(&sub, "verify", cl, &req, CKPTD_MSG_VERIFY_REPLY, &rep)) == EXIT_OK) {
		for (;;) {
			const ckptd_verify_reply *r = &rep.u.verify_reply;
			for (uint32_t i = 0; i < r->count; i++) {
				cli_copy *e = cli_copies_find(cp, ix, 0, m, r->entries[i].rank, r->entries[i].tier);
				if (e) {
					e->code = (int)r->entries[i].code;
					snprintf(e->text, sizeof(e->text), "%s", r->entries[i].text);
				}
			}
			int more = r->more;
			ckptd_msg_free(&rep);
			if (!more)
				break;
			int err = ckptd_client_recv(cl, &rep);
			if (err < 0 || rep.type != CKPTD_MSG_VERIFY_REPLY) {
				if (err == 0)
					ckptd_msg_free(&rep);
				fprintf(stderr, "ckpt verify: the agent at %s stopped answering\n", addr);
				rc = EXIT_ERROR;
				break;
			}
		}
	}
	cli_copies_dups(cp, ix, 0, m);
	ckptd_client_close(cl);
	return rc;
}

static int agent_cmp(const void *a, const void *b)
{
	return strcmp((*(const ckptd_agent_info *const *)a)->node, (*(const ckptd_agent_info *const *)b)->node);
}

/* Each node's agent reads its own copies; agents work one after the other.
 * Nodes and agents are looked up in sorted lists: the work is bounded by
 * the sizes of the coordinator's and the agents' answers, not their
 * product. */
static int verify_nodes(cli *c, uint64_t v, cli_copy *cp, size_t n, const ckptd_status_reply *st)
{
	size_t *ix = NULL;
	const ckptd_agent_info **ags = malloc((st->count ? st->count : 1) * sizeof(*ags));
	if (!ags || cli_copies_sort(cp, n, &ix) < 0) {
		free(ags);
		fprintf(stderr, "ckpt verify: out of memory\n");
		return EXIT_ERROR;
	}
	for (uint32_t k = 0; k < st->count; k++)
		ags[k] = &st->entries[k];
	qsort(ags, st->count, sizeof(*ags), agent_cmp);
	for (size_t lo = 0, hi; lo < n; lo = hi) {
		hi = cli_copies_node_end(cp, ix, n, lo);
		int unchecked = 0; /* a live copy on this node no answer has settled yet */
		for (size_t k = lo; k < hi; k++)
			unchecked |= cp[ix[k]].code < 0 && cp[ix[k]].live;
		if (!unchecked)
			continue;
		const char *node = cp[ix[lo]].node;
		ckptd_agent_info key, *kp = &key;
		snprintf(key.node, sizeof(key.node), "%s", node);
		const ckptd_agent_info **found = bsearch(&kp, ags, st->count, sizeof(*ags), agent_cmp);
		const ckptd_agent_info *ag = found ? *found : NULL;
		int vr = EXIT_ERROR;
		if (ag && ag->state == CKPTD_AGENT_UP)
			vr = verify_at(c, ag->address, v, cp, ix + lo, hi - lo);
		for (size_t k = lo; k < hi; k++) {
			cli_copy *e = &cp[ix[k]];
			if (e->code < 0 && e->live) {
				e->code = vr == EXIT_OK ? CKPTD_VERIFY_MISSING : 4;
				snprintf(e->text, sizeof(e->text), "%s",
				         vr == EXIT_OK ? "the agent does not hold it"
				         : ag && ag->state == CKPTD_AGENT_UP ? "the agent could not be asked"
				                                             : "its agent is down");
			}
		}
	}
	free(ix);
	free(ags);
	return EXIT_OK;
}

static const char *vcode_name(int code)
{
	switch (code) {
	case CKPTD_VERIFY_OK: return "ok";
	case CKPTD_VERIFY_CORRUPT: return "CORRUPT";
	case CKPTD_VERIFY_MISSING: return "MISSING";
	case CKPTD_VERIFY_ERROR: return "ERROR";
	default: return "NOT VERIFIED";
	}
}

int cli_daemon_verify(cli *c)
{
	if (ckpt__job_valid(c->job) < 0)
		return cli_usage("verify", "a valid --job is required");
	if (c->version == VERSION_ALL)
		return cli_usage("verify", "with --daemon, give a version or 'latest'");
	ckptd_client *cl = NULL;
	int rc = cli_daemon_connect(c, "verify", c->job, &cl);
	if (rc)
		return rc;
	uint64_t v = c->version;
	cli_copy *cp = NULL;
	size_t n = 0;
	uint32_t world = 0, listed = 0;
	ckptd_msg st = { .type = CKPTD_MSG_STATUS }, srep;
	int have_status = 0;
	if ((v == VERSION_UNSET || v == VERSION_LATEST) && (rc = cli_daemon_latest(c, "verify", cl, &v)))
		goto out;
	if ((rc = cli_collect_copies(c, "verify", cl, v, &cp, &n, &world, &listed)))
		goto out;
	snprintf(st.u.status.job, sizeof(st.u.status.job), "%s", c->job);
	if ((rc = cli_daemon_call(c, "verify", cl, &st, CKPTD_MSG_STATUS_REPLY, &srep)))
		goto out;
	have_status = 1;
	if ((rc = verify_nodes(c, v, cp, n, &srep.u.status_reply)))
		goto out;
	int bad = 0;
	uint32_t intact_ranks = 0;
	if (c->json)
		printf("{\"job\": \"%s\", \"version\": %llu, \"world_size\": %u, \"copies\": [", c->job,
		       (unsigned long long)v, world);
	for (size_t i = 0, first = 1; i < n; i++) {
		if (!cp[i].live || (c->rank >= 0 && cp[i].rank != (uint64_t)c->rank))
			continue;
		char tb[32];
		tiers_text(cp[i].tier, tb, sizeof(tb));
		bad |= cp[i].code != CKPTD_VERIFY_OK;
		if (c->json) {
			printf("%s\n  {\"rank\": %u, \"tier\": \"%s\", \"node\": ", first ? "" : ",", cp[i].rank, tb);
			cli_json_str(stdout, cp[i].node);
			printf(", \"ok\": %s, \"result\": \"%s\"", cp[i].code == CKPTD_VERIFY_OK ? "true" : "false",
			       vcode_name(cp[i].code));
			if (cp[i].text[0]) {
				printf(", \"error\": ");
				cli_json_str(stdout, cp[i].text);
			}
			printf("}");
		} else {
			printf("version %llu rank %u %s on %s: %s%s%s\n", (unsigned long long)v, cp[i].rank, tb, cp[i].node,
			       vcode_name(cp[i].code), cp[i].text[0] ? ": " : "", cp[i].text);
		}
		first = 0;
	}
	/* One pass over the copies (in rank order): a rank is intact when one
	 * of its copies is; the ranks never listed are not. */
	for (size_t i = 0, ok = 0; i < n; i++) {
		ok |= cp[i].live && cp[i].code == CKPTD_VERIFY_OK;
		if (i + 1 == n || cp[i + 1].rank != cp[i].rank) {
			intact_ranks += (uint32_t)ok;
			ok = 0;
		}
	}
	if (c->json)
		printf("%s], \"intact_ranks\": %u, \"restorable\": %s}\n", n ? "\n" : "", intact_ranks,
		       intact_ranks == world ? "true" : "false");
	else
		printf("version %llu: %u of %u ranks have an intact copy%s\n", (unsigned long long)v, intact_ranks, world,
		       intact_ranks == world ? "" : ": NOT restorable from what was verified");
	int unreached = 0;
	for (size_t i = 0; i < n; i++)
		if (cp[i].live && (c->rank < 0 || cp[i].rank == (uint64_t)c->rank))
			unreached |= cp[i].code == CKPTD_VERIFY_ERROR || cp[i].code == 4;
	/* Damage found is 3; a copy that could not be checked at all is 1. */
	if (bad && !unreached)
		rc = EXIT_CORRUPT;
	else if (unreached)
		rc = EXIT_ERROR;
	else
		rc = intact_ranks < world ? EXIT_CORRUPT : EXIT_OK;
out:
	if (have_status)
		ckptd_msg_free(&srep);
	free(cp);
	ckptd_client_close(cl);
	return rc;
}
