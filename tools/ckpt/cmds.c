/* Common option handling and the index-only commands: ls, show, rm, gc,
 * reindex. */
#include "cli.h"
#include "format/admin.h"
#include "format/format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

int cli_common_opt(cli *c, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	const char *val = NULL;
	const char *names[] = { "--root", "--job", "--version", "--rank" };
	size_t k;
	if (!strcmp(a, "--json")) {
		c->json = 1;
		return 1;
	}
	for (k = 0; k < 4; k++) {
		size_t n = strlen(names[k]);
		if (!strncmp(a, names[k], n) && (a[n] == 0 || a[n] == '=')) {
			if (a[n] == '=')
				val = a + n + 1;
			else if (*i + 1 < argc)
				val = argv[++*i];
			else
				return -1;
			break;
		}
	}
	if (k == 4)
		return 0;
	char *end;
	switch (k) {
	case 0:
		c->root = val;
		c->root_flag = 1;
		return 1;
	case 1:
		c->job = val;
		return 1;
	case 2:
		if (!strcmp(val, "latest"))
			c->version = VERSION_LATEST;
		else if (!strcmp(val, "all"))
			c->version = VERSION_ALL;
		else {
			errno = 0;
			c->version = strtoull(val, &end, 10);
			if (errno || end == val || *end || *val == '-' || c->version >= VERSION_UNSET)
				return -1;
		}
		return 1;
	case 3:
		errno = 0;
		c->rank = (int64_t)strtoul(val, &end, 10);
		if (errno || end == val || *end || *val == '-' || c->rank > UINT32_MAX)
			return -1;
		return 1;
	}
	return 0;
}

int cli_need(cli *c, int root, int job)
{
	if (root && (!c->root || !*c->root))
		return -1;
	if (job && ckpt__job_valid(c->job) < 0)
		return -2;
	return 0;
}

int cli_open_index(cli *c)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/index", c->root);
	if (access(p, F_OK) < 0) {
		fprintf(stderr, "ckpt: %s is not a checkpoint root (no index)\n", c->root);
		return EXIT_NOTFOUND;
	}
	int err = ckpt__index_open(c->root, &c->lg, &c->ix);
	if (err < 0) {
		fprintf(stderr, "ckpt: cannot open the index in %s: %s\n", c->root, ckpt_strerror(err));
		return EXIT_ERROR;
	}
	return EXIT_OK;
}

/* A JSON string, valid UTF-8 whatever s holds (names come out of files):
 * controls (C0, DEL, C1) escaped, a byte that is not part of well-formed
 * UTF-8 replaced by U+FFFD. */
void cli_json_str(FILE *out, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s);
	fputc('"', out);
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t k = ckpt__utf8_next(u + i, n - i, &cp);
		if (!k) {
			fputs("\\ufffd", out);
			i++;
			continue;
		}
		if (cp == '"' || cp == '\\')
			fprintf(out, "\\%c", (char)cp);
		else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
			fprintf(out, "\\u%04x", (unsigned)cp);
		else
			fwrite(u + i, 1, k, out);
		i += k;
	}
	fputc('"', out);
}

/* Text for a terminal: what a file or a peer named, with every byte a
 * terminal could act on (controls, DEL, C1, bytes that are not well-formed
 * UTF-8) written as \xNN, and a backslash as \\, so that a name can
 * neither move the cursor nor forge a line. */
void cli_text_str(FILE *out, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s);
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t k = ckpt__utf8_next(u + i, n - i, &cp);
		if (k && cp == '\\') {
			fputs("\\\\", out);
		} else if (k && cp >= 0x20 && !(cp >= 0x7f && cp <= 0x9f)) {
			fwrite(u + i, 1, k, out);
		} else {
			k = k ? k : 1;
			for (size_t j = 0; j < k; j++)
				fprintf(out, "\\x%02x", u[i + j]);
		}
		i += k;
	}
}

/* cli_text_str into buf (cap bytes, always terminated). */
const char *cli_text(const char *s, char *buf, size_t cap)
{
	FILE *f = fmemopen(buf, cap, "w");
	if (!f) {
		snprintf(buf, cap, "?");
		return buf;
	}
	setvbuf(f, NULL, _IONBF, 0);
	cli_text_str(f, s);
	fclose(f);
	buf[cap - 1] = '\0';
	return buf;
}

