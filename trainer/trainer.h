/* The reference trainer's internal interface: a character-level MLP language
 * model trained data-parallel with ZeRO-1 AdamW, checkpointed through
 * libckpt. Shared by the C files and the CUDA rank (rank_cuda.cu). */
#ifndef TR_TRAINER_H
#define TR_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit codes of the launcher and the ranks. */
#define TR_EXIT_OK 0
#define TR_EXIT_FAIL 1
#define TR_EXIT_USAGE 2
#define TR_EXIT_SKIP 77 /* asked for CUDA where there is none */

/* Characters of the corpus: ' ', 'a'..'z', '.', ','. */
#define TR_VOCAB 29

/* ------------------------------------------------------------ options */

typedef enum tr_device { TR_DEV_CPU = 0, TR_DEV_CUDA = 1 } tr_device;

typedef struct tr_opts {
	uint32_t ranks;       /* world size */
	uint64_t steps;       /* total optimizer steps of the run */
	uint64_t seed;        /* model init and corpus */
	const char *root;     /* checkpoint root; NULL: libckpt's default (CKPT_ROOT) */
	const char *job;      /* job id */
	uint64_t ckpt_every;  /* save every K steps (and at the last); 0: never */
	tr_device device;
	uint32_t batch;       /* global batch, split over the ranks */
	uint32_t hidden;      /* width of both hidden layers */
	uint32_t context;     /* characters of context */
	uint32_t embed;       /* embedding width */
	float lr, wd;
	uint64_t step_ms;     /* sleep after each step, for kill tests */
	int32_t slow_rank;    /* -1: every rank sleeps step_ms; else only this one */
	uint64_t corpus;      /* corpus length in characters */
	uint64_t log_every;   /* print the loss every N steps */
	const char *dump_restored; /* tests: write the restored state here (tr_dump_state) */
	/* Set by the launcher for the rank processes it starts. */
	int32_t rank;         /* -1 in the launcher */
	const char *coord;    /* launcher's control endpoint */
	uint64_t incarnation; /* one value per launch, for libckpt's lineage */
} tr_opts;

/* ------------------------------------------------------------ model */

/* An MLP over the embeddings of the last `context` characters:
 * concat(emb) -> tanh(W1) -> tanh(W2) -> W3 -> softmax. All parameters live
 * in one flat f32 vector: the matrices first (they take weight decay), then
 * the biases. */
#define TR_LAYERS 3
typedef struct tr_model {
	uint32_t vocab, context, embed, hidden;
	uint32_t dim[TR_LAYERS + 1]; /* layer l maps dim[l] -> dim[l+1] */
	size_t emb;                  /* offsets in the flat vector */
	size_t w[TR_LAYERS], b[TR_LAYERS];
	size_t nparams;
	size_t ndecay;               /* [0, ndecay) takes weight decay */
} tr_model;

void tr_model_layout(tr_model *m, uint32_t context, uint32_t embed, uint32_t hidden);
/* Deterministic initialisation from seed; every rank gets the same. */
void tr_model_init(const tr_model *m, float *params, uint64_t seed);

/* ZeRO-1 partition: the flat vector is padded to world * shard elements,
 * one slot past the parameters carrying the loss through the collectives
 * (see README). Rank r owns [r * shard, (r + 1) * shard). */
typedef struct tr_part {
	size_t nparams, shard, padded;
	size_t lo, hi;        /* this rank's range in the padded vector */
	size_t own;           /* parameters of the range below nparams */
	size_t loss_slot;     /* == nparams */
} tr_part;

void tr_part_init(tr_part *p, size_t nparams, uint32_t rank, uint32_t world);

typedef struct tr_adam {
	float lr, beta1, beta2, eps, wd;
} tr_adam;

/* Bias corrections of step t (1-based), computed once per step on the host. */
void tr_adam_bias(const tr_adam *a, uint64_t t, float *bc1, float *bc2);

/* AdamW on one shard: g holds summed gradients, scaled by inv_batch.
 * Elements past the parameters copy g into params (the loss slot). */
void tr_adamw_shard(float *params, const float *g, float *m, float *v, const tr_part *p,
                    size_t ndecay, const tr_adam *a, float bc1, float bc2, float inv_batch);

