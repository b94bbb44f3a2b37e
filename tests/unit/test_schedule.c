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

int main(void)
{
    RUN(warmup_then_decay_match_megatron_formulas);
    return test_summary("schedule");
}
