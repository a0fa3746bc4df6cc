/* layernorm_op.c — tensor op layernorm over the last dim, and its backward
 * (math in ops/layernorm.h).
 *
 * Shape letters: R rows (all dims but the last), D the last dim.
 * Saved for the backward: x, gamma, and mean/invstd [R] f32 (8 bytes a row).
 * Under autocast the op still computes in f32 and keeps x's storage type for
 * y; gamma and beta are read in f32 straight from the parameter buffer.
 */
#include "layernorm.h"

#include "engine/autograd.h"
#include "cpu_f32.h"
#include "op_util.h"

/* forward: y = (x - mean) * invstd * gamma + beta
 *   so dx = invstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * gamma,
 *      dgamma += sum_r dy * xhat,  dbeta += sum_r dy   (f32) */
static void layernorm_backward(Ctx *c, Node *n)
{
    Tensor *dy = n->out->grad, *x = n->saved[0], *gamma = n->saved[1];
    Tensor *mean = n->saved[2], *invstd = n->saved[3];
    size_t R = tensor_rows(x), D = tensor_cols(x);
    int acc_x = 0, acc_g = 0, acc_b = 0;
    Tensor *dx = ad_grad_dst(c, n->in[0], &acc_x);
    Tensor *dg = ad_grad_dst(c, n->in[1], &acc_g);
    Tensor *db = ad_grad_dst(c, n->in[2], &acc_b);
    CT_ASSERT((!dg || dg->dtype == DT_F32) && (!db || db->dtype == DT_F32),
              "layernorm: gamma/beta gradients must be f32 (they are f32 parameters)");
    float *pdg = dg ? (float *)dg->data : NULL, *pdb = db ? (float *)db->data : NULL;
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        layernorm_backward_cuda(dx ? dx->data : NULL, pdg, pdb, dy->data, x->data,
                                (const float *)mean->data, (const float *)invstd->data,
                                (const float *)gamma->data, x->dtype, R, D, acc_x, acc_g,
                                acc_b, c->stream);
#endif
    } else {
        F32View vdx = f32_view(dx, acc_x), vdy = f32_view(dy, 1), vx = f32_view(x, 1);
        layernorm_backward_cpu(vdx.p, pdg, pdb, vdy.p, vx.p, (const float *)mean->data,
                               (const float *)invstd->data, (const float *)gamma->data, R, D,
                               acc_x, acc_g, acc_b);
        f32_done(&vdx, 1); f32_done(&vdy, 0); f32_done(&vx, 0);
    }
}

Tensor *op_layernorm(Ctx *c, Tensor *x, Tensor *gamma, Tensor *beta, float eps)
{
    char dx[96], dg[96];
    op_check_float("layernorm", x);
    op_check_device("layernorm", c, x);
    op_check_device("layernorm", c, gamma);
    op_check_device("layernorm", c, beta);
    size_t R = tensor_rows(x), D = tensor_cols(x);
    const Tensor *p[2] = {gamma, beta};
    for (int k = 0; k < 2; k++)
        if (p[k]->dtype != DT_F32 || p[k]->ndim != 1 || (size_t)p[k]->shape[0] != D)
            ct_fatal("layernorm: %s %s must be f32 [%zu] to match the last dim of %s",
                     k ? "beta" : "gamma", tensor_desc(dg, sizeof dg, p[k]), D,
                     tensor_desc(dx, sizeof dx, x));
    if (D == 0) ct_fatal("layernorm: input %s has an empty last dim", tensor_desc(dx, sizeof dx, x));
    if (!(eps > 0.0f)) ct_fatal("layernorm: eps = %g must be positive (BERT uses 1e-12)", (double)eps);
    int64_t r = (int64_t)R;
    Tensor *y = tensor_new_like(c, x, x->dtype);
    Tensor *mean = tensor_new(c, DT_F32, 1, &r), *invstd = tensor_new(c, DT_F32, 1, &r);
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        layernorm_forward_cuda(y->data, (float *)mean->data, (float *)invstd->data, x->data,
                               (const float *)gamma->data, (const float *)beta->data,
                               x->dtype, eps, R, D, c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1), vy = f32_view(y, 0);
        layernorm_forward_cpu(vy.p, (float *)mean->data, (float *)invstd->data, vx.p,
                              (const float *)gamma->data, (const float *)beta->data, eps, R, D);
        f32_done(&vx, 0); f32_done(&vy, 1);
    }
    Tensor *in[3] = {x, gamma, beta};
    if (ad_needs_grad(c, in, 3)) {
        Node *n = ad_record(c, "layernorm", layernorm_backward, y, in, 3);
        n->f[0] = eps;
        ad_save(n, x);
        ad_save(n, gamma);
        ad_save(n, mean);
        ad_save(n, invstd);
    }
    tensor_release(mean);
    tensor_release(invstd);
    return y;
}
