/* The frame reader: frames cut out of any split of the byte stream,
 * oversized frames refused from their header, garbage refused from its
 * first bytes, slow frames refused at their deadline, bounded buffering. */
#include "wire/conn.h"
#include "helpers.h"
#include "wire/proto.h"
#include "samples.h"

#define SEC 1000000000ull

static ckptd_reader *reader(uint32_t max_frame, uint64_t timeout_ns)
{
	ckptd_reader_opts o = { .size = sizeof(o), .max_frame = max_frame, .frame_timeout_ns = timeout_ns };
	ckptd_reader *r;
	T_OK(ckptd_reader_new(&o, &r));
	return r;
}

/* A stream of every sample message, back to back. */
static uint8_t *stream(size_t *len, size_t *nframes)
{
	size_t cap = 1 << 20, n = 0;
	uint8_t *s = malloc(cap);
	T_ASSERT(s);
	*nframes = 0;
	for (size_t t = 0; t < T_NTYPES; t++)
		for (int v = 0; v < 2; v++) {
			ckptd_msg m;
			t_store st;
			size_t l;
			t_sample(&m, &st, t_types[t], v);
			T_OK(ckptd_msg_encode(&m, s + n, cap - n, &l));
			n += l;
			(*nframes)++;
		}
	*len = n;
	return s;
}

/* Feeds the stream in pieces of `step` bytes (0: random sizes), checks
 * that every frame comes out whole and in order. */
static void run_split(const uint8_t *s, size_t len, size_t nframes, size_t step, uint64_t seed)
{
	ckptd_reader *r = reader(0, 0);
	size_t fed = 0, got = 0, pos = 0;
	uint64_t x = seed;
	while (fed < len || ckptd_reader_buffered(r)) {
		size_t piece = step;
		if (!step) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			piece = 1 + (size_t)((x >> 33) % 3000);
		}
		if (piece > len - fed)
			piece = len - fed;
		long k = ckptd_reader_feed(r, s + fed, piece, 1);
		T_ASSERT(k >= 0);
		fed += (size_t)k;
		uint8_t *f;
		size_t fl;
		int e;
		while ((e = ckptd_reader_next(r, 1, &f, &fl)) == 1) {
			ckptd_msg m;
			const char *why;
			T_ASSERT(pos + fl <= len && !memcmp(f, s + pos, fl));
			T_OK(ckptd_msg_decode(f, fl, &m, &why));
			ckptd_msg_free(&m);
			pos += fl;
			got++;
		}
		T_ASSERT(e == 0);
		if (fed == len && k == 0 && ckptd_reader_buffered(r) && e == 0)
			T_FAIL("reader stuck with %zu bytes", ckptd_reader_buffered(r));
	}
	T_ASSERT(got == nframes && pos == len);
	T_ASSERT(ckptd_reader_deadline(r) == UINT64_MAX);
	ckptd_reader_free(r);
}

static void test_splits(void)
{
	size_t len, n;
	uint8_t *s = stream(&len, &n);
	static const size_t steps[] = { 1, 2, 3, 7, 15, 16, 17, 100, 4095, 4096, 4097, 65536, 1 << 20 };
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		run_split(s, len, n, steps[i], 0);
	for (uint64_t seed = 1; seed <= 20; seed++)
		run_split(s, len, n, 0, seed);
	free(s);
}

