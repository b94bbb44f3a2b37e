/* lamb_steps: plait's Lamb (optim/lamb.h) over a small registry for several
 * steps, written out for tests/scripts/lamb_reference.py, which recomputes them
 * with DeepSpeed's FusedLamb formula in PyTorch (float64).
 *
 *   lamb_steps OUT.safetensors [--eps-inside-sqrt] [--no-bias-correction]
 *              [--clip C] [--max-coeff X] [--min-coeff Y]
 *
 * The tensors: a weight (std 0.02, weight decay), a bias starting at zero (its
 * first trust ratio is 1: |p| = 0), a norm gain at one, a weight of std 0.001
 * (its ratio falls below min_coeff) and one of std 50 (above max_coeff). OUT
 * holds p0.NAME, g1.NAME .. gK.NAME, and the final p.NAME, m.NAME, v.NAME; its
 * metadata the hyperparameters and the learning rate of each step.
 *
 * Before writing, the tool checks (and prints "ok"/"not ok") that the same steps
 * taken as two ranges split inside a tensor -- ZeRO's shards, their sums added
 * between the phases as the DP all-reduce adds them -- give the same bits. */
#include "base/alloc.h"
#include "ckpt/safetensors.h"
#include "model/registry.h"
#include "optim/lamb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STEPS = 6 };

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double uniform(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}

