/* The transformer block: forward and backward of one layer from its spec. */
#include "nn/block.h"

#include "base/log.h"
#include "nn/linear.h"
#include "parallel/tp/layers.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

int pl_block_param_names(const pl_block_spec *s, pl_block_param_name names[PL_BLOCK_MAX_PARAMS])
{
    /* in the flat layout's order: pre-norm name, post-norm name (NULL: the same) */
    static const struct {
        const char *pre, *post;
        size_t field;
        int norm_bias, linear_bias, cross;
    } all[PL_BLOCK_MAX_PARAMS] = {
#define W(f) offsetof(pl_block_weights, f)
        {"input_layernorm.weight", "post_self_attn_layernorm.weight", W(norm1_w), 0, 0, 0},
        {"input_layernorm.bias", "post_self_attn_layernorm.bias", W(norm1_b), 1, 0, 0},
        {"self_attention.linear_qkv.weight", NULL, W(qkv_w), 0, 0, 0},
        {"self_attention.linear_qkv.bias", NULL, W(qkv_b), 0, 1, 0},
        {"self_attention.linear_proj.weight", NULL, W(proj_w), 0, 0, 0},
        {"self_attention.linear_proj.bias", NULL, W(proj_b), 0, 1, 0},
        {"pre_cross_attn_layernorm.weight", "post_cross_attn_layernorm.weight", W(normx_w), 0, 0, 1},
        {"pre_cross_attn_layernorm.bias", "post_cross_attn_layernorm.bias", W(normx_b), 1, 0, 1},
        {"cross_attention.linear_q.weight", NULL, W(xq_w), 0, 0, 1},
        {"cross_attention.linear_q.bias", NULL, W(xq_b), 0, 1, 1},
        {"cross_attention.linear_kv.weight", NULL, W(xkv_w), 0, 0, 1},
        {"cross_attention.linear_kv.bias", NULL, W(xkv_b), 0, 1, 1},
        {"cross_attention.linear_proj.weight", NULL, W(xproj_w), 0, 0, 1},
        {"cross_attention.linear_proj.bias", NULL, W(xproj_b), 0, 1, 1},
        {"pre_mlp_layernorm.weight", "post_mlp_layernorm.weight", W(norm2_w), 0, 0, 0},
        {"pre_mlp_layernorm.bias", "post_mlp_layernorm.bias", W(norm2_b), 1, 0, 0},
        {"mlp.linear_fc1.weight", NULL, W(fc1_w), 0, 0, 0},
        {"mlp.linear_fc1.bias", NULL, W(fc1_b), 0, 1, 0},
        {"mlp.linear_fc2.weight", NULL, W(fc2_w), 0, 0, 0},
        {"mlp.linear_fc2.bias", NULL, W(fc2_b), 0, 1, 0},
#undef W
    };
    int n = 0;
    for (int k = 0; k < PL_BLOCK_MAX_PARAMS; k++) {
        if ((all[k].norm_bias && !s->norm_bias) || (all[k].linear_bias && !s->bias) ||
            (all[k].cross && !s->cross_attention))
            continue;
        names[n].suffix = s->post_norm && all[k].post ? all[k].post : all[k].pre;
        names[n++].field = all[k].field;
    }
    return n;
}

uint64_t pl_block_dropout_stream(int64_t iteration, int64_t layer, int site)
{
    /* distinct for iterations < 2^40, layers < 2^20 and sites < 16 (sites 4 and up
     * in bits 62-63 and the two lowest: sites 0-3 keep their streams); far from
     * the FNV-1a name hashes that initialisation uses as streams */
    return 0x64726f70ull << 32 ^ ((uint64_t)iteration << 22 | (uint64_t)layer << 2 |
                                  (uint64_t)(site & 3)) ^ (uint64_t)(site >> 2) << 62;
}

int pl_block_act_gated(pl_act_kind act) { return act == PL_ACT_SWIGLU || act == PL_ACT_GEGLU; }

/* The attention scores' scale. */
static float attn_scale(const pl_block_ctx *c)
{
    return c->softmax_scale > 0 ? c->softmax_scale : 1.0f / sqrtf((float)c->dims.HS);
}

/* The fused attention's shape on this rank: heads and groups of the rank, the
 * spec's mask, and layer's attention dropout keyed by the global heads; the
 * scale and the relative position bias. */
static pl_attn_shape attn_shape(const pl_block_ctx *c, int64_t layer)
{
    const pl_dropout_key *k = &c->drop;
    pl_attn_shape s = {c->B, c->T, c->NHl, c->Gl, c->dims.HS, c->spec.mask == PL_MASK_CAUSAL,
                       c->spec.mask == PL_MASK_PADDING ? c->pad_len : NULL, k->attention,
                       k->seed, pl_block_dropout_stream(k->iteration, layer, 0), k->sample,
                       c->dims.NH, (int64_t)c->tp_rank * c->NHl, 0, c->softmax_scale,
                       c->rel_bias, c->drel_bias};
    return s;
}

/* Cross-attention's: multi-head, Tk keys, the encoder's padding. */
static pl_attn_shape cross_shape(const pl_block_ctx *c, int64_t layer)
{
    const pl_dropout_key *k = &c->drop;
    pl_attn_shape s = {c->B, c->T, c->NHl, c->NHl, c->dims.HS, 0, c->enc_len, k->attention,
                       k->seed, pl_block_dropout_stream(k->iteration, layer, 4), k->sample,
                       c->dims.NH, (int64_t)c->tp_rank * c->NHl, c->Tk, c->softmax_scale,
                       NULL, NULL};
    return s;
}

