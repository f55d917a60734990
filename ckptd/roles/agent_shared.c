/* The SHARED tier: the agent copies the shard files of committed versions
 * to --shared-dir in the background, so that a job survives losing all its
 * nodes. docs/operations.md, "Shared storage (SHARED tier)".
 *
 * When the coordinator announces a version COMMITTED at LOCAL_DISK, every
 * shard file this node holds of it is queued; one thread copies them, the
 * newest version first, throttled to --shared-rate: into a temp file under
 * <dir>/.partial/<node>/, fsync, read back with every chunk checksum
 * verified, renamed to the same path as in a checkpoint root
 * (<dir>/jobs/<job>/v<version>/r<rank>.ckpt), directory fsynced. The loop
 * then records the copy in the agent index and reports SHARD_DONE(SHARED)
 * with the LOCAL_DISK record's identity; the coordinator commits the version
 * at SHARED once every rank's copy is in. On that notice the agents holding
 * its copies write the tree's commit marker (libckpt/format/shared.h), which
 * lets ranks restore from the tree with nothing else left.
 *
 * An emergency checkpoint aimed at SHARED (EMERGENCY with tier SHARED: a
 * node is about to go and no partner DRAM can hold the version) jumps the
 * queue and the throttle: its files, then its marker, go before anything
 * else, as soon as the version commits at LOCAL_DISK.
 *
 * Restart-safe: the index says what is still to copy; a file already in
 * place with the source's footer is not copied again; this node's temp
 * files are removed when the thread starts. A deletion cancels what is
 * queued or in flight for its version and removes the files this agent
 * flushed (the marker first). */
#include "agent_shared_int.h"
#include "base/dirs.h"

#include "format/format.h"
#include "format/reader.h"
#include "format/shared.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* With mu: whether (job, version) is an emergency's. */
static int urgent_locked(const ckptd_shared *sh, const char *job, uint64_t version)
{
	for (size_t i = 0; i < sh->nurgent && i < URGENT_MAX; i++)
		if (sh->urgent[i].version == version && !strcmp(sh->urgent[i].job, job))
			return 1;
	return 0;
}

/* ---------------------------------------------------------------- thread */

/* Waits for the throttle to allow `bytes` more. -ECANCELED on stop or a
 * deletion of the version in flight. */
int ckptd__sh_pace(ckptd_shared *sh, uint64_t bytes)
{
	pthread_mutex_lock(&sh->mu);
	/* An emergency's files race a deadline: the throttle is for the
	 * background flush, not for them. */
	int urgent = sh->cur && urgent_locked(sh, sh->cur->job, sh->cur->version);
	if (sh->rate && !sh->stop && !sh->cancel && !urgent) {
		uint64_t now = ckpt__now_ns();
		if (sh->next_ns + BURST_NS < now)
			sh->next_ns = now - BURST_NS;
		uint64_t at = sh->next_ns;
		sh->next_ns += (uint64_t)((double)bytes * 1e9 / (double)sh->rate);
		struct timespec ts = { (time_t)(at / 1000000000ull), (long)(at % 1000000000ull) };
		while (!sh->stop && !sh->cancel && ckpt__now_ns() < at)
			pthread_cond_timedwait(&sh->cv, &sh->mu, &ts);
	}
	int r = sh->stop || sh->cancel ? -ECANCELED : 0;
	pthread_mutex_unlock(&sh->mu);
	return r;
}

/* -ECANCELED on stop or a deletion of the version in flight. */
int ckptd__sh_check(ckptd_shared *sh)
{
	pthread_mutex_lock(&sh->mu);
	int r = sh->stop || sh->cancel ? -ECANCELED : 0;
	pthread_mutex_unlock(&sh->mu);
	return r;
}

/* The read-back counts against the throttle too: it uses the same storage. */
static int verify_sink(void *arg, uint32_t ri, uint64_t off, const void *data, size_t len)
{
	(void)ri, (void)off, (void)data;
	return ckptd__sh_pace(arg, len);
}

int ckptd__sh_same_shard(const ckpt_shard *s, const sh_item *it)
{
	return s->header.version == it->version && s->header.rank == it->rank && !strcmp(s->header.job, it->job);
}

/* mkdir, then owned by uid/gid where the agent may set that (it runs as
 * root): the ranks read what the agent writes. Returns 1 if made, 0 if it
 * was there, or -errno. */
static int make_dir(const char *p, int mode, const struct stat *owner)
{
	if (mkdir(p, (mode_t)mode) < 0)
		return errno == EEXIST ? 0 : -errno;
	if (owner && chown(p, owner->st_uid, owner->st_gid) < 0) {
		/* not root: the agent's own, as made */
	}
	return 1;
}

