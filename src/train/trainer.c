/* The training loop. One pl_trainer holds everything a rank needs; it is
 * built once (plan, allocate, touch), then the step loop allocates nothing. */
#include "train/trainer.h"
#include "train/trainer_internal.h"

#include "base/alloc.h"
#include "base/log.h"
#include "base/rng.h"
#include "data/blended.h"
#include "data/sampler.h"
#include "data/tokenizer/tokenizer.h"
#include "model/model.h"
#include "model/spec.h"
#include "optim/adamw.h"
#include "optim/schedule.h"
#include "parallel/dist.h"
#include "parallel/dp/buckets.h"
#include "parallel/grid.h"
#include "parallel/zero/zero.h"

#include <math.h>
#include <omp.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

/* ---- set-up ----------------------------------------------------------------- */

/* The highest GEMM rate of this process's threads (in the context's precision)
 * on a 1024^3 product; MFU's denominator is the best such rate cached
 * (train/peak.c), as on a machine shared with other work it reads low. The
 * operands live in scratch (scratch_floats of it) when it is large enough: the
 * model's activation block, free between steps, so that measuring adds nothing
 * to the peak memory the run reports. */
static pl_status measure_gemm_peak(pl_gemm *g, float *scratch, size_t scratch_floats,
                                   double *peak)
{
    const int64_t M = 1024, N = 1024, K = 1024;
    const size_t need = (size_t)(M * K + K * N + M * N);
    float *own = NULL, *a = scratch;
    if (scratch_floats < need) { /* (a failed allocation must not fall back on scratch) */
        own = a = pl_malloc(need * sizeof(float));
        if (!own)
            return pl_errorf(PL_ERR_NOMEM, "out of memory measuring the GEMM peak");
    }
    for (int64_t i = 0; i < M * K + K * N; i++)
        a[i] = (float)((i * 7919) % 97) * 0.01f;
    float *b = a + M * K, *c = b + K * N;
    pl_status st = PL_OK;
    double best = 0, start = pl_time_now();
    /* The best of many runs over at least 0.3 s (the first runs JIT-compile). */
    for (int rep = 0; !st && (rep < 12 || pl_time_now() - start < 0.3); rep++) {
        double t0 = pl_time_now();
        st = pl_gemm_run(g, 0, 1, M, N, K, a, K, b, K, 0.0f, c, N);
        double dt = pl_time_now() - t0;
        if (rep > 1 && dt > 0 && 2.0 * M * N * K / dt > best)
            best = 2.0 * M * N * K / dt;
    }
    pl_free(own);
    *peak = best;
    return st;
}

/* ---- ZeRO ---------------------------------------------------------------------- */

/* Per-rank memory of model state (floats), one block touched at set-up:
 *   stage 0: params n, grads n, Adam m and v n each                 (16 B/param)
 *   stage 1: params P, grads P (full: backward accumulates into it), m, v S each
 *   stage 2: params P; grads: the shard's reduced gradients S, plus scratch that
 *            lives only for one region: the embeddings + final norm (needed at both
 *            ends of backward), two layers' gradients (a layer's are reduce-scattered
 *            on the communication queue as soon as its backward ends, while the next
 *            layer's backward fills the other slot), and the reduced part of one
 *            region (the queue adds each into the shard before it runs the next);
 *            m, v S each (pipelined, the embeddings' and final norm's gradients
 *            accumulate over the step's micro-batches and are reduce-scattered once,
 *            straight into the shard: the reduced part is planned for a layer)
 *   stage 3: the shard's params S, grads S, m, v S each; working buffers: the
 *            embeddings + final norm, one layer's parameters (gathered before its
 *            forward and again before its backward) plus, with --zero3-prefetch, a
 *            second slot the next layer's gather lands in while this one computes,
 *            and the stage-2 gradient scratch
 * (P = n padded to a multiple of dp, S = P / dp.) Pipelined, each stage plans its own
 * flat buffer; the embeddings and the final norm exist only on the stages holding them. */
