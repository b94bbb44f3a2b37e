/* plait finetune's evaluation (train/finetune_internal.h): every row of a split
 * once, forward only, in global batches of mbs x DP rows (the last one padded
 * with ignored rows); the predictions and the loss summed over DP (each row is
 * one DP rank's) and from the last pipeline stage to all. Every rank then
 * holds the same figures (the checkpoint monitor decides alike everywhere);
 * rank 0 writes what a person reads:
 *   DIR/evaluations.md            one row per evaluation (iteration, epoch, split,
 *                                 loss, accuracy, F1)
 *   DIR/SPLIT_report.md and .tsv  text: accuracy, per-class precision / recall / F1
 *                                 and support, macro averages, confusion matrix;
 *                                 token: seqeval's classification report (per entity
 *                                 type, micro / macro / weighted averages)
 *   DIR/SPLIT_predictions.tsv     text: line of the file, true label, predicted label
 *   DIR/SPLIT_predictions.conll   token: word, true tag, predicted tag; a blank line
 *                                 after each sentence
 *   the metrics file              {"iteration", "epoch", "val_loss", "val_acc",
 *                                 "val_f1"} (test_ for the test split)
 *   DIR/SPLIT_predictions.json    QA: {"question id": "answer text"} (the official
 *                                 script's input)
 *   DIR/SPLIT_nbest_predictions.json  QA: run_squad.py's nbest_predictions.json,
 *                                 {"question id": [{"text", "probability",
 *                                 "start_logit", "end_logit"}, ...]}
 *   DIR/SPLIT_qa_logits.bin       QA with --save-qa-logits: every window's start and
 *                                 end logits (float32 [window][start|end][T])
 * F1 is the macro-F1 of the classes (text), seqeval's micro entity F1 (token) or
 * SQuAD's token F1 (QA, x 100); accuracy is of the examples (text) or of the words
 * (token); QA has the exact match (x 100, "val_em") instead.
 * Regression: the loss is the mean squared error of the standardised targets (what
 * training minimises); SPLIT_report.md/.tsv hold MSE, RMSE, MAE, R², Pearson and
 * Spearman in the targets' units (the head's output times the training std plus its
 * mean), SPLIT_predictions.tsv the line, target and prediction, the metrics file
 * {"val_loss", "val_mse", "val_rmse", "val_mae", "val_r2", "val_pearson",
 * "val_spearman"}.
 * SPLIT is "validation" or "test"; the reports hold the latest evaluation. */
#include "train/finetune_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "finetune/seqeval.h"
#include "finetune/squad_eval.h"

#include <math.h>
#include <string.h>

static const char *const split_name[PL_FT_SPLITS] = {"train", "validation", "test"};

/* --save-qa-logits: DIR/SPLIT_qa_logits.bin, float32 [window][start|end][T]. */
static pl_status write_qa_logits(const pl_train_ft *ft, const pl_ft_split *x, const char *name)
{
    const int64_t T = x->fs.seq_len, n = x->fs.n;
    char path[4096];
    pl_bytes b = {0};
    pl_status st = pl_bytes_reserve(&b, (size_t)(2 * n * T) * sizeof(float) + 1);
    for (int64_t i = 0; i < n && !st; i++) {
        st = pl_bytes_append(&b, ft->qa_start + i * T, (size_t)T * sizeof(float));
        if (!st)
            st = pl_bytes_append(&b, ft->qa_end + i * T, (size_t)T * sizeof(float));
    }
    snprintf(path, sizeof path, "%s/%s_qa_logits.bin", ft->dir, name);
    if (!st && (st = pl_file_write_atomic(path, b.data, b.n)))
        st = pl_error_wrap(st, "writing the QA logits %s", path);
    pl_bytes_free(&b);
    return st;
}
static const char *const key_prefix[PL_FT_SPLITS] = {"train", "val", "test"};

