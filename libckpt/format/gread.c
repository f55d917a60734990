/* Reads of a box of a global tensor (global.h): for each piece that meets
 * the box, the runs of bytes the box needs from it, the chunks holding
 * those runs (only those are read), and each verified chunk's bytes copied
 * to their place in the box. */
#include "global.h"
#include "base/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* One piece's part of a box read. A run is the longest stretch contiguous
 * both in the piece and in the box: dimensions m.. of the intersection;
 * runs are enumerated by their index in dimensions 0..m-1, in increasing
 * source order. Offsets here are in elements. */
typedef struct box_plan {
	size_t es;
	uint8_t m;
	uint64_t run;            /* elements per run */
	uint64_t nruns;
	uint64_t outer[CKPT_MAX_DIMS];
	uint64_t sstride[CKPT_MAX_DIMS], dstride[CKPT_MAX_DIMS];
	uint64_t sbase, dbase;
	uint64_t cb;             /* the shard's chunk size */
	uint64_t chunk_first;    /* the region's first chunk */
	ckpt_gput_fn put;
	void *arg;
	uint64_t got;            /* chunks delivered */
} box_plan;

static uint64_t run_at(const box_plan *b, uint64_t q, uint64_t *dst)
{
	uint64_t s = b->sbase, o = b->dbase;
	for (int d = (int)b->m - 1; d >= 0; d--) {
		uint64_t j = q % b->outer[d];
		q /= b->outer[d];
		s += j * b->sstride[d];
		o += j * b->dstride[d];
	}
	if (dst)
		*dst = o;
	return s;
}

static int box_chunk(void *arg, uint64_t ci, const void *raw, size_t len)
{
	box_plan *b = arg;
	uint64_t c0 = (ci - b->chunk_first) * b->cb, c1 = c0 + len;
	/* The last run starting at or before c0 (runs ascend). */
	uint64_t lo = 0, hi = b->nruns;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (run_at(b, mid, NULL) * b->es <= c0)
			lo = mid;
		else
			hi = mid;
	}
	for (uint64_t q = lo; q < b->nruns; q++) {
		uint64_t d, s = run_at(b, q, &d) * b->es, e = s + b->run * b->es;
		if (s >= c1)
			break;
		uint64_t a = CKPT_MAX(s, c0), z = CKPT_MIN(e, c1);
		if (a >= z)
			continue;
		int r = b->put(b->arg, d * b->es + (a - s), (const uint8_t *)raw + (a - c0), z - a);
		if (r < 0)
			return r;
	}
	b->got++;
	return 0;
}

/* Appends chunk k of the region unless it is the last one listed. */
static void add_chunk(uint64_t *list, size_t *n, uint64_t ci)
{
	if (!*n || list[*n - 1] < ci)
		list[(*n)++] = ci;
}

static int read_piece(const ckpt_gview *v, const ckpt_gtensor *t, const ckpt_gpiece *p, const uint64_t *lo,
                      const uint64_t *cnt, const uint64_t *ilo, const uint64_t *icnt, const ckpt_gsource *src,
                      ckpt_gput_fn put, void *arg, char *why, size_t cap)
{
	const ckpt_fmt_footer *f = v->footers[p->rank];
	const ckpt_fmt_region *r = &f->regions[p->region];
	uint8_t nd = t->ndim;
	box_plan b = { .es = ckpt__dtype_size(t->dtype), .cb = f->chunk_bytes, .chunk_first = r->chunk_first,
	               .put = put, .arg = arg };
	uint64_t ss = 1, ds = 1;
	for (int d = nd - 1; d >= 0; d--) {
		b.sstride[d] = ss;
		b.dstride[d] = ds;
		b.sbase += (ilo[d] - p->off[d]) * ss;
		b.dbase += (ilo[d] - lo[d]) * ds;
		ss *= p->ext[d];
		ds *= cnt[d];
	}
	/* Merge trailing dimensions while the intersection spans both the piece
	 * and the box in them. */
	int m = nd - 1;
	b.run = icnt[m];
	while (m > 0 && icnt[m] == p->ext[m] && icnt[m] == cnt[m]) {
		m--;
		b.run *= icnt[m];
	}
	b.m = (uint8_t)m;
	b.nruns = 1;
	for (int d = 0; d < m; d++) {
		b.outer[d] = icnt[d];
		b.nruns *= icnt[d];
	}
	uint64_t *list = malloc(((size_t)r->chunk_count + 1) * sizeof(*list));
	size_t n = 0;
	if (!list)
		return -ENOMEM;
	for (uint64_t q = 0; q < b.nruns; q++) {
		uint64_t s = run_at(&b, q, NULL) * b.es, e = s + b.run * b.es;
		for (uint64_t k = s / b.cb; k <= (e - 1) / b.cb && k < r->chunk_count; k++)
			add_chunk(list, &n, r->chunk_first + k);
	}
	int err = src->read(src->self, p->rank, list, n, box_chunk, &b, why, cap);
	if (err == 0 && b.got != n) {
		ckpt__errf(why, cap, "region '%s' rank %u: %llu of %zu chunks delivered", t->name, p->rank,
		    (unsigned long long)b.got, n);
		err = -CKPT_ECORRUPT;
	}
	free(list);
	return err;
}

