/* plait train: parse the flags, run the trainer, turn the status into an exit code. */
#include "commands.h"

#include "train/trainer.h"

int plait_cmd_train(int argc, char **argv)
{
    if (pl_options_wants_help(argc, argv)) {
        pl_options_help(&pl_train_cmd, stdout);
        return 0;
    }
    pl_train_args args;
    pl_status st = pl_train_args_parse(&args, argc, argv);
    if (st)
        return plait_report(st);
    int pargc = 0;
    char **pargv = NULL;
    st = pl_train_run(&args, &pargc, &pargv);
    pl_train_args_free(&args);
    return st ? plait_report(st) : 0;
}
