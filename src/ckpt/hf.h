/* Hugging Face checkpoints out of and into plait's (plait ckpt export / import
 * --format hf): transformers' GPT2LMHeadModel and LlamaForCausalLM,
 * T5ForConditionalGeneration (hf_t5.c: its config, tokenizer and skipped copies;
 * its names in model/hf_t5_names.c), and of a post-LN BERT
 * (--transformer-block-type post_ln) BertForPreTraining, BertForMaskedLM,
 * BertForSequenceClassification, BertForTokenClassification and
 * BertForQuestionAnswering (ckpt/hf_bert.c), and of a post-LN BART
 * BartForConditionalGeneration (ckpt/hf_bart.c).
 *
 * Export reads any plait checkpoint (any TP x PP layout and ZeRO stage, through
 * the global-slice reads of ckpt/source.h, gathered into one process) and writes
 * a directory as transformers' save_pretrained does:
 *
 *   OUT/config.json                     the architecture and sizes (hf_config.c)
 *   OUT/generation_config.json          bos/eos token ids when the tokenizer is known
 *   OUT/model.safetensors               every tensor under its Hugging Face name
 *                                       (model/hf_names.h), F32 or BF16, with
 *                                       {"format": "pt"} metadata
 *   or OUT/model-00001-of-0000N.safetensors + model.safetensors.index.json
 *                                       when the tensors exceed the shard size
 *                                       (HF's rule: a shard is closed before a
 *                                       tensor that would take it past the size)
 *   OUT/vocab.json, merges.txt | tokenizer.json | tokenizer.model | vocab.txt, and
 *   tokenizer_config.json               the run's tokenizer, when the checkpoint
 *                                       names one of these types
 *
 * Megatron's vocabulary padding rows are not exported (config.json's vocab_size
 * is the tokenizer's). The directory is written under OUT.tmp and renamed into
 * place; an existing non-empty OUT is refused. A model transformers' class
 * cannot express (a GPT with RMSNorm or without biases, a Llama with biases or
 * partial rotary, a pre-LN BERT or BART, T5) is refused naming the setting.
 *
 * Import reads such a directory (config.json, and model.safetensors or the
 * index and its shards) into a plait weights-only checkpoint in any TP x PP
 * layout: Megatron's release directory, which `plait train --load` starts from
 * as --finetune does (hf_import.c). */
#ifndef PL_CKPT_HF_H
#define PL_CKPT_HF_H

#include "ckpt/checkpoint.h"

#include <cjson/cJSON.h>

/* transformers' default max_shard_size, "5GB" */
#define PL_HF_DEFAULT_SHARD_BYTES 5000000000LL

typedef struct pl_hf_export_opts {
    int bf16;                /* tensors as BF16 (nearest even), else F32 */
    int64_t max_shard_bytes; /* 0: PL_HF_DEFAULT_SHARD_BYTES */
} pl_hf_export_opts;

/* Writes iteration it of the plait checkpoint dir as a Hugging Face directory out. */
pl_status pl_hf_export(const char *dir, int64_t it, const char *out, const pl_hf_export_opts *o);

/* The config.json of c (*out, cJSON_Delete): an error naming the first setting
 * the Hugging Face class cannot express. bos/eos: token ids, -1 unknown (BERT:
 * bos is the tokenizer's [PAD] id, config.json's pad_token_id). */
pl_status pl_hf_config_build(const pl_model_config *c, int bf16, int64_t bos, int64_t eos,
                             cJSON **out);

/* The plait model config of a Hugging Face config.json (path names it in
 * errors): GPT2LMHeadModel / gpt2 or LlamaForCausalLM / llama; any key whose
 * value plait cannot run is refused naming the key and its value. seq_length
 * is set to the maximum positions; padded_vocab to Megatron's padding of
 * vocab_size by divisible_by x tp. */
pl_status pl_hf_config_parse(const cJSON *config, const char *path, int64_t divisible_by, int tp,
                             pl_model_config *c);

/* transformers' T5ForConditionalGeneration (ckpt/hf_t5.c): its config.json
 * (eos: the token id, -1: T5's 1), the T5Config read into c (family, layer and
 * sizes; the caller sets the vocabulary), the tensors of a T5 directory that are
 * copies of shared.weight, and its tokenizer: a SentencePieceTokenizer written
 * as spiece.model with a T5Tokenizer config (*eos set), and spiece.model found
 * on import (a, n: the path's buffer; returns 1 when found). */
