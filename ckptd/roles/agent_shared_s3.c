/* The SHARED flush to an object store (--shared-dir s3://BUCKET/PREFIX): the
 * same queue, thread, throttle and order as to a directory (agent_shared.c),
 * with objects instead of files (format/s3tree.h for the keys).
 *
 * A shard file goes up as one object, a multipart upload of the client's
 * (storage/s3.h) whose parts are filled here from the rank's file: each
 * part's bytes are read once, and what they hold is checked before they
 * are handed over: every chunk's checksum (a chunk that spans two parts is
 * summed piece by piece as the parts are filled, in order, and checked
 * when its last piece has been read; a compressed one is gathered from
 * both, to be decoded), and
 * the header and the footer against the copies validated when the file was
 * opened. The client signs each part with its SHA-256, which the server
 * checks (a part damaged on its way is refused and sent again), so the
 * server stores the bytes that were checked; a chunk that does not check fails
 * the part, and the client aborts the upload. An object appears whole or
 * not at all (CompleteMultipartUpload), and the version's marker is one
 * conditional PUT once the coordinator committed it at SHARED. A killed
 * agent leaves at most an incomplete upload, which it aborts when it
 * starts again (those of the shards its index still has to flush) and
 * which `ckpt gc` on the s3:// root or the bucket's lifecycle rule removes
 * otherwise. No LIST but that one at start: every key is computed. */
#include "agent_shared_int.h"
#include "format/global.h"
#include "ckpt_kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ckptd__sh_s3_open(ckptd_shared *sh, const char *url, char *err, size_t errcap)
{
	ckpt_s3tree *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	char why[700] = "";
	int r = ckpt__s3tree_open(t, url, why, sizeof(why));
	if (r < 0) {
		snprintf(err, errcap, "--shared-dir %s", why);
		free(t);
		return r;
	}
	sh->tree = t;
	return 0;
}

void ckptd__sh_s3_close(ckptd_shared *sh)
{
	if (!sh->tree)
		return;
	ckpt__s3tree_close(sh->tree);
	free(sh->tree);
	sh->tree = NULL;
}

/* An upload a killed run left: of a shard still to flush (queued at start
 * from the index). Other agents' uploads under the prefix are theirs. */
static int queued_pick(void *arg, const char *job, uint64_t version, uint32_t rank)
{
	ckptd_shared *sh = arg;
	int hit = 0;
	pthread_mutex_lock(&sh->mu);
	for (size_t i = 0; i < sh->nq && !hit; i++)
		hit = sh->q[i].kind == SH_COPY && sh->q[i].version == version && sh->q[i].rank == rank &&
		      !strcmp(sh->q[i].job, job);
	pthread_mutex_unlock(&sh->mu);
	return hit;
}

void ckptd__sh_s3_clean(ckptd_shared *sh)
{
	char err[512] = "";
	size_t n = 0;
	pthread_mutex_lock(&sh->mu);
	size_t nq = sh->nq;
	pthread_mutex_unlock(&sh->mu);
	if (!nq)
		return; /* nothing to flush: no upload of ours can be pending */
	int r = ckpt__s3tree_abort_uploads(sh->tree, queued_pick, sh, &n, err, sizeof(err));
	if (r < 0)
		CKPTD_WARN(sh->a->log, NULL, NULL, "SHARED: cannot abort the uploads a previous run left in %s: %s",
		           sh->tree->url, err);
	else if (n)
		CKPTD_INFO(sh->a->log, NULL, NULL, "SHARED: aborted %zu incomplete uploads a previous run left in %s", n,
		           sh->tree->url);
}

/* ---------------------------------------------------------------- upload */

#define PIECES_MAX 64 /* parts one chunk may span (256 MiB chunks, 5 MiB parts: 53) */

typedef struct pend {
	uint64_t ci;
	ckpt_csum_stream *sum;   /* an uncompressed chunk: its checksum so far (pieces in order) */
	uint64_t next;           /* ... and where its next piece starts */
	uint8_t *buf;            /* a compressed chunk: its stored bytes as read */
	uint64_t lo[PIECES_MAX]; /* the pieces read (their starts in the file) */
	uint32_t npieces;
	uint64_t have;
} pend;