const char *cli_human(uint64_t b, char *buf, size_t cap)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int i = 0;
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", v, u[i]);
	return buf;
}

static void fmt_time(uint64_t ns, char *buf, size_t cap)
{
	if (!ns) {
		snprintf(buf, cap, "-");
		return;
	}
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int cli_parse_opts(cli *c, const char *cmd, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		int r = cli_daemon_opt(c, argc, argv, &i);
		if (r == 0)
			r = cli_common_opt(c, argc, argv, &i);
		if (r < 0)
			return cli_usage(cmd, "bad value for %s", argv[i]);
		if (r == 0)
			return cli_usage(cmd, "unknown option '%s'", argv[i]);
	}
	return EXIT_OK;
}

/* ------------------------------------------------------------- ls */

struct ls_arg {
	cli *c;
	const char *job;
	int first;
	size_t n;
};

static int ls_one(void *arg, uint64_t version, const ckpt_idx_version *v)
{
	struct ls_arg *a = arg;
	char t1[32], t2[32], hb[32];
	fmt_time(v->created_ns, t1, sizeof(t1));
	fmt_time(v->committed_ns, t2, sizeof(t2));
	if (a->c->json) {
		printf("%s\n  {\"job\": ", a->first ? "" : ",");
		cli_json_str(stdout, a->job);
		printf(", \"version\": %llu, \"state\": \"%s\", \"world_size\": %u, \"shards_done\": %u, "
		       "\"bytes\": %llu, \"stored_bytes\": %llu, \"created\": \"%s\", \"committed\": \"%s\"}",
		       (unsigned long long)version, ckpt_state_name(v->state), v->world_size, v->shards_done,
		       (unsigned long long)v->bytes, (unsigned long long)v->stored_bytes, t1, t2);
	} else {
		printf("%-20s %20llu  %-9s %5u/%-5u %12s  %s\n", a->job, (unsigned long long)version,
		       ckpt_state_name(v->state), v->shards_done, v->world_size,
		       cli_human(v->bytes, hb, sizeof(hb)), t2);
	}
	a->first = 0;
	a->n++;
	return 0;
}

static int ls_job(void *arg, const char *job)
{
	struct ls_arg *a = arg;
	a->job = job;
	return ckpt__index_each_version(a->c->ix, job, ls_one, a);
}

static int cmd_ls(cli *c, int argc, char **argv)
{
	int rc;
	int prc = cli_parse_opts(c, "ls", argc, argv);
	if (prc)
		return prc;
	/* --daemon asks the daemon; CKPT_DAEMON does too unless --root is given. */
	if (c->daemon_flag && c->root_flag)
		return cli_usage("ls", "--root and --daemon exclude each other");
	if (c->daemon && *c->daemon && (c->daemon_flag || !c->root_flag))
		return cli_daemon_ls(c);
	if (cli_s3_root(c))
		return cli_s3_ls(c);
	if (cli_need(c, 1, 0) < 0)
		return cli_usage("ls", "--root is required");
	if (c->job && ckpt__job_valid(c->job) < 0)
		return cli_usage("ls", "invalid job id '%s'", c->job);
	if ((rc = cli_open_index(c)))
		return rc;
	struct ls_arg a = { c, c->job, 1, 0 };
	if (c->json)
		printf("[");
	else
		printf("%-20s %20s  %-9s %11s %12s  %s\n", "JOB", "VERSION", "STATE", "SHARDS", "BYTES",
		       "COMMITTED");
	int err = c->job ? ls_job(&a, c->job) : ckpt__index_each_job(c->ix, ls_job, &a);
	if (c->json)
		printf("%s]\n", a.n ? "\n" : "");
	if (err < 0) {
		fprintf(stderr, "ckpt ls: %s\n", ckpt_strerror(err));
		return EXIT_ERROR;
	}
	return EXIT_OK;
}

