/* One CPU rank: forward/backward on its slice of the global batch,
 * reduce-scatter of the gradients, AdamW on its shard, all-gather of the
 * parameters; a checkpoint every K steps. */
#include "trainer.h"
#include "ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cpu_rank {
	tr_model m;
	tr_part part;
	tr_corpus corpus;
	uint8_t *text, *bctx, *btgt;
	float *params, *grads, *gshard, *mom, *var; /* mom, var: this rank's shard */
	tr_cpu_work *work;
	/* Checkpointed with the tensors above. */
	uint64_t step;
	tr_rng rng;
	tr_data data;
} cpu_rank;

static void fresh_state(cpu_rank *s, const tr_opts *o)
{
	memset(s->params, 0, s->part.padded * sizeof(float));
	tr_model_init(&s->m, s->params, o->seed);
	memset(s->mom, 0, s->part.shard * sizeof(float));
	memset(s->var, 0, s->part.shard * sizeof(float));
	s->step = 0;
	tr_rng_seed(&s->rng, o->seed * 0x100000001b3ull + (uint64_t)o->rank + 1);
	tr_data_init(&s->data, &s->corpus);
}

static int register_regions(cpu_rank *s, ckpt_ctx *ctx)
{
	const tr_part *p = &s->part;
	int err;
	if ((err = tr_ckpt_add_f32(ctx, "weights", s->params, 0, p->nparams, p->nparams,
	                           CKPT_DEVICE_HOST)) < 0 ||
	    (err = tr_ckpt_add_f32(ctx, "adam_m", s->mom, p->lo, p->own, p->nparams,
	                           CKPT_DEVICE_HOST)) < 0 ||
	    (err = tr_ckpt_add_f32(ctx, "adam_v", s->var, p->lo, p->own, p->nparams,
	                           CKPT_DEVICE_HOST)) < 0 ||
	    (err = tr_ckpt_add_blob(ctx, "step", &s->step, sizeof(s->step), CKPT_DTYPE_U64, 1)) < 0 ||
	    (err = tr_ckpt_add_blob(ctx, "rng", &s->rng, sizeof(s->rng), CKPT_DTYPE_BYTES, 0)) < 0 ||
	    (err = tr_ckpt_add_blob(ctx, "data", &s->data, sizeof(s->data), CKPT_DTYPE_BYTES, 0)) < 0)
		return err;
	return 0;
}

static void free_rank(cpu_rank *s)
{
	free(s->text);
	free(s->bctx);
	free(s->btgt);
	free(s->params);
	free(s->grads);
	free(s->gshard);
	free(s->mom);
	free(s->var);
	tr_cpu_work_free(s->work);
}

/* Restores the newest committed version; *restored = 0 when there is none. */
static int restore(cpu_rank *s, const tr_opts *o, ckpt_ctx *ctx, uint64_t version, int rank, int *restored,
                   uint64_t *got)
{
	int err = ckpt_restore(ctx, version, 0, got);
	*restored = 0;
	/* Only "no version" starts a fresh model: -CKPT_EUNREACHABLE (a
	 * committed version out of reach) and every other error stop the rank. */
	if (err == -CKPT_ENOVERSION && version == CKPT_LATEST)
		return 0;
	if (err == -CKPT_EUNREACHABLE) {
		fprintf(stderr, "trainer: rank %d: a committed checkpoint exists but none of its copies is reachable "
		        "from here; not starting from scratch (the log names where the copies are)\n", rank);
		return err;
	}
	if (err < 0) {
		fprintf(stderr, "trainer: rank %d: restore: %s\n", rank, ckpt_strerror(err));
		return err;
	}
	if (s->step != *got) {
		fprintf(stderr, "trainer: rank %d: version %" PRIu64 " holds step %" PRIu64 "\n", rank,
		        *got, s->step);
		return -CKPT_EMISMATCH;
	}
	*restored = 1;
	/* Saved by another number of ranks: libckpt repartitioned the ZeRO-1
	 * shards of adam_m and adam_v; the data partition starts afresh. */
	uint32_t saved = o->ranks;
	if ((err = tr_ckpt_saved_world(ctx, *got, &saved)) < 0) {
		fprintf(stderr, "trainer: rank %d: version %" PRIu64 ": %s\n", rank, *got, ckpt_strerror(err));
		return err;
	}
	if (saved != o->ranks) {
		if (rank == 0)
			printf("resharded step %" PRIu64 " from %u ranks to %u\n", *got, saved, o->ranks);
		tr_reshard_data(&s->rng, &s->data, &s->corpus, o->seed, (uint32_t)rank, *got);
	}
	if (o->dump_restored) {
		const tr_part *p = &s->part;
		if ((rank == 0 && tr_dump_state(o->dump_restored, "weights", s->params, 0, p->nparams) < 0) ||
		    tr_dump_state(o->dump_restored, "adam_m", s->mom, p->lo, p->own) < 0 ||
		    tr_dump_state(o->dump_restored, "adam_v", s->var, p->lo, p->own) < 0)
			return -EIO;
	}
	return 0;
}

