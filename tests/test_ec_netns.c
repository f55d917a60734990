/* An rs:4+2 group over the real fabric, one member per network namespace
 * (tests/netns_helper.h), nodes killed while the group is being encoded
 * and while a lost member is being rebuilt:
 *
 *   members 0..5 (namespaces 0..5): each holds its shard image of version
 *     1 and of version 2, the parity rows of version 1 it holds (complete)
 *     and those of version 2 (empty), registered with libfabric; it folds
 *     the slices written into its staging slot into its version-2 rows as
 *     they arrive (ckpt_ec_update), told over a control socket;
 *   the restorer (namespace 6): plays the data owners and the replacement.
 *
 *   1. member 0 is killed; its version-1 shard is rebuilt from the others
 *      over fi_read (format/ecgroup.c); member 2 is killed in the middle of
 *      the rebuild, whose fetches from it then fail: the rebuild goes on
 *      from the other pieces and is bit-exact (2 lost = M);
 *   2. version 2 is encoded: every slice to the holders of its stripe's
 *      parity rows; member 3 is killed in the middle. The writes to the
 *      dead holders fail with an error naming each of them; the holders
 *      left have their version-2 rows complete and bit-exact, and every
 *      holder's version-1 rows are untouched (the previous version's parity
 *      stays until the new one is complete);
 *   3. rebuilding member 0 of version 1 again with members 0, 2 and 3 gone
 *      (3 > M) is refused, naming the stripe and members 2 and 3. */
#include "helpers.h"
#include "netns_helper.h"

#include "ckpt_kernels.h"
#include "ec.h"
#include "fabric.h"
#include "format/ecgroup.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define K 4
#define M 2
#define N (K + M)
#define XFER_MS 3000

enum { CMD_FOLD = 1, CMD_SUMS, CMD_QUIT };
typedef struct cmd {
	uint32_t op, t, d;
	uint64_t len;
} cmd;

typedef struct hello {
	int rc;
	char err[200];
	ckpt_fab_remote r;
} hello;

/* The group both sides compute: version v's images (v = 1, 2). */
static void lens_of(uint64_t *lens)
{
	for (unsigned i = 0; i < N; i++)
		lens[i] = 3000017 + 7919 * i;
}

typedef struct arena {
	ckpt_ecg g;
	uint8_t *base;
	uint64_t len;
} arena;

/* Member i's arena: img v1 | img v2 | par v1 [M] | par v2 [M] | staging. */
static uint64_t a_img(const ckpt_ecg *g, int v)
{
	return (uint64_t)(v - 1) * K * g->slice;
}
static uint64_t a_par(const ckpt_ecg *g, int v, unsigned t)
{
	return 2ull * K * g->slice + ((uint64_t)(v - 1) * M + t) * g->slice;
}
static uint64_t a_stage(const ckpt_ecg *g)
{
	return 2ull * K * g->slice + 2ull * M * g->slice;
}

static uint8_t *abuf(uint64_t len)
{
	uint8_t *p = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	T_ASSERT(p);
	memset(p, 0, len);
	return p;
}

/* Every member's image of version v, in its own buffer of K slices. */
static void images(const ckpt_ecg *g, int v, uint8_t **img)
{
	for (unsigned i = 0; i < N; i++) {
		img[i] = abuf(K * g->slice);
		t_fill(img[i], g->len[i], 1000 * v + i);
	}
}

/* Parity row t of stripe s of version v, computed here: the reference. */
static void parity(const ckpt_ecg *g, const ckpt_ec *e, uint8_t **img, unsigned s, unsigned t, uint8_t *out)
{
	memset(out, 0, g->slice);
	for (unsigned d = 0; d < K; d++) {
		unsigned i = ckpt__ecg_holder(g, s, d);
		T_ASSERT(ckpt_ec_update(e, t, d, ckpt__ecg_have(g, i, d), img[i] + d * g->slice, out) == 0);
	}
}