/* CPU forward and backward over n examples; writes summed gradients of
 * every parameter into grads[0, nparams) and returns the summed loss. */
typedef struct tr_cpu_work tr_cpu_work;
tr_cpu_work *tr_cpu_work_new(const tr_model *m, uint32_t n);
void tr_cpu_work_free(tr_cpu_work *w);
float tr_cpu_fwd_bwd(const tr_model *m, tr_cpu_work *w, const float *params,
                     const uint8_t *ctx, const uint8_t *tgt, uint32_t n, float *grads);

/* ------------------------------------------------------------ data */

typedef struct tr_rng {
	uint64_t s[4];
} tr_rng;

void tr_rng_seed(tr_rng *r, uint64_t seed);
uint64_t tr_rng_next(tr_rng *r);
/* Uniform in [0, n), n > 0. */
uint64_t tr_rng_below(tr_rng *r, uint64_t n);

/* Fills out[0, len) with character ids of English-like sentences from a
 * seeded grammar. */
void tr_text_generate(uint64_t seed, uint8_t *out, size_t len);
/* The character of an id, for messages. */
char tr_text_char(uint8_t id);

/* A rank's place in its data: it walks its examples (every world-th
 * position of the corpus) in a pseudo-random order that the rng reshuffles
 * each epoch. Checkpointed as the region "data"; the rng as "rng". */
typedef struct tr_data {
	uint64_t epoch;      /* epochs started */
	uint64_t cursor;     /* next example of the epoch's order */
	uint64_t perm_a, perm_b; /* order: example (a * cursor + b) mod count */
	uint64_t seen;       /* examples consumed since the start of the job */
} tr_data;

typedef struct tr_corpus {
	const uint8_t *text;
	size_t len;
	uint32_t context, rank, world;
	uint64_t count;      /* examples owned by this rank */
} tr_corpus;

int tr_corpus_init(tr_corpus *c, const uint8_t *text, size_t len, uint32_t context,
                   uint32_t rank, uint32_t world);
void tr_data_init(tr_data *d, const tr_corpus *c);
/* Next n examples: ctx[n * context] and tgt[n]. */
void tr_batch_next(const tr_corpus *c, tr_data *d, tr_rng *r, uint32_t n, uint8_t *ctx,
                   uint8_t *tgt);

/* ------------------------------------------------------------ hashing */

/* A fixed 64-bit hash of bytes (not cryptographic). */
uint64_t tr_hash64(const void *p, size_t len, uint64_t seed);

/* ------------------------------------------------------------ transport */

/* Ranks talk over ZeroMQ on 127.0.0.1: a control channel to the launcher
 * and a PULL inbox per rank with PUSH sockets to every peer. Collectives
 * sum in rank order, so results do not depend on arrival order. */
typedef struct tr_comm tr_comm;

#define TR_NCCL_ID_BYTES 128

/* What a rank tells the launcher once it has restored. */
typedef struct tr_hello {
	uint32_t rank;
	uint32_t restored;          /* 1: restored `version` */
	uint64_t version;
	uint32_t has_nccl_id;       /* rank 0 in NCCL mode */
	uint8_t nccl_id[TR_NCCL_ID_BYTES];
} tr_hello;

/* The launcher's answer: the version every rank must hold. */
typedef struct tr_welcome {
	uint32_t restored;
	uint64_t version;
	uint32_t has_nccl_id;
	uint8_t nccl_id[TR_NCCL_ID_BYTES];
} tr_welcome;

/* What a rank reports at the end. */
typedef struct tr_done {
	uint32_t rank;
	uint64_t digest;         /* weights, its optimizer shard, step, rng, data */
	uint64_t weights_digest; /* must be equal on every rank */
	uint64_t step;
	float loss;
	uint32_t preempted;      /* 1: left at `step` because ckpt_step said EXIT */
} tr_done;

int tr_comm_open(tr_comm **out, uint32_t rank, uint32_t world, const char *coord);
/* Sends hello, waits for the welcome and connects to every peer. */
int tr_comm_handshake(tr_comm *c, const tr_hello *h, tr_welcome *w);
/* Sums the world slices of in (each `shard` floats) in rank order; slice
 * r lands in out on rank r. */
