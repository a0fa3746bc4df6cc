/* shuffle.c — deterministic epoch permutation: Fisher-Yates driven by a
 * counter-based splitmix64 stream of (seed, epoch, i). The algorithm is
 * written out in shuffle.h; this file must match it bit for bit.
 */
#include "shuffle.h"

#include "data_util.h"

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
    uint64_t key = data_mix64(seed ^ data_mix64(epoch + DATA_MIX64_GOLDEN));
    for (uint32_t i = 0; i < n; i++) perm[i] = i;
    for (uint32_t i = n ? n - 1 : 0; i > 0; i--) {
        uint64_t r = data_mix64(key + ((uint64_t)i + 1) * DATA_MIX64_GOLDEN);
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
