/* A node's health for straggler evidence (health.h). */
#include "health.h"

#include "parse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RING 64              /* samples: a minute at one a second */
#define DISKS 32
#define RANKS 256
#define HIST 32
#define EVENTS 256           /* kernel-log events remembered (kind and time) */
#define KMSG_READS 256       /* kernel records read per sample at most */
#define KMSG_HOLD_NS (3600ull * 1000000000ull) /* events count for an hour at least */
#define FILE_MAX 65536       /* the largest /proc file read */

/* Thresholds of the verdict: what a straggler's node shows beyond noise. */
#define STEAL_PM 50          /* 5 % of CPU time stolen */
#define THROTTLE_PCT 10      /* 10 % of the cgroup's periods throttled */
#define PSI_CPU 2000         /* 20 % of time some task waited for a CPU */
#define PSI_MEM 500          /* 5 % of time stalled on memory */
#define PSI_IO 1000          /* 10 % of time stalled on I/O */
#define AWAIT_US 50000       /* 50 ms per disk I/O */

typedef struct sample {
	uint64_t at_ns;
	int have_cpu, have_disk;
	hp_cpu cpu;
	size_t ndisk;
	hp_disk disk[DISKS];
} sample;

typedef struct rank_watch {
	char job[CKPTD_JOB_MAX + 1];
	uint32_t rank, pid;
	char cgpath[512];
	int cg_state;            /* 0 unknown, 1 found, -1 none */
	struct {
		uint64_t at_ns;
		int ok;
		hp_cgroup_cpu cg;
	} cg[RING];
	uint64_t hist[HIST];
	uint32_t nhist, hnext;
} rank_watch;

struct ckptd_health {
	char proc[256], cgroup[256];
	int kfd;
	sample ring[RING];
	uint32_t next, count;
	hp_psi psi[3];           /* cpu, memory, io */
	int have_psi[3];
	rank_watch *ranks[RANKS];
	struct {
		uint64_t at_ns;
		int kind;
	} ev[EVENTS];
	uint32_t nev, evnext;
	char last_text[160];
	uint64_t last_at_ns;
	char kbuf[16384];
	size_t kfill;
};

static int read_file(const char *path, char *buf, size_t cap, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	size_t n = 0;
	for (int i = 0; i < 64 && n < cap; i++) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	*len = n;
	return 0;
}

