/* A Reed–Solomon group of real shard images (libckpt/format/ecgroup.c):
 * members save shards of odd sizes with the library, each member's slices
 * are folded into the parity its holders keep one piece at a time (as the
 * holders do while slices arrive), then for rs:2+1, 4+1, 4+2, 6+3 and 8+2:
 *   - every pattern of 1..M lost members: each lost image rebuilt
 *     bit-exact, and every chunk of it passes its checksum;
 *   - every pattern of M + 1 lost: refused (-ENODATA), the error naming
 *     the stripe and the lost members;
 *   - the layout: each member holds exactly M parity pieces, and is data
 *     in K stripes, one slice each;
 * and for rs:4+2 / 4+1:
 *   - a flipped byte in a data or a parity piece is caught by the block
 *     checksums and that piece counted as lost (rebuild still bit-exact
 *     while losses + corrupt pieces <= M; refused naming the corrupt piece
 *     past that);
 *   - a second loss after a rebuild: the lost member's image and parity
 *     made again on its replacement, then another member lost and
 *     rebuilt (with M = 1 that needs the re-made parity). */
#include "helpers.h"

#include "ckpt.h"
#include "ckpt_kernels.h"
#include "ec.h"
#include "format/ecgroup.h"
#include "format/format.h"
#include "format/global.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMAX 10

typedef struct grp {
	ckpt_ecg g;
	ckpt_ec *e;
	uint8_t *img[NMAX];             /* each member's image, 64-aligned, slice * k bytes (zero tail) */
	uint8_t *par[NMAX][NMAX];       /* [stripe][row], slice bytes */
	uint64_t *dsum[NMAX][NMAX];     /* [member][slice d] block sums, by the data's owner */
	uint64_t *psum[NMAX][NMAX];     /* [stripe][row] block sums, by the holder */
	int lost[NMAX];
	int corrupt_data[NMAX][NMAX];   /* [stripe][d]: the piece as fetched has a flipped byte */
} grp;

static uint8_t *abuf(size_t len)
{
	uint8_t *p = aligned_alloc(CKPT_EC_ALIGN, (len + CKPT_EC_ALIGN) / CKPT_EC_ALIGN * CKPT_EC_ALIGN);
	T_ASSERT(p);
	memset(p, 0, len);
	return p;
}

/* Saves one shard per member (rank i of n) under root and reads them in;
 * a rank saved there already (for a wider group) is read as it is. */
static void make_images(const char *root, unsigned n, size_t base, uint8_t **img, uint64_t *len)
{
	for (unsigned i = 0; i < n; i++) {
		char path[700];
		snprintf(path, sizeof(path), "%s/jobs/ecg/v%020llu/r%06u.ckpt", root, 1ull, i);
		if (access(path, F_OK) == 0)
			goto read; /* made for an earlier case of this group */
		ckpt_config cfg;
		T_OK(ckpt_config_init(&cfg));
		cfg.root = root;
		cfg.job_id = "ecg";
		cfg.rank = i;
		cfg.world_size = n;
		cfg.chunk_bytes = 65536 + 4096 * i; /* chunks straddle slices and blocks */
		cfg.staging_bytes = 16u << 20; /* pre-faulting the default pool is most of a save here */
		ckpt_ctx *ctx;
		T_OK(ckpt_ctx_open(&cfg, &ctx));
		size_t sz[2] = { base + 7919 * i + 13, 1237 * (i + 1) };
		uint8_t *r[2];
		for (int j = 0; j < 2; j++) {
			r[j] = malloc(sz[j]);
			t_fill(r[j], sz[j], 1000 * n + 10 * i + j);
			ckpt_region_desc d;
			char name[16];
			snprintf(name, sizeof(name), "r%d", j);
			ckpt_region_desc_init(&d, name, r[j], sz[j]);
			T_OK(ckpt_region_add(ctx, &d));
		}
		ckpt_handle *h;
		T_OK(ckpt_save(ctx, 1, 0, &h));
		T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, NULL));
		ckpt_handle_free(h);
		ckpt_ctx_close(ctx);
		free(r[0]);
		free(r[1]);
	read:;
		size_t l;
		char *f = t_slurp(path, &l);
		T_ASSERT(f);
		len[i] = l;
		img[i] = (uint8_t *)f;
	}
}