int ckpt__gread_box(const ckpt_gview *v, const ckpt_gtensor *t, const uint64_t *lo, const uint64_t *cnt,
                    const ckpt_gsource *src, ckpt_gput_fn put, void *arg, char *why, size_t cap)
{
	uint8_t nd = t->ndim;
	uint64_t want = 1, have = 0;
	if (nd == 0)
		return -EINVAL;
	for (uint8_t d = 0; d < nd; d++) {
		if (lo[d] > t->shape[d] || cnt[d] > t->shape[d] - lo[d]) {
			ckpt__errf(why, cap, "region '%s': the box is outside the shape in dimension %u", t->name, d);
			return -EINVAL;
		}
		want *= cnt[d];
	}
	if (want == 0)
		return 0;
	for (uint32_t i = 0; i < t->npieces; i++) {
		const ckpt_gpiece *p = &t->pieces[i];
		uint64_t ilo[CKPT_MAX_DIMS], icnt[CKPT_MAX_DIMS], vol = 1;
		for (uint8_t d = 0; d < nd && vol; d++) {
			uint64_t a = CKPT_MAX(lo[d], p->off[d]);
			uint64_t z = CKPT_MIN(lo[d] + cnt[d], p->off[d] + p->ext[d]);
			ilo[d] = a;
			icnt[d] = z > a ? z - a : 0;
			vol *= icnt[d];
		}
		if (!vol)
			continue;
		have += vol;
		int err = read_piece(v, t, p, lo, cnt, ilo, icnt, src, put, arg, why, cap);
		if (err < 0)
			return err;
	}
	if (have != want) { /* pieces are disjoint (the view checked), so this counts */
		char b[256];
		size_t k = 0;
		for (uint8_t d = 0; d < nd && k < sizeof(b); d++)
			k += (size_t)snprintf(b + k, sizeof(b) - k, "%s%llu..%llu", d ? "," : "", (unsigned long long)lo[d],
			                      (unsigned long long)(lo[d] + cnt[d]));
		ckpt__errf(why, cap, "region '%s': %llu of the %llu elements of [%s] are in no saved shard", t->name,
		    (unsigned long long)(want - have), (unsigned long long)want, b);
		return -CKPT_EMISMATCH;
	}
	return 0;
}

int ckpt__gread_blob(const ckpt_gview *v, const ckpt_gtensor *t, const ckpt_gpiece *p, uint64_t off, uint64_t len,
                     const ckpt_gsource *src, ckpt_gput_fn put, void *arg, char *why, size_t cap)
{
	const ckpt_fmt_footer *f = v->footers[p->rank];
	const ckpt_fmt_region *r = &f->regions[p->region];
	if (off > r->bytes || len > r->bytes - off) {
		ckpt__errf(why, cap, "region '%s' rank %u: bytes %llu..%llu are beyond its %llu", t->name, p->rank,
		    (unsigned long long)off, (unsigned long long)(off + len), (unsigned long long)r->bytes);
		return -EINVAL;
	}
	if (!len)
		return 0;
	/* A blob is one run. */
	box_plan b = { .es = 1, .m = 0, .run = len, .nruns = 1, .sbase = off, .dbase = 0, .cb = f->chunk_bytes,
	               .chunk_first = r->chunk_first, .put = put, .arg = arg };
	uint64_t *list = malloc(((size_t)r->chunk_count + 1) * sizeof(*list));
	size_t n = 0;
	if (!list)
		return -ENOMEM;
	for (uint64_t k = off / b.cb; k <= (off + len - 1) / b.cb && k < r->chunk_count; k++)
		list[n++] = r->chunk_first + k;
	int err = src->read(src->self, p->rank, list, n, box_chunk, &b, why, cap);
	if (err == 0 && b.got != n) {
		ckpt__errf(why, cap, "region '%s' rank %u: %llu of %zu chunks delivered", t->name, p->rank,
		    (unsigned long long)b.got, n);
		err = -CKPT_ECORRUPT;
	}
	free(list);
	return err;
}

