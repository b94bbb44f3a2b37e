/* GPT forward and backward over one micro-batch (one pipeline stage holding
 * every layer; tensor parallelism inside the layers). */
#include "model/gpt.h"

#include "base/alloc.h"
#include "base/log.h"
#include "nn/linear.h"
#include "parallel/tp/layers.h"

#include <string.h>

static float *param_view(const pl_registry *reg, float *flat, const char *name)
{
    const pl_param *p = pl_registry_find(reg, name);
    return p && p->offset >= 0 && flat ? flat + p->offset : NULL;
}

static const char *const layer_names[12] = {
    "input_layernorm.weight",           "input_layernorm.bias",
    "self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias",
    "self_attention.linear_proj.weight", "self_attention.linear_proj.bias",
    "pre_mlp_layernorm.weight",         "pre_mlp_layernorm.bias",
    "mlp.linear_fc1.weight",            "mlp.linear_fc1.bias",
    "mlp.linear_fc2.weight",            "mlp.linear_fc2.bias"};

/* Binds layer `layer`'s 12 views: at flat + offset, or at locate(ctx, offset, grad). */
static pl_status layer_bind(const pl_registry *reg, const float *flat, pl_flat_locate_fn locate,
                            void *ctx, int grad, int64_t layer, pl_gpt_layer *out, int64_t *lo,
                            int64_t *hi)
{
    float **slot = &out->ln1_w;
    *lo = INT64_MAX;
    *hi = 0;
    for (int k = 0; k < 12; k++) {
        char name[PL_PARAM_NAME_MAX];
        snprintf(name, sizeof name, "decoder.layers.%lld.%s", (long long)layer, layer_names[k]);
        const pl_param *p = pl_registry_find(reg, name);
        if (!p || p->offset < 0)
            return pl_errorf(PL_ERR_INTERNAL, "parameter %s missing on this rank", name);
        slot[k] = locate ? locate(ctx, p->offset, grad) : flat ? (float *)flat + p->offset : NULL;
        *lo = p->offset < *lo ? p->offset : *lo;
        *hi = p->offset + p->numel > *hi ? p->offset + p->numel : *hi;
    }
    return PL_OK;
}

pl_status pl_gpt_layer_bind(const pl_registry *reg, const float *flat, int64_t layer,
                           pl_gpt_layer *out, int64_t *lo, int64_t *hi)
{
    return layer_bind(reg, flat, NULL, NULL, 0, layer, out, lo, hi);
}

/* Points the per-layer views of one flat buffer. */
static pl_status bind_layers(pl_gpt *m, pl_gpt_layer *out, float *flat)
{
    for (int64_t l = 0; l < m->cfg.num_layers; l++) {
        int64_t lo, hi;
        pl_status st = pl_gpt_layer_bind(m->reg, flat, l, &out[l], &lo, &hi);
        if (st)
            return st;
        m->layer_offset[l] = lo;
        m->layer_count[l] = hi - lo;
    }
    return PL_OK;
}

/* Adds the time a statement takes to m->prof.slot (the step breakdown). */
#define TIMED(m, slot, stmt)                                                                       \
    do {                                                                                           \
        double t0_ = pl_time_now();                                                                \
        stmt;                                                                                      \
        (m)->prof.slot += pl_time_now() - t0_;                                                     \
    } while (0)

/* Bump allocator over the activation block: 64-byte aligned slices. With a
 * NULL base it only counts. */
typedef struct bump {
    float *base;
    size_t used; /* floats */
} bump;

static float *take(bump *b, int64_t n)
{
    float *p = b->base ? b->base + b->used : NULL;
    b->used += (size_t)(n + 15) / 16 * 16;
    return p;
}

/* n bf16 values. */
static uint16_t *take16(bump *b, int64_t n) { return (uint16_t *)take(b, (n + 1) / 2); }

/* One layer's saved activations; attn and lse only when kept per layer, res2
 * only when not a group's output; qkv, attn and fc1 in bf16 under --bf16. */
