/* One transformer layer, composed from a small spec: the block every model
 * family is made of (GPT-2, Llama, BERT; the encoder and decoder of T5 and BART).
 *
 *   pre-norm (GPT, Llama, Megatron's BERT and T5):
 *     res1 = x    + drop(proj(attn(rope(qkv(norm1(x))))))
 *     resx = res1 + drop(xproj(xattn(xq(normx(res1)), xkv(enc))))   cross-attention only
 *     res2 = resx + drop(fc2(act(fc1(norm2(resx)))))                 (resx = res1 without)
 *   pre-norm with the residual after the norm (Megatron's
 *   --apply-residual-connection-post-layernorm, the original BERT's ordering):
 *     res1 = norm1(x)    + drop(proj(attn(rope(qkv(norm1(x))))))
 *     resx = normx(res1) + drop(xproj(xattn(xq(normx(res1)), xkv(enc))))
 *     res2 = norm2(resx) + drop(fc2(act(fc1(norm2(resx)))))
 *   post-norm (the original Transformer, Hugging Face's BERT and BART):
 *     res1 = norm1(x    + drop(proj(attn(qkv(x)))))
 *     resx = normx(res1 + drop(xproj(xattn(xq(res1), xkv(enc)))))
 *     res2 = norm2(resx + drop(fc2(act(fc1(resx)))))
 *
 * norm is LayerNorm or RMSNorm, act GELU or SwiGLU (fc1 then has 2F rows:
 * [gate; up]), rope optional (learned positions live in the embedding),
 * attention multi-head or grouped-query (Megatron's QKV rows: per KV group its
 * query heads, then k, then v), causal, padded (each sample's keys beyond its
 * length masked: pad_len) or unmasked. Cross-attention (a decoder's attention
 * to the encoder output enc, Tk positions per sample) is multi-head, as
 * Megatron core's CrossAttention: xq gives the queries, xkv per head [k; v]
 * (its linear_kv), the encoder's padding (enc_len) masks its keys. Linear
 * layers are column- (qkv, fc1, xq, xkv) and row-parallel (proj, fc2, xproj)
 * over the tensor-parallel group; the layer calls the communication points
 * itself (parallel/tp/layers.h). xkv's input gradient is left as this rank's
 * partial sum in denc, for the caller to reduce once for all layers
 * (pl_block_enc_grad).
 *
 * Memory: a block allocates nothing. pl_block_take_acts lays out one layer's
 * saved activations and pl_block_take_scratch the scratch that every layer of a
 * stack shares, on the caller's plan (nn/plan.h); the model decides which
 * layers keep their own buffers (recompute). Rows are N = B*T (the micro-batch).
 * Under sequence parallelism (Megatron's --sequence-parallel) a rank holds
 * Nl = N/tp consecutive rows [n0, n0 + Nl) of the residual stream: the norms,
 * dropout and residual additions run on those rows; each branch's input (its
 * norm's output, or post-norm the residual itself) is written to its rows of
 * an (N, C) buffer and all-gathered before the column-parallel GEMM, and the
 * row-parallel GEMM's partial sums are reduce-scattered back to the rank's
 * rows. The norms' weight gradients, summed over a rank's rows only, are
 * all-reduced over the TP group at once; the row-parallel biases take their
 * gradients from the gathered output gradient and are whole on every rank
 * without it. The encoder output enc is whole (N_enc = B*Tk rows) on every
 * rank: gathered by the caller under sequence parallelism.
 *
 * What is saved: norm statistics, qkv (after RoPE), the attention output and its
 * log-sum-exp, res1, fc1 and res2; with cross-attention xq, xkv, its output and
 * log-sum-exp and resx; post-norm also each norm's input (pre1, prex, pre2).
 * The norm outputs and act(fc1) are rebuilt in backward from the same inputs by
 * the same kernels (the same bits). Under a bf16 GEMM context qkv, the
 * attention output and fc1 are saved in bf16 (the *_bf16 fields; the fp32 ones
 * are NULL) and forward goes on with the rounded values, so backward and any
 * recomputation see exactly what forward used (cross-attention's are kept in
 * fp32). Dropout masks are drawn from the counter-based RNG (base/rng.h)
 * keyed by (seed, iteration, layer, site, global sample, position, global
 * column): any layout, and any recomputation, draws the same masks.
 *
 * Not here: embeddings, the final norm and heads (nn/embedding.h, nn/head.h),
 * which layers a rank holds and which it recomputes (model/model.h).
 * Generation (pl_block_decode) runs a block one token at a time, with a cache
 * of its keys and values and, cross-attention, of the encoder output's
 * (pl_block_cross_kv). */
