/* The control protocol's codec: one table per message type (proto_msgs.c)
 * says which fields it carries, and one generic encoder and decoder walk the
 * tables. The layout is specified in docs/protocol.md. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_int.h"
#include "base/common.h"

const char *ckptd_msg_name(uint16_t type)
{
	const ckptd__msgdef *d = ckptd__find_msg(type);
	return d ? d->name : NULL;
}

uint16_t ckptd_msg_type_at(size_t i)
{
	const ckptd__msgdef *d = ckptd__msg_at(i);
	return d ? d->type : 0;
}

/* ---------------------------------------------------------------- job scope */

/* Where a type's job field lies in the payload, found in its schema; -1
 * when it carries none. */
static ptrdiff_t job_off(uint16_t type)
{
	const ckptd__msgdef *d = ckptd__find_msg(type);
	for (unsigned i = 0; d && i < d->s.n; i++)
		if (d->s.f[i].tag == CKPTD_TAG_JOB && d->s.f[i].wire == CKPTD_WIRE_STR)
			return (ptrdiff_t)d->s.f[i].off;
	return -1;
}

char *ckptd_msg_job_mut(ckptd_msg *m)
{
	ptrdiff_t off = job_off(m->type);
	return off < 0 ? NULL : (char *)&m->u + off;
}

const char *ckptd_msg_job(const ckptd_msg *m)
{
	ptrdiff_t off = job_off(m->type);
	return off < 0 ? NULL : (const char *)&m->u + off;
}

int ckptd_msg_job_allowed(const ckptd_msg *m, const char *session_job)
{
	const char *job = ckptd_msg_job(m);
	if (!job || !session_job[0] || !strcmp(job, session_job))
		return 1;
	const ckptd__msgdef *d = ckptd__find_msg(m->type);
	return d->job_rule == CKPTD__JOB_OWN_OR_EMPTY && !job[0];
}

/* ---------------------------------------------------------------- strings */

/* s: len bytes, no NUL guaranteed. Returns a reason or NULL. */
static const char *check_str(int ck, const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	switch (ck) {
	case CK_JOB:
	case CK_NAME:
		/* Job ids name directories; node names end up in them too. */
		return ckpt__name_check(str, len);
	case CK_ADDR:
		if (len == 0)
			return "empty address";
		for (size_t i = 0; i < len; i++)
			if (s[i] < 0x21 || s[i] > 0x7e)
				return "address holds a space or a non-printable byte";
		return NULL;
	case CK_PATH:
		/* Absolute, printable, no ".." component: the agent deletes under it. */
		if (len == 0 || s[0] != '/')
			return "path is not absolute";
		for (size_t i = 0; i < len; i++)
			if (s[i] < 0x20 || s[i] > 0x7e)
				return "path holds a non-printable byte";
		for (size_t i = 0; i + 2 < len; i++)
			if (s[i] == '/' && s[i + 1] == '.' && s[i + 2] == '.' && (i + 3 == len || s[i + 3] == '/'))
				return "path holds a '..' component";
		return NULL;
	case CK_TEXT:
		/* Printable only: text ends up in log lines, one per event. */
		for (size_t i = 0; i < len; i++)
			if (s[i] < 0x20 || s[i] > 0x7e)
				return "text holds a non-printable byte";
		return NULL;
	}
	return NULL;
}

/* ---------------------------------------------------------------- header */

void ckptd_header_encode(uint8_t *buf, const ckptd_frame_header *h)
{
	ckpt__put_le32(buf, CKPTD_MAGIC);
	buf[4] = h->major;
	buf[5] = h->minor;
	ckpt__put_le16(buf + 6, h->type);
	ckpt__put_le32(buf + 8, h->flags);
	ckpt__put_le32(buf + 12, h->length);
}

int ckptd_header_decode(const uint8_t *buf, size_t len, ckptd_frame_header *h, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	if (len < CKPTD_HEADER_LEN) {
		*why = "short header";
		return -EINVAL;
	}
	if (ckpt__get_le32(buf) != CKPTD_MAGIC) {
		*why = "bad magic";
		return -CKPT_ECORRUPT;
	}
	h->major = buf[4];
	h->minor = buf[5];
	h->type = ckpt__get_le16(buf + 6);
	h->flags = ckpt__get_le32(buf + 8);
	h->length = ckpt__get_le32(buf + 12);
	if (h->length > CKPTD_MAX_PAYLOAD) {
		*why = "frame larger than the protocol allows";
		return -EMSGSIZE;
	}
	return 0;
}