static void help_ls(FILE *o)
{
	fprintf(o, "usage: ckpt ls --root DIR [--job J] [--json]\n"
	           "       ckpt ls --daemon ADDR [--token-file FILE] --job J [--json]\n\n"
	           "Lists versions (all jobs when --job is not given), oldest first, with their state:\n"
	           "PENDING (not every rank durable; never restored), COMMITTED, DELETING.\n"
	           "--json prints an array of objects: job, version, state, world_size, shards_done,\n"
	           "bytes, stored_bytes, created, committed.\n\n"
	           "With --daemon ADDR (unix:/path or host:port; or CKPT_DAEMON when --root is not\n"
	           "given) the job's versions come from the coordinator, through an agent or\n"
	           "directly, with the tiers each is committed at. The token comes from\n"
	           "--token-file, CKPT_TOKEN_FILE or CKPT_TOKEN. A version committed at any tier is\n"
	           "COMMITTED, else PENDING (or DELETING). --json prints an array of objects: job,\n"
	           "version, state, tiers (names), world_size, shards_done, bytes.\n");
}

/* ------------------------------------------------------------- version pick */

struct pick {
	uint64_t newest_committed;
	int have;
};

static int pick_one(void *arg, uint64_t version, const ckpt_idx_version *v)
{
	struct pick *p = arg;
	if (v->state == CKPT_STATE_COMMITTED) {
		p->newest_committed = version;
		p->have = 1;
	}
	return 0;
}

/* Resolves 'latest' to the newest committed version. */
int cli_resolve_latest(cli *c, uint64_t *v)
{
	struct pick p = { 0, 0 };
	int err = ckpt__index_each_version(c->ix, c->job, pick_one, &p);
	if (err < 0)
		return err;
	if (!p.have)
		return -CKPT_ENOVERSION;
	*v = p.newest_committed;
	return 0;
}

/* ------------------------------------------------------------- show */

/* One rank's shard in show's report; returns 1 when it is damaged (or
 * missing from a COMMITTED version). */
static int show_shard(const cli *c, uint64_t v, uint32_t state, uint32_t r, int *first)
{
	int bad = 0;
	char path[4096], why[512] = "", hb[32];
	ckpt__shard_path(path, sizeof(path), c->root, c->job, v, r);
	ckpt_shard s;
	int err = ckpt__shard_open(path, &s, why, sizeof(why));
	if (err < 0) {
		if (err != -ENOENT || state == CKPT_STATE_COMMITTED)
			bad = 1;
		if (c->json) {
			printf("%s{\"rank\": %u, \"error\": ", *first ? "" : ", ", r);
			cli_json_str(stdout, why);
			printf("}");
		} else {
			printf("  rank %u: %s\n", r, cli_text(why, (char[2100]){ 0 }, 2100));
		}
		*first = 0;
		return bad;
	}
	if (c->json) {
		printf("%s{\"rank\": %u, \"bytes\": %llu, \"stored_bytes\": %llu, \"chunk_bytes\": %llu, "
		       "\"regions\": [", *first ? "" : ", ", r, (unsigned long long)s.footer.data_bytes,
		       (unsigned long long)s.footer.stored_bytes, (unsigned long long)s.footer.chunk_bytes);
	} else {
		printf("  rank %u: %s in %u regions, %llu chunks of %s, %llu bytes stored\n", r,
		       cli_human(s.footer.data_bytes, hb, sizeof(hb)), s.footer.region_count,
		       (unsigned long long)s.footer.chunk_count,
		       cli_human(s.footer.chunk_bytes, (char[32]){ 0 }, 32),
		       (unsigned long long)s.footer.stored_bytes);
	}
	for (uint32_t i = 0; i < s.footer.region_count; i++) {
		const ckpt_fmt_region *rg = &s.footer.regions[i];
		uint32_t z = 0;
		for (uint32_t k = 0; k < rg->chunk_count; k++)
			z += !!(s.footer.chunks[rg->chunk_first + k].flags & CKPT_CHUNK_ZSTD);
		if (c->json) {
			printf("%s{\"name\": ", i ? ", " : "");
			cli_json_str(stdout, rg->name);
			printf(", \"dtype\": \"%s\", \"bytes\": %llu, \"chunks\": %u, \"compressed_chunks\": %u, "
			       "\"global_shape\": [", ckpt_dtype_name(rg->dtype), (unsigned long long)rg->bytes,
			       rg->chunk_count, z);
			for (unsigned d = 0; d < rg->ndim; d++)
				printf("%s%llu", d ? ", " : "", (unsigned long long)rg->global_shape[d]);
			printf("], \"offsets\": [");
			for (unsigned d = 0; d < rg->ndim; d++)
				printf("%s%llu", d ? ", " : "", (unsigned long long)rg->offsets[d]);
			printf("]}");
		} else {
			char nb[4 * CKPT_MAX_NAME + 1];
			printf("    %-32s %-6s %12s  %u chunks (%u compressed)", cli_text(rg->name, nb, sizeof(nb)),
			       ckpt_dtype_name(rg->dtype),
			       cli_human(rg->bytes, hb, sizeof(hb)), rg->chunk_count, z);
			if (rg->ndim) {
				printf("  shape [");
				for (unsigned d = 0; d < rg->ndim; d++)
					printf("%s%llu", d ? "," : "", (unsigned long long)rg->global_shape[d]);
				printf("] at [");
				for (unsigned d = 0; d < rg->ndim; d++)
					printf("%s%llu", d ? "," : "", (unsigned long long)rg->offsets[d]);
				printf("]");
			}
			printf("\n");
		}
	}
	if (c->json)
		printf("]}");
	*first = 0;
	ckpt__shard_close(&s);
	return bad;
}

