/* A real S3 server from a C test: the CTest run's shared Ceph gateway (the
 * s3_gateway fixture, tests/s3/CMakeLists.txt) or one of the test's own,
 * started by tests/s3/s3gw.sh; the fault-injecting proxy tests/s3/s3proxy.py
 * in front of it; and a few signed requests (libcurl's SigV4) to look at
 * what is in the bucket independently of the code under test.
 *
 *   s3gw g;
 *   s3gw_open(&g, tmp);                        the shared gateway, or a new
 *                                              one under tmp; skips (77)
 *                                              without Ceph, fails with
 *                                              CKPT_REQUIRE_S3=1
 *   char b[64]; s3gw_new_bucket(&g, "flush", b, sizeof(b));   a fresh bucket
 *   s3gw_put(&g, b, "k", data, len);  s3gw_get(&g, b, "k", &buf);
 *   s3gw_count_uploads(&g, b, "prefix/");      multipart uploads in progress
 *   s3gw extra; s3gw_gw_add(&g, "r1", &extra); a gateway of the test's own on
 *   s3gw_gw_stop(&extra, 1); s3gw_gw_start(&extra);   the same cluster: stop
 *                                              and restart it at will
 *   s3proxy p; s3proxy_start(&p, &g, tmp);     p.endpoint instead of g.endpoint
 *   s3proxy_rule(&p, "{\"kind\":\"PUT_PART\",\"action\":\"status\",\"status\":503}");
 *   s3proxy_count(&p, "lists", NULL) == 0
 *   s3proxy_stop(&p); s3gw_close(&g);
 *
 * Link with libcurl (PkgConfig::CURL). Failures end the test through T_FAIL. */
#ifndef CKPT_TEST_S3GW_HELPER_H
#define CKPT_TEST_S3GW_HELPER_H

#include "helpers.h"

#include <curl/curl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

typedef struct s3gw {
	char dir[512];      /* the cluster's state directory (s3gw.sh's S3GW_DIR) */
	char endpoint[96];  /* http://127.0.0.1:PORT */
	char host[40];
	int port;
	char region[32];
	char vhost[64];     /* BUCKET.vhost:PORT reaches the same gateway */
	char access[64];
	char secret[96];
	char other_access[64]; /* a second user, with no rights on the first one's buckets */
	char other_secret[96];
	long min_part;      /* the gateway's smallest multipart part but the last */
	char bucket[64];    /* the bucket made at start (every test should make its own) */
	char log[600];      /* this gateway's log (its access log: s3gw.sh requests) */
	char gw[20];        /* the gateway's name ("gw": the first) */
	int own;            /* started by this test (s3gw_close stops it) */
	unsigned seq;       /* s3gw_new_bucket's counter */
} s3gw;

typedef struct s3gw_buf {
	char *data;
	size_t len;
} s3gw_buf;

static inline void s3gw_buf_free(s3gw_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
}

static inline const char *s3gw_script(void)
{
	static char p[600];
	const char *d = getenv("CKPT_TEST_DATA");
	snprintf(p, sizeof(p), "%s/s3/s3gw.sh", d && *d ? d : "tests");
	if (access(p, R_OK) != 0)
		T_FAIL("no %s (CKPT_TEST_DATA: the tests' source folder)", p);
	return p;
}

/* Runs `bash s3gw.sh ARGS...` (argv NULL-terminated), stdout to out (NULL:
 * /dev/null), stderr to the test's. Returns its exit status (128+signal). */
