/* ckpt-restore-bench: one rank's restore of a state saved from a file
 * (ckpt-rank-bench save --state-file), timed and measured as a client
 * benchmark measures a download (tools/bench/ckpt-s3.sh, tools/bench-s3.sh):
 *
 *   the regions are allocated and touched (state_file.h's layout), then,
 *   with --ready FILE, FILE is created and the process waits for --go FILE
 *   (the script starts every rank's restore at once), then ckpt_ctx_open,
 *   ckpt_region_add and ckpt_restore of --version are timed, and the CPU
 *   (user + system of every thread, getrusage) of those and ckpt_ctx_close;
 *   then the peak RSS (VmHWM), then every byte of the regions is compared
 *   with the file (outside what is timed and measured).
 *
 * Where it reads from is the library's settings (CKPT_* variables: job,
 * rank, world size, root, restore order, shared dir): ckpt-s3.sh gives it an
 * empty root, no daemon and CKPT_RESTORE_ORDER=shared, so that the object
 * store is the only copy. Every chunk's checksum is checked by ckpt_restore
 * itself (it always does).
 *
 * Output: one JSON object on stdout. Exit 0; 1 on a failed restore or a
 * byte that differs; 2 on bad arguments. Uses only the public header. */
#define _GNU_SOURCE
#include <ckpt.h>

#include "bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_REGIONS 64
#define GO_WAIT_S 600

/* VmHWM in KiB, 0 if unknown. */
static uint64_t hwm_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kb = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ckpt-restore-bench --state-file FILE [--regions 1] [--version V] [--ready FILE --go FILE]\n"
	           "Restores the version (default: the newest committed) into regions laid out as\n"
	           "ckpt-rank-bench save --state-file FILE registered them, and compares them with FILE.\n"
	           "Settings (job, rank, root, restore order, shared dir) come from CKPT_* variables.\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "state-file", 1, 0, 'F' }, { "regions", 1, 0, 'r' }, { "version", 1, 0, 'v' },
		{ "ready", 1, 0, 'R' }, { "go", 1, 0, 'G' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *path = NULL, *ready = NULL, *go = NULL;
	uint32_t nregions = 1;
	uint64_t version = CKPT_LATEST;
	int c;
	char *end;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'F': path = optarg; break;
		case 'R': ready = optarg; break;
		case 'G': go = optarg; break;
		case 'r':
			nregions = (uint32_t)strtoul(optarg, &end, 10);
			if (*end || !nregions || nregions > MAX_REGIONS) {
				fprintf(stderr, "ckpt-restore-bench: --regions '%s': 1 to %d\n", optarg, MAX_REGIONS);
				return 2;
			}
			break;
		case 'v':
			errno = 0;
			version = strtoull(optarg, &end, 10);
			if (errno || *end || !version) {
				fprintf(stderr, "ckpt-restore-bench: --version '%s': a version number\n", optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!path || optind != argc || !ready != !go) {
		usage(stderr);
		return 2;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) < 0) {
		fprintf(stderr, "ckpt-restore-bench: --state-file %s: %s\n", path, strerror(errno));
		return 2;
	}
	uint64_t bytes = (uint64_t)sb.st_size;
	if (bytes / nregions < 4096) {
		fprintf(stderr, "ckpt-restore-bench: %s: %" PRIu64 " bytes are too few for %u regions\n", path, bytes,
		        nregions);
		return 2;
	}

	/* The regions, touched: a trainer's tensors exist before it restores. */
	void *reg[MAX_REGIONS];
	uint64_t len[MAX_REGIONS];
	char name[MAX_REGIONS][32];
	for (uint32_t i = 0; i < nregions; i++) {
		len[i] = sf_region_len(bytes, nregions, i);
		sf_region_name(name[i], sizeof(name[i]), i);
		size_t m = (len[i] + 4095) & ~(size_t)4095;
		reg[i] = mmap(NULL, m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (reg[i] == MAP_FAILED) {
			fprintf(stderr, "ckpt-restore-bench: cannot allocate %" PRIu64 " bytes: %s\n", len[i], strerror(errno));
			return 1;
		}
		memset(reg[i], 0, m);
	}
	ckpt_config cfg;
	int err = ckpt_config_init(&cfg);
	if (err < 0) {
		fprintf(stderr, "ckpt-restore-bench: configuration: %s\n", ckpt_strerror(err));
		return 1;
	}
	if (ready) {
		int rf = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (rf < 0) {
			fprintf(stderr, "ckpt-restore-bench: --ready %s: %s\n", ready, strerror(errno));
			return 1;
		}
		close(rf);
		double until = mono_s() + GO_WAIT_S;
		while (access(go, F_OK) < 0) {
			if (mono_s() > until) {
				fprintf(stderr, "ckpt-restore-bench: no %s after %d s\n", go, GO_WAIT_S);
				return 1;
			}
			usleep(1000);
		}
	}

	uint64_t start_wall = wall_ns();
	double c0 = cpu_s(), t0 = mono_s();
	ckpt_ctx *ctx = NULL;
	uint64_t got = 0;
	if ((err = ckpt_ctx_open(&cfg, &ctx)) < 0) {
		fprintf(stderr, "ckpt-restore-bench: ckpt_ctx_open: %s\n", ckpt_strerror(err));
		return 1;
	}
	for (uint32_t i = 0; i < nregions && err == 0; i++) {
		ckpt_region_desc d;
		ckpt_region_desc_init(&d, name[i], reg[i], len[i]);
		if ((err = ckpt_region_add(ctx, &d)) < 0)
			fprintf(stderr, "ckpt-restore-bench: ckpt_region_add %s: %s\n", name[i], ckpt_strerror(err));
	}
	if (err == 0 && (err = ckpt_restore(ctx, version, 0, &got)) < 0)
		fprintf(stderr, "ckpt-restore-bench: ckpt_restore: %s\n", ckpt_strerror(err));
	double t1 = mono_s();
	uint64_t end_wall = wall_ns();
	int cerr = ckpt_ctx_close(ctx);
	double c1 = cpu_s();
	uint64_t peak = hwm_kb();
	if (err < 0)
		return 1;
	if (cerr < 0) {
		fprintf(stderr, "ckpt-restore-bench: ckpt_ctx_close: %s\n", ckpt_strerror(cerr));
		return 1;
	}

	/* Bit for bit against the file. */
	uint64_t off = 0;
	for (uint32_t i = 0; i < nregions; off += len[i], i++) {
		uint64_t where = 0;
		int r = sf_compare(fd, reg[i], len[i], off, &where);
		if (r < 0) {
			fprintf(stderr, "ckpt-restore-bench: reading %s: %s\n", path, strerror(-r));
			return 1;
		}
		if (r > 0) {
			fprintf(stderr, "ckpt-restore-bench: version %" PRIu64 ": region %s differs from %s at byte %" PRIu64
			        " of the file\n", got, name[i], path, off + where);
			return 1;
		}
	}
	close(fd);
	printf("{\"op\": \"restore_rank\", \"rank\": %u, \"version\": %" PRIu64 ", \"bytes\": %" PRIu64
	       ", \"restore_s\": %.6f, \"start_wall_ns\": %" PRIu64 ", \"end_wall_ns\": %" PRIu64
	       ", \"cpu_s\": %.3f, \"peak_rss_kb\": %" PRIu64 ", \"state_kb\": %" PRIu64 ", \"exact\": true}\n",
	       cfg.rank, got, bytes, t1 - t0, start_wall, end_wall, c1 - c0, peak, (bytes + 1023) >> 10);
	return 0;
}
