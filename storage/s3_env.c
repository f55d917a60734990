/* The S3 client's settings from the CKPT_S3_* environment, in one table
 * (name, default, meaning) from which ckpt_s3_cfg_env and the help lines
 * are made; and s3:// URLs. */
#include "s3_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum s3_env_type { E_URL, E_STR, E_ADDR, E_SIZE, E_COUNT, E_MS, E_BOOL };

typedef struct s3_env_entry {
	const char *env;
	enum s3_env_type type;
	size_t offset;
	const char *def;
	const char *help;
} s3_env_entry;

#define F(field) offsetof(ckpt_s3_cfg, field)

static const s3_env_entry table[] = {
	{ "CKPT_S3_ENDPOINT", E_URL, F(endpoint), "-", "S3 endpoint, http(s)://host[:port] (unset: https://s3.REGION.amazonaws.com)" },
	{ "CKPT_S3_REGION", E_STR, F(region), "-", "S3 region signed for (unset: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1)" },
	{ "CKPT_S3_ADDRESSING", E_ADDR, F(addressing), "auto", "auto, path (https://host/BUCKET/KEY) or virtual (https://BUCKET.host/KEY); auto: virtual on AWS, path elsewhere" },
	{ "CKPT_S3_PART_BYTES", E_SIZE, F(part_bytes), "64M", "multipart upload part size (K, M, G suffixes; S3 wants 5M at least; 64K..5G)" },
	{ "CKPT_S3_PARTS_IN_FLIGHT", E_COUNT, F(parts_in_flight), "8", "parts (and ranged GETs) of one object in flight at once; an upload holds this many part buffers (1..256)" },
	{ "CKPT_S3_TIMEOUT", E_MS, F(timeout_ms), "30s", "an S3 request with no progress this long is retried (ms, s, m suffixes)" },
	{ "CKPT_S3_RETRY_TOTAL", E_MS, F(retry_total_ms), "2m", "how long one S3 request is retried (5xx, SlowDown, timeouts, reset connections) before it fails" },
	{ "CKPT_S3_CONTENT_MD5", E_BOOL, F(content_md5), "off", "on: each part also carries its Content-MD5 (about 1.5 s of CPU a GiB); off: the signed SHA-256 payload hash alone, which S3 and Ceph check on every part (a damaged one is refused and sent again)" },
};

#define NENTRIES (sizeof(table) / sizeof(table[0]))

