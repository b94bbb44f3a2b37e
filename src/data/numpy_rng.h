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
 * Megatron's BERT dataset (megatron/core/datasets/bert_dataset.py,
 * masked_dataset.py) also draws, per sample:
 *   - random(): random_sample, mt19937_next_double:
 *     (a >> 5) * 2^26 + (b >> 6), over 2^53, a then b two 32-bit outputs;
 *   - randint(low, high) with the default int64 dtype: low + a masked
 *     rejection draw on [0, high - 1 - low] (_bounded_integers.pyx
 *     _rand_int64, use_masked), which is random_interval's draw;
 *   - choice(a, p=p): cdf = cumsum(p), cdf /= cdf[-1], one random(), the
 *     first index with cdf > u (searchsorted side='right');
 *   - geometric(p) for T5's span lengths (pl_np_rng_geometric).
 * helpers.cpp build_mapping uses C++'s std::mt19937(seed), the same
 * generator and seeding as RandomState (so pl_np_rng serves), and
 * std::mt19937_64(seed + 1) for its shuffle (pl_mt64 below).
 *
 * Not here: numpy's Generator (PCG64) and the other distributions. */
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

/* RandomState.random(): a double in [0, 1) from two 32-bit outputs. */
double pl_np_rng_random(pl_np_rng *r);

/* RandomState.randint(low, high) (int64 dtype, size None): a uniform integer
 * in [low, high). high > low (numpy raises otherwise; here high <= low
 * returns low without a draw, the caller checks). */
int64_t pl_np_rng_randint(pl_np_rng *r, int64_t low, int64_t high);

/* RandomState.choice(n, p=p) with replace (size None): an index in [0, n)
 * drawn with one random(). p: n >= 1 non-negative weights summing to 1
 * (numpy checks this; the caller does). */
int64_t pl_np_rng_choice_p(pl_np_rng *r, const double *p, int64_t n);

/* RandomState.geometric(p) (size None), 0 < p < 1: one random(); numpy's
 * legacy search below p = 1/3 is inversion, ceil(log1p(-u) / log(1 - p))
 * (Megatron's T5 masking draws its span lengths with p = 0.2). */
int64_t pl_np_rng_geometric(pl_np_rng *r, double p);

/* C++'s std::mt19937_64: the 64-bit Mersenne Twister with the standard's
 * parameters and seeding (mt[i] = 6364136223846793005 * (mt[i-1] ^
 * mt[i-1] >> 62) + i). Its 10000th output from the default seed 5489 is
 * 9981545732273789042 (the C++ standard's check value). */
enum { PL_MT64_N = 312 };

typedef struct pl_mt64 {
    uint64_t key[PL_MT64_N];
    int pos;
} pl_mt64;

void pl_mt64_seed(pl_mt64 *r, uint64_t seed);
uint64_t pl_mt64_next(pl_mt64 *r);

/* numpy.sum of a float64 array: numpy's pairwise summation (blocks of 8
 * accumulators under 128 elements, halving above), which is not the
 * left-to-right sum; Megatron's normalize() divides by it. */
double pl_np_sum_f64(const double *a, int64_t n);

/* Python's round(x) for a float: nearest integer, ties to even. */
double pl_py_round(double x);

#endif