/* The group's parity, as the holders build it: a zeroed piece per
 * stripe and row, each slice folded in when it arrives (here: members in
 * reverse order), then each piece's block sums. */
static void encode(grp *x)
{
	const ckpt_ecg *g = &x->g;
	uint64_t nb = ckpt__ecg_blocks(g);
	for (unsigned s = 0; s < g->n; s++)
		for (unsigned t = 0; t < g->m; t++) {
			x->par[s][t] = abuf(g->slice);
			x->psum[s][t] = calloc(nb, sizeof(uint64_t));
		}
	for (unsigned i = g->n; i-- > 0;)
		for (unsigned d = 0; d < g->k; d++) {
			unsigned s = ckpt__ecg_stripe(g, i, d);
			T_ASSERT(ckpt__ecg_holder(g, s, d) == i);
			uint64_t have = ckpt__ecg_have(g, i, d);
			const uint8_t *slice = x->img[i] + d * g->slice;
			x->dsum[i][d] = calloc(nb, sizeof(uint64_t));
			for (uint64_t b = 0; b < nb; b++)
				x->dsum[i][d][b] = ckpt__ecg_block_sum(g, slice, have, b);
			for (unsigned t = 0; t < g->m; t++)
				T_ASSERT(ckpt_ec_update(x->e, t, d, have, slice, x->par[s][t]) == 0);
		}
	for (unsigned s = 0; s < g->n; s++)
		for (unsigned t = 0; t < g->m; t++)
			for (uint64_t b = 0; b < nb; b++)
				x->psum[s][t][b] = ckpt__ecg_block_sum(g, x->par[s][t], g->slice, b);
}

static int fetch(void *arg, unsigned s, unsigned p, uint64_t b, uint8_t *buf, const uint8_t **data,
                    uint64_t *sum, char *why, size_t cap)
{
	grp *x = arg;
	(void)data; /* copies into buf */
	const ckpt_ecg *g = &x->g;
	unsigned holder = ckpt__ecg_holder(g, s, p);
	if (x->lost[holder]) {
		snprintf(why, cap, "node %u is gone", holder);
		return -EHOSTDOWN;
	}
	uint64_t off = b * CKPT_ECG_BLOCK, bl = g->slice - off < CKPT_ECG_BLOCK ? g->slice - off : CKPT_ECG_BLOCK;
	if (p < g->k) {
		uint64_t have = ckpt__ecg_have(g, holder, p);
		memset(buf, 0, bl);
		if (off < have)
			memcpy(buf, x->img[holder] + p * g->slice + off, have - off < bl ? have - off : bl);
		*sum = x->dsum[holder][p][b];
		if (x->corrupt_data[s][p])
			buf[bl / 2] ^= 0x08;
	} else {
		memcpy(buf, x->par[s][p - g->k] + off, bl);
		*sum = x->psum[s][p - g->k][b];
	}
	return 0;
}

/* Every chunk of a rebuilt image passes its checksum. */
static void check_chunks(const uint8_t *img, uint64_t len)
{
	ckpt_shard sh;
	char why[300];
	if (ckpt__shard_parse_mem(img, len, &sh, why, sizeof(why)) < 0)
		T_FAIL("rebuilt image does not parse: %s", why);
	ckpt_chunk_scratch cs = { 0 };
	for (uint64_t ci = 0; ci < sh.footer.chunk_count; ci++) {
		const uint8_t *raw;
		if (ckpt__chunk_verify(&sh.footer, ci, img + sh.footer.chunks[ci].offset, &cs, &raw, why, sizeof(why)) < 0)
			T_FAIL("rebuilt image, chunk %llu: %s", (unsigned long long)ci, why);
	}
	T_ASSERT(sh.footer.chunk_count > 2);
	ckpt__chunk_scratch_free(&cs);
	ckpt__shard_close(&sh);
}

/* flip >= 0: a bit of member 1's image flipped at that offset before the
 * group is encoded (corrupt at the source). */
