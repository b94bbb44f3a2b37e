/* parallel/pp/schedule: every kind over many shapes passes the checker and has exactly
 * its formula's bubble; small cases equal Megatron's documented order; the checker
 * catches broken schedules; invalid shapes are refused with a message.
 *
 * The expected orders: 1F1B and interleaved follow forward_backward_pipelining_without_/
 * with_interleaving in Megatron-LM's megatron/core/pipeline_parallel/schedules.py (warmup
 * counts and the virtual micro-batch table of get_schedule_table, quoted in
 * shared/reference/megatron-facts.md section 5); ZB-H1 follows schedule.h.
 *
 * PLAIT_PP_PRINT=1 also prints the timelines of docs/pipeline.md and the bubble table. */
#include "base/alloc.h"
#include "base/status.h"
#include "parallel/pp/schedule.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------------------ */

/* Compact form of a list: "F0a" forward of mb 0 chunk 0 (a), "B", "I", "W" the backward
 * and its halves, "RA0a<1" receive activation from rank 1, "SG0b>0" send gradient to 0. */
static void render(const pl_pp_action *list, int n, char *buf, size_t cap)
{
    static const char *const tok[PL_PP_NOPS] = {"F", "B", "I", "W", "RA", "SA", "RG", "SG"};
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len < cap; i++) {
        const pl_pp_action *a = &list[i];
        len += (size_t)snprintf(buf + len, cap - len, "%s%s%d%c", i ? " " : "", tok[a->op], a->mb,
                                'a' + a->chunk);
        if (a->peer >= 0 && len < cap)
            len += (size_t)snprintf(buf + len, cap - len, "%c%d",
                                    a->op == PL_PP_RECV_ACT || a->op == PL_PP_RECV_GRAD ? '<' : '>',
                                    a->peer);
    }
}

static void check_rank_list(const pl_pp_schedule *s, int r, const char *want)
{
    char got[4096];
    int n;
    const pl_pp_action *list = pl_pp_schedule_list(s, r, &n);
    render(list, n, got, sizeof got);
    CHECK(strcmp(got, want) == 0, "%s rank %d:\n  got  %s\n  want %s", pl_pp_kind_name(s->spec.kind),
          r, got, want);
}

static pl_pp_action *action_at(pl_pp_schedule *s, int r, int i) { return &s->action[s->first[r] + i]; }

/* Index of the first action (op, mb) of stage r, or -1. */
static int find(const pl_pp_schedule *s, int r, pl_pp_op op, int mb)
{
    int n;
    const pl_pp_action *list = pl_pp_schedule_list(s, r, &n);
    for (int i = 0; i < n; i++)
        if (list[i].op == op && list[i].mb == mb)
            return i;
    return -1;
}

static void swap_actions(pl_pp_schedule *s, int r, int i, int j)
{
    pl_pp_action t = *action_at(s, r, i);
    *action_at(s, r, i) = *action_at(s, r, j);
    *action_at(s, r, j) = t;
}

/* Moves action `from` of stage r to index `to` (to < from), shifting those between. */
static void move_action(pl_pp_schedule *s, int r, int from, int to)
{
    for (int k = from; k > to; k--)
        swap_actions(s, r, k, k - 1);
}

static void drop_action(pl_pp_schedule *s, int r, int i)
{
    int P = s->spec.stages, k = s->first[r] + i;
    memmove(&s->action[k], &s->action[k + 1], sizeof *s->action * (size_t)(s->first[P] - k - 1));
    for (int q = r + 1; q <= P; q++)
        s->first[q]--;
}

/* Whether the shape is one the kind accepts (the rules of pl_pp_spec_validate). */
static int shape_valid(pl_pp_kind kind, int P, int m, int v)
{
    switch (kind) {
    case PL_PP_NONE: return P == 1 && v == 1;
    case PL_PP_INTERLEAVED: return v >= 2 && P >= 2 && m % P == 0;
    default: return v == 1;
    }
}

/* Expects the checker to refuse s with a message holding `want`. */
static void expect_broken(const pl_pp_schedule *s, const char *want)
{
    pl_status st = pl_pp_schedule_check(s, NULL, NULL);
    CHECK(st == PL_ERR_INTERNAL, "a broken %s schedule passed the check (%s)",
          pl_pp_kind_name(s->spec.kind), pl_status_str(st));
    CHECK(strstr(pl_error_msg(), want) != NULL, "message: %s\n    expected it to contain: %s",
          pl_error_msg(), want);
}

/* ---- every kind, every shape ---------------------------------------------------------- */

/* Every valid (kind, P, m, v), P 1..8, m 1..16, v 1..4, passes the checker; the simulated
 * bubble equals the formula exactly (unit costs make every time an integer, so the test
 * compares (makespan - busy) * den with num * busy); the busiest stage reaches the
 * in-flight bound, which is therefore tight; invalid shapes are refused. */
