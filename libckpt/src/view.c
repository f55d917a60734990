/* The public read API (ckpt.h, "Reading a version"): a committed version
 * of a root opened without a context, its global tensors listed, any byte
 * range or box of one read, every chunk verified. Built on the global view
 * (format/global.h) with the ranks' shard files as the source: under the
 * root, or objects of the SHARED tier on an object store when the root is
 * s3://BUCKET/PREFIX (format/s3tree.h), read with ranged GETs. */
#include "base/common.h"
#include "format/global.h"
#include "format/index.h"
#include "format/s3tree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define VIEW_DEPTH 8
/* The most ranks an s3:// root's commit marker may name: the bucket is not
 * trusted, and the view holds a shard record per rank. */
#define VIEW_S3_MAX_WORLD (1u << 17)

struct ckpt_view {
	char job[65];
	uint64_t version;
	uint32_t world;
	ckpt_shard *shards;
	char (*paths)[4096];
	const ckpt_fmt_footer **footers;
	ckpt_gview g;
	ckpt_s3tree *s3;           /* an s3:// root: the client; paths are the objects' keys */
	uint8_t *bufs[VIEW_DEPTH]; /* read buffers, allocated on the first read */
	size_t buf_bytes;
	int direct;
	char why[512];
};

void ckpt_view_close(ckpt_view *v)
{
	if (!v)
		return;
	ckpt__gview_free(&v->g);
	for (uint32_t r = 0; v->shards && r < v->world; r++)
		ckpt__shard_close(&v->shards[r]);
	for (int i = 0; i < VIEW_DEPTH; i++)
		free(v->bufs[i]);
	if (v->s3) {
		ckpt__s3tree_close(v->s3);
		free(v->s3);
	}
	free(v->shards);
	free(v->paths);
	free(v->footers);
	free(v);
}

/* Which version: the one asked for, COMMITTED; or the newest COMMITTED. */
static int pick_version(ckpt_index *ix, const char *job, uint64_t version, ckpt_idx_version *rec, uint64_t *out,
                        char *why, size_t cap)
{
	if (version == CKPT_LATEST) {
		uint64_t *vs = NULL;
		size_t n = 0;
		CKPT_TRY(ckpt__index_select(ix, job, CKPT_STATE_COMMITTED, 0, &vs, &n));
		if (!n) {
			free(vs);
			ckpt__errf(why, cap, "job %s has no committed version", job);
			return -CKPT_ENOVERSION;
		}
		version = vs[n - 1];
		free(vs);
	}
	int err = ckpt__index_get(ix, job, version, rec);
	if (err == -ENOENT || (err == 0 && rec->state != CKPT_STATE_COMMITTED)) {
		ckpt__errf(why, cap, "job %s version %llu is %s", job, (unsigned long long)version,
		    err ? "not in the index" : ckpt_state_name(rec->state));
		return -CKPT_ENOVERSION;
	}
	if (err < 0) {
		ckpt__errf(why, cap, "index: %s", ckpt_strerror(err));
		return err;
	}
	*out = version;
	return 0;
}

static int open_rank(ckpt_view *v, ckpt_index *ix, const char *root, uint32_t r, char *why, size_t cap)
{
	char w[400] = "";
	ckpt_idx_shard rec;
	int err = ckpt__index_get_shard(ix, v->job, v->version, r, &rec);
	if (err < 0) {
		ckpt__errf(why, cap, "rank %u: no shard record in the index", r);
		return -CKPT_ECORRUPT;
	}
	CKPT_TRY(ckpt__shard_path(v->paths[r], sizeof(v->paths[r]), root, v->job, v->version, r));
	if ((err = ckpt__shard_open(v->paths[r], &v->shards[r], w, sizeof(w))) < 0) {
		ckpt__errf(why, cap, "rank %u: %s", r, w);
		v->shards[r].fd = -1;
		return err == -ENOENT ? -CKPT_ECORRUPT : err;
	}
	const ckpt_fmt_header *h = &v->shards[r].header;
	if (h->version != v->version || h->rank != r || h->world_size != v->world || strcmp(h->job, v->job) ||
	    v->shards[r].tail.footer_checksum != rec.footer_checksum) {
		ckpt__errf(why, cap, "%s is not the shard the index recorded", v->paths[r]);
		return -CKPT_ECORRUPT;
	}
	v->footers[r] = &v->shards[r].footer;
	return 0;
}