static void grp_open(grp *x, const char *root, unsigned k, unsigned m, size_t base, long flip)
{
	memset(x, 0, sizeof(*x));
	uint64_t len[NMAX];
	uint8_t *raw[NMAX];
	make_images(root, k + m, base, raw, len);
	char why[200];
	T_ASSERT(ckpt__ecg_init(&x->g, k, m, len, why, sizeof(why)) == 0);
	T_ASSERT(x->g.slice % 64 == 0 && x->g.slice * k >= len[0]);
	T_ASSERT(ckpt_ec_new(k, m, &x->e, why, sizeof(why)) == 0);
	for (unsigned i = 0; i < k + m; i++) {
		x->img[i] = abuf(x->g.slice * k);
		memcpy(x->img[i], raw[i], len[i]);
		free(raw[i]);
	}
	if (flip >= 0)
		x->img[1][flip] ^= 0x20;
	encode(x);
}

static void grp_close(grp *x)
{
	for (unsigned i = 0; i < NMAX; i++) {
		free(x->img[i]);
		for (unsigned j = 0; j < NMAX; j++) {
			free(x->par[i][j]);
			free(x->dsum[i][j]);
			free(x->psum[i][j]);
		}
	}
	ckpt_ec_free(x->e);
}

/* Each member holds exactly m parity pieces and is data once per slice. */
static void check_layout(const ckpt_ecg *g)
{
	unsigned par[NMAX] = { 0 }, dat[NMAX][NMAX] = { { 0 } };
	for (unsigned s = 0; s < g->n; s++) {
		unsigned seen[NMAX] = { 0 };
		for (unsigned p = 0; p < g->n; p++) {
			unsigned h = ckpt__ecg_holder(g, s, p);
			seen[h]++;
			if (p < g->k)
				dat[h][p]++;
			else
				par[h]++;
		}
		for (unsigned i = 0; i < g->n; i++)
			T_ASSERT(seen[i] == 1); /* a stripe spans every member once */
	}
	for (unsigned i = 0; i < g->n; i++) {
		T_ASSERT(par[i] == g->m);
		for (unsigned d = 0; d < g->k; d++)
			T_ASSERT(dat[i][d] == 1);
	}
}

static void all_patterns(const char *root, unsigned k, unsigned m, size_t base, unsigned want_patterns)
{
	grp x;
	grp_open(&x, root, k, m, base, -1);
	check_layout(&x.g);
	const unsigned n = k + m;
	uint8_t *dst = abuf(x.g.slice * k);
	char names_buf[NMAX][16];
	const char *names[NMAX];
	for (unsigned i = 0; i < n; i++) {
		snprintf(names_buf[i], sizeof(names_buf[i]), "node%u", i);
		names[i] = names_buf[i];
	}
	unsigned ok = 0, refused = 0;
	for (unsigned mask = 1; mask < (1u << n); mask++) {
		unsigned nl = (unsigned)__builtin_popcount(mask);
		if (nl > m + 1)
			continue;
		for (unsigned i = 0; i < n; i++)
			x.lost[i] = mask >> i & 1;
		for (unsigned i = 0; i < n; i++) {
			if (!x.lost[i])
				continue;
			char why[1024] = "";
			memset(dst, 0xee, x.g.len[i]);
			int r = ckpt__ecg_rebuild(&x.g, x.e, i, fetch, &x, names, dst, why, sizeof(why));
			if (nl <= m) {
				if (r != 0)
					T_FAIL("rs:%u+%u lost %#x: rebuilding node%u failed: %s", k, m, mask, i, why);
				if (memcmp(dst, x.img[i], x.g.len[i]))
					T_FAIL("rs:%u+%u lost %#x: node%u not bit-exact", k, m, mask, i);
				if (nl == 1) { /* bit-exact already says it; the chunk checks once per member */
					check_chunks(dst, x.g.len[i]);
					T_ASSERT(ckpt__ecg_rebuild_shard(&x.g, x.e, i, fetch, &x, names, dst, why, sizeof(why)) == 0);
				}
			} else {
				if (r != -ENODATA)
					T_FAIL("rs:%u+%u lost %#x: rebuilding node%u gave %d, not refused", k, m, mask, i, r);
				/* Names the stripe and each lost member but itself. */
				if (!strstr(why, "stripe") || !strstr(why, "unreachable"))
					T_FAIL("rs:%u+%u lost %#x: unclear refusal: %s", k, m, mask, why);
				for (unsigned j = 0; j < n; j++)
					if (x.lost[j] && j != i && !strstr(why, names[j]))
						T_FAIL("rs:%u+%u lost %#x: refusal does not name %s: %s", k, m, mask, names[j], why);
				refused++;
				break; /* one member of the pattern shows it */
			}
		}
		ok += nl <= m;
	}
	if (ok != want_patterns)
		T_FAIL("rs:%u+%u: %u patterns rebuilt, expected %u", k, m, ok, want_patterns);
	printf("rs:%u+%u: slice %llu bytes, %llu blocks/piece: %u loss patterns bit-exact, %u one-too-many refused\n",
	       k, m, (unsigned long long)x.g.slice, (unsigned long long)ckpt__ecg_blocks(&x.g), ok, refused);
	free(dst);
	grp_close(&x);
}

