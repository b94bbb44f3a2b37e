/* The progress line of `plait train`, in Megatron's wording and field order
 * (megatron/training/training.py training_log), so that log parsers written for
 * Megatron read plait's logs:
 *
 *  iteration       10/     100 | consumed samples:          640 | elapsed time per
 *  iteration (ms): 812.3 | throughput per GPU (TFLOP/s/GPU): 0.412 | learning rate:
 *  5.000000E-04 | global batch size:    64 | lm loss: 7.123456E+00 | loss scale: 1.0 |
 *  grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |
 *  tokens/s: 807 | MFU: 31.2% | ETA: 00:01:13 |
 *
 * (one line). As Megatron: the learning rate is the optimizer's after the step,
 * i.e. the next iteration's (Megatron reads param_groups after the scheduler
 * stepped; the metrics' "lr" is the one this iteration ran with); the loss is the
 * mean over the window's advanced
 * (not skipped) iterations; the skipped and nan counts are the window's (nan:
 * skipped with a non-finite loss); the loss scale is the one after the step; grad
 * norm is absent when the last iteration was skipped; "num zeros" follows it with
 * --log-num-zeros-in-grad; the throughput is num_floating_point_operations over
 * the window's time per iteration and the world size. plait's own fields follow
 * Megatron's. Megatron's optional fields plait does not print: a timestamp
 * prefix (current Megatron; Megatron-DeepSpeed has none), "params norm".
 *
 * With a DeepSpeed config, rank 0 also prints DeepSpeed's throughput line
 * (deepspeed/utils/timer.py ThroughputTimer.stop) every steps_per_print global
 * steps from the third on:
 *   [time] [INFO] [plait] epoch=0/micro_step=M/global_step=G,
 *   RunningAvgSamplesPerSec=X, CurrSamplesPerSec=Y, MemAllocated=AGB, MaxMemAllocated=BGB
 * global_step and micro_step (micro-batches) count from this process's start, as
 * DeepSpeed's timer counts, the average leaves out the first two steps as its does, and the memory is the rank's resident set (VmRSS) and its
 * peak, as DeepSpeed's CPU accelerator reports it (psutil rss). */
#include "train/trainer_internal.h"

#include "base/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Gibibytes of a /proc/self/status field, rounded to 2 places as DeepSpeed. */
static double proc_gib(const char *field)
{
    long long kib = 0;
    size_t n = strlen(field);
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kib = strtoll(line + n + 1, NULL, 10);
    fclose(f);
    return round((double)kib / (1024.0 * 1024.0) * 100) / 100;
}

static void deepspeed_line(pl_trainer *t, double seconds)
{
    /* the timer's own count: global steps since this process started (not the
     * checkpoint's iteration) */
    const int64_t spp = t->a->ds_steps_per_print, g = ++t->ds_steps;
    if (g > 2) /* DeepSpeed times global steps from the third */
        t->ds_timed += seconds;
    if (spp <= 0 || g <= 2 || g % spp != 0 || !pl_train_is_root(t))
        return;
    char when[64];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    /* Python logging's asctime: ",mmm" */
    snprintf(when + strlen(when), sizeof when - strlen(when), ",%03ld", ts.tv_nsec / 1000000);
    const double batch = (double)t->gbs;
    pl_log_info("[%s] [INFO] [plait] epoch=0/micro_step=%lld/global_step=%lld, "
                "RunningAvgSamplesPerSec=%.15g, CurrSamplesPerSec=%.15g, MemAllocated=%gGB, "
                "MaxMemAllocated=%gGB",
                when, (long long)(g * t->num_micro), (long long)g,
                batch / (t->ds_timed / (double)(g - 2)), batch / seconds, proc_gib("VmRSS"),
                proc_gib("VmHWM"));
}

void pl_train_progress_step(pl_trainer *t, const step_result *r, double seconds)
{
    if (r->skipped) {
        t->win.skipped++;
        t->win.nan += !isfinite(r->loss);
    } else {
        t->win.advanced++;
        t->win.loss_sum += r->loss;
        t->win.sop_sum += isnan(r->sop_loss) ? 0.0 : r->sop_loss;
    }
    if (t->a->deepspeed_config)
        deepspeed_line(t, seconds);
}

static void format_eta(double seconds, char *buf, size_t n)
{
    long s = (long)(seconds + 0.5);
    snprintf(buf, n, "%02ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
}

void pl_train_progress_line(pl_trainer *t, const step_result *r, double ms_iter, double tokens_s,
                            double mfu)
{
    if (pl_train_is_root(t)) {
        const double tflops = pl_model_megatron_flops(&t->cfg, t->gbs) /
                              (ms_iter / 1e3 * 1e12 * (double)t->grid.layout.world);
        const double loss = t->win.loss_sum / (double)(t->win.advanced > 0 ? t->win.advanced : 1);
        const double sop = t->win.sop_sum / (double)(t->win.advanced > 0 ? t->win.advanced : 1);
        char lossf[80] = "", norm[48] = "", zeros[48] = "", eta[32];
        if (loss >= 0) /* Megatron prints a loss only when its mean is >= 0 */
            snprintf(lossf, sizeof lossf, " lm loss: %.6E |", loss);
        if (loss >= 0 && t->cfg.head.binary_head) /* pretrain_bert.py's second loss */
            snprintf(lossf, sizeof lossf, " lm loss: %.6E | sop loss: %.6E |", loss, sop);
        if (!r->skipped)
            snprintf(norm, sizeof norm, " grad norm: %.3f |", r->grad_norm);
        if (t->a->log_num_zeros_in_grad && !r->skipped)
            snprintf(zeros, sizeof zeros, " num zeros: %lld |", (long long)r->num_zeros);
        format_eta((double)(t->train_iters - t->iteration) * ms_iter / 1e3, eta, sizeof eta);
        pl_log_info(" iteration %8lld/%8lld | consumed samples: %12lld | elapsed time per "
                    "iteration (ms): %.1f | throughput per GPU (TFLOP/s/GPU): %.3f | learning "
                    "rate: %.6E | global batch size: %5lld |%s loss scale: %.1f |%s%s number of "
                    "skipped iterations: %3lld | number of nan iterations: %3lld | tokens/s: %.0f "
                    "| MFU: %.1f%% | ETA: %s |",
                    (long long)t->iteration, (long long)t->train_iters,
                    (long long)t->consumed_train, ms_iter, tflops, pl_lr_schedule_lr(&t->sched),
                    (long long)t->gbs, lossf,
                    t->scaler.scale, norm, zeros, (long long)t->win.skipped,
                    (long long)t->win.nan, tokens_s, 100 * mfu, eta);
    }
    memset(&t->win, 0, sizeof t->win);
}
