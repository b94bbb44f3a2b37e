/* plait finetune's data (train/finetune_internal.h): the split files read and
 * encoded as BERT rows once, before the first step; the micro-batches are
 * copies of rows into the model's slot. The training rows are shuffled once
 * per epoch with a permutation keyed by (--seed, epoch), so a sample's row
 * depends only on its global index: every layout and a resumed run see the
 * same micro-batches (Megatron's finetune shuffles each epoch likewise, with
 * torch's generator). */
#include "train/finetune_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/rng.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const split_flag[PL_FT_SPLITS] = {"--train-data", "--valid-data",
                                                     "--test-data"};

static int ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The reader's spec of path from the flags. */
static pl_status spec_of(const pl_ft_args *fa, const char *path, pl_textcls_spec *sp)
{
    *sp = pl_textcls_spec_default();
    sp->jsonl = fa->data_format ? strcmp(fa->data_format, "jsonl") == 0
                                : ends_with(path, ".jsonl") || ends_with(path, ".json");
    sp->header = fa->header;
    sp->col_label = (int)fa->label_column;
    char *end;
    long a = strtol(fa->text_columns, &end, 10), b = -1;
    if (*end == ',')
        b = strtol(end + 1, &end, 10);
    if (*end || a < 0 || a > 1000 || (b < -1 || b > 1000) || a == b ||
        fa->label_column < -1 || fa->label_column > 1000)
        return pl_errorf(PL_ERR_ARG, "--text-columns %s --label-column %lld: expected A or A,B "
                         "(distinct 0-based columns) and a column or -1 (the last)",
                         fa->text_columns, (long long)fa->label_column);
    sp->col_a = (int)a;
    sp->col_b = (int)b;
    return PL_OK;
}

/* Token classification: CoNLL columns (word first, tag last), or NeMo's text and
 * labels files when a --*-labels file is given. */
static pl_status read_conll(pl_ft_split *x)
{
    if (x->labels_path)
        return pl_conll_read_nemo(&x->conll, x->path, x->labels_path);
    pl_conll_spec sp = pl_conll_spec_default();
    return pl_conll_read(&x->conll, x->path, &sp);
}

/* plait evaluate: the fine-tuned model's target scale, "mean std" in path. */
static pl_status read_scale(pl_train_ft *ft, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return pl_errorf(PL_ERR_IO, "%s: cannot open the target scale (written by plait "
                         "finetune --task regression): %s", path, strerror(errno));
    const int got = fscanf(f, "%lf %lf", &ft->target_mean, &ft->target_std);
    fclose(f);
    if (got != 2 || !isfinite(ft->target_mean) || !(ft->target_std > 0) ||
        !isfinite(ft->target_std))
        return pl_errorf(PL_ERR_FORMAT, "%s: expected 'MEAN STD' (STD > 0)", path);
    return PL_OK;
}

/* Regression: every split's numeric labels; the training split's mean and
 * population std standardise them (plait evaluate: the saved ones). */
static pl_status read_targets(pl_train_ft *ft, int root)
{
    const pl_ft_args *fa = ft->fa;
    for (int s = 0; s < PL_FT_SPLITS; s++) {
        pl_ft_split *x = &ft->split[s];
        if (!x->path)
            continue;
        x->target = pl_malloc((size_t)x->n * sizeof *x->target);
        if (!x->target)
            return pl_errorf(PL_ERR_NOMEM, "out of memory for the targets of %s", x->path);
        pl_status st = pl_reg_targets(&x->text, x->target);
        if (st)
            return pl_error_wrap(st, "%s", split_flag[s]);
    }
    ft->classes = 1;
    if (fa->evaluate_only) {
        char path[4200];
        snprintf(path, sizeof path, "%s/target_scale.txt", ft->load_dir);
        pl_status st = read_scale(ft, path);
        if (st)
            return st;
    } else {
        const pl_ft_split *tr = &ft->split[PL_SPLIT_TRAIN];
        double sum = 0, ss = 0;
        for (int64_t i = 0; i < tr->n; i++)
            sum += tr->target[i];
        ft->target_mean = sum / (double)tr->n;
        for (int64_t i = 0; i < tr->n; i++)
            ss += (tr->target[i] - ft->target_mean) * (tr->target[i] - ft->target_mean);
        ft->target_std = sqrt(ss / (double)tr->n);
        if (!(ft->target_std > 0))
            return pl_errorf(PL_ERR_FORMAT, "--train-data %s: every target is %g; a regression "
                             "needs targets that vary", tr->path, ft->target_mean);
    }
    if (root)
        pl_log_info("%s: targets standardised by mean %.6g, std %.6g; examples: train %lld, "
                    "validation %lld, test %lld", fa->task, ft->target_mean, ft->target_std,
                    (long long)ft->split[0].n, (long long)ft->split[1].n,
                    (long long)ft->split[2].n);
    return PL_OK;
}

