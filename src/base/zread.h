/* base/zread: a byte stream read plain or decompressed, for corpus files.
 *
 * gzip (zlib), xz (liblzma) and zstd (libzstd) are recognised by their magic
 * bytes (1f 8b; fd '7zXZ' 00; 28 b5 2f fd), whatever the file is called; a
 * name ending .gz, .xz or .zst whose bytes are not that format is an error.
 * Concatenated members/streams/frames are read one after another, as `zcat`,
 * `xzcat` and `zstdcat` do. A stream that ends early (truncated) or fails its
 * checks (corrupt, CRC) is an error naming the file; data after the last gzip
 * member that is not another member is an error too.
 * Not seekable; not for writing. One reader per thread. */
#ifndef PL_BASE_ZREAD_H
#define PL_BASE_ZREAD_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct pl_zread pl_zread;

/* Starts reading fp (not closed by pl_zread_close); `name` names the file in
 * errors and its extension is checked against the content. */
pl_status pl_zread_open(pl_zread **out, FILE *fp, const char *name);

/* Reads up to cap decompressed bytes; *got = 0 only at the end of the data. */
pl_status pl_zread_read(pl_zread *z, void *buf, size_t cap, size_t *got);

/* "gzip", "xz", "zstd", or NULL for a plain file. */
const char *pl_zread_codec(const pl_zread *z);

void pl_zread_close(pl_zread *z);

/* The whole of path, decompressed when it is compressed (*out pl_malloc'd,
 * NUL-terminated, *size without the NUL). */
pl_status pl_zread_file(const char *path, char **out, size_t *size);

/* 1 if path's name ends in an extension this module decompresses. */
int pl_zread_compressed_name(const char *path);

#endif
