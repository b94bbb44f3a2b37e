/* numpy's .npy files (format version 1.0), for Megatron's index caches.
 *
 * Writes what numpy.save writes, byte for byte (numpy/lib/format.py:
 * "\x93NUMPY", version 1.0, u16 header length, the header dict
 * "{'descr': '<i4', 'fortran_order': False, 'shape': (N,), }" with numpy's
 * 21-digit growth padding, spaces and a '\n' to a multiple of 64 bytes, then
 * the C-order little-endian data), so numpy.load reads plait's caches and
 * Megatron reuses them. Reads version 1.0, 2.0 and 3.0 files of the integer
 * dtypes below by mmap, checking the header against the size of the file.
 *
 * Not supported: object arrays (pickles), Fortran order, big-endian data,
 * more than 2 dimensions. */
#ifndef PL_DATA_NPY_H
#define PL_DATA_NPY_H

#include "base/fileio.h"

#include <stdint.h>

typedef enum { PL_NPY_I16, PL_NPY_I32, PL_NPY_U32, PL_NPY_I64 } pl_npy_dtype;

/* "<i2", "<i4", "<u4", "<i8"; element sizes 2, 4, 4, 8. */
const char *pl_npy_descr(pl_npy_dtype dt);
int pl_npy_itemsize(pl_npy_dtype dt);

/* An array, either owned (built in memory, data in `owned`) or a read-only
 * map of a file. A zeroed struct is empty; pl_npy_free() releases either. */
typedef struct pl_npy {
    pl_npy_dtype dtype;
    int ndim;          /* 1 or 2 */
    int64_t shape[2];  /* shape[1] = 1 when ndim == 1 */
    const uint8_t *data;
    void *owned;
    pl_mmap map;
} pl_npy;

/* Allocates an owned array of the shape (contents uninitialised). */
pl_status pl_npy_alloc(pl_npy *a, pl_npy_dtype dt, int ndim, int64_t rows, int64_t cols);
void pl_npy_free(pl_npy *a);

int64_t pl_npy_numel(const pl_npy *a);

/* Flat element i (row-major), widened to int64. No bounds check. */
int64_t pl_npy_get(const pl_npy *a, int64_t i);

/* The header numpy.save writes for this dtype and shape, with its magic and
 * length prefix, into buf (at least 128 bytes); returns its length. */
size_t pl_npy_header(pl_npy_dtype dt, int ndim, const int64_t *shape, char *buf, size_t cap);

/* Writes a to path atomically (pl_wfile). */
pl_status pl_npy_save(const char *path, const pl_npy *a);

/* Maps path and checks it holds an array of dtype dt with ndim dimensions
 * (shape[1] == cols when ndim == 2). Errors name the file and say what was
 * found and what was expected. */
pl_status pl_npy_load(pl_npy *a, const char *path, pl_npy_dtype dt, int ndim, int64_t cols);

#endif
