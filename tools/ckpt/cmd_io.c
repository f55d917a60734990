/* Commands that move chunk data: save, verify, restore. */
#include "cli.h"
#include "base/dirs.h"
#include "base/parse.h"
#include "format/format.h"
#include "format/reader.h"
#include "format/s3tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

int cli_resolve_latest(cli *c, uint64_t *v);

/* ------------------------------------------------------------- save */

void help_save(FILE *o)
{
	fprintf(o, "usage: ckpt save --root DIR --job J --version V [--rank R] [--world-size W]\n"
	           "                 [--compress] [--chunk-bytes N] [--keep N] [--recycle|--no-recycle]\n"
	           "                 [--json] FILE...\n\n"
	           "Checkpoints files as regions of version V (one region per file, named after the\n"
	           "file's base name): tokenizers, configs, data-loader state, or any state kept in\n"
	           "files. Returns once the shard is durable; the version is COMMITTED once all W\n"
	           "ranks have saved it.\n\n"
	           "The files are streamed: read chunk by chunk into the staging pool while earlier\n"
	           "chunks are written, so memory stays within the pool whatever their size\n"
	           "(CKPT_STAGING_BYTES; by default 16 chunks, 128 MiB, or the files' size if\n"
	           "smaller). A file that shrinks or changes while it is read fails the save.\n\n"
	           "  --keep N      once the version commits, delete the job's committed versions\n"
	           "                older than the newest N (as ckpt gc --keep N; CKPT_KEEP_VERSIONS;\n"
	           "                not with --daemon, where the coordinator's retention rules)\n"
	           "  --recycle     deleted versions' shard files stay allocated in DIR/recycle/ and\n"
	           "                new shards overwrite them: writes at the disk's overwrite speed,\n"
	           "                often far faster than new files (ext4: no block allocation). On\n"
	           "                by default with --keep (each save reuses what the last deletion\n"
	           "                freed: one shard's space more than without). Turn it on when\n"
	           "                something else deletes this root's versions regularly (ckpt gc\n"
	           "                from a timer, the agent's retention); leave it off when you delete\n"
	           "                versions to free disk space: pooled files keep theirs (up to 64\n"
	           "                files; a save with recycling off frees them). CKPT_RECYCLE\n"
	           "  --no-recycle  never, even with --keep\n");
}

typedef struct save_args {
	uint32_t world;
	int compress;
	uint64_t chunk;
	uint32_t tiers;
	long keep;    /* --keep N; -1: not given */
	int recycle;  /* --recycle 1, --no-recycle 0, -1: not given */
	char **files;
	int nfiles;
} save_args;

/* An input, open; its bytes are read by the library during the save. */
typedef struct input_file {
	int fd;
	uint64_t n;
	struct stat st; /* when it was opened */
} input_file;

/* save's own options and its FILEs; 0, or the exit code of a bad command. */
static int save_parse(cli *c, int argc, char **argv, save_args *a)
{
	for (int i = 1; i < argc; i++) {
		int r = cli_daemon_opt(c, argc, argv, &i);
		if (r == 0)
			r = cli_common_opt(c, argc, argv, &i);
		if (r < 0)
			return cli_usage("save", "bad value for %s", argv[i]);
		if (r)
			continue;
		char *end;
		if (!strcmp(argv[i], "--world-size") && i + 1 < argc) {
			unsigned long w = strtoul(argv[++i], &end, 10);
			if (*end || w == 0 || w > UINT32_MAX)
				return cli_usage("save", "--world-size needs a positive count");
			a->world = (uint32_t)w;
		} else if (!strcmp(argv[i], "--compress")) {
			a->compress = 1;
		} else if (!strcmp(argv[i], "--recycle") || !strcmp(argv[i], "--no-recycle")) {
			a->recycle = !strcmp(argv[i], "--recycle");
		} else if (!strcmp(argv[i], "--keep") && i + 1 < argc) {
			a->keep = strtol(argv[++i], &end, 10);
			if (*end || !argv[i][0] || a->keep < 1 || a->keep > UINT32_MAX)
				return cli_usage("save", "--keep needs a positive count");
		} else if (!strcmp(argv[i], "--tiers") && i + 1 < argc) {
			if (!(a->tiers = cli_tiers_parse(argv[++i])) || (a->tiers & CKPT_TIER_SHARED))
				return cli_usage("save", "--tiers: a list of local_mem, peer_mem, local_disk");
		} else if (!strcmp(argv[i], "--chunk-bytes") && i + 1 < argc) {
			if (ckpt__parse_size(argv[++i], &a->chunk) < 0)
				return cli_usage("save", "--chunk-bytes needs a size");
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return cli_usage("save", "unknown option '%s'", argv[i]);
		} else {
			a->files[a->nfiles++] = argv[i];
		}
	}
	if (cli_need(c, 1, 1) < 0 || c->version >= VERSION_UNSET || c->version == VERSION_ALL || !a->nfiles)
		return cli_usage("save", "--root, --job, --version N and at least one FILE are required");
	if (a->keep > 0 && c->daemon_flag)
		return cli_usage("save", "--keep: through --daemon the coordinator's retention rules (ckpt gc --daemon, ckptd --keep-disk)");
	return 0;
}

