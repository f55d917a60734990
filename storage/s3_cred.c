/* Where the S3 client's credentials come from, in the order of the AWS
 * tools: the environment, the profile's files, the instance metadata
 * service (IMDSv2: a token first, then the role's credentials), whose
 * credentials are fetched again five minutes before they expire. Secrets
 * stay in s3->creds and in the copies requests sign with; no message
 * carries one. */
#include "s3_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REFRESH_BEFORE_S 300
#define IMDS_TOKEN_TTL_S 21600

/* A small file (credentials, config): its bytes, or NULL. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	struct stat st;
	char *buf = NULL;
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= (1 << 20) &&
	    (buf = malloc((size_t)st.st_size + 1))) {
		*len = fread(buf, 1, (size_t)st.st_size, f);
		buf[*len] = 0;
	}
	fclose(f);
	return buf;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static void home_file(const char *var, const char *rel, char *out, size_t cap)
{
	const char *v = env(var), *home = env("HOME");
	if (v)
		snprintf(out, cap, "%s", v);
	else
		snprintf(out, cap, "%s/.aws/%s", home ? home : "", rel);
}

/* ---- the instance metadata service -------------------------------------- */

typedef struct imds_buf {
	char data[8192];
	size_t len;
	int over;
} imds_buf;

static size_t imds_write(char *p, size_t sz, size_t n, void *ud)
{
	imds_buf *b = ud;
	size_t k = sz * n;
	if (k >= sizeof(b->data) - b->len) {
		b->over = 1;
		return 0;
	}
	memcpy(b->data + b->len, p, k);
	b->len += k;
	b->data[b->len] = 0;
	return k;
}

/* One request to the metadata service: the HTTP status, or -1 when no
 * answer came (why in err). */
static long imds_req(ckpt_s3 *s3, const char *method, const char *path, const char *hdr, imds_buf *out, char *err,
                     size_t errcap)
{
	CURL *c = curl_easy_init();
	if (!c) {
		s3__errf(err, errcap, "out of memory");
		return -1;
	}
	char url[600];
	snprintf(url, sizeof(url), "%s%s", s3->imds, path);
	struct curl_slist *h = hdr ? curl_slist_append(NULL, hdr) : NULL;
	out->len = 0;
	out->over = 0;
	out->data[0] = 0;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, imds_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	if (!strcmp(method, "PUT")) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
	}
	CURLcode rc = curl_easy_perform(c);
	long st = -1;
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	else
		s3__errf(err, errcap, "%s", out->over ? "its answer is too large" : curl_easy_strerror(rc));
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return st;
}

/* Fetches the role's credentials (a token first when ours is old). Under
 * s3->lock. */
static int imds_fetch(ckpt_s3 *s3, s3_creds *c, char *err, size_t errcap)
{
	imds_buf *b = calloc(1, sizeof(*b));
	char why[200] = "", hdr[320], role[256], path[400];
	int rc = -EACCES;
	if (!b) {
		s3__errf(err, errcap, "out of memory");
		return -ENOMEM;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		time_t now = time(NULL);
		if (!s3->imds_token[0] || s3->imds_token_until <= now + 60) {
			snprintf(hdr, sizeof(hdr), "X-aws-ec2-metadata-token-ttl-seconds: %d", IMDS_TOKEN_TTL_S);
			long st = imds_req(s3, "PUT", "/latest/api/token", hdr, b, why, sizeof(why));
			if (st != 200) {
				if (st > 0)
					snprintf(why, sizeof(why), "PUT /latest/api/token answered %ld", st);
				goto fail;
			}
			while (b->len && (b->data[b->len - 1] == '\n' || b->data[b->len - 1] == '\r'))
				b->data[--b->len] = 0;
			if (!b->len || b->len >= sizeof(s3->imds_token) || strpbrk(b->data, "\r\n")) {
				snprintf(why, sizeof(why), "its token is not one line of at most %zu bytes",
				         sizeof(s3->imds_token) - 1);
				goto fail;
			}
			memcpy(s3->imds_token, b->data, b->len + 1);
			s3->imds_token_until = now + IMDS_TOKEN_TTL_S;
		}
		snprintf(hdr, sizeof(hdr), "X-aws-ec2-metadata-token: %s", s3->imds_token);
		long st = imds_req(s3, "GET", "/latest/meta-data/iam/security-credentials/", hdr, b, why, sizeof(why));
		if (st == 401 && attempt == 0) { /* the token expired early: a new one */
			s3->imds_token[0] = 0;
			continue;
		}
		if (st == 404) {
			snprintf(why, sizeof(why), "this instance has no IAM role (404)");
			goto fail;
		}
		if (st != 200) {
			if (st > 0)
				snprintf(why, sizeof(why), "GET of the role's name answered %ld", st);
			goto fail;
		}
		size_t n = strcspn(b->data, "\r\n");
		if (!n || n >= sizeof(role)) {
			snprintf(why, sizeof(why), "no role name in its answer");
			goto fail;
		}
		memcpy(role, b->data, n);
		role[n] = 0;
		for (char *p = role; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			      strchr("+=,.@_-", *p))) {
				snprintf(why, sizeof(why), "the role's name has bytes no IAM name has");
				goto fail;
			}
		snprintf(path, sizeof(path), "/latest/meta-data/iam/security-credentials/%s", role);
		st = imds_req(s3, "GET", path, hdr, b, why, sizeof(why));
		if (st == 401 && attempt == 0) {
			s3->imds_token[0] = 0;
			continue;
		}
		if (st != 200) {
			if (st > 0)
				snprintf(why, sizeof(why), "GET of role %.60s's credentials answered %ld", role, st);
			goto fail;
		}
		if (s3__imds_parse(b->data, b->len, c, why, sizeof(why)) < 0)
			goto fail;
		snprintf(c->source, sizeof(c->source), "the instance metadata service (%.70s, role %.40s)", s3->imds, role);
		rc = 0;
		break;
	}
	if (rc < 0)
		snprintf(why, sizeof(why), "its token was refused twice (401)");
