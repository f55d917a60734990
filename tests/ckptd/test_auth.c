/* Handshake, frame sealing and secret loading: a correct handshake passes;
 * a wrong secret, no secret, a replayed or tampered handshake and a client
 * of another job are all refused; token files must be private. */
#include <sys/stat.h>

#include "wire/auth.h"
#include "helpers.h"
#include "wire/proto.h"

static const char SECRET_A[] = "job-A secret: 7f3c9a1e5b2d4c6e8a0b";
static const char SECRET_B[] = "job-B secret: 0d2e4f6a8c1b3d5e7f9a";

static ckptd_secret *secret(const char *s)
{
	ckptd_secret *k;
	char err[256];
	int r = ckptd_secret_parse((const uint8_t *)s, strlen(s), &k, err, sizeof(err));
	if (r)
		T_FAIL("secret: %s", err);
	return k;
}

/* What went over the wire in one handshake. */
typedef struct wire {
	uint8_t nc[CKPTD_NONCE_LEN], ns[CKPTD_NONCE_LEN];
	uint8_t client_mac[CKPTD_MAC_LEN], server_mac[CKPTD_MAC_LEN];
} wire;

/* Runs a handshake between a client (csec, role, cjob) and a server that
 * uses ssec for sjob. Returns 0 when both sides end authenticated, else the
 * first refusal. Keeps both objects when done != NULL. */
static int handshake(const ckptd_secret *csec, uint32_t role, const char *cjob, const ckptd_secret *ssec,
                     const char *sjob, wire *w, ckptd_auth **client_out, ckptd_auth **server_out)
{
	ckptd_auth *c, *s;
	wire dummy;
	if (!w)
		w = &dummy;
	T_OK(ckptd_auth_new(&c));
	T_OK(ckptd_auth_new(&s));
	int r = ckptd_auth_client_start(c, csec, role, cjob, w->nc);
	if (!r)
		r = ckptd_auth_server_start(s, ssec, CKPTD_PROTO_VERSION, role, sjob, w->nc, w->ns);
	if (!r)
		r = ckptd_auth_client_respond(c, CKPTD_PROTO_VERSION, w->ns, w->client_mac);
	if (!r)
		r = ckptd_auth_server_verify(s, w->client_mac, w->server_mac);
	if (!r)
		r = ckptd_auth_client_verify_server(c, w->server_mac);
	if (!r)
		T_ASSERT(ckptd_auth_done(c) && ckptd_auth_done(s));
	if (client_out && server_out && !r) {
		*client_out = c;
		*server_out = s;
	} else {
		ckptd_auth_free(c);
		ckptd_auth_free(s);
	}
	return r;
}

static void test_success(void)
{
	ckptd_secret *a = secret(SECRET_A);
	wire w1, w2;
	T_OK(handshake(a, CKPTD_ROLE_RANK, "jobA", a, "jobA", &w1, NULL, NULL));
	T_OK(handshake(a, CKPTD_ROLE_CLI, "jobA", a, "jobA", &w2, NULL, NULL));
	T_OK(handshake(a, CKPTD_ROLE_AGENT, "", a, NULL, NULL, NULL, NULL));
	T_OK(handshake(a, CKPTD_ROLE_CLI, NULL, a, "", NULL, NULL, NULL));
	/* Fresh nonces and proofs every time. */
	T_ASSERT(memcmp(w1.nc, w2.nc, sizeof(w1.nc)) && memcmp(w1.ns, w2.ns, sizeof(w1.ns)));
	T_ASSERT(memcmp(w1.client_mac, w1.server_mac, CKPTD_MAC_LEN));
	ckptd_secret_free(a);
}

