/* Internal helpers shared by every part of libckpt: logging, error macros,
 * alignment, little/big-endian codecs, time. */
#ifndef CKPT_COMMON_H
#define CKPT_COMMON_H

#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "ckpt.h"

#define CKPT_ALIGN 4096u
#define CKPT_ALIGN_UP(x, a) (((x) + ((a) - 1)) / (a) * (a))
#define CKPT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CKPT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define CKPT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- logging: levels, stderr, CKPT_DEBUG=ERROR|WARN|INFO|TRACE ---- */
enum ckpt_log_level { CKPT_LOG_ERROR = 0, CKPT_LOG_WARN, CKPT_LOG_INFO, CKPT_LOG_TRACE };

/* Who a log line speaks for; lives in each context, no global state. */
typedef struct ckpt_logger {
	int level;
	char job[72];
	int64_t rank; /* -1: none */
} ckpt_logger;

void ckpt__logger_init(ckpt_logger *lg, const char *job, int64_t rank);
/* version: UINT64_MAX when the line is about no particular version. */
void ckpt__log(const ckpt_logger *lg, int level, uint64_t version, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define CKPT_NO_VERSION UINT64_MAX
#define LOG_E(lg, v, ...) ckpt__log((lg), CKPT_LOG_ERROR, (v), __VA_ARGS__)
#define LOG_W(lg, v, ...) ckpt__log((lg), CKPT_LOG_WARN, (v), __VA_ARGS__)
#define LOG_I(lg, v, ...) ckpt__log((lg), CKPT_LOG_INFO, (v), __VA_ARGS__)
#define LOG_T(lg, v, ...) ckpt__log((lg), CKPT_LOG_TRACE, (v), __VA_ARGS__)

/* Forward an error; in debug builds say where it passed. */
#ifndef NDEBUG
void ckpt__trace_error(const char *file, int line, int err);
#define CKPT_TRY(expr) do { int ckpt__e = (expr); \
	if (ckpt__e < 0) { ckpt__trace_error(__FILE__, __LINE__, ckpt__e); return ckpt__e; } } while (0)
#else
#define CKPT_TRY(expr) do { int ckpt__e = (expr); if (ckpt__e < 0) return ckpt__e; } while (0)
#endif
#define CKPT_RETURN_IF(cond, err) do { if (cond) return (err); } while (0)

/* ---- byte order ---- */
static inline void ckpt__put_le16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void ckpt__put_le32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static inline void ckpt__put_le64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static inline uint16_t ckpt__get_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t ckpt__get_le32(const uint8_t *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = (v << 8) | p[i]; return v; }
static inline uint64_t ckpt__get_le64(const uint8_t *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = (v << 8) | p[i]; return v; }
static inline void ckpt__put_be32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i)); }
static inline void ckpt__put_be64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (56 - 8 * i)); }
static inline uint32_t ckpt__get_be32(const uint8_t *p) { uint32_t v = 0; for (int i = 0; i < 4; i++) v = (v << 8) | p[i]; return v; }
static inline uint64_t ckpt__get_be64(const uint8_t *p) { uint64_t v = 0; for (int i = 0; i < 8; i++) v = (v << 8) | p[i]; return v; }

/* ---- time ---- */
uint64_t ckpt__now_ns(void);      /* CLOCK_MONOTONIC */
uint64_t ckpt__wall_ns(void);     /* CLOCK_REALTIME */

/* ---- names ---- */
/* 0 if job is a valid job id, else -CKPT_ENAME. */
int ckpt__job_valid(const char *job);
/* 0 if name (len bytes) is a valid region name, else -CKPT_ENAME. */
int ckpt__region_name_valid(const char *name, size_t len);
/* What a writer may name a region (docs/format.md, section 4.2): a valid
 * name that is also well-formed UTF-8 without control characters (C0, DEL,
 * C1). Readers accept any valid name and escape it on output. 0 or
 * -CKPT_ENAME. */
int ckpt__region_name_writable(const char *name, size_t len);
/* Decodes one UTF-8 sequence at s (n bytes left): its length, with the code
 * point in *cp, or 0 when the bytes there are not well-formed UTF-8
 * (overlong, surrogate, truncated, above U+10FFFF). */
size_t ckpt__utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* ---- config files ---- */
/* Splits one "name = value  # comment" line in place. Returns 1 and sets
 * *key and *val (both trimmed, NUL-terminated inside line) for a setting,
 * 0 for a blank or comment line, -1 when there is no '='. */
int ckpt__kv_split(char *line, char **key, char **val);

/* ---- files ---- */
int ckpt__mkdir_p(const char *path, int mode);
int ckpt__fsync_dir(const char *path);
int ckpt__fsync_parent(const char *path);
/* Full pread/pwrite loops; return 0 or -errno (-EIO on short read at EOF). */
int ckpt__pread_full(int fd, void *buf, size_t len, uint64_t off);
int ckpt__pwrite_full(int fd, const void *buf, size_t len, uint64_t off);

/* Path layout inside a root: jobs/<job>/v<version:020>/r<rank:06>.ckpt */
int ckpt__version_dir(char *out, size_t cap, const char *root, const char *job, uint64_t version);
int ckpt__shard_path(char *out, size_t cap, const char *root, const char *job, uint64_t version,
                     uint32_t rank);

#endif
