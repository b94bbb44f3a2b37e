/* libFuzzer target: pl_safetensors_parse (a checkpoint shard or a Hugging Face
 * model file handed to plait) on arbitrary bytes. Accepted headers must describe
 * tensors whose byte ranges lie inside the image, whose sizes match dtype x shape,
 * and which pl_safetensors_find finds by name; every tensor's bytes are read (ASan
 * checks the bounds). Seeds: fuzz/seeds/fuzz_safetensors/ (files plait wrote). */
#include "ckpt/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes, so a read past the end is caught */
    uint8_t *image = malloc(size ? size : 1);
    if (!image)
        return 0;
    memcpy(image, data, size);
    pl_safetensors st;
    memset(&st, 0, sizeof st);
    if (pl_safetensors_parse(&st, image, size, "fuzz.safetensors") == PL_OK) {
        const uint8_t *end = image + size;
        unsigned sum = 0;
        for (int i = 0; i < st.n; i++) {
            const pl_st_tensor *t = &st.tensors[i];
            if (t->begin > t->end || st.data + t->end > end || st.data < image)
                abort(); /* accepted a range outside the file */
            uint64_t numel = 1;
            for (int d = 0; d < t->ndim; d++)
                numel *= (uint64_t)t->shape[d];
            if (numel * (uint64_t)pl_st_dtype_size(t->dtype) != t->end - t->begin)
                abort(); /* accepted a size that is not dtype x shape */
            if (pl_safetensors_find(&st, t->name) == NULL)
                abort();
            for (uint64_t k = t->begin; k < t->end; k++)
                sum += st.data[k];
        }
        for (int i = 0; i < st.n_meta; i++)
            if (!pl_safetensors_meta(&st, st.meta[i].key))
                abort();
        (void)sum;
        pl_safetensors_close(&st);
    }
    free(image);
    return 0;
}
