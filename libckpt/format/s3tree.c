/* The SHARED tier's object store layout, marker and shard reads (s3tree.h). */
#include "s3tree.h"
#include "global.h"
#include "base/common.h"
#include "ckpt_kernels.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_BATCH 16 /* chunks asked for at once by default */

int ckpt__s3tree_is_url(const char *s)
{
	return s && !strncmp(s, "s3://", 5);
}

int ckpt__s3tree_open(ckpt_s3tree *t, const char *url, char *err, size_t cap)
{
	memset(t, 0, sizeof(*t));
	if (strlen(url) >= sizeof(t->url)) {
		ckpt__errf(err, cap, "%.64s...: an object store URL longer than %zu bytes", url, sizeof(t->url) - 1);
		return -EINVAL;
	}
	snprintf(t->url, sizeof(t->url), "%s", url);
	char why[512] = "";
	int r = ckpt_s3_url_parse(url, t->bucket, sizeof(t->bucket), t->prefix, sizeof(t->prefix));
	if (r < 0) {
		ckpt__errf(err, cap, "%s: not an object store URL (want s3://BUCKET/PREFIX with a valid bucket name)", url);
		return r;
	}
	ckpt_s3_cfg c = { .size = sizeof(c) };
	if ((r = ckpt_s3_cfg_env(&c, why, sizeof(why))) < 0) {
		ckpt__errf(err, cap, "%s", why);
		return r;
	}
	if ((r = ckpt_s3_open(&t->s3, &c, why, sizeof(why))) < 0) {
		ckpt__errf(err, cap, "%s: %s", url, why[0] ? why : strerror(-r));
		t->s3 = NULL;
		return r;
	}
	return 0;
}

void ckpt__s3tree_close(ckpt_s3tree *t)
{
	if (!t)
		return;
	ckpt_s3_close(t->s3);
	t->s3 = NULL;
}

int ckpt__s3tree_key(const ckpt_s3tree *t, char *out, size_t cap, const char *job, uint64_t version, uint32_t rank)
{
	if (ckpt__job_valid(job) != 0)
		return -EINVAL;
	int n;
	if (rank == CKPT_S3TREE_MARKER)
		n = snprintf(out, cap, "%sjobs/%s/v%020llu/%s", t->prefix, job, (unsigned long long)version,
		             CKPT_SHARED_MARKER);
	else if (rank == CKPT_S3TREE_VERSION)
		n = snprintf(out, cap, "%sjobs/%s/v%020llu/", t->prefix, job, (unsigned long long)version);
	else
		n = snprintf(out, cap, "%sjobs/%s/v%020llu/r%06u.ckpt", t->prefix, job, (unsigned long long)version, rank);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int all_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

int ckpt__s3tree_parse_key(const ckpt_s3tree *t, const char *key, char job[65], uint64_t *version, uint32_t *rank)
{
	size_t pl = strlen(t->prefix);
	if (strncmp(key, t->prefix, pl) || strncmp(key + pl, "jobs/", 5))
		return -EINVAL;
	const char *p = key + pl + 5, *slash = strchr(p, '/');
	if (!slash || slash == p || (size_t)(slash - p) > CKPT_JOB_MAX)
		return -EINVAL;
	memcpy(job, p, (size_t)(slash - p));
	job[slash - p] = '\0';
	if (ckpt__job_valid(job) != 0)
		return -EINVAL;
	p = slash + 1;
	if (p[0] != 'v' || !all_digits(p + 1, 20) || p[21] != '/')
		return -EINVAL;
	char num[21];
	memcpy(num, p + 1, 20);
	num[20] = '\0';
	errno = 0;
	unsigned long long v = strtoull(num, NULL, 10);
	if (errno)
		return -EINVAL;
	*version = v;
	p += 22;
	if (!strcmp(p, CKPT_SHARED_MARKER)) {
		*rank = CKPT_S3TREE_MARKER;
		return 0;
	}
	if (p[0] != 'r' || !all_digits(p + 1, 6) || strcmp(p + 7, ".ckpt"))
		return -EINVAL;
	*rank = (uint32_t)strtoul(p + 1, NULL, 10);
	return 0;
}

/* ---------------------------------------------------------------- marker */

int ckpt__s3tree_marker_read(ckpt_s3tree *t, const char *job, uint64_t version, ckpt_shared_mark *m, char *err,
                             size_t cap)
{
	char key[CKPT_S3TREE_KEY_MAX], text[CKPT_SHARED_MARKER_MAX + 1];
	CKPT_TRY(ckpt__s3tree_key(t, key, sizeof(key), job, version, CKPT_S3TREE_MARKER));
	uint64_t size = 0;
	int r = ckpt_s3_head(t->s3, t->bucket, key, &size, err, cap);
	if (r < 0)
		return r;
	if (size == 0 || size > CKPT_SHARED_MARKER_MAX) {
		ckpt__errf(err, cap, "%s: %llu bytes, not a commit marker", key, (unsigned long long)size);
		return -CKPT_ECORRUPT;
	}
	ckpt_s3_range rg = { 0, size, text };
	if ((r = ckpt_s3_get_ranges(t->s3, t->bucket, key, &rg, 1, err, cap)) < 0)
		return r;
	r = ckpt__shared_marker_parse(text, (size_t)size, job, version, m);
	if (r < 0)
		ckpt__errf(err, cap, "%s is not the commit marker of job %s version %llu", key, job,
		           (unsigned long long)version);
	return r;
}

int ckpt__s3tree_marker_write(ckpt_s3tree *t, const char *job, uint64_t version, const ckpt_shared_mark *m,
                              char *err, size_t cap)
{
	char key[CKPT_S3TREE_KEY_MAX], text[CKPT_SHARED_MARKER_MAX + 1];
	CKPT_TRY(ckpt__s3tree_key(t, key, sizeof(key), job, version, CKPT_S3TREE_MARKER));
	int n = ckpt__shared_marker_format(text, sizeof(text), job, version, m);
	if (n < 0)
		return n;
	int r = ckpt_s3_put(t->s3, t->bucket, key, text, (size_t)n, CKPT_S3_IF_NONE_MATCH, err, cap);
	return r == -EEXIST ? 0 : r; /* another agent's, the same words */
}

/* ---------------------------------------------------------------- listing */

typedef struct vlist {
	const ckpt_s3tree *t;
	size_t pl; /* the job prefix's length */
	uint64_t *v;
	size_t n, cap;
} vlist;

static int push_u64(vlist *l, uint64_t x)
{
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 32;
		uint64_t *p = realloc(l->v, nc * sizeof(*p));
		if (!p)
			return -ENOMEM;
		l->v = p;
		l->cap = nc;
	}
	l->v[l->n++] = x;
	return 0;
}

