/* pool_op.c — tensor ops max pool 2-D and global average pool (NHWC), with
 * their backward right under each forward; math in ops/pool.h.
 *
 * Shape letters: x [N, H, W, C]; max pool output [N, P, Q, C]; HW = H * W.
 *
 * Max pool saves the winners' codes ([N, P, Q, C], each the winner's place
 * i k + j in its k x k window: u8 for k <= 16, else i32; ops/pool.h) rather
 * than x: the backward then reads one small integer per output instead of
 * rescanning windows, and ties cannot be resolved differently on the way
 * back. At ResNet's stem pool (bs 256) the codes take 51 MB where PyTorch's
 * i64 indices take 411 and i32 ones 205, for the whole step. The codes are
 * computed only when a node is recorded. Global average pooling saves
 * nothing.
 */
#include "pool.h"

#include "engine/autograd.h"
#include "cpu_f32.h"
#include "op_util.h"
#include "ops.h"

#define IS_CUDA(c) ((c)->device == DEV_CUDA)

static void check_nhwc(const char *op, Ctx *c, Tensor *x)
{
    char d[96];
    op_check_float(op, x);
    op_check_device(op, c, x);
    if (x->ndim != 4)
        ct_fatal("%s: input %s must be an NHWC image batch [N, H, W, C]", op,
                 tensor_desc(d, sizeof d, x));
    for (int i = 0; i < 4; i++)
        if (x->shape[i] > 0x7fffffff)
            ct_fatal("%s: input %s has a dimension over 2^31", op, tensor_desc(d, sizeof d, x));
}

/* ---- max pool ---- */

/* forward: y[n,p,q,c] = x[n, p s - pad + code / k, q s - pad + code % k, c]
 *   so   dx[n,h,w,c] += sum of dy[n,p,q,c] over the windows that chose (h, w) */
static void maxpool_backward(Ctx *c, Node *n)
{
    int accum;
    Tensor *dx = ad_grad_dst(c, n->in[0], &accum);
    if (!dx) return;
    Tensor *dy = n->out->grad, *code = n->saved[0];
    int k = (int)n->i[0], s = (int)n->i[1], pad = (int)n->i[2];
    int N = (int)dx->shape[0], H = (int)dx->shape[1], W = (int)dx->shape[2];
    int C = (int)dx->shape[3];
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        maxpool2d_backward_cuda(dx->data, dy->data, code->data, dx->dtype, k, s, pad, N, H, W,
                                C, accum, c->stream);
#endif
    } else {
        F32View vdx = f32_view(dx, accum), vdy = f32_view(dy, 1);
        maxpool2d_backward_cpu(vdx.p, vdy.p, code->data, k, s, pad, N, H, W, C, accum);
        f32_done(&vdx, 1); f32_done(&vdy, 0);
    }
}

Tensor *op_maxpool2d(Ctx *c, Tensor *x, int k, int s, int pad)
{
    char d[96];
    check_nhwc("maxpool2d", c, x);
    int N = (int)x->shape[0], H = (int)x->shape[1], W = (int)x->shape[2], C = (int)x->shape[3];
    if (k < 1 || s < 1 || pad < 0)
        ct_fatal("maxpool2d: kernel %d, stride %d, padding %d: kernel and stride must be "
                 "positive, padding not negative", k, s, pad);
    if (pad > k / 2)
        ct_fatal("maxpool2d: padding %d is more than half the kernel %d (PyTorch refuses it "
                 "too: a window could hold only padding)", pad, k);
    int P = pool_out_size(H, k, s, pad), Q = pool_out_size(W, k, s, pad);
    if (P < 1 || Q < 1)
        ct_fatal("maxpool2d: input %s is smaller than the %dx%d window (padding %d)",
                 tensor_desc(d, sizeof d, x), k, k, pad);
    int64_t shape[4] = {N, P, Q, C};
    Tensor *y = tensor_new(c, x->dtype, 4, shape);
    int record = ad_needs_grad(c, &x, 1);
    DType ct = maxpool_code_bytes(k) == 1 ? DT_U8 : DT_I32;
    Tensor *code = record ? tensor_new(c, ct, 4, shape) : NULL;
    void *pcode = code ? code->data : NULL;
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        maxpool2d_forward_cuda(y->data, pcode, x->data, x->dtype, k, s, pad, N, H, W, C,
                               c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1), vy = f32_view(y, 0);
        maxpool2d_forward_cpu(vy.p, pcode, vx.p, k, s, pad, N, H, W, C);
        f32_done(&vx, 0); f32_done(&vy, 1);
    }
    if (record) {
        Node *n = ad_record(c, "maxpool2d", maxpool_backward, y, &x, 1);
        n->i[0] = k;
        n->i[1] = s;
        n->i[2] = pad;
        ad_save(n, code);
        tensor_release(code);
    }
    return y;
}

/* ---- global average pool ---- */

/* forward: y[n,c] = (1/HW) sum_{h,w} x[n,h,w,c]   so   dx[n,h,w,c] += dy[n,c] / HW */
static void avgpool_global_backward(Ctx *c, Node *n)
{
    int accum;
    Tensor *dx = ad_grad_dst(c, n->in[0], &accum);
    if (!dx) return;
    Tensor *dy = n->out->grad;
    int N = (int)dx->shape[0], HW = (int)(dx->shape[1] * dx->shape[2]), C = (int)dx->shape[3];
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        avgpool_global_backward_cuda(dx->data, dy->data, dx->dtype, N, HW, C, accum, c->stream);
#endif
    } else {
        F32View vdx = f32_view(dx, accum), vdy = f32_view(dy, 1);
        avgpool_global_backward_cpu(vdx.p, vdy.p, N, HW, C, accum);
        f32_done(&vdx, 1); f32_done(&vdy, 0);
    }
}

Tensor *op_avgpool_global(Ctx *c, Tensor *x)
{
    char d[96];
    check_nhwc("avgpool_global", c, x);
    if (x->shape[1] * x->shape[2] == 0 || x->shape[1] * x->shape[2] > 0x7fffffff)
        ct_fatal("avgpool_global: input %s: H * W must be between 1 and 2^31 - 1",
                 tensor_desc(d, sizeof d, x));
    int N = (int)x->shape[0], HW = (int)(x->shape[1] * x->shape[2]), C = (int)x->shape[3];
    int64_t shape[2] = {N, C};
    Tensor *y = tensor_new(c, x->dtype, 2, shape);
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        avgpool_global_forward_cuda(y->data, x->data, x->dtype, N, HW, C, c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1), vy = f32_view(y, 0);
        avgpool_global_forward_cpu(vy.p, vx.p, N, HW, C);
        f32_done(&vx, 0); f32_done(&vy, 1);
    }
    if (ad_needs_grad(c, &x, 1)) ad_record(c, "avgpool_global", avgpool_global_backward, y, &x, 1);
    return y;
}