pl_status pl_block_ctx_init(pl_block_ctx *c, const pl_block_spec *spec, const pl_block_dims *d,
                            float eps, int64_t B, int64_t T, int64_t Tk, pl_comm *tp, int tp_rank,
                            int sp, pl_gemm *gemm, pl_step_prof *prof)
{
    memset(c, 0, sizeof *c);
    if (spec->res_post_norm && spec->post_norm)
        return pl_errorf(PL_ERR_ARG, "--apply-residual-connection-post-layernorm is for "
                         "pre-norm layers (Megatron's): this layer is post-norm");
    if (spec->cross_attention && (d->G != d->NH || Tk < 1))
        return pl_errorf(PL_ERR_ARG, "cross-attention: multi-head only (query groups %lld, heads "
                         "%lld; Megatron core refuses grouped-query cross-attention too) and at "
                         "least one encoder position (%lld)", (long long)d->G, (long long)d->NH,
                         (long long)Tk);
    const int tps = tp ? tp->size : 1;
    if (d->NH % tps || (d->G % tps && tps % d->G) || d->F % tps || d->NH % d->G)
        return pl_errorf(PL_ERR_ARG, "heads (%lld) and the MLP width (%lld) must divide by "
                         "--tensor-model-parallel-size %d, heads by query groups (%lld), and "
                         "groups by the TP size or the TP size by groups",
                         (long long)d->NH, (long long)d->F, tps, (long long)d->G);
    if (sp && tps > 1 && (B * T) % tps)
        return pl_errorf(PL_ERR_ARG, "--sequence-parallel: --micro-batch-size x --seq-length (%lld) "
                         "must divide by --tensor-model-parallel-size %d", (long long)(B * T), tps);
    if (sp && tps > 1 && spec->cross_attention && (B * Tk) % tps)
        return pl_errorf(PL_ERR_ARG, "--sequence-parallel: --micro-batch-size x the encoder's "
                         "positions (%lld) must divide by --tensor-model-parallel-size %d",
                         (long long)(B * Tk), tps);
    c->spec = *spec;
    c->dims = *d;
    c->eps = eps;
    c->B = B;
    c->T = T;
    c->N = B * T;
    c->Tk = spec->cross_attention ? Tk : 0;
    c->Nk = B * c->Tk;
    c->rope_rows = T;
    c->rel_rows = T;
    c->tp = tp;
    c->tp_size = tps;
    c->tp_rank = tp_rank;
    c->sp = sp && tps > 1;
    c->Nl = c->sp ? c->N / tps : c->N;
    c->n0 = c->sp ? c->Nl * tp_rank : 0;
    c->gemm = gemm;
    c->prof = prof;
    c->NHl = d->NH / tps;
    c->kv_shared = d->G % tps != 0;
    c->Gl = c->kv_shared ? 1 : d->G / tps;
    c->Al = c->NHl * d->HS;
    c->QKVl = (c->NHl + 2 * c->Gl) * d->HS;
    c->Fl = d->F / tps;
    c->F1l = pl_block_act_gated(spec->act) ? 2 * c->Fl : c->Fl;
    c->act_bf16 = pl_gemm_get_precision(gemm) == PL_GEMM_BF16;
    if (c->act_bf16 && c->Al > d->C) /* backward widens the saved attention into norm_out */
        return pl_errorf(PL_ERR_UNSUPPORTED, "--bf16 with heads x --kv-channels (%lld) above "
                         "--hidden-size (%lld) is not supported", (long long)(d->NH * d->HS),
                         (long long)d->C);
    return PL_OK;
}

void pl_block_take_acts(const pl_block_ctx *c, pl_plan *p, pl_block_acts *a, int own_attn,
                        int own_res2)
{
    const int64_t N = c->N, Nl = c->Nl, C = c->dims.C;
    const int bf16 = c->act_bf16;
    if (c->spec.norm == PL_NORM_LAYERNORM)
        a->norm1_mean = pl_plan_take(p, Nl);
    a->norm1_rstd = pl_plan_take(p, Nl);
    if (bf16)
        a->qkv_bf16 = pl_plan_take16(p, N * c->QKVl);
    else
        a->qkv = pl_plan_take(p, N * c->QKVl);
    if (own_attn) {
        if (bf16)
            a->attn_bf16 = pl_plan_take16(p, N * c->Al);
        else
            a->attn = pl_plan_take(p, N * c->Al);
        a->lse = pl_plan_take(p, c->B * c->NHl * c->T);
    }
    a->res1 = pl_plan_take(p, Nl * C);
    if (c->spec.norm == PL_NORM_LAYERNORM)
        a->norm2_mean = pl_plan_take(p, Nl);
    a->norm2_rstd = pl_plan_take(p, Nl);
    if (bf16)
        a->fc1_bf16 = pl_plan_take16(p, N * c->F1l);
    else
        a->fc1 = pl_plan_take(p, N * c->F1l);
    if (own_res2)
        a->res2 = pl_plan_take(p, Nl * C);
    if (c->spec.cross_attention) {
        if (c->spec.norm == PL_NORM_LAYERNORM)
            a->normx_mean = pl_plan_take(p, Nl);
        a->normx_rstd = pl_plan_take(p, Nl);
        a->xq = pl_plan_take(p, N * c->Al);
        a->xkv = pl_plan_take(p, c->Nk * 2 * c->Al);
        if (own_attn) {
            a->xattn = pl_plan_take(p, N * c->Al);
            a->xlse = pl_plan_take(p, c->B * c->NHl * c->T);
        }
        a->resx = pl_plan_take(p, Nl * C);
    }
    if (c->split_bwd) {
        a->w_dn1 = pl_plan_take(p, Nl * C);
        a->w_dn2 = pl_plan_take(p, Nl * C);
        if (c->spec.cross_attention)
            a->w_dnx = pl_plan_take(p, Nl * C);
        a->w_dy1 = pl_plan_take(p, N * C);
        a->w_dqkv = pl_plan_take(p, N * c->QKVl);
        a->w_dy2 = pl_plan_take(p, N * C);
        a->w_dfc1 = pl_plan_take(p, N * c->F1l);
        if (c->spec.cross_attention) {
            a->w_dyx = pl_plan_take(p, N * C);
            a->w_dxq = pl_plan_take(p, N * c->Al);
            a->w_dxkv = pl_plan_take(p, c->Nk * 2 * c->Al);
        }
    }
    if (c->spec.post_norm) {
        a->pre1 = pl_plan_take(p, Nl * C);
        a->pre2 = pl_plan_take(p, Nl * C);
        if (c->spec.cross_attention)
            a->prex = pl_plan_take(p, Nl * C);
    }
}

/* dfc1 and dact are adjacent: under --bf16 backward's attention part widens the
 * saved qkv into them (both dead by then), so together they hold N x QKV floats
 * at least. Forward uses dqkv, dattn and dact for the fp32 outputs of the qkv,
 * attention and fc1 steps before they are saved in bf16 (dact holds F1 columns). */
void pl_block_take_rope(pl_block_ctx *c, pl_plan *p, const pl_rope_config *rope)
{
    if (c->spec.pos == PL_POS_RELATIVE) {
        c->rel_bias = pl_plan_take(p, c->NHl * (2 * c->rel_rows - 1));
        c->drel_bias = pl_plan_take(p, c->NHl * (2 * c->rel_rows - 1));
    }
    if (c->spec.pos != PL_POS_ROPE)
        return;
    /* Megatron: rotary dims = kv_channels * rotary_percent (even) */
    c->rope_rot = (int64_t)((double)c->dims.HS * rope->percent) / 2 * 2;
    c->rope_cos = pl_plan_take(p, c->rope_rows * (c->rope_rot / 2));
    c->rope_sin = pl_plan_take(p, c->rope_rows * (c->rope_rot / 2));
}

void pl_block_take_scratch(pl_block_ctx *c, pl_plan *p)
{
    const int64_t N = c->N;
    int64_t nf = N * c->F1l;
    if (c->act_bf16 && 2 * nf < N * c->QKVl)
        nf = (N * c->QKVl + 1) / 2;
    c->dqkv = pl_plan_take(p, N * c->QKVl);
    c->dattn = pl_plan_take(p, N * c->Al);
    c->dfc1 = pl_plan_take(p, nf);
    c->act = c->dfc1; /* forward's act(fc1); backward rebuilds it there before dfc1 */
    c->dact = pl_plan_take(p, nf);
    c->qkv_f32 = c->dfc1;
    pl_attn_shape s = attn_shape(c, 0);
    const pl_attn_shape xs = cross_shape(c, 0);
    static const float planned = 0.0f; /* a bias's workspace, before its vectors are placed */
    if (c->spec.pos == PL_POS_RELATIVE)
        s.rel_bias = &planned;
    size_t ws = pl_attention_workspace(&s);
    if (c->spec.cross_attention && pl_attention_workspace(&xs) > ws)
        ws = pl_attention_workspace(&xs);
    c->attn_ws = pl_plan_take(p, (int64_t)ws);
    if (c->spec.cross_attention)
        c->dxkv = pl_plan_take(p, c->Nk * 2 * c->Al);
    if (c->sp || c->split_bwd)
        c->dnorm_w = pl_plan_take(p, 2 * c->dims.C);
    if (c->kv_shared)
        c->kv_save = pl_plan_take(p, 2 * c->dims.HS * (c->dims.C + 1));
}

