/* The GPT parameter table. */
#include "model/config.h"

#include "base/status.h"

#include <math.h>
#include <stdio.h>

int64_t pl_model_padded_vocab(int64_t vocab_size, int64_t divisible_by, int64_t tp)
{
    int64_t m = divisible_by * tp;
    return (vocab_size + m - 1) / m * m;
}

pl_status pl_model_register(pl_registry *r, const pl_model_config *c, int pp_size)
{
    if (c->heads % r->tp_size)
        return pl_errorf(PL_ERR_ARG,
                         "--num-attention-heads %lld is not divisible by "
                         "--tensor-model-parallel-size %d",
                         (long long)c->heads, r->tp_size);
    if (c->ffn_hidden % r->tp_size)
        return pl_errorf(PL_ERR_ARG,
                         "--ffn-hidden-size %lld is not divisible by --tensor-model-parallel-size %d",
                         (long long)c->ffn_hidden, r->tp_size);
    if (c->num_layers % pp_size)
        return pl_errorf(PL_ERR_ARG,
                         "--num-layers %lld is not divisible by --pipeline-model-parallel-size %d",
                         (long long)c->num_layers, pp_size);
    const int64_t C = c->hidden, F = c->ffn_hidden;
    const float std = (float)c->init_std;
    const float out_std = (float)(c->init_std / sqrt(2.0 * (double)c->num_layers));
    const int last = pp_size - 1;
    pl_status st = PL_OK;
    pl_param_spec emb[] = {
        {"embedding.word_embeddings.weight", 2, {c->padded_vocab, C}, PL_TP_VOCAB, 0, -1, 1,
         PL_INIT_NORMAL, std},
        {"embedding.position_embeddings.weight", 2, {c->max_positions, C}, PL_TP_REPLICATED, 0, -1,
         1, PL_INIT_NORMAL, std},
    };
    for (int i = 0; i < 2; i++)
        PL_TRY(pl_registry_add(r, &emb[i]));
    int64_t per_stage = c->num_layers / pp_size;
    for (int64_t l = 0; l < c->num_layers; l++) {
        int stage = (int)(l / per_stage), li = (int)l;
        struct {
            const char *suffix;
            int ndim;
            int64_t rows, cols;
            pl_tp_split split;
            int wd;
            pl_init_kind init;
            float std;
        } layer[] = {
            {"input_layernorm.weight", 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ONES, 0},
            {"input_layernorm.bias", 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ZEROS, 0},
            {"self_attention.linear_qkv.weight", 2, 3 * C, C, PL_TP_ROWS, 1, PL_INIT_NORMAL, std},
            {"self_attention.linear_qkv.bias", 1, 3 * C, 1, PL_TP_ROWS, 0, PL_INIT_ZEROS, 0},
            {"self_attention.linear_proj.weight", 2, C, C, PL_TP_COLS, 1, PL_INIT_NORMAL, out_std},
            {"self_attention.linear_proj.bias", 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ZEROS, 0},
            {"pre_mlp_layernorm.weight", 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ONES, 0},
            {"pre_mlp_layernorm.bias", 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ZEROS, 0},
            {"mlp.linear_fc1.weight", 2, F, C, PL_TP_ROWS, 1, PL_INIT_NORMAL, std},
            {"mlp.linear_fc1.bias", 1, F, 1, PL_TP_ROWS, 0, PL_INIT_ZEROS, 0},
            {"mlp.linear_fc2.weight", 2, C, F, PL_TP_COLS, 1, PL_INIT_NORMAL, out_std},
            {"mlp.linear_fc2.bias", 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ZEROS, 0},
        };
        for (size_t k = 0; k < sizeof layer / sizeof *layer; k++) {
            char name[PL_PARAM_NAME_MAX];
            snprintf(name, sizeof name, "decoder.layers.%d.%s", li, layer[k].suffix);
            pl_param_spec s = {name,          layer[k].ndim, {layer[k].rows, layer[k].cols},
                               layer[k].split, stage,        li,
                               layer[k].wd,    layer[k].init, layer[k].std};
            PL_TRY(pl_registry_add(r, &s));
        }
    }
    pl_param_spec fin[] = {
        {"decoder.final_layernorm.weight", 1, {C}, PL_TP_REPLICATED, last, -1, 0, PL_INIT_ONES, 0},
        {"decoder.final_layernorm.bias", 1, {C}, PL_TP_REPLICATED, last, -1, 0, PL_INIT_ZEROS, 0},
    };
    for (int i = 0; i < 2; i++)
        PL_TRY(pl_registry_add(r, &fin[i]));
    return PL_OK;
fail:
    return st;
}

int64_t pl_model_num_params(const pl_model_config *c)
{
    int64_t C = c->hidden, F = c->ffn_hidden;
    int64_t per_layer = 4 * C + (3 * C * C + 3 * C) + (C * C + C) + (F * C + F) + (C * F + C);
    return c->vocab_size * C + c->max_positions * C + c->num_layers * per_layer + 2 * C;
}

double pl_model_flops_per_token(const pl_model_config *c)
{
    double C = (double)c->hidden, F = (double)c->ffn_hidden, L = (double)c->num_layers;
    double matmul_params = L * (3 * C * C + C * C + 2 * F * C) + (double)c->padded_vocab * C;
    return 6.0 * matmul_params + 12.0 * L * C * (double)c->seq_length;
}