struct show_miss {
	const cli *c;
	int *first;
};

static void show_missing_one(void *arg, uint32_t r)
{
	struct show_miss *m = arg;
	if (m->c->json)
		printf("%s{\"rank\": %u, \"error\": \"no shard file\"}", *m->first ? "" : ", ", r);
	else
		printf("  rank %u: no shard file\n", r);
	*m->first = 0;
}

/* The ranks with a file (or --rank's), then the missing ones, named up to
 * a few and then counted: the world size may claim 2^32-1 ranks. */
static int show_ranks(cli *c, uint64_t v, const ckpt_idx_version *iv)
{
	uint32_t *have = NULL;
	size_t n = 0;
	int bad = 0, first = 1;
	if (c->rank >= 0)
		return (uint64_t)c->rank < iv->world_size ? show_shard(c, v, iv->state, (uint32_t)c->rank, &first) : 0;
	int err = cli_version_ranks(c, v, iv->world_size, &have, &n);
	if (err < 0) {
		fprintf(stderr, "ckpt show: cannot list version %llu's directory: %s\n", (unsigned long long)v,
		        ckpt_strerror(err));
		return 1;
	}
	for (size_t k = 0; k < n; k++)
		bad |= show_shard(c, v, iv->state, have[k], &first);
	struct show_miss m = { c, &first };
	uint64_t missing = cli_missing_ranks(iv->world_size, have, n, CLI_MISSING_NAMED, show_missing_one, &m);
	if (missing > CLI_MISSING_NAMED) {
		if (c->json)
			printf("%s{\"rank\": %u, \"error\": \"and %llu more ranks have no shard file\"}", first ? "" : ", ",
			       iv->world_size - 1, (unsigned long long)(missing - CLI_MISSING_NAMED));
		else
			printf("  and %llu more ranks with no shard file\n", (unsigned long long)(missing - CLI_MISSING_NAMED));
	}
	if (missing && iv->state == CKPT_STATE_COMMITTED)
		bad = 1;
	free(have);
	return bad;
}

static int cmd_show(cli *c, int argc, char **argv)
{
	/* --global: the global tensors and how the ranks split them. */
	int global = 0, k = 0;
	for (int i = 0; i < argc; i++) {
		if (i && !strcmp(argv[i], "--global"))
			global = 1;
		else
			argv[k++] = argv[i];
	}
	argc = k;
	int rc = cli_parse_opts(c, "show", argc, argv);
	if (rc)
		return rc;
	if (global) {
		if (cli_s3_root(c))
			return cli_usage("show", "--global reads a checkpoint root, not an object store");
		if (cli_need(c, 1, 1) < 0)
			return cli_usage("show", "--global needs --root and a valid --job");
		return cli_show_global(c);
	}
	if ((rc = cli_use_daemon(c, "show")) != 0)
		return rc < 0 ? -rc : cli_daemon_show(c);
	if (cli_s3_root(c))
		return cli_s3_show(c);
	if (cli_need(c, 1, 1) < 0)
		return cli_usage("show", "--root and a valid --job are required");
	if (c->version == VERSION_UNSET || c->version == VERSION_ALL)
		c->version = VERSION_LATEST;
	if ((rc = cli_open_index(c)))
		return rc;
	uint64_t v = c->version;
	if (v == VERSION_LATEST && cli_resolve_latest(c, &v) < 0) {
		fprintf(stderr, "ckpt show: job %s has no committed version\n", c->job);
		return EXIT_NOTFOUND;
	}
	ckpt_idx_version iv;
	if (ckpt__index_get(c->ix, c->job, v, &iv) < 0) {
		fprintf(stderr, "ckpt show: job %s has no version %llu\n", c->job, (unsigned long long)v);
		return EXIT_NOTFOUND;
	}
	int bad = 0;
	if (c->json)
		printf("{\"job\": \"%s\", \"version\": %llu, \"state\": \"%s\", \"world_size\": %u, \"shards\": [",
		       c->job, (unsigned long long)v, ckpt_state_name(iv.state), iv.world_size);
	else
		printf("job %s version %llu: %s, %u/%u shards\n", c->job, (unsigned long long)v,
		       ckpt_state_name(iv.state), iv.shards_done, iv.world_size);
	bad = show_ranks(c, v, &iv);
	if (c->json)
		printf("]}\n");
	return bad ? EXIT_CORRUPT : EXIT_OK;
}