/* Forward of the current micro-batch through every pipeline stage (tag: its
 * number in this evaluation). */
static pl_status forward_pipelined(pl_trainer *t, pl_model *m, int tag)
{
    pl_status st = PL_OK;
    pl_comm *pp = pl_grid_comm(&t->grid, PL_GRID_PP);
    const int P = t->grid.layout.pp, r = t->grid.pp_rank;
    const int64_t n = m->blk.Nl * m->C;
    if (!m->stage.first)
        PL_TRY(pl_comm_recv_f32(pp, m->x0, n, r - 1, tag));
    PL_TRY(pl_model_forward(m));
    if (!m->stage.last)
        PL_TRY(pl_comm_send_f32(pp, pl_model_output(m), n, (r + 1) % P, tag));
fail:
    return st;
}

static pl_status write_file(pl_bytes *b, pl_status st, const char *path)
{
    if (!st)
        st = pl_file_write_atomic(path, b->data, b->n);
    pl_bytes_free(b);
    return st ? pl_error_wrap(st, "writing %s", path) : PL_OK;
}

/* Regression's reports, table row, metrics line and log line. */
static pl_status report_reg(pl_trainer *t, pl_split s, int64_t epoch, const pl_ft_eval *e)
{
    pl_train_ft *ft = t->ft;
    const pl_ft_split *x = &ft->split[s];
    const char *name = split_name[s], *key = key_prefix[s];
    const pl_reg_metrics *r = &e->reg;
    char path[4200];
    pl_status st = PL_OK;
    pl_bytes b = {0};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s_report.%s", ft->dir, name, k ? "tsv" : "md");
        PL_TRY(pl_reg_metrics_write(r, path));
    }
    snprintf(path, sizeof path, "%s/%s_predictions.tsv", ft->dir, name);
    st = pl_bytes_printf(&b, "line\ttarget\tprediction\n");
    for (int64_t i = 0; !st && i < x->n; i++)
        st = pl_bytes_printf(&b, "%lld\t%s\t%.17g\n", (long long)x->text.ex[i].line,
                             x->text.ex[i].label, ft->reg_pred[i]);
    PL_TRY(write_file(&b, st, path));
    if (ft->table) {
        fprintf(ft->table, "| %lld | %lld | %s | %.6f | %.4f | %.4f | %.4f | %.4f | %lld |\n",
                (long long)t->iteration, (long long)epoch, name, e->loss, r->rmse, r->mae,
                r->pearson, r->spearman, (long long)e->n);
        if (fflush(ft->table) != 0)
            return pl_errorf(PL_ERR_IO, "%s/evaluations.md: write failed", ft->dir);
    }
    if (t->metrics) {
        fprintf(t->metrics, "{\"iteration\": %lld, \"epoch\": %lld, \"%s_loss\": %.17g, "
                "\"%s_mse\": %.17g, \"%s_rmse\": %.17g, \"%s_mae\": %.17g, \"%s_r2\": %.17g, "
                "\"%s_pearson\": %.17g, \"%s_spearman\": %.17g, \"%s_examples\": %lld}\n",
                (long long)t->iteration, (long long)epoch, key, e->loss, key, r->mse, key, r->rmse,
                key, r->mae, key, r->r2, key, r->pearson, key, r->spearman, key, (long long)e->n);
        if (fflush(t->metrics) != 0)
            return pl_errorf(PL_ERR_IO, "the metrics file: write failed");
    }
    pl_log_info(" %s at iteration %lld (epoch %lld) | loss: %.6E | RMSE: %.4f | MAE: %.4f | "
                "Pearson: %.4f | Spearman: %.4f | examples: %lld (mean predictor's RMSE: %.4f)",
                name, (long long)t->iteration, (long long)epoch, e->loss, r->rmse, r->mae,
                r->pearson, r->spearman, (long long)e->n, r->truth_std);
fail:
    return st;
}