/* <dir>/jobs/<job>/v<version>, made durable if it was not there. */
static int make_version_dir(ckptd_shared *sh, const sh_item *it, const struct stat *owner, char *vdir, size_t cap)
{
	char jobs[PATH_BUF + 8], jdir[PATH_BUF + 80];
	snprintf(jobs, sizeof(jobs), "%s/jobs", sh->dir);
	snprintf(jdir, sizeof(jdir), "%s/%s", jobs, it->job);
	CKPT_TRY(ckpt__version_dir(vdir, cap, sh->dir, it->job, it->version));
	int a, b, c;
	/* jobs/ is every job's: others may pass through, not list it. */
	if ((a = make_dir(jobs, 0711, NULL)) < 0 || (b = make_dir(jdir, 0700, owner)) < 0 ||
	    (c = make_dir(vdir, 0700, owner)) < 0)
		return a < 0 ? a : b < 0 ? b : c;
	if (a > 0)
		ckpt__fsync_parent(jobs);
	if (b > 0)
		ckpt__fsync_parent(jdir);
	if (c > 0)
		ckpt__fsync_parent(vdir);
	return 0;
}

static int copy_file(ckptd_shared *sh, sh_item *it)
{
	char dst[PATH_BUF], vdir[PATH_BUF], tmp[PATH_BUF + 128], why[600] = "";
	ckpt_shard ss, ds;
	struct stat st;
	uint8_t *buf = NULL;
	int fd = -1, err;
	if ((err = ckpt__shard_path(dst, sizeof(dst), sh->dir, it->job, it->version, it->rank)) < 0)
		return err;
	if ((err = ckpt__shard_open(it->src, &ss, why, sizeof(why))) < 0) {
		snprintf(it->why, sizeof(it->why), "the rank's file: %.900s", why);
		return err;
	}
	if (!ckptd__sh_same_shard(&ss, it)) {
		snprintf(it->why, sizeof(it->why), "%.700s holds job %s version %llu rank %u", it->src, ss.header.job,
		         (unsigned long long)ss.header.version, ss.header.rank);
		err = -CKPT_ECORRUPT;
		goto out;
	}
	/* In place already (an earlier run of this agent): not copied again.
	 * Only committed versions are flushed, so a whole file of another run
	 * (a rank that saved this version again after resuming from an older
	 * one) is the committed shard: it is not replaced. */
	if (ckpt__shard_open(dst, &ds, why, sizeof(why)) == 0) {
		int same = ckptd__sh_same_shard(&ds, it) && ds.tail.footer_checksum == ss.tail.footer_checksum &&
		           ds.file_length == ss.file_length;
		int other = ckptd__sh_same_shard(&ds, it) && ds.header.lineage && ss.header.lineage &&
		            ds.header.lineage != ss.header.lineage;
		ckpt__shard_close(&ds);
		if (same) {
			it->placed = 1;
			goto out;
		}
		if (other) {
			snprintf(it->why, sizeof(it->why), "the tree holds another run's shard of this version; not replaced");
			err = -EEXIST;
			goto out;
		}
	}
	if (fstat(ss.fd, &st) < 0) {
		err = -errno;
		goto out;
	}
	if ((err = make_version_dir(sh, it, &st, vdir, sizeof(vdir))) < 0 ||
	    (err = ckpt__mkdir_p(sh->partial, 0700)) < 0) {
		snprintf(it->why, sizeof(it->why), "cannot make the directories under %.700s: %s", sh->dir, strerror(-err));
		goto out;
	}
	snprintf(tmp, sizeof(tmp), "%s/%s.v%020llu.r%06u", sh->partial, it->job, (unsigned long long)it->version,
	         it->rank);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		err = -errno;
		snprintf(it->why, sizeof(it->why), "cannot create %.700s: %s", tmp, strerror(errno));
		goto out;
	}
	if (!(buf = malloc(BLOCK))) {
		err = -ENOMEM;
		goto fail;
	}
	int half = 0;
	for (uint64_t off = 0; off < ss.file_length;) {
		size_t len = (size_t)CKPT_MIN((uint64_t)BLOCK, ss.file_length - off);
		if ((err = ckptd__sh_pace(sh, len)) < 0 || (err = ckpt__pread_full(ss.fd, buf, len, off)) < 0 ||
		    (err = ckpt__pwrite_full(fd, buf, len, off)) < 0)
			goto fail;
		off += len;
		if (!half && off * 2 >= ss.file_length) {
			half = 1;
			if ((err = ckpt__fault(&sh->a->faults, "agent.mid_shared_flush")) < 0)
				goto fail;
		}
	}
	/* The rank's owner and mode, so that its ranks can read it back. */
	if (fchown(fd, st.st_uid, st.st_gid) < 0) {
		/* not root: the agent's own */
	}
	if (fchmod(fd, st.st_mode & 0777) < 0 || fsync(fd) < 0) {
		err = -errno;
		goto fail;
	}
	close(fd);
	fd = -1;
	/* Read back: what lands under the final name has every chunk verified. */
	if ((err = ckpt__shard_open(tmp, &ds, why, sizeof(why))) == 0) {
		if (!ckptd__sh_same_shard(&ds, it) || ds.tail.footer_checksum != ss.tail.footer_checksum) {
			snprintf(why, sizeof(why), "the copy's footer differs from the rank's file");
			err = -CKPT_ECORRUPT;
		} else {
			ckpt_read_opts o = { .depth = 2, .direct = 1, .why = why, .whycap = sizeof(why) };
			err = ckpt__shard_read(tmp, &ds, &o, verify_sink, sh);
		}
		ckpt__shard_close(&ds);
	}
	if (err < 0) {
		if (err != -ECANCELED)
			snprintf(it->why, sizeof(it->why), "the copy does not verify: %.900s", why[0] ? why : ckpt_strerror(err));
		goto fail;
	}
	if ((err = ckptd__sh_check(sh)) < 0) /* deleted or stopping meanwhile */
		goto fail;
	if (rename(tmp, dst) < 0) {
		err = -errno;
		snprintf(it->why, sizeof(it->why), "cannot rename into %.700s: %s", dst, strerror(errno));
		goto fail;
	}
	it->placed = 1;
	it->copied = ss.file_length;
	if ((err = ckpt__fsync_dir(vdir)) < 0)
		snprintf(it->why, sizeof(it->why), "fsync of %.700s: %s", vdir, strerror(-err));
	goto out;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