pl_status pl_ft_task_files_write(const pl_train_ft *ft, const char *dir)
{
    char path[4200];
    if (ft->task == PL_TASK_SPAN)
        return PL_OK;
    if (ft->task != PL_TASK_REGRESSION) {
        snprintf(path, sizeof path, "%s/labels.txt", dir);
        return pl_ft_labels_write(&ft->labels, path);
    }
    char text[64];
    snprintf(path, sizeof path, "%s/target_scale.txt", dir);
    const int n = snprintf(text, sizeof text, "%.17g %.17g\n", ft->target_mean, ft->target_std);
    pl_status st = pl_file_write_atomic(path, text, (size_t)n);
    return st ? pl_error_wrap(st, "writing %s", path) : PL_OK;
}

pl_status pl_ft_data_read(pl_train_ft *ft, int root)
{
    const pl_ft_args *fa = ft->fa;
    const char *paths[PL_FT_SPLITS] = {fa->train_data, fa->valid_data, fa->test_data};
    const char *lpaths[PL_FT_SPLITS] = {fa->train_labels, fa->valid_labels, fa->test_labels};
    pl_status st = PL_OK;
    ft->task = strcmp(fa->task, "token_classification") == 0  ? PL_TASK_TOKEN
               : strcmp(fa->task, "question_answering") == 0 ? PL_TASK_SPAN
               : strcmp(fa->task, "regression") == 0         ? PL_TASK_REGRESSION
                                                              : PL_TASK_SEQUENCE;
    for (int s = 0; s < PL_FT_SPLITS; s++) {
        pl_ft_split *x = &ft->split[s];
        x->path = paths[s];
        x->labels_path = lpaths[s];
        if (!paths[s])
            continue;
        if (ft->task == PL_TASK_TOKEN) {
            st = read_conll(x);
            x->n = x->conll.n_sent;
        } else if (ft->task == PL_TASK_SPAN) {
            st = pl_squad_read(&x->sq, paths[s]);
            x->n = x->sq.n_q;
            for (int64_t q = 0; !st && !fa->version_2_with_negative && q < x->sq.n_q; q++)
                if (x->sq.q[q].impossible)
                    return pl_errorf(PL_ERR_UNSUPPORTED,
                                     "%s %s: question %s is_impossible: SQuAD v2.0 (unanswerable "
                                     "questions, %lld here) needs --version-2-with-negative",
                                     split_flag[s], paths[s], x->sq.q[q].id, (long long)x->sq.n_impossible);
        } else {
            pl_textcls_spec sp;
            PL_TRY(spec_of(fa, paths[s], &sp));
            st = pl_textcls_read(&x->text, paths[s], &sp);
            x->n = x->text.n;
        }
        if (st)
            return pl_error_wrap(st, "%s", split_flag[s]);
        if (x->n == 0)
            return pl_errorf(PL_ERR_FORMAT, "%s %s: no examples", split_flag[s], paths[s]);
    }
    pl_ft_split *tr = &ft->split[PL_SPLIT_TRAIN];
    if (ft->task == PL_TASK_REGRESSION)
        return read_targets(ft, root);
    if (ft->task == PL_TASK_SPAN) {
        ft->classes = 2; /* start, end */
        if (root)
            pl_log_info("%s: questions: train %lld, validation %lld, test %lld", fa->task,
                        (long long)ft->split[0].n, (long long)ft->split[1].n,
                        (long long)ft->split[2].n);
        return PL_OK;
    }
    if (fa->evaluate_only) { /* the fine-tuned model's ids */
        char path[4200];
        snprintf(path, sizeof path, "%s/labels.txt", ft->load_dir);
        st = pl_ft_labels_read(&ft->labels, fa->labels_file ? fa->labels_file : path);
        if (st)
            return pl_error_wrap(st, "the label map (--labels-file)");
    } else {
        PL_TRY(ft->task == PL_TASK_TOKEN ? pl_conll_labels(&tr->conll, &ft->labels)
                                         : pl_textcls_labels(&tr->text, &ft->labels));
    }
    if (ft->labels.n < 2)
        return pl_errorf(PL_ERR_FORMAT, "%s: %lld distinct label(s); a classification needs "
                         "at least 2", paths[0] ? paths[0] : "the label map",
                         (long long)ft->labels.n);
    ft->classes = ft->labels.n;
    if (root)
        pl_log_info("%s: %lld classes; %s: train %lld, validation %lld, test %lld", fa->task,
                    (long long)ft->classes, ft->task == PL_TASK_TOKEN ? "sentences" : "examples",
                    (long long)ft->split[0].n, (long long)ft->split[1].n,
                    (long long)ft->split[2].n);
fail:
    return st;
}