TEST(every_kind_passes_the_checker_with_its_formula_bubble)
{
    int checked = 0, refused = 0;
    for (int kind = 0; kind < PL_PP_NKINDS; kind++)
        for (int P = 1; P <= 8; P++)
            for (int m = 1; m <= 16; m++)
                for (int v = 1; v <= 4; v++) {
                    pl_pp_spec spec = {.kind = (pl_pp_kind)kind, .stages = P, .micro_batches = m, .chunks = v};
                    const char *name = pl_pp_kind_name(spec.kind);
                    pl_pp_schedule s;
                    pl_status st = pl_pp_schedule_init(&s, &spec);
                    if (!shape_valid(spec.kind, P, m, v)) {
                        CHECK(st == PL_ERR_ARG, "%s P=%d m=%d v=%d accepted", name, P, m, v);
                        refused++;
                        continue;
                    }
                    CHECK_OK(st);
                    if (st != PL_OK)
                        continue;
                    pl_pp_stats stats;
                    int64_t idle[8], num, den;
                    st = pl_pp_schedule_check(&s, &stats, idle);
                    CHECK(st == PL_OK, "%s P=%d m=%d v=%d: %s", name, P, m, v, pl_error_msg());
                    pl_pp_bubble_formula(&spec, &num, &den);
                    if (st == PL_OK) {
                        CHECK(stats.busy == 3LL * m * v, "%s P=%d m=%d v=%d: busy %lld", name, P, m, v,
                              (long long)stats.busy);
                        CHECK((stats.makespan - stats.busy) * den == num * stats.busy,
                              "%s P=%d m=%d v=%d: bubble %lld/%lld, formula %lld/%lld", name, P, m, v,
                              (long long)(stats.makespan - stats.busy), (long long)stats.busy,
                              (long long)num, (long long)den);
                        CHECK(stats.max_in_flight == pl_pp_in_flight_bound(&spec, 0),
                              "%s P=%d m=%d v=%d: peak in flight %d, bound %d", name, P, m, v,
                              stats.max_in_flight, pl_pp_in_flight_bound(&spec, 0));
                        for (int r = 0; r < P; r++)
                            CHECK(idle[r] >= 0 && idle[r] <= stats.makespan - stats.busy,
                                  "%s P=%d m=%d v=%d: rank %d idle %lld", name, P, m, v, r,
                                  (long long)idle[r]);
                    }
                    for (int r = 0; r < P; r++) {
                        int n;
                        pl_pp_schedule_list(&s, r, &n);
                        CHECK(n <= 7 * m * v, "%s P=%d m=%d v=%d rank %d: %d actions", name, P, m,
                              v, r, n);
                    }
                    pl_pp_schedule_free(&s);
                    checked++;
                }
    printf("  %d schedules checked, %d invalid shapes refused\n", checked, refused);
    /* gpipe, 1f1b, zb-h1: 3 x 8 x 16 = 384; none: 16 (P = 1); interleaved: the multiples of
     * P up to 16 for P = 2..8 (8+5+4+3+2+2+2 = 26) times v = 2..4: 78. */
    CHECK(checked == 384 + 16 + 78, "%d schedules checked", checked);
    CHECK(checked + refused == PL_PP_NKINDS * 8 * 16 * 4, "%d + %d shapes", checked, refused);
}

/* ---- Megatron's order on small cases ---------------------------------------------------- */

/* forward_backward_pipelining_without_interleaving, P=2, m=3: rank 0 warms up with
 * P - 0 - 1 = 1 forward, then F/B pairs, then 1 backward; rank 1 has no warmup. */
TEST(one_f_one_b_p2_m3_is_megatrons_order)
{
    pl_pp_spec spec = {.kind = PL_PP_1F1B, .stages = 2, .micro_batches = 3, .chunks = 1};
    pl_pp_schedule s;
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    check_rank_list(&s, 0, "F0a SA0a>1 F1a SA1a>1 RG0a<1 B0a F2a SA2a>1 RG1a<1 B1a RG2a<1 B2a");
    check_rank_list(&s, 1, "RA0a<0 F0a B0a SG0a>0 RA1a<0 F1a B1a SG1a>0 RA2a<0 F2a B2a SG2a>0");
    pl_pp_schedule_free(&s);
}

/* forward_backward_pipelining_with_interleaving, P=2, v=2, m=4. Virtual stages: rank 0
 * chunk a = 0, rank 1 chunk a = 1, rank 0 chunk b = 2, rank 1 chunk b = 3 (the loss).
 * The table: forward (mb,chunk) = 0a 1a 0b 1b 2a 3a 2b 3b, backward 0b 1b 0a 1a 2b 3b
 * 2a 3a. Warmup: rank 0 (2-0-1)*2 + (2-1)*2 = 4, rank 1 0 + 2 = 2; then forward k +
 * warmup and backward k in turn; then the remaining backwards. */