out:
	free(buf);
	ckpt__shard_close(&ss);
	if (err < 0 && !it->why[0])
		snprintf(it->why, sizeof(it->why), "%s", ckpt_strerror(err));
	return err;
}

static int write_mark(ckptd_shared *sh, sh_item *it)
{
	char tmp[PATH_BUF + 128];
	ckpt_shared_mark mk = { it->world_size, it->lineage };
	int err = ckpt__mkdir_p(sh->partial, 0700);
	if (err == 0) {
		snprintf(tmp, sizeof(tmp), "%s/marker.%s.v%020llu", sh->partial, it->job, (unsigned long long)it->version);
		err = ckpt__shared_marker_write(sh->dir, it->job, it->version, &mk, tmp);
	}
	if (err < 0)
		snprintf(it->why, sizeof(it->why), "%s", ckpt_strerror(err));
	return err;
}

/* What a killed run of this node left half written. */
static void clean_partial(ckptd_shared *sh)
{
	DIR *d = opendir(sh->partial);
	if (!d)
		return;
	struct dirent *e;
	char p[PATH_BUF + 300];
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", sh->partial, e->d_name);
			unlink(p);
		}
	closedir(d);
}

/* The next item (with mu): an emergency's first, then markers (small, and
 * a marker makes a version restorable), then the newest version. */
static size_t pick(const ckptd_shared *sh)
{
	size_t best = 0;
	int bu = sh->nq ? urgent_locked(sh, sh->q[0].job, sh->q[0].version) : 0;
	for (size_t i = 1; i < sh->nq; i++) {
		const sh_item *x = &sh->q[i], *b = &sh->q[best];
		int xu = urgent_locked(sh, x->job, x->version);
		if (xu != bu ? xu
		    : x->kind != b->kind ? x->kind == SH_MARK
		    : x->version != b->version ? x->version > b->version : x->rank < b->rank) {
			best = i;
			bu = xu;
		}
	}
	return best;
}

static void *flush_main(void *arg)
{
	ckptd_shared *sh = arg;
	if (sh->tree)
		ckptd__sh_s3_clean(sh);
	else
		clean_partial(sh);
	pthread_mutex_lock(&sh->mu);
	while (!sh->stop) {
		if (!sh->nq) {
			if (sh->tree) /* nothing to upload: the part buffers go */
				ckpt_s3_trim(sh->tree->s3);
			pthread_cond_wait(&sh->cv, &sh->mu);
			continue;
		}
		sh_item *it = malloc(sizeof(*it));
		if (!it) { /* try again in a second */
			struct timespec ts = { 0, 0 };
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec++;
			pthread_cond_timedwait(&sh->cv, &sh->mu, &ts);
			continue;
		}
		size_t i = pick(sh);
		*it = sh->q[i];
		sh->q[i] = sh->q[--sh->nq];
		sh->cur = it;
		sh->cancel = 0;
		pthread_mutex_unlock(&sh->mu);
		uint64_t t0 = ckpt__now_ns();
		if (sh->tree)
			it->err = it->kind == SH_COPY ? ckptd__sh_s3_copy(sh, it) : ckptd__sh_s3_mark(sh, it);
		else
			it->err = it->kind == SH_COPY ? copy_file(sh, it) : write_mark(sh, it);
		it->ns = ckpt__now_ns() - t0;
		pthread_mutex_lock(&sh->mu);
		it->cancelled = sh->cancel;
		sh->cur = NULL;
		it->next = sh->done;
		sh->done = it;
		char one = 1;
		while (write(sh->pipe[1], &one, 1) < 0 && errno == EINTR)
			;
	}
	pthread_mutex_unlock(&sh->mu);
	return NULL;
}

