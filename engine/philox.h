/* philox.h — Philox 4x32-10 (and -7), the counter-based RNG (Salmon et al., SC'11).
 *
 * A random stream is addressed, not iterated: (seed, counter) -> 4 uint32.
 * The same seed and counter give the same numbers on the CPU and in a CUDA
 * kernel (this header compiles in both), which is what lets recompute and
 * resume reproduce dropout masks exactly.
 *
 * Convention for uniform numbers (parameter init, the synthetic data, the
 * MLM and augmentation draws): element i of a stream drawn at `offset` comes
 * from counter (offset + i/4, 0) and takes word i%4, ten rounds. A consumer
 * that draws n numbers advances the caller's offset by ceil(n/4). Every
 * dropout mask takes 8 bits an element instead, sixteen a counter, from 7
 * rounds, and advances the offset by ceil(n/16) (ops/dropout_mask.h).
 */
#ifndef CTRAIN_PHILOX_H
#define CTRAIN_PHILOX_H

#include <stdint.h>

#if defined(__CUDACC__)
#define CT_HD __host__ __device__ __forceinline__
#else
#define CT_HD static inline
#endif

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* hi:lo = a b. On the GPU as two 32-bit products (one IMAD.WIDE.U32 after
 * ptxas): the 64-bit form compiles to 64-bit multiplies, XORs and masks of
 * values whose high words are zero, about twice the instructions. */
CT_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
#if defined(__CUDA_ARCH__)
    *hi = __umulhi(a, b);
    *lo = a * b;
#else
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
#endif
}

/* out = Philox4x32-R(counter = {c0,c1,c2,c3}, key = {k0,k1}): R rounds, the
 * key bumped by (W0, W1) after each. R = 10 is Random123's default, the one
 * ctrain draws its uniform numbers with; the dropout masks take R = 7 (the
 * fewest rounds the authors found to pass their statistical batteries, and
 * FlashAttention-2's choice; ops/dropout_mask.h says why). */
CT_HD void philox4x32_rounds(uint32_t out[4], uint32_t c0, uint32_t c1, uint32_t c2,
                             uint32_t c3, uint32_t k0, uint32_t k1, int rounds)
{
    for (int r = 0; r < rounds; r++) {
        uint32_t hi0, lo0, hi1, lo1;
        philox_mulhilo(PHILOX_M0, c0, &hi0, &lo0);
        philox_mulhilo(PHILOX_M1, c2, &hi1, &lo1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

CT_HD void philox4x32_10(uint32_t out[4], uint32_t c0, uint32_t c1, uint32_t c2,
                         uint32_t c3, uint32_t k0, uint32_t k1)
{
    philox4x32_rounds(out, c0, c1, c2, c3, k0, k1, 10);
}

CT_HD void philox4x32_7(uint32_t out[4], uint32_t c0, uint32_t c1, uint32_t c2,
                        uint32_t c3, uint32_t k0, uint32_t k1)
{
    philox4x32_rounds(out, c0, c1, c2, c3, k0, k1, 7);
}

/* The 32-bit word for element i of the stream (seed, offset). */
CT_HD uint32_t philox_u32(uint64_t seed, uint64_t offset, uint64_t i)
{
    uint32_t o[4];
    uint64_t ctr = offset + (i >> 2);
    philox4x32_10(o, (uint32_t)ctr, (uint32_t)(ctr >> 32), 0, 0, (uint32_t)seed,
                  (uint32_t)(seed >> 32));
    return o[i & 3];
}

/* Uniform in [0, 1) with 24 random bits (exactly representable in f32). */
CT_HD float philox_uniform(uint64_t seed, uint64_t offset, uint64_t i)
{
    return (float)(philox_u32(seed, offset, i) >> 8) * (1.0f / 16777216.0f);
}

#endif
