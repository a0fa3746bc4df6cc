/* permute_op.c — tensor ops transpose12 and reshape, with backward. */
#include "permute.h"

#include <string.h>
#include "engine/autograd.h"
#include "cpu_f32.h"
#include "elementwise.h"
#include "op_util.h"

static void transpose12_run(Ctx *c, Tensor *y, Tensor *x, int accum)
{
    size_t A = (size_t)x->shape[0], B = (size_t)x->shape[1], C = (size_t)x->shape[2];
    size_t D = (size_t)x->shape[3];
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        transpose12_cuda(y->data, x->data, x->dtype, A, B, C, D, accum, c->stream);
#endif
        return;
    }
    F32View vx = f32_view(x, 1), vy = f32_view(y, accum);
    transpose12_cpu(vy.p, vx.p, A, B, C, D, accum);
    f32_done(&vx, 0);
    f32_done(&vy, 1);
}

/* forward: y[a,c,b,d] = x[a,b,c,d]   so   dx[a,b,c,d] += dy[a,c,b,d] */
static void transpose12_backward(Ctx *c, Node *n)
{
    int accum;
    Tensor *dx = ad_grad_dst(c, n->in[0], &accum);
    if (dx) transpose12_run(c, dx, n->out->grad, accum);
}

Tensor *op_transpose12(Ctx *c, Tensor *x)
{
    char d[96];
    op_check_float("transpose12", x);
    op_check_device("transpose12", c, x);
    if (x->ndim != 4) ct_fatal("transpose12: input %s must be 4-D", tensor_desc(d, sizeof d, x));
    int64_t shape[4] = {x->shape[0], x->shape[2], x->shape[1], x->shape[3]};
    Tensor *y = tensor_new(c, x->dtype, 4, shape);
    transpose12_run(c, y, x, 0);
    if (ad_needs_grad(c, &x, 1)) ad_record(c, "transpose12", transpose12_backward, y, &x, 1);
    return y;
}

/* forward: y = x viewed as another shape   so   dx += dy (viewed back; the
 * first gradient x gets is dy itself, no copy: ad_grad_pass) */
static void reshape_backward(Ctx *c, Node *n)
{
    if (ad_grad_pass(n->in[0], n->out->grad)) return;
    int accum;
    Tensor *dx = ad_grad_dst(c, n->in[0], &accum), *dy = n->out->grad;
    if (!dx) return;
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        scale_forward_cuda(dx->data, dy->data, 1.0f, dx->dtype, dx->numel, accum, c->stream);
#endif
        return;
    }
    F32View vdx = f32_view(dx, accum), vdy = f32_view(dy, 1);
    scale_forward_cpu(vdx.p, vdy.p, 1.0f, dx->numel, accum);
    f32_done(&vdx, 1);
    f32_done(&vdy, 0);
}

Tensor *op_reshape(Ctx *c, Tensor *x, int ndim, const int64_t *shape)
{
    char d[96];
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    if (n != x->numel)
        ct_fatal("reshape: %s has %zu elements, the new shape %zu", tensor_desc(d, sizeof d, x),
                 x->numel, n);
    /* a view: no copy; it keeps x's data alive until the view is released */
    Tensor *y = tensor_reshape_view(x, ndim, shape);
    if (ad_needs_grad(c, &x, 1)) ad_record(c, "reshape", reshape_backward, y, &x, 1);
    return y;
}
