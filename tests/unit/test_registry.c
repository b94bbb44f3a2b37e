/* model/registry: TP slicing, flat-buffer layout, layout-independent init. */
#include "base/alloc.h"
#include "model/config.h"
#include "model/registry.h"
#include "model/spec.h"
#include "test.h"

static void add_demo(pl_registry *r, int stages)
{
    pl_param_spec specs[] = {
        {"embedding.word_embeddings.weight", 2, {64, 8}, PL_TP_VOCAB, 0, -1, 1, PL_INIT_NORMAL, 0.02f, 0, 0},
        {"decoder.layers.0.self_attention.linear_qkv.weight", 2, {24, 8}, PL_TP_ROWS, 0, 0, 1, PL_INIT_NORMAL, 0.02f, 0, 0},
        {"decoder.layers.0.self_attention.linear_qkv.bias", 1, {24}, PL_TP_ROWS, 0, 0, 0, PL_INIT_ZEROS, 0, 0, 0},
        {"decoder.layers.0.self_attention.linear_proj.weight", 2, {8, 8}, PL_TP_COLS, 0, 0, 1, PL_INIT_NORMAL, 0.01f, 0, 0},
        {"decoder.layers.0.input_layernorm.weight", 1, {8}, PL_TP_REPLICATED, 0, 0, 0, PL_INIT_ONES, 0, 0, 0},
        {"decoder.final_layernorm.weight", 1, {8}, PL_TP_REPLICATED, stages - 1, -1, 0, PL_INIT_ONES, 0, 0, 0},
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
    pl_param_spec bad = {"odd", 2, {7, 8}, PL_TP_ROWS, 0, 0, 1, PL_INIT_NORMAL, 0.02f, 0, 0};
    pl_status st = pl_registry_add(&r, &bad);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "odd") &&
              strstr(pl_error_msg(), "--tensor-model-parallel-size 2"),
          "%s", pl_error_msg());
    pl_registry_free(&r);
}

/* Relative positions pipelined (T5 with transformers' layer, 4 stages, split rank 2): each
 * stack's bias table on its first stage (0, 2) and a tied copy on its later stage (1, 3),
 * drawing the original's stream, ahead of the stage's layers; the copies' names map back to
 * their originals and no other name does. */
TEST(a_pipelined_stack_holds_its_bias_table_on_every_stage)
{
    pl_model_config c = {.num_layers = 2, .dec_layers = 2, .hidden = 16, .heads = 2,
                         .query_groups = 2, .ffn_hidden = 32, .seq_length = 8,
                         .dec_seq_length = 4, .max_positions = 8, .vocab_size = 50,
                         .divisible_by = 8, .init_std = 0.02, .pp_split = 2,
                         .rel_buckets = 8, .rel_max_distance = 20};
    pl_family_apply(&c, PL_FAMILY_T5);
    c.block.pos = PL_POS_RELATIVE;
    c.padded_vocab = pl_model_padded_vocab(c.vocab_size, 8, 1);
    static const char enc[] = "encoder_relative_pos_emb.relative_attention_bias.weight";
    static const char dec[] = "decoder_relative_pos_emb.relative_attention_bias.weight";
    const struct {
        const char *name, *orig;
        int stage;
    } where[] = {
        {enc, NULL, 0},
        {"encoder_relative_pos_emb.stage1.relative_attention_bias.weight", enc, 1},
        {dec, NULL, 2},
        {"decoder_relative_pos_emb.stage3.relative_attention_bias.weight", dec, 3},
    };
    for (int r = 0; r < 4; r++) {
        pl_registry reg;
        pl_registry_init(&reg, 1, 0, r);
        CHECK_OK(pl_model_register(&reg, &c, 4));
        for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
            const pl_param *p = pl_registry_find(&reg, where[i].name);
            CHECK(p && p->stage == where[i].stage && (p->offset >= 0) == (r == where[i].stage) &&
                      p->tied_copy == (where[i].orig != NULL) &&
                      p->shape[0] == 8 && p->shape[1] == 2,
                  "stage %d: %s", r, where[i].name);
            CHECK(pl_model_tied_original(where[i].name) == where[i].orig ||
                      (where[i].orig && pl_model_tied_original(where[i].name) &&
                       strcmp(pl_model_tied_original(where[i].name), where[i].orig) == 0),
                  "%s's original", where[i].name);
            if (p && where[i].orig)
                CHECK(p->init_stream == pl_registry_find(&reg, where[i].orig)->init_stream,
                      "%s draws its original's values", where[i].name);
            if (p && r == where[i].stage)
                CHECK(p->offset == 0 || where[i].stage != 1, "the copy opens stage 1's buffer");
        }
        pl_registry_free(&reg);
    }
    static const char *const not_copies[] = {
        "encoder_relative_pos_emb.stage0.relative_attention_bias.weight",
        "encoder_relative_pos_emb.stagex.relative_attention_bias.weight",
        "encoder_relative_pos_emb.stage1.relative_attention_bias.weightx",
        "decoder_relative_pos_emb.stage2.relative_attention_bias"};
    for (size_t i = 0; i < sizeof not_copies / sizeof *not_copies; i++)
        CHECK(!pl_model_tied_original(not_copies[i]), "%s is no copy", not_copies[i]);
}

