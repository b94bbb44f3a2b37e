/* libFuzzer target: a checkpoint's manifest (iter_N/manifest.json), read as
 * `plait train --load` and `plait generate` read it: pl_ckpt_manifest_read, with the
 * checksum file written to match (so the fuzzer reaches the field validation, not
 * just the checksum). A manifest it accepts must give a model configuration that
 * pl_model_check_size accepts and (up to 64 layers) that registers without error
 * (the validation promises every size was checked before anything is allocated).
 * Input: the manifest's bytes, for iteration 2. Seeds: fuzz/seeds/fuzz_manifest/
 * (manifests plait wrote: GPT, LLaMA-style, ZeRO). */
#include "base/xxh64.h"
#include "ckpt/manifest.h"
#include "base/alloc.h"
#include "model/config.h"

#include "fuzz_common.h"

#include <cjson/cJSON.h>
#include <inttypes.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int one_input(const uint8_t *data, size_t size)
{
    char idir[512], path[600], sum[64];
    snprintf(idir, sizeof idir, "%s/iter_0000002", fuzz_dir());
    mkdir(idir, 0755);
    snprintf(path, sizeof path, "%s/manifest.json", idir);
    fuzz_write(path, data, size);
    snprintf(sum, sizeof sum, "%016" PRIx64 "  manifest.json\n", pl_xxh64(data, size, 0));
    snprintf(path, sizeof path, "%s/manifest.json.xxh64", idir);
    fuzz_write(path, sum, strlen(sum));
    int fd = open(idir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        abort();
    cJSON *root = NULL;
    pl_model_config cfg;
    pl_ckpt_meta meta;
    char *strings = NULL;
    memset(&cfg, 0, sizeof cfg);
    memset(&meta, 0, sizeof meta);
    if (pl_ckpt_manifest_read(fd, idir, 2, &root, &cfg, &meta, &strings) == PL_OK) {
        if (pl_model_check_size(&cfg, 1, 1, 0) != PL_OK)
            abort(); /* accepted sizes the model cannot hold */
        if (cfg.num_layers <= 64) {
            pl_registry r;
            pl_registry_init(&r, 1, 0, 0);
            if (pl_model_register(&r, &cfg, 1) != PL_OK)
                abort(); /* accepted a configuration that does not build */
            pl_registry_free(&r);
        }
        cJSON_Delete(root);
        pl_free(strings);
    }
    close(fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one_input(data, size);
    fuzz_dir_remove();
    return 0;
}
