/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
 * SC 2011) through the authors' Random123 (Debian's librandom123-dev, header
 * only); the SIMD twins in the dropout and attention kernels write the same
 * rounds out and are tested against this. */
#include "base/rng.h"

#include <Random123/philox.h>
#include <math.h>

void pl_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    const philox4x32_ctr_t c = {{ctr[0], ctr[1], ctr[2], ctr[3]}};
    const philox4x32_key_t k = {{key[0], key[1]}};
    const philox4x32_ctr_t r = philox4x32_R(10, c, k);
    for (int i = 0; i < 4; i++)
        out[i] = r.v[i];
}

uint64_t pl_hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The block of counter (index, stream) and key seed, as 32-bit words, low first. */
static void draw(uint64_t seed, uint64_t stream, uint64_t index, uint32_t out[4])
{
    const uint32_t ctr[4] = {(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)stream,
                             (uint32_t)(stream >> 32)};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    pl_philox4x32(ctr, key, out);
}

/* 53 random bits to a double in (0, 1): never 0, so log() is safe. */
static double to_unit(uint32_t hi, uint32_t lo)
{
    uint64_t bits = ((uint64_t)hi << 21) ^ (lo >> 11);
    return ((double)bits + 0.5) * (1.0 / 9007199254740992.0);
}

double pl_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint32_t r[4];
    draw(seed, stream, index, r);
    return to_unit(r[0], r[1]);
}

double pl_rng_normal(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint32_t r[4];
    draw(seed, stream, index, r);
    double u1 = to_unit(r[0], r[1]), u2 = to_unit(r[2], r[3]);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint32_t pl_rng_u32(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint32_t r[4];
    draw(seed, stream, index >> 2, r);
    return r[index & 3];
}

uint32_t pl_dropout_threshold(double p)
{
    if (!(p > 0.0)) /* also NaN */
        return 0;
    if (p >= 1.0)
        return UINT32_MAX;
    long long t = llround(p * 4294967296.0);
    return t >= (long long)UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}
