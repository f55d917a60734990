#include "ckpt_kernels.h"

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include <stdlib.h>
#include <string.h>

/* The leaf hashes of a chunk, folded into its checksum as they come: 64 at
 * a time through a small buffer into the final hash, so any chunk size
 * works without heap. */
typedef struct leaf_fold {
	XXH3_state_t st;
	uint8_t buf[64 * 8];
	size_t n;
} leaf_fold;

static void fold_init(leaf_fold *f, size_t len)
{
	/* reset_withSeed skips deriving the secret when the state's old seed
	 * matches: stack garbage equal to len would leave a stale secret. */
	XXH3_INITSTATE(&f->st);
	XXH3_64bits_reset_withSeed(&f->st, (XXH64_hash_t)len);
	f->n = 0;
}

static void fold_push(leaf_fold *f, uint64_t h)
{
	for (int i = 0; i < 8; i++)
		f->buf[f->n + (size_t)i] = (uint8_t)(h >> (8 * i));
	f->n += 8;
	if (f->n == sizeof(f->buf)) {
		XXH3_64bits_update(&f->st, f->buf, f->n);
		f->n = 0;
	}
}

static uint64_t fold_end(leaf_fold *f)
{
	if (f->n)
		XXH3_64bits_update(&f->st, f->buf, f->n);
	return XXH3_64bits_digest(&f->st);
}

/* The tree checksum of src; with dst, each leaf is first copied there and
 * hashed from the copy, while it is still in the cache: one pass over
 * memory instead of two, and what is hashed is what the caller keeps. */
static uint64_t tree_sum(void *dst, const void *src, size_t len, ckpt_seal_state *seal)
{
	const uint8_t *p = src;
	uint8_t *d = dst;
	leaf_fold f;
	fold_init(&f, len);
	for (size_t off = 0; off < len; off += CKPT_CSUM_LEAF) {
		size_t n = len - off < CKPT_CSUM_LEAF ? len - off : CKPT_CSUM_LEAF;
		const uint8_t *leaf = p + off;
		if (d) {
			memcpy(d + off, leaf, n);
			leaf = d + off;
		}
		fold_push(&f, XXH3_64bits(leaf, n));
		if (seal)
			ckpt_kern_seal_update(seal, NULL, leaf, n);
	}
	return fold_end(&f);
}

struct ckpt_csum_stream {
	leaf_fold fold;             /* the leaf hashes */
	size_t len, fed;
	uint8_t leaf[CKPT_CSUM_LEAF]; /* a leaf cut by a piece's edge */
	size_t nleaf;
};

static void stream_leaf(ckpt_csum_stream *s, const uint8_t *leaf, size_t n)
{
	fold_push(&s->fold, XXH3_64bits(leaf, n));
}

ckpt_csum_stream *ckpt_kern_checksum_begin(size_t len)
{
	ckpt_csum_stream *s = malloc(sizeof(*s));
	if (!s)
		return NULL;
	fold_init(&s->fold, len);
	s->nleaf = s->fed = 0;
	s->len = len;
	return s;
}

void ckpt_kern_checksum_update(ckpt_csum_stream *s, const void *data, size_t n)
{
	const uint8_t *p = data;
	s->fed += n;
	while (n) {
		if (!s->nleaf && n >= CKPT_CSUM_LEAF) {
			stream_leaf(s, p, CKPT_CSUM_LEAF);
			p += CKPT_CSUM_LEAF;
			n -= CKPT_CSUM_LEAF;
			continue;
		}
		size_t k = CKPT_CSUM_LEAF - s->nleaf < n ? CKPT_CSUM_LEAF - s->nleaf : n;
		memcpy(s->leaf + s->nleaf, p, k);
		s->nleaf += k;
		p += k;
		n -= k;
		if (s->nleaf == CKPT_CSUM_LEAF) {
			stream_leaf(s, s->leaf, s->nleaf);
			s->nleaf = 0;
		}
	}
}

uint64_t ckpt_kern_checksum_end(ckpt_csum_stream *s)
{
	if (s->nleaf)
		stream_leaf(s, s->leaf, s->nleaf);
	uint64_t h = fold_end(&s->fold);
	if (s->fed != s->len)
		h = ~h; /* not the chunk's bytes: not its checksum (a reader sees a mismatch) */
	free(s);
	return h;
}

uint64_t ckpt_kern_checksum(const void *data, size_t len)
{
	return tree_sum(NULL, data, len, NULL);
}

uint64_t ckpt_kern_checksum_sealed(const void *data, size_t len, uint64_t *seal)
{
	ckpt_seal_state st;
	ckpt_kern_seal_init(&st);
	uint64_t h = tree_sum(NULL, data, len, &st);
	*seal = ckpt_kern_seal_final(&st);
	return h;
}

uint64_t ckpt_kern_checksum_copy(void *dst, const void *src, size_t len)
{
	return tree_sum(dst, src, len, NULL);
}

void ckpt_kern_checksum_leaves(void *dst, const void *src, size_t len, uint64_t *hashes)
{
	const uint8_t *p = src;
	uint8_t *d = dst;
	for (size_t off = 0, i = 0; off < len; off += CKPT_CSUM_LEAF, i++) {
		size_t n = len - off < CKPT_CSUM_LEAF ? len - off : CKPT_CSUM_LEAF;
		const uint8_t *leaf = p + off;
		if (d) {
			memcpy(d + off, leaf, n);
			leaf = d + off;
		}
		hashes[i] = XXH3_64bits(leaf, n);
	}
}

uint64_t ckpt_kern_checksum_fold(const uint64_t *hashes, size_t len)
{
	leaf_fold f;
	fold_init(&f, len);
	for (size_t i = 0, nleaves = (len + CKPT_CSUM_LEAF - 1) / CKPT_CSUM_LEAF; i < nleaves; i++)
		fold_push(&f, hashes[i]);
	return fold_end(&f);
}

uint64_t ckpt_kern_hash(const void *data, size_t len)
{
	return XXH3_64bits(data, len);
}
