/* Megatron core's BERT pretraining dataset (BERTMaskedWordPieceDataset):
 * sentence-pair samples over an indexed dataset whose items are sentences and
 * whose documents group them (what `preprocess_data.py --split-sentences`
 * writes), with sentence-order labels and WordPiece masking, sample for
 * sample as Megatron builds them.
 *
 * Sources (NVIDIA/Megatron-LM, megatron/core/datasets/ unless noted):
 *   split over documents ............... masked_dataset.py numel_low_level_dataset,
 *                                        blended_megatron_dataset_builder.py
 *   sample mapping ..................... helpers.cpp build_mapping (std::mt19937
 *                                        targets, std::mt19937_64 shuffle),
 *                                        masked_dataset.py _build_sample_index
 *   cache names, description ........... masked_dataset.py, megatron_dataset.py
 *   segments A/B, swap, truncation,
 *   [CLS] A [SEP] B [SEP], padding ..... bert_dataset.py __getitem__
 *   masking ............................ masked_dataset.py
 *                                        _create_masked_lm_predictions,
 *                                        bert_dataset.py _get_token_mask
 *   masking configuration .............. examples/bert/pretrain_bert.py
 *                                        (max n-gram 3, whole words, no
 *                                        permutation, 1/n n-gram weights)
 * The per-sample stream is numpy's RandomState((seed + idx) % 2^32)
 * (data/numpy_rng.h). Megatron's legacy megatron/data/bert_dataset.py +
 * dataset_utils.py (Megatron v1/v2, Megatron-DeepSpeed) draw the same numbers
 * in the same order and build the same samples from the same mapping; they
 * split documents and name caches differently (docs/data.md).
 *
 * The T5 dataset (data/t5_dataset.h) and NeMo's BART dataset
 * (data/bart_dataset.h) are this with family PL_MASKED_T5 / PL_MASKED_BART:
 * their mapping, cache, masking (geometric n-grams; NeMo's rules for BART)
 * and masked text are built here, their samples there.
 *
 * Not here: the data-parallel sampler (data/sampler.h), blends of several
 * BERT datasets, masking_do_permutation and longer-n-gram preference (off in
 * pretrain_bert.py and pretrain_t5.py), and mappings over more than 2^32
 * sentences (Megatron switches to uint64). */
#ifndef PL_DATA_BERT_DATASET_H
#define PL_DATA_BERT_DATASET_H

#include "data/gpt_dataset.h"
#include "data/numpy_rng.h"
#include "data/tokenizer/tokenizer.h"

#include <stdint.h>

/* helpers.cpp LONG_SENTENCE_LEN: a document holding a longer sentence (and
 * more than one sentence) gives no samples. */
enum { PL_BERT_LONG_SENTENCE_LEN = 512, PL_BERT_MAX_NGRAM = 16 };

/* The masked WordPiece datasets built here: BERT, T5
 * (T5MaskedWordPieceDataset; data/t5_dataset.h builds its samples) and NeMo's
 * BARTDataset (data/bart_dataset.h), whose masking follows NeMo's
 * dataset_utils.create_masked_lm_predictions where it differs from
 * Megatron core's (see pl_bert_dataset_mask). */
typedef enum pl_masked_family { PL_MASKED_BERT, PL_MASKED_T5, PL_MASKED_BART } pl_masked_family;

