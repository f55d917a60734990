/* trainer: the reference data-parallel trainer of ckpt.
 *
 *   trainer --ranks N --steps S --seed X --root DIR --ckpt-every K
 *           [--device cpu|cuda] [--job J] [--batch B] [--hidden H] [--lr LR]
 *           [--step-ms MS] [--slow-rank R] [--context C] [--embed E] [--wd WD]
 *           [--corpus CHARS] [--log-every N]
 *
 * One command starts N rank processes (this same binary, with --rank) and
 * waits for them. Started again with the same arguments after a crash, the
 * ranks resume from the newest committed checkpoint. The last line of
 * output is "final-digest <hex>". See README.md. */
#include "trainer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(void)
{
	fprintf(stderr,
	        "usage: trainer [--ranks N] [--steps S] [--seed X] [--root DIR] [--ckpt-every K]\n"
	        "               [--device cpu|cuda] [--job J] [--batch B] [--hidden H] [--lr LR]\n"
	        "               [--step-ms MS] [--slow-rank R] [--context C] [--embed E] [--wd WD]\n"
	        "               [--corpus CHARS] [--log-every N] [--dump-restored DIR]\n"
	        "defaults: 1 rank, 200 steps, seed 1, root $CKPT_ROOT or ./trainer-ckpt,\n"
	        "          checkpoint every 20 steps, cpu, job \"trainer\", batch 64 (global),\n"
	        "          hidden 128, context 8, embed 16, lr 0.01, wd 0.01, corpus 65536,\n"
	        "          log every 10 steps\n");
	exit(TR_EXIT_USAGE);
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	if (!s || !*s || *s == '-')
		return -1;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_f(const char *s, float *out)
{
	char *end;
	errno = 0;
	float v = strtof(s, &end);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

void tr_sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

const char *tr_dev_name(tr_device d)
{
	return d == TR_DEV_CUDA ? "cuda" : "cpu";
}

int main(int argc, char **argv)
{
	const char *env_root = getenv("CKPT_ROOT");
	tr_opts o = {
		.ranks = 1, .steps = 200, .seed = 1,
		.root = env_root && *env_root ? env_root : "trainer-ckpt",
		.job = "trainer", .ckpt_every = 20, .device = TR_DEV_CPU, .batch = 64,
		.hidden = 128, .context = 8, .embed = 16, .lr = 0.01f, .wd = 0.01f,
		.corpus = 65536, .log_every = 10, .rank = -1, .slow_rank = -1,
	};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t n = 0;
		int bad = 0;
		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			usage();
		if (!v)
			usage();
		if (!strcmp(a, "--root"))
			o.root = v;
		else if (!strcmp(a, "--dump-restored"))
			o.dump_restored = v;
		else if (!strcmp(a, "--job"))
			o.job = v;
		else if (!strcmp(a, "--coord"))
			o.coord = v;
		else if (!strcmp(a, "--device")) {
			if (!strcmp(v, "cpu"))
				o.device = TR_DEV_CPU;
			else if (!strcmp(v, "cuda"))
				o.device = TR_DEV_CUDA;
			else
				bad = 1;
		} else if (!strcmp(a, "--lr"))
			bad = parse_f(v, &o.lr) < 0 || !(o.lr > 0.0f);
		else if (!strcmp(a, "--wd"))
			bad = parse_f(v, &o.wd) < 0 || o.wd < 0.0f;
		else if ((bad = parse_u64(v, &n)) < 0)
			;
		else if (!strcmp(a, "--ranks"))
			bad = (o.ranks = (uint32_t)n) != n || !n || n > 256;
		else if (!strcmp(a, "--steps"))
			o.steps = n;
		else if (!strcmp(a, "--seed"))
			o.seed = n;
		else if (!strcmp(a, "--ckpt-every"))
			o.ckpt_every = n;
		else if (!strcmp(a, "--batch"))
			bad = (o.batch = (uint32_t)n) != n || !n;
		else if (!strcmp(a, "--hidden"))
			bad = (o.hidden = (uint32_t)n) != n || !n || n > 8192;
		else if (!strcmp(a, "--context"))
			bad = (o.context = (uint32_t)n) != n || !n || n > 256;
		else if (!strcmp(a, "--embed"))
			bad = (o.embed = (uint32_t)n) != n || !n || n > 1024;
		else if (!strcmp(a, "--step-ms"))
			o.step_ms = n;
		else if (!strcmp(a, "--slow-rank"))
			bad = (o.slow_rank = (int32_t)n) < 0 || (uint64_t)o.slow_rank != n;
		else if (!strcmp(a, "--corpus"))
			o.corpus = n;
		else if (!strcmp(a, "--log-every"))
			bad = !(o.log_every = n);
		else if (!strcmp(a, "--rank"))
			bad = (o.rank = (int32_t)n) < 0 || (uint64_t)o.rank != n;
		else if (!strcmp(a, "--incarnation"))
			o.incarnation = n;
		else
			usage();
		if (bad) {
			fprintf(stderr, "trainer: bad value for %s: %s\n", a, v);
			usage();
		}
		i++;
	}
	if (o.batch < o.ranks) {
		fprintf(stderr, "trainer: the global batch (%u) is smaller than the ranks (%u)\n",
		        o.batch, o.ranks);
		return TR_EXIT_USAGE;
	}
	if (o.corpus < (uint64_t)o.context + 2 * o.ranks + 1) {
		fprintf(stderr, "trainer: --corpus too small\n");
		return TR_EXIT_USAGE;
	}
	if (o.slow_rank >= 0 && (uint32_t)o.slow_rank >= o.ranks) {
		fprintf(stderr, "trainer: --slow-rank %d: there are %u ranks\n", o.slow_rank, o.ranks);
		return TR_EXIT_USAGE;
	}
	if (o.rank < 0)
		return tr_launch(&o, argc, argv);
	if ((uint32_t)o.rank >= o.ranks || !o.coord) {
		fprintf(stderr, "trainer: --rank is for the launcher's own use\n");
		return TR_EXIT_USAGE;
	}
	return o.device == TR_DEV_CUDA ? tr_rank_cuda(&o) : tr_rank_cpu(&o);
}
