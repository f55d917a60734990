/* The S3 calls of many requests: a multipart upload (parts_in_flight part
 * buffers at most, each filled by the caller, hashed (its signed SHA-256,
 * and its Content-MD5 when cfg.content_md5) and sent while the others
 * travel) and ranged GETs in parallel straight into the caller's memory. */
#include "s3_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_PARTS 10000
#define HUGE (2u << 20)

/* A part buffer: a spare one of the last upload (ckpt_s3_trim), else a new
 * one, page-aligned (a fill may read into it with O_DIRECT), in huge pages
 * when it is large (a fresh buffer's first touch faults and zeroes every
 * page: 64 MiB is 16384 faults in 4 KiB pages, 32 in 2 MiB ones). */
static void *part_alloc(ckpt_s3 *s3, size_t n)
{
	void *p = NULL;
	if (n == s3->cfg.part_bytes) {
		pthread_mutex_lock(&s3->lock);
		if (s3->nspare)
			p = s3->spare[--s3->nspare];
		pthread_mutex_unlock(&s3->lock);
		if (p)
			return p; /* still counted in part_bytes_now */
	}
	if (posix_memalign(&p, n >= HUGE ? HUGE : 4096, n ? n : 1))
		return NULL;
	if (n >= HUGE)
		madvise(p, n / HUGE * HUGE, MADV_HUGEPAGE); /* advice: without it, small pages */
	pthread_mutex_lock(&s3->lock);
	s3->part_bytes_now += n;
	if (s3->part_bytes_now > s3->st.part_bytes_peak)
		s3->st.part_bytes_peak = s3->part_bytes_now;
	pthread_mutex_unlock(&s3->lock);
	return p;
}

/* Kept as a spare (parts_in_flight of them at most), else freed. */
static void part_free(ckpt_s3 *s3, void *p, size_t n)
{
	if (!p)
		return;
	pthread_mutex_lock(&s3->lock);
	if (n == s3->cfg.part_bytes && s3->nspare < s3->cfg.parts_in_flight) {
		s3->spare[s3->nspare++] = p;
		pthread_mutex_unlock(&s3->lock);
		return;
	}
	s3->part_bytes_now -= n;
	pthread_mutex_unlock(&s3->lock);
	free(p);
}

void ckpt_s3_trim(ckpt_s3 *s3)
{
	void *p[256];
	uint32_t n;
	if (!s3)
		return;
	pthread_mutex_lock(&s3->lock);
	n = s3->nspare;
	memcpy(p, s3->spare, n * sizeof(p[0]));
	s3->nspare = 0;
	s3->part_bytes_now -= (uint64_t)n * s3->cfg.part_bytes;
	pthread_mutex_unlock(&s3->lock);
	for (uint32_t i = 0; i < n; i++)
		free(p[i]);
}

/* The whole object in one PUT (len <= part_bytes). */
static int upload_single(ckpt_s3 *s3, const char *bucket, const char *key, size_t len, ckpt_s3_fill_fn fill,
                         void *arg, char *err, size_t errcap)
{
	void *buf = part_alloc(s3, len);
	if (!buf) {
		s3__errf(err, errcap, "S3 upload %s/%s: no memory for %zu bytes", bucket, key, len);
		return -ENOMEM;
	}
	int rc = len ? fill(arg, 0, buf, len) : 0;
	if (rc < 0)
		s3__errf(err, errcap, "S3 upload %s/%s: the data source failed (%d)", bucket, key, rc);
	else
		rc = ckpt_s3_put(s3, bucket, key, buf, len, 0, err, errcap);
	part_free(s3, buf, len);
	return rc;
}

typedef struct part_slot {
	s3_req req;
	void *buf;
	size_t cap;
	int busy;
} part_slot;

