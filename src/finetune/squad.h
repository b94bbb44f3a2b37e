/* Extractive question answering: SQuAD v1.1 and v2.0 JSON, BERT features
 * with a document stride, and n-best span decoding back to the context's
 * text (v2.0: against the null answer).
 *
 * Features follow Google BERT's run_squad.py, which Megatron's and NeMo's
 * SQuAD code and Hugging Face's squad_convert_examples_to_features copy:
 *  - the context is split into words on whitespace (' ', \t, \r, \n, U+202F);
 *    each answer's answer_start (in code points, as Python indexes str) maps
 *    to its first and last word; an answer whose words, joined by spaces, do
 *    not contain the answer text (after the same whitespace clean-up) is
 *    counted in n_skipped_answers; with cfg->training the question then gets
 *    no features at all, as run_squad.py drops it from training;
 *  - every word is WordPiece-tokenized on its own (tok_to_word, word_to_tok);
 *    the answer's token span is narrowed to the tokenization of the answer
 *    text when that occurs inside it (_improve_answer_span);
 *  - the question is tokenized and cut to max_query_len tokens;
 *  - windows ("doc spans") of max_seq_len - len(query) - 3 context tokens
 *    start at 0 and advance by min(length, doc_stride) until one reaches the
 *    end of the context;
 *  - a feature is [CLS] query [SEP] window [SEP], token types 0 up to and
 *    including the first [SEP], 1 after, [PAD] to max_seq_len; its answer
 *    positions are those of the answer's tokens when both lie inside the
 *    window, else 0 and 0 (the [CLS] token);
 *  - a context token is "max context" in the window where it has the most
 *    context on its shorter side (min(left, right) + 0.01 * length), first
 *    window on ties (_check_is_max_context).
 * Decoding (write_predictions of run_squad.py; v2.0's null answer below):
 *  - per feature, the n_best highest start logits and end logits over all
 *    positions; a (start, end) pair counts when both are context tokens of
 *    the feature, start is a max-context token, end >= start and
 *    end - start + 1 <= max_answer_len; candidates of every window of a
 *    question are ranked by start + end logit;
 *  - a candidate's text is get_final_text(): the WordPiece tokens joined
 *    (with "##" glued) located in the basic-tokenized text of the original
 *    words and mapped back, character by character, into the original
 *    context, so the answer keeps its case, accents and punctuation; when
 *    that alignment fails, the whole original words;
 *  - the best distinct text over all windows is the prediction.
 * The basic-tokenized text is rebuilt from the WordPiece pieces of the words
 * (a piece without "##" starts a basic token): identical to BERT's
 * BasicTokenizer output except when a word holds an [UNK], where this falls
 * back to the original words (run_squad.py usually does too, its lengths
 * then differ). */
#ifndef PL_FINETUNE_SQUAD_H
#define PL_FINETUNE_SQUAD_H

#include "base/vec.h"
#include "data/tokenizer/bert_wordpiece.h"

#include <stdint.h>

typedef struct pl_squad_answer {
    const char *text;
    int64_t start; /* answer_start: code points into the context */
} pl_squad_answer;

typedef struct pl_squad_question {
    const char *id, *question;
    int64_t context;          /* index into contexts */
    pl_squad_answer *answers; /* points into the set's answers */
    int64_t n_answers;
    int impossible;           /* SQuAD v2.0 is_impossible: no answers kept */
} pl_squad_question;

typedef struct pl_squad_set {
    const char **contexts;
    int64_t n_contexts;
    pl_squad_question *q;
    int64_t n_q;
    pl_squad_answer *answers;
    int64_t n_answers;
    int64_t n_impossible;     /* questions marked is_impossible */
    char *arena, *path;
} pl_squad_set;

/* Reads a SQuAD v1.1 file ({"data": [{"paragraphs": [{"context", "qas":
 * [{"id", "question", "answers": [{"text", "answer_start"}]}]}]}]}). Errors
 * are PL_ERR_FORMAT naming the file and either line:column (bad JSON) or the
 * JSON path (data[2].paragraphs[0].qas[5]: no "id"). SQuAD v2.0's
 * is_impossible (true or false) is read: such a question keeps no answers
 * (run_squad.py ignores them; v2.0 lists "plausible_answers" apart) and
 * counts in n_impossible. An answer_start that
 * does not point at its text in the context is kept (the official data has
 * a few); features then skip that answer. */
pl_status pl_squad_read(pl_squad_set *out, const char *path);
pl_status pl_squad_parse(pl_squad_set *out, const char *text, size_t n, const char *name);
void pl_squad_set_free(pl_squad_set *s);

typedef struct pl_squad_config {
    int64_t max_seq_len;   /* 384 in NeMo's and HF's examples */
    int64_t doc_stride;    /* 128 */
    int64_t max_query_len; /* 64 */
    int training;          /* drop questions whose answer does not match the context */
} pl_squad_config;

/* One context, split into words and tokenized once for all its questions. */
typedef struct pl_squad_doc {
    const char *text;
    int64_t n_words;
    int64_t *word_start, *word_end; /* byte offsets [start, end) of each word */
    int64_t n_cp;
    int64_t *cp_to_word;            /* code point -> word (-1 before the first word) */
    pl_ids tok;                     /* WordPiece ids of the words, in order */
    int64_t *tok_to_word;           /* tok.n */
    int64_t *word_to_tok;           /* n_words + 1: first token of each word, then tok.n */
} pl_squad_doc;

pl_status pl_squad_doc_init(pl_squad_doc *d, pl_tokenizer *t, const char *context);
void pl_squad_doc_free(pl_squad_doc *d);

