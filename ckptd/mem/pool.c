/* The node-DRAM pool: one sealed memfd, first-fit over a sorted array of
 * free extents with coalescing, versions evicted as the policy in pool.h
 * says. Sizes of everything are bounded by max_segments. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

#define CKPTD__DEFAULT_MAX_SEGS 65536u

typedef struct ckptd__ver ckptd__ver;

typedef struct ckptd__seg {
	struct ckptd__seg *next; /* within its version */
	ckptd__ver *ver;
	uint64_t id, off, len, cap;
	uint32_t rank, pins;
	int state;
} ckptd__seg;

struct ckptd__ver {
	ckptd__ver *prev, *next; /* pool list, in the order first seen */
	ckptd__seg *segs;
	char job[CKPTD_JOB_MAX + 1];
	uint64_t version;
	uint64_t seq; /* age across jobs */
	uint32_t nsegs;
	int state;
	/* Scratch for the eviction planner; meaningful only inside it. */
	int cand;
};

typedef struct ckptd__ext {
	uint64_t off, len;
} ckptd__ext;

struct ckptd_pool {
	pthread_mutex_t mu;
	int fd;
	uint8_t *base;
	uint64_t bytes, align;
	int hugetlb, locked;
	/* Free extents sorted by offset, never adjacent (always coalesced).
	 * Preallocated for max_segments + 1 so that freeing never allocates. */
	ckptd__ext *ext;
	uint32_t next;
	ckptd__ver *vhead, *vtail;
	uint32_t nsegs, nvers, max_segs;
	uint64_t used, next_id, next_seq;
	uint64_t evicted_versions, evicted_bytes;
	ckptd_pool_evict_fn on_evict;
	void *evict_arg;
};

/* A copy of an evicted segment's record, for the callback outside the lock. */
typedef struct ckptd__evicted {
	ckptd_seg_info info;
	char job[CKPTD_JOB_MAX + 1];
} ckptd__evicted;

/* ---------------------------------------------------------------- memfd */

/* Pre-faulting goes in steps of this many bytes, so that a cancel is seen. */
#define CKPTD__POPULATE_STEP (64ull << 20)

static int ckptd__cancelled(const int *cancel)
{
	return cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED);
}

static int ckptd__map_pool(ckptd_pool *p, const char *name, uint64_t bytes, int huge, const int *cancel)
{
	int err;
	unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB : 0);
	int fd = memfd_create(name, flags);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto fail;
	}
	/* st_blksize is the page size of the backing fs: 4 KiB on tmpfs, the
	 * huge page size on hugetlbfs; mmap offsets must be multiples of it. */
	uint64_t align = st.st_blksize > 4096 ? (uint64_t)st.st_blksize : 4096;
	if (bytes > UINT64_MAX - align) {
		err = -EINVAL;
		goto fail;
	}
	bytes = (bytes + align - 1) / align * align;
	if ((uint64_t)(off_t)bytes != bytes || (uint64_t)(size_t)bytes != bytes) {
		err = -EINVAL;
		goto fail;
	}
	if (ftruncate(fd, (off_t)bytes) < 0) {
		err = -errno;
		goto fail;
	}
	/* Clients get this fd: they must not resize it under the agent (SIGBUS),
	 * nor add seals (F_SEAL_FUTURE_WRITE would lock other ranks out). */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		err = -errno;
		goto fail;
	}
	void *m = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		err = -errno;
		goto fail;
	}
	if (!huge)
		(void)madvise(m, (size_t)bytes, MADV_HUGEPAGE); /* shmem THP, where enabled */
	/* Fault every page in now: first touch costs far more than the copy
	 * (seconds per GiB on some VMs) and must not land in a save's stall. */
	for (uint64_t o = 0; o < bytes; o += CKPTD__POPULATE_STEP) {
		uint64_t n = bytes - o < CKPTD__POPULATE_STEP ? bytes - o : CKPTD__POPULATE_STEP;
		if (ckptd__cancelled(cancel)) {
			munmap(m, (size_t)bytes);
			err = -ECANCELED;
			goto fail;
		}
		if (madvise((uint8_t *)m + o, (size_t)n, MADV_POPULATE_WRITE) < 0) {
			if (errno != EINVAL) { /* EINVAL: kernel before 5.14 */
				/* EFAULT: no page to back it (hugetlb) */
				err = errno == EFAULT ? -ENOMEM : -errno;
				munmap(m, (size_t)bytes);
				goto fail;
			}
			for (uint64_t b = o; b < o + n; b += 4096)
				((volatile uint8_t *)m)[b] = 0;
		}
	}
	p->fd = fd;
	p->base = m;
	p->bytes = bytes;
	p->align = align;
	p->hugetlb = huge;
	p->locked = mlock(m, (size_t)bytes) == 0;
	return 0;
