/* conv2d_op.c — the tensor op conv2d (NHWC, groups 1, no bias) and its
 * backward, dispatching to ops/conv2d.c (CPU) and ops/conv2d_cudnn.c (CUDA).
 *
 *   x [N, H, W, C], w [K, R, S, C] (OHWI, as the registry stores conv
 *   weights) -> y [N, P, Q, K];   y = conv(x, w)
 *   dx (+)= conv_backward_data(dy, w)     in the activation type
 *   dw  += conv_backward_filter(dy, x)    into w's gradient (f32 for parameters)
 *
 * Autocast (c->autocast = f16/bf16; the policy: ops/autocast.h) as op_linear
 * does it: an f32 x is cast with a recorded op_cast, so its gradient flows
 * back in f32; the weight is cast unrecorded to the compute type (the
 * low-precision working copy the kernels read), and its gradient still
 * lands in the f32 parameter.
 */
#include "conv2d.h"

#include <limits.h>

#include "engine/autograd.h"
#include "autocast.h"
#include "cpu_f32.h"
#include "op_util.h"
#include "ops.h"

/* n->i[] layout of a conv2d node */
enum { CI_STRIDE_H = 0, CI_STRIDE_W, CI_PAD_H, CI_PAD_W, CI_DIL_H, CI_DIL_W, CI_X, CI_W };

/* The shape of x conv w; shapes were checked by the forward. */
static Conv2dShape conv_op_shape(const Tensor *x, const Tensor *w, const int64_t *i)
{
    return conv2d_shape((int)x->shape[0], (int)x->shape[1], (int)x->shape[2], (int)x->shape[3],
                        (int)w->shape[0], (int)w->shape[1], (int)w->shape[2], (int)i[CI_STRIDE_H],
                        (int)i[CI_STRIDE_W], (int)i[CI_PAD_H], (int)i[CI_PAD_W],
                        (int)i[CI_DIL_H], (int)i[CI_DIL_W]);
}

/* ---- the three directions on tensors, by c's device ---- */

void conv2d_run_forward(Ctx *c, Tensor *y, Tensor *x, Tensor *w, const Conv2dShape *s)
{
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        conv2d_forward_cuda(c, y->data, x->data, w->data, x->dtype, s);
#endif
    } else {
        F32View vx = f32_view(x, 1), vw = f32_view(w, 1), vy = f32_view(y, 0);
        conv2d_forward_cpu(vy.p, vx.p, vw.p, s);
        f32_done(&vx, 0); f32_done(&vw, 0); f32_done(&vy, 1);
    }
}

void conv2d_run_backward_data(Ctx *c, Tensor *dx, Tensor *dy, Tensor *w, const Conv2dShape *s,
                              int accum)
{
    CT_ASSERT(dx->dtype == dy->dtype,
              "conv2d backward: dx %s, dy %s (the input gradient has the input's type)",
              dtype_name(dx->dtype), dtype_name(dy->dtype));
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        conv2d_backward_data_cuda(c, dx->data, dy->data, w->data, dy->dtype, s, accum);
#endif
    } else {
        F32View vdx = f32_view(dx, accum), vdy = f32_view(dy, 1), vw = f32_view(w, 1);
        conv2d_backward_data_cpu(vdx.p, vdy.p, vw.p, s, accum);
        f32_done(&vdx, 1); f32_done(&vdy, 0); f32_done(&vw, 0);
    }
}

void conv2d_run_backward_filter(Ctx *c, Tensor *dw, Tensor *dy, Tensor *x, const Conv2dShape *s,
                                int accum)
{
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        conv2d_backward_filter_cuda(c, dw->data, dw->dtype, dy->data, x->data, dy->dtype, s,
                                    accum);
#endif
    } else {
        F32View vdw = f32_view(dw, accum), vdy = f32_view(dy, 1), vx = f32_view(x, 1);
        conv2d_backward_filter_cpu(vdw.p, vdy.p, vx.p, s, accum);
        f32_done(&vdw, 1); f32_done(&vdy, 0); f32_done(&vx, 0);
    }
}

/* forward: y = conv(x, w)
 * so   dx (+)= conv^T(dy, w)   (dy's type; the saved low-precision weight)
 *      dw  += corr(x, dy)      (w's gradient: f32 for a parameter) */
