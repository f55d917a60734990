#include "base/pcopy.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PART_BYTES ((size_t)1 << 20)
/* A snapshot's chunks come one after another, a few microseconds apart: a
 * thread that just finished its parts looks for the next job this many
 * times (about 20 us) before it sleeps, so that it is not woken (tens of
 * microseconds on a virtual machine) for every chunk. */
#define SPIN_TRIES 2000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

struct ckpt_pcopy {
	pthread_mutex_t call_mu; /* one copy at a time */
	pthread_mutex_t mu;      /* the job below */
	pthread_cond_t go, done;
	pthread_t *th;
	unsigned nth;
	int stop;
	_Atomic uint64_t gen; /* bumped for each job the gang is told of */
	ckpt_pcopy_fn fn;     /* the job: fn over [0, len) in parts of part */
	void *arg;
	size_t len, part;
	size_t next, parts, left; /* parts: handed out, in all, not yet copied */
	unsigned long long helped;
};

/* Takes and copies parts of the current job until none is left to take.
 * Called with mu held; returns with it held. */
static void copy_parts(ckpt_pcopy *pc, int helper)
{
	while (pc->next < pc->parts) {
		size_t k = pc->next++, off = k * pc->part;
		size_t n = pc->len - off < pc->part ? pc->len - off : pc->part;
		ckpt_pcopy_fn fn = pc->fn;
		void *arg = pc->arg;
		pthread_mutex_unlock(&pc->mu);
		fn(arg, off, n);
		pthread_mutex_lock(&pc->mu);
		pc->helped += (unsigned)helper;
		if (--pc->left == 0)
			pthread_cond_signal(&pc->done);
	}
}

static void *gang_main(void *arg)
{
	ckpt_pcopy *pc = arg;
	uint64_t seen = 0;
	pthread_mutex_lock(&pc->mu);
	for (;;) {
		if (!pc->stop && atomic_load_explicit(&pc->gen, memory_order_relaxed) == seen) {
			pthread_mutex_unlock(&pc->mu);
			for (int i = 0; i < SPIN_TRIES && atomic_load_explicit(&pc->gen, memory_order_relaxed) == seen; i++)
				cpu_relax();
			pthread_mutex_lock(&pc->mu);
		}
		while (!pc->stop && pc->gen == seen)
			pthread_cond_wait(&pc->go, &pc->mu);
		if (pc->stop)
			break;
		seen = pc->gen;
		copy_parts(pc, 1);
	}
	pthread_mutex_unlock(&pc->mu);
	return NULL;
}

int ckpt__pcopy_start(ckpt_pcopy **out, unsigned threads)
{
	ckpt_pcopy *pc = calloc(1, sizeof(*pc));
	if (!pc)
		return -ENOMEM;
	pthread_mutex_init(&pc->call_mu, NULL);
	pthread_mutex_init(&pc->mu, NULL);
	pthread_cond_init(&pc->go, NULL);
	pthread_cond_init(&pc->done, NULL);
	unsigned want = threads > 1 ? threads - 1 : 0;
	if (want && !(pc->th = calloc(want, sizeof(pthread_t)))) {
		ckpt__pcopy_stop(pc);
		return -ENOMEM;
	}
	for (; pc->nth < want; pc->nth++) {
		int r = pthread_create(&pc->th[pc->nth], NULL, gang_main, pc);
		if (r) {
			ckpt__pcopy_stop(pc);
			return -r;
		}
	}
	*out = pc;
	return 0;
}

void ckpt__pcopy_each(ckpt_pcopy *pc, size_t len, size_t part, ckpt_pcopy_fn fn, void *arg)
{
	if (!part)
		part = PART_BYTES;
	if (!pc || !pc->nth || len < 2 * part) {
		if (len)
			fn(arg, 0, len);
		return;
	}
	pthread_mutex_lock(&pc->call_mu);
	pthread_mutex_lock(&pc->mu);
	pc->fn = fn;
	pc->arg = arg;
	pc->len = len;
	pc->part = part;
	pc->next = 0;
	pc->parts = pc->left = (len + part - 1) / part;
	pc->gen++;
	pthread_cond_broadcast(&pc->go);
	copy_parts(pc, 0);
	while (pc->left)
		pthread_cond_wait(&pc->done, &pc->mu);
	pthread_mutex_unlock(&pc->mu);
	pthread_mutex_unlock(&pc->call_mu);
}

typedef struct {
	uint8_t *dst;
	const uint8_t *src;
	ckpt_copy_fn copy;
} copy_job;

static void copy_part(void *arg, size_t off, size_t n)
{
	const copy_job *j = arg;
	j->copy(j->dst + off, j->src + off, n);
}

static void plain_copy(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}

void ckpt__pcopy_with(ckpt_pcopy *pc, void *dst, const void *src, size_t len, ckpt_copy_fn copy)
{
	copy_job j = { dst, src, copy ? copy : plain_copy };
	ckpt__pcopy_each(pc, len, PART_BYTES, copy_part, &j);
}

void ckpt__pcopy(ckpt_pcopy *pc, void *dst, const void *src, size_t len)
{
	ckpt__pcopy_with(pc, dst, src, len, NULL);
}

unsigned long long ckpt__pcopy_helped(ckpt_pcopy *pc)
{
	if (!pc)
		return 0;
	pthread_mutex_lock(&pc->mu);
	unsigned long long n = pc->helped;
	pthread_mutex_unlock(&pc->mu);
	return n;
}

void ckpt__pcopy_stop(ckpt_pcopy *pc)
{
	if (!pc)
		return;
	pthread_mutex_lock(&pc->mu);
	pc->stop = 1;
	pthread_cond_broadcast(&pc->go);
	pthread_mutex_unlock(&pc->mu);
	for (unsigned i = 0; i < pc->nth; i++)
		pthread_join(pc->th[i], NULL);
	free(pc->th);
	pthread_cond_destroy(&pc->go);
	pthread_cond_destroy(&pc->done);
	pthread_mutex_destroy(&pc->mu);
	pthread_mutex_destroy(&pc->call_mu);
	free(pc);
}
