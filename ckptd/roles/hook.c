/* --on-failure: the operator's command, run for each failure decision.
 * `/bin/sh -c CMD` with the decision's values in the environment only (CMD
 * is the operator's text, never one with a job or node name pasted in: a
 * name cannot become shell syntax). posix_spawn, not waited for: the loop
 * goes on; each child is reaped at the next tick (waitpid WNOHANG on its
 * pid) and its exit status logged. At most HOOK_MAX run at once; a decision
 * while that many still run is logged and its hook skipped, so a command
 * that never exits cannot pile up processes. */
#include "hook.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define HOOK_MAX 16

extern char **environ;

struct ckptd_hook {
	const char *cmd;
	const ckptd_log *log;
	pid_t kids[HOOK_MAX];
	uint64_t epoch[HOOK_MAX];
	int nkids;
};

int ckptd_hook_new(const char *cmd, const ckptd_log *log, ckptd_hook **out)
{
	*out = NULL;
	if (!cmd || !*cmd)
		return 0;
	ckptd_hook *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->cmd = cmd;
	h->log = log;
	*out = h;
	return 0;
}

const char *ckptd_fail_name(uint32_t kind)
{
	switch (kind) {
	case CKPTD_FAIL_RANK_DIED: return "rank-died";
	case CKPTD_FAIL_NODE_LOST: return "node-lost";
	case CKPTD_FAIL_RANK_HUNG: return "rank-hung";
	case CKPTD_FAIL_SPARE_CHOSEN: return "spare-chosen";
	case CKPTD_FAIL_SPARE_READY: return "spare-ready";
	case CKPTD_FAIL_NO_SPARE: return "no-spare";
	case CKPTD_FAIL_RECOVERED: return "recovered";
	case CKPTD_FAIL_STRAGGLER: return "straggler-replaced";
	}
	return "unknown";
}

void ckptd_ranks_text(const ckptd_member *m, uint32_t n, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = '\0';
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i;
		while (j + 1 < n && m[j + 1].rank == m[j].rank + 1)
			j++;
		char item[32];
		if (j > i)
			snprintf(item, sizeof(item), "%s%u-%u", i ? "," : "", m[i].rank, m[j].rank);
		else
			snprintf(item, sizeof(item), "%s%u", i ? "," : "", m[i].rank);
		size_t k = strlen(item);
		if (len + k + 4 >= cap) {
			snprintf(out + len, cap - len, ",...");
			return;
		}
		memcpy(out + len, item, k + 1);
		len += k;
		i = j + 1;
	}
}

/* Children that exited: reaped, their status logged. */
void ckptd_hook_reap(ckptd_hook *h)
{
	for (int i = 0; h && i < h->nkids;) {
		int st;
		pid_t r = waitpid(h->kids[i], &st, WNOHANG);
		if (r == 0 || (r < 0 && errno == EINTR)) {
			i++;
			continue;
		}
		if (r > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			CKPTD_DEBUG(h->log, NULL, NULL, "--on-failure (epoch %llu, pid %d) exited 0",
			            (unsigned long long)h->epoch[i], (int)h->kids[i]);
		else if (r > 0)
			CKPTD_WARN(h->log, NULL, NULL, "--on-failure (epoch %llu, pid %d) %s %d",
			           (unsigned long long)h->epoch[i], (int)h->kids[i],
			           WIFEXITED(st) ? "exited" : "killed by signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		h->kids[i] = h->kids[h->nkids - 1];
		h->epoch[i] = h->epoch[h->nkids - 1];
		h->nkids--;
	}
}

/* Copies environ without any CKPT_ variable the hook sets, nor the cluster
 * secret (CKPT_TOKEN, when the daemon took it from there), then adds them. */
static char **hook_env(char vars[][CKPTD_TEXT_MAX + 48], int nvars)
{
	size_t n = 0;
	while (environ && environ[n])
		n++;
	char **env = calloc(n + (size_t)nvars + 1, sizeof(*env));
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		int ours = !strncmp(environ[i], "CKPT_TOKEN=", 11);
		for (int v = 0; v < nvars && !ours; v++) {
			size_t l = strcspn(vars[v], "=") + 1;
			ours = !strncmp(environ[i], vars[v], l);
		}
		if (!ours)
			env[k++] = environ[i];
	}
	for (int v = 0; v < nvars; v++)
		env[k++] = vars[v];
	env[k] = NULL;
	return env;
}

void ckptd_hook_run(ckptd_hook *h, const ckptd_event *e)
{
	if (!h)
		return;
	ckptd_hook_reap(h);
	if (h->nkids == HOOK_MAX) {
		CKPTD_WARN(h->log, e->node, e->job, "--on-failure not run for epoch %llu: %d earlier ones still run",
		           (unsigned long long)e->epoch, HOOK_MAX);
		return;
	}
	char ranks[CKPTD_TEXT_MAX + 1];
	ckptd_ranks_text(e->entries, e->count, ranks, sizeof(ranks));
	char vars[6][CKPTD_TEXT_MAX + 48];
	snprintf(vars[0], sizeof(vars[0]), "CKPT_JOB=%s", e->job);
	snprintf(vars[1], sizeof(vars[1]), "CKPT_NODE=%s", e->node);
	snprintf(vars[2], sizeof(vars[2]), "CKPT_RANKS=%s", ranks);
	snprintf(vars[3], sizeof(vars[3]), "CKPT_EPOCH=%llu", (unsigned long long)e->epoch);
	snprintf(vars[4], sizeof(vars[4]), "CKPT_FAILURE=%s", ckptd_fail_name(e->kind));
	snprintf(vars[5], sizeof(vars[5]), "CKPT_FAILURE_TIME_NS=%llu", (unsigned long long)e->time_ns);
	char **env = hook_env(vars, 6);
	if (!env)
		return;
	/* The daemon blocks SIGTERM and SIGINT (its signalfd): the hook gets
	 * the default mask and dispositions back. */
	posix_spawnattr_t at;
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	char *argv[] = { "/bin/sh", "-c", (char *)h->cmd, NULL };
	pid_t pid;
	int r = posix_spawn(&pid, "/bin/sh", NULL, &at, argv, env);
	posix_spawnattr_destroy(&at);
	free(env);
	if (r != 0) {
		CKPTD_WARN(h->log, e->node, e->job, "--on-failure not started for epoch %llu: %s",
		           (unsigned long long)e->epoch, strerror(r));
		return;
	}
	h->kids[h->nkids] = pid;
	h->epoch[h->nkids++] = e->epoch;
	CKPTD_INFO(h->log, e->node, e->job, "--on-failure started for epoch %llu (%s, ranks %s): pid %d",
	           (unsigned long long)e->epoch, ckptd_fail_name(e->kind), ranks[0] ? ranks : "none", (int)pid);
}

void ckptd_hook_free(ckptd_hook *h)
{
	if (!h)
		return;
	/* Children still running are left to finish; init reaps them. */
	ckptd_hook_reap(h);
	free(h);
}
