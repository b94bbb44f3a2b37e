/* SentencePiece tokenizers: what their files share (not a public header).
 *
 *   sp_model.c      a protobuf wire-format reader and the ModelProto loader
 *                   (tokenizer.model) -> a read-only pl_sp_model; the charsmap trie
 *   sp_tokenizer.c  normalization, the BPE and unigram models, decode, and Megatron's
 *                   wrappers
 *                   (SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer)
 *
 * The reference is SentencePiece 0.1.97 (Debian's libsentencepiece0, the library of
 * python3-sentencepiece, which Megatron calls). */
#ifndef PL_DATA_TOKENIZER_SP_INTERNAL_H
#define PL_DATA_TOKENIZER_SP_INTERNAL_H

#include "base/status.h"
#include "data/tokenizer/bpe.h"
#include "data/tokenizer/strtab.h"
#include "data/tokenizer/trie.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* ModelProto.SentencePiece.Type */
enum {
    PL_SP_NORMAL = 1,
    PL_SP_UNKNOWN = 2,
    PL_SP_CONTROL = 3,
    PL_SP_USER_DEFINED = 4,
    PL_SP_UNUSED = 5,
    PL_SP_BYTE = 6
};

/* TrainerSpec.ModelType */
enum { PL_SP_UNIGRAM = 1, PL_SP_BPE = 2, PL_SP_WORD = 3, PL_SP_CHAR = 4 };

typedef struct pl_sp_model {
    atomic_int refs;
    char *path;
    /* pieces: id = position in the file */
    pl_strtab pieces;
    float *score;
    uint8_t *type;
    /* trainer_spec */
    int model_type;
    int byte_fallback, treat_whitespace_as_suffix;
    char *unk_piece, *bos_piece, *eos_piece, *pad_piece, *unk_surface;
    /* normalizer_spec; a precompiled charsmap is a Darts double-array trie (units) whose
     * values are offsets of NUL-terminated replacements in norm_strings */
    char *norm_name;
    uint8_t *charsmap;
    size_t charsmap_len, denorm_charsmap_len;
    const uint32_t *cm_units; /* into charsmap (copied 4-aligned) */
    size_t cm_n_units;
    const char *cm_strings;
    size_t cm_strings_len;
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    /* derived */
    int32_t unk_id;                   /* the UNKNOWN piece */
    int32_t bos_id, eos_id, pad_id;   /* as SentencePieceProcessor reports them, -1: none */
    int32_t byte_id[256];             /* <0xXX> pieces (byte_fallback) */
    pl_trie user_defined;             /* USER_DEFINED pieces, matched first and frozen */
    pl_bpe_table merges;              /* BPE: pair of pieces -> rank of the merged piece */
    pl_trie piece_trie;               /* unigram: NORMAL, USER_DEFINED, UNUSED pieces */
    float min_score, max_score;       /* unigram: over NORMAL pieces, as SentencePiece
                                         computes them (max starts at FLT_MIN) */
    int split_words;                  /* no piece has U+2581 after a non-U+2581: merges never
                                         cross the start of a U+2581 run */
} pl_sp_model;

/* Parses the ModelProto in data[0..n) (path names it in messages). Malformed input is
 * PL_ERR_FORMAT naming the byte offset; a model plait cannot encode exactly (unigram,
 * a precompiled normalization charsmap, UNUSED pieces, ...) is PL_ERR_UNSUPPORTED
 * saying what. */
pl_status pl_sp_model_parse(pl_sp_model **out, const uint8_t *data, size_t n, const char *path);
pl_status pl_sp_model_load(pl_sp_model **out, const char *path);
void pl_sp_model_retain(pl_sp_model *m);
void pl_sp_model_release(pl_sp_model *m);

/* The longest charsmap rule matching s[0..n): its length (0: none) and replacement. */
size_t pl_sp_charsmap_match(const pl_sp_model *m, const uint8_t *s, size_t n, const char **rep,
                            size_t *rep_len);

/* SentencePieceProcessor::PieceToId: reserved pieces (CONTROL, UNKNOWN, BYTE) first,
 * then the others; unk_id when absent. */
int32_t pl_sp_piece_to_id(const pl_sp_model *m, const char *s, size_t n);

#endif
