/* ckpt import: a version of one rank made from safetensors files (a
 * fine-tuning run starting from published weights). Every header is
 * checked (safetensors.c) before anything is saved; the data is read with
 * pread (as `ckpt save` reads its files) and saved through the library like
 * any rank's regions. Not mmap: a file truncated under a mapping kills the
 * process with SIGBUS; here it is a short read and an error naming it. */
#include "cli.h"
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

void help_import(FILE *o)
{
	fprintf(o, "usage: ckpt import --format safetensors FILE... --root DIR --job J --version V\n"
	           "                   [--chunk-bytes N]\n\n"
	           "Makes version V of job J, saved by one rank, from the tensors of the safetensors files:\n"
	           "each tensor becomes a region with its dtype and shape (the whole tensor on rank 0), so\n"
	           "that ckpt_restore with any number of ranks takes its part. A malformed file (header\n"
	           "length, JSON, dtype, offsets past the end, overlapping tensors, holes) is refused with\n"
	           "the reason before anything is written. Exits 3 for a malformed file. The tensors'\n"
	           "bytes are read into memory (as many as the files' data sections hold); a file that\n"
	           "shrinks or changes while it is read is refused (exit 1) and nothing is saved.\n");
}

typedef struct in_file {
	const char *path;
	uint8_t *data; /* the data section: data_len bytes from data_start */
	st_file st;
} in_file;

/* Reads the data section of f (its header checked, the file as st said):
 * a short read, or a size or time that moved, is an error and nothing of
 * it is used. */
static int read_data(cli *c, in_file *f, int fd, const struct stat *st, char *why, size_t cap)
{
	struct stat st2;
	size_t n = (size_t)f->st.data_len;
	if (!(f->data = malloc(n ? n : 1))) { /* 0-byte tensors still point somewhere */
		snprintf(why, cap, "no memory for its %zu bytes of tensors", n);
		return EXIT_ERROR;
	}
	ckpt__fault(&c->faults, "cli.import_read");
	int err = n ? ckpt__pread_full(fd, f->data, n, (off_t)f->st.data_start) : 0;
	if (err < 0) {
		int shrank = fstat(fd, &st2) == 0 && st2.st_size < st->st_size;
		snprintf(why, cap, "%s", shrank ? "the file shrank while it was read; nothing saved" : ckpt_strerror(err));
		return EXIT_ERROR;
	}
	if (fstat(fd, &st2) == 0 && (st2.st_size != st->st_size || st2.st_mtim.tv_sec != st->st_mtim.tv_sec ||
	                             st2.st_mtim.tv_nsec != st->st_mtim.tv_nsec)) {
		snprintf(why, cap, "the file changed while it was read; nothing saved");
		return EXIT_ERROR;
	}
	return EXIT_OK;
}

/* Reads and checks path's header, then its tensors' bytes. */
static int load(cli *c, in_file *f, char *why, size_t cap)
{
	/* O_NONBLOCK: a FIFO given as a file must not block the open; it is
	 * refused below as not a regular file. */
	int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	uint8_t lenb[8];
	uint64_t hlen;
	char *js = NULL;
	int rc = EXIT_ERROR;
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(why, cap, "%s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, cap, "not a regular file");
		goto out;
	}
	rc = EXIT_CORRUPT;
	ssize_t got = pread(fd, lenb, 8, 0);
	if (st_header_len(lenb, got < 0 ? 0 : (size_t)got, (uint64_t)st.st_size, &hlen, why, cap) < 0)
		goto out;
	if (!(js = malloc(hlen))) {
		rc = EXIT_ERROR;
		snprintf(why, cap, "out of memory for a %llu-byte header", (unsigned long long)hlen);
		goto out;
	}
	if (ckpt__pread_full(fd, js, hlen, 8) < 0) {
		snprintf(why, cap, "cannot read the %llu-byte header", (unsigned long long)hlen);
		goto out;
	}
	if (st_header_parse(js, hlen, (uint64_t)st.st_size, &f->st, why, cap) < 0)
		goto out;
	rc = read_data(c, f, fd, &st, why, cap);
out:
	free(js);
	if (fd >= 0)
		close(fd);
	return rc;
}