static void test_refusals(void)
{
	ckptd_secret *a = secret(SECRET_A), *b = secret(SECRET_B);
	/* Wrong secret: the server refuses the client's proof. */
	T_ERR(handshake(b, CKPTD_ROLE_RANK, "jobA", a, "jobA", NULL, NULL, NULL), -EACCES);
	/* A server that does not know the secret is refused by the client:
	 * play the server with the wrong secret but accept any client proof. */
	{
		ckptd_auth *c, *s;
		wire w;
		uint8_t mac[CKPTD_MAC_LEN];
		T_OK(ckptd_auth_new(&c));
		T_OK(ckptd_auth_new(&s));
		T_OK(ckptd_auth_client_start(c, a, CKPTD_ROLE_RANK, "jobA", w.nc));
		T_OK(ckptd_auth_server_start(s, b, CKPTD_PROTO_VERSION, CKPTD_ROLE_RANK, "jobA", w.nc, w.ns));
		T_OK(ckptd_auth_client_respond(c, CKPTD_PROTO_VERSION, w.ns, w.client_mac));
		T_ERR(ckptd_auth_server_verify(s, w.client_mac, mac), -EACCES);
		memset(mac, 0, sizeof(mac));
		T_ERR(ckptd_auth_client_verify_server(c, mac), -EACCES);
		T_ASSERT(!ckptd_auth_done(c) && !ckptd_auth_done(s));
		/* Failed objects stay failed. */
		T_ERR(ckptd_auth_client_verify_server(c, mac), -EACCES);
		T_ERR(ckptd_auth_server_verify(s, w.client_mac, mac), -EACCES);
		ckptd_auth_free(c);
		ckptd_auth_free(s);
	}
	/* No secret on either side. */
	T_ERR(handshake(NULL, CKPTD_ROLE_RANK, "jobA", a, "jobA", NULL, NULL, NULL), -ENOKEY);
	T_ERR(handshake(a, CKPTD_ROLE_RANK, "jobA", NULL, "jobA", NULL, NULL, NULL), -ENOKEY);
	/* Cross-job: a client of job A with A's secret, against a server
	 * expecting job B (B's secret, B in its transcript). */
	T_ERR(handshake(a, CKPTD_ROLE_RANK, "jobA", b, "jobB", NULL, NULL, NULL), -EACCES);
	/* ... claiming to be job B with A's secret. */
	T_ERR(handshake(a, CKPTD_ROLE_RANK, "jobB", b, "jobB", NULL, NULL, NULL), -EACCES);
	/* ... the same secret, but the server's view of the job differs. */
	T_ERR(handshake(a, CKPTD_ROLE_RANK, "jobA", a, "jobB", NULL, NULL, NULL), -EACCES);
	/* Role is bound: the server sees another role than the client used. */
	{
		ckptd_auth *c, *s;
		wire w;
		T_OK(ckptd_auth_new(&c));
		T_OK(ckptd_auth_new(&s));
		T_OK(ckptd_auth_client_start(c, a, CKPTD_ROLE_RANK, "jobA", w.nc));
		T_OK(ckptd_auth_server_start(s, a, CKPTD_PROTO_VERSION, CKPTD_ROLE_CLI, "jobA", w.nc, w.ns));
		T_OK(ckptd_auth_client_respond(c, CKPTD_PROTO_VERSION, w.ns, w.client_mac));
		T_ERR(ckptd_auth_server_verify(s, w.client_mac, w.server_mac), -EACCES);
		ckptd_auth_free(c);
		ckptd_auth_free(s);
	}
	/* Scope rules. */
	ckptd_auth *x;
	uint8_t n[CKPTD_NONCE_LEN];
	T_OK(ckptd_auth_new(&x));
	T_ERR(ckptd_auth_client_start(x, a, CKPTD_ROLE_RANK, "", n), -EINVAL);
	T_ERR(ckptd_auth_client_start(x, a, CKPTD_ROLE_AGENT, "jobA", n), -EINVAL);
	T_ERR(ckptd_auth_client_start(x, a, 77, "jobA", n), -EINVAL);
	T_ERR(ckptd_auth_client_start(x, a, CKPTD_ROLE_RANK, "../etc", n), -CKPT_ENAME);
	T_OK(ckptd_auth_client_start(x, a, CKPTD_ROLE_RANK, "jobA", n));
	T_ERR(ckptd_auth_client_start(x, a, CKPTD_ROLE_RANK, "jobA", n), -CKPT_ESTATE);
	T_ERR(ckptd_auth_server_verify(x, n, n), -CKPT_ESTATE);
	ckptd_auth_free(x);
	/* Out of order on a server. */
	T_OK(ckptd_auth_new(&x));
	T_ERR(ckptd_auth_server_verify(x, n, n), -CKPT_ESTATE);
	T_ERR(ckptd_auth_client_respond(x, CKPTD_PROTO_VERSION, n, n), -CKPT_ESTATE);
	T_ERR(ckptd_auth_client_verify_server(x, n), -CKPT_ESTATE);
	ckptd_auth_free(x);
	ckptd_secret_free(a);
	ckptd_secret_free(b);
}

