/* --transformer-block-type (NeMo's Megatron BERT/BART config key
 * transformer_block_type: pre_ln | post_ln) onto the model configuration
 * (train/trainer_internal.h): --model bert becomes transformers' BERT, --model
 * bart transformers' BART's layers (both stacks post-LN with a norm of their
 * embeddings, no final norms). docs/training.md, "Post-LN BERT", says where
 * NeMo's post_ln and transformers' BERT differ and which one plait builds. */
#include "train/trainer_internal.h"

#include "model/spec.h"

#include <string.h>

pl_status pl_train_block_type(const pl_train_args *a, pl_model_config *c)
{
    const char *t = a->transformer_block_type;
    const int post = t && strcmp(t, "post_ln") == 0;
    if (a->scale_embedding && !(post && c->family == PL_FAMILY_BART))
        return pl_errorf(PL_ERR_ARG, "--scale-embedding is for --model bart "
                         "--transformer-block-type post_ln (transformers' BART)");
    c->scale_embedding = a->scale_embedding;
    if (!post)
        return PL_OK;
    if (c->family != PL_FAMILY_BERT && c->family != PL_FAMILY_BART)
        return pl_errorf(PL_ERR_ARG, "--transformer-block-type %s is for --model bert and bart "
                         "(transformers' BERT and BART); --model %s is pre-LN only", t,
                         pl_family_get(c->family)->name);
    if (c->block.res_post_norm)
        return pl_errorf(PL_ERR_ARG, "--transformer-block-type post_ln with "
                         "--apply-residual-connection-post-layernorm: a post-LN layer's residual "
                         "is already its norm's output; drop one of them");
    if (c->block.act == PL_ACT_SWIGLU)
        return pl_errorf(PL_ERR_ARG, "--transformer-block-type post_ln with --swiglu: the post-LN "
                         "BERT's and BART's MLP is GELU");
    c->block.post_norm = 1;
    c->block.act = PL_ACT_GELU_ERF; /* transformers' BERT (hidden_act) and BART
                                     * (activation_function): "gelu" */
    return PL_OK;
}