/* Text classification: one row an example, [CLS] a [SEP] (b [SEP]). */
static pl_status encode_text(pl_train_ft *ft, pl_ft_split *x, pl_tokenizer *tok, int64_t T)
{
    size_t bytes;
    if (pl_mul_size((size_t)x->n, (size_t)T * sizeof(int32_t), &bytes))
        return pl_errorf(PL_ERR_NOMEM, "%s: too many rows", x->path);
    x->ids = pl_malloc(bytes);
    x->types = pl_malloc(bytes);
    x->mask = pl_malloc(bytes);
    x->labels = pl_malloc((size_t)x->n * sizeof *x->labels);
    if (!x->ids || !x->types || !x->mask || !x->labels)
        return pl_errorf(PL_ERR_NOMEM, "out of memory encoding %s", x->path);
    if (ft->task == PL_TASK_REGRESSION) {
        for (int64_t i = 0; i < x->n; i++)
            pl_head_set_target(x->labels + i,
                               (float)((x->target[i] - ft->target_mean) / ft->target_std));
        return pl_textcls_encode_set(tok, &x->text, NULL, T, x->ids, x->types, x->mask, NULL,
                                     &x->n_truncated);
    }
    return pl_textcls_encode_set(tok, &x->text, &ft->labels, T, x->ids, x->types, x->mask,
                                 x->labels, &x->n_truncated);
}

/* Token classification: the windows of pl_tokcls_encode (their arrays borrowed). */
static pl_status encode_tokens(pl_train_ft *ft, pl_ft_split *x, pl_tokenizer *tok, int64_t T)
{
    pl_status st = pl_tokcls_encode(&x->tok, tok, &x->conll, &ft->labels, T);
    if (st)
        return st;
    x->n = x->tok.n;
    x->ids = x->tok.ids;
    x->types = x->tok.types;
    x->mask = x->tok.mask;
    x->labels = x->tok.labels;
    x->n_truncated = x->tok.n_split;
    return PL_OK;
}

/* Question answering: run_squad.py's windows; labels the answer's start and end in each
 * window (0, 0: [CLS] when the answer is outside it). */
