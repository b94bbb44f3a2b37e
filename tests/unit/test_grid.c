/* parallel/grid: layout arithmetic without MPI, checked against Megatron's own example.
 *
 * The 16-rank example is the docstring of initialize_model_parallel in Megatron-LM's
 * megatron/core/parallel_state.py (16 GPUs, TP=2, PP=4, so DP=2), quoted in
 * shared/reference/megatron-facts.md section 6; the embedding groups follow its rule
 * (first and last rank of every pipeline group). */
#include "base/status.h"
#include "parallel/grid.h"
#include "test.h"

typedef struct expected_groups {
    int ngroups, size;
    int ranks[16][8];
} expected_groups;

/* Every group of kind g, as seen from each of its members, equals one expected row. */
static void check_groups(const pl_grid_layout *l, pl_grid_group g, const expected_groups *e)
{
    CHECK(pl_grid_group_count(l, g) == e->ngroups, "%s: %d groups, expected %d",
          pl_grid_group_name(g), pl_grid_group_count(l, g), e->ngroups);
    CHECK(pl_grid_group_size(l, g) == e->size, "%s: size %d, expected %d", pl_grid_group_name(g),
          pl_grid_group_size(l, g), e->size);
    for (int i = 0; i < e->ngroups; i++) {
        for (int j = 0; j < e->size; j++) {
            int r = e->ranks[i][j], got[16];
            int n = pl_grid_group_members(l, g, r, got);
            CHECK(n == e->size, "%s group of rank %d has %d members", pl_grid_group_name(g), r, n);
            for (int k = 0; k < n && k < e->size; k++)
                CHECK(got[k] == e->ranks[i][k], "%s group of rank %d: member %d is %d, expected %d",
                      pl_grid_group_name(g), r, k, got[k], e->ranks[i][k]);
            CHECK(pl_grid_group_index(l, g, r) >= 0, "%s: rank %d has no group index",
                  pl_grid_group_name(g), r);
        }
    }
}

TEST(megatron_example_16_ranks_tp2_pp4)
{
    pl_grid_layout l;
    CHECK_OK(pl_grid_layout_init(&l, 16, 2, 4));
    CHECK(l.dp == 2, "dp %d", l.dp);
    static const expected_groups tp = {8, 2, {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11},
                                              {12, 13}, {14, 15}}};
    static const expected_groups dp = {8, 2, {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11},
                                              {12, 14}, {13, 15}}};
    static const expected_groups pp = {4, 4, {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14},
                                              {3, 7, 11, 15}}};
    static const expected_groups mp = {2, 8, {{0, 1, 4, 5, 8, 9, 12, 13},
                                              {2, 3, 6, 7, 10, 11, 14, 15}}};
    static const expected_groups embd = {4, 2, {{0, 12}, {1, 13}, {2, 14}, {3, 15}}};
    check_groups(&l, PL_GRID_TP, &tp);
    check_groups(&l, PL_GRID_DP, &dp);
    check_groups(&l, PL_GRID_PP, &pp);
    check_groups(&l, PL_GRID_MP, &mp);
    check_groups(&l, PL_GRID_EMBD, &embd);
    int got[16];
    for (int r = 4; r < 12; r++) /* stages 1 and 2 hold no embedding */
        CHECK(pl_grid_group_members(&l, PL_GRID_EMBD, r, got) == 0 &&
                  pl_grid_group_index(&l, PL_GRID_EMBD, r) == -1,
              "middle-stage rank %d is in an embedding group", r);
}

TEST(rank_and_coords_are_inverse_in_megatron_order)
{
    static const int layouts[][3] = {{1, 1, 1}, {8, 2, 2}, {8, 1, 8}, {8, 8, 1}, {12, 3, 2}, {24, 2, 3}};
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        pl_grid_layout l;
        CHECK_OK(pl_grid_layout_init(&l, layouts[i][0], layouts[i][1], layouts[i][2]));
        for (int r = 0; r < l.world; r++) {
            int t, d, p;
            pl_grid_coords(&l, r, &t, &d, &p);
            CHECK(t == r % l.tp && d == (r / l.tp) % l.dp && p == r / (l.tp * l.dp),
                  "rank %d -> (%d,%d,%d)", r, t, d, p);
            CHECK(pl_grid_rank(&l, t, d, p) == r, "rank of (%d,%d,%d) is %d, expected %d", t, d, p,
                  pl_grid_rank(&l, t, d, p), r);
        }
    }
}

/* Each kind's groups partition the member ranks, every member lists the same group, and
 * the group index agrees: for every layout of 12 ranks. */
