/* Writes what tests/scripts/t5_parity.py checks against PyTorch: a small T5
 * (model/encdec.h) - its initial parameters, 5 batches (source tokens and
 * lengths, decoder tokens, targets), the first step's logits, loss and every
 * gradient, and the parameters after 5 AdamW steps with warmup, cosine decay
 * and clipping, run by the model and optimizer code the trainer uses.
 * usage: [mpirun -n P] encdec_parity OUT.safetensors [--bf16] [--sp] [--res-post-norm]
 * Under mpirun the model is split over P tensor-parallel ranks (--sp: with
 * sequence parallelism) and rank 0 writes the same file as one process: every
 * tensor gathered by global element index, the logits by vocabulary slice; the
 * gradient norm for clipping sums each rank's part (replicated tensors once).
 * The model: 2 encoder and 2 decoder layers, hidden 64, 4 heads, MLP 256, 24
 * source and 16 decoder positions, 2 samples, vocabulary 1000 (padded to 1024);
 * the second sample's source is padded after 17 tokens (the encoder's padding
 * mask and the cross-attention's keys), its decoder after 11 (targets -1: no
 * loss there); the objective is the mean cross-entropy over the targets.
 * --res-post-norm: Megatron's --apply-residual-connection-post-layernorm in both stacks.
 * --hf-t5 relu|geglu: transformers' T5 layer instead (tests/scripts/t5_hf_parity.py):
 * RMSNorm with eps 1e-6, no biases (nor the output bias), relative position bias
 * tables (--buckets N, default 8, --max-distance M, default 20), scores unscaled,
 * the MLP's ReLU or GEGLU; an untied output layer, or with --tied the word
 * embeddings with the output layer's input scaled by hidden^-0.5; --kv-channels N: heads
 * of N (T5 v1.1 small's d_kv, heads x N other than the hidden size).
 * --post-ln: plait train --model bart --transformer-block-type post_ln, transformers'
 * BART's layers (both stacks post-LN with a norm of their embeddings, no final norms,
 * exact GELU), checked by tests/scripts/hf_bart.py; --scale-embedding (with it): the
 * token embeddings times sqrt(hidden), transformers' scale_embedding. */
#include "base/alloc.h"
#include "base/rng.h"
#include "ckpt/safetensors.h"
#include "parallel/dist.h"
#include "model/encdec.h"
#include "model/spec.h"
#include "optim/adamw.h"
#include "optim/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LE = 2, LD = 2, C = 64, NH = 4, TE = 24, TD = 16, B = 2, V = 1000, STEPS = 5, SEED = 4321 };

static uint64_t lcg = 0x9e3779b97f4a7c15ull;
static int32_t next_token(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((lcg >> 33) % V);
}

static pl_comm tp;

static int fail(pl_status st)
{
    fprintf(stderr, "encdec_parity (rank %d): %s\n", tp.rank, pl_error_msg());
    return st ? 1 : 0;
}

/* rank 0's global tensor of p from every rank's local values (replicated ones from
 * TP rank 0), by global element index */
static pl_status gather(const pl_param *p, const float *local, float *global)
{
    const int64_t n = p->shape[0] * (p->ndim == 2 ? p->shape[1] : 1);
    const int64_t rows = p->local_shape[0], cols = p->ndim == 2 ? p->local_shape[1] : 1;
    memset(global, 0, (size_t)n * sizeof(float));
    if (p->split != PL_TP_REPLICATED || tp.rank == 0)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = 0; k < cols; k++)
                global[pl_param_global_index(p, r, k)] = local[r * cols + k];
    if (tp.size == 1)
        return PL_OK;
    int rc = MPI_Reduce(tp.rank ? global : MPI_IN_PLACE, global, (int)n, MPI_FLOAT, MPI_SUM, 0,
                        tp.mpi);
    return rc == MPI_SUCCESS ? PL_OK : pl_errorf(PL_ERR_IO, "MPI_Reduce of %s failed", p->name);
}