static int member_main(unsigned me, const char *host, int sock)
{
	hello h = { 0 };
	ckpt_ecg g;
	ckpt_ec *e;
	uint64_t lens[N];
	lens_of(lens);
	T_ASSERT(ckpt__ecg_init(&g, K, M, lens, h.err, sizeof(h.err)) == 0);
	T_ASSERT(ckpt_ec_new(K, M, &e, h.err, sizeof(h.err)) == 0);
	uint64_t len = a_stage(&g) + g.slice;
	uint8_t *a = abuf(len), *img[N];
	for (int v = 1; v <= 2; v++) {
		images(&g, v, img);
		memcpy(a + a_img(&g, v), img[me], g.len[me]);
		if (v == 1) /* version 1 is protected already: its rows are complete */
			for (unsigned t = 0; t < M; t++)
				parity(&g, e, img, (me + N - t) % N, t, a + a_par(&g, 1, t));
		for (unsigned i = 0; i < N; i++)
			free(img[i]);
	}
	ckpt_fab *f = NULL;
	ckpt_fab_mr *mr = NULL;
	h.rc = ckpt_fab_open(NULL, host, 1, &f, h.err, sizeof(h.err));
	if (!h.rc)
		h.rc = ckpt_fab_mr_reg(f, a, len, CKPT_FAB_REMOTE_READ | CKPT_FAB_REMOTE_WRITE, &mr, h.err, sizeof(h.err));
	if (!h.rc)
		h.rc = ckpt_fab_mr_remote(f, mr, &h.r);
	if (write(sock, &h, sizeof(h)) != sizeof(h) || h.rc)
		return 1;
	cmd c;
	while (read(sock, &c, sizeof(c)) == sizeof(c) && c.op != CMD_QUIT) {
		uint64_t sums[2 * M];
		if (c.op == CMD_FOLD) {
			/* Parity row t of the stripe this member holds row t of. */
			ckpt_ec_update(e, c.t, c.d, c.len, a + a_stage(&g), a + a_par(&g, 2, c.t));
			sums[0] = 1;
			if (write(sock, sums, 8) != 8)
				break;
		} else {
			for (int v = 1; v <= 2; v++)
				for (unsigned t = 0; t < M; t++)
					sums[(v - 1) * M + t] = ckpt_kern_checksum(a + a_par(&g, v, t), g.slice);
			if (write(sock, sums, sizeof(sums)) != sizeof(sums))
				break;
		}
	}
	ckpt_fab_mr_close(mr);
	ckpt_fab_close(f);
	return 0;
}

/* ---------------------------------------------------------------- the restorer */

typedef struct rst {
	ckpt_ecg g;
	ckpt_ec *e;
	ckpt_fab *f;
	const char *host;
	hello mem[N];
	int sock[N];
	int killreq, killdone; /* to and from the test's own process */
	uint8_t *img1[N], *img2[N];
	uint64_t *sums; /* [stripe][piece] of version 1 (one block per piece here) */
	unsigned fetches, kill_at, kill_who, fetch_failed;
	char names[N][40];
	const char *name_p[N];
} rst;

static void fab_reopen(rst *r)
{
	char err[300];
	ckpt_fab_close(r->f);
	r->f = NULL;
	if (ckpt_fab_open(NULL, r->host, 0, &r->f, err, sizeof(err)) < 0)
		T_FAIL("restorer: fabric: %s", err);
}

/* A transfer; a failed one leaves the fab broken: a new one is opened. */
static int xfer(rst *r, int op, void *buf, uint64_t len, unsigned who, uint64_t off, char *why, size_t cap)
{
	char err[300] = "";
	int rc = ckpt_fab_xfer(r->f, op, NULL, buf, len, &r->mem[who].r, off, 0, 0, XFER_MS, err, sizeof(err));
	if (rc < 0) {
		snprintf(why, cap, "%s: %s", r->name_p[who], err);
		fab_reopen(r);
	}
	return rc;
}

static void kill_member(rst *r, unsigned who)
{
	char b = (char)who;
	T_ASSERT(write(r->killreq, &b, 1) == 1 && read(r->killdone, &b, 1) == 1 && b == 'k');
}

static int fetch(void *arg, unsigned s, unsigned p, uint64_t b, uint8_t *buf, const uint8_t **data,
                    uint64_t *sum, char *why, size_t cap)
{
	rst *r = arg;
	(void)data; /* copies into buf */
	const ckpt_ecg *g = &r->g;
	if (++r->fetches == r->kill_at)
		kill_member(r, r->kill_who); /* in the middle of the rebuild */
	unsigned h = ckpt__ecg_holder(g, s, p);
	uint64_t off = p < K ? a_img(g, 1) + p * g->slice : a_par(g, 1, p - K);
	T_ASSERT(b == 0 && ckpt__ecg_blocks(g) == 1);
	int rc = xfer(r, CKPT_FAB_READ, buf, g->slice, h, off, why, cap);
	r->fetch_failed += rc < 0;
	*sum = r->sums[s * N + p];
	return rc;
}

/* Version 2 encoded: every data slice to its stripe's M parity holders,
 * each folding it as it arrives; member kill_who killed half way. Returns
 * the number of transfers that failed, with the holders named in why. */
