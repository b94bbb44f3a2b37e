/* plait finetune's own flags (train/finetune.h) and the split of its command
 * line between them and plait train's. */
#include "train/finetune.h"

#include "base/alloc.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define F(field) offsetof(pl_ft_args, field)

static const pl_option ft_options[] = {
    {"--task", PL_OPT_CHOICE, "text_classification", F(task),
     "the task and its head: text_classification (TSV / JSON lines; pooler + "
     "classification_head on [CLS]; accuracy, macro-F1) or token_classification (CoNLL "
     "columns or NeMo's text/labels files; classifier.mlp.layer0 on every first sub-token; "
     "word accuracy, seqeval's entity F1) or question_answering (SQuAD v1.1 JSON; start and "
     "end logits from classifier.mlp.layer0; n-best span decoding; exact match and F1 of "
     "the official evaluate-v1.1.py) or regression (TSV / JSON lines with a numeric label "
     "column; pooler + classification_head with one row, mean squared error on the targets "
     "standardised by the training split's mean and std; MSE, RMSE, MAE, Pearson, "
     "Spearman)", "text_classification|token_classification|question_answering|regression",
     0},
    {"--train-data", PL_OPT_STRING, NULL, F(train_data),
     "labelled training file (Megatron's --train-data; NeMo's model.train_ds.file_path)", NULL,
     0},
    {"--valid-data", PL_OPT_STRING, NULL, F(valid_data),
     "labelled validation file, evaluated every --eval-interval iterations and at each "
     "epoch's end (NeMo's model.validation_ds.file_path)", NULL, 0},
    {"--test-data", PL_OPT_STRING, NULL, F(test_data),
     "labelled test file, evaluated once at the end (NeMo's model.test_ds.file_path)", NULL, 0},
    {"--train-labels", PL_OPT_STRING, NULL, F(train_labels),
     "token_classification in NeMo's format: labels_train.txt (--train-data is text_train.txt)",
     NULL, 0},
    {"--valid-labels", PL_OPT_STRING, NULL, F(valid_labels),
     "NeMo's labels file of --valid-data", NULL, 0},
    {"--test-labels", PL_OPT_STRING, NULL, F(test_labels), "NeMo's labels file of --test-data",
     NULL, 0},
    {"--epochs", PL_OPT_INT, NULL, F(epochs),
     "passes over the training file (Megatron's --epochs; NeMo's trainer.max_epochs); each "
     "is floor(examples / global batch) iterations, shuffled by --seed; or --train-iters",
     NULL, 0},
    {"--pretrained-checkpoint", PL_OPT_STRING, NULL, F(pretrained_checkpoint),
     "plait BERT checkpoint whose weights start the run (any TP/PP layout; the task head "
     "from --seed), when --load holds no fine-tuning checkpoint (Megatron's flag)", NULL, 0},
    {"--data-format", PL_OPT_CHOICE, NULL, F(data_format),
     "tsv or jsonl (default: jsonl for files ending .jsonl or .json, else tsv)", "tsv|jsonl", 0},
    {"--text-columns", PL_OPT_STRING, "0", F(text_columns),
     "TSV: 0-based column of the text, or A,B for sentence pairs", NULL, 0},
    {"--label-column", PL_OPT_INT, "-1", F(label_column),
     "TSV: 0-based column of the label (-1: the last field)", NULL, 0},
    {"--header", PL_OPT_BOOL, NULL, F(header), "TSV: skip the first line of each file", NULL, 0},
    {"--doc-stride", PL_OPT_INT, "128", F(doc_stride),
     "question_answering: context tokens between the starts of consecutive windows", NULL, 0},
    {"--max-query-length", PL_OPT_INT, "64", F(max_query_length),
     "question_answering: question tokens kept", NULL, 0},
    {"--n-best-size", PL_OPT_INT, "20", F(n_best_size),
     "question_answering: start and end candidates per window in decoding", NULL, 0},
    {"--max-answer-length", PL_OPT_INT, "30", F(max_answer_length),
     "question_answering: longest answer span in tokens", NULL, 0},
    {"--version-2-with-negative", PL_OPT_BOOL, NULL, F(version_2_with_negative),
     "question_answering: SQuAD v2.0 (is_impossible questions; the null answer by "
     "--null-score-diff-threshold; evaluate-v2.0.py's exact / f1)", NULL, 0},
    {"--null-score-diff-threshold", PL_OPT_FLOAT, "0.0", F(null_score_diff_threshold),
     "question_answering, SQuAD v2.0: predict no answer when the null score minus the best "
     "span's exceeds this", NULL, 0},
    {"--na-prob-thresh", PL_OPT_FLOAT, NULL, F(na_prob_thresh),
     "question_answering, SQuAD v2.0: evaluate-v2.0.py's --na-prob-thresh, applied to the "
     "null odds (score_diff) as its --na-prob-file: a question whose score_diff exceeds it "
     "scores as a no-answer prediction (default: --null-score-diff-threshold, which leaves "
     "the predictions' figures unchanged; the script's own default is 1.0)", NULL, 0},
    {"--save-qa-logits", PL_OPT_BOOL, NULL, F(save_qa_logits),
     "question_answering: also write SPLIT_qa_logits.bin, the start and end logits of every "
     "window (float32 [window][start|end][seq-length], windows in feature order)", NULL, 0},
    {"--fc-dropout", PL_OPT_FLOAT, NULL, F(fc_dropout),
     "dropout probability on the task head's input while training (NeMo's head.fc_dropout / "
     "token_classifier.dropout); default: --hidden-dropout for text_classification and "
     "regression (Megatron's Classification drops the pooled output with it), 0 for "
     "token_classification and question_answering (NeMo's TokenClassifier default)", NULL, 0},
    {"--save-top-k", PL_OPT_INT, "0", F(save_top_k),
     "keep the K best checkpoints by --monitor in SAVE/checkpoints/, each named after its "
     "figure (bert--val_loss=0.3500-epoch=0-step=50); SAVE itself keeps the last for resuming "
     "(NeMo's save_top_k and save_last)", NULL, 0},
    {"--monitor", PL_OPT_CHOICE, "val_loss", F(monitor),
     "the validation figure --save-top-k ranks by (val_em: question_answering's exact match; "
     "val_rmse, val_mae, val_pearson, val_spearman: regression's)",
     "val_loss|val_acc|val_f1|val_em|val_rmse|val_mae|val_pearson|val_spearman", 0},
    {"--monitor-mode", PL_OPT_CHOICE, NULL, F(monitor_mode),
     "min or max of --monitor is best (NeMo's mode; default min for val_loss, val_rmse and "
     "val_mae, else max)",
     "min|max", 0},
    {"--labels-file", PL_OPT_STRING, NULL, F(labels_file),
     "plait evaluate: the label map, one label a line (default LOAD/labels.txt, written by "
     "plait finetune)", NULL, 0},
    {"--results-dir", PL_OPT_STRING, NULL, F(results_dir),
     "where evaluation tables, per-class reports and predictions go (default --save)", NULL, 0},
};

