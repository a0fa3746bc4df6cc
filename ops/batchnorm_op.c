/* batchnorm_op.c — the tensor op batch norm (+ residual add, + ReLU) and its
 * backward: shape and dtype checks, running-statistics bookkeeping, dispatch
 * to cuDNN (batchnorm_cudnn.h) or our kernels (ops/batchnorm.{c,cu}; the math
 * is in batchnorm.h).
 *
 * Shape letters: x [N, H, W, C] (any leading dims): M = numel / C rows.
 *
 * Autocast needs nothing here: x keeps its type (f16/bf16 from a conv under
 * AMP), statistics and gamma/beta stay f32 (ops/autocast.h), and the gradients of
 * gamma and beta land in the f32 gradient buffer.
 *
 * Which implementation (CUDA): a forward with batch statistics (training,
 * or no running statistics) first asks cuDNN's fused NHWC batch norm, with
 * z and ReLU fused (docs/kernels.md measured it 1.3-7x faster than ours); when
 * cuDNN declines the form (affine = False, z without ReLU, z with C % 4 != 0,
 * a pointer not 16-byte aligned, a status cuDNN refuses) or CTRAIN_BN=own,
 * our kernels run. Eval with
 * running statistics always runs ours (cuDNN's inference call has no fused
 * add or ReLU). The backward runs cuDNN's when the forward did (the node
 * records it), falling back to ours if cuDNN declines there: cuDNN's saved
 * mean and inverse std are ours, so our backward can follow its forward.
 * cuDNN updates the running mean and variance itself (unbiased variance,
 * factor = momentum); num_batches_tracked is counted by batchnorm_count_cuda.
 * While a recompute segment re-runs its forward (c->recomputing), neither
 * path is given the running statistics or the counter: the batch counts once.
 * Both paths only launch on c->stream and allocate through mem_alloc, so a
 * step can be captured in a CUDA graph once a warm-up step has built the
 * cuDNN forms (and grown the workspace).
 *
 * CTRAIN_BN_PAIR (add_relu by default): BN + add + ReLU's training forward (and with
 * `all`, BN + ReLU's) runs ours, writing the ReLU's mask in the layout cuDNN's
 * reserve space holds, so that cuDNN's backward can follow it
 * (bn_forward_paired; each form checked against cuDNN's own forward on its
 * first call).
 *
 * Sync batch norm: when training with a context that has an all-reduce
 * (ctx->bn_allreduce, --sync-bn on several GPUs) the statistics and the
 * backward's per-channel means cover every rank's batch
 * (ops/batchnorm_sync.h); our kernels run then (node i[2] remembers it).
 *
 * Saved for the backward (node slots):
 *   saved[0] x, saved[1] stats = f32 [2, stats_stride(C)]: mean, then
 *   invstd (batch or running statistics), then when given: gamma (i[3]), y (i[4], with ReLU:
 *   the mask is y > 0), beta (i[6], cuDNN path: its backward needs bnBias
 *   with an activation), cuDNN's reserve space (i[7], a u8 tensor of
 *   BnCudnn.reserve_bytes, cuDNN path, freed with the node);
 *   i[0] batch statistics, i[1] relu, i[2] synced, i[5] the forward ran cuDNN; f[0] eps.
 */
#include "batchnorm.h"
#include "batchnorm_sync.h"

#include "engine/autograd.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "engine/settings.h"
#include "batchnorm_cudnn.h"
#include "cpu_f32.h"
#include "op_util.h"
#include "ops.h"

#define IS_CUDA(c) ((c)->device == DEV_CUDA)

/* slot of an optional saved tensor, or NULL */
#define SAVED(n, k) ((n)->i[k] >= 0 ? (n)->saved[(n)->i[k]] : NULL)

/* The statistics tensor is [2, stats_stride(C)]: mean, then invstd 256
 * bytes aligned like any allocation (cuDNN may read per-channel vectors
 * with vector loads). */
static size_t stats_stride(size_t C) { return (C + 63) / 64 * 64; }

#ifdef CTRAIN_CUDA
/* cuDNN is only handed 16-byte aligned pointers, as PyTorch's own tensors
 * always are (a view into the packed parameter buffer need not be): its
 * kernels' alignment needs are not documented. NULL passes. */
static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
#endif

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

#ifdef CTRAIN_CUDA
/* cuDNN's form for x: NHWC [N, H, W, C] as is, other ranks as [M, 1, 1, C]
 * (the statistics run over all rows either way). NULL when x has more
 * elements than cuDNN's int dimensions and strides allow. */