/* 8 query heads in 2 groups of head size 2 (QKV rows per group: 4 q heads, k, v =
 * 12 rows, 24 in all) over TP 4: each group is shared by 2 ranks. Rank r holds 2
 * query heads then its group's k, v; over the ranks every query row appears once,
 * every k, v row twice (once per sharer), and nothing else. */
TEST(shared_key_value_groups_map_each_rank_to_its_heads_and_its_groups_k_v)
{
    enum { NH = 8, G = 2, HS = 2, C = 3, TP = 4, ROWS = (NH + 2 * G) * HS };
    int seen[ROWS] = {0};
    for (int rank = 0; rank < TP; rank++) {
        pl_registry r;
        pl_registry_init(&r, TP, rank, 0);
        pl_param_spec s = {"qkv", 2, {ROWS, C}, PL_TP_QKV_SHARED_KV, 0, 0, 1, PL_INIT_NORMAL,
                           0.02f, NH, G};
        CHECK_OK(pl_registry_add(&r, &s));
        const pl_param *p = &r.params[0];
        CHECK(p->local_shape[0] == (NH / TP + 2) * HS && p->kv_replica == rank % 2,
              "rank %d: %lld local rows, replica %d", rank, (long long)p->local_shape[0],
              p->kv_replica);
        const int g = rank / 2;
        for (int64_t a = 0; a < p->local_shape[0]; a++) {
            const int64_t row = pl_param_global_index(p, a, 0) / C;
            /* within its group's 12 rows: q heads 0..3 (8 rows), then k (2), v (2) */
            const int64_t in_group = row - g * (NH / G + 2) * HS;
            const int64_t want = a < NH / TP * HS ? (rank % 2) * NH / TP * HS + a
                                                  : NH / G * HS + (a - NH / TP * HS);
            CHECK(in_group == want && pl_param_global_index(p, a, 2) == row * C + 2,
                  "rank %d local row %lld: global row %lld", rank, (long long)a, (long long)row);
            seen[row]++;
        }
        pl_registry_free(&r);
    }
    for (int row = 0; row < ROWS; row++) {
        const int kv = row % ((NH / G + 2) * HS) >= NH / G * HS;
        CHECK(seen[row] == (kv ? 2 : 1), "global row %d held %d times", row, seen[row]);
    }
    pl_registry r;
    pl_registry_init(&r, 4, 0, 0);
    pl_param_spec bad = {"qkv3", 2, {(6 + 6) * 2, C}, PL_TP_QKV_SHARED_KV, 0, 0, 1,
                         PL_INIT_NORMAL, 0.02f, 6, 3};
    CHECK(pl_registry_add(&r, &bad) == PL_ERR_ARG && strstr(pl_error_msg(), "qkv3"),
          "3 groups over TP 4 refused: %s", pl_error_msg());
    pl_registry_free(&r);
}

/* Megatron's interleaving: chunk k of rank r is virtual stage k P + r. 8 layers, P 2,
 * v 2: rank 0 holds layers 0-1 and 4-5, rank 1 layers 2-3 and 6-7; the registry puts
 * each layer's parameters on its rank. */
