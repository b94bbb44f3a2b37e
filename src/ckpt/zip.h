/* A read-only view of a ZIP archive in memory, as torch.save writes them
 * (PyTorch's "zip" serialization: every entry STORED, uncompressed, zip64
 * above 4 GiB). Only what such files use is accepted: stored entries
 * (method 0), no encryption, one disk; every offset and size is checked
 * against the image, and each entry's CRC-32 against its data. Anything else
 * is an error naming the archive and the entry. Entries point into the image. */
#ifndef PL_CKPT_ZIP_H
#define PL_CKPT_ZIP_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

enum { PL_ZIP_MAX_ENTRIES = 1 << 20 };

typedef struct pl_zip_entry {
    char *name; /* NUL-terminated copy */
    const uint8_t *data;
    uint64_t size;
} pl_zip_entry;

typedef struct pl_zip {
    pl_zip_entry *e;
    int n;
} pl_zip;

/* Parses the archive image[0..size) (what names it in errors). */
pl_status pl_zip_parse(pl_zip *z, const uint8_t *image, size_t size, const char *what);
void pl_zip_free(pl_zip *z);
/* The entry named name, or NULL. */
const pl_zip_entry *pl_zip_find(const pl_zip *z, const char *name);

#endif
