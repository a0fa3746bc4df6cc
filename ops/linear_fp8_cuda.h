/* linear_fp8_cuda.h — the FP8 Linear's GPU half (linear_fp8_cuda.c), called
 * by the op (linear_fp8.c): the forward and backward on the device. */
#ifndef CTRAIN_OPS_LINEAR_FP8_CUDA_H
#define CTRAIN_OPS_LINEAR_FP8_CUDA_H

#ifdef CTRAIN_CUDA
#include "engine/autograd.h"
#include "fp8_recipe.h"

/* The forward on the device: *y (which it may replace by a new tensor), and
 * in saved[] the FP8 tensors backward reads (the caller's xq and wq may be
 * released and replaced). */
void linear_fp8_forward_cuda(Ctx *c, Fp8Recipe *r, int layer, Tensor **y, Tensor *x, Tensor *w,
                             Tensor *bias, Tensor **saved, int R, int In, int Out);
void linear_fp8_backward_cuda(Ctx *c, Node *n, Fp8Recipe *r, int layer, int R, int In, int Out);
#endif

#endif
