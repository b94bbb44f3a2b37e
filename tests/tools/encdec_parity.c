/* Writes what tests/scripts/t5_parity.py checks against PyTorch: a small T5
 * (model/encdec.h) - its initial parameters, 5 batches (source tokens and
 * lengths, decoder tokens, targets), the first step's logits, loss and every
 * gradient, and the parameters after 5 AdamW steps with warmup, cosine decay
 * and clipping, run by the model and optimizer code the trainer uses.
 * usage: encdec_parity OUT.safetensors [--bf16]
 * The model: 2 encoder and 2 decoder layers, hidden 64, 4 heads, MLP 256, 24
 * source and 16 decoder positions, 2 samples, vocabulary 1000 (padded to 1024);
 * the second sample's source is padded after 17 tokens (the encoder's padding
 * mask and the cross-attention's keys), its decoder after 11 (targets -1: no
 * loss there); the objective is the mean cross-entropy over the targets. */
#include "base/alloc.h"
#include "ckpt/safetensors.h"
#include "model/encdec.h"
#include "model/spec.h"
#include "optim/adamw.h"
#include "optim/schedule.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { LE = 2, LD = 2, C = 64, NH = 4, TE = 24, TD = 16, B = 2, V = 1000, STEPS = 5, SEED = 4321 };

static uint64_t lcg = 0x9e3779b97f4a7c15ull;
static int32_t next_token(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((lcg >> 33) % V);
}

static int fail(pl_status st)
{
    fprintf(stderr, "encdec_parity: %s\n", pl_error_msg());
    return st ? 1 : 0;
}

