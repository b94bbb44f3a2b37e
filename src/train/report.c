/* Reporting for `plait train` and `plait bench`: the start-up banner, the
 * memory plan, progress lines and JSON-lines metrics, peak memory, and the step
 * breakdown of plait bench. */
#include "train/trainer_internal.h"

#include "base/fileio.h"
#include "base/log.h"
#include "model/spec.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* ---- reporting -------------------------------------------------------------- */

size_t pl_train_act_bytes(const pl_trainer *t, int kept)
{
    size_t n = 0;
    for (int k = 0; k < (t->nchunks > 1 ? t->nchunks : 1); k++) {
        const pl_model *m = k ? &t->chunk_more[k - 1] : &t->model;
        n += kept ? pl_model_activation_bytes_kept(m) : pl_model_activation_bytes(m);
    }
    if (t->ed && !t->edpp) { /* an encoder-decoder's decoder */
        const pl_model *m = pl_train_head((pl_trainer *)t);
        n += kept ? pl_model_activation_bytes_kept(m) : pl_model_activation_bytes(m);
    }
    n += pl_train_encdec_pp_bytes(t); /* pipelined: the encoder output's slots */
    return n;
}

void pl_train_print_memory_plan(const pl_trainer *t)
{
    const double MiB = 1 << 20;
    double act = (double)pl_train_act_bytes(t, 0);
    double p = (double)t->state_bytes[0], g = (double)t->state_bytes[1];
    double o = (double)t->state_bytes[2], w = (double)t->work_bytes;
    double cv = (double)pl_gemm_convert_bytes(t->gemm); /* bf16/fp16 GEMM operands */
    double sw = (double)pl_gemm_swap_bytes(t->gemm);    /* fp32 products made transposed */
    pl_zero_bytes f = pl_zero_model_bytes(t->zero_stage, t->reg.numel, (int)t->dp);
    static const char *const formula[4] = {"16 B/param", "4 + 4 + 8/dp B/param",
                                           "4 + (4 + 8)/dp B/param", "16/dp B/param"};
    pl_log_info("memory plan (per rank, ZeRO stage %d, dp %lld): parameters %.3f MiB, gradients "
                "%.3f MiB, optimizer (%s m, v) %.3f MiB, ZeRO working buffers %.3f MiB, "
                "activations and scratch %.1f MiB, %s GEMM operands %.1f MiB, GEMM products "
                "made transposed %.1f MiB, total %.1f MiB",
                t->zero_stage, (long long)t->dp, p / MiB, g / MiB, t->a->lamb.on ? "Lamb" : "Adam",
                o / MiB, w / MiB, act / MiB,
                pl_gemm_precision_name(pl_gemm_get_precision(t->gemm)), cv / MiB, sw / MiB,
                (p + g + o + w + act + cv + sw) / MiB);
    pl_log_info("model state (ZeRO formula %s): %.3f MiB planned, %.3f MiB by the formula "
                "(the difference is padding to a multiple of dp)",
                formula[t->zero_stage], (p + g + o) / MiB, (f.params + f.grads + f.optim) / MiB);
    char rc[64];
    double kept = (double)pl_train_act_bytes(t, 1);
    pl_log_info("activations (micro-batch %lld, recompute %s): %.1f MiB planned; %.1f MiB "
                "without recompute, so recompute saves %.1f MiB",
                (long long)t->mbs, pl_recompute_name(&t->cfg.recompute, rc, sizeof rc),
                act / MiB, kept / MiB, (kept - act) / MiB);
}

