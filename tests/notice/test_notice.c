/* The notice pollers (ckptd/notice) against fake_metadata.py, started here
 * on 127.0.0.1 at a free port and stopped at the end: no notice while there
 * is none; each source armed fires once, within a few periods, with the
 * deadline served; a different notice fires again; the trigger file; AWS
 * tokens renewed before they end and after a 401; hostile answers
 * (garbage, huge bodies, slow, hanging, redirects, errors, a listener that
 * never accepts) give no notice, a bounded log and a prompt stop, and the
 * poller fires as soon as the endpoint behaves. Skips (77) without python3. */
#include "helpers.h"
#include "notice/notice.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#define IVL 100            /* poll period, ms */
#define TMO 400            /* per-request timeout, ms */
#define FIRE_MS (3 * IVL + 700) /* an armed source fires within this */
#define STOP_MS 250        /* ckptd_notice_stop returns within this */
#define VM "ckpt-vm"
#define AWS_T "2030-01-02T03:04:05Z"
#define AZ_T "Wed, 02 Jan 2030 03:04:05 GMT"
#define T_NS (1893553445ull * 1000000000ull)
#define MAXEV 32

/* ---------------------------------------------------------------- clocks */

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---------------------------------------------------------------- the fake */

typedef struct fake {
	pid_t pid;
	int port;
	char base[64];
} fake;

static const char *python3(void)
{
	static char found[600];
	const char *path = getenv("PATH");
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path ? path : "/usr/bin:/bin");
	for (char *save, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(found, sizeof(found), "%s/python3", d);
		if (access(found, X_OK) == 0)
			return found;
	}
	return NULL;
}

