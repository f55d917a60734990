/* Handshake and frame sealing with libsodium's HMAC-SHA256 (auth.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "auth.h"
#include "base/common.h"

struct ckptd_secret {
	size_t len;
	uint8_t bytes[];
};

enum {
	ST_IDLE = 0,
	ST_CLIENT_HELLO,     /* client: HELLO sent, waiting for CHALLENGE */
	ST_CLIENT_AUTH,      /* client: AUTH sent, waiting for AUTH_OK */
	ST_SERVER_CHALLENGE, /* server: CHALLENGE sent, waiting for AUTH */
	ST_DONE,
	ST_FAILED,
};

struct ckptd_auth {
	int state;
	int server;
	/* The secret as a keyed HMAC state (secret-equivalent, wiped like it);
	 * held by a client between start and respond only. */
	crypto_auth_hmacsha256_state key;
	uint32_t client_version, server_version, role;
	char job[CKPTD_JOB_MAX + 1];
	uint8_t nc[CKPTD_NONCE_LEN], ns[CKPTD_NONCE_LEN];
	uint8_t expect[CKPTD_MAC_LEN]; /* the peer's proof, when it comes */
	uint8_t server_mac[CKPTD_MAC_LEN];
	uint8_t k_send[crypto_auth_hmacsha256_BYTES], k_recv[crypto_auth_hmacsha256_BYTES];
	uint64_t seq_send, seq_recv;
};

/* Labels separate the uses of the secret: a client proof is never a valid
 * server proof or key, and the other way round. */
static const char LABEL_CLIENT[] = "ckptd v1 client proof";
static const char LABEL_SERVER[] = "ckptd v1 server proof";
static const char LABEL_C2S[] = "ckptd v1 key client to server";
static const char LABEL_S2C[] = "ckptd v1 key server to client";
static const char LABEL_JOB[] = "ckptd v1 job key";

static int sodium_ready(void)
{
	return sodium_init() < 0 ? -EIO : 0;
}

/* ---------------------------------------------------------------- secrets */

static int secret_new(const uint8_t *bytes, size_t len, ckptd_secret **out)
{
	ckptd_secret *s = malloc(sizeof(*s) + len);
	if (!s)
		return -ENOMEM;
	/* Best effort: containers often allow little locked memory, and an
	 * unlocked secret is still better than none. */
	(void)sodium_mlock(s, sizeof(*s) + len);
	s->len = len;
	memcpy(s->bytes, bytes, len);
	*out = s;
	return 0;
}

void ckptd_secret_free(ckptd_secret *s)
{
	if (!s)
		return;
	size_t n = sizeof(*s) + s->len;
	sodium_memzero(s, n);
	(void)sodium_munlock(s, n);
	free(s);
}

int ckptd_secret_parse(const uint8_t *bytes, size_t len, ckptd_secret **out, char *err, size_t errcap)
{
	*out = NULL;
	int r = sodium_ready();
	if (r < 0)
		return r;
	if (!bytes)
		len = 0;
	while (len && (bytes[len - 1] == '\n' || bytes[len - 1] == '\r'))
		len--;
	if (len < CKPTD_SECRET_MIN) {
		ckpt__errf(err, errcap, "secret too short: %zu bytes, at least %d needed", len, CKPTD_SECRET_MIN);
		return -EINVAL;
	}
	if (len > CKPTD_SECRET_MAX) {
		ckpt__errf(err, errcap, "secret too long: more than %d bytes", CKPTD_SECRET_MAX);
		return -EINVAL;
	}
	r = secret_new(bytes, len, out);
	if (r < 0)
		ckpt__errf(err, errcap, "out of memory");
	return r;
}