TEST(model_chunks_hold_the_layers_of_their_virtual_stage)
{
    pl_model_config c = {.num_layers = 8, .hidden = 16, .heads = 2, .query_groups = 2,
                         .ffn_hidden = 32, .seq_length = 8, .max_positions = 8,
                         .vocab_size = 50, .divisible_by = 8, .init_std = 0.02, .pp_chunks = 2};
    pl_family_apply(&c, PL_FAMILY_GPT);
    c.padded_vocab = pl_model_padded_vocab(c.vocab_size, 8, 1);
    const int64_t want[2][2] = {{0, 4}, {2, 6}};
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 2; k++) {
            int64_t l0 = -1, nl = -1;
            CHECK_OK(pl_model_chunk_layers(&c, 2, r, k, &l0, &nl));
            CHECK(l0 == want[r][k] && nl == 2, "rank %d chunk %d: [%lld, +%lld)", r, k,
                  (long long)l0, (long long)nl);
        }
    for (int64_t l = 0; l < 8; l++)
        CHECK(pl_model_layer_stage(&c, 2, l) == (int)(l / 2 % 2), "layer %lld", (long long)l);
    pl_registry reg;
    pl_registry_init(&reg, 1, 0, 1);
    CHECK_OK(pl_model_register(&reg, &c, 2));
    const pl_param *p5 = pl_registry_find(&reg, "decoder.layers.5.mlp.linear_fc1.weight");
    const pl_param *p6 = pl_registry_find(&reg, "decoder.layers.6.mlp.linear_fc1.weight");
    CHECK(p5 && p5->stage == 0 && p5->offset == -1, "layer 5 on rank 0, not here (rank 1)");
    CHECK(p6 && p6->stage == 1 && p6->offset >= 0, "layer 6 here, on rank 1");
    pl_registry_free(&reg);
    c.num_layers = 6;
    int64_t l0, nl;
    pl_status st = pl_model_chunk_layers(&c, 2, 0, 0, &l0, &nl);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "--num-layers 6") &&
              strstr(pl_error_msg(), "--virtual-pipeline-model-parallel-size 2"),
          "%s", pl_error_msg());
    c.num_layers = 8;
    c.pp_first_layers = 3;
    st = pl_model_chunk_layers(&c, 2, 0, 0, &l0, &nl);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "--decoder-first"), "%s", pl_error_msg());
}

/* A pipelined encoder-decoder (T5, 4 stages, split rank 1): the encoder's 2 layers and its
 * final norm on stage 0, the decoder's 3 layers one per stage 1..3; stage 1 (the split)
 * holds copies of the word and position embeddings ahead of its layer, stage 3 the output
 * layer's copy; each copy draws its original's stream and is marked tied; a split rank
 * out of range or layers not dividing over their stages are refused, naming the flags. */
TEST(an_encoder_decoder_splits_its_stacks_at_the_split_rank)
{
    pl_model_config c = {.num_layers = 2, .dec_layers = 3, .hidden = 16, .heads = 2,
                         .query_groups = 2, .ffn_hidden = 32, .seq_length = 8,
                         .dec_seq_length = 4, .max_positions = 8, .vocab_size = 50,
                         .divisible_by = 8, .init_std = 0.02, .pp_split = 1};
    pl_family_apply(&c, PL_FAMILY_T5);
    c.padded_vocab = pl_model_padded_vocab(c.vocab_size, 8, 1);
    pl_model_config part[2];
    pl_model_encdec_parts(&c, &part[0], &part[1]);
    const int64_t want[4][2][2] = {{{0, 2}, {0, 0}}, {{0, 0}, {0, 1}}, {{0, 0}, {1, 1}},
                                   {{0, 0}, {2, 1}}};
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 2; k++) {
            int64_t l0 = -1, nl = -1;
            CHECK_OK(pl_model_stage_layers(&part[k], 4, r, &l0, &nl));
            CHECK(l0 == want[r][k][0] && nl == want[r][k][1], "stage %d, %s: [%lld, +%lld)", r,
                  k ? "decoder" : "encoder", (long long)l0, (long long)nl);
        }
    const struct {
        const char *name;
        int stage, tied;
    } where[] = {
        {"embedding.word_embeddings.weight", 0, 0},
        {"encoder.final_layernorm.weight", 0, 0},
        {"encoder.layers.1.mlp.linear_fc1.weight", 0, 0},
        {"decoder_embedding.word_embeddings.weight", 1, 1},
        {"decoder_embedding.position_embeddings.weight", 1, 1},
        {"decoder.layers.0.mlp.linear_fc1.weight", 1, 0},
        {"decoder.layers.1.cross_attention.linear_q.weight", 2, 0},
        {"decoder.layers.2.mlp.linear_fc1.weight", 3, 0},
        {"decoder.final_layernorm.weight", 3, 0},
        {"output_layer.weight", 3, 1},
    };
    for (int r = 0; r < 4; r++) {
        pl_registry reg;
        pl_registry_init(&reg, 1, 0, r);
        CHECK_OK(pl_model_register(&reg, &c, 4));
        for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
            const pl_param *p = pl_registry_find(&reg, where[i].name);
            CHECK(p && p->stage == where[i].stage && (p->offset >= 0) == (r == where[i].stage) &&
                      p->tied_copy == where[i].tied,
                  "stage %d: %s", r, where[i].name);
            const char *orig = pl_model_tied_original(where[i].name);
            if (p && where[i].tied)
                CHECK(orig && p->init_stream == pl_registry_find(&reg, orig)->init_stream,
                      "%s draws %s's values", where[i].name, orig ? orig : "?");
        }
        if (r == 1) /* the copies precede the stage's first layer */
            CHECK(pl_registry_find(&reg, "decoder_embedding.word_embeddings.weight")->offset == 0,
                  "the word embeddings' copy opens stage 1's buffer");
        pl_registry_free(&reg);
    }
    /* S = P - 1: the split stage's word embeddings are the output layer (no third copy) */
    pl_registry reg;
    pl_registry_init(&reg, 1, 0, 1);
    CHECK_OK(pl_model_register(&reg, &c, 2));
    CHECK(!pl_registry_find(&reg, "output_layer.weight"), "no output layer copy at P = 2, S = 1");
    pl_registry_free(&reg);
    const struct {
        int64_t split, dec_layers;
        int pp;
        const char *msg;
    } bad[] = {
        {4, 3, 4, "--pipeline-model-parallel-split-rank 4 must be in 1..3"},
        {0, 3, 2, "--pipeline-model-parallel-split-rank 0 must be in 1..1"},
        {1, 2, 4, "--decoder-num-layers 2 is not divisible by its 3 pipeline stages"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        c.pp_split = bad[i].split;
        c.dec_layers = bad[i].dec_layers;
        pl_registry_init(&reg, 1, 0, 0);
        pl_status st = pl_model_register(&reg, &c, bad[i].pp);
        CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), bad[i].msg), "%s", pl_error_msg());
        pl_registry_free(&reg);
    }
}

