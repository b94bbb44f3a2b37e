/* generate_check: KV-cached decoding through the blocks (pl_generator_step, one
 * token at a time) gives the logits of the training forward (pl_model_forward
 * over the whole sequence), position by position, for each family. Both run the
 * same block code; what differs is the attention (fused kernel over the sequence
 * vs. the cache) and the GEMM shapes (one row vs. T rows), so the logits agree to
 * fp32 rounding: normwise relative error <= 2e-5 (sums of C..T terms through L
 * layers, u = 6e-8; measured values are printed). A broken cache (wrong row,
 * stale position, wrong group) gives errors of order 1.
 * Prints one ok / not ok line per family and "generate_check: N passed, N failed".
 * Then pl_generator_step_rows: 3 sequences stepped together as rows (each its own
 * cache and position) give each one's single-row logits bit for bit.
 * usage: generate_check */
#include "base/alloc.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/spec.h"
#include "rel_err.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { L = 2, C = 64, NH = 4, T = 24, V = 300 };

static int fails, passes;


static pl_status check_family(pl_family f, int64_t groups, int res_post)
{
    pl_status st = PL_OK;
    pl_model_config cfg = {.num_layers = L, .hidden = C, .heads = NH, .ffn_hidden = 4 * C,
                           .seq_length = T, .max_positions = T, .vocab_size = V,
                           .divisible_by = 128, .init_std = 0.05, .ln_eps = 1e-5f};
    pl_family_apply(&cfg, f);
    cfg.query_groups = groups;
    cfg.block.res_post_norm = res_post;
    cfg.padded_vocab = pl_model_padded_vocab(V, 128, 1);
    cfg.rope = (pl_rope_config){10000.0, 1.0, 0, 0, 0, 0, 0};
    pl_registry reg;
    pl_registry_init(&reg, 1, 0, 0);
    pl_gemm *gemm = NULL;
    pl_model m;
    pl_generator gen;
    memset(&m, 0, sizeof m);
    memset(&gen, 0, sizeof gen);
    float *params = NULL, *full = NULL;
    pl_comm tp = {0};
    tp.size = 1;
    PL_TRY(pl_model_register(&reg, &cfg, 1));
    params = pl_calloc((size_t)reg.numel, sizeof(float));
    full = pl_calloc((size_t)(T * cfg.padded_vocab), sizeof(float));
    if (!params || !full) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    pl_registry_init_values(&reg, params, 99);
    PL_TRY(pl_gemm_init(&gemm));
    PL_TRY(pl_model_init(&m, &cfg, &reg, params, NULL, 1, NULL, &tp, gemm));
    uint64_t lcg = 12345;
    for (int t = 0; t < T; t++) {
        lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
        m.tokens[t] = (int32_t)((lcg >> 33) % V);
        m.targets[t] = 0;
    }
    PL_TRY(pl_model_forward(&m));
    pl_ref_gemm(0, 1, T, cfg.padded_vocab, C, m.lnf, C, m.p.out_w, C, 0.0f, full, cfg.padded_vocab);
    PL_TRY(pl_generator_init(&gen, &cfg, &reg, params, NULL, gemm));
    double worst = 0;
    for (int t = 0; t < T; t++) {
        PL_TRY(pl_generator_step(&gen, m.tokens[t], t));
        double e = rel_err(gen.logits, full + (int64_t)t * cfg.padded_vocab, V);
        worst = e > worst ? e : worst;
    }
    int ok = worst <= 2e-5;
    printf("%s %s (query groups %lld%s): cached decoding = training forward, worst logits "
           "error %.2e\n", ok ? "ok" : "not ok", pl_family_get(f)->name, (long long)groups,
           res_post ? ", residuals after the norms" : "", worst);
    ok ? passes++ : fails++;
fail:
    pl_generator_free(&gen);
    pl_model_free(&m);
    pl_gemm_free(gemm);
    pl_free(params);
    pl_free(full);
    pl_registry_free(&reg);
    return st;
}

/* pl_generator_step_rows: R sequences stepped together (each its own tokens, its own
 * cache, positions offset by its index) give each sequence's logits of single-row steps
 * bit for bit (the GEMM's rows do not depend on the row count here). */
