/* ckpt-fabric-bench: the raw fabric, the figure ckpt's peer replication is
 * compared against.
 *
 * Two processes: a passive target (as ckptd's agent would be) that registers
 * --size bytes, and an initiator (as a rank would be) that WRITEs --size
 * bytes there and READs them back, --iters times each, through
 * storage/fabric.h. The target's ckpt_fab_remote travels over a socketpair.
 * Prints the median GB/s (10^9 bytes/s) of each direction; --json prints
 * one object instead. Exits 77 when the provider is not available.
 *
 *   ckpt-fabric-bench [--size 1G] [--piece 4M] [--depth 8] [--iters 5]
 *                     [--provider P] [--target 127.0.0.1] [--initiator 127.0.0.2]
 *                     [--json] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fabric.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ITERS 1000
#define TIMEOUT_MS 60000

typedef struct bench_opts {
	size_t size, piece;
	unsigned depth, iters;
	const char *provider, *target, *initiator;
	int json;
} bench_opts;

/* The target's answer: its region, or why it has none. */
typedef struct target_msg {
	int rc;
	ckpt_fab_remote r;
	char prov[64];
	char err[256];
} target_msg;

static int parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (errno || end == s || *end || v == 0 || v > (SIZE_MAX >> shift))
		return -EINVAL;
	*out = (size_t)v << shift;
	return 0;
}

static int parse_opts(int argc, char **argv, bench_opts *o)
{
	static const struct option lo[] = {
		{ "size", 1, 0, 's' }, { "piece", 1, 0, 'p' }, { "depth", 1, 0, 'd' },
		{ "iters", 1, 0, 'i' }, { "provider", 1, 0, 'P' }, { "target", 1, 0, 't' },
		{ "initiator", 1, 0, 'I' }, { "json", 0, 0, 'j' }, { 0, 0, 0, 0 },
	};
	*o = (bench_opts){ .size = (size_t)1 << 30, .piece = (size_t)4 << 20, .depth = 8,
	                   .iters = 5, .target = "127.0.0.1", .initiator = "127.0.0.2" };
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': if (parse_size(optarg, &o->size)) return -1; break;
		case 'p': if (parse_size(optarg, &o->piece)) return -1; break;
		case 'd': o->depth = (unsigned)atoi(optarg); break;
		case 'i': o->iters = (unsigned)atoi(optarg); break;
		case 'P': o->provider = optarg; break;
		case 't': o->target = optarg; break;
		case 'I': o->initiator = optarg; break;
		case 'j': o->json = 1; break;
		default: return -1;
		}
	}
	if (optind != argc || o->iters == 0 || o->iters > MAX_ITERS || o->depth == 0)
		return -1;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The target: registers its region, answers, waits for the end. */
static int target_main(const bench_opts *o, int sock)
{
	target_msg m = { 0 };
	ckpt_fab *f = NULL;
	ckpt_fab_mr *mr = NULL;
	void *region = aligned_alloc(4096, o->size);
	if (!region)
		m.rc = -ENOMEM;
	else
		memset(region, 0, o->size); /* backed before registration */
	if (!m.rc)
		m.rc = ckpt_fab_open(o->provider, o->target, 1, &f, m.err, sizeof(m.err));
	if (!m.rc)
		m.rc = ckpt_fab_mr_reg(f, region, o->size, CKPT_FAB_REMOTE_WRITE |
		                       CKPT_FAB_REMOTE_READ, &mr, m.err, sizeof(m.err));
	if (!m.rc)
		m.rc = ckpt_fab_mr_remote(f, mr, &m.r);
	if (f)
		snprintf(m.prov, sizeof(m.prov), "%s", ckpt_fab_provider_name(f));
	int ok = write(sock, &m, sizeof(m)) == sizeof(m);
	char done;
	if (ok && !m.rc)
		ok = read(sock, &done, 1) == 1; /* the initiator has finished */
	ckpt_fab_mr_close(mr);
	ckpt_fab_close(f);
	free(region);
	return ok && !m.rc ? 0 : 1;
}

