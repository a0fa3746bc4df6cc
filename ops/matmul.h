/* matmul.h — batched matrix product, row-major.
 *
 *   C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b],   b = 0 .. batch-1
 *   op(A) is M x K (A stored K x M when transA), op(B) is K x N (B stored
 *   N x K when transB), C is M x N. Every matrix is contiguous; batch strides
 *   sA, sB, sC are in elements (0 broadcasts one matrix over the batch).
 *   beta 0 means C is not read (it may hold garbage or NaN).
 *
 * CPU: a cache-blocked loop nest with OpenMP over (batch, row blocks), f32.
 * CUDA: cuBLASLt. Row-major C = A B is column-major C^T = B^T A^T, so the
 * launcher swaps the operands instead of transposing anything. Accumulation
 * is f32 always; `allow_tf32` lets f32 inputs use TF32 tensor cores.
 * Types: A and B share a type in {f32, f16, bf16}; C is that type or f32.
 *
 * matmul_cuda_bias also adds a bias vector in cuBLASLt's epilogue, before
 * C is rounded to its type and without a second pass over C:
 *   C[i][j] = op(A) op(B)[i][j] + bias[j]     (bias [N], alpha 1, beta 0)
 * bias has C's type (cuBLASLt's rule for non-fp8, non-integer GEMMs).
 *
 * matmul_cuda_bgrad sums op(A) over K in the same GEMM (cuBLASLt's BGRADB
 * epilogue, on its B operand, which is our A):
 *   C = op(A) op(B) + beta C,    bgrad[i] = sum_k op(A)[i][k]   (i < M)
 * The Linear weight gradient dw = dy^T x (A = dy, transA) thereby also
 * gives the bias gradient sum_r dy[r] without reading dy again. bgrad has
 * C's type (cuBLASLt's rule), so it is only asked for with an f32 C, and it
 * is written, never added to.
 */
#ifndef CTRAIN_OPS_MATMUL_H
#define CTRAIN_OPS_MATMUL_H

#include <stddef.h>
#include "engine/dtype.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#include <cublasLt.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

void matmul_cpu(float *C, const float *A, const float *B, int M, int N, int K,
                int transA, int transB, float alpha, float beta, int batch,
                long long sA, long long sB, long long sC);

/* Row strides, in elements, of A, B and C as stored (the leading dimension
 * of each row-major buffer), for a matrix that is the left block of a wider
 * one; 0 means packed (the stored row length: K or M for A, N or K for B,
 * N for C). NULL for all three packed. op_linear_pad's weight gradient
 * reads BERT's logit gradients this way: 30,522 vocabulary columns of rows
 * 30,528 apart, in place (ops/matmul_op.c). One matrix only (batch 1); the
 * CPU matmul has none. */
typedef struct MatmulLd {
    int a, b, c;
} MatmulLd;

#ifdef CTRAIN_CUDA
/* Per-shape cache of cuBLASLt descriptors and the chosen algorithm, so the
 * heuristic query runs once per shape, not once per call. */
typedef struct MatmulPlanCache MatmulPlanCache;
MatmulPlanCache *matmul_plan_cache_new(void);
void matmul_plan_cache_free(MatmulPlanCache *c);
/* The context's plan cache (engine/ctx.h's Ctx, named by its tag so this
 * header needs nothing of the context): made on the context's first matmul
 * and registered with it (ctx_cache_set), so ctx_free frees it. */
struct Ctx;
MatmulPlanCache *matmul_plan_cache_get(struct Ctx *c);

/* A matmul descriptor: compute type, f32 scale type, cuBLASLt's transposes
 * (op_a applies to its A, which is our B), alpha and beta host pointers. */
cublasLtMatmulDesc_t matmul_lt_desc(cublasComputeType_t compute, int32_t op_a, int32_t op_b);

/* The heuristic query's preference for a row-major C = A B mapped onto
 * cuBLASLt (its A is our B): the workspace, the reduction schemes (with an
 * f16/bf16 C only the f32 one, so split-K keeps the f32 accumulation) and
 * the operands' alignments in bytes. The caller destroys it. */
cublasLtMatmulPreference_t matmul_lt_preference(uint64_t workspace_bytes, int c_is_f32,
                                                uint32_t align_a, uint32_t align_b,
                                                uint32_t align_c);

void matmul_cuda(cublasLtHandle_t lt, MatmulPlanCache *cache, void *workspace,
                 size_t workspace_bytes, cudaStream_t s,
                 void *C, DType tc, const void *A, const void *B, DType tab,
                 int M, int N, int K, int transA, int transB, float alpha, float beta,
                 int batch, long long sA, long long sB, long long sC, int allow_tf32,
                 const MatmulLd *ld);

/* C = op(A) op(B) with bias[j] added to every row of C in the GEMM's
 * epilogue: alpha 1, beta 0, one matrix (batch 1); tbias must equal tc.
 * Returns 1 when the bias is in C. Returns 0 when it is not, C holding
 * op(A) op(B) alone for the caller to add the bias to: bias NULL, a matrix
 * with one row or column (M, N or K = 1), or no cuBLASLt epilogue
 * algorithm for this shape and these alignments. */
int matmul_cuda_bias(cublasLtHandle_t lt, MatmulPlanCache *cache, void *workspace,
                     size_t workspace_bytes, cudaStream_t s,
                     void *C, DType tc, const void *A, const void *B, DType tab,
                     const void *bias, DType tbias, int M, int N, int K, int transA,
                     int transB, int allow_tf32);

/* C = op(A) op(B) + beta C (alpha 1, one matrix) and bgrad (M floats of C's
 * type, overwritten) = the row sums of op(A), in one GEMM. Returns 1 when
 * bgrad holds them; 0 when the plain GEMM ran and bgrad is untouched: C
 * not f32, bgrad NULL, M, N or K = 1, or no cuBLASLt algorithm with the
 * epilogue for this shape and these alignments. */
int matmul_cuda_bgrad(cublasLtHandle_t lt, MatmulPlanCache *cache, void *workspace,
                      size_t workspace_bytes, cudaStream_t s,
                      void *C, DType tc, const void *A, const void *B, DType tab, void *bgrad,
                      int M, int N, int K, int transA, int transB, float beta, int allow_tf32,
                      const MatmulLd *ld);

/* Plans of the cache that run an epilogue (tests: was it taken?). */
void matmul_plan_cache_epilogues(const MatmulPlanCache *c, int *bias_plans, int *bgrad_plans);
/* Plans whose algorithm was timed (CTRAIN_GEMM_SEARCH=1, ops/matmul_search.h)
 * and plans whose algorithm was taken from the plan store instead. */
void matmul_plan_cache_counts(const MatmulPlanCache *c, int *searched, int *loaded);
#endif

#ifdef __cplusplus
}
#endif
#endif