static void fake_start(fake *f)
{
	const char *py = python3();
	if (!py) {
		fprintf(stderr, "skip: no python3\n");
		exit(T_EXIT_SKIP);
	}
	int pfd[2];
	T_ASSERT(pipe(pfd) == 0);
	f->pid = fork();
	T_ASSERT(f->pid >= 0);
	if (f->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execl(py, py, FAKE_METADATA, "--azure-vm", VM, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	char line[32] = "";
	size_t n = 0;
	uint64_t until = mono_ms() + 15000;
	while (n < sizeof(line) - 1 && !memchr(line, '\n', n) && mono_ms() < until) {
		struct pollfd p = { pfd[0], POLLIN, 0 };
		if (poll(&p, 1, 200) <= 0)
			continue;
		ssize_t r = read(pfd[0], line + n, sizeof(line) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		line[n] = 0;
	}
	close(pfd[0]);
	f->port = atoi(line);
	if (f->port <= 0) {
		int st;
		if (waitpid(f->pid, &st, WNOHANG) == f->pid && WIFEXITED(st) && WEXITSTATUS(st) == 127) {
			fprintf(stderr, "skip: cannot run python3\n");
			exit(T_EXIT_SKIP);
		}
		T_FAIL("fake_metadata.py did not say its port (got '%s')", line);
	}
	snprintf(f->base, sizeof(f->base), "http://127.0.0.1:%d", f->port);
}

static void fake_stop(fake *f)
{
	kill(f->pid, SIGTERM);
	for (int i = 0; i < 100; i++) {
		if (waitpid(f->pid, NULL, WNOHANG) == f->pid)
			return;
		sleep_ms(20);
	}
	kill(f->pid, SIGKILL);
	waitpid(f->pid, NULL, 0);
}

typedef struct buf {
	char *p;
	size_t n;
} buf;

static size_t on_data(char *d, size_t s, size_t n, void *arg)
{
	buf *b = arg;
	char *p = realloc(b->p, b->n + s * n + 1);
	T_ASSERT(p);
	memcpy(p + b->n, d, s * n);
	b->p = p;
	b->n += s * n;
	p[b->n] = 0;
	return s * n;
}

/* A request of the test's own; returns the HTTP status, the body in *out
 * (free it) when out is not NULL. */
static long http(fake *f, const char *method, const char *path, const char *hdr, const char *body, char **out)
{
	char url[256];
	snprintf(url, sizeof(url), "%s%s", f->base, path);
	CURL *e = curl_easy_init();
	T_ASSERT(e);
	buf b = { 0 };
	struct curl_slist *h = hdr ? curl_slist_append(NULL, hdr) : NULL;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_PROXY, "");
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
	if (!strcmp(method, "POST"))
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
	else if (strcmp(method, "GET"))
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	CURLcode rc = curl_easy_perform(e);
	long st = 0;
	if (rc != CURLE_OK)
		T_FAIL("%s %s: %s", method, path, curl_easy_strerror(rc));
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	if (out)
		*out = b.p;
	else
		free(b.p);
	return st;
}

/* POSTs a control object (printf-style JSON); NULL fmt: GET. Returns the
 * fake's view (json_decref it). */
static json_t *ctl(fake *f, const char *fmt, ...)
{
	char body[2048];
	char *out = NULL;
	long st;
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(body, sizeof(body), fmt, ap);
		va_end(ap);
		st = http(f, "POST", "/_control", "Content-Type: application/json", body, &out);
	} else {
		st = http(f, "GET", "/_control", NULL, NULL, &out);
	}
	if (st != 200)
		T_FAIL("control %s: HTTP %ld: %s", fmt ? body : "GET", st, out ? out : "");
	json_error_t je;
	json_t *v = json_loads(out, 0, &je);
	T_ASSERT(v);
	free(out);
	return v;
}

static void reset(fake *f)
{
	char *out = NULL;
	T_ASSERT(http(f, "POST", "/_reset", NULL, "", &out) == 200);
	free(out);
}

/* A counter of the fake: "token_puts", or a "status" entry "PATH CODE". */
static long stat_of(fake *f, const char *name)
{
	json_t *v = ctl(f, NULL), *s = json_object_get(v, "stats");
	json_t *x = json_object_get(s, name);
	if (!x)
		x = json_object_get(json_object_get(s, "status"), name);
	long n = x ? (long)json_integer_value(x) : 0;
	json_decref(v);
	return n;
}

#define ACTION "/latest/meta-data/spot/instance-action"
#define PREEMPTED "/computeMetadata/v1/instance/preempted"
#define EVENTS "/metadata/scheduledevents"

/* ---------------------------------------------------------------- notices heard */

typedef struct rec {
	pthread_mutex_t mu;
	int n;
	ckptd_notice_event ev[MAXEV];
	uint64_t at_ns[MAXEV];
} rec;

static void on_notice(void *arg, const ckptd_notice_event *ev)
{
	rec *r = arg;
	pthread_mutex_lock(&r->mu);
	if (r->n < MAXEV) {
		r->ev[r->n] = *ev;
		r->at_ns[r->n] = real_ns();
	}
	r->n++;
	pthread_mutex_unlock(&r->mu);
}

static void rec_init(rec *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
}

static int rec_count(rec *r)
{
	pthread_mutex_lock(&r->mu);
	int n = r->n;
	pthread_mutex_unlock(&r->mu);
	return n;
}

/* Waits until r has heard n notices or ms pass; returns how long it took. */
static uint64_t wait_for(rec *r, int n, int ms, const char *what)
{
	uint64_t t0 = mono_ms();
	while (rec_count(r) < n) {
		if (mono_ms() - t0 > (uint64_t)ms)
			T_FAIL("%s: %d notices after %d ms, expected %d", what, rec_count(r), ms, n);
		sleep_ms(5);
	}
	return mono_ms() - t0;
}

static ckptd_notice_event rec_get(rec *r, int i, uint64_t *at)
{
	pthread_mutex_lock(&r->mu);
	ckptd_notice_event e = r->ev[i];
	if (at)
		*at = r->at_ns[i];
	pthread_mutex_unlock(&r->mu);
	return e;
}

/* ---------------------------------------------------------------- pollers */

enum { S_AWS = 1, S_GCP = 2, S_AZURE = 4 };

static ckptd_log quiet = { CKPTD_LOG_WARN, NULL };

static ckptd_notice_poller *start_t(const char *base, int which, const char *trigger, const ckptd_log *log, rec *r,
                                    int timeout_ms)
{
	ckptd_notice_cfg c = { 0 };
	c.aws_url = which & S_AWS ? base : NULL;
	c.gcp_url = which & S_GCP ? base : NULL;
	c.azure_url = which & S_AZURE ? base : NULL;
	c.azure_vm_name = VM;
	c.trigger_file = trigger;
	c.interval_ms = IVL;
	c.timeout_ms = timeout_ms;
	ckptd_notice_poller *p = NULL;
	int rc = ckptd_notice_start(&c, log ? log : &quiet, on_notice, r, &p);
	if (rc != 0)
		T_FAIL("ckptd_notice_start: %d", rc);
	return p;
}

static ckptd_notice_poller *start(const char *base, int which, const char *trigger, const ckptd_log *log, rec *r)
{
	return start_t(base, which, trigger, log, r, TMO);
}

static uint64_t stop(ckptd_notice_poller *p, const char *what)
{
	uint64_t t0 = mono_ms();
	ckptd_notice_stop(p);
	uint64_t took = mono_ms() - t0;
	if (took > STOP_MS)
		T_FAIL("%s: stop took %llu ms", what, (unsigned long long)took);
	return took;
}

/* ---------------------------------------------------------------- tests */

static void t_none(fake *f)
{
	rec r;
	rec_init(&r);
	reset(f);
	ckptd_notice_poller *p = start(f->base, S_AWS | S_GCP | S_AZURE, NULL, NULL, &r);
	sleep_ms(8 * IVL);
	T_ASSERT(rec_count(&r) == 0);
	stop(p, "none");
	/* Each source spoke the protocol the fake demands. */
	T_ASSERT(stat_of(f, "/latest/api/token 200") >= 1);
	T_ASSERT(stat_of(f, ACTION " 404") >= 3 && stat_of(f, ACTION " 401") == 0);
	T_ASSERT(stat_of(f, PREEMPTED " 200") >= 3 && stat_of(f, PREEMPTED " 403") == 0);
	T_ASSERT(stat_of(f, EVENTS " 200") >= 3 && stat_of(f, EVENTS " 400") == 0);
	/* And the fake refuses what a real service refuses. */
	T_ASSERT(http(f, "GET", ACTION, NULL, NULL, NULL) == 401);
	T_ASSERT(http(f, "GET", PREEMPTED, NULL, NULL, NULL) == 403);
	T_ASSERT(http(f, "GET", EVENTS "?api-version=2020-07-01", NULL, NULL, NULL) == 400);
	T_ASSERT(http(f, "PUT", "/latest/api/token", NULL, NULL, NULL) == 400);
	printf("ok   no notice while none armed\n");
}

static void t_fire(fake *f, int which, const char *name, const char *arm, const char *again, int src,
                   uint64_t want_ns)
{
	rec r;
	rec_init(&r);
	reset(f);
	ckptd_notice_poller *p = start(f->base, which, NULL, NULL, &r);
	sleep_ms(3 * IVL);
	T_ASSERT(rec_count(&r) == 0);
	json_decref(ctl(f, "%s", arm));
	uint64_t took = wait_for(&r, 1, FIRE_MS, name);
	uint64_t at;
	ckptd_notice_event e = rec_get(&r, 0, &at);
	T_ASSERT(e.source == src);
	if (want_ns) {
		if (e.deadline_ns != want_ns)
			T_FAIL("%s: deadline %llu, expected %llu", name, (unsigned long long)e.deadline_ns,
			       (unsigned long long)want_ns);
	} else { /* GCP: 30 s from when it was seen */
		int64_t d = (int64_t)(e.deadline_ns - at) - 30000000000ll;
		if (d < -1000000000ll || d > 1000000000ll)
			T_FAIL("%s: deadline %lld ns off now + 30 s", name, (long long)d);
	}
	sleep_ms(8 * IVL);
	if (rec_count(&r) != 1)
		T_FAIL("%s: the same notice was passed on %d times", name, rec_count(&r));
	if (again) {
		/* A different notice is passed on too. */
		json_decref(ctl(f, "%s", again));
		wait_for(&r, 2, FIRE_MS, name);
		sleep_ms(5 * IVL);
		T_ASSERT(rec_count(&r) == 2);
	}
	stop(p, name);
	printf("ok   %-6s fired after %3llu ms: %s\n", name, (unsigned long long)took, e.detail);
}

static void t_azure_other_vm(fake *f)
{
	rec r;
	rec_init(&r);
	reset(f);
	ckptd_notice_poller *p = start(f->base, S_AZURE, NULL, NULL, &r);
	/* Another VM's preemption is not ours. */
	json_decref(ctl(f, "{\"azure\": \"preempt\", \"azure_resources\": [\"other-vm\"]}"));
	sleep_ms(8 * IVL);
	T_ASSERT(rec_count(&r) == 0);
	json_decref(ctl(f, "{\"azure_resources\": [\"other-vm\", \"" VM "\"], \"azure_event_id\": \"e-77\", "
	                   "\"azure_not_before\": \"\", \"azure_status\": \"Started\"}"));
	wait_for(&r, 1, FIRE_MS, "azure, started");
	uint64_t at;
	ckptd_notice_event e = rec_get(&r, 0, &at);
	T_ASSERT(e.deadline_ns <= at && at - e.deadline_ns < 2000000000ull);
	T_ASSERT(strstr(e.detail, "e-77"));
	stop(p, "azure other vm");
	printf("ok   azure: another VM's event ignored; a started one fires now\n");
}

static void write_file(const char *dir, const char *path, const char *content)
{
	char tmp[700];
	snprintf(tmp, sizeof(tmp), "%s/.trigger.tmp", dir);
	FILE *fp = fopen(tmp, "w");
	T_ASSERT(fp && fputs(content, fp) >= 0 && fclose(fp) == 0);
	T_ASSERT(rename(tmp, path) == 0);
}

static void t_trigger(void)
{
	char *dir = t_tmpdir("notice");
	char path[700];
	snprintf(path, sizeof(path), "%s/preempt", dir);
	rec r;
	rec_init(&r);
	ckptd_notice_poller *p = start(NULL, 0, path, NULL, &r);
	sleep_ms(3 * IVL);
	T_ASSERT(rec_count(&r) == 0);
	write_file(dir, path, "deadline=45\n");
	wait_for(&r, 1, FIRE_MS, "trigger deadline=45");
	uint64_t at;
	ckptd_notice_event e = rec_get(&r, 0, &at);
	int64_t d = (int64_t)(e.deadline_ns - at) - 45000000000ll;
	T_ASSERT(e.source == CKPTD_NOTICE_FILE && d > -1000000000ll && d < 1000000000ll);
	sleep_ms(5 * IVL);
	T_ASSERT(rec_count(&r) == 1);
	/* Other content: another notice. */
	write_file(dir, path, AWS_T "\n");
	wait_for(&r, 2, FIRE_MS, "trigger RFC 3339");
	T_ASSERT(rec_get(&r, 1, NULL).deadline_ns == T_NS);
	/* Gone, then there again: another notice; empty: deadline unknown. */
	T_ASSERT(unlink(path) == 0);
	sleep_ms(3 * IVL);
	write_file(dir, path, "");
	wait_for(&r, 3, FIRE_MS, "trigger again");
	T_ASSERT(rec_get(&r, 2, NULL).deadline_ns == 0);
	/* Content not understood: still a notice, deadline unknown. */
	write_file(dir, path, "soon, I think");
	wait_for(&r, 4, FIRE_MS, "trigger garbage");
	T_ASSERT(rec_get(&r, 3, NULL).deadline_ns == 0);
	/* A FIFO there must not stall the poller, nor count. */
	T_ASSERT(unlink(path) == 0 && mkfifo(path, 0600) == 0);
	sleep_ms(4 * IVL);
	T_ASSERT(rec_count(&r) == 4);
	stop(p, "trigger");
	t_rmrf(dir);
	printf("ok   trigger file: appears, changes, reappears, garbage, FIFO\n");
}

static void t_token(fake *f)
{
	rec r;
	rec_init(&r);
	reset(f);
	ckptd_notice_poller *p = start(f->base, S_AWS, NULL, NULL, &r);
	sleep_ms(3 * IVL);
	long puts0 = stat_of(f, "token_puts");
	T_ASSERT(puts0 >= 1 && stat_of(f, ACTION " 404") >= 1);
	/* Every token dies: the next GET is answered 401 and a new token fetched. */
	json_decref(ctl(f, "{\"revoke_tokens\": true}"));
	sleep_ms(4 * IVL);
	T_ASSERT(stat_of(f, ACTION " 401") >= 1);
	T_ASSERT(stat_of(f, "token_puts") > puts0);
	json_decref(ctl(f, "{\"aws\": \"terminate\", \"aws_time\": \"" AWS_T "\"}"));
	wait_for(&r, 1, FIRE_MS, "aws after 401");
	stop(p, "aws 401");

	/* Tokens granted for 1 s: renewed before they end, no 401 ever. */
	reset(f);
	json_decref(ctl(f, "{\"aws_token_ttl\": 1}"));
	p = start(f->base, S_AWS, NULL, NULL, &r);
	sleep_ms(3000);
	stop(p, "aws short ttl");
	long issued = stat_of(f, "tokens_issued"), u = stat_of(f, ACTION " 401");
	if (issued < 3 || u != 0)
		T_FAIL("1 s tokens over 3 s: %ld issued, %ld GETs refused", issued, u);

	/* A token endpoint answering garbage: no token, no GET, no notice. */
	reset(f);
	json_decref(ctl(f, "{\"aws\": \"terminate\", \"token_mode\": \"garbage\"}"));
	rec_init(&r);
	p = start(f->base, S_AWS, NULL, NULL, &r);
	sleep_ms(5 * IVL);
	T_ASSERT(rec_count(&r) == 0 && stat_of(f, "token_puts") >= 2);
	T_ASSERT(stat_of(f, ACTION " 200") == 0 && stat_of(f, ACTION " 401") == 0);
	json_decref(ctl(f, "{\"token_mode\": \"ok\"}"));
	wait_for(&r, 1, FIRE_MS, "aws after a garbage token");
	stop(p, "aws garbage token");
	printf("ok   aws token: new one after a 401; %ld tokens of 1 s in 3 s, no 401; garbage token unused\n",
	       issued);
}

static int count_lines(const char *path, const char *needle)
{
	FILE *fp = fopen(path, "r");
	T_ASSERT(fp);
	char line[2048];
	int n = 0;
	while (fgets(line, sizeof(line), fp))
		if (strstr(line, needle))
			n++;
	fclose(fp);
	return n;
}

/* All three sources armed, the endpoints hostile: no notice, one log line
 * per source, a prompt stop; then the endpoints behave and all three fire. */
static void t_hostile(fake *f, const char *mode)
{
	char *dir = t_tmpdir("notice-log");
	char logp[700];
	snprintf(logp, sizeof(logp), "%s/log", dir);
	FILE *lf = fopen(logp, "w");
	T_ASSERT(lf);
	setvbuf(lf, NULL, _IOLBF, 0);
	ckptd_log log = { CKPTD_LOG_INFO, lf };
	rec r;
	rec_init(&r);
	reset(f);
	json_decref(ctl(f, "{\"aws\": \"terminate\", \"gcp\": \"preempted\", \"azure\": \"preempt\", \"mode\": \"%s\"}",
	                mode));
	ckptd_notice_poller *p = start(f->base, S_AWS | S_GCP | S_AZURE, NULL, &log, &r);
	sleep_ms(2000);
	T_ASSERT(rec_count(&r) == 0);
	uint64_t took = stop(p, mode);
	fflush(lf);
	static const char *const names[] = { "notice aws: ", "notice gcp: ", "notice azure: " };
	for (int i = 0; i < 3; i++) {
		int n = count_lines(logp, names[i]) - 1; /* less the "polling" line */
		if (n != 1)
			T_FAIL("%s: %d failure lines from '%s' in 2 s (expected 1)", mode, n, names[i]);
	}
	T_ASSERT(stat_of(f, "redirected") == 0);
	/* The same sources, behaving: the notices come. */
	p = start(f->base, S_AWS | S_GCP | S_AZURE, NULL, NULL, &r);
	json_decref(ctl(f, "{\"mode\": \"ok\"}"));
	wait_for(&r, 3, FIRE_MS + TMO, mode);
	stop(p, mode);
	fclose(lf);
	char first[300] = "";
	FILE *fp = fopen(logp, "r");
	while (fp && fgets(first, sizeof(first), fp) && !strstr(first, "polling on"))
		;
	if (fp)
		fclose(fp);
	first[strcspn(first, "\n")] = 0;
	printf("ok   hostile %-11s no notice, stop in %3llu ms; e.g. %s\n", mode, (unsigned long long)took,
	       strstr(first, "notice ") ? strstr(first, "notice ") : first);
	t_rmrf(dir);
}

/* A listener that never accepts: connections complete in the kernel and no
 * byte ever comes back. */
static void t_blackhole(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(a);
	T_ASSERT(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 64) == 0);
	T_ASSERT(getsockname(fd, (struct sockaddr *)&a, &sl) == 0);
	char base[64];
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", ntohs(a.sin_port));
	rec r;
	rec_init(&r);
	ckptd_notice_poller *p = start(base, S_AWS | S_GCP | S_AZURE, NULL, NULL, &r);
	sleep_ms(TMO + 3 * IVL);
	uint64_t took = stop(p, "blackhole");
	T_ASSERT(rec_count(&r) == 0);
	/* Requests in flight for 10 s more: stop does not wait for them. */
	p = start_t(base, S_AWS | S_GCP | S_AZURE, NULL, NULL, &r, 10000);
	sleep_ms(300);
	uint64_t took2 = stop(p, "blackhole, 10 s timeout");
	close(fd);
	/* Nobody listening at all. */
	p = start(base, S_AWS | S_GCP | S_AZURE, NULL, NULL, &r);
	sleep_ms(3 * IVL);
	stop(p, "refused");
	T_ASSERT(rec_count(&r) == 0);
	printf("ok   a listener that never accepts: no notice, stop in %llu ms (%llu ms with requests in flight); "
	       "refused: no notice\n", (unsigned long long)took, (unsigned long long)took2);
}

