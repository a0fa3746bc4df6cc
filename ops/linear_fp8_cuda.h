/* linear_fp8_cuda.h — the FP8 Linear's GPU half (linear_fp8_cuda.c), called
 * by the op (linear_fp8.c): the forward and backward on the device. */
#ifndef CTRAIN_OPS_LINEAR_FP8_CUDA_H
#define CTRAIN_OPS_LINEAR_FP8_CUDA_H

#ifdef CTRAIN_CUDA
#include "engine/autograd.h"
#include "fp8_recipe.h"

/* The forward on the device: *y (which it may replace by a new tensor) and
 * *wqT_out, w's transposed codes for the backward. x's codes go to xq and
 * xqT when cast_x, scaled by recipe layer xlayer's x slot (then layer);
 * without cast_x they hold a shared input's codes already (that slot's
 * scale). gelu: x is h and the layer's input GELU(h) (op_linear_fp8_gelu). */
void linear_fp8_forward_cuda(Ctx *c, Fp8Recipe *r, int layer, Tensor **y, Tensor *x, Tensor *w,
                             Tensor *bias, Tensor *xq, Tensor *xqT, int xlayer, int cast_x,
                             Tensor **wqT_out, int R, int In, int Out, int gelu);
/* y, an FP8 Linear's output, marked with how its backward casts the
 * gradient (recipe layer `layer`'s gradient slot, E5M2; the column sums are
 * handed over too, for a bias) so that the op making that gradient may hand over the
 * codes instead (Tensor.grad_cast; CTRAIN_FP8_DZ_CODES, else nothing). */
void linear_fp8_mark_grad_cast(Ctx *c, Tensor *y, Fp8Recipe *r, int layer);
/* The backward of the node the op recorded (saved: xqT, wqT, and h with
 * gelu); xlayer as in the forward. */
void linear_fp8_backward_cuda(Ctx *c, Node *n, Fp8Recipe *r, int layer, int xlayer, int R,
                              int In, int Out, int gelu);
/* The backward of op_ffn_fp8's node (inputs x, w1, b1, w2, b2; saved: x's
 * transposed codes, w1's, h, GELU(h)'s transposed codes, w2's; recipe layers
 * l1, l2; x [R, D], h [R, Hd], y [R, Out]). */
void ffn_fp8_backward_cuda(Ctx *c, Node *n, Fp8Recipe *r, int l1, int l2, int R, int D, int Hd,
                           int Out);
#endif

#endif
