/* The SHARED tree's per-version commit marker (shared.h). */
#include "shared.h"
#include "base/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MARKER_MAGIC "ckpt-shared-commit 1"
#define MARKER_MAX CKPT_SHARED_MARKER_MAX

int ckpt__shared_marker_path(char *out, size_t cap, const char *dir, const char *job, uint64_t version)
{
	char vdir[4096];
	CKPT_TRY(ckpt__version_dir(vdir, sizeof(vdir), dir, job, version));
	int n = snprintf(out, cap, "%s/%s", vdir, CKPT_SHARED_MARKER);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int ckpt__shared_marker_format(char *buf, size_t cap, const char *job, uint64_t version, const ckpt_shared_mark *m)
{
	int n = snprintf(buf, cap, MARKER_MAGIC "\njob %s\nversion %llu\nworld_size %u\nlineage %016llx\n", job,
	                 (unsigned long long)version, m->world_size, (unsigned long long)m->lineage);
	return n < 0 || (size_t)n >= cap || n > MARKER_MAX ? -ENAMETOOLONG : n;
}

int ckpt__shared_marker_write(const char *dir, const char *job, uint64_t version, const ckpt_shared_mark *m,
                              const char *tmp)
{
	char path[4200], text[MARKER_MAX];
	CKPT_TRY(ckpt__shared_marker_path(path, sizeof(path), dir, job, version));
	if (access(path, F_OK) == 0)
		return 0;
	int n = ckpt__shared_marker_format(text, sizeof(text), job, version, m);
	if (n < 0)
		return n;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int err = ckpt__pwrite_full(fd, text, (size_t)n, 0);
	if (err == 0 && fsync(fd) < 0)
		err = -errno;
	close(fd);
	if (err == 0 && rename(tmp, path) < 0)
		err = -errno;
	if (err < 0) {
		unlink(tmp);
		return err;
	}
	return ckpt__fsync_parent(path);
}

int ckpt__shared_marker_parse(const char *buf, size_t len, const char *job, uint64_t version, ckpt_shared_mark *m)
{
	char text[MARKER_MAX + 1], mjob[72];
	if (len > MARKER_MAX || memchr(buf, '\0', len))
		return -CKPT_ECORRUPT;
	memcpy(text, buf, len);
	text[len] = '\0';
	unsigned long long v, lin;
	unsigned ws;
	int used = 0;
	if (sscanf(text, MARKER_MAGIC "\njob %64s\nversion %llu\nworld_size %u\nlineage %llx\n%n", mjob, &v, &ws, &lin,
	           &used) != 4 ||
	    used != (int)len || strcmp(mjob, job) || v != version || ws == 0)
		return -CKPT_ECORRUPT;
	m->world_size = ws;
	m->lineage = lin;
	return 0;
}

int ckpt__shared_marker_read(const char *dir, const char *job, uint64_t version, ckpt_shared_mark *m)
{
	char path[4200], text[MARKER_MAX + 1];
	CKPT_TRY(ckpt__shared_marker_path(path, sizeof(path), dir, job, version));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t got = read(fd, text, MARKER_MAX + 1); /* one more: a longer file is refused */
	int e = errno;
	close(fd);
	if (got < 0)
		return -e;
	return ckpt__shared_marker_parse(text, (size_t)got, job, version, m);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

int ckpt__shared_merge(const char *dir, const char *job, uint64_t **v, size_t *n, uint8_t **tree_only)
{
	char jdir[4200];
	uint64_t *found = NULL;
	size_t nf = 0, cap = 0;
	*tree_only = NULL;
	if (snprintf(jdir, sizeof(jdir), "%s/jobs/%s", dir, job) >= (int)sizeof(jdir))
		return 0;
	DIR *d = opendir(jdir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			unsigned long long ver;
			char extra;
			if (e->d_name[0] != 'v' || strlen(e->d_name) != 21 || sscanf(e->d_name + 1, "%20llu%c", &ver, &extra) != 1)
				continue;
			if (nf == cap) {
				size_t nc = cap ? cap * 2 : 16;
				uint64_t *p = realloc(found, nc * sizeof(*p));
				if (!p) {
					closedir(d);
					free(found);
					return -ENOMEM;
				}
				found = p;
				cap = nc;
			}
			found[nf++] = ver;
		}
		closedir(d);
	}
	return ckpt__shared_merge_found(v, n, found, nf, tree_only);
}

int ckpt__shared_merge_found(uint64_t **v, size_t *n, uint64_t *found, size_t nf, uint8_t **tree_only)
{
	size_t total = *n + nf, k = 0;
	uint64_t *all = malloc((total + 1) * sizeof(*all));
	uint8_t *flags = calloc(total + 1, 1);
	if (!all || !flags) {
		free(all);
		free(flags);
		free(found);
		return -ENOMEM;
	}
	if (*n)
		memcpy(all, *v, *n * sizeof(*all));
	if (nf)
		memcpy(all + *n, found, nf * sizeof(*all));
	qsort(all, total, sizeof(*all), cmp_u64);
	for (size_t i = 0; i < total; i++)
		if (!k || all[k - 1] != all[i])
			all[k++] = all[i];
	/* The given list is ascending: a search per entry will do. */
	for (size_t i = 0; i < k; i++)
		flags[i] = !*n || !bsearch(&all[i], *v, *n, sizeof(**v), cmp_u64);
	free(found);
	free(*v);
	*v = all;
	*n = k;
	*tree_only = flags;
	return (int)CKPT_MIN(nf, (size_t)INT32_MAX);
}
