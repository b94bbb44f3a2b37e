/* ckpt_logits: plait's logits of a checkpoint (any layout, gathered into one
 * process through ckpt/source.h), for the Hugging Face export's oracle
 * (tests/scripts/hf_models.py). Runs the training forward (pl_model_forward,
 * fp32) over T tokens drawn from a fixed LCG below the vocabulary size and
 * writes OUT.safetensors with "tokens" (I32, T) and "logits" (F32, T x V,
 * the unpadded vocabulary; BERT's through its lm transform with the output
 * bias, and "binary_logits" (2) with the binary head; a fine-tuned BERT's
 * task logits instead: (1, K) of a pooled head, (T, K) of a token or span
 * head). Token types 0, no padding. An encoder-decoder (T5, BART): "src_tokens"
 * (T), the decoder's "tokens" (T - 4) and its "logits" (T - 4 x V).
 * usage: ckpt_logits CKPT_DIR OUT [T] */
#include "base/alloc.h"
#include "ckpt/safetensors.h"
#include "ckpt/source.h"
#include "ckpt/tools.h"
#include "model/encdec.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An encoder-decoder (T5, BART): a source of T tokens, the decoder's first Td = T - 4
 * positions teacher-forced ("src_tokens", "tokens"), the decoder's logits. */
static pl_status run_encdec(pl_ckpt_source *s, pl_model_config cfg, const char *out, int64_t T)
{
    const int64_t Td = T - 4, V = cfg.vocab_size, PV = cfg.padded_vocab, C = cfg.hidden;
    cfg.seq_length = T;
    cfg.dec_seq_length = Td;
    pl_registry reg;
    pl_registry_init(&reg, 1, 0, 0);
    pl_encdec e;
    memset(&e, 0, sizeof e);
    pl_gemm *gemm = NULL;
    pl_st_writer *w = NULL;
    float *params = NULL, *full = pl_calloc((size_t)(Td * PV), sizeof(float));
    float *logits = pl_calloc((size_t)(Td * V), sizeof(float));
    int32_t *ids = pl_calloc((size_t)(T + Td), sizeof(int32_t));
    pl_status st = full && logits && ids ? PL_OK : pl_errorf(PL_ERR_NOMEM, "out of memory");
    if (st)
        goto fail;
    PL_TRY(pl_model_register(&reg, &cfg, 1));
    if (!(params = pl_calloc((size_t)reg.numel, sizeof(float)))) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    PL_TRY(pl_ckpt_source_fill(s, &reg, PL_CKPT_PARAMS, params, 0, reg.numel));
    pl_comm tp = {0};
    tp.size = 1;
    PL_TRY(pl_gemm_init(&gemm));
    PL_TRY(pl_encdec_init(&e, &cfg, &reg, params, NULL, 1, &tp, gemm));
    uint64_t lcg = 2026;
    for (int64_t t = 0; t < T + Td; t++) {
        lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
        ids[t] = (int32_t)((lcg >> 33) % (uint64_t)V);
    }
    memcpy(e.enc->tokens, ids, (size_t)T * sizeof(int32_t));
    e.enc->lengths[0] = (int32_t)T;
    memcpy(e.dec->tokens, ids + T, (size_t)Td * sizeof(int32_t));
    memset(e.dec->targets, 0, (size_t)Td * sizeof(int32_t));
    PL_TRY(pl_encdec_forward(&e));
    pl_ref_gemm(0, 1, Td, PV, C, e.dec->lnf, C, e.dec->p.out_w, C, 0.0f, full, PV);
    for (int64_t t = 0; t < Td; t++) {
        if (e.dec->p.out_b)
            pl_cpu_add(full + t * PV, full + t * PV, e.dec->p.out_b, PV);
        memcpy(logits + t * V, full + t * PV, (size_t)V * sizeof(float));
    }
    PL_TRY(pl_st_writer_new(&w));
    const int64_t ss[1] = {T}, ts[1] = {Td}, ls[2] = {Td, V};
    PL_TRY(pl_st_writer_add(w, "src_tokens", "I32", 1, ss, ids));
    PL_TRY(pl_st_writer_add(w, "tokens", "I32", 1, ts, ids + T));
    PL_TRY(pl_st_writer_add(w, "logits", "F32", 2, ls, logits));
    st = pl_st_writer_finish(w, out);
    w = NULL;
fail:
    pl_st_writer_free(w);
    pl_encdec_free(&e);
    pl_gemm_free(gemm);
    pl_free(params);
    pl_free(full);
    pl_free(logits);
    pl_free(ids);
    pl_registry_free(&reg);
    return st;
}