fail:
	close(fd);
	return err;
}

int ckptd_pool_open(ckptd_pool **out, const ckptd_pool_opts *opts)
{
	ckptd_pool_opts o;
	int err;

	if (!out || !opts || opts->size < offsetof(ckptd_pool_opts, huge))
		return -EINVAL;
	*out = NULL;
	/* An older caller's shorter struct: the fields it lacks stay zero. */
	memset(&o, 0, sizeof(o));
	memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
	if (o.bytes == 0 || o.huge < CKPTD_POOL_HUGE_AUTO || o.huge > CKPTD_POOL_HUGE_ON)
		return -EINVAL;

	ckptd_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->fd = -1;
	p->max_segs = o.max_segments ? o.max_segments : CKPTD__DEFAULT_MAX_SEGS;
	p->on_evict = o.on_evict;
	p->evict_arg = o.evict_arg;
	p->next_id = 1;
	p->ext = calloc((size_t)p->max_segs + 1, sizeof(*p->ext));
	if (!p->ext) {
		err = -ENOMEM;
		goto fail;
	}
	if ((err = pthread_mutex_init(&p->mu, NULL)) != 0) {
		err = -err;
		goto fail;
	}
	const char *name = o.name ? o.name : "ckptd-pool";
	err = -EOPNOTSUPP;
	if (o.huge != CKPTD_POOL_HUGE_OFF)
		err = ckptd__map_pool(p, name, o.bytes, 1, o.cancel);
	if (err < 0 && err != -ECANCELED && o.huge != CKPTD_POOL_HUGE_ON)
		err = ckptd__map_pool(p, name, o.bytes, 0, o.cancel);
	if (err < 0) {
		pthread_mutex_destroy(&p->mu);
		goto fail;
	}
	p->ext[0].off = 0;
	p->ext[0].len = p->bytes;
	p->next = 1;
	*out = p;
	return 0;
fail:
	free(p->ext);
	free(p);
	return err;
}

void ckptd_pool_close(ckptd_pool *p)
{
	if (!p)
		return;
	ckptd__ver *v = p->vhead;
	while (v) {
		ckptd__ver *vn = v->next;
		for (ckptd__seg *s = v->segs, *sn; s; s = sn) {
			sn = s->next;
			free(s);
		}
		free(v);
		v = vn;
	}
	munmap(p->base, (size_t)p->bytes);
	close(p->fd);
	pthread_mutex_destroy(&p->mu);
	free(p->ext);
	free(p);
}

int ckptd_pool_fd(const ckptd_pool *p)
{
	return p->fd;
}

void *ckptd_pool_base(const ckptd_pool *p)
{
	return p->base;
}

/* ------------------------------------------------------- free extents */

/* Lowest-offset extent that fits: with extents always coalesced this is
 * exactly the first free run of the pool that is long enough. */
static int64_t ckptd__first_fit(const ckptd_pool *p, uint64_t cap)
{
	for (uint32_t i = 0; i < p->next; i++)
		if (p->ext[i].len >= cap)
			return i;
	return -1;
}