/* ---------------------------------------------------------------- access */

static uint32_t rd_u32(const void *base, size_t off)
{
	uint32_t v;
	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}
static uint64_t rd_u64(const void *base, size_t off)
{
	uint64_t v;
	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}
static void *rd_ptr(const void *base, size_t off)
{
	void *v;
	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}
static void wr_u32(void *base, size_t off, uint32_t v) { memcpy((char *)base + off, &v, sizeof(v)); }
static void wr_u64(void *base, size_t off, uint64_t v) { memcpy((char *)base + off, &v, sizeof(v)); }
static void wr_ptr(void *base, size_t off, void *v) { memcpy((char *)base + off, &v, sizeof(v)); }

/* ---------------------------------------------------------------- encoder */

/* Whether the field is sent: required ones always, optional ones when not
 * at their default. */
static bool field_sent(const ckptd__field *f, const void *rec)
{
	if (f->required)
		return true;
	switch (f->wire) {
	case CKPTD_WIRE_U32: return rd_u32(rec, f->off) != 0;
	case CKPTD_WIRE_U64: return rd_u64(rec, f->off) != 0;
	case CKPTD_WIRE_STR: return ((const char *)rec + f->off)[0] != '\0';
	case CKPTD_WIRE_LIST: return rd_u32(rec, f->count_off) != 0;
	}
	return true;
}

/* Checks a record as the decoder will, and adds its encoded size to *size.
 * Returns 0, -EINVAL or -EMSGSIZE. */
static int rec_size(const ckptd__schema *s, const void *rec, uint64_t *size)
{
	for (unsigned i = 0; i < s->n; i++) {
		const ckptd__field *f = &s->f[i];
		if (!field_sent(f, rec))
			continue;
		*size += CKPTD_FIELD_HEADER_LEN;
		switch (f->wire) {
		case CKPTD_WIRE_U32: *size += 4; break;
		case CKPTD_WIRE_U64: *size += 8; break;
		case CKPTD_WIRE_BYTES: *size += f->max; break;
		case CKPTD_WIRE_STR: {
			const char *str = (const char *)rec + f->off;
			size_t n = strnlen(str, f->max + 1);
			if (n > f->max || check_str(f->check, str, n))
				return -EINVAL;
			*size += n;
			break;
		}
		case CKPTD_WIRE_LIST: {
			uint32_t count = rd_u32(rec, f->count_off);
			const uint8_t *items = rd_ptr(rec, f->off);
			if (count > f->max || !items)
				return -EINVAL;
			*size += 4;
			for (uint32_t k = 0; k < count; k++) {
				*size += 4;
				int r = rec_size(f->item, items + (size_t)k * f->item->size, size);
				if (r < 0)
					return r;
				if (*size > CKPTD_MAX_MESSAGE - CKPTD_HEADER_LEN)
					return -EMSGSIZE;
			}
			break;
		}
		}
	}
	if (s->check && s->check(rec))
		return -EINVAL;
	return *size > CKPTD_MAX_MESSAGE - CKPTD_HEADER_LEN ? -EMSGSIZE : 0;
}

static uint8_t *put_field_header(uint8_t *p, const ckptd__field *f, uint32_t len)
{
	ckpt__put_le16(p, f->tag);
	p[2] = f->wire;
	p[3] = 0;
	ckpt__put_le32(p + 4, len);
	return p + CKPTD_FIELD_HEADER_LEN;
}

