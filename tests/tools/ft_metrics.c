/* Test helper for tests/scripts/finetune_metrics.sh: runs plait's fine-tuning
 * metrics on files the Python oracles also read, printing results one per
 * line so the suite can compare them.
 *   ft_metrics seqeval FILE     FILE: "TRUE PRED" per line, blank line between
 *                               sentences; prints "tp pred true P R F1", then
 *                               "TYPE tp pred true" per type
 *   ft_metrics cls K FILE       FILE: "TRUTH PRED" ids per line; prints the metrics
 *   ft_metrics normalize FILE   FILE: one JSON string per line; prints each
 *                               normalize_answer() as a JSON string
 *   ft_metrics squad DATA PRED  the official SQuAD v1.1 EM and F1
 *   ft_metrics squad2 DATA PRED [NA_PROBS THRESH]
 *                               the official SQuAD v2.0 exact / f1 with HasAns / NoAns;
 *                               with NA_PROBS (evaluate-v2.0.py's --na-prob-file, a JSON
 *                               object of finite numbers) and THRESH (--na-prob-thresh),
 *                               the thresholded figures and best_exact(_thresh),
 *                               best_f1(_thresh)
 *   ft_metrics read-tsv FILE    a header + "text\tlabel" file: examples per label (sorted)
 *   ft_metrics read-conll FILE  sentences, words and entities (seqeval) of a CoNLL file
 *   ft_metrics squad-gold VOCAB DATA SEQ STRIDE QLEN
 *                               features of DATA, logits peaked at each question's
 *                               gold start/end, decoded and evaluated: prints
 *                               questions, features, skipped answers, EM, F1
 *   ft_metrics squad-dump VOCAB DATA SEQ STRIDE QLEN LOGITS [N_BEST [NULL_THRESHOLD]]
 *                               training features of DATA as JSON lines
 *                               {"q", "ids", "types", "n", "start", "end", "maxctx"},
 *                               then, with LOGITS (float32 [feature][start|end][SEQ]),
 *                               {"id", "text"} per question decoded (n-best N_BEST,
 *                               default 20; answers up to 30 tokens), each followed by
 *                               {"nbest": {"id": [...]}} (nbest_predictions.json's entry);
 *                               with NULL_THRESHOLD, SQuAD v2.0 decoding, and after each
 *                               list {"v2": predicted entry or -1 for "", "score_diff"}
 *   ft_metrics textcls-dump VOCAB FILE SEQ COL_B
 *                               a header + TSV file (text_a column 0, text_b column
 *                               COL_B or -1, label last) encoded: one line per
 *                               example "label_id|ids|types|mask" (space-separated)
 *   ft_metrics reg FILE         FILE: "TRUTH PRED" numbers per line; prints the metrics
 *   ft_metrics read-targets FILE  a header + "text\ttarget" TSV: count and mean of the targets
 *   ft_metrics tokcls-dump VOCAB FILE SEQ
 *                               a CoNLL file encoded: one line per row
 *                               "sentence|ids|labels|word_pos" */
#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"
#include "finetune/cls_metrics.h"
#include "finetune/seqeval.h"
#include "finetune/squad_eval.h"
#include "finetune/textcls.h"
#include "finetune/reg_metrics.h"
#include "finetune/tokcls.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <math.h>
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

/* The na-prob file path: an object {"id": number}; na[i] and tie[i] (its position in
 * the file) for each question of s; unknown ids ignored, a missing one an error. */
static int read_na_probs(const pl_squad_set *s, const char *path, double *na, int64_t *tie)
{
    char *text = NULL;
    size_t n = 0;
    if (pl_file_read_all(path, &text, &n))
        return 1;
    pl_json_init();
    cJSON *root = cJSON_ParseWithLength(text, n);
    pl_free(text);
    if (!root || !cJSON_IsObject(root)) {
        fprintf(stderr, "ft_metrics: %s: expected a JSON object of numbers\n", path);
        cJSON_Delete(root);
        return 1;
    }
    for (int64_t i = 0; i < s->n_q; i++)
        tie[i] = -1;
    int64_t pos = 0;
    for (const cJSON *it = root->child; it; it = it->next, pos++)
        for (int64_t i = 0; cJSON_IsNumber(it) && i < s->n_q; i++)
            if (strcmp(s->q[i].id, it->string) == 0)
                na[i] = it->valuedouble, tie[i] = pos;
    cJSON_Delete(root);
    for (int64_t i = 0; i < s->n_q; i++)
        if (tie[i] < 0) {
            fprintf(stderr, "ft_metrics: %s: no number for question %s\n", path, s->q[i].id);
            return 1;
        }
    return 0;
}

