/* GEMM: oneDNN matmul primitives cached by shape, and the naive reference twin.
 *
 * A pl_gemm holds one CPU engine, one in-order stream and a hash table of
 * matmul primitives keyed by (ta, tb, M, N, K, lda, ldb, ldc, beta). Transposes
 * and leading dimensions are expressed as memory-descriptor strides, beta = 1
 * as a `sum` post-op. Each cached entry owns memory objects created without a
 * buffer; a run re-points them at the caller's arrays, so after the first use
 * of a shape (or pl_gemm_prepare) a run allocates nothing. Scratchpads are in
 * user mode: one buffer, owned here, sized for the largest primitive, shared
 * by all (executions are serial on the one stream).
 *
 * Reduced precision (pl_gemm_set_precision): in bf16 mode a run first
 * rounds op(A) and op(B) to bf16 into compact buffers owned here
 * (pl_cpu_f32_to_bf16, rows in parallel) and runs a bf16 x bf16 -> f32 matmul
 * on them; in fp16 mode it rounds them through fp16 (pl_cpu_round_fp16) and
 * runs the fp32 matmul on the rounded values. The primitive's key then holds
 * the compact strides, not the caller's. The conversion buffer grows when a
 * larger shape is prepared or first run, like the scratchpad.
 *
 * Not thread-safe: one pl_gemm per calling thread. oneDNN parallelizes each
 * matmul itself with the same OpenMP pool as the rest of the kernels; call
 * pl_gemm_run from serial code, not from inside an OpenMP parallel region. */
#include "kernels/kernels.h"

#include "base/alloc.h"
#include "base/status.h"

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct gemm_key {
    int64_t M, N, K, lda, ldb, ldc;
    int ta, tb, beta, prec;
    int swap; /* the primitive computes C^T = op(B)^T op(A)^T into C's transpose */
} gemm_key;

typedef struct gemm_entry {
    gemm_key key;
    int used;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, scratch; /* scratch is NULL when the primitive needs none */
} gemm_entry;

struct pl_gemm {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    gemm_entry *table; /* open addressing, linear probing, cap a power of two */
    int64_t cap, count;
    void *scratch_raw; /* pl_malloc'd, scratch_size + 64 bytes */
    void *scratch;     /* scratch_raw aligned to 64 bytes */
    size_t scratch_size;
    pl_gemm_precision prec;
    float *swap;    /* a swapped product's C^T (swap_size floats) */
    int64_t converted; /* reduced modes: operand elements converted */
    size_t swap_size;
    void *conv_raw; /* operand conversion buffer (reduced modes), conv_size + 64 bytes */
    void *conv;     /* conv_raw aligned to 64 bytes */
    size_t conv_size;
};

#define GEMM_SCRATCH_ALIGN 64

static pl_status dnnl_fail(dnnl_status_t s, const char *what, const gemm_key *k)
{
    if (k)
        return pl_errorf(PL_ERR_INTERNAL,
                         "gemm: %s failed (%s) for ta=%d tb=%d M=%lld N=%lld K=%lld lda=%lld "
                         "ldb=%lld ldc=%lld beta=%d",
                         what, dnnl_status2str(s), k->ta, k->tb, (long long)k->M, (long long)k->N,
                         (long long)k->K, (long long)k->lda, (long long)k->ldb, (long long)k->ldc,
                         k->beta);
    return pl_errorf(PL_ERR_INTERNAL, "gemm: %s failed (%s)", what, dnnl_status2str(s));
}

pl_status pl_gemm_init(pl_gemm **out)
{
    *out = NULL;
    pl_gemm *g = pl_calloc(1, sizeof *g);
    if (!g)
        return pl_errorf(PL_ERR_NOMEM, "gemm: out of memory for the context");
    pl_status st = PL_OK;
    dnnl_status_t s = dnnl_engine_create(&g->engine, dnnl_cpu, 0);
    if (s != dnnl_success) {
        st = dnnl_fail(s, "dnnl_engine_create", NULL);
        goto fail;
    }
    s = dnnl_stream_create(&g->stream, g->engine, dnnl_stream_default_flags);
    if (s != dnnl_success) {
        st = dnnl_fail(s, "dnnl_stream_create", NULL);
        goto fail;
    }
    g->cap = 64;
    g->table = pl_calloc((size_t)g->cap, sizeof *g->table);
    if (!g->table) {
        st = pl_errorf(PL_ERR_NOMEM, "gemm: out of memory for the primitive cache");
        goto fail;
    }
    *out = g;
    return PL_OK;
fail:
    pl_gemm_free(g);
    return st;
}

