/* The ranks' transport: ZeroMQ over loopback TCP. Each rank binds one PULL
 * inbox on a free port and PUSHes to every peer's inbox. Messages from one
 * peer arrive in order, but peers interleave; a message that belongs to a
 * later collective (a peer can be one phase ahead) is parked until asked
 * for. Sums run in rank order, never in arrival order. */
#include "wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

typedef struct parked {
	uint32_t src;
	uint64_t seq;
	zmq_msg_t msg;
} parked;

struct tr_comm {
	void *zctx, *ctl, *inbox;
	void **peer;
	uint32_t rank, world;
	uint64_t seq;
	char endpoint[TR_EP_MAX];
	parked *park;
	size_t npark, cappark;
};

static int zerr(const char *what)
{
	int e = zmq_errno();
	fprintf(stderr, "trainer: %s: %s\n", what, zmq_strerror(e));
	return e > 0 ? -e : -EIO;
}

static int set_linger(void *s, int ms)
{
	return zmq_setsockopt(s, ZMQ_LINGER, &ms, sizeof(ms));
}

int tr_comm_open(tr_comm **out, uint32_t rank, uint32_t world, const char *coord)
{
	int err = -ENOMEM;
	tr_comm *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->rank = rank;
	c->world = world;
	c->peer = calloc(world, sizeof(*c->peer));
	if (!c->peer)
		goto fail;
	if (!(c->zctx = zmq_ctx_new())) {
		err = zerr("zmq_ctx_new");
		goto fail;
	}
	c->inbox = zmq_socket(c->zctx, ZMQ_PULL);
	c->ctl = zmq_socket(c->zctx, ZMQ_DEALER);
	if (!c->inbox || !c->ctl) {
		err = zerr("zmq_socket");
		goto fail;
	}
	/* Unsent messages to a dead peer must not hang the exit. */
	set_linger(c->inbox, 0);
	set_linger(c->ctl, 10000);
	if (zmq_bind(c->inbox, "tcp://127.0.0.1:*") < 0) {
		err = zerr("bind inbox");
		goto fail;
	}
	size_t len = sizeof(c->endpoint);
	if (zmq_getsockopt(c->inbox, ZMQ_LAST_ENDPOINT, c->endpoint, &len) < 0) {
		err = zerr("inbox endpoint");
		goto fail;
	}
	if (zmq_connect(c->ctl, coord) < 0) {
		err = zerr("connect to launcher");
		goto fail;
	}
	*out = c;
	return 0;
fail:
	tr_comm_close(c);
	return err;
}

void tr_comm_close(tr_comm *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->npark; i++)
		zmq_msg_close(&c->park[i].msg);
	free(c->park);
	for (uint32_t i = 0; c->peer && i < c->world; i++)
		if (c->peer[i])
			zmq_close(c->peer[i]);
	if (c->inbox)
		zmq_close(c->inbox);
	if (c->ctl)
		zmq_close(c->ctl);
	if (c->zctx)
		zmq_ctx_term(c->zctx);
	free(c->peer);
	free(c);
}

int tr_comm_handshake(tr_comm *c, const tr_hello *h, tr_welcome *w)
{
	tr_wire_hello hello = { .type = TR_MSG_HELLO, .h = *h };
	snprintf(hello.endpoint, sizeof(hello.endpoint), "%s", c->endpoint);
	if (tr_zsend(c->ctl, &hello, sizeof(hello), 0) < 0)
		return zerr("send hello");
	zmq_msg_t msg;
	zmq_msg_init(&msg);
	if (tr_zmsg_recv(&msg, c->ctl) < 0) {
		zmq_msg_close(&msg);
		return zerr("receive welcome");
	}
	size_t want = sizeof(tr_wire_welcome) + (size_t)c->world * TR_EP_MAX;
	const uint8_t *p = zmq_msg_data(&msg);
	tr_wire_welcome ww;
	if (zmq_msg_size(&msg) != want || (memcpy(&ww, p, sizeof(ww)), ww.type != TR_MSG_WELCOME)) {
		zmq_msg_close(&msg);
		fprintf(stderr, "trainer: rank %u: bad welcome from the launcher\n", c->rank);
		return -EPROTO;
	}
	*w = ww.w;
	int err = 0;
	for (uint32_t r = 0; r < c->world && !err; r++) {
		if (r == c->rank)
			continue;
		char ep[TR_EP_MAX];
		memcpy(ep, p + sizeof(ww) + (size_t)r * TR_EP_MAX, TR_EP_MAX);
		ep[TR_EP_MAX - 1] = '\0';
		if (!(c->peer[r] = zmq_socket(c->zctx, ZMQ_PUSH)))
			err = zerr("zmq_socket");
		else if (set_linger(c->peer[r], 10000) < 0 || zmq_connect(c->peer[r], ep) < 0)
			err = zerr("connect to peer");
	}
	zmq_msg_close(&msg);
	return err;
}