/* A feature: one window of a question's context. Its token row lives in the
 * rows of pl_squad_features (ids/types/mask at index * max_seq_len). */
typedef struct pl_squad_feature {
    int64_t question;     /* index into the set's questions */
    int64_t doc_start;    /* first context token (index into the doc's tok) */
    int64_t doc_len;      /* context tokens in the window */
    int64_t doc_offset;   /* row position of the first context token (len(query) + 2) */
    int64_t start, end;   /* answer positions in the row; 0, 0 when outside (or no answer) */
} pl_squad_feature;

typedef struct pl_squad_features {
    int64_t seq_len, n, cap;
    pl_squad_feature *f;
    int32_t *ids, *types, *mask; /* n * seq_len */
    uint8_t *max_context;        /* n * seq_len: 1 where the row's context token is max-context */
    int64_t n_skipped_answers;   /* answers that did not match their context */
} pl_squad_features;

/* Appends the features of question q (of set s, whose context is doc).
 * The question's first answer sets start/end; a question with none gets
 * 0, 0, and so does one whose answer is skipped unless cfg->training (then
 * it gets no features). */
pl_status pl_squad_features_add(pl_squad_features *fs, pl_tokenizer *t, const pl_squad_set *s,
                                int64_t q, const pl_squad_doc *doc, const pl_squad_config *cfg);
/* The features of every question of s, the docs built along the way. */
pl_status pl_squad_features_build(pl_squad_features *fs, pl_tokenizer *t, const pl_squad_set *s,
                                  const pl_squad_config *cfg);
void pl_squad_features_free(pl_squad_features *fs);

typedef struct pl_squad_decode_config {
    int64_t n_best;         /* 20 */
    int64_t max_answer_len; /* 30 tokens */
    int version_2;          /* SQuAD v2.0: the null answer competes (version_2_with_negative) */
    double null_threshold;  /* v2.0: null_score_diff_threshold (0.0) */
} pl_squad_decode_config;

/* The best answer text of one question from its features' logits.
 * feats[0..n_feat) are indices into fs of that question's features;
 * start_logits / end_logits hold fs->seq_len values per feature (row k of
 * the logits belongs to feats[k]). Appends the text to out (nothing when no
 * span qualifies). *score (may be NULL) gets the best start + end logit. */
pl_status pl_squad_decode(pl_tokenizer *t, const pl_squad_features *fs, const pl_squad_doc *doc,
                          const int64_t *feats, int64_t n_feat, const float *start_logits,
                          const float *end_logits, const pl_squad_decode_config *cfg, pl_bytes *out,
                          float *score);

/* run_squad.py's n-best list of one question (write_predictions, v1.1):
 * the candidates above ranked by start + end logit (ties: feature order,
 * then start and end in top-k order, as Python's stable sort), each text
 * kept once (the first, highest-ranked occurrence), at most n_best entries;
 * probability is the softmax over the entries' start + end logits (in
 * double, shifted by the maximum). When no span qualifies the list is
 * run_squad.py's one nonce entry {"empty", 0, 0, probability 1} and empty
 * is set.
 * SQuAD v2.0 (cfg->version_2, run_squad.py's version_2_with_negative):
 * score_null is the lowest start[0] + end[0] ([CLS]) over the windows; that
 * window's null span (start 0, end 0, text "") joins the candidates last (a
 * tie goes to the spans), and when it is not among the first n_best texts,
 * a "" entry with its logits is appended (n_best + 1 entries then, as
 * run_squad.py). score_diff = score_null - the first non-"" entry's start
 * logit - its end logit (null_odds.json); the prediction is "" when
 * score_diff > cfg->null_threshold, else that entry's text. Where no span
 * qualifies at all (run_squad.py then fails), score_diff is +infinity and
 * the prediction "". pred is the predicted entry, -1 for "" (and for v1.1's
 * "empty"). */
typedef struct pl_squad_nbest_entry {
    size_t text;              /* offset of the NUL-terminated text in texts */
    float start_logit, end_logit;
    double probability;
} pl_squad_nbest_entry;

typedef struct pl_squad_nbest {
    pl_squad_nbest_entry *e;
    int64_t n, cap;
    int empty;
    int64_t pred;             /* entry of the prediction, -1: none ("" under v2.0) */
    double score_null, score_diff; /* v2.0 */
    pl_bytes texts;
    void *cand;               /* scratch: the ranked candidates */
    int64_t cand_cap;
} pl_squad_nbest;

/* The n-best list of one question (arguments as pl_squad_decode). nb is
 * reused: start from {0}, free with pl_squad_nbest_free. */
pl_status pl_squad_decode_nbest(pl_tokenizer *t, const pl_squad_features *fs, const pl_squad_doc *doc,
                                const int64_t *feats, int64_t n_feat, const float *start_logits,
                                const float *end_logits, const pl_squad_decode_config *cfg,
                                pl_squad_nbest *nb);
void pl_squad_nbest_free(pl_squad_nbest *nb);
/* The text of entry i. */
const char *pl_squad_nbest_text(const pl_squad_nbest *nb, int64_t i);

/* Appends "id": [{"text", "probability", "start_logit", "end_logit"}, ...]
 * (one question of nbest_predictions.json; numbers with 17 significant
 * digits, non-finite ones as Python's json writes them) to out. */
pl_status pl_squad_nbest_json(const pl_squad_nbest *nb, const char *id, pl_bytes *out);
/* Appends sep then "id": score_diff (one entry of run_squad.py's v2.0
 * null_odds.json) to out. */
pl_status pl_squad_null_odds_json(const pl_squad_nbest *nb, const char *id, const char *sep, pl_bytes *out);

#endif
