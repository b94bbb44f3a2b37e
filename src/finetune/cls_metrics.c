/* Classification metrics and their report (see cls_metrics.h). */
#include "finetune/cls_metrics.h"

#include "base/alloc.h"
#include "base/fileio.h"

#include <string.h>

void pl_cls_metrics_free(pl_cls_metrics *m)
{
    pl_free(m->confusion);
    pl_free(m->support);
    pl_free(m->predicted);
    pl_free(m->precision);
    pl_free(m->recall);
    pl_free(m->f1);
    *m = (pl_cls_metrics){0};
}

static double ratio(int64_t a, int64_t b) { return b > 0 ? (double)a / (double)b : 0.0; }

pl_status pl_cls_metrics_compute(pl_cls_metrics *out, const int32_t *truth, const int32_t *pred,
                                 int64_t n, int64_t k)
{
    *out = (pl_cls_metrics){.k = k, .n = n};
    size_t kk;
    if (k <= 0 || k > INT32_MAX || pl_mul_size((size_t)k, (size_t)k, &kk))
        return pl_errorf(PL_ERR_ARG, "classification metrics: %lld classes", (long long)k);
    out->confusion = pl_calloc(kk, sizeof *out->confusion);
    out->support = pl_calloc((size_t)k, sizeof *out->support);
    out->predicted = pl_calloc((size_t)k, sizeof *out->predicted);
    out->precision = pl_calloc((size_t)k, sizeof(double));
    out->recall = pl_calloc((size_t)k, sizeof(double));
    out->f1 = pl_calloc((size_t)k, sizeof(double));
    if (!out->confusion || !out->support || !out->predicted || !out->precision || !out->recall || !out->f1) {
        pl_cls_metrics_free(out);
        return pl_errorf(PL_ERR_NOMEM, "classification metrics: %lld classes", (long long)k);
    }
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++) {
        if (truth[i] < 0 || truth[i] >= k || pred[i] < 0 || pred[i] >= k) {
            pl_cls_metrics_free(out);
            return pl_errorf(PL_ERR_ARG, "classification metrics: example %lld has truth %d, prediction %d; expected ids in [0, %lld)",
                             (long long)i, truth[i], pred[i], (long long)k);
        }
        out->confusion[truth[i] * k + pred[i]]++;
        out->support[truth[i]]++;
        out->predicted[pred[i]]++;
        correct += truth[i] == pred[i];
    }
    out->accuracy = ratio(correct, n);
    double sp = 0, sr = 0, sf = 0;
    for (int64_t c = 0; c < k; c++) {
        int64_t tp = out->confusion[c * k + c];
        out->precision[c] = ratio(tp, out->predicted[c]);
        out->recall[c] = ratio(tp, out->support[c]);
        out->f1[c] = ratio(2 * tp, out->predicted[c] + out->support[c]);
        if (out->support[c] || out->predicted[c]) {
            out->n_present++;
            sp += out->precision[c], sr += out->recall[c], sf += out->f1[c];
        }
    }
    if (out->n_present) {
        out->macro_precision = sp / (double)out->n_present;
        out->macro_recall = sr / (double)out->n_present;
        out->macro_f1 = sf / (double)out->n_present;
    }
    return PL_OK;
}

static const char *class_name(const pl_ft_labels *names, int64_t c, char *buf, size_t n)
{
    if (names && c < names->n)
        return names->names[c];
    snprintf(buf, n, "%lld", (long long)c);
    return buf;
}

pl_status pl_cls_metrics_format(const pl_cls_metrics *m, const pl_ft_labels *names, int markdown,
                                pl_bytes *out)
{
    pl_status st = PL_OK;
    const char *sep = markdown ? " | " : "\t", *lead = markdown ? "| " : "", *tail = markdown ? " |\n" : "\n";
    char nb[32];
    if (markdown)
        PL_TRY(pl_bytes_printf(out, "## Summary\n\n| metric | value |\n| --- | --- |\n"
                                    "| examples | %lld |\n| accuracy | %.6f |\n| macro precision | %.6f |\n"
                                    "| macro recall | %.6f |\n| macro F1 | %.6f |\n| classes averaged | %lld |\n\n"
                                    "## Per class\n\n",
                               (long long)m->n, m->accuracy, m->macro_precision, m->macro_recall,
                               m->macro_f1, (long long)m->n_present));
    else
        PL_TRY(pl_bytes_printf(out, "metric\tvalue\nexamples\t%lld\naccuracy\t%.6f\nmacro_precision\t%.6f\n"
                                    "macro_recall\t%.6f\nmacro_f1\t%.6f\nclasses_averaged\t%lld\n\n",
                               (long long)m->n, m->accuracy, m->macro_precision, m->macro_recall,
                               m->macro_f1, (long long)m->n_present));
    PL_TRY(pl_bytes_printf(out, "%sclass%sprecision%srecall%sf1%ssupport%spredicted%s", lead, sep, sep, sep,
                           sep, sep, tail));
    if (markdown)
        PL_TRY(pl_bytes_printf(out, "| --- | --- | --- | --- | --- | --- |\n"));
    for (int64_t c = 0; c < m->k; c++)
        PL_TRY(pl_bytes_printf(out, "%s%s%s%.6f%s%.6f%s%.6f%s%lld%s%lld%s", lead, class_name(names, c, nb, sizeof nb),
                               sep, m->precision[c], sep, m->recall[c], sep, m->f1[c], sep,
                               (long long)m->support[c], sep, (long long)m->predicted[c], tail));
    PL_TRY(pl_bytes_printf(out, markdown ? "\n## Confusion matrix (rows: truth, columns: prediction)\n\n"
                                         : "\ntruth\\prediction"));
    if (markdown)
        PL_TRY(pl_bytes_printf(out, "| truth \\ prediction"));
    for (int64_t c = 0; c < m->k; c++)
        PL_TRY(pl_bytes_printf(out, "%s%s", sep, class_name(names, c, nb, sizeof nb)));
    PL_TRY(pl_bytes_printf(out, "%s", tail));
    if (markdown) {
        PL_TRY(pl_bytes_printf(out, "| ---"));
        for (int64_t c = 0; c < m->k; c++)
            PL_TRY(pl_bytes_printf(out, " | ---"));
        PL_TRY(pl_bytes_printf(out, " |\n"));
    }
    for (int64_t r = 0; r < m->k; r++) {
        PL_TRY(pl_bytes_printf(out, "%s%s", lead, class_name(names, r, nb, sizeof nb)));
        for (int64_t c = 0; c < m->k; c++)
            PL_TRY(pl_bytes_printf(out, "%s%lld", sep, (long long)m->confusion[r * m->k + c]));
        PL_TRY(pl_bytes_printf(out, "%s", tail));
    }
fail:
    return st;
}

pl_status pl_cls_metrics_write(const pl_cls_metrics *m, const pl_ft_labels *names, const char *path)
{
    size_t n = strlen(path);
    int md = n >= 3 && strcmp(path + n - 3, ".md") == 0;
    pl_bytes b = {0};
    pl_status st = pl_cls_metrics_format(m, names, md, &b);
    if (st == PL_OK)
        st = pl_file_write_atomic(path, b.data, b.n);
    pl_bytes_free(&b);
    return st == PL_OK ? st : pl_error_wrap(st, "writing metrics %s", path);
}