/* An attacker who recorded a whole handshake replays it. */
static void test_replay(void)
{
	ckptd_secret *a = secret(SECRET_A);
	wire old;
	T_OK(handshake(a, CKPTD_ROLE_RANK, "jobA", a, "jobA", &old, NULL, NULL));
	/* Against a server: the old HELLO gets a fresh challenge; the old AUTH
	 * does not answer it. */
	ckptd_auth *s, *c;
	uint8_t ns[CKPTD_NONCE_LEN], mac[CKPTD_MAC_LEN], cmac[CKPTD_MAC_LEN];
	T_OK(ckptd_auth_new(&s));
	T_OK(ckptd_auth_server_start(s, a, CKPTD_PROTO_VERSION, CKPTD_ROLE_RANK, "jobA", old.nc, ns));
	T_ASSERT(memcmp(ns, old.ns, sizeof(ns)));
	T_ERR(ckptd_auth_server_verify(s, old.client_mac, mac), -EACCES);
	ckptd_auth_free(s);
	/* Against a client: a fake server replays the old CHALLENGE and
	 * AUTH_OK; the client's fresh nonce makes the old proof worthless. */
	uint8_t nc[CKPTD_NONCE_LEN];
	T_OK(ckptd_auth_new(&c));
	T_OK(ckptd_auth_client_start(c, a, CKPTD_ROLE_RANK, "jobA", nc));
	T_OK(ckptd_auth_client_respond(c, CKPTD_PROTO_VERSION, old.ns, cmac));
	T_ASSERT(memcmp(cmac, old.client_mac, sizeof(cmac)));
	T_ERR(ckptd_auth_client_verify_server(c, old.server_mac), -EACCES);
	ckptd_auth_free(c);
	/* Reflection: the client's own proof sent back as the server's. */
	wire w;
	T_OK(ckptd_auth_new(&c));
	T_OK(ckptd_auth_new(&s));
	T_OK(ckptd_auth_client_start(c, a, CKPTD_ROLE_RANK, "jobA", w.nc));
	T_OK(ckptd_auth_server_start(s, a, CKPTD_PROTO_VERSION, CKPTD_ROLE_RANK, "jobA", w.nc, w.ns));
	T_OK(ckptd_auth_client_respond(c, CKPTD_PROTO_VERSION, w.ns, w.client_mac));
	T_ERR(ckptd_auth_client_verify_server(c, w.client_mac), -EACCES);
	ckptd_auth_free(c);
	ckptd_auth_free(s);
	ckptd_secret_free(a);
}

