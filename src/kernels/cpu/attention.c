/* Fast twin: causal self-attention, flash-attention style.
 *
 * Forward: work items are (b, h, query tile of ATT_BQ rows), scheduled
 * dynamically, longest first. A query tile walks the key tiles of ATT_BK rows
 * up to the diagonal (tiles above it are skipped), with an online softmax:
 * running row max m and sum l, rescaled output accumulator O. Saves
 * lse = m + log(l).
 *
 * Backward (FlashAttention-2): work items are (b, h) pairs, so the thread that
 * owns a pair owns its dq, dk and dv rows and no reduction crosses threads.
 * For each key tile j: for each query tile i at or below the diagonal,
 * recompute S = q k^T, P = exp(S * scale - lse), then
 *   dv_j += P^T do_i, dP = do_i v_j^T, dS = P (dP - D_i) * scale,
 *   dk_j += dS^T q_i, dq_i += dS k_j,
 * with D = rowsum(do * out). Nothing of size (T, T) exists.
 *
 * Tile products go through tile_mm(): register-blocked on the generic
 * vectors of simd.h, with an axpy-form edge loop whose inner loop runs along
 * contiguous rows of the right operand. Every result depends only on the
 * shapes, never on the thread count.
 *
 * Workspace (floats): the larger of the reference's 2T and
 * omp_get_max_threads() slots of attn_slot_floats(); the cpu kernels must run
 * with at most as many threads as when the workspace was sized. */
#include "kernels/kernels.h"

#include "kernels/cpu/simd.h"
#include "kernels/cpu/threads.h"

#include <math.h>
#include <string.h>

#define ATT_BQ 64
#define ATT_BK 64

/* Per-thread slot: forward uses q, kt, s, o, m, l; backward uses q, dout, kt,
 * vt, k, dk, dv, p, dp and D (T floats). */
static size_t attn_slot_floats(int64_t T, int64_t HS)
{
    size_t tile_q = (size_t)ATT_BQ * (size_t)HS, tile_k = (size_t)ATT_BK * (size_t)HS;
    size_t tile_s = (size_t)ATT_BQ * ATT_BK;
    size_t fwd = 2 * tile_q + tile_k + tile_s + 2 * ATT_BQ;
    size_t bwd = 2 * tile_q + 5 * tile_k + 2 * tile_s + (size_t)T;
    size_t n = fwd > bwd ? fwd : bwd;
    return (n + 15) & ~(size_t)15; /* keep slots 64-byte apart (no false sharing) */
}

size_t pl_attention_workspace(int64_t B, int64_t T, int64_t NH, int64_t HS)
{
    (void)B, (void)NH;
    size_t cpu = (size_t)omp_get_max_threads() * attn_slot_floats(T, HS);
    size_t ref = 2 * (size_t)T;
    return cpu > ref ? cpu : ref;
}

/* C (m, n) += A (m, k) . B (k, n) on columns [j0, j1), rows [i0, i1): the
 * axpy form, whose inner loop runs along a row of B and C and vectorizes. */
static void mm_axpy(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t k, const float *A,
                    int64_t a_rs, int64_t a_cs, const float *restrict B, int64_t ldb,
                    float *restrict C, int64_t ldc)
{
    for (int64_t i = i0; i < i1; i++) {
        float *c = C + i * ldc;
        for (int64_t p = 0; p < k; p++) {
            float a = A[i * a_rs + p * a_cs];
            const float *b = B + p * ldb;
#pragma omp simd
            for (int64_t j = j0; j < j1; j++)
                c[j] += a * b[j];
        }
    }
}

/* C (m, n) += A (m, k) . B (k, n). A[i][p] is at A[i * a_rs + p * a_cs] (so A
 * may be read transposed), B and C are row-major with row strides ldb, ldc.
 * Blocks of 4 rows x 2 vectors of C stay in registers over the whole k loop
 * (1.4x the axpy form with 4-float vectors), accumulated with pl_vf_fma
 * (fused in the AVX-512 build); edges use the axpy form. */
