/* softmax_op.c — tensor ops softmax (last dim) and the fused log-softmax +
 * cross-entropy loss, with their backward. */
#include "ops.h"

#include "engine/autograd.h"
#include "cpu_f32.h"
#include "op_flags.h"
#include "op_util.h"
#include "softmax.h"

/* forward: y = softmax(x)   so   dx += y * (dy - sum_j dy_j y_j) */
static void softmax_backward(Ctx *c, Node *n)
{
    int accum;
    Tensor *dy = n->out->grad, *y = n->saved[0], *dx = ad_grad_dst(c, n->in[0], &accum);
    if (!dx) return;
    size_t R = tensor_rows(y), C = tensor_cols(y);
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        softmax_backward_cuda(dx->data, dy->data, y->data, y->dtype, R, C, accum, c->stream);
#endif
    } else {
        F32View vdx = f32_view(dx, accum), vdy = f32_view(dy, 1), vy = f32_view(y, 1);
        softmax_backward_cpu(vdx.p, vdy.p, vy.p, R, C, accum);
        f32_done(&vdx, 1); f32_done(&vdy, 0); f32_done(&vy, 0);
    }
}

Tensor *op_softmax(Ctx *c, Tensor *x)
{
    op_check_float("softmax", x);
    op_check_device("softmax", c, x);
    size_t R = tensor_rows(x), C = tensor_cols(x);
    Tensor *y = tensor_new_like(c, x, x->dtype);
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        softmax_forward_cuda(y->data, x->data, x->dtype, R, C, c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1), vy = f32_view(y, 0);
        softmax_forward_cpu(vy.p, vx.p, R, C);
        f32_done(&vx, 0); f32_done(&vy, 1);
    }
    if (ad_needs_grad(c, &x, 1)) ad_save(ad_record(c, "softmax", softmax_backward, y, &x, 1), y);
    return y;
}

/* forward: loss = mean over valid rows of -sum_c q[r,c] log softmax(x)[r,c]
 * so dx[r,c] += dloss * (softmax(x)[r,c] - q[r,c]) / nvalid (0 on ignored rows)
 * Each dx[r,c] reads x[r,c] alone, so where nothing else holds the logits
 * (the model let go of them) dx is written over them: ad_grad_over. */
static void cross_entropy_backward(Ctx *c, Node *n)
{
    int accum;
    Tensor *dx = ad_grad_over(c, n, 0, &accum);
    if (!dx) return;
    Tensor *x = n->saved[0], *t = n->saved[1], *lse = n->saved[2], *nvalid = n->saved[3];
    const float *dloss = (const float *)n->out->grad->data;
    size_t R = tensor_rows(x), C = tensor_cols(x);
    int ignore = (int)n->i[0];
    float eps = n->f[0];
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        cross_entropy_backward_cuda(dx->data, dloss, x->data, (const float *)lse->data,
                                    (const float *)nvalid->data, x->dtype,
                                    (const int32_t *)t->data, R, C, ignore, eps, accum,
                                    c->stream);
#endif
    } else {
        F32View vdx = f32_view(dx, accum), vx = f32_view(x, 1);
        cross_entropy_backward_cpu(vdx.p, dloss, vx.p, (const float *)lse->data,
                                   (const float *)nvalid->data, (const int32_t *)t->data,
                                   R, C, ignore, eps, accum);
        f32_done(&vdx, 1); f32_done(&vx, 0);
    }
}

Tensor *op_cross_entropy(Ctx *c, Tensor *x, Tensor *t, int ignore_index, float smoothing)
{
    char dx[96], dt[96];
    op_check_float("cross_entropy", x);
    op_check_device("cross_entropy", c, x);
    op_check_device("cross_entropy", c, t);
    size_t R = tensor_rows(x), C = tensor_cols(x);
    if (t->dtype != DT_I32 || t->numel != R)
        ct_fatal("cross_entropy: targets %s must be i32 with one label per row of logits %s",
                 tensor_desc(dt, sizeof dt, t), tensor_desc(dx, sizeof dx, x));
    if (smoothing < 0.0f || smoothing > 1.0f)
        ct_fatal("cross_entropy: label smoothing %g is outside [0, 1]", (double)smoothing);
    int64_t one = 1, r = (int64_t)R;
    Tensor *loss = tensor_new(c, DT_F32, 1, &one);
    Tensor *lse = tensor_new(c, DT_F32, 1, &r);
    Tensor *nvalid = tensor_new(c, DT_F32, 1, &one);
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        cross_entropy_forward_cuda((float *)loss->data, (float *)lse->data,
                                   (float *)nvalid->data, op_flag(c, OP_FLAG_XENT_TARGET),
                                   x->data, x->dtype, (const int32_t *)t->data, R, C,
                                   ignore_index, smoothing, c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1);
        cross_entropy_forward_cpu((float *)loss->data, (float *)lse->data,
                                  (float *)nvalid->data, vx.p, (const int32_t *)t->data, R, C,
                                  ignore_index, smoothing);
        f32_done(&vx, 0);
    }
    if (ad_needs_grad(c, &x, 1)) {
        Node *n = ad_record(c, "cross_entropy", cross_entropy_backward, loss, &x, 1);
        n->i[0] = ignore_index;
        n->f[0] = smoothing;
        ad_save(n, x);
        ad_save(n, t);
        ad_save(n, lse);
        ad_save(n, nvalid);
    }
    tensor_release(lse);
    tensor_release(nvalid);
    return loss;
}