/* ---------------------------------------------------------------- loop */

static void handle_result(ckptd_agent *a, sh_item *it);
static void backlog_gauge(ckptd_agent *a);

/* Queues an item unless the same one is queued or in flight. Returns 1 if
 * queued, 0 if it was, -ENOMEM. */
static int enqueue(ckptd_shared *sh, const sh_item *it)
{
	int r = 0;
	pthread_mutex_lock(&sh->mu);
	for (size_t i = 0; i < sh->nq; i++) {
		const sh_item *x = &sh->q[i];
		if (x->kind == it->kind && x->version == it->version && x->rank == it->rank && !strcmp(x->job, it->job))
			goto out;
	}
	if (sh->cur && sh->cur->kind == it->kind && sh->cur->version == it->version && sh->cur->rank == it->rank &&
	    !strcmp(sh->cur->job, it->job))
		goto out;
	if (sh->nq == sh->capq) {
		size_t nc = sh->capq ? sh->capq * 2 : 16;
		void *p = realloc(sh->q, nc * sizeof(*sh->q));
		if (!p) {
			r = -ENOMEM;
			goto out;
		}
		sh->q = p;
		sh->capq = nc;
	}
	sh->q[sh->nq++] = *it;
	pthread_cond_broadcast(&sh->cv);
	r = 1;
out:
	pthread_mutex_unlock(&sh->mu);
	return r;
}

typedef struct src_find {
	const sh_item *it;
	char *out;
	size_t cap;
} src_find;

static int src_cb(void *arg, const char *root)
{
	src_find *f = arg;
	struct stat st;
	if (ckpt__shard_path(f->out, f->cap, root, f->it->job, f->it->version, f->it->rank) == 0 && stat(f->out, &st) == 0)
		return 1;
	f->out[0] = '\0';
	return 0;
}

/* The records of one shard, as a version's are walked in key order. */
typedef struct shard_acc {
	ckptd_agent *a;
	int copies, markers;    /* what to queue */
	int need_commit;        /* only versions the index has committed at LOCAL_DISK */
	int have;               /* a shard in hand */
	ckptd_aidx_rec disk;    /* its LOCAL_DISK record, if have & 1 */
	uint32_t tiers;
	int queued;
	int marks;              /* versions whose marker to (re)write */
	char mjob[CKPTD_JOB_MAX + 1];
	uint64_t mversion;
	int mhave;
	ckptd_aidx_rec mrec;
} shard_acc;

static void queue_copy(shard_acc *acc)
{
	if (!acc->copies || !acc->have || !(acc->tiers & CKPT_TIER_LOCAL_DISK) || (acc->tiers & CKPT_TIER_SHARED))
		return;
	if (acc->need_commit && !(acc->disk.committed & CKPT_TIER_LOCAL_DISK))
		return;
	ckptd_agent *a = acc->a;
	sh_item *it = calloc(1, sizeof(*it));
	if (!it)
		return;
	it->kind = SH_COPY;
	snprintf(it->job, sizeof(it->job), "%s", acc->disk.job);
	it->version = acc->disk.version;
	it->rank = acc->disk.rank;
	it->world_size = acc->disk.world_size;
	it->bytes = acc->disk.bytes;
	it->checksum = acc->disk.checksum;
	it->lineage = acc->disk.lineage;
	src_find f = { it, it->src, sizeof(it->src) };
	if (ckptd_aidx_roots(a->idx, it->job, src_cb, &f) == 1 && it->src[0]) {
		if (enqueue(a->shared, it) > 0)
			acc->queued++;
	} else {
		CKPTD_WARN(a->log, NULL, it->job, "version %llu rank %u: no shard file under this job's roots; not flushed",
		           (unsigned long long)it->version, it->rank);
	}
	free(it);
}

static void queue_mark(shard_acc *acc)
{
	if (!acc->markers || !acc->mhave)
		return;
	sh_item *it = calloc(1, sizeof(*it));
	if (!it)
		return;
	it->kind = SH_MARK;
	snprintf(it->job, sizeof(it->job), "%s", acc->mrec.job);
	it->version = acc->mrec.version;
	it->world_size = acc->mrec.world_size;
	it->lineage = acc->mrec.lineage;
	if (enqueue(acc->a->shared, it) > 0)
		acc->marks++;
	free(it);
	acc->mhave = 0;
}

