/* optim/schedule: Megatron's get_lr at hand-computed points. */
#include "optim/schedule.h"
#include "test.h"

static double lr_at(pl_lr_style style, int64_t step)
{
    pl_lr_schedule s = {.max_lr = 1e-3, .min_lr = 1e-4, .init_lr = 0, .warmup_steps = 100,
                     .decay_steps = 1000, .style = style, .num_steps = 0};
    pl_lr_schedule_step(&s, step);
    return pl_lr_schedule_lr(&s);
}

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-12 + 1e-9 * fabs(b))

TEST(warmup_then_decay_match_megatron_formulas)
{
    /* warmup: init + (max - init) * n / warmup, for every style */
    for (int st = PL_LR_CONSTANT; st <= PL_LR_INVERSE_SQRT; st++) {
        CHECK(lr_at(st, 0) == 0.0, "style %d first iteration runs at init_lr", st);
        CHECK(NEAR(lr_at(st, 50), 5e-4), "style %d half warmup %g", st, lr_at(st, 50));
        CHECK(NEAR(lr_at(st, 100), 1e-3), "style %d end of warmup", st);
    }
    CHECK(NEAR(lr_at(PL_LR_CONSTANT, 5000), 1e-3), "constant ignores decay");
    /* linear at ratio (325-100)/900 = 0.25: 1e-4 + 0.75 * 9e-4 */
    CHECK(NEAR(lr_at(PL_LR_LINEAR, 325), 7.75e-4), "linear %g", lr_at(PL_LR_LINEAR, 325));
    /* cosine at ratio 0.25: 1e-4 + 0.5 (cos(pi/4) + 1) 9e-4 = 8.682233...e-4 */
    CHECK(NEAR(lr_at(PL_LR_COSINE, 325), 1e-4 + 0.5 * (0.70710678118654752 + 1) * 9e-4), "cosine %g",
          lr_at(PL_LR_COSINE, 325));
    CHECK(NEAR(lr_at(PL_LR_COSINE, 550), 5.5e-4), "cosine midpoint");
    CHECK(NEAR(lr_at(PL_LR_COSINE, 1000), 1e-4) && NEAR(lr_at(PL_LR_LINEAR, 1000), 1e-4), "end");
    CHECK(lr_at(PL_LR_COSINE, 1001) == 1e-4, "past decay: min_lr");
    /* inverse sqrt: max * sqrt(warmup) / sqrt(n) = 1e-3 * 10 / 20 */
    CHECK(NEAR(lr_at(PL_LR_INVERSE_SQRT, 400), 5e-4), "inverse sqrt %g", lr_at(PL_LR_INVERSE_SQRT, 400));
    CHECK(pl_lr_style_parse("cosine") == PL_LR_COSINE && pl_lr_style_parse("cubic") == -1, "names");
}

/* DeepSpeed's schedulers at hand-computed points of lr_schedules.py's formulas. The
 * iteration that follows `steps` optimizer steps runs at last_batch_iteration
 * k = steps - 1; 4 samples per step. */
static double ds_at(pl_lr_style style, int64_t steps)
{
    pl_lr_schedule s = {.max_lr = 1e-3, .min_lr = 1e-4, .init_lr = 2e-4, .warmup_steps = 10 * 4,
                        .decay_steps = 30 * 4, .style = style, .step_samples = 4};
    pl_lr_schedule_step(&s, 4 * steps);
    return pl_lr_schedule_lr(&s);
}

