/* reduce_op.c — tensor ops sum and mean (over everything, or the last dim),
 * and their backward. Outputs are f32 whatever the input type. */
#include "ops.h"

#include "engine/autograd.h"
#include "cpu_f32.h"
#include "op_util.h"
#include "reduce.h"

/* forward: y[r] = s * sum_c x[r,c]   so   dx[r,c] += s * dy[r] */
static void reduce_backward(Ctx *c, Node *n)
{
    int accum;
    Tensor *dy = n->out->grad, *dx = ad_grad_dst(c, n->in[0], &accum);
    if (!dx) return;
    size_t R = (size_t)n->i[0], C = (size_t)n->i[1];
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        reduce_sum_backward_cuda(dx->data, dx->dtype, (const float *)dy->data, n->f[0], R, C,
                                 accum, c->stream);
#endif
    } else {
        F32View vdx = f32_view(dx, accum);
        reduce_sum_backward_cpu(vdx.p, (const float *)dy->data, n->f[0], R, C, accum);
        f32_done(&vdx, 1);
    }
}

static Tensor *reduce(Ctx *c, Tensor *x, int last_dim, int mean, const char *name)
{
    op_check_float(name, x);
    op_check_device(name, c, x);
    size_t C = last_dim ? tensor_cols(x) : x->numel;
    size_t R = C ? x->numel / C : 0;
    float s = mean ? 1.0f / (float)(C ? C : 1) : 1.0f;
    int64_t shape[CT_MAX_DIMS] = {1};
    int ndim = 1;
    if (last_dim && x->ndim > 1) {
        ndim = x->ndim - 1;
        for (int i = 0; i < ndim; i++) shape[i] = x->shape[i];
    }
    Tensor *y = tensor_new(c, DT_F32, ndim, shape);
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        reduce_sum_forward_cuda((float *)y->data, x->data, x->dtype, s, R, C, c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1);
        reduce_sum_forward_cpu((float *)y->data, vx.p, s, R, C);
        f32_done(&vx, 0);
    }
    if (ad_needs_grad(c, &x, 1)) {
        Node *n = ad_record(c, name, reduce_backward, y, &x, 1);
        n->i[0] = (int64_t)R;
        n->i[1] = (int64_t)C;
        n->f[0] = s;
    }
    return y;
}

Tensor *op_sum(Ctx *c, Tensor *x) { return reduce(c, x, 0, 0, "sum"); }
Tensor *op_mean(Ctx *c, Tensor *x) { return reduce(c, x, 0, 1, "mean"); }
Tensor *op_sum_last(Ctx *c, Tensor *x) { return reduce(c, x, 1, 0, "sum_last"); }
Tensor *op_mean_last(Ctx *c, Tensor *x) { return reduce(c, x, 1, 1, "mean_last"); }
