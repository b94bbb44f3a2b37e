/* Kernels: the math of a GPT step over raw float pointers.
 *
 * Every kernel exists twice with one signature: pl_ref_* in src/kernels/ref/
 * (plain scalar loops, the executable specification) and pl_cpu_* in
 * src/kernels/cpu/ (threaded with OpenMP, tiled, GEMMs through oneDNN).
 * Tests compare the twins on random inputs and check every backward against
 * float64 finite differences.
 *
 * Rules shared by all kernels:
 * - Pure: no allocation, no I/O, no MPI, no globals. Scratch memory is passed
 *   in, sized by the matching *_workspace() function, which returns a count
 *   of floats (not bytes); one workspace serves both twins.
 * - Shape letters: B batch, T sequence, C channels (hidden), NH heads, G KV
 *   groups (grouped-query attention), HS head size (C = NH*HS on one TP rank),
 *   N = B*T rows, OC output channels, V vocabulary rows held by this rank (a
 *   vocab-parallel slice [v0, v0+V)).
 *   Row-major, innermost dimension last.
 * - Backward kernels ADD into every gradient they produce (parameter and
 *   activation gradients alike); the caller zeroes buffers when needed. This
 *   gives gradient accumulation over micro-batches and residual branches for free.
 *   Exceptions, because they transform a buffer rather than produce one: the
 *   rotary embedding (rope_fwd and rope_bwd work in place on q and k) and
 *   dropout (out = masked inp, the same kernel for the gradient).
 * - Results do not depend on the number of threads (fixed-order reductions).
 * - The pl_gemm context is the only stateful object: a oneDNN engine and stream
 *   and a cache of matmul primitives, one per (shape, transposes, beta). Kernels
 *   that use GEMMs take it; pl_ref_* take it too and ignore it. */
#ifndef PL_KERNELS_KERNELS_H
#define PL_KERNELS_KERNELS_H

#include "plait.h"

#include <stddef.h>
#include <stdint.h>

/* ---- GEMM (oneDNN) ------------------------------------------------------ */

typedef struct pl_gemm pl_gemm;

pl_status pl_gemm_init(pl_gemm **out);
void pl_gemm_free(pl_gemm *g);

/* C(M,N) = op(A)(M,K) . op(B)(K,N) + beta * C, beta 0 or 1.
 * op(A) = A (M,K) with row stride lda, or if ta, A^T where A is (K,M) with row stride lda.
 * op(B) = B (K,N) with row stride ldb, or if tb, B^T where B is (N,K) with row stride ldb.
 * C has row stride ldc. The primitive for a shape is created on first use and
 * reused; pl_gemm_prepare() creates it ahead (the plan phase), so the step loop
 * allocates nothing. */
pl_status pl_gemm_prepare(pl_gemm *g, int ta, int tb, int64_t M, int64_t N, int64_t K,
                          int64_t lda, int64_t ldb, int64_t ldc, float beta);
pl_status pl_gemm_run(pl_gemm *g, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                      float *C, int64_t ldc);
/* Precision of the products (the context's mode, fp32 by default):
 *   PL_GEMM_FP32  fp32 operands, fp32 accumulation.
 *   PL_GEMM_BF16  A and B rounded to bf16 (nearest even) into scratch owned by
 *                 the context, multiplied by oneDNN's bf16 x bf16 -> f32 matmul
 *                 (fp32 accumulation); C stays fp32 with the same beta semantics.
 *   PL_GEMM_FP16  A and B rounded to fp16 (nearest even, beyond 65504 -> Inf)
 *                 and multiplied in fp32: the products of fp16 values are exact
 *                 in fp32, so this is fp16 x fp16 -> fp32 arithmetic on a CPU
 *                 without fp16 matrix instructions.
 * The reduced modes convert op(A) and op(B) into compact buffers, so their
 * primitives do not depend on lda/ldb. Set it before the step loop; a mode's
 * scratch (pl_gemm_convert_bytes) grows when a larger shape is prepared or run. */
