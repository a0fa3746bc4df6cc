/* conv1x1_bn.h — a 1 x 1 convolution of our own for the conv + batch-norm
 * unit (ops/conv_bn.h): the previous batch norm's apply + ReLU in its
 * prologue, the statistics of its output in its epilogue, for the shapes
 * where that beats cuDNN's (or cuBLAS's) convolution with the two passes
 * around it.
 *
 * Over NHWC rows a 1 x 1, stride 1 convolution is a GEMM. With y [M, C] the
 * previous convolution's output, s and b [C] the batch norm's scale and
 * shift (s = gamma invstd, b = beta - mean s: batchnorm_scale_bias_cuda),
 * w [K, C]:
 *
 *   a = relu(y s + b)     in f32, rounded to the storage type, never stored
 *                         (plain: a = y, a block's first 1 x 1)
 *   z = a w^T             f32 accumulation, stored in the storage type
 *   sum_k = sum_m z[m, k],  sq_k = sum_m z[m, k]^2   of z's stored values
 *   mean_k = sum_k / M,  m2_k = sq_k - sum_k mean_k   (in double, >= 0)
 *
 * The backward of these values is the unit's (ops/conv_bn_op.c): it makes a
 * again from y (the forward never wrote it), so a kink-side difference of
 * the mask between the two (y s + b here, (y - mean) invstd gamma + beta
 * there) moves an activation that is ~0 either way.
 *
 * The data gradient's twin, the same kernel with w read transposed: with
 * dz [M, K] the gradient of z,
 *
 *   g[m, c] = keep[m, c] E(sum_k dz[m, k] w[k, c])    the ReLU's backward
 *   keep    = E((y - mean) (gamma invstd) + beta) > 0  (batch norm's relu
 *             mode 2 mask, bit for bit: ops/batchnorm.cu)
 *   sg_c = sum_m g[m, c],  sgx_c = sum_m g[m, c] xhat[m, c],  xhat = (y - mean) invstd
 *
 * (the epilogue reads y instead of the separate sums pass reading da and
 * y); batch norm's backward is then its [C] finish (batchnorm_backward_
 * sums_cuda) and its dx pass over g.
 *
 * The filter gradient's twin, a GEMM whose reduction is M:
 *
 *   dw[k, c] (+)= sum_m dz[m, k] a[m, c],   a = relu(y s + b) made in registers
 *
 * as the forward's prologue makes it (a is never written or read back), in
 * 128 x 64 tiles of dw, each split over M into per-split f32 partials that a
 * second kernel sums in order (the bits depend on the shape and the card's
 * multiprocessor count).
 *
 * The kernel (ops/conv1x1_bn.cu; measured as scripts/conv1x1_bn_probe.cu,
 * docs/kernels.md): a persistent grid, two blocks an SM; a's and w's
 * 64-channel chunks copied three ahead with cp.async into swizzled shared
 * memory; mma.sync m16n8k16; the sums per 128-row tile from the stored
 * values, then a fixed-order two-pass finish (deterministic: the bits
 * depend on the shape only). On an H100 it ran stage 1's shapes 1.3-1.7x
 * faster than the GEMM and both passes at the copy bandwidth, stage 2's
 * 0.94-1.37x, and lost at stages 3-4: conv1x1_bn_wanted takes C, K <= 512.
 *
 * CTRAIN_CONV_BN_1X1=own (the default) takes the three where they fit,
 * =backward the two gradients alone, =library none (cuDNN's convolutions and
 * batch norm's passes, as before them); conv1x1_bn_use overrides the setting
 * for tests. Built with -DCTRAIN_CUDA only.
 */
#ifndef CTRAIN_OPS_CONV1X1_BN_H
#define CTRAIN_OPS_CONV1X1_BN_H

#include "engine/ctx.h"
#include "conv2d.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef CTRAIN_CUDA
/* 1 when the kernel takes the shape and type: 1 x 1, stride 1, no padding,
 * f16 or bf16, C and K multiples of 64 (K <= 2048), M and K not 0, on a card of sm_80 or
 * later whose blocks may opt in to the kernel's shared memory (110 KiB at K
 * a multiple of 128: not sm_86 / sm_89's 99 KiB); *_wanted adds the
 * setting (or the override), the shapes where it was measured to win (C, K
 * <= 512) and y, w, z (the input, filters, output) 16-byte aligned. */