static pl_status setup_state(pl_trainer *t, const pl_model_stage *stage)
{
    pl_status st = PL_OK;
    const int64_t n = t->reg.numel;
    size_t bytes;
    if (t->zero_stage == 0) {
        if (pl_mul_size((size_t)n, 4 * sizeof(float), &bytes))
            return pl_errorf(PL_ERR_NOMEM, "model too large");
        t->mem = pl_malloc(bytes);
        if (!t->mem)
            return pl_errorf(PL_ERR_NOMEM, "cannot allocate %.1f MiB for parameters, gradients "
                             "and optimizer state", (double)bytes / (1 << 20));
        memset(t->mem, 0, bytes);
        t->params = t->mem;
        t->grads = t->params + n;
        t->exp_avg = t->grads + n;
        t->exp_avg_sq = t->exp_avg + n;
        pl_registry_init_values(&t->reg, t->params, (uint64_t)t->a->seed);
        t->state_bytes[0] = t->state_bytes[1] = (size_t)n * sizeof(float);
        t->state_bytes[2] = 2 * (size_t)n * sizeof(float);
        return PL_OK;
    }
    /* Regions (stages 2-3): the embeddings, each layer, the final norm with the output
     * layer: the units forward needs and backward finishes, each on the pipeline stage
     * that holds it (the first stage the embeddings, the last the final norm). On a
     * stage without the final norm the last layer's region takes the padding. */
    const pl_param *lnw = pl_model_final_norm(&t->reg, &t->cfg);
    const int regions = t->zero_stage >= 2;
    const int v = t->nchunks > 1 ? t->nchunks : 1; /* model chunks: their layers in turn */
    const int encpp = t->cfg.pp_split > 0 && t->grid.layout.pp > 1; /* t5, bart pipelined */
    const int64_t L = !regions ? 0 : encpp ? stage->nl
                      : t->cfg.dec_layers  ? t->cfg.num_layers + t->cfg.dec_layers
                                           : v * stage->nl; /* t5, bart: both stacks */
    /* pipelined t5 and bart: a stage's parameters before its first layer (the encoder's
     * final norm on its last stage, the decoder's embedding copies on its first) */
    int64_t before = 0;
    if (regions && encpp && (st = pl_train_encdec_layer_lo(t, 0, &before)))
        return st;
    t->zr_emb = regions && (stage->first || before > 0) ? 0 : -1;
    t->zr_l0 = t->zr_emb >= 0 ? 1 : 0;
    t->zr_tail = regions && lnw->offset >= 0 ? t->zr_l0 + (int)L : -1;
    int nst = 0;
    int64_t *starts = pl_malloc((size_t)(L + 2) * sizeof *starts);
    if (!starts)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    if (t->zr_emb >= 0)
        starts[nst++] = 0;
    for (int64_t l = 0; l < L; l++) {
        pl_block_weights tmp;
        int64_t lo, hi, c0 = stage->l0, cn;
        if (v > 1 && (st = pl_model_chunk_layers(&t->cfg, t->grid.layout.pp, t->grid.pp_rank,
                                                 (int)(l / stage->nl), &c0, &cn))) {
            pl_free(starts);
            return st;
        }
        st = t->cfg.dec_layers ? pl_train_encdec_layer_lo(t, l, &lo)
                               : pl_model_layer_bind(&t->reg, &t->cfg, NULL, c0 + l % stage->nl,
                                                     &tmp, &lo, &hi);
        if (st) {
            pl_free(starts);
            return st;
        }
        starts[nst++] = lo;
    }
    if (t->zr_tail >= 0)
        starts[nst++] = lnw->offset;
    st = pl_zero_init(&t->zero, pl_grid_comm(&t->grid, PL_GRID_DP), t->zero_stage, n, starts, nst);
    pl_free(starts);
    if (st)
        return st;
    pl_zero *z = &t->zero;
    const int64_t P = z->padded, S = z->shard;
    int64_t own_max = 0;
    if (regions) {
        t->nl_emb = t->zr_emb >= 0 ? z->regions[t->zr_emb].hi : 0;
        t->nl_count = t->nl_emb + (t->zr_tail >= 0 ? P - lnw->offset : 0);
        for (int64_t l = 0; l < L; l++) {
            const pl_zero_region *g = &z->regions[t->zr_l0 + l];
            t->work_count = g->hi - g->lo > t->work_count ? g->hi - g->lo : t->work_count;
        }
        /* the reduced part one region receives (pipelined, the embeddings' and final
         * norm's are reduced once per step, straight into the zeroed shard) */
        for (int i = 0; i < z->nregions; i++) {
            const int top = i == t->zr_emb || i == t->zr_tail;
            if (!(top && t->grid.layout.pp > 1) && z->regions[i].own_count > own_max)
                own_max = z->regions[i].own_count;
        }
    }
    /* floats of each buffer, in carving order */
    int64_t sz[10] = {0};
    float **dst[10] = {&t->params, &t->grads, &t->pshard, &t->gshard, &t->exp_avg,
                       &t->exp_avg_sq, &t->pnl, &t->pwork, &t->gnl, &t->gwork};
    sz[4] = sz[5] = S;
    if (t->zero_stage <= 2)
        sz[0] = P;
    if (t->zero_stage == 1)
        sz[1] = P;
    if (t->zero_stage >= 2) {
        sz[3] = S;
        sz[8] = t->nl_count;
        sz[9] = 2 * t->work_count;
    }
    if (t->zero_stage == 3) {
        sz[2] = S;
        sz[6] = t->nl_count;
        sz[7] = (t->a->zero3_prefetch ? 2 : 1) * t->work_count;
    }
    int64_t total = own_max + 16;
    for (int k = 0; k < 10; k++)
        total += (sz[k] + 15) / 16 * 16;
    if (pl_mul_size((size_t)total, sizeof(float), &bytes))
        return pl_errorf(PL_ERR_NOMEM, "model too large");
    t->mem = pl_malloc(bytes);
    if (!t->mem)
        return pl_errorf(PL_ERR_NOMEM, "cannot allocate %.1f MiB for ZeRO stage %d model state",
                         (double)bytes / (1 << 20), t->zero_stage);
    memset(t->mem, 0, bytes);
    float *p = t->mem;
    for (int k = 0; k < 10; k++) {
        *dst[k] = sz[k] ? p : NULL;
        p += (sz[k] + 15) / 16 * 16;
    }
    t->gtmp = own_max ? p : NULL;
    if (t->zero_stage == 3)
        pl_registry_init_range(&t->reg, z->lo, z->hi, t->pshard, (uint64_t)t->a->seed);
    else
        pl_registry_init_values(&t->reg, t->params, (uint64_t)t->a->seed);
    t->state_bytes[0] = (size_t)(sz[0] + sz[2]) * sizeof(float);
    t->state_bytes[1] = (size_t)(sz[1] + sz[3]) * sizeof(float);
    t->state_bytes[2] = (size_t)(sz[4] + sz[5]) * sizeof(float);
    t->work_bytes = (size_t)(sz[6] + sz[7] + sz[8] + sz[9] + own_max) * sizeof(float);
    return PL_OK;
}

/* --bf16 / --fp16: the GEMM context's mode and the loss scaler (static 1
 * unless --fp16; dynamic unless --loss-scale). docs/precision.md. */
static void setup_precision(pl_trainer *t)
{
    const pl_train_args *a = t->a;
    pl_gemm_set_precision(t->gemm, a->bf16 ? PL_GEMM_BF16 : a->fp16 ? PL_GEMM_FP16 : PL_GEMM_FP32);
    if (a->fp16 && !pl_train_args_given(a, "--loss-scale"))
        pl_loss_scaler_init_dynamic(&t->scaler, a->initial_loss_scale, a->min_loss_scale,
                                    a->loss_scale_window, a->hysteresis);
    else
        pl_loss_scaler_init_static(&t->scaler, a->fp16 ? a->loss_scale : 1.0);
}

/* grads *= 1 / scale (n elements): the fp16 loss scale comes off before the
 * norm, clipping and the optimizer. Inf and NaN stay what they are. */
static void unscale(float *g, int64_t n, double scale)
{
    const float inv = (float)(1.0 / scale);
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        g[i] *= inv;
}

