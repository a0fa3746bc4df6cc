/* batchnorm_op.c — the tensor op batch norm (+ residual add, + ReLU) and its
 * backward: shape and dtype checks, running-statistics bookkeeping, dispatch
 * to ops/batchnorm.{c,cu} (math in ops/batchnorm.h).
 *
 * Shape letters: x [N, H, W, C] (any leading dims): M = numel / C rows.
 *
 * Autocast needs nothing here: x keeps its type (f16/bf16 from a conv under
 * AMP), statistics and gamma/beta stay f32 (DESIGN.md), and the gradients of
 * gamma and beta land in the f32 gradient buffer.
 *
 * Saved for the backward: x, mean and invstd (f32 [C], batch or running
 * statistics), gamma (when given) and y (with ReLU: the mask is y > 0).
 *
 * Sync batch norm: when training with a context that has an all-reduce
 * (ctx->bn_allreduce, --sync-bn on several GPUs) the statistics and the
 * backward's per-channel means cover every rank's batch
 * (ops/batchnorm_sync.h); node i[5] remembers that the forward synced.
 */
#include "batchnorm.h"
#include "batchnorm_sync.h"

#include "../engine/autograd.h"
#include "../engine/mem.h"
#include "cpu_f32.h"
#include "op_util.h"
#include "ops.h"

#define IS_CUDA(c) ((c)->device == DEV_CUDA)

/* A per-channel vector (gamma, beta, running stats): dtype dt, C elements. */
static void check_channels(const char *what, const Ctx *c, const Tensor *t, DType dt, size_t C,
                           const Tensor *x)
{
    char dt_[96], dx[96];
    if (!t) return;
    if (t->dtype != dt || t->numel != C || !t->data)
        ct_fatal("batchnorm: %s %s must be %s with %zu elements (one per channel of %s)", what,
                 tensor_desc(dt_, sizeof dt_, t), dtype_name(dt), C,
                 tensor_desc(dx, sizeof dx, x));
    op_check_device("batchnorm", c, t);
}

/* forward: y = act(gamma xhat + beta + z),  xhat = (x - mean) invstd
 * so (batchnorm.h): g = relu ? (y > 0) dy : dy,
 *   dbeta += sum g,  dgamma += sum g xhat,  dz += g,
 *   dx += gamma invstd (g - mean(g) - xhat mean(g xhat))   (training)
 *   dx += gamma invstd g                                   (eval) */
static void batchnorm_backward(Ctx *c, Node *n)
{
    Tensor *dy = n->out->grad;
    Tensor *x = n->saved[0], *mean = n->saved[1], *invstd = n->saved[2];
    Tensor *gamma = n->i[3] >= 0 ? n->saved[n->i[3]] : NULL;
    Tensor *y = n->i[4] >= 0 ? n->saved[n->i[4]] : NULL;
    int training = (int)n->i[0], relu = (int)n->i[1];
    size_t C = tensor_cols(x), M = tensor_rows(x);
    int acc_x = 0, acc_g = 0, acc_b = 0, acc_z = 0;
    Tensor *dx = ad_grad_dst(c, n->in[0], &acc_x);
    Tensor *dg = ad_grad_dst(c, n->in[1], &acc_g);
    Tensor *db = ad_grad_dst(c, n->in[2], &acc_b);
    Tensor *dz = ad_grad_dst(c, n->in[3], &acc_z);
    if (!dx && !dg && !db && !dz) return;
    CT_ASSERT(!dg || dg->dtype == DT_F32, "batchnorm: the gamma gradient must be f32");
    CT_ASSERT(!db || db->dtype == DT_F32, "batchnorm: the beta gradient must be f32");
    if (training && n->i[5]) {
        batchnorm_sync_backward(c, dx, dz, dg ? (float *)dg->data : NULL,
                                db ? (float *)db->data : NULL, dy, x, y, (const float *)mean->data,
                                (const float *)invstd->data,
                                gamma ? (const float *)gamma->data : NULL, relu, acc_x, acc_z,
                                acc_g, acc_b);
        return;
    }
    /* the kernels take one accumulate flag for dgamma and dbeta: when one is
     * fresh and the other accumulates, zero the fresh one and add into both */
    int acc_p = dg ? acc_g : acc_b;
    if (dg && db && acc_g != acc_b) {
        Tensor *fresh = acc_g ? db : dg;
        mem_zero(c, fresh->data, fresh->numel * sizeof(float));
        acc_p = 1;
    }
    float *pg = dg ? (float *)dg->data : NULL, *pb = db ? (float *)db->data : NULL;
    const float *pgamma = gamma ? (const float *)gamma->data : NULL;
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        int need_sums = dg || db || (dx && training);
        size_t sbytes = need_sums ? batchnorm_scratch_bytes(M, C) : 0;
        void *scratch = sbytes ? mem_alloc(c, sbytes) : NULL;
        batchnorm_backward_cuda(dx ? dx->data : NULL, dz ? dz->data : NULL, pg, pb, dy->data,
                                x->data, y ? y->data : NULL, (const float *)mean->data,
                                (const float *)invstd->data, pgamma, x->dtype, training, relu,
                                M, C, acc_x, acc_z, acc_p, scratch, sbytes, c->stream);
        if (scratch) mem_free(c, scratch, sbytes);
#endif
    } else {
        F32View vdx = f32_view(dx, acc_x), vdz = f32_view(dz, acc_z);
        F32View vdy = f32_view(dy, 1), vx = f32_view(x, 1), vy = f32_view(y, 1);
        batchnorm_backward_cpu(vdx.p, vdz.p, pg, pb, vdy.p, vx.p, vy.p,
                               (const float *)mean->data, (const float *)invstd->data, pgamma,
                               training, relu, M, C, acc_x, acc_z, acc_p);
        f32_done(&vdx, 1); f32_done(&vdz, 1);
        f32_done(&vdy, 0); f32_done(&vx, 0); f32_done(&vy, 0);
    }
}

