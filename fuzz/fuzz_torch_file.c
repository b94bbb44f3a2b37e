/* libFuzzer target: the restricted torch.save reader (ckpt/torch_file.h: ZIP,
 * pickle, storages) and the tar reader of .nemo archives (ckpt/tar.h) on
 * arbitrary bytes. Input starting "PK" is read as a whole .pt file
 * (pl_pt_parse), input with "ustar" at byte 257 as a tar archive whose entries
 * are then read as .pt files, anything else as a bare pickle (pl_pickle_parse).
 * Whatever is accepted is walked (depth bounded, as the importers walk it) and
 * every tensor of at most 2^16 elements is read as floats: ASan checks that
 * each view stays inside its storage's entry. Seeds: fuzz/seeds/fuzz_torch_file/
 * (written by torch.save: fuzz/make_pt_seeds.py). */
#include "base/alloc.h"
#include "ckpt/tar.h"
#include "ckpt/torch_file.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const pl_pt *f, const pl_pk *o, int depth, uint64_t stamp)
{
    if (!o || depth > 64 || pl_pk_enter(o, stamp) != 1)
        return; /* each node once: shared nodes would make the walk exponential */
    if (o->kind == PL_PK_TENSOR) {
        const int64_t n = pl_pk_numel(o);
        if (!f || n > (1 << 16)) {
            pl_pk_leave(o, stamp);
            return;
        }
        float *x = pl_malloc((size_t)(n ? n : 1) * sizeof *x);
        if (x && pl_pt_tensor_floats(f, o, x, n) == PL_OK) {
            volatile float s = 0;
            for (int64_t k = 0; k < n; k++)
                s += x[k];
        }
        pl_free(x);
        pl_pk_leave(o, stamp);
        return;
    }
    if (o->kind == PL_PK_LIST || o->kind == PL_PK_TUPLE || o->kind == PL_PK_DICT ||
        o->kind == PL_PK_OBJECT)
        for (int64_t k = 0; k < o->n; k++)
            walk(f, o->v[k], depth + 1, stamp);
    (void)pl_pk_get(o, "model");
    pl_pk_leave(o, stamp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *image = malloc(size ? size : 1); /* exactly size bytes: overreads are caught */
    if (!image)
        return 0;
    memcpy(image, data, size);
    if (size >= 512 && memcmp(image + 257, "ustar", 5) == 0) {
        pl_tar t;
        if (pl_tar_parse(&t, image, size, "fuzz.nemo") == PL_OK)
            for (int k = 0; k < t.n; k++) {
                if (t.e[k].data < image || t.e[k].data + t.e[k].size > image + size)
                    abort(); /* an entry outside the archive */
                pl_pt f;
                memset(&f, 0, sizeof f);
                if (pl_pt_parse(&f, t.e[k].data, t.e[k].size, t.e[k].name) == PL_OK)
                    walk(&f, pl_pt_root(&f), 0, pl_pickle_stamp(f.pk));
                pl_pt_close(&f);
            }
        pl_tar_free(&t);
    } else if (size >= 2 && image[0] == 'P' && image[1] == 'K') {
        pl_pt f;
        memset(&f, 0, sizeof f);
        if (pl_pt_parse(&f, image, size, "fuzz.pt") == PL_OK)
            walk(&f, pl_pt_root(&f), 0, pl_pickle_stamp(f.pk));
        pl_pt_close(&f);
    } else {
        pl_pickle *p = NULL;
        if (pl_pickle_parse(image, size, "fuzz.pkl", &p) == PL_OK)
            walk(NULL, pl_pickle_root(p), 0, pl_pickle_stamp(p));
        pl_pickle_free(p);
    }
    free(image);
    return 0;
}
