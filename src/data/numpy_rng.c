/* numpy's legacy MT19937 stream, random_interval, shuffle; numpy.sum; round. */
#include "data/numpy_rng.h"

#include <math.h>

enum { MT_M = 397 };
#define MT_MATRIX_A 0x9908b0dfU
#define MT_UPPER 0x80000000U
#define MT_LOWER 0x7fffffffU

/* mt19937_seed: key[0] = seed, key[i] = 1812433253 * (key[i-1] ^ key[i-1] >> 30) + i. */
void pl_np_rng_seed(pl_np_rng *r, uint32_t seed)
{
    for (int pos = 0; pos < PL_MT19937_N; pos++) {
        r->key[pos] = seed;
        seed = 1812433253U * (seed ^ (seed >> 30)) + (uint32_t)pos + 1U;
    }
    r->pos = PL_MT19937_N;
}

/* mt19937_gen: regenerate the 624 words of state. */
static void mt_gen(pl_np_rng *r)
{
    uint32_t *k = r->key, y;
    int i;
    for (i = 0; i < PL_MT19937_N - MT_M; i++) {
        y = (k[i] & MT_UPPER) | (k[i + 1] & MT_LOWER);
        k[i] = k[i + MT_M] ^ (y >> 1) ^ (-(y & 1U) & MT_MATRIX_A);
    }
    for (; i < PL_MT19937_N - 1; i++) {
        y = (k[i] & MT_UPPER) | (k[i + 1] & MT_LOWER);
        k[i] = k[i + (MT_M - PL_MT19937_N)] ^ (y >> 1) ^ (-(y & 1U) & MT_MATRIX_A);
    }
    y = (k[PL_MT19937_N - 1] & MT_UPPER) | (k[0] & MT_LOWER);
    k[PL_MT19937_N - 1] = k[MT_M - 1] ^ (y >> 1) ^ (-(y & 1U) & MT_MATRIX_A);
    r->pos = 0;
}

static inline uint32_t next32(pl_np_rng *r)
{
    if (r->pos == PL_MT19937_N)
        mt_gen(r);
    uint32_t y = r->key[r->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= y >> 18;
    return y;
}

uint32_t pl_np_rng_next32(pl_np_rng *r) { return next32(r); }

uint64_t pl_np_rng_next64(pl_np_rng *r)
{
    uint64_t hi = next32(r);
    return hi << 32 | next32(r);
}

static inline uint64_t interval(pl_np_rng *r, uint64_t max)
{
    if (max == 0)
        return 0;
    uint64_t mask = max, v;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    if (max <= 0xffffffffU) {
        while ((v = (next32(r) & mask)) > max)
            ;
    } else {
        while ((v = (pl_np_rng_next64(r) & mask)) > max)
            ;
    }
    return v;
}

uint64_t pl_np_rng_interval(pl_np_rng *r, uint64_t max) { return interval(r, max); }

/* The swaps of RandomState._shuffle_raw: i from n-1 down to 1, j = random_interval(i).
 * The draws do not depend on the data, so they are made AHEAD swaps early and
 * a[j] is prefetched: on arrays larger than the caches the random accesses
 * overlap instead of stalling one by one (numpy's own loop stalls on each).
 * The order of draws, and so the permutation, is unchanged. */
enum { AHEAD = 16 };

typedef struct jring {
    int64_t j[AHEAD];
    int head;
    int64_t next_i; /* the next i to draw a j for */
} jring;

static inline void ring_draw(jring *q, int slot, pl_np_rng *r, const char *base, size_t size)
{
    q->j[slot] = (int64_t)interval(r, (uint64_t)q->next_i--);
#if defined(__GNUC__)
    __builtin_prefetch(base + (size_t)q->j[slot] * size, 1, 0);
#else
    (void)base;
    (void)size;
#endif
}

static inline void ring_init(jring *q, int64_t n, pl_np_rng *r, const char *base, size_t size)
{
    q->head = 0;
    q->next_i = n - 1;
    for (int k = 0; k < AHEAD && q->next_i >= 1; k++)
        ring_draw(q, k, r, base, size);
}

/* The j of the next swap; refills its slot with a later draw. */
static inline int64_t ring_pop(jring *q, pl_np_rng *r, const char *base, size_t size)
{
    int slot = q->head;
    int64_t j = q->j[slot];
    if (q->next_i >= 1)
        ring_draw(q, slot, r, base, size);
    q->head = (slot + 1) % AHEAD;
    return j;
}

void pl_np_rng_shuffle_i32(pl_np_rng *r, int32_t *a, int64_t n)
{
    jring q;
    ring_init(&q, n, r, (const char *)a, sizeof *a);
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = ring_pop(&q, r, (const char *)a, sizeof *a);
        int32_t t = a[j];
        a[j] = a[i];
        a[i] = t;
    }
}