static void help_show(FILE *o)
{
	fprintf(o, "usage: ckpt show --root DIR --job J [--version V|latest] [--rank R] [--json]\n"
	           "       ckpt show --global --root DIR --job J [--version V|latest] [--json]\n"
	           "       ckpt show --daemon ADDR [--token-file FILE] --job J [--version V|latest] [--rank R] [--json]\n\n"
	           "Shows a version's shards: regions, dtypes, shapes, chunks, compression.\n"
	           "Structure (header, footer, tail checksums) is checked; chunk data is not: use verify.\n"
	           "Exits 3 if a shard file is damaged.\n"
	           "With --daemon it shows the coordinator's view instead: the tiers the version is\n"
	           "committed at, whether it is restorable, and every copy of every rank's shard (tier,\n"
	           "node, live or being deleted, bytes, footer checksum).\n"
	           "With --global it shows the global tensors instead (dtype, global shape, and the piece\n"
	           "each rank holds, its offsets and extents); inconsistent pieces (overlaps, shapes that\n"
	           "disagree) exit 3 with the reason, elements no rank holds are counted.\n");
}

/* ------------------------------------------------------------- rm, gc */

static int cmd_rm(cli *c, int argc, char **argv)
{
	uint32_t tiers = 0;
	for (int i = 1; i < argc; i++) {
		int r = cli_daemon_opt(c, argc, argv, &i);
		if (r == 0)
			r = cli_common_opt(c, argc, argv, &i);
		if (r < 0)
			return cli_usage("rm", "bad value for %s", argv[i]);
		if (r)
			continue;
		if (!strcmp(argv[i], "--tiers") && i + 1 < argc) {
			if (!(tiers = cli_tiers_parse(argv[++i])))
				return cli_usage("rm", "--tiers: a list of local_mem, peer_mem, local_disk, shared");
		} else {
			return cli_usage("rm", "unknown option '%s'", argv[i]);
		}
	}
	int rc = cli_use_daemon(c, "rm");
	if (rc < 0)
		return -rc;
	if (c->version >= VERSION_UNSET || c->version == VERSION_ALL)
		return cli_usage("rm", "--version N is required ('latest' is not accepted here)");
	if (rc)
		return cli_daemon_rm(c, tiers);
	if (tiers)
		return cli_usage("rm", "--tiers goes with --daemon (a root holds one tier)");
	if (cli_s3_root(c))
		return cli_s3_rm(c);
	if (cli_need(c, 1, 1) < 0)
		return cli_usage("rm", "--root and a valid --job are required");
	if (c->version >= VERSION_UNSET || c->version == VERSION_ALL)
		return cli_usage("rm", "--version N is required ('latest' is not accepted here)");
	if ((rc = cli_open_index(c)))
		return rc;
	ckpt_idx_version iv;
	if (ckpt__index_get(c->ix, c->job, c->version, &iv) < 0) {
		fprintf(stderr, "ckpt rm: job %s has no version %llu\n", c->job, (unsigned long long)c->version);
		return EXIT_NOTFOUND;
	}
	c->lg.level = CKPT_LOG_WARN;
	int err = ckpt__admin_delete(c->root, c->ix, c->job, c->version, &c->faults, &c->lg);
	if (err < 0) {
		fprintf(stderr, "ckpt rm: %s\n", ckpt_strerror(err));
		return EXIT_ERROR;
	}
	printf("removed job %s version %llu\n", c->job, (unsigned long long)c->version);
	return EXIT_OK;
}

