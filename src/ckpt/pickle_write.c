/* Pickle protocol 2 writer for torch.save's subset (ckpt/pickle_write.h). The
 * opcodes are Python's (Lib/pickle.py); they are exactly those the restricted
 * readers accept: plait's (ckpt/pickle.c) and torch's weights_only unpickler,
 * which adds argparse.Namespace only when allow-listed (Megatron's args). */
#include "ckpt/pickle_write.h"

#include "base/alloc.h"

#include <string.h>

enum {
    OP_MARK = '(', OP_STOP = '.', OP_BINFLOAT = 'G', OP_BININT = 'J', OP_BININT1 = 'K',
    OP_BININT2 = 'M', OP_NONE = 'N', OP_BINPERSID = 'Q', OP_REDUCE = 'R', OP_BINUNICODE = 'X',
    OP_EMPTY_DICT = '}', OP_EMPTY_TUPLE = ')', OP_TUPLE = 't', OP_SETITEMS = 'u', OP_GLOBAL = 'c',
    OP_BUILD = 'b', OP_PROTO = 0x80, OP_NEWOBJ = 0x81, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a
};

static void put(pl_pkw *w, const void *p, size_t n)
{
    if (w->failed)
        return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->n + n)
            cap *= 2;
        uint8_t *b = pl_realloc(w->buf, cap);
        if (!b) {
            w->failed = 1;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->n, p, n);
    w->n += n;
}

static void op(pl_pkw *w, int code)
{
    const uint8_t c = (uint8_t)code;
    put(w, &c, 1);
}

static void global(pl_pkw *w, const char *module, const char *name)
{
    op(w, OP_GLOBAL);
    put(w, module, strlen(module));
    op(w, '\n');
    put(w, name, strlen(name));
    op(w, '\n');
}

void pl_pkw_init(pl_pkw *w)
{
    memset(w, 0, sizeof *w);
    op(w, OP_PROTO);
    op(w, 2);
}

void pl_pkw_free(pl_pkw *w)
{
    pl_free(w->buf);
    memset(w, 0, sizeof *w);
}

void pl_pkw_none(pl_pkw *w) { op(w, OP_NONE); }
void pl_pkw_bool(pl_pkw *w, int v) { op(w, v ? OP_NEWTRUE : OP_NEWFALSE); }

/* Python's choice: BININT1, BININT2, BININT for what fits, else LONG1 (two's
 * complement, little-endian, the fewest bytes that keep the sign). */
void pl_pkw_int(pl_pkw *w, int64_t v)
{
    uint8_t b[9];
    if (v >= 0 && v < 256) {
        op(w, OP_BININT1);
        b[0] = (uint8_t)v;
        put(w, b, 1);
    } else if (v >= 0 && v < 65536) {
        op(w, OP_BININT2);
        b[0] = (uint8_t)v;
        b[1] = (uint8_t)(v >> 8);
        put(w, b, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        const uint32_t u = (uint32_t)(int32_t)v;
        op(w, OP_BININT);
        for (int k = 0; k < 4; k++)
            b[k] = (uint8_t)(u >> (8 * k));
        put(w, b, 4);
    } else {
        const uint64_t u = (uint64_t)v;
        int n = 8;
        while (n > 1 && ((v < 0 && (uint8_t)(u >> (8 * (n - 1))) == 0xff &&
                          (u >> (8 * (n - 2)) & 0x80)) ||
                         (v >= 0 && (uint8_t)(u >> (8 * (n - 1))) == 0 &&
                          !(u >> (8 * (n - 2)) & 0x80))))
            n--;
        op(w, OP_LONG1);
        b[0] = (uint8_t)n;
        for (int k = 0; k < n; k++)
            b[1 + k] = (uint8_t)(u >> (8 * k));
        put(w, b, (size_t)n + 1);
    }
}

void pl_pkw_float(pl_pkw *w, double v)
{
    uint64_t u;
    uint8_t b[8];
    memcpy(&u, &v, 8);
    for (int k = 0; k < 8; k++)
        b[k] = (uint8_t)(u >> (8 * (7 - k))); /* big-endian */
    op(w, OP_BINFLOAT);
    put(w, b, 8);
}

void pl_pkw_str(pl_pkw *w, const char *s)
{
    const size_t n = strlen(s);
    const uint8_t b[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    op(w, OP_BINUNICODE);
    put(w, b, 4);
    put(w, s, n);
}

void pl_pkw_tuple_begin(pl_pkw *w) { op(w, OP_MARK); }
void pl_pkw_tuple_end(pl_pkw *w) { op(w, OP_TUPLE); }

void pl_pkw_dict_begin(pl_pkw *w, int ordered)
{
    if (ordered) {
        global(w, "collections", "OrderedDict");
        op(w, OP_EMPTY_TUPLE);
        op(w, OP_REDUCE);
    } else {
        op(w, OP_EMPTY_DICT);
    }
    op(w, OP_MARK);
}

void pl_pkw_dict_end(pl_pkw *w) { op(w, OP_SETITEMS); }

void pl_pkw_namespace_begin(pl_pkw *w)
{
    global(w, "argparse", "Namespace");
    op(w, OP_EMPTY_TUPLE);
    op(w, OP_NEWOBJ);
    pl_pkw_dict_begin(w, 0);
}

void pl_pkw_namespace_end(pl_pkw *w)
{
    pl_pkw_dict_end(w);
    op(w, OP_BUILD);
}

void pl_pkw_tensor(pl_pkw *w, const char *dtype, const char *key, int ndim, const int64_t *shape)
{
    const char *storage = !strcmp(dtype, "F32") ? "FloatStorage"
                        : !strcmp(dtype, "BF16") ? "BFloat16Storage" : NULL;
    if (!storage || ndim < 0 || ndim > 8) {
        w->failed = 2;
        return;
    }
    int64_t numel = 1, stride[8];
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = numel;
        numel *= shape[d];
    }
    global(w, "torch._utils", "_rebuild_tensor_v2");
    op(w, OP_MARK);
    op(w, OP_MARK); /* the persistent id */
    pl_pkw_str(w, "storage");
    global(w, "torch", storage);
    pl_pkw_str(w, key);
    pl_pkw_str(w, "cpu");
    pl_pkw_int(w, numel);
    op(w, OP_TUPLE);
    op(w, OP_BINPERSID);
    pl_pkw_int(w, 0);
    op(w, OP_MARK);
    for (int d = 0; d < ndim; d++)
        pl_pkw_int(w, shape[d]);
    op(w, OP_TUPLE);
    op(w, OP_MARK);
    for (int d = 0; d < ndim; d++)
        pl_pkw_int(w, stride[d]);
    op(w, OP_TUPLE);
    pl_pkw_bool(w, 0);
    pl_pkw_dict_begin(w, 1);
    pl_pkw_dict_end(w);
    op(w, OP_TUPLE);
    op(w, OP_REDUCE);
}

pl_status pl_pkw_finish(pl_pkw *w, const uint8_t **data, size_t *size)
{
    op(w, OP_STOP);
    if (w->failed == 2)
        return pl_errorf(PL_ERR_ARG, "pickle writer: a tensor of a dtype other than F32 / BF16 or "
                         "more than 8 dimensions");
    if (w->failed)
        return pl_errorf(PL_ERR_NOMEM, "out of memory writing a pickle of %zu bytes", w->n);
    *data = w->buf;
    *size = w->n;
    return PL_OK;
}