static void tile_mm(int64_t m, int64_t n, int64_t k, const float *A, int64_t a_rs, int64_t a_cs,
                    const float *restrict B, int64_t ldb, float *restrict C, int64_t ldc)
{
#if PL_VF
    const int64_t nr = 2 * PL_VF, mb = m - m % 4, nb = n - n % nr;
    for (int64_t i = 0; i < mb; i += 4) {
        const float *a = A + i * a_rs;
        for (int64_t j = 0; j < nb; j += nr) {
            pl_vf c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0};
            pl_vf c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
            for (int64_t p = 0; p < k; p++) {
                const float *ap = a + p * a_cs, *bp = B + p * ldb + j;
                pl_vf b0 = pl_vf_load(bp), b1 = pl_vf_load(bp + PL_VF);
                pl_vf a0 = pl_vf_set1(ap[0]), a1 = pl_vf_set1(ap[a_rs]);
                pl_vf a2 = pl_vf_set1(ap[2 * a_rs]), a3 = pl_vf_set1(ap[3 * a_rs]);
                c00 = pl_vf_fma(a0, b0, c00), c01 = pl_vf_fma(a0, b1, c01);
                c10 = pl_vf_fma(a1, b0, c10), c11 = pl_vf_fma(a1, b1, c11);
                c20 = pl_vf_fma(a2, b0, c20), c21 = pl_vf_fma(a2, b1, c21);
                c30 = pl_vf_fma(a3, b0, c30), c31 = pl_vf_fma(a3, b1, c31);
            }
            float *cp = C + i * ldc + j;
            pl_vf_store(cp, pl_vf_load(cp) + c00);
            pl_vf_store(cp + PL_VF, pl_vf_load(cp + PL_VF) + c01);
            cp += ldc;
            pl_vf_store(cp, pl_vf_load(cp) + c10);
            pl_vf_store(cp + PL_VF, pl_vf_load(cp + PL_VF) + c11);
            cp += ldc;
            pl_vf_store(cp, pl_vf_load(cp) + c20);
            pl_vf_store(cp + PL_VF, pl_vf_load(cp + PL_VF) + c21);
            cp += ldc;
            pl_vf_store(cp, pl_vf_load(cp) + c30);
            pl_vf_store(cp + PL_VF, pl_vf_load(cp + PL_VF) + c31);
        }
        if (nb < n)
            mm_axpy(i, i + 4, nb, n, k, A, a_rs, a_cs, B, ldb, C, ldc);
    }
    if (mb < m)
        mm_axpy(mb, m, 0, n, k, A, a_rs, a_cs, B, ldb, C, ldc);
#else
    mm_axpy(0, m, 0, n, k, A, a_rs, a_cs, B, ldb, C, ldc);
#endif
}

/* Row stride between consecutive t in qkv (NH*3*HS) and in out (NH*HS). */
#define QKV_ROW(NH, HS) ((NH) * 3 * (HS))

/* dst (rows, HS) contiguous = rows of src with stride ld, times mul. */
static void load_rows(float *restrict dst, const float *restrict src, int64_t rows, int64_t HS,
                      int64_t ld, float mul)
{
    for (int64_t r = 0; r < rows; r++)
#pragma omp simd
        for (int64_t d = 0; d < HS; d++)
            dst[r * HS + d] = src[r * ld + d] * mul;
}

/* dst (HS, ATT_BK) = transpose of rows (rows <= ATT_BK, HS) of src with stride ld. */
static void load_rows_t(float *restrict dst, const float *restrict src, int64_t rows, int64_t HS,
                        int64_t ld)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < HS; d++)
            dst[d * ATT_BK + r] = src[r * ld + d];
}

static void zero(float *p, size_t n) { memset(p, 0, n * sizeof *p); }

