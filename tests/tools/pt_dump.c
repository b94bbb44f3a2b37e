/* pt_dump: a torch.save file read by plait's restricted reader (ckpt/torch_file.h),
 * printed one leaf a line as "PATH = VALUE" in the pickle's order: dict keys and
 * Namespace attributes as .KEY, list and tuple items as [I]; VALUE is None, True,
 * False, an integer, a float (%.17g), 'string', bytes(N), a tensor as
 * "tensor DTYPE [shape] sum=S" (the float sum of its elements in row-major order,
 * %.9g; other dtypes "tensor DTYPE numel=N"), or "object NAME" for opaque objects. tests/scripts/torch_import.sh compares it
 * with the same listing made by Python from the object torch.save wrote.
 * usage: pt_dump FILE.pt */
#include "base/alloc.h"
#include "ckpt/torch_file.h"

#include <stdio.h>
#include <string.h>

static int dump(const pl_pt *f, const pl_pk *o, char *path, size_t len, int depth)
{
    if (depth > 64) {
        fprintf(stderr, "pt_dump: deeper than 64\n");
        return 1;
    }
    switch (o->kind) {
    case PL_PK_NONE: printf("%s = None\n", path); return 0;
    case PL_PK_BOOL: printf("%s = %s\n", path, o->i ? "True" : "False"); return 0;
    case PL_PK_INT: printf("%s = %lld\n", path, (long long)o->i); return 0;
    case PL_PK_FLOAT: printf("%s = %.17g\n", path, o->f); return 0;
    case PL_PK_STR: printf("%s = '%s'\n", path, o->s); return 0;
    case PL_PK_BYTES: printf("%s = bytes(%lld)\n", path, (long long)o->n); return 0;
    case PL_PK_OBJECT:
        if (strcmp(o->s, "argparse.Namespace") != 0) {
            printf("%s = object %s\n", path, o->s);
            return 0;
        }
        return o->v[1] ? dump(f, o->v[1], path, len, depth + 1) : 0;
    case PL_PK_TENSOR: {
        const int64_t n = pl_pk_numel(o);
        const char *dt = o->storage->dtype;
        if (strcmp(dt, "F32") && strcmp(dt, "BF16") && strcmp(dt, "F16") && strcmp(dt, "F64")) {
            printf("%s = tensor %s numel=%lld\n", path, dt, (long long)n);
            return 0;
        }
        float *x = pl_malloc((size_t)(n ? n : 1) * sizeof *x);
        if (!x || pl_pt_tensor_floats(f, o, x, n)) {
            fprintf(stderr, "pt_dump: %s\n", pl_error_msg());
            pl_free(x);
            return 1;
        }
        double s = 0;
        for (int64_t k = 0; k < n; k++)
            s += x[k];
        pl_free(x);
        printf("%s = tensor %s [", path, o->storage->dtype);
        for (int k = 0; k < o->ndim; k++)
            printf("%s%lld", k ? ", " : "", (long long)o->shape[k]);
        printf("] sum=%.9g\n", s);
        return 0;
    }
    case PL_PK_LIST:
    case PL_PK_TUPLE:
    case PL_PK_DICT: {
        const int dict = o->kind == PL_PK_DICT;
        for (int64_t k = 0; k < o->n; k += dict ? 2 : 1) {
            if (dict && o->v[k]->kind != PL_PK_STR && o->v[k]->kind != PL_PK_INT) {
                fprintf(stderr, "pt_dump: a key that is neither a string nor an integer\n");
                return 1;
            }
            int w = dict ? (o->v[k]->kind == PL_PK_STR
                                ? snprintf(path + len, 4096 - len, ".%s", o->v[k]->s)
                                : snprintf(path + len, 4096 - len, ".%lld", (long long)o->v[k]->i))
                         : snprintf(path + len, 4096 - len, "[%lld]", (long long)k);
            if (w < 0 || (size_t)w >= 4096 - len)
                return 1;
            if (dump(f, o->v[dict ? k + 1 : k], path, len + (size_t)w, depth + 1))
                return 1;
            path[len] = 0;
        }
        return 0;
    }
    default: printf("%s = ?\n", path); return 0;
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pt_dump FILE.pt\n");
        return 2;
    }
    pl_pt f;
    if (pl_pt_open(&f, argv[1])) {
        fprintf(stderr, "pt_dump: %s\n", pl_error_msg());
        pl_pt_close(&f);
        return 1;
    }
    char path[4096] = "";
    int rc = dump(&f, pl_pt_root(&f), path, 0, 0);
    pl_pt_close(&f);
    return rc;
}