typedef struct pl_bert_dataset_config {
    int64_t seq_length;      /* --seq-length T: [CLS] A [SEP] B [SEP] + padding, >= 5 */
    uint32_t seed;           /* --seed; build_mapping takes a positive int32 */
    const char *split;       /* --split as given (recorded in the description) */
    pl_split_matrix split_matrix;
    const char *cache_dir;   /* --data-cache-path; NULL: <prefix>/cache/BERTMaskedWordPieceDataset_indices */
    pl_tokenizer_id tokenizer; /* the tokenizer's identity in the description */
    double mask_prob;        /* --mask-prob, in (0, 1) */
    double short_seq_prob;   /* --short-seq-prob, in [0, 1] */
    int binary_head;         /* 1; 0 with --bert-no-binary-head */
    int max_ngram;           /* masking_max_ngram, 1..PL_BERT_MAX_NGRAM */
    int whole_word;          /* masking_do_full_word */
    int geometric;           /* masking_use_geometric_distribution: n = min(geometric(0.2), max_ngram) */
    pl_masked_family family; /* PL_MASKED_BERT here; t5_dataset.h sets T5 */
    int64_t decoder_seq_length; /* T5: --decoder-seq-length (seq_length is the encoder's) */
    double delete_mask_prob;    /* BART: each span's <mask> is dropped with this probability */
} pl_bert_dataset_config;

/* Megatron's defaults: seed 1234, default split, --mask-prob 0.15,
 * --short-seq-prob 0.1, binary head, and pretrain_bert.py's masking (3, whole
 * words). seq_length is left 0: the caller sets it. */
void pl_bert_dataset_config_defaults(pl_bert_dataset_config *c);

/* The defaults of family f: BERT's above; T5 and BART: no binary head, max
 * n-gram 10, whole words, geometric n-grams (pretrain_t5.py, NeMo's
 * BARTDataset), delete_mask_prob 0, decoder_seq_length left 0. */
void pl_bert_dataset_config_family(pl_bert_dataset_config *c, pl_masked_family f);

/* ---- the mapping, exposed for tests --------------------------------------- */

/* helpers.cpp build_mapping over the documents [doc_beg, doc_end) of h:
 * rows (first sentence, end sentence, target length) as uint32, shuffled.
 * num_epochs epochs at most, stopping at the start of an epoch once
 * max_num_samples rows exist. min_num_sent is 2 with the binary head, else 1.
 * PL_ERR_ARG when an epoch gives no sample but more are asked for (Megatron
 * would loop forever) or the values leave build_mapping's domain. */
pl_status pl_bert_build_mapping(const pl_indexed_header *h, int64_t doc_beg, int64_t doc_end,
                                int32_t num_epochs, uint64_t max_num_samples,
                                int32_t max_seq_length, double short_seq_prob, int32_t seed,
                                int32_t min_num_sent, pl_npy *out);

/* ---- the dataset ------------------------------------------------------------ */

enum { PL_BERT_DESC, PL_BERT_SAMPLE, PL_BERT_N_FILES };

typedef struct pl_bert_dataset {
    const pl_indexed *low;  /* borrowed: the sentences */
    char *path;             /* dataset_path, as given */
    pl_split split;
    int64_t beg, end;       /* documents [beg, end) */
    int64_t num_samples;    /* requested; -1 = None (one epoch) */
    int64_t seq_length;     /* T */
    uint32_t seed;
    double mask_prob;
    int binary_head, max_ngram, whole_word, geometric;
    pl_masked_family family;
    int64_t decoder_seq_length; /* T5; BART: seq_length (NeMo pads both to it) */
    double delete_mask_prob;    /* BART */
    double ngram_p[PL_BERT_MAX_NGRAM]; /* choice weights of n = 1..max_ngram */
    int32_t cls, sep, mask, pad, bos, eos;
    int32_t *sentinels;     /* T5: the tokenizer's <extra_id_i> ids, n_sentinels of them */
    int64_t n_sentinels;
    int64_t vocab_size;     /* random replacements are drawn from [0, vocab_size) */
    uint8_t *continuation;  /* per id: 1 when its piece starts with "##" */
    int32_t *work;          /* scratch for get: 3 T + 1 ints (BERT), 7 T + 1 (T5, BART) */
    pl_npy sample_index;    /* (N, 3) uint32: first sentence, end sentence, target */
    char *description;      /* the JSON Megatron hashes */
    char hash[33];
    char *files[PL_BERT_N_FILES];
    int built;              /* 1: built (and cached) by this call, 0: cache reused */
    double seconds;
} pl_bert_dataset;