void pl_train_print_banner(const pl_trainer *t)
{
    const pl_model_config *c = &t->cfg;
    pl_log_info("plait %s | %s | world %d = tp %d x dp %d x pp %d%s | %d threads per rank",
                pl_version(), t->dist.library, t->grid.layout.world, t->grid.layout.tp,
                t->grid.layout.dp, t->grid.layout.pp,
                c->sequence_parallel && t->grid.layout.tp > 1 ? " (sequence parallel)" : "",
                omp_get_max_threads());
    static const char *const norms[] = {"LayerNorm", "RMSNorm"},
                             *const acts[] = {"GELU (tanh)", "SwiGLU", "ReLU", "GEGLU",
                                              "GELU (exact)"};
    static const char *const pos[] = {"learned positions", "rope", "no positions",
                                      "relative position bias"};
    pl_log_info("model: %s, %lld layers, hidden %lld, %lld heads (%lld query groups), ffn %lld, "
                "seq %lld, vocab %lld (padded %lld), %.2fM parameters, %.1f MFLOP per token",
                pl_family_get(c->family)->name, (long long)c->num_layers, (long long)c->hidden,
                (long long)c->heads, (long long)c->query_groups, (long long)c->ffn_hidden,
                (long long)c->seq_length, (long long)c->vocab_size, (long long)c->padded_vocab,
                (double)pl_model_num_params(c) / 1e6, t->flops_per_token / 1e6);
    if (pl_model_is_encdec(c))
        pl_log_info("encoder-decoder: encoder %lld layers x %lld tokens, decoder %lld layers x "
                    "%lld tokens (causal, cross-attention); FLOPs above per encoder token",
                    (long long)c->num_layers, (long long)c->seq_length, (long long)c->dec_layers,
                    (long long)c->dec_seq_length);
    if (pl_model_is_encdec(c) && c->pp_split > 0)
        pl_log_info("pipeline split: the encoder on stages 0..%lld, the decoder on %lld..%d "
                    "(--pipeline-model-parallel-split-rank %lld); this stage holds the %s",
                    (long long)c->pp_split - 1, (long long)c->pp_split, t->grid.layout.pp - 1,
                    (long long)c->pp_split, t->model.cfg.part == PL_PART_DECODER ? "decoder's"
                                                                                  : "encoder's");
    pl_log_info("layers: %s, %s, %s%s, %s, %s output layer%s", norms[c->block.norm],
                acts[c->block.act], pos[c->block.pos],
                c->block.pos == PL_POS_ROPE && c->rope.scaling ? " (Llama 3.1 scaling)" : "",
                c->block.bias ? "biases" : "no biases", c->untie ? "untied" : "tied",
                c->block.res_post_norm ? ", residuals after the norms "
                                         "(--apply-residual-connection-post-layernorm)"
                : c->block.post_norm ? ", post-LN (a norm after each residual and of the "
                                       "embeddings, no final norm)" : "");
    pl_log_info("batch: micro %lld x %lld micro-batches x dp %lld = global %lld; %lld iterations; "
                "dropout hidden %g, attention %g",
                (long long)t->mbs, (long long)t->num_micro, (long long)t->dp, (long long)t->gbs,
                (long long)t->train_iters, c->hidden_dropout, c->attention_dropout);
    pl_gemm_precision prec = pl_gemm_get_precision(t->gemm);
    if (t->a->fp16)
        pl_log_info("precision: fp16 (GEMM inputs rounded to fp16, fp32 products and "
                    "accumulation), fp32 master weights, gradients and all-reduce; loss scale %s "
                    "%.17g", t->scaler.dynamic ? "dynamic from" : "static", t->scaler.scale);
    else
        pl_log_info("precision: %s GEMMs with fp32 accumulation, fp32 master weights, gradients "
                    "and all-reduce", pl_gemm_precision_name(prec));
    pl_log_info("%s GEMM peak (MFU's denominator): %.1f GFLOP/s per rank, the best measured%s%s "
                "(this start measured %.1f)", pl_gemm_precision_name(prec), t->gemm_peak / 1e9,
                t->peak.path[0] ? " and cached in " : "", t->peak.path, t->peak.measured / 1e9);
}

static int comm_threaded(const pl_trainer *t)
{
    if (t->buckets)
        return pl_dp_buckets_threaded(t->buckets);
    return t->zq && pl_commq_mode_of(t->zq) == PL_COMMQ_THREAD;
}

void pl_train_comm_step_done(pl_trainer *t)
{
    pl_dp_step_stats *s = &t->comm_step, *a = &t->comm_total;
    if (t->buckets) {
        *s = pl_dp_buckets_stats_get(t->buckets)->last;
        if (pl_dp_buckets_stats_get(t->buckets)->steps == 0)
            memset(s, 0, sizeof *s);
    } else if (t->zq) {
        const pl_commq_overlap *o = &t->zq_overlap;
        s->buckets = o->ops;
        s->early = o->early;
        s->busy = o->busy;
        s->before = o->before;
        s->after = o->after;
    }
    pl_dp_step_stats_add(a, s);
}

