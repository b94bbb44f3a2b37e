/* Megatron core's T5 pretraining dataset (T5MaskedWordPieceDataset): span
 * corruption with sentinels over an indexed dataset of sentences grouped in
 * documents, sample for sample as Megatron builds them.
 *
 * Sources (NVIDIA/Megatron-LM):
 *   megatron/core/datasets/t5_dataset.py   mapping length (encoder - 2, one
 *                                          sentence per sample at least),
 *                                          __getitem__, _get_token_mask
 *   megatron/core/datasets/masked_dataset.py  mapping, cache,
 *                                          _create_masked_lm_predictions
 *   pretrain_t5.py                         the configuration: masking max
 *                                          n-gram 10, whole words, geometric
 *                                          span lengths (p 0.2), no permutation
 *
 * The mapping, its cache and the masking are the BERT dataset's
 * (data/bert_dataset.h) with family PL_MASKED_T5; a pl_t5_dataset is a
 * pl_bert_dataset. Per sample (numpy RandomState((seed + index) % 2^32)):
 * the row's sentences are concatenated and cut to the row's target length,
 * masked, and then, with the spans in position order and sentinel i the
 * tokenizer's i-th additional special token (<extra_id_i>):
 *   encoder  = the text with span i replaced by sentinel i, padded with [PAD]
 *   decoder  = [BOS] s0 span0 s1 span1 ..., padded with [PAD]
 *   labels   = s0 span0 s1 span1 ... [EOS], padded with -1
 * (Megatron's loss_mask is 1 on the first dec_length positions, exactly
 * where labels are not -1; enc_mask / dec_mask are 1 below the lengths.)
 *
 * Not here: blends, and the data-parallel sampler (data/sampler.h). */
#ifndef PL_DATA_T5_DATASET_H
#define PL_DATA_T5_DATASET_H

#include "data/bert_dataset.h"
#include "data/encdec_sample.h"

typedef pl_bert_dataset_config pl_t5_dataset_config;
typedef pl_bert_dataset pl_t5_dataset;

/* pretrain_t5.py's configuration: seed 1234, default split, --mask-prob 0.15,
 * --short-seq-prob 0.1, max n-gram 10, whole words, geometric n-grams, no
 * binary head. seq_length (--encoder-seq-length) and decoder_seq_length are
 * left 0: the caller sets them. */
void pl_t5_dataset_config_defaults(pl_t5_dataset_config *c);

/* Open, length and free are the masked dataset's: pl_bert_dataset_init with
 * a T5 configuration (cfg->family PL_MASKED_T5, set by the defaults),
 * pl_bert_dataset_len, pl_bert_dataset_free. tok must be a BERT WordPiece
 * tokenizer opened with --vocab-extra-ids > 0 (pl_bert_tokenizer_open_ex):
 * the sentinels, [BOS], [EOS], [MASK], [PAD] and the "##" pieces come from
 * it. Caches under <prefix>/cache/T5MaskedWordPieceDataset_indices unless
 * cfg->cache_dir. */

/* One encoder-decoder sample (data/encdec_sample.h): Te entries for enc_tokens,
 * Td for the others. */
/* Sample index (0 <= index < len), exactly as Megatron's __getitem__(index)
 * builds it. Allocates nothing; uses ds->work, so one thread at a time per
 * dataset. Errors: index out of range, a mapping row out of bounds, a token
 * id outside the vocabulary, more spans than sentinels, and a decoder longer
 * than --decoder-seq-length (Megatron asserts on both), naming the sample. */
pl_status pl_t5_dataset_get(const pl_t5_dataset *ds, int64_t index, pl_encdec_sample *out);

#endif
