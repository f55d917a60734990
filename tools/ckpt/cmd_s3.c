/* ckpt ls, show, verify, restore, rm and gc on an object store root
 * (--root s3://BUCKET/PREFIX, the SHARED tier's layout: format/s3tree.h).
 * There is no index there: a version is what its keys say, COMMITTED when
 * its marker is there (every rank's object complete), PENDING otherwise;
 * the tool lists the job's keys once (a LIST, which the save and restore
 * paths never make) and reads markers and objects by their computed keys. */
#include "cli.h"
#include "format/s3tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_s3_root(const cli *c)
{
	return c->root && ckpt__s3tree_is_url(c->root);
}

typedef struct s3ver {
	uint64_t v;
	int marked;            /* the marker is there (mk read) */
	int marker_bad;        /* a key at the marker's name that is not one */
	ckpt_shared_mark mk;
	uint32_t *ranks;       /* the ranks with an object, ascending */
	size_t nranks, capranks;
	uint64_t bytes;
} s3ver;

typedef struct s3scan {
	cli *c;
	s3ver *v;
	size_t n, cap;
} s3scan;

int cli_s3_open(cli *c, const char *url, const char *cmd)
{
	if (c->tree)
		return EXIT_OK;
	char err[800] = "";
	ckpt_s3tree *t = calloc(1, sizeof(*t));
	int r = t ? ckpt__s3tree_open(t, url, err, sizeof(err)) : -ENOMEM;
	if (r < 0) {
		fprintf(stderr, "ckpt %s: %s\n", cmd, err[0] ? err : ckpt_strerror(r));
		free(t);
		return r == -EINVAL ? EXIT_USAGE : EXIT_ERROR;
	}
	c->tree = t;
	return EXIT_OK;
}

static int open_tree(cli *c, const char *cmd)
{
	return cli_s3_open(c, c->root, cmd);
}

void cli_s3_close(cli *c)
{
	if (!c->tree)
		return;
	ckpt__s3tree_close(c->tree);
	free(c->tree);
	c->tree = NULL;
}

static s3ver *ver_get(s3scan *sc, uint64_t v)
{
	if (sc->n && sc->v[sc->n - 1].v == v) /* the listing comes in key order */
		return &sc->v[sc->n - 1];
	for (size_t i = 0; i < sc->n; i++)
		if (sc->v[i].v == v)
			return &sc->v[i];
	if (sc->n == sc->cap) {
		size_t nc = sc->cap ? sc->cap * 2 : 32;
		void *p = realloc(sc->v, nc * sizeof(*sc->v));
		if (!p)
			return NULL;
		sc->v = p;
		sc->cap = nc;
	}
	s3ver *x = &sc->v[sc->n++];
	memset(x, 0, sizeof(*x));
	x->v = v;
	return x;
}

static int scan_cb(void *arg, const char *key, uint64_t size)
{
	s3scan *sc = arg;
	char job[65];
	uint64_t v;
	uint32_t rank;
	if (ckpt__s3tree_parse_key(sc->c->tree, key, job, &v, &rank) < 0 || strcmp(job, sc->c->job))
		return 0; /* not ours: the listing is not trusted */
	s3ver *x = ver_get(sc, v);
	if (!x)
		return -ENOMEM;
	if (rank == CKPT_S3TREE_MARKER) {
		x->marked = 1;
		return 0;
	}
	if (x->nranks == x->capranks) {
		size_t nc = x->capranks ? x->capranks * 2 : 16;
		void *p = realloc(x->ranks, nc * sizeof(*x->ranks));
		if (!p)
			return -ENOMEM;
		x->ranks = p;
		x->capranks = nc;
	}
	x->ranks[x->nranks++] = rank;
	x->bytes += size;
	return 0;
}

static int by_version(const void *a, const void *b)
{
	const s3ver *x = a, *y = b;
	return x->v < y->v ? -1 : x->v > y->v;
}

