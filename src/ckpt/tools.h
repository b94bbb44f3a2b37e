/* plait ckpt's library (tools/cmd_ckpt.c): describe, reshard and convert a
 * checkpoint in one process, without MPI.
 *
 * Reshard writes the checkpoint in another TP x PP layout, the parameters and
 * (unless weights only) the Adam moments, out of any saved layout and ZeRO
 * stage, through the same global-slice reads as --load (ckpt/source.h) and the
 * same atomic publication as a save (ckpt/publish.h). The vocabulary is padded
 * as Megatron pads for the new TP size (make_vocab_size_divisible_by x TP):
 * padding rows are zero-filled or dropped as ckpt/source.h says. The moments
 * are written in the model files (stage 0's format), which load under any
 * ZeRO stage and DP size.
 *
 * Convert writes Megatron's `release` checkpoint (DIR/release/, "release" in
 * latest_checkpointed_iteration.txt): the weights only, as F32 or BF16, in the
 * saved layout; plait train loads it as --finetune does (iteration 0). */
#ifndef PL_CKPT_TOOLS_H
#define PL_CKPT_TOOLS_H

#include "ckpt/checkpoint.h"

#include <cjson/cJSON.h>

/* Which checkpoint path names: a save directory (its latest iteration, or
 * iteration step when step >= 0) or an iter_NNNNNNN / release directory
 * itself (then step, if >= 0, must be its iteration). dir receives the save
 * directory, *it the iteration (PL_CKPT_RELEASE for release; -1 when a save
 * directory has no latest_checkpointed_iteration.txt). */
pl_status pl_ckpt_resolve(const char *path, int64_t step, char *dir, size_t n, int64_t *it);

/* The checkpoint described as JSON (*out, cJSON_Delete): its directory and
 * iteration, layout (TP, PP, DP, ZeRO stage), model config, training state,
 * every tensor (global shape, dtype, split, stage, elements) and every file
 * (bytes, recorded xxh64, verified against it when verify). */
pl_status pl_ckpt_describe(const char *dir, int64_t it, int verify, cJSON **out);

typedef struct pl_ckpt_rewrite {
    int tp, pp;       /* the layout to write (0: the saved one) */
    int weights_only; /* no Adam moments */
    int bf16;         /* the parameters as BF16 (weights only) */
    int release;      /* write out/release (Megatron's name), else out/iter_N */
    int pp_split;     /* t5, bart at pp > 1: the decoder's first stage (0: the saved one,
                       * when pp is the saved PP size) */
} pl_ckpt_rewrite;

/* Writes iteration it of dir into the save directory out as w says. */
pl_status pl_ckpt_rewrite_to(const char *dir, int64_t it, const char *out,
                             const pl_ckpt_rewrite *w);

#endif
