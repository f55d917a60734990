/* The model on the CPU: layout, initialisation, forward and backward, and
 * the AdamW update of one ZeRO-1 shard. Every sum runs in a fixed order,
 * so a run is reproducible bit for bit. */
#include "trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tr_model_layout(tr_model *m, uint32_t context, uint32_t embed, uint32_t hidden)
{
	memset(m, 0, sizeof(*m));
	m->vocab = TR_VOCAB;
	m->context = context;
	m->embed = embed;
	m->hidden = hidden;
	m->dim[0] = context * embed;
	m->dim[1] = hidden;
	m->dim[2] = hidden;
	m->dim[3] = TR_VOCAB;
	size_t off = 0;
	m->emb = off;
	off += (size_t)m->vocab * embed;
	for (int l = 0; l < TR_LAYERS; l++) {
		m->w[l] = off;
		off += (size_t)m->dim[l] * m->dim[l + 1];
	}
	m->ndecay = off;
	for (int l = 0; l < TR_LAYERS; l++) {
		m->b[l] = off;
		off += m->dim[l + 1];
	}
	m->nparams = off;
}

void tr_model_init(const tr_model *m, float *params, uint64_t seed)
{
	tr_rng r;
	tr_rng_seed(&r, seed ^ 0x6d6f64656c000000ull);
	/* Uniform with the variance of N(0, 1/fan_in): keeps tanh out of saturation. */
	for (size_t i = 0; i < (size_t)m->vocab * m->embed; i++)
		params[m->emb + i] = (float)((double)(tr_rng_next(&r) >> 11) * 0x1p-53 * 2.0 - 1.0);
	for (int l = 0; l < TR_LAYERS; l++) {
		double scale = sqrt(3.0 / m->dim[l]);
		size_t n = (size_t)m->dim[l] * m->dim[l + 1];
		for (size_t i = 0; i < n; i++)
			params[m->w[l] + i] =
				(float)(((double)(tr_rng_next(&r) >> 11) * 0x1p-53 * 2.0 - 1.0) * scale);
		memset(params + m->b[l], 0, m->dim[l + 1] * sizeof(float));
	}
}

void tr_part_init(tr_part *p, size_t nparams, uint32_t rank, uint32_t world)
{
	p->nparams = nparams;
	p->loss_slot = nparams;
	p->shard = (nparams + 1 + world - 1) / world;
	p->padded = p->shard * world;
	p->lo = (size_t)rank * p->shard;
	p->hi = p->lo + p->shard;
	p->own = p->lo >= nparams ? 0 : (p->hi < nparams ? p->hi : nparams) - p->lo;
}

void tr_adam_bias(const tr_adam *a, uint64_t t, float *bc1, float *bc2)
{
	*bc1 = (float)(1.0 - pow(a->beta1, (double)t));
	*bc2 = (float)(1.0 - pow(a->beta2, (double)t));
}

void tr_adamw_shard(float *params, const float *g, float *m, float *v, const tr_part *p,
                    size_t ndecay, const tr_adam *a, float bc1, float bc2, float inv_batch)
{
	for (size_t i = 0; i < p->shard; i++) {
		size_t k = p->lo + i;
		if (k >= p->nparams) {
			params[k] = g[i];
			continue;
		}
		float gi = g[i] * inv_batch;
		m[i] = a->beta1 * m[i] + (1.0f - a->beta1) * gi;
		v[i] = a->beta2 * v[i] + (1.0f - a->beta2) * gi * gi;
		float mh = m[i] / bc1, vh = v[i] / bc2;
		float w = params[k];
		/* Decoupled decay: on the weight itself, not through the moments. */
		if (k < ndecay)
			w -= a->lr * a->wd * w;
		params[k] = w - a->lr * mh / (sqrtf(vh) + a->eps);
	}
}

/* ------------------------------------------------------------ forward/backward */

struct tr_cpu_work {
	uint32_t n;
	float *act[TR_LAYERS + 1]; /* act[0]: embeddings; act[3]: logits */
	float *delta[TR_LAYERS + 1];
};

tr_cpu_work *tr_cpu_work_new(const tr_model *m, uint32_t n)
{
	tr_cpu_work *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->n = n;
	for (int l = 0; l <= TR_LAYERS; l++) {
		w->act[l] = calloc((size_t)n * m->dim[l], sizeof(float));
		w->delta[l] = calloc((size_t)n * m->dim[l], sizeof(float));
		if (!w->act[l] || !w->delta[l]) {
			tr_cpu_work_free(w);
			return NULL;
		}
	}
	return w;
}