int ckptd_secret_load_file(const char *path, ckptd_secret **out, char *err, size_t errcap)
{
	*out = NULL;
	if (!path || !*path) {
		ckpt__errf(err, errcap, "no token file given");
		return -EINVAL;
	}
	/* Checks are made on the open descriptor, so the file cannot be
	 * swapped between check and read; O_NONBLOCK keeps a FIFO from
	 * blocking us before it is refused. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		ckpt__errf(err, errcap, "cannot open token file %s: %s", path, strerror(e));
		return -e;
	}
	uint8_t *buf = NULL;
	size_t cap = CKPTD_SECRET_MAX + 3, n = 0;
	int r;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		ckpt__errf(err, errcap, "cannot stat token file %s: %s", path, strerror(-r));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ckpt__errf(err, errcap, "token file %s is not a regular file", path);
		r = -EINVAL;
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		ckpt__errf(err, errcap, "token file %s is accessible by group or others (mode %04o): "
		     "refusing it; make it mode 0600 (chmod 600 %s)", path, (unsigned)(st.st_mode & 07777), path);
		r = -EPERM;
		goto out;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		ckpt__errf(err, errcap, "token file %s is owned by uid %u, neither this user (uid %u) nor root: refusing it",
		     path, (unsigned)st.st_uid, (unsigned)geteuid());
		r = -EPERM;
		goto out;
	}
	buf = malloc(cap);
	if (!buf) {
		ckpt__errf(err, errcap, "out of memory");
		r = -ENOMEM;
		goto out;
	}
	(void)sodium_mlock(buf, cap);
	while (n < cap) {
		ssize_t k = read(fd, buf + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			ckpt__errf(err, errcap, "cannot read token file %s: %s", path, strerror(-r));
			goto out;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	r = ckptd_secret_parse(buf, n, out, err, errcap);
	if (r < 0 && err && errcap) {
		/* Say which file; the parser's text names no content. */
		char why[160];
		snprintf(why, sizeof(why), "%s", err);
		ckpt__errf(err, errcap, "token file %s: %s", path, why);
	}
out:
	if (buf) {
		sodium_memzero(buf, cap);
		(void)sodium_munlock(buf, cap);
		free(buf);
	}
	close(fd);
	return r;
}

int ckptd_secret_load_env(const char *name, ckptd_secret **out, char *err, size_t errcap)
{
	*out = NULL;
	if (!name)
		name = CKPTD_TOKEN_ENV;
	const char *v = getenv(name);
	if (!v || !*v) {
		ckpt__errf(err, errcap, "%s is not set: no secret to authenticate with", name);
		return -ENOKEY;
	}
	int r = ckptd_secret_parse((const uint8_t *)v, strlen(v), out, err, errcap);
	if (r < 0 && err && errcap) {
		char why[160];
		snprintf(why, sizeof(why), "%s", err);
		ckpt__errf(err, errcap, "%s: %s", name, why);
	}
	return r;
}

int ckptd_secret_derive_job(const ckptd_secret *cluster, const char *job, ckptd_secret **out)
{
	*out = NULL;
	if (!cluster)
		return -EINVAL;
	if (ckpt__job_valid(job) < 0)
		return -CKPT_ENAME;
	int r = sodium_ready();
	if (r < 0)
		return r;
	crypto_auth_hmacsha256_state st;
	uint8_t k[crypto_auth_hmacsha256_BYTES];
	crypto_auth_hmacsha256_init(&st, cluster->bytes, cluster->len);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)LABEL_JOB, sizeof(LABEL_JOB));
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)job, strlen(job));
	crypto_auth_hmacsha256_final(&st, k);
	r = secret_new(k, sizeof(k), out);
	sodium_memzero(&st, sizeof(st));
	sodium_memzero(k, sizeof(k));
	return r;
}

/* ---------------------------------------------------------------- handshake */

int ckptd_auth_new(ckptd_auth **out)
{
	*out = NULL;
	int r = sodium_ready();
	if (r < 0)
		return r;
	ckptd_auth *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	(void)sodium_mlock(a, sizeof(*a));
	*out = a;
	return 0;
}

void ckptd_auth_free(ckptd_auth *a)
{
	if (!a)
		return;
	sodium_memzero(a, sizeof(*a));
	(void)sodium_munlock(a, sizeof(*a));
	free(a);
}

/* A failed handshake keeps nothing that could help a retry on the same
 * object: every later call fails. */
static int fail(ckptd_auth *a, int err)
{
	sodium_memzero(a, sizeof(*a));
	a->state = ST_FAILED;
	return err;
}

static int scope_valid(uint32_t role, const char *job)
{
	if (job && *job && ckpt__job_valid(job) < 0)
		return -CKPT_ENAME;
	int has_job = job && *job;
	if (role == CKPTD_ROLE_RANK)
		return has_job ? 0 : -EINVAL;
	if (role == CKPTD_ROLE_AGENT)
		return has_job ? -EINVAL : 0;
	return role == CKPTD_ROLE_CLI ? 0 : -EINVAL;
}

/* MAC of label and the transcript, under the keyed state a->key. The job is
 * length-prefixed so that no two transcripts share an encoding. */