void pl_block_rope_fill(pl_block_ctx *c, const pl_rope_config *rope)
{
    if (c->spec.pos != PL_POS_ROPE || !c->rope_cos)
        return;
    const pl_rope_scaling sc = {rope->factor, rope->low_freq_factor, rope->high_freq_factor,
                                rope->original_max_positions};
    pl_rope_table(c->rope_cos, c->rope_sin, c->rope_rows, c->rope_rot, rope->base,
                  rope->scaling ? &sc : NULL);
}

pl_status pl_block_kv_comm(pl_comm *kv, pl_comm *tp, const pl_block_dims *d)
{
    memset(kv, 0, sizeof *kv);
    if (!tp || d->G % tp->size == 0)
        return pl_comm_init(kv, MPI_COMM_NULL, "kv", 0);
    const int share = tp->size / (int)d->G; /* ranks per group: tp ranks [g share, (g+1) share) */
    MPI_Comm c;
    int rc = MPI_Comm_split(tp->mpi, tp->rank / share, tp->rank, &c);
    if (rc != MPI_SUCCESS)
        return pl_errorf(PL_ERR_IO, "MPI_Comm_split for the key/value group of TP rank %d failed",
                         tp->rank);
    return pl_comm_init(kv, c, "kv", 1);
}

/* Shared key/value rows (kv_shared): this rank's weight gradient of its
 * group's k and v rows covers only its own query heads' use of them. Around
 * the QKV backward: the rows' gradients so far go aside and the rows are
 * zeroed (begin); the backward then leaves this micro-batch's part there,
 * which is summed over the ranks sharing the group and added to what was set
 * aside (end). Every sharer ends with the same gradient. */
static void kv_grad_begin(pl_block_ctx *c, const pl_block_weights *g)
{
    const int64_t HS = c->dims.HS, C = c->dims.C, q = c->NHl * HS;
    memcpy(c->kv_save, g->qkv_w + q * C, (size_t)(2 * HS * C) * sizeof(float));
    memset(g->qkv_w + q * C, 0, (size_t)(2 * HS * C) * sizeof(float));
    if (g->qkv_b) {
        memcpy(c->kv_save + 2 * HS * C, g->qkv_b + q, (size_t)(2 * HS) * sizeof(float));
        memset(g->qkv_b + q, 0, (size_t)(2 * HS) * sizeof(float));
    }
}

static pl_status kv_grad_end(pl_block_ctx *c, const pl_block_weights *g)
{
    const int64_t HS = c->dims.HS, C = c->dims.C, q = c->NHl * HS;
    pl_status st = pl_comm_allreduce_f32(c->kv, g->qkv_w + q * C, 2 * HS * C, PL_COMM_SUM);
    if (!st && g->qkv_b)
        st = pl_comm_allreduce_f32(c->kv, g->qkv_b + q, 2 * HS, PL_COMM_SUM);
    if (st)
        return st;
    pl_cpu_add(g->qkv_w + q * C, g->qkv_w + q * C, c->kv_save, 2 * HS * C);
    if (g->qkv_b)
        pl_cpu_add(g->qkv_b + q, g->qkv_b + q, c->kv_save + 2 * HS * C, 2 * HS);
    return PL_OK;
}

pl_status pl_block_prepare(pl_block_ctx *c)
{
    const int64_t N = c->N, C = c->dims.C;
    pl_status st = pl_nn_linear_prepare(c->gemm, N, C, c->QKVl);
    if (!st)
        st = pl_nn_linear_prepare(c->gemm, N, c->Al, C);
    if (!st)
        st = pl_nn_linear_prepare(c->gemm, N, C, c->F1l);
    if (!st)
        st = pl_nn_linear_prepare(c->gemm, N, c->Fl, C);
    if (!st && c->spec.cross_attention) /* xq; xproj is proj's shape */
        st = pl_nn_linear_prepare(c->gemm, N, C, c->Al);
    if (!st && c->spec.cross_attention)
        st = pl_nn_linear_prepare(c->gemm, c->Nk, C, 2 * c->Al);
    return st;
}

/* Adds the seconds since t0 to *slot. */
static void prof_add(double *slot, double t0) { *slot += pl_time_now() - t0; }

static void attention_fwd(pl_block_ctx *c, float *out, float *lse, const float *qkv, int64_t layer)
{
    const pl_attn_shape s = attn_shape(c, layer);
    double t0 = pl_time_now();
    pl_cpu_attention_fwd(out, lse, qkv, &s, c->attn_ws);
    prof_add(&c->prof->attention, t0);
}

static void attention_bwd(pl_block_ctx *c, float *dqkv, const float *dout, const float *qkv,
                          const float *out, const float *lse, int64_t layer)
{
    const pl_attn_shape s = attn_shape(c, layer);
    double t0 = pl_time_now();
    pl_cpu_attention_bwd(dqkv, dout, qkv, out, lse, &s, c->attn_ws);
    prof_add(&c->prof->attention, t0);
}

static pl_status column_fwd(pl_block_ctx *c, float *y, const float *x, const float *w,
                            const float *b, int64_t IC, int64_t OCl)
{
    double t0 = pl_time_now();
    pl_status st = pl_tp_column_linear_fwd(c->tp, c->gemm, y, x, w, b, c->N, IC, OCl);
    prof_add(&c->prof->linear, t0);
    return st;
}

/* y: this rank's rows (Nl, OC); under sp the partial sums go through norm_out. */
static pl_status row_fwd(pl_block_ctx *c, float *y, const float *x, const float *w,
                         const float *b, int64_t ICl, int64_t OC)
{
    double t0 = pl_time_now();
    pl_status st = pl_tp_row_linear_fwd(c->tp, c->sp, c->gemm, y, c->norm_out, x, w, b, c->N, ICl,
                                        OC);
    prof_add(&c->prof->linear, t0);
    return st;
}

static pl_status column_bwd(pl_block_ctx *c, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, int64_t IC, int64_t OCl)
{
    double t0 = pl_time_now();
    pl_status st;
    if (!dx) /* a split backward's weight half: no input gradient, nothing to reduce */
        st = pl_nn_linear_bwd(c->gemm, NULL, dw, db, dy, x, w, c->N, IC, OCl);
    else if (!dw) /* its input half */
        st = pl_tp_column_linear_bwd(c->tp, c->sp, c->gemm, dx, NULL, NULL, dy, x, w, c->N, IC,
                                     OCl);
    else
        st = pl_tp_column_linear_bwd_overlap(c->tp, c->sp, c->tpq, &c->tp_op,
                                             &c->prof->tp_overlap, c->gemm, dx, dw, db, dy, x, w,
                                             c->N, IC, OCl);
    prof_add(&c->prof->linear, t0);
    return st;
}

