/* Peer schemes in ckpt-sim (sim_ec.h). */
#include "sim_ec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double sim_scheme_memory(const sim_scheme *s)
{
	return s->k ? 1.0 + (double)s->m / s->k : 2.0;
}

double sim_scheme_wire(const sim_scheme *s)
{
	return s->k ? (double)s->m : 1.0;
}

double sim_scheme_rebuild(const sim_scheme *s)
{
	return s->k ? (double)s->k : 1.0;
}

static double choose(unsigned n, unsigned r)
{
	double c = 1;
	for (unsigned i = 0; i < r; i++)
		c = c * (n - i) / (i + 1);
	return c;
}

static int usable(const sim_scheme *s, const sim_ec_model *mo)
{
	uint64_t width = s->k ? s->k + s->m : 2;
	return mo->nodes >= width && mo->domain_nodes >= 1 && mo->nodes / mo->domain_nodes >= width &&
	       mo->node_rate >= 0 && mo->domain_rate >= 0 && mo->pair_frac >= 0 && mo->pair_frac <= 1 &&
	       mo->reprotect_s >= 0 && mo->window_s > 0;
}

double sim_scheme_loss(const sim_scheme *s, const sim_ec_model *mo)
{
	if (!usable(s, mo))
		return -1;
	const double lam = mo->node_rate, q = mo->pair_frac, ld = mo->domain_rate;
	/* A member arrives down at lam + ld (its own loss, its domain's); it
	 * is down a fraction p of the time (correlated losses counted twice:
	 * a companion is lost as often as it leads). */
	const double arrive = lam + ld, p = (lam * (1 + q) + ld) * mo->reprotect_s;
	double rate;
	if (!s->k) {
		/* N pairs (a node, its partner): one's loss while the other is
		 * down, or a loss that takes the partner too. */
		rate = (double)mo->nodes * (2 * arrive * p + lam * q);
	} else {
		const unsigned n = s->k + s->m, m = s->m;
		double groups = floor((double)mo->nodes / n);
		/* M members down and one more arrives; or M - 1 down and a loss
		 * takes two. */
		rate = groups * (n * arrive * choose(n - 1, m) * pow(p, m) + n * lam * q * choose(n - 2, m - 1) * pow(p, m - 1));
	}
	return -expm1(-rate * mo->window_s);
}

static uint64_t xs(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static double unif(uint64_t *x)
{
	return (double)(xs(x) >> 11) * (1.0 / 9007199254740992.0);
}

static double expo(uint64_t *x, double rate)
{
	return -log(1.0 - unif(x)) / rate;
}

typedef struct down {
	uint64_t node;
	double until;
} down;

/* A node down until `until`: a node already down stays one entry. */
static size_t put_down(down *dn, size_t nd, uint64_t node, double until)
{
	for (size_t i = 0; i < nd; i++)
		if (dn[i].node == node) {
			dn[i].until = until;
			return nd;
		}
	dn[nd] = (down){ node, until };
	return nd + 1;
}

double sim_scheme_loss_mc(const sim_scheme *s, const sim_ec_model *mo, uint64_t trials, uint64_t seed,
                          uint64_t *lost)
{
	*lost = 0;
	if (!usable(s, mo) || !trials)
		return -1;
	const uint64_t N = mo->nodes, D = N / mo->domain_nodes, width = s->k ? s->k + s->m : 2;
	const uint64_t G = N / width;
	const unsigned tol = s->k ? s->m : 1;
	/* Ring position r is in domain r mod D: consecutive positions are in
	 * distinct domains. Partner of r: r + 1; group of r: r / width (the
	 * nodes past G * width are in none). A domain holds the positions
	 * congruent to it mod D (domain_nodes of them, the last takes the rest). */
	const double lam = mo->node_rate * (double)N, ldom = mo->domain_rate * (double)D, total = lam + ldom;
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t cap = 64, nd = 0;
	down *dn = malloc(cap * sizeof(*dn));
	if (!dn)
		return -1;
	const double start = -mo->reprotect_s;
	for (uint64_t t = 0; t < trials; t++) {
		nd = 0;
		int dead = 0;
		if (!(total > 0))
			continue;
		for (double now = start + expo(&x, total); now < mo->window_s && !dead; now += expo(&x, total)) {
			/* Forget who is back. */
			size_t k = 0;
			for (size_t i = 0; i < nd; i++)
				if (dn[i].until > now)
					dn[k++] = dn[i];
			nd = k;
			uint64_t hit[2];
			size_t nh = 0;
			int domain = unif(&x) * total >= lam;
			uint64_t first = xs(&x) % N;
			if (!domain) {
				hit[nh++] = first;
				if (unif(&x) < mo->pair_frac) {
					/* The companion that hurts: the partner, or another member of the group. */
					if (!s->k || first >= G * width)
						hit[nh++] = (first + 1) % N;
					else
						hit[nh++] = first / width * width + (first % width + 1 + xs(&x) % (width - 1)) % width;
				}
			}
			size_t need = nd + (domain ? N / D + 1 : nh);
			if (need > cap) {
				down *p = realloc(dn, (cap = need * 2) * sizeof(*dn));
				if (!p) {
					free(dn);
					return -1;
				}
				dn = p;
			}
			if (domain) {
				for (uint64_t r = first % D; r < N; r += D)
					nd = put_down(dn, nd, r, now + mo->reprotect_s);
			} else {
				for (size_t i = 0; i < nh; i++)
					nd = put_down(dn, nd, hit[i], now + mo->reprotect_s);
			}
			if (now < 0)
				continue; /* before the version: it was made without them */
			/* Lost when a pair or a group has more than tol down. */
			for (size_t i = 0; i < nd && !dead; i++) {
				uint64_t r = dn[i].node;
				if (!s->k) {
					for (size_t j = 0; j < nd && !dead; j++)
						dead = dn[j].node == (r + 1) % N;
				} else if (r < G * width) {
					unsigned cnt = 0;
					for (size_t j = 0; j < nd; j++)
						cnt += dn[j].node / width == r / width && dn[j].node < G * width;
					dead = cnt > tol;
				}
			}
		}
		*lost += (uint64_t)dead;
	}
	free(dn);
	return (double)*lost / (double)trials;
}