static int shard_cb(void *arg, const ckptd_aidx_rec *r)
{
	shard_acc *acc = arg;
	if (acc->have && (r->version != acc->disk.version || r->rank != acc->disk.rank || strcmp(r->job, acc->disk.job))) {
		queue_copy(acc);
		acc->have = 0;
	}
	if (acc->mhave && (r->version != acc->mrec.version || strcmp(r->job, acc->mrec.job)))
		queue_mark(acc);
	if (!acc->have) {
		acc->have = 1;
		acc->tiers = 0;
		acc->disk = *r;
	}
	acc->tiers |= r->tier;
	if (r->tier == CKPT_TIER_LOCAL_DISK)
		acc->disk = *r;
	/* A version committed at SHARED with copies flushed here: its marker. */
	if (r->tier == CKPT_TIER_SHARED && (r->committed & CKPT_TIER_SHARED) && !acc->mhave) {
		acc->mhave = 1;
		acc->mrec = *r;
	}
	return 0;
}

static void finish_acc(shard_acc *acc)
{
	queue_copy(acc);
	acc->have = 0;
	queue_mark(acc);
}

/* Everything the index says is still to flush (at start, and after a
 * failure): LOCAL_DISK copies of committed versions without a SHARED
 * copy, and markers of versions committed at SHARED. */
static void scan_index(ckptd_agent *a)
{
	shard_acc acc = { .a = a, .copies = 1, .markers = 1, .need_commit = 1 };
	ckptd_aidx_each(a->idx, shard_cb, &acc);
	finish_acc(&acc);
	if (acc.queued || acc.marks)
		CKPTD_INFO(a->log, NULL, NULL, "SHARED: %d shard files and %d commit markers to flush to %s", acc.queued,
		           acc.marks, a->shared->dir);
}

void ckptd__shared_emergency(ckptd_agent *a, const char *job, uint64_t version)
{
	ckptd_shared *sh = a->shared;
	if (!sh) {
		CKPTD_WARN(a->log, NULL, job, "emergency checkpoint at step %llu aimed at SHARED, but this agent has no "
		           "--shared-dir: its ranks' shards cannot get there", (unsigned long long)version);
		return;
	}
	pthread_mutex_lock(&sh->mu);
	if (!urgent_locked(sh, job, version)) {
		size_t k = sh->nurgent++ % URGENT_MAX;
		snprintf(sh->urgent[k].job, sizeof(sh->urgent[k].job), "%s", job);
		sh->urgent[k].version = version;
	}
	pthread_mutex_unlock(&sh->mu);
	CKPTD_INFO(a->log, NULL, job, "emergency checkpoint at step %llu: flushed to SHARED ahead of the queue and "
	           "the throttle once committed on this node's disk", (unsigned long long)version);
}

void ckptd__shared_notice(ckptd_agent *a, const ckptd_commit_notice *n)
{
	if (!a->shared || (n->tier != CKPT_TIER_LOCAL_DISK && n->tier != CKPT_TIER_SHARED))
		return;
	shard_acc acc = { .a = a, .copies = n->tier == CKPT_TIER_LOCAL_DISK, .markers = n->tier == CKPT_TIER_SHARED };
	ckptd_aidx_each_of(a->idx, n->job, n->version, shard_cb, &acc);
	finish_acc(&acc);
	backlog_gauge(a);
	if (acc.queued)
		CKPTD_DEBUG(a->log, NULL, n->job, "version %llu: %d shard files queued for SHARED", (unsigned long long)n->version,
		            acc.queued);
}

/* Drops what is queued of (job, version) and flags it in flight or done. */
static void cancel(ckptd_shared *sh, const char *job, uint64_t version)
{
	pthread_mutex_lock(&sh->mu);
	for (size_t i = 0; i < sh->nq;) {
		if (sh->q[i].version == version && !strcmp(sh->q[i].job, job))
			sh->q[i] = sh->q[--sh->nq];
		else
			i++;
	}
	if (sh->cur && sh->cur->version == version && !strcmp(sh->cur->job, job)) {
		sh->cancel = 1;
		pthread_cond_broadcast(&sh->cv);
	}
	for (sh_item *it = sh->done; it; it = it->next)
		if (it->version == version && !strcmp(it->job, job))
			it->cancelled = 1;
	pthread_mutex_unlock(&sh->mu);
}

typedef struct ranks_acc {
	uint32_t *r;
	size_t n, cap;
	int err;
} ranks_acc;

static int shared_rank_cb(void *arg, const ckptd_aidx_rec *r)
{
	ranks_acc *acc = arg;
	if (r->tier != CKPT_TIER_SHARED)
		return 0;
	if (acc->n == acc->cap) {
		size_t nc = acc->cap ? acc->cap * 2 : 8;
		void *p = realloc(acc->r, nc * sizeof(*acc->r));
		if (!p) {
			acc->err = -ENOMEM;
			return 1;
		}
		acc->r = p;
		acc->cap = nc;
	}
	acc->r[acc->n++] = r->rank;
	return 0;
}