static int by_rank(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static void scan_free(s3scan *sc)
{
	for (size_t i = 0; i < sc->n; i++)
		free(sc->v[i].ranks);
	free(sc->v);
	memset(sc, 0, sizeof(*sc));
}

/* The job's versions: one LIST of its keys, then each listed marker read. */
static int scan_job(cli *c, const char *cmd, s3scan *sc)
{
	char pre[CKPT_S3TREE_KEY_MAX], err[800] = "";
	memset(sc, 0, sizeof(*sc));
	sc->c = c;
	snprintf(pre, sizeof(pre), "%sjobs/%s/", c->tree->prefix, c->job);
	int r = ckpt_s3_list(c->tree->s3, c->tree->bucket, pre, NULL, scan_cb, sc, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "ckpt %s: listing %s: %s\n", cmd, c->root, err[0] ? err : ckpt_strerror(r));
		scan_free(sc);
		return EXIT_ERROR;
	}
	qsort(sc->v, sc->n, sizeof(*sc->v), by_version);
	for (size_t i = 0; i < sc->n; i++) {
		s3ver *x = &sc->v[i];
		qsort(x->ranks, x->nranks, sizeof(*x->ranks), by_rank);
		if (!x->marked)
			continue;
		r = ckpt__s3tree_marker_read(c->tree, c->job, x->v, &x->mk, err, sizeof(err));
		if (r < 0) {
			x->marked = 0;
			x->marker_bad = r != -ENOENT;
			if (x->marker_bad)
				fprintf(stderr, "ckpt %s: version %llu: %s\n", cmd, (unsigned long long)x->v, err);
		}
	}
	return EXIT_OK;
}

static const char *state_of(const s3ver *x)
{
	return ckpt_state_name(x->marked ? CKPT_STATE_COMMITTED : CKPT_STATE_PENDING);
}

/* The version asked for (VERSION_LATEST: the newest marked), or NULL. */
static s3ver *pick(s3scan *sc, uint64_t want)
{
	for (size_t i = sc->n; i-- > 0;)
		if (want == VERSION_LATEST ? sc->v[i].marked : sc->v[i].v == want)
			return &sc->v[i];
	return NULL;
}

static int need_job(cli *c, const char *cmd)
{
	if (ckpt__job_valid(c->job) < 0)
		return cli_usage(cmd, "a valid --job is required");
	return open_tree(c, cmd);
}

/* ------------------------------------------------------------- ls */

static int ls_job(cli *c, int *first)
{
	s3scan sc;
	int rc = scan_job(c, "ls", &sc);
	if (rc)
		return rc;
	char hb[32];
	for (size_t i = 0; i < sc.n; i++) {
		const s3ver *x = &sc.v[i];
		if (c->json) {
			printf("%s\n  {\"job\": ", *first ? "" : ",");
			cli_json_str(stdout, c->job);
			printf(", \"version\": %llu, \"state\": \"%s\", \"world_size\": %u, \"shards_done\": %zu, "
			       "\"bytes\": %llu}", (unsigned long long)x->v, state_of(x), x->marked ? x->mk.world_size : 0,
			       x->nranks, (unsigned long long)x->bytes);
		} else {
			char sh[32];
			if (x->marked)
				snprintf(sh, sizeof(sh), "%zu/%u", x->nranks, x->mk.world_size);
			else
				snprintf(sh, sizeof(sh), "%zu/?", x->nranks);
			printf("%-20s %20llu  %-9s %11s %12s  %s\n", c->job, (unsigned long long)x->v, state_of(x), sh,
			       cli_human(x->bytes, hb, sizeof(hb)), x->marked ? "marker" : "-");
		}
		*first = 0;
	}
	scan_free(&sc);
	return EXIT_OK;
}

int cli_s3_ls(cli *c)
{
	int rc = open_tree(c, "ls");
	if (rc)
		return rc;
	char (*jobs)[65] = NULL, err[800] = "";
	size_t nj = 0;
	if (!c->job) {
		int r = ckpt__s3tree_jobs(c->tree, &jobs, &nj, err, sizeof(err));
		if (r < 0) {
			fprintf(stderr, "ckpt ls: listing %s: %s\n", c->root, err[0] ? err : ckpt_strerror(r));
			cli_s3_close(c);
			return EXIT_ERROR;
		}
	} else if (ckpt__job_valid(c->job) < 0) {
		cli_s3_close(c);
		return cli_usage("ls", "invalid job id '%s'", c->job);
	}
	if (c->json)
		printf("[");
	else
		printf("%-20s %20s  %-9s %11s %12s  %s\n", "JOB", "VERSION", "STATE", "SHARDS", "BYTES", "COMMITTED");
	int first = 1;
	const char *job = c->job;
	for (size_t i = 0; (job ? i < 1 : i < nj) && rc == EXIT_OK; i++) {
		if (!job)
			c->job = jobs[i];
		rc = ls_job(c, &first);
	}
	if (!job)
		c->job = NULL;
	if (c->json)
		printf("%s]\n", first ? "" : "\n");
	free(jobs);
	cli_s3_close(c);
	return rc;
}

