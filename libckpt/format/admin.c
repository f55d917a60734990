#include "admin.h"
#include "format.h"
#include "reader.h"
#include "recycle.h"
#include "base/dirs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Removes from the version directory vfd the names the format defines;
 * anything else (a stray directory, a file someone left) stays, is logged
 * and counted in *stray: it is not ours to delete, and it must not keep the
 * version's deletion from finishing. */
static int remove_entries(int vfd, const char *vname, uint64_t version, ckpt_faults *fs, const ckpt_logger *lg,
                          unsigned *stray, int pfd, unsigned *recycled)
{
	int dfd = dup(vfd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		int err = -errno;
		if (dfd >= 0)
			close(dfd);
		return err;
	}
	struct dirent *e;
	int n = 0, err = 0;
	while (err == 0 && (e = readdir(d))) {
		const char *nm = e->d_name;
		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		if (ckpt__version_entry_kind(nm) == CKPT_VNAME_OTHER) {
			LOG_W(lg, version, "delete: %s/%s left in place: not a name the checkpoint format defines", vname, nm);
			(*stray)++;
			continue;
		}
		/* With a pool, a shard file goes there instead (recycle.h): its
		 * version is DELETING already, never to be restored. */
		int moved = 0;
		if (pfd >= 0 && ckpt__version_entry_kind(nm) == CKPT_VNAME_SHARD) {
			moved = ckpt__recycle_put(pfd, vfd, nm);
			if (moved < 0)
				LOG_W(lg, version, "delete: %s/%s not recycled (%s); removed", vname, nm, ckpt_strerror(moved));
			*recycled += moved > 0;
		}
		/* unlinkat never follows: a symlink goes, not what it names. */
		if (moved <= 0 && unlinkat(vfd, nm, 0) < 0) {
			if (errno == ENOENT)
				continue;
			if (errno == EISDIR || errno == EPERM) {
				LOG_W(lg, version, "delete: %s/%s left in place: a directory, not a shard file", vname, nm);
				(*stray)++;
				continue;
			}
			err = -errno;
			LOG_E(lg, version, "delete: cannot remove %s/%s: %s", vname, nm, ckpt_strerror(err));
			break;
		}
		if (++n == 1)
			err = ckpt__fault(fs, "gc.mid_delete");
	}
	closedir(d);
	return err;
}

/* Deletes the version's files, walking below root without following a
 * symlink. A jobs/, job or version directory that is not a real directory
 * (a symlink put there) is not walked; a symlink at the version's own name
 * is removed itself. */
static int delete_files(const char *root, const char *job, uint64_t version, ckpt_faults *fs,
                        const ckpt_logger *lg)
{
	char rel[128], vname[32];
	snprintf(rel, sizeof(rel), "jobs/%s", job);
	snprintf(vname, sizeof(vname), "v%020llu", (unsigned long long)version);
	int jfd = ckpt__dir_open_below(root, rel, 0, 0);
	if (jfd == -ENOENT)
		return 0;
	if (jfd == -ELOOP || jfd == -ENOTDIR) {
		LOG_W(lg, version, "delete: %s/%s is not a directory (a symlink?); not followed, nothing deleted in it",
		      root, rel);
		return 0;
	}
	if (jfd < 0)
		return jfd;
	int err = 0;
	int vfd = ckpt__dir_open_at(jfd, vname, 0, 0);
	if (vfd == -ELOOP || vfd == -ENOTDIR) {
		LOG_W(lg, version, "delete: %s/%s/%s is not a directory (a symlink?); removing the name only", root, rel,
		      vname);
		if (unlinkat(jfd, vname, 0) < 0 && errno != ENOENT)
			err = -errno;
	} else if (vfd >= 0) {
		unsigned stray = 0, recycled = 0;
		int pfd = ckpt__recycle_open(root, 0);
		err = remove_entries(vfd, vname, version, fs, lg, &stray, pfd, &recycled);
		if (err == 0 && fsync(vfd) < 0)
			err = -errno;
		if (recycled && fsync(pfd) < 0 && err == 0)
			err = -errno;
		if (pfd >= 0)
			close(pfd);
		if (recycled)
			LOG_I(lg, version, "delete: %u shard file%s kept allocated in %s/%s for later saves", recycled,
			      recycled == 1 ? "" : "s", root, CKPT_RECYCLE_DIR);
		close(vfd);
		if (err == 0 && stray)
			LOG_W(lg, version, "delete: %s/%s/%s kept: it holds %u entr%s the format does not define; "
			      "the version is deleted", root, rel, vname, stray, stray == 1 ? "y" : "ies");
		else if (err == 0 && unlinkat(jfd, vname, AT_REMOVEDIR) < 0 && errno != ENOENT)
			err = -errno;
	} else if (vfd != -ENOENT) {
		err = vfd;
	}
	if (err == 0 && fsync(jfd) < 0)
		err = -errno;
	if (err < 0)
		LOG_E(lg, version, "delete: %s/%s/%s: %s", root, rel, vname, ckpt_strerror(err));
	close(jfd);
	return err;
}

