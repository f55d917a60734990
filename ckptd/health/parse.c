/* The kernel files' parsers (parse.h). */
#include "parse.h"

#include <errno.h>
#include <string.h>

/* A cursor over one line. */
typedef struct cur {
	const char *p, *end;
} cur;

static void skip_sp(cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
		c->p++;
}

/* A decimal u64; -EINVAL when there is none or it overflows. */
static int num(cur *c, uint64_t *v)
{
	skip_sp(c);
	uint64_t x = 0;
	const char *s = c->p;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned d = (unsigned)(*c->p - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -EINVAL;
		x = x * 10 + d;
		c->p++;
	}
	if (c->p == s)
		return -EINVAL;
	*v = x;
	return 0;
}

/* A word (up to a blank) into w, cut to cap - 1; its full length in *wl. */
static size_t word(cur *c, char *w, size_t cap)
{
	skip_sp(c);
	const char *s = c->p;
	while (c->p < c->end && *c->p != ' ' && *c->p != '\t')
		c->p++;
	size_t n = (size_t)(c->p - s), k = n < cap - 1 ? n : cap - 1;
	memcpy(w, s, k);
	w[k] = '\0';
	return n;
}

/* The next line of buf (without its newline); 0 at the end. */
static int next_line(const char **pos, const char *end, cur *line)
{
	if (*pos >= end)
		return 0;
	const char *nl = memchr(*pos, '\n', (size_t)(end - *pos));
	line->p = *pos;
	line->end = nl ? nl : end;
	*pos = nl ? nl + 1 : end;
	return 1;
}

static int add(uint64_t *acc, uint64_t v)
{
	if (*acc > UINT64_MAX - v)
		return -EINVAL;
	*acc += v;
	return 0;
}

int hp_parse_stat(const char *buf, size_t len, hp_cpu *out)
{
	const char *pos = buf, *end = buf + len;
	cur l;
	char w[16];
	memset(out, 0, sizeof(*out));
	while (next_line(&pos, end, &l)) {
		if (word(&l, w, sizeof(w)) != 3 || strcmp(w, "cpu"))
			continue;
		/* user nice system idle iowait irq softirq steal [guest guest_nice]:
		 * guest time is already in user, so it is not added again. */
		uint64_t v[8] = { 0 };
		int got = 0;
		while (got < 8 && num(&l, &v[got]) == 0)
			got++;
		if (got < 4) /* kernels before 2.6 had four; steal came in 2.6.11 */
			return -EINVAL;
		for (int i = 0; i < got; i++)
			if (add(&out->total, v[i]) < 0)
				return -EINVAL;
		out->idle = v[3];
		out->iowait = v[4];
		out->steal = v[7];
		return 0;
	}
	return -EINVAL;
}

int hp_parse_cpu_stat(const char *buf, size_t len, hp_cgroup_cpu *out)
{
	static const char *const keys[4] = { "usage_usec", "nr_periods", "nr_throttled", "throttled_usec" };
	const char *pos = buf, *end = buf + len;
	cur l;
	char w[32];
	memset(out, 0, sizeof(*out));
	while (next_line(&pos, end, &l)) {
		if (l.p == l.end)
			continue;
		size_t wl = word(&l, w, sizeof(w));
		uint64_t v;
		if (num(&l, &v) < 0)
			return -EINVAL;
		for (int k = 0; k < 4; k++)
			if (wl == strlen(keys[k]) && !strcmp(w, keys[k])) {
				uint64_t *f[4] = { &out->usage_usec, &out->nr_periods, &out->nr_throttled, &out->throttled_usec };
				*f[k] = v;
				out->have |= 1u << k;
			}
	}
	return out->have ? 0 : -EINVAL;
}

/* "avg10=1.23": the value in hundredths. */
static int avg_field(cur *c, const char *key, uint32_t *v)
{
	skip_sp(c);
	size_t kl = strlen(key);
	if ((size_t)(c->end - c->p) < kl || memcmp(c->p, key, kl))
		return -EINVAL;
	c->p += kl;
	uint64_t whole, frac = 0;
	if (num(c, &whole) < 0 || whole > 100)
		return -EINVAL;
	if (c->p < c->end && *c->p == '.') {
		c->p++;
		const char *s = c->p;
		if (num(c, &frac) < 0 || c->p - s != 2)
			return -EINVAL;
	}
	*v = (uint32_t)(whole * 100 + frac);
	return *v <= 10000 ? 0 : -EINVAL;
}

static int psi_line(cur *l, uint32_t *avg10, uint64_t *total)
{
	uint32_t a60, a300;
	if (avg_field(l, "avg10=", avg10) < 0 || avg_field(l, "avg60=", &a60) < 0 || avg_field(l, "avg300=", &a300) < 0)
		return -EINVAL;
	skip_sp(l);
	if ((size_t)(l->end - l->p) < 6 || memcmp(l->p, "total=", 6))
		return -EINVAL;
	l->p += 6;
	return num(l, total);
}

int hp_parse_psi(const char *buf, size_t len, hp_psi *out)
{
	const char *pos = buf, *end = buf + len;
	cur l;
	char w[8];
	int some = 0;
	memset(out, 0, sizeof(*out));
	while (next_line(&pos, end, &l)) {
		if (l.p == l.end)
			continue;
		size_t wl = word(&l, w, sizeof(w));
		if (wl == 4 && !strcmp(w, "some")) {
			if (psi_line(&l, &out->some_avg10, &out->some_total) < 0)
				return -EINVAL;
			some = 1;
		} else if (wl == 4 && !strcmp(w, "full")) {
			if (psi_line(&l, &out->full_avg10, &out->full_total) < 0)
				return -EINVAL;
			out->have_full = 1;
		} else {
			return -EINVAL;
		}
	}
	return some ? 0 : -EINVAL;
}

