/*
 * log.h — ckptd's log: one line per event on stderr, with a level, and the
 * peer and job where known. The logger is a value the daemon context owns;
 * there is no global logger.
 *
 * Never pass secrets or bytes received from a peer as text: reasons are
 * fixed strings, peers are addresses we formatted ourselves.
 */
#ifndef CKPTD_SERVER_LOG_H
#define CKPTD_SERVER_LOG_H

#include <stdarg.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	CKPTD_LOG_ERROR = 0,
	CKPTD_LOG_WARN,
	CKPTD_LOG_INFO,
	CKPTD_LOG_DEBUG,
	CKPTD_LOG_TRACE,
};

typedef struct ckptd_log {
	int level; /* lines above this level are not written */
	FILE *out; /* NULL: stderr */
} ckptd_log;

/* "error", "warn", "info", "debug", "trace" → level; -1 if unknown. */
int ckptd_log_level_parse(const char *s);
const char *ckptd_log_level_name(int level);

/* Writes one line: "ckptd: LEVEL [peer job=J] text". peer and job may be
 * NULL or "". A NULL log writes nothing. */
void ckptd_logf(const ckptd_log *log, int level, const char *peer, const char *job, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#define CKPTD_ERROR(l, p, j, ...) ckptd_logf((l), CKPTD_LOG_ERROR, (p), (j), __VA_ARGS__)
#define CKPTD_WARN(l, p, j, ...) ckptd_logf((l), CKPTD_LOG_WARN, (p), (j), __VA_ARGS__)
#define CKPTD_INFO(l, p, j, ...) ckptd_logf((l), CKPTD_LOG_INFO, (p), (j), __VA_ARGS__)
#define CKPTD_DEBUG(l, p, j, ...) ckptd_logf((l), CKPTD_LOG_DEBUG, (p), (j), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