#ifndef PL_NN_BLOCK_H
#define PL_NN_BLOCK_H

#include "kernels/kernels.h"
#include "nn/norm.h"
#include "nn/plan.h"
#include "parallel/comm.h"
#include "parallel/tp/layers.h"

/* The MLP's activation: GELU (the tanh approximation: Megatron's --openai-gelu;
 * plait's GPT, Megatron BERT, T5), SwiGLU, T5's ReLU (v1.0) and GEGLU (v1.1,
 * flan-t5: gated GELU, fc1 rows [wi_0; wi_1] as SwiGLU's [gate; up]), and GELU_ERF:
 * exact, 0.5 x (1 + erf(x / sqrt(2))) (transformers' BERT and BART, hidden_act
 * "gelu"). */
typedef enum pl_act_kind {
    PL_ACT_GELU = 0,
    PL_ACT_SWIGLU = 1,
    PL_ACT_RELU = 2,
    PL_ACT_GEGLU = 3,
    PL_ACT_GELU_ERF = 4
} pl_act_kind;
/* relative: T5's relative position bias on the self-attention scores (nn/relbias.h) */
typedef enum pl_pos_kind {
    PL_POS_LEARNED = 0,
    PL_POS_ROPE = 1,
    PL_POS_NONE = 2,
    PL_POS_RELATIVE = 3
} pl_pos_kind;
typedef enum pl_mask_kind { PL_MASK_CAUSAL = 0, PL_MASK_PADDING = 1, PL_MASK_NONE = 2 } pl_mask_kind;

/* What a family's layer is made of (the rows of model/spec.c). */
typedef struct pl_block_spec {
    pl_norm_kind norm;
    pl_act_kind act;
    pl_pos_kind pos;     /* learned: added by the embedding; rope: rotated in the block */
    pl_mask_kind mask;
    int cross_attention; /* decoder of an encoder-decoder model */
    int bias;            /* linear layers have biases (Megatron: not --disable-bias-linear) */
    int norm_bias;       /* norms have a bias (LayerNorm: yes; Megatron's RMSNorm: no) */
    int post_norm;       /* 0: pre-norm */
    int res_post_norm;   /* pre-norm only: the residual is the norm's output (Megatron's
                          * --apply-residual-connection-post-layernorm) */
} pl_block_spec;

/* 1 when act's fc1 has two halves [gate; up] (SwiGLU, GEGLU). */
int pl_block_act_gated(pl_act_kind act);

/* Sizes of the global layer (before tensor parallelism). */
typedef struct pl_block_dims {
    int64_t C;  /* hidden */
    int64_t NH; /* query heads */
    int64_t G;  /* key/value groups (NH for multi-head attention) */
    int64_t HS; /* head size */
    int64_t F;  /* MLP hidden (SwiGLU: the width of each half) */
} pl_block_dims;

/* Rotary position embedding (Megatron's --rotary-base, --rotary-percent,
 * --use-rope-scaling with Llama 3.1's factors). */
typedef struct pl_rope_config {
    double base;
    double percent;     /* fraction of each head's dims that rotate */
    int scaling;        /* Llama 3.1's frequency scaling */
    double factor, low_freq_factor, high_freq_factor;
    int64_t original_max_positions;
} pl_rope_config;

/* One layer's parameters (views into the flat buffers; absent ones NULL).
 * Post-norm, norm1, normx and norm2 follow their branches instead of leading
 * them. */
typedef struct pl_block_weights {
    float *norm1_w, *norm1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    float *normx_w, *normx_b, *xq_w, *xq_b, *xkv_w, *xkv_b, *xproj_w, *xproj_b;
    float *norm2_w, *norm2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} pl_block_weights;

/* The parameters of a layer by Megatron core's name suffix
 * ("decoder.layers.N." + suffix) and where each goes in pl_block_weights.
 * Megatron core has no post-norm layer; its norms are named here
 * post_self_attn_layernorm, post_cross_attn_layernorm and post_mlp_layernorm. */
typedef struct pl_block_param_name {
    const char *suffix;
    size_t field; /* offsetof(pl_block_weights, ...) */
} pl_block_param_name;
enum { PL_BLOCK_MAX_PARAMS = 20 };
/* The parameter table of a layer of spec s: fills names, returns the count. */
int pl_block_param_names(const pl_block_spec *s, pl_block_param_name names[PL_BLOCK_MAX_PARAMS]);