static void take_layer(pl_gpt *m, bump *b, pl_gpt_layer_acts *a, int own_attn, int own_res2)
{
    const int64_t N = m->N, C = m->C;
    const int bf16 = m->act_bf16;
    a->ln1_mean = take(b, N);
    a->ln1_rstd = take(b, N);
    if (bf16)
        a->qkv_bf16 = take16(b, N * 3 * m->Cl);
    else
        a->qkv = take(b, N * 3 * m->Cl);
    if (own_attn) {
        if (bf16)
            a->attn_bf16 = take16(b, N * m->Cl);
        else
            a->attn = take(b, N * m->Cl);
        a->lse = take(b, m->B * m->NHl * m->T);
    }
    a->res1 = take(b, N * C);
    a->ln2_mean = take(b, N);
    a->ln2_rstd = take(b, N);
    if (bf16)
        a->fc1_bf16 = take16(b, N * m->Fl);
    else
        a->fc1 = take(b, N * m->Fl);
    if (own_res2)
        a->res2 = take(b, N * C);
}

/* The backward scratch of one layer. dfc1 and dgelu are adjacent: under
 * --bf16, backward's attention part widens the saved qkv into them (both dead
 * by then), so together they hold N x 3C/tp floats at least. Forward uses
 * dqkv, dattn and dgelu for the fp32 outputs of the qkv, attention and fc1
 * steps before they are saved in bf16. */
static void take_scratch(pl_gpt *m, bump *b)
{
    const int64_t N = m->N;
    int64_t nf = N * m->Fl;
    if (m->act_bf16 && 2 * nf < N * 3 * m->Cl)
        nf = (N * 3 * m->Cl + 1) / 2;
    m->dqkv = take(b, N * 3 * m->Cl);
    m->dattn = take(b, N * m->Cl);
    m->dfc1 = take(b, nf);
    m->gelu = m->dfc1; /* forward's GELU output; backward rebuilds it there before dfc1 */
    m->dgelu = take(b, nf);
    m->qkv_f32 = m->dfc1;
    m->attn_ws = take(b, (int64_t)pl_attention_workspace(&m->attn));
}

/* Lays out every activation and scratch buffer; returns the floats needed.
 * With recompute = 0 it plans as if cfg.recompute were off (for the report).
 * Kept per layer: LayerNorm mean/rstd, qkv, attn + lse (not under selective),
 * res1, fc1, res2. A fully recomputed layer uses the buffers of its position
 * in its group (slots), except the group's last output, which is the next
 * group's checkpointed input and is kept. With recompute = 0 nothing of
 * m->slots is used, so m->group_start may say anything. */
static size_t plan(pl_gpt *m, float *base, int recompute)
{
    const int64_t N = m->N, C = m->C, L = m->cfg.num_layers;
    const pl_gpt_recompute *rc = &m->cfg.recompute;
    const int selective = recompute && rc->granularity == PL_RECOMPUTE_SELECTIVE;
    bump b = {base, 0};
#define TAKE(dst, n) ((dst) = take(&b, (n)))
    TAKE(m->x0, N * C);
    float *attn = NULL, *lse = NULL;
    if (selective) {
        attn = take(&b, N * m->Cl);
        lse = take(&b, m->B * m->NHl * m->T);
    }
    int64_t nslots = 0;
    for (int64_t l = 0; recompute && l < L; l++)
        if (m->group_start[l] >= 0 && l - m->group_start[l] + 1 > nslots)
            nslots = l - m->group_start[l] + 1;
    /* Block: the recomputed layers come first, so when backward reaches them
     * the last layer's buffers are dead: its group slot is those (not its res2,
     * the final norm's input). Uniform: the slots are their own. */
    const int alias_last = nslots == 1 && m->group_start[L - 1] < 0;
    for (int64_t k = 0; k < nslots && !alias_last; k++) /* the last position ends its group */
        take_layer(m, &b, &m->slots[k], 1, k + 1 < nslots);
    for (int64_t l = 0; l < L; l++) {
        pl_gpt_layer_acts *a = &m->acts[l];
        int64_t g = recompute ? m->group_start[l] : -1;
        if (g < 0) {
            take_layer(m, &b, a, !selective, 1);
            if (selective) {
                a->attn = attn;
                a->lse = lse;
            }
        } else if (l + 1 == L || m->group_start[l + 1] != g) {
            TAKE(a->res2, N * C);
        }
    }
    if (alias_last) {
        m->slots[0] = m->acts[L - 1];
        m->slots[0].res2 = NULL;
    }
    for (int64_t l = 0; l < L; l++) {
        int64_t g = recompute ? m->group_start[l] : -1;
        if (g >= 0) {
            float *res2 = m->acts[l].res2;
            m->acts[l] = m->slots[l - g];
            if (l + 1 == L || m->group_start[l + 1] != g)
                m->acts[l].res2 = res2;
        }
    }
    TAKE(m->lnf, N * C);
    TAKE(m->lnf_mean, N);
    TAKE(m->lnf_rstd, N);
    TAKE(m->loss, N);
    TAKE(m->lse, N);
    TAKE(m->rows, 3 * N);
    TAKE(m->dloss, N);
    TAKE(m->ln, N * C);
    TAKE(m->dres, N * C);
    TAKE(m->dln, N * C);
    TAKE(m->lm_ws, (int64_t)pl_lmhead_workspace(N, m->lm_chunk));
    /* Kept logits live from the LM head's forward to its backward, when every
     * layer buffer below is dead (forward is over, backward's layers have not
     * started): those buffers then share the logits' memory when they fit. */
    bump probe = {NULL, 0}, inner = {m->lm_ws, 0};
    take_scratch(m, &probe);
    take_scratch(m, m->cfg.keep_logits &&
                            probe.used <= pl_lmhead_workspace(N, m->lm_chunk) ? &inner : &b);
#undef TAKE
    return b.used;
}

