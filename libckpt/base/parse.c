/* Setting values: sizes, durations, restore orders. */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"

int ckpt__parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	uint64_t mul = 1;
	while (*end == ' ')
		end++;
	switch (toupper((unsigned char)*end)) {
	case 0: break;
	case 'K': mul = 1ull << 10; end++; break;
	case 'M': mul = 1ull << 20; end++; break;
	case 'G': mul = 1ull << 30; end++; break;
	case 'T': mul = 1ull << 40; end++; break;
	default: return -EINVAL;
	}
	if (mul > 1) {
		if (!strcasecmp(end, "iB") || !strcasecmp(end, "B"))
			end += strlen(end);
	} else if (!strcasecmp(end, "B"))
		end++;
	if (*end || v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

int ckpt__parse_order(const char *s, uint32_t order[4])
{
	static const struct { const char *n; uint32_t bit; } names[] = {
		{ "local_mem", CKPT_TIER_LOCAL_MEM }, { "peer_mem", CKPT_TIER_PEER_MEM },
		{ "local_disk", CKPT_TIER_LOCAL_DISK }, { "shared", CKPT_TIER_SHARED },
	};
	char buf[128];
	int n = 0;
	uint32_t seen = 0;
	if (!s || strlen(s) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		size_t i;
		for (i = 0; i < CKPT_ARRAY_LEN(names); i++)
			if (!strcasecmp(t, names[i].n))
				break;
		if (i == CKPT_ARRAY_LEN(names) || (seen & names[i].bit))
			return -1; /* unknown or repeated */
		seen |= names[i].bit;
		order[n++] = names[i].bit;
	}
	for (int i = n; i < 4; i++)
		order[i] = 0;
	return n ? n : -1;
}

int ckpt__parse_duration_ms(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	uint64_t mul;
	if (!*end || !strcmp(end, "s"))
		mul = 1000;
	else if (!strcmp(end, "ms"))
		mul = 1;
	else if (!strcmp(end, "m"))
		mul = 60000;
	else if (!strcmp(end, "h"))
		mul = 3600000;
	else
		return -EINVAL;
	/* A day is plenty; a bound keeps deadline arithmetic far from overflow. */
	if (v > 86400000ull / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}
