/* Fast twin: self-attention, flash-attention style.
 *
 * Forward: work items are (b, h, query tile of ATT_BQ rows), scheduled
 * dynamically, longest first. A query tile walks the key tiles of ATT_BK rows
 * that some of its queries see (up to the diagonal if causal, below kv_len[b]
 * if padded; the others are skipped), with an online softmax: running row max
 * m and sum l, rescaled output accumulator O. Saves lse = m + log(l). Dropout
 * multiplies a tile's exponentials by Z/(1-p) after they are added to l, so l
 * and lse are those of the undropped softmax.
 *
 * Backward (FlashAttention-2): work items are (b, g) pairs, so the thread that
 * owns a pair owns its group's dk and dv rows and its QG heads' dq rows, and
 * no reduction crosses threads. For each key tile j (k and v loaded once for
 * the group), for each query head of the group (j ascending), for each query
 * tile i that sees some of the key tile, recompute S = q k^T,
 * P = exp(S * scale - lse), then
 *   dv_j += (P Z/(1-p))^T do_i, dP~ = Z/(1-p) do_i v_j^T,
 *   dS = P (dP~ - D_i) * scale, dk_j += dS^T q_i, dq_i += dS k_j,
 * with D = rowsum(do * out). Nothing of size (T, T) exists.
 *
 * Dropout mask: drop_tile() forms Z/(1-p) for a (query tile, key tile) pair
 * from Philox4x32-10 blocks computed in one loop over (row, block) that
 * vectorizes (the arithmetic of pl_philox4x32, inline); one block serves 4
 * consecutive keys of a row. Integer arithmetic only, so both twins and both
 * instruction set builds draw the same mask, in forward, backward and any
 * recomputation.
 *
 * Tile products go through tile_mm(): register-blocked on the generic
 * vectors of simd.h, with an axpy-form edge loop whose inner loop runs along
 * contiguous rows of the right operand. Every result depends only on the
 * shapes, never on the thread count. The GPT case (G = NH, causal, no padding,
 * no dropout) performs the operations of the multi-head kernel this one
 * generalises, in the same order: same bits.
 *
 * Relative position bias (T5): a tile's scores get the bias of each (query,
 * key) distance added after the product, in forward and in backward's
 * recomputation of P. Backward's bias gradient, the unscaled dS, goes to a
 * per-sample (NH, 2T-1) area after the thread slots (a (b, g) work item owns
 * its sample's rows of its heads), summed over samples in order at the end.
 * Without a bias none of this runs: the paths and their bits are unchanged.
 *
 * Workspace (floats): the larger of the reference's 3 max(T, Tk) and
 * omp_get_max_threads() slots of attn_slot_floats(), plus B NH (2T-1) with a
 * relative position bias; the cpu kernels must run with at most as many
 * threads as when the workspace was sized. */
#include "kernels/kernels.h"

#include "base/rng.h"
#include "base/status.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threads.h"

#include <math.h>
#include <string.h>

#define ATT_BQ 64
#define ATT_BK 64

/* Per-thread slot: forward uses q, o, kt, s, m, l and z; backward uses q,
 * dout, kt, vt, k, dk, dv, p, dp, D (QG*T floats) and z. z holds a tile's
 * dropout factors. */
static size_t attn_slot_floats(const pl_attn_shape *s)
{
    size_t tile_q = (size_t)ATT_BQ * (size_t)s->HS, tile_k = (size_t)ATT_BK * (size_t)s->HS;
    size_t tile_s = (size_t)ATT_BQ * ATT_BK;
    size_t fwd = 2 * tile_q + tile_k + tile_s + 2 * ATT_BQ + tile_s;
    size_t bwd = 2 * tile_q + 5 * tile_k + 2 * tile_s + (size_t)(s->NH / s->G * s->T) + tile_s;
    size_t n = fwd > bwd ? fwd : bwd;
    return (n + 15) & ~(size_t)15; /* keep slots 64-byte apart (no false sharing) */
}