/* "64M", "1G", "4096" -> bytes. */
static int parse_size(const char *s, uint64_t *out)
{
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	uint64_t mul = 1;
	switch (toupper((unsigned char)*end)) {
	case 0: break;
	case 'K': mul = 1ull << 10; end++; break;
	case 'M': mul = 1ull << 20; end++; break;
	case 'G': mul = 1ull << 30; end++; break;
	default: return -EINVAL;
	}
	if (mul > 1 && (!strcasecmp(end, "iB") || !strcasecmp(end, "B")))
		end += strlen(end);
	if (errno || *end || v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

/* "500ms", "30s", "2m", "30" (seconds) -> milliseconds. */
static int parse_ms(const char *s, uint64_t *out)
{
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	uint64_t mul = 1000;
	if (!strcmp(end, "ms"))
		mul = 1;
	else if (!strcmp(end, "m"))
		mul = 60000;
	else if (*end && strcmp(end, "s"))
		return -EINVAL;
	if (errno || v > UINT32_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

static int set_one(ckpt_s3_cfg *cfg, const s3_env_entry *e, const char *v, const char **want)
{
	char *base = (char *)cfg + e->offset;
	uint64_t u;
	switch (e->type) {
	case E_URL:
		*want = "an http:// or https:// URL";
		if (strlen(v) > 1000 || (strncmp(v, "http://", 7) && strncmp(v, "https://", 8)))
			return -EINVAL;
		for (const char *p = v; *p; p++)
			if ((unsigned char)*p <= ' ' || *p == 0x7f)
				return -EINVAL;
		*(const char **)base = v;
		return 0;
	case E_STR:
		*want = "letters, digits and '-' (at most 64)";
		if (strlen(v) > 64)
			return -EINVAL;
		for (const char *p = v; *p; p++)
			if (!isalnum((unsigned char)*p) && *p != '-')
				return -EINVAL;
		*(const char **)base = v;
		return 0;
	case E_ADDR:
		*want = "auto, path or virtual";
		if (!strcmp(v, "auto"))
			*(int *)base = 0;
		else if (!strcmp(v, "path"))
			*(int *)base = 1;
		else if (!strcmp(v, "virtual"))
			*(int *)base = 2;
		else
			return -EINVAL;
		return 0;
	case E_SIZE:
		*want = "a size from 64K to 5G (K, M, G suffixes)";
		if (parse_size(v, &u) < 0 || u < (64u << 10) || u > (5ull << 30))
			return -EINVAL;
		*(uint64_t *)base = u;
		return 0;
	case E_COUNT:
		*want = "a count from 1 to 256";
		if (parse_size(v, &u) < 0 || u < 1 || u > 256)
			return -EINVAL;
		*(uint32_t *)base = (uint32_t)u;
		return 0;
	case E_BOOL:
		*want = "on or off";
		if (!strcmp(v, "on") || !strcmp(v, "1"))
			*(int *)base = 1;
		else if (!strcmp(v, "off") || !strcmp(v, "0"))
			*(int *)base = 0;
		else
			return -EINVAL;
		return 0;
	case E_MS:
		*want = "a duration from 1ms (ms, s, m suffixes; no suffix: seconds)";
		if (parse_ms(v, &u) < 0 || u == 0)
			return -EINVAL;
		*(uint32_t *)base = (uint32_t)u;
		return 0;
	}
	return -EINVAL;
}

int ckpt_s3_cfg_env(ckpt_s3_cfg *cfg, char *err, size_t errcap)
{
	if (!cfg) {
		s3__errf(err, errcap, "no settings");
		return -EINVAL;
	}
	if (!cfg->size)
		cfg->size = sizeof(*cfg);
	for (size_t i = 0; i < NENTRIES; i++) {
		const char *v = getenv(table[i].env);
		if (!v || !*v)
			continue;
		const char *want = "";
		if (set_one(cfg, &table[i], v, &want) < 0) {
			s3__errf(err, errcap, "%s: wants %s", table[i].env, want);
			return -EINVAL;
		}
	}
	return 0;
}

void ckpt_s3_env_help(FILE *out)
{
	for (size_t i = 0; i < NENTRIES; i++)
		fprintf(out, "  %-22s %-24s %-8s %s\n", "", table[i].env, table[i].def, table[i].help);
}

/* S3's bucket naming rules: 3-63 of a-z 0-9 . -, a letter or digit at
 * each end, no "..", not an IP address. */
static int bucket_ok(const char *b, size_t n)
{
	if (n < 3 || n > 63)
		return 0;
	if (!isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
		return 0;
	int dots = 0, digits_only = 1;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'))
			return 0;
		if (c == '.') {
			dots++;
			if (i + 1 < n && (b[i + 1] == '.' || b[i + 1] == '-'))
				return 0;
			if (i > 0 && b[i - 1] == '-')
				return 0;
		} else if (!isdigit((unsigned char)c))
			digits_only = 0;
	}
	return !(dots == 3 && digits_only);
}

int ckpt_s3_url_parse(const char *url, char *bucket, size_t bcap, char *prefix, size_t pcap)
{
	if (!url || strncmp(url, "s3://", 5) || !bucket || !prefix || !bcap || !pcap)
		return -EINVAL;
	const char *b = url + 5;
	size_t bn = strcspn(b, "/");
	if (!bucket_ok(b, bn) || bn >= bcap)
		return -EINVAL;
	const char *p = b + bn;
	if (*p == '/')
		p++;
	size_t pn = strlen(p);
	if (pn > 900 || pn + 2 > pcap)
		return -EINVAL;
	for (size_t i = 0; i < pn; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c < 0x20 || c == 0x7f || c == '\\')
			return -EINVAL;
		if (c == '/' && i + 1 < pn && p[i + 1] == '/')
			return -EINVAL;
	}
	if (pn && p[0] == '/')
		return -EINVAL;
	/* No "." or ".." component: keys are joined to it, and tools that map
	 * keys to paths must never climb out. */
	for (const char *c = p; *c;) {
		size_t cn = strcspn(c, "/");
		if ((cn == 1 && c[0] == '.') || (cn == 2 && c[0] == '.' && c[1] == '.'))
			return -EINVAL;
		c += cn;
		if (*c == '/')
			c++;
	}
	memcpy(bucket, b, bn);
	bucket[bn] = 0;
	memcpy(prefix, p, pn);
	prefix[pn] = 0;
	if (pn && prefix[pn - 1] != '/') {
		prefix[pn] = '/';
		prefix[pn + 1] = 0;
	}
	return 0;
}
