/* autocast.c — the autocast policy of ops/autocast.h (read it first): one
 * rule for the compute type, and the two casts the op wrappers use
 * (ops/matmul_op.c, ops/conv2d_op.c, ops/attention_op.c,
 * ops/embedding_op.c). Both casts go through op_cast, so autograd sees a
 * recorded cast as its own node and a parameter's working copy is found in
 * one place (ops/elementwise_op.c).
 */
#include "autocast.h"

#include "engine/autograd.h"
#include "ops.h"

DType autocast_dtype(const Ctx *c, DType in)
{
    return c->autocast != DT_F32 && in == DT_F32 ? c->autocast : in;
}

Tensor *autocast_cast_input(Ctx *c, Tensor *x)
{
    DType dt = autocast_dtype(c, x->dtype);
    if (dt != x->dtype) return op_cast(c, x, dt);
    tensor_retain(x);
    return x;
}

Tensor *autocast_cast_weight(Ctx *c, Tensor *w, DType dt)
{
    /* grad off: op_cast then hands out the working copy, and records nothing */
    int g = ad_set_grad(c, 0);
    Tensor *r = op_cast(c, w, dt);
    ad_set_grad(c, g);
    return r;
}
