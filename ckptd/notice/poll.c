/* The poller: one thread, one curl multi handle, every source in it at once
 * (a hanging endpoint delays no other source). The thread sleeps in
 * curl_multi_poll until a transfer moves, a source is due or
 * ckptd_notice_stop wakes it (curl_multi_wakeup, which stays pending if the
 * thread is not asleep yet); requests in flight at stop are abandoned.
 *
 * Failures are logged rate-limited per source: the first at once, then at
 * most one line a minute counting the others, and one line when the source
 * answers again. */
#include "notice_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEF_INTERVAL_MS 1000
#define DEF_TIMEOUT_MS 2000
#define DEF_MAX_BODY (64u << 10)
#define MAX_MAX_BODY (16u << 20)
#define LOG_EVERY_NS (60 * NT_NS)
#define MAX_SLEEP_MS 1000
#define NCLOUD 3

struct ckptd_notice_poller {
	const ckptd_log *log;
	ckptd_notice_fn fn;
	void *arg;
	int interval_ms, timeout_ms;
	char *vm_name;
	void *multi;          /* CURLM * */
	nt_cloud cloud[NCLOUD];
	int ncloud;
	nt_trigger trig;
	int have_trigger;
	pthread_t thr;
	atomic_int stop;
};

void nt_schedule(nt_poller *p, nt_state *s, uint64_t now_ns)
{
	s->next_ns = now_ns + (uint64_t)p->interval_ms * 1000000ull;
}

void nt_failed(nt_poller *p, nt_state *s, const char *why, const char *more)
{
	uint64_t now = ckpt__now_ns();
	if (s->logged_ns && now - s->logged_ns < LOG_EVERY_NS) {
		s->unlogged++;
		return;
	}
	char others[80] = "";
	if (s->unlogged)
		snprintf(others, sizeof(others), " (and %u more failed polls since the last line)", s->unlogged);
	CKPTD_WARN(p->log, NULL, NULL, "notice %s: %s%s%s%s; polling on", s->name, why, more ? ": " : "",
	           more ? more : "", others);
	s->logged_ns = now;
	s->unlogged = 0;
	s->failing = 1;
}

void nt_answered(nt_poller *p, nt_state *s)
{
	if (!s->failing)
		return;
	CKPTD_INFO(p->log, NULL, NULL, "notice %s: answered again%s", s->name,
	           s->unlogged ? " (after failed polls not logged)" : "");
	s->failing = 0;
	s->unlogged = 0;
}

void nt_notice(nt_poller *p, nt_state *s, const ckptd_notice_event *ev, const char *key)
{
	if (s->fired && !strcmp(s->key, key))
		return;
	s->fired = 1;
	snprintf(s->key, sizeof(s->key), "%s", key);
	uint64_t now = ckpt__wall_ns();
	if (ev->deadline_ns)
		CKPTD_WARN(p->log, NULL, NULL, "notice %s: preemption notice: %s (%+.0f s from now)", s->name, ev->detail,
		           ((double)ev->deadline_ns - (double)now) / 1e9);
	else
		CKPTD_WARN(p->log, NULL, NULL, "notice %s: preemption notice: %s (deadline unknown)", s->name,
		           ev->detail);
	p->fn(p->arg, ev);
}

/* ---------------------------------------------------------------- the thread */

static void begin_due(nt_poller *p, uint64_t now)
{
	for (int i = 0; i < p->ncloud; i++) {
		nt_cloud *c = &p->cloud[i];
		if (c->http.busy || now < c->st.next_ns || !nt_cloud_begin(p, c, p->timeout_ms, now))
			continue;
		if (curl_multi_add_handle(p->multi, c->http.easy) == CURLM_OK) {
			c->http.busy = 1;
		} else {
			c->step = NT_IDLE;
			nt_failed(p, &c->st, "cannot start a request", NULL);
			nt_schedule(p, &c->st, now);
		}
	}
	if (p->have_trigger && now >= p->trig.st.next_ns)
		nt_trigger_check(p, &p->trig, now);
}

static void collect_done(nt_poller *p)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(p->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		CURL *e = m->easy_handle;
		int code = m->data.result;
		nt_cloud *c = NULL;
		curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&c);
		curl_multi_remove_handle(p->multi, e);
		c->http.busy = 0;
		nt_cloud_done(p, c, code, p->vm_name, ckpt__now_ns());
	}
}

/* How long to sleep: until the next source is due (transfers in flight
 * shorten it through curl's own timers). */
