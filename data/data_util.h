/* data_util.h — the helpers the loaders in data/ share: growing a dynamic
 * array, and the one 64-bit mixing function of data/ (the epoch shuffle,
 * the synthetic images, the text-classification split). The data APIs
 * report errors as text plus a status instead of exiting, so tests and
 * callers can check the message: that text is written by engine/error.h's
 * ct_fail, the formatter every such API shares.
 */
#ifndef CTRAIN_DATA_UTIL_H
#define CTRAIN_DATA_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The splitmix64 increment, 2^64 / golden ratio (Steele et al. 2014). */
#define DATA_MIX64_GOLDEN 0x9E3779B97F4A7C15ull

/* The splitmix64 finalizer (Steele et al. 2014), a bijection of 64-bit
 * words that scrambles nearby inputs into unrelated outputs:
 *   z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
 *   z ^= z >> 31
 * One splitmix64 step is data_mix64(z + DATA_MIX64_GOLDEN). Shuffles,
 * synthetic data and held-out splits are pinned to it (tests, resume): its
 * constants never change. */
static inline uint64_t data_mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z;
}

/* Grow *p (elements of size elem, capacity *cap) to hold at least need,
 * doubling from 16; returns 0, or -1 when out of memory (*p unchanged). */
int data_grow(void **p, size_t *cap, size_t need, size_t elem);

#endif