pl_status pl_hf_t5_config_build(const pl_model_config *c, int bf16, int64_t eos, cJSON **out);
pl_status pl_hf_t5_config_parse(const cJSON *j, const char *path, pl_model_config *c);
int pl_hf_t5_tied_copy(const pl_model_config *c, const char *name);
pl_status pl_hf_t5_export_tokenizer(const pl_ckpt_meta *m, const pl_model_config *c,
                                    const char *tmp, int64_t *eos);
int pl_hf_t5_find_tokenizer(const char *in, const pl_model_config *c, pl_ckpt_meta *m, char *a,
                            size_t n);
/* BERT (ckpt/hf_bert.c): config.json of a post-LN BERT (pad: the [PAD] id, -1
 * unknown), and the plait config of a BERT config.json (as pl_hf_config_parse). */
pl_status pl_hf_bert_config_build(const pl_model_config *c, int bf16, int64_t pad, cJSON **out);
pl_status pl_hf_bert_config_parse(const cJSON *config, const char *path, int64_t divisible_by,
                                  int tp, pl_model_config *c);
/* BART (ckpt/hf_bart.c): config.json of a post-LN BART (token ids -1: unknown,
 * written null), and the plait config of a BART config.json. */
pl_status pl_hf_bart_config_build(const pl_model_config *c, int bf16, int64_t bos, int64_t eos,
                                  int64_t pad, cJSON **out);
pl_status pl_hf_bart_config_parse(const cJSON *config, const char *path, int64_t divisible_by,
                                  int tp, pl_model_config *c);
/* Helpers of the family files: the shortest decimal that reads back as the float f
 * (1e-12, not 9.99999996e-13); a number key of config.json in [lo, hi] (integral:
 * an integer), def when absent or null (def < 0: required), errors naming path and
 * key. */
double pl_hf_float_decimal(float f);
pl_status pl_hf_json_num(const cJSON *j, const char *path, const char *key, double def,
                         double lo, double hi, int integral, double *out);
/* A classification export's id2label / label2id from DIR/labels.txt (plait
 * finetune's label map, one a line) when there is one; else transformers' LABEL_k. */
pl_status pl_hf_bert_labels(cJSON *config, const char *dir);
/* 1 for Megatron's BERT WordPiece tokenizer types (exported as vocab.txt and the
 * tokenizer_config.json of pl_hf_bert_tokenizer_config); the type of a directory's
 * vocab.txt (do_lower_case of its tokenizer_config.json, default true). */
int pl_hf_bert_tokenizer(const char *type);
pl_status pl_hf_bert_tokenizer_config(const char *type, const pl_model_config *c, cJSON **out);
const char *pl_hf_bert_tokenizer_type(const char *dir);
/* The sentinels <extra_id_N>: plait's legacy SentencePieceTokenizer numbers <extra_id_0>
 * first after its pieces and added tokens, T5Tokenizer last after the pieces. Export: c's
 * t5_sentinels / t5_specials from the checkpoint's tokenizer (none unless m has
 * --vocab-extra-ids), so that the vocabulary rows are permuted and written with the padding
 * rows; import: from tokenizer_config.json (extra_ids, T5Tokenizer's 100 by default), the
 * vocabulary of c set to the tokenizer's and config.json's rows past it kept as padding
 * (divisible_by found for tp), m's tokenizer made the legacy one with the sentinels; a
 * vocab_size that cannot be so padded imports without sentinels, with a warning. */
pl_status pl_hf_t5_export_vocab(const pl_ckpt_meta *m, pl_model_config *c);
pl_status pl_hf_t5_import_vocab(const char *in, int64_t divisible_by, int tp, pl_model_config *c,
                                pl_ckpt_meta *m);

/* "5GB", "500MB", "2GiB", "1000": bytes (HF's units: KB = 1e3, KiB = 2^10). */
pl_status pl_hf_parse_size(const char *s, int64_t *bytes);

typedef struct pl_hf_import_opts {
    int tp, pp;           /* the layout to write (>= 1) */
    int64_t divisible_by; /* Megatron's --make-vocab-size-divisible-by (0: 128) */
} pl_hf_import_opts;

/* Reads the Hugging Face directory in and writes it as the weights-only plait
 * checkpoint out/release (tokenizer files copied when recognised). */
pl_status pl_hf_import(const char *in, const char *out, const pl_hf_import_opts *o);

#endif
