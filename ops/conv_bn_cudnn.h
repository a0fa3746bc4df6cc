/* conv_bn_cudnn.h — the conv + batch-norm unit's first fusion on cuDNN's
 * graph API (ops/cudnn_graph.h): a convolution that also reduces its own
 * output to the batch-norm statistics, so the statistics pass over y
 * (batchnorm_moments_cuda) is gone.
 *
 * Shape letters: x [N, H, W, C], w [K, R, S, C], y [N, P, Q, K], M = N*P*Q.
 *
 *   y = conv(x, w)                       (f32 accumulation, stored as dt)
 *   sum_k = sum over M of y_k,   sq_k = sum over M of y_k^2   (of the f32
 *                                        result, before y is rounded to dt)
 *   mean_k = sum_k / M,   m2_k = sq_k - sum_k mean_k  (in double, >= 0)
 *
 * The graph: fprop into a virtual f32 tensor, an identity operation storing
 * it as y, a reduction of it into sum, a pointwise square and a reduction
 * of that into sq; where cuDNN refuses that form, the same with the
 * reductions reading the stored y (f16 and bf16 alike: cuDNN's GenStats
 * operation takes f16 and f32 only, and two reductions say the same). Only
 * deterministic reductions are allowed (a forward's statistics decide the
 * step's values; two runs must give the same bits; cuDNN 9.11 and later
 * know the attribute, earlier ones run the separate way). The engines that
 * take such graphs compile their kernel at plan time: the search (the first
 * call of a shape and type: it synchronizes and allocates, so it belongs to
 * warm-up as the convolutions' own search does) compiles at most
 * CONV_STATS_CANDIDATES that finalize (and tries at most twice that), times
 * them, then times the winner as the step runs it (memset, graph, finishing
 * kernel) against the separate way (the plain convolution, then the moments
 * pass) on the same buffers, interleaved; the fused plan is kept when it is
 * at least 3% faster. A shape where cuDNN takes no such graph, or where it
 * is not faster, runs the separate way; each outcome is logged once
 * (LOG_I), with both times. The verdict is not kept on disk (the
 * convolutions' plan store does not cover it yet): a shape near the 3% line
 * may go either way from one run to the next.
 *
 * The sums differ from the Welford moments of the separate way in their
 * last bits (m2 from sq - sum^2 / M: cancellation grows with mean^2 / var,
 * which stays small for a convolution's output); tests/gpu_conv_bn.c holds
 * the two to a stated tolerance.
 *
 * CTRAIN_CONV_BN=fused asks for this (ResNet then builds its blocks from the
 * unit too); conv_bn_cudnn_use overrides it per context for tests. Built
 * with -DCTRAIN_CUDA only.
 */
#ifndef CTRAIN_OPS_CONV_BN_CUDNN_H
#define CTRAIN_OPS_CONV_BN_CUDNN_H

#include "engine/ctx.h"
#include "conv2d.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CONV_STATS_CANDIDATES 3
#define CONV_STATS_MAX_WS ((size_t)512 << 20)   /* a fused plan's workspace at most */

/* 1 when CTRAIN_CONV_BN is "fused" (read once). */
int conv_bn_cudnn_wanted(void);

#ifdef CTRAIN_CUDA
/* y, and mean / m2 (f32 [K] each) of y, in one fused graph: 1 when it ran,
 * 0 when this shape and type run the separate way (y, mean and m2 then hold
 * whatever the search left: the caller runs the separate way). dt f16 or
 * bf16 (f32: 0); x, w, y 16-byte aligned. */
int conv_bn_cudnn_conv_stats(Ctx *c, void *y, float *mean, float *m2, const void *x,
                             const void *w, DType dt, const Conv2dShape *s);

/* Overrides CTRAIN_CONV_BN's fused choice for c: 1 always the fused plan
 * where cuDNN takes the graph (even when not faster: tests), 0 never, -1
 * back to the setting. */
void conv_bn_cudnn_use(Ctx *c, int on);
/* Shapes of c served fused so far, and shapes that run the separate way
 * (cuDNN took no graph, or it was slower). */
void conv_bn_cudnn_counts(Ctx *c, int *fused, int *separate);
#endif

#ifdef __cplusplus
}
#endif
#endif