pl_status pl_train_model_config(const pl_train_args *a, pl_model_config *c)
{
    const pl_family_spec *fam = pl_family_find(a->model);
    if (!fam)
        return pl_errorf(PL_ERR_ARG, "--model %s: expected one of %s", a->model, pl_family_names);
    memset(c, 0, sizeof *c);
    pl_family_apply(c, fam->family);
    if (a->normalization) {
        c->block.norm = strcmp(a->normalization, "RMSNorm") == 0 ? PL_NORM_RMSNORM
                                                                 : PL_NORM_LAYERNORM;
        c->block.norm_bias = c->block.norm == PL_NORM_LAYERNORM; /* Megatron's RMSNorm: no bias */
    }
    if (a->position_embedding_type)
        c->block.pos = strcmp(a->position_embedding_type, "rope") == 0 ? PL_POS_ROPE
                       : strcmp(a->position_embedding_type, "none") == 0 ? PL_POS_NONE
                                                                          : PL_POS_LEARNED;
    if (a->use_rotary_position_embeddings)
        c->block.pos = PL_POS_ROPE;
    if (a->swiglu)
        c->block.act = PL_ACT_SWIGLU;
    if (a->untie)
        c->untie = 1;
    if (a->disable_bias_linear)
        c->block.bias = 0;
    c->block.res_post_norm = a->res_post_norm;
    const pl_status bt = pl_train_block_type(a, c);
    if (bt)
        return bt;
    if (a->bert_no_binary_head && c->family != PL_FAMILY_BERT)
        return pl_errorf(PL_ERR_ARG, "--bert-no-binary-head is for --model bert");
    if (a->bert_no_binary_head) /* pretrain_bert.py: num_tokentypes = 2 if binary head else 0 */
        c->head.binary_head = c->head.tokentypes = 0;
    if (pl_train_args_given(a, "--hidden-dropout"))
        c->hidden_dropout = (float)a->hidden_dropout;
    if (pl_train_args_given(a, "--attention-dropout"))
        c->attention_dropout = (float)a->attention_dropout;
    c->num_layers = a->num_layers;
    c->hidden = a->hidden_size;
    c->heads = a->num_attention_heads;
    c->query_groups = a->group_query_attention ? a->num_query_groups : a->num_attention_heads;
    c->ffn_hidden = a->ffn_hidden_size;
    c->seq_length = a->seq_length;
    c->max_positions = a->max_position_embeddings;
    c->divisible_by = a->make_vocab_size_divisible_by;
    c->pp_first_layers = a->decoder_first_pipeline_num_layers;
    c->pp_chunks = a->pp_chunks;
    c->pp_last_layers = a->decoder_last_pipeline_num_layers;
    c->init_std = a->init_method_std;
    c->ln_eps = (float)a->layernorm_epsilon;
    c->rope = (pl_rope_config){a->rotary_base, a->rotary_percent, a->use_rope_scaling,
                               a->rope_scaling_factor, 1.0, 4.0, 8192};
    pl_status st = pl_train_t5_config(a, c);
    return st ? st : pl_train_encdec_config(a, c);
}

static pl_status setup_model(pl_trainer *t)
{
    const pl_train_args *a = t->a;
    pl_status st = PL_OK;
    int64_t vocab = a->vocab_size;
    if (a->tokenizer_type) {
        pl_tokenizer_spec ts = {a->tokenizer_type, a->vocab_file, a->merge_file,
                                a->tokenizer_model, a->vocab_extra_ids, a->legacy_tokenizer};
        PL_TRY(pl_tokenizer_open(&t->tok, &ts));
        if (pl_train_args_given(a, "--vocab-size") && a->vocab_size != t->tok->vocab_size)
            return pl_errorf(PL_ERR_ARG, "--vocab-size %lld differs from the tokenizer's %lld",
                             (long long)a->vocab_size, (long long)t->tok->vocab_size);
        vocab = t->tok->vocab_size;
    }
    pl_model_config *c = &t->cfg;
    PL_TRY(pl_train_model_config(a, c));
    if (t->ft) /* plait finetune: the task's head instead of the pretraining heads */
        pl_train_ft_apply_task(t, c);
    c->vocab_size = vocab;
    c->padded_vocab = pl_model_padded_vocab(vocab, c->divisible_by, t->grid.layout.tp);
    c->lm_logits = !strcmp(a->lm_head_logits, "keep")        ? PL_LM_LOGITS_KEEP
                   : !strcmp(a->lm_head_logits, "recompute") ? PL_LM_LOGITS_RECOMPUTE
                                                             : PL_LM_LOGITS_FUSED;
    c->sequence_parallel = a->sequence_parallel;
    if (a->recompute_granularity) /* validated in args.c */
        c->recompute = (pl_recompute){
            strcmp(a->recompute_granularity, "full") ? PL_RECOMPUTE_SELECTIVE : PL_RECOMPUTE_FULL,
            a->recompute_method && !strcmp(a->recompute_method, "block") ? PL_RECOMPUTE_BLOCK
                                                                         : PL_RECOMPUTE_UNIFORM,
            a->recompute_num_layers};
    /* fp32 parameters, gradients, Adam moments: 16 bytes a parameter; ZeRO-1/2 keep at
     * least the parameters whole, ZeRO-3 shards all four over DP */
    PL_TRY(pl_model_check_size(c, t->grid.layout.tp, t->grid.layout.pp,
                               t->zero_stage == 0 ? 16.0 : t->zero_stage < 3 ? 4.0
                                                                           : 16.0 / t->dp));
    pl_registry_init(&t->reg, t->grid.layout.tp, t->grid.tp_rank, t->grid.pp_rank);
    PL_TRY(pl_model_register(&t->reg, c, t->grid.layout.pp));
    pl_model_stage stage;
    PL_TRY(pl_train_setup_pipeline(t, &stage));
    PL_TRY(setup_state(t, &stage));
    PL_TRY(pl_gemm_init(&t->gemm));
    setup_precision(t);
    pl_model_config parts[2]; /* an encoder-decoder: t->model is the encoder (pipelined:
                               * the stack of this stage) */
    pl_model_encdec_parts(c, &parts[0], &parts[1]);
    int s0, ns;
    const int stack = c->pp_split > 0 && pl_model_encdec_stage_stack(c, t->grid.layout.pp,
                                                                      t->grid.pp_rank, &s0, &ns);
    if (parts[stack].recompute.num_layers > stage.nl) /* capped to the stage, as each stack is */
        parts[stack].recompute.num_layers = stage.nl;
    PL_TRY(pl_model_init(&t->model, pl_model_is_encdec(c) ? &parts[stack] : c, &t->reg, t->params,
                         t->grads, t->mbs, &stage, pl_grid_comm(&t->grid, PL_GRID_TP), t->gemm));
    t->model_up = 1;
    t->model.seed = (uint64_t)a->seed;
    if (a->tp_comm_overlap && t->grid.layout.tp > 1) {
        PL_TRY(pl_commq_init(&t->tpq, pl_commq_default_mode()));
        t->model.blk.tpq = t->tpq;
    }
    PL_TRY(pl_train_setup_chunks(t));
    if (t->zero_stage >= 2) {
        if (t->zero_stage == 3)
            for (int k = 0; k < t->nchunks; k++)
                PL_TRY(pl_model_rebind(pl_train_chunk(t, k), 0, pl_train_zero_locate, t));
        t->zchunk = pl_calloc((size_t)t->nchunks, sizeof *t->zchunk);
        if (!t->zchunk)
            return pl_errorf(PL_ERR_NOMEM, "out of memory");
        for (int k = 0; k < t->nchunks; k++) {
            pl_model *m = pl_train_chunk(t, k);
            PL_TRY(pl_model_rebind(m, 1, pl_train_zero_locate, t));
            t->zchunk[k] = (pl_zero_chunk){t, k * t->model.stage.nl, m->stage.nl};
            m->fetch = pl_train_zero_fetch;
            m->fetch_ctx = &t->zchunk[k];
        }
        t->zq_gather_layer[0] = t->zq_gather_layer[1] = -1;
        t->zq_slot_layer[0] = t->zq_slot_layer[1] = -1;
        PL_TRY(pl_commq_init(&t->zq, pl_commq_default_mode()));
    }
    PL_TRY(pl_train_encdec_setup(t)); /* the decoder (t5, bart) */
    /* DP buckets in backward order: final norm, layers L-1..0, embeddings (each
     * on the stage that holds it). */
    const pl_param *lnw = pl_model_final_norm(&t->reg, &t->cfg);
    const int has_lnf = lnw->offset >= 0; /* the last stage (its last chunk) */
    t->lnf_offset = has_lnf ? lnw->offset : -1;
    t->lnf_count = has_lnf ? t->reg.numel - lnw->offset : 0;
    /* pipelined t5 and bart: what precedes the layers on any stage (the encoder's
     * final norm on its last, the embeddings' copies on the decoder's first) */
    t->emb_count = stage.first || t->edpp ? t->model.layer_offset[0] : 0;
    if (t->zero_stage > 0)
        goto skip_buckets;
    int64_t *bounds = pl_malloc((size_t)(t->reg.n + 1) * sizeof *bounds);
    pl_dp_range *ranges = NULL;
    int nranges = 0;
    if (!bounds)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    int nb = 0;
    for (int i = 0; i < t->reg.n; i++)
        if (t->reg.params[i].offset >= 0)
            bounds[nb++] = t->reg.params[i].offset;
    st = pl_dp_buckets_split(t->reg.numel, bounds, nb, a->ddp_bucket_size, &ranges, &nranges);
    pl_free(bounds);
    if (!st)
        st = pl_dp_buckets_init(&t->buckets, pl_grid_comm(&t->grid, PL_GRID_DP), t->grads,
                                t->reg.numel, ranges, nranges);
    pl_free(ranges);
    if (st)
        return st;
skip_buckets:
    t->sample = pl_malloc((size_t)(c->seq_length + 1) * sizeof *t->sample);
    t->batch_idx = pl_malloc((size_t)t->mbs * sizeof *t->batch_idx);
    if (!t->sample || !t->batch_idx)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    t->flops_per_token = pl_model_flops_per_token(c);
    /* A forward and backward on a dummy micro-batch: every GEMM primitive of
     * the step is created and every buffer touched now, not in the loop. */
    memset(t->model.dloss, 0, (size_t)t->model.N * sizeof(float));
    PL_TRY(pl_model_forward(&t->model));
    if (t->gnl)
        memset(t->gnl, 0, (size_t)t->nl_count * sizeof(float));
    PL_TRY(pl_model_backward(&t->model, NULL, NULL));
    if (t->grads)
        memset(t->grads, 0, (size_t)(t->zero_stage ? t->zero.padded : t->reg.numel) * sizeof(float));
    double measured = 0;
    if (!pl_train_peak_preset(&measured))
        PL_TRY(measure_gemm_peak(t->gemm, t->model.act_mem, t->model.act_floats, &measured));
    PL_TRY(pl_train_peak_init(t, measured));
    if (t->a->async_save && t->a->save) /* the snapshot's memory, faulted in before step 1 */
        PL_TRY(pl_train_async_prepare(t));
fail:
    return st;
}

