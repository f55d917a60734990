/* Messages between the launcher and the ranks, and between ranks. Both
 * ends are the same binary on one machine, so structs go as raw bytes. */
#ifndef TR_WIRE_H
#define TR_WIRE_H

#include "trainer.h"

#include <errno.h>
#include <zmq.h>

#define TR_EP_MAX 64 /* "tcp://127.0.0.1:65535" and room to spare */

enum { TR_MSG_HELLO = 0x48454c4f, TR_MSG_WELCOME = 0x57454c43, TR_MSG_DONE = 0x444f4e45 };

typedef struct tr_wire_hello {
	uint32_t type;
	tr_hello h;
	char endpoint[TR_EP_MAX]; /* the rank's inbox */
} tr_wire_hello;

/* Followed by world endpoints of TR_EP_MAX bytes. */
typedef struct tr_wire_welcome {
	uint32_t type;
	tr_welcome w;
} tr_wire_welcome;

typedef struct tr_wire_done {
	uint32_t type;
	tr_done d;
} tr_wire_done;

/* Header of a collective's message between ranks. */
typedef struct tr_wire_data {
	uint32_t src;
	uint32_t pad;
	uint64_t seq; /* which collective of the run */
} tr_wire_data;

/* ZeroMQ's send and receive, retried on EINTR: a preemption signal lands
 * while a rank waits in a collective or the launcher passes it on, and
 * ZeroMQ returns EINTR whatever SA_RESTART says (the rank carries on to
 * ckpt_step, which sees the notice). */
static inline int tr_zsend(void *s, const void *buf, size_t len, int flags)
{
	int r;
	while ((r = zmq_send(s, buf, len, flags)) < 0 && zmq_errno() == EINTR)
		;
	return r;
}

static inline int tr_zrecv(void *s, void *buf, size_t len, int flags)
{
	int r;
	while ((r = zmq_recv(s, buf, len, flags)) < 0 && zmq_errno() == EINTR)
		;
	return r;
}

static inline int tr_zmsg_send(zmq_msg_t *msg, void *s)
{
	int r;
	while ((r = zmq_msg_send(msg, s, 0)) < 0 && zmq_errno() == EINTR)
		;
	return r;
}

static inline int tr_zmsg_recv(zmq_msg_t *msg, void *s)
{
	int r;
	while ((r = zmq_msg_recv(msg, s, 0)) < 0 && zmq_errno() == EINTR)
		;
	return r;
}

#endif