static int run_squad2(const char *data, const char *preds, const char *na_path, const char *thresh)
{
    pl_squad_set s;
    const char **pred;
    char *arena;
    pl_squad_eval_v2_result r;
    if (pl_squad_read(&s, data) || pl_squad_predictions_read(&s, preds, &pred, &arena))
        return fail();
    double *na = na_path ? pl_malloc(((size_t)s.n_q + 1) * sizeof *na) : NULL;
    int64_t *tie = na_path ? pl_malloc(((size_t)s.n_q + 1) * sizeof *tie) : NULL;
    if (na_path && (!na || !tie || read_na_probs(&s, na_path, na, tie)))
        return 1;
    if (pl_squad_evaluate_v2_na(&s, pred, na, tie, thresh ? atof(thresh) : 0.0, &r))
        return fail();
    printf("{\"exact\": %.17g, \"f1\": %.17g, \"total\": %lld, \"HasAns_exact\": %.17g, \"HasAns_f1\": %.17g, "
           "\"HasAns_total\": %lld, \"NoAns_exact\": %.17g, \"NoAns_f1\": %.17g, \"NoAns_total\": %lld",
           r.exact, r.f1, (long long)r.total, r.has_ans_exact, r.has_ans_f1, (long long)r.has_ans_total,
           r.no_ans_exact, r.no_ans_f1, (long long)r.no_ans_total);
    if (r.searched)
        printf(", \"best_exact\": %.17g, \"best_exact_thresh\": %.17g, \"best_f1\": %.17g, "
               "\"best_f1_thresh\": %.17g", r.best_exact, r.best_exact_thresh, r.best_f1,
               r.best_f1_thresh);
    printf("}\n");
    pl_free(na);
    pl_free(tie);
    pl_free(pred);
    pl_free(arena);
    pl_squad_set_free(&s);
    return 0;
}

static int run_read_tsv(const char *path)
{
    pl_textcls_spec sp = pl_textcls_spec_default();
    sp.header = 1;
    pl_textcls_set s;
    pl_ft_labels m;
    if (pl_textcls_read(&s, path, &sp) || pl_textcls_labels(&s, &m))
        return fail();
    for (int64_t l = 0; l < m.n; l++) {
        int64_t k = 0;
        for (int64_t i = 0; i < s.n; i++)
            k += strcmp(s.ex[i].label, m.names[l]) == 0;
        printf("%s %lld\n", m.names[l], (long long)k);
    }
    pl_ft_labels_free(&m);
    pl_textcls_set_free(&s);
    return 0;
}

static int run_read_conll(const char *path)
{
    pl_conll_spec sp = pl_conll_spec_default();
    pl_conll_set s;
    if (pl_conll_read(&s, path, &sp))
        return fail();
    int64_t *len = malloc((size_t)s.n_sent * sizeof *len);
    for (int64_t i = 0; i < s.n_sent; i++)
        len[i] = s.sent[i].n;
    pl_seqeval_result r;
    if (pl_seqeval_score(&r, s.tags, s.tags, len, s.n_sent))
        return fail();
    printf("sentences %lld words %lld entities %lld f1 %.17g\n", (long long)s.n_sent, (long long)s.n_words,
           (long long)r.true_all, r.f1);
    pl_seqeval_result_free(&r);
    free(len);
    pl_conll_set_free(&s);
    return 0;
}

