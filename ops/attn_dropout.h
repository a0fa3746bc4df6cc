/* attn_dropout.h — attention's dropout mask: one definition for the CPU
 * reference (ops/attention.c) and every CUDA attention path (the cuBLASLt
 * one's row kernels, ops/attention.cu; the FMA flash kernels,
 * ops/attention_fused.cu; the tensor-core ones, ops/attention_fa_tc*.cu).
 * Compiles as C and as CUDA.
 *
 * Element idx = ((b H + h) T + i) T + j of the [B, H, T, T] probabilities
 * is kept iff
 *
 *   u16(idx) >= thr,   thr = ceil(p 2^16)        (P(keep) = 1 - thr 2^-16)
 *   u16(idx) = 16-bit half (idx % 2) of word (idx % 8) / 2 of
 *              Philox4x32-7(counter offset + idx / 8, key seed)
 *
 * and a kept probability is scaled by 1 / (1 - p) (dropout_scale). Eight
 * decisions a Philox call, where the other dropouts (ops/dropout.h) take a
 * 24-bit uniform an element, four a call: attention's mask has B H T^2
 * elements, and in the tensor-core forward drawing them cost about as much
 * as the matrix products. p is resolved to 2^-16 (|thr 2^-16 - p| < 1.6e-5;
 * FlashAttention-2 uses 2^-8), while the kept values are still scaled by
 * 1 / (1 - p): the expected Pd is off by (thr 2^-16 - p) / (1 - p) relative
 * (6.8e-6 at p 0.1), far below a bf16 rounding. p below 2^-16 drops at rate
 * 2^-16; the op takes p in [0, 1). A draw of n elements takes ceil(n / 8)
 * counters (attn_drop_blocks).
 *
 * Seven Philox rounds, not the ten of every other draw (engine/philox.h): the
 * mask has B H T^2 elements (134 M a layer at BERT-large seq 512 bs 32) and its
 * draws, ~20 wide multiplies a call at ten rounds, bound the attention
 * forward's integer pipe. Seven is the fewest rounds Salmon et al. found to
 * pass TestU01's BigCrush for Philox4x32 (ten is their default, a margin of
 * three), and what FlashAttention-2 draws its mask with; a mask of keep bits
 * at p 0.1 asks far less of a generator than those batteries do.
 */
#ifndef CTRAIN_OPS_ATTN_DROPOUT_H
#define CTRAIN_OPS_ATTN_DROPOUT_H

#include <math.h>
#include <stdint.h>

#include "engine/philox.h"

/* thr for p: 0 (keep everything) when p <= 0. p 2^16 is exact in f32. */
CT_HD uint32_t attn_drop_threshold(float p)
{
    return p > 0.0f ? (uint32_t)ceilf(p * 65536.0f) : 0u;
}

/* Counters a draw of n elements takes. */
CT_HD uint64_t attn_drop_blocks(uint64_t n) { return (n + 7) >> 3; }

/* The 8 keep bits of counter group g, elements 8 g .. 8 g + 7: bit e is
 * element 8 g + e. */
CT_HD unsigned attn_keep8(uint64_t seed, uint64_t offset, uint64_t g, uint32_t thr)
{
    uint32_t r[4];
    const uint64_t ctr = offset + g;
    philox4x32_7(r, (uint32_t)ctr, (uint32_t)(ctr >> 32), 0, 0, (uint32_t)seed,
                 (uint32_t)(seed >> 32));
    unsigned b = 0;
    for (int w = 0; w < 4; w++) {
        b |= ((r[w] & 0xFFFFu) >= thr ? 1u : 0u) << (2 * w);
        b |= ((r[w] >> 16) >= thr ? 1u : 0u) << (2 * w + 1);
    }
    return b;
}

/* The keep bit of element idx (one Philox call: for one element alone). */
CT_HD int attn_keep(uint64_t seed, uint64_t offset, uint64_t idx, uint32_t thr)
{
    return (int)((attn_keep8(seed, offset, idx >> 3, thr) >> (idx & 7)) & 1u);
}

#endif