static inline int s3gw_sh(const char *const *args, const char *out)
{
	const char *argv[32];
	int n = 0;
	argv[n++] = "bash";
	argv[n++] = s3gw_script();
	for (int i = 0; args[i]; i++) {
		if (n >= 31)
			T_FAIL("s3gw_sh: too many arguments");
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0)
			_exit(127);
		dup2(fd, 1);
		close(fd);
		execvp("bash", (char **)argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			T_FAIL("waitpid: %s", strerror(errno));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Reads s3gw.sh's KEY=VALUE environment file into g. */
static inline void s3gw_read_env(s3gw *g, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		T_FAIL("gateway environment %s: %s", path, strerror(errno));
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *v = strchr(line, '=');
		if (!v)
			continue;
		*v++ = 0;
#define S3GW_KEY(k, field) if (!strcmp(line, k)) snprintf(g->field, sizeof(g->field), "%s", v);
		S3GW_KEY("S3GW_DIR", dir)
		S3GW_KEY("S3GW_ENDPOINT", endpoint)
		S3GW_KEY("S3GW_HOST", host)
		S3GW_KEY("S3GW_REGION", region)
		S3GW_KEY("S3GW_VHOST_DOMAIN", vhost)
		S3GW_KEY("S3GW_ACCESS_KEY", access)
		S3GW_KEY("S3GW_SECRET_KEY", secret)
		S3GW_KEY("S3GW_BUCKET", bucket)
		S3GW_KEY("S3GW_OTHER_ACCESS_KEY", other_access)
		S3GW_KEY("S3GW_OTHER_SECRET_KEY", other_secret)
		S3GW_KEY("S3GW_LOG", log)
#undef S3GW_KEY
		if (!strcmp(line, "S3GW_PORT"))
			g->port = atoi(v);
		if (!strcmp(line, "S3GW_MIN_PART"))
			g->min_part = atol(v);
	}
	fclose(f);
	if (!g->dir[0] || !g->port || !g->access[0] || !g->secret[0])
		T_FAIL("%s: not a gateway environment (S3GW_DIR, S3GW_PORT, keys)", path);
	snprintf(g->gw, sizeof(g->gw), "gw");
}

/* Exits 77 (skip) where Ceph is not installed, 1 instead with
 * CKPT_REQUIRE_S3=1 (CI: tools/test.sh sets it). */
static inline void s3gw_require(void)
{
	const char *a[] = { "check", NULL };
	int rc = s3gw_sh(a, NULL);
	if (rc == T_EXIT_SKIP)
		exit(T_EXIT_SKIP);
	if (rc != 0)
		T_FAIL("no Ceph S3 gateway here (tools/deps.sh installs ceph-mon ceph-osd radosgw)");
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* A cluster of this test's own under tmp (tmp/s3gw), stopped by
 * s3gw_close or, should the test die, within a second or two of it. opts:
 * more `s3gw.sh start` arguments (NULL-terminated; NULL for none), e.g.
 * { "--set", "rgw multipart min part size = 65536", NULL }. */
static inline void s3gw_start(s3gw *g, const char *tmp, const char *const *opts)
{
	s3gw_require();
	memset(g, 0, sizeof(*g));
	char dir[600], env[640], owner[24];
	snprintf(dir, sizeof(dir), "%s/s3gw", tmp);
	snprintf(env, sizeof(env), "%s/s3gw.env", tmp);
	snprintf(owner, sizeof(owner), "%d", (int)getpid());
	const char *a[24] = { "start", "--dir", dir, "--owner", owner };
	int n = 5;
	for (int i = 0; opts && opts[i]; i++) {
		if (n >= 23)
			T_FAIL("s3gw_start: too many options");
		a[n++] = opts[i];
	}
	a[n] = NULL;
	uint64_t t0 = (uint64_t)t_now_ms();
	int rc = s3gw_sh(a, env);
	if (rc == T_EXIT_SKIP)
		exit(T_EXIT_SKIP);
	if (rc != 0)
		T_FAIL("s3gw.sh start failed (%d)", rc);
	s3gw_read_env(g, env);
	g->own = 1;
	fprintf(stderr, "s3gw: own gateway %s up in %llu ms\n", g->endpoint,
	        (unsigned long long)((uint64_t)t_now_ms() - t0));
}

/* The CTest run's shared gateway ($CKPT_S3GW_ENV, written by the
 * s3_gateway fixture), or, run outside CTest, one of the test's own (as
 * s3gw_start). Never stop or restart the shared one: s3gw_gw_add. */
static inline void s3gw_open(s3gw *g, const char *tmp)
{
	const char *env = getenv("CKPT_S3GW_ENV");
	if (env && *env && access(env, R_OK) == 0) {
		s3gw_require();
		memset(g, 0, sizeof(*g));
		s3gw_read_env(g, env);
		return;
	}
	s3gw_start(g, tmp, NULL);
}

static inline void s3gw_close(s3gw *g)
{
	if (!g->own)
		return;
	const char *a[] = { "stop", g->dir, NULL };
	if (s3gw_sh(a, NULL) != 0)
		T_FAIL("s3gw.sh stop %s failed", g->dir);
	g->own = 0;
}

/* --- signed requests (libcurl's SigV4: the query must be given in
 * canonical form, keys sorted, "uploads=" for a key without a value) --- */

static size_t s3gw_write_cb(char *p, size_t sz, size_t n, void *ud)
{
	s3gw_buf *b = ud;
	size_t k = sz * n;
	char *d = realloc(b->data, b->len + k + 1);
	if (!d)
		return 0;
	memcpy(d + b->len, p, k);
	b->data = d;
	b->len += k;
	b->data[b->len] = 0;
	return k;
}

typedef struct s3gw_body {
	const char *p;
	size_t left;
} s3gw_body;

static size_t s3gw_read_cb(char *p, size_t sz, size_t n, void *ud)
{
	s3gw_body *b = ud;
	size_t k = sz * n < b->left ? sz * n : b->left;
	memcpy(p, b->p, k);
	b->p += k;
	b->left -= k;
	return k;
}

/* One request to g's endpoint: method, path (with its query), a body (NULL:
 * none), extra headers (NULL-terminated, or NULL). The answer's body goes to
 * out (NULL: dropped). Returns the HTTP status, or -CURLcode when no answer
 * came. access/secret NULL: g's user. */
static inline long s3gw_req_as(const s3gw *g, const char *access_key, const char *secret_key,
                               const char *method, const char *path, const void *body, size_t len,
                               const char *const *hdrs, s3gw_buf *out)
{
	CURL *c = curl_easy_init();
	T_ASSERT(c);
	char url[2048], sig[96], up[256];
	snprintf(url, sizeof(url), "%s%s", g->endpoint, path);
	snprintf(sig, sizeof(sig), "aws:amz:%s:s3", g->region[0] ? g->region : "us-east-1");
	snprintf(up, sizeof(up), "%s:%s", access_key ? access_key : g->access, secret_key ? secret_key : g->secret);
	/* No "Expect:" to turn 100-continue off: curl 7.88 signs that empty
	 * header but does not send it (SignatureDoesNotMatch). */
	struct curl_slist *h = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	for (int i = 0; hdrs && hdrs[i]; i++)
		h = curl_slist_append(h, hdrs[i]);
	s3gw_buf sink = { 0 };
	s3gw_body b = { body, len };
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sig);
	curl_easy_setopt(c, CURLOPT_USERPWD, up);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, s3gw_write_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out ? out : &sink);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (!strcmp(method, "PUT") || (!strcmp(method, "POST") && body)) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, s3gw_read_cb);
		curl_easy_setopt(c, CURLOPT_READDATA, &b);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
	}
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "GET") != 0 && strcmp(method, "PUT") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (!strcmp(method, "POST") && !body) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
	}
	CURLcode rc = curl_easy_perform(c);
	long code = 0;
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	s3gw_buf_free(&sink);
	return rc == CURLE_OK ? code : -(long)rc;
}

