/* The S3 client (storage/s3.h) against the shared Ceph gateway: PUT and
 * GET, the conditional PUT of a commit marker, multipart uploads with
 * parts in flight and their memory bound, byte-exact ranged GETs, HEAD,
 * list paging, batched deletes, listing and aborting multipart uploads;
 * through the fault proxy: 503 SlowDown and 500 on parts, a stall, reset
 * connections and short bodies retried, bodies damaged on their way
 * refused by the gateway and sent again (never stored), a retry bound
 * that runs out, an upload cancelled from another thread; and
 * refusals that say why: wrong key id, wrong secret, a skewed clock, a
 * missing bucket, no permission, with no secret in any message. What is
 * in the bucket is checked with the harness's own requests. */
#include "ckpt.h"
#include "s3gw_helper.h"
#include "s3.h"

#include <pthread.h>

static s3gw g;
static char bucket[64];

static ckpt_s3 *client(const char *endpoint, const ckpt_s3_cfg *base)
{
	ckpt_s3_cfg cfg;
	if (base)
		cfg = *base;
	else
		memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	cfg.endpoint = endpoint ? endpoint : g.endpoint;
	cfg.region = g.region[0] ? g.region : NULL;
	cfg.no_imds = 1;
	ckpt_s3 *s3 = NULL;
	char err[512];
	if (ckpt_s3_open(&s3, &cfg, err, sizeof(err)) < 0)
		T_FAIL("ckpt_s3_open: %s", err);
	return s3;
}

static void keys_as(const char *access, const char *secret)
{
	setenv("AWS_ACCESS_KEY_ID", access, 1);
	setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
}

/* The byte at offset off of object seed's content. */
static unsigned char byte_at(uint64_t seed, uint64_t off)
{
	uint64_t x = (off / 8 + 1) * 0x9e3779b97f4a7c15ull ^ seed;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return (unsigned char)(x >> (8 * (off % 8)));
}

typedef struct src {
	uint64_t seed;
	int calls, fail_at_call;
	uint64_t covered;
} src;

static int fill(void *arg, uint64_t off, void *buf, size_t len)
{
	src *s = arg;
	if (++s->calls == s->fail_at_call)
		return -EIO;
	for (size_t i = 0; i < len; i++)
		((unsigned char *)buf)[i] = byte_at(s->seed, off + i);
	s->covered += len;
	return 0;
}

static void check_object(const char *key, uint64_t seed, uint64_t len)
{
	s3gw_buf b = { 0 };
	T_ASSERT(s3gw_get(&g, bucket, key, &b) == 200);
	if (b.len != len)
		T_FAIL("%s: %zu bytes stored, %llu sent", key, b.len, (unsigned long long)len);
	for (uint64_t i = 0; i < len; i++)
		if ((unsigned char)b.data[i] != byte_at(seed, i))
			T_FAIL("%s: byte %llu differs", key, (unsigned long long)i);
	s3gw_buf_free(&b);
}

typedef struct names {
	int n;
	char k[64][96];
	uint64_t size[64];
} names;

static int on_key(void *arg, const char *key, uint64_t size)
{
	names *l = arg;
	if (l->n < 64) {
		snprintf(l->k[l->n], sizeof(l->k[0]), "%s", key);
		l->size[l->n] = size;
	}
	l->n++;
	return 0;
}

typedef struct ups {
	int n;
	char key[8][96];
	char id[8][256];
} ups;

static int on_upload(void *arg, const char *key, const char *id)
{
	ups *u = arg;
	if (u->n < 8) {
		snprintf(u->key[u->n], sizeof(u->key[0]), "%s", key);
		snprintf(u->id[u->n], sizeof(u->id[0]), "%s", id);
	}
	u->n++;
	return 0;
}

