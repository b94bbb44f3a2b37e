/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
 * SC 2011), with its published multipliers and Weyl constants. */
#include "base/rng.h"

#include <math.h>

void pl_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
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
    const uint32_t ctr[4] = {(uint32_t)(index >> 2), (uint32_t)(index >> 34), (uint32_t)stream,
                             (uint32_t)(stream >> 32)};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t out[4];
    pl_philox4x32(ctr, key, out);
    return out[index & 3];
}

uint32_t pl_dropout_threshold(double p)
{
    long long t = llround(p * 4294967296.0);
    return t > (long long)UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}
