/* The model of one rank: the layers it holds (a stack of pl_block layers: all
 * of them, or a pipeline stage's range), the embedding (first stage) and the
 * head (last stage) around them, views into the flat parameter and gradient
 * buffers, and the planned activation memory of the micro-batches it keeps in
 * flight (one without pipelining; a schedule's bound with it).
 *
 * Every family is this one model over its spec (model/config.h): the block
 * does the layer, this file does the order of layers, recomputation, the
 * embedding, the final norm and the fused LM head + cross-entropy.
 *
 * Memory is planned at pl_model_init and allocated once (touched once, so no
 * page faults inside the step loop); forward and backward allocate nothing. */
#ifndef PL_MODEL_MODEL_H
#define PL_MODEL_MODEL_H

#include "kernels/kernels.h"
#include "model/config.h"
#include "nn/block.h"
#include "nn/head.h"
#include "parallel/comm.h"

/* Points out's fields at layer `layer`'s parameters in flat (laid out by reg
 * for the model c); [*lo, *hi) is the range of flat they span. */
pl_status pl_model_layer_bind(const pl_registry *reg, const pl_model_config *c, const float *flat,
                              int64_t layer, pl_block_weights *out, int64_t *lo, int64_t *hi);

/* The parameters outside the layers: word, position and token-type embeddings,
 * a post-LN model's norm of the embeddings, final norm, output layer (the word embeddings unless untied) and its bias,
 * BERT's heads. Absent ones are NULL. */
typedef struct pl_model_top {
    float *wte, *wpe, *tte, *lnf_w, *lnf_b, *out_w, *out_b;
    float *relpos; /* the stack's relative position bias table (buckets, NH) */
    float *eln_w, *eln_b; /* a post-LN model's norm of the embeddings (initial_layernorm) */
    pl_head_weights head;
} pl_model_top;

/* Where flat element `offset` of the parameters (grad = 0) or gradients (grad = 1)
 * lives, for pl_model_rebind. */
typedef float *(*pl_flat_locate_fn)(void *ctx, int64_t offset, int grad);

/* Binds out at flat + offset (or locate(ctx, offset, grad) when locate is not
 * NULL) for the parameters reg has; a parameter registered on another stage is
 * an error. */
pl_status pl_model_top_bind(const pl_registry *reg, const pl_model_config *c, const float *flat,
                            pl_flat_locate_fn locate, void *ctx, int grad, pl_model_top *out);

/* Called during backward when a range of the flat gradient buffer is final
 * (a layer's parameters), so data-parallel reduction can start. An error
 * stops the backward and is returned by it. */
typedef pl_status (*pl_grad_ready_fn)(void *ctx, int64_t offset, int64_t count);

/* Called before layer l's forward (backward = 0) and backward (backward = 1: the
 * whole backward, or a split backward's weight half, which adds its gradients;
 * backward = 2: a split backward's input half, which adds none), and with l = -1
 * before the forward's embedding: ZeRO-3 gathers the parameters the views point
 * at there, ZeRO 2-3 readies the layer's gradient slot. An error stops the pass. */
typedef pl_status (*pl_param_fetch_fn)(void *ctx, int64_t layer, int backward);

/* The layers a rank holds and what it keeps in flight. */
typedef struct pl_model_stage {
    int64_t l0, nl;   /* layers [l0, l0 + nl) of the model */
    int first, last;  /* holds the embedding / the final norm and LM head */
    int64_t inflight; /* micro-batches whose activations are kept at once (>= 1) */
    int split_bwd;    /* zero-bubble schedules: backwards in two halves (no recompute) */
} pl_model_stage;

/* One micro-batch in flight: its batch, its saved activations and what it
 * exchanges with the neighbouring stages. Rows: N of the micro-batch, Nl of
 * the residual stream (N/tp under sequence parallelism). */