static pl_status row_bwd(pl_block_ctx *c, float *dx, float *dw, float *db, const float *dy,
                         const float *x, const float *w, int64_t ICl, int64_t OC)
{
    double t0 = pl_time_now();
    pl_status st = pl_tp_row_linear_bwd(c->tp, c->gemm, dx, dw, db, dy, x, w, c->N, ICl, OC);
    prof_add(&c->prof->linear, t0);
    return st;
}

/* act(fc1) into c->act, from the saved fc1 (fp32 or bf16). */
static void act_fwd(pl_block_ctx *c, const pl_block_acts *a)
{
    const int64_t n = c->N * c->Fl;
    if (c->spec.act == PL_ACT_RELU && c->act_bf16)
        pl_cpu_relu_fwd_bf16(c->act, a->fc1_bf16, n);
    else if (c->spec.act == PL_ACT_RELU)
        pl_cpu_relu_fwd(c->act, a->fc1, n);
    else if (c->spec.act == PL_ACT_GEGLU && c->act_bf16)
        pl_cpu_geglu_fwd_bf16(c->act, a->fc1_bf16, c->N, c->Fl);
    else if (c->spec.act == PL_ACT_GEGLU)
        pl_cpu_geglu_fwd(c->act, a->fc1, c->N, c->Fl);
    else if (c->spec.act == PL_ACT_SWIGLU && c->act_bf16)
        pl_cpu_swiglu_fwd_bf16(c->act, a->fc1_bf16, c->N, c->Fl);
    else if (c->spec.act == PL_ACT_SWIGLU)
        pl_cpu_swiglu_fwd(c->act, a->fc1, c->N, c->Fl);
    else if (c->spec.act == PL_ACT_GELU_ERF && c->act_bf16)
        pl_cpu_gelu_erf_fwd_bf16(c->act, a->fc1_bf16, n);
    else if (c->spec.act == PL_ACT_GELU_ERF)
        pl_cpu_gelu_erf_fwd(c->act, a->fc1, n);
    else if (c->act_bf16)
        pl_cpu_gelu_fwd_bf16(c->act, a->fc1_bf16, n);
    else
        pl_cpu_gelu_fwd(c->act, a->fc1, n);
}

/* dfc1 (N, F1) += act'(fc1) * dact. */
static void act_bwd(pl_block_ctx *c, const pl_block_acts *a)
{
    const int64_t n = c->N * c->Fl;
    if (c->spec.act == PL_ACT_RELU && c->act_bf16)
        pl_cpu_relu_bwd_bf16(c->dfc1, a->fc1_bf16, c->dact, n);
    else if (c->spec.act == PL_ACT_RELU)
        pl_cpu_relu_bwd(c->dfc1, a->fc1, c->dact, n);
    else if (c->spec.act == PL_ACT_GEGLU && c->act_bf16)
        pl_cpu_geglu_bwd_bf16(c->dfc1, a->fc1_bf16, c->dact, c->N, c->Fl);
    else if (c->spec.act == PL_ACT_GEGLU)
        pl_cpu_geglu_bwd(c->dfc1, a->fc1, c->dact, c->N, c->Fl);
    else if (c->spec.act == PL_ACT_SWIGLU && c->act_bf16)
        pl_cpu_swiglu_bwd_bf16(c->dfc1, a->fc1_bf16, c->dact, c->N, c->Fl);
    else if (c->spec.act == PL_ACT_SWIGLU)
        pl_cpu_swiglu_bwd(c->dfc1, a->fc1, c->dact, c->N, c->Fl);
    else if (c->spec.act == PL_ACT_GELU_ERF && c->act_bf16)
        pl_cpu_gelu_erf_bwd_bf16(c->dfc1, a->fc1_bf16, c->dact, n);
    else if (c->spec.act == PL_ACT_GELU_ERF)
        pl_cpu_gelu_erf_bwd(c->dfc1, a->fc1, c->dact, n);
    else if (c->act_bf16)
        pl_cpu_gelu_bwd_bf16(c->dfc1, a->fc1_bf16, c->dact, n);
    else
        pl_cpu_gelu_bwd(c->dfc1, a->fc1, c->dact, n);
}

void pl_block_hidden_dropout(const pl_block_ctx *c, float *out, const float *inp, int64_t layer,
                             int site)
{
    const pl_dropout_key *k = &c->drop;
    pl_cpu_dropout(out, inp, c->n0, c->Nl, c->T, c->dims.C, c->dims.C, 0, k->sample, k->hidden,
                   k->seed, pl_block_dropout_stream(k->iteration, layer, site));
}

pl_status pl_block_norm_fwd(pl_block_ctx *c, float *out, float *mean, float *rstd, const float *x,
                            const float *w, const float *b)
{
    const int64_t C = c->dims.C;
    pl_nn_norm_fwd(c->spec.norm, out + c->n0 * C, mean, rstd, x, w, b, c->Nl, C, c->eps);
    return c->sp ? pl_tp_gather_rows(c->tp, out, c->N, C) : PL_OK;
}

pl_status pl_block_norm_bwd(pl_block_ctx *c, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, const float *mean, const float *rstd)
{
    const int64_t C = c->dims.C;
    if (!dw) { /* a split backward's input half: the input gradient only (the kernel's
                * weight gradients go to scratch) */
        pl_nn_norm_bwd(c->spec.norm, dx, c->dnorm_w, c->dnorm_w + C, dy, x, w, mean, rstd, c->Nl,
                       C);
        return PL_OK;
    }
    if (!c->sp) {
        pl_nn_norm_bwd(c->spec.norm, dx, dw, db, dy, x, w, mean, rstd, c->Nl, C);
        return PL_OK;
    }
    /* the rank's rows give part of the weight gradients: sum them first */
    float *sw = c->dnorm_w, *sb = db ? c->dnorm_w + C : NULL;
    const int64_t n = db ? 2 * C : C;
    memset(sw, 0, (size_t)n * sizeof(float));
    pl_nn_norm_bwd(c->spec.norm, dx, sw, sb, dy, x, w, mean, rstd, c->Nl, C);
    pl_status st = pl_comm_allreduce_f32(c->tp, sw, n, PL_COMM_SUM);
    if (st)
        return st;
    pl_cpu_add(dw, dw, sw, C);
    if (db)
        pl_cpu_add(db, db, sb, C);
    return PL_OK;
}

/* The gradient of a branch's output, whole (N, C) for the row-parallel GEMM's
 * backward: drop(dres), gathered from every rank's rows under sp. Returns
 * dres itself when neither applies, else c->dnorm (free until the branch's
 * column-parallel backward). */
static pl_status branch_grad(pl_block_ctx *c, const float *dres, int64_t layer, int site,
                             const float **dy)
{
    const int64_t C = c->dims.C;
    *dy = dres;
    if (!c->sp && c->drop.hidden == 0)
        return PL_OK;
    float *mine = c->dnorm + c->n0 * C;
    if (c->drop.hidden > 0)
        pl_block_hidden_dropout(c, mine, dres, layer, site);
    else
        memcpy(mine, dres, (size_t)(c->Nl * C) * sizeof(float));
    *dy = c->dnorm;
    return c->sp ? pl_tp_gather_rows(c->tp, c->dnorm, c->N, C) : PL_OK;
}

