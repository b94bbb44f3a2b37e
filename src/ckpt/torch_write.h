/* A torch.save file written without Python (the mirror of ckpt/torch_file.h):
 * a ZIP archive of STORED entries, as PyTorch's zip serialization writes it:
 *
 *   NAME/data.pkl      the pickle (ckpt/pickle_write.h)
 *   NAME/byteorder     "little"
 *   NAME/data/KEY      each storage's bytes, little-endian
 *   NAME/version       "3\n"
 *
 * Each entry's data starts at a multiple of 64 bytes (torch pads the local
 * header's extra field, id "FB", so that a loader may map storages in place).
 * Written under PATH.tmp, fsynced and renamed to PATH (base/fileio.h's
 * pl_wfile). No zip64: an archive past 4 GiB - 1 is refused (a TP x PP rank's
 * file that large needs torch.save itself). */
#ifndef PL_CKPT_TORCH_WRITE_H
#define PL_CKPT_TORCH_WRITE_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pl_pt_blob {
    const char *key; /* NAME/data/KEY */
    const void *data;
    uint64_t bytes;
} pl_pt_blob;

/* Writes path with archive name NAME = name: the pickle pkl[0..pkl_size) and
 * the storages blobs[0..n). Errors name path. */
pl_status pl_pt_write(const char *path, const char *name, const uint8_t *pkl, size_t pkl_size,
                      const pl_pt_blob *blobs, int n);

#endif
