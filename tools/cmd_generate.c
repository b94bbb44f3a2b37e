/* plait generate: sample text from a checkpoint with a KV cache. */
#include "commands.h"

#include "base/alloc.h"
#include "base/rng.h"
#include "ckpt/checkpoint.h"
#include "data/tokenizer/tokenizer.h"
#include "model/generate.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct gen_opts {
    const char *load, *prompt, *tokenizer_type, *vocab_file, *merge_file, *tokenizer_model;
    int64_t max_new_tokens, top_k, seed;
    double temperature, top_p;
} gen_opts;

#define F(x) offsetof(gen_opts, x)
static const pl_option gen_options[] = {
    {"--load", PL_OPT_STRING, NULL, F(load), "checkpoint directory", NULL, PL_OPT_REQUIRED},
    {"--prompt", PL_OPT_STRING, "", F(prompt), "text to continue", NULL, 0},
    {"--max-new-tokens", PL_OPT_INT, "64", F(max_new_tokens), "tokens to generate", NULL, 0},
    {"--temperature", PL_OPT_FLOAT, "1.0", F(temperature), "softmax temperature (0: greedy)", NULL, 0},
    {"--top-k", PL_OPT_INT, "0", F(top_k), "sample among the k most likely (0: all)", NULL, 0},
    {"--top-p", PL_OPT_FLOAT, "1.0", F(top_p), "nucleus sampling mass (1: off)", NULL, 0},
    {"--seed", PL_OPT_INT, "1234", F(seed), "sampling seed", NULL, 0},
    {"--tokenizer-type", PL_OPT_STRING, NULL, F(tokenizer_type), "override the checkpoint's tokenizer", NULL, 0},
    {"--vocab-file", PL_OPT_STRING, NULL, F(vocab_file), "override the checkpoint's vocabulary file", NULL, 0},
    {"--merge-file", PL_OPT_STRING, NULL, F(merge_file), "override the checkpoint's merges file", NULL, 0},
    {"--tokenizer-model", PL_OPT_STRING, NULL, F(tokenizer_model), "override the checkpoint's tokenizer model", NULL, 0},
};
static const pl_command_spec gen_cmd = {"generate", "Generate text from a checkpoint (KV-cached).",
                                        gen_options, (int)(sizeof gen_options / sizeof *gen_options)};

int plait_cmd_generate(int argc, char **argv)
{
    gen_opts o;
    int rc = plait_parse(&gen_cmd, &o, argc, argv, NULL);
    if (rc >= 0)
        return rc;
    pl_status st = PL_OK;
    char *strings = NULL;
    float *params = NULL, *scratch = NULL;
    pl_registry reg = {0};
    pl_tokenizer *tok = NULL;
    pl_gemm *gemm = NULL;
    pl_generator inf = {0};
    pl_ids ids = {0};
    pl_bytes text = {0};
    if (o.max_new_tokens < 0 || o.temperature < 0 || o.top_k < 0 || o.top_p <= 0 || o.top_p > 1) {
        st = pl_errorf(PL_ERR_ARG, "plait generate: need --max-new-tokens >= 0, --temperature >= 0, "
                       "--top-k >= 0 and 0 < --top-p <= 1");
        goto fail;
    }
    int64_t it;
    PL_TRY(pl_ckpt_latest(o.load, &it));
    if (it < 0) {
        st = pl_errorf(PL_ERR_ARG, "--load %s: no latest_checkpointed_iteration.txt", o.load);
        goto fail;
    }
    pl_model_config cfg;
    pl_ckpt_meta meta;
    PL_TRY(pl_ckpt_read_config(o.load, it, &cfg, &meta, &strings));
    const char *tt = o.tokenizer_type ? o.tokenizer_type : meta.tokenizer_type;
    const char *vf = o.vocab_file ? o.vocab_file : meta.vocab_file;
    const char *mf = o.merge_file ? o.merge_file : meta.merge_file;
    const char *tm = o.tokenizer_model ? o.tokenizer_model : meta.tokenizer_model;
    if (!tt) {
        st = pl_errorf(PL_ERR_ARG, "--load %s: the checkpoint names no tokenizer; give "
                       "--tokenizer-type and --vocab-file", o.load);
        goto fail;
    }
    pl_tokenizer_spec ts = {tt, vf, mf, tm, meta.vocab_extra_ids, meta.legacy_tokenizer};
    PL_TRY(pl_tokenizer_open(&tok, &ts));
    pl_registry_init(&reg, 1, 0, 0);
    PL_TRY(pl_model_register(&reg, &cfg, 1));
    params = pl_calloc((size_t)reg.numel, sizeof(float));
    scratch = pl_malloc((size_t)(2 * cfg.vocab_size) * sizeof(float));
    if (!params || !scratch) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the model");
        goto fail;
    }
    pl_ckpt_buffers buf = {&reg, params, NULL, NULL, NULL};
    pl_free(strings);
    strings = NULL;
    PL_TRY(pl_ckpt_load(o.load, it, &cfg, &buf, &meta, &strings));
    PL_TRY(pl_gemm_init(&gemm));
    PL_TRY(pl_generator_init(&inf, &cfg, &reg, params, gemm));
    PL_TRY(pl_tokenizer_encode(tok, o.prompt, strlen(o.prompt), &ids));
    if (ids.n == 0 && tok->eod >= 0) /* an empty prompt starts after an end of document */
        PL_TRY(pl_ids_push(&ids, tok->eod));
    if (ids.n + o.max_new_tokens > cfg.max_positions) {
        st = pl_errorf(PL_ERR_ARG, "prompt (%lld tokens) + --max-new-tokens %lld exceeds the "
                       "model's %lld positions", (long long)ids.n, (long long)o.max_new_tokens,
                       (long long)cfg.max_positions);
        goto fail;
    }
    fputs(o.prompt, stdout);
    int64_t n_prompt = ids.n;
    for (int64_t pos = 0; pos < n_prompt + o.max_new_tokens - 1; pos++) {
        PL_TRY(pl_generator_step(&inf, ids.data[pos], pos));
        if (pos + 1 < n_prompt)
            continue;
        double u = pl_rng_uniform((uint64_t)o.seed, 0x67656e, (uint64_t)pos);
        int32_t next = pl_sample_logits(inf.logits, cfg.vocab_size, o.temperature, o.top_k,
                                        o.top_p, u, scratch);
        if (next == tok->eod)
            break;
        PL_TRY(pl_ids_push(&ids, next));
        text.n = 0;
        PL_TRY(pl_tokenizer_decode(tok, &next, 1, &text));
        fwrite(text.data, 1, text.n, stdout);
        fflush(stdout);
    }
    fputc('\n', stdout);
fail:
    pl_bytes_free(&text);
    pl_ids_free(&ids);
    pl_generator_free(&inf);
    pl_gemm_free(gemm);
    pl_free(params);
    pl_free(scratch);
    pl_free(strings);
    pl_registry_free(&reg);
    pl_tokenizer_free(tok);
    return st ? plait_report(st) : 0;
}