typedef enum pl_gemm_precision { PL_GEMM_FP32 = 0, PL_GEMM_BF16 = 1, PL_GEMM_FP16 = 2 } pl_gemm_precision;
void pl_gemm_set_precision(pl_gemm *g, pl_gemm_precision p);
/* Reduced modes: operand elements converted so far (plait bench reports them per
 * step), and the count restarted. */
int64_t pl_gemm_converted(const pl_gemm *g);
void pl_gemm_converted_reset(pl_gemm *g);
pl_gemm_precision pl_gemm_get_precision(const pl_gemm *g);
/* "fp32", "bf16" or "fp16". */
const char *pl_gemm_precision_name(pl_gemm_precision p);
/* Bytes of operand-conversion scratch the context holds (0 in fp32 mode). */
size_t pl_gemm_convert_bytes(const pl_gemm *g);
/* Bytes of the buffer of fp32 products computed transposed (gemm.c), grown as
 * the conversion buffer. */
size_t pl_gemm_swap_bytes(const pl_gemm *g);
/* Naive triple loop with the same contract (the reference twin). */
void pl_ref_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* ---- instruction set of the cpu twins ------------------------------------
 * The cpu twins exist in two builds of the same source: portable (the x86-64
 * baseline, or whatever the compiler targets) and, with GCC on x86-64, an
 * AVX-512 build (AVX512F/BW/VL/DQ + FMA) chosen at run time when the CPU has
 * it. The choice is made once, on first use: AVX-512 if the CPU supports it,
 * unless the environment variable PLAIT_ISA is "portable". Both builds follow
 * the same contract; they may differ in the last bits (vector widths change
 * the order of row reductions; the AVX-512 tile products use FMA). */
typedef enum pl_isa { PL_ISA_PORTABLE = 0, PL_ISA_AVX512 = 1 } pl_isa;

/* The instruction set the cpu twins run now. */
pl_isa pl_cpu_isa(void);
/* Selects isa for later calls, capped at what the CPU and the build support;
 * returns the one now in effect (tests run both). Call it between kernels,
 * from serial code. */
pl_isa pl_cpu_isa_set(pl_isa isa);
/* "portable" or "avx512". */
const char *pl_cpu_isa_name(pl_isa isa);

/* Declares pl_ref_NAME and pl_cpu_NAME with the same parameters. */
#define PL_KERNEL(name, ...)                                                                       \
    void pl_ref_##name(__VA_ARGS__);                                                               \
    void pl_cpu_##name(__VA_ARGS__)
#define PL_KERNEL_ST(name, ...)                                                                    \
    pl_status pl_ref_##name(__VA_ARGS__);                                                          \
    pl_status pl_cpu_##name(__VA_ARGS__)

/* ---- precision conversion ---------------------------------------------------
 * Scalar conversions (round to nearest, ties to even; NaN stays NaN, quiet; Inf
 * stays Inf; fp16 overflows to Inf from 65520 up and has denormals down to
 * 2^-24; bf16 rounds fp32 denormals like any other value). */
uint16_t pl_ref_bf16_from_f32(float f);
float pl_ref_bf16_to_f32(uint16_t h);
uint16_t pl_ref_fp16_from_f32(float f);
float pl_ref_fp16_to_f32(uint16_t h);
/* dst (rows, cols) compact = bf16 of src (rows, cols) with row stride lds. */
PL_KERNEL(f32_to_bf16, uint16_t *dst, const float *src, int64_t rows, int64_t cols, int64_t lds);
/* dst (rows, cols) compact = src rounded to fp16 and back to fp32, src row stride lds. */
PL_KERNEL(round_fp16, float *dst, const float *src, int64_t rows, int64_t cols, int64_t lds);
/* Saved activations in bf16 (--bf16): x[i] becomes its bf16 value (in fp32
 * storage, so the caller goes on with exactly what it saved) and, when packed is
 * not NULL, packed[i] its bf16 bits. n elements. */
PL_KERNEL(round_bf16, uint16_t *packed, float *x, int64_t n);
/* dst[i] = the bf16 value src[i] (exact), n elements. */
PL_KERNEL(widen_bf16, float *dst, const uint16_t *src, int64_t n);

/* ---- embeddings --------------------------------------------------------- */

