/* conv_bn_op.c — the conv + batch-norm unit (conv_bn.h: the math, and why)
 * as tensor ops: op_conv2d_stats, op_bn_relu_conv, op_bn_moments. Each
 * piece dispatches to kernels that exist already: batch norm's statistics,
 * apply and backward (batchnorm.h; ours on the GPU, not cuDNN's, whose
 * fused batch norm takes no statistics from outside; the backward
 * recomputes the ReLU's mask from y, relu mode 2), and the convolution's
 * three directions (conv2d.h, cuDNN on the GPU). With CTRAIN_CONV_BN=fused
 * four of those steps go to cuDNN fused graphs where they are faster
 * (conv_bn_cudnn.h): a convolution and the statistics of its output; the
 * normalisation + ReLU in the forward convolution's prologue; the same in
 * the filter gradient's (the activation a is then never written); the
 * data gradient with the ReLU's mask and batch norm's sums in its epilogue
 * (then only the dx pass is left of batch norm's backward). With
 * CTRAIN_CONV_BN_1X1=own a 1 x 1 unit takes the same three fusions in our
 * own kernels instead (conv1x1_bn.h), where they fit.
 *
 * Node of op_bn_relu_conv: inputs y, gamma, beta, w; saved y, ms (f32 [2,
 * C]: mean and invstd, the batch's or the running ones), gamma, beta and
 * the weight in y's type; i[] the convolution's stride and padding, then
 * whether the statistics were the batch's.
 */
#include "conv_bn.h"

#include "engine/autograd.h"
#include "engine/mem.h"
#include "autocast.h"
#include "batchnorm.h"
#include "conv1x1_bn.h"
#include "conv2d.h"
#include "conv_bn_cudnn.h"
#include "cpu_f32.h"
#include "op_util.h"

#define IS_CUDA(c) ((c)->device == DEV_CUDA)

enum { UI_STRIDE = 0, UI_PAD, UI_BATCH };
enum { US_Y = 0, US_MS, US_GAMMA, US_BETA, US_W };

/* ---- the pieces, CPU or CUDA ---- */

/* mean = ms[0..C), m2 = ms[C..2C) of x [M, C] */
static void moments_run(Ctx *c, float *ms, Tensor *x)
{
    size_t C = tensor_cols(x), M = tensor_rows(x);
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        size_t sb = batchnorm_scratch_bytes(M, C);
        void *scratch = mem_alloc(c, sb);
        batchnorm_moments_cuda(ms, ms + C, x->data, x->dtype, M, C, scratch, sb, c->stream);
        mem_free(c, scratch, sb);
#endif
    } else {
        F32View v = f32_view(x, 1);
        batchnorm_moments_cpu(ms, ms + C, v.p, M, C);
        f32_done(&v, 0);
    }
}

/* a = relu(gamma (y - mean) invstd + beta), ms = (mean, invstd) */
static void apply_run(Ctx *c, Tensor *a, Tensor *y, const float *ms, const Tensor *gamma,
                      const Tensor *beta)
{
    size_t C = tensor_cols(y), M = tensor_rows(y);
    const float *g = (const float *)gamma->data, *b = (const float *)beta->data;
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        batchnorm_forward_cuda(a->data, y->data, NULL, ms, ms + C, g, b, y->dtype, 1, M, C,
                               c->stream);
#endif
    } else {
        F32View vy = f32_view(y, 1), va = f32_view(a, 0);
        batchnorm_forward_cpu(va.p, vy.p, NULL, ms, ms + C, g, b, 1, M, C);
        f32_done(&vy, 0);
        f32_done(&va, 1);
    }
}

#ifdef CTRAIN_CUDA
/* batch norm as y s + b for our 1 x 1 kernels' prologue: s at the result,
 * b at the result + C rounded up to 64 (a pool block of *bytes, the
 * caller frees it) */
static float *scale_bias(Ctx *c, size_t *bytes, const float *mean, const float *invstd,
                         const Tensor *gamma, const Tensor *beta, size_t C)
{
    *bytes = 2 * (C + 64) * sizeof(float);
    float *sc = mem_alloc(c, *bytes);
    batchnorm_scale_bias_cuda(sc, sc + (C + 63) / 64 * 64, mean, invstd,
                              (const float *)gamma->data, (const float *)beta->data, C,
                              c->stream);
    return sc;
}
#endif

/* z = conv(a, w), and when stats is not NULL *stats = the moments of z:
 * one cuDNN graph where conv_bn_cudnn serves the shape (CTRAIN_CONV_BN=
 * fused), else the convolution, then the moments pass */
