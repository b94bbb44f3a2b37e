/* libFuzzer target: pl_npy_load (Megatron's .npy index caches: document, sample and
 * shuffle indices, which a user may copy from another machine) on arbitrary bytes,
 * for every dtype and shape the caches use. An accepted array must lie inside the
 * file; every element is read. Input: byte 0 selects the expectation (dtype, 1-D or
 * 2-D with 2 columns), the rest is the file. Seeds: fuzz/seeds/fuzz_npy/ (numpy.save
 * output). */
#include "data/npy.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int one_input(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const pl_npy_dtype dts[] = {PL_NPY_I16, PL_NPY_I32, PL_NPY_U32, PL_NPY_I64};
    const pl_npy_dtype dt = dts[data[0] & 3];
    const int ndim = data[0] & 4 ? 2 : 1;
    char path[512];
    snprintf(path, sizeof path, "%s/cache.npy", fuzz_dir());
    fuzz_write(path, data + 1, size - 1);
    pl_npy a;
    memset(&a, 0, sizeof a);
    if (pl_npy_load(&a, path, dt, ndim, ndim == 2 ? 2 : 1) != PL_OK)
        return 0;
    const int64_t n = pl_npy_numel(&a);
    if (n < 0 || a.ndim != ndim || (ndim == 2 && a.shape[1] != 2))
        abort();
    if (n > 0 && (a.data < a.map.data ||
                  (size_t)(a.data - a.map.data) + (size_t)n * (size_t)pl_npy_itemsize(dt) >
                      a.map.size))
        abort(); /* accepted an array that runs past the file */
    int64_t sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += pl_npy_get(&a, i);
    (void)sum;
    pl_npy_free(&a);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one_input(data, size);
    fuzz_dir_remove();
    return 0;
}
