/* ckpt-example: one rank of a toy data-parallel job, showing how a trainer
 * uses libckpt: register the state once, restore the latest checkpoint at
 * start, arm the preemption signals, save every K steps (and whenever
 * ckpt_step says SAVE) without waiting, leave when ckpt_step says EXIT,
 * wait only before exiting: the loop of docs/operations.md.
 *
 *   ckpt-example --root DIR --job J --rank R --world-size W --steps S
 *                [--ckpt-every K] [--state-bytes N] [--step-ms MS]
 *
 * The state evolves deterministically from (rank, step), so a run that is
 * killed and restarted ends with the same digest as one that never stopped.
 * The last line is "final-digest <hex>", or after a preemption (SIGTERM,
 * SIGUSR1, a notice through the daemon) "preempted at step <S>"; exit 0
 * either way: a launcher restarts a preempted job and it resumes. */
#include "ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct state {
	float *weights, *momentum;
	size_t n;
	uint64_t step;     /* next step to run */
	uint64_t rng;      /* data-order RNG */
} state;

static uint64_t next_rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void train_step(state *s, uint32_t rank)
{
	/* A fake gradient from the RNG; SGD with momentum. */
	for (size_t i = 0; i < s->n; i++) {
		float g = (float)((next_rng(&s->rng) >> 40) % 2001) / 1000.0f - 1.0f;
		s->momentum[i] = 0.9f * s->momentum[i] + g * (1.0f + (float)rank * 0.01f);
		s->weights[i] -= 0.001f * s->momentum[i];
	}
	s->step++;
}

static uint64_t digest(const state *s)
{
	uint64_t h = 1469598103934665603ull;
	const uint8_t *parts[2] = { (const uint8_t *)s->weights, (const uint8_t *)s->momentum };
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < s->n * sizeof(float); i++)
			h = (h ^ parts[k][i]) * 1099511628211ull;
	return h ^ s->step;
}