int hp_parse_diskstats(const char *buf, size_t len, hp_disk *out, size_t cap, size_t *n)
{
	const char *pos = buf, *end = buf + len;
	cur l;
	*n = 0;
	while (next_line(&pos, end, &l)) {
		if (l.p == l.end)
			continue;
		uint64_t major, minor, f[8];
		char name[HP_DISK_NAME];
		if (num(&l, &major) < 0 || num(&l, &minor) < 0)
			return -EINVAL;
		size_t nl = word(&l, name, sizeof(name));
		if (!nl || nl >= sizeof(name))
			return -EINVAL;
		for (size_t i = 0; i < nl; i++)
			if (name[i] < 0x21 || name[i] > 0x7e)
				return -EINVAL; /* kernel device names are printable */
		/* reads, reads merged, sectors read, ms reading, writes, writes
		 * merged, sectors written, ms writing (then more, not needed) */
		for (int i = 0; i < 8; i++)
			if (num(&l, &f[i]) < 0)
				return -EINVAL;
		if (!strncmp(name, "loop", 4) || !strncmp(name, "ram", 3) || !strncmp(name, "zram", 4))
			continue;
		if (*n >= cap)
			continue;
		hp_disk *d = &out[(*n)++];
		memcpy(d->name, name, sizeof(name));
		d->ios = f[0];
		d->ms = f[3];
		if (add(&d->ios, f[4]) < 0 || add(&d->ms, f[7]) < 0)
			return -EINVAL;
	}
	return 0;
}

int hp_parse_cgroup(const char *buf, size_t len, char *path, size_t cap)
{
	const char *pos = buf, *end = buf + len;
	cur l;
	while (next_line(&pos, end, &l)) {
		/* v2: "0::<path>"; v1 lines ("N:controllers:path") are skipped. */
		size_t n = (size_t)(l.end - l.p);
		if (n < 4 || memcmp(l.p, "0::", 3))
			continue;
		const char *p = l.p + 3;
		size_t pl = n - 3;
		if (p[0] != '/' || pl >= cap)
			return -EINVAL;
		for (size_t i = 0; i < pl; i++)
			if (p[i] < 0x21 || p[i] > 0x7e)
				return -EINVAL;
		/* Components: never "." or "..", which would leave the cgroup tree. */
		for (size_t i = 0; i < pl;) {
			size_t j = i + 1;
			while (j < pl && p[j] != '/')
				j++;
			size_t cl = j - i - 1;
			if ((cl == 1 && p[i + 1] == '.') || (cl == 2 && p[i + 1] == '.' && p[i + 2] == '.'))
				return -EINVAL;
			i = j;
		}
		memcpy(path, p, pl);
		path[pl] = '\0';
		return 0;
	}
	return -EINVAL;
}

/* What a kernel message says: an OOM kill, a hardware error, or neither. */
static int classify(const char *t)
{
	static const char *const oom[] = { "Out of memory: Killed process", "oom-kill:", "Memory cgroup out of memory",
	                                   "invoked oom-killer" };
	static const char *const hw[] = { "Machine check", "mce: [Hardware Error]", "[Hardware Error]", "EDAC ",
	                                  "PCIe Bus Error", "AER: ", "NVRM: Xid", "GPU has fallen off the bus",
	                                  "I/O error, dev", "Uncorrected", "Corrected error" };
	for (size_t i = 0; i < sizeof(oom) / sizeof(oom[0]); i++)
		if (strstr(t, oom[i]))
			return HP_KMSG_OOM;
	for (size_t i = 0; i < sizeof(hw) / sizeof(hw[0]); i++)
		if (strstr(t, hw[i]))
			return HP_KMSG_HW;
	return HP_KMSG_OTHER;
}

int hp_parse_kmsg(const char *buf, size_t len, hp_kmsg *out)
{
	const char *pos = buf, *end = buf + len;
	cur l;
	memset(out, 0, sizeof(*out));
	if (!next_line(&pos, end, &l))
		return -EINVAL;
	uint64_t prio;
	if (num(&l, &prio) < 0 || l.p >= l.end || *l.p++ != ',' || num(&l, &out->seq) < 0 || l.p >= l.end ||
	    *l.p++ != ',' || num(&l, &out->usec) < 0 || l.p >= l.end || *l.p++ != ',')
		return -EINVAL;
	const char *semi = memchr(l.p, ';', (size_t)(l.end - l.p));
	if (!semi)
		return -EINVAL;
	const char *m = semi + 1;
	size_t ml = (size_t)(l.end - m), k = 0;
	/* The text as printable ASCII (the kernel escapes the rest as \xNN). */
	char full[512];
	for (size_t i = 0; i < ml && k < sizeof(full) - 1; i++)
		full[k++] = m[i] >= 0x20 && m[i] <= 0x7e ? m[i] : '?';
	full[k] = '\0';
	out->kind = classify(full);
	size_t tk = k < sizeof(out->text) - 1 ? k : sizeof(out->text) - 1;
	memcpy(out->text, full, tk);
	out->text[tk] = '\0';
	/* Continuation lines (" KEY=value") follow; nothing is taken from them. */
	while (next_line(&pos, end, &l))
		if (l.p < l.end && *l.p != ' ')
			return -EINVAL;
	return 0;
}
