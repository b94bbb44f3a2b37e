/* The restricted pickle reader (ckpt/pickle.h): a stack machine over the
 * opcodes of Python's Lib/pickletools.py that torch.save's protocol 2 output
 * (and protocols up to 5) uses for state dicts. Every node is recorded in the
 * document so that one free releases everything, whatever shape the memo gave
 * the tree. */
#include "ckpt/pickle.h"

#include "base/alloc.h"

#include <stdio.h>
#include <string.h>

struct pl_pickle {
    pl_pk **nodes;
    int64_t n_nodes, cap_nodes;
    pl_pk *root;
    uint64_t stamp;
};

typedef struct vm {
    pl_pickle *doc;
    const uint8_t *base, *p, *end;
    const char *what;
    pl_pk **stack;
    int64_t sp, cap;
    int64_t *marks;
    int64_t n_marks, cap_marks;
    pl_pk **memo;
    int64_t cap_memo, memo_len; /* memo_len: entries stored (MEMOIZE's next index) */
} vm;

/* 1: arr holds need elements; 0: need is past limit; -1: out of memory. */
static int grow(void **arr, int64_t *cap, int64_t need, size_t elem, int64_t limit)
{
    if (need <= *cap)
        return 1;
    if (need > limit)
        return 0;
    int64_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    if (c > limit)
        c = limit;
    void *q = pl_realloc(*arr, (size_t)c * elem);
    if (!q)
        return -1;
    memset((char *)q + (size_t)*cap * elem, 0, (size_t)(c - *cap) * elem);
    *arr = q;
    *cap = c;
    return 1;
}

static pl_status err(const vm *m, const char *msg)
{
    return pl_errorf(PL_ERR_FORMAT, "%s: pickle at byte %lld: %s", m->what,
                     (long long)(m->p - m->base), msg);
}

static pl_pk *node(vm *m, pl_pk_kind kind)
{
    pl_pickle *d = m->doc;
    if (grow((void **)&d->nodes, &d->cap_nodes, d->n_nodes + 1, sizeof *d->nodes,
             PL_PICKLE_MAX_NODES) != 1)
        return NULL;
    pl_pk *x = pl_calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->kind = kind;
    d->nodes[d->n_nodes++] = x;
    return x;
}

static pl_status push(vm *m, pl_pk *x)
{
    if (!x)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory (or more than %d pickle nodes)", m->what,
                         PL_PICKLE_MAX_NODES);
    const int g = grow((void **)&m->stack, &m->cap, m->sp + 1, sizeof *m->stack,
                       PL_PICKLE_MAX_STACK);
    if (g < 0)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", m->what);
    if (!g)
        return err(m, "the stack exceeds its limit");
    m->stack[m->sp++] = x;
    return PL_OK;
}

static pl_pk *pop(vm *m)
{
    const int64_t floor = m->n_marks ? m->marks[m->n_marks - 1] : 0;
    return m->sp > floor ? m->stack[--m->sp] : NULL;
}

static pl_pk *top(vm *m)
{
    const int64_t floor = m->n_marks ? m->marks[m->n_marks - 1] : 0;
    return m->sp > floor ? m->stack[m->sp - 1] : NULL;
}

static int take(vm *m, size_t n, const uint8_t **out)
{
    if ((size_t)(m->end - m->p) < n)
        return 0;
    *out = m->p;
    m->p += n;
    return 1;
}

static uint64_t le(const uint8_t *b, int n)
{
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--)
        v = v << 8 | b[k];
    return v;
}

static pl_status add_item(vm *m, pl_pk *c, pl_pk *x)
{
    if (grow((void **)&c->v, &c->cap, c->n + 1, sizeof *c->v, PL_PICKLE_MAX_NODES) != 1)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory (or more than %d items)", m->what,
                         PL_PICKLE_MAX_NODES);
    c->v[c->n++] = x;
    return PL_OK;
}