static int unlink_at_ok(int dfd, const char *name)
{
	return unlinkat(dfd, name, 0) == 0 || errno == ENOENT ? 0 : -errno;
}

int ckptd__shared_delete(ckptd_agent *a, const char *job, uint64_t version, uint32_t tiers)
{
	/* Whatever is queued or in flight of the version goes: its source or
	 * its destination is going. */
	if (a->shared && (tiers & (CKPT_TIER_LOCAL_DISK | CKPT_TIER_SHARED)))
		cancel(a->shared, job, version);
	if (!(tiers & CKPT_TIER_SHARED))
		return 0;
	ranks_acc acc = { 0 };
	int r = ckptd_aidx_each_of(a->idx, job, version, shared_rank_cb, &acc);
	if (r >= 0 && acc.err < 0)
		r = acc.err;
	if (r < 0 || !acc.n) {
		free(acc.r);
		return r < 0 ? r : 0;
	}
	const char *dir = a->cfg->shared_dir;
	if (a->shared && a->shared->tree) {
		r = ckptd__sh_s3_delete(a->shared, job, version, acc.r, acc.n);
		free(acc.r);
		return r;
	}
	if (!dir) {
		CKPTD_WARN(a->log, NULL, job, "version %llu: %zu SHARED copies recorded but no --shared-dir; their files stay",
		           (unsigned long long)version, acc.n);
		free(acc.r);
		return 0;
	}
	/* Walked without following a symlink below --shared-dir: anyone who
	 * can write the shared filesystem could plant one. */
	char rel[160], vname[32], name[32];
	snprintf(rel, sizeof(rel), "jobs/%s", job);
	snprintf(vname, sizeof(vname), "v%020llu", (unsigned long long)version);
	int jfd = ckpt__dir_open_below(dir, rel, 0, 0), vfd = -1;
	if (jfd >= 0)
		vfd = ckpt__dir_open_at(jfd, vname, 0, 0);
	r = jfd == -ENOENT || vfd == -ENOENT ? 0 : jfd < 0 ? jfd : vfd < 0 ? vfd : 0;
	if (r == -ELOOP || r == -ENOTDIR) {
		/* Not ours to follow; a symlink at the version's name goes itself. */
		CKPTD_WARN(a->log, NULL, job, "version %llu: %s/%s%s%s is a symlink or not a directory; not followed",
		           (unsigned long long)version, dir, rel, jfd >= 0 ? "/" : "", jfd >= 0 ? vname : "");
		if (jfd >= 0)
			unlinkat(jfd, vname, 0);
		r = 0;
	}
	/* The marker first: a version with a file missing is never complete. */
	if (vfd >= 0) {
		r = unlink_at_ok(vfd, CKPT_SHARED_MARKER);
		if (r == 0 && fsync(vfd) < 0)
			r = -errno;
		for (size_t i = 0; i < acc.n && r == 0; i++) {
			snprintf(name, sizeof(name), "r%06u.ckpt", acc.r[i]);
			r = unlink_at_ok(vfd, name);
		}
		if (r == 0 && fsync(vfd) < 0)
			r = -errno;
		/* The last agent to delete its files removes the directory. */
		if (r == 0 && unlinkat(jfd, vname, AT_REMOVEDIR) == 0)
			fsync(jfd);
	}
	if (vfd >= 0)
		close(vfd);
	if (jfd >= 0)
		close(jfd);
	if (r < 0) {
		CKPTD_ERROR(a->log, NULL, job, "version %llu: deleting its SHARED files under %s failed: %s",
		            (unsigned long long)version, dir, strerror(-r));
	}
	free(acc.r);
	return r;
}

static void unlink_placed(ckptd_agent *a, const sh_item *it)
{
	char p[PATH_BUF];
	if (a->shared->tree) {
		ckptd__sh_s3_unplace(a->shared, it);
		return;
	}
	int r = it->kind == SH_MARK ? ckpt__shared_marker_path(p, sizeof(p), a->shared->dir, it->job, it->version)
	                            : ckpt__shard_path(p, sizeof(p), a->shared->dir, it->job, it->version, it->rank);
	if (r == 0 && unlink(p) == 0)
		ckpt__fsync_parent(p);
}


/* Results of the thread, in the loop: recorded and reported. */
static void on_flushed(ckptd_server *srv, int fd, uint32_t events, void *arg)
{
	(void)srv, (void)events;
	ckptd_agent *a = arg;
	ckptd_shared *sh = a->shared;
	char b[64];
	while (read(fd, b, sizeof(b)) > 0)
		;
	pthread_mutex_lock(&sh->mu);
	sh_item *done = NULL, *next;
	for (sh_item *it = sh->done; it; it = next) { /* oldest first */
		next = it->next;
		it->next = done;
		done = it;
	}
	sh->done = NULL;
	pthread_mutex_unlock(&sh->mu);
	for (sh_item *it = done; it; it = next) {
		next = it->next;
		handle_result(a, it);
		free(it);
	}
	backlog_gauge(a);
}