fail:
	if (rc < 0)
		s3__errf(err, errcap, "the instance metadata service at %s: %s", s3->imds, why);
	memset(b, 0, sizeof(*b));
	free(b);
	return rc;
}

/* ---- the order of the sources ------------------------------------------- */

/* The profile's keys (and region). 1 found, 0 not there, -errno. */
static int from_profile(ckpt_s3 *s3, s3_creds *c, int explicit_profile, char *err, size_t errcap)
{
	char cpath[512], fpath[512], section[200];
	home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials", cpath, sizeof(cpath));
	home_file("AWS_CONFIG_FILE", "config", fpath, sizeof(fpath));
	size_t clen = 0, flen = 0;
	char *ct = slurp(cpath, &clen), *ft = slurp(fpath, &flen);
	int seen = 0, rc = 0;
	int ha = 0, hs = 0, ht = 0;
	if (!strcmp(s3->profile, "default"))
		snprintf(section, sizeof(section), "default");
	else
		snprintf(section, sizeof(section), "profile %s", s3->profile);
	/* The credentials file first, then the config file's profile. */
	if (ct) {
		ha = s3__ini_get(ct, clen, s3->profile, "aws_access_key_id", c->access, sizeof(c->access), &seen) == 1;
		hs = s3__ini_get(ct, clen, s3->profile, "aws_secret_access_key", c->secret, sizeof(c->secret), &seen) == 1;
		ht = s3__ini_get(ct, clen, s3->profile, "aws_session_token", c->token, sizeof(c->token), &seen) == 1;
	}
	const char *where = cpath;
	if (ft && !(ha && hs)) {
		int fa = s3__ini_get(ft, flen, section, "aws_access_key_id", c->access, sizeof(c->access), &seen) == 1;
		int fs = s3__ini_get(ft, flen, section, "aws_secret_access_key", c->secret, sizeof(c->secret), &seen) == 1;
		if (fa && fs) {
			ha = hs = 1;
			ht = s3__ini_get(ft, flen, section, "aws_session_token", c->token, sizeof(c->token), &seen) == 1;
			where = fpath;
		}
	}
	if (ft && !s3->region[0]) {
		char reg[64];
		if (s3__ini_get(ft, flen, section, "region", reg, sizeof(reg), &seen) == 1)
			snprintf(s3->region, sizeof(s3->region), "%s", reg);
	}
	if (ha && hs && c->access[0] && c->secret[0]) {
		if (!ht)
			c->token[0] = 0;
		snprintf(c->source, sizeof(c->source), "profile %.40s in %.100s", s3->profile, where);
		rc = 1;
	} else if (ha != hs) {
		s3__errf(err, errcap, "profile %s in %s has %s but not %s", s3->profile, cpath,
		         ha ? "aws_access_key_id" : "aws_secret_access_key",
		         ha ? "aws_secret_access_key" : "aws_access_key_id");
		rc = -EACCES;
	} else if (seen) {
		char tmp[8];
		const char *kinds[] = { "role_arn", "credential_process", "sso_start_url", "sso_session", "web_identity_token_file" };
		for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && rc == 0; i++)
			if ((ct && s3__ini_get(ct, clen, s3->profile, kinds[i], tmp, sizeof(tmp), NULL) != 0) ||
			    (ft && s3__ini_get(ft, flen, section, kinds[i], tmp, sizeof(tmp), NULL) != 0)) {
				s3__errf(err, errcap,
				         "profile %s uses %s, which this client does not support (give it keys, or export "
				         "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", s3->profile, kinds[i]);
				rc = -EACCES;
			}
	} else if (explicit_profile) {
		s3__errf(err, errcap, "profile %s is in neither %s nor %s", s3->profile, cpath, fpath);
		rc = -EACCES;
	}
	if (ct)
		memset(ct, 0, clen);
	if (ft)
		memset(ft, 0, flen);
	free(ct);
	free(ft);
	if (rc <= 0) {
		memset(c, 0, sizeof(*c));
	}
	return rc;
}