/* The context's settings: the environment's, then the command line's. */
static int save_config(cli *c, const save_args *a, ckpt_config *cfg)
{
	if (ckpt_config_init(cfg) < 0)
		return -1;
	uint32_t tiers = a->tiers;
	cfg->job_id = c->job;
	cfg->root = c->root;
	cfg->rank = c->rank < 0 ? 0 : (uint32_t)c->rank;
	cfg->world_size = a->world;
	cfg->compress = a->compress;
	if (a->chunk)
		cfg->chunk_bytes = a->chunk;
	if (a->keep > 0)
		cfg->keep_versions = (uint32_t)a->keep;
	if (a->recycle >= 0)
		cfg->recycle = a->recycle;
	/* Nobody waits on this snapshot but the tool: the disk writes start
	 * with the first chunk read, whatever the CPUs (unless the table's
	 * CKPT_SNAPSHOT_OVERLAP says otherwise). */
	if (!getenv("CKPT_SNAPSHOT_OVERLAP"))
		cfg->snapshot_overlap = 1;
	/* The files stream through a pool smaller than them: a save never
	 * skipped for that (CKPT_POOL_POLICY=skip is for training loops). */
	cfg->pool_policy = CKPT_POOL_WAIT;
	/* --daemon: through the node's agent, into its DRAM as well by default. */
	if (c->daemon_flag) {
		cfg->daemon = c->daemon;
		/* Unless the table's CKPT_TIERS chose them (the config cannot
		 * tell a default from a setting). */
		if (!tiers && !getenv("CKPT_TIERS"))
			tiers = CKPT_TIER_LOCAL_MEM | CKPT_TIER_LOCAL_DISK;
	}
	if (c->token_file)
		cfg->token_file = c->token_file;
	if (tiers)
		cfg->tiers = tiers;
	return 0;
}

/* Opens one input. Only a regular file: a FIFO or a device would block or
 * never end (the open does not block: O_NONBLOCK). Its bytes are read with
 * pread during the save (never mapped: a file that shrinks under a mapping
 * kills the process with SIGBUS; here the save fails, naming the file). */
