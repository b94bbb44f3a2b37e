/* What the Megatron, DeepSpeed and NeMo imports share (ckpt/megatron_model.c). */
#ifndef PL_CKPT_MEGATRON_INTERNAL_H
#define PL_CKPT_MEGATRON_INTERNAL_H

#include "ckpt/megatron.h"
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
    int global_keys;  /* the tensors are named globally (torch_dist): virtual pipeline chunks,
                       * which only change which rank saved a layer, are read */
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
                          int pp, int t, int p, const pl_registry *g, float *global, int qkv_blocks);

/* Whether query_key_value's rows are [Q; K; V] blocks per TP rank (Megatron-DeepSpeed since
 * December 2024: args.ds_sequence_parallel_fpdt present), not Megatron's per-head [q; k; v];
 * refused with key/value groups. */
pl_status pl_mg_qkv_blocks(const pl_mg_args *a, const pl_model_config *c, int *blocks);

/* A rank's tensors taken one by one (the pipeline engine's layer files):
 * pl_mg_rank_begin, pl_mg_rank_tensor for each, pl_mg_rank_end. */
typedef struct pl_mg_rank {
    const pl_pt *f;      /* the file of the tensor being taken */
    const pl_model_config *cfg;
    pl_registry reg;     /* TP rank t, stage p's layout */
    const pl_registry *g;
    float *global, *tmp;
    int64_t l0, nl;      /* the stage's layers */
    unsigned char *seen; /* per reg entry */
    const char *label;   /* shown before a key in messages ("model.") */
    size_t hide;         /* leading characters of a key not shown in messages */
    int t, p;
    int qkv_blocks;      /* query_key_value in [Q; K; V] blocks (pl_mg_qkv_blocks) */
} pl_mg_rank;

pl_status pl_mg_rank_begin(pl_mg_rank *r, const pl_model_config *cfg, int tp, int pp, int t,
                           int p, const pl_registry *g, float *global);
/* Tensor t of file f under Megatron's name key (legacy or core) into the global model:
 * its place, shape and TP slice checked. */
pl_status pl_mg_rank_tensor(pl_mg_rank *r, const pl_pt *f, const char *key, const pl_pk *t);
/* Unless st: every tensor of the rank placed, else an error naming what (the files).
 * Releases r; returns st or that error. */
pl_status pl_mg_rank_end(pl_mg_rank *r, const char *what, pl_status st);

/* DeepSpeed's pipeline engine's files in idir (global_stepN/layer_NN-model_TT-model_states.pt,
 * megatron_pipe.c says which) into the global model: every file, key and shape checked. */
pl_status pl_mg_pipe_read(const char *idir, const pl_model_config *cfg, int tp,
                          const pl_registry *g, float *global, int qkv_blocks);

/* Megatron's legacy name of PipelineModule's parameter param (GPTModelPipe's: "N.<name>" of
 * layer list entry N, or "tied_modules.embed.<name>"), as megatron_pipe.c maps its layer
 * files' keys; 0 when param is none of them. */
int pl_mg_pipe_legacy_name(const char *param, const pl_model_config *cfg, char *out, size_t n);

/* BF16_Optimizer's shards beside DeepSpeed's pipeline engine's layer files (megatron_bf16.c):
 * per stage p and TP rank t, bf16_zero_pp_rank_D_mp_rank_{p x tp + t}_optim_states.pt, whose
 * fp32 weights replace the layer files' bf16 ones in the global model (*used 1; 0 and nothing
 * read when bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt is absent or ZeRO's). */
pl_status pl_mg_bf16_pipe_read(const char *idir, const pl_model_config *cfg, int tp, int pp,
                               const pl_registry *g, float *global, int qkv_blocks, int *used);

/* DeepSpeed ZeRO stage 1-3 shards of TP rank t in idir (megatron_zero.c says which), when
 * zero_pp_rank_0_mp_rank_TT_optim_states.pt is there (*used 1, else 0 and nothing read): the
 * fp32 weights into the global model over the rank's, by states' (the rank's model states)
 * param_shapes; every shard, group, size and tensor checked. */
pl_status pl_mg_zero_read(const char *idir, const pl_pt *states, const pl_model_config *cfg,
                          int tp, int t, const pl_registry *g, float *global, int qkv_blocks,
                          int *used);

/* DeepSpeed's BF16_Optimizer shards of TP rank t in idir (megatron_bf16.c says which; the caller
 * found bf16_zero_pp_rank_0_mp_rank_TT_optim_states.pt without zero_stage): the fp32 weights
 * into the global model over the rank's, named by their param_slice_mappings, shaped as states'
 * (the rank's model states) module tensors; every shard, group, fragment and size checked. */
pl_status pl_mg_bf16_read(const char *idir, const pl_pt *states, const pl_model_config *cfg,
                          int tp, int t, const pl_registry *g, float *global, int qkv_blocks);

/* torch.Size((d0, d1, ...)) -> its dims (each in [0, 2^40], at most PL_PK_MAX_DIMS);
 * 0 when s is something else. */
int pl_mg_size_dims(const pl_pk *s, int64_t *dims, int *nd);

/* plait's global name of Megatron's state dict key in (legacy or core, TE's fused norms,
 * NeMo's "model." prefixes) whose layer N is local to a stage of layers [l0, l0 + nl);
 * 0 when the layer is outside. */
int pl_mg_plait_name(const char *in, int64_t l0, int64_t nl, char *out, size_t n);

/* The end of every Megatron import: the global model g / global (in cfg's layout, saved at
 * tp x pp) written to out as a plait release checkpoint in o's layout, with the tokenizer
 * args name when its files are here; what names the source in the log. */
pl_status pl_mg_import_finish(const char *out, const pl_mg_args *a, const pl_model_config *cfg,
                              int tp, int pp, const pl_registry *g, float *global,
                              const pl_megatron_import_opts *o, const char *what);

/* Megatron-LM's --ckpt-format torch_dist iteration directories (megatron_dist.c): whether
 * idir holds one (its metadata.json), and its import. */
int pl_mg_dist_is(const char *idir);
pl_status pl_mg_dist_import(const char *idir, const char *out, const pl_megatron_import_opts *o);
/* The .metadata pickle data[0..size) parsed and its entries checked as the import does, no
 * file opened (the fuzzing target's entry). */
pl_status pl_mg_dist_metadata_check(const uint8_t *data, size_t size, const char *what);

#endif