Tensor *op_batchnorm(Ctx *c, Tensor *x, Tensor *gamma, Tensor *beta, Tensor *running_mean,
                     Tensor *running_var, Tensor *num_batches_tracked, int training,
                     float momentum, float eps, Tensor *z, int relu)
{
    char dx[96], dz[96];
    op_check_float("batchnorm", x);
    op_check_device("batchnorm", c, x);
    if (x->ndim < 2)
        ct_fatal("batchnorm: input %s needs rows and channels (NHWC images are [N, H, W, C])",
                 tensor_desc(dx, sizeof dx, x));
    size_t C = tensor_cols(x), M = tensor_rows(x);
    check_channels("gamma", c, gamma, DT_F32, C, x);
    check_channels("beta", c, beta, DT_F32, C, x);
    check_channels("running_mean", c, running_mean, DT_F32, C, x);
    check_channels("running_var", c, running_var, DT_F32, C, x);
    check_channels("num_batches_tracked", c, num_batches_tracked, DT_I64, 1, x);
    if (!running_mean != !running_var)
        ct_fatal("batchnorm: running_mean and running_var go together (both or neither)");
    if (z) {
        op_check_float("batchnorm", z);
        op_check_device("batchnorm", c, z);
        op_check_same("batchnorm (residual z)", x, z);
        if (z == x)
            ct_fatal_hint("compute op_add(x, x) first and pass no residual",
                          "batchnorm: the residual z is the input x itself (%s)",
                          tensor_desc(dz, sizeof dz, z));
    }
    /* PyTorch: batch statistics when training, or when there are no running
     * statistics to use */
    int batch_stats = training || !running_mean;
    int sync = training && c->bn_allreduce != NULL;
    if (batch_stats && M < 2)
        ct_fatal_hint("use a batch of at least 2 samples (or larger feature maps), or run the "
                      "model in eval mode",
                      "batchnorm: expected more than 1 value per channel when training, got "
                      "input %s (%zu value%s per channel)",
                      tensor_desc(dx, sizeof dx, x), M, M == 1 ? "" : "s");
    float *rm = NULL, *rv = NULL;
    int64_t *nbt = NULL;
    /* a recompute segment re-running its forward must not count the batch
     * in the running statistics a second time */
    if (training && !c->recomputing) {
        rm = running_mean ? (float *)running_mean->data : NULL;
        rv = running_var ? (float *)running_var->data : NULL;
        nbt = num_batches_tracked ? (int64_t *)num_batches_tracked->data : NULL;
    }
    int64_t c64 = (int64_t)C;
    Tensor *mean = tensor_new(c, DT_F32, 1, &c64), *invstd = tensor_new(c, DT_F32, 1, &c64);
    Tensor *y = tensor_new_like(c, x, x->dtype);
    float *pm = (float *)mean->data, *pi = (float *)invstd->data;
    const float *pgamma = gamma ? (const float *)gamma->data : NULL;
    const float *pbeta = beta ? (const float *)beta->data : NULL;
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        if (batch_stats) {
            size_t sbytes = batchnorm_scratch_bytes(M, C);
            void *scratch = mem_alloc(c, sbytes);
            batchnorm_stats_cuda(pm, pi, sync ? NULL : rm, sync ? NULL : rv, sync ? NULL : nbt,
                                 x->data, x->dtype, momentum, eps, M, C, scratch, sbytes,
                                 c->stream);
            mem_free(c, scratch, sbytes);
            if (sync) batchnorm_sync_stats(c, pm, pi, rm, rv, nbt, momentum, eps, M, C);
        } else {
            batchnorm_eval_stats_cuda(pm, pi, (const float *)running_mean->data,
                                      (const float *)running_var->data, eps, C, c->stream);
        }
        batchnorm_forward_cuda(y->data, x->data, z ? z->data : NULL, pm, pi, pgamma, pbeta,
                               x->dtype, relu, M, C, c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1), vz = f32_view(z, 1), vy = f32_view(y, 0);
        if (batch_stats && sync) {
            batchnorm_stats_cpu(pm, pi, NULL, NULL, NULL, vx.p, momentum, eps, M, C);
            batchnorm_sync_stats(c, pm, pi, rm, rv, nbt, momentum, eps, M, C);
        } else if (batch_stats)
            batchnorm_stats_cpu(pm, pi, rm, rv, nbt, vx.p, momentum, eps, M, C);
        else
            batchnorm_eval_stats_cpu(pm, pi, (const float *)running_mean->data,
                                     (const float *)running_var->data, eps, C);
        batchnorm_forward_cpu(vy.p, vx.p, vz.p, pm, pi, pgamma, pbeta, relu, M, C);
        f32_done(&vx, 0); f32_done(&vz, 0); f32_done(&vy, 1);
    }
    Tensor *in[4] = {x, gamma, beta, z};
    if (ad_needs_grad(c, in, 4)) {
        Node *n = ad_record(c, "batchnorm", batchnorm_backward, y, in, 4);
        n->i[0] = batch_stats;
        n->i[1] = relu;
        n->i[3] = -1;
        n->i[4] = -1;
        n->i[5] = sync;
        ad_save(n, x);
        ad_save(n, mean);
        ad_save(n, invstd);
        if (gamma) { n->i[3] = n->n_saved; ad_save(n, gamma); }
        if (relu) { n->i[4] = n->n_saved; ad_save(n, y); }
    }
    tensor_release(mean);
    tensor_release(invstd);
    return y;
}
