/* conv_bn_cudnn.c — the conv + batch-norm unit's convolutions as cuDNN fused
 * graphs (the math, the graphs and the search rule are in conv_bn_cudnn.h).
 *
 * One entry per (kind, shape, type) of a context: the search's verdict
 * (fused or separate) and, when fused, the plan and the descriptors it was
 * built from (alive as long as the plan). Calls after the first are a
 * lookup, the small kernels around the graph (zeroing the sums; scale and
 * bias from the batch norm's statistics; mean and m2 from the sums; the
 * filter gradient cast into its own type), and one cuDNN execution: all on
 * c->stream, capturable.
 */
#include "conv_bn_cudnn.h"

#include <stdlib.h>
#include <string.h>

#include "engine/settings.h"

#ifdef CTRAIN_CUDA
#include <stdint.h>
#endif

int conv_bn_cudnn_wanted(void)
{
    static int wanted = -1;
    if (wanted < 0) wanted = setting_choice(SET_CONV_BN) == 2;   /* "separate|unit|fused" */
    return wanted;
}

#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>

#include "engine/error.h"
#include "engine/kernels.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "batchnorm.h"
#include "cudnn_graph.h"
#include "plan_store.h"

/* tensor uids: the variant pack's, then virtual ones */
enum {
    U_X = 1, U_W, U_Y, U_SUM, U_SQ, U_S, U_B, U_DY, U_MEAN, U_INV, U_GAMMA, U_BETA, U_EQ1,
    U_EQ2, U_EQ3, U_V = 100
};
#define CS_PARTS 48
#define CS_OPS 12
#define CS_PACK 16   /* tensors in a variant pack at most */

typedef ConvBnKind CsKind;
#define CS_KINDS CONV_BN_KINDS

static const char *const kind_names[CS_KINDS] = {
    "conv + statistics", "batch norm + ReLU + conv", "batch norm + ReLU + conv + statistics",
    "batch norm + ReLU + filter gradient", "data gradient + ReLU mask + batch-norm sums"};

/* the kinds whose prologue is relu(y s + b) */
static int kind_prologue(CsKind k)
{
    return k == CONV_BN_BNRELU_FPROP || k == CONV_BN_BNRELU_FPROP_STATS ||
           k == CONV_BN_BNRELU_WGRAD;
}
/* the kinds that read s and b */
static int kind_bn(CsKind k) { return kind_prologue(k) || k == CONV_BN_DGRAD_RELU; }
static int kind_stats(CsKind k)
{
    return k == CONV_BN_CONV_STATS || k == CONV_BN_BNRELU_FPROP_STATS;
}

typedef struct {
    CsKind kind;
    Conv2dShape s;
    DType dt;
    int form;                /* the graph form the plan runs (graph_build) */
    int forced;              /* searched under conv_bn_cudnn_use(c, 1) */
    int only_form;           /* searched under conv_bn_cudnn_only_form (-1: every form) */
    int fused;               /* 1: plan below; 0: the separate way */
    CgPlan plan;
    CgDesc parts[CS_PARTS];  /* tensors, operations and their descriptors, the graph */
    int nparts;
} CsEntry;

typedef struct {
    CsEntry *e;
    int n, cap;
    int use;                 /* -1: CTRAIN_CONV_BN; 0 never; 1 always where cuDNN takes it */
    int only_form;           /* -1: every form; else searches try that form alone (tests) */
    PlanStore *store;        /* the verdicts kept on disk (NULL: not opened yet) */
    int searched, loaded;    /* entries a search decided / a kept verdict gave */
} CsCache;

/* One call's buffers. in: the convolution's input (x, or the batch norm's
 * input y); out: y or z (fprop), the filter gradient in dt (wgrad), or g
 * (the data gradient, whose dz is the convolution's output gradient and
 * whose mean / m2 are its sums sg / sgx). */
typedef struct {
    const void *in, *w, *dz;
    void *out;
    float *mean, *m2;                    /* the sums' moments (stats kinds) */
    const float *ms, *gamma, *beta;      /* batch norm: (mean, invstd), gamma, beta */
} CsArgs;

static void entry_free(CsEntry *e)
{
    if (e->plan.plan) cg_plan_free(&e->plan);
    for (int i = e->nparts - 1; i >= 0; i--) cg_destroy(e->parts[i]);
    e->nparts = 0;
}

static void cs_release(Ctx *c, void *obj)
{
    (void)c;
    CsCache *cc = (CsCache *)obj;
    for (int i = 0; i < cc->n; i++) entry_free(&cc->e[i]);
    plan_store_close(cc->store);
    free(cc->e);
    free(cc);
}

static const CtxCacheKind cs_kind = {"cuDNN conv + batch-norm graphs", cs_release};

static CsCache *cs_for(Ctx *c)
{
    CsCache *cc = (CsCache *)ctx_cache_get(c, &cs_kind);
    if (!cc) {
        cc = calloc(1, sizeof *cc);
        CT_ASSERT(cc != NULL, "conv_bn_cudnn: out of host memory for its plans");
        cc->use = -1;
        cc->only_form = -1;
        ctx_cache_set(c, &cs_kind, cc);
    }
    return cc;
}

void conv_bn_cudnn_use(Ctx *c, int on) { cs_for(c)->use = on; }

void conv_bn_cudnn_only_form(Ctx *c, int form)
{
    CT_ASSERT(form >= -1 && form <= 2, "conv_bn_cudnn_only_form: form %d (-1, 0, 1 or 2)", form);
    cs_for(c)->only_form = form;
}

int conv_bn_cudnn_last_form(Ctx *c, ConvBnKind kind)
{
    CsCache *cc = cs_for(c);
    for (int i = cc->n - 1; i >= 0; i--)
        if (cc->e[i].kind == kind) return cc->e[i].fused ? cc->e[i].form : -1;
    return -1;
}

