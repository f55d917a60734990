/* One Reed–Solomon group's layout and a lost member's rebuild (ecgroup.h). */
#include "format/ecgroup.h"
#include "format/format.h"
#include "format/global.h"

#include "ckpt_kernels.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ckpt__ecg_init(ckpt_ecg *g, unsigned k, unsigned m, const uint64_t *lens, char *why, size_t cap)
{
	memset(g, 0, sizeof(*g));
	if (k < 1 || m < 1 || k + m > CKPT_EC_MAX_PIECES) {
		snprintf(why, cap, "rs:%u+%u: need K >= 1, M >= 1 and K + M <= %u", k, m, CKPT_EC_MAX_PIECES);
		return -EINVAL;
	}
	uint64_t longest = 0;
	for (unsigned i = 0; i < k + m; i++)
		longest = lens[i] > longest ? lens[i] : longest;
	if (!longest || longest > (UINT64_MAX >> 8)) {
		snprintf(why, cap, "rs:%u+%u: %s", k, m, longest ? "an image is too long" : "every image is empty");
		return -EINVAL;
	}
	g->k = k;
	g->m = m;
	g->n = k + m;
	g->slice = ((longest + k - 1) / k + CKPT_EC_ALIGN - 1) / CKPT_EC_ALIGN * CKPT_EC_ALIGN;
	memcpy(g->len, lens, (size_t)g->n * sizeof(*lens));
	return 0;
}

unsigned ckpt__ecg_holder(const ckpt_ecg *g, unsigned s, unsigned p)
{
	return p < g->k ? (s + g->m + p) % g->n : (s + (p - g->k)) % g->n;
}

unsigned ckpt__ecg_stripe(const ckpt_ecg *g, unsigned i, unsigned d)
{
	/* i = (s + m + d) mod n */
	return (unsigned)(((uint64_t)i + 2 * g->n - g->m - d) % g->n);
}

uint64_t ckpt__ecg_have(const ckpt_ecg *g, unsigned i, unsigned d)
{
	uint64_t start = (uint64_t)d * g->slice;
	if (start >= g->len[i])
		return 0;
	return g->len[i] - start < g->slice ? g->len[i] - start : g->slice;
}

uint64_t ckpt__ecg_blocks(const ckpt_ecg *g)
{
	return (g->slice + CKPT_ECG_BLOCK - 1) / CKPT_ECG_BLOCK;
}

static uint64_t block_len(const ckpt_ecg *g, uint64_t b)
{
	uint64_t off = b * CKPT_ECG_BLOCK;
	return g->slice - off < CKPT_ECG_BLOCK ? g->slice - off : CKPT_ECG_BLOCK;
}

uint64_t ckpt__ecg_block_sum(const ckpt_ecg *g, const uint8_t *piece, uint64_t have, uint64_t b)
{
	uint64_t off = b * CKPT_ECG_BLOCK, bl = block_len(g, b);
	if (off + bl <= have)
		return ckpt_kern_checksum(piece + off, bl);
	/* The block runs into the zeros past the image: checksum them as if
	 * stored (one such block per piece). */
	uint8_t *tmp = calloc(1, bl ? bl : 1);
	if (!tmp)
		return 0; /* matches no real block's sum but by chance: the piece counts as lost */
	if (off < have)
		memcpy(tmp, piece + off, have - off);
	uint64_t sum = ckpt_kern_checksum(tmp, bl);
	free(tmp);
	return sum;
}

static const char *name_of(const char *const *names, unsigned i, char *buf, size_t cap)
{
	if (names && names[i])
		return names[i];
	snprintf(buf, cap, "member %u", i);
	return buf;
}

/* The buffers of one rebuild: a block of each piece fetched, the data
 * pieces decoded (for a parity piece), the block made. */
typedef struct rb {
	const ckpt_ecg *g;
	const ckpt_ec *e;
	ckpt_ecg_fetch_fn fetch;
	void *arg;
	const char *const *names;
	uint8_t *buf[CKPT_EC_MAX_PIECES], *dec[CKPT_EC_MAX_PIECES], *out;
	char bad[CKPT_EC_MAX_PIECES][96]; /* why each piece of the stripe is not used; "" while it may be */
	/* Members found unreachable: not asked again in later stripes (a
	 * dead node would cost a timeout per stripe). */
	char gone[CKPT_EC_MAX_PIECES][96];
	/* Pieces passed over on the way (unreachable or corrupt, the rebuild
	 * going on from others): what a successful rebuild says in why. */
	char notes[600];
	size_t nnotes;
} rb;

static void rb_note(rb *x, unsigned s, unsigned q)
{
	char nm[32];
	const ckpt_ecg *g = x->g;
	if (x->nnotes >= sizeof(x->notes))
		return;
	x->nnotes += (size_t)snprintf(x->notes + x->nnotes, sizeof(x->notes) - x->nnotes, "%s%s (%s %u of stripe %u): %s",
	                              x->nnotes ? "; " : "passed over ",
	                              name_of(x->names, ckpt__ecg_holder(g, s, q), nm, sizeof(nm)), q < g->k ? "data" : "parity",
	                              q < g->k ? q : q - g->k, s, x->bad[q]);
}

