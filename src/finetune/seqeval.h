/* Entity-level precision / recall / F1 as seqeval computes them in its
 * default mode (conlleval-compatible, no `mode="strict"`, no suffix tags).
 *
 * A transcription of seqeval's get_entities / end_of_chunk / start_of_chunk
 * (chakki-works/seqeval, seqeval/metrics/sequence_labeling.py) and of its
 * f1_score / precision_score / recall_score with average="micro":
 *  - each tag splits into a tag letter (its first character) and a type (the
 *    rest after its first character, from after the first '-' if any; "_"
 *    when empty): "B-PER" -> B, PER; "O" -> O, _; "I-" -> I, _;
 *  - sentences are joined with an "O" after each (seqeval's nested-list rule)
 *    and scanned once, so an entity never crosses sentences and the state
 *    (the chunk start) carries over exactly as in Python;
 *  - a chunk ends before a tag when the previous letter was E or S, or B/I
 *    followed by B, S or O, or the type changes while the previous letter is
 *    neither O nor '.'; one starts at B or S, at E or I after E, S or O, and
 *    at any letter but O and '.' whose type differs from the previous one.
 *    So "I-PER" without a B starts an entity, and "B-PER I-LOC" is two;
 *  - an entity is (type, start, end); true positives are the entities in
 *    both sets; precision tp / predicted, recall tp / true,
 *    F1 2PR / (P + R), each 0 when its denominator is 0.
 * Tags that are not B-/I-/E-/S-/O are accepted as seqeval 1.x accepts them
 * (it only warns). tests/scripts/seqeval_reference.py is an independent
 * Python transcription used as the oracle. */
#ifndef PL_FINETUNE_SEQEVAL_H
#define PL_FINETUNE_SEQEVAL_H

#include "base/vec.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pl_seqeval_entity {
    const char *type; /* points into a tag (or at "_"); type_len bytes, not NUL-terminated */
    size_t type_len;
    int64_t start, end; /* inclusive positions in the joined sequence (sentences + one "O" each) */
} pl_seqeval_entity;

/* The entities of n_sent sentences whose tags are tags[0..sum(len)), in
 * seqeval's order (by end). *out is pl_malloc'd (free with pl_free). An
 * empty tag is PL_ERR_FORMAT naming its sentence and position. */
pl_status pl_seqeval_entities(const char *const *tags, const int64_t *len, int64_t n_sent,
                              pl_seqeval_entity **out, int64_t *n_out);

typedef struct pl_seqeval_result {
    int64_t n_types;
    char **types;                /* sorted (as Python sorts str), NUL-terminated */
    int64_t *tp, *n_pred, *n_true; /* per type */
    int64_t tp_all, pred_all, true_all;
    double precision, recall, f1; /* micro, as seqeval's default */
} pl_seqeval_result;

/* Scores predicted tags against true ones; both cover the same sentences of
 * lengths len[0..n_sent). */
pl_status pl_seqeval_score(pl_seqeval_result *out, const char *const *truth, const char *const *pred,
                           const int64_t *len, int64_t n_sent);
void pl_seqeval_result_free(pl_seqeval_result *r);

/* P/R/F1 of one type (or of all when type < 0) from the counts, seqeval's formulas. */
void pl_seqeval_prf(const pl_seqeval_result *r, int64_t type, double *p, double *rec, double *f1);

/* Appends seqeval 1.x's classification_report as a table: a row per type
 * (precision, recall, F1, support = true entities, predicted), then micro,
 * macro (over every type of truth or predictions) and support-weighted
 * averages. Markdown (markdown = 1) or TSV. */
pl_status pl_seqeval_format(const pl_seqeval_result *r, int markdown, pl_bytes *out);
/* Writes that report to path: Markdown when path ends in ".md", TSV otherwise. */
pl_status pl_seqeval_write(const pl_seqeval_result *r, const char *path);

#endif