/* The shards' arrays for v->world ranks (their paths: files only; an
 * object's key is computed when it is read). */
static int alloc_ranks(ckpt_view *v, int paths)
{
	v->shards = calloc(v->world, sizeof(*v->shards));
	v->paths = paths ? calloc(v->world, sizeof(*v->paths)) : NULL;
	v->footers = calloc(v->world, sizeof(*v->footers));
	if (!v->shards || (paths && !v->paths) || !v->footers)
		return -ENOMEM;
	for (uint32_t r = 0; r < v->world; r++)
		v->shards[r].fd = -1;
	return 0;
}

/* An s3:// root: a version is committed when its marker is there (the
 * agents write it last); CKPT_LATEST is the newest with one (a LIST: the
 * root holds no index). Each rank's object opened by its computed key. */
static int open_s3(ckpt_view *v, const char *url, uint64_t version, char *why, size_t cap)
{
	char e[700] = "";
	ckpt_shared_mark mk;
	int err;
	if (!(v->s3 = calloc(1, sizeof(*v->s3))))
		return -ENOMEM;
	if ((err = ckpt__s3tree_open(v->s3, url, e, sizeof(e))) < 0) {
		ckpt__errf(why, cap, "%s", e[0] ? e : strerror(-err));
		free(v->s3);
		v->s3 = NULL;
		return err;
	}
	if (version == CKPT_LATEST) {
		uint64_t *vs = NULL;
		size_t n = 0;
		if ((err = ckpt__s3tree_versions(v->s3, v->job, &vs, &n, e, sizeof(e))) < 0) {
			ckpt__errf(why, cap, "listing %s: %s", url, e[0] ? e : strerror(-err));
			return err;
		}
		err = -CKPT_ENOVERSION;
		for (size_t i = n; i-- > 0 && err == -CKPT_ENOVERSION;) {
			int r = ckpt__s3tree_marker_read(v->s3, v->job, vs[i], &mk, e, sizeof(e));
			if (r == 0) {
				version = vs[i];
				err = 0;
			} else if (r != -ENOENT && r != -CKPT_ECORRUPT) {
				err = r;
			}
		}
		free(vs);
		if (err == -CKPT_ENOVERSION) {
			ckpt__errf(why, cap, "job %s has no committed version in %s", v->job, url);
			return err;
		}
		if (err < 0) {
			ckpt__errf(why, cap, "%s: %s", url, e[0] ? e : strerror(-err));
			return err;
		}
	} else if ((err = ckpt__s3tree_marker_read(v->s3, v->job, version, &mk, e, sizeof(e))) < 0) {
		if (err == -ENOENT || err == -CKPT_ECORRUPT) {
			ckpt__errf(why, cap, "job %s version %llu has no commit marker in %s", v->job,
			           (unsigned long long)version, url);
			return -CKPT_ENOVERSION;
		}
		ckpt__errf(why, cap, "%s: %s", url, e[0] ? e : strerror(-err));
		return err;
	}
	v->version = version;
	v->world = mk.world_size;
	if (!v->world || v->world > VIEW_S3_MAX_WORLD) {
		ckpt__errf(why, cap, "version %llu's commit marker in %s names %u ranks", (unsigned long long)version, url,
		           v->world);
		return -CKPT_ECORRUPT;
	}
	CKPT_TRY(alloc_ranks(v, 0));
	uint64_t lineage = 0;
	char key[CKPT_S3TREE_KEY_MAX];
	for (uint32_t r = 0; r < v->world; r++) {
		CKPT_TRY(ckpt__s3tree_key(v->s3, key, sizeof(key), v->job, version, r));
		if ((err = ckpt__s3tree_shard_open(v->s3, key, &v->shards[r], e, sizeof(e))) < 0) {
			ckpt__errf(why, cap, "rank %u: %s: %s", r, key, e[0] ? e : strerror(-err));
			v->shards[r].fd = -1;
			return err == -ENOENT ? -CKPT_ECORRUPT : err;
		}
		const ckpt_fmt_header *h = &v->shards[r].header;
		if (!r)
			lineage = h->lineage;
		if (h->version != version || h->rank != r || h->world_size != v->world || strcmp(h->job, v->job) ||
		    (mk.lineage && h->lineage && h->lineage != mk.lineage) || h->lineage != lineage) {
			ckpt__errf(why, cap, "%s is not rank %u's shard of the version committed", key, r);
			return -CKPT_ECORRUPT;
		}
		v->footers[r] = &v->shards[r].footer;
	}
	return 0;
}