/* Pops the items above the last mark into a new container of kind. */
static pl_status collect(vm *m, pl_pk_kind kind, pl_pk **out)
{
    if (!m->n_marks)
        return err(m, "no MARK for a tuple, list or dict");
    const int64_t from = m->marks[--m->n_marks];
    pl_pk *c = node(m, kind);
    if (!c)
        return push(m, NULL);
    pl_status st = PL_OK;
    for (int64_t k = from; k < m->sp && !st; k++)
        st = add_item(m, c, m->stack[k]);
    m->sp = from;
    if (kind == PL_PK_DICT && c->n % 2)
        return err(m, "a dict with a key but no value");
    *out = c;
    return st;
}

static pl_status string(vm *m, pl_pk_kind kind, uint64_t n)
{
    const uint8_t *b;
    if (!take(m, n, &b))
        return err(m, "a string runs past the end (truncated)");
    pl_pk *x = node(m, kind);
    if (x && !(x->s = pl_malloc(n + 1)))
        x = NULL;
    if (x) {
        memcpy(x->s, b, n);
        x->s[n] = 0;
        x->n = (int64_t)n;
    }
    return push(m, x);
}

static pl_status integer(vm *m, pl_pk_kind kind, int64_t v)
{
    pl_pk *x = node(m, kind);
    if (x)
        x->i = v;
    return push(m, x);
}