TEST(deepspeed_schedulers_match_lr_schedules_py)
{
    /* WarmupLR, log (DeepSpeed's default): min + delta log(k + 1) / log(W), W = 10 */
    CHECK(ds_at(PL_LR_DS_WARMUP_LOG, 0) == 2e-4, "k = -1: the first step runs at warmup_min_lr");
    CHECK(ds_at(PL_LR_DS_WARMUP_LOG, 1) == 2e-4, "k = 0: log(1) = 0, still warmup_min_lr");
    CHECK(NEAR(ds_at(PL_LR_DS_WARMUP_LOG, 5), 2e-4 + 8e-4 * log(5.0) / log(10.0)), "log k = 4: %g",
          ds_at(PL_LR_DS_WARMUP_LOG, 5));
    CHECK(NEAR(ds_at(PL_LR_DS_WARMUP_LOG, 10), 2e-4 + 8e-4 * log(10.0) / log(10.0)), "log k = 9");
    CHECK(ds_at(PL_LR_DS_WARMUP_LOG, 11) == 1e-3 && ds_at(PL_LR_DS_WARMUP_LOG, 500) == 1e-3,
          "then warmup_max_lr for good");
    /* linear: min + delta k / W, one step behind Megatron's (n / W) */
    CHECK(NEAR(ds_at(PL_LR_DS_WARMUP_LINEAR, 5), 2e-4 + 8e-4 * 4.0 / 10.0), "linear k = 4: %g",
          ds_at(PL_LR_DS_WARMUP_LINEAR, 5));
    CHECK(ds_at(PL_LR_DS_WARMUP_LINEAR, 11) == 1e-3, "linear k = W");
    /* WarmupDecayLR: after W, gamma = max(0, (T - k) / max(1, T - W)), T = 30, back to min */
    CHECK(NEAR(ds_at(PL_LR_DS_WARMUP_DECAY_LINEAR, 11), 2e-4 + 8e-4 * 20.0 / 20.0), "decay k = 10");
    CHECK(NEAR(ds_at(PL_LR_DS_WARMUP_DECAY_LOG, 21), 2e-4 + 8e-4 * 10.0 / 20.0), "decay k = 20: %g",
          ds_at(PL_LR_DS_WARMUP_DECAY_LOG, 21));
    CHECK(ds_at(PL_LR_DS_WARMUP_DECAY_LOG, 31) == 2e-4 && ds_at(PL_LR_DS_WARMUP_DECAY_LOG, 99) == 2e-4,
          "decay ends at warmup_min_lr and stays");
    /* WarmupCosineLR (rates = lr x ratios): 0 before the first step; cosine from k = W with
     * real_last_step = k - W + 1 over T - W = 20 steps, down to lr x cos_min_ratio */
    CHECK(ds_at(PL_LR_DS_WARMUP_COSINE_LOG, 0) == 0.0, "cosine k = -1 runs at 0");
    CHECK(NEAR(ds_at(PL_LR_DS_WARMUP_COSINE_LINEAR, 3), 2e-4 + 8e-4 * 2.0 / 10.0), "cosine warmup");
    CHECK(NEAR(ds_at(PL_LR_DS_WARMUP_COSINE_LOG, 11),
               1e-4 + 9e-4 * (1 + cos(3.14159265358979323846 * 1.0 / 20.0)) / 2),
          "cosine k = 10: %g", ds_at(PL_LR_DS_WARMUP_COSINE_LOG, 11));
    CHECK(NEAR(ds_at(PL_LR_DS_WARMUP_COSINE_LOG, 20), 1e-4 + 9e-4 * 0.5), "cosine midpoint k = 19");
    CHECK(NEAR(ds_at(PL_LR_DS_WARMUP_COSINE_LOG, 30), 1e-4), "cosine end k = 29");
    CHECK(pl_lr_style_parse("deepspeed-WarmupCosineLR-linear") == PL_LR_DS_WARMUP_COSINE_LINEAR &&
              strcmp(pl_lr_style_name(PL_LR_DS_WARMUP_LOG), "deepspeed-WarmupLR-log") == 0,
          "names round-trip (the checkpoint manifest records them)");
}

/* OneCycle at hand-computed points: cycle 4 + 6 steps between 1e-4 and 1e-3, then
 * min / (1 + 0.5 d / 2); momentum 0.8..0.9 inversely, then 0.9 (1 + 0.01 d / 2). */
static double oc_at(int64_t steps, double *b1, double *b2)
{
    pl_lr_schedule s = {.max_lr = 1e-3, .min_lr = 1e-4, .init_lr = 1e-4, .warmup_steps = 4 * 3,
                        .decay_steps = 10 * 3, .style = PL_LR_DS_ONECYCLE, .step_samples = 3,
                        .decay_lr_rate = 0.5, .decay_mom_rate = 0.01, .min_mom = 0.8,
                        .max_mom = 0.9, .decay_step_size = 2, .cycle_momentum = 1};
    pl_lr_schedule_step(&s, 3 * steps);
    *b1 = *b2 = -1;
    CHECK(pl_lr_schedule_betas(&s, b1, b2) == 1, "OneCycle sets the betas");
    return pl_lr_schedule_lr(&s);
}

