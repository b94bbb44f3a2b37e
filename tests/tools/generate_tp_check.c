/* generate_tp_check: the tensor-parallel generator (pl_generator on a TP group
 * of every rank, each holding its registry slice) gives the logits of the
 * one-process generator on the same global weights, at every position.
 *
 *   mpirun -n T generate_tp_check WORLD [--load CKPT]
 *
 * WORLD is the world size the launch is meant to have (checked first: the
 * singleton pitfall would otherwise pass as T runs of TP 1). Without --load the
 * weights are drawn from the registry's initialisation (seed 99) for GPT and
 * Llama with 8, 4, 2 and 1 key/value groups (fewer than the ranks: shared); with --load they are a TP = 1
 * checkpoint's. Each rank builds the whole model (TP 1 registry) and its own
 * slice of it, cut by the registry's global index (the layout training saves;
 * tests/scripts/tp.sh checks it against shards assembled outside plait), feeds
 * the same pseudo-random tokens to both generators and compares the logits of
 * the true vocabulary at every position.
 *
 * Tolerance: normwise relative error (max |a - b| / max |b|) <= 1e-5. The two
 * generators run the same kernels on the same values; only the row-parallel
 * products differ: T partial sums over A/T or F/T terms, then their all-reduce,
 * instead of one sum over A or F (and GEMMs of other shapes may block the
 * reduction differently). Each such sum of K terms moves by at most ~K u
 * relative to the sum of magnitudes (u = 6e-8, K <= 4 C = 256 here) and far
 * less in practice; through L layers of norms and residual additions the
 * measured error is ~1e-7 (printed). A wrong slice, group, cache row or
 * vocabulary block moves the logits by order 1.
 * Also checked: every TP rank holds bit-identical logits (so every rank draws
 * the same token from the same uniform), and a step allocates nothing through
 * the library's allocator (it is made to fail during the steps).
 * Rank 0 prints one ok / not ok line per case and "generate_tp_check: N passed,
 * N failed". */
#include "base/alloc.h"
#include "base/log.h"
#include "ckpt/checkpoint.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/spec.h"
#include "parallel/dist.h"
#include "parallel/grid.h"
#include "rel_err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { POSITIONS = 24, LABEL_MAX = 4200 };

static int fails, passes, my_rank;


/* This rank's slice (laid out by part) of the whole parameters full (laid out
 * by whole, TP 1). */
static void slice_params(const pl_registry *whole, const float *full, const pl_registry *part,
                         float *mine)
{
    for (int i = 0; i < part->n; i++) {
        const pl_param *p = &part->params[i];
        const pl_param *q = pl_registry_find(whole, p->name);
        for (int64_t r = 0; r < p->local_shape[0]; r++)
            for (int64_t c = 0; c < p->local_shape[1]; c++)
                mine[p->offset + r * p->local_shape[1] + c] =
                    full[q->offset + pl_param_global_index(p, r, c)];
    }
}

/* Feeds the same tokens to the whole and the sliced generator; *worst gets the
 * largest error over positions, *same whether every rank's logits were the
 * same bits at every position, *greedy at how many positions the two argmaxes
 * agree. */
static pl_status compare(pl_generator *one, pl_generator *tp, pl_comm *group, int64_t V,
                         int64_t positions, double *worst, int *same, int *greedy, float *lo,
                         float *hi)
{
    pl_status st = PL_OK;
    uint64_t lcg = 12345;
    *worst = 0;
    *same = 1;
    *greedy = 0;
    for (int64_t t = 0; t < positions; t++) {
        lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
        const int32_t token = (int32_t)((lcg >> 33) % (uint64_t)V);
        /* a step allocates nothing: with the allocator failing from here on, an
         * allocation would fail the step */
        pl_alloc_fail_after(0);
        st = pl_generator_step(one, token, t);
        pl_alloc_fail_after(-1);
        PL_TRY(pl_comm_agree(group, st));
        pl_alloc_fail_after(0);
        st = pl_generator_step(tp, token, t);
        pl_alloc_fail_after(-1);
        PL_TRY(pl_comm_agree(group, st));
        double e = rel_err(tp->logits, one->logits, V);
        *worst = e > *worst ? e : *worst;
        *greedy += pl_sample_logits(tp->logits, V, 0, 0, 1, 0.5, NULL) ==
                   pl_sample_logits(one->logits, V, 0, 0, 1, 0.5, NULL);
        memcpy(lo, tp->logits, (size_t)V * sizeof(float));
        memcpy(hi, tp->logits, (size_t)V * sizeof(float));
        PL_TRY(pl_comm_allreduce_f32(group, lo, V, PL_COMM_MIN));
        PL_TRY(pl_comm_allreduce_f32(group, hi, V, PL_COMM_MAX));
        *same &= memcmp(lo, tp->logits, (size_t)V * sizeof(float)) == 0 &&
                 memcmp(hi, tp->logits, (size_t)V * sizeof(float)) == 0;
    }
fail:
    return st;
}