/* out (N,C) = wte[ids[n] - v0] for ids in [v0, v0+V), else 0 (vocab-parallel). wte (V,C). */
PL_KERNEL(embedding_fwd, float *out, const int32_t *ids, const float *wte, int64_t N, int64_t C,
          int64_t v0, int64_t V);
/* dwte (V,C) += dout rows of the ids in range. Deterministic for repeated ids. */
PL_KERNEL(embedding_bwd, float *dwte, const float *dout, const int32_t *ids, int64_t N, int64_t C,
          int64_t v0, int64_t V);
/* out (B,T,C) += wpe[t] for t < T. wpe (T or more, C). */
PL_KERNEL(pos_embedding_fwd, float *out, const float *wpe, int64_t B, int64_t T, int64_t C);
/* dwpe (T,C) += sum over b of dout (B,T,C). */
PL_KERNEL(pos_embedding_bwd, float *dwpe, const float *dout, int64_t B, int64_t T, int64_t C);

/* ---- elementwise -------------------------------------------------------- */

/* out (N,OC) += bias (OC) broadcast over rows. */
PL_KERNEL(bias_fwd, float *out, const float *bias, int64_t N, int64_t OC);
/* dbias (OC) += column sums of dout (N,OC). */
PL_KERNEL(bias_bwd, float *dbias, const float *dout, int64_t N, int64_t OC);
/* out = a + b, n elements (out may alias a or b). */
PL_KERNEL(add, float *out, const float *a, const float *b, int64_t n);
/* GELU, exact: 0.5 x (1 + erf(x / sqrt(2))) (PyTorch's F.gelu; Megatron's BERT
 * lm_head). dinp += gelu'(inp) * dout, gelu'(x) = Phi(x) + x phi(x). */
PL_KERNEL(gelu_erf_fwd, float *out, const float *inp, int64_t n);
PL_KERNEL(gelu_erf_bwd, float *dinp, const float *inp, const float *dout, int64_t n);
/* The same two on a bf16 input (a layer's saved fc1 under --bf16, transformers'
 * BERT's hidden_act "gelu"): the arithmetic of gelu_erf_* on the widened values. */
PL_KERNEL(gelu_erf_fwd_bf16, float *out, const uint16_t *inp, int64_t n);
PL_KERNEL(gelu_erf_bwd_bf16, float *dinp, const uint16_t *inp, const float *dout, int64_t n);
/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
PL_KERNEL(gelu_fwd, float *out, const float *inp, int64_t n);
/* dinp += gelu'(inp) * dout. */
PL_KERNEL(gelu_bwd, float *dinp, const float *inp, const float *dout, int64_t n);
/* The same two on a bf16 input (a saved activation under --bf16): the arithmetic
 * of gelu_fwd / gelu_bwd on the widened values. */
PL_KERNEL(gelu_fwd_bf16, float *out, const uint16_t *inp, int64_t n);
PL_KERNEL(gelu_bwd_bf16, float *dinp, const uint16_t *inp, const float *dout, int64_t n);

/* ---- T5's feed-forward activations -----------------------------------------
 * ReLU (T5 v1.0's DenseReluDense): out = max(x, 0); dinp += (x > 0) dout.
 * GEGLU (T5 v1.1 and flan-t5's "gated-gelu"): a row of fc1's output is
 * [gate (F) | up (F)] as SwiGLU's, out = gelu(gate) * up with the tanh GELU
 * above (transformers' gelu_new). */
PL_KERNEL(relu_fwd, float *out, const float *inp, int64_t n);
PL_KERNEL(relu_bwd, float *dinp, const float *inp, const float *dout, int64_t n);
/* inp (N,2F), out (N,F); dinp (N,2F) += the gradient from dout (N,F). */
PL_KERNEL(geglu_fwd, float *out, const float *inp, int64_t N, int64_t F);
PL_KERNEL(geglu_bwd, float *dinp, const float *inp, const float *dout, int64_t N, int64_t F);
/* The same four on a bf16 input (fc1's output saved under --bf16): bit for bit the
 * fp32 kernel on the widened values. */
