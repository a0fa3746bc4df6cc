/* batchnorm.h — batch normalization over NHWC activations, with the fused
 * residual add and ReLU that ResNet puts after it (PyTorch semantics).
 *
 * Shape letters: x is [N, H, W, C] seen as M = N*H*W rows of C channels
 * (C is the last, contiguous dim); statistics are per channel c, over rows m.
 *
 *   training:  mean_c = (1/M) sum_m x[m,c]
 *              var_c  = (1/M) sum_m (x[m,c] - mean_c)^2            (biased)
 *              running_mean_c = (1 - mom) running_mean_c + mom mean_c
 *              running_var_c  = (1 - mom) running_var_c  + mom var_c M / (M - 1)
 *              num_batches_tracked += 1                              (i64)
 *   eval:      mean_c = running_mean_c, var_c = running_var_c
 *   both:      invstd_c = 1 / sqrt(var_c + eps)
 *              xhat = (x - mean_c) invstd_c
 *              y = act(gamma_c xhat + beta_c + z)   act = ReLU or identity,
 *                                                   z the residual (or none)
 *
 * backward, with g = dy masked by the ReLU (g = y > 0 ? dy : 0; g = dy without
 * ReLU), mg_c = (1/M) sum_m g, mgx_c = (1/M) sum_m g xhat:
 *   dbeta_c  (+)= sum_m g                dgamma_c (+)= sum_m g xhat
 *   dz       (+)= g
 *   training: dx (+)= gamma_c invstd_c (g - mg_c - xhat mgx_c)
 *   eval:     dx (+)= gamma_c invstd_c g     (statistics are constants)
 * The ReLU mask is read from the saved output y (as PyTorch's threshold
 * backward does): y is kept alive anyway by the next layer, whereas
 * recomputing the mask would need z kept too. The kernels' `relu` is 0 (no
 * ReLU), 1 (the mask from y) or 2 (the mask recomputed from x, gamma and
 * beta, with no residual: gamma xhat + beta > 0, on the GPU rounded to the
 * storage type first as the forward's output was; the conv + BN unit,
 * ops/conv_bn.h, keeps no y). On the GPU the pre-activation's roundings are
 * pinned in the order the CPU reference computes it, so the forward and
 * mode 2 agree bit for bit.
 *
 * Kernel contract. Activations (x, z, y, dy, dx, dz) have storage type dt on
 * CUDA (f32, f16 or bf16) and are f32 in the CPU references; everything per
 * channel (gamma, beta, mean, invstd, running stats, dgamma, dbeta) is f32.
 * gamma and beta may be NULL (affine = False: 1 and 0); z, dz, dx, dgamma,
 * dbeta may be NULL (not wanted); running_mean, running_var and
 * num_batches_tracked may be NULL (no update: track_running_stats = False, or
 * the second forward of a recomputed segment, which must not count the batch
 * twice). `accum` flags: 0 writes the gradient, 1 adds to it (accum_p covers
 * both dgamma and dbeta).
 *
 * The CUDA reductions are deterministic (no atomics): pass 1 cuts the M rows
 * into G chunks (G from M and C only, see batchnorm_chunks) and a block of
 * BN_THREADS threads reduces one chunk for a strip of channels, reading rows
 * along C (coalesced), into f32 partials [G, C]; pass 2 combines the G
 * partials of each channel in an order fixed by G (eight threads a channel,
 * each folding every eighth partial, then a fixed tree). Statistics use Welford /
 * Chan merging in f32 (no E[x^2] - E[x]^2 cancellation). The partials live in
 * caller-provided scratch of batchnorm_scratch_bytes(M, C) bytes (the op
 * layer takes it from mem_alloc, so nothing here calls cudaMalloc and the
 * kernels can be captured in a CUDA graph).
 */
#ifndef CTRAIN_OPS_BATCHNORM_H
#define CTRAIN_OPS_BATCHNORM_H