static int send_slice(tr_comm *c, uint32_t to, uint64_t seq, const float *p, size_t n)
{
	zmq_msg_t msg;
	size_t bytes = n * sizeof(float);
	if (zmq_msg_init_size(&msg, sizeof(tr_wire_data) + bytes) < 0)
		return zerr("zmq_msg_init_size");
	tr_wire_data hd = { .src = c->rank, .seq = seq };
	memcpy(zmq_msg_data(&msg), &hd, sizeof(hd));
	memcpy((uint8_t *)zmq_msg_data(&msg) + sizeof(hd), p, bytes);
	if (tr_zmsg_send(&msg, c->peer[to]) < 0) {
		zmq_msg_close(&msg);
		return zerr("send to peer");
	}
	return 0;
}

/* The message of collective seq from src, in msg (caller closes it). */
static int recv_slice(tr_comm *c, uint32_t src, uint64_t seq, size_t n, zmq_msg_t *msg)
{
	for (size_t i = 0; i < c->npark; i++)
		if (c->park[i].src == src && c->park[i].seq == seq) {
			*msg = c->park[i].msg;
			c->park[i] = c->park[--c->npark];
			if (zmq_msg_size(msg) == sizeof(tr_wire_data) + n * sizeof(float))
				return 0;
			zmq_msg_close(msg);
			fprintf(stderr, "trainer: rank %u: message of the wrong size\n", c->rank);
			return -EPROTO;
		}
	for (;;) {
		zmq_msg_init(msg);
		if (tr_zmsg_recv(msg, c->inbox) < 0) {
			zmq_msg_close(msg);
			return zerr("receive from peers");
		}
		tr_wire_data hd;
		/* A message of a later collective (a faster peer) may be of
		 * another size: it is parked, and checked when its turn comes. */
		if (zmq_msg_size(msg) < sizeof(hd) || (zmq_msg_size(msg) - sizeof(hd)) % sizeof(float)) {
			zmq_msg_close(msg);
			fprintf(stderr, "trainer: rank %u: message of the wrong size\n", c->rank);
			return -EPROTO;
		}
		memcpy(&hd, zmq_msg_data(msg), sizeof(hd));
		if (hd.src == src && hd.seq == seq) {
			if (zmq_msg_size(msg) == sizeof(hd) + n * sizeof(float))
				return 0;
			zmq_msg_close(msg);
			fprintf(stderr, "trainer: rank %u: message of the wrong size\n", c->rank);
			return -EPROTO;
		}
		if (c->npark == c->cappark) {
			size_t cap = c->cappark ? 2 * c->cappark : 2 * (size_t)c->world;
			parked *np = realloc(c->park, cap * sizeof(*np));
			if (!np) {
				zmq_msg_close(msg);
				return -ENOMEM;
			}
			c->park = np;
			c->cappark = cap;
		}
		c->park[c->npark++] = (parked){ .src = hd.src, .seq = hd.seq, .msg = *msg };
	}
}

int tr_comm_reduce_scatter(tr_comm *c, const float *in, float *out, size_t shard)
{
	uint64_t seq = ++c->seq;
	for (uint32_t r = 0; r < c->world; r++)
		if (r != c->rank) {
			int err = send_slice(c, r, seq, in + (size_t)r * shard, shard);
			if (err < 0)
				return err;
		}
	for (uint32_t s = 0; s < c->world; s++) {
		zmq_msg_t msg;
		const uint8_t *src = (const uint8_t *)(in + (size_t)c->rank * shard);
		if (s != c->rank) {
			int err = recv_slice(c, s, seq, shard, &msg);
			if (err < 0)
				return err;
			src = (const uint8_t *)zmq_msg_data(&msg) + sizeof(tr_wire_data);
		}
		/* ((c0 + c1) + c2) + ...: the same bits whoever arrives first.
		 * memcpy: a small message's payload need not be aligned. */
		if (s == 0)
			memcpy(out, src, shard * sizeof(float));
		else
			for (size_t i = 0; i < shard; i++) {
				float x;
				memcpy(&x, src + i * sizeof(float), sizeof(x));
				out[i] += x;
			}
		if (s != c->rank)
			zmq_msg_close(&msg);
	}
	return 0;
}

int tr_comm_all_gather(tr_comm *c, float *buf, size_t shard)
{
	uint64_t seq = ++c->seq;
	for (uint32_t r = 0; r < c->world; r++)
		if (r != c->rank) {
			int err = send_slice(c, r, seq, buf + (size_t)c->rank * shard, shard);
			if (err < 0)
				return err;
		}
	for (uint32_t s = 0; s < c->world; s++) {
		if (s == c->rank)
			continue;
		zmq_msg_t msg;
		int err = recv_slice(c, s, seq, shard, &msg);
		if (err < 0)
			return err;
		memcpy(buf + (size_t)s * shard, (const uint8_t *)zmq_msg_data(&msg) + sizeof(tr_wire_data),
		       shard * sizeof(float));
		zmq_msg_close(&msg);
	}
	return 0;
}

int tr_comm_report(tr_comm *c, const tr_done *d)
{
	tr_wire_done m = { .type = TR_MSG_DONE, .d = *d };
	if (tr_zsend(c->ctl, &m, sizeof(m), 0) < 0)
		return zerr("send report");
	return 0;
}