static pl_status setup_schedule(pl_trainer *t)
{
    const pl_train_args *a = t->a;
    pl_lr_schedule *s = &t->sched;
    memset(s, 0, sizeof *s);
    s->max_lr = a->lr;
    s->min_lr = a->min_lr;
    s->init_lr = a->lr_warmup_init;
    s->style = (pl_lr_style)pl_lr_style_parse(a->lr_decay_style);
    if (a->ds_sched.style) { /* a DeepSpeed config's scheduler, in optimizer steps */
        const double ratio = a->ds_sched.style == PL_LR_DS_WARMUP_COSINE_LOG ||
                                     a->ds_sched.style == PL_LR_DS_WARMUP_COSINE_LINEAR
                                 ? a->lr /* WarmupCosineLR: ratios of the optimizer's lr */
                                 : 1.0;
        s->style = (pl_lr_style)a->ds_sched.style;
        s->init_lr = a->ds_sched.init_lr * ratio;
        s->max_lr = a->ds_sched.max_lr * ratio;
        s->min_lr = a->ds_sched.min_lr * ratio;
        s->step_samples = t->gbs;
        s->warmup_steps = a->ds_sched.warmup * t->gbs;
        s->decay_steps = a->ds_sched.total * t->gbs;
        s->decay_lr_rate = a->ds_sched.decay_lr_rate;
        s->decay_mom_rate = a->ds_sched.decay_mom_rate;
        s->min_mom = a->ds_sched.min_mom;
        s->max_mom = a->ds_sched.max_mom;
        s->decay_step_size = a->ds_sched.decay_step_size;
        s->cycle_momentum = a->ds_sched.cycle_momentum;
        s->range_step_rate = a->ds_sched.step_rate;
        s->range_staircase = a->ds_sched.staircase;
        return PL_OK;
    }
    if (pl_train_args_given(a, "--train-iters")) {
        int64_t decay_iters = pl_train_args_given(a, "--lr-decay-iters") ? a->lr_decay_iters
                                                                         : a->train_iters;
        s->decay_steps = decay_iters * t->gbs;
        s->warmup_steps = pl_train_args_given(a, "--lr-warmup-fraction")
                              ? (int64_t)(a->lr_warmup_fraction * (double)s->decay_steps)
                              : a->lr_warmup_iters * t->gbs;
    } else {
        s->decay_steps = pl_train_args_given(a, "--lr-decay-samples") ? a->lr_decay_samples
                                                                      : a->train_samples;
        s->warmup_steps = pl_train_args_given(a, "--lr-warmup-fraction")
                              ? (int64_t)(a->lr_warmup_fraction * (double)s->decay_steps)
                              : a->lr_warmup_samples;
    }
    /* the flags were checked (args.c validate_schedule); this is the same rule in samples */
    if (s->decay_steps <= 0 || s->warmup_steps >= s->decay_steps)
        return pl_errorf(PL_ERR_ARG, "the warmup (%lld samples) must be shorter than the decay "
                         "(%lld samples), which must be positive", (long long)s->warmup_steps,
                         (long long)s->decay_steps);
    return PL_OK;
}