int ckptd_health_new(const ckptd_health_opts *o, ckptd_health **out)
{
	ckptd_health *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	snprintf(h->proc, sizeof(h->proc), "%s", o && o->proc ? o->proc : "/proc");
	snprintf(h->cgroup, sizeof(h->cgroup), "%s", o && o->cgroup ? o->cgroup : "/sys/fs/cgroup");
	const char *k = o && o->kmsg ? o->kmsg : "/dev/kmsg";
	/* Without root (or CAP_SYSLOG, or with dmesg_restrict) this fails:
	 * the evidence then says the kernel log was not read. */
	h->kfd = k[0] ? open(k, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;
	*out = h;
	return 0;
}

void ckptd_health_free(ckptd_health *h)
{
	if (!h)
		return;
	if (h->kfd >= 0)
		close(h->kfd);
	for (int i = 0; i < RANKS; i++)
		free(h->ranks[i]);
	free(h);
}

/* ---------------------------------------------------------------- kernel log */

static void kmsg_line(ckptd_health *h, const char *line, size_t len, uint64_t now_ns)
{
	hp_kmsg k;
	if (!len || line[0] == ' ' || hp_parse_kmsg(line, len, &k) < 0 || k.kind == HP_KMSG_OTHER)
		return;
	/* The record's time since boot; one from the future (another clock)
	 * counts as now. */
	uint64_t at = k.usec > UINT64_MAX / 1000 ? now_ns : k.usec * 1000;
	if (at > now_ns)
		at = now_ns;
	h->ev[h->evnext].at_ns = at;
	h->ev[h->evnext].kind = k.kind;
	h->evnext = (h->evnext + 1) % EVENTS;
	if (h->nev < EVENTS)
		h->nev++;
	if (at >= h->last_at_ns) {
		h->last_at_ns = at;
		snprintf(h->last_text, sizeof(h->last_text), "%s", k.text);
	}
}

/* New kernel records: /dev/kmsg gives one per read (EAGAIN when none is
 * left, EPIPE when some were overwritten meanwhile); a regular file (tests)
 * gives many lines a read. Both are cut into lines here. */
static void kmsg_read(ckptd_health *h, uint64_t now_ns)
{
	if (h->kfd < 0)
		return;
	for (int i = 0; i < KMSG_READS; i++) {
		if (h->kfill >= sizeof(h->kbuf) / 2)
			h->kfill = 0; /* a line longer than a record can be: dropped */
		ssize_t r = read(h->kfd, h->kbuf + h->kfill, sizeof(h->kbuf) / 2);
		if (r < 0 && (errno == EPIPE || errno == EINTR))
			continue;
		if (r <= 0)
			break;
		h->kfill += (size_t)r;
		size_t start = 0;
		for (size_t j = 0; j < h->kfill; j++)
			if (h->kbuf[j] == '\n') {
				kmsg_line(h, h->kbuf + start, j - start, now_ns);
				start = j + 1;
			}
		memmove(h->kbuf, h->kbuf + start, h->kfill - start);
		h->kfill -= start;
	}
}

/* ---------------------------------------------------------------- ranks */

static rank_watch **find_rank(ckptd_health *h, const char *job, uint32_t rank)
{
	for (int i = 0; i < RANKS; i++)
		if (h->ranks[i] && h->ranks[i]->rank == rank && !strcmp(h->ranks[i]->job, job))
			return &h->ranks[i];
	return NULL;
}

void ckptd_health_rank(ckptd_health *h, const char *job, uint32_t rank, uint32_t pid)
{
	rank_watch **w = find_rank(h, job, rank);
	if (!w) {
		for (int i = 0; i < RANKS && !w; i++)
			if (!h->ranks[i] && (h->ranks[i] = calloc(1, sizeof(rank_watch))))
				w = &h->ranks[i];
		if (!w)
			return;
		snprintf((*w)->job, sizeof((*w)->job), "%s", job);
		(*w)->rank = rank;
	}
	if ((*w)->pid != pid) { /* a restarted rank: another process, maybe another cgroup */
		(*w)->pid = pid;
		(*w)->cg_state = 0;
		memset((*w)->cg, 0, sizeof((*w)->cg));
	}
}

void ckptd_health_rank_gone(ckptd_health *h, const char *job, uint32_t rank)
{
	rank_watch **w = find_rank(h, job, rank);
	if (w) {
		free(*w);
		*w = NULL;
	}
}

void ckptd_health_step(ckptd_health *h, const char *job, uint32_t rank, uint64_t step_ns)
{
	rank_watch **w = find_rank(h, job, rank);
	if (!w)
		return;
	(*w)->hist[(*w)->hnext] = step_ns;
	(*w)->hnext = ((*w)->hnext + 1) % HIST;
	if ((*w)->nhist < HIST)
		(*w)->nhist++;
}

/* The rank's cgroup v2 cpu.stat into slot k of its ring. */
static void sample_rank(ckptd_health *h, rank_watch *w, uint32_t k, uint64_t now_ns, char *buf)
{
	char path[1024];
	size_t len;
	w->cg[k].ok = 0;
	if (w->cg_state == 0) {
		snprintf(path, sizeof(path), "%s/%u/cgroup", h->proc, w->pid);
		w->cg_state = read_file(path, buf, FILE_MAX, &len) == 0 &&
		              hp_parse_cgroup(buf, len, w->cgpath, sizeof(w->cgpath)) == 0 ? 1 : -1;
	}
	if (w->cg_state < 0)
		return;
	snprintf(path, sizeof(path), "%s%s/cpu.stat", h->cgroup, w->cgpath);
	if (read_file(path, buf, FILE_MAX, &len) == 0 && hp_parse_cpu_stat(buf, len, &w->cg[k].cg) == 0 &&
	    (w->cg[k].cg.have & 6u) == 6u) {
		w->cg[k].ok = 1;
		w->cg[k].at_ns = now_ns;
	}
}

/* ---------------------------------------------------------------- sampling */

void ckptd_health_sample(ckptd_health *h, uint64_t now_ns)
{
	static const char *const psi[3] = { "cpu", "memory", "io" };
	char *buf = malloc(FILE_MAX);
	if (!buf)
		return;
	char path[600];
	size_t len;
	sample *s = &h->ring[h->next];
	memset(s, 0, sizeof(*s));
	s->at_ns = now_ns;
	snprintf(path, sizeof(path), "%s/stat", h->proc);
	s->have_cpu = read_file(path, buf, FILE_MAX, &len) == 0 && hp_parse_stat(buf, len, &s->cpu) == 0;
	snprintf(path, sizeof(path), "%s/diskstats", h->proc);
	s->have_disk = read_file(path, buf, FILE_MAX, &len) == 0 &&
	               hp_parse_diskstats(buf, len, s->disk, DISKS, &s->ndisk) == 0;
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/pressure/%s", h->proc, psi[i]);
		h->have_psi[i] = read_file(path, buf, FILE_MAX, &len) == 0 && hp_parse_psi(buf, len, &h->psi[i]) == 0;
	}
	for (int i = 0; i < RANKS; i++)
		if (h->ranks[i])
			sample_rank(h, h->ranks[i], h->next, now_ns, buf);
	kmsg_read(h, now_ns);
	h->next = (h->next + 1) % RING;
	if (h->count < RING)
		h->count++;
	free(buf);
}