int ckpt_view_open(const char *root, const char *job, uint64_t version, ckpt_view **out, char *why, size_t whycap)
{
	char ixdir[4096];
	struct stat st;
	ckpt_index *ix = NULL;
	ckpt_logger lg;
	ckpt_idx_version rec;
	int err;
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!root || !job)
		return -EINVAL;
	if (ckpt__job_valid(job) < 0) {
		ckpt__errf(why, whycap, "'%s' is not a valid job id", job);
		return -CKPT_ENAME;
	}
	if (ckpt__s3tree_is_url(root)) {
		ckpt_view *v = calloc(1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		snprintf(v->job, sizeof(v->job), "%s", job);
		if ((err = open_s3(v, root, version, why, whycap)) < 0 ||
		    (err = ckpt__gview_build(&v->g, v->footers, v->world, why, whycap)) < 0) {
			ckpt_view_close(v);
			return err;
		}
		*out = v;
		return 0;
	}
	/* Open, never create: a mistyped root is an error, not a new index. */
	if (snprintf(ixdir, sizeof(ixdir), "%s/index", root) >= (int)sizeof(ixdir))
		return -ENAMETOOLONG;
	if (stat(ixdir, &st) < 0) {
		err = -errno;
		ckpt__errf(why, whycap, "%s: %s", ixdir, strerror(errno));
		return err;
	}
	ckpt_view *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	snprintf(v->job, sizeof(v->job), "%s", job);
	v->direct = 1;
	ckpt__logger_init(&lg, job, -1);
	if ((err = ckpt__index_open(root, &lg, &ix)) < 0) {
		ckpt__errf(why, whycap, "index of %s: %s", root, ckpt_strerror(err));
		goto fail;
	}
	if ((err = pick_version(ix, job, version, &rec, &v->version, why, whycap)) < 0)
		goto fail;
	v->world = rec.world_size;
	if ((err = alloc_ranks(v, 1)) < 0)
		goto fail;
	for (uint32_t r = 0; r < v->world; r++)
		if ((err = open_rank(v, ix, root, r, why, whycap)) < 0)
			goto fail;
	ckpt__index_close(ix);
	ix = NULL;
	if ((err = ckpt__gview_build(&v->g, v->footers, v->world, why, whycap)) < 0)
		goto fail;
	*out = v;
	return 0;
fail:
	ckpt__index_close(ix);
	ckpt_view_close(v);
	return err;
}

uint64_t ckpt_view_version(const ckpt_view *v)
{
	return v ? v->version : 0;
}

uint32_t ckpt_view_world_size(const ckpt_view *v)
{
	return v ? v->world : 0;
}

size_t ckpt_view_count(const ckpt_view *v)
{
	return v ? v->g.ntensors : 0;
}

const char *ckpt_view_error(const ckpt_view *v)
{
	return v ? v->why : "";
}

int ckpt_view_tensor(const ckpt_view *v, size_t i, ckpt_tensor_info *out)
{
	if (!v || !out || i >= v->g.ntensors || (out->size && out->size < sizeof(*out)))
		return -EINVAL;
	const ckpt_gtensor *t = &v->g.tensors[i];
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	out->name = t->name;
	out->dtype = (ckpt_dtype)t->dtype;
	out->ndim = t->ndim;
	memcpy(out->shape, t->shape, t->ndim * sizeof(uint64_t));
	out->bytes = t->bytes;
	out->missing = t->missing;
	out->npieces = t->npieces;
	return 0;
}

int ckpt_view_find(const ckpt_view *v, const char *name, size_t *i)
{
	if (!v || !name || !i)
		return -EINVAL;
	const ckpt_gtensor *t = ckpt__gview_find(&v->g, name);
	if (!t)
		return -ENOENT;
	*i = (size_t)(t - v->g.tensors);
	return 0;
}