static int save_open_one(cli *c, const char *path, input_file *in)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &in->st) < 0) {
		fprintf(stderr, "ckpt save: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return EXIT_USAGE;
	}
	if (!S_ISREG(in->st.st_mode)) {
		fprintf(stderr, "ckpt save: %s: not a regular file (%s); save reads regular files only\n", path,
		        S_ISFIFO(in->st.st_mode) ? "a FIFO" : S_ISDIR(in->st.st_mode) ? "a directory"
		        : S_ISCHR(in->st.st_mode) || S_ISBLK(in->st.st_mode) ? "a device" : "a socket or other");
		close(fd);
		return EXIT_USAGE;
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	in->fd = fd;
	in->n = (uint64_t)in->st.st_size;
	ckpt__fault(&c->faults, "cli.save_read");
	return EXIT_OK;
}

/* Opens each file; *total receives their sizes in whole chunks. Returns
 * EXIT_OK or the exit code, having said what was wrong. */
static int save_open(cli *c, const save_args *a, input_file *in, uint64_t chunk_bytes, uint64_t *total)
{
	*total = 0;
	for (int i = 0; i < a->nfiles; i++) {
		int rc = save_open_one(c, a->files[i], &in[i]);
		if (rc != EXIT_OK)
			return rc;
		*total += CKPT_ALIGN_UP(in[i].n, chunk_bytes);
	}
	return EXIT_OK;
}

/* After a save failed with -CKPT_ECHANGED: which input, and how. */
static void save_say_changed(const save_args *a, const input_file *in)
{
	for (int i = 0; i < a->nfiles; i++) {
		struct stat st;
		if (fstat(in[i].fd, &st) < 0)
			continue;
		if ((uint64_t)st.st_size < in[i].n)
			fprintf(stderr, "ckpt save: %s: the file shrank while it was read; nothing saved\n", a->files[i]);
		else if (st.st_size != in[i].st.st_size || st.st_mtim.tv_sec != in[i].st.st_mtim.tv_sec ||
		         st.st_mtim.tv_nsec != in[i].st.st_mtim.tv_nsec)
			fprintf(stderr, "ckpt save: %s: the file changed while it was read; nothing saved\n", a->files[i]);
	}
}

static const char *const tier_words[] = { "local_mem", "peer_mem", "local_disk", "shared" };

/* The tiers of mask as a list: "a, b" (text) or "\"a\", \"b\"" (JSON). */
static void tier_list(uint32_t mask, int json, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = 0;
	for (int i = 0; i < 4 && n + 1 < cap; i++)
		if (mask & (1u << i))
			n += (size_t)snprintf(buf + n, cap - n, json ? "%s\"%s\"" : "%s%s", n ? ", " : "", tier_words[i]);
	if (!n && !json)
		snprintf(buf, cap, "none");
}

/* committed: per DRAM tier asked for (bit set), whether the coordinator
 * committed the version there within the wait. */
static void save_report(const cli *c, const ckpt_config *cfg, const ckpt_status *st, uint32_t asked,
                        uint32_t committed)
{
	char reached[80], failed[80];
	tier_list(st->tiers_reached, c->json, reached, sizeof(reached));
	tier_list(st->tiers_failed | (asked & ~st->tiers_reached & ~st->tiers_failed), c->json, failed, sizeof(failed));
	if (c->json) {
		printf("{\"job\": \"%s\", \"version\": %llu, \"rank\": %u, \"bytes\": %llu, \"stored_bytes\": %llu, "
		       "\"committed\": %s, \"tiers_reached\": [%s], \"tiers_failed\": [%s]", c->job,
		       (unsigned long long)c->version, cfg->rank, (unsigned long long)st->bytes,
		       (unsigned long long)st->stored_bytes, st->committed ? "true" : "false", reached, failed);
		for (int i = 0; i < 2; i++)
			if (asked & (1u << i))
				printf(", \"%s\": %s", tier_words[i], committed & (1u << i) ? "true" : "false");
		printf("}\n");
		return;
	}
	printf("saved job %s version %llu rank %u: %llu bytes (%llu stored), %s\n", c->job,
	       (unsigned long long)c->version, cfg->rank, (unsigned long long)st->bytes,
	       (unsigned long long)st->stored_bytes, st->committed ? "version COMMITTED" : "waiting for other ranks");
	printf("tiers reached: %s\n", reached);
	if (st->tiers_failed | (asked & ~st->tiers_reached))
		printf("tiers NOT reached: %s (see the log above and the daemon's)\n", failed);
	for (int i = 0; i < 2; i++)
		if ((asked & (1u << i)) && (st->tiers_reached & (1u << i)))
			printf("%s copy: %s\n", i ? "partner DRAM" : "node DRAM",
			       committed & (1u << i) ? "committed" : "not committed yet (other ranks, or see the daemon's log)");
}

/* Registers the mapped files as regions of ctx, saves them and waits for
 * the disk copy, then (bounded) for the DRAM tiers asked for. Exit code:
 * EXIT_OK when this rank's copy reached every tier asked for,
 * EXIT_PARTIAL when the disk copy is durable but another tier failed. */
static int save_run(cli *c, const save_args *a, const ckpt_config *cfg, ckpt_ctx *ctx, const input_file *in)
{
	ckpt_handle *h = NULL;
	int err, rc = EXIT_ERROR;
	for (int i = 0; i < a->nfiles; i++) {
		const char *base = strrchr(a->files[i], '/');
		base = base ? base + 1 : a->files[i];
		if ((err = ckpt_region_add_file(ctx, base, in[i].fd, 0, in[i].n)) < 0) {
			char tb[1100];
			if (err == -CKPT_ENAME)
				fprintf(stderr, "ckpt save: '%s' cannot name a region (a region is named after its file): "
				        "1-255 bytes of well-formed UTF-8, no control characters, no '\\', unique\n",
				        cli_text(base, tb, sizeof(tb)));
			else
				fprintf(stderr, "ckpt save: %s: %s\n", cli_text(a->files[i], tb, sizeof(tb)), ckpt_strerror(err));
			return EXIT_USAGE;
		}
	}
	if ((err = ckpt_save(ctx, c->version, 0, &h)) < 0) {
		fprintf(stderr, "ckpt save: %s\n", ckpt_strerror(err));
		return EXIT_ERROR;
	}
	ckpt_status st = { .size = sizeof(st) };
	if ((err = ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, &st)) < 0) {
		if (err == -CKPT_ECHANGED)
			save_say_changed(a, in);
		fprintf(stderr, "ckpt save: %s\n", ckpt_strerror(err));
		goto out;
	}
	/* Through a daemon, the DRAM copies' global commit too (bounded: the
	 * other ranks of a multi-rank job may not have saved yet). */
	uint32_t asked = cfg->tiers & (CKPT_TIER_LOCAL_MEM | CKPT_TIER_PEER_MEM | CKPT_TIER_LOCAL_DISK), committed = 0;
	for (uint32_t t = CKPT_TIER_LOCAL_MEM; cfg->daemon && *cfg->daemon && t <= CKPT_TIER_PEER_MEM; t <<= 1) {
		if (!(asked & t))
			continue;
		ckpt_status ms = { .size = sizeof(ms) };
		err = ckpt_handle_wait(h, t, 10000, &ms);
		if (err == 0 && ms.committed)
			committed |= t;
		else if (err && err != -ETIMEDOUT)
			fprintf(stderr, "ckpt save: %s copy: %s\n", tier_words[t == CKPT_TIER_PEER_MEM], ckpt_strerror(err));
	}
	st.size = sizeof(st);
	ckpt_handle_test(h, CKPT_TIER_LOCAL_DISK, &st); /* every tier's outcome, as it stands now */
	if (!(cfg->daemon && *cfg->daemon))
		asked &= CKPT_TIER_LOCAL_DISK;
	save_report(c, cfg, &st, asked, committed);
	rc = (asked & ~st.tiers_reached) ? EXIT_PARTIAL : EXIT_OK;
out:
	ckpt_handle_free(h);
	return rc;
}

