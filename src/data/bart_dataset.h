/* NeMo's BART pretraining dataset (BARTDataset, a subclass of NeMo's
 * T5Dataset): text infilling over an indexed dataset of sentences grouped in
 * documents, sample for sample as NeMo builds them from the same mapping.
 *
 * Sources (NVIDIA/NeMo, nemo/collections/nlp/data/language_modeling/megatron/):
 *   bart_dataset.py   __getitem__, pad_and_convert_to_numpy
 *   t5_dataset.py     the mapping (max_seq_length - MAX_SEQ_LENGTH_DELTA 2,
 *                     one sentence per sample at least), the defaults
 *   dataset_utils.py  create_masked_lm_predictions (masking_style "t5"),
 *                     get_samples_mapping; helpers.cpp build_mapping (the same
 *                     algorithm as Megatron core's)
 *
 * A pl_bart_dataset is a pl_bert_dataset with family PL_MASKED_BART. Per
 * sample (numpy RandomState(seed + index)): the row's sentences concatenated
 * and cut to the row's target length, masked with NeMo's rules (see
 * pl_bert_dataset_mask: geometric n-grams up to 10, whole words, [MASK], no
 * draw per token), and then
 *   encoder  = the text with each span collapsed to one [MASK], that [MASK]
 *              dropped when random() < delete_mask_prob (one draw per span,
 *              after the masking's closing shuffle), padded with [PAD]
 *   decoder  = [BOS] + the original text, padded with [PAD]
 *   labels   = the original text + [EOS], padded with -1
 * Encoder and decoder are both padded to seq_length (NeMo's max_seq_length:
 * BART has no separate decoder length), so Td = Te.
 *
 * The split over documents is NeMo's get_train_valid_test_split_ (three
 * values; each part's size rounded, the boundaries shifted to end at the
 * document count), not Megatron core's. What differs from NeMo: the cache is
 * the masked dataset's ({md5}-BARTDataset-* files under
 * PREFIX/cache/BARTDataset_indices), not NeMo's PREFIX_{name}_indexmap_*.npy
 * (the mapping in it is the same). The special ids come from
 * plait's BERT WordPiece tokenizer ([BOS], [EOS], [MASK], [PAD]); NeMo's come
 * from its tokenizer wrapper. mask_prob must be in (0, 1) (NeMo also takes 0:
 * no masking). Not here: mean_ngram_size, favor_long_ngrams, permutation,
 * respect_document_boundaries = False. */
#ifndef PL_DATA_BART_DATASET_H
#define PL_DATA_BART_DATASET_H

#include "data/t5_dataset.h"

typedef pl_bert_dataset_config pl_bart_dataset_config;
typedef pl_bert_dataset pl_bart_dataset;

/* NeMo's BARTDataset defaults: seed 1234, default split, masked_lm_prob
 * 0.15, short_seq_prob 0.1, max n-gram 10, whole words, geometric n-grams,
 * delete_mask_prob 0. seq_length is left 0: the caller sets it. */
void pl_bart_dataset_config_defaults(pl_bart_dataset_config *c);

/* Open, length and free are the masked dataset's (pl_bert_dataset_init with
 * a BART configuration, pl_bert_dataset_len, pl_bert_dataset_free); no
 * sentinels needed. Caches under <prefix>/cache/BARTDataset_indices unless
 * cfg->cache_dir. */

/* Sample index (0 <= index < len), exactly as NeMo's __getitem__(index)
 * builds it from the row. out's arrays hold seq_length entries each (enc,
 * dec and labels alike). Allocates nothing; uses ds->work, one thread at a
 * time per dataset. Errors: index out of range, a mapping row out of bounds,
 * a token id outside the vocabulary, a seed + index past 2^32 - 1 (numpy
 * refuses it). */
pl_status pl_bart_dataset_get(const pl_bart_dataset *ds, int64_t index, pl_encdec_sample *out);

#endif