int cmd_import(cli *c, int argc, char **argv)
{
	const char *format = NULL;
	uint64_t chunk = 0;
	in_file *files = calloc((size_t)argc + 1, sizeof(*files));
	int nf = 0, rc = EXIT_USAGE;
	ckpt_ctx *ctx = NULL;
	char why[600] = "";
	if (!files)
		return EXIT_ERROR;
	for (int i = 1; i < argc; i++) {
		int r = cli_common_opt(c, argc, argv, &i);
		if (r < 0) {
			rc = cli_usage("import", "bad value for %s", argv[i]);
			goto out;
		}
		if (r)
			continue;
		if (!strcmp(argv[i], "--format") && i + 1 < argc) {
			format = argv[++i];
		} else if (!strcmp(argv[i], "--chunk-bytes") && i + 1 < argc) {
			chunk = strtoull(argv[++i], NULL, 0);
		} else if (argv[i][0] == '-' && argv[i][1] == '-') {
			rc = cli_usage("import", "unknown option '%s'", argv[i]);
			goto out;
		} else {
			files[nf++].path = argv[i];
		}
	}
	if (!format || strcmp(format, "safetensors")) {
		rc = cli_usage("import", "--format safetensors is required");
		goto out;
	}
	if (cli_need(c, 1, 1) < 0 || c->version == VERSION_UNSET || c->version == VERSION_LATEST ||
	    c->version == VERSION_ALL || !nf) {
		rc = cli_usage("import", "--root, --job, a numbered --version and at least one FILE are required");
		goto out;
	}
	uint64_t total = 0;
	for (int i = 0; i < nf; i++) {
		if ((rc = load(c, &files[i], why, sizeof(why))) != EXIT_OK) {
			fprintf(stderr, "ckpt import: %s: %s\n", files[i].path, why);
			goto out;
		}
		total += files[i].st.data_len;
	}
	ckpt_config cfg;
	rc = EXIT_ERROR;
	if (ckpt_config_init(&cfg) < 0)
		goto out;
	cfg.root = c->root;
	cfg.job_id = c->job;
	cfg.rank = 0;
	cfg.world_size = 1;
	if (chunk)
		cfg.chunk_bytes = chunk;
	cfg.staging_bytes = CKPT_MAX(cfg.chunk_bytes, CKPT_MIN(CKPT_ALIGN_UP(total, cfg.chunk_bytes),
	                                                       cfg.staging_bytes ? cfg.staging_bytes : CLI_STAGING));
	int err = ckpt_ctx_open(&cfg, &ctx);
	if (err < 0) {
		fprintf(stderr, "ckpt import: %s\n", ckpt_strerror(err));
		goto out;
	}
	for (int i = 0; i < nf; i++)
		for (size_t k = 0; k < files[i].st.n; k++) {
			const st_tensor *t = &files[i].st.t[k];
			ckpt_region_desc d = { .size = sizeof(d), .name = t->name,
			                       .ptr = files[i].data + t->begin,
			                       .bytes = t->end - t->begin, .dtype = t->dtype, .ndim = t->ndim };
			memcpy(d.global_shape, t->shape, sizeof(t->shape));
			memcpy(d.extents, t->shape, sizeof(t->shape));
			if ((err = ckpt_region_add(ctx, &d)) < 0) {
				fprintf(stderr, "ckpt import: %s: tensor '%s': %s\n", files[i].path,
				        cli_text(t->name, (char[1100]){ 0 }, 1100),
				        err == -CKPT_ENAME ? "a tensor of that name came before, or the name is not "
				                             "well-formed UTF-8 without control characters"
				                           : ckpt_strerror(err));
				rc = EXIT_CORRUPT;
				goto out;
			}
		}
	ckpt_handle *h = NULL;
	ckpt_status st = { .size = sizeof(st) };
	if ((err = ckpt_save(ctx, c->version, 0, &h)) == 0)
		err = ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, &st);
	ckpt_handle_free(h);
	if (err < 0) {
		fprintf(stderr, "ckpt import: saving version %llu: %s\n", (unsigned long long)c->version,
		        err == -EEXIST ? "that version already exists" : ckpt_strerror(err));
		goto out;
	}
	if (c->json)
		printf("{\"version\": %llu, \"bytes\": %llu}\n", (unsigned long long)c->version, (unsigned long long)total);
	else
		printf("imported %d file(s), %llu bytes, as job %s version %llu\n", nf, (unsigned long long)total, c->job,
		       (unsigned long long)c->version);
	rc = EXIT_OK;
out:
	if (ctx && ckpt_ctx_close(ctx) < 0 && rc == EXIT_OK)
		rc = EXIT_ERROR;
	for (int i = 0; i < nf; i++) {
		free(files[i].data);
		st_file_free(&files[i].st);
	}
	free(files);
	return rc;
}
