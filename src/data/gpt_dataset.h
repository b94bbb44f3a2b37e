/* Megatron core's GPTDataset: splits, sample counts and the document /
 * sample / shuffle indices, built exactly as Megatron builds them and cached
 * in Megatron's own files, and the token window of each sample.
 *
 * Sources (NVIDIA/Megatron-LM, megatron/core/datasets/ unless noted):
 *   --split parsing, split matrix ....... blended_megatron_dataset_config.py
 *   split ranges over sequences ......... blended_megatron_dataset_builder.py
 *                                         (_build_megatron_dataset_splits),
 *                                         gpt_dataset.py numel_low_level_dataset
 *   samples per split ................... megatron/training/training.py
 *                                         (get_train_valid_test_num_samples)
 *   epochs, separate final epoch,
 *   document and shuffle indices ........ gpt_dataset.py
 *                                         (_build_document_sample_shuffle_indices)
 *   sample index ........................ helpers.cpp build_sample_idx, helpers.py
 *   cache names, description, md5 ....... megatron_dataset.py, gpt_dataset.py
 *   token windows ....................... gpt_dataset.py
 *                                         (_query_document_sample_shuffle_indices)
 * The random stream is numpy's legacy RandomState (data/numpy_rng.h).
 *
 * Not here: blending several datasets (data/blended.h), the data-parallel
 * sampler (data/sampler.h), attention / loss masks and position ids. */
#ifndef PL_DATA_GPT_DATASET_H
#define PL_DATA_GPT_DATASET_H

#include "base/vec.h"
#include "data/indexed.h"
#include "data/npy.h"
#include "data/numpy_rng.h"

#include <stdint.h>

typedef enum { PL_SPLIT_TRAIN = 0, PL_SPLIT_VALID = 1, PL_SPLIT_TEST = 2 } pl_split;
enum { PL_N_SPLITS = 3 };

/* "train", "valid", "test" (Megatron's Split enum names, used in file names). */
const char *pl_split_name(pl_split s);

/* Megatron's default when --data-path is given without --split. */
#define PL_DEFAULT_SPLIT "969, 30, 1"

/* The split matrix: for each split, the book-ends [lo, hi) as fractions of
 * the dataset, or absent (a zero-width split). lo of the train split is the
 * Python int 0, every other book-end a float (this shows in descriptions). */
typedef struct pl_split_matrix {
    int present[PL_N_SPLITS];
    double lo[PL_N_SPLITS], hi[PL_N_SPLITS];
} pl_split_matrix;

/* Parses --split ("969,30,1", "98/2/0", "969, 30, 1", "1"): up to three
 * non-negative numbers separated by ',' or '/', padded with zeros,
 * normalised by their numpy sum, then made cumulative. Errors name --split. */
pl_status pl_split_parse(const char *text, pl_split_matrix *m);

/* [beg, end) of split s over n elements (sequences, for GPT):
 * int(round(lo * n)), int(round(hi * n)) with Python's round. */
void pl_split_range(const pl_split_matrix *m, pl_split s, int64_t n, int64_t *beg, int64_t *end);

/* Samples per split, megatron/training/training.py. */
typedef struct pl_sample_request {
    int64_t train_iters;       /* --train-iters, 0 if not given */
    int64_t train_samples;     /* --train-samples, 0 if not given */
    int64_t global_batch_size; /* --global-batch-size */
    int64_t eval_interval;     /* --eval-interval */
    int64_t eval_iters;        /* --eval-iters */
} pl_sample_request;

/* train = train_samples or train_iters * gbs; valid = (train_iters //
 * eval_interval + 1) * eval_iters * gbs; test = eval_iters * gbs. With
 * --train-samples, train_iters = train_samples // gbs (update_train_iters).
 * Errors name the flag: no training samples, non-positive sizes, overflow. */
pl_status pl_gpt_num_samples(const pl_sample_request *r, int64_t out[PL_N_SPLITS]);

/* The tokenizer's identity as Megatron records it in descriptions
 * (MegatronLegacyTokenizer.unique_identifiers): class name and paths. */