/* The metrics file's path into path: --metrics-file, or SAVE/metrics.jsonl; 0 if none. */
static int metrics_path(const pl_trainer *t, char *path, size_t size)
{
    if (t->a->metrics_file)
        snprintf(path, size, "%s", t->a->metrics_file);
    else if (t->a->save)
        snprintf(path, size, "%s/metrics.jsonl", t->a->save);
    else
        return 0;
    return 1;
}

/* Flushes the metrics lines just written: a failed write (a full disk, an I/O error)
 * is an error naming the file, never a silently shorter file. */
static pl_status metrics_flush(pl_trainer *t)
{
    const int failed = ferror(t->metrics);
    errno = 0;
    if (fflush(t->metrics) == 0 && !failed)
        return PL_OK;
    const int err = errno ? errno : EIO;
    char path[4096];
    metrics_path(t, path, sizeof path);
    return pl_errorf(PL_ERR_IO, "%s %s: cannot write the metrics of iteration %lld: %s; stopping "
                     "(a run must not go on with its record lost)",
                     t->a->metrics_file ? "--metrics-file" : "--save", path,
                     (long long)t->iteration, strerror(err));
}

/* --metrics-file (or SAVE/metrics.jsonl), opened by rank 0 for appending. */
pl_status pl_train_open_metrics(pl_trainer *t)
{
    if (!pl_train_is_root(t))
        return PL_OK;
    char path[4096];
    if (!metrics_path(t, path, sizeof path))
        return PL_OK;
    if (t->a->save) {
        pl_status st = pl_mkdirs(t->a->save);
        if (st)
            return st;
    }
    t->metrics = fopen(path, "a");
    if (!t->metrics)
        return pl_errorf(PL_ERR_IO, "--metrics-file %s: cannot open for appending: %s", path,
                         strerror(errno));
    return PL_OK;
}