static pl_status setup_data(pl_trainer *t)
{
    const pl_train_args *a = t->a;
    if (a->mock_data)
        return PL_OK;
    pl_sample_request req = {pl_train_args_given(a, "--train-iters") ? a->train_iters : 0,
                             pl_train_args_given(a, "--train-samples") ? a->train_samples : 0,
                             t->gbs, a->eval_interval, a->eval_iters};
    int64_t sizes[PL_N_SPLITS];
    pl_status st = pl_gpt_num_samples(&req, sizes);
    if (st)
        return st;
    if (t->cfg.family == PL_FAMILY_BERT || t->ed) {
        PL_TRY(t->ed ? pl_train_encdec_data_setup(t, sizes) : pl_train_bert_data_setup(t, sizes));
        goto check_len;
    }
    pl_blend_spec spec;
    if ((st = pl_blend_spec_parse(&spec, a->data_path.items, a->data_path.n)))
        return st;
    pl_blend_config bc;
    memset(&bc, 0, sizeof bc);
    pl_gpt_dataset_config_defaults(&bc.gpt);
    bc.gpt.seq_length = t->cfg.seq_length;
    bc.gpt.seed = (uint32_t)a->seed;
    bc.gpt.split = a->split;
    bc.gpt.cache_dir = a->data_cache_path;
    bc.mid_level_dataset_surplus = 0.005;
    st = pl_split_parse(a->split, &bc.gpt.split_matrix);
    /* Rank 0 builds (and caches) the indices; the others then load them. */
    pl_comm *world = pl_grid_comm(&t->grid, PL_GRID_WORLD);
    for (int pass = 0; pass < 2 && !st; pass++) {
        if ((pass == 0) == pl_train_is_root(t)) {
            st = pl_blend_build(&t->data, &spec, &bc, sizes);
            t->data_up = st == PL_OK;
        }
        int32_t bad = st != PL_OK ? world->rank + 1 : 0; /* the failing rank, + 1 */
        pl_status cst = pl_comm_allreduce_i32(world, &bad, 1, PL_COMM_MAX);
        if (!st && cst)
            st = cst;
        if (!st && bad)
            st = pl_error_echo(PL_ERR_IO, bad - 1, "building the dataset indices failed on rank %d",
                               bad - 1);
    }
    pl_blend_spec_free(&spec);
    if (st)
        return st;
check_len:
    if (pl_train_data_len(t, PL_SPLIT_TRAIN) < t->train_samples)
        return pl_errorf(PL_ERR_ARG, "the training split holds %lld samples, %lld are needed",
                         (long long)pl_train_data_len(t, PL_SPLIT_TRAIN),
                         (long long)t->train_samples);
    return PL_OK;
fail:
    return st;
}

int64_t pl_train_data_len(const pl_trainer *t, pl_split s)
{
    return t->ed     ? pl_train_encdec_data_len(t, s)
           : t->bert ? pl_train_bert_data_len(t, s)
                     : pl_blend_data_len(&t->data, s);
}

/* ---- one iteration (a micro-batch's data: batch.c) ------------------------------ */

pl_status pl_train_grad_ready(void *ctx, int64_t offset, int64_t count)
{
    pl_trainer *t = ctx;
    /* The final norm's gradients are final before the last layer's backward starts:
     * marked with that layer, so the first bucket (which holds them) need not wait
     * for the end. */
    const pl_model *head = pl_train_head(t);
    if (t->lnf_offset >= 0 && !t->pp_tied && offset == head->layer_offset[head->stage.nl - 1]) {
        pl_status st = pl_dp_buckets_ready(t->buckets, t->lnf_offset, t->lnf_count);
        if (st)
            return st;
    }
    return pl_dp_buckets_ready(t->buckets, offset, count);
}


/* The squared gradient norm of the model-parallel slice this rank's DP group
 * holds, from its n gradients at flat offset lo (all of them, or a ZeRO shard):
 * with TP, the sum over the TP group, tensors replicated over TP counted once. */
pl_status pl_train_grad_sumsq(pl_trainer *t, const float *g, int64_t lo, int64_t n, double *out)
{
    /* the model-parallel group: TP, or TP x PP when pipelined (each stage its layers) */
    pl_comm *mp = pl_grid_comm(&t->grid, t->grid.layout.pp > 1 ? PL_GRID_MP : PL_GRID_TP);
    if (mp->size == 1) {
        *out = pl_cpu_sumsq(g, n);
        return PL_OK;
    }
    *out = pl_grad_sumsq_range(&t->reg, lo, lo + n, g);
    return pl_comm_allreduce_f64(mp, out, 1, PL_COMM_SUM);
}