size_t pl_attention_workspace(const pl_attn_shape *s)
{
    PL_ASSERT(s->T >= 0 && s->HS >= 1 && s->G >= 1 && s->NH % s->G == 0);
    size_t cpu = (size_t)omp_get_max_threads() * attn_slot_floats(s);
    size_t ref = 3 * (size_t)(s->T > s->Tk ? s->T : s->Tk);
    if (s->rel_bias)
        cpu += (size_t)(s->B * s->NH * (2 * s->T - 1));
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

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* What the work items need, derived from the shape. Each thread holds its own
 * copy (on its stack), shape included: the caller's struct, or one on the
 * calling thread's stack, may share a cache line with data another thread
 * writes, and the loops read these fields again after their float stores
 * (-fno-strict-aliasing).
 *
 * Where q, k and v live: self-attention reads all three from qkv
 * (B,T,G,QG+2,HS); cross-attention reads q (B,T,NH,HS) and kv (B,Tk,G,2,HS).
 * Query head j of group g of sample b at t = 0 is at b qb + g qg + j HS of
 * the q buffer, its group's key at b kb + g kg + k0 of the kv buffer and the
 * value HS after it; rows (consecutive t) are ldq and ldk apart. The two
 * layouts differ only in these numbers, so self-attention's arithmetic (and
 * its bits) is the same whichever way it is reached. */
typedef struct attn_plan {
    pl_attn_shape s;
    int64_t QG;       /* query heads per KV group */
    int64_t Tk;       /* keys per sample: T, or the shape's Tk (cross-attention) */
    int64_t ldq, qb, qg, ldk, kb, kg, k0;
    int64_t ldo;      /* row stride of out, NH*HS */
    float scale;      /* 1/sqrt(HS), or the shape's */
    int drop;         /* dropout > 0 */
    uint32_t thr;     /* a key is dropped when its word < thr */
    float keep;       /* 1/(1-p), the factor of a kept probability */
    uint32_t key[2], stream[2]; /* Philox key (seed) and counter words 2, 3 (stream) */
} attn_plan;

static attn_plan plan_of(const pl_attn_shape *s, int cross)
{
    attn_plan a;
    a.s = *s;
    a.QG = s->NH / s->G;
    a.Tk = cross ? s->Tk : s->T;
    if (cross) {
        a.ldq = s->NH * s->HS, a.qb = s->T * a.ldq, a.qg = a.QG * s->HS;
        a.ldk = s->G * 2 * s->HS, a.kb = a.Tk * a.ldk, a.kg = 2 * s->HS, a.k0 = 0;
    } else {
        a.ldq = a.ldk = s->G * (a.QG + 2) * s->HS;
        a.qb = a.kb = s->T * a.ldq;
        a.qg = a.kg = (a.QG + 2) * s->HS;
        a.k0 = a.QG * s->HS;
    }
    a.ldo = s->NH * s->HS;
    a.scale = s->scale > 0.0f ? s->scale : 1.0f / sqrtf((float)s->HS);
    a.drop = s->dropout > 0.0f;
    a.thr = pl_dropout_threshold(s->dropout);
    a.keep = 1.0f / (1.0f - s->dropout);
    a.key[0] = (uint32_t)s->drop_seed, a.key[1] = (uint32_t)(s->drop_seed >> 32);
    a.stream[0] = (uint32_t)s->drop_stream, a.stream[1] = (uint32_t)(s->drop_stream >> 32);
    return a;
}

/* Offsets of group g of sample b at t = 0: its first query head's q (in the q
 * buffer) and its key (in the kv buffer; the value is HS further). */
static int64_t q_at(const attn_plan *a, int64_t b, int64_t g) { return b * a->qb + g * a->qg; }
static int64_t k_at(const attn_plan *a, int64_t b, int64_t g)
{
    return b * a->kb + g * a->kg + a->k0;
}

/* Keys of sample b that any query may see: keys 0 .. key_len - 1. */
static int64_t key_len(const attn_plan *a, int64_t b)
{
    return a->s.kv_len ? a->s.kv_len[b] : a->Tk;
}

/* Philox blocks per row of a tile: 64 keys starting anywhere in a block of 4. */
#define ATT_NB (ATT_BK / 4 + 1)

/* z (nq, ATT_BK) = Z/(1-p) of keys [j0, j0+nk) for queries [i0, i0+nq) of
 * head h of sample b (the mask element's index is in kernels.h). Key c of row
 * r has index first + r Tk + c (Tk = T but in cross-attention), the word
 * ((first + r Tk) & 3) + c of the row's ATT_NB Philox blocks from counter
 * (first + r Tk) >> 2. The blocks of all rows are computed in one loop over
 * (row, block) pairs that vectorizes: the rounds of pl_philox4x32, written out
 * here (the tests compare the mask with pl_rng_u32). */