TEST(groups_partition_the_ranks_for_every_layout_of_12)
{
    for (int tp = 1; tp <= 12; tp++)
        for (int pp = 1; pp <= 12; pp++) {
            pl_grid_layout l;
            if (12 % (tp * pp))
                continue;
            CHECK_OK(pl_grid_layout_init(&l, 12, tp, pp));
            for (int g = 0; g < PL_GRID_NGROUPS; g++) {
                int seen[12] = {0}, members[12], other[12];
                for (int r = 0; r < 12; r++) {
                    int n = pl_grid_group_members(&l, (pl_grid_group)g, r, members);
                    int idx = pl_grid_group_index(&l, (pl_grid_group)g, r);
                    if (n == 0) {
                        CHECK(g == PL_GRID_EMBD && idx == -1, "tp%d pp%d %s: rank %d in no group",
                              tp, pp, pl_grid_group_name((pl_grid_group)g), r);
                        continue;
                    }
                    CHECK(n == pl_grid_group_size(&l, (pl_grid_group)g), "size %d", n);
                    CHECK(idx >= 0 && idx < pl_grid_group_count(&l, (pl_grid_group)g), "index %d", idx);
                    int self = 0;
                    for (int k = 0; k < n; k++) {
                        self += members[k] == r;
                        CHECK(pl_grid_group_index(&l, (pl_grid_group)g, members[k]) == idx,
                              "tp%d pp%d %s: members %d and %d differ in index", tp, pp,
                              pl_grid_group_name((pl_grid_group)g), r, members[k]);
                        int m = pl_grid_group_members(&l, (pl_grid_group)g, members[k], other);
                        CHECK(m == n && memcmp(other, members, sizeof(int) * (size_t)n) == 0,
                              "tp%d pp%d %s: ranks %d and %d list different members", tp, pp,
                              pl_grid_group_name((pl_grid_group)g), r, members[k]);
                        if (k > 0 && g != PL_GRID_EMBD)
                            CHECK(members[k] > members[k - 1], "members not ascending");
                    }
                    CHECK(self == 1, "rank %d appears %d times in its own group", r, self);
                    seen[r]++;
                }
                int covered = 0;
                for (int r = 0; r < 12; r++)
                    covered += seen[r];
                int want = g == PL_GRID_EMBD ? pl_grid_group_count(&l, PL_GRID_EMBD) *
                                                   pl_grid_group_size(&l, PL_GRID_EMBD)
                                             : 12;
                CHECK(covered == want, "tp%d pp%d %s: %d ranks covered, expected %d", tp, pp,
                      pl_grid_group_name((pl_grid_group)g), covered, want);
            }
        }
}

TEST(pp1_embedding_group_is_the_single_stage)
{
    pl_grid_layout l;
    CHECK_OK(pl_grid_layout_init(&l, 4, 2, 1));
    int m[4];
    for (int r = 0; r < 4; r++) {
        CHECK(pl_grid_group_members(&l, PL_GRID_EMBD, r, m) == 1 && m[0] == r,
              "rank %d: embedding group should be just itself", r);
    }
}

TEST(invalid_layouts_name_the_flags_and_world_size)
{
    pl_grid_layout l;
    CHECK(pl_grid_layout_init(&l, 6, 4, 1) == PL_ERR_ARG, "6 %% 4 accepted");
    const char *msg = pl_error_msg();
    CHECK(strstr(msg, "--tensor-model-parallel-size (4)") && strstr(msg, "--pipeline-model-parallel-size (1)") &&
              strstr(msg, "world size 6"),
          "message: %s", msg);
    CHECK(pl_grid_layout_init(&l, 4, 2, 4) == PL_ERR_ARG, "tp*pp > world accepted");
    CHECK(strstr(pl_error_msg(), "world size 4") != NULL, "message: %s", pl_error_msg());
    CHECK(pl_grid_layout_init(&l, 4, 0, 1) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "--tensor-model-parallel-size must be at least 1"),
          "tp 0: %s", pl_error_msg());
    CHECK(pl_grid_layout_init(&l, 4, 1, -2) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "--pipeline-model-parallel-size must be at least 1"),
          "pp -2: %s", pl_error_msg());
    /* tp*pp overflows int: must be computed wide, not wrap to a divisor of the world. */
    CHECK(pl_grid_layout_init(&l, 65536, 65536, 65536) == PL_ERR_ARG, "overflowing tp*pp accepted");
}

int main(void)
{
    RUN(megatron_example_16_ranks_tp2_pp4);
    RUN(rank_and_coords_are_inverse_in_megatron_order);
    RUN(groups_partition_the_ranks_for_every_layout_of_12);
    RUN(pp1_embedding_group_is_the_single_stage);
    RUN(invalid_layouts_name_the_flags_and_world_size);
    return test_summary("grid");
}
