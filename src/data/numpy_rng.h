/* numpy's legacy random stream, bit for bit, and the two pieces of numpy /
 * Python arithmetic that Megatron's index building depends on.
 *
 * Megatron builds its GPT indices with numpy.random.RandomState(seed).shuffle
 * (megatron/core/datasets/gpt_dataset.py). Reproducing the same permutation
 * needs, exactly as numpy does it:
 *   - MT19937 (numpy/random/src/mt19937/mt19937.c: mt19937_gen, tempering);
 *   - RandomState(int) seeding = mt19937_seed, Knuth's init_genrand recurrence
 *     (numpy/random/_mt19937.pyx _legacy_seeding; seeds in [0, 2^32 - 1]);
 *   - random_interval(max): mask rejection on 32-bit draws when max fits in
 *     32 bits, else on 64-bit draws hi<<32|lo
 *     (numpy/random/src/distributions/distributions.c);
 *   - shuffle: for i = n-1 down to 1: j = random_interval(i); swap(a[i], a[j])
 *     (numpy/random/mtrand.pyx RandomState.shuffle / _shuffle_raw).
 * The element type does not change the stream: only the length matters.
 *
 * Not here: numpy's Generator (PCG64), RandomState.randint and the other
 * distributions. */
#ifndef PL_DATA_NUMPY_RNG_H
#define PL_DATA_NUMPY_RNG_H

#include <stddef.h>
#include <stdint.h>

enum { PL_MT19937_N = 624 };

typedef struct pl_np_rng {
    uint32_t key[PL_MT19937_N];
    int pos;
} pl_np_rng;

/* numpy.random.RandomState(seed). */
void pl_np_rng_seed(pl_np_rng *r, uint32_t seed);

/* The next tempered 32-bit output (bit_generator next_uint32). */
uint32_t pl_np_rng_next32(pl_np_rng *r);

/* next_uint64: two 32-bit outputs, the first one in the high half. */
uint64_t pl_np_rng_next64(pl_np_rng *r);

/* A uniform integer in [0, max] (numpy's random_interval). */
uint64_t pl_np_rng_interval(pl_np_rng *r, uint64_t max);

/* RandomState.shuffle of a 1-d array, in place. */
void pl_np_rng_shuffle_i32(pl_np_rng *r, int32_t *a, int64_t n);
void pl_np_rng_shuffle_u32(pl_np_rng *r, uint32_t *a, int64_t n);
void pl_np_rng_shuffle_i64(pl_np_rng *r, int64_t *a, int64_t n);

/* numpy.sum of a float64 array: numpy's pairwise summation (blocks of 8
 * accumulators under 128 elements, halving above), which is not the
 * left-to-right sum; Megatron's normalize() divides by it. */
double pl_np_sum_f64(const double *a, int64_t n);

/* Python's round(x) for a float: nearest integer, ties to even. */
double pl_py_round(double x);

#endif
