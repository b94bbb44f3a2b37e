/* DeepSpeed's pipeline engine's layer files (Megatron-DeepSpeed's GPTModelPipe)
 * -> the global model (ckpt/megatron_internal.h).
 *
 * DeepSpeed's PipelineModule.save_state_dict (deepspeed/runtime/pipe/module.py)
 * writes torch.save(layer.state_dict()) of each entry of its layer list that has
 * a state_dict to ckpt_layer_path: global_stepN/layer_{idx:02d}-{rank_repr}-model_states.pt,
 * idx the layer's index in the whole list (any stage), rank_repr "model_TT" (the
 * topology's coordinates without the data and pipe axes; "" without a model axis).
 * GPTModelPipe's list (Megatron-DeepSpeed megatron/model/gpt_model.py):
 *   0        _to_float16, a function: no file
 *   1        EmbeddingPipe (TiedLayerSpec 'embed' unless untied): word_embeddings.weight
 *            (VocabParallelEmbedding, split by vocabulary), position_embeddings.weight
 *   2 .. L+1 ParallelTransformerLayerPipe: ParallelTransformerLayer's names
 *   L+2      LayerNorm (weight, bias) or RMSNorm (weight)
 *   L+3      LMHeadPipe (untied: lm_head.weight, ColumnParallelLinear) or the tied
 *            EmbeddingPipe with a forward_fn (a functools.partial, no state_dict: no file)
 * Each name is mapped onto Megatron's legacy name and taken as the other imports do. */
#include "ckpt/megatron_internal.h"

#include "base/fileio.h"
#include "base/status.h"

#include <stdio.h>
#include <string.h>

enum { PIPE_PATH = 4400 };

typedef enum { K_EMBED, K_LAYER, K_NORM, K_HEAD } pipe_kind;

/* Per kind: what the file is, the names it may hold (NULL-ended; a layer's
 * names take a weight or bias), the Megatron legacy prefix they map under. */
static const struct {
    const char *what;
    const char *names[8];
    const char *prefix;
} kinds[] = {
    [K_EMBED] = {"EmbeddingPipe", {"word_embeddings.weight", "position_embeddings.weight", NULL},
                 "language_model.embedding."},
    [K_LAYER] = {"ParallelTransformerLayerPipe",
                 {"input_layernorm.", "self_attention.query_key_value.", "self_attention.dense.",
                  "post_attention_layernorm.", "mlp.dense_h_to_4h.", "mlp.dense_4h_to_h.", NULL},
                 "language_model.encoder.layers.%d."},
    [K_NORM] = {"the final LayerNorm / RMSNorm", {"weight", "bias", NULL},
                "language_model.encoder.final_layernorm."},
    [K_HEAD] = {"LMHeadPipe", {"lm_head.weight", NULL}, "language_model.output_layer."},
};

static int known(pipe_kind k, const char *key)
{
    for (int i = 0; kinds[k].names[i]; i++) {
        const char *n = kinds[k].names[i];
        const size_t len = strlen(n);
        if (k == K_LAYER ? !strncmp(key, n, len) && (!strcmp(key + len, "weight") ||
                                                     !strcmp(key + len, "bias"))
                         : !strcmp(key, n))
            return 1;
    }
    return 0;
}

static pl_status expected_names(pipe_kind k, const char *file, const char *key)
{
    char list[400] = "";
    size_t len = 0;
    for (int i = 0; kinds[k].names[i] && len < sizeof list - 80; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s%s", i ? ", " : "",
                                kinds[k].names[i], k == K_LAYER ? "weight|bias" : "");
    return pl_errorf(PL_ERR_FORMAT, "%s: unexpected key %s: %s's file holds %s", file, key,
                     kinds[k].what, list);
}

static void layer_path(const char *idir, int idx, int t, int with_rank, char *out, size_t n)
{
    if (with_rank)
        snprintf(out, n, "%.4000s/layer_%02d-model_%02d-model_states.pt", idir, idx, t);
    else
        snprintf(out, n, "%.4000s/layer_%02d-model_states.pt", idir, idx);
}

