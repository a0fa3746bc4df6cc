/* shuffle.c — deterministic epoch permutation: Fisher-Yates driven by a
 * counter-based splitmix64 stream of (seed, epoch, i). The algorithm is
 * written out in shuffle.h; this file must match it bit for bit.
 */
#include "shuffle.h"

#define SHUFFLE_GOLDEN 0x9E3779B97F4A7C15ull

static uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z;
}

/* High 64 bits of a * b, in 32-bit pieces so it needs no 128-bit type. */
static uint64_t mulhi64(uint64_t a, uint64_t b)
{
    uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

void shuffle_perm(uint32_t *perm, uint32_t n, uint64_t seed, uint64_t epoch)
{
    uint64_t key = mix64(seed ^ mix64(epoch + SHUFFLE_GOLDEN));
    for (uint32_t i = 0; i < n; i++) perm[i] = i;
    for (uint32_t i = n ? n - 1 : 0; i > 0; i--) {
        uint64_t r = mix64(key + ((uint64_t)i + 1) * SHUFFLE_GOLDEN);
        uint32_t j = (uint32_t)mulhi64(r, (uint64_t)i + 1);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

uint32_t shuffle_shard(uint32_t *perm, uint32_t n, uint32_t rank, uint32_t world)
{
    if (world <= 1) return n;
    uint32_t k = n / world;
    /* reading index rank + j world >= j: a forward pass compacts in place */
    for (uint32_t j = 0; j < k; j++) perm[j] = perm[rank + (uint64_t)j * world];
    return k;
}