static pl_status train_step(pl_trainer *t, pl_sampler *sampler, step_result *r)
{
    pl_status st = PL_OK;
    pl_model *m = &t->model;
    pl_comm *dpc = pl_grid_comm(&t->grid, PL_GRID_DP), *tpc = pl_grid_comm(&t->grid, PL_GRID_TP);
    pl_comm_stats before = dpc->stats, before_tp = tpc->stats;
    if (t->grads)
        memset(t->grads, 0, (size_t)(t->zero_stage ? t->zero.padded : t->reg.numel) * sizeof(float));
    if (t->gshard)
        memset(t->gshard, 0, (size_t)t->zero.shard * sizeof(float));
    memset(&t->comm_step, 0, sizeof t->comm_step);
    memset(&t->zq_overlap, 0, sizeof t->zq_overlap);
    t->zq_compute_end = INFINITY; /* queued work waited for now ran beside compute */
    if (t->zero_stage >= 2)
        PL_TRY(pl_train_zero_begin(t));
    /* d objective / d loss of each micro-batch, times the fp16 loss scale */
    double scale = 1.0 / (double)t->num_micro, loss_sum[2] = {0, 0}, ls = t->scaler.scale;
    pl_comm *ppc = pl_grid_comm(&t->grid, PL_GRID_PP);
    pl_comm_stats before_pp = ppc->stats;
    if (t->grid.layout.pp > 1)
        PL_TRY(pl_train_run_pipeline(t, sampler, scale, ls, loss_sum));
    for (int64_t k = 0; t->grid.layout.pp == 1 && k < t->num_micro; k++) {
        if (!pl_sampler_next(sampler, t->batch_idx))
            return pl_errorf(PL_ERR_INTERNAL, "the training data ran out at iteration %lld",
                             (long long)t->iteration);
        int64_t n_loss;
        double t0 = pl_time_now();
        PL_TRY(pl_train_load_micro_batch(t, PL_SPLIT_TRAIN, t->batch_idx, scale * ls, &n_loss));
        double t1 = pl_time_now();
        m->training = 1;
        m->iteration = t->iteration;
        if (t->zero_stage >= 2)
            PL_TRY(pl_train_zero_forward_begin(t));
        PL_TRY(pl_train_forward(t, m));
        double mb_loss[2];
        pl_train_micro_batch_losses(pl_train_head(t), scale * ls, mb_loss);
        loss_sum[0] += mb_loss[0] * scale, loss_sum[1] += mb_loss[1] * scale;
        int last = k == t->num_micro - 1;
        if (t->zero_stage >= 2) {
            /* every micro-batch's gradients go to their owners as backward makes them */
            PL_TRY(pl_train_zero_backward(t, last));
        } else if (t->zero_stage == 1) {
            PL_TRY(pl_train_backward(t, m, NULL, NULL));
        } else {
            PL_TRY(pl_train_backward(t, m, last ? pl_train_grad_ready : NULL, t));
            if (last) { /* the embeddings are final now (and, with no layers, the norm) */
                if (t->cfg.num_layers == 0)
                    PL_TRY(pl_dp_buckets_ready(t->buckets, t->lnf_offset, t->lnf_count));
                PL_TRY(pl_dp_buckets_ready(t->buckets, 0, t->emb_count));
            }
        }
        t->prof.data += t1 - t0;
        t->prof.compute += pl_time_now() - t1;
    }
    double tc = pl_time_now();
    if (t->zero_stage == 0)
        PL_TRY(pl_dp_buckets_finish(t->buckets));
    else if (t->zero_stage == 1)
        PL_TRY(pl_zero_reduce_scatter_all(&t->zero, t->grads));
    t->prof.comm += pl_time_now() - tc;
    pl_train_comm_step_done(t);
    /* The reduced gradient this rank holds: all of it, or (ZeRO) its shard. */
    float *held = t->zero_stage >= 2 ? t->gshard : t->grads;
    int64_t held_n = t->zero_stage == 0 ? t->reg.numel : t->zero.shard;
    if (ls != 1.0)
        unscale(held, held_n, ls);
    if (t->fault_nan_iter == t->iteration + 1 && t->fault_nan_rank == t->grid.rank)
        held[0] = NAN; /* fault injection (tests): one rank's gradient goes bad */
    double ts = pl_time_now(), sumsq;
    PL_TRY(pl_train_grad_sumsq(t, held, t->zero_stage ? t->zero.lo : 0, held_n, &sumsq));
    if (t->a->log_num_zeros_in_grad)
        PL_TRY(pl_train_count_zeros(t, held, t->zero_stage ? t->zero.lo : 0, held_n,
                                    &r->num_zeros));
    t->prof.optim += pl_time_now() - ts;
    /* Loss for the log (the mean over micro-batches and DP ranks) and, in the
     * same all-reduce, whether any rank saw a non-finite loss or gradient, so
     * that every rank skips the same step. */
    double agg[3] = {loss_sum[0] / (double)t->dp,
                     isfinite(loss_sum[0] + loss_sum[1]) && isfinite(sumsq) ? 0.0 : 1.0,
                     loss_sum[1] / (double)t->dp};
    tc = pl_time_now();
    /* Over the DP group: the TP ranks of a DP rank already agree (the loss is
     * whole on each, and sumsq was summed over TP), so every rank decides alike. */
    const int nagg = t->cfg.head.binary_head ? 3 : 2; /* the binary head's loss too */
    PL_TRY(pl_comm_allreduce_f64(dpc, agg, nagg, PL_COMM_SUM));
    /* Pipelined: the loss is the last stage's; the flag (from sumsq, summed over
     * TP x PP) already agrees. One sum over the stages gives both to every rank. */
    if (t->grid.layout.pp > 1)
        PL_TRY(pl_comm_allreduce_f64(ppc, agg, nagg, PL_COMM_SUM));
    t->prof.comm += pl_time_now() - tc;
    double lr = pl_lr_schedule_lr(&t->sched);
    /* Never train on (or save) garbage: a learning rate or loss scale that is not
     * a finite number stops the run (the same decision on every rank: both are
     * computed alike everywhere). */
    if (!isfinite(lr) || lr < 0 || !isfinite(ls) || !(ls > 0))
        return pl_errorf(PL_ERR_STOPPED, "iteration %lld: the %s is %g; stopping (the "
                         "schedule or loss-scale settings produce no usable value here)",
                         (long long)t->iteration + 1,
                         !isfinite(lr) || lr < 0 ? "learning rate" : "loss scale",
                         !isfinite(lr) || lr < 0 ? lr : ls);
    t->iteration++;
    t->consumed_train += t->gbs;
    r->loss = agg[0];
    r->sop_loss = nagg == 3 ? agg[2] : NAN;
    r->lr = lr;
    r->skipped = agg[1] > 0;
    r->loss_scale = ls;
    pl_loss_scaler_update(&t->scaler, r->skipped); /* only a dynamic fp16 scaler moves */
    if (r->skipped) {
        /* Megatron: a skipped iteration consumes its data but moves neither the
         * optimizer nor the schedule. An fp16 overflow that the dynamic scaler
         * can still back off from is routine, not counted as "in a row". */
        r->grad_norm = NAN;
        t->skipped_total++;
        int routine = t->scaler.dynamic && ls > t->scaler.min_scale;
        t->skipped_in_row += !routine;
        if (pl_train_is_root(t) && routine)
            pl_log_warn("iteration %lld skipped: gradient overflow at loss scale %.17g, now %.17g",
                        (long long)t->iteration, ls, t->scaler.scale);
        else if (pl_train_is_root(t))
            pl_log_warn("iteration %lld skipped: non-finite loss or gradient (%lld in a row)",
                        (long long)t->iteration, (long long)t->skipped_in_row);
        if (t->skipped_in_row > t->a->max_skipped_steps)
            return pl_errorf(PL_ERR_STOPPED, "%lld consecutive iterations had a non-finite loss or "
                             "gradient (--max-skipped-steps %lld): stopping at iteration %lld",
                             (long long)t->skipped_in_row, (long long)t->a->max_skipped_steps,
                             (long long)t->iteration);
        goto stats;
    }
    t->skipped_in_row = 0;
    pl_adamw_hparams hp = {t->a->adam_beta1, t->a->adam_beta2, t->a->adam_eps,
                           t->a->weight_decay, t->a->clip_grad};
    if (pl_lr_schedule_betas(&t->sched, &hp.beta1, &hp.beta2) && !(hp.beta1 >= 0 && hp.beta1 < 1))
        return pl_errorf(PL_ERR_STOPPED, "iteration %lld: OneCycle's momentum decay "
                         "(decay_mom_rate) took Adam's beta1 to %g, outside [0, 1)",
                         (long long)t->iteration, hp.beta1);
    t->opt_steps++;
    double to = pl_time_now();
    PL_TRY(pl_train_optimizer_step(t, &hp, lr, sumsq, &r->grad_norm));
    t->prof.optim += pl_time_now() - to;
    pl_lr_schedule_step(&t->sched, t->gbs);
stats:
    pl_comm_stats_sub(&t->step_comm, &dpc->stats, &before);
    pl_comm_stats_sub(&t->step_tp_comm, &tpc->stats, &before_tp);
    pl_comm_stats_sub(&t->step_pp_comm, &ppc->stats, &before_pp);
    pl_comm_stats_add(&t->tp_total, &t->step_tp_comm);
    /* Ring collectives load ranks unevenly per region; the sum over ranks is exact.
     * Overlap is summed too: a rank that lags sees its collectives complete early
     * while the other (which waited) sees none. */
    int64_t sums[4];
    for (int k = 0; k < 3; k++)
        sums[k] = t->step_comm.kind[k].wire_bytes;
    sums[3] = t->comm_step.early;
    PL_TRY(pl_comm_allreduce_i64(dpc, sums, 4, PL_COMM_SUM));
    memcpy(t->wire_sum, sums, sizeof t->wire_sum);
    t->early_all_ranks = sums[3];
    if (t->pp_dp_wire) { /* every stage's, to rank 0's model-parallel group */
        const int P = t->grid.layout.pp;
        memset(t->pp_dp_wire, 0, 3 * (size_t)P * sizeof *t->pp_dp_wire);
        if (t->grid.tp_rank == 0)
            memcpy(t->pp_dp_wire + 3 * t->grid.pp_rank, sums, 3 * sizeof *sums);
        PL_TRY(pl_comm_allreduce_i64(pl_grid_comm(&t->grid, PL_GRID_MP), t->pp_dp_wire, 3 * P,
                                     PL_COMM_SUM));
    }
fail:
    return st;
}