int ckpt_view_piece(const ckpt_view *v, size_t i, uint32_t j, ckpt_piece_info *out)
{
	if (!v || !out || i >= v->g.ntensors || j >= v->g.tensors[i].npieces ||
	    (out->size && out->size < sizeof(*out)))
		return -EINVAL;
	const ckpt_gtensor *t = &v->g.tensors[i];
	const ckpt_gpiece *p = &t->pieces[j];
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	out->rank = p->rank;
	out->replicas = p->replicas;
	out->bytes = v->footers[p->rank]->regions[p->region].bytes;
	memcpy(out->offsets, p->off, t->ndim * sizeof(uint64_t));
	memcpy(out->extents, p->ext, t->ndim * sizeof(uint64_t));
	return 0;
}

/* The source: the rank's file, with the view's buffers. */
static int file_read(void *self, uint32_t rank, const uint64_t *chunks, size_t n, ckpt_gchunk_fn fn, void *arg,
                     char *why, size_t cap)
{
	ckpt_view *v = self;
	size_t need = CKPT_ALIGN_UP(v->footers[rank]->chunk_bytes, CKPT_ALIGN);
	if (need > v->buf_bytes) {
		for (int i = 0; i < VIEW_DEPTH; i++) {
			free(v->bufs[i]);
			if (posix_memalign((void **)&v->bufs[i], CKPT_ALIGN, need)) {
				v->bufs[i] = NULL;
				v->buf_bytes = 0;
				return -ENOMEM;
			}
		}
		v->buf_bytes = need;
	}
	ckpt_chunk_read_opts o = { NULL, VIEW_DEPTH, v->direct, v->bufs, VIEW_DEPTH, v->buf_bytes };
	int err;
	if (v->s3) {
		char key[CKPT_S3TREE_KEY_MAX];
		CKPT_TRY(ckpt__s3tree_key(v->s3, key, sizeof(key), v->job, v->version, rank));
		err = ckpt__s3tree_chunks_read(v->s3, key, &v->shards[rank], chunks, n, v->bufs, VIEW_DEPTH, v->buf_bytes, fn,
		                               arg, why, cap);
	} else {
		err = ckpt__chunks_read_file(v->paths[rank], &v->shards[rank], &o, chunks, n, fn, arg, why, cap);
	}
	if (err < 0 && why && why[0] && !strstr(why, "rank")) {
		char tmp[512];
		snprintf(tmp, sizeof(tmp), "rank %u: %s", rank, why);
		snprintf(why, cap, "%s", tmp);
	}
	return err;
}

typedef struct buf_put {
	uint8_t *buf;
	uint64_t cap;
} buf_put;

static int put_buf(void *arg, uint64_t off, const void *data, size_t len)
{
	buf_put *b = arg;
	if (off > b->cap || len > b->cap - off)
		return -EOVERFLOW;
	memcpy(b->buf + off, data, len);
	return 0;
}

int ckpt_view_read(ckpt_view *v, size_t i, uint64_t off, uint64_t len, void *buf)
{
	if (!v || i >= v->g.ntensors || (!buf && len))
		return -EINVAL;
	v->why[0] = 0;
	ckpt_gsource src = { file_read, v };
	buf_put b = { buf, len };
	const ckpt_gtensor *t = &v->g.tensors[i];
	return ckpt__gread_range(&v->g, t, off, len, 0, &src, put_buf, &b, v->why, sizeof(v->why));
}

int ckpt_view_read_box(ckpt_view *v, size_t i, const uint64_t *lo, const uint64_t *cnt, void *buf, size_t cap)
{
	if (!v || i >= v->g.ntensors || !lo || !cnt)
		return -EINVAL;
	const ckpt_gtensor *t = &v->g.tensors[i];
	v->why[0] = 0;
	if (!t->ndim) {
		ckpt__errf(v->why, sizeof(v->why), "region '%s' is a blob (no shape): read it with ckpt_view_read", t->name);
		return -EINVAL;
	}
	uint64_t need = ckpt__dtype_size(t->dtype);
	for (uint8_t d = 0; d < t->ndim; d++)
		if (__builtin_mul_overflow(need, cnt[d], &need))
			return -EOVERFLOW;
	if (need > cap) {
		ckpt__errf(v->why, sizeof(v->why), "the box needs %llu bytes, the buffer holds %zu", (unsigned long long)need,
		    cap);
		return -EOVERFLOW;
	}
	ckpt_gsource src = { file_read, v };
	buf_put b = { buf, cap };
	return ckpt__gread_box(&v->g, t, lo, cnt, &src, put_buf, &b, v->why, sizeof(v->why));
}
