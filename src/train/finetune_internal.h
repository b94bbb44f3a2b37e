/* plait finetune's state, shared by src/train/finetune*.c (not a public
 * interface): the task, its label map, the encoded rows of each split, the
 * epoch's shuffle and the evaluation buffers. Everything is planned and
 * allocated before the first step. */
#ifndef PL_TRAIN_FINETUNE_INTERNAL_H
#define PL_TRAIN_FINETUNE_INTERNAL_H

#include "finetune/cls_metrics.h"
#include "finetune/conll.h"
#include "finetune/labels.h"
#include "finetune/reg_metrics.h"
#include "finetune/squad.h"
#include "finetune/squad_eval.h"
#include "finetune/textcls.h"
#include "finetune/tokcls.h"
#include "train/finetune.h"
#include "train/trainer_internal.h"

enum { PL_FT_SPLITS = 3 }; /* PL_SPLIT_TRAIN, PL_SPLIT_VALID, PL_SPLIT_TEST */

/* One split's examples and their encoded rows (n rows of T). */
typedef struct pl_ft_split {
    const char *path;          /* NULL: the split is not given */
    const char *labels_path;   /* token classification in NeMo's format: the labels file */
    pl_textcls_set text;       /* text classification */
    pl_conll_set conll;        /* token classification: the words and tags */
    pl_tokcls_rows tok;        /* token classification: its windows (owns their arrays) */
    pl_squad_set sq;           /* question answering: the questions and contexts */
    pl_squad_features fs;      /* question answering: its windows (owns their arrays) */
    int64_t n;                 /* rows */
    int32_t *ids, *types, *mask; /* n T */
    int32_t *labels;           /* text: n class ids; token: n T (PL_TOKCLS_IGNORE: none);
                                * QA: 2 n, each window's answer start and end positions */
    int64_t n_truncated;       /* text: examples cut; token: sentences split */
    double *target;            /* regression: n targets as in the file (labels: their
                                * standardised values' float bits, pl_head_set_target) */
} pl_ft_split;

/* What an evaluation found (every rank holds the same figures). */
typedef struct pl_ft_eval {
    double loss;               /* mean cross-entropy (per example, or per labelled token) */
    double accuracy;           /* of examples, or of words; QA: exact match (x 100) */
    double f1;                 /* macro-F1 of the classes, seqeval's entity F1, or SQuAD's
                                * F1 (x 100) */
    int64_t n;                 /* examples, words, or questions */
    pl_reg_metrics reg;        /* regression: in the targets' units (loss: standardised) */
} pl_ft_eval;

/* One of the best checkpoints kept (--save-top-k). */
typedef struct pl_ft_best {
    double value;
    int64_t iteration;
    char name[192];            /* its directory under SAVE/checkpoints */
} pl_ft_best;

typedef struct pl_train_ft {
    const pl_ft_args *fa;
    pl_task task;
    int64_t classes;
    pl_ft_labels labels;
    pl_ft_split split[PL_FT_SPLITS];
    int64_t iters_per_epoch;   /* floor(train rows / global batch) */
    int64_t *perm;             /* the shuffle of epoch perm_epoch (train rows) */
    int64_t perm_epoch;        /* -1: none yet */
    uint64_t perm_seed;
    int32_t *pred;             /* evaluation: prediction + 1 of each row (token: of each
                                * row's positions; 0: none) */
    int32_t *pred_ids;         /* evaluation: the predicted class ids of the examples (words) */
    const char **tags;         /* token: 2 x words, the true then the predicted tags */
    int64_t *sent_len;         /* token: words of each sentence */
    float *qa_logits;          /* QA: (windows, T, 2) start and end logits, gathered */
    float *qa_start, *qa_end;  /* QA: (windows, T) each, for the decoder */
    int64_t *qa_feats;         /* QA: window indices */
    char **qa_answers;         /* QA: the decoded answer of each question (NULL: none) */
    double *qa_na;             /* QA, v2.0: each question's score_diff (null_odds.json) */
    int64_t qa_q;              /* QA: entries of qa_answers */
    pl_squad_nbest qa_nb;      /* QA: one question's n-best list (reused) */
    pl_bytes qa_nbest_json;    /* QA: SPLIT_nbest_predictions.json of the last evaluation */
    pl_bytes qa_null_odds;     /* QA, v2.0: SPLIT_null_odds.json of the last evaluation */
    pl_squad_eval_v2_result qa_v2; /* QA, v2.0: the last evaluation's figures */
    double target_mean;        /* regression: the training targets' mean and population */
    double target_std;         /* std; the head learns (target - mean) / std */
    double *reg_pred;          /* regression: each row's prediction (targets' units) */
    int64_t *rows;             /* mbs rows of the micro-batch being filled (-1: padding) */
    pl_head_spec base_head;    /* the flags' heads before the task's (the pretrained model's) */
    const char *dir;           /* --results-dir, else --save */
    const char *load_dir;      /* --load (plait evaluate: the default label map's home) */
    pl_ft_best *best;          /* --save-top-k: the kept checkpoints, best first */
    int64_t n_best;
    int maximize;              /* --monitor-mode max */
    FILE *table;               /* DIR/evaluations.md */
} pl_train_ft;

/* finetune_data.c: reads the split files and the label map (before the model:
 * the head's classes), then encodes them with the model's tokenizer. */
pl_status pl_ft_data_read(pl_train_ft *ft, int root);
pl_status pl_ft_data_encode(pl_train_ft *ft, pl_tokenizer *tok, int64_t T, int64_t mbs);
void pl_ft_data_free(pl_train_ft *ft);
/* What plait evaluate needs besides the weights into dir: labels.txt (classification),
 * target_scale.txt (regression: "mean std", %.17g), nothing (QA). */
pl_status pl_ft_task_files_write(const pl_train_ft *ft, const char *dir);
/* The train row of global sample idx: epoch idx / (iters_per_epoch gbs) shuffled by
 * seed (the same on every rank and in every layout). */
int64_t pl_ft_train_row(pl_train_ft *ft, int64_t idx, int64_t gbs, uint64_t seed);
/* Fills model m's current micro-batch with rows[0..B) of split s (-1: a padding row,
 * label ignored); sample[b] = keys[b] (dropout masks). */
void pl_ft_data_put(const pl_train_ft *ft, pl_model *m, pl_split s, const int64_t *rows,
                    const int64_t *keys);

/* finetune_ckpt.c: the pretrained weights (weights only, any layout) into the task
 * model: every tensor the checkpoint has; the task head (and a pooler the pretrained
 * model lacks) keep their --seed initialisation, named in a log line. */
pl_status pl_ft_load_pretrained(pl_trainer *t, const char *dir);

/* finetune_topk.c (--save-top-k): the kept checkpoints found in SAVE/checkpoints (a
 * resumed run goes on ranking them); after a validation, the checkpoint of this
 * iteration written there when it ranks among the K best (into a temporary directory,
 * renamed once complete; only then is the one it displaces removed). Collective. */
pl_status pl_ft_topk_init(pl_trainer *t);
pl_status pl_ft_topk_update(pl_trainer *t, int64_t epoch, const pl_ft_eval *e);

/* finetune_eval.c: forward over every row of split s (no dropout), predictions and
 * loss gathered to every rank; rank 0 writes the reports (prefix "validation" or
 * "test") and appends to the evaluation table and the metrics file. */
pl_status pl_ft_evaluate(pl_trainer *t, pl_split s, int64_t epoch, pl_ft_eval *out);

#endif
