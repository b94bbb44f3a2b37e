/* libFuzzer target: the DeepSpeed config reader (--deepspeed_config ds.json:
 * src/train/ds_config.c, ds_sched.c) on arbitrary bytes, through
 * pl_train_args_parse with a tiny model's flags and --deepspeed, as plait train
 * reads it. Must accept or refuse without a memory error and free everything.
 * Seeds: fuzz/seeds/fuzz_ds_config/ (configs of the test suites and DeepSpeed's
 * documentation). */
#include "train/args.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int one_input(const uint8_t *data, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ds.json", fuzz_dir());
    fuzz_write(path, data, size);
    char *argv[] = {"--mock-data", "--vocab-size", "100", "--num-layers", "2",
                    "--hidden-size", "16", "--num-attention-heads", "2", "--seq-length", "16",
                    "--train-iters", "10", "--deepspeed", "--deepspeed_config", path, NULL};
    pl_train_args a;
    if (pl_train_args_parse(&a, (int)(sizeof argv / sizeof *argv) - 1, argv) == PL_OK)
        pl_train_args_free(&a);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one_input(data, size);
    fuzz_dir_remove();
    return 0;
}