typedef struct pl_tokenizer_id {
    const char *class_name; /* "_GPT2BPETokenizer"; NULL: "tokenizer": null */
    const char *paths[2];
    int n_paths;
} pl_tokenizer_id;

typedef struct pl_gpt_dataset_config {
    int64_t seq_length;         /* S, >= 2 */
    uint32_t seed;              /* --seed */
    const char *split;          /* --split as given (recorded in the description) */
    pl_split_matrix split_matrix;
    const char *cache_dir;      /* --data-cache-path; NULL: <prefix>/cache/GPTDataset_indices */
    pl_tokenizer_id tokenizer;
    int add_extra_token;        /* x: 1 as Megatron (samples hold S + 1 tokens) */
    int drop_last_partial_validation_sequence; /* 1 as Megatron's default */
} pl_gpt_dataset_config;

/* Fills c with Megatron's defaults (x = 1, drop = 1, seed 1234, default split). */
void pl_gpt_dataset_config_defaults(pl_gpt_dataset_config *c);

/* ---- the index arithmetic, exposed for tests ---------------------------- */

/* Smallest e >= 1 with e * T >= n * S + x; 1 when n < 0 (None). -1 if T == 0. */
int64_t pl_gpt_num_epochs(int64_t tokens_per_epoch, int64_t num_samples, int64_t seq_length,
                          int x);

/* The 0.80 rule. With e > 1: n_sans = ((e-1) T - x) // S, n_last = n - n_sans,
 * per_epoch = (T - x) // S; separate iff n_last < int(0.80 * per_epoch).
 * Returns the flag; *n_sans receives n_sans (0 when e == 1). */
int pl_gpt_separate_final_epoch(int64_t tokens_per_epoch, int64_t num_epochs, int64_t num_samples,
                                int64_t seq_length, int x, int64_t *n_sans);

/* Document index: the ids [beg, end) tiled num_epochs times as int32 and
 * shuffled once, or (separate) the first e-1 epochs shuffled, then the last
 * epoch shuffled, concatenated. */
pl_status pl_gpt_build_document_index(int64_t beg, int64_t end, int64_t num_epochs, int separate,
                                      pl_np_rng *rng, pl_npy *out);

/* Sample index, helpers.cpp build_sample_idx: (num_samples + 1, 2) rows of
 * (position in the document index, token offset). int32 unless the document
 * index is longer than INT32_MAX (helpers.py). lengths: int32 little-endian,
 * unaligned, indexed by document id. */
pl_status pl_gpt_build_sample_index(const uint8_t *lengths, const pl_npy *document_index,
                                    int64_t seq_length, int64_t num_epochs,
                                    int64_t tokens_per_epoch, int drop_last, int x, pl_npy *out);

/* Shuffle index: arange(n_first) shuffled, then (if total > n_first)
 * arange(n_first, total) shuffled, concatenated; uint32, int64 when
 * total >= 2^32 - 2. */
pl_status pl_gpt_build_shuffle_index(int64_t n_first, int64_t total, pl_np_rng *rng, pl_npy *out);

/* ---- the dataset ---------------------------------------------------------- */

enum { PL_GPT_DESC, PL_GPT_DOC, PL_GPT_SAMPLE, PL_GPT_SHUFFLE, PL_GPT_N_FILES };

typedef struct pl_gpt_dataset {
    const pl_indexed *low;  /* borrowed: the .bin/.idx it reads */
    char *path;             /* dataset_path, as given */
    pl_split split;
    int64_t beg, end;       /* sequences [beg, end) */
    int64_t num_samples;    /* requested; -1 = None (one epoch) */
    int64_t seq_length;
    int x;
    int64_t tokens_per_epoch, num_epochs, num_samples_sans_final_epoch;
    int separate_final_epoch;
    pl_npy document_index, sample_index, shuffle_index;
    char *description;      /* the JSON Megatron hashes */
    char hash[33];          /* md5 of description */
    char *files[PL_GPT_N_FILES];
    int built;              /* 1: built (and cached) by this call, 0: cache reused */
    double seconds;         /* time to build or load */
} pl_gpt_dataset;