typedef struct pl_model_mb {
    int32_t *tokens, *targets; /* (N) */
    int32_t *types;            /* (N) token types (BERT), else NULL */
    int32_t *lengths;          /* (B) sample lengths, the rest padding (padding mask), else NULL */
    int32_t *labels;           /* (B) the binary head's labels (0, 1; -1 ignored), else NULL */
    float *dloss;              /* (N) d objective / d loss */
    float *dbin;               /* (B) d objective / d bin_loss (binary head) */
    int64_t *sample;           /* (B) global sample index of each row (dropout masks) */
    float *x0;                 /* (Nl, C) the stage's input: the embedding's output on the
                                * first stage, else the previous stage's output (received) */
    float *dout;               /* (Nl, C) not the last stage: the gradient of the stage's
                                * output (received) */
    float *dx0;                /* (Nl, C) not the first stage: the gradient of x0 (to send) */
    float *emb, *emb_mean, *emb_rstd; /* first stage of a post-LN model: (Nl, C) the embeddings'
                                * sum, the input of their norm, and its statistics (Nl) */
    pl_block_acts *acts;       /* [nl] */
    float *lnf, *lnf_mean, *lnf_rstd, *loss, *lse; /* last stage: (N,C), (Nl), (Nl), (N), (N) */
    pl_head_acts head;         /* last stage with BERT's heads */
    float *bin_loss;           /* (B) the binary head's loss */
    float *dlm;                /* (N, C) fused LM head: its input gradient, from forward */
    int lm_grad;               /* fused LM head: dlm and the head's gradients are formed */
} pl_model_mb;

typedef struct pl_model {
    pl_model_config cfg;
    const pl_registry *reg;
    int64_t B, T, N;          /* micro-batch shape */
    int64_t C, v0, Vl;        /* hidden; this rank's vocabulary rows [v0, v0 + Vl) */
    pl_comm *tp;
    pl_comm kv_comm;          /* the ranks sharing a key/value group (G < tp), else none */
    pl_gemm *gemm;
    pl_block_ctx blk;         /* what every layer shares */
    int64_t lm_chunk;         /* vocabulary rows per chunk (recompute, keep) */
    int64_t lm_rows;          /* rows per block of the fused LM head */
    /* views into the flat buffers (wpe NULL without learned positions, lnf_b
     * without a norm bias; out_w is wte unless the output layer is untied) */
    pl_model_top p, d;        /* views outside the layers: parameters, gradients */
    pl_model_stage stage;     /* the layers held; index j below is layer stage.l0 + j */
    pl_block_weights *w, *g;  /* [nl] parameter and gradient views */
    int64_t *layer_offset, *layer_count; /* [nl] flat range of each layer's parameters */
    /* activations */
    float *act_mem;
    size_t act_floats;        /* planned */
    size_t act_floats_kept;   /* the same plan with every layer's activations kept */
    int64_t *group_start;     /* [nl] first layer of j's full-recompute group, -1: kept */
    pl_model_mb *mb;          /* [inflight] */
    pl_block_acts *mb_acts;   /* [inflight * nl]: mb[k].acts = mb_acts + k nl */
    int32_t *mb_ids;          /* [inflight * (3N + 2B)]: each slot's tokens, targets, types,
                               * lengths, labels */
    int64_t *mb_samples;      /* [inflight * B] */
    pl_block_acts *slots;     /* [nl] full recompute: one layer's buffers per group position */
    float *rows;
    float *dres;              /* (Nl,C) gradient of the residual stream */
    float *rel_dtable;        /* relative positions: (buckets, NH) the table's gradient scratch */
    float *lm_ws;
    float *head_ws;           /* the heads' backward scratch */
    float *dhead;             /* (N, C) the gradient of the lm transform's output */
    /* the micro-batch being processed (pl_model_use): views of mb[cur], the
     * batch set by the caller */
    int64_t cur;
    float *x0;
    pl_block_acts *acts;
    float *lnf, *lnf_mean, *lnf_rstd, *loss, *lse;
    int32_t *tokens, *targets; /* (N) */
    int32_t *types, *lengths, *labels; /* (N), (B), (B) as in pl_model_mb, or NULL */
    float *bin_loss, *dbin;   /* (B) */
    int64_t *sample;          /* (B) global sample index of each row (dropout masks) */
    int64_t iteration;        /* the training iteration (dropout masks) */
    int training;             /* dropout on (forward and backward of training steps) */
    uint64_t seed;            /* --seed (dropout masks) */
    pl_step_prof prof;
    float *dloss;             /* (N) */
    int64_t layer_id0;        /* added to the layer numbers that key dropout masks (an
                               * encoder-decoder's decoder: the encoder's layer count) */
    const float *dlnf_in;     /* a model without heads (an encoder-decoder's encoder): the
                               * gradient of its final norm's output, set before backward
                               * (rows as pl_block_norm_bwd takes them) */
    pl_param_fetch_fn fetch;  /* NULL unless parameters are sharded (ZeRO-3) */
    void *fetch_ctx;
} pl_model;