PL_KERNEL(relu_fwd_bf16, float *out, const uint16_t *inp, int64_t n);
PL_KERNEL(relu_bwd_bf16, float *dinp, const uint16_t *inp, const float *dout, int64_t n);
PL_KERNEL(geglu_fwd_bf16, float *out, const uint16_t *inp, int64_t N, int64_t F);
PL_KERNEL(geglu_bwd_bf16, float *dinp, const uint16_t *inp, const float *dout, int64_t N,
          int64_t F);

/* ---- LayerNorm ---------------------------------------------------------- */

/* out (N,C) = (inp - mean) * rstd * weight + bias; saves mean (N), rstd (N). */
PL_KERNEL(layernorm_fwd, float *out, float *mean, float *rstd, const float *inp,
          const float *weight, const float *bias, int64_t N, int64_t C, float eps);
/* dinp (N,C) +=, dweight (C) +=, dbias (C) += from dout (N,C). */
PL_KERNEL(layernorm_bwd, float *dinp, float *dweight, float *dbias, const float *dout,
          const float *inp, const float *weight, const float *mean, const float *rstd, int64_t N,
          int64_t C);

/* ---- RMSNorm (Llama; Megatron's --normalization RMSNorm) -------------------
 * out (N,C) = inp * rstd * weight (+ bias), rstd = 1 / sqrt(mean_c(inp^2) + eps). */

/* bias (C) may be NULL; saves rstd (N). */
PL_KERNEL(rmsnorm_fwd, float *out, float *rstd, const float *inp, const float *weight,
          const float *bias, int64_t N, int64_t C, float eps);
/* dinp (N,C) +=, dweight (C) +=, dbias (C) += (dbias may be NULL) from dout (N,C). */
PL_KERNEL(rmsnorm_bwd, float *dinp, float *dweight, float *dbias, const float *dout,
          const float *inp, const float *weight, const float *rstd, int64_t N, int64_t C);

/* ---- SwiGLU (Megatron's --swiglu) -------------------------------------------
 * A row of fc1's output is [gate (F) | up (F)]; out = silu(gate) * up with
 * silu(g) = g / (1 + exp(-g)). F is the per-rank FFN width. */

/* inp (N,2F), out (N,F). */
PL_KERNEL(swiglu_fwd, float *out, const float *inp, int64_t N, int64_t F);
/* dinp (N,2F) += gradient from dout (N,F). */
PL_KERNEL(swiglu_bwd, float *dinp, const float *inp, const float *dout, int64_t N, int64_t F);
/* The same two on a bf16 input (fc1's output saved under --bf16): bit for bit
 * the fp32 kernel of the same twin on the widened values. */
PL_KERNEL(swiglu_fwd_bf16, float *out, const uint16_t *inp, int64_t N, int64_t F);
PL_KERNEL(swiglu_bwd_bf16, float *dinp, const uint16_t *inp, const float *dout, int64_t N,
          int64_t F);

/* ---- rotary position embedding (RoPE) --------------------------------------
 * Megatron's non-interleaved rotary embedding (HF/Llama "rotate_half"), in
 * place on the q and k heads of a QKV buffer in Megatron's grouped layout:
 * qkv (B,T,G,QG+2,HS), G query groups (KV heads), each QG = NH/G query heads,
 * then its k head, then its v head (multi-head attention: G = NH, QG = 1,
 * per head [q, k, v]). Only the first rot dims of a head rotate (rot even, rot
 * = HS * rotary_percent); with half = rot/2 and i < half, at position
 * p = pos0 + t: x[i], x[i+half] <- x[i] cos - x[i+half] sin,
 * x[i+half] cos + x[i] sin, cos = cos_tab[p][i], sin = sin_tab[p][i].
 * v heads and dims >= rot are not touched. */

/* Llama 3.1's frequency scaling; Llama 3.1 itself uses {8, 1, 4, 8192}. */
typedef struct pl_rope_scaling {
    double factor, low_freq_factor, high_freq_factor;
    int64_t original_max_positions;
} pl_rope_scaling;

/* cos_tab, sin_tab (P, rot/2): angle(p, i) = p * inv_freq[i], inv_freq[i] =
 * base^(-2i/rot), rescaled by Llama 3.1's rule when scaling is not NULL;
 * inv_freq and angles in double, cos and sin rounded to float once. Set-up
 * work: one plain function, no twins. */