/* ---------------------------------------------------------------- evidence */

/* The ring slots of the newest sample and of the oldest one no older than
 * window_ns (the oldest there is, if none). -1 without two samples. */
static int span(const ckptd_health *h, uint64_t window_ns, uint32_t *old, uint32_t *new)
{
	if (h->count < 2)
		return -1;
	*new = (h->next + RING - 1) % RING;
	uint64_t newest = h->ring[*new].at_ns;
	*old = *new;
	for (uint32_t k = 1; k < h->count; k++) {
		uint32_t i = (*new + RING - k) % RING;
		*old = i;
		if (newest - h->ring[i].at_ns >= window_ns)
			break;
	}
	return *old == *new ? -1 : 0;
}

static uint64_t delta(uint64_t a, uint64_t b)
{
	return b > a ? b - a : 0; /* counters that went back (a reset) give nothing */
}

static void cpu_evidence(const ckptd_health *h, uint32_t o, uint32_t n, ckptd_node_evidence *e)
{
	const sample *a = &h->ring[o], *b = &h->ring[n];
	if (!a->have_cpu || !b->have_cpu)
		return;
	uint64_t total = delta(a->cpu.total, b->cpu.total);
	if (!total)
		return;
	e->steal_pm = (uint32_t)(delta(a->cpu.steal, b->cpu.steal) * 1000 / total);
	e->iowait_pm = (uint32_t)(delta(a->cpu.iowait, b->cpu.iowait) * 1000 / total);
	if (e->steal_pm > 1000)
		e->steal_pm = 1000;
	if (e->iowait_pm > 1000)
		e->iowait_pm = 1000;
	e->flags |= CKPTD_EV_CPU;
}

static void disk_evidence(const ckptd_health *h, uint32_t o, uint32_t n, ckptd_node_evidence *e)
{
	const sample *a = &h->ring[o], *b = &h->ring[n];
	if (!a->have_disk || !b->have_disk)
		return;
	e->flags |= CKPTD_EV_DISK;
	for (size_t i = 0; i < b->ndisk; i++)
		for (size_t j = 0; j < a->ndisk; j++) {
			if (strcmp(a->disk[j].name, b->disk[i].name))
				continue;
			uint64_t ios = delta(a->disk[j].ios, b->disk[i].ios), ms = delta(a->disk[j].ms, b->disk[i].ms);
			uint64_t us = ios ? ms * 1000 / ios : 0;
			if (us > UINT32_MAX)
				us = UINT32_MAX;
			if (ios && us > e->disk_await_us) {
				e->disk_await_us = (uint32_t)us;
				snprintf(e->disk, sizeof(e->disk), "%s", b->disk[i].name);
			}
		}
}