static void entry_release(gemm_entry *e)
{
    if (e->prim)
        dnnl_primitive_destroy(e->prim);
    if (e->a)
        dnnl_memory_destroy(e->a);
    if (e->b)
        dnnl_memory_destroy(e->b);
    if (e->c)
        dnnl_memory_destroy(e->c);
    if (e->scratch)
        dnnl_memory_destroy(e->scratch);
    memset(e, 0, sizeof *e);
}

void pl_gemm_free(pl_gemm *g)
{
    if (!g)
        return;
    if (g->table)
        for (int64_t i = 0; i < g->cap; i++)
            if (g->table[i].used)
                entry_release(&g->table[i]);
    pl_free(g->table);
    pl_free(g->scratch_raw);
    pl_free(g->conv_raw);
    pl_free(g->swap);
    if (g->stream)
        dnnl_stream_destroy(g->stream);
    if (g->engine)
        dnnl_engine_destroy(g->engine);
    pl_free(g);
}

static uint64_t key_hash(const gemm_key *k)
{
    /* FNV-1a over the fields (not the padding). */
    int64_t f[11] = {k->M,  k->N,  k->K,    k->lda,  k->ldb, k->ldc,
                     k->ta, k->tb, k->beta, k->prec, k->swap};
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 11; i++) {
        uint64_t v = (uint64_t)f[i];
        for (int b = 0; b < 8; b++) {
            h ^= (v >> (8 * b)) & 0xffu;
            h *= 1099511628211ull;
        }
    }
    return h;
}

static int key_eq(const gemm_key *a, const gemm_key *b)
{
    return a->M == b->M && a->N == b->N && a->K == b->K && a->lda == b->lda &&
           a->ldb == b->ldb && a->ldc == b->ldc && a->ta == b->ta && a->tb == b->tb &&
           a->beta == b->beta && a->prec == b->prec && a->swap == b->swap;
}

/* The slot holding k, or the empty slot where it would go. */
static gemm_entry *table_slot(gemm_entry *table, int64_t cap, const gemm_key *k)
{
    uint64_t i = key_hash(k) & (uint64_t)(cap - 1);
    while (table[i].used && !key_eq(&table[i].key, k))
        i = (i + 1) & (uint64_t)(cap - 1);
    return &table[i];
}

static pl_status table_grow(pl_gemm *g)
{
    int64_t ncap = g->cap * 2;
    gemm_entry *nt = pl_calloc((size_t)ncap, sizeof *nt);
    if (!nt)
        return pl_errorf(PL_ERR_NOMEM, "gemm: out of memory growing the primitive cache to %lld",
                         (long long)ncap);
    for (int64_t i = 0; i < g->cap; i++)
        if (g->table[i].used)
            *table_slot(nt, ncap, &g->table[i].key) = g->table[i];
    pl_free(g->table);
    g->table = nt;
    g->cap = ncap;
    return PL_OK;
}

/* A 2-D fp32 descriptor of logical shape (rows, cols): row-major with row
 * stride ld, or, if trans, the transpose of a row-major (cols, rows) array. */
static dnnl_status_t md_2d(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int trans,
                           int64_t ld, dnnl_data_type_t dt)
{
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}

