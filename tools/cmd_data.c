/* plait data SUBCOMMAND: inspect, index, build-vocab, smiles-augment. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} data_commands[] = {
    {"inspect", plait_data_inspect,
     "print counts, dtype, length statistics and the first document of PREFIX"},
    {"index", plait_data_index,
     "build (or reuse) the GPT sample indices Megatron would build, and print a summary"},
    {"build-vocab", plait_data_build_vocab, "build a SMILES vocabulary from a corpus"},
    {"smiles-augment", plait_data_smiles_augment,
     "write each SMILES of a file from random atom orders (same molecule, stereo kept)"},
};

static void usage(FILE *fp)
{
    fprintf(fp, "usage: plait data COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof data_commands / sizeof *data_commands; i++)
        fprintf(fp, "  %-14s %s\n", data_commands[i].name, data_commands[i].summary);
}

int plait_cmd_data(int argc, char **argv)
{
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof data_commands / sizeof *data_commands; i++)
        if (strcmp(argv[0], data_commands[i].name) == 0)
            return data_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "plait: error: unknown command 'data %s'\n", argv[0]);
    usage(stderr);
    return 2;
}
