/* libFuzzer target: plait train's option parser (pl_train_args_parse: the option
 * table, Megatron's legacy flags, the checks) on arbitrary command lines. The input
 * is split at newlines into at most 64 arguments. A --config or --deepspeed_config
 * naming a file reads it (the DeepSpeed config has its own target). Must accept or
 * refuse without a memory error, and free everything (LeakSanitizer). Seeds:
 * fuzz/seeds/fuzz_train_args/ (command lines of the test suites). */
#include "train/args.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[65];
    int argc = 0;
    for (char *p = buf, *nl; argc < 64 && p <= buf + size; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl)
            nl = buf + size;
        *nl = 0;
        argv[argc++] = p;
    }
    argv[argc] = NULL;
    pl_train_args a;
    if (pl_train_args_parse(&a, argc, argv) == PL_OK)
        pl_train_args_free(&a);
    free(buf);
    return 0;
}