/* Which group each layer is recomputed in (Megatron's TransformerBlock
 * _checkpointed_forward): uniform n: [0, n), [n, 2n), ..., the last group
 * shorter when n does not divide L; block n: each of layers 0..n-1 alone. */
static pl_status plan_groups(pl_gpt *m)
{
    const pl_gpt_recompute *rc = &m->cfg.recompute;
    const int64_t L = m->cfg.num_layers, n = rc->num_layers;
    for (int64_t l = 0; l < L; l++)
        m->group_start[l] = -1;
    if (rc->granularity != PL_RECOMPUTE_FULL)
        return PL_OK;
    if (n < 1 || n > L)
        return pl_errorf(PL_ERR_ARG, "--recompute-num-layers %lld: must be between 1 and the "
                         "layers of the stage (%lld)", (long long)n, (long long)L);
    for (int64_t l = 0; l < L; l++)
        m->group_start[l] = rc->method == PL_RECOMPUTE_BLOCK ? (l < n ? l : -1) : l / n * n;
    return PL_OK;
}

const char *pl_gpt_recompute_name(const pl_gpt_recompute *rc, char *buf, size_t n)
{
    if (rc->granularity == PL_RECOMPUTE_FULL)
        snprintf(buf, n, "full, %s, %lld layer%s", rc->method == PL_RECOMPUTE_BLOCK ? "block"
                 : "uniform", (long long)rc->num_layers, rc->num_layers == 1 ? "" : "s");
    else
        snprintf(buf, n, "%s", rc->granularity == PL_RECOMPUTE_SELECTIVE ? "selective" : "none");
    return buf;
}