/* Saved activations of one layer for one micro-batch (N rows; Nl of the
 * residual stream, N/tp under sequence parallelism). Dims are this rank's:
 * QKV = (NH + 2G) HS / tp, A = NH HS / tp, F1 = fc1 rows / tp. */
typedef struct pl_block_acts {
    float *norm1_mean, *norm1_rstd; /* (Nl), (Nl); mean NULL for RMSNorm */
    float *qkv;                     /* (N, QKV) after RoPE */
    float *attn, *lse;              /* (N, A), (B, NH/tp, T) */
    float *res1;                    /* (Nl, C) */
    float *normx_mean, *normx_rstd; /* cross-attention: (Nl), (Nl) */
    float *xq, *xkv;                /* (N, A), (N_enc, 2A) */
    float *xattn, *xlse;            /* (N, A), (B, NH/tp, T) */
    float *resx;                    /* (Nl, C) */
    float *norm2_mean, *norm2_rstd;
    float *fc1;                     /* (N, F1) */
    float *res2;                    /* (Nl, C) the layer's output */
    float *pre1, *prex, *pre2;      /* post-norm: (Nl, C) each norm's input */
    /* split backward (c->split_bwd): the linear layers' output gradients, kept from the
     * input half to the weight half: proj's and fc2's (N, C), qkv's (N, QKV), fc1's
     * (N, F1); cross-attention's xproj's (N, C), xq's (N, A), xkv's (N_enc, 2A) */
    float *w_dy1, *w_dqkv, *w_dy2, *w_dfc1, *w_dyx, *w_dxq, *w_dxkv;
    float *w_dn1, *w_dnx, *w_dn2;   /* (Nl, C) each norm's output gradient */
    uint16_t *qkv_bf16, *attn_bf16, *fc1_bf16; /* --bf16: the same, in bf16 */
} pl_block_acts;

/* Seconds spent in each kind of work, accumulated; reset by the caller. */
typedef struct pl_step_prof {
    double linear, attention, lmhead;
    pl_tp_overlap tp_overlap; /* --tp-comm-overlap: the queued input-gradient reductions */
} pl_step_prof;

/* Dropout of one forward/backward: probabilities and the mask key. sample[b]
 * is micro-batch row b's global sample index (layout-independent). */
typedef struct pl_dropout_key {
    float hidden, attention;  /* probabilities; 0 when not training */
    uint64_t seed;
    int64_t iteration;
    const int64_t *sample;    /* (B) */
} pl_dropout_key;

/* What every layer of a stack shares: sizes on this rank, the communicator and
 * GEMM context, and the scratch of pl_block_take_scratch. */
typedef struct pl_block_ctx {
    pl_block_spec spec;
    pl_block_dims dims;
    float eps;
    int64_t B, T, N;
    int64_t NHl, Gl, QKVl, Al, Fl, F1l; /* local: heads, groups, qkv width, attention width, F, fc1 rows */
    int tp_size, tp_rank;
    int sp;                  /* sequence parallelism (only with tp_size > 1) */
    int kv_shared;           /* fewer key/value groups than TP ranks: this rank holds one
                              * group, shared with tp/G ranks (registry.h, QKV_SHARED_KV) */
    pl_comm *kv;             /* kv_shared: the ranks sharing this rank's group (set by the
                              * caller from pl_block_kv_comm before a backward) */
    int64_t Nl, n0;          /* this rank's residual-stream rows: [n0, n0 + Nl) of N */
    int64_t Tk, Nk;          /* cross-attention: encoder positions per sample, B * Tk */
    /* per micro-batch, set by the caller before a forward or backward: */
    const int32_t *pad_len;  /* mask PADDING: (B) sample lengths; keys from there are masked */
    const float *enc;        /* cross-attention: (Nk, C) the encoder output, whole */
    float *denc;             /* cross-attention: (Nk, C) its gradient's partial sum on this
                              * rank, added into (pl_block_enc_grad reduces it) */
    const int32_t *enc_len;  /* cross-attention: (B) encoder lengths, or NULL: no padding */
    pl_comm *tp;
    pl_commq *tpq;           /* --tp-comm-overlap: the TP queue (NULL: reductions inline) */
    pl_commq_op tp_op;       /* the one reduction in flight on it */
    pl_gemm *gemm;
    int act_bf16;            /* qkv, attention output and fc1 saved in bf16 */
    int split_bwd;           /* zero-bubble schedules: plan the stash of pl_block_bwd_input
                              * (set before pl_block_take_acts) */
    pl_step_prof *prof;
    pl_dropout_key drop;
    /* scratch (pl_block_take_scratch) */
    float *norm_out;         /* (N, C) norm1's, then norm2's output (gathered under sp) */
    float *dnorm;            /* (N, C) */
    float *dnorm_w;          /* sp: (2C) a norm's weight and bias gradients before their sum */
    float *kv_save;          /* kv_shared: (2 HS (C + 1)) the shared rows' earlier gradients */
    float *dqkv, *dattn;     /* (N, QKV), (N, A); forward's fp32 qkv and attention outputs under bf16 */
    float *act, *dfc1;       /* act(fc1) (N, Fl), shares dfc1 (N, F1l) */
    float *dact;             /* (N, Fl); forward's fp32 fc1 under bf16 */
    float *qkv_f32;          /* --bf16: backward widens the saved qkv here (dfc1 and dact) */
    float *attn_ws;
    float *dxkv;             /* cross-attention: (Nk, 2A) */
    float *rope_cos, *rope_sin; /* (rope_rows, rot/2) */
    int64_t rope_rot;
    int64_t rope_rows;       /* positions the tables cover: T (set a larger value before
                              * planning for generation) */
    float softmax_scale;     /* the attention scores' scale; 0: 1/sqrt(HS) (T5: 1) */
    /* pos relative: this rank's heads' bias vectors (NHl, 2 rel_rows - 1) of the stack
     * (pl_nn_relbias_fill, by the caller before a forward) and their gradient (added
     * into by every layer's backward; zeroed and scattered to the table by the caller);
     * rel_rows = T (set it to the positions generation covers before planning) */
    float *rel_bias, *drel_bias;
    int64_t rel_rows;
} pl_block_ctx;

