/* resnet.c — ResNet-18/34/50/101/152: registry (torchvision names), init,
 * forward. Backward needs no code here: every op records its own node. */
#include "resnet.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "engine/settings.h"
#include "ops/batchnorm.h"
#include "ops/conv2d.h"
#include "ops/conv_bn.h"
#include "ops/ops.h"
#include "ops/pool.h"

typedef struct BNRef { int gamma, beta, rm, rv, nbt; } BNRef;  /* param / buffer indices */

typedef struct Block {
    int n_conv;          /* 2 (basic) or 3 (bottleneck) */
    int conv[3];
    int ksize[3];
    int stride;          /* on conv[1] for bottleneck (v1.5), conv[0] for basic */
    BNRef bn[3];
    int has_down;
    int down_conv;
    BNRef down_bn;
} Block;

typedef struct BlockArg { Model *m; const Block *blk; } BlockArg;

typedef struct ResNet {
    ResNetConfig cfg;
    BlockArg *args;      /* one per block, for recompute segments */
    int conv1;
    BNRef bn1;
    Block *blocks;
    int n_blocks;
    int fc_w, fc_b;
} ResNet;

static const int layers_18[4] = {2, 2, 2, 2}, layers_34[4] = {3, 4, 6, 3};
static const int layers_101[4] = {3, 4, 23, 3}, layers_152[4] = {3, 8, 36, 3};

static const int *resnet_layers(int depth)
{
    switch (depth) {
    case 18: return layers_18;
    case 34: case 50: return layers_34;
    case 101: return layers_101;
    case 152: return layers_152;
    default: return NULL;
    }
}

void resnet_config_default(ResNetConfig *cfg, int depth)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->depth = depth;
    cfg->classes = 1000;
    cfg->in_channels = 3;
    cfg->width = 64;
    cfg->bn_unit = setting_choice(SET_CONV_BN) >= 1;   /* "separate|unit|fused" */
}

/* ---- registry ---- */

static int add_conv(ParamSet *ps, const char *name, int out, int in, int k)
{
    /* Kaiming normal, mode fan_out, ReLU gain: std = sqrt(2 / (out * k * k)) */
    float std = sqrtf(2.0f / (float)(out * k * k));
    return params_add_layout(ps, name, 4, (int64_t[]){out, in, k, k}, LAYOUT_OHWI, INIT_NORMAL,
                             std, 1);
}

static BNRef add_bn(ParamSet *ps, const char *prefix, int ch, int zero_gamma, int decay)
{
    char n[128];
    BNRef b;
    snprintf(n, sizeof n, "%s.weight", prefix);
    b.gamma = params_add(ps, n, 1, (int64_t[]){ch}, zero_gamma ? INIT_ZERO : INIT_ONE, 0, decay);
    snprintf(n, sizeof n, "%s.bias", prefix);
    b.beta = params_add(ps, n, 1, (int64_t[]){ch}, INIT_ZERO, 0, decay);
    snprintf(n, sizeof n, "%s.running_mean", prefix);
    b.rm = params_add_buffer(ps, n, DT_F32, 1, (int64_t[]){ch}, INIT_ZERO);
    snprintf(n, sizeof n, "%s.running_var", prefix);
    b.rv = params_add_buffer(ps, n, DT_F32, 1, (int64_t[]){ch}, INIT_ONE);
    snprintf(n, sizeof n, "%s.num_batches_tracked", prefix);
    b.nbt = params_add_buffer(ps, n, DT_I64, 0, NULL, INIT_ZERO);
    return b;
}

static Tensor *bn_apply(Ctx *c, Model *m, const BNRef *b, Tensor *x, Tensor *z, int relu)
{
    ParamSet *ps = &m->params;
    return op_batchnorm(c, x, ps->p[b->gamma].t, ps->p[b->beta].t, ps->b[b->rm].t,
                        ps->b[b->rv].t, ps->b[b->nbt].t, m->training, 0.1f, 1e-5f, z, relu);
}

/* ---- forward ---- */

/* The block's last conv output y: BN, + identity (or downsample), ReLU —
 * one fused op. */
static Tensor *block_out(Ctx *c, Model *m, const Block *blk, Tensor *x, Tensor *y)
{
    ParamSet *ps = &m->params;
    Tensor *id = x;
    tensor_retain(id);
    if (blk->has_down) {
        Tensor *d = op_conv2d(c, x, ps->p[blk->down_conv].t, blk->stride, 0, 1);
        tensor_release(id);
        id = bn_apply(c, m, &blk->down_bn, d, NULL, 0);
        tensor_release(d);
    }
    Tensor *h = bn_apply(c, m, &blk->bn[blk->n_conv - 1], y, id, 1);
    tensor_release(id);
    return h;
}

static int conv_stride(const Block *blk, int i)
{
    return (blk->n_conv == 3 ? i == 1 : i == 0) ? blk->stride : 1;
}