/* The squared gradient norm over the TP group, each replicated tensor once. */
static pl_status grad_sumsq(const pl_registry *reg, const float *grads, double *out)
{
    double s = 0;
    for (int i = 0; i < reg->n; i++) {
        const pl_param *p = &reg->params[i];
        if (p->split != PL_TP_REPLICATED || tp.rank == 0)
            s += pl_cpu_sumsq(grads + p->offset, p->numel);
    }
    *out = s;
    return tp.size > 1 ? pl_comm_allreduce_f64(&tp, out, 1, PL_COMM_SUM) : PL_OK;
}

/* transformers' T5 layer (--hf-t5) */
typedef struct hf_opts {
    int on, geglu, tied;
    int64_t buckets, max_distance, kv_channels;
} hf_opts;

static int run(int bf16, int sp, int res_post, int post_ln, const hf_opts *hf,
               const char *out);

int main(int argc, char **argv)
{
    int bf16 = 0, sp = 0, res_post = 0, post_ln = 0, bad = argc < 2;
    hf_opts hf = {0, 0, 0, 8, 20, 0};
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--hf-t5") == 0 && i + 1 < argc) {
            hf.on = 1;
            hf.geglu = strcmp(argv[++i], "geglu") == 0;
            bad |= !hf.geglu && strcmp(argv[i], "relu") != 0;
        } else if (strcmp(argv[i], "--tied") == 0)
            hf.tied = 1;
        else if (strcmp(argv[i], "--buckets") == 0 && i + 1 < argc)
            hf.buckets = atoll(argv[++i]);
        else if (strcmp(argv[i], "--max-distance") == 0 && i + 1 < argc)
            hf.max_distance = atoll(argv[++i]);
        else if (strcmp(argv[i], "--kv-channels") == 0 && i + 1 < argc)
            hf.kv_channels = atoll(argv[++i]);
        else if (strcmp(argv[i], "--bf16") == 0)
            bf16 = 1;
        else if (strcmp(argv[i], "--sp") == 0)
            sp = 1;
        else if (strcmp(argv[i], "--res-post-norm") == 0)
            res_post = 1;
        else if (strcmp(argv[i], "--post-ln") == 0)
            post_ln = post_ln ? post_ln : 1;
        else if (strcmp(argv[i], "--scale-embedding") == 0)
            post_ln = 2; /* --post-ln with transformers' scale_embedding */
        else
            bad = 1;
    }
    if (bad) {
        fprintf(stderr, "usage: [mpirun -n P] encdec_parity OUT.safetensors [--bf16] [--sp] "
                        "[--res-post-norm | --post-ln [--scale-embedding] | --hf-t5 relu|geglu "
                        "[--tied] [--buckets N] [--max-distance M] [--kv-channels N]]\n");
        return 2;
    }
    pl_dist dist;
    pl_status st = pl_dist_init(&dist, &argc, &argv);
    if (st)
        return fail(st);
    if ((st = pl_comm_init(&tp, MPI_COMM_WORLD, "tp", 0)))
        return fail(st);
    int rc = run(bf16, sp && tp.size > 1, res_post, post_ln, &hf, argv[1]);
    pl_comm_free(&tp);
    pl_dist_finalize(&dist);
    return rc;
}

/* transformers' T5ForConditionalGeneration's layer on cfg. */
static void hf_layer(pl_model_config *cfg, const hf_opts *hf)
{
    cfg->block.norm = PL_NORM_RMSNORM;
    cfg->block.norm_bias = cfg->block.bias = 0;
    cfg->block.pos = PL_POS_RELATIVE;
    cfg->block.act = hf->geglu ? PL_ACT_GEGLU : PL_ACT_RELU;
    cfg->head.output_bias = 0;
    cfg->rel_buckets = hf->buckets;
    cfg->rel_max_distance = hf->max_distance;
    cfg->softmax_scale = 1.0f;
    cfg->ln_eps = 1e-6f;
    cfg->untie = !hf->tied;
    cfg->output_scale = hf->tied ? 1.0f / sqrtf((float)C) : 0.0f;
    cfg->kv_channels = hf->kv_channels;
}