static pl_status encode_squad(pl_train_ft *ft, pl_ft_split *x, pl_tokenizer *tok, int64_t T,
                              int training)
{
    const pl_ft_args *fa = ft->fa;
    const pl_squad_config cfg = {T, fa->doc_stride, fa->max_query_length, training};
    pl_status st = pl_squad_features_build(&x->fs, tok, &x->sq, &cfg);
    if (st)
        return st;
    x->n = x->fs.n;
    if (x->n == 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: no question yields a window (answers that do "
                         "not match their context are dropped from training)", x->path);
    x->ids = x->fs.ids;
    x->types = x->fs.types;
    x->mask = x->fs.mask;
    x->labels = pl_malloc((size_t)(2 * x->n) * sizeof *x->labels);
    if (!x->labels)
        return pl_errorf(PL_ERR_NOMEM, "out of memory encoding %s", x->path);
    for (int64_t r = 0; r < x->n; r++) {
        x->labels[2 * r] = (int32_t)x->fs.f[r].start;
        x->labels[2 * r + 1] = (int32_t)x->fs.f[r].end;
    }
    x->n_truncated = x->fs.n_skipped_answers;
    return PL_OK;
}

pl_status pl_ft_data_encode(pl_train_ft *ft, pl_tokenizer *tok, int64_t T, int64_t mbs)
{
    int64_t most = 0, words = 0, sents = 0, qa_rows = 0, qa_q = 0; /* evaluated splits' */
    for (int s = 0; s < PL_FT_SPLITS; s++) {
        pl_ft_split *x = &ft->split[s];
        if (!x->path)
            continue;
        pl_status st = ft->task == PL_TASK_TOKEN  ? encode_tokens(ft, x, tok, T)
                       : ft->task == PL_TASK_SPAN ? encode_squad(ft, x, tok, T, s == PL_SPLIT_TRAIN)
                                                  : encode_text(ft, x, tok, T);
        if (st)
            return pl_error_wrap(st, "%s", split_flag[s]);
        if (s == PL_SPLIT_TRAIN)
            continue;
        const int64_t cells = ft->task == PL_TASK_TOKEN ? x->n * T : x->n;
        most = cells > most ? cells : most;
        words = x->conll.n_words > words ? x->conll.n_words : words;
        sents = x->conll.n_sent > sents ? x->conll.n_sent : sents;
        qa_rows = ft->task == PL_TASK_SPAN && x->n > qa_rows ? x->n : qa_rows;
        qa_q = ft->task == PL_TASK_SPAN && x->sq.n_q > qa_q ? x->sq.n_q : qa_q;
    }
    if (qa_rows) {
        ft->qa_logits = pl_calloc((size_t)(qa_rows * T * 2), sizeof(float));
        ft->qa_start = pl_calloc((size_t)(qa_rows * T * 2), sizeof(float));
        ft->qa_feats = pl_calloc((size_t)qa_rows, sizeof *ft->qa_feats);
        ft->qa_answers = pl_calloc((size_t)qa_q, sizeof *ft->qa_answers);
        ft->qa_na = pl_calloc((size_t)qa_q, sizeof *ft->qa_na);
        if (!ft->qa_logits || !ft->qa_start || !ft->qa_feats || !ft->qa_answers || !ft->qa_na)
            return pl_errorf(PL_ERR_NOMEM, "out of memory for the QA buffers");
        ft->qa_end = ft->qa_start + qa_rows * T;
        ft->qa_q = qa_q;
    }
    const int64_t n_train = ft->split[PL_SPLIT_TRAIN].n;
    const int64_t ids = ft->task == PL_TASK_TOKEN ? words : most;
    ft->perm = pl_malloc((size_t)(n_train > 0 ? n_train : 1) * sizeof *ft->perm);
    ft->pred = pl_calloc((size_t)(most > 0 ? most : 1), sizeof *ft->pred);
    ft->pred_ids = pl_calloc((size_t)(ids > 0 ? ids : 1), sizeof *ft->pred_ids);
    ft->tags = pl_calloc((size_t)(2 * words + 1), sizeof *ft->tags);
    ft->sent_len = pl_calloc((size_t)(sents + 1), sizeof *ft->sent_len);
    ft->rows = pl_malloc((size_t)mbs * sizeof *ft->rows);
    ft->reg_pred = pl_calloc((size_t)(most > 0 ? most : 1), sizeof *ft->reg_pred);
    if (!ft->perm || !ft->pred || !ft->pred_ids || !ft->tags || !ft->sent_len || !ft->rows ||
        !ft->reg_pred)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for the fine-tuning buffers");
    ft->perm_epoch = -1;
    return PL_OK;
}

void pl_ft_data_free(pl_train_ft *ft)
{
    for (int s = 0; s < PL_FT_SPLITS; s++) {
        pl_ft_split *x = &ft->split[s];
        pl_textcls_set_free(&x->text);
        pl_conll_set_free(&x->conll);
        pl_squad_set_free(&x->sq);
        pl_free(x->target);
        if (x->tok.ids) {
            pl_tokcls_rows_free(&x->tok);
        } else if (x->fs.ids) {
            pl_squad_features_free(&x->fs);
            pl_free(x->labels);
        } else {
            pl_free(x->ids);
            pl_free(x->types);
            pl_free(x->mask);
            pl_free(x->labels);
        }
    }
    pl_free(ft->tags);
    pl_free(ft->sent_len);
    for (int64_t q = 0; ft->qa_answers && q < ft->qa_q; q++)
        pl_free(ft->qa_answers[q]);
    pl_free(ft->qa_answers);
    pl_free(ft->qa_na);
    pl_squad_nbest_free(&ft->qa_nb);
    pl_bytes_free(&ft->qa_nbest_json);
    pl_bytes_free(&ft->qa_null_odds);
    pl_free(ft->qa_logits);
    pl_free(ft->qa_start);
    pl_free(ft->qa_feats);
    pl_ft_labels_free(&ft->labels);
    pl_free(ft->perm);
    pl_free(ft->pred);
    pl_free(ft->pred_ids);
    pl_free(ft->rows);
    pl_free(ft->reg_pred);
}

int64_t pl_ft_train_row(pl_train_ft *ft, int64_t idx, int64_t gbs, uint64_t seed)
{
    const int64_t per_epoch = ft->iters_per_epoch * gbs, n = ft->split[PL_SPLIT_TRAIN].n;
    const int64_t epoch = idx / per_epoch;
    if (epoch != ft->perm_epoch || seed != ft->perm_seed) { /* Fisher-Yates keyed by both */
        for (int64_t i = 0; i < n; i++)
            ft->perm[i] = i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(pl_rng_uniform(seed, 0x66740000u + (uint64_t)epoch,
                                                 (uint64_t)i) * (double)(i + 1));
            j = j > i ? i : j;
            const int64_t tmp = ft->perm[i];
            ft->perm[i] = ft->perm[j];
            ft->perm[j] = tmp;
        }
        ft->perm_epoch = epoch;
        ft->perm_seed = seed;
    }
    return ft->perm[idx % per_epoch];
}

