/* dropout_mask.h — the dropout mask, one definition for every dropout in
 * ctrain and every place that draws it: the elementwise dropout
 * (ops/dropout.{c,cu}), the one inside add_norm (ops/layernorm.cu), and
 * attention's (the CPU reference, ops/attention.c; the cuBLASLt path's row
 * kernels, ops/attention.cu; the flash kernels, ops/attention_fused.cu and
 * ops/attention_fa_tc*.cu; the wgmma ones, ops/attention_sm90*.cu). Compiles
 * as C and as CUDA.
 *
 * Element idx of a draw (for attention idx = ((b H + h) T + i) T + j of the
 * [B, H, T, T] probabilities; elsewhere the element's flat index) is kept iff
 *
 *   u8(idx) >= thr,   thr = ceil(p 2^8)            (P(drop) = thr / 256)
 *   u8(idx) = byte (idx % 4) of word (idx % 16) / 4 of
 *             Philox4x32-7(counter offset + idx / 16, key seed)
 *
 * and a kept value is scaled by 256 / (256 - thr) (drop_scale), the inverse
 * of the rate it is kept at, so E[dropout(x)] = x exactly. Sixteen decisions
 * a Philox call: attention's mask has B H T^2 elements (134 M a layer at
 * BERT-large seq 512 bs 32), and in the tensor-core forward drawing them at
 * 24 bits an element cost about as much as the matrix products; add_norm's
 * forward drew two ten-round calls a 16-byte vector. So p is resolved to
 * 1/256, rounded up: p 0.1 drops at 26/256 = 0.1016. FlashAttention-2, which
 * PyTorch's fused attention runs, also resolves its keep rate to 8 bits
 * (floor((1 - p) 255), then scales by 1 / (1 - p): its expected output is off
 * by 0.2% at p 0.1; here the scale follows the rate actually drawn). p above 0
 * drops at 1/256 at least, p above 255/256 drops everything (scale 0). A draw
 * of n elements takes ceil(n / 16) counters (drop_blocks).
 *
 * The comparison of four bytes with thr runs in one word (drop_keep_word):
 * x >= thr for a byte x is a carry out of x + (256 - thr), so the low seven
 * bits of each byte are added with the bytes kept apart, and the carry out
 * of bit 7 is majority(x7, c7, carry into bit 7). The CPU and the GPU run that
 * same expression; tests/test_transformer_ops.c checks it against the byte
 * comparisons for every threshold.
 *
 * Seven Philox rounds, not the ten of the other draws (parameter init, the
 * synthetic data; engine/philox.h): ~14 wide multiplies a call at seven
 * rounds, and the draws bound the attention forward's integer pipe. Seven is
 * the fewest rounds Salmon et al. found to pass TestU01's BigCrush for
 * Philox4x32 (ten is their default, a margin of three), and what
 * FlashAttention-2 draws its mask with; a mask of keep bits at p 0.1 asks far
 * less of a generator than those batteries do.
 */
#ifndef CTRAIN_OPS_DROPOUT_MASK_H
#define CTRAIN_OPS_DROPOUT_MASK_H

#include <math.h>
#include <stdint.h>

#include "engine/philox.h"

/* thr for p: 0 (keep everything) when p <= 0, at most 256 (drop all). p 2^8
 * is exact in f32. */
CT_HD uint32_t drop_threshold(float p)
{
    if (!(p > 0.0f)) return 0u;
    const float t = ceilf(p * 256.0f);
    return t >= 256.0f ? 256u : (uint32_t)t;
}

/* The scale of a kept value: 1 / P(keep) = 256 / (256 - thr); 0 when nothing
 * is kept. */
CT_HD float drop_scale(float p)
{
    const uint32_t thr = drop_threshold(p);
    return thr >= 256u ? 0.0f : 256.0f / (float)(256u - thr);
}

/* Counters a draw of n elements takes. */
CT_HD uint64_t drop_blocks(uint64_t n) { return (n + 15) >> 4; }

/* The 4 keep bits of word x's bytes (bit e: byte e >= thr), 0 < thr < 256.
 * c = 256 - thr in every byte; y's bit 7 of each byte is the carry into that
 * byte's bit 7 from the low seven bits of x + c; the byte's carry out is
 * majority(x7, c7, y7). The four carries, at bits 7, 15, 23, 31, are moved to
 * bits 28 .. 31 by one product (each lands once there, the other partial
 * products at distinct bits below 28, so nothing carries) and shifted down. */
CT_HD unsigned drop_keep_word(uint32_t x, uint32_t thr)
{
    const uint32_t c = (256u - thr) * 0x01010101u;
    const uint32_t y = (x & 0x7F7F7F7Fu) + (c & 0x7F7F7F7Fu);
    const uint32_t k = ((x & c) | ((x ^ c) & y)) & 0x80808080u;
    return (unsigned)((k * 0x00204081u) >> 28);
}

/* The 16 keep bits of counter group g, elements 16 g .. 16 g + 15: bit e is
 * element 16 g + e. */
CT_HD unsigned drop_keep16(uint64_t seed, uint64_t offset, uint64_t g, uint32_t thr)
{
    if (thr == 0u) return 0xFFFFu;
    if (thr >= 256u) return 0u;
    uint32_t r[4];
    const uint64_t ctr = offset + g;
    philox4x32_7(r, (uint32_t)ctr, (uint32_t)(ctr >> 32), 0, 0, (uint32_t)seed,
                 (uint32_t)(seed >> 32));
    return drop_keep_word(r[0], thr) | drop_keep_word(r[1], thr) << 4 |
           drop_keep_word(r[2], thr) << 8 | drop_keep_word(r[3], thr) << 12;
}

/* The 8 keep bits of elements 8 h .. 8 h + 7 (half h % 2 of group h / 2): for
 * the kernels that take eight keys at a time (one Philox call each; the
 * sm90 forward takes sixteen, drop_keep16). */
CT_HD unsigned drop_keep8(uint64_t seed, uint64_t offset, uint64_t h, uint32_t thr)
{
    return (drop_keep16(seed, offset, h >> 1, thr) >> (8 * (unsigned)(h & 1))) & 0xFFu;
}

/* The keep bit of element idx (one Philox call: for one element alone). */
CT_HD int drop_keep_bit(uint64_t seed, uint64_t offset, uint64_t idx, uint32_t thr)
{
    return (int)((drop_keep16(seed, offset, idx >> 4, thr) >> (idx & 15)) & 1u);
}

#endif
