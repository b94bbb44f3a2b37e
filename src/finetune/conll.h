/* Token classification data: CoNLL-style columns and WordPiece alignment.
 *
 * File: one word a line, columns separated by spaces or tabs (CoNLL-2003:
 * "EU NNP B-NP B-ORG"), the word in word_col (default 0) and its tag in
 * tag_col (default -1: the last column); a blank line ends a sentence;
 * "-DOCSTART-" lines are skipped (with the blank line after them, which
 * ends an empty sentence). Tags are BIO / IOB2 strings ("B-PER", "I-PER",
 * "O"); they are not checked here: seqeval.h scores any tag the way
 * seqeval does. With tags = 0 (prediction input) a line is just a word.
 *
 * Alignment (NeMo's and Hugging Face's): every word is WordPiece-tokenized
 * on its own; its label goes on its first sub-token, the other sub-tokens
 * get PL_TOKCLS_IGNORE (-100, PyTorch's cross-entropy ignore_index, what HF
 * uses; NeMo masks the same positions through its loss mask). [CLS], [SEP]
 * and padding are ignored too. A word the tokenizer drops entirely (e.g. a
 * control character) gets an [UNK] so that every word keeps one position.
 *
 * Long sentences are SPLIT, not truncated: a sentence whose sub-tokens do
 * not fit in seq_len - 2 is cut at word boundaries into consecutive windows
 * that each fit ([CLS] words [SEP]), so every word is predicted exactly once
 * and evaluation sees whole sentences again after pl_tokcls_word_preds().
 * A single word longer than seq_len - 2 sub-tokens keeps its first ones. */
#ifndef PL_FINETUNE_CONLL_H
#define PL_FINETUNE_CONLL_H

#include "base/vec.h"
#include "data/tokenizer/bert_wordpiece.h"
#include "finetune/labels.h"

#include <stdint.h>

#define PL_TOKCLS_IGNORE (-100)

typedef struct pl_conll_sentence {
    int64_t first, n; /* words [first, first + n) */
    int64_t line;     /* line of its first word */
} pl_conll_sentence;

typedef struct pl_conll_set {
    const char **words, **tags; /* n_words each; tags NULL when read without tags */
    int64_t n_words;
    pl_conll_sentence *sent;
    int64_t n_sent;
    char *arena, *path;
} pl_conll_set;

typedef struct pl_conll_spec {
    int word_col; /* default 0 */
    int tag_col;  /* default -1: the last column */
    int tags;     /* 1: read tags (default); 0: words only */
} pl_conll_spec;

pl_conll_spec pl_conll_spec_default(void);

/* Reads path. A line with fewer columns than asked, or a tag column that is
 * also the only one when tags are asked for, is PL_ERR_FORMAT naming
 * path:line. */
pl_status pl_conll_read(pl_conll_set *out, const char *path, const pl_conll_spec *spec);
pl_status pl_conll_parse(pl_conll_set *out, const char *text, size_t n, const char *name,
                         const pl_conll_spec *spec);
/* NeMo's token classification files: text_path holds one sentence a line
 * (words split on spaces/tabs), labels_path the tags of those words, line by
 * line (labels_path NULL: words only). A line pair whose counts differ is
 * PL_ERR_FORMAT naming both files and the line; empty lines are skipped in
 * both. Sentences read this way have line = their line in text_path. */
pl_status pl_conll_read_nemo(pl_conll_set *out, const char *text_path, const char *labels_path);
void pl_conll_set_free(pl_conll_set *s);

/* The tag map of a set: NeMo's order, "O" first, the others sorted. */
pl_status pl_conll_labels(const pl_conll_set *s, pl_ft_labels *out);

/* Windows of the encoded set. Row r holds ids/types/mask/labels at r * seq_len;
 * word_pos[r * seq_len + p] is the word (index into the set's words) whose
 * first sub-token is at p, or -1. */
typedef struct pl_tokcls_rows {
    int64_t seq_len, n, cap;
    int32_t *ids, *types, *mask, *labels;
    int64_t *word_pos;
    int64_t *sentence;     /* n: the sentence of each row */
    int64_t n_split;       /* sentences that needed more than one window */
    int64_t n_cut_words;   /* words that lost sub-tokens (longer than a window) */
} pl_tokcls_rows;

/* Encodes every sentence of s (labels from map; PL_TOKCLS_IGNORE everywhere
 * when s has no tags or map is NULL). A tag missing from map is
 * PL_ERR_FORMAT naming path:line. seq_len >= 3. */
pl_status pl_tokcls_encode(pl_tokcls_rows *out, pl_tokenizer *t, const pl_conll_set *s,
                           const pl_ft_labels *map, int64_t seq_len);
void pl_tokcls_rows_free(pl_tokcls_rows *r);

/* Per-word predictions from per-position ones: pred_pos[r * seq_len + p]
 * (label ids) -> word_pred[w] for every word of the set (each word has
 * exactly one first sub-token). Words never seen stay -1. */
void pl_tokcls_word_preds(const pl_tokcls_rows *r, const int32_t *pred_pos, int64_t n_words,
                          int32_t *word_pred);

#endif
