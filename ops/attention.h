/* attention.h — scaled dot-product attention with an additive key mask and
 * dropout on the probabilities (BERT self-attention, after the Q/K/V
 * projections and the head split).
 *
 * Shape letters: B batch, H heads, T tokens (queries = keys), Dh head width.
 * q, k, v, out are [B, H, T, Dh] contiguous; mask is f32 [B, T] (or NULL);
 * the probabilities P are [B, H, T, T].
 *
 *   S[b,h,i,j] = scale * sum_e q[b,h,i,e] k[b,h,j,e] + mask[b,j],  scale = 1/sqrt(Dh)
 *   P[b,h,i,:] = softmax_j(S[b,h,i,:])                          (f32 math)
 *   keep       = drop_keep_bit(seed, offset, idx, ceil(p 2^8)),  idx = ((b H + h) T + i) T + j
 *                (ops/dropout_mask.h: 8 Philox bits an element, sixteen a call)
 *   Pd         = keep ? P * s : 0,  s = 256 / (256 - ceil(p 2^8))  (drop_scale)
 *   out        = Pd v
 * backward (the mask is regenerated from (seed, offset), never stored):
 *   dv  = Pd^T dout
 *   dPd = dout v^T
 *   dP  = keep ? dPd * s : 0
 *   dS  = P * (dP - rowsum(dP * P))        and rowsum(dP * P) = rowsum(dPd * Pd)
 *   dq  = scale * dS k,   dk = scale * dS^T q
 * The mask is additive: 0 for real tokens, a large negative (-10000, as
 * BERT) or -inf for padding keys. A query row whose keys are all -inf has
 * no distribution: its P row is defined as 0 (output 0, gradients 0) rather
 * than NaN.
 *
 * What the forward keeps for the backward: P (pre-dropout), [B, H, T, T] in
 * the compute type. The dropout mask costs nothing (Philox); Pd is rebuilt
 * from P when the backward needs it. A flash-style kernel would keep the
 * row log-sum-exp [B, H, T] f32 instead and recompute P tile by tile; the
 * op layer (ops/attention_op.c) hides that choice behind two functions.
 */
#ifndef CTRAIN_OPS_ATTENTION_H
#define CTRAIN_OPS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>
#include "engine/ctx.h"
#include "engine/dtype.h"
#include "engine/tensor.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CPU reference (f32 in and out; dot products and row sums in double) ---- */
/* out [B,H,T,Dh]; probs [B,H,T,T] gets P (pre-dropout); mask may be NULL */
void attention_forward_cpu(float *out, float *probs, const float *q, const float *k,
                           const float *v, const float *mask, float p, uint64_t seed,
                           uint64_t offset, size_t B, size_t H, size_t T, size_t Dh);
/* dq, dk, dv may be NULL; accum flags as everywhere (0 write, 1 add) */
void attention_backward_cpu(float *dq, float *dk, float *dv, const float *dout,
                            const float *q, const float *k, const float *v,
                            const float *probs, float p, uint64_t seed, uint64_t offset,
                            size_t B, size_t H, size_t T, size_t Dh, int accum_q,
                            int accum_k, int accum_v);

#ifdef CTRAIN_CUDA
/* ---- CUDA (dt = storage type of q, k, v, out, probs and their gradients) ----
 * The whole forward / backward: cuBLASLt batched matmuls (batch B*H) around
 * the fused row kernels below. Temporaries come from mem_alloc (the
 * context's stream-ordered pool): forward S [B,H,T,T] f32 and, with p > 0,
 * Pd in dt; backward dP in dt and, with p > 0, Pd in dt. */
void attention_forward_cuda(Ctx *c, void *out, void *probs, const void *q, const void *k,
                            const void *v, const float *mask, DType dt, float p,
                            uint64_t seed, uint64_t offset, size_t B, size_t H, size_t T,
                            size_t Dh);