static void t_config(void)
{
	static const char *const refused[] = {
		"http://10.0.0.1",    "http://192.168.1.1:80",   "ftp://127.0.0.1",  "file:///etc/passwd",
		"http://u@127.0.0.1", "http://127.0.0.1:1@x.io", "http://127.0.0.1/latest", "http://127.0.0.1?a=b",
		"http://127.0.0.1#f", "http://169.254.169.254.example.com", "http://[::2]", "gopher://127.0.0.1",
		"127.0.0.1:80",       "http://metadata.google.internal.example.com", "http:// 127.0.0.1",
	};
	static const char *const allowed[] = {
		"http://127.0.0.1:1", "http://127.0.0.1:1/", "http://[::1]:1", "https://localhost:1",
		"http://169.254.169.254", "http://[fd00:ec2::254]", "http://metadata.google.internal",
	};
	rec r;
	rec_init(&r);
	ckptd_log none = { -1, NULL };
	ckptd_notice_poller *p = (void *)1;
	ckptd_notice_cfg c = { 0 };
	T_ASSERT(ckptd_notice_start(&c, &none, on_notice, &r, &p) == -EINVAL && p == NULL);
	c.gcp_url = "http://127.0.0.1:1";
	T_ASSERT(ckptd_notice_start(&c, &none, NULL, &r, &p) == -EINVAL);
	T_ASSERT(ckptd_notice_start(NULL, &none, on_notice, &r, &p) == -EINVAL);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		for (int k = 0; k < 3; k++) {
			ckptd_notice_cfg b = { 0 };
			*(k == 0 ? &b.aws_url : k == 1 ? &b.gcp_url : &b.azure_url) = refused[i];
			b.trigger_file = "/nonexistent/trigger";
			if (ckptd_notice_start(&b, &none, on_notice, &r, &p) != -EINVAL)
				T_FAIL("base URL '%s' accepted", refused[i]);
		}
	}
	/* Accepted, even where nothing answers (or a name must be looked up, or
	 * a link-local address is unreachable): the stop is still prompt. */
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		ckptd_notice_cfg b = { 0 };
		b.aws_url = b.gcp_url = b.azure_url = allowed[i];
		b.timeout_ms = 5000;
		if (ckptd_notice_start(&b, &none, on_notice, &r, &p) != 0)
			T_FAIL("base URL '%s' refused", allowed[i]);
		sleep_ms(50);
		stop(p, allowed[i]);
	}
	ckptd_notice_stop(NULL);
	T_ASSERT(rec_count(&r) == 0);
	printf("ok   base URLs: %zu refused, %zu allowed\n", sizeof(refused) / sizeof(refused[0]),
	       sizeof(allowed) / sizeof(allowed[0]));
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	unsetenv("http_proxy");
	T_ASSERT(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK);
	/* A proxy in the environment must not be used by the pollers. */
	setenv("http_proxy", "http://127.0.0.1:9", 1);
	setenv("HTTP_PROXY", "http://127.0.0.1:9", 1);
	fake f;
	fake_start(&f);
	t_config();
	t_none(&f);
	t_fire(&f, S_AWS, "aws", "{\"aws\": \"terminate\", \"aws_time\": \"" AWS_T "\"}",
	       "{\"aws\": \"stop\"}", CKPTD_NOTICE_AWS, T_NS);
	t_fire(&f, S_GCP, "gcp", "{\"gcp\": \"preempted\"}", NULL, CKPTD_NOTICE_GCP, 0);
	t_fire(&f, S_AZURE, "azure", "{\"azure\": \"preempt\", \"azure_not_before\": \"" AZ_T "\"}",
	       "{\"azure_event_id\": \"another-event\"}", CKPTD_NOTICE_AZURE, T_NS);
	t_azure_other_vm(&f);
	t_trigger();
	t_token(&f);
	static const char *const modes[] = { "garbage", "huge", "huge_stream", "slow", "hang", "redirect", "error" };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		t_hostile(&f, modes[i]);
	t_blackhole();
	fake_stop(&f);
	curl_global_cleanup();
	printf("PASS\n");
	return T_EXIT_PASS;
}