int cmd_save(cli *c, int argc, char **argv)
{
	save_args a = { .world = 1, .keep = -1, .recycle = -1, .files = calloc((size_t)argc, sizeof(char *)) };
	if (!a.files)
		return EXIT_ERROR;
	int rc = save_parse(c, argc, argv, &a);
	if (rc) {
		free(a.files);
		return rc;
	}
	ckpt_config cfg;
	if (save_config(c, &a, &cfg) < 0) {
		free(a.files);
		return EXIT_USAGE;
	}
	input_file *in = calloc((size_t)a.nfiles, sizeof(*in));
	ckpt_ctx *ctx = NULL;
	uint64_t total;
	rc = EXIT_ERROR;
	for (int i = 0; in && i < a.nfiles; i++)
		in[i].fd = -1;
	if (!in || (rc = save_open(c, &a, in, cfg.chunk_bytes, &total)) != EXIT_OK)
		goto out;
	/* The files stream through the pool: a few chunks in flight keep the
	 * disk busy, so the default is 16 of them (or the files' size, if
	 * smaller), not the library's default; CKPT_STAGING_BYTES chooses
	 * (its "auto" means that default here). */
	uint64_t pool = getenv("CKPT_STAGING_BYTES") && cfg.staging_bytes ? cfg.staging_bytes : 16 * cfg.chunk_bytes;
	cfg.staging_bytes = CKPT_MAX(cfg.chunk_bytes, CKPT_MIN(total, pool));
	int err = ckpt_ctx_open(&cfg, &ctx);
	if (err < 0) {
		fprintf(stderr, "ckpt save: %s\n", ckpt_strerror(err));
		rc = err == -CKPT_ECONFIG || err == -CKPT_ENAME ? EXIT_USAGE : EXIT_ERROR;
		goto out;
	}
	rc = save_run(c, &a, &cfg, ctx, in);
out:
	ckpt_ctx_close(ctx); /* before the files: the regions read them */
	for (int i = 0; in && i < a.nfiles; i++)
		if (in[i].fd >= 0)
			close(in[i].fd);
	free(in);
	free(a.files);
	return rc;
}

/* ------------------------------------------------------------- progress */

typedef struct progress {
	int on;
	uint64_t done, total;
	int last_pct;
	const char *what;
} progress;

static void progress_add(progress *p, uint64_t n)
{
	if (!p->on)
		return;
	p->done += n;
	int pct = p->total ? (int)(p->done * 100 / p->total) : 100;
	if (pct == p->last_pct)
		return;
	p->last_pct = pct;
	char a[32], b[32];
	int bar = pct * 30 / 100;
	fprintf(stderr, "\r%s [%.*s%*s] %3d%% %s / %s", p->what, bar, "##############################",
	        30 - bar, "", pct, cli_human(p->done, a, sizeof(a)), cli_human(p->total, b, sizeof(b)));
	if (p->done >= p->total)
		fprintf(stderr, "\n");
}

/* ------------------------------------------------------------- verify */

void help_verify(FILE *o)
{
	fprintf(o, "usage: ckpt verify --root DIR --job J [--version V|latest|all] [--rank R] [--json]\n\n"
	           "Reads every chunk of the chosen shards (default: all versions) and checks its\n"
	           "checksum, plus every structural check. A COMMITTED version missing a shard is\n"
	           "corrupt. Exits 3 when anything is corrupt, naming version, rank, region, chunk.\n");
}

static int null_sink(void *arg, uint32_t ri, uint64_t off, const void *d, size_t len)
{
	(void)ri; (void)off; (void)d;
	progress_add(arg, len);
	return 0;
}

struct vers {
	uint64_t *v;
	uint32_t *state, *world;
	size_t n, cap;
};

static int collect_v(void *arg, uint64_t version, const ckpt_idx_version *iv)
{
	struct vers *a = arg;
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 32;
		uint64_t *v = realloc(a->v, nc * 8);
		uint32_t *s = v ? realloc(a->state, nc * 4) : NULL;
		uint32_t *w = s ? realloc(a->world, nc * 4) : NULL;
		if (v) a->v = v;
		if (s) a->state = s;
		if (!w)
			return -ENOMEM;
		a->world = w;
		a->cap = nc;
	}
	a->v[a->n] = version;
	a->state[a->n] = iv->state;
	a->world[a->n++] = iv->world_size;
	return 0;
}

/* One line (or JSON object) of verify's report. */
static void verify_line(const cli *c, uint64_t v, uint32_t r, int err, const char *why, int *first)
{
	char tb[2100];
	if (c->json) {
		printf("%s\n  {\"version\": %llu, \"rank\": %u, \"ok\": %s", *first ? "" : ",", (unsigned long long)v, r,
		       err < 0 ? "false" : "true");
		if (err < 0) {
			printf(", \"error\": ");
			cli_json_str(stdout, why[0] ? why : ckpt_strerror(err));
		}
		printf("}");
	} else if (err < 0) {
		printf("version %llu rank %u: CORRUPT: %s\n", (unsigned long long)v, r,
		       cli_text(why[0] ? why : ckpt_strerror(err), tb, sizeof(tb)));
	} else {
		printf("version %llu rank %u: ok\n", (unsigned long long)v, r);
	}
	*first = 0;
}

/* Verifies one rank's shard file: structure, the footer checksum the
 * index recorded, every chunk. Returns 0, or the error with why set. */