void attention_backward_cuda(Ctx *c, void *dq, void *dk, void *dv, const void *dout,
                             const void *q, const void *k, const void *v, const void *probs,
                             DType dt, float p, uint64_t seed, uint64_t offset, size_t B,
                             size_t H, size_t T, size_t Dh, int accum_q, int accum_k,
                             int accum_v);

/* The fused row kernels. Forward, one row of S per warp:
 *   probs = softmax(scale * S + mask[b]),  pd = dropout(probs as stored)
 * (pd may be NULL when p = 0). S is f32 [B*H*T, T]. pd is rounded from the
 * stored probs, so the backward's attention_dropout_cuda(probs) rebuilds it
 * bit for bit. */
void attention_softmax_forward_cuda(void *probs, void *pd, const float *S,
                                    const float *mask, DType dt, float scale, float p,
                                    uint64_t seed, uint64_t offset, const uint64_t *rng_base,
                                    size_t B, size_t H, size_t T, cudaStream_t s);
/* Backward through dropout and softmax, one row per warp:
 *   dS = P * (keep ? dPd * s : 0) - P * rowsum(dPd * Pd)
 * dS may alias dPd (each row is read whole before it is written). */
void attention_softmax_backward_cuda(void *dS, const void *dPd, const void *probs, DType dt,
                                     float p, uint64_t seed, uint64_t offset,
                                     const uint64_t *rng_base, size_t rows, size_t T,
                                     cudaStream_t s);
/* pd = keep ? probs * s : 0 over n elements with attention's mask (the
 * flat index is the element's): the forward's pd from its stored probs. */
void attention_dropout_cuda(void *pd, const void *probs, DType dt, float p, uint64_t seed,
                            uint64_t offset, const uint64_t *rng_base, size_t n, cudaStream_t s);
#endif

/* ---- the kernel choice (ops/attention_op.c) ----
 * Which kernels run an attention op: decided in one place,
 * attention_kernel_choose, that both ops below call once per call. */
typedef enum AttnKernel {
    ATTN_KERNEL_CPU,        /* the CPU reference above (ops/attention.c) */
    ATTN_KERNEL_CUBLAS,     /* cuBLASLt around the row kernels (ops/attention.cu); keeps P */
    ATTN_KERNEL_FLASH,      /* the fused kernels (ops/attention_fused.h) on [B, H, T, Dh];
                             * keeps the row log-sum-exp instead of P */
    ATTN_KERNEL_FLASH_BTHD, /* the fused tensor-core kernels reading [B, T, H, Dh] in place */
} AttnKernel;

/* The kernel for q, k, v of compute type dt (after autocast), head width
 * Dh and BH = B H heads on c's device. bthd: q, k, v come as [B, T, H, Dh];
 * aligned: each is 16-byte aligned in dt (read only with bthd). Anything
 * but ATTN_KERNEL_FLASH_BTHD runs on [B, H, T, Dh], so the bthd op
 * transposes into that layout first. CPU: ATTN_KERNEL_CPU. CUDA: the flash
 * kernels wherever the tensor-core ones run (attention_fa_tc_supports, BH
 * <= 65535), else ATTN_KERNEL_CUBLAS; CTRAIN_ATTN=cublas forces the
 * latter (a developer's A/B switch). CTRAIN_ATTN=cudnn is decided before
 * this, in the op (ops/attention_cudnn.h): where cuDNN takes the shape, its
 * fused engines run; where it declines, this choice. */
AttnKernel attention_kernel_choose(const Ctx *c, DType dt, size_t Dh, size_t BH, int bthd,
                                   int aligned);

/* CTRAIN_ATTN's libraries asked before that choice, in this order: ctrain's
 * wgmma kernels (ops/attention_sm90.h) where they take the call (sm90, auto),
 * then cuDNN's fused attention where it plans it (cudnn, auto). */
int attention_path_sm90(void);
int attention_path_cudnn(void);

