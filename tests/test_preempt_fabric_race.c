/* A rank arms its preemption signals while libfabric is being loaded on
 * another thread (libckpt opens the fabric in the background, and the load
 * puts back every signal disposition its libraries' constructors changed:
 * storage/fabric_lib.c). The rank's handler must survive the load whatever
 * the interleaving: once a load that looked at the dispositions before the
 * install put SIGTERM back to SIG_DFL after it, and the preemption SIGTERM
 * killed the rank (preempt_sigterm, about 1 run in 4 on a loaded machine).
 *
 * Each round is a child process: one thread loads libfabric, the main thread
 * arms SIGTERM after a delay that moves across the load (0 to 400 ms: before, inside and after it); then
 * the child raises SIGTERM and must still be alive, with the library's
 * handler in place. Skips (77) where libfabric cannot be loaded. */
#include "helpers.h"

#include "ckpt.h"
#include "fabric_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

static void *loader(void *arg)
{
	(void)arg;
	char why[256];
	return (void *)(uintptr_t)(ckpt__fab_lib(why, sizeof(why)) != NULL);
}

/* 0: the handler survived; 2: SIGTERM is not the library's after the load;
 * 3: libfabric did not load. A SIGTERM that kills the child is the failure
 * the parent sees. */
static int round_child(const char *root, unsigned delay_us)
{
	signal(SIGTERM, SIG_DFL);
	ckpt_config c;
	if (ckpt_config_init(&c) < 0)
		return 4;
	c.job_id = "race";
	c.root = root;
	ckpt_ctx *ctx;
	if (ckpt_ctx_open(&c, &ctx) < 0)
		return 4;
	pthread_t t;
	if (pthread_create(&t, NULL, loader, NULL))
		return 4;
	usleep(delay_us);
	int sig = SIGTERM;
	if (ckpt_preempt_install(ctx, &sig, 1) < 0)
		return 4;
	void *ok;
	pthread_join(t, &ok);
	if (!ok)
		return 3;
	struct sigaction sa;
	Dl_info di;
	sigaction(SIGTERM, NULL, &sa);
	void *h = (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction : (void *)sa.sa_handler;
	Dl_info self;
	if (!dladdr(h, &di) || !dladdr((void *)ckpt_preempt_install, &self) || di.dli_fbase != self.dli_fbase)
		return 2;
	raise(SIGTERM); /* a notice now: the process goes on */
	ckpt_ctx_close(ctx);
	return 0;
}

int main(void)
{
	char *dir = t_tmpdir("prerace");
	static const unsigned delays_us[] = { 0, 500, 2000, 5000, 10000, 20000, 40000, 70000, 120000, 400000 };
	int bad = 0, skipped = 0;
	for (size_t i = 0; i < sizeof(delays_us) / sizeof(delays_us[0]); i++) {
		char root[600];
		snprintf(root, sizeof(root), "%s/r%zu", dir, i);
		pid_t pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0)
			_exit(round_child(root, delays_us[i]));
		int st;
		T_ASSERT(waitpid(pid, &st, 0) == pid);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 3) {
			skipped++;
		} else if (WIFSIGNALED(st)) {
			fprintf(stderr, "FAIL: armed %u us into the load: the rank died of signal %d\n", delays_us[i],
			        WTERMSIG(st));
			bad++;
		} else if (WEXITSTATUS(st) != 0) {
			fprintf(stderr, "FAIL: armed %u us into the load: %s (exit %d)\n", delays_us[i],
			        WEXITSTATUS(st) == 2 ? "SIGTERM's handler is not libckpt's after the load"
			                             : "the round could not run", WEXITSTATUS(st));
			bad++;
		}
	}
	t_rmrf(dir);
	if (skipped && !bad) {
		printf("SKIP: libfabric cannot be loaded here\n");
		return T_EXIT_SKIP;
	}
	if (bad)
		return T_EXIT_FAIL;
	printf("ok: the preemption handler survived libfabric's load at every offset\n");
	return T_EXIT_PASS;
}