/* v as the Python json module writes it (%.17g, or Infinity / -Infinity: a
 * threshold search can end on a question whose null odds are infinite). */
static const char *py_num(char buf[32], double v)
{
    if (isinf(v))
        return v > 0 ? "Infinity" : "-Infinity";
    snprintf(buf, 32, "%.17g", v);
    return buf;
}

/* The file names of the header and the rows of the table and the metrics. */
static pl_status report(pl_trainer *t, pl_split s, int64_t epoch, const pl_ft_eval *e,
                        const pl_cls_metrics *cm, const pl_seqeval_result *se)
{
    pl_train_ft *ft = t->ft;
    const pl_ft_split *x = &ft->split[s];
    const char *name = split_name[s], *key = key_prefix[s];
    char path[4200];
    pl_status st = PL_OK;
    const int qa = ft->task == PL_TASK_SPAN;
    pl_bytes b = {0};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s_report.%s", ft->dir, name, k ? "tsv" : "md");
        if (qa) { /* evaluate-v1.1.py's two figures (v2.0: evaluate-v2.0.py's, and its splits) */
            st = pl_bytes_printf(&b, k ? "metric\tvalue\nexact_match\t%.6f\nf1\t%.6f\n"
                                         "questions\t%lld\n"
                                       : "| metric | value |\n| --- | --- |\n| exact match | "
                                         "%.6f |\n| F1 | %.6f |\n| questions | %lld |\n",
                                 e->accuracy, e->f1, (long long)e->n);
            const pl_squad_eval_v2_result *v = &ft->qa_v2;
            if (!st && ft->fa->version_2_with_negative)
                st = pl_bytes_printf(&b, k ? "HasAns_exact\t%.6f\nHasAns_f1\t%.6f\nHasAns_total\t%lld\n"
                                             "NoAns_exact\t%.6f\nNoAns_f1\t%.6f\nNoAns_total\t%lld\n"
                                           : "| HasAns exact | %.6f |\n| HasAns F1 | %.6f |\n| HasAns questions | "
                                             "%lld |\n| NoAns exact | %.6f |\n| NoAns F1 | %.6f |\n| NoAns "
                                             "questions | %lld |\n",
                                     v->has_ans_exact, v->has_ans_f1, (long long)v->has_ans_total,
                                     v->no_ans_exact, v->no_ans_f1, (long long)v->no_ans_total);
            char n1[32], n2[32], n3[32];
            if (!st && ft->fa->version_2_with_negative) /* find_all_best_thresh */
                st = pl_bytes_printf(&b, k ? "best_exact\t%.6f\nbest_exact_thresh\t%s\n"
                                             "best_f1\t%.6f\nbest_f1_thresh\t%s\n"
                                             "na_prob_thresh\t%s\n"
                                           : "| best exact | %.6f |\n| best exact threshold | %s |\n"
                                             "| best F1 | %.6f |\n| best F1 threshold | %s |\n"
                                             "| no-answer threshold (na_prob_thresh) | %s |\n",
                                     v->best_exact, py_num(n1, v->best_exact_thresh), v->best_f1,
                                     py_num(n2, v->best_f1_thresh),
                                     py_num(n3, pl_ft_na_prob_thresh(ft->fa)));
            PL_TRY(write_file(&b, st, path));
        } else {
            PL_TRY(cm ? pl_cls_metrics_write(cm, &ft->labels, path) : pl_seqeval_write(se, path));
        }
    }
    if (qa) {
        snprintf(path, sizeof path, "%s/%s_predictions.json", ft->dir, name);
        PL_TRY(pl_squad_predictions_write(&x->sq, (const char *const *)ft->qa_answers, path));
        snprintf(path, sizeof path, "%s/%s_nbest_predictions.json", ft->dir, name);
        st = pl_file_write_atomic(path, ft->qa_nbest_json.data, ft->qa_nbest_json.n);
        if (st)
            PL_TRY(pl_error_wrap(st, "writing the n-best predictions %s", path));
        if (ft->fa->save_qa_logits)
            PL_TRY(write_qa_logits(ft, x, name));
        if (ft->fa->version_2_with_negative) {
            snprintf(path, sizeof path, "%s/%s_null_odds.json", ft->dir, name);
            st = pl_file_write_atomic(path, ft->qa_null_odds.data, ft->qa_null_odds.n);
            if (st)
                PL_TRY(pl_error_wrap(st, "writing the null odds %s", path));
        }
    } else if (cm) {
        snprintf(path, sizeof path, "%s/%s_predictions.tsv", ft->dir, name);
        st = pl_bytes_printf(&b, "line\tlabel\tprediction\n");
        for (int64_t i = 0; !st && i < x->n; i++)
            st = pl_bytes_printf(&b, "%lld\t%s\t%s\n", (long long)x->text.ex[i].line,
                                 ft->labels.names[x->labels[i]],
                                 ft->labels.names[ft->pred_ids[i]]);
    } else if (!qa) {
        snprintf(path, sizeof path, "%s/%s_predictions.conll", ft->dir, name);
        const int64_t W = x->conll.n_words;
        for (int64_t i = 0; !st && i < x->conll.n_sent; i++) {
            const pl_conll_sentence *z = &x->conll.sent[i];
            for (int64_t w = z->first; !st && w < z->first + z->n; w++)
                st = pl_bytes_printf(&b, "%s\t%s\t%s\n", x->conll.words[w], ft->tags[w],
                                     ft->tags[W + w]);
            if (!st)
                st = pl_bytes_printf(&b, "\n");
        }
    }
    if (!qa)
        PL_TRY(write_file(&b, st, path));
    if (ft->table) {
        fprintf(ft->table, "| %lld | %lld | %s | %.6f | %.4f | %.4f | %lld |\n",
                (long long)t->iteration, (long long)epoch, name, e->loss, e->accuracy, e->f1,
                (long long)e->n);
        if (fflush(ft->table) != 0)
            return pl_errorf(PL_ERR_IO, "%s/evaluations.md: write failed", ft->dir);
    }
    if (t->metrics) {
        fprintf(t->metrics, "{\"iteration\": %lld, \"epoch\": %lld, \"%s_loss\": %.17g, "
                "\"%s_%s\": %.17g, \"%s_f1\": %.17g, \"%s_examples\": %lld",
                (long long)t->iteration, (long long)epoch, key, e->loss, key, qa ? "em" : "acc",
                e->accuracy, key, e->f1, key, (long long)e->n);
        if (qa && ft->fa->version_2_with_negative) {
            const pl_squad_eval_v2_result *v = &ft->qa_v2;
            char n1[32], n2[32];
            fprintf(t->metrics, ", \"%s_best_exact\": %.17g, \"%s_best_exact_thresh\": %s, "
                    "\"%s_best_f1\": %.17g, \"%s_best_f1_thresh\": %s", key, v->best_exact,
                    key, py_num(n1, v->best_exact_thresh), key, v->best_f1, key,
                    py_num(n2, v->best_f1_thresh));
        }
        fprintf(t->metrics, "}\n");
        if (fflush(t->metrics) != 0)
            return pl_errorf(PL_ERR_IO, "the metrics file: write failed");
    }
    pl_log_info(" %s at iteration %lld (epoch %lld) | loss: %.6E | %s: %.4f | %s: %.4f | %s: "
                "%lld", name, (long long)t->iteration, (long long)epoch, e->loss,
                qa ? "exact match" : "accuracy", e->accuracy,
                qa ? "F1" : cm ? "macro-F1" : "entity F1", e->f1,
                qa ? "questions" : cm ? "examples" : "words", (long long)e->n);