static void corrupt_pieces(const char *root)
{
	grp x;
	grp_open(&x, root, 4, 2, 0, -1);
	uint8_t *dst = abuf(x.g.slice * 4);
	char why[1024];
	/* node1 lost; node1's slice 0 is data piece 0 of its stripe. */
	x.lost[1] = 1;
	unsigned s = ckpt__ecg_stripe(&x.g, 1, 0);
	/* One parity piece of that stripe damaged in memory after its sums. */
	x.par[s][0][x.g.slice - 3] ^= 0x01;
	T_ASSERT(ckpt__ecg_rebuild(&x.g, x.e, 1, fetch, &x, NULL, dst, why, sizeof(why)) == 0);
	T_ASSERT(memcmp(dst, x.img[1], x.g.len[1]) == 0);
	/* The rebuild says what it passed over. */
	char pw[64];
	snprintf(pw, sizeof(pw), "passed over member %u (parity 0 of stripe %u): checksum mismatch",
	         ckpt__ecg_holder(&x.g, s, x.g.k), s);
	if (!strstr(why, pw))
		T_FAIL("the rebuild does not say it passed over the corrupt parity piece (%s): \"%s\"", pw, why);
	/* And a data piece too: now 3 of 6 are unusable in that stripe. */
	unsigned dp = 1;
	x.corrupt_data[s][dp] = 1;
	int r = ckpt__ecg_rebuild(&x.g, x.e, 1, fetch, &x, NULL, dst, why, sizeof(why));
	if (r != -ENODATA || !strstr(why, "checksum mismatch") || !strstr(why, "lost"))
		T_FAIL("two corrupt pieces and a lost one in rs:4+2 must be refused naming them: %d %s", r, why);
	char who[32];
	snprintf(who, sizeof(who), "member %u (data %u)", ckpt__ecg_holder(&x.g, s, dp), dp);
	if (!strstr(why, who))
		T_FAIL("refusal does not name the corrupt data piece (%s): %s", who, why);
	x.par[s][0][x.g.slice - 3] ^= 0x01;
	x.corrupt_data[s][dp] = 0;
	x.lost[1] = 0;
	x.lost[3] = 1;
	unsigned s3 = ckpt__ecg_stripe(&x.g, 3, 0);
	x.par[s3][1][5] ^= 0x80;
	x.corrupt_data[s3][2] = 1;
	memset(dst, 0, x.g.len[3]);
	/* 3 is lost, one parity and one data piece of its stripe corrupt: refused... */
	r = ckpt__ecg_rebuild(&x.g, x.e, 3, fetch, &x, NULL, dst, why, sizeof(why));
	T_ASSERT(r == -ENODATA);
	/* ...one corrupt piece and the loss: fine. */
	x.corrupt_data[s3][2] = 0;
	T_ASSERT(ckpt__ecg_rebuild(&x.g, x.e, 3, fetch, &x, NULL, dst, why, sizeof(why)) == 0);
	T_ASSERT(memcmp(dst, x.img[3], x.g.len[3]) == 0);
	printf("rs:4+2: corrupt data and parity pieces counted as lost\n");
	free(dst);
	grp_close(&x);
}