static unsigned protect(rst *r, char *why, size_t cap)
{
	const ckpt_ecg *g = &r->g;
	unsigned sent = 0, failed = 0, total = N * K * M;
	size_t o = 0;
	why[0] = '\0';
	int dead[N] = { 0 };
	for (unsigned i = 0; i < N; i++)
		for (unsigned d = 0; d < K; d++) {
			unsigned s = ckpt__ecg_stripe(g, i, d);
			for (unsigned t = 0; t < M; t++, sent++) {
				if (sent == total / 2)
					kill_member(r, r->kill_who);
				unsigned h = ckpt__ecg_holder(g, s, K + t);
				char w[400] = "";
				uint64_t have = ckpt__ecg_have(g, i, d);
				int rc = dead[h] ? -EPIPE : xfer(r, CKPT_FAB_WRITE, r->img2[i] + d * g->slice, have, h, a_stage(g), w, sizeof(w));
				cmd c = { CMD_FOLD, t, d, have };
				uint64_t ack;
				if (!rc && (write(r->sock[h], &c, sizeof(c)) != sizeof(c) || read(r->sock[h], &ack, 8) != 8)) {
					snprintf(w, sizeof(w), "%s: its control link closed", r->name_p[h]);
					rc = -EPIPE;
				}
				if (rc < 0) {
					failed++;
					if (!dead[h] && o < cap)
						o += (size_t)snprintf(why + o, cap - o, "parity row %u of stripe %u not made: %s; ", t, s, w);
					dead[h] = 1;
				}
			}
		}
	return failed;
}

static int restorer_main(rst *r)
{
	const ckpt_ecg *g = &r->g;
	char why[2000];
	fab_reopen(r);
	/* 1. member 0 lost; member 2 killed after the first stripe's fetches */
	kill_member(r, 0);
	uint8_t *dst = abuf(K * g->slice);
	r->kill_at = K + 1;
	r->kill_who = 2;
	if (ckpt__ecg_rebuild(g, r->e, 0, fetch, r, r->name_p, dst, why, sizeof(why)) < 0)
		T_FAIL("rebuild with member 2 killed during it: %s", why);
	T_ASSERT(r->fetches > r->kill_at && r->fetch_failed == 1); /* member 2, once: then known gone */
	if (memcmp(dst, r->img1[0], g->len[0]))
		T_FAIL("the rebuilt shard of member 0 is not bit-exact");
	printf("member 0 rebuilt bit-exact from the survivors, member 2 killed during the rebuild\n");
	/* 2. version 2 encoded; member 3 killed half way */
	r->kill_who = 3;
	unsigned failed = protect(r, why, sizeof(why));
	printf("encode of version 2: %u transfers failed: %s\n", failed, why);
	T_ASSERT(failed > 0);
	for (unsigned i = 0; i < N; i++) {
		char who[48];
		snprintf(who, sizeof(who), "%s:", r->name_p[i]);
		int gone = i == 0 || i == 2 || i == 3;
		if (gone != (strstr(why, who) != NULL))
			T_FAIL("the encode's errors %s member %u: %s", gone ? "do not name" : "name", i, why);
	}
	uint8_t *ref = abuf(g->slice);
	for (unsigned h = 0; h < N; h++) {
		if (h == 0 || h == 2 || h == 3)
			continue;
		cmd c = { CMD_SUMS, 0, 0, 0 };
		uint64_t sums[2 * M];
		T_ASSERT(write(r->sock[h], &c, sizeof(c)) == sizeof(c) && read(r->sock[h], sums, sizeof(sums)) == sizeof(sums));
		for (unsigned t = 0; t < M; t++) {
			unsigned s = (h + N - t) % N;
			parity(g, r->e, r->img1, s, t, ref);
			if (sums[t] != ckpt_kern_checksum(ref, g->slice))
				T_FAIL("member %u: version 1's parity row %u changed by version 2's encode", h, t);
			parity(g, r->e, r->img2, s, t, ref);
			if (sums[M + t] != ckpt_kern_checksum(ref, g->slice))
				T_FAIL("member %u: version 2's parity row %u is not the reference's", h, t);
		}
	}
	printf("surviving holders: version 2's rows complete and bit-exact, version 1's untouched\n");
	/* 3. three gone: refused, naming them */
	r->kill_at = 0;
	int rc = ckpt__ecg_rebuild(g, r->e, 0, fetch, r, r->name_p, dst, why, sizeof(why));
	if (rc != -ENODATA || !strstr(why, "stripe") || !strstr(why, r->name_p[2]) || !strstr(why, r->name_p[3]))
		T_FAIL("a rebuild with 3 of 6 lost must fail naming members 2 and 3: %d %s", rc, why);
	printf("with members 0, 2, 3 gone: %s\n", why);
	free(dst);
	free(ref);
	ckpt_fab_close(r->f);
	return 0;
}