static void basics(void)
{
	char err[512];
	ckpt_s3 *s3 = client(NULL, NULL);
	const char *msg = "a small object";
	T_OK(ckpt_s3_put(s3, bucket, "small/one", msg, strlen(msg), 0, err, sizeof(err)));
	s3gw_buf b = { 0 };
	T_ASSERT(s3gw_get(&g, bucket, "small/one", &b) == 200 && b.len == strlen(msg) && !memcmp(b.data, msg, b.len));
	s3gw_buf_free(&b);
	/* an empty object, and a key S3 must encode */
	T_OK(ckpt_s3_put(s3, bucket, "small/empty", NULL, 0, 0, err, sizeof(err)));
	const char *odd = "small/a b+c=d&e%f~(g)/é.bin";
	T_OK(ckpt_s3_put(s3, bucket, odd, "x", 1, 0, err, sizeof(err)));
	uint64_t size = 99;
	T_OK(ckpt_s3_head(s3, bucket, odd, &size, err, sizeof(err)));
	T_ASSERT(size == 1);
	T_OK(ckpt_s3_head(s3, bucket, "small/empty", &size, err, sizeof(err)));
	T_ASSERT(size == 0);
	T_OK(ckpt_s3_head(s3, bucket, "small/one", &size, err, sizeof(err)));
	T_ASSERT(size == strlen(msg));
	T_ASSERT(ckpt_s3_head(s3, bucket, "small/none", &size, err, sizeof(err)) == -ENOENT);
	T_ASSERT(strstr(err, "no such key"));

	/* the commit marker: the second conditional PUT loses, the first stays */
	T_OK(ckpt_s3_put(s3, bucket, "small/marker", "first", 5, CKPT_S3_IF_NONE_MATCH, err, sizeof(err)));
	T_ASSERT(ckpt_s3_put(s3, bucket, "small/marker", "second", 6, CKPT_S3_IF_NONE_MATCH, err, sizeof(err)) == -EEXIST);
	T_ASSERT(strstr(err, "exists"));
	T_ASSERT(s3gw_get(&g, bucket, "small/marker", &b) == 200 && b.len == 5 && !memcmp(b.data, "first", 5));
	s3gw_buf_free(&b);
	T_OK(ckpt_s3_put(s3, bucket, "small/marker", "first", 5, CKPT_S3_IF_NONE_MATCH, err, sizeof(err))); /* same bytes */
	T_ASSERT(ckpt_s3_put(s3, bucket, "small/marker", "firs", 4, CKPT_S3_IF_NONE_MATCH, err, sizeof(err)) == -EEXIST);
	ckpt_s3_stats st;
	ckpt_s3_stats_get(s3, &st);
	T_ASSERT(st.requests >= 11 && st.retries == 0 && st.lists == 0 && st.bytes_up >= 5 + strlen(msg));
	ckpt_s3_close(s3);

	/* virtual-host addressing: BUCKET.domain:port reaches the same gateway */
	if (g.vhost[0]) {
		char ep[128];
		snprintf(ep, sizeof(ep), "http://%s:%d", g.vhost, g.port);
		ckpt_s3_cfg cfg = { 0 };
		cfg.addressing = 2;
		s3 = client(ep, &cfg);
		T_OK(ckpt_s3_put(s3, bucket, "small/vhost", "vh", 2, 0, err, sizeof(err)));
		T_OK(ckpt_s3_head(s3, bucket, odd, &size, err, sizeof(err)));
		T_ASSERT(size == 1);
		names l = { 0 };
		T_OK(ckpt_s3_list(s3, bucket, "small/", NULL, on_key, &l, err, sizeof(err)));
		T_ASSERT(l.n == 5);
		ckpt_s3_close(s3);
		T_ASSERT(s3gw_get(&g, bucket, "small/vhost", &b) == 200 && b.len == 2 && !memcmp(b.data, "vh", 2));
		s3gw_buf_free(&b);
	}
	printf("ok: PUT, HEAD, conditional PUT, path and virtual-host addressing\n");
}

