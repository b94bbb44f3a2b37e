/* gpt_recompute: the GPT's forward and backward under every activation-recompute
 * mode (selective; full uniform 1, 2 and 3 layers per group; full block 1 and 3)
 * give the same per-token losses and the same gradients, bit for bit, as the plan
 * that keeps every layer's activations; and each mode's plan is smaller. Two
 * micro-batches are accumulated, so a recomputed layer that read a stale buffer
 * would show. Run alone (TP 1) or under `mpirun -n 2` (TP 2: the recomputed
 * layers all-reduce again over the TP group). Prints "world N = tp N", one
 * ok/not ok line per mode, and "gpt_recompute: N passed, N failed".
 * usage: gpt_recompute */
#include "base/alloc.h"
#include "model/model.h"
#include "model/spec.h"
#include "parallel/dist.h"
#include "parallel/grid.h"

#include <stdio.h>
#include <string.h>

enum { L = 4, C = 64, NH = 4, T = 32, B = 2, V = 1000, MICRO = 2 };

static int die(const char *what)
{
    fprintf(stderr, "gpt_recompute: %s: %s\n", what, pl_error_msg());
    return 1;
}

/* Forward and backward of MICRO micro-batches; losses (MICRO*N) and grads out. */
static pl_status run(pl_model *m, const int32_t *tokens, float *grads, int64_t n, float *losses)
{
    pl_status st = PL_OK;
    memset(grads, 0, (size_t)n * sizeof(float));
    for (int k = 0; k < MICRO; k++) {
        for (int64_t i = 0; i < m->N; i++) {
            int64_t b = i / T, t = i % T;
            m->tokens[i] = tokens[(k * B + b) * (T + 1) + t];
            m->targets[i] = tokens[(k * B + b) * (T + 1) + t + 1];
            m->dloss[i] = 1.0f / (float)(m->N * MICRO);
        }
        if ((st = pl_model_forward(m)) || (st = pl_model_backward(m, NULL, NULL)))
            return st;
        memcpy(losses + k * m->N, m->loss, (size_t)m->N * sizeof(float));
    }
    return st;
}

int main(int argc, char **argv)
{
    pl_dist dist;
    pl_grid grid;
    if (pl_dist_init(&dist, &argc, &argv))
        return die("MPI");
    if (pl_grid_init(&grid, MPI_COMM_WORLD, dist.size, 1))
        return die("grid");
    const int root = grid.rank == 0;
    if (root)
        printf("world %d = tp %d\n", dist.size, grid.layout.tp);
    pl_model_config cfg = {.num_layers = L, .hidden = C, .heads = NH, .ffn_hidden = 4 * C,
                         .seq_length = T, .max_positions = T, .vocab_size = V,
                         .divisible_by = 128, .init_std = 0.02, .ln_eps = 1e-5f};
    pl_family_apply(&cfg, PL_FAMILY_GPT);
    cfg.query_groups = cfg.heads;
    cfg.padded_vocab = pl_model_padded_vocab(V, 128, grid.layout.tp);
    pl_registry reg;
    pl_registry_init(&reg, grid.layout.tp, grid.tp_rank, 0);
    if (pl_model_register(&reg, &cfg, 1))
        return die("register");
    const int64_t n = reg.numel, NT = (int64_t)MICRO * B * T;
    float *params = pl_calloc((size_t)n, sizeof(float));
    float *grads = pl_calloc((size_t)n, sizeof(float)), *grads0 = pl_calloc((size_t)n, sizeof(float));
    float *loss = pl_calloc((size_t)NT, sizeof(float)), *loss0 = pl_calloc((size_t)NT, sizeof(float));
    int32_t *tokens = pl_calloc((size_t)(MICRO * B * (T + 1)), sizeof(int32_t));
    pl_gemm *gemm;
    if (!params || !grads || !grads0 || !loss || !loss0 || !tokens || pl_gemm_init(&gemm))
        return die("set-up");
    pl_registry_init_values(&reg, params, 1234);
    uint64_t lcg = 88172645463325252ull;
    for (int i = 0; i < MICRO * B * (T + 1); i++) {
        lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int32_t)((lcg >> 33) % V);
    }
    static const pl_recompute modes[] = {
        {PL_RECOMPUTE_NONE, 0, 0},
        {PL_RECOMPUTE_SELECTIVE, 0, 0},
        {PL_RECOMPUTE_FULL, PL_RECOMPUTE_UNIFORM, 1},
        {PL_RECOMPUTE_FULL, PL_RECOMPUTE_UNIFORM, 2},
        {PL_RECOMPUTE_FULL, PL_RECOMPUTE_UNIFORM, 3}, /* groups of 3 and 1 */
        {PL_RECOMPUTE_FULL, PL_RECOMPUTE_BLOCK, 1},
        {PL_RECOMPUTE_FULL, PL_RECOMPUTE_BLOCK, 3},
    };
    int pass = 0, fail = 0;
    size_t kept_bytes = 0;
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        pl_model m;
        cfg.recompute = modes[i];
        if (pl_model_init(&m, &cfg, &reg, params, grads, B, NULL, pl_grid_comm(&grid, PL_GRID_TP), gemm) ||
            run(&m, tokens, grads, n, loss))
            return die("forward/backward");
        size_t bytes = pl_model_activation_bytes(&m);
        if (i == 0) {
            memcpy(grads0, grads, (size_t)n * sizeof(float));
            memcpy(loss0, loss, (size_t)NT * sizeof(float));
            kept_bytes = bytes;
        }
        /* every rank must agree: its gradients are its own shard */
        int ok = memcmp(loss, loss0, (size_t)NT * sizeof(float)) == 0 &&
                 memcmp(grads, grads0, (size_t)n * sizeof(float)) == 0 &&
                 pl_model_activation_bytes_kept(&m) == kept_bytes &&
                 (i == 0 ? 1 : bytes < kept_bytes);
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        char name[64];
        if (root)
            printf("%s recompute %s: losses and gradients bit-identical to keeping everything, "
                   "activations %.1f of %.1f KiB\n", ok ? "ok" : "not ok",
                   pl_recompute_name(&cfg.recompute, name, sizeof name),
                   (double)bytes / 1024, (double)kept_bytes / 1024);
        ok ? pass++ : fail++;
        pl_model_free(&m);
    }
    if (root)
        printf("gpt_recompute: %d passed, %d failed\n", pass, fail);
    pl_gemm_free(gemm);
    pl_free(params);
    pl_free(grads);
    pl_free(grads0);
    pl_free(loss);
    pl_free(loss0);
    pl_free(tokens);
    pl_grid_free(&grid);
    pl_dist_finalize(&dist);
    return fail ? 1 : 0;
}
