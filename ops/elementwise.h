/* elementwise.h — add, mul, scale, bias-add, relu, gelu, tanh, cast, fill.
 *
 * The CUDA scale, cast and fill are declared in engine/kernels.h (the engine
 * launches them itself, so they live there); it is included here so that
 * op code keeps one header for elementwise work.
 *
 * Kernel-level contract (raw pointers; the tensor ops in ops/elementwise_op.c
 * dispatch here). Shape letters: n elements; R rows, C columns (last dim).
 *
 * CPU references take f32. CUDA launchers take storage type `dt` in
 * {DT_F32, DT_F16, DT_BF16} for every activation pointer and compute in f32.
 * Parameter gradients (db) are always f32 (the one f32 gradient buffer).
 *
 * `accum`: 0 writes the result, 1 adds it to what the output holds. Backward
 * kernels use it so gradients from several consumers add up without a
 * memset or an extra pass.
 */
#ifndef CTRAIN_OPS_ELEMENTWISE_H
#define CTRAIN_OPS_ELEMENTWISE_H

#include <stddef.h>
#include "engine/dtype.h"
#include "engine/kernels.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ACT_NONE: no activation (the kernels' plain column sum; not an op) */
typedef enum { ACT_RELU = 0, ACT_GELU, ACT_TANH, ACT_NONE } ActKind;

/* ---- CPU reference (f32) ---- */
/* forward: y = a + b */
void add_forward_cpu(float *y, const float *a, const float *b, size_t n);
/* forward: y = alpha * x; also the backward of add (alpha 1) and scale:
 * dx (+)= alpha * dy */
void scale_forward_cpu(float *y, const float *x, float alpha, size_t n, int accum);
/* forward: y = a * b */
void mul_forward_cpu(float *y, const float *a, const float *b, size_t n);
/* backward of y = a * b: da (+)= dy * b, db (+)= dy * a; da or db may be NULL */
void mul_backward_cpu(float *da, float *db, const float *dy, const float *a,
                      const float *b, size_t n, int accum_a, int accum_b);
/* forward: y[r,c] = x[r,c] + b[c] */
void bias_add_forward_cpu(float *y, const float *x, const float *b, size_t R, size_t C);
/* backward of bias-add for the bias: db[c] (+)= sum_r dy[r,c] (dx is scale 1) */
void bias_backward_cpu(float *db, const float *dy, size_t R, size_t C, int accum);
/* forward: y = act(x); relu: max(x,0); gelu: x * Phi(x) = 0.5 x (1 + erf(x/sqrt2));
 * tanh: tanh(x) */
void act_forward_cpu(ActKind k, float *y, const float *x, size_t n);
/* backward: dx (+)= dy * act'(x). relu and gelu read x, tanh reads y (1 - y^2). */
void act_backward_cpu(ActKind k, float *dx, const float *dy, const float *x,
                      const float *y, size_t n, int accum);

#ifdef CTRAIN_CUDA
/* ---- CUDA (dt = storage type of every activation pointer) ---- */
void add_forward_cuda(void *y, const void *a, const void *b, DType dt, size_t n,
                      cudaStream_t s);
void mul_forward_cuda(void *y, const void *a, const void *b, DType dt, size_t n,
                      cudaStream_t s);
void mul_backward_cuda(void *da, void *db, const void *dy, const void *a,
                       const void *b, DType dt, size_t n, int accum_a, int accum_b,
                       cudaStream_t s);
/* b has type dt as well (under AMP the op layer passes the low-precision copy) */
void bias_add_forward_cuda(void *y, const void *x, const void *b, DType dt,
                           size_t R, size_t C, cudaStream_t s);
/* db is f32; dy has type dt; column sums accumulated in f32 */
void bias_backward_cuda(float *db, const void *dy, DType dt, size_t R, size_t C,
                        int accum, cudaStream_t s);
void act_forward_cuda(ActKind k, void *y, const void *x, DType dt, size_t n,
                      cudaStream_t s);
void act_backward_cuda(ActKind k, void *dx, const void *dy, const void *x,
                       const void *y, DType dt, size_t n, int accum, cudaStream_t s);
/* The backward of y = act(h) for relu or gelu with the column sums of its
 * result, h and dh [R, C]: dh = dy act'(h) (act_backward_cuda's bits,
 * written, not added) and db[c] (+)= sum_r dh[r, c] (f32; accum_b) in one
 * pass: the bias gradient of the Linear that made h (op_linear_act). The
 * same bits as act_backward_cuda then bias_backward_cuda over dh (the same
 * summation order); db NULL, or a shape / alignment the vector kernel does
 * not take, runs those two passes. */
void act_backward_colsum_cuda(ActKind k, void *dh, float *db, int accum_b, const void *dy,
                              const void *h, DType dt, size_t R, size_t C, cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif
#endif
