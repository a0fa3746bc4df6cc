/* linear_fp8.c — the FP8 Linear op (linear_fp8.h has the math): its CPU
 * reference, the autograd record, and the dispatch to the CUDA path
 * (linear_fp8_cuda.c). The scales it reads: fp8_recipe.h.
 */
#include "linear_fp8.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "autocast.h"
#include "cpu_f32.h"
#include "elementwise.h"
#include "fp8.h"
#include "linear_fp8_cuda.h"
#include "matmul.h"
#include "op_util.h"
#include "ops.h"

/* x's FP8 codes for one call: row-major xq (the forward GEMM's and the
 * CPU's), transposed xqT (CUDA's weight gradient; NULL on the CPU); cast
 * here (cast 1) or taken from a shared input (0), scaled by recipe layer
 * `layer`'s x slot either way. */
typedef struct {
    Tensor *xq, *xqT;
    int layer, cast;
} XCodes;

/* ---- the CPU reference ---- */

/* q = fp8(x * scale) over n values, the running amax raised to this tensor's. */
static void cast_cpu(uint8_t *q, float *amax, const float *x, size_t n, float scale, Fp8Format f)
{
    float a;
    fp8_cast_cpu(q, &a, x, n, scale, f);
    *amax = fmaxf(*amax, a);
}

/* The dequantized values of q: a new host buffer (free it). */
static float *dequant(const Tensor *q, float scale_inv, Fp8Format f)
{
    float *d = (float *)malloc((q->numel ? q->numel : 1) * sizeof(float));
    if (!d) ct_fatal("out of host memory");
    fp8_dequant_cpu(d, (const uint8_t *)q->data, q->numel, scale_inv, f);
    return d;
}

/* xc: x's codes; cast into them here when xc->cast, else already cast
 * (a shared input) with the scale of recipe layer xc->layer's x slot. */
static void forward_cpu(Ctx *c, Fp8Recipe *r, int layer, Tensor *y, Tensor *x, Tensor *w,
                        Tensor *bias, const XCodes *xc, Tensor *wq, int R, int In, int Out)
{
    float *h = (float *)r->block[0]->data;
    float *scale = fp8_scale_of(r, h, 0);
    const int sx = 2 * xc->layer, sw = 2 * layer + 1;
    Tensor *xq = xc->xq;
    F32View vw = f32_view(w, 1), vy = f32_view(y, 0);
    if (xc->cast) {   /* a shared input's codes are there already: x is not read */
        F32View vx = f32_view(x, 1);
        cast_cpu((uint8_t *)xq->data, fp8_amax_slot(c, r, 0, sx), vx.p, x->numel, scale[sx],
                 FP8_E4M3);
        f32_done(&vx, 0);
    }
    cast_cpu((uint8_t *)wq->data, fp8_amax_slot(c, r, 0, sw), vw.p, w->numel, scale[sw], FP8_E4M3);
    float *xd = dequant(xq, *fp8_sinv_of(r, h, 0, sx), FP8_E4M3),
          *wd = dequant(wq, *fp8_sinv_of(r, h, 0, sw), FP8_E4M3);
    matmul_cpu(vy.p, xd, wd, R, Out, In, 0, 1, 1.0f, 0.0f, 1, 0, 0, 0);
    if (bias) {
        const float *b = (const float *)bias->data;
        for (int i = 0; i < R; i++)
            for (int o = 0; o < Out; o++) vy.p[(size_t)i * Out + o] += b[o];
    }
    free(xd);
    free(wd);
    f32_done(&vw, 0);
    f32_done(&vy, 1);
}

/* xlayer: the recipe layer whose x slot scaled x's codes */
static void backward_cpu(Ctx *c, Node *n, Fp8Recipe *r, int layer, int xlayer, int R, int In,
                         int Out)
{
    Tensor *dy = n->out->grad, *xq = n->saved[0], *wq = n->saved[1];
    float *h0 = (float *)r->block[0]->data, *h1 = (float *)r->block[1]->data;
    float *amax1 = fp8_amax_of(r, h1, 1), *scale1 = fp8_scale_of(r, h1, 1);
    F32View vdy = f32_view(dy, 1);
    uint8_t *gq = (uint8_t *)malloc((size_t)R * Out);
    if (!gq) ct_fatal("out of host memory");
    cast_cpu(gq, &amax1[layer], vdy.p, (size_t)R * Out, scale1[layer], FP8_E5M2);
    float *gd = (float *)malloc((size_t)R * Out * sizeof(float));
    if (!gd) ct_fatal("out of host memory");
    fp8_dequant_cpu(gd, gq, (size_t)R * Out, *fp8_sinv_of(r, h1, 1, layer), FP8_E5M2);
    free(gq);
    int acc;
    Tensor *dx = ad_grad_dst(c, n->in[0], &acc);
    if (dx) {
        float *wd = dequant(wq, *fp8_sinv_of(r, h0, 0, 2 * layer + 1), FP8_E4M3);
        F32View v = f32_view(dx, acc);
        matmul_cpu(v.p, gd, wd, R, In, Out, 0, 0, 1.0f, acc ? 1.0f : 0.0f, 1, 0, 0, 0);
        f32_done(&v, 1);
        free(wd);
    }
    Tensor *dw = ad_grad_dst(c, n->in[1], &acc);
    if (dw) {
        float *xd = dequant(xq, *fp8_sinv_of(r, h0, 0, 2 * xlayer), FP8_E4M3);
        matmul_cpu((float *)dw->data, gd, xd, Out, In, R, 1, 0, 1.0f, acc ? 1.0f : 0.0f, 1, 0, 0,
                   0);
        free(xd);
    }
    Tensor *db = n->n_in > 2 ? ad_grad_dst(c, n->in[2], &acc) : NULL;
    if (db) bias_backward_cpu((float *)db->data, vdy.p, (size_t)R, (size_t)Out, acc);
    free(gd);
    f32_done(&vdy, 0);
}