int ckpt__admin_delete(const char *root, ckpt_index *ix, const char *job, uint64_t version,
                       ckpt_faults *fs, const ckpt_logger *lg)
{
	CKPT_TRY(ckpt__job_valid(job));
	CKPT_TRY(ckpt__index_set_state(ix, job, version, CKPT_STATE_DELETING));
	CKPT_TRY(delete_files(root, job, version, fs, lg));
	CKPT_TRY(ckpt__index_remove(ix, job, version));
	LOG_I(lg, version, "deleted");
	return 0;
}

struct vlist {
	uint64_t *v;
	uint32_t *state;
	size_t n, cap;
};

static int collect(void *arg, uint64_t version, const ckpt_idx_version *v)
{
	struct vlist *l = arg;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 32;
		uint64_t *a = realloc(l->v, nc * sizeof(*a));
		if (!a)
			return -ENOMEM;
		l->v = a;
		uint32_t *s = realloc(l->state, nc * sizeof(*s));
		if (!s)
			return -ENOMEM;
		l->state = s;
		l->cap = nc;
	}
	l->v[l->n] = version;
	l->state[l->n++] = v->state;
	return 0;
}

static void vlist_free(struct vlist *l)
{
	free(l->v);
	free(l->state);
}

static int finish_job(void *arg, const char *job);

struct fin_arg {
	const char *root;
	ckpt_index *ix;
	ckpt_faults *fs;
	const ckpt_logger *lg;
	int err;
};

static int finish_job(void *arg, const char *job)
{
	struct fin_arg *a = arg;
	struct vlist l = { 0 };
	int err = ckpt__index_each_version(a->ix, job, collect, &l);
	for (size_t i = 0; err == 0 && i < l.n; i++)
		if (l.state[i] == CKPT_STATE_DELETING) {
			LOG_I(a->lg, l.v[i], "finishing a deletion left by an earlier process");
			err = ckpt__admin_delete(a->root, a->ix, job, l.v[i], a->fs, a->lg);
		}
	vlist_free(&l);
	if (err < 0 && !a->err)
		a->err = err;
	return 0;
}

/* Job names are collected first: deleting inside the index scan would change
 * what the scan walks. */
struct jobs {
	char (*j)[65];
	size_t n, cap;
};

static int collect_job(void *arg, const char *job)
{
	struct jobs *js = arg;
	if (js->n == js->cap) {
		size_t nc = js->cap ? js->cap * 2 : 8;
		void *p = realloc(js->j, nc * sizeof(*js->j));
		if (!p)
			return -ENOMEM;
		js->j = p;
		js->cap = nc;
	}
	size_t n = strnlen(job, 64);
	memcpy(js->j[js->n], job, n);
	js->j[js->n++][n] = 0;
	return 0;
}

int ckpt__admin_finish_deletes(const char *root, ckpt_index *ix, const char *job, ckpt_faults *fs,
                               const ckpt_logger *lg)
{
	struct fin_arg a = { root, ix, fs, lg, 0 };
	if (job) {
		finish_job(&a, job);
		return a.err;
	}
	struct jobs js = { 0 };
	int err = ckpt__index_each_job(ix, collect_job, &js);
	for (size_t i = 0; err == 0 && i < js.n; i++)
		finish_job(&a, js.j[i]);
	free(js.j);
	return err ? err : a.err;
}