static inline long s3gw_req(const s3gw *g, const char *method, const char *path, const void *body,
                            size_t len, const char *const *hdrs, s3gw_buf *out)
{
	return s3gw_req_as(g, NULL, NULL, method, path, body, len, hdrs, out);
}

/* A new bucket named PREFIX-PID-N-RANDOM (unique across tests and runs). */
static inline void s3gw_new_bucket(s3gw *g, const char *prefix, char *name, size_t cap)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(name, cap, "%.24s-%d-%u-%06lx", prefix, (int)getpid(), g->seq++,
	         (unsigned long)((ts.tv_nsec ^ (long)ts.tv_sec << 8) & 0xffffff));
	for (char *p = name; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	char path[128];
	snprintf(path, sizeof(path), "/%s", name);
	s3gw_buf out = { 0 };
	long st = s3gw_req(g, "PUT", path, NULL, 0, NULL, &out);
	if (st != 200)
		T_FAIL("creating bucket %s: %ld %s", name, st, out.data ? out.data : "");
	s3gw_buf_free(&out);
}

static inline long s3gw_put(const s3gw *g, const char *bucket, const char *key, const void *data, size_t len)
{
	char path[1024];
	snprintf(path, sizeof(path), "/%s/%s", bucket, key);
	return s3gw_req(g, "PUT", path, data, len, NULL, NULL);
}