pl_status pl_gpt_init(pl_gpt *m, const pl_gpt_config *cfg, const pl_registry *reg, float *params,
                      float *grads, int64_t B, pl_comm *tp, pl_gemm *gemm)
{
    pl_status st = PL_OK;
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->reg = reg;
    m->B = B;
    m->T = cfg->seq_length;
    m->N = B * m->T;
    m->C = cfg->hidden;
    m->tp = tp;
    m->gemm = gemm;
    int tps = reg->tp_size;
    m->Cl = cfg->hidden / tps;
    m->Fl = cfg->ffn_hidden / tps;
    m->NHl = cfg->heads / tps;
    m->HS = cfg->hidden / cfg->heads;
    m->attn = (pl_attn_shape){.B = B, .T = m->T, .NH = m->NHl, .G = m->NHl, .HS = m->HS,
                              .causal = 1, .NHg = cfg->heads, .h0 = m->NHl * reg->tp_rank};
    m->Vl = cfg->padded_vocab / tps;
    m->v0 = m->Vl * reg->tp_rank;
    m->act_bf16 = pl_gemm_get_precision(gemm) == PL_GEMM_BF16;
    /* Kept logits need the whole vocabulary slice in one chunk (kernels.h). */
    m->lm_chunk = m->Vl < 2048 || cfg->keep_logits ? m->Vl : 2048;
    const int64_t L = cfg->num_layers;
    m->w = pl_calloc((size_t)L, sizeof *m->w);
    m->g = pl_calloc((size_t)L, sizeof *m->g);
    m->acts = pl_calloc((size_t)L, sizeof *m->acts);
    m->slots = pl_calloc((size_t)L, sizeof *m->slots);
    m->group_start = pl_calloc((size_t)L, sizeof *m->group_start);
    m->layer_offset = pl_calloc((size_t)L, sizeof *m->layer_offset);
    m->layer_count = pl_calloc((size_t)L, sizeof *m->layer_count);
    m->tokens = pl_calloc((size_t)m->N, sizeof *m->tokens);
    m->targets = pl_calloc((size_t)m->N, sizeof *m->targets);
    if (!m->w || !m->g || !m->acts || !m->slots || !m->group_start || !m->layer_offset || !m->layer_count || !m->tokens ||
        !m->targets) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the model's tables");
        goto fail;
    }
    m->wte = param_view(reg, params, "embedding.word_embeddings.weight");
    m->wpe = param_view(reg, params, "embedding.position_embeddings.weight");
    m->lnf_w = param_view(reg, params, "decoder.final_layernorm.weight");
    m->lnf_b = param_view(reg, params, "decoder.final_layernorm.bias");
    m->dwte = param_view(reg, grads, "embedding.word_embeddings.weight");
    m->dwpe = param_view(reg, grads, "embedding.position_embeddings.weight");
    m->dlnf_w = param_view(reg, grads, "decoder.final_layernorm.weight");
    m->dlnf_b = param_view(reg, grads, "decoder.final_layernorm.bias");
    if (params && (!m->wte || !m->wpe || !m->lnf_w || !m->lnf_b)) {
        st = pl_errorf(PL_ERR_INTERNAL, "embedding or final norm missing on this rank");
        goto fail;
    }
    PL_TRY(bind_layers(m, m->w, params));
    PL_TRY(bind_layers(m, m->g, grads));
    PL_TRY(plan_groups(m));
    m->act_floats_kept = plan(m, NULL, 0);
    m->act_floats = plan(m, NULL, 1);
    size_t bytes;
    if (pl_mul_size(m->act_floats, sizeof(float), &bytes) || pl_add_size(bytes, 64, &bytes)) {
        st = pl_errorf(PL_ERR_NOMEM, "activation plan overflows");
        goto fail;
    }
    m->act_mem = pl_malloc(bytes);
    if (!m->act_mem) {
        st = pl_errorf(PL_ERR_NOMEM,
                       "cannot allocate %.1f MiB of activations (--micro-batch-size %lld)",
                       (double)bytes / (1 << 20), (long long)B);
        goto fail;
    }
    float *base = (float *)(((uintptr_t)m->act_mem + 63) & ~(uintptr_t)63);
    memset(base, 0, m->act_floats * sizeof(float)); /* touch every page once, now */
    plan(m, base, 1);
    /* GEMM primitives of every shape the step uses, created before step 1. */
    const int64_t N = m->N, C = m->C;
    PL_TRY(pl_nn_linear_prepare(gemm, N, C, 3 * m->Cl));
    PL_TRY(pl_nn_linear_prepare(gemm, N, m->Cl, C));
    PL_TRY(pl_nn_linear_prepare(gemm, N, C, m->Fl));
    PL_TRY(pl_nn_linear_prepare(gemm, N, m->Fl, C));
    PL_TRY(pl_lmhead_prepare(gemm, N, C, m->Vl, m->lm_chunk));
    return PL_OK;
fail:
    pl_gpt_free(m);
    return st;
}

