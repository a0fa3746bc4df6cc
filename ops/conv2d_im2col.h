/* conv2d_im2col.h — convolutions of few input channels (ResNet's RGB stem,
 * C = 3) on the GPU as explicit patches and one GEMM, where cuDNN's NHWC
 * kernels pad the channels to 8 and run a tile shape made for wide C.
 * Rows of kp elements are 16-byte aligned in every type (kp % 8 == 0).
 *
 * Shape letters as ops/conv2d.h; M = N P Q output pixels; RSC = R S C the
 * window; Kp = RSC rounded up to 8 (16-byte rows in f16/bf16).
 *
 *   cols[m, j]  = x[n, p sh - ph + r dh, q sw - pw + s dw, c]   (0 outside)
 *                 for m = (n P + p) Q + q,  j = (r S + s) C + c < RSC;  0 for j >= RSC
 *   wp[k, j]    = w[k, j] for j < RSC, 0 above               (w is OHWI: [K, RSC])
 *   forward:      y[M, K]    = cols[M, Kp] wp[K, Kp]^T       (one GEMM, f32 accumulate)
 *   filter grad:  g[K, Kp]   = sum over chunks of dy[M, K]^T cols[M, Kp]   (f32)
 *                 dw[k, j]  (+)= g[k, j] for j < RSC
 * The padded columns are zero on both sides, so they add nothing. The data
 * gradient is not taken here (the stem's input is the data): it stays
 * cuDNN's. The batch goes in chunks of whole images so that cols stays near
 * CONV_IM2COL_CHUNK_BYTES; the filter gradient adds the chunks in order in
 * f32 (fixed order: the same bits run to run).
 *
 * Taken by ops/conv2d_cudnn.c when CTRAIN_CONV_STEM=im2col (or a context's
 * conv2d_cuda_set_stem) and conv2d_im2col_applies.
 */
#ifndef CTRAIN_OPS_CONV2D_IM2COL_H
#define CTRAIN_OPS_CONV2D_IM2COL_H

#include "conv2d.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>

#define CONV_IM2COL_CHUNK_BYTES ((size_t)128 << 20)

/* Test hook: the chunk's bytes (0: CONV_IM2COL_CHUNK_BYTES; 1: one image a
 * chunk). */
void conv2d_im2col_set_chunk_bytes(size_t bytes);

/* 1 when s in dt is one this path serves: C <= 4, a window of at most 4096
 * elements (f16, bf16, f32; f32's GEMM takes TF32 only where the context
 * allows it, as every f32 matmul). */
int conv2d_im2col_applies(const Conv2dShape *s, DType dt);

/* y = conv(x, w), all of type dt (y written). */
void conv2d_im2col_forward(Ctx *c, void *y, const void *x, const void *w, DType dt,
                           const Conv2dShape *s);

/* dw (+)= the filter gradient from dy and x (type dt); dw of type tdw. */
void conv2d_im2col_backward_filter(Ctx *c, void *dw, DType tdw, const void *dy, const void *x,
                                   DType dt, const Conv2dShape *s, int accum);

/* Rows padded with zero columns and back, on c's stream (a memset and
 * strided copies: capturable); es the element's bytes. Also cuDNN's padded
 * channels (ops/conv2d_cudnn.c). */
/* dst [rows, Cp] = src [rows, C] with zeros in columns C .. Cp-1 */
void conv_pad_cols_cuda(Ctx *c, void *dst, const void *src, size_t rows, int C, int Cp,
                        size_t es);
/* dst [rows, C] = the first C columns of src [rows, Cp] */
void conv_unpad_cols_cuda(Ctx *c, void *dst, const void *src, size_t rows, int C, int Cp,
                          size_t es);

/* The patch kernel (ops/conv2d_im2col.cu): cols [nb P Q, kp] of images
 * [n0, n0 + nb) of x, on stream st. */
void conv_im2col_cuda(void *cols, const void *x, DType dt, const Conv2dShape *s, int n0,
                      int nb, int kp, cudaStream_t st);
#endif

#ifdef __cplusplus
}
#endif

#endif