static pl_status entry_create(pl_gemm *g, gemm_entry *e, const gemm_key *k)
{
    pl_status st = PL_OK;
    dnnl_status_t s;
    const char *what = "";
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_matmul_desc_t desc;

    memset(e, 0, sizeof *e);
    e->key = *k;
#define DNNL_TRY(call)                                                                             \
    do {                                                                                           \
        what = #call;                                                                              \
        s = (call);                                                                                \
        if (s != dnnl_success)                                                                     \
            goto dnnl_failed;                                                                      \
    } while (0)
    dnnl_data_type_t in = k->prec == PL_GEMM_BF16 ? dnnl_bf16 : dnnl_f32;
    if (k->swap) { /* src op(B)^T (N, K), weights op(A)^T (K, M), dst C^T (N, M) */
        DNNL_TRY(md_2d(&amd, k->N, k->K, !k->tb, k->ldb, in));
        DNNL_TRY(md_2d(&bmd, k->K, k->M, !k->ta, k->lda, in));
        DNNL_TRY(md_2d(&cmd, k->N, k->M, 0, k->M, dnnl_f32)); /* compact, then transposed */
    } else {
        DNNL_TRY(md_2d(&amd, k->M, k->K, k->ta, k->lda, in));
        DNNL_TRY(md_2d(&bmd, k->K, k->N, k->tb, k->ldb, in));
        DNNL_TRY(md_2d(&cmd, k->M, k->N, 0, k->ldc, dnnl_f32));
    }
    DNNL_TRY(dnnl_matmul_desc_init(&desc, &amd, &bmd, NULL, &cmd));
    DNNL_TRY(dnnl_primitive_attr_create(&attr));
    DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (k->beta && !k->swap) { /* a swapped product adds in its transposition */
        DNNL_TRY(dnnl_post_ops_create(&ops));
        DNNL_TRY(dnnl_post_ops_append_sum(ops, 1.0f));
        DNNL_TRY(dnnl_primitive_attr_set_post_ops(attr, ops));
    }
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &desc, attr, g->engine, NULL));
    DNNL_TRY(dnnl_primitive_create(&e->prim, pd));
    DNNL_TRY(dnnl_memory_create(&e->a, &amd, g->engine, DNNL_MEMORY_NONE));
    DNNL_TRY(dnnl_memory_create(&e->b, &bmd, g->engine, DNNL_MEMORY_NONE));
    DNNL_TRY(dnnl_memory_create(&e->c, &cmd, g->engine, DNNL_MEMORY_NONE));
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t ssize = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (ssize > 0) {
        DNNL_TRY(dnnl_memory_create(&e->scratch, smd, g->engine, DNNL_MEMORY_NONE));
        if (ssize > g->scratch_size) {
            void *raw = pl_malloc(ssize + GEMM_SCRATCH_ALIGN);
            if (!raw) {
                st = pl_errorf(PL_ERR_NOMEM, "gemm: out of memory for a %zu-byte scratchpad",
                               ssize);
                goto fail;
            }
            pl_free(g->scratch_raw);
            g->scratch_raw = raw;
            g->scratch = (void *)(((uintptr_t)raw + GEMM_SCRATCH_ALIGN - 1) &
                                  ~(uintptr_t)(GEMM_SCRATCH_ALIGN - 1));
            g->scratch_size = ssize;
        }
    }
#undef DNNL_TRY
    e->used = 1;
    goto done;
dnnl_failed:
    st = dnnl_fail(s, what, k);
fail:
    entry_release(e);
done:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (ops)
        dnnl_post_ops_destroy(ops);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return st;
}

static pl_status check_args(int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t lda,
                            int64_t ldb, int64_t ldc, float beta)
{
    if (M < 0 || N < 0 || K < 0 || (beta != 0.0f && beta != 1.0f) ||
        lda < (ta ? M : K) || ldb < (tb ? K : N) || ldc < N || lda < 1 || ldb < 1 || ldc < 1)
        return pl_errorf(PL_ERR_ARG,
                         "gemm: invalid arguments ta=%d tb=%d M=%lld N=%lld K=%lld lda=%lld "
                         "ldb=%lld ldc=%lld beta=%g (need sizes >= 0, beta 0 or 1, lda >= %s, "
                         "ldb >= %s, ldc >= N)",
                         ta, tb, (long long)M, (long long)N, (long long)K, (long long)lda,
                         (long long)ldb, (long long)ldc, (double)beta, ta ? "M" : "K",
                         tb ? "K" : "N");
    return PL_OK;
}

/* The cached entry for a shape, created if new. */
static pl_status lookup(pl_gemm *g, const gemm_key *k, gemm_entry **out)
{
    gemm_entry *e = table_slot(g->table, g->cap, k);
    if (!e->used) {
        if (2 * (g->count + 1) > g->cap) {
            pl_status st = table_grow(g);
            if (st != PL_OK)
                return st;
            e = table_slot(g->table, g->cap, k);
        }
        pl_status st = entry_create(g, e, k);
        if (st != PL_OK)
            return st;
        g->count++;
    }
    *out = e;
    return PL_OK;
}

static gemm_key make_key(int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t lda,
                         int64_t ldb, int64_t ldc, float beta)
{
    gemm_key k;
    memset(&k, 0, sizeof k);
    k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc;
    k.ta = !!ta, k.tb = !!tb, k.beta = beta != 0.0f;
    return k;
}

/* Bytes of one element of a converted operand, 0 in fp32 mode. */
static size_t conv_elem(pl_gemm_precision p)
{
    return p == PL_GEMM_BF16 ? 2 : p == PL_GEMM_FP16 ? 4 : 0;
}

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

