/* shuffle.h — the deterministic epoch permutation of a data set.
 *
 * shuffle_perm(perm, n, seed, epoch) writes a permutation of 0..n-1 that is a
 * pure function of (n, seed, epoch): the same on every machine, compiler and
 * run, with no state carried between epochs. So a resumed run recomputes the
 * order of the epoch it stopped in and skips the steps already taken, and
 * every rank of a distributed run computes the same permutation and takes its
 * own slice of it (e.g. positions rank, rank + world, ...), with no
 * communication.
 *
 * Algorithm (a contract: resume depends on it; tests pin its output):
 *   mix(z)  = the splitmix64 finalizer (Steele et al. 2014):
 *             z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
 *             z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31
 *   G       = 0x9E3779B97F4A7C15
 *   key     = mix(seed ^ mix(epoch + G))
 *   r(i)    = mix(key + (i + 1) * G)        (all arithmetic mod 2^64)
 *   perm    = 0, 1, ..., n-1; then Fisher-Yates from the top:
 *   for i = n-1 down to 1:  j = floor(r(i) * (i + 1) / 2^64);  swap perm[i], perm[j]
 * The multiply-high mapping of a 64-bit draw onto [0, i] is biased by at most
 * (i+1)/2^64, far below anything a training run can see.
 */
#ifndef CTRAIN_DATA_SHUFFLE_H
#define CTRAIN_DATA_SHUFFLE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* perm [n] = the permutation of 0..n-1 for (seed, epoch). */
void shuffle_perm(uint32_t *perm, uint32_t n, uint64_t seed, uint64_t epoch);

/* Data-parallel sampling (PyTorch's DistributedSampler with drop_last):
 * every rank computes the same permutation, then keeps positions
 *   rank, rank + world, rank + 2 world, ...
 * of it, n / world of them, so the ranks' samples are disjoint, together
 * cover all but the last n mod world positions, and every rank has the same
 * count (the same number of steps). Batch b of rank r then holds global
 * positions r + world (b B + i), i < B: the ranks' batches b together are
 * exactly batch b of a single process with batch world x B, only in another
 * row order (what makes N GPUs x B equal one GPU x N B).
 * Compacts perm in place to its first n / world entries and returns that
 * count; world <= 1 keeps all n. */
uint32_t shuffle_shard(uint32_t *perm, uint32_t n, uint32_t rank, uint32_t world);
/* The count shuffle_shard keeps: n / world (n when world <= 1). */
static inline uint32_t shuffle_shard_count(uint32_t n, uint32_t world)
{
    return world > 1 ? n / world : n;
}

#ifdef __cplusplus
}
#endif
#endif