void tr_cpu_work_free(tr_cpu_work *w)
{
	if (!w)
		return;
	for (int l = 0; l <= TR_LAYERS; l++) {
		free(w->act[l]);
		free(w->delta[l]);
	}
	free(w);
}

float tr_cpu_fwd_bwd(const tr_model *m, tr_cpu_work *w, const float *params,
                     const uint8_t *ctx, const uint8_t *tgt, uint32_t n, float *grads)
{
	const uint32_t E = m->embed, K = m->context, V = m->vocab;
	for (uint32_t b = 0; b < n; b++)
		for (uint32_t j = 0; j < K; j++)
			memcpy(w->act[0] + (size_t)b * m->dim[0] + j * E,
			       params + m->emb + (size_t)ctx[b * K + j] * E, E * sizeof(float));
	for (int l = 0; l < TR_LAYERS; l++) {
		uint32_t in = m->dim[l], out = m->dim[l + 1];
		const float *W = params + m->w[l], *bias = params + m->b[l];
		for (uint32_t b = 0; b < n; b++) {
			const float *x = w->act[l] + (size_t)b * in;
			float *y = w->act[l + 1] + (size_t)b * out;
			memcpy(y, bias, out * sizeof(float));
			for (uint32_t i = 0; i < in; i++) {
				float xi = x[i];
				const float *row = W + (size_t)i * out;
				for (uint32_t o = 0; o < out; o++)
					y[o] += xi * row[o];
			}
			if (l < TR_LAYERS - 1)
				for (uint32_t o = 0; o < out; o++)
					y[o] = tanhf(y[o]);
		}
	}

	/* Softmax cross-entropy; delta = softmax - onehot (summed, not averaged:
	 * the optimizer divides by the global batch). */
	float loss = 0.0f;
	for (uint32_t b = 0; b < n; b++) {
		const float *z = w->act[TR_LAYERS] + (size_t)b * V;
		float *d = w->delta[TR_LAYERS] + (size_t)b * V;
		float mx = z[0];
		for (uint32_t o = 1; o < V; o++)
			mx = z[o] > mx ? z[o] : mx;
		float s = 0.0f;
		for (uint32_t o = 0; o < V; o++) {
			d[o] = expf(z[o] - mx);
			s += d[o];
		}
		for (uint32_t o = 0; o < V; o++)
			d[o] /= s;
		loss += logf(s) + mx - z[tgt[b]];
		d[tgt[b]] -= 1.0f;
	}

	for (int l = TR_LAYERS - 1; l >= 0; l--) {
		uint32_t in = m->dim[l], out = m->dim[l + 1];
		const float *W = params + m->w[l];
		float *dW = grads + m->w[l], *db = grads + m->b[l];
		memset(dW, 0, (size_t)in * out * sizeof(float));
		memset(db, 0, out * sizeof(float));
		for (uint32_t b = 0; b < n; b++) {
			const float *x = w->act[l] + (size_t)b * in, *d = w->delta[l + 1] + (size_t)b * out;
			float *dx = w->delta[l] + (size_t)b * in;
			for (uint32_t o = 0; o < out; o++)
				db[o] += d[o];
			for (uint32_t i = 0; i < in; i++) {
				const float *row = W + (size_t)i * out;
				float *drow = dW + (size_t)i * out, acc = 0.0f;
				for (uint32_t o = 0; o < out; o++) {
					drow[o] += x[i] * d[o];
					acc += d[o] * row[o];
				}
				/* act[l] of a hidden layer is a tanh output: d tanh = 1 - y^2 */
				dx[i] = l > 0 ? acc * (1.0f - x[i] * x[i]) : acc;
			}
		}
	}
	float *dE = grads + m->emb;
	memset(dE, 0, (size_t)V * E * sizeof(float));
	for (uint32_t b = 0; b < n; b++)
		for (uint32_t j = 0; j < K; j++) {
			const float *d = w->delta[0] + (size_t)b * m->dim[0] + j * E;
			float *row = dE + (size_t)ctx[b * K + j] * E;
			for (uint32_t e = 0; e < E; e++)
				row[e] += d[e];
		}
	return loss;
}