fail:
    return st;
}

static int32_t argmax(const float *z, int64_t K)
{
    int32_t best = 0;
    for (int32_t c = 1; c < K; c++)
        best = z[c] > z[best] ? c : best;
    return best;
}

/* The last stage's predictions and losses of the current micro-batch (rows ft->rows). */
static void take(const pl_train_ft *ft, const pl_ft_split *x, const pl_model *m, double sums[2])
{
    const int64_t B = m->B, T = m->T, K = ft->classes;
    const pl_head_acts *h = &m->mb[0].head;
    for (int64_t b = 0; b < B; b++) {
        const int64_t r = ft->rows[b];
        if (r < 0)
            continue;
        if (ft->task == PL_TASK_SPAN) { /* (T, 2) start and end logits */
            memcpy(ft->qa_logits + r * T * 2, h->tlogits + b * T * 2,
                   (size_t)(T * 2) * sizeof(float));
            sums[0] += m->bin_loss[b];
            sums[1] += 1;
            continue;
        }
        if (ft->task == PL_TASK_REGRESSION) { /* back to the targets' units */
            ft->reg_pred[r] = (double)h->logits[b] * ft->target_std + ft->target_mean;
            sums[0] += m->bin_loss[b];
            sums[1] += 1;
            continue;
        }
        if (ft->task == PL_TASK_SEQUENCE) {
            ft->pred[r] = argmax(h->logits + b * K, K) + 1;
            sums[0] += m->bin_loss[b];
            sums[1] += 1;
            continue;
        }
        for (int64_t k = 0; k < T; k++) {
            if (x->tok.word_pos[r * T + k] >= 0)
                ft->pred[r * T + k] = argmax(h->tlogits + (b * T + k) * K, K) + 1;
            if (x->labels[r * T + k] >= 0) {
                sums[0] += m->loss[b * T + k];
                sums[1] += 1;
            }
        }
    }
}

