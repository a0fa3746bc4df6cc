/* attention_fused.h — scaled dot-product attention as one fused kernel per
 * pass (FlashAttention-2 style): the T x T scores never reach global memory.
 *
 * STATUS (branch flash-attn, first version, written without a GPU):
 *   done:      forward + backward kernels (plain f32 FMA from shared memory,
 *              no tensor cores yet), f32 / f16 / bf16 storage, Dh 32 / 64 /
 *              128, padding mask, Philox dropout with the exact mask of
 *              ops/attention.cu, rng_base, accumulate flags; wired into
 *              ops/attention_op.c behind CTRAIN_ATTN=fused (default cublas);
 *              tests/gpu_flash_attn.c.
 *   untested:  everything here compiles (make ARCH=90; sm_80 too, no
 *              spills) but has NOT run on a GPU. First:
 *                make -j2 ARCH=90 build/tests/gpu_flash_attn && build/tests/gpu_flash_attn
 *              then CTRAIN_FLASH_BENCH=1 for fused-vs-cublas timings. v1 is
 *              expected to be SLOWER than the cuBLASLt path (fp32 FMA, see
 *              ops/NOTES.md): it is the correct, readable base to optimise.
 *   next:      (1) run the test on a GPU, fix what it finds; (2) time it
 *              against the cuBLASLt path (T 128 / 512, BERT-base/large) and
 *              record it in ops/NOTES.md; (3) tensor cores: mma.sync (or
 *              nvcuda::wmma 16x16x16) for q k^T, P v, dS k, dS^T q, dPd =
 *              dout v^T; (4) one Philox call per group of four keys shared
 *              over lanes (now one call per element); (5) switch the
 *              default to fused once verified.
 *
 * Same contract and math as ops/attention.h (read it first). Shape letters:
 * B batch, H heads, T tokens, Dh head width; q, k, v, out, dq, dk, dv
 * [B, H, T, Dh] contiguous in dt; mask f32 [B, T] or NULL; lse f32 [B, H, T].
 *
 * Forward, for each query row i (online softmax over key tiles of 32):
 *   s_j   = scale q_i . k_j + mask[b, j],      scale = 1 / sqrt(Dh)
 *   m'    = max(m, max_j s_j),  c = exp(m - m')
 *   l     = l c + sum_j exp(s_j - m')                    (running sum, f32)
 *   acc   = acc c + sum_j keep_ij s_d exp(s_j - m') v_j   (running output, f32)
 *   out_i = acc / l,   lse_i = m + log(l)                (a row with every
 *           key at -inf: l = 0, out_i = 0, lse_i = -inf, gradients 0)
 *   keep_ij = philox(seed, offset + idx / 4)[idx % 4] >= p,
 *           idx = ((b H + h) T + i) T + j,  s_d = 1 / (1 - p)   (the
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
 * scratch, and the result is deterministic.
 *
 * Numerics differ from the cuBLASLt path only by rounding: that path rounds
 * P and Pd to dt before P v; here P stays f32 until out is rounded.
 */
#ifndef CTRAIN_OPS_ATTENTION_FUSED_H
#define CTRAIN_OPS_ATTENTION_FUSED_H

#include <stddef.h>
#include <stdint.h>
#include "../engine/ctx.h"
#include "../engine/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef CTRAIN_CUDA
/* 1 when the fused kernels handle this head width and dtype (Dh 32, 64, 128;
 * f32, f16, bf16); the op falls back to the cuBLASLt path otherwise. */
int attention_fused_supports(DType dt, size_t Dh);

/* out [B,H,T,Dh] in dt; lse f32 [B,H,T] (kept for the backward). Uses
 * c->stream and c->rng_base; allocates nothing. */
void attention_fused_forward_cuda(Ctx *c, void *out, float *lse, const void *q, const void *k,
                                  const void *v, const float *mask, DType dt, float p,
                                  uint64_t seed, uint64_t offset, size_t B, size_t H, size_t T,
                                  size_t Dh);
/* dq, dk, dv may be NULL; accum flags 0 write, 1 add. out and lse are the
 * forward's. Temporary: D f32 [B,H,T] from mem_alloc. */
void attention_fused_backward_cuda(Ctx *c, void *dq, void *dk, void *dv, const void *dout,
                                   const void *q, const void *k, const void *v, const void *out,
                                   const float *lse, const float *mask, DType dt, float p,
                                   uint64_t seed, uint64_t offset, size_t B, size_t H, size_t T,
                                   size_t Dh, int accum_q, int accum_k, int accum_v);
#endif

#ifdef __cplusplus
}
#endif
#endif
