/* The global view of a version (global.h): every rank's regions grouped by
 * name, checked, pieces sorted; overlaps found by a sweep. */
#include "global.h"
#include "base/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

size_t ckpt__dtype_size(uint8_t dtype)
{
	return ckpt_dtype_size((ckpt_dtype)dtype);
}

typedef struct gentry {
	const ckpt_fmt_region *r;
	uint32_t rank, region;
} gentry;

static int cmp_entry(const void *a, const void *b)
{
	const gentry *x = a, *y = b;
	int c = strcmp(x->r->name, y->r->name);
	if (c)
		return c;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Row-major order of boxes by offsets, then by extents, then rank. */
static int cmp_piece_nd(const ckpt_gpiece *x, const ckpt_gpiece *y, uint8_t nd)
{
	for (uint8_t d = 0; d < nd; d++)
		if (x->off[d] != y->off[d])
			return x->off[d] < y->off[d] ? -1 : 1;
	for (uint8_t d = 0; d < nd; d++)
		if (x->ext[d] != y->ext[d])
			return x->ext[d] < y->ext[d] ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int cmp_piece(const void *a, const void *b, void *nd)
{
	return cmp_piece_nd(a, b, *(const uint8_t *)nd);
}

static int same_box(const ckpt_gpiece *x, const ckpt_gpiece *y, uint8_t nd)
{
	for (uint8_t d = 0; d < nd; d++)
		if (x->off[d] != y->off[d] || x->ext[d] != y->ext[d])
			return 0;
	return 1;
}

/* Two copies of one box hold the same bytes: same size and chunking, and
 * every chunk's checksum equal. */
static int same_bytes(const ckpt_gview *v, const ckpt_gpiece *x, const ckpt_gpiece *y)
{
	const ckpt_fmt_footer *fx = v->footers[x->rank], *fy = v->footers[y->rank];
	const ckpt_fmt_region *rx = &fx->regions[x->region], *ry = &fy->regions[y->region];
	if (rx->bytes != ry->bytes || fx->chunk_bytes != fy->chunk_bytes || rx->chunk_count != ry->chunk_count)
		return 0;
	for (uint32_t k = 0; k < rx->chunk_count; k++)
		if (fx->chunks[rx->chunk_first + k].checksum != fy->chunks[ry->chunk_first + k].checksum)
			return 0;
	return 1;
}

/* ---- the sweep: boxes are disjoint iff, along dimension d, each stretch
 * between consecutive boundaries has disjoint cross-sections in the
 * dimensions after d. Recursion happens only where the set of boxes
 * crossing a stretch changed, so a grid of r x c pieces costs O(P log P). */

typedef struct sweep_ev {
	uint64_t at;
	uint32_t box;
	int start; /* 1 start, 0 end */
} sweep_ev;

static int cmp_ev(const void *a, const void *b)
{
	const sweep_ev *x = a, *y = b;
	if (x->at != y->at)
		return x->at < y->at ? -1 : 1;
	return x->start - y->start; /* ends first: touching boxes do not overlap */
}

typedef struct sweep_ctx {
	const ckpt_gpiece *p;
	uint8_t nd;
	uint32_t a, b; /* an overlapping pair, once found */
} sweep_ctx;

static int sweep(sweep_ctx *sc, const uint32_t *boxes, uint32_t n, uint8_t d)
{
	if (n < 2)
		return 0;
	if (d == sc->nd) { /* every dimension overlaps */
		sc->a = boxes[0];
		sc->b = boxes[1];
		return 1;
	}
	sweep_ev *ev = malloc(2 * (size_t)n * sizeof(*ev));
	uint32_t *act = malloc((size_t)n * sizeof(*act)), *pos = malloc((size_t)n * sizeof(*pos));
	uint32_t *sub = malloc((size_t)n * sizeof(*sub));
	int r = 0;
	if (!ev || !act || !pos || !sub) {
		r = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		const ckpt_gpiece *q = &sc->p[boxes[i]];
		ev[2 * i] = (sweep_ev){ q->off[d], i, 1 };
		ev[2 * i + 1] = (sweep_ev){ q->off[d] + q->ext[d], i, 0 };
	}
	qsort(ev, 2 * (size_t)n, sizeof(*ev), cmp_ev);
	uint32_t na = 0;
	int started = 0;
	for (size_t e = 0; e < 2 * (size_t)n && !r; e++) {
		uint32_t i = ev[e].box; /* local index */
		if (ev[e].start) {
			pos[i] = na;
			act[na++] = i;
			started = 1;
		} else {
			uint32_t at = pos[i], last = act[--na];
			act[at] = last;
			pos[last] = at;
		}
		/* The stretch after this coordinate: only a set that gained a box
		 * can newly overlap (a subset of disjoint boxes is disjoint). */
		if (e + 1 < 2 * (size_t)n && ev[e + 1].at == ev[e].at)
			continue;
		if (started && na > 1) {
			for (uint32_t j = 0; j < na; j++)
				sub[j] = boxes[act[j]];
			r = sweep(sc, sub, na, (uint8_t)(d + 1));
		}
		started = 0;
	}
out:
	free(ev);
	free(act);
	free(pos);
	free(sub);
	return r;
}

static int shape_str(char *out, size_t cap, uint8_t nd, const uint64_t *v)
{
	size_t k = 0;
	k += (size_t)snprintf(out + k, cap - k, "[");
	for (uint8_t d = 0; d < nd && k < cap; d++)
		k += (size_t)snprintf(out + k, cap - k, "%s%llu", d ? "," : "", (unsigned long long)v[d]);
	if (k < cap)
		snprintf(out + k, cap - k, "]");
	return 0;
}

/* One name's entries e[0..n) (sorted by rank) into tensor t, pieces at out. */
static int build_tensor(ckpt_gview *v, ckpt_gtensor *t, const gentry *e, uint32_t n, ckpt_gpiece *out, char *why,
                        size_t cap)
{
	const ckpt_fmt_region *r0 = e[0].r;
	char a[200], b[200];
	t->name = r0->name;
	t->dtype = r0->dtype;
	t->ndim = r0->ndim;
	t->shape = r0->global_shape;
	t->pieces = out;
	size_t es = ckpt__dtype_size(r0->dtype);
	if (!es) {
		ckpt__errf(why, cap, "region '%s' (rank %u): dtype %u is not valid", r0->name, e[0].rank, r0->dtype);
		return -CKPT_ECORRUPT;
	}
	for (uint32_t i = 0; i < n; i++) {
		const ckpt_fmt_region *r = e[i].r;
		if (r->dtype != r0->dtype || r->ndim != r0->ndim ||
		    memcmp(r->global_shape, r0->global_shape, r0->ndim * sizeof(uint64_t))) {
			shape_str(a, sizeof(a), r0->ndim, r0->global_shape);
			shape_str(b, sizeof(b), r->ndim, r->global_shape);
			ckpt__errf(why, cap, "region '%s': rank %u holds %s %s, rank %u holds %s %s: shapes disagree", r0->name,
			    e[0].rank, ckpt_dtype_name(r0->dtype), a, e[i].rank, ckpt_dtype_name(r->dtype), b);
			return -CKPT_ECORRUPT;
		}
		out[i] = (ckpt_gpiece){ e[i].rank, e[i].region, r->offsets, r->extents, 0 };
	}
	if (t->ndim == 0) { /* a blob: every rank's copy, by rank */
		t->elems = r0->bytes / es;
		t->bytes = r0->bytes;
		t->npieces = n;
		return 0;
	}
	uint64_t elems = 1, sum = 0;
	for (uint8_t d = 0; d < t->ndim; d++)
		if (__builtin_mul_overflow(elems, t->shape[d], &elems))
			goto too_big;
	if (__builtin_mul_overflow(elems, (uint64_t)es, &t->bytes))
		goto too_big;
	t->elems = elems;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t pe = 1, pb;
		for (uint8_t d = 0; d < t->ndim; d++)
			pe *= out[i].ext[d]; /* <= elems: extents within the shape (decoder) */
		if (__builtin_mul_overflow(pe, (uint64_t)es, &pb) || pb != e[i].r->bytes) {
			shape_str(a, sizeof(a), t->ndim, out[i].ext);
			ckpt__errf(why, cap, "region '%s' rank %u: %llu bytes for extents %s of %s", t->name, out[i].rank,
			    (unsigned long long)e[i].r->bytes, a, ckpt_dtype_name(t->dtype));
			return -CKPT_ECORRUPT;
		}
	}
	qsort_r(out, n, sizeof(*out), cmp_piece, &t->ndim);
	/* Fold replicas: the same box on several ranks, same bytes. */
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (k && same_box(&out[k - 1], &out[i], t->ndim)) {
			if (!same_bytes(v, &out[k - 1], &out[i])) {
				shape_str(a, sizeof(a), t->ndim, out[i].off);
				ckpt__errf(why, cap, "region '%s': ranks %u and %u both hold the piece at %s with different bytes",
				    t->name, out[k - 1].rank, out[i].rank, a);
				return -CKPT_ECORRUPT;
			}
			out[k - 1].replicas++;
			continue;
		}
		out[k++] = out[i];
	}
	t->npieces = k;
	uint32_t *ids = malloc((size_t)k * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	uint32_t nids = 0;
	for (uint32_t i = 0; i < k; i++) {
		uint64_t pe = 1;
		for (uint8_t d = 0; d < t->ndim; d++)
			pe *= out[i].ext[d];
		if (pe) /* an empty piece overlaps nothing (and its end would sort before its start) */
			ids[nids++] = i;
		sum += pe; /* pe <= elems: clamped below, so no overflow */
		if (sum > elems)
			sum = elems + 1; /* an overlap: the sweep says where */
	}
	sweep_ctx sc = { out, t->ndim, 0, 0 };
	int r = sweep(&sc, ids, nids, 0);
	free(ids);
	if (r < 0)
		return r;
	if (r > 0) {
		shape_str(a, sizeof(a), t->ndim, out[sc.a].off);
		shape_str(b, sizeof(b), t->ndim, out[sc.b].off);
		ckpt__errf(why, cap, "region '%s': the pieces of rank %u (at %s) and rank %u (at %s) overlap", t->name,
		    out[sc.a].rank, a, out[sc.b].rank, b);
		return -CKPT_ECORRUPT;
	}
	t->missing = elems - sum; /* disjoint now, so sum <= elems */
	return 0;
too_big:
	ckpt__errf(why, cap, "region '%s': global shape too large", r0->name);
	return -CKPT_ECORRUPT;
}

int ckpt__gview_build(ckpt_gview *v, const ckpt_fmt_footer *const *footers, uint32_t nranks, char *why, size_t cap)
{
	memset(v, 0, sizeof(*v));
	v->nranks = nranks;
	v->footers = footers;
	size_t total = 0;
	for (uint32_t r = 0; r < nranks; r++)
		total += footers[r]->region_count;
	gentry *e = malloc((total + 1) * sizeof(*e));
	v->store = malloc((total + 1) * sizeof(*v->store));
	v->tensors = malloc((total + 1) * sizeof(*v->tensors));
	int err = 0;
	if (!e || !v->store || !v->tensors) {
		err = -ENOMEM;
		goto out;
	}
	size_t k = 0;
	for (uint32_t r = 0; r < nranks; r++)
		for (uint32_t i = 0; i < footers[r]->region_count; i++)
			e[k++] = (gentry){ &footers[r]->regions[i], r, i };
	qsort(e, total, sizeof(*e), cmp_entry);
	for (size_t i = 0; i < total;) {
		size_t j = i + 1;
		while (j < total && !strcmp(e[j].r->name, e[i].r->name))
			j++;
		ckpt_gtensor *t = &v->tensors[v->ntensors++];
		memset(t, 0, sizeof(*t));
		if ((err = build_tensor(v, t, &e[i], (uint32_t)(j - i), &v->store[i], why, cap)) < 0)
			goto out;
		i = j;
	}
out:
	free(e);
	if (err < 0)
		ckpt__gview_free(v);
	return err;
}

void ckpt__gview_free(ckpt_gview *v)
{
	if (!v)
		return;
	free(v->store);
	free(v->tensors);
	v->store = NULL;
	v->tensors = NULL;
	v->ntensors = 0;
}

static int cmp_name(const void *key, const void *elem)
{
	return strcmp(key, ((const ckpt_gtensor *)elem)->name);
}

const ckpt_gtensor *ckpt__gview_find(const ckpt_gview *v, const char *name)
{
	return v->ntensors ? bsearch(name, v->tensors, v->ntensors, sizeof(*v->tensors), cmp_name) : NULL;
}