static void usage(void)
{
	fprintf(stderr, "usage: ckpt-example --root DIR --job J --rank R --world-size W --steps S\n"
	                "                    [--ckpt-every K] [--state-bytes N] [--step-ms MS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	ckpt_config cfg;
	if (ckpt_config_init(&cfg) < 0)
		return 2;
	uint64_t steps = 0, every = 5, bytes = 4 << 20, step_ms = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		if (!strcmp(a, "--root")) cfg.root = v;
		else if (!strcmp(a, "--job")) cfg.job_id = v;
		else if (!strcmp(a, "--rank")) cfg.rank = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--world-size")) cfg.world_size = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--steps")) steps = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--ckpt-every")) every = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--state-bytes")) bytes = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--step-ms")) step_ms = strtoull(v, NULL, 10);
		else usage();
		i++;
	}
	if (!steps || !every || bytes < 8)
		usage();
	state s = { .n = bytes / 8 };
	s.weights = calloc(s.n, sizeof(float));
	s.momentum = calloc(s.n, sizeof(float));
	s.rng = 12345 + cfg.rank;
	cfg.chunk_bytes = 1 << 20;
	cfg.staging_bytes = 2 * bytes + (2 << 20); /* two saves in flight at most */
	ckpt_ctx *ctx;
	int r = ckpt_ctx_open(&cfg, &ctx);
	if (r < 0) {
		fprintf(stderr, "ckpt_ctx_open: %s\n", ckpt_strerror(r));
		return 1;
	}
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "weights", s.weights, s.n * sizeof(float));
	d.dtype = CKPT_DTYPE_F32;
	d.ndim = 2;
	d.global_shape[0] = cfg.world_size; d.global_shape[1] = s.n;
	d.offsets[0] = cfg.rank;
	d.extents[0] = 1; d.extents[1] = s.n;
	ckpt_region_add(ctx, &d);
	d.name = "momentum";
	d.ptr = s.momentum;
	ckpt_region_add(ctx, &d);
	ckpt_region_desc_init(&d, "step", &s.step, sizeof(s.step));
	ckpt_region_add(ctx, &d);
	ckpt_region_desc_init(&d, "rng", &s.rng, sizeof(s.rng));
	ckpt_region_add(ctx, &d);

	uint64_t restored;
	r = ckpt_restore(ctx, CKPT_LATEST, 0, &restored);
	if (r == 0)
		printf("rank %u: resumed from version %" PRIu64 " at step %" PRIu64 "\n", cfg.rank, restored, s.step);
	else if (r == -CKPT_ENOVERSION) /* the only answer that means a new job */
		printf("rank %u: no checkpoint, starting fresh\n", cfg.rank);
	else if (r == -CKPT_EUNREACHABLE) {
		/* A checkpoint exists but is out of reach from here: starting
		 * fresh would train over it. The log says where the copies are. */
		fprintf(stderr, "rank %u: a committed checkpoint exists but cannot be reached: %s\n", cfg.rank,
		        ckpt_strerror(r));
		return 1;
	} else {
		fprintf(stderr, "rank %u: restore failed: %s\n", cfg.rank, ckpt_strerror(r));
		return 1;
	}
	/* SIGTERM (Kubernetes, systemd, Slurm's preemption, torchrun) and
	 * SIGUSR1 (Slurm's --signal) become a notice; ckpt_step answers. */
	r = ckpt_preempt_install(ctx, NULL, 0);
	if (r < 0) {
		fprintf(stderr, "rank %u: ckpt_preempt_install: %s\n", cfg.rank, ckpt_strerror(r));
		return 1;
	}
	ckpt_handle *last = NULL;
	while (s.step < steps) {
		train_step(&s, cfg.rank);
		if (step_ms) {
			struct timespec ts = { (time_t)(step_ms / 1000), (long)(step_ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
		/* Once per step: step times, interval advice and preemption. */
		int act = ckpt_step(ctx, s.step);
		if (act == CKPT_STEP_EXIT) {
			/* The emergency version is safe (or the deadline is close and the
			 * last committed version stays the restore point): leave. */
			ckpt_handle_free(last);
			r = ckpt_ctx_close(ctx);
			printf("rank %u: preempted at step %" PRIu64 "\n", cfg.rank, s.step);
			free(s.weights);
			free(s.momentum);
			return r < 0 ? 1 : 0;
		}
		if (act == CKPT_STEP_SAVE || s.step % every == 0 || s.step == steps) {
			ckpt_handle *h;
			/* The version is the number of steps done: the state holds it too. */
			r = ckpt_save(ctx, s.step, 0, &h);
			if (r == -EEXIST)
				continue; /* committed by an earlier run */
			if (r < 0) {
				fprintf(stderr, "rank %u: save at step %" PRIu64 ": %s\n", cfg.rank, s.step, ckpt_strerror(r));
				return 1;
			}
			/* An error of the previous save shows up here, never silently. */
			if (last) {
				r = ckpt_handle_wait(last, CKPT_TIER_LOCAL_DISK, -1, NULL);
				ckpt_handle_free(last);
				if (r < 0) {
					fprintf(stderr, "rank %u: a save failed: %s\n", cfg.rank, ckpt_strerror(r));
					return 1;
				}
			}
			last = h;
			printf("rank %u: step %" PRIu64 " saved\n", cfg.rank, s.step);
			fflush(stdout);
		}
	}
	if (last) {
		r = ckpt_handle_wait(last, CKPT_TIER_LOCAL_DISK, -1, NULL);
		ckpt_handle_free(last);
		if (r < 0) {
			fprintf(stderr, "rank %u: the last save failed: %s\n", cfg.rank, ckpt_strerror(r));
			return 1;
		}
	}
	ckpt_ctx_close(ctx);
	printf("final-digest %016" PRIx64 "\n", digest(&s));
	free(s.weights);
	free(s.momentum);
	return 0;
}
