/* ckpt-delta-bench: what an incremental checkpoint would store, measured on
 * two committed versions of a real job (the reference trainer's weights and
 * Adam moments). Every chunk of the newer version is stored three ways, as
 * the writer would: raw; byte-shuffle + zstd of the chunk (compress = 1);
 * byte-shuffle + zstd of its XOR against the same chunk of the base
 * version. A chunk keeps the raw form where compression does not save an
 * eighth (the library's rule). Reports bytes per region and in all,
 * and the CPU time of each transform on this machine.
 *
 * This measures the data, not a save path: the shard format has no delta
 * chunks (yet); see docs/benchmarks-history.md.
 *
 * Every rank's pieces are read back through the public view API (ckpt.h),
 * whole tensors, and cut into chunks of --chunk-bytes (default 8 MiB).
 * --bitshuffle transposes bits instead of bytes (bit plane k of every element
 * together), which keeps runs of equal leading bits that a byte shuffle
 * splits; it measures whether a bit-level filter would store less.
 *
 * usage: ckpt-delta-bench --root DIR --job J --base V --version W
 *                         [--chunk-bytes B] [--level L] [--bitshuffle] [--json] */
#include <ckpt.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The shard format's byte shuffle (docs/format.md 6.3). */
static void shuffle(uint8_t *d, const uint8_t *s, size_t len, unsigned e)
{
	size_t n = len / e;
	for (unsigned k = 0; k < e; k++)
		for (size_t i = 0; i < n; i++)
			d[k * n + i] = s[i * e + k];
	memcpy(d + n * e, s + n * e, len - n * e);
}

/* Bit planes: bit b of element i goes to bit i of plane b (LSB first).
 * The tail that does not fill a whole group of eight elements is copied. */
static void bitshuffle(uint8_t *d, const uint8_t *s, size_t len, unsigned e)
{
	size_t n = len / e / 8 * 8, plane = n / 8;
	memset(d, 0, n * e);
	for (size_t i = 0; i < n; i++)
		for (unsigned b = 0; b < 8 * e; b++)
			if (s[i * e + b / 8] >> (b % 8) & 1)
				d[b * plane + i / 8] |= (uint8_t)(1u << (i % 8));
	memcpy(d + n * e, s + n * e, len - n * e);
}

static int bit_level;

/* What the writer stores for one chunk: shuffle + zstd where that saves at
 * least an eighth (the library's rule), else the raw bytes. */
static size_t stored(ZSTD_CCtx *cc, int level, uint8_t *z, size_t cap, const uint8_t *src, size_t n, unsigned e,
                     uint8_t *scratch)
{
	const uint8_t *in = src;
	if (e > 1) {
		(bit_level ? bitshuffle : shuffle)(scratch, src, n, e);
		in = scratch;
	}
	size_t r = ZSTD_compressCCtx(cc, z, cap, in, n, level);
	return ZSTD_isError(r) || r > n - n / 8 ? n : r;
}

/* Tensor i of a view, read whole. */
static uint8_t *read_all(ckpt_view *v, size_t i, uint64_t bytes)
{
	uint8_t *p = malloc(bytes + 1);
	if (p && ckpt_view_read(v, i, 0, bytes, p) < 0) {
		free(p);
		return NULL;
	}
	return p;
}

typedef struct tally {
	uint64_t raw, comp, delta;
	double comp_s, delta_s;
} tally;