void conv_bn_cudnn_counts(Ctx *c, int *fused, int *separate, int *fused_by_kind)
{
    CsCache *cc = cs_for(c);
    int f = 0;
    if (fused_by_kind) memset(fused_by_kind, 0, CONV_BN_KINDS * sizeof(int));
    for (int i = 0; i < cc->n; i++) {
        f += cc->e[i].fused;
        if (fused_by_kind) fused_by_kind[cc->e[i].kind] += cc->e[i].fused;
    }
    if (fused) *fused = f;
    if (separate) *separate = cc->n - f;
}

void conv_bn_cudnn_origins(Ctx *c, int *searched, int *loaded)
{
    CsCache *cc = cs_for(c);
    if (searched) *searched = cc->searched;
    if (loaded) *loaded = cc->loaded;
}

int conv_bn_cudnn_enabled(Ctx *c, DType dt)
{
    CsCache *cc = cs_for(c);
    int use = cc->use >= 0 ? cc->use : conv_bn_cudnn_wanted();
    return use && (dt == DT_F16 || dt == DT_BF16);
}

/* ---- the graphs ---- */

static CgDesc part(CsEntry *e, CgDesc d)
{
    if (d) {
        CT_ASSERT(e->nparts < CS_PARTS, "conv_bn_cudnn: more than %d graph parts", CS_PARTS);
        e->parts[e->nparts++] = d;
    }
    return d;
}

/* An NHWC tensor in cuDNN's (N, C, H, W) order. */
static CgDesc nhwc(CsEntry *e, int64_t uid, cudnnDataType_t t, int n, int ch, int h, int w,
                   int virt)
{
    const int64_t d[4] = {n, ch, h, w}, st[4] = {(int64_t)h * w * ch, 1, (int64_t)w * ch, ch};
    return part(e, cg_tensor_try(uid, t, 4, d, st, 16, virt));
}

/* A per-channel vector [1, ch, 1, 1] of type t. */
static CgDesc chan(CsEntry *e, int64_t uid, int ch, cudnnDataType_t t)
{
    const int64_t d[4] = {1, ch, 1, 1}, st[4] = {ch, 1, ch, ch};
    return part(e, cg_tensor_try(uid, t, 4, d, st, 16, 0));
}

/* The building state of one graph: its operations, and the first part
 * cuDNN refused. */
typedef struct {
    CgDesc ops[CS_OPS];
    int n;
    const char *refused;
} Ops;

/* op, and the descriptor its maker returned through *desc (NULL: none):
 * read here, after the maker ran (an argument `pw` beside `&pw` in one call
 * could be read before it is set: C leaves the order open) */
static CgDesc add_op(CsEntry *e, Ops *o, CgDesc op, CgDesc *desc, const char *what)
{
    part(e, op);
    if (desc) part(e, *desc);
    if (!op && !o->refused) o->refused = what;
    if (op) {
        CT_ASSERT(o->n < CS_OPS, "conv_bn_cudnn: more than %d operations in a graph", CS_OPS);
        o->ops[o->n++] = op;
    }
    return op;
}

/* relu(y s + b) of the input [N, C, H, W] as a virtual tensor of type vt,
 * s and b and the steps between of type pt: the convolution's prologue */
static CgDesc prologue(CsEntry *e, Ops *o, cudnnDataType_t t, cudnnDataType_t vt,
                       cudnnDataType_t pt)
{
    const Conv2dShape *s = &e->s;
    CgDesc y = nhwc(e, U_X, t, s->N, s->C, s->H, s->W, 0);
    CgDesc sc = chan(e, U_S, s->C, pt), bi = chan(e, U_B, s->C, pt), pw = NULL;
    CgDesc v1 = nhwc(e, U_V + 1, pt, s->N, s->C, s->H, s->W, 1);
    CgDesc v2 = nhwc(e, U_V + 2, pt, s->N, s->C, s->H, s->W, 1);
    CgDesc a = nhwc(e, U_V + 3, vt, s->N, s->C, s->H, s->W, 1);
    if (!y || !sc || !bi || !v1 || !v2 || !a) {
        if (!o->refused) o->refused = "a tensor of the prologue";
        return NULL;
    }
    add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_MUL, y, sc, v1, &pw), &pw, "the scale");
    add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_ADD, v1, bi, v2, &pw), &pw, "the bias");
    add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_RELU_FWD, v2, NULL, a, &pw), &pw, "the ReLU");
    return o->refused ? NULL : a;
}

/* sum = reduce(v), sq = reduce(v * v) over N, P, Q (deterministic) */
static void reductions(CsEntry *e, Ops *o, CgDesc v)
{
    const Conv2dShape *s = &e->s;
    CgDesc sum = chan(e, U_SUM, s->K, CUDNN_DATA_FLOAT), sq = chan(e, U_SQ, s->K, CUDNN_DATA_FLOAT);
    CgDesc red = NULL, pw = NULL;
    CgDesc v2 = nhwc(e, U_V + 11, CUDNN_DATA_FLOAT, s->N, s->K, s->P, s->Q, 1);
    if (!sum || !sq || !v2) {
        if (!o->refused) o->refused = "a tensor of the statistics";
        return;
    }
    const char *det = "a deterministic reduction (cuDNN 9.11 or later)";
    add_op(e, o, cg_reduction_op(v, sum, 2, &red), &red, det);
    add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_MUL, v, v, v2, &pw), &pw, "the square");
    add_op(e, o, cg_reduction_op(v2, sq, 2, &red), &red, det);
}

/* Graph forms (cuDNN documents no rule that decides between them: each is
 * searched, the fastest kept):
 *   form 0: the statistics reduced from the convolution's f32 result (a
 *           virtual tensor stored by an identity); the prologue's
 *           activation f32
 *   form 1: the statistics reduced from the stored output; the prologue's
 *           activation in the storage type
 *   form 2: the forms of cuDNN's pre-compiled batch-norm fusion patterns,
 *           f16 only except the plain convolution + GenStats (documented
 *           for bf16 too): the prologue all in f16, s and b too, and the
 *           statistics by a GenStats operation on the stored output
 *           ("ConvBNfprop"; its filter gradient "ConvBNwgrad", the one
 *           documented filter-gradient fusion on sm_90: the runtime-fusion
 *           engines take no prologue there); the data gradient as
 *           "DgradDreluBNBwdWeight" (batch norm's weight-gradient operation
 *           in the epilogue).
 * The runtime-fusion engines take at most one reduction in an epilogue, so
 * forms 0 and 1 of the kinds with two sums are expected to be refused; in
 * bf16 the prologue kinds with statistics and the data gradient have no
 * documented path. */