int s3__creds_init(ckpt_s3 *s3, char *err, size_t errcap)
{
	s3_creds *c = &s3->creds;
	memset(c, 0, sizeof(*c));
	const char *ak = env("AWS_ACCESS_KEY_ID"), *sk = env("AWS_SECRET_ACCESS_KEY");
	int explicit_profile = s3->cfg.profile || env("AWS_PROFILE");
	snprintf(s3->profile, sizeof(s3->profile), "%s",
	         s3->cfg.profile ? s3->cfg.profile : env("AWS_PROFILE") ? env("AWS_PROFILE") : "default");
	if (ak && sk) {
		const char *tk = env("AWS_SESSION_TOKEN");
		if (strlen(ak) >= sizeof(c->access) || strlen(sk) >= sizeof(c->secret) ||
		    (tk && strlen(tk) >= sizeof(c->token))) {
			s3__errf(err, errcap, "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or AWS_SESSION_TOKEN is too long");
			return -EINVAL;
		}
		snprintf(c->access, sizeof(c->access), "%s", ak);
		snprintf(c->secret, sizeof(c->secret), "%s", sk);
		snprintf(c->token, sizeof(c->token), "%s", tk ? tk : "");
		snprintf(c->source, sizeof(c->source), "the environment (AWS_ACCESS_KEY_ID)");
		if (!s3->region[0]) { /* the profile's region still counts */
			s3_creds tmp;
			char e2[8];
			memset(&tmp, 0, sizeof(tmp));
			from_profile(s3, &tmp, 0, e2, sizeof(e2));
			memset(&tmp, 0, sizeof(tmp));
		}
		return 0;
	}
	if (ak || sk) {
		s3__errf(err, errcap, "%s is set but %s is not", ak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
		         ak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
		return -EACCES;
	}
	char perr[S3_ERRCAP] = "";
	int rc = from_profile(s3, c, explicit_profile, perr, sizeof(perr));
	if (rc < 0) {
		s3__errf(err, errcap, "%s", perr);
		return rc;
	}
	if (rc == 1)
		return 0;
	const char *off = env("AWS_EC2_METADATA_DISABLED");
	char cpath[512], fpath[512];
	home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials", cpath, sizeof(cpath));
	home_file("AWS_CONFIG_FILE", "config", fpath, sizeof(fpath));
	if (s3->cfg.no_imds || (off && !strcasecmp(off, "true"))) {
		s3__errf(err, errcap,
		         "no S3 credentials: none in the environment (AWS_ACCESS_KEY_ID), none for profile %s in %s or %s, "
		         "and the instance metadata service is off", s3->profile, cpath, fpath);
		return -EACCES;
	}
	char ierr[S3_ERRCAP] = "";
	rc = imds_fetch(s3, c, ierr, sizeof(ierr));
	if (rc < 0) {
		s3__errf(err, errcap,
		         "no S3 credentials: none in the environment (AWS_ACCESS_KEY_ID), none for profile %s in %s or %s; %s",
		         s3->profile, cpath, fpath, ierr);
		return -EACCES;
	}
	s3->imds_creds = 1;
	return 0;
}

int s3__creds_get(ckpt_s3 *s3, s3_creds *out, char *err, size_t errcap)
{
	pthread_mutex_lock(&s3->lock);
	int rc = 0;
	time_t now = time(NULL);
	s3_creds *c = &s3->creds;
	if (s3->imds_creds && c->expires && now >= c->expires - REFRESH_BEFORE_S) {
		s3_creds *fresh = calloc(1, sizeof(*fresh));
		char why[S3_ERRCAP] = "";
		int frc = fresh ? imds_fetch(s3, fresh, why, sizeof(why)) : -ENOMEM;
		if (frc == 0)
			*c = *fresh;
		else if (now >= c->expires) {
			s3__errf(err, errcap, "the S3 credentials expired and could not be refreshed: %s", why);
			rc = -EACCES;
		}
		if (fresh)
			memset(fresh, 0, sizeof(*fresh));
		free(fresh);
	}
	if (!rc)
		*out = *c;
	pthread_mutex_unlock(&s3->lock);
	return rc;
}

static void scrub_one(char *s, const char *secret)
{
	size_t n = strlen(secret);
	if (n < 4)
		return;
	for (char *p = strstr(s, secret); p; p = strstr(p, secret)) {
		memmove(p + 3, p + n, strlen(p + n) + 1);
		memcpy(p, "***", 3);
		p += 3;
	}
}

void s3__scrub(const s3_creds *c, char *err)
{
	scrub_one(err, c->secret);
	scrub_one(err, c->token);
	scrub_one(err, c->access);
}
