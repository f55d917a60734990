/* One CUDA rank: the same model and step as rank_cpu.c with weights,
 * gradients and AdamW moments in device memory. Gradients are combined by
 * NCCL (reduce-scatter, then all-gather of the updated parameters) when
 * every rank has a GPU of its own; ranks that share a GPU (NCCL refuses
 * two ranks on one device) or a build without NCCL go through host memory
 * and the ZeroMQ transport instead. Every kernel sums in a fixed order: no
 * atomics, so a run repeats bit for bit on the same GPU.
 *
 * Checkpoints: the device buffers are registered as CKPT_DEVICE_CUDA
 * regions and saved lazily (CKPT_SAVE_LAZY); the copies overlap the next
 * forward/backward, and ckpt_fence() comes before the optimizer writes the
 * state. Where libckpt has no CUDA support (ckpt_cuda_available() == 0) the
 * state goes through host mirrors instead. */
#include "trainer.h"
#include "ckpt.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TR_HAVE_NCCL
#include <nccl.h>
#endif

#define TPB 128

/* Every helper returns 0 or -1 after printing what failed. */
#define CU_TRY(call)                                                                           \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                               \
		if (e_ != cudaSuccess) {                                                               \
			fprintf(stderr, "trainer: rank %d: %s: %s (%s:%d)\n", g->rank, #call,              \
			        cudaGetErrorString(e_), __FILE__, __LINE__);                               \
			return -1;                                                                         \
		}                                                                                      \
	} while (0)
#define CU_LAUNCHED() CU_TRY(cudaGetLastError())
#ifdef TR_HAVE_NCCL
#define NC_TRY(call)                                                                           \
	do {                                                                                       \
		ncclResult_t r_ = (call);                                                              \
		if (r_ != ncclSuccess) {                                                               \
			fprintf(stderr, "trainer: rank %d: %s: %s\n", g->rank, #call,                      \
			        ncclGetErrorString(r_));                                                   \
			return -1;                                                                         \
		}                                                                                      \
	} while (0)
#endif

static unsigned blocks(size_t n)
{
	return (unsigned)((n + TPB - 1) / TPB);
}

/* ------------------------------------------------------------ kernels */

__global__ void k_gather(const uint8_t *ctx, const float *emb, float *x, uint32_t n, uint32_t K,
                         uint32_t E)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= (size_t)n * K * E)
		return;
	size_t b = i / ((size_t)K * E), r = i % ((size_t)K * E), j = r / E, e = r % E;
	x[i] = emb[(size_t)ctx[b * K + j] * E + e];
}

/* y[b, o] = act(bias[o] + sum_i x[b, i] W[i, o]): one thread per output. */
__global__ void k_linear_fwd(const float *x, const float *W, const float *bias, float *y,
                             uint32_t n, uint32_t in, uint32_t out, int act)
{
	size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (t >= (size_t)n * out)
		return;
	size_t b = t / out, o = t % out;
	const float *xb = x + b * in;
	float acc = bias[o];
	for (uint32_t i = 0; i < in; i++)
		acc += xb[i] * W[(size_t)i * out + o];
	y[t] = act ? tanhf(acc) : acc;
}

/* Per example: loss, and d = softmax - onehot. */
__global__ void k_softmax_ce(const float *z, const uint8_t *tgt, float *d, float *loss,
                             uint32_t n, uint32_t V)
{
	uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
	if (b >= n)
		return;
	const float *zb = z + (size_t)b * V;
	float *db = d + (size_t)b * V;
	float mx = zb[0];
	for (uint32_t o = 1; o < V; o++)
		mx = fmaxf(mx, zb[o]);
	float s = 0.0f;
	for (uint32_t o = 0; o < V; o++) {
		db[o] = expf(zb[o] - mx);
		s += db[o];
	}
	for (uint32_t o = 0; o < V; o++)
		db[o] /= s;
	loss[b] = logf(s) + mx - zb[tgt[b]];
	db[tgt[b]] -= 1.0f;
}