static BnCudnn *bn_cudnn_form(Ctx *c, const Tensor *x, int has_z, int relu)
{
    if (x->numel >= 0x7fffffffu) return NULL;
    int N = (int)tensor_rows(x), H = 1, W = 1, C = (int)tensor_cols(x);
    if (x->ndim == 4) {
        N = (int)x->shape[0];
        H = (int)x->shape[1];
        W = (int)x->shape[2];
    }
    return batchnorm_cudnn_get(c, x->dtype, N, H, W, C, has_z, relu);
}
#endif

/* forward: y = act(gamma xhat + beta + z),  xhat = (x - mean) invstd
 * so (batchnorm.h): g = relu ? (y > 0) dy : dy,
 *   dbeta += sum g,  dgamma += sum g xhat,  dz += g,
 *   dx += gamma invstd (g - mean(g) - xhat mean(g xhat))   (training)
 *   dx += gamma invstd g                                   (eval) */
static void batchnorm_backward(Ctx *c, Node *n)
{
    Tensor *dy = n->out->grad;
    Tensor *x = n->saved[0], *stats = n->saved[1];
    Tensor *gamma = SAVED(n, 3), *y = SAVED(n, 4), *beta = SAVED(n, 6), *reserve = SAVED(n, 7);
    int training = (int)n->i[0], relu = (int)n->i[1], ran_cudnn = (int)n->i[5];
    size_t C = tensor_cols(x), M = tensor_rows(x);
    int acc_x = 0, acc_g = 0, acc_b = 0, acc_z = 0;
    Tensor *dx = ad_grad_dst(c, n->in[0], &acc_x);
    Tensor *dg = ad_grad_dst(c, n->in[1], &acc_g);
    Tensor *db = ad_grad_dst(c, n->in[2], &acc_b);
    Tensor *dz = ad_grad_dst(c, n->in[3], &acc_z);
    if (!dx && !dg && !db && !dz) return;
    CT_ASSERT(!dg || dg->dtype == DT_F32, "batchnorm: the gamma gradient must be f32");
    CT_ASSERT(!db || db->dtype == DT_F32, "batchnorm: the beta gradient must be f32");
    if (training && n->i[2]) {
        const float *mean = (const float *)stats->data;
        batchnorm_sync_backward(c, dx, dz, dg ? (float *)dg->data : NULL,
                                db ? (float *)db->data : NULL, dy, x, y, mean,
                                mean + stats_stride(C),
                                gamma ? (const float *)gamma->data : NULL, relu, acc_x, acc_z,
                                acc_g, acc_b);
        return;
    }
    int acc_p = batchnorm_param_accum(c, dg, acc_g, db, acc_b);
    float *pg = dg ? (float *)dg->data : NULL, *pb = db ? (float *)db->data : NULL;
    const float *pgamma = gamma ? (const float *)gamma->data : NULL;
    const float *mean = (const float *)stats->data, *invstd = mean + stats_stride(C);
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        /* cuDNN's backward needs its forward's reserve space: only after a
         * cuDNN forward; if it declines, ours reads the same statistics */
        const void *pdx = dx ? dx->data : NULL, *pdz = dz ? dz->data : NULL;
        if (ran_cudnn && aligned16(pdx) && aligned16(pdz) && aligned16(dy->data) &&
            aligned16(pg) && aligned16(pb)) {
            BnCudnn *p = bn_cudnn_form(c, x, n->in[3] != NULL, relu);
            if (p && batchnorm_cudnn_backward(
                         c, p, dx ? dx->data : NULL, dz ? dz->data : NULL, pg, pb, dy->data,
                         x->data, y ? y->data : NULL, pgamma, (const float *)beta->data, mean,
                         invstd, n->f[0], reserve ? reserve->data : NULL, acc_x, acc_z, acc_p))
                return;
            LOG_T("batchnorm: cuDNN declined the backward (%s); our kernels run it",
                  p ? p->why : "too large");
        }
        int need_sums = dg || db || (dx && training);
        size_t sbytes = need_sums ? batchnorm_scratch_bytes(M, C) : 0;
        void *scratch = sbytes ? mem_alloc(c, sbytes) : NULL;
        batchnorm_backward_cuda(dx ? dx->data : NULL, dz ? dz->data : NULL, pg, pb, dy->data,
                                x->data, y ? y->data : NULL, mean, invstd, pgamma, NULL, x->dtype,
                                training, relu, M, C, acc_x, acc_z, acc_p, scratch, sbytes,
                                c->stream);
        if (scratch) mem_free(c, scratch, sbytes);
#else
        (void)ran_cudnn; (void)beta; (void)reserve;
#endif
    } else {
        F32View vdx = f32_view(dx, acc_x), vdz = f32_view(dz, acc_z);
        F32View vdy = f32_view(dy, 1), vx = f32_view(x, 1), vy = f32_view(y, 1);
        batchnorm_backward_cpu(vdx.p, vdz.p, pg, pb, vdy.p, vx.p, vy.p, mean, invstd, pgamma, NULL,
                               training, relu, M, C, acc_x, acc_z, acc_p);
        f32_done(&vdx, 1); f32_done(&vdz, 1);
        f32_done(&vdy, 0); f32_done(&vx, 0); f32_done(&vy, 0);
    }
}