void pl_ft_data_put(const pl_train_ft *ft, pl_model *m, pl_split s, const int64_t *rows,
                    const int64_t *keys)
{
    const pl_ft_split *x = &ft->split[s];
    const int64_t T = m->T;
    const int token = ft->task == PL_TASK_TOKEN;
    for (int64_t n = 0; n < m->N; n++)
        m->targets[n] = -1;
    for (int64_t b = 0; b < m->B; b++) {
        const int64_t r = rows[b] >= 0 ? rows[b] : 0; /* padding: a real row, ignored */
        memcpy(m->tokens + b * T, x->ids + r * T, (size_t)T * sizeof *m->tokens);
        if (m->types)
            memcpy(m->types + b * T, x->types + r * T, (size_t)T * sizeof *m->types);
        int32_t len = 0;
        for (int64_t k = 0; k < T; k++)
            len += x->mask[r * T + k] != 0;
        if (m->lengths)
            m->lengths[b] = len;
        if (token && rows[b] >= 0) /* the first sub-token of each word */
            for (int64_t k = 0; k < T; k++)
                m->targets[b * T + k] = x->labels[r * T + k] >= 0 ? x->labels[r * T + k] : -1;
        else if (ft->task == PL_TASK_SPAN) /* starts, then ends */
            for (int e = 0; e < 2; e++)
                m->labels[e * m->B + b] = rows[b] >= 0 ? x->labels[2 * r + e] : -1;
        else if (ft->task == PL_TASK_REGRESSION && rows[b] < 0) /* NaN: ignored */
            pl_head_set_target(m->labels + b, NAN);
        else if (!token)
            m->labels[b] = rows[b] >= 0 ? x->labels[r] : -1;
        m->sample[b] = keys[b];
    }
}

void pl_train_ft_apply_task(const pl_trainer *t, pl_model_config *c)
{
    t->ft->base_head = c->head;
    pl_model_set_task(c, t->ft->task, t->ft->classes);
    c->head_dropout = (float)pl_ft_fc_dropout(t->ft->fa, PL_TASK_POOLED(t->ft->task),
                                              c->hidden_dropout);
}

pl_status pl_train_ft_fill(pl_trainer *t, pl_split s, const int64_t *idx)
{
    pl_train_ft *ft = t->ft;
    for (int64_t b = 0; b < t->mbs; b++)
        ft->rows[b] = s == PL_SPLIT_TRAIN ? pl_ft_train_row(ft, idx[b], t->gbs, (uint64_t)t->a->seed)
                                          : idx[b];
    pl_ft_data_put(ft, &t->model, s, ft->rows, idx);
    return PL_OK;
}