const pl_command_spec pl_ft_cmd = {
    "finetune",
    "Fine-tune a plait BERT checkpoint on a labelled task (Megatron's tasks/main.py, NeMo's "
    "text classification). Takes plait train's flags too.",
    ft_options, (int)(sizeof ft_options / sizeof *ft_options), 0};

/* The option of ours that argv word w ("--x" or "--x=v") names, or NULL. */
static const pl_option *ours(const char *w)
{
    if (strncmp(w, "--", 2) != 0)
        return NULL;
    const char *eq = strchr(w, '=');
    const size_t n = eq ? (size_t)(eq - w) : strlen(w);
    for (int i = 0; i < pl_ft_cmd.n_options; i++)
        if (strlen(ft_options[i].name) == n && strncmp(ft_options[i].name, w, n) == 0)
            return &ft_options[i];
    return NULL;
}

static int present(char **argv, int argc, const char *flag)
{
    const size_t n = strlen(flag);
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], flag, n) == 0 && (argv[i][n] == 0 || argv[i][n] == '='))
            return 1;
    return 0;
}

static pl_status parse(pl_ft_args *fa, int argc, char **argv, char ***rest, int *n_rest,
                       int evaluate);

static int present(char **argv, int argc, const char *flag);

/* --results-dir without --save or --metrics-file: the metrics file goes beside the
 * reports (RESULTS/metrics.jsonl), appended to other[*n]. */
static pl_status results_metrics(pl_ft_args *fa, char **other, int *n)
{
    if (!fa->results_dir || present(other, *n, "--metrics-file") || present(other, *n, "--save"))
        return PL_OK;
    const size_t len = strlen(fa->results_dir) + 16;
    fa->metrics_path = pl_malloc(len);
    if (!fa->metrics_path)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    snprintf(fa->metrics_path, len, "%s/metrics.jsonl", fa->results_dir);
    other[(*n)++] = "--metrics-file";
    other[(*n)++] = fa->metrics_path;
    return PL_OK;
}

pl_status pl_ft_args_parse(pl_ft_args *fa, int argc, char **argv, char ***rest, int *n_rest)
{
    return parse(fa, argc, argv, rest, n_rest, 0);
}

pl_status pl_ft_args_parse_evaluate(pl_ft_args *fa, int argc, char **argv, char ***rest,
                                    int *n_rest)
{
    return parse(fa, argc, argv, rest, n_rest, 1);
}

