/* pool.h — 2-D max pooling and global average pooling over NHWC images.
 *
 * Shape letters: x [N, H, W, C]; max pool output [N, P, Q, C] with
 *   P = floor((H + 2 pad - k) / s) + 1,  Q = floor((W + 2 pad - k) / s) + 1
 * (PyTorch's MaxPool2d with dilation 1 and ceil_mode False).
 *
 * max pool:  y[n,p,q,c] = max over the window h = p s - pad + i, w = q s - pad + j
 *            (0 <= i, j < k) of x[n,h,w,c]; padded positions count as -inf,
 *            so they never win (pad <= k / 2 keeps a real pixel in every window).
 *            code[n,p,q,c] = i k + j of the winner: its place in the window
 *            (padding counted, so a clipped window's codes start above 0;
 *            PyTorch's index h W + w = (p s - pad + i) W + q s - pad + j).
 *            One byte a code where k <= 16 (k^2 <= 256 places), else i32:
 *            maxpool_code_bytes(k); at ResNet's stem pool the saved codes
 *            are a quarter of i32 indices' bytes. Ties: the first maximum in
 *            window order (rows top to bottom, then columns left to right)
 *            wins — the comparison is strict. NaN wins (as in PyTorch): a NaN
 *            replaces the current maximum, so the last NaN of the window is
 *            taken.
 *   backward: dx[n,h,w,c] (+)= sum of dy[n,p,q,c] over the outputs whose
 *            window holds (h, w) at the place its code names, i k + j with
 *            i = h - (p s - pad), j = w - (q s - pad). Each dx element
 *            gathers in the fixed order p, then q ascending: deterministic
 *            without atomics, and correct for overlapping windows (k > s).
 * global average pool: y[n,c] = (1/HW) sum_{h,w} x[n,h,w,c],  HW = H W
 *   backward: dx[n,h,w,c] (+)= dy[n,c] / HW
 *
 * Kernel contract: CPU references on f32; CUDA launchers take the storage
 * type dt (f32, f16, bf16) of x, y, dx, dy and compute in f32 (max pool
 * copies values exactly). code may be NULL in the max pool forward (no
 * backward will run). accum: 0 writes dx, 1 adds to it. The outputs of
 * global average pooling keep x's type (the sum runs in f32).
 */
#ifndef CTRAIN_OPS_POOL_H
#define CTRAIN_OPS_POOL_H

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

/* floor((H + 2 pad - k) / s) + 1; 0 when the padded input is shorter than k. */
int pool_out_size(int H, int k, int s, int pad);

/* Bytes of one max pool code (the winner's place in the k x k window): 1
 * (u8) for k <= 16, else 4 (i32). */
int maxpool_code_bytes(int k);

/* ---- CPU reference (f32) ---- */
void maxpool2d_forward_cpu(float *y, void *code, const float *x, int k, int s, int pad, int N,
                           int H, int W, int C);
void maxpool2d_backward_cpu(float *dx, const float *dy, const void *code, int k, int s,
                            int pad, int N, int H, int W, int C, int accum);
/* HW = H * W: x is [N, HW, C], y [N, C] */
void avgpool_global_forward_cpu(float *y, const float *x, int N, int HW, int C);
void avgpool_global_backward_cpu(float *dx, const float *dy, int N, int HW, int C, int accum);

#ifdef CTRAIN_CUDA
/* ---- CUDA (dt = storage type of x, y, dx, dy) ---- */
void maxpool2d_forward_cuda(void *y, void *code, const void *x, DType dt, int k, int s,
                            int pad, int N, int H, int W, int C, cudaStream_t st);
void maxpool2d_backward_cuda(void *dx, const void *dy, const void *code, DType dt, int k,
                             int s, int pad, int N, int H, int W, int C, int accum,
                             cudaStream_t st);
void avgpool_global_forward_cuda(void *y, const void *x, DType dt, int N, int HW, int C,
                                 cudaStream_t st);
void avgpool_global_backward_cuda(void *dx, const void *dy, DType dt, int N, int HW, int C,
                                  int accum, cudaStream_t st);
#endif

/* ---- tensor ops (ops/pool_op.c) ---- */
/* x [N, H, W, C] -> [N, P, Q, C]; kernel k, stride s, padding pad (pad <= k / 2). */
Tensor *op_maxpool2d(Ctx *c, Tensor *x, int k, int s, int pad);
/* x [N, H, W, C] -> [N, C], same dtype (f32 accumulation). */
Tensor *op_avgpool_global(Ctx *c, Tensor *x);

#ifdef __cplusplus
}
#endif
#endif
