/*
 * log.h — ckptd's log: the one logger of base/log.h, in the daemon's voice:
 * one line per event on stderr, led by the time, with the peer and job where
 * known. The logger is a value the daemon context owns; there is no global
 * logger. Its level is --log-level, else CKPT_DEBUG (base/log.h).
 */
#ifndef CKPTD_SERVER_LOG_H
#define CKPTD_SERVER_LOG_H

#include "base/log.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	CKPTD_LOG_ERROR = CKPT_LOG_ERROR,
	CKPTD_LOG_WARN = CKPT_LOG_WARN,
	CKPTD_LOG_INFO = CKPT_LOG_INFO,
	CKPTD_LOG_DEBUG = CKPT_LOG_DEBUG,
	CKPTD_LOG_TRACE = CKPT_LOG_TRACE,
};

/* { level, out }: out NULL writes to stderr. */
typedef ckpt_logger ckptd_log;

/* Writes one line: "TIME ckptd LEVEL [peer job=J]: text". peer and job may
 * be NULL or "". A NULL log writes nothing. */
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
