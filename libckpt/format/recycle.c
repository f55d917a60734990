#include "recycle.h"
#include "base/common.h"
#include "base/dirs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

int ckpt__recycle_name(const char *name)
{
	if (name[0] != 'p' || strlen(name) != 22 || strcmp(name + 17, ".free"))
		return 0;
	for (int i = 1; i <= 16; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return 0;
	return 1;
}

int ckpt__recycle_open(const char *root, int create)
{
	return ckpt__dir_open_below(root, CKPT_RECYCLE_DIR, create, 0700);
}

/* Calls fn for every pool file of pfd with its length (regular files with
 * one link only); stops when fn returns nonzero. Returns the number seen. */
static int each_file(int pfd, int (*fn)(void *arg, const char *name, uint64_t len), void *arg)
{
	int dfd = dup(pfd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		int err = -errno;
		if (dfd >= 0)
			close(dfd);
		return err;
	}
	rewinddir(d);
	struct dirent *e;
	struct stat st;
	int n = 0;
	while ((e = readdir(d))) {
		if (!ckpt__recycle_name(e->d_name) || fstatat(pfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_nlink != 1)
			continue;
		n++;
		if (fn && fn(arg, e->d_name, (uint64_t)st.st_size))
			break;
	}
	closedir(d);
	return n;
}

int ckpt__recycle_put(int pfd, int vfd, const char *name)
{
	struct stat st;
	if (fstatat(vfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_size == 0)
		return 0;
	int n = each_file(pfd, NULL, NULL);
	if (n < 0)
		return n;
	if (n >= CKPT_RECYCLE_MAX)
		return 0;
	for (int tries = 0; tries < 4; tries++) {
		uint64_t id;
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			return -EIO;
		char pn[32];
		snprintf(pn, sizeof(pn), "p%016llx.free", (unsigned long long)id);
		if (renameat2(vfd, name, pfd, pn, RENAME_NOREPLACE) == 0)
			return 1;
		if (errno == EEXIST)
			continue;
		/* A filesystem without RENAME_NOREPLACE: the file is unlinked. */
		return errno == EINVAL || errno == ENOSYS ? 0 : -errno;
	}
	return 0;
}

struct pick {
	uint64_t want, lo, hi, best_len;
	char best[32];
};

static int consider(void *arg, const char *name, uint64_t len)
{
	struct pick *p = arg;
	if (len < p->lo || len > p->hi)
		return 0;
	uint64_t d = len > p->want ? len - p->want : p->want - len;
	uint64_t bd = p->best_len > p->want ? p->best_len - p->want : p->want - p->best_len;
	if (!p->best[0] || d < bd) {
		snprintf(p->best, sizeof(p->best), "%s", name);
		p->best_len = len;
	}
	return d == 0;
}

int ckpt__recycle_take(int pfd, uint64_t want, int dfd, const char *dst_name, uint64_t *got)
{
	/* Another process may take the same file first: its rename wins, ours
	 * finds the name gone and looks again. */
	for (int tries = 0; tries < 4; tries++) {
		struct pick p = { .want = want, .lo = want - want / 4, .hi = want + want / 4 + (4u << 20) };
		int n = each_file(pfd, consider, &p);
		if (n < 0)
			return n;
		if (!p.best[0])
			return 0;
		if (renameat(pfd, p.best, dfd, dst_name) == 0) {
			*got = p.best_len;
			return 1;
		}
		if (errno != ENOENT)
			return -errno;
	}
	return 0;
}

static int drop(void *arg, const char *name, uint64_t len)
{
	(void)len;
	int *pfd = arg;
	unlinkat(*pfd, name, 0);
	return 0;
}

int ckpt__recycle_drain(const char *root)
{
	int pfd = ckpt__recycle_open(root, 0);
	if (pfd == -ENOENT)
		return 0;
	if (pfd < 0)
		return pfd;
	int n = each_file(pfd, drop, &pfd);
	close(pfd);
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", root, CKPT_RECYCLE_DIR);
	if (rmdir(p) < 0 && errno != ENOENT && errno != ENOTEMPTY)
		return -errno;
	return n;
}
