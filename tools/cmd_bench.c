/* plait bench: `plait train` on synthetic tokens (unless --data-path is given),
 * reporting tokens/s, MFU against a GEMM peak measured at start, the step
 * breakdown and peak memory; the last line is one JSON object for scripts.
 * Defaults added when not given: --mock-data, --train-iters 10, --lr 1e-4,
 * --eval-iters 0, --log-interval 1. */
#include "commands.h"

#include "train/trainer.h"

#include <stdio.h>
#include <string.h>

static int has(int argc, char **argv, const char *flag)
{
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], flag, strlen(flag)) == 0 &&
            (argv[i][strlen(flag)] == '\0' || argv[i][strlen(flag)] == '='))
            return 1;
    return 0;
}

int plait_cmd_bench(int argc, char **argv)
{
    if (pl_options_wants_help(argc, argv)) {
        pl_command_spec bench = pl_train_cmd; /* plait train's options under bench's name */
        bench.name = "bench";
        bench.summary = "Time a few training steps (tokens/s, MFU, memory) with plait train's "
                        "flags.";
        pl_options_help(&bench, stdout);
        printf("\nplait bench takes plait train's flags; defaults added when not given: "
               "--mock-data, --train-iters 10, --lr 1e-4, --eval-iters 0, --log-interval 1\n");
        return 0;
    }
    static char *extra[][2] = {{"--train-iters", "10"}, {"--lr", "1e-4"},
                               {"--eval-iters", "0"},   {"--log-interval", "1"}};
    char *av[256];
    int ac = 0;
    if (argc > 200)
        return plait_report(pl_errorf(PL_ERR_ARG, "plait bench: too many arguments"));
    for (int i = 0; i < argc; i++)
        av[ac++] = argv[i];
    if (!has(argc, argv, "--data-path") && !has(argc, argv, "--mock-data"))
        av[ac++] = "--mock-data";
    for (size_t k = 0; k < sizeof extra / sizeof *extra; k++)
        if (!has(argc, argv, extra[k][0]) &&
            !(k == 0 && has(argc, argv, "--train-samples"))) {
            av[ac++] = extra[k][0];
            av[ac++] = extra[k][1];
        }
    pl_train_args args;
    pl_status st = pl_train_args_parse(&args, ac, av);
    if (!st)
        args.bench = 1;
    return plait_run_trainer(&args, st);
}