static void transcript_mac(const ckptd_auth *a, const char *label, size_t label_len,
                           uint8_t out[crypto_auth_hmacsha256_BYTES])
{
	crypto_auth_hmacsha256_state st = a->key;
	uint8_t fixed[13];
	size_t jl = strlen(a->job);
	for (int i = 0; i < 4; i++) {
		fixed[i] = (uint8_t)(a->client_version >> (8 * i));
		fixed[4 + i] = (uint8_t)(a->server_version >> (8 * i));
		fixed[8 + i] = (uint8_t)(a->role >> (8 * i));
	}
	fixed[12] = (uint8_t)jl;
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)label, label_len);
	crypto_auth_hmacsha256_update(&st, fixed, sizeof(fixed));
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)a->job, jl);
	crypto_auth_hmacsha256_update(&st, a->nc, sizeof(a->nc));
	crypto_auth_hmacsha256_update(&st, a->ns, sizeof(a->ns));
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}

#define TMAC(a, label, out) transcript_mac((a), (label), sizeof(label), (out))

/* With both nonces known: both proofs and both session keys. The secret
 * is not needed after this, so it is wiped. */
static void derive_all(ckptd_auth *a, uint8_t client_mac[CKPTD_MAC_LEN])
{
	TMAC(a, LABEL_CLIENT, client_mac);
	TMAC(a, LABEL_SERVER, a->server_mac);
	TMAC(a, LABEL_C2S, a->server ? a->k_recv : a->k_send);
	TMAC(a, LABEL_S2C, a->server ? a->k_send : a->k_recv);
	sodium_memzero(&a->key, sizeof(a->key));
}

static int begin(ckptd_auth *a, const ckptd_secret *secret, uint32_t role, const char *job)
{
	if (!a)
		return -EINVAL;
	if (a->state == ST_FAILED)
		return -EACCES;
	if (a->state != ST_IDLE)
		return -CKPT_ESTATE;
	if (!secret)
		return -ENOKEY;
	int r = scope_valid(role, job);
	if (r < 0)
		return r;
	a->role = role;
	snprintf(a->job, sizeof(a->job), "%s", job ? job : "");
	crypto_auth_hmacsha256_init(&a->key, secret->bytes, secret->len);
	return 0;
}

int ckptd_auth_client_start(ckptd_auth *a, const ckptd_secret *secret, uint32_t role, const char *job,
                            uint8_t nonce[CKPTD_NONCE_LEN])
{
	int r = begin(a, secret, role, job);
	if (r < 0)
		return r;
	a->server = 0;
	a->client_version = CKPTD_PROTO_VERSION;
	randombytes_buf(a->nc, sizeof(a->nc));
	memcpy(nonce, a->nc, sizeof(a->nc));
	a->state = ST_CLIENT_HELLO;
	return 0;
}

int ckptd_auth_client_respond(ckptd_auth *a, uint32_t server_version, const uint8_t server_nonce[CKPTD_NONCE_LEN],
                              uint8_t mac[CKPTD_MAC_LEN])
{
	if (!a)
		return -EINVAL;
	if (a->state == ST_FAILED)
		return -EACCES;
	if (a->state != ST_CLIENT_HELLO)
		return -CKPT_ESTATE;
	if (CKPTD_VERSION_MAJOR_OF(server_version) != CKPTD_PROTO_MAJOR)
		return fail(a, -CKPT_EFORMAT);
	a->server_version = server_version;
	memcpy(a->ns, server_nonce, sizeof(a->ns));
	derive_all(a, mac);
	memcpy(a->expect, a->server_mac, sizeof(a->expect));
	a->state = ST_CLIENT_AUTH;
	return 0;
}

int ckptd_auth_client_verify_server(ckptd_auth *a, const uint8_t server_mac[CKPTD_MAC_LEN])
{
	if (!a)
		return -EINVAL;
	if (a->state == ST_FAILED)
		return -EACCES;
	if (a->state != ST_CLIENT_AUTH)
		return -CKPT_ESTATE;
	if (sodium_memcmp(server_mac, a->expect, CKPTD_MAC_LEN) != 0)
		return fail(a, -EACCES);
	a->state = ST_DONE;
	return 0;
}

int ckptd_auth_server_start(ckptd_auth *a, const ckptd_secret *secret, uint32_t client_version, uint32_t role,
                            const char *job, const uint8_t client_nonce[CKPTD_NONCE_LEN],
                            uint8_t nonce[CKPTD_NONCE_LEN])
{
	if (a && a->state == ST_IDLE && CKPTD_VERSION_MAJOR_OF(client_version) != CKPTD_PROTO_MAJOR)
		return fail(a, -CKPT_EFORMAT);
	int r = begin(a, secret, role, job);
	if (r < 0)
		return r;
	a->server = 1;
	a->client_version = client_version;
	a->server_version = CKPTD_PROTO_VERSION;
	memcpy(a->nc, client_nonce, sizeof(a->nc));
	randombytes_buf(a->ns, sizeof(a->ns));
	memcpy(nonce, a->ns, sizeof(a->ns));
	derive_all(a, a->expect);
	a->state = ST_SERVER_CHALLENGE;
	return 0;
}

