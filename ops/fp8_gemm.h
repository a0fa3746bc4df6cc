/* fp8_gemm.h — the FP8 matrix product through cuBLASLt (ops/fp8_gemm.c),
 * and its CPU reference, in row-major terms:
 *
 *   D[M, N] = alpha * (A[M, K] · B[N, K]^T) + beta * D[M, N]
 *   alpha   = a_scale_inv * b_scale_inv
 *
 * Shape letters: M rows of D, N columns of D, K the reduced length.
 *
 * Operands: A and B are FP8 codes (ops/fp8.h), row-major with K contiguous:
 * each row of A and each row of B is K bytes. That is the one layout
 * Hopper's and Ada's FP8 kernels read (cuBLASLt's "TN", see fp8_gemm.c), so
 * a product with the reduced index running along columns needs the
 * transposed operand first (fp8_cast_transpose_cuda). For a Linear layer
 * y = x w^T with x [R, In], w [Out, In], dy [R, Out]:
 *   forward  y  [R, Out]  = x_q    [R, In]   · w_q   [Out, In]^T
 *   dgrad    dx [R, In]   = dy_q   [R, Out]  · w_q^T [In, Out]^T
 *   wgrad    dw [Out, In] = dy_q^T [Out, R]  · x_q^T [In, R]^T
 * Formats: E4M3 or E5M2 each, not both E5M2 (cuBLASLt has no E5M2 x E5M2
 * kernel; refused with ct_fatal). Forward is E4M3 x E4M3, the gradient
 * GEMMs E5M2 (dy) x E4M3.
 *
 * Sizes and alignment: M, N and K positive multiples of 16 (the caller
 * pads), A, B and D on 16-byte boundaries: cuBLASLt's FP8 requirements.
 * Anything else is a ct_fatal naming the call.
 *
 * Scales: a_scale_inv and b_scale_inv point to one f32 each in DEVICE
 * memory, each 16-byte aligned (cuBLASLt refuses other addresses at the
 * launch; the recipe spaces its scale_invs so, ops/fp8_recipe.h) (the
 * scale_inv of each operand's scaled cast, ops/fp8.h), read by
 * the kernel when it runs, so a captured CUDA graph uses each step's
 * values. They must stay at those addresses while a graph replays.
 *
 * Output: D is bf16 or f32 (dt), row-major [M, N]; beta (a host value)
 * scales D's previous content, and beta 0 does not read D (it may hold
 * NaN). An f32 D with beta 1 accumulates into a gradient buffer.
 *
 * Bias (the Linear forward's y = x w^T + b in one pass over y): with a bf16
 * D, a bias vector of N bf16 values may be added to every row in the
 * GEMM's epilogue, before D is rounded to bf16:
 *   D[m, n] = alpha * (A B^T)[m, n] + beta * D[m, n] + bias[n]
 * cuBLASLt's BIAS epilogue. Its vector runs along cuBLASLt's D rows, which
 * are our D's columns (the row-major onto column-major mapping of
 * fp8_gemm.c), so bias[n] lands on our column n. The vector's type is D's
 * for a bf16 D ("bias vector elements are the same type as the elements of
 * output matrix", FP8 output types and f32 being the exceptions: cublasLt.h,
 * CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), set explicitly to CUDA_R_16BF. No
 * algorithm with the epilogue is a refusal the caller handles (the plain
 * GEMM and a separate add), not an error.
 * Accumulation is f32 (CUBLAS_COMPUTE_32F, scale type f32) with cuBLASLt's
 * fast accumulation off (CUBLASLT_MATMUL_DESC_FAST_ACCUM = 0) unless the
 * caller asks for it: the FP8 tensor cores sum products with fewer bits
 * than f32 (about 14 significant bits on Hopper), and with fast
 * accumulation off the kernel moves the partial sums into f32 registers
 * every few MMA steps, so the error does not grow with K; fast accumulation
 * skips that, faster and less accurate (its error grows with K / 32, the
 * MMA steps: Transformer Engine takes it for the forward GEMM only).
 *
 * Plans: the descriptors, layouts and algorithm of each (handle, shape,
 * formats, output type, beta != 0, alignments, workspace) are built on the
 * first call and kept; later calls are one lookup, setting the two scale
 * pointers on the cached descriptor and one cublasLtMatmul: no allocation,
 * no sync, safe inside CUDA graph capture once each shape has run before
 * capture. The cache is a process global (this function takes no Ctx),
 * used by one host thread at a time, and lives until
 * fp8_gemm_cache_clear; fp8_gemm_cache_attach ties it to a context, whose
 * ctx_free then clears it before the cuBLASLt handle goes (engine/ctx.h's
 * caches, as matmul_plan_cache_get's).
 */
#ifndef CTRAIN_OPS_FP8_GEMM_H
#define CTRAIN_OPS_FP8_GEMM_H

#include <stdint.h>

#include "engine/dtype.h"
#include "fp8.h"
#ifdef CTRAIN_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The CPU reference: D[m, n] = a_scale_inv * b_scale_inv * sum_k
 * fp8_to_f32(A[m, k]) * fp8_to_f32(B[n, k]) + beta * D[m, n], summed and
 * scaled in double, rounded to f32 once; beta 0 does not read D. */
void fp8_gemm_ref(float *D, const uint8_t *A, Fp8Format af, float a_scale_inv, const uint8_t *B,
                  Fp8Format bf, float b_scale_inv, int M, int N, int K, float beta);

#ifdef CTRAIN_CUDA
/* D = (*a_scale_inv) (*b_scale_inv) A B^T + beta D [+ bias] on `stream`
 * (see the top of the file), with up to workspace_bytes of `workspace`
 * (NULL: none). bias: NULL, or N bf16 values on the device, 2-byte aligned,
 * with a bf16 D only. fast_accum: 1 takes cuBLASLt's fast accumulation
 * (above). Returns 0 when D holds the result; 1 when cuBLASLt
 * has no algorithm for this shape, these formats and alignments (said once
 * when the plan is made: on stderr as an error without a bias, in the log
 * with one), D untouched: the caller falls back or stops. */
int fp8_gemm_cuda(cublasLtHandle_t lt, void *workspace, size_t workspace_bytes,
                  cudaStream_t stream, void *D, DType dt, const uint8_t *A, Fp8Format af,
                  const float *a_scale_inv, const uint8_t *B, Fp8Format bf,
                  const float *b_scale_inv, const void *bias, int fast_accum, int M, int N,
                  int K, float beta);

/* Destroy every cached plan (before the handles they were made for go). */
void fp8_gemm_cache_clear(void);
/* Register the cache with c (once; later calls do nothing): ctx_free(c)
 * clears it. */
struct Ctx;
void fp8_gemm_cache_attach(struct Ctx *c);
#endif

#ifdef __cplusplus
}
#endif
#endif
