/* Megatron's indexed dataset (MMIDIDX): PREFIX.idx + PREFIX.bin, read by mmap
 * and written by a builder, byte for byte as Megatron-LM's
 * megatron/core/datasets/indexed_dataset.py (megatron-facts.md 1.1).
 *
 * .idx (little-endian, unaligned): magic "MMIDIDX\0\0", u64 version = 1,
 * u8 dtype code, u64 sequence_count S, u64 document_count D (= documents + 1),
 * i32 sequence_lengths[S], i64 sequence_pointers[S] (byte offsets into .bin),
 * i64 document_indices[D]. .bin: the tokens, concatenated, in the dtype. */
#ifndef PL_DATA_INDEXED_H
#define PL_DATA_INDEXED_H

#include "base/fileio.h"

#include <stdint.h>

/* numpy dtype codes of the format. */
enum {
    PL_DT_UINT8 = 1,
    PL_DT_INT8 = 2,
    PL_DT_INT16 = 3,
    PL_DT_INT32 = 4,
    PL_DT_INT64 = 5,
    PL_DT_FLOAT64 = 6,
    PL_DT_FLOAT32 = 7,
    PL_DT_UINT16 = 8,
};

/* Item size in bytes of a dtype code, 0 if the code is unknown. */
int pl_indexed_dtype_size(int code);
const char *pl_indexed_dtype_name(int code);
/* Megatron's "optimal" dtype: uint16 if vocab_size < 65500, else int32. */
int pl_indexed_best_dtype(int64_t vocab_size);

/* The parsed header of an .idx held in memory; arrays are unaligned views. */
typedef struct pl_indexed_header {
    int dtype;           /* code */
    int item_size;       /* bytes */
    int64_t n_sequences; /* sequence_count */
    int64_t n_documents; /* document_count - 1 */
    const uint8_t *lengths;  /* int32[n_sequences] */
    const uint8_t *pointers; /* int64[n_sequences] */
    const uint8_t *docs;     /* int64[n_documents + 1] */
    uint64_t data_bytes;     /* bytes of .bin the index covers (sum of the sizes) */
} pl_indexed_header;

/* Parses and validates an .idx image: every field against the size of the
 * image and, when bin_size is not (uint64_t)-1, against the .bin size (each
 * pointer == the running sum, lengths >= 0, document indices increasing from 0
 * to n_sequences). name is used in messages ("corpus.idx: field ..."). A .bin
 * longer than data_bytes is accepted, as Megatron does. */
pl_status pl_indexed_parse(const uint8_t *idx, size_t idx_size, uint64_t bin_size,
                           const char *name, pl_indexed_header *out);

typedef struct pl_indexed {
    pl_mmap idx_map, bin_map;
    pl_indexed_header h;
    char *prefix;
} pl_indexed;

/* Opens PREFIX.idx and PREFIX.bin and validates them (pl_indexed_parse). */
pl_status pl_indexed_open(pl_indexed *ds, const char *prefix);
void pl_indexed_close(pl_indexed *ds);

int32_t pl_indexed_length(const pl_indexed_header *h, int64_t i);
int64_t pl_indexed_pointer(const pl_indexed_header *h, int64_t i);
int64_t pl_indexed_doc(const pl_indexed_header *h, int64_t k); /* k in [0, n_documents] */

/* Copies tokens [offset, offset + n) of sequence i, converted to int32, to out. */
pl_status pl_indexed_read(const pl_indexed *ds, int64_t i, int64_t offset, int64_t n, int32_t *out);

/* Writer. Items are added one at a time; end_document() closes a document.
 * finish() writes PREFIX.idx and commits both files (temporary names until
 * then); abort() (or any failure) leaves nothing under the final names.
 * A rejected item (PL_ERR_ARG, or PL_ERR_NOMEM before any byte is written)
 * leaves the builder unchanged; after a failed write or a failed add_index
 * the builder is poisoned: finish() refuses and only abort() is useful.
 * finish() also refuses items not closed by end_document() (an index no reader
 * would accept). Every call but abort() needs a live builder; finish() and
 * abort() free it. */
typedef struct pl_indexed_builder pl_indexed_builder;

pl_status pl_indexed_builder_open(pl_indexed_builder **out, const char *prefix, int dtype);
/* Tokens out of the dtype's range are an error naming the value. */
pl_status pl_indexed_builder_add_item(pl_indexed_builder *b, const int32_t *tokens, int64_t n);
pl_status pl_indexed_builder_end_document(pl_indexed_builder *b);
/* Appends a whole dataset (Megatron's add_index / merge_datasets.py); dtypes must match. */
pl_status pl_indexed_builder_add_index(pl_indexed_builder *b, const char *prefix);
pl_status pl_indexed_builder_finish(pl_indexed_builder *b);
void pl_indexed_builder_abort(pl_indexed_builder *b);

#endif