/* ---- the op ---- */

/* n->i: R, In, Out, layer; the recipe's address in i[4] (a node has no
 * pointer field; the recipe outlives every node of the step); i[5]: 1 when
 * the input went through GELU on the way in (CUDA only); i[6]: the recipe
 * layer whose x slot scaled x's codes (layer, or the first of a shared x). */
static void linear_fp8_backward(Ctx *c, Node *n)
{
    Fp8Recipe *r = (Fp8Recipe *)(intptr_t)n->i[4];
    const int R = (int)n->i[0], In = (int)n->i[1], Out = (int)n->i[2], layer = (int)n->i[3];
    const int xlayer = (int)n->i[6];
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        linear_fp8_backward_cuda(c, n, r, layer, xlayer, R, In, Out, (int)n->i[5]);
#endif
        return;
    }
    backward_cpu(c, n, r, layer, xlayer, R, In, Out);
}

void fp8_shared_x_release(Fp8SharedX *s)
{
    tensor_release(s->x);
    tensor_release(s->xq);
    tensor_release(s->xqT);
    memset(s, 0, sizeof *s);
}

static long fwd_codes_taken;   /* Linears that took their producer's codes (a test's count) */

long linear_fp8_fwd_codes_taken(void) { return fwd_codes_taken; }

/* x's codes for this call: those x's producer made for this layer's slot
 * (taken over from x), or the shared ones when share holds this x (no cast
 * either way), else new buffers to cast into (xqT on CUDA only). The caller
 * owns one reference to each. */
static XCodes x_codes(Ctx *c, const Fp8SharedX *share, const Fp8Recipe *r, Tensor *x, int layer,
                      int R, int In, int gelu)
{
    XCodes xc = {NULL, NULL, layer, 1};
    if (!gelu && x->fwd_codes.q && x->fwd_codes.owner == (const void *)r &&
        x->fwd_codes.slot == layer && c->device == DEV_CUDA) {
        /* made by x's producer for this slot (add_norm's codes form): taken over */
        xc.xq = x->fwd_codes.q;
        xc.xqT = x->fwd_codes.qt;
        x->fwd_codes.q = x->fwd_codes.qt = NULL;
        xc.cast = 0;
        fwd_codes_taken++;
        return xc;
    }
    if (share && share->x == x && share->r == r && share->xq) {
        xc.xq = share->xq;
        xc.xqT = share->xqT;
        tensor_retain(xc.xq);
        if (xc.xqT) tensor_retain(xc.xqT);
        xc.layer = share->layer;
        xc.cast = 0;
        return xc;
    }
    xc.xq = tensor_new(c, DT_U8, 2, (int64_t[]){R, In});
    if (c->device == DEV_CUDA) xc.xqT = tensor_new(c, DT_U8, 2, (int64_t[]){In, R});
    return xc;
}

/* The op, its input x0 or, with gelu (CUDA only), GELU(x0); with share,
 * x's codes taken from or kept in it. */
/* The op's argument checks: x0 float, w an f32 [out, in] parameter that
 * fits it, bias f32 [out] or NULL, layer one of the recipe's. */
