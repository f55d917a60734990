/* Internal helpers shared by every part of libckpt and by ckptd: error
 * macros, alignment, little/big-endian codecs, clocks, names, files; and the
 * logger (log.h). */
#ifndef CKPT_COMMON_H
#define CKPT_COMMON_H

#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include "ckpt.h"
#include "log.h"

#define CKPT_ALIGN 4096u
#define CKPT_ALIGN_UP(x, a) (((x) + ((a) - 1)) / (a) * (a))
#define CKPT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CKPT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define CKPT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Forward an error; in debug builds say where it passed. */
#ifndef NDEBUG
void ckpt__trace_error(const char *file, int line, int err);
#define CKPT_TRY(expr) do { int ckpt__e = (expr); \
	if (ckpt__e < 0) { ckpt__trace_error(__FILE__, __LINE__, ckpt__e); return ckpt__e; } } while (0)
#else
#define CKPT_TRY(expr) do { int ckpt__e = (expr); if (ckpt__e < 0) return ckpt__e; } while (0)
#endif

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

/* ---- time: the clocks of every layer and of ckptd (through the vDSO: no
 * system call, so fit for ckpt_step's fast path) ---- */
static inline uint64_t ckpt__clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
/* CLOCK_MONOTONIC: durations, deadlines inside a process. */
static inline uint64_t ckpt__now_ns(void) { return ckpt__clock_ns(CLOCK_MONOTONIC); }
static inline uint64_t ckpt__now_ms(void) { return ckpt__now_ns() / 1000000u; }
/* CLOCK_REALTIME: deadlines that cross processes and nodes. */
static inline uint64_t ckpt__wall_ns(void) { return ckpt__clock_ns(CLOCK_REALTIME); }

/* ---- names ---- */
#define CKPT_JOB_MAX 64
/* Job ids and node names (they name directories): s holds len bytes, no NUL
 * needed; not empty, not starting with '.', only [A-Za-z0-9._-]. Returns
 * NULL, or why not. */
const char *ckpt__name_check(const char *s, size_t len);
/* 0 if job is a valid job id (a name of 1..CKPT_JOB_MAX bytes), else
 * -CKPT_ENAME. The one rule for the library, the protocol and ckptd. */
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
/* Writes a message into a caller's error buffer (buf may be NULL or cap 0:
 * nothing is written). For functions that explain a refusal in text. */
void ckpt__errf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

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