/* oneDNN 2.6 runs C = A . B with both operands untransposed (the backward's
 * dx = dy . W) 10-50% below the rate of the same product computed transposed,
 * C^T = B^T . A^T, into a compact buffer that is then transposed into (or
 * added to) C (docs/performance.md; at GPT-2's shapes the transposition costs
 * a few percent of the GEMM). oneDNN has no fast path for a dst with
 * transposed strides (it falls back to its reference matmul), hence the
 * buffer. fp32 only: the reduced modes lay out their converted operands
 * themselves. PLAIT_GEMM_SWAP=0 turns it off (A/B measurements). */
static int want_swap(const gemm_key *k)
{
    static int off = -1;
    if (off < 0) {
        const char *e = getenv("PLAIT_GEMM_SWAP");
        off = e && strcmp(e, "0") == 0;
    }
    return !off && !k->ta && !k->tb && k->prec == PL_GEMM_FP32;
}

/* Grows the buffer of swapped products' results to M x N floats. */
static pl_status swap_reserve(pl_gemm *g, const gemm_key *k)
{
    size_t need = (size_t)k->M * (size_t)k->N;
    if (!k->swap || need <= g->swap_size)
        return PL_OK;
    float *p = pl_malloc(need * sizeof *p);
    if (!p)
        return pl_errorf(PL_ERR_NOMEM, "gemm: out of memory for a %lld x %lld product",
                         (long long)k->M, (long long)k->N);
    pl_free(g->swap);
    g->swap = p;
    g->swap_size = need;
    return PL_OK;
}

/* C (M, N; row stride ldc) = t^T, or += with beta, for t (N, M) compact: in
 * square tiles, rows of tiles split among threads (each element written once). */
static void transpose_into(float *C, int64_t ldc, const float *t, int64_t M, int64_t N, int beta)
{
    enum { TILE = 32 };
#pragma omp parallel for schedule(static) if (M * N > 65536)
    for (int64_t i0 = 0; i0 < M; i0 += TILE) {
        const int64_t i1 = i0 + TILE < M ? i0 + TILE : M;
        for (int64_t j0 = 0; j0 < N; j0 += TILE) {
            const int64_t j1 = j0 + TILE < N ? j0 + TILE : N;
            for (int64_t i = i0; i < i1; i++) {
                float *restrict c = C + i * ldc;
                if (beta)
                    for (int64_t j = j0; j < j1; j++)
                        c[j] += t[j * M + i];
                else
                    for (int64_t j = j0; j < j1; j++)
                        c[j] = t[j * M + i];
            }
        }
    }
}

/* The key of a shape in the context's mode: reduced modes run on compact
 * copies of op(A) (lda = M if ta else K) and op(B) (ldb = K if tb else N). */
static gemm_key mode_key(const pl_gemm *g, int ta, int tb, int64_t M, int64_t N, int64_t K,
                         int64_t lda, int64_t ldb, int64_t ldc, float beta)
{
    if (g->prec != PL_GEMM_FP32) {
        lda = ta ? M : K;
        ldb = tb ? K : N;
    }
    gemm_key k = make_key(ta, tb, M, N, K, lda, ldb, ldc, beta);
    k.prec = (int)g->prec;
    k.swap = want_swap(&k);
    return k;
}