TEST(deepspeed_onecycle_matches_lr_schedules_py)
{
    static const struct {
        int64_t steps;
        double lr, beta1;
    } pts[] = {
        {0, 1e-4, 0.8},        /* before the first step: cycle_min_lr, cycle_min_mom */
        {1, 3.25e-4, 0.875},   /* k 0: x = 1/10, scale 0.25 */
        {4, 1e-3, 0.8},        /* k 3: x = 0.4 = the first half's end */
        {7, 5.5e-4, 0.85},     /* k 6: x = 0.7, scale (0.7 - 1) / (0.4 - 1) */
        {10, 1e-4, 0.9},       /* k 9: the next cycle's x = 0 */
        {11, 8e-5, 0.9045},    /* k 10: 1 step past, interval 0.5 */
        {14, 5e-5, 0.918},     /* k 13: 4 steps past, interval 2 */
    };
    for (size_t i = 0; i < sizeof pts / sizeof *pts; i++) {
        double b1, b2;
        double lr = oc_at(pts[i].steps, &b1, &b2);
        CHECK(NEAR(lr, pts[i].lr) && NEAR(b1, pts[i].beta1) && b2 == 0.99,
              "steps %lld: lr %g beta1 %g beta2 %g", (long long)pts[i].steps, lr, b1, b2);
    }
    pl_lr_schedule w = {.style = PL_LR_DS_WARMUP_LOG, .step_samples = 1, .warmup_steps = 2};
    double b1 = 0.5, b2 = 0.5;
    CHECK(pl_lr_schedule_betas(&w, &b1, &b2) == 0 && b1 == 0.5, "other schedules leave the betas");
}

/* LRRangeTest, lr_schedules.py: lr = min_lr (1 + step_rate interval), interval =
 * (last_batch_iteration + 1) / step_size (floored with staircase), written here as
 * DeepSpeed writes it; step_size 3, 5 samples per step. */
static double rt_at(int staircase, int64_t steps)
{
    pl_lr_schedule s = {.max_lr = 2e-4, .min_lr = 2e-4, .init_lr = 2e-4, .warmup_steps = 3 * 5,
                        .style = PL_LR_DS_LR_RANGE_TEST, .step_samples = 5,
                        .range_step_rate = 0.5, .range_staircase = staircase};
    pl_lr_schedule_step(&s, 5 * steps);
    return pl_lr_schedule_lr(&s);
}

TEST(deepspeed_lr_range_test_matches_lr_schedules_py)
{
    for (int64_t steps = 0; steps <= 12; steps++) {
        const int64_t last_batch_iteration = steps - 1;
        const double cont = (double)(last_batch_iteration + 1) / 3.0;
        const double stair = floor((double)(last_batch_iteration + 1) / 3.0);
        CHECK(rt_at(0, steps) == 2e-4 * (1.0 + 0.5 * cont), "continuous after %lld steps: %.17g",
              (long long)steps, rt_at(0, steps));
        CHECK(rt_at(1, steps) == 2e-4 * (1.0 + 0.5 * stair), "staircase after %lld steps: %.17g",
              (long long)steps, rt_at(1, steps));
    }
    CHECK(rt_at(0, 0) == 2e-4 && rt_at(1, 2) == 2e-4, "min_lr until the first stair");
    CHECK(NEAR(rt_at(1, 3), 3e-4) && NEAR(rt_at(1, 5), 3e-4) && NEAR(rt_at(1, 6), 4e-4),
          "stairs of 3 steps, each + 0.5 min_lr");
    CHECK(pl_lr_style_parse("deepspeed-LRRangeTest") == PL_LR_DS_LR_RANGE_TEST &&
              strcmp(pl_lr_style_name(PL_LR_DS_LR_RANGE_TEST), "deepspeed-LRRangeTest") == 0,
          "the name round-trips (the checkpoint records it)");
}

int main(void)
{
    RUN(warmup_then_decay_match_megatron_formulas);
    RUN(deepspeed_schedulers_match_lr_schedules_py);
    RUN(deepspeed_onecycle_matches_lr_schedules_py);
    RUN(deepspeed_lr_range_test_matches_lr_schedules_py);
    return test_summary("schedule");
}
