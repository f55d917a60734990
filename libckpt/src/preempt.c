/* Preemption in a rank (ckpt.h: ckpt_preempt_install, ckpt_preempt_notice,
 * ckpt_step's SAVE and EXIT).
 *
 *   signal ──> handler: marks every armed context (an atomic store: all a
 *              handler may do), then chains to the handler installed before
 *   io thread ── ckpt__preempt_poll: a marked context raises a notice:
 *              with an agent, PREEMPT to it (the coordinator answers every
 *              rank of the job with EMERGENCY); embedded, a local emergency
 *              at the next step, on local disk
 *   EMERGENCY ── ckpt__preempt_emergency: remembered under step_mu
 *   ckpt_step ── SAVE at the emergency step; EXIT once its version is
 *              committed at the emergency's tier, or when the deadline is
 *              near; no interval saves meanwhile
 *
 * Signal handlers take no argument, so the armed contexts are in a
 * process-wide table: the only global state of the library.
 *
 * Handlers we find in place are called after ours, except one that a
 * library installed from its constructor while it was loaded with libckpt:
 * Debian's libinfinipath (PSM, which libfabric links) installs a SIGTERM
 * and SIGINT handler that exits the process with status 1, which would end
 * every rank before it could save. What was in place when libckpt was
 * loaded is recorded by our own constructor (it runs after those of the
 * libraries libckpt depends on), with the object each handler lives in. */
#include "preempt.h"
#include "ctx.h"
#include "daemon.h"
#include "wire/proto.h"
#include "fabric.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define ARMED_MAX 16

static _Atomic(ckpt_ctx *) armed[ARMED_MAX];
static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction saved[NSIG];  /* what each signal had before ours (install_mu) */
static int users[NSIG];               /* armed contexts per signal (install_mu) */
/* Set by the constructor, read-only after: the handler in place at load
 * time when it lives in a shared object loaded with libckpt or after it
 * (not the program, nor a library it had loaded before: theirs are chained). */
static struct sigaction lib_installed[NSIG];
static unsigned char lib_installed_set[NSIG];

typedef struct obj_find {
	uintptr_t addr[2];
	int index[2]; /* position in load order, -1: not found */
	int n;
} obj_find;

static int obj_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	obj_find *f = arg;
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < info->dlpi_phnum && f->index[k] < 0; i++) {
			const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
			uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
			if (ph->p_type == PT_LOAD && f->addr[k] >= lo && f->addr[k] - lo < ph->p_memsz)
				f->index[k] = f->n;
		}
	f->n++;
	return 0;
}

static uintptr_t handler_addr(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) ? (uintptr_t)sa->sa_sigaction : (uintptr_t)sa->sa_handler;
}

__attribute__((constructor)) static void record_lib_handlers(void)
{
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) < 0)
			continue;
		if (!(sa.sa_flags & SA_SIGINFO) && (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))
			continue;
		obj_find f = { { (uintptr_t)&record_lib_handlers, handler_addr(&sa) }, { -1, -1 }, 0 };
		dl_iterate_phdr(obj_cb, &f);
		/* Index 0 is the program: a handler there is the program's own. */
		if (f.index[1] > 0 && f.index[0] >= 0 && f.index[1] >= f.index[0]) {
			lib_installed[sig] = sa;
			lib_installed_set[sig] = 1;
		}
	}
}

/* 1 if sa is the handler a library's constructor installed (above). */
static int installed_by_library(int sig, const struct sigaction *sa)
{
	return lib_installed_set[sig] && handler_addr(sa) == handler_addr(&lib_installed[sig]) &&
	       (sa->sa_flags & SA_SIGINFO) == (lib_installed[sig].sa_flags & SA_SIGINFO);
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int e = errno;
	for (int i = 0; i < ARMED_MAX; i++) {
		ckpt_ctx *ctx = atomic_load(&armed[i]);
		if (ctx)
			atomic_store(&ctx->preempt_sig, sig);
	}
	const struct sigaction *o = &saved[sig];
	if (installed_by_library(sig, o)) {
		/* not chained: see the top of the file */
	} else if (o->sa_flags & SA_SIGINFO) {
		if (o->sa_sigaction)
			o->sa_sigaction(sig, si, uc);
	} else if (o->sa_handler != SIG_DFL && o->sa_handler != SIG_IGN && o->sa_handler) {
		o->sa_handler(sig);
	}
	errno = e;
}

int ckpt__preempt_parse_signals(const char *s, int *out, int cap)
{
	static const struct { const char *n; int sig; } names[] = {
		{ "TERM", SIGTERM }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "INT", SIGINT }, { "HUP", SIGHUP },
	};
	char buf[128];
	int n = 0;
	if (!s || strlen(s) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *sv = NULL, *t = strtok_r(buf, ", ", &sv); t; t = strtok_r(NULL, ", ", &sv)) {
		if (!strncasecmp(t, "SIG", 3))
			t += 3;
		size_t i;
		for (i = 0; i < CKPT_ARRAY_LEN(names); i++)
			if (!strcasecmp(t, names[i].n))
				break;
		if (i == CKPT_ARRAY_LEN(names) || n == cap)
			return -1;
		out[n++] = names[i].sig;
	}
	return n;
}