void pl_np_rng_shuffle_u32(pl_np_rng *r, uint32_t *a, int64_t n)
{
    jring q;
    ring_init(&q, n, r, (const char *)a, sizeof *a);
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = ring_pop(&q, r, (const char *)a, sizeof *a);
        uint32_t t = a[j];
        a[j] = a[i];
        a[i] = t;
    }
}

void pl_np_rng_shuffle_i64(pl_np_rng *r, int64_t *a, int64_t n)
{
    jring q;
    ring_init(&q, n, r, (const char *)a, sizeof *a);
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = ring_pop(&q, r, (const char *)a, sizeof *a);
        int64_t t = a[j];
        a[j] = a[i];
        a[i] = t;
    }
}

/* numpy's DOUBLE_pairwise_sum (numpy/core/src/umath/loops_utils.h.src), which
 * add.reduce applies to a contiguous float64 array. */
double pl_np_sum_f64(const double *a, int64_t n)
{
    if (n < 8) {
        double res = 0.0;
        for (int64_t i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        int64_t i;
        for (int k = 0; k < 8; k++)
            r[k] = a[k];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int k = 0; k < 8; k++)
                r[k] += a[i + k];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return pl_np_sum_f64(a, n2) + pl_np_sum_f64(a + n2, n - n2);
}

double pl_py_round(double x)
{
    double f = floor(x), d = x - f; /* x - floor(x) is exact in binary floating point */
    if (d > 0.5)
        return f + 1.0;
    if (d < 0.5)
        return f;
    return fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

/* mt19937_next_double (numpy/random/src/mt19937/mt19937.h). */
double pl_np_rng_random(pl_np_rng *r)
{
    int32_t a = (int32_t)(next32(r) >> 5), b = (int32_t)(next32(r) >> 6);
    return (a * 67108864.0 + b) / 9007199254740992.0;
}

int64_t pl_np_rng_randint(pl_np_rng *r, int64_t low, int64_t high)
{
    if (high <= low || high - low == 1)
        return low; /* numpy: rng == 0 returns low without a draw */
    uint64_t rng = (uint64_t)high - (uint64_t)low - 1U;
    return (int64_t)((uint64_t)low + interval(r, rng));
}

int64_t pl_np_rng_choice_p(pl_np_rng *r, const double *p, int64_t n)
{
    /* cdf = p.cumsum() (sequential); cdf /= cdf[-1]; searchsorted(u, 'right'). */
    double total = 0.0;
    for (int64_t i = 0; i < n; i++)
        total += p[i];
    double u = pl_np_rng_random(r), c = 0.0;
    for (int64_t i = 0; i < n; i++) {
        c += p[i];
        if (c / total > u)
            return i;
    }
    return n; /* unreachable for a proper p: cdf[-1] / cdf[-1] == 1 > u */
}

/* legacy_random_geometric (numpy/random/src/legacy/legacy-distributions.c):
 * a search over the cdf from p >= 1/3, else inversion. */
int64_t pl_np_rng_geometric(pl_np_rng *r, double p)
{
    if (p >= 0.333333333333333333333333) {
        double u = pl_np_rng_random(r), sum = p, prod = p, q = 1.0 - p;
        int64_t x = 1;
        while (u > sum) {
            prod *= q;
            sum += prod;
            x++;
        }
        return x;
    }
    return (int64_t)ceil(log1p(-pl_np_rng_random(r)) / log(1.0 - p));
}

enum { MT64_M = 156 };
#define MT64_MATRIX_A 0xB5026F5AA96619E9ULL
#define MT64_UPPER 0xFFFFFFFF80000000ULL
#define MT64_LOWER 0x7FFFFFFFULL

void pl_mt64_seed(pl_mt64 *r, uint64_t seed)
{
    r->key[0] = seed;
    for (int i = 1; i < PL_MT64_N; i++)
        r->key[i] = 6364136223846793005ULL * (r->key[i - 1] ^ (r->key[i - 1] >> 62)) + (uint64_t)i;
    r->pos = PL_MT64_N;
}

static void mt64_gen(pl_mt64 *r)
{
    uint64_t *k = r->key, y;
    for (int i = 0; i < PL_MT64_N; i++) {
        y = (k[i] & MT64_UPPER) | (k[(i + 1) % PL_MT64_N] & MT64_LOWER);
        k[i] = k[(i + MT64_M) % PL_MT64_N] ^ (y >> 1) ^ ((y & 1U) ? MT64_MATRIX_A : 0U);
    }
    r->pos = 0;
}

uint64_t pl_mt64_next(pl_mt64 *r)
{
    if (r->pos == PL_MT64_N)
        mt64_gen(r);
    uint64_t y = r->key[r->pos++];
    y ^= (y >> 29) & 0x5555555555555555ULL;
    y ^= (y << 17) & 0x71D67FFFEDA60000ULL;
    y ^= (y << 37) & 0xFFF7EEE000000000ULL;
    y ^= y >> 43;
    return y;
}
