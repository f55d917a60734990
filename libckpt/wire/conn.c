/* Frame reader of one connection (conn.h). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

struct ckptd_reader {
	uint8_t *buf;
	size_t cap;
	size_t head, tail;   /* bytes held: buf[head, tail) */
	size_t offered;      /* room the last ckptd_reader_space() gave */
	size_t frame_len;    /* of the frame at head, once its header is known; else 0 */
	uint64_t start_ns;   /* when the first byte of the frame at head arrived */
	uint64_t last_ns;    /* time of the last commit */
	uint32_t max_frame;
	uint64_t timeout_ns;
	int err;
	const char *why;
};

static int set_err(ckptd_reader *r, int err, const char *why)
{
	r->err = err;
	r->why = why;
	return err;
}

int ckptd_reader_new(const ckptd_reader_opts *opts, ckptd_reader **out)
{
	*out = NULL;
	ckptd_reader_opts o = { 0 };
	if (opts) {
		/* A caller built against a shorter struct sets fewer fields. */
		if (opts->size < offsetof(ckptd_reader_opts, max_frame) + sizeof(opts->max_frame))
			return -EINVAL;
		memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
	}
	ckptd_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->max_frame = o.max_frame && o.max_frame <= CKPTD_MAX_FRAME ? o.max_frame : CKPTD_MAX_FRAME;
	if (r->max_frame < CKPTD_HEADER_LEN)
		r->max_frame = CKPTD_HEADER_LEN;
	r->timeout_ns = o.frame_timeout_ns ? o.frame_timeout_ns : CKPTD_DEFAULT_FRAME_TIMEOUT_NS;
	*out = r;
	return 0;
}

void ckptd_reader_free(ckptd_reader *r)
{
	if (!r)
		return;
	free(r->buf);
	free(r);
}

/* Looks at the frame at head: a wrong magic is refused from its first
 * bytes, a size over the limit as soon as the header is complete. */
static int scan(ckptd_reader *r)
{
	if (r->err)
		return r->err;
	size_t have = r->tail - r->head;
	if (r->frame_len || !have)
		return 0;
	static const uint8_t magic[4] = { CKPTD_MAGIC & 0xff, (CKPTD_MAGIC >> 8) & 0xff,
	                                  (CKPTD_MAGIC >> 16) & 0xff, CKPTD_MAGIC >> 24 };
	if (memcmp(r->buf + r->head, magic, have < 4 ? have : 4))
		return set_err(r, -CKPT_ECORRUPT, "bad magic: not a ckptd frame");
	if (have < CKPTD_HEADER_LEN)
		return 0;
	ckptd_frame_header h;
	const char *why = NULL;
	int e = ckptd_header_decode(r->buf + r->head, have, &h, &why);
	if (e < 0)
		return set_err(r, e, why);
	if ((uint64_t)h.length + CKPTD_HEADER_LEN > r->max_frame)
		return set_err(r, -EMSGSIZE, "frame larger than this connection allows");
	r->frame_len = CKPTD_HEADER_LEN + (size_t)h.length;
	return 0;
}

int ckptd_reader_space(ckptd_reader *r, uint8_t **buf, size_t *cap)
{
	if (r->err)
		return r->err;
	int e = scan(r);
	if (e < 0)
		return e;
	/* Frames returned before are dropped now, not earlier: their bytes
	 * stay valid until the call after next(). */
	if (r->head) {
		memmove(r->buf, r->buf + r->head, r->tail - r->head);
		r->tail -= r->head;
		r->head = 0;
	}
	size_t have = r->tail;
	size_t target;
	if (r->frame_len && have < r->frame_len)
		target = r->frame_len;
	else if (r->frame_len)
		target = r->frame_len + CKPTD_READER_INITIAL; /* complete: next() should run */
	else
		target = CKPTD_READER_INITIAL;
	if (have >= target)
		return -ENOBUFS;
	if (r->cap < target && r->cap - have < CKPTD_READER_INITIAL / 4) {
		/* Grow with what arrives (doubling once nearly full), never past
		 * the frame's declared size. */
		size_t nc = r->cap ? r->cap * 2 : CKPTD_READER_INITIAL;
		if (nc > target)
			nc = target;
		uint8_t *nb = realloc(r->buf, nc);
		if (!nb)
			return -ENOMEM;
		r->buf = nb;
		r->cap = nc;
	}
	size_t room = (r->cap < target ? r->cap : target) - have;
	if (!room)
		return -ENOBUFS;
	r->offered = room;
	*buf = r->buf + have;
	*cap = room;
	return 0;
}

int ckptd_reader_commit(ckptd_reader *r, size_t n, uint64_t now_ns)
{
	if (r->err)
		return r->err;
	if (n > r->offered)
		return -EINVAL;
	r->offered = 0;
	if (!n)
		return 0;
	if (r->tail == r->head)
		r->start_ns = now_ns;
	r->tail += n;
	r->last_ns = now_ns;
	return scan(r);
}

long ckptd_reader_feed(ckptd_reader *r, const void *data, size_t len, uint64_t now_ns)
{
	size_t taken = 0;
	while (taken < len) {
		uint8_t *p;
		size_t cap;
		int e = ckptd_reader_space(r, &p, &cap);
		if (e == -ENOBUFS)
			break;
		if (e < 0)
			return e;
		size_t n = len - taken < cap ? len - taken : cap;
		memcpy(p, (const uint8_t *)data + taken, n);
		taken += n;
		e = ckptd_reader_commit(r, n, now_ns);
		if (e < 0)
			return e;
	}
	return (long)taken;
}

int ckptd_reader_next(ckptd_reader *r, uint64_t now_ns, uint8_t **frame, size_t *len)
{
	int e = scan(r);
	if (e < 0)
		return e;
	size_t have = r->tail - r->head;
	if (r->frame_len && have >= r->frame_len) {
		*frame = r->buf + r->head;
		*len = r->frame_len;
		r->head += r->frame_len;
		r->frame_len = 0;
		/* What follows arrived with the last read at the latest. */
		if (r->head < r->tail)
			r->start_ns = r->last_ns;
		return 1;
	}
	if (have && now_ns > r->start_ns && now_ns - r->start_ns > r->timeout_ns)
		return set_err(r, -ETIMEDOUT, "frame not complete within the timeout");
	return 0;
}

uint64_t ckptd_reader_deadline(const ckptd_reader *r)
{
	if (r->err || r->tail == r->head)
		return UINT64_MAX;
	return r->start_ns > UINT64_MAX - r->timeout_ns ? UINT64_MAX : r->start_ns + r->timeout_ns;
}

size_t ckptd_reader_buffered(const ckptd_reader *r)
{
	return r->tail - r->head;
}

size_t ckptd_reader_capacity(const ckptd_reader *r)
{
	return r->cap;
}

const char *ckptd_reader_why(const ckptd_reader *r)
{
	return r->err ? r->why : NULL;
}