static uint64_t ckptd__carve(ckptd_pool *p, uint32_t i, uint64_t cap)
{
	uint64_t off = p->ext[i].off;
	p->ext[i].off += cap;
	p->ext[i].len -= cap;
	if (p->ext[i].len == 0) {
		memmove(&p->ext[i], &p->ext[i + 1], (p->next - i - 1) * sizeof(*p->ext));
		p->next--;
	}
	p->used += cap;
	return off;
}

/* Returns [off, off+len) to the free list, merging with its neighbours.
 * Never allocates: there are at most nsegs + 1 extents. */
static void ckptd__release(ckptd_pool *p, uint64_t off, uint64_t len)
{
	uint32_t lo = 0, hi = p->next;
	while (lo < hi) { /* first extent after off */
		uint32_t mid = lo + (hi - lo) / 2;
		if (p->ext[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint32_t i = lo;
	int join_prev = i > 0 && p->ext[i - 1].off + p->ext[i - 1].len == off;
	int join_next = i < p->next && off + len == p->ext[i].off;
	if (join_prev && join_next) {
		p->ext[i - 1].len += len + p->ext[i].len;
		memmove(&p->ext[i], &p->ext[i + 1], (p->next - i - 1) * sizeof(*p->ext));
		p->next--;
	} else if (join_prev) {
		p->ext[i - 1].len += len;
	} else if (join_next) {
		p->ext[i].off = off;
		p->ext[i].len += len;
	} else {
		memmove(&p->ext[i + 1], &p->ext[i], (p->next - i) * sizeof(*p->ext));
		p->ext[i].off = off;
		p->ext[i].len = len;
		p->next++;
	}
	p->used -= len;
}

/* ------------------------------------------------- versions, segments */

static ckptd__ver *ckptd__ver_find(const ckptd_pool *p, const char *job, uint64_t version)
{
	for (ckptd__ver *v = p->vhead; v; v = v->next)
		if (v->version == version && strcmp(v->job, job) == 0)
			return v;
	return NULL;
}

static ckptd__seg *ckptd__seg_find(const ckptd_pool *p, uint64_t id)
{
	for (ckptd__ver *v = p->vhead; v; v = v->next)
		for (ckptd__seg *s = v->segs; s; s = s->next)
			if (s->id == id)
				return s;
	return NULL;
}

static void ckptd__fill_info(const ckptd__seg *s, ckptd_seg_info *out)
{
	out->id = s->id;
	out->job = s->ver->job;
	out->version = s->ver->version;
	out->rank = s->rank;
	out->pins = s->pins;
	out->off = s->off;
	out->len = s->len;
	out->cap = s->cap;
	out->state = s->state;
	out->ver_state = s->ver->state;
}

static void ckptd__ver_unlink(ckptd_pool *p, ckptd__ver *v)
{
	if (v->prev)
		v->prev->next = v->next;
	else
		p->vhead = v->next;
	if (v->next)
		v->next->prev = v->prev;
	else
		p->vtail = v->prev;
	p->nvers--;
	free(v);
}

/* Unlinks s from its version, returns its bytes; frees the version when it
 * was the last segment. */
static void ckptd__seg_remove(ckptd_pool *p, ckptd__seg *s)
{
	ckptd__ver *v = s->ver;
	ckptd__seg **pp = &v->segs;
	while (*pp != s)
		pp = &(*pp)->next;
	*pp = s->next;
	v->nsegs--;
	p->nsegs--;
	ckptd__release(p, s->off, s->cap);
	free(s);
	if (v->nsegs == 0)
		ckptd__ver_unlink(p, v);
}

static int ckptd__ver_busy(const ckptd__ver *v)
{
	for (const ckptd__seg *s = v->segs; s; s = s->next)
		if (s->state == CKPTD_SEG_WRITING || s->pins)
			return 1;
	return 0;
}

/* ----------------------------------------------------------- eviction */

static int ckptd__cmp_job_version(const void *a, const void *b)
{
	const ckptd__ver *x = *(ckptd__ver *const *)a, *y = *(ckptd__ver *const *)b;
	int c = strcmp(x->job, y->job);
	if (c)
		return c;
	return x->version < y->version ? -1 : x->version > y->version;
}

static int ckptd__cmp_seq(const void *a, const void *b)
{
	const ckptd__ver *x = *(ckptd__ver *const *)a, *y = *(ckptd__ver *const *)b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int ckptd__cmp_ext(const void *a, const void *b)
{
	const ckptd__ext *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Eviction candidates in policy order into cand[] (capacity nvers); returns
 * how many. Excludes the version being allocated into (self). */
static uint32_t ckptd__candidates(ckptd_pool *p, const char *job, const ckptd__ver *self,
                                  ckptd__ver **all, ckptd__ver **cand)
{
	uint32_t n = 0, nc = 0;
	for (ckptd__ver *v = p->vhead; v; v = v->next)
		all[n++] = v;
	qsort(all, n, sizeof(*all), ckptd__cmp_job_version);
	/* Within each job's run (ascending version) the last COMMITTED one is the
	 * newest restorable copy here: it stays. */
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i;
		while (j < n && strcmp(all[j]->job, all[i]->job) == 0)
			j++;
		int newest_seen = 0;
		for (uint32_t k = j; k-- > i;) {
			ckptd__ver *v = all[k];
			v->cand = 0;
			if (v->state != CKPTD_VER_COMMITTED)
				continue;
			if (!newest_seen) {
				newest_seen = 1;
				continue;
			}
			v->cand = v != self && !ckptd__ver_busy(v);
		}
		i = j;
	}
	/* The requesting job's own old versions go first, oldest version first. */
	for (uint32_t i = 0; i < n; i++)
		if (all[i]->cand && strcmp(all[i]->job, job) == 0)
			cand[nc++] = all[i];
	uint32_t own = nc;
	for (uint32_t i = 0; i < n; i++)
		if (all[i]->cand && strcmp(all[i]->job, job) != 0)
			cand[nc++] = all[i];
	qsort(cand + own, nc - own, sizeof(*cand), ckptd__cmp_seq);
	return nc;
}

/* Would a run of cap bytes be free if cand[0..k) were gone? scratch holds
 * next + (their segments) entries. */
static int ckptd__fits_after(const ckptd_pool *p, ckptd__ver **cand, uint32_t k, uint64_t cap,
                             ckptd__ext *scratch)
{
	uint32_t n = 0, segs = 0;
	memcpy(scratch, p->ext, p->next * sizeof(*scratch));
	n = p->next;
	for (uint32_t i = 0; i < k; i++) {
		for (ckptd__seg *s = cand[i]->segs; s; s = s->next) {
			scratch[n].off = s->off;
			scratch[n].len = s->cap;
			n++;
		}
		segs += cand[i]->nsegs;
	}
	if (p->nsegs - segs >= p->max_segs)
		return 0;
	qsort(scratch, n, sizeof(*scratch), ckptd__cmp_ext);
	uint64_t run = 0, end = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (i == 0 || scratch[i].off != end)
			run = 0;
		run += scratch[i].len;
		end = scratch[i].off + scratch[i].len;
		if (run >= cap)
			return 1;
	}
	return 0;
}

/* Plans and performs the eviction for a request of cap bytes. On success
 * *ev holds the evicted segments' records (caller frees) and returns 0;
 * -ENOSPC when the policy cannot make room (nothing evicted). */
static int ckptd__make_room(ckptd_pool *p, const char *job, const ckptd__ver *self, uint64_t cap,
                            ckptd__evicted **ev, uint32_t *nev)
{
	int err = -ENOSPC;
	ckptd__ver **all = NULL, **cand = NULL;
	ckptd__ext *scratch = NULL;
	ckptd__evicted *out = NULL;

	*ev = NULL;
	*nev = 0;
	if (p->nvers == 0)
		return -ENOSPC;
	all = malloc(p->nvers * sizeof(*all));
	cand = malloc(p->nvers * sizeof(*cand));
	scratch = malloc(((size_t)p->next + p->nsegs) * sizeof(*scratch));
	if (!all || !cand || !scratch) {
		err = -ENOMEM;
		goto out;
	}
	uint32_t nc = ckptd__candidates(p, job, self, all, cand);
	if (nc == 0 || !ckptd__fits_after(p, cand, nc, cap, scratch))
		goto out;
	/* Shortest prefix that makes room; room only grows with the prefix. */
	uint32_t lo = 1, hi = nc;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ckptd__fits_after(p, cand, mid, cap, scratch))
			hi = mid;
		else
			lo = mid + 1;
	}
	uint32_t nsegs = 0;
	for (uint32_t i = 0; i < lo; i++)
		nsegs += cand[i]->nsegs;
	out = calloc(nsegs, sizeof(*out));
	if (!out) {
		err = -ENOMEM;
		goto out;
	}
	uint32_t n = 0;
	for (uint32_t i = 0; i < lo; i++) {
		ckptd__ver *v = cand[i];
		p->evicted_versions++;
		while (v->segs) {
			ckptd__seg *s = v->segs;
			int last = v->nsegs == 1;
			ckptd__fill_info(s, &out[n].info);
			memcpy(out[n].job, v->job, sizeof(out[n].job));
			out[n].info.job = out[n].job;
			n++;
			p->evicted_bytes += s->cap;
			ckptd__seg_remove(p, s); /* frees v with its last segment */
			if (last)
				break;
		}
	}
	*ev = out;
	*nev = n;
	out = NULL;
	err = 0;
out:
	free(all);
	free(cand);
	free(scratch);
	free(out);
	return err;
}

/* ----------------------------------------------------------- public */

static int ckptd__job_ok(const char *job)
{
	return job && job[0] && strnlen(job, CKPTD_JOB_MAX + 1) <= CKPTD_JOB_MAX;
}

int ckptd_pool_alloc(ckptd_pool *p, const char *job, uint64_t version, uint32_t rank,
                     uint64_t len, ckptd_seg_info *out)
{
	int err = 0;
	ckptd__seg *s = NULL;
	ckptd__ver *nv = NULL;
	ckptd__evicted *ev = NULL;
	uint32_t nev = 0;

	if (!ckptd__job_ok(job) || len == 0)
		return -EINVAL;
	if (len > p->bytes)
		return -ENOSPC;
	uint64_t cap = (len + p->align - 1) / p->align * p->align;

	/* Everything that can fail for want of memory happens before eviction:
	 * a request must not evict and then fail. */
	s = calloc(1, sizeof(*s));
	nv = calloc(1, sizeof(*nv));
	if (!s || !nv) {
		free(s);
		free(nv);
		return -ENOMEM;
	}

	pthread_mutex_lock(&p->mu);
	ckptd__ver *v = ckptd__ver_find(p, job, version);
	if (v) {
		for (ckptd__seg *x = v->segs; x; x = x->next)
			if (x->rank == rank) {
				err = -EEXIST;
				goto unlock;
			}
	}
	int64_t i = p->nsegs < p->max_segs ? ckptd__first_fit(p, cap) : -1;
	if (i < 0) {
		err = ckptd__make_room(p, job, v, cap, &ev, &nev);
		if (err < 0)
			goto unlock;
		i = ckptd__first_fit(p, cap);
	}
	if (!v) {
		v = nv;
		nv = NULL;
		memcpy(v->job, job, strlen(job) + 1);
		v->version = version;
		v->seq = p->next_seq++;
		v->state = CKPTD_VER_PENDING;
		v->prev = p->vtail;
		if (p->vtail)
			p->vtail->next = v;
		else
			p->vhead = v;
		p->vtail = v;
		p->nvers++;
	}
	s->ver = v;
	s->id = p->next_id++;
	s->rank = rank;
	s->len = len;
	s->cap = cap;
	s->off = ckptd__carve(p, (uint32_t)i, cap);
	s->state = CKPTD_SEG_WRITING;
	s->next = v->segs;
	v->segs = s;
	v->nsegs++;
	p->nsegs++;
	if (out)
		ckptd__fill_info(s, out);
	s = NULL;
unlock:
	pthread_mutex_unlock(&p->mu);
	free(s);
	free(nv);
	for (uint32_t k = 0; k < nev; k++)
		if (p->on_evict)
			p->on_evict(p->evict_arg, &ev[k].info);
	free(ev);
	return err;
}

int ckptd_pool_seg_done(ckptd_pool *p, uint64_t id)
{
	int err = 0;
	pthread_mutex_lock(&p->mu);
	ckptd__seg *s = ckptd__seg_find(p, id);
	if (!s)
		err = -ENOENT;
	else if (s->state == CKPTD_SEG_HELD)
		err = -EALREADY;
	else
		s->state = CKPTD_SEG_HELD;
	pthread_mutex_unlock(&p->mu);
	return err;
}

int ckptd_pool_seg_free(ckptd_pool *p, uint64_t id)
{
	int err = 0;
	pthread_mutex_lock(&p->mu);
	ckptd__seg *s = ckptd__seg_find(p, id);
	if (!s)
		err = -ENOENT;
	else if (s->pins)
		err = -EBUSY;
	else
		ckptd__seg_remove(p, s);
	pthread_mutex_unlock(&p->mu);
	return err;
}

int ckptd_pool_seg_pin(ckptd_pool *p, uint64_t id)
{
	int err = 0;
	pthread_mutex_lock(&p->mu);
	ckptd__seg *s = ckptd__seg_find(p, id);
	if (!s)
		err = -ENOENT;
	else if (s->state != CKPTD_SEG_HELD)
		err = -EAGAIN;
	else
		s->pins++;
	pthread_mutex_unlock(&p->mu);
	return err;
}

int ckptd_pool_seg_unpin(ckptd_pool *p, uint64_t id)
{
	int err = 0;
	pthread_mutex_lock(&p->mu);
	ckptd__seg *s = ckptd__seg_find(p, id);
	if (!s)
		err = -ENOENT;
	else if (!s->pins)
		err = -EINVAL;
	else
		s->pins--;
	pthread_mutex_unlock(&p->mu);
	return err;
}

int ckptd_pool_find(ckptd_pool *p, const char *job, uint64_t version, uint32_t rank,
                    ckptd_seg_info *out)
{
	int err = -ENOENT;
	if (!ckptd__job_ok(job))
		return -EINVAL;
	pthread_mutex_lock(&p->mu);
	ckptd__ver *v = ckptd__ver_find(p, job, version);
	for (ckptd__seg *s = v ? v->segs : NULL; s; s = s->next)
		if (s->rank == rank) {
			if (out)
				ckptd__fill_info(s, out);
			err = 0;
			break;
		}
	pthread_mutex_unlock(&p->mu);
	return err;
}

int ckptd_pool_version_set(ckptd_pool *p, const char *job, uint64_t version, int state)
{
	int err = 0;
	if (!ckptd__job_ok(job) || (state != CKPTD_VER_PENDING && state != CKPTD_VER_COMMITTED))
		return -EINVAL;
	pthread_mutex_lock(&p->mu);
	ckptd__ver *v = ckptd__ver_find(p, job, version);
	if (v)
		v->state = state;
	else
		err = -ENOENT;
	pthread_mutex_unlock(&p->mu);
	return err;
}

int ckptd_pool_version_drop(ckptd_pool *p, const char *job, uint64_t version)
{
	int n = 0, busy = 0;
	if (!ckptd__job_ok(job))
		return -EINVAL;
	pthread_mutex_lock(&p->mu);
	ckptd__ver *v = ckptd__ver_find(p, job, version);
	if (!v) {
		pthread_mutex_unlock(&p->mu);
		return -ENOENT;
	}
	ckptd__seg *s = v->segs;
	uint32_t left = v->nsegs;
	while (left--) {
		ckptd__seg *sn = s->next;
		if (s->state == CKPTD_SEG_WRITING || s->pins) {
			busy = 1;
		} else {
			ckptd__seg_remove(p, s); /* frees v along with its last segment */
			n++;
		}
		s = sn;
	}
	pthread_mutex_unlock(&p->mu);
	return busy ? -EBUSY : n;
}

void ckptd_pool_list(ckptd_pool *p, ckptd_seg_info *out, size_t cap, size_t *n)
{
	size_t k = 0;
	pthread_mutex_lock(&p->mu);
	for (ckptd__ver *v = p->vhead; v; v = v->next)
		for (ckptd__seg *s = v->segs; s; s = s->next, k++)
			if (k < cap)
				ckptd__fill_info(s, &out[k]);
	pthread_mutex_unlock(&p->mu);
	*n = k;
}

void ckptd_pool_stats_get(ckptd_pool *p, ckptd_pool_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&p->mu);
	out->bytes = p->bytes;
	out->align = p->align;
	out->used = p->used;
	out->free = p->bytes - p->used;
	for (uint32_t i = 0; i < p->next; i++)
		if (p->ext[i].len > out->largest_free)
			out->largest_free = p->ext[i].len;
	out->free_extents = p->next;
	out->segments = p->nsegs;
	out->versions = p->nvers;
	out->evicted_versions = p->evicted_versions;
	out->evicted_bytes = p->evicted_bytes;
	out->hugetlb = p->hugetlb;
	out->locked = p->locked;
	pthread_mutex_unlock(&p->mu);
}

