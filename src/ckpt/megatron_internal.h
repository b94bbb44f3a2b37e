/* What the Megatron, DeepSpeed and NeMo imports share (ckpt/megatron_model.c). */
#ifndef PL_CKPT_MEGATRON_INTERNAL_H
#define PL_CKPT_MEGATRON_INTERNAL_H

#include "ckpt/torch_file.h"
#include "model/config.h"

/* A config value by Megatron's arg name (NeMo's YAML keys translated). */
typedef struct pl_mg_kv {
    char key[64];
    char val[256];
} pl_mg_kv;

/* Megatron's args: the pickled argparse.Namespace ns, or (ns NULL) a table. */
typedef struct pl_mg_args {
    const pl_pk *ns;
    const pl_mg_kv *kv;
    int nkv;
    const char *file; /* named in errors */
} pl_mg_args;

const char *pl_mg_arg_str(const pl_mg_args *a, const char *key);

/* The plait model of args (checkpoint_version from root, NULL: 3), and the saved layout.
 * Unsupported settings are refused naming the arg. */
pl_status pl_mg_config(const pl_mg_args *a, const pl_pk *root, pl_model_config *c, int *tp,
                       int *pp);

/* TP rank t, stage p's tensors (the state dict model of file f, nested or flat,
 * Megatron's legacy or core names, NeMo's "model." prefixes, TE's fused norms)
 * into the global model (g's layout): every tensor placed, none missing. */
pl_status pl_mg_take_rank(const pl_pt *f, const pl_pk *model, const pl_model_config *cfg, int tp,
                          int pp, int t, int p, const pl_registry *g, float *global);

#endif
