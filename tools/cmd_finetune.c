/* plait finetune: fine-tuning flags apart from plait train's (train/finetune.h),
 * then the same MPI start, save-directory lock and failure handling as plait
 * train (cmd_train.c), running the fine-tuning job. */
#include "commands.h"

#include "base/alloc.h"
#include "train/finetune.h"

#include <stdio.h>
#include <string.h>

static pl_status ft_job(void *ctx, pl_train_args *args, pl_dist *dist)
{
    return pl_ft_run(ctx, args, dist);
}

int plait_cmd_finetune(int argc, char **argv)
{
    if (pl_options_wants_help(argc, argv)) {
        pl_options_help(&pl_ft_cmd, stdout);
        printf("\nand plait train's flags (model, parallelism, optimizer, schedule, --save, "
               "--load, ...; not --data-path):\n\n");
        pl_options_help(&pl_train_cmd, stdout);
        return 0;
    }
    pl_ft_args fa;
    pl_train_args args;
    memset(&args, 0, sizeof args);
    char **rest = NULL;
    int n_rest = 0;
    pl_status st = pl_ft_args_parse(&fa, argc, argv, &rest, &n_rest);
    if (!st) {
        st = pl_train_args_parse(&args, n_rest, rest);
        if (!st && (st = pl_ft_args_check(&fa, &args)))
            pl_train_args_free(&args);
    }
    const int code = plait_run_job(&args, st, ft_job, &fa);
    pl_free(rest);
    pl_ft_args_free(&fa);
    return code;
}
