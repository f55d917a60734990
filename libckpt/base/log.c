#include "log.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = { "ERROR", "WARN", "INFO", "DEBUG", "TRACE" };
#define LOG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NLEVELS ((int)(sizeof(level_names) / sizeof(level_names[0])))

int ckpt__log_level_parse(const char *s)
{
	if (!s)
		return -1;
	for (int i = 0; i < NLEVELS; i++)
		if (!strcasecmp(s, level_names[i]))
			return i;
	if (!strcasecmp(s, "WARNING"))
		return CKPT_LOG_WARN;
	return -1;
}

const char *ckpt__log_level_name(int level)
{
	return level >= 0 && level < NLEVELS ? level_names[level] : "?";
}

int ckpt__log_level_env(int def)
{
	const char *s = getenv(CKPT_LOG_ENV);
	if (!s || !*s)
		s = getenv(CKPT_LOG_ENV_ALIAS);
	int l = s && *s ? ckpt__log_level_parse(s) : -1;
	return l < 0 ? def : l;
}

void ckpt__logger_init(ckpt_logger *lg, const char *job, int64_t rank)
{
	memset(lg, 0, sizeof(*lg));
	lg->level = ckpt__log_level_env(CKPT_LOG_WARN);
	snprintf(lg->job, sizeof(lg->job), "%s", job ? job : "");
	lg->rank = rank;
}

/* Appends to buf (cap bytes, n used); returns the new length, capped. */
static size_t add(char *buf, size_t cap, size_t n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t add(char *buf, size_t cap, size_t n, const char *fmt, ...)
{
	if (n >= cap)
		return n;
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf + n, cap - n, fmt, ap);
	va_end(ap);
	return w < 0 ? n : LOG_MIN(n + (size_t)w, cap - 1);
}

void ckpt__logv(const ckpt_logger *lg, int level, const ckpt_log_src *src, const char *fmt, va_list ap)
{
	if (!lg || level > lg->level || level < 0 || level >= NLEVELS)
		return;
	char line[1400];
	size_t cap = sizeof(line) - 1, n = 0; /* room for the newline */
	if (src->daemon) {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = add(line, cap, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ", tm.tm_year + 1900, tm.tm_mon + 1,
		        tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	}
	n = add(line, cap, n, "%s %s", src->prog ? src->prog : "ckpt", level_names[level]);
	int have_peer = src->peer && *src->peer, have_job = src->job && *src->job;
	if (src->daemon) {
		if (have_peer || have_job)
			n = add(line, cap, n, " [%s%s%s%s]", have_peer ? src->peer : "", have_peer && have_job ? " " : "",
			        have_job ? "job=" : "", have_job ? src->job : "");
	} else {
		if (lg->job[0])
			n = add(line, cap, n, " job=%s", lg->job);
		if (lg->rank >= 0)
			n = add(line, cap, n, " rank=%lld", (long long)lg->rank);
	}
	if (src->version != CKPT_NO_VERSION)
		n = add(line, cap, n, " v=%llu", (unsigned long long)src->version);
	n = add(line, cap, n, ": ");
	if (n < cap) {
		int w = vsnprintf(line + n, cap - n, fmt, ap);
		n = w < 0 ? n : LOG_MIN(n + (size_t)w, cap - 1);
	}
	line[n++] = '\n';
	if (lg->out) {
		fwrite(line, 1, n, lg->out);
		fflush(lg->out);
	} else {
		ssize_t w = write(2, line, n);
		(void)w;
	}
}

void ckpt__log(const ckpt_logger *lg, int level, uint64_t version, const char *fmt, ...)
{
	ckpt_logger env;
	if (!lg) { /* a line with no owner: what the environment asks for */
		ckpt__logger_init(&env, NULL, -1);
		lg = &env;
	}
	ckpt_log_src src = { .prog = "ckpt", .version = version };
	va_list ap;
	va_start(ap, fmt);
	ckpt__logv(lg, level, &src, fmt, ap);
	va_end(ap);
}
