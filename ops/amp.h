/* amp.h — mixed-precision kernels: the grad scaler's fused unscale + inf
 * check, its scale update, and gradient clipping by global norm. All run on
 * the one contiguous f32 gradient buffer (CPU reference in ops/amp.c, CUDA in
 * ops/amp.cu). Shape letters: n gradient elements.
 *
 * Unscale + check (torch's _amp_foreach_non_finite_check_and_unscale_):
 *   inv = (float)(1 / (double)scale)
 *   g = (inv == 1 ? g : g * inv);   found_inf = 1 if any unscaled g is inf/nan
 * One pass. found_inf is only ever set (a plain store of 1, order
 * independent): the caller clears it before the step (train/loop/grad_scaler.c
 * does, with a memset that a CUDA graph captures). Checking after the
 * unscale also catches a finite g that overflows when scale < 1; torch checks
 * before, which differs only in that case.
 *
 * Scale update (torch's _amp_update_scale_), one thread, after the optimizer:
 *   found_inf:  scale = scale * backoff;  growth_tracker = 0;  skipped += 1
 *   otherwise:  growth_tracker += 1;  if growth_tracker == growth_interval:
 *                   scale = scale * growth (kept only if finite);  growth_tracker = 0
 * products in double, rounded to f32, as torch does. found_inf is left as it
 * is, so the host can still read whether the step was skipped.
 *
 * Clipping by global norm (torch.nn.utils.clip_grad_norm_, norm_type 2):
 *   norm = sqrt(sum g^2)                     (sum in double, rounded once)
 *   coef = max_norm / (norm + 1e-6)          (f32, as torch)
 *   g = g * coef   only where coef < 1 (or NaN, which torch propagates too)
 * max_norm <= 0 computes the norm only. With *found_inf != 0 the step will
 * be skipped: no pass over g is made and norm is +inf.
 *
 * CUDA: nothing syncs or allocates; scale, found_inf and norm are device
 * pointers read at run time (CUDA graphs). The norm is deterministic: a
 * first pass of at most AMP_NORM_PARTIALS blocks (a count that depends on n
 * only) writes per-block double partials in a fixed order, a second
 * single-block pass adds them in a fixed order. No float atomics.
 */
#ifndef CTRAIN_OPS_AMP_H
#define CTRAIN_OPS_AMP_H

#include <stddef.h>
#include <stdint.h>
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch the CUDA norm needs: this many doubles. */
#define AMP_NORM_PARTIALS 1024

/* ---- CPU reference ---- */
void amp_unscale_check_cpu(float *g, int *found_inf, size_t n, const float *scale);
void amp_scaler_update_cpu(float *scale, int *growth_tracker, int64_t *skipped,
                           const int *found_inf, double growth_factor, double backoff_factor,
                           int growth_interval);
/* found_inf may be NULL (never set). */
void amp_clip_grad_norm_cpu(float *g, float *norm, size_t n, float max_norm,
                            const int *found_inf);

#ifdef CTRAIN_CUDA
/* ---- CUDA (device pointers) ---- */
void amp_unscale_check_cuda(float *g, int *found_inf, size_t n, const float *scale,
                            cudaStream_t s);
/* skipped may be NULL. */
void amp_scaler_update_cuda(float *scale, int *growth_tracker, int64_t *skipped,
                            const int *found_inf, double growth_factor, double backoff_factor,
                            int growth_interval, cudaStream_t s);
/* partial: AMP_NORM_PARTIALS doubles of scratch; found_inf may be NULL. */
void amp_clip_grad_norm_cuda(float *g, float *norm, double *partial, size_t n, float max_norm,
                             const int *found_inf, cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif
#endif