static void cgroup_evidence(const rank_watch *w, uint32_t o, uint32_t n, ckptd_node_evidence *e)
{
	/* The newest good slot, and the oldest good one from o on. */
	uint32_t nb = n, oa = o;
	while (!w->cg[nb].ok && nb != o)
		nb = (nb + RING - 1) % RING;
	while (!w->cg[oa].ok && oa != nb)
		oa = (oa + 1) % RING;
	if (!w->cg[nb].ok || !w->cg[oa].ok || oa == nb)
		return;
	const hp_cgroup_cpu *a = &w->cg[oa].cg, *b = &w->cg[nb].cg;
	e->nr_periods = delta(a->nr_periods, b->nr_periods);
	e->nr_throttled = delta(a->nr_throttled, b->nr_throttled);
	if (e->nr_throttled > e->nr_periods)
		e->nr_throttled = e->nr_periods;
	e->throttled_us = delta(a->throttled_usec, b->throttled_usec);
	e->flags |= CKPTD_EV_CGROUP;
}

static void kmsg_evidence(const ckptd_health *h, uint64_t window_ns, uint64_t now_ns, ckptd_node_evidence *e)
{
	if (h->kfd < 0)
		return;
	e->flags |= CKPTD_EV_KMSG;
	uint64_t hold = window_ns > KMSG_HOLD_NS ? window_ns : KMSG_HOLD_NS, from = now_ns > hold ? now_ns - hold : 0;
	for (uint32_t i = 0; i < h->nev; i++)
		if (h->ev[i].at_ns >= from) {
			if (h->ev[i].kind == HP_KMSG_OOM)
				e->oom_kills++;
			else
				e->hw_errors++;
		}
	if ((e->oom_kills || e->hw_errors) && h->last_at_ns >= from)
		snprintf(e->kmsg, sizeof(e->kmsg), "%s", h->last_text);
}