int tr_rank_cpu(const tr_opts *o)
{
	int rc = TR_EXIT_FAIL, err;
	const uint32_t rank = (uint32_t)o->rank, world = o->ranks;
	const uint32_t bl = tr_batch_slice(o->batch, world, rank);
	cpu_rank s = { 0 };
	ckpt_ctx *ctx = NULL;
	ckpt_handle *last = NULL;
	tr_comm *comm = NULL;

	tr_model_layout(&s.m, o->context, o->embed, o->hidden);
	tr_part_init(&s.part, s.m.nparams, rank, world);
	const tr_part *p = &s.part;
	s.text = malloc(o->corpus);
	s.bctx = malloc((size_t)bl * o->context);
	s.btgt = malloc(bl);
	s.params = calloc(p->padded, sizeof(float));
	s.grads = calloc(p->padded, sizeof(float));
	s.gshard = calloc(p->shard, sizeof(float));
	s.mom = calloc(p->shard, sizeof(float));
	s.var = calloc(p->shard, sizeof(float));
	s.work = tr_cpu_work_new(&s.m, bl);
	if (!s.text || !s.bctx || !s.btgt || !s.params || !s.grads || !s.gshard || !s.mom ||
	    !s.var || !s.work) {
		fprintf(stderr, "trainer: rank %u: out of memory\n", rank);
		goto out;
	}
	tr_text_generate(o->seed, s.text, o->corpus);
	if (tr_corpus_init(&s.corpus, s.text, o->corpus, o->context, rank, world) < 0)
		goto out;
	fresh_state(&s, o);

	uint64_t state_bytes = (p->nparams + 2 * p->own) * sizeof(float) + 4096;
	if (tr_ckpt_open(o, state_bytes, &ctx) < 0 || register_regions(&s, ctx) < 0)
		goto out;
	int restored;
	uint64_t version = 0;
	if (restore(&s, o, ctx, CKPT_LATEST, o->rank, &restored, &version) < 0)
		goto out;
	if (!restored)
		fresh_state(&s, o); /* a failed restore leaves the regions unspecified */

	if ((err = tr_comm_open(&comm, rank, world, o->coord)) < 0)
		goto out;
	tr_hello hello = { .rank = rank, .restored = (uint32_t)restored, .version = version };
	tr_welcome wel;
	if (tr_comm_handshake(comm, &hello, &wel) < 0)
		goto out;
	if (wel.restored != (uint32_t)restored || (restored && wel.version != version)) {
		if (!wel.restored)
			fresh_state(&s, o);
		else if (restore(&s, o, ctx, wel.version, o->rank, &restored, &version) < 0)
			goto out;
	}

	tr_adam adam = { .lr = o->lr, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .wd = o->wd };
	const float inv_batch = 1.0f / (float)o->batch;
	float loss = 0.0f;
	int preempted = 0;
	/* SIGTERM and SIGUSR1 (the launcher passes on its own) become a
	 * preemption notice; ckpt_step then says SAVE and EXIT. */
	if ((err = ckpt_preempt_install(ctx, NULL, 0)) < 0) {
		fprintf(stderr, "trainer: rank %u: ckpt_preempt_install: %s\n", rank, ckpt_strerror(err));
		goto out;
	}
	while (s.step < o->steps) {
		uint64_t t = s.step + 1;
		tr_batch_next(&s.corpus, &s.data, &s.rng, bl, s.bctx, s.btgt);
		float l = tr_cpu_fwd_bwd(&s.m, s.work, s.params, s.bctx, s.btgt, bl, s.grads);
		s.grads[p->loss_slot] = l;
		memset(s.grads + p->loss_slot + 1, 0, (p->padded - p->loss_slot - 1) * sizeof(float));
		if (tr_comm_reduce_scatter(comm, s.grads, s.gshard, p->shard) < 0)
			goto out;
		/* Host regions are copied before ckpt_save returns, so there is no
		 * copy to wait for; the call marks where a GPU trainer must wait. */
		if ((err = ckpt_fence(ctx)) < 0) {
			fprintf(stderr, "trainer: rank %u: ckpt_fence: %s\n", rank, ckpt_strerror(err));
			goto out;
		}
		float bc1, bc2;
		tr_adam_bias(&adam, t, &bc1, &bc2);
		tr_adamw_shard(s.params, s.gshard, s.mom, s.var, p, s.m.ndecay, &adam, bc1, bc2,
		               inv_batch);
		if (tr_comm_all_gather(comm, s.params, p->shard) < 0)
			goto out;
		s.step = t;
		loss = s.params[p->loss_slot] * inv_batch;
		if (rank == 0 && (t == 1 || t % o->log_every == 0 || t == o->steps)) {
			printf("step %" PRIu64 " loss %.4f\n", t, loss);
			fflush(stdout);
		}
		int act = tr_ckpt_step(ctx, comm, t, world, o->rank);
		if (act < 0)
			goto out;
		if (act == CKPT_STEP_EXIT) {
			preempted = 1; /* the emergency version is the restore point */
			break;
		}
		if ((act == CKPT_STEP_SAVE || (o->ckpt_every && (t % o->ckpt_every == 0 || t == o->steps))) &&
		    tr_ckpt_save(ctx, t, CKPT_SAVE_DEFAULT, &last, o->rank) < 0)
			goto out;
		if (o->step_ms && (o->slow_rank < 0 || o->slow_rank == o->rank))
			tr_sleep_ms(o->step_ms);
	}
	if (tr_ckpt_wait(&last, o->rank) < 0)
		goto out;
	err = ckpt_ctx_close(ctx);
	ctx = NULL;
	if (err < 0) {
		fprintf(stderr, "trainer: rank %u: ckpt_ctx_close: %s\n", rank, ckpt_strerror(err));
		goto out;
	}
	tr_done done = {
		.rank = rank,
		.digest = tr_state_digest(s.params, p->nparams, s.mom, s.var, p->own, s.step, &s.rng,
		                          &s.data),
		.weights_digest = tr_hash64(s.params, p->nparams * sizeof(float), 0),
		.step = s.step,
		.loss = loss,
		.preempted = (uint32_t)preempted,
	};
	if (tr_comm_report(comm, &done) == 0)
		rc = TR_EXIT_OK;
out:
	if (last)
		tr_ckpt_wait(&last, o->rank);
	ckpt_ctx_close(ctx);
	tr_comm_close(comm);
	free_rank(&s);
	return rc;
}
