/* Token classification inputs: WordPiece label alignment of a CoNLL set.
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
#ifndef PL_FINETUNE_TOKCLS_H
#define PL_FINETUNE_TOKCLS_H

#include "data/tokenizer/bert_wordpiece.h"
#include "finetune/conll.h"

#define PL_TOKCLS_IGNORE (-100)

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
