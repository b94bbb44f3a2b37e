/* ckpt/source and the offline writer: a checkpoint written in one TP x PP layout is
 * read back in others. The oracle is the registry's initialisation, whose values
 * are a function of (seed, tensor, global element) only (model/registry.h): each
 * layout's rank draws its own slice, so a slice read from another layout's files
 * must equal the slice this layout draws, bit for bit, for every split kind
 * (rows, columns, vocabulary, SwiGLU halves, grouped QKV with shared k/v, the tied
 * output layer's copy). Seeds 1, 2, 3 stand for the parameters and the two Adam
 * moments. Also: padding rows the checkpoint lacks read as zero, and every
 * allocation failure comes back as an error without leaks. */
#include "base/alloc.h"
#include "ckpt/checkpoint.h"
#include "ckpt/source.h"
#include "model/config.h"
#include "model/spec.h"
#include "test.h"

#include <stdint.h>

static pl_model_config model(pl_family f, int64_t vocab)
{
    pl_model_config c = {.num_layers = 4, .hidden = 32, .heads = 8, .query_groups = 2,
                         .ffn_hidden = 64, .seq_length = 8, .max_positions = 8,
                         .vocab_size = vocab, .divisible_by = 8, .init_std = 0.02, .ln_eps = 1e-5f,
                         .rope = {.base = 10000, .percent = 1, .factor = 8}};
    pl_family_apply(&c, f);
    if (f == PL_FAMILY_GPT)
        c.query_groups = c.heads;
    return c;
}

/* Writes seeds 1-3 of cfg at TP tp x PP pp into DIR (iteration 1). */
static pl_status save(const char *dir, pl_model_config cfg, int tp, int pp)
{
    cfg.padded_vocab = pl_model_padded_vocab(cfg.vocab_size, cfg.divisible_by, tp);
    pl_ckpt_meta meta = {.iteration = 1, .tp = tp, .pp = pp, .dp = 1, .beta1 = 0.9,
                         .beta2 = 0.999, .eps = 1e-8};
    meta.schedule.max_lr = 1e-3;
    meta.schedule.decay_steps = 10;
    char tmp[4200];
    pl_status st = pl_ckpt_write_begin(dir, 1, tmp, sizeof tmp);
    pl_registry reg = {0};
    for (int t = 0; t < tp && !st; t++)
        for (int p = 0; p < pp && !st; p++) {
            pl_registry_init(&reg, tp, t, p);
            st = pl_model_register(&reg, &cfg, pp);
            float *b[3] = {NULL, NULL, NULL};
            for (int k = 0; k < 3 && !st; k++) {
                b[k] = pl_malloc((size_t)reg.numel * sizeof(float));
                if (!b[k])
                    st = PL_ERR_NOMEM;
                else
                    pl_registry_init_values(&reg, b[k], (uint64_t)k + 1);
            }
            pl_ckpt_buffers buf = {&reg, b[0], b[1], b[2], NULL, 0};
            if (!st)
                st = pl_ckpt_write_rank(tmp, pp, &buf);
            for (int k = 0; k < 3; k++)
                pl_free(b[k]);
            pl_registry_free(&reg);
        }
    pl_registry_init(&reg, tp, 0, 0);
    if (!st)
        st = pl_model_register(&reg, &cfg, pp);
    if (!st)
        st = pl_ckpt_write_finish(dir, tmp, &cfg, &meta, &reg, 1);
    pl_registry_free(&reg);
    return st;
}

/* Every rank of TP tp x PP pp reads seeds 1-3 from DIR; returns the number of
 * elements that differ from the rank's own draw (padding rows past saved_rows
 * of the vocabulary tensors must be zero instead). */