/* Writes a record already checked by rec_size(). */
static uint8_t *rec_write(const ckptd__schema *s, const void *rec, uint8_t *p)
{
	for (unsigned i = 0; i < s->n; i++) {
		const ckptd__field *f = &s->f[i];
		if (!field_sent(f, rec))
			continue;
		switch (f->wire) {
		case CKPTD_WIRE_U32:
			p = put_field_header(p, f, 4);
			ckpt__put_le32(p, rd_u32(rec, f->off));
			p += 4;
			break;
		case CKPTD_WIRE_U64:
			p = put_field_header(p, f, 8);
			ckpt__put_le64(p, rd_u64(rec, f->off));
			p += 8;
			break;
		case CKPTD_WIRE_BYTES:
			p = put_field_header(p, f, f->max);
			memcpy(p, (const char *)rec + f->off, f->max);
			p += f->max;
			break;
		case CKPTD_WIRE_STR: {
			const char *str = (const char *)rec + f->off;
			size_t n = strlen(str);
			p = put_field_header(p, f, (uint32_t)n);
			memcpy(p, str, n);
			p += n;
			break;
		}
		case CKPTD_WIRE_LIST: {
			uint32_t count = rd_u32(rec, f->count_off);
			const uint8_t *items = rd_ptr(rec, f->off);
			uint8_t *start = p;
			p = put_field_header(p, f, 0);
			ckpt__put_le32(p, count);
			p += 4;
			for (uint32_t k = 0; k < count; k++) {
				uint8_t *item = p;
				p = rec_write(f->item, items + (size_t)k * f->item->size, p + 4);
				ckpt__put_le32(item, (uint32_t)(p - item - 4));
			}
			/* The list's length is known once its items are written. */
			ckpt__put_le32(start + 4, (uint32_t)(p - start - CKPTD_FIELD_HEADER_LEN));
			break;
		}
		}
	}
	return p;
}

long ckptd_msg_encoded_size(const ckptd_msg *m)
{
	if (!m)
		return -EINVAL;
	const ckptd__msgdef *d = ckptd__find_msg(m->type);
	if (!d)
		return -EINVAL;
	uint64_t size = 0;
	int r = rec_size(&d->s, &m->u, &size);
	if (r < 0)
		return r;
	return (long)(size + CKPTD_HEADER_LEN);
}

int ckptd_msg_encode(const ckptd_msg *m, uint8_t *buf, size_t cap, size_t *len)
{
	long total = ckptd_msg_encoded_size(m);
	if (total < 0)
		return (int)total;
	if (!buf || (size_t)total > cap)
		return -ENOBUFS;
	const ckptd__msgdef *d = ckptd__find_msg(m->type);
	ckptd_frame_header h = { .major = CKPTD_PROTO_MAJOR, .minor = CKPTD_PROTO_MINOR, .type = m->type,
	                         .flags = 0, .length = (uint32_t)(total - CKPTD_HEADER_LEN) };
	ckptd_header_encode(buf, &h);
	uint8_t *end = rec_write(&d->s, &m->u, buf + CKPTD_HEADER_LEN);
	if (end != buf + total)
		return -EINVAL; /* cannot happen: size and writer walk the same table */
	if (len)
		*len = (size_t)total;
	return 0;
}

/* ---------------------------------------------------------------- decoder */

static void rec_free(const ckptd__schema *s, void *rec)
{
	for (unsigned i = 0; i < s->n; i++) {
		const ckptd__field *f = &s->f[i];
		if (f->wire == CKPTD_WIRE_LIST) {
			free(rd_ptr(rec, f->off));
			wr_ptr(rec, f->off, NULL);
			wr_u32(rec, f->count_off, 0);
		}
	}
}

/* Fewest bytes one entry of schema s can take on the wire: its length
 * prefix and its required fields at their shortest. Bounds the entries a
 * list of given bytes can claim, so that a small frame cannot make the
 * decoder allocate much. */
static uint64_t min_entry_bytes(const ckptd__schema *s)
{
	uint64_t n = 4;
	for (unsigned i = 0; i < s->n; i++) {
		const ckptd__field *f = &s->f[i];
		if (!f->required)
			continue;
		n += CKPTD_FIELD_HEADER_LEN;
		switch (f->wire) {
		case CKPTD_WIRE_U32: n += 4; break;
		case CKPTD_WIRE_U64: n += 8; break;
		case CKPTD_WIRE_BYTES: n += f->max; break;
		case CKPTD_WIRE_STR: n += f->check == CK_TEXT || f->check == CK_NONE ? 0 : 1; break;
		case CKPTD_WIRE_LIST: n += 4; break;
		}
	}
	return n;
}

#define BAD(reason) do { *why = (reason); return -CKPT_ECORRUPT; } while (0)

static int rec_decode(const ckptd__schema *s, const uint8_t *p, const uint8_t *end, void *rec, int depth,
                      const char **why);