#include <stddef.h>
#include <stdint.h>
#include "engine/ctx.h"
#include "engine/dtype.h"
#include "engine/tensor.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA tiling, shared with batchnorm.c so the host knows the scratch size:
 * a block of BN_THREADS threads covers min(C, BN_COLS) channels and
 * BN_THREADS / min(C, BN_COLS) row lanes; the rows are cut into chunks of at
 * least BN_MIN_ROWS_PER_LANE rows a lane, aiming at BN_TARGET_BLOCKS blocks. */
#define BN_THREADS 256
#define BN_COLS 32
#define BN_TARGET_BLOCKS 1024
#define BN_MIN_ROWS_PER_LANE 16

/* Channels per block and row lanes per block for C channels. */
size_t batchnorm_cols(size_t C);
size_t batchnorm_lanes(size_t C);
/* The number of row chunks G for (M, C), and the rows in each (the last
 * chunk may be shorter). Depends only on (M, C): the order of every
 * floating-point addition in the CUDA reductions is fixed by the shape. */
size_t batchnorm_chunks(size_t M, size_t C, size_t *rows_per_chunk);
/* Scratch the CUDA stats and backward launchers need: partials [2, G, C]
 * plus two per-channel vectors, f32. */
size_t batchnorm_scratch_bytes(size_t M, size_t C);

/* ---- CPU reference (f32 storage, sums in double) ---- */
/* Batch statistics of x [M, C]: mean[C], invstd[C]; when running_mean and
 * running_var are given (M >= 2) they are updated with momentum mom, and
 * *num_batches_tracked (when given) is incremented. */
void batchnorm_stats_cpu(float *mean, float *invstd, float *running_mean, float *running_var,
                         int64_t *num_batches_tracked, const float *x, float momentum,
                         float eps, size_t M, size_t C);
/* Batch moments alone (what the conv + BN unit hands from one convolution
 * to the next, ops/conv_bn.h): mean[C] and the sum of squared deviations
 * m2[C] = sum (x - mean)^2 of x [M, C]. */
void batchnorm_moments_cpu(float *mean, float *m2, const float *x, size_t M, size_t C);
/* batchnorm_stats_cpu's outputs from such moments of M rows: mean, invstd =
 * 1 / sqrt(m2 / M + eps), the running update (unbiased variance m2 / (M - 1))
 * when running_mean and running_var are given, the counter when given. */
void batchnorm_stats_from_moments_cpu(float *mean, float *invstd, float *running_mean,
                                      float *running_var, int64_t *num_batches_tracked,
                                      const float *mom_mean, const float *mom_m2, float momentum,
                                      float eps, size_t M, size_t C);
/* Eval statistics: mean = running_mean, invstd = 1 / sqrt(running_var + eps). */
void batchnorm_eval_stats_cpu(float *mean, float *invstd, const float *running_mean,
                              const float *running_var, float eps, size_t C);
/* forward: y = act(gamma (x - mean) invstd + beta + z) */
void batchnorm_forward_cpu(float *y, const float *x, const float *z, const float *mean,
                           const float *invstd, const float *gamma, const float *beta,
                           int relu, size_t M, size_t C);
/* backward (see the top of this file); y is read only with relu 1, beta
 * only with relu 2 (dz NULL there). */
void batchnorm_backward_cpu(float *dx, float *dz, float *dgamma, float *dbeta, const float *dy,
                            const float *x, const float *y, const float *mean,
                            const float *invstd, const float *gamma, const float *beta,
                            int training, int relu,
                            size_t M, size_t C, int accum_x, int accum_z, int accum_p);
/* The backward's last, per-element pass alone, with the per-channel means
 * mg = (1/M) sum g and mgx = (1/M) sum g xhat given (sync batch norm takes
 * them over all ranks, ops/batchnorm_sync.h): dz (+)= g and
 *   training: dx (+)= gamma invstd (g - mg - xhat mgx);  eval: dx (+)= gamma invstd g */
