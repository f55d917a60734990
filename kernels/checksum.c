#include "ckpt_kernels.h"

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include <stdlib.h>
#include <string.h>

/* The tree checksum of src; with dst, each leaf is first copied there and
 * hashed from the copy, while it is still in the cache: one pass over
 * memory instead of two, and what is hashed is what the caller keeps. */
static uint64_t tree_sum(void *dst, const void *src, size_t len, ckpt_seal_state *seal)
{
	/* Leaf hashes are folded 64 at a time into a small stack buffer and
	 * streamed into the final hash, so any chunk size works without heap. */
	const uint8_t *p = src;
	uint8_t *d = dst;
	XXH3_state_t st;
	/* reset_withSeed skips deriving the secret when the state's old seed
	 * matches: stack garbage equal to len would leave a stale secret. */
	XXH3_INITSTATE(&st);
	XXH3_64bits_reset_withSeed(&st, (XXH64_hash_t)len);
	uint8_t buf[64 * 8];
	size_t nbuf = 0;
	for (size_t off = 0; off < len; off += CKPT_CSUM_LEAF) {
		size_t n = len - off < CKPT_CSUM_LEAF ? len - off : CKPT_CSUM_LEAF;
		const uint8_t *leaf = p + off;
		if (d) {
			memcpy(d + off, leaf, n);
			leaf = d + off;
		}
		uint64_t h = XXH3_64bits(leaf, n);
		if (seal)
			ckpt_kern_seal_update(seal, NULL, leaf, n);
		for (int i = 0; i < 8; i++)
			buf[nbuf + (size_t)i] = (uint8_t)(h >> (8 * i));
		nbuf += 8;
		if (nbuf == sizeof(buf)) {
			XXH3_64bits_update(&st, buf, nbuf);
			nbuf = 0;
		}
	}
	if (nbuf)
		XXH3_64bits_update(&st, buf, nbuf);
	return XXH3_64bits_digest(&st);
}

struct ckpt_csum_stream {
	XXH3_state_t st;            /* the leaf hashes, streamed */
	uint8_t hashes[64 * 8];     /* leaf hashes not yet streamed */
	size_t nhashes;
	size_t len, fed;
	uint8_t leaf[CKPT_CSUM_LEAF]; /* a leaf cut by a piece's edge */
	size_t nleaf;
};

static void stream_leaf(ckpt_csum_stream *s, const uint8_t *leaf, size_t n)
{
	uint64_t h = XXH3_64bits(leaf, n);
	for (int i = 0; i < 8; i++)
		s->hashes[s->nhashes + (size_t)i] = (uint8_t)(h >> (8 * i));
	s->nhashes += 8;
	if (s->nhashes == sizeof(s->hashes)) {
		XXH3_64bits_update(&s->st, s->hashes, s->nhashes);
		s->nhashes = 0;
	}
}

ckpt_csum_stream *ckpt_kern_checksum_begin(size_t len)
{
	ckpt_csum_stream *s = malloc(sizeof(*s));
	if (!s)
		return NULL;
	XXH3_INITSTATE(&s->st);
	XXH3_64bits_reset_withSeed(&s->st, (XXH64_hash_t)len);
	s->nhashes = s->nleaf = s->fed = 0;
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
	if (s->nhashes)
		XXH3_64bits_update(&s->st, s->hashes, s->nhashes);
	uint64_t h = XXH3_64bits_digest(&s->st);
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
	XXH3_state_t st;
	XXH3_INITSTATE(&st);
	XXH3_64bits_reset_withSeed(&st, (XXH64_hash_t)len);
	uint8_t buf[64 * 8];
	size_t nbuf = 0, nleaves = (len + CKPT_CSUM_LEAF - 1) / CKPT_CSUM_LEAF;
	for (size_t i = 0; i < nleaves; i++) {
		for (int b = 0; b < 8; b++)
			buf[nbuf + (size_t)b] = (uint8_t)(hashes[i] >> (8 * b));
		nbuf += 8;
		if (nbuf == sizeof(buf)) {
			XXH3_64bits_update(&st, buf, nbuf);
			nbuf = 0;
		}
	}
	if (nbuf)
		XXH3_64bits_update(&st, buf, nbuf);
	return XXH3_64bits_digest(&st);
}

uint64_t ckpt_kern_hash(const void *data, size_t len)
{
	return XXH3_64bits(data, len);
}
