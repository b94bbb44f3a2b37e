/* Megatron-LM torch-format checkpoints -> plait release checkpoints
 * (ckpt/megatron.h). */
#include "ckpt/megatron.h"

#include "ckpt/megatron_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "ckpt/files.h"
#include "ckpt/import.h"
#include "ckpt/tools.h"
#include "ckpt/torch_file.h"
#include "model/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MG_PATH = 4096, MG_FILE = MG_PATH + 128 };

/* One rank file: its "model" (Megatron) or "module" (DeepSpeed's engine) dict, unless z3
 * (ZeRO 3's placeholders); then, unless zero is NULL, the fp32 weights of DeepSpeed's ZeRO
 * shards in that directory when present (*used), which z3 requires. */
static pl_status read_rank(const char *file, const pl_model_config *cfg, int tp, int pp, int t,
                           int p, const pl_registry *g, float *global, int qkv_blocks,
                           const char *zero, int z3, int *used)
{
    pl_pt f;
    pl_status st = pl_pt_open(&f, file);
    const pl_pk *root = st ? NULL : pl_pt_root(&f);
    const pl_pk *model = root ? pl_pk_get(root, "model") : NULL;
    if (root && !model)
        model = pl_pk_get(root, "module");
    if (!st && (!model || model->kind != PL_PK_DICT))
        st = pl_errorf(PL_ERR_FORMAT, "%s: no \"model\" dict (%s)", file,
                       pl_pk_get(root, "model0") ? "model0, model1, ...: virtual pipeline chunks, "
                       "which the import does not read" : "not a Megatron checkpoint?");
    if (!st && !z3)
        st = pl_mg_take_rank(&f, model, cfg, tp, pp, t, p, g, global, qkv_blocks);
    *used = 0;
    if (!st && zero)
        st = pl_mg_zero_read(zero, &f, cfg, tp, t, g, global, qkv_blocks, used);
    if (!st && z3 && !*used)
        st = pl_errorf(PL_ERR_FORMAT, "%s: ZeRO 3's model states hold no weights%s", file,
                       zero ? ", and its zero_pp_rank_0_mp_rank_TT_optim_states.pt is missing"
                            : ": --no-zero-fp32 cannot be followed");
    pl_pt_close(&f);
    return st;
}

static void rank_file(const char *idir, int ds, int t, int p, int pp, char *out, size_t n)
{
    if (strlen(idir) + 48 > n)
        snprintf(out, n, "(path too long)");
    else if (ds == 3) /* ZeRO 3: one per DP rank too (its placeholders), rank 0's read */
        snprintf(out, n, "%.4000s/zero_pp_rank_0_mp_rank_%02d_model_states.pt", idir, t);
    else if (ds) /* DeepSpeed's engine: one file per model-parallel rank */
        snprintf(out, n, "%.4000s/mp_rank_%02d_model_states.pt", idir, t);
    else if (pp > 1)
        snprintf(out, n, "%.4000s/mp_rank_%02d_%03d/model_optim_rng.pt", idir, t, p);
    else
        snprintf(out, n, "%.4000s/mp_rank_%02d/model_optim_rng.pt", idir, t);
}

/* The directory of the rank files: DeepSpeed's tag directory (path is one,
 * global_stepN, or path/latest names it: Megatron-DeepSpeed writes both
 * files) or Megatron's iteration directory. */
