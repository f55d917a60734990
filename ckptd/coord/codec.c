/* Keys and records of the global index. Records are little-endian, start
 * with a record version, and are length-checked: a longer record of the same
 * version is accepted (fields appended later), a shorter one is damage. */
#include "coord_int.h"

#include <errno.h>
#include <string.h>

static int rec_head(const uint8_t *b, size_t len, size_t min)
{
	if (len < 4)
		return -CKPT_ECORRUPT;
	uint32_t rv = ckpt__get_le32(b);
	if (rv == 0)
		return -CKPT_ECORRUPT;
	if (rv > CKPTD_REC_VERSION)
		return -CKPT_EFORMAT;
	return len < min ? -CKPT_ECORRUPT : 0;
}

void ckptd__vrec_encode(uint8_t out[CKPTD_VREC_LEN], const ckptd_vrec *v)
{
	ckpt__put_le32(out, CKPTD_REC_VERSION);
	ckpt__put_le32(out + 4, v->world_size);
	ckpt__put_le32(out + 8, v->flags);
	ckpt__put_le32(out + 12, v->nshards);
	ckpt__put_le32(out + 16, v->ranks_any);
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		ckpt__put_le32(out + 20 + 4 * i, v->ranks_at[i]);
	ckpt__put_le32(out + 36, v->deleting);
	ckpt__put_le64(out + 40, v->bytes);
	ckpt__put_le64(out + 48, v->lineage);
	ckpt__put_le64(out + 56, v->created_ns);
	ckpt__put_le64(out + 64, v->committed_ns);
}

int ckptd__vrec_decode(const uint8_t *b, size_t len, ckptd_vrec *v)
{
	memset(v, 0, sizeof(*v));
	CKPT_TRY(rec_head(b, len, CKPTD_VREC_LEN));
	v->world_size = ckpt__get_le32(b + 4);
	v->flags = ckpt__get_le32(b + 8);
	v->nshards = ckpt__get_le32(b + 12);
	v->ranks_any = ckpt__get_le32(b + 16);
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		v->ranks_at[i] = ckpt__get_le32(b + 20 + 4 * i);
	v->deleting = ckpt__get_le32(b + 36);
	v->bytes = ckpt__get_le64(b + 40);
	v->lineage = ckpt__get_le64(b + 48);
	v->created_ns = ckpt__get_le64(b + 56);
	v->committed_ns = ckpt__get_le64(b + 64);
	if (v->world_size == 0 || v->nshards > v->world_size || v->ranks_any > v->nshards)
		return -CKPT_ECORRUPT;
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		if (v->ranks_at[i] > v->ranks_any)
			return -CKPT_ECORRUPT;
	return 0;
}

void ckptd__srec_encode(uint8_t out[CKPTD_SREC_LEN], const ckptd_srec *s)
{
	ckpt__put_le32(out, CKPTD_REC_VERSION);
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		ckpt__put_le32(out + 4 + 4 * i, s->live[i]);
	ckpt__put_le32(out + 20, s->ncopies);
	ckpt__put_le64(out + 24, s->bytes);
	ckpt__put_le64(out + 32, s->checksum);
	ckpt__put_le64(out + 40, s->lineage);
}

int ckptd__srec_decode(const uint8_t *b, size_t len, ckptd_srec *s)
{
	memset(s, 0, sizeof(*s));
	CKPT_TRY(rec_head(b, len, CKPTD_SREC_LEN));
	uint64_t live = 0;
	for (int i = 0; i < CKPTD_COORD_TIERS; i++)
		live += s->live[i] = ckpt__get_le32(b + 4 + 4 * i);
	s->ncopies = ckpt__get_le32(b + 20);
	s->bytes = ckpt__get_le64(b + 24);
	s->checksum = ckpt__get_le64(b + 32);
	s->lineage = ckpt__get_le64(b + 40);
	return (s->ncopies == 0 || live > s->ncopies) ? -CKPT_ECORRUPT : 0;
}

void ckptd__crec_encode(uint8_t out[CKPTD_CREC_LEN], const ckptd_crec *c)
{
	ckpt__put_le32(out, CKPTD_REC_VERSION);
	ckpt__put_le32(out + 4, c->state);
	ckpt__put_le32(out + 8, c->gen);
	ckpt__put_le32(out + 12, 0);
	ckpt__put_le64(out + 16, c->since_ns);
}

int ckptd__crec_decode(const uint8_t *b, size_t len, ckptd_crec *c)
{
	memset(c, 0, sizeof(*c));
	CKPT_TRY(rec_head(b, len, CKPTD_CREC_LEN));
	c->state = ckpt__get_le32(b + 4);
	c->gen = ckpt__get_le32(b + 8);
	c->since_ns = ckpt__get_le64(b + 16);
	return (c->state == CKPTD_COPY_LIVE || c->state == CKPTD_COPY_DELETING) ? 0 : -CKPT_ECORRUPT;
}

size_t ckptd__arec_encode(uint8_t *out, size_t cap, const ckptd_arec *a)
{
	size_t al = strnlen(a->address, CKPTD_ADDR_MAX), dl = strnlen(a->domain, CKPTD_NAME_MAX);
	size_t need = CKPTD_AREC_MIN + al + dl;
	if (need > cap)
		return 0;
	ckpt__put_le32(out, CKPTD_REC_VERSION);
	ckpt__put_le32(out + 4, a->state);
	ckpt__put_le32(out + 8, a->gen);
	ckpt__put_le32(out + 12, a->in_round);
	ckpt__put_le64(out + 16, a->last_seen_ns);
	ckpt__put_le16(out + 24, (uint16_t)al);
	memcpy(out + 26, a->address, al);
	ckpt__put_le16(out + 26 + al, (uint16_t)dl);
	memcpy(out + 28 + al, a->domain, dl);
	return need;
}

int ckptd__arec_decode(const uint8_t *b, size_t len, ckptd_arec *a)
{
	memset(a, 0, sizeof(*a));
	CKPT_TRY(rec_head(b, len, CKPTD_AREC_MIN));
	a->state = ckpt__get_le32(b + 4);
	a->gen = ckpt__get_le32(b + 8);
	a->in_round = ckpt__get_le32(b + 12);
	a->last_seen_ns = ckpt__get_le64(b + 16);
	size_t al = ckpt__get_le16(b + 24);
	if (al > CKPTD_ADDR_MAX || 26 + al + 2 > len)
		return -CKPT_ECORRUPT;
	memcpy(a->address, b + 26, al);
	size_t dl = ckpt__get_le16(b + 26 + al);
	if (dl > CKPTD_NAME_MAX || 28 + al + dl > len)
		return -CKPT_ECORRUPT;
	memcpy(a->domain, b + 28 + al, dl);
	if (memchr(a->address, 0, al) || memchr(a->domain, 0, dl))
		return -CKPT_ECORRUPT;
	if (a->state != CKPTD_AGENT_REC_UP && a->state != CKPTD_AGENT_REC_DOWN)
		return -CKPT_ECORRUPT;
	return 0;
}

void ckptd__jrec_encode(uint8_t out[CKPTD_JREC_LEN], const ckptd_jrec *j)
{
	ckpt__put_le32(out, CKPTD_REC_VERSION);
	ckpt__put_le32(out + 4, j->world_size);
	ckpt__put_le32(out + 8, j->policy.keep_dram);
	ckpt__put_le32(out + 12, j->policy.keep_disk);
	ckpt__put_le64(out + 16, j->policy.keep_every);
	ckpt__put_le64(out + 24, j->created_ns);
	ckpt__put_le64(out + 32, j->epoch);
}

int ckptd__jrec_decode(const uint8_t *b, size_t len, ckptd_jrec *j)
{
	memset(j, 0, sizeof(*j));
	CKPT_TRY(rec_head(b, len, CKPTD_JREC_MIN));
	j->world_size = ckpt__get_le32(b + 4);
	j->policy.keep_dram = ckpt__get_le32(b + 8);
	j->policy.keep_disk = ckpt__get_le32(b + 12);
	j->policy.keep_every = ckpt__get_le64(b + 16);
	j->created_ns = ckpt__get_le64(b + 24);
	if (len >= CKPTD_JREC_LEN)
		j->epoch = ckpt__get_le64(b + 32);
	return 0;
}

/* ------------------------------------------------------------- keys */

size_t ckptd__job_key(uint8_t *out, const char *job)
{
	size_t jl = strnlen(job, CKPTD_JOB_MAX);
	out[0] = (uint8_t)jl;
	memcpy(out + 1, job, jl);
	return 1 + jl;
}

static size_t put_node(uint8_t *out, const char *node)
{
	size_t nl = strnlen(node, CKPTD_NAME_MAX);
	out[0] = (uint8_t)nl;
	memcpy(out + 1, node, nl);
	return 1 + nl;
}

size_t ckptd__copy_key(uint8_t *out, const char *job, uint64_t version, uint32_t rank,
                       uint32_t tier, const char *node)
{
	size_t n = ckpt__idx_key(out, job, version, 1, rank);
	out[n++] = (uint8_t)tier;
	return n + put_node(out + n, node);
}

size_t ckptd__node_key(uint8_t *out, const char *node, const char *job, uint64_t version,
                       uint32_t rank, uint32_t tier)
{
	size_t n = put_node(out, node);
	n += ckpt__idx_key(out + n, job, version, 1, rank);
	out[n++] = (uint8_t)tier;
	return n;
}

int ckptd__copy_key_decode(const uint8_t *k, size_t len, char job[CKPTD_JOB_MAX + 1],
                           uint64_t *version, uint32_t *rank, uint32_t *tier,
                           char node[CKPTD_NAME_MAX + 1])
{
	if (len < 1)
		return -CKPT_ECORRUPT;
	size_t jl = k[0];
	size_t base = 1 + jl + 12; /* job, version, rank */
	if (jl == 0 || jl > CKPTD_JOB_MAX || len < base + 1)
		return -CKPT_ECORRUPT;
	int has_rank;
	CKPT_TRY(ckpt__idx_key_decode(k, base, job, version, rank, &has_rank));
	*tier = k[base];
	if (ckptd__tier_index(*tier) < 0)
		return -CKPT_ECORRUPT;
	if (node) {
		if (len < base + 2)
			return -CKPT_ECORRUPT;
		size_t nl = k[base + 1];
		if (nl == 0 || nl > CKPTD_NAME_MAX || len != base + 2 + nl)
			return -CKPT_ECORRUPT;
		memcpy(node, k + base + 2, nl);
		node[nl] = 0;
		/* The same rule as when the name was stored: a NUL or a space
		 * inside would name another node than the key does. */
		if (memchr(k + base + 2, 0, nl) || ckptd__node_valid(node) < 0)
			return -CKPT_ECORRUPT;
	} else if (len != base + 1) {
		return -CKPT_ECORRUPT;
	}
	return 0;
}

int ckptd__tier_index(uint32_t tier)
{
	switch (tier) {
	case CKPT_TIER_LOCAL_MEM: return 0;
	case CKPT_TIER_PEER_MEM: return 1;
	case CKPT_TIER_LOCAL_DISK: return 2;
	case CKPT_TIER_SHARED: return 3;
	default: return -1;
	}
}

/* Node names travel in keys and on the wire: printable, no spaces. */
int ckptd__node_valid(const char *node)
{
	if (!node)
		return -CKPT_ENAME;
	size_t n = strnlen(node, CKPTD_NAME_MAX + 1);
	if (n == 0 || n > CKPTD_NAME_MAX)
		return -CKPT_ENAME;
	for (size_t i = 0; i < n; i++)
		if (node[i] <= ' ' || node[i] > '~')
			return -CKPT_ENAME;
	return 0;
}