int tr_comm_reduce_scatter(tr_comm *c, const float *in, float *out, size_t shard);
/* buf[r * shard, (r + 1) * shard) from rank r to everyone. */
int tr_comm_all_gather(tr_comm *c, float *buf, size_t shard);
int tr_comm_report(tr_comm *c, const tr_done *d);
void tr_comm_close(tr_comm *c);

/* ------------------------------------------------------------ ranks */

/* The launcher: starts opts->ranks rank processes, answers their
 * handshake, prints the final digest. */
int tr_launch(const tr_opts *o, int argc, char **argv);
int tr_rank_cpu(const tr_opts *o);
/* CUDA: 1 and a device count if usable, else 0 and a reason in why. */
int tr_cuda_probe(int *ndev, char *why, size_t cap);
int tr_rank_cuda(const tr_opts *o);

/* Shared by both ranks: open the checkpoint context for this rank. */
struct ckpt_ctx;
int tr_ckpt_open(const tr_opts *o, uint64_t state_bytes, struct ckpt_ctx **out);
/* Registers a 1-d f32 region holding [off, off + n) of a tensor of total
 * elements; dev is a ckpt_device. */
int tr_ckpt_add_f32(struct ckpt_ctx *ctx, const char *name, float *p, size_t off, size_t n,
                    size_t total, int dev);
int tr_ckpt_add_blob(struct ckpt_ctx *ctx, const char *name, void *p, size_t bytes,
                     int dtype, size_t count);
/* Saves `version` and then waits for the save before it (*last), so that a
 * failed save is reported; *last becomes this one. -EEXIST (committed by an
 * earlier run) counts as done. */
struct ckpt_handle;
int tr_ckpt_save(struct ckpt_ctx *ctx, uint64_t version, uint32_t flags,
                 struct ckpt_handle **last, int rank);
/* Waits for *h to be durable and frees it; NULL is fine. */
int tr_ckpt_wait(struct ckpt_handle **h, int rank);
/* Once per step t, after the optimizer update: ckpt_step's answer on this
 * rank, agreed with every rank through a small collective (the ranks step
 * in lockstep: one leaving alone would leave the others waiting, and an
 * emergency step must be saved by all). EXIT if any rank says so, else
 * SAVE if any does, else CONTINUE; negative on a transport error. */
int tr_ckpt_step(struct ckpt_ctx *ctx, tr_comm *comm, uint64_t t, uint32_t world, int rank);

/* The number of ranks that saved `version` (from the job's version list in
 * this root; *world unchanged when the root does not list it: see
 * rank_common.c). Returns 0 or a negative code. */
int tr_ckpt_saved_world(struct ckpt_ctx *ctx, uint64_t version, uint32_t *world);
/* Tests (--dump-restored DIR): writes n floats, elements [off, off+n) of
 * the global tensor `name`, to DIR/<name>.<off>.<n>.f32. */
int tr_dump_state(const char *dir, const char *name, const float *p, size_t off, size_t n);
/* After restoring a version saved by another number of ranks: the data
 * partition (example p belongs to rank p mod world) has changed, so the
 * rank's place in its data and its sampling rng start afresh for the new
 * partition, seeded by the step so that the order is not a replay. */
void tr_reshard_data(tr_rng *rng, tr_data *d, const tr_corpus *c, uint64_t seed, uint32_t rank, uint64_t step);

/* Digest a rank reports: full weights, its shard of m and v, the rest. */
uint64_t tr_state_digest(const float *w, size_t nparams, const float *m, const float *v,
                         size_t own, uint64_t step, const tr_rng *rng, const tr_data *d);

/* Rank r's part of a global batch of b over w ranks (b >= w). */
static inline uint32_t tr_batch_slice(uint32_t b, uint32_t w, uint32_t r)
{
	return b / w + (r < b % w ? 1 : 0);
}

void tr_sleep_ms(uint64_t ms);
const char *tr_dev_name(tr_device d);

#ifdef __cplusplus
}
#endif
#endif