int main(int argc, char **argv)
{
	const char *root = NULL, *job = NULL;
	uint64_t base = 0, ver = 0;
	uint64_t chunk = 8u << 20;
	int level = 1, json = 0, have_base = 0, have_ver = 0;
	static const struct option lo[] = {
		{ "root", required_argument, NULL, 'r' }, { "job", required_argument, NULL, 'j' },
		{ "base", required_argument, NULL, 'b' }, { "version", required_argument, NULL, 'v' },
		{ "chunk-bytes", required_argument, NULL, 'c' }, { "level", required_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'J' },       { "bitshuffle", no_argument, NULL, 'B' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'r': root = optarg; break;
		case 'j': job = optarg; break;
		case 'b': base = strtoull(optarg, NULL, 10); have_base = 1; break;
		case 'v': ver = strtoull(optarg, NULL, 10); have_ver = 1; break;
		case 'c': chunk = strtoull(optarg, NULL, 10); break;
		case 'l': level = atoi(optarg); break;
		case 'J': json = 1; break;
		case 'B': bit_level = 1; break;
		default: return 2;
		}
	}
	if (!root || !job || !have_base || !have_ver) {
		fprintf(stderr, "usage: ckpt-delta-bench --root DIR --job J --base V --version W [--chunk-bytes B] [--level L] "
		                "[--bitshuffle] [--json]\n");
		return 2;
	}
	char why[512] = "";
	ckpt_view *va = NULL, *vb = NULL;
	if (ckpt_view_open(root, job, base, &va, why, sizeof(why)) < 0 ||
	    ckpt_view_open(root, job, ver, &vb, why, sizeof(why)) < 0) {
		fprintf(stderr, "ckpt-delta-bench: %s\n", why);
		return 1;
	}
	size_t cb = (size_t)chunk, cap = ZSTD_compressBound(cb);
	uint8_t *x = malloc(cb), *z = malloc(cap), *scratch = malloc(cb);
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	if (!x || !z || !scratch || !cc)
		return 1;
	tally all = { 0 };
	if (!json)
		printf("%-16s %12s %12s %12s\n", "tensor", "raw", "shuffle+zstd", "xor+shuf+zstd");
	for (size_t ti = 0; ti < ckpt_view_count(vb); ti++) {
		ckpt_tensor_info tb = { .size = sizeof(tb) }, ta = { .size = sizeof(ta) };
		size_t ia;
		if (ckpt_view_tensor(vb, ti, &tb) < 0 || ckpt_view_find(va, tb.name, &ia) < 0 ||
		    ckpt_view_tensor(va, ia, &ta) < 0 || ta.bytes != tb.bytes) {
			fprintf(stderr, "ckpt-delta-bench: tensor '%s' differs between the versions\n", tb.name);
			return 1;
		}
		uint8_t *pa = read_all(va, ia, ta.bytes), *pb = read_all(vb, ti, tb.bytes);
		if (!pa || !pb) {
			fprintf(stderr, "ckpt-delta-bench: cannot read tensor '%s': %s\n", tb.name, ckpt_view_error(vb));
			return 1;
		}
		size_t es = ckpt_dtype_size(tb.dtype);
		unsigned e = tb.dtype == CKPT_DTYPE_BYTES || es <= 1 ? 1u : (unsigned)es;
		tally t = { 0 };
		for (uint64_t off = 0; off < tb.bytes; off += cb) {
			size_t n = (size_t)(tb.bytes - off < cb ? tb.bytes - off : cb);
			double t0 = now_s();
			size_t zc = stored(cc, level, z, cap, pb + off, n, e, scratch);
			double t1 = now_s();
			for (size_t k = 0; k < n; k++)
				x[k] = pb[off + k] ^ pa[off + k];
			size_t zd = stored(cc, level, z, cap, x, n, e, scratch);
			double t2 = now_s();
			t.raw += n;
			t.comp += zc;
			t.delta += zd;
			t.comp_s += t1 - t0;
			t.delta_s += t2 - t1;
		}
		free(pa);
		free(pb);
		if (!json)
			printf("%-16s %12" PRIu64 " %12" PRIu64 " %12" PRIu64 "\n", tb.name, t.raw, t.comp, t.delta);
		all.raw += t.raw;
		all.comp += t.comp;
		all.delta += t.delta;
		all.comp_s += t.comp_s;
		all.delta_s += t.delta_s;
	}
	double gib = (double)all.raw / (1u << 30);
	if (json)
		printf("{\"job\": \"%s\", \"base\": %" PRIu64 ", \"version\": %" PRIu64 ", \"raw\": %" PRIu64
		       ", \"compressed\": %" PRIu64 ", \"delta\": %" PRIu64 ", \"compressed_ratio\": %.4f, \"delta_ratio\": %.4f"
		       ", \"compress_gib_s\": %.3f, \"delta_gib_s\": %.3f, \"level\": %d, \"filter\": \"%s\"}\n",
		       job, base, ver, all.raw, all.comp, all.delta, (double)all.comp / all.raw, (double)all.delta / all.raw,
		       gib / all.comp_s, gib / all.delta_s, level, bit_level ? "bit" : "byte");
	else
		printf("%-16s %12" PRIu64 " %12" PRIu64 " %12" PRIu64 "\nstored/raw: shuffle+zstd %.3f, xor+shuffle+zstd "
		       "%.3f; one core: %.2f GiB/s, %.2f GiB/s\n",
		       "total", all.raw, all.comp, all.delta, (double)all.comp / all.raw, (double)all.delta / all.raw,
		       gib / all.comp_s, gib / all.delta_s);
	ZSTD_freeCCtx(cc);
	ckpt_view_close(va);
	ckpt_view_close(vb);
	return 0;
}
