/* Deleting this node's copies of a version on the coordinator's word
 * (retention, ckpt rm --daemon): marked in the agent's index first, DRAM
 * segments dropped, files deleted under the roots the job's ranks
 * registered, records dropped, mark removed, the coordinator told. A crash
 * anywhere leaves the mark; a restarted agent finishes (every step is
 * idempotent). */
#include "agent_int.h"

#include "format/admin.h"
#include "format/index.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef struct disk_del {
	ckptd_agent *a;
	const char *job;
	uint64_t version;
	int err;
} disk_del;

/* Deletes the version's files under one root through libckpt's own
 * crash-safe deletion (mark DELETING in that root's index, unlink, fsync,
 * drop the records), which also serves a rank opening that root later. */
static int disk_del_cb(void *arg, const char *root)
{
	disk_del *dd = arg;
	char p[CKPTD_PATH_MAX + 16];
	struct stat st;
	snprintf(p, sizeof(p), "%s/index", root);
	if (stat(p, &st) < 0) {
		CKPTD_WARN(dd->a->log, NULL, dd->job, "version %llu: checkpoint root %s is not there (%s); nothing to delete in it",
		           (unsigned long long)dd->version, root, strerror(errno));
		return 0;
	}
	char why[300];
	if (ckptd__agent_root_still_ok(dd->a, root, why, sizeof(why)) < 0) {
		CKPTD_WARN(dd->a->log, NULL, dd->job, "version %llu: checkpoint root %s no longer trusted (%s); nothing "
		           "deleted under it", (unsigned long long)dd->version, root, why);
		return 0;
	}
	ckpt_index *ix = NULL;
	int r = ckpt__index_open(root, &dd->a->lg, &ix);
	if (r == 0) {
		r = ckpt__admin_delete(root, ix, dd->job, dd->version, &dd->a->faults, &dd->a->lg);
		ckpt__index_close(ix);
	}
	if (r == -CKPT_ENOVERSION)
		r = 0;
	if (r < 0) {
		CKPTD_ERROR(dd->a->log, NULL, dd->job, "version %llu: deleting its files under %s failed: %s",
		            (unsigned long long)dd->version, root, ckpt_strerror(r));
		dd->err = r;
	}
	return 0;
}

/* Deletes this node's copies of (job, version) at tiers, once marked: DRAM
 * segments, then files, then the records, then the mark; tells the
 * coordinator. A crash anywhere leaves the mark, and the restarted agent
 * runs this again (finish_deletes): every step is idempotent. */
static int delete_copies(ckptd_agent *a, const char *job, uint64_t version, uint32_t tiers)
{
	int segs = 0, recs = 0, r;
	ckptd_pool *pool = ckptd_jpools_get(a->pools, job, NULL);
	if (tiers & CKPT_TIER_LOCAL_MEM) {
		segs = pool ? ckptd_pool_version_drop(pool, job, version) : 0;
		recs += ckptd_aidx_del_version(a->idx, job, version, CKPT_TIER_LOCAL_MEM);
	}
	if (tiers & CKPT_TIER_PEER_MEM) {
		segs += ckptd__peer_delete(a, job, version);
		recs += ckptd_aidx_del_version(a->idx, job, version, CKPT_TIER_PEER_MEM);
	}
	/* SHARED (agent_shared.c): cancels a flush of the version, deletes the
	 * files this agent flushed, before the disk copies they came from. */
	if ((r = ckptd__shared_delete(a, job, version, tiers)) < 0)
		return r;
	if (tiers & CKPT_TIER_SHARED)
		recs += ckptd_aidx_del_version(a->idx, job, version, CKPT_TIER_SHARED);
	if (tiers & CKPT_TIER_LOCAL_DISK) {
		disk_del dd = { a, job, version, 0 };
		ckptd_aidx_roots(a->idx, job, disk_del_cb, &dd);
		if (dd.err < 0)
			return dd.err; /* the mark stays: retried at the next request or restart */
		ckpt__fault(&a->faults, "agent.after_disk_delete");
		recs += ckptd_aidx_del_version(a->idx, job, version, CKPT_TIER_LOCAL_DISK);
	}
	if ((r = ckptd_aidx_unmark(a->idx, job, version)) < 0)
		return r;
	ckptd_metrics_add(a->mx, CKPTD_M_AGENT_DELETIONS, job, NULL, 1);
	CKPTD_INFO(a->log, NULL, job, "version %llu: copies deleted at tiers 0x%x (%d segments, %d records)",
	           (unsigned long long)version, tiers, segs, recs);
	ckptd_msg m = { .type = CKPTD_MSG_COPIES_GONE };
	snprintf(m.u.copies_gone.node, sizeof(m.u.copies_gone.node), "%s", a->node);
	snprintf(m.u.copies_gone.job, sizeof(m.u.copies_gone.job), "%s", job);
	m.u.copies_gone.version = version;
	m.u.copies_gone.tiers = tiers;
	/* Lost when the link is down: the inventory then no longer lists them. */
	ckptd__agent_link_send(a, &m, FWD_IGNORE, 0);
	return 0;
}

void ckptd__agent_delete(ckptd_agent *a, const ckptd_delete_version *d)
{
	const uint32_t held = CKPT_TIER_LOCAL_MEM | CKPT_TIER_PEER_MEM | CKPT_TIER_LOCAL_DISK | CKPT_TIER_SHARED;
	uint32_t tiers = (d->tiers ? d->tiers : held) & held; /* what an agent holds today */
	if (!tiers)
		return;
	int r = ckptd_aidx_mark(a->idx, d->job, d->version, tiers);
	if (r == 0)
		r = delete_copies(a, d->job, d->version, tiers);
	if (r < 0)
		CKPTD_WARN(a->log, NULL, d->job, "version %llu: deletion not finished (%s); it is retried",
		           (unsigned long long)d->version, ckpt_strerror(r));
}

static int finish_cb(void *arg, const char *job, uint64_t version, uint32_t tiers)
{
	ckptd_agent *a = arg;
	CKPTD_INFO(a->log, NULL, job, "version %llu: finishing a deletion a previous run left", (unsigned long long)version);
	delete_copies(a, job, version, tiers);
	return 0;
}

void ckptd__agent_finish_deletes(ckptd_agent *a)
{
	ckptd_aidx_marks(a->idx, finish_cb, a);
}