int main(int argc, char **argv)
{
    int bf16 = argc == 3 && strcmp(argv[2], "--bf16") == 0;
    if (argc < 2 || (argc == 3 && !bf16) || argc > 3) {
        fprintf(stderr, "usage: encdec_parity OUT.safetensors [--bf16]\n");
        return 2;
    }
    pl_model_config cfg = {.num_layers = LE, .dec_layers = LD, .hidden = C, .heads = NH,
                           .ffn_hidden = 4 * C, .seq_length = TE, .dec_seq_length = TD,
                           .max_positions = TE, .vocab_size = V, .divisible_by = 128,
                           .init_std = 0.02, .ln_eps = 1e-5f};
    pl_family_apply(&cfg, PL_FAMILY_T5);
    cfg.query_groups = NH;
    cfg.hidden_dropout = cfg.attention_dropout = 0;
    cfg.padded_vocab = pl_model_padded_vocab(V, 128, 1);
    pl_registry reg;
    pl_registry_init(&reg, 1, 0, 0);
    pl_status st = pl_model_register(&reg, &cfg, 1);
    if (st)
        return fail(st);
    const int64_t n = reg.numel, Ne = B * TE, Nd = B * TD, Vp = cfg.padded_vocab;
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
    /* norm gains and biases away from 1 and 0, so their gradients matter */
    for (int i = 0; i < reg.n; i++) {
        const pl_param *p = &reg.params[i];
        for (int64_t k = 0; p->ndim == 1 && k < p->numel; k++)
            init[p->offset + k] += 0.05f * (float)((next_token() % 200) - 100) / 100.0f;
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
    pl_comm tp = {0};
    tp.size = 1;
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
        memcpy(e.enc.tokens, src, (size_t)Ne * sizeof(int32_t));
        memcpy(e.enc.lengths, len, B * sizeof(int32_t));
        memcpy(e.dec.tokens, dec, (size_t)Nd * sizeof(int32_t));
        memcpy(e.dec.targets, tgt, (size_t)Nd * sizeof(int32_t));
        int64_t count = 0;
        for (int64_t i = 0; i < Nd; i++)
            count += tgt[i] >= 0;
        for (int64_t i = 0; i < Nd; i++)
            e.dec.dloss[i] = tgt[i] >= 0 ? (float)(1.0 / (double)count) : 0.0f;
        for (int b = 0; b < B; b++)
            e.enc.sample[b] = e.dec.sample[b] = (int64_t)s * B + b;
        pl_encdec_set_pass(&e, 1, s, SEED);
        memset(grads, 0, (size_t)n * sizeof(float));
        if ((st = pl_encdec_forward(&e)) || (st = pl_encdec_backward(&e)))
            return fail(st);
        if (s == 0) {
            double sum = 0;
            for (int64_t i = 0; i < Nd; i++)
                sum += (double)e.dec.dloss[i] * e.dec.loss[i];
            loss0 = (float)sum;
            memcpy(grads0, grads, (size_t)n * sizeof(float));
            if (bf16)
                st = pl_gemm_run(gemm, 0, 1, Nd, Vp, C, e.dec.lnf, C, e.dec.p.out_w, C, 0.0f, logits,
                                 Vp);
            else
                pl_ref_gemm(0, 1, Nd, Vp, C, e.dec.lnf, C, e.dec.p.out_w, C, 0.0f, logits, Vp);
            if (st)
                return fail(st);
            for (int64_t i = 0; i < Nd; i++)
                pl_cpu_add(logits + i * Vp, logits + i * Vp, e.dec.p.out_b, Vp);
        }
        lrs[s] = (float)pl_lr_schedule_lr(&sched);
        norms[s] = (float)pl_adamw_step(&reg, params, grads, m, v, &hp, lrs[s], s + 1,
                                        pl_cpu_sumsq(grads, n));
        pl_lr_schedule_step(&sched, B);
    }
    pl_st_writer *w;
    if ((st = pl_st_writer_new(&w)))
        return fail(st);
    static char keys[3 * 128][PL_ST_NAME_MAX];
    if (reg.n > 128)
        return fail(pl_errorf(PL_ERR_INTERNAL, "too many parameters for the key table"));
    int nk = 0;
    const float *bufs[3] = {init, grads0, params};
    const char *pre[3] = {"init.", "grad.", "final."};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < reg.n; i++) {
            const pl_param *p = &reg.params[i];
            snprintf(keys[nk], PL_ST_NAME_MAX, "%s%s", pre[k], p->name);
            pl_st_writer_add(w, keys[nk++], "F32", p->ndim, p->shape, bufs[k] + p->offset);
        }
    int64_t sbatch[2] = {STEPS, Ne + 2 * Nd + B}, sl[2] = {Nd, Vp}, s1[1] = {1}, ss[1] = {STEPS};
    pl_st_writer_add(w, "batch", "I32", 2, sbatch, batch);
    pl_st_writer_add(w, "logits", "F32", 2, sl, logits);
    pl_st_writer_add(w, "loss", "F32", 1, s1, &loss0);
    pl_st_writer_add(w, "lr", "F32", 1, ss, lrs);
    pl_st_writer_add(w, "grad_norm", "F32", 1, ss, norms);
    char meta[512];
    snprintf(meta, sizeof meta,
             "{\"enc_layers\": %d, \"dec_layers\": %d, \"hidden\": %d, \"heads\": %d, "
             "\"enc_seq\": %d, \"dec_seq\": %d, \"batch\": %d, \"vocab\": %d, \"padded_vocab\": %lld, "
             "\"steps\": %d, \"beta1\": 0.9, \"beta2\": 0.95, \"eps\": 1e-8, \"weight_decay\": 0.1, "
             "\"clip_grad\": 0.05, \"precision\": \"%s\"}",
             LE, LD, C, NH, TE, TD, B, V, (long long)Vp, STEPS, bf16 ? "bf16" : "fp32");
    pl_st_writer_meta(w, "config", meta);
    if ((st = pl_st_writer_finish(w, argv[1])))
        return fail(st);
    printf("wrote %s: loss %.6f, grad norms %.4f %.4f %.4f %.4f %.4f\n", argv[1], loss0, norms[0],
           norms[1], norms[2], norms[3], norms[4]);
    pl_encdec_free(&e);
    pl_gemm_free(gemm);
    pl_registry_free(&reg);
    pl_free(init), pl_free(params), pl_free(grads), pl_free(grads0), pl_free(m), pl_free(v);
    pl_free(logits), pl_free(batch);
    return 0;
}