static int n_forms(CsKind k, DType dt)
{
    /* GenStats after a plain convolution is documented for bf16 too */
    return dt == DT_F16 || k == CONV_BN_CONV_STATS ? 3 : 2;
}

/* The data gradient's graph: da = conv^T(dz, w) (virtual f32) and g = da
 * where the forward's pre-activation is > 0, g stored, with sg = sum g and
 * sgx = sum g xhat per channel of y:
 *   forms 0, 1: pre = y s + b; g = relu_bwd(da, pre) (form 0: virtual f32,
 *               stored by an identity; form 1: stored as it is made); sg =
 *               reduce(g); sgx = reduce(g (y - mean) invstd)
 *   form 2:     cuDNN's "DgradDreluBNBwdWeight": pre = ((y - mean) invstd)
 *               gamma + beta; g = relu_bwd(da, pre) stored; batch norm's
 *               weight-gradient operation on (y, mean, invstd, gamma, g)
 *               gives sgx (dscale) and sg (dbias), and dx's coefficients
 *               (kept in tmp, unused: the dx pass is ours) */
static CgDesc dgrad_graph(Ctx *c, CsEntry *e, int form, Ops *o, cudnnStatus_t *st,
                          cudnnDataType_t t, CgDesc w, CgDesc conv)
{
    const Conv2dShape *s = &e->s;
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    const int N = s->N, C = s->C, H = s->H, W = s->W;
    CgDesc dz = nhwc(e, U_DY, t, N, s->K, s->P, s->Q, 0);
    CgDesc da = nhwc(e, U_V + 20, f, N, C, H, W, 1);
    CgDesc y = nhwc(e, U_X, t, N, C, H, W, 0);
    CgDesc mean = chan(e, U_MEAN, C, f), inv = chan(e, U_INV, C, f);
    CgDesc v1 = nhwc(e, U_V + 21, f, N, C, H, W, 1);
    CgDesc pre = nhwc(e, U_V + 22, f, N, C, H, W, 1);
    CgDesc gout = nhwc(e, U_Y, t, N, C, H, W, 0);
    CgDesc sg = chan(e, U_SUM, C, f), sgx = chan(e, U_SQ, C, f);
    if (!dz || !da || !y || !mean || !inv || !v1 || !pre || !gout || !sg || !sgx) {
        if (!o->refused) o->refused = "a tensor of the data gradient's graph";
        return NULL;
    }
    CgDesc pw = NULL, red = NULL;
    add_op(e, o, cg_conv_op_try(CG_DGRAD, conv, da, w, dz, 1.0f, 0.0f), NULL,
           "the data gradient");
    if (form == 2) {
        CgDesc gm = chan(e, U_GAMMA, C, f), bt = chan(e, U_BETA, C, f);
        CgDesc v2 = nhwc(e, U_V + 26, f, N, C, H, W, 1);
        CgDesc v3 = nhwc(e, U_V + 27, f, N, C, H, W, 1);
        CgDesc q1 = chan(e, U_EQ1, C, f), q2 = chan(e, U_EQ2, C, f), q3 = chan(e, U_EQ3, C, f);
        if (!gm || !bt || !v2 || !v3 || !q1 || !q2 || !q3) {
            if (!o->refused) o->refused = "a tensor of the DgradDreluBNBwdWeight graph";
            return NULL;
        }
        add_op(e, o, cg_pointwise_op2(CUDNN_POINTWISE_ADD, y, mean, -1.0f, v1, &pw), &pw,
               "y - mean");
        add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_MUL, v1, inv, v2, &pw), &pw, "x invstd");
        add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_MUL, v2, gm, v3, &pw), &pw, "xhat gamma");
        add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_ADD, v3, bt, pre, &pw), &pw, "+ beta");
        add_op(e, o, cg_relu_bwd_op(da, pre, gout, &pw), &pw, "the ReLU's backward");
        add_op(e, o, cg_bn_bwd_weights_op(y, mean, inv, gm, gout, sgx, sg, q1, q2, q3), NULL,
               "batch norm's weight-gradient operation");
    } else {
        const char *det = "a deterministic reduction (cuDNN 9.11 or later)";
        CgDesc sc = chan(e, U_S, C, f), bi = chan(e, U_B, C, f);
        CgDesc g = form == 0 ? nhwc(e, U_V + 23, f, N, C, H, W, 1) : gout;
        CgDesc yc = nhwc(e, U_V + 24, f, N, C, H, W, 1);
        CgDesc xh = nhwc(e, U_V + 25, f, N, C, H, W, 1);
        CgDesc gx = nhwc(e, U_V + 28, f, N, C, H, W, 1);
        if (!sc || !bi || !g || !yc || !xh || !gx) {
            if (!o->refused) o->refused = "a tensor of the data gradient's graph";
            return NULL;
        }
        add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_MUL, y, sc, v1, &pw), &pw, "the scale");
        add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_ADD, v1, bi, pre, &pw), &pw, "the bias");
        add_op(e, o, cg_relu_bwd_op(da, pre, g, &pw), &pw, "the ReLU's backward");
        if (form == 0)
            add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_IDENTITY, g, NULL, gout, &pw), &pw,
                   "the identity that stores g");
        add_op(e, o, cg_reduction_op(g, sg, 2, &red), &red, det);
        add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_SUB, y, mean, yc, &pw), &pw, "y - mean");
        add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_MUL, yc, inv, xh, &pw), &pw, "xhat");
        add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_MUL, g, xh, gx, &pw), &pw, "g xhat");
        add_op(e, o, cg_reduction_op(gx, sgx, 2, &red), &red, det);
    }
    if (o->refused) return NULL;
    o->refused = "the graph";
    CgDesc gr = part(e, cg_graph(c->cudnn, o->ops, o->n, st));
    if (gr) o->refused = NULL;
    return gr;
}