static int run_squad_gold(char **argv)
{
    pl_tokenizer *t;
    pl_squad_set s;
    pl_squad_features fs = {0};
    pl_squad_config cfg = {.max_seq_len = atoll(argv[4]), .doc_stride = atoll(argv[5]), .max_query_len = atoll(argv[6])};
    if (pl_bert_tokenizer_open(&t, argv[2], 1) || pl_squad_read(&s, argv[3]) ||
        pl_squad_features_build(&fs, t, &s, &cfg))
        return fail();
    int64_t L = fs.seq_len;
    float *sl = malloc((size_t)(fs.n * L) * sizeof *sl), *el = malloc((size_t)(fs.n * L) * sizeof *el);
    int64_t *feats = malloc((size_t)fs.n * sizeof *feats);
    const char **pred = calloc((size_t)s.n_q, sizeof *pred);
    char **texts = calloc((size_t)s.n_q, sizeof *texts);
    pl_squad_decode_config dc = {.n_best = 20, .max_answer_len = 30};
    pl_squad_doc doc = {0};
    int64_t cur = -1;
    for (int64_t i = 0, q = 0; q < s.n_q; q++) {
        int64_t nf = 0;
        for (; i + nf < fs.n && fs.f[i + nf].question == q; nf++) {
            const pl_squad_feature *f = &fs.f[i + nf];
            feats[nf] = i + nf;
            for (int64_t p = 0; p < L; p++)
                sl[nf * L + p] = el[nf * L + p] = -10.0f;
            if (f->start > 0)
                sl[nf * L + f->start] = 10.0f, el[nf * L + f->end] = 10.0f;
        }
        if (s.q[q].context != cur) {
            pl_squad_doc_free(&doc);
            cur = s.q[q].context;
            if (pl_squad_doc_init(&doc, t, s.contexts[cur]))
                return fail();
        }
        pl_bytes out = {0};
        if (pl_squad_decode(t, &fs, &doc, feats, nf, sl, el, &dc, &out, NULL))
            return fail();
        texts[q] = out.data ? out.data : pl_strdup("");
        pred[q] = texts[q];
        i += nf;
    }
    pl_squad_eval_result r;
    if (pl_squad_evaluate(&s, pred, &r))
        return fail();
    printf("questions %lld features %lld skipped %lld exact_match %.6f f1 %.6f\n", (long long)s.n_q,
           (long long)fs.n, (long long)fs.n_skipped_answers, r.exact_match, r.f1);
    for (int64_t q = 0; q < s.n_q; q++)
        pl_free(texts[q]);
    free(texts), free(pred), free(sl), free(el), free(feats);
    pl_squad_doc_free(&doc);
    pl_squad_features_free(&fs);
    pl_squad_set_free(&s);
    pl_tokenizer_free(t);
    return 0;
}

