/* kernels_bench: GEMM GFLOP/s on GPT-2 124M training shapes and per-kernel
 * times of the cpu twins at B=4, T=256, C=768, NH=12, V=50304.
 *
 *   build/testtools/kernels_bench [gemm|kernels|attention|all] [reps] [fp32|bf16|fp16|fp32-bf16]
 *
 * "attention" times the attention kernels alone, in GPT's case and in the
 * other modes of pl_attn_shape (non-causal, grouped-query, padding, dropout);
 * "all" is gemm and kernels.
 * The last argument is the GEMM context's precision (docs/precision.md): in
 * bf16 and fp16 each GEMM's time includes converting its two operands.
 * "fp32-bf16" alternates an fp32 and a bf16 context run by run on each shape
 * and prints both and their ratio: on a shared machine both then see the
 * same load.
 * Each measurement is the best and the median of `reps` timed runs after one
 * warm-up run (which also creates the GEMM primitives). Times are wall clock
 * with all OpenMP threads; the 1-minute load average is printed first because
 * other processes on the machine distort the numbers, and the instruction set
 * of the cpu twins (PLAIT_ISA=portable forces the portable build). */
#include "kernels/kernels.h"

#include "base/status.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { B = 4, T = 256, C = 768, NH = 12, HS = C / NH, V = 50304, N = B * T };
#define NPARAMS 124475904LL /* GPT-2 124M with V = 50304 */
#define MAX_REPS 200
/* GPT-2's attention: multi-head, causal, no padding, no dropout */
static const pl_attn_shape ATT = {
    .B = B, .T = T, .NH = NH, .G = NH, .HS = HS, .causal = 1, .NHg = NH};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *alloc_random(size_t n, float lo, float hi)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "kernels_bench: out of memory (%zu floats)\n", n);
        exit(1);
    }
    uint64_t s = 0x9e3779b97f4a7c15ull ^ n;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = lo + (hi - lo) * (float)((double)(s >> 11) * (1.0 / 9007199254740992.0));
    }
    return p;
}

/* The operation under test, as a closure. Returns nonzero on failure. */
typedef struct bench_op {
    int (*run)(void *);
    void *arg;
} bench_op;

/* Best and median wall seconds over reps runs, after one warm-up. */
static void measure(bench_op op, int reps, double *best, double *median)
{
    double t[MAX_REPS];
    if (op.run(op.arg)) {
        fprintf(stderr, "kernels_bench: %s\n", pl_error_msg());
        exit(1);
    }
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        op.run(op.arg);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *best = t[0];
    *median = t[reps / 2];
}

/* ---- GEMM ---------------------------------------------------------------- */

typedef struct gemm_arg {
    pl_gemm *g;
    int ta, tb;
    int64_t M, Nn, K;
    const float *A, *Bm;
    float *Cm;
    float beta;
} gemm_arg;

static int run_gemm(void *p)
{
    gemm_arg *a = p;
    int64_t lda = a->ta ? a->M : a->K, ldb = a->tb ? a->K : a->Nn;
    return pl_gemm_run(a->g, a->ta, a->tb, a->M, a->Nn, a->K, a->A, lda, a->Bm, ldb, a->beta,
                       a->Cm, a->Nn) != PL_OK;
}

/* Best wall seconds of op[0] and op[1], run alternately reps times after a warm-up each. */
static void measure_pair(bench_op op[2], int reps, double best[2])
{
    for (int k = 0; k < 2; k++) {
        best[k] = 1e30;
        if (op[k].run(op[k].arg)) {
            fprintf(stderr, "kernels_bench: %s\n", pl_error_msg());
            exit(1);
        }
    }
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 2; k++) {
            double t0 = now();
            op[k].run(op[k].arg);
            double dt = now() - t0;
            best[k] = dt < best[k] ? dt : best[k];
        }
}

