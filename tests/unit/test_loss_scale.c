/* optim/loss_scale: Megatron's DynamicGradScaler sequence on scripted steps. */
#include "optim/loss_scale.h"
#include "test.h"

/* Runs the steps of `script` ('o' overflow, '.' clean) and checks the scale
 * after each against expected[]. */
static void run_script(pl_loss_scaler *s, const char *script, const double *expected)
{
    for (int i = 0; script[i]; i++) {
        pl_loss_scaler_update(s, script[i] == 'o');
        CHECK(s->scale == expected[i], "step %d ('%c'): scale %g, expected %g", i + 1, script[i],
              s->scale, expected[i]);
    }
}

TEST(hysteresis_delays_the_backoff_and_is_not_refilled_by_clean_steps)
{
    pl_loss_scaler s;
    pl_loss_scaler_init_dynamic(&s, 65536, 1, 1000, 2);
    /* first overflow: tracker 2 -> 1, no change; second: 0, halve; each later: halve.
     * A clean step in between does not refill the tracker (Megatron refills it
     * only when the scale grows), so the overflow after it halves at once. */
    static const double e[] = {65536, 32768, 16384, 16384, 8192, 4096};
    run_script(&s, "ooo.oo", e);
    CHECK(s.hysteresis_tracker == -3, "tracker %lld", (long long)s.hysteresis_tracker);
    CHECK(s.growth_tracker == 0, "growth tracker reset by overflow");
}

TEST(window_of_clean_steps_doubles_the_scale_and_refills_hysteresis)
{
    pl_loss_scaler s;
    pl_loss_scaler_init_dynamic(&s, 1024, 1, 3, 2);
    /* o: tracker 1 (1024); o: halve 512 (tracker 0); ...: grow at the 3rd -> 1024, tracker 2;
     * o: tracker 1, no change; ..: growth 2; o: resets growth, tracker 0 -> 512;
     * ...: 1024 */
    static const double e[] = {1024, 512, 512, 512, 1024, 1024, 1024, 1024, 512, 512, 512, 1024};
    run_script(&s, "oo...o..o...", e);
    CHECK(s.hysteresis_tracker == 2, "refilled by the growth: %lld", (long long)s.hysteresis_tracker);
}

TEST(scale_never_goes_below_the_minimum)
{
    pl_loss_scaler s;
    pl_loss_scaler_init_dynamic(&s, 8, 2, 1000, 1);
    static const double e[] = {4, 2, 2, 2};
    run_script(&s, "oooo", e);
}

TEST(initial_two_to_the_32_halves_until_it_fits)
{
    pl_loss_scaler s;
    pl_loss_scaler_init_dynamic(&s, 4294967296.0, 1, 1000, 2);
    int skipped = 0;
    /* the first overflow only spends hysteresis; then every overflow halves */
    while (s.scale > 65536.0) {
        pl_loss_scaler_update(&s, 1);
        skipped++;
    }
    CHECK(skipped == 17, "2^32 -> 2^16 took %d overflows, expected 1 + 16", skipped);
}

TEST(static_scaler_never_changes)
{
    pl_loss_scaler s;
    pl_loss_scaler_init_static(&s, 128);
    static const double e[] = {128, 128, 128, 128};
    run_script(&s, "o.oo", e);
    CHECK(!s.dynamic, "static");
}

int main(void)
{
    RUN(hysteresis_delays_the_backoff_and_is_not_refilled_by_clean_steps);
    RUN(window_of_clean_steps_doubles_the_scale_and_refills_hysteresis);
    RUN(scale_never_goes_below_the_minimum);
    RUN(initial_two_to_the_32_halves_until_it_fits);
    RUN(static_scaler_never_changes);
    return test_summary("loss_scale");
}