static int verify_shard(cli *c, uint64_t v, uint32_t r, char *why, size_t cap)
{
	char path[4096];
	ckpt__shard_path(path, sizeof(path), c->root, c->job, v, r);
	ckpt_shard s;
	int err = ckpt__shard_open(path, &s, why, cap);
	if (err < 0)
		return err;
	ckpt_idx_shard rec;
	if (ckpt__index_get_shard(c->ix, c->job, v, r, &rec) == 0 && rec.footer_checksum != s.tail.footer_checksum) {
		snprintf(why, cap, "shard file differs from the one the index recorded");
		ckpt__shard_close(&s);
		return -CKPT_ECORRUPT;
	}
	progress p = { isatty(2) && !c->json, 0, s.footer.data_bytes, -1, "verifying" };
	ckpt_read_opts o = { .depth = 8, .direct = 1, .lg = &c->lg, .why = why, .whycap = cap };
	err = ckpt__shard_read(path, &s, &o, null_sink, &p);
	ckpt__shard_close(&s);
	if (p.on && err < 0)
		fprintf(stderr, "\n");
	return err;
}

struct miss_arg {
	const cli *c;
	uint64_t v;
	int *first;
};

static void verify_missing_one(void *arg, uint32_t r)
{
	struct miss_arg *m = arg;
	verify_line(m->c, m->v, r, -ENOENT, "no shard file", m->first);
}

/* The ranks of a version that have no file, when it is not PENDING (a
 * PENDING version's ranks may not have written yet): named one by one up
 * to a few, then counted, so that a world size of 2^32-1 costs nothing. */
static int verify_missing(const cli *c, uint64_t v, uint32_t world, const uint32_t *have, size_t n, int *first)
{
	struct miss_arg m = { c, v, first };
	uint64_t missing = cli_missing_ranks(world, have, n, CLI_MISSING_NAMED, verify_missing_one, &m);
	if (missing > CLI_MISSING_NAMED) {
		char why[160];
		snprintf(why, sizeof(why), "and %llu more of the version's %u ranks have no shard file",
		         (unsigned long long)(missing - CLI_MISSING_NAMED), world);
		verify_line(c, v, world - 1, -ENOENT, why, first);
	}
	return missing ? -ENOENT : 0;
}

/* Verifies the ranks of version v that have a file (or --rank's), and
 * reports the missing ones. Returns 0 or a negative value when any fails. */
static int verify_version(cli *c, uint64_t v, uint32_t state, uint32_t world, int *first)
{
	uint32_t *have = NULL, one;
	size_t n = 0;
	int bad = 0;
	if (c->rank >= 0) {
		if ((uint64_t)c->rank >= world)
			return 0;
		one = (uint32_t)c->rank;
		have = &one;
		n = 1;
	} else {
		int err = cli_version_ranks(c, v, world, &have, &n);
		if (err < 0) {
			verify_line(c, v, 0, err, "cannot list the version's directory", first);
			return err;
		}
	}
	for (size_t k = 0; k < n; k++) {
		char why[512] = "";
		int err = verify_shard(c, v, have[k], why, sizeof(why));
		if (err == -ENOENT && state == CKPT_STATE_PENDING)
			continue; /* not written yet */
		bad |= err < 0;
		verify_line(c, v, have[k], err, why, first);
	}
	if (c->rank < 0) {
		if (state != CKPT_STATE_PENDING && verify_missing(c, v, world, have, n, first) < 0)
			bad = 1;
		free(have);
	}
	return bad ? -CKPT_ECORRUPT : 0;
}

int cmd_verify(cli *c, int argc, char **argv)
{
	int prc = cli_parse_opts(c, "verify", argc, argv);
	if (prc)
		return prc;
	int use = cli_use_daemon(c, "verify");
	if (use < 0)
		return -use;
	if (use)
		return cli_daemon_verify(c);
	if (cli_s3_root(c))
		return cli_s3_verify(c);
	if (cli_need(c, 1, 1) < 0)
		return cli_usage("verify", "--root and a valid --job are required");
	int rc = cli_open_index(c);
	if (rc)
		return rc;
	struct vers vs = { 0 };
	int err = ckpt__index_each_version(c->ix, c->job, collect_v, &vs);
	if (err < 0) {
		fprintf(stderr, "ckpt verify: %s\n", ckpt_strerror(err));
		return EXIT_ERROR;
	}
	uint64_t want = c->version == VERSION_UNSET ? VERSION_ALL : c->version;
	if (want == VERSION_LATEST && cli_resolve_latest(c, &want) < 0) {
		fprintf(stderr, "ckpt verify: job %s has no committed version\n", c->job);
		free(vs.v); free(vs.state); free(vs.world);
		return EXIT_NOTFOUND;
	}
	int corrupt = 0, found = 0, first = 1;
	if (c->json)
		printf("[");
	for (size_t i = 0; i < vs.n; i++) {
		if (want != VERSION_ALL && vs.v[i] != want)
			continue;
		if (vs.state[i] == CKPT_STATE_DELETING)
			continue;
		found = 1;
		if (verify_version(c, vs.v[i], vs.state[i], vs.world[i], &first) < 0)
			corrupt = 1;
	}
	if (c->json)
		printf("%s]\n", first ? "" : "\n");
	free(vs.v);
	free(vs.state);
	free(vs.world);
	if (!found && want != VERSION_ALL) {
		fprintf(stderr, "ckpt verify: job %s has no version %llu\n", c->job, (unsigned long long)want);
		return EXIT_NOTFOUND;
	}
	return corrupt ? EXIT_CORRUPT : EXIT_OK;
}

/* ------------------------------------------------------------- restore */

