/* conv_bn_case.h — one run of the conv + batch-norm unit (ops/conv_bn.h) or
 * of the composition it stands for (op_batchnorm + ReLU, then op_conv2d),
 * on any context: the same inputs from a seed, L = sum(u * z) with fixed
 * weights u, backward, and everything read back to the host (z, the
 * gradients of y, gamma, beta and w, the running statistics and the batch
 * counter, and the statistics handed on to the next unit). Shared by
 * tests/test_conv_bn.c (CPU) and tests/gpu_conv_bn.c (CUDA).
 *
 * Shape letters: y [N, H, W, C], w [K, R, R, C], z [N, P, Q, K].
 */
#ifndef CTRAIN_TESTS_CONV_BN_CASE_H
#define CTRAIN_TESTS_CONV_BN_CASE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/mem.h"
#include "models/resnet.h"
#include "engine/tensor.h"
#include "ops/batchnorm.h"
#include "ops/conv2d.h"
#include "ops/conv_bn.h"
#include "ops/ops.h"

typedef struct CbShape {
    int N, H, W, C, K, R, stride, pad;
} CbShape;

typedef struct CbOut {
    float *z, *dy, *dgamma, *dbeta, *dw, *rm, *rv, *stats_out;
    int64_t nbt;
    size_t nz, ny, nw;
    size_t held_after_forward;   /* device bytes the forward left held (activations kept) */
} CbOut;

/* uniform in [lo, hi) from (seed, i): the same on every machine */
static inline float cb_uniform(uint32_t seed, size_t i, float lo, float hi)
{
    uint32_t v = (uint32_t)((i + 1) * 2654435761u) ^ (seed * 0x9e3779b9u);
    v ^= v >> 15;
    v *= 0x2c1b3c6du;
    v ^= v >> 12;
    v *= 0x297a2d39u;
    v ^= v >> 15;
    return lo + (hi - lo) * (float)(v >> 8) / 16777216.0f;
}

static inline float *cb_fill(uint32_t seed, size_t n, float lo, float hi)
{
    float *p = (float *)malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = cb_uniform(seed, i, lo, hi);
    return p;
}

static inline float *cb_read(Tensor *t)
{
    if (!t) return NULL;
    float *p = (float *)malloc((t->numel ? t->numel : 1) * sizeof(float));
    tensor_to_f32(p, t);
    return p;
}

/* flags of cb_run: CB_ACCUM first gives gamma a gradient of its own (from
 * sum(gamma^2), beta none), then runs forward and backward twice, so every
 * gradient the unit writes is also added into once (and a fresh dbeta sits
 * beside an accumulating dgamma). */
enum { CB_ACCUM = 1 };

/* unit: 1 the unit, 0 the composition. given_stats: hand the unit y's
 * statistics (op_bn_moments) rather than let it take them. training: batch
 * statistics and the running update (0: eval with the running ones).
 * dt: y's type (w stays f32, read in dt as a parameter is under AMP). */
static inline CbOut cb_run(Ctx *c, const CbShape *s, DType dt, int unit, int given_stats,
                           int training, int flags)
{
    CbOut o;
    memset(&o, 0, sizeof o);
    size_t M = (size_t)s->N * s->H * s->W, ny = M * s->C;
    size_t nw = (size_t)s->K * s->R * s->R * s->C;
    float *yh = cb_fill(1, ny, -1.0f, 1.0f);
    /* channels of different offsets and scales: statistics worth testing */
    for (size_t m = 0; m < M; m++)
        for (int k = 0; k < s->C; k++) yh[m * s->C + k] = yh[m * s->C + k] * (1.0f + 0.3f * k) + 0.2f * k;
    float *wh = cb_fill(2, nw, -0.3f, 0.3f);
    float *gh = cb_fill(3, (size_t)s->C, 0.5f, 1.5f), *bh = cb_fill(4, (size_t)s->C, -0.3f, 0.3f);
    float *rmh = cb_fill(5, (size_t)s->C, -0.2f, 0.2f), *rvh = cb_fill(6, (size_t)s->C, 0.5f, 1.5f);
    int64_t nbt0 = 3;
    Tensor *y = tensor_from_f32(c, yh, dt, 4, (int64_t[]){s->N, s->H, s->W, s->C});
    Tensor *w = tensor_from_f32(c, wh, DT_F32, 4, (int64_t[]){s->K, s->R, s->R, s->C});
    Tensor *g = tensor_from_f32(c, gh, DT_F32, 1, (int64_t[]){s->C});
    Tensor *b = tensor_from_f32(c, bh, DT_F32, 1, (int64_t[]){s->C});
    Tensor *rm = tensor_from_f32(c, rmh, DT_F32, 1, (int64_t[]){s->C});
    Tensor *rv = tensor_from_f32(c, rvh, DT_F32, 1, (int64_t[]){s->C});
    Tensor *nbt = tensor_from_host(c, &nbt0, DT_I64, 1, (int64_t[]){1});
    y->requires_grad = w->requires_grad = g->requires_grad = b->requires_grad = 1;
    BnArgs bn = {g, b, rm, rv, nbt, training, 0.1f, 1e-5f};
    if (flags & CB_ACCUM) {
        Tensor *gg = op_mul(c, g, g), *l0 = op_sum(c, gg);
        ad_backward(c, l0, 1.0f);
        tensor_release(gg);
        tensor_release(l0);
    }
    float *uh = NULL;
    Tensor *z = NULL, *st_out = NULL, *u = NULL, *p = NULL, *loss = NULL;
    for (int pass = 0; pass < ((flags & CB_ACCUM) ? 2 : 1); pass++) {
        Tensor *prev[5] = {z, st_out, u, p, loss};
        for (int k = 0; k < 5; k++) tensor_release(prev[k]);
        st_out = NULL;
        size_t base = c->mem.current;
        if (unit) {
            Tensor *st = given_stats && training ? op_bn_moments(c, y) : NULL;
            z = op_bn_relu_conv(c, y, st, &bn, w, s->stride, s->pad, &st_out);
            tensor_release(st);
        } else {
            Tensor *a = op_batchnorm(c, y, g, b, rm, rv, nbt, training, 0.1f, 1e-5f, NULL, 1);
            z = op_conv2d(c, a, w, s->stride, s->pad, 1);
            tensor_release(a);
            if (training) st_out = op_bn_moments(c, z);
        }
        if (pass == 0) o.held_after_forward = c->mem.current - base;
        o.nz = z->numel;
        o.ny = ny;
        o.nw = nw;
        if (!uh) uh = cb_fill(7, z->numel, -1.0f, 1.0f);
        u = tensor_from_f32(c, uh, z->dtype, z->ndim, z->shape);
        p = op_mul(c, z, u);
        loss = op_sum(c, p);
        ad_backward(c, loss, 1.0f);
    }
    o.z = cb_read(z);
    o.dy = cb_read(y->grad);
    o.dgamma = cb_read(g->grad);
    o.dbeta = cb_read(b->grad);
    o.dw = cb_read(w->grad);
    o.rm = cb_read(rm);
    o.rv = cb_read(rv);
    o.stats_out = cb_read(st_out);
    tensor_to_host(&o.nbt, nbt);
    Tensor *all[] = {y, w, g, b, rm, rv, nbt, z, st_out, u, p, loss};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) tensor_release(all[k]);
    free(yh); free(wh); free(gh); free(bh); free(rmh); free(rvh); free(uh);
    return o;
}