pl_status pl_train_log_iteration(pl_trainer *t, const step_result *r, double ms,
                                 int64_t iters_in_window)
{
    double tokens_s = (double)(t->gbs * t->cfg.seq_length) * (double)iters_in_window / (ms / 1e3);
    double ms_iter = ms / (double)iters_in_window;
    /* MFU per rank: this rank's share of the model FLOPs against the stable peak. */
    double mfu = pl_train_peak_mfu(t, tokens_s / (double)t->grid.layout.world * t->flops_per_token);
    pl_train_progress_line(t, r, ms_iter, tokens_s, mfu);
    if (pl_train_is_root(t)) {
        if (t->metrics) {
            const pl_comm_stats *tp = &t->step_tp_comm; /* rank 0's TP group */
            const pl_comm_stats *pp = &t->step_pp_comm; /* rank 0's PP group (first stage) */
            char norm[32]; /* JSON has no NaN: a skipped step's norm is null */
            if (isfinite(r->grad_norm))
                snprintf(norm, sizeof norm, "%.9g", r->grad_norm);
            else
                snprintf(norm, sizeof norm, "null");
            fprintf(t->metrics,
                    "{\"iteration\": %lld, \"consumed_samples\": %lld, \"lm_loss\": %.17g, "
                    "\"lr\": %.9g, \"grad_norm\": %s, \"skipped\": %s, \"loss_scale\": %.17g, "
                    "\"skipped_total\": %lld, \"ms_per_iter\": %.3f, "
                    "\"tokens_per_sec\": %.1f, \"mfu\": %.4f, \"tflops_per_gpu\": %.6g, "
                    "\"gemm_peak_flops\": %.6g, \"zero_stage\": %d, "
                    "\"dp_wire_bytes\": {\"all-reduce\": %lld, \"reduce-scatter\": %lld, "
                    "\"all-gather\": %lld}, \"dp_wire_bytes_mean\": {\"all-reduce\": %.1f, "
                    "\"reduce-scatter\": %.1f, \"all-gather\": %.1f}, \"dp_comm\": {\"ops\": %lld, "
                    "\"early\": %lld, \"early_all_ranks\": %lld, \"busy_ms\": %.3f, "
                    "\"before_backward_end_ms\": %.3f, "
                    "\"after_backward_end_ms\": %.3f, \"wait_ms\": %.3f, \"threaded\": %s}, "
                    "\"tp_wire_bytes\": {\"all-reduce\": %lld, \"reduce-scatter\": %lld, "
                    "\"all-gather\": %lld}, \"tp_calls\": {\"all-reduce\": %lld, "
                    "\"reduce-scatter\": %lld, \"all-gather\": %lld}, \"tp_comm_ms\": %.3f, "
                    "\"pp_wire_bytes\": {\"send/recv\": %lld, \"all-reduce\": %lld}, "
                    "\"pp_calls\": {\"send/recv\": %lld, \"all-reduce\": %lld}, "
                    "\"pp_wait_ms\": %.3f, \"pp_compute_ms\": %.3f",
                    (long long)t->iteration, (long long)t->consumed_train,
                    isfinite(r->loss) ? r->loss : -1.0, r->lr, norm, r->skipped ? "true" : "false",
                    r->loss_scale, (long long)t->skipped_total, ms_iter, tokens_s, mfu,
                    pl_model_megatron_flops(&t->cfg, t->gbs) /
                        (ms_iter / 1e3 * 1e12 * (double)t->grid.layout.world),
                    t->gemm_peak, t->zero_stage,
                    (long long)t->step_comm.kind[PL_COMM_ALLREDUCE].wire_bytes,
                    (long long)t->step_comm.kind[PL_COMM_REDUCE_SCATTER].wire_bytes,
                    (long long)t->step_comm.kind[PL_COMM_ALLGATHER].wire_bytes,
                    (double)t->wire_sum[0] / (double)t->dp, (double)t->wire_sum[1] / (double)t->dp,
                    (double)t->wire_sum[2] / (double)t->dp, (long long)t->comm_step.buckets,
                    (long long)t->comm_step.early, (long long)t->early_all_ranks,
                    1e3 * t->comm_step.busy,
                    1e3 * t->comm_step.before, 1e3 * t->comm_step.after, 1e3 * t->comm_step.wait,
                    comm_threaded(t) ? "true" : "false",
                    (long long)tp->kind[PL_COMM_ALLREDUCE].wire_bytes,
                    (long long)tp->kind[PL_COMM_REDUCE_SCATTER].wire_bytes,
                    (long long)tp->kind[PL_COMM_ALLGATHER].wire_bytes,
                    (long long)tp->kind[PL_COMM_ALLREDUCE].calls,
                    (long long)tp->kind[PL_COMM_REDUCE_SCATTER].calls,
                    (long long)tp->kind[PL_COMM_ALLGATHER].calls,
                    1e3 * (tp->kind[PL_COMM_ALLREDUCE].seconds +
                           tp->kind[PL_COMM_REDUCE_SCATTER].seconds +
                           tp->kind[PL_COMM_ALLGATHER].seconds),
                    (long long)pp->kind[PL_COMM_SENDRECV].wire_bytes,
                    (long long)pp->kind[PL_COMM_ALLREDUCE].wire_bytes,
                    (long long)pp->kind[PL_COMM_SENDRECV].calls,
                    (long long)pp->kind[PL_COMM_ALLREDUCE].calls, 1e3 * t->pp_wait_step,
                    1e3 * t->pp_compute_step);
            if (t->pp_dp_wire) { /* pipelined: each stage's DP bytes, as dp_wire_bytes_mean */
                fprintf(t->metrics, ", \"dp_wire_bytes_mean_stages\": [");
                for (int k = 0; k < t->grid.layout.pp; k++) {
                    const int64_t *w = t->pp_dp_wire + 3 * k;
                    fprintf(t->metrics, "%s[%.1f, %.1f, %.1f]", k ? ", " : "",
                            (double)w[0] / (double)t->dp, (double)w[1] / (double)t->dp,
                            (double)w[2] / (double)t->dp);
                }
                fprintf(t->metrics, "]");
            }
            if (!isnan(r->sop_loss)) /* BERT's binary head (Megatron's "sop loss") */
                fprintf(t->metrics, ", \"sop_loss\": %.17g", isfinite(r->sop_loss) ? r->sop_loss : -1.0);
            fprintf(t->metrics, "}\n");
            return metrics_flush(t);
        }
    }
    return PL_OK;
}