void help_restore(FILE *o)
{
	fprintf(o, "usage: ckpt restore --root DIR --job J --out DIR [--version V|latest] [--rank R]\n"
	           "       ckpt restore --daemon unix:SOCK --job J --out DIR [--version V] [--rank R] [--shared-dir DIR|s3://B/P/]\n\n"
	           "Writes each region of a shard as a file named after the region into --out\n"
	           "(into --out/rank-R/ for each rank when the job has several ranks and --rank is\n"
	           "not given). Every chunk is checksum-verified before it is written; files appear\n"
	           "only once complete. 'latest' (the default) falls back to the newest version that\n"
	           "verifies. Nothing is ever written outside --out. Shows a progress bar on a terminal.\n"
	           "Through a node's agent: the ranks' copies held on that node (DRAM, disk, a partner\n"
	           "copy of a lost node's rank), then the SHARED tree at --shared-dir (or CKPT_SHARED_DIR).\n");
}

/* Region files open at once while a shard is restored: a shard may hold
 * 2^20 regions, far more than a process may open, so files are opened as
 * chunks arrive (chunks come in region order) and a few are kept. */
#define OUT_FDS 16

struct out_files {
	int dirfd;
	const ckpt_shard *s;
	int fd[OUT_FDS];
	uint32_t ri[OUT_FDS];
	progress *p;
};

/* The descriptor of region ri's file; the file was created empty (and
 * sized) before, so it is opened, never created, and never followed. */
