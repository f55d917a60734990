/* Random numbers, the per-rank data order, and the state hash. */
#include "trainer.h"

#include <errno.h>
#include <string.h>

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void tr_rng_seed(tr_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++) {
		seed += 0x9e3779b97f4a7c15ull;
		r->s[i] = mix64(seed);
	}
}

/* xoshiro256** */
uint64_t tr_rng_next(tr_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

uint64_t tr_rng_below(tr_rng *r, uint64_t n)
{
	/* Rejection keeps it exactly uniform. */
	uint64_t lim = UINT64_MAX - UINT64_MAX % n, x;
	do
		x = tr_rng_next(r);
	while (x >= lim);
	return x % n;
}

int tr_corpus_init(tr_corpus *c, const uint8_t *text, size_t len, uint32_t context,
                   uint32_t rank, uint32_t world)
{
	if (len <= (size_t)context + world)
		return -EINVAL;
	uint64_t positions = len - context; /* example p: text[p, p+context) -> text[p+context] */
	*c = (tr_corpus){ .text = text, .len = len, .context = context, .rank = rank, .world = world };
	c->count = (positions - rank + world - 1) / world;
	return 0;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static void new_epoch(const tr_corpus *c, tr_data *d, tr_rng *r)
{
	/* An affine map with a multiplier coprime to count is a permutation. */
	do
		d->perm_a = 1 + tr_rng_below(r, c->count);
	while (c->count > 1 && gcd(d->perm_a, c->count) != 1);
	d->perm_b = tr_rng_below(r, c->count);
	d->cursor = 0;
	d->epoch++;
}

void tr_data_init(tr_data *d, const tr_corpus *c)
{
	memset(d, 0, sizeof(*d));
	d->cursor = c->count; /* the first draw starts epoch 1 */
}

void tr_batch_next(const tr_corpus *c, tr_data *d, tr_rng *r, uint32_t n, uint8_t *ctx,
                   uint8_t *tgt)
{
	for (uint32_t i = 0; i < n; i++) {
		if (d->cursor >= c->count)
			new_epoch(c, d, r);
		uint64_t e = (d->perm_a * d->cursor + d->perm_b) % c->count;
		uint64_t p = e * c->world + c->rank;
		memcpy(ctx + (size_t)i * c->context, c->text + p, c->context);
		tgt[i] = c->text[p + c->context];
		d->cursor++;
		d->seen++;
	}
}

uint64_t tr_hash64(const void *p, size_t len, uint64_t seed)
{
	const uint8_t *b = p;
	uint64_t h = mix64(seed ^ (len * 0x9e3779b97f4a7c15ull));
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = rotl(h ^ (w * 0x87c37b91114253d5ull), 29) * 0x4cf5ad432745937full;
	}
	uint64_t w = 0;
	memcpy(&w, b + i, len - i);
	h = rotl(h ^ (w * 0x87c37b91114253d5ull), 29) * 0x4cf5ad432745937full;
	return mix64(h);
}

uint64_t tr_state_digest(const float *w, size_t nparams, const float *m, const float *v,
                         size_t own, uint64_t step, const tr_rng *rng, const tr_data *d)
{
	uint64_t parts[6] = {
		tr_hash64(w, nparams * sizeof(float), 1),
		tr_hash64(m, own * sizeof(float), 2),
		tr_hash64(v, own * sizeof(float), 3),
		step,
		tr_hash64(rng, sizeof(*rng), 4),
		tr_hash64(d, sizeof(*d), 5),
	};
	return tr_hash64(parts, sizeof(parts), 6);
}