/* The mean loss of --eval-iters global batches of split from sample *consumed on
 * (advanced past them); NaN when the split holds none. */
static pl_status evaluate(pl_trainer *t, pl_split split, int64_t *consumed, double *out)
{
    pl_status st = PL_OK;
    int64_t len = t->a->mock_data ? INT64_MAX / 4 : pl_train_data_len(t, split);
    double sum = 0;
    int64_t batches = 0;
    pl_sampler s;
    if (t->zero_stage >= 2)
        PL_TRY(pl_train_zero_begin(t)); /* pipelined stage 3: this step's parameters */
    for (int64_t it = 0; it < t->a->eval_iters; it++) {
        if (*consumed + t->gbs > len)
            break;
        PL_TRY(pl_sampler_init(&s, len, *consumed, t->mbs, t->grid.dp_rank, t->dp));
        for (int64_t k = 0; k < t->num_micro; k++) {
            if (!pl_sampler_next(&s, t->batch_idx))
                break;
            int64_t n_loss;
            pl_model_use(&t->model, 0);
            PL_TRY(pl_train_load_micro_batch(t, split, t->batch_idx, 1.0, &n_loss));
            /* pipelined: forward only, each virtual stage's output passed to the next
             * (chunk c of the last rank feeds chunk c + 1 of the first) */
            for (int c = 0; c < t->nchunks; c++) {
                pl_model *m = pl_train_chunk(t, c);
                const int tag = (int)(k * t->nchunks + c);
                pl_model_use(m, 0);
                if (c > 0)
                    pl_train_copy_batch(&t->model, m);
                m->training = 0; /* Megatron evaluates in eval mode: no dropout */
                PL_TRY(pl_train_pp_eval_forward(t, m, tag));
                if (m->stage.last && pl_train_loss_stage(pl_train_head(t))) {
                    double mb_loss[2];
                    pl_train_micro_batch_losses(pl_train_head(t), 1.0, mb_loss);
                    sum += mb_loss[0];
                    batches++;
                }
            }
        }
        *consumed += t->gbs;
    }
    double agg[2] = {sum, (double)batches};
    PL_TRY(pl_comm_allreduce_f64(pl_grid_comm(&t->grid, PL_GRID_DP), agg, 2, PL_COMM_SUM));
    if (t->grid.layout.pp > 1) /* the last stage's sums to every stage */
        PL_TRY(pl_comm_allreduce_f64(pl_grid_comm(&t->grid, PL_GRID_PP), agg, 2, PL_COMM_SUM));
    *out = agg[1] > 0 ? agg[0] / agg[1] : NAN;
fail:
    return st;
}

/* After training (or instead of it, --skip-train), as Megatron's pretrain: the
 * validation and the test split once each, when --eval-iters > 0 and the split
 * holds samples; the test split from its first sample, as Megatron's loader. */
static pl_status final_evaluations(pl_trainer *t)
{
    static const struct {
        pl_split split;
        const char *name;
    } sets[2] = {{PL_SPLIT_VALID, "validation"}, {PL_SPLIT_TEST, "test"}};
    pl_status st = PL_OK;
    int64_t test_consumed = 0;
    for (int i = 0; i < 2 && t->a->eval_iters > 0; i++) {
        if (!t->a->mock_data && pl_train_data_len(t, sets[i].split) < t->gbs)
            continue;
        double loss;
        PL_TRY(evaluate(t, sets[i].split, i == 0 ? &t->consumed_valid : &test_consumed, &loss));
        PL_TRY(pl_train_log_eval_final(t, sets[i].name, loss));
    }
fail:
    return st;
}

/* ---- the run ----------------------------------------------------------------- */

static void trainer_free(pl_trainer *t)
{
    pl_train_async_free(t); /* first: a writer still running reads the registry */
    if (t->metrics)
        fclose(t->metrics);
    (void)pl_tfevents_close(&t->tb); /* after a failure: its error already reported */
    pl_free(t->sample);
    pl_free(t->batch_idx);
    pl_dp_buckets_free(t->buckets);
    pl_commq_free(t->zq);
    pl_commq_free(t->tpq);
    pl_pp_schedule_free(&t->pp);
    pl_free(t->pp_send_act);
    pl_free(t->pp_send_grad);
    pl_free(t->pp_dp_wire);
    pl_zero_free(&t->zero);
    pl_train_optimizer_free(t);
    pl_train_free_chunks(t);
    pl_train_encdec_free(t);
    pl_free(t->zchunk);
    if (t->model_up)
        pl_model_free(&t->model);
    pl_gemm_free(t->gemm);
    if (t->data_up)
        pl_blend_data_free(&t->data);
    pl_train_bert_data_free(t);
    pl_free(t->mem);
    pl_registry_free(&t->reg);
    pl_tokenizer_free(t->tok);
    if (t->grid_up)
        pl_grid_free(&t->grid);
}