static int out_fd(struct out_files *o, uint32_t ri)
{
	unsigned k = ri % OUT_FDS;
	if (o->fd[k] >= 0 && o->ri[k] == ri)
		return o->fd[k];
	if (o->fd[k] >= 0)
		close(o->fd[k]);
	o->fd[k] = openat(o->dirfd, o->s->footer.regions[ri].name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	o->ri[k] = ri;
	return o->fd[k] >= 0 ? o->fd[k] : -errno;
}

static void out_close(struct out_files *o)
{
	for (unsigned k = 0; k < OUT_FDS; k++)
		if (o->fd[k] >= 0) {
			close(o->fd[k]);
			o->fd[k] = -1;
		}
}

static int file_sink(void *arg, uint32_t ri, uint64_t off, const void *data, size_t len)
{
	struct out_files *o = arg;
	int fd = out_fd(o, ri);
	if (fd < 0)
		return fd;
	int r = ckpt__pwrite_full(fd, data, len, off);
	progress_add(o->p, len);
	return r;
}

/* Creates every region's file in outfd, sized, one descriptor at a time. */
static int create_files(const ckpt_shard *s, int outfd, char *why, size_t cap)
{
	for (uint32_t i = 0; i < s->footer.region_count; i++) {
		const char *name = s->footer.regions[i].name;
		int fd = openat(outfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0) {
			int err = -errno;
			snprintf(why, cap, "cannot create %.300s: %s", name, strerror(errno));
			return err;
		}
		int err = ftruncate(fd, (off_t)s->footer.regions[i].bytes) < 0 ? -errno : 0;
		close(fd);
		if (err < 0) {
			snprintf(why, cap, "cannot size %.300s: %s", name, strerror(-err));
			return err;
		}
	}
	return 0;
}

/* fsync of every region's file, reopened one at a time. */
static int sync_files(const ckpt_shard *s, int outfd)
{
	for (uint32_t i = 0; i < s->footer.region_count; i++) {
		int fd = openat(outfd, s->footer.regions[i].name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		int err = fd < 0 || fsync(fd) < 0 ? -errno : 0;
		if (fd >= 0)
			close(fd);
		if (err < 0)
			return err;
	}
	return 0;
}

/* Region names were validated by the footer decoder (no '/', not '.' or
 * '..'); files are created with openat in a fresh private directory, so
 * every file stays inside it whatever a name says. */
int cli_restore_shard(cli *c, const cli_shard_src *src, uint64_t v, uint32_t rank, int outfd, char *why, size_t cap)
{
	const char *path = src->path ? src->path : src->tree ? src->key : "the DRAM copy";
	ckpt_shard s;
	int err = src->img ? ckpt__shard_parse_mem(src->img, src->len, &s, why, cap)
	        : src->tree ? ckpt__s3tree_shard_open(src->tree, src->key, &s, why, cap)
	                   : ckpt__shard_open(src->path, &s, why, cap);
	if (err < 0)
		return err;
	/* It must be the shard that was committed, not one put there. */
	if (s.header.version != v || s.header.rank != rank || strcmp(s.header.job, c->job) ||
	    (src->check_sum && src->footer_checksum != s.tail.footer_checksum) ||
	    (src->lineage && s.header.lineage && s.header.lineage != src->lineage)) {
		snprintf(why, cap, "%.300s is not the shard committed for version %llu rank %u", path,
		         (unsigned long long)v, rank);
		ckpt__shard_close(&s);
		return -CKPT_ECORRUPT;
	}
	if ((err = create_files(&s, outfd, why, cap)) < 0) {
		ckpt__shard_close(&s);
		return err;
	}
	char what[64];
	snprintf(what, sizeof(what), "restoring v%llu r%u", (unsigned long long)v, rank);
	progress p = { isatty(2) && !c->json, 0, s.footer.data_bytes, -1, what };
	struct out_files of = { .dirfd = outfd, .s = &s, .p = &p };
	for (unsigned k = 0; k < OUT_FDS; k++)
		of.fd[k] = -1;
	ckpt_read_opts o = { .depth = 8, .direct = 1, .lg = &c->lg, .why = why, .whycap = cap };
	err = src->img ? ckpt__shard_read_mem(src->img, src->len, &s, &o, file_sink, &of)
	    : src->tree ? ckpt__s3tree_shard_read(src->tree, src->key, &s, &o, file_sink, &of)
	               : ckpt__shard_read(src->path, &s, &o, file_sink, &of);
	out_close(&of);
	if (p.on && err < 0)
		fprintf(stderr, "\n");
	if (err == 0)
		err = sync_files(&s, outfd);
	ckpt__shard_close(&s);
	return err;
}

static int restore_shard(cli *c, uint64_t v, uint32_t rank, int outfd, char *why, size_t cap)
{
	char path[4096];
	ckpt__shard_path(path, sizeof(path), c->root, c->job, v, rank);
	ckpt_idx_shard rec;
	if (ckpt__index_get_shard(c->ix, c->job, v, rank, &rec) < 0) {
		snprintf(why, cap, "the index has no shard of version %llu rank %u", (unsigned long long)v, rank);
		return -CKPT_ECORRUPT;
	}
	cli_shard_src src = { .path = path, .check_sum = 1, .footer_checksum = rec.footer_checksum };
	return cli_restore_shard(c, &src, v, rank, outfd, why, cap);
}

/* Removes a staging directory: files, and rank-N directories of files. */
void cli_remove_stage(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char p[4700];
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (unlink(p) < 0 && (errno == EISDIR || errno == EPERM))
			cli_remove_stage(p);
	}
	closedir(d);
	rmdir(dir);
}

/* Moves every entry of the directory sfd into dfd, directories by their
 * files. Nothing below dfd is followed: a symlink at a directory's name in
 * --out (rank-1 -> /elsewhere) is refused, and one at a file's name is
 * replaced by the file, never written through. */
static int publish_at(int sfd, int dfd, const char *dst, char *why, size_t cap)
{
	int sdup = dup(sfd);
	DIR *d = sdup >= 0 ? fdopendir(sdup) : NULL;
	if (!d) {
		if (sdup >= 0)
			close(sdup);
		return -errno;
	}
	struct dirent *e;
	int err = 0;
	while (err == 0 && (e = readdir(d))) {
		const char *nm = e->d_name;
		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		struct stat st;
		if (fstatat(sfd, nm, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
			int cs = ckpt__dir_open_at(sfd, nm, 0, 0);
			int cd = cs >= 0 ? ckpt__dir_open_at(dfd, nm, 1, 0755) : cs;
			if (cd < 0) {
				err = cd;
				snprintf(why, cap, "cannot use %.400s/%s: %s", dst, nm,
				         cd == -ELOOP || cd == -ENOTDIR ? "a symlink or a file is in the way; not followed"
				                                       : ckpt_strerror(cd));
			} else {
				char sub[4200];
				snprintf(sub, sizeof(sub), "%s/%s", dst, nm);
				err = publish_at(cs, cd, sub, why, cap);
			}
			if (cs >= 0)
				close(cs);
			if (cd >= 0)
				close(cd);
			continue;
		}
		if (renameat(sfd, nm, dfd, nm) < 0) {
			err = -errno;
			snprintf(why, cap, "cannot move %s into %.400s: %s", nm, dst, strerror(errno));
		}
	}
	closedir(d);
	if (err == 0 && fsync(dfd) < 0)
		err = -errno;
	return err;
}

/* Moves every file of stage into dst (--out, made if missing), replacing
 * same names. */
int cli_publish_dir(const char *stage, const char *dst, char *why, size_t cap)
{
	int err = ckpt__mkdir_p(dst, 0755);
	if (err < 0) {
		snprintf(why, cap, "cannot create %.400s: %s", dst, ckpt_strerror(err));
		return err;
	}
	int sfd = ckpt__dir_open_below(stage, NULL, 0, 0);
	int dfd = sfd >= 0 ? ckpt__dir_open_below(dst, NULL, 0, 0) : -1;
	if (sfd < 0 || dfd < 0) {
		err = sfd < 0 ? sfd : dfd;
		snprintf(why, cap, "cannot open %.400s: %s", sfd < 0 ? stage : dst, ckpt_strerror(err));
	} else {
		err = publish_at(sfd, dfd, dst, why, cap);
	}
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	return err;
}

int cli_stage_make(const char *out, char *stage, size_t scap, char *why, size_t cap)
{
	int err = ckpt__mkdir_p(out, 0755);
	stage[0] = 0;
	if (err < 0) {
		snprintf(why, cap, "cannot create %.400s: %s", out, ckpt_strerror(err));
		return err;
	}
	snprintf(stage, scap, "%s/.ckpt-restore-XXXXXX", out); /* mkdtemp's template */
	if (!mkdtemp(stage)) {
		err = -errno;
		snprintf(why, cap, "cannot create a directory in %.400s: %s", out, strerror(errno));
		stage[0] = 0;
		return err;
	}
	return 0;
}

int cli_restore_staged(cli *c, uint64_t v, uint32_t world, const char *out, cli_rank_restore_fn one, void *arg,
                       char *why, size_t cap)
{
	char stage[4200];
	int err = cli_stage_make(out, stage, sizeof(stage), why, cap);
	if (err < 0)
		return err;
	for (uint32_t r = 0; err == 0 && r < world; r++) {
		if (c->rank >= 0 && (uint32_t)c->rank != r)
			continue;
		char dir[4300];
		if (world > 1 && c->rank < 0)
			snprintf(dir, sizeof(dir), "%s/rank-%u", stage, r);
		else
			snprintf(dir, sizeof(dir), "%s", stage);
		if ((err = ckpt__mkdir_p(dir, 0700)) < 0)
			break;
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) {
			err = -errno;
			break;
		}
		err = one(c, arg, v, r, dfd, why, cap);
		close(dfd);
	}
	if (err == 0)
		err = cli_publish_dir(stage, out, why, cap);
	cli_remove_stage(stage);
	return err;
}

static int restore_root_rank(cli *c, void *arg, uint64_t v, uint32_t rank, int dirfd, char *why, size_t cap)
{
	(void)arg;
	return restore_shard(c, v, rank, dirfd, why, cap);
}

int cmd_restore(cli *c, int argc, char **argv)
{
	const char *out = NULL, *shared_dir = c->shared_dir;
	for (int i = 1; i < argc; i++) {
		int r = cli_daemon_opt(c, argc, argv, &i);
		if (r == 0)
			r = cli_common_opt(c, argc, argv, &i);
		if (r < 0)
			return cli_usage("restore", "bad value for %s", argv[i]);
		if (r)
			continue;
		if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "--shared-dir") && i + 1 < argc)
			shared_dir = argv[++i];
		else
			return cli_usage("restore", "unknown option '%s'", argv[i]);
	}
	int use = cli_use_daemon(c, "restore");
	if (use < 0)
		return -use;
	if (use && !out)
		return cli_usage("restore", "--out is required");
	if (use)
		return cli_restore_daemon(c, out, shared_dir && *shared_dir ? shared_dir : NULL);
	if (cli_s3_root(c))
		return cli_s3_restore(c, out);
	if (cli_need(c, 1, 1) < 0 || !out)
		return cli_usage("restore", "--root, a valid --job and --out are required");
	if (c->version == VERSION_ALL)
		return cli_usage("restore", "--version all is not accepted; give a version or 'latest'");
	int rc = cli_open_index(c);
	if (rc)
		return rc;
	struct vers vs = { 0 };
	int err = ckpt__index_each_version(c->ix, c->job, collect_v, &vs);
	if (err < 0) {
		fprintf(stderr, "ckpt restore: %s\n", ckpt_strerror(err));
		return EXIT_ERROR;
	}
	uint64_t want = c->version == VERSION_UNSET ? VERSION_LATEST : c->version;
	char why[512] = "";
	rc = EXIT_NOTFOUND;
	int tried = 0;
	for (size_t i = vs.n; i-- > 0;) {
		if (want != VERSION_LATEST && vs.v[i] != want)
			continue;
		if (vs.state[i] != CKPT_STATE_COMMITTED) {
			if (want != VERSION_LATEST) {
				fprintf(stderr, "ckpt restore: version %llu is %s, not COMMITTED\n",
				        (unsigned long long)want, ckpt_state_name(vs.state[i]));
				rc = EXIT_NOTFOUND;
				break;
			}
			continue;
		}
		if (c->rank >= 0 && (uint32_t)c->rank >= vs.world[i]) {
			rc = cli_usage("restore", "rank %lld not below world size %u", (long long)c->rank, vs.world[i]);
			break;
		}
		tried = 1;
		why[0] = 0;
		err = cli_restore_staged(c, vs.v[i], vs.world[i], out, restore_root_rank, NULL, why, sizeof(why));
		if (err == 0) {
			if (c->json)
				printf("{\"job\": \"%s\", \"version\": %llu, \"out\": ", c->job, (unsigned long long)vs.v[i]);
			if (c->json) {
				cli_json_str(stdout, out);
				printf("}\n");
			} else {
				printf("restored job %s version %llu into %s\n", c->job, (unsigned long long)vs.v[i], out);
			}
			rc = EXIT_OK;
			break;
		}
		fprintf(stderr, "ckpt restore: version %llu: %s\n", (unsigned long long)vs.v[i],
		        cli_text(why[0] ? why : ckpt_strerror(err), (char[2100]){ 0 }, 2100));
		rc = (err == -CKPT_ECORRUPT || err == -CKPT_EFORMAT || err == -ENOENT) ? EXIT_CORRUPT : EXIT_ERROR;
		if (want != VERSION_LATEST || rc == EXIT_ERROR)
			break;
		int older = 0;
		for (size_t k = 0; k < i; k++)
			older |= vs.state[k] == CKPT_STATE_COMMITTED;
		if (older)
			fprintf(stderr, "ckpt restore: trying the previous version\n");
	}
	if (!tried && rc == EXIT_NOTFOUND)
		fprintf(stderr, "ckpt restore: job %s has no %s\n", c->job,
		        want == VERSION_LATEST ? "committed version" : "such version");
	free(vs.v);
	free(vs.state);
	free(vs.world);
	return rc;
}