/* Times iters transfers of op; fills gbps[]. */
static int run_op(const bench_opts *o, ckpt_fab *f, ckpt_fab_mr *mr, void *buf,
                  const ckpt_fab_remote *r, int op, double *gbps)
{
	char err[512] = "";
	for (unsigned i = 0; i < o->iters; i++) {
		double t0 = now_s();
		int rc = ckpt_fab_xfer(f, op, mr, buf, o->size, r, 0, o->piece, o->depth, TIMEOUT_MS,
		                       err, sizeof(err));
		if (rc) {
			fprintf(stderr, "ckpt-fabric-bench: %s: %s\n",
			        op == CKPT_FAB_WRITE ? "write" : "read", err);
			return rc;
		}
		gbps[i] = (double)o->size / (now_s() - t0) / 1e9;
	}
	return 0;
}

static void report(const bench_opts *o, const char *prov, double *w, double *r)
{
	double wm = median(w, o->iters), rm = median(r, o->iters);
	if (!o->json) {
		printf("provider %s, size %zu, piece %zu, depth %u, %u iterations\n", prov, o->size,
		       o->piece, o->depth, o->iters);
		printf("write %.3f GB/s (median), read %.3f GB/s (median)\n", wm, rm);
		return;
	}
	printf("{\"provider\":\"%s\",\"size\":%zu,\"piece\":%zu,\"depth\":%u,\"iters\":%u,"
	       "\"write_gbps\":%.4f,\"read_gbps\":%.4f,\"write_gbps_all\":[", prov, o->size,
	       o->piece, o->depth, o->iters, wm, rm);
	for (unsigned i = 0; i < o->iters; i++)
		printf("%s%.4f", i ? "," : "", w[i]);
	printf("],\"read_gbps_all\":[");
	for (unsigned i = 0; i < o->iters; i++)
		printf("%s%.4f", i ? "," : "", r[i]);
	printf("]}\n");
}

/* The initiator: writes and reads the target's region. */
static int initiator_main(const bench_opts *o, const target_msg *t)
{
	char err[512] = "";
	ckpt_fab *f = NULL;
	ckpt_fab_mr *mr = NULL;
	double w[MAX_ITERS], r[MAX_ITERS];
	uint8_t *buf = aligned_alloc(4096, o->size);
	if (!buf)
		return 1;
	for (size_t i = 0; i < o->size; i += 4096)
		buf[i] = (uint8_t)(i >> 12);
	int rc = ckpt_fab_open(t->prov, o->initiator, 0, &f, err, sizeof(err));
	if (!rc)
		rc = ckpt_fab_mr_reg(f, buf, o->size, CKPT_FAB_LOCAL, &mr, err, sizeof(err));
	if (rc)
		fprintf(stderr, "ckpt-fabric-bench: initiator: %s\n", err);
	if (!rc && !(rc = run_op(o, f, mr, buf, &t->r, CKPT_FAB_WRITE, w)) &&
	    !(rc = run_op(o, f, mr, buf, &t->r, CKPT_FAB_READ, r)))
		report(o, t->prov, w, r);
	ckpt_fab_mr_close(mr);
	ckpt_fab_close(f);
	free(buf);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	bench_opts o;
	if (parse_opts(argc, argv, &o)) {
		fprintf(stderr, "usage: ckpt-fabric-bench [--size 1G] [--piece 4M] [--depth 8] "
		        "[--iters 5] [--provider P] [--target ADDR] [--initiator ADDR] [--json]\n");
		return 2;
	}
	if (!strncmp(o.target, "127.", 4))
		setenv("FI_TCP_IFACE", "lo", 0); /* loopback: tcp must not pick another NIC */
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	/* Fork before either side touches libfabric. */
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		close(sv[0]);
		_exit(target_main(&o, sv[1]));
	}
	close(sv[1]);
	target_msg t = { 0 };
	int rc = 1;
	if (read(sv[0], &t, sizeof(t)) != sizeof(t))
		fprintf(stderr, "ckpt-fabric-bench: the target did not answer\n");
	else if (t.rc)
		fprintf(stderr, "ckpt-fabric-bench: %s: %s\n",
		        t.rc == -ENODATA ? "skipped" : "target", t.err);
	else
		rc = initiator_main(&o, &t);
	if (t.rc == -ENODATA)
		rc = 77;
	if (write(sv[0], "x", 1) != 1)
		kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		rc = 1;
	return rc;
}
