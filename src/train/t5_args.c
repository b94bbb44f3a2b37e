/* transformers' T5 layer in `plait train`: --position-embedding-type relative
 * with Megatron's --relative-attention-num-buckets and
 * --relative-attention-max-distance, --softmax-scale, --ffn-activation and
 * --output-layer-input-scale (option rows: PL_TRAIN_T5_OPTIONS, train/args.h). */
#include "train/trainer_internal.h"

#include <math.h>
#include <string.h>

pl_status pl_train_t5_config(const pl_train_args *a, pl_model_config *c)
{
    const char *pos = a->position_embedding_type, *act = a->ffn_activation;
    if (pos && strcmp(pos, "relative") == 0)
        c->block.pos = PL_POS_RELATIVE;
    if (c->block.pos == PL_POS_RELATIVE) { /* zero otherwise, as a checkpoint reads them */
        c->rel_buckets = a->rel_buckets;
        c->rel_max_distance = a->rel_max_distance;
    }
    if (c->block.pos == PL_POS_RELATIVE &&
        (a->rel_buckets < 2 || a->rel_max_distance <= a->rel_buckets / 4))
        return pl_errorf(PL_ERR_ARG, "--relative-attention-num-buckets %lld must be at least 2 "
                         "and --relative-attention-max-distance %lld above a quarter of it",
                         (long long)a->rel_buckets, (long long)a->rel_max_distance);
    if (a->softmax_scale < 0 || a->output_scale < 0 || !isfinite(a->softmax_scale) ||
        !isfinite(a->output_scale))
        return pl_errorf(PL_ERR_ARG, "--softmax-scale %g and --output-layer-input-scale %g must "
                         "be positive (0: not used)", a->softmax_scale, a->output_scale);
    if (a->kv_channels < 0 || a->kv_channels > (1 << 20))
        return pl_errorf(PL_ERR_ARG, "--kv-channels %lld: expected a head size from 1 (0: hidden / "
                         "heads)", (long long)a->kv_channels);
    c->kv_channels = a->kv_channels == c->hidden / c->heads && c->hidden % c->heads == 0
                         ? 0 : a->kv_channels; /* Megatron's default spelled out: the default */
    c->softmax_scale = (float)a->softmax_scale;
    c->output_scale = (float)a->output_scale;
    if (act && a->swiglu && strcmp(act, "swiglu") != 0)
        return pl_errorf(PL_ERR_ARG, "--swiglu contradicts --ffn-activation %s", act);
    if (act)
        c->block.act = strcmp(act, "relu") == 0    ? PL_ACT_RELU
                       : strcmp(act, "geglu") == 0 ? PL_ACT_GEGLU
                       : strcmp(act, "swiglu") == 0 ? PL_ACT_SWIGLU
                                                    : PL_ACT_GELU;
    pl_model_encdec_output_bias(c);
    return PL_OK;
}