/* conv -> BN + ReLU -> conv ... as separate ops */
static Tensor *block_forward_separate(Ctx *c, Model *m, const Block *blk, Tensor *x)
{
    ParamSet *ps = &m->params;
    Tensor *h = x;
    tensor_retain(h);
    for (int i = 0; i < blk->n_conv; i++) {
        int k = blk->ksize[i];
        Tensor *y = op_conv2d(c, h, ps->p[blk->conv[i]].t, conv_stride(blk, i), k / 2, 1);
        tensor_release(h);
        if (i < blk->n_conv - 1) {
            h = bn_apply(c, m, &blk->bn[i], y, NULL, 1);
            tensor_release(y);
            continue;
        }
        h = block_out(c, m, blk, x, y);
        tensor_release(y);
    }
    return h;
}

/* The same through the conv + BN unit (ops/conv_bn.h): each BN + ReLU
 * between two convs takes the statistics the conv before it handed on and
 * is applied as the next conv reads it. */
static Tensor *block_forward_unit(Ctx *c, Model *m, const Block *blk, Tensor *x)
{
    ParamSet *ps = &m->params;
    /* statistics handed on only where a unit will read them (sync batch
     * norm takes its own over every rank) */
    int hand_on = m->training && !c->bn_allreduce;
    Tensor *st = NULL;
    Tensor *y = op_conv2d_stats(c, x, ps->p[blk->conv[0]].t, conv_stride(blk, 0),
                                blk->ksize[0] / 2, hand_on ? &st : NULL);
    for (int i = 1; i < blk->n_conv; i++) {
        const BNRef *b = &blk->bn[i - 1];
        BnArgs bn = {ps->p[b->gamma].t, ps->p[b->beta].t, ps->b[b->rm].t, ps->b[b->rv].t,
                     ps->b[b->nbt].t, m->training, 0.1f, 1e-5f};
        Tensor *st_next = NULL;
        Tensor *z = op_bn_relu_conv(c, y, st, &bn, ps->p[blk->conv[i]].t, conv_stride(blk, i),
                                    blk->ksize[i] / 2,
                                    i < blk->n_conv - 1 && hand_on ? &st_next : NULL);
        tensor_release(y);
        tensor_release(st);
        y = z;
        st = st_next;
    }
    Tensor *h = block_out(c, m, blk, x, y);
    tensor_release(y);
    return h;
}

static Tensor *block_forward(Ctx *c, Model *m, const Block *blk, Tensor *x)
{
    const ResNet *r = (const ResNet *)m->impl;
    return r->cfg.bn_unit ? block_forward_unit(c, m, blk, x)
                          : block_forward_separate(c, m, blk, x);
}

/* A block as a recompute segment (SegmentFn). */
static Tensor *block_segment(Ctx *c, void *arg, Tensor *x)
{
    BlockArg *a = (BlockArg *)arg;
    return block_forward(c, a->m, a->blk, x);
}

static Tensor *resnet_forward(Ctx *c, Model *m, Tensor *x)
{
    ResNet *r = (ResNet *)m->impl;
    ParamSet *ps = &m->params;
    char d[96];
    if (x->ndim != 4 || x->shape[3] != r->cfg.in_channels)
        ct_fatal("%s: input %s must be NHWC with %d channels", m->name,
                 tensor_desc(d, sizeof d, x), r->cfg.in_channels);
    Tensor *h = op_conv2d(c, x, ps->p[r->conv1].t, 2, 3, 1);
    Tensor *t = bn_apply(c, m, &r->bn1, h, NULL, 1);
    tensor_release(h);
    h = op_maxpool2d(c, t, 3, 2, 1);
    tensor_release(t);
    for (int i = 0; i < r->n_blocks; i++) {
        r->args[i].m = m;
        r->args[i].blk = &r->blocks[i];
        t = recompute_wants(&r->cfg.recompute, i) ? recompute_segment(c, block_segment, &r->args[i], h)
                                                  : block_forward(c, m, &r->blocks[i], h);
        tensor_release(h);
        h = t;
    }
    t = op_avgpool_global(c, h);
    tensor_release(h);
    Tensor *z = op_linear(c, t, ps->p[r->fc_w].t, ps->p[r->fc_b].t);
    tensor_release(t);
    return z;
}

static void resnet_free_impl(Model *m)
{
    ResNet *r = (ResNet *)m->impl;
    free(r->blocks);
    free(r->args);
    free(r);
    m->impl = NULL;
}