static void check_args(Ctx *c, Tensor *x0, Tensor *w, Tensor *bias, const Fp8Recipe *r,
                       int layer)
{
    char dx[96], dw[96];
    op_check_float("linear_fp8", x0);
    op_check_device("linear_fp8", c, x0);
    op_check_device("linear_fp8", c, w);
    if (w->dtype != DT_F32 || w->ndim != 2 || w->shape[1] != (int64_t)tensor_cols(x0))
        ct_fatal("linear_fp8: weight %s does not fit input %s (an f32 [out, in] parameter)",
                 tensor_desc(dw, 96, w), tensor_desc(dx, 96, x0));
    if (bias && (bias->dtype != DT_F32 || bias->ndim != 1 || bias->shape[0] != w->shape[0]))
        ct_fatal("linear_fp8: bias %s does not match weight %s", tensor_desc(dx, 96, bias),
                 tensor_desc(dw, 96, w));
    CT_ASSERT(r && layer >= 0 && layer < r->layers, "linear_fp8: layer %d of a recipe of %d",
              layer, r ? r->layers : 0);
}

static Tensor *linear_fp8(Ctx *c, Tensor *x0, Tensor *w, Tensor *bias, Fp8Recipe *r, int layer,
                          int gelu, Fp8SharedX *share)
{
    check_args(c, x0, w, bias, r, layer);
    Tensor *x = autocast_cast_input(c, x0);
    const int R = (int)tensor_rows(x), In = (int)w->shape[1], Out = (int)w->shape[0];
    int64_t shape[CT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = Out;
    Tensor *y = tensor_new(c, x->dtype, x->ndim, shape);
    XCodes xc = x_codes(c, gelu ? NULL : share, r, x, layer, R, In, gelu);
    /* saved for backward: the CPU reads the row-major codes, CUDA the
     * transposes (and h with gelu) */
    Tensor *saved[3] = {NULL, NULL, NULL};
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        linear_fp8_forward_cuda(c, r, layer, &y, x, w, bias, xc.xq, xc.xqT, xc.layer, xc.cast,
                                &saved[1], R, In, Out, gelu);
        saved[0] = xc.xqT;
        tensor_retain(saved[0]);
        if (gelu) {   /* GELU's backward reads h */
            saved[2] = x;
            tensor_retain(x);
        }
#endif
    } else {
        saved[1] = tensor_new(c, DT_U8, 2, (int64_t[]){Out, In});
        forward_cpu(c, r, layer, y, x, w, bias, &xc, saved[1], R, In, Out);
        saved[0] = xc.xq;
        tensor_retain(saved[0]);
    }
    if (share && !gelu && (xc.cast || share->x != x)) {   /* the next Linears of x take these */
        fp8_shared_x_release(share);
        share->x = x;
        share->xq = xc.xq;
        share->xqT = xc.xqT;
        share->r = r;
        share->layer = layer;
        tensor_retain(x);
        tensor_retain(xc.xq);
        if (xc.xqT) tensor_retain(xc.xqT);
    }
    Tensor *in[3] = {x, w, bias};
    if (ad_needs_grad(c, in, bias ? 3 : 2)) {
        Node *n = ad_record(c, "linear_fp8", linear_fp8_backward, y, in, bias ? 3 : 2);
        n->i[0] = R; n->i[1] = In; n->i[2] = Out; n->i[3] = layer;
        n->i[4] = (int64_t)(intptr_t)r;
        n->i[5] = gelu;
        n->i[6] = xc.layer;
        for (int k = 0; k < 3 && saved[k]; k++) ad_save(n, saved[k]);
#ifdef CTRAIN_CUDA
        if (c->device == DEV_CUDA) linear_fp8_mark_grad_cast(c, y, r, layer);
#endif
    }
    for (int k = 0; k < 3; k++) tensor_release(saved[k]);
    tensor_release(xc.xq);
    tensor_release(xc.xqT);
    tensor_release(x);
    return y;
}

Tensor *op_linear_fp8(Ctx *c, Tensor *x0, Tensor *w, Tensor *bias, Fp8Recipe *r, int layer)
{
    return linear_fp8(c, x0, w, bias, r, layer, 0, NULL);
}

Tensor *op_linear_fp8_shared(Ctx *c, Tensor *x, Tensor *w, Tensor *bias, Fp8Recipe *r,
                             int layer, Fp8SharedX *share)
{
    return linear_fp8(c, x, w, bias, r, layer, 0, share);
}

/* ---- the feed-forward block: x -> Linear -> GELU -> Linear, one node ---- */

/* n->i: R, D, Hd, Out, l1, l2; the recipe's address in i[6] */
static void ffn_fp8_backward(Ctx *c, Node *n)
{
#ifdef CTRAIN_CUDA
    ffn_fp8_backward_cuda(c, n, (Fp8Recipe *)(intptr_t)n->i[6], (int)n->i[4], (int)n->i[5],
                          (int)n->i[0], (int)n->i[1], (int)n->i[2], (int)n->i[3]);
#else
    (void)c;
    (void)n;
#endif
}