static int version_cb(void *arg, const char *key, uint64_t size)
{
	(void)size;
	vlist *l = arg;
	if (strlen(key) < l->pl)
		return 0;
	const char *p = key + l->pl; /* "v<20 digits>/" */
	if (p[0] != 'v' || strlen(p) != 22 || !all_digits(p + 1, 20) || p[21] != '/')
		return 0;
	errno = 0;
	unsigned long long v = strtoull(p + 1, NULL, 10);
	return errno ? 0 : push_u64(l, v);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

int ckpt__s3tree_versions(ckpt_s3tree *t, const char *job, uint64_t **v, size_t *n, char *err, size_t cap)
{
	char pre[CKPT_S3TREE_KEY_MAX];
	*v = NULL;
	*n = 0;
	if (ckpt__job_valid(job) != 0)
		return -EINVAL;
	int k = snprintf(pre, sizeof(pre), "%sjobs/%s/", t->prefix, job);
	if (k < 0 || (size_t)k >= sizeof(pre))
		return -ENAMETOOLONG;
	vlist l = { t, (size_t)k, NULL, 0, 0 };
	int r = ckpt_s3_list(t->s3, t->bucket, pre, "/", version_cb, &l, err, cap);
	if (r < 0) {
		free(l.v);
		return r;
	}
	qsort(l.v, l.n, sizeof(*l.v), cmp_u64);
	size_t m = 0;
	for (size_t i = 0; i < l.n; i++)
		if (!m || l.v[m - 1] != l.v[i])
			l.v[m++] = l.v[i];
	*v = l.v;
	*n = m;
	return 0;
}

typedef struct jlist {
	size_t pl;
	char (*names)[65];
	size_t n, cap;
} jlist;

static int job_cb(void *arg, const char *key, uint64_t size)
{
	(void)size;
	jlist *l = arg;
	if (strlen(key) <= l->pl)
		return 0;
	const char *p = key + l->pl;
	size_t len = strlen(p);
	if (len < 2 || p[len - 1] != '/' || len - 1 > CKPT_JOB_MAX)
		return 0;
	char job[65];
	memcpy(job, p, len - 1);
	job[len - 1] = '\0';
	if (ckpt__job_valid(job) != 0)
		return 0;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		void *q = realloc(l->names, nc * sizeof(*l->names));
		if (!q)
			return -ENOMEM;
		l->names = q;
		l->cap = nc;
	}
	memcpy(l->names[l->n++], job, len);
	return 0;
}