static void multipart(void)
{
	char err[512];
	ckpt_s3_cfg cfg = { 0 };
	uint64_t part = g.min_part > (1 << 20) ? (uint64_t)g.min_part : 1u << 20;
	cfg.part_bytes = part;
	cfg.parts_in_flight = 3;
	ckpt_s3 *s3 = client(NULL, &cfg);
	uint64_t len = 5 * part + 12345;
	src s = { .seed = 11 };
	int64_t t0 = t_now_ms();
	T_OK(ckpt_s3_upload(s3, bucket, "mp/five", len, fill, &s, err, sizeof(err)));
	T_ASSERT(s.calls == 6 && s.covered == len);
	ckpt_s3_stats st;
	ckpt_s3_stats_get(s3, &st);
	T_ASSERT(st.part_bytes_peak > 0 && st.part_bytes_peak <= 3 * part);
	printf("ok: a %llu-byte upload of 6 parts, 3 in flight, in %lld ms, part buffers at most %llu bytes\n",
	       (unsigned long long)len, (long long)(t_now_ms() - t0), (unsigned long long)st.part_bytes_peak);
	check_object("mp/five", 11, len);
	/* Its part buffers stay for the next upload, which takes no more, until trimmed. */
	T_ASSERT(st.part_bytes_held == 3 * part);
	src s2 = { .seed = 12 };
	T_OK(ckpt_s3_upload(s3, bucket, "mp/again", len, fill, &s2, err, sizeof(err)));
	ckpt_s3_stats_get(s3, &st);
	T_ASSERT(st.part_bytes_held == 3 * part && st.part_bytes_peak == 3 * part);
	check_object("mp/again", 12, len);
	ckpt_s3_trim(s3);
	ckpt_s3_stats_get(s3, &st);
	T_ASSERT(st.part_bytes_held == 0);
	printf("ok: the part buffers kept for the next upload, freed by ckpt_s3_trim\n");
	T_ASSERT(s3gw_count_uploads(&g, bucket, "mp/") == 0);
	uint64_t size = 0;
	T_OK(ckpt_s3_head(s3, bucket, "mp/five", &size, err, sizeof(err)));
	T_ASSERT(size == len);

	/* ranged GETs: edges, tiny and part-sized ranges, in parallel */
	uint64_t offs[][2] = { { 0, 1 }, { len - 1, 1 }, { 0, len }, { part - 3, 7 }, { 2 * part, part },
		               { 12345, 100000 }, { len - 777, 777 }, { 3 * part + 5, 2 * part } };
	size_t n = sizeof(offs) / sizeof(offs[0]);
	ckpt_s3_range r[8];
	for (size_t i = 0; i < n; i++) {
		r[i].off = offs[i][0];
		r[i].len = offs[i][1];
		r[i].buf = malloc(r[i].len);
		memset(r[i].buf, 0xee, r[i].len);
	}
	T_OK(ckpt_s3_get_ranges(s3, bucket, "mp/five", r, n, err, sizeof(err)));
	for (size_t i = 0; i < n; i++) {
		for (uint64_t j = 0; j < r[i].len; j++)
			if (((unsigned char *)r[i].buf)[j] != byte_at(11, r[i].off + j))
				T_FAIL("range %zu (%llu+%llu): byte %llu differs", i, (unsigned long long)r[i].off,
				       (unsigned long long)r[i].len, (unsigned long long)j);
		free(r[i].buf);
	}
	/* past the end: an error, not a short success */
	char tail[16];
	ckpt_s3_range past = { len - 8, 16, tail };
	T_ASSERT(ckpt_s3_get_ranges(s3, bucket, "mp/five", &past, 1, err, sizeof(err)) == -EIO);
	ckpt_s3_range beyond = { len + 10, 4, tail };
	T_ASSERT(ckpt_s3_get_ranges(s3, bucket, "mp/five", &beyond, 1, err, sizeof(err)) < 0);
	T_ASSERT(ckpt_s3_get_ranges(s3, bucket, "mp/none", r, 1, err, sizeof(err)) == -ENOENT);

	/* the data source fails at the third part: an error, and no upload left */
	src bad = { .seed = 12, .fail_at_call = 3 };
	T_ASSERT(ckpt_s3_upload(s3, bucket, "mp/failed", len, fill, &bad, err, sizeof(err)) == -EIO);
	T_ASSERT(strstr(err, "data source"));
	T_ASSERT(s3gw_count_uploads(&g, bucket, "mp/") == 0);
	T_ASSERT(ckpt_s3_head(s3, bucket, "mp/failed", &size, err, sizeof(err)) == -ENOENT);
	/* a small one goes in one PUT */
	src one = { .seed = 13 };
	T_OK(ckpt_s3_upload(s3, bucket, "mp/single", 1000, fill, &one, err, sizeof(err)));
	T_ASSERT(one.calls == 1);
	check_object("mp/single", 13, 1000);
	ckpt_s3_close(s3);

	/* memory stays at parts_in_flight x part_bytes whatever the size */
	cfg.part_bytes = 1u << 20 > part ? 1u << 20 : part;
	cfg.parts_in_flight = 2;
	s3 = client(NULL, &cfg);
	src big = { .seed = 14 };
	uint64_t blen = 24 * cfg.part_bytes + 1;
	T_OK(ckpt_s3_upload(s3, bucket, "mp/big", blen, fill, &big, err, sizeof(err)));
	ckpt_s3_stats_get(s3, &st);
	T_ASSERT(st.part_bytes_peak <= 2 * cfg.part_bytes && big.covered == blen);
	T_OK(ckpt_s3_head(s3, bucket, "mp/big", &size, err, sizeof(err)));
	T_ASSERT(size == blen);
	printf("ok: a %llu-byte upload held at most %llu bytes of parts (2 x %llu)\n", (unsigned long long)blen,
	       (unsigned long long)st.part_bytes_peak, (unsigned long long)cfg.part_bytes);
	ckpt_s3_close(s3);
}