static int64_t load_and_compare(const char *dir, pl_model_config cfg, int tp, int pp,
                                int64_t saved_rows)
{
    cfg.padded_vocab = pl_model_padded_vocab(cfg.vocab_size, cfg.divisible_by, tp);
    pl_ckpt_source *s;
    pl_status st = pl_ckpt_source_open(dir, 1, &s);
    CHECK(st == PL_OK, "open: %s", pl_error_msg());
    if (st)
        return -1;
    int64_t bad = 0;
    for (int t = 0; t < tp; t++)
        for (int p = 0; p < pp; p++) {
            pl_registry reg;
            pl_registry_init(&reg, tp, t, p);
            CHECK_OK(pl_model_register(&reg, &cfg, pp));
            float *got = pl_calloc((size_t)reg.numel, sizeof(float));
            float *want = pl_malloc((size_t)reg.numel * sizeof(float));
            for (int k = 0; k < 3; k++) {
                memset(got, 0, (size_t)reg.numel * sizeof(float));
                CHECK_OK(pl_ckpt_source_fill(s, &reg, (pl_ckpt_kind)k, got, 0, reg.numel));
                pl_registry_init_values(&reg, want, (uint64_t)k + 1);
                for (int i = 0; i < reg.n; i++) {
                    const pl_param *q = &reg.params[i];
                    if (q->offset < 0)
                        continue;
                    for (int64_t e = 0; e < q->numel; e++) {
                        const int64_t g = pl_param_global_index(q, e / q->local_shape[1],
                                                                e % q->local_shape[1]);
                        const int pad = q->split == PL_TP_VOCAB && g / q->shape[1] >= saved_rows;
                        const float w = pad ? 0.0f : want[q->offset + e];
                        bad += memcmp(&got[q->offset + e], &w, sizeof w) != 0;
                    }
                }
            }
            pl_free(got);
            pl_free(want);
            pl_registry_free(&reg);
        }
    pl_ckpt_source_close(s);
    return bad;
}

static char *dir_of(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/ckpt_reshard_%s", test_tmpdir(), name);
    return buf;
}

TEST(llama_slices_move_between_any_tp_and_pp)
{
    /* 8 heads in 2 key/value groups: TP 4 and 8 share each group's k, v (2 and 4
     * ranks), TP 1 and 2 split them; fc1 is SwiGLU's [gate; up] halves. 64 tokens pad
     * to 64 rows at every TP size here. */
    const pl_model_config c = model(PL_FAMILY_LLAMA, 64);
    const int from[][2] = {{4, 2}, {1, 1}, {2, 4}};
    const int to[][2] = {{1, 1}, {2, 1}, {8, 1}, {4, 2}, {2, 4}, {1, 4}};
    for (size_t a = 0; a < sizeof from / sizeof *from; a++) {
        char name[32];
        snprintf(name, sizeof name, "llama_%d_%d", from[a][0], from[a][1]);
        const char *dir = dir_of(name);
        CHECK_OK(save(dir, c, from[a][0], from[a][1]));
        for (size_t b = 0; b < sizeof to / sizeof *to; b++) {
            int64_t bad = load_and_compare(dir, c, to[b][0], to[b][1], 64);
            CHECK(bad == 0, "TP %d x PP %d -> TP %d x PP %d: %lld elements differ", from[a][0],
                  from[a][1], to[b][0], to[b][1], (long long)bad);
        }
    }
}

TEST(gpt_tied_copy_and_padding_rows)
{
    /* 100 tokens: 104 rows at TP 1 (multiple of 8), 112 at TP 2, 128 at TP 4. The tied
     * output layer's copy on the last stage (PP > 1) is read from the word embeddings
     * of a PP 1 checkpoint. */
    const pl_model_config c = model(PL_FAMILY_GPT, 100);
    const char *dir = dir_of("gpt_1_1");
    CHECK_OK(save(dir, c, 1, 1));
    CHECK(load_and_compare(dir, c, 1, 2, 104) == 0, "TP 1 x PP 1 -> PP 2 (tied copy)");
    CHECK(load_and_compare(dir, c, 4, 2, 104) == 0, "-> TP 4 x PP 2: rows 104..127 zero");
    dir = dir_of("gpt_4_2");
    CHECK_OK(save(dir, c, 4, 2));
    /* rows past TP 1's 104 are dropped; the rows kept equal the draw */
    CHECK(load_and_compare(dir, c, 1, 1, 128) == 0, "TP 4 x PP 2 -> TP 1");
    CHECK(load_and_compare(dir, c, 2, 1, 128) == 0, "TP 4 x PP 2 -> TP 2");
}