/* Token classification's figures from the per-position predictions: each word's
 * tag, word accuracy, seqeval's entity scores. */
static pl_status score_tokens(pl_train_ft *ft, const pl_ft_split *x, pl_seqeval_result *se,
                              pl_ft_eval *out)
{
    const int64_t W = x->conll.n_words;
    pl_tokcls_word_preds(&x->tok, ft->pred, W, ft->pred_ids);
    int64_t right = 0;
    for (int64_t w = 0; w < W; w++) {
        if (ft->pred_ids[w] < 1 || ft->pred_ids[w] > ft->classes)
            return pl_errorf(PL_ERR_INTERNAL, "evaluation of %s: word %lld has no prediction",
                             x->path, (long long)w);
        ft->tags[w] = x->conll.tags[w];
        ft->tags[W + w] = ft->labels.names[ft->pred_ids[w] - 1];
        right += strcmp(ft->tags[w], ft->tags[W + w]) == 0;
    }
    for (int64_t i = 0; i < x->conll.n_sent; i++)
        ft->sent_len[i] = x->conll.sent[i].n;
    pl_status st = pl_seqeval_score(se, ft->tags, ft->tags + W, ft->sent_len, x->conll.n_sent);
    if (st)
        return st;
    out->accuracy = W ? (double)right / (double)W : 0.0;
    out->f1 = se->f1;
    out->n = W;
    return PL_OK;
}

/* Question answering's figures: each question's windows decoded (n-best, as
 * run_squad.py's write_predictions) into its answer text, then the official exact
 * match and F1 over every question (unanswered ones count 0). */