static void drop_tile(float *restrict z, const attn_plan *a, int64_t b, int64_t h, int64_t i0,
                      int64_t nq, int64_t j0, int64_t nk)
{
    const pl_attn_shape *s = &a->s;
    const uint64_t T = (uint64_t)s->T, Tk = (uint64_t)a->Tk;
    const uint64_t head = (uint64_t)s->sample[b] * (uint64_t)s->NHg + (uint64_t)(s->h0 + h);
    const uint64_t first = (head * T + (uint64_t)i0) * Tk + (uint64_t)j0;
    const uint32_t key0 = a->key[0], key1 = a->key[1], s0 = a->stream[0], s1 = a->stream[1];
    uint32_t words[ATT_BQ * ATT_NB * 4]; /* row r's blocks at r * ATT_NB * 4 */
    const int32_t npairs = (int32_t)nq * ATT_NB;
#pragma omp simd
    for (int32_t pair = 0; pair < npairs; pair++) {
        const uint32_t r = (uint32_t)pair / ATT_NB, i = (uint32_t)pair % ATT_NB;
        const uint64_t blk = ((first + r * Tk) >> 2) + i;
        uint32_t c0 = (uint32_t)blk, c1 = (uint32_t)(blk >> 32), c2 = s0, c3 = s1;
        uint32_t k0 = key0, k1 = key1;
        for (int round = 0; round < 10; round++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
            c1 = (uint32_t)p1;
            c3 = (uint32_t)p0;
            c0 = n0;
            c2 = n2;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        words[4 * pair] = c0;
        words[4 * pair + 1] = c1;
        words[4 * pair + 2] = c2;
        words[4 * pair + 3] = c3;
    }
    const uint32_t thr = a->thr;
    const float keep = a->keep;
    for (int64_t r = 0; r < nq; r++) {
        const uint32_t *w = words + r * ATT_NB * 4 + ((first + (uint64_t)r * Tk) & 3);
        float *zr = z + r * ATT_BK;
#pragma omp simd
        for (int64_t c = 0; c < nk; c++)
            zr[c] = w[c] >= thr ? keep : 0.0f;
    }
}

/* sc (nq, ATT_BK) += the relative position bias of queries [i0, i0+nq) and
 * keys [j0, j0+nk) of head h: row r's keys read consecutive elements. */
static void add_rel_bias(float *restrict sc, const attn_plan *a, int64_t h, int64_t i0,
                         int64_t nq, int64_t j0, int64_t nk)
{
    const int64_t T = a->s.T;
    const float *hb = a->s.rel_bias + h * (2 * T - 1) + T - 1 + j0 - i0;
    for (int64_t r = 0; r < nq; r++) {
        const float *restrict br = hb - r;
        float *restrict sr = sc + r * ATT_BK;
#pragma omp simd
        for (int64_t c = 0; c < nk; c++)
            sr[c] += br[c];
    }
}

/* One query tile [i0, i0+nq) of head h of sample b. */
static void fwd_tile(float *out, float *lse, const float *qsrc, const float *kvsrc,
                     const attn_plan *a, int64_t b, int64_t h, int64_t i0, float *slot)
{
    const pl_attn_shape *s = &a->s;
    const int64_t T = s->T, NH = s->NH, HS = s->HS, ldq = a->ldq, ldk = a->ldk;
    const int64_t nq = min64(T - i0, ATT_BQ);
    float *q = slot, *o = q + ATT_BQ * HS, *kt = o + ATT_BQ * HS, *sc = kt + ATT_BK * HS;
    float *mrow = sc + ATT_BQ * ATT_BK, *lrow = mrow + ATT_BQ, *z = lrow + ATT_BQ;
    const int64_t g = h / a->QG;
    const float *qbase = qsrc + q_at(a, b, g) + h % a->QG * HS, *kbase = kvsrc + k_at(a, b, g);
    const float *vbase = kbase + HS;
    const int causal = s->causal, drop = a->drop; /* locals: stores to floats may alias *s */
    const int64_t L = key_len(a, b), kend = causal ? min64(i0 + nq, L) : L;

    load_rows(q, qbase + i0 * ldq, nq, HS, ldq, a->scale);
    zero(o, (size_t)(nq * HS));
    for (int64_t r = 0; r < nq; r++)
        mrow[r] = -INFINITY, lrow[r] = 0.0f;

    for (int64_t j0 = 0; j0 < kend; j0 += ATT_BK) {
        const int64_t nk = min64(L - j0, ATT_BK);
        load_rows_t(kt, kbase + j0 * ldk, nk, HS, ldk);
        zero(sc, (size_t)(nq * ATT_BK));
        tile_mm(nq, nk, HS, q, HS, 1, kt, ATT_BK, sc, ATT_BK);
        if (s->rel_bias)
            add_rel_bias(sc, a, h, i0, nq, j0, nk);
        if (drop)
            drop_tile(z, a, b, h, i0, nq, j0, nk);
        /* row r sees keys j0 + c for c < nv = min(seen + r, nk): c <= i0 + r - j0
         * if causal, else all nk (one expression: a conditional per row made
         * GCC's AVX-512 build of this loop 15% slower) */
        const int64_t seen = causal ? i0 - j0 + 1 : ATT_BK;
        for (int64_t r = 0; r < nq; r++) {
            int64_t nv = min64(seen + r, nk);
            float *sr = sc + r * ATT_BK;
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
            if (drop) {
                const float *zr = z + r * ATT_BK;
#pragma omp simd
                for (int64_t c = 0; c < nv; c++)
                    sr[c] *= zr[c];
            }
        }
        tile_mm(nq, HS, nk, sc, ATT_BK, 1, vbase + j0 * ldk, ldk, o, HS);
    }
    for (int64_t r = 0; r < nq; r++) {
        float *dst = out + (b * T + i0 + r) * a->ldo + h * HS;
        float inv = 1.0f / lrow[r];
#pragma omp simd
        for (int64_t d = 0; d < HS; d++)
            dst[d] = o[r * HS + d] * inv;
        lse[(b * NH + h) * T + i0 + r] = mrow[r] + logf(lrow[r]);
    }
}

static void attention_fwd(float *out, float *lse, const float *q, const float *kv,
                          const pl_attn_shape *s, int cross, float *workspace)
{
    pl_attention_check(s, cross);
    const int64_t BH = s->B * s->NH, NH = s->NH, nqt = (s->T + ATT_BQ - 1) / ATT_BQ;
    const int64_t items = BH * nqt;
    const size_t slot_n = attn_slot_floats(s);
#pragma omp parallel if (items > 1)
    {
        const attn_plan a = plan_of(s, cross);
        float *slot = workspace + (size_t)omp_get_thread_num() * slot_n;
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            int64_t qt = nqt - 1 - it / BH; /* last (longest if causal) query tiles first */
            int64_t bh = it % BH;
            fwd_tile(out, lse, q, kv, &a, bh / NH, bh % NH, qt * ATT_BQ, slot);
        }
    }
}