/* Megatron's evaluate_and_print_results: the line between two rules of dashes
 * one longer than it; PPL = exp(min(20, loss)). */
static void eval_block(const char *prefix, double loss)
{
    char line[256];
    snprintf(line, sizeof line, " validation loss at %s | lm loss value: %.6E | lm loss PPL: %.6E | ",
             prefix, loss, exp(fmin(20.0, loss)));
    char rule[258];
    size_t n = strlen(line) + 1;
    memset(rule, '-', n);
    rule[n] = 0;
    pl_log_info("%s", rule);
    pl_log_info("%s", line);
    pl_log_info("%s", rule);
}

pl_status pl_train_log_eval(pl_trainer *t, double loss)
{
    if (!pl_train_is_root(t))
        return PL_OK;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "iteration %lld", (long long)t->iteration);
    eval_block(prefix, loss);
    if (t->metrics) {
        fprintf(t->metrics, "{\"iteration\": %lld, \"valid_lm_loss\": %.9g, \"valid_ppl\": %.9g}\n",
                (long long)t->iteration, loss, exp(fmin(20.0, loss)));
        return metrics_flush(t);
    }
    return PL_OK;
}

pl_status pl_train_log_eval_final(pl_trainer *t, const char *split, double loss)
{
    if (!pl_train_is_root(t))
        return PL_OK;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "iteration %lld on %s set", (long long)t->iteration, split);
    eval_block(prefix, loss);
    if (t->metrics) {
        const char *key = strcmp(split, "test") == 0 ? "test" : "final_valid";
        fprintf(t->metrics, "{\"iteration\": %lld, \"%s_lm_loss\": %.9g, \"%s_ppl\": %.9g}\n",
                (long long)t->iteration, key, loss, key, exp(fmin(20.0, loss)));
        return metrics_flush(t);
    }
    return PL_OK;
}

/* Peak resident memory (VmHWM) of every rank at the end of training: logged by
 * rank 0 as the maximum and minimum over ranks, and in the metrics. */
pl_status pl_train_log_peak_memory(pl_trainer *t)
{
    int64_t kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "VmHWM:", 6) == 0)
                kib = strtoll(line + 6, NULL, 10);
        fclose(f);
    }
    int64_t mx[2] = {kib, -kib};
    pl_status st = pl_comm_allreduce_i64(pl_grid_comm(&t->grid, PL_GRID_WORLD), mx, 2, PL_COMM_MAX);
    if (st || !pl_train_is_root(t))
        return st;
    pl_log_info("peak resident memory (VmHWM) per rank: max %.1f MiB, min %.1f MiB",
                (double)mx[0] / 1024, (double)-mx[1] / 1024);
    if (t->metrics) {
        /* rank 0's stage: its flat buffer, and each layer's region (stages 2-3) */
        const int64_t nl = t->zero.nregions ? t->nchunks * t->model.stage.nl : 0;
        int64_t layers = 0;
        for (int64_t j = 0; j < nl; j++)
            layers += t->zero.regions[t->zr_l0 + j].hi - t->zero.regions[t->zr_l0 + j].lo;
        fprintf(t->metrics, "{\"zero_partition\": {\"numel\": %lld, \"padded\": %lld, "
                "\"layer_elems\": %lld, \"micro_batches\": %lld, \"layer_regions\": [",
                (long long)t->reg.numel, (long long)(t->zero_stage ? t->zero.padded : t->reg.numel),
                (long long)layers, (long long)t->num_micro);
        for (int64_t j = 0; j < nl; j++)
            fprintf(t->metrics, "%s%lld", j ? ", " : "",
                    (long long)(t->zero.regions[t->zr_l0 + j].hi - t->zero.regions[t->zr_l0 + j].lo));
        fprintf(t->metrics, "]}}\n");
        fprintf(t->metrics, "{\"iteration\": %lld, \"zero_stage\": %d, \"dp\": %lld, "
                "\"vmhwm_kib_max\": %lld, \"vmhwm_kib_min\": %lld, \"state_bytes\": %lld, "
                "\"work_bytes\": %lld, \"act_bytes\": %lld, \"act_bytes_kept\": %lld}\n",
                (long long)t->iteration, t->zero_stage, (long long)t->dp,
                (long long)mx[0], (long long)-mx[1],
                (long long)(t->state_bytes[0] + t->state_bytes[1] + t->state_bytes[2]),
                (long long)t->work_bytes, (long long)pl_train_act_bytes(t, 0),
                (long long)pl_train_act_bytes(t, 1));
        return metrics_flush(t);
    }
    return PL_OK;
}