/* Builds or loads the indices of split s of low (the split must be present
 * in cfg->split_matrix). num_samples < 0 means None. Reuses the cache when
 * all four files exist; a cached file of the wrong dtype or shape, or whose
 * description differs, is an error naming it (delete it to rebuild). Writes
 * new caches atomically. On failure g is left zeroed. */
pl_status pl_gpt_dataset_init(pl_gpt_dataset *g, const pl_indexed *low, const char *path,
                              const pl_gpt_dataset_config *cfg, pl_split s, int64_t num_samples);
void pl_gpt_dataset_free(pl_gpt_dataset *g);

/* Number of samples (sample_index rows - 1). */
int64_t pl_gpt_dataset_len(const pl_gpt_dataset *g);

/* Sample idx: its S + x tokens, read across document boundaries, into out
 * (S + x entries; tokens = out[0..S), labels = out[1..S+1)). Positions with no
 * data (only a kept partial validation sample) are set to -1, Megatron's pad;
 * *n_real (may be NULL) receives the number of real tokens. Index values read
 * from a cache are bounds-checked. */
pl_status pl_gpt_dataset_get(const pl_gpt_dataset *g, int64_t idx, int32_t *out, int64_t *n_real);

/* Where position pos of sample idx (as pl_gpt_dataset_get fills it) comes from:
 * *sequence the .bin/.idx sequence (document) and *offset the token within it;
 * -1 and -1 for a pad position. Errors as pl_gpt_dataset_get. */
pl_status pl_gpt_dataset_locate(const pl_gpt_dataset *g, int64_t idx, int64_t pos,
                                int64_t *sequence, int64_t *offset);

/* Appends g's unique identifiers as json.dumps(..., indent=4) prints them
 * nested `level` deep (for the blended description). */
pl_status pl_gpt_dataset_identifiers(pl_bytes *b, const pl_gpt_dataset *g, int level);

/* Appends "(a cached index file: delete it to rebuild)" to the current error
 * message (which names the file) and returns st. */
pl_status pl_gpt_cache_error(pl_status st);

/* PL_OK when the cached description file at path holds exactly description; otherwise
 * an error naming path and what (`dataset` or `blend`) it describes. */
pl_status pl_gpt_cache_check_description(const char *path, const char *description,
                                         const char *what);

/* ---- descriptions (megatron_dataset.py unique_identifiers) ------------------ */

/* What every MegatronDataset records before its own key attributes. */
typedef struct pl_dataset_identity {
    const char *class_name;   /* "GPTDataset", "BERTMaskedWordPieceDataset" */
    const char *path;         /* dataset_path */
    int64_t num_samples;      /* -1: None */
    pl_split split;
    uint32_t seed;            /* random_seed */
    int64_t seq_length;       /* sequence_length */
    const char *split_text;   /* split, as given */
    const pl_split_matrix *split_matrix;
    const pl_tokenizer_id *tokenizer;
} pl_dataset_identity;

/* Appends "{", then class, dataset_path, num_samples, index_split,
 * random_seed, sequence_length, split, split_matrix and tokenizer as
 * json.dumps(indent=4) writes them, and no closing brace: a subclass appends
 * its own attributes (",\n    \"key\": value") and then "\n}". */
pl_status pl_dataset_describe_head(pl_bytes *b, const pl_dataset_identity *id);

/* Appends "\n" and level * 4 spaces. */
pl_status pl_dataset_describe_indent(pl_bytes *b, int level);

/* ---- Python formatting used in descriptions -------------------------------- */

/* repr(x) of a Python float: shortest round-trip digits, exponent form
 * below 1e-4 and from 1e16 ("0.969", "1.0", "1e-05"). buf: 32 bytes. */
void pl_py_float_repr(double x, char *buf);

/* json.dumps(s) with ensure_ascii: UTF-8 decoded to \uXXXX escapes, bytes
 * that are not UTF-8 as lone surrogates \udcXX (Python's surrogateescape). */
pl_status pl_py_json_string(pl_bytes *b, const char *s);

#endif
