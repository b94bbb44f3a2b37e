/* HuggingFaceTokenizer: what its files share (not a public header).
 *
 *   hf_load.c       tokenizer.json (+ tokenizer_config.json) -> a read-only pl_hf_model
 *   hf_pretok.c     the pre-tokenizer regexes, written out by hand
 *   hf_tokenizer.c  the pl_tokenizer: the encode pipeline, decode, forks
 *
 * The pipeline is Hugging Face `tokenizers`' (0.22, the Rust crate behind
 * transformers' fast tokenizers) for the components a tokenizer.json of the Llama
 * family uses; the loader refuses anything else, naming the file and the component. */
#ifndef PL_DATA_TOKENIZER_HF_INTERNAL_H
#define PL_DATA_TOKENIZER_HF_INTERNAL_H

#include "base/vec.h"
#include "data/tokenizer/bpe.h"
#include "data/tokenizer/strtab.h"
#include "data/tokenizer/trie.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Normalizers (a Sequence is flattened into its steps). */
typedef enum { HF_NORM_PREPEND, HF_NORM_REPLACE } hf_norm_kind;

typedef struct hf_norm {
    hf_norm_kind kind;
    char *a, *b; /* PREPEND: a = text; REPLACE: a = pattern (a string), b = content */
    size_t na, nb;
} hf_norm;

/* The Split regexes plait knows (matched by hand in hf_pretok.c). */
typedef enum { HF_RE_LLAMA3, HF_RE_GPT2 } hf_regex;

/* SplitDelimiterBehavior */
typedef enum {
    HF_SPLIT_REMOVED,
    HF_SPLIT_ISOLATED,
    HF_SPLIT_MERGED_PREV,
    HF_SPLIT_MERGED_NEXT,
    HF_SPLIT_CONTIGUOUS
} hf_split_behavior;

typedef enum { HF_PREPEND_ALWAYS, HF_PREPEND_FIRST, HF_PREPEND_NEVER } hf_prepend_scheme;

typedef enum { HF_PRE_SPLIT, HF_PRE_BYTELEVEL, HF_PRE_METASPACE } hf_pre_kind;

typedef struct hf_pre {
    hf_pre_kind kind;
    hf_regex regex;             /* SPLIT; BYTELEVEL with use_regex uses HF_RE_GPT2 */
    hf_split_behavior behavior; /* SPLIT */
    int invert;                 /* SPLIT */
    int add_prefix_space;       /* BYTELEVEL */
    int use_regex;              /* BYTELEVEL */
    char replacement[4];        /* METASPACE: one code point, UTF-8 */
    size_t nrep;
    hf_prepend_scheme scheme;   /* METASPACE */
    int split;                  /* METASPACE */
} hf_pre;

typedef enum {
    HF_DEC_BYTELEVEL,
    HF_DEC_REPLACE,
    HF_DEC_BYTEFALLBACK,
    HF_DEC_FUSE,
    HF_DEC_STRIP,
    HF_DEC_METASPACE
} hf_dec_kind;

typedef struct hf_dec {
    hf_dec_kind kind;
    char *a, *b; /* REPLACE: pattern, content */
    size_t na, nb;
    char ch[4]; /* STRIP: content; METASPACE: replacement (UTF-8 of one code point) */
    size_t nch;
    int64_t start, stop;      /* STRIP */
    hf_prepend_scheme scheme; /* METASPACE */
} hf_dec;

/* An entry of added_tokens. */
typedef struct hf_added {
    char *content;
    size_t len;
    int32_t id; /* as tokenizers assigns it: the vocabulary's id, else the next free one */
    int special, normalized, lstrip, rstrip, single_word;
} hf_added;

typedef struct pl_hf_model {
    atomic_int refs;
    char *path;           /* tokenizer.json, for messages */
    /* model: BPE */
    pl_strtab vocab;      /* ids 0..n-1 */
    pl_bpe_table merges;
    int32_t unk;          /* unk_token's id, -1: none */
    int fuse_unk, byte_fallback, ignore_merges;
    int split_words; /* merges never cross the start of a U+2581 run: no vocabulary token
                        has U+2581 after another character, U+2581 is a token, and
                        ignore_merges is off (it looks at whole pre-tokens) */
    int32_t byte_piece[256]; /* id of "<0xXX>", -1 if absent (byte_fallback) */
    /* pipeline */
    hf_norm *norm;
    int n_norm;
    hf_pre *pre;
    int n_pre;
    hf_dec *dec;
    int n_dec;
    int has_decoder;
    pl_ids post_prefix, post_suffix; /* TemplateProcessing "single" around $A */
    /* added tokens */
    hf_added *added;
    int32_t n_added;
    pl_trie raw_trie, norm_trie; /* normalized == false / true */
    /* id -> added token index (-1), for decode; covers ids 0..vocab_size-1 */
    int32_t *added_of_id;
    int64_t vocab_size; /* len(tokenizer): distinct strings of vocab and added tokens */
    int64_t id_limit;   /* 1 + the largest id */
    int32_t eod;
    char *eos_name;     /* where eod came from, for messages */
} pl_hf_model;

/* Loads path (a directory with tokenizer.json, or the file). Errors name the file and
 * the component or field at fault. */
pl_status pl_hf_model_load(pl_hf_model **out, const char *path);
void pl_hf_model_retain(pl_hf_model *m);
void pl_hf_model_release(pl_hf_model *m);

/* Normalizes s[0..n) with m's normalizers, appending to out (hf_tokenizer.c). */
pl_status pl_hf_normalize(const pl_hf_model *m, const char *s, size_t n, pl_bytes *out);

/* The token string of id (added tokens first, as tokenizers does), or NULL. */
const char *pl_hf_id_token(const pl_hf_model *m, int32_t id, size_t *len);

/* Finds the pre-token of regex re that starts at byte pos (< n) of UTF-8 text s:
 * sets *end (> pos) and returns 0, or -1 with *end at an invalid UTF-8 sequence. */
int pl_hf_regex_next(hf_regex re, const uint8_t *s, size_t n, size_t pos, size_t *end);

/* Unicode White_Space (Rust regex's and Oniguruma's \s) and Rust regex's \w. */
int pl_hf_is_space(int32_t cp);
int pl_hf_is_word(int32_t cp);

#endif
