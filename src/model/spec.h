/* The model families plait trains, as one table: a family is a row (its
 * block spec, positions, tying and Hugging Face architecture name) plus the
 * parameter registration every row shares (model/config.c). Adding a family
 * is adding a row here and, where its layer needs one, a kernel; never a new
 * forward pass.
 *
 * A row gives the family's defaults; Megatron's architecture flags
 * (--normalization, --swiglu, --position-embedding-type, ...) then change
 * them (src/train/args.c applies them in order). */
#ifndef PL_MODEL_SPEC_H
#define PL_MODEL_SPEC_H

#include "model/config.h"

typedef struct pl_family_spec {
    const char *name;            /* --model NAME */
    pl_family family;
    pl_block_spec block;
    pl_head_spec head;
    const char *stack;           /* "decoder", or "encoder" (Megatron core's BERT) */
    int untie;                   /* output layer separate from the word embeddings */
    float hidden_dropout, attention_dropout; /* Megatron's defaults for the family */
    const char *hf_architecture; /* config.json "architectures" of a Hugging Face export */
} pl_family_spec;

/* The row of `name` ("gpt", "llama", "bert"), or NULL. */
const pl_family_spec *pl_family_find(const char *name);
/* The row of family f. */
const pl_family_spec *pl_family_get(pl_family f);
/* "gpt|llama|bert" */
extern const char pl_family_names[];

/* Sets cfg's family, block and head specs, tying and dropout from the row of f. */
void pl_family_apply(pl_model_config *cfg, pl_family f);

#endif