/* e's graph in `form`: NULL when cuDNN refuses a part (o->refused names it)
 * or the graph (*st). */
static CgDesc graph_build(Ctx *c, CsEntry *e, int form, Ops *o, cudnnStatus_t *st)
{
    const Conv2dShape *s = &e->s;
    const cudnnDataType_t t = e->dt == DT_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    memset(o, 0, sizeof *o);
    const int64_t wd[4] = {s->K, s->C, s->R, s->S},
                  ws[4] = {(int64_t)s->R * s->S * s->C, 1, (int64_t)s->S * s->C, s->C};
    CgDesc w = part(e, cg_tensor_try(U_W, t, 4, wd, ws, 16, 0));
    const int64_t pad[2] = {s->pad_h, s->pad_w}, str[2] = {s->stride_h, s->stride_w},
                  dil[2] = {s->dil_h, s->dil_w};
    CgDesc conv = part(e, cg_conv_desc(2, pad, str, dil));
    if (e->kind == CONV_BN_DGRAD_RELU) {
        if (!w || !conv) {
            o->refused = "the filter";
            return NULL;
        }
        return dgrad_graph(c, e, form, o, st, t, w, conv);
    }
    CgDesc in = kind_prologue(e->kind)
                    ? prologue(e, o, t, form == 0 ? CUDNN_DATA_FLOAT : t,
                               form == 2 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT)
                    : nhwc(e, U_X, t, s->N, s->C, s->H, s->W, 0);
    if (!in || !w) {
        if (!o->refused) o->refused = "a tensor";
        return NULL;
    }
    if (e->kind == CONV_BN_BNRELU_WGRAD) {
        CgDesc dz = nhwc(e, U_DY, t, s->N, s->K, s->P, s->Q, 0);
        add_op(e, o, cg_conv_op_try(CG_WGRAD, conv, in, w, dz, 1.0f, 0.0f), NULL,
               "the filter gradient");
    } else {
        CgDesc y = nhwc(e, U_Y, t, s->N, s->K, s->P, s->Q, 0);
        int acc_form = kind_stats(e->kind) && form == 0;
        if (kind_stats(e->kind) && form == 2) {   /* GenStats on the stored output */
            add_op(e, o, cg_conv_op_try(CG_FPROP, conv, in, w, y, 1.0f, 0.0f), NULL,
                   "the convolution");
            CgDesc sum = chan(e, U_SUM, s->K, CUDNN_DATA_FLOAT);
            CgDesc sq = chan(e, U_SQ, s->K, CUDNN_DATA_FLOAT);
            add_op(e, o, cg_genstats_op(y, sum, sq), NULL, "GenStats");
            if (o->refused) return NULL;
            o->refused = "the graph";
            CgDesc gr = part(e, cg_graph(c->cudnn, o->ops, o->n, st));
            if (gr) o->refused = NULL;
            return gr;
        }
        CgDesc acc = acc_form ? nhwc(e, U_V + 10, CUDNN_DATA_FLOAT, s->N, s->K, s->P, s->Q, 1) : y;
        if (!y || !acc) {
            if (!o->refused) o->refused = "the output tensor";
            return NULL;
        }
        add_op(e, o, cg_conv_op_try(CG_FPROP, conv, in, w, acc, 1.0f, 0.0f), NULL,
               "the convolution");
        if (acc_form) {
            CgDesc pw = NULL;
            add_op(e, o, cg_pointwise_op(CUDNN_POINTWISE_IDENTITY, acc, NULL, y, &pw), &pw,
                   "the identity that stores the output");
        }
        if (kind_stats(e->kind)) reductions(e, o, acc);
    }
    if (o->refused) return NULL;
    o->refused = "the graph";
    CgDesc g = part(e, cg_graph(c->cudnn, o->ops, o->n, st));
    if (g) o->refused = NULL;
    return g;
}

/* ---- running ---- */

/* The temporaries of a fused run, each block 256-byte aligned: the sums of
 * the statistics kinds (sum at 0, sq at sq_off; room for max(K, C) each, K
 * used: the data gradient's sums go to the caller's buffers); the scale and
 * bias at sb_off (C floats each, the bias rup(C) after the scale; the data
 * gradient's form 2 keeps copies of gamma and beta there); the same in f16
 * for the prologue kinds' form 2 at half_off (C halves each); and the data
 * gradient's form 2's three dx coefficients at eq_off (C floats each,
 * unused: the dx pass is ours). */
static size_t rup(int n) { return ((size_t)n + 63) / 64 * 64; }
static size_t sq_off(const Conv2dShape *s) { return rup(s->K > s->C ? s->K : s->C); }
static size_t sb_off(const Conv2dShape *s) { return 2 * sq_off(s); }
static size_t half_off(const Conv2dShape *s) { return sb_off(s) + 2 * rup(s->C); }
static size_t eq_off(const Conv2dShape *s) { return half_off(s) + rup(s->C); }
static size_t tmp_floats(const Conv2dShape *s) { return eq_off(s) + 3 * rup(s->C); }

/* scale and bias from the batch norm's statistics, into tmp (and their f16
 * copy for form 2) */
static void scale_bias(Ctx *c, const CsEntry *e, const CsArgs *a, float *tmp)
{
    const Conv2dShape *s = &e->s;
    float *sc = tmp + sb_off(s);
    if (e->kind == CONV_BN_DGRAD_RELU && e->form == 2) {
        /* the pattern reads gamma and beta themselves: 16-byte aligned copies */
        CUDA_CHECK(cudaMemcpyAsync(sc, a->gamma, (size_t)s->C * sizeof(float),
                                   cudaMemcpyDeviceToDevice, c->stream));
        CUDA_CHECK(cudaMemcpyAsync(sc + rup(s->C), a->beta, (size_t)s->C * sizeof(float),
                                   cudaMemcpyDeviceToDevice, c->stream));
        return;
    }
    batchnorm_scale_bias_cuda(sc, sc + rup(s->C), a->ms, a->ms + s->C, a->gamma, a->beta,
                              (size_t)s->C, c->stream);
    if (kind_prologue(e->kind) && e->form == 2) {
        uint16_t *h = (uint16_t *)(tmp + half_off(s));
        cast_cuda(h, DT_F16, sc, DT_F32, (size_t)s->C, 0, c->stream);
        cast_cuda(h + rup(s->C), DT_F16, sc + rup(s->C), DT_F32, (size_t)s->C, 0, c->stream);
    }
}