/* Where a case's weights come from. */
typedef struct weights_src {
    const char *ckpt;   /* a TP 1 checkpoint (latest iteration), or NULL: drawn (seed 99) */
    const char *shards; /* the TP ranks load this TP T checkpoint's own shards instead of
                         * slicing ckpt's (plait generate's path), or NULL */
    double tol;         /* on the normwise relative error of the logits */
} weights_src;

/* The two generators of one case and what they hold. */
typedef struct gen_pair {
    pl_registry whole, part;
    float *full, *mine, *lo, *hi;
    pl_gemm *gemm;
    pl_generator one, tp;
} gen_pair;

/* Loads the latest iteration of dir into buf. */
static pl_status load_latest(const char *dir, const pl_model_config *cfg, const pl_registry *reg,
                             float *params)
{
    int64_t it;
    pl_status st = pl_ckpt_latest(dir, &it);
    if (st)
        return st;
    if (it < 0)
        return pl_errorf(PL_ERR_ARG, "%s: no latest_checkpointed_iteration.txt", dir);
    pl_ckpt_meta meta;
    char *strings = NULL;
    pl_ckpt_buffers buf = {reg, params, NULL, NULL, NULL, 0};
    st = pl_ckpt_load(dir, it, cfg, &buf, &meta, &strings);
    pl_free(strings);
    return st;
}

/* This rank's half of a case (no communication): the whole model, its slice
 * (or its shard of src->shards), and both generators. */
static pl_status pair_init(gen_pair *g, const pl_model_config *cfg, const weights_src *src,
                           pl_comm *tpc)
{
    pl_status st = PL_OK;
    pl_registry_init(&g->whole, 1, 0, 0);
    pl_registry_init(&g->part, tpc->size, tpc->rank, 0);
    PL_TRY(pl_model_register(&g->whole, cfg, 1));
    PL_TRY(pl_model_register(&g->part, cfg, 1));
    g->full = pl_calloc((size_t)g->whole.numel, sizeof(float));
    g->mine = pl_calloc((size_t)g->part.numel, sizeof(float));
    g->lo = pl_malloc((size_t)cfg->vocab_size * sizeof(float));
    g->hi = pl_malloc((size_t)cfg->vocab_size * sizeof(float));
    if (!g->full || !g->mine || !g->lo || !g->hi) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (src->ckpt)
        PL_TRY(load_latest(src->ckpt, cfg, &g->whole, g->full));
    else
        pl_registry_init_values(&g->whole, g->full, 99);
    if (src->shards)
        PL_TRY(load_latest(src->shards, cfg, &g->part, g->mine));
    else
        slice_params(&g->whole, g->full, &g->part, g->mine);
    PL_TRY(pl_gemm_init(&g->gemm));
    PL_TRY(pl_generator_init(&g->one, cfg, &g->whole, g->full, NULL, g->gemm));
    PL_TRY(pl_generator_init(&g->tp, cfg, &g->part, g->mine, tpc, g->gemm));
fail:
    return st;
}

static void pair_free(gen_pair *g)
{
    pl_generator_free(&g->one);
    pl_generator_free(&g->tp);
    pl_gemm_free(g->gemm);
    pl_free(g->full);
    pl_free(g->mine);
    pl_free(g->lo);
    pl_free(g->hi);
    pl_registry_free(&g->whole);
    pl_registry_free(&g->part);
}

/* One case: cfg's model with src's weights. */
static pl_status check_case(const char *label, const pl_model_config *cfg, const weights_src *src,
                            pl_grid *grid)
{
    pl_status st = PL_OK;
    pl_comm *tpc = pl_grid_comm(grid, PL_GRID_TP);
    gen_pair g;
    memset(&g, 0, sizeof g);
    PL_TRY(pl_comm_agree(tpc, pair_init(&g, cfg, src, tpc)));
    double worst;
    int same, greedy;
    const int64_t positions = cfg->max_positions < POSITIONS ? cfg->max_positions : POSITIONS;
    PL_TRY(compare(&g.one, &g.tp, tpc, cfg->vocab_size, positions, &worst, &same, &greedy, g.lo,
                   g.hi));
    double all[2] = {worst, !same};
    PL_TRY(pl_comm_allreduce_f64(tpc, all, 2, PL_COMM_MAX));
    int ok = all[0] <= src->tol && all[1] == 0;
    if (my_rank == 0)
        printf("%s %s at tp %d: logits = one process's at %lld positions within %.0e, worst "
               "error %.2e (greedy choice the same at %d); %s on every rank\n",
               ok ? "ok" : "not ok", label, tpc->size, (long long)positions, src->tol, all[0],
               greedy, all[1] == 0 ? "the same bits" : "DIFFERENT bits");
    ok ? passes++ : fails++;
fail:
    pair_free(&g);
    return st;
}