static void listing(void)
{
	char err[512], key[96];
	ckpt_s3_cfg cfg = { 0 };
	cfg.list_page = 7;
	cfg.delete_batch = 10;
	ckpt_s3 *s3 = client(NULL, &cfg);
	const char *keys[40];
	static char kbuf[40][96];
	int nk = 0;
	for (int i = 0; i < 25; i++) {
		snprintf(kbuf[nk], sizeof(kbuf[0]), "list/k%02d", i);
		T_OK(ckpt_s3_put(s3, bucket, kbuf[nk], kbuf[nk], (size_t)i, 0, err, sizeof(err)));
		keys[nk] = kbuf[nk];
		nk++;
	}
	snprintf(kbuf[nk], sizeof(kbuf[0]), "list/sub/x");
	T_OK(ckpt_s3_put(s3, bucket, kbuf[nk], "xyz", 3, 0, err, sizeof(err)));
	keys[nk] = kbuf[nk];
	nk++;
	ckpt_s3_stats st0, st1;
	ckpt_s3_stats_get(s3, &st0);
	names l = { 0 };
	T_OK(ckpt_s3_list(s3, bucket, "list/", NULL, on_key, &l, err, sizeof(err)));
	ckpt_s3_stats_get(s3, &st1);
	T_ASSERT(l.n == 26 && st1.lists - st0.lists == 4); /* 26 keys, 7 a page */
	for (int i = 0; i < 25; i++) {
		snprintf(key, sizeof(key), "list/k%02d", i);
		T_ASSERT(!strcmp(l.k[i], key) && l.size[i] == (uint64_t)i);
	}
	T_ASSERT(!strcmp(l.k[25], "list/sub/x") && l.size[25] == 3);
	names d = { 0 };
	T_OK(ckpt_s3_list(s3, bucket, "list/", "/", on_key, &d, err, sizeof(err)));
	int subs = 0;
	for (int i = 0; i < d.n && i < 64; i++)
		subs += !strcmp(d.k[i], "list/sub/") && d.size[i] == 0;
	T_ASSERT(d.n == 26 && subs == 1);
	names none = { 0 };
	T_OK(ckpt_s3_list(s3, bucket, "nothing/", NULL, on_key, &none, err, sizeof(err)));
	T_ASSERT(none.n == 0);
	T_ASSERT(ckpt_s3_list(s3, "no-such-bucket-s3c", "", NULL, on_key, &none, err, sizeof(err)) == -ENXIO);

	/* deletes in batches of 10, keys already gone are no error */
	keys[nk++] = "list/never-was";
	keys[nk++] = "list/k00";
	ckpt_s3_stats_get(s3, &st0);
	T_OK(ckpt_s3_delete(s3, bucket, keys, (size_t)nk, err, sizeof(err)));
	ckpt_s3_stats_get(s3, &st1);
	T_ASSERT(st1.requests - st0.requests == 3);
	T_ASSERT(s3gw_count_objects(&g, bucket, "list/") == 0);
	T_OK(ckpt_s3_delete(s3, bucket, keys, 3, err, sizeof(err)));

	/* multipart uploads in progress: listed (paged) and aborted */
	char path[256];
	for (int i = 0; i < 9; i++) {
		snprintf(path, sizeof(path), "/%s/up/k%d?uploads=", bucket, i);
		T_ASSERT(s3gw_req(&g, "POST", path, NULL, 0, NULL, NULL) == 200);
	}
	ups u = { 0 };
	T_OK(ckpt_s3_list_uploads(s3, bucket, "up/", on_upload, &u, err, sizeof(err)));
	T_ASSERT(u.n == 9 && !strcmp(u.key[0], "up/k0") && u.id[0][0]);
	ups u2 = { 0 };
	T_OK(ckpt_s3_list_uploads(s3, bucket, "up/k1", on_upload, &u2, err, sizeof(err)));
	T_ASSERT(u2.n == 1);
	for (int i = 0; i < 8; i++)
		T_OK(ckpt_s3_abort(s3, bucket, u.key[i], u.id[i], err, sizeof(err)));
	T_ASSERT(s3gw_count_uploads(&g, bucket, "up/") == 1);
	T_ASSERT(ckpt_s3_abort(s3, bucket, u.key[0], u.id[0], err, sizeof(err)) == -ENOENT);
	u.n = 0;
	T_OK(ckpt_s3_list_uploads(s3, bucket, "up/", on_upload, &u, err, sizeof(err)));
	T_ASSERT(u.n == 1 && !strcmp(u.key[0], "up/k8"));
	T_OK(ckpt_s3_abort(s3, bucket, u.key[0], u.id[0], err, sizeof(err)));
	T_ASSERT(s3gw_count_uploads(&g, bucket, "") == 0);
	ckpt_s3_close(s3);
	printf("ok: list pages, batched deletes, multipart uploads listed and aborted\n");
}

