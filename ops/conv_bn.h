/* conv_bn.h — a batch norm + ReLU and the convolution after it as one
 * unit, with the batch statistics taken where the previous convolution's
 * output is made: the form MLPerf's ResNet trains in, and the one cuDNN's
 * fused graphs can run (statistics in a convolution's epilogue, the
 * normalisation and ReLU in the next one's prologue).
 *
 * Shape letters: y [N, H, W, C] the previous convolution's output, M =
 * N*H*W rows; w [K, R, S, C]; z [N, P, Q, K].
 *
 *   forward                                   backward (g: da masked by the ReLU)
 *   stats = (mean, m2) of y per channel       da  = conv^T(dz, w)
 *   invstd = 1 / sqrt(m2 / M + eps)           dw += corr(a, dz)     a recomputed from y
 *   a = relu(gamma (y - mean) invstd + beta)  dbeta  += sum g,  dgamma += sum g xhat
 *   z = conv(a, w)                            dy = gamma invstd (g - mean(g) - xhat mean(g xhat))
 *
 * with xhat = (y - mean) invstd; in eval (running statistics) dy = gamma
 * invstd g. The values are those of op_batchnorm(y, ..., relu) followed by
 * op_conv2d (batchnorm.h, conv2d.h): the unit is that composition, and the
 * tests hold it to it. What differs is what is kept for the backward: y
 * alone (the composition keeps y and a: one activation of y's size less per
 * unit, two per bottleneck block), a being made again in the backward.
 *
 * The statistics travel as a tensor f32 [2, C]: row 0 the batch mean, row 1
 * the sum of squared deviations m2 = sum (y - mean)^2 (var = m2 / M, and
 * the running variance's unbiased m2 / (M - 1)). They carry no gradient of
 * their own: op_bn_relu_conv takes them as y's own batch statistics and its
 * backward is batch norm's whole chain rule through them, as op_batchnorm's
 * is. On the GPU they come from batch norm's chunked Welford reduction
 * (batchnorm_moments_cuda) and are finished by the same device function as
 * op_batchnorm's, so with our batch-norm kernels on both sides
 * (CTRAIN_BN=own) the unit and the composition train the same bits,
 * running statistics included.
 *
 * Each piece runs as its own kernel (statistics, apply, convolution; in the
 * backward apply again for the filter gradient, the data gradient, batch
 * norm's backward with the ReLU's mask recomputed from y), except that with
 * CTRAIN_CONV_BN=fused cuDNN graphs take four of them where that is faster
 * (ops/conv_bn_cudnn.h): the statistics in the epilogue of the convolution
 * that makes y; a = relu(bn(y)) in the prologue of the convolution and of
 * its filter gradient, so a is never written; the data gradient with the
 * ReLU's mask and batch norm's two sums in its epilogue, leaving one dx
 * pass of batch norm's backward (docs/kernels.md, "ResNet's fused
 * convolutions"). ResNet builds its blocks from
 * these ops when ResNetConfig.bn_unit is set (CTRAIN_CONV_BN=unit or fused).
 */
#ifndef CTRAIN_OPS_CONV_BN_H
#define CTRAIN_OPS_CONV_BN_H

#include "engine/ctx.h"
#include "engine/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One batch norm's parameters and state (op_batchnorm's arguments):
 * gamma, beta f32 [C] (both needed by the unit), running_mean and
 * running_var f32 [C] (both or neither), num_batches_tracked i64 [1] or
 * NULL; training uses batch statistics and updates the running ones. */
typedef struct BnArgs {
    Tensor *gamma, *beta;
    Tensor *running_mean, *running_var, *num_batches_tracked;
    int training;
    float momentum, eps;   /* 0.1, 1e-5: PyTorch's defaults */
} BnArgs;

/* y = conv(x, w) (op_conv2d), and when stats is not NULL *stats = the
 * batch statistics of y, f32 [2, K] (see above; the caller owns it). */
Tensor *op_conv2d_stats(Ctx *c, Tensor *x, Tensor *w, int stride, int pad, Tensor **stats);

/* z = conv(relu(bn(y)), w) with stride and pad (dilation 1), the unit above.
 * stats: y's batch statistics from op_conv2d_stats or an earlier unit, or
 * NULL (computed here); ignored when bn->training is 0 and running
 * statistics are given (eval). When stats_out is not NULL and bn->training,
 * *stats_out = the batch statistics of z (for the next unit), else NULL
 * (also when the unit ran as the composition: a unit after it takes its
 * own).
 * Records one node with inputs y, gamma, beta, w. Under autocast an f32 y,
 * and sync batch norm (c->bn_allreduce: statistics over every rank), run as
 * op_batchnorm + op_conv2d (the unit computes in y's own type, on this
 * rank's batch). */
Tensor *op_bn_relu_conv(Ctx *c, Tensor *y, Tensor *stats, const BnArgs *bn, Tensor *w,
                        int stride, int pad, Tensor **stats_out);

/* The batch statistics of y [..., C] as above (no gradient). */
Tensor *op_bn_moments(Ctx *c, Tensor *y);

#ifdef __cplusplus
}
#endif
#endif