static int list_decode(const ckptd__field *f, const uint8_t *v, uint32_t vlen, void *rec, int depth,
                       const char **why)
{
	/* Entries hold scalars and strings only: lists nest one level deep. */
	if (depth > 0)
		BAD("list inside a list entry");
	if (vlen < 4)
		BAD("list shorter than its count");
	uint32_t count = ckpt__get_le32(v);
	if (count > f->max)
		BAD("list has more entries than allowed");
	if ((uint64_t)count * min_entry_bytes(f->item) > vlen - 4)
		BAD("list count larger than its bytes can hold");
	uint8_t *items = calloc(count ? count : 1, f->item->size);
	if (!items) {
		*why = "out of memory";
		return -ENOMEM;
	}
	wr_ptr(rec, f->off, items); /* owned from here: freed with the message */
	wr_u32(rec, f->count_off, count);
	const uint8_t *q = v + 4, *vend = v + vlen;
	for (uint32_t k = 0; k < count; k++) {
		if (vend - q < 4)
			BAD("list entry length truncated");
		uint32_t ilen = ckpt__get_le32(q);
		q += 4;
		if (ilen > (size_t)(vend - q))
			BAD("list entry longer than its list");
		int r = rec_decode(f->item, q, q + ilen, items + (size_t)k * f->item->size, depth + 1, why);
		if (r < 0)
			return r;
		q += ilen;
	}
	if (q != vend)
		BAD("bytes after the last list entry");
	return 0;
}

static int rec_decode(const ckptd__schema *s, const uint8_t *p, const uint8_t *end, void *rec, int depth,
                      const char **why)
{
	uint64_t seen = 0;
	while (p < end) {
		if (end - p < (ptrdiff_t)CKPTD_FIELD_HEADER_LEN)
			BAD("field header truncated");
		uint16_t tag = ckpt__get_le16(p);
		uint8_t wire = p[2];
		uint32_t flen = ckpt__get_le32(p + 4);
		if (p[3])
			BAD("field reserved byte not zero");
		if (wire < CKPTD_WIRE_U32 || wire > CKPTD_WIRE_LIST)
			BAD("unknown field wire type");
		p += CKPTD_FIELD_HEADER_LEN;
		if (flen > (size_t)(end - p))
			BAD("field longer than what holds it");
		const uint8_t *v = p;
		p += flen;
		unsigned i;
		for (i = 0; i < s->n && s->f[i].tag != tag; i++)
			;
		if (i == s->n)
			continue; /* a field of a newer minor version */
		const ckptd__field *f = &s->f[i];
		if (f->wire != wire)
			BAD("field has the wrong wire type");
		if (seen & (1ull << i))
			BAD("field appears twice");
		seen |= 1ull << i;
		switch (wire) {
		case CKPTD_WIRE_U32:
			if (flen != 4)
				BAD("u32 field not 4 bytes");
			wr_u32(rec, f->off, ckpt__get_le32(v));
			break;
		case CKPTD_WIRE_U64:
			if (flen != 8)
				BAD("u64 field not 8 bytes");
			wr_u64(rec, f->off, ckpt__get_le64(v));
			break;
		case CKPTD_WIRE_BYTES:
			if (flen != f->max)
				BAD("bytes field of the wrong length");
			memcpy((char *)rec + f->off, v, flen);
			break;
		case CKPTD_WIRE_STR: {
			if (flen > f->max)
				BAD("string longer than its limit");
			if (memchr(v, 0, flen))
				BAD("string holds a NUL byte");
			const char *reason = check_str(f->check, (const char *)v, flen);
			if (reason)
				BAD(reason);
			memcpy((char *)rec + f->off, v, flen);
			((char *)rec + f->off)[flen] = '\0';
			break;
		}
		case CKPTD_WIRE_LIST: {
			int r = list_decode(f, v, flen, rec, depth, why);
			if (r < 0)
				return r;
			break;
		}
		}
	}
	for (unsigned i = 0; i < s->n; i++)
		if (s->f[i].required && !(seen & (1ull << i)))
			BAD("required field missing");
	if (s->check) {
		const char *reason = s->check(rec);
		if (reason)
			BAD(reason);
	}
	return 0;
}