static int initiate(ckpt_s3 *s3, const char *bucket, const char *key, char *id, size_t idcap, char *err,
                    size_t errcap)
{
	s3_req *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->method = "POST";
	r->bucket = bucket;
	r->key = key;
	s3_kv q[] = { { "uploads", "" } };
	s3__query(q, 1, r->query, sizeof(r->query));
	r->content_type = "application/octet-stream";
	s3__do(s3, r);
	int rc = s3__req_result(r, err, errcap);
	if (rc == 0 && s3__xml_field(r->resp, r->resp_len, "InitiateMultipartUploadResult", "UploadId", id, idcap) < 0) {
		s3__errf(err, errcap, "S3 upload %s/%s: no UploadId in the answer to CreateMultipartUpload", bucket, key);
		rc = -EIO;
	}
	s3__req_free(r);
	free(r);
	return rc;
}

static int complete(ckpt_s3 *s3, const char *bucket, const char *key, const char *id, char (*etags)[130],
                    size_t nparts, uint64_t len, char *err, size_t errcap)
{
	size_t cap = nparts * 200 + 128, o = 0;
	char *body = malloc(cap);
	s3_req *r = calloc(1, sizeof(*r));
	int rc = -ENOMEM;
	if (!body || !r)
		goto out;
	o += (size_t)snprintf(body, cap, "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CompleteMultipartUpload>");
	for (size_t i = 0; i < nparts; i++) {
		/* An ETag is "hex" (S3's, quotes included): escaped as XML text. */
		o += (size_t)snprintf(body + o, cap - o, "<Part><PartNumber>%zu</PartNumber><ETag>", i + 1);
		for (const char *p = etags[i]; *p; p++)
			o += (size_t)snprintf(body + o, cap - o, "%s", *p == '"' ? "&quot;" : *p == '&' ? "&amp;" : *p == '<' ? "&lt;"
			                                                  : (char[2]){ *p, 0 });
		o += (size_t)snprintf(body + o, cap - o, "</ETag></Part>");
	}
	o += (size_t)snprintf(body + o, cap - o, "</CompleteMultipartUpload>");
	r->method = "POST";
	r->bucket = bucket;
	r->key = key;
	s3_kv q[] = { { "uploadId", id } };
	s3__query(q, 1, r->query, sizeof(r->query));
	r->body = body;
	r->body_len = o;
	r->content_type = "application/xml";
	r->flags = S3_ERR_IN_200;
	s3__digests(body, o, r->sha, r->md5, NULL, NULL);
	s3__do(s3, r);
	rc = s3__req_result(r, err, errcap);
	/* Completed by a try whose answer was lost: the upload is gone and
	 * the object is there, whole. */
	if (rc == -ENOENT && r->attempts > 0) {
		uint64_t size = 0;
		char herr[S3_ERRCAP];
		if (ckpt_s3_head(s3, bucket, key, &size, herr, sizeof(herr)) == 0 && size == len)
			rc = 0;
	}
out:
	if (r)
		s3__req_free(r);
	free(r);
	free(body);
	return rc;
}