/* Sets up c for micro-batches of B x T rows on a tensor-parallel group tp
 * (sequence-parallel with sp) with a GEMM context whose precision decides
 * act_bf16; with cross-attention, Tk encoder positions per sample. Errors:
 * sizes that do not divide by the TP size, cross-attention with query groups. */
pl_status pl_block_ctx_init(pl_block_ctx *c, const pl_block_spec *spec, const pl_block_dims *d,
                            float eps, int64_t B, int64_t T, int64_t Tk, pl_comm *tp, int tp_rank,
                            int sp, pl_gemm *gemm, pl_step_prof *prof);
/* The communicator of the ranks that share this rank's key/value group when
 * there are fewer groups than TP ranks (collective over tp); otherwise *kv
 * is left a non-member. Free with pl_comm_free. */
pl_status pl_block_kv_comm(pl_comm *kv, pl_comm *tp, const pl_block_dims *d);

/* The RoPE tables on p (nothing without RoPE), or the relative position bias
 * vectors and their gradient (rel_bias, drel_bias), and the RoPE tables' filling
 * once the plan has placed them. They live as long as the context: not in
 * scratch that other buffers share. */
void pl_block_take_rope(pl_block_ctx *c, pl_plan *p, const pl_rope_config *rope);
void pl_block_rope_fill(pl_block_ctx *c, const pl_rope_config *rope);

/* One layer's saved activations on p: attn and lse (cross-attention: xattn and
 * xlse too) only with own_attn (else the caller points them at shared scratch:
 * selective recompute), res2 only with own_res2 (else the caller provides it). */
void pl_block_take_acts(const pl_block_ctx *c, pl_plan *p, pl_block_acts *a, int own_attn,
                        int own_res2);
/* The scratch shared by every layer, on p: dead between one layer's pass and
 * the next, so the caller may overlay it on other transient memory. The
 * caller lays out norm_out and dnorm (N x C each) itself: their lifetimes
 * cross the model's head. */
void pl_block_take_scratch(pl_block_ctx *c, pl_plan *p);
/* Creates the GEMM primitives of every linear layer (both directions). */
pl_status pl_block_prepare(pl_block_ctx *c);

/* Layer `layer`'s forward from x (Nl, C) into a (res2 is the output). */
pl_status pl_block_fwd(pl_block_ctx *c, const pl_block_weights *w, const pl_block_acts *a,
                       const float *x, int64_t layer);
/* Generation (a context of B = T = 1, fp32): layer `layer`'s forward of the
 * token at position pos from x (1, C) into a; its key and value are written to
 * row pos of the layer's cache kc, vc (positions, G/tp, HS) and it attends to
 * rows 0..pos. scores: NH/tp * (pos + 1) floats of scratch. With
 * cross-attention, xkv is the layer's cache of the encoder output's keys and
 * values (pl_block_cross_kv; NULL without cross-attention), its padding masked
 * by c->enc_len. The same layer as pl_block_fwd, step for step, with the caches
 * in place of the fused kernel and of the encoder output's projection. */