/* The rank's loss into its slot, summed in example order. */
__global__ void k_loss_sum(const float *loss, uint32_t n, float *slot)
{
	float s = 0.0f;
	for (uint32_t b = 0; b < n; b++)
		s += loss[b];
	*slot = s;
}

/* dW[i, o] = sum_b x[b, i] d[b, o]; the extra row i == in is db[o]. */
__global__ void k_linear_bwd_w(const float *x, const float *d, float *dW, float *db, uint32_t n,
                               uint32_t in, uint32_t out)
{
	size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (t >= (size_t)(in + 1) * out)
		return;
	size_t i = t / out, o = t % out;
	float acc = 0.0f;
	if (i == in) {
		for (uint32_t b = 0; b < n; b++)
			acc += d[(size_t)b * out + o];
		db[o] = acc;
		return;
	}
	for (uint32_t b = 0; b < n; b++)
		acc += x[(size_t)b * in + i] * d[(size_t)b * out + o];
	dW[t] = acc;
}

/* dx[b, i] = sum_o d[b, o] W[i, o], times tanh' where x is a tanh output. */
__global__ void k_linear_bwd_x(const float *d, const float *W, const float *x, float *dx,
                               uint32_t n, uint32_t in, uint32_t out, int tanh_in)
{
	size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (t >= (size_t)n * in)
		return;
	size_t b = t / in, i = t % in;
	const float *db = d + b * out, *row = W + i * out;
	float acc = 0.0f;
	for (uint32_t o = 0; o < out; o++)
		acc += db[o] * row[o];
	dx[t] = tanh_in ? acc * (1.0f - x[t] * x[t]) : acc;
}

/* dE[v, e]: one thread per entry walks the batch, so no atomics. */
__global__ void k_embed_bwd(const uint8_t *ctx, const float *dx, float *dE, uint32_t n,
                            uint32_t K, uint32_t E, uint32_t V)
{
	size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (t >= (size_t)V * E)
		return;
	uint32_t v = (uint32_t)(t / E), e = (uint32_t)(t % E);
	float acc = 0.0f;
	for (uint32_t b = 0; b < n; b++)
		for (uint32_t j = 0; j < K; j++)
			if (ctx[b * K + j] == v)
				acc += dx[((size_t)b * K + j) * E + e];
	dE[t] = acc;
}

struct adam_args {
	size_t lo, shard, nparams, ndecay;
	float lr, beta1, beta2, eps, wd, bc1, bc2, inv_batch;
};

/* AdamW on the shard; past the parameters, g passes through (loss slot). */
__global__ void k_adamw(float *params, const float *g, float *m, float *v, adam_args a)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= a.shard)
		return;
	size_t k = a.lo + i;
	if (k >= a.nparams) {
		params[k] = g[i];
		return;
	}
	float gi = g[i] * a.inv_batch;
	float mi = a.beta1 * m[i] + (1.0f - a.beta1) * gi;
	float vi = a.beta2 * v[i] + (1.0f - a.beta2) * gi * gi;
	m[i] = mi;
	v[i] = vi;
	float w = params[k];
	if (k < a.ndecay)
		w -= a.lr * a.wd * w;
	params[k] = w - a.lr * (mi / a.bc1) / (sqrtf(vi / a.bc2) + a.eps);
}

/* ------------------------------------------------------------ the rank */

typedef struct gpu_rank {
	int rank;
	uint32_t world, bl;
	int dev, use_nccl, dev_regions; /* dev_regions: libckpt copies device memory itself */
	int preempted;                  /* left because ckpt_step said EXIT */
	tr_model m;
	tr_part part;
	tr_corpus corpus;
	uint8_t *text;
	cudaStream_t st;
	/* device */
	float *params, *grads, *gshard, *mom, *var, *loss;
	float *act[TR_LAYERS + 1], *delta[TR_LAYERS + 1];
	uint8_t *d_ctx, *d_tgt;
	/* pinned host */
	uint8_t *h_ctx, *h_tgt;
	float *h_grads, *h_gshard, *h_params; /* host-staged collectives */
	float *h_w, *h_m, *h_v;               /* checkpoint mirrors without CUDA in libckpt */
	/* checkpointed host state */
	uint64_t step;
	tr_rng rng;
	tr_data data;
#ifdef TR_HAVE_NCCL
	ncclComm_t nccl;
#endif
} gpu_rank;

