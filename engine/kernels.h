/* kernels.h — the three device kernels the engine launches itself, each one
 * elementwise map (engine/map_kernel.cuh):
 *
 *   fill:   y[i] = value                  the loss gradient's seed, a device
 *                                         scalar (autograd.c, mem.c)
 *   scale:  y[i] (+)= alpha * x[i]         the seed read from the device
 *                                         (ad_backward_dev, autograd.c)
 *   cast:   y[i] (+)= x[i], converted      the parameters' f16/bf16 working
 *                                         copy (params.c)
 *
 * Shape letter: n elements. The ops use them as well: scale is also the
 * backward of add, and the elementwise ops' header (ops/elementwise.h) pulls
 * this one in; scale's CPU reference, scale_forward_cpu, stays there with
 * the other ops'. The engine's own CPU paths write their few values
 * directly.
 *
 * Types: f32, f16 or bf16 (for cast, y and x independently). A value is
 * computed in f32 and rounded once, to nearest even, to y's type; with
 * accum, y's old value is added in f32 before that rounding. A cast between
 * equal types without accum is a device-to-device copy. Every launch is
 * queued on the stream s.
 */
#ifndef CTRAIN_ENGINE_KERNELS_H
#define CTRAIN_ENGINE_KERNELS_H

#include <stddef.h>
#include "dtype.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#ifdef CTRAIN_CUDA
/* y[i] = value (type dt) for i < n */
void fill_cuda(void *y, DType dt, float value, size_t n, cudaStream_t s);
/* y (+)= alpha * x, both of type dt; also the backward of add and scale:
 * dx (+)= alpha * dy */
void scale_forward_cuda(void *y, const void *x, float alpha, DType dt, size_t n,
                        int accum, cudaStream_t s);
/* y (type ty) = x (type tx), round to nearest even; any pair of f32/f16/bf16.
 * With accum, y += x (converted). */
void cast_cuda(void *y, DType ty, const void *x, DType tx, size_t n, int accum,
               cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif
#endif
