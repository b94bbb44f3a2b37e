/* A saved checkpoint read by global slices: what lets a checkpoint load into
 * any TP x PP x DP x ZeRO layout, whatever layout saved it.
 *
 * Opening reads and validates the manifest (ckpt/manifest.h) and rebuilds, for
 * each saved TP rank, the saved registry: the model registered at the saved TP
 * size (model/config.h), its tensors in the manifest's order, each at the
 * pipeline stage the manifest records and at its offset in that stage's flat
 * buffer (the save's arithmetic, so ZeRO shards' flat ranges resolve to
 * tensors). Nothing else is read until asked.
 *
 * Filling a run's buffer asks, for every local row of every tensor the run's
 * registry holds, which saved TP rank(s) hold that global row and columns
 * (pl_tp_split: rows, columns, vocabulary rows, SwiGLU halves, grouped QKV with
 * shared k/v) and copies just those elements out of the mapped shard files:
 * the parameters from mp_rank_XX[_YYY]/model_optim.safetensors, the Adam
 * moments from the same file (stage 0) or from the flat ranges of the ZeRO
 * shards optim_dp_NNN.safetensors (ZeRO 1-3). Files are opened (mapped, their
 * xxh64 checked against the manifest) only when a slice of theirs is needed.
 * The same layout copies the same floats: a resume is bit-identical.
 *
 * The vocabulary: Megatron pads it to a multiple of divisible_by x TP, so the
 * embedding and output layer may have another row count than the run's. Rows
 * below both paddings are copied (the tokenizer's rows and the shared padding
 * rows); rows only the run has are zero-filled (weights and moments); rows
 * only the checkpoint has are dropped. The padding rows enter the softmax, so
 * such a resume is not the uninterrupted run's (the caller says so).
 *
 * A tied output layer (GPT, BERT) saved at PP 1 has no output_layer.weight:
 * the run's last-stage copy (PP > 1) is filled from the word embeddings, which
 * it equals, moments included. */
#ifndef PL_CKPT_SOURCE_H
#define PL_CKPT_SOURCE_H

#include "ckpt/checkpoint.h"

typedef struct pl_ckpt_source pl_ckpt_source;

/* Opens iteration it of dir (*out, closed with pl_ckpt_source_close). */
pl_status pl_ckpt_source_open(const char *dir, int64_t it, pl_ckpt_source **out);
void pl_ckpt_source_close(pl_ckpt_source *s);

/* The saved model config and state; strings stay owned by s unless taken
 * (pl_ckpt_source_take_strings hands the storage to the caller, pl_free). */
const pl_model_config *pl_ckpt_source_config(const pl_ckpt_source *s);
const pl_ckpt_meta *pl_ckpt_source_meta(const pl_ckpt_source *s);
char *pl_ckpt_source_take_strings(pl_ckpt_source *s);
const char *pl_ckpt_source_manifest_path(const pl_ckpt_source *s);
/* The saved ZeRO stage (0: moments in the model files). */
int pl_ckpt_source_zero_stage(const pl_ckpt_source *s);

/* For plait ckpt inspect: the manifest (owned by s); the dtype of tensor name
 * in the first file that holds it ("F32", "BF16"); whether Adam's moments
 * were saved; a file of the manifest's "files", mapped and checked against its
 * recorded xxh64 (an error says which), with its size in *bytes. */
const struct cJSON *pl_ckpt_source_manifest(const pl_ckpt_source *s);
pl_status pl_ckpt_source_dtype(pl_ckpt_source *s, const char *name, const char **dtype);
int pl_ckpt_source_has_moments(pl_ckpt_source *s);
pl_status pl_ckpt_source_verify(pl_ckpt_source *s, const char *rel, int64_t *bytes);

typedef enum { PL_CKPT_PARAMS = 0, PL_CKPT_EXP_AVG = 1, PL_CKPT_EXP_AVG_SQ = 2 } pl_ckpt_kind;

/* Writes kind's values of every tensor that reg's rank holds into the flat
 * window [lo, hi) of its buffer: element f (reg's offsets) goes to dst[f - lo].
 * Alignment padding in the window is left as it is. Errors name the tensor,
 * the file and what was expected (a tensor the checkpoint lacks, moments a
 * weights-only checkpoint lacks). */
pl_status pl_ckpt_source_fill(pl_ckpt_source *s, const pl_registry *reg, pl_ckpt_kind kind,
                              float *dst, int64_t lo, int64_t hi);

#endif
