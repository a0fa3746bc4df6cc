/* attention_fused.h — scaled dot-product attention as one fused kernel per
 * pass (FlashAttention-2 style): the T x T scores never reach global memory.
 *
 * Two implementations behind the same two calls:
 *   - tensor cores (ops/attention_fa_tc.cu, _bwd.cu, .cuh): f16 / bf16, Dh 32 / 64 / 128,
 *     sm_80+, every pointer 16-byte aligned. mma.sync m16n8k16 with f32
 *     accumulation, 64-row tiles, cp.async double buffering. The path for
 *     AMP training.
 *   - plain FMA in f32 math (ops/attention_fused.cu): f16 / bf16, the head
 *     widths above, any alignment, any sm. The fallback. (f32 storage has
 *     no fused kernel: the op runs it on the cuBLASLt path, which measured
 *     faster than these kernels did in f32; ops/attention_op.c.)
 * attention_fused_forward_cuda / _backward_cuda pick the first that applies
 * (attention_fa_tc_supports + alignment); both define lse identically, so a
 * forward of one and a backward of the other agree.
 *
 * Tests and timings (H200): docs/kernels.md, "attention, fused flash-style
 * kernels"; the kernel choice: attention_kernel_choose (ops/attention.h).
 *
 * Same contract and math as ops/attention.h (read it first). Shape letters:
 * B batch, H heads, T tokens, Dh head width; q, k, v, out, dq, dk, dv
 * [B, H, T, Dh] contiguous in dt; mask f32 [B, T] or NULL; lse f32 [B, H, T].
 *
 * The mask shift: M_b = max_j mask[b, j] (0 without a mask) is subtracted
 * from the mask row before it is added to the scores. Softmax is unchanged
 * (a constant per row), but the f32 scores stay exact when every key of a
 * batch row is padded (-10000 + scale q.k loses ~1e-3 in f32; 0 + scale q.k
 * does not). M_b = -inf (every key -inf): the row has no distribution, out
 * and all gradients are 0 and lse is -inf.
 *
 * Forward, for each query row i (online softmax over key tiles):
 *   s_j   = scale q_i . k_j + mask[b, j] - M_b,    scale = 1 / sqrt(Dh)
 *   m'    = max(m, max_j s_j),  c = exp(m - m')
 *   l     = l c + sum_j exp(s_j - m')                    (running sum, f32)
 *   acc   = acc c + sum_j keep_ij s_d exp(s_j - m') v_j   (running output, f32)
 *   out_i = acc / l,   lse_i = m + log(l)                (a row with every
 *           key at -inf: l = 0, out_i = 0, lse_i = -inf, gradients 0)
 *   so lse is the log-sum-exp of the SHIFTED scores:
 *           lse_i = log sum_j exp(scale q_i . k_j + mask[b, j]) - M_b.
 *   keep_ij = drop_keep_bit(seed, offset, idx, ceil(p 2^8)) (ops/dropout_mask.h),
 *           idx = ((b H + h) T + i) T + j,  s_d = drop_scale(p)   (the
 *           existing path's mask bit for bit; offset += *rng_base if set)
 * Backward (P recomputed from lse, never stored):
 *   P_ij  = exp(s_ij - lse_i),   Pd_ij = keep_ij s_d P_ij
 *   D_i   = rowsum(dout_i * out_i)  = rowsum_j(dPd_ij Pd_ij)   (precomputed)
 *   dPd_ij = dout_i . v_j,   dP_ij = keep_ij s_d dPd_ij
 *   dS_ij = P_ij (dP_ij - D_i)
 *   dv_j  = sum_i Pd_ij dout_i,   dk_j = scale sum_i dS_ij q_i,
 *   dq_i  = scale sum_j dS_ij k_j
 * dk/dv come from one kernel (a block owns key rows, loops over query
 * tiles) and dq from another (a block owns query rows, loops over key
 * tiles): P is recomputed twice, but there are no atomics, no f32 dq
 * scratch, and the result is deterministic (both implementations).
 *
 * Numerics differ from the cuBLASLt path only by rounding. The FMA kernels
 * keep P in f32 until out is rounded. The tensor-core kernels round P (the
 * unnormalised exp(s - m) in the forward) and dS to dt before their
 * products, as the cuBLASLt path rounds P, Pd and dS; and, as in every
 * flash backward, D is formed from out as stored in dt, so dS carries an
 * error ~ eps_dt P sum_e |dout_e out_e| (visible at T = 1, where the exact
 * dq and dk are 0).
 */
#ifndef CTRAIN_OPS_ATTENTION_FUSED_H
#define CTRAIN_OPS_ATTENTION_FUSED_H

