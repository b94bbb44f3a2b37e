/* The GPT model of one rank: views into the flat parameter and gradient
 * buffers, the planned activation memory of one micro-batch, and the forward
 * and backward passes (tensor-parallel communication inside the layers).
 *
 * Memory is planned at pl_gpt_init and allocated once (touched once, so no
 * page faults inside the step loop); forward and backward allocate nothing. */
#ifndef PL_MODEL_GPT_H
#define PL_MODEL_GPT_H

#include "kernels/kernels.h"
#include "model/gpt_config.h"
#include "parallel/comm.h"

typedef struct pl_gpt_layer {
    float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    float *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} pl_gpt_layer;

/* Saved activations of one layer for one micro-batch (N = B*T rows). The
 * LayerNorm outputs and GELU(fc1) are not kept: backward rebuilds them from the
 * layer input, res1 and fc1 (same kernels, same inputs: the same bits). Under
 * selective recompute attn and lse point at shared scratch, rebuilt in backward;
 * under full recompute a recomputed layer's fields point at its group slot, and
 * only the group's last res2 (the next group's checkpointed input) is its own.
 * Under a bf16 GEMM context (--bf16) qkv, attn and fc1 are saved in bf16, as in
 * Megatron's bf16 models: the *_bf16 fields hold them and qkv, attn, fc1 are
 * NULL (attn stays fp32 shared scratch under selective recompute, rounded to
 * bf16 in place). Forward goes on with the rounded values, so backward and any
 * recomputation see exactly what forward used. */
typedef struct pl_gpt_layer_acts {
    float *ln1_mean, *ln1_rstd; /* (N), (N) */
    float *qkv;                 /* (N, 3C/tp) */
    float *attn, *lse;          /* (N, C/tp), (B, NH/tp, T) */
    float *res1;                /* (N,C) x + attention branch */
    float *ln2_mean, *ln2_rstd;
    float *fc1;                 /* (N, F/tp) */
    float *res2;                /* (N,C) layer output */
    uint16_t *qkv_bf16, *attn_bf16, *fc1_bf16; /* --bf16: the same, saved in bf16 */
} pl_gpt_layer_acts;

/* Points out's fields at layer `layer`'s parameters in flat (laid out by reg);
 * [*lo, *hi) is the range of flat they span. */
pl_status pl_gpt_layer_bind(const pl_registry *reg, const float *flat, int64_t layer,
                           pl_gpt_layer *out, int64_t *lo, int64_t *hi);

/* Called during backward when a range of the flat gradient buffer is final
 * (a layer's parameters), so data-parallel reduction can start. */
typedef void (*pl_grad_ready_fn)(void *ctx, int64_t offset, int64_t count);

/* Called before layer l's forward (backward = 0) and backward (backward = 1), and
 * with l = -1 before the forward's embedding: ZeRO-3 gathers the parameters the
 * views point at there. An error stops the pass. */
typedef pl_status (*pl_param_fetch_fn)(void *ctx, int64_t layer, int backward);

/* Where flat element `offset` of the parameters (grad = 0) or gradients (grad = 1)
 * lives, for pl_gpt_rebind. */
typedef float *(*pl_flat_locate_fn)(void *ctx, int64_t offset, int grad);

typedef struct pl_gpt {
    pl_gpt_config cfg;
    const pl_registry *reg;
    int64_t B, T, N;          /* micro-batch shape */
    int64_t C, Cl, Fl, NHl, HS, v0, Vl; /* local sizes under TP */
    pl_attn_shape attn;       /* this rank's heads: causal, G = NHl, no padding, no dropout */
    pl_comm *tp;
    pl_gemm *gemm;
    int64_t lm_chunk;
    /* views into the flat buffers */
    float *wte, *wpe, *lnf_w, *lnf_b;
    float *dwte, *dwpe, *dlnf_w, *dlnf_b;
    pl_gpt_layer *w, *g;      /* [L] parameter and gradient views */
    int64_t *layer_offset, *layer_count; /* [L] flat range of each layer's parameters */
    /* activations */
    float *act_mem;
    int act_bf16;             /* qkv, attn, fc1 saved in bf16 (the GEMM context is bf16) */
    size_t act_floats;        /* planned */
    size_t act_floats_kept;   /* the same plan with every layer's activations kept */
    int64_t *group_start;     /* [L] first layer of l's full-recompute group, -1: kept */
    float *x0;                /* (N,C) embedding output */
    pl_gpt_layer_acts *acts;  /* [L] */
    pl_gpt_layer_acts *slots; /* [L] full recompute: one layer's buffers per group position */
    float *lnf, *lnf_mean, *lnf_rstd, *loss, *lse, *rows;
    /* layer scratch, rebuilt when backward needs it */
    float *ln;                /* (N,C) the LayerNorm output (ln1, then ln2) */
    float *gelu;              /* (N, F/tp) GELU(fc1); shares dfc1's memory */
    /* backward scratch */
    float *dres, *dln, *dqkv, *dattn, *dfc1, *dgelu;
    float *qkv_f32;           /* --bf16: backward widens the saved qkv here (dfc1 and dgelu) */
    float *attn_ws, *lm_ws;
    int32_t *tokens, *targets; /* (N) the micro-batch being processed */
    struct {
        double linear, attention, lmhead; /* seconds, accumulated; reset by the caller */
    } prof;
    float *dloss;             /* (N) */
    pl_param_fetch_fn fetch;  /* NULL unless parameters are sharded (ZeRO-3) */
    void *fetch_ctx;
} pl_gpt;

/* Plans and allocates activations for micro-batches of B x cfg->seq_length;
 * params and grads are this rank's flat buffers laid out by reg. Either may be
 * NULL when the caller binds the views itself with pl_gpt_rebind (ZeRO). The
 * activations are saved in bf16 if gemm's precision is bf16 at this call. */
pl_status pl_gpt_init(pl_gpt *m, const pl_gpt_config *cfg, const pl_registry *reg, float *params,
                      float *grads, int64_t B, pl_comm *tp, pl_gemm *gemm);
void pl_gpt_free(pl_gpt *m);

/* Re-points every parameter (grad = 0) or gradient (grad = 1) view at
 * locate(ctx, offset, grad) for the parameter's flat offset: ZeRO puts layer
 * views into working buffers and keeps the flat layout for everything else. */
pl_status pl_gpt_rebind(pl_gpt *m, int grad, pl_flat_locate_fn locate, void *ctx);

/* Bytes of activation and scratch memory planned (for the memory plan), and
 * what the plan would take with cfg.recompute off. */
size_t pl_gpt_activation_bytes(const pl_gpt *m);
size_t pl_gpt_activation_bytes_kept(const pl_gpt *m);

/* "none", "selective", "full, uniform, 2 layers per group", ... written into buf. */
const char *pl_gpt_recompute_name(const pl_gpt_recompute *rc, char *buf, size_t n);

/* Forward over m->tokens / m->targets (N each, set by the caller); writes
 * m->loss (N). */
pl_status pl_gpt_forward(pl_gpt *m);

/* Backward of sum_n dloss[n] * loss[n] (m->dloss set by the caller), adding
 * into the gradient buffer. ready, when not NULL, is told each layer's range
 * as soon as it is final. */
pl_status pl_gpt_backward(pl_gpt *m, pl_grad_ready_fn ready, void *ctx);

#endif
