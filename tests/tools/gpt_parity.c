/* Writes what tests/scripts/torch_parity.py checks against PyTorch: a small
 * GPT's initial parameters, a batch, plait's logits and loss, every gradient
 * of the first step, and the parameters after 5 AdamW steps with warmup,
 * cosine decay and clipping, run by the same model and optimizer code the
 * trainer uses. usage: gpt_parity OUT.safetensors [--keep-logits] [--bf16 | --fp16]:
 * with --bf16, every GEMM runs in the GEMM context's bf16 mode (and the model saves its
 * activations in bf16), as plait train --bf16 does; with --fp16, in fp16 mode with a
 * static loss scale of LOSS_SCALE, taken off the gradients as the trainer does
 * (plait train --fp16 --loss-scale 1024). */
#include "base/alloc.h"
#include "ckpt/safetensors.h"
#include "model/model.h"
#include "model/spec.h"
#include "optim/adamw.h"
#include "optim/schedule.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { L = 2, C = 64, NH = 4, T = 32, B = 2, V = 1000, STEPS = 5 };
#define LOSS_SCALE 1024.0

static uint64_t lcg = 88172645463325252ull;
static int32_t next_token(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((lcg >> 33) % V);
}

static int fail(pl_status st)
{
    fprintf(stderr, "gpt_parity: %s\n", pl_error_msg());
    return st ? 1 : 0;
}