static void help_rm(FILE *o)
{
	fprintf(o, "usage: ckpt rm --root DIR --job J --version V\n"
	           "       ckpt rm --daemon ADDR [--token-file FILE] --job J --version V [--tiers T,..] [--json]\n\n"
	           "Deletes one version, crash-safely: it is marked DELETING first (never restored from\n"
	           "then on), its files are removed, then its records. An interrupted rm is finished by\n"
	           "the next 'ckpt gc' of the job, or when a rank of the job opens a context on the root.\n"
	           "With --daemon the coordinator marks every copy of the version (or those at --tiers:\n"
	           "local_mem, peer_mem, local_disk, shared) DELETING in its index and the agents that\n"
	           "hold them delete them: DRAM segments, then the files under their ranks' roots. An\n"
	           "agent that is down, or dies half way, finishes when it is back.\n");
}

static int cmd_gc(cli *c, int argc, char **argv)
{
	long keep = -1, kdram = -1, kdisk = -1;
	long long kevery = -1;
	for (int i = 1; i < argc; i++) {
		int r = cli_daemon_opt(c, argc, argv, &i);
		if (r == 0)
			r = cli_common_opt(c, argc, argv, &i);
		if (r < 0)
			return cli_usage("gc", "bad value for %s", argv[i]);
		if (r)
			continue;
		long *dst = !strcmp(argv[i], "--keep") ? &keep : !strcmp(argv[i], "--keep-dram") ? &kdram
		          : !strcmp(argv[i], "--keep-disk") ? &kdisk : NULL;
		if ((dst || !strcmp(argv[i], "--keep-every")) && i + 1 < argc) {
			char *end;
			const char *opt = argv[i];
			long long v = strtoll(argv[++i], &end, 10);
			if (*end || v < (dst ? 1 : 0) || v > (dst ? 1000000 : (long long)1 << 62))
				return cli_usage("gc", "%s needs a count%s", opt, dst ? " of at least 1" : "");
			if (dst)
				*dst = (long)v;
			else
				kevery = v;
		} else
			return cli_usage("gc", "unknown option '%s'", argv[i]);
	}
	int rc = cli_use_daemon(c, "gc");
	if (rc < 0)
		return -rc;
	if (rc)
		return cli_daemon_gc(c, keep, kdram, kdisk, kevery);
	if (kdram >= 0 || kdisk >= 0 || kevery >= 0)
		return cli_usage("gc", "--keep-dram, --keep-disk and --keep-every go with --daemon");
	if (keep < 0)
		return cli_usage("gc", "--keep N is required");
	if (cli_s3_root(c))
		return cli_s3_gc(c, keep);
	if (cli_need(c, 1, 1) < 0)
		return cli_usage("gc", "--root and a valid --job are required");
	if ((rc = cli_open_index(c)))
		return rc;
	uint32_t deleted = 0;
	int err = ckpt__admin_gc(c->root, c->ix, c->job, (uint32_t)keep, &c->faults, &c->lg, &deleted);
	if (err < 0) {
		fprintf(stderr, "ckpt gc: %s (after deleting %u versions)\n", ckpt_strerror(err), deleted);
		return EXIT_ERROR;
	}
	if (c->json)
		printf("{\"deleted\": %u}\n", deleted);
	else
		printf("deleted %u versions of job %s, kept the newest %ld committed\n", deleted, c->job, keep);
	return EXIT_OK;
}

static void help_gc(FILE *o)
{
	fprintf(o, "usage: ckpt gc --root DIR --job J --keep N [--json]\n"
	           "       ckpt gc --daemon ADDR [--token-file FILE] --job J [--keep N] [--keep-dram K]\n"
	           "               [--keep-disk M] [--keep-every E] [--json]\n\n"
	           "Keeps the newest N committed versions and deletes older ones, plus PENDING versions\n"
	           "older than the newest committed (left by saves that died). Finishes interrupted\n"
	           "deletions first. Each deletion is crash-safe (see ckpt rm --help).\n"
	           "With --daemon the coordinator applies the job's retention policy now: DRAM copies of\n"
	           "the newest K restorable versions, disk copies of the newest M, and the disk copies\n"
	           "of every version divisible by E forever (--keep N sets K = M = N). Given options\n"
	           "become the job's stored policy, which the coordinator also applies on its own\n"
	           "schedule (--retention-interval); without any, the stored one runs now. The newest\n"
	           "restorable version is never touched.\n");
}

