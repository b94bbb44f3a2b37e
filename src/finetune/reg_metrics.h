/* Regression targets and metrics (a property per molecule or text, e.g. a
 * SMILES string's TPSA): mean squared error, its root, mean absolute error,
 * R² and Pearson's r, as scikit-learn's mean_squared_error,
 * mean_absolute_error, r2_score and numpy's corrcoef define them:
 *  - R² = 1 - SS_res / SS_tot; when SS_tot is 0 (constant truth) it is 1 if
 *    the predictions are exact and 0 otherwise (r2_score's force_finite);
 *  - r = cov / (std_truth * std_pred); 0 when either is constant (numpy
 *    gives nan there);
 *  - Spearman's rho = Pearson's r of the ranks, tied values sharing their mean
 *    rank (scipy.stats.spearmanr; 0 where it gives nan).
 * Sums run in double, in order. tests/scripts/reg_metrics_reference.py is
 * the numpy oracle. */
#ifndef PL_FINETUNE_REG_METRICS_H
#define PL_FINETUNE_REG_METRICS_H

#include "base/vec.h"
#include "finetune/textcls.h"

#include <stdint.h>

/* Parses every label of s as a finite number (strtod, the whole string):
 * out[i] for example i. A label that is not one is PL_ERR_FORMAT naming
 * path:line. */
pl_status pl_reg_targets(const pl_textcls_set *s, double *out);

typedef struct pl_reg_metrics {
    int64_t n;
    double mse, rmse, mae, r2, pearson, spearman;
    double truth_mean, truth_std; /* population std of the truth: the scale the errors compare to */
} pl_reg_metrics;

/* n >= 1 pairs; PL_ERR_ARG for n < 1 or a non-finite value (naming its index);
 * PL_ERR_NOMEM (the ranks take 4 n doubles, freed before returning). */
pl_status pl_reg_metrics_compute(pl_reg_metrics *out, const double *truth, const double *pred, int64_t n);

/* A two-column table (metric, value), Markdown or TSV; written to a path as
 * pl_cls_metrics_write does (".md" -> Markdown). */
pl_status pl_reg_metrics_format(const pl_reg_metrics *m, int markdown, pl_bytes *out);
pl_status pl_reg_metrics_write(const pl_reg_metrics *m, const char *path);

#endif