static int alloc_all(gpu_rank *g)
{
	const tr_part *p = &g->part;
	size_t bl = g->bl;
	CU_TRY(cudaMalloc((void **)&g->params, p->padded * sizeof(float)));
	CU_TRY(cudaMalloc((void **)&g->grads, p->padded * sizeof(float)));
	CU_TRY(cudaMalloc((void **)&g->gshard, p->shard * sizeof(float)));
	CU_TRY(cudaMalloc((void **)&g->mom, p->shard * sizeof(float)));
	CU_TRY(cudaMalloc((void **)&g->var, p->shard * sizeof(float)));
	CU_TRY(cudaMalloc((void **)&g->loss, bl * sizeof(float)));
	for (int l = 0; l <= TR_LAYERS; l++) {
		CU_TRY(cudaMalloc((void **)&g->act[l], bl * g->m.dim[l] * sizeof(float)));
		CU_TRY(cudaMalloc((void **)&g->delta[l], bl * g->m.dim[l] * sizeof(float)));
	}
	CU_TRY(cudaMalloc((void **)&g->d_ctx, bl * g->m.context));
	CU_TRY(cudaMalloc((void **)&g->d_tgt, bl));
	CU_TRY(cudaMallocHost((void **)&g->h_ctx, bl * g->m.context));
	CU_TRY(cudaMallocHost((void **)&g->h_tgt, bl));
	CU_TRY(cudaMallocHost((void **)&g->h_params, p->padded * sizeof(float)));
	CU_TRY(cudaMallocHost((void **)&g->h_grads, p->padded * sizeof(float)));
	CU_TRY(cudaMallocHost((void **)&g->h_gshard, p->shard * sizeof(float)));
	CU_TRY(cudaMallocHost((void **)&g->h_w, p->nparams * sizeof(float)));
	CU_TRY(cudaMallocHost((void **)&g->h_m, (p->own + 1) * sizeof(float)));
	CU_TRY(cudaMallocHost((void **)&g->h_v, (p->own + 1) * sizeof(float)));
	/* Gradients past the parameters stay zero but for the loss slot. */
	CU_TRY(cudaMemset(g->grads, 0, p->padded * sizeof(float)));
	return 0;
}

static void free_all(gpu_rank *g)
{
	void *dev[] = { g->params, g->grads, g->gshard, g->mom, g->var, g->loss, g->d_ctx, g->d_tgt };
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		cudaFree(dev[i]);
	for (int l = 0; l <= TR_LAYERS; l++) {
		cudaFree(g->act[l]);
		cudaFree(g->delta[l]);
	}
	void *host[] = { g->h_ctx, g->h_tgt, g->h_params, g->h_grads, g->h_gshard,
	                 g->h_w, g->h_m, g->h_v };
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		cudaFreeHost(host[i]);
	if (g->st)
		cudaStreamDestroy(g->st);
	free(g->text);
}

static int fresh_state(gpu_rank *g, const tr_opts *o)
{
	const tr_part *p = &g->part;
	memset(g->h_params, 0, p->padded * sizeof(float));
	tr_model_init(&g->m, g->h_params, o->seed);
	CU_TRY(cudaMemcpy(g->params, g->h_params, p->padded * sizeof(float), cudaMemcpyHostToDevice));
	CU_TRY(cudaMemset(g->mom, 0, p->shard * sizeof(float)));
	CU_TRY(cudaMemset(g->var, 0, p->shard * sizeof(float)));
	g->step = 0;
	tr_rng_seed(&g->rng, o->seed * 0x100000001b3ull + (uint64_t)o->rank + 1);
	tr_data_init(&g->data, &g->corpus);
	return 0;
}

