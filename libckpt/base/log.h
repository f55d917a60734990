/* The one logger of libckpt, ckptd and the tools: levels, one line per
 * event written at once (lines of concurrent ranks and threads never
 * interleave), the job, rank, version or peer it speaks for. A logger is a
 * value its owner keeps (a context, the daemon): no global state.
 *
 * The level comes from CKPT_DEBUG (ERROR, WARN, INFO, DEBUG, TRACE; any
 * case), for the library and for ckptd alike (ckptd's --log-level
 * overrides it). CKPT_LOG_LEVEL, which ckptd read before, is accepted as an
 * alias when CKPT_DEBUG is not set.
 *
 * Never pass secrets or bytes received from a peer as text: reasons are
 * fixed strings, peers are addresses we formatted ourselves. */
#ifndef CKPT_BASE_LOG_H
#define CKPT_BASE_LOG_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

enum ckpt_log_level { CKPT_LOG_ERROR = 0, CKPT_LOG_WARN, CKPT_LOG_INFO, CKPT_LOG_DEBUG, CKPT_LOG_TRACE };

#define CKPT_LOG_ENV "CKPT_DEBUG"
#define CKPT_LOG_ENV_ALIAS "CKPT_LOG_LEVEL"

/* Who a log line speaks for. The first two fields are what ckptd sets
 * ({ level, out }); the rest is the library's (ckpt__logger_init). */
typedef struct ckpt_logger {
	int level;    /* lines above this level are not written; -1: none */
	FILE *out;    /* NULL: stderr, one write(2) per line */
	int64_t rank; /* -1: none */
	char job[72];
} ckpt_logger;

/* "error", "warn" ("warning"), "info", "debug", "trace", in any case: the
 * level, or -1. */
int ckpt__log_level_parse(const char *s);
const char *ckpt__log_level_name(int level);
/* The level CKPT_DEBUG (or its alias) asks for; def when neither is set or
 * the value is not a level. */
int ckpt__log_level_env(int def);

/* The library's logger: level from the environment (default WARN). */
void ckpt__logger_init(ckpt_logger *lg, const char *job, int64_t rank);

#define CKPT_NO_VERSION UINT64_MAX

/* Where a line comes from, beyond the logger's job and rank. */
typedef struct ckpt_log_src {
	const char *prog;  /* "ckpt" (the library), "ckptd" */
	int daemon;        /* the daemon's form: led by a UTC time (its lines outlive
	                      runs), the context "[peer job=J]" from peer and job
	                      below; else the logger's "job=J rank=R" */
	const char *peer;  /* daemon: the connection; NULL or "": none */
	const char *job;   /* daemon: the job the line speaks for; NULL or "": none */
	uint64_t version;  /* CKPT_NO_VERSION: none */
} ckpt_log_src;

/* Writes one line: "[TIME ]PROG LEVEL CONTEXT[ v=V]: text", CONTEXT being
 * "[peer job=J]" in the daemon's form and "job=J rank=R" otherwise (each part
 * only when known). A NULL logger writes nothing. */
void ckpt__logv(const ckpt_logger *lg, int level, const ckpt_log_src *src, const char *fmt, va_list ap);

/* The library's line: version is CKPT_NO_VERSION when the line is about no
 * particular version. */
void ckpt__log(const ckpt_logger *lg, int level, uint64_t version, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define LOG_E(lg, v, ...) ckpt__log((lg), CKPT_LOG_ERROR, (v), __VA_ARGS__)
#define LOG_W(lg, v, ...) ckpt__log((lg), CKPT_LOG_WARN, (v), __VA_ARGS__)
#define LOG_I(lg, v, ...) ckpt__log((lg), CKPT_LOG_INFO, (v), __VA_ARGS__)
#define LOG_T(lg, v, ...) ckpt__log((lg), CKPT_LOG_TRACE, (v), __VA_ARGS__)

#endif
