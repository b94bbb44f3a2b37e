/* Counter-based random numbers (Philox4x32-10).
 *
 * A draw is a pure function of (seed, stream, index): no state is carried from
 * one draw to the next. Parameter initialisation uses stream = hash of the
 * parameter's name and index = the element's position in the GLOBAL tensor, so
 * any sharding of a tensor draws exactly its slice of the same values. */
#ifndef PL_BASE_RNG_H
#define PL_BASE_RNG_H

#include <stdint.h>

/* Philox4x32-10 block: four 32-bit words from a 128-bit counter and 64-bit key. */
void pl_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* 64-bit FNV-1a of a NUL-terminated string (stable stream ids from names). */
uint64_t pl_hash_str(const char *s);

/* Uniform in (0, 1), and standard normal (Box-Muller), for (seed, stream, index). */
double pl_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);
double pl_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);

/* 32 random bits for (seed, stream, index): word (index & 3) of the Philox4x32-10 block whose
 * 128-bit counter is {(uint32_t)(index >> 2), (uint32_t)(index >> 34), (uint32_t)stream,
 * (uint32_t)(stream >> 32)} and key {(uint32_t)seed, (uint32_t)(seed >> 32)}. */
uint32_t pl_rng_u32(uint64_t seed, uint64_t stream, uint64_t index);
/* Dropped when u32 < pl_dropout_threshold(p) = (uint32_t)llround(p * 4294967296.0), clamped to
 * UINT32_MAX. */
uint32_t pl_dropout_threshold(double p);

#endif
