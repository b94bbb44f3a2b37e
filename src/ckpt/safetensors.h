/* safetensors files: reader (mmap, every header field validated) and writer
 * (atomic). Format: u64 little-endian header length N, N bytes of JSON
 * {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
 * then the tensors' bytes, C order, little-endian, offsets relative to the
 * end of the header. Loading never executes code. */
#ifndef PL_CKPT_SAFETENSORS_H
#define PL_CKPT_SAFETENSORS_H

#include "base/fileio.h"

#include <stdint.h>

enum { PL_ST_NAME_MAX = 160, PL_ST_NDIM_MAX = 8 };

typedef struct pl_st_tensor {
    char name[PL_ST_NAME_MAX];
    char dtype[8]; /* "F32", "BF16", "I64", ... */
    int ndim;
    int64_t shape[PL_ST_NDIM_MAX];
    uint64_t begin, end; /* byte range in the data section */
} pl_st_tensor;

typedef struct pl_st_meta {
    char *key, *value;
} pl_st_meta;

typedef struct pl_safetensors {
    pl_mmap map;
    const uint8_t *data; /* start of the data section */
    pl_st_tensor *tensors;
    int n;
    pl_st_meta *meta;
    int n_meta;
} pl_safetensors;

/* Bytes per element of a safetensors dtype name, 0 if unknown. */
int pl_st_dtype_size(const char *dtype);

/* Parses a safetensors image in memory (name is used in messages). On success
 * st->tensors/meta are allocated and st->data points into image. */
pl_status pl_safetensors_parse(pl_safetensors *st, const uint8_t *image, size_t size,
                               const char *name);
pl_status pl_safetensors_open(pl_safetensors *st, const char *path);
void pl_safetensors_close(pl_safetensors *st);
const pl_st_tensor *pl_safetensors_find(const pl_safetensors *st, const char *name);
const char *pl_safetensors_meta(const pl_safetensors *st, const char *key);

/* Writer: tensors are referenced (not copied) until finish(). */
typedef struct pl_st_writer pl_st_writer;
pl_status pl_st_writer_new(pl_st_writer **out);
pl_status pl_st_writer_add(pl_st_writer *w, const char *name, const char *dtype, int ndim,
                           const int64_t *shape, const void *data);
pl_status pl_st_writer_meta(pl_st_writer *w, const char *key, const char *value);
/* Writes path atomically (temporary name, fsync, rename) and frees w. */
pl_status pl_st_writer_finish(pl_st_writer *w, const char *path);
void pl_st_writer_free(pl_st_writer *w);

#endif
