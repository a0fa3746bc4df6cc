/* permute.h — swapping the two middle dims of a 4-D tensor, and reshape.
 *
 *   transpose12:  y[a, c, b, d] = x[a, b, c, d]      x [A, B, C, D] -> y [A, C, B, D]
 *   backward:     dx[a, b, c, d] (+)= dy[a, c, b, d]   (the same permutation back)
 * BERT needs it to go from [B, T, H, Dh] (what a linear layer produces) to
 * [B, H, T, Dh] (one matrix per head for the attention matmuls) and back.
 *
 * reshape is a view: same data, new shape (contiguous row-major, so any
 * shape with the same element count); the view holds the input's data
 * alive. Its gradient is the incoming gradient added into the input's.
 */
#ifndef CTRAIN_OPS_PERMUTE_H
#define CTRAIN_OPS_PERMUTE_H

#include <stddef.h>
#include "engine/ctx.h"
#include "engine/tensor.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

void transpose12_cpu(float *y, const float *x, size_t A, size_t B, size_t C, size_t D, int accum);
#ifdef CTRAIN_CUDA
void transpose12_cuda(void *y, const void *x, DType dt, size_t A, size_t B, size_t C, size_t D,
                      int accum, cudaStream_t s);
#endif

Tensor *op_transpose12(Ctx *c, Tensor *x);
Tensor *op_reshape(Ctx *c, Tensor *x, int ndim, const int64_t *shape);

#ifdef __cplusplus
}
#endif
#endif
