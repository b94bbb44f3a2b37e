/* The official SQuAD v1.1 evaluation (evaluate-v1.1.py), in C.
 *
 * normalize_answer: Python's str.lower(), then every character of
 * string.punctuation (ASCII !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~ only; Unicode
 * punctuation such as curly quotes stays) removed, then the words "a", "an"
 * and "the" (re.sub(r'\b(a|an|the)\b', ' ', ...): whole runs of word
 * characters) replaced by a space, then split on whitespace and joined by
 * single spaces. Exact match: the normalized texts are equal. F1: the
 * multiset overlap of the normalized tokens (Counter &), 0 when nothing is
 * shared. A question scores the maximum over its ground truths; a question
 * without a prediction scores 0 and still counts; EM and F1 are averaged
 * over all questions and multiplied by 100.
 *
 * Python details kept: lower() is the full Unicode lowercase (U+0130 ->
 * "i" + U+0307, a final capital sigma -> U+03C2, everything else utf8proc's
 * simple mapping); a word character is a letter, a number or '_' (Python's
 * \w: str.isalnum() or '_'); whitespace is what str.split() splits on
 * (\t\n\v\f\r, U+001C..U+001F, space, U+0085, U+00A0, U+1680,
 * U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000). "Cased" is taken
 * as the letter categories Lu/Ll/Lt (Python adds Other_Lowercase/Uppercase,
 * e.g. U+00AA, which only matters next to a capital sigma) and the Unicode
 * tables are utf8proc's, whose version may differ from the Python's.
 * tests/scripts/squad_eval_reference.py transcribes evaluate-v1.1.py as the
 * oracle. */
#ifndef PL_FINETUNE_SQUAD_EVAL_H
#define PL_FINETUNE_SQUAD_EVAL_H

#include "base/vec.h"
#include "finetune/squad.h"

/* normalize_answer(s[0..n)) into out (replaced, NUL-terminated). */
pl_status pl_squad_normalize(const char *s, size_t n, pl_bytes *out);

/* exact_match_score and f1_score of one prediction against one truth. */
pl_status pl_squad_em_f1(const char *pred, const char *truth, int *em, double *f1);

typedef struct pl_squad_eval_result {
    double exact_match, f1; /* x100, as the script prints them */
    int64_t total, answered;
} pl_squad_eval_result;

/* Evaluates predictions against set s: pred[i] is the answer to question i
 * (NULL: unanswered, scored 0 as the script does). */
pl_status pl_squad_evaluate(const pl_squad_set *s, const char *const *pred, pl_squad_eval_result *out);

/* The official SQuAD v2.0 evaluation (evaluate-v2.0.py without --na-prob-file,
 * so no threshold search): per question the gold answers are those whose
 * normalized text is not empty, [""] when none is (an unanswerable question);
 * compute_exact is normalize_answer equality, compute_f1 the token F1 above
 * except that it is 1 when both token lists are empty and 0 when one is; the
 * maximum over the gold answers; exact and f1 (x100) over all questions, over
 * those with answers (HasAns) and those without (NoAns). A NULL prediction
 * counts as "" (the script skips a missing one overall and fails on it in the
 * splits); every question counts. */
typedef struct pl_squad_eval_v2_result {
    double exact, f1, has_ans_exact, has_ans_f1, no_ans_exact, no_ans_f1;
    int64_t total, has_ans_total, no_ans_total;
    int searched;                  /* na_prob given: the threshold search's figures below */
    double best_exact, best_exact_thresh, best_f1, best_f1_thresh;
} pl_squad_eval_v2_result;

pl_status pl_squad_evaluate_v2(const pl_squad_set *s, const char *const *pred, pl_squad_eval_v2_result *out);

/* evaluate-v2.0.py with --na-prob-file and --na-prob-thresh: na_prob[i] is question
 * i's no-answer score (run_squad.py's null_odds.json holds score_diff; +infinity
 * allowed, NaN refused). apply_no_ans_threshold: a question whose na_prob exceeds
 * na_prob_thresh scores 1 when it is unanswerable (make_qid_to_has_ans:
 * bool(answers)) and 0 otherwise, for exact and f1, before the averages above.
 * find_all_best_thresh on the raw scores: the questions in ascending na_prob
 * (ties in ascending tie[i], the order of the na-prob file, as Python's stable
 * sort; tie NULL: question order), a running score starting at the number of
 * unanswerable questions and adding, per question, its raw score (answerable), -1
 * (unanswerable with a non-empty prediction) or 0; best_* = 100 x the highest
 * running score / questions, *_thresh the na_prob where it was first reached (0.0
 * when never above the start). A NULL prediction counts as "" as above. */
pl_status pl_squad_evaluate_v2_na(const pl_squad_set *s, const char *const *pred,
                                  const double *na_prob, const int64_t *tie,
                                  double na_prob_thresh, pl_squad_eval_v2_result *out);

/* Reads a predictions file ({"question id": "answer text", ...}) and aligns
 * it with s: (*pred)[i] answers s->q[i] or is NULL. *pred and its strings
 * live in *arena (free both with pl_free). Unknown ids are ignored, as the
 * script ignores them. Errors name the file. */
pl_status pl_squad_predictions_read(const pl_squad_set *s, const char *path, const char ***pred,
                                    char **arena);

/* Writes {"question id": "answer", ...} for the questions with a prediction
 * (pred[i] non-NULL), the file evaluate-v1.1.py reads. Errors name path. */
pl_status pl_squad_predictions_write(const pl_squad_set *s, const char *const *pred, const char *path);

#endif