TEST(interleaved_p2_v2_m4_is_megatrons_order)
{
    pl_pp_spec spec = {.kind = PL_PP_INTERLEAVED, .stages = 2, .micro_batches = 4, .chunks = 2};
    pl_pp_schedule s;
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    check_rank_list(&s, 0,
                    "F0a SA0a>1 F1a SA1a>1 RA0b<1 F0b SA0b>1 RA1b<1 F1b SA1b>1 "
                    "F2a SA2a>1 RG0b<1 B0b SG0b>1 "
                    "F3a SA3a>1 RG1b<1 B1b SG1b>1 "
                    "RA2b<1 F2b SA2b>1 RG0a<1 B0a "
                    "RA3b<1 F3b SA3b>1 RG1a<1 B1a "
                    "RG2b<1 B2b SG2b>1 RG3b<1 B3b SG3b>1 RG2a<1 B2a RG3a<1 B3a");
    check_rank_list(&s, 1,
                    "RA0a<0 F0a SA0a>0 RA1a<0 F1a SA1a>0 "
                    "RA0b<0 F0b B0b SG0b>0 "
                    "RA1b<0 F1b B1b SG1b>0 "
                    "RA2a<0 F2a SA2a>0 RG0a<0 B0a SG0a>0 "
                    "RA3a<0 F3a SA3a>0 RG1a<0 B1a SG1a>0 "
                    "RA2b<0 F2b B2b SG2b>0 "
                    "RA3b<0 F3b B3b SG3b>0 "
                    "RG2a<0 B2a SG2a>0 RG3a<0 B3a SG3a>0");
    CHECK(pl_pp_in_flight_bound(&spec, 0) == 5 && pl_pp_in_flight_bound(&spec, 1) == 3,
          "bounds %d %d", pl_pp_in_flight_bound(&spec, 0), pl_pp_in_flight_bound(&spec, 1));
    pl_pp_schedule_free(&s);
}

/* ZB-H1, P=2, m=3: 1F1B's order with I (input half, sent upstream at once) and W; rank 1
 * keeps one weight half pending (W0 after I1), rank 0 none. */
TEST(zb_h1_p2_m3_splits_backwards_and_defers_weights)
{
    pl_pp_spec spec = {.kind = PL_PP_ZB_H1, .stages = 2, .micro_batches = 3, .chunks = 1};
    pl_pp_schedule s;
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    check_rank_list(&s, 0, "F0a SA0a>1 F1a SA1a>1 RG0a<1 I0a W0a F2a SA2a>1 RG1a<1 I1a W1a RG2a<1 I2a W2a");
    check_rank_list(&s, 1, "RA0a<0 F0a I0a SG0a>0 RA1a<0 F1a I1a SG1a>0 W0a RA2a<0 F2a I2a SG2a>0 W1a W2a");
    pl_pp_schedule_free(&s);
}

TEST(none_and_gpipe_small_orders)
{
    pl_pp_spec none = {.kind = PL_PP_NONE, .stages = 1, .micro_batches = 3, .chunks = 1};
    pl_pp_spec gpipe = {.kind = PL_PP_GPIPE, .stages = 2, .micro_batches = 2, .chunks = 1};
    pl_pp_schedule s;
    CHECK_OK(pl_pp_schedule_init(&s, &none));
    check_rank_list(&s, 0, "F0a B0a F1a B1a F2a B2a");
    pl_pp_schedule_free(&s);
    CHECK_OK(pl_pp_schedule_init(&s, &gpipe));
    check_rank_list(&s, 0, "F0a SA0a>1 F1a SA1a>1 RG0a<1 B0a RG1a<1 B1a");
    check_rank_list(&s, 1, "RA0a<0 F0a RA1a<0 F1a B0a SG0a>0 B1a SG1a>0");
    pl_pp_schedule_free(&s);
}

/* The per-rank builder is the same list init stores, and counts without writing. */
TEST(rank_builder_counts_then_fills)
{
    pl_pp_spec spec = {.kind = PL_PP_INTERLEAVED, .stages = 4, .micro_batches = 8, .chunks = 3};
    pl_pp_schedule s;
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    for (int r = 0; r < 4; r++) {
        int n = -1, k = -1, want;
        const pl_pp_action *list = pl_pp_schedule_list(&s, r, &want);
        pl_pp_action buf[7 * 8 * 3];
        CHECK_OK(pl_pp_schedule_rank(&spec, r, NULL, &n));
        CHECK_OK(pl_pp_schedule_rank(&spec, r, buf, &k));
        CHECK(n == want && k == want && memcmp(buf, list, sizeof *buf * (size_t)want) == 0,
              "rank %d: counted %d, filled %d, stored %d", r, n, k, want);
    }
    pl_pp_schedule_free(&s);
}