/* A man in the middle changes a nonce or a version on the way. */
static void test_tamper(void)
{
	ckptd_secret *a = secret(SECRET_A);
	for (int what = 0; what < 4; what++) {
		ckptd_auth *c, *s;
		wire w;
		uint8_t seen_nc[CKPTD_NONCE_LEN], seen_ns[CKPTD_NONCE_LEN];
		uint32_t cv = CKPTD_PROTO_VERSION, sv = CKPTD_PROTO_VERSION;
		T_OK(ckptd_auth_new(&c));
		T_OK(ckptd_auth_new(&s));
		T_OK(ckptd_auth_client_start(c, a, CKPTD_ROLE_RANK, "jobA", w.nc));
		memcpy(seen_nc, w.nc, sizeof(seen_nc));
		if (what == 0)
			seen_nc[CKPTD_NONCE_LEN - 1] ^= 0x80;
		if (what == 2)
			cv = CKPTD_VERSION_PACK(CKPTD_PROTO_MAJOR, CKPTD_PROTO_MINOR + 1); /* downgrade games */
		T_OK(ckptd_auth_server_start(s, a, cv, CKPTD_ROLE_RANK, "jobA", seen_nc, w.ns));
		memcpy(seen_ns, w.ns, sizeof(seen_ns));
		if (what == 1)
			seen_ns[0] ^= 1;
		if (what == 3)
			sv = CKPTD_VERSION_PACK(CKPTD_PROTO_MAJOR, CKPTD_PROTO_MINOR + 3);
		T_OK(ckptd_auth_client_respond(c, sv, seen_ns, w.client_mac));
		T_ERR(ckptd_auth_server_verify(s, w.client_mac, w.server_mac), -EACCES);
		ckptd_auth_free(c);
		ckptd_auth_free(s);
	}
	/* Tampered proofs, every bit. */
	for (int bit = 0; bit < CKPTD_MAC_LEN * 8; bit += 37) {
		ckptd_auth *c, *s;
		wire w;
		T_OK(ckptd_auth_new(&c));
		T_OK(ckptd_auth_new(&s));
		T_OK(ckptd_auth_client_start(c, a, CKPTD_ROLE_RANK, "jobA", w.nc));
		T_OK(ckptd_auth_server_start(s, a, CKPTD_PROTO_VERSION, CKPTD_ROLE_RANK, "jobA", w.nc, w.ns));
		T_OK(ckptd_auth_client_respond(c, CKPTD_PROTO_VERSION, w.ns, w.client_mac));
		uint8_t bad[CKPTD_MAC_LEN];
		memcpy(bad, w.client_mac, sizeof(bad));
		bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		T_ERR(ckptd_auth_server_verify(s, bad, w.server_mac), -EACCES);
		ckptd_auth_free(c);
		ckptd_auth_free(s);
	}
	/* Another major version is refused before any proof is made. */
	ckptd_auth *x;
	uint8_t n[CKPTD_NONCE_LEN] = { 0 }, ns[CKPTD_NONCE_LEN];
	T_OK(ckptd_auth_new(&x));
	T_ERR(ckptd_auth_server_start(x, a, CKPTD_VERSION_PACK(CKPTD_PROTO_MAJOR + 1, 0), CKPTD_ROLE_RANK, "jobA", n,
	                              ns), -CKPT_EFORMAT);
	ckptd_auth_free(x);
	T_OK(ckptd_auth_new(&x));
	T_OK(ckptd_auth_client_start(x, a, CKPTD_ROLE_RANK, "jobA", n));
	T_ERR(ckptd_auth_client_respond(x, CKPTD_VERSION_PACK(CKPTD_PROTO_MAJOR + 1, 0), n, ns), -CKPT_EFORMAT);
	ckptd_auth_free(x);
	ckptd_secret_free(a);
}

/* Job keys derived from a cluster secret: a job's key opens only that job. */
static void test_derived(void)
{
	ckptd_secret *cluster = secret("cluster token 0123456789abcdef");
	ckptd_secret *ka, *kb, *ka2;
	T_OK(ckptd_secret_derive_job(cluster, "jobA", &ka));
	T_OK(ckptd_secret_derive_job(cluster, "jobB", &kb));
	T_ERR(ckptd_secret_derive_job(cluster, "a/b", &ka2), -CKPT_ENAME);
	T_ASSERT(ka2 == NULL);
	T_OK(ckptd_secret_derive_job(cluster, "jobA", &ka2));
	T_OK(handshake(ka, CKPTD_ROLE_RANK, "jobA", ka2, "jobA", NULL, NULL, NULL));
	T_ERR(handshake(ka, CKPTD_ROLE_RANK, "jobB", kb, "jobB", NULL, NULL, NULL), -EACCES);
	T_ERR(handshake(cluster, CKPTD_ROLE_RANK, "jobA", ka, "jobA", NULL, NULL, NULL), -EACCES);
	T_OK(handshake(cluster, CKPTD_ROLE_AGENT, NULL, cluster, NULL, NULL, NULL, NULL));
	ckptd_secret_free(ka);
	ckptd_secret_free(ka2);
	ckptd_secret_free(kb);
	ckptd_secret_free(cluster);
	ckptd_secret_free(NULL);
}