/* With space/commit (as a socket read would use it). */
static void test_space_commit(void)
{
	ckptd_reader *r = reader(0, 0);
	uint8_t *p;
	size_t cap;
	T_OK(ckptd_reader_space(r, &p, &cap));
	T_ASSERT(cap > 0 && cap <= CKPTD_READER_INITIAL);
	T_ERR(ckptd_reader_commit(r, cap + 1, 0), -EINVAL);
	ckptd_msg m;
	t_store st;
	uint8_t buf[4096];
	size_t l;
	t_sample(&m, &st, CKPTD_MSG_SHARD_DONE, 0);
	T_OK(ckptd_msg_encode(&m, buf, sizeof(buf), &l));
	memcpy(p, buf, 10);
	T_OK(ckptd_reader_commit(r, 10, 5));
	T_ASSERT(ckptd_reader_deadline(r) == 5 + CKPTD_DEFAULT_FRAME_TIMEOUT_NS);
	T_OK(ckptd_reader_space(r, &p, &cap));
	memcpy(p, buf + 10, 10);
	T_OK(ckptd_reader_commit(r, 10, 6));
	/* The header is known: no more room is offered than the frame needs. */
	T_OK(ckptd_reader_space(r, &p, &cap));
	T_ASSERT(cap == l - 20);
	memcpy(p, buf + 20, cap);
	T_OK(ckptd_reader_commit(r, cap, 7));
	uint8_t *f;
	size_t fl;
	T_ASSERT(ckptd_reader_next(r, 8, &f, &fl) == 1 && fl == l && !memcmp(f, buf, l));
	T_ASSERT(ckptd_reader_next(r, 8, &f, &fl) == 0);
	T_ASSERT(ckptd_reader_buffered(r) == 0 && ckptd_reader_deadline(r) == UINT64_MAX);
	ckptd_reader_free(r);
	ckptd_reader_free(NULL);
}

/* A header declaring too much: refused the moment the header is complete,
 * before the body, and the buffer never grows for it. */
static void test_oversized(void)
{
	uint8_t h[CKPTD_HEADER_LEN + 64] = { 0 };
	ckptd_frame_header fh = { .major = 1, .type = CKPTD_MSG_STATUS, .length = CKPTD_MAX_PAYLOAD + 1 };
	ckptd_header_encode(h, &fh);
	ckptd_reader *r = reader(0, 0);
	T_ASSERT(ckptd_reader_feed(r, h, 15, 0) == 15);
	uint8_t *f;
	size_t fl;
	T_ASSERT(ckptd_reader_next(r, 0, &f, &fl) == 0);
	T_ERR((int)ckptd_reader_feed(r, h + 15, 1, 0), -EMSGSIZE);
	T_ERR(ckptd_reader_next(r, 0, &f, &fl), -EMSGSIZE);
	uint8_t *p;
	size_t cap;
	T_ERR(ckptd_reader_space(r, &p, &cap), -EMSGSIZE); /* sticky */
	T_ASSERT(ckptd_reader_why(r) != NULL);
	T_ASSERT(ckptd_reader_capacity(r) <= CKPTD_READER_INITIAL);
	printf("oversized: %s\n", ckptd_reader_why(r));
	ckptd_reader_free(r);

	/* A lower limit per connection (e.g. for ranks). */
	r = reader(1024, 0);
	fh.length = 1024 - CKPTD_HEADER_LEN + 1;
	ckptd_header_encode(h, &fh);
	T_ERR((int)ckptd_reader_feed(r, h, sizeof(h), 0), -EMSGSIZE);
	ckptd_reader_free(r);
	r = reader(1024, 0);
	fh.length = 1024 - CKPTD_HEADER_LEN;
	ckptd_header_encode(h, &fh);
	T_ASSERT(ckptd_reader_feed(r, h, sizeof(h), 0) == (long)sizeof(h));
	ckptd_reader_free(r);

	/* A frame at the limit, declared honestly but sent slowly, makes the
	 * buffer grow only with what has arrived. */
	r = reader(0, 0);
	fh.length = CKPTD_MAX_PAYLOAD;
	ckptd_header_encode(h, &fh);
	T_ASSERT(ckptd_reader_feed(r, h, CKPTD_HEADER_LEN, 0) == CKPTD_HEADER_LEN);
	uint8_t chunk[1000] = { 0 };
	size_t sent = CKPTD_HEADER_LEN;
	for (int i = 0; i < 100; i++) {
		T_ASSERT(ckptd_reader_feed(r, chunk, sizeof(chunk), 0) == (long)sizeof(chunk));
		sent += sizeof(chunk);
		T_ASSERT(ckptd_reader_capacity(r) <= 2 * sent + CKPTD_READER_INITIAL);
	}
	ckptd_reader_free(r);
}