/* The name index: 200,000 entries (a quadratic lookup would take minutes) are each
 * found at their own entry, an absent name is not, a duplicate is refused naming it,
 * and a failed allocation while the index grows leaves the registry as it was. */
TEST(the_name_index_finds_every_entry_and_refuses_duplicates)
{
    pl_registry r;
    pl_registry_init(&r, 1, 0, 0);
    char name[PL_PARAM_NAME_MAX];
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "decoder.layers.%d.mlp.linear_fc1.bias", i);
        pl_param_spec s = {name, 1, {4}, PL_TP_REPLICATED, 0, i, 0, PL_INIT_ZEROS, 0, 0, 0};
        CHECK_OK(pl_registry_add(&r, &s));
    }
    int misplaced = 0;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "decoder.layers.%d.mlp.linear_fc1.bias", i);
        const pl_param *p = pl_registry_find(&r, name);
        misplaced += !p || p != &r.params[i];
    }
    CHECK(misplaced == 0, "%d of %d names not found at their entry", misplaced, n);
    CHECK(pl_registry_find(&r, "decoder.layers.200000.mlp.linear_fc1.bias") == NULL, "absent");
    pl_param_spec dup = {"decoder.layers.7.mlp.linear_fc1.bias", 1, {4}, PL_TP_REPLICATED, 0, 7,
                         0, PL_INIT_ZEROS, 0, 0, 0};
    CHECK(pl_registry_add(&r, &dup) == PL_ERR_ARG && strstr(pl_error_msg(), "registered twice") &&
              strstr(pl_error_msg(), "layers.7."),
          "%s", pl_error_msg());
    CHECK(r.n == n, "a refused add changed the count: %d", r.n);
    pl_registry_free(&r);

    pl_registry small;
    pl_registry_init(&small, 1, 0, 0);
    int64_t live = pl_alloc_live();
    int failed = 0;
    for (int i = 0; i < 200 && !failed; i++) { /* the index grows at 64 entries: fail it */
        snprintf(name, sizeof name, "p%d", i);
        pl_param_spec s = {name, 1, {4}, PL_TP_REPLICATED, 0, -1, 0, PL_INIT_ZEROS, 0, 0, 0};
        pl_alloc_fail_after(i == 64 ? 0 : -1);
        if (pl_registry_add(&small, &s) != PL_OK) {
            failed = 1;
            CHECK(i == 64 && small.n == 64 && strstr(pl_error_msg(), "out of memory"),
                  "entry %d: %s (n %d)", i, pl_error_msg(), small.n);
        }
    }
    pl_alloc_fail_after(-1);
    CHECK(failed, "the injected failure was not reported");
    CHECK(pl_registry_find(&small, "p63") == &small.params[63], "entries before the failure");
    pl_registry_free(&small);
    CHECK(pl_alloc_live() == live, "%lld blocks leaked", (long long)(pl_alloc_live() - live));
}

int main(void)
{
    RUN(the_name_index_finds_every_entry_and_refuses_duplicates);
    RUN(model_chunks_hold_the_layers_of_their_virtual_stage);
    RUN(an_encoder_decoder_splits_its_stacks_at_the_split_rank);
    RUN(a_pipelined_stack_holds_its_bias_table_on_every_stage);
    RUN(shared_key_value_groups_map_each_rank_to_its_heads_and_its_groups_k_v);
    RUN(tp_slices_draw_the_same_global_values_as_one_rank);
    RUN(layout_offsets_splits_and_stages);
    return test_summary("registry");
}