static void conv2d_backward(Ctx *c, Node *n)
{
    Tensor *dy = n->out->grad;
    Tensor *x = n->i[CI_X] >= 0 ? n->saved[n->i[CI_X]] : NULL;
    Tensor *wl = n->i[CI_W] >= 0 ? n->saved[n->i[CI_W]] : NULL;
    Conv2dShape s = conv_op_shape(n->in[0], n->in[1], n->i);
    int acc;
    Tensor *dx = ad_grad_dst(c, n->in[0], &acc);
    if (dx) {
        CT_ASSERT(wl != NULL, "conv2d backward: the weight was not saved");
        conv2d_run_backward_data(c, dx, dy, wl, &s, acc);
    }
    Tensor *dw = ad_grad_dst(c, n->in[1], &acc);
    if (dw) {
        CT_ASSERT(x != NULL, "conv2d backward: the input was not saved");
        conv2d_run_backward_filter(c, dw, dy, x, &s, acc);
    }
}

void conv2d_check_operands(const char *op, const Ctx *c, const Tensor *x, const Tensor *w)
{
    char dx[96], dw[96];
    op_check_float(op, x);
    op_check_float(op, w);
    op_check_device(op, c, x);
    op_check_device(op, c, w);
    if (x->ndim != 4)
        ct_fatal_hint("images are NHWC: permute [N, C, H, W] data to [N, H, W, C]",
                      "%s: input %s must be 4-D [N, H, W, C]", op, tensor_desc(dx, 96, x));
    if (w->ndim != 4 || w->shape[3] != x->shape[3])
        ct_fatal_hint("conv weights are [K, R, S, C] in memory (register them with LAYOUT_OHWI)",
                      "%s: weight %s does not fit input %s (weight [K, R, S, C], input "
                      "[N, H, W, C], C must match)",
                      op, tensor_desc(dw, 96, w), tensor_desc(dx, 96, x));
    for (int d = 0; d < 4; d++)
        if (x->shape[d] > INT_MAX || w->shape[d] > INT_MAX)
            ct_fatal("%s: dimension too large in input %s or weight %s", op,
                     tensor_desc(dx, 96, x), tensor_desc(dw, 96, w));
}

/* op_conv2d_ex whose forward runs fwd(c, y, x, w, s, arg) (NULL:
 * conv2d_run_forward) */
static Tensor *conv2d_op(Ctx *c, Tensor *x0, Tensor *w0, int stride_h, int stride_w, int pad_h,
                         int pad_w, int dil_h, int dil_w, Conv2dForwardFn fwd, void *arg)
{
    conv2d_check_operands("conv2d", c, x0, w0);
    int64_t prm[8] = {stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, -1, -1};
    Conv2dShape s = conv_op_shape(x0, w0, prm);

    /* autocast: x to the compute type (recorded), w read in it (unrecorded) */
    Tensor *x = autocast_cast_input(c, x0);
    Tensor *wl = autocast_cast_weight(c, w0, x->dtype);

    int64_t yshape[4] = {s.N, s.P, s.Q, s.K};
    Tensor *y = tensor_new(c, x->dtype, 4, yshape);
    if (fwd)
        fwd(c, y, x, wl, &s, arg);
    else
        conv2d_run_forward(c, y, x, wl, &s);

    Tensor *in[2] = {x, w0};
    if (ad_needs_grad(c, in, 2)) {
        Node *n = ad_record(c, "conv2d", conv2d_backward, y, in, 2);
        for (int k = 0; k < 8; k++) n->i[k] = prm[k];
        /* keep only what the backward will read: x for dw, the weight for dx */
        if (w0->requires_grad) { n->i[CI_X] = n->n_saved; ad_save(n, x); }
        if (x->requires_grad) { n->i[CI_W] = n->n_saved; ad_save(n, wl); }
    }
    tensor_release(x);
    tensor_release(wl);
    return y;
}

Tensor *op_conv2d_ex(Ctx *c, Tensor *x, Tensor *w, int stride_h, int stride_w, int pad_h,
                     int pad_w, int dil_h, int dil_w)
{
    return conv2d_op(c, x, w, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, NULL, NULL);
}

Tensor *op_conv2d_with(Ctx *c, Tensor *x, Tensor *w, int stride, int pad, Conv2dForwardFn fwd,
                       void *arg)
{
    return conv2d_op(c, x, w, stride, stride, pad, pad, 1, 1, fwd, arg);
}

Tensor *op_conv2d(Ctx *c, Tensor *x, Tensor *w, int stride, int pad, int dil)
{
    return op_conv2d_ex(c, x, w, stride, stride, pad, pad, dil, dil);
}