/* ---- the checker catches broken schedules ----------------------------------------------- */

TEST(checker_reports_a_deadlock)
{
    /* Rank 0 waits for the gradient of mb 0 before sending mb 0's activation, which rank 1
     * needs to produce that gradient. Every local order rule still holds. */
    pl_pp_spec spec = {.kind = PL_PP_1F1B, .stages = 2, .micro_batches = 3, .chunks = 1};
    pl_pp_schedule s;
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    swap_actions(&s, 0, find(&s, 0, PL_PP_SEND_ACT, 0), find(&s, 0, PL_PP_RECV_GRAD, 0));
    expect_broken(&s, "deadlock: rank 0 waits at action 1 (RECV_GRAD mb 0 chunk 0 from 1); "
                      "rank 1 waits at action 0 (RECV_ACT mb 0 chunk 0 from 0)");
    pl_pp_schedule_free(&s);

    /* Interleaved: rank 1 waits for chunk b's input before sending chunk a's output, from
     * which rank 0 computes that input. */
    spec = (pl_pp_spec){.kind = PL_PP_INTERLEAVED, .stages = 2, .micro_batches = 2, .chunks = 2};
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    int send_at = find(&s, 1, PL_PP_SEND_ACT, 0), recv_at = -1, n;
    const pl_pp_action *list = pl_pp_schedule_list(&s, 1, &n);
    for (int i = 0; i < n; i++)
        if (list[i].op == PL_PP_RECV_ACT && list[i].mb == 0 && list[i].chunk == 1)
            recv_at = i;
    swap_actions(&s, 1, send_at, recv_at);
    expect_broken(&s, "deadlock");
    pl_pp_schedule_free(&s);
}

TEST(checker_reports_a_receive_after_its_use)
{
    pl_pp_spec spec = {.kind = PL_PP_1F1B, .stages = 2, .micro_batches = 3, .chunks = 1};
    pl_pp_schedule s;
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    swap_actions(&s, 1, find(&s, 1, PL_PP_RECV_ACT, 1), find(&s, 1, PL_PP_FWD, 1));
    expect_broken(&s, "rank 1 action 5 (RECV_ACT mb 1 chunk 0 from 0): comes after the FWD that "
                      "needs it (action 4)");
    pl_pp_schedule_free(&s);
}

TEST(checker_reports_a_dropped_send)
{
    pl_pp_spec spec = {.kind = PL_PP_1F1B, .stages = 2, .micro_batches = 3, .chunks = 1};
    pl_pp_schedule s;
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    drop_action(&s, 0, find(&s, 0, PL_PP_SEND_ACT, 2));
    expect_broken(&s, "the activation of micro-batch 2 from virtual stage 0 (rank 0 chunk 0) to 1 "
                      "(rank 1 chunk 0) is sent 0 times and received 1 times");
    pl_pp_schedule_free(&s);

    /* A dropped gradient send on the last stage of an interleaved schedule. */
    spec = (pl_pp_spec){.kind = PL_PP_INTERLEAVED, .stages = 2, .micro_batches = 4, .chunks = 2};
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    drop_action(&s, 1, find(&s, 1, PL_PP_SEND_GRAD, 3));
    expect_broken(&s, "is sent 0 times and received 1 times");
    pl_pp_schedule_free(&s);
}

TEST(checker_reports_too_many_activations_in_flight)
{
    /* GPipe's lists checked against 1F1B's bound: rank 0's fifth forward holds 5 > 4. */
    pl_pp_spec spec = {.kind = PL_PP_GPIPE, .stages = 4, .micro_batches = 8, .chunks = 1};
    pl_pp_schedule s;
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    CHECK_OK(pl_pp_schedule_check(&s, NULL, NULL));
    s.spec.kind = PL_PP_1F1B;
    expect_broken(&s, "rank 0 action 8 (FWD mb 4 chunk 0): 5 activations in flight, above the "
                      "1f1b bound 4");
    pl_pp_schedule_free(&s);

    /* ZB-H1 with one steady forward moved ahead of the backward before it. */
    spec = (pl_pp_spec){.kind = PL_PP_ZB_H1, .stages = 4, .micro_batches = 8, .chunks = 1};
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    int i = find(&s, 1, PL_PP_BWD_INPUT, 0);
    move_action(&s, 1, find(&s, 1, PL_PP_FWD, 4), i);      /* F4 right before I0 */
    move_action(&s, 1, find(&s, 1, PL_PP_RECV_ACT, 4), i); /* and its receive before it */
    CHECK(find(&s, 1, PL_PP_FWD, 4) == i + 1, "F4 at %d", find(&s, 1, PL_PP_FWD, 4));
    expect_broken(&s, "4 activations in flight, above the zb-h1 bound 3");
    pl_pp_schedule_free(&s);
}