static int run(int bf16, int sp, int res_post, int post_ln, const hf_opts *hf,
               const char *out)
{
    pl_model_config cfg = {.num_layers = LE, .dec_layers = LD, .hidden = C, .heads = NH,
                           .ffn_hidden = 4 * C, .seq_length = TE, .dec_seq_length = TD,
                           .max_positions = TE, .vocab_size = V, .divisible_by = 128,
                           .init_std = 0.02, .ln_eps = 1e-5f};
    pl_family_apply(&cfg, post_ln ? PL_FAMILY_BART : PL_FAMILY_T5);
    cfg.query_groups = NH;
    cfg.block.res_post_norm = res_post;
    if (hf->on)
        hf_layer(&cfg, hf);
    if (post_ln) /* what plait train --model bart --transformer-block-type post_ln sets */
        cfg.block.post_norm = 1, cfg.block.act = PL_ACT_GELU_ERF;
    cfg.scale_embedding = post_ln == 2; /* and --scale-embedding */
    cfg.hidden_dropout = cfg.attention_dropout = 0;
    cfg.sequence_parallel = sp;
    cfg.padded_vocab = pl_model_padded_vocab(V, 128, 1); /* 1024: a multiple of 128 x tp */
    if (cfg.padded_vocab % (128 * tp.size))
        return fail(pl_errorf(PL_ERR_ARG, "%d ranks do not divide the vocabulary's 1024 rows",
                              tp.size));
    pl_registry reg;
    pl_registry_init(&reg, tp.size, tp.rank, 0);
    pl_status st = pl_model_register(&reg, &cfg, 1);
    if (st)
        return fail(st);
    const int64_t n = reg.numel, Ne = B * TE, Nd = B * TD, Vp = cfg.padded_vocab;
    const int64_t Vl = Vp / tp.size;
    float *init = pl_calloc((size_t)n, sizeof(float)), *params = pl_calloc((size_t)n, sizeof(float));
    float *grads = pl_calloc((size_t)n, sizeof(float)), *grads0 = pl_calloc((size_t)n, sizeof(float));
    float *m = pl_calloc((size_t)n, sizeof(float)), *v = pl_calloc((size_t)n, sizeof(float));
    float *logits = pl_calloc((size_t)(Nd * Vp), sizeof(float));
    /* per step: source (B, TE), decoder tokens (B, TD), targets (B, TD); source lengths */
    int32_t *batch = pl_calloc((size_t)(STEPS * (Ne + 2 * Nd + B)), sizeof(int32_t));
    float lrs[STEPS], norms[STEPS], loss0 = 0;
    if (!init || !params || !grads || !grads0 || !m || !v || !logits || !batch)
        return fail(pl_errorf(PL_ERR_NOMEM, "out of memory"));
    pl_registry_init_values(&reg, init, SEED);
    /* norm gains and biases away from 1 and 0, so their gradients matter (keyed by
     * the global element, so every layout perturbs alike) */
    for (int i = 0; i < reg.n; i++) {
        const pl_param *p = &reg.params[i];
        for (int64_t k = 0; p->ndim == 1 && k < p->numel; k++)
            init[p->offset + k] +=
                0.05f * (float)(2.0 * pl_rng_uniform(SEED, pl_hash_str(p->name),
                                                     (uint64_t)pl_param_global_index(p, k, 0)) -
                                1.0);
    }
    memcpy(params, init, (size_t)n * sizeof(float));
    for (int s = 0; s < STEPS; s++) {
        int32_t *src = batch + (int64_t)s * (Ne + 2 * Nd + B), *dec = src + Ne, *tgt = dec + Nd;
        int32_t *len = tgt + Nd;
        for (int b = 0; b < B; b++) {
            len[b] = b ? 17 - s : TE;
            const int32_t dlen = b ? 11 : TD;
            for (int t = 0; t < TE; t++)
                src[b * TE + t] = t < len[b] ? next_token() : 0;
            for (int t = 0; t < TD; t++) {
                dec[b * TD + t] = t < dlen ? next_token() : 0;
                tgt[b * TD + t] = t < dlen ? next_token() : -1;
            }
        }
    }
    pl_gemm *gemm;
    if ((st = pl_gemm_init(&gemm)))
        return fail(st);
    pl_gemm_set_precision(gemm, bf16 ? PL_GEMM_BF16 : PL_GEMM_FP32);
    pl_encdec e;
    if ((st = pl_encdec_init(&e, &cfg, &reg, params, grads, B, &tp, gemm)))
        return fail(st);
    pl_lr_schedule sched = {.max_lr = 1e-3, .min_lr = 1e-4, .init_lr = 0, .warmup_steps = 2 * B,
                            .decay_steps = STEPS * B, .style = PL_LR_COSINE};
    pl_adamw_hparams hp = {0.9, 0.95, 1e-8, 0.1, 0.05};
    for (int s = 0; s < STEPS; s++) {
        const int32_t *src = batch + (int64_t)s * (Ne + 2 * Nd + B), *dec = src + Ne;
        const int32_t *tgt = dec + Nd, *len = tgt + Nd;
        memcpy(e.enc->tokens, src, (size_t)Ne * sizeof(int32_t));
        memcpy(e.enc->lengths, len, B * sizeof(int32_t));
        memcpy(e.dec->tokens, dec, (size_t)Nd * sizeof(int32_t));
        memcpy(e.dec->targets, tgt, (size_t)Nd * sizeof(int32_t));
        int64_t count = 0;
        for (int64_t i = 0; i < Nd; i++)
            count += tgt[i] >= 0;
        for (int64_t i = 0; i < Nd; i++)
            e.dec->dloss[i] = tgt[i] >= 0 ? (float)(1.0 / (double)count) : 0.0f;
        for (int b = 0; b < B; b++)
            e.enc->sample[b] = e.dec->sample[b] = (int64_t)s * B + b;
        pl_encdec_set_pass(&e, 1, s, SEED);
        memset(grads, 0, (size_t)n * sizeof(float));
        if ((st = pl_encdec_forward(&e)) || (st = pl_encdec_backward(&e, NULL, NULL)))
            return fail(st);
        double sumsq;
        if ((st = grad_sumsq(&reg, grads, &sumsq)))
            return fail(st);
        if (s == 0) {
            double sum = 0;
            for (int64_t i = 0; i < Nd; i++)
                sum += (double)e.dec->dloss[i] * e.dec->loss[i];
            loss0 = (float)sum;
            memcpy(grads0, grads, (size_t)n * sizeof(float));
            /* this rank's vocabulary slice of the logits, then every slice side by side */
            float *mine = pl_calloc((size_t)(Nd * Vl), sizeof(float));
            if (!mine)
                return fail(pl_errorf(PL_ERR_NOMEM, "out of memory"));
            if (bf16)
                st = pl_gemm_run(gemm, 0, 1, Nd, Vl, C, e.dec->lnf, C, e.dec->p.out_w, C, 0.0f, mine,
                                 Vl);
            else
                pl_ref_gemm(0, 1, Nd, Vl, C, e.dec->lnf, C, e.dec->p.out_w, C, 0.0f, mine, Vl);
            if (st)
                return fail(st);
            for (int64_t i = 0; e.dec->p.out_b && i < Nd; i++)
                pl_cpu_add(mine + i * Vl, mine + i * Vl, e.dec->p.out_b, Vl);
            float *all = tp.size > 1 ? pl_calloc((size_t)(Nd * Vp), sizeof(float)) : mine;
            if (tp.size > 1 && MPI_Gather(mine, (int)(Nd * Vl), MPI_FLOAT, all, (int)(Nd * Vl),
                                          MPI_FLOAT, 0, tp.mpi) != MPI_SUCCESS)
                return fail(pl_errorf(PL_ERR_IO, "MPI_Gather of the logits failed"));
            for (int r = 0; r < tp.size; r++)
                for (int64_t i = 0; i < Nd; i++)
                    memcpy(logits + i * Vp + r * Vl, all + ((int64_t)r * Nd + i) * Vl,
                           (size_t)Vl * sizeof(float));
            if (all != mine)
                pl_free(all);
            pl_free(mine);
        }
        lrs[s] = (float)pl_lr_schedule_lr(&sched);
        norms[s] = (float)pl_adamw_step(&reg, params, grads, m, v, &hp, lrs[s], s + 1, sumsq);
        pl_lr_schedule_step(&sched, B);
    }
    pl_st_writer *w = NULL;
    if (tp.rank == 0 && (st = pl_st_writer_new(&w)))
        return fail(st);
    static char keys[3 * 128][PL_ST_NAME_MAX];
    if (reg.n > 128)
        return fail(pl_errorf(PL_ERR_INTERNAL, "too many parameters for the key table"));
    int nk = 0;
    const float *bufs[3] = {init, grads0, params};
    const char *pre[3] = {"init.", "grad.", "final."};
    static float *globals[3 * 128];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < reg.n; i++) {
            const pl_param *p = &reg.params[i];
            float *g = globals[nk] =
                pl_calloc((size_t)(p->shape[0] * (p->ndim == 2 ? p->shape[1] : 1)), sizeof(float));
            if (!g)
                return fail(pl_errorf(PL_ERR_NOMEM, "out of memory"));
            if ((st = gather(p, bufs[k] + p->offset, g)))
                return fail(st);
            snprintf(keys[nk], PL_ST_NAME_MAX, "%s%s", pre[k], p->name);
            if (w)
                pl_st_writer_add(w, keys[nk], "F32", p->ndim, p->shape, g);
            nk++;
        }
    if (!w) {
        for (int k = 0; k < nk; k++)
            pl_free(globals[k]);
        goto done;
    }
    int64_t sbatch[2] = {STEPS, Ne + 2 * Nd + B}, sl[2] = {Nd, Vp}, s1[1] = {1}, ss[1] = {STEPS};
    pl_st_writer_add(w, "batch", "I32", 2, sbatch, batch);
    pl_st_writer_add(w, "logits", "F32", 2, sl, logits);
    pl_st_writer_add(w, "loss", "F32", 1, s1, &loss0);
    pl_st_writer_add(w, "lr", "F32", 1, ss, lrs);
    pl_st_writer_add(w, "grad_norm", "F32", 1, ss, norms);
    char meta[1024];
    snprintf(meta, sizeof meta,
             "{\"enc_layers\": %d, \"dec_layers\": %d, \"hidden\": %d, \"heads\": %d, "
             "\"enc_seq\": %d, \"dec_seq\": %d, \"batch\": %d, \"vocab\": %d, \"padded_vocab\": %lld, "
             "\"steps\": %d, \"beta1\": 0.9, \"beta2\": 0.95, \"eps\": 1e-8, \"weight_decay\": 0.1, "
             "\"clip_grad\": 0.05, \"precision\": \"%s\", \"res_post_norm\": %d, "
             "\"hf_t5\": %d, \"act\": \"%s\", \"tied\": %d, \"buckets\": %lld, "
             "\"max_distance\": %lld, \"kv_channels\": %lld, \"post_ln\": %d, "
             "\"scale_embedding\": %d}",
             LE, LD, C, NH, TE, TD, B, V, (long long)Vp, STEPS, bf16 ? "bf16" : "fp32", res_post,
             hf->on, hf->geglu ? "geglu" : "relu", hf->tied, (long long)hf->buckets,
             (long long)hf->max_distance, (long long)hf->kv_channels, post_ln != 0, post_ln == 2);
    pl_st_writer_meta(w, "config", meta);
    if ((st = pl_st_writer_finish(w, out)))
        return fail(st);
    printf("wrote %s: tp %d%s, loss %.6f, grad norms %.4f %.4f %.4f %.4f %.4f\n", out, tp.size,
           sp ? " (sp)" : "", loss0, norms[0], norms[1], norms[2], norms[3], norms[4]);
    for (int k = 0; k < nk; k++)
        pl_free(globals[k]);
done:
    pl_encdec_free(&e);
    pl_gemm_free(gemm);
    pl_registry_free(&reg);
    pl_free(init), pl_free(params), pl_free(grads), pl_free(grads0), pl_free(m), pl_free(v);
    pl_free(logits), pl_free(batch);
    return 0;
}
