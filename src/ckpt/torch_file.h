/* A torch.save file (PyTorch's zip serialization) read without Python:
 *
 *   NAME/data.pkl      the pickled object (ckpt/pickle.h: a restricted reader)
 *   NAME/data/KEY      each storage's bytes, little-endian (NAME/byteorder, when
 *                      present, must say "little")
 *   NAME/version       the format version
 *
 * Opening maps the file, reads the archive (ckpt/zip.h) and the pickle, and
 * binds every storage the pickle names to its entry, refusing a storage whose
 * elements exceed its entry's bytes. Tensors are then read as floats. Nothing
 * in the file is executed; no other file is opened. */
#ifndef PL_CKPT_TORCH_FILE_H
#define PL_CKPT_TORCH_FILE_H

#include "base/fileio.h"
#include "ckpt/pickle.h"
#include "ckpt/zip.h"

typedef struct pl_pt {
    pl_mmap map;
    pl_zip zip;
    pl_pickle *pk;
    char what[4200];
} pl_pt;

/* Opens path (*f closed with pl_pt_close, also after an error). */
pl_status pl_pt_open(pl_pt *f, const char *path);
/* The same over an image in memory (kept by the caller while f is open). */
pl_status pl_pt_parse(pl_pt *f, const uint8_t *image, size_t size, const char *what);
void pl_pt_close(pl_pt *f);
const pl_pk *pl_pt_root(const pl_pt *f);

/* Elements of a tensor (the product of its shape). */
int64_t pl_pk_numel(const pl_pk *t);
/* The tensor's elements in row-major order, converted to float (F32, BF16 and
 * F16 exactly; F64 rounded), into out[0..n) with n its numel. */
pl_status pl_pt_tensor_floats(const pl_pt *f, const pl_pk *t, float *out, int64_t n);

#endif