/* The allow list: name -> what a REDUCE / NEWOBJ of it builds. */
typedef enum { G_TYPE, G_ODICT, G_TENSOR, G_PARAM, G_NAMESPACE, G_OPAQUE, G_GETATTR, G_NAME } g_role;
static const struct {
    const char *name;
    g_role role;
    const char *dtype; /* storage types */
} allowed[] = {
    {"collections.OrderedDict", G_ODICT, NULL},
    {"torch._utils._rebuild_tensor_v2", G_TENSOR, NULL},
    {"torch._utils._rebuild_parameter", G_PARAM, NULL},
    {"argparse.Namespace", G_NAMESPACE, NULL},
    {"numpy.core.multiarray._reconstruct", G_OPAQUE, NULL},
    {"numpy._core.multiarray._reconstruct", G_OPAQUE, NULL},
    {"numpy.ndarray", G_OPAQUE, NULL},
    {"numpy.dtype", G_OPAQUE, NULL},
    {"_codecs.encode", G_OPAQUE, NULL},
    {"torch.Size", G_OPAQUE, NULL}, /* DeepSpeed's param_shapes */
    {"__builtin__.getattr", G_GETATTR, NULL}, /* an enum member by name (Python >= 3.12) */
    {"builtins.getattr", G_GETATTR, NULL},
    {"deepspeed.runtime.zero.config.ZeroStageEnum", G_OPAQUE, NULL},
    {"deepspeed.runtime.fp16.loss_scaler.LossScaler", G_OPAQUE, NULL},
    {"deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler", G_OPAQUE, NULL},
    {"deepspeed.utils.tensor_fragment.fragment_address", G_OPAQUE, NULL},
    /* PyTorch's Distributed Checkpoint .metadata (torch/distributed/checkpoint/metadata.py,
     * filesystem.py; TensorProperties and its encoding in _shard before 2.4) */
    {"torch.distributed.checkpoint.metadata.Metadata", G_OPAQUE, NULL},
    {"torch.distributed.checkpoint.metadata.TensorStorageMetadata", G_OPAQUE, NULL},
    {"torch.distributed.checkpoint.metadata.BytesStorageMetadata", G_OPAQUE, NULL},
    {"torch.distributed.checkpoint.metadata.ChunkStorageMetadata", G_OPAQUE, NULL},
    {"torch.distributed.checkpoint.metadata.MetadataIndex", G_OPAQUE, NULL},
    {"torch.distributed.checkpoint.metadata.TensorProperties", G_OPAQUE, NULL},
    {"torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING", G_OPAQUE, NULL},
    {"torch.distributed.checkpoint.metadata.StorageMeta", G_OPAQUE, NULL},
    {"torch.distributed.checkpoint.filesystem._StorageInfo", G_OPAQUE, NULL},
    {"torch.distributed._shard.sharded_tensor.metadata.TensorProperties", G_OPAQUE, NULL},
    {"torch.distributed._shard.sharded_tensor.metadata.MEM_FORMAT_ENCODING", G_OPAQUE, NULL},
    {"torch.serialization._get_layout", G_OPAQUE, NULL}, /* torch.strided, as torch pickles it */
    {"pathlib.PosixPath", G_OPAQUE, NULL},
    /* Megatron's args and common state (megatron/core/safe_globals.py's list) */
    {"types.SimpleNamespace", G_OPAQUE, NULL},
    {"signal.Signals", G_OPAQUE, NULL},
    {"numpy.dtypes.UInt32DType", G_OPAQUE, NULL},
    {"megatron.core.enums.ModelType", G_OPAQUE, NULL},
    {"megatron.core.transformer.enums.AttnBackend", G_OPAQUE, NULL},
    {"megatron.core.transformer.enums.CudaGraphModule", G_OPAQUE, NULL},
    {"megatron.core.transformer.enums.CudaGraphScope", G_OPAQUE, NULL},
    {"megatron.core.transformer.enums.InferenceCudaGraphScope", G_OPAQUE, NULL},
    {"megatron.core.rerun_state_machine.RerunMode", G_OPAQUE, NULL},
    {"megatron.core.rerun_state_machine.RerunState", G_OPAQUE, NULL},
    {"megatron.core.rerun_state_machine.RerunDiagnostic", G_OPAQUE, NULL},
    {"megatron.core.optimizer.optimizer_config.OptimizerConfig", G_OPAQUE, NULL},
    /* torch dtypes as values (args.params_dtype, TensorProperties.dtype): names, never called */
    {"torch.float32", G_NAME, NULL},
    {"torch.float64", G_NAME, NULL},
    {"torch.float16", G_NAME, NULL},
    {"torch.bfloat16", G_NAME, NULL},
    {"torch.int64", G_NAME, NULL},
    {"torch.int32", G_NAME, NULL},
    {"torch.int16", G_NAME, NULL},
    {"torch.int8", G_NAME, NULL},
    {"torch.uint8", G_NAME, NULL},
    {"torch.bool", G_NAME, NULL},
    {"torch.FloatStorage", G_TYPE, "F32"},
    {"torch.BFloat16Storage", G_TYPE, "BF16"},
    {"torch.HalfStorage", G_TYPE, "F16"},
    {"torch.DoubleStorage", G_TYPE, "F64"},
    {"torch.LongStorage", G_TYPE, "I64"},
    {"torch.IntStorage", G_TYPE, "I32"},
    {"torch.ShortStorage", G_TYPE, "I16"},
    {"torch.CharStorage", G_TYPE, "I8"},
    {"torch.ByteStorage", G_TYPE, "U8"},
    {"torch.BoolStorage", G_TYPE, "BOOL"},
};
enum { N_ALLOWED = sizeof allowed / sizeof *allowed };

static int find_allowed(const char *name)
{
    for (int k = 0; k < N_ALLOWED; k++)
        if (strcmp(allowed[k].name, name) == 0)
            return k;
    return -1;
}