static int variant(const CsEntry *e, const CsArgs *a, float *tmp, int64_t *uids, void **ptrs)
{
    int n = 0;
    float *sc = tmp + sb_off(&e->s), *bi = sc + rup(e->s.C);
    if (kind_prologue(e->kind) && e->form == 2) {   /* f16 scale and bias */
        uint16_t *h = (uint16_t *)(tmp + half_off(&e->s));
        sc = (float *)h;
        bi = (float *)(h + rup(e->s.C));
    }
#define PUT(u, p) (uids[n] = (u), ptrs[n] = (void *)(p), n++)
    if (e->kind == CONV_BN_DGRAD_RELU) {   /* in = y, out = g, mean/m2 = sg/sgx */
        PUT(U_DY, a->dz);
        PUT(U_W, a->w);
        PUT(U_X, a->in);
        PUT(U_MEAN, a->ms);
        PUT(U_INV, a->ms + e->s.C);
        PUT(U_Y, a->out);
        PUT(U_SUM, a->mean);
        PUT(U_SQ, a->m2);
        if (e->form == 2) {
            float *q = tmp + eq_off(&e->s);
            PUT(U_GAMMA, tmp + sb_off(&e->s));
            PUT(U_BETA, tmp + sb_off(&e->s) + rup(e->s.C));
            PUT(U_EQ1, q);
            PUT(U_EQ2, q + rup(e->s.C));
            PUT(U_EQ3, q + 2 * rup(e->s.C));
        } else {
            PUT(U_S, sc);
            PUT(U_B, bi);
        }
        return n;
    }
    PUT(U_X, a->in);
    if (kind_bn(e->kind)) {
        PUT(U_S, sc);
        PUT(U_B, bi);
    }
    if (e->kind == CONV_BN_BNRELU_WGRAD) {
        PUT(U_W, a->out);
        PUT(U_DY, a->dz);
    } else {
        PUT(U_W, a->w);
        PUT(U_Y, a->out);
    }
    if (kind_stats(e->kind)) {
        PUT(U_SUM, tmp);
        PUT(U_SQ, tmp + sq_off(&e->s));
    }
#undef PUT
    return n;
}

/* One fused run as the step runs it: scale and bias from the batch norm's
 * statistics, the sums zeroed (whether the reductions overwrite or add,
 * they start from zero), the graph, then (mean, m2) from the sums. */
static void fused_run(Ctx *c, const CsEntry *e, const CsArgs *a, float *tmp)
{
    const Conv2dShape *s = &e->s;
    if (kind_bn(e->kind)) scale_bias(c, e, a, tmp);
    if (kind_stats(e->kind))
        CUDA_CHECK(cudaMemsetAsync(tmp, 0, sb_off(s) * sizeof(float), c->stream));
    if (e->kind == CONV_BN_DGRAD_RELU) {
        CUDA_CHECK(cudaMemsetAsync(a->mean, 0, (size_t)s->C * sizeof(float), c->stream));
        CUDA_CHECK(cudaMemsetAsync(a->m2, 0, (size_t)s->C * sizeof(float), c->stream));
    }
    int64_t uids[CS_PACK];
    void *ptrs[CS_PACK];
    int n = variant(e, a, tmp, uids, ptrs);
    cg_execute(c, &e->plan, uids, ptrs, n);
    if (kind_stats(e->kind))
        batchnorm_moments_from_sums_cuda(a->mean, a->m2, tmp, tmp + sq_off(s),
                                         (size_t)s->N * s->P * s->Q, (size_t)s->K, c->stream);
}

static int run_kind(Ctx *c, CsKind kind, const CsArgs *a, DType dt, const Conv2dShape *s);

/* The separate way, as the unit runs it without fusion: the normalised
 * activation (bn kinds, into act), the convolution or its filter gradient
 * (their own plans), the moments pass (stats kinds). */
static void separate_run(Ctx *c, const CsEntry *e, const CsArgs *a, void *act, void *scratch,
                         size_t sb)
{
    const Conv2dShape *s = &e->s;
    const void *in = a->in;
    if (e->kind == CONV_BN_DGRAD_RELU) {
        /* da, then batch norm's sums over da and y with the mask (its
         * backward's partial and finish passes; the dx pass is the same
         * either way and not timed) */
        conv2d_backward_data_cuda(c, a->out, a->dz, a->w, e->dt, s, 0);
        batchnorm_backward_cuda(NULL, NULL, a->m2, a->mean, a->out, a->in, NULL, a->ms,
                                a->ms + s->C, a->gamma, a->beta, e->dt, 1, 2,
                                (size_t)s->N * s->H * s->W, (size_t)s->C, 0, 0, 0, scratch, sb,
                                c->stream);
        return;
    }
    if (kind_prologue(e->kind)) {
        batchnorm_forward_cuda(act, a->in, NULL, a->ms, a->ms + s->C, a->gamma, a->beta, e->dt,
                               1, (size_t)s->N * s->H * s->W, (size_t)s->C, c->stream);
        in = act;
    }
    if (e->kind == CONV_BN_BNRELU_WGRAD) {
        conv2d_backward_filter_cuda(c, a->out, e->dt, a->dz, in, e->dt, s, 0);
        return;
    }
    /* the unit without this graph still takes the fused convolution +
     * statistics where that won (searched before this entry: search) */
    if (e->kind == CONV_BN_BNRELU_FPROP_STATS) {
        CsArgs b = {in, a->w, NULL, a->out, a->mean, a->m2, NULL, NULL, NULL};
        if (run_kind(c, CONV_BN_CONV_STATS, &b, e->dt, s)) return;
    }
    conv2d_forward_cuda(c, a->out, in, a->w, e->dt, s);
    if (kind_stats(e->kind))
        batchnorm_moments_cuda(a->mean, a->m2, a->out, e->dt, (size_t)s->N * s->P * s->Q,
                               (size_t)s->K, scratch, sb, c->stream);
}