/* Lose a, rebuild a's image and its parity onto a replacement, lose b. */
static void second_loss(const char *root, unsigned k, unsigned m)
{
	grp x;
	grp_open(&x, root, k, m, 0, -1);
	uint8_t *dst = abuf(x.g.slice * k);
	char why[1024];
	const unsigned a = 2, b = 4;
	x.lost[a] = 1;
	T_ASSERT(ckpt__ecg_rebuild(&x.g, x.e, a, fetch, &x, NULL, dst, why, sizeof(why)) == 0);
	T_ASSERT(memcmp(dst, x.img[a], x.g.len[a]) == 0);
	uint8_t *par[NMAX];
	for (unsigned t = 0; t < m; t++) {
		par[t] = abuf(x.g.slice);
		if (ckpt__ecg_rebuild_parity(&x.g, x.e, a, t, fetch, &x, NULL, par[t], why, sizeof(why)) < 0)
			T_FAIL("re-protecting: %s", why);
	}
	/* The replacement: what it holds is what was rebuilt. */
	memset(x.img[a], 0, x.g.slice * k);
	memcpy(x.img[a], dst, x.g.len[a]);
	for (unsigned t = 0; t < m; t++) {
		unsigned s = (a + x.g.n - t) % x.g.n;
		T_ASSERT(memcmp(par[t], x.par[s][t], x.g.slice) == 0); /* parity made again, bit-exact */
		memset(x.par[s][t], 0, x.g.slice);
		memcpy(x.par[s][t], par[t], x.g.slice);
		free(par[t]);
	}
	x.lost[a] = 0;
	x.lost[b] = 1;
	memset(dst, 0, x.g.len[b]);
	if (ckpt__ecg_rebuild(&x.g, x.e, b, fetch, &x, NULL, dst, why, sizeof(why)) < 0)
		T_FAIL("second loss: %s", why);
	T_ASSERT(memcmp(dst, x.img[b], x.g.len[b]) == 0);
	check_chunks(dst, x.g.len[b]);
	printf("rs:%u+%u: a second loss after a rebuild and re-protection restored bit-exact\n", k, m);
	free(dst);
	grp_close(&x);
}

/* Member 1's image was corrupt before it was protected: every piece
 * passes its checksum, the rebuild decodes the same corrupt bytes, and the
 * image's own chunk checksums refuse it. */
static void corrupt_at_source(const char *root)
{
	grp x;
	uint64_t len[NMAX];
	uint8_t *raw[NMAX];
	make_images(root, 6, 0, raw, len);
	for (unsigned i = 0; i < 6; i++)
		free(raw[i]);
	grp_open(&x, root, 4, 2, 0, (long)(len[1] / 2));
	uint8_t *dst = abuf(x.g.slice * 4);
	char why[1024];
	x.lost[1] = 1;
	T_ASSERT(ckpt__ecg_rebuild(&x.g, x.e, 1, fetch, &x, NULL, dst, why, sizeof(why)) == 0);
	T_ASSERT(memcmp(dst, x.img[1], x.g.len[1]) == 0); /* the same corrupt bytes */
	int r = ckpt__ecg_rebuild_shard(&x.g, x.e, 1, fetch, &x, NULL, dst, why, sizeof(why));
	if (r != -CKPT_ECORRUPT || !strstr(why, "member 1") || !strstr(why, "chunk"))
		T_FAIL("a shard corrupt before it was protected was not refused after the rebuild: %d %s", r, why);
	printf("corrupt at the source: %s\n", why);
	free(dst);
	grp_close(&x);
}

int main(void)
{
	char *root = t_tmpdir("ecgroup");
	char small[600], big[600];
	/* Saving shards is most of this test's time: the groups of up to nine
	 * members share nine images (member i of each is rank i), 8+2 has its
	 * own, long enough for pieces of two checksum blocks. */
	snprintf(small, sizeof(small), "%s/small", root);
	snprintf(big, sizeof(big), "%s/big", root);
	T_ASSERT(mkdir(small, 0700) == 0 && mkdir(big, 0700) == 0);
	all_patterns(small, 6, 3, 700001, 129);
	all_patterns(small, 2, 1, 0, 3);
	all_patterns(small, 4, 1, 0, 5);
	all_patterns(small, 4, 2, 0, 21);
	all_patterns(big, 8, 2, 9100003, 55);
	corrupt_pieces(small);
	corrupt_at_source(small);
	second_loss(small, 4, 2);
	second_loss(small, 4, 1);
	t_rmrf(root);
	printf("ok\n");
	return T_EXIT_PASS;
}
