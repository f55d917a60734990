#ifndef CKPT_BASE_PARSE_H
#define CKPT_BASE_PARSE_H
/* The one parser of each kind of setting value, for the library's settings
 * table, ckptd's and the ckpt tool's options. */
#include <stdint.h>

/* The restore order a context uses when its settings name none. */
#define CKPT__DEFAULT_RESTORE_ORDER "local_mem,local_disk,peer_mem,shared"

/* "4096", "64M", "64MB", "1GiB", "2 T" -> bytes (K, M, G, T are powers of
 * 1024). Returns 0, or -EINVAL for anything else (a sign, an unknown suffix,
 * trailing bytes, overflow). */
int ckpt__parse_size(const char *s, uint64_t *out);

/* "30" or "30s", "500ms", "2m", "1h" -> milliseconds, at most a day.
 * Returns 0 or -EINVAL. */
int ckpt__parse_duration_ms(const char *s, uint64_t *out);

/* A restore order ("local_mem,local_disk,peer_mem"): tier bits in order,
 * the rest 0. Returns how many, or -1 (empty, unknown or repeated tier). */
int ckpt__parse_order(const char *s, uint32_t order[4]);
#endif