void batchnorm_backward_dx_cpu(float *dx, float *dz, const float *dy, const float *x,
                               const float *y, const float *mean, const float *invstd,
                               const float *gamma, const float *beta, const float *mg,
                               const float *mgx,
                               int training, int relu, size_t M, size_t C, int accum_x,
                               int accum_z);

#ifdef CTRAIN_CUDA
/* ---- CUDA (dt = storage type of the activations) ---- */
void batchnorm_stats_cuda(float *mean, float *invstd, float *running_mean, float *running_var,
                          int64_t *num_batches_tracked, const void *x, DType dt, float momentum,
                          float eps, size_t M, size_t C, void *scratch, size_t scratch_bytes,
                          cudaStream_t s);
/* batchnorm_moments_cpu's contract on the device: the same chunked Welford
 * reduction as batchnorm_stats_cuda, scratch of batchnorm_scratch_bytes(M,
 * C); batchnorm_stats_from_moments_cuda then gives batchnorm_stats_cuda's
 * outputs bit for bit (one device function finishes a channel for both). */
void batchnorm_moments_cuda(float *mean, float *m2, const void *x, DType dt, size_t M, size_t C,
                            void *scratch, size_t scratch_bytes, cudaStream_t s);
/* Batch norm's backward sums from totals over M rows (a fused data
 * gradient's epilogue, ops/conv_bn_cudnn.h): sg = sum g, sgx = sum g xhat;
 * mg = sg / M, mgx = sgx / M (what batchnorm_backward_dx_cuda takes),
 * dbeta (+)= sg, dgamma (+)= sgx (each when not NULL; accum_p: add). */
void batchnorm_backward_sums_cuda(float *mg, float *mgx, float *dgamma, float *dbeta,
                                  const float *sg, const float *sgx, size_t M, size_t C,
                                  int accum_p, cudaStream_t s);
/* The batch norm as an affine map y s + b: s = gamma invstd, b = beta -
 * mean s (gamma or beta NULL: 1 or 0), per channel (a fused convolution's
 * prologue, ops/conv_bn_cudnn.h). */
void batchnorm_scale_bias_cuda(float *scale, float *bias, const float *mean, const float *invstd,
                               const float *gamma, const float *beta, size_t C, cudaStream_t s);
/* (mean, m2) from per-channel sums of M rows, sum and sq = sum of squares
 * (a fused convolution's epilogue, ops/conv_bn_cudnn.h): mean = sum / M,
 * m2 = sq - sum mean, in double, at least 0. */
void batchnorm_moments_from_sums_cuda(float *mean, float *m2, const float *sum, const float *sq,
                                      size_t M, size_t C, cudaStream_t s);
void batchnorm_stats_from_moments_cuda(float *mean, float *invstd, float *running_mean,
                                       float *running_var, int64_t *num_batches_tracked,
                                       const float *mom_mean, const float *mom_m2,
                                       float momentum, float eps, size_t M, size_t C,
                                       cudaStream_t s);
/* *num_batches_tracked += 1 on the device (NULL: nothing); the cuDNN path
 * counts the batch with it, batchnorm_stats_cuda does it itself. */
void batchnorm_count_cuda(int64_t *num_batches_tracked, cudaStream_t s);
void batchnorm_eval_stats_cuda(float *mean, float *invstd, const float *running_mean,
                               const float *running_var, float eps, size_t C, cudaStream_t s);
void batchnorm_forward_cuda(void *y, const void *x, const void *z, const float *mean,
                            const float *invstd, const float *gamma, const float *beta,
                            DType dt, int relu, size_t M, size_t C, cudaStream_t s);
