/* Which ranks of a version have a shard file. verify and show walk these,
 * not 0..world_size-1: the world size comes out of a file (a header, then
 * the index reindex built from it) and may claim 2^32-1 ranks, while the
 * directory holds what it holds. */
#include "cli.h"
#include "base/dirs.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int by_rank(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

int cli_version_ranks(const cli *c, uint64_t v, uint32_t world, uint32_t **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	char rel[160];
	snprintf(rel, sizeof(rel), "jobs/%s/v%020llu", c->job, (unsigned long long)v);
	int fd = ckpt__dir_open_below(c->root, rel, 0, 0);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	DIR *d = fdopendir(fd);
	if (!d) {
		int err = -errno;
		close(fd);
		return err;
	}
	uint32_t *r = NULL;
	size_t cap = 0, k = 0;
	int err = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *nm = e->d_name;
		if (ckpt__version_entry_kind(nm) != CKPT_VNAME_SHARD || strlen(nm) > 16)
			continue;
		unsigned long long rk = strtoull(nm + 1, NULL, 10);
		/* the name the writer gives rank rk, and no other spelling of it */
		char canon[32];
		snprintf(canon, sizeof(canon), "r%06llu.ckpt", rk);
		if (rk >= world || strcmp(canon, nm))
			continue;
		if (k == cap) {
			size_t nc = cap ? cap * 2 : 64;
			uint32_t *p = realloc(r, nc * sizeof(*r));
			if (!p) {
				err = -ENOMEM;
				break;
			}
			r = p;
			cap = nc;
		}
		r[k++] = (uint32_t)rk;
	}
	closedir(d);
	if (err < 0) {
		free(r);
		return err;
	}
	if (k)
		qsort(r, k, sizeof(*r), by_rank);
	*out = r;
	*n = k;
	return 0;
}

uint64_t cli_missing_ranks(uint32_t world, const uint32_t *have, size_t n, unsigned limit,
                           void (*fn)(void *arg, uint32_t r), void *arg)
{
	unsigned named = 0;
	size_t k = 0;
	for (uint32_t r = 0; r < world && named < limit && named < (uint64_t)world - n; r++) {
		while (k < n && have[k] < r)
			k++;
		if (k < n && have[k] == r)
			continue;
		fn(arg, r);
		named++;
	}
	return (uint64_t)world - n;
}
