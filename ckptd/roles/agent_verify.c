/* VERIFY on an agent: every copy of a version this node holds is read and
 * checked (structure, the checksum the agent recorded, every chunk) on a
 * thread of its own, since reading gigabytes must not stall the event loop.
 * The thread says it is done through a pipe the loop watches; the loop then
 * calls back the agent, which answers the client and unpins what was read. */
#include "roles_int.h"

#include "format/format.h"
#include "format/reader.h"
#include "ckpt_kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ckptd_vtask {
	ckptd_server *srv;
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	ckptd_vitem *items;
	size_t n;
	ckptd_vtask_done_fn done;
	void *arg;
	pthread_t thr;
	int pipe[2];
};

static int null_sink(void *arg, uint32_t ri, uint64_t off, const void *data, size_t len)
{
	(void)arg, (void)ri, (void)off, (void)data, (void)len;
	return 0;
}

static void set(ckptd_vitem *it, uint32_t code, const char *fmt, const char *detail)
{
	it->res.code = code;
	snprintf(it->res.text, sizeof(it->res.text), fmt, detail);
	/* Error texts travel as protocol text: printable ASCII only. */
	for (char *p = it->res.text; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			*p = '?';
}

/* The shard must be the one the agent recorded, of this job, version, rank. */
static int same_shard(const ckptd_vtask *t, const ckptd_vitem *it, const ckpt_shard *s, char *why, size_t cap)
{
	if (s->header.version != t->version || s->header.rank != it->res.rank || strcmp(s->header.job, t->job)) {
		snprintf(why, cap, "holds job %s version %llu rank %u, not this shard", s->header.job,
		         (unsigned long long)s->header.version, s->header.rank);
		return 0;
	}
	/* The recorded checksum names the shard (its DRAM image's footer, see
	 * SHARD_DONE), which a compressed disk file does not repeat: the run that
	 * wrote the copy must match, and every chunk's checksum then does the rest. */
	if (it->lineage && s->header.lineage && s->header.lineage != it->lineage) {
		snprintf(why, cap, "written by another run of the job (lineage %016llx, recorded %016llx)",
		         (unsigned long long)s->header.lineage, (unsigned long long)it->lineage);
		return 0;
	}
	if (it->img && it->checksum && s->tail.footer_checksum != it->checksum) {
		snprintf(why, cap, "footer checksum %016llx differs from the recorded %016llx",
		         (unsigned long long)s->tail.footer_checksum, (unsigned long long)it->checksum);
		return 0;
	}
	return 1;
}

/* A DRAM image whose chunks are stored as they are (every image an agent
 * holds: node DRAM and partner copies) is checked on several threads: a
 * partner's acknowledgement waits for this check. */
#define CHECK_THREADS 4

typedef struct par_check {
	const uint8_t *img;
	uint64_t len;
	const ckpt_fmt_footer *f;
	uint32_t step, first;
	uint64_t bad;   /* the first chunk found bad + 1; 0: none */
} par_check;

static void *check_part(void *arg)
{
	par_check *p = arg;
	for (uint64_t ci = p->first; ci < p->f->chunk_count; ci += p->step) {
		const ckpt_fmt_chunk *c = &p->f->chunks[ci];
		if (c->offset > p->len || c->stored_len > p->len - c->offset || c->stored_len != c->raw_len ||
		    ckpt_kern_checksum(p->img + c->offset, c->raw_len) != c->checksum) {
			p->bad = ci + 1;
			break;
		}
	}
	return NULL;
}

/* -1: not such an image (read it the usual way); 0: intact; 1: a chunk is
 * bad (why names its region and chunk). */
static int check_parallel(const ckptd_vitem *it, const ckpt_shard *s, char *why, size_t cap)
{
	const ckpt_fmt_footer *f = &s->footer;
	for (uint64_t ci = 0; ci < f->chunk_count; ci++)
		if (f->chunks[ci].flags)
			return -1;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t n = (uint32_t)(cpus < 1 ? 1 : cpus > CHECK_THREADS ? CHECK_THREADS : cpus);
	if (f->chunk_count < n)
		n = f->chunk_count ? (uint32_t)f->chunk_count : 1;
	par_check p[CHECK_THREADS];
	pthread_t th[CHECK_THREADS];
	uint32_t started = 0;
	for (uint32_t i = 0; i < n; i++)
		p[i] = (par_check){ it->img, it->len, f, n, i, 0 };
	while (started + 1 < n && pthread_create(&th[started + 1], NULL, check_part, &p[started + 1]) == 0)
		started++;
	check_part(&p[0]);
	for (uint32_t i = 1; i <= started; i++)
		pthread_join(th[i], NULL);
	for (uint32_t i = started + 1; i < n; i++)
		check_part(&p[i]); /* a thread that could not start: its share here */
	uint64_t bad = 0;
	for (uint32_t i = 0; i < n; i++)
		if (p[i].bad && (!bad || p[i].bad < bad))
			bad = p[i].bad;
	if (!bad)
		return 0;
	const ckpt_fmt_chunk *c = &f->chunks[bad - 1];
	snprintf(why, cap, "version %llu rank %u region '%s' chunk %llu: checksum mismatch",
	         (unsigned long long)s->header.version, s->header.rank,
	         c->region < f->region_count ? f->regions[c->region].name : "?",
	         (unsigned long long)(bad - 1 - (c->region < f->region_count ? f->regions[c->region].chunk_first : 0)));
	return 1;
}

static void verify_one(const ckptd_vtask *t, ckptd_vitem *it)
{
	char why[700] = "";
	ckpt_shard s;
	ckpt_read_opts o = { .depth = 4, .direct = 1, .why = why, .whycap = sizeof(why) };
	int err;
	if (it->res.code)
		return; /* decided before the thread (missing) */
	if (it->img) {
		err = ckpt__shard_parse_mem(it->img, it->len, &s, why, sizeof(why));
	} else {
		err = ckpt__shard_open(it->path, &s, why, sizeof(why));
		if (err == -ENOENT) {
			set(it, CKPTD_VERIFY_MISSING, "shard file %.900s is gone", it->path);
			return;
		}
	}
	if (err < 0) {
		set(it, err == -CKPT_ECORRUPT || err == -CKPT_EFORMAT ? CKPTD_VERIFY_CORRUPT : CKPTD_VERIFY_ERROR, "%s",
		    why[0] ? why : ckpt_strerror(err));
		return;
	}
	int par = -1;
	if (!same_shard(t, it, &s, why, sizeof(why))) {
		set(it, CKPTD_VERIFY_CORRUPT, "%s", why);
	} else if (it->img && (par = check_parallel(it, &s, why, sizeof(why))) >= 0) {
		if (par)
			set(it, CKPTD_VERIFY_CORRUPT, "%s", why);
	} else {
		err = it->img ? ckpt__shard_read_mem(it->img, it->len, &s, &o, null_sink, NULL)
		              : ckpt__shard_read(it->path, &s, &o, null_sink, NULL);
		if (err < 0)
			set(it, err == -CKPT_ECORRUPT ? CKPTD_VERIFY_CORRUPT : CKPTD_VERIFY_ERROR, "%s",
			    why[0] ? why : ckpt_strerror(err));
	}
	ckpt__shard_close(&s);
}

static void *verify_main(void *arg)
{
	ckptd_vtask *t = arg;
	for (size_t i = 0; i < t->n; i++)
		verify_one(t, &t->items[i]);
	char one = 1;
	while (write(t->pipe[1], &one, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static void on_verified(ckptd_server *srv, int fd, uint32_t events, void *arg)
{
	(void)events;
	ckptd_vtask *t = arg;
	char b;
	if (read(fd, &b, 1) != 1 && errno == EAGAIN)
		return;
	ckptd_server_unwatch(srv, fd);
	pthread_join(t->thr, NULL);
	close(t->pipe[0]);
	close(t->pipe[1]);
	t->done(t->arg, t, t->items, t->n);
	free(t->items);
	free(t);
}

int ckptd_vtask_start(ckptd_server *srv, const char *job, uint64_t version, ckptd_vitem *items, size_t n,
                      ckptd_vtask_done_fn done, void *arg, ckptd_vtask **out)
{
	ckptd_vtask *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->srv = srv;
	snprintf(t->job, sizeof(t->job), "%s", job);
	t->version = version;
	t->items = items;
	t->n = n;
	t->done = done;
	t->arg = arg;
	if (pipe2(t->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		int e = -errno;
		free(t);
		return e;
	}
	int r = ckptd_server_watch(srv, t->pipe[0], on_verified, t);
	if (r == 0 && (r = -pthread_create(&t->thr, NULL, verify_main, t)) < 0)
		ckptd_server_unwatch(srv, t->pipe[0]);
	if (r < 0) {
		close(t->pipe[0]);
		close(t->pipe[1]);
		free(t);
		return r;
	}
	*out = t;
	return 0;
}

void ckptd_vtask_join(ckptd_vtask *t)
{
	if (!t)
		return;
	pthread_join(t->thr, NULL);
	close(t->pipe[0]);
	close(t->pipe[1]);
	free(t->items);
	free(t);
}
