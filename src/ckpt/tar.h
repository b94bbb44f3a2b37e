/* A read-only view of a tar archive in memory (POSIX ustar, with the GNU long
 * name and pax "path" extensions Python's tarfile writes): what a NeMo .nemo
 * file is. Regular files only are listed; every header's size is checked
 * against the image. Entry names lose a leading "./". */
#ifndef PL_CKPT_TAR_H
#define PL_CKPT_TAR_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pl_tar_entry {
    char *name;
    const uint8_t *data;
    uint64_t size;
} pl_tar_entry;

typedef struct pl_tar {
    pl_tar_entry *e;
    int n, cap;
} pl_tar;

pl_status pl_tar_parse(pl_tar *t, const uint8_t *image, size_t size, const char *what);
void pl_tar_free(pl_tar *t);
const pl_tar_entry *pl_tar_find(const pl_tar *t, const char *name);

#endif