int main(int argc, char **argv)
{
    int keep = 0, bf16 = 0, fp16 = 0, bad = argc < 2;
    for (int i = 2; i < argc; i++) {
        keep |= strcmp(argv[i], "--keep-logits") == 0;
        bf16 |= strcmp(argv[i], "--bf16") == 0;
        fp16 |= strcmp(argv[i], "--fp16") == 0;
        bad |= strcmp(argv[i], "--keep-logits") != 0 && strcmp(argv[i], "--bf16") != 0 &&
               strcmp(argv[i], "--fp16") != 0;
    }
    if (bad || (bf16 && fp16)) {
        fprintf(stderr, "usage: gpt_parity OUT.safetensors [--keep-logits] [--bf16 | --fp16]\n");
        return 2;
    }
    const double scale = fp16 ? LOSS_SCALE : 1.0;
    pl_model_config cfg = {.num_layers = L, .hidden = C, .heads = NH, .ffn_hidden = 4 * C,
                         .seq_length = T, .max_positions = T, .vocab_size = V,
                         .divisible_by = 128, .init_std = 0.02, .ln_eps = 1e-5f,
                         .keep_logits = keep};
    pl_family_apply(&cfg, PL_FAMILY_GPT);
    cfg.query_groups = cfg.heads;
    cfg.padded_vocab = pl_model_padded_vocab(V, 128, 1);
    pl_registry reg;
    pl_registry_init(&reg, 1, 0, 0);
    pl_status st = pl_model_register(&reg, &cfg, 1);
    if (st)
        return fail(st);
    const int64_t n = reg.numel, N = B * T, Vp = cfg.padded_vocab;
    float *init = pl_calloc((size_t)n, sizeof(float)), *params = pl_calloc((size_t)n, sizeof(float));
    float *grads = pl_calloc((size_t)n, sizeof(float)), *grads0 = pl_calloc((size_t)n, sizeof(float));
    float *m = pl_calloc((size_t)n, sizeof(float)), *v = pl_calloc((size_t)n, sizeof(float));
    float *logits = pl_calloc((size_t)(N * Vp), sizeof(float));
    int32_t *batches = pl_calloc((size_t)(STEPS * B * (T + 1)), sizeof(int32_t));
    float lrs[STEPS], norms[STEPS], loss0 = 0;
    pl_registry_init_values(&reg, init, 1234);
    memcpy(params, init, (size_t)n * sizeof(float));
    for (int i = 0; i < STEPS * B * (T + 1); i++)
        batches[i] = next_token();
    pl_gemm *gemm;
    pl_comm tp = {0};
    tp.size = 1;
    if ((st = pl_gemm_init(&gemm)))
        return fail(st);
    pl_gemm_set_precision(gemm, bf16 ? PL_GEMM_BF16 : fp16 ? PL_GEMM_FP16 : PL_GEMM_FP32);
    pl_model model;
    if ((st = pl_model_init(&model, &cfg, &reg, params, grads, B, &tp, gemm)))
        return fail(st);
    /* Megatron schedule in samples: warmup 2 iterations, cosine decay over 5. */
    pl_lr_schedule sched = {.max_lr = 1e-3, .min_lr = 1e-4, .init_lr = 0, .warmup_steps = 2 * B,
                         .decay_steps = STEPS * B, .style = PL_LR_COSINE};
    pl_adamw_hparams hp = {0.9, 0.95, 1e-8, 0.1, 0.05};
    for (int s = 0; s < STEPS; s++) {
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                model.tokens[b * T + t] = batches[(s * B + b) * (T + 1) + t];
                model.targets[b * T + t] = batches[(s * B + b) * (T + 1) + t + 1];
            }
        for (int64_t i = 0; i < N; i++)
            model.dloss[i] = (float)(scale / (double)N);
        memset(grads, 0, (size_t)n * sizeof(float));
        if ((st = pl_model_forward(&model)) || (st = pl_model_backward(&model, NULL, NULL)))
            return fail(st);
        if (fp16) { /* the trainer's unscale: g *= 1 / scale; an overflow would stop here */
            const float inv = (float)(1.0 / scale);
            for (int64_t i = 0; i < n; i++) {
                grads[i] *= inv;
                if (!isfinite(grads[i]))
                    return fail(pl_errorf(PL_ERR_INTERNAL, "fp16 gradient overflow at %lld",
                                          (long long)i));
            }
        }
        if (s == 0) {
            double sum = 0;
            for (int64_t i = 0; i < N; i++)
                sum += model.loss[i];
            loss0 = (float)(sum / N);
            memcpy(grads0, grads, (size_t)n * sizeof(float));
            if (bf16 || fp16) /* the logits as the LM head computes them: rounded inputs */
                st = pl_gemm_run(gemm, 0, 1, N, Vp, C, model.lnf, C, model.wte, C, 0.0f, logits, Vp);
            else
                pl_ref_gemm(0, 1, N, Vp, C, model.lnf, C, model.wte, C, 0.0f, logits, Vp);
            if (st)
                return fail(st);
        }
        lrs[s] = (float)pl_lr_schedule_lr(&sched);
        norms[s] = (float)pl_adamw_step(&reg, params, grads, m, v, &hp, lrs[s], s + 1,
                                        pl_cpu_sumsq(grads, n));
        pl_lr_schedule_step(&sched, B);
    }
    pl_st_writer *w;
    if ((st = pl_st_writer_new(&w)))
        return fail(st);
    static char keys[3 * 64][PL_ST_NAME_MAX];
    if (3 * reg.n > 3 * 64)
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
    int64_t sb[2] = {STEPS * B, T + 1}, sl[2] = {N, Vp}, s1[1] = {1}, ss[1] = {STEPS};
    pl_st_writer_add(w, "batches", "I32", 2, sb, batches);
    pl_st_writer_add(w, "logits", "F32", 2, sl, logits);
    pl_st_writer_add(w, "loss", "F32", 1, s1, &loss0);
    pl_st_writer_add(w, "lr", "F32", 1, ss, lrs);
    pl_st_writer_add(w, "grad_norm", "F32", 1, ss, norms);
    char meta[512];
    snprintf(meta, sizeof meta,
             "{\"layers\": %d, \"hidden\": %d, \"heads\": %d, \"seq\": %d, \"batch\": %d, "
             "\"vocab\": %d, \"padded_vocab\": %lld, \"steps\": %d, \"beta1\": 0.9, \"beta2\": 0.95, "
             "\"eps\": 1e-8, \"weight_decay\": 0.1, \"clip_grad\": 0.05, \"precision\": \"%s\", "
             "\"loss_scale\": %g}",
             L, C, NH, T, B, V, (long long)Vp, STEPS, bf16 ? "bf16" : fp16 ? "fp16" : "fp32", scale);
    pl_st_writer_meta(w, "config", meta);
    if ((st = pl_st_writer_finish(w, argv[1])))
        return fail(st);
    printf("wrote %s: loss %.6f, grad norms %.4f %.4f %.4f %.4f %.4f\n", argv[1], loss0, norms[0],
           norms[1], norms[2], norms[3], norms[4]);
    pl_model_free(&model);
    pl_gemm_free(gemm);
    return 0;
}
