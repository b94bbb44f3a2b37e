/* Checks cached decoding of an encoder-decoder (model/encdec_generate.h) against
 * the training forward (model/encdec.h, itself checked against PyTorch in t5.sh):
 * a random T5 (norm gains and biases perturbed, a wide init so that the logits
 * are far from uniform), random sources of several lengths; greedy decoding with
 * the self-attention and cross-attention caches, then the whole decoder input
 * ([BOS] + the generated tokens) through the training forward, teacher-forced.
 * Passes when at every position the cached step's logits equal the forward's
 * within 2e-4 relative to the largest (fp32: the cache's attention sums the same
 * terms in another order) and the forward's argmax is the token greedy chose
 * (or [EOS] where it stopped). Under mpirun -n P: TP P, each rank its vocabulary
 * slice; rank 0 prints the tokens, so runs at different TP sizes can be diffed.
 * --hf-t5: transformers' T5 layer instead (RMSNorm, no biases, relative position
 * bias tables of 8 buckets up to distance 20, unscaled scores, GEGLU, the tied
 * output layer's input scaled by hidden^-0.5): the cached steps read the
 * decoder's one-way bias of each distance.
 * --post-ln: the post-LN BART of --model bart --transformer-block-type post_ln (the
 * decoder's norm of the embeddings in the cached step, no final norms).
 * --scale-embedding (after --post-ln): its token embeddings times sqrt(hidden).
 *   usage: [mpirun -n P] encdec_decode_check [--hf-t5 | --post-ln [--scale-embedding]] */
#include "base/alloc.h"
#include "base/rng.h"
#include "kernels/kernels.h"
#include "model/encdec.h"
#include "model/encdec_generate.h"
#include "model/spec.h"
#include "parallel/dist.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { LE = 2, LD = 3, C = 64, NH = 4, TE = 20, TD = 14, V = 256, SEED = 99, SOURCES = 4 };

static pl_comm tp;

static int fail(pl_status st)
{
    fprintf(stderr, "encdec_decode_check (rank %d): %s\n", tp.rank, pl_error_msg());
    return st ? 1 : 0;
}

