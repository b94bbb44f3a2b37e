/* T5's relative position bias (transformers' T5Attention.compute_bias, Megatron
 * core's RelativePositionEmbedding, --position-embedding-type relative): a
 * table (buckets, NH) per stack, whole on every tensor-parallel rank as
 * Megatron holds it, whose column h is added to head h's attention scores by
 * the bucket of the distance k - q between key and query.
 *
 * The attention kernels take the bias as per-head vectors over distances
 * (kernels.h, pl_attn_shape.rel_bias): bias (NH, 2R-1), element h (2R-1) +
 * R-1 + d for distance d in [-(R-1), R-1]. These functions build them from
 * the table for this rank's heads [h0, h0 + NH) and scatter their gradient
 * back. Pure: no allocation, no communication. */
#ifndef PL_NN_RELBIAS_H
#define PL_NN_RELBIAS_H

#include <stdint.h>

/* The table's shape and the bucket rule of one stack. */
typedef struct pl_nn_relbias_spec {
    int64_t buckets, max_distance; /* --relative-attention-num-buckets, -max-distance */
    int bidirectional;             /* encoder (and any non-causal stack): 1 */
} pl_nn_relbias_spec;

/* The bucket of distance d = key - query, as transformers' and Megatron's
 * _relative_position_bucket compute it (the logarithmic part in float32, as
 * torch does): in [0, buckets). */
int64_t pl_nn_relbias_bucket(const pl_nn_relbias_spec *s, int64_t d);
/* bias (NH, 2R-1) from table (buckets, NHg): heads h0 .. h0+NH-1. */
void pl_nn_relbias_fill(float *bias, const float *table, const pl_nn_relbias_spec *s,
                        int64_t NHg, int64_t h0, int64_t NH, int64_t R);
/* dtable (buckets, NHg) += dbias (NH, 2R-1) scattered to the buckets of heads
 * h0 .. h0+NH-1, distances ascending (a fixed order). */
void pl_nn_relbias_grad(float *dtable, const float *dbias, const pl_nn_relbias_spec *s,
                        int64_t NHg, int64_t h0, int64_t NH, int64_t R);

#endif
