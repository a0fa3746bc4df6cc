/* gather.h — gathering rows of a matrix by index, and its backward.
 *
 *   forward:   y[i, :] = x[idx[i], :]          x [R, D], idx i32 [n], y [n, D]
 *   backward:  dx[idx[i], :] += dy[i, :]       (rows not gathered get 0)
 * Used for BERT's [CLS] rows (pooler) and, in the MLM head, to run the
 * vocabulary projection only on the masked positions. Indices must be
 * distinct (checked on the CPU; the GPU backward relies on it: each dx row
 * is written by at most one thread block, so no atomics are needed).
 */
#ifndef CTRAIN_OPS_GATHER_H
#define CTRAIN_OPS_GATHER_H

#include <stddef.h>
#include <stdint.h>
#include "engine/ctx.h"
#include "engine/tensor.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

void gather_rows_cpu(float *y, const float *x, const int32_t *idx, size_t n, size_t D);
/* dx must already hold its base values (zeros, or the gradient to add to) */
void gather_rows_backward_cpu(float *dx, const float *dy, const int32_t *idx, size_t n, size_t D);
#ifdef CTRAIN_CUDA
void gather_rows_cuda(void *y, const void *x, DType dt, const int32_t *idx, size_t n, size_t D,
                      cudaStream_t s);
void gather_rows_backward_cuda(void *dx, const void *dy, DType dt, const int32_t *idx, size_t n,
                               size_t D, cudaStream_t s);
#endif

/* x [..., D] viewed as [R, D]; idx i32 [n] on the same device -> [n, D] */
Tensor *op_gather_rows(Ctx *c, Tensor *x, Tensor *idx);

#ifdef __cplusplus
}
#endif
#endif