static pl_status global(vm *m, const char *mod, size_t ml, const char *name, size_t nl)
{
    char full[256];
    if (ml + nl + 2 > sizeof full)
        return err(m, "a global's name is too long");
    memcpy(full, mod, ml);
    full[ml] = '.';
    memcpy(full + ml + 1, name, nl);
    full[ml + 1 + nl] = 0;
    if (strlen(full) != ml + nl + 1 || find_allowed(full) < 0) {
        for (char *c = full; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
                *c = '?';
        return pl_errorf(PL_ERR_FORMAT, "%s: the pickle names the global %s, which plait refuses "
                         "(it reads tensors, dicts, lists, numbers, strings and argparse.Namespace "
                         "only, and never runs code)", m->what, full);
    }
    pl_pk *x = node(m, PL_PK_GLOBAL);
    if (x && !(x->s = pl_malloc(strlen(full) + 1)))
        x = NULL;
    if (x)
        memcpy(x->s, full, strlen(full) + 1);
    return push(m, x);
}

static int as_int(const pl_pk *x, int64_t *v)
{
    if (!x || (x->kind != PL_PK_INT && x->kind != PL_PK_BOOL))
        return 0;
    *v = x->i;
    return 1;
}

/* torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]) */
static pl_status rebuild_tensor(vm *m, const pl_pk *args)
{
    if (args->n < 4 || args->v[0]->kind != PL_PK_STORAGE || args->v[2]->kind != PL_PK_TUPLE ||
        args->v[3]->kind != PL_PK_TUPLE || args->v[2]->n != args->v[3]->n ||
        args->v[2]->n > PL_PK_MAX_DIMS)
        return err(m, "_rebuild_tensor_v2 with arguments other than (storage, offset, size, "
                      "stride, ...) of at most 8 dimensions");
    pl_pk *t = node(m, PL_PK_TENSOR);
    if (!t)
        return push(m, NULL);
    t->storage = args->v[0];
    t->dtype = t->storage->dtype;
    t->ndim = (int)args->v[2]->n;
    if (t->ndim && !(t->shape = pl_malloc(2 * (size_t)t->ndim * sizeof *t->shape)))
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", m->what);
    t->stride = t->shape ? t->shape + t->ndim : NULL;
    int64_t last = 0, any_empty = 0;
    if (!as_int(args->v[1], &t->i) || t->i < 0)
        return err(m, "a tensor's storage offset is not an integer >= 0");
    for (int k = 0; k < t->ndim; k++) {
        if (!as_int(args->v[2]->v[k], &t->shape[k]) || !as_int(args->v[3]->v[k], &t->stride[k]) ||
            t->shape[k] < 0 || t->stride[k] < 0 || t->shape[k] > ((int64_t)1 << 40) ||
            t->stride[k] > ((int64_t)1 << 40))
            return err(m, "a tensor's size or stride is not an integer in [0, 2^40]");
        any_empty |= t->shape[k] == 0;
        last += (t->shape[k] > 0 ? t->shape[k] - 1 : 0) * t->stride[k];
    }
    if (!any_empty && (t->i > t->storage->i || last >= t->storage->i - t->i))
        return pl_errorf(PL_ERR_FORMAT, "%s: a tensor view reaches element %lld of storage %s, "
                         "which holds %lld", m->what, (long long)(t->i + last), t->storage->s,
                         (long long)t->storage->i);
    return push(m, t);
}

static pl_status reduce(vm *m, int newobj)
{
    pl_pk *args = pop(m), *f = pop(m);
    if (!args || !f || args->kind != PL_PK_TUPLE || f->kind != PL_PK_GLOBAL)
        return err(m, newobj ? "NEWOBJ of something other than a class and a tuple"
                             : "REDUCE of something other than a global and a tuple");
    const g_role role = allowed[find_allowed(f->s)].role;
    if (role == G_ODICT && !newobj)
        return push(m, node(m, PL_PK_DICT));
    if (role == G_TENSOR && !newobj)
        return rebuild_tensor(m, args);
    if (role == G_PARAM && !newobj) {
        if (args->n < 1 || args->v[0]->kind != PL_PK_TENSOR)
            return err(m, "_rebuild_parameter of something other than a tensor");
        return push(m, args->v[0]);
    }
    if (role == G_GETATTR && !newobj) { /* getattr(allowed class, "name"): named, not run */
        if (args->n != 2 || args->v[0]->kind != PL_PK_GLOBAL || args->v[1]->kind != PL_PK_STR)
            return err(m, "getattr of something other than an allowed global and a name");
        pl_pk *o = node(m, PL_PK_OBJECT);
        const size_t a = strlen(args->v[0]->s), b = strlen(args->v[1]->s);
        if (o && !(o->s = pl_malloc(a + b + 2)))
            o = NULL;
        if (o) {
            memcpy(o->s, args->v[0]->s, a);
            o->s[a] = '.';
            memcpy(o->s + a + 1, args->v[1]->s, b + 1);
            if (add_item(m, o, args) || add_item(m, o, NULL))
                o = NULL;
        }
        return push(m, o);
    }
    if ((role == G_NAMESPACE && newobj) || role == G_OPAQUE) {
        pl_pk *o = node(m, PL_PK_OBJECT);
        if (o) {
            o->s = pl_malloc(strlen(f->s) + 1);
            if (o->s)
                memcpy(o->s, f->s, strlen(f->s) + 1);
            if (!o->s || add_item(m, o, args) || add_item(m, o, NULL))
                o = NULL;
        }
        return push(m, o);
    }
    return pl_errorf(PL_ERR_FORMAT, "%s: the pickle %s %s, which plait does not build", m->what,
                     newobj ? "instantiates" : "calls", f->s);
}

/* BINPERSID: ('storage', type, key, location, numel) */
static pl_status persistent(vm *m)
{
    pl_pk *pid = pop(m);
    int64_t numel;
    if (!pid || pid->kind != PL_PK_TUPLE || pid->n < 5 || pid->v[0]->kind != PL_PK_STR ||
        strcmp(pid->v[0]->s, "storage") != 0 || pid->v[1]->kind != PL_PK_GLOBAL ||
        pid->v[2]->kind != PL_PK_STR || !as_int(pid->v[4], &numel) || numel < 0)
        return err(m, "a persistent id other than ('storage', type, key, location, numel)");
    const int g = find_allowed(pid->v[1]->s);
    if (allowed[g].role != G_TYPE)
        return pl_errorf(PL_ERR_FORMAT, "%s: a storage of type %s", m->what, pid->v[1]->s);
    const char *key = pid->v[2]->s;
    for (const char *c = key; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              *c == '_'))
            return pl_errorf(PL_ERR_FORMAT, "%s: storage key \"%s\": expected letters, digits "
                             "and _ (an entry name in the archive's data/)", m->what, key);
    pl_pk *s = node(m, PL_PK_STORAGE);
    if (s && !(s->s = pl_malloc(strlen(key) + 1)))
        s = NULL;
    if (s) {
        memcpy(s->s, key, strlen(key) + 1);
        s->dtype = allowed[g].dtype;
        s->i = numel;
    }
    return push(m, s);
}