/* ---- plait bench -------------------------------------------------------------- */

void pl_train_bench_reset(pl_trainer *t)
{
    memset(&t->prof, 0, sizeof t->prof);
    for (int k = 0; k < (t->nchunks > 1 ? t->nchunks : 1); k++)
        memset(&pl_train_chunk(t, k)->prof, 0, sizeof t->model.prof);
    if (t->buckets)
        pl_dp_buckets_stats_reset(t->buckets);
    memset(&t->comm_total, 0, sizeof t->comm_total);
    memset(&t->tp_total, 0, sizeof t->tp_total);
    pl_gemm_converted_reset(t->gemm);
}

/* Where a step's time goes, and one JSON line for scripts. */
void pl_train_bench_report(pl_trainer *t)
{
    const int64_t n = t->prof.steps;
    if (n <= 0) {
        pl_log_warn("plait bench: give --train-iters > %d to measure anything", PL_BENCH_WARMUP);
        return;
    }
    double step = t->prof.total / (double)n;
    double tokens_s = (double)(t->gbs * t->cfg.seq_length) / step;
    double mfu = pl_train_peak_mfu(t, tokens_s / (double)t->grid.layout.world * t->flops_per_token);
    pl_step_prof sum = t->model.prof; /* every model chunk's kernels */
    for (int k = 1; k < t->nchunks; k++) {
        const pl_step_prof *c = &t->chunk_more[k - 1].prof;
        sum.linear += c->linear, sum.attention += c->attention, sum.lmhead += c->lmhead;
        sum.tp_overlap.busy += c->tp_overlap.busy, sum.tp_overlap.wait += c->tp_overlap.wait;
        sum.tp_overlap.ops += c->tp_overlap.ops;
    }
    double other = t->prof.compute - sum.linear - sum.attention - sum.lmhead;
    double idle = t->prof.total - t->prof.compute - t->prof.data - t->prof.comm - t->prof.optim;
    struct {
        const char *name;
        double s;
    } parts[] = {{"GEMM (linear layers)", sum.linear},
                 {"LM head + cross-entropy", sum.lmhead},
                 {"attention", sum.attention},
                 {"other kernels", other},
                 {"optimizer", t->prof.optim},
                 {"communication", t->prof.comm},
                 {"data", t->prof.data},
                 {"idle / untimed", idle}};
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long long rss = (long long)ru.ru_maxrss * 1024;
    pl_log_info("plait bench: %lld steps after %d warm-up: %.1f ms/step, %.1f tokens/s, MFU %.1f%% "
                "of %.1f GFLOP/s, peak RSS %.1f MiB",
                (long long)n, PL_BENCH_WARMUP, 1e3 * step, tokens_s, 100 * mfu, t->gemm_peak / 1e9,
                (double)rss / (1 << 20));
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        pl_log_info("  %-26s %8.1f ms/step %5.1f%%", parts[i].name, 1e3 * parts[i].s / (double)n,
                    100 * parts[i].s / t->prof.total);
    const pl_dp_step_stats *cs = &t->comm_total;
    /* hidden: ran beside backward on the communication thread (inline, the compute thread
     * ran it: nothing hidden) */
    double hidden = comm_threaded(t) ? cs->before : 0;
    if (t->dp > 1 && (t->buckets || t->zq))
        pl_log_info("  DP %s (%s): %.1f ms/step inside %.1f collectives; %.1f ms of it before "
                    "backward ended, %.1f ms after; the compute thread waited %.1f ms%s",
                    t->buckets ? "gradient all-reduce" : "ZeRO collectives",
                    comm_threaded(t) ? "communication thread" : "inline, compute thread",
                    1e3 * cs->busy / (double)n, (double)cs->buckets / (double)n,
                    1e3 * cs->before / (double)n, 1e3 * cs->after / (double)n,
                    1e3 * (cs->wait + cs->progress) / (double)n,
                    t->buckets ? "" : " (inside backward: counted in its kernels' rows)");
    /* TP: seconds inside the collectives (queued ones: on the queue's thread), and of
     * the queued ones the part the compute thread did not wait for */
    double tp_s = 0;
    for (int k = 0; k < PL_COMM_NKINDS; k++)
        tp_s += t->tp_total.kind[k].seconds;
    const pl_tp_overlap *ov = &sum.tp_overlap;
    double tp_hidden = ov->busy > ov->wait ? ov->busy - ov->wait : 0;
    if (t->grid.layout.tp > 1)
        pl_log_info("  TP collectives: %.1f ms/step inside MPI (in the rows above); %s",
                    1e3 * tp_s / (double)n,
                    t->tpq ? "the queued ones below" : "none overlapped (--tp-comm-overlap off)");
    if (t->tpq)
        pl_log_info("  TP overlap (%s): %.1f of those ms/step ran beside weight-gradient GEMMs "
                    "in %.1f reductions, the compute thread waited %.1f ms/step for them",
                    pl_commq_mode_of(t->tpq) == PL_COMMQ_THREAD ? "communication thread"
                                                                : "inline, compute thread",
                    1e3 * ov->busy / (double)n, (double)ov->ops / (double)n,
                    1e3 * ov->wait / (double)n);
    if (t->grid.layout.pp > 1)
        pl_log_info("  pipeline (stage 0): %.1f ms/step blocked on the other stages (%.1f%% of the "
                    "step)", 1e3 * t->prof.pp_wait / (double)n, 100 * t->prof.pp_wait / t->prof.total);
    if (t->grid.layout.pp > 1)
        pl_log_info("  pipeline (stage 0): the schedule simulated with every stage's measured "
                    "forward and backward times idles stage 0 for %.1f%% of the step",
                    100 * t->pp_sim_idle);
    printf("{\"tokens_per_sec\": %.1f, \"tp_comm_ms\": %.3f, \"tp_comm_hidden_ms\": %.3f, "
           "\"tp_overlap_wait_ms\": %.3f, \"act_bytes\": %lld, \"pp_wait_ms\": %.3f, "
           "\"pp_sim_idle\": %.4f, \"pp\": %d, \"micro_batches\": %lld,",
           tokens_s, 1e3 * tp_s / (double)n, 1e3 * tp_hidden / (double)n,
           1e3 * ov->wait / (double)n, (long long)pl_train_act_bytes(t, 0),
           1e3 * t->prof.pp_wait / (double)n, t->pp_sim_idle, t->grid.layout.pp,
           (long long)t->num_micro);
    printf(" \"gemm_operands_converted_per_step\": %lld,",
           (long long)(pl_gemm_converted(t->gemm) / n));
    printf(" \"mfu\": %.4f, \"step_ms\": %.3f, \"peak_rss_bytes\": %lld, "
           "\"gemm_peak_flops\": %.4g, \"flops_per_token\": %.6g, \"world\": %d, "
           "\"dp_comm_hidden_ms\": %.3f, \"dp_comm_wait_ms\": %.3f, \"dp_comm_busy_ms\": %.3f, "
           "\"dp_comm_before_backward_end_ms\": %.3f, \"dp_comm_threaded\": %s, \"breakdown_ms\": {",
           mfu, 1e3 * step, rss, t->gemm_peak, t->flops_per_token, t->grid.layout.world,
           1e3 * hidden / (double)n, 1e3 * (cs->wait + cs->progress) / (double)n,
           1e3 * cs->busy / (double)n, 1e3 * cs->before / (double)n,
           comm_threaded(t) ? "true" : "false");
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        printf("%s\"%s\": %.3f", i ? ", " : "", parts[i].name, 1e3 * parts[i].s / (double)n);
    printf("}}\n");
    fflush(stdout);
}

