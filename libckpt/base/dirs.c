/* Walking below a root without following symlinks (dirs.h). */
#include "dirs.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ckpt__dir_open_at(int dirfd, const char *name, int create, int mode)
{
	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	for (int tries = 0; tries < 2; tries++) {
		int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			return fd;
		if (errno != ENOENT || !create)
			return -errno;
		/* EEXIST: made meanwhile by another process, opened on the retry. */
		if (mkdirat(dirfd, name, (mode_t)mode) < 0 && errno != EEXIST)
			return -errno;
	}
	return -ENOENT;
}

int ckpt__dir_open_below(const char *base, const char *rel, int create, int mode)
{
	int fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		if (mkdir(base, (mode_t)mode) < 0 && errno != EEXIST)
			return -errno;
		fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	char comp[256];
	for (const char *p = rel ? rel : ""; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n >= sizeof(comp)) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		p += n + (e ? 1 : 0);
		if (!n)
			continue;
		int next = ckpt__dir_open_at(fd, comp, create, mode);
		close(fd);
		if (next < 0)
			return next;
		fd = next;
	}
	return fd;
}

static int all_digits(const char *s, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

int ckpt__version_entry_kind(const char *name)
{
	size_t n = strlen(name);
	if (n > 6 && name[0] == 'r' && !strcmp(name + n - 5, ".ckpt") && all_digits(name + 1, n - 6))
		return CKPT_VNAME_SHARD;
	if (n > 11 && name[0] == '.' && name[1] == 'r' && !strcmp(name + n - 9, ".ckpt.tmp") &&
	    all_digits(name + 2, n - 11))
		return CKPT_VNAME_TMP;
	if (!strcmp(name, CKPT_VNAME_MARKER_NAME))
		return CKPT_VNAME_MARKER;
	return CKPT_VNAME_OTHER;
}
