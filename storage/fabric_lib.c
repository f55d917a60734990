/* Loads libfabric on first use (fabric_lib.h says why). */
#include "fabric_lib.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#ifndef CKPT_LIBFABRIC_SONAME
#define CKPT_LIBFABRIC_SONAME "libfabric.so.1"
#endif

static ckpt_fab_lib lib;
static const ckpt_fab_lib *loaded;
static char why[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* Held from the load's look at the signal dispositions to its putting them
 * back, and by whoever else changes them (ckpt_fab_signals_lock): a handler
 * installed in between would be taken for the load's and replaced by the
 * disposition seen before it (a rank's preemption handler, installed while
 * the fabric loaded in the background, was put back to SIG_DFL, and the
 * SIGTERM that followed killed the rank). */
static pthread_mutex_t signals_mu = PTHREAD_MUTEX_INITIALIZER;

void ckpt_fab_signals_lock(void)
{
	pthread_mutex_lock(&signals_mu);
}

void ckpt_fab_signals_unlock(void)
{
	pthread_mutex_unlock(&signals_mu);
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p && !why[0])
		snprintf(why, sizeof(why), "%s: no symbol %s", CKPT_LIBFABRIC_SONAME, name);
	return p;
}

/* The objects loaded before libfabric, by base address. */
#define OBJS_MAX 512
typedef struct objs {
	uintptr_t base[OBJS_MAX];
	int n;
} objs;

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	objs *o = arg;
	if (o->n < OBJS_MAX)
		o->base[o->n++] = (uintptr_t)info->dlpi_addr;
	return 0;
}

/* 1 if handler h lies in an object that was loaded before (the process's
 * own code: another thread installed it while we loaded). */
static int installed_by_process(const objs *o, void (*h)(int))
{
	Dl_info di;
	if (h == SIG_DFL || h == SIG_IGN || !dladdr((void *)(uintptr_t)h, &di))
		return 0;
	for (int i = 0; i < o->n; i++)
		if (o->base[i] == (uintptr_t)di.dli_fbase)
			return 1;
	return 0;
}

/* Loading libfabric runs its providers' libraries' constructors, and
 * Debian's libinfinipath (PSM) installs SIGTERM, SIGINT, SIGSEGV and SIGBUS
 * handlers there that exit the process with status 1. They would replace
 * the process's own (a rank's preemption handler from ckpt_preempt_install,
 * or the default that lets it dump core): every disposition the load
 * changed is put back as it was. The load may run on a thread of its own
 * (libckpt opens the fabric in the background) while the process installs
 * handlers: libckpt's own installs take signals_mu, so they come before or
 * after the whole load; a handler another thread installs that belongs to an
 * object loaded before libfabric is the process's own doing, and stays. */
static void load_keeping_signals(void **h)
{
	static struct sigaction before[NSIG];
	static objs loaded_before;
	int have[NSIG];
	for (int sig = 1; sig < NSIG; sig++)
		have[sig] = sig != SIGKILL && sig != SIGSTOP && sigaction(sig, NULL, &before[sig]) == 0;
	loaded_before.n = 0;
	dl_iterate_phdr(collect, &loaded_before);
	*h = dlopen(CKPT_LIBFABRIC_SONAME, RTLD_NOW | RTLD_LOCAL);
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction now;
		if (!have[sig] || sigaction(sig, NULL, &now) < 0)
			continue;
		if ((memcmp(&now.sa_handler, &before[sig].sa_handler, sizeof(now.sa_handler)) != 0 ||
		     now.sa_flags != before[sig].sa_flags) &&
		    !installed_by_process(&loaded_before, now.sa_handler))
			sigaction(sig, &before[sig], NULL);
	}
}

static void load(void)
{
	/* RTLD_LOCAL: its providers' symbols stay out of the process's scope.
	 * Never closed: providers keep threads for the process. */
	void *h;
	pthread_mutex_lock(&signals_mu);
	load_keeping_signals(&h);
	pthread_mutex_unlock(&signals_mu);
	if (!h) {
		const char *e = dlerror();
		snprintf(why, sizeof(why), "cannot load %s: %s", CKPT_LIBFABRIC_SONAME, e ? e : "unknown error");
		return;
	}
	*(void **)&lib.getinfo = sym(h, "fi_getinfo");
	*(void **)&lib.freeinfo = sym(h, "fi_freeinfo");
	*(void **)&lib.dupinfo = sym(h, "fi_dupinfo");
	*(void **)&lib.fabric = sym(h, "fi_fabric");
	*(void **)&lib.strerror = sym(h, "fi_strerror");
	if (why[0]) {
		dlclose(h);
		return;
	}
	loaded = &lib;
}

const ckpt_fab_lib *ckpt__fab_lib(char *err, size_t cap)
{
	pthread_once(&once, load);
	if (!loaded && err && cap)
		snprintf(err, cap, "%s", why);
	return loaded;
}
