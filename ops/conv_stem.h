/* conv_stem.h — ResNet's stem convolution (7 x 7, stride 2, pad 3, 3 input
 * channels, 64 filters, NHWC) as an implicit GEMM of ctrain's own on the
 * tensor cores, forward and weight gradient (the stem's input needs no
 * gradient; its data gradient stays cuDNN's).
 *
 * Shape letters as ops/conv2d.h: x [N, H, W, 3], w [64, 7, 7, 3] (OHWI),
 * y [N, P, Q, 64]. With k = (r 7 + s) 3 + c (0 .. 146, the weight's own
 * order) and the window row of output pixel (n, p, q)
 *   A[(n, p, q), k] = x[n, 2p - 3 + r, 2q - 3 + s, c]    (0 outside x)
 * the convolution is one GEMM and its weight gradient another:
 *   forward   y[(n, p, q), o] = sum_k A[(n, p, q), k] w[o, k]
 *   backward  dw[o, k] (+)= sum_(n, p, q) dy[(n, p, q), o] A[(n, p, q), k]
 * K = 147 is padded with zeros to KP (152 for TF32's k of 8, 160 for bf16's and
 * f16's 16).
 *
 * Why: cuDNN runs this shape poorly: 3 channels are 12 bytes, no vector
 * width its fast kernels take. In TF32 at batch 256 on an H100 it is 3.44 ms
 * of a 77 ms ResNet-50 step (an sm80 kernel without shared memory 1.45 ms,
 * a generic implicit GEMM for the weight gradient 0.95, layout conversions
 * and padding 1.04), ~2.9 ms of 41 in bf16 (docs/kernels.md).
 *
 * The kernels (ops/conv_stem.cu): a block takes whole output rows (n, p) in
 * turn. For each it stages the 7 input rows the row's windows read (rows
 * 2p - 3 .. 2p + 3, columns -3 .. 2Q + 1, zeros outside x) in shared memory,
 * once and coalesced; the patch matrix A is never formed: for pixel q the
 * window row of r is 21 consecutive staged values starting at 6 q, so A[q,
 * k] = X[off[k] + 6 q] with a per-k offset table, and the mma.sync
 * fragments load their elements from X through it. The forward holds w in
 * shared memory for all its rows, a warp takes 16 pixels x the 64 filters,
 * and writes y from its accumulators. The weight gradient keeps the block's
 * dw [64, KP] in the warps' accumulators over all its rows (a warp takes 16
 * filters x half of KP) and writes it as the block's partial; a second
 * kernel adds the partials in block order into dw (f32): deterministic,
 * independent of scheduling.
 *
 * Rounding: TF32 rounds x and w to 10 mantissa bits (to nearest, as cuDNN's
 * TF32 does) and sums in f32; bf16 and f16 read their values as they are,
 * products exact, sums in f32. The order of the sums is the tensor cores', so results
 * match the CPU reference (ops/conv2d.c) within TF32's or bf16's tolerance,
 * not bit for bit; run to run they are the same bits.
 */
#ifndef CTRAIN_OPS_CONV_STEM_H
#define CTRAIN_OPS_CONV_STEM_H

#include "conv2d.h"
#include "engine/ctx.h"
#include "engine/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CONV_STEM_MAX_Q 128   /* output widths up to this (224 x 224 inputs give 112) */

/* Whether these kernels take the convolution s in storage type dt on c:
 * the stem's shape, Q % 16 == 0 and Q <= CONV_STEM_MAX_Q, bf16, or f32 with
 * TF32 allowed (CTRAIN_CONV_STEM own or all), or f16 (all). */
int conv_stem_applies(const Ctx *c, const Conv2dShape *s, DType dt);

#ifdef CTRAIN_CUDA
/* y = conv(x, w), every pointer device memory in type dt (w: the weight in
 * the compute type, as cuDNN's path reads it). */
void conv_stem_forward_cuda(Ctx *c, void *y, const void *x, const void *w, DType dt,
                            const Conv2dShape *s);
/* dw (f32, OHWI) (+)= the weight gradient from dy and x in type dt. */
void conv_stem_backward_filter_cuda(Ctx *c, float *dw, const void *dy, const void *x, DType dt,
                                    const Conv2dShape *s, int accum);

/* The launchers (ops/conv_stem.cu); part: scratch of conv_stem_part_floats()
 * floats. */
size_t conv_stem_part_floats(void);
void conv_stem_forward_launch(void *y, const void *x, const void *w, DType dt, int N, int H,
                              int W, int P, int Q, void *stream);
void conv_stem_wgrad_launch(float *dw, float *part, const void *dy, const void *x, DType dt,
                            int N, int H, int W, int P, int Q, int accum, void *stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
