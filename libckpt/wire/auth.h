/*
 * auth.h — mutual challenge-response authentication of a ckptd connection
 * with a shared secret, and sealing of the frames that follow it
 * (docs/protocol.md, "Handshake").
 *
 *   client                                   server
 *   client_start ── HELLO(role, job, Nc) ──→ server_start (secret for job)
 *   client_respond ←── CHALLENGE(Ns) ────────┘
 *        └──────── AUTH(client proof) ──→ server_verify
 *   client_verify_server ←── AUTH_OK(server proof) ┘
 *
 * Each proof is HMAC-SHA256 under the secret over a transcript that binds
 * both protocol versions, the role, the job and both nonces, with a label
 * per direction: a proof from another session, job, role or direction does
 * not verify. After the handshake both sides hold a key per direction and
 * seal every frame with a MAC over a sequence number, so a frame cannot be
 * forged, replayed, reordered or dropped unnoticed.
 *
 * This is a pure state machine: no sockets, no clocks. Messages are encoded
 * and sent by the caller (proto.h).
 *
 * Secrets come from a file only its owner can read, or from an environment
 * variable; never from a command line. They are kept in locked memory where
 * the memlock limit allows, wiped when freed, and never logged: error texts
 * name the file and what is wrong with it, never its content.
 *
 * Thread-safety: distinct objects may be used from distinct threads.
 * Errors: 0 or a negative code, -errno or -CKPT_E* (ckpt.h).
 */
#ifndef CKPTD_AUTH_H
#define CKPTD_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPTD_SECRET_MIN 16   /* bytes; shorter secrets are refused as guessable */
#define CKPTD_SECRET_MAX 4096
#define CKPTD_TOKEN_ENV "CKPT_TOKEN"

/* ---------------------------------------------------------------- secrets */

typedef struct ckptd_secret ckptd_secret;

/* Loads a secret from a file. The file must be a regular file (symbolic
 * links to one are followed), owned by the effective user or root, and not
 * readable or writable by group or others (mode 0600 or stricter).
 * Trailing newlines are not part of the secret.
 * [out] out: the secret, free with ckptd_secret_free  [out] err, errcap: a
 * message for the operator on failure (may be NULL).
 * Returns 0; -errno if the file cannot be opened or read; -EPERM if its mode
 * or owner is unsafe; -EINVAL if it is not a regular file, or the secret is
 * shorter than CKPTD_SECRET_MIN or longer than CKPTD_SECRET_MAX; -ENOMEM. */
int ckptd_secret_load_file(const char *path, ckptd_secret **out, char *err, size_t errcap);

/* Loads a secret from environment variable `name` (CKPTD_TOKEN_ENV when
 * NULL). Returns 0; -ENOKEY if it is unset or empty; -EINVAL for a bad
 * length; -ENOMEM. */
int ckptd_secret_load_env(const char *name, ckptd_secret **out, char *err, size_t errcap);

/* Makes a secret from len bytes (trailing '\n' and '\r' dropped), with the
 * same length rules as the loaders. For the loaders, tests and fuzzing. */
int ckptd_secret_parse(const uint8_t *bytes, size_t len, ckptd_secret **out, char *err, size_t errcap);

/* Derives job `job`'s secret from the cluster secret:
 * HMAC-SHA256(cluster, "ckptd v1 job key" NUL job). A daemon that holds the
 * cluster token serves every job; a job's ranks hold only their job's.
 * Returns 0; -CKPT_ENAME for an invalid job id; -EINVAL; -ENOMEM. */
int ckptd_secret_derive_job(const ckptd_secret *cluster, const char *job, ckptd_secret **out);

/* Wipes and frees. NULL is accepted. */
void ckptd_secret_free(ckptd_secret *s);

/* ---------------------------------------------------------------- handshake */

typedef struct ckptd_auth ckptd_auth;

/* Returns 0 or -ENOMEM / -EIO (libsodium failed to initialise). */
int ckptd_auth_new(ckptd_auth **out);
/* Wipes every key and nonce, and frees. NULL is accepted. */
void ckptd_auth_free(ckptd_auth *a);