void resnet_create(Model *m, Ctx *c, const ResNetConfig *cfg, uint64_t seed)
{
    const int *layers = resnet_layers(cfg->depth);
    if (!layers) ct_fatal_hint("use resnet18, resnet34, resnet50, resnet101 or resnet152",
                               "no ResNet of depth %d", cfg->depth);
    CT_ASSERT(cfg->classes >= 1 && cfg->in_channels >= 1 && cfg->width >= 1,
              "resnet: classes, input channels and width must be positive");
    ResNet *r = (ResNet *)calloc(1, sizeof *r);
    if (!r) ct_fatal("out of host memory");
    r->cfg = *cfg;
    int bottleneck = cfg->depth >= 50, expansion = bottleneck ? 4 : 1;
    int bn_decay = !cfg->no_wd_bn_bias;
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "resnet%d", cfg->depth);
    ParamSet *ps = &m->params;
    params_init(ps);

    int w = cfg->width;
    r->conv1 = add_conv(ps, "conv1.weight", w, cfg->in_channels, 7);
    r->bn1 = add_bn(ps, "bn1", w, 0, bn_decay);
    r->n_blocks = layers[0] + layers[1] + layers[2] + layers[3];
    r->blocks = (Block *)calloc((size_t)r->n_blocks, sizeof *r->blocks);
    r->args = (BlockArg *)calloc((size_t)r->n_blocks, sizeof *r->args);
    int inplanes = w, bi = 0;
    for (int l = 0; l < 4; l++) {
        int planes = w << l;
        for (int j = 0; j < layers[l]; j++, bi++) {
            Block *b = &r->blocks[bi];
            char p[96], n[128];
            b->stride = (j == 0 && l > 0) ? 2 : 1;
            b->n_conv = bottleneck ? 3 : 2;
            int outs[3], ins[3];
            if (bottleneck) {
                int ks[3] = {1, 3, 1};
                outs[0] = planes; outs[1] = planes; outs[2] = planes * 4;
                ins[0] = inplanes; ins[1] = planes; ins[2] = planes;
                memcpy(b->ksize, ks, sizeof ks);
            } else {
                outs[0] = planes; outs[1] = planes;
                ins[0] = inplanes; ins[1] = planes;
                b->ksize[0] = b->ksize[1] = 3;
            }
            for (int i = 0; i < b->n_conv; i++) {
                snprintf(p, sizeof p, "layer%d.%d", l + 1, j);
                snprintf(n, sizeof n, "%s.conv%d.weight", p, i + 1);
                b->conv[i] = add_conv(ps, n, outs[i], ins[i], b->ksize[i]);
                snprintf(n, sizeof n, "%s.bn%d", p, i + 1);
                b->bn[i] = add_bn(ps, n, outs[i],
                                  cfg->zero_init_residual && i == b->n_conv - 1, bn_decay);
            }
            if (j == 0 && (b->stride != 1 || inplanes != planes * expansion)) {
                b->has_down = 1;
                snprintf(n, sizeof n, "%s.downsample.0.weight", p);
                b->down_conv = add_conv(ps, n, planes * expansion, inplanes, 1);
                snprintf(n, sizeof n, "%s.downsample.1", p);
                b->down_bn = add_bn(ps, n, planes * expansion, 0, bn_decay);
            }
            inplanes = planes * expansion;
        }
    }
    float bound = 1.0f / sqrtf((float)inplanes);
    r->fc_w = params_add(ps, "fc.weight", 2, (int64_t[]){cfg->classes, inplanes}, INIT_UNIFORM,
                         bound, 1);
    r->fc_b = params_add(ps, "fc.bias", 1, (int64_t[]){cfg->classes}, INIT_UNIFORM, bound,
                         bn_decay);
    m->impl = r;
    m->classes = cfg->classes;
    m->training = 1;
    m->forward = resnet_forward;
    m->free_impl = resnet_free_impl;
    params_alloc(ps, c, seed);
}

/* ---- work per image ---- */

static double conv_flops(int *h, int *wd, int cin, int cout, int k, int s, int pad)
{
    int ho = (*h + 2 * pad - k) / s + 1, wo = (*wd + 2 * pad - k) / s + 1;
    *h = ho;
    *wd = wo;
    return 2.0 * ho * wo * (double)cout * cin * k * k;
}

double resnet_flops_per_image(const ResNetConfig *cfg, int size)
{
    const int *layers = resnet_layers(cfg->depth);
    if (!layers) return 0;
    int bottleneck = cfg->depth >= 50, expansion = bottleneck ? 4 : 1, w = cfg->width;
    int h = size, wd = size;
    double f = conv_flops(&h, &wd, cfg->in_channels, w, 7, 2, 3);
    h = (h + 2 - 3) / 2 + 1;
    wd = (wd + 2 - 3) / 2 + 1;
    int inplanes = w;
    for (int l = 0; l < 4; l++) {
        int planes = w << l;
        for (int j = 0; j < layers[l]; j++) {
            int s = (j == 0 && l > 0) ? 2 : 1;
            int h0 = h, w0 = wd;
            if (bottleneck) {
                f += conv_flops(&h, &wd, inplanes, planes, 1, 1, 0);
                f += conv_flops(&h, &wd, planes, planes, 3, s, 1);
                f += conv_flops(&h, &wd, planes, planes * 4, 1, 1, 0);
            } else {
                f += conv_flops(&h, &wd, inplanes, planes, 3, s, 1);
                f += conv_flops(&h, &wd, planes, planes, 3, 1, 1);
            }
            if (j == 0 && (s != 1 || inplanes != planes * expansion))
                f += conv_flops(&h0, &w0, inplanes, planes * expansion, 1, s, 0);
            inplanes = planes * expansion;
        }
    }
    return f + 2.0 * inplanes * cfg->classes;
}