/* One client, several threads at once: each its own objects, uploads and
 * reads, all whole. */
typedef struct worker {
	ckpt_s3 *s3;
	int id, rc;
	char err[512];
} worker;

static void *work(void *arg)
{
	worker *w = arg;
	char key[64];
	uint64_t len = 3 * (1u << 20) + 17;
	for (int i = 0; i < 3 && !w->rc; i++) {
		snprintf(key, sizeof(key), "threads/w%d-%d", w->id, i);
		src s = { .seed = (uint64_t)(100 + w->id * 10 + i) };
		if ((w->rc = ckpt_s3_upload(w->s3, bucket, key, len, fill, &s, w->err, sizeof(w->err))) < 0)
			break;
		unsigned char *buf = malloc(len);
		ckpt_s3_range r[2] = { { 0, len / 2, buf }, { len / 2, len - len / 2, buf + len / 2 } };
		if ((w->rc = ckpt_s3_get_ranges(w->s3, bucket, key, r, 2, w->err, sizeof(w->err))) == 0)
			for (uint64_t j = 0; j < len; j++)
				if (buf[j] != byte_at(s.seed, j)) {
					snprintf(w->err, sizeof(w->err), "%s: byte %llu differs", key, (unsigned long long)j);
					w->rc = -EIO;
					break;
				}
		free(buf);
	}
	return NULL;
}