void pl_cpu_attention_fwd(float *out, float *lse, const float *qkv, const pl_attn_shape *s,
                          float *workspace)
{
    PL_DISPATCH(attention_fwd, out, lse, qkv, s, workspace);
    attention_fwd(out, lse, qkv, qkv, s, 0, workspace);
}

void pl_cpu_attention_cross_fwd(float *out, float *lse, const float *q, const float *kv,
                                const pl_attn_shape *s, float *workspace)
{
    PL_DISPATCH(attention_cross_fwd, out, lse, q, kv, s, workspace);
    attention_fwd(out, lse, q, kv, s, 1, workspace);
}

/* The relative position bias gradient of a tile into db (2T-1) of its head:
 * the unscaled dS, P (dP~ - D), of query i0 + r and key j0 + c added at
 * T-1 + j0 + c - i0 - r (masked keys have P = 0). */
static void bias_grad(float *db, const float *p, const float *dp, const float *z,
                      const float *D, int drop, int64_t T, int64_t i0, int64_t nq, int64_t j0,
                      int64_t nk)
{
    for (int64_t r = 0; r < nq; r++) {
        const float *pr = p + r * ATT_BK, *dpr = dp + r * ATT_BK, Dr = D[i0 + r];
        float *dr = db + T - 1 + j0 - i0 - r;
        if (drop) {
            const float *zr = z + r * ATT_BK;
            for (int64_t c = 0; c < nk; c++)
                dr[c] += pr[c] * (dpr[c] * zr[c] - Dr);
        } else {
            for (int64_t c = 0; c < nk; c++)
                dr[c] += pr[c] * (dpr[c] - Dr);
        }
    }
}

/* All of group g of sample b: its dk and dv rows, and the dq rows of its QG
 * query heads, are touched only here (and, with a relative position bias, the
 * rows of its heads in dbias, the sample's (NH, 2T-1) gradient area). */