void pl_rope_table(float *cos_tab, float *sin_tab, int64_t P, int64_t rot, double base,
                   const pl_rope_scaling *scaling);
/* Rotates q and k of qkv in place with rows pos0 .. pos0+T-1 of the tables
 * (P >= pos0 + T). */
PL_KERNEL(rope_fwd, float *qkv, const float *cos_tab, const float *sin_tab, int64_t B, int64_t T,
          int64_t G, int64_t QG, int64_t HS, int64_t rot, int64_t pos0);
/* In place on dqkv (same layout): the transposed rotation (by -angle) of the
 * q and k gradients; v and unrotated dims untouched. */
PL_KERNEL(rope_bwd, float *dqkv, const float *cos_tab, const float *sin_tab, int64_t B,
          int64_t T, int64_t G, int64_t QG, int64_t HS, int64_t rot, int64_t pos0);

/* ---- dropout ------------------------------------------------------------------
 * Rows n0 .. n0+rows-1 of a (B*T, C) activation that is this rank's columns
 * [c0, c0+C) of a global (B*T, Cg) one (sequence parallelism holds a block of
 * rows: n0 > 0). Element (i, c) of out is row n = n0 + i, with the global index
 *   ((sample[n / T] * T + n % T) * Cg + c0 + c),
 * sample (B) holding each row block's global sample id, and is kept when
 * pl_rng_u32(seed, stream, index) >= pl_dropout_threshold(p) (base/rng.h): the
 * mask depends on the sample and the global column, not on how the batch or
 * the columns are split. out = inp * (keep ? scale : 0), scale = 1 / (1 - p)
 * rounded once to float, as PyTorch's inp * mask * scale (a dropped NaN or
 * Inf becomes NaN). out may alias inp; p = 0 copies. Used for forward and, on the gradient, for backward. */
PL_KERNEL(dropout, float *out, const float *inp, int64_t n0, int64_t rows, int64_t T, int64_t C,
          int64_t Cg, int64_t c0, const int64_t *sample, float p, uint64_t seed, uint64_t stream);

/* ---- self-attention ---------------------------------------------------------
 * Fused softmax attention for multi-head (GPT, BERT), grouped-query (Llama) and
 * padded batches, with optional attention-probability dropout. The shape and
 * its masks travel in one struct:
 *   B, T      batch and sequence; queries and keys both span T positions.
 *   NH, G, HS query heads on this rank, KV groups on this rank (NH % G == 0,
 *             QG = NH / G query heads share a group's k and v), head size.
 *   causal    1: query t sees keys <= t; 0: all keys.
 *   kv_len    NULL, or (B): keys >= kv_len[b] of sample b are masked for every
 *             query (padding), 1 <= kv_len[b] <= T. Padded query rows are
 *             computed like any other. With causal, both masks apply.
 *   dropout   p in [0, 1) on the attention probabilities; 0: none (then the
 *             five fields of the mask's key below are ignored).
 *   drop_seed, drop_stream, sample (B), NHg, h0: the dropout mask's key.
 *             Element (b, h, q, k) is kept when
 *               pl_rng_u32(drop_seed, drop_stream,
 *                          ((sample[b] * NHg + h0 + h) * T + q) * T + k)
 *                 >= pl_dropout_threshold(dropout),
 *             with sample[b] the global id of batch row b, NHg the global
 *             number of query heads and h0 this rank's first (NHg = NH, h0 = 0
 *             on one rank): the same mask for any batch split or tensor-
 *             parallel head split, in forward, backward and recomputation.
 * Layout (Megatron's grouped QKV): qkv (B,T,G,QG+2,HS), for each group its QG
 * query heads, then its k, then its v; query head h = g*QG + j uses group g.
 * G = NH is the per-head [q, k, v] layout. out (B,T,NH,HS), head h at h*HS.
 * lse (B,NH,T) = log-sum-exp of each query's scaled, masked scores (dropout
 * does not change it), saved for backward. Scale 1/sqrt(HS), or the shape's.
 *   P = softmax(S), out = sum_k Z(q,k)/(1-p) P(q,k) v_k (Z = 1 if kept).
 * Tiled with an online softmax: no (T,T) buffer per head; key tiles that are
 * masked for a whole query tile are skipped. The workspace holds one slot per
 * OpenMP thread: it is sized for omp_get_max_threads() at the time of the
 * call, and the kernels must not then run with more threads than that; its
 * size depends on T, HS and NH/G (not on the masks or dropout), and with a
 * relative position bias also on B and NH (the backward's per-sample bias
 * gradients, summed over samples in order: the same bits for any thread count). */