static pl_status memo_put(vm *m, uint64_t idx)
{
    pl_pk *x = top(m);
    if (!x)
        return err(m, "PUT with an empty stack");
    const int g = idx >= PL_PICKLE_MAX_MEMO ? 0
                  : grow((void **)&m->memo, &m->cap_memo, (int64_t)idx + 1, sizeof *m->memo,
                         PL_PICKLE_MAX_MEMO);
    if (g < 0)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", m->what);
    if (!g)
        return err(m, "a memo index beyond plait's limit");
    m->memo_len += m->memo[idx] == NULL;
    m->memo[idx] = x;
    return PL_OK;
}

static pl_status memo_get(vm *m, uint64_t idx)
{
    if (idx >= (uint64_t)m->cap_memo || !m->memo[idx])
        return err(m, "GET of a memo entry never stored");
    return push(m, m->memo[idx]);
}

/* APPEND(S) / SETITEM(S): the items above the mark (or one / one pair) into the container below. */
static pl_status fill(vm *m, int dict, int many)
{
    int64_t from = m->sp - (dict ? 2 : 1);
    if (many) {
        if (!m->n_marks)
            return err(m, "APPENDS or SETITEMS without a MARK");
        from = m->marks[--m->n_marks];
    }
    const int64_t floor = m->n_marks ? m->marks[m->n_marks - 1] : 0;
    if (from - 1 < floor || from > m->sp || (dict && (m->sp - from) % 2))
        return err(m, "APPEND or SETITEM without a container and items");
    pl_pk *c = m->stack[from - 1];
    if (c->kind != (dict ? PL_PK_DICT : PL_PK_LIST))
        return err(m, dict ? "SETITEM on something other than a dict"
                           : "APPEND on something other than a list");
    pl_status st = PL_OK;
    for (int64_t k = from; k < m->sp && !st; k++)
        st = add_item(m, c, m->stack[k]);
    m->sp = from;
    return st;
}