static float normal(double std)
{
    return (float)(std * sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: lamb_steps OUT.safetensors [options]\n");
        return 2;
    }
    pl_lamb_hparams hp = {0.9, 0.999, 1e-6, 0.01, 0, 10.0, 0.01, 0, 1};
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--eps-inside-sqrt") == 0)
            hp.eps_inside_sqrt = 1;
        else if (strcmp(argv[i], "--no-bias-correction") == 0)
            hp.bias_correction = 0;
        else if (strcmp(argv[i], "--clip") == 0 && i + 1 < argc)
            hp.clip_grad = atof(argv[++i]);
        else if (strcmp(argv[i], "--max-coeff") == 0 && i + 1 < argc)
            hp.max_coeff = atof(argv[++i]);
        else if (strcmp(argv[i], "--min-coeff") == 0 && i + 1 < argc)
            hp.min_coeff = atof(argv[++i]);
        else {
            fprintf(stderr, "lamb_steps: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    static const struct { const char *name; int ndim, wd; int64_t r, c; double std; } T[] = {
        {"weight", 2, 1, 12, 16, 0.02}, {"bias", 1, 0, 16, 1, 0},  {"gain", 1, 0, 16, 1, -1},
        {"tiny", 2, 1, 8, 8, 0.001},    {"large", 2, 1, 4, 8, 50.0},
    };
    const int nt = (int)(sizeof T / sizeof *T);
    pl_registry reg;
    pl_registry_init(&reg, 1, 0, 0);
    for (int i = 0; i < nt; i++) {
        pl_param_spec s = {T[i].name, T[i].ndim, {T[i].r, T[i].c}, PL_TP_REPLICATED, 0, -1,
                           T[i].wd, PL_INIT_ZEROS, 0, 0, 0};
        if (pl_registry_add(&reg, &s)) {
            fprintf(stderr, "lamb_steps: %s\n", pl_error_msg());
            return 1;
        }
    }
    const int64_t n = reg.numel;
    /* p, m, v for the whole range and for the split run; the gradients of every step */
    float *buf = pl_calloc((size_t)(6 + STEPS + 1) * (size_t)n, sizeof(float));
    double *sums = pl_malloc(4 * (size_t)reg.n * sizeof(double));
    if (!buf || !sums)
        return 1;
    float *p = buf, *m = p + n, *v = m + n, *p2 = v + n, *m2 = p2 + n, *v2 = m2 + n;
    float *p0 = v2 + n, *g = p0 + n;
    for (int i = 0; i < nt; i++) {
        const pl_param *q = &reg.params[i];
        for (int64_t k = 0; k < q->numel; k++)
            p0[q->offset + k] = T[i].std > 0 ? normal(T[i].std) : T[i].std < 0 ? 1.0f : 0.0f;
    }
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < nt; i++)
            for (int64_t k = 0; k < reg.params[i].numel; k++)
                g[s * n + reg.params[i].offset + k] = normal(0.5);
    memcpy(p, p0, (size_t)n * sizeof *p);
    memcpy(p2, p0, (size_t)n * sizeof *p);
    /* split inside "weight" (an odd place, not a tensor boundary) */
    const int64_t mid = reg.params[0].offset + 37;
    double lrs[STEPS];
    int same = 1;
    for (int s = 0; s < STEPS; s++) {
        const float *gs = g + s * n;
        double sumsq = 0;
        for (int64_t k = 0; k < n; k++)
            sumsq += (double)gs[k] * gs[k];
        lrs[s] = 0.01 * (s + 1);
        pl_lamb_moments_range(&reg, 0, n, p, gs, m, v, &hp, sumsq, sums);
        pl_lamb_update_range(&reg, 0, n, p, m, v, &hp, lrs[s], s + 1, sums);
        double *a = sums, *b = sums + 2 * reg.n;
        pl_lamb_moments_range(&reg, 0, mid, p2, gs, m2, v2, &hp, sumsq, a);
        pl_lamb_moments_range(&reg, mid, n, p2 + mid, gs + mid, m2 + mid, v2 + mid, &hp, sumsq, b);
        for (int i = 0; i < 2 * reg.n; i++)
            a[i] += b[i];
        pl_lamb_update_range(&reg, 0, mid, p2, m2, v2, &hp, lrs[s], s + 1, a);
        pl_lamb_update_range(&reg, mid, n, p2 + mid, m2 + mid, v2 + mid, &hp, lrs[s], s + 1, a);
    }
    same = memcmp(p, p2, (size_t)n * sizeof *p) == 0 && memcmp(m, m2, (size_t)n * sizeof *m) == 0 &&
           memcmp(v, v2, (size_t)n * sizeof *v) == 0;
    printf("%s two ranges split inside a tensor give the whole range's bits\n",
           same ? "ok" : "not ok");
    pl_st_writer *w;
    if (pl_st_writer_new(&w))
        return 1;
    char names[(STEPS + 4) * 5][112];
    int nn = 0;
    pl_status st = PL_OK;
    for (int i = 0; i < nt && !st; i++) {
        const pl_param *q = &reg.params[i];
        int64_t shape[2] = {q->shape[0], q->shape[1]};
        const float *src[4] = {p0, p, m, v};
        const char *pre[4] = {"p0", "p", "m", "v"};
        for (int k = 0; k < 4 + STEPS && !st; k++) {
            if (k < 4)
                snprintf(names[nn], sizeof names[0], "%s.%s", pre[k], q->name);
            else
                snprintf(names[nn], sizeof names[0], "g%d.%s", k - 3, q->name);
            const float *base = k < 4 ? src[k] : g + (k - 4) * n;
            st = pl_st_writer_add(w, names[nn++], "F32", q->ndim, shape, base + q->offset);
        }
    }
    char meta[512];
    int len = snprintf(meta, sizeof meta,
                       "{\"beta1\": %.17g, \"beta2\": %.17g, \"eps\": %.17g, \"weight_decay\": %.17g, "
                       "\"clip\": %.17g, \"max_coeff\": %.17g, \"min_coeff\": %.17g, "
                       "\"eps_inside_sqrt\": %d, \"bias_correction\": %d, \"steps\": %d, \"lr\": [",
                       hp.beta1, hp.beta2, hp.eps, hp.weight_decay, hp.clip_grad, hp.max_coeff,
                       hp.min_coeff, hp.eps_inside_sqrt, hp.bias_correction, STEPS);
    for (int s = 0; s < STEPS; s++)
        len += snprintf(meta + len, sizeof meta - (size_t)len, "%s%.17g", s ? ", " : "", lrs[s]);
    snprintf(meta + len, sizeof meta - (size_t)len, "], \"weight_decay_on\": {\"weight\": 1, "
             "\"bias\": 0, \"gain\": 0, \"tiny\": 1, \"large\": 1}}");
    if (!st)
        st = pl_st_writer_meta(w, "lamb", meta);
    if (!st)
        st = pl_st_writer_finish(w, argv[1]);
    else
        pl_st_writer_free(w);
    if (st) {
        fprintf(stderr, "lamb_steps: %s\n", pl_error_msg());
        return 1;
    }
    pl_free(buf);
    pl_free(sums);
    pl_registry_free(&reg);
    return same ? 0 : 1;
}
