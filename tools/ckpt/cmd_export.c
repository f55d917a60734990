/* ckpt export: a version's consolidated global tensors, reassembled from
 * every rank's pieces through the read API (ckpt_view_*), as one
 * safetensors file or one raw file per tensor with a JSON manifest;
 * streamed in bounded memory, read by two threads while one writes
 * (pstream.c). ckpt show --global: the global tensors and their pieces. */
#include "cli.h"
#include "pstream.h"
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- export */

typedef struct exp_args {
	const char *format, *out, *glob;
} exp_args;

void help_export(FILE *o)
{
	fprintf(o, "usage: ckpt export --root DIR --job J [--version V|latest] --format safetensors|raw --out DIR\n"
	           "                   [--region GLOB]\n\n"
	           "Writes the version's global tensors, reassembled from every rank's pieces, each chunk\n"
	           "verified: safetensors: one file DIR/model.safetensors; raw: DIR/<name>.bin per tensor\n"
	           "and DIR/manifest.json (name, dtype, shape, file, bytes). --region selects tensors by\n"
	           "name (shell pattern). A blob (no shape) is written from the lowest rank's copy. Memory\n"
	           "is bounded (four 32 MiB slabs, each reader thread's read buffers), whatever its size.\n"
	           "Files appear under their final names only once complete and synced.\n"
	           "Exits 3 when a chunk is corrupt or a tensor has elements no rank holds.\n");
}

/* How a tensor goes out: its dtype and shape (blobs: a 1-D array, or a
 * scalar of their dtype). */
static void out_shape(const ckpt_tensor_info *ti, st_tensor *t)
{
	size_t es = ckpt_dtype_size(ti->dtype);
	t->name = (char *)ti->name;
	t->dtype = ti->dtype == CKPT_DTYPE_BYTES ? CKPT_DTYPE_U8 : ti->dtype;
	if (ti->ndim) {
		t->ndim = ti->ndim;
		memcpy(t->shape, ti->shape, sizeof(t->shape));
	} else if (ti->dtype != CKPT_DTYPE_BYTES && ti->bytes == es) {
		t->ndim = 0;
	} else if (ti->dtype != CKPT_DTYPE_BYTES && ti->bytes % es == 0) {
		t->ndim = 1;
		t->shape[0] = ti->bytes / es;
	} else {
		t->dtype = CKPT_DTYPE_U8;
		t->ndim = 1;
		t->shape[0] = ti->bytes;
	}
}

/* Makes name appear in dirfd atomically: tmp synced, renamed, dir synced. */
static int publish(int dirfd, const char *tmp, const char *name, int fd)
{
	if (fsync(fd) < 0 || renameat(dirfd, tmp, dirfd, name) < 0 || fsync(dirfd) < 0)
		return -errno;
	return 0;
}

/* O_DIRECT where the filesystem takes it (pstream writes whole blocks). */
static int open_tmp(int dirfd, const char *tmp, int direct)
{
	unlinkat(dirfd, tmp, 0); /* a leftover of an interrupted export: our own name */
	int fl = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd = direct ? openat(dirfd, tmp, fl | O_DIRECT, 0644) : -1;
	if (fd < 0 && (!direct || errno == EINVAL))
		fd = openat(dirfd, tmp, fl, 0644);
	return fd;
}

static int export_safetensors(ckpt_view *const *views, int nviews, const size_t *sel, size_t n, int dirfd,
                              char *why, size_t cap)
{
	ckpt_view *v = views[0];
	st_tensor *t = calloc(n + 1, sizeof(*t));
	ckpt_tensor_info *ti = calloc(n + 1, sizeof(*ti));
	pstream_seg *seg = calloc(n + 1, sizeof(*seg));
	uint8_t *hdr = NULL;
	size_t hlen = 0;
	int fd = -1, err = -ENOMEM;
	char ver[32];
	if (!t || !ti || !seg)
		goto out;
	for (size_t j = 0; j < n; j++) {
		ti[j].size = sizeof(ti[j]);
		ckpt_view_tensor(v, sel[j], &ti[j]);
		out_shape(&ti[j], &t[j]);
		seg[j + 1] = (pstream_seg){ NULL, sel[j], 0, ti[j].bytes };
	}
	snprintf(ver, sizeof(ver), "%llu", (unsigned long long)ckpt_view_version(v));
	const char *meta[] = { "format", "pt", "ckpt_version", ver };
	if (!(hdr = st_header_build(t, n, meta, 2, &hlen)))
		goto out;
	seg[0] = (pstream_seg){ hdr, 0, 0, hlen };
	if ((fd = open_tmp(dirfd, ".model.safetensors.tmp", 1)) < 0) {
		err = -errno;
		snprintf(why, cap, "cannot create the output file: %s", strerror(errno));
		goto out;
	}
	if ((err = pstream_write(views, nviews, seg, n + 1, fd, why, cap)) == 0)
		err = publish(dirfd, ".model.safetensors.tmp", "model.safetensors", fd);
	if (err < 0 && !why[0])
		snprintf(why, cap, "write: %s", strerror(-err));
out:
	if (err < 0 && fd >= 0)
		unlinkat(dirfd, ".model.safetensors.tmp", 0);
	if (fd >= 0)
		close(fd);
	free(hdr);
	free(t);
	free(ti);
	free(seg);
	return err;
}