static void bench_gemm(int reps, pl_gemm_precision prec, int pair)
{
    static const struct {
        const char *what;
        int ta, tb;
        int64_t M, N, K;
        float beta;
    } shapes[] = {
        {"fwd qkv      x.W^T", 0, 1, N, 3 * C, C, 0},
        {"fwd attnproj x.W^T", 0, 1, N, C, C, 0},
        {"fwd fc       x.W^T", 0, 1, N, 4 * C, C, 0},
        {"fwd fcproj   x.W^T", 0, 1, N, C, 4 * C, 0},
        {"bwd qkv dx   dy.W", 0, 0, N, C, 3 * C, 1},
        {"bwd fc dx    dy.W", 0, 0, N, C, 4 * C, 1},
        {"bwd fcproj dx dy.W", 0, 0, N, 4 * C, C, 1},
        {"bwd qkv dW   dy^T.x", 1, 0, 3 * C, C, N, 1},
        {"bwd attnproj dW", 1, 0, C, C, N, 1},
        {"bwd fc dW    dy^T.x", 1, 0, 4 * C, C, N, 1},
        {"bwd fcproj dW", 1, 0, C, 4 * C, N, 1},
        {"lmhead logits c=1024", 0, 1, N, 1024, C, 0},
        {"lmhead logits c=2048", 0, 1, N, 2048, C, 0},
        {"lmhead logits c=4096", 0, 1, N, 4096, C, 0},
        {"lmhead logits c=8192", 0, 1, N, 8192, C, 0},
        {"lmhead dx c=4096", 0, 0, N, C, 4096, 1},
        {"lmhead dW c=4096", 1, 0, 4096, C, N, 1},
        {"fused logits r=128", 0, 1, 128, V, C, 0},
        {"fused dx r=128", 0, 0, 128, C, V, 1},
        {"fused dW r=128", 1, 0, V, C, 128, 1},
        {"fused logits r=256", 0, 1, 256, V, C, 0},
        {"fused dx r=256", 0, 0, 256, C, V, 1},
        {"fused dW r=256", 1, 0, V, C, 256, 1},
        {"kept dx n=1024", 0, 0, N, C, V, 1},
        {"kept dW n=1024", 1, 0, V, C, N, 1},
        {"fused logits r=512", 0, 1, 512, V, C, 0},
        {"fused dx r=512", 0, 0, 512, C, V, 1},
        {"fused dW r=512", 1, 0, V, C, 512, 1},
    };
    pl_gemm *g = NULL;
    if (pl_gemm_init(&g) != PL_OK) {
        fprintf(stderr, "kernels_bench: %s\n", pl_error_msg());
        exit(1);
    }
    pl_gemm_set_precision(g, prec);
    pl_gemm *g16 = NULL;
    if (pair && pl_gemm_init(&g16) != PL_OK) {
        fprintf(stderr, "kernels_bench: %s\n", pl_error_msg());
        exit(1);
    }
    if (g16)
        pl_gemm_set_precision(g16, PL_GEMM_BF16);
    size_t big = (size_t)V * 1024; /* the largest operand: the fused head's dW (V x C) */
    float *A = alloc_random(big, -1, 1), *Bm = alloc_random(big, -1, 1);
    float *Cm = alloc_random(big, -1, 1);
    printf("%-22s %5s %6s %6s %6s %9s %9s   (%s)\n", "GEMM", "op", "M", "N", "K", "best ms", "GFLOP/s",
           pair ? "fp32-bf16" : pl_gemm_precision_name(prec));
    double flops_total = 0.0, time_total = 0.0, time16 = 0.0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        gemm_arg a = {g,        shapes[i].ta, shapes[i].tb, shapes[i].M, shapes[i].N, shapes[i].K,
                      A,        Bm,           Cm,           shapes[i].beta};
        double best, med;
        double fl = 2.0 * (double)a.M * (double)a.Nn * (double)a.K;
        if (pair) {
            gemm_arg a16 = a;
            a16.g = g16;
            bench_op ops[2] = {{run_gemm, &a}, {run_gemm, &a16}};
            double b[2];
            measure_pair(ops, reps, b);
            printf("%-22s %c%c%s %6lld %6lld %6lld fp32 %6.1f bf16 %6.1f GFLOP/s  ratio %.2f\n",
                   shapes[i].what, a.ta ? 'T' : 'N', a.tb ? 'T' : 'N', a.beta != 0.0f ? "+C" : "  ",
                   (long long)a.M, (long long)a.Nn, (long long)a.K, fl / b[0] * 1e-9,
                   fl / b[1] * 1e-9, b[0] / b[1]);
            if (i < 11)
                flops_total += fl, time_total += b[0], time16 += b[1];
            continue;
        }
        measure((bench_op){run_gemm, &a}, reps, &best, &med);
        printf("%-22s %c%c%s %6lld %6lld %6lld %9.3f %9.1f  (median %.1f)\n", shapes[i].what,
               a.ta ? 'T' : 'N', a.tb ? 'T' : 'N', a.beta != 0.0f ? "+C" : "  ", (long long)a.M,
               (long long)a.Nn, (long long)a.K, best * 1e3, fl / best * 1e-9, fl / med * 1e-9);
        if (i < 11)
            flops_total += fl, time_total += best;
    }
    if (pair)
        printf("%-22s fp32 %.1f bf16 %.1f GFLOP/s, ratio %.2f (one layer's 11 GEMMs, fwd + bwd)\n",
               "layer total", flops_total / time_total * 1e-9, flops_total / time16 * 1e-9,
               time_total / time16);
    else
        printf("%-22s %38.1f GFLOP/s (one layer's 11 GEMMs, fwd + bwd)\n", "layer total",
               flops_total / time_total * 1e-9);
    free(A), free(Bm), free(Cm);
    pl_gemm_free(g);
    pl_gemm_free(g16);
}