static pl_status score_qa(pl_trainer *t, const pl_ft_split *x, pl_squad_eval_result *res,
                          pl_ft_eval *out)
{
    pl_train_ft *ft = t->ft;
    const pl_squad_features *fs = &x->fs;
    const int64_t T = fs->seq_len, n = fs->n;
    const int v2 = ft->fa->version_2_with_negative;
    const pl_squad_decode_config dc = {ft->fa->n_best_size, ft->fa->max_answer_length, v2,
                                       ft->fa->null_score_diff_threshold};
    pl_status st = PL_OK;
    for (int64_t i = 0; i < n * T; i++) {
        ft->qa_start[i] = ft->qa_logits[2 * i];
        ft->qa_end[i] = ft->qa_logits[2 * i + 1];
    }
    for (int64_t q = 0; q < ft->qa_q; q++) {
        pl_free(ft->qa_answers[q]);
        ft->qa_answers[q] = NULL;
        ft->qa_na[q] = INFINITY; /* a question without windows has no answer */
    }
    ft->qa_nbest_json.n = ft->qa_null_odds.n = 0;
    st = pl_bytes_append(&ft->qa_nbest_json, "{", 1);
    if (!st)
        st = pl_bytes_append(&ft->qa_null_odds, "{", 1);
    for (int64_t f = 0, g; f < n && !st; f = g) {
        const int64_t q = fs->f[f].question;
        for (g = f; g < n && fs->f[g].question == q; g++)
            ft->qa_feats[g - f] = g;
        pl_squad_doc doc;
        st = pl_squad_doc_init(&doc, t->tok, x->sq.contexts[x->sq.q[q].context]);
        if (st)
            break;
        st = pl_squad_decode_nbest(t->tok, fs, &doc, ft->qa_feats, g - f, ft->qa_start + f * T,
                                   ft->qa_end + f * T, &dc, &ft->qa_nb);
        pl_squad_doc_free(&doc);
        /* v2.0: the null answer is "" (run_squad.py writes it) */
        if (!st && (ft->qa_nb.pred >= 0 || v2) &&
            !(ft->qa_answers[q] = pl_strdup(ft->qa_nb.pred >= 0 ? pl_squad_nbest_text(&ft->qa_nb, ft->qa_nb.pred) : "")))
            st = pl_errorf(PL_ERR_NOMEM, "SQuAD answer of question %s", x->sq.q[q].id);
        if (!st)
            st = pl_bytes_append(&ft->qa_nbest_json, f ? ",\n " : "\n ", f ? 3 : 2);
        if (!st)
            st = pl_squad_nbest_json(&ft->qa_nb, x->sq.q[q].id, &ft->qa_nbest_json);
        if (!st && v2)
            ft->qa_na[q] = ft->qa_nb.score_diff;
        if (!st && v2) /* null_odds.json: score_diff (Python's Infinity when no span qualified) */
            st = pl_squad_null_odds_json(&ft->qa_nb, x->sq.q[q].id, f ? ",\n " : "\n ", &ft->qa_null_odds);
    }
    if (!st)
        st = pl_bytes_append(&ft->qa_nbest_json, "\n}\n", 3);
    if (!st)
        st = pl_bytes_append(&ft->qa_null_odds, "\n}\n", 3);
    if (!st && v2) {
        /* evaluate-v2.0.py --na-prob-file SPLIT_null_odds.json --na-prob-thresh X */
        st = pl_squad_evaluate_v2_na(&x->sq, (const char *const *)ft->qa_answers, ft->qa_na,
                                     NULL, pl_ft_na_prob_thresh(ft->fa), &ft->qa_v2);
        *res = (pl_squad_eval_result){ft->qa_v2.exact, ft->qa_v2.f1, ft->qa_v2.total, ft->qa_v2.total};
    } else if (!st) {
        st = pl_squad_evaluate(&x->sq, (const char *const *)ft->qa_answers, res);
    }
    out->accuracy = res->exact_match;
    out->f1 = res->f1;
    out->n = x->sq.n_q;
    return st;
}