int batchnorm_param_accum(Ctx *c, Tensor *dgamma, int acc_g, Tensor *dbeta, int acc_b)
{
    if (dgamma && dbeta && acc_g != acc_b) {
        Tensor *fresh = acc_g ? dbeta : dgamma;
        mem_zero(c, fresh->data, fresh->numel * sizeof(float));
        return 1;
    }
    return dgamma ? acc_g : acc_b;
}

#ifdef CTRAIN_CUDA
/* Our statistics of x's batch (mean, invstd; the running update and the
 * batch count when rm, rv, nbt are given), with the scratch they need. */
static void bn_stats_own(Ctx *c, float *mean, float *invstd, float *rm, float *rv, int64_t *nbt,
                         const Tensor *x, float momentum, float eps)
{
    const size_t M = tensor_rows(x), C = tensor_cols(x), sbytes = batchnorm_scratch_bytes(M, C);
    void *scratch = mem_alloc(c, sbytes);
    batchnorm_stats_cuda(mean, invstd, rm, rv, nbt, x->data, x->dtype, momentum, eps, M, C,
                         scratch, sbytes, c->stream);
    mem_free(c, scratch, sbytes);
}

/* The training forward through cuDNN: y, the statistics (mean, invstd), the
 * running update (rm, rv: both or neither) and the batch counter. Returns 1
 * when cuDNN ran, with *reserve the space its backward needs (NULL when the
 * form needs none); 0 when it declined, having written nothing. */
static int bn_forward_cudnn(Ctx *c, Tensor **reserve, Tensor *y, float *mean, float *invstd,
                            float *rm, float *rv, int64_t *nbt, const Tensor *x, const Tensor *z,
                            const float *gamma, const float *beta, float momentum, float eps,
                            int relu)
{
    *reserve = NULL;
    if (!gamma || !beta || !batchnorm_cudnn_enabled(c)) return 0;
    if (!aligned16(x->data) || !aligned16(z ? z->data : NULL) || !aligned16(gamma) ||
        !aligned16(beta) || !aligned16(rm) || !aligned16(rv) || !aligned16(invstd))
        return 0;
    BnCudnn *p = bn_cudnn_form(c, x, z != NULL, relu);
    if (!p || !p->usable) return 0;
    Tensor *r = NULL;
    if (p->reserve_bytes) {
        int64_t rb = (int64_t)p->reserve_bytes;
        r = tensor_new(c, DT_U8, 1, &rb);
    }
    if (!batchnorm_cudnn_forward_train(c, p, y->data, mean, invstd, rm, rv, x->data,
                                       z ? z->data : NULL, gamma, beta, momentum, eps,
                                       r ? r->data : NULL)) {
        LOG_T("batchnorm: cuDNN declined the forward (%s); our kernels run it", p->why);
        tensor_release(r);
        return 0;
    }
    batchnorm_count_cuda(nbt, c->stream);
    *reserve = r;
    return 1;
}

/* The first call of a form under CTRAIN_BN_PAIR: cuDNN's own forward on the
 * same x and z into temporaries, its reserve's mask against ours (bits that
 * differ counted on the device; host-synchronous, so never under capture).
 * At most one bit in 10^4 may differ (a pre-activation on the rounding edge
 * of 0 in one and not the other); past that the layout is not the one read
 * for cuDNN 9.14, and the form keeps cuDNN's forward (said once). On a
 * refusal this call's y, reserve and saved statistics become cuDNN's. Returns
 * whether cuDNN's forward ran (0: it declined the form, so its backward will
 * not run either). */