/* A byte range's elements, shifted and clipped to the bytes asked for. */
typedef struct clip {
	ckpt_gput_fn put;
	void *arg;
	uint64_t base; /* where the current box starts in the element range, bytes */
	uint64_t head; /* bytes of the first element before the range */
	uint64_t len;
} clip;

static int clip_put(void *arg, uint64_t off, const void *data, size_t len)
{
	clip *c = arg;
	uint64_t a = c->base + off, z = a + len; /* in the element range */
	uint64_t lo = CKPT_MAX(a, c->head), hi = CKPT_MIN(z, c->head + c->len);
	if (lo >= hi)
		return 0;
	return c->put(c->arg, lo - c->head, (const uint8_t *)data + (lo - a), hi - lo);
}

typedef struct range_walk {
	const ckpt_gview *v;
	const ckpt_gtensor *t;
	const ckpt_gsource *src;
	clip *c;
	uint64_t e_start; /* first element of the range */
	uint64_t lo[CKPT_MAX_DIMS], cnt[CKPT_MAX_DIMS];
	char *why;
	size_t cap;
} range_walk;

/* Emits the box lo[0..d) fixed (count 1), lo[d]..=[a, a+n), rest full. */
static int emit(range_walk *w, uint8_t d, uint64_t a, uint64_t n, uint64_t flat0)
{
	const ckpt_gtensor *t = w->t;
	w->lo[d] = a;
	w->cnt[d] = n;
	for (uint8_t k = (uint8_t)(d + 1); k < t->ndim; k++) {
		w->lo[k] = 0;
		w->cnt[k] = t->shape[k];
	}
	w->c->base = (flat0 - w->e_start) * ckpt__dtype_size(t->dtype);
	return ckpt__gread_box(w->v, t, w->lo, w->cnt, w->src, clip_put, w->c, w->why, w->cap);
}

/* Elements [e0, e1) of the sub-tensor at dimension d (dims before d fixed
 * in w->lo), whose first element is flat index `base`: at most two partial
 * rows recursed into and one full block, each contiguous in row-major order. */
static int walk(range_walk *w, uint8_t d, uint64_t base, uint64_t e0, uint64_t e1)
{
	const ckpt_gtensor *t = w->t;
	if (e0 >= e1)
		return 0;
	uint64_t inner = 1;
	for (uint8_t k = (uint8_t)(d + 1); k < t->ndim; k++)
		inner *= t->shape[k];
	if (inner == 1)
		return emit(w, d, e0, e1 - e0, base + e0);
	uint64_t a = e0 / inner, b = e1 / inner;
	if (e0 % inner) {
		uint64_t stop = CKPT_MIN(e1, (a + 1) * inner);
		w->lo[d] = a;
		w->cnt[d] = 1;
		CKPT_TRY(walk(w, (uint8_t)(d + 1), base + a * inner, e0 - a * inner, stop - a * inner));
		e0 = stop;
		a++;
	}
	if (b > a && e0 < e1) {
		CKPT_TRY(emit(w, d, a, b - a, base + a * inner));
		e0 = b * inner;
	}
	if (e0 < e1) {
		w->lo[d] = e0 / inner;
		w->cnt[d] = 1;
		CKPT_TRY(walk(w, (uint8_t)(d + 1), base + (e0 / inner) * inner, 0, e1 - (e0 / inner) * inner));
	}
	return 0;
}

int ckpt__gread_range(const ckpt_gview *v, const ckpt_gtensor *t, uint64_t off, uint64_t len, uint32_t blob_rank,
                      const ckpt_gsource *src, ckpt_gput_fn put, void *arg, char *why, size_t cap)
{
	if (t->ndim == 0) {
		const ckpt_gpiece *p = NULL;
		for (uint32_t i = 0; i < t->npieces && !p; i++)
			if (t->pieces[i].rank == blob_rank)
				p = &t->pieces[i];
		return ckpt__gread_blob(v, t, p ? p : &t->pieces[0], off, len, src, put, arg, why, cap);
	}
	if (off > t->bytes || len > t->bytes - off) {
		ckpt__errf(why, cap, "region '%s': bytes %llu..%llu are beyond its %llu", t->name, (unsigned long long)off,
		    (unsigned long long)(off + len), (unsigned long long)t->bytes);
		return -EINVAL;
	}
	if (!len)
		return 0;
	size_t es = ckpt__dtype_size(t->dtype);
	clip c = { put, arg, 0, off % es, len };
	range_walk w = { v, t, src, &c, off / es, { 0 }, { 0 }, why, cap };
	return walk(&w, 0, 0, off / es, (off + len + es - 1) / es);
}
