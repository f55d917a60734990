/* The control protocol's message tables, shared by the codec (proto.c)
 * and the tables themselves (proto_msgs.c). Internal to ckptd/. */
#ifndef CKPTD_PROTO_INT_H
#define CKPTD_PROTO_INT_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* How a string field is checked. */
enum { CK_NONE, CK_JOB, CK_NAME, CK_ADDR, CK_TEXT, CK_PATH };

typedef struct ckptd__schema ckptd__schema;

typedef struct ckptd__field {
	uint16_t tag;
	uint8_t wire;
	uint8_t required;
	uint8_t check;      /* CK_*, strings only */
	uint32_t max;       /* STR: max length; BYTES: exact length; LIST: max count */
	size_t off;         /* of the member in the record struct */
	size_t count_off;   /* LIST: of the uint32_t count member */
	const ckptd__schema *item; /* LIST: schema of one entry */
} ckptd__field;

struct ckptd__schema {
	const ckptd__field *f;
	unsigned n;
	size_t size; /* of the record struct (list entries) */
	/* Checks relations between fields; returns a reason or NULL. */
	const char *(*check)(const void *rec);
};

/* How a message's job (the top-level field tagged CKPTD_TAG_JOB, found in
 * its schema, so that no message can leave it out) is held to a job-scoped
 * session's job (ckptd_msg_job_allowed). */
enum {
	CKPTD__JOB_OWN = 0,      /* that job only */
	CKPTD__JOB_OWN_OR_EMPTY, /* that job, or "" meaning that job (STATUS) */
};

/* One message type: its name, the schema of its payload, its job rule. */
typedef struct ckptd__msgdef {
	uint16_t type;
	const char *name;
	ckptd__schema s;
	uint8_t job_rule; /* CKPTD__JOB_* */
} ckptd__msgdef;

/* The i-th entry of the table, or NULL past the last. */
const ckptd__msgdef *ckptd__msg_at(size_t i);

/* The table entry of a message type, or NULL when it is unknown. */
const ckptd__msgdef *ckptd__find_msg(uint16_t type);

#endif