/* Frames after the handshake are sealed: forged, replayed, reordered,
 * damaged or cross-direction frames are refused. */
static void test_seal(void)
{
	ckptd_secret *a = secret(SECRET_A);
	ckptd_auth *c, *s;
	T_OK(handshake(a, CKPTD_ROLE_RANK, "jobA", a, "jobA", NULL, &c, &s));
	T_ASSERT(ckptd_auth_version(c) == CKPTD_PROTO_VERSION && ckptd_auth_version(s) == CKPTD_PROTO_VERSION);
	ckptd_msg m = { .type = CKPTD_MSG_DELETE_VERSION }, d;
	snprintf(m.u.delete_version.job, sizeof(m.u.delete_version.job), "jobA");
	m.u.delete_version.version = 42;
	uint8_t f1[256], f2[256], keep[256];
	size_t l1, l2, lo, lk;
	T_OK(ckptd_msg_encode(&m, f1, sizeof(f1), &l1));
	T_ERR(ckptd_auth_seal(c, f1, l1, l1 + CKPTD_SEAL_LEN - 1, &l2), -ENOBUFS);
	T_OK(ckptd_auth_seal(c, f1, l1, sizeof(f1), &l2));
	T_ASSERT(l2 == l1 + CKPTD_SEAL_LEN);
	T_ERR(ckptd_auth_seal(c, f1, l2, sizeof(f1), &l2), -EINVAL); /* already sealed */
	/* Unopened, the decoder refuses it. */
	T_ERR(ckptd_msg_decode(f1, l2, &d, NULL), -CKPT_ECORRUPT);
	memcpy(keep, f1, l2);
	lk = l2;
	T_OK(ckptd_auth_open(s, f1, l2, &lo));
	T_ASSERT(lo == l1);
	T_OK(ckptd_msg_decode(f1, lo, &d, NULL));
	T_ASSERT(ckptd_msg_equal(&m, &d));
	/* The other direction works too, with its own key and counter. */
	m.u.delete_version.version = 43;
	T_OK(ckptd_msg_encode(&m, f2, sizeof(f2), &l1));
	T_OK(ckptd_auth_seal(s, f2, l1, sizeof(f2), &l2));
	T_OK(ckptd_auth_open(c, f2, l2, &lo));
	/* Replay of the first frame to the server: refused, session over. */
	T_ERR(ckptd_auth_open(s, keep, lk, &lo), -EBADMSG);
	m.u.delete_version.version = 44;
	T_OK(ckptd_msg_encode(&m, f2, sizeof(f2), &l1));
	T_OK(ckptd_auth_seal(c, f2, l1, sizeof(f2), &l2));
	T_ERR(ckptd_auth_open(s, f2, l2, &lo), -EBADMSG);
	ckptd_auth_free(c);
	ckptd_auth_free(s);

	/* Damage at every byte, reflection, and reordering. */
	T_OK(handshake(a, CKPTD_ROLE_RANK, "jobA", a, "jobA", NULL, &c, &s));
	T_OK(ckptd_msg_encode(&m, f1, sizeof(f1), &l1));
	T_OK(ckptd_auth_seal(c, f1, l1, sizeof(f1), &l2));
	for (size_t i = 0; i < l2; i++) {
		ckptd_auth *c2, *s2;
		T_OK(handshake(a, CKPTD_ROLE_RANK, "jobA", a, "jobA", NULL, &c2, &s2));
		uint8_t g[256];
		size_t gl;
		T_OK(ckptd_msg_encode(&m, g, sizeof(g), &gl));
		T_OK(ckptd_auth_seal(c2, g, gl, sizeof(g), &gl));
		g[i] ^= 0x10;
		if (ckptd_auth_open(s2, g, gl, &lo) != -EBADMSG)
			T_FAIL("sealed frame damaged at byte %zu accepted", i);
		ckptd_auth_free(c2);
		ckptd_auth_free(s2);
	}
	memcpy(keep, f1, l2);
	T_ERR(ckptd_auth_open(c, keep, l2, &lo), -EBADMSG); /* reflected to its sender */
	ckptd_auth_free(c);
	ckptd_auth_free(s);
	T_OK(handshake(a, CKPTD_ROLE_RANK, "jobA", a, "jobA", NULL, &c, &s));
	T_OK(ckptd_msg_encode(&m, f1, sizeof(f1), &l1));
	T_OK(ckptd_auth_seal(c, f1, l1, sizeof(f1), &l1));
	T_OK(ckptd_msg_encode(&m, f2, sizeof(f2), &l2));
	T_OK(ckptd_auth_seal(c, f2, l2, sizeof(f2), &l2));
	T_ERR(ckptd_auth_open(s, f2, l2, &lo), -EBADMSG); /* second before first */
	/* An unsealed frame after the handshake. */
	ckptd_auth_free(s);
	ckptd_auth_free(c);
	T_OK(handshake(a, CKPTD_ROLE_RANK, "jobA", a, "jobA", NULL, &c, &s));
	T_OK(ckptd_msg_encode(&m, f1, sizeof(f1), &l1));
	T_ERR(ckptd_auth_open(s, f1, l1, &lo), -EBADMSG);
	ckptd_auth_free(c);
	ckptd_auth_free(s);
	/* Sealing before the handshake is done. */
	T_OK(ckptd_auth_new(&c));
	T_ERR(ckptd_auth_seal(c, f1, l1, sizeof(f1), &l2), -CKPT_ESTATE);
	T_ERR(ckptd_auth_open(c, f1, l1, &l2), -CKPT_ESTATE);
	ckptd_auth_free(c);
	ckptd_secret_free(a);
}