/* ---- kernels ------------------------------------------------------------- */

typedef struct kbuf {
    float *x, *y, *z, *dx, *dy, *w, *dw, *b, *db, *mean, *rstd, *big, *big2, *gin;
    float *qkv, *dqkv, *att, *datt, *lse, *att_ws;
    float *wte, *dwte, *wpe, *dwpe, *row_max, *row_sum, *tl, *lm_lse, *dloss, *lm_ws;
    float *p, *g, *m, *v;
    float *rope_cos, *rope_sin;
    int32_t *ids;
    int64_t sample[B];
    int64_t chunk;
    pl_gemm *gemm;
} kbuf;

#define KB(name, body)                                                                             \
    static int name(void *p)                                                                       \
    {                                                                                              \
        kbuf *k = p;                                                                               \
        body;                                                                                      \
        return 0;                                                                                  \
    }
KB(k_emb_fwd, pl_cpu_embedding_fwd(k->x, k->ids, k->wte, N, C, 0, V))
KB(k_emb_bwd, pl_cpu_embedding_bwd(k->dwte, k->dx, k->ids, N, C, 0, V))
KB(k_pos_fwd, pl_cpu_pos_embedding_fwd(k->x, k->wpe, B, T, C))
KB(k_pos_bwd, pl_cpu_pos_embedding_bwd(k->dwpe, k->dx, B, T, C))
KB(k_ln_fwd, pl_cpu_layernorm_fwd(k->y, k->mean, k->rstd, k->x, k->w, k->b, N, C, 1e-5f))
KB(k_ln_bwd, pl_cpu_layernorm_bwd(k->dx, k->dw, k->db, k->dy, k->x, k->w, k->mean, k->rstd, N, C))
KB(k_bias_fwd, pl_cpu_bias_fwd(k->big, k->b, N, 4 * C))
KB(k_bias_bwd, pl_cpu_bias_bwd(k->db, k->big, N, 4 * C))
KB(k_add, pl_cpu_add(k->z, k->x, k->y, (int64_t)N * C))
KB(k_gelu_fwd, pl_cpu_gelu_fwd(k->big2, k->gin, (int64_t)N * 4 * C))
KB(k_gelu_bwd, pl_cpu_gelu_bwd(k->big2, k->gin, k->big, (int64_t)N * 4 * C))
KB(k_rms_fwd, pl_cpu_rmsnorm_fwd(k->y, k->rstd, k->x, k->w, NULL, N, C, 1e-5f))
KB(k_rms_bwd, pl_cpu_rmsnorm_bwd(k->dx, k->dw, NULL, k->dy, k->x, k->w, k->rstd, N, C))
KB(k_swiglu_fwd, pl_cpu_swiglu_fwd(k->big2, k->gin, N, 2 * C))
KB(k_swiglu_bwd, pl_cpu_swiglu_bwd(k->big2, k->gin, k->big, N, 2 * C))
KB(k_rope_fwd, pl_cpu_rope_fwd(k->qkv, k->rope_cos, k->rope_sin, B, T, NH, 1, HS, HS, 0))
KB(k_rope_bwd, pl_cpu_rope_bwd(k->dqkv, k->rope_cos, k->rope_sin, B, T, NH, 1, HS, HS, 0))
KB(k_dropout, pl_cpu_dropout(k->z, k->x, 0, B * T, T, C, C, 0, k->sample, 0.1f, 1, 2))
KB(k_att_fwd, pl_cpu_attention_fwd(k->att, k->lse, k->qkv, &ATT, k->att_ws))
KB(k_att_bwd,
   pl_cpu_attention_bwd(k->dqkv, k->datt, k->qkv, k->att, k->lse, &ATT, k->att_ws))