static pl_status parse(pl_ft_args *fa, int argc, char **argv, char ***rest, int *n_rest,
                       int evaluate)
{
    memset(fa, 0, sizeof *fa);
    _Static_assert(sizeof ft_options / sizeof *ft_options <= sizeof fa->given, "given[] too small");
    *rest = NULL;
    *n_rest = 0;
    char **mine = pl_malloc((size_t)(argc + 1) * sizeof *mine);
    char **other = pl_malloc((size_t)(argc + 12) * sizeof *other);
    if (!mine || !other) {
        pl_free(mine);
        pl_free(other);
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    }
    int nm = 0, no = 0;
    for (int i = 0; i < argc; i++) {
        const pl_option *o = ours(argv[i]);
        char **dst = o ? mine : other;
        int *n = o ? &nm : &no;
        dst[(*n)++] = argv[i];
        if (o && o->type != PL_OPT_BOOL && !strchr(argv[i], '=') && i + 1 < argc)
            dst[(*n)++] = argv[++i];
    }
    pl_status st = pl_options_parse(&pl_ft_cmd, fa, nm, mine, fa->given);
    pl_free(mine);
    if (st) {
        pl_free(other);
        return st;
    }
    fa->evaluate_only = evaluate;
    if (evaluate) {
        static char *implied_eval[] = {"--mock-data", "--train-iters", "1", "--lr", "0",
                                       "--finetune", "--model", "bert"};
        if (fa->train_data || fa->epochs || present(other, no, "--train-iters") ||
            !present(other, no, "--load")) {
            pl_free(other);
            return pl_errorf(PL_ERR_ARG, "plait evaluate: give --load (a fine-tuned checkpoint) "
                                         "and --valid-data and/or --test-data; not --train-data, "
                                         "--epochs or --train-iters");
        }
        const int lr = present(other, no, "--lr");
        other[no++] = implied_eval[0]; /* nothing reads --data-path */
        other[no++] = implied_eval[1]; /* nothing trains: one placeholder iteration */
        other[no++] = implied_eval[2];
        if (!lr) {
            other[no++] = implied_eval[3];
            other[no++] = implied_eval[4];
        }
        other[no++] = implied_eval[5]; /* the weights only; no schedule to match */
        if ((st = results_metrics(fa, other, &no))) {
            pl_free(other);
            return st;
        }
        if (!present(other, no, "--model")) {
            other[no++] = implied_eval[6];
            other[no++] = implied_eval[7];
        }
        *rest = other;
        *n_rest = no;
        return PL_OK;
    }
    if (present(other, no, "--data-path") || present(other, no, "--mock-data")) {
        pl_free(other);
        return pl_errorf(PL_ERR_ARG, "plait finetune: the data comes from --train-data, "
                                     "--valid-data and --test-data, not --data-path or "
                                     "--mock-data");
    }
    const int iters = present(other, no, "--train-iters");
    if ((fa->epochs > 0) == iters || fa->epochs < 0 || present(other, no, "--train-samples")) {
        pl_free(other);
        return pl_errorf(PL_ERR_ARG, "plait finetune: give exactly one of --epochs (positive) "
                                     "and --train-iters");
    }
    if ((st = results_metrics(fa, other, &no))) {
        pl_free(other);
        return st;
    }
    static char *implied[] = {"--mock-data", "--train-iters", "1000000000", "--model", "bert",
                              "--tokenizer-type", "BertWordPieceLowerCase"};
    other[no++] = implied[0]; /* nothing reads --data-path: the task's rows are the data */
    if (!iters) { /* replaced once the training file's size is known (pl_ft_run) */
        other[no++] = implied[1];
        other[no++] = implied[2];
    }
    if (!present(other, no, "--model")) {
        other[no++] = implied[3];
        other[no++] = implied[4];
    }
    if (!present(other, no, "--tokenizer-type")) {
        other[no++] = implied[5];
        other[no++] = implied[6];
    }
    *rest = other;
    *n_rest = no;
    return PL_OK;
}

double pl_ft_na_prob_thresh(const pl_ft_args *fa)
{
    const pl_option *o = ours("--na-prob-thresh");
    return o && fa->given[o - ft_options] ? fa->na_prob_thresh : fa->null_score_diff_threshold;
}

double pl_ft_fc_dropout(const pl_ft_args *fa, int pooled, double hidden_dropout)
{
    const pl_option *o = ours("--fc-dropout");
    if (o && fa->given[o - ft_options])
        return fa->fc_dropout;
    return pooled ? hidden_dropout : 0.0;
}

void pl_ft_args_free(pl_ft_args *fa)
{
    pl_options_free(&pl_ft_cmd, fa);
    pl_free(fa->metrics_path);
    fa->metrics_path = NULL;
}