/* Grows the conversion buffer to hold both operands of an M x N x K product. */
static pl_status conv_reserve(pl_gemm *g, int64_t M, int64_t N, int64_t K)
{
    size_t e = conv_elem(g->prec);
    if (!e)
        return PL_OK;
    size_t need = align64((size_t)M * (size_t)K * e) + align64((size_t)K * (size_t)N * e);
    if (need <= g->conv_size)
        return PL_OK;
    void *raw = pl_malloc(need + 64);
    if (!raw)
        return pl_errorf(PL_ERR_NOMEM, "gemm: out of memory for %zu bytes of %s operands", need,
                         pl_gemm_precision_name(g->prec));
    pl_free(g->conv_raw);
    g->conv_raw = raw;
    g->conv = (void *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
    g->conv_size = need;
    return PL_OK;
}

void pl_gemm_set_precision(pl_gemm *g, pl_gemm_precision p) { g->prec = p; }

pl_gemm_precision pl_gemm_get_precision(const pl_gemm *g) { return g->prec; }

const char *pl_gemm_precision_name(pl_gemm_precision p)
{
    return p == PL_GEMM_BF16 ? "bf16" : p == PL_GEMM_FP16 ? "fp16" : "fp32";
}

size_t pl_gemm_convert_bytes(const pl_gemm *g) { return g->conv_size; }

size_t pl_gemm_swap_bytes(const pl_gemm *g) { return g->swap_size * sizeof *g->swap; }

int64_t pl_gemm_converted(const pl_gemm *g) { return g->converted; }

void pl_gemm_converted_reset(pl_gemm *g) { g->converted = 0; }

/* Converts the rows x cols operand at src (row stride ld) into dst, compact. */
static void convert(pl_gemm_precision p, void *dst, const float *src, int64_t rows, int64_t cols,
                    int64_t ld)
{
    if (p == PL_GEMM_BF16)
        pl_cpu_f32_to_bf16(dst, src, rows, cols, ld);
    else
        pl_cpu_round_fp16(dst, src, rows, cols, ld);
}

pl_status pl_gemm_prepare(pl_gemm *g, int ta, int tb, int64_t M, int64_t N, int64_t K,
                          int64_t lda, int64_t ldb, int64_t ldc, float beta)
{
    pl_status st = check_args(ta, tb, M, N, K, lda, ldb, ldc, beta);
    if (st != PL_OK || M == 0 || N == 0 || K == 0)
        return st;
    gemm_key k = mode_key(g, ta, tb, M, N, K, lda, ldb, ldc, beta);
    gemm_entry *e;
    st = conv_reserve(g, M, N, K);
    if (!st)
        st = swap_reserve(g, &k);
    return st ? st : lookup(g, &k, &e);
}

pl_status pl_gemm_run(pl_gemm *g, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                      float *C, int64_t ldc)
{
    pl_status st = check_args(ta, tb, M, N, K, lda, ldb, ldc, beta);
    if (st != PL_OK || M == 0 || N == 0)
        return st;
    if (K == 0) { /* op(A).op(B) is zero: C = beta * C */
        if (beta == 0.0f)
            for (int64_t i = 0; i < M; i++)
                memset(C + i * ldc, 0, (size_t)N * sizeof *C);
        return PL_OK;
    }
    gemm_key k = mode_key(g, ta, tb, M, N, K, lda, ldb, ldc, beta);
    gemm_entry *e;
    st = lookup(g, &k, &e);
    if (st == PL_OK)
        st = conv_reserve(g, M, N, K);
    if (st == PL_OK)
        st = swap_reserve(g, &k);
    if (st != PL_OK)
        return st;
    float *out = C;
    if (g->prec != PL_GEMM_FP32) {
        /* op(A) is stored as (ta ? K x M : M x K), op(B) as (tb ? N x K : K x N) */
        char *ca = g->conv, *cb = ca + align64((size_t)M * (size_t)K * conv_elem(g->prec));
        convert(g->prec, ca, A, ta ? K : M, ta ? M : K, lda);
        convert(g->prec, cb, B, tb ? N : K, tb ? K : N, ldb);
        g->converted += M * K + K * N;
        A = (const float *)(const void *)ca;
        B = (const float *)(const void *)cb;
    }
    dnnl_status_t s;
    if (k.swap) {
        const float *t = A;
        A = B;
        B = t;
        C = g->swap;
    }
    if ((s = dnnl_memory_set_data_handle(e->a, (void *)A)) != dnnl_success ||
        (s = dnnl_memory_set_data_handle(e->b, (void *)B)) != dnnl_success ||
        (s = dnnl_memory_set_data_handle(e->c, C)) != dnnl_success ||
        (e->scratch && (s = dnnl_memory_set_data_handle(e->scratch, g->scratch)) != dnnl_success))
        return dnnl_fail(s, "dnnl_memory_set_data_handle", &k);
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, e->a},
        {DNNL_ARG_WEIGHTS, e->b},
        {DNNL_ARG_DST, e->c},
        {DNNL_ARG_SCRATCHPAD, e->scratch},
    };
    s = dnnl_primitive_execute(e->prim, g->stream, e->scratch ? 4 : 3, args);
    if (s != dnnl_success)
        return dnnl_fail(s, "dnnl_primitive_execute", &k);
    s = dnnl_stream_wait(g->stream);
    if (s != dnnl_success)
        return dnnl_fail(s, "dnnl_stream_wait", &k);
    if (k.swap)
        transpose_into(out, ldc, g->swap, M, N, k.beta);
    return PL_OK;
}

void pl_ref_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < K; p++) {
                float a = ta ? A[p * lda + i] : A[i * lda + p];
                float b = tb ? B[j * ldb + p] : B[p * ldb + j];
                acc += a * b;
            }
            C[i * ldc + j] = beta != 0.0f ? C[i * ldc + j] + acc : acc;
        }
    }
}
