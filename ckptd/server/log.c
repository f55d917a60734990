/* The daemon's voice of the one logger (base/log.c). */
#include "log.h"

void ckptd_logf(const ckptd_log *log, int level, const char *peer, const char *job, const char *fmt, ...)
{
	ckpt_log_src src = { .prog = "ckptd", .daemon = 1, .peer = peer, .job = job, .version = CKPT_NO_VERSION };
	va_list ap;
	va_start(ap, fmt);
	ckpt__logv(log, level, &src, fmt, ap);
	va_end(ap);
}