static void conv_moments(Ctx *c, Tensor *z, Tensor *a, Tensor *w, const Conv2dShape *s,
                         Tensor **stats)
{
    if (!stats) {
        conv2d_run_forward(c, z, a, w, s);
        return;
    }
    int64_t shape[2] = {2, s->K};
    Tensor *ms = tensor_new(c, DT_F32, 2, shape);
    float *pm = (float *)ms->data;
#ifdef CTRAIN_CUDA
    if (IS_CUDA(c) && conv1x1_bn_wanted(a->dtype, s, a->data, w->data, z->data)) {
        conv1x1_bn_cuda(c, z->data, pm, pm + s->K, a->data, NULL, NULL, w->data, a->dtype,
                        tensor_rows(z), s->C, s->K);
        *stats = ms;
        return;
    }
    if (IS_CUDA(c) &&
        conv_bn_cudnn_conv_stats(c, z->data, pm, pm + s->K, a->data, w->data, a->dtype, s)) {
        *stats = ms;
        return;
    }
#endif
    conv2d_run_forward(c, z, a, w, s);
    moments_run(c, pm, z);
    *stats = ms;
}

/* Conv2dForwardFn of op_conv2d_stats: arg is where the statistics go */
static void conv_moments_fwd(Ctx *c, Tensor *y, Tensor *x, Tensor *w, const Conv2dShape *s,
                             void *arg)
{
    conv_moments(c, y, x, w, s, (Tensor **)arg);
}

/* ---- op_bn_moments ---- */

Tensor *op_bn_moments(Ctx *c, Tensor *y)
{
    char d[96];
    op_check_float("bn_moments", y);
    op_check_device("bn_moments", c, y);
    if (y->ndim < 2 || tensor_rows(y) < 1)
        ct_fatal("bn_moments: input %s needs rows and channels (NHWC images are [N, H, W, C])",
                 tensor_desc(d, sizeof d, y));
    int64_t shape[2] = {2, (int64_t)tensor_cols(y)};
    Tensor *ms = tensor_new(c, DT_F32, 2, shape);
    moments_run(c, (float *)ms->data, y);
    return ms;
}

/* ---- op_conv2d_stats ---- */

Tensor *op_conv2d_stats(Ctx *c, Tensor *x, Tensor *w, int stride, int pad, Tensor **stats)
{
    if (!stats) return op_conv2d(c, x, w, stride, pad, 1);
    *stats = NULL;
    return op_conv2d_with(c, x, w, stride, pad, conv_moments_fwd, stats);
}

/* ---- op_bn_relu_conv ---- */

/* forward: a = relu(gamma xhat + beta), z = conv(a, w)   (conv_bn.h)
 *   so  da = conv^T(dz, w),  dw += corr(a, dz),  and batch norm's backward
 *   with g = (a > 0) da:  dbeta += sum g,  dgamma += sum g xhat,
 *   dy (+)= gamma invstd (g - mean(g) - xhat mean(g xhat))   (batch statistics)
 *   dy (+)= gamma invstd g                                   (running ones) */