static int bn_pair_check(Ctx *c, BnCudnn *p, Tensor *y, Tensor *r, float *mean, float *invstd,
                         const Tensor *x, const Tensor *z, const float *gamma, const float *beta,
                         float momentum, float eps, size_t M, size_t C)
{
    Tensor *y2 = tensor_new_like(c, x, x->dtype);
    int64_t rb = (int64_t)p->reserve_bytes;
    Tensor *r2 = tensor_new(c, DT_U8, 1, &rb);
    size_t tbytes = 2 * C * sizeof(float) + 256;
    char *tmp = mem_alloc(c, tbytes);
    float *m2 = (float *)tmp, *i2 = m2 + C;
    unsigned long long *count = (unsigned long long *)(tmp + tbytes - 256), differ = 0;
    /* cuDNN leaves the padding pixels' bits as they were; ours writes them 0 */
    CUDA_CHECK(cudaMemsetAsync(r2->data, 0, p->reserve_bytes, c->stream));
    int ran = batchnorm_cudnn_forward_train(c, p, y2->data, m2, i2, NULL, NULL, x->data, z->data,
                                            gamma, beta, momentum, eps, r2->data);
    if (ran) {
        CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof *count, c->stream));
        batchnorm_mask_diff_cuda(count, r->data, r2->data, M, C, c->stream);
        CUDA_CHECK(cudaMemcpyAsync(&differ, count, sizeof differ, cudaMemcpyDeviceToHost,
                                   c->stream));
        CUDA_CHECK(cudaStreamSynchronize(c->stream));
    }
    p->pair = ran && differ * 10000 <= (unsigned long long)(M * C);
    LOG_D("batchnorm: our BN + add + ReLU forward %s cuDNN's backward for %s [%d, %d, %d, "
          "%d]: %llu of %zu mask bits differ from cuDNN's own forward%s",
          p->pair ? "pairs with" : "does not pair with", dtype_name(x->dtype), p->N, p->H, p->W,
          p->C, differ, M * C, ran ? "" : " (cuDNN declined it)");
    if (!p->pair && ran) {
        CUDA_CHECK(cudaMemcpyAsync(y->data, y2->data, y->numel * dtype_size(y->dtype),
                                   cudaMemcpyDeviceToDevice, c->stream));
        CUDA_CHECK(cudaMemcpyAsync(r->data, r2->data, p->reserve_bytes,
                                   cudaMemcpyDeviceToDevice, c->stream));
        CUDA_CHECK(cudaMemcpyAsync(mean, m2, C * sizeof(float), cudaMemcpyDeviceToDevice,
                                   c->stream));
        CUDA_CHECK(cudaMemcpyAsync(invstd, i2, C * sizeof(float), cudaMemcpyDeviceToDevice,
                                   c->stream));
    }
    mem_free(c, tmp, tbytes);
    tensor_release(r2);
    tensor_release(y2);
    return ran;
}

/* CTRAIN_BN_PAIR: the training forward of BN + ReLU (all) or BN + add + ReLU
 * (add_relu, all) as ours, for cuDNN's backward to follow: our forward is the
 * faster on ResNet-50's BN + add + ReLU shapes, cuDNN's backward on all
 * (docs/kernels.md, "cuDNN's BN + add + ReLU reserve, read"). With z, y and
 * the ReLU's mask in cuDNN's reserve layout (batchnorm_forward_cudnn_mask_cuda);
 * without, y alone, where cuDNN keeps no reserve for the form (its backward
 * reads y). Returns 1 with *reserve (NULL without z), the statistics and the
 * running update done (the batch counted), for cuDNN's backward; 2 with the
 * same done but for our backward (cuDNN declined the form in the check); 0
 * having done nothing (the setting off, a form or pointer it does not take,
 * an unchecked form under capture, a form whose check failed before). */