/* Without device regions the checkpoint sees host mirrors of the state. */
static int mirror_to_host(gpu_rank *g)
{
	const tr_part *p = &g->part;
	CU_TRY(cudaStreamSynchronize(g->st));
	CU_TRY(cudaMemcpy(g->h_w, g->params, p->nparams * sizeof(float), cudaMemcpyDeviceToHost));
	CU_TRY(cudaMemcpy(g->h_m, g->mom, p->own * sizeof(float), cudaMemcpyDeviceToHost));
	CU_TRY(cudaMemcpy(g->h_v, g->var, p->own * sizeof(float), cudaMemcpyDeviceToHost));
	return 0;
}

static int mirror_to_device(gpu_rank *g)
{
	const tr_part *p = &g->part;
	CU_TRY(cudaMemcpy(g->params, g->h_w, p->nparams * sizeof(float), cudaMemcpyHostToDevice));
	CU_TRY(cudaMemcpy(g->mom, g->h_m, p->own * sizeof(float), cudaMemcpyHostToDevice));
	CU_TRY(cudaMemcpy(g->var, g->h_v, p->own * sizeof(float), cudaMemcpyHostToDevice));
	return 0;
}

static int register_regions(gpu_rank *g, ckpt_ctx *ctx)
{
	const tr_part *p = &g->part;
	int dev = g->dev_regions ? CKPT_DEVICE_CUDA : CKPT_DEVICE_HOST;
	float *w = g->dev_regions ? g->params : g->h_w;
	float *m = g->dev_regions ? g->mom : g->h_m;
	float *v = g->dev_regions ? g->var : g->h_v;
	if (tr_ckpt_add_f32(ctx, "weights", w, 0, p->nparams, p->nparams, dev) < 0 ||
	    tr_ckpt_add_f32(ctx, "adam_m", m, p->lo, p->own, p->nparams, dev) < 0 ||
	    tr_ckpt_add_f32(ctx, "adam_v", v, p->lo, p->own, p->nparams, dev) < 0 ||
	    tr_ckpt_add_blob(ctx, "step", &g->step, sizeof(g->step), CKPT_DTYPE_U64, 1) < 0 ||
	    tr_ckpt_add_blob(ctx, "rng", &g->rng, sizeof(g->rng), CKPT_DTYPE_BYTES, 0) < 0 ||
	    tr_ckpt_add_blob(ctx, "data", &g->data, sizeof(g->data), CKPT_DTYPE_BYTES, 0) < 0)
		return -1;
	if (g->dev_regions) {
		int err = ckpt_cuda_stream_set(ctx, g->st);
		if (err < 0) {
			fprintf(stderr, "trainer: rank %d: ckpt_cuda_stream_set: %s\n", g->rank,
			        ckpt_strerror(err));
			return -1;
		}
	}
	return 0;
}