static void bn_relu_conv_backward(Ctx *c, Node *n)
{
    Tensor *dz = n->out->grad;
    Tensor *y = n->saved[US_Y], *ms = n->saved[US_MS], *gamma = n->saved[US_GAMMA];
    Tensor *beta = n->saved[US_BETA], *wl = n->saved[US_W];
    int batch = (int)n->i[UI_BATCH];
    size_t C = tensor_cols(y), M = tensor_rows(y);
    Conv2dShape s = conv2d_shape((int)y->shape[0], (int)y->shape[1], (int)y->shape[2], (int)C,
                                 (int)wl->shape[0], (int)wl->shape[1], (int)wl->shape[2],
                                 (int)n->i[UI_STRIDE], (int)n->i[UI_STRIDE], (int)n->i[UI_PAD],
                                 (int)n->i[UI_PAD], 1, 1);
    int acc_y = 0, acc_g = 0, acc_b = 0, acc_w = 0;
    Tensor *dy = ad_grad_dst(c, n->in[0], &acc_y);
    Tensor *dg = ad_grad_dst(c, n->in[1], &acc_g);
    Tensor *db = ad_grad_dst(c, n->in[2], &acc_b);
    Tensor *dw = ad_grad_dst(c, n->in[3], &acc_w);
    if (!dy && !dg && !db && !dw) return;
    CT_ASSERT((!dg || dg->dtype == DT_F32) && (!db || db->dtype == DT_F32),
              "bn_relu_conv: the gamma and beta gradients must be f32");
    const float *mean = (const float *)ms->data, *invstd = mean + C;

    /* the filter gradient reads a = relu(bn(y)): made in the prologue of our
     * own 1 x 1 kernel or of one fused graph where either serves the shape,
     * else made again for it alone */
    if (dw) {
        int fused = 0;
#ifdef CTRAIN_CUDA
        if (IS_CUDA(c) && conv1x1_wgrad_bn_wanted(y->dtype, &s, dz->data, y->data)) {
            size_t sbb = 0;
            float *sc = scale_bias(c, &sbb, mean, invstd, gamma, beta, C);
            float *bi = sc + (C + 63) / 64 * 64;
            conv1x1_wgrad_bn_cuda(c, dw->data, dw->dtype, acc_w, dz->data, y->data, sc, bi,
                                  y->dtype, M, (int)C, s.K);
            mem_free(c, sc, sbb);
            fused = 1;
        }
        if (!fused && IS_CUDA(c))
            fused = conv_bn_cudnn_bnrelu_wgrad(c, dw->data, dw->dtype, acc_w, y->data, mean,
                                               (const float *)gamma->data,
                                               (const float *)beta->data, dz->data, y->dtype, &s);
#endif
        if (!fused) {
            Tensor *a = tensor_new_like(c, y, y->dtype);
            apply_run(c, a, y, mean, gamma, beta);
            conv2d_run_backward_filter(c, dw, dz, a, &s, acc_w);
            tensor_release(a);
        }
    }
    if (!dy && !dg && !db) return;
    Tensor *da = tensor_new_like(c, y, y->dtype);
    int acc_p = batchnorm_param_accum(c, dg, acc_g, db, acc_b);
    float *pg = dg ? (float *)dg->data : NULL, *pb = db ? (float *)db->data : NULL;
    const float *pgamma = (const float *)gamma->data, *pbeta = (const float *)beta->data;
#ifdef CTRAIN_CUDA
    /* the data gradient with the ReLU's mask and batch norm's sums in its
     * epilogue, in our 1 x 1 kernel or where conv_bn_cudnn serves the shape:
     * then the sums' [C] finish and the dx pass */
    int own = IS_CUDA(c) && conv1x1_dgrad_bn_wanted(y->dtype, &s, dz->data, wl->data, y->data,
                                                   da->data);
    if (own || (IS_CUDA(c) && conv_bn_cudnn_enabled(c, y->dtype))) {
        size_t c4 = (C + 63) / 64 * 64, sbytes = 4 * c4 * sizeof(float);
        float *sums = mem_alloc(c, sbytes), *mg = sums + 2 * c4, *mgx = sums + 3 * c4;
        int fused = 1;
        if (own) /* its [2][C] sums land at sums and sums + c4: it takes C % 64 == 0 only */
            conv1x1_dgrad_bn_cuda(c, da->data, sums, dz->data, wl->data, y->data, mean, invstd,
                                  pgamma, pbeta, y->dtype, M, (int)C, s.K);
        else
            fused = conv_bn_cudnn_dgrad_relu(c, da->data, sums, sums + c4, dz->data, wl->data,
                                             y->data, mean, pgamma, pbeta, y->dtype, &s);
        if (fused) {
            batchnorm_backward_sums_cuda(mg, mgx, pg, pb, sums, sums + c4, M, C, acc_p,
                                         c->stream);
            if (dy)
                batchnorm_backward_dx_cuda(dy->data, NULL, da->data, y->data, NULL, mean, invstd,
                                           pgamma, NULL, mg, mgx, y->dtype, batch, 0, M, C,
                                           acc_y, 0, c->stream);
        }
        mem_free(c, sums, sbytes);
        if (fused) {
            tensor_release(da);
            return;
        }
    }
#endif
    conv2d_run_backward_data(c, da, dz, wl, &s, 0);
    /* batch norm's backward, the ReLU's mask recomputed from y (relu mode
     * 2: the forward's a, bit for bit, without keeping it) */
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        int need_sums = dg || db || (dy && batch);
        size_t sb = need_sums ? batchnorm_scratch_bytes(M, C) : 0;
        void *scratch = sb ? mem_alloc(c, sb) : NULL;
        batchnorm_backward_cuda(dy ? dy->data : NULL, NULL, pg, pb, da->data, y->data, NULL,
                                mean, invstd, pgamma, pbeta, y->dtype, batch, 2, M, C, acc_y, 0,
                                acc_p, scratch, sb, c->stream);
        if (scratch) mem_free(c, scratch, sb);
#endif
    } else {
        F32View vdy = f32_view(dy, acc_y), vg = f32_view(da, 1), vy = f32_view(y, 1);
        batchnorm_backward_cpu(vdy.p, NULL, pg, pb, vg.p, vy.p, NULL, mean, invstd, pgamma, pbeta,
                               batch, 2, M, C, acc_y, 0, acc_p);
        f32_done(&vdy, 1); f32_done(&vg, 0); f32_done(&vy, 0);
    }
    tensor_release(da);
}