/* ---- secrets from files and the environment ---- */
static char dir[600];

static char *write_token(const char *name, const char *content, mode_t mode)
{
	static char path[4][700];
	static int k;
	char *p = path[k++ & 3];
	snprintf(p, 700, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	T_ASSERT(f);
	fputs(content, f);
	fclose(f);
	T_ASSERT(chmod(p, mode) == 0);
	return p;
}

static int load(const char *path, char *err, size_t cap)
{
	ckptd_secret *s = NULL;
	int r = ckptd_secret_load_file(path, &s, err, cap);
	T_ASSERT((r == 0) == (s != NULL));
	ckptd_secret_free(s);
	return r;
}

static void test_token_files(void)
{
	char err[512];
	const char *tok = "0123456789abcdef0123456789abcdef\n";
	snprintf(dir, sizeof(dir), "%s", t_tmpdir("ckptd-auth"));
	T_OK(load(write_token("t600", tok, 0600), err, sizeof(err)));
	T_OK(load(write_token("t400", tok, 0400), err, sizeof(err)));
	static const mode_t bad[] = { 0640, 0604, 0660, 0644, 0620, 0602, 0610, 0601, 0777 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char name[32];
		snprintf(name, sizeof(name), "t%o", (unsigned)bad[i]);
		err[0] = '\0';
		T_ERR(load(write_token(name, tok, bad[i]), err, sizeof(err)), -EPERM);
		if (!strstr(err, "group or others") || !strstr(err, "0600") || strstr(err, "0123456789abcdef"))
			T_FAIL("unclear or leaking message for mode %o: %s", (unsigned)bad[i], err);
	}
	printf("refused: %s\n", err);
	/* A link to a private file is followed; the target's mode counts. */
	char link[700];
	snprintf(link, sizeof(link), "%s/link", dir);
	T_ASSERT(symlink(write_token("target", tok, 0600), link) == 0);
	T_OK(load(link, err, sizeof(err)));
	/* Not a regular file: a directory, a FIFO (must not block). */
	char sub[700];
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	T_ASSERT(mkdir(sub, 0700) == 0);
	T_ERR(load(sub, err, sizeof(err)), -EINVAL);
	snprintf(sub, sizeof(sub), "%s/fifo", dir);
	T_ASSERT(mkfifo(sub, 0600) == 0);
	T_ERR(load(sub, err, sizeof(err)), -EINVAL);
	T_ASSERT(strstr(err, "not a regular file"));
	/* Missing, empty, short, long. */
	snprintf(sub, sizeof(sub), "%s/missing", dir);
	T_ERR(load(sub, err, sizeof(err)), -ENOENT);
	T_ERR(load(write_token("empty", "", 0600), err, sizeof(err)), -EINVAL);
	T_ERR(load(write_token("short", "short\n", 0600), err, sizeof(err)), -EINVAL);
	T_ASSERT(strstr(err, "too short") && !strstr(err, "short\n"));
	char *big = malloc(CKPTD_SECRET_MAX + 2);
	T_ASSERT(big);
	memset(big, 'x', CKPTD_SECRET_MAX + 1);
	big[CKPTD_SECRET_MAX + 1] = '\0';
	T_ERR(load(write_token("big", big, 0600), err, sizeof(err)), -EINVAL);
	big[CKPTD_SECRET_MAX] = '\n';
	T_OK(load(write_token("max", big, 0600), err, sizeof(err)));
	free(big);
	T_ERR(load(NULL, err, sizeof(err)), -EINVAL);
	/* The trailing newline is not part of the secret: a file and the same
	 * token from the environment authenticate each other. */
	ckptd_secret *f, *e;
	T_OK(ckptd_secret_load_file(write_token("nl", "same-token-0123456789\r\n", 0600), &f, err, sizeof(err)));
	setenv("CKPTD_TEST_TOKEN", "same-token-0123456789", 1);
	T_OK(ckptd_secret_load_env("CKPTD_TEST_TOKEN", &e, err, sizeof(err)));
	T_OK(handshake(f, CKPTD_ROLE_RANK, "j", e, "j", NULL, NULL, NULL));
	ckptd_secret_free(f);
	ckptd_secret_free(e);
	/* Owned by someone else (only root can arrange that here). */
	if (geteuid() == 0) {
		char *p = write_token("other", tok, 0600);
		T_ASSERT(chown(p, 65534, 65534) == 0);
		T_ERR(load(p, err, sizeof(err)), -EPERM);
		T_ASSERT(strstr(err, "owned by uid 65534"));
	} else {
		printf("not root: owner check not exercised\n");
	}
	t_rmrf(dir);
}

static void test_env(void)
{
	char err[256];
	ckptd_secret *s = NULL;
	unsetenv("CKPTD_TEST_NONE");
	T_ERR(ckptd_secret_load_env("CKPTD_TEST_NONE", &s, err, sizeof(err)), -ENOKEY);
	T_ASSERT(!s && strstr(err, "CKPTD_TEST_NONE is not set"));
	setenv("CKPTD_TEST_NONE", "", 1);
	T_ERR(ckptd_secret_load_env("CKPTD_TEST_NONE", &s, err, sizeof(err)), -ENOKEY);
	setenv("CKPTD_TEST_NONE", "tiny", 1);
	T_ERR(ckptd_secret_load_env("CKPTD_TEST_NONE", &s, err, sizeof(err)), -EINVAL);
	T_ASSERT(!strstr(err, "tiny"));
	const char *old = getenv(CKPTD_TOKEN_ENV);
	char *saved = old ? strdup(old) : NULL;
	setenv(CKPTD_TOKEN_ENV, "env token 0123456789abcdef", 1);
	T_OK(ckptd_secret_load_env(NULL, &s, err, sizeof(err)));
	ckptd_secret_free(s);
	if (saved) {
		setenv(CKPTD_TOKEN_ENV, saved, 1);
		free(saved);
	} else {
		unsetenv(CKPTD_TOKEN_ENV);
	}
}

int main(void)
{
	test_success();
	test_refusals();
	test_replay();
	test_tamper();
	test_derived();
	test_seal();
	test_token_files();
	test_env();
	printf("test_auth: ok\n");
	return T_EXIT_PASS;
}