/* Restores `version` (CKPT_LATEST: the newest); *restored = 0 if none. */
static int restore(gpu_rank *g, const tr_opts *o, ckpt_ctx *ctx, uint64_t version, int *restored, uint64_t *got)
{
	*restored = 0;
	int err = ckpt_restore(ctx, version, 0, got);
	/* Only "no version" starts a fresh model: -CKPT_EUNREACHABLE (a
	 * committed version out of reach) and every other error stop the rank. */
	if (err == -CKPT_ENOVERSION && version == CKPT_LATEST)
		return 0;
	if (err == -CKPT_EUNREACHABLE) {
		fprintf(stderr, "trainer: rank %d: a committed checkpoint exists but none of its copies is reachable "
		        "from here; not starting from scratch (the log names where the copies are)\n", g->rank);
		return -1;
	}
	if (err < 0) {
		fprintf(stderr, "trainer: rank %d: restore: %s\n", g->rank, ckpt_strerror(err));
		return -1;
	}
	if (g->step != *got) {
		fprintf(stderr, "trainer: rank %d: version %" PRIu64 " holds step %" PRIu64 "\n",
		        g->rank, *got, g->step);
		return -1;
	}
	if (!g->dev_regions && mirror_to_device(g) < 0)
		return -1;
	*restored = 1;
	/* Saved by another number of ranks: the optimizer shards were
	 * repartitioned by libckpt; the data partition starts afresh. */
	uint32_t saved = g->world;
	if (tr_ckpt_saved_world(ctx, *got, &saved) < 0)
		return -1;
	if (saved != g->world) {
		if (g->rank == 0)
			printf("resharded step %" PRIu64 " from %u ranks to %u\n", *got, saved, g->world);
		tr_reshard_data(&g->rng, &g->data, &g->corpus, o->seed, (uint32_t)g->rank, *got);
	}
	return 0;
}

static int forward_backward(gpu_rank *g)
{
	const tr_model *m = &g->m;
	const uint32_t n = g->bl;
	cudaStream_t st = g->st;
	CU_TRY(cudaMemcpyAsync(g->d_ctx, g->h_ctx, (size_t)n * m->context, cudaMemcpyHostToDevice, st));
	CU_TRY(cudaMemcpyAsync(g->d_tgt, g->h_tgt, n, cudaMemcpyHostToDevice, st));
	k_gather<<<blocks((size_t)n * m->dim[0]), TPB, 0, st>>>(g->d_ctx, g->params + m->emb,
	                                                         g->act[0], n, m->context, m->embed);
	CU_LAUNCHED();
	for (int l = 0; l < TR_LAYERS; l++) {
		k_linear_fwd<<<blocks((size_t)n * m->dim[l + 1]), TPB, 0, st>>>(
			g->act[l], g->params + m->w[l], g->params + m->b[l], g->act[l + 1], n, m->dim[l],
			m->dim[l + 1], l < TR_LAYERS - 1);
		CU_LAUNCHED();
	}
	k_softmax_ce<<<blocks(n), TPB, 0, st>>>(g->act[TR_LAYERS], g->d_tgt, g->delta[TR_LAYERS],
	                                        g->loss, n, m->vocab);
	CU_LAUNCHED();
	k_loss_sum<<<1, 1, 0, st>>>(g->loss, n, g->grads + g->part.loss_slot);
	CU_LAUNCHED();
	for (int l = TR_LAYERS - 1; l >= 0; l--) {
		uint32_t in = m->dim[l], out = m->dim[l + 1];
		k_linear_bwd_w<<<blocks((size_t)(in + 1) * out), TPB, 0, st>>>(
			g->act[l], g->delta[l + 1], g->grads + m->w[l], g->grads + m->b[l], n, in, out);
		CU_LAUNCHED();
		k_linear_bwd_x<<<blocks((size_t)n * in), TPB, 0, st>>>(
			g->delta[l + 1], g->params + m->w[l], g->act[l], g->delta[l], n, in, out, l > 0);
		CU_LAUNCHED();
	}
	k_embed_bwd<<<blocks((size_t)m->vocab * m->embed), TPB, 0, st>>>(
		g->d_ctx, g->delta[0], g->grads + m->emb, n, m->context, m->embed, m->vocab);
	CU_LAUNCHED();
	return 0;
}

static int reduce_scatter(gpu_rank *g, tr_comm *comm)
{
	const tr_part *p = &g->part;
#ifdef TR_HAVE_NCCL
	if (g->use_nccl) {
		NC_TRY(ncclReduceScatter(g->grads, g->gshard, p->shard, ncclFloat, ncclSum, g->nccl, g->st));
		return 0;
	}
#endif
	CU_TRY(cudaMemcpyAsync(g->h_grads, g->grads, p->padded * sizeof(float), cudaMemcpyDeviceToHost,
	                       g->st));
	CU_TRY(cudaStreamSynchronize(g->st));
	if (tr_comm_reduce_scatter(comm, g->h_grads, g->h_gshard, p->shard) < 0)
		return -1;
	CU_TRY(cudaMemcpyAsync(g->gshard, g->h_gshard, p->shard * sizeof(float),
	                       cudaMemcpyHostToDevice, g->st));
	return 0;
}