Tensor *op_ffn_fp8(Ctx *c, Tensor *x0, Tensor *w1, Tensor *b1, Tensor *w2, Tensor *b2,
                   Fp8Recipe *r, int l1, int l2)
{
    /* one node where the GELU casts run on the device in a type the FP8 GEMM
     * writes; else the two ops (the same values) */
    const DType xt = autocast_dtype(c, x0->dtype);
    if (c->device != DEV_CUDA || !b1 || !b2 || (xt != DT_BF16 && xt != DT_F32)) {
        Tensor *h = op_linear_fp8(c, x0, w1, b1, r, l1);
        Tensor *y = op_linear_fp8_gelu(c, h, w2, b2, r, l2);
        tensor_release(h);
        return y;
    }
    check_args(c, x0, w1, b1, r, l1);
    char d1[96], d2[96], d3[96];
    op_check_device("ffn_fp8", c, w2);
    op_check_device("ffn_fp8", c, b2);
    if (w2->dtype != DT_F32 || w2->ndim != 2 || w2->shape[1] != w1->shape[0] ||
        b2->dtype != DT_F32 || b2->ndim != 1 || b2->shape[0] != w2->shape[0])
        ct_fatal("ffn_fp8: the second Linear's weight %s and bias %s must be f32 [out, %lld] and "
                 "[out] (the first's weight is %s)", tensor_desc(d1, 96, w2),
                 tensor_desc(d2, 96, b2), (long long)w1->shape[0], tensor_desc(d3, 96, w1));
    CT_ASSERT(l2 >= 0 && l2 < r->layers, "ffn_fp8: layer %d of a recipe of %d", l2, r->layers);
    Tensor *x = autocast_cast_input(c, x0);
    const int R = (int)tensor_rows(x), D = (int)w1->shape[1], Hd = (int)w1->shape[0];
    const int Out = (int)w2->shape[0];
    /* the two Linears' forwards in the order (and with the buffers) the two
     * ops would make: h, x's codes, the first GEMM; y, GELU(h)'s codes, the
     * second */
    int64_t shape[CT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = Hd;
    Tensor *h = tensor_new(c, x->dtype, x->ndim, shape);
    XCodes xc1 = x_codes(c, NULL, r, x, l1, R, D, 0);
    Tensor *wqT1 = NULL, *wqT2 = NULL;
#ifdef CTRAIN_CUDA
    linear_fp8_forward_cuda(c, r, l1, &h, x, w1, b1, xc1.xq, xc1.xqT, l1, xc1.cast, &wqT1, R, D,
                            Hd, 0);
#endif
    tensor_release(xc1.xq);   /* the backward reads the transpose only */
    shape[x->ndim - 1] = Out;
    Tensor *y = tensor_new(c, x->dtype, x->ndim, shape);
    XCodes xc2 = x_codes(c, NULL, r, h, l2, R, Hd, 1);
#ifdef CTRAIN_CUDA
    linear_fp8_forward_cuda(c, r, l2, &y, h, w2, b2, xc2.xq, xc2.xqT, l2, 1, &wqT2, R, Hd, Out, 1);
#endif
    tensor_release(xc2.xq);
    Tensor *in[5] = {x, w1, b1, w2, b2};
    if (ad_needs_grad(c, in, 5)) {
        Node *n = ad_record(c, "ffn_fp8", ffn_fp8_backward, y, in, 5);
        n->i[0] = R; n->i[1] = D; n->i[2] = Hd; n->i[3] = Out; n->i[4] = l1; n->i[5] = l2;
        n->i[6] = (int64_t)(intptr_t)r;
        ad_save(n, xc1.xqT);
        ad_save(n, wqT1);
        ad_save(n, h);   /* GELU's backward reads it */
        ad_save(n, xc2.xqT);
        ad_save(n, wqT2);
#ifdef CTRAIN_CUDA
        linear_fp8_mark_grad_cast(c, y, r, l2);
#endif
    }
    tensor_release(xc1.xqT); tensor_release(xc2.xqT);
    tensor_release(wqT1); tensor_release(wqT2);
    tensor_release(h);
    tensor_release(x);
    return y;
}

Tensor *op_linear_fp8_gelu(Ctx *c, Tensor *h, Tensor *w, Tensor *bias, Fp8Recipe *r, int layer)
{
    /* one pass where the cast can apply GELU itself: CUDA, h already in the
     * type the Linear reads (autocast would not cast it) and one the FP8
     * GEMM writes its gradient in; otherwise the two ops, the same values */
    if (c->device == DEV_CUDA && autocast_dtype(c, h->dtype) == h->dtype &&
        (h->dtype == DT_BF16 || h->dtype == DT_F32))
        return linear_fp8(c, h, w, bias, r, layer, 1, NULL);
    Tensor *g = op_gelu(c, h);
    Tensor *y = linear_fp8(c, g, w, bias, r, layer, 0, NULL);
    tensor_release(g);
    return y;
}