int ckpt__admin_gc(const char *root, ckpt_index *ix, const char *job, uint32_t keep,
                   ckpt_faults *fs, const ckpt_logger *lg, uint32_t *deleted)
{
	*deleted = 0;
	CKPT_TRY(ckpt__admin_finish_deletes(root, ix, job, fs, lg));
	struct vlist l = { 0 };
	int err = ckpt__index_each_version(ix, job, collect, &l);
	if (err < 0) {
		vlist_free(&l);
		return err;
	}
	/* Decide newest first (the first `keep` committed survive), then delete
	 * oldest first, so that an interrupted gc has removed the oldest. */
	uint8_t *del = calloc(l.n + 1, 1);
	if (!del) {
		vlist_free(&l);
		return -ENOMEM;
	}
	uint64_t newest_committed = 0;
	int have_committed = 0;
	uint32_t seen = 0;
	for (size_t i = l.n; i-- > 0;) {
		if (l.state[i] == CKPT_STATE_COMMITTED) {
			if (!have_committed) {
				newest_committed = l.v[i];
				have_committed = 1;
			}
			del[i] = ++seen > keep;
		} else if (l.state[i] == CKPT_STATE_PENDING) {
			del[i] = have_committed && l.v[i] < newest_committed;
		}
	}
	for (size_t i = 0; i < l.n; i++) {
		if (!del[i])
			continue;
		if ((err = ckpt__admin_delete(root, ix, job, l.v[i], fs, lg)) < 0)
			break;
		(*deleted)++;
	}
	free(del);
	vlist_free(&l);
	return err;
}

int ckpt__admin_retain(const char *root, ckpt_index *ix, const char *job, uint32_t keep, ckpt_faults *fs,
                       const ckpt_logger *lg, uint32_t *deleted)
{
	*deleted = 0;
	struct vlist l = { 0 };
	int err = ckpt__index_each_version(ix, job, collect, &l);
	uint32_t seen = 0;
	/* Newest first decides; the list is oldest first, so count from the end. */
	size_t cut = l.n;
	for (size_t i = l.n; err == 0 && i-- > 0;)
		if (l.state[i] == CKPT_STATE_COMMITTED && ++seen == keep) {
			cut = i;
			break;
		}
	for (size_t i = 0; err == 0 && seen == keep && i < cut; i++) {
		if (l.state[i] != CKPT_STATE_COMMITTED)
			continue;
		if ((err = ckpt__admin_delete(root, ix, job, l.v[i], fs, lg)) == 0)
			(*deleted)++;
	}
	vlist_free(&l);
	return err;
}

/* ------------------------------------------------------------- reindex */

struct found {
	ckpt_idx_rebuild_shard *s;
	size_t n, cap;
};

static int count_sink(void *arg, uint32_t ri, uint64_t off, const void *data, size_t len)
{
	(void)arg; (void)ri; (void)off; (void)data; (void)len;
	return 0;
}

/* A directory below jfd, by name, not followed if it is a symlink; NULL
 * when it is not there or not a real directory. */
static DIR *opendir_at(int jfd, const char *name)
{
	int fd = ckpt__dir_open_at(jfd, name, 0, 0);
	if (fd < 0)
		return NULL;
	DIR *d = fdopendir(fd);
	if (!d)
		close(fd);
	return d;
}

static int scan_version_dir(int jfd, const char *vdir, const char *vname, const char *job, uint64_t version,
                            int verify_data, const ckpt_logger *lg, struct found *fd, uint32_t *bad)
{
	DIR *d = opendir_at(jfd, vname);
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		/* r<rank, at least 6 digits>.ckpt */
		const char *nm = e->d_name;
		size_t len = strlen(nm), nd = len > 6 ? len - 6 : 0;
		if (nm[0] != 'r' || len < 12 || strcmp(nm + len - 5, ".ckpt") || nd > 10)
			continue;
		unsigned long long rk = 0;
		int digits = 1;
		for (size_t q = 1; q <= nd; q++) {
			if (nm[q] < '0' || nm[q] > '9')
				digits = 0;
			rk = rk * 10 + (unsigned)(nm[q] - '0');
		}
		if (!digits || rk > UINT32_MAX)
			continue;
		unsigned rank = (unsigned)rk;
		char p[4700], why[512] = "";
		struct stat st;
		/* Only a regular file: a symlink could name any file, a FIFO would
		 * block the scan. */
		if (fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
			LOG_W(lg, version, "reindex: %s/%s refused: not a regular file", vdir, nm);
			(*bad)++;
			continue;
		}
		snprintf(p, sizeof(p), "%s/%s", vdir, e->d_name);
		ckpt_shard s;
		int err = ckpt__shard_open(p, &s, why, sizeof(why));
		if (err == 0 && (s.header.version != version || s.header.rank != rank || strcmp(s.header.job, job))) {
			snprintf(why, sizeof(why), "header names job %s version %llu rank %u", s.header.job,
			         (unsigned long long)s.header.version, s.header.rank);
			err = -CKPT_ECORRUPT;
		}
		if (err == 0 && verify_data) {
			ckpt_read_opts o = { .depth = 8, .direct = 1, .lg = lg, .why = why, .whycap = sizeof(why) };
			err = ckpt__shard_read(p, &s, &o, count_sink, NULL);
		}
		if (err < 0) {
			LOG_W(lg, version, "reindex: %s refused: %s", p, why[0] ? why : ckpt_strerror(err));
			(*bad)++;
			ckpt__shard_close(&s);
			continue;
		}
		if (fd->n == fd->cap) {
			size_t nc = fd->cap ? fd->cap * 2 : 64;
			void *np = realloc(fd->s, nc * sizeof(*fd->s));
			if (!np) {
				ckpt__shard_close(&s);
				closedir(d);
				return -ENOMEM;
			}
			fd->s = np;
			fd->cap = nc;
		}
		ckpt_idx_rebuild_shard *r = &fd->s[fd->n++];
		memset(r, 0, sizeof(*r));
		r->version = version;
		r->rank = rank;
		r->world_size = s.header.world_size;
		r->created_ns = s.header.created_ns;
		r->rec.tiers = CKPT_TIER_LOCAL_DISK;
		r->rec.bytes = s.footer.data_bytes;
		r->rec.stored_bytes = s.footer.stored_bytes;
		r->rec.footer_checksum = s.tail.footer_checksum;
		r->rec.durable_ns = s.header.created_ns;
		r->rec.lineage = s.header.lineage;
		ckpt__shard_close(&s);
	}
	closedir(d);
	return 0;
}