static int cmp_name(const void *x, const void *y)
{
	return strcmp(x, y);
}

int ckpt__s3tree_jobs(ckpt_s3tree *t, char (**names)[65], size_t *n, char *err, size_t cap)
{
	char pre[CKPT_S3TREE_KEY_MAX];
	*names = NULL;
	*n = 0;
	int k = snprintf(pre, sizeof(pre), "%sjobs/", t->prefix);
	if (k < 0 || (size_t)k >= sizeof(pre))
		return -ENAMETOOLONG;
	jlist l = { (size_t)k, NULL, 0, 0 };
	int r = ckpt_s3_list(t->s3, t->bucket, pre, "/", job_cb, &l, err, cap);
	if (r < 0) {
		free(l.names);
		return r;
	}
	qsort(l.names, l.n, sizeof(*l.names), cmp_name);
	*names = l.names;
	*n = l.n;
	return 0;
}

/* ---------------------------------------------------------------- shards */

int ckpt__s3tree_shard_open(ckpt_s3tree *t, const char *key, ckpt_shard *s, char *why, size_t cap)
{
	uint64_t size = 0;
	uint8_t hdr[CKPT_FMT_HEADER_USED], tail[CKPT_FMT_TAIL_LEN], *footer = NULL;
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	int r = ckpt_s3_head(t->s3, t->bucket, key, &size, why, cap);
	if (r < 0)
		return r;
	if (size < CKPT_FMT_HEADER_LEN + CKPT_FMT_TAIL_LEN) {
		ckpt__errf(why, cap, "%s: %llu bytes, shorter than a shard", key, (unsigned long long)size);
		return -CKPT_ECORRUPT;
	}
	ckpt_s3_range rg[2] = { { 0, sizeof(hdr), hdr }, { size - CKPT_FMT_TAIL_LEN, CKPT_FMT_TAIL_LEN, tail } };
	if ((r = ckpt_s3_get_ranges(t->s3, t->bucket, key, rg, 2, why, cap)) < 0)
		return r;
	if ((r = ckpt__shard_parse_parts(s, size, hdr, sizeof(hdr), tail, NULL, why, cap)) < 0)
		return r;
	/* parse_parts checked the tail: the footer lies inside the object. */
	uint64_t flen = s->tail.footer_length;
	if (!(footer = malloc(flen ? flen : 1)))
		return -ENOMEM;
	ckpt_s3_range fr = { s->tail.footer_offset, flen, footer };
	if (flen && (r = ckpt_s3_get_ranges(t->s3, t->bucket, key, &fr, 1, why, cap)) < 0) {
		free(footer);
		return r;
	}
	r = ckpt__shard_parse_parts(s, size, hdr, sizeof(hdr), tail, footer, why, cap);
	free(footer);
	if (r < 0)
		ckpt__shard_close(s);
	s->fd = -1;
	return r;
}

