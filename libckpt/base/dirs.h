/* Directories inside a checkpoint root (or restore's --out), walked without
 * following symbolic links. The daemon runs as root on shared nodes and the
 * names below a root are whatever its owner put there: a symlinked jobs/,
 * job or version directory must never send a write or a deletion somewhere
 * else. The root itself is the operator's path and is followed. */
#ifndef CKPT_BASE_DIRS_H
#define CKPT_BASE_DIRS_H

#include <stddef.h>
#include <stdint.h>

/* Opens the directory base/rel, where rel is '/'-separated components below
 * base (NULL or "" for base itself). base is opened as given; every
 * component of rel is opened with O_NOFOLLOW | O_DIRECTORY, so a symlink
 * there gives -ELOOP and a file -ENOTDIR. With create, missing components
 * are made with mode. Returns an O_DIRECTORY descriptor, or -errno. */
int ckpt__dir_open_below(const char *base, const char *rel, int create, int mode);

/* The same from an open directory: one component name, no '/'. */
int ckpt__dir_open_at(int dirfd, const char *name, int create, int mode);

/* What a name in a version directory is, by the format (docs/format.md
 * section 1): a shard file r<digits>.ckpt, a shard being written
 * .r<digits>.ckpt.tmp, the SHARED tier's commit marker (and its temp
 * name), or none of these. */
#define CKPT_VNAME_MARKER_NAME "COMMITTED"
enum { CKPT_VNAME_OTHER = 0, CKPT_VNAME_SHARD, CKPT_VNAME_TMP, CKPT_VNAME_MARKER };
int ckpt__version_entry_kind(const char *name);

#endif