static void bwd_group(float *dq, float *dkv, const float *dout, const float *qsrc,
                      const float *kvsrc, const float *out, const float *lse, const attn_plan *a,
                      int64_t b, int64_t g, float *slot, float *dbias)
{
    const pl_attn_shape *s = &a->s;
    const int64_t T = s->T, NH = s->NH, HS = s->HS, QG = a->QG, ldq = a->ldq, ldk = a->ldk;
    const int64_t ldo = a->ldo;
    const float scale = a->scale;
    const int causal = s->causal, drop = a->drop; /* locals: stores to floats may alias *s */
    const int rb = s->rel_bias != NULL;
    float *q = slot, *dy = q + ATT_BQ * HS, *kt = dy + ATT_BQ * HS, *vt = kt + ATT_BK * HS;
    float *k = vt + ATT_BK * HS, *dk = k + ATT_BK * HS, *dv = dk + ATT_BK * HS;
    float *p = dv + ATT_BK * HS, *dp = p + ATT_BQ * ATT_BK, *D = dp + ATT_BQ * ATT_BK;
    float *z = D + QG * T;
    const float *gbase = qsrc + q_at(a, b, g), *kbase = kvsrc + k_at(a, b, g), *vbase = kbase + HS;
    float *dgbase = dq + q_at(a, b, g), *dkbase = dkv + k_at(a, b, g);
    const int64_t L = key_len(a, b);

    for (int64_t j = 0; j < QG; j++) {
        const int64_t h = g * QG + j;
        const float *obase = out + b * T * ldo + h * HS, *dybase = dout + b * T * ldo + h * HS;
        for (int64_t t = 0; t < T; t++) {
            const float *yo = obase + t * ldo, *yd = dybase + t * ldo;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int64_t d = 0; d < HS; d++)
                acc += yo[d] * yd[d];
            D[j * T + t] = acc;
        }
    }
    for (int64_t j0 = 0; j0 < L; j0 += ATT_BK) {
        const int64_t nk = min64(L - j0, ATT_BK);
        load_rows(k, kbase + j0 * ldk, nk, HS, ldk, 1.0f);
        load_rows_t(kt, kbase + j0 * ldk, nk, HS, ldk);
        load_rows_t(vt, vbase + j0 * ldk, nk, HS, ldk);
        zero(dk, (size_t)(nk * HS));
        zero(dv, (size_t)(nk * HS));
        for (int64_t j = 0; j < QG; j++) {
            const int64_t h = g * QG + j;
            const float *qbase = gbase + j * HS, *dybase = dout + b * T * ldo + h * HS;
            float *dqbase = dgbase + j * HS;
            const float *lrow = lse + (b * NH + h) * T, *Dj = D + j * T;
            /* causal: query tiles from the one holding the diagonal of key tile j0 */
            for (int64_t i0 = causal ? (j0 / ATT_BQ) * ATT_BQ : 0; i0 < T; i0 += ATT_BQ) {
                const int64_t nq = min64(T - i0, ATT_BQ);
                load_rows(q, qbase + i0 * ldq, nq, HS, ldq, 1.0f);
                load_rows(dy, dybase + i0 * ldo, nq, HS, ldo, 1.0f);
                zero(p, (size_t)(nq * ATT_BK));
                tile_mm(nq, nk, HS, q, HS, 1, kt, ATT_BK, p, ATT_BK);
                if (rb) { /* scores: scale q k^T + bias, so the bias goes in scaled units */
                    for (int64_t r = 0; r < nq; r++)
#pragma omp simd
                        for (int64_t c = 0; c < nk; c++)
                            p[r * ATT_BK + c] *= scale;
                    add_rel_bias(p, a, h, i0, nq, j0, nk);
                }
                const float pscale = rb ? 1.0f : scale;
                const int64_t seen = causal ? i0 - j0 + 1 : ATT_BK; /* as in fwd_tile */
                for (int64_t r = 0; r < nq; r++) {
                    int64_t nv = min64(seen + r, nk);
                    nv = nv < 0 ? 0 : nv;
                    float *pr = p + r * ATT_BK, l = lrow[i0 + r];
#pragma omp simd
                    for (int64_t c = 0; c < nv; c++)
                        pr[c] = pl_vexpf(pr[c] * pscale - l);
                    for (int64_t c = nv; c < nk; c++)
                        pr[c] = 0.0f;
                }
                /* dv (nk, HS) += (P Z/(1-p))^T (nk, nq) . dout_i (nq, HS) */
                if (drop) {
                    drop_tile(z, a, b, h, i0, nq, j0, nk);
                    for (int64_t r = 0; r < nq; r++) {
                        const float *pr = p + r * ATT_BK, *zr = z + r * ATT_BK;
                        float *pzr = dp + r * ATT_BK;
#pragma omp simd
                        for (int64_t c = 0; c < nk; c++)
                            pzr[c] = pr[c] * zr[c];
                    }
                    tile_mm(nk, HS, nq, dp, 1, ATT_BK, dy, HS, dv, HS);
                } else {
                    tile_mm(nk, HS, nq, p, 1, ATT_BK, dy, HS, dv, HS);
                }
                zero(dp, (size_t)(nq * ATT_BK));
                tile_mm(nq, nk, HS, dy, HS, 1, vt, ATT_BK, dp, ATT_BK);
                if (dbias)
                    bias_grad(dbias + h * (2 * T - 1), p, dp, z, Dj, drop, T, i0, nq, j0, nk);
                for (int64_t r = 0; r < nq; r++) {
                    float *pr = p + r * ATT_BK, *dpr = dp + r * ATT_BK, Dr = Dj[i0 + r];
                    if (drop) {
                        const float *zr = z + r * ATT_BK;
#pragma omp simd
                        for (int64_t c = 0; c < nk; c++)
                            dpr[c] = pr[c] * (dpr[c] * zr[c] - Dr) * scale;
                    } else {
#pragma omp simd
                        for (int64_t c = 0; c < nk; c++)
                            dpr[c] = pr[c] * (dpr[c] - Dr) * scale;
                    }
                }
                /* dk (nk, HS) += dS^T (nk, nq) . q_i (nq, HS); dq_i (nq, HS) += dS . k */
                tile_mm(nk, HS, nq, dp, 1, ATT_BK, q, HS, dk, HS);
                tile_mm(nq, HS, nk, dp, ATT_BK, 1, k, HS, dqbase + i0 * ldq, ldq);
            }
        }
        for (int64_t r = 0; r < nk; r++) {
            float *dkr = dkbase + (j0 + r) * ldk, *dvr = dkr + HS;
#pragma omp simd
            for (int64_t d = 0; d < HS; d++) {
                dkr[d] += dk[r * HS + d];
                dvr[d] += dv[r * HS + d];
            }
        }
    }
}