TEST(checker_reports_bad_computations_and_peers)
{
    pl_pp_spec spec = {.kind = PL_PP_1F1B, .stages = 3, .micro_batches = 4, .chunks = 1};
    pl_pp_schedule s;
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    pl_pp_action *a = action_at(&s, 1, find(&s, 1, PL_PP_BWD, 2));
    a->op = PL_PP_BWD_INPUT; /* half a backward: no weight gradient */
    expect_broken(&s, "rank 1: micro-batch 2 chunk 0 has 0 BWD, 1 BWD_INPUT and 0 BWD_WEIGHT");
    a->op = PL_PP_BWD;
    CHECK_OK(pl_pp_schedule_check(&s, NULL, NULL));

    a = action_at(&s, 0, find(&s, 0, PL_PP_SEND_ACT, 1));
    a->peer = 2;
    expect_broken(&s, "rank 0 action 3 (SEND_ACT mb 1 chunk 0 to 2): its peer, virtual stage 1, "
                      "is on rank 1, not 2");
    a->peer = 1;

    a = action_at(&s, 2, find(&s, 2, PL_PP_FWD, 0));
    a->op = PL_PP_SEND_ACT; /* the loss stage sends nothing forward */
    a->peer = 0;
    expect_broken(&s, "virtual stage 2 is the last of 3 and has no next stage");
    a->op = PL_PP_FWD;
    a->peer = -1;

    a = action_at(&s, 0, find(&s, 0, PL_PP_BWD, 3));
    a->op = PL_PP_FWD;
    expect_broken(&s, "micro-batch 3 chunk 0 has 2 FWD, expected 1");
    a->op = PL_PP_BWD;

    a = action_at(&s, 2, 0);
    a->mb = 4;
    expect_broken(&s, "rank 2 action 0 (RECV_ACT mb 4 chunk 0 from 1): micro-batch outside 0..3");
    a->mb = 0;
    CHECK_OK(pl_pp_schedule_check(&s, NULL, NULL));
    pl_pp_schedule_free(&s);
}

/* ---- invalid input ---------------------------------------------------------------------- */

static void expect_invalid(pl_pp_kind kind, int P, int m, int v, const char *want)
{
    pl_pp_spec spec = {.kind = kind, .stages = P, .micro_batches = m, .chunks = v};
    pl_pp_schedule s;
    int n = -1;
    pl_status st = pl_pp_schedule_init(&s, &spec);
    CHECK(st == PL_ERR_ARG, "%s P=%d m=%d v=%d: %s", pl_pp_kind_name(kind), P, m, v, pl_status_str(st));
    CHECK(strstr(pl_error_msg(), want) != NULL, "message: %s\n    expected it to contain: %s",
          pl_error_msg(), want);
    CHECK(s.action == NULL && s.first == NULL, "a refused schedule kept its arrays");
    CHECK(pl_pp_schedule_rank(&spec, 0, NULL, &n) == PL_ERR_ARG && n == 0, "rank builder accepted it");
}

TEST(invalid_shapes_are_refused_naming_what_is_wrong)
{
    expect_invalid(PL_PP_INTERLEAVED, 2, 5, 2,
                   "micro-batches (5) must be a multiple of the pipeline size 2 for the interleaved "
                   "schedule");
    expect_invalid(PL_PP_INTERLEAVED, 4, 6, 3, "micro-batches (6) must be a multiple of the pipeline size 4");
    expect_invalid(PL_PP_INTERLEAVED, 4, 8, 1,
                   "the interleaved schedule needs at least 2 model chunks per rank "
                   "(--num-layers-per-virtual-pipeline-stage or --virtual-pipeline-model-parallel-size), "
                   "got 1");
    expect_invalid(PL_PP_INTERLEAVED, 1, 4, 2,
                   "the interleaved schedule needs --pipeline-model-parallel-size of at least 2, got 1");
    expect_invalid(PL_PP_NONE, 2, 4, 1,
                   "the none schedule (no pipelining) needs --pipeline-model-parallel-size 1, got 2");
    expect_invalid(PL_PP_1F1B, 4, 8, 2, "the 1f1b schedule runs one model chunk per rank, got 2");
    expect_invalid(PL_PP_ZB_H1, 4, 8, 2, "the zb-h1 schedule runs one model chunk per rank, got 2");
    expect_invalid(PL_PP_GPIPE, 0, 8, 1, "--pipeline-model-parallel-size must be at least 1, got 0");
    expect_invalid(PL_PP_1F1B, 2, 0, 1, "the 1f1b schedule needs at least 1 micro-batch per step, got 0");
    expect_invalid(PL_PP_1F1B, 2, 4, 0, "at least 1 model chunk per rank, got 0");
    expect_invalid(PL_PP_NKINDS, 2, 4, 1, "unknown pipeline schedule kind");
    expect_invalid(PL_PP_INTERLEAVED, 1 << 12, 1 << 12, 1 << 8, "is too large");

    pl_pp_spec ok = {.kind = PL_PP_1F1B, .stages = 2, .micro_batches = 4, .chunks = 1};
    int n;
    CHECK(pl_pp_schedule_rank(&ok, 2, NULL, &n) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "pipeline rank 2 is outside 0..1"),
          "rank 2 of 2: %s", pl_error_msg());
    CHECK(pl_pp_schedule_rank(&ok, -1, NULL, &n) == PL_ERR_ARG, "rank -1 accepted");
}

