/* One line per event, written with a single fprintf so that lines from
 * one process never interleave. */
#include "log.h"

#include <string.h>
#include <time.h>

static const char *const names[] = { "error", "warn", "info", "debug", "trace" };

int ckptd_log_level_parse(const char *s)
{
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

const char *ckptd_log_level_name(int level)
{
	if (level < 0 || level >= (int)(sizeof(names) / sizeof(names[0])))
		return "?";
	return names[level];
}

void ckptd_logf(const ckptd_log *log, int level, const char *peer, const char *job, const char *fmt, ...)
{
	if (!log || level > log->level)
		return;
	char msg[1024], ctx[400] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	int have_peer = peer && *peer, have_job = job && *job;
	if (have_peer || have_job)
		snprintf(ctx, sizeof(ctx), " [%s%s%s%s]", have_peer ? peer : "", have_peer && have_job ? " " : "",
		         have_job ? "job=" : "", have_job ? job : "");
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	fprintf(log->out ? log->out : stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ckptd %s%s: %s\n",
	        tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	        ts.tv_nsec / 1000000, names[level], ctx, msg);
}