TEST(a_weights_only_checkpoint_names_the_missing_moments)
{
    const pl_model_config c0 = model(PL_FAMILY_GPT, 64);
    pl_model_config c = c0;
    c.padded_vocab = 64;
    const char *dir = dir_of("weights_only");
    char tmp[4200];
    pl_ckpt_meta meta = {.iteration = 1, .tp = 1, .pp = 1, .dp = 1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    meta.schedule.max_lr = 1e-3;
    pl_registry reg;
    pl_registry_init(&reg, 1, 0, 0);
    CHECK_OK(pl_model_register(&reg, &c, 1));
    float *w = pl_calloc((size_t)reg.numel, sizeof(float));
    pl_ckpt_buffers buf = {&reg, w, NULL, NULL, NULL, 0};
    CHECK_OK(pl_ckpt_write_begin(dir, 1, tmp, sizeof tmp));
    CHECK_OK(pl_ckpt_write_rank(tmp, 1, &buf));
    CHECK_OK(pl_ckpt_write_finish(dir, tmp, &c, &meta, &reg, 1));
    pl_ckpt_source *s;
    CHECK_OK(pl_ckpt_source_open(dir, 1, &s));
    CHECK(!pl_ckpt_source_has_moments(s), "no moments saved");
    pl_status st = pl_ckpt_source_fill(s, &reg, PL_CKPT_EXP_AVG, w, 0, reg.numel);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "optimizer.exp_avg.embedding") &&
              strstr(pl_error_msg(), "--no-load-optim"),
          "status %d: %s", st, pl_error_msg());
    pl_ckpt_source_close(s);
    pl_free(w);
    pl_registry_free(&reg);
}

TEST(every_allocation_failure_is_an_error_without_leaks)
{
    const pl_model_config c0 = model(PL_FAMILY_GPT, 100);
    const char *dir = dir_of("gpt_4_2"); /* written by the second test */
    pl_model_config c = c0;
    c.padded_vocab = 112;
    pl_registry reg; /* TP 2 reads TP 4's vocabulary rows and TP 4 x PP 2's stages */
    pl_registry_init(&reg, 2, 1, 1);
    CHECK_OK(pl_model_register(&reg, &c, 2));
    float *out = pl_calloc((size_t)reg.numel, sizeof(float));
    const int64_t live0 = pl_alloc_live();
    for (int n = 0; n < 4000; n++) {
        pl_alloc_fail_after(n);
        pl_ckpt_source *s = NULL;
        pl_status st = pl_ckpt_source_open(dir, 1, &s);
        for (int k = 0; k < 3 && !st; k++)
            st = pl_ckpt_source_fill(s, &reg, (pl_ckpt_kind)k, out, 0, reg.numel);
        pl_alloc_fail_after(-1);
        pl_ckpt_source_close(s);
        CHECK(pl_alloc_live() == live0, "n=%d: leaked %lld", n, (long long)(pl_alloc_live() - live0));
        if (!st)
            break;
        /* cJSON's parser returns NULL out of memory as on bad JSON: the manifest
         * reader then calls it "not a plait checkpoint manifest" (a format error) */
        const int ok = st == PL_ERR_NOMEM ||
                       (st == PL_ERR_FORMAT && strstr(pl_error_msg(), "not a plait checkpoint"));
        CHECK(ok, "n=%d: status %d %s", n, st, pl_error_msg());
        if (!ok)
            break;
    }
    pl_free(out);
    pl_registry_free(&reg);
}

int main(void)
{
    RUN(llama_slices_move_between_any_tp_and_pp);
    RUN(gpt_tied_copy_and_padding_rows);
    RUN(a_weights_only_checkpoint_names_the_missing_moments);
    RUN(every_allocation_failure_is_an_error_without_leaks);
    return test_summary("ckpt_reshard");
}