static pl_status build(vm *m)
{
    pl_pk *state = pop(m), *o = top(m);
    if (!state || !o)
        return err(m, "BUILD without an object and a state");
    if (o->kind == PL_PK_OBJECT)
        o->v[1] = state;
    else if (o->kind != PL_PK_DICT && o->kind != PL_PK_TENSOR) /* an OrderedDict's _metadata */
        return err(m, "BUILD on something other than an object, a dict or a tensor");
    return PL_OK;
}

static pl_status step(vm *m, uint8_t op, int *stop)
{
    const uint8_t *b;
    pl_pk *x = NULL;
    switch (op) {
    case 0x80: /* PROTO */
        if (!take(m, 1, &b) || b[0] > 5)
            return err(m, "an unknown protocol");
        return PL_OK;
    case 0x95: /* FRAME */
        return take(m, 8, &b) ? PL_OK : err(m, "truncated FRAME");
    case '.': /* STOP */
        if (m->sp != 1 || m->n_marks)
            return err(m, "STOP with other than one value on the stack");
        m->doc->root = m->stack[0];
        *stop = 1;
        return PL_OK;
    case 'N': return push(m, node(m, PL_PK_NONE));
    case 0x88: return integer(m, PL_PK_BOOL, 1);
    case 0x89: return integer(m, PL_PK_BOOL, 0);
    case 'J':
        if (!take(m, 4, &b))
            return err(m, "truncated BININT");
        return integer(m, PL_PK_INT, (int32_t)(uint32_t)le(b, 4));
    case 'K':
        if (!take(m, 1, &b))
            return err(m, "truncated BININT1");
        return integer(m, PL_PK_INT, b[0]);
    case 'M':
        if (!take(m, 2, &b))
            return err(m, "truncated BININT2");
        return integer(m, PL_PK_INT, (int64_t)le(b, 2));
    case 0x8a: { /* LONG1: n bytes, little-endian two's complement */
        if (!take(m, 1, &b))
            return err(m, "truncated LONG1");
        const int n = b[0];
        if (n > 8 || !take(m, (size_t)n, &b))
            return err(m, "a LONG1 wider than 64 bits, or truncated");
        uint64_t v = n ? le(b, n) : 0;
        if (n && n < 8 && (b[n - 1] & 0x80))
            v |= ~(uint64_t)0 << (8 * n);
        return integer(m, PL_PK_INT, (int64_t)v);
    }
    case 'G': { /* BINFLOAT: big-endian double */
        if (!take(m, 8, &b))
            return err(m, "truncated BINFLOAT");
        uint64_t v = 0;
        for (int k = 0; k < 8; k++)
            v = v << 8 | b[k];
        x = node(m, PL_PK_FLOAT);
        if (x)
            memcpy(&x->f, &v, 8);
        return push(m, x);
    }
    case 'X': case 'B': case 'T': /* BINUNICODE, BINBYTES, BINSTRING: u32 length */
        if (!take(m, 4, &b))
            return err(m, "truncated string length");
        return string(m, op == 'X' ? PL_PK_STR : PL_PK_BYTES, le(b, 4) & 0xffffffffu);
    case 0x8c: case 'C': case 'U': /* SHORT_BINUNICODE, SHORT_BINBYTES, SHORT_BINSTRING */
        if (!take(m, 1, &b))
            return err(m, "truncated string length");
        return string(m, op == 0x8c ? PL_PK_STR : PL_PK_BYTES, b[0]);
    case 0x8d: case 0x8e: /* BINUNICODE8, BINBYTES8 */
        if (!take(m, 8, &b))
            return err(m, "truncated string length");
        return string(m, op == 0x8d ? PL_PK_STR : PL_PK_BYTES, le(b, 8));
    case ']': return push(m, node(m, PL_PK_LIST));
    case '}': return push(m, node(m, PL_PK_DICT));
    case ')': return push(m, node(m, PL_PK_TUPLE));
    case '(': /* MARK */
        switch (grow((void **)&m->marks, &m->cap_marks, m->n_marks + 1, sizeof *m->marks,
                     PL_PICKLE_MAX_STACK)) {
        case -1: return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", m->what);
        case 0: return err(m, "too many MARKs");
        default: break;
        }
        m->marks[m->n_marks++] = m->sp;
        return PL_OK;
    case 't': case 'l': case 'd': { /* TUPLE, LIST, DICT */
        pl_status st = collect(m, op == 't' ? PL_PK_TUPLE : op == 'l' ? PL_PK_LIST : PL_PK_DICT, &x);
        return st ? st : push(m, x);
    }
    case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
        const int n = op - 0x84;
        x = node(m, PL_PK_TUPLE);
        if (!x)
            return push(m, NULL);
        pl_pk *items[3];
        for (int k = n - 1; k >= 0; k--)
            if (!(items[k] = pop(m)))
                return err(m, "TUPLE1-3 with too few values");
        for (int k = 0; k < n; k++)
            if (add_item(m, x, items[k]))
                return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", m->what);
        return push(m, x);
    }
    case 'a': return fill(m, 0, 0);
    case 'e': return fill(m, 0, 1);
    case 's': return fill(m, 1, 0);
    case 'u': return fill(m, 1, 1);
    case 'q':
        if (!take(m, 1, &b))
            return err(m, "truncated BINPUT");
        return memo_put(m, b[0]);
    case 'r':
        if (!take(m, 4, &b))
            return err(m, "truncated LONG_BINPUT");
        return memo_put(m, le(b, 4));
    case 0x94: /* MEMOIZE */
        return memo_put(m, (uint64_t)m->memo_len);
    case 'h':
        if (!take(m, 1, &b))
            return err(m, "truncated BINGET");
        return memo_get(m, b[0]);
    case 'j':
        if (!take(m, 4, &b))
            return err(m, "truncated LONG_BINGET");
        return memo_get(m, le(b, 4));
    case '0': /* POP */
        if (m->n_marks && m->marks[m->n_marks - 1] == m->sp)
            m->n_marks--; /* pops the mark */
        else if (!pop(m))
            return err(m, "POP of an empty stack");
        return PL_OK;
    case '1': /* POP_MARK */
        if (!m->n_marks)
            return err(m, "POP_MARK without a MARK");
        m->sp = m->marks[--m->n_marks];
        return PL_OK;
    case '2': /* DUP */
        if (!(x = top(m)))
            return err(m, "DUP of an empty stack");
        return push(m, x);
    case 'c': { /* GLOBAL "module\nname\n" */
        const uint8_t *mod = m->p, *nl1 = memchr(m->p, '\n', (size_t)(m->end - m->p));
        if (!nl1)
            return err(m, "truncated GLOBAL");
        const uint8_t *name = nl1 + 1, *nl2 = memchr(name, '\n', (size_t)(m->end - name));
        if (!nl2)
            return err(m, "truncated GLOBAL");
        m->p = nl2 + 1;
        return global(m, (const char *)mod, (size_t)(nl1 - mod), (const char *)name,
                      (size_t)(nl2 - name));
    }
    case 0x93: { /* STACK_GLOBAL */
        pl_pk *name = pop(m), *mod = pop(m);
        if (!name || !mod || name->kind != PL_PK_STR || mod->kind != PL_PK_STR)
            return err(m, "STACK_GLOBAL without two strings");
        return global(m, mod->s, (size_t)mod->n, name->s, (size_t)name->n);
    }
    case 'R': return reduce(m, 0);
    case 0x81: return reduce(m, 1); /* NEWOBJ */
    case 'b': return build(m);
    case 'Q': return persistent(m);
    default: {
        char msg[96];
        snprintf(msg, sizeof msg, "opcode 0x%02x ('%c'), which plait does not read", op,
                 op >= 0x20 && op < 0x7f ? op : '?');
        return err(m, msg);
    }
    }
}

