/* The three clouds' metadata services, one request at a time each:
 *   AWS    IMDSv2. PUT /latest/api/token (asking for a 6 h token), then
 *          GET /latest/meta-data/spot/instance-action with the token: 404 is
 *          no notice. The token is renewed a quarter of its life (at most
 *          5 min) before it ends, by the TTL the reply states, and at once
 *          when a GET is answered 401 (once; a second 401 waits a period).
 *   GCP    GET /computeMetadata/v1/instance/preempted, Metadata-Flavor: Google.
 *   Azure  GET /metadata/scheduledevents?api-version=2020-07-01, Metadata: true.
 * A notice is told apart from the one fired before by a key: AWS's action
 * and time, GCP's single state, Azure's EventId. */
#include "notice_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AWS_TTL_S 21600u           /* the longest IMDSv2 grants */
#define AWS_RENEW_MAX_S 300u        /* renew this long before the end at most */
#define AWS_TTL_ASK "X-aws-ec2-metadata-token-ttl-seconds: 21600"

typedef struct cloud_kind {
	int kind;
	const char *name;
	const char *path;
	const char *header;        /* NULL: AWS (its token) */
} cloud_kind;

static const cloud_kind kinds[] = {
	{ CKPTD_NOTICE_AWS, "aws", "/latest/meta-data/spot/instance-action", NULL },
	{ CKPTD_NOTICE_GCP, "gcp", "/computeMetadata/v1/instance/preempted", "Metadata-Flavor: Google" },
	{ CKPTD_NOTICE_AZURE, "azure", "/metadata/scheduledevents?api-version=2020-07-01", "Metadata: true" },
};

static const cloud_kind *kind_of(int kind)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (kinds[i].kind == kind)
			return &kinds[i];
	return NULL;
}

static char *join(const char *base, const char *path)
{
	size_t n = strlen(base) + strlen(path) + 1;
	char *s = malloc(n);
	if (s)
		snprintf(s, n, "%s%s", base, path);
	return s;
}

int nt_cloud_init(nt_cloud *c, int kind, char *base, size_t max_body)
{
	const cloud_kind *k = kind_of(kind);
	memset(c, 0, sizeof(*c));
	if (!k) {
		free(base);
		return -EINVAL;
	}
	c->st.kind = kind;
	c->st.name = k->name;
	c->url = join(base, k->path);
	if (kind == CKPTD_NOTICE_AWS)
		c->token_url = join(base, "/latest/api/token");
	free(base);
	if (!c->url || (kind == CKPTD_NOTICE_AWS && !c->token_url))
		return -ENOMEM;
	return nt_http_init(&c->http, max_body, c);
}

void nt_cloud_free(nt_cloud *c)
{
	nt_http_free(&c->http);
	free(c->url);
	free(c->token_url);
	memset(c, 0, sizeof(*c));
}

int nt_cloud_begin(nt_poller *p, nt_cloud *c, int timeout_ms, uint64_t now_ns)
{
	const cloud_kind *k = kind_of(c->st.kind);
	int rc;
	if (c->st.kind == CKPTD_NOTICE_AWS && (!c->token[0] || now_ns >= c->token_renew_ns)) {
		c->token[0] = 0;
		c->step = NT_TOKEN;
		rc = nt_http_prepare(&c->http, "PUT", c->token_url, AWS_TTL_ASK, NULL, timeout_ms);
	} else {
		char tok[sizeof(c->token) + 32];
		const char *h = k->header;
		if (!h) {
			snprintf(tok, sizeof(tok), "X-aws-ec2-metadata-token: %s", c->token);
			h = tok;
		}
		c->step = NT_GET;
		rc = nt_http_prepare(&c->http, "GET", c->url, h, NULL, timeout_ms);
	}
	if (rc < 0) {
		c->step = NT_IDLE;
		nt_failed(p, &c->st, "cannot prepare a request", NULL);
		nt_schedule(p, &c->st, now_ns);
		return 0;
	}
	return 1;
}

