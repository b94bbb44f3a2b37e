/* `plait preprocess`: tokenize a corpus into Megatron indexed datasets, as
 * Megatron-LM's tools/preprocess_data.py does, and merge datasets as
 * tools/merge_datasets.py does.
 *
 * For every key K of cfg->keys the run writes {output_prefix}_{K}_document.bin
 * and .idx ({output_prefix}_{K}_sentence with a sentence splitter). Each input record (JSON line, text line, CSV row; see reader.h) is
 * one document of each dataset; each of its texts for K is tokenized, empty
 * tokenizations are dropped, the others are the document's items (sequences);
 * with append_eod the tokenizer's eod ends the last item of a non-empty
 * document. A record whose texts all tokenize to nothing is an empty document
 * (a repeated document index), as in Megatron. With one_document the records
 * only add items and a single end_document() closes the input, as
 * MegaMolBART's csv_to_binary.py does per CSV file. The dtype is uint16 when the
 * tokenizer's unpadded vocab_size < 65500, else int32. With cfg->splitter
 * (--split-sentences) each text is first split into sentences by Punkt
 * (Megatron's Encoder.split) and each sentence is tokenized as one item.
 *
 * Work is split in chunks of whole records, tokenized by cfg->workers threads
 * (each with its own pl_tokenizer_fork) and written strictly in input order,
 * so the output bytes do not depend on the number of workers. Memory is bounded
 * by about 2 * workers + 2 chunks, not by the corpus.
 *
 * Malformed records (bad JSON, missing key, wrong type, invalid UTF-8, short
 * CSV row, a tokenizer's PL_ERR_FORMAT) stop the run with "FILE:LINE: what"
 * or, with skip_bad, are counted and skipped. Until every dataset is complete
 * nothing is under the final names; on any failure nothing is. */
#ifndef PL_DATA_PREPROCESS_H
#define PL_DATA_PREPROCESS_H

#include "data/punkt.h"
#include "data/tokenizer/tokenizer.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

typedef struct pl_preprocess_config {
    const char *input;         /* a file, or "-" for standard input */
    const char *format;        /* "auto" (by extension), "jsonl", "text", "csv"; NULL = auto */
    const char *const *keys;   /* JSON keys = dataset names; text and CSV: exactly one */
    int n_keys;
    const char *csv_column;    /* 0-based index, or a header name; NULL = "0" */
    int csv_header;            /* the first row is a header (implied by a column name) */
    int append_eod;
    int one_document;          /* the whole input is one document, each record adds its items
                                  (MegaMolBART's csv_to_binary.py layout) */
    const char *output_prefix;
    int workers;               /* tokenizing threads, >= 1 */
    int skip_bad;              /* --on-error skip */
    int64_t log_interval;      /* a progress line every this many documents; 0 = none */
    size_t chunk_bytes;        /* bytes of input per work unit; 0 = 1 MiB */
    FILE *log;                 /* progress, warnings and the summary; NULL = silent */
    volatile sig_atomic_t *cancel; /* when it becomes non-zero the run stops, writing nothing */
    const pl_punkt *splitter;  /* --split-sentences: split each text into sentences; NULL: no */
} pl_preprocess_config;

typedef struct pl_preprocess_stats {
    int64_t documents; /* records that became documents (one_document: records read) */
    int64_t skipped;   /* malformed records skipped (skip_bad) */
    int64_t tokens;    /* tokens written, all datasets */
    int64_t bytes;     /* input bytes read */
    int dtype;         /* pl_indexed dtype code of the outputs */
    double seconds;
} pl_preprocess_stats;

/* Runs the pipeline with tok (only forked, never used directly, so it may be
 * shared). stats may be NULL. Errors name the flag, or the file and line. */
pl_status pl_preprocess_run(const pl_preprocess_config *cfg, const pl_tokenizer *tok,
                            pl_preprocess_stats *stats);

/* "{prefix}_{key}_{level}" (level "document", or "sentence" with a splitter),
 * pl_malloc'd (NULL when out of memory). */
char *pl_preprocess_output_prefix(const char *prefix, const char *key, const char *level);

/* Concatenates datasets into output_prefix (.bin/.idx) with
 * pl_indexed_builder_add_index, in the order given. An input is a dataset
 * prefix (a trailing .idx or .bin is dropped) or a directory, which stands for
 * each PREFIX.idx/PREFIX.bin pair in it, sorted by name (merge_datasets.py);
 * a lone .idx or .bin there is an error. The dtype is the first dataset's;
 * others must match. *n_datasets (may be NULL) receives the count merged. */
pl_status pl_preprocess_merge(const char *const *inputs, int n_inputs, const char *output_prefix,
                              FILE *log, int64_t *n_datasets);

#endif
