/* softmax.h — softmax over the last dim, and fused log-softmax + cross-entropy.
 *
 * Shapes: R rows, C classes (last dim). Math in f32 whatever the storage.
 *
 * softmax:  y[r,c] = exp(x[r,c] - m_r) / sum_j exp(x[r,j] - m_r),  m_r = max_j x[r,j]
 *   backward: dx[r,c] (+)= y[r,c] * (dy[r,c] - sum_j dy[r,j] y[r,j])
 *
 * cross-entropy with ignore_index and label smoothing eps (PyTorch semantics):
 *   lse_r = log sum_j exp(x[r,j]);  logp[r,c] = x[r,c] - lse_r
 *   q_r = (1 - eps) onehot(t_r) + eps / C
 *   loss_r = -sum_c q_r[c] logp[r,c]   (0 and not counted when t_r == ignore_index)
 *   loss = sum_r loss_r / nvalid,  nvalid = #{r : t_r != ignore_index}
 *   (nvalid == 0 gives loss 0, as there is nothing to learn from)
 *   backward: dx[r,c] (+)= dloss * (softmax(x)[r,c] - q_r[c]) / nvalid   (0 for ignored rows)
 * Targets outside [0, C) that are not ignore_index are a caller error: the
 * CPU reference aborts with a message; the CUDA kernel counts them into
 * *nbad (device) so the op layer can report them without a sync in the step.
 *
 * Forward saves lse[R] (f32) and nvalid[1] (f32) for the backward; these and
 * the loss live in device memory on the GPU, so neither pass syncs the host.
 */
#ifndef CTRAIN_OPS_SOFTMAX_H
#define CTRAIN_OPS_SOFTMAX_H

#include <stddef.h>
#include <stdint.h>
#include "engine/dtype.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

void softmax_forward_cpu(float *y, const float *x, size_t R, size_t C);
void softmax_backward_cpu(float *dx, const float *dy, const float *y, size_t R,
                          size_t C, int accum);
void cross_entropy_forward_cpu(float *loss, float *lse, float *nvalid,
                               const float *x, const int32_t *t, size_t R, size_t C,
                               int ignore_index, float smoothing);
/* dx may be x (in place, accum 0): each element is read, then written */
void cross_entropy_backward_cpu(float *dx, const float *dloss, const float *x,
                                const float *lse, const float *nvalid,
                                const int32_t *t, size_t R, size_t C,
                                int ignore_index, float smoothing, int accum);

#ifdef CTRAIN_CUDA
void softmax_forward_cuda(void *y, const void *x, DType dt, size_t R, size_t C,
                          cudaStream_t s);
void softmax_backward_cuda(void *dx, const void *dy, const void *y, DType dt,
                           size_t R, size_t C, int accum, cudaStream_t s);
/* loss, lse, nvalid, nbad: device f32/f32/f32/i32. Deterministic (no float atomics). */
void cross_entropy_forward_cuda(float *loss, float *lse, float *nvalid, int32_t *nbad,
                                const void *x, DType dt, const int32_t *t, size_t R,
                                size_t C, int ignore_index, float smoothing,
                                cudaStream_t s);
/* dloss: device pointer to the upstream gradient of the scalar loss; dx
 * may be x (accum 0), as in the CPU version */
void cross_entropy_backward_cuda(void *dx, const float *dloss, const void *x,
                                 const float *lse, const float *nvalid, DType dt,
                                 const int32_t *t, size_t R, size_t C,
                                 int ignore_index, float smoothing, int accum,
                                 cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif
#endif