/* ------------------------------------------------------------- show, verify */

static int null_sink(void *arg, uint32_t ri, uint64_t off, const void *d, size_t len)
{
	(void)arg, (void)ri, (void)off, (void)d, (void)len;
	return 0;
}

/* One rank's object: opened (show) or read whole (verify). 1 if bad. */
static int one_rank(cli *c, const s3ver *x, uint32_t r, int read_all, int *first)
{
	char key[CKPT_S3TREE_KEY_MAX], why[800] = "", hb[32];
	ckpt_shard s;
	ckpt__s3tree_key(c->tree, key, sizeof(key), c->job, x->v, r);
	int err = ckpt__s3tree_shard_open(c->tree, key, &s, why, sizeof(why)), opened = err == 0;
	if (err == 0 && (s.header.version != x->v || s.header.rank != r || strcmp(s.header.job, c->job) ||
	                 (x->marked && (s.header.world_size != x->mk.world_size ||
	                                (x->mk.lineage && s.header.lineage && s.header.lineage != x->mk.lineage))))) {
		snprintf(why, sizeof(why), "%.600s is not the shard committed for version %llu rank %u", key,
		         (unsigned long long)x->v, r);
		err = -CKPT_ECORRUPT;
	}
	if (err == 0 && read_all) {
		ckpt_read_opts o = { .depth = 16, .lg = &c->lg, .why = why, .whycap = sizeof(why) };
		err = ckpt__s3tree_shard_read(c->tree, key, &s, &o, null_sink, NULL);
	}
	if (c->json) {
		printf("%s\n  {\"version\": %llu, \"rank\": %u, \"ok\": %s", *first ? "" : ",", (unsigned long long)x->v, r,
		       err < 0 ? "false" : "true");
		if (err < 0) {
			printf(", \"error\": ");
			cli_json_str(stdout, why[0] ? why : ckpt_strerror(err));
		} else {
			printf(", \"bytes\": %llu, \"stored_bytes\": %llu, \"regions\": %u, \"chunks\": %llu",
			       (unsigned long long)s.footer.data_bytes, (unsigned long long)s.footer.stored_bytes,
			       s.footer.region_count, (unsigned long long)s.footer.chunk_count);
		}
		printf("}");
	} else if (err < 0) {
		printf("version %llu rank %u: CORRUPT: %s\n", (unsigned long long)x->v, r,
		       cli_text(why[0] ? why : ckpt_strerror(err), (char[2100]){ 0 }, 2100));
	} else {
		printf("version %llu rank %u: %s%s in %u regions, %llu chunks\n", (unsigned long long)x->v, r,
		       read_all ? "ok, " : "", cli_human(s.footer.data_bytes, hb, sizeof(hb)), s.footer.region_count,
		       (unsigned long long)s.footer.chunk_count);
		for (uint32_t i = 0; !read_all && i < s.footer.region_count; i++) {
			char nb[4 * CKPT_MAX_NAME + 1];
			const ckpt_fmt_region *rg = &s.footer.regions[i];
			printf("    %-32s %-6s %12s  %u chunks\n", cli_text(rg->name, nb, sizeof(nb)),
			       ckpt_dtype_name(rg->dtype), cli_human(rg->bytes, hb, sizeof(hb)), rg->chunk_count);
		}
	}
	if (opened)
		ckpt__shard_close(&s);
	*first = 0;
	return err < 0;
}

/* The ranks of x to look at: --rank's, or those with an object; a
 * committed version's missing ones are named. 1 if any is bad. */
static int each_rank(cli *c, const s3ver *x, int read_all, int *first)
{
	int bad = 0;
	if (c->rank >= 0)
		return one_rank(c, x, (uint32_t)c->rank, read_all, first);
	for (size_t i = 0; i < x->nranks; i++)
		bad |= one_rank(c, x, x->ranks[i], read_all, first);
	if (x->marked) {
		uint64_t missing = 0;
		for (uint32_t r = 0, k = 0; r < x->mk.world_size && missing <= CLI_MISSING_NAMED; r++) {
			while (k < x->nranks && x->ranks[k] < r)
				k++;
			if (k < x->nranks && x->ranks[k] == r)
				continue;
			missing++;
			if (!c->json)
				printf("version %llu rank %u: CORRUPT: no object, yet the version is marked committed\n",
				       (unsigned long long)x->v, r);
		}
		bad |= missing > 0;
	}
	return bad;
}

