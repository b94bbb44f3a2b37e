/* Writes what tests/scripts/torch_parity.py checks against PyTorch: a small
 * model's initial parameters, a batch, plait's logits and loss, every gradient
 * of the first step, and the parameters after 5 AdamW steps with warmup,
 * cosine decay and clipping, run by the same model and optimizer code the
 * trainer uses.
 * usage: model_parity OUT.safetensors [--model gpt|llama|bert] [--groups G] [--rope-scaling]
 *                     [--dropout P] [--keep-logits] [--bf16 | --fp16]
 * --model bert: Megatron core's BertModel (token types, padding mask, lm_head
 * transform, output bias, pooler and binary head); each step's samples have
 * different lengths (the rest padding), token types 0 then 1, about a quarter
 * of the positions inside the sample masked (their labels), is_random 0 or 1;
 * the objective is pretrain_bert.py's: the mean MLM loss over the labelled
 * positions plus the mean binary (sentence-order) loss.
 * --task sequence|token|span (with --model bert): the fine-tuning model instead,
 * its pretraining heads replaced by the task's (nn/head.h): sequence classification
 * into 3 classes (pooler + classification_head, one label a sample), token
 * classification into 5 (classifier.mlp.layer0, a label at about half the positions
 * inside each sample), or spans (start and end logits, a start and an end position
 * a sample); the objective is the mean of the task's loss.
 * --head-dropout P (with --task): the task head's input dropout (nn/head.h: the pooled
 * output, or the token and span heads' input), its masks written as head_dropout.S
 * (computed here from the documented formula, as the --dropout ones).
 * --res-post-norm (with --model bert): Megatron's --apply-residual-connection-post-layernorm.
 * --post-ln (with --model bert): transformers' post-LN BERT (--transformer-block-type
 * post_ln: a norm of the embeddings, post-norm layers with the exact GELU, no final
 * norm), checked by tests/scripts/hf_bert.py against a BERT with transformers' modules.
 * --model llama: RMSNorm, RoPE (base 10000, or Llama 3.1's scaling with --rope-scaling),
 * SwiGLU, no biases, untied output layer, G key/value groups (--groups, default NH).
 * --dropout P: hidden and attention dropout P; the masks plait draws (the counter-based
 * RNG, keyed as the trainer keys them: iteration = step, sample = the batch row's global
 * index) are written too, computed here from the documented formulas (kernels.h), so the
 * reference applies exactly those. With
 * with --bf16, every GEMM runs in the GEMM context's bf16 mode (and the model saves its
 * activations in bf16), as plait train --bf16 does; with --fp16, in fp16 mode with a
 * static loss scale of LOSS_SCALE, taken off the gradients as the trainer does
 * (plait train --fp16 --loss-scale 1024). */
#include "base/alloc.h"
#include "base/rng.h"
#include "ckpt/safetensors.h"
#include "model/model.h"
#include "model/spec.h"
#include "optim/adamw.h"
#include "optim/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { L = 2, C = 64, NH = 4, T = 32, B = 2, V = 1000, STEPS = 5, SEED = 1234 };
#define LOSS_SCALE 1024.0

static uint64_t lcg = 88172645463325252ull;
static int32_t next_token(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((lcg >> 33) % V);
}

static int fail(pl_status st)
{
    fprintf(stderr, "model_parity: %s\n", pl_error_msg());
    return st ? 1 : 0;
}

/* Dropout masks of step s (scale 1/(1-p) where kept, 0 where dropped): per layer
 * the two hidden sites (B*T, C) and the attention probabilities (B, NH, T, T), and
 * the embeddings' (B*T, C). */
static void dropout_masks(float *hidden, float *attn, float *emb, const int64_t *sample, int s,
                          float p)
{
    const int64_t N = B * T;
    const uint32_t thr = pl_dropout_threshold(p);
    const float keep = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < N * C; i++)
        emb[i] = 1.0f;
    pl_ref_dropout(emb, emb, 0, B * T, T, C, C, 0, sample, p, SEED, pl_block_dropout_stream(s, 0, 3));
    for (int l = 0; l < L; l++) {
        for (int site = 1; site <= 2; site++) {
            float *h = hidden + ((int64_t)l * 2 + site - 1) * N * C;
            for (int64_t i = 0; i < N * C; i++)
                h[i] = 1.0f;
            pl_ref_dropout(h, h, 0, B * T, T, C, C, 0, sample, p, SEED, pl_block_dropout_stream(s, l, site));
        }
        const uint64_t stream = pl_block_dropout_stream(s, l, 0);
        float *a = attn + (int64_t)l * B * NH * T * T;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < NH; h++)
                for (int64_t q = 0; q < T; q++)
                    for (int64_t k = 0; k < T; k++) {
                        uint64_t idx = (uint64_t)(((sample[b] * NH + h) * T + q) * T + k);
                        a[((b * NH + h) * T + q) * T + k] =
                            pl_rng_u32(SEED, stream, idx) >= thr ? keep : 0.0f;
                    }
    }
}