static int all_gather(gpu_rank *g, tr_comm *comm)
{
	const tr_part *p = &g->part;
#ifdef TR_HAVE_NCCL
	if (g->use_nccl) {
		/* In place: this rank's shard already sits at its offset. */
		NC_TRY(ncclAllGather(g->params + p->lo, g->params, p->shard, ncclFloat, g->nccl, g->st));
		return 0;
	}
#endif
	CU_TRY(cudaMemcpyAsync(g->h_params + p->lo, g->params + p->lo, p->shard * sizeof(float),
	                       cudaMemcpyDeviceToHost, g->st));
	CU_TRY(cudaStreamSynchronize(g->st));
	if (tr_comm_all_gather(comm, g->h_params, p->shard) < 0)
		return -1;
	CU_TRY(cudaMemcpyAsync(g->params, g->h_params, p->padded * sizeof(float),
	                       cudaMemcpyHostToDevice, g->st));
	return 0;
}

static int train(gpu_rank *g, const tr_opts *o, ckpt_ctx *ctx, tr_comm *comm, float *loss)
{
	const tr_part *p = &g->part;
	tr_adam adam;
	adam.lr = o->lr;
	adam.beta1 = 0.9f;
	adam.beta2 = 0.99f;
	adam.eps = 1e-8f;
	adam.wd = o->wd;
	const float inv_batch = 1.0f / (float)o->batch;
	ckpt_handle *last = NULL;
	int err = 0;
	while (g->step < o->steps && !err) {
		uint64_t t = g->step + 1;
		tr_batch_next(&g->corpus, &g->data, &g->rng, g->bl, g->h_ctx, g->h_tgt);
		if (forward_backward(g) < 0 || reduce_scatter(g, comm) < 0) {
			err = -1;
			break;
		}
		/* The lazy save of the last checkpoint may still be copying the
		 * weights and moments the optimizer is about to overwrite. */
		int r = ckpt_fence(ctx);
		if (r < 0) {
			fprintf(stderr, "trainer: rank %d: ckpt_fence: %s\n", g->rank, ckpt_strerror(r));
			err = -1;
			break;
		}
		adam_args a;
		a.lo = p->lo;
		a.shard = p->shard;
		a.nparams = p->nparams;
		a.ndecay = g->m.ndecay;
		a.lr = adam.lr;
		a.beta1 = adam.beta1;
		a.beta2 = adam.beta2;
		a.eps = adam.eps;
		a.wd = adam.wd;
		a.inv_batch = inv_batch;
		tr_adam_bias(&adam, t, &a.bc1, &a.bc2);
		k_adamw<<<blocks(p->shard), TPB, 0, g->st>>>(g->params, g->gshard, g->mom, g->var, a);
		if (cudaGetLastError() != cudaSuccess || all_gather(g, comm) < 0) {
			fprintf(stderr, "trainer: rank %d: optimizer step %" PRIu64 " failed\n", g->rank, t);
			err = -1;
			break;
		}
		/* The host reuses h_ctx next step; also bounds how far it runs ahead. */
		if (cudaStreamSynchronize(g->st) != cudaSuccess) {
			fprintf(stderr, "trainer: rank %d: step %" PRIu64 ": %s\n", g->rank, t,
			        cudaGetErrorString(cudaGetLastError()));
			err = -1;
			break;
		}
		g->step = t;
		if (t == 1 || t % o->log_every == 0 || t == o->steps) {
			if (cudaMemcpy(loss, g->params + p->loss_slot, sizeof(float),
			               cudaMemcpyDeviceToHost) != cudaSuccess) {
				err = -1;
				break;
			}
			*loss *= inv_batch;
			if (g->rank == 0) {
				printf("step %" PRIu64 " loss %.4f\n", t, *loss);
				fflush(stdout);
			}
		}
		int act = tr_ckpt_step(ctx, comm, t, g->world, g->rank);
		if (act < 0) {
			err = -1;
			break;
		}
		if (act == CKPT_STEP_EXIT) {
			g->preempted = 1; /* the emergency version is the restore point */
			break;
		}
		if (act == CKPT_STEP_SAVE || (o->ckpt_every && (t % o->ckpt_every == 0 || t == o->steps))) {
			if (g->dev_regions)
				err = tr_ckpt_save(ctx, t, CKPT_SAVE_LAZY, &last, g->rank);
			else if ((err = mirror_to_host(g)) == 0)
				err = tr_ckpt_save(ctx, t, CKPT_SAVE_DEFAULT, &last, g->rank);
		}
		if (o->step_ms && (o->slow_rank < 0 || o->slow_rank == o->rank))
			tr_sleep_ms(o->step_ms);
	}
	if (tr_ckpt_wait(&last, g->rank) < 0)
		err = -1;
	return err;
}