int cli_s3_show(cli *c)
{
	int rc = need_job(c, "show");
	if (rc)
		return rc;
	s3scan sc;
	if ((rc = scan_job(c, "show", &sc))) {
		cli_s3_close(c);
		return rc;
	}
	uint64_t want = c->version == VERSION_UNSET || c->version == VERSION_ALL ? VERSION_LATEST : c->version;
	s3ver *x = pick(&sc, want);
	if (!x) {
		fprintf(stderr, "ckpt show: job %s has no %s in %s\n", c->job,
		        want == VERSION_LATEST ? "committed version" : "such version", c->root);
		rc = EXIT_NOTFOUND;
	} else {
		int first = 1;
		if (c->json)
			printf("{\"job\": \"%s\", \"version\": %llu, \"state\": \"%s\", \"world_size\": %u, \"shards\": [",
			       c->job, (unsigned long long)x->v, state_of(x), x->marked ? x->mk.world_size : 0);
		else if (x->marked)
			printf("job %s version %llu: %s, %zu/%u shards\n", c->job, (unsigned long long)x->v, state_of(x),
			       x->nranks, x->mk.world_size);
		else
			printf("job %s version %llu: %s (no commit marker), %zu shards\n", c->job, (unsigned long long)x->v,
			       state_of(x), x->nranks);
		rc = each_rank(c, x, 0, &first) ? EXIT_CORRUPT : EXIT_OK;
		if (c->json)
			printf("\n]}\n");
	}
	scan_free(&sc);
	cli_s3_close(c);
	return rc;
}

int cli_s3_verify(cli *c)
{
	int rc = need_job(c, "verify");
	if (rc)
		return rc;
	s3scan sc;
	if ((rc = scan_job(c, "verify", &sc))) {
		cli_s3_close(c);
		return rc;
	}
	uint64_t want = c->version == VERSION_UNSET ? VERSION_ALL : c->version;
	int bad = 0, found = 0, first = 1;
	if (c->json)
		printf("[");
	for (size_t i = 0; i < sc.n; i++) {
		s3ver *x = &sc.v[i];
		if (want == VERSION_LATEST ? x != pick(&sc, VERSION_LATEST) : want != VERSION_ALL && x->v != want)
			continue;
		found = 1;
		bad |= each_rank(c, x, 1, &first);
	}
	if (c->json)
		printf("%s]\n", first ? "" : "\n");
	scan_free(&sc);
	cli_s3_close(c);
	if (!found && want != VERSION_ALL) {
		fprintf(stderr, "ckpt verify: job %s has no such version in %s\n", c->job, c->root);
		return EXIT_NOTFOUND;
	}
	return bad ? EXIT_CORRUPT : EXIT_OK;
}

/* ------------------------------------------------------------- restore */

/* One rank of a version on the object store (cli_restore_staged). */
static int restore_s3_rank(cli *c, void *arg, uint64_t v, uint32_t rank, int dirfd, char *why, size_t cap)
{
	const s3ver *x = arg;
	char key[CKPT_S3TREE_KEY_MAX];
	ckpt__s3tree_key(c->tree, key, sizeof(key), c->job, v, rank);
	cli_shard_src src = { .tree = c->tree, .key = key, .lineage = x->mk.lineage };
	return cli_restore_shard(c, &src, v, rank, dirfd, why, cap);
}

