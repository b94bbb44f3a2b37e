/* plait: the command-line tool. Dispatches to subcommands; the only place
 * (with the other files in tools/) that turns a pl_status into an exit code. */
#include "commands.h"

#include "base/alloc.h"
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"preprocess", plait_cmd_preprocess,
     "tokenize text into Megatron .bin/.idx datasets (tools/preprocess_data.py)"},
    {"data", plait_cmd_data, "inspect datasets, build sample indices and vocabularies"},
    {"train", plait_cmd_train, "train a GPT with Megatron-LM's flags (pretrain_gpt.py)"},
    {"finetune", plait_cmd_finetune,
     "fine-tune a BERT checkpoint on a labelled task (Megatron's tasks/main.py, NeMo)"},
    {"evaluate", plait_cmd_evaluate,
     "evaluate a fine-tuned checkpoint on labelled files: metrics, reports, predictions"},
    {"generate", plait_cmd_generate, "generate text from a checkpoint"},
    {"seq2seq", plait_cmd_seq2seq, "decode an encoder-decoder checkpoint (t5, bart): greedy or sampled"},
    {"ckpt", plait_cmd_ckpt, "inspect, reshard or convert a checkpoint (offline)"},
    {"bench", plait_cmd_bench, "measure training speed on synthetic tokens: tokens/s, MFU, step breakdown"},
    {"launch", plait_cmd_launch,
     "start a command on many ranks from torchrun/deepspeed flags (mpirun, or srun in Slurm)"},
};

static void usage(FILE *fp)
{
    fprintf(fp, "usage: plait [--version] [--help] COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        fprintf(fp, "  %-12s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(fp, "\n'plait COMMAND --help' lists a command's flags.\n");
}

/* The exit codes, one per kind of failure (docs/reliability.md, "Exit codes");
 * everything not listed (I/O failures, memory, internal errors) is 1. */
static const struct {
    pl_status st;
    int code;
} exit_codes[] = {
    {PL_ERR_ARG, PLAIT_EXIT_USAGE},
    {PL_ERR_FORMAT, PLAIT_EXIT_INPUT},
    {PL_ERR_STOPPED, PLAIT_EXIT_STOPPED},
};

int plait_exit_code(pl_status st)
{
    if (st == PL_OK)
        return 0;
    for (size_t i = 0; i < sizeof exit_codes / sizeof *exit_codes; i++)
        if (exit_codes[i].st == st)
            return exit_codes[i].code;
    return PLAIT_EXIT_FAILURE;
}

int plait_report(pl_status st)
{
    const char *msg = pl_error_msg();
    fprintf(stderr, "plait: error: %s\n", *msg ? msg : pl_status_str(st));
    return plait_exit_code(st);
}

int plait_parse(const pl_command_spec *cmd, void *opts, int argc, char **argv,
                unsigned char *given)
{
    if (pl_options_wants_help(argc, argv)) {
        pl_options_help(cmd, stdout);
        return 0;
    }
    pl_status st = pl_options_parse(cmd, opts, argc, argv, given);
    if (st != PL_OK)
        return plait_report(st);
    return -1;
}

/* Allocation fault injection for tests (docs/reliability.md): PLAIT_FAIL_ALLOC_AT=N
 * (N >= 1) makes the N-th call of the allocation hook fail, and every later one. With it,
 * or with PLAIT_ALLOC_REPORT=1, the command's allocation calls and the blocks still live
 * when it returns are printed to stderr (one line, "plait: allocations: ..."). Returns
 * whether to report. */
static int alloc_faults_from_env(void)
{
    const char *at = getenv("PLAIT_FAIL_ALLOC_AT"), *rep = getenv("PLAIT_ALLOC_REPORT");
    if (at && *at) {
        char *end;
        const long long n = strtoll(at, &end, 10);
        if (*end || n < 1) {
            fprintf(stderr, "plait: error: PLAIT_FAIL_ALLOC_AT=%s: expected an integer >= 1\n",
                    at);
            exit(2);
        }
        pl_alloc_fail_after(n - 1);
        return 1;
    }
    return rep && strcmp(rep, "1") == 0;
}

static int run_command(const subcommand *c, int argc, char **argv, int report)
{
    const int rc = c->run(argc, argv);
    if (report)
        fprintf(stderr, "plait: allocations: %lld calls, %lld blocks live at exit\n",
                (long long)pl_alloc_calls(), (long long)pl_alloc_live());
    return rc;
}

int main(int argc, char **argv)
{
    const int report = alloc_faults_from_env();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("plait %s\n", pl_version());
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0)
            return run_command(&subcommands[i], argc - 2, argv + 2, report);
    fprintf(stderr, "plait: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