/* The BN + add + ReLU forward, y = relu((x - mean) gamma invstd + beta + z)
 * (batchnorm_forward_cuda's bits), writing beside y the ReLU's mask in the
 * layout cuDNN's BN + add + ReLU keeps in its reserve space for its backward
 * (read by scripts/bn_reserve_probe.c; docs/kernels.md, "cuDNN's BN + add +
 * ReLU reserve, read"): with P32 = M rounded up to a multiple of 32, pixel p
 * and channel c (cb = c / 64, cc = c % 64) are bit (p % 2) 16 + cc / 4 of
 * 32-bit word cb P32 2 + (p / 2) 4 + cc % 4, set where y is 0; the padding
 * pixels' bits are 0. mask: batchnorm_cudnn_mask_bytes(M, C) bytes, 16-byte
 * aligned (a cuDNN reserve is larger: the rest is left as it is). Returns 0
 * with nothing written unless C % 64 == 0, z is given, the activations are
 * aligned to 4 elements and the parameters to 16 bytes. The layout is
 * cuDNN's own, undocumented: ops/batchnorm_op.c checks it against cuDNN's
 * forward before it pairs the two (CTRAIN_BN_PAIR). */
size_t batchnorm_cudnn_mask_bytes(size_t M, size_t C);
int batchnorm_forward_cudnn_mask_cuda(void *y, void *mask, const void *x, const void *z,
                                      const float *mean, const float *invstd,
                                      const float *gamma, const float *beta, DType dt, size_t M,
                                      size_t C, cudaStream_t s);
/* *count (device) += the number of bits that differ between two masks in
 * that layout for M pixels and C channels (device), the real pixels' bits
 * only: cuDNN writes a pixel pair's word whole, and what it puts in the half
 * of a padding pixel (M odd) is nobody's to read. */
void batchnorm_mask_diff_cuda(unsigned long long *count, const void *a, const void *b,
                              size_t M, size_t C, cudaStream_t s);
void batchnorm_backward_cuda(void *dx, void *dz, float *dgamma, float *dbeta, const void *dy,
                             const void *x, const void *y, const float *mean,
                             const float *invstd, const float *gamma, const float *beta, DType dt,
                             int training,
                             int relu, size_t M, size_t C, int accum_x, int accum_z,
                             int accum_p, void *scratch, size_t scratch_bytes, cudaStream_t s);
void batchnorm_backward_dx_cuda(void *dx, void *dz, const void *dy, const void *x, const void *y,
                                const float *mean, const float *invstd, const float *gamma,
                                const float *beta,
                                const float *mg, const float *mgx, DType dt, int training,
                                int relu, size_t M, size_t C, int accum_x, int accum_z,
                                cudaStream_t s);
#endif

/* ---- tensor op (ops/batchnorm_op.c) ----
 * y = act(bn(x) + z) for x [..., C] (NHWC: [N, H, W, C]; any leading dims,
 * M = numel / C rows). gamma, beta: f32 [C] or NULL. running_mean,
 * running_var: f32 [C] buffers, or both NULL; num_batches_tracked: i64 [1] or
 * NULL. training = 0 normalises with the running stats (needs them); without
 * running stats the batch statistics are used in either mode (PyTorch's
 * track_running_stats = False). z: same shape and dtype as x, or NULL. relu:
 * apply ReLU. momentum 0.1, eps 1e-5 are PyTorch's defaults. Records a node
 * with inputs x, gamma, beta, z. Training needs more than one row (M > 1).
 * On CUDA, a batch-statistics forward and its backward run cuDNN's fused
 * batch norm when it takes the form (CTRAIN_BN, batchnorm_cudnn.h), these
 * kernels otherwise. */
Tensor *op_batchnorm(Ctx *c, Tensor *x, Tensor *gamma, Tensor *beta, Tensor *running_mean,
                     Tensor *running_var, Tensor *num_batches_tracked, int training,
                     float momentum, float eps, Tensor *z, int relu);

/* The kernels take one accumulate flag for dgamma and dbeta: given each
 * one's own (ad_grad_dst), the flag to pass; when one is fresh and the other
 * accumulates, the fresh one is zeroed first (then both add). */
int batchnorm_param_accum(Ctx *c, Tensor *dgamma, int acc_g, Tensor *dbeta, int acc_b);

#ifdef __cplusplus
}
#endif
#endif