static inline long s3gw_get(const s3gw *g, const char *bucket, const char *key, s3gw_buf *out)
{
	char path[1024];
	snprintf(path, sizeof(path), "/%s/%s", bucket, key);
	return s3gw_req(g, "GET", path, NULL, 0, NULL, out);
}

static inline long s3gw_delete(const s3gw *g, const char *bucket, const char *key)
{
	char path[1024];
	snprintf(path, sizeof(path), "/%s/%s", bucket, key);
	return s3gw_req(g, "DELETE", path, NULL, 0, NULL, NULL);
}

/* How many times tag ("<Key>", "<Upload>") occurs in s. */
static inline int s3gw_count_tag(const char *s, const char *tag)
{
	int n = 0;
	for (const char *p = s ? strstr(s, tag) : NULL; p; p = strstr(p + 1, tag))
		n++;
	return n;
}

/* Percent-encodes s for a query value (RFC 3986 unreserved kept). */
static inline void s3gw_qenc(const char *s, char *out, size_t cap)
{
	size_t o = 0;
	for (; *s && o + 4 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, cap - o, "%%%02X", c);
	}
	out[o] = 0;
}

/* How many tag ("<Key>", "<Upload>") elements one page (at most 1000:
 * enough for a test) of the bucket's objects, or with uploads its
 * multipart uploads, under prefix holds. */
static inline int s3gw_count_listed(const s3gw *g, const char *bucket, const char *prefix, int uploads,
                                    const char *tag)
{
	char path[1024], enc[600];
	s3gw_qenc(prefix ? prefix : "", enc, sizeof(enc));
	if (uploads)
		snprintf(path, sizeof(path), "/%s?prefix=%s&uploads=", bucket, enc);
	else
		snprintf(path, sizeof(path), "/%s?list-type=2&prefix=%s", bucket, enc);
	s3gw_buf out = { 0 };
	long st = s3gw_req(g, "GET", path, NULL, 0, NULL, &out);
	if (st != 200)
		T_FAIL("listing %s: %ld %s", path, st, out.data ? out.data : "");
	int n = s3gw_count_tag(out.data, tag);
	s3gw_buf_free(&out);
	return n;
}

/* Objects under prefix. */
static inline int s3gw_count_objects(const s3gw *g, const char *bucket, const char *prefix)
{
	return s3gw_count_listed(g, bucket, prefix, 0, "<Key>");
}

/* Multipart uploads begun and neither completed nor aborted under prefix. */
static inline int s3gw_count_uploads(const s3gw *g, const char *bucket, const char *prefix)
{
	return s3gw_count_listed(g, bucket, prefix, 1, "<Upload>");
}

/* Flips one bit of byte offset (< 0: the middle) of a stored object, in
 * place (read, flip, write back): a bit rot of the store. */
static inline void s3gw_flip_byte(const s3gw *g, const char *bucket, const char *key, long offset)
{
	s3gw_buf b = { 0 };
	long st = s3gw_get(g, bucket, key, &b);
	if (st != 200 || b.len == 0)
		T_FAIL("flip: GET %s/%s: %ld (%zu bytes)", bucket, key, st, b.len);
	size_t at = offset < 0 ? b.len / 2 : (size_t)offset;
	T_ASSERT(at < b.len);
	b.data[at] ^= 0x01;
	st = s3gw_put(g, bucket, key, b.data, b.len);
	if (st != 200)
		T_FAIL("flip: PUT %s/%s: %ld", bucket, key, st);
	s3gw_buf_free(&b);
}

/* Another S3 user of the cluster (own keys, no access to the others'
 * buckets): for the permission tests. */
static inline void s3gw_user(const s3gw *g, const char *uid, char *access_key, size_t acap,
                             char *secret_key, size_t scap)
{
	char out[700];
	snprintf(out, sizeof(out), "%s/log/user-%s.keys", g->dir, uid);
	const char *a[] = { "user", g->dir, uid, NULL };
	if (s3gw_sh(a, out) != 0)
		T_FAIL("s3gw.sh user %s failed", uid);
	size_t len;
	char *s = t_slurp(out, &len);
	char ak[128] = "", sk[128] = "";
	if (!s || sscanf(s, "%127s %127s", ak, sk) != 2)
		T_FAIL("s3gw.sh user %s: no keys", uid);
	free(s);
	unlink(out);
	snprintf(access_key, acap, "%s", ak);
	snprintf(secret_key, scap, "%s", sk);
}

