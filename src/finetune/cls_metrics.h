/* Classification metrics: accuracy, macro-F1, per-class precision / recall /
 * F1 and the confusion matrix, as scikit-learn's accuracy_score,
 * f1_score(average="macro") and precision_recall_fscore_support compute them
 * with their defaults:
 *  - a class's precision is tp / predicted, recall tp / support, F1
 *    2 tp / (predicted + support); 0 where the denominator is 0
 *    (zero_division's "warn" value);
 *  - macro averages run over the classes that occur in the truth or the
 *    predictions (sklearn's unique_labels), not over every class of the map.
 * The confusion matrix has a row per true class and a column per predicted
 * class (sklearn's confusion_matrix). tests/scripts/cls_metrics_reference.py
 * is a numpy transcription of those definitions used as the oracle. */
#ifndef PL_FINETUNE_CLS_METRICS_H
#define PL_FINETUNE_CLS_METRICS_H

#include "base/vec.h"
#include "finetune/labels.h"

#include <stdint.h>

typedef struct pl_cls_metrics {
    int64_t k, n;         /* classes, examples */
    int64_t *confusion;   /* k * k, [true * k + pred] */
    int64_t *support;     /* k: examples whose truth is the class */
    int64_t *predicted;   /* k: examples predicted as the class */
    double *precision, *recall, *f1; /* k */
    int64_t n_present;    /* classes in truth or predictions */
    double accuracy, macro_precision, macro_recall, macro_f1;
} pl_cls_metrics;

/* Computes the metrics of n (truth, prediction) pairs of ids in [0, k).
 * An id out of range is PL_ERR_ARG naming the example. */
pl_status pl_cls_metrics_compute(pl_cls_metrics *out, const int32_t *truth, const int32_t *pred,
                                 int64_t n, int64_t k);
void pl_cls_metrics_free(pl_cls_metrics *m);

/* Appends a report a person can read: a summary, the per-class table and the
 * confusion matrix, as Markdown tables (markdown = 1) or as TSV blocks.
 * names may be NULL (classes are then "0", "1", ...). */
pl_status pl_cls_metrics_format(const pl_cls_metrics *m, const pl_ft_labels *names, int markdown,
                                pl_bytes *out);
/* Writes the report to path: Markdown when path ends in ".md", TSV otherwise. */
pl_status pl_cls_metrics_write(const pl_cls_metrics *m, const pl_ft_labels *names, const char *path);

#endif