static int run(int hf, int post_ln)
{
    pl_model_config cfg = {.num_layers = LE, .dec_layers = LD, .hidden = C, .heads = NH,
                           .ffn_hidden = 4 * C, .seq_length = TE, .dec_seq_length = TD,
                           .max_positions = TE, .vocab_size = V, .divisible_by = 128,
                           .init_std = 0.3, .ln_eps = 1e-5f};
    pl_family_apply(&cfg, post_ln ? PL_FAMILY_BART : PL_FAMILY_T5);
    if (post_ln)
        cfg.block.post_norm = 1, cfg.block.act = PL_ACT_GELU_ERF;
    cfg.scale_embedding = post_ln == 2;
    cfg.query_groups = NH;
    cfg.hidden_dropout = cfg.attention_dropout = 0;
    cfg.padded_vocab = pl_model_padded_vocab(V, 128, tp.size);
    if (hf) {
        cfg.block.norm = PL_NORM_RMSNORM;
        cfg.block.norm_bias = cfg.block.bias = 0;
        cfg.block.pos = PL_POS_RELATIVE;
        cfg.block.act = PL_ACT_GEGLU;
        cfg.head.output_bias = 0;
        cfg.rel_buckets = 8;
        cfg.rel_max_distance = 20;
        cfg.softmax_scale = 1.0f;
        cfg.output_scale = 1.0f / sqrtf((float)C);
    }
    pl_registry reg;
    pl_registry_init(&reg, tp.size, tp.rank, 0);
    pl_status st = pl_model_register(&reg, &cfg, 1);
    if (st)
        return fail(st);
    const int64_t n = reg.numel, Vl = cfg.padded_vocab / tp.size, v0 = Vl * tp.rank;
    float *params = pl_calloc((size_t)n, sizeof(float)), *grads = pl_calloc((size_t)n, sizeof(float));
    float *logit_dec = pl_calloc((size_t)(TD * V), sizeof(float));
    float *row = pl_calloc((size_t)Vl, sizeof(float));
    if (!params || !grads || !logit_dec || !row)
        return fail(pl_errorf(PL_ERR_NOMEM, "out of memory"));
    pl_registry_init_values(&reg, params, SEED);
    for (int i = 0; i < reg.n; i++) {
        const pl_param *p = &reg.params[i];
        for (int64_t k = 0; p->ndim == 1 && k < p->numel; k++)
            params[p->offset + k] +=
                0.2f * (float)(2.0 * pl_rng_uniform(SEED, pl_hash_str(p->name),
                                                    (uint64_t)pl_param_global_index(p, k, 0)) -
                               1.0);
    }
    pl_gemm *gemm;
    if ((st = pl_gemm_init(&gemm)))
        return fail(st);
    pl_encdec_generator g;
    pl_encdec e;
    if ((st = pl_encdec_generator_init(&g, &cfg, &reg, params, tp.size > 1 ? &tp : NULL, gemm, 1)) ||
        (st = pl_encdec_init(&e, &cfg, &reg, params, grads, 1, &tp, gemm)))
        return fail(st);
    pl_encdec_set_pass(&e, 0, 0, SEED);
    const int32_t bos = 1, eos = 2;
    int bad = 0, steps = 0;
    double worst = 0;
    for (int s = 0; s < SOURCES; s++) {
        int32_t src[TE], out[TD];
        const int64_t len = TE - 5 * s;
        for (int64_t t = 0; t < len; t++)
            src[t] = 3 + (int32_t)(pl_rng_uniform(SEED, 7 + (uint64_t)s, (uint64_t)t) * (V - 3));
        int64_t got;
        if ((st = pl_encdec_greedy(&g, src, len, bos, eos, TD - 1, out, &got)))
            return fail(st);
        /* the cached steps' logits, position by position */
        if ((st = pl_generator_set_source(&g.dec, g.enc.lnf, len)))
            return fail(st);
        for (int64_t p = 0; p <= got && p < TD; p++) {
            if ((st = pl_generator_step(&g.dec, p ? out[p - 1] : bos, p)))
                return fail(st);
            memcpy(logit_dec + p * V, g.dec.logits, (size_t)V * sizeof(float));
        }
        /* the training forward, teacher-forced */
        for (int64_t t = 0; t < TE; t++)
            e.enc->tokens[t] = t < len ? src[t] : 0;
        e.enc->lengths[0] = (int32_t)len;
        e.enc->sample[0] = e.dec->sample[0] = 0;
        for (int64_t t = 0; t < TD; t++) {
            e.dec->tokens[t] = t == 0 ? bos : t <= got ? out[t - 1] : 0;
            e.dec->targets[t] = 0;
        }
        if ((st = pl_encdec_forward(&e)))
            return fail(st);
        for (int64_t p = 0; p <= got && p < TD; p++) {
            pl_ref_gemm(0, 1, 1, Vl, C, e.dec->lnf + p * C, C, e.dec->p.out_w, C, 0.0f, row, Vl);
            if (e.dec->p.out_b)
                pl_cpu_add(row, row, e.dec->p.out_b, Vl);
            double big = 0, diff = 0;
            int64_t arg = -1;
            float best = -INFINITY;
            for (int64_t v = 0; v < Vl && v0 + v < V; v++) {
                const double a = logit_dec[p * V + v0 + v], b = row[v];
                big = fabs(b) > big ? fabs(b) : big;
                diff = fabs(a - b) > diff ? fabs(a - b) : diff;
                if (row[v] > best)
                    best = row[v], arg = v0 + v;
            }
            worst = diff / big > worst ? diff / big : worst;
            bad += diff > 2e-4 * big;
            /* the argmax over the whole vocabulary: the best of every rank's slice */
            struct { float v; int i; } mine = {best, (int)arg}, all = mine;
            if (tp.size > 1)
                MPI_Allreduce(&mine, &all, 1, MPI_FLOAT_INT, MPI_MAXLOC, tp.mpi);
            const int32_t want = p < got ? out[p] : eos;
            bad += all.i != want && (p < got || got < TD - 1);
            steps++;
        }
        if (tp.rank == 0) {
            printf("source %d (%lld tokens):", s, (long long)len);
            for (int64_t k = 0; k < got; k++)
                printf(" %d", out[k]);
            printf("\n");
        }
    }
    if (tp.size > 1)
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, tp.mpi);
    if (tp.rank == 0)
        printf("%d steps, worst relative logit difference %.3g, %d mismatches\n", steps, worst,
               bad);
    pl_encdec_free(&e);
    pl_encdec_generator_free(&g);
    pl_gemm_free(gemm);
    pl_free(params);
    pl_free(grads);
    pl_free(logit_dec);
    pl_free(row);
    pl_registry_free(&reg);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    pl_dist dist;
    pl_status st = pl_dist_init(&dist, &argc, &argv);
    if (st)
        return fail(st);
    if ((st = pl_comm_init(&tp, MPI_COMM_WORLD, "tp", 0)))
        return fail(st);
    const int hf = argc > 1 && strcmp(argv[1], "--hf-t5") == 0;
    int post_ln = argc > 1 && strcmp(argv[1], "--post-ln") == 0;
    if (post_ln && argc > 2 && strcmp(argv[2], "--scale-embedding") == 0)
        post_ln = 2;
    if (argc > 1 + hf + (post_ln > 0) + (post_ln > 1)) {
        fprintf(stderr, "usage: [mpirun -n P] encdec_decode_check [--hf-t5 | --post-ln "
                        "[--scale-embedding]]\n");
        return 2;
    }
    int rc = run(hf, post_ln);
    pl_comm_free(&tp);
    pl_dist_finalize(&dist);
    return rc;
}
