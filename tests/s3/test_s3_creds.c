/* Where the S3 client takes its credentials from, each proven by a
 * request the shared gateway accepts: the environment; AWS_PROFILE with
 * ~/.aws/credentials and ~/.aws/config under a HOME of the test's own,
 * and AWS_SHARED_CREDENTIALS_FILE; the instance metadata service (IMDSv2)
 * of tests/notice/fake_metadata.py on loopback, handing out the gateway's
 * keys: a token first, credentials refreshed before they expire, a
 * revoked token replaced. And the refusals: a profile that is nowhere, one
 * of a kind this client does not take, no role, no credentials at all. */
#include "ckpt.h"
#include "s3gw_helper.h"
#include "s3.h"

static s3gw g;
static char bucket[64];
static char imds[64];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	T_ASSERT(f);
	fputs(text, f);
	fclose(f);
}

static int try_open(ckpt_s3 **s3, const char *profile, const char *region, const char *imds_ep, char *err,
                    size_t cap)
{
	ckpt_s3_cfg cfg = { 0 };
	cfg.size = sizeof(cfg);
	cfg.endpoint = g.endpoint;
	cfg.region = region;
	cfg.profile = profile;
	cfg.imds_endpoint = imds_ep;
	cfg.no_imds = imds_ep == NULL;
	return ckpt_s3_open(s3, &cfg, err, cap);
}

/* Opens with these settings and PUTs one object: 0 or the failure. */
static int put_with(const char *profile, const char *region, const char *imds_ep, char *err, size_t cap)
{
	ckpt_s3 *s3 = NULL;
	int rc = try_open(&s3, profile, region, imds_ep, err, cap);
	if (rc < 0)
		return rc;
	rc = ckpt_s3_put(s3, bucket, "creds/k", "v", 1, 0, err, cap);
	ckpt_s3_close(s3);
	return rc;
}

static void no_secret(const char *msg)
{
	T_ASSERT(!strstr(msg, g.secret) && !strstr(msg, g.access) && !strstr(msg, "WRONGSECRET") &&
	         !strstr(msg, "role+token"));
}

/* --- the fake metadata service --- */

static pid_t imds_pid;