TEST(kind_names_parse_case_insensitively_with_aliases)
{
    static const struct {
        const char *name;
        pl_pp_kind kind;
    } cases[] = {
        {"none", PL_PP_NONE},         {"no-pipelining", PL_PP_NONE},   {"gpipe", PL_PP_GPIPE},
        {"GPipe", PL_PP_GPIPE},       {"1f1b", PL_PP_1F1B},            {"1F1B", PL_PP_1F1B},
        {"pipedream-flush", PL_PP_1F1B}, {"interleaved", PL_PP_INTERLEAVED},
        {"interleaved-1f1b", PL_PP_INTERLEAVED}, {"zb-h1", PL_PP_ZB_H1}, {"ZBH1", PL_PP_ZB_H1},
        {"zero-bubble-h1", PL_PP_ZB_H1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pl_pp_kind k = PL_PP_NKINDS;
        CHECK_OK(pl_pp_kind_parse(cases[i].name, &k));
        CHECK(k == cases[i].kind, "%s -> %d", cases[i].name, (int)k);
    }
    for (int k = 0; k < PL_PP_NKINDS; k++) {
        pl_pp_kind back = PL_PP_NKINDS;
        CHECK_OK(pl_pp_kind_parse(pl_pp_kind_name((pl_pp_kind)k), &back));
        CHECK(back == (pl_pp_kind)k, "%s does not parse back", pl_pp_kind_name((pl_pp_kind)k));
    }
    pl_pp_kind k;
    CHECK(pl_pp_kind_parse("1f1b-interleaved", &k) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "unknown pipeline schedule '1f1b-interleaved'") &&
              strstr(pl_error_msg(), "none, gpipe, 1f1b, interleaved or zb-h1"),
          "message: %s", pl_error_msg());
    CHECK(pl_pp_kind_parse("", &k) == PL_ERR_ARG, "empty name accepted");
    CHECK(pl_pp_kind_default(1, 1) == PL_PP_NONE && pl_pp_kind_default(4, 1) == PL_PP_1F1B &&
              pl_pp_kind_default(4, 2) == PL_PP_INTERLEAVED,
          "Megatron's default choice");
}

/* ---- transfer ids, timeline, allocation ------------------------------------------------- */

/* Ids are dense: every id in [0, count) is used by exactly one send and one receive. */
TEST(transfer_ids_are_dense_and_shared_by_send_and_receive)
{
    pl_pp_spec spec = {.kind = PL_PP_INTERLEAVED, .stages = 3, .micro_batches = 6, .chunks = 2};
    pl_pp_schedule s;
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    int T = pl_pp_transfer_count(&spec), sends[128] = {0}, recvs[128] = {0};
    CHECK(T == 2 * 6 * 5 && T <= 128, "count %d", T);
    for (int r = 0; r < 3; r++) {
        int n;
        const pl_pp_action *list = pl_pp_schedule_list(&s, r, &n);
        for (int i = 0; i < n; i++) {
            int id = pl_pp_transfer_id(&spec, r, &list[i]);
            int transfer = list[i].op >= PL_PP_RECV_ACT;
            CHECK(transfer ? id >= 0 && id < T : id == -1, "rank %d action %d: id %d", r, i, id);
            if (transfer && id >= 0 && id < T)
                (list[i].op == PL_PP_RECV_ACT || list[i].op == PL_PP_RECV_GRAD ? recvs : sends)[id]++;
        }
    }
    for (int id = 0; id < T; id++)
        CHECK(sends[id] == 1 && recvs[id] == 1, "id %d: %d sends, %d receives", id, sends[id], recvs[id]);
    pl_pp_schedule_free(&s);
}

/* 1F1B, P=2, m=2 by hand: rank 1 gets mb 0 at t=1 and returns its gradient at t=4; rank 0
 * idles 2 units waiting, and 1 more for mb 1's gradient. 9 = 3 (m + P - 1). */