void pl_pickle_free(pl_pickle *p)
{
    if (!p)
        return;
    for (int64_t k = 0; k < p->n_nodes; k++) {
        pl_free(p->nodes[k]->s);
        pl_free(p->nodes[k]->v);
        pl_free(p->nodes[k]->shape);
        pl_free(p->nodes[k]);
    }
    pl_free(p->nodes);
    pl_free(p);
}

pl_status pl_pickle_parse(const uint8_t *data, size_t size, const char *what, pl_pickle **out)
{
    *out = NULL;
    vm m;
    memset(&m, 0, sizeof m);
    m.what = what;
    m.base = m.p = data;
    m.end = data + size;
    if (!(m.doc = pl_calloc(1, sizeof *m.doc)))
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", what);
    pl_status st = PL_OK;
    int stop = 0;
    while (!st && !stop) {
        if (m.p == m.end) {
            st = err(&m, "the stream ends without STOP (truncated)");
            break;
        }
        st = step(&m, *m.p++, &stop);
    }
    pl_free(m.stack);
    pl_free(m.marks);
    pl_free(m.memo);
    if (st) {
        pl_pickle_free(m.doc);
        return st;
    }
    *out = m.doc;
    return PL_OK;
}

const pl_pk *pl_pickle_root(const pl_pickle *p) { return p->root; }