pl_status pl_ft_evaluate(pl_trainer *t, pl_split s, int64_t epoch, pl_ft_eval *out)
{
    pl_status st = PL_OK;
    pl_train_ft *ft = t->ft;
    const pl_ft_split *x = &ft->split[s];
    const int token = ft->task == PL_TASK_TOKEN, qa = ft->task == PL_TASK_SPAN;
    const int reg = ft->task == PL_TASK_REGRESSION;
    const int64_t B = t->mbs, chunk = B * t->dp, steps = (x->n + chunk - 1) / chunk;
    const int64_t cells = token ? x->n * t->cfg.seq_length : x->n;
    pl_model *m = &t->model;
    pl_cls_metrics cm = {0};
    pl_seqeval_result se = {0};
    pl_squad_eval_result qr = {0};
    double sums[2] = {0, 0}; /* loss, examples or labelled tokens */
    memset(ft->pred, 0, (size_t)cells * sizeof *ft->pred);
    if (reg)
        memset(ft->reg_pred, 0, (size_t)x->n * sizeof *ft->reg_pred);
    if (qa)
        memset(ft->qa_logits, 0, (size_t)(x->n * t->cfg.seq_length * 2) * sizeof(float));
    if (t->zero_stage >= 2)
        PL_TRY(pl_train_zero_begin(t));
    for (int64_t k = 0; k < steps; k++) {
        for (int64_t b = 0; b < B; b++) {
            const int64_t row = k * chunk + t->grid.dp_rank * B + b;
            ft->rows[b] = row < x->n ? row : -1;
        }
        pl_model_use(m, 0);
        pl_ft_data_put(ft, m, s, ft->rows, ft->rows);
        m->training = 0; /* no dropout */
        PL_TRY(forward_pipelined(t, m, (int)k));
        if (m->stage.last)
            take(ft, x, m, sums);
    }
    pl_comm *dp = pl_grid_comm(&t->grid, PL_GRID_DP), *pp = pl_grid_comm(&t->grid, PL_GRID_PP);
    const int64_t nqa = qa ? x->n * t->cfg.seq_length * 2 : 0; /* each value from one rank */
    for (int k = 0; k < (t->grid.layout.pp > 1 ? 2 : 1); k++) { /* then the last stage's to all */
        pl_comm *c = k ? pp : dp;
        PL_TRY(pl_comm_allreduce_i32(c, ft->pred, cells, PL_COMM_SUM));
        PL_TRY(pl_comm_allreduce_f64(c, sums, 2, PL_COMM_SUM));
        if (qa)
            PL_TRY(pl_comm_allreduce_f32(c, ft->qa_logits, nqa, PL_COMM_SUM));
        if (reg)
            PL_TRY(pl_comm_allreduce_f64(c, ft->reg_pred, x->n, PL_COMM_SUM));
    }
    out->loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
    if (reg) {
        PL_TRY(pl_reg_metrics_compute(&out->reg, x->target, ft->reg_pred, x->n));
        out->accuracy = out->reg.pearson; /* the classification columns: unused */
        out->f1 = out->reg.spearman;
        out->n = x->n;
    } else if (qa) {
        PL_TRY(score_qa(t, x, &qr, out));
    } else if (token) {
        PL_TRY(score_tokens(ft, x, &se, out));
    } else {
        for (int64_t i = 0; i < x->n; i++) {
            if (ft->pred[i] < 1 || ft->pred[i] > ft->classes)
                return pl_errorf(PL_ERR_INTERNAL, "evaluation of %s: row %lld has no "
                                 "prediction", x->path, (long long)i);
            ft->pred_ids[i] = ft->pred[i] - 1;
        }
        PL_TRY(pl_cls_metrics_compute(&cm, x->labels, ft->pred_ids, x->n, ft->classes));
        out->accuracy = cm.accuracy;
        out->f1 = cm.macro_f1;
        out->n = x->n;
    }
    if (pl_train_is_root(t))
        PL_TRY(reg ? report_reg(t, s, epoch, out)
                   : report(t, s, epoch, out, token || qa ? NULL : &cm, token ? &se : NULL));
fail:
    pl_cls_metrics_free(&cm);
    pl_seqeval_result_free(&se);
    return st;
}
