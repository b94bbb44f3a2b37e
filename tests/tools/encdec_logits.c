/* encdec_logits: plait's decoder logits of an encoder-decoder checkpoint (any
 * layout, gathered into one process through ckpt/source.h), for the Hugging
 * Face T5 export's oracle (tests/scripts/t5_hf_export.py). Runs the training
 * forward (pl_encdec_forward, fp32, no dropout) of one sample: Te source tokens
 * (the last 3 padding: the encoder's length Te - 3) and Td decoder tokens drawn
 * from a fixed LCG below the vocabulary size, and writes OUT.safetensors with
 * "src" (I32, Te), "src_len" (I32, 1), "dec" (I32, Td) and "logits" (F32,
 * Td x V, the unpadded vocabulary). With LO, the tokens are drawn from [LO, V) (the
 * vocabulary's end: T5's added tokens and sentinels).
 * usage: encdec_logits CKPT_DIR OUT [Te Td [LO]] */
#include "base/alloc.h"
#include "ckpt/safetensors.h"
#include "ckpt/source.h"
#include "ckpt/tools.h"
#include "model/encdec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t next_token(uint64_t *lcg, int64_t lo, int64_t V)
{
    *lcg = *lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)(lo + (int64_t)((*lcg >> 33) % (uint64_t)(V - lo)));
}

static pl_status run(const char *path, const char *out, int64_t Te, int64_t Td, int64_t lo)
{
    char dir[4096];
    int64_t it;
    pl_status st = pl_ckpt_resolve(path, -1, dir, sizeof dir, &it);
    if (st)
        return st;
    pl_ckpt_source *s = NULL;
    pl_registry reg;
    pl_registry_init(&reg, 1, 0, 0);
    pl_encdec e;
    memset(&e, 0, sizeof e);
    pl_gemm *gemm = NULL;
    float *params = NULL, *full = NULL, *logits = NULL;
    int32_t *ids = NULL;
    pl_st_writer *w = NULL;
    PL_TRY(pl_ckpt_source_open(dir, it, &s));
    pl_model_config cfg = *pl_ckpt_source_config(s);
    cfg.pp_chunks = 0;
    cfg.pp_first_layers = cfg.pp_last_layers = 0;
    cfg.seq_length = Te;
    cfg.dec_seq_length = Td;
    cfg.hidden_dropout = cfg.attention_dropout = 0;
    const int64_t V = cfg.vocab_size, PV = cfg.padded_vocab, C = cfg.hidden;
    if (lo < 0 || lo >= V) {
        st = pl_errorf(PL_ERR_ARG, "LO %lld is not in [0, %lld)", (long long)lo, (long long)V);
        goto fail;
    }
    PL_TRY(pl_model_register(&reg, &cfg, 1));
    params = pl_calloc((size_t)reg.numel, sizeof(float));
    full = pl_calloc((size_t)(Td * PV), sizeof(float));
    logits = pl_calloc((size_t)(Td * V), sizeof(float));
    ids = pl_calloc((size_t)(Te + Td + 1), sizeof(int32_t));
    if (!params || !full || !logits || !ids) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    PL_TRY(pl_ckpt_source_fill(s, &reg, PL_CKPT_PARAMS, params, 0, reg.numel));
    pl_comm tp = {0};
    tp.size = 1;
    PL_TRY(pl_gemm_init(&gemm));
    PL_TRY(pl_encdec_init(&e, &cfg, &reg, params, NULL, 1, &tp, gemm));
    uint64_t lcg = 2026;
    int32_t *src = ids, *dec = ids + Te, *len = ids + Te + Td;
    *len = (int32_t)(Te > 3 ? Te - 3 : Te);
    for (int64_t t = 0; t < Te; t++)
        e.enc->tokens[t] = src[t] = t < *len ? next_token(&lcg, lo, V) : 0;
    for (int64_t t = 0; t < Td; t++) {
        e.dec->tokens[t] = dec[t] = next_token(&lcg, lo, V);
        e.dec->targets[t] = 0;
    }
    e.enc->lengths[0] = *len;
    e.enc->sample[0] = e.dec->sample[0] = 0;
    pl_encdec_set_pass(&e, 0, 0, 1);
    PL_TRY(pl_encdec_forward(&e));
    pl_ref_gemm(0, 1, Td, PV, C, e.dec->lnf, C, e.dec->p.out_w, C, 0.0f, full, PV);
    for (int64_t t = 0; t < Td; t++) {
        if (e.dec->p.out_b)
            pl_cpu_add(full + t * PV, full + t * PV, e.dec->p.out_b, PV);
        memcpy(logits + t * V, full + t * PV, (size_t)V * sizeof(float));
    }
    PL_TRY(pl_st_writer_new(&w));
    const int64_t se[1] = {Te}, sd[1] = {Td}, s1[1] = {1}, ls[2] = {Td, V};
    PL_TRY(pl_st_writer_add(w, "src", "I32", 1, se, src));
    PL_TRY(pl_st_writer_add(w, "src_len", "I32", 1, s1, len));
    PL_TRY(pl_st_writer_add(w, "dec", "I32", 1, sd, dec));
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
    pl_ckpt_source_close(s);
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 5 && argc != 6) {
        fprintf(stderr, "usage: encdec_logits CKPT_DIR OUT [Te Td [LO]]\n");
        return 2;
    }
    pl_status st = run(argv[1], argv[2], argc > 3 ? atoll(argv[3]) : 24,
                       argc > 3 ? atoll(argv[4]) : 12, argc > 5 ? atoll(argv[5]) : 0);
    if (st) {
        fprintf(stderr, "encdec_logits: %s\n", pl_error_msg());
        return 1;
    }
    return 0;
}