/* A small model of family f with g key/value groups (random weights). */
static pl_model_config small(pl_family f, int64_t groups)
{
    pl_model_config cfg = {.num_layers = 2, .hidden = 64, .heads = 8, .ffn_hidden = 256,
                           .seq_length = POSITIONS, .max_positions = POSITIONS,
                           .vocab_size = 300, .divisible_by = 128, .init_std = 0.05,
                           .ln_eps = 1e-5f};
    pl_family_apply(&cfg, f);
    cfg.query_groups = groups;
    cfg.padded_vocab = pl_model_padded_vocab(cfg.vocab_size, 128, 4); /* divides by TP 1, 2, 4 */
    cfg.rope = (pl_rope_config){10000.0, 1.0, 0, 0, 0, 0, 0};
    return cfg;
}

int main(int argc, char **argv)
{
    weights_src src = {NULL, NULL, 1e-5};
    int bad = argc < 2;
    for (int i = 2; i + 1 < argc && !bad; i += 2) {
        if (strcmp(argv[i], "--load") == 0)
            src.ckpt = argv[i + 1];
        else if (strcmp(argv[i], "--shards") == 0)
            src.shards = argv[i + 1];
        else if (strcmp(argv[i], "--tol") == 0)
            src.tol = atof(argv[i + 1]);
        else
            bad = 1;
    }
    if (bad || argc % 2 || (src.shards && !src.ckpt)) {
        fprintf(stderr, "usage: generate_tp_check WORLD [--load CKPT [--shards CKPT_TP] "
                        "[--tol X]]\n");
        return 2;
    }
    const int want = atoi(argv[1]);
    pl_dist dist;
    pl_status st = pl_dist_init(&dist, NULL, NULL);
    if (st) {
        fprintf(stderr, "generate_tp_check: %s\n", pl_error_msg());
        return 1;
    }
    my_rank = dist.rank;
    pl_grid grid;
    memset(&grid, 0, sizeof grid);
    if (dist.size != want) {
        fprintf(stderr, "not ok world_size_is_%d: MPI says %d\n", want, dist.size);
        fails++;
        goto done;
    }
    if (my_rank == 0)
        printf("ok world_size_is_%d\n", want);
    passes++;
    if ((st = pl_grid_init(&grid, MPI_COMM_WORLD, dist.size, 1)))
        goto done;
    if (src.ckpt) {
        int64_t it;
        pl_model_config cfg;
        pl_ckpt_meta meta;
        char *strings = NULL;
        if (!(st = pl_ckpt_latest(src.ckpt, &it)) && it < 0)
            st = pl_errorf(PL_ERR_ARG, "%s: no checkpoint", src.ckpt);
        if (!st)
            st = pl_ckpt_read_config(src.ckpt, it, &cfg, &meta, &strings);
        pl_free(strings);
        if (!st && meta.tp != 1)
            st = pl_errorf(PL_ERR_ARG, "%s: saved at TP %d; the reference must be TP 1",
                           src.ckpt, meta.tp);
        if ((st = pl_comm_agree(pl_grid_comm(&grid, PL_GRID_WORLD), st)))
            goto done;
        char label[LABEL_MAX];
        snprintf(label, sizeof label, "%s checkpoint %s, %s", pl_family_get(cfg.family)->name,
                 src.ckpt, src.shards ? "against the TP checkpoint's shards" : "sliced");
        st = check_case(label, &cfg, &src, &grid);
    } else {
        const struct {
            const char *label;
            pl_family f;
            int64_t groups;
        } cases[] = {{"gpt (random weights)", PL_FAMILY_GPT, 8},
                     {"llama, 8 groups (random weights)", PL_FAMILY_LLAMA, 8},
                     {"llama, 4 groups (random weights)", PL_FAMILY_LLAMA, 4},
                     /* fewer groups than TP ranks: groups shared (registry.h) */
                     {"llama, 2 groups (random weights)", PL_FAMILY_LLAMA, 2},
                     {"llama, multi-query (random weights)", PL_FAMILY_LLAMA, 1}};
        for (size_t i = 0; i < sizeof cases / sizeof *cases && !st; i++) {
            pl_model_config cfg = small(cases[i].f, cases[i].groups);
            st = check_case(cases[i].label, &cfg, &src, &grid);
        }
    }
done:
    if (st) {
        fprintf(stderr, "not ok [rank %d]: %s\n", my_rank, pl_error_msg());
        fails++;
    }
    int32_t f = fails;
    if (grid.comm[PL_GRID_WORLD].size > 0)
        pl_comm_allreduce_i32(pl_grid_comm(&grid, PL_GRID_WORLD), &f, 1, PL_COMM_MAX);
    if (my_rank == 0)
        printf("generate_tp_check: %d passed, %d failed\n", passes, f);
    pl_grid_free(&grid);
    pl_dist_finalize(&dist);
    return f != 0;
}