void pl_gpt_free(pl_gpt *m)
{
    pl_free(m->w);
    pl_free(m->g);
    pl_free(m->acts);
    pl_free(m->slots);
    pl_free(m->group_start);
    pl_free(m->layer_offset);
    pl_free(m->layer_count);
    pl_free(m->tokens);
    pl_free(m->targets);
    pl_free(m->act_mem);
    memset(m, 0, sizeof *m);
}

pl_status pl_gpt_rebind(pl_gpt *m, int grad, pl_flat_locate_fn locate, void *ctx)
{
    static const char *const names[4] = {
        "embedding.word_embeddings.weight", "embedding.position_embeddings.weight",
        "decoder.final_layernorm.weight", "decoder.final_layernorm.bias"};
    float **dst[2][4] = {{&m->wte, &m->wpe, &m->lnf_w, &m->lnf_b},
                         {&m->dwte, &m->dwpe, &m->dlnf_w, &m->dlnf_b}};
    for (int k = 0; k < 4; k++) {
        const pl_param *p = pl_registry_find(m->reg, names[k]);
        if (!p || p->offset < 0)
            return pl_errorf(PL_ERR_INTERNAL, "parameter %s missing on this rank", names[k]);
        *dst[grad != 0][k] = locate(ctx, p->offset, grad);
    }
    for (int64_t l = 0; l < m->cfg.num_layers; l++) {
        int64_t lo, hi;
        pl_status st = layer_bind(m->reg, NULL, locate, ctx, grad, l, grad ? &m->g[l] : &m->w[l],
                                  &lo, &hi);
        if (st)
            return st;
    }
    return PL_OK;
}

size_t pl_gpt_activation_bytes(const pl_gpt *m) { return m->act_floats * sizeof(float); }

size_t pl_gpt_activation_bytes_kept(const pl_gpt *m)
{
    return m->act_floats_kept * sizeof(float);
}

/* Layer l's forward from its input x into m->acts[l] (after the fetch). */
static pl_status layer_fwd(pl_gpt *m, int64_t l, const float *x)
{
    pl_status st = PL_OK;
    const int64_t N = m->N, C = m->C, Cl = m->Cl, Fl = m->Fl;
    const float eps = m->cfg.ln_eps;
    const pl_gpt_layer *w = &m->w[l];
    const pl_gpt_layer_acts *a = &m->acts[l];
    /* --bf16: qkv, attn and fc1 come out in fp32 scratch and are saved in bf16 */
    float *qkv = a->qkv ? a->qkv : m->dqkv, *attn = a->attn ? a->attn : m->dattn;
    float *fc1 = a->fc1 ? a->fc1 : m->dgelu;
    pl_cpu_layernorm_fwd(m->ln, a->ln1_mean, a->ln1_rstd, x, w->ln1_w, w->ln1_b, N, C, eps);
    TIMED(m, linear,
          PL_TRY(pl_tp_column_linear_fwd(m->tp, m->gemm, qkv, m->ln, w->qkv_w, w->qkv_b, N, C,
                                         3 * Cl)));
    if (m->act_bf16)
        pl_cpu_round_bf16(a->qkv_bf16, qkv, N * 3 * Cl);
    TIMED(m, attention, pl_cpu_attention_fwd(attn, a->lse, qkv, &m->attn, m->attn_ws));
    if (m->act_bf16)
        pl_cpu_round_bf16(a->attn_bf16, attn, N * Cl);
    TIMED(m, linear,
          PL_TRY(pl_tp_row_linear_fwd(m->tp, m->gemm, a->res1, attn, w->proj_w, w->proj_b, N,
                                      Cl, C)));
    pl_cpu_add(a->res1, a->res1, x, N * C);
    pl_cpu_layernorm_fwd(m->ln, a->ln2_mean, a->ln2_rstd, a->res1, w->ln2_w, w->ln2_b, N, C, eps);
    TIMED(m, linear,
          PL_TRY(pl_tp_column_linear_fwd(m->tp, m->gemm, fc1, m->ln, w->fc1_w, w->fc1_b, N, C,
                                         Fl)));
    if (m->act_bf16) {
        pl_cpu_f32_to_bf16(a->fc1_bf16, fc1, N, Fl, Fl);
        pl_cpu_gelu_fwd_bf16(m->gelu, a->fc1_bf16, N * Fl);
    } else {
        pl_cpu_gelu_fwd(m->gelu, a->fc1, N * Fl);
    }
    TIMED(m, linear,
          PL_TRY(pl_tp_row_linear_fwd(m->tp, m->gemm, a->res2, m->gelu, w->fc2_w, w->fc2_b, N, Fl,
                                      C)));
    pl_cpu_add(a->res2, a->res2, a->res1, N * C);
fail:
    return st;
}