uint64_t pl_pickle_stamp(pl_pickle *p) { return p->stamp += 2; } /* s: on the path, s + 1: done */

/* The marks are the walkers' scratch, not part of the value: written through const. */
int pl_pk_enter(const pl_pk *o, uint64_t stamp)
{
    if (o->stamp == stamp)
        return -1;
    if (o->stamp == stamp + 1)
        return 0;
    ((pl_pk *)o)->stamp = stamp;
    return 1;
}

void pl_pk_leave(const pl_pk *o, uint64_t stamp) { ((pl_pk *)o)->stamp = stamp + 1; }

const pl_pk *pl_pk_get(const pl_pk *o, const char *key)
{
    if (o && o->kind == PL_PK_OBJECT && o->n == 2)
        o = o->v[1];
    if (!o || o->kind != PL_PK_DICT)
        return NULL;
    for (int64_t k = 0; k + 1 < o->n; k += 2) {
        const pl_pk *kk = o->v[k];
        if (kk->kind == PL_PK_STR && strcmp(kk->s, key) == 0)
            return o->v[k + 1];
    }
    return NULL;
}

int pl_pk_dtype_size(const char *dtype)
{
    static const struct {
        const char *name;
        int size;
    } t[] = {{"F32", 4}, {"BF16", 2}, {"F16", 2}, {"F64", 8}, {"I64", 8},
             {"I32", 4}, {"I16", 2},  {"I8", 1},  {"U8", 1},  {"BOOL", 1}};
    for (size_t k = 0; dtype && k < sizeof t / sizeof *t; k++)
        if (strcmp(t[k].name, dtype) == 0)
            return t[k].size;
    return 0;
}
