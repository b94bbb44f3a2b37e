/* Writing a model assembled in one process as a plait release checkpoint in
 * any TP x PP layout: what the Hugging Face and Megatron imports share
 * (ckpt/hf.h, ckpt/megatron.h). */
#ifndef PL_CKPT_IMPORT_H
#define PL_CKPT_IMPORT_H

#include "ckpt/checkpoint.h"

/* g: a TP 1 registry of the model (its own vocabulary padding), global its
 * values. Writes out/release (weights only) at TP tp x PP pp for cfg, whose
 * padded vocabulary may differ from g's: rows only cfg has are zero, rows
 * only g has are dropped. A tied output layer's last-stage copy is the word
 * embeddings. meta's tokenizer files are copied as a save copies them. */
pl_status pl_ckpt_import_write(const char *out, const pl_model_config *cfg, const pl_ckpt_meta *meta,
                               const pl_registry *g, const float *global, int tp, int pp);

/* The log line of an import from a model-parallel source (the Megatron and NeMo imports):
 * what was read (source's name, family, layout src_tp x src_pp, layers) and how out/release
 * was written (target's vocabulary and padding, layout tp x pp). */
void pl_ckpt_import_log(const char *out, const char *source, const pl_model_config *src,
                        int src_tp, int src_pp, const pl_model_config *target, int tp, int pp);

#endif