int cli_s3_restore(cli *c, const char *out)
{
	if (!out)
		return cli_usage("restore", "--out is required");
	int rc = need_job(c, "restore");
	if (rc)
		return rc;
	s3scan sc;
	if ((rc = scan_job(c, "restore", &sc))) {
		cli_s3_close(c);
		return rc;
	}
	uint64_t want = c->version == VERSION_UNSET ? VERSION_LATEST : c->version;
	rc = EXIT_NOTFOUND;
	int tried = 0;
	for (size_t i = sc.n; i-- > 0;) {
		s3ver *x = &sc.v[i];
		if (want != VERSION_LATEST && x->v != want)
			continue;
		if (!x->marked) {
			if (want != VERSION_LATEST) {
				fprintf(stderr, "ckpt restore: version %llu has no commit marker in %s: not restorable\n",
				        (unsigned long long)want, c->root);
				break;
			}
			continue;
		}
		if (c->rank >= 0 && (uint32_t)c->rank >= x->mk.world_size) {
			rc = cli_usage("restore", "rank %lld not below world size %u", (long long)c->rank, x->mk.world_size);
			break;
		}
		char why[800] = "";
		tried = 1;
		int err = cli_restore_staged(c, x->v, x->mk.world_size, out, restore_s3_rank, (void *)x, why, sizeof(why));
		if (err == 0) {
			if (c->json) {
				printf("{\"job\": \"%s\", \"version\": %llu, \"out\": ", c->job, (unsigned long long)x->v);
				cli_json_str(stdout, out);
				printf("}\n");
			} else {
				printf("restored job %s version %llu into %s\n", c->job, (unsigned long long)x->v, out);
			}
			rc = EXIT_OK;
			break;
		}
		fprintf(stderr, "ckpt restore: version %llu: %s\n", (unsigned long long)x->v,
		        cli_text(why[0] ? why : ckpt_strerror(err), (char[2100]){ 0 }, 2100));
		rc = err == -CKPT_ECORRUPT || err == -CKPT_EFORMAT || err == -ENOENT ? EXIT_CORRUPT : EXIT_ERROR;
		if (want != VERSION_LATEST || rc == EXIT_ERROR)
			break;
		fprintf(stderr, "ckpt restore: trying the previous version\n");
	}
	if (!tried && rc == EXIT_NOTFOUND)
		fprintf(stderr, "ckpt restore: job %s has no %s in %s\n", c->job,
		        want == VERSION_LATEST ? "committed version" : "such version", c->root);
	scan_free(&sc);
	cli_s3_close(c);
	return rc;
}

/* ------------------------------------------------------------- rm, gc */

/* Every object of x: the marker first, then the shards (batched). */
static int delete_version(cli *c, const s3ver *x, const char *cmd)
{
	char err[800] = "";
	int r = ckpt__s3tree_delete(c->tree, c->job, x->v, x->ranks, x->nranks, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "ckpt %s: version %llu: %s\n", cmd, (unsigned long long)x->v, err[0] ? err : ckpt_strerror(r));
	return r;
}

int cli_s3_rm(cli *c)
{
	int rc = need_job(c, "rm");
	if (rc)
		return rc;
	s3scan sc;
	if ((rc = scan_job(c, "rm", &sc))) {
		cli_s3_close(c);
		return rc;
	}
	s3ver *x = pick(&sc, c->version);
	if (!x) {
		fprintf(stderr, "ckpt rm: job %s has no version %llu in %s\n", c->job, (unsigned long long)c->version,
		        c->root);
		rc = EXIT_NOTFOUND;
	} else if (delete_version(c, x, "rm") < 0) {
		rc = EXIT_ERROR;
	} else {
		printf("removed job %s version %llu from %s\n", c->job, (unsigned long long)c->version, c->root);
	}
	scan_free(&sc);
	cli_s3_close(c);
	return rc;
}

static int job_pick(void *arg, const char *job, uint64_t version, uint32_t rank)
{
	(void)version, (void)rank;
	return !strcmp(job, ((cli *)arg)->job);
}

int cli_s3_gc(cli *c, long keep)
{
	int rc = need_job(c, "gc");
	if (rc)
		return rc;
	s3scan sc;
	if ((rc = scan_job(c, "gc", &sc))) {
		cli_s3_close(c);
		return rc;
	}
	/* The newest `keep` committed stay, and what is newer than the oldest
	 * of them (a version still being flushed); older ones go, with the
	 * versions left without a marker below them. */
	size_t kept = 0, i = sc.n;
	while (i > 0 && kept < (size_t)keep)
		kept += sc.v[--i].marked;
	unsigned deleted = 0;
	int bad = 0;
	if (kept == (size_t)keep)
		for (size_t k = 0; k < i; k++) {
			if (delete_version(c, &sc.v[k], "gc") < 0)
				bad = 1;
			else
				deleted++;
		}
	/* The parts of uploads that never completed: a killed agent's. */
	char err[800] = "";
	size_t aborted = 0;
	int r = ckpt__s3tree_abort_uploads(c->tree, job_pick, c, &aborted, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "ckpt gc: aborting incomplete uploads in %s: %s\n", c->root, err[0] ? err : ckpt_strerror(r));
		bad = 1;
	}
	if (c->json)
		printf("{\"deleted\": %u, \"uploads_aborted\": %zu}\n", deleted, aborted);
	else
		printf("deleted %u versions of job %s in %s, kept the newest %ld committed; aborted %zu incomplete uploads\n",
		       deleted, c->job, c->root, keep, aborted);
	scan_free(&sc);
	cli_s3_close(c);
	return bad ? EXIT_ERROR : EXIT_OK;
}
