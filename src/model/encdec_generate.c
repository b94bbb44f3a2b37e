/* Greedy and sampled decoding of an encoder-decoder model (model/encdec_generate.h). */
#include "model/encdec_generate.h"

#include "base/alloc.h"
#include "base/rng.h"

#include <string.h>

pl_status pl_encdec_generator_init(pl_encdec_generator *g, const pl_model_config *cfg,
                                   const pl_registry *reg, const float *params, pl_comm *tp,
                                   pl_gemm *gemm, int64_t rows)
{
    pl_status st = PL_OK;
    memset(g, 0, sizeof *g);
    g->cfg = *cfg;
    if (!pl_model_is_encdec(cfg))
        return pl_errorf(PL_ERR_INTERNAL, "pl_encdec_generator_init: not an encoder-decoder");
    pl_model_config enc, dec;
    pl_model_encdec_parts(cfg, &enc, &dec);
    enc.hidden_dropout = enc.attention_dropout = 0; /* inference: no masks are drawn */
    enc.sequence_parallel = 0;
    PL_TRY(pl_model_init(&g->enc, &enc, reg, (float *)params, NULL, 1, NULL, tp, gemm));
    g->enc_up = 1;
    g->enc.training = 0;
    dec.sequence_parallel = 0;
    PL_TRY(pl_generator_init_rows(&g->dec, &dec, reg, params, tp, gemm, rows));
    g->scratch = pl_malloc((size_t)(2 * cfg->vocab_size) * sizeof(float));
    if (!g->scratch) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the sampler");
        goto fail;
    }
    return PL_OK;
fail:
    pl_encdec_generator_free(g);
    return st;
}

void pl_encdec_generator_free(pl_encdec_generator *g)
{
    if (g->enc_up)
        pl_model_free(&g->enc);
    pl_generator_free(&g->dec);
    pl_free(g->scratch);
    memset(g, 0, sizeof *g);
}

pl_status pl_encdec_greedy(pl_encdec_generator *g, const int32_t *src, int64_t len, int32_t bos,
                           int32_t eos, int64_t max_new, int32_t *out, int64_t *n)
{
    return pl_encdec_decode(g, src, len, bos, eos, max_new, NULL, out, n);
}

pl_status pl_encdec_encode(pl_encdec_generator *g, const int32_t *src, int64_t len)
{
    pl_status st = PL_OK;
    const int64_t Te = g->enc.T;
    if (len < 1 || len > Te)
        return pl_errorf(PL_ERR_ARG, "a source of %lld tokens: the encoder takes 1 to %lld",
                         (long long)len, (long long)Te);
    for (int64_t i = 0; i < Te; i++) /* the padding's keys are masked: any id */
        g->enc.tokens[i] = i < len ? src[i] : src[0];
    g->enc.lengths[0] = (int32_t)len;
    g->enc.sample[0] = 0;
    PL_TRY(pl_model_forward(&g->enc));
    PL_TRY(pl_generator_set_source(&g->dec, g->enc.lnf, len));
fail:
    return st;
}

int64_t pl_encdec_positions(const pl_encdec_generator *g)
{
    return g->dec.cfg.seq_length < g->dec.cfg.max_positions ? g->dec.cfg.seq_length
                                                            : g->dec.cfg.max_positions;
}

pl_status pl_encdec_decode(pl_encdec_generator *g, const int32_t *src, int64_t len, int32_t bos,
                           int32_t eos, int64_t max_new, const pl_decode_opts *opts, int32_t *out,
                           int64_t *n)
{
    static const pl_decode_opts greedy = {0.0, 1.0, 0, 0, 0};
    if (!opts)
        opts = &greedy;
    pl_status st = PL_OK;
    const int64_t V = g->cfg.vocab_size, P = pl_encdec_positions(g);
    *n = 0;
    PL_TRY(pl_encdec_encode(g, src, len));
    int32_t tok = bos;
    for (int64_t pos = 0; pos < P && *n < max_new; pos++) {
        PL_TRY(pl_generator_step(&g->dec, tok, pos));
        const double u = pl_rng_uniform(opts->seed, opts->source, (uint64_t)pos);
        const int32_t next = pl_sample_logits(g->dec.logits, V, opts->temperature, opts->top_k,
                                              opts->top_p, u, g->scratch);
        if (next == eos)
            break;
        out[(*n)++] = tok = next;
    }
fail:
    return st;
}