static int report(gpu_rank *g, tr_comm *comm, float loss)
{
	const tr_part *p = &g->part;
	CU_TRY(cudaStreamSynchronize(g->st));
	CU_TRY(cudaMemcpy(g->h_w, g->params, p->nparams * sizeof(float), cudaMemcpyDeviceToHost));
	CU_TRY(cudaMemcpy(g->h_m, g->mom, p->own * sizeof(float), cudaMemcpyDeviceToHost));
	CU_TRY(cudaMemcpy(g->h_v, g->var, p->own * sizeof(float), cudaMemcpyDeviceToHost));
	tr_done d;
	memset(&d, 0, sizeof(d));
	d.rank = (uint32_t)g->rank;
	d.digest = tr_state_digest(g->h_w, p->nparams, g->h_m, g->h_v, p->own, g->step, &g->rng,
	                           &g->data);
	d.weights_digest = tr_hash64(g->h_w, p->nparams * sizeof(float), 0);
	d.step = g->step;
	d.loss = loss;
	d.preempted = (uint32_t)g->preempted;
	return tr_comm_report(comm, &d) < 0 ? -1 : 0;
}

static int run(gpu_rank *g, const tr_opts *o, ckpt_ctx **ctx, tr_comm **comm)
{
	int ndev = 0;
	CU_TRY(cudaGetDeviceCount(&ndev));
	g->dev = g->rank % ndev;
	CU_TRY(cudaSetDevice(g->dev));
	CU_TRY(cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking));
#ifdef TR_HAVE_NCCL
	/* NCCL takes one rank per device. */
	g->use_nccl = ndev >= (int)g->world;
#endif
	g->dev_regions = ckpt_cuda_available();
	if (g->rank == 0)
		fprintf(stderr, "trainer: cuda: %d device(s), collectives %s, checkpoint %s\n", ndev,
		        g->use_nccl ? "NCCL" : "ZeroMQ via host",
		        g->dev_regions ? "device regions, lazy" : "host mirrors (libckpt without CUDA)");

	g->text = (uint8_t *)malloc(o->corpus);
	if (!g->text)
		return -1;
	tr_text_generate(o->seed, g->text, o->corpus);
	if (tr_corpus_init(&g->corpus, g->text, o->corpus, o->context, (uint32_t)g->rank, g->world) < 0)
		return -1;
	if (alloc_all(g) < 0 || fresh_state(g, o) < 0)
		return -1;

	uint64_t state_bytes = (g->part.nparams + 2 * g->part.own) * sizeof(float) + 4096;
	if (tr_ckpt_open(o, state_bytes, ctx) < 0 || register_regions(g, *ctx) < 0)
		return -1;
	int restored;
	uint64_t version = 0;
	if (restore(g, o, *ctx, CKPT_LATEST, &restored, &version) < 0)
		return -1;
	if (!restored && fresh_state(g, o) < 0)
		return -1;

	if (tr_comm_open(comm, (uint32_t)g->rank, g->world, o->coord) < 0)
		return -1;
	tr_hello hello;
	memset(&hello, 0, sizeof(hello));
	hello.rank = (uint32_t)g->rank;
	hello.restored = (uint32_t)restored;
	hello.version = version;
