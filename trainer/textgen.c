/* The training text: English-like sentences from a small seeded grammar.
 * Word frequencies are skewed (the smaller of two uniform draws), articles
 * agree with the next word, and clauses nest, so there is structure for a
 * character model to learn at several scales. */
#include "trainer.h"

#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const char *const nouns[] = {
	"river", "lantern", "farmer", "garden", "machine", "teacher", "window", "sparrow",
	"engine", "harbor", "village", "letter", "mountain", "kitten", "doctor", "bridge",
	"storm", "clock", "painter", "forest", "ship", "child", "road", "market", "owl",
	"island", "apple", "umbrella",
};
static const char *const adjs[] = {
	"quiet", "small", "old", "bright", "heavy", "green", "careful", "tired", "sudden",
	"narrow", "warm", "strange", "gentle", "broken", "empty", "early",
};
static const char *const tverbs[] = {
	"watches", "carries", "finds", "follows", "builds", "paints", "remembers", "opens",
	"repairs", "visits", "sells", "hides", "answers", "counts",
};
static const char *const iverbs[] = {
	"sleeps", "waits", "sings", "falls", "returns", "shines", "wanders", "rests", "laughs",
	"arrives",
};
static const char *const advs[] = {
	"slowly", "again", "quietly", "today", "often", "never", "soon", "gladly", "at night",
};
static const char *const preps[] = {
	"near", "under", "behind", "across", "beside", "inside", "beyond", "over",
};
static const char *const dets[] = { "the", "a", "every", "that", "one", "my", "no" };
static const char *const conjs[] = { "and", "but", "while", "because", "so", "until" };

typedef struct gen {
	tr_rng rng;
	char *buf;
	size_t len, cap;
	const char *det_pending; /* "a" waits for the next word to choose a/an */
} gen;

static size_t pick(gen *g, size_t n)
{
	size_t a = (size_t)tr_rng_below(&g->rng, n), b = (size_t)tr_rng_below(&g->rng, n);
	return a < b ? a : b;
}

static int chance(gen *g, unsigned pct)
{
	return tr_rng_below(&g->rng, 100) < pct;
}

static void put(gen *g, const char *s)
{
	size_t n = strlen(s);
	if (g->len + n > g->cap)
		n = g->cap - g->len;
	memcpy(g->buf + g->len, s, n);
	g->len += n;
}

static void word(gen *g, const char *w)
{
	if (g->det_pending) {
		const char *d = g->det_pending;
		g->det_pending = NULL;
		if (!strcmp(d, "a") && strchr("aeiou", w[0]))
			d = "an";
		word(g, d);
	}
	if (g->len && g->buf[g->len - 1] != ' ')
		put(g, " ");
	put(g, w);
}

static void noun_phrase(gen *g, int depth)
{
	g->det_pending = dets[pick(g, N(dets))];
	if (chance(g, 45))
		word(g, adjs[pick(g, N(adjs))]);
	word(g, nouns[pick(g, N(nouns))]);
	if (depth < 1 && chance(g, 25)) {
		word(g, preps[pick(g, N(preps))]);
		noun_phrase(g, depth + 1);
	}
}

static void clause(gen *g)
{
	noun_phrase(g, 0);
	if (chance(g, 60)) {
		word(g, tverbs[pick(g, N(tverbs))]);
		noun_phrase(g, 0);
	} else {
		word(g, iverbs[pick(g, N(iverbs))]);
		if (chance(g, 40)) {
			word(g, preps[pick(g, N(preps))]);
			noun_phrase(g, 1);
		}
	}
	if (chance(g, 30))
		word(g, advs[pick(g, N(advs))]);
}

static void sentence(gen *g)
{
	clause(g);
	if (chance(g, 35)) {
		put(g, ",");
		word(g, conjs[pick(g, N(conjs))]);
		clause(g);
	}
	put(g, ". ");
}

static uint8_t char_id(char c)
{
	if (c >= 'a' && c <= 'z')
		return (uint8_t)(c - 'a' + 1);
	if (c == '.')
		return 27;
	if (c == ',')
		return 28;
	return 0;
}

char tr_text_char(uint8_t id)
{
	if (id >= 1 && id <= 26)
		return (char)('a' + id - 1);
	return id == 27 ? '.' : id == 28 ? ',' : ' ';
}

void tr_text_generate(uint64_t seed, uint8_t *out, size_t len)
{
	/* The text is built in out itself, as characters, then mapped to ids. */
	gen g = { .buf = (char *)out, .cap = len };
	tr_rng_seed(&g.rng, seed ^ 0x7465787467656e00ull);
	while (g.len < g.cap)
		sentence(&g);
	for (size_t i = 0; i < len; i++)
		out[i] = char_id((char)out[i]);
}
