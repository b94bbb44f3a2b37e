/* Test helper for tests/scripts/finetune_metrics.sh: runs plait's fine-tuning
 * metrics on files the Python oracles also read, printing results one per
 * line so the suite can compare them.
 *   ft_metrics seqeval FILE     FILE: "TRUE PRED" per line, blank line between
 *                               sentences; prints "tp pred true P R F1", then
 *                               "TYPE tp pred true" per type
 *   ft_metrics cls K FILE       FILE: "TRUTH PRED" ids per line; prints the metrics
 *   ft_metrics normalize FILE   FILE: one JSON string per line; prints each
 *                               normalize_answer() as a JSON string
 *   ft_metrics squad DATA PRED  the official SQuAD v1.1 EM and F1 */
#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"
#include "finetune/cls_metrics.h"
#include "finetune/seqeval.h"
#include "finetune/squad_eval.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(void)
{
    fprintf(stderr, "ft_metrics: %s\n", pl_error_msg());
    return 1;
}

static int run_seqeval(const char *path)
{
    char *text;
    size_t n;
    if (pl_file_read_all(path, &text, &n))
        return fail();
    int64_t cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += text[i] == '\n';
    const char **tr = malloc((size_t)cap * sizeof *tr), **pr = malloc((size_t)cap * sizeof *pr);
    int64_t *len = calloc((size_t)cap + 1, sizeof *len);
    int64_t nt = 0, ns = 0, cur = 0;
    for (char *p = text; p < text + n;) {
        char *nl = memchr(p, '\n', (size_t)(text + n - p));
        char *e = nl ? nl : text + n;
        *e = '\0';
        if (*p == '\0') {
            if (cur > 0)
                len[ns++] = cur, cur = 0;
        } else {
            char *sp = strchr(p, ' ');
            if (!sp) {
                fprintf(stderr, "ft_metrics: bad line '%s'\n", p);
                return 1;
            }
            *sp = '\0';
            tr[nt] = p, pr[nt] = sp + 1, nt++, cur++;
        }
        p = e + 1;
    }
    if (cur > 0)
        len[ns++] = cur;
    pl_seqeval_result r;
    if (pl_seqeval_score(&r, tr, pr, len, ns))
        return fail();
    printf("%lld %lld %lld %.17g %.17g %.17g\n", (long long)r.tp_all, (long long)r.pred_all, (long long)r.true_all,
           r.precision, r.recall, r.f1);
    for (int64_t t = 0; t < r.n_types; t++)
        printf("%s %lld %lld %lld\n", r.types[t], (long long)r.tp[t], (long long)r.n_pred[t], (long long)r.n_true[t]);
    pl_seqeval_result_free(&r);
    free(tr), free(pr), free(len);
    pl_free(text);
    return 0;
}

static int run_cls(int64_t k, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return perror(path), 1;
    int64_t n = 0, cap = 1024;
    int32_t *t = malloc((size_t)cap * 4), *p = malloc((size_t)cap * 4);
    int a, b;
    while (fscanf(f, "%d %d", &a, &b) == 2) {
        if (n == cap)
            cap *= 2, t = realloc(t, (size_t)cap * 4), p = realloc(p, (size_t)cap * 4);
        t[n] = a, p[n++] = b;
    }
    fclose(f);
    pl_cls_metrics m;
    if (pl_cls_metrics_compute(&m, t, p, n, k))
        return fail();
    printf("accuracy %.17g\nmacro_precision %.17g\nmacro_recall %.17g\nmacro_f1 %.17g\n", m.accuracy,
           m.macro_precision, m.macro_recall, m.macro_f1);
    for (int64_t c = 0; c < k; c++)
        printf("class %lld %.17g %.17g %.17g %lld\n", (long long)c, m.precision[c], m.recall[c], m.f1[c],
               (long long)m.support[c]);
    for (int64_t r = 0; r < k; r++) {
        printf("row");
        for (int64_t c = 0; c < k; c++)
            printf(" %lld", (long long)m.confusion[r * k + c]);
        printf("\n");
    }
    pl_cls_metrics_free(&m);
    free(t), free(p);
    return 0;
}

static int run_normalize(const char *path)
{
    char *text;
    size_t n;
    if (pl_file_read_all(path, &text, &n))
        return fail();
    pl_json_init();
    pl_bytes out = {0};
    for (char *p = text; p < text + n;) {
        char *nl = memchr(p, '\n', (size_t)(text + n - p));
        char *e = nl ? nl : text + n;
        *e = '\0';
        if (*p) {
            cJSON *s = cJSON_Parse(p);
            if (!cJSON_IsString(s)) {
                fprintf(stderr, "ft_metrics: not a JSON string: %s\n", p);
                return 1;
            }
            if (pl_squad_normalize(s->valuestring, strlen(s->valuestring), &out))
                return fail();
            cJSON *o = cJSON_CreateString(out.data);
            char *js = cJSON_PrintUnformatted(o);
            printf("%s\n", js);
            cJSON_free(js);
            cJSON_Delete(o);
            cJSON_Delete(s);
        }
        p = e + 1;
    }
    pl_bytes_free(&out);
    pl_free(text);
    return 0;
}

static int run_squad(const char *data, const char *preds)
{
    pl_squad_set s;
    const char **pred;
    char *arena;
    pl_squad_eval_result r;
    if (pl_squad_read(&s, data) || pl_squad_predictions_read(&s, preds, &pred, &arena) ||
        pl_squad_evaluate(&s, pred, &r))
        return fail();
    printf("{\"exact_match\": %.17g, \"f1\": %.17g}\n", r.exact_match, r.f1);
    pl_free(pred);
    pl_free(arena);
    pl_squad_set_free(&s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "seqeval") == 0)
        return run_seqeval(argv[2]);
    if (argc == 4 && strcmp(argv[1], "cls") == 0)
        return run_cls(atoll(argv[2]), argv[3]);
    if (argc == 3 && strcmp(argv[1], "normalize") == 0)
        return run_normalize(argv[2]);
    if (argc == 4 && strcmp(argv[1], "squad") == 0)
        return run_squad(argv[2], argv[3]);
    fprintf(stderr, "usage: ft_metrics seqeval FILE | cls K FILE | normalize FILE | squad DATA PRED\n");
    return 2;
}
