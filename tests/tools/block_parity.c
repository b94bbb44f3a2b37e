/* block_parity: one transformer layer (nn/block.h) of a given spec, forward and
 * backward on random inputs, written for tests/scripts/block_parity.py to
 * check against PyTorch, and for two runs to be compared with each other.
 *
 * usage: [mpirun -n P] block_parity OUT.safetensors [--post-norm | --res-post-norm]
 *                                   [--mask causal|padding|none]
 *                                   [--cross TK] [--rms] [--dropout P] [--sp] [--groups G]
 *                                   [--split] [--bf16]
 *
 * The layer: hidden 32, 4 heads, MLP 64, GELU, LayerNorm (RMSNorm with --rms),
 * pre-norm (--post-norm; --res-post-norm: Megatron's
 * --apply-residual-connection-post-layernorm),
 * biases, B = 2 samples of T = 24 positions; --cross TK: a decoder layer with
 * cross-attention to an encoder output of TK positions per sample. Padding:
 * sample 1 is 7 positions shorter (--mask padding), and with --cross its
 * encoder input 5 shorter (the cross-attention keys' mask). Under mpirun the
 * layer is split over P tensor-parallel ranks (--sp: sequence-parallel);
 * rank 0 writes the same file as one process, gathered: every parameter and
 * its gradient by global element index, the layer's output, the input's and
 * the encoder output's gradients. The parameters are the registry's
 * initialisation (model/config.c) plus a deterministic perturbation of every
 * element, so norm gains and biases are not 1 and 0; inputs, the upstream
 * gradient and the encoder output are keyed by global index too, so every
 * layout computes the same function of the same numbers. With --dropout P
 * (hidden and attention) the masks are written as well, computed here from
 * kernels.h's formulas (layer 0, iteration 3, samples 5 and 9). --groups G:
 * grouped-query self-attention (G key/value groups; fewer than P: shared).
 * --split: the backward in its two halves (pl_block_bwd_input, then
 * pl_block_bwd_weight), which must write the same bytes as the whole one.
 * --bf16: the GEMMs in bf16 and qkv, attention output and fc1 saved in bf16
 * (for the split's bit-identity; the PyTorch reference is fp32's). */
#include "base/alloc.h"
#include "base/rng.h"
#include "ckpt/safetensors.h"
#include "model/config.h"
#include "nn/block.h"
#include "parallel/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, T = 24, C = 32, NH = 4, F = 64, SEED = 4321, ITER = 3 };
static const int64_t samples[B] = {5, 9};

static int rank0 = 1;

static int fail(pl_status st)
{
    fprintf(stderr, "block_parity: %s\n", pl_error_msg());
    return st ? 1 : 0;
}

/* uniform in [-1, 1) keyed by (stream, index) */
static float unit(uint64_t stream, int64_t i)
{
    return (float)((double)pl_rng_u32(SEED, stream, (uint64_t)i) / 2147483648.0 - 1.0);
}

static float *filled(int64_t n, const char *what)
{
    float *p = pl_calloc((size_t)n, sizeof(float));
    for (int64_t i = 0; p && i < n; i++)
        p[i] = unit(pl_hash_str(what), i);
    return p;
}

/* global (ndim, shape) tensor of p from every rank's local values: summed on
 * rank 0 by global index (a replicated tensor from TP rank 0 only, shared key
 * and value rows from their first sharer) */
static pl_status gather_param(pl_comm *tp, const pl_param *p, const float *local, float *global)
{
    const int64_t n = p->shape[0] * (p->ndim == 2 ? p->shape[1] : 1);
    memset(global, 0, (size_t)n * sizeof(float));
    if (p->split != PL_TP_REPLICATED || tp->rank == 0) {
        const int64_t rows = p->local_shape[0], cols = p->ndim == 2 ? p->local_shape[1] : 1;
        for (int64_t r = 0; r < rows; r++) {
            /* shared key/value rows: from the group's first sharer only */
            if (p->split == PL_TP_QKV_SHARED_KV && r >= p->q_rows && p->kv_replica)
                continue;
            for (int64_t k = 0; k < cols; k++)
                global[pl_param_global_index(p, r, k)] = local[r * cols + k];
        }
    }
    if (tp->size == 1)
        return PL_OK;
    int rc = MPI_Reduce(tp->rank ? global : MPI_IN_PLACE, global, (int)n, MPI_FLOAT, MPI_SUM, 0,
                        tp->mpi);
    return rc == MPI_SUCCESS ? PL_OK : pl_errorf(PL_ERR_IO, "MPI_Reduce of %s failed", p->name);
}