TEST(timeline_of_1f1b_p2_m2)
{
    pl_pp_spec spec = {.kind = PL_PP_1F1B, .stages = 2, .micro_batches = 2, .chunks = 1};
    pl_pp_schedule s;
    char *text = NULL;
    CHECK_OK(pl_pp_schedule_init(&s, &spec));
    CHECK_OK(pl_pp_schedule_timeline(&s, &text));
    const char *want = "rank 0 | F0 F1 .  .  B0 B0 .  B1 B1 | idle 3\n"
                       "rank 1 | .  F0 B0 B0 F1 B1 B1 .  .  | idle 1\n"
                       "makespan 9, busy 6 per rank, bubble 3/6 = 0.5000\n";
    CHECK(text && strcmp(text, want) == 0, "got:\n%s\nwant:\n%s", text ? text : "(null)", want);
    pl_free(text);
    pl_pp_schedule_free(&s);
}

TEST(allocation_failures_return_nomem_and_leak_nothing)
{
    pl_pp_spec spec = {.kind = PL_PP_ZB_H1, .stages = 4, .micro_batches = 6, .chunks = 1};
    int64_t live0 = pl_alloc_live();
    int n;
    for (n = 0; n < 100; n++) {
        pl_pp_schedule s;
        char *text = NULL;
        pl_alloc_fail_after(n);
        pl_status st = pl_pp_schedule_init(&s, &spec);
        if (st == PL_OK) {
            st = pl_pp_schedule_check(&s, NULL, NULL);
            if (st == PL_OK)
                st = pl_pp_schedule_timeline(&s, &text);
            pl_pp_schedule_free(&s);
        }
        pl_alloc_fail_after(-1);
        pl_free(text);
        CHECK(st == PL_OK || st == PL_ERR_NOMEM, "n=%d: %s", n, pl_error_msg());
        CHECK(pl_alloc_live() == live0, "n=%d: %lld blocks leaked", n, (long long)(pl_alloc_live() - live0));
        if (st == PL_OK)
            break;
    }
    CHECK(n > 2 && n < 100, "succeeded after %d allocations", n);
}

/* ---- printing for docs/pipeline.md ------------------------------------------------------- */

static void print_timeline(pl_pp_kind kind, int P, int m, int v)
{
    pl_pp_spec spec = {.kind = kind, .stages = P, .micro_batches = m, .chunks = v};
    pl_pp_schedule s;
    char *text = NULL;
    if (pl_pp_schedule_init(&s, &spec) == PL_OK && pl_pp_schedule_timeline(&s, &text) == PL_OK)
        printf("\n%s P=%d m=%d v=%d\n%s", pl_pp_kind_name(kind), P, m, v, text);
    else
        printf("%s\n", pl_error_msg());
    pl_free(text);
    pl_pp_schedule_free(&s);
}

static void print_for_docs(void)
{
    print_timeline(PL_PP_NONE, 1, 3, 1);
    print_timeline(PL_PP_GPIPE, 4, 4, 1);
    print_timeline(PL_PP_1F1B, 4, 8, 1);
    print_timeline(PL_PP_1F1B, 4, 2, 1);
    print_timeline(PL_PP_INTERLEAVED, 2, 4, 2);
    print_timeline(PL_PP_INTERLEAVED, 4, 4, 2);
    print_timeline(PL_PP_ZB_H1, 4, 8, 1);
    print_timeline(PL_PP_ZB_H1, 4, 2, 1);

    printf("\nmeasured bubble (makespan - busy) / busy under unit costs\n");
    printf("%3s %3s | %-8s %-8s %-8s %-8s %-8s %-8s\n", "P", "m", "gpipe", "1f1b", "zb-h1",
           "int v=2", "int v=3", "int v=4");
    static const int Ps[] = {2, 4, 8}, ms[] = {1, 2, 4, 8, 16};
    for (size_t i = 0; i < sizeof Ps / sizeof *Ps; i++)
        for (size_t j = 0; j < sizeof ms / sizeof *ms; j++) {
            printf("%3d %3d |", Ps[i], ms[j]);
            static const struct {
                pl_pp_kind kind;
                int v;
            } cols[] = {{PL_PP_GPIPE, 1}, {PL_PP_1F1B, 1}, {PL_PP_ZB_H1, 1},
                        {PL_PP_INTERLEAVED, 2}, {PL_PP_INTERLEAVED, 3}, {PL_PP_INTERLEAVED, 4}};
            for (size_t c = 0; c < sizeof cols / sizeof *cols; c++) {
                pl_pp_spec spec = {.kind = cols[c].kind, .stages = Ps[i], .micro_batches = ms[j],
                                   .chunks = cols[c].v};
                pl_pp_schedule s;
                pl_pp_stats st;
                if (pl_pp_schedule_init(&s, &spec) != PL_OK) {
                    printf(" %-8s", "-");
                    continue;
                }
                if (pl_pp_schedule_check(&s, &st, NULL) == PL_OK)
                    printf(" %-8.4f", (double)(st.makespan - st.busy) / (double)st.busy);
                else
                    printf(" %-8s", "FAIL");
                pl_pp_schedule_free(&s);
            }
            printf("\n");
        }
}

