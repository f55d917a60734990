/* ckpt_step: the trainer's step times (reported to the coordinator for its
 * advice), and whether this step saves, by interval, by advice or for an
 * emergency (preempt.c). */
#include "ctx.h"

#include <errno.h>
#include <string.h>
#include <time.h>

int ckpt_step(ckpt_ctx *ctx, uint64_t step)
{
	if (!ctx)
		return -EINVAL;
	uint64_t now = ckpt__now_ns();
	pthread_mutex_lock(&ctx->step_mu);
	/* A step is the time between two calls naming successive steps; a
	 * jump (a restore, a skipped call) starts the measure afresh. */
	if (ctx->step_last_ns && step == ctx->step_cur + 1) {
		ctx->step_sum_ns += now - ctx->step_last_ns;
		ctx->step_count++;
	}
	ctx->step_last_ns = now;
	ctx->step_cur = step;
	/* The save steps are a function of the step number alone (and of the
	 * coordinator's advice, the same for every rank): every rank saves the
	 * same versions. Before any advice, auto saves every 100 steps, which
	 * also measures what a checkpoint costs. */
	int act = CKPT_STEP_CONTINUE;
	uint64_t every = 0, from = 0;
	if (ctx->interval_mode == 1) {
		every = ctx->interval_steps;
	} else if (ctx->interval_mode == 2) {
		/* The newest advice whose start this step has reached; those
		 * before it can never rule again. Before any, every 100 steps. */
		every = 100;
		for (uint32_t k = ctx->nadv; k-- > 0;)
			if (step >= ctx->adv[k].from) {
				every = ctx->adv[k].every;
				from = ctx->adv[k].from;
				if (k) {
					memmove(ctx->adv, ctx->adv + k, (ctx->nadv - k) * sizeof(ctx->adv[0]));
					ctx->nadv -= k;
				}
				break;
			}
	}
	if (every && step && step >= from && (step - from) % every == 0)
		act = CKPT_STEP_SAVE;
	int said;
	act = ckpt__preempt_step(ctx, step, act, &said);
	uint64_t em_step = ctx->em.step;
	pthread_mutex_unlock(&ctx->step_mu);
	if (said)
		LOG_W(&ctx->log, em_step, "preempted: leave now (%s)", said == CKPT_EM_EXIT_LATE ? "the deadline is near and the emergency "
		      "version is not committed; the previous committed version is the restore point"
		      : "the emergency version is committed");
	return act;
}
