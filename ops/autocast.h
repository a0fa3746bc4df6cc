/* autocast.h — the autocast policy: which type each op computes in when the
 * context autocasts (ctx->autocast = DT_F16 or DT_BF16; DT_F32: off), and the
 * casts that bring an op's inputs and weights to it.
 *
 * The policy, as the ops do it:
 *   - matmul, linear, conv2d, attention: an f32 input is cast to the
 *     autocast type through a recorded cast (autocast_cast_input: the
 *     gradient flows back to the f32 input through the cast's node); an
 *     input already in f16 / bf16 stays as it is. The op runs in that type
 *     on the tensor cores with f32 accumulation (cuBLASLt, cuDNN, the flash
 *     kernels keep f32 accumulators) and returns that type. Weights and
 *     biases are read in it through an unrecorded cast
 *     (autocast_cast_weight): the parameter's f16 / bf16 working copy
 *     (engine/params.h: params_lowp_enable) when it has one, no cast at
 *     all; the weight's gradient still lands in its f32 gradient buffer,
 *     written by the op's own backward.
 *   - embedding: the table stays f32; the lookup writes its output in the
 *     autocast type (autocast_dtype of the f32 table), rounding while it
 *     gathers: no cast op, no copy of the table.
 *   - softmax, layernorm, batch-norm statistics, losses, reductions: f32
 *     math whatever the storage type. They need no call here: their kernels
 *     compute in f32 and keep x's storage type for y (softmax, layernorm,
 *     batch norm) or return f32 (losses, reductions); gamma, beta and the
 *     running statistics are read in f32 from the parameter buffer.
 * The same rule in math: for an op of the first kind with an input of type
 * t,   compute type = (autocast != f32 and t == f32) ? autocast : t.
 */
#ifndef CTRAIN_OPS_AUTOCAST_H
#define CTRAIN_OPS_AUTOCAST_H

#include "engine/ctx.h"
#include "engine/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The type a matmul, linear, conv2d or attention op computes in (and an
 * embedding writes) for an input of type `in` under c's autocast: the
 * autocast type for an f32 input when autocast is on, else `in`. */
DType autocast_dtype(const Ctx *c, DType in);

/* x in its compute type (autocast_dtype): a recorded cast (op_cast) when
 * that differs from x's type, so the gradient flows back to x in x's type;
 * else x itself. Either way the caller owns one new reference. */
Tensor *autocast_cast_input(Ctx *c, Tensor *x);

/* w read in type dt, unrecorded (grad mode off around op_cast): a
 * parameter's AMP working copy when it has one of type dt, w itself when
 * it already has type dt, else a fresh cast. The gradient reaches w's own
 * buffer through the op that reads the result. The caller owns one new
 * reference. */
Tensor *autocast_cast_weight(Ctx *c, Tensor *w, DType dt);

#ifdef __cplusplus
}
#endif
#endif