/* Decoding position pos: the relative position bias of keys 0..pos (NULL without). */
static const float *dec_bias(const pl_block_ctx *c, int64_t pos)
{
    return c->rel_bias ? c->rel_bias + c->rel_rows - 1 - pos : NULL;
}

/* Generation's attention step of the context's N rows (each a token of its own
 * sequence): where row r's new key and value go, and the attention over its
 * cached positions 0..pos[r]. */
typedef struct decode_step {
    float *const *kc, *const *vc; /* [N] (P, G/tp, HS) */
    const int64_t *pos;           /* [N] */
    float *scores;                /* NH/tp * (pos + 1) floats */
    const float *const *xkv;      /* cross-attention: [N] (Nk, 2 A/tp) the encoder output's
                                   * keys and values of row r's source */
    const int32_t *enc_len;       /* cross-attention: [N] its tokens (the rest padding) */
} decode_step;

/* The core attention of qkv (N, QKV) into out (N, A): the fused kernel over
 * the micro-batch, or (dec) one token against the KV cache. */
static void attend(pl_block_ctx *c, float *out, float *lse, const float *qkv, int64_t layer,
                   const decode_step *dec)
{
    if (!dec) {
        attention_fwd(c, out, lse, qkv, layer);
        return;
    }
    const int64_t HS = c->dims.HS, QG = c->NHl / c->Gl, G = c->Gl;
    for (int64_t r = 0; r < c->N; r++) {
        const float *q = qkv + r * c->QKVl;
        float *kc = dec->kc[r], *vc = dec->vc[r];
        const int64_t pos = dec->pos[r];
        for (int64_t g = 0; g < G; g++) {
            memcpy(kc + (pos * G + g) * HS, q + (g * (QG + 2) + QG) * HS,
                   (size_t)HS * sizeof(float));
            memcpy(vc + (pos * G + g) * HS, q + (g * (QG + 2) + QG + 1) * HS,
                   (size_t)HS * sizeof(float));
        }
        double t0 = pl_time_now();
        pl_cpu_attention_decode(out + r * c->Al, q, kc, vc, pos + 1, c->NHl, G, HS, attn_scale(c),
                                dec_bias(c, pos), 2 * c->rel_rows - 1, dec->scores);
        prof_add(&c->prof->attention, t0);
    }
}

/* A norm of the block's (norm1, normx, norm2): its parameters and saved statistics. */
typedef struct norm_site {
    const float *w, *b;
    float *mean, *rstd;
} norm_site;

/* The input of a branch, whole (N, C) for its column-parallel GEMM, into *in:
 * pre-norm, the norm of this rank's rows h (gathered under sp); post-norm, h
 * itself (copied to its rows of norm_out and gathered under sp). */
static pl_status branch_input(pl_block_ctx *c, const float **in, const float *h, norm_site n)
{
    const int64_t C = c->dims.C;
    *in = c->norm_out;
    if (!c->spec.post_norm)
        return pl_block_norm_fwd(c, c->norm_out, n.mean, n.rstd, h, n.w, n.b);
    if (!c->sp) {
        *in = h;
        return PL_OK;
    }
    memcpy(c->norm_out + c->n0 * C, h, (size_t)(c->Nl * C) * sizeof(float));
    return pl_tp_gather_rows(c->tp, c->norm_out, c->N, C);
}

/* The residual connection around a branch whose output rows (Nl, C) are in
 * out: pre-norm out = h + drop(out) (res_post_norm: norm(h) + drop(out));
 * post-norm pre = h + drop(out), out = norm(pre). */
static void branch_output(pl_block_ctx *c, float *out, float *pre, const float *h, norm_site n,
                          int64_t layer, int site)
{
    const int64_t Nl = c->Nl, C = c->dims.C;
    if (c->drop.hidden > 0)
        pl_block_hidden_dropout(c, out, out, layer, site);
    if (c->spec.res_post_norm) { /* the norm's output again, into the free norm_out: the
                                  * branch's row-parallel GEMM may have used it (sp) */
        float *hn = c->norm_out + c->n0 * C;
        pl_nn_norm_fwd(c->spec.norm, hn, n.mean, n.rstd, h, n.w, n.b, Nl, C, c->eps);
        pl_cpu_add(out, out, hn, Nl * C);
        return;
    }
    if (!c->spec.post_norm) {
        pl_cpu_add(out, out, h, Nl * C);
        return;
    }
    pl_cpu_add(pre, out, h, Nl * C);
    pl_nn_norm_fwd(c->spec.norm, out, n.mean, n.rstd, pre, n.w, n.b, Nl, C, c->eps);
}

/* Post-norm: dres = d out on entry, d pre (the branch's output gradient and
 * the residual's) on exit, through the norm (dnorm is scratch). Pre-norm: nothing. */
static pl_status post_norm_bwd(pl_block_ctx *c, float *dres, float *dw, float *db, const float *pre,
                               norm_site n, float *keep)
{
    if (!c->spec.post_norm)
        return PL_OK;
    const size_t bytes = (size_t)(c->Nl * c->dims.C) * sizeof(float);
    if (!dw) /* the input half: the norm's output gradient, for its weights later */
        memcpy(keep, dres, bytes);
    memset(c->dnorm, 0, bytes);
    pl_status st = pl_block_norm_bwd(c, c->dnorm, dw, db, dres, pre, n.w, n.mean, n.rstd);
    if (!st)
        memcpy(dres, c->dnorm, bytes);
    return st;
}

/* d h from the branch's input gradient, this rank's rows at dnorm[0, Nl C):
 * pre-norm through the norm, post-norm directly; added into dres.
 * res_post_norm: the residual reads the norm's output too, so the norm's output
 * gradient is dnorm + dres, and d h is all it gives (dres replaced). */
static pl_status branch_input_bwd(pl_block_ctx *c, float *dres, float *dw, float *db,
                                  const float *h, norm_site n, float *keep)
{
    const int64_t NlC = c->Nl * c->dims.C;
    if (c->spec.post_norm) {
        pl_cpu_add(dres, dres, c->dnorm, NlC);
        return PL_OK;
    }
    if (c->spec.res_post_norm) {
        pl_cpu_add(c->dnorm, c->dnorm, dres, NlC);
        memset(dres, 0, (size_t)NlC * sizeof(float));
    }
    if (!dw) /* the input half: the norm's output gradient, for its weights later */
        memcpy(keep, c->dnorm, (size_t)NlC * sizeof(float));
    return pl_block_norm_bwd(c, dres, dw, db, c->dnorm, h, n.w, n.mean, n.rstd);
}

/* The weight half of a norm's backward: its weight (and bias) gradients from the
 * output gradient the input half kept, its input x (the residual, or post-norm
 * the sum before it); the input gradient goes to scratch (dnorm). */
