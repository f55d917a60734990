/* The SHARED tier's tree, as the agents write it and ranks read it: a shared
 * filesystem directory in the layout of a checkpoint root
 * (jobs/<job>/v<version>/r<rank>.ckpt, see common.h), into which each agent
 * copies the shard files of committed versions, plus one marker file per
 * version, written once the coordinator committed the version at SHARED
 * (every rank's copy is there and was verified by the agent that made it).
 *
 * The marker is what lets a rank restore from the tree with no coordinator
 * and no agent that remembers it (every node lost): a version directory with
 * a marker is complete, one without is not offered. It goes first when the
 * version's SHARED copies are deleted. docs/operations.md, "Shared storage". */
#ifndef CKPT_SHARED_H
#define CKPT_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "base/dirs.h"

#define CKPT_SHARED_MARKER CKPT_VNAME_MARKER_NAME

typedef struct ckpt_shared_mark {
	uint32_t world_size; /* ranks of the version: every one has its file */
	uint64_t lineage;    /* the run that wrote it (0: not known) */
} ckpt_shared_mark;

/* <dir>/jobs/<job>/v<version>/COMMITTED. Returns 0 or -ENAMETOOLONG. */
int ckpt__shared_marker_path(char *out, size_t cap, const char *dir, const char *job, uint64_t version);

/* The marker's text (at most CKPT_SHARED_MARKER_MAX bytes) into buf: its
 * length, or -ENAMETOOLONG. The object store's marker has the same bytes. */
#define CKPT_SHARED_MARKER_MAX 512
int ckpt__shared_marker_format(char *buf, size_t cap, const char *job, uint64_t version, const ckpt_shared_mark *m);

/* Writes the marker of (job, version) under dir crash-safely: to tmp (a
 * path on the same filesystem that no other writer uses), fsync, rename
 * into place, fsync of the version directory. An existing marker is left
 * as it is. Returns 0 or -errno. */
int ckpt__shared_marker_write(const char *dir, const char *job, uint64_t version, const ckpt_shared_mark *m,
                              const char *tmp);

/* Reads and checks the marker (it must name job and version).
 * Returns 0, -ENOENT (none), -CKPT_ECORRUPT (not a marker of this version)
 * or -errno. */
int ckpt__shared_marker_read(const char *dir, const char *job, uint64_t version, ckpt_shared_mark *m);
/* The marker's bytes (len of them, as read) for job and version: 0, or
 * -CKPT_ECORRUPT for anything else (fuzzed: tests/fuzz/fuzz_index.c). */
int ckpt__shared_marker_parse(const char *buf, size_t len, const char *job, uint64_t version, ckpt_shared_mark *m);

/* Adds to the ascending, duplicate-free list *v (n entries, malloc'd; may
 * be NULL with n 0) the versions of job that have a directory under dir,
 * keeping it ascending and duplicate-free. Markers are not read here (one
 * readdir, whatever the number of versions): the caller reads the marker of
 * a version the tree alone names when its turn comes. [out] tree_only:
 * malloc'd, one flag per entry of the new list, 1 where only the tree named
 * it. Returns the number of version directories found, or -ENOMEM (v and n
 * then unchanged). A missing or unreadable tree adds nothing. */
int ckpt__shared_merge(const char *dir, const char *job, uint64_t **v, size_t *n, uint8_t **tree_only);

/* Merges found[0..nf) (versions seen in a SHARED tree; taken over and
 * freed) into the ascending list *v of *n versions: the union, ascending,
 * without repeats, replaces *v, and *tree_only (allocated, one flag per
 * entry) marks those only the tree had. Returns nf (capped at INT32_MAX)
 * or -ENOMEM (found freed, *v untouched). */
int ckpt__shared_merge_found(uint64_t **v, size_t *n, uint64_t *found, size_t nf, uint8_t **tree_only);

#endif