static int export_raw(ckpt_view *const *views, int nviews, const size_t *sel, size_t n, int dirfd, char *why,
                      size_t cap)
{
	ckpt_view *v = views[0];
	json_t *man = json_object(), *arr = json_array();
	int err = 0;
	char tmp[300], fin[300];
	json_object_set_new(man, "version", json_integer((json_int_t)ckpt_view_version(v)));
	json_object_set_new(man, "world_size", json_integer(ckpt_view_world_size(v)));
	json_object_set(man, "tensors", arr);
	for (size_t j = 0; j < n && !err; j++) {
		ckpt_tensor_info ti = { .size = sizeof(ti) };
		st_tensor t;
		ckpt_view_tensor(v, sel[j], &ti);
		out_shape(&ti, &t);
		snprintf(fin, sizeof(fin), "%s.bin", ti.name);
		snprintf(tmp, sizeof(tmp), ".%s.bin.tmp", ti.name);
		int fd = open_tmp(dirfd, tmp, 1);
		if (fd < 0) {
			err = -errno;
			snprintf(why, cap, "cannot create %s: %s", tmp, strerror(errno));
			break;
		}
		pstream_seg seg = { NULL, sel[j], 0, ti.bytes };
		if ((err = pstream_write(views, nviews, &seg, 1, fd, why, cap)) == 0)
			err = publish(dirfd, tmp, fin, fd);
		if (err < 0) {
			if (!why[0])
				snprintf(why, cap, "%s: %s", fin, strerror(-err));
			unlinkat(dirfd, tmp, 0);
		}
		close(fd);
		json_t *e = json_object(), *sh = json_array();
		for (uint32_t d = 0; d < t.ndim; d++)
			json_array_append_new(sh, json_integer((json_int_t)t.shape[d]));
		json_object_set_new(e, "name", json_string(ti.name));
		json_object_set_new(e, "dtype", json_string(ckpt_dtype_name(t.dtype)));
		json_object_set_new(e, "shape", sh);
		json_object_set_new(e, "file", json_string(fin));
		json_object_set_new(e, "bytes", json_integer((json_int_t)ti.bytes));
		json_array_append_new(arr, e);
	}
	if (!err) {
		char *js = json_dumps(man, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
		int fd = js ? open_tmp(dirfd, ".manifest.json.tmp", 0) : -1;
		if (!js || fd < 0) {
			err = js ? -errno : -ENOMEM;
			snprintf(why, cap, "manifest: %s", strerror(-err));
		} else if ((err = ckpt__pwrite_full(fd, js, strlen(js), 0)) < 0 ||
		           (err = publish(dirfd, ".manifest.json.tmp", "manifest.json", fd)) < 0) {
			snprintf(why, cap, "manifest: %s", strerror(-err));
		}
		if (fd >= 0)
			close(fd);
		free(js);
	}
	json_decref(arr);
	json_decref(man);
	return err;
}

static int export_parse(cli *c, int argc, char **argv, exp_args *a)
{
	for (int i = 1; i < argc; i++) {
		int r = cli_common_opt(c, argc, argv, &i);
		if (r < 0)
			return cli_usage("export", "bad value for %s", argv[i]);
		if (r)
			continue;
		const char **dst = !strcmp(argv[i], "--format") ? &a->format
		                 : !strcmp(argv[i], "--out")    ? &a->out
		                 : !strcmp(argv[i], "--region") ? &a->glob
		                                                : NULL;
		if (!dst)
			return cli_usage("export", "unknown option '%s'", argv[i]);
		if (i + 1 >= argc)
			return cli_usage("export", "%s needs a value", argv[i]);
		*dst = argv[++i];
	}
	if (cli_need(c, 1, 1) < 0)
		return cli_usage("export", "--root and a valid --job are required");
	if (!a->format || (strcmp(a->format, "safetensors") && strcmp(a->format, "raw")))
		return cli_usage("export", "--format safetensors or --format raw is required");
	if (!a->out)
		return cli_usage("export", "--out DIR is required");
	return EXIT_OK;
}

int cmd_export(cli *c, int argc, char **argv)
{
	exp_args a = { 0 };
	int rc = export_parse(c, argc, argv, &a);
	if (rc)
		return rc;
	uint64_t ver = c->version == VERSION_UNSET || c->version == VERSION_LATEST ? CKPT_LATEST : c->version;
	if (c->version == VERSION_ALL)
		return cli_usage("export", "--version all is not supported: name one");
	char why[600] = "";
	ckpt_view *v = NULL;
	size_t *sel = NULL, n = 0;
	int dirfd = -1, err = ckpt_view_open(c->root, c->job, ver, &v, why, sizeof(why));
	ckpt_view *views[PSTREAM_READERS] = { NULL };
	int nviews = 1;
	if (err < 0) {
		fprintf(stderr, "ckpt export: %s\n", why[0] ? why : ckpt_strerror(err));
		return err == -CKPT_ENOVERSION ? EXIT_NOTFOUND : err == -CKPT_ECORRUPT ? EXIT_CORRUPT : EXIT_ERROR;
	}
	rc = EXIT_ERROR;
	size_t total = ckpt_view_count(v);
	if (!(sel = calloc(total + 1, sizeof(*sel))))
		goto out;
	for (size_t i = 0; i < total; i++) {
		ckpt_tensor_info ti = { .size = sizeof(ti) };
		ckpt_view_tensor(v, i, &ti);
		if (a.glob && fnmatch(a.glob, ti.name, 0) != 0)
			continue;
		if (ti.missing) {
			fprintf(stderr, "ckpt export: tensor '%s': %llu elements are held by no rank\n",
			        cli_text(ti.name, (char[1100]){ 0 }, 1100), (unsigned long long)ti.missing);
			rc = EXIT_CORRUPT;
			goto out;
		}
		sel[n++] = i;
	}
	if (!n) {
		fprintf(stderr, "ckpt export: no tensor matches '%s'\n", a.glob ? a.glob : "*");
		rc = EXIT_NOTFOUND;
		goto out;
	}
	if (mkdir(a.out, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "ckpt export: %s: %s\n", a.out, strerror(errno));
		goto out;
	}
	if ((dirfd = open(a.out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		fprintf(stderr, "ckpt export: %s: %s\n", a.out, strerror(errno));
		goto out;
	}
	/* A view per reader thread, opened one after the other (each opens the
	 * root's index only while it opens). */
	views[0] = v;
	while (nviews < PSTREAM_READERS &&
	       ckpt_view_open(c->root, c->job, ckpt_view_version(v), &views[nviews], why, sizeof(why)) == 0)
		nviews++;
	why[0] = 0;
	err = !strcmp(a.format, "raw") ? export_raw(views, nviews, sel, n, dirfd, why, sizeof(why))
	                               : export_safetensors(views, nviews, sel, n, dirfd, why, sizeof(why));
	if (err < 0) {
		fprintf(stderr, "ckpt export: %s\n", why[0] ? why : ckpt_strerror(err));
		rc = err == -CKPT_ECORRUPT || err == -CKPT_EMISMATCH ? EXIT_CORRUPT : EXIT_ERROR;
		goto out;
	}
	if (!c->json)
		printf("exported %zu tensors of job %s version %llu to %s (%s)\n", n, c->job,
		       (unsigned long long)ckpt_view_version(v), a.out, a.format);
	else
		printf("{\"tensors\": %zu, \"version\": %llu}\n", n, (unsigned long long)ckpt_view_version(v));
	rc = EXIT_OK;
out:
	for (int i = 1; i < nviews; i++)
		ckpt_view_close(views[i]);
	if (dirfd >= 0)
		close(dirfd);
	free(sel);
	ckpt_view_close(v);
	return rc;
}

/* ------------------------------------------------------------- show --global */

int cli_show_global(cli *c)
{
	uint64_t ver = c->version == VERSION_UNSET || c->version == VERSION_LATEST ? CKPT_LATEST : c->version;
	char why[600] = "";
	ckpt_view *v;
	int err = ckpt_view_open(c->root, c->job, ver, &v, why, sizeof(why));
	if (err < 0) {
		fprintf(stderr, "ckpt show: %s\n", why[0] ? why : ckpt_strerror(err));
		return err == -CKPT_ENOVERSION ? EXIT_NOTFOUND : err == -CKPT_ECORRUPT ? EXIT_CORRUPT : EXIT_ERROR;
	}
	size_t n = ckpt_view_count(v);
	if (c->json)
		printf("{\"job\": \"%s\", \"version\": %llu, \"world_size\": %u, \"tensors\": [", c->job,
		       (unsigned long long)ckpt_view_version(v), ckpt_view_world_size(v));
	else
		printf("job %s version %llu: saved by %u ranks, %zu global tensors\n", c->job,
		       (unsigned long long)ckpt_view_version(v), ckpt_view_world_size(v), n);
	for (size_t i = 0; i < n; i++) {
		ckpt_tensor_info ti = { .size = sizeof(ti) };
		char hb[32];
		ckpt_view_tensor(v, i, &ti);
		if (c->json) {
			printf("%s{\"name\": ", i ? ", " : "");
			cli_json_str(stdout, ti.name);
			printf(", \"dtype\": \"%s\", \"shape\": [", ckpt_dtype_name(ti.dtype));
			for (uint32_t d = 0; d < ti.ndim; d++)
				printf("%s%llu", d ? ", " : "", (unsigned long long)ti.shape[d]);
			printf("], \"bytes\": %llu, \"missing\": %llu, \"pieces\": [", (unsigned long long)ti.bytes,
			       (unsigned long long)ti.missing);
		} else {
			printf("  %s  %s [", cli_text(ti.name, (char[1100]){ 0 }, 1100), ckpt_dtype_name(ti.dtype));
			for (uint32_t d = 0; d < ti.ndim; d++)
				printf("%s%llu", d ? "," : "", (unsigned long long)ti.shape[d]);
			printf("]%s  %s  %u %s%s\n", ti.ndim ? "" : " (blob)", cli_human(ti.bytes, hb, sizeof(hb)),
			       ti.npieces, ti.ndim ? "pieces" : "copies", ti.missing ? "  INCOMPLETE" : "");
			if (ti.missing)
				printf("    %llu elements are held by no rank\n", (unsigned long long)ti.missing);
		}
		for (uint32_t j = 0; j < ti.npieces; j++) {
			ckpt_piece_info p = { .size = sizeof(p) };
			ckpt_view_piece(v, i, j, &p);
			if (c->json) {
				printf("%s{\"rank\": %u, \"replicas\": %u, \"bytes\": %llu, \"offsets\": [", j ? ", " : "",
				       p.rank, p.replicas, (unsigned long long)p.bytes);
				for (uint32_t d = 0; d < ti.ndim; d++)
					printf("%s%llu", d ? ", " : "", (unsigned long long)p.offsets[d]);
				printf("], \"extents\": [");
				for (uint32_t d = 0; d < ti.ndim; d++)
					printf("%s%llu", d ? ", " : "", (unsigned long long)p.extents[d]);
				printf("]}");
				continue;
			}
			printf("    rank %u: ", p.rank);
			if (!ti.ndim)
				printf("%llu bytes", (unsigned long long)p.bytes);
			for (uint32_t d = 0; d < ti.ndim; d++)
				printf("%s%llu..%llu", d ? ", " : "[", (unsigned long long)p.offsets[d],
				       (unsigned long long)(p.offsets[d] + p.extents[d]));
			printf("%s", ti.ndim ? "]" : "");
			if (p.replicas)
				printf(" (and %u replicas)", p.replicas);
			printf("\n");
		}
		if (c->json)
			printf("]}");
	}
	if (c->json)
		printf("]}\n");
	ckpt_view_close(v);
	return EXIT_OK;
}
