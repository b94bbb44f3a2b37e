/* Reading a checkpoint's files without trusting the names it gives.
 *
 * Every file a checkpoint names (the manifest, its checksum, the shards, a ZeRO
 * shard's "file", the tokenizer's files) is opened relative to the iteration
 * directory's descriptor, one path component at a time with O_NOFOLLOW: a
 * name that is absolute, empty, contains "." or ".." components, or passes
 * through a symbolic link is refused, and so is an iter_* directory that is a
 * symbolic link. The last component is opened with O_NONBLOCK and must be a
 * regular file (fstat), so a FIFO or a device is an error, never a hang;
 * O_NONBLOCK is cleared afterwards. The directory given by the user (--load)
 * is trusted and may itself be a symbolic link.
 *
 * Not a sandbox against a concurrent attacker who can rename directories under
 * us (use openat2's RESOLVE_BENEATH for that); it is the defence against an
 * edited or hostile checkpoint handed to plait. */
#ifndef PL_CKPT_FILES_H
#define PL_CKPT_FILES_H

#include "base/fileio.h"

#include <stdint.h>

/* Checks that rel is a relative path inside a directory: not empty, not
 * absolute, no empty, "." or ".." component. what names it in the error
 * ("ZeRO shard \"file\"", ...); where is the file that named it. */
pl_status pl_ckpt_rel_check(const char *rel, const char *what, const char *where);

/* The directory name of iteration it: "iter_%07lld", or "release" for
 * PL_CKPT_RELEASE (ckpt/checkpoint.h). */
void pl_ckpt_iter_name(int64_t it, char *out, size_t n);

/* Opens iteration `it` of dir as a directory descriptor (*fd) and writes its
 * path to idir (n bytes). iter_N must be a real directory, not a symbolic
 * link. When iter_N is missing but the aside copy iter_N.old of an interrupted
 * re-save exists, that copy is opened instead (a warning says so, and *aside
 * is 1); the next save into dir renames it back. */
pl_status pl_ckpt_iter_open(const char *dir, int64_t it, int *fd, char *idir, size_t n, int *aside);

/* Opens rel below the directory descriptor dfd (named dname in messages),
 * confined as above: *fd is a descriptor of a regular file (want_dir 0) or of a
 * directory (want_dir 1). */
pl_status pl_ckpt_open_in(int dfd, const char *dname, const char *rel, int want_dir, int *fd);

/* Maps rel below dfd read-only (pl_mmap_close releases it). */
pl_status pl_ckpt_map_in(int dfd, const char *dname, const char *rel, pl_mmap *m);

/* Checks that rel below dfd is a regular file or, with allow_dir, a directory,
 * reached without symbolic links (the tokenizer's files, opened by path later). */
pl_status pl_ckpt_check_in(int dfd, const char *dname, const char *rel, int allow_dir);

#endif