int pl_mg_pipe_legacy_name(const char *param, const pl_model_config *cfg, char *out, size_t n)
{
    const int L = (int)cfg->num_layers;
    int idx = 0, used = 0;
    pipe_kind k;
    const char *rest;
    if (!strncmp(param, "tied_modules.", 13) && (rest = strchr(param + 13, '.'))) {
        k = K_EMBED; /* TiedLayerSpec('embed', EmbeddingPipe) */
        rest++;
    } else if (sscanf(param, "%d.%n", &idx, &used) == 1 && used > 0 && idx >= 1 &&
               idx <= L + 2 + (cfg->untie ? 1 : 0)) {
        k = idx == 1 ? K_EMBED : idx <= L + 1 ? K_LAYER : idx == L + 2 ? K_NORM : K_HEAD;
        rest = param + used;
    } else {
        return 0;
    }
    if (!known(k, rest))
        return 0;
    char prefix[96];
    snprintf(prefix, sizeof prefix, kinds[k].prefix, idx - 2);
    const int w = snprintf(out, n, "%s%s", prefix, k == K_HEAD ? "weight" : rest);
    return w > 0 && (size_t)w < n;
}

/* One layer file's state dict into r. */
static pl_status take_file(pl_mg_rank *r, const char *path, pipe_kind k, int layer)
{
    pl_pt f;
    pl_status st = pl_pt_open(&f, path);
    const pl_pk *d = st ? NULL : pl_pt_root(&f);
    if (!st && d->kind != PL_PK_DICT)
        st = pl_errorf(PL_ERR_FORMAT, "%s: expected a state dict (%s's)", path, kinds[k].what);
    char prefix[96], name[600];
    snprintf(prefix, sizeof prefix, kinds[k].prefix, layer);
    r->hide = strlen(prefix);
    r->label = k == K_HEAD ? "lm_head." : "";
    for (int64_t i = 0; !st && i + 1 < d->n; i += 2) {
        const pl_pk *key = d->v[i], *val = d->v[i + 1];
        if (key->kind != PL_PK_STR) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: a state dict key that is not a string", path);
            break;
        }
        const size_t kl = strlen(key->s);
        if (val->kind == PL_PK_NONE || (kl >= 12 && !strcmp(key->s + kl - 12, "_extra_state")))
            continue;
        if (!known(k, key->s))
            st = expected_names(k, path, key->s);
        else if (val->kind != PL_PK_TENSOR)
            st = pl_errorf(PL_ERR_FORMAT, "%s: %s is not a tensor", path, key->s);
        else {
            snprintf(name, sizeof name, "%s%s", prefix, k == K_HEAD ? "weight" : key->s);
            st = pl_mg_rank_tensor(r, &f, name, val);
        }
    }
    pl_pt_close(&f);
    return st;
}

pl_status pl_mg_pipe_read(const char *idir, const pl_model_config *cfg, int tp,
                          const pl_registry *g, float *global, int qkv_blocks)
{
    const int L = (int)cfg->num_layers, last = L + 2 + (cfg->untie ? 1 : 0);
    char path[PIPE_PATH], what[PIPE_PATH];
    pl_status st = PL_OK;
    for (int t = 0; t < tp && !st; t++) {
        pl_mg_rank r;
        if ((st = pl_mg_rank_begin(&r, cfg, tp, 1, t, 0, g, global)))
            break;
        r.qkv_blocks = qkv_blocks;
        /* a topology without a model axis names no rank (one TP rank only) */
        int with_rank = 1;
        layer_path(idir, 1, t, 1, path, sizeof path);
        if (tp == 1 && !pl_file_exists(path)) {
            layer_path(idir, 1, t, 0, path, sizeof path);
            with_rank = !pl_file_exists(path);
        }
        for (int idx = 1; idx <= last && !st; idx++) {
            const pipe_kind k = idx == 1 ? K_EMBED : idx <= L + 1 ? K_LAYER
                              : idx == L + 2 ? K_NORM : K_HEAD;
            layer_path(idir, idx, t, with_rank, path, sizeof path);
            if (!pl_file_exists(path))
                st = pl_errorf(PL_ERR_FORMAT, "%s: missing: DeepSpeed's pipeline engine saves "
                               "GPTModelPipe's layer %d (%s%s) of TP rank %d there (args: "
                               "num_layers %d, %s embeddings)", path, idx, kinds[k].what,
                               k == K_LAYER ? " of a transformer layer" : "", t, L,
                               cfg->untie ? "untied" : "tied");
            else
                st = take_file(&r, path, k, idx - 2);
        }
        layer_path(idir, last + 1, t, with_rank, path, sizeof path);
        if (!st && pl_file_exists(path))
            st = pl_errorf(PL_ERR_FORMAT, "%s: a layer file after GPTModelPipe's last (%d: args "
                           "num_layers %d with %s embeddings)", path, last, L,
                           cfg->untie ? "untied" : "tied");
        snprintf(what, sizeof what, "%.4000s/layer_*-model_%02d-model_states.pt", idir, t);
        st = pl_mg_rank_end(&r, what, st);
    }
    return st;
}
