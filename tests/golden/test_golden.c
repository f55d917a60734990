/* The golden checkpoints in tests/golden/v1 were written by shard format
 * version 1. Every later version must read them unchanged: through the
 * decoder and the reader (bytes compared with golden_data.h), and through the
 * ckpt tool on a copy of the tree (reindex, ls, verify, restore). If this
 * test fails after a format change, the change broke old checkpoints: fix the
 * reader, never the golden files. */
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "format/format.h"
#include "golden_data.h"
#include "helpers.h"
#include "format/reader.h"

static char golden[1024], bin[1024], tmp[1024];
static int fails;

#define CHECK(cond, ...) do { if (!(cond)) { fails++; fflush(stdout); \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); \
	fprintf(stderr, "\n"); } } while (0)

/* The table entries of one shard, in region order. */
static size_t shard_regions(uint64_t version, uint32_t rank, const golden_region **out)
{
	size_t n = 0;
	for (size_t i = 0; i < GOLDEN_NREGIONS; i++)
		if (golden_regions[i].version == version && golden_regions[i].rank == rank)
			out[n++] = &golden_regions[i];
	return n;
}

static uint8_t *expected(const golden_region *g)
{
	uint8_t *p = malloc(g->bytes + 1);
	T_ASSERT(p);
	golden_fill(g, p);
	return p;
}

struct cmp {
	const golden_region *g[GOLDEN_NREGIONS];
	uint8_t *want[GOLDEN_NREGIONS];
	uint64_t got[GOLDEN_NREGIONS];
	size_t n;
	int bad;
};

static int cmp_sink(void *arg, uint32_t ri, uint64_t off, const void *data, size_t len)
{
	struct cmp *c = arg;
	if (ri >= c->n || off > c->g[ri]->bytes || len > c->g[ri]->bytes - off ||
	    memcmp(c->want[ri] + off, data, len)) {
		c->bad = 1;
		return 0;
	}
	c->got[ri] += len;
	return 0;
}