/* One more gateway on g's cluster, of this test alone (its own port;
 * stopped when the test exits): out is g with its endpoint. Stop and
 * restart it with s3gw_gw_stop/s3gw_gw_start. name: lowercase letters and
 * digits; unique per cluster (the pid is added). */
static inline void s3gw_gw_add(const s3gw *g, const char *name, s3gw *out)
{
	char nm[20], owner[24], path[700];
	snprintf(nm, sizeof(nm), "%.8s%d", name, (int)getpid() % 100000000);
	snprintf(owner, sizeof(owner), "%d", (int)getpid());
	snprintf(path, sizeof(path), "%s/log/gw-add-%s.out", g->dir, nm);
	const char *a[] = { "gw-add", g->dir, nm, "--owner", owner, NULL };
	if (s3gw_sh(a, path) != 0)
		T_FAIL("s3gw.sh gw-add %s failed", nm);
	*out = *g;
	out->own = 0;
	snprintf(out->gw, sizeof(out->gw), "%s", nm);
	size_t len;
	char *s = t_slurp(path, &len);
	if (!s || sscanf(s, "http://127.0.0.1:%d", &out->port) != 1)
		T_FAIL("s3gw.sh gw-add %s: no endpoint", nm);
	free(s);
	unlink(path);
	snprintf(out->endpoint, sizeof(out->endpoint), "http://127.0.0.1:%d", out->port);
	snprintf(out->log, sizeof(out->log), "%s/log/client.rgw.%s.log", g->dir, nm);
}

/* Stops g's gateway (kill9: SIGKILL, else SIGTERM), waiting until it is
 * gone. Not the shared gateway's first one: other tests use it. */
static inline void s3gw_gw_stop(const s3gw *g, int kill9)
{
	if (!g->own && !strcmp(g->gw, "gw"))
		T_FAIL("s3gw_gw_stop: not the shared gateway (s3gw_gw_add one of the test's own)");
	const char *a[] = { "gw-stop", g->dir, g->gw, kill9 ? "--kill" : NULL, NULL };
	if (s3gw_sh(a, NULL) != 0)
		T_FAIL("s3gw.sh gw-stop %s failed", g->gw);
}

/* Starts it again on the same port; returns once it answers. */
static inline void s3gw_gw_start(const s3gw *g)
{
	const char *a[] = { "gw-start", g->dir, g->gw, NULL };
	if (s3gw_sh(a, NULL) != 0)
		T_FAIL("s3gw.sh gw-start %s failed", g->gw);
}

/* --- the fault-injecting proxy (tests/s3/s3proxy.py) --------------------- */

typedef struct s3proxy {
	pid_t pid;
	int port;
	char endpoint[64];  /* http://127.0.0.1:PORT: use it instead of the gateway's */
	char log[600];      /* its stderr */
} s3proxy;

/* A proxy in front of g's gateway, started under dir (its log there); it
 * dies with the test. */
