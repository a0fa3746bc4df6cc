/* batchnorm_sync.h — synchronized batch norm (ctrain train --sync-bn): the
 * batch statistics, and the two per-channel means of the backward, taken
 * over the whole data-parallel batch instead of this GPU's share
 * (PyTorch's SyncBatchNorm). The batch-norm op (ops/batchnorm_op.c) takes
 * this path when the context has an all-reduce (ctx->bn_allreduce, set by
 * train/parallel/dist.c); it reuses the ordinary kernels for the local work and adds
 * three small all-reduces of per-channel vectors.
 *
 * Shape letters: M rows on this rank (the same on every rank: equal
 * batches), C channels, N ranks; avg_i = the all-reduce average over ranks.
 *
 * forward (training):
 *   mean_i, var_i   this rank's statistics (the usual kernel, no running update)
 *   mean = avg_i mean_i                                   all-reduce 1 (C floats)
 *   var  = avg_i (var_i + (mean_i - mean)^2)              all-reduce 2 (C floats)
 *          (the law of total variance for equal counts; it avoids the
 *          cancellation of E[x^2] - mean^2 that one all-reduce of
 *          (mean, mean of squares) would suffer; var_i is recovered from the
 *          kernel's invstd as 1 / invstd^2 - eps)
 *   invstd = 1 / sqrt(var + eps); running statistics updated once, with the
 *   unbiased variance over N M rows: running_var += mom (var N M / (N M - 1) - running_var)
 * backward (training), g = dy masked by the ReLU:
 *   sg_i = sum g, sgx_i = sum g xhat over this rank's rows: they are this
 *          rank's dbeta and dgamma (the gradient all-reduce averages those
 *          later, as DDP does with SyncBatchNorm)
 *   mg = avg_i sg_i / M,  mgx = avg_i sgx_i / M           all-reduce 3 (2C floats)
 *   dx (+)= gamma invstd (g - mg - xhat mgx)       (the means over all N M rows)
 * With each rank's loss a mean over its own rows and the gradients averaged
 * over ranks, this is exactly the gradient of one process with the N M-row
 * batch (the 1/N of the average and the N of the summed means cancel).
 *
 * Recomputed segments re-run the forward: its two all-reduces run again on
 * every rank (running statistics are not updated twice). Eval mode uses the
 * running statistics, no communication.
 */
#ifndef CTRAIN_OPS_BATCHNORM_SYNC_H
#define CTRAIN_OPS_BATCHNORM_SYNC_H

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

/* ---- per-channel kernels (CPU reference; CUDA on device pointers) ---- */
/* dev[c] = var_i + (mean_i - mean)^2 with var_i = max(1 / invstd_i^2 - eps, 0) */
void bn_sync_center_cpu(float *dev, const float *mean_i, const float *invstd_i,
                        const float *mean, float eps, size_t C);
/* mean_out = mean, invstd_out = 1 / sqrt(var + eps); when running_mean is
 * given: the running update over M_total rows and num_batches_tracked += 1 */
void bn_sync_finish_cpu(float *mean_out, float *invstd_out, float *running_mean,
                        float *running_var, int64_t *num_batches_tracked, const float *mean,
                        const float *var, float momentum, float eps, size_t M_total, size_t C);
/* sums = [sg (C), sgx (C)]: dbeta (+)= sg, dgamma (+)= sgx (either may be NULL),
 * then sums /= M (they become this rank's mg, mgx) */
void bn_sync_grads_cpu(float *dgamma, float *dbeta, float *sums, size_t M, size_t C,
                       int accum_g, int accum_b);
#ifdef CTRAIN_CUDA
void bn_sync_center_cuda(float *dev, const float *mean_i, const float *invstd_i,
                         const float *mean, float eps, size_t C, cudaStream_t s);
void bn_sync_finish_cuda(float *mean_out, float *invstd_out, float *running_mean,
                         float *running_var, int64_t *num_batches_tracked, const float *mean,
                         const float *var, float momentum, float eps, size_t M_total, size_t C,
                         cudaStream_t s);
void bn_sync_grads_cuda(float *dgamma, float *dbeta, float *sums, size_t M, size_t C,
                        int accum_g, int accum_b, cudaStream_t s);
#endif

/* ---- the op-level sequences (ops/batchnorm_sync_op.c) ---- */
/* mean, invstd [C] hold this rank's statistics (computed with no running
 * update); they are replaced by the global ones, and the running statistics
 * (when non-NULL) updated. Device memory of c. */
void batchnorm_sync_stats(Ctx *c, float *mean, float *invstd, float *running_mean,
                          float *running_var, int64_t *num_batches_tracked, float momentum,
                          float eps, size_t M, size_t C);
/* The training backward with the global means (see the top of this file);
 * the arguments as ops/batchnorm.h's backward, with tensors for the
 * activations (any float dtype) and separate accumulate flags. */
void batchnorm_sync_backward(Ctx *c, Tensor *dx, Tensor *dz, float *dgamma, float *dbeta,
                             Tensor *dy, Tensor *x, Tensor *y, const float *mean,
                             const float *invstd, const float *gamma, int relu, int accum_x,
                             int accum_z, int accum_g, int accum_b);

#ifdef __cplusplus
}
#endif
#endif