#ifdef TR_HAVE_NCCL
	ncclUniqueId id;
	if (g->use_nccl && g->rank == 0) {
		NC_TRY(ncclGetUniqueId(&id));
		memcpy(hello.nccl_id, &id, sizeof(id));
		hello.has_nccl_id = 1;
	}
#endif
	tr_welcome wel;
	if (tr_comm_handshake(*comm, &hello, &wel) < 0)
		return -1;
	if (wel.restored != (uint32_t)restored || (restored && wel.version != version)) {
		if (!wel.restored) {
			if (fresh_state(g, o) < 0)
				return -1;
		} else if (restore(g, o, *ctx, wel.version, &restored, &version) < 0) {
			return -1;
		}
	}
#ifdef TR_HAVE_NCCL
	if (g->use_nccl) {
		if (!wel.has_nccl_id) {
			fprintf(stderr, "trainer: rank %d: no NCCL id from rank 0\n", g->rank);
			return -1;
		}
		memcpy(&id, wel.nccl_id, sizeof(id));
		NC_TRY(ncclCommInitRank(&g->nccl, (int)g->world, id, g->rank));
	}
#endif
	/* SIGTERM and SIGUSR1 (the launcher passes on its own) become a
	 * preemption notice; ckpt_step then says SAVE and EXIT. */
	int perr = ckpt_preempt_install(*ctx, NULL, 0);
	if (perr < 0) {
		fprintf(stderr, "trainer: rank %d: ckpt_preempt_install: %s\n", g->rank, ckpt_strerror(perr));
		return -1;
	}
	float loss = 0.0f;
	if (train(g, o, *ctx, *comm, &loss) < 0)
		return -1;
	int err = ckpt_ctx_close(*ctx);
	*ctx = NULL;
	if (err < 0) {
		fprintf(stderr, "trainer: rank %d: ckpt_ctx_close: %s\n", g->rank, ckpt_strerror(err));
		return -1;
	}
	return report(g, *comm, loss);
}

int tr_cuda_probe(int *ndev, char *why, size_t cap)
{
	*ndev = 0;
	cudaError_t e = cudaGetDeviceCount(ndev);
	if (e != cudaSuccess || *ndev <= 0) {
		snprintf(why, cap, "no CUDA device available (%s)",
		         e != cudaSuccess ? cudaGetErrorString(e) : "no devices");
		*ndev = 0;
		return 0;
	}
	return 1;
}

int tr_rank_cuda(const tr_opts *o)
{
	gpu_rank *g = (gpu_rank *)calloc(1, sizeof(*g));
	if (!g)
		return TR_EXIT_FAIL;
	g->rank = o->rank;
	g->world = o->ranks;
	g->bl = tr_batch_slice(o->batch, o->ranks, (uint32_t)o->rank);
	tr_model_layout(&g->m, o->context, o->embed, o->hidden);
	tr_part_init(&g->part, g->m.nparams, (uint32_t)o->rank, o->ranks);
	ckpt_ctx *ctx = NULL;
	tr_comm *comm = NULL;
	int rc = run(g, o, &ctx, &comm) == 0 ? TR_EXIT_OK : TR_EXIT_FAIL;
	ckpt_ctx_close(ctx);
	tr_comm_close(comm);
#ifdef TR_HAVE_NCCL
	if (g->nccl)
		ncclCommDestroy(g->nccl);
#endif
	free_all(g);
	free(g);
	return rc;
}
