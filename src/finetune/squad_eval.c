/* evaluate-v1.1.py in C (see squad_eval.h). */
#include "finetune/squad_eval.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/utf8.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static int is_py_space(int32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

static int is_word(int32_t c)
{
    if (c == '_')
        return 1;
    if (c < 0)
        return 0;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return 1;
    default:
        return 0;
    }
}

static int is_cased(int32_t c)
{
    if (c < 0)
        return 0;
    int k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

/* Case_Ignorable (Unicode's derived property): Mn Me Cf Lm Sk and the
 * Word_Break MidLetter / MidNumLet / Single_Quote characters. */
static int is_case_ignorable(int32_t c)
{
    static const int32_t mid[] = {0x27, 0x2E, 0x3A, 0xB7, 0x387, 0x55F, 0x5F4, 0x2018, 0x2019,
                                  0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
    for (size_t i = 0; i < sizeof mid / sizeof mid[0]; i++)
        if (c == mid[i])
            return 1;
    if (c < 0)
        return 0;
    int k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
           k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK;
}

/* Python's handle_capital_sigma: a cased letter before (through case-ignorable
 * characters) and none after. */
static int final_sigma(const int32_t *c, int64_t n, int64_t i)
{
    int64_t j = i - 1;
    while (j >= 0 && is_case_ignorable(c[j]))
        j--;
    if (j < 0 || !is_cased(c[j]))
        return 0;
    j = i + 1;
    while (j < n && is_case_ignorable(c[j]))
        j++;
    return j == n || !is_cased(c[j]);
}

static int is_ascii_punct(int32_t c)
{
    return c < 0x80 && c > 0x20 && c != 0x7F && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", (int)c) != NULL;
}

typedef struct cps {
    int32_t *c;
    int64_t n, cap;
} cps;

static int cps_push(cps *v, int32_t c)
{
    if (v->n == v->cap) {
        int64_t cap = v->cap ? 2 * v->cap : 64;
        int32_t *p = pl_realloc(v->c, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        v->c = p, v->cap = cap;
    }
    v->c[v->n++] = c;
    return 0;
}

pl_status pl_squad_normalize(const char *s, size_t n, pl_bytes *out)
{
    cps in = {0}, low = {0};
    pl_status st = PL_OK;
    out->n = 0;
    if (pl_bytes_append(out, "", 0))
        return PL_ERR_NOMEM;
    for (size_t i = 0; i < n;) {
        int32_t c;
        i += pl_utf8_next((const unsigned char *)s + i, n - i, &c);
        if (cps_push(&in, c < 0 ? 0xFFFD : c))
            goto nomem;
    }
    /* lower(), then drop ASCII punctuation. */
    for (int64_t i = 0; i < in.n; i++) {
        int32_t c = in.c[i];
        int32_t l[2];
        int nl = 1;
        if (c == 0x130) {
            l[0] = 'i', l[1] = 0x307, nl = 2;
        } else if (c == 0x3A3) {
            l[0] = final_sigma(in.c, in.n, i) ? 0x3C2 : 0x3C3;
        } else {
            l[0] = utf8proc_tolower(c);
        }
        for (int k = 0; k < nl; k++)
            if (!is_ascii_punct(l[k]) && cps_push(&low, l[k]))
                goto nomem;
    }
    /* \b(a|an|the)\b -> ' ', then split and join. */
    int pending = 0;
    for (int64_t i = 0; i < low.n;) {
        int64_t j = i;
        if (is_word(low.c[i])) {
            while (j < low.n && is_word(low.c[j]))
                j++;
            int64_t len = j - i;
            const int32_t *w = low.c + i;
            int art = (len == 1 && w[0] == 'a') || (len == 2 && w[0] == 'a' && w[1] == 'n') ||
                      (len == 3 && w[0] == 't' && w[1] == 'h' && w[2] == 'e');
            if (art) {
                pending = out->n > 0;
                i = j;
                continue;
            }
        } else {
            j = i + 1;
        }
        for (int64_t k = i; k < j; k++) {
            int32_t c = low.c[k];
            if (is_py_space(c)) {
                pending = out->n > 0;
                continue;
            }
            if (pending && pl_bytes_append(out, " ", 1))
                goto nomem;
            pending = 0;
            uint8_t b[4];
            utf8proc_ssize_t m = utf8proc_encode_char(c, b);
            if (pl_bytes_append(out, b, (size_t)m))
                goto nomem;
        }
        i = j;
    }
    goto done;
nomem:
    st = pl_errorf(PL_ERR_NOMEM, "normalizing a %zu-byte answer", n);
done:
    pl_free(in.c);
    pl_free(low.c);
    return st;
}

static int cmp_tok(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Splits b (normalized: single spaces) into NUL-terminated tokens, sorted. */
static int64_t tokens(pl_bytes *b, const char ***out)
{
    int64_t n = b->n ? 1 : 0;
    for (size_t i = 0; i < b->n; i++)
        n += b->data[i] == ' ';
    const char **t = pl_malloc(((size_t)n + 1) * sizeof *t);
    if (!t)
        return -1;
    int64_t k = 0;
    if (b->n) {
        t[k++] = b->data;
        for (size_t i = 0; i < b->n; i++)
            if (b->data[i] == ' ')
                b->data[i] = '\0', t[k++] = b->data + i + 1;
    }
    qsort(t, (size_t)k, sizeof *t, cmp_tok);
    *out = t;
    return k;
}

/* v1.1's exact_match_score / f1_score; with v2, evaluate-v2.0.py's
 * compute_exact / compute_f1 (F1 = 1 when both are empty, 0 when one is). */
static pl_status em_f1(const char *pred, const char *truth, int v2, int *em, double *f1)
{
    pl_bytes a = {0}, b = {0};
    const char **ta = NULL, **tb = NULL;
    pl_status st;
    if ((st = pl_squad_normalize(pred, strlen(pred), &a)) || (st = pl_squad_normalize(truth, strlen(truth), &b)))
        goto done;
    *em = a.n == b.n && memcmp(a.data, b.data, a.n) == 0;
    int64_t na = tokens(&a, &ta), nb = tokens(&b, &tb);
    if (na < 0 || nb < 0) {
        st = pl_errorf(PL_ERR_NOMEM, "SQuAD F1 tokens");
        goto done;
    }
    int64_t same = 0;
    for (int64_t i = 0, j = 0; i < na && j < nb;) {
        int c = strcmp(ta[i], tb[j]);
        if (c == 0)
            same++, i++, j++;
        else if (c < 0)
            i++;
        else
            j++;
    }
    if (v2 && (na == 0 || nb == 0)) {
        *f1 = na == nb;
    } else if (same == 0) {
        *f1 = 0;
    } else {
        double p = (double)same / (double)na, r = (double)same / (double)nb;
        *f1 = 2 * p * r / (p + r);
    }
done:
    pl_free(ta);
    pl_free(tb);
    pl_bytes_free(&a);
    pl_bytes_free(&b);
    return st;
}

pl_status pl_squad_em_f1(const char *pred, const char *truth, int *em, double *f1)
{
    return em_f1(pred, truth, 0, em, f1);
}

/* evaluate-v2.0.py's get_raw_scores of question q: compute_exact and compute_f1
 * maximised over its gold answers. */
static pl_status raw_scores(const pl_squad_question *q, const char *p, pl_bytes *norm, int *best_em,
                           double *best_f1)
{
    pl_status st = PL_OK;
    int gold = 0;
    *best_em = 0, *best_f1 = 0;
    for (int64_t a = 0; a < q->n_answers && !st; a++) {
        int em;
        double f1;
        if ((st = pl_squad_normalize(q->answers[a].text, strlen(q->answers[a].text), norm)))
            break;
        if (norm->n == 0) /* gold answers that normalize to nothing are dropped */
            continue;
        gold++;
        if ((st = em_f1(p, q->answers[a].text, 1, &em, &f1)))
            break;
        *best_em = *best_em > em ? *best_em : em;
        *best_f1 = *best_f1 > f1 ? *best_f1 : f1;
    }
    if (!st && gold == 0) /* no gold answer: [""] */
        st = em_f1(p, "", 1, best_em, best_f1);
    return st;
}

/* A question in the threshold search's order: by na_prob, ties by tie (Python's
 * stable sort of the na-prob file's ids by value). */
typedef struct na_key {
    double p;
    int64_t tie, q;
} na_key;

static int cmp_na(const void *a, const void *b)
{
    const na_key *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? -1 : 1;
    return x->tie < y->tie ? -1 : x->tie > y->tie;
}

/* find_best_thresh over raw scores sc (exact or f1): see squad_eval.h. */
static void best_thresh(const pl_squad_set *s, const char *const *pred, const double *sc,
                        const na_key *order, double *best, double *thresh)
{
    double cur = 0;
    for (int64_t i = 0; i < s->n_q; i++)
        cur += s->q[i].n_answers == 0;
    double top = cur;
    *thresh = 0.0;
    for (int64_t k = 0; k < s->n_q; k++) {
        const int64_t i = order[k].q;
        const double diff = s->q[i].n_answers > 0 ? sc[i] : pred[i] && pred[i][0] ? -1.0 : 0.0;
        cur += diff;
        if (cur > top)
            top = cur, *thresh = order[k].p;
    }
    *best = 100.0 * top / (double)s->n_q;
}

pl_status pl_squad_evaluate_v2_na(const pl_squad_set *s, const char *const *pred,
                                  const double *na_prob, const int64_t *tie,
                                  double na_prob_thresh, pl_squad_eval_v2_result *out)
{
    *out = (pl_squad_eval_v2_result){0};
    double sum[3][2] = {{0}}; /* all, HasAns, NoAns: exact, f1 */
    int64_t n[3] = {0};
    pl_bytes norm = {0};
    pl_status st = PL_OK;
    const size_t nq = (size_t)s->n_q + 1;
    double *raw = na_prob ? pl_malloc(2 * nq * sizeof *raw) : NULL; /* exact, then f1 */
    na_key *order = na_prob ? pl_malloc(nq * sizeof *order) : NULL;
    if (na_prob && (!raw || !order)) {
        st = pl_errorf(PL_ERR_NOMEM, "SQuAD v2.0 threshold search of %lld questions",
                       (long long)s->n_q);
        goto done;
    }
    for (int64_t i = 0; i < s->n_q && !st; i++) {
        const pl_squad_question *q = &s->q[i];
        const char *p = pred[i] ? pred[i] : "";
        int em;
        double f1;
        if ((st = raw_scores(q, p, &norm, &em, &f1)))
            break;
        const int k = q->n_answers > 0 ? 1 : 2; /* has_ans: bool(qa["answers"]) */
        double e = em;
        if (na_prob) {
            if (isnan(na_prob[i])) {
                st = pl_errorf(PL_ERR_FORMAT, "SQuAD v2.0: question %s: its no-answer "
                               "probability is NaN (expected a number)", q->id);
                break;
            }
            raw[i] = e, raw[nq + i] = f1;
            order[i] = (na_key){na_prob[i], tie ? tie[i] : i, i};
            if (na_prob[i] > na_prob_thresh) /* apply_no_ans_threshold */
                e = f1 = k == 2;
        }
        sum[0][0] += e, sum[0][1] += f1, n[0]++;
        sum[k][0] += e, sum[k][1] += f1, n[k]++;
    }
    if (st)
        goto done;
    double *dst[3][2] = {{&out->exact, &out->f1}, {&out->has_ans_exact, &out->has_ans_f1},
                         {&out->no_ans_exact, &out->no_ans_f1}};
    for (int k = 0; k < 3; k++)
        if (n[k] > 0)
            *dst[k][0] = 100.0 * sum[k][0] / (double)n[k], *dst[k][1] = 100.0 * sum[k][1] / (double)n[k];
    out->total = n[0], out->has_ans_total = n[1], out->no_ans_total = n[2];
    if (na_prob && s->n_q > 0) {
        qsort(order, (size_t)s->n_q, sizeof *order, cmp_na);
        best_thresh(s, pred, raw, order, &out->best_exact, &out->best_exact_thresh);
        best_thresh(s, pred, raw + nq, order, &out->best_f1, &out->best_f1_thresh);
        out->searched = 1;
    }
done:
    pl_free(raw);
    pl_free(order);
    pl_bytes_free(&norm);
    return st;
}

pl_status pl_squad_evaluate_v2(const pl_squad_set *s, const char *const *pred, pl_squad_eval_v2_result *out)
{
    return pl_squad_evaluate_v2_na(s, pred, NULL, NULL, 0.0, out);
}

pl_status pl_squad_evaluate(const pl_squad_set *s, const char *const *pred, pl_squad_eval_result *out)
{
    *out = (pl_squad_eval_result){.total = s->n_q};
    double em_sum = 0, f1_sum = 0;
    for (int64_t i = 0; i < s->n_q; i++) {
        if (!pred[i])
            continue;
        out->answered++;
        const pl_squad_question *q = &s->q[i];
        if (q->n_answers == 0)
            return pl_errorf(PL_ERR_FORMAT, "%s: question %s has no ground truth (the official script would fail on it)",
                             s->path ? s->path : "SQuAD", q->id);
        int best_em = 0;
        double best_f1 = 0;
        for (int64_t a = 0; a < q->n_answers; a++) {
            int em;
            double f1;
            pl_status st = pl_squad_em_f1(pred[i], q->answers[a].text, &em, &f1);
            if (st != PL_OK)
                return st;
            best_em = best_em > em ? best_em : em;
            best_f1 = best_f1 > f1 ? best_f1 : f1;
        }
        em_sum += best_em;
        f1_sum += best_f1;
    }
    if (s->n_q > 0) {
        out->exact_match = 100.0 * em_sum / (double)s->n_q;
        out->f1 = 100.0 * f1_sum / (double)s->n_q;
    }
    return PL_OK;
}

typedef struct qid {
    const char *id;
    int64_t q;
} qid;

static int cmp_qid(const void *a, const void *b)
{
    return strcmp(((const qid *)a)->id, ((const qid *)b)->id);
}

pl_status pl_squad_predictions_read(const pl_squad_set *s, const char *path, const char ***pred, char **arena)
{
    *pred = NULL;
    *arena = NULL;
    char *text = NULL;
    size_t n = 0;
    cJSON *root = NULL;
    qid *order = NULL;
    pl_bytes ar = {0};
    int64_t *off = NULL;
    pl_status st = pl_file_read_all(path, &text, &n);
    if (st != PL_OK)
        return st;
    pl_json_init();
    root = cJSON_ParseWithLength(text, n);
    if (!root) {
        st = pl_json_oom_take() ? pl_errorf(PL_ERR_NOMEM, "%s: parsing JSON", path)
                                : pl_errorf(PL_ERR_FORMAT, "%s: invalid JSON", path);
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: expected an object {\"question id\": \"answer\", ...}", path);
        goto fail;
    }
    order = pl_malloc(((size_t)s->n_q + 1) * sizeof *order);
    off = pl_malloc(((size_t)s->n_q + 1) * sizeof *off);
    if (!order || !off)
        goto nomem;
    for (int64_t i = 0; i < s->n_q; i++)
        order[i] = (qid){s->q[i].id, i}, off[i] = -1;
    qsort(order, (size_t)s->n_q, sizeof *order, cmp_qid);
    for (const cJSON *it = root->child; it; it = it->next) {
        if (!cJSON_IsString(it)) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: the answer to \"%s\" is not a string", path, it->string);
            goto fail;
        }
        int64_t lo = 0, hi = s->n_q;
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (strcmp(order[mid].id, it->string) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == s->n_q || strcmp(order[lo].id, it->string) != 0)
            continue;
        int64_t o = (int64_t)ar.n;
        if (pl_bytes_append(&ar, it->valuestring, strlen(it->valuestring) + 1))
            goto nomem;
        for (; lo < s->n_q && strcmp(order[lo].id, it->string) == 0; lo++)
            off[order[lo].q] = o;
    }
    const char **p = pl_malloc(((size_t)s->n_q + 1) * sizeof *p);
    if (!p)
        goto nomem;
    for (int64_t i = 0; i < s->n_q; i++)
        p[i] = off[i] >= 0 ? ar.data + off[i] : NULL;
    *pred = p;
    *arena = ar.data;
    ar = (pl_bytes){0};
    goto fail;
nomem:
    st = pl_errorf(PL_ERR_NOMEM, "%s: predictions", path);
fail:
    cJSON_Delete(root);
    pl_free(text);
    pl_free(order);
    pl_free(off);
    pl_bytes_free(&ar);
    return st;
}

pl_status pl_squad_predictions_write(const pl_squad_set *s, const char *const *pred, const char *path)
{
    pl_json_init();
    pl_status st = PL_OK;
    char *text = NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        goto nomem;
    for (int64_t i = 0; i < s->n_q; i++) {
        if (!pred[i])
            continue;
        cJSON *v = cJSON_CreateString(pred[i]);
        if (!v)
            goto nomem;
        cJSON_DeleteItemFromObjectCaseSensitive(o, s->q[i].id);
        if (!cJSON_AddItemToObject(o, s->q[i].id, v)) {
            cJSON_Delete(v);
            goto nomem;
        }
    }
    if (!(text = cJSON_Print(o)))
        goto nomem;
    st = pl_file_write_atomic(path, text, strlen(text));
    if (st != PL_OK)
        st = pl_error_wrap(st, "writing predictions %s", path);
    goto done;
nomem:
    st = pl_errorf(PL_ERR_NOMEM, "%s: predictions JSON", path);
done:
    cJSON_free(text);
    cJSON_Delete(o);
    return st;
}
