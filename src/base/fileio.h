/* Files: read-only maps, whole-file reads, and atomic writes.
 *
 * Everything plait writes (datasets, index caches, checkpoints) goes through
 * pl_wfile: bytes go to "<path>.tmp.<pid>", and only pl_wfile_commit() makes
 * them appear under <path> (fflush, fsync, rename), so a reader never sees a
 * half-written file and an interrupted run leaves the old file intact. */
#ifndef PL_BASE_FILEIO_H
#define PL_BASE_FILEIO_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct pl_mmap {
    const uint8_t *data; /* NULL for an empty file */
    size_t size;
} pl_mmap;

/* Maps path read-only. Errors name the path. */
pl_status pl_mmap_open(pl_mmap *m, const char *path);
void pl_mmap_close(pl_mmap *m);

/* Reads a whole file into a NUL-terminated pl_malloc'd buffer. */
pl_status pl_file_read_all(const char *path, char **out, size_t *size);

typedef struct pl_wfile {
    FILE *fp;
    char *path;
    char *tmp_path;
} pl_wfile;

pl_status pl_wfile_open(pl_wfile *w, const char *path);
pl_status pl_wfile_write(pl_wfile *w, const void *data, size_t n);
/* Flushes, fsyncs and renames into place; closes w in every case. */
pl_status pl_wfile_commit(pl_wfile *w);
/* Closes and deletes the temporary file. Safe on a closed or zeroed w. */
void pl_wfile_abort(pl_wfile *w);

/* rm -rf path (files and directories below it). A missing path is not an error. */
pl_status pl_rmtree(const char *path);

/* fsync a directory, so a rename inside it is durable. */
pl_status pl_fsync_dir(const char *dir);

/* Writes data[0..n) to path through pl_wfile (temporary name, fsync, rename). */
pl_status pl_file_write_atomic(const char *path, const void *data, size_t n);

/* mkdir -p. */
pl_status pl_mkdirs(const char *dir);
int pl_file_exists(const char *path);

#endif