int main(void)
{
	tn_cluster c;
	if (tn_create(&c, N + 1) < 0)
		return T_EXIT_SKIP;
	rst r = { 0 };
	uint64_t lens[N];
	char why[200];
	lens_of(lens);
	T_ASSERT(ckpt__ecg_init(&r.g, K, M, lens, why, sizeof(why)) == 0);
	T_ASSERT(ckpt_ec_new(K, M, &r.e, why, sizeof(why)) == 0);
	T_ASSERT(ckpt__ecg_blocks(&r.g) == 1);
	int sv[N][2], kreq[2], kdone[2];
	pid_t pid[N + 1];
	fflush(NULL);
	for (unsigned i = 0; i < N; i++) {
		T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]) == 0);
		pid[i] = fork();
		T_ASSERT(pid[i] >= 0);
		if (pid[i] == 0) {
			close(sv[i][0]);
			if (td_enter_netns(c.ns[i]) < 0)
				_exit(126);
			_exit(member_main(i, c.addr[i], sv[i][1]));
		}
		close(sv[i][1]);
		r.sock[i] = sv[i][0];
		snprintf(r.names[i], sizeof(r.names[i]), "member %u (%s)", i, c.addr[i]);
		r.name_p[i] = r.names[i];
	}
	for (unsigned i = 0; i < N; i++) {
		if (read(r.sock[i], &r.mem[i], sizeof(hello)) != sizeof(hello))
			T_FAIL("member %u did not start", i);
		if (r.mem[i].rc == -ENODATA) {
			fprintf(stderr, "skip: %s\n", r.mem[i].err);
			tn_destroy(&c);
			return T_EXIT_SKIP;
		}
		if (r.mem[i].rc)
			T_FAIL("member %u: %s", i, r.mem[i].err);
	}
	/* What the restorer knows: the images (it plays their owners) and the
	 * version-1 pieces' checksums, as their makers recorded them. */
	images(&r.g, 1, r.img1);
	images(&r.g, 2, r.img2);
	r.sums = calloc(N * N, sizeof(uint64_t));
	uint8_t *piece = abuf(r.g.slice);
	for (unsigned s = 0; s < N; s++)
		for (unsigned p = 0; p < N; p++) {
			if (p < K) {
				unsigned i = ckpt__ecg_holder(&r.g, s, p);
				r.sums[s * N + p] = ckpt__ecg_block_sum(&r.g, r.img1[i] + p * r.g.slice, ckpt__ecg_have(&r.g, i, p), 0);
			} else {
				parity(&r.g, r.e, r.img1, s, p - K, piece);
				r.sums[s * N + p] = ckpt__ecg_block_sum(&r.g, piece, r.g.slice, 0);
			}
		}
	free(piece);
	T_ASSERT(pipe(kreq) == 0 && pipe(kdone) == 0); /* after the members: they must not hold its write end */
	r.host = c.addr[N];
	r.killreq = kreq[1];
	r.killdone = kdone[0];
	pid[N] = fork();
	T_ASSERT(pid[N] >= 0);
	if (pid[N] == 0) {
		if (td_enter_netns(c.ns[N]) < 0)
			_exit(126);
		int rc = restorer_main(&r);
		fflush(NULL);
		_exit(rc);
	}
	close(kreq[1]);
	close(kdone[0]);
	/* Kill what the restorer asks for, until it is done. */
	char who;
	while (read(kreq[0], &who, 1) == 1) {
		if ((unsigned)who >= N || tn_empty(&c, who, 10000) < 0)
			T_FAIL("could not kill member %d", who);
		waitpid(pid[(unsigned)who], NULL, 0);
		pid[(unsigned)who] = 0;
		char k = 'k';
		T_ASSERT(write(kdone[1], &k, 1) == 1);
	}
	int st;
	T_ASSERT(waitpid(pid[N], &st, 0) == pid[N]);
	for (unsigned i = 0; i < N; i++) {
		cmd q = { CMD_QUIT, 0, 0, 0 };
		if (pid[i] && write(r.sock[i], &q, sizeof(q)) == sizeof(q))
			waitpid(pid[i], NULL, 0);
	}
	tn_destroy(&c);
	for (unsigned i = 0; i < N; i++) {
		free(r.img1[i]);
		free(r.img2[i]);
	}
	free(r.sums);
	ckpt_ec_free(r.e);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		T_FAIL("the restorer failed (status %d)", st);
	printf("ok\n");
	return T_EXIT_PASS;
}