static void threads(void)
{
	ckpt_s3_cfg cfg = { 0 };
	cfg.part_bytes = 1u << 20;
	cfg.parts_in_flight = 2;
	ckpt_s3 *s3 = client(NULL, &cfg);
	worker w[4];
	pthread_t t[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (worker){ s3, i, 0, "" };
		T_ASSERT(pthread_create(&t[i], NULL, work, &w[i]) == 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		if (w[i].rc)
			T_FAIL("thread %d: %s", i, w[i].err);
	}
	ckpt_s3_stats st;
	ckpt_s3_stats_get(s3, &st);
	T_ASSERT(st.part_bytes_peak <= 4 * 2 * cfg.part_bytes);
	ckpt_s3_close(s3);
	printf("ok: 4 threads on one client: 12 uploads and their reads\n");
}

struct canceller {
	ckpt_s3 *s3;
	int after_ms;
};

static void *cancel_main(void *arg)
{
	struct canceller *c = arg;
	usleep((useconds_t)c->after_ms * 1000);
	ckpt_s3_cancel(c->s3, 1);
	return NULL;
}

static void faults(const char *tmp)
{
	char err[512];
	s3proxy p;
	s3proxy_start(&p, &g, tmp);
	ckpt_s3_cfg cfg = { 0 };
	uint64_t part = g.min_part > (1 << 20) ? (uint64_t)g.min_part : 1u << 20;
	cfg.part_bytes = part;
	cfg.parts_in_flight = 2;
	cfg.timeout_ms = 1000;
	cfg.retry_total_ms = 20000;
	ckpt_s3 *s3 = client(p.endpoint, &cfg);
	uint64_t len = 4 * part + 99;

	/* 503 SlowDown twice and a 500 on parts: retried, the upload completes */
	s3proxy_rule(&p, "{\"kind\":\"PUT_PART\",\"action\":\"status\",\"status\":503,\"times\":2}");
	s3proxy_rule(&p, "{\"kind\":\"PUT_PART\",\"action\":\"status\",\"status\":500,\"skip\":1,\"times\":1}");
	src s = { .seed = 21 };
	T_OK(ckpt_s3_upload(s3, bucket, "faults/slowdown", len, fill, &s, err, sizeof(err)));
	T_ASSERT(s3proxy_count(&p, "PUT_PART", "503") == 2 && s3proxy_count(&p, "PUT_PART", "500") == 1);
	ckpt_s3_stats st;
	ckpt_s3_stats_get(s3, &st);
	T_ASSERT(st.retries == 3);
	check_object("faults/slowdown", 21, len);
	printf("ok: 503 SlowDown x2 and a 500 on parts retried\n");

	/* a stalled answer: given up after the timeout, retried */
	s3proxy_reset(&p);
	s3proxy_rule(&p, "{\"kind\":\"GET_RANGE\",\"action\":\"stall\",\"seconds\":8,\"times\":1}");
	char *buf = malloc(part);
	ckpt_s3_range r = { part, part, buf };
	int64_t t0 = t_now_ms();
	T_OK(ckpt_s3_get_ranges(s3, bucket, "faults/slowdown", &r, 1, err, sizeof(err)));
	int64_t dt = t_now_ms() - t0;
	for (uint64_t j = 0; j < part; j++)
		T_ASSERT((unsigned char)buf[j] == byte_at(21, part + j));
	T_ASSERT(dt < 6000 && s3proxy_count(&p, "GET_RANGE", NULL) >= 1);
	printf("ok: a stalled GET given up and retried (%lld ms)\n", (long long)dt);

	/* reset connections, mid-request and mid-answer; a short body */
	s3proxy_reset(&p);
	s3proxy_rule(&p, "{\"kind\":\"PUT_PART\",\"action\":\"reset\",\"when\":\"mid_request\",\"bytes\":10000,\"times\":1}");
	s3proxy_rule(&p, "{\"kind\":\"GET_RANGE\",\"action\":\"reset\",\"when\":\"mid_response\",\"bytes\":1000,\"times\":1}");
	s3proxy_rule(&p, "{\"kind\":\"GET_RANGE\",\"action\":\"truncate\",\"bytes\":500,\"times\":1}");
	s3proxy_rule(&p, "{\"kind\":\"PUT\",\"action\":\"close\",\"when\":\"after\",\"times\":1}");
	src s2 = { .seed = 22 };
	ckpt_s3_stats_get(s3, &st);
	uint64_t retries0 = st.retries;
	T_OK(ckpt_s3_upload(s3, bucket, "faults/reset", len, fill, &s2, err, sizeof(err)));
	T_OK(ckpt_s3_get_ranges(s3, bucket, "faults/reset", &r, 1, err, sizeof(err)));
	for (uint64_t j = 0; j < part; j++)
		T_ASSERT((unsigned char)buf[j] == byte_at(22, part + j));
	T_OK(ckpt_s3_get_ranges(s3, bucket, "faults/reset", &r, 1, err, sizeof(err)));
	T_OK(ckpt_s3_put(s3, bucket, "faults/closed", "abc", 3, 0, err, sizeof(err)));
	ckpt_s3_stats_get(s3, &st);
	/* Each fault cost a try: the client's own retries for the answers
	 * broken after they began, curl's for a reused connection that died
	 * before any answer (the reset mid-request, the close). */
	T_ASSERT(st.retries - retries0 >= 2);
	T_ASSERT(s3proxy_count(&p, "PUT_PART", NULL) == 6 && s3proxy_count(&p, "PUT", NULL) == 2);
	T_ASSERT(s3proxy_count(&p, "GET_RANGE", NULL) == 4);
	check_object("faults/reset", 22, len);
	printf("ok: connections reset mid-request and mid-answer, a short body, a close: retried\n");

	/* a byte flipped on its way in a part and in a single PUT: the gateway
	 * checks each body against its signed SHA-256 (no Content-MD5 is sent:
	 * the default), refuses it, and the client sends the same bytes again;
	 * the objects are the source's bytes. With Content-MD5 on, the same. */
	for (int md5 = 0; md5 <= 1; md5++) {
		ckpt_s3_cfg mc = cfg;
		mc.content_md5 = md5;
		ckpt_s3 *c = client(p.endpoint, &mc);
		s3proxy_reset(&p);
		s3proxy_rule(&p, "{\"kind\":\"PUT_PART\",\"action\":\"corrupt\",\"when\":\"request\",\"skip\":1,"
		                 "\"times\":1}");
		s3proxy_rule(&p, "{\"kind\":\"PUT\",\"action\":\"corrupt\",\"when\":\"request\",\"offset\":7,\"times\":1}");
		char key[64], one[64];
		snprintf(key, sizeof(key), "faults/flipped-%d", md5);
		snprintf(one, sizeof(one), "faults/flipped-one-%d", md5);
		src sf = { .seed = 24 }, so = { .seed = 25 };
		T_OK(ckpt_s3_upload(c, bucket, key, len, fill, &sf, err, sizeof(err)));
		T_OK(ckpt_s3_upload(c, bucket, one, part / 2, fill, &so, err, sizeof(err)));
		T_ASSERT(s3proxy_count(&p, "PUT_PART", "400") == 1 && s3proxy_count(&p, "PUT", "400") == 1);
		T_ASSERT(s3proxy_count(&p, "PUT_PART", "200") == 5 && s3proxy_count(&p, "PUT", "200") == 1);
		ckpt_s3_stats_get(c, &st);
		T_ASSERT(st.retries == 2);
		check_object(key, 24, len);
		check_object(one, 25, part / 2);
		ckpt_s3_close(c);
	}
	printf("ok: a part and a PUT damaged on their way refused by the gateway and sent again\n");

	/* a commit marker whose answer is lost (stored, then the connection
	 * closed): the retry finds the key there with its bytes, which is 0;
	 * another writer's bytes there stay -EEXIST */
	s3proxy_reset(&p);
	s3proxy_rule(&p, "{\"kind\":\"PUT\",\"action\":\"close\",\"when\":\"after\",\"times\":1}");
	T_OK(ckpt_s3_put(s3, bucket, "faults/marker", "commit", 6, CKPT_S3_IF_NONE_MATCH, err, sizeof(err)));
	T_ASSERT(s3proxy_count(&p, "PUT", NULL) == 2 && s3proxy_count(&p, "PUT", "412") == 1);
	T_ASSERT(ckpt_s3_put(s3, bucket, "faults/marker", "other", 5, CKPT_S3_IF_NONE_MATCH, err, sizeof(err)) == -EEXIST);
	s3gw_buf mb = { 0 };
	T_ASSERT(s3gw_get(&g, bucket, "faults/marker", &mb) == 200 && mb.len == 6 && !memcmp(mb.data, "commit", 6));
	s3gw_buf_free(&mb);
	printf("ok: a conditional PUT whose answer was lost is found done\n");

	/* the retry bound runs out: -ETIMEDOUT, and the upload is aborted */
	ckpt_s3_close(s3);
	cfg.retry_total_ms = 1500;
	s3 = client(p.endpoint, &cfg);
	s3proxy_reset(&p);
	s3proxy_rule(&p, "{\"kind\":\"PUT_PART\",\"action\":\"status\",\"status\":503,\"times\":0}");
	src s3src = { .seed = 23 };
	t0 = t_now_ms();
	T_ASSERT(ckpt_s3_upload(s3, bucket, "faults/never", len, fill, &s3src, err, sizeof(err)) == -ETIMEDOUT);
	dt = t_now_ms() - t0;
	T_ASSERT(strstr(err, "gave up") && strstr(err, "SlowDown"));
	T_ASSERT(dt < 5000);
	printf("ok: the retry bound ran out in %lld ms: %s\n", (long long)dt, err);
	/* a part damaged at every try: refused every time, the upload fails
	 * naming why, is aborted, and no object is there */
	s3proxy_reset(&p);
	s3proxy_rule(&p, "{\"kind\":\"PUT_PART\",\"action\":\"corrupt\",\"when\":\"request\",\"times\":0}");
	src sb = { .seed = 26 };
	T_ASSERT(ckpt_s3_upload(s3, bucket, "faults/damaged", len, fill, &sb, err, sizeof(err)) == -ETIMEDOUT);
	T_ASSERT(strstr(err, "XAmzContentSHA256Mismatch"));
	T_ASSERT(ckpt_s3_head(s3, bucket, "faults/damaged", NULL, err, sizeof(err)) == -ENOENT);
	printf("ok: a part damaged at every try never stored\n");
	s3proxy_reset(&p);
	T_ASSERT(s3gw_count_uploads(&g, bucket, "faults/") == 0);
	s3proxy_rule(&p, "{\"kind\":\"PUT\",\"action\":\"stall\",\"seconds\":30,\"times\":0}");
	t0 = t_now_ms();
	T_ASSERT(ckpt_s3_put(s3, bucket, "faults/stalled", "abc", 3, 0, err, sizeof(err)) == -ETIMEDOUT);
	T_ASSERT(strstr(err, "timeout") && t_now_ms() - t0 < 6000);
	ckpt_s3_close(s3);

	/* ckpt_s3_cancel from another thread while an upload's parts are
	 * held and retried for a minute: the upload ends with -ECANCELED
	 * within a few polls, not after its retries; a call made while
	 * cancelled fails at once; after cancel off the client works again. */
	cfg.retry_total_ms = 60000;
	s3 = client(p.endpoint, &cfg);
	s3proxy_reset(&p);
	s3proxy_rule(&p, "{\"kind\":\"PUT_PART\",\"action\":\"status\",\"status\":503,\"times\":0}");
	struct canceller cn = { s3, 1500 };
	pthread_t th;
	T_ASSERT(pthread_create(&th, NULL, cancel_main, &cn) == 0);
	src sc = { .seed = 27 };
	t0 = t_now_ms();
	int crc = ckpt_s3_upload(s3, bucket, "faults/cancelled", len, fill, &sc, err, sizeof(err));
	dt = t_now_ms() - t0;
	pthread_join(th, NULL);
	T_ASSERT(crc == -ECANCELED && strstr(err, "cancelled"));
	T_ASSERT(dt >= 1400 && dt < 4000);
	T_ASSERT(s3proxy_count(&p, "PUT_PART", "503") >= 2);
	T_ASSERT(ckpt_s3_put(s3, bucket, "faults/while-cancelled", "x", 1, 0, err, sizeof(err)) == -ECANCELED);
	T_ASSERT(ckpt_s3_head(s3, bucket, "faults/cancelled", NULL, err, sizeof(err)) == -ECANCELED);
	ckpt_s3_cancel(s3, 0);
	s3proxy_reset(&p);
	T_ASSERT(ckpt_s3_head(s3, bucket, "faults/cancelled", NULL, err, sizeof(err)) == -ENOENT);
	/* Its multipart upload was left (the abort was cancelled too): what
	 * an agent's next start or gc removes. */
	T_ASSERT(s3gw_count_uploads(&g, bucket, "faults/cancelled") == 1);
	T_OK(ckpt_s3_put(s3, bucket, "faults/after-cancel", "y", 1, 0, err, sizeof(err)));
	printf("ok: an upload retrying held parts cancelled from another thread ended in %lld ms\n", (long long)dt);
	ckpt_s3_close(s3);
	free(buf);
	s3proxy_stop(&p);
}

static void refusals(void)
{
	char err[4][512], e2[512];
	ckpt_s3 *s3;
	/* wrong access key id */
	keys_as("NOSUCHKEYID0123456789", g.secret);
	s3 = client(NULL, NULL);
	T_ASSERT(ckpt_s3_put(s3, bucket, "refused", "x", 1, 0, err[0], sizeof(err[0])) == -EACCES);
	T_ASSERT(strstr(err[0], "InvalidAccessKeyId") && strstr(err[0], "key id"));
	T_ASSERT(ckpt_s3_head(s3, bucket, "small/one", NULL, e2, sizeof(e2)) == -EACCES && strstr(e2, "InvalidAccessKeyId"));
	ckpt_s3_close(s3);
	/* wrong secret */
	keys_as(g.access, "this-is-not-the-secret-key-at-all");
	s3 = client(NULL, NULL);
	T_ASSERT(ckpt_s3_put(s3, bucket, "refused", "x", 1, 0, err[1], sizeof(err[1])) == -EACCES);
	T_ASSERT(strstr(err[1], "SignatureDoesNotMatch") && strstr(err[1], "secret"));
	ckpt_s3_close(s3);
	/* a clock an hour fast */
	keys_as(g.access, g.secret);
	ckpt_s3_cfg cfg = { 0 };
	cfg.clock_skew_s = 3600;
	s3 = client(NULL, &cfg);
	T_ASSERT(ckpt_s3_put(s3, bucket, "refused", "x", 1, 0, err[2], sizeof(err[2])) == -EACCES);
	T_ASSERT(strstr(err[2], "RequestTimeTooSkewed") && strstr(err[2], "clock"));
	T_ASSERT(strstr(err[2], "+3600 s") || strstr(err[2], "+3599 s") || strstr(err[2], "+3601 s"));
	ckpt_s3_close(s3);
	/* a missing bucket */
	s3 = client(NULL, NULL);
	T_ASSERT(ckpt_s3_put(s3, "no-such-bucket-s3c", "k", "x", 1, 0, err[3], sizeof(err[3])) == -ENXIO);
	T_ASSERT(strstr(err[3], "does not exist") && strstr(err[3], "no-such-bucket-s3c"));
	T_ASSERT(ckpt_s3_head(s3, "no-such-bucket-s3c", "k", NULL, e2, sizeof(e2)) == -ENXIO);
	ckpt_s3_close(s3);
	/* another user's bucket */
	keys_as(g.other_access, g.other_secret);
	s3 = client(NULL, NULL);
	T_ASSERT(ckpt_s3_put(s3, bucket, "refused", "x", 1, 0, e2, sizeof(e2)) == -EACCES);
	T_ASSERT(strstr(e2, "AccessDenied") && strstr(e2, "permission"));
	ckpt_s3_close(s3);
	keys_as(g.access, g.secret);
	for (int i = 0; i < 4; i++) {
		for (int j = 0; j < i; j++)
			T_ASSERT(strcmp(err[i], err[j]) != 0);
		T_ASSERT(!strstr(err[i], g.secret) && !strstr(err[i], "this-is-not-the-secret") &&
		         !strstr(err[i], g.access) && !strstr(err[i], "Signature="));
		printf("ok: refused: %s\n", err[i]);
	}
	T_ASSERT(!strstr(e2, g.other_secret) && !strstr(e2, g.other_access));
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	char *tmp = t_tmpdir("s3client");
	s3gw_open(&g, tmp);
	s3gw_new_bucket(&g, "client", bucket, sizeof(bucket));
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("AWS_PROFILE");
	keys_as(g.access, g.secret);
	basics();
	multipart();
	listing();
	threads();
	faults(tmp);
	refusals();
	s3gw_close(&g);
	t_rmrf(tmp);
	printf("PASS\n");
	return 0;
}
