/* The root's pool of recycled shard files (<root>/recycle/, docs/format.md
 * section 1): files of versions that retention or gc deleted, kept
 * allocated so that a new shard overwrites blocks the filesystem already
 * holds instead of allocating fresh ones (on ext4, a third of a new file's
 * write time). A file enters the pool only from a deletion, that is after
 * its version was marked DELETING in the index (never restorable again);
 * a save takes one by renaming it to its temp name, rewrites every byte of
 * it and truncates it to its new length before the fdatasync, so the old
 * shard cannot pass for the new one nor survive inside it. */
#ifndef CKPT_RECYCLE_H
#define CKPT_RECYCLE_H

#include <stdint.h>

#define CKPT_RECYCLE_DIR "recycle"
/* The pool never holds more files than this; a deletion beyond it unlinks. */
#define CKPT_RECYCLE_MAX 64

/* 1 if name is a pool file name: 'p', 16 lowercase hex digits, ".free". */
int ckpt__recycle_name(const char *name);

/* Opens root's pool directory (creating it, mode 0700, with create), never
 * through a symlink. Returns a directory fd, -ENOENT when there is none (and
 * !create), or -errno. */
int ckpt__recycle_open(const char *root, int create);

/* Moves the shard file name of directory vfd into the pool pfd. Returns 1
 * when moved, 0 when it stays for the caller to unlink (not a regular file
 * with one link, empty, or the pool full), or -errno. */
int ckpt__recycle_put(int pfd, int vfd, const char *name);

/* Takes the pool file whose length is nearest to want (within
 * [want - want/4, want + want/4 + 4 MiB]), renaming it to dst_name in
 * directory dfd (replacing what is there). Returns 1 with *got its length,
 * 0 when none fits, or -errno. */
int ckpt__recycle_take(int pfd, uint64_t want, int dfd, const char *dst_name, uint64_t *got);

/* Unlinks every pool file and the directory (recycling turned off).
 * Returns the number of files removed, or -errno. */
int ckpt__recycle_drain(const char *root);

#endif
