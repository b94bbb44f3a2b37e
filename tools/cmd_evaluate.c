/* plait evaluate: a fine-tuned checkpoint (plait finetune's, any layout) on labelled
 * files: the same reports and predictions files as plait finetune's evaluations
 * (train/finetune.h). The model's sizes, task, tokenizer and token types come from the
 * checkpoint's manifest unless given as flags; the label map from LOAD/labels.txt (or
 * --labels-file). Runs on any TP/PP/DP layout, like plait train. */
#include "commands.h"

#include "base/alloc.h"
#include "ckpt/checkpoint.h"
#include "ckpt/tools.h"
#include "train/finetune.h"

#include <stdio.h>
#include <string.h>

static pl_status ft_job(void *ctx, pl_train_args *args, pl_dist *dist)
{
    return pl_ft_run(ctx, args, dist);
}

static const char *value_of(char **argv, int argc, const char *flag)
{
    const size_t n = strlen(flag);
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], flag, n) != 0)
            continue;
        if (argv[i][n] == '=')
            return argv[i] + n + 1;
        if (argv[i][n] == 0 && i + 1 < argc)
            return argv[i + 1];
    }
    return NULL;
}

/* The checkpoint's model for every flag the command line lacks: *out holds in's
 * strings and the added ones (in nums and the checkpoint's strings, *strings). */
static pl_status from_checkpoint(pl_ft_args *fa, char **in, int n_in, char ***out, int *n_out,
                                 char nums[8][32], char **strings)
{
    static const char *const tasks[] = {NULL, "text_classification", "token_classification",
                                        "question_answering", "regression"};
    const char *load = value_of(in, n_in, "--load");
    char dir[4096];
    int64_t it;
    pl_model_config c;
    pl_ckpt_meta meta;
    pl_status st = pl_ckpt_resolve(load, -1, dir, sizeof dir, &it);
    if (!st && it == -1)
        st = pl_errorf(PL_ERR_ARG, "--load %s: no checkpoint to evaluate", load);
    if (!st)
        st = pl_ckpt_read_config(dir, it, &c, &meta, strings);
    if (st)
        return st;
    if (c.head.task == PL_TASK_NONE)
        return pl_errorf(PL_ERR_ARG, "--load %s: a pretrained model without a task head; plait "
                                     "evaluate takes plait finetune's checkpoints", load);
    if (!fa->given[pl_options_index(&pl_ft_cmd, "--task")])
        fa->task = tasks[c.head.task];
    char **v = pl_malloc((size_t)(n_in + 24) * sizeof *v);
    if (!v)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    memcpy(v, in, (size_t)n_in * sizeof *v);
    int n = n_in, k = 0;
    const struct {
        const char *flag;
        int64_t value;
    } sizes[] = {{"--num-layers", c.num_layers}, {"--hidden-size", c.hidden},
                 {"--num-attention-heads", c.heads}, {"--ffn-hidden-size", c.ffn_hidden},
                 {"--seq-length", c.seq_length}, {"--max-position-embeddings", c.max_positions},
                 {"--make-vocab-size-divisible-by", c.divisible_by}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (value_of(in, n_in, sizes[i].flag))
            continue;
        snprintf(nums[k], sizeof nums[k], "%lld", (long long)sizes[i].value);
        v[n++] = (char *)sizes[i].flag;
        v[n++] = nums[k++];
    }
    if (!value_of(in, n_in, "--vocab-file") && meta.vocab_file) {
        v[n++] = "--vocab-file";
        v[n++] = (char *)meta.vocab_file;
    }
    if (!value_of(in, n_in, "--tokenizer-type") && meta.tokenizer_type) {
        v[n++] = "--tokenizer-type";
        v[n++] = (char *)meta.tokenizer_type;
    }
    if (c.head.tokentypes == 0)
        v[n++] = "--bert-no-binary-head";
    *out = v;
    *n_out = n;
    return PL_OK;
}

int plait_cmd_evaluate(int argc, char **argv)
{
    if (pl_options_wants_help(argc, argv)) {
        printf("usage: plait evaluate --load FINETUNED_CKPT (--valid-data F | --test-data F) "
               "--results-dir DIR [flags]\n\nplait finetune's data and task flags (not "
               "--train-data, --epochs):\n\n");
        pl_options_help(&pl_ft_cmd, stdout);
        return 0;
    }
    pl_ft_args fa;
    pl_train_args args;
    memset(&args, 0, sizeof args);
    char **rest = NULL, **full = NULL, *strings = NULL, nums[8][32];
    int n_rest = 0, n_full = 0;
    pl_status st = pl_ft_args_parse_evaluate(&fa, argc, argv, &rest, &n_rest);
    if (!st)
        st = from_checkpoint(&fa, rest, n_rest, &full, &n_full, nums, &strings);
    if (!st) {
        st = pl_train_args_parse(&args, n_full, full);
        if (!st && (st = pl_ft_args_check(&fa, &args)))
            pl_train_args_free(&args);
    }
    const int code = plait_run_job(&args, st, ft_job, &fa);
    pl_free(full);
    pl_free(rest);
    pl_free(strings);
    pl_ft_args_free(&fa);
    return code;
}