/* A per-channel f32 vector of the batch norm: C elements on c's device. */
static void check_vec(const char *what, const Ctx *c, const Tensor *t, DType dt, size_t C,
                      const Tensor *y)
{
    char dt_[96], dy[96];
    if (t->dtype != dt || t->numel != C || !t->data)
        ct_fatal("bn_relu_conv: %s %s must be %s with %zu elements (one per channel of %s)",
                 what, tensor_desc(dt_, sizeof dt_, t), dtype_name(dt), C,
                 tensor_desc(dy, sizeof dy, y));
    op_check_device("bn_relu_conv", c, t);
}

/* The composition the unit stands for: under autocast with an f32 y, and
 * with sync batch norm (whose statistics cover every rank). */
static Tensor *bn_relu_conv_composed(Ctx *c, Tensor *y, const BnArgs *bn, Tensor *w,
                                     int stride, int pad, Tensor **stats_out)
{
    Tensor *a = op_batchnorm(c, y, bn->gamma, bn->beta, bn->running_mean, bn->running_var,
                             bn->num_batches_tracked, bn->training, bn->momentum, bn->eps, NULL,
                             1);
    Tensor *z = op_conv2d(c, a, w, stride, pad, 1);
    tensor_release(a);
    (void)stats_out;   /* NULL: a unit after this one takes its own */
    return z;
}

Tensor *op_bn_relu_conv(Ctx *c, Tensor *y, Tensor *stats, const BnArgs *bn, Tensor *w0,
                        int stride, int pad, Tensor **stats_out)
{
    char d1[96];
    if (stats_out) *stats_out = NULL;
    conv2d_check_operands("bn_relu_conv", c, y, w0);
    if (!bn->gamma || !bn->beta)
        ct_fatal("bn_relu_conv: the unit needs gamma and beta (use op_batchnorm and op_conv2d "
                 "for a batch norm without them)");
    size_t C = tensor_cols(y), M = tensor_rows(y);
    check_vec("gamma", c, bn->gamma, DT_F32, C, y);
    check_vec("beta", c, bn->beta, DT_F32, C, y);
    if (!bn->running_mean != !bn->running_var)
        ct_fatal("bn_relu_conv: running_mean and running_var go together (both or neither)");
    if (bn->running_mean) {
        check_vec("running_mean", c, bn->running_mean, DT_F32, C, y);
        check_vec("running_var", c, bn->running_var, DT_F32, C, y);
    }
    if (bn->num_batches_tracked) check_vec("num_batches_tracked", c, bn->num_batches_tracked,
                                           DT_I64, 1, y);
    int batch = bn->training || !bn->running_mean;
    int sync = bn->training && c->bn_allreduce != NULL;
    if (sync || autocast_dtype(c, y->dtype) != y->dtype)
        return bn_relu_conv_composed(c, y, bn, w0, stride, pad, stats_out);
    if (batch && M < 2)
        ct_fatal_hint("use a batch of at least 2 samples (or larger feature maps), or run the "
                      "model in eval mode",
                      "bn_relu_conv: expected more than 1 value per channel when training, got "
                      "input %s", tensor_desc(d1, sizeof d1, y));
    Conv2dShape s = conv2d_shape((int)y->shape[0], (int)y->shape[1], (int)y->shape[2], (int)C,
                                 (int)w0->shape[0], (int)w0->shape[1], (int)w0->shape[2], stride,
                                 stride, pad, pad, 1, 1);

    /* the statistics: y's batch moments (given or taken here), or the
     * running ones; ms = (mean, invstd), made as op_batchnorm makes them */
    Tensor *mv = NULL;
    if (batch) {
        if (stats) {
            if (stats->dtype != DT_F32 || stats->numel != 2 * C)
                ct_fatal("bn_relu_conv: statistics %s must be f32 [2, %zu] (op_bn_moments of "
                         "the input)", tensor_desc(d1, sizeof d1, stats), C);
            op_check_device("bn_relu_conv", c, stats);
            mv = stats;
            tensor_retain(mv);
        } else {
            mv = op_bn_moments(c, y);
        }
    }
    int64_t mshape[2] = {2, (int64_t)C};
    Tensor *ms = tensor_new(c, DT_F32, 2, mshape);
    float *pm = (float *)ms->data;
    /* a recompute segment re-running its forward counts the batch once;
     * as op_batchnorm: the counter counts every training batch, the
     * running statistics are updated when there are some */
    int update = bn->training && !c->recomputing;
    float *rm = update && bn->running_mean ? (float *)bn->running_mean->data : NULL;
    float *rv = update && bn->running_var ? (float *)bn->running_var->data : NULL;
    int64_t *nbt = update && bn->num_batches_tracked
                       ? (int64_t *)bn->num_batches_tracked->data : NULL;
    const float *mom_mean = batch ? (const float *)mv->data : NULL;
    const float *mom_m2 = batch ? mom_mean + C : NULL;
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        if (batch)
            batchnorm_stats_from_moments_cuda(pm, pm + C, rm, rv, nbt, mom_mean, mom_m2,
                                              bn->momentum, bn->eps, M, C, c->stream);
        else
            batchnorm_eval_stats_cuda(pm, pm + C, (const float *)bn->running_mean->data,
                                      (const float *)bn->running_var->data, bn->eps, C,
                                      c->stream);
#endif
    } else if (batch) {
        batchnorm_stats_from_moments_cpu(pm, pm + C, rm, rv, nbt, mom_mean, mom_m2,
                                         bn->momentum, bn->eps, M, C);
    } else {
        batchnorm_eval_stats_cpu(pm, pm + C, (const float *)bn->running_mean->data,
                                 (const float *)bn->running_var->data, bn->eps, C);
    }
    tensor_release(mv);

    Tensor *wl = autocast_cast_weight(c, w0, y->dtype);
    int64_t zshape[4] = {s.N, s.P, s.Q, s.K};
    Tensor *z = tensor_new(c, y->dtype, 4, zshape);
    Tensor **want = stats_out && bn->training ? stats_out : NULL;
    int fused = 0;