int ckpt_s3_upload(ckpt_s3 *s3, const char *bucket, const char *key, uint64_t len, ckpt_s3_fill_fn fill, void *arg,
                   char *err, size_t errcap)
{
	int rc = s3__check(bucket, key, err, errcap);
	if (rc < 0)
		return rc;
	if (!fill) {
		s3__errf(err, errcap, "S3 upload %s/%s: no fill function", bucket, key);
		return -EINVAL;
	}
	uint64_t part = s3->cfg.part_bytes;
	if (len <= part)
		return upload_single(s3, bucket, key, (size_t)len, fill, arg, err, errcap);
	uint64_t nparts = (len + part - 1) / part;
	if (nparts > MAX_PARTS) { /* S3's most: larger parts, in whole MiB */
		part = ((len + MAX_PARTS - 1) / MAX_PARTS + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
		nparts = (len + part - 1) / part;
	}
	if (part > (5ull << 30)) {
		s3__errf(err, errcap, "S3 upload %s/%s: %" PRIu64 " bytes is more than S3 takes in one object", bucket, key,
		         len);
		return -EFBIG;
	}
	char id[1100];
	if ((rc = initiate(s3, bucket, key, id, sizeof(id), err, errcap)) < 0)
		return rc;
	size_t nslots = s3->cfg.parts_in_flight < nparts ? s3->cfg.parts_in_flight : (size_t)nparts;
	part_slot *slots = calloc(nslots, sizeof(*slots));
	char(*etags)[130] = calloc((size_t)nparts, sizeof(*etags));
	s3_eng e;
	s3__eng_open(s3, &e);
	if (!slots || !etags) {
		rc = -ENOMEM;
		s3__errf(err, errcap, "S3 upload %s/%s: out of memory", bucket, key);
		goto out;
	}
	uint64_t next = 0, done = 0;
	size_t busy = 0;
	char pnum[24];
	while (done < nparts) {
		/* Every free slot gets the next part. */
		while (rc == 0 && next < nparts && busy < nslots) {
			part_slot *sl = NULL;
			for (size_t i = 0; i < nslots && !sl; i++)
				if (!slots[i].busy)
					sl = &slots[i];
			uint64_t off = next * part;
			size_t n = (size_t)(len - off < part ? len - off : part);
			if (!sl->buf) {
				sl->cap = (size_t)part;
				if (!(sl->buf = part_alloc(s3, sl->cap))) {
					s3__errf(err, errcap, "S3 upload %s/%s: no memory for a part of %zu bytes", bucket, key,
					         sl->cap);
					rc = -ENOMEM;
					break;
				}
			}
			int frc = fill(arg, off, sl->buf, n);
			if (frc < 0) {
				s3__errf(err, errcap, "S3 upload %s/%s: the data source failed at byte %" PRIu64 " (%d)", bucket,
				         key, off, frc);
				rc = frc;
				break;
			}
			s3_req *r = &sl->req;
			s3__req_free(r);
			memset(r, 0, sizeof(*r));
			r->method = "PUT";
			r->bucket = bucket;
			r->key = key;
			snprintf(pnum, sizeof(pnum), "%" PRIu64, next + 1);
			s3_kv q[] = { { "partNumber", pnum }, { "uploadId", id } };
			s3__query(q, 2, r->query, sizeof(r->query));
			r->body = sl->buf;
			r->body_len = n;
			r->idx = (size_t)next;
			r->user = sl;
			s3__digests(sl->buf, n, r->sha, s3->cfg.content_md5 ? r->md5 : NULL, s3__eng_pump, &e);
			if ((rc = s3__eng_add(&e, r)) < 0) {
				s3__errf(err, errcap, "%s", r->err);
				break;
			}
			sl->busy = 1;
			busy++;
			next++;
		}
		if (!busy)
			break;
		s3_req *r = s3__eng_next(&e);
		if (!r)
			break;
		part_slot *sl = r->user;
		sl->busy = 0;
		busy--;
		if (r->rc < 0) {
			if (rc == 0) {
				rc = r->rc;
				s3__errf(err, errcap, "%s (part %zu of %" PRIu64 ")", r->err, r->idx + 1, nparts);
			}
			break;
		}
		if (!r->etag[0]) {
			s3__errf(err, errcap, "S3 upload %s/%s: no ETag for part %zu", bucket, key, r->idx + 1);
			rc = -EIO;
			break;
		}
		memcpy(etags[r->idx], r->etag, sizeof(etags[0]));
		done++;
		if (rc < 0)
			break;
	}
	s3__eng_close(&e);
	if (rc == 0 && done == nparts)
		rc = complete(s3, bucket, key, id, etags, (size_t)nparts, len, err, errcap);
	else if (rc == 0) {
		s3__errf(err, errcap, "S3 upload %s/%s: %" PRIu64 " of %" PRIu64 " parts sent", bucket, key, done, nparts);
		rc = -EIO;
	}
out:
	s3__eng_close(&e);
	if (slots)
		for (size_t i = 0; i < nslots; i++) {
			s3__req_free(&slots[i].req);
			part_free(s3, slots[i].buf, slots[i].cap);
		}
	free(slots);
	free(etags);
	if (rc < 0) {
		char aerr[S3_ERRCAP];
		ckpt_s3_abort(s3, bucket, key, id, aerr, sizeof(aerr)); /* best effort: gc aborts what is left */
	}
	return rc;
}

int ckpt_s3_get_ranges(ckpt_s3 *s3, const char *bucket, const char *key, ckpt_s3_range *ranges, size_t n,
                       char *err, size_t errcap)
{
	int rc = s3__check(bucket, key, err, errcap);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (ranges[i].len && (!ranges[i].buf || ranges[i].off + ranges[i].len < ranges[i].off)) {
			s3__errf(err, errcap, "S3 GET %s/%s: range %zu has no buffer or wraps", bucket, key, i);
			return -EINVAL;
		}
	size_t nslots = s3->cfg.parts_in_flight < n ? s3->cfg.parts_in_flight : n;
	if (!nslots)
		return 0;
	s3_req *reqs = calloc(nslots, sizeof(*reqs));
	int *busy = calloc(nslots, sizeof(*busy));
	if (!reqs || !busy) {
		free(reqs);
		free(busy);
		return -ENOMEM;
	}
	s3_eng e;
	s3__eng_open(s3, &e);
	size_t next = 0, inflight = 0;
	for (;;) {
		while (rc == 0 && next < n && inflight < nslots) {
			if (!ranges[next].len) {
				next++;
				continue;
			}
			size_t s = 0;
			while (busy[s])
				s++;
			s3_req *r = &reqs[s];
			s3__req_free(r);
			memset(r, 0, sizeof(*r));
			r->method = "GET";
			r->bucket = bucket;
			r->key = key;
			snprintf(r->range, sizeof(r->range), "bytes=%" PRIu64 "-%" PRIu64, ranges[next].off,
			         ranges[next].off + ranges[next].len - 1);
			r->dst = ranges[next].buf;
			r->dst_cap = (size_t)ranges[next].len;
			r->idx = next;
			r->user = &busy[s];
			if ((rc = s3__eng_add(&e, r)) < 0) {
				s3__errf(err, errcap, "%s", r->err);
				break;
			}
			busy[s] = 1;
			inflight++;
			next++;
		}
		if (!inflight)
			break;
		s3_req *r = s3__eng_next(&e);
		if (!r)
			break;
		*(int *)r->user = 0;
		inflight--;
		if (r->rc < 0) {
			rc = r->rc;
			s3__errf(err, errcap, "%s (range %zu: %s)", r->err, r->idx, r->range + 6);
			break;
		}
		const ckpt_s3_range *g = &ranges[r->idx];
		uint64_t a = 0;
		int whole = r->status == 200 && g->off == 0 && r->got == g->len;
		if (!whole && (r->status != 206 || sscanf(r->content_range, "bytes %" SCNu64 "-", &a) != 1 || a != g->off)) {
			s3__errf(err, errcap, "S3 GET %s/%s: range %s answered %ld (Content-Range \"%.60s\")", bucket, key,
			         r->range + 6, r->status, r->content_range);
			rc = -EIO;
			break;
		}
		if (r->got != g->len) {
			s3__errf(err, errcap, "S3 GET %s/%s: range %s came back short: %zu of %" PRIu64 " bytes", bucket, key,
			         r->range + 6, r->got, g->len);
			rc = -EIO;
			break;
		}
	}
	s3__eng_close(&e);
	for (size_t i = 0; i < nslots; i++)
		s3__req_free(&reqs[i]);
	free(reqs);
	free(busy);
	return rc;
}