pl_status pl_ft_args_check(const pl_ft_args *fa, const pl_train_args *a)
{
    if (strcmp(a->model, "bert") != 0)
        return pl_errorf(PL_ERR_ARG, "plait finetune: --model %s: fine-tuning heads exist for "
                                     "--model bert only", a->model);
    if (!a->vocab_file)
        return pl_errorf(PL_ERR_ARG, "plait finetune: --vocab-file is required (the BERT "
                                     "WordPiece vocabulary the checkpoint was trained with)");
    if (strncmp(a->tokenizer_type, "BertWordPiece", 13) != 0)
        return pl_errorf(PL_ERR_ARG, "plait finetune: --tokenizer-type %s: expected "
                                     "BertWordPieceLowerCase or BertWordPieceCase",
                         a->tokenizer_type);
    if (!fa->evaluate_only && !fa->train_data)
        return pl_errorf(PL_ERR_ARG, "plait finetune: --train-data is required");
    if (fa->evaluate_only && !fa->valid_data && !fa->test_data)
        return pl_errorf(PL_ERR_ARG, "plait evaluate: give --valid-data and/or --test-data");
    if (fa->evaluate_only && !fa->results_dir)
        return pl_errorf(PL_ERR_ARG, "plait evaluate: --results-dir is required (where the "
                                     "reports and predictions go)");
    if (!fa->results_dir && !a->save)
        return pl_errorf(PL_ERR_ARG, "plait finetune: give --results-dir or --save (where the "
                                     "evaluation reports go)");
    if (fa->doc_stride < 1 || fa->max_query_length < 1 || fa->n_best_size < 1 ||
        fa->max_answer_length < 1)
        return pl_errorf(PL_ERR_ARG, "plait finetune: --doc-stride, --max-query-length, "
                                     "--n-best-size and --max-answer-length must be positive");
    if ((fa->train_labels || fa->valid_labels || fa->test_labels) &&
        strcmp(fa->task, "token_classification") != 0)
        return pl_errorf(PL_ERR_ARG, "plait finetune: --train-labels, --valid-labels and "
                                     "--test-labels are NeMo's token-classification files "
                                     "(--task token_classification)");
    const int qa = strcmp(fa->task, "question_answering") == 0;
    if (!qa && (fa->version_2_with_negative || fa->save_qa_logits))
        return pl_errorf(PL_ERR_ARG, "plait finetune: --%s is for --task question_answering, not %s",
                         fa->version_2_with_negative ? "version-2-with-negative" : "save-qa-logits", fa->task);
    const pl_option *nt = ours("--na-prob-thresh");
    if (nt && fa->given[nt - ft_options] && !fa->version_2_with_negative)
        return pl_errorf(PL_ERR_ARG, "plait finetune: --na-prob-thresh is for SQuAD v2.0 "
                                     "(--task question_answering --version-2-with-negative)");
    if (fa->fc_dropout < 0 || fa->fc_dropout >= 1)
        return pl_errorf(PL_ERR_ARG, "plait finetune: --fc-dropout %g: expected a probability "
                         "in [0, 1)", fa->fc_dropout);
    if (fa->save_top_k < 0 || (fa->save_top_k > 0 && (!a->save || !fa->valid_data)))
        return pl_errorf(PL_ERR_ARG, "plait finetune: --save-top-k %lld needs --save and "
                         "--valid-data (and K >= 0)", (long long)fa->save_top_k);
    const int reg = strcmp(fa->task, "regression") == 0;
    const int reg_monitor = strcmp(fa->monitor, "val_rmse") == 0 ||
                            strcmp(fa->monitor, "val_mae") == 0 ||
                            strcmp(fa->monitor, "val_pearson") == 0 ||
                            strcmp(fa->monitor, "val_spearman") == 0;
    if (reg && strcmp(fa->monitor, "val_loss") != 0 && !reg_monitor)
        return pl_errorf(PL_ERR_ARG, "plait finetune: --monitor %s: regression reports val_loss, "
                         "val_rmse, val_mae, val_pearson and val_spearman", fa->monitor);
    if (!reg && (reg_monitor || (qa && strcmp(fa->monitor, "val_acc") == 0) ||
                 (!qa && strcmp(fa->monitor, "val_em") == 0)))
        return pl_errorf(PL_ERR_ARG, "plait finetune: --monitor %s: %s reports val_loss, %s and "
                         "val_f1", fa->monitor, fa->task, qa ? "val_em" : "val_acc");
    if (a->pp_chunks > 1)
        return pl_errorf(PL_ERR_ARG, "plait finetune: interleaved pipelining (virtual stages) "
                                     "is not supported for fine-tuning");
    if (a->load && a->finetune && fa->pretrained_checkpoint)
        return pl_errorf(PL_ERR_ARG, "plait finetune: --load %s --finetune and "
                                     "--pretrained-checkpoint %s both name the pretrained "
                                     "weights: give one", a->load, fa->pretrained_checkpoint);
    return PL_OK;
}
