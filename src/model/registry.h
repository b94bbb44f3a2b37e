/* The parameter registry: a model described as a table of parameters.
 *
 * Each entry has a name (Megatron core's, e.g.
 * "decoder.layers.0.self_attention.linear_qkv.weight"), a global shape, how
 * tensor parallelism splits it, the pipeline stage that owns it, and — on the
 * rank that holds it — its offset in the rank's flat buffers. Parameters,
 * gradients and optimizer moments are each ONE contiguous float buffer laid out
 * by these offsets; named tensors are views. DP buckets, ZeRO shards, clipping,
 * checkpoints and export are arithmetic over this table. */
#ifndef PL_MODEL_REGISTRY_H
#define PL_MODEL_REGISTRY_H

#include "plait.h"

#include <stdint.h>

enum { PL_PARAM_NAME_MAX = 96, PL_PARAM_ALIGN = 16 /* floats: 64-byte aligned views */,
       PL_REGISTRY_MAX = 1 << 28 /* entries (the index holds int32 entry numbers) */ };

typedef enum {
    PL_TP_REPLICATED, /* every TP rank holds the whole tensor (norms, row-parallel bias) */
    PL_TP_ROWS,       /* dim 0 split: column-parallel weight [out/tp, in] and its bias */
    PL_TP_COLS,       /* dim 1 split: row-parallel weight [out, in/tp] */
    PL_TP_VOCAB,      /* dim 0 split of the padded vocabulary (vocab-parallel embedding) */
    PL_TP_ROWS_HALVES, /* dim 0 is two stacked halves (SwiGLU's fc1: [gate; up]), each split
                        * by rows: rank r holds [gate_r; up_r], so its local chunk pairs them */
    PL_TP_QKV_SHARED_KV, /* grouped-query QKV rows ([q heads, k, v] per group) with fewer
                          * groups G than TP ranks (tp % G == 0): rank r holds its NH/tp
                          * query heads and the k and v of their group g = r / (tp/G),
                          * which tp/G ranks share (their gradients summed over those) */
} pl_tp_split;

typedef enum { PL_INIT_NORMAL, PL_INIT_ONES, PL_INIT_ZEROS } pl_init_kind;

typedef struct pl_param {
    char name[PL_PARAM_NAME_MAX];
    int ndim;                 /* 1 or 2 */
    int64_t shape[2];         /* global shape */
    int64_t local_shape[2];   /* this TP rank's slice */
    int64_t slice_start[2];   /* where the slice starts in the global tensor (ROWS_HALVES: in
                               * the first half; the second half's starts half a tensor later) */
    int64_t q_rows, kv_start; /* QKV_SHARED_KV: local rows [0, q_rows) are global rows from
                               * slice_start[0], the rest (k, v) global rows from kv_start */
    int kv_replica;           /* QKV_SHARED_KV: this rank's index among the group's sharers */
    pl_tp_split split;
    int stage;                /* owning pipeline stage */
    int layer;                /* transformer layer, -1 for others */
    int weight_decay;         /* 0 for biases and norm gains */
    pl_init_kind init;
    float init_std;           /* PL_INIT_NORMAL */
    uint64_t init_stream;     /* the draws' stream: the name's hash, or (a copy of another
                               * tensor, as the last stage's tied output layer) that one's */
    int tied_copy;            /* a copy of another stage's tensor, kept equal to it (its
                               * gradient summed with the original's over the embedding
                               * group): counted once, with the original, in the norm */
    int64_t numel;            /* local elements */
    int64_t offset;           /* into the flat buffers; -1 when this rank holds none */
} pl_param;

typedef struct pl_registry {
    pl_param *params;
    int n, cap;
    int32_t *slots;   /* open-addressing index by name: entry + 1, 0 empty; nslots a power of
                       * two, at least twice n, so add and find take constant time */
    int64_t nslots;
    int tp_size, tp_rank, pp_rank;
    int64_t numel; /* flat buffer length on this rank (with alignment padding) */
} pl_registry;

/* An empty registry for the rank at (tp_rank of tp_size, pp_rank). */
void pl_registry_init(pl_registry *r, int tp_size, int tp_rank, int pp_rank);
void pl_registry_free(pl_registry *r);

typedef struct pl_param_spec {
    const char *name;
    int ndim;
    int64_t shape[2];
    pl_tp_split split;
    int stage, layer, weight_decay;
    pl_init_kind init;
    float init_std;
    int64_t heads, groups; /* QKV_SHARED_KV: query heads and key/value groups */
} pl_param_spec;

/* Appends a parameter. A split dimension not divisible by the TP size is an
 * error naming the parameter. Parameters of other stages are listed with
 * offset -1. */
pl_status pl_registry_add(pl_registry *r, const pl_param_spec *spec);

/* The entry named name, or NULL (a hash lookup: a registry of millions of entries is
 * built in linear time). */
const pl_param *pl_registry_find(const pl_registry *r, const char *name);

/* Fills this rank's flat parameter buffer: normal draws keyed by (seed, name,
 * global element index) so every sharding holds the same global values; ones,
 * zeros; alignment padding zero. */
void pl_registry_init_values(const pl_registry *r, float *flat, uint64_t seed);

/* The same values for the flat range [lo, hi) only, written to out (element lo
 * at index 0): a ZeRO-3 rank draws just its shard. */
void pl_registry_init_range(const pl_registry *r, int64_t lo, int64_t hi, float *out,
                            uint64_t seed);

/* Global row-major index of local element (row, col) of p. */
int64_t pl_param_global_index(const pl_param *p, int64_t row, int64_t col);

#endif