/* Both ways timed as the step runs them, interleaved: one untimed run of
 * each (the separate convolution's own search), then two rounds of three
 * runs each way; the smaller round of each. */
static void time_both(Ctx *c, const CsEntry *e, const CsArgs *a, float *fused_ms, float *sep_ms)
{
    const Conv2dShape *s = &e->s;
    size_t M = (size_t)s->N * s->P * s->Q, Min = (size_t)s->N * s->H * s->W;
    size_t sb = e->kind == CONV_BN_DGRAD_RELU ? batchnorm_scratch_bytes(Min, (size_t)s->C)
                : kind_stats(e->kind)      ? batchnorm_scratch_bytes(M, (size_t)s->K)
                                           : 0;
    size_t act_bytes = kind_prologue(e->kind) ? Min * s->C * dtype_size(e->dt) : 0;
    void *scratch = sb ? mem_alloc(c, sb) : NULL, *act = act_bytes ? mem_alloc(c, act_bytes) : NULL;
    float *tmp = mem_alloc(c, tmp_floats(s) * sizeof(float));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    separate_run(c, e, a, act, scratch, sb);
    fused_run(c, e, a, tmp);
    *fused_ms = *sep_ms = -1.0f;
    for (int round = 0; round < 2; round++)
        for (int way = 0; way < 2; way++) {
            CUDA_CHECK(cudaEventRecord(e0, c->stream));
            for (int i = 0; i < 3; i++) {
                if (way)
                    fused_run(c, e, a, tmp);
                else
                    separate_run(c, e, a, act, scratch, sb);
            }
            CUDA_CHECK(cudaEventRecord(e1, c->stream));
            CUDA_CHECK(cudaEventSynchronize(e1));
            float ms = 0.0f;
            CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
            float *best = way ? fused_ms : sep_ms;
            if (*best < 0.0f || ms / 3.0f < *best) *best = ms / 3.0f;
        }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    mem_free(c, tmp, tmp_floats(s) * sizeof(float));
    if (act) mem_free(c, act, act_bytes);
    if (scratch) mem_free(c, scratch, sb);
}

/* ---- verdicts kept on disk (ops/plan_store.h, family "convbn") ---- */

/* The version of the search's rules (the forms, the 3% margin, the
 * numerical rule): raise it when they change. */
#define CONV_BN_SEARCH_RULES 2

static PlanStore *store_for(CsCache *cc)
{
    if (!cc->store) {
        char id[400];
        conv2d_cuda_store_identity(id, sizeof id);
        cc->store = plan_store_open_default("convbn", id, "fused convolution forms");
    }
    return cc->store;
}

/* The key: the kind, the whole shape, the type, forced, the forms searched
 * (only_form), and the search's rules (its workspace limit as the settings
 * give it, the candidates, the settings that change the separate way's
 * convolutions, the rules' version; the card and the libraries are the
 * store's identity). */
static void key_text(CsKind kind, const Conv2dShape *s, DType dt, int forced, int only_form,
                     char *buf, size_t n)
{
    size_t ws = setting_size(SET_CONV_SEARCH_WS_MB);
    if (ws > CONV_BN_MAX_WS) ws = CONV_BN_MAX_WS;
    snprintf(buf, n,
             "kind%d N%d H%d W%d C%d K%d R%d S%d P%d Q%d stride%d,%d pad%d,%d dil%d,%d %s "
             "forced=%d forms=%d wsmax=%zuM cand=%d convengines=%d nondet=%d rules=%d",
             (int)kind, s->N, s->H, s->W, s->C, s->K, s->R, s->S, s->P, s->Q, s->stride_h,
             s->stride_w, s->pad_h, s->pad_w, s->dil_h, s->dil_w, dtype_name(dt), forced,
             only_form, ws >> 20, CONV_BN_CANDIDATES, setting_choice(SET_CONV_ENGINES),
             setting_switch(SET_CONV_NONDETERMINISTIC), CONV_BN_SEARCH_RULES);
}

/* A verdict as text: "separate", or "fused form=F engine=E knobs=..." */
static void keep_verdict(CsCache *cc, const CsEntry *e)
{
    char key[PLAN_STORE_KEY_MAX], value[PLAN_STORE_VALUE_MAX];
    key_text(e->kind, &e->s, e->dt, e->forced, e->only_form, key, sizeof key);
    if (!e->fused) {
        plan_store_put(store_for(cc), key, "separate");
        return;
    }
    int w = snprintf(value, sizeof value, "fused form=%d engine=%lld knobs=", e->form,
                     (long long)e->plan.engine);
    if (w <= 0 || (size_t)w >= sizeof value ||
        plan_store_pairs_text((const int64_t(*)[2])e->plan.knobs, e->plan.nknobs, value + w,
                              sizeof value - (size_t)w) != 0 ||
        plan_store_put(store_for(cc), key, value) < 0)
        LOG_D("conv_bn_cudnn: the fused verdict for %s is not kept (its knobs could not be "
              "written down)", key);
}

/* An entry from a kept verdict: 1 with e set (a fused plan built from the
 * kept engine and knobs, compiled now, not timed), 0 when there is none or
 * cuDNN or the rule refuses it now (e holds nothing: search). */
