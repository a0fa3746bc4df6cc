/* optim.h — optimizer update kernels over one contiguous range of the
 * parameter buffer (the registry orders parameters so that each weight-decay
 * group is one range: one launch per group, not per tensor).
 *
 * SGD with momentum, PyTorch semantics (dampening 0):
 *   d = g + wd * p
 *   m = momentum * m + d            (m starts at 0, so step 1 gives m = d)
 *   p = p - lr * (nesterov ? d + momentum * m : m)
 *
 * CUDA specifics, for CUDA graphs and AMP:
 *   lr is a device pointer (the schedule advances on the device);
 *   skip, when non-NULL, is a device flag: if *skip != 0 nothing is written
 *   (the grad scaler found inf/nan, the step is skipped with no host sync);
 *   p_lowp, when non-NULL, receives the updated weights in type lowp_t
 *   (the f16/bf16 working copy used by autocast), so no separate cast runs.
 */
#ifndef CTRAIN_OPS_OPTIM_H
#define CTRAIN_OPS_OPTIM_H

#include <stddef.h>
#include "engine/dtype.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

void sgd_step_cpu(float *p, float *m, const float *g, size_t n, float lr,
                  float momentum, float wd, int nesterov);

#ifdef CTRAIN_CUDA
void sgd_step_cuda(float *p, float *m, void *p_lowp, DType lowp_t, const float *g,
                   size_t n, const float *lr, float momentum, float wd, int nesterov,
                   const int *skip, cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif
#endif
