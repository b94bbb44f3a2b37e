/* XXH64, from the xxHash specification (doc/xxhash_spec.md). */
#include "base/xxh64.h"

#include <string.h>

static const uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full,
                      P3 = 0x165667B19E3779F9ull, P4 = 0x85EBCA77C2B2AE63ull,
                      P5 = 0x27D4EB2F165667C5ull;

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t round64(uint64_t acc, uint64_t input)
{
    acc += input * P2;
    acc = rotl(acc, 31);
    return acc * P1;
}

static uint64_t merge(uint64_t acc, uint64_t val)
{
    acc ^= round64(0, val);
    return acc * P1 + P4;
}

void pl_xxh64_init(pl_xxh64_state *h, uint64_t seed)
{
    memset(h, 0, sizeof *h);
    h->seed = seed;
    h->v[0] = seed + P1 + P2;
    h->v[1] = seed + P2;
    h->v[2] = seed;
    h->v[3] = seed - P1;
}

static void stripe(pl_xxh64_state *h, const uint8_t *p)
{
    for (int i = 0; i < 4; i++)
        h->v[i] = round64(h->v[i], rd64(p + 8 * i));
}

void pl_xxh64_update(pl_xxh64_state *h, const void *data, size_t n)
{
    const uint8_t *p = data;
    h->total += n;
    if (h->buffered) {
        size_t k = 32 - h->buffered < n ? 32 - h->buffered : n;
        memcpy(h->buf + h->buffered, p, k);
        h->buffered += k;
        p += k;
        n -= k;
        if (h->buffered < 32)
            return;
        stripe(h, h->buf);
        h->buffered = 0;
    }
    for (; n >= 32; p += 32, n -= 32)
        stripe(h, p);
    memcpy(h->buf, p, n);
    h->buffered = n;
}

uint64_t pl_xxh64_digest(const pl_xxh64_state *h)
{
    uint64_t acc;
    if (h->total >= 32) {
        acc = rotl(h->v[0], 1) + rotl(h->v[1], 7) + rotl(h->v[2], 12) + rotl(h->v[3], 18);
        for (int i = 0; i < 4; i++)
            acc = merge(acc, h->v[i]);
    } else {
        acc = h->seed + P5;
    }
    acc += h->total;
    const uint8_t *p = h->buf;
    size_t n = h->buffered;
    for (; n >= 8; p += 8, n -= 8) {
        acc ^= round64(0, rd64(p));
        acc = rotl(acc, 27) * P1 + P4;
    }
    if (n >= 4) {
        acc ^= (uint64_t)rd32(p) * P1;
        acc = rotl(acc, 23) * P2 + P3;
        p += 4;
        n -= 4;
    }
    for (; n; p++, n--) {
        acc ^= *p * P5;
        acc = rotl(acc, 11) * P1;
    }
    acc ^= acc >> 33;
    acc *= P2;
    acc ^= acc >> 29;
    acc *= P3;
    acc ^= acc >> 32;
    return acc;
}

uint64_t pl_xxh64(const void *data, size_t n, uint64_t seed)
{
    pl_xxh64_state h;
    pl_xxh64_init(&h, seed);
    pl_xxh64_update(&h, data, n);
    return pl_xxh64_digest(&h);
}