/* rows (Nl, C) of every rank into full (N, C) on every rank */
static pl_status gather_rows(pl_comm *tp, int sp, float *full, const float *mine, int64_t N)
{
    const int64_t Nl = pl_tp_rows(tp, sp, N), n0 = pl_tp_row0(tp, sp, N);
    memcpy(full + n0 * C, mine, (size_t)(Nl * C) * sizeof(float));
    return sp && tp->size > 1 ? pl_tp_gather_rows(tp, full, N, C) : PL_OK;
}

typedef struct opts {
    int post, res_post, cross_tk, rms, sp, groups, split, bf16;
    pl_mask_kind mask;
    float dropout;
} opts;

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->mask = PL_MASK_CAUSAL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--post-norm") == 0)
            o->post = 1;
        else if (strcmp(argv[i], "--res-post-norm") == 0)
            o->res_post = 1;
        else if (strcmp(argv[i], "--rms") == 0)
            o->rms = 1;
        else if (strcmp(argv[i], "--sp") == 0)
            o->sp = 1;
        else if (strcmp(argv[i], "--split") == 0)
            o->split = 1;
        else if (strcmp(argv[i], "--bf16") == 0)
            o->bf16 = 1;
        else if (strcmp(argv[i], "--groups") == 0 && i + 1 < argc)
            o->groups = atoi(argv[++i]);
        else if (strcmp(argv[i], "--cross") == 0 && i + 1 < argc)
            o->cross_tk = atoi(argv[++i]);
        else if (strcmp(argv[i], "--dropout") == 0 && i + 1 < argc)
            o->dropout = (float)atof(argv[++i]);
        else if (strcmp(argv[i], "--mask") == 0 && i + 1 < argc) {
            const char *m = argv[++i];
            o->mask = strcmp(m, "padding") == 0 ? PL_MASK_PADDING
                      : strcmp(m, "none") == 0  ? PL_MASK_NONE
                      : strcmp(m, "causal") == 0 ? PL_MASK_CAUSAL
                                                 : (pl_mask_kind)-1;
            if ((int)o->mask < 0)
                return 0;
        } else
            return 0;
    }
    if (!o->groups)
        o->groups = NH;
    return argc >= 2 && o->cross_tk >= 0 && o->dropout >= 0 && o->dropout < 1 &&
           o->groups >= 1 && NH % o->groups == 0;
}

/* The dropout masks of layer 0 (scale where kept, 0 where dropped): hidden
 * sites 1, 2 and (cross) 5 over (N, C), and the attention probabilities of
 * sites 0 (B, NH, T, T) and (cross) 4 (B, NH, T, Tk). */
static void masks(float *hid, float *att, float *xatt, int64_t Tk, float p)
{
    const int64_t N = B * T;
    const int sites[3] = {1, 2, 5};
    for (int k = 0; k < (Tk ? 3 : 2); k++) {
        float *h = hid + k * N * C;
        for (int64_t i = 0; i < N * C; i++)
            h[i] = 1.0f;
        pl_ref_dropout(h, h, 0, N, T, C, C, 0, samples, p, SEED,
                       pl_block_dropout_stream(ITER, 0, sites[k]));
    }
    const uint32_t thr = pl_dropout_threshold(p);
    const float keep = 1.0f / (1.0f - p);
    for (int site = 0; site < (Tk ? 2 : 1); site++) {
        const int64_t K = site ? Tk : T;
        const uint64_t stream = pl_block_dropout_stream(ITER, 0, site ? 4 : 0);
        float *a = site ? xatt : att;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < NH; h++)
                for (int64_t q = 0; q < T; q++)
                    for (int64_t k = 0; k < K; k++) {
                        uint64_t idx = (uint64_t)(((samples[b] * NH + h) * T + q) * K + k);
                        a[((b * NH + h) * T + q) * K + k] =
                            pl_rng_u32(SEED, stream, idx) >= thr ? keep : 0.0f;
                    }
    }
}