typedef struct up_fill {
	ckptd_shared *sh;
	sh_item *it;
	int fd;
	int dfd;                /* the same file opened O_DIRECT, or -1 */
	const ckpt_shard *s;    /* the rank's file, validated */
	uint8_t hdr[CKPT_FMT_HEADER_LEN]; /* its header block and trailer as validated */
	uint8_t *trailer;
	uint64_t trailer_off, len;
	uint64_t *order;        /* chunk indexes by offset */
	pthread_mutex_t mu;
	pend *pend;
	size_t npend, cappend;
	uint64_t filled;
	int half;
	char why[600];
} up_fill;

static void fill_why(up_fill *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fill_why(up_fill *u, const char *fmt, ...)
{
	pthread_mutex_lock(&u->mu);
	if (!u->why[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(u->why, sizeof(u->why), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&u->mu);
}

static int chunk_ok(up_fill *u, uint64_t ci, const uint8_t *stored)
{
	const ckpt_fmt_footer *f = &u->s->footer;
	ckpt_chunk_scratch cs = { 0 };
	const uint8_t *raw;
	char w[320] = "";
	int r = ckpt__chunk_verify(f, ci, stored, &cs, &raw, w, sizeof(w));
	ckpt__chunk_scratch_free(&cs);
	if (r < 0)
		fill_why(u, "the rank's file does not verify as it is read: %s", w[0] ? w : ckpt_strerror(r));
	return r;
}

/* A piece [lo, hi) of chunk ci (stored at c_off) read at data: gathered
 * until the chunk is whole, then checked. */
static int piece(up_fill *u, uint64_t ci, uint64_t lo, uint64_t hi, const uint8_t *data)
{
	const ckpt_fmt_chunk *c = &u->s->footer.chunks[ci];
	pthread_mutex_lock(&u->mu);
	pend *p = NULL;
	for (size_t i = 0; i < u->npend && !p; i++)
		if (u->pend[i].ci == ci)
			p = &u->pend[i];
	if (!p) {
		if (u->npend == u->cappend) {
			size_t nc = u->cappend ? u->cappend * 2 : 8;
			void *q = realloc(u->pend, nc * sizeof(*u->pend));
			if (!q) {
				pthread_mutex_unlock(&u->mu);
				return -ENOMEM;
			}
			u->pend = q;
			u->cappend = nc;
		}
		p = &u->pend[u->npend];
		memset(p, 0, sizeof(*p));
		p->ci = ci;
		p->next = c->offset;
		if (!(c->flags & CKPT_CHUNK_ZSTD) && c->stored_len == c->raw_len)
			p->sum = ckpt_kern_checksum_begin(c->raw_len);
		else
			p->buf = malloc(c->stored_len);
		if (!p->sum && !p->buf) {
			pthread_mutex_unlock(&u->mu);
			return -ENOMEM;
		}
		u->npend++;
	}
	if (p->sum) {
		/* The client fills its parts in order, once each (storage/s3.h). */
		if (lo != p->next) {
			pthread_mutex_unlock(&u->mu);
			fill_why(u, "chunk %llu's pieces came out of order (at %llu, not %llu)", (unsigned long long)ci,
			         (unsigned long long)lo, (unsigned long long)p->next);
			return -EIO;
		}
		ckpt_kern_checksum_update(p->sum, data, hi - lo);
		p->next = hi;
		p->have += hi - lo;
		int r = 0;
		uint64_t sum = 0;
		if (p->have == c->stored_len) {
			sum = ckpt_kern_checksum_end(p->sum);
			*p = u->pend[--u->npend];
			if (sum != c->checksum)
				r = -CKPT_ECORRUPT;
		}
		pthread_mutex_unlock(&u->mu);
		if (r < 0) {
			const ckpt_fmt_region *rg = &u->s->footer.regions[c->region];
			fill_why(u, "the rank's file does not verify as it is read: region '%s' chunk %llu: checksum "
			         "mismatch (stored %016llx, computed %016llx)", rg->name,
			         (unsigned long long)(ci - rg->chunk_first), (unsigned long long)c->checksum,
			         (unsigned long long)sum);
		}
		return r;
	}
	memcpy(p->buf + (lo - c->offset), data, hi - lo);
	int seen = 0;
	for (uint32_t i = 0; i < p->npieces; i++)
		seen |= p->lo[i] == lo;
	if (!seen) { /* a part sent again brings its piece again */
		if (p->npieces == PIECES_MAX) {
			pthread_mutex_unlock(&u->mu);
			fill_why(u, "a chunk spans more than %d parts: raise CKPT_S3_PART_BYTES", PIECES_MAX);
			return -EINVAL;
		}
		p->lo[p->npieces++] = lo;
		p->have += hi - lo;
	}
	uint8_t *whole = NULL;
	if (p->have == c->stored_len) {
		whole = p->buf;
		*p = u->pend[--u->npend];
	}
	pthread_mutex_unlock(&u->mu);
	if (!whole)
		return 0;
	int r = chunk_ok(u, ci, whole);
	free(whole);
	return r;
}

/* The first chunk (in offset order) that ends after off. */
static size_t first_after(const up_fill *u, uint64_t off)
{
	const ckpt_fmt_chunk *ch = u->s->footer.chunks;
	size_t lo = 0, hi = u->s->footer.chunk_count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const ckpt_fmt_chunk *c = &ch[u->order[mid]];
		if (c->offset + c->stored_len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int same_bytes(up_fill *u, const char *what, const uint8_t *ref, uint64_t ref_off, uint64_t ref_len,
                      const uint8_t *buf, uint64_t off, uint64_t len)
{
	uint64_t lo = CKPT_MAX(off, ref_off), hi = CKPT_MIN(off + len, ref_off + ref_len);
	if (lo >= hi || !memcmp(buf + (lo - off), ref + (lo - ref_off), hi - lo))
		return 0;
	fill_why(u, "the rank's file changed while it was read: its %s differs from the one checked", what);
	return -CKPT_ECORRUPT;
}

/* The rank's file again, O_DIRECT: the ranks write their files with
 * O_DIRECT, so they are on the disk and not in the page cache, and a read
 * through the cache is a copy out of it for every byte (after hashing, the
 * flush's largest cost). Reopened through /proc/self/fd (the same inode,
 * not the path, which may name another file by now) and checked to be it.
 * -1 where that cannot be (no /proc, a file system without O_DIRECT): the
 * reads go through the page cache. */
static int direct_fd(int fd)
{
	char p[64];
	struct stat a, b;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	int d = open(p, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NONBLOCK);
	if (d >= 0 && (fstat(fd, &a) < 0 || fstat(d, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)) {
		close(d);
		d = -1;
	}
	return d;
}

/* [off, off + len) of the rank's file into buf: the whole blocks O_DIRECT
 * when off and buf allow it, the rest (a last part's tail) through the
 * page cache. */
static int read_part(up_fill *u, uint8_t *buf, size_t len, uint64_t off)
{
	size_t head = 0;
	if (u->dfd >= 0 && off % CKPT_ALIGN == 0 && (uintptr_t)buf % CKPT_ALIGN == 0)
		head = len / CKPT_ALIGN * CKPT_ALIGN;
	if (head) {
		int r = ckpt__pread_full(u->dfd, buf, head, off);
		if (r == -EINVAL) /* the file system wants a larger alignment: through the cache */
			head = 0;
		else if (r < 0)
			return r;
	}
	return len > head ? ckpt__pread_full(u->fd, buf + head, len - head, off + head) : 0;
}

static int fill(void *arg, uint64_t off, void *vbuf, size_t len)
{
	up_fill *u = arg;
	uint8_t *buf = vbuf;
	int r;
	if (off > u->len || len > u->len - off)
		return -EINVAL;
	if ((r = ckptd__sh_pace(u->sh, len)) < 0)
		return r;
	if ((r = read_part(u, buf, len, off)) < 0) {
		fill_why(u, "reading the rank's file: %s", strerror(-r));
		return r;
	}
	if ((r = same_bytes(u, "header", u->hdr, 0, sizeof(u->hdr), buf, off, len)) < 0 ||
	    (r = same_bytes(u, "footer", u->trailer, u->trailer_off, u->len - u->trailer_off, buf, off, len)) < 0)
		return r;
	const ckpt_fmt_footer *f = &u->s->footer;
	for (size_t i = first_after(u, off); i < f->chunk_count; i++) {
		uint64_t ci = u->order[i];
		const ckpt_fmt_chunk *c = &f->chunks[ci];
		if (c->offset >= off + len)
			break;
		uint64_t lo = CKPT_MAX(off, c->offset), hi = CKPT_MIN(off + len, c->offset + c->stored_len);
		if (lo == c->offset && hi == c->offset + c->stored_len)
			r = chunk_ok(u, ci, buf + (c->offset - off));
		else
			r = piece(u, ci, lo, hi, buf + (lo - off));
		if (r < 0)
			return r;
	}
	pthread_mutex_lock(&u->mu);
	u->filled += len;
	int half = !u->half && u->filled * 2 >= u->len;
	u->half |= half;
	pthread_mutex_unlock(&u->mu);
	if (half && (r = ckpt__fault(&u->sh->a->faults, "agent.mid_shared_flush")) < 0)
		return r;
	return 0;
}

static int by_offset(const void *x, const void *y, void *arg)
{
	const ckpt_fmt_chunk *c = arg;
	uint64_t a = c[*(const uint64_t *)x].offset, b = c[*(const uint64_t *)y].offset;
	return a < b ? -1 : a > b;
}

/* The object at key is the rank's shard already (an earlier run's upload):
 * 1; another run's shard of the version: -EEXIST; none or another: 0. */
static int in_place(ckptd_shared *sh, sh_item *it, const char *key, const ckpt_shard *ss)
{
	char why[512] = "";
	uint64_t size = 0;
	int r = ckpt_s3_head(sh->tree->s3, sh->tree->bucket, key, &size, why, sizeof(why));
	if (r == -ENOENT)
		return 0;
	if (r < 0) {
		snprintf(it->why, sizeof(it->why), "%s", why);
		return r;
	}
	if (size != ss->file_length || size < CKPT_FMT_HEADER_LEN + CKPT_FMT_TAIL_LEN)
		return 0;
	uint8_t hdr[CKPT_FMT_HEADER_USED], tail[CKPT_FMT_TAIL_LEN];
	ckpt_s3_range rg[2] = { { 0, sizeof(hdr), hdr }, { size - CKPT_FMT_TAIL_LEN, CKPT_FMT_TAIL_LEN, tail } };
	if ((r = ckpt_s3_get_ranges(sh->tree->s3, sh->tree->bucket, key, rg, 2, why, sizeof(why))) < 0) {
		if (r == -ENOENT)
			return 0;
		snprintf(it->why, sizeof(it->why), "%s", why);
		return r;
	}
	ckpt_shard ds;
	if (ckpt__shard_parse_parts(&ds, size, hdr, sizeof(hdr), tail, NULL, why, sizeof(why)) < 0)
		return 0; /* not a shard: replaced */
	int same = ckptd__sh_same_shard(&ds, it) && ds.tail.footer_checksum == ss->tail.footer_checksum;
	int other = ckptd__sh_same_shard(&ds, it) && ds.header.lineage && ss->header.lineage &&
	            ds.header.lineage != ss->header.lineage;
	ckpt__shard_close(&ds);
	if (same)
		return 1;
	if (other) {
		snprintf(it->why, sizeof(it->why), "the object store holds another run's shard of this version; not replaced");
		return -EEXIST;
	}
	return 0;
}

int ckptd__sh_s3_copy(ckptd_shared *sh, sh_item *it)
{
	char key[CKPT_S3TREE_KEY_MAX], why[600] = "", e[600] = "";
	ckpt_shard ss, vs;
	up_fill u = { .sh = sh, .it = it, .fd = -1, .dfd = -1 };
	int err, have_vs = 0;
	pthread_mutex_init(&u.mu, NULL);
	if ((err = ckpt__s3tree_key(sh->tree, key, sizeof(key), it->job, it->version, it->rank)) < 0)
		return err;
	if ((err = ckpt__shard_open(it->src, &ss, why, sizeof(why))) < 0) {
		snprintf(it->why, sizeof(it->why), "the rank's file: %.900s", why);
		pthread_mutex_destroy(&u.mu);
		return err;
	}
	if (!ckptd__sh_same_shard(&ss, it)) {
		snprintf(it->why, sizeof(it->why), "%.700s holds job %s version %llu rank %u", it->src, ss.header.job,
		         (unsigned long long)ss.header.version, ss.header.rank);
		err = -CKPT_ECORRUPT;
		goto out;
	}
	if ((err = in_place(sh, it, key, &ss)) != 0) {
		if (err > 0) {
			it->placed = 1;
			err = 0;
		}
		goto out;
	}
	/* The header and trailer the parts are held to: read here once and
	 * validated as a whole (their checksums), and the same as the file's. */
	u.fd = ss.fd;
	u.dfd = direct_fd(ss.fd);
	u.len = ss.file_length;
	u.trailer_off = ss.tail.footer_offset;
	if (!(u.trailer = malloc(u.len - u.trailer_off)) ||
	    !(u.order = malloc((ss.footer.chunk_count + 1) * sizeof(*u.order)))) {
		err = -ENOMEM;
		goto out;
	}
	if ((err = ckpt__pread_full(ss.fd, u.hdr, sizeof(u.hdr), 0)) < 0 ||
	    (err = ckpt__pread_full(ss.fd, u.trailer, u.len - u.trailer_off, u.trailer_off)) < 0) {
		snprintf(it->why, sizeof(it->why), "reading %.700s: %s", it->src, strerror(-err));
		goto out;
	}
	uint8_t *tail = u.trailer + (u.len - u.trailer_off) - CKPT_FMT_TAIL_LEN;
	if ((err = ckpt__shard_parse_parts(&vs, u.len, u.hdr, sizeof(u.hdr), tail, NULL, why, sizeof(why))) < 0 ||
	    (err = ckpt__shard_parse_parts(&vs, u.len, u.hdr, sizeof(u.hdr), tail, u.trailer, why, sizeof(why))) < 0) {
		snprintf(it->why, sizeof(it->why), "the rank's file: %.900s", why);
		goto out;
	}
	have_vs = 1;
	if (!ckptd__sh_same_shard(&vs, it) || vs.tail.footer_checksum != ss.tail.footer_checksum ||
	    vs.footer.chunk_count != ss.footer.chunk_count) {
		snprintf(it->why, sizeof(it->why), "the rank's file changed while it was opened");
		err = -CKPT_ECORRUPT;
		goto out;
	}
	u.s = &vs;
	for (uint64_t i = 0; i < vs.footer.chunk_count; i++)
		u.order[i] = i;
	qsort_r(u.order, vs.footer.chunk_count, sizeof(*u.order), by_offset, vs.footer.chunks);
	err = ckpt_s3_upload(sh->tree->s3, sh->tree->bucket, key, u.len, fill, &u, e, sizeof(e));
	if (err == 0 && u.npend) { /* every byte was read, so every chunk was whole */
		snprintf(it->why, sizeof(it->why), "%zu chunks were not read whole", u.npend);
		err = -EIO;
	}
	if (err < 0) {
		if (err != -ECANCELED && !it->why[0])
			snprintf(it->why, sizeof(it->why), "uploading %.300s: %.600s", key, u.why[0] ? u.why : e[0] ? e : ckpt_strerror(err));
		goto out;
	}
	it->placed = 1;
	it->copied = u.len;
out:
	for (size_t i = 0; i < u.npend; i++) {
		free(u.pend[i].buf);
		if (u.pend[i].sum)
			ckpt_kern_checksum_end(u.pend[i].sum);
	}
	free(u.pend);
	if (u.dfd >= 0)
		close(u.dfd);
	free(u.trailer);
	free(u.order);
	if (have_vs)
		ckpt__shard_close(&vs);
	ckpt__shard_close(&ss);
	pthread_mutex_destroy(&u.mu);
	if (err < 0 && !it->why[0])
		snprintf(it->why, sizeof(it->why), "%s", ckpt_strerror(err));
	return err;
}

int ckptd__sh_s3_mark(ckptd_shared *sh, sh_item *it)
{
	ckpt_shared_mark mk = { it->world_size, it->lineage };
	char e[600] = "";
	int err = ckpt__s3tree_marker_write(sh->tree, it->job, it->version, &mk, e, sizeof(e));
	if (err < 0)
		snprintf(it->why, sizeof(it->why), "%s", e[0] ? e : ckpt_strerror(err));
	return err;
}

int ckptd__sh_s3_delete(ckptd_shared *sh, const char *job, uint64_t version, const uint32_t *ranks, size_t n)
{
	char e[600] = "";
	int r = ckpt__s3tree_delete(sh->tree, job, version, ranks, n, e, sizeof(e));
	if (r < 0)
		CKPTD_ERROR(sh->a->log, NULL, job, "version %llu: deleting its SHARED objects in %s failed: %s",
		            (unsigned long long)version, sh->tree->url, e[0] ? e : strerror(-r));
	return r;
}

void ckptd__sh_s3_unplace(ckptd_shared *sh, const sh_item *it)
{
	char key[CKPT_S3TREE_KEY_MAX], e[600] = "";
	if (ckpt__s3tree_key(sh->tree, key, sizeof(key), it->job, it->version,
	                     it->kind == SH_MARK ? CKPT_S3TREE_MARKER : it->rank) < 0)
		return;
	const char *k[1] = { key };
	if (ckpt_s3_delete(sh->tree->s3, sh->tree->bucket, k, 1, e, sizeof(e)) < 0)
		CKPTD_WARN(sh->a->log, NULL, it->job, "version %llu: removing %s: %s", (unsigned long long)it->version, key, e);
}
