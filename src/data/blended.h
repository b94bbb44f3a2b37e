/* Several GPT datasets blended by weight, and the builder that turns
 * --data-path / --split and the requested sample counts into the train,
 * valid and test datasets Megatron would build.
 *
 * Sources (NVIDIA/Megatron-LM, megatron/core/datasets/):
 *   --data-path parsing ........... utils.py get_blend_from_list, normalize
 *   per-dataset sample requests .... blended_megatron_dataset_builder.py
 *                                    (_get_size_per_split_per_dataset: target
 *                                    ceil(n * w), built ceil(ceil(n * w) * (1 +
 *                                    mid_level_dataset_surplus)); the blend's
 *                                    size is the sum of the targets)
 *   blending indices ............... helpers.cpp build_blending_indices
 *   blended description and cache .. blended_dataset.py (cached only with
 *                                    --data-cache-path)
 *
 * The three shapes of --data-path:
 *   PREFIX                 one GPT dataset per split, no blend;
 *   W1 P1 W2 P2 ...        one GPT dataset per prefix and split with the
 *                          requests above, blended by the weights (also for a
 *                          single weighted prefix, as Megatron does);
 *   P1 P2 ...              one epoch of each (num_samples None), blended by
 *                          their lengths, size min(request, sum of lengths).
 *
 * Not here: --train-data-path and friends (blend_per_split), the exhaustive
 * blend used when no size is requested, multiple validation sets. */
#ifndef PL_DATA_BLENDED_H
#define PL_DATA_BLENDED_H

#include "data/gpt_dataset.h"

/* --data-path, parsed. */
typedef struct pl_blend_spec {
    int n;
    char **prefixes;  /* pl_malloc'd, whitespace-stripped copies */
    double *weights;  /* pl_malloc'd; NULL when none were given */
} pl_blend_spec;

/* Weights and prefixes alternate, or prefixes come alone. Errors name
 * --data-path and the value: an odd list holding numbers, a weight that is
 * not a number among weighted pairs, a weight <= 0. */
pl_status pl_blend_spec_parse(pl_blend_spec *b, const char *const *items, int n);
void pl_blend_spec_free(pl_blend_spec *b);

/* utils.py normalize: w / numpy.sum(w). */
void pl_blend_normalize(const double *w, int n, double *out);

/* int(math.ceil(math.ceil(target * weight) * (1 + surplus))). */
int64_t pl_blend_request(int64_t target, double weight, double surplus);

/* helpers.cpp build_blending_indices: sample i goes to the first dataset d
 * maximising w[d] * max(i, 1) - count[d]; records d and count[d]++. */
pl_status pl_blend_indices(const double *weights, int n, int64_t size, int16_t *dataset_index,
                           int64_t *dataset_sample_index);

enum { PL_BLEND_DESC, PL_BLEND_INDEX, PL_BLEND_SAMPLE, PL_BLEND_N_FILES };

/* A BlendedDataset over n GPT datasets of one split. */
typedef struct pl_blend_dataset {
    int n;
    pl_gpt_dataset **members; /* pl_malloc'd array of borrowed pointers */
    double *weights;          /* normalised, as recorded in the description */
    int64_t size;
    pl_split split;
    pl_npy dataset_index;        /* int16 [size] */
    pl_npy dataset_sample_index; /* int64 [size] */
    char *description;
    char hash[33];
    char *files[PL_BLEND_N_FILES]; /* NULL without a cache directory */
    int built;
    double seconds;
} pl_blend_dataset;

/* Builds (or loads from cache_dir, when not NULL) the blend of members with
 * weights (normalised again here, as BlendedDataset does) and size. A blend
 * that asks a member for more samples than it has is an error suggesting a
 * larger --mid-level-dataset-surplus. */
pl_status pl_blend_dataset_init(pl_blend_dataset *b, pl_gpt_dataset *const *members, int n,
                                const double *weights, int64_t size, pl_split s,
                                const char *cache_dir);
void pl_blend_dataset_free(pl_blend_dataset *b);

typedef struct pl_blend_config {
    pl_gpt_dataset_config gpt;
    double mid_level_dataset_surplus; /* --mid-level-dataset-surplus, 0.005 */
} pl_blend_config;

/* Everything built from one --data-path: the low-level datasets, the
 * mid-level GPT datasets and, when blending, the top-level blends. */
typedef struct pl_blend_data {
    int n;                    /* prefixes */
    pl_indexed *low;          /* [n] */
    pl_gpt_dataset *mid;      /* [n * PL_N_SPLITS], mid[d * 3 + s]; zeroed if absent */
    int blended;              /* the top level is a blend */
    int present[PL_N_SPLITS]; /* split has a dataset (non-zero --split weight) */
    int64_t requested[PL_N_SPLITS];
    pl_blend_dataset top[PL_N_SPLITS];
} pl_blend_data;

/* BlendedMegatronDatasetBuilder.build for GPTDataset: sizes[s] samples
 * requested per split (pl_gpt_num_samples). On failure d is left zeroed. */
pl_status pl_blend_build(pl_blend_data *d, const pl_blend_spec *spec, const pl_blend_config *cfg,
                         const int64_t sizes[PL_N_SPLITS]);
void pl_blend_data_free(pl_blend_data *d);

/* Length of split s (0 when absent). */
int64_t pl_blend_data_len(const pl_blend_data *d, pl_split s);

/* Sample idx of split s: S + x tokens into tokens (see pl_gpt_dataset_get);
 * dataset and dataset_sample (may be NULL) receive the member and its sample. */
pl_status pl_blend_data_get(const pl_blend_data *d, pl_split s, int64_t idx, int32_t *tokens,
                            int64_t *n_real, int *dataset, int64_t *dataset_sample);

/* Member ds's GPT dataset of split s (the one pl_blend_data_get's *dataset names). */
const pl_gpt_dataset *pl_blend_data_member(const pl_blend_data *d, pl_split s, int ds);

#endif
