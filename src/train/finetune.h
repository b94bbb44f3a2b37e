/* plait finetune: a task head on a pretrained BERT, trained on labelled files
 * (Megatron's tasks/finetune_utils.py and NeMo's text classification, with
 * their flags), evaluated on a validation set as it trains and on a test set at
 * the end.
 *
 * The command takes `plait train`'s flags (model sizes, parallelism, optimizer,
 * schedule, --save, --load, ...) and the flags below, which belong to
 * fine-tuning alone. Data comes from the task files, never from --data-path.
 * docs/finetune.md says what each task reads and writes. */
#ifndef PL_TRAIN_FINETUNE_H
#define PL_TRAIN_FINETUNE_H

#include "parallel/dist.h"
#include "train/args.h"

typedef struct pl_ft_args {
    const char *task;             /* text_classification | token_classification |
                                   * question_answering */
    const char *train_data;       /* Megatron's --train-data */
    const char *valid_data;       /* Megatron's --valid-data */
    const char *test_data;
    const char *train_labels, *valid_labels, *test_labels; /* NeMo's token-classification
                                                            * labels_*.txt beside text_*.txt */
    int64_t epochs;               /* 0: --train-iters instead */
    const char *pretrained_checkpoint;
    const char *data_format;      /* tsv | jsonl; NULL: from each file's extension */
    const char *text_columns;     /* TSV: "A" or "A,B" (0-based) */
    int64_t label_column;         /* TSV: -1 for the last field */
    int header;                   /* TSV: the first line is a header */
    const char *results_dir;      /* metrics, reports, predictions (default --save) */
    const char *labels_file;      /* plait evaluate: the label map (default LOAD/labels.txt) */
    int evaluate_only;            /* plait evaluate: no training, the loaded model evaluated */
    char *metrics_path;           /* plait evaluate: RESULTS/metrics.jsonl (owned) */
    int64_t doc_stride, max_query_length, n_best_size, max_answer_length; /* QA (NeMo's) */
    int save_qa_logits;           /* QA: write SPLIT_qa_logits.bin with the predictions */
    int version_2_with_negative;  /* QA: SQuAD v2.0 */
    double null_score_diff_threshold; /* QA, v2.0 (0.0) */
    double na_prob_thresh;        /* QA, v2.0: --na-prob-thresh (pl_ft_na_prob_thresh) */
    double fc_dropout;            /* --fc-dropout: the task head's input dropout (given[]
                                   * says whether given: pl_ft_fc_dropout) */
    int64_t save_top_k;           /* NeMo's checkpoint_callback_params.save_top_k (0: none) */
    const char *monitor;          /* val_loss | val_acc | val_f1 | val_em */
    const char *monitor_mode;     /* min | max; NULL: min for val_loss, else max */
    unsigned char given[32];
} pl_ft_args;

extern const pl_command_spec pl_ft_cmd;

/* Splits the command's argv: the flags of pl_ft_cmd are parsed into *fa, every
 * other one is left for plait train's parser in *rest (a pl_malloc'd array of
 * argv's strings and of constant strings: what fine-tuning implies, --mock-data
 * and, with --epochs, a --train-iters the run replaces; --model bert and
 * --tokenizer-type BertWordPieceLowerCase when not given). Errors name the flag. */
pl_status pl_ft_args_parse(pl_ft_args *fa, int argc, char **argv, char ***rest, int *n_rest);
/* plait evaluate's: the same flags, no training (--lr 0, --finetune and one placeholder
 * iteration implied; the model's sizes are the caller's to add from the checkpoint). */
pl_status pl_ft_args_parse_evaluate(pl_ft_args *fa, int argc, char **argv, char ***rest,
                                    int *n_rest);
void pl_ft_args_free(pl_ft_args *fa);

/* The task head's input dropout: --fc-dropout when given, else hidden_dropout for
 * the pooled heads (pooled: text classification, regression; Megatron's
 * Classification) and 0 for the token and span heads (NeMo's TokenClassifier). */
double pl_ft_fc_dropout(const pl_ft_args *fa, int pooled, double hidden_dropout);

/* SQuAD v2.0's --na-prob-thresh: the flag when given, else --null-score-diff-threshold. */
double pl_ft_na_prob_thresh(const pl_ft_args *fa);

/* Checks the two sets of flags against each other (after both parsed). */
pl_status pl_ft_args_check(const pl_ft_args *fa, const pl_train_args *a);

/* Runs a fine-tuning job on the processes of dist (MPI initialised by the
 * caller). a->train_iters is set here when --epochs gives the length. With
 * fa->evaluate_only (plait evaluate) the fine-tuned checkpoint of --load is
 * evaluated on the validation and test files, with its label map (--labels-file,
 * default LOAD/labels.txt, which plait finetune writes into SAVE and each kept
 * checkpoint). Returns this rank's first error, as pl_train_run. */
pl_status pl_ft_run(const pl_ft_args *fa, pl_train_args *a, pl_dist *dist);

#endif