/* A new stripe: every piece may be used but those of unreachable members. */
static void rb_stripe(rb *x, unsigned s)
{
	for (unsigned q = 0; q < x->g->n; q++)
		memcpy(x->bad[q], x->gone[ckpt__ecg_holder(x->g, s, q)], sizeof(x->bad[q]));
}

static int rb_open(rb *x, const ckpt_ecg *g, const ckpt_ec *e, ckpt_ecg_fetch_fn fetch, void *arg,
                   const char *const *names, int parity)
{
	memset(x, 0, sizeof(*x));
	x->g = g;
	x->e = e;
	x->fetch = fetch;
	x->arg = arg;
	x->names = names;
	uint64_t bmax = g->slice < CKPT_ECG_BLOCK ? g->slice : CKPT_ECG_BLOCK;
	for (unsigned p = 0; p < g->n; p++)
		if (!(x->buf[p] = aligned_alloc(CKPT_EC_ALIGN, bmax)))
			return -ENOMEM;
	for (unsigned j = 0; parity && j < g->k; j++)
		if (!(x->dec[j] = aligned_alloc(CKPT_EC_ALIGN, bmax)))
			return -ENOMEM;
	return (x->out = aligned_alloc(CKPT_EC_ALIGN, bmax)) ? 0 : -ENOMEM;
}

static void rb_close(rb *x)
{
	for (unsigned p = 0; p < CKPT_EC_MAX_PIECES; p++) {
		free(x->buf[p]);
		free(x->dec[p]);
	}
	free(x->out);
}

/* Block b of piece p of stripe s into x->out, from the first k good
 * pieces (those marked bad are skipped; a piece found unreachable or
 * corrupt is marked so). */
static int rb_block(rb *x, unsigned s, unsigned p, uint64_t b, char *why, size_t cap)
{
	const ckpt_ecg *g = x->g;
	const unsigned k = g->k, n = g->n;
	uint64_t bl = block_len(g, b);
	const uint8_t *use[CKPT_EC_MAX_PIECES] = { 0 };
	unsigned good = 0;
	for (unsigned q = 0; q < n && good < k; q++) {
		if (x->bad[q][0])
			continue;
		uint64_t sum = 0;
		char fw[200] = "";
		const uint8_t *got = x->buf[q];
		int fr = x->fetch(x->arg, s, q, b, x->buf[q], &got, &sum, fw, sizeof(fw));
		if (fr < 0) {
			snprintf(x->bad[q], sizeof(x->bad[q]), "unreachable: %.70s", fw[0] ? fw : strerror(-fr));
			memcpy(x->gone[ckpt__ecg_holder(g, s, q)], x->bad[q], sizeof(x->gone[0]));
			rb_note(x, s, q);
			continue;
		}
		if (ckpt_kern_checksum(got, bl) != sum) {
			snprintf(x->bad[q], sizeof(x->bad[q]), "checksum mismatch in block %llu", (unsigned long long)b);
			rb_note(x, s, q);
			continue;
		}
		use[q] = got;
		good++;
	}
	if (good < k) {
		char nm[32];
		size_t o = (size_t)snprintf(why, cap, "rs:%u+%u stripe %u: %u of the %u pieces needed are good;", k, g->m,
		                            s, good, k);
		for (unsigned q = 0; q < n && o < cap; q++)
			if (x->bad[q][0])
				o += (size_t)snprintf(why + o, cap - o, " %s (%s %u): %s;",
				                      name_of(x->names, ckpt__ecg_holder(g, s, q), nm, sizeof(nm)),
				                      q < k ? "data" : "parity", q < k ? q : q - k, x->bad[q]);
		return -ENODATA;
	}
	char dw[200];
	int r;
	if (p < k) {
		unsigned want = p;
		if ((r = ckpt_ec_decode(x->e, bl, use, &want, 1, &x->out, dw, sizeof(dw))) < 0)
			goto fail;
		return 0;
	}
	/* A parity piece: the data pieces not fetched are decoded first, then
	 * the row encoded as its holder does it, one data piece at a time. */
	unsigned want[CKPT_EC_MAX_PIECES], nw = 0;
	uint8_t *into[CKPT_EC_MAX_PIECES];
	const uint8_t *data[CKPT_EC_MAX_PIECES];
	for (unsigned j = 0; j < k; j++) {
		data[j] = use[j] ? use[j] : x->dec[j];
		if (!use[j]) {
			want[nw] = j;
			into[nw++] = x->dec[j];
		}
	}
	if (nw && (r = ckpt_ec_decode(x->e, bl, use, want, nw, into, dw, sizeof(dw))) < 0)
		goto fail;
	memset(x->out, 0, bl);
	for (unsigned j = 0; j < k; j++)
		if ((r = ckpt_ec_update(x->e, p - k, j, bl, data[j], x->out)) < 0) {
			snprintf(dw, sizeof(dw), "encode failed");
			goto fail;
		}
	return 0;
fail:
	snprintf(why, cap, "rs:%u+%u stripe %u: %s", k, g->m, s, dw);
	return r;
}