pl_status pl_block_decode(pl_block_ctx *c, const pl_block_weights *w, const pl_block_acts *a,
                          const float *x, float *kc, float *vc, const float *xkv, int64_t pos,
                          float *scores, int64_t layer);
/* pl_block_decode for the context's N = B rows (T 1), each a token of its own
 * sequence: row r's key and value go into kc[r], vc[r] at position pos[r] and it
 * attends over positions 0..pos[r] there; with cross-attention over xkv[r] (its
 * source's keys and values) with enc_len[r] of them unmasked. The GEMMs run once
 * over the N rows; each row's values are those of pl_block_decode on it alone when
 * the GEMM's rows do not depend on the row count (oneDNN's fp32 on this machine,
 * checked by tests/scripts/beam.sh). */
pl_status pl_block_decode_rows(pl_block_ctx *c, const pl_block_weights *w, const pl_block_acts *a,
                               const float *x, float *const *kc, float *const *vc,
                               const float *const *xkv, const int32_t *enc_len,
                               const int64_t *pos, float *scores, int64_t layer);
/* Cross-attention's keys and values of the encoder output c->enc (Nk, C) for
 * layer w: xkv (Nk, 2 A/tp), this rank's heads, as pl_block_fwd computes them. */
pl_status pl_block_cross_kv(pl_block_ctx *c, const pl_block_weights *w, float *xkv);
/* Layer `layer`'s backward: dres (Nl, C) holds d res2 on entry and d x on exit;
 * parameter gradients are added into g (cross-attention: the encoder output's
 * into c->denc). selective: the attention output and lse are rebuilt from qkv
 * first, cross-attention's from xq and xkv (selective recompute: Megatron
 * checkpoints both attentions' core). */
pl_status pl_block_bwd(pl_block_ctx *c, const pl_block_weights *w, const pl_block_weights *g,
                       const pl_block_acts *a, const float *x, float *dres, int selective,
                       int64_t layer);
/* The backward in two halves (zero-bubble pipeline schedules; the activations
 * planned with c->split_bwd), as Qi et al.'s B and W. The input half: dres as
 * pl_block_bwd, no parameter gradient (g is untouched), every linear layer's and
 * norm's output gradient kept in a. The weight half, any time later while a is
 * untouched (and, with cross-attention, c->enc the same): every parameter
 * gradient added into g. The two together add exactly what pl_block_bwd adds,
 * bit for bit. No selective recompute (its attention output lives in shared
 * scratch). */
pl_status pl_block_bwd_input(pl_block_ctx *c, const pl_block_weights *w,
                             const pl_block_weights *g, const pl_block_acts *a, const float *x,
                             float *dres, int64_t layer);
pl_status pl_block_bwd_weight(pl_block_ctx *c, const pl_block_weights *w,
                              const pl_block_weights *g, const pl_block_acts *a, const float *x,
                              int64_t layer);
/* The encoder output's gradient once every cross-attention layer has added
 * its part to denc (Nk, C): summed over the TP group into out, all rows, or
 * under sp this rank's Nk/tp rows (denc is then spent). */
pl_status pl_block_enc_grad(pl_block_ctx *c, float *out, float *denc);

/* A norm of this rank's rows x (Nl, C) written to the same rows of out (N, C),
 * then (sp) all-gathered: out holds every row. The stack's final norm uses it. */
pl_status pl_block_norm_fwd(pl_block_ctx *c, float *out, float *mean, float *rstd, const float *x,
                            const float *w, const float *b);
/* Its backward over this rank's rows: dx (Nl, C) added into from dy (Nl, C);
 * dw, db added into, summed over the TP group first under sp (dw NULL: the
 * input gradient only). */
pl_status pl_block_norm_bwd(pl_block_ctx *c, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, const float *mean, const float *rstd);
/* Hidden dropout (site) of this rank's rows (Nl, C); out may alias inp. */
void pl_block_hidden_dropout(const pl_block_ctx *c, float *out, const float *inp, int64_t layer,
                             int site);

/* The dropout stream of (iteration, layer, site). Sites: 0 attention
 * probabilities, 1 after the attention projection, 2 after fc2, 3 the
 * embeddings' output, 4 cross-attention probabilities, 5 after its
 * projection. */
uint64_t pl_block_dropout_stream(int64_t iteration, int64_t layer, int site);

#endif