/* A token goes into a header: visible ASCII only, so that no reply can add
 * header lines of its own to our requests. */
static int token_take(nt_cloud *c, const nt_reply *r, uint64_t now_ns)
{
	size_t n = r->len;
	while (n && (r->body[n - 1] == '\n' || r->body[n - 1] == '\r' || r->body[n - 1] == ' '))
		n--;
	if (n == 0 || n >= sizeof(c->token))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (r->body[i] < 0x21 || r->body[i] > 0x7e)
			return -1;
	memcpy(c->token, r->body, n);
	c->token[n] = 0;
	uint64_t ttl = c->http.ttl_s && c->http.ttl_s <= AWS_TTL_S ? c->http.ttl_s : AWS_TTL_S;
	uint64_t early_ms = ttl * 1000 / 4 < AWS_RENEW_MAX_S * 1000 ? ttl * 1000 / 4 : AWS_RENEW_MAX_S * 1000;
	c->token_renew_ns = now_ns + (ttl * 1000 - early_ms) * 1000000ull;
	return 0;
}

static void status_failed(nt_poller *p, nt_cloud *c, const char *what, long status)
{
	char s[48];
	snprintf(s, sizeof(s), "HTTP %ld", status);
	nt_failed(p, &c->st, what, s);
}

/* The body of a 200 (or AWS's 404). */
static void answer(nt_poller *p, nt_cloud *c, const nt_reply *r, const char *vm_name)
{
	ckptd_notice_event ev;
	char err[128] = "", key[NT_KEY_MAX] = "";
	uint64_t now = ckpt__wall_ns();
	int rc;
	switch (c->st.kind) {
	case CKPTD_NOTICE_AWS:
		rc = ckptd_notice_parse_aws(r->body, r->len, now, &ev, err, sizeof(err));
		if (rc == 1)
			snprintf(key, sizeof(key), "%.100s %llu", ev.detail, (unsigned long long)ev.deadline_ns);
		break;
	case CKPTD_NOTICE_GCP:
		rc = ckptd_notice_parse_gcp(r->body, r->len, now, &ev, err, sizeof(err));
		snprintf(key, sizeof(key), "preempted");
		break;
	default:
		rc = nt_parse_azure(r->body, r->len, vm_name, now, &ev, key, sizeof(key), err, sizeof(err));
		break;
	}
	if (rc < 0) {
		nt_failed(p, &c->st, "malformed answer ignored", err);
		return;
	}
	nt_answered(p, &c->st);
	if (rc == 1)
		nt_notice(p, &c->st, &ev, key);
}

void nt_cloud_done(nt_poller *p, nt_cloud *c, int code, const char *vm_name, uint64_t now_ns)
{
	nt_reply r;
	int step = c->step;
	c->step = NT_IDLE;
	nt_http_reply(&c->http, code, &r);
	nt_schedule(p, &c->st, now_ns);
	if (r.code || r.too_big) {
		nt_failed(p, &c->st, step == NT_TOKEN ? "token request failed" : "request failed", nt_http_strerror(&r));
		return;
	}
	if (step == NT_TOKEN) {
		if (r.status != 200)
			status_failed(p, c, "token request refused", r.status);
		else if (token_take(c, &r, now_ns) < 0)
			nt_failed(p, &c->st, "token request answered with something that is not a token", NULL);
		else
			c->st.next_ns = now_ns; /* the GET, at once */
		return;
	}
	if (c->st.kind == CKPTD_NOTICE_AWS && r.status == 401) {
		c->token[0] = 0;
		if (!c->retried) {
			c->retried = 1;
			c->st.next_ns = now_ns; /* a new token, at once */
		} else {
			c->retried = 0;
			nt_failed(p, &c->st, "a new token refused too", "HTTP 401");
		}
		return;
	}
	c->retried = 0;
	if (c->st.kind == CKPTD_NOTICE_AWS && r.status == 404)
		nt_answered(p, &c->st);
	else if (r.status == 200)
		answer(p, c, &r, vm_name);
	else
		status_failed(p, c, "unexpected answer ignored", r.status);
}
