/* A libckpt rank's training loop and its restore, for the tests of
 * emergency checkpoints (test_preempt, test_roles_replace): one region of
 * `bytes` whose contents are a function of (rank, step); ckpt_step every
 * step, a save whenever it says SAVE (the interval, an emergency), gone
 * when it says EXIT. Its report pipe: 'R' once at ready_step, 'S' before
 * each save, then at EXIT one line "E <last step saved off the interval,
 * or 0> <last step saved>" (an emergency step may fall on the interval:
 * the last save is the emergency's then). Call them in the rank's child
 * process, its environment set (rank_proc.h). */
#ifndef CKPTD_ROLES_TRAIN_LOOP_H
#define CKPTD_ROLES_TRAIN_LOOP_H

#include "rank_proc.h"

#include <ckpt.h>

typedef void (*tl_fill_fn)(uint8_t *b, int rank, uint64_t step);

/* A rank process and its report pipe. */
typedef struct tl_proc {
	pid_t pid;
	int rep;
} tl_proc;

/* The library's settings these tests run with: small chunks and staging,
 * one worker, an interval save every 20 steps, partner writes given 5 s,
 * leaving 0.5 s before an emergency's deadline. */
static inline void tl_env(void)
{
	setenv("CKPT_CHUNK_BYTES", "64K", 1);
	setenv("CKPT_STAGING_BYTES", "4M", 1);
	setenv("CKPT_WORKERS", "1", 1);
	setenv("CKPT_INTERVAL", "20", 1);
	setenv("CKPT_PEER_TIMEOUT_MS", "5000", 1);
	setenv("CKPT_PREEMPT_EXIT_MARGIN_MS", "500", 1);
}

static inline void tl_train(int rank, int rep, size_t bytes, int step_ms, uint64_t interval, uint64_t ready_step,
                            tl_fill_fn fill)
{
	uint8_t *b = malloc(bytes);
	T_ASSERT(b);
	ckpt_ctx *ctx = rp_open((const char *[]){ "w" }, &b, (size_t[]){ bytes }, 1);
	T_OK(ckpt_preempt_install(ctx, NULL, 0));
	uint64_t emergency = 0, interval_saves = 0, saved = 0;
	for (uint64_t step = 1; step < 4000; step++) {
		fill(b, rank, step);
		usleep((useconds_t)step_ms * 1000);
		int a = ckpt_step(ctx, step);
		if (step == ready_step)
			T_ASSERT(write(rep, "R", 1) == 1);
		if (a == CKPT_STEP_SAVE) {
			ckpt_handle *h;
			T_ASSERT(write(rep, "S", 1) == 1);
			T_OK(ckpt_save(ctx, step, 0, &h));
			ckpt_handle_free(h);
			saved = step;
			if (step % interval)
				emergency = step;
			else
				interval_saves++;
		} else if (a == CKPT_STEP_EXIT) {
			char line[64];
			int n = snprintf(line, sizeof(line), "E %llu %llu\n", (unsigned long long)emergency,
			                 (unsigned long long)saved);
			fprintf(stderr, "rank %d: EXIT at step %llu (emergency step %llu, %llu interval saves)\n", rank,
			        (unsigned long long)step, (unsigned long long)emergency, (unsigned long long)interval_saves);
			T_OK(ckpt_ctx_close(ctx));
			T_ASSERT(write(rep, line, (size_t)n) == n);
			free(b);
			return;
		}
	}
	T_FAIL("rank %d: no EXIT after 4000 steps", rank);
}

/* Restores CKPT_LATEST: it must be version want, bit-exact. */
static inline void tl_restore(int rank, uint64_t want, size_t bytes, tl_fill_fn fill)
{
	uint8_t *b = malloc(bytes), *w = malloc(bytes);
	T_ASSERT(b && w);
	ckpt_ctx *ctx = rp_open((const char *[]){ "w" }, &b, (size_t[]){ bytes }, 1);
	uint64_t got = 0;
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, &got));
	fill(w, rank, got);
	if (got != want || memcmp(b, w, bytes))
		T_FAIL("rank %d restored version %llu (want %llu)%s", rank, (unsigned long long)got, (unsigned long long)want,
		       got == want ? ", not bit-exact" : "");
	T_OK(ckpt_ctx_close(ctx));
	free(b);
	free(w);
}

#endif