static inline void cb_free(CbOut *o)
{
    free(o->z); free(o->dy); free(o->dgamma); free(o->dbeta); free(o->dw);
    free(o->rm); free(o->rv); free(o->stats_out);
    memset(o, 0, sizeof *o);
}

/* ---- a narrow ResNet's training step, built from the unit or not ---- */

typedef struct CbNet {
    float loss, *grad, *bufs, *logits;   /* logits: an eval forward after the step */
    size_t n, nb, nl;
} CbNet;

/* One step (loss, backward) of ResNet-depth at width `width`, B images of
 * S x S from fixed values, then an eval forward on the same images. */
static inline CbNet cb_net_step(Ctx *c, int depth, int width, int S, int unit, int recompute)
{
    CbNet o;
    memset(&o, 0, sizeof o);
    ResNetConfig cfg;
    resnet_config_default(&cfg, depth);
    cfg.width = width;
    cfg.classes = 10;
    cfg.bn_unit = unit;
    cfg.recompute.every = recompute;
    Model m;
    resnet_create(&m, c, &cfg, 3);
    enum { B = 4 };
    float *xh = cb_fill(31, (size_t)B * S * S * 3, -1.0f, 1.0f);
    int32_t yh[B] = {1, 2, 7, 9};
    Tensor *x = tensor_from_f32(c, xh, DT_F32, 4, (int64_t[]){B, S, S, 3});
    Tensor *y = tensor_from_host(c, yh, DT_I32, 1, (int64_t[]){B});
    Tensor *in[2] = {x, y};
    Tensor *loss = model_loss(c, &m, in, 0.0f, NULL);
    tensor_to_f32(&o.loss, loss);
    ad_backward(c, loss, 1.0f);
    tensor_release(loss);
    o.n = m.params.total;
    o.grad = (float *)malloc(o.n * sizeof(float));
    mem_to_host(c, o.grad, m.params.grad, o.n * sizeof(float));
    size_t nb = 0;
    for (int k = 0; k < m.params.nb; k++)
        if (m.params.b[k].t->dtype == DT_F32) nb += m.params.b[k].t->numel;
    o.bufs = (float *)malloc((nb ? nb : 1) * sizeof(float));
    for (int k = 0; k < m.params.nb; k++)
        if (m.params.b[k].t->dtype == DT_F32) {
            tensor_to_f32(o.bufs + o.nb, m.params.b[k].t);
            o.nb += m.params.b[k].t->numel;
        }
    m.training = 0;
    int prev = ad_set_grad(c, 0);
    Tensor *logits = m.forward(c, &m, x);
    ad_set_grad(c, prev);
    o.nl = logits->numel;
    o.logits = (float *)malloc(o.nl * sizeof(float));
    tensor_to_f32(o.logits, logits);
    tensor_release(logits);
    tensor_release(x);
    tensor_release(y);
    model_free(&m);
    free(xh);
    return o;
}

static inline void cb_net_free(CbNet *o)
{
    free(o->grad); free(o->bufs); free(o->logits);
    memset(o, 0, sizeof *o);
}

#endif