static int run_squad_dump(char **argv)
{
    pl_tokenizer *t;
    pl_squad_set s;
    pl_squad_features fs = {0};
    pl_squad_config cfg = {.max_seq_len = atoll(argv[4]), .doc_stride = atoll(argv[5]),
                           .max_query_len = atoll(argv[6]), .training = 1};
    char *lg;
    size_t lg_n;
    if (pl_bert_tokenizer_open(&t, argv[2], 1) || pl_squad_read(&s, argv[3]) ||
        pl_squad_features_build(&fs, t, &s, &cfg) || pl_file_read_all(argv[7], &lg, &lg_n))
        return fail();
    int64_t L = fs.seq_len;
    if (lg_n != (size_t)(fs.n * 2 * L) * sizeof(float)) {
        fprintf(stderr, "ft_metrics: %s holds %zu bytes, expected %lld features x 2 x %lld floats\n", argv[7], lg_n,
                (long long)fs.n, (long long)L);
        return 1;
    }
    const float *logits = (const float *)lg;
    for (int64_t i = 0; i < fs.n; i++) {
        const pl_squad_feature *f = &fs.f[i];
        int64_t n = 0;
        while (n < L && fs.mask[i * L + n])
            n++;
        printf("{\"q\": %lld, \"n\": %lld, \"start\": %lld, \"end\": %lld, \"ids\": [", (long long)f->question,
               (long long)n, (long long)f->start, (long long)f->end);
        for (int64_t p = 0; p < n; p++)
            printf("%s%d", p ? ", " : "", fs.ids[i * L + p]);
        printf("], \"types\": [");
        for (int64_t p = 0; p < n; p++)
            printf("%s%d", p ? ", " : "", fs.types[i * L + p]);
        printf("], \"maxctx\": [");
        for (int64_t p = 0, k = 0; p < L; p++)
            if (fs.max_context[i * L + p])
                printf("%s%lld", k++ ? ", " : "", (long long)p);
        printf("]}\n");
    }
    float *sl = malloc((size_t)(fs.n * L + 1) * sizeof *sl), *el = malloc((size_t)(fs.n * L + 1) * sizeof *el);
    int64_t *feats = malloc((size_t)(fs.n + 1) * sizeof *feats);
    pl_squad_decode_config dc = {.n_best = argv[8] ? atoll(argv[8]) : 20, .max_answer_len = 30,
                                 .version_2 = argv[8] && argv[9], .null_threshold = argv[8] && argv[9] ? atof(argv[9]) : 0};
    pl_squad_nbest nb = {0};
    pl_squad_doc doc = {0};
    int64_t cur = -1;
    for (int64_t i = 0; i < fs.n;) {
        int64_t q = fs.f[i].question, nf = 0;
        for (; i + nf < fs.n && fs.f[i + nf].question == q; nf++) {
            feats[nf] = i + nf;
            memcpy(sl + nf * L, logits + (i + nf) * 2 * L, (size_t)L * sizeof *sl);
            memcpy(el + nf * L, logits + (i + nf) * 2 * L + L, (size_t)L * sizeof *el);
        }
        if (s.q[q].context != cur) {
            pl_squad_doc_free(&doc);
            cur = s.q[q].context;
            if (pl_squad_doc_init(&doc, t, s.contexts[cur]))
                return fail();
        }
        pl_bytes out = {0};
        if (pl_squad_decode(t, &fs, &doc, feats, nf, sl, el, &dc, &out, NULL))
            return fail();
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", s.q[q].id);
        cJSON_AddStringToObject(o, "text", out.data ? out.data : "");
        char *js = cJSON_PrintUnformatted(o);
        printf("%s\n", js);
        cJSON_free(js);
        cJSON_Delete(o);
        pl_bytes_free(&out);
        pl_bytes nbj = {0};
        if (pl_squad_decode_nbest(t, &fs, &doc, feats, nf, sl, el, &dc, &nb) ||
            pl_bytes_append(&nbj, "{\"nbest\": {", 11) || pl_squad_nbest_json(&nb, s.q[q].id, &nbj) ||
            pl_bytes_append(&nbj, "}}", 2))
            return fail();
        printf("%s\n", nbj.data);
        if (dc.version_2) /* the prediction and null_odds.json's score_diff */
            printf(isinf(nb.score_diff) ? "{\"v2\": %lld, \"score_diff\": Infinity}\n"
                                        : "{\"v2\": %lld, \"score_diff\": %.17g}\n",
                   (long long)nb.pred, nb.score_diff);
        pl_bytes_free(&nbj);
        i += nf;
    }
    pl_squad_nbest_free(&nb);
    free(sl), free(el), free(feats);
    pl_free(lg);
    pl_squad_doc_free(&doc);
    pl_squad_features_free(&fs);
    pl_squad_set_free(&s);
    pl_tokenizer_free(t);
    return 0;
}

static int run_reg(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return perror(path), 1;
    int64_t n = 0, cap = 1024;
    double *t = malloc((size_t)cap * sizeof *t), *p = malloc((size_t)cap * sizeof *p), a, b;
    while (fscanf(f, "%lf %lf", &a, &b) == 2) {
        if (n == cap)
            cap *= 2, t = realloc(t, (size_t)cap * sizeof *t), p = realloc(p, (size_t)cap * sizeof *p);
        t[n] = a, p[n++] = b;
    }
    fclose(f);
    pl_reg_metrics m;
    if (pl_reg_metrics_compute(&m, t, p, n))
        return fail();
    printf("mse %.17g\nrmse %.17g\nmae %.17g\nr2 %.17g\npearson %.17g\nspearman %.17g\n", m.mse,
           m.rmse, m.mae, m.r2, m.pearson, m.spearman);
    free(t), free(p);
    return 0;
}

static int run_read_targets(const char *path)
{
    pl_textcls_spec sp = pl_textcls_spec_default();
    sp.header = 1;
    pl_textcls_set s;
    if (pl_textcls_read(&s, path, &sp))
        return fail();
    double *v = malloc((size_t)s.n * sizeof *v);
    pl_reg_metrics m;
    if (pl_reg_targets(&s, v) || pl_reg_metrics_compute(&m, v, v, s.n))
        return fail();
    printf("%lld %.6f\n", (long long)s.n, m.truth_mean);
    free(v);
    pl_textcls_set_free(&s);
    return 0;
}

static void print_row(const int32_t *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        printf("%s%d", i ? " " : "", x[i]);
}