static void handle_result(ckptd_agent *a, sh_item *it)
{
	ckptd_shared *sh = a->shared;
	{
		if (it->cancelled) {
			/* Deleted meanwhile: nothing it wrote stays, nothing is reported
			 * (a file it found in place is left to the deletion's records). */
			if (it->kind == SH_MARK ? it->err == 0 : it->copied > 0)
				unlink_placed(a, it);
			CKPTD_INFO(a->log, NULL, it->job, "version %llu: deleted during its flush to SHARED; dropped",
			           (unsigned long long)it->version);
			return;
		}
		if (it->kind == SH_MARK) {
			if (it->err < 0)
				CKPTD_WARN(a->log, NULL, it->job, "version %llu: writing the SHARED commit marker failed: %s",
				           (unsigned long long)it->version, it->why);
			else
				CKPTD_DEBUG(a->log, NULL, it->job, "version %llu: SHARED commit marker in place",
				            (unsigned long long)it->version);
			if (it->err < 0 && it->err != -ENOENT && !sh->retry_at_ns)
				sh->retry_at_ns = ckpt__now_ns() + sh->retry_ms * 1000000ull;
			return;
		}
		if (it->err == -ECANCELED)
			return; /* stopping */
		if (it->err < 0 && !it->placed) {
			CKPTD_WARN(a->log, NULL, it->job, "version %llu rank %u: flush to SHARED failed: %s",
			           (unsigned long long)it->version, it->rank, it->why);
			/* A missing or damaged rank's file will not get better. */
			if (it->err != -ENOENT && it->err != -EEXIST && it->err != -CKPT_ECORRUPT && it->err != -CKPT_EFORMAT &&
			    !sh->retry_at_ns)
				sh->retry_at_ns = ckpt__now_ns() + sh->retry_ms * 1000000ull;
			return;
		}
		if (it->copied) {
			ckptd_metrics_add(a->mx, CKPTD_M_SHARED_BYTES, it->job, NULL, (double)it->copied);
			ckptd_metrics_observe(a->mx, CKPTD_M_SHARED_SECONDS, it->job, NULL, (double)it->ns / 1e9);
		}
		CKPTD_INFO(a->log, NULL, it->job, "version %llu rank %u %s SHARED (%llu bytes, %.2f s)",
		           (unsigned long long)it->version, it->rank, it->copied ? "flushed to" : "already in",
		           (unsigned long long)it->copied, (double)it->ns / 1e9);
		ckptd_shard_done d = { 0 };
		snprintf(d.job, sizeof(d.job), "%s", it->job);
		d.version = it->version;
		d.rank = it->rank;
		d.world_size = it->world_size;
		d.tier = CKPT_TIER_SHARED;
		d.bytes = it->bytes;
		d.checksum = it->checksum;
		d.lineage = it->lineage;
		if (ckptd__agent_done_push(a, NULL, &d) < 0) /* the next scan finds it in place */
			sh->retry_at_ns = ckpt__now_ns() + sh->retry_ms * 1000000ull;
	}
}

typedef struct jv {
	const char *job;
	uint64_t version;
} jv;

static int jv_cmp(const void *x, const void *y)
{
	const jv *a = x, *b = y;
	int c = strcmp(a->job, b->job);
	return c ? c : a->version < b->version ? -1 : a->version > b->version;
}

/* The backlog gauge: versions queued or in flight, per job. */
static void backlog_gauge(ckptd_agent *a)
{
	ckptd_shared *sh = a->shared;
	pthread_mutex_lock(&sh->mu);
	size_t n = 0;
	jv *v = malloc((sh->nq + 1) * sizeof(*v));
	char curjob[CKPTD_JOB_MAX + 1] = "";
	for (size_t i = 0; v && i < sh->nq; i++)
		v[n++] = (jv){ sh->q[i].job, sh->q[i].version };
	if (v && sh->cur) {
		snprintf(curjob, sizeof(curjob), "%s", sh->cur->job);
		v[n++] = (jv){ curjob, sh->cur->version };
	}
	/* The jobs' names are copied before the lock goes. */
	char (*names)[CKPTD_JOB_MAX + 1] = v ? malloc((n + 1) * sizeof(*names)) : NULL;
	for (size_t i = 0; names && i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "%s", v[i].job);
		v[i].job = names[i];
	}
	pthread_mutex_unlock(&sh->mu);
	if (!v || !names) {
		free(v);
		free(names);
		return;
	}
	qsort(v, n, sizeof(*v), jv_cmp);
	ckptd_metrics_zero(a->mx, CKPTD_M_SHARED_BACKLOG);
	for (size_t i = 0, j; i < n; i = j) {
		double versions = 0;
		for (j = i; j < n && !strcmp(v[j].job, v[i].job); j++)
			versions += j == i || v[j].version != v[j - 1].version;
		ckptd_metrics_set(a->mx, CKPTD_M_SHARED_BACKLOG, v[i].job, NULL, versions);
	}
	free(v);
	free(names);
}

