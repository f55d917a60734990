#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef NDEBUG
void ckpt__trace_error(const char *file, int line, int err)
{
	static const ckpt_logger quiet = { .level = CKPT_LOG_WARN, .rank = -1 };
	if (ckpt__log_level_env(CKPT_LOG_WARN) == CKPT_LOG_TRACE)
		ckpt__log(&quiet, CKPT_LOG_WARN, CKPT_NO_VERSION, "%s:%d: %s", file, line, ckpt_strerror(err));
}
#endif

const char *ckpt__name_check(const char *s, size_t len)
{
	if (len == 0)
		return "empty name";
	if (s[0] == '.')
		return "name starts with '.'";
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return "name holds a character outside [A-Za-z0-9._-]";
	}
	return NULL;
}

int ckpt__job_valid(const char *job)
{
	if (!job)
		return -CKPT_ENAME;
	size_t n = strnlen(job, CKPT_JOB_MAX + 1);
	return n > CKPT_JOB_MAX || ckpt__name_check(job, n) ? -CKPT_ENAME : 0;
}

int ckpt__region_name_valid(const char *name, size_t len)
{
	if (!name || len == 0 || len > CKPT_MAX_NAME)
		return -CKPT_ENAME;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return -CKPT_ENAME;
	for (size_t i = 0; i < len; i++)
		if (name[i] == '/' || name[i] == '\0' || name[i] == '\\')
			return -CKPT_ENAME;
	return 0;
}

size_t ckpt__utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
	if (!n)
		return 0;
	unsigned char c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	size_t len;
	uint32_t v, min;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2, v = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3, v = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	/* overlong forms, UTF-16 surrogates, beyond U+10FFFF */
	if (v < min || (v >= 0xd800 && v <= 0xdfff) || v > 0x10ffff)
		return 0;
	*cp = v;
	return len;
}

int ckpt__region_name_writable(const char *name, size_t len)
{
	CKPT_TRY(ckpt__region_name_valid(name, len));
	const unsigned char *u = (const unsigned char *)name;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t k = ckpt__utf8_next(u + i, len - i, &cp);
		/* C0 and C1 controls and DEL: a terminal acts on them */
		if (!k || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
			return -CKPT_ENAME;
		i += k;
	}
	return 0;
}

int ckpt__kv_split(char *line, char **key, char **val)
{
	char *s = line, *hash = strchr(s, '#');
	if (hash)
		*hash = 0;
	while (isspace((unsigned char)*s))
		s++;
	if (!*s)
		return 0;
	char *eq = strchr(s, '=');
	if (!eq)
		return -1;
	char *ke = eq, *v = eq + 1;
	while (ke > s && isspace((unsigned char)ke[-1]))
		ke--;
	*ke = 0;
	while (isspace((unsigned char)*v))
		v++;
	char *ve = v + strlen(v);
	while (ve > v && isspace((unsigned char)ve[-1]))
		ve--;
	*ve = 0;
	*key = s;
	*val = v;
	return 1;
}

int ckpt__mkdir_p(const char *path, int mode)
{
	char tmp[4096];
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (tmp[i] == '/' || tmp[i] == '\0') {
			char c = tmp[i];
			tmp[i] = '\0';
			if (mkdir(tmp, (mode_t)mode) < 0 && errno != EEXIST)
				return -errno;
			tmp[i] = c;
		}
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int ckpt__fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return r;
}

int ckpt__fsync_parent(const char *path)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	char *slash = strrchr(tmp, '/');
	if (!slash)
		return ckpt__fsync_dir(".");
	if (slash == tmp)
		slash[1] = 0;
	else
		*slash = 0;
	return ckpt__fsync_dir(tmp);
}

int ckpt__pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t r = pread(fd, p, len, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int ckpt__pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t r = pwrite(fd, p, len, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int ckpt__version_dir(char *out, size_t cap, const char *root, const char *job, uint64_t version)
{
	int n = snprintf(out, cap, "%s/jobs/%s/v%020llu", root, job, (unsigned long long)version);
	return (n < 0 || (size_t)n >= cap) ? -ENAMETOOLONG : 0;
}

int ckpt__shard_path(char *out, size_t cap, const char *root, const char *job, uint64_t version,
                     uint32_t rank)
{
	int n = snprintf(out, cap, "%s/jobs/%s/v%020llu/r%06u.ckpt", root, job,
	                 (unsigned long long)version, rank);
	return (n < 0 || (size_t)n >= cap) ? -ENAMETOOLONG : 0;
}

void ckpt__errf(char *buf, size_t cap, const char *fmt, ...)
{
	if (!buf || !cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, cap, fmt, ap);
	va_end(ap);
}