static int by_created(const void *a, const void *b)
{
	const ckpt_idx_rebuild_shard *x = a, *y = b;
	return x->created_ns < y->created_ns ? -1 : x->created_ns > y->created_ns;
}

static int reindex_job(const char *root, ckpt_index *ix, const char *job, int verify_data,
                       const ckpt_logger *lg, uint32_t *shards, uint32_t *bad)
{
	char jdir[4096], rel[128];
	snprintf(jdir, sizeof(jdir), "%s/jobs/%s", root, job);
	snprintf(rel, sizeof(rel), "jobs/%s", job);
	struct found fd = { 0 };
	int jfd = ckpt__dir_open_below(root, rel, 0, 0);
	if (jfd == -ELOOP || jfd == -ENOTDIR)
		LOG_W(lg, CKPT_NO_VERSION, "reindex: %s is not a directory (a symlink?); not followed", jdir);
	DIR *d = jfd >= 0 ? fdopendir(jfd) : NULL;
	if (!d && jfd >= 0)
		close(jfd);
	int err = 0;
	if (d) {
		struct dirent *e;
		while (err == 0 && (e = readdir(d))) {
			unsigned long long v;
			char extra;
			if (e->d_name[0] != 'v' || strlen(e->d_name) != 21 ||
			    sscanf(e->d_name + 1, "%20llu%c", &v, &extra) != 1)
				continue;
			char vdir[4400];
			snprintf(vdir, sizeof(vdir), "%s/%s", jdir, e->d_name);
			err = scan_version_dir(dirfd(d), vdir, e->d_name, job, v, verify_data, lg, &fd, bad);
		}
		closedir(d);
	}
	if (err == 0) {
		if (fd.n)
			qsort(fd.s, fd.n, sizeof(*fd.s), by_created);
		err = ckpt__index_rebuild_job(ix, job, fd.s, fd.n);
	}
	*shards += (uint32_t)fd.n;
	free(fd.s);
	return err;
}

int ckpt__admin_reindex(const char *root, ckpt_index *ix, const char *job, int verify_data,
                        const ckpt_logger *lg, uint32_t *shards, uint32_t *bad)
{
	*shards = 0;
	*bad = 0;
	if (job)
		return reindex_job(root, ix, job, verify_data, lg, shards, bad);
	/* Every job with files, and every job the index knows (to drop it if its
	 * files are gone). */
	struct jobs js = { 0 };
	int err = ckpt__index_each_job(ix, collect_job, &js);
	int jrfd = ckpt__dir_open_below(root, "jobs", 0, 0);
	DIR *d = jrfd >= 0 ? fdopendir(jrfd) : NULL;
	if (!d && jrfd >= 0)
		close(jrfd);
	if (d) {
		struct dirent *e;
		while (err == 0 && (e = readdir(d)))
			if (ckpt__job_valid(e->d_name) == 0)
				err = collect_job(&js, e->d_name);
		closedir(d);
	}
	for (size_t i = 0; err == 0 && i < js.n; i++) {
		int dup = 0;
		for (size_t k = 0; k < i; k++)
			dup |= !strcmp(js.j[k], js.j[i]);
		if (!dup)
			err = reindex_job(root, ix, js.j[i], verify_data, lg, shards, bad);
	}
	free(js.j);
	return err;
}