/* The retry after a failure, and the gauge (the thread moves on alone). */
static void tick(ckptd_server *srv, void *arg)
{
	(void)srv;
	ckptd_agent *a = arg;
	ckptd_shared *sh = a->shared;
	if (sh->retry_at_ns && ckpt__now_ns() >= sh->retry_at_ns) {
		sh->retry_at_ns = 0;
		scan_index(a);
	}
	backlog_gauge(a);
}

int ckptd__shared_open(ckptd_agent *a, char *err, size_t errcap)
{
	const ckptd_config *cfg = a->cfg;
	struct stat st;
	if (!cfg->shared_dir)
		return 0;
	int s3 = ckpt__s3tree_is_url(cfg->shared_dir);
	if (s3) {
		/* checked by ckptd__sh_s3_open */
	} else if (cfg->shared_dir[0] != '/' || strlen(cfg->shared_dir) > CKPTD_PATH_MAX) {
		snprintf(err, errcap, "--shared-dir %s: want an absolute path of at most %d bytes", cfg->shared_dir,
		         CKPTD_PATH_MAX);
		return -EINVAL;
	}
	/* Not made here: a missing mount would otherwise fill the local disk. */
	if (!s3 && (stat(cfg->shared_dir, &st) < 0 || !S_ISDIR(st.st_mode))) {
		snprintf(err, errcap, "--shared-dir %s: not a directory (is the shared filesystem mounted?)", cfg->shared_dir);
		return -ENOTDIR;
	}
	ckptd_shared *sh = calloc(1, sizeof(*sh));
	if (!sh)
		return -ENOMEM;
	sh->a = a;
	sh->pipe[0] = sh->pipe[1] = -1;
	snprintf(sh->dir, sizeof(sh->dir), "%s", cfg->shared_dir);
	snprintf(sh->partial, sizeof(sh->partial), "%s/.partial/%s", cfg->shared_dir, a->node);
	sh->rate = cfg->shared_rate;
	sh->retry_ms = cfg->shared_retry_ms ? cfg->shared_retry_ms : 30000;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&sh->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&sh->mu, NULL);
	a->shared = sh;
	int r;
	if (s3 && (r = ckptd__sh_s3_open(sh, cfg->shared_dir, err, errcap)) < 0)
		return r;
	if (pipe2(sh->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		r = -errno;
		goto fail;
	}
	if ((r = ckptd_server_watch(a->srv, sh->pipe[0], on_flushed, a)) < 0 ||
	    (r = ckptd_server_every(a->srv, TICK_MS, tick, a)) < 0)
		goto fail;
	CKPTD_INFO(a->log, NULL, NULL, "SHARED tier: flushing committed versions to %s at %s", sh->dir,
	           sh->rate ? "a throttled rate" : "full speed");
	/* Queued before the thread starts: on an object store it aborts the
	 * uploads a killed run left of what is queued. */
	scan_index(a);
	if ((r = -pthread_create(&sh->thr, NULL, flush_main, sh)) < 0)
		goto fail;
	sh->started = 1;
	return 0;
fail:
	snprintf(err, errcap, "cannot start the flush to --shared-dir: %s", strerror(-r));
	return r;
}

void ckptd__shared_close(ckptd_agent *a)
{
	ckptd_shared *sh = a->shared;
	if (!sh)
		return;
	if (sh->started) {
		pthread_mutex_lock(&sh->mu);
		sh->stop = 1;
		pthread_cond_broadcast(&sh->cv);
		pthread_mutex_unlock(&sh->mu);
		/* An upload in flight ends now, not after its parts' retries
		 * (CKPT_S3_RETRY_TOTAL, minutes): what it left is aborted at the
		 * next start, as after a kill. */
		if (sh->tree)
			ckpt_s3_cancel(sh->tree->s3, 1);
		pthread_join(sh->thr, NULL);
	}
	/* Unfinished work is found again in the index at the next start. */
	if (sh->pipe[0] >= 0)
		close(sh->pipe[0]);
	if (sh->pipe[1] >= 0)
		close(sh->pipe[1]);
	pthread_cond_destroy(&sh->cv);
	pthread_mutex_destroy(&sh->mu);
	free(sh->q);
	ckptd__sh_s3_close(sh);
	for (sh_item *it = sh->done, *next; it; it = next) {
		next = it->next;
		free(it);
	}
	free(sh);
	a->shared = NULL;
}