/* Builds or loads the sample mapping of split s of low (present in
 * cfg->split_matrix), over its documents. num_samples < 0 means None: one
 * epoch (Megatron requires a number here). tok must be a BERT WordPiece
 * tokenizer: the special ids, the "##" pieces and the vocabulary size come
 * from it, and every token of the data must be below its vocab_size. Reuses
 * the cache when both files exist (a description that differs, or a mapping
 * of the wrong dtype, shape or values, is an error naming the file); writes
 * new caches atomically. On failure ds is left zeroed. */
pl_status pl_bert_dataset_init(pl_bert_dataset *ds, const pl_indexed *low, const char *path,
                               const pl_bert_dataset_config *cfg, const pl_tokenizer *tok,
                               pl_split s, int64_t num_samples);
void pl_bert_dataset_free(pl_bert_dataset *ds);

/* Number of samples (rows of the mapping; whole epochs, so at least the
 * number asked for). */
int64_t pl_bert_dataset_len(const pl_bert_dataset *ds);

/* One sample, for the model. The caller owns the arrays, T entries each. */
typedef struct pl_bert_sample {
    int32_t *tokens;   /* (T) ids, padded with pad id */
    int32_t *types;    /* (T) token type 0 = A, 1 = B, 0 for padding */
    int32_t *labels;   /* (T) the original id at masked positions, else -1 */
    int64_t length;    /* tokens before padding (the padding mask: keys >= length are masked) */
    int32_t is_random; /* the binary head's label */
} pl_bert_sample;

/* masked_dataset.py _create_masked_lm_predictions (no permutation) over
 * tokens[0..len), masked in place; labels (all -1 on entry, len entries)
 * receive the original ids at the masked positions; spans, when not NULL
 * (2 len entries), receive each masked n-gram's first and last position,
 * sorted by the first (masked_spans). Returns the number of spans. work:
 * 3 len + 1 ints. For BART, NeMo's create_masked_lm_predictions
 * (masking_style "t5"): the cap is at least 1, a too-long n-gram of n
 * candidates is retried as n - 2, n - 3, ..., 1 (NeMo's dict of n-grams is
 * indexed from 1 but read at n - 1 after the decrement, so n - 1 is never
 * tried), and the closing shuffle of the candidates is drawn, since BART
 * draws again after it. */
int64_t pl_bert_dataset_mask(const pl_bert_dataset *ds, pl_np_rng *r, int32_t *tokens,
                             int32_t *labels, int64_t len, int64_t target, int32_t *spans,
                             int32_t *work);

/* The masked text of an encoder-decoder sample (T5, BART), views into
 * ds->work: tokens[0..len) masked, labels[0..len) the original id at masked
 * positions (else -1), spans[0..2 n_spans) each span's first and last
 * position in order; rng is the sample's stream after the masking. */
typedef struct pl_masked_text {
    int32_t *tokens, *labels, *spans;
    int64_t len, n_spans;
    pl_np_rng rng;
} pl_masked_text;

/* T5's and NeMo's BART's common start of __getitem__(index): the row's
 * sentences concatenated and cut to the row's target length, then masked
 * with the sample's RandomState (seed + index, modulo 2^32 for T5; NeMo's
 * BART refuses a seed + index past 2^32 - 1). Errors: index out of range,
 * a row out of bounds, a token id outside the vocabulary. */
pl_status pl_bert_dataset_masked_text(const pl_bert_dataset *ds, int64_t index,
                                      pl_masked_text *out);

/* Sample index (0 <= index < len), exactly as Megatron's __getitem__(index)
 * builds it. Allocates nothing; uses ds->work, so one thread at a time per
 * dataset (another thread opens its own pl_bert_dataset: the mapping is
 * cached). Errors: index out of range, a mapping row out of bounds, a token
 * id outside the vocabulary (naming the sentence). */
pl_status pl_bert_dataset_get(const pl_bert_dataset *ds, int64_t index, pl_bert_sample *out);

#endif