KB(k_adamw, pl_cpu_adamw(k->p, k->g, k->m, k->v, NPARAMS, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f,
                         0.3f, 1.0f))
static double sumsq_sink;
KB(k_sumsq, sumsq_sink += pl_cpu_sumsq(k->g, NPARAMS))

static int k_lm_stats(void *p)
{
    kbuf *k = p;
    return pl_cpu_lmhead_stats(k->row_max, k->row_sum, k->tl, k->y, k->wte, NULL, k->ids, N, C, 0, V,
                               k->chunk, k->lm_ws, k->gemm) != PL_OK;
}

static int k_lm_bwd(void *p)
{
    kbuf *k = p;
    return pl_cpu_lmhead_bwd(k->dx, k->dwte, NULL, k->y, k->wte, NULL, k->ids, k->lm_lse, k->dloss, N, C, 0, V,
                             k->chunk, k->lm_ws, 0, k->gemm) != PL_OK;
}

static void bench_kernels(int reps)
{
    kbuf k;
    memset(&k, 0, sizeof k);
    const size_t nc = (size_t)N * C;
    k.x = alloc_random(nc, -1, 1), k.y = alloc_random(nc, -1, 1), k.z = alloc_random(nc, -1, 1);
    k.dx = alloc_random(nc, -1, 1), k.dy = alloc_random(nc, -1, 1);
    k.w = alloc_random(C, 0.5f, 1.5f), k.dw = alloc_random(C, -1, 1);
    k.b = alloc_random(4 * C, -1, 1), k.db = alloc_random(4 * C, -1, 1);
    k.mean = alloc_random(N, -1, 1), k.rstd = alloc_random(N, -1, 1);
    k.big = alloc_random(4 * nc, -3, 3), k.big2 = alloc_random(4 * nc, -1, 1);
    k.gin = alloc_random(4 * nc, -4, 4); /* GELU input: never written */
    k.qkv = alloc_random(3 * nc, -1, 1), k.dqkv = alloc_random(3 * nc, -1, 1);
    k.att = alloc_random(nc, -1, 1), k.datt = alloc_random(nc, -1, 1);
    k.lse = alloc_random((size_t)B * NH * T, -1, 1);
    k.att_ws = alloc_random(pl_attention_workspace(&ATT), 0, 1);
    k.wte = alloc_random((size_t)V * C, -0.1f, 0.1f), k.dwte = alloc_random((size_t)V * C, -1, 1);
    k.wpe = alloc_random((size_t)T * C, -1, 1), k.dwpe = alloc_random((size_t)T * C, -1, 1);
    k.row_max = alloc_random(N, 0, 1), k.row_sum = alloc_random(N, 0, 1);
    k.tl = alloc_random(N, 0, 1), k.lm_lse = alloc_random(N, 10, 11);
    k.dloss = alloc_random(N, 0, 1.0f / N);
    k.p = alloc_random(NPARAMS, -1, 1), k.g = alloc_random(NPARAMS, -1, 1);
    k.m = alloc_random(NPARAMS, -0.1f, 0.1f), k.v = alloc_random(NPARAMS, 0, 0.01f);
    k.rope_cos = alloc_random((size_t)T * HS / 2, -1, 1);
    k.rope_sin = alloc_random((size_t)T * HS / 2, -1, 1);
    pl_rope_table(k.rope_cos, k.rope_sin, T, HS, 10000.0, NULL);
    for (int b = 0; b < B; b++)
        k.sample[b] = 1000 + b;
    k.ids = malloc(N * sizeof *k.ids);
    for (int i = 0; i < N; i++)
        k.ids[i] = (int32_t)((i * 2654435761u) % V);
    if (!k.ids || pl_gemm_init(&k.gemm) != PL_OK) {
        fprintf(stderr, "kernels_bench: set-up failed: %s\n", pl_error_msg());
        exit(1);
    }
    static const struct {
        const char *name;
        int (*run)(void *);
        double bytes; /* main memory traffic estimate, for GB/s; 0 if compute-bound */
    } ks[] = {
        {"embedding_fwd (N,C)", k_emb_fwd, 2.0 * N * C * 4},
        {"embedding_bwd (N,C)", k_emb_bwd, 3.0 * N * C * 4},
        {"pos_embedding_fwd", k_pos_fwd, 2.0 * N * C * 4},
        {"pos_embedding_bwd", k_pos_bwd, 1.0 * N * C * 4},
        {"layernorm_fwd (N,C)", k_ln_fwd, 2.0 * N * C * 4},
        {"layernorm_bwd (N,C)", k_ln_bwd, 5.0 * N * C * 4},
        {"bias_fwd (N,4C)", k_bias_fwd, 2.0 * N * 4 * C * 4},
        {"bias_bwd (N,4C)", k_bias_bwd, 1.0 * N * 4 * C * 4},
        {"add (N*C)", k_add, 3.0 * N * C * 4},
        {"gelu_fwd (N*4C)", k_gelu_fwd, 2.0 * N * 4 * C * 4},
        {"gelu_bwd (N*4C)", k_gelu_bwd, 3.0 * N * 4 * C * 4},
        {"rmsnorm_fwd (N,C)", k_rms_fwd, 2.0 * N * C * 4},
        {"rmsnorm_bwd (N,C)", k_rms_bwd, 5.0 * N * C * 4},
        {"swiglu_fwd (N,2x2C)", k_swiglu_fwd, 3.0 * N * 2 * C * 4},
        {"swiglu_bwd (N,2x2C)", k_swiglu_bwd, 7.0 * N * 2 * C * 4},
        {"rope_fwd (q,k of qkv)", k_rope_fwd, 4.0 * N * C * 4},
        {"rope_bwd (q,k of qkv)", k_rope_bwd, 4.0 * N * C * 4},
        {"dropout p=0.1 (N,C)", k_dropout, 2.0 * N * C * 4},
        {"attention_fwd", k_att_fwd, 0},
        {"attention_bwd", k_att_bwd, 0},
        {"adamw (124M)", k_adamw, 7.0 * NPARAMS * 4},
        {"sumsq (124M)", k_sumsq, 1.0 * NPARAMS * 4},
    };
    printf("\n%-24s %10s %10s %8s\n", "kernel (B=4 T=256 C=768)", "best ms", "median ms", "GB/s");
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
        double best, med;
        measure((bench_op){ks[i].run, &k}, reps, &best, &med);
        printf("%-24s %10.3f %10.3f", ks[i].name, best * 1e3, med * 1e3);
        if (ks[i].bytes > 0)
            printf(" %8.1f", ks[i].bytes / best * 1e-9);
        else {
            /* useful (causal) flops: 2 matmuls forward, 5 backward, T(T+1)/2 pairs */
            double pairs = (double)B * NH * T * (T + 1) / 2.0;
            double fl = (ks[i].run == k_att_fwd ? 4.0 : 10.0) * pairs * HS;
            printf(" %8s  %.1f GFLOP/s", "", fl / best * 1e-9);
        }
        printf("\n");
    }
    static const int64_t chunks[] = {1024, 2048, 4096, 8192};
    for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
        k.chunk = chunks[c];
        k.lm_ws = alloc_random(pl_lmhead_workspace(N, k.chunk), 0, 1);
        double best, med, bbest, bmed;
        measure((bench_op){k_lm_stats, &k}, reps < 5 ? reps : 5, &best, &med);
        measure((bench_op){k_lm_bwd, &k}, reps < 5 ? reps : 5, &bbest, &bmed);
        /* GEMM flops only: 1 logits GEMM in stats, 3 in bwd (recompute, dx, dw) */
        double fl = 2.0 * N * (double)V * C;
        printf("lmhead_stats chunk=%-5lld %10.3f %10.3f %8s  %.1f GFLOP/s\n", (long long)k.chunk,
               best * 1e3, med * 1e3, "", fl / best * 1e-9);
        printf("lmhead_bwd   chunk=%-5lld %10.3f %10.3f %8s  %.1f GFLOP/s\n", (long long)k.chunk,
               bbest * 1e3, bmed * 1e3, "", 3 * fl / bbest * 1e-9);
        free(k.lm_ws);
    }
    pl_gemm_free(k.gemm);
    float *all[] = {k.gin, k.x,   k.y,    k.z,      k.dx,   k.dy,   k.w,    k.dw,      k.b,
                    k.db,  k.mean, k.rstd,   k.big,  k.big2, k.qkv,  k.dqkv,    k.att,
                    k.datt, k.lse, k.att_ws, k.wte,  k.dwte, k.wpe,  k.dwpe,    k.row_max,
                    k.row_sum, k.tl, k.lm_lse, k.dloss, k.p, k.g,    k.m,       k.v,
                    k.rope_cos, k.rope_sin};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
    free(k.ids);
}