static int check_args(const ckpt_ecg *g, const ckpt_ec *e, unsigned lost, char *why, size_t cap)
{
	if (lost >= g->n || !e || ckpt_ec_k(e) != g->k || ckpt_ec_m(e) != g->m) {
		snprintf(why, cap, "rebuild: bad arguments");
		return -EINVAL;
	}
	return 0;
}

int ckpt__ecg_rebuild(const ckpt_ecg *g, const ckpt_ec *e, unsigned lost, ckpt_ecg_fetch_fn fetch, void *arg,
                      const char *const *names, uint8_t *dst, char *why, size_t cap)
{
	rb x;
	int r = check_args(g, e, lost, why, cap);
	if (r < 0)
		return r;
	if ((r = rb_open(&x, g, e, fetch, arg, names, 0)) < 0)
		goto out;
	for (unsigned d = 0; d < g->k; d++) {
		uint64_t have = ckpt__ecg_have(g, lost, d);
		if (!have)
			continue;
		unsigned s = ckpt__ecg_stripe(g, lost, d);
		rb_stripe(&x, s);
		snprintf(x.bad[d], sizeof(x.bad[d]), "lost");
		for (uint64_t b = 0; b * CKPT_ECG_BLOCK < have; b++) {
			if ((r = rb_block(&x, s, d, b, why, cap)) < 0)
				goto out;
			uint64_t off = b * CKPT_ECG_BLOCK, bl = block_len(g, b), take = have - off < bl ? have - off : bl;
			memcpy(dst + (uint64_t)d * g->slice + off, x.out, take);
		}
	}
	snprintf(why, cap, "%s", x.notes);
out:
	rb_close(&x);
	return r;
}

int ckpt__ecg_rebuild_shard(const ckpt_ecg *g, const ckpt_ec *e, unsigned lost, ckpt_ecg_fetch_fn fetch, void *arg,
                            const char *const *names, uint8_t *dst, char *why, size_t cap)
{
	int r = ckpt__ecg_rebuild(g, e, lost, fetch, arg, names, dst, why, cap);
	if (r < 0)
		return r;
	char notes[600];
	snprintf(notes, sizeof(notes), "%s", why);
	ckpt_shard sh;
	char w[300] = "";
	char nm[32];
	const char *who = name_of(names, lost, nm, sizeof(nm));
	if ((r = ckpt__shard_parse_mem(dst, g->len[lost], &sh, w, sizeof(w))) < 0) {
		snprintf(why, cap, "the shard of %s rebuilt from rs:%u+%u is not a valid image: %s", who, g->k, g->m, w);
		return r;
	}
	ckpt_chunk_scratch cs = { 0 };
	for (uint64_t ci = 0; ci < sh.footer.chunk_count && r == 0; ci++) {
		const uint8_t *raw;
		const ckpt_fmt_chunk *c = &sh.footer.chunks[ci];
		if (c->offset > g->len[lost] || c->stored_len > g->len[lost] - c->offset) {
			snprintf(why, cap, "the shard of %s rebuilt: chunk %llu lies outside the image", who, (unsigned long long)ci);
			r = -CKPT_ECORRUPT;
		} else if ((r = ckpt__chunk_verify(&sh.footer, ci, dst + c->offset, &cs, &raw, w, sizeof(w))) < 0) {
			snprintf(why, cap, "the shard of %s rebuilt from rs:%u+%u: %s", who, g->k, g->m, w);
		}
	}
	ckpt__chunk_scratch_free(&cs);
	ckpt__shard_close(&sh);
	if (r == 0)
		snprintf(why, cap, "%s", notes);
	return r;
}

int ckpt__ecg_rebuild_parity(const ckpt_ecg *g, const ckpt_ec *e, unsigned lost, unsigned t, ckpt_ecg_fetch_fn fetch,
                             void *arg, const char *const *names, uint8_t *dst, char *why, size_t cap)
{
	rb x;
	int r = check_args(g, e, lost, why, cap);
	if (r < 0)
		return r;
	if (t >= g->m) {
		snprintf(why, cap, "rebuild: no parity row %u", t);
		return -EINVAL;
	}
	if ((r = rb_open(&x, g, e, fetch, arg, names, 1)) < 0)
		goto out;
	unsigned s = (lost + g->n - t) % g->n;
	rb_stripe(&x, s);
	snprintf(x.bad[g->k + t], sizeof(x.bad[0]), "lost");
	for (uint64_t b = 0; b < ckpt__ecg_blocks(g); b++) {
		if ((r = rb_block(&x, s, g->k + t, b, why, cap)) < 0)
			goto out;
		memcpy(dst + b * CKPT_ECG_BLOCK, x.out, block_len(g, b));
	}
	snprintf(why, cap, "%s", x.notes);
out:
	rb_close(&x);
	return r;
}