static void check_shard(uint64_t version, uint32_t rank)
{
	int fails0 = fails;
	struct cmp c = { .n = 0 };
	c.n = shard_regions(version, rank, c.g);
	char path[2048], why[512] = "";
	snprintf(path, sizeof(path), "%s/jobs/%s/v%020llu/r%06u.ckpt", golden, GOLDEN_JOB,
	         (unsigned long long)version, rank);
	ckpt_shard s;
	int r = ckpt__shard_open(path, &s, why, sizeof(why));
	CHECK(r == 0, "v%llu r%u: %s", (unsigned long long)version, rank, why);
	if (r < 0)
		return;
	const ckpt_fmt_header *h = &s.header;
	CHECK(h->format_version == 1 && !strcmp(h->job, GOLDEN_JOB) && h->version == version &&
	      h->rank == rank && h->world_size == c.g[0]->world_size,
	      "v%llu r%u: header says format %u job %s version %llu rank %u/%u", (unsigned long long)version,
	      rank, h->format_version, h->job, (unsigned long long)h->version, h->rank, h->world_size);
	const ckpt_fmt_footer *f = &s.footer;
	CHECK(f->chunk_bytes == GOLDEN_CHUNK, "v%llu r%u: chunk size %llu", (unsigned long long)version, rank,
	      (unsigned long long)f->chunk_bytes);
	CHECK(f->region_count == c.n, "v%llu r%u: %u regions, expected %zu", (unsigned long long)version,
	      rank, f->region_count, c.n);
	for (size_t i = 0; i < c.n && i < f->region_count; i++) {
		const ckpt_fmt_region *rg = &f->regions[i];
		uint64_t chunks = (c.g[i]->bytes + GOLDEN_CHUNK - 1) / GOLDEN_CHUNK;
		CHECK(!strcmp(rg->name, c.g[i]->name) && rg->bytes == c.g[i]->bytes &&
		      rg->chunk_count == chunks && rg->dtype == CKPT_DTYPE_BYTES,
		      "v%llu r%u: region %zu is '%s' (%llu bytes, %u chunks), expected '%s' (%zu bytes)",
		      (unsigned long long)version, rank, i, rg->name, (unsigned long long)rg->bytes,
		      rg->chunk_count, c.g[i]->name, c.g[i]->bytes);
		uint32_t z = 0;
		for (uint32_t k = 0; k < rg->chunk_count && rg->chunk_first + k < f->chunk_count; k++)
			z += !!(f->chunks[rg->chunk_first + k].flags & CKPT_CHUNK_ZSTD);
		/* The text compresses; random bytes never pay and stay raw. */
		uint32_t want_z = c.g[i]->compress && c.g[i]->kind == GOLDEN_TEXT ? rg->chunk_count : 0;
		CHECK(z == want_z, "v%llu r%u: region '%s' has %u zstd chunks, expected %u",
		      (unsigned long long)version, rank, rg->name, z, want_z);
		c.want[i] = expected(c.g[i]);
	}

	/* The in-memory parser must agree with the file one. */
	FILE *fp = fopen(path, "rb");
	T_ASSERT(fp);
	uint8_t *img = malloc(s.file_length);
	T_ASSERT(img && fread(img, 1, s.file_length, fp) == s.file_length);
	fclose(fp);
	ckpt_shard m;
	r = ckpt__shard_parse_mem(img, s.file_length, &m, why, sizeof(why));
	CHECK(r == 0 && m.tail.footer_checksum == s.tail.footer_checksum &&
	      m.footer.chunk_count == f->chunk_count, "v%llu r%u: parse_mem: %s", (unsigned long long)version,
	      rank, r ? why : "differs from ckpt__shard_open");
	if (r == 0)
		ckpt__shard_close(&m);
	free(img);

	if (f->region_count == c.n) {
		ckpt_read_opts o = { .depth = 4, .direct = 0, .why = why, .whycap = sizeof(why) };
		r = ckpt__shard_read(path, &s, &o, cmp_sink, &c);
		CHECK(r == 0, "v%llu r%u: read: %s", (unsigned long long)version, rank, why);
		CHECK(!c.bad, "v%llu r%u: chunk data differs from golden_data.h", (unsigned long long)version, rank);
		for (size_t i = 0; i < c.n; i++)
			CHECK(c.got[i] == c.g[i]->bytes, "v%llu r%u: region '%s': read %llu of %zu bytes",
			      (unsigned long long)version, rank, c.g[i]->name, (unsigned long long)c.got[i],
			      c.g[i]->bytes);
	}
	for (size_t i = 0; i < c.n; i++)
		free(c.want[i]);
	ckpt__shard_close(&s);
	if (fails == fails0)
		printf("ok   golden v%llu r%u read through the library\n", (unsigned long long)version, rank);
}