static pl_status norm_weight_bwd(pl_block_ctx *c, float *dw, float *db, const float *dy,
                                 const float *x, norm_site n)
{
    memset(c->dnorm, 0, (size_t)(c->Nl * c->dims.C) * sizeof(float));
    return pl_block_norm_bwd(c, c->dnorm, dw, db, dy, x, n.w, n.mean, n.rstd);
}

/* Cross-attention's forward: resx from res1 and the encoder output (decoding:
 * its keys and values, computed once, from xkv). */
static pl_status cross_fwd(pl_block_ctx *c, const pl_block_weights *w, const pl_block_acts *a,
                           int64_t layer, const decode_step *dec)
{
    pl_status st = PL_OK;
    const int64_t C = c->dims.C;
    const norm_site nx = {w->normx_w, w->normx_b, a->normx_mean, a->normx_rstd};
    const float *in;
    if (!c->enc)
        return pl_errorf(PL_ERR_INTERNAL, "cross-attention without the encoder output");
    PL_TRY(branch_input(c, &in, a->res1, nx));
    PL_TRY(column_fwd(c, a->xq, in, w->xq_w, w->xq_b, C, c->Al));
    double t0 = pl_time_now();
    if (!dec) {
        PL_TRY(pl_tp_column_linear_fwd(c->tp, c->gemm, a->xkv, c->enc, w->xkv_w, w->xkv_b, c->Nk,
                                       C, 2 * c->Al));
        prof_add(&c->prof->linear, t0);
        const pl_attn_shape s = cross_shape(c, layer);
        t0 = pl_time_now();
        pl_cpu_attention_cross_fwd(a->xattn, a->xlse, a->xq, a->xkv, &s, c->attn_ws);
        prof_add(&c->prof->attention, t0);
    }
    for (int64_t r = 0; dec && r < c->N; r++) { /* each row against its source's cache */
        pl_attn_shape s = cross_shape(c, layer);
        s.B = 1, s.kv_len = dec->enc_len + r;
        t0 = pl_time_now();
        pl_cpu_attention_cross_fwd(a->xattn + r * c->Al, a->xlse + r * c->NHl, a->xq + r * c->Al,
                                   dec->xkv[r], &s, c->attn_ws);
        prof_add(&c->prof->attention, t0);
    }
    PL_TRY(row_fwd(c, a->resx, a->xattn, w->xproj_w, w->xproj_b, c->Al, C));
    branch_output(c, a->resx, a->prex, a->res1, nx, layer, 5);
fail:
    return st;
}

/* The input half of a split backward (lg's linear fields NULL: it adds no
 * linear gradient) keeps a linear layer's output gradient dy (n floats) for
 * the weight half; a whole backward keeps nothing. */
static void stash(const pl_block_weights *lg, float *keep, const float *dy, int64_t n)
{
    if (!lg->fc2_w)
        memcpy(keep, dy, (size_t)n * sizeof(float));
}

/* Its backward: dres = d resx on entry, d res1 on exit; the encoder output's
 * gradient (this rank's partial sum) added into c->denc. g: the norms'
 * gradients; lg: the linear layers' (NULL fields in a split backward's input
 * half, which stashes their output gradients in a instead). selective: the
 * attention output and lse rebuilt first, by forward's kernel on its inputs. */
static pl_status cross_bwd(pl_block_ctx *c, const pl_block_weights *w, const pl_block_weights *g,
                           const pl_block_weights *lg, const pl_block_acts *a, float *dres,
                           int selective, int64_t layer)
{
    pl_status st = PL_OK;
    const int64_t N = c->N, C = c->dims.C;
    const norm_site nx = {w->normx_w, w->normx_b, a->normx_mean, a->normx_rstd};
    if (!c->enc || !c->denc)
        return pl_errorf(PL_ERR_INTERNAL, "cross-attention without the encoder output");
    PL_TRY(post_norm_bwd(c, dres, g->normx_w, g->normx_b, a->prex, nx, a->w_dnx));
    const float *dy, *in;
    PL_TRY(branch_grad(c, dres, layer, 5, &dy));
    stash(lg, a->w_dyx, dy, N * C);
    const pl_attn_shape s = cross_shape(c, layer);
    double t0 = pl_time_now();
    if (selective)
        pl_cpu_attention_cross_fwd(a->xattn, a->xlse, a->xq, a->xkv, &s, c->attn_ws);
    prof_add(&c->prof->attention, t0);
    memset(c->dattn, 0, (size_t)(N * c->Al) * sizeof(float));
    PL_TRY(row_bwd(c, c->dattn, lg->xproj_w, lg->xproj_b, dy, a->xattn, w->xproj_w, c->Al, C));
    float *dxq = c->dqkv; /* (N, A) of its (N, QKV) */
    memset(dxq, 0, (size_t)(N * c->Al) * sizeof(float));
    memset(c->dxkv, 0, (size_t)(c->Nk * 2 * c->Al) * sizeof(float));
    t0 = pl_time_now();
    pl_cpu_attention_cross_bwd(dxq, c->dxkv, c->dattn, a->xq, a->xkv, a->xattn, a->xlse, &s,
                               c->attn_ws);
    prof_add(&c->prof->attention, t0);
    stash(lg, a->w_dxq, dxq, N * c->Al);
    stash(lg, a->w_dxkv, c->dxkv, c->Nk * 2 * c->Al);
    t0 = pl_time_now();
    PL_TRY(pl_nn_linear_bwd(c->gemm, c->denc, lg->xkv_w, lg->xkv_b, c->dxkv, c->enc, w->xkv_w,
                            c->Nk, C, 2 * c->Al));
    prof_add(&c->prof->linear, t0);
    PL_TRY(branch_input(c, &in, a->res1, nx));
    memset(c->dnorm, 0, (size_t)(N * C) * sizeof(float));
    PL_TRY(column_bwd(c, c->dnorm, lg->xq_w, lg->xq_b, dxq, in, w->xq_w, C, c->Al));
    PL_TRY(branch_input_bwd(c, dres, g->normx_w, g->normx_b, a->res1, nx, a->w_dnx));
fail:
    return st;
}

pl_status pl_block_cross_kv(pl_block_ctx *c, const pl_block_weights *w, float *xkv)
{
    if (!c->spec.cross_attention || !c->enc)
        return pl_errorf(PL_ERR_INTERNAL, "pl_block_cross_kv: no cross-attention or no encoder "
                         "output");
    return pl_tp_column_linear_fwd(c->tp, c->gemm, xkv, c->enc, w->xkv_w, w->xkv_b, c->Nk,
                                   c->dims.C, 2 * c->Al);
}

pl_status pl_block_enc_grad(pl_block_ctx *c, float *out, float *denc)
{
    const int64_t C = c->dims.C;
    if (c->sp)
        return pl_tp_reduce_rows(c->tp, 1, out, denc, c->Nk, C);
    if (out != denc)
        memcpy(out, denc, (size_t)(c->Nk * C) * sizeof(float));
    return pl_tp_reduce_rows(c->tp, 0, out, out, c->Nk, C);
}