static void imds_start(void)
{
	char py[600];
	const char *d = getenv("CKPT_TEST_DATA");
	snprintf(py, sizeof(py), "%s/notice/fake_metadata.py", d && *d ? d : "tests");
	int fds[2];
	T_ASSERT(pipe(fds) == 0);
	fflush(NULL);
	pid_t parent = getpid();
	imds_pid = fork();
	T_ASSERT(imds_pid >= 0);
	if (imds_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execlp("python3", "python3", py, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char line[32] = "";
	size_t n = 0;
	while (n + 1 < sizeof(line)) {
		ssize_t k = read(fds[0], line + n, 1);
		if (k <= 0 || line[n] == '\n')
			break;
		n++;
	}
	line[n] = 0;
	close(fds[0]);
	int port = atoi(line);
	if (port <= 0)
		T_FAIL("fake_metadata.py did not say its port");
	snprintf(imds, sizeof(imds), "http://127.0.0.1:%d", port);
}

static void imds_stop(void)
{
	if (imds_pid > 0) {
		kill(imds_pid, SIGTERM);
		waitpid(imds_pid, NULL, 0);
		imds_pid = 0;
	}
}

/* POST /_control with json (or GET it: json NULL); the answer. */
static char *imds_ctl(const char *json)
{
	CURL *c = curl_easy_init();
	T_ASSERT(c);
	char url[128];
	snprintf(url, sizeof(url), "%s/_control", imds);
	s3gw_buf out = { 0 };
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, s3gw_write_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	if (json)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	long code = 0;
	T_ASSERT(curl_easy_perform(c) == CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (code != 200)
		T_FAIL("fake_metadata /_control %s: %ld %s", json ? json : "", code, out.data ? out.data : "");
	return out.data;
}

/* Requests to path answered so far (the stats' "requests" by path). */
static int imds_count(const char *path)
{
	char *s = imds_ctl(NULL), pat[200];
	snprintf(pat, sizeof(pat), "\"%s\": ", path);
	const char *stats = strstr(s, "\"stats\"");
	const char *p = stats ? strstr(stats, pat) : NULL;
	int n = p ? atoi(p + strlen(pat)) : 0;
	free(s);
	return n;
}

#define TOKEN "/latest/api/token"
#define ROLES "/latest/meta-data/iam/security-credentials/"
#define ROLE ROLES "ckpt-test-role"

static void imds_creds(const char *access, const char *secret, int ttl)
{
	char json[600];
	snprintf(json, sizeof(json),
	         "{\"aws_role\": \"ckpt-test-role\", \"aws_creds\": {\"AccessKeyId\": \"%s\", \"SecretAccessKey\": \"%s\","
	         " \"Token\": \"IQoJb3JpZ2luX2VjEXAMPLE/role+token==\"},"
	         " \"aws_creds_ttl\": %d}", access, secret, ttl);
	free(imds_ctl(json));
}

int main(void)
{
	char *tmp = t_tmpdir("s3creds");
	s3gw_open(&g, tmp);
	s3gw_new_bucket(&g, "creds", bucket, sizeof(bucket));
	char err[512], path[700], home[600], text[1200];
	const char *reg = g.region[0] ? g.region : "us-east-1";

	/* the environment */
	setenv("AWS_ACCESS_KEY_ID", g.access, 1);
	setenv("AWS_SECRET_ACCESS_KEY", g.secret, 1);
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("AWS_PROFILE");
	unsetenv("AWS_SHARED_CREDENTIALS_FILE");
	unsetenv("AWS_CONFIG_FILE");
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	unsetenv("AWS_EC2_METADATA_DISABLED");
	snprintf(home, sizeof(home), "%s/home", tmp);
	snprintf(path, sizeof(path), "%s/.aws", home);
	T_ASSERT(mkdir(home, 0700) == 0 && mkdir(path, 0700) == 0);
	setenv("HOME", home, 1);
	T_OK(put_with(NULL, reg, NULL, err, sizeof(err)));
	/* A session token is signed and sent (x-amz-security-token); this
	 * gateway, without STS, checks the signature over it and ignores it. */
	setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLE+session/token==", 1);
	T_OK(put_with(NULL, reg, NULL, err, sizeof(err)));
	unsetenv("AWS_SESSION_TOKEN");
	setenv("AWS_ACCESS_KEY_ID", g.access, 1);
	unsetenv("AWS_SECRET_ACCESS_KEY");
	T_ASSERT(put_with(NULL, reg, NULL, err, sizeof(err)) == -EACCES && strstr(err, "AWS_SECRET_ACCESS_KEY is not"));
	unsetenv("AWS_ACCESS_KEY_ID");
	printf("ok: the environment\n");

	/* nothing anywhere: the message says where it looked */
	T_ASSERT(put_with(NULL, reg, NULL, err, sizeof(err)) == -EACCES);
	T_ASSERT(strstr(err, "no S3 credentials") && strstr(err, "AWS_ACCESS_KEY_ID") && strstr(err, "profile default") &&
	         strstr(err, ".aws/credentials") && strstr(err, ".aws/config"));
	printf("ok: none: %s\n", err);

	/* profiles in ~/.aws */
	snprintf(path, sizeof(path), "%s/.aws/credentials", home);
	snprintf(text, sizeof(text),
	         "[default]\naws_access_key_id = NOSUCHKEYID0123456789\naws_secret_access_key = WRONGSECRET\n\n"
	         "[work]\naws_access_key_id = %s\naws_secret_access_key = %s\n\n[assumed]\nrole_arn = arn:aws:iam::1:role/x\n",
	         g.access, g.secret);
	write_file(path, text);
	snprintf(path, sizeof(path), "%s/.aws/config", home);
	snprintf(text, sizeof(text),
	         "[default]\nregion = %s\n[profile cfgonly]\nregion = %s\naws_access_key_id = %s\n"
	         "aws_secret_access_key = %s\n", reg, reg, g.access, g.secret);
	write_file(path, text);
	T_ASSERT(put_with(NULL, NULL, NULL, err, sizeof(err)) == -EACCES);
	T_ASSERT(strstr(err, "InvalidAccessKeyId") && strstr(err, "profile default"));
	no_secret(err);
	setenv("AWS_PROFILE", "work", 1);
	T_OK(put_with(NULL, NULL, NULL, err, sizeof(err)));
	unsetenv("AWS_PROFILE");
	T_OK(put_with("work", NULL, NULL, err, sizeof(err)));
	T_OK(put_with("cfgonly", NULL, NULL, err, sizeof(err)));
	T_ASSERT(put_with("nowhere", NULL, NULL, err, sizeof(err)) == -EACCES);
	T_ASSERT(strstr(err, "profile nowhere") && strstr(err, "neither"));
	T_ASSERT(put_with("assumed", NULL, NULL, err, sizeof(err)) == -EACCES && strstr(err, "role_arn"));
	/* another credentials file */
	snprintf(path, sizeof(path), "%s/other-credentials", tmp);
	snprintf(text, sizeof(text), "[default]\naws_access_key_id=%s\naws_secret_access_key=%s\n", g.access, g.secret);
	write_file(path, text);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	T_OK(put_with(NULL, NULL, NULL, err, sizeof(err)));
	unsetenv("AWS_SHARED_CREDENTIALS_FILE");
	printf("ok: profiles: AWS_PROFILE, the config file's, AWS_SHARED_CREDENTIALS_FILE\n");

	/* the instance metadata service: no profile files now */
	snprintf(path, sizeof(path), "%s/.aws/credentials", home);
	unlink(path);
	snprintf(path, sizeof(path), "%s/.aws/config", home);
	unlink(path);
	imds_start();
	T_ASSERT(put_with(NULL, reg, imds, err, sizeof(err)) == -EACCES && strstr(err, "no IAM role"));
	imds_creds(g.access, g.secret, 302); /* in the 5 minutes before expiry 2 s from now */
	ckpt_s3 *s3 = NULL;
	int tok0 = imds_count(TOKEN), roles0 = imds_count(ROLES);
	T_OK(try_open(&s3, NULL, reg, imds, err, sizeof(err)));
	T_ASSERT(imds_count(TOKEN) == tok0 + 1 && imds_count(ROLES) == roles0 + 1 && imds_count(ROLE) == 1);
	T_OK(ckpt_s3_put(s3, bucket, "creds/imds", "v", 1, 0, err, sizeof(err)));
	T_ASSERT(imds_count(ROLE) == 1);
	usleep(2100 * 1000);
	T_OK(ckpt_s3_put(s3, bucket, "creds/imds", "v", 1, 0, err, sizeof(err)));
	T_ASSERT(imds_count(ROLE) == 2 && imds_count(TOKEN) == tok0 + 1); /* refreshed with the same token */
	/* a revoked token: a new one, then the credentials */
	free(imds_ctl("{\"revoke_tokens\": true}"));
	usleep(2100 * 1000);
	T_OK(ckpt_s3_put(s3, bucket, "creds/imds", "v", 1, 0, err, sizeof(err)));
	T_ASSERT(imds_count(TOKEN) == tok0 + 2 && imds_count(ROLE) == 3);
	/* credentials that no longer hold: refused, saying where they came from */
	imds_creds("NOSUCHKEYID0123456789", "WRONGSECRET", 302);
	usleep(2100 * 1000);
	T_ASSERT(ckpt_s3_put(s3, bucket, "creds/imds", "v", 1, 0, err, sizeof(err)) == -EACCES);
	T_ASSERT(strstr(err, "InvalidAccessKeyId") && strstr(err, "instance metadata service"));
	no_secret(err);
	ckpt_s3_close(s3);
	/* long-lived ones are not fetched again */
	imds_creds(g.access, g.secret, 3600);
	T_OK(try_open(&s3, NULL, reg, imds, err, sizeof(err)));
	int before = imds_count(ROLE);
	T_OK(ckpt_s3_put(s3, bucket, "creds/imds", "v", 1, 0, err, sizeof(err)));
	T_OK(ckpt_s3_put(s3, bucket, "creds/imds", "v", 1, 0, err, sizeof(err)));
	T_ASSERT(imds_count(ROLE) == before);
	ckpt_s3_close(s3);
	/* the service answers garbage: refused with a message */
	free(imds_ctl("{\"token_mode\": \"garbage\"}"));
	T_ASSERT(put_with(NULL, reg, imds, err, sizeof(err)) == -EACCES && strstr(err, "instance metadata service"));
	imds_stop();
	/* nothing listens there */
	T_ASSERT(put_with(NULL, reg, imds, err, sizeof(err)) == -EACCES && strstr(err, "instance metadata service"));
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	T_ASSERT(put_with(NULL, reg, imds, err, sizeof(err)) == -EACCES && strstr(err, "is off"));
	unsetenv("AWS_EC2_METADATA_DISABLED");
	printf("ok: the instance metadata service: token, credentials, refresh, revoked token, refusals\n");

	s3gw_close(&g);
	t_rmrf(tmp);
	printf("PASS\n");
	return 0;
}