/* ------------------------------------------------------------- reindex */

static int cmd_reindex(cli *c, int argc, char **argv)
{
	int verify = 0;
	for (int i = 1; i < argc; i++) {
		int r = cli_common_opt(c, argc, argv, &i);
		if (r < 0)
			return cli_usage("reindex", "bad value for %s", argv[i]);
		if (r)
			continue;
		if (!strcmp(argv[i], "--verify-data"))
			verify = 1;
		else
			return cli_usage("reindex", "unknown option '%s'", argv[i]);
	}
	if (cli_need(c, 1, 0) < 0)
		return cli_usage("reindex", "--root is required");
	if (c->job && ckpt__job_valid(c->job) < 0)
		return cli_usage("reindex", "invalid job id '%s'", c->job);
	struct stat st;
	if (stat(c->root, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "ckpt reindex: %s is not a directory\n", c->root);
		return EXIT_NOTFOUND;
	}
	int err = ckpt__index_open(c->root, &c->lg, &c->ix);
	if (err < 0) {
		fprintf(stderr, "ckpt reindex: cannot open the index in %s: %s\n", c->root, ckpt_strerror(err));
		return EXIT_ERROR;
	}
	uint32_t shards, bad;
	err = ckpt__admin_reindex(c->root, c->ix, c->job, verify, &c->lg, &shards, &bad);
	if (err < 0) {
		fprintf(stderr, "ckpt reindex: %s\n", ckpt_strerror(err));
		return EXIT_ERROR;
	}
	if (c->json)
		printf("{\"shards\": %u, \"refused\": %u}\n", shards, bad);
	else
		printf("reindexed %u shards; %u damaged files refused\n", shards, bad);
	return bad ? EXIT_CORRUPT : EXIT_OK;
}

static void help_reindex(FILE *o)
{
	fprintf(o, "usage: ckpt reindex --root DIR [--job J] [--verify-data] [--json]\n\n"
	           "Rebuilds the index from the shard files alone. A version is COMMITTED when every\n"
	           "rank's shard file is present and passes its structure checks (and every chunk\n"
	           "checksum with --verify-data). Exits 3 when damaged files were refused.\n");
}

int cmd_save(cli *c, int argc, char **argv);
void help_save(FILE *o);
int cmd_verify(cli *c, int argc, char **argv);
void help_verify(FILE *o);
int cmd_restore(cli *c, int argc, char **argv);
void help_restore(FILE *o);

const cli_cmd cli_cmds[] = {
	{ "save", "checkpoint files as regions of a version", cmd_save, help_save },
	{ "ls", "list versions and their state", cmd_ls, help_ls },
	{ "show", "show a version's shards and regions", cmd_show, help_show },
	{ "verify", "read every chunk and check its checksum", cmd_verify, help_verify },
	{ "restore", "write a version's regions out as files", cmd_restore, help_restore },
	{ "export", "the global tensors of a version as safetensors or raw files", cmd_export, help_export },
	{ "import", "a version of one rank from safetensors files", cmd_import, help_import },
	{ "rm", "delete one version", cmd_rm, help_rm },
	{ "gc", "keep the newest N versions, delete the rest", cmd_gc, help_gc },
	{ "reindex", "rebuild the index from the shard files", cmd_reindex, help_reindex },
	{ "status", "ask a ckptd daemon for its state, agents and pools", cmd_status, help_status },
	{ "stragglers", "the job's step times per rank, and the slow ones", cmd_stragglers, help_stragglers },
	{ "goodput", "where the job's time went: useful, stalls, restores, recompute, downtime", cmd_goodput, help_goodput },
	{ "preempt", "a node is about to go: every rank of the job saves one step off it, then leaves", cmd_preempt,
	  help_preempt },
	{ "events", "the coordinator's failure decisions (membership epochs); --follow streams them", cmd_events,
	  help_events },
	{ "recoveries", "each recovery's timeline: detect, spare, pull, register, restore, first step", cmd_recoveries,
	  help_recoveries },
	{ NULL, NULL, NULL, NULL },
};
