/* The trigger file: an operator's (or a test's) way to say "preempted".
 * Its appearing is the notice; its content only refines the deadline, so a
 * content that cannot be read as one still gives a notice, with the
 * deadline unknown (and a warning). The file is looked at once a period:
 * opened without blocking (a FIFO there must not stall the poller), only a
 * regular file counts, at most TRIGGER_MAX bytes are read. The same
 * content seen again is the same notice; the file going away re-arms the
 * source. Writers should rename the file into place, or a poll may see it
 * half written (and then the rest as a second notice). */
#include "notice_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRIGGER_MAX 4096

static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
	return h;
}

/* Reads at most cap + 1 bytes of the regular file at path. Returns the
 * byte count, -1 with errno, or -2 when it is not a regular file. */
static ssize_t slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -2;
	}
	size_t n = 0;
	while (n <= cap) {
		ssize_t r = read(fd, buf + n, cap + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	return (ssize_t)n;
}

void nt_trigger_check(nt_poller *p, nt_trigger *t, uint64_t now_ns)
{
	char buf[TRIGGER_MAX + 1], err[128] = "", key[NT_KEY_MAX];
	size_t cap = t->max < TRIGGER_MAX ? t->max : TRIGGER_MAX;
	nt_schedule(p, &t->st, now_ns);
	ssize_t n = slurp(t->path, buf, cap);
	if (n == -1 && (errno == ENOENT || errno == ENOTDIR)) {
		if (t->present) {
			t->present = 0;
			t->st.fired = 0; /* gone: its next appearance is a new notice */
		}
		nt_answered(p, &t->st);
		return;
	}
	if (n < 0) {
		char e[96];
		nt_failed(p, &t->st, "cannot read the trigger file",
		          n == -1 ? strerror_r(errno, e, sizeof(e)) : "not a regular file");
		return;
	}
	t->present = 1;
	nt_answered(p, &t->st);
	ckptd_notice_event ev;
	int rc = (size_t)n > cap ? nt_fail(err, sizeof(err), "longer than the bytes read of it")
	                         : ckptd_notice_parse_trigger(buf, (size_t)n, ckpt__wall_ns(), &ev, err, sizeof(err));
	if (rc != 1) {
		nt_failed(p, &t->st, "trigger file content not understood, deadline unknown", err);
		memset(&ev, 0, sizeof(ev));
		ev.source = CKPTD_NOTICE_FILE;
		snprintf(ev.detail, sizeof(ev.detail), "trigger file, content not understood, no deadline");
	}
	snprintf(key, sizeof(key), "%016llx %zd", (unsigned long long)fnv1a(buf, (size_t)n), n);
	nt_notice(p, &t->st, &ev, key);
}