/* Appends to a bounded text. */
static void cat(char *t, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cat(char *t, size_t cap, const char *fmt, ...)
{
	size_t n = strlen(t);
	if (n + 1 >= cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t + n, cap - n, fmt, ap);
	va_end(ap);
}

static void verdict(ckptd_node_evidence *e)
{
	char *v = e->verdict;
	size_t cap = sizeof(e->verdict);
	v[0] = '\0';
	if (e->oom_kills)
		cat(v, cap, "%sOOM kill", v[0] ? ", " : "");
	if (e->hw_errors)
		cat(v, cap, "%shardware errors", v[0] ? ", " : "");
	if ((e->flags & CKPTD_EV_CPU) && e->steal_pm >= STEAL_PM)
		cat(v, cap, "%sCPU steal", v[0] ? ", " : "");
	if ((e->flags & CKPTD_EV_CGROUP) && e->nr_periods && e->nr_throttled * 100 >= e->nr_periods * THROTTLE_PCT)
		cat(v, cap, "%sCPU throttling", v[0] ? ", " : "");
	if ((e->flags & CKPTD_EV_PSI) && e->psi_cpu_some >= PSI_CPU)
		cat(v, cap, "%sCPU contention", v[0] ? ", " : "");
	if ((e->flags & CKPTD_EV_PSI) && (e->psi_mem_full >= PSI_MEM || e->psi_mem_some >= 4 * PSI_MEM))
		cat(v, cap, "%smemory pressure", v[0] ? ", " : "");
	if ((e->flags & CKPTD_EV_PSI) && e->psi_io_full >= PSI_IO)
		cat(v, cap, "%sI/O pressure", v[0] ? ", " : "");
	if ((e->flags & CKPTD_EV_DISK) && e->disk_await_us >= AWAIT_US)
		cat(v, cap, "%sslow disk", v[0] ? ", " : "");
}

static void text(const rank_watch *w, ckptd_node_evidence *e)
{
	char *t = e->text;
	size_t cap = sizeof(e->text);
	t[0] = '\0';
	cat(t, cap, "rank %u on %s: %.1f ms a step, %.2fx the fastest rank's %.1f ms, slow in %u judgements in a row",
	    e->rank, e->node[0] ? e->node : "?", e->step_ns / 1e6,
	    e->fastest_ns ? (double)e->step_ns / (double)e->fastest_ns : 0.0, e->fastest_ns / 1e6, e->windows);
	cat(t, cap, "; node over %.0f s:", e->window_ns / 1e9);
	if (e->flags & CKPTD_EV_CPU)
		cat(t, cap, " cpu steal %.1f%%, iowait %.1f%%;", e->steal_pm / 10.0, e->iowait_pm / 10.0);
	if (e->flags & CKPTD_EV_CGROUP)
		cat(t, cap, " throttled %llu of %llu periods (%.2f s);", (unsigned long long)e->nr_throttled,
		    (unsigned long long)e->nr_periods, e->throttled_us / 1e6);
	if (e->flags & CKPTD_EV_PSI)
		cat(t, cap, " pressure (avg10) cpu %.2f%%, memory %.2f%%/%.2f%%, io %.2f%%/%.2f%% (some/full);",
		    e->psi_cpu_some / 100.0, e->psi_mem_some / 100.0, e->psi_mem_full / 100.0, e->psi_io_some / 100.0,
		    e->psi_io_full / 100.0);
	if ((e->flags & CKPTD_EV_DISK) && e->disk[0])
		cat(t, cap, " disk %s %.1f ms per I/O;", e->disk, e->disk_await_us / 1000.0);
	if (e->flags & CKPTD_EV_KMSG)
		cat(t, cap, " kernel log: %u OOM kills, %u hardware errors%s%s%s;", e->oom_kills, e->hw_errors,
		    e->kmsg[0] ? " (newest: " : "", e->kmsg, e->kmsg[0] ? ")" : "");
	else
		cat(t, cap, " kernel log not readable;");
	if (w && w->nhist) {
		cat(t, cap, " its step times (ms, oldest first):");
		for (uint32_t k = 0; k < w->nhist; k++) {
			uint32_t i = (w->hnext + HIST - w->nhist + k) % HIST;
			cat(t, cap, " %.1f", w->hist[i] / 1e6);
		}
		cat(t, cap, ";");
	}
	cat(t, cap, " verdict: %s", e->verdict[0] ? e->verdict : "nothing on the node stands out");
}

void ckptd_health_evidence(ckptd_health *h, const ckptd_evidence_request *rq, const char *node, uint64_t now_ns,
                           ckptd_node_evidence *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->job, sizeof(out->job), "%s", rq->job);
	out->rank = rq->rank;
	snprintf(out->node, sizeof(out->node), "%s", node ? node : "");
	out->windows = rq->windows;
	out->step_ns = rq->step_ns;
	out->fastest_ns = rq->fastest_ns;
	uint64_t window = rq->window_ns ? rq->window_ns : 10000000000ull;
	uint32_t o, n;
	rank_watch **wp = find_rank(h, rq->job, rq->rank);
	rank_watch *w = wp ? *wp : NULL;
	if (span(h, window, &o, &n) == 0) {
		out->window_ns = h->ring[n].at_ns - h->ring[o].at_ns;
		cpu_evidence(h, o, n, out);
		disk_evidence(h, o, n, out);
		if (w)
			cgroup_evidence(w, o, n, out);
	}
	if (h->have_psi[0] && h->have_psi[1] && h->have_psi[2]) {
		out->psi_cpu_some = h->psi[0].some_avg10;
		out->psi_mem_some = h->psi[1].some_avg10;
		out->psi_mem_full = h->psi[1].full_avg10;
		out->psi_io_some = h->psi[2].some_avg10;
		out->psi_io_full = h->psi[2].full_avg10;
		out->flags |= CKPTD_EV_PSI;
	}
	kmsg_evidence(h, window, now_ns, out);
	if (w && w->nhist)
		out->flags |= CKPTD_EV_STEPS;
	verdict(out);
	text(w, out);
}