static void attention_bwd(float *dq, float *dkv, const float *dout, const float *q,
                          const float *kv, const float *out, const float *lse,
                          const pl_attn_shape *s, int cross, float *workspace)
{
    pl_attention_check(s, cross);
    const int64_t BG = s->B * s->G, G = s->G, nb = s->NH * (2 * s->T - 1);
    const size_t slot_n = attn_slot_floats(s);
    /* the per-sample bias gradients after the thread slots */
    float *dbias = s->drel_bias ? workspace + (size_t)omp_get_max_threads() * slot_n : NULL;
    if (dbias)
        zero(dbias, (size_t)(s->B * nb));
#pragma omp parallel if (BG > 1)
    {
        const attn_plan a = plan_of(s, cross);
        float *slot = workspace + (size_t)omp_get_thread_num() * slot_n;
#pragma omp for schedule(dynamic, 1)
        for (int64_t bg = 0; bg < BG; bg++)
            bwd_group(dq, dkv, dout, q, kv, out, lse, &a, bg / G, bg % G, slot,
                      dbias ? dbias + bg / G * nb : NULL);
    }
    for (int64_t b = 0; dbias && b < s->B; b++)
        for (int64_t i = 0; i < nb; i++)
            s->drel_bias[i] += dbias[b * nb + i];
}

void pl_cpu_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                          const float *lse, const pl_attn_shape *s, float *workspace)
{
    PL_DISPATCH(attention_bwd, dqkv, dout, qkv, out, lse, s, workspace);
    attention_bwd(dqkv, dqkv, dout, qkv, qkv, out, lse, s, 0, workspace);
}

void pl_cpu_attention_cross_bwd(float *dq, float *dkv, const float *dout, const float *q,
                                const float *kv, const float *out, const float *lse,
                                const pl_attn_shape *s, float *workspace)
{
    PL_DISPATCH(attention_cross_bwd, dq, dkv, dout, q, kv, out, lse, s, workspace);
    attention_bwd(dq, dkv, dout, q, kv, out, lse, s, 1, workspace);
}
