/* dropout_op.c — tensor ops dropout / dropout_at and their backward (math
 * in ops/dropout.h).
 *
 * Shape letters: n elements. The node stores p, seed and offset; nothing is
 * saved: the backward regenerates the mask from (seed, offset), so dropout
 * costs no activation memory beyond its output.
 */
#include "dropout.h"

#include "engine/autograd.h"
#include "cpu_f32.h"
#include "op_util.h"

/* forward: y = keep ? x * s : 0   so   dx += keep ? dy * s : 0 */
static void dropout_backward(Ctx *c, Node *n)
{
    int accum;
    Tensor *dy = n->out->grad, *dx = ad_grad_dst(c, n->in[0], &accum);
    if (!dx) return;
    float p = n->f[0];
    uint64_t seed = (uint64_t)n->i[0], offset = (uint64_t)n->i[1];
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        dropout_backward_cuda(dx->data, dy->data, dx->dtype, p, seed, offset, c->rng_base,
                              dx->numel, accum,
                              c->stream);
#endif
    } else {
        F32View vdx = f32_view(dx, accum), vdy = f32_view(dy, 1);
        dropout_backward_cpu(vdx.p, vdy.p, p, seed, offset, dx->numel, accum);
        f32_done(&vdx, 1); f32_done(&vdy, 0);
    }
}

Tensor *op_dropout_at(Ctx *c, Tensor *x, float p, uint64_t seed, uint64_t offset)
{
    op_check_float("dropout", x);
    op_check_device("dropout", c, x);
    if (!(p >= 0.0f && p <= 1.0f))
        ct_fatal_hint("pass a dropout probability such as 0.1 (BERT)",
                      "dropout: p = %g is outside [0, 1]", (double)p);
    if (p == 0.0f) {
        tensor_retain(x);
        return x;
    }
    Tensor *y = tensor_new_like(c, x, x->dtype);
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        dropout_forward_cuda(y->data, x->data, x->dtype, p, seed, offset, c->rng_base, x->numel,
                             c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1), vy = f32_view(y, 0);
        dropout_forward_cpu(vy.p, vx.p, p, seed, offset, x->numel);
        f32_done(&vx, 0); f32_done(&vy, 1);
    }
    if (ad_needs_grad(c, &x, 1)) {
        Node *n = ad_record(c, "dropout", dropout_backward, y, &x, 1);
        n->f[0] = p;
        n->i[0] = (int64_t)seed;
        n->i[1] = (int64_t)offset;
    }
    return y;
}

Tensor *op_dropout(Ctx *c, Tensor *x, float p)
{
    if (p == 0.0f) return op_dropout_at(c, x, p, c->seed, c->rng_offset);
    uint64_t offset = ctx_rng_take(c, drop_blocks(x->numel));
    return op_dropout_at(c, x, p, c->seed, offset);
}
