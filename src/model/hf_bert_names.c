/* transformers' BERT names (models/bert/modeling_bert.py) of a post-LN plait BERT
 * (model/hf_names.h). Every class keeps the encoder under "bert."; the heads:
 *   BertForPreTraining             cls.predictions (transform, bias; the decoder tied
 *                                  to the word embeddings), bert.pooler,
 *                                  cls.seq_relationship (plait's binary head)
 *   BertForMaskedLM                cls.predictions; no pooler, no binary head
 *   BertForSequenceClassification  bert.pooler, classifier (Megatron's
 *                                  classification_head; 1 row: regression)
 *   BertForTokenClassification     classifier (NeMo's classifier.mlp.layer0)
 *   BertForQuestionAnswering       qa_outputs (the span head's 2 rows: start, end)
 * Megatron's QKV rows of head h, [q; k; v], are query, key and value: Llama's Q, K,
 * V transforms with one head per group. */
#include "model/hf_names.h"

#include <stdio.h>
#include <string.h>

typedef struct bert_row {
    const char *plait, *hf;
    pl_hf_transform tf;
} bert_row;

/* layer parameters: the suffix after "encoder.layers.N.", the name after
 * "bert.encoder.layer.N." */
static const bert_row layer_rows[] = {
    {"self_attention.linear_qkv.weight", "attention.self.query.weight", PL_HF_Q},
    {"self_attention.linear_qkv.bias", "attention.self.query.bias", PL_HF_Q},
    {"self_attention.linear_proj.weight", "attention.output.dense.weight", PL_HF_COPY},
    {"self_attention.linear_proj.bias", "attention.output.dense.bias", PL_HF_COPY},
    {"post_self_attn_layernorm.weight", "attention.output.LayerNorm.weight", PL_HF_COPY},
    {"post_self_attn_layernorm.bias", "attention.output.LayerNorm.bias", PL_HF_COPY},
    {"mlp.linear_fc1.weight", "intermediate.dense.weight", PL_HF_COPY},
    {"mlp.linear_fc1.bias", "intermediate.dense.bias", PL_HF_COPY},
    {"mlp.linear_fc2.weight", "output.dense.weight", PL_HF_COPY},
    {"mlp.linear_fc2.bias", "output.dense.bias", PL_HF_COPY},
    {"post_mlp_layernorm.weight", "output.LayerNorm.weight", PL_HF_COPY},
    {"post_mlp_layernorm.bias", "output.LayerNorm.bias", PL_HF_COPY},
};

static const bert_row top_rows[] = {
    {"embedding.word_embeddings.weight", "bert.embeddings.word_embeddings.weight", PL_HF_COPY},
    {"embedding.position_embeddings.weight", "bert.embeddings.position_embeddings.weight",
     PL_HF_COPY},
    {"embedding.tokentype_embeddings.weight", "bert.embeddings.token_type_embeddings.weight",
     PL_HF_COPY},
    {"encoder.initial_layernorm.weight", "bert.embeddings.LayerNorm.weight", PL_HF_COPY},
    {"encoder.initial_layernorm.bias", "bert.embeddings.LayerNorm.bias", PL_HF_COPY},
    {"lm_head.dense.weight", "cls.predictions.transform.dense.weight", PL_HF_COPY},
    {"lm_head.dense.bias", "cls.predictions.transform.dense.bias", PL_HF_COPY},
    {"lm_head.layer_norm.weight", "cls.predictions.transform.LayerNorm.weight", PL_HF_COPY},
    {"lm_head.layer_norm.bias", "cls.predictions.transform.LayerNorm.bias", PL_HF_COPY},
    {"output_layer.bias", "cls.predictions.bias", PL_HF_COPY},
    {"pooler.dense.weight", "bert.pooler.dense.weight", PL_HF_COPY},
    {"pooler.dense.bias", "bert.pooler.dense.bias", PL_HF_COPY},
    {"binary_head.weight", "cls.seq_relationship.weight", PL_HF_COPY},
    {"binary_head.bias", "cls.seq_relationship.bias", PL_HF_COPY},
    {"classification_head.weight", "classifier.weight", PL_HF_COPY},
    {"classification_head.bias", "classifier.bias", PL_HF_COPY},
};

int pl_hf_bert_map(const pl_model_config *c, const pl_param *p,
                   pl_hf_tensor out[PL_HF_MAX_PER_PARAM])
{
    int layer = -1, used = 0;
    if (sscanf(p->name, "encoder.layers.%d.%n", &layer, &used) == 1 && used > 0) {
        const char *suffix = p->name + used;
        char name[PL_PARAM_NAME_MAX];
        for (size_t k = 0; k < sizeof layer_rows / sizeof *layer_rows; k++) {
            if (strcmp(layer_rows[k].plait, suffix) != 0)
                continue;
            if (layer_rows[k].tf != PL_HF_Q) {
                snprintf(name, sizeof name, "bert.encoder.layer.%d.%s", layer, layer_rows[k].hf);
                return pl_hf_put(c, p, &out[0], name, layer_rows[k].tf);
            }
            static const char *const qkv[] = {"query", "key", "value"};
            static const pl_hf_transform tfs[] = {PL_HF_Q, PL_HF_K, PL_HF_V};
            for (int j = 0; j < 3; j++) {
                snprintf(name, sizeof name, "bert.encoder.layer.%d.attention.self.%s.%s", layer,
                         qkv[j], p->ndim == 2 ? "weight" : "bias");
                pl_hf_put(c, p, &out[j], name, tfs[j]);
            }
            return 3;
        }
        return -1;
    }
    if (strcmp(p->name, "output_layer.weight") == 0) /* tied (config build refuses untied) */
        return p->tied_copy || !c->untie ? 0 : -1;
    if (strncmp(p->name, "classifier.mlp.layer0.", 22) == 0) { /* token or span head */
        char name[PL_PARAM_NAME_MAX];
        snprintf(name, sizeof name, "%s.%s", c->head.task == PL_TASK_SPAN ? "qa_outputs"
                                                                          : "classifier",
                 p->name + 22);
        return pl_hf_put(c, p, &out[0], name, PL_HF_COPY);
    }
    for (size_t k = 0; k < sizeof top_rows / sizeof *top_rows; k++) {
        if (strcmp(top_rows[k].plait, p->name) != 0)
            continue;
        int n = pl_hf_put(c, p, &out[0], top_rows[k].hf, top_rows[k].tf);
        if (k == 1 && c->head.tokentypes == 0) /* transformers' BERT always has token types */
            n += pl_hf_put(c, p, &out[1], "bert.embeddings.token_type_embeddings.weight",
                           PL_HF_TYPES0);
        return n;
    }
    return -1;
}

int pl_hf_bert_fold_types(const pl_model_config *c, int64_t i, float v, float *pos)
{
    const int64_t C = c->hidden, row = i / C, col = i % C;
    if (row != 0)
        return v != 0.0f;
    for (int64_t r = 0; r < c->max_positions; r++)
        pos[r * C + col] += v;
    return 0;
}