/* Client, step 1: begins a handshake as `role` for `job` ("" or NULL for
 * cluster scope) with `secret` (copied; the caller may free it after).
 * [out] nonce: the client nonce to send in HELLO.
 * Returns 0; -ENOKEY if secret is NULL; -CKPT_ENAME for a bad job id;
 * -EINVAL for a role that does not go with the scope; -CKPT_ESTATE if a
 * handshake was already begun. */
int ckptd_auth_client_start(ckptd_auth *a, const ckptd_secret *secret, uint32_t role, const char *job,
                            uint8_t nonce[CKPTD_NONCE_LEN]);

/* Client, step 2: given the CHALLENGE and the version its header carried,
 * computes the client's proof. [out] mac: to send in AUTH.
 * Returns 0; -CKPT_EFORMAT if the server's major version differs (the
 * handshake fails); -CKPT_ESTATE out of order; -EACCES after a failure. */
int ckptd_auth_client_respond(ckptd_auth *a, uint32_t server_version, const uint8_t server_nonce[CKPTD_NONCE_LEN],
                              uint8_t mac[CKPTD_MAC_LEN]);

/* Client, step 3: checks the server's proof from AUTH_OK. On success the
 * handshake is done on this side. Returns 0; -EACCES if it does not verify
 * (the server does not know the secret, or the transcript was tampered
 * with; the handshake fails); -CKPT_ESTATE out of order. */
int ckptd_auth_client_verify_server(ckptd_auth *a, const uint8_t server_mac[CKPTD_MAC_LEN]);

/* Server, step 1: given a HELLO (its header's version, role, job and nonce)
 * and the secret that job's clients must know (the daemon looks it up by
 * the HELLO's job; for a job it does not serve it should pass a random
 * secret and let the handshake fail, so that job names cannot be probed).
 * [out] nonce: the server nonce to send in CHALLENGE.
 * Returns 0; -ENOKEY if secret is NULL; -CKPT_EFORMAT if the client's major
 * version differs; -CKPT_ENAME / -EINVAL as for client_start; -CKPT_ESTATE. */
int ckptd_auth_server_start(ckptd_auth *a, const ckptd_secret *secret, uint32_t client_version, uint32_t role,
                            const char *job, const uint8_t client_nonce[CKPTD_NONCE_LEN],
                            uint8_t nonce[CKPTD_NONCE_LEN]);

/* Server, step 2: checks the client's proof from AUTH. On success the
 * handshake is done on this side. [out] mac: the server's proof, to send in
 * AUTH_OK. Returns 0; -EACCES if the proof does not verify (wrong secret,
 * replayed or tampered handshake; the handshake fails); -CKPT_ESTATE. */
int ckptd_auth_server_verify(ckptd_auth *a, const uint8_t client_mac[CKPTD_MAC_LEN], uint8_t mac[CKPTD_MAC_LEN]);

/* 1 once this side has verified its peer, else 0. */
int ckptd_auth_done(const ckptd_auth *a);

/* The protocol version the session speaks once done: the agreed major and
 * the lower of the two minors (packed). 0 before. */
uint32_t ckptd_auth_version(const ckptd_auth *a);

/* ---------------------------------------------------------------- sealing */

/* Seals one encoded frame in place: sets CKPTD_FLAG_SEALED, grows the
 * payload by CKPTD_SEAL_LEN and appends a MAC over this direction's next
 * sequence number and the frame. [in,out] buf: the frame of len bytes, with
 * room for cap  [out] out_len.
 * Returns 0; -CKPT_ESTATE before the handshake is done or after a failure;
 * -EINVAL if buf does not hold one unsealed frame of len bytes; -ENOBUFS if
 * cap < len + CKPTD_SEAL_LEN; -EMSGSIZE if the sealed frame would exceed
 * CKPTD_MAX_FRAME. */
int ckptd_auth_seal(ckptd_auth *a, uint8_t *buf, size_t len, size_t cap, size_t *out_len);

/* Opens one sealed frame in place: checks its MAC against the next sequence
 * number expected from the peer, then strips the trailer and the flag so
 * that ckptd_msg_decode() reads it. [out] out_len: the opened frame's length.
 * Returns 0; -EBADMSG if the frame is not sealed or its MAC does not verify
 * (forged, replayed, reordered or damaged); after that the session is
 * failed and the connection must be dropped; -CKPT_ESTATE before the
 * handshake is done. */
int ckptd_auth_open(ckptd_auth *a, uint8_t *buf, size_t len, size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif
