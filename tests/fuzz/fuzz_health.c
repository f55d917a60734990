/* Fuzz target for the kernel-file parsers of the ckptd agent's straggler
 * evidence (ckptd/health/parse.c): /proc/stat, cgroup cpu.stat,
 * /proc/pressure/{cpu,memory,io}, /proc/diskstats, /proc/PID/cgroup and
 * /dev/kmsg records. Whatever the bytes, a parser either refuses them or
 * gives values the kernel's formats allow: shares and pressures in range,
 * no more devices than room, a cgroup path that stays inside the cgroup
 * tree (absolute, printable, no "." or ".." component), a kernel message of
 * printable ASCII; the same bytes always give the same answer.
 *
 * Input: one byte choosing the parser ('s' stat, 'c' cpu.stat, 'p' PSI,
 * 'd' diskstats, 'g' cgroup, 'k' kmsg; any other byte: its value modulo 6),
 * then the file's bytes.
 *
 * With CKPT_FUZZING this is a libFuzzer target; without it fuzz_driver.c
 * replays corpus/health and fz_mutations() below. */
#include <errno.h>
#include <string.h>

#include "fuzz_driver.h"
#include "health/parse.h"

enum { P_STAT, P_CPUSTAT, P_PSI, P_DISK, P_CGROUP, P_KMSG, P_COUNT };

static int pick(uint8_t b)
{
	switch (b) {
	case 's': return P_STAT;
	case 'c': return P_CPUSTAT;
	case 'p': return P_PSI;
	case 'd': return P_DISK;
	case 'g': return P_CGROUP;
	case 'k': return P_KMSG;
	default: return b % P_COUNT;
	}
}

static int printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return 0;
	return 1;
}

/* Parses b as parser `which` into out; returns the parser's result. */
static int parse(int which, const char *b, size_t n, void *out, size_t *count)
{
	switch (which) {
	case P_STAT: return hp_parse_stat(b, n, out);
	case P_CPUSTAT: return hp_parse_cpu_stat(b, n, out);
	case P_PSI: return hp_parse_psi(b, n, out);
	case P_DISK: return hp_parse_diskstats(b, n, out, 4, count);
	case P_CGROUP: return hp_parse_cgroup(b, n, out, 64);
	default: return hp_parse_kmsg(b, n, out);
	}
}

static void check(int which, int rc, const void *out, size_t count)
{
	FZ_CHECK(rc == 0 || rc == -EINVAL, "parser %d returned %d", which, rc);
	if (rc)
		return;
	if (which == P_STAT) {
		const hp_cpu *c = out;
		FZ_CHECK(c->idle <= c->total && c->iowait <= c->total && c->steal <= c->total, "a part above the total");
	} else if (which == P_CPUSTAT) {
		FZ_CHECK(((const hp_cgroup_cpu *)out)->have && !(((const hp_cgroup_cpu *)out)->have & ~15u),
		         "cpu.stat without a field");
	} else if (which == P_PSI) {
		const hp_psi *p = out;
		FZ_CHECK(p->some_avg10 <= 10000 && p->full_avg10 <= 10000, "pressure over 100 %%");
	} else if (which == P_DISK) {
		const hp_disk *d = out;
		FZ_CHECK(count <= 4, "more devices than room");
		for (size_t i = 0; i < count && i < 4; i++)
			FZ_CHECK(memchr(d[i].name, 0, sizeof(d[i].name)) && d[i].name[0], "a device without a name");
	} else if (which == P_CGROUP) {
		const char *path = out;
		FZ_CHECK(path[0] == '/' && printable(path) && !strstr(path, "/../") && !strstr(path, "/./") &&
		         strcmp(path + strlen(path) - (strlen(path) >= 3 ? 3 : 0), "/..") &&
		         strcmp(path + strlen(path) - (strlen(path) >= 2 ? 2 : 0), "/."), "cgroup path '%s' escapes", path);
	} else {
		const hp_kmsg *k = out;
		FZ_CHECK(memchr(k->text, 0, sizeof(k->text)) && printable(k->text), "kernel message not printable");
		FZ_CHECK(k->kind >= HP_KMSG_OTHER && k->kind <= HP_KMSG_HW, "unknown kind");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	int which = pick(data[0]);
	const char *b = (const char *)data + 1;
	size_t n = size - 1;
	union {
		hp_cpu c;
		hp_cgroup_cpu g;
		hp_psi p;
		hp_disk d[4];
		char path[64];
		hp_kmsg k;
	} a, b2;
	size_t ca = 0, cb = 0;
	memset(&a, 0xa5, sizeof(a));
	memset(&b2, 0xa5, sizeof(b2));
	int ra = parse(which, b, n, &a, &ca);
	check(which, ra, &a, ca);
	int rb = parse(which, b, n, &b2, &cb);
	FZ_CHECK(ra == rb && ca == cb, "a second parse differs");
	return 0;
}

#ifndef CKPT_FUZZING
const char fz_corpus_name[] = "health";

/* Every truncation, every bit flip, and at every offset the bytes that make
 * or break a number, a field or a line; each seed under every parser. */
uint64_t fz_mutations(const uint8_t *data, size_t size)
{
	static const uint8_t pokes[] = { '0', '9', ' ', '\n', '=', '.', ',', ';', '/', ':', '-', 0x00, 0x7f, 0xff };
	static const uint8_t sel[] = { 's', 'c', 'p', 'd', 'g', 'k' };
	return fz_selector_mutations(data, size, sel, sizeof(sel), pokes, sizeof(pokes));
}
#endif