pl_status pl_train_setup_grid(pl_trainer *t)
{
    const pl_train_args *a = t->a;
    pl_status st = PL_OK;
    t->start_time = pl_time_now();
    PL_TRY(pl_grid_init(&t->grid, MPI_COMM_WORLD, (int)a->tensor_model_parallel_size,
                        (int)a->pipeline_model_parallel_size));
    t->grid_up = 1;
    t->dp = t->grid.layout.dp;
    t->zero_stage = (int)a->zero_stage;
    PL_TRY(pl_train_args_batch(a, t->dp, &t->mbs, &t->gbs));
    t->num_micro = t->gbs / (t->mbs * t->dp);
fail:
    return st;
}

static pl_status run(pl_trainer *t)
{
    const pl_train_args *a = t->a;
    pl_status st = PL_OK;
    PL_TRY(pl_train_setup_grid(t));
    t->train_iters = pl_train_args_given(a, "--train-iters") ? a->train_iters
                                                             : a->train_samples / t->gbs;
    t->train_samples = pl_train_args_given(a, "--train-iters") ? a->train_iters * t->gbs
                                                               : a->train_samples;
    PL_TRY(setup_model(t));
    PL_TRY(pl_train_optimizer_init(t));
    PL_TRY(setup_schedule(t));
    PL_TRY(setup_data(t));
    if (a->load)
        PL_TRY(pl_train_load(t));
    PL_TRY(pl_train_open_metrics(t));
    PL_TRY(pl_train_tb_open(t));
    if (pl_train_is_root(t)) {
        for (const char *p = a->notes; p && *p;) { /* one line per legacy flag or DeepSpeed key */
            const char *nl = strchr(p, '\n');
            pl_log_info("note: %.*s", (int)(nl - p), p);
            p = nl + 1;
        }
        pl_train_print_banner(t);
        pl_train_print_memory_plan(t);
    }
    pl_sampler sampler;
    int64_t total = a->mock_data ? t->train_samples : pl_train_data_len(t, PL_SPLIT_TRAIN);
    if (t->iteration < t->train_iters)
        PL_TRY(pl_sampler_init(&sampler, total, t->consumed_train, t->mbs, t->grid.dp_rank, t->dp));
    int do_valid = a->eval_iters > 0 &&
                   (a->mock_data || pl_train_data_len(t, PL_SPLIT_VALID) > 0);
    int64_t last_saved = -1, window = 0;
    double t_window = pl_time_now();
    if (a->exit_signal_handler)
        pl_train_exit_signals_install();
    const char *fault = getenv("PLAIT_FAULT_NAN_ITER");
    t->fault_nan_iter = fault ? atoll(fault) : -1;
    fault = getenv("PLAIT_FAULT_NAN_RANK");
    t->fault_nan_rank = fault ? atoll(fault) : 0;
    int64_t first_iter = t->iteration;
    int exited = 0; /* --exit-interval, a signal, --exit-duration-in-mins: Megatron exits */
    if (a->skip_train) { /* Megatron: evaluate the loaded model, validation from sample 0 */
        if (pl_train_is_root(t))
            pl_log_info("skipping training (--skip-train is on) ...");
        t->consumed_valid = 0;
    }
    while (t->iteration < t->train_iters && !a->skip_train) {
        step_result r = {0};
        if (t->iteration - first_iter == PL_BENCH_WARMUP)
            pl_train_bench_reset(t);
        double t0 = pl_time_now();
        PL_TRY(train_step(t, &sampler, &r));
        t->prof.total += pl_time_now() - t0;
        pl_train_progress_step(t, &r, pl_time_now() - t0);
        t->prof.steps++;
        window++;
        PL_TRY(pl_train_tb_iteration(t, &r));
        PL_TRY(pl_train_async_poll(t, 0));
        if (t->iteration % a->log_interval == 0 || t->iteration == t->train_iters) {
            double now = pl_time_now();
            PL_TRY(pl_train_log_iteration(t, &r, (now - t_window) * 1e3, window));
            PL_TRY(pl_train_tb_window(t, (now - t_window) / (double)window));
            window = 0;
            t_window = now;
        }
        /* evaluations and saves are left out of the window's time (its iterations stay
         * counted: the window goes on past them when --log-interval does not divide) */
        const double t_aside = pl_time_now();
        if (do_valid && t->iteration % a->eval_interval == 0) {
            double vl;
            PL_TRY(evaluate(t, PL_SPLIT_VALID, &t->consumed_valid, &vl));
            PL_TRY(pl_train_log_eval(t, vl));
            PL_TRY(pl_train_tb_eval(t, vl));
        }
        if (a->save && pl_train_args_given(a, "--save-interval") &&
            t->iteration % a->save_interval == 0) {
            PL_TRY(pl_train_save(t));
            last_saved = t->iteration;
        }
        t_window += pl_time_now() - t_aside;
        if (pl_train_args_given(a, "--exit-interval") && t->iteration % a->exit_interval == 0) {
            exited = 1;
            break;
        }
        PL_TRY(pl_train_should_stop(t, &exited));
        if (exited)
            break;
    }
    PL_TRY(pl_train_log_peak_memory(t));
    if (a->save && last_saved != t->iteration && !a->skip_train)
        PL_TRY(pl_train_save(t));
    PL_TRY(pl_train_async_poll(t, 1)); /* the last checkpoint is published before going on */
    if (!exited)
        PL_TRY(final_evaluations(t));
    PL_TRY(pl_train_tb_close(t));
    if (a->bench && t->grid.layout.pp > 1 && t->prof.steps > 0)
        PL_TRY(pl_train_pp_simulate(t));
    if (a->bench && pl_train_is_root(t))
        pl_train_bench_report(t);
fail:
    return st;
}

pl_status pl_train_run(const pl_train_args *args, pl_dist *dist)
{
    pl_trainer t;
    memset(&t, 0, sizeof t);
    t.a = args;
    t.dist = *dist;
    pl_status st = run(&t);
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", pl_error_msg());
    const int echo = pl_error_echo_of();
    trainer_free(&t);
    if (st)
        pl_error_echo(st, echo, "%s", keep);
    return st;
}

/* plait finetune (train/finetune.c) runs its own loop on these parts of the trainer. */
pl_status pl_train_setup_model(pl_trainer *t) { return setup_model(t); }
pl_status pl_train_setup_schedule(pl_trainer *t) { return setup_schedule(t); }
pl_status pl_train_step(pl_trainer *t, pl_sampler *sampler, step_result *r)
{
    return train_step(t, sampler, r);
}
void pl_train_free(pl_trainer *t) { trainer_free(t); }