static void chunk_why(const ckpt_read_opts *o, const ckpt_shard *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void chunk_why(const ckpt_read_opts *o, const ckpt_shard *s, const char *fmt, ...)
{
	if (!o->why || !o->whycap)
		return;
	int n = snprintf(o->why, o->whycap, "version %llu rank %u ", (unsigned long long)s->header.version,
	                 s->header.rank);
	if (n < 0 || (size_t)n >= o->whycap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o->why + n, o->whycap - (size_t)n, fmt, ap);
	va_end(ap);
}

int ckpt__s3tree_shard_read(ckpt_s3tree *t, const char *key, const ckpt_shard *s, const ckpt_read_opts *o,
                            ckpt_sink_fn sink, void *arg)
{
	const ckpt_fmt_footer *f = &s->footer;
	uint32_t batch = o->depth ? CKPT_MIN(o->depth, 256u) : READ_BATCH;
	uint32_t nbufs = o->bufs && o->buf_bytes >= f->chunk_bytes ? o->nbufs : 0;
	uint8_t **bufs = nbufs ? o->bufs : NULL, *own[READ_BATCH] = { 0 };
	ckpt_s3_range *rg = calloc(batch, sizeof(*rg));
	uint64_t *ci_of = calloc(batch, sizeof(*ci_of));
	uint8_t *direct = calloc(batch, 1);
	ckpt_chunk_scratch cs = { 0 };
	int err = 0;
	if (!rg || !ci_of || !direct) {
		err = -ENOMEM;
		goto out;
	}
	if (!nbufs) { /* buffers of our own, a batch's worth at most */
		nbufs = CKPT_MIN(batch, (uint32_t)READ_BATCH);
		for (uint32_t i = 0; i < nbufs; i++)
			if (!(own[i] = malloc(f->chunk_bytes ? f->chunk_bytes : 1))) {
				err = -ENOMEM;
				goto out;
			}
		bufs = own;
	}
	uint64_t ci = 0;
	while (ci < f->chunk_count && !err) {
		size_t n = 0;
		uint32_t used = 0;
		for (; ci < f->chunk_count && n < batch; ci++) {
			const ckpt_fmt_chunk *c = &f->chunks[ci];
			if (o->want && !o->want[c->region])
				continue;
			const ckpt_fmt_region *r = &f->regions[c->region];
			uint64_t k = ci - r->chunk_first;
			if (c->raw_len > f->chunk_bytes || c->stored_len > f->chunk_bytes ||
			    (!c->flags && c->stored_len != c->raw_len)) {
				chunk_why(o, s, "region '%s' chunk %llu: stored length %u does not fit the chunk size", r->name,
				          (unsigned long long)k, c->stored_len);
				err = -CKPT_ECORRUPT;
				break;
			}
			uint8_t *dst = !c->flags && o->place ? o->place(o->place_arg, c->region, k * f->chunk_bytes, c->raw_len)
			                                     : NULL;
			if (!dst && used == nbufs)
				break; /* the buffers are taken: this batch first */
			rg[n] = (ckpt_s3_range){ c->offset, c->stored_len, dst ? dst : bufs[used++] };
			ci_of[n] = ci;
			direct[n] = dst != NULL;
			n++;
		}
		if (err || !n)
			break;
		char e[512] = "";
		if ((err = ckpt_s3_get_ranges(t->s3, t->bucket, key, rg, n, e, sizeof(e))) < 0) {
			ckpt__errf(o->why, o->whycap, "reading %s: %s", key, e[0] ? e : strerror(-err));
			break;
		}
		for (size_t i = 0; i < n && !err; i++) {
			const ckpt_fmt_chunk *c = &f->chunks[ci_of[i]];
			const ckpt_fmt_region *r = &f->regions[c->region];
			uint64_t k = ci_of[i] - r->chunk_first;
			if (direct[i]) {
				uint64_t sum = ckpt_kern_checksum(rg[i].buf, c->raw_len);
				if (sum != c->checksum) {
					chunk_why(o, s, "region '%s' chunk %llu: checksum mismatch (stored %016llx, computed %016llx)",
					          r->name, (unsigned long long)k, (unsigned long long)c->checksum,
					          (unsigned long long)sum);
					err = -CKPT_ECORRUPT;
				}
				continue;
			}
			const uint8_t *raw;
			char w[320] = "";
			if ((err = ckpt__chunk_verify(f, ci_of[i], rg[i].buf, &cs, &raw, w, sizeof(w))) < 0) {
				chunk_why(o, s, "%s", w);
				break;
			}
			err = sink(arg, c->region, k * f->chunk_bytes, raw, c->raw_len);
		}
	}
out:
	for (uint32_t i = 0; i < READ_BATCH; i++)
		free(own[i]);
	ckpt__chunk_scratch_free(&cs);
	free(rg);
	free(ci_of);
	free(direct);
	return err;
}

/* ---------------------------------------------------------------- deletion */

int ckpt__s3tree_chunks_read(ckpt_s3tree *t, const char *key, const ckpt_shard *s, const uint64_t *chunks, size_t n,
                             uint8_t **bufs, uint32_t nbufs, size_t buf_bytes, ckpt_gchunk_fn fn, void *arg,
                             char *why, size_t cap)
{
	const ckpt_fmt_footer *f = &s->footer;
	uint8_t *own[READ_BATCH] = { 0 };
	ckpt_s3_range rg[READ_BATCH];
	uint64_t ci_of[READ_BATCH];
	ckpt_chunk_scratch cs = { 0 };
	int err = 0;
	if (!bufs || !nbufs || buf_bytes < f->chunk_bytes) { /* buffers of our own */
		nbufs = (uint32_t)CKPT_MIN(n, (size_t)READ_BATCH);
		for (uint32_t i = 0; i < nbufs; i++)
			if (!(own[i] = malloc(f->chunk_bytes ? f->chunk_bytes : 1))) {
				err = -ENOMEM;
				goto out;
			}
		bufs = own;
	}
	nbufs = CKPT_MIN(nbufs, (uint32_t)READ_BATCH);
	for (size_t next = 0; next < n && !err;) {
		size_t k = 0;
		for (; next < n && k < nbufs; next++, k++) {
			uint64_t ci = chunks[next];
			if (ci >= f->chunk_count) {
				ckpt__errf(why, cap, "chunk %llu is not in the shard", (unsigned long long)ci);
				err = -EINVAL;
				break;
			}
			const ckpt_fmt_chunk *c = &f->chunks[ci];
			if (c->stored_len > f->chunk_bytes || c->raw_len > f->chunk_bytes) {
				ckpt__errf(why, cap, "chunk %llu: stored length %u does not fit the chunk size",
				           (unsigned long long)ci, c->stored_len);
				err = -CKPT_ECORRUPT;
				break;
			}
			rg[k] = (ckpt_s3_range){ c->offset, c->stored_len, bufs[k] };
			ci_of[k] = ci;
		}
		if (err || !k)
			break;
		char e[512] = "";
		if ((err = ckpt_s3_get_ranges(t->s3, t->bucket, key, rg, k, e, sizeof(e))) < 0) {
			ckpt__errf(why, cap, "reading %s: %s", key, e[0] ? e : strerror(-err));
			break;
		}
		for (size_t i = 0; i < k && !err; i++) {
			const uint8_t *raw;
			if ((err = ckpt__chunk_verify(f, ci_of[i], rg[i].buf, &cs, &raw, why, cap)) == 0)
				err = fn(arg, ci_of[i], raw, f->chunks[ci_of[i]].raw_len);
		}
	}
out:
	for (uint32_t i = 0; i < READ_BATCH; i++)
		free(own[i]);
	ckpt__chunk_scratch_free(&cs);
	return err;
}

int ckpt__s3tree_delete(ckpt_s3tree *t, const char *job, uint64_t version, const uint32_t *ranks, size_t n,
                        char *err, size_t cap)
{
	char mk[CKPT_S3TREE_KEY_MAX];
	CKPT_TRY(ckpt__s3tree_key(t, mk, sizeof(mk), job, version, CKPT_S3TREE_MARKER));
	const char *one[1] = { mk };
	int r = ckpt_s3_delete(t->s3, t->bucket, one, 1, err, cap);
	if (r < 0 || !n)
		return r;
	char (*keys)[CKPT_S3TREE_KEY_MAX] = malloc(n * sizeof(*keys));
	const char **kp = malloc(n * sizeof(*kp));
	if (!keys || !kp) {
		free(keys);
		free(kp);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && r == 0; i++) {
		r = ckpt__s3tree_key(t, keys[i], sizeof(keys[i]), job, version, ranks ? ranks[i] : (uint32_t)i);
		kp[i] = keys[i];
	}
	if (r == 0)
		r = ckpt_s3_delete(t->s3, t->bucket, kp, n, err, cap);
	free(keys);
	free(kp);
	return r;
}

typedef struct up {
	char *key, *id;
} up;

typedef struct ulist {
	up *u;
	size_t n, cap;
} ulist;

static int upload_cb(void *arg, const char *key, const char *upload_id)
{
	ulist *l = arg;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		void *p = realloc(l->u, nc * sizeof(*l->u));
		if (!p)
			return -ENOMEM;
		l->u = p;
		l->cap = nc;
	}
	up *u = &l->u[l->n];
	u->key = strdup(key);
	u->id = strdup(upload_id);
	if (!u->key || !u->id) {
		free(u->key);
		free(u->id);
		return -ENOMEM;
	}
	l->n++;
	return 0;
}

