/* A checkpoint's manifest (iter_N/manifest.json): written by the save, and on
 * load verified and validated before anything is sized from it.
 *
 * Version 2 (this one) records the manifest's own xxh64 in
 * iter_N/manifest.json.xxh64 ("<16 hex digits>  manifest.json\n", the format of
 * `xxhsum -H64`), kept out of latest_checkpointed_iteration.txt, which holds
 * only the iteration number as Megatron's tools expect. Loading a version 2
 * manifest requires that file and the hash to match; version 1 manifests
 * (older plait) have none, and a warning says they are unverified.
 *
 * Validation, field by field, before the caller allocates anything: every
 * number is present, finite and within a range (sizes positive and bounded,
 * num_layers <= 10000, counts and steps >= 0, probabilities in [0, 1)); the
 * model's sizes are consistent (heads divide hidden, query groups divide
 * heads, the padded vocabulary is Megatron's padding of vocab_size); the
 * iteration is the directory's; and the "tensors" table agrees: every layer
 * 0..num_layers-1 present and no other, the embedding, attention and MLP
 * shapes those of the sizes. Errors name the manifest, the field, its value
 * and what was expected.
 *
 * Tokenizer paths are written relative to the iteration directory (the save
 * copies the files into iter_N/tokenizer/) and read back confined to it
 * (ckpt/files.h); a version 1 manifest's paths (the user's own, anywhere) are
 * not used, with a warning. */
#ifndef PL_CKPT_MANIFEST_H
#define PL_CKPT_MANIFEST_H

#include "ckpt/checkpoint.h"

#include <cjson/cJSON.h>

/* cJSON insertions that remember whether any failed (memory), so a manifest
 * is either complete or not written at all. */
typedef struct pl_ckpt_jbuild {
    int ok;
} pl_ckpt_jbuild;
cJSON *pl_ckpt_jobj(cJSON *parent, const char *key, pl_ckpt_jbuild *b);
void pl_ckpt_jnum(cJSON *o, const char *key, double v, pl_ckpt_jbuild *b);
void pl_ckpt_jstr(cJSON *o, const char *key, const char *v, pl_ckpt_jbuild *b);

/* The manifest of a save (without "files" and "zero", which the caller adds);
 * NULL when out of memory. */
cJSON *pl_ckpt_manifest_build(const pl_model_config *cfg, const pl_ckpt_meta *m,
                              const pl_registry *reg);

/* Writes text as idir/manifest.json and its checksum file (both fsynced). */
pl_status pl_ckpt_manifest_write(const char *idir, const char *text);

/* Reads, verifies and validates the manifest of the iteration directory idfd
 * (named idir) of iteration it. On success *root is the parsed tree (the
 * caller deletes it), cfg (if not NULL) the saved model config, meta the saved
 * state with its strings in *strings (pl_free). */
pl_status pl_ckpt_manifest_read(int idfd, const char *idir, int64_t it, cJSON **root,
                                pl_model_config *cfg, pl_ckpt_meta *meta, char **strings);

/* An error naming the first model-config field in which saved differs from
 * run (the sequence length may differ), or PL_OK. */
pl_status pl_ckpt_config_match(const pl_model_config *saved, const pl_model_config *run,
                               const char *mpath);

/* transformers' T5 layer's keys (ckpt/manifest_t5.c): written when the model
 * has them, read with their defaults when absent; the flag of the first
 * difference between two configs, or NULL. */
void pl_ckpt_t5_arch_write(cJSON *model, const pl_model_config *c, pl_ckpt_jbuild *b);
pl_status pl_ckpt_t5_arch_read(const cJSON *model, pl_model_config *c, const char *mpath);
const char *pl_ckpt_t5_arch_differs(const pl_model_config *saved, const pl_model_config *run);

/* MegaMolBART's data switches (ckpt/manifest_mmb.c): "data.megamolbart",
 * written when meta->mmb; read into meta (mmb 0 when absent). */
void pl_ckpt_mmb_write(cJSON *root, const pl_ckpt_meta *m, pl_ckpt_jbuild *b);
pl_status pl_ckpt_mmb_read(const cJSON *root, const char *mpath, pl_ckpt_meta *m);

/* A required number field of o (named obj in messages) in [lo, hi], and an
 * integer when integral; mpath names the manifest. */
pl_status pl_ckpt_jfield(const cJSON *o, const char *obj, const char *key, double lo, double hi,
                         int integral, const char *mpath, double *out);

#endif