static int load_verdict(Ctx *c, CsCache *cc, CsEntry *e, const CgRule *rule)
{
    char key[PLAN_STORE_KEY_MAX];
    key_text(e->kind, &e->s, e->dt, e->forced, e->only_form, key, sizeof key);
    const char *v = plan_store_get(store_for(cc), key);
    if (!v) return 0;
    if (strcmp(v, "separate") == 0) {
        e->fused = 0;
        return 1;
    }
    int form = -1, used = 0;
    long long engine = -1;
    char knobs[PLAN_STORE_VALUE_MAX];   /* %511s below: PLAN_STORE_VALUE_MAX - 1 */
    _Static_assert(PLAN_STORE_VALUE_MAX == 512, "the sscanf width below follows the value size");
    int64_t kv[CG_MAX_KNOBS][2];
    if (sscanf(v, "fused form=%d engine=%lld knobs=%511s%n", &form, &engine, knobs, &used) != 3 ||
        v[used] != '\0' || form < 0 || form >= n_forms(e->kind, e->dt) || engine < 0)
        return 0;
    int nk = plan_store_pairs_parse(knobs, kv, CG_MAX_KNOBS);
    if (nk < 0) return 0;
    Ops o;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    e->form = form;
    CgDesc g = graph_build(c, e, form, &o, &st);
    if (!g || !cg_plan_for_engine(c, g, rule, engine, (const int64_t(*)[2])kv, nk, &e->plan)) {
        LOG_D("conv_bn_cudnn: the kept engine %lld for %s is refused now: searched again",
              engine, key);
        entry_free(e);
        e->form = 0;
        return 0;
    }
    e->fused = 1;
    return 1;
}

/* The first call of a kind, shape and type: build and search every form,
 * keep the fastest, time it against the separate way, decide. */