/* Garbage is refused from its first bytes. */
static void test_garbage(void)
{
	ckptd_reader *r = reader(0, 0);
	T_ERR((int)ckptd_reader_feed(r, "GET / HTTP/1.1\r\n", 16, 0), -CKPT_ECORRUPT);
	ckptd_reader_free(r);
	r = reader(0, 0);
	T_ERR((int)ckptd_reader_feed(r, "C", 1, 0), 1); /* a good first byte */
	T_ERR((int)ckptd_reader_feed(r, "X", 1, 0), -CKPT_ECORRUPT);
	ckptd_reader_free(r);
	/* Garbage after a good frame. */
	r = reader(0, 0);
	ckptd_msg m = { .type = CKPTD_MSG_STATUS };
	uint8_t buf[64];
	size_t l;
	T_OK(ckptd_msg_encode(&m, buf, sizeof(buf), &l));
	buf[l] = 0;
	T_ASSERT(ckptd_reader_feed(r, buf, l + 1, 0) == (long)l + 1);
	uint8_t *f;
	size_t fl;
	T_ASSERT(ckptd_reader_next(r, 0, &f, &fl) == 1 && fl == l);
	T_ERR(ckptd_reader_next(r, 0, &f, &fl), -CKPT_ECORRUPT);
	ckptd_reader_free(r);
}

/* A frame that dribbles in: refused at its deadline, measured from its
 * first byte, however steadily bytes keep coming. */
static void test_slowloris(void)
{
	ckptd_msg m;
	t_store st;
	uint8_t buf[4096];
	size_t l;
	t_sample(&m, &st, CKPTD_MSG_VERSIONS, 0);
	T_OK(ckptd_msg_encode(&m, buf, sizeof(buf), &l));
	ckptd_reader *r = reader(0, 5 * SEC);
	uint64_t t0 = 1000 * SEC, now = t0;
	uint8_t *f;
	size_t fl;
	size_t i = 0;
	int e = 0;
	for (; i < l - 1; i++) {
		now = t0 + i * (SEC / 10); /* a byte every 100 ms */
		if (ckptd_reader_feed(r, buf + i, 1, now) != 1)
			break;
		e = ckptd_reader_next(r, now, &f, &fl);
		if (e)
			break;
		T_ASSERT(ckptd_reader_deadline(r) == t0 + 5 * SEC);
	}
	T_ERR(e, -ETIMEDOUT);
	T_ASSERT(now > t0 + 5 * SEC && now <= t0 + 5 * SEC + SEC / 10);
	printf("slowloris: dropped after %zu of %zu bytes: %s\n", i + 1, l, ckptd_reader_why(r));
	ckptd_reader_free(r);

	/* Silence after half a frame: the caller's poll wakes at the deadline
	 * and next() refuses it then, not before. */
	r = reader(0, 5 * SEC);
	T_ASSERT(ckptd_reader_feed(r, buf, 20, t0) == 20);
	T_ASSERT(ckptd_reader_next(r, t0 + 5 * SEC, &f, &fl) == 0);
	T_ERR(ckptd_reader_next(r, t0 + 5 * SEC + 1, &f, &fl), -ETIMEDOUT);
	ckptd_reader_free(r);

	/* Idle between frames is not a frame in progress. */
	r = reader(0, 5 * SEC);
	T_ASSERT(ckptd_reader_feed(r, buf, l, t0) == (long)l);
	T_ASSERT(ckptd_reader_next(r, t0, &f, &fl) == 1);
	T_ASSERT(ckptd_reader_next(r, t0 + 3600 * SEC, &f, &fl) == 0);
	/* Each frame gets its own deadline. */
	T_ASSERT(ckptd_reader_feed(r, buf, 20, t0 + 3600 * SEC) == 20);
	T_ASSERT(ckptd_reader_deadline(r) == t0 + 3605 * SEC);
	T_ASSERT(ckptd_reader_feed(r, buf + 20, l - 20, t0 + 3604 * SEC) == (long)(l - 20));
	T_ASSERT(ckptd_reader_next(r, t0 + 3604 * SEC, &f, &fl) == 1 && fl == l);
	ckptd_reader_free(r);
}

int main(void)
{
	ckptd_reader_opts bad = { .size = 2 };
	ckptd_reader *r;
	T_ERR(ckptd_reader_new(&bad, &r), -EINVAL);
	T_OK(ckptd_reader_new(NULL, &r));
	ckptd_reader_free(r);
	test_splits();
	test_space_commit();
	test_oversized();
	test_garbage();
	test_slowloris();
	printf("test_conn: ok\n");
	return T_EXIT_PASS;
}