/* One query tile [i0, i0+nq) of head (b, h). */
static void fwd_tile(float *out, float *lse, const float *qkv, int64_t b, int64_t h, int64_t i0,
                     int64_t T, int64_t NH, int64_t HS, float *slot)
{
    const int64_t ld = QKV_ROW(NH, HS);
    const int64_t nq = T - i0 < ATT_BQ ? T - i0 : ATT_BQ;
    const float scale = 1.0f / sqrtf((float)HS);
    float *q = slot, *o = q + ATT_BQ * HS, *kt = o + ATT_BQ * HS, *s = kt + ATT_BK * HS;
    float *mrow = s + ATT_BQ * ATT_BK, *lrow = mrow + ATT_BQ;
    const float *base = qkv + (b * T * NH + h) * 3 * HS; /* q of (b, t=0, h) */

    load_rows(q, base + i0 * ld, nq, HS, ld, scale);
    zero(o, (size_t)(nq * HS));
    for (int64_t r = 0; r < nq; r++)
        mrow[r] = -INFINITY, lrow[r] = 0.0f;

    for (int64_t j0 = 0; j0 < i0 + nq; j0 += ATT_BK) {
        const int64_t nk = T - j0 < ATT_BK ? T - j0 : ATT_BK;
        load_rows_t(kt, base + j0 * ld + HS, nk, HS, ld);
        zero(s, (size_t)(nq * ATT_BK));
        tile_mm(nq, nk, HS, q, HS, 1, kt, ATT_BK, s, ATT_BK);
        for (int64_t r = 0; r < nq; r++) {
            /* keys j0 + c <= i0 + r are visible */
            int64_t nv = i0 + r - j0 + 1 < nk ? i0 + r - j0 + 1 : nk;
            float *sr = s + r * ATT_BK;
            if (nv <= 0) {
                zero(sr, (size_t)nk);
                continue;
            }
            float mx = mrow[r];
#pragma omp simd reduction(max : mx)
            for (int64_t c = 0; c < nv; c++)
                mx = sr[c] > mx ? sr[c] : mx;
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int64_t c = 0; c < nv; c++) {
                float e = pl_vexpf(sr[c] - mx);
                sr[c] = e;
                sum += e;
            }
            for (int64_t c = nv; c < nk; c++)
                sr[c] = 0.0f;
            float alpha = expf(mrow[r] - mx); /* 0 on the first tile: m = -inf */
            lrow[r] = lrow[r] * alpha + sum;
            mrow[r] = mx;
            if (alpha != 1.0f) {
                float *orow = o + r * HS;
#pragma omp simd
                for (int64_t d = 0; d < HS; d++)
                    orow[d] *= alpha;
            }
        }
        tile_mm(nq, HS, nk, s, ATT_BK, 1, base + j0 * ld + 2 * HS, ld, o, HS);
    }
    for (int64_t r = 0; r < nq; r++) {
        float *dst = out + ((b * T + i0 + r) * NH + h) * HS;
        float inv = 1.0f / lrow[r];
#pragma omp simd
        for (int64_t d = 0; d < HS; d++)
            dst[d] = o[r * HS + d] * inv;
        lse[(b * NH + h) * T + i0 + r] = mrow[r] + logf(lrow[r]);
    }
}

void pl_cpu_attention_fwd(float *out, float *lse, const float *qkv, int64_t B, int64_t T,
                          int64_t NH, int64_t HS, float *workspace)
{
    PL_DISPATCH(attention_fwd, out, lse, qkv, B, T, NH, HS, workspace);
    const int64_t nqt = (T + ATT_BQ - 1) / ATT_BQ;
    const int64_t items = B * NH * nqt;
    const size_t slot_n = attn_slot_floats(T, HS);
#pragma omp parallel if (items > 1)
    {
        float *slot = workspace + (size_t)omp_get_thread_num() * slot_n;
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            int64_t qt = nqt - 1 - it / (B * NH); /* last (longest) query tiles first */
            int64_t bh = it % (B * NH);
            fwd_tile(out, lse, qkv, bh / NH, bh % NH, qt * ATT_BQ, T, NH, HS, slot);
        }
    }
}

