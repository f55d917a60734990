/* Messages between the launcher and the ranks, and between ranks. Both
 * ends are the same binary on one machine, so structs go as raw bytes. */
#ifndef TR_WIRE_H
#define TR_WIRE_H

#include "trainer.h"

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

#endif