static CsEntry *search(Ctx *c, CsCache *cc, CsKind kind, const CsArgs *a, DType dt,
                       const Conv2dShape *s, int forced)
{
    char key0[PLAN_STORE_KEY_MAX];
    key_text(kind, s, dt, forced, cc->only_form, key0, sizeof key0);
    if (kind == CONV_BN_BNRELU_FPROP_STATS && !plan_store_get(store_for(cc), key0)) {
        /* the separate way's own fused convolution + statistics decided
         * first, while no entry of this search is held (a search appends);
         * not needed when this kind's verdict is kept (no timing) */
        size_t act_bytes = (size_t)s->N * s->H * s->W * s->C * dtype_size(dt);
        void *act = mem_alloc(c, act_bytes);
        batchnorm_forward_cuda(act, a->in, NULL, a->ms, a->ms + s->C, a->gamma, a->beta, dt, 1,
                               (size_t)s->N * s->H * s->W, (size_t)s->C, c->stream);
        CsArgs b = {act, a->w, NULL, a->out, a->mean, a->m2, NULL, NULL, NULL};
        run_kind(c, CONV_BN_CONV_STATS, &b, dt, s);
        mem_free(c, act, act_bytes);
    }
    if (cc->n == cc->cap) {
        int cap = cc->cap ? 2 * cc->cap : 16;
        CsEntry *ne = realloc(cc->e, (size_t)cap * sizeof *ne);
        CT_ASSERT(ne != NULL, "conv_bn_cudnn: out of host memory for its plans");
        cc->e = ne;
        cc->cap = cap;
    }
    CsEntry *e = &cc->e[cc->n++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->s = *s;
    e->dt = dt;
    e->forced = forced;
    e->only_form = cc->only_form;
    char shape[200];
    snprintf(shape, sizeof shape, "%s, %s %dx%d/%d %d->%d at %dx%dx%d", kind_names[kind],
             dtype_name(dt), s->R, s->S, s->stride_h, s->C, s->K, s->N, s->H, s->W);
    CgRule rule = {0};
    rule.forbid_notes = CG_NOTE(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) |
                        CG_NOTE(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
    rule.runtime_compile = 1;
    rule.max_candidates = CONV_BN_CANDIDATES;
    rule.ws_limit = conv2d_cuda_search_ws_bytes(c);
    if (rule.ws_limit > CONV_BN_MAX_WS) rule.ws_limit = CONV_BN_MAX_WS;
    if (load_verdict(c, cc, e, &rule)) {
        LOG_D("%s: %s, as an earlier run on this card found", shape,
              e->fused ? "fused" : "separate");
        cc->loaded++;
        return e;
    }
    cc->searched++;
    float *tmp = mem_alloc(c, tmp_floats(s) * sizeof(float));
    int ok = 0, engine_failed = 0;
    float best_ms = 0.0f;
    for (int form = 0; form < n_forms(kind, dt); form++) {
        if (e->only_form >= 0 && form != e->only_form) continue;
        CsEntry cand;
        memset(&cand, 0, sizeof cand);
        cand.kind = kind;
        cand.s = *s;
        cand.dt = dt;
        cand.form = form;
        cand.forced = forced;
        cand.only_form = e->only_form;
        if (kind_bn(kind)) scale_bias(c, &cand, a, tmp);   /* the candidates' inputs */
        int64_t uids[CS_PACK];
        void *ptrs[CS_PACK];
        int nv = variant(&cand, a, tmp, uids, ptrs), got = 0;
        cand.plan.over_ws = cand.plan.run_failed = 0;
        Ops o;
        cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
        CgDesc g = graph_build(c, &cand, form, &o, &st);
        if (g) got = cg_search(c, g, &rule, uids, ptrs, nv, &cand.plan);
        /* candidates dropped for lack of workspace, or failed runs, in any
         * form: the verdict is not kept (memory pressure may explain them) */
        engine_failed |= cand.plan.over_ws > 0 || cand.plan.run_failed > 0;
        if (cand.plan.dropped_notes)
            LOG_I("%s: form %d: %d candidates with a forbidden note (0x%x of the CG_NOTE bits)",
                  shape, form, cand.plan.dropped_notes, (unsigned)cand.plan.notes_seen);
        if (!got) {
            if (!g)
                LOG_I("%s: form %d: cuDNN refuses (%s)", shape, form,
                      st != CUDNN_STATUS_SUCCESS ? ct_cudnn_status_string(st) : o.refused);
            else
                LOG_I("%s: form %d: no engine ran it (%d over the workspace limit, %d failed "
                      "runs)", shape, form, cand.plan.over_ws, cand.plan.run_failed);
            entry_free(&cand);
            continue;
        }
        LOG_I("%s: form %d: %.3f ms (engine %lld of %d candidates)", shape, form,
              (double)cand.plan.ms, (long long)cand.plan.engine, cand.plan.tried);
        if (ok && cand.plan.ms >= best_ms) {
            entry_free(&cand);
            continue;
        }
        entry_free(e);
        *e = cand;   /* the plan and its parts now belong to the entry */
        best_ms = cand.plan.ms;
        ok = 1;
    }
    mem_free(c, tmp, tmp_floats(s) * sizeof(float));
    if (!ok) {
        LOG_I("%s: runs as separate kernels", shape);
        /* no engine for lack of workspace (memory pressure) or a failed
         * run is not kept: searched again next run */
        if (!engine_failed) keep_verdict(cc, e);
        return e;
    }
    /* timed on a copy, the entry found again by its index after: a guard
     * (time_both only looks entries up; the pre-warm above made the one
     * the separate way of the statistics kind needs) */
    int idx = (int)(e - cc->e);
    CsEntry timed = *e;
    float fused_ms, sep_ms;
    time_both(c, &timed, a, &fused_ms, &sep_ms);
    e = &cc->e[idx];
    e->fused = forced || fused_ms < 0.97f * sep_ms;
    LOG_I("%s: fused %.3f ms (form %d) against %.3f ms separate: %s", shape, (double)fused_ms,
          e->form, (double)sep_ms, e->fused ? "fused" : "separate");
    if (!engine_failed) keep_verdict(cc, e);   /* a form dropped for memory may come back */
    if (!e->fused) entry_free(e);
    return e;
}

/* The entry of (kind, shape, type) under c's present choices, or NULL when
 * none was searched or kept yet. */
static CsEntry *find_entry(CsCache *cc, CsKind kind, DType dt, const Conv2dShape *s)
{
    int forced = cc->use == 1;
    for (int i = 0; i < cc->n; i++)
        if (cc->e[i].kind == kind && cc->e[i].dt == dt && cc->e[i].forced == forced &&
            cc->e[i].only_form == cc->only_form && memcmp(&cc->e[i].s, s, sizeof *s) == 0)
            return &cc->e[i];
    return NULL;
}

/* Run kind on a fused plan when there is one (searching on the first call):
 * 1 when it ran, 0 when the caller runs the separate way. */
static int run_kind(Ctx *c, CsKind kind, const CsArgs *a, DType dt, const Conv2dShape *s)
{
    CsCache *cc = cs_for(c);
    if (!conv_bn_cudnn_enabled(c, dt)) return 0;
    if (((uintptr_t)a->in | (uintptr_t)a->out | (uintptr_t)a->w | (uintptr_t)a->dz) & 15u)
        return 0;
    if ((size_t)s->N * s->H * s->W * s->C > 0x7fffffffu ||
        (size_t)s->N * s->P * s->Q * s->K > 0x7fffffffu)
        return 0;
    int forced = cc->use == 1;
    CsEntry *e = find_entry(cc, kind, dt, s);
    if (!e) e = search(c, cc, kind, a, dt, s, forced);
    if (!e->fused) return 0;
    float *tmp = mem_alloc(c, tmp_floats(s) * sizeof(float));
    fused_run(c, e, a, tmp);
    mem_free(c, tmp, tmp_floats(s) * sizeof(float));
    return 1;
}

int conv_bn_cudnn_conv_stats(Ctx *c, void *y, float *mean, float *m2, const void *x,
                             const void *w, DType dt, const Conv2dShape *s)
{
    if (!mean || !m2) return 0;
    CsArgs a = {x, w, NULL, y, mean, m2, NULL, NULL, NULL};
    return run_kind(c, CONV_BN_CONV_STATS, &a, dt, s);
}

int conv_bn_cudnn_bnrelu_fprop(Ctx *c, void *z, float *mean, float *m2, const void *y,
                               const float *ms, const float *gamma, const float *beta,
                               const void *w, DType dt, const Conv2dShape *s)
{
    if (!mean != !m2 || !ms) return 0;
    CsArgs a = {y, w, NULL, z, mean, m2, ms, gamma, beta};
    return run_kind(c, mean ? CONV_BN_BNRELU_FPROP_STATS : CONV_BN_BNRELU_FPROP, &a, dt, s);
}

int conv_bn_cudnn_dgrad_relu(Ctx *c, void *g, float *sg, float *sgx, const void *dz,
                             const void *w, const void *y, const float *ms, const float *gamma,
                             const float *beta, DType dt, const Conv2dShape *s)
{
    if (!sg || !sgx || !ms || !gamma || !beta) return 0;   /* form 2 copies gamma and beta */
    if (((uintptr_t)sg | (uintptr_t)sgx | (uintptr_t)ms | (uintptr_t)(ms + s->C)) & 15u) return 0;
    CsArgs a = {y, w, dz, g, sg, sgx, ms, gamma, beta};
    return run_kind(c, CONV_BN_DGRAD_RELU, &a, dt, s);
}

int conv_bn_cudnn_bnrelu_wgrad(Ctx *c, void *dw, DType tdw, int accum, const void *y,
                               const float *ms, const float *gamma, const float *beta,
                               const void *dz, DType dt, const Conv2dShape *s)
{
    if (!conv_bn_cudnn_enabled(c, dt)) return 0;
    const CsEntry *known = find_entry(cs_for(c), CONV_BN_BNRELU_WGRAD, dt, s);
    if (known && !known->fused) return 0;   /* no temporary for a shape that runs separately */
    size_t n = (size_t)s->K * s->R * s->S * s->C, bytes = n * dtype_size(dt);
    void *tmp = mem_alloc(c, bytes);
    CsArgs a = {y, NULL, dz, tmp, NULL, NULL, ms, gamma, beta};
    int ran = run_kind(c, CONV_BN_BNRELU_WGRAD, &a, dt, s);
    if (ran) cast_cuda(dw, tdw, tmp, dt, n, accum, c->stream);
    mem_free(c, tmp, bytes);
    return ran;
}
#endif