int conv1x1_bn_fits(DType dt, const Conv2dShape *s);
int conv1x1_bn_wanted(DType dt, const Conv2dShape *s, const void *y, const void *w,
                      const void *z);

/* The data gradient's twin: conv1x1_bn_fits with the GEMM's width C
 * (C <= 2048, tiles 64 channels wide), the setting and the shapes as above;
 * dz, w, y and g (the output) 16-byte aligned. */
int conv1x1_dgrad_bn_wanted(DType dt, const Conv2dShape *s, const void *dz, const void *w,
                            const void *y, const void *g);

/* The filter gradient's twin: as conv1x1_bn_fits with K a multiple of 128,
 * the setting and the shapes as above; dz and y 16-byte aligned. */
int conv1x1_wgrad_bn_wanted(DType dt, const Conv2dShape *s, const void *dz, const void *y);

/* on: 1 use them where they fit, 0 never, -1 the setting again (tests) */
void conv1x1_bn_use(int on);

/* How many times each kernel ran (tests: that a path took it). */
enum { CONV1X1_FWD = 0, CONV1X1_DGRAD, CONV1X1_WGRAD, CONV1X1_KINDS };
long conv1x1_bn_runs(int kind);

/* z [M, K] = relu(y s + b) w^T as above (scale NULL: plain, a = y), and
 * when mean is not NULL, mean and m2 f32 [K] of z. y, w, z 16-byte
 * aligned; scale and bias f32 [C] 8-byte aligned. Scratch from c's pool. */
void conv1x1_bn_cuda(Ctx *c, void *z, float *mean, float *m2, const void *y,
                     const float *scale, const float *bias, const void *w, DType dt, size_t M,
                     int C, int K);

/* g [M, C] and sums f32 [2][C] = (sum g, sum g xhat) as above, from dz
 * [M, K], w [K, C], y [M, C] and batch norm's mean, invstd, gamma, beta f32
 * [C] (4-byte aligned); the other pointers 16-byte aligned. */
void conv1x1_dgrad_bn_cuda(Ctx *c, void *g, float *sums, const void *dz, const void *w,
                           const void *y, const float *mean, const float *invstd,
                           const float *gamma, const float *beta, DType dt, size_t M, int C,
                           int K);

/* dw [K, C] of type tdw (f32, bf16, f16; accum: 0 writes, 1 adds) = the
 * filter gradient above from dz [M, K], y [M, C] and the prologue's scale
 * and bias f32 [C] (batchnorm_scale_bias_cuda). */
void conv1x1_wgrad_bn_cuda(Ctx *c, void *dw, DType tdw, int accum, const void *dz, const void *y,
                           const float *scale, const float *bias, DType dt, size_t M, int C,
                           int K);

/* The launch (ops/conv1x1_bn.cu): the kernel, then, when sums is not NULL,
 * sums [2][K] (sum, sum of squares) through part's partials, which hold
 * conv1x1_bn_part_floats(M, K) floats; part NULL (and sums NULL): the
 * kernel without its statistics. */
size_t conv1x1_bn_part_floats(size_t M, int K);
/* shared memory a block takes at K output channels (at most 110 KiB) */
size_t conv1x1_bn_smem(int K);
void conv1x1_bn_launch(void *z, float *sums, float *part, const void *y, const float *scale,
                       const float *bias, const void *w, DType dt, size_t M, int C, int K,
                       void *stream);
/* its twin: g and sums [2][C] through part (conv1x1_bn_part_floats(M, C)) */
void conv1x1_dgrad_bn_launch(void *g, float *sums, float *part, const void *dz, const void *w,
                             const void *y, const float *mean, const float *invstd,
                             const float *gamma, const float *beta, DType dt, size_t M, int C,
                             int K, void *stream);
/* the filter gradient's: part holds conv1x1_wgrad_bn_part_floats(M, C, K)
 * floats (part_floats: how many it holds, checked) */
size_t conv1x1_wgrad_bn_part_floats(size_t M, int C, int K);
void conv1x1_wgrad_bn_launch(void *dw, DType tdw, int accum, float *part, size_t part_floats,
                             const void *dz, const void *y, const float *scale,
                             const float *bias, DType dt, size_t M, int C, int K, void *stream);
/* sums [2][K] from part's partials [G][2][K] of 128-row tiles, G = ceil(M /
 * 128) (the finish of conv1x1_bn_launch, in two fixed-order passes whose
 * middle sits in part after the partials) */
void conv1x1_bn_finish(float *sums, float *part, size_t M, int K, void *stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