int ckpt_preempt_install(ckpt_ctx *ctx, const int *signals, int nsignals)
{
	if (!ctx || nsignals < 0 || (nsignals && !signals))
		return -EINVAL;
	if (!signals) {
		signals = ctx->preempt_sigs;
		nsignals = ctx->npreempt_sigs;
	}
	if (nsignals > (int)CKPT_ARRAY_LEN(ctx->armed_sigs))
		return -EINVAL;
	for (int i = 0; i < nsignals; i++)
		if (signals[i] <= 0 || signals[i] >= NSIG || signals[i] == SIGKILL || signals[i] == SIGSTOP)
			return -EINVAL;
	pthread_mutex_lock(&install_mu);
	int slot = -1, r = 0;
	for (int i = 0; i < ARMED_MAX && slot < 0; i++)
		if (atomic_load(&armed[i]) == ctx)
			slot = i; /* armed already: signals added */
	for (int i = 0; i < ARMED_MAX && slot < 0; i++)
		if (!atomic_load(&armed[i]))
			slot = i;
	if (slot < 0) {
		pthread_mutex_unlock(&install_mu);
		return -ENOSPC;
	}
	char skipped[160] = "";
	ckpt_fab_signals_lock(); /* not inside a background load of libfabric */
	for (int i = 0; i < nsignals && r == 0; i++) {
		int sig = signals[i], have = 0;
		for (int k = 0; k < ctx->narmed_sigs; k++)
			have |= ctx->armed_sigs[k] == sig;
		if (have)
			continue;
		if (users[sig] == 0) {
			struct sigaction sa;
			memset(&sa, 0, sizeof(sa));
			sa.sa_sigaction = on_signal;
			sa.sa_flags = SA_SIGINFO | SA_RESTART;
			sigemptyset(&sa.sa_mask);
			if (sigaction(sig, &sa, &saved[sig]) < 0) {
				r = -errno;
				break;
			}
			Dl_info di;
			if (installed_by_library(sig, &saved[sig]) && strlen(skipped) + 64 < sizeof(skipped)) {
				const char *lib = dladdr((void *)handler_addr(&saved[sig]), &di) && di.dli_fname ? di.dli_fname : "?";
				const char *base = strrchr(lib, '/');
				snprintf(skipped + strlen(skipped), sizeof(skipped) - strlen(skipped), "%s%s's for signal %d",
				         skipped[0] ? ", " : "", base ? base + 1 : lib, sig);
			}
		}
		users[sig]++;
		ctx->armed_sigs[ctx->narmed_sigs++] = sig;
	}
	ckpt_fab_signals_unlock();
	atomic_store(&armed[slot], ctx);
	pthread_mutex_unlock(&install_mu);
	if (r == 0)
		LOG_I(&ctx->log, CKPT_NO_VERSION, "preemption: %d signal(s) armed; a notice gives %u ms", ctx->narmed_sigs,
		      ctx->cfg.preempt_grace_ms);
	if (skipped[0])
		LOG_I(&ctx->log, CKPT_NO_VERSION, "preemption: a handler a library installed when it was loaded is not "
		      "called (%s): it would end the process before the save", skipped);
	return r;
}

void ckpt__preempt_disarm(ckpt_ctx *ctx)
{
	pthread_mutex_lock(&install_mu);
	for (int i = 0; i < ARMED_MAX; i++)
		if (atomic_load(&armed[i]) == ctx)
			atomic_store(&armed[i], NULL);
	ckpt_fab_signals_lock();
	for (int k = 0; k < ctx->narmed_sigs; k++) {
		int sig = ctx->armed_sigs[k];
		if (--users[sig] == 0)
			sigaction(sig, &saved[sig], NULL); /* the last one out puts it back */
	}
	ckpt_fab_signals_unlock();
	ctx->narmed_sigs = 0;
	pthread_mutex_unlock(&install_mu);
}

/* With step_mu, in NONE: a local emergency (no agent to choose for the job). */
static void local_emergency(ckpt_ctx *ctx, uint64_t deadline)
{
	ctx->em.state = CKPT_EM_WAIT;
	ctx->em.local = 1;
	ctx->em.step = ctx->step_cur + 1;
	ctx->em.deadline = deadline;
	ctx->em.tier = CKPT_TIER_LOCAL_DISK;
}