/* All of head (b, h): dq, dk, dv rows of this head are touched only here. */
static void bwd_head(float *dqkv, const float *dout, const float *qkv, const float *out,
                     const float *lse, int64_t b, int64_t h, int64_t T, int64_t NH, int64_t HS,
                     float *slot)
{
    const int64_t ld = QKV_ROW(NH, HS), ldo = NH * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    float *q = slot, *dy = q + ATT_BQ * HS, *kt = dy + ATT_BQ * HS, *vt = kt + ATT_BK * HS;
    float *k = vt + ATT_BK * HS, *dk = k + ATT_BK * HS, *dv = dk + ATT_BK * HS;
    float *p = dv + ATT_BK * HS, *dp = p + ATT_BQ * ATT_BK, *D = dp + ATT_BQ * ATT_BK;
    const float *base = qkv + (b * T * NH + h) * 3 * HS;
    float *dbase = dqkv + (b * T * NH + h) * 3 * HS;
    const float *obase = out + (b * T * NH + h) * HS, *dybase = dout + (b * T * NH + h) * HS;
    const float *lrow = lse + (b * NH + h) * T;

    for (int64_t t = 0; t < T; t++) {
        const float *yo = obase + t * ldo, *yd = dybase + t * ldo;
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int64_t d = 0; d < HS; d++)
            acc += yo[d] * yd[d];
        D[t] = acc;
    }
    for (int64_t j0 = 0; j0 < T; j0 += ATT_BK) {
        const int64_t nk = T - j0 < ATT_BK ? T - j0 : ATT_BK;
        load_rows(k, base + j0 * ld + HS, nk, HS, ld, 1.0f);
        load_rows_t(kt, base + j0 * ld + HS, nk, HS, ld);
        load_rows_t(vt, base + j0 * ld + 2 * HS, nk, HS, ld);
        zero(dk, (size_t)(nk * HS));
        zero(dv, (size_t)(nk * HS));
        for (int64_t i0 = (j0 / ATT_BQ) * ATT_BQ; i0 < T; i0 += ATT_BQ) {
            const int64_t nq = T - i0 < ATT_BQ ? T - i0 : ATT_BQ;
            load_rows(q, base + i0 * ld, nq, HS, ld, 1.0f);
            load_rows(dy, dybase + i0 * ldo, nq, HS, ldo, 1.0f);
            zero(p, (size_t)(nq * ATT_BK));
            tile_mm(nq, nk, HS, q, HS, 1, kt, ATT_BK, p, ATT_BK);
            for (int64_t r = 0; r < nq; r++) {
                int64_t nv = i0 + r - j0 + 1 < nk ? i0 + r - j0 + 1 : nk;
                nv = nv < 0 ? 0 : nv;
                float *pr = p + r * ATT_BK, l = lrow[i0 + r];
#pragma omp simd
                for (int64_t c = 0; c < nv; c++)
                    pr[c] = pl_vexpf(pr[c] * scale - l);
                for (int64_t c = nv; c < nk; c++)
                    pr[c] = 0.0f;
            }
            /* dv (nk, HS) += P^T (nk, nq) . dout_i (nq, HS) */
            tile_mm(nk, HS, nq, p, 1, ATT_BK, dy, HS, dv, HS);
            zero(dp, (size_t)(nq * ATT_BK));
            tile_mm(nq, nk, HS, dy, HS, 1, vt, ATT_BK, dp, ATT_BK);
            for (int64_t r = 0; r < nq; r++) {
                float *pr = p + r * ATT_BK, *dpr = dp + r * ATT_BK, Dr = D[i0 + r];
#pragma omp simd
                for (int64_t c = 0; c < nk; c++)
                    dpr[c] = pr[c] * (dpr[c] - Dr) * scale;
            }
            /* dk (nk, HS) += dS^T (nk, nq) . q_i (nq, HS); dq_i (nq, HS) += dS . k */
            tile_mm(nk, HS, nq, dp, 1, ATT_BK, q, HS, dk, HS);
            tile_mm(nq, HS, nk, dp, ATT_BK, 1, k, HS, dbase + i0 * ld, ld);
        }
        for (int64_t r = 0; r < nk; r++) {
            float *dkr = dbase + (j0 + r) * ld + HS, *dvr = dkr + HS;
#pragma omp simd
            for (int64_t d = 0; d < HS; d++) {
                dkr[d] += dk[r * HS + d];
                dvr[d] += dv[r * HS + d];
            }
        }
    }
}

void pl_cpu_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                          const float *lse, int64_t B, int64_t T, int64_t NH, int64_t HS,
                          float *workspace)
{
    PL_DISPATCH(attention_bwd, dqkv, dout, qkv, out, lse, B, T, NH, HS, workspace);
    const size_t slot_n = attn_slot_floats(T, HS);
#pragma omp parallel if (B * NH > 1)
    {
        float *slot = workspace + (size_t)omp_get_thread_num() * slot_n;
#pragma omp for schedule(dynamic, 1)
        for (int64_t bh = 0; bh < B * NH; bh++)
            bwd_head(dqkv, dout, qkv, out, lse, bh / NH, bh % NH, T, NH, HS, slot);
    }
}