/* ---- attention modes ------------------------------------------------------ */

typedef struct att_arg {
    const pl_attn_shape *s;
    float *qkv, *dqkv, *out, *dout, *lse, *ws;
} att_arg;

static int run_att_fwd(void *p)
{
    att_arg *a = p;
    pl_cpu_attention_fwd(a->out, a->lse, a->qkv, a->s, a->ws);
    return 0;
}

static int run_att_bwd(void *p)
{
    att_arg *a = p;
    pl_cpu_attention_bwd(a->dqkv, a->dout, a->qkv, a->out, a->lse, a->s, a->ws);
    return 0;
}

static void bench_attention(int reps)
{
    static const int32_t ragged[B] = {T, 3 * T / 4, T / 2, T / 4};
    static const int64_t sample[B] = {0, 1, 2, 3};
    const pl_attn_shape drop = {.dropout = 0.1f, .drop_seed = 1234, .sample = sample, .NHg = NH};
    static const struct {
        const char *name;
        int64_t G;
        int causal, pad, dropout;
    } modes[] = {
        {"GPT: MHA causal", NH, 1, 0, 0},   {"MHA non-causal", NH, 0, 0, 0},
        {"GQA G=4 causal", 4, 1, 0, 0},     {"MQA G=1 causal", 1, 1, 0, 0},
        {"MHA causal ragged", NH, 1, 1, 0}, {"MHA non-causal ragged", NH, 0, 1, 0},
        {"MHA causal p=0.1", NH, 1, 0, 1},  {"MHA non-causal ragged p=0.1", NH, 0, 1, 1},
    };
    const size_t nc = (size_t)N * C;
    att_arg a = {NULL,
                 alloc_random(3 * nc, -1, 1),
                 alloc_random(3 * nc, -1, 1),
                 alloc_random(nc, -1, 1),
                 alloc_random(nc, -1, 1),
                 alloc_random((size_t)B * NH * T, -1, 1),
                 NULL};
    printf("\n%-30s %10s %10s %10s %10s   (B=%d T=%d NH=%d HS=%d; ragged kv_len %d %d %d %d)\n",
           "attention mode", "fwd best", "median", "bwd best", "median", B, T, NH, HS, ragged[0],
           ragged[1], ragged[2], ragged[3]);
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        pl_attn_shape s = modes[i].dropout ? drop : (pl_attn_shape){.NHg = NH};
        s.B = B, s.T = T, s.NH = NH, s.G = modes[i].G, s.HS = HS, s.causal = modes[i].causal;
        s.kv_len = modes[i].pad ? ragged : NULL;
        a.s = &s;
        a.ws = alloc_random(pl_attention_workspace(&s), 0, 1);
        double fb, fm, bb, bm;
        measure((bench_op){run_att_fwd, &a}, reps, &fb, &fm);
        measure((bench_op){run_att_bwd, &a}, reps, &bb, &bm);
        printf("%-30s %7.3f ms %7.3f ms %7.3f ms %7.3f ms\n", modes[i].name, fb * 1e3, fm * 1e3,
               bb * 1e3, bm * 1e3);
        free(a.ws);
    }
    free(a.qkv), free(a.dqkv), free(a.out), free(a.dout), free(a.lse);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    const char *pname = argc > 3 ? argv[3] : "fp32";
    int pair = !strcmp(pname, "fp32-bf16");
    pl_gemm_precision prec = !strcmp(pname, "bf16")   ? PL_GEMM_BF16
                             : !strcmp(pname, "fp16") ? PL_GEMM_FP16
                                                      : PL_GEMM_FP32;
    if (reps < 1 || reps > MAX_REPS || (strcmp(what, "all") && strcmp(what, "gemm") &&
                                         strcmp(what, "kernels") && strcmp(what, "attention")) ||
        (strcmp(pname, pl_gemm_precision_name(prec)) && !pair)) {
        fprintf(stderr, "usage: kernels_bench [gemm|kernels|attention|all] [reps 1..%d] "
                        "[fp32|bf16|fp16|fp32-bf16]\n", MAX_REPS);
        return 2;
    }
    double load = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1.0;
        fclose(f);
    }
    printf("kernels_bench: %d OpenMP threads, load average %.2f, best of %d, cpu twins %s\n",
           omp_get_max_threads(), load, reps, pl_cpu_isa_name(pl_cpu_isa()));
    if (!strcmp(what, "all") || !strcmp(what, "gemm"))
        bench_gemm(reps, prec, pair);
    if (!strcmp(what, "all") || !strcmp(what, "kernels"))
        bench_kernels(reps);
    if (!strcmp(what, "attention"))
        bench_attention(reps);
    return 0;
}