static pl_status block_fwd(pl_block_ctx *c, const pl_block_weights *w, const pl_block_acts *a,
                           const float *x, int64_t layer, const decode_step *dec)
{
    pl_status st = PL_OK;
    const int64_t N = c->N, C = c->dims.C;
    /* --bf16: qkv, attn and fc1 come out in fp32 scratch and are saved in bf16 */
    float *qkv = a->qkv ? a->qkv : c->dqkv, *attn = a->attn ? a->attn : c->dattn;
    float *fc1 = a->fc1 ? a->fc1 : c->dact;
    const norm_site n1 = {w->norm1_w, w->norm1_b, a->norm1_mean, a->norm1_rstd};
    const norm_site n2 = {w->norm2_w, w->norm2_b, a->norm2_mean, a->norm2_rstd};
    const float *in, *h = c->spec.cross_attention ? a->resx : a->res1; /* the MLP's input */
    if (c->spec.mask == PL_MASK_PADDING && !c->pad_len)
        return pl_errorf(PL_ERR_INTERNAL, "a padding mask without the sample lengths");
    PL_TRY(branch_input(c, &in, x, n1));
    PL_TRY(column_fwd(c, qkv, in, w->qkv_w, w->qkv_b, C, c->QKVl));
    if (c->spec.pos == PL_POS_ROPE && !dec)
        pl_cpu_rope_fwd(qkv, c->rope_cos, c->rope_sin, c->B, c->T, c->Gl, c->NHl / c->Gl,
                        c->dims.HS, c->rope_rot, 0);
    for (int64_t r = 0; c->spec.pos == PL_POS_ROPE && dec && r < N; r++) /* row r at pos[r] */
        pl_cpu_rope_fwd(qkv + r * c->QKVl, c->rope_cos, c->rope_sin, 1, 1, c->Gl, c->NHl / c->Gl,
                        c->dims.HS, c->rope_rot, dec->pos[r]);
    if (c->act_bf16)
        pl_cpu_round_bf16(a->qkv_bf16, qkv, N * c->QKVl);
    attend(c, attn, a->lse, qkv, layer, dec);
    if (c->act_bf16)
        pl_cpu_round_bf16(a->attn_bf16, attn, N * c->Al);
    PL_TRY(row_fwd(c, a->res1, attn, w->proj_w, w->proj_b, c->Al, C));
    branch_output(c, a->res1, a->pre1, x, n1, layer, 1);
    if (c->spec.cross_attention)
        PL_TRY(cross_fwd(c, w, a, layer, dec));
    PL_TRY(branch_input(c, &in, h, n2));
    PL_TRY(column_fwd(c, fc1, in, w->fc1_w, w->fc1_b, C, c->F1l));
    if (c->act_bf16)
        pl_cpu_f32_to_bf16(a->fc1_bf16, fc1, N, c->F1l, c->F1l);
    act_fwd(c, a);
    PL_TRY(row_fwd(c, a->res2, c->act, w->fc2_w, w->fc2_b, c->Fl, C));
    branch_output(c, a->res2, a->pre2, h, n2, layer, 2);
fail:
    return st;
}

pl_status pl_block_fwd(pl_block_ctx *c, const pl_block_weights *w, const pl_block_acts *a,
                       const float *x, int64_t layer)
{
    return block_fwd(c, w, a, x, layer, NULL);
}

pl_status pl_block_decode(pl_block_ctx *c, const pl_block_weights *w, const pl_block_acts *a,
                          const float *x, float *kc, float *vc, const float *xkv, int64_t pos,
                          float *scores, int64_t layer)
{
    if (c->N != 1)
        return pl_errorf(PL_ERR_INTERNAL, "pl_block_decode needs a one-row context");
    const int32_t *enc_len = c->enc_len;
    return pl_block_decode_rows(c, w, a, x, &kc, &vc, xkv ? &xkv : NULL, enc_len, &pos, scores,
                                layer);
}

pl_status pl_block_decode_rows(pl_block_ctx *c, const pl_block_weights *w, const pl_block_acts *a,
                               const float *x, float *const *kc, float *const *vc,
                               const float *const *xkv, const int32_t *enc_len,
                               const int64_t *pos, float *scores, int64_t layer)
{
    if (c->T != 1 || c->N != c->B || c->act_bf16 || c->sp ||
        c->spec.cross_attention != (xkv != NULL) || (xkv && !enc_len) ||
        c->spec.mask != PL_MASK_CAUSAL)
        return pl_errorf(PL_ERR_INTERNAL, "pl_block_decode needs an fp32 context of one position "
                         "per row of a causal block (with cross-attention: its keys and values "
                         "and source lengths)");
    decode_step dec = {kc, vc, pos, scores, xkv, enc_len};
    return block_fwd(c, w, a, x, layer, &dec);
}

/* The backward, whole (lg = g) or its input half (lg's linear fields NULL). */
static pl_status block_bwd(pl_block_ctx *c, const pl_block_weights *w, const pl_block_weights *g,
                           const pl_block_weights *lg, const pl_block_acts *a, const float *x,
                           float *dres, int selective, int64_t layer)
{
    pl_status st = PL_OK;
    const int64_t N = c->N, C = c->dims.C;
    const norm_site n1 = {w->norm1_w, w->norm1_b, a->norm1_mean, a->norm1_rstd};
    const norm_site n2 = {w->norm2_w, w->norm2_b, a->norm2_mean, a->norm2_rstd};
    const float *in, *h = c->spec.cross_attention ? a->resx : a->res1; /* the MLP's input */
    if (c->kv_shared && !(c->kv && pl_comm_is_member(c->kv)))
        return pl_errorf(PL_ERR_INTERNAL, "pl_block_bwd: shared key/value groups need the "
                         "communicator of pl_block_kv_comm");
    /* MLP branch: res2 = h + drop(fc2(act(fc1(norm2(h))))) (post-norm: the norm
     * after); dres = d res2. The branch's gradient drop(dres), whole, goes
     * through dnorm (free until fc1's backward). */
    PL_TRY(post_norm_bwd(c, dres, g->norm2_w, g->norm2_b, a->pre2, n2, a->w_dn2));
    const float *dy;
    PL_TRY(branch_grad(c, dres, layer, 2, &dy));
    stash(lg, a->w_dy2, dy, N * C);
    act_fwd(c, a);
    memset(c->dact, 0, (size_t)(N * c->Fl) * sizeof(float));
    PL_TRY(row_bwd(c, c->dact, lg->fc2_w, lg->fc2_b, dy, c->act, w->fc2_w, c->Fl, C));
    memset(c->dfc1, 0, (size_t)(N * c->F1l) * sizeof(float)); /* c->act is spent */
    act_bwd(c, a);
    stash(lg, a->w_dfc1, c->dfc1, N * c->F1l);
    PL_TRY(branch_input(c, &in, h, n2));
    memset(c->dnorm, 0, (size_t)(N * C) * sizeof(float));
    PL_TRY(column_bwd(c, c->dnorm, lg->fc1_w, lg->fc1_b, c->dfc1, in, w->fc1_w, C, c->F1l));
    PL_TRY(branch_input_bwd(c, dres, g->norm2_w, g->norm2_b, h, n2, a->w_dn2));
    if (c->spec.cross_attention)
        PL_TRY(cross_bwd(c, w, g, lg, a, dres, selective, layer));
    /* attention branch: res1 = x + proj(attn(qkv(norm1(x)))); dres = d res1.
     * --bf16: qkv widened into dfc1 and dact, attn into norm_out (all dead here) */
    PL_TRY(post_norm_bwd(c, dres, g->norm1_w, g->norm1_b, a->pre1, n1, a->w_dn1));
    const float *qkv = a->qkv, *attn = a->attn;
    if (c->act_bf16) {
        pl_cpu_widen_bf16(c->qkv_f32, a->qkv_bf16, N * c->QKVl);
        qkv = c->qkv_f32;
    }
    if (selective) {
        attention_fwd(c, a->attn, a->lse, qkv, layer);
        if (c->act_bf16)
            pl_cpu_round_bf16(NULL, a->attn, N * c->Al);
    } else if (c->act_bf16) {
        pl_cpu_widen_bf16(c->norm_out, a->attn_bf16, N * c->Al);
        attn = c->norm_out;
    }
    PL_TRY(branch_grad(c, dres, layer, 1, &dy));
    stash(lg, a->w_dy1, dy, N * C);
    memset(c->dattn, 0, (size_t)(N * c->Al) * sizeof(float));
    PL_TRY(row_bwd(c, c->dattn, lg->proj_w, lg->proj_b, dy, attn, w->proj_w, c->Al, C));
    memset(c->dqkv, 0, (size_t)(N * c->QKVl) * sizeof(float));
    attention_bwd(c, c->dqkv, c->dattn, qkv, attn, a->lse, layer);
    if (c->spec.pos == PL_POS_ROPE)
        pl_cpu_rope_bwd(c->dqkv, c->rope_cos, c->rope_sin, c->B, c->T, c->Gl, c->NHl / c->Gl,
                        c->dims.HS, c->rope_rot, 0);
    stash(lg, a->w_dqkv, c->dqkv, N * c->QKVl);
    PL_TRY(branch_input(c, &in, x, n1));
    memset(c->dnorm, 0, (size_t)(N * C) * sizeof(float));
    if (c->kv_shared && lg->qkv_w)
        kv_grad_begin(c, g);
    PL_TRY(column_bwd(c, c->dnorm, lg->qkv_w, lg->qkv_b, c->dqkv, in, w->qkv_w, C, c->QKVl));
    if (c->kv_shared && lg->qkv_w)
        PL_TRY(kv_grad_end(c, g));
    PL_TRY(branch_input_bwd(c, dres, g->norm1_w, g->norm1_b, x, n1, a->w_dn1));
fail:
    return st;
}