int main(int argc, char **argv)
{
    int64_t lm_rows = 0;
    pl_lm_logits logits_mode = PL_LM_LOGITS_RECOMPUTE;
    int bf16 = 0, fp16 = 0, llama = 0, bert = 0, scaling = 0, bad = argc < 2;
    int res_post = 0, post_ln = 0;
    pl_task task = PL_TASK_NONE;
    int64_t groups = NH;
    float dropout = 0, head_p = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--keep-logits") == 0)
            logits_mode = PL_LM_LOGITS_KEEP;
        else if (strcmp(argv[i], "--fused-logits") == 0)
            logits_mode = PL_LM_LOGITS_FUSED;
        else if (strcmp(argv[i], "--lm-rows") == 0 && i + 1 < argc)
            lm_rows = atoll(argv[++i]);
        else if (strcmp(argv[i], "--bf16") == 0)
            bf16 = 1;
        else if (strcmp(argv[i], "--fp16") == 0)
            fp16 = 1;
        else if (strcmp(argv[i], "--rope-scaling") == 0)
            scaling = 1;
        else if (strcmp(argv[i], "--res-post-norm") == 0)
            res_post = 1;
        else if (strcmp(argv[i], "--post-ln") == 0)
            post_ln = 1;
        else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            llama = strcmp(argv[++i], "llama") == 0;
            bert = strcmp(argv[i], "bert") == 0;
        }
        else if (strcmp(argv[i], "--task") == 0 && i + 1 < argc) {
            i++;
            task = strcmp(argv[i], "sequence") == 0 ? PL_TASK_SEQUENCE
                   : strcmp(argv[i], "token") == 0  ? PL_TASK_TOKEN
                   : strcmp(argv[i], "span") == 0   ? PL_TASK_SPAN
                   : strcmp(argv[i], "regression") == 0 ? PL_TASK_REGRESSION
                                                    : (bad = 1, PL_TASK_NONE);
        } else if (strcmp(argv[i], "--groups") == 0 && i + 1 < argc)
            groups = atoll(argv[++i]);
        else if (strcmp(argv[i], "--dropout") == 0 && i + 1 < argc)
            dropout = (float)atof(argv[++i]);
        else if (strcmp(argv[i], "--head-dropout") == 0 && i + 1 < argc)
            head_p = (float)atof(argv[++i]);
        else
            bad = 1;
    }
    if (bad || (bf16 && fp16) || groups < 1 || NH % groups || dropout < 0 || dropout >= 1 ||
        (bert && dropout > 0) || (task && !bert) || (res_post && !bert) || (post_ln && !bert) ||
        head_p < 0 || head_p >= 1 || (head_p > 0 && !task)) {
        fprintf(stderr, "usage: model_parity OUT.safetensors [--model gpt|llama|bert] [--groups G] "
                        "[--rope-scaling] [--dropout P] [--keep-logits | --fused-logits [--lm-rows R]] "
                        "[--bf16 | --fp16] "
                        "[--task sequence|token|span|regression [--head-dropout P]] "
                        "[--res-post-norm] [--post-ln]\n");
        return 2;
    }
    const double scale = fp16 ? LOSS_SCALE : 1.0;
    pl_model_config cfg = {.num_layers = L, .hidden = C, .heads = NH, .ffn_hidden = 4 * C,
                           .seq_length = T, .max_positions = T, .vocab_size = V,
                           .divisible_by = 128, .init_std = 0.02, .ln_eps = 1e-5f,
                           .lm_logits = logits_mode, .lm_rows = lm_rows};
    pl_family_apply(&cfg, llama ? PL_FAMILY_LLAMA : bert ? PL_FAMILY_BERT : PL_FAMILY_GPT);
    if (llama)
        cfg.ffn_hidden = 3 * C / 2; /* SwiGLU: fc1 has 2 x 96 rows */
    const int64_t K = task == PL_TASK_SEQUENCE     ? 3
                      : task == PL_TASK_TOKEN    ? 5
                      : task == PL_TASK_REGRESSION ? 1
                                                   : 2;
    if (task)
        pl_model_set_task(&cfg, task, K);
    cfg.query_groups = groups;
    cfg.block.res_post_norm = res_post;
    if (post_ln) /* what plait train --transformer-block-type post_ln sets */
        cfg.block.post_norm = 1, cfg.block.act = PL_ACT_GELU_ERF;
    cfg.hidden_dropout = cfg.attention_dropout = dropout;
    cfg.head_dropout = head_p;
    cfg.rope = (pl_rope_config){10000.0, 1.0, scaling, 8.0, 1.0, 4.0, 8192};
    if (scaling) /* original positions small enough that all three bands of the rule occur */
        cfg.rope = (pl_rope_config){500000.0, 1.0, 1, 8.0, 1.0, 4.0, 16};
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
    /* BERT: per step and sample, tokens, types, labels (T each), length, is_random */
    int32_t *bb = pl_calloc((size_t)(STEPS * B * (3 * T + 2)), sizeof(int32_t));
    float lrs[STEPS], norms[STEPS], loss0 = 0, lm_loss0 = 0, sop_loss0 = 0, blogits[2 * B];
    pl_registry_init_values(&reg, init, SEED);
    memcpy(params, init, (size_t)n * sizeof(float));
    for (int i = 0; i < STEPS * B * (T + 1); i++)
        batches[i] = next_token();
    for (int i = 0; bert && i < STEPS * B; i++) {
        int32_t *tok = bb + (int64_t)i * 3 * T, *typ = tok + T, *lab = typ + T;
        const int32_t len = T - 5 * (i % B) - i / B; /* every sample but the first padded */
        for (int t = 0; t < T; t++) {
            tok[t] = t < len ? batches[i * (T + 1) + t] : 0;
            typ[t] = t < len && t >= len / 2 ? 1 : 0;
            lab[t] = t < len && next_token() % 4 == 0 ? next_token() : -1;
        }
        lab[1] = next_token(); /* at least one label per sample */
        bb[(int64_t)STEPS * B * 3 * T + i] = len;
        bb[(int64_t)STEPS * B * 3 * T + STEPS * B + i] = (i * 7 / 3) % 2;
        for (int t = 0; task == PL_TASK_TOKEN && t < T; t++) /* token classes 0..4 */
            lab[t] = t < len && next_token() % 2 ? next_token() % (int32_t)K : -1;
        if (task == PL_TASK_TOKEN)
            lab[0] = 4;
        if (task == PL_TASK_SEQUENCE)
            bb[(int64_t)STEPS * B * 3 * T + STEPS * B + i] = (i * 5 / 2) % 3;
        if (task == PL_TASK_REGRESSION) /* a target in [-2, 2), its float bits */
            pl_head_set_target(bb + (int64_t)STEPS * B * 3 * T + STEPS * B + i,
                               (float)(next_token() % 64) / 16.0f - 2.0f);
        if (task == PL_TASK_SPAN) { /* start, end: lab[0], lab[1] inside the sample */
            lab[0] = next_token() % len;
            lab[1] = lab[0] + next_token() % (len - lab[0]);
        }
    }
    pl_gemm *gemm;
    pl_comm tp = {0};
    tp.size = 1;
    if ((st = pl_gemm_init(&gemm)))
        return fail(st);
    pl_gemm_set_precision(gemm, bf16 ? PL_GEMM_BF16 : fp16 ? PL_GEMM_FP16 : PL_GEMM_FP32);
    pl_model model;
    if ((st = pl_model_init(&model, &cfg, &reg, params, grads, B, NULL, &tp, gemm)))
        return fail(st);
    model.training = 1;
    model.seed = SEED;
    const int64_t hidden_n = (int64_t)L * 2 * N * C, attn_n = (int64_t)L * B * NH * T * T;
    float *masks = dropout > 0 ? pl_calloc((size_t)(STEPS * (hidden_n + attn_n + N * C)),
                                           sizeof(float)) : NULL;
    if (dropout > 0 && !masks)
        return fail(pl_errorf(PL_ERR_NOMEM, "out of memory for the dropout masks"));
    /* the head's masks: per step (rows, C), a row per sample (pooled) or per position */
    const int64_t head_rows = PL_TASK_POOLED(task) ? B : N;
    float *head_masks = head_p > 0 ? pl_calloc((size_t)(STEPS * head_rows * C), sizeof(float))
                                   : NULL;
    if (head_p > 0 && !head_masks)
        return fail(pl_errorf(PL_ERR_NOMEM, "out of memory for the head dropout masks"));
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
        if (bert) { /* the mean over labelled positions, plus the mean binary loss */
            int64_t count = 0;
            for (int b = 0; b < B; b++) {
                const int32_t *tok = bb + (int64_t)(s * B + b) * 3 * T;
                memcpy(model.tokens + b * T, tok, T * sizeof(int32_t));
                memcpy(model.types + b * T, tok + T, T * sizeof(int32_t));
                memcpy(model.targets + b * T, tok + 2 * T, T * sizeof(int32_t));
                model.lengths[b] = bb[(int64_t)STEPS * B * 3 * T + s * B + b];
                if (model.labels)
                    model.labels[b] = bb[(int64_t)STEPS * B * 3 * T + STEPS * B + s * B + b];
                if (task == PL_TASK_SPAN) {
                    model.labels[b] = tok[2 * T], model.labels[B + b] = tok[2 * T + 1];
                    memset(model.targets + b * T, 0xff, T * sizeof(int32_t)); /* -1 */
                }
                if (PL_TASK_POOLED(task))
                    memset(model.targets + b * T, 0xff, T * sizeof(int32_t));
                model.dbin[b] = (float)(scale / B);
            }
            for (int64_t i = 0; i < N; i++)
                count += model.targets[i] >= 0;
            for (int64_t i = 0; i < N; i++)
                model.dloss[i] = model.targets[i] >= 0 ? (float)(scale / (double)count) : 0.0f;
        }
        model.iteration = s;
        for (int b = 0; b < B; b++)
            model.sample[b] = (int64_t)s * B + b;
        if (masks) {
            float *ms = masks + (int64_t)s * (hidden_n + attn_n + N * C);
            dropout_masks(ms, ms + hidden_n, ms + hidden_n + attn_n, model.sample, s, dropout);
        }
        if (head_masks) {
            float *hm = head_masks + (int64_t)s * head_rows * C;
            for (int64_t i = 0; i < head_rows * C; i++)
                hm[i] = 1.0f;
            pl_ref_dropout(hm, hm, 0, head_rows, head_rows == B ? 1 : T, C, C, 0, model.sample,
                           head_p, SEED, pl_block_dropout_stream(s, 0, PL_HEAD_DROPOUT_SITE));
        }
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
            double sum = 0, bsum = 0;
            for (int64_t i = 0; i < N; i++)
                sum += bert ? (double)model.dloss[i] * model.loss[i] / scale : model.loss[i] / N;
            for (int b = 0; bert && model.labels && b < B; b++)
                bsum += model.bin_loss[b] / B;
            loss0 = (float)(sum + bsum), lm_loss0 = (float)sum, sop_loss0 = (float)bsum;
            memcpy(grads0, grads, (size_t)n * sizeof(float));
            /* the output layer's input: the final norm's, or BERT's lm transform's */
            const float *x = bert ? model.mb[0].head.out : model.lnf;
            if (PL_TASK_POOLED(task)) /* the task's logits instead */
                memcpy(logits, model.mb[0].head.logits, (size_t)(B * K) * sizeof(float));
            else if (task == PL_TASK_SPAN)
                memcpy(logits, model.mb[0].head.tlogits, (size_t)(N * K) * sizeof(float));
            else if (task) { /* the token head's kept logits are spent by backward: again */
                const float *in = head_p > 0 ? model.mb[0].head.tdrop : model.lnf;
                pl_ref_gemm(0, 1, N, K, C, in, C, model.p.head.tok_w, C, 0.0f, logits, K);
                for (int64_t i = 0; i < N; i++)
                    pl_cpu_add(logits + i * K, logits + i * K, model.p.head.tok_b, K);
            }
            else if (bf16 || fp16) /* the logits as the LM head computes them: rounded inputs */
                st = pl_gemm_run(gemm, 0, 1, N, Vp, C, x, C, model.p.out_w, C, 0.0f, logits, Vp);
            else
                pl_ref_gemm(0, 1, N, Vp, C, x, C, model.p.out_w, C, 0.0f, logits, Vp);
            if (st)
                return fail(st);
            for (int64_t i = 0; bert && !task && i < N; i++)
                pl_cpu_add(logits + i * Vp, logits + i * Vp, model.p.out_b, Vp);
            if (bert && !task)
                memcpy(blogits, model.mb[0].head.logits, sizeof blogits);
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
    if (PL_TASK_POOLED(task))
        sl[0] = B, sl[1] = K;
    else if (task)
        sl[1] = K;
    pl_st_writer_add(w, "batches", "I32", 2, sb, batches);
    int64_t sbt[3] = {STEPS * B, 3, T}, sbb[2] = {2, STEPS * B}, sbl[2] = {B, 2};
    if (bert) {
        pl_st_writer_add(w, "bert.tokens_types_labels", "I32", 3, sbt, bb);
        pl_st_writer_add(w, "bert.lengths_is_random", "I32", 2, sbb, bb + (int64_t)STEPS * B * 3 * T);
        pl_st_writer_add(w, "binary_logits", "F32", 2, sbl, blogits);
        pl_st_writer_add(w, "lm_loss", "F32", 1, s1, &lm_loss0);
        pl_st_writer_add(w, "sop_loss", "F32", 1, s1, &sop_loss0);
    }
    pl_st_writer_add(w, "logits", "F32", 2, sl, logits);
    pl_st_writer_add(w, "loss", "F32", 1, s1, &loss0);
    pl_st_writer_add(w, "lr", "F32", 1, ss, lrs);
    pl_st_writer_add(w, "grad_norm", "F32", 1, ss, norms);
    static char mask_keys[STEPS * (2 * L + L + 1)][PL_ST_NAME_MAX];
    int nm = 0;
    for (int s = 0; masks && s < STEPS; s++) {
        float *ms = masks + (int64_t)s * (hidden_n + attn_n + N * C);
        int64_t sh[2] = {N, C}, sa[4] = {B, NH, T, T};
        for (int l = 0; l < L; l++) {
            for (int site = 1; site <= 2; site++) {
                snprintf(mask_keys[nm], PL_ST_NAME_MAX, "dropout.%d.%d.%s", s, l,
                         site == 1 ? "attention_output" : "mlp_output");
                pl_st_writer_add(w, mask_keys[nm++], "F32", 2, sh,
                                 ms + ((int64_t)l * 2 + site - 1) * N * C);
            }
            snprintf(mask_keys[nm], PL_ST_NAME_MAX, "dropout.%d.%d.attention_probs", s, l);
            pl_st_writer_add(w, mask_keys[nm++], "F32", 4, sa, ms + hidden_n + (int64_t)l * B * NH * T * T);
        }
        snprintf(mask_keys[nm], PL_ST_NAME_MAX, "dropout.%d.embedding", s);
        pl_st_writer_add(w, mask_keys[nm++], "F32", 2, sh, ms + hidden_n + attn_n);
    }
    static char head_keys[STEPS][PL_ST_NAME_MAX];
    for (int s = 0; head_masks && s < STEPS; s++) {
        int64_t sh[2] = {head_rows, C};
        snprintf(head_keys[s], PL_ST_NAME_MAX, "head_dropout.%d", s);
        pl_st_writer_add(w, head_keys[s], "F32", 2, sh, head_masks + (int64_t)s * head_rows * C);
    }
    char meta[1024];
    snprintf(meta, sizeof meta,
             "{\"layers\": %d, \"hidden\": %d, \"heads\": %d, \"seq\": %d, \"batch\": %d, "
             "\"vocab\": %d, \"padded_vocab\": %lld, \"steps\": %d, \"beta1\": 0.9, \"beta2\": 0.95, "
             "\"eps\": 1e-8, \"weight_decay\": 0.1, \"clip_grad\": 0.05, \"precision\": \"%s\", "
             "\"loss_scale\": %g, \"family\": \"%s\", \"groups\": %lld, \"ffn\": %lld, "
             "\"rotary_base\": %g, \"rope_scaling\": %d, \"rope_original\": %lld, "
             "\"dropout\": %g, \"res_post_norm\": %d, \"head_dropout\": %g, \"post_ln\": %d}",
             L, C, NH, T, B, V, (long long)Vp, STEPS, bf16 ? "bf16" : fp16 ? "fp16" : "fp32", scale,
             llama ? "llama" : bert ? (task == PL_TASK_SEQUENCE ? "bert-sequence"
                                       : task == PL_TASK_TOKEN  ? "bert-token"
                                       : task == PL_TASK_SPAN   ? "bert-span"
                                       : task == PL_TASK_REGRESSION ? "bert-regression"
                                                                    : "bert") : "gpt",
             (long long)groups, (long long)cfg.ffn_hidden, cfg.rope.base,
             scaling, (long long)cfg.rope.original_max_positions, dropout, res_post, head_p, post_ln);
    pl_st_writer_meta(w, "config", meta);
    if ((st = pl_st_writer_finish(w, argv[1])))
        return fail(st);
    printf("wrote %s: loss %.6f, grad norms %.4f %.4f %.4f %.4f %.4f\n", argv[1], loss0, norms[0],
           norms[1], norms[2], norms[3], norms[4]);
    pl_free(masks);
    pl_free(head_masks);
    pl_free(bb);
    pl_model_free(&model);
    pl_gemm_free(gemm);
    return 0;
}