#ifdef CTRAIN_CUDA
/* 1 unless CTRAIN_ATTN_SAVE_MASK=0: the op has the flash forward save the
 * dropout mask for the backward (keep_out / keep_in of
 * ops/attention_fused.h; B H T^2 / 8 bytes a layer held from forward to
 * backward, in return for the backward's draw of the mask). Default 1
 * (unset, empty or 1). Read once and cached; attention_fused_save_mask_reread
 * drops the cache (tests). */
int attention_fused_save_mask(void);
void attention_fused_save_mask_reread(void);
#endif

/* ---- tensor ops (ops/attention_op.c) ----
 * q, k, v [B, H, T, Dh] of one float type (f32 inputs are cast to the
 * autocast type when autocast is on); mask f32 [B, T] or NULL; out has the
 * compute type. dropout_p > 0 draws drop_blocks(B*H*T*T) counter blocks
 * from the context (applied also in no-grad mode, as op_dropout; eval
 * passes 0). op_attention_at takes an explicit (seed, offset). */
Tensor *op_attention(Ctx *c, Tensor *q, Tensor *k, Tensor *v, Tensor *mask, float dropout_p);
/* What the attention ops share (ops/attention_op.c): the key mask (f32 [B, T],
 * on c's device, not freed) and the dropout p checked for input x (named in
 * the messages of op); and the Philox offset a call draws from, B H T T
 * mask elements, when dropout_p > 0 (else the context's offset, nothing drawn). */
void attention_check_mask_p(Ctx *c, const char *op, const char *xname, const Tensor *x,
                            const Tensor *mask, size_t B, size_t T, float dropout_p);
uint64_t attention_rng_take(Ctx *c, uint64_t B, uint64_t H, uint64_t T, float dropout_p);
Tensor *op_attention_at(Ctx *c, Tensor *q, Tensor *k, Tensor *v, Tensor *mask,
                        float dropout_p, uint64_t seed, uint64_t offset);
/* The same with q, k, v and out [B, T, H, Dh]: what a projection [B, T,
 * H*Dh] gives after a reshape, so BERT splits and merges its heads with no
 * transpose. The fused tensor-core kernels read and write that layout
 * (ATTN_KERNEL_FLASH_BTHD: attention_fa_tc_supports, 16-byte aligned data);
 * elsewhere (CPU, f32, CTRAIN_ATTN=cublas, unaligned data) the op transposes
 * in and out around the [B, H, T, Dh] path. Same dropout draw and the same
 * values as op_attention on the transposed tensors, bit for bit. */
Tensor *op_attention_bthd(Ctx *c, Tensor *q, Tensor *k, Tensor *v, Tensor *mask,
                          float dropout_p);
Tensor *op_attention_bthd_at(Ctx *c, Tensor *q, Tensor *k, Tensor *v, Tensor *mask,
                             float dropout_p, uint64_t seed, uint64_t offset);
/* The same from one projection qkv [B, T, 3 H Dh] (q, k, v each [H, Dh] a
 * token, in that order: x Wqkv^T + bqkv with Wqkv = [Wq; Wk; Wv]), read in
 * place; out [B, T, H, Dh]; the gradient written into dqkv at q, k, v's
 * places (ops/attention_qkv_op.c). The same dropout draw as
 * op_attention_bthd. On CUDA only where op_attention_qkv_supported answers
 * 1 (cuDNN's attention reading the 3 H Dh stride); always on the CPU. */
int op_attention_qkv_supported(Ctx *c, DType dt, int64_t B, int64_t T, int heads, int64_t Dh,
                               const Tensor *mask, float dropout_p);
Tensor *op_attention_qkv(Ctx *c, Tensor *qkv, int heads, Tensor *mask, float dropout_p);
Tensor *op_attention_qkv_at(Ctx *c, Tensor *qkv, int heads, Tensor *mask, float dropout_p,
                            uint64_t seed, uint64_t offset);

#ifdef __cplusplus
}
#endif
#endif