enum { R = 3 };
static pl_status check_rows(pl_family f, int64_t groups)
{
    pl_status st = PL_OK;
    pl_model_config cfg = {.num_layers = L, .hidden = C, .heads = NH, .ffn_hidden = 4 * C,
                           .seq_length = T, .max_positions = T, .vocab_size = V,
                           .divisible_by = 128, .init_std = 0.05, .ln_eps = 1e-5f};
    pl_family_apply(&cfg, f);
    cfg.query_groups = groups;
    cfg.padded_vocab = pl_model_padded_vocab(V, 128, 1);
    cfg.rope = (pl_rope_config){10000.0, 1.0, 0, 0, 0, 0, 0};
    pl_registry reg;
    pl_registry_init(&reg, 1, 0, 0);
    pl_gemm *gemm = NULL;
    pl_generator one, rows;
    memset(&one, 0, sizeof one);
    memset(&rows, 0, sizeof rows);
    float *params = NULL, *caches = NULL, *want = NULL;
    PL_TRY(pl_model_register(&reg, &cfg, 1));
    PL_TRY(pl_gemm_init(&gemm));
    params = pl_calloc((size_t)reg.numel, sizeof(float));
    if (!params) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    pl_registry_init_values(&reg, params, 77);
    PL_TRY(pl_generator_init(&one, &cfg, &reg, params, NULL, gemm));
    PL_TRY(pl_generator_init_rows(&rows, &cfg, &reg, params, NULL, gemm, R));
    const int64_t per = (int64_t)L * T * rows.blk.Gl * rows.blk.dims.HS, Vp = cfg.padded_vocab;
    caches = pl_calloc((size_t)(2 * R * per), sizeof(float));
    want = pl_calloc((size_t)(R * T * Vp), sizeof(float));
    if (!caches || !want) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    int32_t tok[R][T];
    uint64_t lcg = 777;
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
            tok[r][t] = (int32_t)((lcg >> 33) % V);
        }
    for (int r = 0; r < R; r++) /* each sequence alone, single-row steps */
        for (int t = 0; t + r < T; t++) {
            PL_TRY(pl_generator_step(&one, tok[r][t], t));
            memcpy(want + ((int64_t)r * T + t) * Vp, one.logits, (size_t)V * sizeof(float));
        }
    int64_t differ = 0, steps = 0;
    for (int t = 0; t < T; t++) { /* together: sequence r at position t - r once started */
        int32_t tk[R];
        int64_t pos[R];
        float *k[R], *v[R];
        int n = 0, which[R];
        for (int r = 0; r < R; r++)
            if (t >= r) {
                tk[n] = tok[r][t - r], pos[n] = t - r, which[n] = r;
                k[n] = caches + (2 * r) * per, v[n] = caches + (2 * r + 1) * per;
                n++;
            }
        PL_TRY(pl_generator_step_rows(&rows, n, tk, pos, k, v, NULL, NULL));
        for (int i = 0; i < n; i++, steps++)
            differ += memcmp(rows.logits + i * Vp,
                             want + ((int64_t)which[i] * T + pos[i]) * Vp, (size_t)V * sizeof(float)) != 0;
    }
    const int ok = differ == 0;
    printf("%s %s (query groups %lld): %d sequences stepped as rows give single-row steps' logits "
           "bit for bit (%lld of %lld differ)\n", ok ? "ok" : "not ok", pl_family_get(f)->name,
           (long long)groups, R, (long long)differ, (long long)steps);
    ok ? passes++ : fails++;
fail:
    pl_generator_free(&one);
    pl_generator_free(&rows);
    pl_gemm_free(gemm);
    pl_free(params);
    pl_free(caches);
    pl_free(want);
    pl_registry_free(&reg);
    return st;
}

int main(void)
{
    struct {
        pl_family f;
        int64_t groups;
        int res_post; /* --apply-residual-connection-post-layernorm */
    } cases[] = {{PL_FAMILY_GPT, NH, 0},   {PL_FAMILY_LLAMA, NH, 0}, {PL_FAMILY_LLAMA, 2, 0},
                 {PL_FAMILY_LLAMA, 1, 0},  {PL_FAMILY_GPT, NH, 1},   {PL_FAMILY_LLAMA, 2, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (check_family(cases[i].f, cases[i].groups, cases[i].res_post)) {
            printf("not ok %s: %s\n", pl_family_get(cases[i].f)->name, pl_error_msg());
            fails++;
        }
    }
    const pl_family rf[3] = {PL_FAMILY_GPT, PL_FAMILY_LLAMA, PL_FAMILY_LLAMA};
    const int64_t rg[3] = {NH, 2, NH};
    for (int i = 0; i < 3; i++)
        if (check_rows(rf[i], rg[i])) {
            printf("not ok rows %s: %s\n", pl_family_get(rf[i])->name, pl_error_msg());
            fails++;
        }
    printf("generate_check: %d passed, %d failed\n", passes, fails);
    return fails != 0;
}