int ckptd_msg_decode(const uint8_t *buf, size_t len, ckptd_msg *m, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	*why = NULL;
	memset(m, 0, sizeof(*m));
	if (!buf || len < CKPTD_HEADER_LEN)
		BAD("frame shorter than its header");
	ckptd_frame_header h;
	int r = ckptd_header_decode(buf, len, &h, why);
	if (r < 0)
		return r;
	m->major = h.major;
	m->minor = h.minor;
	m->type = h.type;
	if (CKPTD_HEADER_LEN + (uint64_t)h.length > CKPTD_MAX_MESSAGE) {
		*why = "message larger than the protocol allows";
		return -EMSGSIZE;
	}
	if (h.major != CKPTD_PROTO_MAJOR && h.type != CKPTD_MSG_ERROR) {
		*why = "protocol major version not supported";
		return -CKPT_EFORMAT;
	}
	if (h.flags & CKPTD_FLAG_SEALED)
		BAD("sealed frame not opened");
	if (h.flags)
		BAD("unknown frame flags");
	if (len - CKPTD_HEADER_LEN < h.length)
		BAD("frame truncated");
	if (len - CKPTD_HEADER_LEN > h.length)
		BAD("bytes after the frame");
	const ckptd__msgdef *d = ckptd__find_msg(h.type);
	if (!d) {
		*why = "unknown message type";
		return -EOPNOTSUPP;
	}
	m->owned = 1;
	const uint8_t *p = buf + CKPTD_HEADER_LEN;
	r = rec_decode(&d->s, p, p + h.length, &m->u, 0, why);
	if (r < 0) {
		ckptd_msg_free(m);
		m->major = h.major;
		m->minor = h.minor;
		m->type = h.type;
		return r;
	}
	return 0;
}

void ckptd_msg_free(ckptd_msg *m)
{
	if (!m)
		return;
	const ckptd__msgdef *d = ckptd__find_msg(m->type);
	if (m->owned && d)
		rec_free(&d->s, &m->u);
	memset(m, 0, sizeof(*m));
}

/* ---------------------------------------------------------------- compare */

static int rec_equal(const ckptd__schema *s, const void *a, const void *b)
{
	for (unsigned i = 0; i < s->n; i++) {
		const ckptd__field *f = &s->f[i];
		switch (f->wire) {
		case CKPTD_WIRE_U32:
			if (rd_u32(a, f->off) != rd_u32(b, f->off))
				return 0;
			break;
		case CKPTD_WIRE_U64:
			if (rd_u64(a, f->off) != rd_u64(b, f->off))
				return 0;
			break;
		case CKPTD_WIRE_BYTES:
			if (memcmp((const char *)a + f->off, (const char *)b + f->off, f->max))
				return 0;
			break;
		case CKPTD_WIRE_STR:
			if (strncmp((const char *)a + f->off, (const char *)b + f->off, f->max + 1))
				return 0;
			break;
		case CKPTD_WIRE_LIST: {
			uint32_t n = rd_u32(a, f->count_off);
			if (n != rd_u32(b, f->count_off))
				return 0;
			const uint8_t *ia = rd_ptr(a, f->off), *ib = rd_ptr(b, f->off);
			for (uint32_t k = 0; k < n; k++)
				if (!rec_equal(f->item, ia + (size_t)k * f->item->size, ib + (size_t)k * f->item->size))
					return 0;
			break;
		}
		}
	}
	return 1;
}

int ckptd_msg_equal(const ckptd_msg *a, const ckptd_msg *b)
{
	if (a->type != b->type)
		return 0;
	const ckptd__msgdef *d = ckptd__find_msg(a->type);
	return d ? rec_equal(&d->s, &a->u, &b->u) : 0;
}

void ckptd_msg_version_error(ckptd_msg *m, uint32_t peer_version)
{
	memset(m, 0, sizeof(*m));
	m->type = CKPTD_MSG_ERROR;
	m->u.error.code = CKPTD_ERR_VERSION;
	m->u.error.peer_version = peer_version;
	m->u.error.own_version = CKPTD_PROTO_VERSION;
	snprintf(m->u.error.text, sizeof(m->u.error.text),
	         "protocol version %u.%u not supported: this peer speaks %u.%u",
	         CKPTD_VERSION_MAJOR_OF(peer_version), CKPTD_VERSION_MINOR_OF(peer_version),
	         CKPTD_PROTO_MAJOR, CKPTD_PROTO_MINOR);
}