/* Runs a shell command; returns its exit status, or -1. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void check_file(const char *path, const golden_region *g)
{
	size_t len = 0;
	char *got = t_slurp(path, &len);
	uint8_t *want = expected(g);
	CHECK(got && len == g->bytes && !memcmp(got, want, len), "%s: %s", path,
	      got ? "contents differ from golden_data.h" : "missing");
	free(got);
	free(want);
}

static void check_cli(void)
{
	int fails0 = fails;
	char root[1200], out[1300];
	snprintf(root, sizeof(root), "%s/root", tmp);
	T_ASSERT(mkdir(root, 0700) == 0);
	T_ASSERT(sh("cp -R '%s/jobs' '%s/' && chmod -R u+w '%s'", golden, root, root) == 0);

	int rc = sh("'%s/ckpt' reindex --root '%s' > '%s/reindex.out' 2>&1", bin, root, tmp);
	CHECK(rc == 0, "ckpt reindex exited %d", rc);
	rc = sh("'%s/ckpt' ls --root '%s' --job %s --json > '%s/ls.json' 2> '%s/ls.err'", bin, root,
	        GOLDEN_JOB, tmp, tmp);
	CHECK(rc == 0, "ckpt ls exited %d", rc);
	size_t len;
	snprintf(out, sizeof(out), "%s/ls.json", tmp);
	char *ls = t_slurp(out, &len);
	T_ASSERT(ls);
	int n = 0;
	for (const char *p = ls; (p = strstr(p, "\"version\": ")); p++)
		n++;
	CHECK(n == 3, "ckpt ls lists %d versions, expected 3:\n%s", n, ls);
	for (uint64_t v = 1; v <= 3; v++) {
		char want[128];
		snprintf(want, sizeof(want), "\"version\": %llu, \"state\": \"COMMITTED\", \"world_size\": %u",
		         (unsigned long long)v, v == 3 ? 2u : 1u);
		CHECK(strstr(ls, want), "ckpt ls --json lacks '%s':\n%s", want, ls);
	}
	free(ls);

	rc = sh("'%s/ckpt' verify --root '%s' --job %s > '%s/verify.out' 2>&1", bin, root, GOLDEN_JOB, tmp);
	CHECK(rc == 0, "ckpt verify exited %d", rc);

	for (uint64_t v = 1; v <= 3; v++) {
		snprintf(out, sizeof(out), "%s/out-%llu", tmp, (unsigned long long)v);
		rc = sh("'%s/ckpt' restore --root '%s' --job %s --version %llu --out '%s' > '%s/restore.out' 2>&1",
		        bin, root, GOLDEN_JOB, (unsigned long long)v, out, tmp);
		CHECK(rc == 0, "ckpt restore --version %llu exited %d", (unsigned long long)v, rc);
		for (size_t i = 0; i < GOLDEN_NREGIONS; i++) {
			const golden_region *g = &golden_regions[i];
			if (g->version != v)
				continue;
			char path[1600];
			if (g->world_size > 1)
				snprintf(path, sizeof(path), "%s/rank-%u/%s", out, g->rank, g->name);
			else
				snprintf(path, sizeof(path), "%s/%s", out, g->name);
			check_file(path, g);
		}
	}
	if (fails == fails0)
		printf("ok   golden tree through ckpt reindex, ls, verify, restore\n");
}

/* SHA256SUMS records the golden shard files and the generator's output:
 * neither may change. */
static void check_sums(void)
{
	if (sh("command -v sha256sum > /dev/null 2>&1") != 0) {
		printf("skip sha256sum not found\n");
		return;
	}
	char dir[1200];
	snprintf(dir, sizeof(dir), "%s/sums", tmp);
	T_ASSERT(mkdir(dir, 0700) == 0);
	T_ASSERT(sh("ln -s '%s/jobs' '%s/jobs'", golden, dir) == 0);
	for (size_t i = 0; i < GOLDEN_NREGIONS; i++) {
		const golden_region *g = &golden_regions[i];
		char path[1600];
		snprintf(path, sizeof(path), "%s/inputs/v%llu/r%u", dir, (unsigned long long)g->version, g->rank);
		T_ASSERT(ckpt__mkdir_p(path, 0700) == 0);
		snprintf(path + strlen(path), sizeof(path) - strlen(path), "/%s", g->name);
		uint8_t *p = expected(g);
		FILE *f = fopen(path, "wb");
		T_ASSERT(f && fwrite(p, 1, g->bytes, f) == g->bytes && fclose(f) == 0);
		free(p);
	}
	int rc = sh("cd '%s' && sha256sum -c --quiet '%s/SHA256SUMS'", dir, golden);
	CHECK(rc == 0, "SHA256SUMS does not match: golden files or golden_data.h changed");
	if (rc == 0)
		printf("ok   SHA256SUMS (shard files and generated contents)\n");
}

int main(void)
{
	const char *data = getenv("CKPT_TEST_DATA"), *b = getenv("CKPT_BIN");
	if (!data || !*data) {
		fprintf(stderr, "CKPT_TEST_DATA (the tests/ directory) is not set\n");
		return T_EXIT_FAIL;
	}
	snprintf(golden, sizeof(golden), "%s/golden/v1", data);
	snprintf(tmp, sizeof(tmp), "%s", t_tmpdir("golden"));
	check_shard(1, 0);
	check_shard(2, 0);
	check_shard(3, 0);
	check_shard(3, 1);
	check_sums();
	if (b && *b) {
		snprintf(bin, sizeof(bin), "%s", b);
		check_cli();
	} else {
		printf("skip CKPT_BIN not set: the ckpt tool part is not run\n");
	}
	if (fails)
		fprintf(stderr, "%d golden checks failed (kept %s)\n", fails, tmp);
	else
		t_rmrf(tmp);
	return fails ? T_EXIT_FAIL : T_EXIT_PASS;
}