/* The simulation with measured costs: unit costs give the checker's idle times; with
 * F and B the same on every stage, 1F1B and GPipe take (m+P-1)(F+B), stage 0 idling
 * (P-1)(F+B), the balanced-pipeline formula; scaling every cost scales the step. */
TEST(simulation_with_measured_costs)
{
    const pl_pp_kind kinds[] = {PL_PP_GPIPE, PL_PP_1F1B, PL_PP_INTERLEAVED, PL_PP_ZB_H1};
    for (size_t ki = 0; ki < 4; ki++)
        for (int P = 2; P <= 4; P++)
            for (int m = P; m <= 8; m += P) {
                const int v = kinds[ki] == PL_PP_INTERLEAVED ? 2 : 1;
                pl_pp_spec spec = {kinds[ki], P, m, v};
                pl_pp_schedule s;
                CHECK_OK(pl_pp_schedule_init(&s, &spec));
                double unit[16], scaled[16], odd[16], mk, mk3, idle[4], idle3[4];
                int64_t idle_check[4];
                pl_pp_stats st;
                for (int r = 0; r < P; r++) {
                    const double c[4] = {1, 2, 1, 1}, o[4] = {1.5, 2.5, 1.25, 1.25};
                    for (int k = 0; k < 4; k++)
                        unit[r * 4 + k] = c[k], scaled[r * 4 + k] = 3 * c[k], odd[r * 4 + k] = o[k];
                }
                CHECK_OK(pl_pp_schedule_check(&s, &st, idle_check));
                CHECK_OK(pl_pp_schedule_simulate(&s, unit, &mk, idle));
                CHECK_OK(pl_pp_schedule_simulate(&s, scaled, &mk3, idle3));
                CHECK(mk == (double)st.makespan && mk3 == 3 * mk, "%s P %d m %d: makespan %g, "
                      "%g scaled, checker %lld", pl_pp_kind_name(spec.kind), P, m, mk, mk3,
                      (long long)st.makespan);
                for (int r = 0; r < P; r++)
                    CHECK(idle[r] == (double)idle_check[r] && idle3[r] == 3 * idle[r],
                          "%s P %d m %d stage %d: idle %g, checker %lld",
                          pl_pp_kind_name(spec.kind), P, m, r, idle[r], (long long)idle_check[r]);
                if (spec.kind == PL_PP_1F1B || spec.kind == PL_PP_GPIPE) {
                    CHECK_OK(pl_pp_schedule_simulate(&s, odd, &mk, idle));
                    CHECK(mk == (m + P - 1) * (1.5 + 2.5) && idle[0] == (P - 1) * (1.5 + 2.5),
                          "%s P %d m %d: makespan %g, (m+P-1)(F+B) = %g; stage 0 idle %g, "
                          "(P-1)(F+B) = %g", pl_pp_kind_name(spec.kind), P, m, mk,
                          (m + P - 1) * 4.0, idle[0], (P - 1) * 4.0);
                }
                pl_pp_schedule_free(&s);
            }
}

int main(void)
{
    RUN(simulation_with_measured_costs);
    RUN(every_kind_passes_the_checker_with_its_formula_bubble);
    RUN(one_f_one_b_p2_m3_is_megatrons_order);
    RUN(interleaved_p2_v2_m4_is_megatrons_order);
    RUN(zb_h1_p2_m3_splits_backwards_and_defers_weights);
    RUN(none_and_gpipe_small_orders);
    RUN(rank_builder_counts_then_fills);
    RUN(checker_reports_a_deadlock);
    RUN(checker_reports_a_receive_after_its_use);
    RUN(checker_reports_a_dropped_send);
    RUN(checker_reports_too_many_activations_in_flight);
    RUN(checker_reports_bad_computations_and_peers);
    RUN(invalid_shapes_are_refused_naming_what_is_wrong);
    RUN(kind_names_parse_case_insensitively_with_aliases);
    RUN(transfer_ids_are_dense_and_shared_by_send_and_receive);
    RUN(timeline_of_1f1b_p2_m2);
    RUN(allocation_failures_return_nomem_and_leak_nothing);
    const char *print = getenv("PLAIT_PP_PRINT");
    if (print && *print && strcmp(print, "0") != 0)
        print_for_docs();
    return test_summary("pp_schedule");
}