static int bn_forward_paired(Ctx *c, Tensor **reserve, Tensor *y, float *mean, float *invstd,
                             float *rm, float *rv, int64_t *nbt, const Tensor *x, const Tensor *z,
                             const float *gamma, const float *beta, float momentum, float eps)
{
    *reserve = NULL;
    const int mode = setting_choice(SET_BN_PAIR);   /* "off|add_relu|all" */
    if (mode == 0 || (!z && mode != 2) || !gamma || !beta || !batchnorm_cudnn_enabled(c))
        return 0;
    if (!aligned16(x->data) || !aligned16(z ? z->data : NULL) || !aligned16(y->data) ||
        !aligned16(gamma) || !aligned16(beta) || !aligned16(rm) || !aligned16(rv) ||
        !aligned16(mean) || !aligned16(invstd))
        return 0;
    const size_t M = tensor_rows(x), C = tensor_cols(x);
    if (!z) {
        BnCudnn *q = bn_cudnn_form(c, x, 0, 1);
        if (!q || !q->usable || q->reserve_bytes != 0) return 0;
        bn_stats_own(c, mean, invstd, rm, rv, nbt, x, momentum, eps);
        batchnorm_forward_cuda(y->data, x->data, NULL, mean, invstd, gamma, beta, x->dtype, 1, M,
                               C, c->stream);
        q->pair_runs++;
        return 1;
    }
    BnCudnn *p = bn_cudnn_form(c, x, 1, 1);
    if (!p || !p->usable || p->pair == 0 || C % 64 != 0 ||
        p->reserve_bytes < batchnorm_cudnn_mask_bytes(M, C))
        return 0;
    if (p->pair < 0 && c->capturing) return 0;
    int64_t rb = (int64_t)p->reserve_bytes;
    Tensor *r = tensor_new(c, DT_U8, 1, &rb);
    bn_stats_own(c, mean, invstd, rm, rv, nbt, x, momentum, eps);
    int ok = batchnorm_forward_cudnn_mask_cuda(y->data, r->data, x->data, z->data, mean, invstd,
                                               gamma, beta, x->dtype, M, C, c->stream);
    CT_ASSERT(ok, "batchnorm: the paired forward declined a form its caller checked");
    if (p->pair < 0 &&
        !bn_pair_check(c, p, y, r, mean, invstd, x, z, gamma, beta, momentum, eps, M, C)) {
        tensor_release(r);   /* y and the statistics are ours: our backward reads them */
        return 2;
    }
    p->pair_runs += p->pair == 1;
    *reserve = r;
    return 1;
}
#endif

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
    relu = relu != 0;   /* the kernels' mode 1: the mask read from y */
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
    int64_t sshape[2] = {2, (int64_t)stats_stride(C)};
    Tensor *stats = tensor_new(c, DT_F32, 2, sshape);
    Tensor *y = tensor_new_like(c, x, x->dtype), *reserve = NULL;
    float *pm = (float *)stats->data, *pi = pm + stats_stride(C);
    const float *pgamma = gamma ? (const float *)gamma->data : NULL;
    const float *pbeta = beta ? (const float *)beta->data : NULL;
    int ran_cudnn = 0;
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        int done = 0;   /* the forward ran (paired); ran_cudnn: cuDNN's backward follows */
        if (batch_stats && !sync && relu) {
            int pr = bn_forward_paired(c, &reserve, y, pm, pi, rm, rv, nbt, x, z, pgamma,
                                       pbeta, momentum, eps);
            ran_cudnn = pr == 1;
            done = pr != 0;
        }
        if (batch_stats && !sync && !done)
            ran_cudnn = bn_forward_cudnn(c, &reserve, y, pm, pi, rm, rv, nbt, x, z, pgamma,
                                         pbeta, momentum, eps, relu);
        if (!ran_cudnn && !done) {
            if (batch_stats) {
                bn_stats_own(c, pm, pi, sync ? NULL : rm, sync ? NULL : rv, sync ? NULL : nbt,
                             x, momentum, eps);
                if (sync) batchnorm_sync_stats(c, pm, pi, rm, rv, nbt, momentum, eps, M, C);
            } else {
                batchnorm_eval_stats_cuda(pm, pi, (const float *)running_mean->data,
                                          (const float *)running_var->data, eps, C, c->stream);
            }
            batchnorm_forward_cuda(y->data, x->data, z ? z->data : NULL, pm, pi, pgamma, pbeta,
                                   x->dtype, relu, M, C, c->stream);
        }
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
        n->i[3] = n->i[4] = n->i[6] = n->i[7] = -1;
        n->i[2] = sync;
        n->i[5] = ran_cudnn;
        n->f[0] = eps;
        ad_save(n, x);
        ad_save(n, stats);
        if (gamma) { n->i[3] = n->n_saved; ad_save(n, gamma); }
        if (relu) { n->i[4] = n->n_saved; ad_save(n, y); }
        if (ran_cudnn) { n->i[6] = n->n_saved; ad_save(n, beta); }
        if (reserve) { n->i[7] = n->n_saved; ad_save(n, reserve); }
    }
    tensor_release(stats);
    tensor_release(reserve);
    return y;
}