typedef struct pl_attn_shape {
    int64_t B, T;      /* batch, sequence (queries = keys = T) */
    /* query heads on this rank, KV groups on this rank (NH % G == 0), head size */
    int64_t NH, G, HS;
    int causal;        /* 1: query t sees keys <= t; 0: all keys */
    /* NULL, or (B): sample b's keys >= kv_len[b] are masked (padding), 1 <= kv_len[b] <= T */
    const int32_t *kv_len;
    float dropout;                   /* attention-probability dropout p in [0,1); 0: none */
    uint64_t drop_seed, drop_stream; /* the mask's RNG key (see above) */
    /* (B) global sample id of each batch row (dropout index), may be NULL when dropout == 0 */
    const int64_t *sample;
    /* global number of query heads and this rank's first head (dropout index under tensor
     * parallelism); NHg = NH, h0 = 0 on one rank */
    int64_t NHg, h0;
    int64_t Tk;        /* cross-attention: keys per sample (self-attention ignores it) */
    /* The softmax scale, 0: 1/sqrt(HS) (Megatron's default; T5 uses 1). */
    float scale;
    /* Self-attention only: NULL, or T5's relative position bias (NH, 2T-1), whose
     * element h (2T-1) + T-1 + k - q is added to the scaled score of query q and
     * key k of head h, before the masks and the softmax. */
    const float *rel_bias;
    /* Backward with rel_bias: the bias's gradient (NH, 2T-1), added into. */
    float *drel_bias;
} pl_attn_shape;
size_t pl_attention_workspace(const pl_attn_shape *s);
/* PL_ASSERTs (on in release builds) the shape's invariants above; both twins
 * of every attention kernel call it first (the cross kernels with cross = 1:
 * then kv_len is bounded by Tk, and causal must be 0). O(B). */
void pl_attention_check(const pl_attn_shape *s, int cross);
PL_KERNEL(attention_fwd, float *out, float *lse, const float *qkv, const pl_attn_shape *s,
          float *workspace);
/* dqkv (qkv's layout) += gradient from dout (B,T,NH,HS), with out and lse of
 * the forward. Backward of the dropped softmax (FlashAttention's):
 * dP~ = Z/(1-p) (dout . v^T), dS = P (dP~ - D), D = rowsum(dout * out),
 * dv = sum_q Z/(1-p) P dout. A group's dk and dv sum over its QG query heads,
 * j ascending, in one thread. */
PL_KERNEL(attention_bwd, float *dqkv, const float *dout, const float *qkv, const float *out,
          const float *lse, const pl_attn_shape *s, float *workspace);

/* ---- cross-attention ---------------------------------------------------------
 * The decoder's attention to the encoder output: queries q (B,T,NH,HS) from
 * the decoder, keys and values kv (B,Tk,G,2,HS) from the encoder, per group
 * its k then its v (Megatron core's linear_kv rows, [k; v] per head). The
 * shape as above with Tk keys per sample: causal = 0; kv_len masks the
 * encoder's padding (1 <= kv_len[b] <= Tk); the dropout element (b,h,q,k) has
 * index ((sample[b] NHg + h0 + h) T + q) Tk + k. out (B,T,NH,HS), lse (B,NH,T).
 * The same tiles as self-attention (the two differ only in where q, k and v
 * are read), so the same arithmetic; the workspace is pl_attention_workspace's.
 * Backward: dq (q's layout) and dkv (kv's) are added into. */
PL_KERNEL(attention_cross_fwd, float *out, float *lse, const float *q, const float *kv,
          const pl_attn_shape *s, float *workspace);