int ckpt__s3tree_abort_uploads(ckpt_s3tree *t, ckpt_s3tree_pick_fn pick, void *arg, size_t *aborted, char *err,
                               size_t cap)
{
	char pre[CKPT_S3TREE_KEY_MAX];
	*aborted = 0;
	int k = snprintf(pre, sizeof(pre), "%sjobs/", t->prefix);
	if (k < 0 || (size_t)k >= sizeof(pre))
		return -ENAMETOOLONG;
	/* Listed first, aborted after: the listing's pages stay as they were. */
	ulist l = { 0 };
	int r = ckpt_s3_list_uploads(t->s3, t->bucket, pre, upload_cb, &l, err, cap);
	for (size_t i = 0; i < l.n; i++) {
		char job[65];
		uint64_t v;
		uint32_t rank;
		int mine = ckpt__s3tree_parse_key(t, l.u[i].key, job, &v, &rank) == 0;
		if (r == 0 && (!pick || (mine && pick(arg, job, v, rank)))) {
			int a = ckpt_s3_abort(t->s3, t->bucket, l.u[i].key, l.u[i].id, err, cap);
			if (a == 0 || a == -ENOENT)
				(*aborted)++;
			else
				r = a;
		}
		free(l.u[i].key);
		free(l.u[i].id);
	}
	free(l.u);
	return r;
}
