/* attention_sm90.h — fused attention on Hopper's wgmma (ops/attention_sm90.cu,
 * ops/attention_sm90_bwd.cu): head width 64, f16 / bf16, T a multiple of 64,
 * sm_90 built with sm_90a code. The contract and the math are those of
 * ops/attention_fused.h (read it first): the same lse of the shifted scores,
 * the same dropout mask bit for bit (ops/dropout_mask.h), the same saved
 * keep words; results differ from the other kernels only by rounding.
 *
 * Layout: q, k, v, out (and dout, dq, dk, dv) are [B, T, H, 64] views: head h
 * of token t of batch b at (b T + t) ld + 64 h. q, k, v, dq, dk, dv use the
 * token stride ld_in (3 H 64 for the thirds of one q/k/v projection and its
 * gradient, H 64 for separate tensors), out and dout ld_out. lse, the mask and
 * keep words keep the [B, H, T] order. Every pointer 16-byte aligned, ld_in and
 * ld_out multiples of 8.
 *
 * Backward (P recomputed, never stored; 7 matrix products, no atomics, so
 * bit-identical reruns):
 *   dq kernel    a block owns 64 query rows, streams K and V: S = Q K^T,
 *                dP = dO V^T, dS = P (keep s_d dP - D), dQ += dS K; it draws
 *                the dropout bits (as the forward does) and leaves them in a
 *                temporary for
 *   dkdv kernel  a block owns 64 key rows, streams Q, dO, lse, D and the bits:
 *                S^T = K Q^T, dP^T = V dO^T, dV += Pd^T dO, dK += dS^T Q;
 *                in its cluster form (attention_sm90_tune_dq) it also gives
 *                dQ_i = sum_j dS_ij K_j, the T / 64 blocks of a head summing
 *                their shares in a fixed order through distributed shared
 *                memory (5 matrix products, no dq kernel; still no atomics).
 * D = rowsum(dout * out) f32 [B, H, T] comes first: the dq kernel makes it for
 * its rows before its loop; in the cluster form each block makes a query
 * tile's before a cluster barrier; with dk and dv alone a kernel of its own.
 */
#ifndef CTRAIN_OPS_ATTENTION_SM90_H
#define CTRAIN_OPS_ATTENTION_SM90_H

#include <stddef.h>
#include <stdint.h>
#include "engine/ctx.h"
#include "engine/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef CTRAIN_CUDA
/* 1 when the kernels run for this call on c's device: sm_90 with the build's
 * sm_90a code, dt f16 / bf16, Dh 64, T % 64 == 0, 0 < B H <= 65535 */
int attention_sm90_supports(const Ctx *c, DType dt, size_t B, size_t H, size_t T, size_t Dh);

/* out in dt, lse f32 [B, H, T]; keep_out NULL or attention_keep_words(B, H, T)
 * words receiving the mask applied (p > 0); bits_out NULL or the same number
 * of words receiving it in the backward's order, [B H][T / 64][T] (for
 * attention_sm90_backward's bits_in). seed, offset (+ *c->rng_base in a
 * captured step) as ops/attention_fused.h. */
void attention_sm90_forward(Ctx *c, void *out, float *lse, uint64_t *keep_out,
                            uint64_t *bits_out, const void *q,
                            const void *k, const void *v, const float *mask, DType dt, float p,
                            uint64_t seed, uint64_t offset, size_t B, size_t H, size_t T,
                            size_t ld_in, size_t ld_out);

/* The forward's block: fwd_wgs warpgroups of 64 query rows (2, the default:
 * K and V tiles shared by both; 1: no barrier between warpgroups). For the
 * kernels' A/B (tests/gpu_attention_sm90 --bench); not thread-safe. */
void attention_sm90_tune(int fwd_wgs);

/* Where the backward computes dq: -1 as CTRAIN_ATTN_SM90_DQ says (the
 * default), 0 its own kernel, 1 inside the dkdv kernel's clusters (when dq,
 * dk and dv are all wanted, T <= 512 and, with p > 0, bits_in is given; else
 * the kernel). For the tests and the kernels' A/B; not thread-safe. */
void attention_sm90_tune_dq(int mode);

/* dq, dk, dv written (not added), each NULL to skip (dk and dv together);
 * out and lse the forward's, the same seed and offset; bits_in NULL (the dq
 * kernel draws the mask again) or the forward's bits_out. Temporaries from
 * mem_alloc: D, and the mask's bits (B H T^2 / 8 bytes) when p > 0 and
 * bits_in is NULL. */
void attention_sm90_backward(Ctx *c, void *dq, void *dk, void *dv, const void *dout,
                             const void *q, const void *k, const void *v, const void *out,
                             const float *lse, const float *mask, DType dt, float p,
                             uint64_t seed, uint64_t offset, size_t B, size_t H, size_t T,
                             size_t ld_in, size_t ld_out, const uint64_t *bits_in);
#endif

#ifdef __cplusplus
}
#endif

#endif