static int run_textcls_dump(char **argv)
{
    pl_tokenizer *t;
    pl_textcls_spec sp = pl_textcls_spec_default();
    sp.header = 1, sp.col_b = atoi(argv[5]);
    pl_textcls_set s;
    pl_ft_labels m;
    int64_t L = atoll(argv[4]);
    if (pl_bert_tokenizer_open(&t, argv[2], 1) || pl_textcls_read(&s, argv[3], &sp) || pl_textcls_labels(&s, &m))
        return fail();
    size_t cells = (size_t)(s.n * L);
    int32_t *ids = malloc(cells * 4), *ty = malloc(cells * 4), *mk = malloc(cells * 4), *lab = malloc((size_t)s.n * 4);
    int64_t cut;
    if (pl_textcls_encode_set(t, &s, &m, L, ids, ty, mk, lab, &cut))
        return fail();
    for (int64_t i = 0; i < s.n; i++) {
        printf("%d|", lab[i]);
        print_row(ids + i * L, L);
        printf("|");
        print_row(ty + i * L, L);
        printf("|");
        print_row(mk + i * L, L);
        printf("\n");
    }
    fprintf(stderr, "%lld examples, %lld truncated\n", (long long)s.n, (long long)cut);
    free(ids), free(ty), free(mk), free(lab);
    pl_ft_labels_free(&m);
    pl_textcls_set_free(&s);
    pl_tokenizer_free(t);
    return 0;
}

static int run_tokcls_dump(char **argv)
{
    pl_tokenizer *t;
    pl_conll_spec sp = pl_conll_spec_default();
    pl_conll_set s;
    pl_ft_labels m;
    pl_tokcls_rows r;
    int64_t L = atoll(argv[4]);
    if (pl_bert_tokenizer_open(&t, argv[2], 1) || pl_conll_read(&s, argv[3], &sp) || pl_conll_labels(&s, &m) ||
        pl_tokcls_encode(&r, t, &s, &m, L))
        return fail();
    for (int64_t i = 0; i < r.n; i++) {
        printf("%lld|", (long long)r.sentence[i]);
        print_row(r.ids + i * L, L);
        printf("|");
        print_row(r.labels + i * L, L);
        printf("|");
        for (int64_t p = 0; p < L; p++)
            printf("%s%lld", p ? " " : "", (long long)r.word_pos[i * L + p]);
        printf("\n");
    }
    fprintf(stderr, "%lld rows, %lld sentences split, %lld words cut\n", (long long)r.n, (long long)r.n_split,
            (long long)r.n_cut_words);
    pl_tokcls_rows_free(&r);
    pl_ft_labels_free(&m);
    pl_conll_set_free(&s);
    pl_tokenizer_free(t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "reg") == 0)
        return run_reg(argv[2]);
    if (argc == 3 && strcmp(argv[1], "read-targets") == 0)
        return run_read_targets(argv[2]);
    if (argc == 6 && strcmp(argv[1], "textcls-dump") == 0)
        return run_textcls_dump(argv);
    if (argc == 5 && strcmp(argv[1], "tokcls-dump") == 0)
        return run_tokcls_dump(argv);
    if (argc >= 8 && argc <= 10 && strcmp(argv[1], "squad-dump") == 0)
        return run_squad_dump(argv);
    if (argc == 3 && strcmp(argv[1], "read-tsv") == 0)
        return run_read_tsv(argv[2]);
    if (argc == 3 && strcmp(argv[1], "read-conll") == 0)
        return run_read_conll(argv[2]);
    if (argc == 7 && strcmp(argv[1], "squad-gold") == 0)
        return run_squad_gold(argv);
    if (argc == 3 && strcmp(argv[1], "seqeval") == 0)
        return run_seqeval(argv[2]);
    if (argc == 4 && strcmp(argv[1], "cls") == 0)
        return run_cls(atoll(argv[2]), argv[3]);
    if (argc == 3 && strcmp(argv[1], "normalize") == 0)
        return run_normalize(argv[2]);
    if ((argc == 4 || argc == 6) && strcmp(argv[1], "squad2") == 0)
        return run_squad2(argv[2], argv[3], argc == 6 ? argv[4] : NULL, argc == 6 ? argv[5] : NULL);
    if (argc == 4 && strcmp(argv[1], "squad") == 0)
        return run_squad(argv[2], argv[3]);
    fprintf(stderr, "usage: ft_metrics seqeval FILE | cls K FILE | normalize FILE | squad DATA PRED\n");
    return 2;
}
