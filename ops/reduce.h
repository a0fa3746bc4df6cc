/* reduce.h — sum and mean over the last dimension (or over everything, R = 1).
 *
 * forward:  y[r] = scale * sum_c x[r,c]     (scale 1 for sum, 1/C for mean)
 * backward: dx[r,c] (+)= scale * dy[r]
 * Outputs and their gradients are f32 (reductions run in f32 under autocast);
 * x and dx have storage type dt on CUDA.
 */
#ifndef CTRAIN_OPS_REDUCE_H
#define CTRAIN_OPS_REDUCE_H

#include <stddef.h>
#include "engine/dtype.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

void reduce_sum_forward_cpu(float *y, const float *x, float scale, size_t R, size_t C);
void reduce_sum_backward_cpu(float *dx, const float *dy, float scale, size_t R,
                             size_t C, int accum);

#ifdef CTRAIN_CUDA
/* Deterministic: one fixed reduction order per (R, C), no atomics. */
void reduce_sum_forward_cuda(float *y, const void *x, DType dt, float scale, size_t R,
                             size_t C, cudaStream_t s);
void reduce_sum_backward_cuda(void *dx, DType dt, const float *dy, float scale,
                              size_t R, size_t C, int accum, cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif
#endif
