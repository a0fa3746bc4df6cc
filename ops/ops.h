/* ops.h — the tensor-level operators: what model code calls.
 *
 * Every op here takes the context first, then its input tensors, then its
 * parameters, and returns a new tensor (the caller owns one reference and
 * releases it when done). Each op:
 *   1. checks shapes and dtypes (a mismatch is a clear fatal error);
 *   2. dispatches on device and dtype to the kernel-level functions
 *      (ops/<family>.c on the CPU, ops/<family>.cu on CUDA);
 *   3. when grad mode is on and an input requires grad, records a node whose
 *      backward function sits right below the forward in the op's file.
 * Model code never calls a kernel directly.
 *
 * On the CPU, f16 and bf16 tensors are computed by converting to f32,
 * running the f32 reference and rounding the result back: the same
 * semantics as the GPU kernels (f32 math, rounded storage).
 *
 * Autocast (ctx->autocast = DT_F16 or DT_BF16): matmul and linear cast their
 * f32 inputs to the low-precision type (recorded casts, so gradients flow
 * back in f32 to the parameters) and run on tensor cores with f32
 * accumulation; softmax, losses and reductions always compute in f32.
 */
#ifndef CTRAIN_OPS_OPS_H
#define CTRAIN_OPS_OPS_H

#include "engine/ctx.h"
#include "engine/tensor.h"
#include "elementwise.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise (ops/elementwise_op.c) ---- */
Tensor *op_add(Ctx *c, Tensor *a, Tensor *b);            /* a + b, same shape */
Tensor *op_mul(Ctx *c, Tensor *a, Tensor *b);            /* a * b, same shape */
Tensor *op_scale(Ctx *c, Tensor *x, float alpha);        /* alpha * x */
Tensor *op_bias_add(Ctx *c, Tensor *x, Tensor *b);       /* x[..., j] + b[j] */
Tensor *op_relu(Ctx *c, Tensor *x);
Tensor *op_gelu(Ctx *c, Tensor *x);                      /* erf form */
Tensor *op_tanh(Ctx *c, Tensor *x);
Tensor *op_act(Ctx *c, Tensor *x, ActKind k);
Tensor *op_cast(Ctx *c, Tensor *x, DType to);            /* gradient cast back */

/* ---- reductions (ops/reduce_op.c): outputs are f32 ---- */
Tensor *op_sum(Ctx *c, Tensor *x);                       /* all elements -> [1] */
Tensor *op_mean(Ctx *c, Tensor *x);                      /* all elements -> [1] */
Tensor *op_sum_last(Ctx *c, Tensor *x);                  /* [..., C] -> [...] */
Tensor *op_mean_last(Ctx *c, Tensor *x);

/* ---- softmax and loss (ops/softmax_op.c) ---- */
Tensor *op_softmax(Ctx *c, Tensor *x);                   /* over the last dim */
/* Mean cross-entropy of logits [R, C] against i32 targets [R] -> f32 [1].
 * Rows whose target equals ignore_index do not count; label smoothing eps. */
Tensor *op_cross_entropy(Ctx *c, Tensor *logits, Tensor *targets, int ignore_index,
                         float smoothing);

/* ---- matmul (ops/matmul_op.c) ---- */
/* a [.., M, K] (or [.., K, M] with ta) times b [.., K, N] (or [.., N, K] with
 * tb). 2-D or 3-D; a 2-D operand broadcasts over the other's batch. */
Tensor *op_matmul(Ctx *c, Tensor *a, Tensor *b, int ta, int tb);
/* y = x w^T + bias, x [..., in], w [out, in] (PyTorch nn.Linear), bias [out] or NULL */
Tensor *op_linear(Ctx *c, Tensor *x, Tensor *w, Tensor *bias);
/* op_linear with y's rows `cols` (>= out) elements long: y[..., :out] the
 * Linear's, y[..., out:] a large negative padding (every byte 0xF8: f16
 * -40,704, bf16 / f32 about -4.0e34) with no gradient, which softmax and
 * cross entropy turn into probability 0. For logits whose count is not a
 * multiple of 8 (BERT's 30,522 words): on CUDA the forward and dx GEMMs
 * run over all cols outputs on a zero-padded copy of w (saved for the
 * backward: cols x in more memory), dw's reads dy's first out columns in
 * place (ops/matmul.h, MatmulLd), so cuBLASLt takes its aligned kernels.
 * dy's padding columns must be finite (cross entropy makes them 0). */
Tensor *op_linear_pad(Ctx *c, Tensor *x, Tensor *w, Tensor *bias, int cols);
/* y = act(x w^T + bias), act relu or gelu: op_linear then op_act as one node
 * (the same forward bits); its backward sums the bias gradient in the
 * activation's pass where CTRAIN_LINEAR_ACT_BGRAD=1 (ops/matmul_op.c). Saves
 * h = x w^T + bias, as op_act would. */
Tensor *op_linear_act(Ctx *c, Tensor *x, Tensor *w, Tensor *bias, ActKind k);

#ifdef __cplusplus
}
#endif
#endif
