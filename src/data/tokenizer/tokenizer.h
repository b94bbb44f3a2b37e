/* Tokenizers by Megatron's --tokenizer-type name.
 *
 *   GPT2BPETokenizer        --vocab-file encoder.json (or gpt2-vocab.json) --merge-file vocab.bpe
 *   BertWordPieceLowerCase  --vocab-file vocab.txt
 *   BertWordPieceCase       --vocab-file vocab.txt
 *   SmilesTokenizer         --vocab-file megamolbart.vocab (one token a line)
 *   HuggingFaceTokenizer    --tokenizer-model DIR (or DIR/tokenizer.json)   hf_*.c
 *   SentencePieceTokenizer  --tokenizer-model tokenizer.model               sp_*.c
 *   GPTSentencePieceTokenizer, Llama2Tokenizer  the same, Megatron's other wrappers
 *   PretokenizedTokenizer   --vocab-file vocab.json: whitespace-separated tokens   pretok.c
 *
 * Megatron has two tokenizer systems: megatron/core/tokenizers (the default since
 * 2025-09, the only one since 2026-02) and the legacy classes of
 * megatron/training/tokenizer/tokenizer.py (--legacy-tokenizer). They differ for the
 * SentencePiece types only (docs/data.md); spec->legacy picks the legacy behaviour.
 *
 * A pl_tokenizer is used by one thread at a time (GPT-2 keeps a word cache).
 * For several threads, pl_tokenizer_fork() gives each its own handle sharing
 * the read-only tables; forks may be freed in any order. */
#ifndef PL_DATA_TOKENIZER_H
#define PL_DATA_TOKENIZER_H

#include "base/vec.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pl_tokenizer pl_tokenizer;

typedef struct pl_tokenizer_ops {
    /* Appends the ids of text[0..len) to out. len bytes, not NUL-terminated. */
    pl_status (*encode)(pl_tokenizer *t, const char *text, size_t len, pl_ids *out);
    /* Appends the text of ids to out; unknown ids are an error naming the id. */
    pl_status (*decode)(const pl_tokenizer *t, const int32_t *ids, int64_t n, pl_bytes *out);
    /* Id of the token spelled tok[0..len) exactly as in the vocabulary, or -1. */
    int32_t (*token_id)(const pl_tokenizer *t, const char *tok, size_t len);
    pl_status (*fork)(const pl_tokenizer *t, pl_tokenizer **out);
    void (*free)(pl_tokenizer *t);
} pl_tokenizer_ops;

struct pl_tokenizer {
    const pl_tokenizer_ops *ops;
    const char *type;   /* Megatron's --tokenizer-type name */
    int64_t vocab_size; /* unpadded: what Megatron's tokenizer.vocab_size returns */
    int32_t eod;        /* tokenizer.eod (--append-eod), -1 if the type has none */
    void *impl;
};

/* What opens a tokenizer: Megatron's tokenizer flags. Unused fields are NULL / 0. */
typedef struct pl_tokenizer_spec {
    const char *type;            /* --tokenizer-type */
    const char *vocab_file;      /* --vocab-file */
    const char *merge_file;      /* --merge-file (GPT2BPETokenizer) */
    const char *tokenizer_model; /* --tokenizer-model (HuggingFace / SentencePiece types) */
    int64_t vocab_extra_ids;     /* --vocab-extra-ids: BERT, legacy SentencePieceTokenizer */
    int legacy;                  /* --legacy-tokenizer */
} pl_tokenizer_spec;

/* Opens the tokenizer spec names. Errors name the flag (--tokenizer-type, --vocab-file,
 * --merge-file, --tokenizer-model) or the file, and say what was expected. */
pl_status pl_tokenizer_open(pl_tokenizer **out, const pl_tokenizer_spec *spec);
void pl_tokenizer_free(pl_tokenizer *t);

pl_status pl_tokenizer_encode(pl_tokenizer *t, const char *text, size_t len, pl_ids *out);
pl_status pl_tokenizer_decode(const pl_tokenizer *t, const int32_t *ids, int64_t n,
                              pl_bytes *out);
int32_t pl_tokenizer_token_id(const pl_tokenizer *t, const char *tok);
pl_status pl_tokenizer_fork(const pl_tokenizer *t, pl_tokenizer **out);

/* The --tokenizer-type choices, '|'-separated. */
extern const char pl_tokenizer_types[];

/* Constructors of each type (tokenizer.c dispatches to these). */
pl_status pl_gpt2_tokenizer_open(pl_tokenizer **out, const char *vocab_file, const char *merge_file);
pl_status pl_bert_tokenizer_open(pl_tokenizer **out, const char *vocab_file, int lower_case);
pl_status pl_smiles_tokenizer_open(pl_tokenizer **out, const char *vocab_file);
/* path: a directory holding tokenizer.json (and tokenizer_config.json), or the file. */
pl_status pl_hf_tokenizer_open(pl_tokenizer **out, const char *path);
/* vocab_file: a JSON object token -> id holding <unk> and <|endoftext|>. */
pl_status pl_pretok_tokenizer_open(pl_tokenizer **out, const char *vocab_file);
/* type: "SentencePieceTokenizer", "GPTSentencePieceTokenizer" or "Llama2Tokenizer". */
pl_status pl_sp_tokenizer_open(pl_tokenizer **out, const char *type, const char *model_file,
                               int legacy, int64_t vocab_extra_ids);

#endif