static int raise_notice(ckpt_ctx *ctx, uint64_t deadline, uint32_t source, const char *what)
{
	if (!deadline)
		deadline = ckpt__wall_ns() + (uint64_t)ctx->cfg.preempt_grace_ms * 1000000ull;
	uint64_t left = deadline > ckpt__wall_ns() ? deadline - ckpt__wall_ns() : 0;
	if (ctx->daemon) {
		int r = ckpt__daemon_preempt(ctx, deadline, source, what);
		if (r == 0) {
			LOG_W(&ctx->log, CKPT_NO_VERSION, "preemption (%s): told the agent; %.1f s left", what, left / 1e9);
			return 0;
		}
		LOG_W(&ctx->log, CKPT_NO_VERSION, "preemption (%s): the agent could not be told (%s); saving the next "
		      "step on this node alone", what, ckpt_strerror(r));
	}
	pthread_mutex_lock(&ctx->step_mu);
	if (ctx->em.state == CKPT_EM_NONE)
		local_emergency(ctx, deadline);
	uint64_t step = ctx->em.step;
	pthread_mutex_unlock(&ctx->step_mu);
	LOG_W(&ctx->log, CKPT_NO_VERSION, "preemption (%s): saving step %llu to local disk, %.1f s left", what,
	      (unsigned long long)step, left / 1e9);
	return 0;
}

void ckpt__preempt_poll(ckpt_ctx *ctx)
{
	int sig = atomic_exchange(&ctx->preempt_sig, 0);
	if (!sig || ctx->preempt_raised)
		return;
	ctx->preempt_raised = 1;
	char what[32];
	snprintf(what, sizeof(what), "signal %d", sig);
	raise_notice(ctx, 0, CKPTD_NOTICE_SRC_SIGNAL, what);
}

int ckpt_preempt_notice(ckpt_ctx *ctx, uint64_t deadline_ns)
{
	if (!ctx)
		return -EINVAL;
	return raise_notice(ctx, deadline_ns, CKPTD_NOTICE_SRC_CLI, "ckpt_preempt_notice");
}

/* Whether the emergency is WAIT or SAVING for step: what SAFE may follow. */
static int em_unsafe_at(const ckpt_emergency *em, uint64_t step)
{
	return (em->state == CKPT_EM_WAIT || em->state == CKPT_EM_SAVING) && em->step == step;
}

void ckpt__preempt_emergency(ckpt_ctx *ctx, uint64_t step, uint64_t deadline, uint32_t tier, int final)
{
	ckpt_emergency *em = &ctx->em;
	if (final) {
		pthread_mutex_lock(&ctx->step_mu);
		int mine = em_unsafe_at(em, step);
		if (mine)
			em->state = CKPT_EM_SAFE;
		pthread_mutex_unlock(&ctx->step_mu);
		if (mine)
			LOG_W(&ctx->log, step, "emergency checkpoint safe off the noticed nodes: ckpt_step says EXIT");
		return;
	}
	pthread_mutex_lock(&ctx->step_mu);
	int again = em->state != CKPT_EM_NONE && !em->local && em->step == step;
	if (!again) {
		em->state = CKPT_EM_WAIT;
		em->local = 0;
	}
	em->step = step;
	em->deadline = deadline;
	em->tier = tier;
	uint64_t cur = ctx->step_cur;
	pthread_mutex_unlock(&ctx->step_mu);
	uint64_t w = ckpt__wall_ns();
	LOG_W(&ctx->log, step, "emergency checkpoint: save at step %llu (now at %llu), commit at tier 0x%x, %.1f s "
	      "left%s", (unsigned long long)step, (unsigned long long)cur, tier, deadline > w ? (deadline - w) / 1e9 : 0.0,
	      again ? " (deadline updated)" : "");
	if (cur >= step && !again)
		LOG_E(&ctx->log, step, "emergency: this rank is at step %llu already, past the step chosen; it will not "
		      "save it and leaves at the deadline", (unsigned long long)cur);
}

void ckpt__preempt_committed(ckpt_ctx *ctx, uint64_t version, uint32_t tiers)
{
	ckpt_emergency *em = &ctx->em;
	pthread_mutex_lock(&ctx->step_mu);
	/* With an agent, the coordinator says when (EMERGENCY FINAL): only it
	 * knows where every rank's copy is. */
	int done = em->local && em_unsafe_at(em, version) && (tiers & em->tier);
	if (done)
		em->state = CKPT_EM_SAFE;
	pthread_mutex_unlock(&ctx->step_mu);
	if (done)
		LOG_W(&ctx->log, version, "emergency checkpoint committed at tier 0x%x: ckpt_step says EXIT", tiers);
}

int ckpt__preempt_step(ckpt_ctx *ctx, uint64_t step, int act, int *say_exit)
{
	ckpt_emergency *em = &ctx->em;
	*say_exit = 0;
	if (em->state == CKPT_EM_NONE)
		return act;
	uint64_t margin = (uint64_t)ctx->cfg.preempt_exit_margin_ms * 1000000ull;
	if (em->state == CKPT_EM_SAFE || ckpt__wall_ns() + margin >= em->deadline) {
		if (!em->exit_said)
			*say_exit = em->exit_said = em->state == CKPT_EM_SAFE ? CKPT_EM_EXIT_SAFE : CKPT_EM_EXIT_LATE;
		return CKPT_STEP_EXIT;
	}
	if (step == em->step && em->state == CKPT_EM_WAIT) {
		em->state = CKPT_EM_SAVING;
		return CKPT_STEP_SAVE;
	}
	return CKPT_STEP_CONTINUE; /* no interval saves while the emergency runs */
}