static pl_status locate(const char *path, char *idir, size_t n, int *ds)
{
    char latest[MG_FILE], dir[MG_PATH], name[32];
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    const char *base = path + len;
    while (base > path && base[-1] != '/')
        base--;
    *ds = strncmp(base, "global_step", 11) == 0;
    if (*ds) {
        snprintf(idir, n, "%.*s", (int)len, path);
        return PL_OK;
    }
    snprintf(latest, sizeof latest, "%.*s/latest", (int)len, path);
    if (pl_file_exists(latest)) {
        char *text = NULL;
        size_t size;
        pl_status st = pl_file_read_all(latest, &text, &size);
        if (st)
            return st;
        size_t k = 0;
        while (k < size && text[k] != '\n' && text[k] != '\r' && text[k] != ' ')
            k++;
        text[k] = 0;
        const int ok = k > 0 && k < 200 && !strchr(text, '/') && strcmp(text, ".") && strcmp(text, "..");
        if (ok)
            snprintf(idir, n, "%.*s/%s", (int)len, path, text);
        pl_free(text);
        if (!ok)
            return pl_errorf(PL_ERR_FORMAT, "%s: expected the name of a checkpoint directory (a "
                             "DeepSpeed tag such as global_step100)", latest);
        *ds = 1;
        return PL_OK;
    }
    int64_t it;
    pl_status st = pl_ckpt_resolve(path, -1, dir, sizeof dir, &it);
    if (st)
        return st;
    if (it == -1)
        return pl_errorf(PL_ERR_ARG, "%s: neither Megatron's latest_checkpointed_iteration.txt nor "
                         "DeepSpeed's latest (name an iter_NNNNNNN, release or global_stepN "
                         "directory)", path);
    pl_ckpt_iter_name(it, name, sizeof name);
    snprintf(idir, n, "%s/%s", dir, name);
    return PL_OK;
}

/* The run's tokenizer, when args names one whose files are here. */
static void tokenizer(const pl_mg_args *a, pl_ckpt_meta *m)
{
    const char *type = pl_mg_arg_str(a, "tokenizer_type");
    const char *files[3] = {pl_mg_arg_str(a, "vocab_file"), pl_mg_arg_str(a, "merge_file"),
                            pl_mg_arg_str(a, "tokenizer_model")};
    if (!type)
        return;
    for (int k = 0; k < 3; k++)
        if (files[k] && !pl_file_exists(files[k])) {
            pl_log_warn("%s: args names tokenizer %s with %s, which is not here: the checkpoint "
                        "names no tokenizer (give --tokenizer-type and its files to plait train)",
                        a->file, type, files[k]);
            return;
        }
    m->tokenizer_type = type;
    m->vocab_file = files[0];
    m->merge_file = files[1];
    m->tokenizer_model = files[2];
}

pl_status pl_mg_import_finish(const char *out, const pl_mg_args *a, const pl_model_config *cfg,
                              int tp, int pp, const pl_registry *g, float *global,
                              const pl_megatron_import_opts *o, const char *what)
{
    pl_ckpt_meta meta = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .seed = 1234, .dp = 1};
    pl_model_config target = *cfg;
    const int out_tp = o->tp > 0 ? o->tp : tp, out_pp = o->pp > 0 ? o->pp : pp;
    tokenizer(a, &meta);
    if (o->vocab_size > 0) {
        if (o->vocab_size > cfg->padded_vocab)
            return pl_errorf(PL_ERR_ARG, "--vocab-size %lld exceeds the checkpoint's padded "
                             "vocabulary %lld", (long long)o->vocab_size, (long long)cfg->padded_vocab);
        target.vocab_size = o->vocab_size;
    }
    target.padded_vocab = pl_model_padded_vocab(target.vocab_size, target.divisible_by, out_tp);
    meta.tp = out_tp;
    meta.pp = out_pp;
    pl_status st = pl_ckpt_import_write(out, &target, &meta, g, global, out_tp, out_pp);
    if (!st)
        pl_ckpt_import_log(out, what, cfg, tp, pp, &target, out_tp, out_pp);
    return st;
}