int ckptd_auth_server_verify(ckptd_auth *a, const uint8_t client_mac[CKPTD_MAC_LEN], uint8_t mac[CKPTD_MAC_LEN])
{
	if (!a)
		return -EINVAL;
	if (a->state == ST_FAILED)
		return -EACCES;
	if (a->state != ST_SERVER_CHALLENGE)
		return -CKPT_ESTATE;
	if (sodium_memcmp(client_mac, a->expect, CKPTD_MAC_LEN) != 0)
		return fail(a, -EACCES);
	memcpy(mac, a->server_mac, CKPTD_MAC_LEN);
	a->state = ST_DONE;
	return 0;
}

int ckptd_auth_done(const ckptd_auth *a)
{
	return a && a->state == ST_DONE;
}

uint32_t ckptd_auth_version(const ckptd_auth *a)
{
	if (!ckptd_auth_done(a))
		return 0;
	uint32_t c = CKPTD_VERSION_MINOR_OF(a->client_version), s = CKPTD_VERSION_MINOR_OF(a->server_version);
	return CKPTD_VERSION_PACK(CKPTD_PROTO_MAJOR, c < s ? c : s);
}

/* ---------------------------------------------------------------- sealing */

static void seal_mac(const uint8_t key[crypto_auth_hmacsha256_BYTES], uint64_t seq, const uint8_t *buf, size_t len,
                     uint8_t out[CKPTD_SEAL_LEN])
{
	crypto_auth_hmacsha256_state st;
	uint8_t s[8];
	for (int i = 0; i < 8; i++)
		s[i] = (uint8_t)(seq >> (8 * i));
	crypto_auth_hmacsha256_init(&st, key, crypto_auth_hmacsha256_BYTES);
	crypto_auth_hmacsha256_update(&st, s, sizeof(s));
	crypto_auth_hmacsha256_update(&st, buf, len);
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}

int ckptd_auth_seal(ckptd_auth *a, uint8_t *buf, size_t len, size_t cap, size_t *out_len)
{
	if (!a || !buf)
		return -EINVAL;
	if (a->state != ST_DONE)
		return -CKPT_ESTATE;
	ckptd_frame_header h;
	if (ckptd_header_decode(buf, len, &h, NULL) < 0 || (h.flags & CKPTD_FLAG_SEALED) ||
	    len - CKPTD_HEADER_LEN != h.length)
		return -EINVAL;
	if (len + CKPTD_SEAL_LEN > CKPTD_MAX_FRAME)
		return -EMSGSIZE;
	if (cap < len + CKPTD_SEAL_LEN)
		return -ENOBUFS;
	h.flags |= CKPTD_FLAG_SEALED;
	h.length += CKPTD_SEAL_LEN;
	ckptd_header_encode(buf, &h);
	seal_mac(a->k_send, a->seq_send++, buf, len, buf + len);
	if (out_len)
		*out_len = len + CKPTD_SEAL_LEN;
	return 0;
}

int ckptd_auth_open(ckptd_auth *a, uint8_t *buf, size_t len, size_t *out_len)
{
	if (!a || !buf)
		return -EINVAL;
	if (a->state == ST_FAILED)
		return -EBADMSG;
	if (a->state != ST_DONE)
		return -CKPT_ESTATE;
	ckptd_frame_header h;
	if (ckptd_header_decode(buf, len, &h, NULL) < 0 || !(h.flags & CKPTD_FLAG_SEALED) ||
	    len - CKPTD_HEADER_LEN != h.length || h.length < CKPTD_SEAL_LEN)
		return fail(a, -EBADMSG);
	uint8_t mac[CKPTD_SEAL_LEN];
	size_t body = len - CKPTD_SEAL_LEN;
	seal_mac(a->k_recv, a->seq_recv, buf, body, mac);
	int ok = sodium_memcmp(mac, buf + body, CKPTD_SEAL_LEN) == 0;
	sodium_memzero(mac, sizeof(mac));
	if (!ok)
		return fail(a, -EBADMSG);
	a->seq_recv++;
	h.flags &= ~CKPTD_FLAG_SEALED;
	h.length -= CKPTD_SEAL_LEN;
	ckptd_header_encode(buf, &h);
	if (out_len)
		*out_len = body;
	return 0;
}