static pl_status run(const char *path, const char *out, int64_t T)
{
    char dir[4096];
    int64_t it;
    pl_status st = pl_ckpt_resolve(path, -1, dir, sizeof dir, &it);
    if (st)
        return st;
    pl_ckpt_source *s = NULL;
    pl_registry reg;
    pl_registry_init(&reg, 1, 0, 0);
    pl_model m;
    memset(&m, 0, sizeof m);
    pl_gemm *gemm = NULL;
    float *params = NULL, *full = NULL, *logits = NULL;
    int32_t *tokens = NULL;
    pl_st_writer *w = NULL;
    PL_TRY(pl_ckpt_source_open(dir, it, &s));
    pl_model_config cfg = *pl_ckpt_source_config(s);
    cfg.pp_chunks = 0;
    cfg.pp_first_layers = cfg.pp_last_layers = 0;
    cfg.seq_length = T;
    cfg.hidden_dropout = cfg.attention_dropout = 0;
    if (pl_model_is_encdec(&cfg)) {
        st = run_encdec(s, cfg, out, T);
        goto fail;
    }
    const int64_t V = cfg.vocab_size, PV = cfg.padded_vocab, C = cfg.hidden;
    PL_TRY(pl_model_register(&reg, &cfg, 1));
    params = pl_calloc((size_t)reg.numel, sizeof(float));
    full = pl_calloc((size_t)(T * PV), sizeof(float));
    logits = pl_calloc((size_t)(T * V), sizeof(float));
    tokens = pl_calloc((size_t)T, sizeof(int32_t));
    if (!params || !full || !logits || !tokens) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    PL_TRY(pl_ckpt_source_fill(s, &reg, PL_CKPT_PARAMS, params, 0, reg.numel));
    pl_comm tp = {0};
    tp.size = 1;
    PL_TRY(pl_gemm_init(&gemm));
    PL_TRY(pl_model_init(&m, &cfg, &reg, params, NULL, 1, NULL, &tp, gemm));
    uint64_t lcg = 2026;
    for (int64_t t = 0; t < T; t++) {
        lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
        m.tokens[t] = tokens[t] = (int32_t)((lcg >> 33) % (uint64_t)V);
        m.targets[t] = 0;
    }
    PL_TRY(pl_model_forward(&m));
    const pl_head_spec *h = &cfg.head;
    const int64_t K = h->classes;
    int64_t ls[2] = {T, V};
    if (h->task == PL_TASK_NONE) { /* BERT: through its lm transform, plus the output bias */
        pl_ref_gemm(0, 1, T, PV, C, h->lm_transform ? m.mb[0].head.out : m.lnf, C, m.p.out_w, C,
                    0.0f, full, PV);
        for (int64_t t = 0; t < T; t++) {
            if (m.p.out_b)
                pl_cpu_add(full + t * PV, full + t * PV, m.p.out_b, PV);
            memcpy(logits + t * V, full + t * PV, (size_t)V * sizeof(float));
        }
    } else if (PL_TASK_POOLED(h->task)) {
        memcpy(logits, m.mb[0].head.logits, (size_t)K * sizeof(float));
        ls[0] = 1, ls[1] = K;
    } else { /* token or span head: every position's K logits */
        pl_ref_gemm(0, 1, T, K, C, m.lnf, C, m.p.head.tok_w, C, 0.0f, logits, K);
        for (int64_t t = 0; t < T; t++)
            pl_cpu_add(logits + t * K, logits + t * K, m.p.head.tok_b, K);
        ls[1] = K;
    }
    PL_TRY(pl_st_writer_new(&w));
    const int64_t ts[1] = {T}, bs[1] = {2};
    PL_TRY(pl_st_writer_add(w, "tokens", "I32", 1, ts, tokens));
    PL_TRY(pl_st_writer_add(w, "logits", "F32", 2, ls, logits));
    if (h->binary_head) /* BERT's sentence-order / next-sentence logits */
        PL_TRY(pl_st_writer_add(w, "binary_logits", "F32", 1, bs, m.mb[0].head.logits));
    st = pl_st_writer_finish(w, out);
    w = NULL;
fail:
    pl_st_writer_free(w);
    pl_model_free(&m);
    pl_gemm_free(gemm);
    pl_free(params);
    pl_free(full);
    pl_free(logits);
    pl_free(tokens);
    pl_registry_free(&reg);
    pl_ckpt_source_close(s);
    return st;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ckpt_logits CKPT_DIR OUT [T]\n");
        return 2;
    }
    pl_status st = run(argv[1], argv[2], argc > 3 ? atoll(argv[3]) : 16);
    if (st) {
        fprintf(stderr, "ckpt_logits: %s\n", pl_error_msg());
        return 1;
    }
    return 0;
}