int ckptd_pool_check(ckptd_pool *p)
{
	int err = 0;
	pthread_mutex_lock(&p->mu);
	size_t n = (size_t)p->next + p->nsegs;
	ckptd__ext *all = malloc((n ? n : 1) * sizeof(*all));
	if (!all) {
		err = -ENOMEM;
		goto out;
	}
	uint64_t used = 0, k = 0;
	uint32_t nsegs = 0, nvers = 0;
	for (uint32_t i = 0; i < p->next; i++) {
		if (p->ext[i].len == 0 || p->ext[i].len % p->align || p->ext[i].off % p->align)
			err = -EFAULT;
		/* Sorted and coalesced: a gap between consecutive free extents. */
		if (i && p->ext[i - 1].off + p->ext[i - 1].len >= p->ext[i].off)
			err = -EFAULT;
		all[k++] = p->ext[i];
	}
	for (ckptd__ver *v = p->vhead; v; v = v->next) {
		uint32_t c = 0;
		nvers++;
		if ((v->next ? v->next->prev : p->vtail) != v || v->nsegs == 0)
			err = -EFAULT;
		for (ckptd__seg *s = v->segs; s; s = s->next, c++) {
			if (k >= n || s->ver != v || s->cap < s->len || s->cap % p->align)
				err = -EFAULT;
			if (k < n)
				all[k++] = (ckptd__ext){ s->off, s->cap };
			used += s->cap;
		}
		if (c != v->nsegs)
			err = -EFAULT;
		nsegs += c;
	}
	if (err || k != n || used != p->used || nsegs != p->nsegs || nvers != p->nvers) {
		err = -EFAULT;
		goto out;
	}
	/* Extents and segments together tile [0, bytes) with no gap or overlap. */
	qsort(all, n, sizeof(*all), ckptd__cmp_ext);
	uint64_t end = 0;
	for (size_t i = 0; i < n; i++) {
		if (all[i].off != end)
			err = -EFAULT;
		end = all[i].off + all[i].len;
	}
	if (end != p->bytes)
		err = -EFAULT;
out:
	pthread_mutex_unlock(&p->mu);
	free(all);
	return err;
}