static inline void s3proxy_start(s3proxy *p, const s3gw *g, const char *dir)
{
	memset(p, 0, sizeof(*p));
	char py[600], up[64], owner[24], portf[600];
	const char *d = getenv("CKPT_TEST_DATA");
	snprintf(py, sizeof(py), "%s/s3/s3proxy.py", d && *d ? d : "tests");
	snprintf(up, sizeof(up), "127.0.0.1:%d", g->port);
	snprintf(owner, sizeof(owner), "%d", (int)getpid());
	snprintf(p->log, sizeof(p->log), "%s/s3proxy-%d.log", dir, g->port);
	snprintf(portf, sizeof(portf), "%s/s3proxy-%d.port", dir, g->port);
	unlink(portf);
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		int in = open("/dev/null", O_RDONLY);
		int o = open(portf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(p->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (in < 0 || o < 0 || e < 0)
			_exit(127);
		dup2(in, 0);
		dup2(o, 1);
		dup2(e, 2);
		for (int i = 3; i < 1024; i++)
			close(i);
		execlp("python3", "python3", py, "--upstream", up, "--owner", owner, (char *)NULL);
		_exit(127);
	}
	p->pid = pid;
	int64_t end = t_now_ms() + 20000;
	while (t_now_ms() < end) {
		size_t len = 0;
		char *s = t_slurp(portf, &len);
		if (s && len && strchr(s, '\n')) {
			p->port = atoi(s);
			free(s);
			break;
		}
		free(s);
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			T_FAIL("s3proxy.py exited at start (log %s)", p->log);
		usleep(20000);
	}
	if (!p->port)
		T_FAIL("s3proxy.py did not say its port in 20 s (log %s)", p->log);
	snprintf(p->endpoint, sizeof(p->endpoint), "http://127.0.0.1:%d", p->port);
}

/* A control request; the answer's body to out (NULL: dropped). Returns the
 * HTTP status. */
static inline long s3proxy_ctl(const s3proxy *p, const char *method, const char *path, const char *json,
                               s3gw_buf *out)
{
	CURL *c = curl_easy_init();
	T_ASSERT(c);
	char url[1024];
	snprintf(url, sizeof(url), "%s%s", p->endpoint, path);
	s3gw_buf sink = { 0 };
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, s3gw_write_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out ? out : &sink);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 660L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (json)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	CURLcode rc = curl_easy_perform(c);
	long code = 0;
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	s3gw_buf_free(&sink);
	if (rc != CURLE_OK)
		T_FAIL("s3proxy %s %s: %s", method, path, curl_easy_strerror(rc));
	return code;
}

/* Adds a rule (JSON, tests/s3/s3proxy.py describes them); returns its id. */
static inline int s3proxy_rule(const s3proxy *p, const char *json)
{
	s3gw_buf out = { 0 };
	long st = s3proxy_ctl(p, "POST", "/_proxy/rule", json, &out);
	int id = 0;
	if (st != 200 || !out.data || sscanf(out.data, "{\"id\": %d", &id) != 1)
		T_FAIL("s3proxy rule %s: %ld %s", json, st, out.data ? out.data : "");
	s3gw_buf_free(&out);
	return id;
}

static inline void s3proxy_clear(const s3proxy *p)
{
	T_ASSERT(s3proxy_ctl(p, "DELETE", "/_proxy/rules", NULL, NULL) == 200);
}

/* No rules, every counter zero. */
static inline void s3proxy_reset(const s3proxy *p)
{
	T_ASSERT(s3proxy_ctl(p, "POST", "/_proxy/reset", NULL, NULL) == 200);
}

/* Lets every request held by a "hold" rule go on. */
static inline void s3proxy_release(const s3proxy *p)
{
	T_ASSERT(s3proxy_ctl(p, "POST", "/_proxy/release", NULL, NULL) == 200);
}

/* Requests of kind done (kind: a kind, "lists", "requests", "held"); with
 * status: only those answered with it ("503"). */
static inline long s3proxy_count(const s3proxy *p, const char *kind, const char *status)
{
	char path[256];
	snprintf(path, sizeof(path), "/_proxy/count?kind=%s%s%s", kind, status ? "&status=" : "",
	         status ? status : "");
	s3gw_buf out = { 0 };
	long st = s3proxy_ctl(p, "GET", path, NULL, &out);
	if (st != 200 || !out.data)
		T_FAIL("s3proxy count %s: %ld", kind, st);
	long n = atol(out.data);
	s3gw_buf_free(&out);
	return n;
}

/* Waits until count requests of kind have arrived (their heads read; kind
 * "held": held now). 0, or -ETIMEDOUT after timeout_s. */
static inline int s3proxy_wait(const s3proxy *p, const char *kind, int count, int timeout_s)
{
	char path[256];
	snprintf(path, sizeof(path), "/_proxy/wait?kind=%s&count=%d&timeout=%d", kind, count, timeout_s);
	long st = s3proxy_ctl(p, "GET", path, NULL, NULL);
	if (st == 408)
		return -ETIMEDOUT;
	if (st != 200)
		T_FAIL("s3proxy wait %s: %ld", kind, st);
	return 0;
}

static inline void s3proxy_stop(s3proxy *p)
{
	if (p->pid <= 0)
		return;
	kill(p->pid, SIGTERM);
	int st;
	int64_t end = t_now_ms() + 5000;
	while (waitpid(p->pid, &st, WNOHANG) == 0) {
		if (t_now_ms() > end) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &st, 0);
			break;
		}
		usleep(10000);
	}
	p->pid = 0;
}

#endif