/* Layer l's input: the embedding output or the previous layer's output. */
static const float *layer_input(const pl_gpt *m, int64_t l)
{
    return l ? m->acts[l - 1].res2 : m->x0;
}

pl_status pl_gpt_forward(pl_gpt *m)
{
    pl_status st = PL_OK;
    const int64_t B = m->B, T = m->T, N = m->N, C = m->C, L = m->cfg.num_layers;
    const float eps = m->cfg.ln_eps;
    if (m->fetch)
        PL_TRY(m->fetch(m->fetch_ctx, -1, 0));
    PL_TRY(pl_tp_embedding_fwd(m->tp, m->x0, m->tokens, m->wte, m->wpe, B, T, C, m->v0, m->Vl));
    for (int64_t l = 0; l < L; l++) {
        if (m->fetch)
            PL_TRY(m->fetch(m->fetch_ctx, l, 0));
        PL_TRY(layer_fwd(m, l, layer_input(m, l)));
    }
    pl_cpu_layernorm_fwd(m->lnf, m->lnf_mean, m->lnf_rstd, layer_input(m, L), m->lnf_w, m->lnf_b,
                         N, C, eps);
    TIMED(m, lmhead,
          PL_TRY(pl_tp_lmhead_loss(m->tp, m->gemm, m->loss, m->lse, m->lnf, m->wte, m->targets, N,
                                   C, m->v0, m->Vl, m->lm_chunk, m->lm_ws, m->rows)));
fail:
    return st;
}