/* Plans and allocates activations for micro-batches of B x cfg->seq_length;
 * params and grads are this rank's flat buffers laid out by reg. Either may be
 * NULL when the caller binds the views itself with pl_model_rebind (ZeRO). The
 * activations are saved in bf16 if gemm's precision is bf16 at this call.
 * stage NULL: every layer, embedding and head, one micro-batch in flight. */
pl_status pl_model_init(pl_model *m, const pl_model_config *cfg, const pl_registry *reg,
                        float *params, float *grads, int64_t B, const pl_model_stage *stage,
                        pl_comm *tp, pl_gemm *gemm);
void pl_model_free(pl_model *m);

/* Re-points every parameter (grad = 0) or gradient (grad = 1) view at
 * locate(ctx, offset, grad) for the parameter's flat offset: ZeRO puts layer
 * views into working buffers and keeps the flat layout for everything else. */
pl_status pl_model_rebind(pl_model *m, int grad, pl_flat_locate_fn locate, void *ctx);

/* Bytes of activation and scratch memory planned (for the memory plan), and
 * what the plan would take with cfg.recompute off. */
size_t pl_model_activation_bytes(const pl_model *m);
size_t pl_model_activation_bytes_kept(const pl_model *m);

/* "none", "selective", "full, uniform, 2 layers per group", ... written into buf. */
const char *pl_recompute_name(const pl_recompute *rc, char *buf, size_t n);

/* Makes micro-batch slot k (0 <= k < inflight) the current one: the views
 * tokens, targets, dloss, sample, x0, acts, loss, ... point at mb[k]. */
void pl_model_use(pl_model *m, int64_t k);

/* The stage's output of the current micro-batch (not the last stage): the
 * last layer's (Nl, C) result, to send to the next stage. */
float *pl_model_output(const pl_model *m);

/* Forward of the current micro-batch: from m->tokens (and m->types) on the
 * first stage (else from m->x0, received), through the stage's layers (keys at
 * or past m->lengths[b] masked with a padding mask), to m->loss (N, from
 * m->targets; -1: no target) and with the binary head m->bin_loss (B, from
 * m->labels) on the last stage. With m->training, dropout as configured
 * (masks keyed by m->seed, m->iteration and m->sample). */
pl_status pl_model_forward(pl_model *m);

/* Backward of the current micro-batch after its forward, adding into the
 * gradient buffer: of sum_n dloss[n] * loss[n] (+ sum_b dbin[b] * bin_loss[b]
 * with the binary head) on the last stage, else from
 * the received gradient of the output (mb.dout); leaves the gradient of x0 in
 * mb.dx0 on a stage that is not the first. ready, when not NULL, is told each
 * layer's range as soon as it is final; its error stops the backward. */
pl_status pl_model_backward(pl_model *m, pl_grad_ready_fn ready, void *ctx);

/* The same backward in two halves (a stage planned with split_bwd; zero-bubble
 * schedules). The input half: everything the previous stage waits for (mb.dx0),
 * and the gradients outside the layers (embeddings, final norm, LM head); no
 * layer parameter's. The weight half, later, with the micro-batch's slot
 * current again: every layer parameter's gradient, each layer's range told to
 * ready as it is final. Together: pl_model_backward's gradients, bit for bit. */
pl_status pl_model_backward_input(pl_model *m);
pl_status pl_model_backward_weight(pl_model *m, pl_grad_ready_fn ready, void *ctx);

#endif