static int sleep_ms(nt_poller *p)
{
	uint64_t now = ckpt__now_ns(), next = now + MAX_SLEEP_MS * 1000000ull;
	for (int i = 0; i < p->ncloud; i++)
		if (!p->cloud[i].http.busy && p->cloud[i].st.next_ns < next)
			next = p->cloud[i].st.next_ns;
	if (p->have_trigger && p->trig.st.next_ns < next)
		next = p->trig.st.next_ns;
	return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

static void *run(void *arg)
{
	nt_poller *p = arg;
	int running;
	while (!atomic_load(&p->stop)) {
		begin_due(p, ckpt__now_ns());
		curl_multi_perform(p->multi, &running);
		collect_done(p);
		if (!atomic_load(&p->stop))
			curl_multi_poll(p->multi, NULL, 0, sleep_ms(p), NULL);
	}
	for (int i = 0; i < p->ncloud; i++)
		if (p->cloud[i].http.busy) {
			curl_multi_remove_handle(p->multi, p->cloud[i].http.easy);
			p->cloud[i].http.busy = 0;
		}
	return NULL;
}

/* ---------------------------------------------------------------- start, stop */

static void poller_free(nt_poller *p)
{
	for (int i = 0; i < p->ncloud; i++)
		nt_cloud_free(&p->cloud[i]);
	if (p->multi)
		curl_multi_cleanup(p->multi);
	free(p->trig.path);
	free(p->vm_name);
	free(p);
}

static int add_cloud(nt_poller *p, int kind, const char *name, const char *url, size_t max_body)
{
	if (!url || !*url)
		return 0;
	char why[96] = "";
	char *base = nt_http_base(url, why, sizeof(why));
	if (!base) {
		CKPTD_ERROR(p->log, NULL, NULL, "notice %s: URL %s refused: %s", name, url, why);
		return -EINVAL;
	}
	CKPTD_INFO(p->log, NULL, NULL, "notice %s: polling %s every %d ms", name, base, p->interval_ms);
	return nt_cloud_init(&p->cloud[p->ncloud++], kind, base, max_body);
}

static int setup(nt_poller *p, const ckptd_notice_cfg *cfg)
{
	size_t max_body = !cfg->max_body ? DEF_MAX_BODY : cfg->max_body > MAX_MAX_BODY ? MAX_MAX_BODY : cfg->max_body;
	int rc;
	if (!(p->multi = curl_multi_init()))
		return -ENOMEM;
	if ((rc = add_cloud(p, CKPTD_NOTICE_AWS, "aws", cfg->aws_url, max_body)) < 0 ||
	    (rc = add_cloud(p, CKPTD_NOTICE_GCP, "gcp", cfg->gcp_url, max_body)) < 0 ||
	    (rc = add_cloud(p, CKPTD_NOTICE_AZURE, "azure", cfg->azure_url, max_body)) < 0)
		return rc;
	if (cfg->azure_vm_name && *cfg->azure_vm_name && !(p->vm_name = strdup(cfg->azure_vm_name)))
		return -ENOMEM;
	if (cfg->trigger_file && *cfg->trigger_file) {
		if (!(p->trig.path = strdup(cfg->trigger_file)))
			return -ENOMEM;
		p->trig.st.name = "file";
		p->trig.st.kind = CKPTD_NOTICE_FILE;
		p->trig.max = max_body;
		p->have_trigger = 1;
		CKPTD_INFO(p->log, NULL, NULL, "notice file: watching %s every %d ms", p->trig.path, p->interval_ms);
	}
	if (!p->ncloud && !p->have_trigger) {
		CKPTD_ERROR(p->log, NULL, NULL, "notice: no source configured");
		return -EINVAL;
	}
	return 0;
}

static void check_curl(const ckptd_log *log)
{
#ifdef CURL_VERSION_THREADSAFE
	if (curl_version_info(CURLVERSION_NOW)->features & CURL_VERSION_THREADSAFE)
		return;
#endif
	CKPTD_WARN(log, NULL, NULL, "notice: this libcurl's global init is not thread-safe: start and stop "
	           "pollers while no other thread uses libcurl");
}

int ckptd_notice_start(const ckptd_notice_cfg *cfg, const ckptd_log *log, ckptd_notice_fn fn, void *arg,
                       ckptd_notice_poller **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!cfg || !fn)
		return -EINVAL;
	check_curl(log);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -EIO;
	nt_poller *p = calloc(1, sizeof(*p));
	if (!p) {
		curl_global_cleanup();
		return -ENOMEM;
	}
	p->log = log;
	p->fn = fn;
	p->arg = arg;
	p->interval_ms = cfg->interval_ms > 0 ? cfg->interval_ms : DEF_INTERVAL_MS;
	p->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : DEF_TIMEOUT_MS;
	atomic_init(&p->stop, 0);
	int rc = setup(p, cfg);
	if (rc == 0) {
		/* Signals stay with the caller's threads. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rc = -pthread_create(&p->thr, NULL, run, p);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (rc < 0) {
		poller_free(p);
		curl_global_cleanup();
		return rc;
	}
	*out = p;
	return 0;
}

void ckptd_notice_stop(ckptd_notice_poller *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, 1);
	curl_multi_wakeup(p->multi);
	pthread_join(p->thr, NULL);
	poller_free(p);
	curl_global_cleanup();
}
