/* data_util.h — the helpers the loaders in data/ share: growing a dynamic
 * array, the one 64-bit mixing function of data/ (the epoch shuffle, the
 * synthetic images, the text-classification split), the one 64-bit string
 * hash (FNV-1a: topic names, the vocabulary hash of token shards), and the
 * check that an output file's folder can be written before a long build. The data APIs
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

/* FNV-1a 64 (Fowler, Noll, Vo): h = (h ^ byte) * 0x100000001B3 for each
 * byte, from DATA_FNV64_BASIS. Pinned like data_mix64: shards store it. */
#define DATA_FNV64_BASIS 0xCBF29CE484222325ull
static inline uint64_t data_fnv1a64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001B3ull;
    return h;
}

/* Before a long build that ends by writing path: 0 when the folder path
 * names exists and is writable, else -1 with "cannot write WHAT PATH: the
 * folder DIR does not exist" (or "... is not a folder", "... is not
 * writable: Permission denied") in err. what names the file ("vocab",
 * "shard"). The final write still reports its own failure (a full disk). */
int data_check_output(const char *path, const char *what, char *err, size_t errlen);

/* Grow *p (elements of size elem, capacity *cap) to hold at least need,
 * doubling from 16; returns 0, or -1 when out of memory (*p unchanged). */
int data_grow(void **p, size_t *cap, size_t need, size_t elem);

#endif