#ifdef CTRAIN_CUDA
    /* a = relu(y s + b) in the prologue of our own 1 x 1 convolution, the
     * statistics of z in its epilogue, where it is wanted (conv1x1_bn.h) */
    if (IS_CUDA(c) && conv1x1_bn_wanted(y->dtype, &s, y->data, wl->data, z->data)) {
        size_t sbb = 0;
        float *sc = scale_bias(c, &sbb, pm, pm + C, bn->gamma, bn->beta, C);
        float *bi = sc + (C + 63) / 64 * 64;
        int64_t sshape[2] = {2, s.K};
        Tensor *so = want ? tensor_new(c, DT_F32, 2, sshape) : NULL;
        float *ps = so ? (float *)so->data : NULL;
        conv1x1_bn_cuda(c, z->data, ps, ps ? ps + s.K : NULL, y->data, sc, bi, wl->data,
                        y->dtype, M, (int)C, s.K);
        mem_free(c, sc, sbb);
        if (so) *want = so;
        fused = 1;
    }
    /* a = relu(bn(y)) in the convolution's prologue, never written, where
     * conv_bn_cudnn serves the shape (its y s + b in f32 may then put an
     * element at the ReLU's kink on the other side of it than the
     * backward's recomputed mask: the activation there is ~0 either way) */
    if (!fused && IS_CUDA(c) && conv_bn_cudnn_enabled(c, y->dtype)) {
        int64_t sshape[2] = {2, s.K};
        Tensor *so = want ? tensor_new(c, DT_F32, 2, sshape) : NULL;
        float *ps = so ? (float *)so->data : NULL;
        fused = conv_bn_cudnn_bnrelu_fprop(c, z->data, ps, ps ? ps + s.K : NULL, y->data, pm,
                                           (const float *)bn->gamma->data,
                                           (const float *)bn->beta->data, wl->data, y->dtype, &s);
        if (fused && so)
            *want = so;
        else
            tensor_release(so);
    }
#endif
    if (!fused) {
        Tensor *a = tensor_new_like(c, y, y->dtype);
        apply_run(c, a, y, pm, bn->gamma, bn->beta);
        conv_moments(c, z, a, wl, &s, want);
        tensor_release(a);
    }

    Tensor *in[4] = {y, bn->gamma, bn->beta, w0};
    if (ad_needs_grad(c, in, 4)) {
        Node *n = ad_record(c, "bn_relu_conv", bn_relu_conv_backward, z, in, 4);
        n->i[UI_STRIDE] = stride;
        n->i[UI_PAD] = pad;
        n->i[UI_BATCH] = batch;
        ad_save(n, y);
        ad_save(n, ms);
        ad_save(n, bn->gamma);
        ad_save(n, bn->beta);
        ad_save(n, wl);
    }
    tensor_release(ms);
    tensor_release(wl);
    return z;
}
