/* conv_gemm.h — a 1 x 1 convolution (no padding, dilation 1, any stride) as
 * one cuBLASLt GEMM on NHWC rows, the candidate the convolution search
 * (ops/conv2d_cudnn.c) times beside cuDNN's algorithms and engines.
 *
 * Shape letters as ops/conv2d.h: x [N, H, W, C], w [K, 1, 1, C] = a [K, C]
 * matrix, y [N, P, Q, K]; M = N P Q output pixels. With xs the input pixels
 * the filter visits (xs[n, p, q] = x[n, p sh, q sw]; xs is x itself at
 * stride 1):
 *
 *   forward          y   [M, K]  =   xs [M, C] w^T              (GEMM M x K x C)
 *   backward data    dxs [M, C]  =   dy [M, K] w                (GEMM M x C x K)
 *                    dx          (+)= dxs at (p sh, q sw), 0 elsewhere
 *   backward filter  dw  [K, C]  (+)= dy^T [K, M] xs [M, C]     (GEMM K x C x M)
 *
 * A 1 x 1 convolution is a GEMM, so the only question is whose runs faster.
 * cuDNN's strict-f32 kernels are NCHW ones, and on NHWC tensors it wraps
 * them in layout transposes: ResNet-50's 1 x 1 convolutions took ~160 ms of
 * a ~257 ms strict-f32 step at batch 256 on an H200 (14..37 TFLOP/s in the
 * forward, 5..31 in the backward; the stride-2 data gradients 3.4..9.8 ms
 * each), where the same GEMMs on cuBLASLt's f32 kernels are ~72 ms at 45
 * TFLOP/s (docs/kernels.md, "The 1 x 1 convolutions as GEMMs").
 *
 * At stride 1 the GEMMs read and write the tensors in place (beta = accum).
 * At a larger stride xs is gathered into a pool buffer first (forward and
 * backward filter), and the backward data's dxs is written to one and then
 * scattered into dx (zeros off the grid; added on it with accum, from an
 * f32 dxs, so an f16/bf16 dx is rounded once as cuDNN's beta = 1 is). The
 * GEMM's numerics are matmul_cuda's (ops/matmul.h): f32 accumulation, TF32
 * only where c->allow_tf32, f16/bf16 outputs rounded once; the algorithm is
 * cuBLASLt's heuristic's or the one its search timed, kept in the plan
 * store, so a run's bits are the same on its resume.
 */
#ifndef CTRAIN_OPS_CONV_GEMM_H
#define CTRAIN_OPS_CONV_GEMM_H

#include <stddef.h>
#include "engine/ctx.h"
#include "engine/dtype.h"
#include "conv2d.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether s is a convolution this file runs: 1 x 1, no padding, dilation
 * 1 (any stride, any size). */
int conv_gemm_applies(const Conv2dShape *s);

#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>

/* The three directions on c's stream; dt (f32, f16, bf16) the type of
 * every operand, dw included (the caller casts into an f32 parameter
 * gradient, as it does after cuDNN). Scratch from c's pool at stride > 1,
 * the GEMM's workspace the shared one. */
void conv_gemm_forward_cuda(Ctx *c, void *y, const void *x, const void *w, DType dt,
                            const Conv2dShape *s);
void conv_gemm_backward_data_cuda(Ctx *c, void *dx, const void *dy, const void *w, DType dt,
                                  const Conv2dShape *s, int accum);
void conv_gemm_backward_filter_cuda(Ctx *c, void *dw, const void *dy, const void *x, DType dt,
                                    const Conv2dShape *s, int accum);

/* The strided copies (ops/conv_gemm.cu), rows of C elements of es bytes:
 *   gather:   xs [N, P, Q, C] = x [n, p sh, q sw, :]
 *   scatter:  dx [N, H, W, C] = dxs [n, h / sh, w / sw, :] where sh | h and
 *             sw | w, 0 elsewhere (accum 0: dxs of type dt); or dx += dxs on
 *             those pixels only (accum 1: dxs f32, the sum rounded once to dt). */
void conv_gemm_gather_launch(void *xs, const void *x, size_t es, int N, int H, int W, int C,
                             int P, int Q, int sh, int sw, cudaStream_t st);
void conv_gemm_scatter_launch(void *dx, const void *dxs, DType dt, int N, int H, int W, int C,
                              int P, int Q, int sh, int sw, int accum, cudaStream_t st);
#endif

#ifdef __cplusplus
}
#endif
#endif
