/* model/registry: TP slicing, flat-buffer layout, layout-independent init. */
#include "base/alloc.h"
#include "model/registry.h"
#include "test.h"

static void add_demo(pl_registry *r, int stages)
{
    pl_param_spec specs[] = {
        {"embedding.word_embeddings.weight", 2, {64, 8}, PL_TP_VOCAB, 0, -1, 1, PL_INIT_NORMAL, 0.02f},
        {"decoder.layers.0.self_attention.linear_qkv.weight", 2, {24, 8}, PL_TP_ROWS, 0, 0, 1, PL_INIT_NORMAL, 0.02f},
        {"decoder.layers.0.self_attention.linear_qkv.bias", 1, {24}, PL_TP_ROWS, 0, 0, 0, PL_INIT_ZEROS, 0},
        {"decoder.layers.0.self_attention.linear_proj.weight", 2, {8, 8}, PL_TP_COLS, 0, 0, 1, PL_INIT_NORMAL, 0.01f},
        {"decoder.layers.0.input_layernorm.weight", 1, {8}, PL_TP_REPLICATED, 0, 0, 0, PL_INIT_ONES, 0},
        {"decoder.final_layernorm.weight", 1, {8}, PL_TP_REPLICATED, stages - 1, -1, 0, PL_INIT_ONES, 0},
    };
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
        CHECK_OK(pl_registry_add(r, &specs[i]));
}

TEST(tp_slices_draw_the_same_global_values_as_one_rank)
{
    pl_registry full;
    pl_registry_init(&full, 1, 0, 0);
    add_demo(&full, 1);
    float *w1 = pl_malloc((size_t)full.numel * sizeof(float));
    pl_registry_init_values(&full, w1, 1234);
    for (int tp = 2; tp <= 4; tp *= 2)
        for (int rank = 0; rank < tp; rank++) {
            pl_registry part;
            pl_registry_init(&part, tp, rank, 0);
            add_demo(&part, 1);
            float *wp = pl_malloc((size_t)part.numel * sizeof(float));
            pl_registry_init_values(&part, wp, 1234);
            for (int i = 0; i < part.n; i++) {
                const pl_param *p = &part.params[i], *q = &full.params[i];
                CHECK(p->offset % PL_PARAM_ALIGN == 0, "%s: offset %lld unaligned", p->name,
                      (long long)p->offset);
                for (int64_t a = 0; a < p->local_shape[0]; a++)
                    for (int64_t b = 0; b < p->local_shape[1]; b++) {
                        int64_t g = pl_param_global_index(p, a, b);
                        float x = wp[p->offset + a * p->local_shape[1] + b], y = w1[q->offset + g];
                        if (x != y) {
                            CHECK(x == y, "tp %d rank %d %s[%lld,%lld]: %g != %g", tp, rank,
                                  p->name, (long long)a, (long long)b, x, y);
                            goto next;
                        }
                    }
            }
        next:
            pl_free(wp);
            pl_registry_free(&part);
        }
    pl_free(w1);
    pl_registry_free(&full);
}

TEST(layout_offsets_splits_and_stages)
{
    pl_registry r;
    pl_registry_init(&r, 2, 1, 1);
    add_demo(&r, 2);
    const pl_param *qkv = pl_registry_find(&r, "decoder.layers.0.self_attention.linear_qkv.weight");
    const pl_param *proj = pl_registry_find(&r, "decoder.layers.0.self_attention.linear_proj.weight");
    const pl_param *fln = pl_registry_find(&r, "decoder.final_layernorm.weight");
    CHECK(qkv && qkv->local_shape[0] == 12 && qkv->slice_start[0] == 12 && qkv->offset == -1,
          "qkv rows split, other stage");
    CHECK(proj && proj->local_shape[1] == 4 && proj->slice_start[1] == 4, "proj column split");
    CHECK(fln && fln->offset == 0 && r.numel == PL_PARAM_ALIGN, "only the last stage's norm here");
    CHECK(pl_registry_find(&r, "nope") == NULL, "find of a missing name");
    pl_param_spec bad = {"odd", 2, {7, 8}, PL_TP_ROWS, 0, 0, 1, PL_INIT_NORMAL, 0.02f};
    pl_status st = pl_registry_add(&r, &bad);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "odd") &&
              strstr(pl_error_msg(), "--tensor-model-parallel-size 2"),
          "%s", pl_error_msg());
    pl_registry_free(&r);
}

int main(void)
{
    RUN(tp_slices_draw_the_same_global_values_as_one_rank);
    RUN(layout_offsets_splits_and_stages);
    return test_summary("registry");
}