PL_KERNEL(attention_cross_bwd, float *dq, float *dkv, const float *dout, const float *q,
          const float *kv, const float *out, const float *lse, const pl_attn_shape *s,
          float *workspace);

/* ---- attention decoding over a KV cache (generation) ------------------------
 * The attention of one new token: qkv (G, QG + 2, HS) is its QKV row in the
 * grouped layout above (QG = NH / G query heads per group, then k, then v);
 * kc, vc (len, G, HS) hold the keys and values of positions 0..len-1, the new
 * token's included. Scores are scaled by scale (the caller's 1/sqrt(HS), or
 * T5's 1), plus bias[h bias_ld + t] for key t of head h when bias is not NULL
 * (a relative position bias). out (NH, HS); scores: scratch of NH * len floats. */
PL_KERNEL(attention_decode, float *out, const float *qkv, const float *kc, const float *vc,
          int64_t len, int64_t NH, int64_t G, int64_t HS, float scale, const float *bias,
          int64_t bias_ld, float *scores);

/* ---- LM head fused with softmax cross-entropy ------------------------------
 * logits (N,V) = x (N,C) . w^T (+ bias (V), when not NULL: BERT's and T5's output
 * layer), w (V,C) this rank's vocab rows [v0, v0+V), are
 * computed chunk by chunk over the vocabulary (chunk rows at a time, scratch of
 * pl_lmhead_workspace()) and never exist whole. Two passes, so that tensor
 * parallelism can all-reduce the statistics between them:
 *   1. pl_*_lmhead_stats: per row, the local max, sum of exp(logit - max), and
 *      the target's logit if targets[n] is in [v0, v0+V) (else 0).
 *      loss[n] = log(sumexp_global) + max_global - target_logit_global.
 *   2. pl_*_lmhead_bwd: with lse[n] = log-sum-exp over the whole vocabulary and
 *      dloss[n] the gradient of the objective with respect to loss[n]:
 *      dlogits = (softmax - onehot(target)) * dloss; dx += dlogits . w;
 *      dw += dlogits^T . x; dbias (when not NULL) += column sums of dlogits,
 *      each summed over n in order (the same bits for any thread count).
 * With chunk >= V the stats pass leaves all logits (N, V) in the workspace;
 * a backward called with logits_kept = 1 then uses them instead of computing
 * them again (one GEMM of three saved, N * V floats of workspace kept from
 * forward to backward). The reference twin always recomputes. */
size_t pl_lmhead_workspace(int64_t N, int64_t chunk);
/* Creates the GEMM primitives the fast twin's chunks use (pl_gemm_prepare), so
 * that the step loop allocates nothing. */
pl_status pl_lmhead_prepare(pl_gemm *g, int64_t N, int64_t C, int64_t V, int64_t chunk);
PL_KERNEL_ST(lmhead_stats, float *row_max, float *row_sumexp, float *target_logit,
             const float *x, const float *w, const float *bias, const int32_t *targets,
             int64_t N, int64_t C, int64_t v0, int64_t V, int64_t chunk, float *workspace,
             pl_gemm *g);
PL_KERNEL_ST(lmhead_bwd, float *dx, float *dw, float *dbias, const float *x, const float *w,
             const float *bias, const int32_t *targets, const float *lse, const float *dloss,
             int64_t N, int64_t C, int64_t v0, int64_t V, int64_t chunk, float *workspace,
             int logits_kept, pl_gemm *g);

/* ---- optimizer ------------------------------------------------------------
 * AdamW on n elements, PyTorch's torch.optim.AdamW arithmetic:
 *   p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps), bc1 = 1 - b1^t, bc2 = 1 - b2^t.
 * grad_scale multiplies g first (gradient clipping: min(1, clip / norm)). */
PL_KERNEL(adamw, float *p, const float *g, float *m, float *v, int64_t n, float lr, float b1,
          float b2, float eps, float wd, float bc1, float bc2, float grad_scale);

/* Sum of squares of x[0..n) in double, in a fixed order for any thread count. */
double pl_ref_sumsq(const float *x, int64_t n);
double pl_cpu_sumsq(const float *x, int64_t n);

#endif
