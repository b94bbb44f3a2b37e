/* The manifest's keys of transformers' T5 layer (ckpt/manifest.h): written
 * only when a model has them, so other manifests are unchanged; absent keys
 * read as their defaults. Keys: Megatron's argument names where it has one
 * (relative_attention_num_buckets, relative_attention_max_distance,
 * softmax_scale), plait's otherwise (ffn_activation, output_layer_input_scale). */
#include "ckpt/manifest.h"

#include <string.h>

static const char *const act_names[] = {"gelu", "swiglu", "relu", "geglu"};

void pl_ckpt_t5_arch_write(cJSON *model, const pl_model_config *c, pl_ckpt_jbuild *b)
{
    if (c->block.act == PL_ACT_RELU || c->block.act == PL_ACT_GEGLU)
        pl_ckpt_jstr(model, "ffn_activation", act_names[c->block.act], b);
    if (c->block.pos == PL_POS_RELATIVE) {
        pl_ckpt_jnum(model, "relative_attention_num_buckets", (double)c->rel_buckets, b);
        pl_ckpt_jnum(model, "relative_attention_max_distance", (double)c->rel_max_distance, b);
    }
    if (c->softmax_scale > 0)
        pl_ckpt_jnum(model, "softmax_scale", c->softmax_scale, b);
    if (c->output_scale > 0)
        pl_ckpt_jnum(model, "output_layer_input_scale", c->output_scale, b);
    if (c->kv_channels > 0)
        pl_ckpt_jnum(model, "kv_channels", (double)c->kv_channels, b);
}

/* An optional number: def when absent. */
static pl_status opt(const cJSON *model, const char *key, double def, double lo, double hi,
                     int integral, const char *mpath, double *out)
{
    *out = def;
    if (!cJSON_HasObjectItem(model, key))
        return PL_OK;
    return pl_ckpt_jfield(model, "model", key, lo, hi, integral, mpath, out);
}

pl_status pl_ckpt_t5_arch_read(const cJSON *model, pl_model_config *c, const char *mpath)
{
    pl_status st = PL_OK;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(model, "ffn_activation");
    if (act) {
        int k = 2;
        while (k < 4 && !(cJSON_IsString(act) && strcmp(act->valuestring, act_names[k]) == 0))
            k++;
        if (k == 4)
            return pl_errorf(PL_ERR_FORMAT, "%s: \"model.ffn_activation\" must be \"relu\" or "
                             "\"geglu\"", mpath);
        c->block.act = (pl_act_kind)k;
    }
    double v[5];
    PL_TRY(opt(model, "relative_attention_num_buckets", 32, 2, 1 << 20, 1, mpath, &v[0]));
    PL_TRY(opt(model, "relative_attention_max_distance", 128, 1, 1 << 30, 1, mpath, &v[1]));
    PL_TRY(opt(model, "softmax_scale", 0, 0, 1e30, 0, mpath, &v[2]));
    PL_TRY(opt(model, "output_layer_input_scale", 0, 0, 1e30, 0, mpath, &v[3]));
    PL_TRY(opt(model, "kv_channels", 0, 0, 1 << 20, 1, mpath, &v[4]));
    if (c->block.pos == PL_POS_RELATIVE) {
        c->rel_buckets = (int64_t)v[0];
        c->rel_max_distance = (int64_t)v[1];
    }
    c->softmax_scale = (float)v[2];
    c->output_scale = (float)v[3];
    c->kv_channels = (int64_t)v[4];
    pl_model_encdec_output_bias(c);
fail:
    return st;
}

const char *pl_ckpt_t5_arch_differs(const pl_model_config *saved, const pl_model_config *run)
{
    if (saved->block.act != run->block.act)
        return "--ffn-activation";
    if (saved->rel_buckets != run->rel_buckets || saved->rel_max_distance != run->rel_max_distance)
        return "--relative-attention-num-buckets or --relative-attention-max-distance";
    if (saved->softmax_scale != run->softmax_scale)
        return "--softmax-scale";
    if (saved->output_scale != run->output_scale)
        return "--output-layer-input-scale";
    if (saved->kv_channels != run->kv_channels)
        return "--kv-channels";
    return NULL;
}