#include <stddef.h>
#include <stdint.h>
#include "engine/ctx.h"
#include "engine/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The saved dropout mask (keep_out / keep_in below): 64-bit words
 * keep[B H T][W], W = ceil(T / 64); bit y of word w of flat query row
 * r = (b H + h) T + i is keep_{i, 64 w + y} (0 for keys past T). B H T^2 / 8
 * bytes, rounded up per row: 16 MiB at B 32, H 16, T 512. */
static inline size_t attention_keep_words(size_t B, size_t H, size_t T)
{
    return B * H * T * ((T + 63) / 64);
}

#ifdef CTRAIN_CUDA
/* out [B,H,T,Dh] in dt (f16 or bf16); lse f32 [B,H,T] (kept for the
 * backward; of the shifted scores, above); keep_out NULL, or attention_keep_words(B, H, T)
 * words, 8-byte aligned, that receive the dropout mask the forward applied
 * (written when p > 0 whichever kernel runs; untouched when p = 0). Uses
 * c->stream and c->rng_base; allocates nothing.
 * bthd 1: q, k, v, out (and in the backward dout, dq, dk, dv) are
 * [B, T, H, Dh] instead: what BERT's projections give after a reshape, with
 * no transpose into [B, H, T, Dh] and back. Tensor-core kernels only:
 * attention_fa_tc_supports(c, dt, Dh) must hold and every pointer be
 * 16-byte aligned (a fatal error otherwise; the op transposes instead).
 * lse, keep and the mask keep their [B, H, T] order, so the results equal
 * those of transposing in, a bthd 0 call, and transposing out, bit for bit. */
void attention_fused_forward_cuda(Ctx *c, void *out, float *lse, uint64_t *keep_out,
                                  const void *q, const void *k, const void *v, const float *mask,
                                  DType dt, float p, uint64_t seed, uint64_t offset, size_t B,
                                  size_t H, size_t T, size_t Dh, int bthd);
/* dq, dk, dv may be NULL; accum flags 0 write, 1 add. out and lse are the
 * forward's; keep_in NULL (the mask is drawn again from seed and offset),
 * or the forward's keep_out for the same call: the tensor-core kernels then
 * read it instead of drawing (the FMA kernels always draw: the same bits).
 * Temporary: D f32 [B,H,T] from mem_alloc, and the mask (as keep_out) when
 * the tensor-core kernels draw it. bthd as above. */
void attention_fused_backward_cuda(Ctx *c, void *dq, void *dk, void *dv, const void *dout,
                                   const void *q, const void *k, const void *v, const void *out,
                                   const float *lse, const float *mask, const uint64_t *keep_in,
                                   DType dt, float p, uint64_t seed, uint64_t offset, size_t B,
                                   size_t H, size_t T, size_t Dh, int accum_q, int accum_k,
                                   int accum_v, int bthd);

/* ---- the tensor-core kernels (ops/attention_fa_tc.cu) ----
 * Called by the two functions above when they apply; declared here for the
 * test. Same arguments and meaning; the backward takes D = rowsum(dout *
 * out) f32 [B,H,T] from the caller. Every pointer must be 16-byte aligned.
 * bthd: 0 for [B, H, T, Dh] tensors, 1 for [B, T, H, Dh] (above). */
/* 1 when dt is f16 / bf16, Dh is 32, 64 or 128, and c's device is sm_80+
 * with enough shared memory per block (sm_86 / sm_89: not for Dh 128). */
int attention_fa_tc_supports(const Ctx *c, DType dt, size_t Dh);
void attention_fa_tc_forward_cuda(Ctx *c, void *out, float *lse, uint64_t *keep_out,
                                  const void *q, const void *k, const void *v, const float *mask,
                                  DType dt, float p, uint64_t seed, uint64_t offset, size_t B,
                                  size_t H, size_t T, size_t Dh, int bthd);
void attention_fa_tc_backward_cuda(Ctx *c, void *dq, void *dk, void *dv, const void *dout,
                                   const void *q, const void *k, const void *v,
                                   const float *lse, const float *D, const float *mask,
                                   const uint64_t *keep_in, DType dt, float p, uint64_t seed,
                                   uint64_t offset, size_t B, size_t H, size_t T, size_t Dh,
                                   int accum_q, int accum_k, int accum_v, int bthd);
/* keep (attention_keep_words(B, H, T) words) = the dropout mask of p, seed,
 * offset (+ *c->rng_base when set), drawn by the backward's own kernel
 * (ops/attention_fa_tc_bwd.cu); nothing when p = 0. Any sm, any dtype: the
 * FMA forward fills keep_out with it. */
void attention_fa_tc_keep_bits_cuda(Ctx *c, uint64_t *keep, float p, uint64_t seed,
                                    uint64_t offset, size_t B, size_t H, size_t T);
#endif

#ifdef __cplusplus
}
#endif
#endif
