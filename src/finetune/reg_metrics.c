/* Regression targets and metrics (see reg_metrics.h). */
#include "finetune/reg_metrics.h"

#include "base/alloc.h"
#include "base/fileio.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

pl_status pl_reg_targets(const pl_textcls_set *s, double *out)
{
    for (int64_t i = 0; i < s->n; i++) {
        const char *l = s->ex[i].label;
        char *end = NULL;
        errno = 0;
        double v = l ? strtod(l, &end) : 0;
        if (!l || end == l || *end || errno == ERANGE || !isfinite(v))
            return pl_errorf(PL_ERR_FORMAT, "%s:%lld: target '%s' is not a finite number", s->path,
                             (long long)s->ex[i].line, l ? l : "(none)");
        out[i] = v;
    }
    return PL_OK;
}

/* sum of squares of a - mean(a), of b - mean(b), and the co-moment, into out[3] */
static void moments(const double *a, const double *b, int64_t n, double out[3])
{
    double sa = 0, sb = 0;
    for (int64_t i = 0; i < n; i++)
        sa += a[i], sb += b[i];
    const double ma = sa / (double)n, mb = sb / (double)n;
    out[0] = out[1] = out[2] = 0;
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i] - ma, y = b[i] - mb;
        out[0] += x * x, out[1] += y * y, out[2] += x * y;
    }
}

typedef struct ranked {
    double v;
    int64_t i;
} ranked;

static int by_value(const void *pa, const void *pb)
{
    const ranked *x = pa, *y = pb;
    return x->v < y->v ? -1 : x->v > y->v ? 1 : (x->i > y->i) - (x->i < y->i);
}

/* rank[i] (1-based) of v[i]; ties share their mean rank; idx: n scratch. */
static void ranks(const double *v, double *rank, ranked *idx, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        idx[i] = (ranked){v[i], i};
    qsort(idx, (size_t)n, sizeof *idx, by_value);
    for (int64_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && idx[j].v == idx[i].v; j++)
            ;
        const double r = 0.5 * (double)(i + 1 + j); /* the mean of ranks i+1..j */
        for (int64_t k = i; k < j; k++)
            rank[idx[k].i] = r;
    }
}

static pl_status spearman(const double *truth, const double *pred, int64_t n, double *rho)
{
    double *rt = pl_malloc((size_t)n * 2 * sizeof(double));
    ranked *idx = pl_malloc((size_t)n * sizeof(ranked));
    if (!rt || !idx) {
        pl_free(rt);
        pl_free(idx);
        return pl_errorf(PL_ERR_NOMEM, "regression metrics: ranks of %lld examples", (long long)n);
    }
    double *rp = rt + n, mo[3];
    ranks(truth, rt, idx, n);
    ranks(pred, rp, idx, n);
    moments(rt, rp, n, mo);
    *rho = mo[0] > 0 && mo[1] > 0 ? mo[2] / sqrt(mo[0] * mo[1]) : 0.0;
    pl_free(rt);
    pl_free(idx);
    return PL_OK;
}

pl_status pl_reg_metrics_compute(pl_reg_metrics *out, const double *truth, const double *pred, int64_t n)
{
    *out = (pl_reg_metrics){.n = n};
    if (n < 1)
        return pl_errorf(PL_ERR_ARG, "regression metrics: %lld examples", (long long)n);
    double st = 0, sp = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(truth[i]) || !isfinite(pred[i]))
            return pl_errorf(PL_ERR_ARG, "regression metrics: example %lld has truth %g, prediction %g",
                             (long long)i, truth[i], pred[i]);
        st += truth[i], sp += pred[i];
    }
    double mt = st / (double)n, mp = sp / (double)n;
    double se = 0, ae = 0, ss_tot = 0, ss_pred = 0, cov = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = truth[i] - pred[i], a = truth[i] - mt, b = pred[i] - mp;
        se += d * d, ae += fabs(d), ss_tot += a * a, ss_pred += b * b, cov += a * b;
    }
    out->mse = se / (double)n;
    out->rmse = sqrt(out->mse);
    out->mae = ae / (double)n;
    out->r2 = ss_tot > 0 ? 1.0 - se / ss_tot : (se == 0 ? 1.0 : 0.0);
    out->pearson = ss_tot > 0 && ss_pred > 0 ? cov / sqrt(ss_tot * ss_pred) : 0.0;
    out->truth_mean = mt;
    out->truth_std = sqrt(ss_tot / (double)n);
    return spearman(truth, pred, n, &out->spearman);
}

pl_status pl_reg_metrics_format(const pl_reg_metrics *m, int markdown, pl_bytes *out)
{
    const char *fmt = markdown ? "| metric | value |\n| --- | --- |\n| examples | %lld |\n| mse | %.6g |\n"
                                 "| rmse | %.6g |\n| mae | %.6g |\n| r2 | %.6f |\n| pearson | %.6f |\n"
                                 "| spearman | %.6f |\n"
                                 "| truth mean | %.6g |\n| truth std | %.6g |\n"
                               : "metric\tvalue\nexamples\t%lld\nmse\t%.6g\nrmse\t%.6g\nmae\t%.6g\nr2\t%.6f\n"
                                 "pearson\t%.6f\nspearman\t%.6f\ntruth_mean\t%.6g\ntruth_std\t%.6g\n";
    return pl_bytes_printf(out, fmt, (long long)m->n, m->mse, m->rmse, m->mae, m->r2, m->pearson, m->spearman, m->truth_mean,
                           m->truth_std);
}

pl_status pl_reg_metrics_write(const pl_reg_metrics *m, const char *path)
{
    size_t n = strlen(path);
    pl_bytes b = {0};
    pl_status st = pl_reg_metrics_format(m, n >= 3 && strcmp(path + n - 3, ".md") == 0, &b);
    if (st == PL_OK)
        st = pl_file_write_atomic(path, b.data, b.n);
    pl_bytes_free(&b);
    return st == PL_OK ? st : pl_error_wrap(st, "writing metrics %s", path);
}
