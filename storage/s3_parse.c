/* Parsers of what the S3 client reads from outside: the AWS credentials
 * and config files (INI) and the instance metadata service's credentials
 * (JSON, by jansson). Bounded by their inputs' lengths; never a value of
 * theirs in a message. tests/fuzz/fuzz_s3_config.c fuzzes them. */
#include "s3_int.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* [start, end) without the spaces around it. */
static void trim(const char **s, const char **e)
{
	while (*s < *e && isspace((unsigned char)**s))
		(*s)++;
	while (*e > *s && isspace((unsigned char)(*e)[-1]))
		(*e)--;
}

static int eq(const char *s, const char *e, const char *want)
{
	size_t n = strlen(want);
	return (size_t)(e - s) == n && !memcmp(s, want, n);
}

int s3__ini_get(const char *text, size_t len, const char *section, const char *key, char *out, size_t cap,
                int *section_seen)
{
	const char *p = text, *end = text + len;
	int in = 0, found = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *s = p, *e = le;
		int indented = s < e && (*s == ' ' || *s == '\t');
		p = nl ? nl + 1 : end;
		trim(&s, &e);
		if (s == e || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			if (e[-1] != ']') {
				in = 0;
				continue;
			}
			const char *ns = s + 1, *ne = e - 1;
			trim(&ns, &ne);
			/* "[profile  name]": the word and the name, spaces between. */
			in = eq(ns, ne, section);
			if (!in && !strncmp(section, "profile ", 8) && ne - ns > 8 && !memcmp(ns, "profile", 7) &&
			    isspace((unsigned char)ns[7])) {
				const char *q = ns + 7;
				while (q < ne && isspace((unsigned char)*q))
					q++;
				in = eq(q, ne, section + 8);
			}
			if (in && section_seen)
				*section_seen = 1;
			continue;
		}
		/* Indented lines continue a nested block ("s3 =" and its keys). */
		if (!in || indented)
			continue;
		const char *eqs = memchr(s, '=', (size_t)(e - s));
		if (!eqs)
			continue;
		const char *ks = s, *ke = eqs, *vs = eqs + 1, *ve = e;
		trim(&ks, &ke);
		trim(&vs, &ve);
		if (!eq(ks, ke, key))
			continue;
		/* The last one wins, as in the AWS tools. */
		size_t n = (size_t)(ve - vs);
		if (n >= cap)
			return -1;
		/* A NUL or control byte would cut or bend the value: refused. */
		for (const char *c = vs; c < ve; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				return -1;
		memcpy(out, vs, n);
		out[n] = 0;
		found = 1;
	}
	return found;
}

int64_t s3__rfc3339(const char *s)
{
	int Y, M, D, h, m, sec, used = 0;
	if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &Y, &M, &D, &h, &m, &sec, &used) != 6)
		return -1;
	const char *z = s + used;
	if (*z == '.') /* fractions of a second */
		for (z++; isdigit((unsigned char)*z); z++)
			;
	if (strcmp(z, "Z") && strcmp(z, "+00:00"))
		return -1;
	if (Y < 1970 || Y > 9999 || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60 || h < 0 ||
	    m < 0 || sec < 0)
		return -1;
	struct tm tm = { .tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = sec };
	return (int64_t)timegm(&tm);
}

static int jstr(json_t *o, const char *name, char *out, size_t cap)
{
	json_t *v = json_object_get(o, name);
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	if (!s || strlen(s) >= cap)
		return -1;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x21 || *c == 0x7f)
			return -1;
	snprintf(out, cap, "%s", s);
	return 0;
}

int s3__imds_parse(const char *json, size_t len, s3_creds *c, char *err, size_t errcap)
{
	json_error_t je;
	json_t *o = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	int rc = -EINVAL;
	if (!o || !json_is_object(o)) {
		s3__errf(err, errcap, "the instance metadata service's credentials are not a JSON object");
		goto out;
	}
	json_t *code = json_object_get(o, "Code");
	if (code && (!json_is_string(code) || strcmp(json_string_value(code), "Success"))) {
		s3__errf(err, errcap, "the instance metadata service's credentials say Code is not Success");
		goto out;
	}
	char exp[64] = "";
	if (jstr(o, "AccessKeyId", c->access, sizeof(c->access)) < 0 ||
	    jstr(o, "SecretAccessKey", c->secret, sizeof(c->secret)) < 0 || !c->access[0] || !c->secret[0]) {
		s3__errf(err, errcap, "the instance metadata service's credentials lack AccessKeyId or SecretAccessKey");
		goto out;
	}
	c->token[0] = 0;
	if (json_object_get(o, "Token") && jstr(o, "Token", c->token, sizeof(c->token)) < 0) {
		s3__errf(err, errcap, "the instance metadata service's Token is not a string of at most %zu bytes",
		         sizeof(c->token) - 1);
		goto out;
	}
	c->expires = 0;
	if (json_object_get(o, "Expiration")) {
		if (jstr(o, "Expiration", exp, sizeof(exp)) < 0 || (c->expires = s3__rfc3339(exp)) < 0) {
			s3__errf(err, errcap, "the instance metadata service's Expiration is not an RFC 3339 UTC time");
			c->expires = 0;
			goto out;
		}
	}
	rc = 0;
out:
	if (rc < 0) {
		memset(c->secret, 0, sizeof(c->secret));
		memset(c->token, 0, sizeof(c->token));
	}
	json_decref(o);
	return rc;
}
