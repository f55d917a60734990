/* Writes the seed corpus of fuzz_proto into a directory: one frame of each
 * message type (all fields, and required fields only), a sealed frame, a
 * stream of several frames, frames of another major version and an
 * oversized header.
 * usage: ckptd_make_corpus DIR   (DIR: tests/fuzz/corpus/proto) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/auth.h"
#include "wire/proto.h"
#include "ckptd/samples.h"

static void put(const char *dir, const char *name, const uint8_t *b, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n || fclose(f)) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	static uint8_t buf[65536], stream[65536];
	size_t sl = 0;
	char name[128];
	for (size_t t = 0; t < T_NTYPES; t++)
		for (int v = 0; v < 2; v++) {
			ckptd_msg m;
			t_store st;
			size_t n;
			t_sample(&m, &st, t_types[t], v);
			if (ckptd_msg_encode(&m, buf, sizeof(buf), &n)) {
				fprintf(stderr, "cannot encode %s\n", ckptd_msg_name(m.type));
				return 1;
			}
			snprintf(name, sizeof(name), "%02u-%s-%s", (unsigned)t, ckptd_msg_name(m.type),
			         v ? "required" : "full");
			put(dir, name, buf, n);
			if (v == 1 && sl + n <= sizeof(stream)) {
				memcpy(stream + sl, buf, n);
				sl += n;
			}
		}
	put(dir, "stream-required", stream, sl);

	/* A sealed frame from a real session. */
	ckptd_secret *k;
	ckptd_auth *c, *s;
	static const char sec[] = "corpus secret 0123456789";
	uint8_t nc[32], ns[32], cm[32], sm[32];
	if (ckptd_secret_parse((const uint8_t *)sec, sizeof(sec) - 1, &k, NULL, 0) || ckptd_auth_new(&c) ||
	    ckptd_auth_new(&s) || ckptd_auth_client_start(c, k, CKPTD_ROLE_RANK, "j", nc) ||
	    ckptd_auth_server_start(s, k, CKPTD_PROTO_VERSION, CKPTD_ROLE_RANK, "j", nc, ns) ||
	    ckptd_auth_client_respond(c, CKPTD_PROTO_VERSION, ns, cm) || ckptd_auth_server_verify(s, cm, sm) ||
	    ckptd_auth_client_verify_server(c, sm)) {
		fprintf(stderr, "handshake failed\n");
		return 1;
	}
	ckptd_msg m;
	t_store st;
	size_t n;
	t_sample(&m, &st, CKPTD_MSG_SHARD_DONE, 0);
	if (ckptd_msg_encode(&m, buf, sizeof(buf), &n) || ckptd_auth_seal(c, buf, n, sizeof(buf), &n))
		return 1;
	put(dir, "sealed-SHARD_DONE", buf, n);
	ckptd_auth_free(c);
	ckptd_auth_free(s);
	ckptd_secret_free(k);

	/* Another major version: an ERROR (readable) and a SHARD_DONE (not). */
	ckptd_msg_version_error(&m, CKPTD_VERSION_PACK(2, 1));
	if (ckptd_msg_encode(&m, buf, sizeof(buf), &n))
		return 1;
	buf[4] = 2;
	put(dir, "major2-ERROR", buf, n);
	t_sample(&m, &st, CKPTD_MSG_SHARD_DONE, 1);
	if (ckptd_msg_encode(&m, buf, sizeof(buf), &n))
		return 1;
	buf[4] = 2;
	put(dir, "major2-SHARD_DONE", buf, n);

	/* A header declaring more than the limit. */
	ckptd_frame_header h = { .major = 1, .type = CKPTD_MSG_AGENT_INVENTORY, .length = CKPTD_MAX_PAYLOAD + 1 };
	ckptd_header_encode(buf, &h);
	put(dir, "oversized-header", buf, CKPTD_HEADER_LEN);
	return 0;
}