static pl_status run(const opts *o, pl_comm *tp, const char *out)
{
    pl_status st = PL_OK;
    pl_st_writer *wr = NULL; /* before the first PL_TRY: the failure path frees it */
    const int64_t Tk = o->cross_tk, N = B * T, Nk = B * Tk;
    pl_model_config cfg = {.num_layers = 1, .hidden = C, .heads = NH, .query_groups = o->groups,
                           .ffn_hidden = F, .seq_length = T, .init_std = 0.2, .ln_eps = 1e-5f};
    cfg.block = (pl_block_spec){o->rms ? PL_NORM_RMSNORM : PL_NORM_LAYERNORM, PL_ACT_GELU,
                                PL_POS_LEARNED, o->mask, Tk > 0, 1, 1, o->post,
                                o->res_post};
    const pl_block_dims dims = pl_model_block_dims(&cfg);
    pl_registry reg;
    pl_registry_init(&reg, tp->size, tp->rank, 0);
    pl_block_param_name names[PL_BLOCK_MAX_PARAMS];
    const int np = pl_block_param_names(&cfg.block, names);
    char pnames[PL_BLOCK_MAX_PARAMS][PL_PARAM_NAME_MAX];
    for (int k = 0; k < np; k++) {
        snprintf(pnames[k], PL_PARAM_NAME_MAX, "decoder.layers.0.%s", names[k].suffix);
        pl_param_spec s = pl_model_layer_param(&cfg, names[k].field, pnames[k], 0, 0, tp->size);
        PL_TRY(pl_registry_add(&reg, &s));
    }
    float *params = pl_calloc((size_t)reg.numel, sizeof(float));
    float *grads = pl_calloc((size_t)reg.numel, sizeof(float));
    pl_registry_init_values(&reg, params, SEED);
    pl_block_weights w = {0}, g = {0};
    for (int k = 0; k < np; k++) {
        const pl_param *p = &reg.params[k];
        const int64_t cols = p->ndim == 2 ? p->local_shape[1] : 1;
        for (int64_t r = 0; r < p->local_shape[0]; r++)
            for (int64_t c = 0; c < cols; c++)
                params[p->offset + r * cols + c] +=
                    0.1f * unit(pl_hash_str(p->name), pl_param_global_index(p, r, c));
        *(float **)((char *)&w + names[k].field) = params + p->offset;
        *(float **)((char *)&g + names[k].field) = grads + p->offset;
    }
    pl_gemm *gemm = NULL;
    pl_step_prof prof = {0};
    pl_comm kv = {0};
    PL_TRY(pl_gemm_init(&gemm));
    if (o->bf16)
        pl_gemm_set_precision(gemm, PL_GEMM_BF16);
    pl_block_ctx c;
    PL_TRY(pl_block_ctx_init(&c, &cfg.block, &dims, cfg.ln_eps, B, T, Tk, tp, tp->rank, o->sp,
                             gemm, &prof));
    PL_TRY(pl_block_kv_comm(&kv, tp, &dims));
    c.kv = &kv;
    c.split_bwd = o->split;
    int32_t pad_len[B] = {T, T - 7}, enc_len[B] = {(int32_t)Tk, (int32_t)Tk - 5};
    c.pad_len = pad_len;
    c.enc_len = Tk > 5 ? enc_len : NULL;
    c.drop = (pl_dropout_key){o->dropout, o->dropout, SEED, ITER, samples};
    pl_block_acts a = {0};
    pl_plan probe = {NULL, 0};
    pl_block_take_acts(&c, &probe, &a, 1, 1);
    pl_plan_take(&probe, 2 * N * C);
    pl_block_take_scratch(&c, &probe);
    float *arena = pl_calloc(probe.used + 64, sizeof(float));
    pl_plan plan = {arena, 0};
    memset(&a, 0, sizeof a);
    pl_block_take_acts(&c, &plan, &a, 1, 1);
    c.norm_out = pl_plan_take(&plan, N * C);
    c.dnorm = pl_plan_take(&plan, N * C);
    pl_block_take_scratch(&c, &plan);
    PL_TRY(pl_block_prepare(&c));
    /* inputs by global index; this rank's rows of the residual stream */
    float *x = filled(N * C, "x"), *dy = filled(N * C, "dy"), *enc = filled(Nk * C + 1, "enc");
    float *denc = pl_calloc((size_t)(Nk * C + 1), sizeof(float));
    float *denc_out = pl_calloc((size_t)(Nk * C + 1), sizeof(float));
    float *y = pl_calloc((size_t)(N * C), sizeof(float)), *dx = pl_calloc((size_t)(N * C), sizeof(float));
    float *denc_all = pl_calloc((size_t)(Nk * C + 1), sizeof(float));
    float *dres = pl_calloc((size_t)(c.Nl * C), sizeof(float));
    memcpy(dres, dy + c.n0 * C, (size_t)(c.Nl * C) * sizeof(float));
    c.enc = enc;
    c.denc = denc;
    PL_TRY(pl_block_fwd(&c, &w, &a, x + c.n0 * C, 0));
    PL_TRY(gather_rows(tp, o->sp, y, a.res2, N));
    if (o->split) {
        PL_TRY(pl_block_bwd_input(&c, &w, &g, &a, x + c.n0 * C, dres, 0));
        PL_TRY(pl_block_bwd_weight(&c, &w, &g, &a, x + c.n0 * C, 0));
    } else {
        PL_TRY(pl_block_bwd(&c, &w, &g, &a, x + c.n0 * C, dres, 0, 0));
    }
    PL_TRY(gather_rows(tp, o->sp, dx, dres, N));
    if (Tk) {
        PL_TRY(pl_block_enc_grad(&c, denc_out, denc));
        PL_TRY(gather_rows(tp, o->sp, denc_all, denc_out, Nk));
    }
    /* rank 0 writes */
    if (tp->rank == 0)
        PL_TRY(pl_st_writer_new(&wr));
    static char keys[2 * PL_BLOCK_MAX_PARAMS][PL_ST_NAME_MAX];
    float *globals[2 * PL_BLOCK_MAX_PARAMS] = {0};
    for (int k = 0; k < np; k++) {
        const pl_param *p = &reg.params[k];
        const int64_t n = p->shape[0] * (p->ndim == 2 ? p->shape[1] : 1);
        for (int j = 0; j < 2; j++) {
            float *gl = globals[2 * k + j] = pl_calloc((size_t)n, sizeof(float));
            PL_TRY(gather_param(tp, p, (j ? grads : params) + p->offset, gl));
            snprintf(keys[2 * k + j], PL_ST_NAME_MAX, "%s%s", j ? "grad." : "param.",
                     names[k].suffix);
            if (wr)
                pl_st_writer_add(wr, keys[2 * k + j], "F32", p->ndim, p->shape, gl);
        }
    }
    float *hid = NULL, *att = NULL, *xatt = NULL;
    if (wr) {
        int64_t sx[2] = {N, C}, se[2] = {Nk, C}, sb[1] = {B};
        pl_st_writer_add(wr, "x", "F32", 2, sx, x);
        pl_st_writer_add(wr, "dy", "F32", 2, sx, dy);
        pl_st_writer_add(wr, "y", "F32", 2, sx, y);
        pl_st_writer_add(wr, "dx", "F32", 2, sx, dx);
        pl_st_writer_add(wr, "pad_len", "I32", 1, sb, pad_len);
        if (Tk) {
            pl_st_writer_add(wr, "enc", "F32", 2, se, enc);
            pl_st_writer_add(wr, "denc", "F32", 2, se, denc_all);
            if (c.enc_len)
                pl_st_writer_add(wr, "enc_len", "I32", 1, sb, enc_len);
        }
        if (o->dropout > 0) {
            hid = pl_calloc((size_t)(3 * N * C), sizeof(float));
            att = pl_calloc((size_t)(B * NH * T * T), sizeof(float));
            xatt = pl_calloc((size_t)(B * NH * T * (Tk ? Tk : 1)), sizeof(float));
            masks(hid, att, xatt, Tk, o->dropout);
            int64_t sa[4] = {B, NH, T, T}, sxa[4] = {B, NH, T, Tk};
            pl_st_writer_add(wr, "mask.attention_output", "F32", 2, sx, hid);
            pl_st_writer_add(wr, "mask.mlp_output", "F32", 2, sx, hid + N * C);
            pl_st_writer_add(wr, "mask.attention_probs", "F32", 4, sa, att);
            if (Tk) {
                pl_st_writer_add(wr, "mask.cross_output", "F32", 2, sx, hid + 2 * N * C);
                pl_st_writer_add(wr, "mask.cross_probs", "F32", 4, sxa, xatt);
            }
        }
        char meta[512];
        snprintf(meta, sizeof meta,
                 "{\"post_norm\": %d, \"res_post_norm\": %d, \"norm\": \"%s\", \"mask\": \"%s\", \"cross\": %lld, "
                 "\"heads\": %d, \"groups\": %d, \"eps\": 1e-5, \"dropout\": %g, \"tp\": %d, "
                 "\"sp\": %d}",
                 o->post, o->res_post, o->rms ? "rmsnorm" : "layernorm",
                 o->mask == PL_MASK_CAUSAL ? "causal" : o->mask == PL_MASK_PADDING ? "padding"
                                                                                   : "none",
                 (long long)Tk, NH, o->groups, (double)o->dropout, tp->size, o->sp);
        pl_st_writer_meta(wr, "config", meta);
        PL_TRY(pl_st_writer_finish(wr, out));
        wr = NULL;
        printf("wrote %s (tp %d%s)\n", out, tp->size, o->sp ? ", sp" : "");
    }
fail:
    pl_st_writer_free(wr);
    return st;
}

int main(int argc, char **argv)
{
    opts o;
    if (!parse(argc, argv, &o)) {
        fprintf(stderr, "usage: [mpirun -n P] block_parity OUT.safetensors [--post-norm | "
                        "--res-post-norm] [--mask causal|padding|none] [--cross TK] [--rms] [--dropout P] [--sp]\n");
        return 2;
    }
    pl_dist dist;
    pl_status st = pl_dist_init(&dist, &argc, &argv);
    if (st)
        return fail(st);
    rank0 = dist.rank == 0;
    pl_comm tp;
    st = pl_comm_init(&tp, MPI_COMM_WORLD, "tp", 0);
    if (!st)
        st = run(&o, &tp, argv[1]);
    st = pl_comm_agree(&tp, st);
    if (st && rank0)
        fail(st);
    pl_dist_finalize(&dist);
    return st ? 1 : 0;
}
