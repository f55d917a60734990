/* Geometry of the "xxh3-tree-64k" chunk checksum over a region, shared by
 * the CUDA kernels and the host test that emulates them.
 *
 * A region of len bytes is cut into chunks of chunk bytes (the last may be
 * shorter), each chunk into leaves of CKPT_CSUM_TREE_LEAF bytes (the last may
 * be shorter). Leaf hashes are stored chunk after chunk, every chunk but the
 * last taking exactly lpc slots, so a chunk's leaf hashes are contiguous and
 * its root hash reads them in place:
 *   root(k) = XXH3_64bits_withSeed(leaf hashes of chunk k as LE u64, seed = chunk length). */
#ifndef CKPT_CSUM_TREE_H
#define CKPT_CSUM_TREE_H

#include "xxh3_port.h"

#define CKPT_CSUM_TREE_LEAF 65536u /* CKPT_CSUM_LEAF in ckpt_kernels.h */

typedef struct ckpt_csum_geom {
	uint64_t len;     /* region bytes */
	uint64_t chunk;   /* chunk bytes, > 0 */
	uint64_t lpc;     /* leaves of a full chunk */
	uint64_t nchunks;
	uint64_t nleaves; /* leaf hash slots */
} ckpt_csum_geom;

CKPT_HD uint64_t ckpt_csum_div_up(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

CKPT_HD ckpt_csum_geom ckpt_csum_geom_make(uint64_t len, uint64_t chunk)
{
	ckpt_csum_geom g;
	g.len = len;
	g.chunk = chunk;
	g.lpc = chunk ? ckpt_csum_div_up(chunk, CKPT_CSUM_TREE_LEAF) : 0;
	g.nchunks = chunk ? ckpt_csum_div_up(len, chunk) : 0;
	g.nleaves = 0;
	if (g.nchunks) {
		uint64_t last = len - (g.nchunks - 1) * chunk;
		g.nleaves = (g.nchunks - 1) * g.lpc + ckpt_csum_div_up(last, CKPT_CSUM_TREE_LEAF);
	}
	return g;
}

CKPT_HD uint64_t ckpt_csum_chunk_len(const ckpt_csum_geom *g, uint64_t k)
{
	uint64_t rest = g->len - k * g->chunk;
	return rest < g->chunk ? rest : g->chunk;
}

/* Leaf slot i: its byte offset in the region and its length. */
CKPT_HD void ckpt_csum_leaf_locate(const ckpt_csum_geom *g, uint64_t i, uint64_t *off, uint64_t *n)
{
	uint64_t k = i / g->lpc, j = i % g->lpc;
	uint64_t in = j * CKPT_CSUM_TREE_LEAF;
	uint64_t rest = ckpt_csum_chunk_len(g, k) - in;
	*off = k * g->chunk + in;
	*n = rest < CKPT_CSUM_TREE_LEAF ? rest : CKPT_CSUM_TREE_LEAF;
}

/* Chunk k: its first leaf slot and the byte length of its leaf hashes. */
CKPT_HD void ckpt_csum_chunk_leaves(const ckpt_csum_geom *g, uint64_t k, uint64_t *first, uint64_t *bytes)
{
	*first = k * g->lpc;
	*bytes = 8 * ckpt_csum_div_up(ckpt_csum_chunk_len(g, k), CKPT_CSUM_TREE_LEAF);
}

#endif