pl_status pl_megatron_import(const char *path, const char *out, const pl_megatron_import_opts *o)
{
    char idir[MG_PATH + 32], file[MG_FILE];
    int ds = 0;
    pl_status st = locate(path, idir, sizeof idir, &ds);
    if (st)
        return st;
    if (!ds && pl_mg_dist_is(idir)) /* --ckpt-format torch_dist (megatron_dist.c) */
        return pl_mg_dist_import(idir, out, o);
    rank_file(idir, ds, 0, 0, 1, file, sizeof file);
    if (!ds && !pl_file_exists(file))
        rank_file(idir, ds, 0, 0, 2, file, sizeof file);
    int z3 = 0; /* ZeRO 3: zero_pp_rank_D_mp_rank_TT_model_states.pt instead */
    if (ds && !pl_file_exists(file)) {
        char alt[MG_FILE];
        rank_file(idir, 3, 0, 0, 1, alt, sizeof alt);
        if ((z3 = pl_file_exists(alt)))
            snprintf(file, sizeof file, "%s", alt);
    }
    pl_pt first;
    pl_registry g;
    pl_registry_init(&g, 1, 0, 0);
    float *global = NULL;
    pl_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int tp = 1, pp = 1;
    if ((st = pl_pt_open(&first, file))) {
        pl_pt_close(&first);
        return st;
    }
    pl_mg_args a = {pl_pk_get(pl_pt_root(&first), "args"), NULL, 0, file, 0};
    if (!a.ns || a.ns->kind != PL_PK_OBJECT)
        st = pl_errorf(PL_ERR_FORMAT, "%s: no \"args\" (argparse.Namespace): the model's sizes are "
                       "unknown", file);
    if (!st)
        st = pl_mg_config(&a, pl_pt_root(&first), &cfg, &tp, &pp);
    /* DeepSpeed's pipeline engine (GPTModelPipe, at any PP size): "module" None beside
     * layer_NN-model_TT-model_states.pt files */
    const pl_pk *module = ds ? pl_pk_get(pl_pt_root(&first), "module") : NULL;
    const int pipe = ds && (!module || module->kind == PL_PK_NONE);
    if (!st && ds && !pipe && pp > 1)
        st = pl_errorf(PL_ERR_ARG, "%s: args.pipeline_model_parallel_size %d with a \"module\" "
                       "state dict: expected DeepSpeed's pipeline engine's layer files "
                       "(\"module\" None) at PP > 1", file, pp);
    int blocks = 0;
    if (!st)
        st = pl_mg_qkv_blocks(&a, &cfg, &blocks);
    if (!st)
        st = pl_model_register(&g, &cfg, 1);
    if (!st && !(global = pl_calloc((size_t)(g.numel > 0 ? g.numel : 1), sizeof(float))))
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the model's %lld parameters",
                       (long long)g.numel);
    int zero = 0;
    if (!st && pipe) {
        st = pl_mg_pipe_read(idir, &cfg, tp, &g, global, blocks);
        if (!st && !o->no_zero_fp32) /* BF16_Optimizer's fp32 weights (megatron_bf16.c) */
            st = pl_mg_bf16_pipe_read(idir, &cfg, tp, pp, &g, global, blocks, &zero);
        char zfile[MG_FILE];
        snprintf(zfile, sizeof zfile, "%.4000s/zero_pp_rank_0_mp_rank_00_optim_states.pt", idir);
        if (!pl_file_exists(zfile)) /* DeepSpeed's name under bf16 */
            snprintf(zfile, sizeof zfile, "%.4000s/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
                     idir);
        if (!st && !zero && pl_file_exists(zfile))
            pl_log_warn("%s: %s beside the pipeline engine's layer files, whose fp32 weights the "
                        "import does not read: the layer files' weights are taken", zfile,
                        o->no_zero_fp32 ? "optimizer shards (--no-zero-fp32)" : "ZeRO shards");
    }
    for (int t = 0; t < tp && !st && !pipe; t++)
        for (int p = 0; p < pp && !st; p++) {
            int used = 0;
            rank_file(idir, z3 ? 3 : ds, t, p, pp, file, sizeof file);
            st = read_rank(file, &cfg, tp, pp, t, p, &g, global, blocks,
                           ds && !o->no_zero_fp32 ? idir : NULL, z3, &used);
            if (!st && t > 0 && used != zero)
                st = pl_errorf(PL_ERR_FORMAT, "%s/zero_pp_rank_0_mp_rank_%02d_optim_states.pt: "
                               "%s, but TP rank 0's ZeRO shards %s (give --no-zero-fp32 to read "
                               "the model_states' weights)", idir, t, used ? "present" : "missing",
                               zero ? "are there" : "are not");
            if (t == 0)
                zero = used;
        }
    if (!st)
        st = pl_mg_import_finish(out, &a, &cfg, tp, pp, &g, global, o,
                                 pipe && zero ? "Megatron-DeepSpeed pipeline, BF16_Optimizer fp32"
                                 : pipe       ? "Megatron-DeepSpeed pipeline"
                                 : zero       ? "Megatron-DeepSpeed ZeRO fp32"
                                              : "Megatron");
    pl_free(global);
    pl_registry_free(&g);
    pl_pt_close(&first);
    return st;
}