pl_status pl_block_bwd(pl_block_ctx *c, const pl_block_weights *w, const pl_block_weights *g,
                       const pl_block_acts *a, const float *x, float *dres, int selective,
                       int64_t layer)
{
    return block_bwd(c, w, g, g, a, x, dres, selective, layer);
}

pl_status pl_block_bwd_input(pl_block_ctx *c, const pl_block_weights *w,
                             const pl_block_weights *g, const pl_block_acts *a, const float *x,
                             float *dres, int64_t layer)
{
    if (!a->w_dy1)
        return pl_errorf(PL_ERR_INTERNAL, "pl_block_bwd_input: the activations were planned "
                         "without the split backward's gradients (split_bwd)");
    const pl_block_weights none = {0}; /* no parameter gradient in this half */
    (void)g;
    return block_bwd(c, w, &none, &none, a, x, dres, 0, layer);
}

/* The weight half: each linear layer's weight (and bias) gradient from its
 * stashed output gradient and its input, rebuilt as the whole backward
 * rebuilds it (the same kernels on the same saved values: the same bits). */
pl_status pl_block_bwd_weight(pl_block_ctx *c, const pl_block_weights *w,
                              const pl_block_weights *g, const pl_block_acts *a, const float *x,
                              int64_t layer)
{
    pl_status st = PL_OK;
    const int64_t N = c->N, C = c->dims.C;
    (void)layer;
    const norm_site n1 = {w->norm1_w, w->norm1_b, a->norm1_mean, a->norm1_rstd};
    const norm_site n2 = {w->norm2_w, w->norm2_b, a->norm2_mean, a->norm2_rstd};
    const norm_site nx = {w->normx_w, w->normx_b, a->normx_mean, a->normx_rstd};
    const float *in, *h = c->spec.cross_attention ? a->resx : a->res1;
    if (!a->w_dy1)
        return pl_errorf(PL_ERR_INTERNAL, "pl_block_bwd_weight without pl_block_bwd_input");
    if (c->kv_shared && !(c->kv && pl_comm_is_member(c->kv)))
        return pl_errorf(PL_ERR_INTERNAL, "pl_block_bwd_weight: shared key/value groups need "
                         "the communicator of pl_block_kv_comm");
    act_fwd(c, a);
    PL_TRY(row_bwd(c, NULL, g->fc2_w, g->fc2_b, a->w_dy2, c->act, w->fc2_w, c->Fl, C));
    PL_TRY(branch_input(c, &in, h, n2));
    PL_TRY(column_bwd(c, NULL, g->fc1_w, g->fc1_b, a->w_dfc1, in, w->fc1_w, C, c->F1l));
    if (c->spec.cross_attention) {
        PL_TRY(row_bwd(c, NULL, g->xproj_w, g->xproj_b, a->w_dyx, a->xattn, w->xproj_w, c->Al,
                       C));
        double t0 = pl_time_now();
        PL_TRY(pl_nn_linear_bwd(c->gemm, NULL, g->xkv_w, g->xkv_b, a->w_dxkv, c->enc, w->xkv_w,
                                c->Nk, C, 2 * c->Al));
        prof_add(&c->prof->linear, t0);
        PL_TRY(branch_input(c, &in, a->res1, nx));
        PL_TRY(column_bwd(c, NULL, g->xq_w, g->xq_b, a->w_dxq, in, w->xq_w, C, c->Al));
    }
    const float *attn = a->attn;
    if (c->act_bf16) {
        pl_cpu_widen_bf16(c->dattn, a->attn_bf16, N * c->Al);
        attn = c->dattn;
    }
    PL_TRY(row_bwd(c, NULL, g->proj_w, g->proj_b, a->w_dy1, attn, w->proj_w, c->Al, C));
    PL_TRY(branch_input(c, &in, x, n1));
    if (c->kv_shared)
        kv_grad_begin(c, g);
    PL_TRY(column_bwd(c, NULL, g->qkv_w, g->qkv_b, a->w_dqkv, in, w->qkv_w, C, c->QKVl));
    if (c->kv_shared)
        PL_TRY(kv_grad_end(c, g));
    /* the norms: each from its kept output gradient and its input */
    const int post = c->spec.post_norm;
    PL_TRY(norm_weight_bwd(c, g->norm2_w, g->norm2_b, a->w_dn2, post ? a->pre2 : h, n2));
    if (c->spec.cross_attention)
        PL_TRY(norm_weight_bwd(c, g->normx_w, g->normx_b, a->w_dnx, post ? a->prex : a->res1,
                               nx));
    PL_TRY(norm_weight_bwd(c, g->norm1_w, g->norm1_b, a->w_dn1, post ? a->pre1 : x, n1));
fail:
    return st;
}
