/* The two time formats the metadata services speak: RFC 3339 (AWS, the
 * trigger file) and RFC 1123 (Azure). The shape of each is checked here
 * character by character, so that strptime's leniency (spaces, short
 * numbers) lets nothing else through; both are then rewritten into one
 * numeric form that strptime reads and timegm turns into seconds. Month and
 * weekday names are matched here, not by strptime, whose %b follows the
 * locale. */
#include "notice_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* The latest second whose nanoseconds fit in uint64_t (in 2554). */
#define MAX_S (UINT64_MAX / NT_NS - 1)

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_digit(s[i]))
			return 0;
	return 1;
}

static int two(const char *s)
{
	return (s[0] - '0') * 10 + (s[1] - '0');
}

/* canon: "YYYY-MM-DD HH:MM:SS", digits already checked. */
static int civil(const char *canon, uint64_t *secs)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *end = strptime(canon, "%Y-%m-%d %H:%M:%S", &tm);
	if (!end || *end || tm.tm_year < 70 || tm.tm_sec > 60)
		return -1;
	/* A leap second is the last second of its minute plus one. */
	int leap = tm.tm_sec == 60;
	if (leap)
		tm.tm_sec = 59;
	int year = tm.tm_year, mon = tm.tm_mon, mday = tm.tm_mday;
	time_t t = timegm(&tm);
	/* timegm normalises: 30 February comes back as 2 March. */
	if (t < 0 || tm.tm_year != year || tm.tm_mon != mon || tm.tm_mday != mday)
		return -1;
	*secs = (uint64_t)t + (uint64_t)leap;
	return 0;
}

static int finish(uint64_t secs, int64_t offset_s, uint64_t frac_ns, uint64_t *ns)
{
	if (offset_s > 0 && secs < (uint64_t)offset_s)
		return -1;
	secs = offset_s > 0 ? secs - (uint64_t)offset_s : secs + (uint64_t)-offset_s;
	if (secs > MAX_S)
		return -1;
	*ns = secs * NT_NS + frac_ns;
	return 0;
}

int nt_time_rfc3339(const char *s, size_t len, uint64_t *ns)
{
	/* 2026-11-29T13:40:00[.fff][Z|+hh:mm] */
	if (len < 20 || len > 64)
		return -1;
	if (!digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' || !digits(s + 8, 2) ||
	    (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2) || s[13] != ':' || !digits(s + 14, 2) ||
	    s[16] != ':' || !digits(s + 17, 2))
		return -1;
	size_t i = 19;
	uint64_t frac = 0;
	if (s[i] == '.') {
		size_t from = ++i, n = 0;
		for (; i < len && is_digit(s[i]); i++)
			if (n < 9) {
				frac = frac * 10 + (uint64_t)(s[i] - '0');
				n++;
			}
		if (i == from)
			return -1;
		for (; n < 9; n++)
			frac *= 10;
	}
	int64_t off = 0;
	if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
		i++;
	} else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && digits(s + i + 1, 2) && s[i + 3] == ':' &&
	           digits(s + i + 4, 2)) {
		int hh = two(s + i + 1), mm = two(s + i + 4);
		if (hh > 23 || mm > 59)
			return -1;
		off = (int64_t)(hh * 3600 + mm * 60) * (s[i] == '-' ? -1 : 1);
		i += 6;
	} else {
		return -1;
	}
	if (i != len)
		return -1;
	char canon[20];
	memcpy(canon, s, 19);
	canon[10] = ' ';
	canon[19] = 0;
	uint64_t secs;
	if (civil(canon, &secs) < 0)
		return -1;
	/* local = UTC + offset */
	return finish(secs, off, frac, ns);
}

static int name_index(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strncasecmp(s, names[i], 3))
			return i;
	return -1;
}

int nt_time_rfc1123(const char *s, size_t len, uint64_t *ns)
{
	static const char *const days[] = { "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun" };
	static const char *const months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
	                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	/* Mon, 19 Sep 2016 18:29:47 GMT */
	if (len != 29 || s[3] != ',' || s[4] != ' ' || !digits(s + 5, 2) || s[7] != ' ' || s[11] != ' ' ||
	    !digits(s + 12, 4) || s[16] != ' ' || !digits(s + 17, 2) || s[19] != ':' || !digits(s + 20, 2) ||
	    s[22] != ':' || !digits(s + 23, 2) || memcmp(s + 25, " GMT", 4))
		return -1;
	int mon = name_index(s + 8, months, 12);
	if (name_index(s, days, 7) < 0 || mon < 0)
		return -1;
	char canon[20];
	memcpy(canon, s + 12, 4);
	canon[4] = '-';
	canon[5] = (char)('0' + (mon + 1) / 10);
	canon[6] = (char)('0' + (mon + 1) % 10);
	canon[7] = '-';
	memcpy(canon + 8, s + 5, 2);
	canon[10] = ' ';
	memcpy(canon + 11, s + 17, 8);
	canon[19] = 0;
	uint64_t secs;
	if (civil(canon, &secs) < 0)
		return -1;
	return finish(secs, 0, 0, ns);
}

void nt_time_format(uint64_t ns, char *buf, size_t cap)
{
	time_t t = (time_t)(ns / NT_NS);
	struct tm tm;
	if (!gmtime_r(&t, &tm)) {
		snprintf(buf, cap, "?");
		return;
	}
	snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec);
}