pl_status pl_gpt_backward(pl_gpt *m, pl_grad_ready_fn ready, void *ctx)
{
    pl_status st = PL_OK;
    const int64_t B = m->B, T = m->T, N = m->N, C = m->C, Cl = m->Cl, Fl = m->Fl;
    const int64_t L = m->cfg.num_layers;
    const float eps = m->cfg.ln_eps;
    const int selective = m->cfg.recompute.granularity == PL_RECOMPUTE_SELECTIVE;
    memset(m->dres, 0, (size_t)(N * C) * sizeof(float));
    memset(m->dln, 0, (size_t)(N * C) * sizeof(float));
    TIMED(m, lmhead,
          PL_TRY(pl_tp_lmhead_bwd(m->tp, m->gemm, m->dln, m->dwte, m->lnf, m->wte, m->targets,
                                  m->lse, m->dloss, N, C, m->v0, m->Vl, m->lm_chunk, m->lm_ws,
                                  m->cfg.keep_logits)));
    pl_cpu_layernorm_bwd(m->dres, m->dlnf_w, m->dlnf_b, m->dln, layer_input(m, L), m->lnf_w,
                         m->lnf_mean, m->lnf_rstd, N, C);
    for (int64_t l = L - 1; l >= 0; l--) {
        const int64_t g = m->group_start[l];
        if (g >= 0 && (l + 1 == L || m->group_start[l + 1] != g)) {
            /* full recompute: rerun the group's forward from its checkpointed
             * input (ZeRO-3 gathers each layer again through fetch) */
            for (int64_t k = g; k <= l; k++) {
                if (m->fetch)
                    PL_TRY(m->fetch(m->fetch_ctx, k, 0));
                PL_TRY(layer_fwd(m, k, layer_input(m, k)));
            }
        }
        if (m->fetch)
            PL_TRY(m->fetch(m->fetch_ctx, l, 1));
        const pl_gpt_layer *w = &m->w[l], *gr = &m->g[l];
        const pl_gpt_layer_acts *a = &m->acts[l];
        const float *x = layer_input(m, l);
        /* MLP branch: res2 = res1 + fc2(gelu(fc1(ln2(res1)))); dres = d res2 */
        if (m->act_bf16)
            pl_cpu_gelu_fwd_bf16(m->gelu, a->fc1_bf16, N * Fl);
        else
            pl_cpu_gelu_fwd(m->gelu, a->fc1, N * Fl);
        memset(m->dgelu, 0, (size_t)(N * Fl) * sizeof(float));
        TIMED(m, linear,
              PL_TRY(pl_tp_row_linear_bwd(m->tp, m->gemm, m->dgelu, gr->fc2_w, gr->fc2_b, m->dres,
                                          m->gelu, w->fc2_w, N, Fl, C)));
        memset(m->dfc1, 0, (size_t)(N * Fl) * sizeof(float)); /* m->gelu is spent */
        if (m->act_bf16)
            pl_cpu_gelu_bwd_bf16(m->dfc1, a->fc1_bf16, m->dgelu, N * Fl);
        else
            pl_cpu_gelu_bwd(m->dfc1, a->fc1, m->dgelu, N * Fl);
        pl_cpu_layernorm_fwd(m->ln, a->ln2_mean, a->ln2_rstd, a->res1, w->ln2_w, w->ln2_b, N, C,
                             eps);
        memset(m->dln, 0, (size_t)(N * C) * sizeof(float));
        TIMED(m, linear,
              PL_TRY(pl_tp_column_linear_bwd(m->tp, m->gemm, m->dln, gr->fc1_w, gr->fc1_b, m->dfc1,
                                             m->ln, w->fc1_w, N, C, Fl)));
        pl_cpu_layernorm_bwd(m->dres, gr->ln2_w, gr->ln2_b, m->dln, a->res1, w->ln2_w, a->ln2_mean,
                             a->ln2_rstd, N, C);
        /* attention branch: res1 = x + proj(attn(qkv(ln1(x)))); dres = d res1.
         * --bf16: qkv widened into dfc1 and dgelu, attn into ln (all dead here) */
        const float *qkv = a->qkv, *attn = a->attn;
        if (m->act_bf16) {
            pl_cpu_widen_bf16(m->qkv_f32, a->qkv_bf16, N * 3 * Cl);
            qkv = m->qkv_f32;
        }
        if (selective) {
            TIMED(m, attention,
                  pl_cpu_attention_fwd(a->attn, a->lse, qkv, &m->attn, m->attn_ws));
            if (m->act_bf16)
                pl_cpu_round_bf16(NULL, a->attn, N * Cl);
        } else if (m->act_bf16) {
            pl_cpu_widen_bf16(m->ln, a->attn_bf16, N * Cl);
            attn = m->ln;
        }
        memset(m->dattn, 0, (size_t)(N * Cl) * sizeof(float));
        TIMED(m, linear,
              PL_TRY(pl_tp_row_linear_bwd(m->tp, m->gemm, m->dattn, gr->proj_w, gr->proj_b,
                                          m->dres, attn, w->proj_w, N, Cl, C)));
        memset(m->dqkv, 0, (size_t)(N * 3 * Cl) * sizeof(float));
        TIMED(m, attention,
              pl_cpu_attention_bwd(m->dqkv, m->dattn, qkv, attn, a->lse, &m->attn, m->attn_ws));
        pl_cpu_layernorm_fwd(m->ln, a->ln1_mean, a->ln1_rstd, x, w->ln1_w, w->ln1_b, N, C, eps);
        memset(m->dln, 0, (size_t)(N * C) * sizeof(float));
        TIMED(m, linear,
              PL_TRY(pl_tp_column_linear_bwd(m->tp, m->gemm, m->dln, gr->qkv_w, gr->qkv_b, m->dqkv,
                                             m->ln, w->qkv_w, N, C, 3 * Cl)));
        pl_cpu_layernorm_bwd(m->dres, gr->ln1_w, gr->ln1_b, m->dln, x, w->ln1_w, a->ln1_mean,
                             a->ln1_rstd, N, C);
        if (ready)
            ready(ctx, m->layer_offset[l], m->layer_count[l]);
    }
    pl_tp_embedding_bwd(m->dwte, m->dwpe, m->dres, m->tokens, B, T, C, m->v0, m->Vl);
fail:
    return st;
}
